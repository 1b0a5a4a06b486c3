"""``vistkit compare``: several systems x metrics in one table, with bootstrap CIs and significance marks.

Every system is scored like ``vistkit score`` (same metric objects, so a model loads once), restricted to the
items all systems share (the rest are counted and reported), and tested against the baseline system (the
first, or ``--baseline NAME``) by paired bootstrap (default) or approximate randomisation (`vistkit.scores.stats`).

Head to head: for every metric, the share of the items (photo sequences under ``--key sequence``) on which each
system's story is preferred over the baseline's, with a bootstrap CI (`vistkit.meta.pairs.preference_share`).
A pairwise metric (a ranker) is asked per matched pair; any other metric compares its two item scores.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    one_of,
    open_engine,
    parse_metric_selection,
    read_references,
    story_file,
    warn_few_resamples,
    writes_output,
)
from vistkit.data.story import Keying, StorySet
from vistkit.errors import InputError, warn
from vistkit.metrics.base import Metric, Score
from vistkit.report.tables import OutputFormat, dumps_json, fmt_number, render_table
from vistkit.scores import DEFAULT_SEED

if TYPE_CHECKING:
    from vistkit.scores.stats import Comparison

TEST_NAMES = {"bs": "paired bootstrap", "ar": "approximate randomisation"}


def _visible(text: str) -> str:
    """``text`` with each control or invisible character escaped as Python writes it (``new\\nline``): a file
    name's newline broke the table row and the notes of the system named after it (``--name`` refuses such names)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _stem(path: Path) -> str:
    """A system file's default name: its name up to the first dot (``stdin`` for ``-``), visible (`_visible`)."""
    return "stdin" if str(path) == "-" else _visible(path.name.split(".")[0] or path.name)


#: extensions of the story formats and their compression, left out of a system's name (`_long_stem`)
_FORMAT_EXTENSIONS = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".gz", ".bz2", ".xz", ".zip")


def _long_stem(path: Path) -> str:
    """A file's name without its format's extensions (``glacnet.beam5.json.gz`` -> ``glacnet.beam5``), a storylet
    field kept (``PR_VIST.json.zip:predicted_story`` -> ``PR_VIST:predicted_story``)."""
    from vistkit.data.readers import split_field

    file, field = split_field(str(path), default="")
    name = Path(file).name
    while (ext := Path(name).suffix.lower()) in _FORMAT_EXTENSIONS and ext and len(name) > len(ext):
        name = name[: -len(ext)]
    return _visible(f"{name}:{field}" if field else name)


def _colliding(labels: dict[str, str]) -> list[list[str]]:
    """The groups of keys that share a label."""
    groups: dict[str, list[str]] = {}
    for k, label in labels.items():
        groups.setdefault(label, []).append(k)
    return [group for group in groups.values() if len(group) > 1]


def _unique_labels(keys: list[str]) -> dict[str, str]:
    """Distinct files (absolute paths, or ``-``) -> distinct names: the stem; for files whose stems collide, their
    names without the format's extension (``glacnet.beam3``, ``glacnet.beam5``: the stem named both
    ``glacnet``), then whole names (``out.json``, ``out.jsonl``), and as many parent folders as it takes to tell
    them apart (``d1/sys``, ``d2/sys``)."""
    names = {k: "stdin" if k == "-" else _stem(Path(k)) for k in keys}
    for form in (_long_stem, lambda p: _visible(p.name)):
        for group in _colliding(names):
            forms = {k: form(Path(k)) for k in group if k != "-"}
            if len(set(forms.values())) > 1:  # the form tells some of them apart (else the folders must)
                names.update(forms)
    parts = {k: ("stdin",) if k == "-" else (*map(_visible, Path(k).parent.parts[1:]), names[k]) for k in keys}
    depth = dict.fromkeys(keys, 1)
    while True:
        labels = {k: "/".join(parts[k][-depth[k] :]) for k in keys}
        deeper = [k for group in _colliding(labels) for k in group if depth[k] < len(parts[k])]
        if not deeper:  # distinct absolute paths always end distinct
            return labels
        for k in deeper:
            depth[k] += 1


