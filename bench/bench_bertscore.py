"""BERTScore: speed against bert_score 0.3.13, and the layer choice of the packaged MiniLM default.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_bertscore.py speed  [--n 400]
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_bertscore.py layers [--n 300]

``speed``: VIST test stories (PR-VIST's story vs the human story of the same id), the same local model, both
implementations timed on ONE run each (model load included), plus the largest |F1| difference.

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


def speed(n: int) -> None:
    import bert_score
    import torch

    from vistkit.metrics.bertscore import BertScore
    from vistkit.models.resolve import resolve_model

    torch.set_num_threads(1)
    humans, prvist, _ = load()
    rng = random.Random(0)
    sample = rng.sample(humans, n)
    cands = [prvist[h.story_id].text for h in sample]
    refs = [h.text for h in sample]
    path = str(resolve_model("minilm-l6"))
    t0 = time.perf_counter()
    ours = BertScore(layer=6, batch_size=64)
    _, _, f_ours = ours.score_pairs(cands, refs)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, _, f_theirs = bert_score.score(cands, refs, model_type=path, num_layers=6, batch_size=64, device="cpu")
    t_theirs = time.perf_counter() - t0
    print(f"{n} pairs, minilm-l6 layer 6, batch 64, CPU 1 thread, model load included for both")
    print(f"vistkit  {t_ours:.2f} s\nbert_score {t_theirs:.2f} s")
    print(f"ratio (bert_score / vistkit) {t_theirs / t_ours:.2f}")
    diff = np.abs(f_ours - f_theirs.numpy())
    worst = int(diff.argmax())
    print(f"max |F1 difference| {diff.max():.2e} (pair {worst})")
    # bert_score's batched matching lets padding (cosine 0) beat negative similarities; batch_size=1 avoids it
    _, _, f_one = bert_score.score([cands[worst]], [refs[worst]], model_type=path, num_layers=6, batch_size=1)
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
    args = ap.parse_args()
    speed(args.n) if args.what == "speed" else layers(args.n)
