"""The photo-grounded metrics (clipscore, clipscore-story, groovist, rovist-vg, rovist-vg-scaled) on the engines.

What was wrong:

- they ran as one shard on one worker under ``--engine ray`` and could not be streamed, though a story's score
  depends on that story and its photos only (CLIP / ViT embeddings of its own sentences, phrases or nouns and its
  own photos; GROOViST's concreteness and RoViST-VG's IDF come from fixed tables, not from the scored set);
- shards of a run listed the photos scored without regions (``whole_photo_fallback``) once per shard, unsorted;
- a streamed photo metric made with a photo map (``photos=``) never applied it: every story without photo ids was
  left out, "give a photo map", though one was given;
- under ``--engine ray`` every warning a worker said (the photo map misses stories, the regions file matches no
  photo, ...) was lost: Ray's workers do not send their standard error to the driver, so a run scored on whole
  photos, or without half its stories, without a word.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from ray_helpers import private_engine

from vistkit.data.story import Story, StorySet
from vistkit.metrics.base import Item, Score, align, get_metric

pytest.importorskip("PIL.Image")
pytest.importorskip("torch")
pytest.importorskip("transformers")

PHOTO_METRICS = ("clipscore", "clipscore-story", "groovist", "rovist-vg", "rovist-vg-scaled")
TEXTS = [
    "we went to the beach . the water was blue . a dog ran .",
    "a cat sat . the dog ran . a horse .",
    "the city at night . team won . dinner time .",
    "x . y . z .",
    "the beach was nice . water everywhere . sun .",
    "dinner with the team . a city . the beach .",
    "",
    "a man . a cup . the beach .",
    "one sentence only about the beach",
]


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny CLIP, a tiny RoViST-VG, 12 photos and a regions file with rows for photos 1-6 only."""
    from tiny_models import make_photo_folder, make_tiny_clip, make_tiny_rovist_vg

    root = tmp_path_factory.mktemp("grounded-r15")
    clip = make_tiny_clip(root / "tiny-clip")
    photos = make_photo_folder(root, [str(i) for i in range(1, 13)])
    regions = root / "regions.csv"
    regions.write_text("image_id,bbox\n" + "".join(f'{p},"[2, 2, 20, 20]"\n' for p in range(1, 7)))
    vg = make_tiny_rovist_vg(root / "vg")
    return {"root": root, "clip": str(clip), "photos": str(photos), "regions": str(regions), "vg": vg}


def options(name: str, fx: dict[str, Any]) -> dict[str, Any]:
    if name.startswith("clipscore"):
        return {"images": fx["photos"], "clip_model": fx["clip"]}
    if name == "groovist":
        return {"images": fx["photos"], "clip_model": fx["clip"], "regions": fx["regions"]}
    return {"images": fx["photos"], "regions": fx["regions"], **fx["vg"]}


def photo_stories(*, with_photos: bool = True) -> StorySet:
    """Stories of 3 photos each (photos 7-12 have no regions row); the one at index 3 has 2 photos (excluded by
    clipscore: 3 sentences for 2 photos)."""
    out = []
    for i, text in enumerate(TEXTS):
        photos = tuple(str(1 + (i + k) % 12) for k in range(2 if i == 3 else 3))
        out.append(Story(f"s{i}", text, photo_ids=photos if with_photos else ()))
    return StorySet(out)


def photo_map() -> dict[str, list[str]]:
    return {s.story_id: list(s.photo_ids) for s in photo_stories()}


def same(merged: Score, whole: Score) -> None:
    assert merged.item_ids == whole.item_ids
    np.testing.assert_array_equal(merged.item_scores, whole.item_scores)
    assert merged.corpus == whole.corpus or (math.isnan(merged.corpus) and math.isnan(whole.corpus))
    assert merged.excluded == whole.excluded
    assert merged.extra == whole.extra


