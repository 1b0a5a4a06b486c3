"""API probes, round 16: a `Story` took ids the readers refuse (a blank story id, a photo id that is empty or
holds ``-``, the joiner of sequence keys); errors raised through `vistkit.score` named command
line flags (``--key album``, ``--hyp-format arel``, ``--images DIR``) that a notebook has no use for; and
`StorySet.filter`, `by_key` and `group` called the keying ``keying`` where `vistkit.score` calls it ``key``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import vistkit
from vistkit import InputError, Story, StorySet, score


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ ids as the readers take them
@pytest.mark.parametrize("blank", ["", "   ", "\u3000", "\u00a0 "])
def test_a_blank_story_id_is_refused(blank: str) -> None:
    """The readers refuse a record without a story id (or derive it from the photos); ``Story("", ...)`` made a
    story no key could find, and two of them collided as "more than one story has story key ''"."""
    with pytest.raises(InputError, match=r"story_id is empty"):
        Story(blank, "we went out .")
    with pytest.raises(InputError, match=r"story_id is empty"):
        Story(story_id=blank, text="we went out .", photo_ids=("1", "2"))


@pytest.mark.parametrize(
    ("photos", "said"),
    [
        (("1-2", "3"), r"photo id 1 \('1-2'\) contains '-'"),
        (("1", "2-"), r"photo id 2 \('2-'\) contains '-'"),
        (("1", ""), r"photo id 2 is empty"),
        (("1", "  "), r"photo id 2 is empty"),
        (["-"], r"photo id 1 \('-'\) contains '-'"),
    ],
)
def test_a_photo_id_the_sequence_key_cannot_hold_is_refused(photos: tuple[str, ...], said: str) -> None:
    """``("1-2", "3")`` and ``("1", "2-3")`` have one sequence key, ``1-2-3``: two stories of different photos were
    matched to each other's references, silently. The readers refuse such ids; a `Story` now does too."""
    with pytest.raises(InputError, match=said):
        Story("s", "we went out .", photo_ids=photos)


def test_stories_with_colliding_photo_ids_no_longer_share_references() -> None:
    """The consequence: the hypothesis of photos ("1", "2-3") was scored against the reference of ("1-2", "3")."""
    with pytest.raises(InputError, match="contains '-'"):
        score(
            "bleu-1",
            [Story("h", "we went out .", photo_ids=("1", "2-3"))],
            [Story("r", "we went out .", photo_ids=("1-2", "3"))],
        )


def test_a_file_whose_story_ids_are_empty_keys_is_refused_where_it_is(tmp_path: Path) -> None:
    """A ``{story_id: text}`` file with an empty key gave a story of id ``''`` (JSONL said "needs 'story_id'")."""
    path = _write(tmp_path / "d.json", {"": "we went out .", "b": "it was fun ."})
    with pytest.raises(InputError, match=r"d\.json: .*story_id is empty"):
        vistkit.read_stories(path)


def test_ids_the_readers_take_still_make_stories() -> None:
    """What the readers accept a `Story` keeps accepting: ids with spaces around (dropped), '-' in story and album
    ids, photo ids of letters and underscores, NumPy strings."""
    import numpy as np

    story = Story(" 1-2-3 ", "we went .", photo_ids=(" a_1", "b"), album_id="alb-7 ")
    assert (story.story_id, story.photo_ids, story.album_id) == ("1-2-3", ("a_1", "b"), "alb-7")
    assert Story("x", "y .", photo_ids=np.array(["10", "20"])).sequence == "10-20"


# ----------------------------------------------------------------------- Python errors name Python's arguments
def test_a_wrong_key_in_python_names_the_key_argument_not_the_flag() -> None:
    """AREL-style stories matched by story id against album references: the advice was "with --key album, 2 of 2
    hypotheses would", a flag a notebook has no use for; it now says key='album'."""
    refs = [Story(f"{a}#{i}", f"story {a} {i} .", album_id=a) for a in "ab" for i in range(2)]
    hyps = [Story(f"h{a}", f"story {a} .", album_id=a) for a in "ab"]
    with pytest.raises(InputError) as refused:
        score("bleu-1", hyps, refs)
    assert "key='album'" in str(refused.value) and "--key" not in str(refused.value)
    assert score("bleu-1", hyps, refs, key="album").n == 2
    with pytest.raises(InputError) as refused:
        vistkit.get_metric("bleu-1").score(hyps, refs)
    assert "key='album'" in str(refused.value) and "--key" not in str(refused.value)


