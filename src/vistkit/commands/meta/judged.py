"""``vistkit meta correlate|errors``: scores of judged stories against Likert scores and error labels."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vistkit.commands.common import FormatOption, one_of, parse_metric_names, writes_output
from vistkit.commands.meta import meta_app
from vistkit.commands.meta.common import (
    JudgedInput,
    ReportOpt,
    ResamplesOpt,
    SeedOpt,
    _command_line,
    _emit,
    _metrics,
    _page_notes,
    _parse_story_files,
    _references,
    _report,
    _resamples_note,
    _sig_caption,
    _skip_or_raise,
    option_group,
)
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError, VistkitError
from vistkit.report.tables import OutputFormat

if TYPE_CHECKING:  # numpy is imported where it is used: `vistkit --help` does not load it
    import numpy as np


def judged_stories(table: Any, story_files: list[str], key: Keying | None) -> list[Story]:
    """One `Story` per judged (system, item): text from the table's ``text`` column or from ``--stories``
    files (``SYSTEM=FILE``, matched by ``--key``; default story id). A file named after a system the table does
    not have is refused (a typo was ignored, and the table's own text scored in its place)."""
    from vistkit.data.readers import read_stories, shown_names
    from vistkit.meta.human import is_reference_system, parse_img_seq

    keying = key or Keying.STORY
    files = _parse_story_files(story_files)
    known = dict.fromkeys(table.systems)
    unknown = [name for name in files if name not in known]
    if unknown:  # a typo (or another case) was ignored: the table's own text was scored instead, without a word
        raise InputError(
            f"--stories names the system {unknown[0]!r:.60}, which the table does not have (its systems: "
            f"{shown_names(list(known))}); name each file after a system of the table, as spelled there"
        )
    loaded: dict[str, dict[str, Story]] = {}
    for name, (path, field) in files.items():
        loaded[name] = read_stories(path, field=field, system=name).by_key(keying)
    out = []
    # a studio export names each story's photo sequence in `img_seq` (its item is the story id in a study made
    # by story): by sequence, that is the story's key and photos, as `meta pairs` reads them
    sequences = table.img_seqs or [""] * len(table.items)
    for system, item, text, seq in zip(table.systems, table.items, table.texts, sequences, strict=True):
        sysname = "human" if is_reference_system(system) else system
        photos = parse_img_seq(seq or item) if keying is Keying.SEQUENCE else ()
        if system in loaded:
            # by sequence, the photo ids as the table's own text gets them (1_2_3, "1 2 3" and 1-2-3 are one key)
            wanted = "-".join(photos) if keying is Keying.SEQUENCE else item
            story = loaded[system].get(wanted)
            if story is None:
                said = f" (item {item!r:.60})" if wanted != item else ""
                raise InputError(f"--stories {system}: no story with {keying.value} key {wanted!r:.80}{said}")
            out.append(Story(story.story_id, story.text, story.sentences, story.photo_ids, story.album_id, sysname))
        elif text:
            out.append(Story(story_id=item, text=text, photo_ids=photos, system=sysname))
        else:
            raise InputError(
                f"no text for system {system!r} item {item!r}: add a 'text' column or pass --stories {system}=FILE"
            )
    return out


def _score_judged(
    metrics: list[Any],
    stories: list[Story],
    refs: StorySet | None,
    key: Keying | None,
    reference_absent: bool,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:

    from vistkit.meta.scoring import score_stories

    values: dict[str, np.ndarray] = {}
    sigs: dict[str, str] = {}
    for m in metrics:
        try:
            values[m.name], sigs[m.name] = score_stories(
                m, stories, references=refs, key=key, reference_absent=reference_absent
            )
        except VistkitError as exc:
            _skip_or_raise(m.name, exc)
    if not values:
        raise InputError("no metric could score these stories (see the reasons above)")
    return values, sigs


def _score_table(
    table: Any, inputs: JudgedInput
) -> tuple[list[Story], dict[str, np.ndarray], dict[str, str], list[str]]:
    """Build the metrics and score every judged story of a Likert or error-label table: the stories, the
    scores and signatures per metric, and the names of the lower-is-better metrics."""
    judged = judged_stories(table, inputs.stories, inputs.key)  # every input read before a model loads
    refs = _references(inputs.references, inputs.ref_format)
    _check_judged_metrics(inputs, refs, judged)
    built = _metrics(inputs.metrics, inputs.option)
    values, sigs = _score_judged(built, judged, refs, inputs.key, inputs.reference_absent)
    lower = [m.name for m in built if not m.higher_is_better]
    return judged, values, sigs, lower


def _check_judged_metrics(inputs: JudgedInput, refs: StorySet | None, judged: list[Story] | None = None) -> None:
    """Before any metric is built or scores: metric names and ``-O`` options, that a reference-based metric
    has ``--references`` (without them, the metrics before it in ``-m`` were scored, models loaded, for nothing),
    and that the references a story gets do not hang on a key not given (`_check_default_key`). ``--metrics all``
    skips a metric without references instead (`_metrics`)."""
    from vistkit.commands.meta.common import _uses_references
    from vistkit.commands.score import parse_metric_options, plan_metrics

    names = parse_metric_names(inputs.metrics)
    if not names:
        return
    if names == ["all"]:
        uses_refs = refs is not None
    else:
        plans = plan_metrics(names, {}, parse_metric_options(inputs.option))
        for cls, _ in plans:
            if refs is None and _uses_references(cls):
                raise InputError(f"{cls.name} is reference-based: pass --references FILE (the human stories)")
        uses_refs = any(_uses_references(cls) for cls, _ in plans)
        problem = _reference_problem(judged, refs, inputs.key) if uses_refs and judged else None
        if problem is not None:  # said after every model had loaded, as "no pair could be scored"
            raise InputError(f"{next(c.name for c, _ in plans if _uses_references(c))}{problem}")
    if uses_refs and refs is not None and judged is not None and inputs.key is None:
        _check_default_key(judged, refs)


def _reference_problem(judged: list[Story], refs: StorySet | None, key: Keying | None) -> str | None:
    """Why no reference-based metric can score any judged story, as the rest of a sentence after the metric's
    name (references sharing no key with any story: the key `vistkit.meta.scoring` uses, by default sequence when
    every story carries photos), or None. Album keys are left to the scorer, which says why they cannot serve."""
    if refs is None:
        return None
    keying = key if key is not None else (Keying.SEQUENCE if all(s.photo_ids for s in judged) else Keying.STORY)
    if keying is Keying.ALBUM:
        return None
    keys = [s.story_id if keying is Keying.STORY else "-".join(s.photo_ids) for s in judged]
    if set(keys) & set(refs.group(keying)):
        return None
    return (
        f": no judged story could be scored, as no reference story has the {keying.value} key of any of them (the "
        f"first story's is {keys[0]!r:.60}): check --references and --key"
    )


def _check_default_key(judged: list[Story], refs: StorySet) -> None:
    """Without ``--key``, stories that all carry photos (from ``--stories`` files) are matched to their
    references by photo sequence (`vistkit.meta.scoring`), though the table's items were matched to the files by
    story id: a story whose id names a reference that is not the one reference of its photos (a sequence told
    twice, or other photos) was scored against other references than the table's own text gets, without a word.
    Refused there, naming both keys; where the keys agree, or no reference has a story's id, nothing changes."""
    if not judged or not all(s.photo_ids for s in judged):
        return
    by_story = refs.group(Keying.STORY)
    by_sequence = refs.group(Keying.SEQUENCE)
    differ: list[tuple[Story, list[Story], list[Story]]] = []
    for s in judged:
        own = by_story.get(s.story_id, [])
        of_photos = by_sequence.get("-".join(s.photo_ids), [])
        if own and {id(r) for r in own} != {id(r) for r in of_photos}:
            differ.append((s, own, of_photos))
    if not differ:
        return
    story, own, of_photos = differ[0]
    seq = "-".join(story.photo_ids)

    def ids(stories: list[Story]) -> str:
        shown = ", ".join(repr(r.story_id)[:40] for r in stories[:3])
        return (shown + ", ...") if len(stories) > 3 else (shown or "none")

    raise InputError(
        f"{len(differ):,} of {len(judged):,} judged stories get other references by story id than by photo "
        f"sequence (story {story.story_id!r:.40}: {ids(own)} by id, {ids(of_photos)} by its photos {seq!r:.60}), "
        "and without --key they would be matched by sequence: pass --key story to score each story against the "
        "reference of its id, or --key sequence against every reference of its photos"
    )


def _oriented(values: dict[str, np.ndarray], lower_is_better: list[str]) -> dict[str, np.ndarray]:
    """Scores turned so that higher is better (lower-is-better metrics negated): r > 0 means agreement."""
    return {m: (-v if m in lower_is_better else v) for m, v in values.items()}


def _finite(values: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The scores with every infinite one made undefined (NaN), and how many each metric had (metrics with none
    left out). A coefficient of an infinite score is undefined (some metrics' ranges reach infinity, e.g.
    lm-perplexity's); it stopped the whole command, after every metric had been scored, naming neither."""
    import numpy as np

    counts = {m: int(np.isinf(v).sum()) for m, v in values.items()}
    return {m: np.where(np.isinf(v), np.nan, v) for m, v in values.items()}, {m: k for m, k in counts.items() if k}


def _unscored(values: dict[str, np.ndarray]) -> dict[str, int]:
    """Per metric, how many stories it left undefined (NaN: a story it cannot score); metrics with none left out."""
    import numpy as np

    counts = {m: int(np.isnan(v).sum()) for m, v in values.items()}
    return {m: k for m, k in counts.items() if k}


def _unscored_note(counts: dict[str, int], total: int, what: str) -> str:
    """Under the table: how many stories each metric could not score, left out of ``what`` (its ``n`` fell without
    a word, where `meta pairs` names the pairs it leaves out)."""
    return "".join(
        f"\nnote: {m}: {k:,} of {total:,} stories {'has' if k == 1 else 'have'} no score (the metric left "
        f"{'it' if k == 1 else 'them'} undefined) and {'is' if k == 1 else 'are'} left out of its {what}"
        for m, k in counts.items()
    )


def _infinite_note(counts: dict[str, int], total: int, what: str) -> str:
    """Under the table: how many stories each metric scored infinite, left out of ``what``."""
    return "".join(
        f"\nnote: {m}: {k:,} of {total:,} stories scored infinite {'is' if k == 1 else 'are'} left out of its "
        f"{what} (a coefficient needs finite scores)"
        for m, k in counts.items()
    )


@meta_app.command("correlate")
@writes_output(report="folder")
@option_group(JudgedInput)
def correlate_cmd(
    ctx: typer.Context,
    inputs: JudgedInput,
    likert_csv: Path = typer.Argument(..., help="Likert table: system, item, worker, one column per aspect."),
    aspects: str | None = typer.Option(
        None,
        "--aspects",
        metavar="COLUMNS",
        help="Aspect columns (default: every column but the id and text ones: system, item, worker, text, "
        "story_id, img_seq, task, model, story).",
    ),
    level: str = typer.Option(
        "both",
        "--level",
        metavar="story|system|both",
        help="story, system or both.",
        callback=one_of("story", "system", "both"),
    ),
    kendall: str = typer.Option(
        "b", "--kendall", metavar="b|c", help="Kendall tau variant: b (ties corrected) or c.", callback=one_of("b", "c")
    ),
    scale: str = typer.Option(
        "1-5", "--scale", metavar="LOW-HIGH", help="Lowest-highest rating; a rating outside it is refused."
    ),
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Pearson, Spearman and Kendall tau-b (tau-c with --kendall c) of metric scores with human scores (story and
    system level, bootstrap CIs), and the Williams test between every two metrics."""
    import numpy as np

    from vistkit.meta.human import parse_scale, read_likert  # --level and --kendall: checked by their callbacks

    table = read_likert(
        likert_csv, aspects=parse_metric_names(aspects) if aspects else None, scale=parse_scale(scale)
    )
    judged, values, sigs, lower = _score_table(table, inputs)
    unscored = _unscored(values)
    finite, infinite = _finite(_oriented(values, lower))
    result = correlation_assessment(table, finite, level=level, n_resamples=n_resamples, seed=seed, kendall=kendall)
    result["signatures"] = sigs
    result["lower_is_better"] = lower
    result["infinite_scores"] = infinite
    result["unscored_stories"] = unscored
    # a story with no rating of an aspect (every cell of it empty) is left out of that aspect's correlations
    unrated = {a: int(np.isnan(table.column(a)).sum()) for a in table.aspects}
    result["unrated_stories"] = unrated
    few = _resamples_note(result, n_resamples)  # --bootstrap 1: a "95% CI" of one resample
    cols = ["level", "metric", "aspect", "method", "r", "ci low", "ci high", "p", "n"]
    rows = [
        [r["level"], r["metric"], r["aspect"], r["method"], r["r"], r["ci"][0], r["ci"][1], r["p"], r["n"]]
        for r in result["correlations"]
    ]
    title = f"correlation with human scores (Kendall = tau-{kendall})"  # said tau-b under --kendall c too
    undefined = (
        _unscored_note(unscored, len(table), "correlations")
        + _infinite_note(infinite, len(table), "correlations")
        + "".join(
            f"\nnote: {a}: {k:,} of {len(table):,} stories {'has' if k == 1 else 'have'} no rating (every {a} cell of "
            f"{'it' if k == 1 else 'them'} is empty) and {'is' if k == 1 else 'are'} left out of its correlations"
            for a, k in unrated.items()
            if k
        )
        + _undefined_note(result["correlations"])
        + few
    )
    _emit(result, cols, rows, fmt, title, _sig_caption(sigs) + undefined)
    _emit_williams(result["williams"], fmt)
    if report is not None:
        from vistkit.report.html import correlation_report

        notes = _page_notes(undefined)
        _report(
            report,
            lambda: correlation_report(
                report, table, judged, values, result, command=_command_line(ctx), notes=notes
            ),
        )


WILLIAMS_COLUMNS = ["level", "aspect", "A", "B", "r A", "r B", "r AB", "t", "p (A > B)", "n"]


def _emit_williams(tests: list[dict[str, Any]], fmt: OutputFormat) -> None:
    """The Williams tests under the correlation table (text, LaTeX), with why each n/a one is undefined; a CSV
    holds one table, so there a note says where they are. They were in JSON and on the report page only, though
    the verb's help promises them."""
    from vistkit.commands.common import echo, note
    from vistkit.report.tables import render_table

    if not tests or fmt is OutputFormat.JSON:  # JSON: in the payload already
        return
    if fmt is OutputFormat.CSV:
        note(
            "note: the Williams test between every two metrics is not in the CSV (one table); see -f json "
            "(`williams`) or the --report page"
        )
        return
    rows = [
        [w["level"], w["aspect"], w["a"], w["b"], w["r_a"], w["r_b"], w["r_ab"], w["t"], w["p_one_sided"], w["n"]]
        for w in tests
    ]
    undefined = "".join(
        f"\nnote: n/a for {w['a']} vs {w['b']} / {w['aspect']} ({w['level']} level): {w['undefined']}"
        for w in tests
        if w.get("undefined")
    )
    title = "Williams test on Pearson r (p: one-sided, r A > r B; system level = system means)"
    if fmt is OutputFormat.TEXT:
        echo(render_table(WILLIAMS_COLUMNS, rows, fmt, title=title))
        if undefined:
            echo(undefined.lstrip("\n"))
    else:
        echo(render_table(WILLIAMS_COLUMNS, rows, fmt, title=title, caption=undefined.lstrip("\n")))


def _undefined_note(rows: list[dict[str, Any]]) -> str:
    """Under the table: why each n/a coefficient is undefined (one line per metric, aspect, level and reason)."""
    seen: dict[str, None] = {}
    degenerate: dict[tuple[str, int, int], list[str]] = {}  # (where, k, resamples) -> methods
    for r in rows:
        where = f"{r['metric']} / {r['aspect']}" + (f" ({r['level']} level)" if "level" in r else "")
        if r.get("undefined"):
            seen.setdefault(f"\nnote: n/a for {where}: {r['undefined']}", None)
        if r.get("ci_undefined"):  # r is defined, its interval is not (one story per system)
            seen.setdefault(f"\nnote: no CI for {where}: {r['ci_undefined']}", None)
        if r.get("undefined_resamples"):  # the CI is over the other resamples
            degenerate.setdefault((where, r["undefined_resamples"], r["n_resamples"]), []).append(r["method"])
    for (where, k, total), methods in degenerate.items():
        seen.setdefault(
            f"\nnote: {where}: {k:,} of {total:,} bootstrap resamples leave {', '.join(methods)} undefined (one side "
            "constant in them); the CI is over the rest",
            None,
        )
    return "".join(seen)


def correlation_assessment(
    table: Any,
    values: dict[str, np.ndarray],
    *,
    level: str,
    n_resamples: int,
    seed: int,
    kendall: str = "b",
) -> dict[str, Any]:
    """Story- and/or system-level correlations of every metric with every aspect, and the Williams test
    (Pearson) between every two metrics at each level. ``kendall``: tau-b (default) or tau-c. A long
    bootstrap shows one progress task over all of them."""
    from vistkit.meta.resample import bootstrap_progress

    if kendall not in ("b", "c"):
        raise InputError("--kendall must be b or c")
    kendall_method = "kendall" if kendall == "b" else "kendall_c"
    levels = ("story", "system") if level == "both" else (level,)
    rows: list[dict[str, Any]] = []
    williams: list[dict[str, Any]] = []
    total = len(table.aspects) * len(values) * 3 * len(levels) * n_resamples
    with bootstrap_progress(total):
        for aspect in table.aspects:
            _correlate_aspect(table, values, aspect, levels, kendall_method, n_resamples, seed, rows, williams)
    return {
        "correlations": rows,
        "williams": williams,
        "kendall_variant": kendall,
        "n_stories": len(table),
        "aspects": table.aspects,
        "note": "scores of lower-is-better metrics are negated, so r > 0 always means agreement with people",
    }


def _correlate_aspect(
    table: Any,
    values: dict[str, np.ndarray],
    aspect: str,
    levels: tuple[str, ...],
    kendall_method: str,
    n_resamples: int,
    seed: int,
    rows: list[dict[str, Any]],
    williams: list[dict[str, Any]],
) -> None:
    """`correlation_assessment` for one aspect: appends its correlation rows and Williams tests."""
    import numpy as np

    from vistkit.meta.correlation import (
        compare_correlations,
        correlation_ci,
        system_correlation_ci,
        system_means,
    )

    human = table.column(aspect)
    for metric, scores in values.items():
        for method in ("pearson", "spearman", kendall_method):
            name = "kendall" if method.startswith("kendall") else method
            if "story" in levels:
                r = correlation_ci(scores, human, method=method, n_resamples=n_resamples, seed=seed)
                rows.append({"level": "story", "metric": metric, "aspect": aspect, **r, "method": name})
            if "system" in levels:
                r = system_correlation_ci(
                    table.systems, scores, human, method=method, n_resamples=n_resamples, seed=seed
                )
                rows.append({"level": "system", "metric": metric, "aspect": aspect, **r, "method": name})
    for a, b in itertools.combinations(values, 2):
        if "story" in levels:
            test = compare_correlations(human, values[a], values[b], method="pearson")
            williams.append({"level": "story", "aspect": aspect, "a": a, "b": b, **test})
        if "system" in levels:
            keep = ~(np.isnan(human) | np.isnan(values[a]) | np.isnan(values[b]))
            systems = [s for s, k in zip(table.systems, keep, strict=True) if k]
            h, va, vb = (
                np.array(list(system_means(systems, v[keep]).values())) for v in (human, values[a], values[b])
            )
            test = compare_correlations(h, va, vb, method="pearson", unit="system")  # n = systems, not items
            williams.append({"level": "system", "aspect": aspect, "a": a, "b": b, **test})


@meta_app.command("errors")
@writes_output(report="folder")
@option_group(JudgedInput)
def errors_cmd(
    ctx: typer.Context,
    inputs: JudgedInput,
    labels_csv: Path = typer.Argument(
        ..., help="Error labels: system, item, one 0/1 (or TRUE/FALSE) column per error type."
    ),
    errors: str | None = typer.Option(
        None, "--errors", metavar="COLUMNS", help="Error columns (default: all; e.g. Gram,Rep,Desc)."
    ),
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Point-biserial correlation of metric scores with binary error labels (Vrank Table 5).

    Several annotators of one story are merged by majority vote; a tie (as many say 1 as 0, e.g. 1 of 2) counts
    as the error being present, and the output says how many stories were tied.
    """
    import numpy as np

    from vistkit.meta.correlation import point_biserial
    from vistkit.meta.human import read_error_labels

    table = read_error_labels(labels_csv, errors=parse_metric_names(errors) if errors else None)
    _, values, sigs, lower = _score_table(table, inputs)
    unscored = _unscored(values)
    oriented, infinite = _finite(_oriented(values, lower))
    result = {m: {e: point_biserial(v, table.column(e)) for e in table.aspects} for m, v in oriented.items()}
    tied = _tied_labels(table, oriented, result)
    # a story whose every cell of an error is empty has no label for it: left out of that error's r, and said so
    unlabelled = {e: int(np.isnan(table.column(e)).sum()) for e in table.aspects}
    payload = {
        "point_biserial": result,
        "signatures": sigs,
        "n_stories": len(table),
        "lower_is_better": lower,
        "tied_stories": tied,
        "unlabelled_stories": unlabelled,
        "infinite_scores": infinite,
        "unscored_stories": unscored,
        "note": "scores of lower-is-better metrics are negated: r < 0 means stories with the error score worse; "
        "annotators are merged by majority vote, a tie counting as the error present",
    }
    cols = ["metric", "error", "r", "p", "n", "with error"]
    rows = [[m, e, v["r"], v["p"], v["n"], v["n_error"]] for m, d in result.items() for e, v in d.items()]
    title = "point-biserial r with error labels (Vrank Table 5)"
    undefined = [{"metric": m, "aspect": e, **v} for m, d in result.items() for e, v in d.items()]
    notes = _unscored_note(unscored, len(table), "point-biserial r") + _infinite_note(
        infinite, len(table), "point-biserial r"
    ) + "".join(
        f"\nnote: {e}: the annotators of {n} of {len(table)} stories are tied (as many 1 as 0); a tie counts as the "
        "error present"
        for e, n in tied.items()
        if n
    ) + "".join(
        f"\nnote: {e}: {n} of {len(table)} stories {'has' if n == 1 else 'have'} no label (every {e} cell of "
        f"{'it' if n == 1 else 'them'} is empty) and {'is' if n == 1 else 'are'} left out of its r"
        for e, n in unlabelled.items()
        if n
    )
    _emit(payload, cols, rows, fmt, title, _sig_caption(sigs) + notes + _undefined_note(undefined))
    if report is not None:
        from vistkit.report.html import errors_report

        page = _page_notes(notes + _undefined_note(undefined))
        _report(
            report,
            lambda: errors_report(report, table.aspects, payload, cols, rows, command=_command_line(ctx), notes=page),
        )


def _tied_labels(table: Any, scores: dict[str, np.ndarray], result: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Per error, how many stories have tied annotators (counted as the error present); where a correlation is
    undefined because every story it uses is such a tie, its reason says so instead of "the labels are all 1"."""
    import numpy as np
    ties = table.ties if table.ties is not None else np.zeros(table.values.shape, dtype=bool)
    counts: dict[str, int] = {}
    for j, error in enumerate(table.aspects):
        tied = ties[:, j]
        counts[error] = int(tied.sum())
        labels = table.column(error)
        for metric, v in scores.items():
            r = result[metric][error]
            used = ~(np.isnan(v) | np.isnan(labels))
            if r.get("undefined") and used.sum() >= 3 and tied[used].all():
                r["undefined"] = (
                    f"the annotators of every story are tied on {error} (as many 1 as 0), and a tie counts as the "
                    "error present, so every label is 1"
                )
    return counts
