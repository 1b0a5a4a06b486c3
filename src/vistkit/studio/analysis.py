"""Reading a study back: agreement (Krippendorff's alpha), progress, live results and the exports `vistkit meta`
reads (raw rankings, VHED-layout pairs, Likert tables) plus JSON lines and a task list for crowdsourcing sites.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from vistkit.errors import InputError
from vistkit.studio import LIKERT_STATEMENTS, db

EXPORT_FORMATS = ("rankings", "pairs", "likert", "jsonl", "tasks")


@dataclass
class Judgement:
    """One stored judgement with what it judged (unit, item, stories in display order) and its gold check."""

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
    """Everything an analysis of a study reads: settings, stories by id, judgements, units and annotators."""

    settings: dict[str, Any]
    stories: dict[int, dict[str, Any]]
    judgements: list[Judgement]
    n_units: int
    n_gold_units: int
    annotators: list[str]
    units: list[dict[str, Any]]


def iso(t: float | None) -> str:
    """A timestamp as an ISO 8601 UTC text (milliseconds), "" for None."""
    return "" if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _judgement_query() -> Any:
    """The judgements with what they judged, in submission order."""
    from sqlalchemy import select

    j, a, u, i, an = db.judgements, db.assignments, db.units, db.items, db.annotators
    return (
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
    )


def _stories(conn: Any) -> dict[int, dict[str, Any]]:
    from sqlalchemy import select

    keys = ("system", "story_id", "text", "gold_role", "item_id")
    return {r.id: {k: getattr(r, k) for k in keys} for r in conn.execute(select(db.stories)).all()}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_time(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _is_moment(v: Any) -> bool:
    """A time vistkit stores: seconds since 1970 (UTC) within the calendar `iso` writes (years 1 to 9999);
    milliseconds or microseconds since 1970 are past it."""
    return _is_time(v) and -62_135_596_800 <= v < 253_402_300_800


def _answer_problem(task: str, answer: Any, unit: list[int], aspects: Sequence[str]) -> str | None:
    """What is wrong with a stored answer of ``task`` for a unit of story ids ``unit`` (None: nothing)."""
    if not isinstance(answer, dict):
        return "is not a JSON object"
    if task == "rank":
        ranks = answer.get("ranks")
        if not isinstance(ranks, dict) or len(ranks) != len(unit) or not all(str(s) in ranks for s in unit):
            return f"does not rank the unit's stories {unit}"
        if not all(_is_int(r) for r in ranks.values()):
            return "holds a rank that is not a whole number"
        return None
    if task == "pairwise":
        if answer.get("choice") not in ("A", "B", "same") or "preferred" not in answer:
            return "is not a choice of A, B or same"
        if answer["preferred"] is not None and answer["preferred"] not in unit:
            return f"prefers story {answer['preferred']!r}, which is not in the unit {unit}"
        return None
    ratings = answer.get("ratings")
    if not isinstance(ratings, dict) or any(a not in ratings for a in aspects):
        return f"does not rate every statement ({', '.join(aspects)})"
    if any(k not in LIKERT_STATEMENTS or not _is_int(v) or not 1 <= v <= 5 for k, v in ratings.items()):
        return "holds a rating that is not a whole number from 1 to 5 of a known statement"
    return None


def _field(value: Any, name: str, what: Callable[[], str]) -> Any:
    """A JSON field of a row decoded; ``what`` (called only on failure) names it for `db.damaged`."""
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return db.loads(value, name, what())  # raises the one sentence


def _judgement(r: Any, name: str, settings: dict[str, Any], stories: dict[int, dict[str, Any]]) -> Judgement:
    """One judgement row decoded and checked; a row that is not what vistkit stores is `db.damaged`, naming it."""
    (jid, annotator, unit_id, key, raw_photos, is_gold, raw_unit, raw_order, raw_answer, gold_passed, seconds,
     claimed_at, created_at) = r  # fmt: skip
    photo_ids = _field(raw_photos, name, lambda: f"judgement {jid}: the photo ids of item {key!r}")
    if not isinstance(photo_ids, list) or not all(isinstance(p, str) for p in photo_ids):
        raise db.damaged(name, f"judgement {jid}: the photo ids of item {key!r} are not a list of texts")
    unit = _field(raw_unit, name, lambda: f"judgement {jid}: the story ids of unit {unit_id}")
    if not isinstance(unit, list) or not unit or not all(_is_int(s) and s in stories for s in unit):
        raise db.damaged(name, f"judgement {jid}: unit {unit_id} names stories the study does not hold ({raw_unit!r})")
    order = _field(raw_order, name, lambda: f"judgement {jid}: its story order")
    if not isinstance(order, list) or len(order) != len(unit) or set(map(str, order)) != set(map(str, unit)):
        raise db.damaged(name, f"judgement {jid}: its story order {raw_order!r} is not an order of the unit {unit}")
    answer = _field(raw_answer, name, lambda: f"judgement {jid}: its answer")
    problem = _answer_problem(settings["task"], answer, unit, settings.get("aspects", []))
    if problem is not None:
        raise db.damaged(name, f"judgement {jid}: its answer {problem}")
    if not (seconds is None or _is_time(seconds)):
        raise db.damaged(name, f"judgement {jid}: its time spent ({seconds!r}) is not a number")
    for what, t in (("submission time", created_at), ("start time", claimed_at)):
        if not ((t is None and what == "start time") or _is_moment(t)):
            raise db.damaged(name, f"judgement {jid}: its {what} ({t!r}) is not a time in seconds since 1970")
    return Judgement(
        id=jid,
        annotator=annotator,
        unit_id=unit_id,
        item_key=key,
        photo_ids=photo_ids,
        is_gold=bool(is_gold),
        unit_story_ids=unit,
        order=order,
        answer=answer,
        gold_passed=None if gold_passed is None else bool(gold_passed),
        seconds=seconds,
        claimed_at=claimed_at,
        created_at=created_at,
    )


def iter_judgements(st: db.Study, conn: Any, stories: dict[int, dict[str, Any]]) -> Iterator[Judgement]:
    """The study's judgements one at a time (read in batches, never all at once), in submission order, decoded and
    checked (`_judgement`)."""
    settings = st.settings
    for r in conn.execute(_judgement_query().execution_options(yield_per=2000)):
        yield _judgement(r, st.name, settings, stories)


def load(st: db.Study) -> StudyData:
    """Everything needed for analysis and export, in submission order."""
    from sqlalchemy import func, select

    j, u, i, an = db.judgements, db.units, db.items, db.annotators
    with st.read() as conn:
        # read in this snapshot, not cached since the server started: `studio invite` in another process changes
        # the unsent invites the admin page names
        study_settings = st.read_settings(conn)
        stories = _stories(conn)
        judgements = list(iter_judgements(st, conn, stories))
        unit_rows = conn.execute(
            select(u.c.id, u.c.is_gold, i.c.key, func.count(j.c.id).label("done"))
            .join(i, i.c.id == u.c.item_id)
            .outerjoin(j, j.c.unit_id == u.c.id)
            .group_by(u.c.id, u.c.is_gold, i.c.key)
            .order_by(u.c.id)
        ).all()
        names = [r.name for r in conn.execute(select(an.c.name).order_by(an.c.id)).all()]
    units = [{"id": r.id, "item": r.key, "is_gold": bool(r.is_gold), "done": int(r.done)} for r in unit_rows]
    return StudyData(
        settings=dict(study_settings),
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
    unit has two values or the values do not vary (`alpha_with_reason` says which)."""
    return alpha_with_reason(ratings, level=level)[0]


