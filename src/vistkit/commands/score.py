"""``vistkit score``: score a hypothesis file with one or more metrics."""

from __future__ import annotations

import inspect
import json
import math
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
    OnceCommand,
    ReferencesOption,
    RefFormatOption,
    TemplateOption,
    WorkersOption,
    check_confidence,
    check_engine,
    check_resamples,
    check_seed,
    echo,
    note,
    open_engine,
    parse_metric_selection,
    read_references,
    story_file,
    warn_few_resamples,
    warn_ignored,
    writes_output,
)
from vistkit.data.output import is_standard_output
from vistkit.data.story import Keying, StorySet
from vistkit.engine import Engine
from vistkit.errors import InputError, VistkitError
from vistkit.metrics.base import Metric, Score, check_options, get_metric_class, list_metrics, range_label
from vistkit.report.tables import OutputFormat, dumps_json, fmt_number, render_table
from vistkit.scores import DEFAULT_SEED


def parse_metric_options(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``["meteor-vist.drop_non_ascii=true", "bertscore.idf=yes"]`` -> per-metric option dicts.

    Each value is read as the type the metric's option declares (`coerce_option`): a value of the wrong type is
    one clear error naming the option (``--option bertscore.layer=abc``), and booleans are strict. The same
    option given twice is refused (it would silently keep the last value).
    """
    out: dict[str, dict[str, Any]] = {}
    given: dict[tuple[str, str], str] = {}
    for pair in pairs:
        if "=" not in pair or "." not in pair.split("=", 1)[0]:
            raise InputError(f"--option {pair!r}: write METRIC.OPTION=VALUE, e.g. bertscore.idf=true")
        left, value = pair.split("=", 1)
        metric, option = left.split(".", 1)
        option = option.replace("-", "_")
        if not metric.strip() or not option.strip():  # ".idf=true" was "no metric ''", a warning only
            raise InputError(
                f"--option {pair!r} names no {'metric' if not metric.strip() else 'option'}: write "
                "METRIC.OPTION=VALUE, e.g. bertscore.idf=true"
            )
        if (metric, option) in given:
            raise InputError(
                f"--option {metric}.{option} is given twice ({given[metric, option]!r}, then {value!r}): give it "
                "once"
            )
        given[metric, option] = value
        out.setdefault(metric, {})[option] = coerce_option(metric, option, value)
    return out


def _parse_value(value: str, label: str = "") -> Any:
    """A value for an option whose type is not declared: a boolean word, a number, else the text."""
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        raise InputError(f"--option {label}={value}: give a finite number, not {value!r}")
    return number


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _declared_types(metric: str, option: str) -> set[str] | None:
    """The type names an option's annotation allows (``"int | None"`` -> {"int", "None"}); None when unknown."""
    from vistkit.errors import VistkitError

    try:
        cls = get_metric_class(metric)
    except VistkitError:  # unknown or unavailable metric: building it says so
        return None
    param = inspect.signature(cls.__init__).parameters.get(option)
    if param is None or param.annotation is inspect.Parameter.empty:
        return None
    ann = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "Any")
    names = {part.strip().split("[")[0] for part in ann.split("|")}
    return None if "Any" in names else names


def coerce_option(metric: str, option: str, value: str) -> Any:
    """``value`` (text from the command line) as the type ``metric``'s ``option`` declares."""
    types = _declared_types(metric, option)
    if types is None:
        return _parse_value(value, f"{metric}.{option}")
    low = value.strip().lower()
    if "None" in types and low in ("none", "null"):
        return None
    if "bool" in types:
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    if "int" in types:
        try:
            return int(value)
        except ValueError:
            pass
    if "float" in types:
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if not math.isfinite(number):  # nan would silently poison every score, inf is no setting
                raise InputError(f"--option {metric}.{option}={value}: {option} takes a finite number, not {value!r}")
            return number
    if types & {"str", "Path", "Sequence", "dict"}:
        if not value.strip():  # an empty name or path would silently be the current folder or the default
            raise InputError(
                f"--option {metric}.{option} is empty: give it a value, or leave the option out for its default"
            )
        return value
    wanted = [
        text
        for name, text in (("bool", "true or false"), ("int", "a whole number"), ("float", "a number"))
        if name in types
    ]
    raise InputError(
        f"--option {metric}.{option}={value}: {option} takes {' or '.join(wanted) or 'another kind of value'}, not "
        f"{value!r}"
    )


