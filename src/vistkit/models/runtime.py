"""Running models: device choice, length-sorted batching, an optional content-hash cache, and bounded in-memory
caches of embeddings."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.errors import InputError
from vistkit.limits import cache_bytes


def choose_device(device: str | None = None) -> Any:
    """A ``torch.device``: the one asked for, else CUDA when present, else Apple MPS, else CPU.

    ``device`` may be ``None``/``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` (any letter case, spaces
    around it ignored).
    """
    import torch

    one_thread_after_fork()

    # read as the option check reads it (`vistkit.metrics._options.check_device`): "AUTO" and " cpu " are names
    name = device.strip().lower() if isinstance(device, str) else device
    if name not in (None, "", "auto"):
        try:
            dev = torch.device(str(name))
        except (RuntimeError, ValueError):
            dev = None
        if dev is None or dev.type not in ("cpu", "cuda", "mps"):
            raise InputError(f"device {device!r} is not one vistkit runs on; use auto, cpu, cuda, cuda:N or mps")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"device {device!r} was asked for but CUDA is not available here; use device='cpu'")
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(
                f"device {device!r} was asked for but this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise InputError(f"device {device!r} was asked for but Apple MPS is not available here; use device='cpu'")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


_FORK_HOOKED: list[bool] = [False]


def _torch_one_thread() -> None:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            torch.set_num_threads(1)


def one_thread_after_fork() -> None:
    """Make a process forked from this one run torch on one CPU thread (once per process; every model's device
    choice calls it). After the parent had used torch's OpenMP threads, a forked child (a ``multiprocessing``
    pool's worker, the default start method on Linux) hung for good on its first torch operation: GNU OpenMP's
    thread team does not survive ``fork``, and one thread per worker is what a pool wants anyway (as PyTorch's
    own DataLoader workers)."""
    if not _FORK_HOOKED[0] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_torch_one_thread)
        _FORK_HOOKED[0] = True


def batches_by_length(
    lengths: Sequence[int],
    *,
    batch_size: int = 32,
    max_tokens: int | None = None,
    max_padding: float | None = None,
) -> Iterator[list[int]]:
    """Index batches of similar length (longest first), so padding stays small.

    A batch holds at most ``batch_size`` items; when ``max_tokens`` is given, at most ``max_tokens`` padded
    tokens (``len(batch) * longest``; an item longer than that gets a batch of its own); when ``max_padding``
    is given, no item shorter than ``(1 - max_padding) * longest`` (so a few stories never make one batch
    padded from 20 to 70 tokens).
    """
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, not {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batch: list[int] = []
    longest = 0
    for i in order:
        n = lengths[i]
        new_longest = max(longest, n)
        too_many = len(batch) >= batch_size
        too_big = max_tokens is not None and batch and new_longest * (len(batch) + 1) > max_tokens
        too_short = max_padding is not None and batch and n < (1.0 - max_padding) * longest
        if batch and (too_many or too_big or too_short):
            yield batch
            batch, new_longest = [], n
        batch.append(i)
        longest = new_longest
    if batch:
        yield batch


#: the cache folder chosen for each (VISTKIT_CACHE, XDG_CACHE_HOME, HOME, TMPDIR): decided (and warned about) once
_CACHE_DIRS: dict[tuple[str | None, ...], Path] = {}
_CACHE_LOCK = threading.Lock()


def default_cache_dir() -> Path:
    """The per-user cache folder, created: ``$VISTKIT_CACHE``, else ``$XDG_CACHE_HOME/vistkit``, else
    ``~/.cache/vistkit``.

    A ``VISTKIT_CACHE`` that cannot be used (a file, a read-only or missing parent, no permission) is an error in
    one sentence; an existing folder is taken as it is (also read-only: a cache prepared once and shared). When
    the derived folder cannot be used (``HOME`` unset, not writable or nonexistent, as for system users and
    containers; ``XDG_CACHE_HOME`` a file), the cache goes to a private folder of the temporary
    folder instead (``vistkit-cache-UID``, mode 0700, owned by this user; else a fresh one) with one warning:
    the numbers are the same, only the one-off conversions are redone when that folder is cleaned.
    """
    env = tuple(os.environ.get(k) for k in ("VISTKIT_CACHE", "XDG_CACHE_HOME", "HOME", "TMPDIR"))
    with _CACHE_LOCK:
        if env in _CACHE_DIRS:
            return _CACHE_DIRS[env]
        folder = _choose_cache_dir()
        _CACHE_DIRS[env] = folder
        return folder


def _choose_cache_dir() -> Path:
    from vistkit.errors import warn

    explicit = os.environ.get("VISTKIT_CACHE", "").strip()
    if explicit:
        from vistkit.models.resolve import user_path

        # relative: where the command was started; ~user of no user here: one sentence naming the variable
        folder = Path(os.path.abspath(user_path(explicit, what="VISTKIT_CACHE=")))
        if folder.is_dir():  # the user's choice, also when read-only (a cache prepared once and shared): kept
            return folder
        why = folder_problem(folder)
        if why:
            raise InputError(
                f"VISTKIT_CACHE={explicit} cannot hold vistkit's cache ({why}); point it at a writable folder, or "
                "unset it to use ~/.cache/vistkit"
            )
        return folder
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):  # no HOME and no passwd entry (a container's arbitrary uid)
        home = None
    if xdg:
        folder = Path(xdg) / "vistkit"
        try:
            folder = Path(xdg).expanduser() / "vistkit"
        except RuntimeError:  # ~user of no user here: a folder that cannot be used, as a missing HOME
            why = f"XDG_CACHE_HOME={xdg} names the home folder of a user this machine does not know"
        else:
            why = folder_problem(folder)
    elif home is None:
        folder, why = Path("~/.cache/vistkit"), "HOME is not set and this user has no home folder"
    elif not home.is_dir():  # a home folder that does not exist is not created (as root it could be)
        folder, why = home / ".cache" / "vistkit", f"the home folder {home} does not exist or is not a folder"
    else:
        folder = home / ".cache" / "vistkit"
        why = folder_problem(folder)
    if not why:
        return folder
    fallback = _private_temp_cache()
    if fallback is None:
        raise InputError(
            f"vistkit's cache folder {folder} cannot be used ({why}) and no private folder could be made in the "
            "temporary folder; set VISTKIT_CACHE to a writable folder"
        )
    warn(
        f"vistkit's cache folder {folder} cannot be used ({why}); caching in {fallback} for now (set "
        "VISTKIT_CACHE to a writable folder to keep the cache)"
    )
    return fallback


#: why a path that is a symbolic link to nothing cannot be used as a folder
BROKEN_LINK = "it is a symbolic link that leads nowhere (its target is missing, or it leads back to itself)"


def folder_problem(folder: Path) -> str:
    """Why ``folder`` cannot hold a cache (it is created when missing), or ``""``."""
    if os.path.islink(folder) and not os.path.exists(folder):  # mkdir says "File exists": never call it a file
        return BROKEN_LINK
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        where = Path(exc.filename) if exc.filename else folder
        if os.path.islink(where) and not os.path.exists(where):  # a broken link among its parents
            return f"{where} in its path is a symbolic link that leads nowhere"
        return "it is a file, not a folder" if where == folder else f"{where} in its path is a file, not a folder"
    except OSError as exc:
        return _os_reason(exc)
    if not folder.is_dir():
        return "it is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "it is not writable"
    return ""


def _os_reason(exc: OSError) -> str:
    import errno

    reasons = {
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "a read-only file system",
        errno.ENOTDIR: "a part of the path is a file, not a folder",
        errno.ENOENT: "a part of the path does not exist",
        errno.ENOSPC: "the disk is full",
        errno.ENAMETOOLONG: "the name is too long",
        errno.ELOOP: "a symbolic link in the path leads back to itself",
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def _private_temp_cache() -> Path | None:
    """``$TMPDIR/vistkit-cache-UID`` when it is this user's alone (a folder owned by this user that nobody else can
    write: the cache holds compiled Java classes that vistkit runs), else a fresh private folder; None when the
    temporary folder is unusable."""
    import stat
    import tempfile

    try:
        tmp = tempfile.gettempdir()
    except OSError:
        return None
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tmp) / f"vistkit-cache-{uid}"
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o700)  # made here: 0700 whatever the umask (777 would leave it unusable)
    try:
        st = os.lstat(folder)
        if (
            stat.S_ISDIR(st.st_mode)
            and (not hasattr(os, "getuid") or st.st_uid == uid)
            and not st.st_mode & 0o077
            and os.access(folder, os.W_OK | os.X_OK)
        ):
            return folder
    except OSError:
        pass
    try:
        fresh = Path(tempfile.mkdtemp(prefix="vistkit-cache-"))
        os.chmod(fresh, 0o700)
    except OSError:
        return None
    return fresh


#: the files of a model folder whose change means other weights, config or tokenizer (`folder_stamp`)
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model")


def folder_stamp(path: str | os.PathLike[str]) -> tuple[tuple[str, int, int, int], ...]:
    """What tells a model folder's saved files apart without reading them: ``(name, size, mtime_ns, inode)`` of
    each model file in it (`MODEL_FILE_SUFFIXES`; a link counts as its target). A process keeps loaded models by
    folder; with this in the key, a folder saved over (a notebook that trains and saves into the same folder,
    then scores again) is loaded again instead of scoring with, and signing, the weights it held before. Not a
    folder (a hub id, a missing path): ``()``."""
    try:
        with os.scandir(os.path.expanduser(os.fspath(path))) as entries:
            found = []
            for e in entries:
                if e.name.endswith(MODEL_FILE_SUFFIXES):
                    with contextlib.suppress(OSError):
                        st = e.stat()  # follows a link (a hub snapshot links to its blobs)
                        found.append((e.name, st.st_size, st.st_mtime_ns, st.st_ino))
    except OSError:
        return ()
    return tuple(sorted(found))


def content_key(namespace: str, *parts: object) -> str:
    """SHA-256 of a namespace (model signature) and the inputs, as a cache key."""
    payload = json.dumps([namespace, *parts], ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ArrayCache:
    """Embeddings (numpy arrays) by key, least recently used out first beyond ``max_bytes`` in all.

    What a metric computes once per photo, region set or text and reuses across stories: unbounded, such a
    cache grew with the corpus (CLIP regions of 10^6 photos: ~70 GB). An array larger than the whole budget is
    returned by the caller but not kept.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = cache_bytes() if max_bytes is None else int(max_bytes)
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self.nbytes = 0
        self._lock = threading.Lock()  # metrics may encode in a prefetch thread

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> np.ndarray | None:
        """The array kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: np.ndarray) -> np.ndarray:
        """Keep ``value`` under ``key`` (dropping the least recently used beyond the budget); returns it."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            if value.nbytes <= self.max_bytes:
                self._items[key] = value
                self.nbytes += value.nbytes
                while self.nbytes > self.max_bytes:
                    _, dropped = self._items.popitem(last=False)
                    self.nbytes -= dropped.nbytes
        return value

    def clear(self) -> None:
        """Empty the cache."""
        with self._lock:
            self._items.clear()
            self.nbytes = 0


#: the names a score cache file may have: one of them that is not an SQLite file is a damaged cache (to delete)
_CACHE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


class ScoreCache:
    """A persistent ``key -> float`` cache keyed by content hash (SQLite; safe across processes).

    Use with `content_key`: the namespace must name everything that changes the value (the model fingerprint
    and the scoring variant), so a changed model never returns stale numbers. ``path=":memory:"`` keeps it in
    memory only.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            path = default_cache_dir() / "scores.sqlite"
        self.path = str(path)
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # a busy cache (another process writing) is waited for, not an error
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
            tables = [r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            if tables and "scores" not in tables:  # another program's database: nothing is written into it
                self._db.close()
                shown = ", ".join(repr(t[:40]) for t in sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
                raise InputError(
                    f"the score cache {self.path} is not a vistkit score cache (an SQLite database with the tables "
                    f"{shown}, and no scores table); give the path of a new cache file, or of one vistkit wrote"
                )
            self._db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value REAL)")
            self._db.commit()
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(scores)")}
        except (sqlite3.DatabaseError, OSError) as exc:  # a damaged file, a folder, a read-only place
            raise self._unusable(exc) from None
        if not {"key", "value"} <= columns:
            self._db.close()
            raise InputError(
                f"the score cache {self.path} is not a vistkit score cache (its scores table has the columns "
                f"{', '.join(sorted(columns))}); give another cache file"
            )
        self._write_failed = False
        self._read_failed = False  # once a read fails, the rest of the run computes every score

    def _unusable(self, exc: BaseException) -> InputError:
        """Why the cache file cannot be opened, in one sentence. Only a damaged cache (an SQLite file, or a file
        named ``.sqlite``/``.db``) is said to be safe to delete: a cache path naming another file
        (``cache=stories.json``, a model's weights) is the user's data, and is left alone."""
        with self._lock:
            with contextlib.suppress(Exception):
                self._db.close()
        path = Path(self.path)
        if path.is_dir():
            return InputError(f"the score cache {self.path} is a folder; give the cache file's path")
        try:
            with open(path, "rb") as fh:
                head = fh.read(16)
        except OSError:
            head = b""
        if head and head != b"SQLite format 3\x00" and path.suffix.lower() not in _CACHE_SUFFIXES:
            return InputError(
                f"the score cache {self.path} is not a score cache (not an SQLite file: another file of yours?), "
                "and is left as it is; give the path of a new cache file, or of one vistkit wrote"
            )
        return InputError(
            f"the score cache {self.path} cannot be used ({exc}); delete it (it holds only cached scores, computed "
            "again when missing) or give another cache file"
        )

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        """The cached values of those ``keys`` that are in the cache (a NULL or non-number there, written by
        another program, counts as not cached). A cache that cannot be read any more (damaged or locked by another
        process meanwhile) is one warning, and nothing is read from it from then on."""
        keys = list(keys)
        found: dict[str, float] = {}
        with self._lock:
            if self._read_failed:
                return found
            try:
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(f"SELECT key, value FROM scores WHERE key IN ({marks})", chunk)
                    found.update({k: float(v) for k, v in rows if isinstance(v, int | float) and math.isfinite(v)})
            except sqlite3.DatabaseError as exc:  # damaged or locked by another process since it was opened
                from vistkit.errors import warn

                warn(
                    f"the score cache {self.path} cannot be read any more ({exc}); the scores are computed without "
                    "it (delete the file if it stays damaged)"
                )
                self._read_failed = True
                return {}
        return found

    def put_many(self, items: dict[str, float]) -> None:
        """Store (or replace) the finite values of ``items`` (SQLite keeps NaN as NULL). A cache that cannot be
        written (a read-only file or folder, a full disk) is one warning: the scores are there, only not cached."""
        rows = [(k, float(v)) for k, v in items.items() if math.isfinite(float(v))]
        with self._lock:
            try:
                self._db.executemany("INSERT OR REPLACE INTO scores (key, value) VALUES (?, ?)", rows)
                self._db.commit()
            except sqlite3.DatabaseError as exc:
                with contextlib.suppress(sqlite3.DatabaseError):
                    self._db.rollback()
                if not self._write_failed:
                    from vistkit.errors import warn

                    warn(f"the score cache {self.path} cannot be written ({exc}); the scores are not cached")
                self._write_failed = True

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()


# ------------------------------------------------------------------------------------------------------
# batching and prefetching shared by every model metric (SOP ALBERT, BERTScore, MiniLM heads, CLIP, rankers)
def default_token_budget(device: Any, *, model_size: str = "large") -> int:
    """Padded tokens per batch for ``device``: large on CUDA (fills the GPU with few launches), small on CPU.

    ``model_size`` is ``"large"`` (ALBERT/BERT-large: 1024-d, 24 layers) or ``"small"`` (MiniLM, BERT-base,
    CLIP text towers): a small model gets 4x the budget, since its activations per token are 4x smaller.
    """
    kind = getattr(device, "type", str(device))
    scale = 4 if model_size == "small" else 1
    if kind == "cuda":
        return 32_768 * scale
    if kind == "mps":
        return 8_192 * scale
    return 1_024 * scale  # CPU: small batches stay in cache; 8 x 128 tokens was measured best (BENCHMARKS.md)


def prefetch(items: Iterable[Any], *, depth: int = 2) -> Iterator[Any]:
    """Yield ``items`` while a background thread produces up to ``depth`` of them ahead.

    Use it to overlap CPU preparation (sentence splitting, tokenisation, padding) with device compute: the
    consumer launches work on the GPU (asynchronous) while the producer prepares the next piece. An exception
    in the producer is re-raised in the consumer; leaving the loop early stops the producer. ``depth=0`` runs
    everything in the calling thread (no thread at all).
    """
    if depth <= 0:
        yield from items
        return
    import queue

    done = object()
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((None, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((None, done))
        except BaseException as exc:  # handed to the consumer
            q.put((exc, None))

    import contextvars

    # in the caller's context: a run's warning filter and the Python API's wording (context variables) hold there too
    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(produce,), name="vistkit-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            exc, item = q.get()
            if exc is not None:
                raise exc
            if item is done:
                return
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except Exception:
                pass
            worker.join(timeout=0.05)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for an allocation-heavy, cycle-free step (restored after).

    Building many small lists (token ids of thousands of pairs) triggers full collections that walk every
    object of a process holding torch and transformers; measured on 4,183 RoViST-C pairs: 1.12 s with the
    collector on, 0.36 s paused (bench/bench_coherence.py, tokenisation).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def pad_rows(rows: Sequence[Sequence[int]], *, pad_id: int = 0) -> tuple[Any, Any]:
    """``(ids, mask)`` int64 arrays of shape (len(rows), longest) from ragged id lists (right padding)."""
    width = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for k, r in enumerate(rows):
        ids[k, : len(r)] = r
        mask[k, : len(r)] = 1
    return ids, mask


class LengthBuckets:
    """Streaming length buckets: items arrive one by one, full batches leave as soon as they are full.

    Lengths fall into geometric bins (within a bin the shortest item is at least ``1 - max_padding`` of the
    longest); a bin whose padded size reaches ``token_budget`` tokens (or ``batch_size`` items) is returned
    by `add` at once, so a caller can launch it on the GPU while it prepares more input; `flush` returns
    what is left. Unlike `batches_by_length` it needs no pass over all lengths first.
    """

    def __init__(self, *, token_budget: int, batch_size: int = 1024, max_padding: float = 0.15) -> None:
        import math

        if not 0.0 < max_padding < 1.0:
            raise InputError(f"max_padding must be between 0 and 1, not {max_padding}")
        self.token_budget = token_budget
        self.batch_size = batch_size
        self._log_step = -math.log(1.0 - max_padding)
        self._bins: dict[int, list[tuple[int, int]]] = {}

    def _key(self, length: int) -> int:
        import math

        return int(math.log(max(length, 1)) / self._log_step)

    def add(self, index: int, length: int) -> list[int] | None:
        """Put one item in its bin; returns that bin's indices when it is full (and empties the bin)."""
        key = self._key(length)
        items = self._bins.setdefault(key, [])
        longest = max(length, items[0][1] if items else 0)
        if items and (len(items) + 1 > self.batch_size or (len(items) + 1) * longest > self.token_budget):
            full = [i for i, _ in items]
            self._bins[key] = [(index, length)]
            return full
        if items and length > items[0][1]:
            items.insert(0, (index, length))  # keep the longest first
        else:
            items.append((index, length))
        return None

    def flush(self) -> list[list[int]]:
        """The remaining (partial) bins, longest lengths first."""
        out = [[i for i, _ in self._bins[k]] for k in sorted(self._bins, reverse=True) if self._bins[k]]
        self._bins.clear()
        return out


class DeviceBatches:
    """Run a model over many inputs in length-bucketed, token-budgeted batches, outputs kept on the device.

    The generic loop every model metric uses (and the one to give new model metrics, e.g. a learned ranker)::

        runner = DeviceBatches(device, token_budget=default_token_budget(device))
        for batch_ids, tensors in prefetch(runner.plan(lengths, prepare)):   # CPU work in a thread
            runner.submit(batch_ids, model(*runner.to_device(tensors)))        # GPU work, asynchronous
        values = runner.gather(len(lengths))                                  # ONE device->host copy

    ``plan`` groups indices by length (`batches_by_length`: at most ``batch_size`` items and
    ``token_budget`` padded tokens, no item padded by more than ``max_padding``) and calls ``prepare(indices)``
    for each group (it returns CPU tensors or arrays); ``submit`` keeps each output (first dimension = the
    group's items) on the device, so nothing waits for the GPU until ``gather``, which scatters the rows back
    into input order (a NumPy array; rows that no batch covered are NaN). On CUDA, ``plan`` pins the prepared
    tensors (in the producer thread) so that ``to_device`` copies without blocking.
    """

    def __init__(
        self,
        device: Any,
        *,
        token_budget: int | None = None,
        batch_size: int = 1024,
        max_padding: float | None = 0.15,
        pin_memory: bool | None = None,
    ) -> None:
        self.device = device
        self.token_budget = token_budget or default_token_budget(device)
        self.batch_size = batch_size
        self.max_padding = max_padding
        kind = getattr(device, "type", str(device))
        self.pin = (kind == "cuda") if pin_memory is None else pin_memory
        self._parts: list[tuple[list[int], Any]] = []

    def plan(self, lengths: Sequence[int], prepare: Any) -> Iterator[tuple[list[int], Any]]:
        """``(indices, prepare(indices))`` per length bucket (longest first)."""
        for batch in batches_by_length(
            lengths, batch_size=self.batch_size, max_tokens=self.token_budget, max_padding=self.max_padding
        ):
            prepared = prepare(batch)
            yield batch, self.host(prepared)

    def host(self, tensors: Any) -> Any:
        """``tensors`` (a tensor/array or a tuple/list of them) as CPU tensors, pinned when this runner pins
        (CUDA), so that `to_device` copies them without blocking."""
        import torch

        if not self.pin:
            return tensors

        def pin(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                x = torch.from_numpy(x)
            return x.pin_memory() if isinstance(x, torch.Tensor) and x.device.type == "cpu" else x

        if isinstance(tensors, (tuple, list)):
            return type(tensors)(pin(t) for t in tensors)
        return pin(tensors)

    def to_device(self, tensors: Any) -> Any:
        """Move a tensor/array (or a tuple/list of them) to the device (pinned, non-blocking on CUDA)."""
        import torch

        def move(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                x = torch.from_numpy(x)
            if not isinstance(x, torch.Tensor):
                return x
            return x.to(self.device, non_blocking=x.is_pinned())

        if isinstance(tensors, (tuple, list)):
            return type(tensors)(move(t) for t in tensors)
        return move(tensors)

    def submit(self, indices: list[int], output: Any) -> None:
        """Keep ``output`` (a device tensor, one row per index) until `gather`."""
        self._parts.append((list(indices), output))

    def gather(self, n: int) -> np.ndarray:
        """All submitted rows as one float64 NumPy array in input order (one device->host transfer)."""
        import torch

        parts, self._parts = self._parts, []
        if not parts:
            return np.full(n, np.nan)
        order = [i for idx, _ in parts for i in idx]
        flat = torch.cat([out.reshape(len(idx), -1).float() for idx, out in parts]).cpu().numpy()
        result = np.full((n, flat.shape[1]), np.nan, dtype=np.float64)
        result[order] = flat
        return result[:, 0] if flat.shape[1] == 1 else result


#: `quiet_transformers` is process-wide state (transformers' log level and progress bars): the loads under way
#: (threads loading models at once) and what to give back when the last one ends
_QUIET_LOCK = threading.Lock()
_QUIET: dict[str, Any] = {"depth": 0, "level": None, "bars": False}


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars and no info or warning logs from transformers while a model loads (GGUF conversion prints a
    bar per tensor; a load prints a report of missing weights, which vistkit checks itself:
    `vistkit.models.checkpoints.refuse_missing_weights`). Safe across threads: the first load to start saves the
    user's settings and the last to end gives them back (two threads loading at once left the log level at ERROR
    for the rest of the session, and one thread's end turned the bars back on during the other's load)."""
    from transformers.utils import logging as hf_logging

    with _QUIET_LOCK:
        if _QUIET["depth"] == 0:
            _QUIET["level"] = hf_logging.get_verbosity()
            _QUIET["bars"] = hf_logging.is_progress_bar_enabled()
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        _QUIET["depth"] += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET["depth"] -= 1
            if _QUIET["depth"] == 0:
                hf_logging.set_verbosity(_QUIET["level"])
                if _QUIET["bars"]:
                    hf_logging.enable_progress_bar()
