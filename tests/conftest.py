"""Shared fixtures. Tests that need ../shared skip with a reason when it is absent (CI always has it)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from vistkit.cli import app as _TYPER_APP  # the Typer object itself (see `cli_verbs`)

# A run started as a background job of a non-interactive shell (`make test &`, `nohup`, some CI runners) inherits
# Ctrl-C ignored, and so does every process it starts: the tests of Ctrl-C (KeyboardInterrupt, exit by SIGINT)
# need Python's own handling, which a process that inherits the signal ignored does not install.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Machines differ in speed and load (CI shares 2 cores): no property test may fail because one example ran slowly.
# A test's own @settings still sets what it names; what it leaves out comes from this profile.
settings.register_profile("vistkit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("vistkit")

# the CLI turns an unforeseen exception into one sentence; in tests it must surface as a failure instead
os.environ.setdefault("VISTKIT_DEBUG", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VISTKIT_SHARED", REPO.parent / "shared")).resolve()
DATA = SHARED / "data"

requires_shared = pytest.mark.skipif(not DATA.is_dir(), reason=f"needs the ../shared data folder ({DATA} not found)")


def shared_file(*parts: str) -> Path:
    """Path of a file under ../shared/data; skips the calling test when it is missing."""
    p = DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs {p} (../shared data)")
    return p


@pytest.fixture
def shared() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"needs the ../shared data folder ({DATA} not found)")
    return DATA


# Java's Math.pow (a JIT intrinsic) and C's pow may round differently in the last bit, and which one a value went
# through depends on the CPU; between two different arithmetic implementations (Java vs numpy, BLAS with other
# thread counts) compare within this relative tolerance (2 ulp of a double), never bit for bit.
CROSS_IMPLEMENTATION_RTOL = 4e-16


def assert_close_across_implementations(ours: object, theirs: object) -> None:
    """``ours`` equals ``theirs`` (scalars or sequences) within ``CROSS_IMPLEMENTATION_RTOL`` relative."""
    import numpy as np

    np.testing.assert_allclose(
        np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float), rtol=CROSS_IMPLEMENTATION_RTOL, atol=0
    )


# a progress line (``rovist-nr: scored 1/1 stories (0.5/s, 0:00:02)``; also ``(starting, 0:00:10)``, ``(1.5/min,``,
# ``(..., stopped after 0:00:05)``, units such as ``pairs (both orders)``): printed when stderr is not a terminal and
# a task took over 2 s, which a loaded machine can make of any step; it is not part of a command's message
PROGRESS_LINE = re.compile(
    r" [\d,]+(/[\d,]+)? \w[\w ()]* \(([\d.]+/(s|min|h)|starting), (ETA |stopped after )?\d+:\d\d:\d\d\)$"
)


def message_lines(err: str) -> list[str]:
    """The non-empty stderr lines of a command that are not progress lines."""
    return [ln for ln in err.splitlines() if ln.strip() and not PROGRESS_LINE.search(ln)]


def cli_verbs() -> list[str]:
    """Every leaf command of the typer app, as typed (``meta pairs``). Reads the Typer object bound when this
    module was imported: some test modules patch ``vistkit.cli.app`` with a prebuilt command."""
    import typer

    from vistkit.cli import _load_commands

    _load_commands()
    found: list[str] = []

    def walk(cmd: Any, prefix: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*prefix, name))
        else:
            found.append(" ".join(prefix))

    walk(typer.main.get_command(_TYPER_APP), ())
    return sorted(found)


#: modules holding the suite's longest tests (each 25 s to 2.5 minutes on a 2-core box), run first: xdist hands
#: out the rest of the tests as its two workers free up, so a long test collected last kept one worker busy
#: while the other had nothing left (about two minutes of a `make test`). Tests keep their order within a module.
LONG_MODULES = (
    "test_story_ranker_v2.py",
    "test_meteor.py",
    "test_readme.py",
    "test_engine_ray.py",
    "test_dhm_e2e.py",
    "test_coco.py",
    "test_demo.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: rank for rank, name in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: the others keep their order


def pytest_configure(config: pytest.Config) -> None:
    """Marks of this suite beyond pyproject's (which the Makefile's install stamp hashes)."""
    config.addinivalue_line("markers", "hard_limit(seconds): tests/test_hardening.py's per-test time limit")
