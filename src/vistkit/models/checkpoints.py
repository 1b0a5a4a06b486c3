"""Safe checkpoint loading and one-time conversion to safetensors + JSON.

Default loading never unpickles arbitrary code: converted folders hold ``model.safetensors`` (tensors only)
and ``vistkit_model.json`` (config, provenance). Legacy PyTorch checkpoints (``.pth.tar``/``.pt``/``.bin``:
pickles) are read only with ``trust=True``, and even then only with ``torch.load(weights_only=True)`` plus an
allow-list of harmless classes (``argparse.Namespace``, which the RoViST checkpoints pickle as ``opt``): there
is no full unpickle, so a checkpoint that names any other class or function is refused, naming it.

A converted folder::

    model.safetensors      the state dict (keys as in the original module)
    vistkit_model.json     {"format": "vistkit-converted/1", "kind": ..., "config": {...}, "source": {...}}
    tokenizer files        optional, copied in by the converter of a kind that needs them
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from vistkit.errors import InputError, MissingDependencyError

FORMAT = "vistkit-converted/1"
META_FILE = "vistkit_model.json"
WEIGHTS_FILE = "model.safetensors"
LEGACY_SUFFIXES = (".pth.tar", ".pth", ".pt", ".bin", ".ckpt", ".tar", ".pkl")


def file_sha256(path: str | Path, *, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file (streamed)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


#: how a Git LFS pointer file starts (what `git clone` of a model repository leaves without git-lfs)
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def lfs_pointer_problem(path: str | Path) -> str | None:
    """One sentence when ``path`` is a Git LFS pointer (a few lines naming the real file's hash and size) in place of
    the file itself, else None."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(_LFS_POINTER))
    except OSError:
        return None
    if head != _LFS_POINTER:
        return None
    return (
        f"{p} is a Git LFS pointer, not the file itself (the repository was cloned without git-lfs): run "
        f"`git lfs install` and then `git lfs pull` in {p.parent}, or download the files again (a model: hf download)"
    )


def refuse_lfs_pointers(folder: str | Path) -> None:
    """`InputError` naming the first Git LFS pointer among a model folder's small files (weights or tokenizer
    files left as pointers by a clone without git-lfs)."""
    p = Path(folder)
    if not p.is_dir():
        return
    try:
        small = sorted(f for f in p.iterdir() if f.is_file() and f.stat().st_size < 1024)
    except OSError:
        return
    for f in small:
        if why := lfs_pointer_problem(f):
            raise InputError(why)


def is_legacy_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` is a pickle-based PyTorch checkpoint file (by name)."""
    p = Path(path)
    return p.is_file() and p.name.lower().endswith(LEGACY_SUFFIXES)


def is_converted(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by `save_converted`."""
    p = Path(path)
    return p.is_dir() and (p / META_FILE).is_file() and (p / WEIGHTS_FILE).is_file()


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("this model needs PyTorch: pip install 'vistkit[models]'") from None
    return torch


def _refused_globals(torch: Any, path: Path, allowed: set[str]) -> list[str]:
    """Globals a checkpoint's pickle names beyond torch's tensor allow-list and ``allowed`` (read without
    running the pickle)."""
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # not a zip checkpoint / unreadable: torch.load reports it below
        return []
    return [g for g in found if g not in allowed]


def load_legacy_checkpoint(path: str | Path, *, trust: bool = False) -> dict[str, Any]:
    """The object saved in a pickle-based checkpoint (for RoViST: ``{'model': state_dict, 'opt':
    Namespace}``).

    Refuses without ``trust=True`` (a pickle can run code). With it, reads the file only with torch's
    restricted unpickler (``weights_only=True``: tensors, containers and plain values) plus
    ``argparse.Namespace``, which the official RoViST checkpoints pickle as ``opt``. A pickle that names any
    other class or function is refused with that name; nothing in it runs, trusted or not. Always loads on CPU.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"checkpoint {p} does not exist")
    if why := lfs_pointer_problem(p):
        raise InputError(why)
    if not trust:
        raise InputError(
            f"{p.name} is a pickle-based PyTorch checkpoint, which can run code when loaded; if you "
            "trust its source pass trust_checkpoint=True (CLI: --trust-checkpoint), or convert it once with "
            "`vistkit models convert` and use the converted folder"
        )
    torch = _torch()
    import argparse
    import pickle

    allowed = [argparse.Namespace]
    check_records(p)
    refused = _refused_globals(torch, p, {"argparse.Namespace"})
    if refused:
        raise InputError(_refusal(p, refused[0]))
    try:
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")  # refused or read: no advice
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        name = _first_foreign_global(p) or _global_in_message(str(exc))
        if name:
            raise InputError(_refusal(p, name)) from None
        raise InputError(f"{p.name} is not a checkpoint vistkit can read safely ({_torch_reason(exc)})") from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise InputError(f"{p.name} is not a readable PyTorch checkpoint ({_first_line(exc)})") from None
    except Exception as exc:  # a corrupt pickle stream fails in many ways (IndexError, KeyError, ...)
        raise InputError(
            f"{p.name} is not a readable PyTorch checkpoint ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    if not isinstance(obj, dict):
        raise InputError(f"{p.name} holds a {type(obj).__name__}, not a checkpoint dictionary")
    check_dense_size(_named_tensors(torch, obj), p.name)  # before anything makes a tensor dense
    return obj


def readable_global(name: str) -> str:
    """A pickled global's name as Python 3 knows it (protocol-2 pickles spell ``subprocess.call`` as
    ``commands.call`` and builtins as ``__builtin__``)."""
    import _compat_pickle

    module, _, attr = name.rpartition(".")
    if (module, attr) in _compat_pickle.NAME_MAPPING:
        module, attr = _compat_pickle.NAME_MAPPING[(module, attr)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    if module == "posix":
        module = "os"
    return f"{module}.{attr}" if module else attr


def load_restricted_pickle(path: str | Path, *, allowed: Mapping[str, set[str]], what: str) -> Any:
    """Unpickle ``path`` admitting only the globals in ``allowed`` (module -> names); plain containers,
    strings and numbers need none. Any other global is refused by name before anything is called, so no
    code in the file runs (``__reduce__`` can only call what ``allowed`` admits)."""
    import pickle

    p = Path(path)

    class _Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if name in allowed.get(module, set()):
                return super().find_class(module, name)
            raise InputError(
                f"{p.name} needs `{readable_global(f'{module}.{name}')}`, which vistkit does not load (it could "
                f"run code); {what}"
            )

        def persistent_load(self, pid: Any) -> Any:
            raise InputError(f"{p.name} refers to external objects, which vistkit does not load; {what}")

    try:
        with open(p, "rb") as fh:
            return _Restricted(fh).load()
    except InputError:
        raise
    except RecursionError:
        raise InputError(f"{p.name}: the pickle is nested too deeply") from None
    except Exception as exc:  # truncated or corrupt pickles raise many kinds
        raise InputError(f"{p.name} is not a readable pickle ({type(exc).__name__}: {_first_line(exc)})") from None


# globals a plain-pickle checkpoint may name that torch's restricted unpickler admits (tensor rebuilding)
_TENSOR_GLOBALS = ("torch.", "collections.OrderedDict", "argparse.Namespace")


# bytes per element of the storage classes a legacy torch.save names (torch.FloatStorage, ...); others count 16
_STORAGE_BYTES = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "QInt8": 1, "QUInt8": 1, "QInt32": 4,
}  # fmt: skip


def _scan_pickles(path: Path) -> tuple[list[str], int]:
    """The globals a legacy (non-zip) checkpoint or bare pickle names, and the bytes its tensor storages declare,
    read with an unpickler that records every global and returns an inert stub instead (nothing in the file runs).
    What was found before a malformed part is kept."""
    import pickle

    class _Stub:
        qualname = ""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __setstate__(self, state: Any) -> None:
            pass

    found: list[str] = []
    storages: dict[Any, int] = {}  # by key: views of one storage share it

    class _Scanner(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            found.append(readable_global(f"{module}.{name}"))
            return type(name, (_Stub,), {"qualname": f"{module}.{name}"})

        def persistent_load(self, pid: Any) -> Any:
            # legacy torch.save: ("storage", storage class, key, location, numel, view metadata)
            if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[4], int):
                kind = getattr(pid[1], "qualname", "").rsplit(".", 1)[-1].removesuffix("Storage")
                storages[str(pid[2])] = max(0, pid[4]) * _STORAGE_BYTES.get(kind, 16)
            return None

    try:
        with open(path, "rb") as fh:
            for _ in range(4):  # legacy torch.save: magic number, protocol, sys info, then the object
                _Scanner(fh).load()
    except Exception:  # end of the pickles, raw storage bytes, or a malformed file: keep what was found
        pass
    return found, sum(storages.values())


def _first_foreign_global(path: Path) -> str | None:
    """The first global a legacy (non-zip) checkpoint or bare pickle names outside torch's tensor machinery
    (`_scan_pickles`); ``None`` when there is none or the file cannot be scanned.

    torch's own refusal of such files names protocol-2 builtins without their module (``eval``) and does not
    name the globals of protocol-0/1 pickles at all, hence this scan.
    """
    found, _ = _scan_pickles(path)
    return next((g for g in found if not g.startswith(_TENSOR_GLOBALS)), None)


def check_records(path: str | Path) -> None:
    """Refuse a checkpoint whose records or tensor storages claim more bytes than the file holds, before torch
    allocates or inflates anything: zip records (`check_zip_records`) or a legacy file's declared storages."""
    import zipfile

    p = Path(path)
    if zipfile.is_zipfile(p):
        check_zip_records(p)
        return
    size = p.stat().st_size
    _, declared = _scan_pickles(p)
    if declared > size:
        raise InputError(
            f"{p.name}: its tensors declare {declared:,} bytes, more than the file holds ({size:,} bytes); the "
            "checkpoint is damaged"
        )


def check_zip_records(path: str | Path) -> None:
    """Refuse a zip-format checkpoint (``torch.save``'s format) with a record that would inflate, or that
    claims more bytes than the file holds, naming it, before torch reads any record: torch writes every record
    stored (uncompressed), so a deflated record can only be a decompression bomb."""
    import zipfile

    p = Path(path)
    if not zipfile.is_zipfile(p):
        return
    size = p.stat().st_size
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                    raise InputError(
                        f"{p.name}: record {info.filename[:80]!r} is compressed ({info.compress_size:,} bytes that "
                        f"would inflate to {info.file_size:,}); torch.save never compresses, so vistkit does not "
                        "read it"
                    )
                if info.header_offset + info.compress_size > size:
                    raise InputError(
                        f"{p.name}: record {info.filename[:80]!r} claims {info.file_size:,} bytes, more than the "
                        "file holds; the checkpoint is damaged"
                    )
    except zipfile.BadZipFile as exc:
        raise InputError(f"{p.name} is not a readable PyTorch checkpoint ({exc})") from None


def check_pickled_weights(folder: Path) -> None:
    """Refuse a Hugging Face model folder whose only weights are pickles (``pytorch_model*.bin``) that name
    anything beyond torch's tensor machinery, naming it; the pickles are scanned, never run.

    transformers reads such files with ``torch.load(weights_only=True)``, so nothing in them runs either way;
    this turns its multi-line refusal into one sentence before any loading (tensor-only files pass).
    """
    import zipfile

    if not folder.is_dir() or any(folder.glob("*.safetensors")):
        return
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if not bins:
        return
    try:
        import torch
    except ImportError:  # nothing can load them: the loader says what is missing
        return
    for b in bins:
        check_records(b)
        if zipfile.is_zipfile(b):
            refused = _refused_globals(torch, b, set())
            name = refused[0] if refused else None
        else:
            name = _first_foreign_global(b)
        if name:
            raise InputError(
                f"{b} needs `{readable_global(name)}`, which vistkit does not load (it could run code); model "
                "weights may hold only tensors: use a folder with model.safetensors"
            )


def _torch_reason(exc: BaseException) -> str:
    """The cause in torch's long weights-only error (which ends in advice to unpickle everything): its text after
    ``WeightsUnpickler error:`` up to the first blank line, spaces collapsed. Cut with `str.find`: the regex it
    was (``:\\s*(.+?)\\s*(?:\\n\\n|$)``) took 3.6 s on a refused global name holding 20,000 spaces (quadratic)."""
    message = str(exc)
    at = message.find(_UNPICKLER_ERROR)
    if at < 0 or at + len(_UNPICKLER_ERROR) == len(message):  # nothing after it
        return _first_line(exc)
    return " ".join(message[at + len(_UNPICKLER_ERROR) :].lstrip().split("\n\n", 1)[0].split())[:200]


_UNPICKLER_ERROR = "WeightsUnpickler error:"


def _refusal(p: Path, name: str) -> str:
    name = readable_global(name)
    return (
        f"{p.name} needs `{name}`, which vistkit does not load (it could run code); a checkpoint may hold only "
        "tensors, containers, plain values and argparse.Namespace"
    )


def _global_in_message(message: str) -> str | None:
    """The dotted name torch's restricted unpickler refused, read off its error message."""
    import re

    m = re.search(
        r"(?:Unsupported global: GLOBAL|Trying to call reduce for|Unsupported operand.*?global) "
        r"([\w.]+)",
        message,
    )
    if m is None:
        m = re.search(r"GLOBAL ([\w.]+)", message)
    return m.group(1) if m else None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def extract_state_dict(obj: Mapping[str, Any], *, where: str | Path = "the checkpoint") -> dict[str, Any]:
    """The tensor state dict inside a checkpoint dict (``model`` / ``state_dict`` entry, or the dict
    itself); weights holding NaN or infinity are refused (`refuse_non_finite`)."""
    torch = _torch()
    for key in ("model", "state_dict", "model_state_dict"):
        inner = obj.get(key)
        if isinstance(inner, Mapping) and inner and all(torch.is_tensor(v) for v in inner.values()):
            refuse_non_finite(inner.items(), where)
            return dict(inner)
    if obj and all(torch.is_tensor(v) for v in obj.values()):
        refuse_non_finite(obj.items(), where)
        return dict(obj)
    for key in ("model", "state_dict", "model_state_dict"):  # one that holds something besides tensors: name it
        inner = obj.get(key)
        if isinstance(inner, Mapping):
            odd = next(((k, v) for k, v in inner.items() if not torch.is_tensor(v)), None)
            kind = type(odd[1]).__name__ if odd is not None else ""
            article = "an" if kind[:1].lower() in "aeiou" else "a"
            what = "is empty" if odd is None else f"holds {odd[0]!r}, {article} {kind}, not a tensor"
            raise InputError(
                f"{where}: no state dict found: its {key!r} entry {what}; a state dict maps parameter names to "
                "tensors (save model.state_dict())"
            )
    raise InputError(f"no state dict found in the checkpoint (keys: {sorted(obj)[:8]})")


def refuse_non_finite(tensors: Iterable[tuple[str, Any]], where: str | Path) -> None:
    """Refuse floating-point weights holding NaN or infinity (a training run that diverged, a damaged
    conversion): every score would be NaN, with no reason given. An expansion bomb is refused first
    (`check_dense_size`): checking its values would allocate its dense size."""
    torch = _torch()
    tensors = [(name, t) for name, t in tensors if torch.is_tensor(t)]
    check_dense_size(tensors, str(where))
    for name, t in tensors:
        if (why := _unstorable(t)) is not None:
            raise InputError(f"{where}: its {str(name)[:60]!r} {why}")
    bad = [
        name
        for name, t in tensors
        if t.layout == torch.strided  # sparse and other layouts: `dense_named_tensors` refuses them
        and t.is_floating_point()
        and t.numel()
        # float8 has no isfinite in torch: its values checked as float32 (exactly the same numbers)
        and not bool(torch.isfinite(t if t.element_size() > 1 else t.float()).all())
    ]
    if bad:
        shown = ", ".join(bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise InputError(
            f"{where}: {len(bad)} of its weights hold NaN or infinite values ({shown}), so every score would be "
            "NaN; use a checkpoint saved before training diverged (or convert the original again)"
        )


def _unstorable(t: Any) -> str | None:
    """Why a tensor's values cannot be checked or stored in safetensors, in a few words ending with what to do, or
    None: a quantized tensor (torch.ao.quantization: its dtype has no safetensors name; it stopped a conversion with
    "unexpected KeyError: torch.qint8") or one on the meta device (shapes without values)."""
    if t.is_quantized:
        return f"is a quantized tensor ({str(t.dtype).replace('torch.', '')}); dequantize it first (.dequantize())"
    if t.is_meta:
        return "is a tensor on the meta device, which holds no values; save the checkpoint from the trained model"
    return None


def jsonable(value: Any) -> Any:
    """``value`` made JSON-safe (Namespaces become dicts; non-finite floats and odd objects become
    strings)."""
    import argparse

    if isinstance(value, argparse.Namespace):
        value = vars(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


#: a checkpoint's tensors may take at most this many times the bytes of the distinct storages they view once made
#: dense (as `dense_named_tensors` writes them), once they take more than `DENSE_FLOOR_BYTES`
#: (`check_dense_size`). A tensor's shape and strides may view one storage many times over: a stride-0
#: ``torch.zeros(1).expand(20000, 20000)`` is a 4-byte storage (a 1.6 KB file) that became a 1.6 GB safetensors
#: file and needed 3.4 GB of memory (growing with the square of the side). Legitimate sharing stays far below the
#: ratio: tied weights (an embedding shared with the output layer) count one storage twice, a block reused in every
#: layer of a 12-layer model lists it 12 times; the floor lets any small checkpoint through whatever its sharing
DENSE_RATIO = 16
DENSE_FLOOR_BYTES = 256 << 20  # 256 MiB


def _named_tensors(torch: Any, obj: Any) -> Iterator[tuple[str, Any]]:
    """``(dotted path, tensor)`` for every tensor in a loaded checkpoint object (dicts, lists, tuples,
    ``argparse.Namespace``), walked without recursion; a container met twice (a cycle) is walked once."""
    import argparse

    stack: list[tuple[str, Any]] = [("", obj)]
    seen: set[int] = set()
    while stack:
        path, value = stack.pop()
        if torch.is_tensor(value):
            yield path or "<top>", value
            continue
        if isinstance(value, argparse.Namespace):
            value = vars(value)
        if isinstance(value, (Mapping, list, tuple)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(items)))


def _shape(t: Any) -> str:
    return "x".join(str(int(n)) for n in t.shape) or "scalar"


def check_dense_size(tensors: Iterable[tuple[str, Any]], where: str) -> None:
    """Refuse tensors that would take far more bytes once made dense (numel x element size each, as safetensors
    stores them) than the distinct storages they view hold: `DENSE_RATIO` times, and more than `DENSE_FLOOR_BYTES`
    (a stride-0 or overlapping view is an expansion bomb). Read from the tensors' metadata; nothing is allocated."""
    torch = _torch()
    dense = 0
    storages: dict[int, int] = {}  # storage address -> bytes: views of one storage count it once
    worst: tuple[int, int, str, Any] | None = None  # (bytes beyond its own storage, dense bytes, name, tensor)
    for name, t in tensors:
        if t.layout != torch.strided:  # sparse and other layouts: `dense_named_tensors` refuses them
            continue
        size = math.prod(int(n) for n in t.shape) * t.element_size()  # Python ints: never overflows
        try:
            storage = t.untyped_storage()
            stored = int(storage.nbytes())
            storages[int(storage.data_ptr())] = max(stored, storages.get(int(storage.data_ptr()), 0))
        except Exception:  # a tensor without a readable storage: count it as holding its own bytes
            stored = size
            storages[-len(storages) - 1] = size
        dense += size
        if worst is None or (size - stored, size) > worst[:2]:
            worst = (size - stored, size, name, t)
    held = sum(storages.values())
    if worst is None or dense <= DENSE_FLOOR_BYTES or dense <= DENSE_RATIO * held:
        return
    _, size, name, t = worst
    raise InputError(
        f"{where}: its tensors hold {held:,} bytes of data but would take {dense:,} bytes once made dense "
        f"({str(name)[:60]!r}, shape {_shape(t)[:80]}, alone takes {size:,}), more than {DENSE_RATIO} times as "
        "much, so vistkit does not expand it (its tensors repeat their data through their strides, as torch's "
        "expand makes them)"
    )


def dense_named_tensors(state_dict: Mapping[Any, Any]) -> dict[str, Any]:
    """The state dict as safetensors stores it: names that are text, dense tensors (independent contiguous CPU
    copies: safetensors refuses shared or strided storage); anything else is refused in one sentence, as are
    tensors whose dense copies would be far larger than the data they view (`check_dense_size`), before any copy."""
    torch = _torch()
    check_dense_size(((str(k), v) for k, v in state_dict.items() if torch.is_tensor(v)), "the state dict")
    tensors: dict[str, Any] = {}
    for name, value in state_dict.items():
        if not isinstance(name, str):
            raise InputError(f"the state dict has the key {name!r}, which is not a parameter name (text)")
        if not torch.is_tensor(value):
            raise InputError(f"the state dict's {name[:60]!r} is a {type(value).__name__}, not a tensor")
        if value.layout != torch.strided:
            raise InputError(
                f"the state dict's {name[:60]!r} is a {str(value.layout).replace('torch.', '')} tensor; only dense "
                "tensors can be converted (call .to_dense() on it first)"
            )
        if (why := _unstorable(value)) is not None:
            raise InputError(f"the state dict's {name[:60]!r} {why}")
        tensors[name] = value.detach().to("cpu").contiguous().clone()
    return tensors


def _remove_earlier_model(out: Path) -> None:
    """Before a model is written into ``out`` (a folder vistkit made): remove the earlier commit record first,
    then the further files it listed, so that no file of the earlier model is read with the new one."""
    meta_file = out / META_FILE
    if not meta_file.is_file():
        return
    try:
        listed = json.loads(meta_file.read_text(encoding="utf-8")).get("files_sha256") or {}
    except (OSError, ValueError, AttributeError):
        listed = {}
    meta_file.unlink()
    for name in listed if isinstance(listed, dict) else ():
        target = (out / str(name)).resolve()
        if target.is_relative_to(out.resolve()) and target.is_file():
            target.unlink()


def check_listed_files(folder: Path, meta: Mapping[str, Any]) -> None:
    """Refuse a converted folder whose further files (``files_sha256``: its tokenizer) are missing or are not
    the files it was saved with, in one sentence naming the file."""
    listed = meta.get("files_sha256") or {}
    if not isinstance(listed, dict):
        raise InputError(f"{folder / META_FILE}: files_sha256 is not a JSON object; save the model again")
    for name, expected in sorted(listed.items()):
        path = folder / str(name)
        if not path.resolve().is_relative_to(folder.resolve()):
            raise InputError(f"{folder / META_FILE} lists {name!r}, which is outside the folder; save the model again")
        try:
            actual = file_sha256(path)
        except OSError as exc:
            raise InputError(
                f"{path}: {(exc.strerror or 'cannot be read').lower()}; this model folder is incomplete (was its "
                "saving interrupted?): save or train it again"
            ) from None
        if actual != str(expected).lower():
            raise InputError(
                f"{path} is not the file this model was saved with (its SHA-256 differs from {META_FILE}); save or "
                "train the model again"
            )


def save_converted(
    folder: str | Path,
    state_dict: Mapping[str, Any],
    *,
    kind: str,
    config: Mapping[str, Any],
    source: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    files: Callable[[Path], None] | None = None,
) -> Path:
    """Write ``model.safetensors`` + ``vistkit_model.json`` into ``folder``; returns the folder.

    The folder must be new, empty or vistkit's (`vistkit.data.output.prepare_folder`; in the CLI an earlier
    model needs ``--force``); each file is written to a temporary file and renamed into place. ``files(tmp)``
    writes further files (a tokenizer) into a temporary folder whose files are then moved in.

    ``vistkit_model.json`` is the commit record: an earlier one is removed first and the new one is written
    last, listing the SHA-256 of every further file (``files_sha256``, checked by `load_converted`), so a save
    that is killed half-way leaves a folder that is refused in one sentence, never one that mixes two models.
    """
    _torch()
    from safetensors.torch import save_file

    from vistkit.data.output import MARKER, MODEL_MARKERS, files_into, output_path, prepare_folder, write_text

    out = Path(folder)
    if not (out / MARKER).is_file():  # a folder this run has not marked yet: new, empty or vistkit's (--force)
        out.parent.mkdir(parents=True, exist_ok=True)
        prepare_folder(out, markers=MODEL_MARKERS)
    tensors = dense_named_tensors(state_dict)
    _remove_earlier_model(out)
    with output_path(out / WEIGHTS_FILE, force=True) as tmp:  # temp file + rename: never half a weights file
        save_file(tensors, str(tmp), metadata={"format": FORMAT, "kind": kind})
        _sort_header(tmp)
    written: dict[str, str] = {}
    if files is not None:
        with files_into(out) as tmp_folder:
            files(tmp_folder)
            names = sorted(str(f.relative_to(tmp_folder)) for f in tmp_folder.rglob("*") if f.is_file())
        written = {name: file_sha256(out / name) for name in names}
    meta = {
        "format": FORMAT,
        "kind": kind,
        "config": jsonable(dict(config)),
        "source": jsonable(dict(source or {})),
        "weights_sha256": file_sha256(out / WEIGHTS_FILE),
        **({"files_sha256": written} if written else {}),
        **jsonable(dict(extra or {})),
    }
    write_text(out / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n", force=True)
    return out


def _sort_header(path: Path) -> None:
    """Rewrite a safetensors header with its keys sorted, so equal weights give byte-equal files.

    safetensors writes ``__metadata__`` from a hash map, whose order varies between processes; the JSON header
    (8-byte little-endian length, then the JSON, space-padded) is re-serialised in the same length, sorted.
    """
    with open(path, "r+b") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
        if isinstance(header.get("__metadata__"), dict):
            header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
        if len(text) > size:  # never: the same keys and values, compact; keep the file as written
            return
        fh.seek(8)
        fh.write(text.ljust(size, b" "))


def _read_meta(folder: Path) -> dict[str, Any]:
    """A converted folder's ``vistkit_model.json`` (one clear error when it is not a JSON object)."""
    from vistkit.data.readers import load_json

    meta = load_json(folder / META_FILE)
    if not isinstance(meta, dict):
        raise InputError(f"{folder / META_FILE}: expected a JSON object, found {type(meta).__name__}")
    return meta


_VERIFIED: dict[tuple[str, int, int], str] = {}  # (weights file, size, mtime) -> its SHA-256, per process


def weights_sha256(folder: str | Path, meta: Mapping[str, Any] | None = None) -> str:
    """The SHA-256 of a converted folder's ``model.safetensors``, checked against the ``weights_sha256`` that
    `save_converted` recorded: a file changed after conversion is refused in one sentence naming it (so a
    fingerprint, which names the source checkpoint, can never stand for other weights)."""
    p = Path(folder)
    weights = p / WEIGHTS_FILE
    meta = _read_meta(p) if meta is None else meta
    try:
        st = weights.stat()
    except OSError as exc:
        raise InputError(f"{weights}: cannot be read ({exc.strerror or exc})") from None
    key = (str(weights.resolve()), st.st_size, st.st_mtime_ns)
    actual = _VERIFIED.get(key)
    if actual is None:
        try:
            actual = file_sha256(weights)
        except OSError as exc:
            raise InputError(f"{weights}: cannot be read ({exc.strerror or exc})") from None
    expected = meta.get("weights_sha256")
    if expected is not None and str(expected).lower() != actual:
        raise InputError(
            f"{weights} is not the file this folder was converted with (its SHA-256 {actual[:12]}... differs "
            f"from weights_sha256 {str(expected)[:12]}... in {META_FILE}); convert the checkpoint again"
        )
    _VERIFIED[key] = actual
    return actual


def check_safetensors(path: str | Path) -> int:
    """Refuse a ``.safetensors`` file whose header is not what the format says (8-byte length, a JSON object of
    tensors whose byte ranges lie inside the file), naming the file, before any tensor is read. Returns how many
    values its tensors hold (from the header's shapes)."""
    p = Path(path)
    from vistkit.limits import SAFETENSORS_HEADER_MAX

    def bad(why: str) -> InputError:
        return InputError(f"{p}: not a valid safetensors file ({why}); convert or download it again")

    if pointer := lfs_pointer_problem(p):
        raise InputError(pointer)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise bad("shorter than its 8-byte header length")
            n = int.from_bytes(head, "little")
            if n > SAFETENSORS_HEADER_MAX or n > size - 8:
                raise bad(f"the header claims {n:,} bytes, more than the file holds")
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    from vistkit.data.readers import unique_pairs

    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_pairs)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad(f"the header is not JSON: {_first_line(exc)}") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    data = size - 8 - n
    values = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data
        ):
            raise bad(f"tensor {name[:60]!r} lies outside the file")
        shape = entry.get("shape")
        if isinstance(shape, list) and all(isinstance(x, int) and x >= 0 for x in shape):
            values += math.prod(shape)
    return values


#: config keys of a layer count, a width and a feed-forward width, in the spellings of transformers' configs
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
_FFN_KEYS = ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim", "encoder_ffn_dim")


#: model types whose config may leave ``position_embedding_type`` out and then has learned (absolute) positions
_DEFAULT_POSITIONS = dict.fromkeys(
    ("albert", "bert", "roberta", "xlm-roberta", "distilbert", "electra", "mpnet", "vit", "clip_text_model"),
    "absolute",
)


def declared_values_floor(config: Any) -> int:
    """A lower bound on how many weights a Hugging Face ``config`` (its parsed config.json) declares, summed over
    the config and its sub-configs (CLIP's text and vision towers): per layer (L layers; a parameter-sharing ALBERT
    counts its ``num_hidden_groups``) of width H, 2 H^2 (every transformer layer has at least its query and output
    projections) and 2 H F for a feed-forward width F (at least an up and a down projection); the embeddings,
    ``vocab_size`` x E (E: ``embedding_size``, else H); learned positions where the config says it has them
    (``n_positions``, or ``position_embedding_type`` absolute) x H. Rotary or ALiBi positions hold no weights."""
    if isinstance(config, list):
        return sum(declared_values_floor(v) for v in config)
    if not isinstance(config, dict):
        return 0
    total = sum(declared_values_floor(v) for v in config.values() if isinstance(v, (dict, list)))

    def number(*keys: str) -> int:
        for k in keys:
            v = config.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return 0

    width = number(*_WIDTH_KEYS)
    layers = number("num_hidden_groups") or number(*_LAYER_KEYS)
    embedding = number("embedding_size") or width
    # learned positions: said so, or left out by a model type whose default is absolute (BERT's family, ViT, CLIP)
    kind = config.get("position_embedding_type", _DEFAULT_POSITIONS.get(str(config.get("model_type"))))
    absolute = kind == "absolute"
    positions = number("n_positions") or (
        number("max_position_embeddings") if absolute else 0
    )
    layer = 2 * width * width + 2 * width * number(*_FFN_KEYS)
    return total + layers * layer + number("vocab_size") * embedding + positions * width


def check_declared_size(folder: Path, stored_values: int) -> None:
    """Refuse a folder whose config.json declares a model far larger than its weight files hold (a config bomb:
    a million layers over a few kilobytes of weights made transformers allocate until the memory ran out), before
    transformers builds anything. Generous on purpose (`DECLARED_RATIO`, `DECLARED_FLOOR_VALUES`): a smaller gap
    is caught after loading, by the missing weights (`refuse_missing_weights`)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return  # transformers says what is wrong with it
    from vistkit.limits import DECLARED_FLOOR_VALUES, DECLARED_RATIO

    declared = declared_values_floor(config)
    if declared > DECLARED_FLOOR_VALUES and declared > DECLARED_RATIO * stored_values:
        raise InputError(
            f"{folder}: its config.json declares a model of at least {declared:,} weights, but its weight files "
            f"hold {stored_values:,}; is config.json the one saved with these weights?"
        )


def load_converted(folder: str | Path, *, kind: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(state_dict, meta)`` of a converted folder (no pickle involved); checks ``kind`` when given."""
    p = Path(folder)
    if not is_converted(p):
        raise InputError(f"{p} is not a converted model folder (needs {WEIGHTS_FILE} and {META_FILE})")
    meta = _read_meta(p)
    if meta.get("format") != FORMAT:
        raise InputError(f"{p / META_FILE} has format {meta.get('format')!r}; expected {FORMAT!r}")
    if kind is not None and meta.get("kind") != kind:
        raise InputError(f"{p} holds a {meta.get('kind')!r} model, not a {kind!r} model")
    weights_sha256(p, meta)
    check_listed_files(p, meta)
    check_safetensors(p / WEIGHTS_FILE)
    _torch()
    from safetensors.torch import load_file

    try:
        state = load_file(str(p / WEIGHTS_FILE), device="cpu")
    except Exception as exc:  # safetensors' own SafetensorError (and OSError) on a file it cannot read
        raise InputError(
            f"{p / WEIGHTS_FILE}: not a valid safetensors file ({_first_line(exc)}); convert the checkpoint again"
        ) from None
    refuse_non_finite(state.items(), p)
    return state, meta


def model_fingerprint(path: str | Path) -> str:
    """A short content hash naming a checkpoint in signatures (12 hex digits).

    A converted folder reports the hash of the file it was converted from, so the original checkpoint and its
    conversion give the same signature, after checking that its ``model.safetensors`` is still the file the
    conversion wrote (`weights_sha256`); a legacy file or a folder without provenance hashes its weights.
    """
    p = Path(path)
    if is_converted(p):
        meta = _read_meta(p)
        weights = weights_sha256(p, meta)  # refuses weights changed after conversion
        digest = (meta["source"].get("sha256") if isinstance(meta.get("source"), dict) else None) or weights
        return str(digest)[:12]
    if p.is_file():
        return file_sha256(p)[:12]
    for name in (WEIGHTS_FILE, "head.safetensors", "pytorch_model.bin"):
        if (p / name).is_file():
            return file_sha256(p / name)[:12]
    # weights in shards (model-00001-of-00002.safetensors, as transformers saves a large model): every shard's
    # hash, in name order (signed "unknown" before, so two sharded models were signed alike)
    shards = sorted(f for pattern in ("*.safetensors", "pytorch_model-*.bin") for f in p.glob(pattern) if f.is_file())
    if shards:
        h = hashlib.sha256()
        for shard in shards:
            h.update(f"{shard.name}\0{file_sha256(shard)}\n".encode())
        return h.hexdigest()[:12]
    return "unknown"


@contextlib.contextmanager
def transformers_load_errors(folder: str | Path, what: str) -> Iterator[None]:
    """transformers' own errors for a folder it cannot load as ``what`` (weights of other shapes than config.json
    declares, a config of an unknown model type, an unreadable file) as one `InputError` naming the folder: they
    are the user's file, not a bug in vistkit."""
    try:
        yield
    except (InputError, ImportError, MemoryError):
        raise
    except Exception as exc:  # any of transformers' own: config validation (huggingface_hub's strict dataclasses),
        # a zero head count (ZeroDivisionError), shapes (RuntimeError), files (OSError), ...
        refuse_lfs_pointers(folder)  # a tokenizer.json (or weights) cloned without git-lfs: say that instead
        first = _first_line(exc)
        if "cannot allocate memory" in first.lower() or "out of memory" in first.lower():
            raise InputError(
                f"not enough memory to load {folder} ({first}); free some memory or raise the process's limit "
                "(ulimit -v, a container's memory)"
            ) from None
        if isinstance(exc, ArithmeticError):
            first = f"a number in its config.json is zero or out of range: {first}"
        shapes = "mismatched" in first or "size mismatch" in first
        if shapes:
            first = "its weights have other shapes than its config.json declares"
        # a folder of something else; not said when the shapes were the trouble (a converted folder keeps its
        # config elsewhere, in vistkit_model.json)
        if not shapes and Path(folder).is_dir() and not (Path(folder) / "config.json").is_file():
            first = f"it has no config.json, which every Hugging Face model folder holds; {first}"
        raise InputError(f"{folder}: transformers cannot load it as a {what} ({first})") from None


def load_pretrained(
    model_class: Any, name_or_path: str | Path, *, trust: bool = False, what: str = "model", **kwargs: Any
) -> Any:
    """``model_class.from_pretrained`` on a resolved local folder, safetensors only unless ``trust``; a folder
    transformers cannot load as ``what`` is one `InputError` (`transformers_load_errors`).

    For Hugging Face format models (CLIP, ViT, ...): resolution goes through `resolve_model` (local path,
    packaged default, local HF cache); ``pytorch_model.bin`` (a pickle) is refused without ``trust=True``.
    """
    from vistkit.models.resolve import resolve_model

    folder = resolve_model(name_or_path)
    has_st = any(folder.glob("*.safetensors")) if folder.is_dir() else False
    if folder.is_dir() and not has_st and not any(folder.glob("pytorch_model*.bin")):
        raise InputError(f"{folder} holds no model weights (model.safetensors); give a Hugging Face model folder")
    if folder.is_dir() and not has_st and not trust:
        raise InputError(
            f"{folder} holds only pickle-based weights (pytorch_model.bin); pass trust_checkpoint=True if "
            "you trust its source, or convert it to safetensors"
        )
    with transformers_load_errors(folder, what):
        loaded = model_class.from_pretrained(str(folder), trust_remote_code=False, use_safetensors=has_st, **kwargs)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    if hasattr(model, "named_parameters"):
        refuse_non_finite(model.named_parameters(), folder)
    return loaded


def refuse_missing_weights(
    info: Mapping[str, Any], folder: str | Path, *, what: str = "model", unused: tuple[str, ...] = ()
) -> None:
    """Refuse a Hugging Face model whose folder lacks weights the model has (``info``: ``from_pretrained``'s
    ``output_loading_info``). transformers starts a missing weight at random and says so only in its log, which
    vistkit keeps quiet, so a config that does not fit its weights (12 layers declared over 6 saved) or weights of
    another architecture would score silently wrong. ``unused``: key prefixes the caller never reads (a BERT
    ``pooler.`` for token embeddings); position-id buffers are not weights."""
    missing = sorted(
        k for k in info.get("missing_keys") or () if not k.startswith(unused) and not k.endswith("position_ids")
    )
    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise InputError(
            f"{folder} is not a whole {what}: its weights lack {len(missing)} of the model's parameters ({shown}), "
            "which transformers would start at random; is its config.json the one saved with these weights?"
        )


def refuse_foreign_tokenizer(tokenizer: Any, vocab_size: int, where: str | Path, *, what: str = "model") -> None:
    """Refuse a tokenizer that gives ids the model has no embedding for (a tokenizer of another model): scoring
    would stop at the first such token with "IndexError: index out of range"."""
    try:
        ids = list(tokenizer.get_vocab().values())
    except Exception:  # a tokenizer without a vocabulary listing: nothing to check
        return
    top = max(ids, default=-1)
    if top >= vocab_size:
        raise InputError(
            f"{where}: its tokenizer gives token ids up to {top:,}, but the {what} has only {vocab_size:,} token "
            "embeddings; the tokenizer belongs to another model (give the one saved with these weights)"
        )


def json_hash(data: Mapping[str, Any]) -> str:
    """8 hex digits naming a JSON-able mapping by content (keys sorted)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:8]


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """8 hex digits naming what a tokenizer does: a fast tokenizer's whole definition (vocabulary, normaliser,
    pre-tokeniser), else its vocabulary and lower-casing; a folder given by path or a ready object alike."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        return json_hash({"fast": backend.to_str()})
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    return json_hash({"vocab": sorted(vocab.items()), "lower": bool(getattr(tokenizer, "do_lower_case", False))})
