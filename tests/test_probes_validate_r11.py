"""QA probes, round 11: ``vistkit validate``.

1. ``validate`` said VALID (exit 0) for submissions ``vistkit score`` refuses (a NUL character, photo ids that are one
   once spaces are dropped or NFC applied, control/bidi/invisible characters in ids, a story over the length limit,
   an unpaired surrogate, empty photo ids). Now vistkit's checks end by reading the submission with vistkit's own
   story reader, keyed by sequence as ``score`` keys a challenge file: any refusal is an error in the reader's words.
2. ``validate -f csv`` / ``-f latex`` kept one row per finding (no detail, only the first sequence), and the text
   summary counted findings ("1 error(s)") under three error lines. Now one row per offender, with the detail, and
   the summary, JSON and CSV count the same offenders ("3 errors (1 check failed)").
3. ids holding terminal escape sequences (ESC, BEL, C1 controls, bidi overrides) were printed as they are.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from vistkit.cli import main
from vistkit.data.readers import read_stories
from vistkit.data.validate import validate_submission
from vistkit.errors import InputError

SEQ = ["1", "2", "3", "4", "5"]
ESCAPE = "\u001b[2J\u001b[31mRED\u001b]0;pwned\u0007\u009b31m\u202e"
#: bytes no output may hold: ESC, BEL, CSI (C1, as UTF-8), right-to-left override (as UTF-8)
RAW_CONTROLS = ("\u001b", "\u0007", "\u009b", "\u202e")


def _story(seq: list[str], text: str = "we went out .", album: str = "a") -> dict[str, Any]:
    return {"album_id": album, "photo_sequence": seq, "story_text_normalized": text}


CASES: dict[str, list[dict[str, Any]]] = {
    "nul": [_story(SEQ, "x \u0000 .")],
    "space": [_story(["1 ", "2", "3", "4", "5"]), _story(SEQ)],
    "tab": [_story(["1\t", "2", "3", "4", "5"])],
    "rlo": [_story(["\u202e1", "2", "3", "4", "5"])],
    "long": [_story(SEQ, "a " * 60000)],
    "nfc": [_story(["e\u0301", "2", "3", "4", "5"]), _story(["\u00e9", "2", "3", "4", "5"])],
    "zwsp_album": [_story(SEQ, album="x\u200by")],
    "surrogate": [_story(SEQ, "ok \ud800 .")],
    "empty_ids": [_story(["", "", "", "", ""])],
}


def _write(path: Path, stories: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"output_stories": stories}), encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().out


def _reader_refusal(path: Path) -> str:
    """What `vistkit score` says of ``path`` as a hypothesis file: the reader's refusal, keyed by sequence."""
    with pytest.raises(InputError) as refused:
        stories = read_stories(path)
        stories.by_key(stories.default_keying())
    return str(refused.value)


# ------------------------------------------------------------------------ 1. validate agrees with the reader
@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_refuses_what_score_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    ref = _write(tmp_path / "ref.json", [_story(SEQ)])
    sub = _write(tmp_path / f"{case}.json", CASES[case])
    refusal = _reader_refusal(sub)
    code, out = _run(capsys, "score", sub, "-r", ref, "-m", "bleu-4", "-q", "-b")
    assert code == 1  # score refuses the file ...
    code, out = _run(capsys, "validate", sub)
    assert code == 1, out  # ... and so does validate, saying why in the reader's words
    assert out.splitlines()[-1].startswith("(vistkit) INVALID: 1 error (1 check failed)")
    report = validate_submission(sub)
    assert not report.ok
    [error] = report.errors
    assert error.check == "readable" and error.origin.value == "vistkit"
    shown = refusal.replace(" (choose another --key?)", "")
    assert error.message == f"[Error] (vistkit) vistkit score refuses this submission: {shown}" or (
        case == "surrogate" and "unpaired \\ud800 escape" in error.message  # the same words, printable
    )
    assert error.message in out


