"""``vistkit meta``: how well does a metric agree with people? (meta-evaluation on human-judgement data)

Sub-commands: ``pairs`` (pair accuracy per agreement subset and pair kind), ``gap`` (accuracy by ranking-gap
bucket), ``beats-ref`` (machine-beats-reference ratio), ``compare`` (significance between two metrics' pair
accuracies), ``correlate`` (story/system-level correlations with Likert scores + Williams test), ``errors``
(point-biserial r with binary error labels), and the builders ``build-pairs`` (human-vs-machine proxy pairs)
and ``rankings-to-pairs`` (raw rankings -> VHED pairs). Every assessment prints ``--format
text|json|csv|latex``; ``--report DIR`` also writes tables, figures and a self-contained HTML page.
"""

from __future__ import annotations

import itertools
import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, MetricOptionOption, RefFormatOption, echo, parse_metric_names
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError, VistkitError
from vistkit.report.tables import OutputFormat, dumps_json, render_table

meta_app = typer.Typer(
    help="Meta-evaluation: how well does a metric agree with human judgements?", no_args_is_help=True
)
app.add_typer(meta_app, name="meta")

# ------------------------------------------------------------------------------------------ shared options
MetricsOpt = typer.Option(..., "--metrics", "-m", help="Metric names, comma-separated (`vistkit metrics`).")
RefsOpt = typer.Option(
    None, "--references", "-r", help="Human reference stories (for reference-based metrics)."
)
KeyOpt = typer.Option(None, "--key", "-k", help="Match pairs to references by sequence (img_seq) or story.")
RefAbsentOpt = typer.Option(
    True,
    "--reference-absent/--no-reference-absent",
    help="Reference Absent Algorithm (Vrank Eq. 3): remove a pair's human story from the references.",
)
ReportOpt = typer.Option(None, "--report", help="Also write tables, figures (PNG+PDF) and index.html here.")
LabelSignOpt = typer.Option(
    "auto", "--label-sign", help="How 'label' was subtracted: auto, base-minus-comp or comp-minus-base."
)
StoriesOpt = typer.Option([], "--stories", "-s", help="SYSTEM=FILE[:FIELD] story files, repeatable.")
JudgedKeyOpt = typer.Option(None, "--key", "-k", help="How items match stories/references (story).")
RawGapOpt = typer.Option(False, "--raw-gap", help="Bucket the unnormalised gap instead of gap / N.")
SeedOpt = typer.Option(12345, "--seed", help="Seed of the bootstrap resampling.")
ResamplesOpt = typer.Option(1000, "--bootstrap", help="Number of bootstrap resamples.")


