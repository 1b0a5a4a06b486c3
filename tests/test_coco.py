"""The coco family (bleu-1..4, rouge-l, cider-d) == pycocoevalcap 1.2; spice/bleurt reported as unavailable.

- property tests: random tokenised corpora scored by vistkit and by pycocoevalcap's Bleu/Rouge/Cider scorers;
- hand-computed values;
- a 100-item sample of real VIST outputs through pycocoevalcap end to end (PTBTokenizer + scorers), keyed by
  sequence and by album;
- golden full-set numbers printed by pycocoevalcap itself (``bench/bench_coco.py --golden``);
- bootstrap statistics, tokenisation sharing, cards, the CLI.
"""

from __future__ import annotations

import functools
import math
import shutil
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.story import Story, StorySet
from vistkit.metrics import coco
from vistkit.metrics.base import align, get_metric, get_metric_class, list_metrics, unavailable_metrics

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for the PTB tokeniser")
OURS = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-l", "cider-d")
REF_NAMES = {"Bleu_1": "bleu-1", "Bleu_2": "bleu-2", "Bleu_3": "bleu-3", "Bleu_4": "bleu-4"}


# ------------------------------------------------------------------------------------------------- reference
def pycoco_scores(hyps: list[str], refs: list[list[str]]) -> dict[str, tuple[float, np.ndarray]]:
    """pycocoevalcap's Bleu(4), Rouge() and Cider() on already tokenised texts: {name: (corpus, items)}."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts = {i: list(r) for i, r in enumerate(refs)}
    res = {i: [h] for i, h in enumerate(hyps)}
    out: dict[str, tuple[float, np.ndarray]] = {}
    score, scores = Bleu(4).compute_score(gts, res, verbose=0)
    for k in range(4):
        out[f"bleu-{k + 1}"] = (float(score[k]), np.asarray(scores[k], dtype=float))
    score, scores = Rouge().compute_score(gts, res)
    out["rouge-l"] = (float(score), np.asarray(scores, dtype=float))
    score, scores = Cider().compute_score(gts, res)
    out["cider-d"] = (float(score), np.asarray(scores, dtype=float))
    return out


def vistkit_scores(hyps: list[str], refs: list[list[str]]) -> dict[str, tuple[float, np.ndarray]]:
    """vistkit's computation on the same tokenised texts (no jar)."""
    inputs = coco.CocoInputs(hyps, refs)
    stats = inputs.bleu_stats()
    out = {
        f"bleu-{n}": (coco.bleu_corpus_from_stats(stats, n=n), coco.bleu_item_scores(stats, n=n))
        for n in range(1, 5)
    }
    out["rouge-l"] = (float(np.mean(inputs.rouge_l())), inputs.rouge_l())
    out["cider-d"] = (float(np.mean(inputs.cider_d())), inputs.cider_d())
    return out


def assert_same(got: dict[str, tuple[float, np.ndarray]], want: dict[str, tuple[float, np.ndarray]]) -> None:
    for name, (corpus, items) in want.items():
        assert got[name][0] == pytest.approx(corpus, abs=1e-9, rel=0), name
        np.testing.assert_allclose(got[name][1], items, rtol=0, atol=1e-9, err_msg=name)


# ------------------------------------------------------------------------------------------------ properties
WORDS = st.sampled_from(["a", "b", "c", "d", "the", "dog", "ran", "x"])
TEXT = st.lists(WORDS, min_size=0, max_size=14).map(" ".join)
ITEM = st.tuples(TEXT, st.lists(TEXT, min_size=1, max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.lists(ITEM, min_size=1, max_size=8))
def test_equals_pycocoevalcap_scorers_on_random_corpora(items: list[tuple[str, list[str]]]) -> None:
    """BLEU-1..4 (corpus + per item), ROUGE-L, CIDEr-D equal pycocoevalcap's scorers, empty texts included."""
    hyps = [h for h, _ in items]
    refs = [r for _, r in items]
    if not any(r for rs in refs for r in rs):
        return  # pycocoevalcap's Cider fails on a corpus without any reference n-gram (max() of nothing)
    assert_same(vistkit_scores(hyps, refs), pycoco_scores(hyps, refs))


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=40), st.lists(WORDS, max_size=40))
def test_bit_parallel_lcs_equals_dynamic_programming(a: list[str], b: list[str]) -> None:
    from pycocoevalcap.rouge.rouge import my_lcs

    assert coco.lcs_length(a, b) == my_lcs(a, b) == coco.lcs_length(b, a)


