"""Story-pair assessments (Vrank): accuracy with ties wrong, agreement subsets, pair kinds, gap buckets,
machine-beats-reference, the Reference Absent Algorithm, swap invariance, and accuracy significance tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from meta_dummies import FIX, load_dummy_metrics
from scipy import stats

from vistkit.data.readers import read_stories
from vistkit.meta.human import StoryPair, read_pairs
from vistkit.meta.pairs import (
    accuracy_by_gap,
    accuracy_by_kind,
    beats_reference,
    pair_accuracy,
    pair_correct,
)
from vistkit.meta.scoring import PairScores, score_pairs
from vistkit.meta.significance import mcnemar, paired_bootstrap_accuracy

D = load_dummy_metrics()


@pytest.fixture(scope="module")
def vhed() -> list[StoryPair]:
    return read_pairs(FIX / "vhed_small.csv")


@pytest.fixture(scope="module")
def length_scores(vhed: list[StoryPair]) -> PairScores:
    return score_pairs(D.MetaLength(), vhed)


def test_length_metric_scores_are_word_counts(length_scores: PairScores) -> None:
    assert length_scores.score_1.tolist() == [5, 2, 3, 6, 4, 3, 1, 4]
    assert length_scores.score_2.tolist() == [3, 4, 3, 1, 2, 7, 2, 5]


def test_pair_accuracy_hand_computed(vhed: list[StoryPair], length_scores: PairScores) -> None:
    # correct: pairs 1, 5, 6, 8; wrong: 2 (prefers the worse), 3 (tie -> wrong), 4; pair 7 has zero gap
    correct = pair_correct(length_scores, vhed)
    assert np.isnan(correct[6])
    assert correct[[0, 1, 2, 3, 4, 5, 7]].tolist() == [1, 0, 0, 0, 1, 1, 1]
    acc = pair_accuracy(length_scores, vhed)
    assert acc["all"] == {"accuracy": pytest.approx(4 / 7), "n": 7, "correct": 4}
    assert acc["omega_3"]["accuracy"] == pytest.approx(1 / 2) and acc["omega_3"]["n"] == 2
    assert acc["omega_4"]["accuracy"] == pytest.approx(1 / 2)
    assert acc["omega_5"]["accuracy"] == pytest.approx(2 / 3)
    assert acc["omega_4_5"]["accuracy"] == pytest.approx(3 / 5)
    kinds = accuracy_by_kind(length_scores, vhed)
    assert kinds["reference-machine"]["accuracy"] == pytest.approx(2 / 3)
    assert kinds["machine-machine"]["accuracy"] == pytest.approx(2 / 4)


def test_lower_is_better_metric_is_turned_around(vhed: list[StoryPair]) -> None:
    short = score_pairs(D.MetaShortness(), vhed)
    acc = pair_accuracy(short, vhed)["all"]
    # the opposite order on every non-tied pair: correct 2, 4 -> 2 of 7 (pair 3 stays a wrong tie)
    assert acc["accuracy"] == pytest.approx(2 / 7)


def test_accuracy_by_gap_buckets(vhed: list[StoryPair], length_scores: PairScores) -> None:
    buckets = accuracy_by_gap(length_scores, vhed, edges=(0, 0.25, 0.5, 1))
    assert [b["n"] for b in buckets] == [3, 3, 1]
    assert [b["accuracy"] for b in buckets] == pytest.approx([2 / 3, 2 / 3, 0.0])
    raw = accuracy_by_gap(length_scores, vhed, edges=(0, 1.5, 3), normalised=False)
    # raw gaps 1.6 1.2 1.6 2.8 1.0 1.4 1.0 -> [0,1.5]: pairs 2 5 6 8 ; (1.5,3]: 1 3 4
    assert [b["n"] for b in raw] == [4, 3]
    assert [b["accuracy"] for b in raw] == pytest.approx([3 / 4, 1 / 3])


def test_beats_reference(vhed: list[StoryPair], length_scores: PairScores) -> None:
    people = beats_reference(None, vhed)
    assert people["m1"] == {"wins": 0, "ties": 0, "n": 2, "ratio": 0.0, "tie_ratio": 0.0}
    assert people["m2"]["ratio"] == 1.0 and people["m2"]["n"] == 1
    metric = beats_reference(length_scores, vhed)
    assert metric["m1"]["ratio"] == 0.0 and metric["m2"]["ratio"] == 0.0


def test_reference_absent_algorithm_hand_computed() -> None:
    pairs = read_pairs(FIX / "ref_pairs_small.csv")
    refs = read_stories(FIX / "references_small.jsonl")
    on = score_pairs(D.MetaOverlap(), pairs, references=refs, key="sequence", reference_absent=True)
    # pair 1: the human story "a b c" is removed from BOTH stories' references -> both 0 -> tie
    assert on.score_1.tolist() == pytest.approx([0.0, 2 / 3, 2 / 3])
    assert on.score_2.tolist() == pytest.approx([0.0, 3 / 4, 1.0])
    assert "refabsent:yes" in on.signature
    assert pair_accuracy(on, pairs)["all"]["accuracy"] == pytest.approx(1 / 3)
    off = score_pairs(D.MetaOverlap(), pairs, references=refs, key="sequence", reference_absent=False)
    assert off.score_1.tolist() == pytest.approx([1.0, 2 / 3, 2 / 3])  # the human story scored against itself
    assert off.score_2[0] == pytest.approx(2 / 3)
    assert pair_accuracy(off, pairs)["all"]["accuracy"] == pytest.approx(2 / 3)


def test_rounds_padded_for_corpus_dependent_metrics() -> None:
    pairs = read_pairs(FIX / "ref_pairs_small.csv")
    refs = read_stories(FIX / "references_small.jsonl")
    res = score_pairs(D.MetaCorpusLength(), pairs, references=refs, key="sequence")
    # 4 units of sequence 1-2-3 and 2 of 4-5-6 need 4 calls; padded, every call holds both keys (N = 2)
    assert res.score_1.tolist() == pytest.approx([3 / 2, 3 / 2, 3 / 2])
    assert res.score_2.tolist() == pytest.approx([3 / 2, 4 / 2, 3 / 2])


def test_reference_based_metric_without_references_is_an_error() -> None:
    from vistkit.errors import InputError

    with pytest.raises(InputError, match="--references"):
        score_pairs(D.MetaOverlap(), read_pairs(FIX / "ref_pairs_small.csv"))


def test_swap_invariance_on_fixture(vhed: list[StoryPair], length_scores: PairScores) -> None:
    swapped = [p.swapped() for p in vhed]
    again = score_pairs(D.MetaLength(), swapped)
    assert pair_accuracy(again, swapped) == pair_accuracy(length_scores, vhed)
    assert pair_accuracy(length_scores.swapped(), swapped) == pair_accuracy(length_scores, vhed)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-3, 3),
            st.integers(0, 4),
            st.integers(0, 4),
            st.sampled_from([3, 4, 5]),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_swap_invariance_property(rows: list[tuple[int, int, int, int, bool]]) -> None:
    pairs = [
        StoryPair(str(i), "s", (), "a", "b", "gt" if ref else "m1", "m2", float(g), agreement=a, n_stories=5)
        for i, (g, _, _, a, ref) in enumerate(rows)
    ]
    scores = PairScores(
        "x", "x", True, np.array([r[1] for r in rows], float), np.array([r[2] for r in rows], float), {}
    )
    swapped = [p.swapped() for p in pairs]
    assert pair_accuracy(scores.swapped(), swapped) == pair_accuracy(scores, pairs)
    assert accuracy_by_kind(scores.swapped(), swapped) == accuracy_by_kind(scores, pairs)
    assert accuracy_by_gap(scores.swapped(), swapped) == accuracy_by_gap(scores, pairs)
    assert beats_reference(scores.swapped(), swapped) == beats_reference(scores, pairs)


def test_mcnemar_hand_computed() -> None:
    a = np.array([1, 1, 1, 1, 1, 0, 0, 1, 0, 1], float)
    b = np.array([0, 0, 0, 0, 1, 1, 0, 1, 0, 1], float)
    res = mcnemar(a, b)
    # discordant: A-only 4, B-only 1 -> exact p = 2 * P[Bin(5, .5) <= 1] = 2 * 6/32 = 0.375
    assert (res["a_only"], res["b_only"]) == (4, 1)
    assert res["p_exact"] == pytest.approx(0.375)
    # chi-square with continuity correction: (|4-1|-1)^2 / 5 = 0.8
    assert res["statistic"] == pytest.approx(0.8)
    assert res["p_chi2"] == pytest.approx(stats.chi2.sf(0.8, 1))
    assert res["p_exact"] == pytest.approx(stats.binomtest(1, 5, 0.5).pvalue)
    # NaN rows (pairs that do not count) are dropped
    a2 = np.append(a, math.nan)
    b2 = np.append(b, 1.0)
    assert mcnemar(a2, b2)["n"] == 10


def test_paired_bootstrap_accuracy() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.8).astype(float)
    b = (rng.random(400) < 0.5).astype(float)
    res = paired_bootstrap_accuracy(a, b, n_resamples=500, seed=1)
    assert res["delta"] == pytest.approx(a.mean() - b.mean())
    assert res["p"] < 0.01 and res["ci"][0] < res["delta"] < res["ci"][1]
    same = paired_bootstrap_accuracy(a, a, n_resamples=200, seed=1)
    assert same["delta"] == 0.0 and same["p"] == 1.0


def test_swap_invariance_through_a_file(tmp_path: Path, vhed: list[StoryPair]) -> None:
    from vistkit.meta.human import write_pairs

    write_pairs([p.swapped() for p in vhed], tmp_path / "swapped.csv")
    text = (tmp_path / "swapped.csv").read_text().splitlines()
    assert text[1].startswith("a b c,a b c d e,1.6,")  # sentences exchanged, label negated
    swapped = read_pairs(tmp_path / "swapped.csv")
    acc = pair_accuracy(score_pairs(D.MetaLength(), swapped), swapped)
    assert acc == pair_accuracy(score_pairs(D.MetaLength(), vhed), vhed)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(1, 6), st.randoms(use_true_random=False))
def test_rankings_to_pairs_properties(n: int, k: int, rnd: Any) -> None:
    from vistkit.meta.human import pairs_from_rankings

    keys = [f"s{i}" for i in range(n)]
    ranks = {}
    for w in range(k):
        perm = list(range(1, n + 1))
        rnd.shuffle(perm)
        ranks[f"w{w}"] = dict(zip(keys, perm, strict=True))
    from vistkit.meta.human import RankedStory

    tasks = {"t": {"stories": {key: RankedStory(key) for key in keys}, "ranks": ranks}}
    pairs = pairs_from_rankings(tasks)
    means = {key: np.mean([r[key] for r in ranks.values()]) for key in keys}
    expected = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :] if means[a] != means[b]]
    assert [(p.system_1, p.system_2) for p in pairs] == expected  # C(n, 2) minus the zero gaps, in order
    for p in pairs:
        assert p.gap == pytest.approx(means[p.system_2] - means[p.system_1])
        assert k / 2 <= p.agreement <= k
        agree = sum(np.sign(r[p.system_2] - r[p.system_1]) == p.preference for r in ranks.values())
        assert p.agreement == max(agree, k - agree)


def _gap_pairs(gaps: list[float], n: int = 3) -> list[StoryPair]:
    """Pairs whose raw gap is each of ``gaps`` (N = ``n`` stories: rank_norm = gap / n), story 1 always longer."""
    return [
        StoryPair(str(i), str(i), (), "a b c", "a", "gt", "m", gap=g, n_stories=n) for i, g in enumerate(gaps)
    ]


def _bucket_total(pairs: list[StoryPair], edges: tuple[float, ...] | None, **kw: Any) -> int:
    assert edges is not None
    return sum(b["n"] for b in accuracy_by_gap(score_pairs(D.MetaLength(), pairs), pairs, edges=edges, **kw))


def test_auto_gap_edges_put_every_pair_in_a_bucket() -> None:
    """Quartile edges (more than five gaps) start at the exact lowest gap and end at the exact highest: 0.2/3 and
    1.6/3 are not cut off by rounding to 0.066667 and 0.533333 (finding 3: 36 pairs, buckets summing to 23)."""
    from vistkit.meta.pairs import auto_gap_edges, gaps_outside

    gaps = [0.2, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.6, 0.2, 1.6] * 3
    pairs = _gap_pairs(gaps)
    edges = auto_gap_edges(pairs)
    assert edges is not None and edges[0] <= 0.2 / 3 and edges[-1] >= 1.6 / 3
    assert _bucket_total(pairs, edges) == len(pairs) == 36
    assert gaps_outside(pairs, edges) == 0
    raw = auto_gap_edges(pairs, normalised=False)
    assert raw is not None and _bucket_total(pairs, raw, normalised=False) == 36
    # quartiles that fall on a gap (0.4/3, not 0.133333) keep the pairs with that gap in their bucket
    nine = _gap_pairs([0.2, 0.4, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6])
    edges = auto_gap_edges(nine)
    assert edges == pytest.approx((0.2 / 3, 0.4 / 3, 0.8 / 3, 1.2 / 3, 1.6 / 3), rel=1e-12)
    length = score_pairs(D.MetaLength(), nine)
    assert [b["n"] for b in accuracy_by_gap(length, nine, edges=edges)] == [3, 2, 2, 2]


def test_gaps_that_differ_by_float_noise_are_one_value() -> None:
    """0.6 and 0.6000000000000001 are one gap: three distinct gaps give three buckets (midpoint edges), and a gap
    a hair over an explicit edge counts as on it."""
    from vistkit.meta.pairs import auto_gap_edges

    noisy = [0.2, 0.2 + 1e-16, 0.4, 0.4 + 2e-16, 0.6, 0.6000000000000001, 0.2 * 3 - 1e-16]
    pairs = _gap_pairs(noisy, n=1)
    edges = auto_gap_edges(pairs)
    assert edges == (0.2, 0.3, 0.5, 0.6000000000000001)
    length = score_pairs(D.MetaLength(), pairs)
    assert [b["n"] for b in accuracy_by_gap(length, pairs, edges=edges)] == [2, 2, 3]
    assert [b["n"] for b in accuracy_by_gap(length, pairs, edges=(0, 0.2, 0.4, 0.6))] == [2, 2, 3]


@pytest.mark.parametrize(("edges", "outside"), [("0,0.1", 7), ("0.6,0.8", 6), ("0,1", 0), ("0.1,0.3", 5)])
def test_pairs_outside_the_edges_are_counted(edges: str, outside: int) -> None:
    from vistkit.meta.pairs import gaps_outside, parse_edges

    pairs = _gap_pairs([0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 0.2, 0.0], n=2)  # rank_norm 0.1 .. 0.8; one tie
    parsed = parse_edges(edges)
    assert parsed is not None
    assert gaps_outside(pairs, parsed) == outside
    assert _bucket_total(pairs, parsed) == 9 - outside  # the tie counts nowhere, and is not "outside"


def test_negative_gap_edges_are_refused() -> None:
    from vistkit.errors import InputError
    from vistkit.meta.pairs import parse_edges

    with pytest.raises(InputError, match=r"--gap-edges must be 0 or more .* got -0\.2 in '-0\.2,0\.5'"):
        parse_edges("-0.2,0.5")
    assert parse_edges("0,0.5") == (0.0, 0.5)


def test_gap_table_keeps_close_edges_apart() -> None:
    """``:g`` printed buckets 0.5-0.5000000000000001 and 0.5000000000000001-1 as "0.5-0.5" and "0.5-1"."""
    from vistkit.meta.pairs import gap_table

    edge = 0.5000000000000001
    buckets = [{"low": 0.5, "high": edge, "accuracy": 1.0, "n": 2}, {"low": edge, "high": 1.0, "accuracy": 0.5, "n": 4}]
    table = {"m": buckets}
    _, rows = gap_table(table)
    assert [r[1] for r in rows] == ["0.5-0.5000000000000001", "0.5000000000000001-1"]
    _, rows = gap_table({"m": [{"low": 0.0, "high": 1 / 3, "accuracy": 1.0, "n": 2}]})
    assert rows[0][1] == "0-0.333333"  # six significant digits otherwise, as before
