"""How fast this CPU multiplies ALBERT-large-sized matrices, by number of rows (tokens in a batch).

    .venv/bin/python bench/bench_gemm_roofline.py [--threads 2] [--inner 576 --cols 1536]

ALBERT-large's work is matrix products with 1024 -> 4096 (and back) weights; a batch-1 pair of ``rovist-c``
(~25 tokens) or ``dhm-c`` (~44 tokens) multiplies that few rows at a time, a length-sorted batch hundreds.
The ratio between the two rates bounds what batching can gain on this machine in float32 (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import sys
import time


def gemm_rate(
    rows: int, inner: int = 1024, cols: int = 4096, *, dtype: str = "fp32", onednn: bool = False
) -> tuple[float, float]:
    """(GFLOP/s by wall time, GFLOP per CPU-second) of ``(rows x inner) @ (inner x cols)`` products after a
    warm-up, in float32 or bfloat16: PyTorch's own product (MKL's sgemm on x86), or with ``onednn`` (float32)
    oneDNN's with the weight laid out once, as vistkit's LM runs its linear layers on the CPU
    (`vistkit.models.cpu_matmul`). `bench_lm.py` reports its roofline with this function."""
    import torch

    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    if dtype == "bf16":
        a, b = a.bfloat16(), b.bfloat16()
    product = lambda: a @ b  # noqa: E731
    if onednn:
        from vistkit.models.cpu_matmul import pack_weight, packed_linear

        packed = pack_weight(b.T.contiguous())
        product = lambda: packed_linear(a, packed)  # noqa: E731
    for _ in range(3):
        product()
    reps = max(5, int(2e10 / (2 * rows * inner * cols)))
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(reps):
        product()
    work = 2 * rows * inner * cols * reps / 1e9
    return work / (time.perf_counter() - start), work / (time.process_time() - cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", default="16,25,35,44,70,140,280,560")
    ap.add_argument("--inner", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=4096)
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from vistkit.models.cpu_matmul import onednn_works

    shape = {"inner": args.inner, "cols": args.cols}
    rates = {int(r): gemm_rate(int(r), **shape)[0] for r in args.rows.split(",")}
    best = max(rates.values())
    dnn = {r: gemm_rate(r, onednn=True, **shape)[0] for r in rates} if onednn_works() else {}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.inner} x {args.cols} weight")
    for rows, rate in rates.items():
        extra = f";  oneDNN, weight laid out once: {dnn[rows]:7.1f} ({dnn[rows] / rate:.2f}x)" if dnn else ""
        print(f"rows {rows:4d}: {rate:7.1f} GFLOP/s  (best / this = {best / rate:.2f}x){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
