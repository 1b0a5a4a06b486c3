"""Regressions found in session 12's probe round (CLI, cards and docs): each test failed on the code before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vistkit.commands.metrics import card_page, needs_text
from vistkit.metrics.base import list_metrics


def test_a_card_names_the_weights_a_metric_needs() -> None:
    """Cards said `needs: -` for metrics that cannot run without a checkpoint vistkit does not ship (dHM's C,
    RoViST-VG, CLIP-based ones, Vrank), while `vistkit metrics` named the weights: both say the same now."""
    for name, cls in list_metrics().items():
        line = card_page(cls).rsplit("needs: ", 1)[1].split(";")[0]
        if cls.weights:
            assert f"weights: {cls.weights}" in card_page(cls), name
            assert line != "-", name
        assert needs_text(cls) == line or f"weights: {cls.weights}" in needs_text(cls)


def test_every_verb_takes_both_names_of_the_bootstrap_count() -> None:
    """`score`/`compare` took `--n-bootstrap`, the `meta` verbs and `studio report` `--bootstrap`: a researcher who
    used one name on the other verb got "No such option". Both names work everywhere now."""
    import typer.main

    from vistkit.cli import _load_commands, app

    _load_commands()
    group = typer.main.get_command(app)
    seen = 0

    def walk(cmd: Any, path: str) -> None:
        nonlocal seen
        if hasattr(cmd, "list_commands"):
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, f"{path} {name}")
            return
        for param in cmd.params:
            names = set(param.opts) | set(param.secondary_opts)
            if names & {"--bootstrap", "--n-bootstrap"}:
                seen += 1
                assert {"--bootstrap", "--n-bootstrap"} <= names, path

    walk(group, "vistkit")
    assert seen >= 6


def test_an_option_value_outside_its_choices_is_a_usage_error(tmp_path: Path) -> None:
    """`--format xml` and `--seed -1` exited 2 (a usage error) but `--engine spark`, `--hyp-format xml`,
    `--workers 0`, `--num-gpus-per-worker -1`, `--test t`, `--kendall x`, `--level x` and `--subset x` exited 1
    after the command had started: every value an option refuses on its own is exit 2 now, in one sentence."""
    from vistkit.meta.pairs import SUBSETS

    hyps = tmp_path / "h.jsonl"
    hyps.write_text('{"story_id": "1", "text": "we went to the park ."}\n', encoding="utf-8")
    cases = [
        (["score", hyps, "-m", "rovist-nr", "--engine", "spark"], "'--engine': use local or ray, not 'spark'"),
        (["score", hyps, "-m", "rovist-nr", "--hyp-format", "xml"], "'--hyp-format': use sis, storylets"),
        (["score", hyps, "-m", "rovist-nr", "-r", hyps, "--ref-format", "xml"], "'--ref-format': use sis"),
        (["score", hyps, "-m", "rovist-nr", "--workers", "0"], "'--workers': must be from 1 to 4,096"),
        (["score", hyps, "-m", "rovist-nr", "--num-gpus-per-worker", "-1"], "'--num-gpus-per-worker': must be"),
        (["score", hyps, "-m", "rovist-nr", "--num-gpus-per-worker", "inf"], "got inf"),
        (["compare", hyps, hyps, "-m", "bleu-4", "-r", hyps, "--test", "t"], "'--test': use bs or ar, not 't'"),
        (["meta", "correlate", hyps, "-m", "rovist-nr", "--kendall", "x"], "'--kendall': use b or c, not 'x'"),
        (["meta", "correlate", hyps, "-m", "rovist-nr", "--level", "x"], "'--level': use story, system or both"),
        (["meta", "compare", hyps, "-m", "a,b", "--subset", "x"], f"use {', '.join(SUBSETS[:-1])} or {SUBSETS[-1]}"),
    ]
    for args, said in cases:
        done = subprocess.run(
            [sys.executable, "-m", "vistkit", *map(str, args)], capture_output=True, text=True, timeout=120
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.returncode, done.stderr)
        assert lines[0].startswith("error: Invalid value for ") and said in lines[0], (args, lines)


def test_an_output_folder_that_is_a_broken_link_is_named_as_one(tmp_path: Path) -> None:
    """`models convert CKPT LOOP` (and every verb writing a folder) called a link loop or a dangling link "a
    file"; it says what it is now."""
    from vistkit.data.output import check_output_folder
    from vistkit.errors import OutputError

    loop, dangling = tmp_path / "loop", tmp_path / "dangling"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "gone")
    for p in (loop, dangling):
        try:
            check_output_folder(p)
        except OutputError as exc:
            assert "symbolic link that leads nowhere" in str(exc) and "a file" not in str(exc)
        else:
            raise AssertionError(f"{p} accepted")


def test_a_slow_model_load_is_said_once_and_a_fast_one_is_not(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first `score -m story-ranker` on a busy machine printed nothing for about a minute while its models
    loaded (a newcomer took it for a hang); a load longer than the progress interval is said now."""
    import time

    from vistkit.commands import score

    class Slow:
        name = "slow-metric"

        def __init__(self, **_: Any) -> None:
            time.sleep(0.6)

        @classmethod
        def check_tools(cls) -> None:  # `Metric.check_tools`: no program to look for
            pass

    class Fast(Slow):
        name = "fast-metric"

        def __init__(self, **_: Any) -> None:
            pass

    monkeypatch.setenv("VISTKIT_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.setenv("VISTKIT_PROGRESS", "1")  # the library default is quiet; the command line's is not
    monkeypatch.setattr(score, "LOAD_NOTE_AFTER", 0.2)
    built = score.construct([(Slow, {}), (Fast, {})])  # type: ignore[list-item]
    time.sleep(0.4)  # a timer left running would say "fast-metric" now
    err = capsys.readouterr().err
    assert [type(m).__name__ for m in built] == ["Slow", "Fast"]
    assert err.count("slow-metric: loading its models") == 1 and "fast-metric" not in err


def test_an_enum_option_refusal_reads_like_the_others(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--key bogus` said "Invalid value for '--key' / '-k': Value error, 'bogus' is not one of ...": typer's
    wording of its own choice check leaked; the sentence now reads as every other refused value."""
    from vistkit.cli import main

    hyps = tmp_path / "h.jsonl"
    hyps.write_text('{"story_id": "1", "text": "we went to the park ."}\n', encoding="utf-8")
    assert main(["score", str(hyps), "-m", "rovist-nr", "--key", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: Invalid value for '--key' / '-k': 'bogus' is not one of 'story', 'sequence', 'album'."
