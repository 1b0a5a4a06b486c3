"""``vistkit distance``: the dHM human-model distance from per-story G, C, R scores.

Score sources (each side): a dHM score prefix (``DIR/gt_test`` -> ``gt_test_G.json``, ``gt_test_C.csv``,
``gt_test_R.csv``, each plain, ``.gz`` or ``.zip``; or ``ARCHIVE.zip:gt_test`` for the three inside one archive), or
a per-item CSV from ``vistkit score --per-item`` with one column per metric. New
sources (e.g. scoring stories end to end) only need to produce the same per-story tables: see `load_tables`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from vistkit.cli import app
from vistkit.commands.common import (
    AddressOption,
    EngineOption,
    FormatOption,
    GpusPerWorkerOption,
    OnceCommand,
    WorkersOption,
    emit,
    note,
    open_engine,
    warn_ignored,
    writes_output,
)
from vistkit.data.output import is_standard_output
from vistkit.errors import InputError
from vistkit.report.tables import OutputFormat, dumps_json, render_table


def g_is_bounded(column: str) -> bool:
    """Whether the G column names a registered metric bounded in [-1, 1] (then dHM's tanh is skipped)."""
    from vistkit.errors import VistkitError
    from vistkit.metrics.base import get_metric_class

    try:
        cls = get_metric_class(column)
    except VistkitError:
        return False
    lo, hi = cls.lower_bound, cls.upper_bound
    return lo is not None and hi is not None and lo >= -1 and hi <= 1


def load_tables(
    human: Path | None,
    model: Path | None,
    *,
    columns: dict[str, str | None],
    tanh_g: bool | None,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], bool]:
    """Human and model score tables and whether to apply tanh to G (None = dHM's rule, see `distance`)."""
    from vistkit.scores.distance import DIMENSIONS, is_per_item_csv, per_item_header, read_scores, resolve_columns

    if human is None or model is None:
        raise InputError("give both --human and --model (a dHM score prefix or a per-item CSV each)")
    tables = [read_scores(p, columns=columns) for p in (human, model)]
    if tanh_g is None:
        # raw GROOViST in dHM's _G.json files; a per-item column keeps tanh unless its metric is bounded
        g_sources: dict[str, tuple[str, bool]] = {}
        for side, p in (("human", human), ("model", model)):
            if is_per_item_csv(p):
                g_col = resolve_columns(per_item_header(p)[1:], columns, where=str(p))[DIMENSIONS[0]]
                g_sources[side] = (f"column {g_col!r}", g_is_bounded(g_col))
            else:
                g_sources[side] = ("raw GROOViST of a dHM prefix", False)
        tanh_g = not any(bounded for _, bounded in g_sources.values())
        (h_what, h_bounded), (m_what, m_bounded) = g_sources["human"], g_sources["model"]
        if h_bounded != m_bounded:
            from vistkit.errors import warn

            warn(
                f"G: the human side's {h_what} is {'' if h_bounded else 'not '}within [-1, 1] and the model side's "
                f"{m_what} is {'' if m_bounded else 'not '}, so no one tanh rule fits both (G is used as given); "
                "score both sides' G with the same metric, or choose with --tanh-g / --no-tanh-g"
            )
    return tables[0], tables[1], tanh_g


@contextlib.contextmanager
def score_inputs(*sources: Path | None) -> Iterator[None]:
    """Within the block, every file the score sources read counts as an input of the running command (a dHM
    prefix names three files, which the command line does not show), so no output is written over one of them,
    ``--force`` or not."""
    from vistkit.data.output import current_policy, output_policy
    from vistkit.scores.distance import score_files

    policy = current_policy()
    files = [f for src in sources if src is not None for f in score_files(src)]
    with output_policy(force=policy.force, inputs=[*policy.inputs, *files], cli=policy.cli):
        yield


