"""Issue 16, items 1, 3 and 6 (write side): no output ever destroys an input or an existing file, no CSV vistkit
writes becomes a spreadsheet formula, and every fault of the machine while writing is one sentence.

1. Every verb that writes (enumerated from the typer app: a new writing verb fails here until classified) refuses
   to write onto one of its inputs (the same path, a symlink, a hard link; with ``--force`` too) and leaves that
   input byte-identical; refuses an existing output without ``--force`` and replaces it with ``--force``; writes a
   report or model folder only if it is new, empty or vistkit's (never over a user's ``index.html``); a crash or a
   full disk in the middle of a write leaves no file under the final name (and the old one intact).
3. CSV cells starting with ``=``, ``+``, ``-``, ``@``, tab or CR are neutralised with a leading ``'`` by every CSV
   writer, and every CSV reader removes exactly that quote: round trips through each writer/reader pair (and
   ``studio export`` -> ``meta rankings-to-pairs`` -> ``meta pairs``) are lossless, checked with hypothesis.
6. A read-only folder, ``/dev/full``, a missing parent folder, a folder where a file is expected and the reverse:
   for every writing verb, exit 1 with one sentence naming the path, never the "unexpected ... bug" catch-all.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from meta_dummies import FIX, dummy_metrics_registered

from tests.conftest import cli_verbs, message_lines
from vistkit.cli import app, main
from vistkit.data import output
from vistkit.data.output import CSV_TRIGGERS, MARKER, is_number_text, neutralise_cell, restore_cell
from vistkit.errors import OutputError

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
METRIC = "meta-test-length"  # tests/fixtures/meta/dummy_metrics.py: instant, no model


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_sentence_error(err: str, *, names: str | Path | None = None) -> str:
    lines = [ln for ln in message_lines(err) if not ln.startswith("skipped ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "unexpected" not in lines[0] and "Traceback" not in err, err
    if names is not None:
        assert str(names) in lines[0], (names, lines[0])
    return lines[0]


# ============================================================================================ the verbs
def verb_options(verb: str) -> set[str]:
    cmd: Any = typer.main.get_command(app)
    for part in verb.split():
        cmd = cmd.commands[part]
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


@pytest.fixture
def g(tmp_path: Path) -> dict[str, Path]:
    """Good inputs of every writing verb (copies, so a test may compare their bytes)."""
    d = tmp_path / "in"
    d.mkdir()
    out: dict[str, Path] = {}
    for key, name in (("pairs", "vhed_small.csv"), ("likert", "likert_small.csv"), ("labels", "errors_small.csv"),
                      ("rankings", "rankings_small.csv"), ("refs", "references_small.jsonl")):  # fmt: skip
        out[key] = d / name
        shutil.copyfile(FIX / name, out[key])
    out["machine"] = d / "machine.jsonl"
    out["machine"].write_text(
        "".join(
            json.dumps({"story_id": f"r{i}", "text": t}) + "\n" for i, t in ((1, "a b machine"), (2, "x y z machine"))
        ),
        encoding="utf-8",
    )
    out["stories"] = d / "stories.jsonl"
    out["stories"].write_text(
        "".join(json.dumps({"story_id": f"s{i}", "text": "we went to the park . it was nice ."}) + "\n"
                for i in range(3)),
        encoding="utf-8",
    )  # fmt: skip
    for side, shift in (("human", 0.0), ("model", 0.1)):
        out[side] = d / f"{side}.csv"
        out[side].write_text(
            "id,groovist,rovist-c,rovist-nr\n" + "".join(f"s{i},{0.5 + shift},{0.4 + i / 10},0.9\n" for i in range(3)),
            encoding="utf-8",
        )
    return out


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    torch = pytest.importorskip("torch")
    p = tmp_path / "in-ckpt" / "tiny.pth.tar"
    p.parent.mkdir()
    torch.save({"model": {"w": torch.zeros(2)}}, p)
    return p


@pytest.fixture
def study(tmp_path: Path) -> Path:
    pytest.importorskip("sqlalchemy")
    from vistkit.studio.plan import PlanItem, PlanStory, create_study

    p = tmp_path / "in-study" / "S.db"
    p.parent.mkdir()
    stories = [PlanStory("human", "s0", "a b c ."), PlanStory("m", "s0", "d .")]
    items = [PlanItem(key="s0", photo_ids=(), stories=stories)]
    create_study(p, task="rank", items=items, per_item=1)
    return p


Argv = Callable[[dict[str, Path], Path], list[Any]]


class Writer:
    """A writing verb: its kind of output, its argv with the output at ``out``, the input ``victim`` that the
    onto-an-input test targets, and whether a full run is cheap here (``heavy``: a model is needed)."""

    def __init__(self, kind: str, argv: Argv, victim: str, *, heavy: bool = False, needs: str = "") -> None:
        self.kind, self.argv, self.victim, self.heavy, self.needs = kind, argv, victim, heavy, needs


WRITERS: dict[str, Writer] = {
    "score": Writer("file", lambda g, o: ["score", g["stories"], "-m", METRIC, "--per-item", o], "stories"),
    "distance": Writer("file", lambda g, o: ["distance", "--human", g["human"], "--model", g["model"],
                                             "--per-item", o], "human"),
    "meta pairs": Writer("folder", lambda g, o: ["meta", "pairs", g["pairs"], "-m", METRIC, "--bootstrap", "20",
                                                 "--report", o], "pairs"),
    "meta gap": Writer("folder", lambda g, o: ["meta", "gap", g["pairs"], "-m", METRIC, "--report", o], "pairs"),
    "meta correlate": Writer("folder", lambda g, o: ["meta", "correlate", g["likert"], "-m", METRIC, "--bootstrap",
                                                     "20", "--report", o], "likert"),
    "meta errors": Writer("folder", lambda g, o: ["meta", "errors", g["labels"], "-m", METRIC, "--report", o],
                          "labels"),
    "meta build-pairs": Writer("file", lambda g, o: ["meta", "build-pairs", "-r", g["refs"], "--machine",
                                                     f"m={g['machine']}", "-o", o], "machine"),
    "meta rankings-to-pairs": Writer("file", lambda g, o: ["meta", "rankings-to-pairs", g["rankings"], "-o", o],
                                     "rankings"),
    "models convert": Writer("model", lambda g, o: ["models", "convert", g["ckpt"], o, "--trust-checkpoint",
                                                    "--kind", "state-dict"], "ckpt", needs="ckpt"),
    "vrank train": Writer("model", lambda g, o: ["vrank", "train", g["pairs"], "--output", o, "--encoder",
                                                 g["pairs"].parent / "no-encoder"], "pairs", heavy=True),
    "vrank predict": Writer("file", lambda g, o: ["vrank", "predict", g["pairs"], "--model",
                                                  g["pairs"].parent / "no-model", "-o", o], "pairs", heavy=True),
    "studio export": Writer("file", lambda g, o: ["studio", "export", g["study"], "-f", "tasks", "-o", o], "study",
                            needs="study"),
    "studio report": Writer("folder", lambda g, o: ["studio", "report", g["study"], "-m", METRIC, "--report", o],
                            "study", heavy=True, needs="study"),
}  # fmt: skip

# verbs that write but never overwrite, so they take no --force: a study is never replaced (`studio init` refuses
# an existing file), the demo folder is reused as it is
NEVER_OVERWRITE = {"studio init", "studio demo"}
NON_WRITERS = {
    "compare", "validate", "metrics", "formats", "demo", "models list", "models info", "models prepare-lm",
    "meta beats-ref",
    "meta compare", "studio invite", "studio serve", "studio status",
}  # fmt: skip


def test_every_verb_is_classified_and_every_writer_takes_force() -> None:
    verbs = set(cli_verbs())
    classified = set(WRITERS) | NEVER_OVERWRITE | NON_WRITERS
    assert verbs == classified, ("classify the new verb in WRITERS, NEVER_OVERWRITE or NON_WRITERS", verbs ^ classified)
    with_force = {v for v in verbs if "--force" in verb_options(v)}
    assert with_force == set(WRITERS), with_force ^ set(WRITERS)


def _inputs(g: dict[str, Path], w: Writer, request: pytest.FixtureRequest) -> dict[str, Path]:
    if w.needs:
        g = {**g, w.needs: request.getfixturevalue(w.needs)}
    return g


def _out(tmp_path: Path, w: Writer, name: str = "out") -> Path:
    return tmp_path / (name if w.kind != "file" else f"{name}.csv")


@pytest.mark.parametrize("verb", sorted(v for v, w in WRITERS.items() if w.kind == "file"))
def test_a_file_output_typed_as_a_folder_is_refused(
    verb: str, g: dict[str, Path], tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--per-item out/`` (or ``-o out/``) wrote a file named ``out``: typer's Path drops the trailing slash, so
    the user who meant a folder got a file. Refused in one sentence, nothing written; ``--flag=out/`` too."""
    w = WRITERS[verb]
    g = _inputs(g, w, request)
    folder = f"{tmp_path / 'newdir'}/"
    argv = [str(a) for a in w.argv(g, Path(folder))]
    argv[argv.index(str(Path(folder)))] = folder  # as typed, with its slash
    code, _, err = run(capsys, *argv)
    assert code == 1 and "ends with '/', so it names a folder" in one_sentence_error(err, names=folder), err
    flag = argv[argv.index(folder) - 1]
    at = argv.index(folder)
    code, _, err = run(capsys, *argv[: at - 1], f"{flag}={folder}", *argv[at + 1 :])
    assert code == 1 and "so it names a folder" in err
    assert not (tmp_path / "newdir").exists()


