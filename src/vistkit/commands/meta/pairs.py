"""``vistkit meta pairs|gap|beats-ref|compare``: story-pair ranking accuracy (VHED / Vrank pairs)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer

from vistkit.commands.common import (
    FormatOption,
    check_resamples,
    one_of,
    parse_metric_names,
    warn_ignored,
    writes_output,
)
from vistkit.commands.meta import meta_app
from vistkit.commands.meta.common import (
    PairsInput,
    RawGapOpt,
    ReportOpt,
    ResamplesOpt,
    SeedOpt,
    _command_line,
    _emit,
    _gap_normalised,
    _interval_notes,
    _left_out_note,
    _outside_note,
    _page_notes,
    _proxy_note,
    _report,
    _resamples_note,
    _sig_caption,
    option_group,
    pairs_assessment,
)
from vistkit.errors import InputError
from vistkit.report.tables import OutputFormat


@meta_app.command("pairs")
@writes_output(report="folder")
@option_group(PairsInput)
def pairs_cmd(
    ctx: typer.Context,
    inputs: PairsInput,
    gap_edges: str = typer.Option(
        "auto",
        "--gap-edges",
        metavar="EDGES|auto",
        help="Ranking-gap bucket edges, comma-separated (0,0.2,0.4,0.6,1 = Vrank Fig. 3), or auto (from the data).",
    ),
    raw_gap: bool = RawGapOpt,
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Story-pair ranking accuracy (Vrank Eq. 1-2) per agreement subset and per pair kind."""
    from vistkit.meta.pairs import accuracy_table, parse_edges

    edges = parse_edges(gap_edges)
    pairs, scores = inputs.prepare()
    normalised, units = _gap_normalised(pairs, raw_gap)
    result = pairs_assessment(pairs, scores, edges=edges, normalised=normalised, n_resamples=n_resamples, seed=seed)
    few = _resamples_note(result, n_resamples)  # --bootstrap 1: a "95% CI" of one resample
    units = units if result["gap_edges"] else ""
    cols, rows = accuracy_table(result)
    _emit(
        result,
        cols,
        rows,
        fmt,
        "pair accuracy (Vrank Eq. 1-2; ties are wrong)",
        _sig_caption(result["signatures"])
        + f"\nlabel sign: {', '.join(result['label_sign']) or 'n/a'} (lower rank is better)"
        + _proxy_note(result["proxy_label_pairs"])
        + _left_out_note(result)
        + _outside_note(result)
        + units
        + few,
    )
    _emit_comparisons(result["comparisons"], fmt)
    if report is not None:
        from vistkit.meta.significance import comparison_notes
        from vistkit.report.html import pairs_report

        notes = _page_notes(_left_out_note(result) + _outside_note(result) + units + few)
        notes += _interval_notes(result) + comparison_notes(result["comparisons"])
        _report(
            report, lambda: pairs_report(report, pairs, scores, result, command=_command_line(ctx), notes=notes)
        )


def _emit_comparisons(comparisons: list[dict[str, Any]], fmt: OutputFormat) -> None:
    """McNemar and the paired bootstrap of every two metrics under the accuracy table (text, LaTeX), with why a
    bootstrap p is n/a or not to be read; a CSV holds one table, so there a note says where they are. They were
    in JSON and on the report page only, though the verb's help promises them."""
    from vistkit.commands.common import echo, note
    from vistkit.meta.significance import COMPARISON_COLUMNS, comparison_notes, comparison_row
    from vistkit.report.tables import render_table

    if not comparisons or fmt is OutputFormat.JSON:  # JSON: in the payload already
        return
    if fmt is OutputFormat.CSV:
        note(
            "note: McNemar and the paired bootstrap of every two metrics are not in the CSV (one table); see "
            "`vistkit meta compare` (also --subset), -f json (`comparisons`) or the --report page"
        )
        return
    cols = [*COMPARISON_COLUMNS, "n"]
    rows = [[*comparison_row(c), c["mcnemar"]["n"]] for c in comparisons]
    notes = "\n".join(f"note: {n}" for n in comparison_notes(comparisons))
    title = "pair accuracy, A vs B (all pairs; exact McNemar, paired bootstrap)"
    if fmt is OutputFormat.TEXT:
        echo(render_table(cols, rows, fmt, title=title))
        if notes:
            echo(notes)
    else:
        echo(render_table(cols, rows, fmt, title=title, caption=notes))