def warn_unused_options(names: list[str], per_metric: dict[str, dict[str, Any]]) -> None:
    """One warning per ``--option`` given for a metric that is not being run (it would be silently ignored);
    under ``--metrics all``, for a metric vistkit does not have (a metric ``all`` skips says why itself). An
    option for a metric vistkit does not have that misspells one being run (``SacreBLEU``) is an `InputError`:
    that metric would score without it."""
    from vistkit.errors import UnknownMetricError, VistkitError, warn
    from vistkit.metrics.base import did_you_mean

    for metric, opts in per_metric.items():
        if metric in names and metric != "all":
            continue
        shown = ", ".join(f"--option {metric}.{k}" for k in opts)
        try:
            get_metric_class(metric)
        except UnknownMetricError:
            run = list(list_metrics()) if names == ["all"] else names
            if meant := did_you_mean(metric, run):  # the metric being run would silently score without it
                first = next(iter(opts))
                raise InputError(
                    f"--option {metric}.{first}: vistkit has no metric {metric!r}, so {meant} would run without "
                    f"this option; did you mean {meant}.{first}?"
                ) from None
            warn(f"{shown} is ignored: vistkit has no metric {metric!r} (see `vistkit metrics`)")
            continue
        except VistkitError as exc:  # known, but it cannot run here
            warn(f"{shown} is ignored: {str(exc).rstrip('.')}")
            continue
        if "all" not in names:
            warn(f"{shown} is ignored: {metric} is not among the metrics run ({', '.join(names)})")


_SHARED_FLAGS = {
    "drop_non_ascii": "--drop-non-ascii",
    "images": "--images",
    "regions": "--regions",
    "photos": "--photos",
}


def warn_unused_shared(names: list[str], shared: dict[str, Any]) -> None:
    """One warning for a shared flag (``--drop-non-ascii``, ``--images`` ...) that no selected metric takes."""
    from vistkit.errors import VistkitError, warn

    takers: dict[str, list[str]] = {k: [] for k in shared}
    for name in names:
        try:
            params = inspect.signature(get_metric_class(name).__init__).parameters
        except VistkitError:  # building the metric says what is wrong with the name
            return
        for k in shared:
            if k in params:
                takers[k].append(name)
    for k, v in shared.items():
        if v not in (None, False) and not takers[k]:
            flag = _SHARED_FLAGS.get(k, k)
            warn(f"{flag} is ignored: none of the metrics run ({', '.join(names)}) uses it")


def warn_unused_references(names: list[str], *, references: Path | None, reference_absent: bool) -> None:
    """One warning when ``--references`` (or ``--reference-absent``) is given and no metric run reads references
    (``-r refs.jsonl -m rovist-nr`` read them and scored without them, in silence)."""
    if names == ["all"]:
        return
    try:
        if any(get_metric_class(name).needs_references for name in names):
            return
    except VistkitError:  # building the metric says what is wrong with the name
        return
    flags = [flag for flag, given in (("--references", references), ("--reference-absent", reference_absent)) if given]
    if flags:
        run = ", ".join(names)
        warn_ignored(flags, f"reference-based metrics, and none of the metrics run ({run}) reads references")


#: a metric to build: its class and the options it gets (every one checked, nothing loaded yet)
Plan = tuple[type[Metric], dict[str, Any]]


def plan_metrics(
    names: list[str], shared: dict[str, Any], per_metric: dict[str, dict[str, Any]], *, local: bool = True
) -> list[Plan]:
    """Each metric's class with the shared options it accepts plus its own ``--option`` values, every option
    checked (its name, and its value as far as that needs no model: `Metric.precheck`; ``local``: the metrics
    are built on this machine, not on a Ray cluster); nothing is built."""
    plans: list[Plan] = []
    for name in names:
        cls = get_metric_class(name)
        params = inspect.signature(cls.__init__).parameters
        opts = {k: v for k, v in shared.items() if k in params and v is not None}
        own = per_metric.get(name, {})
        check_options(cls, own)
        _refuse_disagreeing(name, opts, own)
        opts.update(own)
        cls.precheck(opts, local=local)
        plans.append((cls, opts))
    return plans