def system_names(paths: list[Path], names: list[str]) -> list[str]:
    """``--name`` values (one per file, non-empty, distinct), else file stems; files whose stems collide get
    parent folders (``d1/sys``, ``d2/sys``), and a file given twice a counter (``sys-2``) that no other system
    has, so every name means one file (`repeated_files` says which)."""
    if names:
        if len(names) != len(paths):
            raise InputError(f"give one --name per system file ({len(paths)} files, {len(names)} names)")
        for name in names:
            if not name.strip():  # "" too: a walrus on the name itself would let "" through
                raise InputError(f"--name {name!r} is empty: give every system a visible name")
            if not name.isprintable():
                raise InputError(
                    f"--name {name!r} holds a control or invisible character: give every system a visible name"
                )
            if name != name.strip():  # "a" and " a" read alike in the table and the sentences under it
                raise InputError(
                    f"--name {name!r} starts or ends with a space: give the name without the spaces around it"
                )
        if dup := next((n for i, n in enumerate(names) if n in names[:i]), None):
            raise InputError(f"--name {dup!r} is given to two systems: give each system its own name")
        return list(names)
    keys = ["-" if str(p) == "-" else os.path.abspath(p) for p in paths]
    labels = _unique_labels(list(dict.fromkeys(keys)))
    taken = set(labels.values())
    out: list[str] = []
    for key in keys:
        name = labels[key]
        if name in out:  # the same file again
            k = 2
            while f"{name}-{k}" in taken:
                k += 1
            name = f"{name}-{k}"
            taken.add(name)
        out.append(name)
    return out


def repeated_files(paths: list[Path], labels: list[str]) -> list[str]:
    """One sentence per file given more than once: which systems it became (they hold the same stories)."""
    keys = ["-" if str(p) == "-" else os.path.abspath(p) for p in paths]
    out = []
    for key in dict.fromkeys(keys):
        same = [label for k, label in zip(keys, labels, strict=True) if k == key]
        if len(same) > 1:
            path = paths[keys.index(key)]
            out.append(f"{path} is given {len(same)} times: its systems {', '.join(same)} hold the same stories")
    return out


def check_baseline(baseline: str | None, labels: list[str], paths: list[Path], *, named: bool) -> None:
    """`InputError` unless ``baseline`` is one of the system names; a file stem shared by several systems
    (``--baseline sys`` for ``d1/sys``, ``d2/sys``) is called ambiguous."""
    if baseline is None or baseline in labels:
        return
    same_stem = [label for label, p in zip(labels, paths, strict=True) if _stem(p) == baseline]
    # `--baseline runs/b.jsonl`: the file, where the table names its system `b` (a repeated file: its first system)
    as_file = [label for label, p in zip(labels, paths, strict=True) if _same_file(baseline, p)]
    if as_file:
        raise InputError(
            f"--baseline {baseline!r} is a system's file; --baseline takes the system's name, which for that file "
            f"is {as_file[0]!r}: give --baseline {as_file[0]}"
        )
    if not named and len(same_stem) > 1:
        raise InputError(
            f"--baseline {baseline!r} is ambiguous: the systems {', '.join(same_stem)} come from files named "
            f"{baseline}; give one of these names (or name the systems with --name)"
        )
    raise InputError(f"--baseline {baseline!r} is not one of the systems: {', '.join(labels)}")


