"""The engines: what a worker says when its call fails, and a warning said once per run of shards or batches.

What was wrong:

- under ``--engine ray`` the warnings a worker said during a call that then failed were lost (only the warnings of
  calls that returned reached the driver): the local engine says them before the error;
- a streamed photo metric (both engines) said its regions warning once per batch, each with that batch's counts;
  a warning that says counts (bertscore's cut texts) was said once per Ray shard or streamed batch likewise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from ray_helpers import private_engine

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, warn
from vistkit.metrics import base
from vistkit.metrics.base import Item, Metric, MetricCard, Score, get_metric, mean_score

NOISY = "test-noisy-r16"


class _Noisy(Metric):
    """A test metric: warns how many of its call's stories say "odd", and fails on a story that says "fail"."""

    name: ClassVar[str] = NOISY
    card: ClassVar[MetricCard] = MetricCard(
        summary="test only", definition="words", range="[0, inf)", signature_fields="-", reproduces="-"
    )

    def signature_fields(self) -> dict[str, object]:
        return {"unit": "words"}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        odd = sum(i.hypothesis.text == "odd" for i in items)
        if odd:
            warn(f"{NOISY}: {odd} of {len(items)} stories say odd; check them")
        warn(f"{NOISY}: the same words every call")
        if any(i.hypothesis.text == "fail" for i in items):
            raise InputError(f"{NOISY} cannot score a story that says fail")
        values = [float(len(i.hypothesis.text.split())) for i in items]
        return mean_score(self.name, [i.item_id for i in items], values, signature)


def _install(worker: Any = None) -> None:
    base._REGISTRY[NOISY] = _Noisy


@pytest.fixture
def noisy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test metric, registered and split into shards / batches as an item metric."""
    from vistkit.engine import merge

    monkeypatch.setattr(merge, "ITEM_METRICS", merge.ITEM_METRICS | {NOISY})
    _install()
    try:
        yield NOISY
    finally:
        base._REGISTRY.pop(NOISY, None)


def said(err: str, words: str) -> int:
    """How many lines of ``err`` are the test metric's warnings that say ``words``."""
    return sum(line.startswith(f"warning: {NOISY}: ") and words in line for line in err.splitlines())


def items_of(texts: Sequence[str]) -> list[Item]:
    return [Item(f"s{k}", Story(f"s{k}", t)) for k, t in enumerate(texts)]


# ------------------------------------------------------------------------------------------------ no cluster
def test_a_worker_call_that_fails_keeps_the_warnings_it_said(noisy: str) -> None:
    """A worker's call collects the warnings it says; when it then fails, they travel with its error (they were
    dropped with the call's value)."""
    from vistkit.engine.ray import _Worker, said_before

    worker = _Worker()
    with pytest.raises(InputError) as caught:
        worker.score(noisy, {}, items_of(["odd", "fail", "a b"]), "sig")
    assert said_before(caught.value) == [
        f"{NOISY}: 1 of 3 stories say odd; check them",
        f"{NOISY}: the same words every call",
    ]