def alpha_with_reason(
    ratings: Iterable[tuple[str, Any, float]], *, level: str = "ordinal", names: dict[float, str] | None = None
) -> tuple[float | None, str | None]:
    """``(alpha, None)``, or ``(None, why alpha is undefined)``: fewer than two annotators, no unit judged
    twice, or every answer the same (named by ``names`` where a value is a code: pairwise 0 is "about the
    same")."""
    import krippendorff

    def shown(v: float) -> str:
        return (names or {}).get(v, f"{v:g}")

    cells: dict[tuple[str, Any], float] = {}  # one value per annotator and unit: the later one
    for c, u, v in ratings:
        if v == v:  # NaN: no value (as the package reads its reliability data)
            cells[c, u] = v
    if not cells:
        return None, "nothing has been judged yet"
    if len({c for c, _ in cells}) < 2:
        return None, "only one annotator has judged so far; agreement needs two annotators of one task"
    by_unit: dict[Any, list[float]] = defaultdict(list)
    for (_, u), v in cells.items():
        by_unit[u].append(v)
    pairable = [vs for vs in by_unit.values() if len(vs) >= 2]  # alpha counts only units judged twice or more
    if not pairable:
        return None, "no task has been judged by two annotators yet"
    values = sorted(set(cells.values()))
    paired = sorted({v for vs in pairable for v in vs})
    if len(values) < 2:
        return None, f"every answer is the same ({shown(values[0])}), so agreement beyond chance is undefined"
    if len(paired) < 2:  # the package divides 0 by 0 here (NaN, and a RuntimeWarning)
        return None, (
            f"every answer on the tasks judged twice is the same ({shown(paired[0])}), so agreement beyond chance is "
            "undefined"
        )
    # the package's value counts (units judged twice x values), built from the judgements: its own reliability
    # matrix is annotators x units (a crowd of 4,000 workers on 20,000 units took 1.5 GB and 10 s)
    column = {v: n for n, v in enumerate(paired)}
    counts = np.zeros((len(pairable), len(paired)))
    for row, vs in enumerate(pairable):
        for v in vs:
            counts[row, column[v]] += 1
    try:
        alpha = krippendorff.alpha(value_counts=counts, value_domain=paired, level_of_measurement=level)  # type: ignore[arg-type]
        return float(alpha), None
    except (ValueError, ZeroDivisionError):
        return None, "the answers leave it undefined"


