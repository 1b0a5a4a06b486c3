"""Correlations of metric scores with human scores, with bootstrap CIs, the Williams test and point-biserial
r.

- Pearson r, Spearman rho and Kendall tau (``kendall`` = tau-b, which corrects for ties on both sides and is
  scipy's default; ``kendall_c`` = tau-c, Stuart's variant for rectangular tables). Point values and p-values
  are scipy's (`scipy.stats.pearsonr`, `spearmanr`, `kendalltau`, `pointbiserialr`), except Spearman's p for
  at most `EXACT_SPEARMAN_MAX_N` pairs (typically a system-level correlation): scipy's t approximation gave p = 0
  for a perfect ranking of 3 systems, whose exact p is 1/3; there it is the exact permutation p (every ordering
  of the pairs, as Kendall's p is exact for small n in scipy), and Kendall's p for at most as many pairs with a
  tie (scipy's exact p is only for pairs without ties; with one it used a normal approximation, 0.22 for 3
  systems where the exact p is 2/3): the permutation p of every ordering too. Pearson's are of the
  scores shifted and scaled exactly first (`_conditioned`: r is the same, and stays right for scores that
  differ only in their last bits or lie near the ends of the float range).
- Bootstrap CIs resample ITEMS (stories) with replacement (percentile intervals); at system level the items of
  each system are resampled (stratified) and the system means recomputed, so the CI reflects which stories
  were judged, not only which systems.
- `williams_test`: Williams (1959) test for the difference between two dependent correlations that share one
  variable (the human scores), as used in WMT metrics tasks (Graham & Baldwin 2014, Eq. 1).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from vistkit.errors import InputError
from vistkit.meta.resample import BLOCK_CELLS, advance, block_rows, check_resampling, index_blocks, percentile_interval

METHODS = ("pearson", "spearman", "kendall", "kendall_c")


def _numbers(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D float array (NaN: missing); `InputError` for anything else or an infinite value."""
    if isinstance(values, (str, bytes)) or values is None:
        raise InputError(f"{name} must be a sequence of numbers (NaN for a missing one), not {type(values).__name__}")
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a sequence of numbers (NaN for a missing one)") from None
    if out.ndim != 1:
        raise InputError(f"{name} must be one sequence of numbers, not an array of shape {out.shape}")
    if np.isinf(out).any():
        raise InputError(f"{name} holds an infinite value: no correlation is defined with it (NaN marks a missing one)")
    return out


def _aligned(**named: Any) -> list[np.ndarray]:
    """Each named sequence as `_numbers`, all of one length (`InputError` otherwise), in the order given."""
    arrays = [_numbers(v, k.replace("_", " ")) for k, v in named.items()]
    if len({a.size for a in arrays}) > 1:
        sizes = ", ".join(f"{k.replace('_', ' ')} {a.size}" for k, a in zip(named, arrays, strict=True))
        raise InputError(f"the score lists differ in length ({sizes})")
    return arrays