def _command_line(ctx: typer.Context) -> str:
    """The command as the user could retype it: rebuilt from the parsed parameters (defaults left out)."""
    parts = ["vistkit", "meta", ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default or value in ([], ()):
            continue
        is_argument = getattr(param, "param_type_name", "") == "argument"
        if isinstance(value, bool) and not is_argument:
            flag = param.opts[0] if value else (getattr(param, "secondary_opts", None) or [""])[0]
            parts += [flag] if flag else []
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            text = str(getattr(v, "value", v))
            parts += [text] if is_argument else [param.opts[0], text]
    return " ".join(shlex.quote(p) for p in parts)


SKIPPED: dict[str, str] = {}
TOLERANT: list[bool] = [False]  # --metrics all: a metric that cannot score this input is skipped, not fatal


def _metrics(names: str | list[str], option: list[str]) -> list[Any]:
    """Build the named metrics. ``all``: every registered metric that can run here; the others (a model that
    is not installed, images not given) are skipped with their reason (stderr and ``"skipped"`` in JSON)."""
    from vistkit.commands.score import build_metrics, parse_metric_options
    from vistkit.metrics.base import list_metrics

    SKIPPED.clear()
    TOLERANT[0] = False
    parsed = parse_metric_names(names)
    if not parsed:
        raise InputError("give at least one metric: --metrics NAME[,NAME] (or --metrics all)")
    per_metric = parse_metric_options(option)
    if parsed != ["all"]:
        return build_metrics(parsed, {}, per_metric)
    TOLERANT[0] = True
    built = []
    for name, cls in list_metrics().items():
        if cls.needs_images and not per_metric.get(name):
            SKIPPED[name] = "needs images: pass --option NAME.images=FOLDER"
            continue
        try:
            built += build_metrics([name], {}, per_metric)
        except (VistkitError, ImportError, OSError) as exc:
            SKIPPED[name] = str(exc).split(";")[0]
    for name, why in SKIPPED.items():
        typer.secho(f"skipped {name}: {why}", err=True, fg=typer.colors.YELLOW)
    if not built:
        raise InputError("no registered metric can run here; see `vistkit metrics`")
    return built


def _skip_or_raise(name: str, exc: VistkitError) -> None:
    """A metric that failed on this input: skipped with its reason under ``--metrics all``, else re-raised."""
    if not TOLERANT[0]:
        raise exc
    SKIPPED[name] = str(exc)
    typer.secho(f"skipped {name}: {exc}", err=True, fg=typer.colors.YELLOW)


def _references(path: Path | None, fmt: str | None) -> StorySet | None:
    if path is None:
        return None
    from vistkit.data.readers import read_stories

    return read_stories(path, format=fmt, system="human")


def _score_all_pairs(
    metrics: list[Any], pairs: list[Any], refs: StorySet | None, key: Keying | None, reference_absent: bool
) -> list[Any]:
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from vistkit.meta.scoring import score_pairs

    out = []
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        for metric in metrics:
            task = progress.add_task(f"scoring {len(pairs)} pairs with {metric.name}", total=None)
            try:
                out.append(
                    score_pairs(metric, pairs, references=refs, key=key, reference_absent=reference_absent)
                )
            except VistkitError as exc:
                _skip_or_raise(metric.name, exc)
            progress.remove_task(task)
    if not out:
        raise InputError("no metric could score these pairs (see the reasons above)")
    return out


def _load_pairs(path: Path, label_sign: str) -> list[Any]:
    from vistkit.meta.human import read_pairs

    return read_pairs(path, label_sign=label_sign)


def _emit(
    payload: dict[str, Any],
    columns: list[str],
    rows: list[list[Any]],
    fmt: OutputFormat,
    title: str,
    caption: str,
) -> None:
    if SKIPPED:
        payload = {**payload, "skipped": dict(SKIPPED)}
    if fmt is OutputFormat.JSON:
        echo(dumps_json(payload))
    elif fmt is OutputFormat.TEXT:  # signatures below the table (a rich caption wraps them)
        echo(render_table(columns, rows, fmt, title=title))
        echo(caption)
    else:
        echo(render_table(columns, rows, fmt, title=title, caption=caption))


def _proxy_note(n: int) -> str:
    if not n:
        return ""
    return (
        f"\nnote: {n} pairs carry a PROXY label (the human story is assumed better): accuracy = how often "
        "the metric prefers the human story, not agreement with human judgements"
    )


def _sig_caption(signatures: dict[str, str]) -> str:
    return "\n".join(f"{m}: {s}" for m, s in signatures.items())


# ------------------------------------------------------------------------------------------ pairs
def pairs_assessment(
    pairs: list[Any],
    scores: list[Any],
    *,
    edges: tuple[float, ...],
    normalised: bool,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Everything the pair sub-commands print and the report shows, as one JSON-ready dict."""
    from vistkit.meta.pairs import (
        SUBSETS,
        accuracy_by_gap,
        accuracy_by_kind,
        beats_reference,
        pair_accuracy,
        pair_correct,
    )
    from vistkit.meta.significance import pairwise_comparisons

    acc = {s.metric: pair_accuracy(s, pairs) for s in scores}
    correct = {s.metric: pair_correct(s, pairs) for s in scores}
    comparisons = pairwise_comparisons(
        [s.metric for s in scores], correct, n_resamples=n_resamples, seed=seed
    )
    return {
        "pairs": len(pairs),
        "zero_gap_pairs": sum(1 for p in pairs if p.gap == 0),
        "proxy_label_pairs": sum(1 for p in pairs if p.meta.get("label", "").startswith("proxy")),
        "label_sign": sorted({p.meta["label_sign"] for p in pairs if "label_sign" in p.meta}),
        "accuracy": {m: {k: v[k]["accuracy"] for k in SUBSETS} for m, v in acc.items()},
        "n": {m: {k: v[k]["n"] for k in SUBSETS} for m, v in acc.items()},
        "by_kind": {s.metric: accuracy_by_kind(s, pairs) for s in scores},
        "by_gap": {s.metric: accuracy_by_gap(s, pairs, edges=edges, normalised=normalised) for s in scores},
        "gap_edges": list(edges),
        "gap_normalised": normalised,
        "beats_reference": {
            "human": beats_reference(None, pairs),
            **{s.metric: beats_reference(s, pairs) for s in scores},
        },
        "comparisons": comparisons,
        "signatures": {s.metric: s.signature for s in scores},
        "excluded": {s.metric: len(s.excluded) for s in scores},
    }


def _prepare(
    pairs_csv: Path,
    metrics: str | list[str],
    references: Path | None,
    ref_format: str | None,
    key: Keying | None,
    reference_absent: bool,
    option: list[str],
    label_sign: str,
) -> tuple[list[Any], list[Any]]:
    pairs = _load_pairs(pairs_csv, label_sign)
    built = _metrics(metrics, option)
    refs = _references(references, ref_format)
    return pairs, _score_all_pairs(built, pairs, refs, key, reference_absent)


@meta_app.command("pairs")
def pairs_cmd(
    ctx: typer.Context,
    pairs_csv: Path = typer.Argument(..., help="Pairs CSV in the VHED layout (sent1, sent2, label, ...)."),
    metrics: list[str] = MetricsOpt,
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = KeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    label_sign: str = LabelSignOpt,
    gap_edges: str = typer.Option("0,0.2,0.4,0.6,1", "--gap-edges", help="Ranking-gap bucket edges."),
    raw_gap: bool = RawGapOpt,
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Story-pair ranking accuracy (Vrank Eq. 1-2) per agreement subset and per pair kind."""
    from vistkit.meta.pairs import accuracy_table, parse_edges

    edges = parse_edges(gap_edges)
    pairs, scores = _prepare(
        pairs_csv, metrics, references, ref_format, key, reference_absent, option, label_sign
    )
    result = pairs_assessment(
        pairs, scores, edges=edges, normalised=not raw_gap, n_resamples=n_resamples, seed=seed
    )
    cols, rows = accuracy_table(result)
    _emit(
        result,
        cols,
        rows,
        fmt,
        "pair accuracy (Vrank Eq. 1-2; ties are wrong)",
        _sig_caption(result["signatures"])
        + f"\nlabel sign: {', '.join(result['label_sign']) or 'n/a'} (lower rank is better)"
        + _proxy_note(result["proxy_label_pairs"]),
    )
    if report is not None:
        from vistkit.report.html import pairs_report

        pairs_report(report, pairs, scores, result, command=_command_line(ctx))


@meta_app.command("gap")
def gap_cmd(
    ctx: typer.Context,
    pairs_csv: Path = typer.Argument(..., help="Pairs CSV in the VHED layout."),
    metrics: list[str] = MetricsOpt,
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = KeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    label_sign: str = LabelSignOpt,
    gap_edges: str = typer.Option("0,0.2,0.4,0.6,1", "--gap-edges", help="Bucket edges, comma-separated."),
    raw_gap: bool = RawGapOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Pair accuracy by ranking-gap bucket (Vrank Fig. 3)."""
    from vistkit.meta.pairs import accuracy_by_gap, gap_table, parse_edges

    edges = parse_edges(gap_edges)
    pairs, scores = _prepare(
        pairs_csv, metrics, references, ref_format, key, reference_absent, option, label_sign
    )
    by_gap = {s.metric: accuracy_by_gap(s, pairs, edges=edges, normalised=not raw_gap) for s in scores}
    signatures = {s.metric: s.signature for s in scores}
    payload: dict[str, Any] = {
        "by_gap": by_gap,
        "gap_edges": list(edges),
        "gap_normalised": not raw_gap,
        "signatures": signatures,
    }
    cols, rows = gap_table(by_gap)
    _emit(
        payload,
        cols,
        rows,
        fmt,
        "accuracy by ranking gap (Vrank Fig. 3)",
        _sig_caption(signatures),
    )
    if report is not None:
        from vistkit.report.html import pairs_report

        result = pairs_assessment(
            pairs, scores, edges=edges, normalised=not raw_gap, n_resamples=200, seed=12345
        )
        pairs_report(report, pairs, scores, result, command=_command_line(ctx))


@meta_app.command("beats-ref")
def beats_ref_cmd(
    pairs_csv: Path = typer.Argument(
        ..., help="Pairs CSV in the VHED layout (with reference-machine pairs)."
    ),
    metrics: list[str] = MetricsOpt,
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = KeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    label_sign: str = LabelSignOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Machine-beats-reference ratio per system, by people and by each metric (Vrank Fig. 4)."""
    from vistkit.meta.pairs import beats_reference

    pairs, scores = _prepare(
        pairs_csv, metrics, references, ref_format, key, reference_absent, option, label_sign
    )
    data = {"human": beats_reference(None, pairs), **{s.metric: beats_reference(s, pairs) for s in scores}}
    payload = {"beats_reference": data, "signatures": {s.metric: s.signature for s in scores}}
    cols = ["judge", "system", "ratio", "ties", "n"]
    rows = [
        [j, sysname, v["ratio"], v["tie_ratio"], v["n"]] for j, d in data.items() for sysname, v in d.items()
    ]
    _emit(
        payload,
        cols,
        rows,
        fmt,
        "machine-beats-reference ratio (Vrank Fig. 4)",
        _sig_caption(payload["signatures"]),
    )


@meta_app.command("compare")
def compare_cmd(
    pairs_csv: Path = typer.Argument(..., help="Pairs CSV in the VHED layout."),
    metrics: list[str] = MetricsOpt,
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = KeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    label_sign: str = LabelSignOpt,
    subset: str = typer.Option("all", "--subset", help="all, omega_3, omega_4, omega_5 or omega_4_5."),
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Is metric A's pair accuracy significantly different from metric B's? (McNemar + paired bootstrap)"""
    from vistkit.meta.pairs import SUBSETS, pair_correct, subset_masks
    from vistkit.meta.significance import COMPARISON_COLUMNS, comparison_row, pairwise_comparisons

    if subset not in SUBSETS:
        raise InputError(f"--subset must be one of {', '.join(SUBSETS)}")
    pairs, scores = _prepare(
        pairs_csv, metrics, references, ref_format, key, reference_absent, option, label_sign
    )
    if len(scores) < 2:
        raise InputError("compare needs at least two metrics: --metrics A,B")
    mask = subset_masks(pairs)[subset]
    correct = {s.metric: np.where(mask, pair_correct(s, pairs), math.nan) for s in scores}
    comps = pairwise_comparisons(list(correct), correct, n_resamples=n_resamples, seed=seed)
    signatures = {s.metric: s.signature for s in scores}
    payload: dict[str, Any] = {"subset": subset, "comparisons": comps, "signatures": signatures}
    cols = [*COMPARISON_COLUMNS, "n"]
    rows = [[*comparison_row(c), c["mcnemar"]["n"]] for c in comps]
    _emit(payload, cols, rows, fmt, f"pair accuracy, A vs B ({subset})", _sig_caption(signatures))


# ------------------------------------------------------------------------------------------ judged stories
def _parse_story_files(values: list[str]) -> dict[str, tuple[Path, str]]:
    out: dict[str, tuple[Path, str]] = {}
    for v in values:
        if "=" not in v:
            raise InputError(
                f"--stories {v!r}: write SYSTEM=FILE or SYSTEM=FILE:FIELD "
                "(e.g. pr-vist=PR_VIST.json.zip:predicted_story)"
            )
        name, path = v.split("=", 1)
        field = "text"
        if ":" in path and not Path(path).exists():
            path, field = path.rsplit(":", 1)
        out[name.strip()] = (Path(path), field)
    return out


def judged_stories(table: Any, story_files: list[str], key: Keying | None) -> list[Story]:
    """One `Story` per judged (system, item): text from the table's ``text`` column or from ``--stories``
    files (``SYSTEM=FILE``, matched by ``--key``; default story id)."""
    from vistkit.data.readers import read_stories
    from vistkit.meta.human import is_reference_system, parse_img_seq

    keying = key or Keying.STORY
    files = _parse_story_files(story_files)
    loaded: dict[str, dict[str, Story]] = {}
    for name, (path, field) in files.items():
        loaded[name] = read_stories(path, field=field, system=name).by_key(keying)
    out = []
    for system, item, text in zip(table.systems, table.items, table.texts, strict=True):
        sysname = "human" if is_reference_system(system) else system
        if system in loaded:
            story = loaded[system].get(item)
            if story is None:
                raise InputError(f"--stories {system}: no story with {keying.value} key {item!r}")
            out.append(
                Story(story.story_id, story.text, story.sentences, story.photo_ids, story.album_id, sysname)
            )
        elif text:
            photos = parse_img_seq(item) if keying is Keying.SEQUENCE else ()
            out.append(Story(story_id=item, text=text, photo_ids=photos, system=sysname))
        else:
            raise InputError(
                f"no text for system {system!r} item {item!r}: add a 'text' column "
                f"or pass --stories {system}=FILE"
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
    table: Any,
    metrics: str | list[str],
    option: list[str],
    story_files: list[str],
    references: Path | None,
    ref_format: str | None,
    key: Keying | None,
    reference_absent: bool,
) -> tuple[list[Story], dict[str, np.ndarray], dict[str, str], list[str]]:
    """Build the metrics and score every judged story of a Likert or error-label table: the stories, the
    scores and signatures per metric, and the names of the lower-is-better metrics."""
    built = _metrics(metrics, option)
    judged = judged_stories(table, story_files, key)
    values, sigs = _score_judged(built, judged, _references(references, ref_format), key, reference_absent)
    lower = [m.name for m in built if not m.higher_is_better]
    return judged, values, sigs, lower


def _oriented(values: dict[str, np.ndarray], lower_is_better: list[str]) -> dict[str, np.ndarray]:
    """Scores turned so that higher is better (lower-is-better metrics negated): r > 0 means agreement."""
    return {m: (-v if m in lower_is_better else v) for m, v in values.items()}


@meta_app.command("correlate")
def correlate_cmd(
    ctx: typer.Context,
    likert_csv: Path = typer.Argument(..., help="Likert table: system, item, worker, one column per aspect."),
    metrics: list[str] = MetricsOpt,
    stories: list[str] = StoriesOpt,
    aspects: str | None = typer.Option(
        None, "--aspects", help="Aspect columns (default: all numeric columns)."
    ),
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = JudgedKeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    level: str = typer.Option("both", "--level", help="story, system or both."),
    kendall: str = typer.Option("b", "--kendall", help="Kendall tau variant: b (ties corrected) or c."),
    n_resamples: int = ResamplesOpt,
    seed: int = SeedOpt,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Pearson, Spearman and Kendall tau-b of metric scores with human scores (story and system level,
    bootstrap CIs), and the Williams test between every two metrics."""
    from vistkit.meta.human import read_likert

    if level not in ("story", "system", "both"):
        raise InputError("--level must be story, system or both")
    table = read_likert(likert_csv, aspects=parse_metric_names(aspects) if aspects else None)
    judged, values, sigs, lower = _score_table(
        table, metrics, option, stories, references, ref_format, key, reference_absent
    )
    result = correlation_assessment(
        table, _oriented(values, lower), level=level, n_resamples=n_resamples, seed=seed, kendall=kendall
    )
    result["signatures"] = sigs
    result["lower_is_better"] = lower
    cols = ["level", "metric", "aspect", "method", "r", "ci low", "ci high", "p", "n"]
    rows = [
        [r["level"], r["metric"], r["aspect"], r["method"], r["r"], r["ci"][0], r["ci"][1], r["p"], r["n"]]
        for r in result["correlations"]
    ]
    _emit(result, cols, rows, fmt, "correlation with human scores (Kendall = tau-b)", _sig_caption(sigs))
    if report is not None:
        from vistkit.report.html import correlation_report

        correlation_report(report, table, judged, values, result, command=_command_line(ctx))


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
    (Pearson) between every two metrics at each level. ``kendall``: tau-b (default) or tau-c."""
    from vistkit.meta.correlation import (
        compare_correlations,
        correlation_ci,
        system_correlation_ci,
        system_means,
    )

    if kendall not in ("b", "c"):
        raise InputError("--kendall must be b or c")
    kendall_method = "kendall" if kendall == "b" else "kendall_c"
    levels = ("story", "system") if level == "both" else (level,)
    rows: list[dict[str, Any]] = []
    williams: list[dict[str, Any]] = []
    for aspect in table.aspects:
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
                    np.array(list(system_means(systems, v[keep]).values()))
                    for v in (human, values[a], values[b])
                )
                test = compare_correlations(h, va, vb, method="pearson")
                williams.append({"level": "system", "aspect": aspect, "a": a, "b": b, **test})
    return {
        "correlations": rows,
        "williams": williams,
        "kendall_variant": kendall,
        "n_stories": len(table),
        "aspects": table.aspects,
        "note": "scores of lower-is-better metrics are negated, so r > 0 always means agreement with people",
    }


@meta_app.command("errors")
def errors_cmd(
    ctx: typer.Context,
    labels_csv: Path = typer.Argument(..., help="Error labels: system, item, one 0/1 column per error type."),
    metrics: list[str] = MetricsOpt,
    stories: list[str] = StoriesOpt,
    errors: str | None = typer.Option(
        None, "--errors", help="Error columns (default: all; e.g. Gram,Rep,Desc)."
    ),
    references: Path | None = RefsOpt,
    ref_format: str | None = RefFormatOption,
    key: Keying | None = JudgedKeyOpt,
    reference_absent: bool = RefAbsentOpt,
    option: list[str] = MetricOptionOption,
    fmt: OutputFormat = FormatOption,
    report: Path | None = ReportOpt,
) -> None:
    """Point-biserial correlation of metric scores with binary error labels (Vrank Table 5)."""
    from vistkit.meta.correlation import point_biserial
    from vistkit.meta.human import read_error_labels

    table = read_error_labels(labels_csv, errors=parse_metric_names(errors) if errors else None)
    _, values, sigs, lower = _score_table(
        table, metrics, option, stories, references, ref_format, key, reference_absent
    )
    oriented = _oriented(values, lower)
    result = {m: {e: point_biserial(v, table.column(e)) for e in table.aspects} for m, v in oriented.items()}
    payload = {
        "point_biserial": result,
        "signatures": sigs,
        "n_stories": len(table),
        "lower_is_better": lower,
        "note": "scores of lower-is-better metrics are negated: "
        "r < 0 means stories with the error score worse",
    }
    cols = ["metric", "error", "r", "p", "n", "with error"]
    rows = [[m, e, v["r"], v["p"], v["n"], v["n_error"]] for m, d in result.items() for e, v in d.items()]
    _emit(payload, cols, rows, fmt, "point-biserial r with error labels (Vrank Table 5)", _sig_caption(sigs))
    if report is not None:
        from vistkit.report.html import errors_report

        errors_report(report, table.aspects, payload, cols, rows, command=_command_line(ctx))


# ------------------------------------------------------------------------------------------ builders
@meta_app.command("build-pairs")
def build_pairs_cmd(
    references: Path = typer.Option(..., "--references", "-r", help="Human stories (e.g. PR_VIST.json.zip)."),
    machine: list[str] = typer.Option(
        ..., "--machine", help="SYSTEM=FILE[:FIELD] machine stories, repeatable."
    ),
    key: list[str] = typer.Option(
        [], "--key", "-k", help="SYSTEM=story|sequence per machine file (default story)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs CSV to write (VHED layout)."),
    ref_format: str | None = RefFormatOption,
    limit: int | None = typer.Option(None, "--limit", help="Keep only the first N pairs per system."),
) -> None:
    """Human-vs-machine pairs in the VHED layout with the PROXY label "the human story is better"."""
    from vistkit.data.readers import read_stories
    from vistkit.meta.human import build_reference_pairs, write_pairs

    refs = read_stories(references, format=ref_format, system="human")
    keys = dict(_split_eq(k, "--key") for k in key)
    pairs = []
    for name, (path, field) in _parse_story_files(machine).items():
        m = read_stories(path, field=field, system=name)
        got = build_reference_pairs(refs, [m], key=keys.get(name, "story"))
        pairs += got[:limit] if limit else got
    write_pairs(pairs, output)
    echo(f"wrote {len(pairs)} pairs to {output} (label is a proxy: the human story is assumed better)")


def _split_eq(v: str, opt: str) -> tuple[str, str]:
    if "=" not in v:
        raise InputError(f"{opt} {v!r}: write SYSTEM=VALUE")
    a, b = v.split("=", 1)
    return a.strip(), b.strip()


@meta_app.command("rankings-to-pairs")
def rankings_to_pairs_cmd(
    rankings_csv: Path = typer.Argument(
        ..., help="Raw rankings: task, worker, story, rank (+ text, system, ...)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs CSV to write (VHED layout)."),
) -> None:
    """Turn raw rankings into VHED-style pairs (C(N,2) per task, agreement folded to 3/4/5, zero gaps
    dropped)."""
    from vistkit.meta.human import pairs_from_rankings, read_rankings, write_pairs

    pairs = pairs_from_rankings(read_rankings(rankings_csv))
    write_pairs(pairs, output)
    echo(f"wrote {len(pairs)} pairs to {output}")