def table_signatures(
    human: Path | None, model: Path | None, *, columns: dict[str, str | None]
) -> dict[str, dict[str, str]]:
    """The signatures of the G, C, R columns of per-item CSVs (``{"human": {"G": ...}, "model": {...}}``; a dHM
    prefix has none), with a warning for each dimension whose two sides were scored under different signatures:
    their difference then mixes the stories' difference with the metrics'."""
    from vistkit.errors import warn
    from vistkit.scores.distance import is_per_item_csv, per_item_signatures

    out: dict[str, dict[str, str]] = {}
    for side, path in (("human", human), ("model", model)):
        if path is not None and is_per_item_csv(path):
            sigs = per_item_signatures(path, columns=columns)
            if sigs:
                out[side] = sigs
    for d in ("G", "C", "R"):
        a, b = out.get("human", {}).get(d), out.get("model", {}).get(d)
        if a is not None and b is not None and a != b:
            warn(
                f"{d}: the human scores ({a}) and the model scores ({b}) were computed under different signatures, "
                f"so d{d} also measures that difference; score both sides with the same metric and options"
            )
    return out


#: column names that name no metric (a hand-made table's)
_GENERIC_COLUMNS = {"G", "C", "R", "G_score", "C_score", "R_score"}


def warn_mixed_metrics(
    human: Path, model: Path, *, columns: dict[str, str | None], signatures: dict[str, dict[str, str]]
) -> None:
    """Warn for each dimension whose two per-item CSVs give it columns of different metrics (``dhm-c`` on one side,
    ``rovist-c`` on the other: each file's first C column found): their difference mixes the stories' with the
    metrics'. A dimension both of whose sides carry a signature is left to `table_signatures`."""
    from vistkit.errors import warn
    from vistkit.scores.distance import DIMENSIONS, is_per_item_csv, per_item_header, resolve_columns

    if not (is_per_item_csv(human) and is_per_item_csv(model)):
        return
    h, m = (resolve_columns(per_item_header(p)[1:], columns, where=str(p)) for p in (human, model))
    for d in DIMENSIONS:
        if h[d] == m[d] or h[d] in _GENERIC_COLUMNS or m[d] in _GENERIC_COLUMNS:
            continue
        if d in signatures.get("human", {}) and d in signatures.get("model", {}):
            continue
        warn(
            f"{d}: the human scores are the column {h[d]!r} and the model scores the column {m[d]!r}, two metrics, so "
            f"d{d} also measures their difference; score both sides with one metric, or name its column with "
            f"--{d.lower()}-metric"
        )


def warn_one_column_twice(human: Path, model: Path, *, columns: dict[str, str | None]) -> None:
    """Warn when a per-item CSV's one column is read for two dimensions (``--c-metric rovist-nr`` beside R's
    default column ``rovist-nr``, or one name given twice): dHM then averages that column's distance twice, and the
    two dimensions' distances are one number (as `vistkit.scores.dhm` warns from stories)."""
    from vistkit.errors import warn
    from vistkit.scores.distance import DIMENSIONS, is_per_item_csv, per_item_header, resolve_columns

    said: set[str] = set()
    for path in dict.fromkeys((human, model)):
        if not is_per_item_csv(path):
            continue
        chosen = resolve_columns(per_item_header(path)[1:], columns, where=str(path))
        for column in dict.fromkeys(chosen.values()):
            dims = [d for d in DIMENSIONS if chosen[d] == column]
            if len(dims) < 2 or column in said:
                continue
            said.add(column)
            flags = ", ".join(f"--{d.lower()}-metric" for d in DIMENSIONS)
            warn(
                f"the column {column!r} of {path} is read for both {' and '.join(dims)}, so dHM counts one score "
                f"twice; name each dimension's own column ({flags})"
            )


def warn_same_sources(
    human: Path | None,
    model: Path | None,
    tables: tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]] | None = None,
) -> bool:
    """Warn when --human and --model name one per-item CSV or one dHM prefix's files (under one name or two, or
    through a link), or, given the two ``tables``, when they give every story they share the same G, C and R (a
    copy of one file): dHM is then 0 by construction, which says nothing about the model. Returns whether it
    warned."""
    from vistkit.errors import warn
    from vistkit.scores.distance import is_per_item_csv, same_score_source

    if human is None or model is None:
        return False
    if same_score_source(human, model):
        what = "the same scores" if is_per_item_csv(human) else "the same G, C and R files"
        warn(
            f"--human {human} and --model {model} hold {what}, so dHM is 0 by construction: give the model's "
            "scores to --model"
        )
        return True
    if tables is not None:
        h, m = tables
        shared = h.keys() & m.keys()
        if shared and all(h[k] == m[k] for k in shared):
            warn(
                f"--human {human} and --model {model} give all {len(shared):,} stories they share the same G, C "
                "and R, so dHM is 0 by construction: check that --model holds the model's scores"
            )
            return True
    return False