def _refuse_disagreeing(name: str, shared: dict[str, Any], own: dict[str, Any]) -> None:
    """`InputError` for a shared flag and a metric's own ``--option`` that give one setting two values
    (``--drop-non-ascii -O meteor-vist.drop_non_ascii=false`` scored without dropping, in silence)."""
    for option, value in own.items():
        if option not in shared or _same_setting(shared[option], value):
            continue
        flag = _SHARED_FLAGS.get(option, "--" + option.replace("_", "-"))
        given = flag if shared[option] is True else f"{flag} {shared[option]}"
        shown = str(value).lower() if isinstance(value, bool) else value
        raise InputError(
            f"{given} and --option {name}.{option}={shown} give {name} two values of {option}: give one of them"
        )


def _same_setting(a: Any, b: Any) -> bool:
    """Whether two values of one option mean the same setting (a path given as a Path or as its text)."""
    if isinstance(a, Path | str) and isinstance(b, Path | str):
        return str(a) == str(b)
    return bool(a == b) if type(a) is type(b) else False


#: a metric's models loading for longer than this (or the progress interval, when longer) is said on stderr
LOAD_NOTE_AFTER = 5.0


def construct(plans: list[Plan], *, engine: Engine | None = None) -> list[Metric]:
    """Build the planned metrics (this loads their models), on ``engine`` when given (`vistkit.engine`).

    A metric whose models take longer than the progress interval (10 s, at least 5 s) to load says so on stderr
    once, so a first run (an LM converted, a busy machine) is not a silent minute."""
    import threading

    from vistkit import progress
    from vistkit.engine.local import LocalEngine

    if engine is None or isinstance(engine, LocalEngine):  # a Ray cluster's machines have their own programs
        for cls, _ in plans:  # a missing Java is said before any metric is built, not after others have scored
            cls.check_tools()
    built = []
    for cls, opts in plans:
        said = f"{cls.name}: loading its models (once per run) ..."
        timer = threading.Timer(max(progress.interval(), LOAD_NOTE_AFTER), progress.note, [said])
        timer.daemon = True
        timer.start()
        try:
            built.append(engine.metric(cls.name, opts) if engine is not None else cls(**opts))
        finally:
            timer.cancel()
    return built


def build_metrics(
    names: list[str],
    shared: dict[str, Any],
    per_metric: dict[str, dict[str, Any]],
    *,
    engine: Engine | None = None,
) -> list[Metric]:
    """Instantiate each metric with the shared options it accepts plus its own ``--option`` values (on
    ``engine`` when given: `vistkit.engine`); every metric's options are checked before the first is built."""
    return construct(plan_metrics(names, shared, per_metric), engine=engine)


def check_inputs(
    plans: list[Plan],
    hypotheses: StorySet,
    references: StorySet | None,
    *,
    key: Keying | None,
    template: list[str] | None,
    reference_absent: bool = False,
    skipped: dict[str, str] | None = None,
) -> list[Plan]:
    """Refuse inputs a planned metric would refuse once built (no references, no key shared with them, a story
    of the template missing: `Metric.check_inputs`), before any model loads. ``skipped`` (``--metrics all``): such
    a metric is left out with its reason there instead; the plans that can score these inputs are returned."""
    if template is not None:
        require_template_stories(hypotheses, template, key=key)
    kept: list[Plan] = []
    outcome: dict[tuple[bool, Any], str | None] = {}  # metrics that align alike fail alike
    for cls, opts in plans:
        if cls.needs_references and references is None:  # said as the command line says it (not references=)
            why = f"{cls.name} needs reference stories: give them with --references FILE (-r)"
            if skipped is None:
                raise InputError(why)
            skipped[cls.name] = why
            continue
        if cls.prepare_hypotheses is not Metric.prepare_hypotheses:  # it fills the stories in: checked when built
            kept.append((cls, opts))
            continue
        kind = (cls.needs_references, cls.default_keying)
        try:
            if kind not in outcome or outcome[kind] is not None:  # a cached failure names the first metric
                cls.check_inputs(
                    hypotheses,
                    references,
                    key=key,
                    template=template,
                    require_all=template is not None,
                    reference_absent=reference_absent,
                )
                outcome[kind] = None
        except VistkitError as exc:
            outcome[kind] = str(exc)
            if skipped is None:
                raise
            skipped[cls.name] = str(exc)
            continue
        kept.append((cls, opts))
    return kept


