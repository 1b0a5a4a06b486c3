"""Probes, round 9: are the meta-evaluation numbers right? Checked against reference implementations (scipy,
sacreBLEU's significance tests, the ``krippendorff`` package) and hand or textbook computations.

Classes probed: Pearson / Spearman / Kendall tau-b and tau-c (scalar, row-wise vectorised, bootstrap resamples,
system level) on tie-heavy, constant, tiny-n, huge / tiny / last-bit data; bootstrap CI coverage and
reproducibility; the Williams test on hand-computed cases; McNemar against scipy's binomial test; the paired
approximate-randomisation test when the null ties with the observed difference; point-biserial r; Krippendorff's
alpha against the textbook coincidence-matrix computation; Likert tables with awkward cells.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from vistkit.errors import InputError
from vistkit.meta import correlation as C
from vistkit.meta.human import read_likert
from vistkit.meta.resample import index_blocks
from vistkit.meta.significance import mcnemar
from vistkit.metrics.base import Score
from vistkit.scores import stats as S


def _scipy(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    if method == "pearson":
        return float(stats.pearsonr(x, y)[0])
    if method == "spearman":
        return float(stats.spearmanr(x, y)[0])
    return float(stats.kendalltau(x, y, variant="c" if method == "kendall_c" else "b")[0])


def _exact_spearman_p(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's two-sided p by brute force over every ordering of x against y (scipy's permutation_test rule for
    two-sided: twice the smaller tail, at most 1; rhos within 1e-9 are one value)."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rows = rx[np.array(list(itertools.permutations(range(x.size))))]
    rows_c, ry_c = rows - rows.mean(axis=1, keepdims=True), ry - ry.mean()
    null = (rows_c @ ry_c) / np.sqrt((rows_c**2).sum(axis=1) * (ry_c**2).sum())  # Pearson of ranks per ordering
    obs = np.corrcoef(rx, ry)[0, 1]
    less, greater = np.mean(null <= obs + 1e-9), np.mean(null >= obs - 1e-9)
    return float(min(1.0, 2 * min(less, greater)))


def _exact_kendall_p(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's two-sided p by brute force over every ordering of x against y (S = concordant - discordant orders
    them for tau-b and tau-c alike: both denominators are fixed under a permutation); twice the smaller tail."""
    orders = np.array(list(itertools.permutations(range(x.size))))
    first, second = np.triu_indices(x.size, 1)
    null = (np.sign(x[orders[:, first]] - x[orders[:, second]]) * np.sign(y[first] - y[second])).sum(axis=1)
    obs = (np.sign(x[first] - x[second]) * np.sign(y[first] - y[second])).sum()
    return float(min(1.0, 2 * min(np.mean(null <= obs), np.mean(null >= obs))))


def test_spearman_p_is_exact_for_few_pairs() -> None:
    """A perfect ranking of 3 systems had p = 0.0000 (scipy's t approximation); its exact p is 1/3 (2 of the 6
    orderings are as extreme), of 4 systems 1/12, and Kendall's exact p agrees there."""
    assert C.correlation([1, 2, 3], [10, 20, 30], method="spearman") == pytest.approx((1.0, 1 / 3))
    assert C.correlation([1, 2, 3, 4], [4, 3, 2, 1], method="spearman") == pytest.approx((-1.0, 1 / 12))
    assert C.correlation([1, 2, 3], [10, 20, 30], method="kendall")[1] == pytest.approx(1 / 3)
    x, y = np.arange(10.0), np.array([0, 2, 1, 3, 5, 4, 6, 8, 7, 9.0])  # 10 pairs: scipy's p again
    assert C.correlation(x, y, method="spearman")[1] == pytest.approx(float(stats.spearmanr(x, y)[1]))


def _magnitudes() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(4):
        n = int(rng.integers(4, 12))
        out.append((rng.integers(1, 6, n) * 1e300, rng.integers(1, 6, n) * 1e-300))  # Likert x 1e300 / 1e-300
        out.append((rng.normal(size=n) * 1e-300, rng.normal(size=n) * 1e200))
        out.append((rng.normal(size=n) * 1e-160, rng.normal(size=n) * 1e160))
    return out


