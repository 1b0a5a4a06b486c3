"""Speed of the three LM metrics together (one shared LM pass per story) on VIST val stories.

    nice .venv/bin/python bench/bench_lm.py --stories 200 --threads 2            # speed (BENCHMARKS.md)
    nice .venv/bin/python bench/bench_lm.py --stories 100 --each                 # each metric alone, then all
    nice .venv/bin/python bench/bench_lm.py --stories 100 --deviation            # bf16 vs fp32 bound
    nice .venv/bin/python bench/bench_lm.py --stories 40 --profile               # where the time goes
    nice .venv/bin/python bench/bench_lm.py --head                               # LM head: blocks vs one
    nice .venv/bin/python bench/bench_lm.py --stories 60 --matmul                # oneDNN vs BLAS, interleaved
    nice .venv/bin/python bench/bench_lm.py --stories 1000 --cpu-side            # everything but the LM forward
    python bench/bench_lm.py --device cuda --stories 2000 --precision both --each  # a GPU (BENCHMARKS.md)
    python bench/bench_lm.py --device cuda --random-lm SHAPE_DIR --against-cpu   # no packaged LM on that machine

``--lm`` scores with another causal LM (a folder or a cached hub id, as the metrics' ``lm=`` option).
``--random-lm SHAPE_DIR`` (a folder with the packaged LM's ``config.json`` and tokenizer files, e.g. copied from
``~/.cache/vistkit/lm/smollm2-135m-*``) builds a model of that shape with seeded random weights: the same
tokens, rows, batches and FLOPs as the packaged LM, so the same speed, for a machine where the package cannot be
installed; its values are meaningless (``--against-cpu`` still compares the device with the CPU on them).
``--val-file`` points at ``val_reference.json`` elsewhere than ../shared.

Stories: the human VIST *validation* stories of ../shared/data/vist-11777-baselines/arel_reference/
val_reference.json (free to use, RESERVED.md), in file order, split into sentences with NLTK Punkt as the
metrics do. Timed: `LMScorer.logprobs` (tokenise, one pass over each story, one over each of its sentences
alone) plus the per-sentence and story values of lm-perplexity, lm-fluency and lm-coherence, after a warm-up
on other stories. With ``--each``, each metric is also timed alone on the same stories (a cold cache each
time): lm-perplexity reads only the story pass and lm-fluency only the alone pass (`PASSES_OF`).
FLOPs: 2 x (weights of every linear layer, the LM head's vocabulary x width included) per position run
(`CausalLM._run_length`: a row runs its start token and every token but its last, which predicts nothing
scored); attention scores are left out (short rows). The roofline is `bench_gemm_roofline.py`'s float32 rate
on its own shape, plus the same measurement on SmolLM2's MLP shape (rows x 576 @ 576 x 1536).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench_gemm_roofline import gemm_rate  # bench/ is the script's folder, so on sys.path

REPO = Path(__file__).resolve().parents[1]
VAL = REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"


def val_stories(n: int, *, skip: int = 0) -> list[list[str]]:
    from vistkit.metrics.coherence import split_sentences

    data = json.loads(Path(os.environ.get("VISTKIT_BENCH_VAL", VAL)).read_text(encoding="utf-8"))
    texts = [t for album in data.values() for t in album]
    return [split_sentences(t) for t in texts[skip : skip + n]]


def file_stories(args: argparse.Namespace) -> list[list[str]]:
    """The first ``--stories`` stories of ``--stories-file`` (e.g. machine stories, whose repeated sentences run
    once), split with Punkt."""
    from vistkit.data.readers import read_stories
    from vistkit.metrics.coherence import split_sentences

    return [split_sentences(s.text) for s in list(read_stories(args.stories_file))[: args.stories]]


METRICS = ("lm-perplexity", "lm-fluency", "lm-coherence")


def passes_of(metrics: tuple[str, ...]) -> frozenset[str]:
    from vistkit.metrics.lm import PASSES_OF

    return frozenset().union(*(PASSES_OF[m] for m in metrics))


def run_metrics(  # type: ignore[no-untyped-def]
    scorer, stories: list[list[str]], metrics: tuple[str, ...] = METRICS
) -> list[tuple[float, float, float]]:
    """(perplexity, fluency, coherence) of each story, NaN for a metric not in ``metrics``."""
    from vistkit.metrics.lm import coherence_sentences, fluency_sentences, perplexity_of

    def mean(values: list[float], start: int = 0) -> float:
        kept = [v for v in values[start:] if not math.isnan(v)]
        return sum(kept) / len(kept) if kept else math.nan

    out = []
    for lp in scorer.logprobs(stories, passes=passes_of(metrics)):
        out.append((
            perplexity_of(lp) if "lm-perplexity" in metrics else math.nan,
            mean(fluency_sentences(lp, scorer.unigram)) if "lm-fluency" in metrics else math.nan,
            mean(coherence_sentences(lp), 1) if "lm-coherence" in metrics else math.nan,
        ))
    return out


BOTH = frozenset({"story", "alone"})


def flop_count(lm, stories: list[list[str]], passes: frozenset[str] = BOTH) -> tuple[int, int, float]:  # type: ignore[no-untyped-def]
    """(positions through the transformer, positions through the LM head, FLOPs) of scoring ``stories``."""
    import torch

    head = lm.model.get_output_embeddings().weight.numel()
    body = sum(m.weight.numel() for m in lm.model.modules() if isinstance(m, torch.nn.Linear)) - head
    rows = row_lengths(lm, stories, passes)
    positions = scored = sum(rows)  # every position run is scored (`CausalLM._run_length`)
    return positions, scored, 2.0 * (body * positions + head * scored)


def row_lengths(lm, stories: list[list[str]], passes: frozenset[str] = BOTH) -> list[int]:  # type: ignore[no-untyped-def]
    """Positions run per LM row of ``stories`` (the rows `CausalLM.story_logprobs` computes for ``passes``; a row
    runs its start token and every token but its last, `CausalLM._run_length`; identical rows run once)."""
    prepared = [lm._prepare(list(s)) for s in stories]
    rows = lm._rows(prepared, [passes] * len(prepared), [None] * len(prepared))
    return [lm._run_length(len(ids)) for ids in dict.fromkeys(tuple(r.ids) for r in rows)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stories", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "both"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-tokens", type=int, default=None)
    ap.add_argument("--deviation", action="store_true", help="bf16 vs fp32: largest differences")
    ap.add_argument("--no-roofline", action="store_true")
    ap.add_argument("--profile", action="store_true", help="time per module kind (forward hooks), after the run")
    ap.add_argument("--each", action="store_true", help="also time each metric alone (only the passes it reads)")
    ap.add_argument("--head", action="store_true", help="the LM head in vocabulary blocks vs in one block, interleaved")
    ap.add_argument("--matmul", action="store_true",
                    help="fp32 CPU linear layers through oneDNN (the default) vs PyTorch's BLAS, interleaved")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --matmul")
    ap.add_argument("--lm", default=None, help="a causal LM folder or cached hub id (default: the packaged LM)")
    ap.add_argument("--random-lm", default=None, metavar="SHAPE_DIR",
                    help="a random-weight model of this config + tokenizer (speed only; see the docstring)")
    ap.add_argument("--val-file", default=None, help="VIST val_reference.json (default: ../shared's)")
    ap.add_argument("--cpu-side", action="store_true",
                    help="time everything but the LM forward (constant log-probabilities): the host's share")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs (cold cache each); the best is shown")
    ap.add_argument("--torch-profile", action="store_true",
                    help="torch.profiler of one more run: the operators that take the host's and the device's time")
    ap.add_argument("--against-cpu", action="store_true",
                    help="the same stories on --device and on the CPU (fp32): largest differences")
    ap.add_argument(
        "--stories-file",
        default=None,
        help="score the first --stories stories of this file (any VIST format) instead of VIST val human stories",
    )
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    if args.val_file:
        os.environ["VISTKIT_BENCH_VAL"] = args.val_file
    if args.random_lm:
        args.lm = random_lm(Path(args.random_lm))
    if args.head:
        return head_blocks(args)

    stories = val_stories(args.stories, skip=20) if args.stories_file is None else file_stories(args)
    if args.matmul:
        return matmul_ab(stories, args)
    if args.cpu_side:
        return cpu_side(stories, args)
    if args.against_cpu:
        return against_cpu(stories, args)
    if args.deviation:
        return deviation(stories, args)
    results = {}
    for precision in ("fp32", "bf16") if args.precision == "both" else (args.precision,):
        if args.each:
            for metric in METRICS:
                speed(stories, args, precision, (metric,))
        results[precision] = speed(stories, args, precision)
        if args.profile:
            profile(stories, args, precision)
        if args.torch_profile:
            torch_profile(stories, args, precision)
    if len(results) == 2:
        names = ("lm-perplexity", "lm-fluency", "lm-coherence")
        for k, name in enumerate(names):
            d = [abs(x[k] - y[k]) for x, y in zip(results["fp32"], results["bf16"], strict=True)
                 if not (math.isnan(x[k]) or math.isnan(y[k]))]
            print(f"bf16 vs fp32 on these stories, {name}: max |diff| {max(d):.4g}")
    return 0


def head_blocks(args: argparse.Namespace, positions: int = 2048, rounds: int = 5) -> int:
    """The LM head with its log-softmax on ``positions`` hidden states (one CPU forward batch): the vocabulary in
    blocks (`HEAD_BLOCK`, the default) against the whole vocabulary at once in 512-position chunks (the head before
    the blocks existed), interleaved in one process so that both see the same load; best of ``rounds`` each."""
    import torch

    import vistkit.models.lm as lm_mod
    from vistkit.metrics.lm import get_scorer

    lm = get_scorer(args.lm, device=args.device, precision="fp32").lm
    torch.manual_seed(0)
    hidden = torch.randn(positions, lm.model.config.hidden_size) * 3
    targets = torch.randint(0, lm.model.get_output_embeddings().weight.shape[0], (positions,))
    key = lm.device.type if lm.device.type in lm_mod.HEAD_BLOCK else "other"  # as `_head_logprobs` looks it up
    blocked = lm_mod.HEAD_BLOCK[key]
    best = {"blocks": math.inf, "one block": math.inf}
    out = {}
    with torch.inference_mode():
        for _ in range(rounds):
            for name, block in (("blocks", blocked), ("one block", (512, 0))):
                lm_mod.HEAD_BLOCK[key] = block
                t0 = time.perf_counter()
                out[name] = lm._head_logprobs(hidden, targets)
                best[name] = min(best[name], time.perf_counter() - t0)
    lm_mod.HEAD_BLOCK[key] = blocked
    flops = 2.0 * lm.model.get_output_embeddings().weight.numel() * positions
    for name, seconds in best.items():
        print(f"LM head + log-softmax, {name}: {seconds:.3f} s for {positions} positions, "
              f"{flops / seconds / 1e9:.1f} GFLOP/s")
    diff = float((out["blocks"] - out["one block"]).abs().max())
    print(f"blocks / one block speed: {best['one block'] / best['blocks']:.2f}x; max |diff| {diff:.2e}")
    return 0


def matmul_ab(stories: list[list[str]], args: argparse.Namespace) -> int:
    """The three LM metrics' LM work (`CausalLM.story_logprobs`, both passes) with float32 linear layers through
    oneDNN (weights laid out once, `vistkit.models.cpu_matmul`) against PyTorch's BLAS (``VISTKIT_CPU_MATMUL=blas``),
    the two models loaded side by side and timed in alternation (``--rounds`` each) so both see the same load;
    best and median rate of each, and the largest difference of a token's log-probability."""
    import numpy as np
    import torch

    from vistkit.models.lm import load_lm

    models = {}
    for choice in ("blas", "onednn"):
        os.environ["VISTKIT_CPU_MATMUL"] = choice
        models[choice] = load_lm(args.lm, device="cpu", precision="fp32", batch_tokens=args.batch_tokens)
    del os.environ["VISTKIT_CPU_MATMUL"]
    if models["onednn"].matmul != "onednn":
        print("oneDNN is not usable here (vistkit.models.cpu_matmul.onednn_works() is False)")
        return 1
    rates: dict[str, list[float]] = {k: [] for k in models}
    values: dict[str, np.ndarray] = {}
    for lm in models.values():
        lm.story_logprobs(val_stories(8))  # warm-up (other stories)
    for _ in range(args.rounds):
        for choice, lm in models.items():
            t0 = time.perf_counter()
            out = lm.story_logprobs(stories)
            rates[choice].append(len(stories) / (time.perf_counter() - t0))
            values[choice] = np.concatenate([np.concatenate([s.in_story, s.alone]) for o in out for s in o.sentences])
    print(f"torch {torch.__version__}, {args.threads} threads, {len(stories)} stories, {args.rounds} rounds "
          f"(load average {os.getloadavg()[0]:.1f})")
    for choice, r in rates.items():
        print(f"{choice:7s} stories/s: best {max(r):.2f}, median {float(np.median(r)):.2f}  "
              f"({', '.join(f'{x:.2f}' for x in r)})")
    ratios = [a / b for a, b in zip(rates["onednn"], rates["blas"], strict=True)]
    print(f"onednn / blas: best {max(rates['onednn']) / max(rates['blas']):.2f}x, median of pairs "
          f"{float(np.median(ratios)):.2f}x, faster in {sum(x > 1 for x in ratios)} of {len(ratios)} pairs")
    print(f"max |diff| of a token log-probability: {float(np.abs(values['onednn'] - values['blas']).max()):.2e}")
    from vistkit.metrics.lm import LMScorer
    from vistkit.models.lm import Unigram

    metric_values = {k: run_metrics(LMScorer(lm, Unigram()), stories) for k, lm in models.items()}
    for k, name in enumerate(METRICS):
        d = [abs(x[k] - y[k]) for x, y in zip(metric_values["onednn"], metric_values["blas"], strict=True)
             if not (math.isnan(x[k]) or math.isnan(y[k]))]
        print(f"{name}: max |diff| per story {max(d):.2e}")
    return 0