@pytest.mark.parametrize("name", PHOTO_METRICS)
def test_photo_metrics_are_split_into_shards_and_give_the_whole_runs_scores(
    fx: dict[str, Any], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A story's score depends on that story and its photos only: the metric is split like coherence, and shards of
    2 stories (each scored by a fresh scorer, as on a worker) give the whole run's item scores, corpus score,
    exclusions and details (the photos scored without regions listed once, sorted, as by the whole run)."""
    pytest.importorskip("spacy")
    from vistkit.engine import make_engine
    from vistkit.engine.merge import merge_scores, strategy

    assert strategy(name) == "items"
    items = align(photo_stories(), None, keying="story").items
    whole = get_metric(name, **options(name, fx)).score_items(items, signature="s")
    assert np.isfinite(whole.item_scores).sum() >= 5
    parts = [
        get_metric(name, **options(name, fx)).score_items(items[k : k + 2], signature="s")
        for k in range(0, len(items), 2)
    ]
    same(merge_scores(parts, signature="s"), whole)
    if name in ("groovist", "rovist-vg"):
        fallback = whole.extra["whole_photo_fallback"]
        assert fallback == sorted({str(p) for p in range(7, 12)}), fallback
    totals = make_engine("local").score_stream(
        get_metric(name, **options(name, fx)), iter(items), signature="s", batch_size=2
    )
    assert totals.n_items == len(items)
    assert totals.corpus() == pytest.approx(whole.corpus, rel=1e-12)
    capsys.readouterr()


@pytest.mark.parametrize("name", ["clipscore", "groovist"])
def test_a_streamed_photo_metric_fills_the_photos_in_from_its_photo_map(fx: dict[str, Any], name: str) -> None:
    """`score_stream` hands the items to the metric as they are: the photo map given as ``photos=`` was never applied
    (`Metric.score` applies it), so every story was left out "give a photo map"; it now fills them in, as `score`
    does, and a story the map does not list says so."""
    pytest.importorskip("spacy")
    from vistkit.engine import make_engine

    mapping = photo_map()
    del mapping["s1"]
    path = fx["root"] / f"map-{name}.json"
    path.write_text(json.dumps(mapping))
    bare = photo_stories(with_photos=False)
    metric = get_metric(name, **options(name, fx), photos=str(path))
    whole = metric.score(bare)
    parts: list[Score] = []
    items = [Item(s.story_id, s) for s in bare]
    totals = make_engine("local").score_stream(metric, iter(items), signature="s", batch_size=4, on_part=parts.append)
    scores = np.concatenate([p.item_scores for p in parts])
    np.testing.assert_array_equal(scores, whole.item_scores)
    assert totals.corpus() == pytest.approx(whole.corpus, rel=1e-12)
    excluded = {k: v for p in parts for k, v in p.excluded.items()}
    assert excluded.keys() == whole.excluded.keys() and "s1" in excluded
    assert "photo map given has no photos for it" in excluded["s1"], excluded["s1"]


# ------------------------------------------------------------------------------------------ on a cluster
@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    """One 2-worker engine on a private local cluster for the module."""
    with private_engine(num_cpus=2, store_mb=100) as eng:
        yield eng


@pytest.mark.ray
@pytest.mark.slow
def test_workers_warnings_reach_the_terminal_once_for_the_run(
    fx: dict[str, Any], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under Ray, groovist with a photo map that misses a story and a regions file without rows for half the photos
    said nothing (the workers' standard error is not the driver's); the map's warning and one regions warning for
    the whole run (not one per shard) are now said, as the local engine says them, and the scores are the same."""
    pytest.importorskip("spacy")
    mapping = photo_map()
    del mapping["s1"]
    path = fx["root"] / "map-ray.json"
    path.write_text(json.dumps(mapping))
    opts = {**options("groovist", fx), "photos": str(path)}
    bare = photo_stories(with_photos=False)
    capsys.readouterr()
    local = get_metric("groovist", **opts).score(bare)
    local_err = capsys.readouterr().err
    engine.batch_size = 2
    try:
        remote = engine.metric("groovist", opts).score(bare)
    finally:
        engine.batch_size = None
    err = capsys.readouterr().err
    # a worker runs torch on one thread: float32 sums in another order (the last bits)
    np.testing.assert_allclose(remote.item_scores, local.item_scores, rtol=1e-5)
    assert remote.excluded == local.excluded
    assert remote.extra["whole_photo_fallback"] == local.extra["whole_photo_fallback"]
    assert err.count("no entry in the photo map") == 1, err
    assert err.count("have no row in the regions file") == 1, err
    fallback = [line for line in local_err.splitlines() if "have no row" in line]
    assert fallback and fallback[0] in err, (local_err, err)


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_stream_of_photo_stories_uses_the_map_and_says_its_warnings(
    fx: dict[str, Any], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("spacy")
    path = fx["root"] / "map-stream.json"
    path.write_text(json.dumps(photo_map()))
    opts = {**options("clipscore", fx), "photos": str(path)}
    bare = photo_stories(with_photos=False)
    local = get_metric("clipscore", **opts).score(bare)
    items = [Item(s.story_id, s) for s in bare]
    parts: list[Score] = []
    totals = engine.score_stream(
        engine.metric("clipscore", opts), iter(items), signature="s", batch_size=3, on_part=parts.append
    )
    np.testing.assert_allclose(np.concatenate([p.item_scores for p in parts]), local.item_scores, rtol=1e-5)
    assert totals.corpus() == pytest.approx(local.corpus, rel=1e-5)


@pytest.mark.ray
@pytest.mark.slow
def test_two_photo_metrics_on_ray_say_the_maps_warning_once(
    fx: dict[str, Any], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``score -m clipscore,groovist --photos map.json`` says the map's warning once in this process; each worker
    call gets a copy of the stories, so replaying the workers' warnings said it once per metric: once, as locally."""
    pytest.importorskip("spacy")
    mapping = photo_map()
    del mapping["s2"]
    path = fx["root"] / "map-two.json"
    path.write_text(json.dumps(mapping))
    bare = photo_stories(with_photos=False)
    capsys.readouterr()
    for name in ("clipscore", "groovist"):
        engine.metric(name, {**options(name, fx), "photos": str(path)}).score(bare)
    err = capsys.readouterr().err
    assert err.count("no entry in the photo map") == 1, err
