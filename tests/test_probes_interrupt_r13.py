"""Probe round 13: INTERRUPTION and CONCURRENCY around what vistkit keeps between runs (the user cache) and the
child processes it starts (the METEOR helper, javac, the PTB tokenizer).

- a cache that cannot hold METEOR's compiled helper (a cache shared read-only, prepared with ``models
  prepare-lm`` only; a file or a link loop where its ``java`` folder goes) stopped every METEOR run with "cannot
  write .../java: ... choose a writable folder for the output" or a message naming the helper's temporary
  ``.tmpPID/src`` folder; the helper is now built in a private folder of the temporary folder with one warning,
  and the numbers are the same;
- SIGTERM or SIGHUP (``kill PID``, a closed terminal) while METEOR's helper was being compiled or started (in a
  background thread) left ``javac`` or the helper JVM running after vistkit had ended; they are stopped with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import message_lines

HAS_JAVA = shutil.which("java") is not None and shutil.which("javac") is not None
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java 8+ with javac")
VISTKIT = [sys.executable, "-m", "vistkit"]

STORIES = (
    '{"story_id": "a", "text": "we went to the park. the kids played on the swings. it was a lovely day."}\n'
    '{"story_id": "b", "text": "the city was bright at night. we ate noodles and walked home late."}\n'
)
REFS = (
    '{"story_id": "a", "text": "the family went to the park and the children played on the swings all day."}\n'
    '{"story_id": "b", "text": "at night the city lights were bright. we had noodles and then walked home."}\n'
)


def _spoil(cache: Path, how: str) -> None:
    """Make ``cache/java`` unusable as a folder."""
    cache.mkdir(parents=True, exist_ok=True)
    if how == "file":
        (cache / "java").write_text("x", encoding="utf-8")
    elif how == "loop":
        os.symlink("java", cache / "java")
    elif how == "read-only":
        (cache / "java").mkdir()
        os.chmod(cache / "java", 0o555)


SPOILS = [
    "file",
    "loop",
    pytest.param(
        "read-only",
        marks=pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anyway"),
    ),
]


@needs_java
@pytest.mark.parametrize("how", SPOILS)
def test_a_cache_that_cannot_hold_the_meteor_helper_builds_it_privately(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.models import java

    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    tmp.mkdir()
    _spoil(cache, how)
    monkeypatch.setenv("VISTKIT_CACHE", str(cache))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)
    try:
        got = java._helper_classpath(java.require_java())
        assert got is not None
        assert Path(got).is_relative_to(tmp)
        assert java._classes_intact(Path(got))
        err = capsys.readouterr().err
        assert "warning:" in err and str(cache / "java") in err and "tmp" not in err.split(str(cache / "java"))[1][:8]
        # the next build finds it there (no second compile, no second warning)
        assert java._helper_classpath(java.require_java()) == got
    finally:
        with_mode = cache / "java"
        if with_mode.is_dir() and not with_mode.is_symlink():
            os.chmod(with_mode, 0o755)


@needs_java
def test_cli_meteor_with_a_file_where_the_helper_folder_goes_scores_the_same(tmp_path: Path) -> None:
    hyp, ref = tmp_path / "hyp.jsonl", tmp_path / "ref.jsonl"
    hyp.write_text(STORIES, encoding="utf-8")
    ref.write_text(REFS, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    runs = []
    for name, spoil in (("good", False), ("bad", True)):
        cache = tmp_path / name
        if spoil:
            _spoil(cache, "file")
        env = {**os.environ, "VISTKIT_CACHE": str(cache), "TMPDIR": str(tmp_path / "tmp")}
        cmd = [*VISTKIT, "score", str(hyp), "-r", str(ref), "-m", "meteor-vist", "-b"]
        runs.append(subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False))
    good, bad = runs
    assert good.returncode == 0, good.stderr
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout == good.stdout and float(good.stdout)
    lines = message_lines(bad.stderr)
    assert len(lines) == 1 and lines[0].startswith("warning:") and "is a file" in lines[0], lines


def _java_processes(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of running java/javac processes that mention ``marker`` (the test's folder)."""
    ps = ["ps", "-ww", "-eo", "pid=,args="]
    out = subprocess.run(ps, capture_output=True, text=True, timeout=30, check=False).stdout
    found = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if marker in args and "java" in args.split(" ", 1)[0]:
            found.append((int(pid), args))
    return found


def _java_children_of(marker: str) -> list[str]:
    return [args for _, args in _java_processes(marker)]


def _java_pids_of(marker: str) -> list[int]:
    return [pid for pid, _ in _java_processes(marker)]


@needs_java
@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or shutil.which("ps") is None, reason="needs POSIX signals and ps")
@pytest.mark.parametrize(
    ("phase", "signame"), [("javac", "SIGTERM"), ("VistkitMeteor", "SIGTERM"), ("javac", "SIGHUP")]
)
def test_sigterm_while_the_meteor_helper_starts_leaves_no_java_running(
    phase: str, signame: str, tmp_path: Path
) -> None:
    hyp, ref = tmp_path / "hyp.jsonl", tmp_path / "ref.jsonl"
    hyp.write_text(STORIES, encoding="utf-8")
    ref.write_text(REFS, encoding="utf-8")
    cache = tmp_path / "fresh-cache"  # nothing compiled yet: javac runs, then the helper builds its table
    env = {**os.environ, "VISTKIT_CACHE": str(cache), "VISTKIT_METEOR_TABLE_CACHE": str(tmp_path / "tables")}
    proc = subprocess.Popen(
        [*VISTKIT, "score", str(hyp), "-r", str(ref), "-m", "meteor-vist", "--per-item", str(tmp_path / "out.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not [c for c in _java_children_of(str(tmp_path)) if phase in c]:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"{phase} was not seen running (too fast on this machine)")
            time.sleep(0.02)
        os.kill(proc.pid, getattr(signal, signame))
        proc.communicate(timeout=60)
        assert proc.returncode == -getattr(signal, signame)
        time.sleep(0.3)  # a killed child is reaped by init at once
        assert _java_children_of(str(tmp_path)) == []
        assert not (tmp_path / "out.csv").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in _java_pids_of(str(tmp_path)):  # do not leave them to the next test
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
