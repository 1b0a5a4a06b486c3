"""vistkit studio exports round-trip through the readers of `vistkit meta`; `studio report` runs the
meta-evaluation; gold items; the demo builds without serving; `vistkit --help` imports no web stack."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from meta_dummies import dummy_metrics_registered
from studio_helpers import HUMAN, MACHINE_1, MACHINE_2, make_study, rank_by, read_page

from vistkit.cli import main
from vistkit.meta.human import read_likert, read_pairs, read_rankings
from vistkit.studio import analysis

TestClient = pytest.importorskip("starlette.testclient").TestClient


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


def client_for(made):  # type: ignore[no-untyped-def]
    from vistkit.studio.app import create_app

    return TestClient(create_app(made.study))


# Three annotators rank the three stories of one item (1 = best):
RANKS = {0: {"human": 1, "m1": 2, "m2": 3}, 1: {"human": 1, "m1": 3, "m2": 2}, 2: {"human": 2, "m1": 3, "m2": 1}}
TEXT = {"human": HUMAN[0], "m1": MACHINE_1[0], "m2": MACHINE_2[0]}


def ranked_study(tmp_path: Path):  # type: ignore[no-untyped-def]
    made = make_study(tmp_path, n_items=1, per_item=3, annotators=3)
    c = client_for(made)
    for n, tok in enumerate(made.tokens):
        page = read_page(c, tok)
        prefer = [TEXT[s] for s in sorted(RANKS[n], key=lambda s: RANKS[n][s])]
        r = c.post(
            f"/a/{tok}/submit",
            data={"assignment": page.assignment, "csrf": page.csrf, "ranking": rank_by(page.texts, prefer)},
        )
        assert r.status_code == 200  # after the redirect
    return made


def test_rankings_export_round_trips_into_vhed_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rankings -> `meta rankings-to-pairs` gives the same file as `studio export --format pairs`, and the pairs
    carry VHED's average-rank gap and folded agreement computed by hand from RANKS."""
    made = ranked_study(tmp_path)
    rk, p1, p2 = tmp_path / "rankings.csv", tmp_path / "p1.csv", tmp_path / "p2.csv"
    assert main(["studio", "export", str(made.path), "--format", "rankings", "-o", str(rk)]) == 0
    tasks = read_rankings(rk)
    assert list(tasks) == ["s0"]
    assert tasks["s0"]["ranks"] == {
        name: {k: float(v) for k, v in RANKS[i].items()} for i, name in enumerate(made.names)
    }
    assert {k: s.text for k, s in tasks["s0"]["stories"].items()} == TEXT
    assert main(["meta", "rankings-to-pairs", str(rk), "-o", str(p1)]) == 0
    assert main(["studio", "export", str(made.path), "--format", "pairs", "-o", str(p2)]) == 0
    assert p1.read_text() == p2.read_text()
    pairs = {(p.system_1, p.system_2): p for p in read_pairs(p2)}
    # mean ranks: human 4/3, m1 8/3, m2 2; gap = mean rank of story 2 - story 1; agreement = how many of the
    # three rank the pair like the means
    assert pairs["human", "m1"].gap == pytest.approx(4 / 3) and pairs["human", "m1"].agreement == 3
    assert pairs["human", "m2"].gap == pytest.approx(2 / 3) and pairs["human", "m2"].agreement == 2
    assert pairs["m1", "m2"].gap == pytest.approx(-2 / 3) and pairs["m1", "m2"].agreement == 2
    assert all(p.n_stories == 3 for p in pairs.values())
    assert pairs["human", "m1"].rank_norm == pytest.approx(4 / 9)
    prov = json.loads(Path(f"{p2}.provenance.json").read_text())
    assert prov["study_id"] == made.study.setting("study_id") and prov["rows"] == 3 and prov["judgements"] == 3
    assert sorted(a["name"] for a in prov["annotators"]) == sorted(made.names)
    assert all(a["first"].startswith("20") for a in prov["annotators"])
    # the position each story was shown at is kept (position bias)
    with open(rk, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["position"] for r in rows} <= {"1", "2", "3"} and len(rows) == 9
    # rows counts what was written: 9 CSV rows (3 stories x 3 judgements), in the message and the provenance
    assert "wrote 9 rows (3 judgements)" in capsys.readouterr().out
    assert json.loads(Path(f"{rk}.provenance.json").read_text())["rows"] == 9


