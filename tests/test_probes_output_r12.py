"""Probe round 12: never losing the user's data when vistkit writes files (DESIGN.md, "Writing files").

Probed through ``score --per-item``, ``meta pairs --report``, ``studio export -o``, concurrent runs, ``kill -9``,
``RLIMIT_FSIZE``: an output equal to an input by another spelling (relative/absolute, ``./x``, ``../dir/x``,
``/proc/self/cwd/x``, a symlink, a chain of symlinks, a hard link, ``/dev/stdin``, ``/proc/self/fd/0``,
``/dev/fd/N`` with the input redirected there, an input read as ``-``), a FIFO, a dangling link (creates its
target; one into a missing folder is one sentence), ``/dev/full``, ``/dev/null``, ``-``/``/dev/stdout``/
``/dev/stderr`` with ``-f json/csv``, a read-only output with and without ``--force`` (mode kept), the umask (077
and 000) and a replaced 0600 file under umask 000 (stays 0600), ``kill -9`` at 19 moments of a 4 MB write (the old
file or the new one, whole, every time), a file-size limit (the old file and the old report kept, nothing left
behind), three runs writing one file at once (one wins, whole). All fine. What was wrong:

- a run whose ``--report`` (or model) folder did not exist when it started removed that folder when it failed,
  whoever had made it meanwhile: a folder of the user's made under that name while the run worked (refused at the
  end, as it should be) was then DELETED with its files, and of three runs started together on a new ``--report``
  folder, the one that failed deleted the report of the one that had won, so the third replaced nothing it could
  see and "succeeded" too. Now a failed run removes only a folder it made itself (known by its inode).
- ``--force`` over an earlier vistkit report (or model folder) deleted everything in it, also the files the user
  had put there since (notes, a sub-folder of their own). A folder vistkit writes whole now lists its files in its
  marker, and ``--force`` refuses a folder holding anything else, naming it, except plain files of the kinds a
  report writes (CSV, LaTeX, PNG, PDF, SVG, JSON, HTML), still taken for an earlier report's left-overs and replaced
  (test_output_safety's ``stale.csv``); a marker without the list (an older vistkit) is judged as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_probe_helpers import error_line as one_error
from cli_probe_helpers import run_cli as run
from meta_dummies import FIX, dummy_metrics_registered

from vistkit.data import output
from vistkit.errors import OutputError

METRIC = "meta-test-length"  # tests/fixtures/meta/dummy_metrics.py: instant, no model


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    p = tmp_path / "in" / "pairs.csv"
    p.parent.mkdir()
    p.write_bytes((FIX / "vhed_small.csv").read_bytes())
    return p


def report_args(pairs: Path, rep: Path) -> list[str | Path]:
    return ["meta", "pairs", pairs, "-m", METRIC, "--bootstrap", "20", "--report", rep]


def made_meanwhile(monkeypatch: pytest.MonkeyPatch, make: object) -> None:
    """Run ``make()`` just before the report is renamed into place: another process (the user, another run) made
    the folder while the command worked."""
    real = output._fsync_files

    def fsync_then_make(folder: Path) -> None:
        real(folder)
        make()  # type: ignore[operator]

    monkeypatch.setattr(output, "_fsync_files", fsync_then_make)


# ------------------------------------------------------------------------- a failed run removes only its own
def test_a_failed_run_keeps_a_users_folder_made_under_its_report_name(
    pairs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report folder was new at the start; the user made it meanwhile with a file in it. The run is refused at
    the end (right), and then its cleanup of "the folder it created" deleted the user's folder and file."""
    rep = tmp_path / "rep"

    def user_makes_it() -> None:
        rep.mkdir()
        (rep / "thesis.tex").write_text("precious", encoding="utf-8")

    made_meanwhile(monkeypatch, user_makes_it)
    code, err = run(capsys, *report_args(pairs, rep))
    assert code == 1
    one_error(err, "holds files vistkit did not write")
    assert (rep / "thesis.tex").read_text(encoding="utf-8") == "precious"