@pytest.mark.parametrize("method", C.METHODS)
def test_coefficients_of_huge_and_tiny_scores_are_scipys(method: str) -> None:
    """Was wrong: the Pearson r behind the bootstrap, the Williams test and the system level (`_coef`,
    `_rows_pearson`) squared raw scores, so at 1e200 / 1e-300 it was NaN and at 1e-160 vs 1e160 a silent 0.0
    (scipy: -0.18); now every row is shifted and scaled exactly first and equals scipy's r."""
    for x, y in _magnitudes():
        want = _scipy(x, y, method)
        assert C.correlation(x, y, method=method)[0] == pytest.approx(want, abs=1e-12)
        assert C._coef(x, y, method) == pytest.approx(want, abs=1e-12)
        assert C._rows_coef(x[None, :], y[None, :], method)[0] == pytest.approx(want, abs=1e-12)


def _exact_pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r of the floats as exact rationals (sums without rounding), one rounding at the end."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    xs, ys = [Fraction(float(v)) for v in x], [Fraction(float(v)) for v in y]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in xs), sum((b - my) ** 2 for b in ys)
    with localcontext() as ctx:
        ctx.prec = 40
        dec = [Decimal(f.numerator) / Decimal(f.denominator) for f in (sxy, sxx, syy)]
        return float(dec[0] / (dec[1] * dec[2]).sqrt())


@pytest.mark.filterwarnings("ignore::scipy.stats.NearConstantInputWarning")
def test_pearson_of_scores_differing_in_their_last_bits_is_exact() -> None:
    """Was wrong: scores 4, 4 + 1 ulp, 4 + 2 ulp, 4 against lengths 2, 1, 3, 4 gave r = -0.1 (scipy's, with a
    raw NearConstantInputWarning on the CLI's stderr): their mean, 4 + 0.75 ulp, is not a float, so centring
    rounded; the exact r is -0.5 / sqrt(13.75) = -0.134840. Now the scores are shifted by their minimum first
    (exact: Sterbenz) and every Pearson path is within 1e-15 of the exact rational computation (scipy's own
    error on these reaches 0.58)."""
    x, y = np.array([2.0, 1, 3, 4]), np.array([4.0, 4.000000000000001, 4.000000000000002, 4])
    r, p = C.correlation(x, y)
    assert r == pytest.approx(-0.5 / math.sqrt(13.75), abs=1e-15)
    assert p == pytest.approx(stats.pearsonr(x, [0.0, 1, 2, 0])[1], rel=1e-12)
    rng = np.random.default_rng(9)
    ulp4 = np.spacing(4.0)
    for _ in range(40):
        n = int(rng.integers(3, 12))
        for a, b in (
            (1.0 + rng.integers(0, 4, n) * np.finfo(float).eps, rng.normal(size=n)),
            (4.0 + rng.integers(0, 4, n) * ulp4, 1e10 + rng.integers(0, 4, n) * np.spacing(1e10)),
        ):
            if np.ptp(a) == 0 or np.ptp(b) == 0:
                continue
            want = _exact_pearson(a, b)
            assert C.correlation(a, b)[0] == pytest.approx(want, abs=1e-15)
            assert C._coef(a, b, "pearson") == pytest.approx(want, abs=1e-15)
            assert C._rows_pearson(a[None, :], b[None, :])[0] == pytest.approx(want, abs=1e-15)


def test_williams_and_bootstrap_do_not_depend_on_the_scores_units() -> None:
    """Was wrong: the Williams test of metrics scored in 1e300 units was n/a (r_b NaN) and the bootstrap CI of
    a 1e-160-unit metric was all zeros; now both are the numbers of the same scores in ordinary units."""
    rng = np.random.default_rng(1)
    h = rng.normal(size=30)
    a, b = h + rng.normal(size=30), h + 2 * rng.normal(size=30)
    plain = C.compare_correlations(h, a, b)
    for scale in (1e300, 1e-170):
        scaled = C.compare_correlations(h, a * scale, b * scale)
        for k in ("r_a", "r_b", "r_ab", "t", "p_one_sided"):
            assert scaled[k] == pytest.approx(plain[k], abs=1e-9)
    ci = C.correlation_ci(a, h, n_resamples=200, seed=4)["ci"]
    assert C.correlation_ci(a * 1e-160, h * 1e160, n_resamples=200, seed=4)["ci"] == pytest.approx(ci, abs=1e-9)


