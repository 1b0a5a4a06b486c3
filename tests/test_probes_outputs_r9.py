"""Probe round 9: the files vistkit WRITES: no file is ever lost or corrupted (DESIGN.md, "Writing files").

Probed through ``score --per-item``, ``meta ... -o/--report``, ``studio export/report``, ``models convert`` (the
other writing verbs, ``distance --per-item`` and ``vrank train/predict``, go through the same writer; the vrank
verbs need a model and were not run): an output reached by another spelling of an input
(relative/absolute, ``./x``, ``a/../x``, a symlink, a hard link, ``/proc/self/cwd/x``, ``/proc/self/fd/N``,
``/dev/fd/N``, ``/dev/stdout`` on an input), two outputs of one command on one place, a folder, a FIFO, dangling
and looping links, a link to a file elsewhere, a read-only file with ``--force``, new-line / non-UTF-8 / 300-byte
names, a full tmpfs, SIGINT / SIGTERM / SIGHUP / kill -9 during a write, and the permissions of replaced files.
Most were already right; what was wrong:

- ``--per-item -`` (and a verb's printed table) with standard output appended to an input
  (``vistkit score x.jsonl --per-item - >> x.jsonl``): the CSV was written into the input (5 -> 11 lines) while
  ``--per-item /dev/stdout`` was refused; now both are refused before anything is read;
- SIGTERM or SIGHUP (``kill``, a closed terminal) while writing left ``.out.csv.XXXX.tmp`` and a report's
  ``.NAME.new-XXXX`` folder behind (Python's default action skips every ``finally``); now the writers clean up and
  the process still ends by that signal (143 / 129); Ctrl-C cannot fall between moving an old report aside and
  moving the new one in (it removed both);
- the "exists already, pass --force" check ran only when the command started: a file made under the output name
  while the command ran (another run, the user) was silently replaced without ``--force``, and a folder of the
  user's made under a ``--report`` name was DELETED with its files; now the name must still be free at the end;
- an input read from standard input (``vistkit score - --per-item x.jsonl --force < x.jsonl``) was not an input
  of the command: the CSV replaced it; now ``-`` counts as the file redirected into it;
- an output file that the shell also opened as stdout or stderr (``--per-item out.csv --force >> out.csv``) was
  replaced by name, so all that the command printed went into the replaced file; refused now;
- a block device (``--per-item /dev/vda``) was written in place like ``/dev/null``; refused now;
- ``--per-item STUDY.db --force`` (or ``STUDY.db-wal``) onto a study that a studio was serving replaced it: every
  answer not yet checkpointed was lost with the server; a SQLite database in use (a ``-wal``/``-shm``/``-journal``
  beside it) and those files are now refused, ``--force`` or not;
- an existing file or folder inside vistkit's cache (converted models, compiled helpers, cached scores) could be
  overwritten by any output; now refused;
- a report or a model on a full disk: "unexpected AttributeError" (matplotlib's PDF writer) and "unexpected
  SafetensorError ... (os error 28)"; ``models convert --force`` over an earlier model on a full disk left it
  without its vistkit_model.json (no longer loadable); now one sentence, and the model is written beside the old
  one and renamed into place when whole;
- a non-UTF-8 ``--report`` name stopped the report with "unexpected UnicodeEncodeError" (the page shows the
  command line); messages showed such bytes as ``\\udcff``, now ``\\xff``;
- a replaced file kept setuid/setgid bits (``-rwsrwxr-x`` on a CSV) and, when root replaced a user's file, the
  user lost it (owner became root); a private (0700) report folder replaced with --force became 0755. Now the
  permission bits are kept without setuid/setgid/sticky, and the owner and group where the process may set them.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_probe_helpers import error_line as one_error
from cli_probe_helpers import run_cli as run
from meta_dummies import dummy_metrics_registered

from vistkit.cli import main
from vistkit.data import output
from vistkit.errors import OutputError

METRIC = "meta-test-length"  # tests/fixtures/meta/dummy_metrics.py: instant, no model
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


@pytest.fixture
def stories(tmp_path: Path) -> Path:
    p = tmp_path / "stories.jsonl"
    text = "we went to the park . it was nice ."
    p.write_text("".join(json.dumps({"story_id": f"s{i}", "text": text}) + "\n" for i in range(3)), encoding="utf-8")
    return p


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ============================================================================================ standard output
def test_standard_output_appended_to_an_input_is_refused(
    stories: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item -`` with stdout appended to the input wrote the CSV into it (3 -> 7 lines here), while
    ``--per-item /dev/stdout`` was refused: both are refused now, and so is the printed table itself."""
    before = stories.read_bytes()
    for per_item in ("-", "/dev/stdout", None):
        with open(stories, "a", encoding="utf-8") as fh:
            monkeypatch.setattr(sys, "stdout", fh)
            more = [] if per_item is None else ["--per-item", per_item]
            code = main(["score", str(stories), "-m", METRIC, "-q", *more])
        monkeypatch.undo()
        assert code == 1, per_item
        assert stories.read_bytes() == before, per_item
        err = capsys.readouterr().err
        assert "an input of this command" in one_error(err, "stories.jsonl"), err
    # stdout to another file is fine, and gets the CSV
    other = stories.parent / "other.csv"
    with open(other, "w", encoding="utf-8") as fh:
        monkeypatch.setattr(sys, "stdout", fh)
        assert main(["score", str(stories), "-m", METRIC, "-q", "--per-item", "-"]) == 0
    monkeypatch.undo()
    head = [line.split(",")[:2] for line in other.read_text(encoding="utf-8").splitlines()[:2]]
    assert head == [["id", METRIC], ["s0", "10.0"]]  # ten words


