"""Story-reader probes, round 11: each test pins one class of problem a QA probe of ``vistkit score FILE`` found.

Classes: a zip holding two members of one name (``ARCHIVE.zip:MEMBER`` silently read the last); compressed or
archived content named as text (zip, gzip, bzip2, xz, zstd, 7z, tar, tar.gz), on standard input too, said "not
UTF-8 text (byte N)"; ``.ZIP``/``.GZ`` in upper case were not opened; two byte-order marks; Hangul filler letters
(invisible) accepted in ids.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from vistkit.cli import main
from vistkit.data.readers import binary_kind, read_stories, split_member
from vistkit.data.story import Story
from vistkit.errors import InputError

HYP = "".join(
    json.dumps({"story_id": f"s{i}", "text": f"we went to the park {i} . it was fun . the dog ran ."}) + "\n"
    for i in range(5)
)
REF = "".join(
    json.dumps({"story_id": f"s{i}", "text": f"we went to a park {i} . it was nice . a dog ran ."}) + "\n"
    for i in range(5)
)
TSV = "story_id\ttext\n" + "".join(f"s{i}\tstory {i} .\n" for i in range(3))


def error_of(path: Path | str, **kwargs: object) -> str:
    with pytest.raises(InputError) as info:
        read_stories(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def ids(path: Path | str) -> list[tuple[str, str]]:
    return [(s.story_id, s.text) for s in read_stories(path)]


def bleu(capsys: pytest.CaptureFixture[str], hyp: Path | str, ref: Path) -> tuple[int, str, str]:
    code = main(["score", str(hyp), "-r", str(ref), "-m", "bleu-4", "-q", "-b"])
    out, err = capsys.readouterr()
    return code, out.strip(), err


def zip_of(path: Path, members: list[tuple[str, str]]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def tar_of(data: bytes, *, gz: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tf:
        info = tarfile.TarInfo("hyp.jsonl")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ------------------------------------------------------------------------------------- 1. members of one name
def test_a_member_name_stored_twice_is_refused_when_chosen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dup.zip:a.jsonl`` read the second ``a.jsonl`` (the references): BLEU 1.0000 where 0.3417 is right."""
    dup = zip_of(tmp_path / "dup.zip", [("a.jsonl", HYP), ("a.jsonl", REF)])
    ref = tmp_path / "ref.jsonl"
    ref.write_text(REF)
    message = error_of(f"{dup}:a.jsonl")
    assert "holds 2 members named 'a.jsonl'" in message and "cannot tell which" in message
    assert "dup.zip:a.jsonl" not in error_of(dup)  # the error for the archive no longer suggests it
    code, out, err = bleu(capsys, f"{dup}:a.jsonl", ref)
    assert code != 0 and out == "" and "2 members named 'a.jsonl'" in err
    plain = tmp_path / "hyp.jsonl"
    plain.write_text(HYP)
    assert bleu(capsys, plain, ref)[:2] == (0, "0.3417")


def test_names_that_differ_by_a_leading_dot_slash_are_one_name(tmp_path: Path) -> None:
    """Unzipping puts ``./a.jsonl`` and ``a.jsonl`` in one place: which one is meant cannot be told either."""
    dot = zip_of(tmp_path / "dot.zip", [("./a.jsonl", REF), ("a.jsonl", HYP)])
    for chosen in ("a.jsonl", "./a.jsonl"):
        assert "holds 2 members named" in error_of(f"{dot}:{chosen}")
    assert "holds 2 members named" in error_of(dot)