@pytest.mark.parametrize("method", C.METHODS)
def test_scalar_row_wise_and_scipy_agree_on_ties_and_tiny_n(method: str) -> None:
    """Tie-heavy Likert data, n = 3..9, constant columns: the scalar, the row-wise and scipy's coefficient
    (NaN where a side is constant) and scipy's p-value."""
    rng = np.random.default_rng(2)
    for _ in range(120):
        n = int(rng.integers(3, 10))
        x, y = rng.integers(1, 4, n).astype(float), rng.integers(1, 3, n).astype(float)
        want = _scipy(x, y, method)
        r, p = C.correlation(x, y, method=method)
        rows = C._rows_coef(np.stack([x, y]), np.stack([y, x]), method)
        for got in (r, C._coef(x, y, method), rows[0], rows[1]):
            assert got == pytest.approx(want, abs=1e-12, nan_ok=True)
        if not math.isnan(want):
            if method == "spearman":  # n <= 9: the exact permutation p, not scipy's t approximation (round 11)
                assert p == pytest.approx(_exact_spearman_p(x, y), rel=1e-9, abs=1e-12)
                continue
            if method != "pearson" and (np.unique(x).size < n or np.unique(y).size < n):  # round 14: exact with ties
                assert p == pytest.approx(_exact_kendall_p(x, y), rel=1e-9, abs=1e-12)
                continue
            res = (
                stats.pearsonr(x, y)
                if method == "pearson"
                else stats.kendalltau(x, y, variant="c" if method == "kendall_c" else "b")
            )
            assert p == pytest.approx(float(res[1]), rel=1e-9, abs=1e-7)  # r = +-1: scipy's r rounds below 1


@pytest.mark.parametrize("method", C.METHODS)
def test_every_bootstrap_resample_is_scipys_coefficient_of_that_resample(method: str) -> None:
    """The vectorised resamples (Kendall from concordance counts, Spearman from tie-group counts) equal scipy on
    the same resampled items (the documented draws), degenerate resamples NaN; also for 1e300-unit scores."""
    rng = np.random.default_rng(3)
    for x, y in (
        (rng.integers(1, 4, 7).astype(float), rng.integers(1, 3, 7).astype(float)),
        (rng.integers(1, 6, 6) * 1e300, rng.integers(1, 6, 6).astype(float)),
    ):
        got = C._item_bootstrap(x, y, method, 150, 7)
        idx = np.concatenate(list(index_blocks(np.random.default_rng(7), x.size, 150)))
        want = np.array([_scipy(x[i], y[i], method) for i in idx])
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_system_level_correlation_is_the_correlation_of_system_means_by_hand() -> None:
    """System level = the coefficient of the per-system means (stories where either side is NaN dropped), a
    system with one story included; the stratified resamples redraw each system's stories in order."""
    systems = ["a", "a", "a", "b", "c", "c", "c", "c", "d", "d", "d"]
    m = np.array([0.1, 0.4, 0.3, 0.9, 0.5, 0.2, np.nan, 0.6, 0.8, 0.7, 0.75])
    h = np.array([2.0, 3.0, 3.0, 5.0, 3.0, 2.0, 4.0, np.nan, 4.0, 4.0, 5.0])
    mx = [np.mean([0.1, 0.4, 0.3]), 0.9, np.mean([0.5, 0.2]), np.mean([0.8, 0.7, 0.75])]
    hy = [np.mean([2.0, 3.0, 3.0]), 5.0, np.mean([3.0, 2.0]), np.mean([4.0, 4.0, 5.0])]
    for method in C.METHODS:
        out = C.system_correlation_ci(systems, m, h, method=method, n_resamples=5, seed=11)
        assert out["r"] == pytest.approx(_scipy(np.array(mx), np.array(hy), method), abs=1e-12)
        assert out["n"] == 4 and out["systems"]["c"] == {"metric": pytest.approx(0.35), "human": 2.5}
    keep = ~(np.isnan(m) | np.isnan(h))
    sys_kept = np.asarray(systems)[keep]
    groups = [np.flatnonzero(sys_kept == s) for s in "abcd"]
    boots = C._stratified_bootstrap(groups, m[keep], h[keep], "pearson", 5, 11)
    g = np.random.default_rng(11)
    for b in range(5):
        draws = [grp[g.integers(0, grp.size, grp.size)] for grp in groups]
        want = stats.pearsonr([m[keep][d].mean() for d in draws], [h[keep][d].mean() for d in draws])[0]
        assert boots[b] == pytest.approx(want, abs=1e-12)


