"""Probes, round 10: the REPORTS and PLOTS of ``vistkit meta ... --report`` (`vistkit.report.plots`, `.html`).

Probed with hostile and degenerate data: names (systems, metrics, aspects, error types) with HTML/JS, mathtext and
TeX specials (``$x$``, ``_``, ``^``, ``\\``), 300 characters, right-to-left, CJK, emoji and new lines; NaN, infinite,
constant, negative and 1e300 scores, one pair, one system, one item, 200 systems or metrics, a 200 x 50 heatmap,
100,000 scores; ``MPLBACKEND=garbage`` / ``TkAgg`` without a display, a matplotlibrc with ``text.usetex: True`` or an
unknown font, read-only and missing ``MPLCONFIGDIR`` / HOME; figure names with dots and ``.svg``; the same figure
twice; the page's numbers against the JSON of the same run. Already right: the page escapes every name, fetches
nothing (figures inlined, no script, font or stylesheet from outside), and ``$`` no longer crashes. What was wrong:

- a 300-character name stretched the figure to 68,000 pixels; CJK and emoji were drawn as empty boxes (with a
  "Glyph ... missing" warning per character and file on stderr) and Arabic / Hebrew letters in reverse order;
- figure sizes grew without bound: a 200 x 50 correlation heatmap took 7 minutes and made a 28 MB PNG;
- a matplotlibrc with ``text.usetex: True`` or ``MPLBACKEND=garbage`` stopped a report with an "unexpected"
  error (a bug report request); an unknown ``font.family`` printed a findfont line per label; inside a Python
  session vistkit switched the user's backend to Agg and changed their rcParams for good;
- the PDFs held their creation date, so two runs never gave the same bytes;
- infinite scores vanished from the box plots without a word, an all-NaN metric was an empty panel / bar,
  heatmap cells of -0.004 read "-0.00", and scores of +-1.7e308 stopped the report (an overflowing axis);
- a figure named ``run_0.5`` was written as ``run_0.png``; ``.svg`` was silently PNG + PDF.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from meta_dummies import FIX, dummy_metrics_registered

from vistkit.cli import main
from vistkit.report import plots
from vistkit.report.tables import fmt_number

HOSTILE = ["<script>alert(1)</script>", "$x$", "a_b^c\\d", "x" * 300, "中文", "🙂", "שלום", "new\nline"]


def _svg(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.svg").read_text(encoding="utf-8")


def test_names_are_drawn_verbatim_short_and_distinct() -> None:
    """Was wrong: a 300-character name was drawn whole (a 68,000-pixel-wide figure), CJK and emoji as boxes, Hebrew
    reversed, a new line split the label; now such characters are Python escapes, long names are shortened in the
    middle, names that would then look alike get #k, and the note names every change."""
    plots.reset_label_notes()
    long_a, long_b = "a" * 30 + "X" + "z" * 30, "a" * 30 + "Y" + "z" * 30
    shown = plots._labels([*HOSTILE, long_a, long_b])
    assert shown[:3] == HOSTILE[:3]  # drawn as they are (mathtext is off)
    assert shown[3] == "x" * 19 + "\u2026" + "x" * 20 and len(shown[3]) == plots._MAX_LABEL
    assert shown[4:8] == ["\\u4e2d\\u6587", "\\U0001f642", "\\u05e9\\u05dc\\u05d5\\u05dd", "new\\nline"]
    assert shown[8] != shown[9] and shown[8].endswith(" #1") and shown[9].endswith(" #2")
    [note] = plots.label_notes()
    assert note.startswith("In the figures, 7 names are shortened")
    assert "'\\u4e2d\\u6587' is '中文'" in note and "'new\\nline' is 'new\\nline'" in note  # drawn; repr
    plots.reset_label_notes()
    assert plots.label_notes() == [] and plots._labels(["plain-name"]) == ["plain-name"] and not plots._SHOWN


