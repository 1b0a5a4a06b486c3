"""Probes, round 11: `vistkit meta` input bounds and consistency.

- Reading a rankings or pairs CSV held every row as a dict (plus a tuple of it for the repeat check) and then the
  parsed objects: ~800-1,000 bytes per short row, with no row limit (a file inside the 256 MiB input limit needed
  10-14 GB). Now the rows are streamed and counted: a pairs CSV may hold `VISTKIT_MAX_PAIRS` rows, a rankings,
  Likert or error-label table `VISTKIT_MAX_STORIES`, refused on the row past it; texts and names are held once.
- `--gap-edges` with thousands of buckets made `--report` run for minutes and gigabytes: at most 100 buckets.
- `meta build-pairs --machine gt=...` (any reference marker) made every pair human-vs-human; a repeated
  `--machine` name dropped the first file; `--limit 0` wrote a header-only file.
- Pairs mixing rows with and without `order` bucketed raw gaps with gaps / N under ``gap_normalised: true``;
  `order` 0 or 1, negative average ranks and average ranks above `order` were accepted.
- `meta errors` left out a story with an empty label cell without a word; a rank ``nan`` was "empty".
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from cli_probe_helpers import forbid_building, one_error, run_cli
from meta_dummies import FIX, dummy_metrics_registered

from vistkit.commands.meta.common import _parse_story_files
from vistkit.errors import InputError
from vistkit.meta.human import read_error_labels, read_likert, read_pairs, read_rankings
from vistkit.meta.pairs import parse_edges

T = TypeVar("T")

HEADER = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order"
S1, S2 = "we went out . it was fun . we came home .", "the dog ran . the cat sat . the end came ."


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


def _pairs_file(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _row(i: int, order: str = "5", base: float = 1.0, comp: float = 2.0, label: float | None = None) -> str:
    gap = base - comp if label is None else label
    return f"{S1} {i},{S2} {i},{gap},s{i},1-2-3,m1,m2,5,{base},{comp},{order}"


# ------------------------------------------------------------------------------------------ row limits
def test_pairs_csv_over_the_pair_limit_is_refused_while_streaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 6th row of a file past `VISTKIT_MAX_PAIRS=5` is refused in one sentence before the rest is read: the
    broken row on line 9 is never reached (the old reader held the whole file first and failed there)."""
    monkeypatch.setenv("VISTKIT_MAX_PAIRS", "5")
    rows = [_row(i) for i in range(7)] + ["a,b"]  # line 9: 2 cells
    f = _pairs_file(tmp_path / "p.csv", rows)
    with pytest.raises(InputError) as e:
        read_pairs(f)
    msg = str(e.value)
    assert msg.startswith(f"{f} holds more than 5 pairs") and "VISTKIT_MAX_PAIRS=<n>" in msg
    assert "story pairs" in msg and "cell" not in msg
    ok = _pairs_file(tmp_path / "ok.csv", [_row(i) for i in range(5)])
    assert len(read_pairs(ok)) == 5  # exactly at the limit
    monkeypatch.delenv("VISTKIT_MAX_PAIRS")  # the default, 1,000,000: the whole file is read, up to its broken row
    with pytest.raises(InputError, match="line 9: 2 cells"):
        read_pairs(f)


def test_meta_pairs_over_the_limit_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_MAX_PAIRS", "3")
    f = _pairs_file(tmp_path / "p.csv", [_row(i) for i in range(4)])
    forbid_building(monkeypatch, ["meta-test-length"])
    line = one_error(capsys, "meta", "pairs", f, "-m", "meta-test-length")
    assert line == (
        f"error: {f} holds more than 3 pairs (rows), over vistkit's limit of story pairs (each is held in memory); "
        "split the file, or raise the limit with VISTKIT_MAX_PAIRS=<n>"
    )


def test_rankings_over_the_row_limit_are_refused_while_streaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_MAX_STORIES", "4")
    body = "".join(f"T{t},w{w},{k},{r},x {k} .\n" for t in range(2) for w in range(2) for k, r in (("A", 1), ("B", 2)))
    f = tmp_path / "r.csv"
    f.write_text("task,worker,story,rank,text\n" + body + "T9,w1\n", encoding="utf-8")  # 8 rows, then a broken one
    with pytest.raises(InputError) as e:
        read_rankings(f)
    assert str(e.value).startswith(f"{f} holds more than 4 rows") and "VISTKIT_MAX_STORIES=<n>" in str(e.value)
    ok = tmp_path / "ok.csv"
    ok.write_text("task,worker,story,rank,text\n" + "".join(body.splitlines(keepends=True)[:4]), encoding="utf-8")
    tasks = read_rankings(ok)
    assert {k: v for k, v in tasks["T0"]["ranks"].items()} == {"w0": {"A": 1.0, "B": 2.0}, "w1": {"A": 1.0, "B": 2.0}}