def test_a_failed_run_keeps_the_report_another_run_wrote_meanwhile(
    pairs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs on one new --report folder: the second one, refused because the first had written it, deleted
    the first one's report."""
    rep = tmp_path / "rep"
    other = tmp_path / "other"
    assert run(capsys, *report_args(pairs, other))[0] == 0
    made_meanwhile(monkeypatch, lambda: other.rename(rep))
    code, err = run(capsys, *report_args(pairs, rep))
    assert code == 1
    one_error(err, "earlier vistkit output", "--force")
    assert (rep / "index.html").is_file() and (rep / output.MARKER).is_file()


def test_a_failed_run_still_removes_the_folder_it_made(
    pairs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleanup itself stays: a folder the run made is removed when the run fails after making it."""
    from vistkit.commands.common import writes_output

    rep = tmp_path / "rep"

    @writes_output(report="folder")
    def verb(*, report: Path, force: bool = False) -> None:
        with output.replaced_folder(report) as fresh:
            output.write_text(fresh / "index.html", "page")
        assert report.is_dir()
        raise RuntimeError("a later step fails")

    with pytest.raises(RuntimeError):
        verb(report=rep, force=False)
    assert not rep.exists()


def test_removable_is_only_what_the_commands_writers_made(tmp_path: Path) -> None:
    """A failed command removes only the output folders its own writers made: not a folder someone made under
    that name meanwhile, whether or not a writer came to it before the failure (a Ctrl-C during scoring)."""
    mine, theirs, plain = tmp_path / "mine", tmp_path / "theirs", tmp_path / "plain"
    with output.output_policy(force=False, cli=False):
        output.prepare_folder(mine)
        (mine / "index.html").write_text("page", encoding="utf-8")
        theirs.mkdir()
        (theirs / "thesis.tex").write_text("x", encoding="utf-8")
        with pytest.raises(OutputError, match="did not write"):
            output.check_output_folder(theirs)
        plain.mkdir()  # a folder no writer of the command made (the user's, made while it ran): kept
        assert output.removable(mine) and not output.removable(theirs) and not output.removable(plain)
        with pytest.raises(OutputError, match="earlier vistkit output"):
            output.check_output_folder(mine)  # refused later (no --force): still the command's own
        assert output.removable(mine)
        assert not output.removable(tmp_path / "missing")
        (tmp_path / "link").symlink_to(mine)
        assert not output.removable(tmp_path / "link")


# ------------------------------------------------------------------------- --force keeps what vistkit did not write
def test_force_refuses_a_report_holding_files_the_user_added(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force`` over an earlier report deleted the notes and the sub-folder the user had put into it."""
    rep = tmp_path / "rep"
    assert run(capsys, *report_args(pairs, rep))[0] == 0
    written = sorted(p.name for p in rep.iterdir())
    (rep / "notes.md").write_text("my notes", encoding="utf-8")
    code, err = run(capsys, *report_args(pairs, rep), "--force")
    assert code == 1
    one_error(err, "notes.md", str(rep))
    assert (rep / "notes.md").read_text(encoding="utf-8") == "my notes"
    (rep / "notes.md").unlink()
    (rep / "mine").mkdir()
    (rep / "mine" / "a.txt").write_text("x", encoding="utf-8")
    code, err = run(capsys, *report_args(pairs, rep), "--force")
    assert code == 1 and (rep / "mine" / "a.txt").is_file()
    one_error(err, "mine")
    (rep / "mine" / "a.txt").unlink()
    (rep / "mine").rmdir()
    assert run(capsys, *report_args(pairs, rep), "--force")[0] == 0  # its own files only: replaced as asked
    assert sorted(p.name for p in rep.iterdir()) == written
    (rep / "index.html").unlink()  # a file of the report removed by the user: still vistkit's folder
    assert run(capsys, *report_args(pairs, rep), "--force")[0] == 0


def test_the_marker_lists_the_files_and_an_old_marker_still_counts(tmp_path: Path) -> None:
    """The marker names what the folder held when vistkit wrote it; a marker without that list (an older vistkit,
    a folder filled bit by bit) is judged as before: vistkit's, replaced with --force."""
    rep = tmp_path / "rep"
    with output.output_policy(force=False, cli=False), output.replaced_folder(rep) as fresh:
        output.write_text(fresh / "index.html", "page")
        (fresh / "sub").mkdir()
    assert output.marker_files(rep) == ["index.html", "sub"]
    old = tmp_path / "old"
    old.mkdir()
    (old / output.MARKER).write_text("written by vistkit 0.0.9\n", encoding="utf-8")
    (old / "anything.txt").write_text("x", encoding="utf-8")
    assert output.marker_files(old) is None
    with output.output_policy(force=True, cli=False), output.replaced_folder(old) as fresh:
        output.write_text(fresh / "index.html", "page")
    assert sorted(p.name for p in old.iterdir()) == [".vistkit-output", "index.html"]
    (rep / "extra.txt").write_text("x", encoding="utf-8")
    with output.output_policy(force=True, cli=False), pytest.raises(OutputError, match=r"extra\.txt"):
        output.check_output_folder(rep, whole=True)  # to be replaced whole (a report): refused
    with output.output_policy(force=True, cli=False):
        output.check_output_folder(rep)  # written into (prepare_folder): nothing is deleted, as before
    (rep / "extra.txt").unlink()
    for name in ("thesis.tex", "mine.csv"):  # of a kind a report writes, but not listed: the user's, kept
        (rep / name).write_text("x", encoding="utf-8")
        with output.output_policy(force=True, cli=False), pytest.raises(OutputError, match=name.replace(".", r"\.")):
            output.check_output_folder(rep, whole=True)
        (rep / name).unlink()
    (rep / "link.csv").symlink_to(tmp_path / "old")
    with output.output_policy(force=True, cli=False), pytest.raises(OutputError, match=r"link\.csv"):
        output.check_output_folder(rep, whole=True)


def test_a_marker_that_is_not_text_is_an_old_marker(tmp_path: Path) -> None:
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / output.MARKER).write_bytes(b"\xff\xfe files: [1, 2")
    assert output.marker_files(rep) is None
    (rep / output.MARKER).write_text('written by vistkit\nfiles: {"a": 1}\n', encoding="utf-8")
    assert output.marker_files(rep) is None


def test_a_report_name_not_utf8_is_listed_and_read_back(tmp_path: Path) -> None:
    rep = tmp_path / "rep"
    odd = "caf\udce9.csv"  # a byte that is not UTF-8, kept by Python as a lone surrogate
    with output.output_policy(force=False, cli=False), output.replaced_folder(rep) as fresh:
        output.write_text(fresh / odd, "x")
    assert output.marker_files(rep) == [odd]
    with output.output_policy(force=True, cli=False):
        output.check_output_folder(rep, whole=True)
    assert json.loads((rep / output.MARKER).read_text(encoding="utf-8").splitlines()[-1][len("files: ") :]) == [odd]


def test_force_refuses_a_model_folder_holding_files_the_user_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same for a converted model: ``models convert --force`` deleted the user's notes kept beside it."""
    torch = pytest.importorskip("torch")
    ckpt = tmp_path / "in" / "tiny.pth.tar"
    ckpt.parent.mkdir()
    torch.save({"model": {"w": torch.zeros(2)}}, ckpt)
    model = tmp_path / "model"
    argv: list[str | Path] = ["models", "convert", ckpt, model, "--trust-checkpoint", "--kind", "state-dict"]
    assert run(capsys, *argv)[0] == 0
    listed = output.marker_files(model)
    assert listed is not None and "vistkit_model.json" in listed
    (model / "README.txt").write_text("where this came from", encoding="utf-8")
    code, err = run(capsys, *argv, "--force")
    assert code == 1
    one_error(err, "README.txt")
    assert (model / "README.txt").read_text(encoding="utf-8") == "where this came from"
    (model / "README.txt").unlink()
    assert run(capsys, *argv, "--force")[0] == 0


# ------------------------------------------------------------------------- names of open files
@pytest.fixture
def stories(tmp_path: Path) -> Path:
    p = tmp_path / "in" / "stories.jsonl"
    p.parent.mkdir(exist_ok=True)
    text = "we went to the park . it was nice ."
    p.write_text("".join(json.dumps({"story_id": f"s{i}", "text": text}) + "\n" for i in range(3)), encoding="utf-8")
    return p


def test_a_file_another_process_has_open_is_not_overwritten(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item /proc/PID/fd/N`` (a file another process has open) was opened by that name and truncated in
    place, without --force: the user's file was overwritten. Refused now, naming the file."""
    import subprocess
    import sys

    victim = tmp_path / "victim.txt"
    victim.write_text("user data", encoding="utf-8")
    with open(victim, "rb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=fh)
    try:
        for force in ([], ["--force"]):
            code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", f"/proc/{proc.pid}/fd/0", *force)
            assert code == 1
            one_error(err, f"/proc/{proc.pid}/fd/0", str(victim))
            assert victim.read_text(encoding="utf-8") == "user data"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_descriptor_open_for_reading_only_is_one_sentence(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item /dev/fd/3 3< FILE``: "unexpected OSError: [Errno 9] Bad file descriptor - this is a bug"."""
    import os

    victim = tmp_path / "victim.txt"
    victim.write_text("user data", encoding="utf-8")
    fd = os.open(victim, os.O_RDONLY)
    try:
        code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", f"/dev/fd/{fd}")
    finally:
        os.close(fd)
    assert code == 1
    one_error(err, f"/dev/fd/{fd}", "reading only")
    assert victim.read_text(encoding="utf-8") == "user data"