def test_the_better_key_warning_in_python_names_the_key_argument(capsys: pytest.CaptureFixture[str]) -> None:
    refs = StorySet(
        [
            Story("a", "a .", album_id="a"),
            *(Story(f"{x}#{i}", f"{x} {i} .", album_id=x) for x in "bc" for i in range(2)),
        ],
        source="r",
    )
    hyps = StorySet([Story(x, f"{x} .", album_id=x) for x in "abc"], source="h")
    assert score("bleu-1", hyps, refs).n == 1
    err = capsys.readouterr().err
    assert "with key='album', 3 would" in err and "--key" not in err


def test_hypotheses_keyed_by_album_ids_in_python_say_how_to_make_them_albums() -> None:
    """``{album: text}`` predictions against AREL references: "read the hypotheses as albums too with --hyp-format
    arel --key album" in Python; now it says read_stories(PATH, format='arel') and key='album'."""
    refs = [Story(f"{a}#{i}", f"story {a} {i} .", album_id=a) for a in "ab" for i in range(2)]
    with pytest.raises(InputError) as refused:
        score("bleu-1", [Story("a", "story a ."), Story("b", "story b .")], refs)
    said = str(refused.value)
    assert "format='arel'" in said and "key='album'" in said and "--" not in said


def test_a_photo_folder_that_is_missing_in_python_names_the_images_argument(tmp_path: Path) -> None:
    with pytest.raises(InputError) as refused:
        score("groovist", [Story("1", "a dog .", photo_ids=("1",))], images=tmp_path / "nowhere")
    said = str(refused.value)
    assert "images=" in said and "--images" not in said