def test_bootstrap_ci_covers_a_known_rho_and_is_reproducible() -> None:
    """Bivariate normal, rho = 0.5: the 95% percentile CIs of Pearson r, Spearman rho (6/pi asin(rho/2)) and
    Kendall tau (2/pi asin rho) cover the true value in about 95% of 60 samples; a seed gives the same CI."""
    truth = {"pearson": 0.5, "spearman": 6 / math.pi * math.asin(0.25), "kendall": 2 / math.pi * math.asin(0.5)}
    rng = np.random.default_rng(5)
    hits = dict.fromkeys(truth, 0)
    for rep in range(60):
        xy = rng.multivariate_normal([0, 0], [[1, 0.5], [0.5, 1]], size=60)
        for method, true in truth.items():
            low, high = C.correlation_ci(xy[:, 0], xy[:, 1], method=method, n_resamples=300, seed=rep)["ci"]
            hits[method] += low <= true <= high
    assert all(50 <= v <= 60 for v in hits.values()), hits
    once = C.correlation_ci(xy[:, 0], xy[:, 1], method="kendall", seed=9, n_resamples=100)
    assert C.correlation_ci(xy[:, 0], xy[:, 1], method="kendall", seed=9, n_resamples=100) == once
    assert once["ci"][0] > 0  # a clearly positive correlation: the whole CI is positive


def test_williams_test_on_hand_computed_cases() -> None:
    """Williams (1959) / Graham & Baldwin (2014, Eq. 1) by hand:
    r12 = 0.6, r13 = 0.4, r23 = 0.5, n = 20: K = 0.47, t = 0.2 sqrt(28.5) / sqrt(0.94 * 19/17 + 0.25 * 0.125)
    = 1.026529; r12 = 1 (the metric is the human score up to a linear map), r13 = r23 = 0.5, n = 10: K = 0,
    t = 0.5 sqrt(13.5) / sqrt(0.5625 * 0.125) = 4 sqrt(3); n = 3 and r23 = +-1 are undefined."""
    t = C.williams_test(0.6, 0.4, 0.5, 20)
    assert t["t"] == pytest.approx(1.0265290932, rel=1e-9) and t["df"] == 17.0
    assert t["p_one_sided"] == pytest.approx(stats.t.sf(1.0265290932, 17), rel=1e-8)
    assert t["p_two_sided"] == pytest.approx(2 * t["p_one_sided"], rel=1e-12)
    assert C.williams_test(1.0, 0.5, 0.5, 10)["t"] == pytest.approx(4 * math.sqrt(3), rel=1e-12)
    assert C.williams_test(-1.0, 0.5, -0.5, 10)["t"] == pytest.approx(-4 * math.sqrt(3), rel=1e-12)
    assert "needs 4" in C.williams_test(0.9, 0.1, 0.2, 3)["undefined"]
    assert "r_AB = 1" in C.williams_test(0.5, 0.5, 1.0, 10)["undefined"]
    assert "r_AB = -1" in C.williams_test(0.5, -0.5, -1.0, 10)["undefined"]


