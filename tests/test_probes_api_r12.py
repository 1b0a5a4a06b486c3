"""API probes, round 12: what a researcher does with results in a notebook.

A `Score` is the caller's own: changing its arrays never changes another result (the coco family caches its
per-set statistics, and every Score of that set held the cached arrays themselves); two Scores compare by value
(``a == b`` raised numpy's "truth value of an array is ambiguous"); a misspelt keyword says what was meant; a
file name, a DataFrame or a list holding a non-text says how to pass it.
"""

from __future__ import annotations

import copy
import math
import pickle
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vistkit import InputError, Story, StorySet, get_metric, score
from vistkit.metrics.base import Score, mean_score

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser)")

HYPS = [f"we went to the park number {i} . it was fun and sunny . then we went home ." for i in range(6)]
REFS = [[f"we went to a park {i} . it was sunny . we went home after .", f"the park {i} was nice ."] for i in range(6)]
COCO = ("bleu-1", "bleu-4", "rouge-l", "cider-d")


def _score(name: str) -> Score:
    return score(name, HYPS, REFS) if get_metric(name).needs_references else score(name, HYPS)


# ------------------------------------------------------------------------------------------------ owned arrays
@needs_java
@pytest.mark.parametrize("name", COCO)
def test_changing_a_result_never_changes_the_next_one(name: str) -> None:
    """score("rouge-l", ...).item_scores *= 0 made every later rouge-l score of the same stories 0.0, and zeroing
    bleu-4's stats made bleu-1 0.0: each Score held the arrays the coco family caches per set of texts."""
    first = _score(name)
    want_corpus, want_items = first.corpus, first.item_scores.copy()
    other = _score("bleu-1" if name != "bleu-1" else "bleu-4")
    want_other = other.corpus
    first.item_scores[:] = 0.0
    if first.stats is not None:
        first.stats[:] = 0
    again = _score(name)
    assert again.corpus == want_corpus
    np.testing.assert_array_equal(again.item_scores, want_items)
    assert again.resample(np.arange(len(again.item_ids))) == pytest.approx(want_corpus, rel=1e-12)
    assert _score(other.metric).corpus == want_other


def test_a_score_keeps_its_own_copy_of_what_it_was_given() -> None:
    """The class of the bug: any array or list handed to a Score (by a metric, an engine merge, a user) is copied."""
    values = np.array([0.5, 1.0])
    stats = np.ones((2, 3))
    ids = ["a", "b"]
    result = Score("m", 0.75, ids, values, "sig", stats=stats)
    values[:] = 0.0
    stats[:] = 0
    ids.append("c")
    assert result.item_ids == ["a", "b"] and result.item_scores.tolist() == [0.5, 1.0] and result.stats.sum() == 6


def test_a_streamed_part_is_the_callers_to_change() -> None:
    from vistkit.engine.local import LocalEngine
    from vistkit.metrics.base import align

    engine = LocalEngine()
    metric = engine.metric("rovist-nr")
    stories = StorySet([Story(str(i), h) for i, h in enumerate(HYPS)])
    items = align(stories, None, keying="story").items

    def spoil(part: Score) -> None:
        part.item_scores[:] = -1.0

    totals = engine.score_stream(metric, items, signature="s", batch_size=4, on_part=spoil)
    np.testing.assert_array_equal(np.concatenate(totals.scores), metric.score(stories, key="story").item_scores)


# ------------------------------------------------------------------------------------------------ equality
def test_scores_compare_by_value() -> None:
    """a == b raised "The truth value of an array with more than one element is ambiguous" (and `a in [b]`)."""
    a, b = _score("rovist-nr"), _score("rovist-nr")
    assert a == b and a in [b] and a == copy.deepcopy(a) and a == pickle.loads(pickle.dumps(a))
    c = score("rovist-nr", [h + " we went to the park number 3 ." for h in HYPS])
    assert a != c and a != "rovist-nr" and a != a.corpus
    undefined = score("rovist-nr", ["one sentence only"])  # NaN corpus and item: still equal to itself
    assert undefined == score("rovist-nr", ["one sentence only"])
    with pytest.raises(TypeError):
        hash(a)  # a Score can be changed, so it is not hashable (as before)


