"""The command line follows the conventions sacreBLEU users know (issue 18): one meaning per short flag across
every verb, ``-`` for standard input, ``--per-item -`` to standard output, ``-V``, ``-q``, ``-b/--score-only``,
the signature in ``--format csv``, ``-m all``, tables and help that fit an 80-column terminal, and help text that
says what it means (``[ray]`` kept, FILE / choices instead of ``<bool>`` / ``{hypotheses}``)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit import __version__
from vistkit.cli import _load_commands, app, first_sentence, main
from vistkit.metrics.base import get_metric_class, list_metrics, range_label

REPO = Path(__file__).resolve().parents[1]

HYPS = [
    {"story_id": "s1", "text": "we went to the park . the park was nice . we went to the park again ."},
    {"story_id": "s2", "text": "the cake was big . everyone sang a song . we danced all night ."},
]
# rovist-nr by hand: s1 as in tests/test_cli.py (sentence pairs share 2/7, 5/6, 2/8 of their words), s2 = 1
NR = {"s1": 1 - (2 / 7 + 5 / 6 + 2 / 8) / 3 / 2, "s2": 1.0}


def _walk(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


@pytest.fixture(scope="module")
def cli_tree() -> list[tuple[tuple[str, ...], object]]:
    _load_commands()
    return list(_walk(typer.main.get_command(app)))


def _run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))


# --------------------------------------------------------------------------------------------------- flags
def test_every_short_flag_has_one_long_meaning_across_the_cli(cli_tree: list) -> None:
    meaning: dict[str, set[str]] = {}
    where: dict[str, list[str]] = {}
    for path, command in cli_tree:
        for param in [*command.params, command.get_help_option(typer.Context(command))]:  # type: ignore[attr-defined]
            if param is None or getattr(param, "param_type_name", "") != "option":
                continue
            shorts = [o for o in param.opts if re.fullmatch(r"-[A-Za-z]", o)]
            longs = sorted(o for o in param.opts if o.startswith("--"))
            for s in shorts:
                meaning.setdefault(s, set()).add(",".join(longs))
                where.setdefault(s, []).append(" ".join(path) or "vistkit")
    clashes = {s: m for s, m in meaning.items() if len(m) > 1}
    assert not clashes, clashes
    # the decisions of the flag table (docs: CHANGELOG): -o writes, -O is a metric option, -m the metrics
    assert meaning["-o"] == {"--output"} and meaning["-O"] == {"--option"} and meaning["-m"] == {"--metrics"}
    assert meaning["-q"] == {"--quiet"} and meaning["-V"] == {"--version"} and meaning["-b"] == {"--score-only"}
    assert meaning["-f"] == {"--format"} and meaning["-r"] == {"--references"} and meaning["-k"] == {"--key"}
    # every verb (not the groups) takes -q
    leaves = [" ".join(p) for p, c in cli_tree if p and not getattr(c, "commands", None)]
    assert sorted(set(where["-q"]) - {"vistkit"}) == sorted(leaves)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("-V", "--version"):
        assert _run(capsys, flag)[:2] == (0, f"vistkit {__version__}\n")


# --------------------------------------------------------------------------------------------------- help
def test_every_help_fits_80_columns_and_keeps_its_text(
    cli_tree: list, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for path, _ in cli_tree:
        code, out, err = _run(capsys, *path, "--help")
        name = " ".join(path) or "vistkit"
        assert code == 0 and err == "", name
        usage = out.splitlines()[0]
        assert usage.startswith("Usage: vistkit") and "{" not in usage and "<" not in usage, (name, usage)
        assert not re.search(r"<(bool|str|int|float|path|list)", out), name  # typer's type labels
        assert "…" not in out and "\\[" not in out, name  # nothing truncated, no escape shown
        assert max(len(line) for line in out.splitlines()) <= 80, name
    for verb in (["score"], ["compare"], ["distance"], ["meta", "pairs"]):
        out = _run(capsys, *verb, "--help")[1]
        assert "pip install 'vistkit[ray]'" in " ".join(out.split())  # rich markup used to eat "[ray]"
        assert "--engine local|ray" in out
    out = _run(capsys, "score", "--help")[1]
    assert "Usage: vistkit score [OPTIONS] FILE" in out and "--key KEY" in out and "--format text|json|csv|latex" in out
    assert "--hyp-format FORMAT" in out and "sis, storylets, challenge" in " ".join(out.split())
    assert re.search(r"--drop-non-ascii\s+meteor-vist", out)  # a flag shows no type at all
    assert "--test bs|ar" in _run(capsys, "compare", "--help")[1]
    demo = " ".join(_run(capsys, "studio", "demo", "--help")[1].split())
    assert "--host TEXT Interface the server listens on" in demo and "--port INTEGER TCP port" in demo
    main_help = _run(capsys, "--help")[1]
    assert "vrank Vrank (Hsu et al. 2022): train on human story rankings" in " ".join(main_help.split())


def test_first_sentence_skips_abbreviations() -> None:
    assert first_sentence("Vrank (Hsu et al. 2022): train. More.") == "Vrank (Hsu et al. 2022): train."
    assert first_sentence("Accuracy (Vrank Eq. 1-2) per subset.\n\nDetails.") == "Accuracy (Vrank Eq. 1-2) per subset."
    assert first_sentence("No period at all") == "No period at all"


def test_distance_c_default_is_the_same_for_stories_and_tables(capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.scores.dhm import DEFAULT_METRICS
    from vistkit.scores.distance import DEFAULT_COLUMNS

    for d in "GCR":
        assert DEFAULT_COLUMNS[d][0] == DEFAULT_METRICS[d]
    out = " ".join(_run(capsys, "distance", "--help")[1].split())
    assert "default dhm-c" in out and "rovist-c)" not in out


def test_story_formats_of_the_help_are_the_readers_formats() -> None:
    from vistkit.commands.common import STORY_FORMATS
    from vistkit.data.readers import FORMATS

    assert tuple(STORY_FORMATS.split("|")) == FORMATS


# --------------------------------------------------------------------------------------------------- tables
@pytest.mark.parametrize("verb", [("formats",), ("metrics",), ("models", "list")])
def test_listings_fit_an_80_column_terminal(
    verb: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = _run(capsys, *verb)
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert code == 0 and table and max(len(line) for line in table) <= 80


_CELL = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: f"{v:.4f}"),
    st.from_regex(r"https://example\.org/a/[A-Za-z0-9_-]{8,60}", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9-]{0,30}", fullmatch=True),
    st.lists(st.from_regex(r"[a-z]{1,12}", fullmatch=True), min_size=1, max_size=12).map(" ".join),
    st.from_regex(r"[\u4e00-\u9fa5]{1,10}", fullmatch=True),  # wide characters: two terminal columns each
    st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=2, max_size=4).map("\n".join),  # lines
)


@settings(max_examples=150, deadline=None)
@given(
    n_cols=st.integers(1, 6),
    data=st.data(),
    width=st.integers(40, 160),
)
def test_text_tables_never_fold_numbers_or_links(n_cols: int, data: st.DataObject, width: int) -> None:
    """Whatever the terminal width, every number and every link of a table is printed whole on one line (a
    folded link cannot be copied); the table is wider than the terminal only when those alone need more."""
    from rich.cells import cell_len

    from vistkit.report.tables import column_widths, text_table

    columns = [f"column {i}" for i in range(n_cols)]
    rows = data.draw(st.lists(st.lists(_CELL, min_size=n_cols, max_size=n_cols), min_size=1, max_size=4))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", str(width))
        text = text_table(columns, rows)
    lines = text.splitlines()
    for cell in {c for r in rows for c in r if " " not in c and (c.startswith("https://") or c[:1] in "-0123456789")}:
        assert any(cell in line for line in lines), cell
    hard = [
        max(len(r[i]) for r in rows if " " not in r[i] and r[i][:1] in "h-0123456789")
        if any(" " not in r[i] and r[i][:1] in "h-0123456789" for r in rows)
        else 1
        for i in range(n_cols)
    ]
    if sum(hard) + 3 * n_cols + 1 <= width:
        assert max(cell_len(line) for line in lines) <= width
    widths = column_widths(columns, [[str(c) for c in r] for r in rows], width)
    assert all(w is None for w in widths) or all(w is not None and w >= 1 for w in widths)


def test_invite_links_are_whole_on_a_narrow_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    study = tmp_path / "s.db"
    stories = tmp_path / "m.json"
    stories.write_text(json.dumps({"1": "a dog . a cat .", "2": "we ran . we sat ."}))
    code, out, _ = _run(capsys, "studio", "init", str(study), "--task", "likert", "-s", f"m={stories}")
    assert code == 0
    monkeypatch.setenv("COLUMNS", "50")
    code, out, _ = _run(capsys, "studio", "invite", str(study), "--n", "2", "--base-url", "http://127.0.0.1:8000")
    links = re.findall(r"http://127\.0\.0\.1:8000/a/[A-Za-z0-9_-]+", out)
    assert code == 0 and len(links) == 2 and all(len(link) > 40 for link in links)


def test_metrics_name_the_weights_vistkit_does_not_ship(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "metrics", "-f", "csv")
    needs = {r[0]: r[2] for r in csv.reader(io.StringIO(out)) if r}
    assert code == 0
    for name in ("rovist-c", "dhm-c", "rovist-vg", "vrank"):
        if name in needs:
            assert "weights:" in needs[name] and ("not shipped" in needs[name] or "none is shipped" in needs[name])
    assert needs.get("bleu-4") == "references, Java 8+" and needs.get("coherence") == "nothing"
    assert not any(v == "-" for v in needs.values())


def test_latex_escapes_signature_bars_and_braces() -> None:
    from vistkit.report.tables import latex_table

    tex = latex_table(["metric"], [["a_b"]], caption="bleu|key:story|sb:[x] {y} 100% & $5 ~ ^")
    caption = tex.splitlines()[-2]
    assert caption == (
        r"\caption{bleu\textbar{}key:story\textbar{}sb:[x] \{y\} 100\% \& \$5 \textasciitilde{} "
        r"\textasciicircum{}}"
    )
    assert r"a\_b" in tex


# --------------------------------------------------------------------------------------------------- score
@pytest.fixture
def hyp_file(tmp_path: Path) -> Path:
    p = tmp_path / "hyps.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in HYPS), encoding="utf-8")
    return p


@pytest.fixture
def nr() -> None:
    if "rovist-nr" not in list_metrics():
        pytest.skip("rovist-nr is not registered")


@pytest.mark.parametrize("shape", ["jsonl", "json-dict", "json-records", "csv", "tsv"])
def test_score_reads_stories_from_stdin(
    shape: str, nr: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = {
        "jsonl": "".join(json.dumps(s) + "\n" for s in HYPS),
        "json-dict": json.dumps({s["story_id"]: s["text"] for s in HYPS}),
        "json-records": json.dumps(HYPS),
        "csv": "story_id,text\n" + "".join(f'{s["story_id"]},"{s["text"]}"\n' for s in HYPS),
        "tsv": "story_id\ttext\n" + "".join(f"{s['story_id']}\t{s['text']}\n" for s in HYPS),
    }[shape]
    _stdin(monkeypatch, "\ufeff" + text if shape == "csv" else text)
    code, out, _ = _run(capsys, "score", "-", "-m", "rovist-nr", "-f", "json")
    assert code == 0
    assert json.loads(out)["scores"]["rovist-nr"] == pytest.approx(sum(NR.values()) / 2, abs=1e-12)


def test_stdin_errors_are_one_sentence(nr: None, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    _stdin(monkeypatch, "")
    code, _, err = _run(capsys, "score", "-", "-m", "rovist-nr")
    assert code == 1 and "standard input is empty" in err
    _stdin(monkeypatch, "{not json")
    code, _, err = _run(capsys, "score", "-", "-m", "rovist-nr")
    assert code == 1 and err.startswith("error: <stdin>: invalid JSON")


def test_per_item_dash_writes_csv_to_stdout_and_the_table_to_stderr(
    hyp_file: Path, nr: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "--per-item", "-")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["id", "rovist-nr", "rovist-nr signature"] and len(rows) == 3
    assert {r[0]: float(r[1]) for r in rows[1:]} == pytest.approx(NR, abs=1e-12)
    assert not Path("-").exists()  # no file named "-"
    assert "vistkit score" in err and "rovist-nr|" in err  # the table, out of the CSV's way


def test_score_only_prints_just_the_numbers(hyp_file: Path, nr: None, capsys: pytest.CaptureFixture[str]) -> None:
    names = ["rovist-nr", "rovist-nr-jaccard"] if "rovist-nr-jaccard" in list_metrics() else ["rovist-nr"]
    for flag in ("-b", "--score-only"):
        code, out, _ = _run(capsys, "score", hyp_file, "-m", ",".join(names), flag)
        lines = out.splitlines()
        assert code == 0 and len(lines) == len(names) and all(re.fullmatch(r"-?\d+\.\d{4}", v) for v in lines)
        assert float(lines[0]) == pytest.approx(sum(NR.values()) / 2, abs=5e-5)


def test_csv_keeps_range_and_signature(hyp_file: Path, nr: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "-f", "csv", "--confidence", "0.9")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["metric", "score", "ci_low", "ci_high", "range", "n", "key", "signature"]
    assert rows[1][4] == range_label(get_metric_class("rovist-nr")) and rows[1][7].startswith("rovist-nr|key:story|")


def test_metrics_all_runs_what_it_can_and_says_why_not(
    hyp_file: Path, nr: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "score", hyp_file, "-m", "all", "-f", "json")
    payload = json.loads(out)
    assert code == 0 and payload["scores"]["rovist-nr"] == pytest.approx(sum(NR.values()) / 2, abs=1e-12)
    skipped = payload["skipped"]
    for name, cls in list_metrics().items():
        assert (name in payload["scores"]) != (name in skipped), name  # each metric: scored or skipped
        if cls.needs_references:
            assert skipped[name] == "needs reference stories (--references FILE)"
        elif cls.needs_images:
            assert skipped[name] == "needs the story photos (--images FOLDER)"
    assert all(f"skipped {name}: " in err for name in skipped)
    code, out, err = _run(capsys, "score", hyp_file, "-m", "all", "-b", "-q")
    rows = [line.split("\t") for line in out.splitlines()]  # which metrics ran varies: each line names its metric
    assert code == 0 and err == "" and [r[0] for r in rows] == list(payload["scores"])
    assert all(len(r) == 2 and float(r[1]) == pytest.approx(payload["scores"][r[0]], abs=5e-5) for r in rows)


def test_range_labels_follow_the_declared_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    labels = {name: range_label(cls) for name, cls in list_metrics().items()}
    expected = {"sacrebleu": "0-100", "bleu-4": "0-1", "bertscore": "-1 to 1", "cider-d": ">= 0", "vrank": "unbounded"}
    for name, label in expected.items():
        if name in labels:
            assert labels[name] == label


def test_docs_metrics_are_the_cards_of_the_code() -> None:
    """docs/metrics is generated from the cards (scripts/gen_metric_docs.py): a changed card without the
    regenerated page fails here, so the docs never describe an older metric."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_metric_docs", REPO / "scripts" / "gen_metric_docs.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    folder = REPO / "docs" / "metrics"
    expected = gen.pages()
    assert sorted(p.name for p in folder.glob("*.md")) == sorted(expected), "run scripts/gen_metric_docs.py"
    for name, text in expected.items():
        assert (folder / name).read_text(encoding="utf-8") == text, (
            f"docs/metrics/{name}: run scripts/gen_metric_docs.py"
        )


def test_every_environment_variable_is_documented() -> None:
    """docs/cli.md's "Environment variables" table names every VISTKIT_* variable the package reads."""
    used = set()
    for path in (REPO / "src" / "vistkit").rglob("*.py"):
        used |= set(re.findall(r"VISTKIT_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    doc = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    table = doc.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(VISTKIT_[A-Z0-9_]+)`", table, flags=re.M))
    assert used - documented == set(), "document these in docs/cli.md"
    assert documented - used == set(), "docs/cli.md documents variables vistkit no longer reads"
