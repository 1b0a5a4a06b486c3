"""Round-12 probes of `vistkit distance`: dHM score prefixes whose files are compressed (.gz, .zip, inside one
archive), options that one mode cannot use (warned, not silently dropped), and inputs that are neither a per-item
CSV nor a dHM prefix."""

from __future__ import annotations

import gzip
import json
import math
import zipfile
from pathlib import Path

import pytest
from cli_probe_helpers import one_error, run_cli

from tests.conftest import shared_file
from vistkit.cli import main
from vistkit.scores.distance import dhm_distance, read_dhm_scores, score_files

HUMAN = {"G": {"1": 0.5, "2": 1.0}, "C": {"1": 0.5, "2": 0.6}, "R": {"1": 0.1, "2": 0.2}}
MODEL = {"G": {"1": 0.7, "2": 1.0}, "C": {"1": 0.4, "2": 0.6}, "R": {"1": 0.1, "2": 0.3}}


def _files(table: dict[str, dict[str, float]], name: str) -> dict[str, tuple[str, str]]:
    """``{dim: (file name, text)}`` of a dHM prefix ``name``."""
    out = {"G": (f"{name}_G.json", json.dumps(table["G"]))}
    for dim in ("C", "R"):
        rows = "".join(f"{k},{v!r}\n" for k, v in table[dim].items())
        out[dim] = (f"{name}_{dim}.csv", f"story_id,{dim}_score\n{rows}")
    return out


def _prefix(folder: Path, name: str, table: dict[str, dict[str, float]], packing: str = "plain") -> Path:
    """Write a dHM prefix, each file plain, gzip'd (``gz``) or zipped alone (``zip``); ``mixed``: G gz, C zip,
    R plain."""
    folder.mkdir(parents=True, exist_ok=True)
    for dim, (fname, text) in _files(table, name).items():
        how = {"G": "gz", "C": "zip", "R": "plain"}[dim] if packing == "mixed" else packing
        if how == "gz":
            (folder / f"{fname}.gz").write_bytes(gzip.compress(text.encode()))
        elif how == "zip":
            with zipfile.ZipFile(folder / f"{fname}.zip", "w") as zf:
                zf.writestr(fname, text)
        else:
            (folder / fname).write_text(text, encoding="utf-8")
    return folder / name


def _json_distance(capsys: pytest.CaptureFixture[str], *args: object) -> dict[str, float]:
    capsys.readouterr()
    assert main(["distance", *map(str, args), "-f", "json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


WANT = dhm_distance(HUMAN, MODEL).as_dict()


@pytest.mark.parametrize("packing", ["gz", "zip", "mixed"])
def test_a_prefix_of_compressed_files_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], packing: str
) -> None:
    """`--human DIR/gt_test` with gt_test_G.json.gz (etc.) said the files were "missing"; every other reader of
    vistkit opens .gz and .zip."""
    human = _prefix(tmp_path, "h", HUMAN, packing)
    model = _prefix(tmp_path, "m", MODEL)
    got = _json_distance(capsys, "--human", human, "--model", model)
    assert {k: got[k] for k in WANT} == pytest.approx(WANT)
    assert read_dhm_scores(human) == read_dhm_scores(_prefix(tmp_path / "plain", "h", HUMAN))


def test_a_prefix_inside_one_zip_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`scores.zip:gt_test` (and `scores.zip:vist/gt_test`) reads the three members of one archive."""
    archive = tmp_path / "scores.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for table, name in ((HUMAN, "vist/h"), (MODEL, "m")):
            for fname, text in _files(table, name).values():
                zf.writestr(fname, text)
    got = _json_distance(capsys, "--human", f"{archive}:vist/h", "--model", f"{archive}:m")
    assert {k: got[k] for k in WANT} == pytest.approx(WANT)
    err = one_error(capsys, "distance", "--human", f"{archive}:nope", "--model", f"{archive}:m")
    assert "nope_G.json" in err and "scores.zip" in err


def test_a_prefix_with_a_plain_and_a_compressed_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both gt_test_G.json and gt_test_G.json.gz: which one is current cannot be told, so neither is picked."""
    human = _prefix(tmp_path, "h", HUMAN)
    _prefix(tmp_path, "h", {**HUMAN, "G": {"1": 9.0, "2": 9.0}}, "gz")
    model = _prefix(tmp_path, "m", MODEL)
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "h_G.json" in err and "h_G.json.gz" in err and "remove" in err


