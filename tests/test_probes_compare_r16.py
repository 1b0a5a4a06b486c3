"""``compare``, ``distance`` and ``metrics`` on few, odd or self-referential inputs: p-values on a handful of
paired items, the whole-set note for BERTScore's idf, the references given as a system, stdin's name in
``distance``'s title, an empty metric name."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.cli_probe_helpers import one_error
from vistkit.data.readers import write_jsonl
from vistkit.data.story import Story

WORDS = "we went to the park and had a great time with our friends family dog cat beach sun cake party".split()


def systems_and_references(tmp_path: Path, n: int) -> tuple[Path, Path, Path]:
    """``(good, bad, refs)``: two systems over ``n`` photo sequences (one reference each), the first far closer to
    the references than the second."""
    rng = random.Random(0)
    refs, good, bad = [], [], []
    for i in range(n):
        photos = tuple(f"{i}{j}" for j in range(5))
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        refs.append(Story(f"r{i}", text, photo_ids=photos, system="human"))
        for stories, keep, name in ((good, 0.9, "good"), (bad, 0.3, "bad")):
            words = [w if rng.random() < keep else "x" for w in text.split()] + ["again"]  # never a reference
            stories.append(Story(f"{name}{i}", " ".join(words), photo_ids=photos, system=name))
    paths = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "refs.jsonl"
    for stories, path in zip((good, bad, refs), paths, strict=True):
        write_jsonl(stories, path)
    return paths


def compare(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[str, str]:
    """``vistkit ARGS`` in process (must succeed): (stdout, stderr)."""
    capsys.readouterr()
    from vistkit.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


# ----------------------------------------------------------------------------- p-values on few paired items
def test_a_comparison_on_few_paired_items_is_cautioned_under_the_table_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two photo sequences gave `**` (p = 1/(B+1)) with nothing to say that two items cannot carry a test (an exact
    sign test on 2 of 2 wins gives 0.5); the table now says which comparisons rest on fewer than 25 paired items
    and the JSON has `p_caution`, as `meta compare` has."""
    good, bad, refs = systems_and_references(tmp_path, 2)
    args = ["compare", bad, good, "-r", refs, "-m", "sacrebleu,rouge-l"]
    out, _ = compare(capsys, *args)
    assert "**" in out  # the marks stay: the note says what they are worth
    line = next(line for line in out.splitlines() if "fewer than 25 paired items" in line)
    assert "2 paired items" in line and "sign test" in line, out
    payload = json.loads(compare(capsys, *args, "-f", "json")[0])
    for metric in ("sacrebleu", "rouge-l"):
        row = payload["results"]["good"][metric]
        assert row["n_paired"] == 2 and "fewer than 25" in row["p_caution"] and "2 paired items" in row["p_caution"]
        assert "p_caution" not in payload["results"]["bad"][metric]  # the baseline is not tested
    _, err = compare(capsys, *args, "-f", "csv")
    assert "fewer than 25 paired items" in err  # a CSV's notes go to stderr
    out, _ = compare(capsys, *args, "-f", "latex")
    assert "fewer than 25 paired items" in out


def test_a_comparison_on_enough_paired_items_has_no_caution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad, refs = systems_and_references(tmp_path, 30)
    args = ["compare", bad, good, "-r", refs, "-m", "sacrebleu"]
    out, _ = compare(capsys, *args)
    assert "paired item" not in out
    payload = json.loads(compare(capsys, *args, "-f", "json")[0])
    assert "p_caution" not in payload["results"]["good"]["sacrebleu"]


def test_the_caution_names_only_the_comparisons_on_few_items() -> None:
    """Three systems on 30 items, one of them undefined on all but 3: only its test is named, with its count; the
    other's 30 paired items get no caution."""
    import math

    from vistkit.commands.compare import comparison_notes, comparison_payload
    from vistkit.metrics.base import mean_score
    from vistkit.scores import stats

    ids = [f"i{k}" for k in range(30)]
    values = {
        "base": [0.1 + k / 100 for k in range(30)],
        "good": [0.5 + k / 100 for k in range(30)],
        "sparse": [0.6, 0.7, 0.8] + [math.nan] * 27,
    }
    scores = {s: {"toy": mean_score("toy", ids, v, "toy|vistkit:0")} for s, v in values.items()}
    c = stats.compare_scores(scores, n_samples=200)  # type: ignore[arg-type]
    [line] = [line for line in comparison_notes(c) if "fewer than 25 paired items" in line]
    assert "toy: sparse (3)" in line and "good" not in line, line
    results = comparison_payload(c)["results"]
    assert "3 paired items" in results["sparse"]["toy"]["p_caution"] and "p_caution" not in results["good"]["toy"]