def _same_file(given: str, path: Path) -> bool:
    """Whether ``given`` names the system file ``path`` (``-`` for standard input, else the same absolute path)."""
    if given == "-" or str(path) == "-":
        return given == str(path)
    return bool(given.strip()) and os.path.abspath(given) == os.path.abspath(path)


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
            # the same story in both systems is a tie, whatever float32 bits its two scores differ by (the batch it
            # shared with other stories differs), as the paired rankers already answer; undefined stays left out
            diff = np.array(diff, dtype=float)  # (a copy: a ranker may hand out its own array)
            diff[_same_stories(stories[system], stories[baseline], keying, common) & ~np.isnan(diff)] = 0.0
            share = preference_share(diff, confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
            out[metric.name][system] = {"over": baseline, "unit": keying.value, **share}
    return out


def _same_stories(mine: StorySet, theirs: StorySet, keying: Keying, keys: list[str]) -> Any:
    """A boolean array: for each key of ``keys``, whether the two sets hold the same story there (the same text,
    sentences and photos, so every metric reads the same input); all False when a set cannot be keyed so."""
    import numpy as np

    try:
        a, b = mine.by_key(keying), theirs.by_key(keying)
    except InputError:
        return np.zeros(len(keys), dtype=bool)

    def same(key: str) -> bool:
        x, y = a.get(key), b.get(key)
        return (
            x is not None
            and y is not None
            and (x.text, x.sentences, x.photo_ids) == (y.text, y.sentences, y.photo_ids)
        )

    return np.array([same(k) for k in keys], dtype=bool)


def _rescore_on_shared_items(
    built: list[Any],
    scores: dict[str, dict[str, Any]],
    stories: dict[str, StorySet],
    paths: list[Path],
    refs: StorySet | None,
    *,
    key: Keying | None,
    reference_absent: bool,
) -> dict[str, dict[str, int]]:
    """Score again, on the items every system has, each metric whose item scores depend on the set scored
    (`vistkit.engine.merge.depends_on_the_set`: CIDEr-D's idf weights) when the systems' files cover different
    items: the table compares the shared items, and a system scored on its whole file had other weights there
    (5 TAPM stories against all of AREL: AREL's CIDEr-D on the 5 shared sequences 0.0592, on those 5 alone
    0.0945, and its preference share 0% instead of 20%). Returns, per metric scored again, each system's number
    of items before."""
    from vistkit import progress
    from vistkit.commands.score import score_all
    from vistkit.engine.merge import depends_on_the_set

    before: dict[str, dict[str, int]] = {}
    for metric in built:
        found = [scores[label].get(metric.name) for label in stories]
        # sacreBLEU's corpus statistics add up item by item: only its nrefs in the signature would change
        if not depends_on_the_set(metric) or metric.name == "sacrebleu" or any(r is None for r in found):
            continue
        results: list[Score] = [r for r in found if r is not None]
        keys = [set(r.item_ids) for r in results]
        shared = set.intersection(*keys)
        if not shared or all(k == shared for k in keys):
            continue
        note(
            f"{metric.name}: scored again on the {len(shared):,} items every system has, since its scores depend "
            f"on the items scored together ({WHOLE_SET_NOTE.get(metric.name, 'idf weights')})"
        )
        before[metric.name] = {label: len(r.item_ids) for label, r in zip(stories, results, strict=True)}
        for ((label, hyps), path), result in zip(zip(stories.items(), paths, strict=True), results, strict=True):
            kept = hyps.filter(shared, result.keying or key or hyps.default_keying())
            with progress.labelled(label), _naming_the_system(label, path):
                [again] = score_all([metric], kept, refs, key=key, template=None, reference_absent=reference_absent)
            scores[label][metric.name] = again
    return before


#: why a metric's scores depend on the set (`_rescore_on_shared_items`; `vistkit.engine.merge.depends_on_the_set`)
WHOLE_SET_NOTE = {
    "cider-d": "idf weights from the references of the set",
    "bertscore": "with idf=True, its idf weights come from the references of the set",
}

#: below this many paired items neither test's p-value is to be read (the usual large-sample rule, as `meta
#: compare`'s `vistkit.meta.significance.FEW_DISCORDANT`): two items that both favour a system get p = 1/(B+1)
FEW_PAIRED = 25

#: what a p-value on fewer than `FEW_PAIRED` paired items is worth, with an example
FEW_PAIRED_WHY = (
    "two items that both favour one system get p = 1/(B+1) (**) from either test, where an exact sign test gives "
    "0.5; read the p-value with its n, or compare on more items"
)


def few_paired(n: int) -> str:
    """Why a p-value of a test on ``n`` (< `FEW_PAIRED`) paired items is not to be read (one sentence)."""
    return (
        f"the test rests on {n} paired item{'' if n == 1 else 's'}, and p-values on fewer than {FEW_PAIRED} paired "
        f"items cannot be read: {FEW_PAIRED_WHY}"
    )


def _few_paired_tests(c: Comparison) -> dict[str, dict[str, int]]:
    """``{metric: {system: n_paired}}`` for each test that ran on fewer than `FEW_PAIRED` (but some) items."""
    out: dict[str, dict[str, int]] = {}
    for m in c.metrics:
        for s in c.systems:
            test = c.results[s][m].paired
            if test is not None and 0 < test.n_items < FEW_PAIRED:
                out.setdefault(m, {})[s] = test.n_items
    return out


def few_paired_note(c: Comparison, *, shown: int = 6) -> str | None:
    """The line under the table naming the tests on fewer than `FEW_PAIRED` paired items (the first ``shown``,
    then how many more), or None."""
    few = _few_paired_tests(c)
    if not few:
        return None
    tested = sum(c.results[s][m].paired is not None for s in c.systems for m in c.metrics)
    counts = {n for per_system in few.values() for n in per_system.values()}
    if sum(len(v) for v in few.values()) == tested and len(counts) == 1:
        n = counts.pop()
        which = f"every test here rests on {n} paired item{'' if n == 1 else 's'}"
    else:
        named = [f"{m}: {s} ({n})" for m, per_system in few.items() for s, n in per_system.items()]
        more = f" and {len(named) - shown:,} more" if len(named) > shown else ""
        which = "paired items per test: " + ", ".join(named[:shown]) + more
    return f"p-values on fewer than {FEW_PAIRED} paired items cannot be read ({which}): {FEW_PAIRED_WHY}"


def own_references(
    built: list[Metric],
    scores: dict[str, dict[str, Score]],
    stories: dict[str, StorySet],
    refs: StorySet | None,
    *,
    reference_absent: bool,
) -> dict[str, tuple[int, int]]:
    """``{system: (stories that are one of their own references, stories with references)}`` for each system some
    of whose stories are, word for word (whitespace and Unicode form aside, as the metrics compare), among the
    references they are scored against (the references file given as a system, or a copy): their reference-based
    scores are a ceiling. Texts, not ids: a machine story filed under its reference's story id is not that
    reference. Empty under ``reference_absent`` (each story is taken out of its own references) or without a
    reference-based metric."""
    import unicodedata

    from vistkit.metrics.base import get_metric_class

    def text(story: Any) -> str:
        return unicodedata.normalize("NFC", " ".join(story.text.split()))

    if refs is None or reference_absent:
        return {}
    based = [m.name for m in built if get_metric_class(m.name).needs_references]
    out: dict[str, tuple[int, int]] = {}
    for label, hyps in stories.items():
        result = next((scores[label][n] for n in based if n in scores[label] and scores[label][n].keying), None)
        if result is None or result.keying is None:
            continue
        try:
            mine, theirs = hyps.by_key(result.keying), refs.group(result.keying)
        except InputError:
            continue
        scored = set(result.item_ids)  # the items compared (a --template leaves others out)
        with_refs = [(story, theirs[k]) for k, story in mine.items() if k in scored and theirs.get(k)]
        same = sum(text(story) in {text(r) for r in group} for story, group in with_refs)
        if same:
            out[label] = (same, len(with_refs))
    return out


def own_references_lines(own: dict[str, tuple[int, int]]) -> list[str]:
    """One line per system holding stories that are their own references (`own_references`)."""
    lines = []
    for label, (same, total) in own.items():
        are = "is" if same == 1 else "are"
        lines.append(
            f"{label}: {same:,} of its {total:,} stories {are} word for word among the references "
            f"{'it is' if same == 1 else 'they are'} scored against (its own references), so its reference-based "
            "scores there are a ceiling, not a system's; to score human stories against the other references of "
            "their item, give --reference-absent"
        )
    return lines


def head_to_head_lines(h2h: dict[str, dict[str, dict[str, Any]]], confidence: float) -> list[str]:
    """One sentence per metric and system: "the story of A is preferred over that of B for X% of the photo
    sequences" (no possessive: system names such as "ours" stay grammatical)."""
    def pct(x: float) -> str:  # a share over no item is undefined: n/a, as in the tables
        return "n/a" if x != x else f"{x:.1%}"

    lines = []
    for metric, per_system in h2h.items():
        for system, r in per_system.items():
            lines.append(
                f"{metric}: the story of {system} is preferred over that of {r['over']} for {pct(r['share'])} of the "
                f"{UNITS.get(r['unit'], r['unit'])} [{pct(r['ci'][0])}, {pct(r['ci'][1])}] "
                f"(ties {pct(r['ties'])}, n={r['n']}, {confidence:.0%} "
                + ("exact binomial CI: the same outcome on every item" if r.get("ci_method") else "CI")
                + ")"
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
        # as score and meta name them: metric -> signature, metric -> items scored
        "signatures": {m: c.signatures[m] for m in c.metrics},
        "n": {m: c.n_items[m] for m in c.metrics},
        "metrics": {
            m: {
                "signature": c.signatures[m],
                "n_items": c.n_items[m],
                "dropped": c.dropped[m],
                # each system's own run (data-dependent fields such as nrefs may differ from the baseline's)
                "system_signatures": c.system_signatures.get(m, {}),
            }
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
                    # as `meta compare`'s: a p-value on too few paired items to be read, and why
                    **(
                        {"p_caution": few_paired(r.paired.n_items)}
                        if r.paired and 0 < r.paired.n_items < FEW_PAIRED
                        else {}
                    ),
                }
                for m, r in c.results[s].items()
            }
            for s in c.systems
        },
    }