def test_mcnemar_equals_scipys_binomial_and_chi_square() -> None:
    """Exact p = scipy's two-sided binomtest(b, b + c, 1/2); chi-square with continuity correction from scipy's
    chi2; NaN rows dropped."""
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 50))
        a = (rng.random(n) < rng.random()).astype(float)
        b = (rng.random(n) < rng.random()).astype(float)
        a[rng.random(n) < 0.1] = np.nan
        keep = ~(np.isnan(a) | np.isnan(b))
        if not keep.any():
            continue
        right_a, right_b = a[keep].astype(bool), b[keep].astype(bool)
        bo, co = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
        got = mcnemar(a, b)
        assert (got["a_only"], got["b_only"], got["n"]) == (bo, co, int(keep.sum()))
        want = stats.binomtest(bo, bo + co, 0.5).pvalue if bo + co else 1.0
        assert got["p_exact"] == pytest.approx(want, rel=1e-12)
        if bo != co:
            assert got["p_chi2"] == pytest.approx(stats.chi2.sf((abs(bo - co) - 1) ** 2 / (bo + co), 1), rel=1e-12)


def _mean_score(values: np.ndarray) -> Score:
    return Score("m", float(values.mean()), [str(i) for i in range(values.size)], values, "m|test")


def test_randomisation_null_tying_the_observed_difference_is_a_tie_not_rounding() -> None:
    """Was wrong: two mean-scored systems differing in one item (every shuffle ties with the observed
    difference) got p = 0.65 or 0.73 from the last bits of the swapped sums (the exact answer under sacreBLEU's
    strict count is 1/(B+1), what sacreBLEU gives for BLEU on such systems); now ties within rounding are ties.
    The general case still equals an independent computation of sacreBLEU's rule."""
    rng = np.random.default_rng(7)
    for n in (15, 25, 40):
        a = rng.random(n)
        b = a.copy()
        b[0] += 1e-3
        for x, y in ((a, b), (b, a)):
            assert S.approximate_randomization(_mean_score(x), _mean_score(y), n_samples=400, seed=5).p_value == (
                pytest.approx(1 / 401)
            )
    a = rng.random(30)
    b = a + rng.normal(0, 0.1, 30)
    got = S.approximate_randomization(_mean_score(a), _mean_score(b), n_samples=500, seed=3).p_value
    mask = np.random.default_rng(3).integers(2, size=(500, 30), dtype=bool)
    null = np.abs(np.where(mask, a, b).mean(axis=1) - np.where(mask, b, a).mean(axis=1))
    assert got == pytest.approx((np.sum(null > abs(b.mean() - a.mean())) + 1) / 501)


def test_point_biserial_is_scipys_and_refuses_labels_other_than_0_and_1() -> None:
    """Was wrong: labels coded 1/2 were all read as "error present": r NaN and n_error = 6 for 4 stories; now
    one sentence. 0/1 (or bool) labels give scipy's r, for any unit of the scores."""
    with pytest.raises(InputError, match="0 \\(no error\\) or 1"):
        C.point_biserial(np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 1, 2]))
    want = stats.pointbiserialr([0, 1, 0, 1, 1], [1.0, 2, 3, 5, 4])
    for scale in (1.0, 1e300):
        got = C.point_biserial(np.array([1.0, 2, 3, 5, 4]) * scale, np.array([False, True, False, True, True]))
        assert got["r"] == pytest.approx(want[0], abs=1e-12) and got["p"] == pytest.approx(want[1], rel=1e-9)
        assert got["n_error"] == 3


