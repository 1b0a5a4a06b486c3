"""Throughput of ``rovist-c`` / ``dhm-c`` against the official per-pair batch-1 loop (same architecture).

    OMP_NUM_THREADS=2 .venv/bin/python bench/bench_coherence.py --stories 1000 [--device cuda] [--threads 2]

Both sides use the same randomly initialised ALBERT-large-v1 SOP classifier (24 layers, 1024-d; random
weights are fine for timing) and the same tokenizer (an ALBERT Unigram tokenizer over the benchmark's own
words, since the albert-large-v1 spiece model is not packaged). The reference is the official loop
(``coherence_scorer.py`` / ``eval_C_R.py``): per pair, tokenise, build tensors, ``model(...)`` with batch 1
under ``torch.no_grad``, ``softmax(...)[0][1].item()``. Ours is ``get_metric(...).score(stories)``:
length-sorted padded batches under ``torch.inference_mode``. Stories: human VIST test stories from the dHM
data (../shared), or synthetic ones when it is absent. Both runs are checked to give the same scores (to
1e-5).
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
GT = (
    REPO.parent / "shared" / "data" / "dhm-visual-storytelling" / "data" / "stories" / "vist" / "gt_test.json"
)


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
    vocab += [("▁" + w, -5.0) for w in words] + [
        (c, -10.0) for c in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'"
    ]
    tok = AlbertTokenizer(vocab=vocab)
    torch.manual_seed(0)
    module = build_sop_module(ALBERT_LARGE_V1)
    save_converted(folder, module.state_dict(), kind=KIND, config=ALBERT_LARGE_V1, source={"file": "random"})
    tok.save_pretrained(str(folder))
    return folder


def official_loop(model, texts: list[str], context: str) -> list[float]:  # type: ignore[no-untyped-def]
    """The official per-pair loop (batch 1), on the same module/tokenizer."""
    import torch

    from vistkit.metrics.coherence import split_sentences

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


def sync(device: object) -> None:
    import torch

    if getattr(device, "type", None) == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stories", type=int, default=1000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--metrics", default="rovist-c,dhm-c")
    ap.add_argument("--chunk", type=int, default=100, help="stories per alternation of the two sides")
    ap.add_argument("--precision", default="fp32", help="fp32 (exact, default) or bf16 (opt-in, approximate)")
    args = ap.parse_args(argv)

    import torch

    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric

    if args.threads:
        torch.set_num_threads(args.threads)
    texts = load_texts(args.stories)
    stories = [Story(str(i), t) for i, t in enumerate(texts)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_model(texts, Path(tmp) / "albert-large-random")
        dev = torch.device(args.device) if args.device else None
        print(
            f"machine: {platform.processor() or platform.machine()}, torch threads "
            f"{torch.get_num_threads()}, "
            f"device {dev or 'auto'}"
            + (f" ({torch.cuda.get_device_name()})" if torch.cuda.is_available() else "")
        )
        print(f"stories: {len(texts)} ({'dHM VIST test humans' if GT.is_file() else 'synthetic'})")
        for name in args.metrics.split(","):
            metric = get_metric(
                name, model=folder, device=args.device, batch_size=args.batch_size, precision=args.precision
            )
            context = "adjacent" if name == "rovist-c" else "prefix"
            # alternate the two sides chunk by chunk, so a change of machine load hits both alike
            ref: list[float] = []
            ours_parts: list[np.ndarray] = []
            t_ref = t_ours = 0.0
            for start in range(0, len(texts), args.chunk):
                part = slice(start, start + args.chunk)
                sides = ["ref", "ours"] if (start // args.chunk) % 2 == 0 else ["ours", "ref"]
                for side in sides:
                    sync(metric.model.device)
                    t0 = time.perf_counter()
                    if side == "ref":
                        ref += official_loop(metric.model, texts[part], context)
                    else:
                        ours_parts.append(metric.score(stories[part]).item_scores)
                    sync(metric.model.device)
                    if side == "ref":
                        t_ref += time.perf_counter() - t0
                    else:
                        t_ours += time.perf_counter() - t0
            ours = np.concatenate(ours_parts)
            diff = float(np.nanmax(np.abs(np.asarray(ref) - ours))) if len(ours) else 0.0
            same_nan = bool(np.array_equal(np.isnan(ref), np.isnan(ours)))
            print(
                f"{name} [{args.precision}]: official loop {t_ref:.2f}s "
                f"({len(texts) / t_ref:.2f} stories/s), vistkit {t_ours:.2f}s "
                f"({len(texts) / t_ours:.2f} stories/s), speed-up x{t_ref / t_ours:.2f}; "
                f"max |diff| {diff:.2e}, same exclusions: {same_nan}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
