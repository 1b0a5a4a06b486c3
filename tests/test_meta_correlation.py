"""Correlations (vistkit.meta.correlation): equal to scipy, hand-computed values, invariances, Williams test,
point-biserial r, and story/system-level scoring of judged stories."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vistkit.meta.correlation import (
    compare_correlations,
    correlation,
    correlation_ci,
    point_biserial,
    system_correlation_ci,
    undefined_reason,
    williams_test,
)

X = np.array([6, 5, 3, 4, 1, 2], float)  # word counts of the likert fixture's stories
FOCUSED = np.array([5, 4, 2.5, 3, 1.5, 2])
SYSTEMS = ["human", "human", "m1", "m1", "m2", "m2"]


def test_hand_computed_small_values() -> None:
    x, y = [1, 2, 3], [1, 3, 2]
    assert correlation(x, y, method="pearson")[0] == pytest.approx(0.5)
    assert correlation(x, y, method="spearman")[0] == pytest.approx(0.5)
    assert correlation(x, y, method="kendall")[0] == pytest.approx(1 / 3)  # 2 concordant, 1 discordant


def test_equal_to_scipy() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=50)
    y = x + rng.normal(size=50)
    y[::7] = y[0]  # ties
    assert correlation(x, y, method="pearson") == pytest.approx(tuple(stats.pearsonr(x, y)))
    assert correlation(x, y, method="spearman") == pytest.approx(tuple(stats.spearmanr(x, y)))
    assert correlation(x, y, method="kendall") == pytest.approx(tuple(stats.kendalltau(x, y)))
    assert correlation(x, y, method="kendall_c") == pytest.approx(tuple(stats.kendalltau(x, y, variant="c")))
    lab = (x > 0).astype(float)
    pb = point_biserial(y, lab)
    assert (pb["r"], pb["p"]) == pytest.approx(tuple(stats.pointbiserialr(lab, y)))


def test_nan_items_dropped_and_degenerate_inputs() -> None:
    x = [1, 2, math.nan, 4, 5]
    y = [2, 1, 9, 4, 3]
    assert correlation(x, y)[0] == pytest.approx(stats.pearsonr([1, 2, 4, 5], [2, 1, 4, 3])[0])
    assert math.isnan(correlation([1, 1, 1, 1], [1, 2, 3, 4])[0])
    assert math.isnan(correlation([1, 2], [1, 2])[0])


def test_an_undefined_coefficient_says_why() -> None:
    """n/a alone left a user guessing: each undefined coefficient carries its reason (shown under the table of
    `vistkit meta correlate` and `errors`), at story and system level and for point-biserial r."""
    assert undefined_reason([1, 2, 3], [1, 3, 2]) is None
    assert undefined_reason([1, 2, math.nan], [1, 2, 3]) == (
        "only 2 items have both a metric score and human scores; a correlation needs 3"
    )
    assert undefined_reason([1, 2, 3, 4], [3, 3, 3, 3]) == "the human scores are all 3"
    assert correlation_ci([0.5] * 4, [1, 2, 3, 4], n_resamples=10)["undefined"] == "the metric gives every item 0.5"
    assert "undefined" not in correlation_ci(X, FOCUSED, n_resamples=10)
    two = system_correlation_ci(["a", "a", "b", "b"], np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 3, 5]))
    assert two["undefined"] == "only 2 systems have both a metric score and mean human scores; a correlation needs 3"
    pb = point_biserial(np.array([1.0, 2, 3, 4]), np.zeros(4))
    assert math.isnan(pb["r"]) and pb["undefined"] == "the error labels are all 0"


def test_bootstrap_ci_brackets_estimate_and_is_reproducible() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=80)
    y = 0.6 * x + rng.normal(size=80)
    a = correlation_ci(x, y, method="spearman", n_resamples=300, seed=7)
    b = correlation_ci(x, y, method="spearman", n_resamples=300, seed=7)
    assert a == b
    assert a["ci"][0] < a["r"] < a["ci"][1] and a["n"] == 80


def test_system_level_hand_computed() -> None:
    res = system_correlation_ci(SYSTEMS, X, FOCUSED, method="pearson", n_resamples=100)
    # system means: length 5.5, 3.5, 1.5; focused 4.5, 2.75, 1.75 -> r = 5.5 / sqrt(8 * 3.875)
    assert res["r"] == pytest.approx(5.5 / math.sqrt(31))
    assert res["systems"]["m1"] == {"metric": 3.5, "human": 2.75}
    assert system_correlation_ci(SYSTEMS, X, FOCUSED, method="kendall", n_resamples=10)["r"] == pytest.approx(
        1.0
    )
    assert res["n"] == 3


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-60, 60), st.floats(-100, 100)),
        min_size=4,
        max_size=40,
        unique_by=lambda t: t[0],
    )
)
def test_rank_correlations_invariant_to_monotone_transforms(rows: list[tuple[int, float]]) -> None:
    x = np.array([r[0] for r in rows], dtype=float)
    y = np.array([r[1] for r in rows])
    fx = x**3 + 5 * x  # strictly increasing, non-linear, exact in floating point
    for method in ("spearman", "kendall"):
        a, b = correlation(x, y, method=method)[0], correlation(fx, y, method=method)[0]
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-9)


def test_pearson_not_invariant_to_monotone_transform() -> None:
    x = np.arange(1, 11, dtype=float)
    y = x + np.array([0.5, -0.5] * 5)
    r_lin = correlation(x, y)[0]
    r_exp = correlation(np.exp(x), y)[0]
    assert r_lin != pytest.approx(r_exp, abs=1e-3)
    assert correlation(3 * x + 2, y)[0] == pytest.approx(r_lin)  # but invariant to positive affine maps


def test_williams_hand_computed() -> None:
    # r12 .5, r13 .3, r23 .4, n 20: K = 1 - .25 - .09 - .16 + 2(.5)(.3)(.4) = 0.62
    # t = .2 sqrt(19 * 1.4) / sqrt(2 (.62) 19/17 + (.8^2 / 4)(.6^3)) = 1.0315038 / 1.1918230
    res = williams_test(0.5, 0.3, 0.4, 20)
    assert res["t"] == pytest.approx(0.2 * math.sqrt(26.6) / math.sqrt(2 * 0.62 * 19 / 17 + 0.16 * 0.216))
    assert res["t"] == pytest.approx(0.865484, abs=1e-5)
    assert res["df"] == 17
    assert res["p_one_sided"] == pytest.approx(stats.t.sf(res["t"], 17))
    assert res["p_two_sided"] == pytest.approx(2 * res["p_one_sided"])
    # antisymmetric in the two metrics, zero when they correlate equally
    assert williams_test(0.3, 0.5, 0.4, 20)["t"] == pytest.approx(-res["t"])
    assert williams_test(0.4, 0.4, 0.2, 30)["t"] == 0.0


def test_compare_correlations_uses_items_of_all_three() -> None:
    rng = np.random.default_rng(11)
    h = rng.normal(size=100)
    good = h + 0.3 * rng.normal(size=100)
    bad = h + 3 * rng.normal(size=100)
    res = compare_correlations(h, good, bad)
    assert res["r_a"] == pytest.approx(stats.pearsonr(h, good)[0])
    assert res["r_ab"] == pytest.approx(stats.pearsonr(good, bad)[0])
    assert res["p_one_sided"] < 0.001 and res["n"] == 100


def test_point_biserial_hand_computed() -> None:
    gram = np.array([0, 0, 1, 0, 1, 1], float)
    # (M1 - M0) / s_n * sqrt(p q) = (2 - 5) / sqrt(17.5 / 6) * 0.5
    assert point_biserial(X, gram)["r"] == pytest.approx(-3 / math.sqrt(17.5 / 6) * 0.5)
    assert point_biserial(X, gram)["n_error"] == 3
    assert math.isnan(point_biserial(X, np.zeros(6))["r"])


@pytest.mark.parametrize(
    "call",
    [
        lambda: correlation(None, [1, 2, 3]),
        lambda: correlation("abcd", [1, 2, 3, 4]),
        lambda: correlation([1, 2, 3], [1, 2, 3], method="nope"),
        lambda: correlation([1, 2], [1, 2, 3]),
        lambda: correlation([1, 2, float("inf")], [1, 2, 3]),
        lambda: correlation([[1, 2], [3, 4]], [[1, 2], [3, 4]]),
        lambda: williams_test("a", 0.1, 0.2, 10),
        lambda: williams_test(0.5, 0.1, 2.0, 10),
        lambda: williams_test(0.5, 0.1, 0.2, 2.5),
    ],
)
def test_wrong_inputs_from_python_are_one_sentence(call) -> None:  # type: ignore[no-untyped-def]
    """From Python: a None, a string, an unknown method, unequal lengths, an infinite value or a value that is not
    a correlation is an InputError (they were ValueError / TypeError from numpy, or a RuntimeWarning and NaN)."""
    from vistkit.errors import InputError

    with pytest.raises(InputError):
        call()