def speed(
    stories: list[list[str]], args: argparse.Namespace, precision: str, metrics: tuple[str, ...] = METRICS
) -> list[tuple[float, float, float]]:
    import torch

    from vistkit.metrics.lm import get_scorer

    t0 = time.perf_counter()
    scorer = get_scorer(args.lm, device=args.device, precision=precision, batch_tokens=args.batch_tokens)
    load_s = time.perf_counter() - t0
    lm = scorer.lm
    scorer.forget()  # a cold cache: an earlier run's stories would cost nothing
    run_metrics(scorer, val_stories(8), metrics)  # warm-up (other stories)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    runs: list[tuple[float, float]] = []
    for _ in range(max(1, args.repeat)):
        scorer.forget()
        t0, c0 = time.perf_counter(), time.process_time()
        values = run_metrics(scorer, stories, metrics)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    seconds, cpu = min(runs)
    if len(runs) > 1:
        print(f"{len(runs)} runs: " + ", ".join(f"{len(stories) / w:.1f}" for w, _ in runs) + " stories/s; best below")
    passes = passes_of(metrics)
    positions, scored, flops = flop_count(lm, stories, passes)
    print(f"== {', '.join(metrics)} (passes: {', '.join(sorted(passes))})")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {lm.device}, {lm.precision}, "
          f"matmul {lm.matmul}, batch_tokens {lm.batch_tokens}; LM {lm.name}@{lm.fingerprint} loaded in {load_s:.2f} s")
    print(f"{len(stories)} stories, {positions} positions ({positions / len(stories):.1f}/story), "
          f"{scored} scored tokens; {lm.flops_per_token / 1e9:.3f} GFLOP/token incl. LM head")
    print(f"time {seconds:.2f} s: {len(stories) / seconds:.2f} stories/s, {positions / seconds:.0f} tokens/s, "
          f"{flops / seconds / 1e9:.1f} GFLOP/s achieved; process CPU time {cpu:.2f} s "
          f"({len(stories) / cpu:.2f} stories per CPU-second); load average {os.getloadavg()[0]:.1f}")
    means = [[v[k] for v in values if not math.isnan(v[k])] for k in range(3)]
    print("means: " + ", ".join(f"{name} {sum(m) / len(m):.4f}" for name, m in zip(METRICS, means, strict=True) if m))
    if not args.no_roofline and args.device.startswith("cuda") and metrics == METRICS:
        achieved = flops / seconds / 1e12
        for shape in ((8192, 8192, 8192), (16384, 576, 1536)):
            rate = cuda_gemm_rate(*shape, dtype=torch.bfloat16 if precision == "bf16" else torch.float32)
            print(f"roofline {precision} GEMM {shape[0]} x {shape[1]} @ {shape[1]} x {shape[2]} on {lm.device}: "
                  f"{rate:.1f} TFLOP/s; achieved / roofline = {achieved / rate:.3f}")
    if not args.no_roofline and args.device == "cpu" and metrics == METRICS:
        achieved, per_cpu = flops / seconds / 1e9, flops / cpu / 1e9
        kinds = [("fp32", False)] + [("fp32 oneDNN", True)] * (lm.matmul == "onednn")
        for dtype, onednn in kinds + [("bf16", False)] * (lm.precision == "bf16"):
            for shape in ((1024, 4096), (576, 1536)):
                wall, cpu_rate = gemm_rate(560, *shape, dtype=dtype.split()[0], onednn=onednn)
                print(f"roofline {dtype} GEMM 560 x {shape[0]} @ {shape[0]} x {shape[1]}: {wall:.1f} GFLOP/s wall, "
                      f"{cpu_rate:.1f} GFLOP per CPU-s; achieved / roofline = {achieved / wall:.2f} (wall), "
                      f"{per_cpu / cpu_rate:.2f} (CPU time)")
    return values


