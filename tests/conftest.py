"""Shared fixtures. Tests that need ../shared skip with a reason when it is absent (CI always has it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# the CLI turns an unforeseen exception into one sentence; in tests it must surface as a failure instead
os.environ.setdefault("VISTKIT_DEBUG", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VISTKIT_SHARED", REPO.parent / "shared")).resolve()
DATA = SHARED / "data"

requires_shared = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"needs the ../shared data folder ({DATA} not found)"
)


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
