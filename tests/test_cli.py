"""The `vistkit` command: `metrics` (list, --info), `score` (--format text|json|csv|latex, --per-item) on a
tiny fixture, and exit codes (0 success, 1 invalid input, 2 usage error; never a traceback)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from vistkit import __version__
from vistkit.cli import main
from vistkit.metrics import base
from vistkit.metrics.base import (
    Item,
    Metric,
    MetricCard,
    Score,
    list_metrics,
    mean_score,
    unavailable_metrics,
)

STORIES = [
    # rovist-nr by hand (tokens = words without the final "."): sentence pairs share
    # (the, park) / 7 words, (we, went, to, the, park) / 6, (the, park) / 8; no 4-token block has a next one,
    # so NR = 1 - mean(2/7, 5/6, 2/8) / 2
    {"story_id": "s1", "text": "we went to the park . the park was nice . we went to the park again .",
     "photo_ids": ["1", "2", "3"]},
    # one sentence: no pair, undefined (excluded)
    {"story_id": "s2", "text": "one sentence only .", "photo_ids": ["4", "5", "6"]},
    # no shared word: NR = 1
    {"story_id": "s3", "text": "the cake was big . everyone sang a song . we danced all night .",
     "photo_ids": ["7", "8", "9"]},
]  # fmt: skip
NR = {"1-2-3": 1 - (2 / 7 + 5 / 6 + 2 / 8) / 3 / 2, "7-8-9": 1.0}
NR_CORPUS = sum(NR.values()) / 2


@pytest.fixture
def hyp_file(tmp_path: Path) -> Path:
    p = tmp_path / "hyps.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in STORIES), encoding="utf-8")
    return p


@pytest.fixture
def ref_file(tmp_path: Path) -> Path:
    p = tmp_path / "refs.jsonl"
    refs = [{**s, "story_id": f"r{i}", "text": s["text"] + " the end ."} for i, s in enumerate(STORIES)]
    p.write_text("".join(json.dumps(s) + "\n" for s in refs), encoding="utf-8")
    return p


class _WordRatio(Metric):
    """A tiny reference-based metric for the CLI tests: hypothesis words / longest reference's words."""

    name: ClassVar[str] = "test-word-ratio"
    needs_references: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = 0.0
    upper_bound: ClassVar[float | None] = None
    card: ClassVar[MetricCard] = MetricCard(
        summary="test only", definition="len(hyp) / max len(ref)", range="[0, inf)", signature_fields="-",
        reproduces="-",
    )  # fmt: skip

    def signature_fields(self) -> dict[str, object]:
        return {"unit": "words"}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        values = [
            len(i.hypothesis.text.split()) / max(len(r.text.split()) for r in i.references) for i in items
        ]
        return mean_score(self.name, [i.item_id for i in items], values, signature)


@pytest.fixture
def word_ratio() -> Iterator[str]:
    base.register(_WordRatio)
    try:
        yield _WordRatio.name
    finally:
        base._REGISTRY.pop(_WordRatio.name, None)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _need_rovist_nr() -> None:
    if "rovist-nr" not in list_metrics():
        pytest.skip("rovist-nr is not registered yet")


# --------------------------------------------------------------------------------------------------- metrics
def test_metrics_lists_every_registered_and_unavailable_metric(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "metrics", "--format", "csv")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["metric", "what it measures", "needs", "range", "better"]
    names = [r[0] for r in rows[1:]]
    assert set(list_metrics()) | set(unavailable_metrics()) == set(names)
    for r in rows[1:]:
        if r[0] in unavailable_metrics():
            assert r[1].startswith("UNAVAILABLE: ")
        else:
            cls = list_metrics()[r[0]]
            assert r[4] == ("higher" if cls.higher_is_better else "lower")
            assert ("references" in r[2]) == cls.needs_references
    code, out, _ = _run(capsys, "metrics")
    assert code == 0 and all(name in out for name in list_metrics())


