"""Vrank speed (training examples/s, ranked pairs/s) on a random encoder of BERT-base size, and a mixed-precision check.

No weights are downloaded: the encoder is a random BERT with SimCSE BERT-base's shape (768-d, 12 layers, 12 heads;
a small word vocabulary, so every word is one token and a synthetic pair is about as long as a VHED pair). Numbers
are speed only.

    python bench/bench_vrank.py                    # CPU: ranked pairs/s (the metric), a few training steps
    python bench/bench_vrank.py --device cuda      # GPU: fp32 vs fp16 training, pairs/s, the fp16 end-to-end check

Every run also trains a tiny BERT on synthetic VHED-layout pairs with the given device and precision ``auto`` (fp16
mixed precision on CUDA) and reports held-out accuracy (should be > 0.9, as in tests/test_vrank.py on CPU);
``--no-check`` skips that.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

GOOD = "sunny happy beach family picnic laugh smile garden dance music friends sweet".split()
BAD = "broken sad rain lost angry crash dirty late cold noise alone sick".split()


def stories(n: int, words: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(str(w) for w in rng.choice(GOOD + BAD, words)) + " ." for _ in range(n)]


def bench_predict(folder: Path, device: str, n_pairs: int, batch_size: int) -> dict[str, float]:
    import torch

    from vistkit.data.story import Story
    from vistkit.metrics.vrank import Vrank

    metric = Vrank(model=folder, device=device, batch_size=batch_size)
    texts = stories(2 * n_pairs, 60, seed=3)
    a = [Story(f"a{i}", t) for i, t in enumerate(texts[:n_pairs])]
    b = [Story(f"b{i}", t) for i, t in enumerate(texts[n_pairs:])]
    metric.preference(a[:batch_size], b[:batch_size])  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t = time.perf_counter()
    metric.preference(a, b)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t
    return {"pairs": n_pairs, "seconds": dt, "pairs_per_s": n_pairs / dt}


def long_pairs(n: int, seed: int) -> list:
    """``n`` pairs of 60-word stories (about VIST length) with random gaps."""
    from vistkit.meta.human import StoryPair

    texts = stories(2 * n, 60, seed)
    gaps = np.random.default_rng(seed).uniform(-4, 4, n)
    return [
        StoryPair(str(i), f"s{i}", (), texts[2 * i], texts[2 * i + 1], "m1", "m2", float(g)) for i, g in enumerate(gaps)
    ]


def bench_train(encoder: Path, device: str, precision: str, n_pairs: int, epochs: int) -> dict[str, float]:
    from vistkit.models.vrank import VrankSettings, train_vrank

    pairs = long_pairs(n_pairs, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        s = VrankSettings(epochs=epochs, precision=precision)
        folder = train_vrank(pairs, Path(tmp) / "m", encoder=encoder, settings=s, device=device)
        meta = json.loads((folder / "vistkit_model.json").read_text())
    examples = 2 * n_pairs * epochs
    dt = meta["train_loop_seconds"]  # the optimisation loop only (not loading, tokenising, saving)
    return {"examples": examples, "seconds": dt, "examples_per_s": examples / dt, "total_seconds": meta["seconds"]}


def check(device: str) -> dict[str, float]:
    """Tiny BERT, synthetic pairs, precision auto (fp16 on CUDA): held-out accuracy of both read-outs."""
    from test_vrank import BAD as B
    from test_vrank import FAST, synthetic_pairs
    from test_vrank import GOOD as G
    from tiny_models import make_tiny_encoder

    from vistkit.models.vrank import VrankSettings, load_vrank, train_vrank

    with tempfile.TemporaryDirectory() as tmp:
        enc = make_tiny_encoder(Path(tmp) / "enc", words=G + B)
        lr = float(FAST[FAST.index("--lr") + 1])
        epochs = int(FAST[FAST.index("--epochs") + 1])
        s = VrankSettings(lr=lr, epochs=epochs, target="normalised", precision="auto")
        folder = train_vrank(synthetic_pairs(160, seed=1), Path(tmp) / "m", encoder=enc, settings=s, device=device)
        held = synthetic_pairs(120, seed=2)
        vr = load_vrank(folder, device=device)
        t1, t2 = [p.text_1 for p in held], [p.text_2 for p in held]
        both = vr.predict([*t1, *t2], [*t2, *t1])
        raw, sym = both[:120], (both[:120] - both[120:]) / 2
        gold = np.sign([p.gap for p in held])
        meta = json.loads((folder / "vistkit_model.json").read_text())
        return {
            "precision": meta["precision"],
            "accuracy": float(np.mean(np.sign(raw) == gold)),
            "accuracy_sym": float(np.mean(np.sign(sym) == gold)),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pairs", type=int, default=0, help="pairs to rank (default: 200 on CPU, 4000 on CUDA)")
    ap.add_argument("--train-pairs", type=int, default=0, help="training pairs (default: 32 on CPU, 1024 on CUDA)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    import torch
    from tiny_models import make_tiny_encoder

    from vistkit.models.vrank import VrankSettings, load_encoder, save_vrank

    cuda = args.device.startswith("cuda")
    n_pairs = args.pairs or (8000 if cuda else 200)
    n_train = args.train_pairs or (4096 if cuda else 32)
    print(
        f"device {args.device} ({torch.cuda.get_device_name() if cuda else os.cpu_count()} "
        f"{'' if cuda else 'CPUs'}), torch {torch.__version__}, load {os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        enc = make_tiny_encoder(Path(tmp) / "base", words=GOOD + BAD, hidden=768, layers=12, heads=12)
        tok, model, _ = load_encoder(enc)
        folder = save_vrank(
            Path(tmp) / "vrank", model, tok, encoder="random-bert-base", settings=VrankSettings(), data={"name": "none"}
        )
        r = bench_predict(folder, args.device, n_pairs, args.batch_size)
        print(
            f"rank (vrank metric, both orders, fp32, batch {args.batch_size}): {r['pairs']} pairs in "
            f"{r['seconds']:.2f} s = {r['pairs_per_s']:.1f} pairs/s"
        )
        for precision in ("fp32", "fp16", "bf16") if cuda else ("fp32",):
            t = bench_train(enc, args.device, precision, n_train, 1)
            print(
                f"train ({precision}, batch 32, 1 epoch of {2 * n_train} examples): loop {t['seconds']:.2f} s "
                f"(all: {t['total_seconds']:.1f} s) = "
                f"{t['examples_per_s']:.1f} examples/s (30 epochs of VHED's 13,875 pairs = 27,750 examples: "
                f"{30 * 27750 / t['examples_per_s'] / 3600:.2f} h)"
            )
    if not args.no_check:
        print("check (tiny BERT, synthetic pairs, precision auto):", check(args.device))


if __name__ == "__main__":
    main()
