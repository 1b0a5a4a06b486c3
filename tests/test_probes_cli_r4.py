"""Fourth CLI probe round: a mistake is reported before any slow work starts.

`vistkit score ours.json -m story-ranker -r missing.json` loaded the metric's models (seconds to minutes) and only
then read ``-r``. Every verb now checks what is cheap to check (input files read and parsed, outputs writable,
option values, ``-O`` metric options, keys shared with the references) before it builds a metric, starts Java or
a Ray cluster. Each test here makes building any of the slow metrics (and opening any engine) fail the test, and
runs the verb in process with one mistake: the exit code and the one sentence prove the order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_probe_helpers import META, forbid_building, one_error, run_cli, write_stories

from vistkit.metrics.base import get_metric_class

SLOW = ("story-ranker", "lm-fluency", "bertscore", "meteor-vist", "groovist", "dhm-c", "rovist-nr", "coherence")


@pytest.fixture
def forbid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a slow metric or opening an engine fails the test."""
    forbid_building(monkeypatch, SLOW)


@pytest.fixture
def hyps(tmp_path: Path) -> Path:
    return write_stories(tmp_path / "hyps.jsonl")


@pytest.fixture
def refs(tmp_path: Path) -> Path:
    return write_stories(tmp_path / "refs.jsonl")


