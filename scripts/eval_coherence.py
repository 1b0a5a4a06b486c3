"""Agreement of a coherence model with the official dHM-C scores (per story, Spearman and Pearson).

    .venv/bin/python scripts/eval_coherence.py [--model FOLDER] [--vist-sample 1000] [--json OUT]

Reads ../shared/data/dhm-visual-storytelling/data/{stories,scores}/{vist,vwp}/{gt_test,llava_vc_p3}* (the
official eval_C_R.py outputs), scores the same stories with vistkit's ``coherence`` metric, and reports, for
each dataset and system, the Spearman and Pearson correlation over the stories both score, the pooled (human
+ LLaVA) correlations, and whether mean(human) vs mean(LLaVA) is ordered as the official C orders it. VIST
is subsampled (fixed seed) to keep CPU time small; VWP is used whole. Nothing here feeds back into training.
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
DHM = REPO.parent / "shared" / "data" / "dhm-visual-storytelling" / "data"
SYSTEMS = {"human": "gt_test", "llava": "llava_vc_p3"}


def load(dataset: str, system: str) -> tuple[dict[str, str], dict[str, float]]:
    import pandas as pd

    stories = json.loads((DHM / "stories" / dataset / f"{SYSTEMS[system]}.json").read_text(encoding="utf-8"))
    df = pd.read_csv(DHM / "scores" / dataset / f"{SYSTEMS[system]}_C.csv", dtype={"story_id": str})
    return stories, dict(zip(df["story_id"], df["C_score"], strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="coherence model folder (default: the packaged one)")
    ap.add_argument("--vist-sample", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch
    from scipy.stats import pearsonr, spearmanr

    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric

    torch.set_num_threads(args.threads)
    metric = get_metric("coherence", **({"model": args.model} if args.model else {}))
    report: dict[str, object] = {"signature": None}
    for dataset in ("vwp", "vist"):
        stories_h, _ = load(dataset, "human")
        ids = sorted(stories_h)
        if dataset == "vist" and args.vist_sample and args.vist_sample < len(ids):
            ids = sorted(random.Random(args.seed).sample(ids, args.vist_sample))
        pooled_ours: list[float] = []
        pooled_off: list[float] = []
        means: dict[str, dict[str, float]] = {}
        for system in SYSTEMS:
            t0 = time.time()
            stories, official = load(dataset, system)
            batch = [Story(i, stories[i]) for i in ids if i in stories]
            score = metric.score(batch)
            report["signature"] = score.signature
            ours = dict(zip(score.item_ids, score.item_scores, strict=True))
            common = [i for i in ids if i in official and i in ours and not np.isnan(ours[i])]
            x = np.array([ours[i] for i in common])
            y = np.array([official[i] for i in common])
            pooled_ours += list(x)
            pooled_off += list(y)
            rho = float(spearmanr(x, y).statistic)
            r = float(pearsonr(x, y).statistic)
            means[system] = {"ours": float(x.mean()), "official": float(y.mean())}
            report[f"{dataset}/{system}"] = {"n": len(common), "spearman": rho, "pearson": r, **means[system]}
            print(
                f"{dataset}/{system}: n={len(common)} spearman={rho:.4f} pearson={r:.4f} "
                f"mean ours={x.mean():.4f} official={y.mean():.4f} ({time.time() - t0:.0f}s)",
                flush=True,
            )
        rho = float(spearmanr(pooled_ours, pooled_off).statistic)
        r = float(pearsonr(pooled_ours, pooled_off).statistic)
        same = (means["human"]["ours"] < means["llava"]["ours"]) == (
            means["human"]["official"] < means["llava"]["official"]
        )
        report[f"{dataset}/pooled"] = {
            "n": len(pooled_ours),
            "spearman": rho,
            "pearson": r,
            "same_order": same,
        }
        print(
            f"{dataset}/pooled: spearman={rho:.4f} pearson={r:.4f} human-vs-llava order matches official: "
            f"{same}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