def test_a_missing_prefix_says_what_was_looked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _prefix(tmp_path, "m", MODEL)
    _prefix(tmp_path, "h", HUMAN, "gz")
    (tmp_path / "h_R.csv.gz").unlink()
    err = one_error(capsys, "distance", "--human", tmp_path / "h", "--model", model)
    assert "h_R.csv" in err and ".gz" in err and "h_G.json" not in err.split(";")[0]


def test_no_output_over_a_compressed_score_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    human = _prefix(tmp_path, "h", HUMAN, "mixed")
    model = _prefix(tmp_path, "m", MODEL)
    for target in (tmp_path / "h_G.json.gz", tmp_path / "h_C.csv.zip"):
        before = target.read_bytes()
        err = one_error(capsys, "distance", "--human", human, "--model", model, "--per-item", target, "--force")
        assert "an input of this command" in err and target.read_bytes() == before
    assert set(map(Path, score_files(human))) >= {tmp_path / "h_G.json.gz", tmp_path / "h_C.csv.zip"}


def test_real_dhm_scores_gzipped_give_the_official_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared_file("dhm-visual-storytelling", "data", "scores", "vwp", "gt_test_G.json")
    folder = shared_file("dhm-visual-storytelling", "data", "scores", "vwp")
    for f in folder.iterdir():
        (tmp_path / f"{f.name}.gz").write_bytes(gzip.compress(f.read_bytes()))
    got = _json_distance(capsys, "--human", tmp_path / "gt_test", "--model", tmp_path / "llava_vc_p3")
    plain = _json_distance(capsys, "--human", folder / "gt_test", "--model", folder / "llava_vc_p3")
    assert got == plain and got["n"] == 586 and round(got["dHM"], 4) == 0.1796


# ------------------------------------------------------------------------------- options a mode cannot use
@pytest.mark.parametrize(
    ("flag", "value"),
    [("--g-metric", "groovist"), ("--c-metric", "nosuch-column"), ("--r-metric", "R_score")],
)
def test_a_column_option_with_two_dhm_prefixes_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """A dHM prefix's scores are its files; `--c-metric rovist-c` (or a name that is nothing) was silently
    dropped."""
    human, model = _prefix(tmp_path, "h", HUMAN), _prefix(tmp_path, "m", MODEL)
    code, err = run_cli(capsys, "distance", "--human", human, "--model", model, flag, value)
    assert code == 0 and f"{flag} is ignored" in err and "dHM score prefix" in err


def test_a_column_option_used_by_one_per_item_csv_side_is_not_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _prefix(tmp_path, "m", MODEL)
    human = tmp_path / "h.csv"
    rows = "".join(f"{i},{HUMAN['G'][i]},{HUMAN['C'][i]},{HUMAN['R'][i]}\n" for i in ("1", "2"))
    human.write_text(f"id,groovist,my-c,rovist-nr\n{rows}", encoding="utf-8")
    code, err = run_cli(capsys, "distance", "--human", human, "--model", model, "--c-metric", "my-c")
    assert code == 0 and "ignored" not in err


@pytest.mark.parametrize(
    "args", [["--address", "auto"], ["--workers", "3"], ["--num-gpus-per-worker", "1"]]
)
def test_ray_options_with_score_tables_are_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    human, model = _prefix(tmp_path, "h", HUMAN), _prefix(tmp_path, "m", MODEL)
    code, err = run_cli(capsys, "distance", "--human", human, "--model", model, *args)
    assert code == 0 and f"{args[0]} is ignored" in err


