"""Probe round 8: every output format of every verb (LaTeX escaping and numbers, strict JSON on stdout alone, CSV
that the csv module reads back, text tables in narrow terminals, score tables read back by other verbs)."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import make_study

from vistkit.cli import main
from vistkit.data.readers import write_jsonl
from vistkit.data.story import Story
from vistkit.report.tables import fmt_number, latex_table

WORDS = "we went to the park and had a great time with our friends family dog cat beach sun cake party".split()
HOSTILE = "sys_a&b%#{x}~^$\\[1]*"  # every LaTeX special character, brackets and a star

# one escape per special character (as tables._LATEX writes them), braced brackets, accent commands
_TOKEN = re.compile(
    r"\\text(?:backslash|asciitilde|asciicircum|bar|less|greater)\{\}|\\[&%_#${}]|\{\[\}|\{\]\}|\{\}(?=\*)|-\{\}(?=-)"
    r"|\\(?:ss|ae|AE|o|O|oe|OE|l|L|i)\{\}|\\[`'^~=.\"uvHrck]\{(?:\\[ij]|[A-Za-z])\}|---|--|``|''|\\ldots\{\}|.",
    re.S,
)
_BACK = {
    r"\textbackslash{}": "\\",
    r"\textasciitilde{}": "~",
    r"\textasciicircum{}": "^",
    r"\textbar{}": "|",
    r"\textless{}": "<",
    r"\textgreater{}": ">",
    "{[}": "[",
    "{]}": "]",
    "{}": "",
    "-{}": "-",
    r"\ss{}": "ß",
    "--": "\u2013",
    "``": "\u201c",
    "''": "\u201d",
}


def unlatex(cell: str, *, caption: bool = False) -> str:
    """The text a LaTeX cell reads as; fails on a special character that is not escaped (or escaped twice).
    Brackets are harmless in a caption (inside its braces)."""
    out = []
    for tok in _TOKEN.findall(cell):
        if tok in _BACK:
            out.append(_BACK[tok])
        elif len(tok) == 2 and tok[0] == "\\":
            out.append(tok[1])
        elif tok.startswith("\\") and "{" in tok:  # an accent command: base letter + combining mark
            import unicodedata

            marks = {"'": "\u0301", "`": "\u0300", '"': "\u0308", "^": "\u0302", "~": "\u0303", "c": "\u0327"}
            base = tok[tok.index("{") + 1 : -1].replace("\\", "")
            out.append(unicodedata.normalize("NFC", base + marks[tok[1]]))
        else:
            assert tok not in ("\\&%$#_{}~^" if caption else "\\&%$#_{}~^[]"), f"bare {tok!r} in LaTeX cell {cell!r}"
            out.append(tok)
    return "".join(out)


def latex_rows(tex: str) -> list[list[str]]:
    body = tex[tex.index(r"\toprule") + len(r"\toprule") : tex.index(r"\bottomrule")]
    rows = []
    for line in body.splitlines():
        if line.strip() and line.strip() != r"\midrule":
            assert line.endswith(r" \\")
            rows.append(line[: -len(r" \\")].split(" & "))
    return rows


def make_files(folder: Path, names: list[str], n: int = 12) -> tuple[Path, list[Path]]:
    rng = random.Random(0)
    refs: list[Story] = []
    systems: dict[str, list[Story]] = {name: [] for name in names}
    for i in range(n):
        photos = tuple(f"{i}{j}" for j in range(5))
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        refs.append(Story(f"r{i}", text, photo_ids=photos, system="human"))
        for k, name in enumerate(names):
            words = [w if rng.random() < 0.9 - 0.2 * k else rng.choice(WORDS) for w in text.split()]
            systems[name].append(Story(f"{k}-{i}", " ".join(words), photo_ids=photos, system=name))
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(refs, folder / "refs.jsonl")
    paths = []
    for name, stories in systems.items():
        write_jsonl(stories, folder / f"{name}.jsonl")
        paths.append(folder / f"{name}.jsonl")
    return folder / "refs.jsonl", paths


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------------------------------- LaTeX
def test_latex_every_special_character_escaped_once_in_cells_and_caption() -> None:
    names = [HOSTILE, "[x] first", "*best", "Ünïcödé Straße – “q”", "--per-item ---"]
    tex = latex_table(["system", "sacre_bleu"], [[n, 0.5] for n in names], caption=f"a {HOSTILE}\n\nb")
    rows = latex_rows(tex)
    assert [unlatex(c) for c in rows[0]] == ["system", "sacre_bleu"]
    assert [unlatex(r[0]) for r in rows[1:]] == names
    for r in rows[1:]:  # a row never starts with [ or * (the optional argument / star of the \\ before it)
        assert not r[0].startswith(("[", "*"))
    caption = tex[tex.index(r"\caption{") + len(r"\caption{") : tex.rindex("}\n\\end{table}")]
    assert "\n\n" not in caption  # a blank line (\par) inside \caption stops LaTeX
    assert unlatex(caption.split("\n")[0], caption=True) == f"a {HOSTILE}"


def test_latex_cell_with_blank_lines_stays_one_row() -> None:
    tex = latex_table(["system", "x"], [["a\n\nb", 1.0]])
    assert latex_rows(tex)[1] == ["a  b", "1.0000"]


def test_latex_other_non_ascii_is_named_in_a_comment() -> None:
    tex = latex_table(["system", "x"], [["XE_é字", 1.0]])
    assert tex.startswith("% ") and "字" in tex.splitlines()[0] and "é" not in tex.splitlines()[0]
    assert r"XE\_\'{e}字" in tex
    assert not latex_table(["system"], [["plain"]]).startswith("%")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(-0.0, "0.0000"), (1e-12, "1.0e-12"), (-1e-12, "-1.0e-12"), (1e20, "1.0000e+20"), (float("nan"), "n/a")],
)
def test_numbers_negative_zero_tiny_huge(value: float, shown: str) -> None:
    assert fmt_number(value) == shown


def test_compare_latex_with_hostile_system_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = ["sys_a&b%#{x}~^$", "[x]AREL", "XE_é"]
    refs, paths = make_files(tmp_path, names)
    code, out, err = run(["compare", *map(str, paths), "-r", str(refs), "-m", "bleu-4", "-f", "latex",
                          "--n-bootstrap", "20", "--n-samples", "20"], capsys)  # fmt: skip
    assert code == 0, err
    rows = latex_rows(out)
    shown = [unlatex(r[0]) for r in rows[1:]]
    assert shown == [f"{names[0]} (baseline)", names[1], names[2]]
    assert out.startswith(r"\begin{table}")  # nothing but the table on stdout


# --------------------------------------------------------------------------------------------------- CSV
def test_studio_status_csv_is_one_table_with_notes_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_study(tmp_path)
    code, out, err = run(["studio", "status", str(made.path), "-f", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["table", "row", "field", "value"]
    assert all(len(r) == 4 for r in rows) and rows.count(rows[0]) == 1  # one header, first
    assert {r[0] for r in rows[1:]} >= {"study", "annotators"}
    assert "alpha" in err and "undefined" in err  # the caption's note was dropped


# --------------------------------------------------------------------------------------------------- text
def test_narrow_terminal_gives_every_column_a_few_characters() -> None:
    from vistkit.report.tables import column_widths

    columns = ["annotator", "done", "median_seconds", "gold_passed", "gold_total"]
    cells = [[f"annotator-00{i}", "0", "", "0", "0"] for i in range(3)]
    widths = column_widths(columns, cells, 40)
    assert all(w is not None and w >= 4 for w in widths), widths  # was 8, 4, 8, 3, 1: 'gold_total' a letter a line
    assert sum(w for w in widths if w) + 3 * len(columns) + 1 <= 40


# --------------------------------------------------------------------------------------------------- JSON
def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON")

    return json.loads(text, parse_constant=refuse)  # one document: trailing text fails too


def test_score_and_compare_json_share_key_names_and_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs, paths = make_files(tmp_path, ["a&b", "=c"])
    code, out, err = run(["score", str(paths[0]), "-r", str(refs), "-m", "bleu-4,rouge-l", "-f", "json"], capsys)
    assert code == 0, err
    score = _strict(out)
    code, out, err = run(["compare", *map(str, paths), "-r", str(refs), "-m", "bleu-4,rouge-l", "-f", "json",
                          "--n-bootstrap", "20", "--n-samples", "20"], capsys)  # fmt: skip
    assert code == 0, err
    comp = _strict(out)
    assert comp["signatures"] == score["signatures"]  # was only metrics.M.signature
    assert comp["n"] == score["n"]  # was only metrics.M.n_items
    for m, value in score["scores"].items():
        assert comp["results"]["a&b"][m]["score"] == pytest.approx(value)


# --------------------------------------------------------------------------------------------------- round trip
def test_per_item_csv_with_hostile_ids_reads_back_into_distance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = ["a,b", 'q"uote', "=1+2", "-neg", "@at", "+plus"]
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(14)) for _ in ids]
    (tmp_path / "refs.json").write_text(json.dumps({i: [t] for i, t in zip(ids, texts, strict=True)}))
    for name, keep in (("h", 1.0), ("m", 0.5)):
        hyp = {i: " ".join(w if rng.random() < keep else "zz" for w in t.split())
               for i, t in zip(ids, texts, strict=True)}
        (tmp_path / f"{name}.json").write_text(json.dumps(hyp))
        code, out, err = run(["score", str(tmp_path / f"{name}.json"), "-r", str(tmp_path / "refs.json"),
                              "--hyp-format", "arel", "--key", "album", "-m", "rouge-l,bleu-4,cider-d",
                              "--per-item", str(tmp_path / f"{name}.csv"), "-q"], capsys)  # fmt: skip
        assert code == 0, err
    code, out, err = run(["distance", "--human", str(tmp_path / "h.csv"), "--model", str(tmp_path / "m.csv"),
                          "--g-metric", "bleu-4", "--c-metric", "rouge-l", "--r-metric", "cider-d",
                          "--per-item", "-", "-f", "json"], capsys)  # fmt: skip
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))  # the CSV alone on stdout, the JSON table on stderr
    assert [r["story_id"] for r in sorted(rows, key=lambda r: ids.index(r["story_id"].lstrip("'")))] == [
        "a,b", 'q"uote', "'=1+2", "'-neg", "'@at", "'+plus"]  # fmt: skip
    assert _strict(err[err.index("{") :])["n"] == len(ids)

    def read(name: str) -> dict[str, dict[str, float]]:
        with open(tmp_path / f"{name}.csv", newline="") as fh:
            rows = csv.DictReader(fh)
            return {r["id"]: {k: float(v) for k, v in r.items() if k != "id" and "signature" not in k} for r in rows}

    h, m = read("h"), read("m")
    for r in rows:
        assert float(r["dC"]) == pytest.approx(abs(h[r["story_id"]]["rouge-l"] - m[r["story_id"]]["rouge-l"]))


@pytest.mark.parametrize("width", [40, 60])
def test_compare_cells_never_fold_their_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    refs, paths = make_files(tmp_path, ["a_very_long_system_name_from_a_file", "b", "c"])
    code, out, err = run(["compare", *map(str, paths), "-r", str(refs), "-m", "bleu-4,rouge-l,cider-d",
                          "--n-bootstrap", "20", "--n-samples", "20"], capsys)  # fmt: skip
    assert code == 0, err
    code, js, err = run(["compare", *map(str, paths), "-r", str(refs), "-m", "bleu-4,rouge-l,cider-d", "-f", "json",
                         "--n-bootstrap", "20", "--n-samples", "20"], capsys)  # fmt: skip
    words = {w.strip("[],*") for line in out.splitlines() if line.startswith("│") for w in line.split()}
    for system in json.loads(js)["results"].values():
        for r in system.values():  # every number of the table appears whole in some line (was 7.76 / 58)
            assert {fmt_number(r["score"]), fmt_number(r["ci"][0]), fmt_number(r["ci"][1])} <= words


def test_score_excluded_note_in_latex_caption_and_csv_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs, paths = make_files(tmp_path, ["sys"])
    extra = Story("orphan", "a story without references", photo_ids=tuple("vwxyz"), system="sys")
    from vistkit.data.readers import read_stories

    write_jsonl([*read_stories(paths[0]), extra], paths[0])
    args = ["score", str(paths[0]), "-r", str(refs), "-m", "rouge-l"]
    code, out, err = run([*args, "-f", "latex"], capsys)
    assert code == 0, err
    assert "rouge-l: 1 item(s) excluded" in out[out.index(r"\caption") :]  # was only in the text table
    code, out, err = run([*args, "-f", "csv"], capsys)
    assert code == 0, err
    assert "excluded" not in out and "rouge-l: 1 item(s) excluded" in err  # was dropped
    assert len(list(csv.reader(io.StringIO(out)))) == 2


def test_json_of_arrays_paths_and_sets_is_strict() -> None:
    import numpy as np

    from vistkit.report.tables import dumps_json

    payload = {"a": np.array([1.0, np.nan, np.inf]), "p": Path("/x"), "s": {"b", "a"}, "f": np.float32(-np.inf)}
    assert _strict(dumps_json(payload)) == {"a": [1.0, None, None], "p": "/x", "s": ["a", "b"], "f": None}


@pytest.mark.parametrize("fmt", ["csv", "latex"])
def test_metric_card_in_csv_and_latex(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["metrics", "--info", "rouge-l", "-f", fmt], capsys)
    assert code == 0, err
    if fmt == "csv":  # was the rendered Markdown
        rows = list(csv.reader(io.StringIO(out)))
        assert rows[0] == ["field", "value"] and ["name", "rouge-l"] in rows and all(len(r) == 2 for r in rows)
    else:
        assert r"\begin{tabular}{ll}" in out  # prose left-aligned
        assert unlatex(latex_rows(out)[1][1]) == "rouge-l"


def test_latex_numeric_columns_right_aligned() -> None:
    tex = latex_table(["system", "bleu", "note"], [["a", 0.5, "x"], ["b", "0.1 [0.0, 0.2]*", "y"]])
    assert r"\begin{tabular}{lrl}" in tex


def test_text_title_keeps_brackets_of_file_names() -> None:
    from vistkit.report.tables import text_table

    out = text_table(["dG", "n"], [[0.5, 3]], title="dHM: h[x].csv vs m[bold]y.csv")
    # rich read [x] and [bold] as markup and dropped them
    assert "dHM: h[x].csv vs m[bold]y.csv" in " ".join(out.split())


def test_meta_report_with_dollar_and_tex_in_system_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "meta"
    text = (fixtures / "ref_pairs_small.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    names = {"m1": "sys$a\\b$_{x", "m2": "=m2 &%#"}
    rows = [rows[0], *[[names.get(c, c) for c in r] for r in rows[1:]]]
    pairs = tmp_path / "pairs.csv"
    with open(pairs, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    code, _, err = run(["meta", "pairs", str(pairs), "-m", "rouge-l", "-r", str(fixtures / "references_small.jsonl"),
                          "--bootstrap", "20", "--report", str(tmp_path / "rep"), "-q"], capsys)  # fmt: skip
    assert code == 0, err  # matplotlib read "$a\b$" as mathtext: an unexpected ValueError
    assert (tmp_path / "rep" / "beats_reference.png").exists()
    tex = (tmp_path / "rep" / "beats_reference.tex").read_text(encoding="utf-8")
    assert names["m1"] in {unlatex(r[1]) for r in latex_rows(tex)}


def test_vrank_predict_says_format_is_ignored_without_output(capsys: pytest.CaptureFixture[str]) -> None:
    pairs = Path(__file__).parent / "fixtures" / "meta" / "vhed_small.csv"
    code, out, err = run(["vrank", "predict", str(pairs), "--model", "/nonexistent-vrank", "-f", "json"], capsys)
    assert code == 1 and not out
    assert "--format is ignored" in err  # without --output the CSV goes to stdout: -f json said nothing
