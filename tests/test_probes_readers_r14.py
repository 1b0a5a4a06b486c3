"""Story-reader and validator probes, round 14: each test pins one class of problem a QA probe of ``vistkit score
FILE`` found.

Classes: one story record written as a JSON object (``{"story_id": "1", "text": "..."}``, ``json.dump(record)``)
was read as a ``{story_id: text}`` dict, so its field names became story ids and its id a story; a storylet field
read with ``--hyp-field`` (``FILE:FIELD``) that repeats one sentence on every photo of a story (a model's
degenerate output) was taken for a story-level field (PR-VIST's ``predicted_story``), so that story was read as
one sentence instead of five.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vistkit.data.images import attach_photos
from vistkit.data.readers import read_stories
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError


# ------------------------------------------------------------------------- one story record as a JSON object
@pytest.mark.parametrize(
    "record",
    [
        {"story_id": "1", "text": "we went to the park . it was fun ."},
        {"story_id": "1", "text": "we went to the park . it was fun .", "photo_ids": "7-8-9"},
        {"story_id": 1, "story": "we went to the park . it was fun .", "photo_ids": ["7", "8", "9"]},
        {
            "album_id": "5",
            "photo_sequence": ["7", "8", "9"],
            "story_text_normalized": "we went to the park . it was fun .",
        },
    ],
)
def test_one_record_object_is_one_story_not_a_story_dict(tmp_path: Path, record: dict[str, object]) -> None:
    p = tmp_path / "one.json"
    p.write_text(json.dumps(record, indent=2), encoding="utf-8")
    stories = list(read_stories(p))
    assert len(stories) == 1, [(s.story_id, s.text) for s in stories]  # was: one "story" per field
    assert stories[0].text == "we went to the park . it was fun ."
    assert stories[0].story_id in ("1", "7-8-9")


def test_one_record_object_piped_in_pretty_printed_is_one_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    text = json.dumps({"story_id": "1", "text": "we went to the park ."}, indent=2)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    stories = list(read_stories("-"))
    assert [(s.story_id, s.text) for s in stories] == [("1", "we went to the park .")]


def test_one_record_object_with_a_bad_field_names_the_record(tmp_path: Path) -> None:
    p = tmp_path / "one.json"
    p.write_text(json.dumps({"story_id": None, "text": "a ."}), encoding="utf-8")
    with pytest.raises(InputError, match=r"record 1.*story_id"):
        read_stories(p)


@pytest.mark.parametrize(
    "data",
    [
        {"1": "we went .", "2": "it was fun ."},  # story ids
        {"text": "we went .", "2": "it was fun ."},  # an id that happens to be a field name, among others
        {"45530_1_2_3": "we went ."},  # tapm
    ],
)
def test_story_dicts_are_still_story_dicts(tmp_path: Path, data: dict[str, str]) -> None:
    p = tmp_path / "d.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    assert [s.story_id for s in read_stories(p)] == list(data)


def test_cli_scores_one_record_object_as_one_story(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    p = tmp_path / "one.json"
    p.write_text(json.dumps({"story_id": "s1", "text": "we went to the park . it was fun ."}), encoding="utf-8")
    assert main(["score", str(p), "-m", "rovist-nr", "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"]["rovist-nr"] == 1, out  # was 2: "story_id" -> "s1", "text" -> the story


# ------------------------------------------------------------- a per-storylet field that repeats one sentence
def _sis(path: Path, stories: dict[str, list[str]], field: str) -> Path:
    recs = []
    for n, (sid, sents) in enumerate(stories.items()):
        for i, s in enumerate(sents):
            recs.append(
                {
                    "story_id": sid,
                    "photo_flickr_id": str(100 * n + i),
                    "worker_arranged_photo_order": i,
                    "text": f"human {i} .",
                    field: s,
                }
            )
    path.write_text(json.dumps({"annotations": [[r] for r in recs]}), encoding="utf-8")
    return path


def test_repeated_sentence_of_a_per_storylet_field_is_kept_once_per_photo(tmp_path: Path) -> None:
    p = _sis(
        tmp_path / "sis.json",
        {"a": ["we went .", "it was fun .", "we ate ."], "b": ["the dog ran ."] * 3},
        "generated",
    )
    by_id = {s.story_id: s for s in read_stories(p, field="generated")}
    assert by_id["b"].text == "the dog ran . the dog ran . the dog ran ."  # was "the dog ran ." (one sentence)
    assert by_id["b"].sentences == ("the dog ran .",) * 3
    assert by_id["a"].sentences == ("we went .", "it was fun .", "we ate .")


def test_story_level_field_is_still_read_once(tmp_path: Path) -> None:
    """PR-VIST's predicted_story: the whole story repeated on each storylet of the story."""
    p = _sis(
        tmp_path / "sis.json",
        {"a": ["we went . it was fun ."] * 3, "b": ["the dog ran . it slept ."] * 2, "c": ["one photo ."]},
        "predicted_story",
    )
    by_id = {s.story_id: s for s in read_stories(p, field="predicted_story")}
    assert by_id["a"].text == "we went . it was fun ."
    assert by_id["b"].text == "the dog ran . it slept ."
    assert by_id["c"].text == "one photo ."


