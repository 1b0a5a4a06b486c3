"""Regressions found in session 15's probe round (score / compare, their options, the Python API): each test
failed on the code before."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vistkit.data.story import Story, StorySet


# ------------------------------------------------------------------ compare: head to head on identical stories
def _score(metric: str, values: dict[str, float]) -> Any:
    from vistkit.data.story import Keying
    from vistkit.metrics.base import mean_score

    return mean_score(metric, list(values), list(values.values()), f"{metric}|test", keying=Keying.STORY)


@pytest.mark.parametrize("name", ["coherence", "rovist-nr", "lm-perplexity"])
def test_identical_stories_of_two_systems_are_a_tie_in_the_head_to_head(name: str) -> None:
    """Two systems with the same story for an item: a model metric may score it a few float32 bits apart (the
    batch it shares differs), and the head to head counted it as a win or a loss instead of a tie (coherence on 120
    GLACNet stories, 60 of them identical: ties 49.2%, not 50%). The same story is a tie whatever the bits."""
    from vistkit.commands.compare import head_to_head
    from vistkit.metrics.base import get_metric_class

    metric = object.__new__(get_metric_class(name))  # only its name and direction are read
    texts = {"a": "we went to the park . it was fun .", "b": "the dog ran . it was fast .", "c": "we ate . it rained ."}
    base = StorySet([Story(story_id=k, text=t) for k, t in texts.items()])
    changed = {**texts, "c": "a new story . it differs ."}
    other = StorySet([Story(story_id=k, text=t) for k, t in changed.items()])
    scores = {
        "base": {name: _score(name, {"a": 0.6660938411951065, "b": 0.5, "c": 0.4})},
        "sys": {name: _score(name, {"a": 0.6660938486456871, "b": 0.5 - 1e-12, "c": 0.9})},
    }
    h2h = head_to_head([metric], scores, {"base": base, "sys": other}, baseline="base", n_bootstrap=50)
    result = h2h[name]["sys"]
    assert result["n"] == 3
    assert math.isclose(result["ties"], 2 / 3), result  # a and b are the same story in both systems
    won = 1 / 3 if metric.higher_is_better else 0.0
    assert math.isclose(result["share"], won) and math.isclose(result["losses"], 1 / 3 - won), result


def test_identical_stories_undefined_for_both_systems_stay_out_of_the_head_to_head() -> None:
    """An identical story that the metric leaves undefined (NaN for both) is still left out, not a tie."""
    from vistkit.commands.compare import head_to_head
    from vistkit.metrics.base import get_metric_class

    metric = object.__new__(get_metric_class("rovist-nr"))
    stories = StorySet([Story(story_id="a", text="one sentence"), Story(story_id="b", text="two . sentences .")])
    scores = {
        "base": {"rovist-nr": _score("rovist-nr", {"a": math.nan, "b": 0.5})},
        "sys": {"rovist-nr": _score("rovist-nr", {"a": math.nan, "b": 0.5 + 1e-9})},
    }
    result = head_to_head([metric], scores, {"base": stories, "sys": stories}, baseline="base", n_bootstrap=50)
    assert result["rovist-nr"]["sys"]["n"] == 1 and result["rovist-nr"]["sys"]["ties"] == 1.0
    assert np.isfinite(result["rovist-nr"]["sys"]["ci"]).all()


# ------------------------------------------------------------------ a shared flag and a metric option that disagree
@pytest.mark.parametrize(
    ("metric", "args", "words"),
    [
        ("meteor-vist", ["--drop-non-ascii", "-O", "meteor-vist.drop_non_ascii=false"], ["--drop-non-ascii"]),
        ("meteor-vist", ["-O", "meteor-vist.drop-non-ascii=no", "--drop-non-ascii"], ["--drop-non-ascii"]),
        ("groovist", ["--images", "photos", "-O", "groovist.images=other"], ["--images photos"]),
        ("clipscore", ["--photos", "map.json", "-O", "clipscore.photos=other.json"], ["--photos map.json"]),
    ],
)
def test_a_shared_flag_and_a_metric_option_that_disagree_are_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    metric: str,
    args: list[str],
    words: list[str],
) -> None:
    """``--drop-non-ascii -O meteor-vist.drop_non_ascii=false`` scored without dropping, in silence (the metric
    option won); two values given for one setting are refused before anything is built, naming both."""
    from cli_probe_helpers import forbid_building, one_error, story_and_reference_files

    from vistkit.metrics.base import get_metric_class

    hyp, refs = story_and_reference_files(tmp_path, n=3)
    forbid_building(monkeypatch, [metric])
    monkeypatch.chdir(tmp_path)
    with_refs = ["-r", refs] if get_metric_class(metric).needs_references else []
    line = one_error(capsys, "score", hyp, *with_refs, "-m", metric, *args)
    option = next(a for a in args if a.startswith(f"{metric}.")).split("=")[0].split(".")[1].replace("-", "_")
    for word in [*words, f"--option {metric}.{option}=", "give one"]:
        assert word in line, line


def test_a_shared_flag_and_a_metric_option_that_agree_score_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same value given both ways is no conflict."""
    from cli_probe_helpers import run_cli, story_and_reference_files

    hyp, refs = story_and_reference_files(tmp_path, n=3)
    code, err = run_cli(
        capsys, "score", hyp, "-r", refs, "-m", "rovist-nr", "--drop-non-ascii", "-O", "rovist-nr.sentences=split"
    )
    assert code == 0, err