def test_export_to_stdout_writes_only_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o -: the CSV alone on stdout (it reads back as the file export does), the status line on stderr, no
    '-.provenance.json'; twice in a row works. report --keep - is refused in one sentence."""
    made = ranked_study(tmp_path)
    monkeypatch.chdir(tmp_path)
    rk = tmp_path / "rankings.csv"
    assert main(["studio", "export", str(made.path), "-f", "rankings", "-o", str(rk)]) == 0
    capsys.readouterr()
    for fmt, reader in (("rankings", read_rankings), ("pairs", read_pairs), ("rankings", read_rankings)):
        assert main(["studio", "export", str(made.path), "-f", fmt, "-o", "-"]) == 0
        cap = capsys.readouterr()
        piped = tmp_path / f"piped-{fmt}.csv"
        piped.write_text(cap.out, encoding="utf-8", newline="")
        assert "wrote" not in cap.out and "to standard output (no provenance file)" in cap.err
        if fmt == "rankings":
            assert piped.read_bytes() == rk.read_bytes()
        else:
            assert len(reader(piped)) == 3
    assert not (tmp_path / "-.provenance.json").exists() and not (tmp_path / "-").exists()
    piped = tmp_path / "piped-rankings.csv"
    assert main(["meta", "rankings-to-pairs", str(piped), "-o", str(tmp_path / "pp.csv")]) == 0
    assert main(["studio", "report", str(made.path), "-m", "meta-test-length", "--keep", "-"]) == 1
    assert "--keep needs a file name" in capsys.readouterr().err


def test_report_runs_meta_pairs_on_the_judgements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = ranked_study(tmp_path)
    capsys.readouterr()
    code = main(
        [
            "studio",
            "report",
            str(made.path),
            "-m",
            "meta-test-length",
            "--format",
            "json",
            "--bootstrap",
            "20",
            "--report",
            str(tmp_path / "rep"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    # meta-test-length prefers the longer story: human > m1 > m2 by length; people preferred (by mean rank)
    # human > m2 > m1, so 2 of the 3 pairs agree
    assert data["accuracy"]["meta-test-length"]["all"] == pytest.approx(2 / 3)
    assert (tmp_path / "rep" / "index.html").exists()


def test_pairwise_export(tmp_path: Path) -> None:
    made = make_study(tmp_path, task="pairwise", n_items=1, systems=2, per_item=3, annotators=3)
    c = client_for(made)
    for tok, want in zip(made.tokens, ["human", "human", "m1"], strict=True):
        page = read_page(c, tok)
        label = "AB"[page.texts.index(TEXT[want])]
        c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "choice": label})
    out = tmp_path / "pw.csv"
    assert main(["studio", "export", str(made.path), "--format", "pairs", "-o", str(out)]) == 0
    [p] = read_pairs(out)
    # preferred = rank 1, other = rank 2: human mean 4/3, m1 5/3
    assert (p.system_1, p.system_2) == ("human", "m1")
    assert p.gap == pytest.approx(1 / 3) and p.agreement == 2 and p.n_stories == 2
    s = analysis.summary(analysis.load(made.study))
    assert {r["system"]: r["win"] for r in s["results"]} == pytest.approx({"human": 2 / 3, "m1": 1 / 3})
    assert main(["studio", "export", str(made.path), "--format", "likert", "-o", str(out)]) == 1


def test_likert_export_reads_back_and_correlates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = make_study(
        tmp_path, task="likert", n_items=3, systems=2, per_item=2, annotators=2, aspects=["focused", "coherent"]
    )
    c = client_for(made)
    for n, tok in enumerate(made.tokens):
        for _ in range(6):
            page = read_page(c, tok)
            if page.assignment is None:
                break
            human = page.texts[0] in HUMAN
            c.post(
                f"/a/{tok}/submit",
                data={
                    "assignment": page.assignment,
                    "csrf": page.csrf,
                    "focused": str(5 if human else 2),
                    "coherent": str(4 if human else 1 + n),
                },
            )
    out = tmp_path / "likert.csv"
    assert main(["studio", "export", str(made.path), "--format", "likert", "-o", str(out)]) == 0
    table = read_likert(out)
    assert table.aspects == ["focused", "coherent"]
    assert len(table) == 6 and set(table.n_workers) == {2}
    for sysname, vals in zip(table.systems, table.values, strict=True):
        assert list(vals) == ([5.0, 4.0] if sysname == "human" else [2.0, 1.5])
    capsys.readouterr()
    code = main(["studio", "report", str(made.path), "-m", "meta-test-length", "--format", "json", "--bootstrap", "20"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    story = [r for r in data["correlations"] if r["level"] == "story" and r["aspect"] == "focused"]
    assert story and all(r["metric"] == "meta-test-length" for r in story)
    alpha = analysis.agreement(analysis.load(made.study))
    assert alpha["focused"] == pytest.approx(1.0) and alpha["coherent"] < 1.0


def test_jsonl_and_tasks_exports(tmp_path: Path) -> None:
    made = ranked_study(tmp_path)
    out = tmp_path / "j.jsonl"
    assert main(["studio", "export", str(made.path), "--format", "jsonl", "-o", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 3
    for r in recs:
        n = made.names.index(r["annotator"])
        assert r["answer"]["ranks"] == RANKS[n]
        assert [s["position"] for s in r["shown"]] == [1, 2, 3] and r["submitted_at"] >= r["started_at"]
        assert r["study_id"] == made.study.setting("study_id")
    tasks = tmp_path / "tasks.csv"
    assert main(["studio", "export", str(made.path), "--format", "tasks", "-o", str(tasks)]) == 0
    with open(tasks, encoding="utf-8") as fh:
        [row] = list(csv.DictReader(fh))
    assert row["item"] == "s0" and row["story_1"] == HUMAN[0] and row["img_seq"] == "p00-p01-p02-p03-p04"


def test_gold_items_score_annotators_and_can_filter_them(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=2, per_item=2, annotators=2, gold=1, gold_pass=1.0)
    c = client_for(made)
    known = set(HUMAN) | set(MACHINE_1) | set(MACHINE_2)
    for n, tok in enumerate(made.tokens):
        for _ in range(5):
            page = read_page(c, tok)
            if page.assignment is None:
                break
            shuffled = [t for t in page.texts if t not in known]
            if shuffled:  # the gold unit: annotator 0 prefers the original, annotator 1 the shuffled copy
                original = next(t for t in page.texts if t in HUMAN)
                first = original if n == 0 else shuffled[0]
                prefer = [first, *[t for t in page.texts if t != first]]
            else:
                prefer = page.texts
            c.post(
                f"/a/{tok}/submit",
                data={"assignment": page.assignment, "csrf": page.csrf, "ranking": rank_by(page.texts, prefer)},
            )
    data = analysis.load(made.study)
    assert analysis.failed_gold(data) == {made.names[1]}
    s = analysis.summary(data)
    assert s["gold_pass_rate"] == pytest.approx(0.5)
    rk = tmp_path / "r.csv"
    analysis.export(made.study, rk, fmt="rankings")
    assert set(read_rankings(rk)) == {"s0", "s1"}  # gold items are left out by default
    analysis.export(made.study, rk, fmt="rankings", drop_failed_gold=True)
    assert {w for t in read_rankings(rk).values() for w in t["ranks"]} == {made.names[0]}


def test_demo_builds_without_serving_and_is_reused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "demo"
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve", "--items", "4", "--annotators", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("/a/") == 2 and "/admin/" in out
    # the links need a server: --no-serve says how to start it
    assert f"start it with: vistkit studio serve {folder / 'study.db'}" in out
    assert len(list((folder / "photos").iterdir())) >= 5
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve", "--port", "8123"]) == 0
    again = capsys.readouterr().out
    assert again.count("/a/") == 2 and again.count(":8123/") == 3  # the same links, on the port asked for
    assert again.rstrip().endswith("--host 127.0.0.1 --port 8123")
    assert [line.split("/a/")[1] for line in again.splitlines() if "/a/" in line] == [
        line.split("/a/")[1] for line in out.splitlines() if "/a/" in line
    ]
    from vistkit.studio.app import create_app
    from vistkit.studio.db import open_study

    info = json.loads((folder / "links.json").read_text())
    c = TestClient(create_app(open_study(folder / "study.db")))
    tok = info["paths"][0][1].rsplit("/", 1)[1]
    page = read_page(c, tok)
    assert page.status == 200 and len(page.texts) == 2 and page.html.count(f'<img src="/a/{tok}/photos/') == 5
    for src in set(__import__("re").findall(r'src="(/a/[^"]+/photos/[^"]+)"', page.html)):
        assert c.get(src).status_code == 200
        assert c.get("/photos/" + src.rsplit("/", 1)[1]).status_code == 404  # not without a study link


def test_placeholder_png_is_a_valid_image(tmp_path: Path) -> None:
    from vistkit.studio.demo import _png

    p = tmp_path / "x.png"
    p.write_bytes(_png(8, 6, (10, 20, 30)))
    pil = pytest.importorskip("PIL.Image")
    img = pil.open(p)
    assert img.size == (8, 6) and img.convert("RGB").getpixel((3, 3)) == (10, 20, 30)


def test_help_imports_no_web_stack() -> None:
    code = (
        "import sys; from vistkit import cli; cli._load_commands();"
        "print(sorted(m for m in ('sqlalchemy', 'starlette', 'uvicorn', 'jinja2', 'krippendorff') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------------- keeping outputs
def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_report_refuses_overlapping_outputs_and_inputs_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--keep rep/accuracy.csv --report rep --force` used to write the export over rep/accuracy.csv (and a
    provenance beside it) and only then fail: now each output inside (or equal to) another, and each input inside
    the report folder, is refused in one sentence before anything is written; the earlier report is unchanged."""
    made = ranked_study(tmp_path)
    rep = tmp_path / "rep"
    base = ["studio", "report", str(made.path), "-m", "meta-test-length", "--bootstrap", "20"]
    assert main([*base, "--report", str(rep)]) == 0
    before = _snapshot(rep)
    assert "accuracy.csv" in before
    refs = rep / "refs.json"
    study_in_rep = rep / "in.db"
    cases = [
        ([*base, "--keep", str(rep / "accuracy.csv"), "--report", str(rep)], "lies inside --report"),
        ([*base, "--keep", str(tmp_path / "same"), "--report", str(tmp_path / "same")], "are the same place"),
        ([*base, "--report", str(rep), "--references", str(refs)], f"--references {refs} lies inside --report"),
        (
            ["studio", "report", str(study_in_rep), "-m", "meta-test-length", "--report", str(rep)],
            f"the study {study_in_rep} lies inside --report",
        ),
    ]
    for args, message in cases:
        capsys.readouterr()
        refs.write_text("{}")
        shutil.copy(made.path, study_in_rep)
        snap = _snapshot(rep)
        assert main([*args, "--force"]) == 1, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (args, err)
        assert _snapshot(rep) == snap, args  # not a byte written
        assert not (tmp_path / "same").exists()
        refs.unlink()
        study_in_rep.unlink()
    assert _snapshot(rep) == before