def test_pr_vist_predicted_story_reads_as_before() -> None:
    path = Path("/work/shared/data/pr-vist/PR_VIST.json.zip")
    if not path.exists():
        pytest.skip("PR-VIST data not here")
    stories = read_stories(path, field="predicted_story")
    assert all(s.sentences is None for s in stories)
    humans = read_stories(path)
    assert len(stories) == len(humans)


# ------------------------------------------------------------------ a photo map that misses or contradicts stories
def _set(*stories: Story) -> StorySet:
    return StorySet(list(stories), source="s.json")


def test_photo_map_matching_no_story_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A map keyed otherwise (by album, by sequence, ids written 45530.0) gave no story photos; each was then left
    out as "the story has no photo ids (give a photo map ...)", though a map was given."""
    stories = _set(Story("45530", "a ."), Story("45531", "b ."))
    out = attach_photos(stories, {"45530.0": ("1", "2"), "45531.0": ("3", "4")})
    assert all(not s.photo_ids for s in out)
    err = capsys.readouterr().err
    assert "warning:" in err and "2 of the 2 stories" in err and "'45530'" in err and "'45530.0'" in err, err


def test_photo_map_missing_some_stories_names_how_many(capsys: pytest.CaptureFixture[str]) -> None:
    stories = _set(Story("1", "a ."), Story("2", "b ."), Story("3", "c .", photo_ids=("9",)))
    out = attach_photos(stories, {"1": ("5", "6")})
    assert [s.photo_ids for s in out] == [("5", "6"), (), ("9",)]
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "1 of the 2 stories without photo ids" in err and "'2'" in err, err


def test_photo_map_contradicting_a_storys_own_photos_warns(capsys: pytest.CaptureFixture[str]) -> None:
    """A story that has photo ids of its own kept them and the map's other ids were dropped without a word."""
    stories = _set(Story("1", "a .", photo_ids=("1", "2")), Story("2", "b .", photo_ids=("3", "4")))
    out = attach_photos(stories, {"1": ("2", "1"), "2": ("3", "4")})
    assert [s.photo_ids for s in out] == [("1", "2"), ("3", "4")]  # the story's own are used, as documented
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "1 story" in err and "'1'" in err and "1-2" in err and "2-1" in err, err


