"""Probe round 8: the Python API in LONG SESSIONS, threads and processes (a notebook used for hours).

- Ctrl-C (KeyboardInterrupt) in the middle of a METEOR call left the rest of the JVM helper's answer in the pipe:
  the next call on the same scorer (or a new one: the JVM is shared) read it as its own answer and hung for good
  (meteor-coco) or could return another call's numbers. Now an exception between a request and the end of its
  answer stops the helper, and the next call starts a fresh one and gives the right numbers;
"""

from __future__ import annotations

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
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
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