def test_scores_of_different_shape_are_not_equal() -> None:
    base = mean_score("m", ["a", "b"], [0.5, math.nan], "sig")
    assert base == mean_score("m", ["a", "b"], [0.5, math.nan], "sig")
    assert base != mean_score("m", ["a"], [0.5], "sig")
    assert base != mean_score("m", ["a", "b"], [0.5, math.nan], "other")
    assert base != mean_score("m", ["a", "b"], [0.5, math.nan], "sig", extra={"k": np.array([1.0, 2.0])})
    with_stats = Score("m", 0.5, ["a"], np.array([0.5]), "sig", stats=np.ones((1, 2)))
    assert with_stats != Score("m", 0.5, ["a"], np.array([0.5]), "sig")
    assert with_stats == Score("m", 0.5, ["a"], np.array([0.5]), "sig", stats=np.ones((1, 2)))


@needs_java
def test_bleu_scores_compare_by_value() -> None:
    assert _score("bleu-4") == _score("bleu-4") and _score("bleu-4") != _score("bleu-3")


# ------------------------------------------------------------------------------------------------ misspelt names
@pytest.mark.parametrize(
    ("name", "option", "meant"),
    [
        ("bleu-4", "keying", "key"),
        ("bleu-4", "Key", "key"),
        ("bleu-4", "reference", "references"),
        ("bleu-4", "refs", "references"),
        ("bleu-4", "require_al", "require_all"),
        ("bleu-4", "referenceabsent", "reference_absent"),
        ("bleu-4", "templates", "template"),
        ("sacrebleu", "tokenise", "tokenize"),
        ("sacrebleu", "lower_case", "lowercase"),
        ("rovist-nr", "sentence", "sentences"),
    ],
)
def test_a_misspelt_keyword_says_what_was_meant(name: str, option: str, meant: str) -> None:
    """score("bleu-4", hyps, refs=R) said "bleu-4 has no option 'refs' (its options: none)", no word of
    ``references``."""
    hyps, refs = (HYPS[:2], REFS[:2])
    with pytest.raises(InputError, match=re.escape(f"did you mean {meant}?")):
        score(name, hyps, refs, **{option: True})


def test_an_unknown_option_far_from_any_name_has_no_guess() -> None:
    with pytest.raises(InputError) as info:
        get_metric("bleu-4", n=3)
    assert str(info.value) == "bleu-4 has no option 'n' (its options: none)"
    with pytest.raises(InputError, match=r"did you mean sentences\?"):
        get_metric("rovist-nr", sentence="split")  # get_metric suggests the metric's own options


# ------------------------------------------------------------------------------------------------ inputs
@pytest.mark.parametrize(
    ("hyps", "hint"),
    [
        ("stories.jsonl", "vistkit.read_stories(PATH)"),
        (Path("stories.jsonl"), "vistkit.read_stories(PATH)"),
        (b"a story .", "vistkit.read_stories(PATH)"),
        ([HYPS[0], None], "story 1 is NoneType, not a text"),
        ([HYPS[0], math.nan], "story 1 is float, not a text"),
        ([HYPS[0].encode()], "story 0 is bytes, not a text; decode it"),
        ([Story("a", HYPS[0]), HYPS[1]], "story 1 is str, not a Story"),
    ],
)
def test_stories_of_the_wrong_kind_say_how_to_pass_them(hyps: Any, hint: str) -> None:
    """A file name was "cannot score str stories"; a list holding one None "cannot score list stories"."""
    with pytest.raises(InputError, match=re.escape(hint)):
        score("rovist-nr", hyps)


