"""Probes, round 14: `vistkit meta` with odd judgement files and options.

- `--stories SYSTEM=FILE` naming a system the Likert or error-label table does not have (a typo, another case)
  was silently ignored: the table's own text was scored instead, or the error said only "no text for system".
- A pairs CSV whose `pair_id` column repeats a value counted the pairs a metric could not score once per id:
  "1 pair left out" for three.
- `meta compare --subset omega_4` on pairs of which none is in the subset (no agreement column, or no pair with
  that agreement) printed a row of n/a without a word.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from meta_dummies import FIX, dummy_metrics_registered, load_dummy_metrics

from vistkit.errors import InputError
from vistkit.metrics.base import Item, Score, mean_score, register

HEADER = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order"


class _Undefined(load_dummy_metrics().MetaLength):  # type: ignore[misc,name-defined]
    """Word count, but undefined (NaN) for a story of fewer than 3 words."""

    name = "meta-test-undefined-short"

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        vals = [float(len(i.hypothesis.text.split())) for i in items]
        return mean_score(self.name, [i.item_id for i in items], [math.nan if v < 3 else v for v in vals], signature)


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    from vistkit.metrics import base

    with dummy_metrics_registered():
        register(_Undefined)
        try:
            yield
        finally:
            base._REGISTRY.pop(_Undefined.name, None)


def _run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr)."""
    from vistkit.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


# ------------------------------------------------------------------------------- --stories of an unknown system
def _stories(path: Path) -> Path:
    path.write_text(
        '{"story_id": "i1", "text": "a b c d e f g"}\n{"story_id": "i2", "text": "a b"}\n', encoding="utf-8"
    )
    return path


@pytest.mark.parametrize("verb,table", [("correlate", "likert_small.csv"), ("errors", "errors_small.csv")])
def test_stories_of_a_system_the_table_lacks_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, table: str
) -> None:
    code, out, err = _run(
        capsys, "meta", verb, FIX / table, "-m", "meta-test-length", "-s", f"M1={_stories(tmp_path / 's.jsonl')}"
    )
    assert code == 1 and not out
    assert "'M1'" in err and "m1" in err and "--stories" in err


def test_stories_of_a_system_the_table_has_replace_its_text(tmp_path: Path) -> None:
    from vistkit.commands.meta.judged import judged_stories
    from vistkit.meta.human import read_likert

    table = read_likert(FIX / "likert_small.csv")
    stories = judged_stories(table, [f"m1={_stories(tmp_path / 's.jsonl')}"], None)
    assert [s.text for s, sys in zip(stories, table.systems, strict=True) if sys == "m1"] == ["a b c d e f g", "a b"]


def test_judged_stories_refuses_an_unknown_system_from_python(tmp_path: Path) -> None:
    from vistkit.commands.meta.judged import judged_stories
    from vistkit.meta.human import read_likert

    table = read_likert(FIX / "likert_small.csv")
    with pytest.raises(InputError, match=r"system 'nobody', which the table does not have"):
        judged_stories(table, [f"nobody={_stories(tmp_path / 's.jsonl')}"], None)


