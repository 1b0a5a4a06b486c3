"""Bad-input probes, round 3 (input side, score/compare/validate): each test pins one class of problem that a
probe found, so the fix holds for the class and not only the example.

Classes: a zip's one member read by its own format; nested archives; storylet fields that are not text (str(None)
became the story "None"); photo orders that are not whole numbers or repeat; ids with control or invisible
characters, and ids in two Unicode forms; NUL characters and UTF-16 files; AREL ids that collide; JSON documents
and files with more values or stories than memory allows (refused before or while reading); validate opening
.zip/.gz; --name "" in compare; NaN/inf metric options; photo maps and region boxes.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import vistkit
from vistkit.cli import main
from vistkit.data.images import load_photo_map, parse_bbox
from vistkit.data.readers import json_values, read_stories
from vistkit.data.story import Story
from vistkit.data.validate import validate_submission
from vistkit.errors import InputError

GiB = 1 << 30
STORYLET = {
    "story_id": "s1",
    "photo_flickr_id": "1",
    "worker_arranged_photo_order": 0,
    "text": "we went out .",
    "album_id": "A",
}
JSONL = "".join(
    json.dumps({"story_id": str(i), "photo_ids": [f"{i}{j}" for j in range(5)], "text": f"story {i} ."}) + "\n"
    for i in range(3)
)


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def error_of(path: Path, **kwargs: object) -> str:
    with pytest.raises(InputError) as info:
        read_stories(path, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def storylets(tmp_path: Path, *records: dict[str, object], name: str = "s.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"annotations": [[r] for r in records]}))
    return p


# ------------------------------------------------------------------------------------------------ archives
@pytest.mark.parametrize(
    ("member", "content"),
    [("h.jsonl", JSONL), ("h.csv", "story_id,text\n0,a\n1,b\n2,c\n"), ("h.tsv", "story_id\ttext\n0\ta\n1\tb\n2\tc\n")],
)
def test_a_zip_is_read_in_the_format_of_its_one_member(tmp_path: Path, member: str, content: str) -> None:
    """stories.zip holding stories.jsonl was parsed as one JSON document ("Extra data" at line 2)."""
    p = tmp_path / "stories.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr(member, content)
        zf.writestr("__MACOSX/._" + member, "junk")  # macOS litter is still ignored
    assert [s.story_id for s in read_stories(p)] == ["0", "1", "2"]


@pytest.mark.parametrize("inner", ["inner.zip", "h.jsonl.gz", "h.json.bz2"])
def test_an_archive_inside_a_zip_is_refused_naming_it(tmp_path: Path, inner: str) -> None:
    p = tmp_path / "outer.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr(inner, gzip.compress(JSONL.encode()))
    msg = error_of(p)
    assert inner in msg and "itself compressed" in msg


@pytest.mark.parametrize(
    ("data", "what"),
    [
        ("\ufeff".encode("utf-16-le") + JSONL.encode("utf-16-le"), "UTF-16"),
        (JSONL.encode("utf-32"), "UTF-32"),
        (gzip.compress(JSONL.encode()), "gzip"),
    ],
)
def test_text_that_is_not_utf8_says_what_it_is(tmp_path: Path, data: bytes, what: str) -> None:
    p = tmp_path / "h.jsonl"
    p.write_bytes(data)
    assert what in error_of(p)


def test_utf16_without_a_bom_and_nul_bytes_name_the_line(tmp_path: Path) -> None:
    """UTF-16 without a byte-order mark decodes as UTF-8 full of NULs: the error said "Expecting value"."""
    p = tmp_path / "h.jsonl"
    p.write_bytes(JSONL.encode("utf-16-be"))
    msg = error_of(p)
    assert "line 1" in msg and "NUL" in msg and "UTF-16" in msg


@pytest.mark.parametrize(
    ("name", "content"),
    [("n.csv", "story_id,text\n1,he\x00llo\n"), ("n.json", '{"1": "a\\u0000b"}')],
)
def test_a_nul_character_in_a_story_is_refused(tmp_path: Path, name: str, content: str) -> None:
    p = tmp_path / name
    p.write_text(content)
    msg = error_of(p)
    assert "NUL" in msg and name in msg


# ------------------------------------------------------------------------------------------------ storylets
@pytest.mark.parametrize("value", [None, {"a": 1}, 12, ["a"]])
def test_a_storylet_text_that_is_not_a_string_is_refused(tmp_path: Path, value: object) -> None:
    """The story was str(None) == "None" (scored as if the worker wrote "None")."""
    msg = error_of(storylets(tmp_path, {**STORYLET, "text": value}))
    assert "storylet 1" in msg and "'text'" in msg and "not text" in msg


def test_a_story_field_that_is_a_list_is_refused_and_one_that_differs_is_read_per_storylet(tmp_path: Path) -> None:
    p = storylets(tmp_path, {**STORYLET, "nouns": ["park"]})
    assert "--hyp-field" in error_of(p, field="nouns")
    # a field that differs between storylets is a sentence per storylet (SIS `original_text`), read in order
    p = storylets(
        tmp_path,
        {**STORYLET, "predicted_story": "one"},
        {**STORYLET, "photo_flickr_id": "2", "worker_arranged_photo_order": 1, "predicted_story": "two"},
    )
    (story,) = read_stories(p, field="predicted_story")
    assert story.text == "one two" and story.sentences == ("one", "two")


@pytest.mark.parametrize("order", [True, 1.5, 1e300, "x", None])
def test_a_photo_order_that_is_not_a_whole_number_is_refused(tmp_path: Path, order: object) -> None:
    msg = error_of(storylets(tmp_path, {**STORYLET, "worker_arranged_photo_order": order}))
    assert "story s1" in msg and "worker_arranged_photo_order" in msg and "whole number" in msg


def test_photo_orders_as_digit_strings_still_read_and_a_repeated_order_is_refused(tmp_path: Path) -> None:
    second = {**STORYLET, "photo_flickr_id": "2", "text": "then home ."}
    p = storylets(
        tmp_path, {**second, "worker_arranged_photo_order": "1"}, {**STORYLET, "worker_arranged_photo_order": "0"}
    )
    assert read_stories(p)[0].sentences == ("we went out .", "then home .")
    p = storylets(tmp_path, {**STORYLET}, {**second, "worker_arranged_photo_order": 0})
    assert "two storylets at worker_arranged_photo_order 0" in error_of(p)


def test_a_system_that_is_not_text_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"story_id": "1", "text": "a", "system": {"name": "x"}}\n')
    msg = error_of(p)
    assert "s.jsonl line 1" in msg and "'system'" in msg


def test_arel_ids_that_collide_are_refused(tmp_path: Path) -> None:
    """Album "1" with two stories makes 1#0 and 1#1; an album named "1#0" silently duplicated one."""
    p = tmp_path / "arel.json"
    p.write_text(json.dumps({"1": ["a", "b"], "1#0": ["c"]}))
    msg = error_of(p, format="arel")
    assert "'1'" in msg and "'1#0'" in msg


