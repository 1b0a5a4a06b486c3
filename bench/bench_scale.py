"""Scaling: throughput and peak memory of the local engine and the Ray engine (1 and 2 local workers) on
10^4, 10^5 and 10^6 synthetic stories generated on the fly (never stored), streamed through
``Engine.score_stream`` in shards.

    .venv/bin/python bench/bench_scale.py --sizes 10000,100000,1000000 --metric rovist-nr
    .venv/bin/python bench/bench_scale.py --sizes 1000,10000 --metric coherence
    .venv/bin/python bench/bench_scale.py ... --address auto        # an existing (multi-node) Ray cluster

Each (engine, size) runs in a fresh Python process so that its peak memory is its own: the driver's peak
resident set (``ru_maxrss``) and each Ray worker's. Memory must stay flat as the input grows: the driver
holds at most 2 x workers shards in flight plus 8 bytes of score per story. Stories are five sentences of
8-14 words drawn from a fixed vocabulary by a seeded generator (so every engine scores the same stories);
per-item results go to a sink that keeps nothing, as a per-item CSV writer would. The corpus scores of all
engines at one size are printed side by side; the script ends with an error when they differ or an engine failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = (
    "the a family friends we they went to beach park city party dinner dog cat baby little old happy sunny "
    "day night time home house car road tree water boat game played ate drank saw took photo picture great "
    "fun long walk together everyone finally then after later first was were had very really all of and"
).split()


def synthetic_items(n: int, *, seed: int = 0) -> Iterator[object]:
    """``n`` reference-free items, generated lazily (stories 5 x 8-14 words; ids ``s<i>``)."""
    import numpy as np

    from vistkit.data.story import Story
    from vistkit.metrics.base import Item

    rng = np.random.default_rng(seed)
    vocab = np.array(WORDS)
    block = 1000
    for start in range(0, n, block):
        m = min(block, n - start)
        lengths = rng.integers(8, 15, size=(m, 5))
        picks = rng.integers(0, len(vocab), size=(m, 5, 14))
        for i in range(m):
            sents = tuple(
                " ".join(vocab[picks[i, j, : lengths[i, j]]]).capitalize() + "." for j in range(5)
            )
            sid = f"s{start + i}"
            yield Item(sid, Story(sid, " ".join(sents), sentences=sents))


def run_one(metric_name: str, n: int, engine_kind: str, batch: int, address: str | None) -> dict[str, object]:
    """One measured run in this process."""
    from vistkit.engine import make_engine

    t0 = time.perf_counter()
    if engine_kind == "local":
        eng = make_engine("local")
        workers = 0
    else:
        workers = int(engine_kind.removeprefix("ray"))
        eng = make_engine("ray", workers=workers, address=address)
    with eng:
        metric = eng.metric(metric_name)
        signature = metric.signature(keying="story")
        if engine_kind != "local":
            eng.worker_pids()  # start the actors
            eng.call_one("score", metric_name, {}, list(synthetic_items(2, seed=99)), signature)  # load models
            for a in eng.actors[1:]:
                eng.ray.get(a.score.remote(metric_name, {}, list(synthetic_items(2, seed=99)), signature))
        else:
            metric.score_items(list(synthetic_items(2, seed=99)), signature=signature)  # load models
        startup = time.perf_counter() - t0
        rows = [0]

        def sink(part: object) -> None:  # a per-item writer that keeps nothing
            rows[0] += len(part.item_ids)  # type: ignore[attr-defined]

        t1 = time.perf_counter()
        totals = eng.score_stream(  # type: ignore[attr-defined]
            metric, synthetic_items(n), signature=signature, batch_size=batch, on_part=sink
        )
        seconds = time.perf_counter() - t1
        worker_peaks = eng.worker_peak_rss() if engine_kind != "local" else []  # type: ignore[attr-defined]
    assert rows[0] == n == totals.n_items
    return {
        "metric": metric_name,
        "stories": n,
        "engine": engine_kind,
        "workers": workers,
        "batch": batch,
        "startup_s": round(startup, 2),
        "seconds": round(seconds, 2),
        "stories_per_s": round(n / seconds, 1),
        "driver_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "worker_peak_mib": [round(p / 2**20, 1) for p in worker_peaks],
        "corpus": totals.corpus(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--metric", default="rovist-nr")
    ap.add_argument("--engines", default="local,ray1,ray2")
    ap.add_argument("--batch", type=int, default=1000, help="stories per shard")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: a new local cluster)")
    ap.add_argument("--json", type=Path, default=None, help="append each result as a JSON line here")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    if args.one:
        print(json.dumps(run_one(args.metric, sizes[0], args.engines, args.batch, args.address)))
        return
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    header = "| metric | stories | engine | stories/s | run s | start s | driver peak MiB | worker peak MiB | corpus |"
    print(header)
    print("|" + "---|" * 9)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    problems: list[str] = []
    for n in sizes:
        corpus: dict[str, float] = {}
        for kind in args.engines.split(","):
            cmd = [sys.executable, __file__, "--one", "--sizes", str(n), "--metric", args.metric,
                   "--engines", kind, "--batch", str(args.batch)]
            if args.address:
                cmd += ["--address", args.address]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"| {args.metric} | {n} | {kind} | failed: {out.stderr.strip()[-300:]} |", flush=True)
                problems.append(f"{n:,} stories: engine {kind} failed (exit {out.returncode})")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            corpus[kind] = r["corpus"]
            print(
                f"| {r['metric']} | {n:,} | {kind} | {r['stories_per_s']:,} | {r['seconds']} | {r['startup_s']} | "
                f"{r['driver_peak_mib']} | {', '.join(str(x) for x in r['worker_peak_mib']) or '-'} | "
                f"{r['corpus']:.10f} |",
                flush=True,
            )
            if args.json:
                with open(args.json, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(r) + "\n")
        if len(set(corpus.values())) > 1:
            problems.append(f"{n:,} stories: corpus scores differ between engines ({corpus})")
    if problems:
        raise SystemExit("bench_scale: " + "; ".join(problems))


if __name__ == "__main__":
    main()