# ----------------------------------------------------------------------------------------------- hand values
def test_bleu_hand_computed() -> None:
    """hyp 'a b c d' vs ref 'a b c e': p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0 (the 1e-15 guard), BP = 1."""
    stats = coco.CocoInputs(["a b c d"], [["a b c e"]]).bleu_stats()
    assert stats.tolist() == [[4, 4, 4, 3, 2, 1, 3, 2, 1, 0]]
    assert coco.bleu_corpus_from_stats(stats, n=1) == pytest.approx(0.75, rel=1e-9)
    assert coco.bleu_corpus_from_stats(stats, n=2) == pytest.approx(math.sqrt(0.75 * 2 / 3), rel=1e-9)
    assert coco.bleu_corpus_from_stats(stats, n=3) == pytest.approx((0.75 * 2 / 3 * 0.5) ** (1 / 3), rel=1e-9)
    assert coco.bleu_corpus_from_stats(stats, n=4) == pytest.approx((0.25 * 1e-15) ** 0.25, rel=1e-6)


def test_bleu_closest_reference_length_and_brevity_penalty() -> None:
    """Closest ref length, the shorter one on a tie (lengths 2 and 4 for a 3-word hypothesis -> 2)."""
    stats = coco.CocoInputs(["a b c"], [["a b c d", "x y"]]).bleu_stats()
    assert stats[0, 1] == 2
    stats = coco.CocoInputs(["a b"], [["a b c d", "a b c d e f"]]).bleu_stats()
    assert stats[0, 1] == 4  # 2 words vs refs of 4 and 6: r = 4, BP = exp(1 - 4/2)
    assert coco.bleu_corpus_from_stats(stats, n=1) == pytest.approx(math.exp(1 - 2), rel=1e-8)


def test_rouge_l_hand_computed() -> None:
    """LCS('a b c d e', 'a c e x') = 3: P = 3/5, R = 3/4, F = (1 + 1.44) P R / (R + 1.44 P)."""
    p, r = 3 / 5, 3 / 4
    want = (1 + 1.44) * p * r / (r + 1.44 * p)
    assert coco.rouge_l_item_scores(["a b c d e"], [["a c e x"]])[0] == pytest.approx(want, rel=1e-12)
    # P and R are maximised over the references separately (pycocoevalcap), here from different references
    got = coco.rouge_l_item_scores(["a b"], [["a", "a b c d e f"]])[0]
    assert got == pytest.approx((1 + 1.44) * 1.0 * 1.0 / (1.0 + 1.44 * 1.0), rel=1e-12)


def test_cider_d_identical_single_item_is_zero_idf() -> None:
    """One item: every reference n-gram has df = N = 1, so idf = log 1 - log 1 = 0 and CIDEr-D = 0."""
    assert coco.cider_d_item_scores(coco.CocoInputs(["a b c"], [["a b c"]]).table())[0] == 0.0


def test_cider_d_two_items_hand_computed() -> None:
    """Two items, each hypothesis equal to its single reference, disjoint words: every weight is
    log 2 - log 1, the 1- and 2-gram cosines are 1, no length penalty; 'a b' has no 3- or 4-grams (zero
    norms, cosine 0), so CIDEr-D = (1 + 1 + 0 + 0) / 4 * 10 = 5."""
    scores = coco.cider_d_item_scores(coco.CocoInputs(["a b", "c d"], [["a b"], ["c d"]]).table())
    np.testing.assert_allclose(scores, [5.0, 5.0], rtol=1e-12)


# ------------------------------------------------------------------------------------------------- real data
@functools.cache
def _read(*parts: str, system: str | None = None) -> StorySet:
    """A shared file's stories, read once per test process (PR-VIST's 10,010 stories take ~1 s a read)."""
    from vistkit.data.readers import read_stories

    return read_stories(shared_file(*parts), system=system)


def _load(system: str, keying: str) -> tuple[StorySet, StorySet]:
    refs = _read("pr-vist", "PR_VIST.json.zip")
    hyps = _read("tapm-vist-outputs", "vist", f"{system}.json", system=system)
    if keying == "album":  # one story per album: the first in file order (as bench/bench_coco.py)
        seen: set[str | None] = set()
        kept = []
        for s in hyps:
            if s.album_id not in seen:
                seen.add(s.album_id)
                kept.append(s)
        hyps = StorySet(kept)
    return hyps, refs


