"""Regressions found in session 14's probe round (score / compare, their options and what they write): each test
failed on the code before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_probe_helpers import story_and_reference_files

from vistkit.cli import main


# ------------------------------------------------------------------ a --per-item file that cannot be written
def test_scores_are_printed_when_the_per_item_name_was_taken_meanwhile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs writing one --per-item name (or a file made there while scoring): the loser printed nothing, so
    the scores of its whole run were lost; they are printed, then the error names the file (exit 1)."""
    import vistkit.commands.score as score_module

    hyp, refs = story_and_reference_files(tmp_path)
    out = tmp_path / "items.csv"
    original = score_module.score_all

    def score_then_collide(*args: Any, **kwargs: Any) -> Any:
        results = original(*args, **kwargs)
        out.write_text("another run's file\n", encoding="utf-8")
        return results

    monkeypatch.setattr(score_module, "score_all", score_then_collide)
    capsys.readouterr()
    code = main(["score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "--per-item", str(out), "-f", "json"])
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["scores"]["sacrebleu"] > 0  # the run's scores are not lost
    errors = [ln for ln in captured.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "items.csv" in errors[0] and "exists already" in errors[0], captured.err
    assert out.read_text(encoding="utf-8") == "another run's file\n"  # never replaced without --force


def test_scores_are_printed_when_the_disk_cannot_take_the_per_item_file(tmp_path: Path) -> None:
    """A disk that fills up (here ``ulimit -f``) while the --per-item CSV is written lost the printed scores as
    well; stdout (a pipe) still gets them, and the exit status says the file is missing."""
    resource = pytest.importorskip("resource")
    hyp, refs = story_and_reference_files(tmp_path, n=200)
    out = tmp_path / "items.csv"

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = {**os.environ, "VISTKIT_QUIET": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "vistkit", "score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-b",
         "--per-item", str(out)],
        capture_output=True, text=True, env=env, preexec_fn=cap, timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert float(done.stdout.strip()) > 0, (done.stdout, done.stderr)
    assert "error: cannot write " in done.stderr and "items.csv" in done.stderr, done.stderr
    assert not out.exists() and not [p for p in tmp_path.iterdir() if "partial" in p.name]


# ------------------------------------------------------------------ per-item details in score -f json
def test_json_per_item_details_say_which_item_each_value_belongs_to() -> None:
    """``details`` held lm-*'s ``item_sentences`` (and story-ranker's ``item_notes``, which the table's note sends
    the reader to) as bare lists in the order of item ids that the JSON never gave: no value could be tied to
    its story. The metric's ``item_ids`` now come with them, in the same order."""
    import numpy as np

    from vistkit.commands.score import render_scores
    from vistkit.metrics.base import Score
    from vistkit.report.tables import OutputFormat

    lm = Score(
        "lm-fluency", -1.5, ["b", "a"], np.array([-1.0, -2.0]), "sig",
        extra={"item_sentences": [[-1.0], [-2.0, None]], "item_notes": ["", "lowest score: repeats"]},
    )  # fmt: skip
    plain = Score("bleu-4", 0.2, ["a", "b"], np.array([0.1, 0.3]), "sig2", extra={"testlen": 12})
    payload = json.loads(render_scores([lm, plain], OutputFormat.JSON))
    details = payload["details"]
    assert details["lm-fluency"]["item_ids"] == ["b", "a"]
    assert details["lm-fluency"]["item_sentences"] == [[-1.0], [-2.0, None]]  # unchanged
    assert "item_ids" not in details["bleu-4"]  # no per-item list: nothing to tie


# ------------------------------------------------------------------ an empty path (an unset shell variable)
@pytest.mark.parametrize(
    ("verb", "args", "flag"),
    [
        ("score", ["", "-m", "sacrebleu"], "'FILE'"),
        ("score", ["{hyp}", "-r", "", "-m", "sacrebleu"], "'--references'"),
        ("score", ["{hyp}", "-r", "{refs}", "-m", "sacrebleu", "--template", ""], "'--template'"),
        ("score", ["{hyp}", "-r", "{refs}", "-m", "sacrebleu", "--per-item="], "'--per-item'"),
        ("score", ["{hyp}", "-r", "{refs}", "-m", "sacrebleu", "--per-item", " "], "'--per-item'"),
        ("compare", ["{hyp}", "", "-r", "{refs}", "-m", "sacrebleu"], "'FILE'"),
        ("distance", ["--human", "", "--model", "{hyp}"], "'--human'"),
    ],
)
def test_an_empty_path_is_named_as_empty(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    verb: str,
    args: list[str],
    flag: str,
) -> None:
    """``-r "$REFS"`` with REFS unset gave "error: . is a folder; give a regular file" (Python reads "" as the
    current folder), and ``--per-item " "`` wrote a file named by a space; both are a usage error naming the
    option, before anything is read."""
    monkeypatch.chdir(tmp_path)
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    argv = [verb, *(a.format(hyp=hyp, refs=refs) for a in args)]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: Invalid value for ") and flag in err and "give a file name" in err, err
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / " ").exists()


# ------------------------------------------------------------------ option values that only look right
def test_system_names_that_differ_only_in_surrounding_spaces_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--name a --name " a"`` made two systems that read alike in the table and in "the story of  a is
    preferred over that of a"; a name with spaces around it is refused, saying which."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    for bad in (" a", "a ", "  a  "):
        capsys.readouterr()
        code = main(["compare", str(hyp), str(refs), "-r", str(refs), "-m", "sacrebleu", "--name", "a", "--name", bad])
        err = capsys.readouterr().err.strip()
        assert code == 1 and err.startswith("error: --name ") and repr(bad) in err and "space" in err, err


@pytest.mark.parametrize("pair", [".lowercase=true", "sacrebleu.=true", " .lowercase=true"])
def test_an_option_without_a_metric_or_option_name_is_a_format_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pair: str
) -> None:
    """``-O .lowercase=true`` was "ignored: vistkit has no metric ''" (a warning, and silence under -q) and
    ``-O sacrebleu.=true`` "sacrebleu has no option ''"; both are the METRIC.OPTION=VALUE format error."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    capsys.readouterr()
    code = main(["score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-O", pair])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("error: --option ") and "METRIC.OPTION=VALUE" in err, err


def test_score_only_says_which_items_its_numbers_leave_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-b`` printed the score of 2 of 3 stories (one had no reference) with no word of the third: the table's
    "1 item(s) excluded" note went nowhere, as a CSV's did before it went to stderr. It goes to stderr now."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    refs.write_text("".join(refs.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    for extra in ([], ["--per-item", str(tmp_path / "items.csv")]):
        capsys.readouterr()
        code = main(["score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-b", *extra])
        captured = capsys.readouterr()
        assert code == 0
        assert float(captured.out.strip()) > 0  # stdout holds only the number
        assert "sacrebleu: 1 item(s) excluded" in captured.err, captured.err


@pytest.mark.parametrize("misspelt", ["SacreBLEU", "sacre-bleu", "sacrebelu"])
def test_an_option_for_a_misspelt_run_metric_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], misspelt: str
) -> None:
    """``-m sacrebleu -O SacreBLEU.lowercase=true`` scored without lowercasing after a warning (nothing at all
    under -q), so the number silently differed from the one asked for; an option for a metric vistkit lacks that
    is one letter or case away from a metric being run is an error naming it. Unknown names far from every run
    metric still only warn (tests/test_input_safety.py)."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    capsys.readouterr()
    code = main(["-q", "score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-O", f"{misspelt}.lowercase=true"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == "", captured.out
    assert captured.err.strip().startswith(f"error: --option {misspelt}.lowercase") and (
        "did you mean sacrebleu.lowercase" in captured.err
    ), captured.err


def test_under_metrics_all_a_misspelt_metric_option_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-m all`` runs sacrebleu, so ``-O sacreblue.lowercase=true`` would change nothing there either."""
    from vistkit.commands.score import warn_unused_options
    from vistkit.errors import InputError

    with pytest.raises(InputError, match=r"did you mean sacrebleu\.lowercase\?"):
        warn_unused_options(["all"], {"sacreblue": {"lowercase": True}})
    warn_unused_options(["all"], {"nosuch": {"x": 1}})  # far from every metric: still a warning
    assert "vistkit has no metric 'nosuch'" in capsys.readouterr().err


# ------------------------------------------------------------------ a huge COLUMNS
def test_a_huge_terminal_width_does_not_pad_a_metric_card(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``metrics --info NAME`` padded every line of the card with spaces to the terminal width: COLUMNS=10000000
    wrote 180 MB and took 760 MB of memory for a 4 KB card (and every line ended in spaces at the usual 200).
    The card is drawn at most 200 columns wide, with no trailing spaces."""
    monkeypatch.setenv("COLUMNS", "10000000")
    capsys.readouterr()
    assert main(["metrics", "--info", "sacrebleu"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 20_000, len(out)
    assert all(line == line.rstrip() for line in out.splitlines())
    assert "Definition" in out


# ------------------------------------------------------------------ `> INPUT`: the shell emptied it already
@pytest.mark.parametrize("mode", ["w", "a"])
def test_stdout_onto_an_input_says_whether_the_shell_has_emptied_it(tmp_path: Path, mode: str) -> None:
    """``vistkit score refs.jsonl ... > refs.jsonl``: the shell empties the file before vistkit starts, yet the
    refusal said "writing there would destroy that input", as if it were still whole. After ``>`` (not ``>>``)
    the message now says the file is empty already and must be restored."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    env = {**os.environ, "VISTKIT_QUIET": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    with open(refs, mode) as fh:  # "w": what `>` does, "a": `>>`
        done = subprocess.run(
            [sys.executable, "-m", "vistkit", "score", str(hyp), "-r", str(refs), "-m", "sacrebleu"],
            stdout=fh, stderr=subprocess.PIPE, text=True, env=env, timeout=180,
        )  # fmt: skip
    assert done.returncode == 1
    err = done.stderr.strip()
    assert err.startswith("error: standard output goes to ") and "refs.jsonl" in err, err
    if mode == "w":
        assert "already emptied" in err and "would destroy" not in err, err
    else:
        assert "would destroy" in err and "emptied" not in err, err
        assert refs.stat().st_size > 0


# ------------------------------------------------------------------ a limit raised "to infinity"
@pytest.mark.parametrize(
    "name",
    ["VISTKIT_MAX_INPUT_MB", "VISTKIT_MAX_STORY_CHARS", "VISTKIT_MAX_STORIES", "VISTKIT_MAX_JSON_VALUES",
     "VISTKIT_MAX_PAIRS", "VISTKIT_MAX_CONTEXT_SENTENCES", "VISTKIT_MAX_NGRAM_WORDS"],
)  # fmt: skip
def test_a_limit_raised_past_what_a_machine_can_count_means_no_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """``VISTKIT_MAX_STORY_CHARS=99999999999999999999999`` (a user lifting the limit) stopped every read with
    "unexpected OverflowError: Python int too large to convert to C ssize_t - this is a bug"; a limit that large
    now means no practical limit."""
    hyp, refs = story_and_reference_files(tmp_path, n=3)
    monkeypatch.setenv(name, "9" * 23)
    capsys.readouterr()
    code = main(["score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-b"])
    captured = capsys.readouterr()
    assert code == 0 and float(captured.out) > 0, captured.err
