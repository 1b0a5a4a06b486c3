"""Reading a study back: agreement (Krippendorff's alpha), progress, live results and the exports `vistkit meta`
reads (raw rankings, VHED-layout pairs, Likert tables) plus JSON lines and a task list for crowdsourcing sites.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.errors import InputError
from vistkit.studio import db

EXPORT_FORMATS = ("rankings", "pairs", "likert", "jsonl", "tasks")


@dataclass
class Judgement:
    id: int
    annotator: str
    unit_id: int
    item_key: str
    photo_ids: list[str]
    is_gold: bool
    unit_story_ids: list[int]
    order: list[int]
    answer: dict[str, Any]
    gold_passed: bool | None
    seconds: float | None
    claimed_at: float | None
    created_at: float


@dataclass
class StudyData:
    settings: dict[str, Any]
    stories: dict[int, dict[str, Any]]
    judgements: list[Judgement]
    n_units: int
    n_gold_units: int
    annotators: list[str]
    units: list[dict[str, Any]]


def iso(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def load(st: db.Study) -> StudyData:
    """Everything needed for analysis and export, in submission order."""
    from sqlalchemy import func, select

    j, a, u, i, an = db.judgements, db.assignments, db.units, db.items, db.annotators
    with st.read() as conn:
        rows = conn.execute(
            select(
                j.c.id,
                an.c.name,
                j.c.unit_id,
                i.c.key,
                i.c.photo_ids,
                u.c.is_gold,
                u.c.story_ids,
                a.c.story_order,
                j.c.answer,
                j.c.gold_passed,
                j.c.seconds,
                a.c.claimed_at,
                j.c.created_at,
            )
            .join(a, a.c.id == j.c.assignment_id)
            .join(u, u.c.id == j.c.unit_id)
            .join(i, i.c.id == u.c.item_id)
            .join(an, an.c.id == j.c.annotator_id)
            .order_by(j.c.id)
        ).all()
        stories = {
            r.id: {
                "system": r.system,
                "story_id": r.story_id,
                "text": r.text,
                "gold_role": r.gold_role,
                "item_id": r.item_id,
            }
            for r in conn.execute(select(db.stories)).all()
        }
        unit_rows = conn.execute(
            select(u.c.id, u.c.is_gold, i.c.key, func.count(j.c.id).label("done"))
            .join(i, i.c.id == u.c.item_id)
            .outerjoin(j, j.c.unit_id == u.c.id)
            .group_by(u.c.id, u.c.is_gold, i.c.key)
            .order_by(u.c.id)
        ).all()
        names = [r.name for r in conn.execute(select(an.c.name).order_by(an.c.id)).all()]
    judgements = [
        Judgement(
            id=r.id,
            annotator=r.name,
            unit_id=r.unit_id,
            item_key=r.key,
            photo_ids=json.loads(r.photo_ids),
            is_gold=bool(r.is_gold),
            unit_story_ids=json.loads(r.story_ids),
            order=json.loads(r.story_order),
            answer=json.loads(r.answer),
            gold_passed=r.gold_passed,
            seconds=r.seconds,
            claimed_at=r.claimed_at,
            created_at=r.created_at,
        )
        for r in rows
    ]
    units = [{"id": r.id, "item": r.key, "is_gold": bool(r.is_gold), "done": int(r.done)} for r in unit_rows]
    return StudyData(
        settings=dict(st.settings),
        stories=stories,
        judgements=judgements,
        n_units=len(units),
        n_gold_units=sum(1 for x in units if x["is_gold"]),
        annotators=names,
        units=units,
    )


# --------------------------------------------------------------------------------------------------- agreement
def krippendorff_alpha(ratings: Iterable[tuple[str, Any, float]], *, level: str = "ordinal") -> float | None:
    """Krippendorff's alpha (``krippendorff`` package) from ``(annotator, unit, value)`` triples; None when no
    unit has two values or the values do not vary."""
    import krippendorff

    triples = list(ratings)
    coders = sorted({c for c, _, _ in triples})
    unit_ids = sorted({u for _, u, _ in triples}, key=str)
    if len(coders) < 2 or not unit_ids:
        return None
    ci = {c: n for n, c in enumerate(coders)}
    ui = {u: n for n, u in enumerate(unit_ids)}
    data = np.full((len(coders), len(unit_ids)), np.nan)
    for c, u, v in triples:
        data[ci[c], ui[u]] = v
    if not (np.sum(~np.isnan(data), axis=0) >= 2).any():
        return None
    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None
    try:
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))  # type: ignore[arg-type]
    except (ValueError, ZeroDivisionError):
        return None


def agreement(data: StudyData) -> dict[str, float | None]:
    """Alpha over the non-gold judgements: ordinal on ranks (unit = one story in one item), on the pairwise
    choice (story 1 better / same / story 2 better) and per Likert statement."""
    task = data.settings["task"]
    js = [j for j in data.judgements if not j.is_gold]
    if task == "rank":
        triples = [(j.annotator, int(s), float(r)) for j in js for s, r in j.answer["ranks"].items()]
        return {"rank": krippendorff_alpha(triples)}
    if task == "pairwise":
        triples = [(j.annotator, j.unit_id, float(_pair_value(j))) for j in js]
        return {"preference": krippendorff_alpha(triples)}
    out = {}
    for aspect in data.settings["aspects"]:
        out[aspect] = krippendorff_alpha([(j.annotator, j.unit_id, float(j.answer["ratings"][aspect])) for j in js])
    return out


def _pair_value(j: Judgement) -> int:
    """+1: the unit's first story preferred, -1: the second, 0: same."""
    p = j.answer["preferred"]
    return 0 if p is None else (1 if p == j.unit_story_ids[0] else -1)