def test_hostile_names_draw_without_warnings_and_literally(tmp_path: Path) -> None:
    """Was wrong: every CJK or emoji character gave a "Glyph ... missing from font(s) DejaVu Sans" warning per file
    written (dozens of lines on stderr); ``$x$`` must stay two dollars and an x in the vector file."""
    names = {n: 0.5 for n in HOSTILE}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = plots.plot_pair_accuracy(names, {}, {n: 3 for n in names}, tmp_path / "acc.svg")
    svg = _svg(tmp_path, "acc")
    assert png == tmp_path / "acc.png" and (tmp_path / "acc.pdf").exists()
    assert ">$x$<" in svg and "a_b^c\\d" in svg and "&lt;script&gt;" in svg and "\\u4e2d\\u6587" in svg


def test_user_settings_neither_break_nor_change(tmp_path: Path) -> None:
    """Was wrong: ``text.usetex: True`` (no LaTeX here) was "unexpected RuntimeError ... this is a bug", an unknown
    font family printed findfont lines; and a report changed the session's rcParams (mathtext off, spines) for
    good. Now the figures use matplotlib's defaults plus vistkit's style, and the user's settings are back after."""
    import matplotlib

    with matplotlib.rc_context({"text.usetex": True, "font.family": "NoSuchFont", "lines.linewidth": 7.0}):
        before = dict(matplotlib.rcParams)
        plots.plot_beats_reference({"human": {"s$1$": {"ratio": 0.25}}}, tmp_path / "b")
        assert dict(matplotlib.rcParams) == before
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_same_figure_gives_the_same_bytes(tmp_path: Path) -> None:
    """Was wrong: the PDF held its creation date (two runs, two files); now PNG, PDF and SVG carry no date."""
    scores = {"m": {"human": np.array([1.0, 2.0, 3.0]), "a": np.array([2.0, 2.5, -1.0])}}
    for i in (1, 2):
        plots.plot_score_distributions(scores, tmp_path / f"d{i}.svg")
    for suffix in (".png", ".pdf", ".svg"):
        assert (tmp_path / f"d1{suffix}").read_bytes() == (tmp_path / f"d2{suffix}").read_bytes(), suffix
    assert b"CreationDate" not in (tmp_path / "d1.pdf").read_bytes()