def warn_own_references(
    plans: list[Plan],
    hypotheses: StorySet,
    references: StorySet | None,
    *,
    key: Keying | None,
    reference_absent: bool,
    label: str | None = None,
) -> None:
    """Warn when every story that meets a reference is, word for word, one of its own references (the references
    file given as the stories too, or a copy of it): each reference-based score is then its metric's best (BLEU
    100), which says nothing about the stories. ``--reference-absent`` is the way to score human stories against
    the others of their key, so it draws no warning; nor does a run whose metrics read no references. (`compare`
    does not warn: a system that is the references is a known upper bound beside the others.)"""
    if references is None or reference_absent or not any(cls.needs_references for cls, _ in plans):
        return
    import unicodedata

    from vistkit.errors import warn

    keying = key or hypotheses.default_keying()
    try:
        hyps, refs = hypotheses.by_key(keying), references.group(keying)
    except VistkitError:  # (the metrics say what is wrong with the keys)
        return

    def words(text: str) -> str:
        return unicodedata.normalize("NFC", " ".join(text.split()))

    shared = [k for k in hyps if k in refs]
    if not shared or not all(any(words(hyps[k].text) == words(r.text) for r in refs[k]) for k in shared):
        return
    name = label or hypotheses.source or "the stories"
    warn(
        f"every story of {name} that has references is also one of its own references (the same text in "
        f"--references {references.source or ''}".rstrip()
        + "), so each reference-based score is its metric's best and says nothing about the stories: give the "
        "model's stories, or add --reference-absent to score human stories against the other stories of their key"
    )


def require_template_stories(hypotheses: StorySet, template: list[str], *, key: Keying | None) -> None:
    """`InputError` when some photo sequences of the challenge template have no story in ``hypotheses``, whatever
    the metrics: a metric with references refused it, a reference-free one scored the rest without a word. A
    template none of whose sequences is a key of the stories is left to the metrics (they say how each side is
    keyed)."""
    keying = key or hypotheses.default_keying()
    try:
        keys = hypotheses.by_key(keying)
    except VistkitError:  # (stories sharing a key: the metrics say so)
        return
    wanted = list(dict.fromkeys(template))
    missing = [k for k in wanted if k not in keys]
    if missing and len(missing) < len(wanted):
        verb = "is" if len(missing) == 1 else "are"
        raise InputError(
            f"{len(missing):,} of the template's {len(wanted):,} photo sequences {verb} missing from the stories "
            f"(e.g. {missing[0]}): --template requires a story for each, as the challenge did; add them, or leave out "
            "--template to score only the stories given"
        )


DEFAULT_RESAMPLES = 1000


def score_all(
    metrics: list[Metric],
    hypotheses: StorySet,
    references: StorySet | None,
    *,
    key: Keying | None,
    template: list[str] | None,
    reference_absent: bool = False,
    skipped: dict[str, str] | None = None,
) -> list[Score]:
    """Run every metric (each shows its progress on stderr: `vistkit.progress`, opened by `Metric.score`).

    ``skipped`` (``--metrics all``): a metric that fails on this input is left out with its reason there
    instead of failing the command."""
    results: list[Score] = []
    for metric in metrics:
        refs = references if metric.needs_references else None
        try:
            results.append(
                metric.score(
                    hypotheses,
                    refs,
                    key=key,
                    template=template,
                    require_all=template is not None,
                    reference_absent=reference_absent,
                )
            )
        except VistkitError as exc:
            if skipped is None:
                raise
            skipped[metric.name] = str(exc)
    return results


