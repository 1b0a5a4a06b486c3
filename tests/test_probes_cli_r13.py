"""Regressions found in session 13's probe round (score / compare and what they write): each test failed on the code
before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_probe_helpers import story_and_reference_files

resource = pytest.importorskip("resource")


def _run_capped(args: list[str], out: Path, *, max_bytes: int, unbuffered: bool) -> subprocess.CompletedProcess[str]:
    """Run the CLI with its stdout sent to ``out``, a file that may grow to ``max_bytes`` only (ulimit -f: the
    disk takes part of a write, then refuses, as a disk that fills up does)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["VISTKIT_QUIET"] = "1"
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open(out, "w") as fh:
        return subprocess.run(
            [sys.executable, "-m", "vistkit", *args],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=cap,
            timeout=180,
        )


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED=1", "buffered"])
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_results_cut_short_on_stdout_are_an_error(tmp_path: Path, unbuffered: bool, fmt: str) -> None:
    """`vistkit score ... -f json > out.json` on a disk that took only part of the output: under PYTHONUNBUFFERED=1
    (Docker images, Slurm scripts) the rest was dropped in silence and the command ended with 0, leaving half a
    JSON document; without it, the error was followed by Python's "Exception ignored ... OSError" and exit 120.
    Now one sentence and exit 1 either way."""
    hyp, refs = story_and_reference_files(tmp_path)
    out = tmp_path / "out.txt"
    done = _run_capped(
        ["score", hyp, "-r", refs, "-m", "bleu-4,rouge-l", "-f", fmt, "--confidence", "0.9"],
        out,
        max_bytes=300,
        unbuffered=unbuffered,
    )
    assert out.stat().st_size == 300  # (the output is longer than what the disk took)
    assert done.returncode == 1, done.stderr
    assert "Exception ignored" not in done.stderr
    assert done.stderr.count("error:") == 1, done.stderr
    assert "ulimit -f" in done.stderr


def test_results_that_fit_still_exit_0(tmp_path: Path) -> None:
    """The guard costs nothing when the output fits: the whole JSON document, exit 0 (PYTHONUNBUFFERED=1)."""
    hyp, refs = story_and_reference_files(tmp_path)
    out = tmp_path / "out.json"
    done = _run_capped(
        ["score", hyp, "-r", refs, "-m", "bleu-4", "-f", "json"], out, max_bytes=1 << 20, unbuffered=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["n"] == {"bleu-4": 30}


def _main(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    from vistkit.cli import main

    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("flags", "fits"),
    [
        (["--confidence", "0.95", "--bootstrap", "1"], False),
        (["--confidence", "0.95", "--n-bootstrap", "39"], False),
        (["--confidence", "0.999"], False),  # the default 1,000 resamples: 0.5 of one in each tail
        (["--confidence", "0.95", "--bootstrap", "40"], True),
        (["--confidence", "0.95"], True),
    ],
)
def test_score_warns_when_too_few_resamples_make_the_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fits: bool
) -> None:
    """`score --confidence 0.95 --bootstrap 1` printed a "95% CI" that was one resample, e.g. 0.2110 [0.2090,
    0.2090] (not even holding the score), without a word; a count that leaves less than one resample in each tail
    gives only the extreme resamples. Now a warning says how many the level needs; the numbers are unchanged."""
    hyp, refs = story_and_reference_files(tmp_path)
    code, out, err = _main(capsys, "score", hyp, "-r", refs, "-m", "rouge-l", "-f", "json", *flags)
    assert code == 0, err
    assert "ci" in json.loads(out)
    assert ("too few resamples" in err) is not fits, err


def test_compare_warns_about_intervals_and_tests_that_cannot_say_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare --bootstrap 5 --n-samples 10` showed 95% CIs from five resamples and a test whose smallest possible
    p-value is 1/11, so no system could ever be marked significant, in silence. Both are warned about now."""
    hyp, refs = story_and_reference_files(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(refs.read_text(), encoding="utf-8")
    args = ["compare", hyp, other, "-r", refs, "-m", "rouge-l"]
    code, _, err = _main(capsys, *args, "--bootstrap", "5", "--n-samples", "10")
    assert code == 0, err
    assert "--n-bootstrap 5 is too few resamples for a 95% interval" in err
    assert "--n-samples 10" in err and "p < 0.05" in err
    code, _, err = _main(capsys, *args, "--n-samples", "50", "--test", "ar")
    assert code == 0, err
    assert "too few resamples" not in err
    assert "--n-samples 50" in err and "p < 0.01" in err and "p < 0.05" not in err
    code, _, err = _main(capsys, *args)
    assert code == 0 and "warning" not in err.lower(), err


def _stderr_on_a_terminal(args: list[object], env: dict[str, str]) -> str:
    """What the CLI writes to stderr when stderr is a terminal (a pseudo-terminal here)."""
    import pty
    import select

    master, slave = pty.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "FORCE_COLOR", "VISTKIT_QUIET")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vistkit", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**base, "TERM": "xterm", **env},
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}, {}], ids=["NO_COLOR=1", "TERM=dumb", "colour"])
def test_no_color_and_a_dumb_terminal_get_no_colour_codes(tmp_path: Path, env: dict[str, str]) -> None:
    """With NO_COLOR=1 (no-color.org) or TERM=dumb the progress display had no colour, but the notes (yellow) and
    the error line (red) still carried ANSI codes, shown as `^[[33m` garbage by a dumb terminal or an editor's
    shell. Both are plain now; a colour terminal keeps its colours."""
    hyp, refs = story_and_reference_files(tmp_path)
    with hyp.open("a", encoding="utf-8") as fh:  # one story without a reference: a note says it was left out
        fh.write(json.dumps({"story_id": "extra", "text": "a lone story ."}) + "\n")
    err = _stderr_on_a_terminal(["score", hyp, "-r", refs, "-m", "bleu-4", "-f", "csv"], env)
    err += _stderr_on_a_terminal(["score", tmp_path / "missing.jsonl", "-m", "bleu-4"], env)
    assert "excluded" in err and "error:" in err, err
    assert ("\x1b[31m" in err and "\x1b[33m" in err) is (not env), repr(err)
