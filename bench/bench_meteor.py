"""Benchmark: ``meteor-vist`` on the full VIST challenge test set vs the per-pair Meteor jar protocol.

Reference = what a faithful wrapper of the jar does: ``java -jar meteor-1.5.jar - - -stdio -t hter``, then for
each (hypothesis, reference) pair one ``SCORE`` and one ``EVAL`` round trip (4,846 pairs for TAPM's ours.json
on the 1,936 challenge sequences of the shared data). vistkit = the shared helper JVM (Meteor's API, one
batch, multithreaded). Both give identical scores (checked here, pair by pair).

Prints, from ONE run: JVM start, table load (each side), scoring time (each side), totals and the ratios.

    .venv/bin/python bench/bench_meteor.py [--limit N]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

DATA = Path(os.environ.get("VISTKIT_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="score only the first N sequences (0 = all)")
    args = ap.parse_args()

    from vistkit import java
    from vistkit.data.readers import read_stories, read_template
    from vistkit.data.story import StorySet
    from vistkit.metrics.base import align, get_metric

    hyps = read_stories(DATA / "tapm-vist-outputs/vist/ours.json")
    refs = read_stories(DATA / "pr-vist/PR_VIST.json.zip")
    template = read_template(DATA / "vist-challenge-naacl2018/vist-challenge-template.json")
    if args.limit:
        hyps = StorySet(list(hyps)[: args.limit])
    alignment = align(hyps, refs, keying="sequence", template=template)
    tests = [it.hypothesis.text for it in alignment.items for _ in it.references]
    gold = [r.text for it in alignment.items for r in it.references]
    print(f"{len(alignment.items)} sequences, {len(tests)} pairs; java {java.require_java().version_text}")
    print(f"machine: {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}")

    # ---- vistkit: shared helper JVM --------------------------------------------------------------------
    t0 = time.perf_counter()
    server = java.meteor_server()
    t_start = time.perf_counter() - t0
    info = server.config(java.MeteorConfig(task="hter"))
    t_cold = time.perf_counter() - t0
    metric = get_metric("meteor-vist")
    t1 = time.perf_counter()
    score = metric.score(hyps, refs, key="sequence", template=template, require_all=not args.limit)
    t_ours = time.perf_counter() - t1
    ours_pairs = server.pair_scores(java.MeteorConfig(task="hter"), tests, gold)
    print(
        f"vistkit: JVM start {t_start:.2f} s (helper compile {server.compile_seconds:.2f} s, cached after "
        f"the first run), paraphrase-table load {info.load_seconds:.2f} s, "
        f"scoring {t_ours:.2f} s ({server.threads} thread(s)); corpus {score.corpus!r}"
    )

    # ---- reference: per-pair stdio protocol ------------------------------------------------------------
    t0 = time.perf_counter()
    ref = java.StdioMeteor(java.MeteorConfig(task="hter"))
    ref.pair_scores(["warm up"], ["warm up"])  # the first answer comes after the table load
    t_ref_load = time.perf_counter() - t0
    t1 = time.perf_counter()
    ref_pairs = ref.pair_scores(tests, gold)
    t_ref = time.perf_counter() - t1
    ref.close()
    java.shutdown()

    same = ours_pairs == ref_pairs
    worst = max(abs(a - b) for a, b in zip(ours_pairs, ref_pairs, strict=True))
    print(f"jar stdio per pair: JVM start + table load {t_ref_load:.2f} s, scoring {t_ref:.2f} s")
    print(f"identical pair scores: {same} (max |diff| {worst:.3g})")
    print(f"scoring (warm JVM): jar {t_ref:.2f} s / vistkit {t_ours:.2f} s = {t_ref / t_ours:.2f}x faster")
    cold_ours = t_cold + t_ours
    cold_ref = t_ref_load + t_ref
    ratio = cold_ref / cold_ours
    print(f"cold (start + load + score): jar {cold_ref:.2f} s / vistkit {cold_ours:.2f} s = {ratio:.2f}x")


if __name__ == "__main__":
    main()
