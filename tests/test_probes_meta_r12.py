"""Probes, round 12: `vistkit meta` statistics, inputs and `vrank train`.

- A system-level CI with one story per system was the point r twice ([0.0129, 0.0129] for 300 systems): resampling
  each system's stories cannot move a system mean made of one story, so the interval claimed certainty it does
  not have. Now the CI is n/a and a note says why.
- `vrank train --target normalised` on pairs that give neither order nor rank_norm regressed the raw gap while the
  model's settings said "normalised": now refused before any model loads.
- A pair whose two stories are the same text (no metric can order it, so it always counts as wrong) was read
  without a word: now one warning names the rows.
- A system, item or worker name typed two ways in Unicode (``résumé`` composed and decomposed) was two systems at
  system level, two workers or two machine systems in beats-ref; names are now matched as story ids are (NFC).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cli_probe_helpers import run_cli
from meta_dummies import dummy_metrics_registered

from vistkit.errors import InputError
from vistkit.meta.correlation import system_correlation_ci
from vistkit.meta.human import StoryPair, read_error_labels, read_likert, read_pairs, read_rankings

HEADER = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order"


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


# ------------------------------------------------------------------------------- system-level CI of singletons
@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall", "kendall_c"])
def test_a_system_level_ci_with_one_story_per_system_is_not_a_point(method: str) -> None:
    """Before: ci == [r, r] (every stratified resample is the original table). After: NaN with the reason; r and p
    are scipy's of the system means as before."""
    from scipy import stats

    systems = [f"s{i}" for i in range(6)]
    metric = np.array([1.0, 3.0, 2.0, 5.0, 4.0, 7.0])
    human = np.array([2.0, 1.0, 4.0, 3.0, 5.0, 6.0])
    out = system_correlation_ci(systems, metric, human, method=method, n_resamples=50)
    assert all(math.isnan(c) for c in out["ci"]), out
    assert "one story" in out["ci_undefined"]
    expected = {
        "pearson": stats.pearsonr(metric, human)[0],
        "spearman": stats.spearmanr(metric, human)[0],
        "kendall": stats.kendalltau(metric, human)[0],
        "kendall_c": stats.kendalltau(metric, human, variant="c")[0],
    }[method]
    assert out["r"] == pytest.approx(expected)


def test_a_system_level_ci_with_two_stories_somewhere_still_resamples() -> None:
    """One system with two stories is enough for the resamples to differ: the CI is an interval, as before."""
    systems = ["a", "b", "c", "d", "d"]
    out = system_correlation_ci(systems, [1.0, 2.0, 3.0, 4.0, 9.0], [1.0, 3.0, 2.0, 4.0, 1.0], n_resamples=200)
    assert "ci_undefined" not in out and out["ci"][0] < out["ci"][1]