def test_a_submission_score_reads_stays_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The other half of agreement: what the reader takes (ids with spaces inside a text, non-ASCII letters) passes."""
    ref = _write(tmp_path / "ref.json", [_story(SEQ)])
    sub = _write(tmp_path / "ok.json", [_story(SEQ, "café . we went out ."), _story(["é", "2", "3", "4", "5"])])
    assert _run(capsys, "score", sub, "-r", ref, "-m", "bleu-4", "-q", "-b")[0] == 0
    code, out = _run(capsys, "validate", sub)
    assert code == 0 and out.splitlines()[-1].startswith("(vistkit) VALID: 0 errors, 1 warning (1 check); 2 stories")
    assert "Photo seq: é-2-3-4-5-" not in out  # no finding names it: nothing is wrong with it


def test_sequences_that_are_one_once_read_say_why(tmp_path: Path) -> None:
    """The challenge's check passes (its keys differ as written): its [Passed] line stays, the verdict is INVALID
    and the error names both stories and what made their sequences one."""
    space = validate_submission(_write(tmp_path / "space.json", CASES["space"]))
    assert "[Passed] Each photo sequence has only one story." in [f.message for f in space.findings]
    [error] = space.errors
    assert "more than one story has sequence key '1-2-3-4-5'" in error.message and "--key" not in error.message
    assert error.indices == (1,) and error.sequences == ("1-2-3-4-5",)
    assert "output_stories[0] ('1 -2-3-4-5') and output_stories[1] ('1-2-3-4-5')" in error.detail
    assert "spaces around photo ids are dropped" in error.detail
    nfc = validate_submission(_write(tmp_path / "nfc.json", CASES["nfc"]))
    [error] = nfc.errors
    assert "('e\\u0301-2-3-4-5') and output_stories[1] ('\\xe9-2-3-4-5')" in error.detail
    assert "Unicode NFC" in error.detail
    # a sequence repeated as written is the challenge's error, which the reader's refusal would only repeat; one
    # repeated as written and one only once read: each named once
    both = [*CASES["space"], _story(SEQ, "again .")]
    report = validate_submission(_write(tmp_path / "both.json", both))
    assert [(f.check, f.indices) for f in report.errors] == [("one-story-per-sequence", (2,)), ("readable", (1,))]
    assert report.error_count == 2


# ------------------------------------------------------------------------ 2. every offender in every format
def _csv_rows(out: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(out)))


def test_missing_stories_are_counted_and_listed_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = _write(tmp_path / "tmpl.json", [_story([str(i), "2", "3", "4", "5"]) for i in range(1, 5)])
    sub = _write(tmp_path / "sub_missing.json", [_story(SEQ)])
    missing = ["2-2-3-4-5", "3-2-3-4-5", "4-2-3-4-5"]
    code, text = _run(capsys, "validate", sub, "--template", template)
    assert code == 1
    assert sum(line.startswith("[Error]") for line in text.splitlines()) == 3
    assert text.splitlines()[-1] == "(vistkit) INVALID: 3 errors (1 check failed), 0 warnings; 1 story, 4 required"
    code, out = _run(capsys, "validate", sub, "--template", template, "-f", "json")
    assert code == 1
    payload = json.loads(out)
    assert (payload["errors"], payload["failed_checks"]) == (3, 1)
    code, out = _run(capsys, "validate", sub, "--template", template, "-f", "csv")
    assert code == 1
    errors = [r for r in _csv_rows(out) if r["level"] == "error"]
    assert len(errors) == payload["errors"] == 3
    assert [r["sequence"] for r in errors] == missing
    assert [r["message"] for r in errors] == [
        f"[Error] One story is missing in this submission. Photo seq: {m}-" for m in missing
    ]
    assert errors[0]["detail"] == "3 of 4 required stories are missing"
    code, out = _run(capsys, "validate", sub, "--template", template, "-f", "latex")
    assert code == 1
    assert all(f"Photo seq: {m}-" in out for m in missing) and "3 of 4 required stories are missing" in out


def test_every_duplicate_sequence_is_a_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stories = [_story(SEQ), _story(SEQ), _story(["6", "2", "3", "4", "5"]), _story(["6", "2", "3", "4", "5"])]
    sub = _write(tmp_path / "sub_dups.json", stories)
    code, out = _run(capsys, "validate", sub, "-f", "json")
    assert code == 1
    payload = json.loads(out)
    [finding] = [f for f in payload["findings"] if f["level"] == "error"]
    assert finding["sequences"] == ["1-2-3-4-5", "6-2-3-4-5"] and finding["indices"] == [1, 3]
    assert payload["errors"] == finding["count"] == 2
    code, out = _run(capsys, "validate", sub, "-f", "csv")
    assert code == 1
    errors = [r for r in _csv_rows(out) if r["level"] == "error"]
    assert [(r["sequence"], r["index"]) for r in errors] == [("1-2-3-4-5", "1"), ("6-2-3-4-5", "3")]
    assert errors[0]["detail"] == "output_stories[1] repeats an earlier sequence"
    code, out = _run(capsys, "validate", sub, "-f", "latex")
    assert code == 1
    assert "Photo seq: 6-2-3-4-5-" in out and "repeats an earlier sequence" in out
    code, text = _run(capsys, "validate", sub)
    assert code == 1
    assert sum(line.startswith("[Error]") for line in text.splitlines()) == payload["errors"]
    assert "INVALID: 2 errors (1 check failed)" in text


def test_the_summary_counts_the_lines_it_prints(tmp_path: Path) -> None:
    """A sequence given three times: two stories repeat it, two error lines, two errors."""
    report = validate_submission(_write(tmp_path / "three.json", [_story(SEQ)] * 3))
    lines = report.lines()
    assert sum(line.startswith("[Error]") for line in lines) == 2 == report.error_count
    assert lines[-1] == "(vistkit) INVALID: 2 errors (1 check failed), 0 warnings; 3 stories"
    assert report.as_dict()["errors"] == 2 and len(report.rows()) == 3  # the [Passed] row and two errors


# ------------------------------------------------------------------------ 3. no terminal escape gets out
@pytest.mark.parametrize("fmt", ["text", "json", "csv", "latex"])
def test_escape_sequences_in_ids_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    seq = [ESCAPE, "2", "3", "4", "5"]
    sub = _write(tmp_path / "esc.json", [_story(seq), _story(seq)])
    code, out = _run(capsys, "validate", sub, "-f", fmt)
    assert code == 1
    assert not [c for c in RAW_CONTROLS if c in out]
    if fmt == "json":
        out = json.dumps(json.loads(out), ensure_ascii=False)  # no \u001b escape that a later print would undo
        assert not [c for c in RAW_CONTROLS if c in out]
    shown = "\\x1b[2J\\x1b[31mRED\\x1b]0;pwned\\x07\\x9b31m\\u202e"  # Python escapes, as score shows ids
    if fmt == "latex":
        shown = shown.replace("\\", "\\textbackslash{}").replace("[", "{[}").replace("]", "{]}")
    assert shown in (out.replace("\\\\", "\\") if fmt == "json" else out)
    # the control character is the reader's refusal, so also a vistkit error (beside the challenge's duplicate)
    report = validate_submission(sub)
    assert [f.check for f in report.errors] == ["one-story-per-sequence", "readable"]
    assert "holds the control character U+001B" in report.errors[1].message
    assert not [line for line in report.lines() if re.search("[\u0000-\u001f\u007f-\u009f\u202a-\u202e]", line)]
