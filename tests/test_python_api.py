"""The Python API takes what Hugging Face evaluate users pass: plain lists (by position), dicts (by id) and, for
reference-free metrics, predictions alone; it equals the StorySet path, and anything else is one clear
`VistkitError` (never an AttributeError). A slice of a StorySet is a StorySet."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vistkit
from vistkit import Story, StorySet, VistkitError
from vistkit.metrics.base import as_story_sets, list_metrics

WORDS = ["the", "cat", "sat", "on", "mat", "we", "went", "to", "park", "it", "was", "fun", "a", "dog", "ran"]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(lambda w: " ".join(w) + " .")
story_text = st.lists(text, min_size=1, max_size=4).map(" ".join)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(data=st.lists(st.tuples(story_text, st.lists(story_text, min_size=1, max_size=3)), min_size=1, max_size=6))
def test_lists_by_position_equal_the_storyset_path(data: list[tuple[str, list[str]]]) -> None:
    if "sacrebleu" not in list_metrics():
        pytest.skip("sacrebleu is not registered")
    preds = [p for p, _ in data]
    refs = [r for _, r in data]
    hyps = StorySet(Story(story_id=f"x{i}", text=p) for i, p in enumerate(preds))
    ref_set = StorySet(Story(story_id=f"x{i}", text=t) for i, rs in enumerate(refs) for t in rs)
    expected = vistkit.score("sacrebleu", hyps, ref_set, key="story")
    got = vistkit.score("sacrebleu", preds, refs)  # list of lists
    assert _same(got.corpus, expected.corpus) and got.n == expected.n
    assert [float(v) for v in got.item_scores] == pytest.approx([float(v) for v in expected.item_scores])
    assert got.signature == expected.signature
    if all(len(r) == 1 for r in refs):  # one reference each: a flat list of strings
        flat = vistkit.score("sacrebleu", preds, [r[0] for r in refs])
        assert _same(flat.corpus, expected.corpus)
    by_id = vistkit.score(
        "sacrebleu", {f"x{i}": p for i, p in enumerate(preds)}, {f"x{i}": r for i, r in enumerate(refs)}
    )
    assert _same(by_id.corpus, expected.corpus) and by_id.item_ids == [f"x{i}" for i in range(len(preds))]


@settings(max_examples=25, deadline=None)
@given(preds=st.lists(story_text, min_size=1, max_size=5))
def test_reference_free_metrics_take_predictions_alone(preds: list[str]) -> None:
    if "rovist-nr-jaccard" not in list_metrics():
        pytest.skip("rovist-nr-jaccard is not registered")
    got = vistkit.score("rovist-nr-jaccard", preds)
    expected = vistkit.score(
        "rovist-nr-jaccard", StorySet(Story(story_id=str(i), text=p) for i, p in enumerate(preds)), key="story"
    )
    assert _same(got.corpus, expected.corpus) and got.item_ids == [str(i) for i in range(len(preds))]


def test_the_issue_example() -> None:
    result = vistkit.score("bleu-4", ["a story about a dog ."], [["a reference about a dog ."]])
    assert 0.0 < result.corpus < 1.0 and result.n == 1 and result.keying is not None
    assert result.signature.startswith("bleu-4|nrefs:1|key:story|")
    same = vistkit.score("bleu-4", ["a story about a dog ."], ["a reference about a dog ."])
    assert same.corpus == result.corpus


BAD: list[tuple[Any, Any, str]] = [
    ("a story", [["a reference"]], "cannot score str stories"),
    (42, None, "cannot score int stories"),
    ([1, 2], None, "cannot score list stories"),
    ([["a story"]], [["a reference"]], "predictions must be one text each"),
    (["a", "b"], [["r"]], "2 predictions but 1 references"),
    (["a"], {"0": "r"}, "need references by position too"),
    ({"0": "a"}, ["r"], "need references by id too"),
    ({"0": 3}, {"0": "r"}, "prediction '0' is not a text but int"),
    (["a"], [[]], "must be one text or a non-empty list of texts"),
    (["a"], [[1]], "must be one text or a non-empty list of texts"),
    ([Story(story_id="s", text="a")], ["r"], "give the references as Story objects or a StorySet"),
    (["a"], "a reference", "cannot use str references"),
]


@pytest.mark.parametrize(("hyps", "refs", "message"), BAD)
def test_other_shapes_are_one_clear_error(hyps: Any, refs: Any, message: str) -> None:
    with pytest.raises(VistkitError) as err:
        as_story_sets(hyps, refs)
    assert message in str(err.value) and "\n" not in str(err.value)
    if "sacrebleu" in list_metrics():
        with pytest.raises(VistkitError):
            vistkit.score("sacrebleu", hyps, refs)


def test_dict_references_with_several_texts_and_missing_ids() -> None:
    if "sacrebleu" not in list_metrics():
        pytest.skip("sacrebleu is not registered")
    preds = {"a": "the cat sat on the mat .", "b": "a dog ran in the park ."}
    refs = {"a": ["the cat sat on the mat .", "a cat sat ."]}  # no reference for b: excluded with its reason
    result = vistkit.score("sacrebleu", preds, refs)
    assert result.item_ids == ["a"] and result.corpus == pytest.approx(100.0)
    assert result.excluded == {"b": "no reference story has this key"}


@given(
    st.lists(st.integers(0, 9), max_size=10), st.integers(-12, 12), st.integers(-12, 12), st.sampled_from([1, 2, -1])
)
def test_storyset_slices_are_storysets(ids: list[int], start: int, stop: int, step: int) -> None:
    stories = StorySet([Story(story_id=str(i), text=f"story {i}") for i in ids], source="x.json")
    part = stories[start:stop:step]
    assert isinstance(part, StorySet) and part.source == "x.json"
    assert part.stories == stories.stories[start:stop:step]
    if stories:
        assert isinstance(stories[0], Story) and stories[-1] == stories.stories[-1]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: vistkit.score("bleu-4", {"a": "x ."}, {"a": 5}), "the references of 'a' must be one text"),
        (lambda: vistkit.score("bleu-4", {"a": "x ."}, {"a": {"b": "c"}}), "the references of 'a' must be one text"),
        (lambda: vistkit.score(None, ["x ."]), "a metric is named by a string such as 'bleu-4', not NoneType"),
        (lambda: vistkit.score("rovist-nr", ["x ."], key="bogus"), "key 'bogus' is not a keying; use one of story"),
        (lambda: vistkit.score("rovist-nr", ["x ."], bogus=1), "rovist-nr has no option 'bogus' (its options: sent"),
        (lambda: vistkit.get_metric("bleu-4", n=3), "bleu-4 has no option 'n' (its options: none)"),
    ],
)
def test_api_mistakes_are_one_sentence_vistkit_errors(call: Callable[[], object], message: str) -> None:
    """A wrong argument in the Python API is a VistkitError naming it (never a TypeError from deep inside, and
    never a dict of references silently read as its keys)."""
    with pytest.raises(vistkit.VistkitError) as info:
        call()
    assert message in str(info.value)


def test_api_keying_ignores_case_and_spaces() -> None:
    assert vistkit.score("rovist-nr", ["we ran . we sat ."], key=" Story ").item_ids == ["0"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Story("a", None), "a Story's text must be a string, not NoneType"),  # type: ignore[arg-type]
        (lambda: Story(None, "x"), "a Story's story_id must be a string, not NoneType"),  # type: ignore[arg-type]
        (lambda: StorySet([1, 2]), "a StorySet is made of Story objects; item 0 is a int"),  # type: ignore[list-item]
        (lambda: StorySet(None), "a StorySet is made of Story objects, not NoneType"),  # type: ignore[arg-type]
    ],
)
def test_stories_of_the_wrong_type_are_refused_when_made(call: Callable[[], object], message: str) -> None:
    """StorySet([1, 2]) was accepted and failed later, far away; Story(None, ...) was accepted."""
    with pytest.raises(VistkitError, match=re.escape(message)):
        call()


def test_a_ranker_takes_texts_as_score_does() -> None:
    """`preference` (and `vistkit.metrics.base.prefer`) took only Story objects: a list of texts failed with an
    AttributeError; texts are now stories, so the same pair gives the same number either way."""
    from vistkit.metrics.base import prefer

    a, b = "we went to the park . the dog ran fast .", "the the the . the the the ."
    by_text = prefer("story-ranker-v1", [a], [b])
    by_story = prefer("story-ranker-v1", [Story("x", a)], [Story("y", b)])
    assert by_text.tolist() == by_story.tolist() and by_text[0] > 0