def _clean(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = _numbers(x, "x (the metric scores)")
    y = _numbers(y, "y (the human scores)")
    if x.shape != y.shape:
        raise InputError(f"the two score lists differ in length ({x.size} and {y.size})")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _check_method(method: Any) -> None:
    if method not in METHODS:
        raise InputError(f"unknown correlation {method!r:.60}; choose one of {', '.join(METHODS)}")


def undefined_reason(
    metric: Sequence[float] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    *,
    unit: str = "item",
    human_what: str = "human scores",
) -> str | None:
    """Why a correlation of ``metric`` with ``human`` over ``unit``s is undefined (None when it is defined): fewer
    than 3 units where both are defined, or one side constant over them."""
    x, y = _clean(metric, human)
    if x.size < 3:
        has = "has" if x.size == 1 else "have"
        units = unit if x.size == 1 else f"{unit}s"
        return f"only {x.size} {units} {has} both a metric score and {human_what}; a correlation needs 3"
    if np.all(y == y[0]):
        return f"the {human_what} are all {y[0]:g}"
    if np.all(x == x[0]):
        return f"the metric gives every {unit} {x[0]:g}"
    return None


def correlation(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, method: str = "pearson"
) -> tuple[float, float]:
    """(coefficient, two-sided p) of the non-NaN pairs; NaN when fewer than 3 pairs or a side is constant."""
    _check_method(method)
    x, y = _clean(x, y)
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan, math.nan
    if method == "pearson":  # scipy's r and p of the same scores, shifted and scaled exactly (`_conditioned`)
        res = stats.pearsonr(_conditioned(x[None, :])[0], _conditioned(y[None, :])[0])
    elif method == "spearman":
        res = stats.spearmanr(x, y)
        if x.size <= EXACT_SPEARMAN_MAX_N:
            return float(res[0]), _exact_spearman_p(x, y)
    elif method in ("kendall", "kendall_c"):
        res = stats.kendalltau(x, y, variant="c" if method == "kendall_c" else "b")
        if x.size <= EXACT_SPEARMAN_MAX_N and _has_ties(x, y):  # scipy's p is exact only without ties
            return float(res[0]), _exact_kendall_p(x, y)
    else:
        _check_method(method)
    return float(res[0]), float(res[1])


#: up to this many pairs Spearman's p is exact (9! = 362,880 orderings, well under a second), and Kendall's p
#: with ties (scipy's is exact only without); scipy's approximations need more pairs (Zar 1972 advises exact
#: tables below 10)
EXACT_SPEARMAN_MAX_N = 9


def _exact_spearman_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided p of Spearman's rho over every ordering of ``x`` against ``y`` (ties keep their average ranks):
    twice the smaller tail, at most 1, as `scipy.stats.permutation_test` defines it; two rhos within 1e-9 are
    equal (ties make many orderings give the same rho, which float rounding would split between the tails)."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    cy = (ry - ry.mean()) / np.sqrt(((ry - ry.mean()) ** 2).sum())
    cx = rx - rx.mean()
    cx /= np.sqrt((cx**2).sum())
    null = cx[_orderings(x.size)] @ cy  # rho of every ordering at once (9! x 9 values)
    observed = float(cx @ cy)
    less, greater = np.mean(null <= observed + 1e-9), np.mean(null >= observed - 1e-9)
    return float(min(1.0, 2 * min(less, greater)))


def _signs(a: np.ndarray, b: np.ndarray, dtype: Any = float) -> np.ndarray:
    """``sign(a - b)`` by comparison: the difference of two scores near the float limit overflows (a numpy
    warning; the sign stays right only by luck of infinity)."""
    return (a > b).astype(dtype) - (a < b).astype(dtype)


#: scores at or above 2**HEADROOM_EXPONENT are scaled down (exactly, by a power of two) before system means are
#: summed, so a sum of up to 2**60 of them cannot overflow to infinity
HEADROOM_EXPONENT = 960


def _headroom(values: np.ndarray) -> int:
    """The power of two to divide ``values`` by before summing them (0 below 2**`HEADROOM_EXPONENT`: nearly
    always, so nearly every score is summed as it is)."""
    finite = np.abs(values[~np.isnan(values)])
    return max(0, int(np.frexp(finite.max())[1]) - HEADROOM_EXPONENT) if finite.size else 0


def _has_ties(x: np.ndarray, y: np.ndarray) -> bool:
    return bool(np.unique(x).size < x.size or np.unique(y).size < y.size)


def _exact_kendall_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided p of Kendall's tau over every ordering of ``x`` against ``y``, for pairs with ties (without
    them scipy's p is already this exact one): twice the smaller tail, at most 1, as `_exact_spearman_p`.

    Permuting x against y keeps both tie structures, so tau-b's and tau-c's denominators are fixed and both
    order the orderings as S = concordant - discordant does: one p for both, in whole numbers (no rounding).
    scipy's normal approximation gave 0.22 for 3 systems whose exact p is 2/3, and 0.071 for 4 (exact 1/6)."""
    first, second = np.triu_indices(x.size, 1)
    sign_x = _signs(x[:, None], x[None, :], np.int8)
    sign_y = _signs(y[first], y[second], np.int32)
    orders = _orderings(x.size)
    null = sign_x[orders[:, first], orders[:, second]] @ sign_y  # S of every ordering (n! values)
    observed = int(sign_x[first, second].astype(np.int32) @ sign_y)
    less, greater = np.mean(null <= observed), np.mean(null >= observed)
    return float(min(1.0, 2 * min(less, greater)))


@functools.lru_cache(maxsize=EXACT_SPEARMAN_MAX_N)
def _orderings(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, one per row (n! x n, int8)."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def _coef(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    if method == "pearson":  # not np.corrcoef: its squares overflow at 1e200 and underflow at 1e-160 (NaN, 0)
        return float(_rows_pearson(x[None, :], y[None, :])[0])
    if method == "spearman":
        return float(_rows_pearson(stats.rankdata(x)[None, :], stats.rankdata(y)[None, :])[0])
    return float(stats.kendalltau(x, y, variant="c" if method == "kendall_c" else "b")[0])


# ------------------------------------------------------------------------------- vectorised bootstrap coefficients
#: story-level Kendall tau resamples as counts of the n original stories against their n x n concordance signs
#: (float32, 16 MiB at this size); above it, scipy's O(n log n) `kendalltau` per resample
KENDALL_MATRIX_MAX = 2048

#: rows of resampled means (system level) up to this length get tau from all k(k-1)/2 concordance signs at once;
#: longer ones from scipy's O(k log k) `kendalltau` per row (measured: 0.7 ms against 0.4 ms at 100 systems, 87
#: ms against 1.3 ms at 2,000, where 1,000 resamples took two minutes)
KENDALL_ROWS_MAX = 64


def _constant_rows(a: np.ndarray) -> np.ndarray:
    return np.asarray(a.max(axis=1) == a.min(axis=1))


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Every row of ``a`` times the power of two that brings its largest absolute value into [0.5, 1) (a zero
    row as it is): exact, so scores that differ in their last bits keep their differences."""
    exponent = np.frexp(np.max(np.abs(a), axis=1, keepdims=True))[1]
    return np.ldexp(a, -exponent)


def _conditioned(a: np.ndarray) -> np.ndarray:
    """Every row of ``a`` scaled by a power of two into [-1, 1] (`_unit_rows`), then less its smallest value.

    Pearson r does not change under either, and both are exact where it matters: a difference of two values
    within a factor 2 of each other is exact (Sterbenz), so scores that differ only in their last bits (4, 4 +
    1 ulp, 4 + 2 ulp) become small whole multiples of an ulp whose mean rounds no more. Unshifted, their mean
    (4 + 0.75 ulp) is not a float and r came out -0.1 instead of -0.1348 (scipy's too, with a warning)."""
    scaled = _unit_rows(a)
    return scaled - scaled.min(axis=1, keepdims=True)


def _rows_pearson(a: np.ndarray, b: np.ndarray, *, conditioned: bool = False) -> np.ndarray:
    """Pearson r of every row of ``a`` with the same row of ``b`` (B x k); NaN where a row is constant.

    Each row is shifted and scaled exactly (`_conditioned`) and scaled again by a power of two after centring
    (as `scipy.stats.pearsonr` normalises), so scores of any magnitude give scipy's r: unscaled, the sums of
    squares overflow from about 1e154 (r NaN) and underflow below about 1e-154 (r NaN, or a silent 0 when the
    other side overflows). ``conditioned``: the rows are draws from values already `_conditioned` (or ranks),
    so the first step is skipped (the bootstrap conditions the n scores once, not every resample)."""
    ua, ub = (a, b) if conditioned else (_conditioned(a), _conditioned(b))
    ac = _unit_rows(ua - ua.mean(axis=1, keepdims=True))
    bc = _unit_rows(ub - ub.mean(axis=1, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.einsum("ij,ij->i", ac, bc) / np.sqrt(np.einsum("ij,ij->i", ac, ac) * np.einsum("ij,ij->i", bc, bc))
    r = np.clip(r, -1.0, 1.0)
    r[_constant_rows(a) | _constant_rows(b)] = math.nan
    return r


def _rows_kendall(a: np.ndarray, b: np.ndarray, variant: str) -> np.ndarray:
    """Kendall tau-b (``variant="b"``) or tau-c of every row pair (B x k), scipy's definitions, from the signs of
    all k(k-1)/2 differences (rows in chunks of bounded size); scipy per row for a row longer than
    `KENDALL_ROWS_MAX`, where the k^2 signs cost more than scipy's sort."""
    rows, k = a.shape
    out = np.full(rows, math.nan)
    n_pairs = k * (k - 1) // 2
    if k < 2:
        return out
    if k > KENDALL_ROWS_MAX:
        for i in range(rows):
            out[i] = _coef(a[i], b[i], "kendall_c" if variant == "c" else "kendall")
        return out
    first, second = np.triu_indices(k, 1)
    step = max(1, BLOCK_CELLS // n_pairs)
    for start in range(0, rows, step):
        x, y = a[start : start + step], b[start : start + step]
        dx, dy = _signs(x[:, first], x[:, second]), _signs(y[:, first], y[:, second])
        s = np.einsum("ij,ij->i", dx, dy)
        if variant == "b":
            untied_x, untied_y = (dx != 0).sum(axis=1), (dy != 0).sum(axis=1)  # n0 - n1, n0 - n2
            with np.errstate(invalid="ignore", divide="ignore"):
                tau = s / np.sqrt(untied_x.astype(float) * untied_y)
        else:
            m = np.minimum(_distinct_per_row(x), _distinct_per_row(y)).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                tau = 2.0 * s / (k * k * (m - 1.0) / m)
        out[start : start + step] = tau
    out = np.clip(out, -1.0, 1.0)
    out[_constant_rows(a) | _constant_rows(b)] = math.nan
    return out


def _distinct_per_row(a: np.ndarray) -> np.ndarray:
    ordered = np.sort(a, axis=1)
    return 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)


def _rows_coef(a: np.ndarray, b: np.ndarray, method: str) -> np.ndarray:
    """`_coef` of every row pair of ``a`` and ``b`` (B x k), vectorised."""
    if a.shape[1] < 3:
        return np.full(a.shape[0], math.nan)
    if method == "pearson":
        return _rows_pearson(a, b)
    if method == "spearman":
        r = _rows_pearson(stats.rankdata(a, axis=1), stats.rankdata(b, axis=1))
        r[_constant_rows(a) | _constant_rows(b)] = math.nan
        return r
    if method in ("kendall", "kendall_c"):
        return _rows_kendall(a, b, "c" if method == "kendall_c" else "b")
    raise ValueError(f"unknown correlation {method!r}; choose one of {', '.join(METHODS)}")


def _group_counts(idx: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """How many of each resample's items (rows of ``idx``) fall in each tie group (``groups``: the group of every
    item, 0..g-1 in increasing value): B x g."""
    rows = idx.shape[0]
    g = int(groups.max()) + 1
    flat = (groups[idx] + g * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * g).reshape(rows, g).astype(float)


def _resampled_ranks(idx: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``rankdata(values[idx], axis=1)`` (average ranks) without sorting: an item of tie group v ranks after the
    items of the groups below it, at the middle of its own group, ``sum(W_<v) + (W_v + 1) / 2``."""
    counts = _group_counts(idx, groups)
    table = np.cumsum(counts, axis=1) - counts + (counts + 1.0) / 2.0
    return np.take_along_axis(table, groups[idx], axis=1)


class _KendallOfResamples:
    """Kendall tau of resamples of fixed items ``(x, y)`` (n of them) with the items' n x n concordance signs.

    A resample with item counts ``c`` (sum n) has ``P - Q = c' S c / 2`` (S_ij = sign(x_i - x_j) sign(y_i - y_j),
    zero on the diagonal: an item drawn twice is a pair tied on both sides) and ``W_g (W_g - 1) / 2`` pairs tied
    within each tie group g of x (or y), ``W_g`` the counts summed over the group. tau-b = (P - Q) /
    sqrt((n0 - n1)(n0 - n2)), tau-c = 2 (P - Q) / (n^2 (m - 1) / m), n0 = n(n - 1)/2, m = the fewer distinct
    values: scipy's `kendalltau` on ``x[idx], y[idx]``, in whole numbers until the last division.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, variant: str) -> None:
        self.n = x.size
        self.variant = variant
        self.signs = (_signs(x[:, None], x[None, :], np.int8) * _signs(y[:, None], y[None, :], np.int8)).astype(
            np.float32
        )
        self.groups_x = np.unique(x, return_inverse=True)[1].ravel()
        self.groups_y = np.unique(y, return_inverse=True)[1].ravel()

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        rows, n = idx.shape[0], self.n
        flat = (idx + n * np.arange(rows)[:, None]).ravel()
        counts = np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float32)
        # |counts @ signs| <= n: exact in float32 (n <= KENDALL_MATRIX_MAX); the products are summed in float64
        s = np.einsum("ij,ij->i", (counts @ self.signs).astype(float), counts.astype(float)) / 2.0
        wx, wy = _group_counts(idx, self.groups_x), _group_counts(idx, self.groups_y)
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.variant == "b":
                n0 = n * (n - 1) / 2.0
                untied_x = n0 - (wx * (wx - 1.0)).sum(axis=1) / 2.0
                untied_y = n0 - (wy * (wy - 1.0)).sum(axis=1) / 2.0
                tau = s / np.sqrt(untied_x * untied_y)
                tau[(untied_x == 0) | (untied_y == 0)] = math.nan
            else:
                m = np.minimum((wx > 0).sum(axis=1), (wy > 0).sum(axis=1)).astype(float)
                tau = 2.0 * s / (n * n * (m - 1.0) / m)
                tau[m < 2] = math.nan
        return np.clip(tau, -1.0, 1.0)


def _item_bootstrap(x: np.ndarray, y: np.ndarray, method: str, n_resamples: int, seed: int | None) -> np.ndarray:
    """The coefficient on ``n_resamples`` resamples of the items (with replacement), block by block: the draws of
    ``n_resamples`` calls of ``rng.integers(0, n, n)`` (what this function did one resample at a time)."""
    rng = np.random.default_rng(seed)
    n = x.size
    kendall = method.startswith("kendall") and n <= KENDALL_MATRIX_MAX
    by_counts = _KendallOfResamples(x, y, "c" if method == "kendall_c" else "b") if kendall else None
    groups_x, groups_y = np.unique(x, return_inverse=True)[1].ravel(), np.unique(y, return_inverse=True)[1].ravel()
    cx, cy = _conditioned(x[None, :])[0], _conditioned(y[None, :])[0]  # exact; r of any resample unchanged
    parts = []
    for idx in index_blocks(rng, n, n_resamples):
        if by_counts is not None:
            parts.append(by_counts(idx))
        elif method == "spearman":  # Pearson r of the average ranks, ranked from the tie-group counts
            r = _rows_pearson(_resampled_ranks(idx, groups_x), _resampled_ranks(idx, groups_y), conditioned=True)
            parts.append(r)
        elif method == "pearson":
            parts.append(_rows_pearson(cx[idx], cy[idx], conditioned=True))  # NaN where a resample is constant
        else:
            parts.append(_rows_coef(x[idx], y[idx], method))
    return np.concatenate(parts)


def _ci(values: np.ndarray, confidence: float) -> list[float]:
    return percentile_interval(values, confidence)


def correlation_ci(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    method: str = "pearson",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 12345,
) -> dict[str, Any]:
    """Coefficient, p-value and a percentile bootstrap CI from resampled items: ``{"r", "p", "ci", "n"}``.

    Resamples are computed a block at a time (vectorised; Kendall from concordance counts), so 10,000 resamples
    of 1,000 stories take about a second per coefficient."""
    check_resampling(n_resamples=n_resamples, confidence=confidence, seed=seed)
    _check_method(method)
    x, y = _clean(x, y)
    r, p = correlation(x, y, method=method)
    if x.size >= 3:
        boots = _item_bootstrap(x, y, method, n_resamples, seed)
    else:
        boots = np.empty(0)
        advance(n_resamples)
    out = {"r": r, "p": p, "ci": _ci(boots, confidence), "n": int(x.size), "method": method}
    if math.isnan(r):
        out["undefined"] = undefined_reason(x, y)
    _count_undefined(out, boots, n_resamples)
    return out


def _count_undefined(out: dict[str, Any], boots: np.ndarray, n_resamples: int) -> None:
    """``undefined_resamples``: how many resamples left the coefficient undefined (a side constant in it, e.g.
    every drawn story rated 3); the percentile CI is over the others, so a reader must know when that is many.
    Only when the coefficient itself is defined and some resample was not."""
    k = int(np.isnan(boots).sum())
    if k and not math.isnan(out["r"]):
        out["undefined_resamples"] = k
        out["n_resamples"] = n_resamples


def system_means(systems: Sequence[str], values: np.ndarray) -> dict[str, float]:
    """Mean of the defined values per system (first-seen order)."""
    out: dict[str, list[float]] = {}
    for s, v in zip(systems, values, strict=True):
        if not math.isnan(v):
            out.setdefault(s, []).append(float(v))
    shift = _headroom(np.asarray(values, dtype=float))  # finite scores near the float limit summed to infinity
    return {s: float(np.ldexp(np.mean(np.ldexp(v, -shift)), shift)) for s, v in out.items()}


def _stratified_bootstrap(
    groups: list[np.ndarray], m: np.ndarray, h: np.ndarray, method: str, n_resamples: int, seed: int | None
) -> np.ndarray:
    """System-level coefficient on ``n_resamples`` stratified resamples (each system's stories resampled with
    replacement, then the system means), block by block. The draws are those of the loop this replaces
    (``rng.integers(0, size, size)`` per system, systems in order, resample after resample): one call with
    per-position bounds draws the same numbers."""
    rng = np.random.default_rng(seed)
    sizes = np.array([g.size for g in groups])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    members = np.concatenate(groups)
    highs = np.repeat(sizes, sizes)
    offsets = np.repeat(starts, sizes)
    n = int(sizes.sum())
    parts = []
    for start in range(0, n_resamples, block_rows(n)):
        rows = min(block_rows(n), n_resamples - start)
        chosen = members[offsets + rng.integers(0, np.broadcast_to(highs, (rows, n)))]
        mx = np.add.reduceat(m[chosen], starts, axis=1) / sizes
        hy = np.add.reduceat(h[chosen], starts, axis=1) / sizes
        parts.append(_rows_coef(mx, hy, method))
        advance(rows)
    return np.concatenate(parts)


def system_correlation_ci(
    systems: Sequence[str],
    metric_scores: np.ndarray,
    human_scores: np.ndarray,
    *,
    method: str = "pearson",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 12345,
) -> dict[str, Any]:
    """System-level correlation: system means of the metric vs system means of the human score (stories where
    either is undefined are dropped), CI by resampling each system's stories (stratified bootstrap). When every
    system has one story no resample differs from the table: the CI is NaN and ``ci_undefined`` says why (a
    system with one story among others with more is held fixed in every resample). Where r itself is undefined
    (``undefined``: e.g. every system's mean rating the same) the CI is NaN too, as at story level."""
    check_resampling(n_resamples=n_resamples, confidence=confidence, seed=seed)
    _check_method(method)
    if isinstance(systems, (str, bytes)):
        raise InputError("systems must be a sequence of system names, one per story")
    m, h = _aligned(metric_scores=metric_scores, human_scores=human_scores)
    if len(systems) != m.size:
        raise InputError(f"{len(systems)} system names for {m.size} stories; give one system name per story")
    keep = ~(np.isnan(m) | np.isnan(h))
    sys_arr = np.asarray([str(s) for s in systems])[keep]
    m, h = m[keep], h[keep]
    names = list(dict.fromkeys(sys_arr.tolist()))
    groups = [np.flatnonzero(sys_arr == s) for s in names]
    # scores near the float limit summed to infinity ("holds an infinite value"): means of the scores divided by
    # a power of two (exact; no coefficient changes under it), multiplied back for the table
    shift_m, shift_h = _headroom(m), _headroom(h)
    m, h = np.ldexp(m, -shift_m), np.ldexp(h, -shift_h)
    mx = np.array([m[g].mean() for g in groups])
    hy = np.array([h[g].mean() for g in groups])
    r, p = correlation(mx, hy, method=method)
    # one story per system: every stratified resample is the table itself, so the "CI" was [r, r]
    singletons = len(names) >= 3 and all(g.size == 1 for g in groups)
    # r undefined (the systems' means constant on one side): resampled stories move the means, so the resamples
    # had an r the table lacks and the "CI" beside n/a was e.g. [-0.98, 0.98]; a CI of no estimate is n/a too
    if len(names) >= 3 and not singletons and not math.isnan(r):
        boots = _stratified_bootstrap(groups, m, h, method, n_resamples, seed)
    else:
        boots = np.empty(0)
        advance(n_resamples)
    out = {
        "r": r,
        "p": p,
        "ci": _ci(boots, confidence),
        "n": len(names),
        "method": method,
        "systems": {
            s: {"metric": float(np.ldexp(a, shift_m)), "human": float(np.ldexp(b, shift_h))}
            for s, a, b in zip(names, mx, hy, strict=True)
        },
    }
    if math.isnan(r):  # over the systems' means
        means = np.ldexp(mx, shift_m), np.ldexp(hy, shift_h)  # as the table shows them
        out["undefined"] = undefined_reason(*means, unit="system", human_what="mean human scores")
    elif singletons:
        out["ci_undefined"] = SINGLE_STORY_SYSTEMS
    _count_undefined(out, boots, n_resamples)
    return out


#: why a system-level CI is n/a when every system has one story (`system_correlation_ci`)
SINGLE_STORY_SYSTEMS = (
    "every system has one story with both scores, so resampling each system's stories cannot move the system means "
    "(the interval would be r itself): no CI; judge more stories per system, or read the story-level CI"
)


#: |r_AB| within this of 1: the two metrics are the same up to a linear map (their r with people are then equal)
_SAME_METRIC_TOL = 1e-12


def williams_undefined_reason(r12: float, r13: float, r23: float, n: int, *, unit: str = "item") -> str | None:
    """Why the Williams test of r12 vs r13 (given r23, over n items) is undefined, or None when it is defined:
    fewer than 4 items (n - 3 degrees of freedom), a correlation that is undefined (a constant column), or two
    metrics that are the same or mirror images up to a linear map (r23 = +-1: nothing to compare). ``unit``
    names what was counted (``system`` at system level)."""
    if n <= 3:
        return f"only {n} {unit}{'s' if n != 1 else ''} with both metrics and human scores; the test needs 4"
    if math.isnan(r12) and math.isnan(r13):
        return "neither metric's correlation with the human scores is defined (constant scores)"
    if math.isnan(r12) or math.isnan(r13):
        which = "A" if math.isnan(r12) else "B"
        return f"metric {which}'s correlation with the human scores is undefined (constant scores)"
    if math.isnan(r23):
        return "the correlation between the two metrics is undefined"
    if r23 >= 1.0 - _SAME_METRIC_TOL:
        return "the two metrics' scores are the same up to a linear map (r_AB = 1): they correlate equally with people"
    if r23 <= -1.0 + _SAME_METRIC_TOL:
        return "one metric's scores are the other's turned around (r_AB = -1), so there is nothing to test"
    return None


def williams_test(r12: float, r13: float, r23: float, n: int, *, unit: str = "item") -> dict[str, Any]:
    """Williams test: is corr(human, metric A) = r12 different from corr(human, metric B) = r13, given
    corr(A, B) = r23 over the same n items?  (Graham & Baldwin 2014, Eq. 1)

        t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 K (n - 1)/(n - 3) + (r12 + r13)^2 / 4 (1 - r23)^3)
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23

    with n - 3 degrees of freedom. ``p_one_sided`` tests r12 > r13 (what WMT reports); ``p_two_sided`` tests
    r12 != r13. K is the determinant of the 3 x 3 correlation matrix, never negative: rounding below 0 is taken
    as 0. Where the test is undefined (`williams_undefined_reason`: n <= 3, a NaN correlation, r23 = +-1, or a
    zero denominator: people and both metrics linearly dependent) t and the p-values are NaN and
    ``undefined`` says why.
    """
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        number = not isinstance(r, bool) and isinstance(r, (int, float, np.floating))
        if not number or not (math.isnan(r) or abs(r) <= 1 + 1e-9):  # a rounding step above 1 is still 1
            raise InputError(f"williams_test: {name} must be a correlation from -1 to 1 (or NaN), not {r!r:.40}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"williams_test: n must be a whole number of items, not {n!r:.40}")
    nan = {"t": math.nan, "df": float(n - 3), "p_one_sided": math.nan, "p_two_sided": math.nan}
    reason = williams_undefined_reason(r12, r13, r23, n, unit=unit)
    if reason is not None:
        return {**nan, "undefined": reason}
    k = max(0.0, 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23)
    denom = math.sqrt(2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3)
    if not denom > 0.0:
        return {
            **nan,
            "undefined": "the human scores are a linear combination of the two metrics' scores, so the test's "
            "variance is 0",
        }
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / denom
    df = n - 3
    return {
        "t": t,
        "df": float(df),
        "p_one_sided": float(stats.t.sf(t, df)),
        "p_two_sided": float(2 * stats.t.sf(abs(t), df)),
    }


def compare_correlations(
    human: np.ndarray, metric_a: np.ndarray, metric_b: np.ndarray, *, method: str = "pearson", unit: str = "item"
) -> dict[str, Any]:
    """Williams test of metric A vs metric B against the same human scores (items with a NaN dropped); an
    undefined test carries ``undefined`` (`williams_test`; ``unit`` names the items in it, e.g. ``system``)."""
    h, a, b = _aligned(human_scores=human, metric_A=metric_a, metric_B=metric_b)  # infinity refused, not "constant"
    keep = ~(np.isnan(h) | np.isnan(a) | np.isnan(b))
    h, a, b = h[keep], a[keep], b[keep]
    r12 = _coef(h, a, method)
    r13 = _coef(h, b, method)
    r23 = _coef(a, b, method)
    if h.size >= 3 and np.array_equal(a, b):  # identical scores: r_AB is 1 exactly, whatever rounding says
        r23 = 1.0
    return {
        "r_a": r12,
        "r_b": r13,
        "r_ab": r23,
        "n": int(h.size),
        **williams_test(r12, r13, r23, int(h.size), unit=unit),
    }


def point_biserial(scores: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Point-biserial r of metric scores with a 0/1 error label (Vrank Table 5), via
    `scipy.stats.pointbiserialr`.

    Negative r: stories WITH the error get lower scores (what a good higher-is-better metric should show).
    """
    s, lab = _clean(scores, labels)
    odd = lab[(lab != 0) & (lab != 1)]
    if odd.size:  # a 1/2 coding read as "error present" everywhere gave r NaN and n_error the sum of the codes
        raise InputError(f"error labels must be 0 (no error) or 1 (error), not {odd[0]:g}")
    if s.size < 3 or np.all(lab == lab[0]) or np.all(s == s[0]):
        return {
            "r": math.nan,
            "p": math.nan,
            "n": int(s.size),
            "n_error": int(lab.sum()),
            "undefined": undefined_reason(s, lab, human_what="error labels"),
        }
    res = stats.pointbiserialr(lab.astype(bool), _conditioned(s[None, :])[0])  # Pearson r: as `correlation`
    return {"r": float(res[0]), "p": float(res[1]), "n": int(s.size), "n_error": int(lab.sum())}