def _textbook_alpha(data: np.ndarray, level: str) -> float:
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability": coincidences o_ck over the pairable
    units (each ordered pair of values in a unit with m_u values adds 1/(m_u - 1)), n_c = sum_k o_ck, and
    alpha = 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck; d = [c != k], (c - k)^2, or the ordinal
    (sum_{g=c..k} n_g - (n_c + n_k)/2)^2."""
    values = np.unique(data[~np.isnan(data)])
    where = {v: i for i, v in enumerate(values)}
    o = np.zeros((values.size, values.size))
    for unit in data.T:
        x = unit[~np.isnan(unit)]
        for i, j in itertools.permutations(range(x.size), 2):
            o[where[x[i]], where[x[j]]] += 1 / (x.size - 1)
    nc = o.sum(axis=1)
    d = np.zeros_like(o)
    for c, k in itertools.product(range(values.size), repeat=2):
        lo, hi = min(c, k), max(c, k)
        d[c, k] = {
            "nominal": float(c != k),
            "interval": (values[c] - values[k]) ** 2,
            "ordinal": (nc[lo : hi + 1].sum() - (nc[c] + nc[k]) / 2) ** 2,
        }[level]
    return float(1 - (nc.sum() - 1) * (o * d).sum() / (np.outer(nc, nc) * d).sum())


def test_krippendorff_alpha_equals_the_textbook_coincidence_computation() -> None:
    """The studio's alpha (the ``krippendorff`` package) equals the textbook computation for nominal, ordinal
    and interval data with missing values. Was wrong: when the only units judged twice all got one value
    (other values unpaired) it returned NaN with no reason; now None and why."""
    from vistkit.studio.analysis import alpha_with_reason

    rng = np.random.default_rng(8)
    checked = 0
    for _ in range(60):
        coders, units = int(rng.integers(2, 5)), int(rng.integers(3, 9))
        data = np.clip(rng.integers(1, 6, units) + rng.integers(-1, 2, (coders, units)), 1, 5).astype(float)
        data[rng.random((coders, units)) < 0.2] = np.nan
        triples = [(f"c{c}", u, data[c, u]) for c in range(coders) for u in range(units) if not np.isnan(data[c, u])]
        pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
        if np.unique(pairable[~np.isnan(pairable)]).size < 2:
            continue
        for level in ("nominal", "ordinal", "interval"):
            assert alpha_with_reason(triples, level=level)[0] == pytest.approx(_textbook_alpha(data, level), abs=1e-9)
            checked += 1
    assert checked > 100
    alpha, why = alpha_with_reason([("a", 1, 1.0), ("a", 2, 4.0), ("b", 2, 4.0), ("a", 3, 5.0)])
    assert alpha is None and why is not None and "judged twice is the same (4)" in why


def _likert(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "likert.csv"
    p.write_text("system,item,worker,focused\n" + body, encoding="utf-8")
    return p


def test_likert_cells_are_read_as_the_numbers_they_say_or_refused(tmp_path: Path) -> None:
    """"4", " 4 ", "4.0" and "4e0" are 4; an empty cell is missing (not 0); a 7 on a 1-5 scale and "four" are one
    sentence naming the line. Was wrong: "4_0" was read as 40 (Python's digit grouping; on a 0-100 scale a
    silent 40, on 1-5 a message calling the cell out of scale): now it is not a number."""
    table = read_likert(_likert(tmp_path, 'a,1,w1,"4"\na,1,w2, 4 \na,2,w1,4.0\na,2,w2,\na,3,w1,4e0\na,3,w2,2\n'))
    assert table.values[:, 0].tolist() == [4.0, 4.0, 3.0]
    for body, message in (
        ("a,1,w1,7\n", "line 2: rating 'focused' is '7', outside the scale 1-5"),
        ("a,1,w1,four\n", "line 2: column 'focused' must be a number, got 'four'"),
        ("a,1,w1,4_0\n", "line 2: column 'focused' must be a number, got '4_0'"),
    ):
        with pytest.raises(InputError, match=message):
            read_likert(_likert(tmp_path, body))
    with pytest.raises(InputError, match="must be a number, got '4_0'"):
        read_likert(_likert(tmp_path, "a,1,w1,4_0\n"), scale=(0.0, 100.0))


def test_likert_rows_with_a_blank_system_item_or_worker_are_refused(tmp_path: Path) -> None:
    """Was wrong: rows with an empty item cell were merged into one story '' (two different stories averaged
    into one silently), an empty system into system '', two empty worker cells reported as one worker judging
    twice; now each is one sentence naming the line and the empty cell."""
    for body, cell in (
        ("a,,w1,4\na,,w2,2\n", "item"),
        (",1,w1,4\n", "system"),
        ("a,1,,4\na,1,,5\n", "worker"),
    ):
        with pytest.raises(InputError, match=f"line 2: the {cell} cell is empty"):
            read_likert(_likert(tmp_path, body))


def test_system_level_and_williams_inputs_are_checked_in_one_sentence() -> None:
    """Was wrong: mismatched lengths at system level or in the Williams test were numpy IndexError/ValueError,
    a text score a ValueError, and an infinite score in the Williams test reported as "undefined (constant
    scores)"; now each is one sentence."""
    for call, message in (
        (lambda: C.system_correlation_ci(["a", "b"], [1, 2, 3], [1, 2, 3]), "2 system names for 3 stories"),
        (lambda: C.system_correlation_ci(list("abc"), [1, 2, 3], [1, 2]), "differ in length"),
        (lambda: C.system_correlation_ci(list("abcd"), ["x", 2, 3, 4], [1, 2, 3, 4]), "must be a sequence of numbers"),
        (lambda: C.compare_correlations([1, 2, 3, 4], [1, 2, 3], [1, 2, 3, 4]), "metric A 3"),
        (
            lambda: C.compare_correlations([1, 2, 3, 4, 5], [1, 2, 3, 5, 4], [1, 2, math.inf, 4, 5]),
            "metric B holds an infinite",
        ),
    ):
        with pytest.raises(InputError, match=message):
            call()