# ------------------------------------------------------------------ references that no metric of the run reads
@pytest.mark.parametrize("verb", ["score", "compare"])
@pytest.mark.parametrize(
    ("extra", "flags"),
    [([], "--references is"), (["--reference-absent"], "--references and --reference-absent are")],
)
def test_references_no_metric_reads_are_said_to_be_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, extra: list[str], flags: str
) -> None:
    """``-r refs.jsonl -m rovist-nr`` (a reference-free metric) read the references and scored without them in
    silence, so the table looked like a comparison with them; a warning says they are ignored, and why."""
    from cli_probe_helpers import run_cli, story_and_reference_files

    hyp, refs = story_and_reference_files(tmp_path, n=3)
    systems = [hyp, hyp] if verb == "compare" else [hyp]
    code, err = run_cli(capsys, verb, *systems, "-r", refs, "-m", "rovist-nr", *extra)
    assert code == 0, err
    said = [ln for ln in err.splitlines() if ln.startswith("warning:") and "--reference" in ln]
    assert len(said) == 1 and flags in said[0] and "rovist-nr" in said[0], err


def test_references_read_by_one_metric_of_the_run_draw_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with one reference-based metric uses them: no warning."""
    from cli_probe_helpers import run_cli, story_and_reference_files

    hyp, refs = story_and_reference_files(tmp_path, n=3)
    rows = [{**json.loads(line), "system": "model"} for line in hyp.read_text(encoding="utf-8").splitlines()]
    hyp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # not the human stories
    code, err = run_cli(capsys, "score", hyp, "-r", refs, "-m", "rovist-nr,sacrebleu", "--reference-absent")
    assert code == 0, err
    assert "--reference" not in err, err


def test_reference_absent_without_references_is_said_to_be_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--reference-absent`` with a reference-free metric and no references was ignored in silence."""
    from cli_probe_helpers import run_cli, story_and_reference_files

    hyp, _ = story_and_reference_files(tmp_path, n=3)
    code, err = run_cli(capsys, "score", hyp, "-m", "rovist-nr", "--reference-absent")
    assert code == 0, err
    said = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(said) == 1 and "--reference-absent is ignored" in said[0], err


# ------------------------------------------------------------------ --reference-absent that leaves no reference
def test_reference_absent_leaving_no_reference_says_why_not_letter_case() -> None:
    """Machine stories under the references' own story ids (no system named) are taken for the human stories
    themselves under reference_absent, so every item lost its only reference; the error then said the keys
    "differ only in letter case (e.g. '1' and '1')". It now says why the references were removed and what to do."""
    import vistkit
    from vistkit.errors import InputError

    hyps = StorySet([Story(story_id=str(i), text=f"a machine story {i} . it is new .") for i in range(3)])
    refs = StorySet([Story(story_id=str(i), text=f"the human story {i} . it was fun .") for i in range(3)])
    with pytest.raises(InputError) as caught:
        vistkit.score("sacrebleu", hyps, refs, reference_absent=True)
    message = str(caught.value)
    assert "letter case" not in message, message
    assert "same story id" in message and "system" in message and "reference_absent" in message, message