def test_references_holding_a_non_text_name_it() -> None:
    with pytest.raises(InputError, match=re.escape("reference 1 is NoneType")):
        score("bleu-4", HYPS[:2], [REFS[0][0], None])


def test_a_dataframe_says_how_to_pass_its_columns() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"id": ["a", "b"], "text": HYPS[:2]})
    with pytest.raises(InputError, match=re.escape("dict(zip(frame[ID], frame[TEXT]))")):
        score("rovist-nr", frame)
    assert score("rovist-nr", dict(zip(frame["id"], frame["text"], strict=True))).item_ids == ["a", "b"]


# ------------------------------------------------------------------------------------------------ what was fine
@needs_java
def test_four_threads_share_one_scorer_of_each_cheap_metric() -> None:
    """Serial and threaded results are identical for the coco family, sacreBLEU and RoViST-NR (no fix needed)."""
    for name in ("bleu-4", "cider-d", "rouge-l", "sacrebleu", "rovist-nr"):
        metric = get_metric(name)
        args = (HYPS, REFS) if metric.needs_references else (HYPS,)
        want = metric.score(*args)
        got: list[Score] = []

        def run(metric: Any = metric, args: Any = args, got: list[Score] = got) -> None:
            for _ in range(3):
                got.append(metric.score(*args))

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(got) == 12 and all(g == want for g in got), name


def test_scoring_a_storyset_twice_changes_nothing() -> None:
    stories = StorySet([Story(str(i), h, photo_ids=(str(i), str(i + 10)), meta={"m": "1"}) for i, h in enumerate(HYPS)])
    before = [(s, dict(s.meta)) for s in stories]
    first, second = score("rovist-nr", stories), score("rovist-nr", stories)
    assert first == second and [(s, dict(s.meta)) for s in stories] == before


@needs_java
def test_references_one_text_or_a_list_each_may_be_mixed() -> None:
    """[text, [text, text]] was "cannot use list references", though the shapes say "one string or a list of
    strings each"; predictions stay one text each."""
    mixed = score("bleu-4", HYPS[:2], [REFS[0][0], [REFS[1][0]]])
    assert mixed == score("bleu-4", HYPS[:2], [[REFS[0][0]], [REFS[1][0]]])
    with pytest.raises(InputError, match="predictions must be one text each"):
        score("rovist-nr", [HYPS[0], [HYPS[1]]])


@pytest.mark.parametrize("make", [lambda keys: (k for k in keys), iter, lambda keys: map(str, keys)])
def test_a_template_given_as_a_generator_is_read_once(make: Any) -> None:
    """score(..., template=(k for k in keys)) checked the template by reading the generator, then scored with
    the exhausted one: "the template holds no sequence keys"."""
    stories = StorySet([Story(f"h{i}", h, photo_ids=(str(i), str(i + 10))) for i, h in enumerate(HYPS[:3])])
    result = score("rovist-nr", stories, template=make(["0-10", "2-12"]))
    assert result.item_ids == ["0-10", "2-12"]
    assert get_metric("rovist-nr").score(stories, template=make(["0-10"])).item_ids == ["0-10"]


@pytest.mark.java
@pytest.mark.skipif(__import__("shutil").which("java") is None, reason="needs Java 8+")
def test_a_meteor_result_can_be_pickled_and_its_corpus_recomputed() -> None:
    """A meteor-coco result held a local function (its pooled corpus formula), so a multiprocessing pool that
    returned one failed with "Can't pickle local object"; the formula is a module-level partial now."""
    import pickle

    from vistkit import score

    hyps = ["a man walks his dog in the park .", "the cake was big and everyone sang ."]
    refs = ["a man is walking a dog in a park .", "the big cake made everyone sing ."]
    s = score("meteor-coco", hyps, refs)
    back = pickle.loads(pickle.dumps(s))
    assert back.corpus == s.corpus and back.corpus_from_stats is not None
    assert back.corpus_from_stats(back.stats) == s.corpus
