"""Probes of the model-based metrics, the photo layer and `vistkit distance` (round 15).

- `vistkit distance` with the human scores on both sides (one file or prefix, under one name or two, a link to
  it), or the same stories on both sides, printed dHM 0 without a word; a warning now says so.
- A score cache path (rovist-c/dhm-c ``cache=``) naming a file of another kind was met with "delete it"; another
  program's SQLite database got vistkit's table written into it. Both are refused, the file left as it was. A
  cache damaged or locked by another process during a run stopped it with "unexpected DatabaseError"; it is now
  one warning and the scores are computed.
- lm-* ``batch_tokens`` from Python: 2.5 ran as 2, nan/inf/'abc' raised bare ValueError/OverflowError.
- ``device=AUTO`` (or "auto ") passed the option check and then stopped the run at model load.
- The packaged LM could not be converted on a file system without flock (Lustre/NFS without locks): a bare
  OSError; it is now converted unlocked, safely.
- Model files, tokenizer files and photos left as Git LFS pointers (a clone without git-lfs) gave misleading
  messages ("the header claims 2,336,927,755,350,992,246 bytes"); each now says it is an LFS pointer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_probe_helpers import dhm_prefix

from vistkit.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# ------------------------------------------------------------------------------ distance: one side given twice
def test_the_same_scores_on_both_sides_of_distance_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dHM 0 from the human scores given as the model's too (one prefix spelled two ways, a link to a file)."""
    human = dhm_prefix(tmp_path, "h", {"1": 0.5, "2": 1.5}, {"1": 0.2, "2": 0.4}, {"1": 0.1, "2": 0.3})
    links = tmp_path / "links"
    links.mkdir()
    for f in tmp_path.glob("h_*"):
        (links / f.name).symlink_to(f)
    capsys.readouterr()
    for model in (human, tmp_path / "." / "h", links / "h"):
        assert main(["distance", "--human", str(human), "--model", str(model), "-f", "json"]) == 0
        got = capsys.readouterr()
        assert json.loads(got.out)["dHM"] == 0
        warnings = [ln for ln in got.err.splitlines() if ln.startswith("warning:")]
        assert len(warnings) == 1 and "hold the same G, C and R files, so dHM is 0" in warnings[0], got.err
    other = dhm_prefix(tmp_path, "m", {"1": 0.5, "2": 1.0}, {"1": 0.2, "2": 0.4}, {"1": 0.1, "2": 0.3})
    assert main(["distance", "--human", str(human), "--model", str(other), "-f", "json"]) == 0
    assert "warning" not in capsys.readouterr().err  # one story differs: no warning
    csv_file = tmp_path / "per_item.csv"
    csv_file.write_text("id,groovist,dhm-c,rovist-nr\n1,0.5,0.2,0.1\n", encoding="utf-8")
    (tmp_path / "link.csv").symlink_to(csv_file)
    assert main(["distance", "--human", str(csv_file), "--model", str(tmp_path / "link.csv"), "-f", "json"]) == 0
    assert "hold the same scores, so dHM is 0" in capsys.readouterr().err


def test_the_same_story_file_on_both_sides_of_distance_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stories = tmp_path / "s.json"
    stories.write_text(json.dumps([
        {"story_id": "1", "text": "the dog ran to the park. it was happy. we went home."},
        {"story_id": "2", "text": "a cat sat. the cat slept. then it ate."},
    ]), encoding="utf-8")  # fmt: skip
    copy = tmp_path / "copy.jsonl"
    copy.write_text("".join(json.dumps(s) + "\n" for s in json.loads(stories.read_text())), encoding="utf-8")
    capsys.readouterr()
    for model in (stories, copy):
        code = main(["distance", "--human-stories", str(stories), "--model-stories", str(model), "--dimensions", "R",
                     "-f", "json"])  # fmt: skip
        got = capsys.readouterr()
        assert code == 0 and json.loads(got.out)["dHM"] == 0
        warnings = [ln for ln in got.err.splitlines() if ln.startswith("warning:")]
        assert len(warnings) == 1 and "the same text for all 2 stories" in warnings[0], got.err