def agreement(data: StudyData) -> dict[str, float | None]:
    """Alpha over the non-gold judgements: ordinal on ranks (unit = one story in one item), on the pairwise
    choice (story 1 better / same / story 2 better) and per Likert statement."""
    return {k: v[0] for k, v in _agreement(data).items()}


def agreement_undefined(data: StudyData) -> dict[str, str]:
    """Why each alpha that `agreement` leaves None is undefined (key as in `agreement`)."""
    return {k: v[1] for k, v in _agreement(data).items() if v[1] is not None}


_WAIT_FOR_TWO = ("only one annotator has judged so far", "no task has been judged by two annotators yet")


def _agreement(data: StudyData) -> dict[str, tuple[float | None, str | None]]:
    out = _agreement_of(data)
    if int(data.settings.get("per_item", 2)) < 2:  # waiting does not help: no task is ever judged twice
        why = "each task is judged by one annotator (--per-item 1), so agreement between annotators cannot be measured"
        out = {k: (a, why if r is not None and r.startswith(_WAIT_FOR_TWO) else r) for k, (a, r) in out.items()}
    return out


def _agreement_of(data: StudyData) -> dict[str, tuple[float | None, str | None]]:
    task = data.settings["task"]
    js = [j for j in data.judgements if not j.is_gold]
    if task == "rank":
        triples = [(j.annotator, int(s), float(r)) for j in js for s, r in j.answer["ranks"].items()]
        return {"rank": alpha_with_reason(triples)}
    if task == "pairwise":
        triples = [(j.annotator, j.unit_id, float(_pair_value(j))) for j in js]
        return {"preference": alpha_with_reason(triples, names=PAIR_VALUE_NAMES)}
    out = {}
    for aspect in data.settings["aspects"]:
        out[aspect] = alpha_with_reason(
            [(j.annotator, j.unit_id, float(j.answer["ratings"][aspect])) for j in js]
        )
    return out


PAIR_VALUE_NAMES = {1.0: "the first story of each pair", -1.0: "the second story of each pair", 0.0: "about the same"}
"""What each `_pair_value` is, in the words of a reason alpha is undefined."""


def _pair_value(j: Judgement) -> int:
    """+1: the unit's first story preferred, -1: the second, 0: same."""
    p = j.answer["preferred"]
    return 0 if p is None else (1 if p == j.unit_story_ids[0] else -1)