# ----------------------------------------------------------------------------- the whole-set note
@pytest.mark.models
def test_bertscore_with_idf_scored_again_on_the_shared_items_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note said "(idf weights)" for BERTScore (only CIDEr-D had its own words); it now says that idf=True takes
    the weights from the references of the items scored together."""
    pytest.importorskip("torch")
    good, bad, refs = systems_and_references(tmp_path, 6)
    few = tmp_path / "few.jsonl"
    few.write_text("".join(good.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    _, err = compare(capsys, "compare", bad, few, "-r", refs, "-m", "bertscore", "-O", "bertscore.idf=true")
    line = next(line for line in err.splitlines() if "scored again" in line)
    assert "bertscore" in line and "idf=True" in line and "references" in line, err


def test_every_metric_scored_again_has_its_own_reason() -> None:
    from vistkit.commands.compare import WHOLE_SET_NOTE
    from vistkit.engine.merge import WHOLE_SET_REASONS

    assert {"cider-d", "bertscore"} <= set(WHOLE_SET_NOTE)
    assert set(WHOLE_SET_REASONS) - {"sacrebleu"} <= set(WHOLE_SET_NOTE)  # sacreBLEU is never scored again


# ----------------------------------------------------------------------------- the references as a system
def test_the_references_given_as_a_system_are_noted_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare sys.jsonl refs.jsonl -r refs.jsonl` scored the references against themselves (sacreBLEU 100,
    ROUGE-L 1, `**`) without a word: a ceiling, not a system. A line under the table now says so (on stdout: an
    upper bound is a fair thing to show), and the JSON names the system; no warning."""
    good, bad, refs = systems_and_references(tmp_path, 30)
    copy = tmp_path / "human.jsonl"
    copy.write_text(refs.read_text(encoding="utf-8"), encoding="utf-8")
    for system in (refs, copy):
        out, err = compare(capsys, "compare", bad, system, "-r", refs, "-m", "sacrebleu,rouge-l")
        name = system.name.split(".")[0]
        line = next(line for line in out.splitlines() if "its own references" in line)
        assert name in line and "30 of its 30" in line and "--reference-absent" in line, out
        assert "warning" not in err.lower(), err
        payload = json.loads(compare(capsys, "compare", bad, system, "-r", refs, "-m", "sacrebleu", "-f", "json")[0])
        assert payload["own_references"] == {name: 30}
    # machine stories, and the references under --reference-absent (their own story is taken out): no note
    out, _ = compare(capsys, "compare", bad, good, "-r", refs, "-m", "rouge-l")
    assert "own references" not in out
    payload = json.loads(compare(capsys, "compare", bad, good, "-r", refs, "-m", "rouge-l", "-f", "json")[0])
    assert "own_references" not in payload


def test_machine_stories_filed_under_their_references_story_ids_are_not_taken_for_the_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keyed by story id, a machine story with its reference's id (no system named) is not its reference: only the
    references given as a system are noted."""
    from tests.cli_probe_helpers import story_and_reference_files

    hyp, refs = story_and_reference_files(tmp_path)
    out, _ = compare(capsys, "compare", refs, hyp, "-r", refs, "-m", "rouge-l")
    [line] = [line for line in out.splitlines() if "own references" in line]
    assert line.startswith("refs: 30 of its 30"), out


def test_a_system_that_copies_some_references_is_noted_with_its_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad, refs = systems_and_references(tmp_path, 30)
    lines = good.read_text(encoding="utf-8").splitlines(keepends=True)
    ref_lines = refs.read_text(encoding="utf-8").splitlines(keepends=True)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(ref_lines[:4] + lines[4:]), encoding="utf-8")
    out, _ = compare(capsys, "compare", bad, mixed, "-r", refs, "-m", "rouge-l")
    line = next(line for line in out.splitlines() if "own references" in line)
    assert "4 of its 30" in line, out


# ----------------------------------------------------------------------------- distance: stdin's name
def test_distance_names_standard_input_stdin_in_its_title(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`distance --human-stories -` titled the table "dHM: - vs m.jsonl"; compare calls standard input "stdin"."""
    import io
    import sys

    rng = random.Random(1)

    def story() -> str:
        return " ".join(" ".join(rng.choice(WORDS) for _ in range(6)).capitalize() + " ." for _ in range(5))

    human = "".join(json.dumps({"story_id": f"s{i}", "text": story()}) + "\n" for i in range(4))
    model = tmp_path / "m.jsonl"
    model.write_text("".join(json.dumps({"story_id": f"s{i}", "text": story()}) + "\n" for i in range(4)))
    args = ["distance", "--dimensions", "R", "-q"]
    for human_file, model_file in (("-", model), (model, "-")):
        sides = ["--human-stories", human_file, "--model-stories", model_file]
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(human.encode()), encoding="utf-8"))
        out, _ = compare(capsys, *args, *sides)
        assert "stdin" in out and "- vs" not in out and "vs -" not in out, out


