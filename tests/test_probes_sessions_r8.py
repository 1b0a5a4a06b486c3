"""Probe round 8: the Python API in LONG SESSIONS, threads and processes (a notebook used for hours).

- Ctrl-C (KeyboardInterrupt) in the middle of a METEOR call left the rest of the JVM helper's answer in the pipe:
  the next call on the same scorer (or a new one: the JVM is shared) read it as its own answer and hung for good
  (meteor-coco) or could return another call's numbers. Now an exception between a request and the end of its
  answer stops the helper, and the next call starts a fresh one and gives the right numbers;
"""

from __future__ import annotations

import io
import multiprocessing
import pickle
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import shared_file
from vistkit.data.story import StorySet

HAS_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java 8+")


@pytest.fixture(scope="module")
def sets() -> tuple[StorySet, StorySet]:
    """TAPM's ``ours`` (30 stories) against TAPM's XE stories of the same photo sequences (real outputs)."""
    from vistkit.data.readers import read_stories

    ours = list(read_stories(shared_file("tapm-vist-outputs", "vist", "ours.json")))[:30]
    seqs = {tuple(s.photo_ids) for s in ours}
    xe = [s for s in read_stories(shared_file("tapm-vist-outputs", "vist", "XE.json")) if tuple(s.photo_ids) in seqs]
    return StorySet(ours), StorySet(xe)


def _run_bounded(fn: Any, timeout: float = 60.0) -> Any:
    """``fn()`` in a daemon thread: a hang fails the test after ``timeout`` seconds instead of blocking the suite."""
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"hung for {timeout:g} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture()
def interrupt_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The first read of a METEOR answer after this fixture raises KeyboardInterrupt (Ctrl-C while the JVM
    answers), once."""
    from vistkit.models import java

    real = java.MeteorServer._doubles
    fired = {"done": False}

    def doubles(self: Any, n: int) -> list[float]:
        if not fired["done"]:
            fired["done"] = True
            raise KeyboardInterrupt
        return real(self, n)

    monkeypatch.setattr(java.MeteorServer, "_doubles", doubles)
    yield
    assert fired["done"]


@needs_java
@pytest.mark.parametrize("name", ["meteor-vist", "meteor-coco"])
def test_meteor_after_keyboard_interrupt_gives_the_right_numbers(
    name: str, sets: tuple[StorySet, StorySet], request: pytest.FixtureRequest
) -> None:
    from vistkit import get_metric

    hyps, refs = sets
    m = get_metric(name)
    few = StorySet(list(hyps)[:7])  # the next call asks something else: a stale answer would show
    want = m.score(few, refs, key="sequence")
    request.getfixturevalue("interrupt_once")
    with pytest.raises(KeyboardInterrupt):
        m.score(hyps, refs, key="sequence")
    again = _run_bounded(lambda: m.score(few, refs, key="sequence"))
    assert again.corpus == want.corpus and list(again.item_scores) == list(want.item_scores)
    fresh = _run_bounded(lambda: get_metric(name).score(few, refs, key="sequence"))
    assert fresh.corpus == want.corpus


@pytest.mark.parametrize("name", ["cider-d", "bertscore", "coherence"])
def test_a_scorer_pickles_as_its_options(name: str, sets: tuple[StorySet, StorySet]) -> None:
    from vistkit import get_metric

    hyps, refs = sets
    m = get_metric(name)
    want = m.score(hyps, refs, key="sequence")
    copy = pickle.loads(pickle.dumps(m))
    assert type(copy) is type(m) and copy is not m
    got = copy.score(hyps, refs, key="sequence")
    assert got.corpus == want.corpus and got.signature == want.signature


def test_a_scorer_pickles_with_its_options() -> None:
    from vistkit import get_metric

    m = get_metric("sacrebleu", lowercase=True)
    copy = pickle.loads(pickle.dumps(m))
    assert copy.signature_fields() == m.signature_fields()


def _pool_score_refs(args: tuple[Any, StorySet, StorySet]) -> float:
    metric, chunk, refs = args
    return float(metric.score(chunk, refs, key="sequence").corpus)


@needs_java
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pools_with_a_live_meteor_jvm_in_the_parent(method: str, sets: tuple[StorySet, StorySet]) -> None:
    from vistkit import get_metric

    hyps, refs = sets
    m = get_metric("meteor-coco")
    chunks = [StorySet(list(hyps)[i::3]) for i in range(3)]
    want = [m.score(c, refs, key="sequence").corpus for c in chunks]
    ctx = multiprocessing.get_context(method)

    def run() -> list[float]:  # spawn re-imports this module: the references go with each task
        with ctx.Pool(2) as pool:
            return pool.map(_pool_score_refs, [(m, c, refs) for c in chunks])

    assert _run_bounded(run, 90) == want
    assert [m.score(c, refs, key="sequence").corpus for c in chunks] == want  # the parent's JVM still answers


@pytest.mark.parametrize("stream", ["closed", "none", "stringio"])
def test_progress_and_warnings_on_an_unusable_stderr(
    stream: str, sets: tuple[StorySet, StorySet], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from vistkit import get_metric
    from vistkit.errors import warn

    hyps, refs = sets
    want = get_metric("cider-d").score(hyps, refs, key="sequence").corpus
    monkeypatch.setenv("VISTKIT_PROGRESS", "1")
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")  # a line at every step
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    err = io.StringIO()
    if stream == "closed":
        err.close()
    monkeypatch.setattr(sys, "stderr", None if stream == "none" else err)
    assert get_metric("cider-d").score(hyps, refs, key="sequence").corpus == want
    warn("a warning nobody can see")
    out = capsys.readouterr().out
    assert "cider-d" not in out and "warning" not in out  # never on stdout
    if stream == "stringio":
        text = err.getvalue()
        assert "warning: a warning nobody can see" in text and "\x1b[" not in text  # plain lines, no live display


def _pool_score_torch(args: tuple[Any, StorySet, StorySet]) -> float:
    metric, chunk, refs = args
    return float(metric.score(chunk, refs, key="sequence").corpus)


def test_a_fork_pool_after_the_parent_ran_torch(sets: tuple[StorySet, StorySet]) -> None:
    from vistkit import get_metric

    hyps, refs = sets
    m = get_metric("coherence")
    m.score(StorySet(list(hyps)[:10]), refs, key="sequence")
    import torch

    x = torch.randn(1000, 1000)
    assert torch.isfinite((x @ x).sum())  # torch's OpenMP threads surely used in the parent (a session's work)
    chunks = [StorySet(list(hyps)[10 + i :: 2]) for i in range(2)]  # stories no cache holds

    # forked from the main thread (the thread that owns OpenMP's team: a fork from another thread did not hang)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.map_async(_pool_score_torch, [(m, c, refs) for c in chunks]).get(timeout=60)
    want = [m.score(c, refs, key="sequence").corpus for c in chunks]
    assert got == pytest.approx(want, rel=1e-6)  # one thread in the worker: sums in another order
