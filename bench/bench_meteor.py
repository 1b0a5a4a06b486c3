"""Benchmark: ``meteor-vist`` on the full VIST challenge test set vs the per-pair Meteor jar protocol.

Reference = what a faithful wrapper of the jar does: ``java -jar meteor-1.5.jar - - -stdio -t hter``, then for
each (hypothesis, reference) pair one ``SCORE`` and one ``EVAL`` round trip (4,846 pairs for TAPM's ours.json
on the 1,936 challenge sequences of the shared data). vistkit = the shared helper JVM (Meteor's API, one
batch, multithreaded, memoised synonym stage and stems). Both give identical scores (asserted, pair by pair).

Prints, from ONE run (with the load average of the machine): each side's JVM start + table load (separately),
then alternating rounds of both in warm JVMs that have loaded their tables: round 1 is each side's FIRST
scoring pass after the table load (the issue's protocol: the jar's first pass carries its JIT warm-up), the
later rounds are warm; the first-pass ratio, the best warm ratio, and the cold ratio (start + load + first).

Then (``--cold N``, default 3) the END-TO-END cold comparison of issue 12: the jar = a new
``java -jar meteor-1.5.jar - - -stdio -t hter`` process from its start to the last per-pair answer (table load
included; reading the stories, done by Python beforehand, not counted); vistkit = a new ``vistkit score
ours.json --references PR_VIST.json.zip --template ... --metrics meteor-vist`` process from the command line
(Python start, imports, reading the files, helper JVM start, table load and scoring all included), with the
compact paraphrase table already cached (built once per user; the one-time build is timed separately first, in
a fresh cache directory). N alternating runs of each; best and median, and the ratio jar / vistkit. The CLI's
per-item scores are checked against the jar's, pair maxima, bit for bit.

    .venv/bin/python bench/bench_meteor.py [--limit N] [--rounds R] [--systems ''] [--cold N] [--cold-only]
    (VISTKIT_METEOR_THREADS=k sets the helper's threads, VISTKIT_JAVA_OPTS its JVM options)
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vistkit.data.story import StorySet

DATA = Path(os.environ.get("VISTKIT_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (5 min {five:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="score only the first N sequences (0 = all)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timed rounds of each side (>= 2)")
    ap.add_argument(
        "--systems", default="ours,no_ss,joint_ss", help="TAPM systems for the multi-system run ('' = skip)"
    )
    ap.add_argument("--cold", type=int, default=3, help="end-to-end cold runs of each side (0 = skip)")
    ap.add_argument("--cold-only", action="store_true", help="only the end-to-end cold comparison")
    args = ap.parse_args()
    args.rounds = max(2, args.rounds)
    if args.cold_only:
        cold_end_to_end(max(1, args.cold))
        return

    from vistkit.data.readers import read_stories, read_template
    from vistkit.data.story import StorySet
    from vistkit.metrics.base import align, get_metric
    from vistkit.models import java

    hyps = read_stories(DATA / "tapm-vist-outputs/vist/ours.json")
    refs = read_stories(DATA / "pr-vist/PR_VIST.json.zip")
    template = read_template(DATA / "vist-challenge-naacl2018/vist-challenge-template.json")
    if args.limit:
        hyps = StorySet(list(hyps)[: args.limit])
    alignment = align(hyps, refs, keying="sequence", template=template)
    tests = [it.hypothesis.text for it in alignment.items for _ in it.references]
    gold = [r.text for it in alignment.items for r in it.references]
    print(f"{len(alignment.items)} sequences, {len(tests)} pairs; java {java.require_java().version_text}")
    print(f"machine: {os.cpu_count()} CPU(s), {load()}")

    # ---- start both JVMs (each loads Meteor's English tables once) ----------------------------------------
    cfg = java.MeteorConfig(task="hter")
    t0 = time.perf_counter()
    server = java.MeteorServer()
    t_start = time.perf_counter() - t0
    info = server.config(cfg)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    jar = java.StdioMeteor(cfg)
    jar.pair_scores(["warm up"], ["warm up"])  # the first answer comes after the table load
    t_jar_load = time.perf_counter() - t0
    print(
        f"vistkit helper: JVM start {t_start:.2f} s (+ helper compile {server.compile_seconds:.2f} s, cached "
        f"after the first run), table load {info.load_seconds:.2f} s; {server.threads} scoring thread(s), "
        f"JVM options {' '.join(java.helper_jvm_options())}"
    )
    print(f"jar -stdio: JVM start + table load {t_jar_load:.2f} s ({load()})")

    import vistkit.models.java as vj

    vj._SERVER = server  # the metric uses this server
    metric = get_metric("meteor-vist", prefetch=False)

    def ours() -> tuple[float, list[float]]:
        t = time.perf_counter()
        score = metric.score(hyps, refs, key="sequence", template=template, require_all=not args.limit)
        return time.perf_counter() - t, list(score.item_scores)

    def theirs() -> tuple[float, list[float]]:
        t = time.perf_counter()
        pairs = jar.pair_scores(tests, gold)
        it = iter(pairs)
        best = [max(next(it) for _ in item.references) for item in alignment.items]
        return time.perf_counter() - t, best

    # alternate the two (both JVMs loaded) so that load changes on the machine hit both alike
    t_ours: list[float] = []
    t_jar: list[float] = []
    for r in range(args.rounds):
        a, ours_items = ours()
        b, jar_items = theirs()
        t_ours.append(a)
        t_jar.append(b)
        what = "first pass after the table load" if r == 0 else "warm"
        print(f"  round {r + 1} ({what}): vistkit {a:.2f} s, jar per pair {b:.2f} s ({load()})")
    ours_pairs = server.pair_scores(cfg, tests, gold)
    jar_pairs = jar.pair_scores(tests, gold)
    jar.close()
    server.close()

    same_pairs, same_items = ours_pairs == jar_pairs, ours_items == jar_items
    print(f"identical pair scores ({len(tests)}): {same_pairs}; identical item scores: {same_items}")
    print(f"meteor-vist corpus {float(np.mean(ours_items))!r}")
    print(f"table load (JVM start + load): jar {t_jar_load:.2f} s, vistkit {t_cold:.2f} s")
    print(
        f"first scoring pass after the table load: jar {t_jar[0]:.2f} s / vistkit {t_ours[0]:.2f} s "
        f"= {t_jar[0] / t_ours[0]:.2f}x"
    )
    best_ours, best_jar = min(t_ours[1:]), min(t_jar[1:])
    print(
        f"best warm round of {args.rounds - 1}: jar {best_jar:.2f} s / vistkit {best_ours:.2f} s "
        f"= {best_jar / best_ours:.2f}x"
    )
    first = t_jar_load + t_jar[0]
    mine = t_cold + t_ours[0]
    print(
        f"cold (start + load + first scoring): jar {first:.2f} s / vistkit {mine:.2f} s = {first / mine:.2f}x"
    )
    if not (same_pairs and same_items):
        raise SystemExit("scores differ from the jar's")
    if args.systems and not args.limit:
        systems_scenario(args.systems.split(","), refs, template)
    if args.cold and not args.limit:
        cold_end_to_end(args.cold)


def cold_end_to_end(runs: int) -> None:
    """New processes only: the jar's per-pair protocol vs ``vistkit score`` from the command line."""
    import statistics
    import subprocess
    import sys
    import tempfile

    from vistkit.data.readers import read_stories, read_template
    from vistkit.metrics.base import align
    from vistkit.models import java

    hyps_path = DATA / "tapm-vist-outputs/vist/ours.json"
    refs_path = DATA / "pr-vist/PR_VIST.json.zip"
    tpl_path = DATA / "vist-challenge-naacl2018/vist-challenge-template.json"
    items = align(read_stories(hyps_path), read_stories(refs_path), keying="sequence",
                  template=read_template(tpl_path)).items
    tests = [it.hypothesis.text for it in items for _ in it.references]
    gold = [r.text for it in items for r in it.references]
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cli = [sys.executable, "-c", "import sys; from vistkit.cli import main; sys.exit(main(sys.argv[1:]))"]

    def ours(out: Path, extra_env: dict[str, str] | None = None) -> float:
        t = time.perf_counter()
        subprocess.run(
            [*cli, "score", str(hyps_path), "--references", str(refs_path), "--template", str(tpl_path),
             "--metrics", "meteor-vist", "--per-item", str(out), "--format", "json"],
            env={**env, **(extra_env or {})}, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - t

    def theirs() -> tuple[float, list[float]]:
        t = time.perf_counter()
        jar = java.StdioMeteor(java.MeteorConfig(task="hter"))
        pairs = jar.pair_scores(tests, gold)
        jar.close()
        return time.perf_counter() - t, pairs

    print(f"\nEND TO END, cold (new processes), {len(items)} sequences, {len(tests)} pairs ({load()})")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        t_build = ours(fresh / "build.csv", {"VISTKIT_METEOR_TABLE_CACHE": str(fresh / "tables")})
        size = sum(f.stat().st_size for f in (fresh / "tables").glob("*.bin"))
        print(f"  one-time build (fresh cache, whole run incl. build): vistkit {t_build:.2f} s; cache "
              f"{size / 1e6:.0f} MB ({load()})")
        ours(fresh / "warm.csv")  # the user's cache: built here if it is not yet
        t_ours: list[float] = []
        t_jar: list[float] = []
        jar_pairs: list[float] = []
        for r in range(runs):
            a = ours(fresh / f"run{r}.csv")
            b, jar_pairs = theirs()
            t_ours.append(a)
            t_jar.append(b)
            print(f"  run {r + 1}: jar {b:.2f} s, vistkit {a:.2f} s = {b / a:.2f}x ({load()})")
        rows = (fresh / "run0.csv").read_text().splitlines()[1:]
        got = {r.split(",")[0]: float(r.split(",")[1]) for r in rows}
    it = iter(jar_pairs)
    expected = {item.item_id: max(next(it) for _ in item.references) for item in items}
    same = got == expected
    print(f"  identical per-sequence scores, CLI vs jar ({len(expected)}): {same}")
    bj, bo = min(t_jar), min(t_ours)
    mj, mo = statistics.median(t_jar), statistics.median(t_ours)
    print(f"  best: jar {bj:.2f} s / vistkit {bo:.2f} s = {bj / bo:.2f}x; "
          f"median: jar {mj:.2f} s / vistkit {mo:.2f} s = {mj / mo:.2f}x")
    if not same:
        raise SystemExit("scores differ from the jar's")


def systems_scenario(names: list[str], refs: StorySet, template: list[str]) -> None:
    """Several systems in one run: one vistkit JVM vs one jar process per system (as EvalVIST.jar runs)."""
    from vistkit.data.readers import read_stories
    from vistkit.metrics.base import align, get_metric
    from vistkit.models import java

    systems = {n: read_stories(DATA / f"tapm-vist-outputs/vist/{n}.json") for n in names}
    cfg = java.MeteorConfig(task="hter")
    t0 = time.perf_counter()
    ours = {}
    java.shutdown()
    metric = get_metric("meteor-vist", prefetch=False)
    for n, hyps in systems.items():
        ours[n] = metric.score(hyps, refs, key="sequence", template=template, require_all=True).corpus
    t_ours = time.perf_counter() - t0
    java.shutdown()
    t0 = time.perf_counter()
    theirs = {}
    for n, hyps in systems.items():
        items = align(hyps, refs, keying="sequence", template=template).items
        jar = java.StdioMeteor(cfg)
        pairs = iter(
            jar.pair_scores(
                [i.hypothesis.text for i in items for _ in i.references],
                [r.text for i in items for r in i.references],
            )
        )
        jar.close()
        theirs[n] = float(np.mean([max(next(pairs) for _ in i.references) for i in items]))
    t_jar = time.perf_counter() - t0
    print(f"{len(names)} systems ({', '.join(names)}), cold, including every JVM start and table load:")
    print(
        f"  one jar process per system {t_jar:.2f} s / vistkit one JVM {t_ours:.2f} s = {t_jar / t_ours:.2f}x"
    )
    same = all(abs(ours[n] - theirs[n]) < 1e-12 for n in names)
    print(f"  same corpus scores: {same} ({', '.join(f'{n} {ours[n]:.6f}' for n in names)})")


if __name__ == "__main__":
    main()