# --------------------------------------------------------------------------------------------------- summary
def _gold_rates(data: StudyData) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for j in data.judgements:
        if j.gold_passed is not None:
            out[j.annotator][0] += int(j.gold_passed)
            out[j.annotator][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def failed_gold(data: StudyData) -> set[str]:
    """Annotators whose gold pass rate is below the study's threshold."""
    threshold = float(data.settings.get("gold_pass", 0.8))
    return {a for a, (ok, n) in _gold_rates(data).items() if n and ok / n < threshold}


def summary(data: StudyData) -> dict[str, Any]:
    """Progress per unit and annotator, time per task, gold pass rates, agreement, live results, position bias."""
    task = data.settings["task"]
    per_item = int(data.settings["per_item"])
    per_annot: dict[str, list[Judgement]] = defaultdict(list)
    for j in data.judgements:
        per_annot[j.annotator].append(j)
    gold = _gold_rates(data)
    annot_rows = []
    for name in data.annotators:
        js = per_annot.get(name, [])
        secs = [j.seconds for j in js if j.seconds is not None]
        ok, n = gold.get(name, (0, 0))
        annot_rows.append(
            {
                "annotator": name,
                "done": len(js),
                "median_seconds": statistics.median(secs) if secs else None,
                "mean_seconds": statistics.fmean(secs) if secs else None,
                "gold_passed": ok,
                "gold_total": n,
                "gold_rate": ok / n if n else None,
                "last": iso(max((j.created_at for j in js), default=None)),
            }
        )
    ok_all = sum(v[0] for v in gold.values())
    n_all = sum(v[1] for v in gold.values())
    return {
        "study_id": data.settings["study_id"],
        "title": data.settings.get("title", ""),
        "task": task,
        "per_item": per_item,
        "units": data.n_units,
        "gold_units": data.n_gold_units,
        "judgements": len(data.judgements),
        "target": data.n_units * per_item,
        "complete_units": sum(1 for u in data.units if u["done"] >= per_item),
        "unit_progress": data.units,
        "annotators": annot_rows,
        "gold_pass_rate": ok_all / n_all if n_all else None,
        "gold_threshold": float(data.settings.get("gold_pass", 0.8)),
        "alpha": agreement(data),
        "results": results(data),
        "position_bias": position_bias(data),
    }


def results(data: StudyData) -> list[dict[str, Any]]:
    """Live results per system (non-gold judgements): mean rank (rank), win/tie/loss shares (pairwise), mean
    rating per statement (Likert)."""
    task = data.settings["task"]
    js = [j for j in data.judgements if not j.is_gold]
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for j in js:
        if task == "rank":
            for s, r in j.answer["ranks"].items():
                acc[data.stories[int(s)]["system"]]["mean rank"].append(float(r))
        elif task == "pairwise":
            for s in j.unit_story_ids:
                sysname = data.stories[s]["system"]
                p = j.answer["preferred"]
                acc[sysname]["win"].append(float(p == s))
                acc[sysname]["tie"].append(float(p is None))
                acc[sysname]["loss"].append(float(p is not None and p != s))
        else:
            sysname = data.stories[j.unit_story_ids[0]]["system"]
            for aspect, v in j.answer["ratings"].items():
                acc[sysname][aspect].append(float(v))
    out = []
    for sysname in sorted(acc):
        row: dict[str, Any] = {"system": sysname}
        n = 0
        for k, vals in acc[sysname].items():
            row[k] = statistics.fmean(vals)
            n = max(n, len(vals))
        row["n"] = n
        out.append(row)
    return out


def position_bias(data: StudyData) -> dict[str, float]:
    """Mean rank by display position (rank), share choosing the left/first story (pairwise); {} for Likert."""
    task = data.settings["task"]
    js = [j for j in data.judgements if not j.is_gold]
    if task == "rank":
        by_pos: dict[int, list[float]] = defaultdict(list)
        for j in js:
            for pos, sid in enumerate(j.order, start=1):
                by_pos[pos].append(float(j.answer["ranks"][str(sid)]))
        return {f"position {p}": statistics.fmean(v) for p, v in sorted(by_pos.items())}
    if task == "pairwise" and js:
        return {
            "chose A": sum(j.answer["choice"] == "A" for j in js) / len(js),
            "chose B": sum(j.answer["choice"] == "B" for j in js) / len(js),
            "same": sum(j.answer["choice"] == "same" for j in js) / len(js),
        }
    return {}


# --------------------------------------------------------------------------------------------------- export
def _img_seq(j: Judgement) -> str:
    return "-".join(j.photo_ids)


def _kept(data: StudyData, *, include_gold: bool, drop_failed_gold: bool) -> list[Judgement]:
    dropped = failed_gold(data) if drop_failed_gold else set()
    return [j for j in data.judgements if (include_gold or not j.is_gold) and j.annotator not in dropped]


def ranking_rows(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    """Raw rankings in the layout `vistkit.meta.human.read_rankings` reads, with the display position."""
    if data.settings["task"] != "rank":
        raise InputError("--format rankings needs a rank study; use pairs, likert or jsonl")
    rows = []
    for j in js:
        for sid in j.unit_story_ids:
            s = data.stories[sid]
            rows.append(
                {
                    "task": j.item_key,
                    "worker": j.annotator,
                    "story": s["system"],
                    "rank": j.answer["ranks"][str(sid)],
                    "system": s["system"],
                    "text": s["text"],
                    "story_id": s["story_id"],
                    "img_seq": _img_seq(j),
                    "position": j.order.index(sid) + 1,
                }
            )
    return rows


def study_pairs(data: StudyData, js: Sequence[Judgement]) -> list[Any]:
    """VHED-style `StoryPair`s: from rankings as VHED built them (`pairs_from_rankings`), or from pairwise
    choices (preferred story rank 1, the other 2, "same" 1.5 each; averaged over annotators; zero gaps dropped)."""
    from vistkit.meta.human import RankedStory, StoryPair, pairs_from_rankings, parse_img_seq

    task = data.settings["task"]
    if task == "rank":
        tasks: dict[str, dict[str, Any]] = {}
        for r in ranking_rows(data, js):
            t = tasks.setdefault(r["task"], {"stories": {}, "ranks": {}})
            t["stories"].setdefault(
                r["story"],
                RankedStory(
                    r["story"],
                    r["text"],
                    r["system"],
                    r["story_id"],
                    parse_img_seq(r["img_seq"]),  # as `vistkit meta rankings-to-pairs` reads the column
                ),
            )
            t["ranks"].setdefault(r["worker"], {})[r["story"]] = float(r["rank"])
        return pairs_from_rankings(tasks)
    if task != "pairwise":
        raise InputError("--format pairs needs a rank or pairwise study; export a Likert study with --format likert")
    by_unit: dict[int, list[Judgement]] = defaultdict(list)
    for j in js:
        by_unit[j.unit_id].append(j)
    pairs = []
    for unit_id, group in by_unit.items():
        s1, s2 = (data.stories[s] for s in group[0].unit_story_ids)
        r1 = [1.0 if _pair_value(j) > 0 else 2.0 if _pair_value(j) < 0 else 1.5 for j in group]
        r2 = [3.0 - x for x in r1]
        m1, m2 = float(np.mean(r1)), float(np.mean(r2))
        gap = m2 - m1
        if gap == 0:
            continue
        agree = sum(1 for x, y in zip(r1, r2, strict=True) if np.sign(y - x) == np.sign(gap))
        disagree = sum(1 for x, y in zip(r1, r2, strict=True) if np.sign(y - x) == -np.sign(gap))
        pairs.append(
            StoryPair(
                pair_id=f"{group[0].item_key}:{unit_id}",
                story_id=s1["story_id"],
                img_seq=tuple(group[0].photo_ids),
                text_1=s1["text"],
                text_2=s2["text"],
                system_1=s1["system"],
                system_2=s2["system"],
                gap=gap,
                agreement=max(agree, disagree),
                n_stories=2,
                avg_rank_1=m1 / 2,
                avg_rank_2=m2 / 2,
            )
        )
    return pairs


def likert_rows(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    """The Likert table `vistkit.meta.human.read_likert` reads: system, item, worker, one column per statement."""
    if data.settings["task"] != "likert":
        raise InputError("--format likert needs a Likert study; use rankings, pairs or jsonl")
    rows = []
    for j in js:
        s = data.stories[j.unit_story_ids[0]]
        rows.append(
            {
                "system": s["system"],
                "item": j.item_key,
                "worker": j.annotator,
                **{a: j.answer["ratings"][a] for a in data.settings["aspects"]},
                "text": s["text"],
                "story_id": s["story_id"],
                "img_seq": _img_seq(j),
            }
        )
    return rows


def jsonl_records(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    out = []
    for j in js:
        out.append(
            {
                "study_id": data.settings["study_id"],
                "task": data.settings["task"],
                "judgement": j.id,
                "annotator": j.annotator,
                "unit": j.unit_id,
                "item": j.item_key,
                "img_seq": j.photo_ids,
                "gold": j.is_gold,
                "gold_passed": j.gold_passed,
                "shown": [
                    {
                        "position": n,
                        "system": data.stories[s]["system"],
                        "story_id": data.stories[s]["story_id"],
                        "text": data.stories[s]["text"],
                    }
                    for n, s in enumerate(j.order, start=1)
                ],
                "answer": _readable_answer(data, j),
                "seconds": j.seconds,
                "started_at": iso(j.claimed_at),
                "submitted_at": iso(j.created_at),
            }
        )
    return out


def _readable_answer(data: StudyData, j: Judgement) -> dict[str, Any]:
    a = j.answer
    if "ranks" in a:
        return {"ranks": {data.stories[int(s)]["system"]: r for s, r in a["ranks"].items()}}
    if "choice" in a:
        p = a["preferred"]
        return {"choice": a["choice"], "preferred": None if p is None else data.stories[p]["system"]}
    return a


def task_rows(st: db.Study) -> list[dict[str, Any]]:
    """One row per unit (item, photos, stories in a fixed order): a task list for crowdsourcing platforms."""
    from sqlalchemy import select

    with st.read() as conn:
        units = conn.execute(
            select(db.units.c.id, db.units.c.story_ids, db.units.c.is_gold, db.items.c.key, db.items.c.photo_ids)
            .join(db.items, db.items.c.id == db.units.c.item_id)
            .order_by(db.units.c.id)
        ).all()
        texts = {r.id: r for r in conn.execute(select(db.stories)).all()}
    url = st.setting("photo_url")
    rows = []
    width = max((len(json.loads(u.story_ids)) for u in units), default=0)
    for u in units:
        ids = json.loads(u.story_ids)
        photos = json.loads(u.photo_ids)
        row: dict[str, Any] = {
            "unit": u.id,
            "item": u.key,
            "gold": int(bool(u.is_gold)),
            "img_seq": "-".join(photos),
            "photo_urls": " ".join(url.format(id=p) for p in photos) if url else "",
        }
        for n in range(width):
            row[f"story_{n + 1}"] = texts[ids[n]].text if n < len(ids) else ""
            row[f"system_{n + 1}"] = texts[ids[n]].system if n < len(ids) else ""
        rows.append(row)
    return rows


def _write_csv(rows: list[dict[str, Any]], path: Path | str, columns: Sequence[str]) -> None:
    from vistkit.data.output import write_csv_rows

    write_csv_rows(path, list(columns), [[r.get(c, "") for c in columns] for r in rows])


def export(
    st: db.Study,
    output: str | Path,
    *,
    fmt: str,
    include_gold: bool = False,
    drop_failed_gold: bool = False,
) -> dict[str, Any]:
    """Write one export file and its provenance beside it (``OUTPUT.provenance.json``); returns the provenance
    (``rows``: the rows, or pairs, written; ``judgements``: the judgements they come from).

    ``output`` ``-`` is standard output; no provenance file is written then (it is still returned)."""
    from vistkit import __version__

    if fmt not in EXPORT_FORMATS:
        raise InputError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    from vistkit.data.output import STDOUT, check_output

    to_stdout = str(output) == STDOUT
    out: Path | str = STDOUT if to_stdout else Path(output)
    if not to_stdout:  # before any work: not an input, not an existing file without --force, a folder that exists
        check_output(out)
        check_output(f"{out}.provenance.json")
    data = load(st)
    js = _kept(data, include_gold=include_gold, drop_failed_gold=drop_failed_gold)
    n = len(js)
    if fmt == "rankings":
        rows = ranking_rows(data, js)
        cols = ["task", "worker", "story", "rank", "system", "text", "story_id", "img_seq", "position"]
        if not rows:
            raise InputError("the study has no judgements to export yet")
        _write_csv(rows, out, cols)
        n = len(rows)  # one row per story of each judgement
    elif fmt == "pairs":
        from vistkit.meta.human import write_pairs

        pairs = study_pairs(data, js)
        if not pairs:
            raise InputError("no pairs to export yet (no judgements, or every pair is a tie)")
        write_pairs(pairs, out)
        n = len(pairs)
    elif fmt == "likert":
        rows = likert_rows(data, js)
        if not rows:
            raise InputError("the study has no judgements to export yet")
        _write_csv(rows, out, ["system", "item", "worker", *data.settings["aspects"], "text", "story_id", "img_seq"])
        n = len(rows)
    elif fmt == "jsonl":
        from vistkit.data.output import open_output

        with open_output(out) as fh:
            for rec in jsonl_records(data, js):
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    else:
        rows = task_rows(st)
        _write_csv(rows, out, list(rows[0]) if rows else ["unit"])
        n = len(rows)
    counts: dict[str, int] = defaultdict(int)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for j in js:
        counts[j.annotator] += 1
        first[j.annotator] = min(first.get(j.annotator, j.created_at), j.created_at)
        last[j.annotator] = max(last.get(j.annotator, j.created_at), j.created_at)
    prov = {
        "study_id": data.settings["study_id"],
        "title": data.settings.get("title", ""),
        "task": data.settings["task"],
        "format": fmt,
        "rows": n,
        "judgements": len(js),
        "include_gold": include_gold,
        "dropped_annotators": sorted(failed_gold(data)) if drop_failed_gold else [],
        "per_item": data.settings["per_item"],
        "aspects": data.settings.get("aspects") if data.settings["task"] == "likert" else None,
        "annotators": [
            {"name": a, "judgements": counts[a], "first": iso(first[a]), "last": iso(last[a])} for a in sorted(counts)
        ],
        "study_created_at": iso(data.settings.get("created_at")),
        "exported_at": iso(db.now()),
        "vistkit": __version__,
    }
    if not to_stdout:
        from vistkit.data.output import write_text

        write_text(f"{out}.provenance.json", json.dumps(prov, indent=2) + "\n")
    return prov