def test_keys_that_differ_in_letter_case_are_still_named() -> None:
    """The letter-case hint stays for keys that really differ only in case."""
    import vistkit
    from vistkit.errors import InputError

    hyps = StorySet([Story(story_id=f"S{i}", text=f"a story {i} . it is new .") for i in range(3)])
    refs = StorySet([Story(story_id=f"s{i}", text=f"the story {i} . it was fun .") for i in range(3)])
    with pytest.raises(InputError, match=r"letter case \(e\.g\. 'S0' and 's0'\)"):
        vistkit.score("sacrebleu", hyps, refs)


# ------------------------------------------------------------------ vistkit metrics NAME
def test_metrics_with_a_name_shows_its_card_as_info_does(capsys: pytest.CaptureFixture[str]) -> None:
    """``vistkit metrics bleu-4`` (what the verb's help suggests: list metrics, or show one card) said only "Got
    unexpected extra argument(s) (bleu-4)"; the name shows the card, exactly as ``--info bleu-4``."""
    from vistkit.cli import main

    capsys.readouterr()
    assert main(["metrics", "--info", "bleu-4", "-f", "json"]) == 0
    by_option = capsys.readouterr().out
    assert main(["metrics", "bleu-4", "-f", "json"]) == 0
    assert capsys.readouterr().out == by_option
    assert main(["metrics", "BLEU4"]) == 1
    assert "did you mean bleu-4?" in capsys.readouterr().err


def test_metrics_with_a_name_and_info_is_one_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from cli_probe_helpers import one_error

    line = one_error(capsys, "metrics", "bleu-4", "--info", "sacrebleu", code=2)
    assert "bleu-4" in line and "--info sacrebleu" in line and "one" in line, line



# ------------------------------------------------------------------ --address given empty
def test_an_empty_ray_address_names_every_form_it_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--address "$HEAD"`` with HEAD unset said "--address must be auto or ray://HOST:PORT", leaving out HOST:PORT,
    the form `ray start --head` prints."""
    pytest.importorskip("ray")
    from cli_probe_helpers import one_error, story_and_reference_files

    hyp, _ = story_and_reference_files(tmp_path, n=3)
    line = one_error(capsys, "score", hyp, "-m", "rovist-nr", "--engine", "ray", "--address", " ")
    assert "auto, HOST:PORT or ray://HOST:PORT" in line and "' '" in line, line


# ------------------------------------------------------------------ compare: names of files that share a stem
def test_files_of_one_folder_sharing_a_stem_are_named_by_their_whole_names(tmp_path: Path) -> None:
    """``compare glacnet.beam3.json glacnet.beam5.json`` named the systems ``tmp/.../glacnet`` and
    ``tmp/.../glacnet-2`` (every parent folder, then the counter of a file given twice), so the table did not say
    which run was which; they are ``glacnet.beam3`` and ``glacnet.beam5``."""
    from vistkit.commands.compare import system_names

    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    paths = [tmp_path / "glacnet.beam3.json", tmp_path / "glacnet.beam5.json", tmp_path / "arel.json"]
    assert system_names(paths, []) == ["glacnet.beam3", "glacnet.beam5", "arel"]
    # one name in two folders, beside another: the folders tell them apart
    paths = [tmp_path / "d1" / "run.v1.jsonl", tmp_path / "d2" / "run.v1.jsonl", tmp_path / "d1" / "run.v2.jsonl"]
    assert system_names(paths, []) == ["d1/run.v1", "d2/run.v1", "run.v2"]
    # names that differ only in their format's extension
    paths = [tmp_path / "out.json", tmp_path / "out.jsonl", tmp_path / "out.csv.gz"]
    assert system_names(paths, []) == ["out.json", "out.jsonl", "out.csv.gz"]
    assert system_names([paths[0], paths[0]], []) == ["out", "out-2"]  # a file given twice keeps its counter
