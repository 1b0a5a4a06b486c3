"""The data model, alignment (keying, template, Reference Absent Algorithm), Score resampling and the registry."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vistkit.data.story import Keying, Story, StorySet, sequence_key
from vistkit.errors import InputError, UnknownMetricError
from vistkit.metrics.base import Item, Metric, MetricCard, Score, align, get_metric_class, make_signature


def _story(
    sid: str, text: str, photos: Sequence[str] = (), album: str | None = None, system: str | None = None
):
    return Story(story_id=sid, text=text, photo_ids=tuple(photos), album_id=album, system=system)


def test_story_keys_are_explicit() -> None:
    s = _story("7", "a b", ["1", "2", "3"], "al")
    assert s.key("story") == "7"
    assert s.key(Keying.SEQUENCE) == "1-2-3" == sequence_key(["1", "2", "3"])
    assert s.key("album") == "al"
    with pytest.raises(InputError, match="no photo ids"):
        _story("8", "x").key("sequence")
    with pytest.raises(InputError, match="no album id"):
        _story("8", "x").key("album")


def test_storyset_by_key_rejects_duplicates_and_groups() -> None:
    ss = StorySet([_story("1", "a", ["p"]), _story("2", "b", ["p"])], source="f.json")
    with pytest.raises(InputError, match=r"more than one story.*'p'.*f.json"):
        ss.by_key("sequence")
    assert [s.story_id for s in ss.group("sequence")["p"]] == ["1", "2"]
    assert ss.default_keying() is Keying.SEQUENCE
    assert StorySet([_story("1", "a")]).default_keying() is Keying.STORY


def test_align_pairs_by_key_and_reports_missing_references() -> None:
    hyps = StorySet([_story("h1", "x", ["1", "2"]), _story("h2", "y", ["3", "4"])])
    refs = StorySet([_story("r1", "x", ["1", "2"]), _story("r2", "z", ["1", "2"])])
    al = align(hyps, refs, keying="sequence")
    assert [i.item_id for i in al.items] == ["1-2"]
    assert [r.story_id for r in al.items[0].references] == ["r1", "r2"]
    assert al.excluded == {"3-4": "no reference story has this key"}
    assert al.n_refs == "2"


def test_align_template_and_require_all_like_the_challenge() -> None:
    hyps = StorySet([_story("h1", "x", ["1", "2"])])
    refs = StorySet([_story("r1", "x", ["1", "2"]), _story("r2", "z", ["5", "6"])])
    assert len(align(hyps, refs, keying="sequence", template=["1-2"], require_all=True).items) == 1
    with pytest.raises(InputError, match=r"One story is missing in this submission\. Photo seq: 5-6"):
        align(hyps, refs, keying="sequence", template=["1-2", "5-6"], require_all=True)


def test_reference_absent_removes_the_scored_story_itself() -> None:
    human = _story("45530", "the  parish holds a show .", system="human")
    refs = StorySet([_story("45530", "the parish holds a show .", system="human"), _story("x", "other")])
    # keyed by album-like shared key: give every story the same album
    hyps = StorySet([Story("45530", human.text, album_id="a", system="human")])
    refs = StorySet([Story(s.story_id, s.text, album_id="a", system=s.system) for s in refs])
    kept = align(hyps, refs, keying="album", reference_absent=True).items[0].references
    assert [r.story_id for r in kept] == ["x"]
    assert len(align(hyps, refs, keying="album").items[0].references) == 2
    only_self = StorySet([Story("45530", "the parish holds a show .", album_id="a")])
    with pytest.raises(InputError, match="no hypothesis shares"):
        align(hyps, only_self, keying="album", reference_absent=True)


def test_signature_is_ordered_and_versioned() -> None:
    sig = make_signature("m", {"nrefs": 2, "case": True})
    assert sig.startswith("m|nrefs:2|case:yes|vistkit:")


class _Mean(Metric):
    name = "test-mean"
    card = MetricCard("t", "t", "[0,1]", "-", "-")

    def signature_fields(self) -> dict[str, object]:
        return {}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        vals = [len(i.hypothesis.text) / 10 for i in items]
        vals = [math.nan if v == 0 else v for v in vals]
        from vistkit.metrics.base import mean_score

        return mean_score(self.name, [i.item_id for i in items], vals, signature)


def test_metric_score_fills_keying_signature_and_ignores_nan() -> None:
    res = _Mean().score([_story("a", "abcd"), _story("b", "")], key="story")
    assert res.keying is Keying.STORY
    assert res.signature.startswith("test-mean|key:story|")
    assert res.n == 1 and res.corpus == pytest.approx(0.4)
    with pytest.raises(InputError, match="no stories"):
        _Mean().score([], key="story")


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(0, 2**31 - 1))
def test_resample_without_stats_is_the_mean_of_the_drawn_items(values: list[float], seed: int) -> None:
    score = Score("m", float(np.mean(values)), [str(i) for i in range(len(values))], np.array(values), "sig")
    idx = np.random.default_rng(seed).integers(0, len(values), len(values))
    assert score.resample(idx) == pytest.approx(float(np.mean(np.array(values)[idx])))


def test_resample_uses_statistics_when_given() -> None:
    stats = np.array([[1.0, 2.0], [3.0, 4.0]])
    score = Score(
        "m",
        4 / 6,
        ["a", "b"],
        np.array([0.5, 0.75]),
        "s",
        stats=stats,
        corpus_from_stats=lambda s: s[:, 0].sum() / s[:, 1].sum(),
    )
    assert score.resample(np.array([1, 1])) == pytest.approx(6 / 8)


def test_unknown_metric_names_a_fix() -> None:
    with pytest.raises(UnknownMetricError, match="vistkit metrics"):
        get_metric_class("no-such-metric")


def test_a_tiny_value_is_not_shown_as_zero() -> None:
    """A BLEU-4 of 8.1e-07 (no shared 4-gram in 50 stories) read 0.0000 in the demo, as if broken."""
    from vistkit.report.tables import fmt_number

    assert fmt_number(8.1e-07) == "8.1e-07"
    assert fmt_number(-3e-9) == "-3.0e-09"
    assert fmt_number(0.0) == "0.0000"
    assert fmt_number(0.00005) == "0.0001"  # rounds to a non-zero number: unchanged
    assert fmt_number(0.24296) == "0.2430"
    assert fmt_number(float("nan")) == "n/a"