def render_comparison(
    c: Comparison,
    fmt: OutputFormat,
    h2h: dict[str, dict[str, dict[str, Any]]] | None = None,
    *,
    skipped: dict[str, str] | None = None,
    own: dict[str, tuple[int, int]] | None = None,
) -> str:
    """One systems x metrics table: ``score [lo, hi]`` plus ``*`` (p < 0.05) / ``**`` (p < 0.01); the head-to-head
    shares ``h2h`` (when given) under ``"preferred"`` in JSON and as sentences under the text/LaTeX table;
    ``skipped`` (``--metrics all``: metric -> why) under ``"skipped"`` in JSON; ``own`` (`own_references`) under
    ``"own_references"`` (system -> stories that are their own references) in JSON."""
    if fmt is OutputFormat.JSON:
        return dumps_json(
            {
                **comparison_payload(c),
                **({"preferred": h2h} if h2h is not None else {}),
                **({"skipped": skipped} if skipped else {}),
                **({"own_references": {label: same for label, (same, _) in own.items()}} if own else {}),
            }
        )
    if fmt is OutputFormat.CSV:
        # the signature as a column, as `score -f csv` has it (a CSV has no caption; stderr may be lost)
        columns = ["system", "metric", "score", "ci_low", "ci_high", "p_value", "mark", "n_items", "signature"]
        rows: list[list[Any]] = []
        for s in c.systems:
            for m in c.metrics:
                r = c.results[s][m]
                p = r.paired.p_value if r.paired else None
                signature = c.system_signatures.get(m, {}).get(s, c.signatures[m])
                rows.append([s, m, r.score, r.ci.low, r.ci.high, p, r.mark, c.n_items[m], signature])
        return render_table(columns, rows, fmt)
    columns = ["system", *c.metrics]
    table: list[list[Any]] = []
    for s in c.systems:
        cells: list[Any] = [s + (" (baseline)" if s == c.baseline else "")]
        for m in c.metrics:
            r = c.results[s][m]
            cells.append(f"{fmt_number(r.score)} [{fmt_number(r.ci.low)}, {fmt_number(r.ci.high)}]{r.mark}")
        table.append(cells)
    notes = comparison_notes(c, h2h, own=own)
    if fmt is OutputFormat.TEXT:  # notes under the table, not squeezed into its width
        return render_table(columns, table, fmt, title="vistkit compare") + "\n".join(notes) + "\n"
    return render_table(columns, table, fmt, title="vistkit compare", caption="\n".join(notes))