def signature_lines(signatures: dict[str, dict[str, str]]) -> list[str]:
    """``G: SIG`` when both sides carry one signature, else ``G human: SIG`` / ``G model: SIG``."""
    human, model = signatures.get("human", {}), signatures.get("model", {})
    lines = []
    for d in ("G", "C", "R"):
        if d in human and human.get(d) == model.get(d):
            lines.append(f"{d}: {human[d]}")
            continue
        lines += [f"{d} {side}: {sigs[d]}" for side, sigs in (("human", human), ("model", model)) if d in sigs]
    return lines


def render_distance(
    result: Any,
    fmt: OutputFormat,
    *,
    title: str,
    caption: str,
    tanh_g: bool,
    signatures: dict[str, dict[str, str]] | None = None,
) -> str:
    """The distance from score tables; JSON also says what the text caption says (whether G went through tanh,
    how many ids each side left out: a table's ids that are not in all six tables; the signatures of per-item
    CSV columns)."""
    if fmt is OutputFormat.JSON:
        payload = {**result.as_dict(), "tanh_g": tanh_g, "left_out": dict(result.dropped)}
        if signatures:
            payload["signatures"] = signatures
        return dumps_json(payload)
    row = [result.dG, result.dC, result.dR, result.dHM, result.n]
    return render_table(["dG", "dC", "dR", "dHM", "n"], [row], fmt, title=title, caption=caption)


def _warn_unused(
    stories_mode: bool,
    *,
    dimensions: str,
    metrics: dict[str, str | None],
    story_only: dict[str, bool],
    tanh_g: bool | None,
    sources: tuple[Path | None, Path | None],
) -> None:
    """A warning for each option this run cannot use: story-mode options with score tables, a column option
    (``--c-metric``) when no side is a per-item CSV, a dimension's metric, G's inputs or ``--tanh-g`` when
    --dimensions leaves that dimension out."""
    from vistkit.errors import warn
    from vistkit.scores.dhm import parse_dimensions
    from vistkit.scores.distance import is_per_item_csv

    if not stories_mode:
        for flag, given in story_only.items():
            if given:
                warn_ignored([flag], "--human-stories/--model-stories, not to score tables")
        if not any(src is not None and is_per_item_csv(src) for src in sources):
            for dim, metric in metrics.items():
                if metric is not None:  # a dHM prefix's scores are its files, whatever the option names
                    warn_ignored(
                        [f"--{dim.lower()}-metric"],
                        f"per-item CSVs and --human-stories/--model-stories; a dHM score prefix's {dim} scores are "
                        f"its <prefix>_{dim}.{'json' if dim == 'G' else 'csv'} file",
                    )
        return
    dims = parse_dimensions(dimensions)
    for dim, metric in metrics.items():
        if metric is not None and dim not in dims:
            warn(f"--{dim.lower()}-metric is ignored: --dimensions {','.join(dims)} leaves {dim} out")
    if "G" not in dims:
        for flag in ("--images", "--regions", "--photos"):
            if story_only[flag]:
                warn(f"{flag} is ignored: it feeds G, which --dimensions {','.join(dims)} leaves out")
        if tanh_g is not None:
            flag = "--tanh-g" if tanh_g else "--no-tanh-g"
            warn(f"{flag} is ignored: --dimensions {','.join(dims)} leaves G out")


