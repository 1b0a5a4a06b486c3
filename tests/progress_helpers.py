"""Shared by the progress tests: a fake clock for `vistkit.progress`, which only moves when a test moves it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vistkit import progress


class FakeClock:
    """`vistkit.progress.clock` that a test moves by hand (``clock.now += 12``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_progress_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    """For a ``clock`` fixture (``yield from``): progress lines on stderr (as the CLI does) every 10 s of the fake
    clock."""
    fake = FakeClock()
    monkeypatch.setattr(progress, "clock", fake)
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "10")
    progress.set_quiet(False)  # as the CLI does
    yield fake
    progress.set_quiet("library")


def progress_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The stderr lines written since the last call (progress never touches stdout)."""
    out, err = capsys.readouterr()
    assert out == ""
    return err.splitlines()