def test_likert_and_error_tables_over_the_row_limit_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_MAX_STORIES", "3")
    lik = tmp_path / "l.csv"
    lik.write_text("system,item,worker,focused\n" + "".join(f"a,i{i},w1,3\n" for i in range(4)), encoding="utf-8")
    with pytest.raises(InputError, match=r"holds more than 3 rows .*VISTKIT_MAX_STORIES=<n>"):
        read_likert(lik)
    err = tmp_path / "e.csv"
    err.write_text("system,item,Gram\n" + "".join(f"a,i{i},{i % 2}\n" for i in range(4)), encoding="utf-8")
    with pytest.raises(InputError, match=r"holds more than 3 rows .*VISTKIT_MAX_STORIES=<n>"):
        read_error_labels(err)
    monkeypatch.setenv("VISTKIT_MAX_STORIES", "4")
    assert len(read_likert(lik)) == 4 and len(read_error_labels(err)) == 4


def _with_peak(read: Callable[[], T]) -> tuple[T, int]:
    """What ``read()`` returns and the peak of Python memory allocated while it ran (bytes, tracemalloc)."""
    tracemalloc.start()
    try:
        out = read()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_pairs_are_held_compactly(tmp_path: Path) -> None:
    """A text, system or story id repeated over rows is one object, and pairs of one label sign share one meta
    dict; reading 20,000 short pairs peaks at well under the ~1,270 bytes a row the old reader took."""
    f = _pairs_file(
        tmp_path / "p.csv", [f"{S1},{S2},-1.0,s{i % 7},{i}-{i + 1},m1,m2,5,1.0,2.0,5" for i in range(20_000)]
    )
    pairs, peak = _with_peak(lambda: read_pairs(f))
    assert len(pairs) == 20_000 and pairs[0].gap == 1.0 and pairs[0].meta == {"label_sign": "base-minus-comp"}
    assert pairs[0].text_1 is pairs[1].text_1 and pairs[0].system_2 is pairs[5].system_2
    assert pairs[0].story_id is pairs[7].story_id and pairs[0].meta is pairs[1].meta
    assert peak / 20_000 < 700, peak / 20_000


def test_rankings_are_held_compactly(tmp_path: Path) -> None:
    body = "".join(f"T{t},w{w},{k},{r},x .\n" for t in range(2_000) for w in range(5) for k, r in (("A", 1), ("B", 2)))
    f = tmp_path / "r.csv"
    f.write_text("task,worker,story,rank,text\n" + body, encoding="utf-8")
    tasks, peak = _with_peak(lambda: read_rankings(f))
    assert len(tasks) == 2_000 and tasks["T7"]["ranks"]["w3"] == {"A": 1.0, "B": 2.0}
    assert next(iter(tasks["T1"]["ranks"])) is next(iter(tasks["T2"]["ranks"]))  # "w0" held once
    assert peak / 20_000 < 550, peak / 20_000