def test_resamples_that_leave_the_coefficient_undefined_are_counted_and_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was silent: with human scores 3, 3, 3, 4 a third of the resamples draw no 4 (coefficient undefined) and
    the CI was over the other two thirds without a word; now ``undefined_resamples`` counts them (the number of
    drawn rows holding no 4 or only 4s, by hand from the same draws) and the table says so under it."""
    from meta_dummies import dummy_metrics_registered

    from vistkit.cli import main

    x, y = np.array([2.0, 1, 3, 4]), np.array([3.0, 3, 3, 4])
    idx = np.concatenate(list(index_blocks(np.random.default_rng(12345), 4, 1000)))
    no_four = int((~(idx == 3).any(axis=1) | (idx == 3).all(axis=1)).sum())  # no 4 drawn, or only 4s
    for method in C.METHODS:
        out = C.correlation_ci(x, y, method=method, n_resamples=1000)
        assert (out["undefined_resamples"], out["n_resamples"]) == (no_four, 1000)
    assert "undefined_resamples" not in C.correlation_ci([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], n_resamples=1)
    table = tmp_path / "likert.csv"
    table.write_text("system,item,text,focused\na,1,one two,3\na,2,one,3\nb,3,one two three,3\nb,4,x y z w,4\n")
    with dummy_metrics_registered():
        code = main(["meta", "correlate", str(table), "-m", "meta-test-length", "--level", "story"])
    out = capsys.readouterr().out
    assert code == 0
    assert (
        f"note: meta-test-length / focused (story level): {no_four} of 1,000 bootstrap resamples leave pearson, "
        "spearman, kendall undefined" in out
    )


def test_the_table_names_the_kendall_variant_it_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was wrong: under ``--kendall c`` the table's title still said "Kendall = tau-b" above tau-c values; now it
    names the variant computed (and the value is scipy's tau-c)."""
    from meta_dummies import dummy_metrics_registered

    from vistkit.cli import main

    table = tmp_path / "likert.csv"
    table.write_text("system,item,text,focused\na,1,one two,3\na,2,one,2\nb,3,one two three,3\nb,4,x y z w,5\n")
    args = ["meta", "correlate", str(table), "-m", "meta-test-length", "--level", "story", "--kendall", "c"]
    with dummy_metrics_registered():
        code = main([*args, "-f", "csv", "--bootstrap", "10"])
        out = capsys.readouterr().out
        tau_c = next(float(r.split(",")[4]) for r in out.splitlines() if ",kendall," in r)
        assert code == 0 and tau_c == pytest.approx(stats.kendalltau([2, 1, 3, 4], [3, 2, 3, 5], variant="c")[0])
        code = main([*args, "--bootstrap", "10"])
    out = capsys.readouterr().out
    assert code == 0 and "(Kendall = tau-c)" in out and "tau-b" not in out


