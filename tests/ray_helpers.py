"""Shared by the Ray probe tests: a private Ray cluster in a child process, as `ray start` in another shell."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

#: run with ``python -c``: starts a one-CPU local cluster, prints its GCS address, and shuts it down when its stdin
#: closes (or on SIGTERM); its environment decides its settings (a token, no VISTKIT_* variable, ...)
CLUSTER_SCRIPT = """
import signal, sys
import ray
ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024**2, logging_level="ERROR")
print(ray.get_runtime_context().gcs_address, flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
try:
    sys.stdin.read()  # until the test closes it (or dies)
finally:
    ray.shutdown()
"""


@contextlib.contextmanager
def private_cluster(env: dict[str, str], *, what: str = "a Ray cluster") -> Iterator[str]:
    """`CLUSTER_SCRIPT` run in a child process with ``env``; yields the cluster's GCS address (the test is skipped
    when no cluster starts) and shuts it down afterwards by closing the child's stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CLUSTER_SCRIPT], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        if not address:
            pytest.skip(f"could not start {what} here")
        yield address
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@contextlib.contextmanager
def private_engine(*, num_cpus: int, store_mb: int) -> Iterator[object]:
    """A 2-worker `vistkit.engine.ray.RayEngine` on a private local cluster (``num_cpus`` logical CPUs, ``store_mb``
    MB of object store; ``RAY_ADDRESS`` set aside meanwhile), closed afterwards; skipped without Ray."""
    import os

    ray = pytest.importorskip("ray")
    from vistkit.engine.ray import RayEngine

    if ray.is_initialized():
        ray.shutdown()
    saved = os.environ.pop("RAY_ADDRESS", None)
    eng = RayEngine(workers=2, init_options={"num_cpus": num_cpus, "object_store_memory": store_mb * 1024**2})
    try:
        yield eng
    finally:
        eng.close()
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved
    assert not ray.is_initialized()