# ------------------------------------------------------------------------------------------ gap buckets
@pytest.mark.parametrize("command", ["pairs", "gap"])
def test_more_than_100_gap_buckets_are_refused_up_front(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    forbid_building(monkeypatch, ["meta-test-length"])
    edges = ",".join(str(i) for i in range(20_001))
    line = one_error(
        capsys, "meta", command, FIX / "vhed_small.csv", "-m", "meta-test-length", "--gap-edges", edges, "--report",
        "never-written",
    )  # fmt: skip
    assert line == (
        "error: --gap-edges gives 20,000 buckets, more than the 100 a gap table or figure can show readably; give "
        "at most 101 edges (or auto)"
    )
    assert not Path("never-written").exists()


def test_100_gap_buckets_are_the_most(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(parse_edges(",".join(str(i / 100) for i in range(101))) or ()) == 101
    with pytest.raises(InputError, match="gives 101 buckets"):
        parse_edges(",".join(str(i / 100) for i in range(102)))
    code, _ = run_cli(
        capsys, "meta", "gap", FIX / "vhed_small.csv", "-m", "meta-test-length", "-f", "json", "--gap-edges",
        ",".join(str(i / 100) for i in range(101)),
    )  # fmt: skip
    assert code == 0


# ------------------------------------------------------------------------------------------ build-pairs
def _machine(tmp_path: Path, name: str, text: str) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps({"r1": f"{text} one", "r3": f"{text} two"}), encoding="utf-8")
    return f


@pytest.mark.parametrize("name", ["gt", "human", "reference", "REFERENCE", "Ground_Truth", "ground-truth", " ref"])
def test_build_pairs_refuses_a_machine_named_like_a_reference(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """Exactly the names `is_reference_system` reads as a reference (stripped, any case); ``gt2`` is a machine."""
    m = _machine(tmp_path, "m.json", "machine")
    out = tmp_path / "out.csv"
    line = one_error(
        capsys, "meta", "build-pairs", "-r", FIX / "references_small.jsonl", "--machine", f"{name}={m}", "-o", out
    )
    assert line.startswith(f"error: --machine {name.strip()}=...: vistkit reads the system name {name.strip()!r} as")
    assert "ground-truth, ground_truth, groundtruth, gt, human, ref, reference" in line
    assert not out.exists()
    code, _ = run_cli(
        capsys, "meta", "build-pairs", "-r", FIX / "references_small.jsonl", "--machine", f"{name.strip()}2={m}",
        "-o", out,
    )  # fmt: skip
    assert code == 0 and {(p.kind, p.system_2) for p in read_pairs(out)} == {("reference-machine", f"{name.strip()}2")}


def test_build_pairs_refuses_a_repeated_machine_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = _machine(tmp_path, "a.json", "first"), _machine(tmp_path, "b.json", "second")
    out = tmp_path / "out.csv"
    line = one_error(
        capsys, "meta", "build-pairs", "-r", FIX / "references_small.jsonl", "--machine", f"sys={a}",
        "--machine", f"sys={b}", "-o", out,
    )  # fmt: skip
    assert line == (
        f"error: --machine names the system 'sys' twice ({a} and {b}); one system has one story file, so give each "
        "its own name"
    )
    assert not out.exists()
    with pytest.raises(InputError, match="--stories names the system 'x' twice"):
        _parse_story_files(["x=a.json", " x =b.json"])


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_build_pairs_refuses_a_limit_below_1(capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: str) -> None:
    m = _machine(tmp_path, "m.json", "machine")
    out = tmp_path / "out.csv"
    line = one_error(
        capsys, "meta", "build-pairs", "-r", FIX / "references_small.jsonl", "--machine", f"mm={m}", "-o", out,
        "--limit", limit,
    )  # fmt: skip
    assert line == f"error: --limit must be 1 or more (pairs kept per system), not {limit}"
    assert not out.exists()


# ------------------------------------------------------------------------------------------ order and ranks
@pytest.mark.parametrize("order", ["0", "1"])
def test_an_order_below_2_is_refused(tmp_path: Path, order: str) -> None:
    f = _pairs_file(tmp_path / "p.csv", [_row(0), _row(1, order=order)])
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value) == (
        f"{f} line 3: column 'order' is the number of stories ranked in the task, so at least 2 (a pair needs two), "
        f"got '{order}'"
    )


@pytest.mark.parametrize(
    ("base", "comp", "label", "what"),
    [
        (-1.0, 2.0, None, "avg_rank_base is -1, but an average rank is 1 (the best) or more"),
        (0.0, 2.0, None, "avg_rank_base is 0, but an average rank is 1 (the best) or more"),
        (1.0, 6.0, None, "avg_rank_comp is 6, but the average ranks of a task of 5 stories (order) run from 1 to 5"),
        (10.0, 11.0, -1.0, "avg_rank_base is 10, but the average ranks of a task of 5 stories (order) run from 1 to 5"),
        (0.1, 0.6, None, "avg_rank_base is 0.1, but the average ranks of a task of 5 stories (order) run from 0.2 "),
        (0.6, 3.0, None, "avg_rank_base is 0.6, but the average ranks of a task of 5 stories (order) run from 1 to 5"),
        (1.0, 2.0, -7.0, "label is -7, but two average ranks of a task of 5 stories (order) differ by at most 4"),
    ],
)
def test_average_ranks_outside_the_task_are_refused(
    tmp_path: Path, base: float, comp: float, label: float | None, what: str
) -> None:
    """Raw ranks 1..N and ranks divided by N (1/N..1, rounded in the file) read, with the gap in rank units; a rank
    outside them, or a label over N - 1, is refused naming the line."""
    good = [
        _row(0, base=1.0, comp=5.0),
        _row(1, order="3", base=0.3333, comp=1.0, label=-2.0),
        _row(2, base=4.6, comp=1),
    ]
    f = _pairs_file(tmp_path / "p.csv", good)
    assert [p.gap for p in read_pairs(f)] == pytest.approx([4.0, 2.0, -3.6])
    f = _pairs_file(tmp_path / "p.csv", [*good, _row(3, base=base, comp=comp, label=label)])
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value).startswith(f"{f} line 5: {what}"), str(e.value)