def write_per_item(path: Path, results: list[Score]) -> None:
    """CSV ``id,<metric>,...``: one row per item, empty cell where a metric left the item undefined (``-``:
    standard output); a metric with per-sentence values (``Score.extra["item_sentences"]``, the lm-* metrics)
    adds a column ``<metric> sentences`` holding a JSON list (null: no value for that sentence); a metric with
    per-feature values (``Score.extra["item_features"]``, story-ranker's contributions) a column
    ``<metric>.<feature>`` per feature; a metric that left items undefined (or notes some, story-ranker's floor) a
    column ``<metric> note`` saying why. Last, a column ``<metric> signature`` per metric (the same text on every
    row): the file keeps what produced its numbers, and `vistkit distance` compares the two sides' signatures.
    An item a metric left out before scoring it (a story with no reference) has a row too: empty cells and the
    reason in the note column."""
    ids: list[str] = []
    seen: set[str] = set()
    columns: list[dict[str, float]] = []
    for r in results:
        col = {}
        for i, v in zip(r.item_ids, r.item_scores, strict=True):
            col[i] = float(v)
            if i not in seen:
                seen.add(i)
                ids.append(i)
        for i in r.excluded:  # left out before scoring (no reference, ...): a row with the reason, no score
            if i not in seen:
                seen.add(i)
                ids.append(i)
        columns.append(col)
    from vistkit.data.output import open_csv_output

    names = [r.metric for r in results]
    detail_cols = []  # (header, item id -> cell): per-sentence lists, per-feature values
    for r in results:
        per = r.extra.get("item_sentences")
        if isinstance(per, list) and len(per) == len(r.item_ids):
            detail_cols.append(
                (f"{r.metric} sentences", {i: json.dumps(v) for i, v in zip(r.item_ids, per, strict=True)})
            )
        notes = r.extra.get("item_notes")
        said = (
            dict(zip(r.item_ids, map(str, notes), strict=True))
            if isinstance(notes, list) and len(notes) == len(r.item_ids)
            else {}
        )
        if said or r.excluded:  # why an item is undefined (its cell is empty) or at the floor
            detail_cols.append((f"{r.metric} note", {**{i: said.get(i, "") for i in r.item_ids}, **r.excluded}))
        feats = r.extra.get("item_features")
        if isinstance(feats, list) and len(feats) == len(r.item_ids) and feats and isinstance(feats[0], dict):
            for name in feats[0]:
                detail_cols.append(
                    (f"{r.metric}.{name}", {i: repr(float(f[name])) for i, f in zip(r.item_ids, feats, strict=True)})
                )
    detail_cols += [(f"{r.metric} signature", dict.fromkeys(ids, r.signature)) for r in results]
    with open_csv_output(path, lineterminator="\n" if is_standard_output(path) else "\r\n") as w:
        w.writerow(["id", *names, *(h for h, _ in detail_cols)])
        for i in ids:
            row: list[str] = [i]
            for col in columns:
                v = col.get(i)
                row.append("" if v is None or math.isnan(v) else repr(v))
            row += [lists.get(i, "") for _, lists in detail_cols]
            w.writerow(row)


def render_scores(
    results: list[Score],
    fmt: OutputFormat,
    *,
    extra: dict[str, Any] | None = None,
    cis: dict[str, tuple[float, float]] | None = None,
) -> str:
    """``cis`` (metric -> (low, high)) adds CI columns / a JSON ``"ci"`` field."""
    if fmt is OutputFormat.JSON:
        payload: dict[str, Any] = {
            "scores": {r.metric: r.corpus for r in results},
            "signatures": {r.metric: r.signature for r in results},
            "n": {r.metric: r.n for r in results},
            "key": {r.metric: (r.keying.value if r.keying else None) for r in results},
            "excluded": {r.metric: r.excluded for r in results if r.excluded},
            "details": {r.metric: json_details(r) for r in results if r.extra},
        }
        if cis:
            payload["ci"] = {m: list(v) for m, v in cis.items()}
        if extra:
            payload.update(extra)
        return dumps_json(payload)
    # each metric's declared range beside its score: sacrebleu (0-100) and bleu-4 (0-1) share one table
    columns = ["metric", "score", "range", "n", "key"]
    rows: list[list[Any]] = [
        [r.metric, r.corpus, range_of(r.metric), r.n, r.keying.value if r.keying else ""] for r in results
    ]
    if cis:
        columns[2:2] = ["ci_low", "ci_high"]
        for row, r in zip(rows, results, strict=True):
            row[2:2] = list(cis.get(r.metric, (math.nan, math.nan)))
    if fmt is OutputFormat.CSV:  # the signature stays with its number: one column, one row per metric
        signed = [[*row, r.signature] for row, r in zip(rows, results, strict=True)]
        return render_table([*columns, "signature"], signed, fmt)
    caption = "\n".join([*(f"{r.metric}: {r.signature}" for r in results), *score_notes(results)])
    return render_table(columns, rows, fmt, title="vistkit score", caption=caption)