def test_a_failed_report_leaves_an_earlier_keep_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--keep is written only once the meta-evaluation has succeeded, with a provenance naming its SHA-256: a run
    that fails (an unknown metric) leaves the earlier kept export and its provenance as they were."""
    made = ranked_study(tmp_path)
    keep = tmp_path / "kept.csv"
    prov = Path(f"{keep}.provenance.json")
    base = ["studio", "report", str(made.path), "--bootstrap", "20", "--keep", str(keep)]
    assert main([*base, "-m", "meta-test-length"]) == 0
    assert json.loads(prov.read_text())["sha256"] == _sha256(keep) and len(read_pairs(keep)) == 3
    kept, kept_prov = keep.read_bytes(), prov.read_bytes()
    capsys.readouterr()
    assert main([*base, "-m", "no-such-metric", "--force"]) == 1
    assert "no-such-metric" in capsys.readouterr().err
    assert keep.read_bytes() == kept and prov.read_bytes() == kept_prov


def test_an_export_provenance_names_its_file_by_hash_and_never_describes_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provenance records the file's name and SHA-256. Replacing an export removes the old provenance before
    the new file takes the name: a run killed between the two renames (here: the provenance write fails) leaves the
    new file with no provenance, never the old one; a run that fails while writing leaves the old pair intact."""
    from vistkit.studio import analysis

    made = ranked_study(tmp_path)
    out = tmp_path / "e.csv"
    prov = Path(f"{out}.provenance.json")
    assert main(["studio", "export", str(made.path), "-f", "rankings", "-o", str(out)]) == 0
    p = json.loads(prov.read_text())
    assert p["file"] == "e.csv" and p["sha256"] == _sha256(out) and p["rows"] == 9
    old, old_prov = out.read_bytes(), prov.read_bytes()

    def fails_midway(stories, js):  # type: ignore[no-untyped-def]
        yield from ()
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:  # a full disk while the new file is written: the old pair stays
        m.setattr(analysis, "_ranking_rows", fails_midway)
        assert main(["studio", "export", str(made.path), "-f", "rankings", "-o", str(out), "--force"]) == 1
    assert out.read_bytes() == old and prov.read_bytes() == old_prov

    def killed(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # stands in for a kill -9 after the new file was renamed into place

    with monkeypatch.context() as m:
        m.setattr(analysis, "_write_provenance", killed)
        assert main(["studio", "export", str(made.path), "-f", "jsonl", "-o", str(out), "--force"]) != 0
    assert out.read_bytes() != old and out.read_text().startswith("{") and not prov.exists()
    assert main(["studio", "export", str(made.path), "-f", "jsonl", "-o", str(out), "--force"]) == 0
    p = json.loads(prov.read_text())
    assert p["format"] == "jsonl" and p["sha256"] == _sha256(out) and p["rows"] == p["judgements"] == 3


def test_export_streams_the_judgements_instead_of_loading_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exports read the judgements batch by batch (`iter_judgements`), never the whole study at once (`load`,
    which status and the admin page use): each format gives the same file as before."""
    from vistkit.studio import analysis

    made = ranked_study(tmp_path)
    data = analysis.load(made.study)
    js = analysis._kept(data, include_gold=False, drop_failed_gold=False)
    rows = analysis.ranking_rows(data, js)
    monkeypatch.setattr(analysis, "load", lambda st: pytest.fail("export loaded the whole study"))
    out = tmp_path / "r.csv"
    prov = analysis.export(made.study, out, fmt="rankings")
    with open(out, encoding="utf-8", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [{k: str(v) for k, v in r.items()} for r in rows] == got and prov["rows"] == len(rows) == 9
    assert analysis.export(made.study, tmp_path / "j.jsonl", fmt="jsonl")["rows"] == 3