def comparison_notes(
    c: Comparison,
    h2h: dict[str, dict[str, dict[str, Any]]] | None = None,
    *,
    own: dict[str, tuple[int, int]] | None = None,
) -> list[str]:
    """The lines under a comparison table: what the intervals and marks mean, each metric's items and signature,
    tests on fewer items, tests on too few items to be read (`few_paired_note`), systems whose stories are their
    own references (``own``: `own_references`), the head-to-head shares (a CSV's stderr gets them too)."""
    level = f"{c.confidence:.0%}".replace("%", "% CI")
    notes = [
        f"[lo, hi]: {level} percentile bootstrap, {c.n_bootstrap} resamples of items, seed {c.seed}",
        f"* p < 0.05, ** p < 0.01 against {c.baseline} ({TEST_NAMES[c.test]}, {c.n_samples} samples)",
    ]
    for m in c.metrics:
        lost = {s: k for s, k in c.dropped[m].items() if k}
        extra = f"; not shared, left out: {', '.join(f'{s} {k}' for s, k in lost.items())}" if lost else ""
        notes.append(f"{m}: {c.n_items[m]} items{extra}; {c.signatures[m]}")
        for s, signature in c.system_signatures.get(m, {}).items():
            if signature != c.signatures[m]:  # e.g. another number of references for the items it scored
                notes.append(f"  {m}: {s}'s run was signed {signature}")
        for s in c.systems:  # a test on fewer items than the table's means can even point the other way
            test = c.results[s][m].paired
            if test is not None and test.n_items == 0:
                notes.append(
                    f"  {m}: {s} vs {c.baseline} could not be tested: no item has a defined score for both (n/a)"
                )
            elif test is not None and test.n_items < c.n_items[m]:
                items = f"{test.n_items} item{'' if test.n_items == 1 else 's'}"
                notes.append(
                    f"  {m}: {s} vs {c.baseline} was tested on the {items} both scored (an undefined score leaves "
                    f"an item out): {fmt_number(test.system)} vs {fmt_number(test.baseline)} there"
                )
    if few := few_paired_note(c):
        notes.append(few)
    notes += own_references_lines(own or {})
    if h2h:
        notes += ["head to head (bootstrap CI over the items both systems have):"]
        notes += ["  " + line for line in head_to_head_lines(h2h, c.confidence)]
    return notes