# ------------------------------------------------------------------------------ the score cache of rovist-c/dhm-c
def test_a_score_cache_path_naming_another_kind_of_file_is_not_to_be_deleted(tmp_path: Path) -> None:
    """`-O rovist-c.cache=stories.json` (or a model's weights) said "cannot be used (file is not a database); delete
    it or give another cache file": advice to delete the user's own file. It now says the file is no score cache,
    and the file is left as it was; only a damaged SQLite file is said to be safe to delete."""
    from vistkit.errors import InputError
    from vistkit.models.runtime import ScoreCache

    stories = tmp_path / "stories.json"
    stories.write_text(json.dumps([{"story_id": "1", "text": "we went home."}] * 20), encoding="utf-8")
    before = stories.read_bytes()
    with pytest.raises(InputError) as info:
        ScoreCache(stories)
    message = str(info.value)
    assert "delete" not in message and "not a score cache" in message and str(stories) in message, message
    assert stories.read_bytes() == before
    damaged = tmp_path / "scores.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(InputError, match=r"cannot be used .*; delete it"):
        ScoreCache(damaged)


def test_a_score_cache_path_naming_another_programs_database_is_left_alone(tmp_path: Path) -> None:
    """`cache=experiments.db` (an SQLite file of the user's own) got vistkit's scores table written into it; it is
    now refused, and the database is left as it was."""
    import sqlite3

    from vistkit.errors import InputError
    from vistkit.models.runtime import ScoreCache

    db = tmp_path / "experiments.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
    con.close()
    before = db.read_bytes()
    with pytest.raises(InputError, match=r"not a vistkit score cache.*runs") as info:
        ScoreCache(db)
    assert "\n" not in str(info.value)
    assert db.read_bytes() == before
    with sqlite3.connect(db) as con:
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["runs"]
    con.close()
    fresh = ScoreCache(tmp_path / "new.sqlite")  # a new file and an empty one are caches to fill
    fresh.put_many({"k": 0.5})
    assert ScoreCache(tmp_path / "new.sqlite").get_many(["k"]) == {"k": 0.5}
    (tmp_path / "empty.db").write_bytes(b"")
    assert len(ScoreCache(tmp_path / "empty.db")) == 0


# ------------------------------------------------------------------------------ lm-*: batch_tokens from Python
@pytest.mark.parametrize("value", [2.5, "abc", "512", float("nan"), float("inf"), True, [512]])
def test_a_batch_tokens_that_is_no_whole_number_is_one_sentence(value: object) -> None:
    """`lm-fluency` from Python with batch_tokens=2.5 ran with 2 (and '512' with a text), nan and inf raised a bare
    ValueError / OverflowError, 'abc' "invalid literal for int()"."""
    from vistkit.errors import InputError
    from vistkit.models.lm import check_batch_tokens

    with pytest.raises(InputError, match="batch_tokens must be a whole number from 1 to"):
        check_batch_tokens(value)  # type: ignore[arg-type]


def test_a_whole_batch_tokens_is_taken_in_any_number_type() -> None:
    import numpy as np

    from vistkit.models.lm import check_batch_tokens

    for value in (None, 1, 512, 512.0, np.int64(512)):
        check_batch_tokens(value)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ device names
@pytest.mark.parametrize("name", ["AUTO", "auto ", " Auto"])
def test_auto_is_read_as_the_other_device_names_are(name: str) -> None:
    """`-O lm-fluency.device=AUTO` passed the option check (as CPU and ' cpu ' do) and then stopped the run at model
    load with "device 'AUTO' is not one vistkit runs on; use auto, ..." (after the other metrics had been scored)."""
    pytest.importorskip("torch")
    from vistkit.models.runtime import choose_device

    assert choose_device(name) == choose_device("auto")


