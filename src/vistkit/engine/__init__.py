"""Execution engines: where metric scoring runs.

- ``local`` (`LocalEngine`): in this process, as the metrics always ran.
- ``ray`` (`vistkit.engine.ray.RayEngine`): the stories are cut into shards and scored by Ray actors, each
  loading a metric's model (or its METEOR JVM) once; the shards' per-item statistics are merged so corpus
  scores, bootstrap intervals and paired tests equal the local engine's (see `vistkit.engine.merge`).

An engine hands out `Metric` objects (`Engine.metric`): commands use them exactly as before, so `Metric.score`
(alignment, keying, signatures) is shared code and signatures are identical on every engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from types import TracebackType
from typing import Any, TypeVar

from vistkit.errors import VistkitError
from vistkit.metrics.base import Item, Metric

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


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` elements (the last may be shorter), read lazily."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


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
    from vistkit.errors import InputError

    raise InputError(f"unknown engine {kind!r}: use --engine local or --engine ray")


__all__ = ["ENGINES", "Engine", "EngineError", "Item", "batched", "make_engine"]
