"""dHM human-model distance: the official numbers on the shipped dHM scores (VIST, VWP), hand-computed values,
input forms, properties, readers and the `vistkit distance` command."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.scores.distance import (
    dhm_distance,
    normalize_table,
    read_dhm_scores,
    read_per_item_scores,
    read_scores,
)

SCORES = ("dhm-visual-storytelling", "data", "scores")

# The dHM paper's numbers, as printed by the official dHM.py (rounded to 4 decimals there).
GOLDEN = {
    "vist": {"dG": 0.2079, "dC": 0.1456, "dR": 0.1193, "dHM": 0.1576, "n": 4897},
    "vwp": {"dG": 0.2295, "dC": 0.2145, "dR": 0.0948, "dHM": 0.1796, "n": 586},
}


def _prefixes(dataset: str) -> tuple[Path, Path]:
    shared_file(*SCORES, dataset, "gt_test_G.json")
    folder = shared_file(*SCORES, dataset)
    return folder / "gt_test", folder / "llava_vc_p3"


@pytest.mark.parametrize("dataset", ["vist", "vwp"])
def test_golden_values_of_the_official_dhm(dataset: str) -> None:
    human, model = _prefixes(dataset)
    result = dhm_distance(read_dhm_scores(human), read_dhm_scores(model))
    got = result.as_dict()
    for k in ("dG", "dC", "dR", "dHM"):
        assert round(got[k], 4) == GOLDEN[dataset][k], k
    assert got["n"] == GOLDEN[dataset]["n"]


@pytest.mark.parametrize("dataset", ["vist", "vwp"])
def test_cli_golden_json(dataset: str, capsys: pytest.CaptureFixture[str]) -> None:
    human, model = _prefixes(dataset)
    assert main(["distance", "--human", str(human), "--model", str(model), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"dG", "dC", "dR", "dHM", "n", "tanh_g", "left_out"}
    assert payload["tanh_g"] is True and {"human", "model"} <= set(payload["left_out"])  # what the caption says
    numbers = {k: v for k, v in payload.items() if k not in ("tanh_g", "left_out")}
    assert {k: round(v, 4) if k != "n" else v for k, v in numbers.items()} == GOLDEN[dataset]
    assert main(["distance", "--human", str(human), "--model", str(model), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(out.splitlines()))
    assert len(rows) == 1 and int(rows[0]["n"]) == GOLDEN[dataset]["n"]
    assert "ids left out" in err  # a CSV has no caption: what was left out is said on stderr


def test_per_item_csv_from_the_official_scores_gives_the_same_numbers(tmp_path: Path) -> None:
    """Rewrite the six official files as two `vistkit score --per-item` CSVs (id,<metric>,...)."""
    human, model = _prefixes("vist")
    for prefix, out in ((human, tmp_path / "h.csv"), (model, tmp_path / "m.csv")):
        t = read_dhm_scores(prefix)
        ids = sorted(set(t["G"]) | set(t["C"]) | set(t["R"]))
        with open(out, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "my-c", "groovist", "rovist-nr"])
            for i in ids:
                w.writerow([i, *(repr(t[d][i]) if i in t[d] else "" for d in ("C", "G", "R"))])
    args = ["distance", "--human", str(tmp_path / "h.csv"), "--model", str(tmp_path / "m.csv")]
    assert main([*args, "--c-metric", "my-c", "--tanh-g", "-f", "json"]) == 0
    # the default C columns (rovist-c, coherence, C, C_score) are absent: a clear error, exit 1
    assert main(args) == 1
    scores = read_per_item_scores(tmp_path / "h.csv", columns={"C": "my-c"})
    result = dhm_distance(scores, read_scores(tmp_path / "m.csv", columns={"C": "my-c"}))
    assert round(result.dHM, 4) == GOLDEN["vist"]["dHM"] and result.n == GOLDEN["vist"]["n"]


def test_hand_computed_example() -> None:
    human = {"G": {"a": 0.0, "b": 0.0}, "C": {"a": 0.5, "b": 1.0}, "R": {"a": 0.9, "b": 0.5}}
    model = {"G": {"a": math.atanh(0.5), "b": 0.0}, "C": {"a": 0.75, "b": 1.0}, "R": {"a": 0.6, "b": 0.5}}
    r = dhm_distance(human, model)
    # story a: dG = |0 - tanh(atanh .5)| = .5, dC = .25, dR = .3, dHM = .35; story b: all 0
    assert r.dG == pytest.approx(0.25)
    assert r.dC == pytest.approx(0.125)
    assert r.dR == pytest.approx(0.15)
    assert r.dHM == pytest.approx(0.175)
    assert r.n == 2
    assert r.per_story["HM"][r.story_ids.index("a")] == pytest.approx(0.35)
    # without tanh, G is compared as given
    assert dhm_distance(human, model, tanh_g=False).dG == pytest.approx(math.atanh(0.5) / 2)


def test_only_stories_in_all_six_tables_count_and_nan_is_missing() -> None:
    nan = float("nan")
    human = {"G": {"a": 1.0, "b": 1.0, "c": 1.0}, "C": {"a": 0.5, "b": nan, "c": 0.5}, "R": {"a": 0.5}}
    model = {"G": {"a": 1.0, "b": 1.0}, "C": {"a": 0.25, "b": 0.5, "c": 0.5}, "R": {"a": 0.5, "c": 0.5}}
    r = dhm_distance(human, model)
    assert r.story_ids == ["a"] and r.n == 1
    assert r.dC == pytest.approx(0.25) and r.dG == 0 and r.dR == 0
    assert r.dropped["any"] == 2


def test_input_forms_agree() -> None:
    by_dim = {"G": {"1": 0.3, "2": -0.2}, "C": {"1": 0.9, "2": 0.4}, "R": {"1": 0.8, "2": 0.7}}
    by_story = {"1": {"G": 0.3, "C": 0.9, "R": 0.8}, "2": {"G": -0.2, "C": 0.4, "R": 0.7}}
    frame = pd.DataFrame(by_story).T
    other = {"G": {"1": 0.1, "2": 0.0}, "C": {"1": 0.5, "2": 0.5}, "R": {"1": 0.5, "2": 0.1}}
    expected = dhm_distance(by_dim, other).as_dict()
    assert dhm_distance(by_story, other).as_dict() == expected
    assert dhm_distance(frame, other).as_dict() == expected
    assert normalize_table(frame) == normalize_table(by_dim)


table = st.dictionaries(
    st.sampled_from([str(i) for i in range(12)]),
    st.tuples(*(st.floats(-3, 3, allow_nan=False) for _ in range(3))),
    min_size=1,
)


def _split(t: dict[str, tuple[float, ...]]) -> dict[str, dict[str, float]]:
    return {d: {k: v[i] for k, v in t.items()} for i, d in enumerate("GCR")}


@settings(max_examples=100, deadline=None)
@given(table, table)
def test_properties(h: dict[str, tuple[float, ...]], m: dict[str, tuple[float, ...]]) -> None:
    common = set(h) & set(m)
    if not common:
        with pytest.raises(InputError, match="no story id"):
            dhm_distance(_split(h), _split(m))
        return
    r = dhm_distance(_split(h), _split(m))
    assert r.n == len(common)
    assert r.dHM == pytest.approx((r.dG + r.dC + r.dR) / 3)  # mean of per-story dHM = mean of the three
    assert dhm_distance(_split(m), _split(h)).as_dict() == pytest.approx(r.as_dict())  # symmetric
    assert 0 <= r.dG <= 2 and r.dC >= 0 and r.dR >= 0
    assert dhm_distance(_split(h), _split(h)).dHM == 0


def test_bad_tables_are_input_errors() -> None:
    good = {"G": {"a": 1.0}, "C": {"a": 1.0}, "R": {"a": 1.0}}
    with pytest.raises(InputError, match="no R scores"):
        dhm_distance({"G": {"a": 1.0}, "C": {"a": 1.0}}, good)
    with pytest.raises(InputError, match="not a number"):
        dhm_distance({**good, "C": {"a": "high"}}, good)
    with pytest.raises(InputError, match="columns G, C and R"):
        dhm_distance(pd.DataFrame({"G": [1.0]}), good)
    with pytest.raises(InputError, match="no story id has all six"):
        dhm_distance(good, {"G": {"b": 1.0}, "C": {"b": 1.0}, "R": {"b": 1.0}})


def test_readers_follow_the_official_files(tmp_path: Path) -> None:
    # ids in the CSVs are stripped (read_scores_C_R); NaN and empty scores are left out
    (tmp_path / "x_C.csv").write_text("story_id,C_score\n 1 ,0.5\n2,nan\n3,\n")
    (tmp_path / "x_R.csv").write_text("story_id,R_score\n1,0.25\n2,0.5\n")
    (tmp_path / "x_G.json").write_text('{"1": 0.5, "2": NaN, "3": ""}')
    t = read_dhm_scores(tmp_path / "x")
    assert t == {"G": {"1": 0.5}, "C": {"1": 0.5}, "R": {"1": 0.25, "2": 0.5}}
    (tmp_path / "y_C.csv").write_text("story_id,C_score\n1,abc\n")
    (tmp_path / "y_R.csv").write_text("story_id,R_score\n")
    (tmp_path / "y_G.json").write_text("{}")
    with pytest.raises(InputError, match=r"y_C\.csv line 2"):
        read_dhm_scores(tmp_path / "y")
    with pytest.raises(InputError, match=r"missing .*z_G\.json"):
        read_dhm_scores(tmp_path / "z")
    with pytest.raises(InputError, match="is a folder"):
        read_scores(tmp_path)


def test_cli_errors_and_per_item_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["distance", "--human", str(tmp_path / "nope")]) == 1
    assert "--model" in capsys.readouterr().err
    assert main(["distance", "--human", str(tmp_path / "a"), "--model", str(tmp_path / "b")]) == 1
    assert main(["distance", "--bogus"]) == 2
    human, model = _prefixes("vwp")
    out = tmp_path / "items.csv"
    assert main(["distance", "--human", str(human), "--model", str(model), "--per-item", str(out)]) == 0
    text = capsys.readouterr().out
    assert "0.1796" in text and "586" in text
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["story_id", "dG", "dC", "dR", "dHM"] and len(rows) == 587
    mean_dhm = sum(float(r[4]) for r in rows[1:]) / 586
    assert round(mean_dhm, 4) == GOLDEN["vwp"]["dHM"]


def test_tanh_rule_for_per_item_csvs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tanh goes on a G column unless it names a registered metric bounded in [-1, 1]."""
    for name, g in (("h.csv", 2.0), ("m.csv", 0.0)):
        (tmp_path / name).write_text(f"id,groovist,bertscore,rovist-c,rovist-nr\ns1,{g},{g / 4},0.5,0.5\n")
    args = ["distance", "--human", str(tmp_path / "h.csv"), "--model", str(tmp_path / "m.csv"), "-f", "json"]
    assert main(args) == 0  # groovist is unbounded (raw GROOViST): tanh, as dHM does
    assert json.loads(capsys.readouterr().out)["dG"] == pytest.approx(math.tanh(2.0))
    assert main([*args, "--g-metric", "bertscore"]) == 0  # bounded in [-1, 1]: used as given
    assert json.loads(capsys.readouterr().out)["dG"] == pytest.approx(0.5)
    assert main([*args, "--no-tanh-g"]) == 0
    assert json.loads(capsys.readouterr().out)["dG"] == pytest.approx(2.0)


