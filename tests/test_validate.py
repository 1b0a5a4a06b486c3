"""`vistkit validate`: the 2018 challenge's checks (order and messages of EvalVISTSharedTask.java), vistkit's
extra checks, the official example submissions, and fuzzing (no input may produce a traceback)."""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.cli import main
from vistkit.data.readers import write_challenge
from vistkit.data.story import Story, StorySet
from vistkit.data.validate import Level, Origin, ValidationReport, challenge_key, validate_submission
from vistkit.errors import InputError

CHALLENGE = "vist-challenge-naacl2018"
EXAMPLES = (CHALLENGE, "example_submission_json")
MISSING_SEQ = "7002675114-7148761587-7002675998-7148771071-7002682260"

PASSED = [
    "[Passed] Test file is in valid JSON syntax.",
    "[Passed] Each photo sequence has only one story.",
    "[Passed] All required stories are submitted.",
]


def _story(photos: list[Any], text: Any = "a story .", album: Any = "al") -> dict[str, Any]:
    return {"album_id": album, "photo_sequence": photos, "story_text_normalized": text}


def _sub(*stories: Any, **top: Any) -> bytes:
    return json.dumps({"team_name": "t", "output_stories": list(stories), **top}).encode()


SEQ_A = ["1", "2", "3", "4", "5"]
SEQ_B = ["6", "7", "8", "9", "10"]
TEMPLATE = StorySet(
    [
        Story(story_id="1-2-3-4-5", text="", photo_ids=tuple(SEQ_A), album_id="al"),
        Story(story_id="6-7-8-9-10", text="", photo_ids=tuple(SEQ_B), album_id="al"),
    ]
)


def _messages(report: ValidationReport, origin: Origin | None = None) -> list[str]:
    return [f.message for f in report.findings if origin is None or f.origin is origin]


def _checks(report: ValidationReport, level: Level) -> list[str]:
    return [f.check for f in report.findings if f.level is level]


# ------------------------------------------------------------------------------------ official examples
def test_example_submission_passes_with_template() -> None:
    report = validate_submission(
        shared_file(*EXAMPLES, "example-submission-file.test.json"),
        template=shared_file(CHALLENGE, "vist-challenge-template.json"),
    )
    assert report.ok
    assert _messages(report, Origin.CHALLENGE) == PASSED
    assert report.n_stories == 2019 and report.n_required == 1938
    # 81 of its 2,019 sequences are not in the 1,938-sequence template (SOURCE.md); the scorer ignores them
    extra = next(f for f in report.findings if f.check == "not-in-template")
    assert len(extra.sequences) == 2019 - 1938 and extra.level is Level.WARNING


def test_empty_example_passes_with_a_warning_per_empty_story() -> None:
    report = validate_submission(
        shared_file(*EXAMPLES, "example-submission-file-extra.empty.test.json"),
        template=shared_file(CHALLENGE, "vist-challenge-template.json"),
    )
    assert report.ok
    assert _messages(report, Origin.CHALLENGE) == PASSED
    empty = next(f for f in report.findings if f.check == "empty-story")
    assert len(empty.indices) == 1938 and empty.level is Level.WARNING


def test_missing_example_fails_naming_the_sequence() -> None:
    report = validate_submission(
        shared_file(*EXAMPLES, "example-submission-file-extra.missing.happy.test.json"),
        template=shared_file(CHALLENGE, "vist-challenge-template.json"),
    )
    assert not report.ok
    assert _messages(report, Origin.CHALLENGE) == [
        *PASSED[:2],
        f"[Error] One story is missing in this submission. Photo seq: {MISSING_SEQ}-",
    ]
    assert report.errors[0].sequences == (MISSING_SEQ,)


def test_wrong_example_is_a_syntax_error_with_line_and_column() -> None:
    path = shared_file(*EXAMPLES, "example-submission-file-extra.wrong.happy.test.json")
    report = validate_submission(path, template=shared_file(CHALLENGE, "vist-challenge-template.json"))
    assert [f.message for f in report.errors] == ["[Error] Incorrect JSON syntax (JsonSyntaxException)."]
    err = report.errors[0]
    # the comma after the photo_sequence list is missing: the parser stops at line 17, column 7
    assert (err.line, err.column) == (17, 7)
    assert "line 17, column 7" in "\n".join(report.lines())