def pycocoevalcap_end_to_end(
    hyps: StorySet, refs: StorySet, keying: str
) -> dict[str, tuple[float, np.ndarray]]:
    """COCOEvalCap.evaluate's steps: PTBTokenizer on gts and on res (separately), then the scorers."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    items = align(hyps, refs, keying=keying).items
    tok = PTBTokenizer()
    gts = tok.tokenize({it.item_id: [{"caption": r.text} for r in it.references] for it in items})
    res = tok.tokenize({it.item_id: [{"caption": it.hypothesis.text}] for it in items})
    ids = [it.item_id for it in items]
    return pycoco_scores([res[i][0] for i in ids], [gts[i] for i in ids])


@needs_java
@pytest.mark.java
@pytest.mark.shared
@pytest.mark.parametrize("keying", ["sequence", "album"])
@pytest.mark.parametrize("system", ["ours", "AREL"])
def test_sample_equals_pycocoevalcap_end_to_end(system: str, keying: str) -> None:
    """100 items of a real system through the metric API == pycocoevalcap (tokeniser + scorers), 1e-9."""
    hyps, refs = _load(system, keying)
    with_refs = refs.group(keying)
    sample = StorySet([h for h in hyps if h.key(keying) in with_refs][:100])
    want = pycocoevalcap_end_to_end(sample, refs, keying)
    got = {}
    for name in OURS:
        result = get_metric(name).score(sample, refs, key=keying)
        assert len(result.item_ids) == 100
        got[name] = (result.corpus, result.item_scores)
    assert_same(got, want)


# pycocoevalcap 1.2 itself, full VIST test set (PR-VIST's copy of the test SIS), printed by
# `.venv/bin/python bench/bench_coco.py --golden` (PTBTokenizer + Bleu(4)/Meteor()/Rouge()/Cider(), as
# COCOEvalCap.evaluate). Album keying: the first story of each album in file order. meteor-coco is kept for
# reference (tests/test_meteor.py owns that metric).
GOLDEN: dict[tuple[str, str], dict[str, float]] = {
    ("sequence", "ours"): {  # n=1999
        "bleu-1": 0.43473920522432274,
        "bleu-2": 0.21702271895008374,
        "bleu-3": 0.11362893489455866,
        "bleu-4": 0.06100598339556125,
        "meteor-coco": 0.11909292788829454,
        "rouge-l": 0.21098344682070586,
        "cider-d": 0.11670809039843982,
    },
    ("sequence", "joint_ss"): {  # n=1999
        "bleu-1": 0.3312934430693458,
        "bleu-2": 0.14841694906865924,
        "bleu-3": 0.06754612055726224,
        "bleu-4": 0.03165996964250816,
        "meteor-coco": 0.09393385764117787,
        "rouge-l": 0.2055664423380535,
        "cider-d": 0.05295415901967936,
    },
    ("sequence", "no_ss"): {  # n=1999
        "bleu-1": 0.34559628446611296,
        "bleu-2": 0.15849299143690876,
        "bleu-3": 0.07423269679737456,
        "bleu-4": 0.035548265548262264,
        "meteor-coco": 0.09869286231321703,
        "rouge-l": 0.2077730473062503,
        "cider-d": 0.06521900794404013,
    },
    ("sequence", "AREL"): {  # n=1999
        "bleu-1": 0.39322581862226935,
        "bleu-2": 0.20218422596384472,
        "bleu-3": 0.1103717921320132,
        "bleu-4": 0.06271049437378055,
        "meteor-coco": 0.10566418011187723,
        "rouge-l": 0.21073762561042977,
        "cider-d": 0.09418029999907308,
    },
    ("sequence", "XE"): {  # n=1999
        "bleu-1": 0.3760305244991609,
        "bleu-2": 0.19496375564835486,
        "bleu-3": 0.10837620229245448,
        "bleu-4": 0.06359715194621675,
        "meteor-coco": 0.10085793157317738,
        "rouge-l": 0.21288119311192008,
        "cider-d": 0.08728945249923598,
    },
    ("album", "ours"): {  # n=1001
        "bleu-1": 0.5994435508411816,
        "bleu-2": 0.331691075654565,
        "bleu-3": 0.1820193560728697,
        "bleu-4": 0.10069072904572475,
        "meteor-coco": 0.13638474714569465,
        "rouge-l": 0.2397736846383095,
        "cider-d": 0.10366720377139492,
    },
    ("album", "joint_ss"): {  # n=1001
        "bleu-1": 0.502966256911491,
        "bleu-2": 0.25411321421616667,
        "bleu-3": 0.1225543109881753,
        "bleu-4": 0.05955367017222894,
        "meteor-coco": 0.10995354831582207,
        "rouge-l": 0.2366711064375679,
        "cider-d": 0.04997935586136341,
    },
    ("album", "no_ss"): {  # n=1001
        "bleu-1": 0.5219291523189713,
        "bleu-2": 0.26791927395210474,
        "bleu-3": 0.1323417245235309,
        "bleu-4": 0.06525643219855781,
        "meteor-coco": 0.11478335145836945,
        "rouge-l": 0.2370052551787856,
        "cider-d": 0.06145804739245265,
    },
    ("album", "AREL"): {  # n=1001
        "bleu-1": 0.5871194907505429,
        "bleu-2": 0.3358428128301204,
        "bleu-3": 0.19427676987939738,
        "bleu-4": 0.11461558690560465,
        "meteor-coco": 0.12494768526509821,
        "rouge-l": 0.24476910324974183,
        "cider-d": 0.08137305394772731,
    },
    ("album", "XE"): {  # n=1001
        "bleu-1": 0.5701987114393663,
        "bleu-2": 0.329721911853877,
        "bleu-3": 0.1934139376705092,
        "bleu-4": 0.11801297675187,
        "meteor-coco": 0.12082748726633014,
        "rouge-l": 0.24789771512272307,
        "cider-d": 0.07906105326681151,
    },
}

# Moments (mean, mean of squares) of pycocoevalcap's PER-ITEM scores on the same sets, printed by
# `.venv/bin/python bench/bench_coco.py --golden-items`: they pin the per-item values (the corpus BLEU is not
# the mean of its items).
GOLDEN_ITEMS: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    ("sequence", "ours"): {
        "bleu-1": (0.4101803044463105, 0.18749688285751556),
        "bleu-2": (0.19608257348541727, 0.05005134779540825),
        "bleu-3": (0.08275604798693384, 0.014486616701224461),
        "bleu-4": (0.028343991613579686, 0.004172620353197551),
        "rouge-l": (0.21098344682070586, 0.04748742088588015),
        "cider-d": (0.11670809039843982, 0.03533131086913942),
    },
    ("sequence", "joint_ss"): {
        "bleu-1": (0.3302689004318088, 0.12836122184785156),
        "bleu-2": (0.13685214495726197, 0.028217829666847924),
        "bleu-3": (0.04199686913184541, 0.0061422919316238556),
        "bleu-4": (0.010242419843258278, 0.001334801218957789),
        "rouge-l": (0.2055664423380535, 0.04561409565233115),
        "cider-d": (0.05295415901967936, 0.01128330575210187),
    },
    ("sequence", "no_ss"): {
        "bleu-1": (0.34350312725253196, 0.138402678368663),
        "bleu-2": (0.1472637321823515, 0.03166915950665604),
        "bleu-3": (0.04804694681287854, 0.007275082593851339),
        "bleu-4": (0.012371955275441448, 0.0016273957893205404),
        "rouge-l": (0.2077730473062503, 0.04651136160544284),
        "cider-d": (0.06521900794404013, 0.0167037757053943),
    },
    ("sequence", "AREL"): {
        "bleu-1": (0.3857791961881223, 0.1708632243409117),
        "bleu-2": (0.18946068119806223, 0.04913145834194034),
        "bleu-3": (0.08364389738395635, 0.015734968640773114),
        "bleu-4": (0.033170558886744354, 0.005360753881665889),
        "rouge-l": (0.21073762561042977, 0.048333287975218873),
        "cider-d": (0.09418029999907308, 0.02914500153761341),
    },
    ("sequence", "XE"): {
        "bleu-1": (0.37517868842392593, 0.1638148465103863),
        "bleu-2": (0.18627740496516215, 0.048399370527621055),
        "bleu-3": (0.08425657557917245, 0.01638977626197436),
        "bleu-4": (0.03588411840548169, 0.006053912228321632),
        "rouge-l": (0.21288119311192008, 0.04978380403024449),
        "cider-d": (0.08728945249923598, 0.028242010954767104),
    },
    ("album", "ours"): {
        "bleu-1": (0.5808690143313462, 0.34701249177280463),
        "bleu-2": (0.3148343057429515, 0.10902054433837247),
        "bleu-3": (0.15254896915796515, 0.03354964610493537),
        "bleu-4": (0.057184106825795875, 0.009876228339764728),
        "rouge-l": (0.2397736846383095, 0.05984331445800591),
        "cider-d": (0.10366720377139492, 0.02189247561865586),
    },
    ("album", "joint_ss"): {
        "bleu-1": (0.48961511647184175, 0.2530332744899681),
        "bleu-2": (0.23760619177112005, 0.0666505971530092),
        "bleu-3": (0.08445569573978123, 0.01534312036393686),
        "bleu-4": (0.02190837580768188, 0.003362231763296016),
        "rouge-l": (0.2366711064375679, 0.05843888392163142),
        "cider-d": (0.04997935586136341, 0.006977254168451244),
    },
    ("album", "no_ss"): {
        "bleu-1": (0.5061846213418558, 0.2695119740642055),
        "bleu-2": (0.25096910986256366, 0.07342803359167806),
        "bleu-3": (0.09519987907712711, 0.018298482302931546),
        "bleu-4": (0.026364333486216453, 0.004238655167039772),
        "rouge-l": (0.2370052551787856, 0.05855901450100798),
        "cider-d": (0.06145804739245265, 0.010786757438428201),
    },
    ("album", "AREL"): {
        "bleu-1": (0.5660564519936626, 0.33286478843554373),
        "bleu-2": (0.31521894153931734, 0.11208616128631171),
        "bleu-3": (0.1574295148427925, 0.03878341941981507),
        "bleu-4": (0.06856600864791654, 0.0138057779862424),
        "rouge-l": (0.24476910324974183, 0.06325173173334736),
        "cider-d": (0.08137305394772731, 0.01603096080898392),
    },
    ("album", "XE"): {
        "bleu-1": (0.5552304513513867, 0.3228515241572571),
        "bleu-2": (0.31421601799416127, 0.11202822500893517),
        "bleu-3": (0.16125762660210166, 0.040134716951751255),
        "bleu-4": (0.07383905416593446, 0.015219472879148347),
        "rouge-l": (0.24789771512272307, 0.0654395754393325),
        "cider-d": (0.07906105326681151, 0.017431795060661497),
    },
}


@needs_java
@pytest.mark.java
@pytest.mark.shared
@pytest.mark.slow
def test_full_set_golden_values() -> None:
    """All five systems x both keyings, one tokeniser call: corpus numbers and per-item moments ==
    pycocoevalcap's to 1e-9."""
    for keying in ("sequence", "album"):
        loaded = {system: _load(system, keying) for system in ("ours", "joint_ss", "no_ss", "AREL", "XE")}
        refs = next(iter(loaded.values()))[1]
        out = coco.coco_family({s: h for s, (h, _) in loaded.items()}, refs, key=keying, metrics=OURS)
        for system, scores in out.items():
            for name in OURS:
                want = GOLDEN[(keying, system)][name]
                assert scores[name].corpus == pytest.approx(want, abs=1e-9, rel=0), (keying, system, name)
                items = scores[name].item_scores
                mean, mean_sq = GOLDEN_ITEMS[(keying, system)][name]
                assert float(np.mean(items)) == pytest.approx(mean, abs=1e-9, rel=0), (keying, system, name)
                assert float(np.mean(items**2)) == pytest.approx(mean_sq, abs=1e-9, rel=0), (keying, system)


