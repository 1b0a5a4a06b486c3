"""Is metric A's pair accuracy significantly higher than metric B's? (same pairs, paired tests)

- `mcnemar`: exact McNemar test (two-sided binomial test on the discordant pairs) and the chi-square version
  with continuity correction (Edwards 1948);
- `paired_bootstrap_accuracy`: resample pairs with replacement; the p-value is two-sided with the bootstrap
  distribution shifted to the null (Efron & Tibshirani 1993, Sec. 16.4); also a percentile CI of the
  difference.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from vistkit.errors import InputError
from vistkit.meta.resample import advance, check_resampling, index_blocks, percentile_interval


def _correctness(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D float array of 0, 1 and NaN (a pair that does not count); `InputError` otherwise."""
    if isinstance(values, (str, bytes)) or values is None:
        raise InputError(
            f"{name} must be a sequence of 0/1 (NaN for a pair that does not count), not {type(values).__name__}"
        )
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a sequence of 0/1 (NaN for a pair that does not count)") from None
    if out.ndim != 1:
        raise InputError(f"{name} must be one sequence of 0/1, not an array of shape {out.shape}")
    odd = out[~np.isnan(out) & (out != 0) & (out != 1)]
    if odd.size:  # 0.5 (half credit for a tie) or 2 was silently one right answer
        raise InputError(f"{name} holds {odd[0]:g}: each pair is 0 (wrong) or 1 (right), NaN when it does not count")
    return out


def _valid(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """The pairs where both metrics' correctness is defined, as two boolean arrays."""
    a = _correctness(a, "metric A's correctness")
    b = _correctness(b, "metric B's correctness")
    if a.size != b.size:
        raise InputError(
            f"the two correctness lists differ in length ({a.size} and {b.size} pairs); give one value per pair to both"
        )
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep].astype(bool), b[keep].astype(bool)


def mcnemar(correct_a: np.ndarray, correct_b: np.ndarray) -> dict[str, Any]:
    """McNemar on paired 0/1 correctness (NaN rows dropped): ``b`` = A right and B wrong, ``c`` = the reverse.

    ``p_exact`` = min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)]); ``p_chi2`` uses (|b - c| - 1)^2 / (b + c),
    taken as 0 when b = c (the continuity correction never overshoots, as in scipy's Yates correction;
    statsmodels' ``mcnemar(exact=False)`` gives 1 / (b + c) there). Both equal statsmodels' otherwise.
    Both are 1.0 when no pair is discordant (b = c = 0) and NaN (n/a) when no pair counts for both metrics
    (``n`` = 0), where there is nothing to test.
    """
    a, b_ = _valid(correct_a, correct_b)
    b = int(np.sum(a & ~b_))
    c = int(np.sum(~a & b_))
    n = b + c
    if a.size == 0:  # no pair counts for both metrics: nothing was tested
        p_exact = p_chi2 = stat = math.nan
    elif n == 0:  # the two metrics get the same pairs right: no evidence of a difference
        p_exact = p_chi2 = 1.0
        stat = 0.0
    else:
        p_exact = float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), n, 0.5)))
        stat = (abs(b - c) - 1.0) ** 2 / n if abs(b - c) > 0 else 0.0
        p_chi2 = float(stats.chi2.sf(stat, 1))
    return {
        "a_only": b,
        "b_only": c,
        "n": int(a.size),
        "accuracy_a": float(a.mean()) if a.size else math.nan,
        "accuracy_b": float(b_.mean()) if b_.size else math.nan,
        "statistic": float(stat),
        "p_exact": p_exact,
        "p_chi2": p_chi2,
    }


