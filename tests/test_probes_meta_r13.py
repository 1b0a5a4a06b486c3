"""Probes, round 13: `vistkit meta` with infinite metric scores, and odd Likert tables.

- A metric that scores a story infinite (declared ranges such as lm-perplexity's [1, inf] or groovist's allow it)
  stopped `meta correlate` and `meta errors` after every metric had been scored, with "x (the metric scores)
  holds an infinite value" naming neither the metric nor the story. Now such stories are left out of that
  metric's coefficients and a note says how many.
- `meta pairs` with both stories of a pair scored infinite printed numpy's "invalid value encountered in
  subtract" and dropped the pair from every denominator without a word; equal scores are a tie (a tie is wrong,
  Vrank Eq. 1) whatever their size.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from meta_dummies import dummy_metrics_registered, load_dummy_metrics

from vistkit.metrics.base import Item, Score, mean_score, register

HEADER = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order"
LONG = 12  # stories of more words than this score +inf


class _Infinite(load_dummy_metrics().MetaLength):  # type: ignore[misc,name-defined]
    """Word count, but +inf for a story of more than `LONG` words."""

    name = "meta-test-infinite"

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        vals = [float(len(i.hypothesis.text.split())) for i in items]
        return mean_score(self.name, [i.item_id for i in items], [math.inf if v > LONG else v for v in vals], signature)


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    from vistkit.metrics import base

    with dummy_metrics_registered():
        register(_Infinite)
        try:
            yield
        finally:
            base._REGISTRY.pop(_Infinite.name, None)


def _run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr)."""
    from vistkit.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


def _story(words: int, tag: str) -> str:
    return " ".join(["we"] * (words - 2) + [tag, "."])


