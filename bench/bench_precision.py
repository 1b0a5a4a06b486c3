"""Accuracy (any machine) and speed (CUDA) of the ``tf32x3`` mode of ``rovist-c`` / ``dhm-c`` against exact fp32.

    .venv/bin/python bench/bench_precision.py --stories 30                 # CPU: emulated tensor-core rounding
    python bench/bench_precision.py --stories 1000 --device cuda --repeat 3  # GPU: real TF32, times and ratios

``--metrics bertscore,coherence`` measures the packaged MiniLM of those two metrics instead (tf32x3 emulated and
bf16 on the CPU; bertscore scores each story against the next one).

Same random ALBERT-large SOP model and stories as ``bench_coherence.py``. For each metric it prints the largest
|story score - exact fp32 story score| of:

- ``tf32x3``: every linear layer as three TF32 products of split operands (`vistkit.models.precision`); on a CPU
  the tensor cores' input rounding is emulated (`tf32_round` on every product's inputs), so the number is the
  one a GPU would give up to its summation order;
- ``tf32 (emulated linear inputs)``: one TF32 product per linear layer (inputs rounded), for contrast;
- on CUDA also the real ``tf32`` mode and the times of fp32, tf32x3 and tf32 (median of ``--repeat``), with
  the ratio to fp32.
"""

from __future__ import annotations

import argparse
import copy
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_coherence import build_model, load_texts


def _one_tf32_product(module):  # type: ignore[no-untyped-def]
    """Every linear layer as one product of TF32-rounded inputs (the tf32 mode's linear layers, emulated)."""
    import torch
    import torch.nn.functional as F

    from vistkit.models.precision import tf32_round

    class Tf32Linear(torch.nn.Module):
        def __init__(self, lin: torch.nn.Linear) -> None:
            super().__init__()
            self.lin = lin

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.linear(tf32_round(x), tf32_round(self.lin.weight), self.lin.bias)

    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear):
            setattr(module, name, Tf32Linear(child))
        else:
            _one_tf32_product(child)
    return module


def _timed(metric, stories, repeat: int, device) -> tuple[np.ndarray, float]:  # type: ignore[no-untyped-def]
    import torch

    times, scores = [], None
    metric.score(stories[: min(20, len(stories))])  # warm-up (kernel selection)
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        scores = metric.score(stories).item_scores
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return np.asarray(scores, dtype=float), float(np.median(times))


def _encoder_metrics(names: list[str], texts: list[str], repeat: int) -> None:
    """bertscore (each story against the next one) and the offline coherence metric: the packaged MiniLM in
    tf32x3 (tensor-core rounding emulated) and bf16 (real, on this CPU) against exact fp32."""
    from vistkit.data.story import Story, StorySet
    from vistkit.metrics.base import get_metric
    from vistkit.models.precision import use_split_tf32

    hyps = StorySet([Story(str(i), t) for i, t in enumerate(texts)])
    refs = StorySet([Story(str(i), texts[(i + 1) % len(texts)]) for i in range(len(texts))])

    def module_of(metric):  # type: ignore[no-untyped-def]
        return metric._encoder if metric.name == "bertscore" else metric.model.encoder

    def run(metric) -> tuple[np.ndarray, float]:  # type: ignore[no-untyped-def]
        args = (hyps, refs) if metric.name == "bertscore" else (hyps,)
        times, got = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            got = metric.score(*args, key="story").item_scores
            times.append(time.perf_counter() - t0)
        return np.asarray(got, dtype=float), float(np.median(times))

    for name in names:
        base, t_fp32 = run(get_metric(name, device="cpu"))
        print(f"| {name} | fp32 (exact) | 0 | {t_fp32:.3f} | 1.00x |")
        emulated = get_metric(name, device="cpu")
        enc = module_of(emulated)
        enc.model = use_split_tf32(copy.deepcopy(enc.model), emulate=True)
        if name != "bertscore":
            enc._memo.clear()
        bf16 = get_metric(name, device="cpu", precision="bf16")
        for label, metric in (("tf32x3 (emulated)", emulated), ("bf16", bf16)):
            got, t = run(metric)
            ok = ~np.isnan(base)
            diff = float(np.max(np.abs(got[ok] - base[ok])))
            print(f"| {name} | {label} | {diff:.2e} | {t:.3f} | {t_fp32 / t:.2f}x |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stories", type=int, default=30)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--metrics", default="rovist-c,dhm-c")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)

    import torch

    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric
    from vistkit.models.precision import use_split_tf32

    texts = load_texts(args.stories)
    stories = [Story(str(i), t) for i, t in enumerate(texts)]
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    where = torch.cuda.get_device_name() if cuda else f"{platform.machine()} CPU (tensor-core rounding emulated)"
    print(f"# {len(stories)} stories, {where}, torch {torch.__version__}")
    print("| metric | mode | max diff vs fp32 | time s | vs fp32 |")
    print("|---|---|---|---|---|")
    names = args.metrics.split(",")
    encoder_metrics = [n for n in names if n in ("bertscore", "coherence")]
    if encoder_metrics:
        _encoder_metrics(encoder_metrics, texts, args.repeat)
    names = [n for n in names if n not in encoder_metrics]
    if not names:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_model(texts, Path(tmp) / "albert-large-random")
        for name in names:
            exact = get_metric(name, model=folder, device=args.device)
            base, t_fp32 = _timed(exact, stories, args.repeat, device)
            print(f"| {name} | fp32 (exact) | 0 | {t_fp32:.3f} | 1.00x |")
            modes: list[tuple[str, object]] = []
            if cuda:
                modes += [
                    ("tf32x3", get_metric(name, model=folder, device=args.device, precision="tf32x3")),
                    ("tf32", get_metric(name, model=folder, device=args.device, precision="tf32")),
                ]
            else:
                emulated = get_metric(name, model=folder, device="cpu")
                emulated.model.module = use_split_tf32(copy.deepcopy(exact.model.module), emulate=True)
                one = get_metric(name, model=folder, device="cpu")
                one.model.module = _one_tf32_product(copy.deepcopy(exact.model.module))
                modes += [("tf32x3 (emulated)", emulated), ("tf32 (emulated linear inputs)", one)]
            for label, metric in modes:
                got, t = _timed(metric, stories, args.repeat, device)
                ok = ~np.isnan(base)
                assert np.array_equal(ok, ~np.isnan(got))
                diff = float(np.max(np.abs(got[ok] - base[ok]))) if ok.any() else 0.0
                print(f"| {name} | {label} | {diff:.2e} | {t:.3f} | {t_fp32 / t:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
