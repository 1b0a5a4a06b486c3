"""Readers: an empty album id, zip members vistkit cannot inflate, blank lines before a CSV/TSV header."""

from __future__ import annotations

import io
import json
import struct
import sys
import zipfile
from pathlib import Path

import pytest
from cli_probe_helpers import error_line, run_cli

from vistkit.data.readers import read_csv, read_stories, write_challenge
from vistkit.data.story import Story
from vistkit.errors import InputError


def _error(path: Path | str, **kwargs: object) -> str:
    with pytest.raises(InputError) as info:
        read_stories(path, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def _challenge_file(path: Path, albums: list[object]) -> Path:
    records = [
        {"album_id": album, "photo_sequence": [f"{i}{j}" for j in range(1, 6)], "story_text_normalized": f"a b {i}"}
        for i, album in enumerate(albums)
    ]
    path.write_text(json.dumps({"team_name": "t", "output_stories": records}), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------- an empty album id
def test_a_blank_challenge_album_id_is_read_as_no_album(tmp_path: Path) -> None:
    """The challenge writer writes ``"album_id": ""`` for a story without an album; read back it was album ``''``,
    one album holding every such story (``--key album`` then said "more than one story has album key ''")."""
    p = _challenge_file(tmp_path / "c.json", ["", " ", "7"])
    assert [s.album_id for s in read_stories(p)] == [None, None, "7"]


def test_a_story_written_without_album_round_trips_without_one(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    write_challenge([Story(story_id="s", text="a b", photo_ids=("1", "2"))], p)
    assert read_stories(p)[0].album_id is None


def test_key_album_on_stories_without_albums_says_they_have_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hyp = _challenge_file(tmp_path / "h.json", ["", ""])
    ref = _challenge_file(tmp_path / "r.json", ["", ""])
    code, err = run_cli(capsys, "score", hyp, "-r", ref, "-m", "bleu-4", "--key", "album")
    assert code == 1
    line = error_line(err, "has no album id")
    assert "''" not in line


@pytest.mark.parametrize("album", ["", "   ", "\u3000"])
def test_a_story_with_an_empty_album_id_is_refused(album: str) -> None:
    """As an empty story id is: ``Story(album_id="")`` made album ``''`` under ``key='album'``."""
    with pytest.raises(InputError, match="album_id is empty"):
        Story(story_id="s", text="a", album_id=album)


def test_storylets_with_a_blank_album_id_are_read_without_album(tmp_path: Path) -> None:
    storylets = [
        {"story_id": "9", "album_id": "", "photo_flickr_id": str(j), "worker_arranged_photo_order": j, "text": "x ."}
        for j in range(3)
    ]
    p = tmp_path / "sis.json"
    p.write_text(json.dumps({"annotations": [[s] for s in storylets]}), encoding="utf-8")
    assert read_stories(p)[0].album_id is None


@pytest.mark.parametrize(
    ("fmt", "data"),
    [("tapm", {"_1_2_3": "a b ."}), ("tapm-nested", {"": {"1_2_3": "a b ."}}), ("arel", {" ": ["a b .", "c d ."]})],
)
def test_an_empty_album_in_a_keyed_format_is_refused_naming_it(tmp_path: Path, fmt: str, data: object) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    message = _error(p, format=fmt)
    assert str(p) in message and "empty" in message


# ------------------------------------------------------------------- zip members vistkit cannot inflate
def _zip_with_method(path: Path, method: int, *, encrypted: bool = False, name: str = "s.jsonl") -> Path:
    """A zip of one JSONL member whose headers say ``method`` (9: Deflate64, 99: WinZip AES, 98: PPMd ...) and,
    when ``encrypted``, that it needs a password, as 7-Zip and Windows write them (the bytes are stored)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(name, '{"story_id": "1", "text": "a b ."}\n')
    data = bytearray(buffer.getvalue())
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<H", data, local + 8, method)
    struct.pack_into("<H", data, central + 10, method)
    if encrypted:
        for at in (local + 6, central + 8):
            struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 1)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("method", "encrypted", "said"),
    [
        (9, False, "Deflate64"),
        (98, False, "PPMd"),
        (93, False, "Zstandard"),
        (99, True, "AES"),
        (8, True, "password"),
    ],
)
def test_a_zip_member_vistkit_cannot_inflate_says_which_method_and_how_to_rezip(
    tmp_path: Path, method: int, encrypted: bool, said: str
) -> None:
    """Python said only "That compression method is not supported" (or "File 's.jsonl' is encrypted, password
    required for extraction"), naming neither the method nor what to do."""
    p = _zip_with_method(tmp_path / "s.zip", method, encrypted=encrypted)
    for given in (p, f"{p}:s.jsonl"):
        message = _error(given)
        assert said in message and "s.jsonl" in message and "zip" in message.lower(), message
        assert "That compression method" not in message and "unzip it" in message


def test_a_zip_of_an_unknown_method_names_its_number(tmp_path: Path) -> None:
    message = _error(_zip_with_method(tmp_path / "s.zip", 77))
    assert "compression method 77" in message and "unzip it" in message


# ---------------------------------------------------------------------- blank lines before a CSV/TSV header
_LEAD = ["\n", "\n\n", "  \n\t\n", "\r\n\r\n"]


def _pipe(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


@pytest.mark.parametrize("lead", _LEAD)
def test_a_tsv_piped_in_after_blank_lines_is_read_as_tsv(monkeypatch: pytest.MonkeyPatch, lead: str) -> None:
    """The tab was looked for on the first line only: a blank one made the file CSV (a story with a comma then
    broke the row)."""
    _pipe(monkeypatch, lead + "story_id\ttext\n1\twe went, and saw .\n")
    assert [(s.story_id, s.text) for s in read_stories("-")] == [("1", "we went, and saw .")]


@pytest.mark.parametrize("lead", _LEAD)
@pytest.mark.parametrize("name", ["s.csv", "s.tsv", "s.txt", "stories"])
def test_a_header_after_blank_lines_is_the_header(tmp_path: Path, lead: str, name: str) -> None:
    """Blank lines before the header said "empty CSV (no header row)" (blank lines between rows were skipped)."""
    sep = "," if name == "s.csv" else "\t"
    p = tmp_path / name
    p.write_bytes((lead + f"story_id{sep}text\n1{sep}we went home .\n").encode())
    assert [(s.story_id, s.text) for s in read_stories(p)] == [("1", "we went home .")]


def test_blank_lines_before_a_header_keep_the_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("\n\nstory_id,text\n1,a b\n2,c,d\n", encoding="utf-8")
    assert "line 5:" in _error(p)
    p.write_text("\n\nstory_id,text,story_id\n1,a b,1\n", encoding="utf-8")
    assert "line 3:" in _error(p)


def test_a_table_after_blank_lines_reads(tmp_path: Path) -> None:
    """Every CSV reader (judgements, per-item scores, regions) reads through the same rows."""
    p = tmp_path / "t.csv"
    p.write_text("\n\na,b\n1,2\n", encoding="utf-8")
    assert read_csv(p) == (["a", "b"], [{"a": "1", "b": "2"}])


def test_a_file_of_blank_lines_only_is_still_empty(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("\n\n  \n", encoding="utf-8")
    assert "empty CSV" in _error(p)


# ------------------------------------------------------------------------- archives cut short or damaged
def _jsonl_lines(n: int = 2000) -> str:
    rows = ({"story_id": str(i), "text": f"we went to the park {i} . " * 20} for i in range(n))
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_a_zip_cut_short_says_so(tmp_path: Path) -> None:
    """An interrupted download of ``PR_VIST.json.zip`` said "not a valid zip archive (File is not a zip file)"."""
    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("s.jsonl", _jsonl_lines())
    cut = tmp_path / "s.zip"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    for given in (cut, f"{cut}:s.jsonl"):
        message = _error(given)
        assert "cut short" in message and "again" in message and "File is not a zip file" not in message, message


@pytest.mark.parametrize("name", ["s.jsonl.gz", "s.json.gz", "s.csv.gz", "s.gz"])
def test_a_gzip_file_cut_short_says_so(tmp_path: Path, name: str) -> None:
    """It said "cannot be read (Compressed file ended before the end-of-stream marker was reached)"."""
    import gzip

    if name.startswith("s.csv"):
        content = "story_id,text\n" + "".join(f"{i},we went to the park {i} .\n" for i in range(5000))
    elif name == "s.json.gz":
        content = json.dumps({str(i): f"we went to the park {i} ." for i in range(5000)})
    else:
        content = _jsonl_lines()
    data = gzip.compress(content.encode())
    p = tmp_path / name
    p.write_bytes(data[: len(data) // 2])
    message = _error(p)
    assert "cut short" in message and "again" in message and "end-of-stream" not in message, message


def test_a_damaged_zip_member_says_so(tmp_path: Path) -> None:
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("s.jsonl", _jsonl_lines())
    data = bytearray(p.read_bytes())
    for at in range(200, 2000, 7):  # bytes inside the deflated member
        data[at] ^= 0x55
    p.write_bytes(bytes(data))
    message = _error(p)
    assert "damaged" in message and "again" in message, message


# ------------------------------------------------------------------ a missing-value mark in a CSV id column
@pytest.mark.parametrize("mark", ["NA", "#N/A", "nan", "None", "NULL", " n/a "])
@pytest.mark.parametrize("column", ["album_id", "story_id"])
def test_a_missing_value_mark_in_a_csv_id_column_is_refused(tmp_path: Path, mark: str, column: str) -> None:
    """R's write.csv writes a missing album as NA (Python's str(None) as None): every such story was album 'NA',
    one album under --key album (the references of one album scored another album's story)."""
    p = tmp_path / "s.csv"
    other = "album_id" if column == "story_id" else "story_id"
    p.write_text(f"{column},{other},photo_ids,text\n{mark},7,1-2,a b .\n", encoding="utf-8")
    message = _error(p)
    assert "line 2" in message and column in message and "empty" in message, message


def test_an_id_that_only_contains_na_still_reads(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("story_id,album_id,text\nNA1,nan_7,a b .\n", encoding="utf-8")
    assert [(s.story_id, s.album_id) for s in read_stories(p)] == [("NA1", "nan_7")]


# ----------------------------------------------------------------- system files zipped along with the stories
@pytest.mark.parametrize(
    "junk", [["out/.DS_Store"], ["Thumbs.db", "desktop.ini"], ["out/._stories.jsonl"], ["out/Icon\r"]]
)
def test_system_files_in_a_zip_are_not_a_second_file(tmp_path: Path, junk: list[str]) -> None:
    """A folder zipped by macOS' Finder holds its .DS_Store (Windows': Thumbs.db, desktop.ini): the zip was
    refused as holding several files, suggesting ``s.zip:out/.DS_Store`` to read."""
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w") as zf:
        for name in junk:
            zf.writestr(name, b"\x00\x00\x00\x01Bud1")
        zf.writestr("out/stories.jsonl", '{"story_id": "1", "text": "a b ."}\n')
    assert [s.story_id for s in read_stories(p)] == ["1"]


def test_a_zip_of_system_files_only_says_so(tmp_path: Path) -> None:
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("out/.DS_Store", b"\x00\x00\x00\x01Bud1")
    message = _error(p)
    assert ".DS_Store" in message and "no file" in message, message


def test_a_system_file_named_as_the_member_is_still_read(tmp_path: Path) -> None:
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("desktop.ini", '{"story_id": "1", "text": "a b ."}\n')
        zf.writestr("s.jsonl", '{"story_id": "2", "text": "a b ."}\n')
    assert [s.story_id for s in read_stories(f"{p}:desktop.ini", format="jsonl")] == ["1"]


# ------------------------------------------------------------------------------- Excel's "sep=" first line
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("s.csv", "sep=,\nstory_id,text\n1,a b .\n"),
        ("s.csv", "\nsep=,\r\n\r\nstory_id,text\r\n1,a b .\r\n"),
        ("s.tsv", "sep=\t\nstory_id\ttext\n1\ta b .\n"),
        ("s.txt", "sep=\t\nstory_id\ttext\n1\ta b .\n"),
    ],
)
def test_excels_separator_line_is_read_as_what_it_says(tmp_path: Path, name: str, content: str) -> None:
    """A CSV that starts with Excel's ``sep=,`` line said "CSV needs a 'text' column; found sep=,"."""
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    assert [(s.story_id, s.text) for s in read_stories(p)] == [("1", "a b .")]


def test_excels_separator_line_piped_in_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _pipe(monkeypatch, "sep=\t\nstory_id\ttext\n1\ta, b .\n")
    assert [(s.story_id, s.text) for s in read_stories("-")] == [("1", "a, b .")]


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("s.csv", "sep=;\nstory_id;text\n1;a b .\n", "';'"),
        ("s.csv", "sep=\t\nstory_id\ttext\n1\ta b .\n", ".tsv"),
        ("s.tsv", "sep=,\nstory_id,text\n1,a b .\n", ".csv"),
    ],
)
def test_excels_separator_line_naming_another_separator_says_so(
    tmp_path: Path, name: str, content: str, said: str
) -> None:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    message = _error(p)
    assert "line 1" in message and "sep=" in message and said in message, message


# --------------------------------------------------------------------------------- a zip listing huge numbers
def test_a_zip_listing_more_files_than_a_story_zip_is_refused_before_it_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 26 MB zip of 300,000 empty members took 29 s and 330 MB to be refused as "several files" (zipfile made
    an object per member, twice): 256 MiB of them, minutes and gigabytes. The count in the archive's last record
    is checked first."""
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w") as zf:
        for i in range(12_000):
            zf.writestr(f"{i}", b"")
    listed: list[object] = []
    real = zipfile.ZipFile._RealGetContents  # type: ignore[attr-defined]

    def counting(self: zipfile.ZipFile) -> None:
        listed.append(self)
        real(self)

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", counting)
    for given in (p, f"{p}:7"):
        message = _error(given)
        assert "12,000" in message and "10,000" in message, message
    assert not listed


def test_a_zip64_archive_still_reads(tmp_path: Path) -> None:
    p = tmp_path / "s.zip"
    with zipfile.ZipFile(p, "w") as zf, zf.open("s.jsonl", "w", force_zip64=True) as fh:
        fh.write(b'{"story_id": "1", "text": "a b ."}\n')
    assert [s.story_id for s in read_stories(p)] == ["1"]


def test_a_sentences_cell_of_spaces_is_no_sentences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was one empty sentence, and a warning that the sentences disagree with the text."""
    p = tmp_path / "s.csv"
    p.write_text("story_id,sentences,text\n1,  ,a b .\n", encoding="utf-8")
    assert read_stories(p)[0].sentences is None
    assert "sentences" not in capsys.readouterr().err


# --------------------------------------------------------------------------- a JSON document named .jsonl
_RECORDS = [{"story_id": str(i), "text": f"t {i} ."} for i in range(3)]


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(_RECORDS, indent=2),  # "line 1: invalid JSON at column 1: Expecting value"
        json.dumps(_RECORDS),  # "line 1: expected an object"
        "\n".join(json.dumps(r, indent=2) for r in _RECORDS),  # "Expecting property name enclosed in double quotes"
        json.dumps({"1": "a b .", "2": "c d ."}),  # "line 1: needs a string field 'text' (or 'story')"
        json.dumps({"output_stories": [{"album_id": "1", "photo_sequence": ["1"], "story_text_normalized": "a"}]}),
    ],
)
def test_a_json_document_named_jsonl_says_to_name_it_json(tmp_path: Path, content: str) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(content, encoding="utf-8")
    message = _error(p)
    assert ("not JSONL" in message or "one line" in message) and ".json" in message and "line 1" in message, message


def test_jsonl_with_a_comma_after_each_object_says_so(tmp_path: Path) -> None:
    """``json.dumps(r) + ",\\n"`` (a list split into lines) said "invalid JSON at column 35: Extra data"."""
    p = tmp_path / "s.jsonl"
    p.write_text("".join(json.dumps(r) + ",\n" for r in _RECORDS), encoding="utf-8")
    message = _error(p)
    assert "line 1" in message and "','" in message and "remove" in message, message


def test_a_bad_line_of_real_jsonl_is_named_as_before(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(_RECORDS[0]) + '\n{"story_id": "2", "text": \n', encoding="utf-8")
    message = _error(p)
    assert "line 2: invalid JSON" in message and "not JSONL" not in message, message


def test_a_jsonl_record_without_its_text_is_still_named_as_a_record(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"story_id": "1", "album_id": "2"}\n', encoding="utf-8")
    assert "needs a string field 'text'" in _error(p)