def _run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr)."""
    from vistkit.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_correlate_says_why_a_system_ci_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table prints n/a for the CI, the note under it says why, and JSON carries the reason."""
    table = tmp_path / "l.csv"
    rows = [f"m{i},i1,{1 + i % 5},{' '.join(['w'] * (3 + (i * 7) % 11))} ." for i in range(8)]
    table.write_text("system,item,focused,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    args = ("meta", "correlate", table, "-m", "meta-test-length", "--bootstrap", "20", "--level", "system")
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    assert "n/a" in out and "no CI" in out and "every system has one story" in out, out
    code, out, err = _run(capsys, *args, "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert all(r["ci"] == [None, None] and "one story" in r["ci_undefined"] for r in data["correlations"])


# ------------------------------------------------------------------------------- vrank --target normalised
def _pair(gap: float, order: int | None = None, norm: float | None = None) -> StoryPair:
    return StoryPair("1", "s", ("1",), "a b .", "c d .", "m1", "m2", gap, n_stories=order, gap_norm=norm)


def test_vrank_normalised_target_without_n_is_refused_before_training(tmp_path: Path) -> None:
    """Before: the raw gap was regressed under target=normalised. After: one sentence, before torch runs."""
    from vistkit.models.vrank import VrankSettings, train_vrank

    with pytest.raises(InputError, match=r"--target normalised .* neither order nor rank_norm.*--target gap"):
        train_vrank([_pair(2.0)], tmp_path / "m", settings=VrankSettings(target="normalised"), encoder="nope")
    assert not (tmp_path / "m").exists()


def test_vrank_normalised_target_with_n_is_the_gap_over_n() -> None:
    from vistkit.models.vrank import pair_target

    assert pair_target(_pair(2.0, order=4), "normalised") == 0.5
    assert pair_target(_pair(-2.0, norm=0.4), "normalised") == -0.4
    assert pair_target(_pair(2.0), "gap") == 2.0


def test_vrank_train_cli_refuses_normalised_target_without_n(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = tmp_path / "p.csv"
    pairs.write_text("sent1,sent2,label\na b .,c d .,1\n", encoding="utf-8")
    code, err = run_cli(capsys, "vrank", "train", pairs, "-o", tmp_path / "m", "--target", "normalised",
                        "--label-sign", "comp-minus-base", "--encoder", "minilm-l6")  # fmt: skip
    assert code != 0 and "neither order nor rank_norm" in err, err
    assert "Traceback" not in err and not (tmp_path / "m").exists()


# ------------------------------------------------------------------------------- a story paired with itself
def test_a_pair_of_one_story_with_itself_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.csv"
    path.write_text(
        HEADER + "\n"
        "we went out .,we went out .,-1,s1,1-2,m1,m2,5,1,2,5\n"
        "we went out .,the dog ran .,-1,s1,1-2,m1,m3,5,1,2,5\n"
        '"we  went\nout .",we went out .,1,s1,1-2,m2,m1,5,2,1,5\n',
        encoding="utf-8",
    )
    capsys.readouterr()
    pairs = read_pairs(path)
    err = capsys.readouterr().err
    assert len(pairs) == 3
    assert "2 rows set a story against the same text" in err and "first: line 2" in err, err


def test_pairs_of_different_stories_give_no_such_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.csv"
    path.write_text(HEADER + "\nwe went out .,we went in .,-1,s1,1-2,m1,m2,5,1,2,5\n", encoding="utf-8")
    capsys.readouterr()
    read_pairs(path)
    assert "same text" not in capsys.readouterr().err


# ------------------------------------------------------------------------------- names typed two ways
NFC, NFD = unicodedata.normalize("NFC", "résumé"), unicodedata.normalize("NFD", "résumé")


def test_likert_names_typed_two_ways_are_one_system_and_story(tmp_path: Path) -> None:
    """Before: two systems 'résumé' (n_workers 1 each). After: one story rated by two workers."""
    path = tmp_path / "l.csv"
    path.write_text(f"system,item,worker,q\n{NFC},i1,w1,3\n{NFD},i1,w2,5\n", encoding="utf-8")
    table = read_likert(path)
    assert table.systems == [NFC] and table.n_workers.tolist() == [2] and table.values.tolist() == [[4.0]]


def test_likert_worker_typed_two_ways_is_one_worker(tmp_path: Path) -> None:
    path = tmp_path / "l.csv"
    path.write_text(f"system,item,worker,q\nm1,i1,{NFC},3\nm1,i1,{NFD},5\n", encoding="utf-8")
    with pytest.raises(InputError, match="a story a worker already judged"):
        read_likert(path)


def test_error_label_names_typed_two_ways_are_one_story(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(f"system,item,Gram\nm1,{NFC},1\nm1,{NFD},1\nm1,x,0\n", encoding="utf-8")
    table = read_error_labels(path)
    assert table.items == [NFC, "x"] and table.n_workers.tolist() == [2, 1]


def test_pair_systems_typed_two_ways_are_one_system(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text(
        HEADER + f"\na b .,c d .,-1,s1,1-2,human,{NFC},5,1,2,5\ne f .,g h .,1,s2,1-2,human,{NFD},5,2,1,5\n",
        encoding="utf-8",
    )
    from vistkit.meta.pairs import beats_reference

    pairs = read_pairs(path)
    assert {p.system_2 for p in pairs} == {NFC}
    assert beats_reference(None, pairs) == {NFC: {"wins": 1, "ties": 0, "n": 2, "ratio": 0.5, "tie_ratio": 0.0}}


def test_ranking_systems_typed_two_ways_are_one_system(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(
        f"task,worker,story,rank,system\nT,w1,A,1,{NFC}\nT,w1,B,2,m2\nT,w2,A,2,{NFD}\nT,w2,B,1,m2\n",
        encoding="utf-8",
    )
    tasks = read_rankings(path)
    assert tasks["T"]["stories"]["A"].system == NFC


def test_story_file_names_typed_two_ways_match_the_table() -> None:
    """``--stories`` / ``--machine`` names are matched as the tables' (NFC): typed two ways they are one name."""
    from vistkit.commands.meta.common import _parse_story_files

    assert list(_parse_story_files([f"{NFD}=x.jsonl"])) == [NFC]
    with pytest.raises(InputError, match="twice"):
        _parse_story_files([f"{NFD}=x.jsonl", f"{NFC}=y.jsonl"])


def test_no_pair_scored_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`studio report` on the demo's study (and `meta pairs` on pairs whose only references are their own
    stories) said only "no pair could be scored (check --references and --key)": the reason the stories were left
    out, and Reference Absent's part in it, are said now."""
    from vistkit.cli import main

    pairs = tmp_path / "p.csv"
    pairs.write_text(
        "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order,"
        "rank_norm\nwe went to the park . it was fun .,the park was great . we had fun .,-1.6,s1,1-2-3-4-5,gt,m1,5,"
        "1.4,3.0,5,-0.32\n",
        encoding="utf-8",
    )
    refs = tmp_path / "r.jsonl"
    refs.write_text('{"story_id": "s1", "text": "we went to the park . it was fun ."}\n', encoding="utf-8")
    assert main(["meta", "pairs", str(pairs), "-m", "bleu-4", "-r", str(refs), "--key", "story"]) == 1
    err = capsys.readouterr().err
    assert "no pair could be scored: no reference story shares its key (2 of 2 stories)" in err
    assert "Reference Absent" in err and "--no-reference-absent" in err
