"""Shared by the Ray probe tests: a private Ray cluster in a child process, as `ray start` in another shell."""

from __future__ import annotations

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