def test_a_device_of_another_type_is_refused_in_one_sentence() -> None:
    pytest.importorskip("torch")
    from vistkit.errors import InputError
    from vistkit.models.runtime import choose_device

    for value in (0, "gpu", "cuda:-1"):
        with pytest.raises(InputError, match="is not one vistkit runs on"):
            choose_device(value)  # type: ignore[arg-type]


def test_a_score_cache_that_cannot_be_read_any_more_is_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache damaged or locked by another process while a run used it (a second run writing over it, a disk or
    NFS lock error) stopped the run with "unexpected DatabaseError ... a bug in vistkit"; writing to it was already
    a warning. Reading now is one too: the scores are computed, only not taken from the cache."""
    from vistkit.models.runtime import ScoreCache

    path = tmp_path / "scores.sqlite"
    cache = ScoreCache(path)
    cache.put_many({str(i): 0.5 for i in range(5000)})
    assert cache.get_many(["1"]) == {"1": 0.5}
    path.write_bytes(b"x" * 3 * 4096)  # damaged under the open cache
    capsys.readouterr()
    assert cache.get_many(["1", "2"]) == {}
    assert cache.get_many(["3"]) == {}
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "cannot be read" in err and str(path) in err, err


# ------------------------------------------------------------------------------ the LM cache on a lockless disk
def _fake_conversion(gguf: Path, out: Path, *, source_sha256: str) -> None:
    """A stand-in for the GGUF conversion (as tests/test_lm.py's): a few small files and their record."""
    from vistkit.models import lm as lm_mod
    from vistkit.models.checkpoints import file_sha256

    (out / "model.safetensors").write_bytes(b"weights" * 100)
    (out / "config.json").write_text('{"num_hidden_layers": 2}', encoding="utf-8")
    meta = {
        "format": lm_mod.LM_FORMAT,
        "weights": {"model.safetensors": file_sha256(out / "model.safetensors")},
        "files": {"config.json": file_sha256(out / "config.json")},
    }
    (out / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")


@pytest.mark.parametrize("code", ["ENOLCK", "ENOSYS", "EOPNOTSUPP"])
def test_the_packaged_lm_converts_on_a_disk_without_file_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    """A cache on a file system without flock (Lustre or NFS mounted without locks, as on many clusters) stopped the
    first lm-* run with "unexpected OSError: [Errno 38] Function not implemented"; the LM is now converted without
    the lock (its folder is still written aside and renamed into place whole)."""
    import errno

    from vistkit.models import lm as lm_mod
    from vistkit.models.checkpoints import file_sha256

    gguf = tmp_path / "pkg" / "fake.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake")
    monkeypatch.setattr(lm_mod, "packaged_gguf", lambda: (gguf, file_sha256(gguf)))
    monkeypatch.setattr(lm_mod, "_write_converted", _fake_conversion)
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))

    def no_locks(fd: int, op: int) -> None:
        raise OSError(getattr(errno, code), "Function not implemented")

    monkeypatch.setattr(lm_mod.fcntl, "flock", no_locks)
    src = lm_mod.resolve_lm()
    assert src.folder is not None
    busy = src.folder.parent / f".{src.folder.name}.tmp-another-process"  # unlocked, it may be converting now
    busy.mkdir(parents=True)
    folder = lm_mod.convert_packaged()
    assert (folder / lm_mod.LM_META).is_file() and lm_mod.verify_converted(folder)
    assert [p for p in folder.parent.iterdir() if ".tmp-" in p.name] == [busy]
    assert lm_mod.convert_packaged() == folder