# ----------------------------------------------------------------------------- metrics --info ''
@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_metric_name_is_called_empty(capsys: pytest.CaptureFixture[str], blank: str) -> None:
    for args in (["metrics", "--info", blank], ["metrics", blank]):
        err = one_error(capsys, *args)
        assert "empty" in err and "unknown metric" not in err and "`vistkit metrics`" in err, err


@pytest.mark.parametrize("names", ["bleu-4,rouge-l", "bleu-4, cider-d", "bleu-4,"])
def test_several_metric_names_for_one_card_are_refused_saying_a_card_is_one_metric(
    capsys: pytest.CaptureFixture[str], names: str
) -> None:
    """`metrics --info bleu-4,rouge-l` answered "unknown metric 'bleu-4,rouge-l' (did you mean bleu-4, rouge-l?)",
    which reads as two guesses; a card is one metric's, and the message now says so."""
    for args in (["metrics", "--info", names], ["metrics", names]):
        err = one_error(capsys, *args)
        assert "one metric" in err and "bleu-4" in err and "unknown metric" not in err, err


# ----------------------------------------------------------------------------- distance: one id, two stories
@pytest.mark.parametrize("side", ["--human-stories", "--model-stories"])
def test_distance_refuses_two_stories_under_one_id_naming_the_side_not_a_key_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str
) -> None:
    """A story file with two stories under one id was refused as "a hypothesis file must hold one story per key
    (choose another --key?)": distance has no --key and matches stories by id. The message now names the option
    and the id, before any metric is built."""
    rows = [{"story_id": f"s{i}", "text": f"We went to the park {i} . It was fun ."} for i in range(3)]
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {**rows[1], "text": "Another one ."}]))
    files = {"--human-stories": good, "--model-stories": good, side: dup}
    err = one_error(capsys, "distance", *[x for kv in files.items() for x in kv], "--dimensions", "R")
    assert side in err and "'s1'" in err and "--key" not in err and "hypothesis" not in err, err


# ----------------------------------------------------------------------------- compare --baseline FILE
def test_a_baseline_given_as_its_file_is_refused_naming_the_system_name_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--baseline runs/b.jsonl` (the file, not the name the table gives it) said only "is not one of the systems";
    it now says which name that file's system has."""
    good, bad, refs = systems_and_references(tmp_path, 3)
    monkeypatch.chdir(tmp_path)
    for given in (str(bad), "bad.jsonl", "./bad.jsonl"):
        err = one_error(capsys, "compare", good, "bad.jsonl", "-r", refs, "-m", "rouge-l", "--baseline", given)
        assert "--baseline bad" in err and "file" in err, err
    err = one_error(capsys, "compare", good, bad, "-r", refs, "-m", "rouge-l", "--baseline", "nosuch")
    assert "is not one of the systems: good, bad" in err, err


# ----------------------------------------------------------------------------- file names as system names
@pytest.mark.parametrize("name", ["new\nline", "tab\there", "bell\a", "zero\u200bwidth"])
def test_a_system_named_after_a_file_with_an_invisible_character_gets_a_visible_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A file named `new<newline>line.jsonl` became a system name that broke its table row and the note lines under
    the table in two (and `--name` refuses such a name); a file-derived name now shows the character escaped."""
    good, bad, refs = systems_and_references(tmp_path, 3)
    odd = tmp_path / f"{name}.jsonl"
    odd.write_bytes(good.read_bytes())
    payload = json.loads(compare(capsys, "compare", bad, odd, "-r", refs, "-m", "rouge-l", "-f", "json")[0])
    shown = payload["systems"][1]
    assert shown.isprintable() and shown == repr(name)[1:-1], shown
    out, _ = compare(capsys, "compare", bad, odd, "-r", refs, "-m", "rouge-l", "--baseline", shown)
    assert f"{shown} (baseline)" in out
