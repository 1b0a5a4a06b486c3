"""Bootstrap CIs and paired significance tests (`vistkit.scores.stats`), checked against sacreBLEU's own procedures,
scipy's bootstrap and exact permutation tests.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story
from vistkit.errors import InputError
from vistkit.metrics.base import Score, mean_score
from vistkit.metrics.sacrebleu_bleu import SacreBleu
from vistkit.scores import stats

VOCAB = (
    "the a we went to park beach party family friends had fun great day at and then it was time home dog cat "
    "played ate food cake birthday smiled happy sun sky water boat walked long"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n)) + " ."


def synthetic_corpus(n: int = 60, seed: int = 0) -> tuple[list[str], list[str], list[list[str]]]:
    """Two systems (B is A with some words changed, so they differ a little), 1-3 references per item."""
    rng = random.Random(seed)
    refs = [[_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(1, 3))] for _ in range(n)]
    sys_a: list[str] = []
    sys_b: list[str] = []
    for rs in refs:
        words = rs[0].split()
        a = [w if rng.random() < 0.6 else rng.choice(VOCAB) for w in words]
        b = [w if rng.random() < 0.7 else rng.choice(VOCAB) for w in a]
        sys_a.append(" ".join(a))
        sys_b.append(" ".join(b))
    return sys_a, sys_b, refs


def bleu_score(hyps: list[str], refs: list[list[str]]) -> Score:
    ids = [f"s{i}" for i in range(len(hyps))]
    h = [Story(i, t, photo_ids=(i,)) for i, t in zip(ids, hyps, strict=True)]
    r = [
        Story(f"{i}-r{j}", t, photo_ids=(i,))
        for i, rs in zip(ids, refs, strict=True)
        for j, t in enumerate(rs)
    ]
    return SacreBleu().score(h, r)


def ref_streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


# ------------------------------------------------------------------------------------------ against sacreBLEU
def test_bootstrap_matches_sacrebleu_corpus_score_ci() -> None:
    """Same seed, same draws: the 2.5/97.5 order statistics of our bootstrap distribution give sacreBLEU's
    own CI half-width (``BLEU().corpus_score(..., n_bootstrap=1000)``) and bootstrap mean."""
    from sacrebleu.metrics import BLEU

    a, _, refs = synthetic_corpus()
    ours = bleu_score(a, refs)
    theirs = BLEU().corpus_score(
        a, ref_streams(refs), n_bootstrap=1000
    )  # seed 12345 (SACREBLEU_SEED default)
    assert ours.corpus == pytest.approx(theirs.score, abs=1e-12)
    dist = np.sort(stats.bootstrap_distribution(ours, n_bootstrap=1000, seed=12345))
    lo, hi = dist[1000 // 40], dist[1000 - 1000 // 40 - 1]
    assert 0.5 * (hi - lo) == pytest.approx(theirs._ci, rel=1e-7)  # they sum float32 stats
    assert dist.mean() == pytest.approx(theirs._mean, rel=1e-7)
    ci = stats.bootstrap_ci(ours, confidence=0.95, n_bootstrap=1000, seed=12345)
    assert ci.low <= ours.corpus <= ci.high
    assert ci.low == pytest.approx(np.quantile(dist, 0.025)) and ci.high == pytest.approx(
        np.quantile(dist, 0.975)
    )


def _sacrebleu_paired(test: str, a: list[str], b: list[str], refs: list[list[str]], n: int) -> float:
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    pt = PairedTest(
        [("base", a), ("sys", b)], {"BLEU": BLEU()}, ref_streams(refs), test_type=test, n_samples=n
    )
    _, scores = pt()
    return float(scores["BLEU"][1].p_value)


@pytest.mark.parametrize(("test", "n"), [("bs", 1000), ("ar", 2000)])
def test_paired_tests_equal_sacrebleu_with_the_same_seed(
    test: str, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our paired bootstrap / approximate randomisation give sacreBLEU's p-value exactly for the same seed."""
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    a, b, refs = synthetic_corpus(n=80, seed=3)
    theirs = _sacrebleu_paired(test, a, b, refs, n)
    ours = stats.paired_test(bleu_score(a, refs), bleu_score(b, refs), test=test, n_samples=n, seed=12345)
    assert 0.0 < theirs < 1.0
    assert ours.p_value == pytest.approx(theirs, abs=1e-12)
    assert ours.n_items == 80 and ours.test == test