def test_photo_map_that_fits_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    stories = _set(Story("1", "a ."), Story("2", "b .", photo_ids=("3", "4")))
    out = attach_photos(stories, {"1": ("5",), "2": ("3", "4"), "other": ("7",)})
    assert [s.photo_ids for s in out] == [("5",), ("3", "4")]
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------- a CSV cell over the csv module's limit
@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_csv_story_over_131072_characters_reads_when_the_story_limit_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Python's csv module stops at a cell of 131,072 characters: with VISTKIT_MAX_STORY_CHARS raised, a story
    that JSONL reads was "malformed CSV (field larger than field limit (131072))" in CSV."""
    monkeypatch.setenv("VISTKIT_MAX_STORY_CHARS", "300000")
    sep = "\t" if suffix == ".tsv" else ","
    text = "word " * 30_000
    p = tmp_path / f"big{suffix}"
    p.write_text(f"story_id{sep}text{sep}sentences\n1{sep}{text}{sep}{text}\n", encoding="utf-8")
    (story,) = read_stories(p)
    assert len(story.text) == len(text.strip()) or story.text.strip() == text.strip()


def test_csv_story_over_the_story_limit_names_the_limit_not_malformed_csv(tmp_path: Path) -> None:
    p = tmp_path / "big.csv"
    p.write_text("story_id,text\n1," + "word " * 30_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="VISTKIT_MAX_STORY_CHARS") as err:
        read_stories(p)
    assert "malformed" not in str(err.value)


def test_csv_quote_never_closed_over_many_lines_is_named(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    rows = "".join(f"{i},we went out number {i} .\n" for i in range(30_000))
    p.write_text('story_id,text\n0,"oops\n' + rows, encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: a quoted cell .* never closed"):
        read_stories(p)


# ------------------------------------------------------------------ VIST's description-in-isolation (DII) file
def _dii(path: Path) -> Path:
    recs = [
        [
            {
                "original_text": "A man on a bench.",
                "album_id": "1",
                "photo_flickr_id": str(10 + i),
                "setting": "first-2-pick-and-tell",
                "worker_id": "W",
                "photo_order_in_story": i,
                "tier": "descriptions-in-isolation",
                "text": "a man on a bench .",
            }
        ]
        for i in range(5)
    ]
    path.write_text(json.dumps({"type": "descriptions-in-isolation", "annotations": recs}), encoding="utf-8")
    return path


def test_dii_file_is_named_as_such(tmp_path: Path) -> None:
    """It said "storylet 1 has no field 'story_id'", as if a SIS file were damaged."""
    p = _dii(tmp_path / "test.description-in-isolation.json")
    with pytest.raises(InputError, match=r"description-in-isolation.*story-in-sequence") as err:
        read_stories(p)
    assert "no field 'story_id'" not in str(err.value)
    for fmt in ("sis", "storylets"):
        data = json.loads(p.read_text())
        q = tmp_path / f"{fmt}.json"
        q.write_text(json.dumps(data if fmt == "sis" else [r[0] for r in data["annotations"]]), encoding="utf-8")
        with pytest.raises(InputError, match="description-in-isolation"):
            read_stories(q, format=fmt)


def test_bare_list_of_dii_records_is_named_as_such(tmp_path: Path) -> None:
    data = json.loads(_dii(tmp_path / "d.json").read_text())
    q = tmp_path / "list.json"
    q.write_text(json.dumps([r[0] for r in data["annotations"]]), encoding="utf-8")
    with pytest.raises(InputError, match=r"storylet 1 is a caption of VIST's description-in-isolation"):
        read_stories(q)


# ------------------------------------------------------------- validate given a story file that is no submission
def _validate_text(tmp_path: Path, name: str, content: str) -> str:
    from vistkit.data.validate import validate_submission

    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    report = validate_submission(p)
    assert not report.ok
    return "\n".join(report.lines())


def test_validate_names_a_jsonl_story_file(tmp_path: Path) -> None:
    """It said only "Incorrect JSON syntax ... line 2, column 1: Extra data"."""
    rows = [{"story_id": str(i), "photo_ids": ["1", "2"], "text": "a b ."} for i in range(2)]
    out = _validate_text(tmp_path, "preds.json", "".join(json.dumps(r) + "\n" for r in rows))
    assert "[Error] Incorrect JSON syntax (JsonSyntaxException)." in out  # the challenge's line stays
    assert "JSONL" in out and "output_stories" in out and "write_challenge" in out, out


def test_validate_names_a_csv_story_file(tmp_path: Path) -> None:
    out = _validate_text(tmp_path, "preds.json", "story_id,photo_ids,text\n1,1-2,a b .\n")
    assert "CSV" in out and "write_challenge" in out, out


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"annotations": [[{"story_id": "1", "text": "a ."}]]}, "SIS"),
        ({"story_id": "1", "photo_ids": ["1", "2"], "text": "a ."}, "one story record"),
        ({"45530_1_2_3_4_5": "a ."}, "tapm"),
        ({"team_name": "t", "Output_Stories": []}, "'Output_Stories'"),
        ({"team_name": "t", "output_stories ": []}, "'output_stories '"),
    ],
)
def test_validate_names_what_a_json_file_without_output_stories_is(
    tmp_path: Path, data: dict[str, object], said: str
) -> None:
    out = _validate_text(tmp_path, "s.json", json.dumps(data))
    assert "The file has no 'output_stories' list" in out and said in out, out


@pytest.mark.parametrize(
    "content", ['{"team_name": "t"}', '{"output_stories": [}', "// a comment\n{}", '{"a": 1}\n{"b": 2}\n']
)
def test_validate_does_not_call_a_broken_submission_a_story_file(tmp_path: Path, content: str) -> None:
    out = _validate_text(tmp_path, "s.json", content)
    assert "write_challenge" not in out and "story file" not in out, out


def test_validate_names_a_dii_file(tmp_path: Path) -> None:
    from vistkit.data.validate import validate_submission

    out = "\n".join(validate_submission(_dii(tmp_path / "d.json")).lines())
    assert "description-in-isolation (DII)" in out and "story-in-sequence" not in out, out


# ----------------------------------------------------------------- ids pandas wrote as floats (45530.0) in CSV
@pytest.mark.parametrize(
    ("content", "column"),
    [
        ("story_id,text\n45530.0,we went .\n45531.0,it was fun .\n", "story_id"),
        ("story_id,album_id,text\n1,44277.0,we went .\n2,,it was fun .\n", "album_id"),
        ("photo_ids,text\n1741642.0-1741640.0,we went .\n", "photo_ids"),
    ],
)
def test_csv_ids_written_as_floats_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, column: str
) -> None:
    """pandas writes an integer column holding a missing value as floats: story 45530 became '45530.0' and
    matched no reference ("no hypothesis shares a story key with the references ... check --key")."""
    p = tmp_path / "s.csv"
    p.write_text(content, encoding="utf-8")
    read_stories(p)  # read as given
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and f"'{column}'" in err and ".0" in err and "line 2" in err, err


def test_csv_ids_that_only_sometimes_end_in_dot_0_do_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "s.csv"
    p.write_text("story_id,text\n1.0,we went .\nv2,it was fun .\n", encoding="utf-8")
    read_stories(p)
    assert "warning" not in capsys.readouterr().err


# --------------------------------------------- JSONL holding U+2028 / U+0085 raw in a string (ensure_ascii=False)
_RAW_SEPARATORS = ["\u2028", "\u2029", "\x85"]


def _jsonl_raw(sep: str) -> str:
    rows = [{"story_id": "1", "text": f"we went {sep} out ."}, {"story_id": "2", "text": "it was fun ."}]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.mark.parametrize("sep", _RAW_SEPARATORS)
def test_jsonl_with_a_raw_line_separator_in_a_string_is_sniffed_as_jsonl(tmp_path: Path, sep: str) -> None:
    """JSON allows U+2028, U+2029 and U+0085 raw inside a string (json.dumps(ensure_ascii=False) writes them so);
    the format sniffer ended the first line there, so a .txt file or piped-in text was "invalid JSON at line 2,
    column 1: Extra data" (a .jsonl file read)."""
    p = tmp_path / "s.txt"
    p.write_text(_jsonl_raw(sep), encoding="utf-8", newline="")
    assert [s.story_id for s in read_stories(p)] == ["1", "2"]