def test_per_item_signatures_travel_into_the_distance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`score --per-item` writes each metric's signature as a column; `distance` reports the signatures of the
    columns it reads, warns when the two sides were scored under different ones (their difference then mixes the
    stories with the metrics), and refuses a column holding two runs' rows."""
    stories = [
        {"story_id": str(i), "text": "the dog ran to the park. it was happy. we went home. the dog slept."}
        for i in range(3)
    ]
    (tmp_path / "s.json").write_text(json.dumps(stories))
    runs = {"split": [], "source": ["-O", "rovist-nr.sentences=source"]}
    for name, extra in runs.items():
        out = tmp_path / f"{name}.csv"
        assert main(["score", str(tmp_path / "s.json"), "-m", "rovist-nr", "-b", "--per-item", str(out), *extra]) == 0
        rows = list(csv.reader(out.open(encoding="utf-8")))
        assert rows[0] == ["id", "rovist-nr", "rovist-nr signature"]
        assert len({r[2] for r in rows[1:]}) == 1
        assert rows[1][2].startswith(f"rovist-nr|key:story|variant:pairs|sent:{name}|")
    capsys.readouterr()
    dims = ["--g-metric", "rovist-nr", "--c-metric", "rovist-nr", "--r-metric", "rovist-nr", "-f", "json"]
    same = ["distance", "--human", str(tmp_path / "split.csv"), "--model", str(tmp_path / "split.csv"), *dims]
    assert main(same) == 0
    got = capsys.readouterr()
    payload = json.loads(got.out)
    sig = next(csv.reader((tmp_path / "split.csv").open(encoding="utf-8").readlines()[1:2]))[2]
    assert payload["signatures"] == {"human": dict.fromkeys("GCR", sig), "model": dict.fromkeys("GCR", sig)}
    warnings = [ln for ln in got.err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "hold the same scores, so dHM is 0" in warnings[0]
    assert main([*same[:4], str(tmp_path / "source.csv"), *dims]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: ") == 4 and "were computed under different signatures, so dG also measures" in err
    assert "give all 3 stories they share the same G, C and R, so dHM is 0" in err  # the two runs agree here
    mixed = tmp_path / "mixed.csv"  # two runs' rows under one header
    mixed.write_text((tmp_path / "split.csv").read_text() + "".join(
        line.replace("0,", "9,", 1) + "\n" for line in (tmp_path / "source.csv").read_text().splitlines()[1:2]))
    assert main([*same[:2], str(mixed), *same[3:]]) == 1
    assert "holds more than one signature" in capsys.readouterr().err


def test_table_from_score_objects() -> None:
    """Score objects (what `vistkit score` computes) plug straight into dhm_distance; NaN items drop out."""
    from vistkit.metrics.base import mean_score
    from vistkit.scores.distance import table_from_scores

    def side(g: list[float], c: list[float], r: list[float]) -> dict[str, dict[str, float]]:
        ids = ["1", "2"]
        scores = {d: mean_score(d, ids, v, "sig") for d, v in zip("GCR", (g, c, r), strict=True)}
        return table_from_scores(scores)

    human = side([0.0, 1.0], [0.5, 0.5], [1.0, float("nan")])
    model = side([0.0, 0.0], [0.25, 0.5], [0.5, 0.5])
    r = dhm_distance(human, model)
    assert r.n == 1 and r.dC == pytest.approx(0.25) and r.dR == pytest.approx(0.5) and r.dG == 0
    with pytest.raises(InputError, match="no R scores"):
        table_from_scores({"G": None, "C": None})


@pytest.mark.parametrize(("dims", "suggested"), [(("C",), "G,R"), (("C", "R"), "R"), (("G", "C", "R"), "G,R")])
def test_a_missing_c_model_suggests_dimensions_without_c(dims: tuple[str, ...], suggested: str) -> None:
    from vistkit.errors import MissingDependencyError
    from vistkit.scores.dhm import _build_metric

    with pytest.raises(MissingDependencyError) as info:
        _build_metric("C", "dhm-c", {}, dims)
    message = str(info.value)
    assert message.endswith(f"--dimensions {suggested})") and "coherence" in message


def _write_prefix(folder: Path, name: str, g: float, c: float, r: float) -> Path:
    (folder / f"{name}_G.json").write_text(json.dumps({"1": g, "2": g / 2}))
    (folder / f"{name}_C.csv").write_text(f"story_id,C_score\n1,{c}\n2,{c / 2}\n")
    (folder / f"{name}_R.csv").write_text(f"story_id,R_score\n1,{r}\n2,{r / 2}\n")
    return folder / name


@pytest.mark.parametrize("target", ["h_G.json", "h_C.csv", "h_R.csv", "m_G.json", "m_C.csv", "m_R.csv"])
def test_per_item_never_overwrites_a_file_of_a_score_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """--per-item onto one of the files a --human/--model prefix names is refused, --force or not (finding 1)."""
    human, model = _write_prefix(tmp_path, "h", 0.5, 0.9, 0.8), _write_prefix(tmp_path, "m", 0.1, 0.5, 0.4)
    before = (tmp_path / target).read_bytes()
    args = ["distance", "--human", str(human), "--model", str(model), "--per-item", str(tmp_path / target)]
    assert main([*args, "--force"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / target} is an input of this command" in err and "Traceback" not in err
    assert (tmp_path / target).read_bytes() == before
    link = tmp_path / "link.csv"  # a link to a prefix file is that file
    link.symlink_to(tmp_path / target)
    assert main([*args[:-1], str(link), "--force"]) == 1
    assert (tmp_path / target).read_bytes() == before
    out = tmp_path / "items.csv"  # any other file is written as before
    assert main([*args[:-1], str(out)]) == 0
    assert out.read_text().splitlines()[0] == "story_id,dG,dC,dR,dHM"


def test_score_csv_value_column_is_picked_by_name(tmp_path: Path) -> None:
    """An extra column in a _C.csv/_R.csv never stands in for the score (finding 2): the score column is found by
    its name (C_score / R_score, as the official files), and a table whose score column is ambiguous is refused."""
    _write_prefix(tmp_path, "x", 0.5, 0.9, 0.8)
    (tmp_path / "x_R.csv").write_text("story_id,junk,R_score\n1,5,0.8\n2,5,0.4\n")
    (tmp_path / "x_C.csv").write_text("C_score,story_id\n0.9,1\n0.45,2\n")  # any order of the columns
    t = read_dhm_scores(tmp_path / "x")
    assert t["R"] == {"1": 0.8, "2": 0.4} and t["C"] == {"1": 0.9, "2": 0.45}
    (tmp_path / "x_R.csv").write_text("story_id,junk,other\n1,5,0.8\n")
    ambiguous = r"x_R\.csv: cannot tell which column holds the R scores \(columns story_id, junk, other\)"
    with pytest.raises(InputError, match=ambiguous):
        read_dhm_scores(tmp_path / "x")
    (tmp_path / "x_R.csv").write_text("story_id,R_score,score\n1,0.8,0.7\n")
    with pytest.raises(InputError, match="cannot tell which column"):
        read_dhm_scores(tmp_path / "x")
    (tmp_path / "x_R.csv").write_text("story_id,C_score\n1,0.8\n")  # the C table given as R
    with pytest.raises(InputError, match=r"x_R\.csv: its score column 'C_score' holds C scores"):
        read_dhm_scores(tmp_path / "x")
    (tmp_path / "x_R.csv").write_text("story_id,score\n1,0.8\n")  # two columns: the second, whatever its name
    assert read_dhm_scores(tmp_path / "x")["R"] == {"1": 0.8}