def json_details(result: Score) -> dict[str, Any]:
    """A result's ``extra`` for ``-f json``; per-item lists (``item_sentences``, ``item_notes``, ``item_features``:
    one value per item, in the order of the result's items) come with that order as ``item_ids``, so each value
    can be tied to its story."""
    n = len(result.item_ids)
    per_item = any(
        k.startswith("item_") and isinstance(v, list | tuple) and len(v) == n and n for k, v in result.extra.items()
    )
    return {**result.extra, "item_ids": list(result.item_ids)} if per_item else result.extra


def score_notes(results: list[Score]) -> list[str]:
    """The lines under a score table after the signatures: items excluded, per-item notes (a LaTeX caption has
    them too; a CSV and `-b` have no caption, so `score` writes them to stderr there)."""
    notes = [
        f"{r.metric}: {len(r.excluded)} item(s) excluded (see --per-item / --format json)"
        for r in results
        if r.excluded
    ]
    return notes + [item_notes_line(r) for r in results if any(r.extra.get("item_notes") or ())]


def item_notes_line(result: Score) -> str:
    """One caption line for a metric's per-item notes (``Score.extra["item_notes"]``, e.g. story-ranker's reason
    for a story's lowest score): how many items have one, and the first."""
    noted = [(i, n) for i, n in zip(result.item_ids, result.extra["item_notes"], strict=True) if n]
    first_id, first = noted[0]
    more = f" and {len(noted) - 1} more" if len(noted) > 1 else ""
    return f"{result.metric}: {first_id!r}: {first}{more} (see --per-item / --format json)"


def range_of(name: str) -> str:
    """The declared range of the metric a result is named after (``bleu-4``, ``rovist-nr (human)``): "0-1"."""
    try:
        return range_label(get_metric_class(name.split(" (")[0]))
    except VistkitError:
        return ""


def plan_all(
    shared: dict[str, Any], per_metric: dict[str, dict[str, Any]], *, has_references: bool, local: bool = True
) -> tuple[list[Plan], dict[str, str]]:
    """``--metrics all``: every registered metric that can run on these inputs (planned, nothing built), and why
    each other one cannot."""
    plans: list[Plan] = []
    skipped: dict[str, str] = {}
    for name, cls in list_metrics().items():
        if cls.needs_references and not has_references:
            skipped[name] = "needs reference stories (--references FILE)"
            continue
        if cls.needs_images and not (shared.get("images") or per_metric.get(name, {}).get("images")):
            skipped[name] = "needs the story photos (--images FOLDER)"
            continue
        if cls.needs_human_story:
            skipped[name] = "compares a human and a model story (vistkit distance)"
            continue
        try:
            plans += plan_metrics([name], shared, per_metric, local=local)
        except VistkitError as exc:
            skipped[name] = str(exc)
    return plans, skipped


def construct_all(plans: list[Plan], skipped: dict[str, str], *, engine: Engine | None) -> list[Metric]:
    """``--metrics all``: build each planned metric; one that cannot be built here is left out with its reason
    in ``skipped``."""
    built: list[Metric] = []
    for plan in plans:
        try:
            built += construct([plan], engine=engine)
        except (VistkitError, ImportError, OSError) as exc:
            skipped[plan[0].name] = str(exc)
    return built


def all_runnable(
    shared: dict[str, Any], per_metric: dict[str, dict[str, Any]], *, has_references: bool, engine: Engine | None
) -> tuple[list[Metric], dict[str, str]]:
    """``--metrics all``: every registered metric that can run on these inputs, and why each other one cannot."""
    plans, skipped = plan_all(shared, per_metric, has_references=has_references)
    return construct_all(plans, skipped, engine=engine), skipped


def reasons_said(skipped: dict[str, str]) -> str:
    """Where the reasons the metrics were skipped are, for an error that no metric ran: "see the reasons above"
    (the notes), or, under -q/--quiet, which hides them (the error pointed at nothing), the reasons themselves."""
    from vistkit.progress import is_quiet

    if not is_quiet() or not skipped:
        return "see the reasons above"
    return "; ".join(f"{name}: {why}" for name, why in skipped.items())


