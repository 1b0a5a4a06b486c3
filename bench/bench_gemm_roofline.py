"""How fast this CPU multiplies ALBERT-large-sized matrices, by number of rows (tokens in a batch).

    .venv/bin/python bench/bench_gemm_roofline.py [--threads 2]

ALBERT-large's work is matrix products with 1024 -> 4096 (and back) weights; a batch-1 pair of ``rovist-c``
(~25 tokens) or ``dhm-c`` (~44 tokens) multiplies that few rows at a time, a length-sorted batch hundreds.
The ratio between the two rates bounds what batching can gain on this machine in float32 (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import sys
import time


def gflops(rows: int, *, inner: int = 1024, cols: int = 4096) -> float:
    """Mean GFLOP/s of ``(rows x inner) @ (inner x cols)`` float32 products (after a warm-up)."""
    import torch

    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    for _ in range(3):
        a @ b
    reps = max(5, int(2e10 / (2 * rows * inner * cols)))
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    seconds = (time.perf_counter() - start) / reps
    return 2 * rows * inner * cols / seconds / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", default="16,25,35,44,70,140,280,560")
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    rates = {int(r): gflops(int(r)) for r in args.rows.split(",")}
    best = max(rates.values())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for rows, rate in rates.items():
        print(f"rows {rows:4d}: {rate:7.1f} GFLOP/s  (best / this = {best / rate:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