def _stories(tmp_path: Path) -> tuple[Path, Path]:
    human, model = tmp_path / "h.json", tmp_path / "m.json"
    human.write_text(json.dumps({"1": "we went out . it was fun . we came home .", "2": "a dog . a cat ."}))
    model.write_text(json.dumps({"1": "we went out . we went out .", "2": "a dog ran . the cat sat ."}))
    return human, model


@pytest.mark.parametrize("flag", ["--tanh-g", "--no-tanh-g"])
def test_tanh_g_without_g_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    human, model = _stories(tmp_path)
    code, err = run_cli(
        capsys, "distance", "--human-stories", human, "--model-stories", model, "--dimensions", "R", flag
    )
    assert code == 0 and f"{flag} is ignored" in err and "leaves G out" in err


def test_an_option_for_a_metric_that_scores_no_dimension_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-O bleu-4.x=1` (or an option of groovist when --dimensions leaves G out) was dropped without a word."""
    human, model = _stories(tmp_path)
    for pair, why in (("bleu-4.smooth=1", "bleu-4 is not among"), ("groovist.batch_size=4", "groovist is not")):
        code, err = run_cli(
            capsys, "distance", "--human-stories", human, "--model-stories", model, "--dimensions", "R", "-O", pair
        )
        assert code == 0 and "is ignored" in err and why in err, err


# ------------------------------------------------------------------------------- what a score source is
def test_a_file_that_is_neither_a_per_item_csv_nor_a_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TSV or a story file given to --human was read as a prefix: "missing x.tsv_G.json, ...", misleading."""
    model = _prefix(tmp_path, "m", MODEL)
    for name in ("scores.tsv", "stories.json"):
        (tmp_path / name).write_text("id\tgroovist\n1\t0.5\n", encoding="utf-8")
        err = one_error(capsys, "distance", "--human", tmp_path / name, "--model", model)
        assert "missing" not in err and "per-item CSV" in err and "prefix" in err, err


def test_one_file_of_a_prefix_given_names_the_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _prefix(tmp_path, "h", HUMAN, "gz")
    model = _prefix(tmp_path, "m", MODEL)
    for name in ("h_G.json.gz", "h_C.csv.gz"):
        err = one_error(capsys, "distance", "--human", tmp_path / name, "--model", model)
        assert f"give the prefix itself ({tmp_path / 'h'}:" in err, err


def test_a_per_item_csv_with_another_delimiter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`id;groovist;...` said "the columns are none"."""
    model = _prefix(tmp_path, "m", MODEL)
    human = tmp_path / "h.csv"
    human.write_text("id;groovist;rovist-c;rovist-nr\n1;0.5;0.5;0.1\n", encoding="utf-8")
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "columns are none" not in err and "comma" in err, err


def test_an_invisible_character_in_an_id_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {d: {"1\u200b" if k == "1" else k: v for k, v in t.items()} for d, t in HUMAN.items()}
    human = _prefix(tmp_path, "h", bad)
    model = _prefix(tmp_path, "m", MODEL)
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "h_G.json" in err and "U+200B" in err, err


def test_the_distance_of_real_scores_with_ids_missing_on_one_side() -> None:
    """A sanity check of the left-out counts on the shipped VIST scores (C and R lack 156 human stories)."""
    shared_file("dhm-visual-storytelling", "data", "scores", "vist", "gt_test_G.json")
    folder = shared_file("dhm-visual-storytelling", "data", "scores", "vist")
    result = dhm_distance(read_dhm_scores(folder / "gt_test"), read_dhm_scores(folder / "llava_vc_p3"))
    assert result.n == 4897 and result.dropped["human"] == 158 and math.isfinite(result.dHM)


def test_standard_input_as_a_score_source_is_refused_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--human -` said "missing -_G.json, -_C.csv, -_R.csv"."""
    model = _prefix(tmp_path, "m", MODEL)
    err = one_error(capsys, "distance", "--human", "-", "--model", model)
    assert "standard input" in err and "missing" not in err, err


def test_no_common_id_shows_the_ids_of_each_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ids written as 45530.0 on one side (a CSV saved from pandas) matched nothing; the error did not show how
    the ids differ."""
    human = _prefix(tmp_path, "h", {d: {"45530": 0.5, "45531": 0.5} for d in "GCR"})
    model = _prefix(tmp_path, "m", {d: {"45530.0": 0.5} for d in "GCR"})
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "human G: 2 ids such as '45530', '45531'" in err and "model C: 1 id, '45530.0'" in err, err