@app.command(cls=OnceCommand)
@writes_output(per_item="file")
def distance(
    human: Path | None = typer.Option(
        None, "--human", help="Human scores: a dHM prefix (DIR/gt_test) or a per-item CSV (vistkit score)."
    ),
    model: Path | None = typer.Option(None, "--model", help="Model scores: same forms as --human."),
    human_stories: Path | None = typer.Option(
        None,
        "--human-stories",
        metavar="FILE",
        help="Human stories (any VIST format; - : standard input): score G, C, R from the stories, then dHM "
        "(metrics: --g-metric, --c-metric, --r-metric; default groovist, dhm-c, rovist-nr).",
    ),
    model_stories: Path | None = typer.Option(
        None,
        "--model-stories",
        metavar="FILE",
        help="Model stories (any VIST format), matched to the human ones by id.",
    ),
    images: Path | None = typer.Option(None, "--images", help="With --*-stories: photo folder for G."),
    regions: Path | None = typer.Option(None, "--regions", help="With --*-stories: regions CSV for G."),
    photos: Path | None = typer.Option(None, "--photos", help="With --*-stories: JSON story_id -> photos."),
    dimensions: str = typer.Option(
        "G,C,R", "--dimensions", metavar="G,C,R", help="With --*-stories: the dimensions to score, a subset of G,C,R."
    ),
    sentences: str = typer.Option(
        "split",
        "--sentences",
        metavar="split|source",
        help="With --*-stories: split (Punkt, as dHM) or source (VIST storylets).",
    ),
    option: list[str] = typer.Option(
        [], "--option", "-O", metavar="METRIC.OPTION=VALUE", help="With --*-stories: a metric option (repeatable)."
    ),
    g_metric: str | None = typer.Option(
        None,
        "--g-metric",
        metavar="METRIC",
        help="G: the metric (--*-stories) or score column (--human/--model); default groovist (tables: also G).",
    ),
    c_metric: str | None = typer.Option(
        None,
        "--c-metric",
        metavar="METRIC",
        help="C: the metric or score column; default dhm-c (dHM's C; tables: else rovist-c, coherence, C).",
    ),
    r_metric: str | None = typer.Option(
        None,
        "--r-metric",
        metavar="METRIC",
        help="R: the metric or score column; default rovist-nr (tables: also R).",
    ),
    tanh_g: bool | None = typer.Option(
        None,
        "--tanh-g/--no-tanh-g",
        help="Apply tanh to G as dHM does to raw GROOViST (default: yes, unless the G metric is in [-1, 1]).",
    ),
    per_item: Path | None = typer.Option(
        None, "--per-item", metavar="FILE", help="Write story_id,dG,dC,dR,dHM to this CSV (- : standard output)."
    ),
    fmt: OutputFormat = FormatOption,
    engine: str = EngineOption,
    address: str | None = AddressOption,
    workers: int | None = WorkersOption,
    num_gpus_per_worker: float = GpusPerWorkerOption,
) -> None:
    """dHM: how far model stories are from human ones in grounding (G), coherence (C) and repetition (R).

    Per story |human - model| for each of G (tanh), C, R, averaged over the stories scored in all six tables;
    dHM is the mean of dG, dC and dR (Surikuchi et al., 2024; the official dHM.py). Lower is closer to humans.
    """
    with score_inputs(human, model):
        if per_item is not None and str(per_item) != "-":
            from vistkit.data.output import check_output

            check_output(per_item)  # before any work: the dHM files behind --human/--model are inputs too
        _distance(
            human, model, human_stories, model_stories, images=images, regions=regions, photos=photos,
            dimensions=dimensions, sentences=sentences, option=option, g_metric=g_metric, c_metric=c_metric,
            r_metric=r_metric, tanh_g=tanh_g, per_item=per_item, fmt=fmt, engine=engine, address=address,
            workers=workers, num_gpus_per_worker=num_gpus_per_worker,
        )