@pytest.mark.parametrize("sep", _RAW_SEPARATORS)
def test_jsonl_with_a_raw_line_separator_piped_in_reads(monkeypatch: pytest.MonkeyPatch, sep: str) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_jsonl_raw(sep).encode())))
    assert [s.story_id for s in read_stories("-")] == ["1", "2"]


def test_jsonl_in_a_json_file_with_a_raw_line_separator_says_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(_jsonl_raw("\u2028"), encoding="utf-8", newline="")
    with pytest.raises(InputError, match="which is JSONL"):
        read_stories(p)


# ------------------------------------------------------------ SIS annotations grouped one list per story
def test_sis_annotations_grouped_per_story_read_as_the_one_per_storylet_form(tmp_path: Path) -> None:
    """``{"annotations": [[s1, ..., s5], ...]}`` (a story's storylets in one list) said "storylet 1 is not an
    object"; it holds the same storylets as the release's ``[[s1], [s2], ...]``."""
    flat = tmp_path / "flat.json"
    _sis(flat, {"a": ["we went .", "it was fun ."], "b": ["the dog ran .", "it slept ."]}, "extra")
    data = json.loads(flat.read_text())
    recs = [r[0] for r in data["annotations"]]
    grouped = tmp_path / "grouped.json"
    grouped.write_text(json.dumps({"annotations": [recs[:2], recs[2:]]}), encoding="utf-8")
    assert list(read_stories(grouped)) == list(read_stories(flat))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"annotations": [recs[:2], [[recs[2]]]]}), encoding="utf-8")
    with pytest.raises(InputError, match="storylet 3 is not an object"):
        read_stories(bad)


# ---------------------------------------------------------- a file name with a space or a CR stuck to its end
@pytest.mark.parametrize("junk", [" ", "\r", "\n", "\t", " \r"])
def test_missing_file_whose_name_has_spaces_or_cr_around_names_the_real_file(tmp_path: Path, junk: str) -> None:
    """A file list saved on Windows (``for f in $(cat list.txt)``) gives ``s.json\\r``: the error printed the CR
    raw, so the terminal showed ": no such file" over the name; a pasted trailing space was invisible."""
    real = tmp_path / "s.json"
    real.write_text(json.dumps({"1": "a ."}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_stories(str(real) + junk)
    text = str(err.value)
    assert text.isprintable(), text
    assert f"{real}" in text and "exists" in text, text


def test_cli_names_the_file_without_the_carriage_return(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    real = tmp_path / "s.json"
    real.write_text(json.dumps({"1": "a ."}), encoding="utf-8")
    assert main(["score", f"{real}\r", "-m", "rovist-nr"]) != 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\\r" in err and "exists" in err, err


# ------------------------------------------------- storylets without their order read as one story per sentence
def test_storylets_without_their_order_are_refused_not_read_as_stories(tmp_path: Path) -> None:
    """A bare list of storylets lacking worker_arranged_photo_order was read as story records: each sentence a
    story of the same id, so as references every sentence counted as a whole reference story."""
    recs = [{"story_id": "45530", "photo_flickr_id": str(10 + i), "text": f"sentence {i} ."} for i in range(5)]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(recs), encoding="utf-8")
    with pytest.raises(InputError, match="worker_arranged_photo_order"):
        read_stories(p)