def test_cli_on_examples(capsys: pytest.CaptureFixture[str]) -> None:
    template = str(shared_file(CHALLENGE, "vist-challenge-template.json"))
    ok = str(shared_file(*EXAMPLES, "example-submission-file.test.json"))
    missing = str(shared_file(*EXAMPLES, "example-submission-file-extra.missing.happy.test.json"))
    wrong = str(shared_file(*EXAMPLES, "example-submission-file-extra.wrong.happy.test.json"))
    assert main(["validate", ok, "--template", template]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"[Test File] {ok}"
    assert out.splitlines()[1:4] == PASSED
    assert main(["validate", missing, "--template", template]) == 1
    assert f"Photo seq: {MISSING_SEQ}-" in capsys.readouterr().out
    assert main(["validate", wrong, "--format", "json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["valid"] is False
    assert payload["findings"][0]["line"] == 17 and payload["findings"][0]["column"] == 7


def test_references_intersect_the_template() -> None:
    # a template sequence without reference stories is not required (the challenge intersects gs and template)
    refs = StorySet([Story(story_id="r1", text="x", photo_ids=tuple(SEQ_A))])
    report = validate_submission(_sub(_story(SEQ_A)), template=TEMPLATE, references=refs)
    assert report.ok and report.n_required == 1
    report = validate_submission(_sub(_story(SEQ_A)), template=TEMPLATE)
    assert not report.ok and report.errors[0].sequences == ("6-7-8-9-10",)
    # references alone: their sequences are required
    report = validate_submission(_sub(_story(SEQ_B)), references=refs)
    assert report.errors[0].message.endswith("Photo seq: 1-2-3-4-5-")


def test_no_template_means_check_4_is_not_done() -> None:
    report = validate_submission(_sub(_story(SEQ_A)))
    assert report.ok
    assert _messages(report, Origin.CHALLENGE) == PASSED[:2]
    assert any(f.check == "all-stories" and f.level is Level.NOTE for f in report.findings)


# ------------------------------------------------------------------------------ challenge checks, by hand
def test_challenge_key_has_a_trailing_dash() -> None:
    assert challenge_key(["1", "2"]) == "1-2-"
    assert challenge_key([]) == ""


def test_missing_attribute_message_with_and_without_photo_sequence() -> None:
    r = validate_submission(_sub(_story(SEQ_A), {"photo_sequence": SEQ_B, "story_text_normalized": "x"}))
    assert r.errors[0].message == "[Error] One story is missing some attributes. Photo seq: 6-7-8-9-10-"
    assert "album_id" in r.errors[0].detail and r.errors[0].indices == (1,)
    # without photo_sequence getPhotoIdSeqStr() is null, so the message has no "Photo seq:" part
    r = validate_submission(_sub({"album_id": "a", "story_text_normalized": "x", "photo_sequence": None}))
    assert r.errors[0].message == "[Error] One story is missing some attributes."
    # a JSON null counts as missing, as in Gson; no [Passed] line before it (hasNull runs in the JSON step)
    r = validate_submission(_sub(_story(SEQ_A, text=None)))
    assert _messages(r, Origin.CHALLENGE) == [
        "[Error] One story is missing some attributes. Photo seq: 1-2-3-4-5-"
    ]


def test_duplicate_sequence_is_named_once_per_extra_story() -> None:
    r = validate_submission(_sub(_story(SEQ_A), _story(SEQ_B), _story(SEQ_A, "other")))
    assert _messages(r, Origin.CHALLENGE) == [
        PASSED[0],
        "[Error] One photo sequence has more than one stories. Photo seq: 1-2-3-4-5-",
    ]
    assert r.errors[0].indices == (2,)


def test_gson_binding_errors_are_json_syntax_errors() -> None:
    cases = [
        _sub(_story("1-2-3-4-5")),  # photo_sequence is a string
        _sub(_story(SEQ_A, text={"t": 1})),  # story is an object
        _sub(_story([["1"], "2"])),  # a photo id is a list
        _sub(_story(SEQ_A, album=[1])),
        _sub("not a story"),
        json.dumps({"output_stories": {"a": 1}}).encode(),
    ]
    for raw in cases:
        r = validate_submission(raw)
        assert [f.message for f in r.errors] == ["[Error] Incorrect JSON syntax (JsonSyntaxException)."], raw
        assert r.errors[0].detail


def test_binding_errors_win_over_missing_attributes() -> None:
    # Gson binds the whole list before the hasNull loop
    r = validate_submission(_sub(_story(SEQ_A, text=None), _story("x")))
    assert r.errors[0].message == "[Error] Incorrect JSON syntax (JsonSyntaxException)."


def test_numbers_and_booleans_are_read_as_written_with_a_warning() -> None:
    raw = (
        b'{"output_stories": [{"album_id": 7, "photo_sequence": [1, 2, 3, 4, 50.0], '
        b'"story_text_normalized": true}]}'
    )
    r = validate_submission(raw)
    types = next(f for f in r.findings if f.check == "types")
    assert types.level is Level.WARNING and types.sequences == ("1-2-3-4-50.0",)
    # the challenge read them as written; vistkit's reader (what `score` uses) refuses such a file, so the
    # verdict is INVALID (VALID means `vistkit score` accepts the file)
    readable = next(f for f in r.findings if f.check == "readable")
    assert not r.ok and readable.level is Level.ERROR


def test_constructs_the_java_program_crashes_on_are_vistkit_errors() -> None:
    for raw in (b"[]", b"{}", b'{"output_stories": null}', _sub(None, _story(SEQ_A)), b"3"):
        r = validate_submission(raw)
        assert not r.ok
        assert r.errors[0].origin is Origin.VISTKIT and r.errors[0].message.startswith("[Error] (vistkit)")


def test_nonstandard_json_that_gson_accepted_is_rejected() -> None:
    for raw in (b'{"output_stories": [NaN]}', b"{'output_stories': []}", b'{"output_stories": []} // x', b""):
        r = validate_submission(raw)
        assert r.errors[0].message == "[Error] Incorrect JSON syntax (JsonSyntaxException).", raw


# ------------------------------------------------------------------------------------ vistkit's checks
def test_vistkit_checks_come_after_the_challenge_and_are_marked() -> None:
    r = validate_submission(
        _sub(
            _story(SEQ_A, text="   ", album="wrong"),
            _story(["6", "7", "8", "9"], text="café story"),
            _story(["11", "11", "12", "13", "14"]),
        ),
        template=TEMPLATE,
    )
    challenge = [i for i, f in enumerate(r.findings) if f.origin is Origin.CHALLENGE]
    ours = [i for i, f in enumerate(r.findings) if f.origin is Origin.VISTKIT]
    assert max(challenge) < min(ours)
    assert all("(vistkit)" in r.findings[i].message for i in ours)
    by_check = {f.check: f for f in r.findings if f.origin is Origin.VISTKIT}
    assert by_check["empty-story"].indices == (0,)
    assert by_check["album"].indices == (0,)
    assert by_check["photo-count"].indices == (1,)
    assert by_check["non-ascii"].indices == (1,)
    assert by_check["repeated-photo"].indices == (2,)
    assert by_check["not-in-template"].indices == (1, 2)
    assert all(by_check[c].level is Level.WARNING for c in by_check)
    # the template's second sequence is missing: the challenge's error, named once
    assert r.errors[0].message == "[Error] One story is missing in this submission. Photo seq: 6-7-8-9-10-"


def test_null_photo_ids_and_empty_sequences_are_errors() -> None:
    r = validate_submission(_sub(_story(["1", None, "3", "4", "5"]), _story([])))
    by_check = {f.check: f for f in r.findings if f.level is Level.ERROR}
    assert by_check["null-photo-id"].indices == (0,)
    assert by_check["empty-photo-sequence"].indices == (1,)
    assert r.findings[0].message == PASSED[0]  # the challenge itself accepts both


def test_no_stories_is_an_error() -> None:
    r = validate_submission(_sub())
    assert [f.check for f in r.errors] == ["empty"]


def test_encoding_problems() -> None:
    doc = {"output_stories": [_story(SEQ_A, text="caf\u00e9")]}
    latin1 = json.dumps(doc, ensure_ascii=False).encode("latin-1")
    r = validate_submission(latin1)
    enc = next(f for f in r.findings if f.check == "encoding")
    assert enc.level is Level.ERROR and "not UTF-8" in enc.message
    # the challenge's checks still run (on the text with the bad byte replaced), and come first
    assert r.findings[0].message == PASSED[0]
    bom = validate_submission(b"\xef\xbb\xbf" + _sub(_story(SEQ_A)))
    assert bom.ok and any(f.check == "encoding" and f.level is Level.WARNING for f in bom.findings)


def test_many_offenders_are_listed_up_to_a_limit() -> None:
    template = StorySet([Story(story_id=str(i), text="", photo_ids=(str(i),)) for i in range(30)])
    r = validate_submission(_sub(), template=template)
    missing = next(f for f in r.findings if f.check == "all-stories")
    assert len(missing.sequences) == 30
    lines = missing.lines(max_listed=10)
    assert sum(line.startswith("[Error] One story is missing") for line in lines) == 10
    assert "20 more" in lines[-1]


def test_bad_template_or_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        validate_submission(tmp_path / "nope.json")
    bad = tmp_path / "t.json"
    bad.write_text("{")
    with pytest.raises(InputError):
        validate_submission(_sub(), template=bad)
    assert main(["validate", str(tmp_path / "nope.json")]) == 1


# ------------------------------------------------------------------------------------ fuzzing
def _check_no_traceback(raw: bytes) -> ValidationReport:
    report = validate_submission(raw, template=TEMPLATE)
    assert isinstance(report, ValidationReport)
    json.dumps(report.as_dict())
    "\n".join(report.lines()).encode("utf-8")
    return report


def _check_cli(raw: bytes) -> None:
    """The CLI on the same bytes: exit 0 when valid, 1 when not, never an exception."""
    report = _check_no_traceback(raw)
    with tempfile.TemporaryDirectory() as d:
        sub, template = Path(d) / "sub.json", Path(d) / "template.json"
        sub.write_bytes(raw)
        write_challenge(TEMPLATE, template)
        code = main(["validate", str(sub), "--template", str(template), "--format", "json"])
    assert code == (0 if report.ok else 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
fields = st.sampled_from(["album_id", "photo_sequence", "story_text_normalized", "output_stories", "x"])
story_like = st.fixed_dictionaries(
    {},
    optional={
        "album_id": json_values,
        "photo_sequence": st.lists(st.text(max_size=4) | json_values, max_size=6) | json_values,
        "story_text_normalized": st.text(max_size=20) | json_values,
    },
)


@st.composite
def mutated_submissions(draw: st.DrawFn) -> bytes:
    """A valid submission with a few bytes flipped, deleted or inserted."""
    raw = bytearray(_sub(_story(SEQ_A), _story(SEQ_B, text="we went . it was fun .")))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "delete", "insert"]))
        i = draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del raw[i]
        else:
            raw[i:i] = draw(st.sampled_from([b"null", b"[", b"}", b'"', b",", b"\xff", b"\\ud800", b"1e999"]))
    return bytes(raw)


@st.composite
def field_replacements(draw: st.DrawFn) -> bytes:
    """A valid submission with one field replaced by any JSON value (and maybe one removed)."""
    doc: dict[str, Any] = {"output_stories": [_story(SEQ_A), _story(SEQ_B)]}
    i = draw(st.integers(0, 1))
    doc["output_stories"][i][draw(fields)] = draw(json_values)
    if draw(st.booleans()):
        doc["output_stories"][i].pop(draw(fields), None)
    return json.dumps(doc).encode()


any_submission = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: json.dumps({"output_stories": v}).encode()),
    st.lists(story_like | json_values, max_size=5).map(lambda v: json.dumps({"output_stories": v}).encode()),
    mutated_submissions(),
    field_replacements(),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(raw: bytes) -> None:
    _check_no_traceback(raw)


