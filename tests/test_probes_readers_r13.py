"""Story-reader and validator probes, round 13: each test pins one class of problem a QA probe of ``vistkit score
FILE`` and ``vistkit validate`` found.

Classes: a JSONL / CSV / JSON-records story whose ``sentences`` held other words than its ``text`` was read without
a word (metrics read the text, but ``-O METRIC.sentences=source`` reads the sentences: two different stories);
``vistkit validate`` held a submission about seven times over in memory (the bytes, the text, two parses, the
stories and every story's text twice).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from cli_probe_helpers import challenge_submission

from vistkit.data.readers import read_stories
from vistkit.data.validate import validate_submission


# ------------------------------------------------------------------------- sentences that disagree with the text
def _jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_sentences_other_than_text_warn_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _jsonl(
        tmp_path / "s.jsonl",
        [
            {"story_id": "a", "text": "we went . it was fun .", "sentences": ["we went .", "it was fun ."]},
            {"story_id": "b", "text": "the dog ran .", "sentences": ["the cat sat .", "it slept ."]},
            {"story_id": "c", "text": "one .", "sentences": "two ."},
        ],
    )
    stories = read_stories(p)
    assert [s.sentences for s in stories][1] == ("the cat sat .", "it slept .")  # kept as given
    err = capsys.readouterr().err
    assert err.count("warning:") == 1, err  # one warning per file, not one per story
    assert f"{p} line 2" in err and "2 stories" in err and "sentences=source" in err, err


@pytest.mark.parametrize(
    "sentences",
    [
        ["we  went .", "it was fun ."],  # spaces differ only
        "we went . ||| it was fun .",  # the |||-joined form
        ["we went .", "", "it was fun ."],  # an empty sentence adds no word
        ["we went .\n", "it\twas fun ."],
    ],
)
def test_sentences_that_only_space_differently_do_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sentences: object
) -> None:
    p = _jsonl(tmp_path / "s.jsonl", [{"story_id": "a", "text": "we went .  it was fun .", "sentences": sentences}])
    read_stories(p)
    assert "warning" not in capsys.readouterr().err


def test_csv_and_json_records_sentences_other_than_text_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "s.csv"
    csv_path.write_text(
        "story_id,text,sentences\na,x y .,x y .\nb,the dog ran .,the cat sat . ||| z\n", encoding="utf-8"
    )
    read_stories(csv_path)
    err = capsys.readouterr().err
    assert f"{csv_path} line 3" in err and "1 story" in err, err
    js = tmp_path / "s.json"
    js.write_text(json.dumps([{"story_id": "a", "text": "p q .", "sentences": ["r s ."]}]), encoding="utf-8")
    read_stories(js)
    err = capsys.readouterr().err
    assert f"{js} record 1" in err, err


def test_cli_score_warns_about_sentences_other_than_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    hyp = _jsonl(tmp_path / "h.jsonl", [{"story_id": "a", "text": "a dog ran .", "sentences": ["a cat sat ."]}])
    ref = _jsonl(tmp_path / "r.jsonl", [{"story_id": "a", "text": "a dog ran ."}])
    code = main(["score", str(hyp), "-r", str(ref), "-m", "bleu-1", "--key", "story"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"{hyp} line 1" in captured.err and "sentences" in captured.err, captured.err


# -------------------------------------------------------------------------------- validate's memory per byte
def test_validate_holds_a_submission_few_times_over(tmp_path: Path) -> None:
    """A 235 MB submission peaked at 1.7 GB (seven times the file); the bytes, the text and every story's text were
    each held while the file was parsed a second time (as `vistkit score` reads it)."""
    p = challenge_submission(tmp_path / "sub.json", 16000)
    size = p.stat().st_size
    tracemalloc.start()
    try:
        report = validate_submission(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok and report.n_stories == 16000
    assert peak < 6 * size  # 8.3 before, f"peak {peak / size:.1f} times the file's {size:,} bytes"


# ------------------------------------------------------------- UTF-16 without a byte-order mark, raw control chars
def _error(path: Path) -> str:
    from vistkit.errors import InputError

    with pytest.raises(InputError) as info:
        read_stories(path)
    return str(info.value)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_json_and_csv_in_utf16_without_a_bom_say_so(tmp_path: Path, codec: str) -> None:
    """A JSON file said "invalid JSON at line 1, column 2: Expecting property name enclosed in double quotes", a CSV
    "CSV needs a 'text' column; found \\x00s\\x00t\\x00o..." (JSONL already named the NUL and UTF-16)."""
    js = tmp_path / "s.json"
    js.write_bytes(json.dumps({"1": "a b c ."}).encode(codec))
    csv_path = tmp_path / "s.csv"
    csv_path.write_bytes("story_id,text\n1,a b c .\n".encode(codec))
    for p in (js, csv_path):
        msg = _error(p)
        assert "NUL" in msg and "UTF-16" in msg and str(p) in msg, msg


def test_a_raw_control_character_in_a_json_string_is_named(tmp_path: Path) -> None:
    """"invalid JSON at line 1, column 14: Invalid control character at" said neither which character nor the fix."""
    js = tmp_path / "s.json"
    js.write_text('{"1": "we went\tto the park ."}', encoding="utf-8")
    msg = _error(js)
    assert "U+0009" in msg and "\\t" in msg and "line 1, column 15" in msg, msg
    jl = tmp_path / "s.jsonl"
    jl.write_text('{"story_id": "1", "text": "a\x1bb"}\n', encoding="utf-8")
    msg = _error(jl)
    assert "line 1" in msg and "U+001B" in msg, msg


def test_validate_names_a_raw_control_character(tmp_path: Path) -> None:
    p = tmp_path / "sub.json"
    p.write_text(
        '{"output_stories": [{"album_id": "1", "photo_sequence": ["1", "2", "3", "4", "5"], '
        '"story_text_normalized": "a\tb"}]}',
        encoding="utf-8",
    )
    report = validate_submission(p)
    assert not report.ok
    (syntax,) = [f for f in report.errors if f.check == "json-syntax"]
    assert syntax.message == "[Error] Incorrect JSON syntax (JsonSyntaxException)."  # the verdict is unchanged
    assert "U+0009" in syntax.detail, syntax.detail


# ------------------------------------------------------------------ field names that differ in case or spacing
@pytest.mark.parametrize(
    ("record", "field", "meant"),
    [
        ({"Story_ID": "1", "text": "a b .", "photo_ids": ["1", "2"]}, "Story_ID", "story_id"),
        ({"story_id": "1", "text": "a b .", " album_id": "9"}, " album_id", "album_id"),
        ({"story_id": "1", "text": "a b .", "Photo-IDs": "1-2"}, "Photo-IDs", "photo_ids"),
        ({"story_id": "1", "Text": "a b ."}, "Text", "text"),
        ({"story_id": "1", "text": "a b .", "Sentences": ["a b ."]}, "Sentences", "sentences"),
        ({"story_id": "1", "text": "a b .", "album\u200b_id": "9"}, "album\\u200b_id", "album_id"),
        ({"storyId": "1", "text": "a b ."}, "storyId", "story_id"),
    ],
)
def test_a_field_named_almost_as_vistkit_reads_it_is_refused(
    tmp_path: Path, record: dict[str, object], field: str, meant: str
) -> None:
    """{"Story_ID": ...} was ignored silently (the story keyed by its photos instead), {" album_id": ...} too (no
    album: --key album failed later), {"Text": ...} said only "needs a string field 'text'"."""
    p = _jsonl(tmp_path / "s.jsonl", [{"story_id": "0", "text": "ok ."}, record])
    msg = _error(p)
    assert f"{p} line 2" in msg and field in msg and repr(meant) in msg, msg


def test_a_csv_column_named_almost_as_vistkit_reads_it_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("story_id,text,Album_ID\n1,a b .,9\n", encoding="utf-8")
    msg = _error(p)
    assert f"{p} line 1" in msg and "Album_ID" in msg and "'album_id'" in msg, msg


def test_extra_fields_and_a_near_twin_of_a_given_field_are_still_read(tmp_path: Path) -> None:
    """Only a field vistkit would miss is refused: other fields are ignored as before, and so is a near twin of a
    field that is given (the given one is read)."""
    p = _jsonl(
        tmp_path / "s.jsonl",
        [{"story_id": "1", "text": "a b .", "score": 3, "Text": "raw text", "model": "m", "meta": {"x": 1}}],
    )
    (story,) = read_stories(p)
    assert story.text == "a b ."


# ------------------------------------------------------------------------------------- the wrong delimiter
@pytest.mark.parametrize(
    ("name", "content", "hint"),
    [
        ("s.csv", "story_id;text\n1;a b c .\n", "';'"),  # Excel in many European locales
        ("s.csv", "story_id\ttext\n1\ta b c .\n", ".tsv"),
        ("s.tsv", "story_id,text\n1,a b c .\n", ".csv"),
    ],
)
def test_a_csv_with_another_delimiter_says_which(tmp_path: Path, name: str, content: str, hint: str) -> None:
    """"CSV needs a 'text' column; found story_id;text" did not say that the file is separated by ';'."""
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    msg = _error(p)
    assert "separated" in msg and hint in msg, msg


# ---------------------------------------------------------------------------- a name that promises compression
@pytest.mark.parametrize("name", ["s.jsonl.gz", "s.json.GZ", "s.zip"])
def test_a_plain_file_named_as_compressed_says_to_rename_it(tmp_path: Path, name: str) -> None:
    """"cannot be read (Not a gzipped file (b'{"'))" / "not a valid zip archive (File is not a zip file)"."""
    p = tmp_path / name
    p.write_text('{"story_id": "1", "text": "a b c ."}\n', encoding="utf-8")
    msg = _error(p)
    assert "rename" in msg and str(p) in msg, msg