def test_metrics_info(capsys: pytest.CaptureFixture[str]) -> None:
    name = next(iter(list_metrics()))
    code, out, _ = _run(capsys, "metrics", "--info", name)
    # rendered Markdown (rich): the headings' words, not their '#' marks
    assert code == 0 and out.split()[0] == name and "Definition" in out and "Range" in out
    assert "## " not in out and "# " + name not in out
    code, out, _ = _run(capsys, "metrics", "--info", name, "--format", "json")
    card = json.loads(out)
    assert code == 0 and card["name"] == name and card["summary"] == list_metrics()[name].card.summary
    code, _, err = _run(capsys, "metrics", "--info", "no-such-metric")
    assert code == 1 and "unknown metric" in err
    for name, reason in unavailable_metrics().items():
        code, _, err = _run(capsys, "metrics", "--info", name)
        assert code == 1 and reason[:40] in " ".join(err.split())


# --------------------------------------------------------------------------------------------------- score
def test_score_json_matches_hand_computed_rovist_nr(
    hyp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _need_rovist_nr()
    code, out, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["scores"]["rovist-nr"] == pytest.approx(NR_CORPUS, abs=1e-12)
    assert payload["n"]["rovist-nr"] == 2 and payload["key"]["rovist-nr"] == "sequence"
    assert set(payload["excluded"]["rovist-nr"]) == {"4-5-6"}
    assert payload["signatures"]["rovist-nr"].startswith("rovist-nr|key:sequence|")


def test_score_per_item_csv(hyp_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need_rovist_nr()
    per_item = tmp_path / "items.csv"
    code, _, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "--per-item", per_item)
    assert code == 0
    rows = list(csv.reader(per_item.open(encoding="utf-8")))
    assert rows[0] == ["id", "rovist-nr", "rovist-nr note", "rovist-nr signature"]
    signatures = {r[3] for r in rows[1:]}  # the run's signature on every row
    assert len(signatures) == 1 and signatures.pop().startswith("rovist-nr|key:sequence|")
    got = {r[0]: r[1] for r in rows[1:]}
    assert got.keys() == {"1-2-3", "4-5-6", "7-8-9"}
    assert got["4-5-6"] == ""  # undefined: an empty cell, and the note says why
    notes = {r[0]: r[2] for r in rows[1:]}
    assert notes["4-5-6"].startswith("fewer than two sentences") and notes["1-2-3"] == notes["7-8-9"] == ""
    assert float(got["1-2-3"]) == pytest.approx(NR["1-2-3"], abs=1e-12)
    assert float(got["7-8-9"]) == 1.0


def test_score_csv_latex_and_text(hyp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need_rovist_nr()
    code, out, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    # the range (declared bounds: rovist-nr is at most 1, unbounded below) and the signature stay in the CSV
    assert code == 0 and rows[0] == ["metric", "score", "range", "n", "key", "signature"]
    assert rows[1][0] == "rovist-nr" and float(rows[1][1]) == pytest.approx(NR_CORPUS, abs=1e-12)
    assert rows[1][2:5] == ["<= 1", "2", "sequence"] and rows[1][5].startswith("rovist-nr|key:sequence|")
    code, out, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr", "--format", "latex")
    assert code == 0 and r"\begin{tabular}" in out and f"{NR_CORPUS:.4f}" in out and r"\end{table}" in out
    assert "range" in out and r"rovist-nr\textbar{}key:sequence\textbar{}" in out  # | escaped in the caption
    code, out, _ = _run(capsys, "score", hyp_file, "-m", "rovist-nr")
    assert code == 0 and f"{NR_CORPUS:.4f}" in out and "1 item(s) excluded" in out and "<= 1" in out


def test_score_reference_metric_and_two_metrics(
    hyp_file: Path, ref_file: Path, tmp_path: Path, word_ratio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [word_ratio] + (["rovist-nr"] if "rovist-nr" in list_metrics() else [])
    per_item = tmp_path / "items.csv"
    code, out, _ = _run(
        capsys, "score", hyp_file, "-m", ",".join(names), "-r", ref_file, "-f", "json", "--per-item", per_item
    )
    assert code == 0
    payload = json.loads(out)
    # each reference = the story + 3 words ("the end ."): ratios 18/21, 4/7, 15/18
    assert payload["scores"][word_ratio] == pytest.approx((18 / 21 + 4 / 7 + 15 / 18) / 3)
    assert payload["signatures"][word_ratio].startswith(f"{word_ratio}|nrefs:1|key:sequence|unit:words")
    header = next(csv.reader(per_item.open(encoding="utf-8")))
    notes = [f"{n} note" for n in names if payload["excluded"].get(n)]  # a metric that left items undefined
    assert header == ["id", *names, *notes, *(f"{n} signature" for n in names)]


# ----------------------------------------------------------------------------------------------- exit codes
def test_exit_codes(
    hyp_file: Path, tmp_path: Path, word_ratio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "--version")[:2] == (0, f"vistkit {__version__}\n")
    # 1: invalid input, one sentence on stderr
    code, _, err = _run(capsys, "score", hyp_file, "-m", "no-such-metric")
    assert code == 1 and err.startswith("error: unknown metric")
    code, _, err = _run(capsys, "score", tmp_path / "missing.jsonl", "-m", word_ratio)
    assert code == 1 and "no such file" in err
    code, _, err = _run(capsys, "score", hyp_file, "-m", word_ratio)
    assert code == 1 and "--references" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"1": "a",}')
    code, _, err = _run(capsys, "score", bad, "-m", word_ratio, "-r", bad)
    assert code == 1 and "line 1, column" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, "score", hyp_file, "-m", word_ratio, "-O", "nonsense")
    assert code == 1 and "METRIC.OPTION=VALUE" in err
    # 2: usage errors
    assert _run(capsys, "score", hyp_file)[0] == 2  # --metrics is required
    assert _run(capsys, "score", hyp_file, "-m", word_ratio, "--format", "xml")[0] == 2
    assert _run(capsys, "metrics", "--no-such-option")[0] == 2
    assert _run(capsys, "no-such-command")[0] == 2


def test_a_reader_that_stops_reading_gets_141_and_no_message() -> None:
    """`vistkit ... | head`: the reader closed stdout; exit 141 (128 + SIGPIPE) as Unix tools, nothing on stderr
    (click's own answer was a silent 1, indistinguishable from an error)."""
    import subprocess
    import sys

    for args in (["metrics"], ["metrics", "--format", "csv"], ["--help"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "vistkit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the first write: every write meets a closed pipe
        err = proc.stderr.read()
        assert (proc.wait(timeout=60), err) == (141, b""), args


def test_no_arguments_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys)
    assert code in (0, 2) and "Usage" in out + err


def test_nan_free_json(hyp_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON output never holds NaN (not valid JSON): undefined values are null."""
    _need_rovist_nr()
    single = hyp_file.parent / "one.jsonl"
    single.write_text(json.dumps(STORIES[1]) + "\n", encoding="utf-8")
    code, out, _ = _run(capsys, "score", single, "-m", "rovist-nr", "-f", "json")
    assert code == 0
    payload = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))
    assert payload["scores"]["rovist-nr"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in payload["scores"].values())


# ------------------------------------------------------------------------ options given twice, -b, --confidence
def test_a_single_value_option_given_twice_is_a_usage_error(
    hyp_file: Path, ref_file: Path, word_ratio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-r A -r B` silently scored against B; now one sentence (exit 2) on score, compare and distance; repeatable
    options (-O, --name) and flags (-q -q) may still repeat."""
    code, out, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-r", hyp_file, "-m", word_ratio, "-b")
    assert code == 2 and out == "" and "-r/--references is given 2 times but takes one value: give it once" in err
    code, _, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", word_ratio, "--confidence", "0.9",
                        "--confidence", "0.95")  # fmt: skip
    assert code == 2 and "--confidence is given 2 times" in err
    code, _, err = _run(capsys, "compare", hyp_file, ref_file, "-m", word_ratio, "-r", ref_file, "-k", "story",
                        "-k", "sequence")  # fmt: skip
    assert code == 2 and "-k/--key is given 2 times" in err
    code, _, err = _run(capsys, "distance", "--human", hyp_file, "--model", hyp_file, "--human", ref_file)
    assert code == 2 and "--human is given 2 times" in err
    code, out, _ = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", word_ratio, "-b", "-b", "-q", "-q")
    assert code == 0 and out.strip() == "0.7540"


def test_a_metric_option_given_twice_is_refused(
    hyp_file: Path, ref_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", "sacrebleu", "-O", "sacrebleu.lowercase=true",
                        "-O", "sacrebleu.lowercase=false")  # fmt: skip
    assert code == 1
    assert err.strip() == "error: --option sacrebleu.lowercase is given twice ('true', then 'false'): give it once"
    code, _, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", "sacrebleu", "-O", "sacrebleu.smooth_value=1",
                        "-O", "sacrebleu.smooth-value=2")  # fmt: skip  (- and _ name the same option)
    assert code == 1 and "sacrebleu.smooth_value is given twice" in err


def test_score_only_warns_about_the_table_flags_it_drops(
    hyp_file: Path, ref_file: Path, word_ratio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """-b prints the bare numbers: --confidence (its bootstrap is not run) and -f json are ignored, with a warning."""
    code, out, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", word_ratio, "-b", "--confidence", "0.95",
                          "-f", "json", "--seed", "3")  # fmt: skip
    assert code == 0 and out.strip() == "0.7540"
    assert (
        "warning: --confidence and --seed and --format are ignored: they apply to the score table, which "
        "-b/--score-only leaves out" in err
    )
    code, out, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", word_ratio, "-b")
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("bad", ["2", "0", "1", "-0.5", "nan", "inf"])
def test_confidence_is_checked_before_scoring_or_writing(
    bad: str, hyp_file: Path, ref_file: Path, word_ratio: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --confidence was refused after every metric had run and the per-item CSV was written."""
    items = tmp_path / "items.csv"
    code, out, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", word_ratio, "--per-item", items,
                          "--confidence", bad)  # fmt: skip
    assert code == 2 and out == "" and "must be between 0 and 1, e.g. 0.95" in err
    assert not items.exists()
    code, _, err = _run(capsys, "compare", hyp_file, ref_file, "-r", ref_file, "-m", word_ratio, "--confidence", bad)
    assert code == 2 and "must be between 0 and 1" in err


def test_all_must_be_used_alone_and_unknown_options_still_warn(
    hyp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for verb in ("score", "compare"):
        files = [hyp_file] if verb == "score" else [hyp_file, hyp_file]
        code, _, err = _run(capsys, verb, *files, "-m", "rovist-nr,all")
        assert code == 1
        assert err.strip() == (
            "error: --metrics all must be used alone (it runs every metric these inputs allow), not with rovist-nr"
        )
    from vistkit.commands.score import warn_unused_options

    warn_unused_options(["all"], {"nosuch": {"x": 1}, "all": {"y": 2}, "rovist-nr": {"sentences": "split"}})
    err = capsys.readouterr().err
    assert "--option nosuch.x is ignored: vistkit has no metric 'nosuch'" in err
    assert "--option all.y is ignored: vistkit has no metric 'all'" in err
    assert "rovist-nr" not in err


def test_distance_refuses_a_reference_metric_and_says_when_no_story_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _need_rovist_nr()
    human, model = tmp_path / "h.json", tmp_path / "m.json"
    human.write_text(json.dumps({"a": "we went to the park . the park was nice .", "b": "a dog ran . it was big ."}))
    model.write_text(json.dumps({"a": "we went to a park . it was nice .", "b": "the dog ran . the dog was big ."}))
    stories = ["distance", "--human-stories", human, "--model-stories", model, "--dimensions", "R"]
    code, _, err = _run(capsys, *stories, "--r-metric", "bleu-4")
    assert code == 1 and "--references" not in err
    assert err.startswith("error: bleu-4 needs reference stories, so it cannot score dHM's non-redundancy dimension R")
    code, out, _ = _run(capsys, *stories, "-q")
    assert code == 0 and "no story left out" in out and "left out:" not in out
    model.write_text(json.dumps({"a": "we went to a park . it was nice .", "b": "one sentence ."}))
    code, out, _ = _run(capsys, *stories, "-q")
    assert code == 0 and "1 story left out:" in out


def test_compare_names_each_system_by_its_file(
    tmp_path: Path, hyp_file: Path, ref_file: Path, word_ratio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files whose names collide get their folders (d1/hyps, d2/hyps), a file given twice a counter and one warning
    once every input is read, and --baseline naming the shared stem is ambiguous."""
    from vistkit.commands.compare import repeated_files, system_names

    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a, b = tmp_path / "d1" / "hyps.jsonl", tmp_path / "d2" / "hyps.jsonl"
    a.write_text(hyp_file.read_text())
    b.write_text(hyp_file.read_text())
    assert system_names([a, b, hyp_file], []) == ["d1/hyps", "d2/hyps", f"{tmp_path.name}/hyps"]
    assert system_names([a, ref_file], []) == ["hyps", "refs"]
    assert system_names([hyp_file, hyp_file], []) == ["hyps", "hyps-2"]
    assert repeated_files([hyp_file, hyp_file, a], ["hyps", "hyps-2", "d1/hyps"]) == [
        f"{hyp_file} is given 2 times: its systems hyps, hyps-2 hold the same stories"
    ]
    code, out, err = _run(capsys, "compare", a, b, "-r", ref_file, "-m", word_ratio, "--baseline", "hyps")
    assert code == 1 and "--baseline 'hyps' is ambiguous: the systems d1/hyps, d2/hyps" in err
    code, out, err = _run(capsys, "compare", hyp_file, hyp_file, "-r", ref_file, "-m", word_ratio, "-f", "json")
    assert code == 0 and set(json.loads(out)["systems"]) == {"hyps", "hyps-2"}
    assert "is given 2 times: its systems hyps, hyps-2 hold the same stories" in err
    for bad, why in ((["x", "x"], "is given to two systems"), ([" ", "y"], "is empty"), (["x"], "one --name per")):
        code, _, err = _run(capsys, "compare", hyp_file, ref_file, "-r", ref_file, "-m", word_ratio,
                            *[arg for n in bad for arg in ("--name", n)])  # fmt: skip
        assert code == 1 and why in err


def test_an_empty_option_value_is_refused_not_read_as_the_current_folder(
    hyp_file: Path, ref_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-O story-ranker.model=` loaded the current folder (Path("") is "."), `-O story-ranker.lm=` silently fell
    back to the packaged LM: an empty name or path is one sentence, at the CLI and in the Python API."""
    from vistkit.errors import InputError
    from vistkit.models.lm import resolve_lm
    from vistkit.models.resolve import resolve_model

    for value in ("", "  "):
        code, out, err = _run(capsys, "score", hyp_file, "-r", ref_file, "-m", "sacrebleu", "-O",
                              f"sacrebleu.tokenize={value}")  # fmt: skip
        assert code == 1 and out == ""
        assert err.strip() == (
            "error: --option sacrebleu.tokenize is empty: give it a value, or leave the option out for its default"
        )
        with pytest.raises(InputError, match="the model name is empty"):
            resolve_model(value)
        with pytest.raises(InputError, match="the LM name is empty"):
            resolve_lm(value)


def test_ctrl_c_says_interrupted_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Typer turns a KeyboardInterrupt into a silent Exit(130): the user still reads one line saying so."""

    class _CtrlC(io.StringIO):
        def read(self, *args: object) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", _CtrlC())
    assert main(["validate", "-"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "interrupted"


def test_help_imports_no_numeric_or_model_stack() -> None:
    """`vistkit --help` stays fast (~0.18 s, BENCHMARKS.md): building every verb's command loads no numpy (0.11 s
    of the 0.25 s it took), torch, transformers or scipy; the modules that compute import them where they run."""
    import subprocess
    import sys

    code = (
        "import sys; from vistkit import cli; cli._load_commands();"
        "print(sorted(m for m in ('numpy', 'torch', 'transformers', 'scipy', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