# --------------------------------------------------------------------------------------------------- summary
def _count_gold(results: Iterable[tuple[str, bool | None]]) -> dict[str, tuple[int, int]]:
    """(passed, gold judgements) per annotator from ``(annotator, gold_passed)`` pairs."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for annotator, passed in results:
        if passed is not None:
            out[annotator][0] += int(passed)
            out[annotator][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _gold_rates(data: StudyData) -> dict[str, tuple[int, int]]:
    return _count_gold((j.annotator, j.gold_passed) for j in data.judgements)


def _below(rates: dict[str, tuple[int, int]], settings: dict[str, Any]) -> set[str]:
    threshold = float(settings.get("gold_pass", 0.8))
    return {a for a, (ok, n) in rates.items() if n and ok / n < threshold}


def failed_gold(data: StudyData) -> set[str]:
    """Annotators whose gold pass rate is below the study's threshold."""
    return _below(_gold_rates(data), data.settings)


def _failed_gold_in(st: db.Study, conn: Any) -> set[str]:
    """`failed_gold` read from the study (only the gold results, not every judgement)."""
    return _below(_gold_rates_in(conn), st.settings)


def _gold_rates_in(conn: Any) -> dict[str, tuple[int, int]]:
    """(passed, gold judgements) per annotator who has judged a gold unit, read from the study."""
    from sqlalchemy import select

    j, an = db.judgements, db.annotators
    rows = conn.execute(
        select(an.c.name, j.c.gold_passed).join(an, an.c.id == j.c.annotator_id).where(j.c.gold_passed.is_not(None))
    )
    return _count_gold((r.name, bool(r.gold_passed)) for r in rows)


def _warn_unchecked(st: db.Study, conn: Any, rates: dict[str, tuple[int, int]], exported: Iterable[str]) -> list[str]:
    """Say (a warning) whom ``--drop-failed-gold`` could not check: every annotator of a study without gold units,
    or the exported annotators who have judged no gold unit yet (they are kept); returns the latter, sorted."""
    from sqlalchemy import func, select

    from vistkit.errors import warn

    unchecked = sorted(a for a in exported if a not in rates)
    has_gold = conn.execute(select(func.count()).select_from(db.units).where(db.units.c.is_gold)).scalar_one()
    if not has_gold:
        warn(
            f"study {st.name} has no gold items (attention checks: `studio init --gold N`), so --drop-failed-gold "
            "left out nobody"
        )
    elif unchecked:
        shown = ", ".join(unchecked[:5]) + (f" and {len(unchecked) - 5:,} more" if len(unchecked) > 5 else "")
        warn(
            f"--drop-failed-gold kept {len(unchecked):,} annotators who have judged no gold item yet, so no "
            f"attention check tells whether they passed: {shown} (the provenance lists them as gold_unchecked)"
        )
    return unchecked


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
    present = set(data.annotators)
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
        # made by an `invite` run that stopped before writing their links: nobody has them (`invite --withdraw`)
        "unsent_invites": unsent_names(data.settings.get("unsent_invites"), present),
        "gold_pass_rate": ok_all / n_all if n_all else None,
        "gold_threshold": float(data.settings.get("gold_pass", 0.8)),
        "alpha": agreement(data),
        "alpha_undefined": agreement_undefined(data),
        "results": results(data),
        "position_bias": position_bias(data),
    }


def unsent_names(listed: Any, present: set[str]) -> list[str]:
    """The annotators of the ``unsent_invites`` setting (`vistkit.studio.service.UNSENT`) that are still in the
    study; a setting that is not a list of names (changed by hand) names nobody."""
    if not isinstance(listed, list):
        return []
    return [n for n in listed if isinstance(n, str) and n in present]


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
#: the columns of the rankings export (the layout `vistkit.meta.human.read_rankings` reads)
RANKING_COLUMNS = ("task", "worker", "story", "rank", "system", "text", "story_id", "img_seq", "position")

#: the study tasks each export format needs (a format not listed: any)
_FORMAT_TASKS = {"rankings": ("rank",), "pairs": ("rank", "pairwise"), "likert": ("likert",)}


