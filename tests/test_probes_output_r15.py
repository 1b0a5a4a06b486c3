"""Regressions found in session 15's probe round on the command line's output conventions (`score -b`, progress
lines): each test failed on the code before."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PROGRESS_LINE
from progress_helpers import FakeClock, fake_progress_clock, progress_lines

from vistkit import progress
from vistkit.cli import main
from vistkit.metrics.base import list_metrics

HYPS = [
    {"story_id": "s1", "text": "The family went to the park. They had a picnic. Everyone was happy."},
    {"story_id": "s2", "text": "We went to the beach. The water was cold. We swam anyway."},
]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    yield from fake_progress_clock(monkeypatch)


@pytest.fixture
def hyp_file(tmp_path: Path) -> Path:
    p = tmp_path / "hyps.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in HYPS), encoding="utf-8")
    return p


@pytest.fixture
def cheap_all(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``-m all`` over a few cheap metrics: two reference-free ones that run, a reference one that is skipped."""
    from vistkit.commands import score as score_cmd

    names = ["rovist-nr", "rovist-nr-jaccard", "bleu-4"]
    registered = list_metrics()
    if not all(n in registered for n in names):
        pytest.skip("rovist-nr, rovist-nr-jaccard and bleu-4 are not all registered")
    monkeypatch.setattr(score_cmd, "list_metrics", lambda: {n: registered[n] for n in names})
    return names


