"""`vistkit.progress`: the plain lines a log gets (fake clock: exact counts, rates and ETAs), the final line,
-q/--quiet and VISTKIT_QUIET, nested tasks (a metric inside a command's loop), and the CLI wiring: every metric
of `vistkit score` reports its stories through `Metric.score`."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from progress_helpers import FakeClock, fake_progress_clock, progress_lines

from vistkit import progress
from vistkit.cli import main
from vistkit.metrics.base import list_metrics


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    yield from fake_progress_clock(monkeypatch)


def test_plain_lines_every_interval_with_rate_and_eta(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    with progress.task("bertscore", 2019) as t:
        clock.now += 5
        t.advance(100)  # 5 s: before the 10 s interval, nothing
        assert progress_lines(capsys) == []
        clock.now += 7
        t.advance(1100)  # 12 s, 1,200 done: 100/s, 819 left: ETA 8.19 s
        assert progress_lines(capsys) == ["bertscore: scored 1,200/2,019 stories (100.0/s, ETA 0:00:08)"]
        clock.now += 3
        t.advance(300)  # 3 s after the last line: nothing
        assert progress_lines(capsys) == []
        clock.now += 7.2
        t.update(2000)  # 22.2 s: 90.1/s, 19 left
        assert progress_lines(capsys) == ["bertscore: scored 2,000/2,019 stories (90.1/s, ETA 0:00:00)"]
        clock.now += 0.8
        t.update(2019)
    assert progress_lines(capsys) == ["bertscore: scored 2,019/2,019 stories (87.8/s, 0:00:23)"]  # the final line


def test_a_short_task_prints_nothing_and_a_long_one_only_its_final_line(
    clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    with progress.task("bleu-4", 10) as t:
        clock.now += 1.5
        t.update(10)
    assert progress_lines(capsys) == []  # under 2 s and no line before: silent
    with progress.task("meteor-vist", 10) as t:
        clock.now += 3
        t.update(10)
    assert progress_lines(capsys) == ["meteor-vist: scored 10/10 stories (3.3/s, 0:00:03)"]


def test_quiet_and_env_silence_everything(
    clock: FakeClock, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")
    for quiet in ("flag", "env"):
        if quiet == "flag":
            progress.set_quiet(True)
        else:
            progress.set_quiet(None)
            monkeypatch.setenv("VISTKIT_QUIET", "1")
        with progress.task("x", 5) as t:
            for _ in range(5):
                clock.now += 3
                t.advance()
        assert progress_lines(capsys) == []
        assert progress.is_quiet()


def test_library_default_is_silent_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.delenv("VISTKIT_PROGRESS", raising=False)
    progress.set_quiet("library")
    assert progress.is_quiet()
    monkeypatch.setenv("VISTKIT_PROGRESS", "1")
    assert not progress.is_quiet()


@settings(max_examples=60, deadline=None)
@given(total=st.integers(1, 5000), steps=st.lists(st.integers(0, 400), min_size=1, max_size=30))
def test_counts_never_exceed_total_nor_go_back(total: int, steps: list[int]) -> None:
    progress.set_quiet(True)
    try:
        with progress.task("x", total) as t:
            seen = []
            for s in steps:
                t.advance(s)
                seen.append(t.done)
        assert seen == sorted(seen) and all(0 <= d <= total for d in seen)
        assert t.done == min(total, sum(steps))
    finally:
        progress.set_quiet("library")


def test_hidden_inner_task_moves_its_parent(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric's task inside a command's loop (meta pairs: 100 pairs) is hidden and moves the pairs count."""
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "1000")
    with progress.task("rovist-nr", 100, unit="pairs") as outer:
        with progress.task("rovist-nr", 40, outermost=True) as inner:  # 40 stories: at most 40 of the pairs
            assert inner._display is None and inner.parent is outer
            inner.advance(20)
            assert outer.done == 20
            progress.fraction(1, 2)  # an inner loop at half way: the innermost task (the metric's)
            assert inner.done == 20 and outer.done == 20
            progress.fraction(3, 4)
            assert inner.done == 30 and outer.done == 30
        progress.fraction(70, 100)  # the command's own loop
        assert outer.done == 70
    assert progress.current() is None
    progress.advance(5)  # no open task: nothing happens