def _check_format(fmt: str, task: str) -> None:
    """Refuse, before anything is read, an export format that the study's task does not have, naming the formats
    it has."""
    tasks = _FORMAT_TASKS.get(fmt)
    if tasks is not None and task not in tasks:
        has = [f for f in EXPORT_FORMATS if task in _FORMAT_TASKS.get(f, (task,))]
        needs = " or ".join(tasks)
        raise InputError(
            f"--format {fmt} needs a {needs} study; this {task} study has {', '.join(has[:-1])} or {has[-1]}"
        )


def _img_seq(j: Judgement) -> str:
    return "-".join(j.photo_ids)


def _kept(data: StudyData, *, include_gold: bool, drop_failed_gold: bool) -> list[Judgement]:
    dropped = failed_gold(data) if drop_failed_gold else set()
    return [j for j in data.judgements if (include_gold or not j.is_gold) and j.annotator not in dropped]


def _ranking_rows(stories: dict[int, dict[str, Any]], js: Iterable[Judgement]) -> Iterator[dict[str, Any]]:
    for j in js:
        img_seq = _img_seq(j)
        for sid in j.unit_story_ids:
            s = stories[sid]
            yield {
                "task": j.item_key,
                "worker": j.annotator,
                "story": s["system"],
                "rank": j.answer["ranks"][str(sid)],
                "system": s["system"],
                "text": s["text"],
                "story_id": s["story_id"],
                "img_seq": img_seq,
                "position": j.order.index(sid) + 1,
            }


def ranking_rows(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    """Raw rankings in the layout `vistkit.meta.human.read_rankings` reads, with the display position."""
    _check_format("rankings", data.settings["task"])
    return list(_ranking_rows(data.stories, js))


def _study_pairs(task: str, stories: dict[int, dict[str, Any]], js: Iterable[Judgement]) -> list[Any]:
    from vistkit.meta.human import RankedStory, StoryPair, pairs_from_rankings, parse_img_seq

    if task == "rank":
        tasks: dict[str, dict[str, Any]] = {}
        for r in _ranking_rows(stories, js):
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
    _check_format("pairs", task)
    by_unit: dict[int, list[Judgement]] = defaultdict(list)
    for j in js:
        by_unit[j.unit_id].append(j)
    pairs = []
    for unit_id, group in by_unit.items():
        s1, s2 = (stories[s] for s in group[0].unit_story_ids)
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


def study_pairs(data: StudyData, js: Sequence[Judgement]) -> list[Any]:
    """VHED-style `StoryPair`s: from rankings as VHED built them (`pairs_from_rankings`), or from pairwise
    choices (preferred story rank 1, the other 2, "same" 1.5 each; averaged over annotators; zero gaps dropped)."""
    return _study_pairs(data.settings["task"], data.stories, js)


def _likert_rows(
    aspects: Sequence[str], stories: dict[int, dict[str, Any]], js: Iterable[Judgement]
) -> Iterator[dict[str, Any]]:
    for j in js:
        s = stories[j.unit_story_ids[0]]
        yield {
            "system": s["system"],
            "item": j.item_key,
            "worker": j.annotator,
            **{a: j.answer["ratings"][a] for a in aspects},
            "text": s["text"],
            "story_id": s["story_id"],
            "img_seq": _img_seq(j),
        }


def likert_rows(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    """The Likert table `vistkit.meta.human.read_likert` reads: system, item, worker, one column per statement."""
    _check_format("likert", data.settings["task"])
    return list(_likert_rows(data.settings["aspects"], data.stories, js))


def _jsonl_records(
    settings: dict[str, Any], stories: dict[int, dict[str, Any]], js: Iterable[Judgement]
) -> Iterator[dict[str, Any]]:
    for j in js:
        yield {
            "study_id": settings["study_id"],
            "task": settings["task"],
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
                    "system": stories[s]["system"],
                    "story_id": stories[s]["story_id"],
                    "text": stories[s]["text"],
                }
                for n, s in enumerate(j.order, start=1)
            ],
            "answer": _readable_answer(stories, j),
            "seconds": j.seconds,
            "started_at": iso(j.claimed_at),
            "submitted_at": iso(j.created_at),
        }