def test_rows_with_and_without_order_are_not_mixed(tmp_path: Path) -> None:
    """The probe's file: order 5 on lines 2 and 4, empty on line 3 (the edges became [0.2, 0.3, 0.7, 1.5, 2.0]
    under gap_normalised: true)."""
    rows = [_row(0), _row(1, order=""), _row(2, comp=3.0), _row(3, order="")]
    f = _pairs_file(tmp_path / "p.csv", rows)
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value) == (
        f"{f} line 3 gives neither order nor rank_norm, while line 2 gives order 5: the ranking gap of one is divided "
        "by N and the other's cannot be, so the gap buckets would mix two units; give every row its order (the "
        "number of stories ranked), or no row"
    )
    # rank_norm without order is a normalised gap too: no mix
    norm = _pairs_file(
        tmp_path / "n.csv",
        [_row(0) + ",-0.2", f"{S2},{S1},-2.0,s1,1-2-3,m1,m2,5,1.0,3.0,,-0.4"],
        header=HEADER + ",rank_norm",
    )
    assert [p.rank_norm for p in read_pairs(norm)] == pytest.approx([0.2, 0.4])
    # the VHED-layout fixtures (every row with its order) read as before
    pairs = read_pairs(FIX / "vhed_small.csv")
    assert len(pairs) == 8 and pairs[0].gap == pytest.approx(1.6) and pairs[0].rank_norm == pytest.approx(0.32)
    assert {p.meta["label_sign"] for p in pairs} == {"base-minus-comp"}
    ref = read_pairs(FIX / "ref_pairs_small.csv")
    assert [p.gap for p in ref[:2]] == [1.0, -1.0] and ref[0].kind == "reference-machine"


def test_normalised_ranks_without_order_or_label_are_refused(tmp_path: Path) -> None:
    f = _pairs_file(
        tmp_path / "p.csv",
        ["a,b,s1,0.2,0.6"],
        header="sent1,sent2,story_id,avg_rank_base,avg_rank_comp",
    )
    with pytest.raises(InputError, match=r"line 2: the average ranks \(0.2, 0.6\) are divided by the number"):
        read_pairs(f)


def test_gaps_of_a_file_without_order_are_not_called_normalised(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from vistkit.cli import main

    rows = [_row(0, order=""), _row(1, order="", comp=3.0), _row(2, order="", comp=4.0)]
    f = _pairs_file(tmp_path / "p.csv", rows)
    assert main(["meta", "gap", str(f), "-m", "meta-test-length", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gap_normalised"] is False and data["gap_edges"] == [1.0, 1.5, 2.5, 3.0]
    assert main(["meta", "gap", str(f), "-m", "meta-test-length"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "note: no pair gives its order (the number of stories ranked) or rank_norm, so the ranking gaps" in text
    assert main(["meta", "gap", str(FIX / "vhed_small.csv"), "-m", "meta-test-length", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gap_normalised"] is True


# ------------------------------------------------------------------------------------------ small ones
def test_errors_say_when_a_story_has_no_label(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "e.csv"
    f.write_text(
        f"system,item,Gram,text\na,i1,,{S1}\na,i2,0,{S2} x\nb,i1,1,{S2} y\nb,i2,0,{S1} z\n",
        encoding="utf-8",
    )
    from vistkit.cli import main

    assert main(["meta", "errors", str(f), "-m", "meta-test-length"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "note: Gram: 1 of 4 stories has no label (every Gram cell of it is empty) and is left out of its r" in text
    assert main(["meta", "errors", str(f), "-m", "meta-test-length", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["unlabelled_stories"] == {"Gram": 1} and data["point_biserial"]["meta-test-length"]["Gram"]["n"] == 3


def test_a_nan_rank_is_not_called_empty(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("task,worker,story,rank,text\nT1,w1,A,nan,a .\nT1,w1,B,1,b .\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_rankings(f)
    assert str(e.value) == (
        f"{f} line 2: rank must be a whole number from 1 (the best) to the number of stories in the task, got 'nan' "
        "(not a number)"
    )
    f.write_text("task,worker,story,rank,text\nT1,w1,A, ,a .\nT1,w1,B,1,b .\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: empty rank$"):
        read_rankings(f)