def test_system_level_williams_counts_systems_not_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was wrong: with 3 systems the system-level Williams test was n/a because "only 3 items" had scores (there
    were 6 stories); now it says "only 3 systems". The story-level test reports scipy's Pearson r of each metric
    and r_AB = -1 (a metric and its negation), for which it is undefined."""
    import json

    from meta_dummies import dummy_metrics_registered

    from vistkit.cli import main

    table = tmp_path / "likert.csv"
    table.write_text(
        "system,item,text,focused\na,1,one two,3\na,2,one,2\nb,3,one two three,3\nb,4,x y z w,5\n"
        "c,5,p q r s t,4\nc,6,p,1\n"
    )
    with dummy_metrics_registered():
        metrics = "meta-test-length,meta-test-shortness"
        code = main(["meta", "correlate", str(table), "-m", metrics, "-f", "json", "--bootstrap", "10"])
    tests = {w["level"]: w for w in json.loads(capsys.readouterr().out)["williams"]}
    assert code == 0 and tests["system"]["undefined"].startswith("only 3 systems with both metrics")
    story = tests["story"]
    lengths, human = np.array([2.0, 1, 3, 4, 5, 1]), np.array([3.0, 2, 3, 5, 4, 1])
    r12 = stats.pearsonr(human, lengths)[0]
    assert (story["r_a"], story["r_b"], story["r_ab"]) == pytest.approx((r12, -r12, -1.0))
    assert "r_AB = -1" in story["undefined"]  # shortness is length negated: nothing to test


def test_point_biserial_of_scores_differing_in_their_last_bits_is_exact() -> None:
    """Was wrong (the Pearson fix's sibling): scores 4, 4 + 1 ulp, 4 + 2 ulp, 4, 4 + 1 ulp against labels
    0, 1, 1, 0, 0 gave r = 0.5217 (scipy's pointbiserialr on the raw scores); the exact r is that of 0, 1, 2, 0, 1,
    0.7638. Now the scores are shifted and scaled exactly first."""
    s = np.array([4.0, 4.000000000000001, 4.000000000000002, 4.0, 4.000000000000001])
    labels = np.array([0.0, 1, 1, 0, 0])
    want = stats.pearsonr(labels, [0.0, 1, 2, 0, 1])
    got = C.point_biserial(s, labels)
    assert got["r"] == pytest.approx(want[0], abs=1e-15) and got["p"] == pytest.approx(want[1], rel=1e-12)


def test_mcnemar_equals_statsmodels_golden_numbers() -> None:
    """statsmodels 0.15 ``mcnemar(table, exact=True)`` and ``exact=False, correction=True`` (run in a throwaway
    venv; statsmodels is no dependency) on b, c = (5, 12), (0, 7), (13, 2): the same p-values and statistics."""
    golden = {
        (5, 12): (0.143463134765625, 2.1176470588235294, 0.1456100953968629),
        (0, 7): (0.015625, 5.142857142857143, 0.02334220201289086),
        (13, 2): (0.00738525390625, 6.666666666666667, 0.009823274507519235),
    }
    for (b, c), (p_exact, statistic, p_chi2) in golden.items():
        a = np.array([1.0] * b + [0.0] * c + [1.0] * 3 + [0.0] * 4)
        other = np.array([0.0] * b + [1.0] * c + [1.0] * 3 + [0.0] * 4)
        got = mcnemar(a, other)
        assert got["p_exact"] == pytest.approx(p_exact, rel=1e-12)
        assert got["statistic"] == pytest.approx(statistic, rel=1e-12)
        assert got["p_chi2"] == pytest.approx(p_chi2, rel=1e-10)


@pytest.mark.parametrize("test", ["ar", "bs"])
def test_paired_tests_on_systems_differing_in_one_sentence_equal_sacrebleu(
    test: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tie rule on sacreBLEU's own statistics: two systems that differ in one sentence get sacreBLEU's
    PairedTest p-value for the same seed (AR: 1/(B+1), every shuffle ties with the observed difference)."""
    from test_stats import _sacrebleu_paired, bleu_score, synthetic_corpus

    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    a, b, refs = synthetic_corpus(n=40, seed=3)
    one_off = [next(y for x, y in zip(a, b, strict=True) if x != y), *a[1:]]
    theirs = _sacrebleu_paired(test, a, one_off, refs, 500)
    ours = S.paired_test(bleu_score(a, refs), bleu_score(one_off, refs), test=test, n_samples=500, seed=12345)
    assert ours.p_value == pytest.approx(theirs, abs=1e-12)
    if test == "ar":
        assert theirs == pytest.approx(1 / 501)
