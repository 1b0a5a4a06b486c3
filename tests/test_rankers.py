"""Properties every pairwise metric (`Ranker`) guarantees, checked over every registered ranker and two tiny
dummy rankers (one per base class): swap antisymmetry ``prefer(a, b) == -prefer(b, a)`` to 1e-6, determinism,
batched == one by one, a per-story score (``vistkit score``), and that `vistkit.meta` asks a ranker per pair.

Registered rankers are built like in test_metric_properties.py (tiny test resources, or skipped with the exact
missing-resource sentence).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story, StorySet
from vistkit.meta.human import StoryPair
from vistkit.meta.pairs import beats_reference, pair_accuracy, pair_correct
from vistkit.meta.scoring import rank_pairs, score_pairs, score_stories
from vistkit.metrics.base import (
    CrossEncoderRanker,
    Item,
    Metric,
    MetricCard,
    Ranker,
    UtilityRanker,
    is_ranker,
    list_metrics,
    register,
)

_CARD = MetricCard(
    summary="test ranker", definition="see code", range="(-inf, inf)", signature_fields="model", reproduces="-"
)


def _words(s: Story) -> list[str]:
    return s.text.split()


class DistinctWords(UtilityRanker):
    """Utility = number of distinct words (counts how many stories it was asked to encode)."""

    name = "test-distinct-words"
    card = _CARD

    def __init__(self) -> None:
        super().__init__()
        self.model_hash, self.encoder, self.training_data = "0123456789abcdef", "words", "none"
        self.encoded = 0

    def utility(self, stories: Sequence[Story]) -> np.ndarray:
        self.encoded += len(stories)
        return np.array([float(len(set(_words(s)))) for s in stories])


class LopsidedCross(CrossEncoderRanker):
    """g(a, b) deliberately not antisymmetric (an order bias and an interaction term), anchored on 3 stories."""

    name = "test-lopsided-cross"
    card = _CARD

    def raw_preference(self, a: Sequence[Story], b: Sequence[Story]) -> np.ndarray:
        la = np.array([len(_words(s)) for s in a], dtype=float)
        lb = np.array([len(_words(s)) for s in b], dtype=float)
        ta = np.array([len(set(_words(s))) for s in a], dtype=float)
        return 0.3 + ta - 0.7 * lb + 0.01 * la * lb

    def anchors(self) -> Sequence[Story]:
        return [Story(f"anchor-{i}", " ".join(["w"] * (3 + i) + [f"x{j}" for j in range(i)])) for i in range(3)]


DUMMIES: dict[str, type[Ranker]] = {DistinctWords.name: DistinctWords, LopsidedCross.name: LopsidedCross}
REGISTERED = [n for n, c in list_metrics().items() if is_ranker(c) and n not in DUMMIES]
RANKERS = sorted(DUMMIES) + REGISTERED


@pytest.fixture
def by_name() -> Iterator[None]:
    """The dummy rankers and the meta dummy metrics usable by name (CLI tests), unregistered afterwards so that
    registry-wide tests of other modules never see them."""
    from meta_dummies import load_dummy_metrics

    d = load_dummy_metrics()
    added = d.ensure_registered()
    for cls in DUMMIES.values():
        register(cls)
    yield
    d.unregister([*added, *DUMMIES])


TEXTS = [
    "we went to the beach . the water was cold .",
    "the the the the beach beach .",
    "grandma cooked a turkey and everyone ate it at the long table .",
    "",
    "a",
    "our team won the game . the crowd cheered . we celebrated all night long .",
    "the city was busy . people walked to work in the rain . a man sold flowers .",
]


@pytest.fixture(scope="module")
def resources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ranker-resources")


def _ranker(name: str, root: Path) -> Ranker:
    if name in DUMMIES:
        return DUMMIES[name]()
    from test_metric_properties import _metric

    metric = _metric(name, root)
    assert isinstance(metric, Ranker)
    return metric


def _pairs(n: int, seed: int) -> tuple[list[Story], list[Story]]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(TEXTS), size=(n, 2))
    a = [Story(f"a{i}", TEXTS[j], photo_ids=("1", "2")) for i, (j, _) in enumerate(idx)]
    b = [Story(f"b{i}", TEXTS[k], photo_ids=("1", "2")) for i, (_, k) in enumerate(idx)]
    return a, b


def _close(x: np.ndarray, y: np.ndarray) -> bool:
    return bool(np.allclose(x, y, rtol=1e-6, atol=1e-6, equal_nan=True))


# --------------------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("name", RANKERS)
def test_declares_a_reference_free_ranker(name: str, resources: Path) -> None:
    ranker = _ranker(name, resources)
    assert is_ranker(ranker) and not ranker.needs_references
    sig = ranker.signature()
    assert sig.startswith(name) and "|model:" in sig and "|encoder:" in sig and "|data:" in sig


@pytest.mark.parametrize("name", RANKERS)
def test_swap_antisymmetry(name: str, resources: Path) -> None:
    ranker = _ranker(name, resources)
    a, b = _pairs(12, seed=1)
    ab, ba = ranker.preference(a, b), ranker.preference(b, a)
    assert _close(ab, -ba), np.abs(ab + ba).max()
    same = ranker.preference(a, a)  # a story against itself: no preference
    assert _close(same, np.zeros(len(a)))


@pytest.mark.parametrize("name", RANKERS)
def test_deterministic_and_batched_equals_one_by_one(name: str, resources: Path) -> None:
    ranker = _ranker(name, resources)
    a, b = _pairs(9, seed=2)
    batched = ranker.preference(a, b)
    assert np.array_equal(batched, ranker.preference(a, b), equal_nan=True)
    single = np.concatenate([ranker.preference([x], [y]) for x, y in zip(a, b, strict=True)])
    assert _close(batched, single)
    if ranker.preference_bound is not None:
        assert np.all(np.abs(batched[~np.isnan(batched)]) <= ranker.preference_bound + 1e-9)


@pytest.mark.parametrize("name", RANKERS)
def test_per_story_score_for_vistkit_score(name: str, resources: Path) -> None:
    ranker = _ranker(name, resources)
    stories = StorySet(Story(f"s{i}", t) for i, t in enumerate(TEXTS))
    score = ranker.score(stories, key="story")
    again = ranker.score(StorySet(reversed(list(stories))), key="story")
    assert score.item_ids == [s.story_id for s in stories]
    by_id = dict(zip(again.item_ids, again.item_scores, strict=True))
    assert _close(score.item_scores, np.array([by_id[i] for i in score.item_ids]))


# --------------------------------------------------------------------------------------------------- dummies
def test_utility_ranker_encodes_each_distinct_story_once() -> None:
    r = DistinctWords()
    a = [Story("x", TEXTS[0]), Story("y", TEXTS[0]), Story("z", TEXTS[2])]
    b = [Story("h", TEXTS[2]), Story("h", TEXTS[2]), Story("h", TEXTS[0])]
    pref = r.preference(a, b)
    assert r.encoded == 2  # two distinct texts among six stories
    assert pref.tolist() == [9.0 - 13.0, 9.0 - 13.0, 13.0 - 9.0]  # distinct words: 9 and 13


def test_cross_encoder_antisymmetrises_and_scores_against_the_anchors() -> None:
    r = LopsidedCross()
    a, b = Story("a", "one two three"), Story("b", "one one one one")
    g_ab = 0.3 + 3 - 0.7 * 4 + 0.01 * 12
    g_ba = 0.3 + 1 - 0.7 * 3 + 0.01 * 12
    assert r.preference([a], [b])[0] == pytest.approx((g_ab - g_ba) / 2)
    # per-story score = mean preference against the three anchors (lengths 3, 5, 7; distinct 1, 2, 3)
    expected = np.mean([(3 - 0.7 * la) / 2 - (ta - 0.7 * 3) / 2 for la, ta in ((3, 1), (5, 2), (7, 3))])
    score = r.score([a], key="story")
    assert score.item_scores[0] == pytest.approx(expected)
    assert score.extra["anchors"] == 3


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from(TEXTS)), min_size=1, max_size=8))
def test_cross_encoder_antisymmetry_property(texts: list[tuple[str, str]]) -> None:
    r = LopsidedCross()
    a = [Story(f"a{i}", x) for i, (x, _) in enumerate(texts)]
    b = [Story(f"b{i}", y) for i, (_, y) in enumerate(texts)]
    assert np.allclose(r.preference(a, b), -r.preference(b, a), atol=1e-12)


def test_mismatched_pair_lists_are_a_clear_error() -> None:
    from vistkit.errors import InputError

    with pytest.raises(InputError, match="pairs"):
        DistinctWords().preference([Story("a", "x")], [])


# --------------------------------------------------------------------------------------------------- meta
def _story_pairs() -> list[StoryPair]:
    rows = [  # (text_1, text_2, gap > 0: people prefer story 1)
        (TEXTS[0], TEXTS[1], 1.0, "human", "m1"),  # distinct 9 vs 3: ranker agrees
        (TEXTS[1], TEXTS[2], -2.0, "m1", "m2"),  # 3 vs 13: agrees
        (TEXTS[5], TEXTS[6], -1.0, "human", "m2"),  # 13 vs 15: agrees (machine beats reference)
        (TEXTS[2], TEXTS[0], -1.0, "m2", "human"),  # 13 vs 9: disagrees (machine beats reference)
        (TEXTS[0], TEXTS[0], 1.0, "m1", "m2"),  # tie: wrong (Eq. 1)
    ]
    return [
        StoryPair(
            pair_id=str(i),
            story_id=f"s{i}",
            img_seq=("1", "2"),
            text_1=t1,
            text_2=t2,
            system_1=s1,
            system_2=s2,
            gap=g,
        )
        for i, (t1, t2, g, s1, s2) in enumerate(rows)
    ]


def test_meta_asks_a_ranker_per_pair() -> None:
    pairs = _story_pairs()
    r = DistinctWords()
    ps = score_pairs(r, pairs)
    assert ps.preference is not None
    assert ps.preference.tolist() == [6.0, -10.0, -2.0, 4.0, 0.0]
    assert pair_correct(ps, pairs).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert pair_accuracy(ps, pairs)["all"]["accuracy"] == pytest.approx(3 / 5)
    assert pair_correct(ps.swapped(), pairs).tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    beats = beats_reference(ps, pairs)
    assert beats["m1"] == {"wins": 0, "ties": 0, "n": 1, "ratio": 0.0, "tie_ratio": 0.0}
    assert beats["m2"]["wins"] == 2 and beats["m2"]["n"] == 2
    assert ps.signature == r.signature()


def test_cross_encoder_pairs_are_the_antisymmetrised_preference() -> None:
    pairs = _story_pairs()
    r = LopsidedCross()
    ps = rank_pairs(r, pairs)
    a = [Story("a", p.text_1) for p in pairs]
    b = [Story("b", p.text_2) for p in pairs]
    assert ps.preference is not None and _close(ps.preference, r.preference(a, b))
    assert not math.isnan(pair_accuracy(ps, pairs)["all"]["accuracy"])


def test_score_stories_uses_the_per_story_score() -> None:
    stories = [Story(f"s{i}", t, system="m") for i, t in enumerate(TEXTS[:3])]
    values, sig = score_stories(DistinctWords(), stories)
    assert values.tolist() == [9.0, 3.0, 13.0]
    assert sig.startswith("test-distinct-words")


def test_items_of_a_ranker_are_plain_items() -> None:
    r = DistinctWords()
    res = r.score_items([Item("k", Story("k", "a b a"))], signature="sig")
    assert res.item_scores.tolist() == [2.0] and res.signature == "sig"
    assert isinstance(r, Metric)


# --------------------------------------------------------------------------------------------------- compare
def _system_files(tmp_path: Path, n: int = 60) -> tuple[Path, Path, list[str], list[str]]:
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(30)]
    texts = {"x": [], "y": []}  # type: dict[str, list[str]]
    paths = []
    from vistkit.data.readers import write_jsonl

    for name in texts:
        stories = []
        for i in range(n):
            text = " ".join(rng.choice(vocab, size=int(rng.integers(4, 14))))
            texts[name].append(text)
            stories.append(Story(f"{name}{i}", text, photo_ids=tuple(f"{i}p{j}" for j in range(5)), system=name))
        paths.append(tmp_path / f"{name}.jsonl")
        write_jsonl(stories, paths[-1])
    return paths[0], paths[1], texts["x"], texts["y"]


@pytest.mark.usefixtures("by_name")
def test_compare_says_how_often_a_system_is_preferred(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ranker (asked per pair) and an ordinary metric (meta-test-length: item scores compared)."""
    import json

    from vistkit.cli import main

    x, y, tx, ty = _system_files(tmp_path)
    code = main(["compare", str(x), str(y), "-m", "test-distinct-words,meta-test-length", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    pref = json.loads(out)["preferred"]
    dx = np.array([len(set(t.split())) for t in tx])
    dy = np.array([len(set(t.split())) for t in ty])
    ranker = pref["test-distinct-words"]["y"]
    assert ranker["over"] == "x" and ranker["unit"] == "sequence" and ranker["n"] == 60
    assert ranker["share"] == pytest.approx(np.mean(dy > dx)) and ranker["ties"] == pytest.approx(np.mean(dy == dx))
    lx = np.array([len(t.split()) for t in tx])
    ly = np.array([len(t.split()) for t in ty])
    length = pref["meta-test-length"]["y"]
    assert length["share"] == pytest.approx(np.mean(ly > lx)) and length["losses"] == pytest.approx(np.mean(ly < lx))
    for r in (ranker, length):  # percentile bootstrap CI: around the share, about the normal-approximation width
        lo, hi = r["ci"]
        p = r["share"]
        assert lo <= p <= hi
        assert hi - lo == pytest.approx(2 * 1.96 * np.sqrt(p * (1 - p) / 60), rel=0.3)
    code = main(["compare", str(x), str(y), "-m", "test-distinct-words"])
    text = capsys.readouterr().out
    assert code == 0
    share = f"{np.mean(dy > dx):.1%}"
    assert f"test-distinct-words: the story of y is preferred over that of x for {share} of the photo sequences" in text


def test_preference_share_counts_ties_for_neither() -> None:
    from vistkit.meta.pairs import preference_share

    r = preference_share(np.array([1.0, -2.0, 0.0, 3.0, math.nan]), n_bootstrap=200, seed=1)
    assert (r["share"], r["ties"], r["losses"], r["n"]) == (0.5, 0.25, 0.25, 4)
    assert 0.0 <= r["ci"][0] <= 0.5 <= r["ci"][1] <= 1.0
    assert preference_share(np.array([math.nan]))["n"] == 0


@pytest.mark.usefixtures("by_name")
def test_meta_cli_takes_a_ranker(capsys: pytest.CaptureFixture[str]) -> None:
    """vhed_small.csv by distinct words, hand-checked: s1 right, s2 wrong, s3 tie (wrong), s4 wrong, s5 right,
    s6 right, s7 zero gap (not counted), s8 tie (wrong): 3 / 7."""
    import json

    from meta_dummies import FIX

    from vistkit.cli import main

    vhed = str(FIX / "vhed_small.csv")
    code = main(["meta", "pairs", vhed, "-m", "test-distinct-words", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    assert payload["accuracy"]["test-distinct-words"]["all"] == pytest.approx(3 / 7)
    assert payload["signatures"]["test-distinct-words"].startswith("test-distinct-words|model:0123456789ab")
    for sub in ("gap", "beats-ref"):
        code = main(["meta", sub, vhed, "-m", "test-distinct-words", "-f", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
    # machine beats reference by distinct words: s1 (gt 5 vs m1 3): no; s4 (gt 6 vs m2 1): no; s6 (m1 3 vs gt 7): no
    assert json.loads(out)["beats_reference"]["test-distinct-words"]["m1"]["wins"] == 0
    code = main(["meta", "compare", vhed, "-m", "test-distinct-words,meta-test-length", "-f", "json"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.usefixtures("by_name")
def test_functional_face() -> None:
    from vistkit.errors import InputError
    from vistkit.metrics.base import prefer

    a, b = [Story("a", TEXTS[0])], [Story("b", TEXTS[1])]
    assert prefer("test-distinct-words", a, b).tolist() == [6.0]
    with pytest.raises(InputError, match="not a pairwise metric"):
        prefer("meta-test-length", a, b)
