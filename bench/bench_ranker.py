"""Throughput of the offline ranker `story-ranker-v1` (issue 10's target: >= 100 story pairs/s on a 2-core CPU).

    python bench/bench_ranker.py [--pairs 15015] [--threads 2] [--train] [--metric story-ranker-v1]

`story-ranker-v1` was the default ranker when this benchmark was written (BENCHMARKS.md's numbers are its); the
default `story-ranker` is v2 since issue 17, a language model at a few stories/s (`bench_lm.py` times it), so
``--metric story-ranker`` on the full 15,015 pairs (10,994 then 30,030 distinct stories) takes hours on a
2-core CPU.

Pairs: every VIST test human story (PR-VIST's copy) against the LLaVA, TAPM and PR-VIST story of the same photos
(the proxy pairs of `vistkit meta build-pairs`; about 1.3 distinct stories per pair), and the same number of
pairs in which every story is distinct (the worst case: two featurisations per pair). Prints model load time,
pairs/s for both, and the ratio to the 100 pairs/s target. ``--train`` also times a full rebuild
(scripts/train_ranker.py into a temporary folder; the 60-minute budget of the issue).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SHARED = Path(os.environ.get("VISTKIT_SHARED", ROOT.parent / "shared")) / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=15015)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train", action="store_true", help="also time a full rebuild of story-ranker-v1's model")
    ap.add_argument("--metric", default="story-ranker-v1", help="the ranker to time (default: story-ranker-v1)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from vistkit.data.readers import read_stories
    from vistkit.data.story import Story
    from vistkit.meta.human import build_reference_pairs
    from vistkit.metrics.base import get_metric

    refs = read_stories(SHARED / "pr-vist" / "PR_VIST.json.zip", system="human")
    pairs = []
    for name, path, field, key in (
        ("llava", SHARED / "dhm-visual-storytelling/data/stories/vist/llava_vc_p3.json", None, "story"),
        ("tapm", SHARED / "tapm-vist-outputs/vist/ours.json", None, "sequence"),
        ("pr-vist", SHARED / "pr-vist" / "PR_VIST.json.zip", "predicted_story", "story"),
    ):
        pairs += build_reference_pairs(refs, [read_stories(path, field=field, system=name)], key=key)
    pairs = pairs[: args.pairs]
    a = [p.story(1) for p in pairs]
    b = [p.story(2) for p in pairs]
    distinct = len({s.text for s in a + b})

    t = time.perf_counter()
    metric = get_metric(args.metric)
    load = time.perf_counter() - t
    t = time.perf_counter()
    metric.preference(a, b)
    shared_s = time.perf_counter() - t

    # worst case: every story distinct (the machine side paired with a shifted human side, made unique)
    a2 = [Story(story_id=str(i), text=f"{s.text} ({i})") for i, s in enumerate(a)]
    metric = get_metric(args.metric)  # fresh: nothing memoised
    t = time.perf_counter()
    metric.preference(a2, b)
    distinct_s = time.perf_counter() - t

    print(f"{args.metric}; device: CPU, torch threads {args.threads}; model load {load:.2f} s")
    for label, secs, d in (("proxy pairs", shared_s, distinct), ("all-distinct pairs", distinct_s, 2 * len(pairs))):
        rate = len(pairs) / secs
        print(f"{label}: {len(pairs)} pairs ({d} distinct stories) in {secs:.2f} s = {rate:,.0f} pairs/s "
              f"= {rate / 100:.1f}x the 100 pairs/s target")
    if args.train:
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            subprocess.run([sys.executable, str(ROOT / "scripts" / "train_ranker.py"), "--out", tmp], check=True,
                           stdout=subprocess.DEVNULL)
            print(f"full rebuild (scripts/train_ranker.py): {time.perf_counter() - t:.0f} s (budget 3,600 s)")


if __name__ == "__main__":
    main()
