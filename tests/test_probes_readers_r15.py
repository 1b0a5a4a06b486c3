"""Readers and the challenge validator: memory of `validate`, rows a quote swallows, plain-text story files."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from cli_probe_helpers import challenge_submission

from vistkit.data.readers import read_stories
from vistkit.data.validate import validate_submission
from vistkit.errors import InputError


def _error(path: Path, **kwargs: object) -> str:
    with pytest.raises(InputError) as info:
        read_stories(path, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


# ------------------------------------------------------------------------------------------ validate's memory
def test_validate_holds_a_submission_under_four_times_over(tmp_path: Path) -> None:
    """The reading as `vistkit score` reads it held the text, the whole parsed document and every story's text at
    once: 4.4 times the file at its peak."""
    p = challenge_submission(tmp_path / "sub.json", 16000)
    size = p.stat().st_size
    tracemalloc.start()
    try:
        report = validate_submission(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok and report.n_stories == 16000
    assert peak < 3.8 * size, f"peak {peak / size:.2f} times the file's {size:,} bytes"


def test_the_verdicts_of_the_reading_as_score_stand(tmp_path: Path) -> None:
    """What the lighter reading still refuses: a story over the length limit, two sequences one once read."""
    p = tmp_path / "s.json"
    seq = ["1", "2", "3", "4", "5"]
    p.write_text(
        json.dumps(
            {
                "output_stories": [
                    {"album_id": "1", "photo_sequence": seq, "story_text_normalized": "a b"},
                    {"album_id": "1", "photo_sequence": [" 1", *seq[1:]], "story_text_normalized": "c d"},
                ]
            }
        ),
        encoding="utf-8",
    )
    report = validate_submission(p)
    assert not report.ok and any(f.check == "readable" and "spaces" in f.detail for f in report.errors)


# ------------------------------------------------------------- a quote opening a story swallows the rows after it
@pytest.mark.parametrize(
    ("name", "content", "swallowed"),
    [
        # a TSV written with f"{id}\t{text}\n": a tokenised VIST story may start with a quote token
        ("s.tsv", 'story_id\ttext\n1\t" hello there , said the man .\n2\tbye bye "\n3\tok .\n', 1),
        ("s.csv", 'story_id,text\n1," hello there said the man .\n2,we left .\n3,bye bye "\n4,ok .\n', 2),
        ("s.csv", 'album_id,story_id,text\n7,1," hi\n7,2,we left .\n7,3,bye "\n7,4,ok .\n', 2),
    ],
)
def test_rows_swallowed_by_a_quote_never_closed_on_its_line_are_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, swallowed: int
) -> None:
    """A cell that starts with '"' runs to the next '"' that ends a cell, over the line ends: the rows between were
    read as part of that story and were lost without a word (4 stories read as 2)."""
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    stories = read_stories(p)  # read as given (a quoted cell may hold line breaks)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and f"{p} line 2" in err and "line 3" in err, err
    assert ("which reads as a row" if swallowed == 1 else f"{swallowed} lines") in err and "quote" in err, err
    assert len(stories) == 2


def test_cells_holding_line_breaks_of_their_own_do_not_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A story in paragraphs (an LLM's), a line of which has the delimiter, is a cell, not rows."""
    p = tmp_path / "s.csv"
    p.write_text(
        'story_id,text\n1,"We went to the beach.\n\nLater, the family went home.\nThen, we ate."\n'
        '2,"One, two.\nThree, four."\n3,"a\r\nb, c"\n',
        encoding="utf-8",
    )
    stories = read_stories(p)
    assert len(stories) == 3 and "warning" not in capsys.readouterr().err


# ------------------------------------------------------------------ plain text, one story per line, no header row
@pytest.mark.parametrize(
    "content",
    [
        # as the CMU 11-777 VIST baselines ship prediction_test_AREL.txt and reference_test.txt
        "there was a ton of food for the day . the food was delicious .\ni went to a restaurant . it was good .\n",
        "we went to the park, it was fun .\nthe dog ran, it was fast .\n",
    ],
)
def test_plain_text_one_story_per_line_says_what_it_is(tmp_path: Path, content: str) -> None:
    """It said "CSV needs a 'text' column; found there was a ton of food for the day ...", as if a story were a
    column name."""
    for name in ("predictions.txt", "predictions.csv", "predictions"):
        p = tmp_path / name
        p.write_text(content, encoding="utf-8")
        msg = _error(p)
        assert "plain text" in msg and "one story per line" in msg and "story_id" in msg, msg
        assert "needs a 'text' column" not in msg, msg


