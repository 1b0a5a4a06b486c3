"""Round-12 model-cache probes: the converted packaged LM (SmolLM2-135M) in the user cache.

- a read-only shared cache (converted once by an admin) failed to load: the lock file was opened for writing
  before the complete, hash-checked folder was even looked at; and a conversion it needed said only "cannot use
  ...lock: permission denied; check the path";
- the converted folder was private (mode 0700, weights 0600, from the temporary folder it was renamed from), so no
  other user could read a cache that an admin converted for them;
- `models list` called a damaged entry (weights truncated or changed, a file missing or added) "converted", and
  `models prepare-lm` refused it instead of converting it again;
- a file or a symbolic-link loop at the cache's ``lm`` folder was "unexpected FileExistsError ... a bug", and a
  VISTKIT_CACHE that is a symbolic-link loop was called "a file".

No test converts the real model: the GGUF and its ~25 s conversion are stand-ins (as in tests/test_lm.py). The
permission tests run in a forked child that cannot bypass file modes (as root it drops CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH, which is what made root's writes into 0555 folders succeed).
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_probe_helpers import one_error

import vistkit.models.lm as lm_mod
from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.models.checkpoints import file_sha256


# ------------------------------------------------------------------------------------------- stand-ins
def _fake_writer(gguf: Path, out: Path, *, source_sha256: str) -> None:
    """The conversion, stubbed: counts its runs beside the cache; writes the weights 0600 as safetensors does."""
    with open(out.parent / "runs.txt", "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    weights = out / lm_mod.WEIGHTS
    weights.write_bytes(b"weights" * 100)
    os.chmod(weights, 0o600)
    (out / "config.json").write_text('{"num_hidden_layers": 2}', encoding="utf-8")
    meta = {
        "format": lm_mod.LM_FORMAT,
        "weights": {lm_mod.WEIGHTS: file_sha256(weights)},
        "files": {"config.json": file_sha256(out / "config.json")},
    }
    (out / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake packaged GGUF and VISTKIT_CACHE in ``tmp_path``; returns the cache folder."""
    gguf = tmp_path / "pkg" / "fake.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake")
    monkeypatch.setattr(lm_mod, "packaged_gguf", lambda: (gguf, file_sha256(gguf)))
    monkeypatch.setattr(lm_mod, "_write_converted", _fake_writer)
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    yield tmp_path / "cache"
    for p in [tmp_path / "cache", *(tmp_path / "cache").rglob("*")]:  # writable again, so pytest can remove it
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)


def _runs(cache: Path) -> int:
    runs = cache / "lm" / "runs.txt"
    return len(runs.read_text().split()) if runs.exists() else 0


def _read_only(folder: Path) -> None:
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, stat.S_IMODE(p.stat().st_mode) & ~0o222)


# ------------------------------------------------------------------------------------------- no root override
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _CAP_FOWNER = 1, 2, 3


def _drop_root_override() -> None:
    """As root: drop the capabilities that bypass file modes (capset(2)), so 0555 folders are read-only here."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    keep = ~((1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH) | (1 << _CAP_FOWNER)) & 0xFFFFFFFF
    data[0].effective &= keep
    data[0].permitted &= keep
    data[0].inheritable &= keep
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _child(fn: Callable[[], Any], probe: Path, queue: Any) -> None:
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            _drop_root_override()
        try:
            (probe / "x").write_text("x")
            queue.put(("skip", "this process can write into a read-only folder"))
            return
        except PermissionError:
            pass
        queue.put(("ok", fn()))
    except BaseException as exc:  # reported to the parent
        queue.put((type(exc).__name__, str(exc)))


def _without_override(fn: Callable[[], Any], tmp_path: Path) -> tuple[str, Any]:
    """``fn()`` in a forked child that file modes bind: ("ok", result) or (exception type, message)."""
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    probe = tmp_path / "probe-read-only"
    probe.mkdir(exist_ok=True)
    os.chmod(probe, 0o555)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, probe, queue))
    proc.start()
    try:
        kind, value = queue.get(timeout=60)
    finally:
        proc.join(30)
        os.chmod(probe, 0o755)
    if kind == "skip":
        pytest.skip(value)
    return kind, value


# ------------------------------------------------------------------------------------------- read-only cache
@pytest.mark.parametrize("lock", ["lock file kept", "lock file removed"])
def test_a_complete_read_only_cache_loads_without_writing(cache: Path, tmp_path: Path, lock: str) -> None:
    """An admin converted the LM and left the cache read-only: using it opens nothing for writing."""
    folder = lm_mod.convert_packaged()
    if lock == "lock file removed":
        for f in folder.parent.glob("*.lock"):
            f.unlink()
    _read_only(cache)

    def use() -> str:
        got = lm_mod.convert_packaged()
        lm_mod.verify_converted(got)
        return str(got)

    assert _without_override(use, tmp_path) == ("ok", str(folder))
    assert _without_override(lambda: main(["models", "prepare-lm"]), tmp_path) == ("ok", 0)
    assert _runs(cache) == 1


@pytest.mark.parametrize("state", ["empty cache", "lm folder without the entry"])
def test_a_conversion_into_a_read_only_cache_says_so_in_one_sentence(cache: Path, tmp_path: Path, state: str) -> None:
    if state == "lm folder without the entry":
        (cache / "lm").mkdir()
    _read_only(cache)
    kind, message = _without_override(lambda: str(lm_mod.convert_packaged()), tmp_path)
    assert kind == "OutputError", (kind, message)
    assert "\n" not in message and message.count(". ") == 0
    assert "not writable" in message and "VISTKIT_CACHE" in message and "prepare-lm" in message
    assert str(cache) in message
    assert _runs(cache) == 0


def test_a_damaged_entry_of_a_read_only_cache_says_who_can_fix_it(cache: Path, tmp_path: Path) -> None:
    """`delete FOLDER and load the LM again` cannot be done in a cache one may only read."""
    folder = lm_mod.convert_packaged()
    (folder / "config.json").write_text('{"num_hidden_layers": 1}', encoding="utf-8")
    _read_only(cache)
    for call in (lambda: lm_mod.verify_converted(folder), lambda: lm_mod.convert_packaged(repair=True)):
        kind, message = _without_override(call, tmp_path)  # loading it, and `models prepare-lm`
        assert kind == "InputError" and "config.json does not match the SHA-256" in message, message
        assert "read-only" in message and "VISTKIT_CACHE" in message and "\n" not in message


def test_the_converted_folder_is_as_readable_as_any_cache_file(cache: Path) -> None:
    """mkdtemp's 0700 and safetensors' 0600 made an admin's conversion unreadable to everyone else."""
    old = os.umask(0o022)
    try:
        folder = lm_mod.convert_packaged()
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()} == {
        lm_mod.WEIGHTS: 0o644,
        "config.json": 0o644,
        lm_mod.LM_META: 0o644,
    }


