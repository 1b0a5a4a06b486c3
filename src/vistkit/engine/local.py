"""The local engine: metrics run in this process (the default)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from vistkit.engine import (
    Engine,
    batched,
    check_batch_size,
    check_items,
    check_metric,
    check_metric_options,
    checked_items,
)
from vistkit.engine.merge import StreamTotals, cannot_stream, strategy
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
        ``on_part`` receives each batch's `Score` in input order (e.g. to write per-item rows)."""
        metric = check_metric(metric)
        batch_size = check_batch_size(batch_size)
        items = check_items(items)
        if on_part is not None and not callable(on_part):
            raise InputError(f"on_part must be a function of a Score, not {type(on_part).__name__}")
        if strategy(metric) != "items":
            raise cannot_stream(metric)
        totals = StreamTotals()
        for batch in batched(items, batch_size):
            part = metric.score_items(checked_items(batch), signature=signature)
            totals.add(part)
            if on_part is not None:
                on_part(part)
        return totals