# ---------------------------------------------------------------------------------------------- score
def test_score_missing_or_malformed_references_before_the_model(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "missing.json: no such file" in one_error(
        capsys, "score", hyps, "-m", "story-ranker", "-r", tmp_path / "missing.json"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    assert "invalid JSON" in one_error(capsys, "score", hyps, "-m", "story-ranker", "-r", bad)
    assert "no such file" in one_error(capsys, "score", tmp_path / "nope.jsonl", "-m", "story-ranker")
    assert "no such file" in one_error(capsys, "score", hyps, "-m", "meteor-vist", "-r", hyps, "--template",
                                    tmp_path / "missing.txt")  # fmt: skip


def test_score_bad_outputs_before_the_model(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error(capsys, "score", hyps, "-m", "lm-fluency", "--per-item", tmp_path / "no" / "where.csv")
    assert "does not exist" in err and not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("metric", "option", "words"),
    [
        ("lm-fluency", "lm-fluency.precision=fp8", "lm-fluency: precision must be one of fp32, bf16"),
        ("lm-fluency", "lm-fluency.batch_tokens=0", "batch_tokens must be a whole number from 1"),
        ("lm-fluency", "lm-fluency.device=gpu9", "device 'gpu9' is not one vistkit runs on"),
        ("lm-fluency", "lm-fluency.lm=/no/such/lm", "is neither the packaged LM"),
        ("lm-fluency", "lm-fluency.sentences=xx", "sentences must be 'split' or 'source'"),
        ("story-ranker", "story-ranker.batch_tokens=-3", "batch_tokens must be a whole number from 1"),
        ("bertscore", "bertscore.batch_size=0", "bertscore: batch_size must be from 1 to 65,536"),
        ("bertscore", "bertscore.num_threads=0", "bertscore: num_threads must be from 1"),
        ("bertscore", "bertscore.layer=-1", "bertscore: layer must be from 0 or more (got -1)"),
        ("bertscore", "bertscore.layer=99", "bertscore: layer must be between 0 and 6 for minilm-l6 (got 99)"),
        ("bertscore", "bertscore.model=/no/such/model", "is neither a local path"),
        ("bertscore", "bertscore.precision=tf32", "bertscore: precision must be one of fp32, tf32x3, bf16"),
        ("meteor-vist", "meteor-vist.nope=1", "meteor-vist has no option 'nope'"),
    ],
)
def test_score_bad_metric_option_before_the_model(
    forbid: None, hyps: Path, refs: Path, metric: str, option: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert words in one_error(capsys, "score", hyps, "-m", metric, "-r", refs, "-O", option)


def test_every_metric_option_is_checked_before_the_first_metric_is_built(
    forbid: None, hyps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error(capsys, "score", hyps, "-m", "story-ranker,rovist-nr", "-O", "rovist-nr.nope=1")
    assert "rovist-nr has no option 'nope'" in err


def test_score_keys_not_shared_with_the_references_before_the_model(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = write_stories(tmp_path / "other.jsonl", prefix="x")
    err = one_error(capsys, "score", hyps, "-m", "meteor-vist,bertscore", "-r", other, "--key", "story")
    assert "no hypothesis shares a story key with the references" in err
    err = one_error(capsys, "score", hyps, "-m", "bertscore")
    assert "bertscore needs reference stories" in err


def test_score_unknown_engine_before_anything(forbid: None, hyps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error(capsys, "score", hyps, "-m", "story-ranker", "--engine", "spark", code=2)
    assert "Invalid value for '--engine': use local or ray, not 'spark'" in err


def test_score_all_leaves_out_metrics_the_keys_rule_out_without_building_them(
    hyps: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-m all`` with references that share no key: every reference-based metric is skipped for that reason
    without being built (the planned ones go through `construct_all`, which this test records)."""
    import vistkit.commands.score as score_cmd

    built: list[str] = []
    monkeypatch.setattr(score_cmd, "construct_all", lambda plans, skipped, *, engine: built.extend(
        c.name for c, _ in plans) or [])  # fmt: skip
    monkeypatch.setattr(score_cmd, "score_all", lambda *a, **k: [])
    other = write_stories(tmp_path / "other.jsonl", prefix="x")
    code, err = run_cli(capsys, "score", hyps, "-m", "all", "-r", other, "--key", "story")
    assert code == 1 and "no metric could score" in err
    assert "meteor-vist" not in built and "bertscore" not in built and "skipped bertscore: no hypothesis" in err


# ---------------------------------------------------------------------------------------------- compare
def test_compare_reads_every_file_before_the_model(
    forbid: None, hyps: Path, refs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "no such file" in one_error(capsys, "compare", hyps, tmp_path / "two.jsonl", "-m", "story-ranker")
    assert "no such file" in one_error(capsys, "compare", hyps, hyps, "-m", "bertscore", "-r", tmp_path / "r.json")
    err = one_error(capsys, "compare", hyps, hyps, "-m", "bertscore", "-r", refs, "-O", "bertscore.batch_size=0")
    assert "batch_size must be from 1" in err
    other = write_stories(tmp_path / "other.jsonl", prefix="x")
    err = one_error(capsys, "compare", hyps, other, "-m", "meteor-vist", "-r", refs, "--key", "story")
    assert "no hypothesis shares a story key" in err


# ---------------------------------------------------------------------------------------------- distance
def test_distance_checks_files_metrics_and_options_before_any_model(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["distance", "--human-stories", hyps]
    assert "no such file" in one_error(capsys, *base, "--model-stories", tmp_path / "m.jsonl")
    err = one_error(capsys, *base, "--model-stories", hyps, "--c-metric", "bleu-4")  # G (groovist) comes first
    assert "bleu-4 needs reference stories, so it cannot score dHM's coherence dimension C" in err
    err = one_error(capsys, *base, "--model-stories", hyps, "--dimensions", "G,R", "-O", "rovist-nr.nope=1")
    assert "rovist-nr has no option 'nope'" in err
    other = write_stories(tmp_path / "other.jsonl", prefix="x")
    assert "share no story id" in one_error(capsys, *base, "--model-stories", other, "--dimensions", "R")
    assert "use local or ray" in one_error(capsys, *base, "--model-stories", hyps, "--engine", "spark", code=2)


# ---------------------------------------------------------------------------------------------- meta
def test_meta_checks_before_scoring(forbid: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs, likert = META / "vhed_small.csv", META / "likert_small.csv"
    err = one_error(capsys, "meta", "compare", pairs, "-m", "story-ranker")
    assert "compare needs at least two metrics" in err
    assert "'--kendall': use b or c" in one_error(capsys, "meta", "correlate", likert, "-m", "story-ranker",
                                                  "--kendall", "x", code=2)  # fmt: skip
    err = one_error(capsys, "meta", "pairs", pairs, "-m", "lm-fluency", "-O", "lm-fluency.batch_tokens=0")
    assert "batch_tokens must be a whole number" in err
    err = one_error(capsys, "meta", "correlate", likert, "-m", "story-ranker", "-r", tmp_path / "refs.jsonl")
    assert "no such file" in err
    err = one_error(capsys, "meta", "pairs", pairs, "-m", "story-ranker", "--engine", "spark", code=2)
    assert "use local or ray" in err


# ---------------------------------------------------------------------------------------------- usage errors
def test_a_value_click_refuses_is_one_sentence_with_exit_2(hyps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--bootstrap 0`` printed click's four-line Usage/Try/Error block while ``--kendall x`` of the same verb
    is one sentence: every refused value is one ``error:`` sentence now (exit 2 for what click refuses)."""
    err = one_error(capsys, "meta", "pairs", META / "vhed_small.csv", "-m", "story-ranker", "--bootstrap", "0",
                 code=2)  # fmt: skip
    assert "Invalid value for '--bootstrap' / '--n-bootstrap': must be from 1 to 1,000,000 resamples, got 0" in err
    assert "'--confidence': must be between 0 and 1" in one_error(capsys, "score", hyps, "-m", "x", "--confidence",
                                                                "2", code=2)  # fmt: skip
    assert "'xml' is not one of" in one_error(capsys, "score", hyps, "-m", "x", "-f", "xml", code=2)
    code, err = run_cli(capsys, "score", hyps)  # a missing option keeps the usage line
    assert code == 2 and "Usage: vistkit score" in err and "Missing option" in err


def test_check_inputs_is_what_score_refuses() -> None:
    """`Metric.check_inputs` (no model) raises what `Metric.score` raises for the same inputs."""
    from vistkit.data.story import Story, StorySet
    from vistkit.errors import InputError

    cls = get_metric_class("bleu-4")
    hyps = StorySet([Story("a", "one two three .")])
    refs = StorySet([Story("b", "one two three .")])
    with pytest.raises(InputError, match="needs reference stories"):
        cls.check_inputs(hyps, None)
    with pytest.raises(InputError, match="no hypothesis shares a story key") as early:
        cls.check_inputs(hyps, refs, key="story")
    with pytest.raises(InputError) as late:
        cls().score(hyps, refs, key="story")
    assert str(early.value) == str(late.value)
    assert [i.item_id for i in cls.check_inputs(hyps, StorySet([Story("a", "x y .")]), key="story").items] == ["a"]


# ---------------------------------------------------------------------------------------------- vrank
def test_vrank_device_encoder_and_model_before_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A device name vistkit does not know, an encoder or a model folder that names nothing: said before torch is
    imported (10-15 s on a loaded machine), not by the loaders after it."""
    import vistkit.models.vrank as vrank

    def loaded(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Vrank model was loaded or trained before the mistake was reported")

    monkeypatch.setattr(vrank, "train_vrank", loaded)
    monkeypatch.setattr(vrank, "load_vrank", loaded)
    pairs = META / "vhed_small.csv"
    err = one_error(capsys, "vrank", "train", pairs, "-o", tmp_path / "vr", "--device", "gpu9")
    assert "device 'gpu9' is not one vistkit runs on" in err
    err = one_error(capsys, "vrank", "train", pairs, "-o", tmp_path / "vr", "--encoder", tmp_path / "nothing")
    assert "the Vrank encoder" in err and "is not available offline" in err
    assert not (tmp_path / "vr").exists()
    assert "no Vrank model at" in one_error(capsys, "vrank", "predict", pairs, "--model", tmp_path / "nothing")
    err = one_error(capsys, "vrank", "predict", pairs, "--model", tmp_path, "--device", "tpu")
    assert "device 'tpu' is not one vistkit runs on" in err