def test_validate_a_plain_file_named_gz(tmp_path: Path) -> None:
    from vistkit.errors import InputError

    p = tmp_path / "sub.json.gz"
    p.write_text('{"output_stories": []}', encoding="utf-8")
    with pytest.raises(InputError, match="rename"):
        validate_submission(p)


def test_an_empty_gz_file_still_holds_no_stories(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl.gz"
    p.write_bytes(b"")
    assert "holds no stories" in _error(p)


# ------------------------------------------------------------------------ photo-map ids in another Unicode form
def test_a_photo_map_key_matches_its_story_in_either_unicode_form(tmp_path: Path) -> None:
    """A story id typed with a combining accent ("cafe\\u0301") in the photo map matched no story (the stories'
    ids are NFC, as every reader compares ids): the story silently got no photos."""
    from vistkit.data.images import attach_photos, photo_map_from
    from vistkit.data.story import Story, StorySet
    from vistkit.errors import InputError

    photo_map = photo_map_from({"cafe\u0301": ["1", "2"]}, "map.json")
    (story,) = attach_photos(StorySet([Story("caf\u00e9", "a b .")]), photo_map)
    assert story.photo_ids == ("1", "2")
    with pytest.raises(InputError, match="one id"):
        photo_map_from({"cafe\u0301": ["1"], "caf\u00e9": ["2"]}, "map.json")
    with pytest.raises(InputError, match="invisible"):
        photo_map_from({"a\u200b": ["1"]}, "map.json")


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"  \n\n"])
def test_an_empty_json_file_says_it_is_empty(tmp_path: Path, content: bytes) -> None:
    """"invalid JSON at line 1, column 1: Expecting value" for a file of 0 bytes."""
    p = tmp_path / "s.json"
    p.write_bytes(content)
    msg = _error(p)
    assert "empty" in msg and "invalid JSON" in msg, msg