def test_a_duplicate_name_beside_others_is_not_suggested_and_the_others_read(tmp_path: Path) -> None:
    dup = zip_of(tmp_path / "dup.zip", [("a.jsonl", REF), ("a.jsonl", HYP), ("b.jsonl", HYP)])
    message = error_of(dup)
    assert "e.g. dup.zip:b.jsonl" in message and "a.jsonl appears more than once" in message
    assert ids(f"{dup}:b.jsonl") == ids(zip_of(tmp_path / "one.zip", [("b.jsonl", HYP)]))
    both = zip_of(tmp_path / "both.zip", [("a.jsonl", REF), ("a.jsonl", HYP), ("b.jsonl", HYP), ("b.jsonl", REF)])
    message = error_of(both)
    assert "each name more than once" in message and "e.g." not in message


# ------------------------------------------------------------------------------------ 2. compressed content
@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("stories", None, ["a zip archive", "name ends in .zip"]),  # filled with a zip below
        ("hyp.jsonl.bz2", bz2.compress(HYP.encode()), ["bzip2-compressed", "decompress it first"]),
        ("hyp.jsonl.xz", lzma.compress(HYP.encode()), ["xz-compressed", "decompress it first"]),
        ("hyp.jsonl.zst", b"\x28\xb5\x2f\xfd" + bytes(range(256)), ["zstd-compressed", "decompress it first"]),
        ("hyp.7z", b"7z\xbc\xaf\x27\x1c" + bytes(range(256)), ["a 7z archive", "extract it first"]),
        ("hyp.jsonl", gzip.compress(HYP.encode()), ["gzip-compressed", "name ends in .gz"]),
        ("hyp.tar.gz", tar_of(HYP.encode(), gz=True), ["a tar archive", "extract it"]),
        ("hyp.tgz", tar_of(HYP.encode(), gz=True), ["a tar archive compressed with gzip", "extract it"]),
        ("hyp.tar", tar_of(HYP.encode(), gz=False), ["a tar archive", "extract it"]),
    ],
)
def test_compressed_content_says_what_it_is_and_what_to_do(
    tmp_path: Path, name: str, data: bytes | None, said: list[str]
) -> None:
    """Each said "not UTF-8 text (byte 11 ...); save it as UTF-8", or (tar.gz) "CSV needs a 'text' column"."""
    p = tmp_path / name
    if data is None:
        zip_of(p, [("hyp.jsonl", HYP)])
    else:
        p.write_bytes(data)
    message = error_of(p)
    assert all(part in message for part in said), message
    assert "save it as UTF-8" not in message and "CSV needs" not in message


@pytest.mark.parametrize("fmt", ["jsonl", "csv", None])
def test_compressed_content_is_told_whatever_the_format_given(tmp_path: Path, fmt: str | None) -> None:
    p = tmp_path / "h.jsonl"
    p.write_bytes(bz2.compress(HYP.encode()))
    assert "bzip2-compressed" in error_of(p, format=fmt)


def test_text_that_merely_starts_like_a_signature_still_reads(tmp_path: Path) -> None:
    """Only whole signatures count: a CSV whose header starts "BZh9" or "PK" is text."""
    for header in ("BZh9,story_id,text", "PK,story_id,text"):
        p = tmp_path / "h.csv"
        p.write_text(f"{header}\nx,s0,a story .\n")
        assert [s.text for s in read_stories(p, format="csv")] == ["a story ."]
    assert binary_kind(b"BZhello") is None and binary_kind(b"BZh91AY&SY") is not None
    assert binary_kind(b"PK\x03\x04") is not None and binary_kind(b"\x1f\x8b\x08\x00") is not None  # 4 bytes do