# ============================================================================================ 1. never onto an input
@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_output_onto_an_input_is_refused_and_the_input_kept(
    verb: str, g: dict[str, Path], tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    w = WRITERS[verb]
    g = _inputs(g, w, request)
    victim = g[w.victim]
    before = victim.read_bytes()
    link, hard = tmp_path / f"link-{victim.name}", tmp_path / f"hard-{victim.name}"
    link.symlink_to(victim)
    os.link(victim, hard)
    for target in (victim, link, hard):
        for force in ([], ["--force"]):
            code, _, err = run(capsys, *w.argv(g, target), *force)
            assert code == 1, (verb, target, force, err)
            line = one_sentence_error(err, names=target)
            assert ("input" in line) if w.kind == "file" else ("not a folder" in line), line
            assert victim.read_bytes() == before, (verb, target)
            assert link.is_symlink() and hard.read_bytes() == before


def test_studio_export_onto_its_study_is_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe that turned a study database into CSV (exit 0)."""
    before = study.read_bytes()
    for fmt in ("rankings", "pairs", "tasks", "jsonl"):
        code, _, err = run(capsys, "studio", "export", study, "-f", fmt, "-o", study, "--force")
        assert code == 1 and "input" in one_sentence_error(err, names=study)
    assert study.read_bytes() == before
    code, _, err = run(capsys, "studio", "report", study, "-m", METRIC, "--keep", study)
    assert code == 1 and "input" in one_sentence_error(err, names=study)
    assert study.read_bytes() == before


def test_studio_export_onto_its_sqlite_sidecars_is_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe that replaced a running study's -wal file (every judgement not yet checkpointed was lost)."""
    wal = study.with_name(study.name + "-wal")
    wal.write_bytes(b"unsaved judgements")
    for suffix in ("-wal", "-shm", "-journal"):
        target = study.with_name(study.name + suffix)
        for fmt in ("rankings", "jsonl"):
            code, _, err = run(capsys, "studio", "export", study, "-f", fmt, "-o", target, "--force")
            assert code == 1 and f"part of the input {study}" in one_sentence_error(err, names=target)
        code, _, err = run(capsys, "studio", "report", study, "-m", METRIC, "--keep", target, "--force")
        assert code == 1 and "part of the input" in one_sentence_error(err, names=target)
    assert wal.read_bytes() == b"unsaved judgements"
    assert not study.with_name(study.name + "-shm").exists()


def test_an_existing_file_inside_an_input_folder_is_never_overwritten(tmp_path: Path) -> None:
    """A model folder (or a folder of score tables) is an input as a whole: none of its files is an output."""
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    for name in ("weights.bin", "sub/table.csv"):
        (folder / name).write_text("input", encoding="utf-8")
    (tmp_path / "link").symlink_to(folder)
    with output.output_policy(force=True, inputs=[f"vrank.model={folder}"]):
        for target in (folder / "weights.bin", folder / "sub" / "table.csv", tmp_path / "link" / "weights.bin"):
            with pytest.raises(OutputError, match="inside the folder"):
                output.write_text(target, "output")
        output.write_text(folder / "new.csv", "output")  # a new file destroys nothing
        output.write_text(tmp_path / "beside.csv", "output")
    assert (folder / "weights.bin").read_text(encoding="utf-8") == "input"
    assert (folder / "new.csv").read_text(encoding="utf-8") == "output"


def test_a_verb_that_fails_removes_the_output_folder_it_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    bad = {"int-key.pth": {"model": {1: torch.zeros(2)}}, "sparse.pth": {"model": {"a": torch.zeros(2).to_sparse()}}}
    for name, obj in bad.items():
        torch.save(obj, tmp_path / name)
        out = tmp_path / f"out-{name}"
        argv = ("models", "convert", tmp_path / name, out, "--trust-checkpoint", "--kind", "state-dict")
        code, _, err = run(capsys, *argv)
        assert code == 1
        assert ("not a parameter name" if "int" in name else "only dense tensors") in one_sentence_error(err)
        assert not out.exists()
    earlier = tmp_path / "earlier"  # a folder that existed before the run is left as it was
    earlier.mkdir()
    code, _, err = run(capsys, "models", "convert", tmp_path / "sparse.pth", earlier, "--trust-checkpoint",
                       "--kind", "state-dict")  # fmt: skip
    assert code == 1 and earlier.is_dir()


def test_an_archive_member_input_counts_as_the_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    archive = tmp_path / "r.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("rankings.csv", (FIX / "rankings_small.csv").read_text(encoding="utf-8"))
    before = archive.read_bytes()
    code, _, err = run(capsys, "meta", "rankings-to-pairs", f"{archive}:rankings.csv", "-o", archive, "--force")
    assert code == 1 and "input" in one_sentence_error(err, names=archive)
    assert archive.read_bytes() == before


# ============================================================================================ 1. existing outputs
@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_existing_output_needs_force(
    verb: str, g: dict[str, Path], tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    w = WRITERS[verb]
    g = _inputs(g, w, request)
    out = _out(tmp_path, w)
    if w.kind == "file":
        out.write_text("precious\n", encoding="utf-8")
    else:  # an earlier vistkit output: the marker and a file
        out.mkdir()
        (out / MARKER).write_text("vistkit\n", encoding="utf-8")
        (out / "index.html").write_text("precious\n", encoding="utf-8")
    kept = out if w.kind == "file" else out / "index.html"
    code, _, err = run(capsys, *w.argv(g, out))
    assert code == 1, (verb, err)
    assert "--force" in one_sentence_error(err, names=out)
    assert kept.read_text(encoding="utf-8") == "precious\n"
    code, _, err = run(capsys, *w.argv(g, out), "--force")
    if w.heavy:  # no model here: it fails later, but not because the output exists
        assert code == 1 and "--force" not in err and "exists" not in err, err
        return
    assert code == 0, (verb, err)
    if w.kind == "file":
        assert kept.read_text(encoding="utf-8") != "precious\n" and kept.stat().st_size > 0
    elif w.kind == "folder":
        assert "precious" not in kept.read_text(encoding="utf-8") and (out / "result.json").is_file()
    else:
        assert (out / "vistkit_model.json").is_file() and (out / "model.safetensors").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"


@pytest.mark.parametrize("verb", sorted(v for v, w in WRITERS.items() if w.kind != "file"))
def test_a_users_folder_is_never_written_into(
    verb: str, g: dict[str, Path], tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """`meta pairs --report DIR` used to replace DIR/index.html."""
    w = WRITERS[verb]
    g = _inputs(g, w, request)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "index.html").write_text("<p>my page</p>", encoding="utf-8")
    for force in ([], ["--force"]):
        code, _, err = run(capsys, *w.argv(g, folder), *force)
        assert code == 1 and "did not write" in one_sentence_error(err, names=folder), err
    assert sorted(p.name for p in folder.iterdir()) == ["index.html"]
    assert (folder / "index.html").read_text(encoding="utf-8") == "<p>my page</p>"


def test_report_folder_new_then_rewritten_only_with_force(
    g: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = tmp_path / "rep"
    args = ["meta", "pairs", g["pairs"], "-m", METRIC, "--bootstrap", "20", "--report", rep]
    assert run(capsys, *args)[0] == 0
    assert (rep / MARKER).is_file() and (rep / "index.html").is_file() and (rep / "accuracy.csv").is_file()
    first = (rep / "result.json").read_text(encoding="utf-8")
    code, _, err = run(capsys, *args)
    assert code == 1 and "earlier vistkit output" in one_sentence_error(err, names=rep)
    assert run(capsys, *args, "--force")[0] == 0
    assert json.loads((rep / "result.json").read_text(encoding="utf-8")) == json.loads(first)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, "meta", "gap", g["pairs"], "-m", METRIC, "--report", empty)[0] == 0


# ============================================================================================ 6. faults per verb
def _read_only_folder(tmp_path: Path) -> Path:
    """A folder no file can be created in: chmod works for a normal user; root ignores permission bits, so it
    gets /sys (sysfs refuses new files even to root)."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro
    try:
        probe = Path("/sys/vistkit-probe")
        probe.write_text("x")
        probe.unlink()
    except OSError:
        return Path("/sys")
    pytest.skip("no read-only folder here (root and a writable /sys)")


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_machine_faults_are_one_sentence(
    verb: str, g: dict[str, Path], tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    w = WRITERS[verb]
    g = _inputs(g, w, request)
    ro = _read_only_folder(tmp_path)
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("x", encoding="utf-8")
    a_folder = tmp_path / "a-folder"
    a_folder.mkdir()
    cases: list[tuple[Path, str]] = [
        (ro / _out(tmp_path, w, "vistkit-out").name, "read-only"),
        (tmp_path / "no" / "such" / _out(tmp_path, w).name, "does not exist"),
        (a_file / _out(tmp_path, w).name, "not a folder"),  # a file as the parent folder
    ]
    if w.kind == "file":
        cases.append((a_folder, "is a folder"))
        if not w.heavy:
            cases.append((Path("/dev/full"), "disk is full"))
    else:
        cases.append((a_file, "not a folder"))
    for target, words in cases:
        code, _, err = run(capsys, *w.argv(g, target), "--force")
        assert code == 1, (verb, target, err)
        line = one_sentence_error(err, names=target)
        assert words in line, (verb, target, line)
    assert a_file.read_text(encoding="utf-8") == "x" and not any(a_folder.iterdir())
    assert not (Path("/sys") / "vistkit-out").exists()


@pytest.mark.parametrize("verb", sorted(NEVER_OVERWRITE))
def test_never_overwriting_writers_report_faults_in_one_sentence(
    verb: str, g: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    ro = _read_only_folder(tmp_path)
    if verb == "studio init":

        def argv(o: Path) -> list[Any]:
            return ["studio", "init", o, "--task", "rank", "-s", f"a={g['stories']}", "-s", f"b={g['stories']}"]

        cases = [(ro / "s.db", "read-only"), (tmp_path / "no" / "s.db", "does not exist"), (tmp_path, "is a folder")]
        before = g["stories"].read_bytes()
        code, _, err = run(capsys, *argv(g["stories"]))
        assert code == 1 and g["stories"].read_bytes() == before
        one_sentence_error(err)
    else:

        def argv(o: Path) -> list[Any]:
            return ["studio", "demo", "--dir", o, "--no-serve", "--items", "2"]

        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / "index.html").write_text("mine", encoding="utf-8")
        cases = [(ro / "demo", "read-only"), (tmp_path / "no" / "demo", "does not exist"), (mine, "did not write")]
    for target, words in cases:
        code, _, err = run(capsys, *argv(target))
        assert code == 1 and words in one_sentence_error(err, names=target), (target, err)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["index.html"] if verb == "studio demo" else True


# ============================================================================================ 1. atomic writes
def test_a_crash_mid_write_leaves_no_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash (not even an Exception) after some rows were written: nothing under the final name, no
    temporary file left, and an older file of that name untouched."""
    from vistkit.meta.human import StoryPair, read_pairs, write_pairs

    pairs = [StoryPair(pair_id=str(i), story_id="s", img_seq=(), text_1="a", text_2="b", system_1="x",
                       system_2="y", gap=1.0) for i in range(5)]  # fmt: skip
    real = output.neutralise_cell
    calls = [0]

    def crash_after(n: int) -> Callable[[Any], Any]:
        def cell(value: Any) -> Any:
            calls[0] += 1
            if calls[0] > n:
                raise KeyboardInterrupt
            return real(value)

        return cell

    out = tmp_path / "p.csv"
    monkeypatch.setattr(output, "neutralise_cell", crash_after(30))
    with pytest.raises(KeyboardInterrupt):
        write_pairs(pairs, out)
    assert calls[0] > 13 and list(tmp_path.iterdir()) == []  # rows were written, to the temporary file only
    monkeypatch.setattr(output, "neutralise_cell", real)
    write_pairs(pairs, out)
    good = out.read_bytes()
    calls[0] = 0
    monkeypatch.setattr(output, "neutralise_cell", crash_after(30))
    with pytest.raises(KeyboardInterrupt), output.output_policy(force=True):
        write_pairs(pairs, out)
    monkeypatch.setattr(output, "neutralise_cell", real)
    assert out.read_bytes() == good and len(read_pairs(out, label_sign="base-minus-comp")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]


def test_a_full_disk_at_fsync_is_one_sentence_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "t.csv"
    out.write_text("old\n", encoding="utf-8")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="disk is full") as exc, output.output_policy(force=True):
        output.write_csv_rows(out, ["a"], [["1"]])
    assert str(out) in str(exc.value)
    assert out.read_text(encoding="utf-8") == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_machine_error_from_any_writer_is_one_sentence(
    g: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk or a read-only file system met by code outside `vistkit.data.output` (a library writing its own
    files) is still one sentence, not the "unexpected ... bug" catch-all."""
    from vistkit.meta import human

    for code_, words in ((errno.ENOSPC, "disk is full"), (errno.EROFS, "read-only")):

        def fail(pairs: Any, path: Any, code_: int = code_) -> None:
            raise OSError(code_, os.strerror(code_), str(path))

        monkeypatch.setattr(human, "write_pairs", fail)
        out = tmp_path / "p.csv"
        code, _, err = run(capsys, "meta", "rankings-to-pairs", g["rankings"], "-o", out)
        assert code == 1 and words in one_sentence_error(err, names=out)
    assert output.environment_error(ValueError("x")) is None


def test_output_keeps_the_permissions_a_plain_open_gives(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        p = output.write_text(tmp_path / "x.txt", "x")
        assert p.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    finally:
        os.umask(mask)


def test_stdout_and_devices_are_written_in_place(capsys: pytest.CaptureFixture[str]) -> None:
    with output.open_csv_output("-") as w:
        w.writerow(["=1+1", "-0.5"])
    assert capsys.readouterr().out.splitlines() == ["'=1+1,-0.5"]
    output.write_text("/dev/null", "nothing")
    assert Path("/dev/null").is_char_device()
    with pytest.raises(OutputError, match="disk is full"):
        output.write_text("/dev/full", "x" * 100_000)


# ============================================================================================ 3. CSV formulas
TRIGGERED = st.builds(
    lambda q, t, rest: "'" * q + t + rest,
    st.integers(0, 3),
    st.sampled_from(CSV_TRIGGERS),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
)
ANY_TEXT = st.one_of(TRIGGERED, st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
NAME = st.one_of(
    st.builds(lambda t, r: t + r, st.sampled_from(["=", "+", "-", "@"]),
              st.from_regex(r"[A-Za-z0-9(|!) ]{0,12}", fullmatch=True)),
    st.from_regex(r"[A-Za-z'][A-Za-z0-9 ]{0,10}[A-Za-z0-9]", fullmatch=True),
).map(str.strip).filter(bool)  # fmt: skip


@PROPS
@given(ANY_TEXT)
def test_neutralise_then_restore_is_the_identity(text: str) -> None:
    safe = neutralise_cell(text)
    assert restore_cell(safe) == text
    assert safe[:1] not in CSV_TRIGGERS or is_number_text(safe), safe


@pytest.mark.parametrize(
    ("cell", "written"),
    [("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
     ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"), ("'=x", "''=x"),
     ("-0.5", "-0.5"), ("+3", "+3"), ("1e-3", "1e-3"), ("-inf", "-inf"), ("a=b", "a=b"), ("'quoted'", "'quoted'"),
     (-0.5, -0.5), (3, 3)],
)  # fmt: skip
def test_owasp_cells(cell: Any, written: Any) -> None:
    assert neutralise_cell(cell) == written


@PROPS
@given(st.lists(st.lists(ANY_TEXT, min_size=3, max_size=3), min_size=1, max_size=6))
def test_csv_rows_round_trip(tmp_path: Path, rows: list[list[str]]) -> None:
    from vistkit.data.readers import read_csv, read_csv_rows

    p = tmp_path / "t.csv"
    output.write_csv_rows(p, ["a", "=b", "-c"], rows)
    names, got = read_csv(p)
    assert names == ["a", "=b", "-c"]
    assert [[r["a"], r["=b"], r["-c"]] for r in got] == rows
    assert read_csv_rows(p)[1:] == rows
    with open(p, encoding="utf-8", newline="") as fh:  # what a spreadsheet sees: no cell starts a formula
        for row in csv.reader(fh):
            assert all(c[:1] not in CSV_TRIGGERS or is_number_text(c) for c in row)


@PROPS
@given(st.lists(st.tuples(ANY_TEXT, ANY_TEXT, NAME, NAME), min_size=1, max_size=5))
def test_pairs_round_trip(tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    from vistkit.meta.human import StoryPair, read_pairs, write_pairs

    pairs = [
        StoryPair(pair_id=str(i), story_id=f"-s{i}", img_seq=("1", "2"), text_1=a, text_2=b, system_1=s1,
                  system_2=s2, gap=-0.5 if i % 2 else 0.25, n_stories=4, avg_rank_1=0.5, avg_rank_2=0.5)
        for i, (a, b, s1, s2) in enumerate(rows)
    ]  # fmt: skip
    p = tmp_path / "p.csv"
    write_pairs(pairs, p)
    back = read_pairs(p, label_sign="base-minus-comp")
    assert [(q.text_1, q.text_2, q.system_1, q.system_2, q.story_id, q.gap) for q in back] == [
        (q.text_1, q.text_2, q.system_1, q.system_2, q.story_id, q.gap) for q in pairs
    ]
    text = p.read_text(encoding="utf-8")
    assert ",-0.25," in text and "'-0.25" not in text  # numbers are written as numbers, never quoted


@PROPS
@given(st.lists(st.tuples(ANY_TEXT.filter(lambda t: t.strip() != ""), NAME), min_size=1, max_size=5))
def test_story_csv_round_trip(tmp_path: Path, rows: list[tuple[str, str]]) -> None:
    from vistkit.data.readers import read_stories, write_csv
    from vistkit.data.story import Story

    stories = [Story(story_id=f"={i}", text=t, system=s) for i, (t, s) in enumerate(rows)]
    p = tmp_path / "s.csv"
    write_csv(stories, p)
    back = read_stories(p)
    assert [(s.story_id, s.text, s.system) for s in back] == [(s.story_id, s.text, s.system) for s in stories]


@PROPS
@given(st.lists(st.tuples(NAME, st.floats(-1, 1, allow_nan=False)), min_size=1, max_size=5))
def test_table_csv_round_trip(rows: list[tuple[str, float]]) -> None:
    import io

    from vistkit.report.tables import OutputFormat, render_table

    text = render_table(["system", "ratio"], [list(r) for r in rows], OutputFormat.CSV)
    got = [[restore_cell(c) for c in r] for r in csv.reader(io.StringIO(text))]
    assert got[0] == ["system", "ratio"]
    assert [(r[0], float(r[1])) for r in got[1:]] == rows


def test_cli_round_trips_keep_formula_texts(
    g: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rankings CSV -> `meta rankings-to-pairs` -> `meta pairs`; `meta build-pairs` -> `meta pairs`; `meta
    beats-ref -f csv`; `score --per-item`: every cell a spreadsheet would run is quoted, and reads back as it was."""
    from vistkit.meta.human import read_pairs, read_rankings

    evil = {"A": '=HYPERLINK("http://x","y")', "B": "+1+cmd|' /C calc'!A0", "C": "-2 dogs ran", "D": "@SUM(A1)"}
    rk = tmp_path / "rk.csv"
    output.write_csv_rows(rk, ["task", "worker", "story", "rank", "system", "text"],
                          [["T1", w, k, r, f"={k}sys", evil[k]] for w, order in (("w1", "ABCD"), ("w2", "ABDC"))
                           for r, k in enumerate(order, start=1)])  # fmt: skip
    raw = rk.read_text(encoding="utf-8")
    assert "'=HYPERLINK" in raw and "'+1+cmd" in raw and "'-2 dogs" in raw and "'@SUM" in raw and "'=Asys" in raw
    assert {k: s.text for k, s in read_rankings(rk)["T1"]["stories"].items()} == evil
    pairs_csv = tmp_path / "pairs.csv"
    assert run(capsys, "meta", "rankings-to-pairs", rk, "-o", pairs_csv)[0] == 0
    back = read_pairs(pairs_csv)
    assert {p.text_1 for p in back} | {p.text_2 for p in back} == set(evil.values())
    assert {p.system_1 for p in back} | {p.system_2 for p in back} == {f"={k}sys" for k in evil}
    code, out, _ = run(capsys, "meta", "beats-ref", pairs_csv, "-m", METRIC, "-f", "csv")
    assert code == 0 and not [ln for ln in out.splitlines() if ln[:1] in CSV_TRIGGERS]
    code, out, _ = run(capsys, "meta", "pairs", pairs_csv, "-m", METRIC, "--bootstrap", "20", "-f", "json")
    assert code == 0 and json.loads(out)["pairs"] == len(back)

    machine = tmp_path / "machine.jsonl"
    machine.write_text("".join(json.dumps({"story_id": sid, "text": evil["A"]}) + "\n" for sid in ("r1", "r2")),
                       encoding="utf-8")  # fmt: skip
    built = tmp_path / "built.csv"
    assert run(capsys, "meta", "build-pairs", "-r", g["refs"], "--machine", f"@evil={machine}", "-o", built)[0] == 0
    got = read_pairs(built)
    assert {p.text_1 for p in got} | {p.text_2 for p in got} >= {evil["A"]} and "'=HYPERLINK" in built.read_text()

    hyps = tmp_path / "h.jsonl"
    hyps.write_text(json.dumps({"story_id": "=1+1", "text": "a b"}) + "\n", encoding="utf-8")
    per = tmp_path / "per.csv"
    assert run(capsys, "score", hyps, "-m", METRIC, "--per-item", per)[0] == 0
    assert per.read_text(encoding="utf-8").splitlines()[1].startswith("'=1+1,")
    from vistkit.data.readers import read_csv

    assert read_csv(per)[1][0]["id"] == "=1+1"


def test_studio_export_round_trip_keeps_formula_texts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stories and system names that look like formulas: `studio export -f rankings|pairs|tasks` quote them, and
    `meta rankings-to-pairs` / `read_pairs` give them back unchanged."""
    pytest.importorskip("sqlalchemy")
    test_client = pytest.importorskip("starlette.testclient").TestClient
    from studio_helpers import rank_by, read_page

    from vistkit.meta.human import read_pairs
    from vistkit.studio import db, service
    from vistkit.studio.app import create_app
    from vistkit.studio.plan import PlanItem, PlanStory, create_study

    texts = {"=cmd": "=1+2 the dog ran .", "+sys": "+it was fun .", "@at": "@home we sat ."}
    items = [PlanItem(key="s0", photo_ids=(), stories=[PlanStory(s, "s0", t) for s, t in texts.items()])]
    path = tmp_path / "S.db"
    create_study(path, task="rank", items=items, per_item=1)
    study = db.open_study(path)
    [(_, token)] = service.invite(study, n=1)
    client = test_client(create_app(study))
    page = read_page(client, token)
    order = [texts["=cmd"], texts["+sys"], texts["@at"]]
    r = client.post(f"/a/{token}/submit", data={"assignment": page.assignment, "csrf": page.csrf,
                                                "ranking": rank_by(page.texts, order)})  # fmt: skip
    assert r.status_code == 200
    rk, p1, p2, tasks = (tmp_path / n for n in ("rk.csv", "p1.csv", "p2.csv", "tasks.csv"))
    for fmt, out in (("rankings", rk), ("pairs", p2), ("tasks", tasks)):
        assert run(capsys, "studio", "export", path, "-f", fmt, "-o", out)[0] == 0
        with open(out, encoding="utf-8", newline="") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        assert not [c for c in cells if c[:1] in CSV_TRIGGERS and not is_number_text(c)]
    assert run(capsys, "meta", "rankings-to-pairs", rk, "-o", p1)[0] == 0
    assert p1.read_text(encoding="utf-8") == p2.read_text(encoding="utf-8")
    back = read_pairs(p1)
    assert {(p.system_1, p.text_1) for p in back} | {(p.system_2, p.text_2) for p in back} == set(texts.items())
    assert {(p.system_1, p.system_2) for p in back if p.gap > 0} | {
        (p.system_2, p.system_1) for p in back if p.gap < 0
    } == {("=cmd", "+sys"), ("=cmd", "@at"), ("+sys", "@at")}
    study.engine.dispose()


def test_formats_documents_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "formats")
    assert code == 0
    flat = " ".join(out.split())
    assert "--force" in flat and "formula" in flat and MARKER in flat


def test_files_saved_by_a_library_arrive_whole_or_not_at_all(tmp_path: Path) -> None:
    """`files_into` (save_pretrained of tokenizers and Vrank models): a save that fails half way leaves the
    folder as it was, without the temporary folder; a save that ends moves every file (and sub-folder) in."""
    from vistkit.data.output import files_into

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "keep.json").write_text("{}")
    with pytest.raises(RuntimeError), files_into(folder) as tmp:
        (tmp / "tokenizer.json").write_text('{"half": ')
        raise RuntimeError("killed while saving")
    assert sorted(p.name for p in folder.iterdir()) == ["keep.json"]
    with files_into(folder) as tmp:
        (tmp / "tokenizer.json").write_text("{}")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "vocab.txt").write_text("a\n")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "keep.json",
        "sub",
        "sub/vocab.txt",
        "tokenizer.json",
    ]


# ======================================================================================= 7. links and whole folders
def test_an_output_that_is_a_link_is_written_through_and_the_link_kept(
    g: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old\n", encoding="utf-8")
    link.symlink_to(real.name)
    assert run(capsys, "meta", "rankings-to-pairs", g["rankings"], "-o", link, "--force")[0] == 0
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith("story_a") is False
    assert real.read_text(encoding="utf-8") != "old\n" and "label" in real.read_text(encoding="utf-8").splitlines()[0]
    # the Python API too; a dangling link gets its target; a loop is one sentence
    output.write_text(link, "new\n")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "new\n"
    dangling = tmp_path / "dangling"
    dangling.symlink_to("made-here.txt")
    output.write_text(dangling, "x")
    assert dangling.is_symlink() and (tmp_path / "made-here.txt").read_text(encoding="utf-8") == "x"
    loop = tmp_path / "loop"
    loop.symlink_to(loop.name)
    with pytest.raises(OutputError, match="link loop"):
        output.write_text(loop, "x")


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "/dev/stderr"])
def test_a_name_of_stdout_or_stderr_writes_through_that_stream(g: dict[str, Path], tmp_path: Path, name: str) -> None:
    """``-o /dev/stdout > out.csv``: the output goes into out.csv after what the command printed (never at offset
    0 over it), the command's own messages go to stderr, and /dev/stdout stays the system's link (it used to be
    renamed over when stdout was a regular file, as root)."""
    import subprocess
    import sys

    if not Path(name).exists():
        pytest.skip(f"{name} does not exist here")
    streams = {"out": tmp_path / "out.txt", "err": tmp_path / "err.txt"}
    with open(streams["out"], "wb") as out, open(streams["err"], "wb") as err:
        err.write(b"before\n")
        err.flush()
        args = ["meta", "rankings-to-pairs", str(g["rankings"]), "-o", name, "--force"]
        rc = subprocess.run([sys.executable, "-m", "vistkit", *args], stdout=out, stderr=err, check=False).returncode
    assert rc == 0
    assert Path(name).exists() and (not name.startswith("/dev/std") or Path(name).is_symlink())
    written = streams["err" if name == "/dev/stderr" else "out"].read_text(encoding="utf-8")
    if name == "/dev/stderr":
        assert written.startswith("before\n")
    csv_lines = [ln for ln in written.splitlines() if ln.count(",") >= 3]
    assert csv_lines and "label" in csv_lines[0]
    if name != "/dev/stderr":  # stdout holds the pairs alone: "wrote N pairs" went to stderr
        assert written.splitlines()[0] == csv_lines[0] and "wrote" not in written


def test_a_report_replaced_with_force_keeps_nothing_of_the_old_one(
    g: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = tmp_path / "rep"
    assert run(capsys, "meta", "pairs", g["pairs"], "-m", METRIC, "--bootstrap", "20", "--report", rep)[0] == 0
    from vistkit.data import output

    # an earlier report that also wrote stale.csv (its marker lists it: vistkit's, replaced with the folder)
    (rep / "stale.csv").write_text("from an earlier report\n", encoding="utf-8")
    output._write_marker(rep, [*(output.marker_files(rep) or []), "stale.csv"])
    before = {p.name: p.read_bytes() for p in rep.iterdir()}
    # a writer that fails half-way leaves the old report as it was, and no hidden folder beside it
    from vistkit.report import html

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(html, "write_table_files", broken)
    code, _, err = run(capsys, "meta", "pairs", g["pairs"], "-m", METRIC, "--bootstrap", "20", "--report", rep,
                       "--force")  # fmt: skip
    assert code == 1 and "disk is full" in one_sentence_error(err)
    assert {p.name: p.read_bytes() for p in rep.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "rep"]
    monkeypatch.undo()
    # replaced whole: the new report, and nothing of the old one
    fresh = tmp_path / "fresh"
    for folder in (rep, fresh):
        assert run(capsys, "meta", "gap", g["pairs"], "-m", METRIC, "--report", folder, "--force")[0] == 0
    names = {p.name for p in rep.iterdir()}
    assert names == {p.name for p in fresh.iterdir()} and "stale.csv" not in names and "index.html" in names
    shutil.rmtree(fresh)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "rep"]
    # an input inside the folder is refused before anything is written (replacing the folder would delete it)
    inside = rep / "pairs.csv"
    shutil.copyfile(g["pairs"], inside)
    kept = {p.name: p.read_bytes() for p in rep.iterdir()}
    code, _, err = run(capsys, "meta", "pairs", inside, "-m", METRIC, "--report", rep, "--force")
    said = one_sentence_error(err)  # as an input, or as a file vistkit did not write there: refused either way
    assert code == 1 and ("replaces whole" in said or "did not write there (pairs.csv)" in said)
    assert {p.name: p.read_bytes() for p in rep.iterdir()} == kept


def test_a_report_never_replaces_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for name in (".", str(here)):  # ("..", which holds it, is refused already: it holds files vistkit did not write)
        with pytest.raises(OutputError, match="is the current folder"), output.replaced_folder(name, force=True):
            pass
    assert here.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["here"]
    with output.replaced_folder("rep") as fresh:
        (fresh / "index.html").write_text("x", encoding="utf-8")
    assert (here / "rep" / "index.html").read_text(encoding="utf-8") == "x"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc")
def test_only_open_file_names_under_proc_count_as_streams() -> None:
    """/proc/x is a path in a folder that takes no files, checked before any work; /proc/self/fd/N and /dev/fd/N
    name an open file (written in place)."""
    with pytest.raises(OutputError, match="does not take new files"):
        output.probe_writable(output.check_output_folder("/proc/vistkit-probe-x"))
    assert not output._is_stream(Path("/proc/vistkit-probe-x"))
    for name in ("/proc/self/fd/1", "/dev/fd/2", f"/proc/{os.getpid()}/fd/1", "/proc/thread-self/fd/0"):
        assert output._follow_links(Path(name))[1], name