# ------------------------------------------------------------------------------------------------ statistics
def test_bleu_stats_resample_equals_recomputing_on_the_subset() -> None:
    """corpus_from_stats on a subset of rows == pycocoevalcap BLEU computed on just those items."""
    hyps = ["a b c d", "the dog ran", "x x x", "a the dog", "b c"]
    refs = [["a b c e", "a b"], ["the dog ran fast"], ["x y"], ["the dog a"], ["b c d", "c b"]]
    inputs = coco.CocoInputs(hyps, refs)
    stats = inputs.bleu_stats()
    rows = np.array([0, 2, 2, 4])  # with a repeated row, as a bootstrap resample has
    want = pycoco_scores([hyps[i] for i in rows], [refs[i] for i in rows])
    for n in range(1, 5):
        assert coco.bleu_corpus_from_stats(stats[rows], n=n) == pytest.approx(want[f"bleu-{n}"][0], abs=1e-12)


@needs_java
def test_score_object_and_tokenisation_shared_between_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """One tokeniser call for the first metric, none for the next ones; Score.resample(all rows) == corpus."""
    calls: list[int] = []
    backend = coco._ptb_backend

    def counting(texts: list[str]) -> list[str]:
        calls.append(len(texts))
        return backend(texts)

    monkeypatch.setattr(coco, "_ptb_backend", counting)
    monkeypatch.setattr(coco, "_TOKEN_CACHE", {})
    hyps = StorySet([Story("1", "The dog ran, fast!"), Story("2", "A cat sat.")])
    refs = StorySet([Story("1", "the dog ran"), Story("1", "a dog runs ."), Story("2", "a cat sat on it")])
    results = {name: get_metric(name).score(hyps, refs, key="story") for name in OURS}
    assert calls == [5]
    bleu = results["bleu-4"]
    assert bleu.stats is not None and bleu.stats.shape == (2, 10)
    assert bleu.resample(np.arange(2)) == bleu.corpus
    assert results["rouge-l"].signature.startswith("rouge-l|nrefs:1-2|key:story|tok:ptb-coco|beta:1.2")
    assert "reflen:closest" in bleu.signature and "sigma:6|df:refs" in results["cider-d"].signature