def test_a_mean_of_huge_distances_does_not_overflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two per-story distances of 1e308 (each finite) summed past float64's range: dC came out null (inf) with
    numpy's RuntimeWarning, exit 0; per story, C and R of 1.7e308 each made dHM(s) infinite the same way."""
    from vistkit.scores.dhm import distance_from_tables

    human = _prefix(tmp_path, "h", {"G": HUMAN["G"], "C": {"1": 1e308, "2": 1e308}, "R": {"1": 1.7e308, "2": 0.0}})
    model = _prefix(tmp_path, "m", {"G": HUMAN["G"], "C": {"1": 0.0, "2": 0.0}, "R": {"1": 0.0, "2": 0.0}})
    capsys.readouterr()
    assert main(["distance", "--human", str(human), "--model", str(model), "-f", "json"]) == 0
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert got["dC"] == pytest.approx(1e308) and got["dR"] == pytest.approx(0.85e308)
    assert got["dHM"] == pytest.approx(1e308 / 3 + 0.85e308 / 3) and "Warning" not in err
    h = {"C": {"1": 1.7e308, "2": 1.7e308}, "R": {"1": 1.7e308, "2": 1.7e308}}
    m = {"C": {"1": 0.0, "2": 0.0}, "R": {"1": 0.0, "2": 0.0}}
    d = distance_from_tables(h, m, dimensions=("C", "R"))
    assert d.d["C"] == pytest.approx(1.7e308) and d.dHM == pytest.approx(1.7e308)
    assert d.per_story["1"]["HM"] == pytest.approx(1.7e308)


def test_a_score_without_a_story_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A _C.csv row `,0.5` or a G key "" was a story with the empty id: with one on both sides, n counted it."""
    with_empty = {d: {"": 0.3, **t} for d, t in HUMAN.items()}
    human = _prefix(tmp_path, "h", with_empty)
    model = _prefix(tmp_path, "m", {d: {"": 0.3, **t} for d, t in MODEL.items()})
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "h_G.json" in err and "empty story id" in err, err
    (tmp_path / "h_G.json").write_text(json.dumps(HUMAN["G"]), encoding="utf-8")
    err = one_error(capsys, "distance", "--human", human, "--model", model)
    assert "h_C.csv line 2" in err and "empty story id" in err, err


def test_g_bounded_on_one_side_only_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dHM prefix (raw GROOViST) against a per-item CSV whose G column is a metric within [-1, 1]: tanh was
    silently skipped on both sides, so the raw GROOViST side was compared untransformed."""
    human = _prefix(tmp_path, "h", HUMAN)
    model = tmp_path / "m.csv"
    rows = "".join(f"{i},{MODEL['G'][i]},{MODEL['C'][i]},{MODEL['R'][i]}\n" for i in ("1", "2"))
    model.write_text(f"id,rovist-vg-scaled,rovist-c,rovist-nr\n{rows}", encoding="utf-8")
    args = ["distance", "--human", human, "--model", model, "--g-metric", "rovist-vg-scaled"]
    code, err = run_cli(capsys, *args)
    assert code == 0 and "tanh" in err and "rovist-vg-scaled" in err, err
    code, err = run_cli(capsys, *args, "--tanh-g")  # chosen: no warning
    assert code == 0 and "warning" not in err, err
