"""Round-11 CLI probes: a dHM score table without its header row, an output named ARCHIVE.zip:MEMBER, a --force'd
per-item file replaced before the run could still fail, which of several systems shares no key, two arguments
reading standard input, -q and warnings, and the rules in `formats -f json|csv`."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from cli_probe_helpers import one_error, run_cli, write_stories

from vistkit.cli import main


def _dhm_prefix(folder: Path, name: str, r_rows: str, *, header: bool) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}_G.json").write_text(json.dumps({"a": 0.5, "b": 0.7, "c": 0.1}))
    (folder / f"{name}_C.csv").write_text("story_id,C_score\na,0.1\nb,0.2\nc,0.3\n")
    (folder / f"{name}_R.csv").write_text(("story_id,R_score\n" if header else "") + r_rows)
    return folder / name


def test_a_dhm_table_without_its_header_row_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`a,0.3` was taken for the header (its score column named "0.3"), so story a was lost and dR came out 0
    instead of 0.2 (n 2)."""
    human = _dhm_prefix(tmp_path, "h", "a,0.3\nb,0.4\nc,0.5\n", header=False)
    model = _dhm_prefix(tmp_path, "m", "a,0.9\nb,0.4\nc,0.5\n", header=True)
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "h_R.csv line 1: a, 0.3 is a row of data, not a header ('0.3' is a number)" in err
    assert "story_id,R_score" in err
    _dhm_prefix(tmp_path, "h", "a,0.3\nb,0.4\nc,0.5\n", header=True)  # with its header: every story, dR 0.2
    capsys.readouterr()
    assert main(["distance", "--human", str(human), "--model", str(model), "-f", "json", "-q"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result if isinstance(result, list) else [result]
    assert rows[0]["n"] == 3 and rows[0]["dR"] == pytest.approx(0.2)


def test_an_output_named_as_a_member_of_an_archive_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--per-item h.zip:hyp.jsonl` made a file of that name, and from then on the same command read that file
    instead of the archive's member (a path that exists is never split)."""
    monkeypatch.chdir(tmp_path)
    write_stories(tmp_path / "hyp.jsonl")
    write_stories(tmp_path / "ref.jsonl")
    with zipfile.ZipFile("h.zip", "w") as z:
        z.write("hyp.jsonl")
        z.write("ref.jsonl")
    args = ["score", "h.zip:hyp.jsonl", "-r", "h.zip:ref.jsonl", "-m", "bleu-4", "-b", "-q"]
    err = one_error(capsys, *args, "--per-item", "h.zip:hyp.jsonl")
    assert "h.zip:hyp.jsonl is how vistkit names a part of the file h.zip" in err
    assert not Path("h.zip:hyp.jsonl").exists()
    err = one_error(capsys, *args, "--per-item", "ref.jsonl:text")  # FILE:FIELD, the same way
    assert "part of the file ref.jsonl" in err
    code, _ = run_cli(capsys, *args, "--per-item", "items.csv")  # an ordinary name still works
    assert code == 0 and Path("items.csv").is_file()


def test_a_forced_per_item_file_is_replaced_only_after_the_bootstrap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-item CSV was renamed into place before the bootstrap (minutes with --n-bootstrap 100000): a run
    stopped there printed no scores but had already replaced the user's old file."""
    hyps = write_stories(tmp_path / "hyp.jsonl")
    refs = write_stories(tmp_path / "ref.jsonl")
    old = tmp_path / "items.csv"
    old.write_text("OLD\n")

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("vistkit.scores.stats.bootstrap_ci", stopped)
    code = main(["score", str(hyps), "-r", str(refs), "-m", "bleu-4", "--confidence", "0.95", "--per-item", str(old),
                 "--force", "-q"])  # fmt: skip
    assert code == 130
    assert old.read_text() == "OLD\n"
    monkeypatch.undo()
    assert main(["score", str(hyps), "-r", str(refs), "-m", "bleu-4", "--confidence", "0.95", "--per-item",
                 str(old), "--force", "-q"]) == 0  # fmt: skip
    assert next(csv.reader(io.StringIO(old.read_text())))[:2] == ["id", "bleu-4"]


def test_compare_names_the_system_that_shares_no_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refs = write_stories(tmp_path / "ref.jsonl")
    a = write_stories(tmp_path / "sysA.jsonl")
    other = write_stories(tmp_path / "other.jsonl", prefix="zz")
    err = one_error(capsys, "compare", a, other, "-r", refs, "-m", "bleu-4", "--key", "story")
    assert err.startswith(f"error: other ({other}): no hypothesis shares a story key with the references")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["score", "-", "-r", "-", "-m", "bleu-4"], "HYPOTHESES and --references are -"),
        (["compare", "-", "-", "-r", "R", "-m", "bleu-4"], "SYSTEMS (2 times) is -"),
        (["distance", "--human-stories", "-", "--model-stories", "-", "--dimensions", "R"],
         "--human-stories and --model-stories are -"),
    ],
)  # fmt: skip
def test_two_arguments_reading_standard_input_are_refused_before_reading(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first `-` read all of standard input and the second said "standard input is empty"."""
    refs = write_stories(tmp_path / "ref.jsonl")
    args = [str(refs) if a == "R" else a for a in args]

    def no_read(*a: object, **k: object) -> bytes:
        raise AssertionError("standard input was read before the mistake was reported")

    monkeypatch.setattr("vistkit.data.readers.read_stdin_bytes", no_read)
    err = one_error(capsys, *args)
    assert said in err and "standard input can be read only once" in err


def test_quiet_flag_silences_warnings_as_the_environment_variable_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-q` is documented as VISTKIT_QUIET=1, but only the variable silenced `warning:` lines."""
    hyps = write_stories(tmp_path / "hyp.jsonl")
    refs = write_stories(tmp_path / "ref.jsonl")
    args = ["score", str(hyps), "-r", str(refs), "-m", "bleu-4", "--confidence", "0.95", "-b"]
    code, err = run_cli(capsys, *args)
    assert code == 0 and "warning: --confidence is ignored" in err
    code, err = run_cli(capsys, *args, "-q")
    assert code == 0 and err == ""
    monkeypatch.setenv("VISTKIT_QUIET", "1")
    code, err = run_cli(capsys, *args)
    assert code == 0 and err == ""


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_formats_carries_its_rules_in_json_and_csv(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The text and LaTeX forms state the encoding, zip and writing rules; JSON and CSV had the table rows only."""
    capsys.readouterr()
    assert main(["formats", "-f", fmt]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out) if fmt == "json" else list(csv.DictReader(io.StringIO(out)))
    rules = {r["format"]: r["shape"] for r in rows if r["format"].startswith("rule: ")}
    assert set(rules) == {"rule: reading", "rule: writing"}
    assert "byte-order mark" in rules["rule: reading"] and "--force" in rules["rule: writing"]


@pytest.mark.parametrize("value", ["abc", "1e9", "-1", "253402300800", "99999999999999999999"])
def test_an_unusable_source_date_epoch_is_dropped_with_one_warning(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy (read when scipy loads) and matplotlib's PDF writer crashed on such a value ("unexpected ValueError
    ... a bug in vistkit"), the latter after all the scoring; vistkit's own page silently used the time now."""
    import os

    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    code, err = run_cli(capsys, "metrics", "-f", "json")
    assert code == 0 and "SOURCE_DATE_EPOCH" not in os.environ
    assert f"warning: SOURCE_DATE_EPOCH={value!r} is not a whole number of seconds" in err
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    code, err = run_cli(capsys, "metrics", "-f", "json")
    assert code == 0 and err == "" and os.environ["SOURCE_DATE_EPOCH"] == "1700000000"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "")  # set but empty: unset, as most tools read it, without a word
    code, err = run_cli(capsys, "metrics", "-f", "json")
    assert code == 0 and err == "" and "SOURCE_DATE_EPOCH" not in os.environ
