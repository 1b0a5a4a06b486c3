"""API probes, round 13: what a researcher does in a notebook with `vistkit.score`, scorers, `Score` and `StorySet`.

A `Score` of many stories showed every id in its repr (megabytes at the end of a notebook cell); NumPy strings
(``np.str_``) were refused as "must be a string, not str_"; `StorySet.filter` given ints kept nothing, silently;
a StorySet indexed by a NumPy array, or given a ``map_text`` function that returns no text, failed from inside;
two StorySets could not be joined with ``+``; Hugging Face evaluate's ``predictions=`` was "missing 1 required
positional argument"; a reference-based metric without references said ``--references FILE`` in Python.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vistkit
from vistkit import InputError, Story, StorySet, VistkitError, get_metric, score
from vistkit.metrics.base import Score, mean_score

HYPS = [f"we went to the park number {i} . it was fun and sunny . then we went home ." for i in range(4)]
REFS = [f"we went to a park {i} . it was sunny . we went home after ." for i in range(4)]


def _set(n: int = 5, source: str | None = "f.json") -> StorySet:
    return StorySet([Story(str(i), f"text {i} .") for i in range(n)], source=source)


# ------------------------------------------------------------------------------------------------ Score repr
def test_the_repr_of_a_large_score_is_a_short_summary() -> None:
    """200,000 items: the dataclass repr printed every id and every exclusion (4 MB in a notebook cell)."""
    n = 200_000
    ids = [f"id{i}" for i in range(n)]
    result = mean_score("x", ids, np.linspace(0, 1, n), "x|sig", excluded={i: "why" for i in ids[::2]})
    shown = repr(result)
    assert len(shown) < 1_000 and str(result) == shown
    assert "metric='x'" in shown and "n=200,000 of 200,000 items" in shown and "excluded=100,000" in shown
    assert "signature='x|sig'" in shown and "id199999" not in shown


def test_the_repr_of_a_real_score_names_metric_corpus_and_signature() -> None:
    result = score("sacrebleu", HYPS, REFS)
    shown = repr(result)
    assert shown.startswith("Score(metric='sacrebleu', corpus=") and result.signature in shown
    assert "keying='story'" in shown
    undefined = score("rovist-nr", ["one sentence only ."])
    assert "corpus=nan" in repr(undefined) and "n=0 of 1 items" in repr(undefined)


# ------------------------------------------------------------------------------------------------ NumPy strings
def test_numpy_strings_are_strings_in_every_story_field() -> None:
    """Story(np.str_("a"), ...) was "story_id must be a string, not str_" (and photo ids, album, sentences)."""
    ids = np.array(["45530", "45531"])
    story = Story(ids[0], np.str_("we went ."), sentences=np.array(["we went ."]), photo_ids=ids, album_id=ids[1])
    want = Story("45530", "we went .", sentences=("we went .",), photo_ids=("45530", "45531"), album_id="45531")
    assert story == want
    for value in (story.story_id, story.text, story.album_id, *story.photo_ids, *(story.sentences or ())):
        assert type(value) is str
    assert type(Story("a", "t", system=np.str_("model")).system) is str


def test_a_str_subclass_is_taken_as_its_plain_text() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return self.upper()

    story = Story(Loud("abc"), Loud("we went ."))
    assert (story.story_id, story.text) == ("abc", "we went .")
    assert type(story.story_id) is str and type(story.text) is str


# ------------------------------------------------------------------------------------------------ StorySet
def test_filter_keys_that_are_not_texts_are_refused() -> None:
    """ids are texts: filter([0, 1], "story") kept no story, silently."""
    stories = _set()
    with pytest.raises(InputError, match=r"key 0 is int.*str\(0\)"):
        stories.filter([0, 1], "story")
    with pytest.raises(InputError, match="key 2 is int"):
        stories.filter(["0", 2], "story")
    assert [s.story_id for s in stories.filter(np.array(["1", "3"]), "story")] == ["1", "3"]
    assert [s.story_id for s in stories.filter((k for k in ["4"]), "story")] == ["4"]


@pytest.mark.parametrize("index", [np.array([0, 1]), np.array([True, False]), [0, 1], 1.0, "0"])
def test_indexing_a_storyset_by_what_is_not_a_position(index: Any) -> None:
    """stories[np.array([0, 1])] failed from inside: "only integer scalar arrays can be converted"."""
    with pytest.raises(InputError, match="indexed by position"):
        _set()[index]


def test_a_slice_of_what_is_not_positions_is_one_sentence() -> None:
    with pytest.raises(InputError, match="slice"):
        _set()["a":]
    with pytest.raises(InputError, match="step"):
        _set()[::0]


def test_map_text_says_what_its_function_returned() -> None:
    """A function returning None was "a Story's text must be a string (Story(story_id='1', text=...))"."""
    with pytest.raises(InputError, match=r"map_text: the function returned NoneType for story '0', not a text"):
        _set().map_text(lambda text: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(InputError, match="returned int"):
        StorySet([Story("s", "a b", sentences=("a", "b"))]).map_text(len)  # type: ignore[arg-type]


def test_storysets_concatenate() -> None:
    """stories[:2] + stories[2:] was "unsupported operand type(s) for +"."""
    stories = _set()
    joined = stories[:2] + stories[2:]
    assert isinstance(joined, StorySet) and list(joined) == list(stories) and joined.source == "f.json"
    assert list(stories[:1] + [stories[3]]) == [stories[0], stories[3]]  # noqa: RUF005
    assert list([stories[3]] + stories[:1]) == [stories[3], stories[0]]  # noqa: RUF005
    other = StorySet([Story("x", "y")], source="g.json")
    assert (stories + other).source == "f.json + g.json"
    assert (StorySet([Story("x", "y")]) + StorySet([Story("z", "y")])).source is None
    with pytest.raises(TypeError):
        stories + "text"  # type: ignore[operator]
    with pytest.raises(InputError, match="item 5 is a str"):
        stories + ["text"]  # type: ignore[operator]  # noqa: RUF005
    with pytest.raises(InputError, match="given twice"):  # a file joined with itself is still found out
        (stories + stories).group("story")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.text(alphabet="ab .", min_size=1, max_size=4), max_size=8),
    st.integers(-10, 10),
    st.integers(-10, 10),
    st.one_of(st.none(), st.integers(-3, 3).filter(bool)),
)
def test_slicing_and_joining_act_as_on_a_list(texts: list[str], a: int, b: int, step: int | None) -> None:
    stories = [Story(f"s{i}", t) for i, t in enumerate(texts)]
    ss = StorySet(stories, source="f")
    assert list(ss[a:b:step]) == stories[a:b:step] and ss[a:b:step].source == "f"
    assert list(ss[:a] + ss[a:]) == stories


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=12))
def test_an_id_is_normalised_once_and_for_all(raw: str) -> None:
    """Story(Story(x).story_id) keeps the id Story(x) made; the story pickles to an equal one."""
    try:
        story = Story(raw, "t")
    except InputError:
        return
    again = Story(story.story_id, "t")
    assert again.story_id == story.story_id and again == story
    assert pickle.loads(pickle.dumps(story)) == story
    assert type(story.story_id) is str


# ------------------------------------------------------------------------------------------------ score()
def test_hugging_face_predictions_keyword_says_what_to_pass() -> None:
    """score("sacrebleu", predictions=..., references=...) was "missing 1 required positional argument"."""
    with pytest.raises(InputError, match=r"no stories to score were given.*hypotheses=.*predictions="):
        score("sacrebleu", predictions=HYPS, references=REFS)  # type: ignore[call-arg]
    with pytest.raises(InputError, match="no stories to score were given"):
        score("rovist-nr")  # type: ignore[call-arg]
    assert score("sacrebleu", hypotheses=HYPS, references=REFS) == score("sacrebleu", HYPS, REFS)


def test_missing_references_in_python_say_references_not_a_flag() -> None:
    with pytest.raises(InputError, match=r"needs reference stories: pass them as references="):
        score("sacrebleu", HYPS)
    with pytest.raises(InputError, match=r"needs reference stories"):
        get_metric("sacrebleu").score(HYPS)


# ------------------------------------------------------------------------------------------------ what was fine
@pytest.mark.parametrize(
    ("hyps", "refs", "message"),
    [
        (None, None, "cannot score NoneType stories"),
        (np.array(HYPS), REFS, r"pass array\.tolist\(\)"),
        ((h for h in HYPS), REFS, r"pass list\(\.\.\.\)"),
        ([h.encode() for h in HYPS], REFS, "decode it"),
        ([[h] for h in HYPS], REFS, "predictions must be one text each"),
        (HYPS, [[r] for r in REFS[:-1]] + [[]], "non-empty list of texts"),
        ({"a": HYPS[0]}, {"a": None}, "non-empty list of texts"),
        ([], [], "no stories to score"),
    ],
)
def test_shapes_score_does_not_take_are_one_sentence(hyps: Any, refs: Any, message: str) -> None:
    with pytest.raises(VistkitError, match=message) as info:
        score("sacrebleu", hyps, refs)
    assert "\n" not in str(info.value)


def test_tuples_and_numpy_strings_score_as_lists() -> None:
    want = score("sacrebleu", HYPS, REFS)
    assert score("sacrebleu", tuple(HYPS), tuple(REFS)) == want
    assert score("sacrebleu", [np.str_(h) for h in HYPS], np.array(REFS).tolist()) == want


def test_scores_of_two_metrics_are_not_equal_and_do_not_order() -> None:
    a, b = score("sacrebleu", HYPS, REFS), score("rovist-nr", HYPS)
    assert a != b and not (a == b)
    with pytest.raises(TypeError):
        _ = a < b  # type: ignore[operator]


def test_a_scorer_is_reused_after_an_error() -> None:
    metric = get_metric("sacrebleu")
    want = metric.score(HYPS, REFS)
    for bad in (None, [], [1, 2], {"a": None}):
        with pytest.raises(InputError):
            metric.score(bad, REFS)
    assert metric.score(HYPS, REFS) == want


def test_threads_with_distinct_stories_share_one_scorer() -> None:
    metric = get_metric("rovist-nr")
    sets = [[f"thread {k} story {i} . it was fun number {i * k} . then home ." for i in range(5)] for k in range(6)]
    want = [metric.score(s) for s in sets]
    got: dict[int, Score] = {}

    def run(k: int) -> None:
        got[k] = metric.score(sets[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [got[k] for k in range(6)] == want


def test_import_vistkit_loads_no_heavy_module() -> None:
    code = (
        "import sys, vistkit; vistkit.Story; vistkit.StorySet;"
        "print(sorted(m for m in ('numpy', 'torch', 'pandas', 'transformers', 'sacrebleu') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
    assert re.fullmatch(r"\d+\.\d+\.\d+", vistkit.__version__)


# ------------------------------------------------------------------------------------------------ dicts by id
def test_predictions_by_id_without_a_reference_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    """{id: text} predictions whose ids the references lack were left out silently: a corpus score over 1 of 3
    predictions, with nothing on screen (the CLI says "2 item(s) excluded" under its table)."""
    hyps = {"a": HYPS[0], "b": HYPS[1], "c": HYPS[2]}
    result = score("sacrebleu", hyps, {"a": REFS[0], "B": REFS[1]})
    assert result.item_ids == ["a"] and set(result.excluded) == {"b", "c"}
    err = capsys.readouterr().err
    assert "warning: 2 of 3 predictions have no reference with the same id ('b', 'c')" in err
    assert "the corpus score covers the other 1" in err and "excluded" in err
    score("sacrebleu", {"a": HYPS[0]}, {"a": REFS[0], "z": REFS[1]})  # a reference without prediction: no word
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------------ the package
def test_the_package_lists_and_exports_what_a_notebook_uses() -> None:
    """dir(vistkit) (a notebook's tab completion) lacked score, get_metric and read_stories (loaded lazily);
    `except vistkit.UnknownMetricError:` itself failed with AttributeError, and so did vistkit.Score."""
    names = dir(vistkit)
    for name in ("score", "get_metric", "list_metrics", "read_stories", "Score", "Story", "StorySet"):
        assert name in names and name in vistkit.__all__
    from vistkit.errors import OutputError, UnavailableMetricError, UnknownMetricError

    assert vistkit.Score is Score
    assert (vistkit.UnknownMetricError, vistkit.UnavailableMetricError, vistkit.OutputError) == (
        UnknownMetricError,
        UnavailableMetricError,
        OutputError,
    )
    with pytest.raises(vistkit.UnknownMetricError):
        vistkit.get_metric("bleu-5")
    with pytest.raises(AttributeError, match="no attribute 'get_metrics'; did you mean get_metric"):
        vistkit.get_metrics  # noqa: B018
    assert all(hasattr(vistkit, name) for name in vistkit.__all__)