# ------------------------------------------------------------------ score -b: which number is which metric
def test_score_only_with_metrics_all_names_each_number(
    hyp_file: Path, cheap_all: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``-m all -b`` printed bare numbers, one per metric that happened to run (which depends on the inputs and
    the machine; the skip notes go to stderr, and -q hides them), so a script could not tell them apart. Each
    line is now ``METRIC<TAB>SCORE``, in the order they ran, and agrees with ``-f json``."""
    assert main(["score", str(hyp_file), "-m", "all", "-f", "json", "-q"]) == 0
    scores = json.loads(capsys.readouterr().out)["scores"]
    assert set(scores) == {"rovist-nr", "rovist-nr-jaccard"}
    assert main(["score", str(hyp_file), "-m", "all", "-b", "-q"]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    assert err == "" and [r[0] for r in rows] == list(scores), out
    assert all(len(r) == 2 and float(r[1]) == pytest.approx(scores[r[0]], abs=5e-5) for r in rows), out


def test_score_only_with_one_metric_or_a_list_stays_bare(hyp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-b`` with the metrics named is still sacreBLEU's: bare numbers, one per metric in ``-m`` order (each
    named metric either scores or fails the command, so the order says which is which)."""
    if "rovist-nr" not in list_metrics():
        pytest.skip("rovist-nr is not registered")
    assert main(["score", str(hyp_file), "-m", "rovist-nr", "-b", "-q"]) == 0
    assert re.fullmatch(r"-?\d+\.\d{4}\n", capsys.readouterr().out)


# ------------------------------------------------------------------ progress: an honest first ETA
def _eta_seconds(line: str) -> int | None:
    found = re.search(r"ETA (\d+):(\d\d):(\d\d)\)$", line)
    if found is None:
        return None
    h, m, s = (int(g) for g in found.groups())
    return h * 3600 + m * 60 + s


def test_the_first_item_carrying_the_start_up_time_gives_no_absurd_eta(
    clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metric that loads its model on the first item (10.3 s) and then scores 100 pairs a second: the first
    line read "scored 1/15,015 pairs (0.1/s, ETA 42:57:24)" for a run of under three minutes, and the next one,
    with 1,001 pairs done, still promised 4:44 instead of 2:20. The first line now gives no rate or ETA (nothing
    measured yet but the start-up), and the later ones measure the rate after the first item."""
    with progress.task("pairs", 15_015, unit="pairs") as t:
        clock.now += 10.3
        t.advance(1)  # the model loaded, the first pair scored
        assert progress_lines(capsys) == ["pairs: scored 1/15,015 pairs (starting, 0:00:10)"]
        for _ in range(10):  # ten seconds at 100 pairs a second
            clock.now += 1
            t.advance(100)
        [line] = progress_lines(capsys)
        assert PROGRESS_LINE.search(line), line
        assert line.startswith("pairs: scored 1,001/15,015 pairs (100.0/s, ETA ")
        assert _eta_seconds(line) == pytest.approx((15_015 - 1_001) / 100, abs=1)
        clock.now += 140.14
        t.update(15_015)
    [final] = progress_lines(capsys)
    assert final == "pairs: scored 15,015/15,015 pairs (93.6/s, 0:02:40)"  # the whole run, start-up included


def test_a_slow_loop_shows_its_rate_not_zero_per_second(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    """One resample every 40 s read "(0.0/s, ETA 0:26:40)": a rate under 0.1/s is now given per minute (or hour)."""
    with progress.task("bootstrap", 42, unit="resamples", verb="drew") as t:
        for _ in range(2):
            clock.now += 40
            t.advance()
        lines = progress_lines(capsys)
    assert lines[-1] == "bootstrap: drew 2/42 resamples (1.5/min, ETA 0:26:40)", lines
    assert all(PROGRESS_LINE.search(line) for line in lines), lines
    assert progress.format_line("x", "scored", 1, 9, "stories", 7200.0).endswith("(0.5/h, ETA 16:00:00)")


def test_every_progress_line_shape_matches_the_pattern_the_tests_use() -> None:
    """Lines with nothing done yet, no total, or a unit of several words ("pairs (both orders)") did not match
    conftest's PROGRESS_LINE, so tests read them as messages; a line with nothing done had no time at all."""
    for line in (
        progress.format_line("a", "scored", 0, 10, "stories", 0.0),
        progress.format_line("a", "scored", 5, None, "stories", 3.0),
        progress.format_line("a", "scored", 10, 10, "stories", 3.0),
        progress.format_line("a", "scored", 1, 10, "stories", 3.0, starting=True),
        progress.format_line("vrank", "predicted", 4, 10, "pairs (both orders)", 3.0),  # vrank predict's unit
    ):
        assert PROGRESS_LINE.search(line), line


def test_a_task_that_ends_short_gives_its_time_not_an_eta(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    """The last line of a loop stopped by an error (or Ctrl-C) read like a run going on, "scored 500/2,019
    stories (100.0/s, ETA 0:00:15)", just above the error; it now says it stopped and after how long. A loop that
    ends short without an error (a count rounded down) gives its time taken, not an ETA."""
    with pytest.raises(KeyboardInterrupt), progress.task("bertscore", 2019) as t:
        clock.now += 5
        t.advance(500)
        raise KeyboardInterrupt
    [line] = progress_lines(capsys)
    assert line == "bertscore: scored 500/2,019 stories (100.0/s, stopped after 0:00:05)" and PROGRESS_LINE.search(line)
    with progress.task("bertscore", 2019) as t:
        clock.now += 5
        t.advance(2018)
    [line] = progress_lines(capsys)
    assert line == "bertscore: scored 2,018/2,019 stories (403.6/s, 0:00:05)" and PROGRESS_LINE.search(line)


def test_metrics_all_with_nothing_to_run_says_why_even_when_quiet(
    hyp_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-m all -q`` where no metric can run (only reference metrics here, no --references) failed with "no metric
    could score these stories (see the reasons above)", and -q had hidden the reasons: the error now gives them
    (without -q, the notes above still do)."""
    from vistkit.commands import score as score_cmd

    registered = list_metrics()
    names = [n for n in ("bleu-4", "sacrebleu") if n in registered]
    if not names:
        pytest.skip("no reference metric registered")
    monkeypatch.setattr(score_cmd, "list_metrics", lambda: {n: registered[n] for n in names})
    assert main(["score", str(hyp_file), "-m", "all", "-q"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "above" not in err, err
    assert all(f"{n}: needs reference stories (--references FILE)" in err for n in names), err
    assert len(err.strip().splitlines()) == 1, err  # one error, its reasons inside
    assert main(["score", str(hyp_file), "-m", "all"]) == 1
    err = capsys.readouterr().err
    assert "(see the reasons above)" in err and all(f"skipped {n}: needs reference stories" in err for n in names)