@meta_app.command("gap")
@writes_output(report="folder")
@option_group(PairsInput)
def gap_cmd(
    ctx: typer.Context,
    inputs: PairsInput,
    gap_edges: str = typer.Option(
        "auto",
        "--gap-edges",
        metavar="EDGES|auto",
        help="Bucket edges, comma-separated (0,0.2,0.4,0.6,1 = Vrank Fig. 3), or auto (from the data).",
    ),
    raw_gap: bool = RawGapOpt,
    n_resamples: int = typer.Option(
        1000,
        "--bootstrap",
        "--n-bootstrap",
        callback=check_resamples,
        help="Bootstrap resamples of the --report page's intervals.",
    ),
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Pair accuracy by ranking-gap bucket (Vrank Fig. 3)."""
    from vistkit.meta.pairs import accuracy_by_gap, auto_gap_edges, gap_table, gaps_outside, parse_edges

    if report is None:  # the table has no intervals: only the page resamples
        given = [f for f, v, d in (("--bootstrap", n_resamples, 1000), ("--seed", seed, 12345)) if v != d]
        if given:
            warn_ignored(given, "the --report page's intervals")
    edges = parse_edges(gap_edges)
    pairs, scores = inputs.prepare()
    normalised, units = _gap_normalised(pairs, raw_gap)
    proxy = sum(1 for p in pairs if p.meta.get("label", "").startswith("proxy"))
    if edges is None:
        edges = auto_gap_edges(pairs, normalised=normalised)
    if edges is None:
        why = (
            f" ({proxy} of the {len(pairs)} pairs carry a PROXY label, whose gap is always the same)" if proxy else ""
        )
        raise InputError(f"every pair has the same ranking gap{why}, so there is nothing to bucket")
    by_gap = {s.metric: accuracy_by_gap(s, pairs, edges=edges, normalised=normalised) for s in scores}
    signatures = {s.metric: s.signature for s in scores}
    payload: dict[str, Any] = {
        "by_gap": by_gap,
        "gap_edges": list(edges),
        "gap_normalised": normalised,
        "outside_gap_buckets": gaps_outside(pairs, edges, normalised=normalised),
        "proxy_label_pairs": proxy,
        "signatures": signatures,
    }
    cols, rows = gap_table(by_gap)
    _emit(
        payload,
        cols,
        rows,
        fmt,
        "accuracy by ranking gap (Vrank Fig. 3)",
        _sig_caption(signatures) + _proxy_note(proxy) + _outside_note(payload) + units,
    )
    if report is not None:
        from vistkit.meta.significance import comparison_notes
        from vistkit.report.html import pairs_report

        # the page shows the intervals `meta pairs` computes: they were 200 resamples with a fixed seed, unsaid
        result = pairs_assessment(
            pairs, scores, edges=edges, normalised=normalised, n_resamples=n_resamples, seed=seed
        )
        notes = _page_notes(_left_out_note(result) + _outside_note(result) + units + _resamples_note({}, n_resamples))
        notes += _interval_notes(result) + comparison_notes(result["comparisons"])
        _report(
            report, lambda: pairs_report(report, pairs, scores, result, command=_command_line(ctx), notes=notes)
        )


@meta_app.command("beats-ref")
@writes_output(force_flag=False)  # writes no file: refuses only a stdout appended to one of its inputs
@option_group(PairsInput, pairs_csv="Pairs CSV in the VHED layout (with reference-machine pairs).")
def beats_ref_cmd(
    inputs: PairsInput,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Machine-beats-reference ratio per system, by people and by each metric (Vrank Fig. 4)."""
    from vistkit.meta.pairs import beats_reference

    pairs, scores = inputs.prepare()
    data = {"human": beats_reference(None, pairs), **{s.metric: beats_reference(s, pairs) for s in scores}}
    # the judge of the file's own labels: people, or a PROXY label ("the human story is better", build-pairs),
    # named as the report names it (the table said "human" for both)
    proxy = any(p.meta.get("label", "").startswith("proxy") for p in pairs)
    judge = "proxy label" if proxy else "people"
    payload: dict[str, Any] = {
        "beats_reference": data,
        "signatures": {s.metric: s.signature for s in scores},
        "reference_judge": judge,
    }
    cols = ["judge", "system", "ratio", "ties", "n"]
    rows = [
        [judge if j == "human" else j, sysname, v["ratio"], v["tie_ratio"], v["n"]]
        for j, d in data.items()
        for sysname, v in d.items()
    ]
    empty = ""
    if not any(p.kind == "reference-machine" for p in pairs):
        from vistkit.meta.human import REFERENCE_SYSTEMS

        empty = (
            f"note: the table is empty: none of the {len(pairs)} pairs sets a reference story against a machine "
            f"story (a reference is a model_base or model_comp named {', '.join(sorted(REFERENCE_SYSTEMS))})"
        )
        payload["note"] = empty
    _emit(
        payload,
        cols,
        rows,
        fmt,
        "machine-beats-reference ratio (Vrank Fig. 4)",
        _sig_caption(payload["signatures"]) + (f"\n{empty}" if empty else ""),
    )


@meta_app.command("compare")
@writes_output(force_flag=False)  # writes no file: refuses only a stdout appended to one of its inputs
@option_group(PairsInput)
def compare_cmd(
    inputs: PairsInput,
    subset: str = typer.Option(
        "all",
        "--subset",
        metavar="all|omega_3|omega_4|omega_5|omega_4_5",
        help="The agreement subset of pairs.",
        callback=one_of("all", "omega_3", "omega_4", "omega_5", "omega_4_5"),
    ),
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Is metric A's pair accuracy significantly different from metric B's? (McNemar + paired bootstrap)"""
    import numpy as np
    if len(parse_metric_names(inputs.metrics)) < 2 and parse_metric_names(inputs.metrics) != ["all"]:
        raise InputError("compare needs at least two metrics: --metrics A,B")  # said before any scoring
    from vistkit.meta.pairs import pair_correct, subset_masks
    from vistkit.meta.significance import (
        COMPARISON_COLUMNS,
        comparison_notes,
        comparison_row,
        pairwise_comparisons,
    )

    pairs, scores = inputs.prepare()
    if len(scores) < 2:
        raise InputError("compare needs at least two metrics: --metrics A,B")
    mask = subset_masks(pairs)[subset]
    correct = {s.metric: np.where(mask, pair_correct(s, pairs), math.nan) for s in scores}
    from vistkit.meta.resample import bootstrap_progress

    with bootstrap_progress(len(scores) * (len(scores) - 1) // 2 * n_resamples):
        comps = pairwise_comparisons(list(correct), correct, n_resamples=n_resamples, seed=seed)
    signatures = {s.metric: s.signature for s in scores}
    payload: dict[str, Any] = {"subset": subset, "comparisons": comps, "signatures": signatures}
    empty = _empty_subset_note(pairs, subset, int(mask.sum())) if all(not c["mcnemar"]["n"] for c in comps) else ""
    if empty:
        payload["note"] = empty
    few = _resamples_note(payload, n_resamples)  # the JSON's CI of the difference
    if notes := comparison_notes(comps):  # why a bootstrap p is n/a, or too few pairs to read it
        payload["notes"] = notes
    cols = [*COMPARISON_COLUMNS, "n"]
    rows = [[*comparison_row(c), c["mcnemar"]["n"]] for c in comps]
    caption = (
        _sig_caption(signatures) + (f"\nnote: {empty}" if empty else "") + "".join(f"\nnote: {n}" for n in notes) + few
    )
    _emit(payload, cols, rows, fmt, f"pair accuracy, A vs B ({subset})", caption)


def _empty_subset_note(pairs: list[Any], subset: str, in_subset: int) -> str:
    """Why `meta compare` tested no pair (its table is a row of n/a): the subset holds no pair (the file gives no
    agreement, or none of the subset's), or none of its pairs counts (no human preference, or an unscored story)."""
    wanted = {"omega_3": "3", "omega_4": "4", "omega_5": "5", "omega_4_5": "4 or 5"}
    if in_subset == 0 and subset in wanted:
        given = sorted({p.agreement for p in pairs if p.agreement is not None})
        if not given:
            return (
                f"no pair is in {subset}: the pairs file gives no agreement (how many workers order a pair alike), "
                "so only --subset all has pairs"
            )
        return (
            f"no pair is in {subset} (agreement {wanted[subset]}): the file's agreements are "
            f"{', '.join(str(a) for a in given[:12])}{' ...' if len(given) > 12 else ''}; choose another --subset"
        )
    return (
        f"none of the {in_subset:,} pairs in {subset} counts: each has no human preference (a gap of 0) or a story "
        "one of the metrics could not score"
    )
