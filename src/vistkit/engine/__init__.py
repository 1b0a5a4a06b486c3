"""Execution engines: where metric scoring runs.

- ``local`` (`LocalEngine`): in this process, as the metrics always ran.
- ``ray`` (`vistkit.engine.ray.RayEngine`): the stories are cut into shards and scored by Ray actors, each
  loading a metric's model (or its METEOR JVM) once; the shards' per-item statistics are merged so corpus
  scores, bootstrap intervals and paired tests equal the local engine's (see `vistkit.engine.merge`).

An engine hands out `Metric` objects (`Engine.metric`): commands use them exactly as before, so `Metric.score`
(alignment, keying, signatures) is shared code and signatures are identical on every engine.
"""

from __future__ import annotations

import contextlib
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from types import TracebackType
from typing import Any, TypeVar

from vistkit.errors import InputError, VistkitError
from vistkit.metrics.base import Item, Metric, shown_whole

ENGINES = ("local", "ray")
T = TypeVar("T")


class EngineError(VistkitError, RuntimeError):
    """A distributed run failed (a worker died past its retries, the cluster is unreachable)."""


class Engine:
    """Base class: builds metrics, scores streams of items, shuts down cleanly (also as a context manager)."""

    name: str = "engine"

    def metric(self, name: str, options: dict[str, Any] | None = None) -> Metric:
        """A metric object whose scoring runs on this engine."""
        raise NotImplementedError

    def close(self) -> None:
        """Release workers (idempotent)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


#: the most stories one shard or streamed batch may hold (the engines' ``batch_size``)
MAX_BATCH = 1 << 20


def check_batch_size(size: object, what: str = "batch_size") -> int:
    """A shard / batch size: a whole number from 1 to `MAX_BATCH` (a float such as 64.0 is fine), else one
    `InputError` naming ``what``."""
    whole = (isinstance(size, numbers.Integral) and not isinstance(size, bool)) or (
        isinstance(size, float) and size.is_integer()
    )
    if not whole:
        raise InputError(f"{what} must be a whole number of stories from 1 to {MAX_BATCH:,} (got {size!r:.60})")
    number = int(size)  # type: ignore[call-overload]
    if not 1 <= number <= MAX_BATCH:
        raise InputError(f"{what} must be from 1 to {MAX_BATCH:,} stories (got {shown_whole(number)})")
    return number


def check_items(items: object) -> Iterable[Item]:
    """The items of `score_stream`: any iterable of `Item` (checked as they are read, see `checked_items`)."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise InputError(
            f"score_stream takes an iterable of Item objects (vistkit.metrics.base.align(...).items), not "
            f"{type(items).__name__}"
        )
    return items


def checked_items(batch: list[Any]) -> list[Item]:
    """``batch`` when every element is an `Item`; one `InputError` naming the first that is not."""
    bad = next((x for x in batch if not isinstance(x, Item)), None)
    if bad is not None:
        raise InputError(
            f"score_stream takes Item objects (vistkit.metrics.base.align(...).items), not {type(bad).__name__}"
        )
    return batch


def check_metric(metric: object) -> Metric:
    """``metric`` when it is a `Metric` object (`Engine.metric` or `vistkit.get_metric` makes one)."""
    if not isinstance(metric, Metric):
        raise InputError(
            f"score_stream takes a metric object (engine.metric(NAME) or vistkit.get_metric(NAME)), not "
            f"{type(metric).__name__}"
        )
    return metric


def check_metric_options(name: str, options: object) -> dict[str, Any]:
    """``options`` of `Engine.metric` as a dict, their names checked against the metric's (one `InputError`)."""
    from vistkit.metrics.base import check_options, get_metric_class

    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise InputError(f"a metric's options are a dict {{option: value}}, not {type(options).__name__}")
    opts = dict(options)
    bad = next((k for k in opts if not isinstance(k, str)), None)
    if bad is not None:
        raise InputError(f"a metric's options are named by texts, not {type(bad).__name__}")
    check_options(get_metric_class(name), opts)
    return opts


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` elements (the last may be shorter), read lazily."""
    size = check_batch_size(size)
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


#: the numbers of a warning (counts, sizes): two warnings that differ in them only are the same warning
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")


class RunWarnings:
    """The warnings of one run's shards or streamed batches, each said once for the run, as the local engine says
    them for a run scored at once: each shard or batch said its own ("1 of 2 stories ...", once per batch), and a
    warning with numbers said again with other numbers is said once, with a note at the end of the run
    (`finish`) that its numbers are one batch's."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}  # the warning with its numbers left out -> the one said
        self._more: dict[str, int] = {}  # and how many later shards or batches said it again with other numbers

    def __contains__(self, message: object) -> bool:
        return isinstance(message, str) and _NUMBERS.sub("#", message) in self._first

    def say(self, message: str, *, emit: Callable[[str], None] | None = None) -> None:
        """Say ``message`` (with ``emit``, default `vistkit.errors.warn`) unless this run said it, or said it with
        other numbers, already."""
        key = _NUMBERS.sub("#", message)
        if key in self._first:
            if message != self._first[key]:  # the same words with other numbers
                self._more[key] = self._more.get(key, 0) + 1
            return
        self._first[key] = message
        if emit is None:
            from vistkit.errors import warn

            emit = warn
        emit(message)

    def heard(self, message: str, show: Callable[[str], None]) -> None:
        """A warning said in a `warnings_once` block: said with ``show`` unless this run said it already."""
        self.say(message, emit=show)

    def finish(self) -> None:
        """The note for each warning with numbers that later shards or batches said again (once per run)."""
        from vistkit.errors import warn

        for key, more in self._more.items():
            first = self._first[key]
            shown = first if len(first) <= 70 else first[:67] + "..."
            batches = f"{more:,} more batch{'es' if more != 1 else ''}"
            warn(
                f"the warning '{shown}' gave the numbers of the first batch of stories that said it; {batches} of "
                "this run said it with numbers of their own"
            )
        self._more.clear()


def warnings_once(run: RunWarnings) -> contextlib.AbstractContextManager[None]:
    """In the block, the warnings said on standard error (`vistkit.errors.warn`) go through ``run`` (said once for
    the run). Only this thread's (and its context's) warnings: standard error itself is left alone (a stand-in
    swapped into ``sys.stderr`` was left there by two threads streaming at once, and held a progress bar's text
    until its newline, re-copying it with each piece)."""
    from vistkit.progress import warnings_to

    return warnings_to(run.heard)


def make_engine(
    kind: str = "local",
    *,
    address: str | None = None,
    workers: int | None = None,
    num_gpus_per_worker: float = 0.0,
) -> Engine:
    """The engine named ``kind`` (``local`` or ``ray``); Ray options are ignored by the local engine."""
    if kind == "local":
        from vistkit.engine.local import LocalEngine

        return LocalEngine()
    if kind == "ray":
        from vistkit.engine.ray import RayEngine

        return RayEngine(address=address, workers=workers, num_gpus_per_worker=num_gpus_per_worker)
    raise InputError(f"unknown engine {kind!r}: use --engine local or --engine ray")


__all__ = ["ENGINES", "Engine", "EngineError", "Item", "RunWarnings", "batched", "make_engine"]