@pytest.mark.parametrize(
    ("name", "content", "header"),
    [
        ("s.tsv", "45530\twe went to the park . it was fun .\n45531\tthe dog ran .\n", "story_id\\ttext"),
        ("s.csv", "45530,we went to the park . it was fun .\n45531,the dog ran .\n", "story_id,text"),
    ],
)
def test_ids_and_stories_without_a_header_row_say_to_add_one(
    tmp_path: Path, name: str, content: str, header: str
) -> None:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    msg = _error(p)
    assert "line 1" in msg and "header" in msg and header in msg, msg


def test_a_header_naming_its_columns_in_words_is_still_named(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    for header in ("id,generated story", "id,my generated story text"):
        p.write_text(f"{header}\n1,we went .\n", encoding="utf-8")
        msg = _error(p)
        assert "needs a 'text' column" in msg and "generated story" in msg, msg


# --------------------------------------------------------------- a story file given as the challenge's template
_SIS = {
    "annotations": [
        [{"story_id": "1", "photo_flickr_id": str(p), "worker_arranged_photo_order": i, "text": "a b ."}]
        for i, p in enumerate(range(11, 16))
    ]
}


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (_SIS, "story-in-sequence (SIS)"),
        ([{"story_id": "1", "photo_ids": ["1", "2"], "text": "a b ."}], "story records"),
        ({"1": "a b ."}, "{story_id: text}"),
    ],
)
def test_a_story_file_given_as_the_template_says_what_it_is(tmp_path: Path, data: object, what: str) -> None:
    """The VIST test SIS given as --template (instead of --references) said "sis.json: a challenge submission needs
    a list under 'output_stories'", though no submission was at fault."""
    from vistkit.data.readers import read_template

    tmpl = tmp_path / "test.json"
    tmpl.write_text(json.dumps(data), encoding="utf-8")
    sub = challenge_submission(tmp_path / "sub.json", 2)
    for call in (lambda: validate_submission(sub, template=tmpl), lambda: read_template(tmpl)):
        with pytest.raises(InputError) as info:
            call()
        msg = str(info.value)
        assert "template" in msg and what in msg and "submission needs" not in msg, msg
    if "SIS" in what:
        assert "--references" in msg, msg


def test_a_story_file_forced_as_challenge_says_what_it_is(tmp_path: Path) -> None:
    p = tmp_path / "test.json"
    p.write_text(json.dumps(_SIS), encoding="utf-8")
    msg = _error(p, format="challenge")
    assert "output_stories" in msg and "story-in-sequence (SIS)" in msg, msg