def _distance(
    human: Path | None,
    model: Path | None,
    human_stories: Path | None,
    model_stories: Path | None,
    *,
    images: Path | None,
    regions: Path | None,
    photos: Path | None,
    dimensions: str,
    sentences: str,
    option: list[str],
    g_metric: str | None,
    c_metric: str | None,
    r_metric: str | None,
    tanh_g: bool | None,
    per_item: Path | None,
    fmt: OutputFormat,
    engine: str,
    address: str | None,
    workers: int | None,
    num_gpus_per_worker: float,
) -> None:
    """The body of `distance` (its inputs registered by `score_inputs`)."""
    from vistkit.scores.distance import dhm_distance, per_story_rows

    stories_mode = human_stories is not None or model_stories is not None
    _warn_unused(
        stories_mode,
        dimensions=dimensions,
        metrics={"G": g_metric, "C": c_metric, "R": r_metric},
        story_only={
            "--images": images is not None,
            "--regions": regions is not None,
            "--photos": photos is not None,
            "--dimensions": dimensions != "G,C,R",
            "--sentences": sentences != "split",
            "--option": bool(option),
            "--engine": engine != "local",
            "--address": address is not None,
            "--workers": workers is not None,
            "--num-gpus-per-worker": bool(num_gpus_per_worker),
        },
        tanh_g=tanh_g,
        sources=(human, model),
    )
    if stories_mode:  # end to end: vistkit.scores.dhm
        from vistkit.scores.dhm import compute_dhm, dhm_caption, render_dhm, write_dhm_per_story

        names, options, h_stories, m_stories = _check_stories_mode(
            human, model, human_stories, model_stories, metrics={"G": g_metric, "C": c_metric, "R": r_metric},
            shared={"images": images, "regions": regions, "photos": photos, "sentences": sentences},
            dimensions=dimensions, option=option, engine=engine,
        )
        with open_engine(engine, address, workers, num_gpus_per_worker) as eng:
            scored = compute_dhm(
                h_stories, m_stories, g_metric=names["G"], c_metric=names["C"], r_metric=names["R"],
                images=images, regions=regions, photos=photos, sentences=sentences, dimensions=dimensions,
                options=options, engine=eng, tanh_g=tanh_g,
            )
        title = f"dHM: {_shown(human_stories)} vs {_shown(model_stories)} (scored from stories)"

        def show_scored() -> None:
            emit(render_dhm(scored, fmt, title=title), to_stderr=per_item is not None and is_standard_output(per_item))
            if fmt is OutputFormat.CSV:  # a CSV has no caption: the stories left out, signatures and notes on stderr
                note("\n".join(dhm_caption(scored)))

        if per_item is not None:
            _write_per_item_or_show(lambda: write_dhm_per_story(scored, per_item), per_item, show_scored)
        show_scored()
        return
    columns = {"G": g_metric, "C": c_metric, "R": r_metric}
    h, m, use_tanh = load_tables(human, model, columns=columns, tanh_g=tanh_g)
    zero = warn_same_sources(human, model, (h, m))
    signatures = table_signatures(human, model, columns=columns)
    if human is not None and model is not None:  # load_tables refuses a missing side
        warn_mixed_metrics(human, model, columns=columns, signatures=signatures)
        if not zero:  # (a dHM that is 0 by construction needs no second warning)
            warn_one_column_twice(human, model, columns=columns)
    result = dhm_distance(h, m, tanh_g=use_tanh)
    caption = (
        f"G: {'tanh of the raw score' if use_tanh else 'as given'}; {result.n} stories scored in all six "
        f"tables ({result.dropped['human']} human-side and {result.dropped['model']} model-side ids left out)"
    )
    caption += "".join(f"\n{line}" for line in signature_lines(signatures))
    title = f"dHM: {human.name if human else ''} vs {model.name if model else ''}"
    to_stderr = per_item is not None and is_standard_output(per_item)
    rendered = render_distance(
        result, fmt, title=title, caption=caption, tanh_g=use_tanh, signatures=signatures
    )

    def show() -> None:
        emit(rendered, to_stderr=to_stderr)
        if fmt is OutputFormat.CSV:  # a CSV has no caption: what was left out goes to stderr
            note(caption)

    if per_item is not None:
        from vistkit.data.output import write_csv_rows

        rows = [[r[0], *map(repr, r[1:])] for r in per_story_rows(result)]
        _write_per_item_or_show(
            lambda: write_csv_rows(per_item, ["story_id", "dG", "dC", "dR", "dHM"], rows), per_item, show
        )
    show()