# ------------------------------------------------------------------------------------------------ ids
def test_ids_in_two_unicode_forms_are_one_id() -> None:
    """café typed as e + combining accent (macOS file names, NFD) matched nothing in an NFC reference file."""
    nfd, nfc = "cafe\u0301", "caf\u00e9"
    s = Story(story_id=nfd, text="x", photo_ids=(nfd,), album_id=nfd)
    assert s.story_id == nfc and s.photo_ids == (nfc,) and s.album_id == nfc
    assert Story(story_id="1741642", text="x").story_id == "1741642"


def test_the_same_id_in_two_unicode_forms_is_a_duplicate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "h.jsonl"
    p.write_text('{"story_id": "caf\\u00e9", "text": "a"}\n{"story_id": "cafe\\u0301", "text": "b"}\n')
    code, _, err = cli(capsys, "score", p, "-m", "rovist-nr")
    assert code == 1 and "more than one story has story key 'café'" in err


@pytest.mark.parametrize(
    ("field", "value", "char"),
    [
        ("story_id", "a\u200b", "U+200B"),
        ("story_id", "a\nb", "U+000A"),
        ("story_id", "a\x1b[31m", "U+001B"),
        ("album_id", "\ufeff7", "U+FEFF"),
        ("photo_ids", ["1", "2\t"], "U+0009"),
    ],
)
def test_an_id_with_an_invisible_or_control_character_is_refused_naming_the_line(
    tmp_path: Path, field: str, value: object, char: str
) -> None:
    p = tmp_path / "h.jsonl"
    rec = {"story_id": "1", "text": "a", field: value}
    p.write_text('{"story_id": "0", "text": "fine"}\n' + json.dumps(rec) + "\n")
    msg = error_of(p)
    assert "h.jsonl line 2" in msg and char in msg and "\n" not in msg