def jsonl_records(data: StudyData, js: Sequence[Judgement]) -> list[dict[str, Any]]:
    """One record per judgement: who judged what, shown in which order, the answer by system name, the times."""
    return list(_jsonl_records(data.settings, data.stories, js))


def _readable_answer(stories: dict[int, dict[str, Any]], j: Judgement) -> dict[str, Any]:
    a = j.answer
    if "ranks" in a:
        return {"ranks": {stories[int(s)]["system"]: r for s, r in a["ranks"].items()}}
    if "choice" in a:
        p = a["preferred"]
        return {"choice": a["choice"], "preferred": None if p is None else stories[p]["system"]}
    return a


def task_rows(st: db.Study) -> list[dict[str, Any]]:
    """One row per unit (item, photos, stories in a fixed order): a task list for crowdsourcing platforms."""
    from sqlalchemy import select

    from vistkit.studio.service import photo_link

    with st.read() as conn:
        units = conn.execute(
            select(db.units.c.id, db.units.c.story_ids, db.units.c.is_gold, db.items.c.key, db.items.c.photo_ids)
            .join(db.items, db.items.c.id == db.units.c.item_id)
            .order_by(db.units.c.id)
        ).all()
        texts = {r.id: r for r in conn.execute(select(db.stories)).all()}
    url = st.setting("photo_url")
    decoded = []
    for u in units:
        ids = db.loads(u.story_ids, st.name, f"unit {u.id}: its story ids")
        photos = db.loads(u.photo_ids, st.name, f"item {u.key!r}: its photo ids")
        if not isinstance(ids, list) or not all(_is_int(s) and s in texts for s in ids):
            raise db.damaged(st.name, f"unit {u.id} names stories the study does not hold ({u.story_ids!r})")
        if not isinstance(photos, list) or not all(isinstance(p, str) for p in photos):
            raise db.damaged(st.name, f"item {u.key!r}: its photo ids are not a list of texts")
        decoded.append((u, ids, photos))
    rows = []
    width = max((len(ids) for _, ids, _ in decoded), default=0)
    for u, ids, photos in decoded:
        row: dict[str, Any] = {
            "unit": u.id,
            "item": u.key,
            "gold": int(bool(u.is_gold)),
            "img_seq": "-".join(photos),
            "photo_urls": " ".join(photo_link(str(url), p) for p in photos) if url else "",
        }
        for n in range(width):
            row[f"story_{n + 1}"] = texts[ids[n]].text if n < len(ids) else ""
            row[f"system_{n + 1}"] = texts[ids[n]].system if n < len(ids) else ""
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------- writing
def provenance_path(output: str | Path) -> Path:
    """Where the provenance of an export file goes: ``OUTPUT.provenance.json`` beside it."""
    return Path(f"{output}.provenance.json")


def writes_in_place(output: str | Path) -> bool:
    """Whether ``output`` is standard output (``-``), a device, a pipe or a name of an open file (``/dev/stdout``,
    ``/proc/self/fd/1``): written in place, with no provenance file beside it."""
    import os
    import stat

    from vistkit.data.output import STDOUT

    if str(output) == STDOUT:
        return True
    current = os.path.abspath(output)
    for _ in range(40):  # the links of the last part: /dev/stdout -> /proc/self/fd/1 is a file the process has open
        if current.startswith(("/proc/", "/dev/fd/")):
            return True
        if not os.path.islink(current):
            break
        try:
            current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
        except OSError:
            break
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


class _HashingText:
    """A text file's ``write`` that also feeds the SHA-256 of the UTF-8 bytes written (the file is opened with
    ``newline=""``, so those bytes are the file's)."""

    def __init__(self, fh: Any) -> None:
        import hashlib

        self.fh = fh
        self.sha256 = hashlib.sha256()

    def write(self, text: str) -> int:
        self.sha256.update(text.encode("utf-8"))
        return int(self.fh.write(text))


@contextlib.contextmanager
def _data_file(output: str | Path) -> Iterator[_HashingText]:
    """The export file, written through the one writer (temporary file, then renamed to ``output``). Just before
    the rename, the provenance file of an earlier export is removed, so a provenance never describes another file
    than the one beside it: an interruption leaves the old pair, or the new file without a provenance."""
    from vistkit.data.output import open_output

    in_place = writes_in_place(output)
    with open_output(output, newline="") as fh:
        out = _HashingText(fh)
        yield out
        if not in_place:
            _remove_provenance(output)