# ------------------------------------------------------------------------------------------- models list
def _lm_row(capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["models", "list", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    (row,) = [r for r in rows if r["model"] == lm_mod.DEFAULT_LM]
    return str(row["location"])


def _truncate(folder: Path) -> None:
    w = folder / lm_mod.WEIGHTS
    w.write_bytes(w.read_bytes()[:100])


def _flip(folder: Path) -> None:
    w = folder / lm_mod.WEIGHTS
    data = bytearray(w.read_bytes())
    data[5] ^= 1
    w.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], Any]] = {
    "weights truncated": _truncate,
    "weights changed": _flip,
    "weights missing": lambda f: (f / lm_mod.WEIGHTS).unlink(),
    "config missing": lambda f: (f / "config.json").unlink(),
    "file added": lambda f: (f / "added_tokens.json").write_text("{}"),
    "record unreadable": lambda f: (f / lm_mod.LM_META).write_text("{not json"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_models_list_says_a_damaged_entry_is_damaged_and_prepare_lm_converts_it_again(
    cache: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _lm_row(capsys).startswith("packaged (")  # not converted yet
    folder = lm_mod.convert_packaged()
    assert _lm_row(capsys) == f"packaged, converted in cache: {folder}"
    DAMAGE[damage](folder)
    row = _lm_row(capsys)
    assert row.startswith("damaged in cache: ") and str(folder) in row, row
    assert "vistkit models prepare-lm" in row and "converts it again" in row
    assert _runs(cache) == 1  # `list` converted nothing
    assert main(["models", "prepare-lm"]) == 0
    assert _runs(cache) == 2
    lm_mod.verify_converted(folder)
    assert _lm_row(capsys) == f"packaged, converted in cache: {folder}"
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name]


def test_models_list_says_an_older_conversion_is_converted_again(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder converted before every file's hash was recorded is converted again on its next use."""
    folder = lm_mod.convert_packaged()
    meta = json.loads((folder / lm_mod.LM_META).read_text(encoding="utf-8"))
    del meta["files"]
    (folder / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")
    row = _lm_row(capsys)
    assert "converted again on first use" in row and "prepare-lm" in row, row
    assert main(["models", "prepare-lm"]) == 0
    assert _runs(cache) == 2 and _lm_row(capsys) == f"packaged, converted in cache: {folder}"


def test_models_list_of_a_damaged_entry_is_quick(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check reads and hashes the files (0.6 s for the real 538 MB), never converts."""
    folder = lm_mod.convert_packaged()
    _truncate(folder)

    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("models list converted the LM")

    lm_mod._write_converted = forbidden  # type: ignore[assignment]  # restored by the fixture's monkeypatch
    started = time.monotonic()
    assert _lm_row(capsys).startswith("damaged in cache: ")
    assert time.monotonic() - started < 10


# ------------------------------------------------------------------------------------------- odd cache paths
@pytest.mark.parametrize("odd", ["file", "symlink loop", "dangling symlink"])
def test_an_odd_lm_folder_in_the_cache_is_one_sentence(
    cache: Path, odd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lm_dir = cache / "lm"
    if odd == "file":
        lm_dir.write_text("junk")
    elif odd == "symlink loop":
        lm_dir.symlink_to(lm_dir)
    else:
        lm_dir.symlink_to(cache / "nowhere")
    err = one_error(capsys, "models", "prepare-lm")
    assert "a bug in vistkit" not in err and str(lm_dir) in err, err
    assert ("a file, not a folder" if odd == "file" else "symbolic link") in err, err
    assert "VISTKIT_CACHE" in err
    with pytest.raises(InputError):
        lm_mod.verify_converted(lm_dir / "x")


@pytest.mark.parametrize("odd", ["symlink loop", "dangling symlink"])
def test_a_vistkit_cache_that_is_a_broken_link_is_not_called_a_file(
    tmp_path: Path, odd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vistkit.models.runtime import folder_problem

    link = tmp_path / "link"
    link.symlink_to(link if odd == "symlink loop" else tmp_path / "nowhere" / "deeper")
    why = folder_problem(link)
    assert "symbolic link" in why and "file" not in why, why


def test_models_info_of_an_older_conversion_says_it_is_converted_again(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its record lacks the other files' hashes, so `models info` refused its config.json as "not written by the
    conversion", although the next load converts it again."""
    folder = lm_mod.convert_packaged()
    meta = json.loads((folder / lm_mod.LM_META).read_text(encoding="utf-8"))
    del meta["files"]
    (folder / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")
    capsys.readouterr()
    assert main(["models", "info", lm_mod.DEFAULT_LM, "-f", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["state"].startswith("converted by an older vistkit: converted again on first use")
    assert "fingerprint" not in info


# ------------------------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("odd", ["symlink loop", "dangling symlink"])
def test_a_model_path_that_is_a_broken_link_is_named_so(
    tmp_path: Path, odd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`models info LINK` and an LM option naming one said "neither a local path ... nor a hub id"."""
    link = tmp_path / "model"
    link.symlink_to(link if odd == "symlink loop" else tmp_path / "nowhere")
    err = one_error(capsys, "models", "info", link)
    assert "symbolic link that leads nowhere" in err and str(link) in err, err
    with pytest.raises(InputError, match="symbolic link that leads nowhere"):
        lm_mod.resolve_lm(str(link))


@pytest.mark.parametrize("kind", ["state-dict", "rovist-sop"])
def test_models_convert_of_a_named_pipe_says_what_it_is(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--kind state-dict said "checkpoint fifo does not exist" of a FIFO that exists."""
    fifo = tmp_path / "ck.pth.tar"
    os.mkfifo(fifo)
    err = one_error(capsys, "models", "convert", fifo, tmp_path / "out", "--kind", kind, "--trust-checkpoint")
    assert "does not exist" not in err and "named pipe" in err, err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------- other packaged models
@pytest.mark.parametrize("damage", ["weights truncated", "no model files", "fine"])
def test_models_list_says_a_damaged_packaged_model_is_damaged(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A packaged model's folder was listed by its path (installed) whatever it held; its weights' headers are
    checked (cheap: no tensor is read)."""
    import sys
    import types

    import numpy as np

    from vistkit.models.resolve import PACKAGED_MODELS, PackagedModel

    st_numpy = pytest.importorskip("safetensors.numpy")

    pkg = tmp_path / "fakepkg"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    weights = pkg / "model" / "head.safetensors"
    st_numpy.save_file({"w": np.zeros((64, 64), dtype=np.float32)}, str(weights))
    (pkg / "model" / "config.json").write_text("{}")
    if damage == "weights truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "no model files":
        weights.unlink()
        (pkg / "model" / "config.json").unlink()
    module = types.ModuleType("vistkit_fake_pkg")
    module.__file__ = str(pkg / "__init__.py")
    monkeypatch.setitem(sys.modules, "vistkit_fake_pkg", module)
    model = PackagedModel("fake-model", "vistkit_fake_pkg", "vistkit-fake-pkg", "model", "fake/model", "a fake")
    monkeypatch.setitem(PACKAGED_MODELS, "fake-model", model)
    capsys.readouterr()
    assert main(["models", "list", "-f", "json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["model"] == "fake-model"]
    if damage == "fine":
        assert row["location"] == str(pkg / "model")
    else:
        where = row["location"]
        assert where.startswith("damaged: ") and str(pkg / "model") in where, where
        assert where.endswith("reinstall it: pip install --force-reinstall vistkit-fake-pkg"), where


def test_models_list_with_an_unusable_cache_still_lists_every_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A VISTKIT_CACHE that is a file failed the whole listing; the LM's row now says why it cannot be used."""
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "file"))
    capsys.readouterr()
    assert main(["models", "list", "-f", "json"]) == 0
    rows = {r["model"]: r["location"] for r in json.loads(capsys.readouterr().out)}
    assert "minilm-l6" in rows
    assert rows[lm_mod.DEFAULT_LM].startswith("cannot be used here: VISTKIT_CACHE="), rows