# ------------------------------------------------------------------------------- repeated pair ids
def _pairs_with_one_id(path: Path) -> Path:
    rows = [
        "pair_id," + HEADER,
        "p,a b,a b c d,1.0,s1,1-2,m1,m2,5,2.0,1.0,2",  # story 1 unscored
        "p,a,a b c d e,1.0,s2,3-4,m1,m2,5,2.0,1.0,2",  # story 1 unscored
        "p,x,a b c d e f,1.0,s3,5-6,m1,m2,5,2.0,1.0,2",  # story 1 unscored
        "q,a b c d,a b c,-1.0,s4,7-8,m1,m2,5,1.0,2.0,2",
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_left_out_pairs_are_counted_per_pair_not_per_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = _pairs_with_one_id(tmp_path / "p.csv")
    code, out, _ = _run(capsys, "meta", "pairs", pairs, "-m", "meta-test-undefined-short", "-f", "json")
    assert code == 0
    assert json.loads(out)["excluded"] == {"meta-test-undefined-short": 3}
    code, out, _ = _run(capsys, "meta", "pairs", pairs, "-m", "meta-test-undefined-short")
    assert code == 0 and "3 pairs left out" in out


# ------------------------------------------------------------------------------- compare on an empty subset
def _pairs_without_agreement(path: Path) -> Path:
    rows = [
        "sent1,sent2,label,story_id,img_seq,model_base,model_comp,avg_rank_base,avg_rank_comp,order",
        "a b c d e,a b c,-1.6,s1,1-2,gt,m1,1.4,3.0,5",
        "a b,a b c d,-1.2,s2,3-4,m1,m2,2.0,3.2,5",
        "x y z,p q r s,1.6,s3,5-6,m1,m2,3.6,2.0,5",
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_compare_on_an_empty_subset_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = _pairs_without_agreement(tmp_path / "p.csv")
    metrics = "meta-test-length,meta-test-shortness"
    code, out, _ = _run(capsys, "meta", "compare", pairs, "-m", metrics, "--subset", "omega_4")
    assert code == 0
    assert "no pair is in omega_4" in out and "agreement" in out
    code, out, _ = _run(capsys, "meta", "compare", pairs, "-m", metrics, "--subset", "omega_4", "-f", "json")
    assert "no pair is in omega_4" in json.loads(out)["note"]
    code, out, _ = _run(capsys, "meta", "compare", FIX / "vhed_small.csv", "-m", metrics, "--subset", "omega_3")
    assert code == 0 and "no pair is in" not in out  # the subset has pairs: no note


def test_compare_on_a_subset_of_no_pair_names_the_files_agreements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.csv"
    path.write_text(
        HEADER + "\na b c d e,a b c,-1.6,s1,1-2,gt,m1,5,1.4,3.0,5\na b,a b c d,-1.2,s2,3-4,m1,m2,4,2.0,3.2,5\n",
        encoding="utf-8",
    )
    metrics = "meta-test-length,meta-test-shortness"
    code, out, _ = _run(capsys, "meta", "compare", path, "-m", metrics, "--subset", "omega_3")
    assert code == 0 and "no pair is in omega_3 (agreement 3): the file's agreements are 4, 5" in " ".join(out.split())


# ------------------------------------------------------------------------------- beats-reference of many systems
def test_beats_reference_figure_of_many_systems_shows_one_box_per_judge(tmp_path: Path) -> None:
    """Was: a bar and a tick label per system (3,000 systems: 90 s for an unreadable figure); past
    `MAX_SYSTEM_BOXES` systems each judge's ratios are one box, as the score-distribution figure pools them."""
    import re

    from vistkit.report import plots

    n = plots.MAX_SYSTEM_BOXES + 1
    ratios = {f"system-{i}": {"ratio": i / n} for i in range(n)}
    plots.plot_beats_reference({"human": ratios, "m": {**ratios, "system-0": {"ratio": None}}}, tmp_path / "b.svg")
    svg = (tmp_path / "b.svg").read_text(encoding="utf-8")
    texts = " ".join(re.findall(r">([^<>]+)</text>", svg))
    assert "system-3" not in texts and f"{n} systems" in texts
    few = {f"system-{i}": {"ratio": 0.5} for i in range(plots.MAX_SYSTEM_BOXES)}
    plots.plot_beats_reference({"human": few}, tmp_path / "few.svg")
    assert "system-3" in " ".join(re.findall(r">([^<>]+)</text>", (tmp_path / "few.svg").read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------- rankings with blank id cells
@pytest.mark.parametrize("column", ["task", "worker", "story"])
def test_rankings_with_a_blank_id_cell_are_refused(tmp_path: Path, column: str) -> None:
    """Was: blank task cells (a spreadsheet's merged cells export blank after the first row) put the stories of
    every such task into one task "" and paired stories of different photo sequences, without a word."""
    from vistkit.meta.human import read_rankings

    rows = [
        {"task": "T1", "worker": "w1", "story": "A", "rank": "1"},
        {"task": "T1", "worker": "w1", "story": "B", "rank": "2"},
        {"task": "T2", "worker": "w1", "story": "C", "rank": "1"},
        {"task": "T2", "worker": "w1", "story": "D", "rank": "2"},
    ]
    rows[3][column] = " "
    path = tmp_path / "r.csv"
    path.write_text("task,worker,story,rank\n" + "".join(",".join(r.values()) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputError, match=f"line 5: the {column} cell is empty"):
        read_rankings(path)


def test_rankings_names_typed_with_spaces_are_one_name(tmp_path: Path) -> None:
    from vistkit.meta.human import pairs_from_rankings, read_rankings

    path = tmp_path / "r.csv"
    path.write_text("task,worker,story,rank\nT1,w1,A,1\nT1,w1,B,2\nT1 ,w2,A ,2\n T1,w2 ,B,1\n", encoding="utf-8")
    tasks = read_rankings(path)
    assert list(tasks) == ["T1"] and sorted(tasks["T1"]["ranks"]) == ["w1", "w2"]
    assert pairs_from_rankings(tasks) == []  # the two workers disagree: a zero gap


# ------------------------------------------------------------------------------- stories left out of a correlation
def test_correlate_says_how_many_stories_a_metric_left_unscored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a metric that could not score 2 of 6 stories had its r over 4 without a word (`meta pairs` says so)."""
    likert = FIX / "likert_small.csv"
    code, out, _ = _run(capsys, "meta", "correlate", likert, "-m", "meta-test-undefined-short,meta-test-length",
                          "--level", "story")  # fmt: skip
    assert code == 0
    text = " ".join(out.split())
    assert "meta-test-undefined-short: 2 of 6 stories have no score" in text
    assert "meta-test-length: 0" not in text and text.count("stories have no score") == 1
    code, out, _ = _run(capsys, "meta", "correlate", likert, "-m", "meta-test-undefined-short", "-f", "json")
    assert json.loads(out)["unscored_stories"] == {"meta-test-undefined-short": 2}


def test_correlate_says_how_many_stories_have_no_rating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: empty or NaN rating cells left stories out of an aspect's correlations without a word (`meta errors`
    says so of empty label cells)."""
    path = tmp_path / "l.csv"
    path.write_text(
        "system,item,worker,quality,text\na,i1,w1,5,w w w w w w\na,i2,w1,,w w w w\nb,i1,w1,3,w w w\n"
        "b,i2,w1,NaN,w w\nc,i1,w1,2,w\nc,i2,w1,4,w w w w w w w\n",
        encoding="utf-8",
    )
    code, out, _ = _run(capsys, "meta", "correlate", path, "-m", "meta-test-length", "--level", "story")
    assert code == 0 and "quality: 2 of 6 stories have no rating" in " ".join(out.split())
    code, out, _ = _run(capsys, "meta", "correlate", path, "-m", "meta-test-length", "-f", "json")
    assert json.loads(out)["unrated_stories"] == {"quality": 2}


def test_errors_says_how_many_stories_a_metric_left_unscored(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "meta", "errors", FIX / "errors_small.csv", "-m", "meta-test-undefined-short")
    assert code == 0 and "meta-test-undefined-short: 2 of 6 stories have no score" in " ".join(out.split())


# ------------------------------------------------------------------------------- spreadsheet booleans as error labels
def test_error_labels_read_spreadsheet_booleans(tmp_path: Path) -> None:
    """Was: a checkbox column exported by a spreadsheet (TRUE/FALSE) was refused as "must be a number", with a hint
    that the column might not be an error label at all."""
    from vistkit.meta.human import read_error_labels

    path = tmp_path / "e.csv"
    path.write_text("system,item,Gram,text\nm1,i1,TRUE,a b\nm1,i2,false,a\nm2,i1,1,b\nm2,i2,0,c\n", encoding="utf-8")
    assert read_error_labels(path).column("Gram").tolist() == [1.0, 0.0, 1.0, 0.0]


def test_an_error_label_that_is_no_label_says_what_a_label_is(tmp_path: Path) -> None:
    from vistkit.meta.human import read_error_labels

    path = tmp_path / "e.csv"
    path.write_text("system,item,Gram,text\nm1,i1,yes please,a b\n", encoding="utf-8")
    said = r"line 2: column 'Gram' must be an error label, 0 or 1 \(or TRUE/FALSE\), got 'yes please'"
    with pytest.raises(InputError, match=said):
        read_error_labels(path)


# ------------------------------------------------------------------------------- the Williams test on screen
def test_correlate_prints_the_williams_test_it_promises(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: `meta correlate -m A,B` ("... and the Williams test between every two metrics") printed no Williams
    test: it was in `-f json` and the --report page only."""
    monkeypatch.setenv("COLUMNS", "200")  # the table's headers whole (CI runs with COLUMNS=80)
    likert = FIX / "likert_small.csv"
    metrics = "meta-test-length,meta-test-shortness"
    code, out, _ = _run(capsys, "meta", "correlate", likert, "-m", metrics, "--bootstrap", "50")
    assert code == 0 and "Williams test" in out and "p (A > B)" in out
    assert "n/a for meta-test-length vs meta-test-shortness / focused (system level)" in " ".join(out.split())
    code, out, _ = _run(capsys, "meta", "correlate", likert, "-m", metrics, "--bootstrap", "50", "-f", "latex")
    assert code == 0 and out.count("\\begin{tabular}") == 2
    code, out, err = _run(capsys, "meta", "correlate", likert, "-m", metrics, "--bootstrap", "50", "-f", "csv")
    assert code == 0 and "Williams" not in out and "Williams test" in err and "-f json" in err
    code, out, _ = _run(capsys, "meta", "correlate", likert, "-m", "meta-test-length", "--bootstrap", "50")
    assert code == 0 and "Williams" not in out  # one metric: nothing to test
