"""Helpers shared by the CLI probe tests (tests/test_probes_cli_r4.py, _r5.py): make building a slow metric or
opening an engine fail the test, write a tiny story file, and run the CLI in process expecting one error line."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from vistkit.cli import main
from vistkit.metrics.base import get_metric_class

META = Path(__file__).parent / "fixtures" / "meta"


def forbid_building(monkeypatch: pytest.MonkeyPatch, names: Iterable[str]) -> None:
    """Building any metric of ``names`` or opening an engine fails the test (the constructor's signature stays,
    so option checks that read it still work)."""
    for name in names:
        cls = get_metric_class(name)
        original = cls.__init__

        @functools.wraps(original)
        def built(self: Any, *args: Any, _name: str = name, **kwargs: Any) -> None:
            raise AssertionError(f"{_name} was built before the mistake was reported")

        monkeypatch.setattr(cls, "__init__", built)

    def engine(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an engine was opened before the mistake was reported")

    monkeypatch.setattr("vistkit.engine.make_engine", engine)


def write_stories(path: Path, prefix: str = "s") -> Path:
    """Three two-sentence stories with ids ``{prefix}0..2`` and three photo ids each, as JSONL at ``path``."""
    rows = [
        {"story_id": f"{prefix}{i}", "text": f"we went to the park {i} . it was nice .",
         "photo_ids": [str(3 * i + k) for k in range(3)]}
        for i in range(3)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def story_and_reference_files(tmp_path: Path, n: int = 30) -> tuple[Path, Path]:
    """A small story file and its references (JSONL, matched by story id): ``(hyp, refs)``."""
    hyp, refs = tmp_path / "hyp.jsonl", tmp_path / "refs.jsonl"
    for path, second in ((hyp, "the dog was happy"), (refs, "it was fun")):
        article = "a" if path is hyp else "the"
        rows = [{"story_id": f"s{i}", "text": f"we went to {article} park {i} . {second} ."} for i in range(n)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return hyp, refs


def run_cli(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    """``vistkit ARGS`` in process: (exit code, stderr)."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def one_error(capsys: pytest.CaptureFixture[str], *args: Any, code: int = 1) -> str:
    """The one ``error:`` line ``vistkit ARGS`` prints, asserting it exits with ``code`` and prints nothing else."""
    got, err = run_cli(capsys, *args)
    lines = err.strip().splitlines()
    assert got == code and len(lines) == 1 and lines[0].startswith("error: "), (got, err)
    return lines[0]


def error_line(err: str, *words: str) -> str:
    """The one ``error:`` line of ``err`` (progress lines aside), not the catch-all, holding each of ``words``."""
    from conftest import message_lines

    lines = message_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "unexpected" not in lines[0], err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


GiB = 1 << 30


def limited_run(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    limit: int = 2 * GiB,
    timeout: int = 300,
    cap: str = "RLIMIT_AS",
) -> Any:
    """``python -m vistkit ARGS`` in a subprocess whose address space is capped at ``limit`` bytes (``cap``:
    RLIMIT_DATA for runs that start Java, whose JVM reserves more address space than it uses); the
    ``subprocess.CompletedProcess`` (text)."""
    import os
    import subprocess
    import sys

    import vistkit

    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.{cap}, ({limit}, {limit}))\n"
        "from vistkit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    full_env = {
        **os.environ,
        # the vistkit this test imports (a checkout's src/ or the installed package), not whatever is on PATH
        "PYTHONPATH": str(Path(vistkit.__file__).resolve().parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        **(env or {}),
    }
    full_env.pop("VISTKIT_DEBUG", None)  # a MemoryError must read as a failure, not pass as a traceback
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def challenge_submission(path: Path, n: int) -> Path:
    """A 2018 challenge submission of ``n`` 60-word stories (10 per album, 5 photos each) at ``path``."""
    words = "the a we went to park and had fun it was great day my family beach dog".split()
    stories = [
        {
            "album_id": str(7000 + i // 10),
            "photo_sequence": [str(1000000 + 5 * i + j) for j in range(5)],
            "story_text_normalized": " ".join(words[(i * 7 + k) % len(words)] for k in range(60)),
        }
        for i in range(n)
    ]
    path.write_text(json.dumps({"team_name": "t", "output_stories": stories}), encoding="utf-8")
    return path


def dhm_prefix(folder: Path, name: str, g: dict[str, float], c: dict[str, float], r: dict[str, float]) -> Path:
    """dHM's score files of one side (``NAME_G.json``, ``NAME_C.csv``, ``NAME_R.csv``) in ``folder``: the prefix."""
    folder.mkdir(exist_ok=True)
    (folder / f"{name}_G.json").write_text(json.dumps(g), encoding="utf-8")
    for dim, table in (("C", c), ("R", r)):
        rows = "".join(f"{k},{v!r}\n" for k, v in table.items())
        (folder / f"{name}_{dim}.csv").write_text(f"story_id,{dim}_score\n{rows}", encoding="utf-8")
    return folder / name