# ---------------------------------------------------------------------------------------- spreadsheets as input
def _xlsx(path: Path, *, first: str = "[Content_Types].xml") -> Path:
    import zipfile

    names = [first, "_rels/.rels", "xl/workbook.xml", "xl/worksheets/sheet1.xml"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in dict.fromkeys(names):
            z.writestr(name, "<x/>" * 20)
    return path


def _ods(path: Path) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        z.writestr("content.xml", "<x/>")
    return path


@pytest.mark.parametrize(
    ("make", "name", "what"),
    [
        (_xlsx, "ratings.xlsx", "Excel workbook"),
        (_xlsx, "ratings.csv", "Excel workbook"),
        (lambda p: _xlsx(p, first="docProps/app.xml"), "ratings.xlsx", "Excel workbook"),  # as openpyxl writes
        (_ods, "ratings.ods", "OpenDocument spreadsheet"),
        (lambda p: (p.write_bytes(bytes.fromhex("D0CF11E0A1B11AE1") + bytes(600)), p)[1], "ratings.xls", "Excel 97"),
    ],
)
def test_a_spreadsheet_says_to_save_it_as_csv(tmp_path: Path, make: object, name: str, what: str) -> None:
    """An Excel workbook was "a zip archive; vistkit opens a zip whose name ends in .zip (rename it so)", which
    led to "holds several files ([Content_Types].xml, ...)"; an .xls was "not UTF-8 text (byte 0 ...)"."""
    from vistkit.data.readers import read_csv

    p = make(tmp_path / name)  # type: ignore[operator]
    for call in (lambda: read_stories(p), lambda: read_csv(p)):
        with pytest.raises(InputError) as info:
            call()
        msg = str(info.value)
        assert what in msg and "CSV" in msg and "rename" not in msg, msg
    report = validate_submission(p)
    assert not report.ok and any(what in f.message for f in report.errors)


# ------------------------------------------------------------------------- where the bytes that are not UTF-8 are
def _latin1_at_the_end(path: Path, head: str, row: str) -> tuple[int, int]:
    """``head`` (thousands of lines), then ``row`` with a Latin-1 'é'; the bad byte's offset and line."""
    data = head.encode() + row.encode("latin-1")
    if path.suffix == ".gz":
        import gzip

        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    at = data.index(b"\xe9")
    return at, data[:at].count(b"\n") + 1


@pytest.mark.parametrize(
    ("name", "head", "row"),
    [
        ("s.csv", "story_id,text\n" + "".join(f"{i},we went to the park .\n" for i in range(5000)), "x,café\n"),
        ("s.csv.gz", "story_id,text\n" + "".join(f"{i},we went to the park .\n" for i in range(5000)), "x,café\n"),
        ("s.jsonl", "".join(f'{{"story_id": "{i}", "text": "we went ."}}\n' for i in range(5000)), '{"text": "é"}\n'),
        ("s.json", "{\n" + "".join(f'"{i}": "we went .",\n' for i in range(5000)), '"x": "café"}\n'),
        ("s.txt", "story_id,text\n" + "".join(f"{i},we went to the park .\n" for i in range(5000)), "x,café\n"),
    ],
)
def test_bytes_that_are_not_utf8_are_named_at_their_place_in_the_file(
    tmp_path: Path, name: str, head: str, row: str
) -> None:
    """A Latin-1 'é' on line 5,002 (byte 208,9xx) was "not UTF-8 text (byte 4112: ...)": the place in the chunk
    being decoded, where the file holds nothing wrong."""
    p = tmp_path / name
    at, line = _latin1_at_the_end(p, head, row)
    msg = _error(p)
    assert f"line {line:,}" in msg and f"byte {at:,}" in msg and "Windows-1252" in msg, msg


def test_validate_names_the_byte_counting_the_byte_order_mark(tmp_path: Path) -> None:
    """Byte 37 was named for a byte at 40: the offset was counted after the byte-order mark."""
    raw = b'\xef\xbb\xbf{"output_stories": [{"album_id": "caf\xe9"}]}'
    report = validate_submission(raw)
    msg = next(f.message for f in report.errors if f.check == "encoding")
    at = raw.index(b"\xe9")
    assert f"byte {at}," in msg and "'é' in Windows-1252" in msg, msg


# ------------------------------------------------------------ a template and references of two different splits
def test_a_template_and_references_sharing_no_sequence_are_refused(tmp_path: Path) -> None:
    """The test template with the val SIS (a different split) required the sequences of both: none, so every
    submission passed "[Passed] All required stories are submitted." with "0 required"."""
    tmpl = challenge_submission(tmp_path / "template.json", 3)
    refs = tmp_path / "val.json"
    refs.write_text(json.dumps(_SIS), encoding="utf-8")  # photos 11-15: none of the template's
    sub = challenge_submission(tmp_path / "sub.json", 3)
    with pytest.raises(InputError) as info:
        validate_submission(sub, template=tmpl, references=refs)
    msg = str(info.value)
    assert "share no photo sequence" in msg and "split" in msg and str(refs) in msg and str(tmpl) in msg, msg


def test_a_template_and_references_that_overlap_still_require_the_common_sequences(tmp_path: Path) -> None:
    tmpl = challenge_submission(tmp_path / "template.json", 3)
    sub = challenge_submission(tmp_path / "sub.json", 2)
    report = validate_submission(sub, template=tmpl, references=tmpl)
    assert not report.ok and report.n_required == 3


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("p.jsonl", '"we went to the park . it was fun ."\n"the dog ran . it was fast ."\n'),
        ("p.json", '["we went to the park . it was fun .", "the dog ran . it was fast ."]'),
    ],
)
def test_stories_as_bare_json_strings_say_they_have_no_ids(tmp_path: Path, name: str, content: str) -> None:
    """A JSON list of story texts said "a JSON list must hold storylet or story records (objects)", a JSONL file of
    them "line 1: expected an object"."""
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    msg = _error(p)
    assert "without ids" in msg and "story_id" in msg, msg