@FUZZ
@given(json_values)
def test_fuzz_random_json(value: Any) -> None:
    _check_no_traceback(json.dumps(value).encode())
    _check_no_traceback(json.dumps({"output_stories": value}).encode())


@FUZZ
@given(st.lists(story_like | json_values, max_size=5))
def test_fuzz_story_lists(stories: list[Any]) -> None:
    _check_no_traceback(json.dumps({"output_stories": stories}).encode())


@FUZZ
@given(mutated_submissions())
def test_fuzz_mutated_valid_submission(raw: bytes) -> None:
    _check_no_traceback(raw)


@FUZZ
@given(field_replacements())
def test_fuzz_field_replacement(raw: bytes) -> None:
    _check_no_traceback(raw)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_submission)
def test_fuzz_cli_exit_codes(raw: bytes) -> None:
    _check_cli(raw)


def test_example_with_template_and_pr_vist_references() -> None:
    """Required = template ∩ reference sequences (PR-VIST holds 1,999 of the VIST test sequences)."""
    template_path = shared_file(CHALLENGE, "vist-challenge-template.json")
    refs_path = shared_file("pr-vist", "PR_VIST.json.zip")
    template = {
        "-".join(s["photo_sequence"]) for s in json.loads(template_path.read_text())["output_stories"]
    }
    with zipfile.ZipFile(refs_path) as zf:
        member = next(n for n in zf.namelist() if not n.startswith("__MACOSX"))
        records = json.loads(zf.read(member))
    by_story: dict[str, list[tuple[int, str]]] = {}
    for r in records:
        by_story.setdefault(r["story_id"], []).append(
            (int(r["worker_arranged_photo_order"]), r["photo_flickr_id"])
        )
    ref_seqs = {"-".join(p for _, p in sorted(v)) for v in by_story.values()}
    report = validate_submission(
        shared_file(*EXAMPLES, "example-submission-file.test.json"),
        template=template_path,
        references=refs_path,
    )
    assert report.ok and report.n_required == len(template & ref_seqs)


def test_references_without_photo_sequences_say_what_validate_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shared keying message advised "use --key story", an option validate does not have (the challenge keys
    by photo sequence only)."""
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"story_id": "s1", "text": "a story ."}) + "\n", encoding="utf-8")
    sub = tmp_path / "sub.json"
    sub.write_bytes(_sub(_story(["1", "2", "3", "4", "5"])))
    assert main(["validate", str(sub), "--references", str(refs)]) == 1
    err = capsys.readouterr().err
    assert "--key" not in err and "validate needs references with photo sequences" in err and str(refs) in err