def _likert(path: Path) -> Path:
    """6 stories of 4..9 words and 2 of 20 words (infinite), rated so that longer is better."""
    rows = ["system,item,worker,quality,text"]
    lengths = [4, 5, 6, 7, 8, 9, 20, 20]
    for i, n in enumerate(lengths):
        rows.append(f"s{i % 3},i{i},w1,{1 + min(4, i // 2)},{_story(n, f't{i}')}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- infinite scores: correlate
def test_correlate_leaves_infinite_scores_out_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: exit 1, "x (the metric scores) holds an infinite value". After: the 6 finite stories count (the
    coefficients are scipy's of them) and a note names the metric and how many stories were left out."""
    from scipy import stats

    path = _likert(tmp_path / "l.csv")
    code, out, err = _run(capsys, "meta", "correlate", path, "-m", "meta-test-infinite,meta-test-length",
                        "--level", "story", "--bootstrap", "20", "-f", "json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    rows = {(r["metric"], r["method"]): r for r in result["correlations"]}
    assert rows["meta-test-infinite", "pearson"]["n"] == 6 and rows["meta-test-length", "pearson"]["n"] == 8
    x, y = np.array([4, 5, 6, 7, 8, 9.0]), np.array([1, 1, 2, 2, 3, 3.0])
    assert rows["meta-test-infinite", "spearman"]["r"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert result["infinite_scores"] == {"meta-test-infinite": 2}
    assert "Traceback" not in err


def test_correlate_text_output_notes_infinite_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _likert(tmp_path / "l.csv")
    code, out, err = _run(capsys, "meta", "correlate", path, "-m", "meta-test-infinite", "--bootstrap", "20")
    assert code == 0, err
    assert "note: meta-test-infinite: 2 of 8 stories scored infinite are left out of its correlations" in out, out


def test_errors_leaves_infinite_scores_out_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scipy import stats

    lengths = [4, 5, 6, 7, 8, 9, 20]
    labels = [1, 1, 0, 1, 0, 0, 1]
    rows = ["system,item,Gram,text"] + [
        f"s{i % 2},i{i},{lab},{_story(n, f't{i}')}" for i, (n, lab) in enumerate(zip(lengths, labels, strict=True))
    ]
    path = tmp_path / "e.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = _run(capsys, "meta", "errors", path, "-m", "meta-test-infinite", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    got = payload["point_biserial"]["meta-test-infinite"]["Gram"]
    assert got["n"] == 6 and payload["infinite_scores"] == {"meta-test-infinite": 1}
    assert got["r"] == pytest.approx(stats.pointbiserialr(labels[:6], lengths[:6])[0])
    code, out, err = _run(capsys, "meta", "errors", path, "-m", "meta-test-infinite")
    assert code == 0, err
    assert "meta-test-infinite: 1 of 7 stories scored infinite is left out of its point-biserial r" in out, out


# ------------------------------------------------------------------------------- infinite scores: pairs
def test_pairs_of_two_infinite_scores_are_a_tie_not_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: numpy's RuntimeWarning on stderr and n = 2 (the inf-inf pair silently in no denominator). After:
    the pair counts, as a tie (wrong), so n = 3 and accuracy 2/3."""
    path = tmp_path / "p.csv"
    path.write_text(
        HEADER + "\n"
        f"{_story(20, 'a')},{_story(21, 'b')},-1,s1,1-2,m1,m2,5,1,2,5\n"  # both inf: a tie, so wrong
        f"{_story(6, 'c')},{_story(20, 'd')},1,s2,1-2,m1,m2,5,2,1,5\n"  # inf beats 6: right
        f"{_story(6, 'e')},{_story(4, 'f')},-1,s3,1-2,m1,m2,5,1,2,5\n",  # 6 beats 4: right
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code, out, err = _run(capsys, "meta", "pairs", path, "-m", "meta-test-infinite", "--bootstrap", "20",
                            "-f", "json")  # fmt: skip
    assert code == 0, err
    assert "RuntimeWarning" not in err and "invalid value" not in err, err
    result = json.loads(out)
    assert result["n"]["meta-test-infinite"]["all"] == 3
    assert result["accuracy"]["meta-test-infinite"]["all"] == pytest.approx(2 / 3)


def test_pair_scores_difference_of_equal_infinities_is_zero() -> None:
    from vistkit.meta.scoring import PairScores

    inf = math.inf
    one, two = np.array([inf, -inf, inf, 1.0, math.nan]), np.array([inf, -inf, 2.0, 1.0, 1.0])
    s = PairScores("m", "sig", True, one, two, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        d = s.difference()
    assert d[:4].tolist() == [0.0, 0.0, inf, 0.0] and math.isnan(d[4])
    low = PairScores("m", "sig", False, np.array([inf]), np.array([inf]), {})
    assert low.difference().tolist() == [0.0]


# ------------------------------------------------------------------------------- a column that is not a rating
def test_a_non_rating_column_says_how_to_name_the_aspects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "column 'comment' must be a number, got 'nice'" (the help promises "all numeric columns", but every
    column but the id and text ones is read). After: the error says to name the aspect columns with --aspects,
    which works."""
    path = tmp_path / "l.csv"
    rows = ["system,item,worker,quality,comment,text"] + [
        f"s{i % 3},i{i},w1,{1 + i % 5},nice,{_story(4 + i, f't{i}')}" for i in range(9)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, _, err = _run(capsys, "meta", "correlate", path, "-m", "meta-test-length", "--bootstrap", "20")
    assert code == 1 and "column 'comment' must be a number" in err and "--aspects" in err, err
    code, _, err = _run(capsys, "meta", "correlate", path, "-m", "meta-test-length", "--bootstrap", "20",
                        "--aspects", "quality")  # fmt: skip
    assert code == 0, err
    labels = tmp_path / "e.csv"
    labels.write_text("system,item,Gram,note,text\na,1,1,x,we went .\n", encoding="utf-8")
    code, _, err = _run(capsys, "meta", "errors", labels, "-m", "meta-test-length")
    assert code == 1 and "column 'note'" in err and "--errors" in err, err



# ------------------------------------------------------------------------------- too few resamples
def _pairs(path: Path) -> Path:
    ranks = [(1, 2), (3, 1)]  # gaps of 1 and 2, either way
    rows = [f"{_story(4 + i, 'a')},{_story(9 - i % 5, 'b')},{ranks[i % 2][0] - ranks[i % 2][1]},s{i},1-2,m1,m2,5,"
            f"{ranks[i % 2][0]},{ranks[i % 2][1]},5" for i in range(8)]  # fmt: skip
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "verb", [["pairs"], ["compare"], ["correlate"], ["gap", "--report", "REPORT"]], ids=lambda v: v[0]
)
@pytest.mark.parametrize(("resamples", "warned"), [(1, True), (39, True), (40, False)])
def test_too_few_resamples_for_a_95_percent_interval_are_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: list[str], resamples: int, warned: bool
) -> None:
    """Before: `--bootstrap 1` printed a "95% CI" that was one resample ([0.2188, 0.2188] beside r = 0.5932) in
    silence. After: a note under the table (and on the --report page, and ``resamples_note`` in JSON) says the
    level needs 40 resamples, as `score` warns; the numbers are computed as asked."""
    data = _likert(tmp_path / "l.csv") if verb[0] == "correlate" else _pairs(tmp_path / "p.csv")
    args = [a if a != "REPORT" else tmp_path / "report" for a in verb]
    code, out, err = _run(capsys, "meta", *args, data, "-m", "meta-test-length,meta-test-shortness",
                          "--bootstrap", resamples)  # fmt: skip
    assert code == 0, err
    said = f"--bootstrap {resamples} is too few resamples for a 95% interval"
    if verb[0] == "gap":  # the table has no interval: only the page's
        assert (said in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")) is warned
        return
    assert (f"note: {said}" in out) is warned, out
    code, out, err = _run(capsys, "meta", *args, data, "-m", "meta-test-length,meta-test-shortness",
                          "--bootstrap", resamples, "-f", "json")  # fmt: skip
    assert code == 0, err
    assert (said in json.loads(out).get("resamples_note", "")) is warned


# ------------------------------------------------------------------------------- contradicting pairs
def test_contradicting_pairs_name_the_file_lines_past_a_multi_line_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the warning counted one line per row, so past a story with a new line in it named the wrong row
    ("line 4", the unrelated pair in between) and said "1 row judges ... but prefer". After: the row's own line
    (where it ends, as in the readers' other messages)."""
    from vistkit.meta.human import read_pairs

    path = tmp_path / "p.csv"
    path.write_text(
        "sent1,sent2,label,avg_rank_base,avg_rank_comp\n"
        '"we went out .\nit was fun .",the dog ran .,-1,1,2\n'  # lines 2-3
        "x y z .,a b c .,-1,1,2\n"  # line 4
        'the dog ran .,"we went out .\nit was fun .",-1,1,2\n',  # lines 5-6: the other way round
        encoding="utf-8",
    )
    capsys.readouterr()
    assert len(read_pairs(path)) == 3
    err = capsys.readouterr().err
    assert "1 row judges the same two stories as an earlier row but prefers the other one" in err, err
    assert "(first: line 6 against line 3)" in err, err  # the lines the rows end on, as every reader message