def test_the_command_line_keeps_naming_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    refs = _write(tmp_path / "refs.json", {"a": ["story a 0 .", "story a 1 ."], "b": ["story b 0 .", "b 1 ."]})
    hyps = _write(tmp_path / "hyps.json", {"a": "story a .", "b": "story b ."})
    assert main(["score", str(hyps), "-r", str(refs), "-m", "bleu-1", "-q"]) == 1
    err = capsys.readouterr().err
    assert "--hyp-format arel --key album" in err and "key='album'" not in err
    assert main(["score", str(hyps), "-m", "groovist", "--images", str(tmp_path / "nowhere"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "--images DIR" in err and "images=" not in err


# --------------------------------------------------------------------------------- one name for the keying
def test_storyset_methods_take_key_as_score_does() -> None:
    stories = StorySet([Story("1", "a .", photo_ids=("1", "2"), album_id="x"), Story("2", "b .", album_id="y")])
    assert [s.story_id for s in stories.filter(["x"], key="album")] == ["1"]
    assert list(stories.by_key(key="album")) == ["x", "y"]
    assert list(stories.group(key="story")) == ["1", "2"]
    assert stories[0].key(key="sequence") == "1-2"
    assert [s.story_id for s in stories.filter(["2"], "story")] == ["2"]  # positional, as before


def test_the_old_keying_keyword_still_works_with_a_deprecation_warning() -> None:
    stories = StorySet([Story("1", "a .", album_id="x"), Story("2", "b .", album_id="y")])
    with pytest.warns(DeprecationWarning, match=r"keying= is deprecated; use key="):
        assert [s.story_id for s in stories.filter(["y"], keying="album")] == ["2"]
    with pytest.warns(DeprecationWarning, match=r"keying= is deprecated"):
        assert list(stories.by_key(keying="story")) == ["1", "2"]
    with pytest.warns(DeprecationWarning, match=r"keying= is deprecated"):
        assert list(stories.group(keying="album")) == ["x", "y"]
    with pytest.warns(DeprecationWarning, match=r"keying= is deprecated"):
        assert stories[0].key(keying="album") == "x"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stories.filter(["1"], "story")


def test_key_and_keying_together_or_neither_are_refused() -> None:
    stories = StorySet([Story("1", "a .", album_id="x")])
    with pytest.raises(InputError, match=r"give the keying once, as key="):
        stories.filter(["1"], "story", keying="story")
    with pytest.raises(InputError, match=r"filter needs the key the ids are of: key='story'"):
        stories.filter(["1"])  # type: ignore[call-arg]


# ------------------------------------------------------------------------------------------------ empty inputs
@pytest.mark.parametrize("refs", [[["a reference ."]], ["a reference ."], {"0": "a reference ."}])
def test_no_predictions_with_references_says_there_is_nothing_to_score(refs: object) -> None:
    """``score("bleu-1", [], refs)`` (a filter in a notebook that kept nothing) said "Story objects are matched to
    references by key: give the references as Story objects", about stories nobody gave."""
    with pytest.raises(InputError, match=r"^bleu-1: there are no stories to score$"):
        score("bleu-1", [], refs)
    with pytest.raises(InputError, match=r"^bleu-1: there are no stories to score$"):
        vistkit.get_metric("bleu-1").score((), refs)


@pytest.mark.parametrize("refs", [{}, []])
def test_empty_references_are_refused_in_one_sentence(refs: object) -> None:
    """``score("bleu-1", {"a": ...}, {})`` crashed with IndexError (list index out of range), and ``[]`` against a
    list of predictions said the predictions "need references by position too"."""
    hyps: object = {"a": "we went out ."} if isinstance(refs, dict) else ["we went out ."]
    with pytest.raises(
        InputError, match=r"the references are an empty (dict|list): give each prediction its references"
    ):
        score("bleu-1", hyps, refs)


def test_an_empty_storyset_with_references_by_position_says_there_is_nothing_to_score() -> None:
    with pytest.raises(InputError, match=r"^bleu-1: there are no stories to score$"):
        score("bleu-1", StorySet([]), [["a reference ."]])


# ----------------------------------------------------------------------------------- what help() and an IDE show
def test_story_shows_its_fields_as_its_signature() -> None:
    """``help(Story)``, Jupyter's shift-tab and ``inspect.signature(Story)`` showed ``Story(*args, **fields)`` (the
    constructor that refuses misspelt fields hid the fields themselves)."""
    import inspect
    import pydoc

    params = list(inspect.signature(Story).parameters)
    assert params == ["story_id", "text", "sentences", "photo_ids", "album_id", "system", "meta"]
    assert "Story(story_id: " in pydoc.render_doc(Story, renderer=pydoc.plaintext)


def test_the_stories_argument_shows_no_memory_address_in_help() -> None:
    """``help(vistkit.score)`` showed ``hypotheses: 'Stories' = <object object at 0x7f36ab4c4630>``."""
    import inspect

    for fn in (vistkit.score, vistkit.get_metric("bleu-1").score):
        shown = str(inspect.signature(fn))
        assert "object at 0x" not in shown and "hypotheses: 'Stories' = <required>" in shown, shown


def test_a_story_subclass_shows_its_own_fields() -> None:
    import dataclasses
    import inspect

    @dataclasses.dataclass(frozen=True, slots=True)
    class Rated(Story):
        rating: float = 0.0

    assert list(inspect.signature(Rated).parameters)[-1] == "rating"
    assert Rated(story_id="1", text="a .", rating=4.0).rating == 4.0


# ------------------------------------------------------------------------------------------------ Score.resample
H3 = ["we went to the park . it was fun .", "the dog ran . we laughed .", "a b c ."]
R3 = [["we went to a park . fun ."], ["a dog ran . we laughed a lot ."], ["a b ."]]


@pytest.mark.parametrize("metric", ["rovist-nr", "bleu-4"])
def test_resample_refuses_a_table_of_resamples_or_one_number(metric: str) -> None:
    """``score.resample(rng.integers(0, n, size=(1000, n)))`` (1,000 bootstrap draws at once) gave ONE number, the
    mean over all draws, for a mean metric, and a TypeError from inside for BLEU; ``resample(3)`` scored one item."""
    import numpy as np

    result = score(metric, H3, R3 if metric == "bleu-4" else None)
    draws = np.random.default_rng(0).integers(0, 3, size=(5, 3))
    with pytest.raises(InputError, match=r"one resample at a time: a list of row numbers, not a 2-D table"):
        result.resample(draws)
    with pytest.raises(InputError, match=r"a list of row numbers, not one number"):
        result.resample(2)
    assert result.resample(draws[0]) == result.resample(list(draws[0]))


def test_two_predictions_of_one_key_in_python_name_the_key_argument() -> None:
    """ "a hypothesis file must hold one story per key (choose another --key?)" for two Story objects of one id."""
    stories = [Story("1", "we went out ."), Story("1", "it was fun .")]
    with pytest.raises(InputError) as refused:
        score("rovist-nr", stories)
    said = str(refused.value)
    assert "more than one story has story key '1'" in said and "key=" in said and "--key" not in said
    with pytest.raises(InputError, match=r"\(choose another --key\?\)$"):  # validate strips this hint
        StorySet(stories).by_key("story")


def test_the_api_page_snippet_runs_as_written() -> None:
    """docs/api.md's example uses `key=` throughout and runs without a warning."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    [snippet] = re.findall(r"```python\n(.*?)```", page, re.S)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        env: dict[str, object] = {}
        exec(compile(snippet, "docs/api.md", "exec"), env)
    assert [s.story_id for s in env["kept"]] == ["s1"] and list(env["by_id"]) == ["s1", "s2"]  # type: ignore[attr-defined, call-overload]
