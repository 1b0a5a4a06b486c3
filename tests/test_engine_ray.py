"""The Ray engine on a local 2-CPU cluster started here (loopback, no dashboard): equal to the local engine on
real VIST data (several metrics, story and sequence keying), a worker killed mid-run (retried, or a clear
error: never dropped stories), and clean shutdown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import shared_file
from vistkit.data.readers import read_stories
from vistkit.data.story import Story, StorySet
from vistkit.engine import EngineError
from vistkit.metrics.base import Score, align, get_metric

ray = pytest.importorskip("ray", reason="needs the ray extra (pip install 'vistkit[ray]')")
pytestmark = [pytest.mark.ray, pytest.mark.slow]
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser, METEOR)")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local cluster for the module (Ray takes seconds to start)."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=150 * 1024**2,
        log_to_driver=False,
        logging_level="ERROR",
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="class")
def engine(cluster: None) -> Iterator[Any]:
    """Two workers shared by the tests of one class (closed after it, freeing the cluster's 2 CPUs)."""
    from vistkit.engine.ray import RayEngine

    eng = RayEngine(workers=2)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def data() -> dict[str, StorySet]:
    """TAPM outputs (300 sequences) and the VIST test stories; the same outputs keyed by human story ids."""
    refs = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"))
    hyps = StorySet(list(read_stories(shared_file("tapm-vist-outputs", "vist", "ours.json")))[:300])
    first_story = {}
    for r in refs:
        first_story.setdefault(r.sequence, r.story_id)
    by_story = StorySet(
        [Story(first_story[h.sequence], h.text, photo_ids=h.photo_ids) for h in hyps if h.sequence in first_story]
    )
    return {"hyps": hyps, "refs": refs, "hyps_by_story": by_story}


def assert_same(a: Score, b: Score, *, exact: bool = True) -> None:
    assert a.signature == b.signature
    assert a.item_ids == b.item_ids
    assert a.excluded == b.excluded
    assert a.keying == b.keying
    if exact:
        assert a.corpus == b.corpus or (np.isnan(a.corpus) and np.isnan(b.corpus))
        np.testing.assert_array_equal(a.item_scores, b.item_scores)
        if a.stats is not None:
            np.testing.assert_array_equal(a.stats, b.stats)
    else:
        assert abs(a.corpus - b.corpus) <= 1e-6
        np.testing.assert_allclose(a.item_scores, b.item_scores, rtol=0, atol=1e-6)


class TestEqualToLocal:
    """Scores from the Ray engine == the local engine's."""

    @needs_java
    @pytest.mark.parametrize("name", ["bleu-4", "cider-d", "rouge-l"])
    @pytest.mark.parametrize("key", ["sequence", "story"])
    def test_coco_metrics_equal_local(self, engine: Any, data: dict[str, StorySet], name: str, key: str) -> None:
        """coco BLEU-4 / CIDEr-D (df over the whole set) / ROUGE-L: bit for bit, with both keyings."""
        hyps = data["hyps"] if key == "sequence" else data["hyps_by_story"]
        local = get_metric(name).score(hyps, data["refs"], key=key)
        remote = engine.metric(name).score(hyps, data["refs"], key=key)
        assert_same(local, remote)
        if key == "story":
            items = align(hyps, data["refs"], keying=key).items
            assert local.n == len(hyps) and all(len(it.references) == 1 for it in items)


    def test_reference_free_story_keying(self, engine: Any, data: dict[str, StorySet]) -> None:
        """rovist-nr on human stories keyed by story id (NaN items and exclusions kept)."""
        humans = StorySet(list(data["refs"])[:400])
        local = get_metric("rovist-nr").score(humans, key="story")
        remote = engine.metric("rovist-nr").score(humans, key="story")
        assert_same(local, remote)


    def test_model_metric_equal_local(self, engine: Any, data: dict[str, StorySet]) -> None:
        """The packaged offline coherence model (one load per worker): within 1e-6 of the local engine."""
        pytest.importorskip("torch")
        hyps = StorySet(list(data["hyps"])[:32])  # two shards of 16, one per worker
        local = get_metric("coherence").score(hyps, key="sequence")
        remote = engine.metric("coherence").score(hyps, key="sequence")
        assert_same(local, remote, exact=False)


    @needs_java
    def test_meteor_pooled_and_bootstrap(self, engine: Any, data: dict[str, StorySet]) -> None:
        """meteor-coco (pooled statistics; one helper JVM per worker) and the bootstrap CI from merged rows."""
        from vistkit.scores.stats import bootstrap_ci

        hyps = StorySet(list(data["hyps"])[:60])
        local = get_metric("meteor-coco").score(hyps, data["refs"], key="sequence")
        remote = engine.metric("meteor-coco").score(hyps, data["refs"], key="sequence")
        # items and pooled statistics are bit for bit; both corpus values are Meteor's formula in Python
        # (`meteor_from_stats`, Java's operation order) on the same pooled integer statistics: the same code
        assert local.corpus == remote.corpus
        assert_same(local, remote)
        assert bootstrap_ci(local, n_bootstrap=200) == bootstrap_ci(remote, n_bootstrap=200)
        pids = engine.worker_pids()
        assert len(set(pids)) == 2


def test_cli_score_engine_ray_equals_local(cluster: None, tmp_path: Path) -> None:
    """`vistkit score --engine ray` prints the local engine's JSON (scores and signatures) exactly."""
    from vistkit.cli import main

    humans = shared_file("tapm-vist-outputs", "vist", "ours.json")
    outs = []
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.csv"
        args = ["score", str(humans), "-m", "rovist-nr", "-f", "json", "--per-item", str(out), "--engine", engine]
        from contextlib import redirect_stdout
        from io import StringIO

        buf = StringIO()
        with redirect_stdout(buf):
            assert main(args) == 0
        outs.append((json.loads(buf.getvalue()), out.read_text()))
    assert outs[0] == outs[1]


def _cli_json(args: list[str]) -> Any:
    from contextlib import redirect_stdout
    from io import StringIO

    from vistkit.cli import main

    buf = StringIO()
    with redirect_stdout(buf):
        assert main(args) == 0
    return json.loads(buf.getvalue())


def test_cli_meta_pairs_and_distance_engine_ray(cluster: None, tmp_path: Path) -> None:
    """`meta pairs` and `distance --human-stories` give the local engine's JSON on Ray."""
    pairs = Path(__file__).parent / "fixtures" / "meta" / "vhed_small.csv"
    args = ["meta", "pairs", str(pairs), "-m", "rovist-nr", "-f", "json", "--bootstrap", "20", "--engine"]
    assert _cli_json([*args, "local"]) == _cli_json([*args, "ray", "--workers", "2"])
    vist = shared_file("dhm-visual-storytelling", "data", "stories", "vist")
    small = {}
    for name in ("gt_test.json", "llava_vc_p3.json"):
        data = json.loads((vist / name).read_text(encoding="utf-8"))
        small[name] = tmp_path / name
        small[name].write_text(json.dumps({k: data[k] for k in sorted(data)[:150]}), encoding="utf-8")
    args = ["distance", "--human-stories", str(small["gt_test.json"]), "--model-stories"]
    args += [str(small["llava_vc_p3.json"]), "--dimensions", "R", "-f", "json", "--engine"]
    assert _cli_json([*args, "local"]) == _cli_json([*args, "ray"])


def _kill_first_worker_on_first_part(engine: Any) -> tuple[list[int], Any]:
    pids = engine.worker_pids()
    killed: list[int] = []

    def on_part(part: Score) -> None:
        if not killed:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    return killed, on_part


def test_killed_worker_is_restarted_and_its_shard_rerun(cluster: None, data: dict[str, StorySet]) -> None:
    """SIGKILL one worker mid-run: Ray restarts it, its shards run again, every story is scored once."""
    from vistkit.engine.ray import RayEngine

    humans = StorySet(list(data["refs"])[:300])
    metric = get_metric("rovist-nr")
    local = metric.score(humans, key="story")
    items = align(humans, None, keying="story").items
    with RayEngine(workers=2, max_retries=2) as eng:
        killed, on_part = _kill_first_worker_on_first_part(eng)
        seen: list[str] = []

        def record(part: Score) -> None:
            on_part(part)
            seen.extend(part.item_ids)

        totals = eng.score_stream(
            eng.metric("rovist-nr"), iter(items), signature=local.signature, batch_size=15, on_part=record
        )
        assert killed and seen == local.item_ids
        np.testing.assert_array_equal(np.concatenate(totals.scores), local.item_scores)
        assert totals.corpus() == pytest.approx(local.corpus, abs=1e-12)
        assert killed[0] not in eng.worker_pids()  # a fresh process replaced it


def test_killed_worker_without_retries_fails_clearly(cluster: None, data: dict[str, StorySet]) -> None:
    """With no retries left, the run stops with one sentence (no partial, silently shortened result)."""
    from vistkit.engine.ray import RayEngine

    humans = StorySet(list(data["refs"])[:300])
    items = align(humans, None, keying="story").items
    with RayEngine(workers=2, max_retries=0) as eng:
        _, on_part = _kill_first_worker_on_first_part(eng)
        with pytest.raises(EngineError, match="worker died"):
            eng.score_stream(eng.metric("rovist-nr"), iter(items), signature="s", batch_size=15, on_part=on_part)


def test_close_stops_workers(cluster: None) -> None:
    """close() ends the worker processes; the engine then refuses work; closing twice is fine."""
    from vistkit.engine.ray import RayEngine

    eng = RayEngine(workers=2)
    pids = eng.worker_pids()
    eng.close()
    eng.close()
    with pytest.raises(EngineError, match="closed"):
        eng.worker_pids()
    deadline = time.monotonic() + 20
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive.discard(pid)
        time.sleep(0.2)
    assert not alive
    assert ray.is_initialized()  # the tests' cluster is not the engine's to stop
