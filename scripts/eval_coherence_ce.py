"""Agreement of coherence models with the official dHM-C scores, on fixed story samples (CPU budget).

    .venv/bin/python scripts/eval_coherence_ce.py --models coherence-minilm-ce-v1 coherence-minilm-v1 \
        --vist-sample 500 --vwp-sample 300 [--json OUT]

The protocol of `scripts/eval_coherence.py` (same data, same per-story Spearman/Pearson, pooled human + LLaVA,
human-vs-LLaVA order), with VWP also subsampled (fixed seed) because the cross-encoder costs more CPU than
the embedding head, and several models scored on the *same* story ids. Nothing here feeds back into training.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["coherence-minilm-ce-v1"])
    ap.add_argument("--vist-sample", type=int, default=500)
    ap.add_argument("--vwp-sample", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch
    from eval_coherence import SYSTEMS, load
    from scipy.stats import pearsonr, spearmanr

    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric
    from vistkit.models.coherence_ce import CrossEncoderCoherenceModel, cross_encoder_folder

    torch.set_num_threads(args.threads)
    report: dict[str, dict[str, object]] = {}
    for name in args.models:
        folder = cross_encoder_folder(name)
        metric = get_metric("coherence", model=None if folder else name)
        if folder is not None:  # the same dHM-C procedure; the cross-encoder has the head's context_probs
            metric.model = CrossEncoderCoherenceModel(folder)  # type: ignore[attr-defined]
        rows: dict[str, object] = {"signature": metric.signature()}
        for dataset, sample in (("vist", args.vist_sample), ("vwp", args.vwp_sample)):
            stories_h, _ = load(dataset, "human")
            ids = sorted(stories_h)
            if sample and sample < len(ids):  # the same ids as eval_coherence.py for the same sample size
                ids = sorted(random.Random(args.seed).sample(ids, sample))
            pooled_ours: list[float] = []
            pooled_off: list[float] = []
            means: dict[str, dict[str, float]] = {}
            for system in SYSTEMS:
                t0 = time.time()
                stories, official = load(dataset, system)
                score = metric.score([Story(i, stories[i]) for i in ids if i in stories])
                ours = dict(zip(score.item_ids, score.item_scores, strict=True))
                common = [i for i in ids if i in official and i in ours and not np.isnan(ours[i])]
                x = np.array([ours[i] for i in common])
                y = np.array([official[i] for i in common])
                pooled_ours += list(x)
                pooled_off += list(y)
                means[system] = {"ours": float(x.mean()), "official": float(y.mean())}
                rows[f"{dataset}/{system}"] = {
                    "n": len(common),
                    "spearman": float(spearmanr(x, y).statistic),
                    "pearson": float(pearsonr(x, y).statistic),
                    **means[system],
                    "seconds": round(time.time() - t0, 1),
                }
                print(name, dataset, system, rows[f"{dataset}/{system}"], flush=True)
            same = (means["human"]["ours"] < means["llava"]["ours"]) == (
                means["human"]["official"] < means["llava"]["official"]
            )
            rows[f"{dataset}/pooled"] = {
                "n": len(pooled_ours),
                "spearman": float(spearmanr(pooled_ours, pooled_off).statistic),
                "pearson": float(pearsonr(pooled_ours, pooled_off).statistic),
                "same_order": same,
            }
            print(name, dataset, "pooled", rows[f"{dataset}/pooled"], flush=True)
        report[name] = rows
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