# --------------------------------------------------------------------------------------------- registry, CLI
def test_cards_and_declarations() -> None:
    metrics = list_metrics()
    for name in OURS:
        cls = metrics[name]
        assert cls.needs_references and cls.higher_is_better
        text = cls.card.render(name)
        assert "pycocoevalcap" in text and cls.card.citation
    assert metrics["cider-d"].upper_bound is None


def test_spice_and_bleurt_are_unavailable_with_a_reason() -> None:
    from vistkit.errors import UnavailableMetricError

    reasons = unavailable_metrics()
    assert "CoreNLP" in reasons["spice"] and "TensorFlow" in reasons["bleurt"]
    for name in ("spice", "bleurt"):
        with pytest.raises(UnavailableMetricError, match="unavailable"):
            get_metric_class(name)


def test_cli_spice_fails_with_the_sentence(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    hyp = tmp_path / "h.jsonl"
    hyp.write_text('{"story_id": "1", "text": "a b"}\n')
    assert main(["score", str(hyp), "--references", str(hyp), "--metrics", "spice"]) == 1
    err = capsys.readouterr().err
    assert coco.SPICE_REASON in err.replace("\n", " ") or "CoreNLP" in err
    assert "Traceback" not in err
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    assert "spice" in out and "bleurt" in out and "UNAVAILABLE" in out


def test_token_cache_is_bounded_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The PTB token cache holds at most VISTKIT_CACHE_MB (it was bounded by 400,000 texts only: long stories
    could hold GBs); what it returns does not depend on what it keeps."""
    monkeypatch.setattr(coco, "_ptb_backend", lambda texts: [t.lower() for t in texts])
    monkeypatch.setattr(coco, "_TOKEN_CACHE", {})
    monkeypatch.setattr(coco, "_TOKEN_CACHE_BYTES", [0])
    monkeypatch.setenv("VISTKIT_CACHE_MB", str(4000 / 2**20))  # about 4,000 bytes
    texts = [f"Story {i} " + "Word " * 50 for i in range(40)]
    for start in range(0, 40, 3):
        batch = texts[start : start + 5]
        assert coco.ptb_tokenize_cached([*batch, batch[0]]) == [t.lower() for t in [*batch, batch[0]]]
        held = sum(len(k) + len(v) + coco._ENTRY_OVERHEAD for k, v in coco._TOKEN_CACHE.items())
        assert held == coco._TOKEN_CACHE_BYTES[0] <= 4000
    monkeypatch.setenv("VISTKIT_CACHE_MB", "0")  # keeps nothing, still answers
    assert coco.ptb_tokenize_cached(["A b", "C"]) == ["a b", "c"] and coco._TOKEN_CACHE == {}