def score_only(results: list[Score], *, named: bool = False) -> str:
    """``--score-only``: the corpus score of each metric, one per line (as sacreBLEU's ``-b``). ``named``
    (``--metrics all``, where which metrics run depends on the inputs and the machine): ``METRIC<TAB>SCORE``
    lines, since bare numbers could not be told apart."""
    if named:
        return "\n".join(f"{r.metric}\t{fmt_number(r.corpus)}" for r in results)
    return "\n".join(fmt_number(r.corpus) for r in results)


@app.command(cls=OnceCommand)
@writes_output(per_item="file")
def score(
    hypotheses: Path = typer.Argument(
        ...,
        metavar="FILE",
        help="Stories to score (any VIST format, see `vistkit formats`; - reads them from standard input).",
    ),
    metrics: list[str] = MetricsOption,
    references: Path | None = ReferencesOption,
    template: Path | None = TemplateOption,
    key: Keying | None = KeyOption,
    fmt: OutputFormat = FormatOption,
    per_item: Path | None = typer.Option(
        None,
        "--per-item",
        metavar="FILE",
        help="Write per-item scores to this CSV (- : to standard output, the table then goes to stderr).",
    ),
    score_only_: bool = typer.Option(
        False,
        "--score-only",
        "-b",
        help="Print only the score of each metric, one per line (as sacreBLEU -b); with --metrics all, "
        "METRIC<TAB>SCORE lines.",
    ),
    hyp_format: str | None = HypFormatOption,
    ref_format: str | None = RefFormatOption,
    hyp_field: str = typer.Option(
        "text",
        "--hyp-field",
        metavar="FIELD",
        help="Storylet field holding the story (e.g. predicted_story for PR-VIST).",
    ),
    drop_non_ascii: bool = typer.Option(
        False,
        "--drop-non-ascii",
        help="meteor-vist: delete non-ASCII characters first (the challenge README).",
    ),
    option: list[str] = MetricOptionOption,
    images: Path | None = typer.Option(
        None,
        "--images",
        metavar="FOLDER",
        help="Grounding metrics: folder of the photos (<photo_id>.jpg; also .jpeg, .png, .gif, .webp, .bmp, .tif).",
    ),
    regions: Path | None = typer.Option(
        None,
        "--regions",
        metavar="FILE",
        help="Grounding metrics: regions CSV (columns image_id, bbox, as in VIST entities).",
    ),
    photos: Path | None = typer.Option(
        None,
        "--photos",
        metavar="FILE",
        help="Grounding metrics: JSON mapping story_id to its list of photo ids (for files without photos).",
    ),
    reference_absent: bool = typer.Option(
        False, "--reference-absent", help="Remove the scored story from its own references (Vrank Eq. 3)."
    ),
    confidence: float | None = typer.Option(
        None,
        "--confidence",
        help="Add bootstrap confidence intervals at this level (e.g. 0.95).",
        callback=check_confidence,
    ),
    n_bootstrap: int | None = typer.Option(
        None,
        "--n-bootstrap",
        "--bootstrap",
        help="Bootstrap resamples for --confidence (default 1000).",
        callback=check_resamples,
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Random seed of the bootstrap for --confidence (default 12345, sacreBLEU's).",
        callback=check_seed,
    ),
    engine: str = EngineOption,
    address: str | None = AddressOption,
    workers: int | None = WorkersOption,
    num_gpus_per_worker: float = GpusPerWorkerOption,
) -> None:
    """Score FILE with the given metrics and print one table (or JSON/CSV/LaTeX, or just the numbers with -b).

    Each metric's range is in the table (sacrebleu is 0-100, bleu-4 0-1); --metrics all runs every metric
    that can run on the inputs given and says why the others were skipped.
    """
    from vistkit.data.readers import read_stories, read_template

    names = parse_metric_selection(metrics)
    if not names:
        raise InputError("give at least one metric: --metrics meteor-vist,rovist-nr (or --metrics all)")
    shared: dict[str, Any] = {"drop_non_ascii": drop_non_ascii or None}
    shared.update(images=images, regions=regions, photos=photos)  # grounding metrics
    per_metric = parse_metric_options(option)
    skipped: dict[str, str] | None = None
    warn_unused_options(names, per_metric)
    if names != ["all"]:
        warn_unused_shared(names, shared)
    bootstrap_flags = [
        flag
        for flag, v in (("--confidence", confidence), ("--n-bootstrap", n_bootstrap), ("--seed", seed))
        if v is not None
    ]
    if score_only_:  # -b prints the bare scores: no table to hold intervals, no format to apply
        ignored = bootstrap_flags + (["--format"] if fmt is not OutputFormat.TEXT else [])
        if ignored:
            warn_ignored(ignored, "the score table, which -b/--score-only leaves out")
        confidence = n_bootstrap = seed = None
    elif confidence is None and bootstrap_flags:
        warn_ignored(bootstrap_flags, "the bootstrap of --confidence (e.g. --confidence 0.95)")
    else:
        warn_few_resamples(
            confidence=confidence, n_bootstrap=DEFAULT_RESAMPLES if n_bootstrap is None else n_bootstrap
        )
    check_engine(engine)
    # everything that can be wrong is checked before a model loads, Java starts or a Ray cluster comes up
    if names == ["all"]:
        plans, skipped = plan_all(
            shared, per_metric, has_references=references is not None, local=engine == "local"
        )
    else:
        plans = plan_metrics(names, shared, per_metric, local=engine == "local")
    path, field = story_file(hypotheses, hyp_field, flag="--hyp-field")
    hyps = read_stories(path, format=hyp_format, field=field)
    refs = read_references(references, ref_format)
    seqs = read_template(template) if template is not None else None
    plans = check_inputs(plans, hyps, refs, key=key, template=seqs, reference_absent=reference_absent, skipped=skipped)
    # said once the inputs are known good (a missing reference file is the one line an error needs)
    warn_unused_references(names, references=references, reference_absent=reference_absent)
    with open_engine(engine, address, workers, num_gpus_per_worker) as eng:
        built = construct(plans, engine=eng) if skipped is None else construct_all(plans, skipped, engine=eng)
        results = score_all(
            built, hyps, refs, key=key, template=seqs, reference_absent=reference_absent, skipped=skipped
        )
    # said once the scores are there (an option or environment error is the one line an error needs)
    warn_own_references(plans, hyps, refs, key=key, reference_absent=reference_absent)
    for name, why in (skipped or {}).items():
        note(f"skipped {name}: {why}")
    if not results:
        raise InputError(f"no metric could score these stories ({reasons_said(skipped or {})})")
    cis = None
    if confidence is not None:
        from vistkit.scores.stats import bootstrap_ci

        cis = {}
        for r in results:
            ci = bootstrap_ci(
                r,
                confidence=confidence,
                n_bootstrap=DEFAULT_RESAMPLES if n_bootstrap is None else n_bootstrap,
                seed=DEFAULT_SEED if seed is None else seed,
            )
            cis[r.metric] = (ci.low, ci.high)
    text = (
        score_only(results, named=skipped is not None)
        if score_only_
        else render_scores(results, fmt, cis=cis, extra={"skipped": skipped} if skipped else None)
    )
    # the per-item file once nothing but printing is left: a run stopped or failing in the bootstrap (minutes
    # with --n-bootstrap 100000) leaves the old file of a --force, not a new file beside no printed scores
    if per_item is not None:
        try:
            write_per_item(per_item, results)
        except Exception:  # a full disk, a name taken meanwhile: the scores of the whole run are still printed,
            if not is_standard_output(per_item):  # then the error says which file is missing (exit 1)
                _print_scores(text, results, fmt=fmt, score_only_=score_only_)
            raise
    if per_item is not None and is_standard_output(per_item):  # stdout holds the per-item CSV
        typer.echo(text.rstrip("\n"), err=True)
        _print_notes(results, fmt=fmt, score_only_=score_only_)
    else:
        _print_scores(text, results, fmt=fmt, score_only_=score_only_)


def _print_notes(results: list[Score], *, fmt: OutputFormat, score_only_: bool) -> None:
    """The notes under a table (items excluded, per-item notes) on stderr where the output has no caption: a CSV,
    and the bare numbers of -b (which covered fewer items than given without a word)."""
    if (fmt is OutputFormat.CSV or score_only_) and score_notes(results):
        note("\n".join(score_notes(results)))


def _print_scores(text: str, results: list[Score], *, fmt: OutputFormat, score_only_: bool) -> None:
    """The rendered scores on stdout, then the notes a CSV or -b cannot hold on stderr."""
    echo(text)
    _print_notes(results, fmt=fmt, score_only_=score_only_)