def _shown(path: Path | None) -> str:
    """A story file as a title names it: its name (a storylet field kept: ``PR_VIST.json.zip:predicted_story``),
    ``stdin`` for ``-`` (as `compare` names it), a control or invisible character escaped (as `compare` names a
    system)."""
    name = "stdin" if str(path) == "-" else Path(str(path)).name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _write_per_item_or_show(write: Callable[[], object], per_item: Path, show: Callable[[], None]) -> None:
    """``write()`` the per-story file; if it fails (a full disk, a name another run took meanwhile) the distances
    are shown first, then the error says which file is missing (as `vistkit score`): a run is never lost to it."""
    try:
        write()
    except Exception:
        if not is_standard_output(per_item):
            show()
        raise


def _check_stories_mode(
    human: Path | None,
    model: Path | None,
    human_stories: Path | None,
    model_stories: Path | None,
    *,
    metrics: dict[str, str | None],
    shared: dict[str, Any],
    dimensions: str,
    option: list[str],
    engine: str,
) -> tuple[dict[str, str], dict[str, dict[str, Any]], Any, Any]:
    """Everything `vistkit distance --human-stories/--model-stories` can refuse without a model: the files
    given, the dimensions, each metric and its options, both story files read and sharing a story id. Returns
    the metric name and options of each dimension, and the human and model stories."""
    from vistkit.commands.common import check_engine, story_file
    from vistkit.commands.score import parse_metric_options, plan_metrics, warn_unused_options
    from vistkit.data.readers import read_stories
    from vistkit.metrics.base import get_metric_class
    from vistkit.scores.dhm import DEFAULT_METRICS, DIMENSIONS, parse_dimensions

    if human_stories is None or model_stories is None:
        raise InputError("give both --human-stories and --model-stories (story files in any VIST format)")
    if human is not None or model is not None:
        raise InputError(
            "use either score files (--human/--model) or story files (--human-stories/--model-stories), not both"
        )
    if shared["sentences"] not in ("split", "source"):
        raise InputError(f"sentences must be 'split' or 'source', not {shared['sentences']!r}")
    dims = parse_dimensions(dimensions)
    check_engine(engine)
    names = {d: metrics.get(d) or DEFAULT_METRICS[d] for d in DIMENSIONS}
    per_metric = parse_metric_options(option)
    warn_unused_options([names[d] for d in dims], per_metric)  # -O bleu-4.x=1, or groovist's with G left out
    options = {d: per_metric.get(names[d], {}) for d in DIMENSIONS}
    words = {"G": "grounding", "C": "coherence", "R": "non-redundancy"}
    for d in dims:
        if get_metric_class(names[d]).needs_references:  # as `compute_dhm` says, before any metric is built
            raise InputError(
                f"{names[d]} needs reference stories, so it cannot score dHM's {words[d]} dimension {d}: choose a "
                f"reference-free metric for --{d.lower()}-metric (`vistkit metrics` says what each needs)"
            )
        plan_metrics([names[d]], shared, {names[d]: options[d]}, local=engine == "local")
    (h_path, h_field), (m_path, m_field) = story_file(human_stories), story_file(model_stories)  # FILE:FIELD
    h = read_stories(h_path, system="human", field=h_field)
    m = read_stories(m_path, system="model", field=m_field)
    for flag, path, stories in (("--human-stories", human_stories, h), ("--model-stories", model_stories, m)):
        _check_one_story_per_id(flag, path, stories)
    if not {s.story_id for s in h} & {s.story_id for s in m}:
        raise InputError("the human and model story files share no story id (dHM matches stories by id)")
    return names, options, h, m


def _check_one_story_per_id(flag: str, path: Path, stories: Any) -> None:
    """`InputError` naming the option and the id when two stories of one file share a story id: dHM matches the
    two sides by id (the metric's "a hypothesis file must hold one story per key (choose another --key?)" came
    after a side was scored, and distance has no --key)."""
    from collections import Counter

    counts = Counter(s.story_id for s in stories)
    dups = [k for k, n in counts.items() if n > 1]
    if dups:
        shown = ", ".join(repr(k) for k in dups[:3]) + (f" and {len(dups) - 3:,} more" if len(dups) > 3 else "")
        raise InputError(
            f"{flag} {path}: more than one story has the story id {shown}, and dHM matches the human and model "
            "stories by id; give each story its own id (one story per id in each file)"
        )
