"""Resampling shared by the meta-evaluation bootstraps (pair accuracy, correlations, paired tests).

- `check_resampling`: the checks the CLI makes on ``--bootstrap``, ``--seed`` and a confidence level, made again
  for the Python API, so a bad value is one sentence (`InputError`), never a numpy error deep inside.
- `index_blocks`: resample indices ``rng.choice(n, size=(B, n))`` drawn in blocks of rows
  (`vistkit.scores.stats.resample_blocks`): the same numbers as one call (and as ``B`` calls of
  ``rng.integers(0, n, n)``), so memory stays bounded whatever ``B`` and the seeds give the numbers they always
  gave. Each block advances the open progress task (`bootstrap_progress`) by its rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager
from numbers import Integral, Real
from typing import Any

import numpy as np

from vistkit import progress
from vistkit.errors import InputError
from vistkit.limits import MAX_BOOTSTRAP

#: cells (resamples x items) of one block of resample indices: 16 MiB of int64, as `vistkit.scores.stats`
BLOCK_CELLS = 1 << 21
UNIT = "resamples"


def check_resampling(*, n_resamples: int, confidence: float | None = None, seed: int | None = None) -> None:
    """Refuse, in one sentence, a resample count outside 1..`MAX_BOOTSTRAP`, a confidence level outside (0, 1)
    (NaN included) and a negative or fractional seed (``None``: fresh entropy, allowed)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, Integral):
        raise InputError(f"the number of resamples must be a whole number, not {n_resamples!r}")
    if not 1 <= n_resamples <= MAX_BOOTSTRAP:
        raise InputError(f"the number of resamples must be from 1 to {MAX_BOOTSTRAP:,} (got {n_resamples:,})")
    if confidence is not None and (
        isinstance(confidence, bool) or not isinstance(confidence, Real) or not 0.0 < float(confidence) < 1.0
    ):
        raise InputError(f"the confidence level must be between 0 and 1, e.g. 0.95 (got {confidence!r})")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0):
        raise InputError(f"the seed must be a whole number from 0 (got {seed!r})")


def few_resamples(n_resamples: int, *, confidence: float = 0.95, flag: str = "--bootstrap") -> str:
    """What is wrong (one sentence) when a percentile interval at ``confidence`` rests on so few resamples that
    less than one falls in each tail: it is then only the most extreme resample(s), or the one resample of
    ``--bootstrap 1`` (a "95% CI" that need not even hold the estimate); else ``""``. The numbers are still
    computed as asked."""
    need = math.ceil(2 / (1 - confidence) - 1e-9)
    if n_resamples >= need:
        return ""
    level, tail = f"{confidence * 100:.10g}%", f"{(1 - confidence) * 50:.10g}%"
    return (
        f"{flag} {n_resamples:,} is too few resamples for a {level} interval: less than one falls in each {tail} "
        f"tail, so the interval is only the most extreme resample(s); use at least {need:,} (the default is 1,000)"
    )


def block_rows(n: int) -> int:
    """Resamples per block when each resample holds ``n`` indices (at least 1)."""
    return max(1, BLOCK_CELLS // max(n, 1))


def index_blocks(rng: np.random.Generator, n: int, n_resamples: int) -> Iterator[np.ndarray]:
    """``rng.choice(n, size=(n_resamples, n))`` in blocks of rows (`vistkit.scores.stats.resample_blocks`),
    advancing the open progress task by each block's rows once the caller has used it."""
    from vistkit.scores.stats import resample_blocks

    for block in resample_blocks(rng, n, n_resamples):
        yield block
        advance(block.shape[0])


def advance(n_resamples: int) -> None:
    """Move the innermost open progress task by ``n_resamples`` when it counts resamples (`bootstrap_progress`);
    a task counting something else (a metric's stories) is left alone."""
    task = progress.current()
    if task is not None and task.unit == UNIT:
        task.advance(n_resamples)


def percentile_interval(values: np.ndarray, confidence: float) -> list[float]:
    """``[q(alpha/2), q(1 - alpha/2)]`` of the defined values, ``alpha = 1 - confidence``; NaN when none is."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return [math.nan, math.nan]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return [float(low), float(high)]


def bootstrap_progress(total: int) -> AbstractContextManager[Any]:
    """The progress task of a command's bootstraps: ``bootstrap: drew 1,200,000/6,000,000 resamples (...)``
    (a plain line every 10 s off a terminal, a bar on one; nothing for a run under 2 s)."""
    return progress.task("bootstrap", total, unit=UNIT, verb="drew")