def test_a_warning_with_counts_is_said_once_for_a_runs_batches(noisy: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Streamed in batches, a warning each batch says with its own counts was said once per batch; it is said once,
    with a note that the later batches said it too, and a warning every batch says alike once."""
    from vistkit.engine import make_engine

    capsys.readouterr()
    texts = ["odd", "odd", "odd", "c", "odd", "d e f", "g"]
    totals = make_engine("local").score_stream(get_metric(noisy), iter(items_of(texts)), signature="s", batch_size=2)
    err = capsys.readouterr().err
    assert totals.n_items == len(texts)
    assert said(err, "stories say odd") == 1, err
    assert said(err, "the same words every call") == 1, err
    assert "2 more batches of this run" in err, err


@pytest.mark.parametrize(
    ("option", "value"),
    [("num_gpus_per_worker", 1.5), ("num_gpus_per_worker", 1e-6), ("num_gpus_per_worker", 2.0001),
     ("num_cpus_per_worker", 1e-5)],
)  # fmt: skip
def test_a_resource_share_ray_cannot_give_is_refused_before_ray_starts(
    option: str, value: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray gives a GPU share of at most 4 decimals (0.0001) and more than one GPU only whole: ``--num-gpus-per-worker
    1.5`` (or 1e-6) passed every check, started the cluster, and failed when the first metric started its workers,
    with Ray's ValueError ("GPU resource quantities >1 must be whole numbers"), an unexpected error; it is refused
    at once, before Ray starts, saying what Ray takes."""
    from vistkit.engine import ray as engine_ray

    monkeypatch.setattr(engine_ray, "_import_ray", lambda: pytest.fail("Ray was started"))
    with pytest.raises(InputError, match=r"0\.0001") as caught:
        engine_ray.RayEngine(workers=1, **{option: value})
    assert str(value) in str(caught.value) or f"{value:g}" in str(caught.value)


# ------------------------------------------------------------------------------------------- photo metrics
@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny CLIP, 12 photos and a regions file with rows for photos 1-6 only."""
    pytest.importorskip("PIL.Image")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("spacy")
    from tiny_models import make_photo_folder, make_tiny_clip

    root = tmp_path_factory.mktemp("engine-r16")
    clip = make_tiny_clip(root / "tiny-clip")
    photos = make_photo_folder(root, [str(i) for i in range(1, 13)])
    regions = root / "regions.csv"
    regions.write_text("image_id,bbox\n" + "".join(f'{p},"[2, 2, 20, 20]"\n' for p in range(1, 7)))
    return {"root": root, "opts": {"images": str(photos), "clip_model": str(clip), "regions": str(regions)}}


TEXTS = [
    "we went to the beach . the water was blue . a dog ran .",
    "a cat sat . the dog ran . a horse .",
    "the city at night . team won . dinner time .",
    "the beach was nice . water everywhere . sun .",
    "dinner with the team . a city . the beach .",
    "a man . a cup . the beach .",
    "x . y . z .",
]


def photo_stories(*, with_photos: bool = True) -> StorySet:
    out = []
    for i, text in enumerate(TEXTS):
        photos = tuple(str(1 + (i + k) % 12) for k in range(3))
        out.append(Story(f"s{i}", text, photo_ids=photos if with_photos else ()))
    return StorySet(out)


def regions_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "have no row in" in line]


@pytest.mark.parametrize("with_map", [False, True])
def test_a_streamed_photo_metric_says_its_regions_warning_once_with_the_runs_counts(
    fx: dict[str, Any], with_map: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """groovist streamed in batches of 2 said "N of the M photos scored have no row in regions.csv" once per batch,
    each with its batch's counts; it is said once, with the counts the whole run says (a photo map too)."""
    from vistkit.engine import make_engine

    opts = dict(fx["opts"])
    stories = photo_stories(with_photos=not with_map)
    if with_map:
        path = fx["root"] / "map.json"
        path.write_text(json.dumps({s.story_id: list(s.photo_ids) for s in photo_stories()}))
        opts["photos"] = str(path)
    capsys.readouterr()
    whole = get_metric("groovist", **opts).score(stories)
    expected = regions_lines(capsys.readouterr().err)
    assert len(expected) == 1, expected
    items = [Item(s.story_id, s) for s in stories]
    parts: list[Score] = []
    totals = make_engine("local").score_stream(
        get_metric("groovist", **opts), iter(items), signature="s", batch_size=2, on_part=parts.append
    )
    assert regions_lines(capsys.readouterr().err) == expected
    np.testing.assert_array_equal(np.concatenate([p.item_scores for p in parts]), whole.item_scores)
    assert totals.corpus() == pytest.approx(whole.corpus, rel=1e-12)


# ------------------------------------------------------------------------------------------- on a cluster
@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    """One 2-worker engine on a private local cluster for the module; the workers know the test metric."""
    with private_engine(num_cpus=2, store_mb=100) as eng:
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            eng.ray.get([a.__ray_call__.remote(_install) for a in eng.actors])
            yield eng
        finally:
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.ray
@pytest.mark.slow
def test_a_failed_worker_calls_warnings_are_said_with_its_error(
    noisy: str, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard that warned and then failed: its warnings were lost, only the error was said; they come first, as
    the local engine says them."""
    capsys.readouterr()
    engine.batch_size = 2
    try:
        with pytest.raises(InputError, match="cannot score a story that says fail"):
            engine.metric(noisy).score_items(items_of(["a", "b", "odd", "fail"]), signature="s")
    finally:
        engine.batch_size = None
    err = capsys.readouterr().err
    assert "1 of 2 stories say odd" in err, err
    with pytest.raises(InputError, match="cannot score"):
        engine.metric(noisy).score_items(items_of(["odd", "fail"]), signature="s")
    assert "1 of 2 stories say odd" in capsys.readouterr().err


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_run_says_a_warning_with_counts_once(noisy: str, engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Shards (and streamed batches) each said their own counts: one warning per shard, in the order the shards
    finished; once now, the first shard's, with a note."""
    texts = ["odd", "odd", "odd", "c", "odd", "d e f", "g"]
    capsys.readouterr()
    engine.batch_size = 2
    try:
        score = engine.metric(noisy).score_items(items_of(texts), signature="s")
    finally:
        engine.batch_size = None
    assert score.item_ids == [f"s{k}" for k in range(len(texts))]  # input order kept
    err = capsys.readouterr().err
    assert said(err, "stories say odd") == 1, err
    assert "2 of 2 stories say odd" in err, err  # the first shard's, in input order (not the first to finish)
    assert said(err, "the same words every call") == 1, err
    assert "2 more batches of this run" in err, err
    totals = engine.score_stream(engine.metric(noisy), iter(items_of(texts)), signature="s", batch_size=2)
    assert totals.n_items == len(texts)
    err = capsys.readouterr().err
    assert said(err, "stories say odd") == 1, err
    assert said(err, "the same words every call") == 1, err


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_stream_of_a_photo_metric_says_its_regions_warning_once(
    fx: dict[str, Any], engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = dict(fx["opts"])
    stories = photo_stories()
    capsys.readouterr()
    get_metric("groovist", **opts).score(stories)
    expected = regions_lines(capsys.readouterr().err)
    items = [Item(s.story_id, s) for s in stories]
    totals = engine.score_stream(engine.metric("groovist", opts), iter(items), signature="s", batch_size=2)
    assert totals.n_items == len(items)
    assert regions_lines(capsys.readouterr().err) == expected


#: run with ``python -c``: a Ray engine with no --workers for each SHARE/CPUS argument, on a private local cluster of 1
#: GPU and CPUS logical CPUs (no worker starts: the count is all it reads)
WORKER_COUNTS = """
import os, sys
os.environ.pop("RAY_ADDRESS", None)
from vistkit.engine.ray import RayEngine
from vistkit.errors import VistkitError
for arg in sys.argv[1:]:
    share, cpus = arg.split("/")
    init = {"num_cpus": int(cpus), "num_gpus": 1, "object_store_memory": 80 * 1024**2, "include_dashboard": False}
    try:
        eng = RayEngine(num_gpus_per_worker=float(share), init_options=init)
    except VistkitError as exc:
        print("error:", exc, flush=True)
        continue
    print("workers:", eng.n_workers, flush=True)
    eng.close()
"""


@pytest.mark.ray
@pytest.mark.slow
def test_the_default_worker_count_fits_the_cpus_as_well_as_the_gpu_shares() -> None:
    """Without --workers, --num-gpus-per-worker 0.25 on a cluster of 1 GPU and 2 CPUs counted 4 workers (GPUs over
    the share) and was refused, "4 Ray workers need 4 CPUs ...; ask for at most 2 with --workers", though no worker
    count was given; a share of 0.0001 counted 10,000 workers (on a cluster this process joins, 10,000 actors);
    a share of 0.1 of 1 GPU counted 9 workers (1 // 0.1 is 9.0). The count now fits every resource a worker needs."""
    import os
    import subprocess

    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", WORKER_COUNTS, "0.25/2", "0.0001/2", "1/2", "0.1/16"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(("workers:", "error:"))]
    if not lines:
        pytest.skip(f"could not start a Ray cluster here: {done.stderr[-300:]}")
    assert lines == ["workers: 2", "workers: 2", "workers: 1", "workers: 10"], (lines, done.stderr[-2000:])