def _remove_provenance(output: str | Path) -> None:
    import os

    from vistkit.errors import OutputError

    old = provenance_path(output)
    try:
        if os.path.lexists(old):
            os.unlink(old)
    except OSError as exc:
        raise OutputError(
            f"cannot remove {old}, the provenance of the earlier {output} ({exc.strerror or exc}); nothing was "
            "replaced: remove it or choose another output file"
        ) from None


def _write_rows(
    output: str | Path,
    columns: Sequence[str],
    rows: Iterable[dict[str, Any]],
    *,
    empty: Callable[[], str] | None,
) -> tuple[int, str]:
    """CSV ``rows`` (dicts, streamed) under ``columns``; returns (rows written, SHA-256 of the file). No row is
    refused with the message ``empty()`` (nothing is written), unless it is None."""
    from vistkit.data.output import csv_writer

    n = 0
    with _data_file(output) as out:
        w = csv_writer(cast(IO[str], out))  # csv needs only write()
        w.writerow(list(columns))
        for r in rows:
            w.writerow([r.get(c, "") for c in columns])
            n += 1
        if n == 0 and empty is not None:
            raise InputError(empty())
    return n, out.sha256.hexdigest()


def _copy_in(output: str | Path, source: Path) -> str:
    """Copy the UTF-8 text file ``source`` to ``output`` (see `_data_file`); returns its SHA-256."""
    with _data_file(output) as out, open(source, encoding="utf-8", newline="") as fh:
        while chunk := fh.read(1 << 20):
            out.write(chunk)
    return out.sha256.hexdigest()


class _Tally:
    """Judgements counted as they pass (per annotator: how many, first and last)."""

    def __init__(self) -> None:
        self.n = 0
        #: judgements of the study that the export's options left out, by why
        self.left_out: dict[str, int] = defaultdict(int)
        self.counts: dict[str, int] = defaultdict(int)
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def over(self, js: Iterable[Judgement]) -> Iterator[Judgement]:
        for j in js:
            self.n += 1
            a = j.annotator
            self.counts[a] += 1
            self.first[a] = min(self.first.get(a, j.created_at), j.created_at)
            self.last[a] = max(self.last.get(a, j.created_at), j.created_at)
            yield j

    def nothing(self) -> str:
        """Why an export has nothing to write: no judgement yet, or every one left out (and by which option)."""
        if not self.left_out:
            return (
                "the study has no judgements to export yet: give annotators their links (`vistkit studio invite "
                "STUDY`), serve the study (`vistkit studio serve STUDY`), and export once they have submitted "
                "(`vistkit studio status STUDY` shows how far they are)"
            )
        why = {
            "gold": "of gold items (--include-gold keeps them)",
            "failed": "of annotators who failed the gold checks (--drop-failed-gold left them out)",
        }
        parts = [f"{k:,} {why[reason]}" for reason, k in self.left_out.items()]
        total = sum(self.left_out.values())
        return f"nothing to export: the study's {total:,} judgements were all left out, " + " and ".join(parts)