def test_verbs_that_write_no_file_refuse_a_stdout_appended_to_an_input(
    stories: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vistkit validate x.json >> x.json``, ``compare A B -r R >> A``: verbs that write no file of their own
    appended their table to the file they read (they never went through the writer)."""
    other = tmp_path / "other.jsonl"
    other.write_bytes(stories.read_bytes())
    before = stories.read_bytes()
    for argv in (
        ["validate", str(stories)],
        ["compare", str(stories), str(other), "-r", str(other), "-m", "bleu-4", "-q"],
    ):
        with open(stories, "a", encoding="utf-8") as fh:
            monkeypatch.setattr(sys, "stdout", fh)
            code = main(argv)
        monkeypatch.undo()
        assert code == 1 and stories.read_bytes() == before, argv
        assert "an input of this command" in one_error(capsys.readouterr().err, "stories.jsonl"), argv


def test_studio_verbs_refuse_a_stdout_appended_to_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vistkit studio status study.db >> study.db`` appended a table to the SQLite file (the study's pages
    then end in text); it is refused before the study is opened, as is its ``-wal`` log."""
    from studio_helpers import make_study

    made = make_study(tmp_path)
    made.study.close()  # its log is saved into the study and removed (or else removed whenever it is collected)
    study = made.path
    for target in (study, Path(f"{study}-wal")):
        size = target.stat().st_size if target.exists() else 0
        with open(target, "a", encoding="utf-8") as fh:
            monkeypatch.setattr(sys, "stdout", fh)
            code = main(["studio", "status", str(study)])
        monkeypatch.undo()
        assert code == 1 and target.stat().st_size == size  # nothing appended
        assert "an input of this command" in one_error(capsys.readouterr().err, target.name)
    assert main(["studio", "status", str(study), "-f", "json"]) == 0  # the study still opens
    assert json.loads(capsys.readouterr().out)["units"] == 3


def test_an_input_read_from_stdin_is_an_input(stories: Path, tmp_path: Path) -> None:
    """``vistkit score - --per-item x.jsonl --force < x.jsonl``: the stories read from standard input were not
    an input of the command, so the per-item CSV replaced them. Refused now; another output name works."""
    before = stories.read_bytes()
    refs = tmp_path / "refs.jsonl"
    refs.write_bytes(before)
    env = {**os.environ, "PYTHONPATH": str(SRC), "VISTKIT_QUIET": "1"}
    argv = [sys.executable, "-m", "vistkit", "score", "-", "-r", str(refs), "-m", "bleu-4"]
    with open(stories, "rb") as stdin:
        done = subprocess.run([*argv, "--per-item", str(stories), "--force"], stdin=stdin, capture_output=True,
                              env=env, timeout=120, text=True)  # fmt: skip
    assert done.returncode == 1 and stories.read_bytes() == before
    one_error(done.stderr, f"{stories} is an input of this command (the same file as /dev/stdin)")
    with open(stories, "rb") as stdin:
        done = subprocess.run([*argv, "--per-item", str(tmp_path / "out.csv")], stdin=stdin, capture_output=True,
                              env=env, timeout=120, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()[0] == "id,bleu-4,bleu-4 signature"


def test_an_output_that_the_shell_also_opened_for_stdout_is_refused(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item out.csv --force >> out.csv``: the CSV replaced the file by name and the table printed to
    standard output went into the replaced file (lost). Refused now (standard error too), the file untouched."""
    out = tmp_path / "out.csv"
    out.write_text("old\n", encoding="utf-8")
    for fd in (1, 2):
        saved, opened = os.dup(fd), os.open(out, os.O_WRONLY | os.O_APPEND)
        os.dup2(opened, fd)
        try:
            code = main(["score", str(stories), "-m", METRIC, "--per-item", str(out), "--force"])
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            os.close(opened)
        assert code == 1 and out.read_text(encoding="utf-8") == "old\n"
        where = "standard output" if fd == 1 else "standard error"
        one_error(capsys.readouterr().err, f"{out} is also where {where} goes")


def test_a_block_device_is_never_an_output(stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A block device (``--per-item /dev/vda --force``, a tab-completion typo) was written in place like
    ``/dev/null``: as root, a CSV over the disk. Refused now, also through a link. (The node made here names
    device 0:0, which does not exist, so nothing could be harmed if the refusal failed.)"""
    node = tmp_path / "disk"
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(0, 0))
    except PermissionError:
        pytest.skip("this user may not make device nodes (mknod needs CAP_MKNOD)")
    link = tmp_path / "disk-link"
    link.symlink_to(node)
    for target in (node, link):
        code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", target, "--force")
        assert code == 1
        one_error(err, f"{target} is a disk or a partition (a block device)")


# ============================================================================================ databases and the cache
def _wal_database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE answers (x INTEGER)")
    conn.execute("INSERT INTO answers VALUES (1)")
    conn.commit()  # in the -wal file until a checkpoint: the database file alone does not hold it yet
    return conn


def test_a_database_in_use_and_its_log_are_never_replaced(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item STUDY.db --force`` while a studio served it replaced the study (answers not yet checkpointed
    lost with the server); ``--per-item STUDY.db-wal`` destroyed the log itself. Refused now, --force or not;
    once the database is closed (no -wal beside it) it is an ordinary file again."""
    db = tmp_path / "study.db"
    conn = _wal_database(db)
    try:
        assert (tmp_path / "study.db-wal").exists()
        files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("study.db")}
        wal, shm = tmp_path / "study.db-wal", tmp_path / "study.db-shm"
        for target, words in ((db, "in use"), (wal, "-wal file"), (shm, "-shm")):
            for force in ([], ["--force"]):
                code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", target, *force)
                assert code == 1
                one_error(err, target.name, words)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("study.db")} == files
        assert conn.execute("SELECT x FROM answers").fetchall() == [(1,)]
    finally:
        conn.close()
    assert not (tmp_path / "study.db-wal").exists()
    code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", db, "--force")
    assert code == 0 and db.read_text(encoding="utf-8").startswith("id,")


def test_files_in_the_cache_are_never_outputs(
    stories: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An existing file of vistkit's cache (a converted model) was overwritten by any output with --force;
    refused now. A new file there is harmless and allowed."""
    cache = tmp_path / "cache"
    (cache / "lm" / "m").mkdir(parents=True)
    weights = cache / "lm" / "m" / "model.safetensors"
    weights.write_bytes(b"weights")
    (cache / "lm" / "m" / output.MARKER).write_text("x", encoding="utf-8")
    monkeypatch.setenv("VISTKIT_CACHE", str(cache))
    code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", weights, "--force")
    assert code == 1 and weights.read_bytes() == b"weights"
    one_error(err, str(weights), "vistkit's cache")
    rankings = Path(__file__).parent / "fixtures" / "meta" / "rankings_small.csv"
    code, err = run(capsys, "meta", "rankings-to-pairs", rankings, "-o", weights, "--force")
    assert code == 1 and weights.read_bytes() == b"weights"
    code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", cache / "new.csv")
    assert code == 0 and (cache / "new.csv").is_file()
    # only what vistkit keeps there: a cache pointed at a busy folder does not make all its files vistkit's
    code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", cache / "new.csv", "--force")
    assert code == 0


# ============================================================================================ races
def test_a_name_taken_while_the_command_ran_is_kept(tmp_path: Path) -> None:
    """The --force check ran only at the start: a file made under the output name meanwhile was replaced without
    --force, and a user's folder made under a --report name was deleted with its files. Now the name must still
    be free when the output is done (a hard link fails on a taken name); with --force it is replaced as asked."""
    out = tmp_path / "out.csv"
    with output.output_policy(force=False), pytest.raises(OutputError, match="was created while this command ran"):
        with output.open_output(out) as fh:
            fh.write("new")
            out.write_text("user's", encoding="utf-8")
    assert out.read_text(encoding="utf-8") == "user's" and leftovers(tmp_path) == []

    report = tmp_path / "report"
    with output.output_policy(force=False), pytest.raises(OutputError, match="holds files vistkit did not write"):
        with output.replaced_folder(report) as tmp:
            output.write_text(tmp / "index.html", "new")
            report.mkdir()
            (report / "mine.txt").write_text("user's", encoding="utf-8")
    assert sorted(p.name for p in report.iterdir()) == ["mine.txt"] and leftovers(tmp_path) == []

    with output.output_policy(force=True), output.open_output(out) as fh:
        fh.write("new")
        out.write_text("user's", encoding="utf-8")
    assert out.read_text(encoding="utf-8") == "new" and leftovers(tmp_path) == []


def test_a_full_disk_at_the_rename_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC (or EIO) at the last step, the hard link or the rename: one sentence, the old file intact, no
    temporary file left."""
    out = tmp_path / "out.csv"

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    for force, step in ((False, "link"), (True, "replace")):
        if force:
            out.write_text("old", encoding="utf-8")
        monkeypatch.setattr(os, step, full)
        with output.output_policy(force=force), pytest.raises(OutputError, match="the disk is full"):
            output.write_text(out, "new " * 1000)
        monkeypatch.undo()
        assert (out.read_text(encoding="utf-8") if force else out.exists()) == ("old" if force else False)
        assert leftovers(tmp_path) == []


def test_a_library_stumbling_over_a_full_disk_is_one_sentence(tmp_path: Path) -> None:
    """A report on a full disk (a 200 kB tmpfs): matplotlib's PDF writer answers ENOSPC with an AttributeError
    raised while handling it, so the report stopped with "unexpected AttributeError ... a bug in vistkit" (the old
    report stayed, rightly). Now the full disk is said, naming the report's file, not its hidden temporary
    folder."""
    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text("old", encoding="utf-8")
    (report / output.MARKER).write_text("", encoding="utf-8")
    with output.output_policy(force=True), pytest.raises(OutputError) as info:
        with output.replaced_folder(report) as tmp, output.output_path(tmp / "fig.pdf"):
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError:
                raise AttributeError("'Stream' object has no attribute 'pos'") from None
    assert str(info.value).startswith(f"cannot write {report / 'fig.pdf'}: the disk is full"), info.value
    assert (report / "index.html").read_text(encoding="utf-8") == "old" and leftovers(tmp_path) == []


def test_a_model_replaced_on_a_full_disk_stays_loadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``models convert ... --force`` over an earlier model on a full disk (a 300 kB tmpfs): "unexpected
    SafetensorError ... (os error 28)", and the earlier model had lost its vistkit_model.json (removed first),
    so it no longer loaded. Now the full disk is one sentence and the earlier model is untouched: the new one is
    written beside it and renamed into place only when whole."""
    torch = pytest.importorskip("torch")
    import safetensors.torch

    from vistkit.models.checkpoints import load_converted

    ckpt = tmp_path / "tiny.pth.tar"
    torch.save({"model": {"w": torch.arange(3.0)}}, ckpt)
    model = tmp_path / "model"
    argv = ["models", "convert", ckpt, model, "--trust-checkpoint", "--kind", "state-dict", "-q"]
    assert run(capsys, *argv)[0] == 0
    before = {p.name: p.read_bytes() for p in model.iterdir()}

    def full(*args: object, **kwargs: object) -> None:
        raise Exception("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    code, err = run(capsys, *argv, "--force")
    assert code == 1
    one_error(err, f"cannot write {model / 'model.safetensors'}", "the disk is full")
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before and leftovers(tmp_path) == []
    state, _ = load_converted(model)
    assert state["w"].tolist() == [0.0, 1.0, 2.0]


# ============================================================================================ signals
SLOW_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from vistkit.commands.common import writes_output
    from vistkit.data.output import open_output, prepare_folder, replaced_folder, write_text

    kind, out, made = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

    @writes_output(out="file" if kind == "file" else "folder", made="folder")
    def verb(out, made, force=True):  # as a verb of the CLI: --force, the inputs, a folder it makes
        prepare_folder(made)  # a folder the verb makes, as its writers make them (a plain mkdir is not its own)
        (made / "part").write_text("x")
        if kind == "file":
            with open_output(out) as fh:
                fh.write("partial")
                fh.flush()
                print("ready", flush=True)
                time.sleep(120)
        else:
            with replaced_folder(out) as tmp:
                write_text(tmp / "index.html", "new")
                print("ready", flush=True)
                time.sleep(120)

    verb(out=out, made=made, force=True)
    """
)


def _interrupt(tmp_path: Path, kind: str, sig: int) -> tuple[int | None, Path]:
    out = tmp_path / ("out.csv" if kind == "file" else "report")
    if kind == "file":
        out.write_text("old", encoding="utf-8")
    else:
        out.mkdir()
        (out / "index.html").write_text("old", encoding="utf-8")
        (out / output.MARKER).write_text("", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, kind, str(out), str(tmp_path / "made")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),  # as a terminal's, also under nohup
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.stderr else ""
        proc.send_signal(sig)
        proc.wait(timeout=60)  # a loaded CI box: once more than 15 s (the writer sleeps 120 s, so a hang still fails)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return proc.returncode, out


@pytest.mark.parametrize("kind", ["file", "folder"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_an_interrupted_write_keeps_the_old_output_and_leaves_nothing(tmp_path: Path, kind: str, sig: str) -> None:
    """SIGTERM or SIGHUP while writing left ``.out.csv.XXXX.tmp`` (a report: ``.report.new-XXXX``) and the
    half-made folder of the command (Python's default action runs no ``finally``). Now: the old output intact, no
    temporary file or folder, the made folder removed, and the process still ends by that signal."""
    signum = getattr(signal, sig)
    code, out = _interrupt(tmp_path, kind, signum)
    assert code == -signum  # Ctrl-C too: an uncaught KeyboardInterrupt ends Python by SIGINT (the CLI says 130)
    old = out if kind == "file" else out / "index.html"
    assert old.read_text(encoding="utf-8") == "old"
    assert leftovers(tmp_path) == [] and not (tmp_path / "made").exists()


def test_kill_9_leaves_a_hidden_partial_file_that_nothing_reads(tmp_path: Path) -> None:
    """kill -9 cannot be cleaned up after: what it leaves is hidden and named partial (``.out.csv.partial-*.tmp``),
    the old file is intact, and the next run writes the output as usual."""
    code, out = _interrupt(tmp_path, "file", signal.SIGKILL)
    assert code == -signal.SIGKILL and out.read_text(encoding="utf-8") == "old"
    (left,) = leftovers(tmp_path)
    assert left.startswith(".out.csv.partial-") and left.endswith(".tmp")
    with output.output_policy(force=True):
        output.write_text(out, "new")
    assert out.read_text(encoding="utf-8") == "new" and leftovers(tmp_path) == [left]


def test_ctrl_c_waits_while_files_are_renamed_into_place() -> None:
    """Ctrl-C between moving an old report aside and moving the new one in removed both: while the writers
    rename, Ctrl-C and SIGTERM wait and are raised when the renames are done."""
    with pytest.raises(KeyboardInterrupt):
        with output._signals_held():
            signal.raise_signal(signal.SIGINT)
            done = True  # reached: the interrupt waited
    assert done
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ============================================================================================ permissions
def test_a_replaced_file_keeps_its_permissions_and_owner_but_no_setuid(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replaced file kept setuid/setgid (``-rwsrwxr-x`` on a CSV); a file root replaced became root's. Now its
    permission bits without setuid/setgid/sticky, its owner and group where the process may set them; a new
    file follows the umask; group and others never get a write access they lacked."""
    out = tmp_path / "out.csv"
    for mode in (0o640, 0o444, 0o6775, 0o600):
        out.write_text("old", encoding="utf-8")
        os.chmod(out, mode)
        owner = (65534, 65534) if os.geteuid() == 0 else (os.getuid(), os.getgid())
        if os.geteuid() == 0:
            os.chown(out, *owner)
        code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", out, "--force")
        st = out.stat()
        assert code == 0 and out.read_text(encoding="utf-8").startswith("id,")
        assert stat.S_IMODE(st.st_mode) == mode & 0o777, oct(st.st_mode)
        assert (st.st_uid, st.st_gid) == owner
    old_mask = os.umask(0o027)
    try:
        code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", tmp_path / "new.csv")
    finally:
        os.umask(old_mask)
    assert code == 0 and stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640
    # a report folder replaced with --force: as private as before (it became 0o755 under umask 022)
    report = tmp_path / "report"
    report.mkdir(mode=0o700)
    (report / output.MARKER).write_text("", encoding="utf-8")
    os.chmod(report, 0o700)
    with output.output_policy(force=True), output.replaced_folder(report) as fresh:
        output.write_text(fresh / "index.html", "new")
    assert stat.S_IMODE(report.stat().st_mode) == 0o700 and (report / "index.html").read_text(encoding="utf-8") == "new"


def test_links_are_written_through_consistently(
    stories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link to a file of the user's elsewhere: replaced only with --force, the link kept, the target replaced;
    a dangling link creates the file it names (no --force: nothing is replaced); a loop is one sentence."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mine = elsewhere / "mine.csv"
    mine.write_text("mine", encoding="utf-8")
    link = tmp_path / "link.csv"
    link.symlink_to(mine)
    code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", link)
    assert code == 1 and mine.read_text(encoding="utf-8") == "mine"
    one_error(err, "--force")
    code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", link, "--force")
    assert code == 0 and link.is_symlink() and mine.read_text(encoding="utf-8").startswith("id,")
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(elsewhere / "new.csv")
    code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", dangling)
    assert code == 0 and dangling.is_symlink() and (elsewhere / "new.csv").read_text(encoding="utf-8").startswith("id,")
    loop = tmp_path / "loop.csv"
    loop.symlink_to(loop)
    code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", loop, "--force")
    assert code == 1
    one_error(err, "symbolic link loop")
    assert leftovers(tmp_path) == [] and leftovers(elsewhere) == []


def test_odd_names_are_written_or_refused_in_one_sentence(
    stories: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new line or non-UTF-8 bytes in the name are written as given; a 300-byte name is one sentence; none
    leaves a temporary file. A report folder whose name is not UTF-8 stopped with "unexpected
    UnicodeEncodeError" (its page shows the command line): the page is written, the name as ``\\xff``."""
    monkeypatch.chdir(tmp_path)
    for name in ("new\nline.csv", os.fsdecode(b"bad\xff\xfe.csv")):
        code, _ = run(capsys, "score", stories, "-m", METRIC, "--per-item", name)
        assert code == 0 and Path(name).read_text(encoding="utf-8").startswith("id,")
        code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", name)
        assert code == 1
        one_error(err, "--force")
    code, err = run(capsys, "score", stories, "-m", METRIC, "--per-item", "x" * 300 + ".csv")
    assert code == 1
    one_error(err, "too long")
    assert leftovers(tmp_path) == []
    # what `meta pairs --report` writes into its page (the command line; the real command was checked by hand)
    report = os.fsdecode(b"report\xff")
    with output.replaced_folder(report) as fresh:
        output.write_text(fresh / "index.html", f"<code>vistkit meta pairs --report {report}</code>")
    page = (tmp_path / report / "index.html").read_text(encoding="utf-8")  # strict: the page is UTF-8
    assert page == "<code>vistkit meta pairs --report report\\udcff</code>"
    assert leftovers(tmp_path) == []
