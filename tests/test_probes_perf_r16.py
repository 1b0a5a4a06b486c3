"""The cost and safety of the engine's warnings said once per streamed run (no wall-clock thresholds).

What was wrong:

- `LocalEngine.score_stream` swapped ``sys.stderr`` (a process-wide setting) for a line-buffering tap around each
  batch. Two threads streaming at once left the tap in place for good (each restored the stderr it found): every
  later warning of the process went through a finished run's memory (a warning said again was dropped) and a line
  written without a newline never showed;
- the tap held text until a newline: a progress bar drawn during a batch (``\\r`` updates, tqdm, a model download)
  did not show until the batch ended, and each piece re-copied all the text held (quadratic: 20,000 updates took
  23 s, 40,000 85 s);
- a metric that gave scores for stories it was not given was checked with a set rebuilt per score (quadratic).
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest

from vistkit.data.story import Story
from vistkit.errors import InputError, warn
from vistkit.metrics import base
from vistkit.metrics.base import Item, Metric, MetricCard, Score, mean_score

NAME = "test-perf-r16"


class _Probe(Metric):
    """A test metric whose ``score_items`` runs ``hook`` (set per test) and warns the same words every call."""

    name: ClassVar[str] = NAME
    card: ClassVar[MetricCard] = MetricCard(
        summary="test only", definition="words", range="[0, inf)", signature_fields="-", reproduces="-"
    )
    hook: ClassVar[Any] = None

    def signature_fields(self) -> dict[str, object]:
        return {"unit": "words"}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        if type(self).hook is not None:
            type(self).hook(items)
        warn(f"{NAME}: the same words every call")
        return mean_score(self.name, [i.item_id for i in items], [1.0] * len(items), signature)


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Probe]]:
    from vistkit.engine import merge

    monkeypatch.setattr(merge, "ITEM_METRICS", merge.ITEM_METRICS | {NAME})
    monkeypatch.setitem(base._REGISTRY, NAME, _Probe)
    monkeypatch.setattr(_Probe, "hook", None)
    yield _Probe


def items_of(n: int, prefix: str = "s") -> list[Item]:
    return [Item(f"{prefix}{k}", Story(f"{prefix}{k}", "a b")) for k in range(n)]


def test_two_threads_streaming_at_once_leave_standard_error_as_they_found_it(
    probe: type[_Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread A's batch starts, B's starts, A's ends, then B's: B put back the stderr it found, A's tap, for good."""
    from vistkit.engine import make_engine

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    b_in, a_out = threading.Event(), threading.Event()

    def hook(items: Sequence[Item]) -> None:
        if items[0].item_id.startswith("a"):
            assert b_in.wait(10)
        else:
            b_in.set()
            assert a_out.wait(10)

    probe.hook = hook
    failed: list[BaseException] = []

    def run(prefix: str, done: threading.Event | None) -> None:
        try:
            engine = make_engine("local")
            engine.score_stream(probe(), iter(items_of(3, prefix)), signature="s", batch_size=10)
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)
        finally:
            if done is not None:
                done.set()

    threads = [threading.Thread(target=run, args=("a", a_out)), threading.Thread(target=run, args=("b", None))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not failed, failed
    assert sys.stderr is err, type(sys.stderr).__name__
    before = err.getvalue()
    warn(f"{NAME}: the same words every call")  # said after both runs: shown, not taken for a run's repeat
    print("no newline at the end", file=sys.stderr, end="")
    assert err.getvalue() == before + f"warning: {NAME}: the same words every call\nno newline at the end"


def test_a_progress_bar_drawn_during_a_batch_shows_as_it_is_drawn(
    probe: type[_Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``\\r`` update written in a batch reaches standard error at once (it was held until the batch ended), and
    each piece is written once (held text was copied again with each piece: quadratic)."""
    from vistkit.engine import make_engine

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    seen: list[str] = []

    def hook(items: Sequence[Item]) -> None:
        for k in range(3):
            sys.stderr.write(f"\rdownloading {k}/3")
            seen.append(err.getvalue())

    probe.hook = hook
    make_engine("local").score_stream(probe(), iter(items_of(2)), signature="s", batch_size=2)
    assert seen == ["\rdownloading 0/3", "\rdownloading 0/3\rdownloading 1/3",
                    "\rdownloading 0/3\rdownloading 1/3\rdownloading 2/3"]  # fmt: skip


def test_a_streamed_run_leaves_standard_error_untouched_during_its_batches(
    probe: type[_Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Standard error is the caller's own object inside a batch: other threads' lines and a progress display keyed
    by it see no stand-in, and nothing is held for the end of the batch."""
    from vistkit.engine import make_engine

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    inside: list[object] = []
    probe.hook = lambda items: inside.append(sys.stderr)
    make_engine("local").score_stream(probe(), iter(items_of(5)), signature="s", batch_size=2)
    assert inside == [err, err, err]
    assert err.getvalue().count(f"warning: {NAME}: the same words every call") == 1, err.getvalue()


def test_a_streamed_runs_warnings_are_said_once_even_with_standard_error_closed(
    probe: type[_Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closed (or absent) stderr takes nothing and stops nothing."""
    from vistkit.engine import make_engine

    for gone in (None, io.StringIO()):
        if gone is not None:
            gone.close()
        monkeypatch.setattr(sys, "stderr", gone)
        totals = make_engine("local").score_stream(probe(), iter(items_of(5)), signature="s", batch_size=2)
        assert totals.n_items == 5


def test_warnings_said_by_a_batch_in_another_thread_of_the_run_are_said_once(
    probe: type[_Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warnings said in a thread of the run that carries its context (`contextvars.copy_context`) count for it."""
    import contextvars

    from vistkit.engine import make_engine

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)

    def hook(items: Sequence[Item]) -> None:
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(warn, f"{NAME}: said in a helper thread"))
        t.start()
        t.join()

    probe.hook = hook
    make_engine("local").score_stream(probe(), iter(items_of(6)), signature="s", batch_size=2)
    assert err.getvalue().count("said in a helper thread") == 1, err.getvalue()


class _Counted(str):
    """A story id that counts how often it is hashed (a set built of the ids hashes each once)."""

    hashes = 0

    def __hash__(self) -> int:
        type(self).hashes += 1
        return super().__hash__()


def test_a_metric_that_scores_stories_it_was_not_given_is_named_in_linear_time() -> None:
    """The check of a metric's scores against its stories rebuilt the set of given ids for each score."""
    for n in (200, 400):
        given = [Item(_Counted(f"s{k}"), Story(f"s{k}", "a b")) for k in range(n)]
        result = mean_score("m", [_Counted(f"x{k}") for k in range(n)], [1.0] * n, "sig")
        _Counted.hashes = 0
        with pytest.raises(InputError, match="returned no score for"):
            base._check_every_item_scored("m", given, result)
        assert _Counted.hashes <= 10 * n, (n, _Counted.hashes)


def test_a_run_inside_another_says_its_warnings_through_the_outer_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nested runs (a metric that streams inside a streamed batch): each warning is said once for the outer run."""
    from vistkit.engine import RunWarnings, warnings_once

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with warnings_once(RunWarnings()):
        for _ in range(3):
            with warnings_once(RunWarnings()):
                warn(f"{NAME}: said by each inner run")
    warn(f"{NAME}: said by each inner run")  # after the runs: said again
    assert err.getvalue().count(f"{NAME}: said by each inner run") == 2, err.getvalue()