# ------------------------------------------------------------------------------------------------ memory
def test_json_values_are_counted_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISTKIT_MAX_JSON_VALUES", "1000")
    p = tmp_path / "lists.json"
    p.write_text("[" + ",".join(["[]"] * 2000) + "]")
    msg = error_of(p)
    assert "JSON values" in msg and "VISTKIT_MAX_JSON_VALUES" in msg
    with pytest.raises(InputError, match="VISTKIT_MAX_JSON_VALUES"):
        validate_submission(p)
    small = tmp_path / "small.json"
    small.write_text(json.dumps({str(i): "a story ." for i in range(200)}))
    assert len(read_stories(small)) == 200


def test_a_vist_storylet_costs_a_few_values() -> None:
    """The count is an upper bound, tight enough for real files: a storylet of five fields counts 10."""
    assert json_values(json.dumps([[STORYLET]])) <= 10


@pytest.mark.parametrize("name", ["many.jsonl", "many.csv", "many.json"])
def test_stories_per_file_are_counted_while_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("VISTKIT_MAX_STORIES", "50")
    p = tmp_path / name
    if name.endswith(".jsonl"):
        p.write_text("".join(f'{{"story_id": "{i}", "text": ""}}\n' for i in range(51)))
    elif name.endswith(".csv"):
        p.write_text("story_id,text\n" + "".join(f"{i},\n" for i in range(51)))
    else:
        p.write_text(json.dumps({str(i): "" for i in range(51)}))
    msg = error_of(p)
    assert "more than 50 stories" in msg and "VISTKIT_MAX_STORIES" in msg
    monkeypatch.setenv("VISTKIT_MAX_STORIES", "51")
    assert len(read_stories(p)) == 51


def test_a_json_file_of_empty_lists_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """60 MB of [[],[],...] (20 million lists) took 1.5 GB to parse before any check; now it is refused first."""
    p = tmp_path / "lists.json"
    with open(p, "w") as fh:
        fh.write("[")
        for _ in range(100):
            fh.write("[]," * 200_000)
        fh.write("[]]")
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({GiB}, {GiB}))\n"
        "from vistkit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(vistkit.__file__).resolve().parents[1]), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("VISTKIT_DEBUG", None)
    run = subprocess.run(
        [sys.executable, "-c", code, "validate", str(p)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 1 and "JSON values" in run.stderr and "Traceback" not in run.stderr


# ------------------------------------------------------------------------------------------------ validate
def test_validate_opens_zip_and_gzip_like_every_reader(tmp_path: Path) -> None:
    sub = json.dumps(
        {
            "output_stories": [
                {"album_id": "1", "photo_sequence": ["1", "2", "3", "4", "5"], "story_text_normalized": "a"}
            ]
        }
    )
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("sub.json", sub)
    g = tmp_path / "sub.json.gz"
    g.write_bytes(gzip.compress(sub.encode()))
    assert validate_submission(z).ok and validate_submission(g).ok
    u = tmp_path / "sub16.json"
    u.write_bytes(sub.encode("utf-16"))
    report = validate_submission(u)
    assert not report.ok and any("UTF-16" in f.message for f in report.findings)


# ------------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize("name", ["", "a\nb", "x\u200b"])
def test_compare_refuses_an_empty_or_invisible_system_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """--name "" passed: the walrus test read the empty name as "no empty name"."""
    p = tmp_path / "h.jsonl"
    p.write_text(JSONL)
    code, _, err = cli(capsys, "compare", p, p, "-r", p, "-m", "sacrebleu", "--name", name, "--name", "b")
    assert code == 1 and "--name" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity"])
def test_a_metric_option_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    p = tmp_path / "h.jsonl"
    p.write_text(JSONL)
    code, _, err = cli(capsys, "score", p, "-r", p, "-m", "sacrebleu", "-O", f"sacrebleu.smooth_value={value}")
    assert code == 1 and "finite number" in err


# ------------------------------------------------------------------------------------------------ grounding
def test_a_photo_map_with_null_or_object_photo_ids_is_refused(tmp_path: Path) -> None:
    """str(None) looked for the photo "None"."""
    p = tmp_path / "map.json"
    p.write_text(json.dumps({"s1": ["1", None]}))
    with pytest.raises(InputError, match="photo id 2 is null"):
        load_photo_map(p)
    p.write_text(json.dumps({"s1": [1741642, "2"]}))
    assert load_photo_map(p) == {"s1": ("1741642", "2")}


@pytest.mark.parametrize("box", ["[0, 0, 1e999, 3]", "[0, 0, 1e300, 3]", "[-1e12, 0, 1, 3]"])
def test_a_region_box_beyond_any_photo_is_refused(box: str) -> None:
    with pytest.raises(InputError, match="beyond any photo"):
        parse_bbox(box)
    assert parse_bbox("[0, 0, 3.5, 4]") == (0.0, 0.0, 3.5, 4.0)