def test_a_conversion_finished_meanwhile_by_another_unlocked_process_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a lock two processes may convert at once: the second finds the first's folder in place at its
    rename and keeps it (os.replace of a folder onto a full one fails with "Directory not empty")."""
    import errno

    from vistkit.models import lm as lm_mod
    from vistkit.models.checkpoints import file_sha256

    gguf = tmp_path / "pkg" / "fake.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake")
    monkeypatch.setattr(lm_mod, "packaged_gguf", lambda: (gguf, file_sha256(gguf)))
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(lm_mod.fcntl, "flock", lambda fd, op: (_ for _ in ()).throw(OSError(errno.ENOLCK, "No locks")))
    target: list[Path] = []

    def racing(gguf_path: Path, out: Path, *, source_sha256: str) -> None:
        _fake_conversion(gguf_path, out, source_sha256=source_sha256)
        other = out.parent / target[0].name  # the other process renames its folder into place first
        other.mkdir()
        _fake_conversion(gguf_path, other, source_sha256=source_sha256)

    monkeypatch.setattr(lm_mod, "_write_converted", racing)
    src = lm_mod.resolve_lm()
    assert src.folder is not None
    target.append(src.folder)
    folder = lm_mod.convert_packaged()
    assert folder == src.folder and lm_mod.verify_converted(folder)
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name]


# ------------------------------------------------------------------------------ a model cloned without Git LFS
_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 538090408\n"
)


def _lfs_message(message: str, name: str) -> None:
    assert "Git LFS pointer" in message and "git lfs pull" in message and name in message, message
    assert "\n" not in message and "header claims" not in message, message


def test_a_model_folder_cloned_without_git_lfs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`git clone` of a Hugging Face model without git-lfs leaves 130-byte pointer files in place of the weights:
    `models info` and `-O lm-fluency.lm=DIR` said "not a valid safetensors file (the header claims
    2,336,927,755,350,992,246 bytes, more than the file holds)", a pickle checkpoint "is not a readable PyTorch
    checkpoint", and a pointer in place of tokenizer.json transformers' own words."""
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    from vistkit.errors import InputError
    from vistkit.models.checkpoints import check_safetensors, load_legacy_checkpoint

    folder = make_tiny_causal_lm(tmp_path / "lm", max_positions=64)
    (folder / "model.safetensors").write_text(_POINTER, encoding="utf-8")
    capsys.readouterr()
    assert main(["models", "info", str(folder)]) == 1
    _lfs_message(capsys.readouterr().err.strip(), "model.safetensors")
    with pytest.raises(InputError) as info:
        check_safetensors(folder / "model.safetensors")
    _lfs_message(str(info.value), "model.safetensors")
    checkpoint = tmp_path / "sop_model_epoch4.pth.tar"
    checkpoint.write_text(_POINTER, encoding="utf-8")
    for trust in (False, True):
        with pytest.raises(InputError) as info:
            load_legacy_checkpoint(checkpoint, trust=trust)
        _lfs_message(str(info.value), "sop_model_epoch4.pth.tar")


def test_an_lm_folder_with_a_git_lfs_pointer_for_its_tokenizer_says_so(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    from vistkit.errors import InputError
    from vistkit.models.lm import load_lm

    folder = make_tiny_causal_lm(tmp_path / "lm", max_positions=64)
    (folder / "tokenizer.json").write_text(_POINTER, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_lm(str(folder), device="cpu")
    _lfs_message(str(info.value), "tokenizer.json")


def test_a_photo_left_as_a_git_lfs_pointer_says_so(tmp_path: Path) -> None:
    """A photo folder of a dataset repository cloned without git-lfs: each photo "is not an image Pillow can
    identify (a text or another format under an image name?)"; it now says it is a Git LFS pointer."""
    pytest.importorskip("PIL")
    from vistkit.data.images import ImageStore, PhotoError

    (tmp_path / "1741642.jpg").write_text(_POINTER, encoding="utf-8")
    with pytest.raises(PhotoError) as info:
        ImageStore(tmp_path).image("1741642")
    _lfs_message(str(info.value), "1741642.jpg")
