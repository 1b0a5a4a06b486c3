"""dHM end to end: score human and model stories on G, C, R, then the human-model distances.

The official pipeline (akskuchi/dHM-visual-storytelling) runs three scripts (GROOViST for G, ``eval_C_R.py``
for C and R) and ``dHM.py`` on their outputs. Here `compute_dhm` does all of it from two story sets matched by
story id, and says which stories were left out and why: the official code drops them silently (e.g. the 156
VIST test human stories written without sentence punctuation, which Punkt cannot split, so C and R are
undefined).

Per story, with ``X`` one of the chosen dimensions (default G, C, R; tanh applied to raw GROOViST as dHM
does):

    d_X(s) = |X_human(s) - X_model(s)|,   dHM(s) = mean over the chosen X of d_X(s)

(Surikuchi et al. 2024, Sec. 3.2: Eq. 1 and, with all three dimensions, Eq. 2)

and the reported dX and dHM are means over the stories defined on every chosen dimension on both sides (with
all three dimensions this is exactly ``dHM.py``; `vistkit.scores.distance.dhm_distance` computes the same from score
files).

Sentences: ``sentences="split"`` (default) splits every story with NLTK 3.8.1 Punkt as the official scripts
do; ``sentences="source"`` uses the sentences the reader knows (the five VIST storylets of SIS/PR-VIST files)
for the metrics that accept it, and Punkt for the stories (or metrics) that have none; the result's ``notes``
say which was used where.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from vistkit import progress
from vistkit.data.story import Keying, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics.base import Metric, Score, get_metric_class
from vistkit.scores.distance import _natural_key, dimension_distances, finite_mean

if TYPE_CHECKING:
    from vistkit.engine import Engine

__all__ = ["DEFAULT_METRICS", "DIMENSIONS", "DhmDistance", "DhmResult", "compute_dhm", "distance_from_tables"]

DIMENSIONS = ("G", "C", "R")
DEFAULT_METRICS = {"G": "groovist", "C": "dhm-c", "R": "rovist-nr"}
_NAMES = {"G": "grounding", "C": "coherence", "R": "non-redundancy"}


@dataclass(frozen=True)
class DhmDistance:
    """Mean per-story distances over ``n`` stories for the chosen dimensions (``d["G"]`` = dG, ...)."""

    dimensions: tuple[str, ...]
    d: dict[str, float]
    dHM: float
    n: int
    tanh_g: bool = True
    per_story: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """``{"dG", "dC", "dR", "dHM", "n"}`` (only the chosen dimensions), full precision."""
        return {**{f"d{k}": v for k, v in self.d.items()}, "dHM": self.dHM, "n": self.n}


class DhmResult(NamedTuple):
    """``(tables, excluded, distance, notes, signatures)``.

    - ``tables[side][dim][story_id]``: the raw metric value (``side`` = ``"human"``/``"model"``; NaN =
      undefined);
    - ``excluded[story_id]``: why the story is not in the distance (every reason, ``;``-joined);
    - ``distance``: `DhmDistance`;
    - ``notes``: metrics, signatures and sentence sources used (one line each);
    - ``signatures[dim]``: ``{"metric": name, "signature": ...}`` of the metric that scored each dimension.
    """

    tables: dict[str, dict[str, dict[str, float]]]
    excluded: dict[str, str]
    distance: DhmDistance
    notes: list[str]
    signatures: dict[str, dict[str, str]]


def distance_from_tables(
    human: Mapping[str, Mapping[str, float]],
    model: Mapping[str, Mapping[str, float]],
    *,
    dimensions: Sequence[str] = DIMENSIONS,
    tanh_g: bool = True,
) -> DhmDistance:
    """dX and dHM from ``{dim: {story_id: value}}`` tables, over the ids defined (not NaN) in all of them."""
    dims = tuple(dimensions)
    ids: set[str] | None = None
    for side in (human, model):
        for dim in dims:
            defined = {s for s, v in side.get(dim, {}).items() if v is not None and not math.isnan(v)}
            ids = defined if ids is None else ids & defined
    order = sorted(ids or set(), key=_natural_key)
    if not order:
        raise InputError(
            f"no story has all {2 * len(dims)} scores (human and model {', '.join(dims)}); check that both "
            f"story "
            "files use the same story ids"
        )
    per = dimension_distances(human, model, order, dims, tanh_g=tanh_g)
    hm = finite_mean(np.stack([per[d] for d in dims]), axis=0)
    per_story = {s: {**{d: float(per[d][i]) for d in dims}, "HM": float(hm[i])} for i, s in enumerate(order)}
    return DhmDistance(
        dimensions=dims,
        d={d: float(finite_mean(per[d])) for d in dims},
        dHM=float(finite_mean(hm)),
        n=len(order),
        tanh_g=tanh_g,
        per_story=per_story,
    )


def parse_dimensions(dimensions: str | Sequence[str]) -> tuple[str, ...]:
    items = dimensions.split(",") if isinstance(dimensions, str) else list(dimensions)
    dims = tuple(dict.fromkeys(d.strip().upper() for d in items if d.strip()))
    bad = [d for d in dims if d not in DIMENSIONS]
    if bad or not dims:
        raise InputError(f"dimensions must be a subset of G,C,R (e.g. C,R), not {','.join(items)!r}")
    return tuple(d for d in DIMENSIONS if d in dims)


def _build_metric(
    dim: str, spec: str | Metric, options: Mapping[str, Any], dims: tuple[str, ...], engine: Engine | None = None
) -> Metric:
    if isinstance(spec, Metric):
        return spec
    cls = get_metric_class(spec)
    if cls.needs_references:  # dHM compares each human story with the model's: no reference stories to give
        raise InputError(
            f"{spec} needs reference stories, so it cannot score dHM's {_NAMES[dim]} dimension {dim}: choose a "
            f"reference-free metric for --{dim.lower()}-metric (`vistkit metrics` says what each needs)"
        )
    params = inspect.signature(cls.__init__).parameters
    accepted = {k: v for k, v in options.items() if k in params and v is not None}
    try:
        return engine.metric(spec, accepted) if engine is not None else cls(**accepted)
    except MissingDependencyError as exc:
        others = ",".join(d for d in dims if d != dim)
        ways = [f"leave it out with --dimensions {others}"] if others else []
        if dim == "C" and "coherence" not in str(exc):
            ways.insert(0, "use the offline coherence model with --c-metric coherence")
        if not others:
            ways.append(f"choose other dimensions with --dimensions {','.join(d for d in DIMENSIONS if d != dim)}")
        raise MissingDependencyError(
            f"dHM's {_NAMES[dim]} dimension {dim} cannot run: {str(exc).rstrip('.')} (or {', or '.join(ways)})"
        ) from None


def _accepts(metric: Metric, option: str) -> bool:
    cls = getattr(metric, "metric_class", type(metric))  # an engine's remote metric names its class
    return option in inspect.signature(cls.__init__).parameters


def _warn_one_metric_twice(specs: Mapping[str, Any], dims: Sequence[str]) -> None:
    """Warn when one metric scores two of the dimensions (``--c-metric rovist-nr`` beside R's default rovist-nr):
    dHM then averages its distance twice, and dC and dR are one number."""
    chosen: dict[str, str] = {}
    for dim in dims:
        name = specs[dim] if isinstance(specs[dim], str) else str(getattr(specs[dim], "name", ""))
        if name and name in chosen:
            from vistkit.errors import warn

            warn(
                f"{name} scores both {chosen[name]} and {dim}, so dHM counts one metric twice; give each dimension "
                "its own metric (--g-metric, --c-metric, --r-metric; g_metric=, c_metric=, r_metric= in Python)"
            )
        chosen.setdefault(name, dim)


def _warn_same_stories(human: StorySet, model: StorySet) -> None:
    """Warn when every shared story has one text on both sides (the human story file given as the model's too):
    dHM is then 0 by construction."""
    texts = {s.story_id: s.text for s in human}
    if texts and all(texts.get(s.story_id) == s.text for s in model):
        from vistkit.errors import warn

        warn(
            f"the human and model stories have the same text for all {len(texts)} stories they share, so dHM is 0: "
            "check that the model story file (--model-stories) holds the model's stories, not the human ones again"
        )


def compute_dhm(
    human: StorySet,
    model: StorySet,
    *,
    c_metric: str | Metric = DEFAULT_METRICS["C"],
    g_metric: str | Metric = DEFAULT_METRICS["G"],
    r_metric: str | Metric = DEFAULT_METRICS["R"],
    images: Any = None,
    regions: Any = None,
    photos: Any = None,
    sentences: str = "split",
    dimensions: str | Sequence[str] = DIMENSIONS,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    engine: Engine | None = None,
    tanh_g: bool | None = None,
) -> DhmResult:
    """Score both story sets on the chosen dimensions and return tables, exclusions and the distance.

    Stories are matched by story id. Metrics are registry names or ready `Metric` objects (e.g. a loaded
    ``Groovist``); ``images``/``regions``/``photos`` go to the metrics that take them (G), ``sentences`` to
    the metrics that take it, ``options[dim]`` to that dimension's metric. A dimension whose model is missing
    raises `MissingDependencyError` with one sentence (and the ``dimensions`` subset that avoids it).
    ``engine`` (`vistkit.engine`) runs the scoring elsewhere, e.g. on Ray workers. ``tanh_g``: tanh on G (True)
    or not (False); None: as dHM, tanh unless the G metric is bounded within [-1, 1].
    """
    if sentences not in ("split", "source"):
        raise InputError(f"sentences must be 'split' or 'source', not {sentences!r}")
    dims = parse_dimensions(dimensions)
    specs = {"G": g_metric, "C": c_metric, "R": r_metric}
    _warn_one_metric_twice(specs, dims)
    shared = {"images": images, "regions": regions, "photos": photos, "sentences": sentences}
    metrics: dict[str, Metric] = {}
    for dim in dims:
        opts = {**shared, **dict((options or {}).get(dim, {}))}
        metrics[dim] = _build_metric(dim, specs[dim], opts, dims, engine)

    h_ids = {s.story_id for s in human}
    m_ids = {s.story_id for s in model}
    excluded_reasons: dict[str, list[str]] = {}
    for sid in h_ids - m_ids:
        excluded_reasons.setdefault(sid, []).append("no model story with this id")
    for sid in m_ids - h_ids:
        excluded_reasons.setdefault(sid, []).append("no human story with this id")
    common = h_ids & m_ids
    if not common:
        raise InputError("the human and model story files share no story id (dHM matches stories by id)")
    sides = {"human": human.filter(common, Keying.STORY), "model": model.filter(common, Keying.STORY)}
    _warn_same_stories(sides["human"], sides["model"])

    tables: dict[str, dict[str, dict[str, float]]] = {"human": {}, "model": {}}
    notes: list[str] = []
    signatures: dict[str, dict[str, str]] = {}
    for dim in dims:
        metric = metrics[dim]
        sent_note = "Punkt split (the metric has no sentence option)"
        if _accepts(metric, "sentences"):
            sent_note = f"sentences={getattr(metric, 'sentences', sentences)}"
        for side, stories in sides.items():
            with progress.labelled(f"{side} {dim}"):
                score: Score = metric.score(stories, key=Keying.STORY)
            values = dict(zip(score.item_ids, (float(v) for v in score.item_scores), strict=True))
            tables[side][dim] = values
            for sid, value in values.items():
                if math.isnan(value):
                    reason = score.excluded.get(sid, "undefined")
                    excluded_reasons.setdefault(sid, []).append(f"{side} {dim} ({metric.name}): {reason}")
            if side == "human":
                notes.append(f"{dim}: {score.signature} [{sent_note}]")
                signatures[dim] = {"metric": metric.name, "signature": score.signature}
    if sentences == "source":
        with_source = [s for s in sides["human"] if s.sentences is not None] + [
            s for s in sides["model"] if s.sentences is not None
        ]
        total = len(sides["human"]) + len(sides["model"])
        notes.append(
            f"sentences: the source's for {len(with_source)} of {total} stories, Punkt split for the rest"
        )
    else:
        notes.append("sentences: Punkt split (NLTK 3.8.1) for every story, as the official scripts")
    # dHM applies tanh to raw (unbounded) GROOViST; a G metric already within [-1, 1] is used as it is
    forced = tanh_g is not None
    if "G" in metrics and tanh_g is None:
        lo, hi = type(metrics["G"]).lower_bound, type(metrics["G"]).upper_bound
        tanh_g = not (lo is not None and hi is not None and lo >= -1 and hi <= 1)
    tanh_g = True if tanh_g is None else tanh_g
    if "G" in metrics:
        how = "as scored" + ("" if forced else " (bounded in [-1, 1])")
        notes.append(f"G: {'tanh of the raw score' if tanh_g else how}{' (--tanh-g/--no-tanh-g)' if forced else ''}")
    distance = distance_from_tables(tables["human"], tables["model"], dimensions=dims, tanh_g=tanh_g)
    excluded = {sid: "; ".join(r) for sid, r in sorted(excluded_reasons.items())}
    return DhmResult(tables=tables, excluded=excluded, distance=distance, notes=notes, signatures=signatures)


# ----------------------------------------------------------------------------------------------- CLI helpers
def dhm_from_story_files(
    human: Any,
    model: Any,
    *,
    human_format: str | None = None,
    model_format: str | None = None,
    metrics: Mapping[str, str | None] | None = None,
    option_pairs: Sequence[str] = (),
    **kwargs: Any,
) -> DhmResult:
    """`compute_dhm` on two story files (any VIST format); ``metrics`` maps G/C/R to metric names (None =
    default) and ``option_pairs`` are ``METRIC.OPTION=VALUE`` strings as ``vistkit score -O`` takes."""
    from vistkit.commands.score import parse_metric_options
    from vistkit.data.readers import read_stories

    h = read_stories(human, format=human_format, system="human")
    m = read_stories(model, format=model_format, system="model")
    names = {d: (metrics or {}).get(d) or DEFAULT_METRICS[d] for d in DIMENSIONS}
    per_metric = parse_metric_options(list(option_pairs))
    options = {d: per_metric.get(names[d], {}) for d in DIMENSIONS}
    return compute_dhm(
        h, m, g_metric=names["G"], c_metric=names["C"], r_metric=names["R"], options=options, **kwargs
    )


def exclusion_summary(excluded: Mapping[str, str]) -> list[str]:
    """``"N stories: reason"`` lines, most frequent first (reasons without the story-specific details)."""
    counts: dict[str, int] = {}
    for reasons in excluded.values():
        for reason in reasons.split("; "):
            head = ": ".join(reason.split(": ")[:2])
            if "photo(s) " in head:  # drop the photo ids
                head = head.split("photo(s) ")[0] + "photo(s) not found"
            counts[head] = counts.get(head, 0) + 1
    return [
        f"{n} stor{'y' if n == 1 else 'ies'}: {r}" for r, n in sorted(counts.items(), key=lambda kv: -kv[1])
    ]


def render_dhm(result: DhmResult, fmt: Any, *, title: str = "dHM from stories") -> str:
    """The distance table (text/csv/latex) with exclusions and notes as caption, or JSON with everything."""
    from vistkit.report.tables import OutputFormat, dumps_json, render_table

    dist = result.distance
    if OutputFormat(fmt) is OutputFormat.JSON:
        return dumps_json(
            {
                **dist.as_dict(),
                "dimensions": list(dist.dimensions),
                "excluded": result.excluded,
                # as `score -f json`: metric -> signature; `metrics` says which metric scored each dimension
                "metrics": {dim: entry["metric"] for dim, entry in result.signatures.items()},
                "signatures": {entry["metric"]: entry["signature"] for entry in result.signatures.values()},
                "notes": result.notes,
            }
        )
    cols = [f"d{d}" for d in dist.dimensions] + ["dHM", "n"]
    row: list[Any] = [dist.d[d] for d in dist.dimensions] + [dist.dHM, dist.n]
    if OutputFormat(fmt) is OutputFormat.CSV:  # a CSV has no caption: each dimension's signature in a column
        cols += [f"signature {d}" for d in dist.dimensions if d in result.signatures]
        row += [result.signatures[d]["signature"] for d in dist.dimensions if d in result.signatures]
    caption = dhm_caption(result)
    if OutputFormat(fmt) is OutputFormat.TEXT:  # notes under the table, unwrapped (signatures are long)
        return render_table(cols, [row], OutputFormat.TEXT, title=title) + "\n" + "\n".join(caption)
    return render_table(cols, [row], OutputFormat(fmt), title=title, caption="\n".join(caption))


def dhm_caption(result: DhmResult) -> list[str]:
    """The lines under the distance table: the stories left out and why, the signatures and notes (a CSV's
    stderr gets them)."""
    n_out = len(result.excluded)
    return [
        f"{n_out} stor{'y' if n_out == 1 else 'ies'} left out:" if n_out else "no story left out",
        *exclusion_summary(result.excluded),
        *result.notes,
    ]


def write_dhm_per_story(result: DhmResult, path: Any) -> None:
    """CSV ``story_id,dG,dC,dR,dHM,excluded``: a row per story; the reason instead of numbers if left out
    (``path`` ``-``: standard output)."""
    from vistkit.data.output import is_standard_output, open_csv_output

    dims = result.distance.dimensions
    with open_csv_output(path, lineterminator="\n" if is_standard_output(path) else "\r\n") as w:
        w.writerow(["story_id", *[f"d{d}" for d in dims], "dHM", "excluded"])
        for sid, row in result.distance.per_story.items():
            w.writerow([sid, *[repr(row[d]) for d in dims], repr(row["HM"]), ""])
        for sid, reason in result.excluded.items():
            w.writerow([sid, *["" for _ in dims], "", reason])


def distance_from_story_files(
    human_stories: Any,
    model_stories: Any,
    *,
    fmt: Any = "text",
    per_item: Any = None,
    human_scores: Any = None,
    model_scores: Any = None,
    g_metric: str | None = None,
    c_metric: str | None = None,
    r_metric: str | None = None,
    images: Any = None,
    regions: Any = None,
    photos: Any = None,
    dimensions: str = "G,C,R",
    sentences: str = "split",
    option_pairs: Sequence[str] = (),
    engine: Engine | None = None,
) -> str:
    """What ``vistkit distance --human-stories H --model-stories M`` prints (and ``--per-item`` writes)."""
    if human_stories is None or model_stories is None:
        raise InputError("give both --human-stories and --model-stories (story files in any VIST format)")
    if human_scores is not None or model_scores is not None:
        raise InputError(
            "use either score files (--human/--model) or story files (--human-stories/--model-stories), "
            "not both"
        )
    result = dhm_from_story_files(
        human_stories,
        model_stories,
        metrics={"G": g_metric, "C": c_metric, "R": r_metric},
        option_pairs=option_pairs,
        images=images,
        regions=regions,
        photos=photos,
        dimensions=dimensions,
        sentences=sentences,
        engine=engine,
    )
    if per_item is not None:
        write_dhm_per_story(result, per_item)
    name = getattr(human_stories, "name", str(human_stories))
    other = getattr(model_stories, "name", str(model_stories))
    return render_dhm(result, fmt, title=f"dHM: {name} vs {other} (scored from stories)")
