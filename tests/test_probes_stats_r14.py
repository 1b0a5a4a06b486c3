"""Probes of round 14 (second wave) on the statistics behind reports: correlation p-values, bootstrap CIs and
paired significance tests (`vistkit.meta.correlation`, `vistkit.meta.significance`)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from vistkit.meta.correlation import correlation, system_correlation_ci


def _permutation_p(x: list[float], y: list[float], variant: str) -> float:
    """Two-sided permutation p of Kendall's tau over every ordering of x against y (twice the smaller tail), tau
    from its definition: (concordant - discordant) / sqrt((n0 - ties in x)(n0 - ties in y)) for tau-b,
    2 (concordant - discordant) / (n^2 (m - 1) / m) for tau-c (n0 = n(n - 1)/2, m the fewer distinct values)."""
    n, xa, ya = len(x), np.array(x), np.array(y)
    perms = np.array(list(itertools.permutations(range(n))))
    s = np.zeros(len(perms))
    for i, j in itertools.combinations(range(n), 2):
        s += np.sign(xa[perms[:, i]] - xa[perms[:, j]]) * np.sign(ya[i] - ya[j])
    if variant == "b":
        n0 = n * (n - 1) / 2
        ties = [sum(c * (c - 1) / 2 for c in np.unique(v, return_counts=True)[1]) for v in (xa, ya)]
        tau = s / np.sqrt((n0 - ties[0]) * (n0 - ties[1]))
    else:
        m = min(np.unique(xa).size, np.unique(ya).size)
        tau = 2 * s / (n * n * (m - 1) / m)
    observed = stats.kendalltau(x, y, variant=variant)[0]
    assert tau[0] == pytest.approx(observed)  # the identity ordering comes first
    return float(min(1.0, 2 * min(np.mean(tau <= observed + 1e-9), np.mean(tau >= observed - 1e-9))))


TIED = [
    ([1.0, 2.0, 3.0], [1.0, 2.0, 2.0]),  # scipy's asymptotic p: 0.22; exact: 2/3
    ([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 3.0]),  # 0.071; exact 1/6
    ([1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 2.0, 4.0, 5.0]),
    ([1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
    ([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], [2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0]),
    ([1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0, 6.0, 7.0], [2.0, 1.0, 3.0, 3.0, 5.0, 4.0, 4.0, 7.0, 6.0]),
]


@pytest.mark.parametrize(("x", "y"), TIED)
@pytest.mark.parametrize("method", ["kendall", "kendall_c"])
def test_kendall_p_with_ties_among_few_systems_is_exact(x: list[float], y: list[float], method: str) -> None:
    """Kendall's p with a tie among 3-9 pairs (a system-level correlation whose means tie) was scipy's normal
    approximation, far below the exact p (3 systems: 0.22 where every ordering gives 2/3; 4 systems: 0.071 where
    it is 1/6), so a ranking of a handful of systems looked significant; it is now the permutation p, as
    Spearman's is (and as scipy's Kendall p already is without ties)."""
    tau, p = correlation(x, y, method=method)
    variant = "c" if method == "kendall_c" else "b"
    assert tau == pytest.approx(stats.kendalltau(x, y, variant=variant)[0])
    assert p == pytest.approx(_permutation_p(x, y, variant), abs=1e-12)


@pytest.mark.parametrize("n", range(3, 10))
def test_kendall_p_without_ties_is_still_scipys_exact_p(n: int) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.permutation(n).astype(float), rng.permutation(n).astype(float)
    for method, variant in (("kendall", "b"), ("kendall_c", "c")):
        assert correlation(x, y, method=method)[1] == pytest.approx(
            stats.kendalltau(x, y, variant=variant, method="exact")[1], abs=1e-12
        )


def test_system_level_kendall_p_with_tied_means_is_exact() -> None:
    """The same through `system_correlation_ci` (what `meta correlate --level system` prints)."""
    systems = ["a", "a", "b", "b", "c", "c", "d", "d"]
    metric = [0.1, 0.3, 0.4, 0.4, 0.5, 0.7, 0.8, 0.8]
    human = [2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 4.0, 5.0]  # means 2, 3, 3, 4.5: a tie
    out = system_correlation_ci(systems, metric, human, method="kendall", n_resamples=50, seed=1)
    means_m, means_h = [0.2, 0.4, 0.6, 0.8], [2.0, 3.0, 3.0, 4.5]
    assert out["p"] == pytest.approx(_permutation_p(means_m, means_h, "b"), abs=1e-12)


BAD_CORRECTNESS = [
    ([1.0, 0.0, 1.0], [1.0, 0.0], "differ in length"),
    ([1.0, 0.0, 0.5, 0.0], [1.0, 0.0, 1.0, 1.0], "0 (wrong) or 1 (right)"),  # half credit for a tie
    ([1.0, 0.0, 2.0, 0.0], [1.0, 0.0, 1.0, 1.0], "0 (wrong) or 1 (right)"),
    ([1.0, 0.0, float("inf")], [1.0, 0.0, 1.0], "0 (wrong) or 1 (right)"),
    ("101", "011", "sequence"),
    (None, [1.0], "sequence"),
    ([1.0, 0.0, 1.0], [[1.0, 0.0, 1.0]], "one sequence"),
]


@pytest.mark.parametrize(("a", "b", "said"), BAD_CORRECTNESS)
@pytest.mark.parametrize("test", ["mcnemar", "paired_bootstrap_accuracy"])
def test_paired_tests_refuse_what_is_no_paired_correctness(a: object, b: object, said: str, test: str) -> None:
    """McNemar and the paired bootstrap of pair accuracy took any array: lists of different lengths were numpy's
    "operands could not be broadcast", None or a nested list an IndexError, and a 0.5 (half credit for a tie), a 2
    or a string "101" was silently one right answer (accuracy 0.75 for [1, 0, 0.5, 1]); each is an InputError."""
    from vistkit.errors import InputError
    from vistkit.meta import significance

    with pytest.raises(InputError, match=re.escape(said)):
        getattr(significance, test)(a, b)


def test_paired_tests_still_take_booleans_and_nan() -> None:
    from vistkit.meta.significance import mcnemar, paired_bootstrap_accuracy

    a = np.array([True, False, True, True])
    b = [1.0, 1.0, float("nan"), 0.0]
    out = mcnemar(a, b)
    assert (out["a_only"], out["b_only"], out["n"]) == (1, 1, 3)
    assert paired_bootstrap_accuracy(a, b, n_resamples=50)["n"] == 3


@pytest.mark.parametrize("n", [1, 2, 5])
def test_a_paired_bootstrap_without_variation_gives_no_p(n: int) -> None:
    """When every counted pair is one A gets right and B wrong (or the reverse), every resample is the table
    itself, so the null-shifted bootstrap p was its floor 1/(B+1) = 0.001: "significant" from one pair, where
    McNemar's exact p is 1. There is no variation to resample: the p is now n/a with the reason, the CI stays."""
    from vistkit.meta.significance import comparison_row, mcnemar, paired_bootstrap_accuracy, pairwise_comparisons

    out = paired_bootstrap_accuracy([0.0] * n, [1.0] * n, n_resamples=200)
    assert np.isnan(out["p"]) and "McNemar" in out["p_undefined"]
    assert out["delta"] == -1.0 and out["ci"] == [-1.0, -1.0]
    assert mcnemar([0.0] * n, [1.0] * n)["p_exact"] == pytest.approx(min(1.0, 2 * 0.5**n))
    (comparison,) = pairwise_comparisons(["a", "b"], {"a": [1.0] * n, "b": [0.0] * n}, n_resamples=50, seed=1)
    assert np.isnan(comparison_row(comparison)[-1])