def test_upper_case_zip_and_gz_read_as_lower_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ONE.ZIP`` and ``HYP.JSONL.GZ`` said "not UTF-8 text"; they are read as ``.zip`` and ``.gz`` are."""
    lower = zip_of(tmp_path / "one.zip", [("hyp.jsonl", HYP)])
    upper = zip_of(tmp_path / "ONE.ZIP", [("hyp.jsonl", HYP)])
    gz, big_gz = tmp_path / "hyp.jsonl.gz", tmp_path / "HYP.JSONL.GZ"
    gz.write_bytes(gzip.compress(HYP.encode()))
    big_gz.write_bytes(gzip.compress(HYP.encode()))
    want = ids(lower)
    assert len(want) == 5
    assert ids(upper) == ids(f"{upper}:hyp.jsonl") == ids(f"{lower}:hyp.jsonl") == ids(gz) == ids(big_gz) == want
    assert split_member(f"{tmp_path}/A.Zip:m.jsonl") == (tmp_path / "A.Zip", "m.jsonl")
    tsv, big_tsv = tmp_path / "s.tsv.gz", tmp_path / "S.TSV.GZ"  # the tab delimiter from the inner name too
    tsv.write_bytes(gzip.compress(TSV.encode()))
    big_tsv.write_bytes(gzip.compress(TSV.encode()))
    assert ids(big_tsv) == ids(tsv) == [(f"s{i}", f"story {i} .") for i in range(3)]
    ref = tmp_path / "ref.jsonl"
    ref.write_text(REF)
    assert bleu(capsys, upper, ref)[:2] == bleu(capsys, big_gz, ref)[:2] == (0, "0.3417")


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("zip", "standard input holds a zip archive, which vistkit reads only from a file"),
        ("gzip", "standard input holds gzip-compressed data"),
        ("xz", "xz-compressed"),
    ],
)
def test_compressed_data_on_standard_input_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, said: str
) -> None:
    if kind == "zip":
        data = zip_of(tmp_path / "one.zip", [("hyp.jsonl", HYP)]).read_bytes()
    else:
        data = gzip.compress(HYP.encode()) if kind == "gzip" else lzma.compress(HYP.encode())
    _stdin(monkeypatch, data)
    assert said in error_of("-")


# ------------------------------------------------------------------------------------- 3. two byte-order marks
@pytest.mark.parametrize(
    ("name", "text"),
    [("h.jsonl", HYP), ("h.csv", "story_id,text\ns0,a story .\n"), ("h.json", '{"s0": "a story ."}')],
)
def test_two_byte_order_marks_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    """JSONL said "line 1: invalid JSON at column 1: Expecting value"."""
    one, two = tmp_path / f"one_{name}", tmp_path / name
    one.write_bytes(b"\xef\xbb\xbf" + text.encode())
    two.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + text.encode())
    assert read_stories(one)  # one mark is welcome
    assert "starts with two byte-order marks (U+FEFF); remove the second" in error_of(two)
    _stdin(monkeypatch, two.read_bytes())
    assert "starts with two byte-order marks" in error_of("-")


def test_a_byte_order_mark_starting_a_later_jsonl_line_is_named(tmp_path: Path) -> None:
    p = tmp_path / "joined.jsonl"  # cat a.jsonl b.jsonl, b written with a mark
    p.write_bytes(HYP.encode() + b"\xef\xbb\xbf" + REF.encode())
    assert "line 6: starts with a byte-order mark (U+FEFF)" in error_of(p)


# ---------------------------------------------------------------------------------------------- 4. Hangul fillers
@pytest.mark.parametrize("char", ["\u3164", "\u115f", "\u1160", "\uffa0"])
def test_hangul_fillers_are_invisible_in_ids(tmp_path: Path, char: str) -> None:
    """U+200B was refused as invisible, the Hangul fillers (letters that show as nothing) accepted."""
    p = tmp_path / "h.jsonl"
    p.write_text(json.dumps({"story_id": f"s0{char}", "text": "a story ."}) + "\n")
    message = error_of(p)
    assert f"holds U+{ord(char):04X} (" in message and "invisible in an id" in message
    assert f"'s0\\u{ord(char):04x}'" in message  # shown escaped, as U+200B is
    with pytest.raises(InputError, match="invisible in an id"):
        Story("s1", "a story .", photo_ids=("1", f"2{char}"))
    assert Story("한국", "a story .").story_id == "한국"  # Hangul itself is welcome
