"""``vistkit compare``: several systems x metrics in one table, with bootstrap CIs and significance marks.

Every system is scored like ``vistkit score`` (same metric objects, so a model loads once), restricted to the
items all systems share (the rest are counted and reported), and tested against the baseline system (the
first, or ``--baseline NAME``) by paired bootstrap (default) or approximate randomisation (`vistkit.scores.stats`).

Head to head: for every metric, the share of the items (photo sequences under ``--key sequence``) on which each
system's story is preferred over the baseline's, with a bootstrap CI (`vistkit.meta.pairs.preference_share`).
A pairwise metric (a ranker) is asked per matched pair; any other metric compares its two item scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from vistkit.cli import app
from vistkit.commands.common import (
    AddressOption,
    EngineOption,
    FormatOption,
    GpusPerWorkerOption,
    HypFormatOption,
    KeyOption,
    MetricOptionOption,
    MetricsOption,
    ReferencesOption,
    RefFormatOption,
    TemplateOption,
    WorkersOption,
    check_resamples,
    check_seed,
    echo,
    open_engine,
    parse_metric_names,
    read_references,
)
from vistkit.data.story import Keying, StorySet
from vistkit.errors import InputError
from vistkit.metrics.base import Metric, Score
from vistkit.report.tables import OutputFormat, dumps_json, fmt_number, render_table
from vistkit.scores.stats import DEFAULT_SEED, Comparison

TEST_NAMES = {"bs": "paired bootstrap", "ar": "approximate randomisation"}


def system_names(paths: list[Path], names: list[str]) -> list[str]:
    """``--name`` values, else file stems (made unique with a counter)."""
    if names and len(names) != len(paths):
        raise InputError(f"give one --name per system file ({len(paths)} files, {len(names)} names)")
    raw = names or [("stdin" if str(p) == "-" else p.name.split(".")[0] or p.name) for p in paths]
    out: list[str] = []
    for name in raw:
        candidate, k = name, 2
        while candidate in out:
            candidate, k = f"{name}-{k}", k + 1
        out.append(candidate)
    return out


UNITS = {"sequence": "photo sequences", "story": "stories", "album": "albums"}


def head_to_head(
    metrics: list[Metric],
    scores: dict[str, dict[str, Score]],
    stories: dict[str, StorySet],
    *,
    baseline: str,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    seed: int | None = DEFAULT_SEED,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{metric: {system: {...}}}``: how often each system's story is preferred over the baseline's story of the
    same key (items both systems have; `preference_share` fields plus ``over`` and ``unit``). A ranker is asked
    ``prefer(system story, baseline story)``; another metric compares the two item scores (oriented)."""
    import numpy as np

    from vistkit import progress
    from vistkit.meta.pairs import preference_share
    from vistkit.metrics.base import Ranker

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for metric in metrics:
        base = scores[baseline][metric.name]
        keying = base.keying or Keying.STORY
        out[metric.name] = {}
        for system in scores:
            if system == baseline:
                continue
            other = scores[system][metric.name]
            theirs = set(other.item_ids)
            common = [k for k in base.item_ids if k in theirs]
            if isinstance(metric, Ranker):
                mine, ref = stories[system].by_key(keying), stories[baseline].by_key(keying)
                label = f"{metric.name}: {system} vs {baseline}"
                with progress.task(label, len(common), unit="pairs", verb="compared") as task:
                    diff = metric.preference([mine[k] for k in common], [ref[k] for k in common])
                    task.update(len(common))
            else:
                va = dict(zip(other.item_ids, other.item_scores, strict=True))
                vb = dict(zip(base.item_ids, base.item_scores, strict=True))
                sign = 1.0 if metric.higher_is_better else -1.0
                diff = sign * np.array([va[k] - vb[k] for k in common], dtype=float)
            share = preference_share(diff, confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
            out[metric.name][system] = {"over": baseline, "unit": keying.value, **share}
    return out


def head_to_head_lines(h2h: dict[str, dict[str, dict[str, Any]]], confidence: float) -> list[str]:
    """One sentence per metric and system: "the story of A is preferred over that of B for X% of the photo
    sequences" (no possessive: system names such as "ours" stay grammatical)."""
    lines = []
    for metric, per_system in h2h.items():
        for system, r in per_system.items():
            lines.append(
                f"{metric}: the story of {system} is preferred over that of {r['over']} for {r['share']:.1%} of the "
                f"{UNITS.get(r['unit'], r['unit'])} [{r['ci'][0]:.1%}, {r['ci'][1]:.1%}] "
                f"(ties {r['ties']:.1%}, n={r['n']}, {confidence:.0%} CI)"
            )
    return lines


def comparison_payload(c: Comparison) -> dict[str, Any]:
    """The stable JSON form of a comparison."""
    return {
        "baseline": c.baseline,
        "test": c.test,
        "n_samples": c.n_samples,
        "confidence": c.confidence,
        "n_bootstrap": c.n_bootstrap,
        "seed": c.seed,
        "systems": c.systems,
        "metrics": {
            m: {"signature": c.signatures[m], "n_items": c.n_items[m], "dropped": c.dropped[m]}
            for m in c.metrics
        },
        "results": {
            s: {
                m: {
                    "score": r.score,
                    "ci": r.ci.as_list(),
                    "p_value": r.paired.p_value if r.paired else None,
                    "difference": r.paired.difference if r.paired else None,
                    # the items the paired test ran on: those both systems scored (undefined ones left out)
                    "n_paired": r.paired.n_items if r.paired else None,
                    "mark": r.mark,
                }
                for m, r in c.results[s].items()
            }
            for s in c.systems
        },
    }


def render_comparison(
    c: Comparison, fmt: OutputFormat, h2h: dict[str, dict[str, dict[str, Any]]] | None = None
) -> str:
    """One systems x metrics table: ``score [lo, hi]`` plus ``*`` (p < 0.05) / ``**`` (p < 0.01); the head-to-head
    shares ``h2h`` (when given) under ``"preferred"`` in JSON and as sentences under the text/LaTeX table."""
    if fmt is OutputFormat.JSON:
        return dumps_json({**comparison_payload(c), **({"preferred": h2h} if h2h is not None else {})})
    if fmt is OutputFormat.CSV:
        columns = ["system", "metric", "score", "ci_low", "ci_high", "p_value", "mark", "n_items"]
        rows: list[list[Any]] = []
        for s in c.systems:
            for m in c.metrics:
                r = c.results[s][m]
                p = r.paired.p_value if r.paired else None
                rows.append([s, m, r.score, r.ci.low, r.ci.high, p, r.mark, c.n_items[m]])
        return render_table(columns, rows, fmt)
    columns = ["system", *c.metrics]
    table: list[list[Any]] = []
    for s in c.systems:
        cells: list[Any] = [s + (" (baseline)" if s == c.baseline else "")]
        for m in c.metrics:
            r = c.results[s][m]
            cells.append(f"{fmt_number(r.score)} [{fmt_number(r.ci.low)}, {fmt_number(r.ci.high)}]{r.mark}")
        table.append(cells)
    level = f"{c.confidence:.0%}".replace("%", "% CI")
    notes = [
        f"[lo, hi]: {level} percentile bootstrap, {c.n_bootstrap} resamples of items, seed {c.seed}",
        f"* p < 0.05, ** p < 0.01 against {c.baseline} ({TEST_NAMES[c.test]}, {c.n_samples} samples)",
    ]
    for m in c.metrics:
        lost = {s: k for s, k in c.dropped[m].items() if k}
        extra = f"; not shared, left out: {', '.join(f'{s} {k}' for s, k in lost.items())}" if lost else ""
        notes.append(f"{m}: {c.n_items[m]} items{extra}; {c.signatures[m]}")
        for s in c.systems:  # a test on fewer items than the table's means can even point the other way
            test = c.results[s][m].paired
            if test is not None and test.n_items < c.n_items[m]:
                items = f"{test.n_items} item{'' if test.n_items == 1 else 's'}"
                notes.append(
                    f"  {m}: {s} vs {c.baseline} was tested on the {items} both scored (an undefined score leaves "
                    f"an item out): {fmt_number(test.system)} vs {fmt_number(test.baseline)} there"
                )
    if h2h:
        notes += ["head to head (bootstrap CI over the items both systems have):"]
        notes += ["  " + line for line in head_to_head_lines(h2h, c.confidence)]
    if fmt is OutputFormat.TEXT:  # notes under the table, not squeezed into its width
        return render_table(columns, table, fmt, title="vistkit compare") + "\n".join(notes) + "\n"
    return render_table(columns, table, fmt, title="vistkit compare", caption="\n".join(notes))


@app.command()
def compare(
    systems: list[Path] = typer.Argument(
        ..., metavar="FILE...", help="Two or more system story files (any VIST format; one may be - for stdin)."
    ),
    metrics: list[str] = MetricsOption,
    references: Path | None = ReferencesOption,
    baseline: str | None = typer.Option(
        None, "--baseline", metavar="NAME", help="System the others are tested against (default: the first)."
    ),
    names: list[str] = typer.Option(
        [], "--name", help="Display name per system file, in order (repeatable)."
    ),
    test: str = typer.Option(
        "bs", "--test", metavar="bs|ar", help="bs: paired bootstrap; ar: approximate randomisation."
    ),
    n_samples: int | None = typer.Option(
        None, "--n-samples", help="Resamples / trials of the test (default 1000 for bs, 10000 for ar).",
        callback=check_resamples,
    ),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
    n_bootstrap: int = typer.Option(
        1000, "--n-bootstrap", help="Bootstrap resamples for the intervals.", callback=check_resamples
    ),
    seed: int = typer.Option(
        DEFAULT_SEED, "--seed", help="Random seed (sacreBLEU's default 12345).", callback=check_seed
    ),
    template: Path | None = TemplateOption,
    key: Keying | None = KeyOption,
    fmt: OutputFormat = FormatOption,
    hyp_format: str | None = HypFormatOption,
    ref_format: str | None = RefFormatOption,
    hyp_field: str = typer.Option("text", "--hyp-field", help="Storylet field holding the story."),
    option: list[str] = MetricOptionOption,
    reference_absent: bool = typer.Option(
        False, "--reference-absent", help="Remove each scored story from its own references (Vrank Eq. 3)."
    ),
    engine: str = EngineOption,
    address: str | None = AddressOption,
    workers: int | None = WorkersOption,
    num_gpus_per_worker: float = GpusPerWorkerOption,
) -> None:
    """Compare SYSTEMS on the given metrics: one table with CIs and significance against a baseline."""
    from vistkit import progress
    from vistkit.commands.score import build_metrics, parse_metric_options, score_all, warn_unused_options
    from vistkit.data.readers import read_stories, read_template
    from vistkit.scores.stats import compare_scores

    if len(systems) < 2:
        raise InputError("compare needs at least two system files")
    if test not in TEST_NAMES:
        raise InputError(f"--test {test!r}: use bs (paired bootstrap) or ar (approximate randomisation)")
    labels = system_names(systems, names)
    if baseline is not None and baseline not in labels:
        raise InputError(f"--baseline {baseline!r} is not one of the systems: {', '.join(labels)}")
    metric_names = parse_metric_names(metrics)
    if not metric_names:
        raise InputError("give at least one metric: --metrics sacrebleu,bertscore")
    refs = read_references(references, ref_format)
    seqs = read_template(template) if template is not None else None
    scores: dict[str, dict[str, Any]] = {}
    stories: dict[str, StorySet] = {}
    with open_engine(engine, address, workers, num_gpus_per_worker) as eng:
        per_metric = parse_metric_options(option)
        warn_unused_options(metric_names, per_metric)
        built = build_metrics(metric_names, {}, per_metric, engine=eng)
        for label, path in zip(labels, systems, strict=True):
            hyps = read_stories(path, format=hyp_format, field=hyp_field)
            stories[label] = hyps
            with progress.labelled(label):  # "sysA: bertscore: scored 1,200/2,019 stories ..."
                results = score_all(built, hyps, refs, key=key, template=seqs, reference_absent=reference_absent)
            scores[label] = {r.metric: r for r in results}
    comparison = compare_scores(
        scores,
        baseline=baseline,
        test=test,
        n_samples=n_samples,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    h2h = head_to_head(
        built,
        scores,
        stories,
        baseline=comparison.baseline,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    echo(render_comparison(comparison, fmt, h2h))
