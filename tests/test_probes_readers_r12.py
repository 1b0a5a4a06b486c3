"""Story-reader and validator probes, round 12: each test pins one class of problem a QA probe of ``vistkit score
FILE`` and ``vistkit validate`` found.

Classes: a CSV header row repeated inside the file (two CSV files joined with ``cat``) was read as one more story
(``story_id`` "story_id", text "text") or row; a submission holding a JSON key twice got no word of the
challenge's own checks (the Java evaluator's Gson keeps the last value and judges on); the storylets of one story
naming two albums were read under the first album silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vistkit.cli import main
from vistkit.data.readers import read_csv, read_stories
from vistkit.data.story import Story, StorySet
from vistkit.data.validate import Level, Origin, validate_submission
from vistkit.errors import InputError

SEQ_A = ["1", "2", "3", "4", "5"]
SEQ_B = ["6", "7", "8", "9", "10"]
TEMPLATE = StorySet(
    [
        Story(story_id="1-2-3-4-5", text="", photo_ids=tuple(SEQ_A), album_id="al"),
        Story(story_id="6-7-8-9-10", text="", photo_ids=tuple(SEQ_B), album_id="al"),
    ]
)


def error_of(path: Path, **kwargs: Any) -> str:
    with pytest.raises(InputError) as info:
        read_stories(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def _story(photos: list[str], text: str = "we went out .", album: str = "al") -> str:
    return json.dumps({"album_id": album, "photo_sequence": photos, "story_text_normalized": text})


# ------------------------------------------------------------------ 1. a header row repeated inside a CSV
@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("joined.csv", "story_id,text\n1,a story .\nstory_id,text\n2,another .\n", 3),
        ("spaced.csv", "story_id,photo_ids,text\n1,1-2,a .\n story_id , photo_ids , text \n2,3-4,b .\n", 3),
        ("quoted.csv", '"story_id","text"\n1,a .\n\n"story_id","text"\n2,b .\n', 4),
        ("joined.tsv", "story_id\ttext\n1\ta .\nstory_id\ttext\n2\tb .\n", 3),
        ("crlf.csv", "story_id,text\r\n1,a .\r\nstory_id,text\r\n2,b .\r\n", 3),
        ("bom.csv", "\ufeffstory_id,text\n1,a .\n\ufeffstory_id,text\n2,b .\n", 3),  # cat of two BOM'd files
    ],
)
def test_a_header_row_repeated_inside_a_csv_is_refused(tmp_path: Path, name: str, content: str, line: int) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    message = error_of(path)
    assert f"line {line}" in message and "repeats the header" in message, message
    assert "cat" in message  # what usually made it, and so what to do


def test_a_repeated_header_is_refused_by_every_csv_reader(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("sent1,sent2,label\na,b,1\nsent1,sent2,label\nc,d,0\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 3 repeats the header"):
        read_csv(path)


def test_rows_that_merely_share_cells_with_the_header_still_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("story_id,text\ntext,story_id\nstory_id,a story .\n", encoding="utf-8")
    assert [(s.story_id, s.text) for s in read_stories(path)] == [("text", "story_id"), ("story_id", "a story .")]
    one = tmp_path / "one.csv"  # a one-column table: a cell that says "text" is a cell
    one.write_text("text\na story .\ntext\n", encoding="utf-8")
    assert read_csv(one) == (["text"], [{"text": "a story ."}, {"text": "text"}])


def test_score_refuses_a_joined_csv_instead_of_scoring_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hyp = tmp_path / "hyp.csv"
    hyp.write_text("story_id,text\n1,we went out .\nstory_id,text\n2,we ate .\n", encoding="utf-8")
    ref = tmp_path / "ref.csv"
    ref.write_text("story_id,text\n1,we went out .\n2,we ate .\nstory_id,text\n", encoding="utf-8")
    code = main(["score", str(hyp), "-r", str(ref), "-m", "bleu-4", "-q", "-b"])
    err = capsys.readouterr().err
    assert code == 1 and "repeats the header" in err


# ------------------------------------------------------------------ 2. duplicate keys: the challenge's verdict too
def test_a_duplicate_key_keeps_the_challenges_checks(tmp_path: Path) -> None:
    """Gson (the evaluator's JSON reader) keeps the last of two equal keys and judges on: its lines are
    reported as it printed them, then vistkit's error for the key (what `vistkit score` refuses), once."""
    raw = '{"team_name": "t", "output_stories": [' + _story(SEQ_A) + "," + _story(SEQ_B) + '], "team_name": "u"}'
    report = validate_submission(raw.encode(), template=TEMPLATE)
    messages = [f.message for f in report.findings]
    assert messages[:3] == [
        "[Passed] Test file is in valid JSON syntax.",
        "[Passed] Each photo sequence has only one story.",
        "[Passed] All required stories are submitted.",
    ]
    [error] = report.errors
    assert error.check == "json-duplicate-key" and error.origin is Origin.VISTKIT
    assert "'team_name' appears twice" in error.message
    assert not report.ok and report.n_stories == 2


def test_the_last_of_two_keys_is_what_the_challenge_judged(tmp_path: Path) -> None:
    # the second output_stories lacks sequence B: Gson kept it, so the challenge said a story is missing
    raw = '{"output_stories": [' + _story(SEQ_A) + "," + _story(SEQ_B) + '], "output_stories": [' + _story(SEQ_A) + "]}"
    report = validate_submission(raw.encode(), template=TEMPLATE)
    checks = [(f.check, f.level) for f in report.findings]
    assert ("all-stories", Level.ERROR) in checks and ("json-duplicate-key", Level.ERROR) in checks
    missing = next(f for f in report.findings if f.check == "all-stories")
    assert missing.message == "[Error] One story is missing in this submission. Photo seq: 6-7-8-9-10-"
    # inside a story: the last photo_sequence is the story's
    story = '{"album_id": "al", "photo_sequence": ["9"], "photo_sequence": ' + json.dumps(SEQ_B)
    story += ', "story_text_normalized": "x ."}'
    report = validate_submission(
        ('{"output_stories": [' + _story(SEQ_A) + "," + story + "]}").encode(), template=TEMPLATE
    )
    assert "[Passed] All required stories are submitted." in [f.message for f in report.findings]
    assert [f.check for f in report.errors] == ["json-duplicate-key"]
    # and a duplicate key inside a story that Gson binds wrongly is still the challenge's syntax error, first
    bad = '{"album_id": "al", "photo_sequence": ' + json.dumps(SEQ_A) + ', "photo_sequence": "1-2", '
    bad += '"story_text_normalized": "x"}'
    report = validate_submission(('{"output_stories": [' + bad + "]}").encode())
    assert [f.check for f in report.errors] == ["json-syntax", "json-duplicate-key"]


def test_the_cli_prints_the_challenges_lines_for_a_duplicate_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = tmp_path / "sub.json"
    sub.write_text('{"output_stories": [' + _story(SEQ_A) + '], "team_name": "a", "team_name": "b"}', encoding="utf-8")
    code = main(["validate", str(sub)])
    out = capsys.readouterr().out
    assert code == 1
    assert "[Passed] Test file is in valid JSON syntax." in out
    assert out.count("appears twice") == 1, out
    assert out.splitlines()[-1].startswith("(vistkit) INVALID: 1 error (1 check failed)")


# ------------------------------------------------------------------ 3. one story, two albums
def _storylet(order: int, photo: str, album: str) -> dict[str, Any]:
    return {
        "story_id": "s1",
        "worker_arranged_photo_order": order,
        "photo_flickr_id": photo,
        "text": f"t{order} .",
        "album_id": album,
    }


@pytest.mark.parametrize("wrap", ["sis", "storylets"])
def test_storylets_of_one_story_naming_two_albums_are_refused(tmp_path: Path, wrap: str) -> None:
    records = [_storylet(0, "1", "A"), _storylet(1, "2", "B")]
    data: Any = {"annotations": [[r] for r in records]} if wrap == "sis" else records
    path = tmp_path / f"{wrap}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    message = error_of(path)
    assert "'s1'" in message and "'A'" in message and "'B'" in message and "album" in message, message
    # the same album written as a number and as text, or with spaces around it, is one album
    same = [_storylet(0, "1", "A"), _storylet(1, "2", " A")]
    path.write_text(json.dumps(same), encoding="utf-8")
    assert [s.album_id for s in read_stories(path)] == ["A"]
    numbers: list[dict[str, Any]] = [_storylet(0, "1", "7"), {**_storylet(1, "2", "7"), "album_id": 7}]
    path.write_text(json.dumps(numbers), encoding="utf-8")
    assert [s.album_id for s in read_stories(path)] == ["7"]