# ------------------------------------------------------------------------- JSON files that are not story files
def test_a_photo_map_given_as_stories_is_refused(tmp_path: Path) -> None:
    """KE-VIST's storyid2images.json ({story_id: [photo ids]}) given as -r read as AREL: 25,025 "stories" whose
    texts were photo ids ('1741642'), scored without a word."""
    p = tmp_path / "storyid2images.json"
    p.write_text(json.dumps({"45530": ["1741642", "1741640"], "45531": ["1741625", "1741640.jpg"]}), encoding="utf-8")
    msg = _error(p)
    assert "photo map" in msg and "--photos" in msg, msg


def test_an_arel_file_of_stories_still_reads(tmp_path: Path) -> None:
    p = tmp_path / "arel.json"
    p.write_text(json.dumps({"7": ["we went to the park .", "42"], "8": ["fun"]}), encoding="utf-8")
    assert len(read_stories(p)) == 3


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"CIDEr": 0.07, "Bleu_4": 0.09, "METEOR": 0.35}, "numbers"),  # the 11-777 baselines' test_scores_AREL.json
        ({"1": "we went .", "2": None}, "'2' holds null"),
        ({"1": "we went .", "2": float("nan")}, "'2' holds the number nan"),
        ({"1": "we went .", "2": ["a ."]}, "'2' holds a list"),
        ({"": None}, "holds no story texts ('' holds null)"),  # found by test_validate's fuzzing
        ({"a": True, "b": False}, "holds no story texts ('a' holds true)"),
    ],
)
def test_a_json_object_of_other_values_says_which(tmp_path: Path, data: dict[str, object], said: str) -> None:
    """Each said only "the JSON object mixes value types; cannot tell its format (pass --format)"."""
    p = tmp_path / "x.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    msg = _error(p)
    assert said in msg, msg


def test_a_story_given_as_a_list_of_sentences_says_where_they_go(tmp_path: Path) -> None:
    """{"text": ["we went .", "it was fun ."]} said "needs a string field 'text' (or 'story')"."""
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"story_id": "1", "text": ["we went .", "it was fun ."]}) + "\n", encoding="utf-8")
    msg = _error(p)
    assert "line 1" in msg and "list" in msg and "'sentences'" in msg, msg


def test_a_submission_sharing_no_sequence_with_the_references_says_split(tmp_path: Path) -> None:
    """Every required story missing said only "1 of 1 required stories are missing", when the submission is for
    the test split and the references of another."""
    refs = tmp_path / "val.json"
    refs.write_text(json.dumps(_SIS), encoding="utf-8")
    report = validate_submission(challenge_submission(tmp_path / "sub.json", 3), references=refs)
    missing = next(f for f in report.errors if f.check == "all-stories")
    assert "another split" in missing.detail, missing.detail
    other = challenge_submission(tmp_path / "r.json", 4)
    report = validate_submission(challenge_submission(tmp_path / "sub.json", 3), references=other)
    missing = next(f for f in report.errors if f.check == "all-stories")
    assert "split" not in missing.detail, missing.detail


def test_a_challenge_file_forced_as_sis_says_what_it_is(tmp_path: Path) -> None:
    p = challenge_submission(tmp_path / "sub.json", 2)
    msg = _error(p, format="sis")
    assert "'annotations'" in msg and "a challenge file" in msg, msg