def paired_bootstrap_accuracy(
    correct_a: np.ndarray,
    correct_b: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 12345,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Paired bootstrap over pairs of the accuracy difference A - B (NaN rows dropped).

    ``p = (#{|d*_b - d| >= |d|} + 1) / (B + 1)`` (the bootstrap distribution shifted to the null, two-sided; Efron
    & Tibshirani 1993, Sec. 16.4) and the percentile CI of ``d*``. When every counted pair is one only A (or
    only B) gets right, every resample is the table itself: ``p`` is NaN and ``p_undefined`` says why (it was
    1/(B+1), "significant" from a single pair, where McNemar's exact p is 1). The resamples are drawn in blocks
    (`vistkit.meta.resample.index_blocks`), the same numbers as ``B`` calls of ``rng.integers(0, n, n)``.
    """
    check_resampling(n_resamples=n_resamples, confidence=confidence, seed=seed)
    a, b = _valid(correct_a, correct_b)
    d = a.astype(float) - b.astype(float)
    n = d.size
    if n == 0:
        advance(n_resamples)
        return {
            "delta": math.nan,
            "p": math.nan,
            "ci": [math.nan, math.nan],
            "n": 0,
            "n_resamples": n_resamples,
        }
    rng = np.random.default_rng(seed)
    observed = float(d.mean())
    boots = np.concatenate([d[idx].mean(axis=1) for idx in index_blocks(rng, n, n_resamples)])
    extreme = np.sum(np.abs(boots - observed) >= abs(observed) - 1e-12)
    p = float((extreme + 1) / (n_resamples + 1))
    out = {
        "delta": observed,
        "p": p,
        "ci": percentile_interval(boots, confidence),
        "n": int(n),
        "n_resamples": n_resamples,
        "seed": seed,
    }
    discordant = int(np.count_nonzero(d))
    if observed != 0.0 and np.all(d == d[0]):  # every resample is the table: p was its floor 1/(B+1)
        out["p"] = math.nan
        out["p_undefined"] = NO_VARIATION
    elif 0 < discordant < FEW_DISCORDANT:  # 7 of 8 won: bootstrap 0.01, McNemar's exact p 0.07
        out["p_caution"] = few_discordant(discordant)
    return out


#: below this many pairs that only one metric gets right, the paired bootstrap's p (a large-sample method, like
#: McNemar's chi-square, which the usual rule gives up below 25 such pairs) is far below the exact McNemar p
FEW_DISCORDANT = 25


def few_discordant(discordant: int) -> str:
    """Why a paired bootstrap p on ``discordant`` (< `FEW_DISCORDANT`) pairs that only one metric gets right is
    not to be read (one sentence)."""
    return (
        f"only {discordant} pair{'' if discordant == 1 else 's'} {'is' if discordant == 1 else 'are'} one that a "
        f"single metric gets right (fewer than {FEW_DISCORDANT}), where the paired bootstrap is overconfident "
        "(7 of 8 pairs won: p 0.01 against McNemar's exact 0.07); read McNemar's exact p"
    )


#: why `paired_bootstrap_accuracy` gives no p when every counted pair favours the same metric
NO_VARIATION = (
    "every counted pair is one that the same metric alone gets right, so every resample equals the table and the "
    "bootstrap has no variation to test against (its p would be 1/(B+1) even for one pair); read McNemar's exact p"
)


COMPARISON_COLUMNS = ["A", "B", "acc A", "acc B", "A only", "B only", "p McNemar", "delta", "p bootstrap"]


def pairwise_comparisons(
    names: Sequence[str], correct: Mapping[str, np.ndarray], *, n_resamples: int, seed: int
) -> list[dict[str, Any]]:
    """McNemar and the paired bootstrap for every two of ``names`` (0/1 correctness per pair in ``correct``)."""
    return [
        {
            "a": a,
            "b": b,
            "mcnemar": mcnemar(correct[a], correct[b]),
            "bootstrap": paired_bootstrap_accuracy(correct[a], correct[b], n_resamples=n_resamples, seed=seed),
        }
        for a, b in itertools.combinations(names, 2)
    ]


def comparison_notes(comparisons: Sequence[dict[str, Any]], *, shown: int = 6) -> list[str]:
    """Sentences for under a table of `pairwise_comparisons`: which bootstrap p-values are n/a and why
    (``p_undefined``), and which rest on too few pairs that only one metric gets right to be read
    (``p_caution``); the metric pairs are named (the first ``shown``, then how many more)."""

    def named(items: list[dict[str, Any]], counts: bool = False) -> str:
        names = [
            f"{c['a']} vs {c['b']}" + (f" ({c['mcnemar']['a_only'] + c['mcnemar']['b_only']})" if counts else "")
            for c in items[:shown]
        ]
        return ", ".join(names) + (f" and {len(items) - shown:,} more" if len(items) > shown else "")

    notes = []
    undefined = [c for c in comparisons if c["bootstrap"].get("p_undefined")]
    if undefined:
        notes.append(f"p bootstrap is n/a for {named(undefined)}: {NO_VARIATION}")
    few = [c for c in comparisons if c["bootstrap"].get("p_caution")]
    if few:
        notes.append(
            f"p bootstrap rests on fewer than {FEW_DISCORDANT} pairs that a single metric gets right for "
            f"{named(few, counts=True)}: the paired bootstrap is overconfident there (7 of 8 pairs won: p 0.01 "
            "against McNemar's exact 0.07); read McNemar's exact p"
        )
    return notes


def comparison_row(comparison: dict[str, Any]) -> list[Any]:
    """One table row (`COMPARISON_COLUMNS`) of a `pairwise_comparisons` entry."""
    mc, boot = comparison["mcnemar"], comparison["bootstrap"]
    return [
        comparison["a"],
        comparison["b"],
        mc["accuracy_a"],
        mc["accuracy_b"],
        mc["a_only"],
        mc["b_only"],
        mc["p_exact"],
        boot["delta"],
        boot["p"],
    ]
