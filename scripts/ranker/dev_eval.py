"""Quick development numbers for a ranker folder: proxy pairs per system, VWP synthetic errors per kind."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
from vistkit.meta.human import read_pairs  # noqa: E402
from vistkit.meta.perturb import PERTURBATIONS, perturb  # noqa: E402
from vistkit.models.story_ranker import StoryRankerModel, sentences_of  # noqa: E402


def ttr(texts):
    out = []
    for t in texts:
        w = [x for s in sentences_of(t) for x in s if x not in ".,!?"]
        out.append(len(set(w)) / max(len(w), 1))
    return np.array(out)


def main() -> None:
    folder = sys.argv[1]
    model = StoryRankerModel(folder)
    scorers = {"ranker": model.utility, "ttr": ttr}
    pairs = read_pairs(sys.argv[2] if len(sys.argv) > 2 else "/work/ranker-data/proxy_pairs.csv")
    for name, f in scorers.items():
        a = f([p.text_1 for p in pairs])
        b = f([p.text_2 for p in pairs])
        by = {}
        for p, x, y in zip(pairs, a, b, strict=True):
            sys_ = p.system_2
            by.setdefault(sys_, []).append(x > y if p.gap > 0 else y > x)
        print(name, "proxy", {k: round(float(np.mean(v)), 4) for k, v in by.items()})
    vwp = json.load(open(ROOT.parent / "shared/data/dhm-visual-storytelling/data/stories/vwp/gt_test.json"))
    texts = [vwp[k] for k in sorted(vwp)]
    split = [[" ".join(s) for s in sentences_of(t)] for t in texts]
    pool = [s for ss in split for s in ss]
    rng = random.Random(1)
    for name, f in scorers.items():
        res = {}
        for kind in PERTURBATIONS:
            good, bad = [], []
            for ss in split:
                if len(ss) < 3:
                    continue
                w = perturb(ss, kind, rng=rng, pool=pool)
                if w != ss:
                    good.append(" ".join(ss))
                    bad.append(" ".join(w))
            res[kind] = round(float(np.mean(f(good) > f(bad))), 3)
        print(name, "vwp", res, "mean", round(float(np.mean(list(res.values()))), 3))


if __name__ == "__main__":
    main()