def test_environment_cannot_stop_a_figure(tmp_path: Path) -> None:
    """Was wrong: ``MPLBACKEND=garbage`` stopped a report ("unexpected ValueError: Key backend: 'garbage' is not a
    valid value"), and so did a matplotlibrc with ``text.usetex: True``. Now matplotlib is imported without the
    backend (vistkit never uses one) and the figure is byte for byte the one drawn here, no display needed."""
    config = tmp_path / "mplconfig"
    config.mkdir()
    (config / "matplotlibrc").write_text("text.usetex: True\nfont.family: NoSuchFont\nsavefig.dpi: 1000\n")
    script = (
        "import sys; from pathlib import Path; from vistkit.report import plots; "
        "plots.plot_pair_accuracy({'m$1$': 0.75}, {'m$1$': (0.5, 0.9)}, {'m$1$': 8}, Path(sys.argv[1]))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(MPLBACKEND="garbage", MPLCONFIGDIR=str(config))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "there")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    plots.plot_pair_accuracy({"m$1$": 0.75}, {"m$1$": (0.5, 0.9)}, {"m$1$": 8}, tmp_path / "here")
    for suffix in (".png", ".pdf"):
        assert (tmp_path / f"there{suffix}").read_bytes() == (tmp_path / f"here{suffix}").read_bytes(), suffix


def test_figure_size_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was wrong: figures grew with the data without limit (200 systems: a 450-inch, 68,000-pixel PNG; a 200 x 50
    heatmap drew 30,000 numbers in 7 minutes, a 28 MB PNG). Now no side is longer than `_MAX_INCHES` nor has more
    than `_MAX_PIXELS` pixels, and a heatmap with more than `_MAX_CELL_TEXTS` cells, or cells too small for a
    number (300 aspects of one metric wrote numbers over each other), shows colours only."""
    from PIL import Image

    monkeypatch.setattr(plots, "_MAX_INCHES", 9.0)  # the bounds scaled down, so that the test stays fast
    monkeypatch.setattr(plots, "_MAX_PIXELS", 800)
    monkeypatch.setattr(plots, "_MAX_CELL_TEXTS", 20)
    ratios = {f"system-{i}": {"ratio": i / 45} for i in range(45)}
    plots.plot_beats_reference({"human": ratios, "m": ratios}, tmp_path / "b")
    plots.plot_correlation_heatmaps({"r": np.full((6, 5), 0.123)}, list("abcdef"), list("vwxyz"), tmp_path / "h.svg",
                                    title="T")  # fmt: skip
    for name in ("b", "h"):
        with Image.open(tmp_path / f"{name}.png") as im:
            assert max(im.size) <= 800 * 1.15, im.size  # tight bounding box: within a few percent
    svg = _svg(tmp_path, "h")
    texts = re.findall(r">([^<>]+)</text>", svg)
    assert "T (values in the table)" in texts and "0.12" not in texts
    few = {k: np.full((1, 15), 0.123) for k in "rst"}  # 15 cells, but 0.15 inch wide: no room for numbers
    plots.plot_correlation_heatmaps(few, ["m"], [f"a{i}" for i in range(15)], tmp_path / "w.svg", title="W")
    texts = re.findall(r">([^<>]+)</text>", _svg(tmp_path, "w"))
    assert "W (values in the table)" in texts and "0.12" not in texts


def test_undefined_and_infinite_values_are_said(tmp_path: Path) -> None:
    """Was wrong: infinite scores vanished from the box plots, an all-NaN metric was an empty panel and an empty
    bar, a correlation of -0.004 read "-0.00", scores of +-1.7e308 stopped the report ("unexpected ValueError: arange:
    cannot compute length"); now the panel says how many infinite scores it leaves out or that it has no finite
    score, draws huge scores divided by a power of ten (the axis says so), the bar says n/a (n=0), and the heatmap
    says 0.00."""
    scores = {
        "inf": {"human": np.array([np.inf, 1.0, 2.0]), "a": np.array([-np.inf, np.nan, 3.0, 4.0])},
        "none": {"human": np.array([np.nan]), "a": np.array([np.nan, np.nan])},
        "huge": {"a": np.array([1.7e308, -1.7e308, 0.0])},
    }
    plots.plot_score_distributions(scores, tmp_path / "d.svg")
    svg = _svg(tmp_path, "d")
    assert "2 infinite scores not shown" in svg and "no finite score" in svg and "score per story / 1e+308" in svg
    plots.plot_pair_accuracy({"m": None, "k": 0.5}, {"m": (None, None)}, {"k": 4}, tmp_path / "a.svg")
    assert "n/a (n=0)" in _svg(tmp_path, "a") and "0.500 (n=4)" in _svg(tmp_path, "a")
    plots.plot_correlation_heatmaps({"r": np.array([[-0.004, np.nan, -0.5]])}, ["m"], ["x", "y", "z"],
                                    tmp_path / "h.svg", title="t")  # fmt: skip
    texts = re.findall(r">([^<>]+)</text>", _svg(tmp_path, "h"))
    assert "0.00" in texts and "-0.00" not in texts and "n/a" in texts and "-0.50" in texts


def test_figure_names_keep_their_dots_and_nothing_is_drawable(tmp_path: Path) -> None:
    """Was wrong: the figure ``run_0.5`` was written as ``run_0.png`` (``.5`` taken for a file type) and ``x.svg``
    as PNG and PDF only; an empty input was a ValueError from matplotlib. Now the name is kept, ``.svg`` adds an
    SVG, and an empty input draws a small figure that says so."""
    assert plots.plot_pair_accuracy({"m": 0.5}, {}, {}, tmp_path / "run_0.5") == tmp_path / "run_0.5.png"
    assert (tmp_path / "run_0.5.pdf").exists() and not (tmp_path / "run_0.png").exists()
    plots.plot_score_distributions({}, tmp_path / "empty.svg")
    plots.plot_correlation_heatmaps({}, [], [], tmp_path / "none.png", title="nothing")
    assert "no metric" in _svg(tmp_path, "empty") and (tmp_path / "none.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "empty.pdf", "empty.png", "empty.svg", "none.pdf", "none.png", "run_0.5.pdf", "run_0.5.png",
    ]  # fmt: skip


def _html_tables(page: str) -> list[list[list[str]]]:
    """Every table of the page as rows of unescaped cell texts (header row first)."""
    tables = []
    for table in re.findall(r"<table>(.*?)</table>", page, flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
        tables.append([[html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows])
    return tables


def test_report_page_is_escaped_self_contained_and_matches_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile system and error names through ``meta errors --report``: the page escapes them, fetches nothing,
    names the figure labels it changed (stderr too), and its numbers and signatures are those of the JSON that the
    same run printed (no number of the page differs from the JSON's, rounded). Was wrong: two runs never gave the
    same report (dated PDFs, the page's time); with ``SOURCE_DATE_EPOCH`` every file is now the same."""
    lines = ["system,item,$E_1$,<b>rep</b>,語法" + "g" * 60 + ",text"]
    for k, system in enumerate(["human", *HOSTILE]):
        for i in range(3):
            flags = f"{(i + k) % 2},{(i * k) % 2},{(i + 1) * k % 3 // 2}"
            lines.append(f"\"{system}\",i{i},{flags},{' '.join(['w'] * (1 + (i * 3 + k) % 7))}")
    labels = tmp_path / "labels.csv"
    labels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep, again = tmp_path / "rep", tmp_path / "again"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    with dummy_metrics_registered():
        assert main(["meta", "errors", str(labels), "-m", "meta-test-length", "--report", str(again), "-q"]) == 0
        capsys.readouterr()
        code = main(["meta", "errors", str(labels), "-m", "meta-test-length,meta-test-shortness", "-f", "json",
                     "--report", str(rep)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    page = (rep / "index.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<b>rep" not in page and "&lt;b&gt;rep&lt;/b&gt;" in page
    links = re.findall(r"(?:src|href)\s*=\s*[\"']?([^\"' >]*)", page)
    assert links and all(link.startswith("data:image/png;base64,") for link in links)
    assert not re.search(r"url\(|@import|https?://|<link|<iframe|<object", page)
    assert "In the figures, " in page and "note: in the figures, " in err and "Glyph" not in err
    [table, signatures] = _html_tables(page)
    want = [
        [m, e, *(fmt_number(v[k]) for k in ("r", "p", "n", "n_error"))]
        for m, d in data["point_biserial"].items()
        for e, v in d.items()
    ]
    assert table[0] == ["metric", "error", "r", "p", "n", "with error"] and table[1:] == want
    assert signatures[1:] == [[m, s] for m, s in data["signatures"].items()]
    assert not any(np.isnan(float(r[2])) for r in table[1:] if r[2] != "n/a")
    assert "2023-11-14 22:13 UTC" in page
    with dummy_metrics_registered():  # the same command again: the same bytes in every file
        assert main(["meta", "errors", str(labels), "-m", "meta-test-length,meta-test-shortness", "-f", "json",
                     "--report", str(again), "--force", "-q"]) == 0  # fmt: skip
    page_again = (again / "index.html").read_text(encoding="utf-8").replace(f"{again} --force", str(rep))
    assert page_again == page
    for file in rep.iterdir():
        if file.name != "index.html":
            assert (again / file.name).read_bytes() == file.read_bytes(), file.name


def test_pairs_report_numbers_match_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``meta pairs --report`` next to ``-f json`` of the same run: the page's accuracy table is the JSON's numbers
    and result.json is the JSON printed. Was wrong: the page left out what the printed table's notes say (here: 1
    of 8 pairs has no human preference and is left out; elsewhere pairs without a score, n/a reasons)."""
    rep = tmp_path / "rep"
    with dummy_metrics_registered():
        code = main(["meta", "pairs", str(FIX / "vhed_small.csv"), "-m", "meta-test-length,meta-test-shortness",
                     "-f", "json", "--bootstrap", "20", "--report", str(rep)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert json.loads((rep / "result.json").read_text(encoding="utf-8")) == data
    page = (rep / "index.html").read_text(encoding="utf-8")
    assert "1 of 8 pairs have no human preference (a gap of 0) and are left out" in page
    accuracy = _html_tables(page)[0]
    column = accuracy[0].index("all")
    for row in accuracy[1:]:
        assert row[column] == fmt_number(data["accuracy"][row[0]]["all"]), row
    assert data["accuracy"]["meta-test-length"]["all"] == pytest.approx(4 / 7)


def test_many_metrics_and_close_edges_stay_apart(tmp_path: Path) -> None:
    """Was wrong: the ninth metric's line (and bar) had the first one's colour and marker, and gap buckets with edges
    0.5 and 0.5000000000000001 were both labelled "0.5"; now each round of colours gets another marker (bars another
    hatch) and edges get as many digits as keep them apart."""
    assert plots._line(0) != plots._line(8) and plots._line(8) != plots._line(64)
    from vistkit.meta.pairs import edge_texts

    assert edge_texts([0.0, 0.5, 0.5000000000000001, 1.0]) == ["0", "0.5", "0.5000000000000001", "1"]
    assert edge_texts([0.0, 0.25, 1.0]) == ["0", "0.25", "1"]
    by_gap = {f"m{i}": [{"accuracy": i / 10, "n": 3, "low": 0.5, "high": 0.5000000000000001}] for i in range(9)}
    plots.plot_accuracy_by_gap(by_gap, tmp_path / "g.svg")
    texts = re.findall(r">([^<>]+)</text>", _svg(tmp_path, "g"))
    assert "0.5\u20130.5000000000000001" in texts


def test_an_unusable_mplconfigdir_is_one_warning(tmp_path: Path) -> None:
    """Was wrong: ``MPLCONFIGDIR`` under a file printed matplotlib's "mkdir -p failed ..." and "Matplotlib created a
    temporary cache directory ..." on every report (and rebuilt the font cache each time); now one warning, and the
    cache goes to vistkit's cache folder as when HOME cannot be written."""
    (tmp_path / "file").write_text("x")
    env = {k: v for k, v in os.environ.items() if k not in ("VISTKIT_QUIET", "XDG_CACHE_HOME")}
    env.update(MPLCONFIGDIR=str(tmp_path / "file" / "mpl"), VISTKIT_CACHE=str(tmp_path / "cache"))
    script = "from vistkit.report.plots import _matplotlib; print(_matplotlib().get_configdir())"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "cache" / "matplotlib")
    assert proc.stderr == (
        f"warning: MPLCONFIGDIR={tmp_path / 'file' / 'mpl'} cannot be used (a part of the path is a file, not a "
        f"folder); matplotlib's cache goes to {tmp_path / 'cache' / 'matplotlib'} instead\n"
    )


def test_long_names_wrap_inside_the_page_and_numbers_do_not() -> None:
    """Was wrong: a 300-character system name or a long signature (no spaces) widened its table past the page;
    now table cells and commands may break anywhere, number cells never."""
    from vistkit.report.html import _CSS

    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", _CSS.replace("\n", "")))
    assert "overflow-wrap:anywhere" in rules["th,td"] and "overflow-wrap:anywhere" in rules["pre"]
    assert "white-space:nowrap" in rules["td.num"] and "overflow-wrap:normal" in rules["td.num"]