@contextlib.contextmanager
def _naming_the_system(label: str, path: Path) -> Iterator[None]:
    """An input error about one system's stories names that system ("no hypothesis shares a key ..." said
    nothing of which of several files was at fault)."""
    try:
        yield
    except InputError as exc:
        shown = label if label == str(path) else f"{label} ({path})"
        exc.args = (f"{shown}: {exc}", *exc.args[1:])
        raise


@app.command(cls=OnceCommand)
@writes_output(force_flag=False)  # writes no file: refuses only a stdout appended to one of its inputs
def compare(
    systems: list[Path] = typer.Argument(
        ..., metavar="FILE", help="Two or more system story files (any VIST format; one may be - for stdin)."
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
        "bs",
        "--test",
        metavar="bs|ar",
        help="bs: paired bootstrap; ar: approximate randomisation.",
        callback=one_of("bs", "ar"),
    ),
    n_samples: int | None = typer.Option(
        None, "--n-samples", help="Resamples / trials of the test (default 1000 for bs, 10000 for ar).",
        callback=check_resamples,
    ),
    confidence: float = typer.Option(
        0.95, "--confidence", help="Confidence level of the intervals.", callback=check_confidence
    ),
    n_bootstrap: int = typer.Option(
        1000, "--n-bootstrap", "--bootstrap", help="Bootstrap resamples for the intervals.", callback=check_resamples
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
    from vistkit.commands.score import (
        check_inputs,
        construct,
        construct_all,
        parse_metric_options,
        plan_all,
        plan_metrics,
        score_all,
        warn_unused_options,
        warn_unused_references,
    )
    from vistkit.data.readers import read_stories, read_template
    from vistkit.scores.stats import compare_scores

    if len(systems) < 2:
        folders = [p for p in systems if str(p) != "-" and Path(p).is_dir()]
        if folders:  # `compare outputs/`: the files in it were meant
            raise InputError(
                f"{folders[0]} is a folder, and compare reads one system per file; give the system files in it "
                f"({os.path.join(folders[0], '*')})"
            )
        raise InputError("compare needs at least two system files")
    metric_names = parse_metric_selection(metrics)
    if not metric_names:
        raise InputError("give at least one metric: --metrics sacrebleu,bertscore (or --metrics all)")
    labels = system_names(systems, names)
    check_baseline(baseline, labels, systems, named=bool(names))
    per_metric = parse_metric_options(option)
    warn_unused_options(metric_names, per_metric)
    warn_few_resamples(confidence=confidence, n_bootstrap=n_bootstrap, n_samples=n_samples)
    check_engine(engine)
    skipped: dict[str, str] | None = None
    # everything that can be wrong is checked before a model loads, Java starts or a Ray cluster comes up
    if metric_names == ["all"]:  # as `vistkit score -m all`; a metric that fails on any system is left out
        plans, skipped = plan_all({}, per_metric, has_references=references is not None, local=engine == "local")
    else:
        plans = plan_metrics(metric_names, {}, per_metric, local=engine == "local")
    refs = read_references(references, ref_format)
    seqs = read_template(template) if template is not None else None
    stories: dict[str, StorySet] = {}
    for label, path in zip(labels, systems, strict=True):
        source, field = story_file(path, hyp_field)  # FILE:FIELD: this system's own storylet field
        stories[label] = read_stories(source, format=hyp_format, field=field)
    defaults = {label: hyps.default_keying() for label, hyps in stories.items()}
    keyed_by_file = any(cls.default_keying is None for cls, _ in plans)  # not meteor-vist-album, clipscore ...
    if key is None and keyed_by_file and len(set(defaults.values())) > 1:  # items would be paired across keys
        shown = ", ".join(f"{label} by {k.value}" for label, k in list(defaults.items())[:4])
        raise InputError(
            f"the systems' files are keyed differently by default ({shown}; by sequence when every story carries "
            "its photos), so their items would be paired across two kinds of key; give --key story, sequence or "
            "album"
        )
    for (label, hyps), path in zip(stories.items(), systems, strict=True):
        failed: dict[str, str] | None = None if skipped is None else {}
        with _naming_the_system(label, path):
            plans = check_inputs(
                plans, hyps, refs, key=key, template=seqs, reference_absent=reference_absent, skipped=failed
            )
        if failed and skipped is not None:
            skipped.update({name: f"{label}: {why}" for name, why in failed.items()})
    # said once the inputs are known good (a missing reference file is the one line an error needs)
    warn_unused_references(metric_names, references=references, reference_absent=reference_absent)
    scores: dict[str, dict[str, Any]] = {}
    with open_engine(engine, address, workers, num_gpus_per_worker) as eng:
        built = construct(plans, engine=eng) if skipped is None else construct_all(plans, skipped, engine=eng)
        for (label, hyps), path in zip(stories.items(), systems, strict=True):
            failed = None if skipped is None else {}
            # "sysA: bertscore: scored 1,200/2,019 stories ..."
            with progress.labelled(label), _naming_the_system(label, path):
                results = score_all(
                    built, hyps, refs, key=key, template=seqs, reference_absent=reference_absent, skipped=failed
                )
            scores[label] = {r.metric: r for r in results}
            if failed and skipped is not None:
                skipped.update({name: f"{label}: {why}" for name, why in failed.items()})
                built = [m for m in built if m.name not in failed]
        rescored = (
            {}
            if seqs is not None
            else _rescore_on_shared_items(
                built, scores, stories, systems, refs, key=key, reference_absent=reference_absent
            )
        )
    for repeated in repeated_files(systems, labels):  # said once every input has been read
        warn(repeated)
    if skipped is not None:
        for label in scores:  # the metrics every system was scored with
            scores[label] = {m.name: scores[label][m.name] for m in built}
        for name, why in skipped.items():
            note(f"skipped {name}: {why}")
        if not built:
            from vistkit.commands.score import reasons_said

            raise InputError(f"no metric could score these systems ({reasons_said(skipped)})")
    comparison = compare_scores(
        scores,
        baseline=baseline,
        test=test,
        n_samples=n_samples,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    for name, counts in rescored.items():  # the items each system's file had beyond the shared ones
        comparison.dropped[name] = {label: counts[label] - comparison.n_items[name] for label in counts}
    h2h = head_to_head(
        built,
        scores,
        stories,
        baseline=comparison.baseline,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    own = own_references(built, scores, stories, refs, reference_absent=reference_absent)
    echo(render_comparison(comparison, fmt, h2h, skipped=skipped, own=own))
    if fmt is OutputFormat.CSV:  # a CSV has no caption: the signatures and notes on stderr
        note("\n".join(comparison_notes(comparison, h2h, own=own)))