def export(
    st: db.Study,
    output: str | Path,
    *,
    fmt: str,
    include_gold: bool = False,
    drop_failed_gold: bool = False,
) -> dict[str, Any]:
    """Write one export file and its provenance beside it (``OUTPUT.provenance.json``); returns the provenance
    (``rows``: the rows, or pairs, written; ``judgements``: the judgements they come from; ``sha256``: of the
    file written, so a provenance that does not describe the file beside it can be told).

    The judgements are read and written one batch at a time (pairs: one entry per pair kept). ``output`` ``-``
    is standard output; no provenance file is written then (it is still returned), nor for a device or pipe."""
    import tempfile

    from vistkit import __version__

    if fmt not in EXPORT_FORMATS:
        raise InputError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    from vistkit.data.output import check_output

    in_place = writes_in_place(output)
    if not in_place:  # before any work: not an input, not an existing file without --force, a folder that exists
        check_output(output)
        check_output(provenance_path(output))
    settings = st.settings
    task = settings["task"]
    _check_format(fmt, task)
    created = settings.get("created_at")
    if not (created is None or _is_moment(created)):  # the provenance gives it as a date: said before any write
        raise db.damaged(st.name, f"its creation time ({created!r}) is not a time in seconds since 1970")
    tally = _Tally()
    dropped: set[str] = set()
    rates: dict[str, tuple[int, int]] = {}
    unchecked: list[str] = []
    with st.read() as conn:  # one read transaction: the export is one consistent snapshot of the study
        if fmt == "tasks":
            rows = task_rows(st)
            n, sha = _write_rows(output, list(rows[0]) if rows else ["unit"], rows, empty=None)
        else:
            stories = _stories(conn)
            if drop_failed_gold:
                dropped = _failed_gold_in(st, conn)
                rates = _gold_rates_in(conn)  # the same snapshot: who was checked at all

            def kept(js: Iterable[Judgement]) -> Iterator[Judgement]:
                for j in js:
                    why = "gold" if j.is_gold and not include_gold else "failed" if j.annotator in dropped else ""
                    if why:
                        tally.left_out[why] += 1
                    else:
                        yield j

            js = tally.over(kept(iter_judgements(st, conn, stories)))
            if fmt == "rankings":
                n, sha = _write_rows(output, RANKING_COLUMNS, _ranking_rows(stories, js), empty=tally.nothing)
            elif fmt == "likert":
                columns = ["system", "item", "worker", *settings["aspects"], "text", "story_id", "img_seq"]
                rows_of = _likert_rows(settings["aspects"], stories, js)
                n, sha = _write_rows(output, columns, rows_of, empty=tally.nothing)
            elif fmt == "pairs":
                from vistkit.meta.human import write_pairs

                pairs = _study_pairs(task, stories, js)
                if not pairs:
                    raise InputError(tally.nothing() if tally.n == 0 else "no pairs to export: every pair is a tie")
                with tempfile.TemporaryDirectory(prefix="vistkit-export-") as tmp:
                    write_pairs(pairs, Path(tmp) / "pairs.csv")
                    sha = _copy_in(output, Path(tmp) / "pairs.csv")
                n = len(pairs)
            else:
                n = 0
                with _data_file(output) as out:
                    for rec in _jsonl_records(settings, stories, js):
                        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                        n += 1  # (none: an empty record, not refused; the tables above feed `meta`, which needs rows)
                sha = out.sha256.hexdigest()
            if drop_failed_gold:
                unchecked = _warn_unchecked(st, conn, rates, tally.counts)
    prov = {
        "study_id": settings["study_id"],
        "title": settings.get("title", ""),
        "task": task,
        "format": fmt,
        "file": None if in_place else Path(output).name,
        "sha256": None if in_place else sha,
        "rows": n,
        "judgements": tally.n,
        "include_gold": include_gold,
        "dropped_annotators": sorted(dropped),
        **({"gold_unchecked": unchecked} if drop_failed_gold and fmt != "tasks" else {}),
        "per_item": settings["per_item"],
        "aspects": settings.get("aspects") if task == "likert" else None,
        "annotators": [
            {"name": a, "judgements": tally.counts[a], "first": iso(tally.first[a]), "last": iso(tally.last[a])}
            for a in sorted(tally.counts)
        ],
        "study_created_at": iso(settings.get("created_at")),
        "exported_at": iso(db.now()),
        "vistkit": __version__,
    }
    if not in_place:
        _write_provenance(output, prov)
    return prov


def _write_provenance(output: str | Path, prov: dict[str, Any]) -> None:
    from vistkit.data.output import write_text

    write_text(provenance_path(output), json.dumps(prov, indent=2) + "\n")


def keep_copy(source: str | Path, output: str | Path, prov: dict[str, Any]) -> None:
    """Copy an export (``source``, written by `export` with provenance ``prov``) and its provenance to ``output``,
    in the same order as `export` writes them."""
    sha = _copy_in(output, Path(source))
    _write_provenance(output, {**prov, "file": Path(output).name, "sha256": sha})