@pytest.mark.parametrize(("test", "n"), [("bs", 2000), ("ar", 4000)])
def test_paired_tests_agree_with_sacrebleu_across_seeds(
    test: str, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Different seeds: the p-values agree within Monte-Carlo error (4 standard errors of both estimates)."""
    monkeypatch.setenv("SACREBLEU_SEED", "777")
    a, b, refs = synthetic_corpus(n=50, seed=11)
    theirs = _sacrebleu_paired(test, a, b, refs, n)
    ours = stats.paired_test(
        bleu_score(a, refs), bleu_score(b, refs), test=test, n_samples=n, seed=4242
    ).p_value
    se = math.sqrt(max(theirs * (1 - theirs), 1e-4) * 2 / n)
    assert abs(ours - theirs) < 4 * se + 2 / n


def test_additive_fast_path_equals_the_generic_row_path() -> None:
    """The matrix-product path (``from_sums``) and the generic per-resample ``corpus_from_stats`` agree."""
    from dataclasses import replace

    a, b, refs = synthetic_corpus(n=70, seed=8)
    fast_a, fast_b = bleu_score(a, refs), bleu_score(b, refs)
    assert callable(getattr(fast_a.corpus_from_stats, "from_sums", None))
    metric = SacreBleu()
    slow_a = replace(fast_a, corpus_from_stats=lambda rows: metric.corpus_from_stats(rows))
    slow_b = replace(fast_b, corpus_from_stats=lambda rows: metric.corpus_from_stats(rows))
    for test in ("bs", "ar"):
        fast = stats.paired_test(fast_a, fast_b, test=test, n_samples=300, seed=3).p_value
        slow = stats.paired_test(slow_a, slow_b, test=test, n_samples=300, seed=3).p_value
        assert fast == slow
    np.testing.assert_allclose(
        stats.bootstrap_distribution(fast_a, n_bootstrap=200, seed=1),
        stats.bootstrap_distribution(slow_a, n_bootstrap=200, seed=1),
        atol=1e-9,
    )


# ------------------------------------------------------------------------------------------ mean-type scores
def _mean(values: list[float], prefix: str = "i") -> Score:
    return mean_score("toy", [f"{prefix}{k}" for k in range(len(values))], values, "toy|vistkit:0")


def test_percentile_ci_agrees_with_scipy_bootstrap() -> None:
    from scipy.stats import bootstrap

    values = np.random.default_rng(0).normal(0.5, 0.2, size=200)
    ci = stats.bootstrap_ci(_mean(list(values)), confidence=0.9, n_bootstrap=4000, seed=1)
    ref = bootstrap(
        (values,), np.mean, confidence_level=0.9, n_resamples=4000, method="percentile", random_state=2
    )
    se = values.std() / math.sqrt(values.size)
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * se)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * se)


def test_ci_of_constant_scores_is_a_point_and_nan_items_are_ignored() -> None:
    ci = stats.bootstrap_ci(_mean([0.3, 0.3, math.nan, 0.3]), n_bootstrap=200)
    assert ci.low == pytest.approx(0.3) and ci.high == pytest.approx(0.3)


def test_ar_on_means_matches_the_exact_permutation_test() -> None:
    """With n = 10 items all 2^10 swaps can be enumerated: AR with many trials estimates that exact p."""
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 1, 10)
    b = a + rng.normal(0.15, 0.2, 10)
    observed = abs(b.mean() - a.mean())
    count = 0
    for flips in itertools.product([False, True], repeat=10):
        m = np.array(flips)
        x, y = np.where(m, a, b), np.where(m, b, a)
        count += abs(x.mean() - y.mean()) > observed + 1e-12
    exact = count / 2**10
    res = stats.approximate_randomization(_mean(list(a)), _mean(list(b)), n_samples=20000, seed=9)
    assert res.p_value == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 20000) + 1e-3)
    assert res.difference == pytest.approx(b.mean() - a.mean())


def test_paired_tests_use_only_shared_defined_items() -> None:
    base = mean_score("toy", ["x", "y", "z", "w"], [0.1, math.nan, 0.3, 0.4], "s")
    system = mean_score("toy", ["z", "x", "y", "v"], [0.5, 0.9, 0.2, 0.0], "s")
    res = stats.paired_bootstrap(base, system, n_samples=100)
    assert res.n_items == 2  # x and z: y undefined in the baseline, w and v unshared
    assert res.baseline == pytest.approx(0.2) and res.system == pytest.approx(0.7)


def test_identical_systems_are_not_significant() -> None:
    s = _mean([0.1, 0.5, 0.7, 0.2])
    assert stats.paired_bootstrap(s, s, n_samples=100).p_value == 1.0
    assert stats.approximate_randomization(s, s, n_samples=100).p_value == 1.0


def test_clear_difference_is_significant_and_marked() -> None:
    a = _mean([0.1 + 0.01 * k for k in range(40)])
    b = _mean([0.5 + 0.01 * k for k in range(40)])
    for test in ("bs", "ar"):
        res = stats.paired_test(a, b, test=test, n_samples=500)
        assert res.p_value == pytest.approx(1 / 501)
        assert stats.significance_mark(res.p_value) == "**"
    assert stats.significance_mark(0.03) == "*" and stats.significance_mark(0.2) == ""


def test_bad_arguments_raise_input_errors() -> None:
    s = _mean([0.1, 0.2])
    with pytest.raises(InputError):
        stats.bootstrap_ci(s, confidence=1.5)
    with pytest.raises(InputError):
        stats.paired_test(s, s, test="t-test")
    with pytest.raises(InputError):
        stats.paired_test(s, _mean([0.1], prefix="other"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=30), st.integers(0, 2**31 - 1))
def test_ci_is_ordered_and_inside_the_observed_range(values: list[float], seed: int) -> None:
    ci = stats.bootstrap_ci(_mean(values), n_bootstrap=50, seed=seed)
    assert min(values) - 1e-12 <= ci.low <= ci.high <= max(values) + 1e-12


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=20), st.integers(0, 1000))
def test_p_values_are_symmetric_in_the_two_systems(pairs: list[tuple[float, float]], seed: int) -> None:
    a = _mean([p[0] for p in pairs])
    b = _mean([p[1] for p in pairs])
    for test in ("bs", "ar"):
        p1 = stats.paired_test(a, b, test=test, n_samples=50, seed=seed).p_value
        p2 = stats.paired_test(b, a, test=test, n_samples=50, seed=seed).p_value
        assert 0.0 < p1 <= 1.0
        assert p1 == pytest.approx(p2)
