"""Correlations of metric scores with human scores, with bootstrap CIs, the Williams test and point-biserial
r.

- Pearson r, Spearman rho and Kendall tau (``kendall`` = tau-b, which corrects for ties on both sides and is
  scipy's default; ``kendall_c`` = tau-c, Stuart's variant for rectangular tables). Point values and p-values
  are scipy's (`scipy.stats.pearsonr`, `spearmanr`, `kendalltau`, `pointbiserialr`).
- Bootstrap CIs resample ITEMS (stories) with replacement (percentile intervals); at system level the items of
  each system are resampled (stratified) and the system means recomputed, so the CI reflects which stories
  were judged, not only which systems.
- `williams_test`: Williams (1959) test for the difference between two dependent correlations that share one
  variable (the human scores), as used in WMT metrics tasks (Graham & Baldwin 2014, Eq. 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

METHODS = ("pearson", "spearman", "kendall", "kendall_c")


def _clean(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError("x and y differ in length")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


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
    x, y = _clean(x, y)
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan, math.nan
    if method == "pearson":
        res = stats.pearsonr(x, y)
    elif method == "spearman":
        res = stats.spearmanr(x, y)
    elif method == "kendall":
        res = stats.kendalltau(x, y, variant="b")
    elif method == "kendall_c":
        res = stats.kendalltau(x, y, variant="c")
    else:
        raise ValueError(f"unknown correlation {method!r}; choose one of {', '.join(METHODS)}")
    return float(res[0]), float(res[1])


def _coef(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    if method == "pearson":
        return float(np.corrcoef(x, y)[0, 1])
    if method == "spearman":
        return float(np.corrcoef(stats.rankdata(x), stats.rankdata(y))[0, 1])
    return float(stats.kendalltau(x, y, variant="c" if method == "kendall_c" else "b")[0])


def _ci(values: np.ndarray, confidence: float) -> list[float]:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return [math.nan, math.nan]
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return [float(lo), float(hi)]


def correlation_ci(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    method: str = "pearson",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 12345,
) -> dict[str, Any]:
    """Coefficient, p-value and a percentile bootstrap CI from resampled items: ``{"r", "p", "ci", "n"}``."""
    x, y = _clean(x, y)
    r, p = correlation(x, y, method=method)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [
            _coef(x[idx], y[idx], method)
            for idx in (rng.integers(0, x.size, x.size) for _ in range(n_resamples if x.size >= 3 else 0))
        ]
    )
    out = {"r": r, "p": p, "ci": _ci(boots, confidence), "n": int(x.size), "method": method}
    if math.isnan(r):
        out["undefined"] = undefined_reason(x, y)
    return out


def system_means(systems: Sequence[str], values: np.ndarray) -> dict[str, float]:
    """Mean of the defined values per system (first-seen order)."""
    out: dict[str, list[float]] = {}
    for s, v in zip(systems, values, strict=True):
        if not math.isnan(v):
            out.setdefault(s, []).append(float(v))
    return {s: float(np.mean(v)) for s, v in out.items()}


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
    either is undefined are dropped), CI by resampling each system's stories (stratified bootstrap)."""
    m = np.asarray(metric_scores, dtype=float)
    h = np.asarray(human_scores, dtype=float)
    keep = ~(np.isnan(m) | np.isnan(h))
    sys_arr = np.asarray(list(systems))[keep]
    m, h = m[keep], h[keep]
    names = list(dict.fromkeys(sys_arr.tolist()))
    groups = [np.flatnonzero(sys_arr == s) for s in names]
    mx = np.array([m[g].mean() for g in groups])
    hy = np.array([h[g].mean() for g in groups])
    r, p = correlation(mx, hy, method=method)
    rng = np.random.default_rng(seed)
    boots = np.empty(n_resamples if len(names) >= 3 else 0)
    for i in range(boots.size):
        idx = [g[rng.integers(0, g.size, g.size)] for g in groups]
        boots[i] = _coef(np.array([m[j].mean() for j in idx]), np.array([h[j].mean() for j in idx]), method)
    out = {
        "r": r,
        "p": p,
        "ci": _ci(boots, confidence),
        "n": len(names),
        "method": method,
        "systems": {
            s: {"metric": float(a), "human": float(b)} for s, a, b in zip(names, mx, hy, strict=True)
        },
    }
    if math.isnan(r):  # over the systems' means
        out["undefined"] = undefined_reason(mx, hy, unit="system", human_what="mean human scores")
    return out


def williams_test(r12: float, r13: float, r23: float, n: int) -> dict[str, float]:
    """Williams test: is corr(human, metric A) = r12 different from corr(human, metric B) = r13, given
    corr(A, B) = r23 over the same n items?  (Graham & Baldwin 2014, Eq. 1)

        t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 K (n - 1)/(n - 3) + (r12 + r13)^2 / 4 (1 - r23)^3)
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23

    with n - 3 degrees of freedom. ``p_one_sided`` tests r12 > r13 (what WMT reports); ``p_two_sided`` tests
    r12 != r13.
    """
    if n <= 3:
        return {"t": math.nan, "df": float(n - 3), "p_one_sided": math.nan, "p_two_sided": math.nan}
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    denom = math.sqrt(2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3)
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / denom if denom > 0 else math.nan
    df = n - 3
    return {
        "t": t,
        "df": float(df),
        "p_one_sided": float(stats.t.sf(t, df)),
        "p_two_sided": float(2 * stats.t.sf(abs(t), df)),
    }


def compare_correlations(
    human: np.ndarray, metric_a: np.ndarray, metric_b: np.ndarray, *, method: str = "pearson"
) -> dict[str, float]:
    """Williams test of metric A vs metric B against the same human scores (items with a NaN dropped)."""
    h, a, b = (np.asarray(v, dtype=float) for v in (human, metric_a, metric_b))
    keep = ~(np.isnan(h) | np.isnan(a) | np.isnan(b))
    h, a, b = h[keep], a[keep], b[keep]
    r12 = _coef(h, a, method)
    r13 = _coef(h, b, method)
    r23 = _coef(a, b, method)
    return {
        "r_a": r12,
        "r_b": r13,
        "r_ab": r23,
        "n": int(h.size),
        **williams_test(r12, r13, r23, int(h.size)),
    }


def point_biserial(scores: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Point-biserial r of metric scores with a 0/1 error label (Vrank Table 5), via
    `scipy.stats.pointbiserialr`.

    Negative r: stories WITH the error get lower scores (what a good higher-is-better metric should show).
    """
    s, lab = _clean(scores, labels)
    if s.size < 3 or np.all(lab == lab[0]) or np.all(s == s[0]):
        return {
            "r": math.nan,
            "p": math.nan,
            "n": int(s.size),
            "n_error": int(lab.sum()),
            "undefined": undefined_reason(s, lab, human_what="error labels"),
        }
    res = stats.pointbiserialr(lab.astype(bool), s)
    return {"r": float(res[0]), "p": float(res[1]), "n": int(s.size), "n_error": int(lab.sum())}
