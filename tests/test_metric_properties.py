"""Declared-property tests over EVERY registered metric (scikit-learn's invariance-test idea).

Each metric in `list_metrics()` is checked, by what it declares (bounds, needs_references, needs_images), for:
determinism, order invariance (shuffling items changes neither per-item nor corpus scores), declared bounds,
item ids, a clear `VistkitError` (never a traceback) on empty input, missing references, no shared key,
stories without photos (image metrics) and degenerate stories (empty text, punctuation only), and for
reference-based higher-is-better metrics that a hypothesis equal to its references is not worse than another.

Metrics are collected when the tests are, so a newly registered metric is picked up automatically.
Metrics that need resources (model weights, images) are built with tiny test resources where they offer a
way: a constructor option ``images`` gets a folder of tiny generated photos, ``clip_model`` a tiny random
CLIP, and the metrics in `TINY_MODELS` the options a builder in ``tests/tiny_models.py`` returns (tiny random
models; test support stays out of the package). Otherwise a metric whose resources are missing is skipped with
the exact `MissingDependencyError` message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vistkit.data.story import Story, StorySet
from vistkit.errors import MissingDependencyError, UnavailableMetricError, VistkitError
from vistkit.metrics.base import Metric, MetricCard, Score, list_metrics

METRICS = sorted(list_metrics())

PHOTOS = [str(p) for p in range(101, 109)]
SEQ = {
    "a": ("101", "102", "103", "104", "105"),
    "b": ("106", "107", "108", "101", "102"),
    "c": ("103", "104", "105", "106", "107"),
    "d": ("108", "107", "106", "105", "104"),
}
HYP_TEXT = {
    "a": "we went to the beach today . the water was blue and cold . my brother built a sand castle . "
    "we ate sandwiches on a blanket . the sun set over the sea .",
    "b": "the family gathered for dinner . grandma cooked a big turkey . everyone sat at the long table . "
    "the kids played games after dinner . it was a wonderful night .",
    "c": "the city was busy this morning . people walked to work in the rain . a man sold flowers on the "
    "corner . the buses were full . we found a quiet cafe .",
    "d": "our team won the game . the crowd cheered loudly . the players lifted the coach . "
    "fans waved flags in the stands . we celebrated all night .",
}
REF_TEXT = {
    "a": [
        "we spent the day at the beach . the water was cold but clear . my brother made a castle of sand . "
        "we had a picnic on the sand . the sunset was beautiful .",
        "the beach was crowded today . we swam in the sea . a castle was built . lunch was sandwiches . "
        "the sun went down .",
    ],
    "b": [
        "we all came home for dinner . grandma made turkey . the table was long and full . "
        "the children played afterwards . we had a great night .",
        "dinner with the family . turkey and potatoes . everyone was there . games for the kids . "
        "a good night .",
    ],
    "c": [
        "the city woke up early . it rained on the commuters . flowers were sold on the street . "
        "the bus was crowded . we sat in a small cafe .",
        "a rainy morning downtown . people hurried to work . a flower stand on the corner . full buses . "
        "coffee at a cafe .",
    ],
    "d": [
        "we won the big game . the fans were loud . the coach was carried by the players . "
        "flags were everywhere . the party lasted all night .",
        "victory for our team . cheering crowds . the coach in the air . flags in the stands . "
        "a night of celebration .",
    ],
}


def _hyps(keys: list[str] | None = None, texts: dict[str, str] | None = None) -> StorySet:
    texts = texts or HYP_TEXT
    return StorySet(
        Story(story_id=f"h-{k}", text=texts[k], photo_ids=SEQ[k], album_id=f"al-{k}", system="model")
        for k in (keys or list(texts))
    )


def _refs(keys: list[str] | None = None) -> StorySet:
    return StorySet(
        Story(story_id=f"r-{k}-{i}", text=t, photo_ids=SEQ[k], album_id=f"al-{k}", system="human")
        for k in (keys or list(REF_TEXT))
        for i, t in enumerate(REF_TEXT[k])
    )


# --------------------------------------------------------------------------------------------------- building
def _tiny_sop(folder: Path) -> dict[str, Any]:
    from tiny_models import make_tiny_sop_folder

    return {"model": make_tiny_sop_folder(folder)}


def _tiny_vrank(folder: Path) -> dict[str, Any]:
    from tiny_models import make_tiny_vrank

    return {"model": str(make_tiny_vrank(folder)), "device": "cpu"}


def _tiny_rovist_vg(folder: Path) -> dict[str, Any]:
    from tiny_models import make_tiny_rovist_vg

    return make_tiny_rovist_vg(folder)


def _tiny_lm(folder: Path) -> dict[str, Any]:
    from tiny_models import make_tiny_causal_lm

    shared = folder.parent / "tiny-causal-lm"  # one LM for the three LM metrics
    if not shared.is_dir():
        make_tiny_causal_lm(shared)
    return {"lm": str(shared), "device": "cpu"}


TINY_MODELS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "lm-perplexity": _tiny_lm,
    "lm-fluency": _tiny_lm,
    "lm-coherence": _tiny_lm,
    "story-ranker": _tiny_lm,
    "rovist-c": _tiny_sop,
    "dhm-c": _tiny_sop,
    "vrank": _tiny_vrank,
    "rovist-vg": _tiny_rovist_vg,
    "rovist-vg-scaled": _tiny_rovist_vg,
}


@pytest.fixture(scope="module")
def resources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("metric-resources")


def _photo_dir(root: Path) -> Path:
    from tiny_models import make_photo_folder

    return make_photo_folder(root, PHOTOS)


def _tiny_clip(root: Path) -> Path:
    folder = root / "tiny-clip"
    if not folder.is_dir():
        from tiny_models import make_tiny_clip

        make_tiny_clip(folder)
    return folder


def _options(name: str, cls: type[Metric], root: Path) -> dict[str, Any]:
    import inspect

    params: set[str] = set()  # options of every __init__ up the MRO (subclasses often forward **kwargs)
    for klass in cls.__mro__:
        if "__init__" in vars(klass) and klass is not object:
            params |= set(inspect.signature(klass.__init__).parameters)
    opts: dict[str, Any] = {}
    if "images" in params:
        opts["images"] = _photo_dir(root)
    if "clip_model" in params:
        opts["clip_model"] = str(_tiny_clip(root))
    if name in TINY_MODELS:
        opts.update(TINY_MODELS[name](root / name))
    return opts


_BUILT: dict[str, Metric | str | Exception] = {}


def _build(name: str, root: Path) -> Metric | str | Exception:
    """Build once per session: the metric, the skip reason (a missing resource), or the unexpected error."""
    if name not in _BUILT:
        cls = list_metrics()[name]
        try:
            _BUILT[name] = cls(**_options(name, cls, root))
        except (MissingDependencyError, UnavailableMetricError) as exc:
            _BUILT[name] = str(exc)
        except Exception as exc:  # reported once, by test_builds_or_says_what_is_missing
            _BUILT[name] = exc
    return _BUILT[name]


def _metric(name: str, root: Path) -> Metric:
    """The built metric, or skip with the exact reason (or because it cannot be built at all)."""
    built = _build(name, root)
    if isinstance(built, str):
        pytest.skip(built)
    if isinstance(built, Exception):
        pytest.skip(f"{name} cannot be built: see test_builds_or_says_what_is_missing[{name}]")
    return built


def _score(metric: Metric, hyps: StorySet, refs: StorySet | None = None) -> Score:
    """Score, skipping (with the exact message) when a resource turns out to be missing only at scoring."""
    try:
        return metric.score(hyps, refs if metric.needs_references else None)
    except MissingDependencyError as exc:
        pytest.skip(str(exc))


def _keys(score: Score, hyps: StorySet) -> dict[str, str]:
    """Story id -> item id under the keying the Score reports (story ids when it reports none)."""
    keying = score.keying or "story"
    return {s.story_id: s.key(keying) for s in hyps}


def _by_id(score: Score) -> dict[str, float]:
    return {i: float(v) for i, v in zip(score.item_ids, score.item_scores, strict=True)}


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == pytest.approx(b, rel=1e-6, abs=1e-6)


def _in_bounds(cls: type[Metric], value: float) -> bool:
    if math.isnan(value):
        return True
    lo = -math.inf if cls.lower_bound is None else cls.lower_bound - 1e-9
    hi = math.inf if cls.upper_bound is None else cls.upper_bound + 1e-9
    return lo <= value <= hi


# --------------------------------------------------------------------------------------------------- tests
def test_registry_is_not_empty() -> None:
    assert METRICS, "no metric registered"


@pytest.mark.parametrize("name", METRICS)
def test_declared_attributes(name: str) -> None:
    cls = list_metrics()[name]
    assert cls.name == name
    assert isinstance(cls.card, MetricCard) and cls.card.summary and cls.card.definition
    assert isinstance(cls.higher_is_better, bool)
    for flag in (cls.needs_references, cls.needs_images, cls.needs_human_story):
        assert isinstance(flag, bool)
    if cls.lower_bound is not None and cls.upper_bound is not None:
        assert cls.lower_bound < cls.upper_bound


@pytest.mark.parametrize("name", METRICS)
def test_builds_or_says_what_is_missing(name: str, resources: Path) -> None:
    """With its defaults (plus tiny test resources), a metric builds, or raises MissingDependencyError."""
    built = _build(name, resources)
    if isinstance(built, Exception):
        pytest.fail(
            f"building {name} raised {type(built).__name__}: {built} (a missing model or resource must raise "
            "MissingDependencyError with one sentence saying what to provide)"
        )
    if isinstance(built, str):
        assert built.strip() and "\n" not in built.strip(), "the reason must be one clear sentence"
        pytest.skip(built)


@pytest.mark.parametrize("name", METRICS)
def test_deterministic_with_ids_signature_and_bounds(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    first = _score(metric, _hyps(), _refs())
    second = _score(metric, _hyps(), _refs())
    assert first.item_ids == second.item_ids
    assert np.array_equal(first.item_scores, second.item_scores, equal_nan=True)
    assert _same(first.corpus, second.corpus)
    assert first.signature == second.signature and first.signature.startswith(name)
    # one item per hypothesis key under the keying the Score reports
    assert set(first.item_ids) | set(first.excluded) == set(_keys(first, _hyps()).values())
    assert len(first.item_scores) == len(first.item_ids) == len(set(first.item_ids))
    cls = type(metric)
    assert all(_in_bounds(cls, float(v)) for v in first.item_scores), (cls.lower_bound, cls.upper_bound)
    assert _in_bounds(cls, first.corpus)
    if math.isnan(first.corpus):  # e.g. a tiny test model too short for every story: each must say why
        undefined = [i for i, v in zip(first.item_ids, first.item_scores, strict=True) if math.isnan(v)]
        assert set(undefined) <= set(first.excluded)


@pytest.mark.parametrize("name", METRICS)
def test_order_invariance(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    base = _score(metric, _hyps(), _refs())
    order = ["c", "a", "d", "b"]
    refs = StorySet(list(reversed(list(_refs(order)))))
    shuffled = _score(metric, _hyps(order), refs)
    a, b = _by_id(base), _by_id(shuffled)
    assert a.keys() == b.keys()
    assert all(_same(a[k], b[k]) for k in a), {k: (a[k], b[k]) for k in a if not _same(a[k], b[k])}
    assert _same(base.corpus, shuffled.corpus)


@pytest.mark.parametrize("name", METRICS)
def test_empty_input_is_a_clear_error(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    with pytest.raises(VistkitError):
        metric.score(StorySet([]), _refs() if metric.needs_references else None)


@pytest.mark.parametrize("name", METRICS)
def test_missing_or_unmatched_references_are_clear_errors(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    if not metric.needs_references:
        pytest.skip(f"{name} does not use references")
    with pytest.raises(VistkitError, match="reference"):
        metric.score(_hyps(), None)
    # references for other sequences only: nothing to pair
    with pytest.raises(VistkitError):
        metric.score(_hyps(["a", "b"]), _refs(["c", "d"]))


@pytest.mark.parametrize("name", METRICS)
def test_image_metric_without_photos_is_a_clear_error(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    if not metric.needs_images:
        pytest.skip(f"{name} does not use images")
    bare = StorySet(Story(story_id=f"h-{k}", text=t) for k, t in HYP_TEXT.items())
    try:
        result = metric.score(bare, _refs() if metric.needs_references else None)
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    except VistkitError:
        return
    # a metric may instead leave every such story undefined, saying why
    assert all(math.isnan(v) for v in result.item_scores) and result.excluded


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("degenerate", ["", "   ", ".", "a"])
def test_degenerate_story_gives_a_value_or_a_clear_error(name: str, degenerate: str, resources: Path) -> None:
    metric = _metric(name, resources)
    texts = {**HYP_TEXT, "b": degenerate}
    try:
        result = _score(metric, _hyps(texts=texts), _refs())
    except VistkitError:
        return  # a clear error is fine; a traceback is not
    cls = type(metric)
    assert all(_in_bounds(cls, float(v)) for v in result.item_scores)
    assert _in_bounds(cls, result.corpus)
    key = _keys(result, _hyps(texts=texts))["h-b"]
    if math.isnan(_by_id(result).get(key, math.nan)):
        assert key in result.excluded, "an undefined item must say why (Score.excluded)"


@pytest.mark.parametrize("name", METRICS)
def test_reference_copy_is_not_worse_than_another_story(name: str, resources: Path) -> None:
    metric = _metric(name, resources)
    if not (metric.needs_references and metric.higher_is_better):
        pytest.skip(f"{name} is not a higher-is-better reference-based metric")
    copied = {k: REF_TEXT[k][0] for k in HYP_TEXT}
    swapped = {"a": HYP_TEXT["d"], "b": HYP_TEXT["c"], "c": HYP_TEXT["b"], "d": HYP_TEXT["a"]}
    good = _by_id(_score(metric, _hyps(texts=copied), _refs()))
    bad = _by_id(_score(metric, _hyps(texts=swapped), _refs()))
    for k in good:
        assert good[k] >= bad[k] - 1e-9, (k, good[k], bad[k])