def torch_profile(stories: list[list[str]], args: argparse.Namespace, precision: str) -> None:
    """One more run under torch.profiler: the operators that take most of the host's time, and of the device's."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from vistkit.metrics.lm import get_scorer

    scorer = get_scorer(args.lm, device=args.device, precision=precision, batch_tokens=args.batch_tokens)
    scorer.forget()
    activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * args.device.startswith("cuda")
    with profile(activities=activities) as prof:
        run_metrics(scorer, stories)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
    averages = prof.key_averages()
    print(averages.table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48))
    if args.device.startswith("cuda"):
        print(averages.table(sort_by="self_cuda_time_total", row_limit=14, max_name_column_width=48))


def cuda_gemm_rate(rows: int, inner: int, cols: int, *, dtype: Any) -> float:
    """TFLOP/s of ``(rows x inner) @ (inner x cols)`` on the current CUDA device (torch's default matmul
    settings, as the LM runs: float32 without TF32), timed with CUDA events after a warm-up."""
    import torch

    a = torch.randn(rows, inner, device="cuda", dtype=dtype)
    b = torch.randn(inner, cols, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    reps = max(10, int(2e12 / (2 * rows * inner * cols)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * rows * inner * cols * reps / (start.elapsed_time(end) / 1e3) / 1e12


def profile(stories: list[list[str]], args: argparse.Namespace, precision: str) -> None:
    """Wall time per kind of module of one more run (forward hooks on the LM's modules; the hooks cost a few
    per cent), the GFLOP/s of each matrix-multiply kind, and the share of padded positions."""
    import torch

    from vistkit.metrics.lm import get_scorer
    from vistkit.models.lm import BATCH_SHAPE
    from vistkit.models.runtime import batches_by_length

    scorer = get_scorer(args.lm, device=args.device, precision=precision, batch_tokens=args.batch_tokens)
    scorer.forget()  # the timed run above left these stories in the scorer's cache
    lm = scorer.lm
    spent: dict[str, float] = {}
    started: dict[int, float] = {}
    flop_per_position: dict[str, float] = {}

    def kind(name: str, module: torch.nn.Module) -> str | None:
        if module is lm.model.base_model:
            return "body"
        if isinstance(module, torch.nn.Linear):
            return "LM head" if module is lm.model.get_output_embeddings() else f"linear {name.rsplit('.', 1)[-1]}"
        cls = type(module).__name__
        if cls.endswith(("Attention", "RMSNorm", "MLP")) or "Activation" in cls or cls in ("SiLU", "GELU"):
            return cls
        return None

    for name, module in lm.model.named_modules():
        k = kind(name, module)
        if k is None:
            continue
        if isinstance(module, torch.nn.Linear):
            flop_per_position[k] = flop_per_position.get(k, 0.0) + 2.0 * module.weight.numel()

        def pre(m: torch.nn.Module, _a: object) -> None:
            started[id(m)] = time.perf_counter()

        def post(m: torch.nn.Module, _a: object, _o: object, k: str = k) -> None:
            spent[k] = spent.get(k, 0.0) + time.perf_counter() - started[id(m)]

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
    blocked_head = lm._head_logprobs  # a plain head runs outside the module (logits in vocabulary blocks)

    def timed_head(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = time.perf_counter()
        out = blocked_head(hidden, targets)
        spent["LM head"] = spent.get("LM head", 0.0) + time.perf_counter() - t
        return out

    lm._head_logprobs = timed_head  # type: ignore[method-assign]
    t0 = time.perf_counter()
    try:
        run_metrics(scorer, stories)
    finally:
        del lm._head_logprobs  # the class's method again
    total = time.perf_counter() - t0
    positions, scored, _ = flop_count(lm, stories)
    rows = row_lengths(lm, stories)
    at_most, padding = BATCH_SHAPE.get(lm.device.type, BATCH_SHAPE["other"])
    padded = sum(len(b) * max(rows[i] for i in b) for b in batches_by_length(
        rows, batch_size=at_most, max_tokens=lm.batch_tokens, max_padding=padding))
    print(f"profile ({precision}, with hooks): {total:.2f} s for {len(stories)} stories; {padded} padded positions "
          f"for {positions} ({padded / positions - 1:.1%} padding)")
    linears = {k: v for k, v in spent.items() if k in flop_per_position}
    attention = sum(v for k, v in spent.items() if k.endswith("Attention"))
    mlp = sum(v for k, v in spent.items() if k.endswith("MLP"))
    others = {
        "attention outside its projections": attention - sum(
            v for k, v in linears.items() if k.split()[-1] in ("q_proj", "k_proj", "v_proj", "o_proj")),
        "MLP outside its linears (activation, product)": mlp - sum(
            v for k, v in linears.items() if k.split()[-1] in ("gate_proj", "up_proj", "down_proj")),
        **{k: v for k, v in spent.items() if k.endswith("RMSNorm")},
        "rest of the body (embedding, rotary, residuals)": spent.get("body", 0.0) - attention - mlp - sum(
            v for k, v in spent.items() if k.endswith("RMSNorm")),
        "outside the LM (tokenising, batching, metrics)":
            total - spent.get("body", 0.0) - spent.get("LM head", 0.0),
    }
    for k, v in sorted(linears.items(), key=lambda kv: -kv[1]):
        n = scored if k == "LM head" else padded
        label = "LM head with its log-softmax" if k == "LM head" else k
        print(f"  {label:58s} {v:6.2f} s {v / total:6.1%}  {flop_per_position[k] * n / v / 1e9:6.1f} GFLOP/s")
    gemm = sum(linears.values())
    print(f"  {'all matrix multiplies':58s} {gemm:6.2f} s {gemm / total:6.1%}")
    for k, v in others.items():
        print(f"  {k:58s} {v:6.2f} s {v / total:6.1%}")


def deviation(stories: list[list[str]], args: argparse.Namespace) -> int:
    import numpy as np

    from vistkit.metrics.lm import get_scorer

    a = get_scorer(args.lm, device=args.device, precision="fp32")
    b = get_scorer(args.lm, device=args.device, precision="bf16")
    la, lb = a.logprobs(stories), b.logprobs(stories)
    token = max(float(np.abs(x.in_story() - y.in_story()).max()) for x, y in zip(la, lb, strict=True))
    alone = max(
        float(np.abs(sx.alone - sy.alone).max())
        for x, y in zip(la, lb, strict=True)
        for sx, sy in zip(x.sentences, y.sentences, strict=True)
    )
    va, vb = run_metrics(a, stories), run_metrics(b, stories)
    names = ("lm-perplexity", "lm-fluency", "lm-coherence")
    print(f"{len(stories)} stories, bf16 vs fp32, device {a.lm.device}")
    print(f"token log-probability: max |diff| in story {token:.4g}, alone {alone:.4g}")
    for k, name in enumerate(names):
        d = [abs(x[k] - y[k]) for x, y in zip(va, vb, strict=True) if not (math.isnan(x[k]) or math.isnan(y[k]))]
        rel = [abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(va, vb, strict=True) if x[k] and not math.isnan(x[k])]
        print(f"{name}: max |diff| {max(d):.4g} (max relative {max(rel):.3g})")
    return 0


def random_lm(shape: Path) -> str:
    """A folder (under the temp dir) holding a model of ``shape``'s config.json with random weights (seed 0,
    transformers' own initialisation) and ``shape``'s tokenizer files; its path."""
    import shutil
    import tempfile

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = Path(tempfile.mkdtemp(prefix="vistkit-random-lm-"))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shape), dtype=torch.float32)
    model.save_pretrained(out)
    for f in shape.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("special_tokens_map.json", "vocab.json", "merges.txt"):
            shutil.copy(f, out / f.name)
    print(f"random-weight LM of {shape.name}'s shape in {out} (speed only: its values are meaningless)")
    return str(out)


def cpu_side(stories: list[list[str]], args: argparse.Namespace) -> int:
    """Everything `speed` times except the LM's forward batches (`CausalLM._forward` gives constant
    log-probabilities): tokenising, rows, assembling, the metrics. The host's share of a GPU run, and the
    ceiling a faster device cannot pass."""
    import torch

    from vistkit.metrics.lm import get_scorer
    from vistkit.models.lm import CausalLM

    scorer = get_scorer(args.lm, device="cpu", precision="fp32")

    def constant(self: CausalLM, rows: list[list[int]]) -> Any:
        return torch.full((sum(self._run_length(len(r)) for r in rows),), -2.0)

    real = CausalLM._forward
    CausalLM._forward = constant  # type: ignore[method-assign]
    try:
        run_metrics(scorer, val_stories(8))  # warm-up (other stories)
        best = math.inf
        for _ in range(3):
            scorer.forget()
            t0 = time.perf_counter()
            run_metrics(scorer, stories)
            best = min(best, time.perf_counter() - t0)
    finally:
        CausalLM._forward = real  # type: ignore[method-assign]
    print(f"CPU side (no LM forward), {len(stories)} stories: best of 3 {best:.2f} s = "
          f"{len(stories) / best:.0f} stories/s; load average {os.getloadavg()[0]:.1f}")
    return 0


def against_cpu(stories: list[list[str]], args: argparse.Namespace) -> int:
    """The three metrics' values and every token's log-probability on ``--device`` against the CPU (fp32 both)."""
    import numpy as np

    from vistkit.metrics.lm import get_scorer

    dev = get_scorer(args.lm, device=args.device, precision="fp32")
    cpu = get_scorer(args.lm, device="cpu", precision="fp32")
    la, lb = dev.logprobs(stories), cpu.logprobs(stories)
    token = max(float(np.abs(x.in_story() - y.in_story()).max()) for x, y in zip(la, lb, strict=True) if x.sentences)
    print(f"{len(stories)} stories, {dev.lm.device} vs cpu, fp32: max |diff| of a token log-probability {token:.3g}")
    va, vb = run_metrics(dev, stories), run_metrics(cpu, stories)
    for k, name in enumerate(METRICS):
        d = [abs(x[k] - y[k]) for x, y in zip(va, vb, strict=True) if not (math.isnan(x[k]) or math.isnan(y[k]))]
        print(f"{name}: max |diff| per story {max(d):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
