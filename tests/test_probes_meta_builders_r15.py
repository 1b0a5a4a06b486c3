"""Probes, round 15 (second wave): meta-evaluation builders with odd inputs.

- Every synthetic error of `vistkit.meta.perturb` crashed (``randrange(0)``, ``IndexError``) or returned an empty
  "worse" story for a story with no sentences; an empty sentence pool, an unknown kind and a count below one
  crashed with Python's words. Each is now refused with a sentence saying what to do; stories with sentences are
  perturbed exactly as before (the ranker scripts rely on the seeded outputs).
- `meta correlate --key sequence` (and `meta pairs`) signed a reference-free metric ``key:story``, the key of the
  internal per-story call, not the key used.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from meta_dummies import dummy_metrics_registered, run_vistkit

from vistkit.errors import InputError
from vistkit.meta import perturb as P

POOL = ["the dog ran to the park and played with a ball .", "we ate cake .", "it rained all day long ."]
STORY = [
    "we went to the beach on a sunny day with the whole family .",
    "the kids built a big sand castle near the water .",
    "dad fell asleep under the umbrella .",
]


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


# ------------------------------------------------------------------------------- a story with no sentences
@pytest.mark.parametrize("kind", sorted(P.PERTURBATIONS))
def test_a_story_with_no_sentences_is_refused_by_every_perturbation(kind: str) -> None:
    rng = random.Random(1)
    state = rng.getstate()
    with pytest.raises(InputError, match="no sentences"):
        P.perturb([], kind, rng=rng, pool=POOL)
    with pytest.raises(InputError, match="no sentences"):
        P.PERTURBATIONS[kind]([], rng, POOL)
    assert rng.getstate() == state  # refused before drawing: the seeded stream of the next stories is unchanged


def test_the_story_generators_refuse_a_story_with_no_sentences() -> None:
    bland = P.BlandRewriter(POOL, stop=frozenset({"the", "a", "we", "to", "and", "with", "it", "all"}))
    trigram = P.TrigramStoryGenerator(POOL)
    for make in (lambda r: bland([], r), lambda r: bland.on_topic([], r), lambda r: trigram([], r)):
        with pytest.raises(InputError, match="no sentences"):
            make(random.Random(0))


@pytest.mark.parametrize("kind", ["substitute", "merge"])
def test_an_empty_sentence_pool_is_refused_where_one_is_drawn_from(kind: str) -> None:
    with pytest.raises(InputError, match="pool"):
        P.perturb(STORY, kind, rng=random.Random(0), pool=[])


def test_an_unknown_kind_names_the_kinds() -> None:
    with pytest.raises(InputError, match="repeat-sentence"):
        P.perturb(STORY, "repeat", rng=random.Random(0), pool=POOL)


@pytest.mark.parametrize("kind", ["repeat-sentence", "substitute", "generic"])
@pytest.mark.parametrize("times", [0, -1])
def test_a_count_below_one_is_refused(kind: str, times: int) -> None:
    with pytest.raises(InputError, match="times"):
        P.PERTURBATIONS[kind](list(STORY), random.Random(0), POOL, times=times)


@pytest.mark.parametrize("temperature", [0.0, -0.5, float("nan")])
def test_a_trigram_temperature_that_is_not_positive_is_refused(temperature: float) -> None:
    with pytest.raises(InputError, match="temperature"):
        P.TrigramStoryGenerator(POOL)(list(STORY), random.Random(0), temperature=temperature)


@pytest.mark.parametrize("kind", sorted(P.PERTURBATIONS))
@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_story_with_sentences_is_still_perturbed_the_same_way(kind: str, n: int) -> None:
    """Seeded outputs pinned (the training and evaluation scripts of the ranker depend on them)."""
    one = P.perturb(STORY[:n], kind, rng=random.Random(3), pool=POOL)
    two = P.perturb(STORY[:n], kind, rng=random.Random(3), pool=POOL)
    assert one == two and one


# ------------------------------------------------------------------------------- signatures name the key used
def _likert(path: Path) -> Path:
    rows = ["system,item,worker,focused,text"]
    for i, seq in enumerate(["1-2-3", "4-5-6", "7-8-9"]):
        rows.append(f"human,{seq},w1,{5 - i},{' '.join(['w'] * (6 - i))}")
        rows.append(f"m1,{seq},w1,{2 - i % 2},{' '.join(['w'] * (3 + i))}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("key", ["sequence", "story"])
def test_correlate_signs_a_reference_free_metric_with_the_key_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    code, out, err = run_vistkit(
        capsys, "meta", "correlate", _likert(tmp_path / "l.csv"), "-m", "meta-test-length", "--key", key,
        "--bootstrap", "10", "-f", "json",
    )
    assert code == 0, err

    sig = json.loads(out)["signatures"]["meta-test-length"]
    assert f"|key:{key}" in sig, sig


# ------------------------------------------------------------------------------------------------- build-pairs
def _refs(tmp_path: Path) -> Path:
    """Four human stories of two albums, two photo sequences each."""
    rows = [
        ("h1", "a1", "1-2-3", "we went to the park . the kids ran . it was fun ."),
        ("h2", "a1", "4-5-6", "my dog is old . he still plays . we love him ."),
        ("h3", "a2", "7-8-9", "the city was busy . we ate noodles . the lights were bright ."),
        ("h4", "a2", "7-8-9", "a trip downtown . food everywhere . so many lights ."),
    ]
    path = tmp_path / "refs.jsonl"
    path.write_text(
        "".join(
            json.dumps({"story_id": s, "album_id": a, "photo_ids": p, "text": t}) + "\n" for s, a, p, t in rows
        ),
        encoding="utf-8",
    )
    return path


def test_build_pairs_refuses_a_machine_file_that_holds_the_references_themselves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of several fields given without :FIELD (PR_VIST.json.zip for PR_VIST.json.zip:predicted_story) set
    every human story against itself, labelled "the human story is better", without a word."""
    refs, out = _refs(tmp_path), tmp_path / "p.csv"
    code, _, err = run_vistkit(capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={refs}", "-o", out)
    assert code == 1 and "same text" in err and ":FIELD" in err, err
    assert not out.exists()


def test_build_pairs_warns_about_machine_stories_that_copy_their_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs, out = _refs(tmp_path), tmp_path / "p.csv"
    machine = tmp_path / "m.jsonl"
    machine.write_text(
        json.dumps({"story_id": "h1", "text": "we went to the park . the kids ran . it was fun ."}) + "\n"
        + json.dumps({"story_id": "h2", "text": "a dog . a ball . a nap ."}) + "\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={machine}", "-o", out)
    assert code == 0, err
    assert "1 of 2 pairs" in err and "same text" in err, err


def test_build_pairs_says_how_many_machine_stories_found_no_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs, out = _refs(tmp_path), tmp_path / "p.csv"
    machine = tmp_path / "m.jsonl"
    machine.write_text(
        "".join(json.dumps({"story_id": s, "text": f"story {s} . it was fine ."}) + "\n" for s in ("h1", "x2", "x3")),
        encoding="utf-8",
    )
    code, out_text, err = run_vistkit(capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={machine}", "-o", out)
    assert code == 0, err
    assert "wrote 1 pairs" in out_text or "wrote 1 pair" in out_text
    assert "2 of 3 machine stories" in err and "no pair" in err, err


def test_build_pairs_refuses_an_album_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """By album, a machine story was set against human stories of other photos of the album, and written with
    their photo sequence."""
    refs, out = _refs(tmp_path), tmp_path / "p.csv"
    machine = tmp_path / "m.jsonl"
    machine.write_text(
        json.dumps({"story_id": "m1", "album_id": "a1", "photo_ids": "1-2-3", "text": "a park . kids . fun ."}) + "\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(
        capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={machine}", "-k", "m=album", "-o", out
    )
    assert code == 1 and "story or sequence, not album" in err and "--key m=story or m=sequence" in err, err
    assert not out.exists()


def test_correlate_by_album_with_a_reference_based_metric_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was "pairs can be keyed by story or sequence, not album" in a command without pairs, and no fix."""
    refs = _refs(tmp_path)
    rows = ["system,item,worker,focused,text"]
    for i, album in enumerate(["a1", "a2", "a3"]):
        rows += [f"human,{album},w1,{5 - i},one two three", f"m1,{album},w1,{1 + i},four five"]
    table = tmp_path / "l.csv"
    table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, _, err = run_vistkit(
        capsys, "meta", "correlate", table, "-m", "meta-test-overlap", "-r", refs, "--key", "album", "--bootstrap", "10"
    )
    assert code == 1 and "not by album" in err and "--key story or --key sequence" in err, err


# ------------------------------------------------------------------------------------------- rankings-to-pairs
RANKINGS = "task,worker,story,rank,text,system,img_seq\n"


def test_rankings_of_stories_of_other_photos_in_one_task_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pair took the first story's img_seq: the second story was scored against references of photos it was
    not written for."""
    table, out = tmp_path / "r.csv", tmp_path / "p.csv"
    rows = [f"t1,{w},a,1,we went to the park .,human,1-2-3\nt1,{w},b,2,the beach was cold .,m1,4-5-6\n" for w in "xy"]
    table.write_text(RANKINGS + "".join(rows), encoding="utf-8")
    code, _, err = run_vistkit(capsys, "meta", "rankings-to-pairs", table, "-o", out)
    assert code == 1 and "img_seq" in err and "'a'" in err and "'b'" in err, err
    assert not out.exists()


def test_a_story_given_other_photos_on_another_row_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The img_seq of a story's first row was kept without a word, as its text was before round 11."""
    table, out = tmp_path / "r.csv", tmp_path / "p.csv"
    table.write_text(
        RANKINGS
        + "t1,x,a,1,we went to the park .,human,1-2-3\nt1,x,b,2,the beach was cold .,m1,1-2-3\n"
        + "t1,y,a,1,we went to the park .,human,1-2-4\nt1,y,b,2,the beach was cold .,m1,1-2-3\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "rankings-to-pairs", table, "-o", out)
    assert code == 1 and "different img_seq than on line 2" in err, err


def test_rankings_of_one_photo_sequence_still_build_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table, out = tmp_path / "r.csv", tmp_path / "p.csv"
    table.write_text(
        RANKINGS
        + "t1,x,a,1,we went to the park .,human,1-2-3\nt1,x,b,2,the beach was cold .,m1,\n"
        + "t1,y,a,1,we went to the park .,human,\nt1,y,b,2,the beach was cold .,m1,1-2-3\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "rankings-to-pairs", table, "-o", out)
    assert code == 0, err
    assert ",1-2-3," in out.read_text(encoding="utf-8")


def test_build_pairs_warns_about_empty_machine_stories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refs, out = _refs(tmp_path), tmp_path / "p.csv"
    machine = tmp_path / "m.jsonl"
    machine.write_text(
        json.dumps({"story_id": "h1", "text": ""}) + "\n" + json.dumps({"story_id": "h2", "text": "a dog ."}) + "\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={machine}", "-o", out)
    assert code == 0, err
    assert "1 of 2 machine stories are empty" in err, err


@pytest.mark.parametrize("corpus", [[], ["", "   "]], ids=["none", "blank"])
def test_a_trigram_model_of_no_words_is_refused(corpus: list[str]) -> None:
    """It wrote stories of lone periods (". . .") without a word."""
    with pytest.raises(InputError, match="no words"):
        P.TrigramStoryGenerator(corpus)