def test_a_paired_bootstrap_with_equal_metrics_or_variation_keeps_its_p() -> None:
    from vistkit.meta.significance import paired_bootstrap_accuracy

    same = paired_bootstrap_accuracy([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], n_resamples=100)
    assert same["p"] == 1.0 and "p_undefined" not in same
    mixed = paired_bootstrap_accuracy([1.0] * 30 + [0.0] * 10, [0.0] * 30 + [0.0] * 10, n_resamples=500, seed=3)
    assert 0 < mixed["p"] < 0.01 and "p_undefined" not in mixed


def test_meta_correlate_prints_the_exact_kendall_p_of_tied_systems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: 4 systems whose mean ratings tie (1, 2, 3, 3) against word counts 1..4: Kendall's p was
    0.071 (normal approximation); every ordering gives 1/6."""
    from meta_dummies import dummy_metrics_registered

    from vistkit.cli import main

    path = tmp_path / "likert.csv"
    path.write_text(
        "system,item,worker,quality,text\na,i1,w1,1,w\nb,i1,w1,2,w w\nc,i1,w1,3,w w w\nd,i1,w1,3,w w w w\n",
        encoding="utf-8",
    )
    with dummy_metrics_registered():
        capsys.readouterr()
        code = main(["meta", "correlate", str(path), "-m", "meta-test-length", "-f", "json", "--bootstrap", "100"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["correlations"]
    kendall = [r for r in rows if r["method"] == "kendall"]
    assert {r["level"] for r in kendall} == {"story", "system"}
    for r in kendall:
        assert r["p"] == pytest.approx(1 / 6)


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall", "kendall_c"])
def test_a_system_level_ci_of_an_undefined_r_is_undefined_too(method: str) -> None:
    """Three systems whose mean ratings are all 3 have no system-level r (n/a, "the mean human scores are all 3"),
    but the CI beside it was [-0.98, 0.98]: resampled stories move the means off 3, so the resamples had an r the
    table does not. A CI is of the estimate; with none it is n/a, as at story level (where a constant side is
    constant in every resample)."""
    from vistkit.meta.correlation import correlation_ci

    systems = ["a", "a", "b", "b", "c", "c"]
    metric, human = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 4.0, 3.0, 3.0, 1.0, 5.0]
    out = system_correlation_ci(systems, metric, human, method=method, n_resamples=200, seed=1)
    assert np.isnan(out["r"]) and out["undefined"] == "the mean human scores are all 3"
    assert np.isnan(out["ci"]).all() and "undefined_resamples" not in out
    story = correlation_ci(metric, [3.0] * 6, method=method, n_resamples=200)
    assert np.isnan(story["r"]) and np.isnan(story["ci"]).all()


HUGE = 1.7e308  # finite; twice it is not


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall", "kendall_c"])
def test_scores_near_the_float_limit_correlate_without_overflow(method: str) -> None:
    """Finite scores near the top of the float range: a system's mean summed them to infinity, so the system level
    stopped with "x (the metric scores) holds an infinite value" (the user gave none) after numpy's raw "overflow
    encountered in reduce"; Kendall's concordance signs subtracted them (an overflow warning, exact p included).
    Means are now taken of the scores scaled by a power of two (exact), signs by comparison."""
    import warnings

    from vistkit.meta.correlation import correlation_ci, system_means

    x = [HUGE, -HUGE, 0.0, 1.0, 1.0, HUGE]
    y = [1.0, 2.0, 3.0, 3.0, 4.0, 6.0]
    systems = ["a", "a", "b", "b", "c", "c"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        story = correlation_ci(x, y, method=method, n_resamples=100, seed=1)
        system = system_correlation_ci(systems, x, y, method=method, n_resamples=100, seed=1)
        means = system_means(systems, np.array(x))
    assert story["r"] == pytest.approx(correlation([v / 4 for v in x], y, method=method)[0])
    assert means == {"a": 0.0, "b": 0.5, "c": pytest.approx(HUGE / 2 + 0.5)}
    assert [system["systems"][s]["metric"] for s in "abc"] == [0.0, 0.5, pytest.approx(HUGE / 2)]
    scaled = system_correlation_ci(systems, [v / 4 for v in x], y, method=method, n_resamples=100, seed=1)
    assert system["r"] == pytest.approx(scaled["r"]) and system["ci"] == pytest.approx(scaled["ci"], nan_ok=True)
