"""Running models: device choice, length-sorted batching, and an optional content-hash cache."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from vistkit.errors import InputError


def choose_device(device: str | None = None) -> Any:
    """A ``torch.device``: the one asked for, else CUDA when present, else Apple MPS, else CPU.

    ``device`` may be ``None``/``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
    """
    import torch

    if device not in (None, "", "auto"):
        dev = torch.device(str(device))
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise InputError(
                f"device {device!r} was asked for but CUDA is not available here; use device='cpu'"
            )
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


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


def default_cache_dir() -> Path:
    """``$VISTKIT_CACHE``, else ``$XDG_CACHE_HOME/vistkit``, else ``~/.cache/vistkit``."""
    if os.environ.get("VISTKIT_CACHE"):
        return Path(os.environ["VISTKIT_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "vistkit"


def content_key(namespace: str, *parts: object) -> str:
    """SHA-256 of a namespace (model signature) and the inputs, as a cache key."""
    payload = json.dumps([namespace, *parts], ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value REAL)")
        self._db.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        keys = list(keys)
        found: dict[str, float] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, value FROM scores WHERE key IN ({marks})", chunk)
                found.update({k: float(v) for k, v in rows})
        return found

    def put_many(self, items: dict[str, float]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO scores (key, value) VALUES (?, ?)",
                [(k, float(v)) for k, v in items.items()],
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0])

    def close(self) -> None:
        self._db.close()
