"""The local engine: metrics run in this process (the default)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from vistkit.engine import (
    Engine,
    RunWarnings,
    batched,
    check_batch_size,
    check_items,
    check_metric,
    check_metric_options,
    checked_items,
    warnings_once,
)
from vistkit.engine.merge import FallbackTally, StreamTotals, cannot_stream, strategy
from vistkit.errors import InputError
from vistkit.metrics.base import Item, Metric, Score, get_metric_class


class LocalEngine(Engine):
    """Scores in this process; `score_stream` gives the streaming, bounded-memory path for huge inputs."""

    name = "local"

    def metric(self, name: str, options: dict[str, Any] | None = None) -> Metric:
        """A scorer for ``name`` made in this process, its options checked first."""
        cls = get_metric_class(name)
        return cls(**check_metric_options(name, options))

    def score_stream(
        self,
        metric: Metric,
        items: Iterable[Item],
        *,
        signature: str,
        batch_size: int = 1024,
        on_part: Callable[[Score], None] | None = None,
    ) -> StreamTotals:
        """Score an iterator of items batch by batch, keeping only per-item scores and summed statistics;
        ``on_part`` receives each batch's `Score` in input order (e.g. to write per-item rows). Each warning is said
        once for the run (a photo metric's regions warning with the run's counts), not once per batch."""
        metric = check_metric(metric)
        batch_size = check_batch_size(batch_size)
        items = check_items(items)
        if on_part is not None and not callable(on_part):
            raise InputError(f"on_part must be a function of a Score, not {type(on_part).__name__}")
        if strategy(metric) != "items":
            raise cannot_stream(metric)
        totals = StreamTotals()
        said = RunWarnings()
        # a photo metric: each batch is a shard of the run, whose regions warning is said once at the end
        regions = getattr(getattr(metric, "store", None), "boxes", None)
        tally = (
            FallbackTally(getattr(metric, "photos", None)) if regions and hasattr(metric, "shard_of_a_run") else None
        )
        for batch in batched(items, batch_size):
            batch = checked_items(batch)
            with warnings_once(said):
                part = _score_batch(metric, batch, signature=signature, shard=tally is not None)
            if tally is not None:
                tally.add(batch, part)
            totals.add(part)
            if on_part is not None:
                on_part(part)
        said.finish()
        fallback = tally.fallback() if tally is not None else None
        if fallback is not None:
            from vistkit.errors import warn

            warn(metric.fallback_message(*fallback))  # type: ignore[attr-defined]
        return totals


def _score_batch(metric: Metric, batch: list[Item], *, signature: str, shard: bool) -> Score:
    """``metric.score_items`` of one batch; ``shard``: as one shard of a run (``shard_of_a_run``, its run-wide
    warnings left to the engine)."""
    if not shard:
        return metric.score_items(batch, signature=signature)
    before = metric.shard_of_a_run  # type: ignore[attr-defined]
    metric.shard_of_a_run = True  # type: ignore[attr-defined]
    try:
        return metric.score_items(batch, signature=signature)
    finally:
        metric.shard_of_a_run = before  # type: ignore[attr-defined]
