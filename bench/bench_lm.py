"""Speed of the three LM metrics together (one shared LM pass per story) on VIST val stories.

    nice .venv/bin/python bench/bench_lm.py --stories 200 --threads 2            # speed (BENCHMARKS.md)
    nice .venv/bin/python bench/bench_lm.py --stories 100 --deviation            # bf16 vs fp32 bound

Stories: the human VIST *validation* stories of ../shared/data/vist-11777-baselines/arel_reference/
val_reference.json (free to use, RESERVED.md), in file order, split into sentences with NLTK Punkt as the
metrics do. Timed: `LMScorer.logprobs` (tokenise, one pass over each story, one over each of its sentences
alone) plus the per-sentence and story values of lm-perplexity, lm-fluency and lm-coherence, after a warm-up
on other stories. FLOPs: 2 x (weights of every linear layer) per token through the transformer, the LM head
(vocabulary x width) counted only on the positions whose next token is scored (as computed); attention
scores are left out (short rows). The roofline is `bench_gemm_roofline.py`'s float32 rate on its own shape,
plus the same measurement on SmolLM2's MLP shape (rows x 576 @ 576 x 1536).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VAL = REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"


def val_stories(n: int, *, skip: int = 0) -> list[list[str]]:
    from vistkit.metrics.coherence import split_sentences

    data = json.loads(VAL.read_text(encoding="utf-8"))
    texts = [t for album in data.values() for t in album]
    return [split_sentences(t) for t in texts[skip : skip + n]]


def run_metrics(scorer, stories: list[list[str]]) -> list[tuple[float, float, float]]:  # type: ignore[no-untyped-def]
    from vistkit.metrics.lm import coherence_sentences, fluency_sentences, perplexity_of

    out = []
    for lp in scorer.logprobs(stories):
        flu = fluency_sentences(lp, scorer.unigram)
        coh = coherence_sentences(lp)
        f = [v for v in flu if not math.isnan(v)]
        c = [v for v in coh[1:] if not math.isnan(v)]
        out.append(
            (perplexity_of(lp), sum(f) / len(f) if f else math.nan, sum(c) / len(c) if c else math.nan)
        )
    return out


def flop_count(lm, stories: list[list[str]]) -> tuple[int, int, float]:  # type: ignore[no-untyped-def]
    """(positions through the transformer, positions through the LM head, FLOPs) of scoring ``stories``."""
    import torch

    head = lm.model.get_output_embeddings().weight.numel()
    body = sum(m.weight.numel() for m in lm.model.modules() if isinstance(m, torch.nn.Linear)) - head
    positions = scored = 0
    for s in stories:
        p = lm._prepare(list(s))
        if not len(p.ids):
            continue
        rows = [len(p.ids) + 1] + [int((p.owner == j).sum()) + 1 for j in range(1, len(p.sentences))]
        positions += sum(rows)
        scored += sum(r - 1 for r in rows)
    return positions, scored, 2.0 * (body * positions + head * scored)


def gemm_rate(rows: int, inner: int, cols: int) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_gemm_roofline import gflops

    return gflops(rows, inner=inner, cols=cols)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stories", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-tokens", type=int, default=None)
    ap.add_argument("--deviation", action="store_true", help="bf16 vs fp32: largest differences")
    ap.add_argument("--no-roofline", action="store_true")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from vistkit.metrics.lm import get_scorer

    stories = val_stories(args.stories, skip=20)
    if args.deviation:
        return deviation(stories, args)
    t0 = time.perf_counter()
    scorer = get_scorer(None, device=args.device, precision=args.precision, batch_tokens=args.batch_tokens)
    load_s = time.perf_counter() - t0
    lm = scorer.lm
    run_metrics(scorer, val_stories(8))  # warm-up (other stories)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    values = run_metrics(scorer, stories)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    positions, scored, flops = flop_count(lm, stories)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {lm.device}, {lm.precision}, "
          f"batch_tokens {lm.batch_tokens}; LM {lm.name}@{lm.fingerprint} loaded in {load_s:.2f} s")
    print(f"{len(stories)} stories, {positions} positions ({positions / len(stories):.1f}/story), "
          f"{scored} scored tokens; {lm.flops_per_token / 1e9:.3f} GFLOP/token incl. LM head")
    print(f"time {seconds:.2f} s: {len(stories) / seconds:.2f} stories/s, {positions / seconds:.0f} tokens/s, "
          f"{flops / seconds / 1e9:.1f} GFLOP/s achieved")
    ppl = [v[0] for v in values]
    print(f"mean lm-perplexity {sum(ppl) / len(ppl):.2f}, lm-fluency "
          f"{sum(v[1] for v in values) / len(values):.4f}, lm-coherence "
          f"{sum(v[2] for v in values if not math.isnan(v[2])) / len(values):.4f}")
    if not args.no_roofline and args.device == "cpu":
        r1 = gemm_rate(560, 1024, 4096)
        r2 = gemm_rate(560, 576, 1536)
        print(f"roofline (fp32 GEMM, 560 rows): {r1:.1f} GFLOP/s on 1024x4096 (bench_gemm_roofline.py), "
              f"{r2:.1f} GFLOP/s on SmolLM2's 576x1536; achieved / roofline = "
              f"{flops / seconds / 1e9 / r1:.2f} / {flops / seconds / 1e9 / r2:.2f}")
    return 0


def deviation(stories: list[list[str]], args: argparse.Namespace) -> int:
    import numpy as np

    from vistkit.metrics.lm import get_scorer

    a = get_scorer(None, device=args.device, precision="fp32")
    b = get_scorer(None, device=args.device, precision="bf16")
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


if __name__ == "__main__":
    sys.exit(main())
