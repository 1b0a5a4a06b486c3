"""BERTScore: speed against bert_score 0.3.13, and the layer choice of the packaged MiniLM default.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_bertscore.py speed  [--n 400] [--device cuda] [--repeat 3]
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_bertscore.py layers [--n 300]

``speed``: VIST test stories (PR-VIST's story vs the human story of the same id), the same local model, both
implementations loaded once and timed on ``score`` (model load reported apart), plus the largest |F1|
difference.

``layers``: for each layer of minilm-l6, how often a held-out human story beats a machine story (TAPM,
PR-VIST)
when both are scored against the remaining human stories of the same photo sequence (a Turing-test proxy; VIST
test, not a training set: nothing is fitted, one integer is chosen).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load() -> tuple[list, dict, dict]:
    from vistkit.data.readers import read_stories

    humans = read_stories(DATA / "pr-vist" / "PR_VIST.json.zip")
    prvist = read_stories(DATA / "pr-vist" / "PR_VIST.json.zip", field="predicted_story", system="pr-vist")
    tapm = read_stories(DATA / "tapm-vist-outputs" / "vist" / "ours.json")
    return list(humans), {s.story_id: s for s in prvist}, {s.sequence: s for s in tapm}


def speed(n: int, *, device: str = "cpu", model: str | None = None, repeat: int = 1) -> None:
    """vistkit vs bert_score 0.3.13 on the same local model: load once each, then time ``score`` (median of
    ``repeat`` runs after a warm-up; vistkit's embedding cache is emptied before every run)."""
    import bert_score
    import torch

    from vistkit.metrics.bertscore import BertScore
    from vistkit.models.resolve import resolve_model

    if device == "cpu":
        torch.set_num_threads(1)
    humans, prvist, _ = load()
    rng = random.Random(0)
    sample = rng.sample(humans, min(n, len(humans)))
    cands = [prvist[h.story_id].text for h in sample]
    refs = [h.text for h in sample]
    path = model or str(resolve_model("minilm-l6"))
    t0 = time.perf_counter()
    ours = BertScore(model=path, layer=6, batch_size=64, device=device)
    t_load_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = bert_score.BERTScorer(model_type=path, num_layers=6, batch_size=64, device=device)
    t_load_theirs = time.perf_counter() - t0

    def run_ours() -> np.ndarray:
        ours._cache.clear()
        f = ours.score_pairs(cands, refs)[2]
        return f

    def run_theirs() -> np.ndarray:
        f = theirs.score(cands, refs)[2]
        return f.numpy()

    def timed(fn):  # type: ignore[no-untyped-def]
        fn()  # warm-up
        times, result = [], None
        for _ in range(repeat):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times)), times, result

    t_ours, all_ours, f_ours = timed(run_ours)
    t_theirs, all_theirs, f_theirs = timed(run_theirs)
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU 1 thread"
    print(f"{len(cands)} pairs, {Path(path).name} layer 6, batch 64, {device} ({name}); models loaded once")
    print(f"vistkit    {t_ours:.3f} s (runs {', '.join(f'{t:.3f}' for t in all_ours)}; load {t_load_ours:.2f} s)")
    print(f"bert_score {t_theirs:.3f} s (runs {', '.join(f'{t:.3f}' for t in all_theirs)}; load {t_load_theirs:.2f} s)")
    print(f"ratio (bert_score / vistkit) {t_theirs / t_ours:.2f}")
    diff = np.abs(f_ours - f_theirs)
    worst = int(diff.argmax())
    print(f"max |F1 difference| {diff.max():.2e} (pair {worst}); identical: {bool(diff.max() == 0)}")
    # bert_score's batched matching lets padding (cosine 0) beat negative similarities; batch_size=1 avoids it
    one_scorer = bert_score.BERTScorer(model_type=path, num_layers=6, batch_size=1, device=device)
    f_one = one_scorer.score([cands[worst]], [refs[worst]])[2]
    one = abs(f_ours[worst] - float(f_one[0]))
    print(f"that pair with bert_score batch_size=1: |F1 difference| {one:.2e}")


def layers(n: int) -> None:
    import torch

    from vistkit.metrics.bertscore import BertScore

    torch.set_num_threads(1)
    humans, prvist, tapm = load()
    by_seq: dict[str, list] = {}
    for h in humans:
        by_seq.setdefault(h.sequence, []).append(h)
    seqs = [s for s, hs in sorted(by_seq.items()) if len(hs) >= 2 and s in tapm]
    rng = random.Random(0)
    seqs = rng.sample(seqs, min(n, len(seqs)))
    cands: list[str] = []
    refs: list[list[str]] = []
    pairs: list[tuple[int, int]] = []  # (index of the human candidate, index of a machine candidate)
    for s in seqs:
        held, others = by_seq[s][0], [h.text for h in by_seq[s][1:]]
        base = len(cands)
        cands.append(held.text)
        refs.append(others)
        for machine in (tapm[s].text, prvist[held.story_id].text):
            cands.append(machine)
            refs.append(others)
            pairs.append((base, len(cands) - 1))
    print(f"{len(seqs)} sequences, {len(pairs)} human-vs-machine pairs")
    for layer in range(0, 7):
        metric = BertScore(layer=layer)
        _, _, f = metric.score_pairs(cands, refs)
        acc = float(np.mean([f[a] > f[b] for a, b in pairs]))
        print(f"layer {layer}: human preferred in {acc:.4f} of pairs")
        sys.stdout.flush()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["speed", "layers"])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=None, help="a local model folder (default: the packaged minilm-l6)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.what == "speed":
        speed(args.n, device=args.device, model=args.model, repeat=args.repeat)
    else:
        layers(args.n)
