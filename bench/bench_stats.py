"""Paired significance tests on BLEU: vistkit.scores.stats against sacreBLEU's own PairedTest, ONE run each.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_stats.py [--bootstrap 1000] [--randomisation 10000]

TAPM vs its joint_ss ablation (VIST test, 1,999 sequences shared with the PR-VIST human references, 1-5 per
sequence). Both sides include extracting the BLEU statistics of both systems; the p-values must be equal (the
script stops with an error otherwise).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

DATA = Path(os.environ.get("VISTKIT_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap resamples")
    ap.add_argument("--randomisation", type=int, default=10000, help="approximate randomisation trials")
    args = ap.parse_args(argv)

    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    from vistkit.data.readers import read_stories
    from vistkit.metrics.sacrebleu_bleu import SacreBleu
    from vistkit.scores import stats

    os.environ["SACREBLEU_SEED"] = "12345"
    refs = read_stories(DATA / "pr-vist" / "PR_VIST.json.zip")
    vist = DATA / "tapm-vist-outputs" / "vist"
    a = read_stories(vist / "ours.json")
    b = read_stories(vist / "joint_ss.json")
    grouped = refs.group("sequence")
    keys = [s.sequence for s in a if s.sequence in grouped]
    b_by = b.by_key("sequence")
    a_by = a.by_key("sequence")
    keys = [k for k in keys if k in b_by]
    ref_lists = [[r.text for r in grouped[k]] for k in keys]
    width = max(map(len, ref_lists))
    streams = [[rs[j] if j < len(rs) else None for rs in ref_lists] for j in range(width)]
    hyp_a = [a_by[k].text for k in keys]
    hyp_b = [b_by[k].text for k in keys]
    print(f"{len(keys)} items")
    for test, n in (("bs", args.bootstrap), ("ar", args.randomisation)):
        t0 = time.perf_counter()
        pt = PairedTest([("a", hyp_a), ("b", hyp_b)], {"BLEU": BLEU()}, streams, test_type=test, n_samples=n)
        _, res = pt()
        t_theirs = time.perf_counter() - t0
        t0 = time.perf_counter()
        metric = SacreBleu()
        sa = metric.score(a.filter(keys, "sequence"), refs, key="sequence")
        sb = metric.score(b.filter(keys, "sequence"), refs, key="sequence")
        ours = stats.paired_test(sa, sb, test=test, n_samples=n, seed=12345)
        t_ours = time.perf_counter() - t0
        p_theirs = res["BLEU"][1].p_value
        print(f"{test} n={n}: sacrebleu {t_theirs:.2f} s p={p_theirs:.6f}")
        print(f"  vistkit {t_ours:.2f} s p={ours.p_value:.6f}")
        print(f"  ratio (sacrebleu / vistkit) {t_theirs / t_ours:.2f}")
        if ours.p_value != p_theirs:
            raise SystemExit(f"{test}: vistkit's p-value {ours.p_value!r} differs from sacreBLEU's {p_theirs!r}")


if __name__ == "__main__":
    main()
