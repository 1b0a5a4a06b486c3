"""Throughput of ``rovist-c`` / ``dhm-c`` against the official per-pair batch-1 loop (same architecture).

    OMP_NUM_THREADS=2 .venv/bin/python bench/bench_coherence.py --stories 1000 [--device cuda] [--threads 2]

Both sides use the same randomly initialised ALBERT-large-v1 SOP classifier (24 layers, 1024-d; random
weights are fine for timing) and the same tokenizer (an ALBERT Unigram tokenizer over the benchmark's own
words, since the albert-large-v1 spiece model is not packaged). The reference is the official loop
(``coherence_scorer.py`` / ``eval_C_R.py``): per pair, tokenise, build tensors, ``model(...)`` with batch 1
under ``torch.no_grad``, ``softmax(...)[0][1].item()``. Ours is ``get_metric(...).score(stories)``:
length-sorted padded batches under ``torch.inference_mode``. Stories: human VIST test stories from the dHM
data (../shared), or synthetic ones when it is absent. The fp32 run must give the official loop's scores (to
1e-5, same exclusions) or the script stops with an error; the opt-in precisions print their deviation.

Cold text memos: vistkit memoises Punkt's boundary decisions and each word's token ids (the official loop
memoises nothing). Counting tokens and the warm-ups fill those memos with the benchmark's own stories, so every
timed vistkit run starts with them emptied (`forget_text_memos`), as a fresh process scoring these stories would.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GT = REPO.parent / "shared" / "data" / "dhm-visual-storytelling" / "data" / "stories" / "vist" / "gt_test.json"


def load_texts(n: int) -> list[str]:
    if GT.is_file():
        data = json.loads(GT.read_text(encoding="utf-8"))
        return [data[k] for k in sorted(data)[:n]]
    rng = np.random.default_rng(0)
    words = "the family went to the beach we had a great time then home for dinner party cake dog".split()
    return [" ".join(" ".join(rng.choice(words, 8)) + " ." for _ in range(5)) for _ in range(n)]


def build_model(texts: list[str], folder: Path) -> Path:
    """A random albert-large-v1-sized SOP model (converted folder) with a word-level ALBERT tokenizer."""
    import torch
    from transformers import AlbertTokenizer

    from vistkit.models.checkpoints import save_converted
    from vistkit.models.sop import ALBERT_LARGE_V1, KIND, build_sop_module

    words = sorted({w for t in texts for w in t.lower().split()})[: 30000 - 200]
    vocab = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
    vocab += [("▁" + w, -5.0) for w in words] + [(c, -10.0) for c in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'"]
    tok = AlbertTokenizer(vocab=vocab)
    torch.manual_seed(0)
    module = build_sop_module(ALBERT_LARGE_V1)
    save_converted(folder, module.state_dict(), kind=KIND, config=ALBERT_LARGE_V1, source={"file": "random"})
    tok.save_pretrained(str(folder))
    return folder


def official_loop(model, texts: list[str], context: str) -> list[float]:  # type: ignore[no-untyped-def]
    """The official per-pair loop (batch 1), on the same module/tokenizer, splitting with NLTK's ``sent_tokenize``
    as the official scripts do (not vistkit's memoised twin, whose memo the timed vistkit run would then find
    filled)."""
    import torch

    from vistkit.text.sentences import sent_tokenize as split_sentences

    tok, module, device = model.tokenizer, model.module, model.device
    limit = model.max_positions
    out = []
    for text in texts:
        sents = split_sentences(text)
        scores: list[float] = []
        prefix = sents[0] if sents else ""
        failed = False
        for i in range(1, len(sents)):
            a = sents[i - 1] if context == "adjacent" else prefix
            b = sents[i]
            if a.strip() == b.strip():
                scores.append(0)
                continue
            len_a, len_b = len(tok.tokenize(a)), len(tok.tokenize(b))
            ids = tok.convert_tokens_to_ids(tok.tokenize(" ".join(["[CLS]", a, "[SEP]", b, "[SEP]"])))
            if len(ids) > limit:
                failed = True
                break
            ids_t = torch.tensor([ids]).to(device)
            att = torch.tensor([(len_a + 2) * [1] + (len_b + 1) * [1]]).to(device)
            seg = torch.tensor([(len_a + 2) * [0] + (len_b + 1) * [1]]).to(device)
            with torch.no_grad():
                logits = module(ids_t, att, seg)
            scores.append(torch.softmax(logits, dim=1)[0][1].item())
            if context == "prefix":
                prefix += " " + b
        out.append(math.nan if failed or not scores else float(np.mean(scores)))
    return out


def forget_text_memos(model) -> None:  # type: ignore[no-untyped-def]
    """Empty vistkit's memoised sentence splits and word token ids, so that a timed run tokenises as cold as the
    official loop (which memoises nothing)."""
    from vistkit.metrics.coherence import _memo_punkt

    _memo_punkt.cache_clear()
    model._word_ids.clear()


#: largest |vistkit fp32 - official loop| accepted (BENCHMARKS.md: < 1e-7 measured; batching changes the order)
FP32_TOLERANCE = 1e-5


def sync(device: object) -> None:
    import torch

    if getattr(device, "type", None) == "cuda":
        torch.cuda.synchronize()


def cpu_side(model, texts: list[str], context: str) -> tuple[float, float, float, float, int]:  # type: ignore[no-untyped-def]
    """Seconds for (old splitting, new splitting, old tokenisation, new tokenisation) of ``texts``, and the
    number of pairs. Old splitting: `vistkit.text.sentences.sent_tokenize`; new: its memoised twin.

    Old: vistkit before issue 12 = the official construction, three tokenizer calls per pair (`SOPModel.encode`).
    New: `SOPModel.encode_many` (each distinct word once through the batch API; memo emptied first).
    """
    from vistkit.metrics.coherence import _memo_punkt, adjacent_pairs, prefix_pairs, split_sentences
    from vistkit.text.sentences import sent_tokenize

    sent_tokenize("Warm up. The splitter.")
    t0 = time.perf_counter()
    old_sents = [sent_tokenize(t) for t in texts]
    t_split_old = time.perf_counter() - t0
    _memo_punkt.cache_clear()
    split_sentences("Warm up. The splitter.")
    t0 = time.perf_counter()
    sents = [split_sentences(t) for t in texts]
    t_split = time.perf_counter() - t0
    assert sents == old_sents
    make = adjacent_pairs if context == "adjacent" else prefix_pairs
    # both sides start warm (the fast tokenizer's thread pool starts on its first large batch)
    model.encode_many([(f"warm up {i}", f"the pool {i} .") for i in range(2000)])
    pairs = [p for s in sents for p in make(s) if p is not None]
    t0 = time.perf_counter()
    old = [model.encode(a, b) for a, b in pairs]
    t_old = time.perf_counter() - t0
    model._word_ids.clear()
    t0 = time.perf_counter()
    new = model.encode_many(pairs)
    t_new = time.perf_counter() - t0
    assert [(p.input_ids, p.token_type_ids) for p in old] == [(p.input_ids, p.token_type_ids) for p in new]
    return t_split_old, t_split, t_old, t_new, len(pairs)


def matmul_rates() -> dict[str, float]:
    """Measured TFLOP/s of a (16384 x 1024) @ (1024 x 4096) product (ALBERT-large's FFN shape) per precision."""
    import torch

    if not torch.cuda.is_available():
        return {}
    out: dict[str, float] = {}
    for name, dtype, tf32 in (
        ("fp32", torch.float32, False),
        ("tf32", torch.float32, True),
        ("bf16", torch.bfloat16, False),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(16384, 1024, device="cuda", dtype=dtype)
        b = torch.randn(1024, 4096, device="cuda", dtype=dtype)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            start.record()
            for _ in range(20):
                a @ b
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1000 / 20)
        out[name] = 2 * 16384 * 1024 * 4096 / float(np.median(times)) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stories", type=int, default=1000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--metrics", default="rovist-c,dhm-c")
    ap.add_argument("--chunk", type=int, default=100, help="stories per alternation of the two sides (CPU)")
    ap.add_argument(
        "--precision", default="fp32", help="comma-separated: fp32 (exact, default), tf32x3, tf32, bf16 (opt-in)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of vistkit per precision (median)")
    ap.add_argument("--cpu-only", action="store_true", help="only the CPU-side (splitting + tokenisation) table")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)

    import torch

    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric

    if args.threads:
        torch.set_num_threads(args.threads)
    texts = load_texts(args.stories)
    stories = [Story(str(i), t) for i, t in enumerate(texts)]
    results: dict[str, object] = {"stories": len(texts)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_model(texts, Path(tmp) / "albert-large-random")
        dev = torch.device(args.device) if args.device else None
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
        print(
            f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__} threads "
            f"{torch.get_num_threads()}, device {dev or 'auto'}" + (f" ({gpu})" if gpu else ""),
            flush=True,
        )
        print(f"stories: {len(texts)} ({'dHM VIST test humans' if GT.is_file() else 'synthetic'})")
        rates = matmul_rates() if not args.cpu_only else {}
        if rates:
            print("matmul TFLOP/s (16384x1024 @ 1024x4096): " + ", ".join(f"{k} {v:.0f}" for k, v in rates.items()))
            results["matmul_tflops"] = rates
        precisions = args.precision.split(",")
        for name in args.metrics.split(","):
            context = "adjacent" if name == "rovist-c" else "prefix"
            metric = get_metric(name, model=folder, device=args.device, batch_size=args.batch_size)
            t_split_old, t_split, t_old, t_new, n_pairs = cpu_side(metric.model, texts, context)
            per = 1000 / len(texts)
            old_total, new_total = t_split_old + t_old, t_split + t_new
            print(
                f"{name} CPU side per 1,000 stories ({n_pairs} pairs): splitting old {t_split_old * per:.3f}s / "
                f"new {t_split * per:.3f}s, tokenisation old {t_old * per:.3f}s / new {t_new * per:.3f}s; total "
                f"old {old_total * per:.3f}s / new {new_total * per:.3f}s: x{old_total / new_total:.1f} "
                "(identical sentences, ids and token types)",
                flush=True,
            )
            entry: dict[str, object] = {
                "split_old_s": t_split_old,
                "split_new_s": t_split,
                "tok_old_s": t_old,
                "tok_new_s": t_new,
                "pairs": n_pairs,
            }
            results[name] = entry
            if args.cpu_only:
                continue
            from vistkit.metrics.coherence import split_sentences

            all_pairs = [p for t in texts for p in metric.story_pairs(split_sentences(t)) if p is not None]
            lengths = [len(p.input_ids) for p in metric.model.encode_many(all_pairs)]
            gflop = 2 * 0.302e9 * sum(lengths) / 1e9  # 2 x (24 x 12.6M matmul weights) per token
            entry["tokens"] = sum(lengths)
            entry["gflop"] = gflop
            # warm-up (cuBLAS handles, kernels) for both sides, then the official loop once
            official_loop(metric.model, texts[:8], context)
            metric.score(stories[:64])
            sync(metric.model.device)
            ref: list[float] = []
            ours_fp32: np.ndarray | None = None
            t_ref = 0.0
            if args.device and args.device.startswith("cuda"):
                t0 = time.perf_counter()
                ref = official_loop(metric.model, texts, context)
                sync(metric.model.device)
                t_ref = time.perf_counter() - t0
            for precision in precisions:
                m = (
                    metric
                    if precision == "fp32"
                    else get_metric(
                        name, model=folder, device=args.device, batch_size=args.batch_size, precision=precision
                    )
                )
                m.score(stories[:64])
                times: list[float] = []
                ours = np.zeros(0)
                if not (args.device and args.device.startswith("cuda")):
                    # CPU: alternate the two sides chunk by chunk (machine load hits both alike)
                    ref, t_ref, t_ours = [], 0.0, 0.0
                    parts: list[np.ndarray] = []
                    forget_text_memos(m.model)  # the chunks together are one cold run
                    for start in range(0, len(texts), args.chunk):
                        part = slice(start, start + args.chunk)
                        t0 = time.perf_counter()
                        ref += official_loop(metric.model, texts[part], context)
                        t_ref += time.perf_counter() - t0
                        t0 = time.perf_counter()
                        parts.append(m.score(stories[part]).item_scores)
                        t_ours += time.perf_counter() - t0
                    ours, times = np.concatenate(parts), [t_ours]
                else:
                    for _ in range(args.repeat):
                        forget_text_memos(m.model)
                        sync(m.model.device)
                        t0 = time.perf_counter()
                        ours = m.score(stories).item_scores
                        sync(m.model.device)
                        times.append(time.perf_counter() - t0)
                t_ours = float(np.median(times))
                # the model alone (pairs encoded beforehand): what the GPU side costs without any CPU prep
                encoded = m.model.encode_many(all_pairs)
                model_times = []
                for _ in range(2):
                    sync(m.model.device)
                    t0 = time.perf_counter()
                    runner = m.model.runner()
                    m.model.submit(encoded, runner)
                    runner.gather(len(encoded))
                    sync(m.model.device)
                    model_times.append(time.perf_counter() - t0)
                t_model = min(model_times)
                if precision == "fp32":
                    ours_fp32 = ours
                diff = float(np.nanmax(np.abs(np.asarray(ref) - ours))) if len(ours) else 0.0
                same_nan = bool(np.array_equal(np.isnan(ref), np.isnan(ours)))
                floor = gflop / 1e3 / rates[precision] if rates.get(precision) else math.nan
                print(
                    f"{name} [{precision}]: official loop {t_ref:.2f}s ({len(texts) / t_ref:.2f} stories/s), "
                    f"vistkit {t_ours:.3f}s (runs {', '.join(f'{t:.3f}' for t in times)}; "
                    f"{len(texts) / t_ours:.1f} stories/s), speed-up x{t_ref / t_ours:.1f}; max |diff| {diff:.2e} "
                    f"vs official"
                    + (
                        f", {np.nanmax(np.abs(ours - ours_fp32)):.2e} vs vistkit fp32"
                        if ours_fp32 is not None and precision != "fp32"
                        else ""
                    )
                    + f"; same exclusions: {same_nan}; model alone {t_model:.3f}s; matmul floor {floor:.3f}s "
                    f"({sum(lengths)} tokens, {gflop:.0f} GFLOP)",
                    flush=True,
                )
                entry[precision] = {
                    "official_s": t_ref,
                    "vistkit_s": times,
                    "model_alone_s": t_model,
                    "max_diff": diff,
                    "same_exclusions": same_nan,
                }
                if precision == "fp32" and not (diff <= FP32_TOLERANCE and same_nan):
                    raise SystemExit(
                        f"{name}: vistkit's fp32 scores differ from the official loop's (max |diff| {diff:.2e}, "
                        f"same exclusions: {same_nan}); the speed-up above is not comparable"
                    )
                if precision != "fp32":
                    del m
                    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
