"""The dummy metrics of tests/fixtures/meta (loaded once, shared by the `vistkit meta` test files)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

FIX = Path(__file__).parent / "fixtures" / "meta"


def load_dummy_metrics() -> ModuleType:
    """tests/fixtures/meta/dummy_metrics.py as a module (imported on the first call, then reused)."""
    name = "vistkit_meta_test_dummies"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FIX / "dummy_metrics.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@contextmanager
def dummy_metrics_registered() -> Iterator[list[str]]:
    """The dummy metrics usable by name inside the block; the ones this block registered are removed after it."""
    dummies = load_dummy_metrics()
    added = dummies.ensure_registered()
    try:
        yield added
    finally:
        dummies.unregister(added)


def run_vistkit(capsys: Any, *args: object) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process (``capsys``: pytest's fixture): (exit code, stdout, stderr)."""
    from vistkit.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err
