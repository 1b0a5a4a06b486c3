"""Options and helpers shared by the ``vistkit meta`` sub-commands."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import shlex
import typing
from collections.abc import Callable
from copy import copy
from pathlib import Path
from typing import Any

import typer

from vistkit.commands.common import (
    AddressOption,
    EngineOption,
    GpusPerWorkerOption,
    MetricOptionOption,
    RefFormatOption,
    WorkersOption,
    check_engine,
    check_resamples,
    check_seed,
    echo,
    note,
    open_engine,
    parse_metric_names,
    read_references,
)
from vistkit.data.story import Keying, StorySet
from vistkit.errors import InputError, VistkitError
from vistkit.report.tables import OutputFormat, dumps_json, render_table

# ------------------------------------------------------------------------------------------ shared options
MetricsOpt = typer.Option(
    ..., "--metrics", "-m", metavar="METRICS", help="Metric names, comma-separated (`vistkit metrics`), or all."
)
RefsOpt = typer.Option(
    None, "--references", "-r", metavar="FILE", help="Human reference stories (for reference-based metrics)."
)
KeyOpt = typer.Option(
    None, "--key", "-k", metavar="KEY", help="Match pairs to references by sequence (img_seq) or story."
)
RefAbsentOpt = typer.Option(
    True,
    "--reference-absent/--no-reference-absent",
    help="Reference Absent Algorithm (Vrank Eq. 3): remove a pair's human story from the references.",
)
ReportOpt = typer.Option(
    None, "--report", metavar="FOLDER", help="Also write tables, figures (PNG+PDF) and index.html here."
)
LabelSignOpt = typer.Option(
    "auto",
    "--label-sign",
    metavar="auto|base-minus-comp|comp-minus-base",
    help="How 'label' was subtracted: auto, base-minus-comp or comp-minus-base.",
)
StoriesOpt = typer.Option(
    [],
    "--stories",
    "-s",
    metavar="SYSTEM=FILE",
    help="SYSTEM=FILE[:FIELD] story files (FILE may be ARCHIVE.zip:MEMBER), repeatable.",
)
JudgedKeyOpt = typer.Option(
    None, "--key", "-k", metavar="KEY", help="How items match stories/references (story or sequence)."
)
RawGapOpt = typer.Option(False, "--raw-gap", help="Bucket the unnormalised gap instead of gap / N.")
SeedOpt = typer.Option(12345, "--seed", callback=check_seed, help="Seed of the bootstrap resampling.")
ResamplesOpt = typer.Option(
    1000, "--bootstrap", "--n-bootstrap", callback=check_resamples, help="Number of bootstrap resamples."
)


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


def _report(folder: Path, write: Callable[[], Any]) -> None:
    """Run a report writer, then say on stderr where it wrote what (page, figures, tables), and which names the
    figures show shortened or escaped (`vistkit.report.plots.label_notes`; the page says it too)."""
    import time

    from vistkit.report.html import describe_written
    from vistkit.report.plots import label_notes, reset_label_notes

    start = time.time()
    reset_label_notes()
    write()
    typer.echo(describe_written(folder, start), err=True)
    for line in label_notes(limit=3):
        note(f"note: {line[:1].lower()}{line[1:]}")


SKIPPED: dict[str, str] = {}
TOLERANT: list[bool] = [False]  # --metrics all: a metric that cannot score this input is skipped, not fatal


def _metrics(
    names: str | list[str],
    option: list[str],
    engine: Any = None,
    *,
    pairs: list[Any] | None = None,
    refs: StorySet | None = None,
    key: Keying | None = None,
) -> list[Any]:
    """Build the named metrics. ``all``: every registered metric that can run here; the others (a model that
    is not installed, images not given, and, given ``pairs``, references missing or sharing no key with them:
    `_reference_problem`, before the metric is built) are skipped with their reason (stderr and ``"skipped"`` in
    JSON)."""
    from vistkit.commands.score import build_metrics, parse_metric_options, warn_unused_options
    from vistkit.metrics.base import list_metrics

    SKIPPED.clear()
    TOLERANT[0] = False
    parsed = parse_metric_names(names)
    if not parsed:
        raise InputError("give at least one metric: --metrics NAME[,NAME] (or --metrics all)")
    per_metric = parse_metric_options(option)
    if parsed != ["all"]:
        warn_unused_options(parsed, per_metric)
        return build_metrics(parsed, {}, per_metric, engine=engine)
    TOLERANT[0] = True
    built = []
    problem = _reference_problem(pairs, refs, key) if pairs is not None else None
    for name, cls in list_metrics().items():
        if cls.needs_images and not per_metric.get(name):
            SKIPPED[name] = "needs images: pass --option NAME.images=FOLDER"
            continue
        if problem is not None and _uses_references(cls):  # no reference could serve: not worth its model
            SKIPPED[name] = f"{name}{problem}"
            continue
        try:
            built += build_metrics([name], {}, per_metric, engine=engine)
        except (VistkitError, ImportError, OSError) as exc:
            SKIPPED[name] = str(exc)  # whole: what follows a ';' often says how to provide what is missing
    for name, why in SKIPPED.items():
        note(f"skipped {name}: {why}")
    if not built:
        raise InputError("no registered metric can run here; see `vistkit metrics`")
    return built


def _check_metrics(
    names: str | list[str],
    option: list[str],
    *,
    local: bool = True,
    pairs: list[Any] | None = None,
    refs: StorySet | None = None,
    key: Keying | None = None,
) -> None:
    """The checks of `_metrics` that need no model: metric names, ``--option`` names and values, and (given
    ``pairs``) that every reference-based metric has references sharing a key with the pairs (`_check_pair_keys`).
    ``local``: the metrics are built on this machine (not on a Ray cluster)."""
    from vistkit.commands.score import parse_metric_options, plan_metrics

    parsed = parse_metric_names(names)
    per_metric = parse_metric_options(option)
    if parsed and parsed != ["all"]:
        plans = plan_metrics(parsed, {}, per_metric, local=local)
        if pairs is not None:
            _check_pair_keys([cls for cls, _ in plans], pairs, refs, key)


def _check_pair_keys(classes: list[Any], pairs: list[Any], refs: StorySet | None, key: Keying | None) -> None:
    """What `vistkit.meta.scoring.score_pairs` would refuse once the metric is built: a reference-based metric
    without references, or with references that share no key with any pair (`_reference_problem`)."""
    problem = _reference_problem(pairs, refs, key)
    for cls in classes:
        if problem is not None and _uses_references(cls):
            raise InputError(f"{cls.name}{problem}")


def _uses_references(cls: Any) -> bool:
    """Whether the metric class scores a pair against references (a ranker compares the pair's two stories)."""
    from vistkit.metrics.base import Ranker

    return bool(cls.needs_references) and not issubclass(cls, Ranker)


def _reference_problem(pairs: list[Any], refs: StorySet | None, key: Keying | None) -> str | None:
    """Why no reference-based metric can score any of ``pairs``, as the rest of a sentence after the metric's
    name: no references, or none sharing a key with a pair (``--key``, by default sequence when every pair has
    an img_seq); None when they can. The same for every such metric, so computed once."""
    from vistkit.meta.scoring import _pair_key

    if not pairs:
        return None
    if refs is None:
        return " is reference-based: pass --references FILE (the human stories)"
    keying = key if key is not None else (Keying.SEQUENCE if all(p.img_seq for p in pairs) else Keying.STORY)
    keys = [_pair_key(p, keying) for p in pairs]
    if set(keys) & set(refs.group(keying)):
        return None
    return (
        f": no pair could be scored, as no reference story has the {keying.value} key of any pair (the first "
        f"pair's is {keys[0]!r}): check --references and --key"
    )


def _skip_or_raise(name: str, exc: VistkitError) -> None:
    """A metric that failed on this input: skipped with its reason under ``--metrics all``, else re-raised."""
    if not TOLERANT[0]:
        raise exc
    SKIPPED[name] = str(exc)
    note(f"skipped {name}: {exc}")


def _references(path: Path | None, fmt: str | None) -> StorySet | None:
    return read_references(path, fmt, system="human")


def _score_all_pairs(
    metrics: list[Any], pairs: list[Any], refs: StorySet | None, key: Keying | None, reference_absent: bool
) -> list[Any]:
    from vistkit import progress
    from vistkit.meta.scoring import score_pairs

    out = []
    for metric in metrics:
        with progress.task(metric.name, len(pairs), unit="pairs") as task:
            try:
                out.append(score_pairs(metric, pairs, references=refs, key=key, reference_absent=reference_absent))
                task.update(len(pairs))
            except VistkitError as exc:
                _skip_or_raise(metric.name, exc)
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
    if fmt is OutputFormat.CSV:
        columns, rows = _with_signature_columns(columns, rows, payload.get("signatures"))
    if fmt is OutputFormat.JSON:
        echo(dumps_json(payload))
    elif fmt is OutputFormat.TEXT:  # signatures below the table (a rich caption wraps them)
        echo(render_table(columns, rows, fmt, title=title))
        echo(caption)
    else:
        echo(render_table(columns, rows, fmt, title=title, caption=caption))
        if fmt is OutputFormat.CSV and caption.strip():  # a CSV has no caption: signatures and notes on stderr
            note(caption.strip("\n"))


def _with_signature_columns(
    columns: list[str], rows: list[list[Any]], signatures: Any
) -> tuple[list[str], list[list[Any]]]:
    """A CSV's rows with each metric's signature beside it (as `score -f csv`): a ``signature`` column after a
    ``metric`` / ``judge`` column, ``signature A`` / ``signature B`` for a comparison of metrics A and B. A CSV has
    no caption, and its notes on stderr are easily lost."""
    if not isinstance(signatures, dict) or not signatures:
        return columns, rows
    named = [c for c in ("metric", "judge", "A", "B") if c in columns]
    if not named:
        return columns, rows
    extra = ["signature" if c in ("metric", "judge") else f"signature {c}" for c in named]
    index = [columns.index(c) for c in named]
    return [*columns, *extra], [[*row, *(signatures.get(row[i], "") for i in index)] for row in rows]


def _proxy_note(n: int) -> str:
    if not n:
        return ""
    return (
        f"\nnote: {n} pairs carry a PROXY label (the human story is assumed better): accuracy = how often "
        "the metric prefers the human story, not agreement with human judgements"
    )


def _left_out_note(result: dict[str, Any]) -> str:
    """What the accuracy table leaves out: pairs without a human preference, stories a metric cannot score."""
    lines = []
    if result.get("zero_gap_pairs"):
        lines.append(
            f"note: {result['zero_gap_pairs']} of {result['pairs']} pairs have no human preference (a gap of 0) "
            "and are left out"
        )
    for metric, n in result.get("excluded", {}).items():  # pairs (a story shared by three pairs counts thrice)
        if n:
            lines.append(
                f"note: {metric}: {n} pair{'' if n == 1 else 's'} left out (a story of "
                f"{'it' if n == 1 else 'each'} has no score)"
            )
    return "".join("\n" + line for line in lines)


def _outside_note(result: dict[str, Any]) -> str:
    """Under a gap table: how many pairs with a human preference lie outside every bucket of the edges."""
    n = result.get("outside_gap_buckets", 0)
    if not n:
        return ""
    edges = result["gap_edges"]
    return (
        f"\nnote: {n} pair{'s' if n != 1 else ''} with a human preference {'have' if n != 1 else 'has'} a ranking "
        f"gap outside the buckets ({edges[0]:g} to {edges[-1]:g}) and {'are' if n != 1 else 'is'} in no bucket; "
        "widen --gap-edges (or use auto) to count them"
    )


def _gap_normalised(pairs: list[Any], raw_gap: bool) -> tuple[bool, str]:
    """Whether the gap buckets are on gap / N, and a note when they cannot be: with ``--raw-gap`` they are not;
    nor when no pair gives its N (``order``) or a ``rank_norm`` (`vistkit.meta.human.read_pairs` refuses a file
    in which only some do), whose gaps stay in rank units: they were labelled ``gap_normalised: true``."""
    if raw_gap:
        return False, ""
    if any(p.n_stories or p.gap_norm is not None for p in pairs):
        return True, ""
    return False, (
        "\nnote: no pair gives its order (the number of stories ranked) or rank_norm, so the ranking gaps cannot be "
        "divided by N: the gap buckets are in rank units, as with --raw-gap"
    )


def _resamples_note(payload: dict[str, Any], n_resamples: int) -> str:
    """The caption note (after a new line) when ``n_resamples`` are too few for a 95% interval
    (`vistkit.meta.resample.few_resamples`: ``--bootstrap 1`` gives a "95% CI" of one resample), also put in
    ``payload`` as ``resamples_note``; else ``""``."""
    from vistkit.meta.resample import few_resamples

    if not (text := few_resamples(n_resamples)):
        return ""
    payload["resamples_note"] = text
    return f"\nnote: {text}"


def _interval_notes(result: dict[str, Any]) -> list[str]:
    """The report page's sentences on accuracy intervals that are exact binomial ones (`pairs_assessment`'s
    ``accuracy_ci_exact``: every counted pair right, or every one wrong), one per reason."""
    by_reason: dict[str, list[str]] = {}
    for metric, reason in result.get("accuracy_ci_exact", {}).items():
        by_reason.setdefault(reason, []).append(metric)
    return [f"Pair accuracy of {', '.join(ms)}: {reason}." for reason, ms in by_reason.items()]


def _page_notes(caption: str) -> list[str]:
    """The ``note:`` lines of a printed table's caption as sentences for the ``--report`` page, so that the page
    says what the printed table says (pairs left out, undefined coefficients and why, tied annotators)."""
    return [line.removeprefix("note: ") for line in caption.splitlines() if line.startswith("note: ")]


def _sig_caption(signatures: dict[str, str]) -> str:
    return "\n".join(f"{m}: {s}" for m, s in signatures.items())


# ------------------------------------------------------------------------------------------ pairs
def pairs_assessment(
    pairs: list[Any],
    scores: list[Any],
    *,
    edges: tuple[float, ...] | None,
    normalised: bool,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Everything the pair sub-commands print and the report shows, as one JSON-ready dict. ``edges`` None:
    gap buckets chosen from the data (none when every pair has the same gap)."""
    import numpy as np

    from vistkit.meta.pairs import (
        EXACT_INTERVAL,
        SUBSETS,
        accuracy_by_gap,
        accuracy_by_kind,
        accuracy_interval,
        all_alike,
        auto_gap_edges,
        beats_reference,
        gaps_outside,
        pair_accuracy,
        pair_correct,
    )
    from vistkit.meta.resample import bootstrap_progress
    from vistkit.meta.significance import pairwise_comparisons

    acc = {s.metric: pair_accuracy(s, pairs) for s in scores}
    correct = {s.metric: pair_correct(s, pairs) for s in scores}
    k = len(scores)
    with bootstrap_progress((k + k * (k - 1) // 2) * n_resamples):  # one CI per metric, one test per two
        comparisons = pairwise_comparisons([s.metric for s in scores], correct, n_resamples=n_resamples, seed=seed)
        intervals = {m: list(accuracy_interval(c, n_resamples=n_resamples, seed=seed)) for m, c in correct.items()}
    if edges is None:
        edges = auto_gap_edges(pairs, normalised=normalised)
    exact = {  # every counted pair right (or wrong): the interval is Clopper-Pearson's, not the bootstrap's point
        m: EXACT_INTERVAL.format(what="pair", side="right" if np.nansum(c) else "wrong", value=float(np.nanmax(c)))
        for m, c in correct.items()
        if all_alike(c)
    }
    return {
        "pairs": len(pairs),
        "zero_gap_pairs": sum(1 for p in pairs if p.gap == 0),
        "proxy_label_pairs": sum(1 for p in pairs if p.meta.get("label", "").startswith("proxy")),
        "label_sign": sorted({p.meta["label_sign"] for p in pairs if "label_sign" in p.meta}),
        "accuracy": {m: {k: v[k]["accuracy"] for k in SUBSETS} for m, v in acc.items()},
        "n": {m: {k: v[k]["n"] for k in SUBSETS} for m, v in acc.items()},
        "by_kind": {s.metric: accuracy_by_kind(s, pairs) for s in scores},
        "accuracy_ci": intervals,
        **({"accuracy_ci_exact": exact} if exact else {}),
        "by_gap": {
            s.metric: accuracy_by_gap(s, pairs, edges=edges, normalised=normalised) if edges else [] for s in scores
        },
        "gap_edges": list(edges or []),
        "gap_normalised": normalised,
        "outside_gap_buckets": gaps_outside(pairs, edges, normalised=normalised) if edges else 0,
        "beats_reference": {
            "human": beats_reference(None, pairs),
            **{s.metric: beats_reference(s, pairs) for s in scores},
        },
        "comparisons": comparisons,
        "signatures": {s.metric: s.signature for s in scores},
        # pairs, counted by position: `PairScores.excluded` is keyed by pair id, which a file's pair_id column may
        # repeat (three unscored pairs of one id were "1 pair left out")
        "excluded": {s.metric: int(np.isnan(s.difference()).sum()) for s in scores},
    }


def _parse_story_files(values: list[str], option: str = "--stories") -> dict[str, tuple[Path, str]]:
    """``SYSTEM=FILE[:FIELD]`` values of ``option`` as ``{system: (file, field)}``, names matched as the tables'
    (`vistkit.meta.human.name_of`); a system named twice is refused (the second file silently replaced the
    first)."""
    from vistkit.data.readers import split_field
    from vistkit.meta.human import name_of

    out: dict[str, tuple[Path, str]] = {}
    for v in values:
        if "=" not in v:
            raise InputError(
                f"{option} {v!r}: write SYSTEM=FILE or SYSTEM=FILE:FIELD "
                "(e.g. pr-vist=PR_VIST.json.zip:predicted_story)"
            )
        name, path = v.split("=", 1)
        path, field = split_field(path)  # FILE:FIELD, not ARCHIVE.zip:MEMBER
        if not str(path).strip():  # an unset shell variable: "." would be read as the current folder
            raise InputError(
                f"{option} {v!r}: the file after '=' is empty; give a file name (an unset shell variable gives an "
                "empty one)"
            )
        name = name_of(name)  # as the tables' system names are matched (NFC): one typed two ways is one
        if name in out:
            raise InputError(
                f"{option} names the system {name!r} twice ({out[name][0]} and {path}); one system has one story "
                "file, so give each its own name"
            )
        out[name] = (Path(path), field)
    return out


# ------------------------------------------------------------------------------------------ option groups
@dataclasses.dataclass(frozen=True)
class PairsInput:
    """What every pair assessment (``pairs``, ``gap``, ``beats-ref``, ``compare``) reads and how it scores it."""

    pairs_csv: Path = dataclasses.field(
        metadata={"option": typer.Argument(..., help="Pairs CSV in the VHED layout (sent1, sent2, label, ...).")}
    )
    metrics: list[str] = dataclasses.field(metadata={"option": MetricsOpt})
    references: Path | None = dataclasses.field(metadata={"option": RefsOpt})
    ref_format: str | None = dataclasses.field(metadata={"option": RefFormatOption})
    key: Keying | None = dataclasses.field(metadata={"option": KeyOpt})
    reference_absent: bool = dataclasses.field(metadata={"option": RefAbsentOpt})
    option: list[str] = dataclasses.field(metadata={"option": MetricOptionOption})
    label_sign: str = dataclasses.field(metadata={"option": LabelSignOpt})
    engine: str = dataclasses.field(metadata={"option": EngineOption})
    address: str | None = dataclasses.field(metadata={"option": AddressOption})
    workers: int | None = dataclasses.field(metadata={"option": WorkersOption})
    num_gpus_per_worker: float = dataclasses.field(metadata={"option": GpusPerWorkerOption})

    def prepare(self) -> tuple[list[Any], list[Any]]:
        """The pairs and each metric's scores of them (`PairScores`, metrics that cannot score skipped under
        ``--metrics all``), scored on ``--engine``."""
        pairs = _load_pairs(self.pairs_csv, self.label_sign)
        refs = _references(self.references, self.ref_format)
        check_engine(self.engine)
        _check_metrics(  # before a model loads or a Ray cluster starts
            self.metrics, self.option, local=self.engine == "local", pairs=pairs, refs=refs, key=self.key
        )
        with open_engine(self.engine, self.address, self.workers, self.num_gpus_per_worker) as eng:
            built = _metrics(self.metrics, self.option, eng, pairs=pairs, refs=refs, key=self.key)
            return pairs, _score_all_pairs(built, pairs, refs, self.key, self.reference_absent)


@dataclasses.dataclass(frozen=True)
class JudgedInput:
    """How ``correlate`` and ``errors`` find and score the judged stories of their table."""

    metrics: list[str] = dataclasses.field(metadata={"option": MetricsOpt})
    stories: list[str] = dataclasses.field(metadata={"option": StoriesOpt})
    references: Path | None = dataclasses.field(metadata={"option": RefsOpt})
    ref_format: str | None = dataclasses.field(metadata={"option": RefFormatOption})
    key: Keying | None = dataclasses.field(metadata={"option": JudgedKeyOpt})
    reference_absent: bool = dataclasses.field(metadata={"option": RefAbsentOpt})
    option: list[str] = dataclasses.field(metadata={"option": MetricOptionOption})


def option_group(group: type[Any], **helps: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator (below ``@meta_app.command``): the command's parameter annotated ``group`` (a dataclass whose
    fields carry their typer option or argument as ``metadata["option"]``) stands on the command line as the
    group's options, in field order, and the command receives the group filled in. ``helps`` overrides a
    field's help text for this command."""
    hints = typing.get_type_hints(group)
    names = [f.name for f in dataclasses.fields(group)]
    shared = []
    for f in dataclasses.fields(group):
        info = f.metadata["option"]
        if f.name in helps:
            info = copy(info)
            info.help = helps[f.name]
        shared.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=hints[f.name]))

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(func, eval_str=True)
        [target] = [p.name for p in sig.parameters.values() if p.annotation is group]
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            params.extend(shared if p.name == target else [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)])

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            values = {name: kwargs.pop(name) for name in names}
            func(**kwargs, **{target: group(**values)})

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return command

    return decorate