def test_track_counts_every_element(clock: FakeClock, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")
    got = []
    for x in progress.track(range(3), "pairs", unit="pairs", verb="ranked"):
        clock.now += 1
        got.append(x)
    assert got == [0, 1, 2]
    assert progress_lines(capsys) == [
        "pairs: ranked 1/3 pairs (1.0/s, ETA 0:00:02)",
        "pairs: ranked 2/3 pairs (1.0/s, ETA 0:00:01)",
        "pairs: ranked 3/3 pairs (1.0/s, 0:00:03)",
    ]


def test_terminal_mode_draws_a_bar_and_clears_it(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    monkeypatch.setenv("TERM", "xterm")
    with progress.task("bertscore", 4) as t:
        assert t._bar is not None  # a rich task, not plain lines
        t.advance(2)
        clock.now += 3
        t.advance(2)
    assert progress._displays[id(fake)].progress is None  # stopped once its last task ended
    assert "bertscore: scored 4/4 stories (1.3/s, 0:00:03)" in fake.getvalue()  # its final line stays


# --------------------------------------------------------------------------------------------------- the CLI
STORIES = [
    {"story_id": f"s{i}", "text": f"we went to the park {i} . the park was nice . we went home ."} for i in range(3)
]


@pytest.fixture
def stories(tmp_path: Path) -> Path:
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in STORIES), encoding="utf-8")
    return p


def test_score_prints_periodic_lines_with_right_counts(
    stories: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if "rovist-nr" not in list_metrics():
        pytest.skip("rovist-nr is not registered")
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")  # a line at every item
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    assert main(["score", str(stories), "-m", "rovist-nr", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n"] == {"rovist-nr": 3}
    counts = re.findall(r"^rovist-nr: scored (\d)/3 stories \(", err, flags=re.M)
    assert counts == ["1", "2", "3"]  # one per story, the last one the final line


@pytest.mark.parametrize("how", ["-q", "--quiet", "root -q", "env"])
def test_quiet_cli_prints_no_progress(
    how: str, stories: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if "rovist-nr" not in list_metrics():
        pytest.skip("rovist-nr is not registered")
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")
    args = ["score", str(stories), "-m", "rovist-nr", "-b"]
    if how == "env":
        monkeypatch.setenv("VISTKIT_QUIET", "1")
    elif how == "root -q":
        args = ["-q", *args]
    else:
        args.append(how)
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == "" and re.fullmatch(r"\d\.\d{4}\n", out)
    assert progress._quiet == "library"  # the flag does not outlive the command


def test_labelled_tasks_name_their_system(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    with progress.labelled("sysA"), progress.task("bertscore", 2) as t:
        clock.now += 4
        t.update(2)
    assert progress_lines(capsys) == ["sysA: bertscore: scored 2/2 stories (0.5/s, 0:00:04)"]
    with progress.task("bertscore", 1) as t:  # the label does not outlive its block
        clock.now += 4
        t.update(1)
    assert progress_lines(capsys) == ["bertscore: scored 1/1 stories (0.2/s, 0:00:04)"]


def test_part_maps_an_inner_loop_onto_its_block(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """An inner loop inside one block of a longer run (an LM's batches for stories 1,024..2,047 of 2,019...) moves
    the task over that block only: before `progress.part`, the first block's inner loop said the run was done."""
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "1000")
    with progress.task("story-ranker", 24) as t:
        with progress.part(0, 8, 24):
            progress.fraction(1, 2)
            assert t.done == 4
            progress.fraction(1, 1)
            assert t.done == 8
        with progress.part(8, 16, 24):
            progress.fraction(1, 4)
            assert t.done == 10
        progress.fraction(16, 24)
        assert t.done == 16
    with progress.part(0, 1, 2):  # no open task: nothing happens
        progress.fraction(1, 1)
    assert progress.current() is None



@pytest.mark.parametrize("raw", ["nan", "-5", "abc", "1e9"])
def test_a_bad_progress_interval_is_said_once_and_the_default_used(
    raw: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", raw)
    monkeypatch.setattr(progress, "_BAD_INTERVALS_SAID", set())
    assert progress.interval() == progress.interval() == progress.DEFAULT_INTERVAL
    err = capsys.readouterr().err
    assert err.count("VISTKIT_PROGRESS_INTERVAL") == 1 and "from 0 to 86400" in err
