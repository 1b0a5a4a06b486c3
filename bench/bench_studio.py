"""Load and fault benchmark of `vistkit studio serve` (uvicorn on 127.0.0.1, SQLite in WAL mode).

1. Load: N concurrent simulated annotators (default 50) complete a rank study of ITEMS items x K annotators
   (default 200 x 5 = 1,000 judgements): throughput, p50/p95 latency of page loads and submissions, and a check
   that the database holds every acknowledged judgement exactly once.
2. Faults: a fresh study of the same size; the server is killed with SIGKILL after KILL_AT acknowledgements,
   restarted, the database is checked (every acknowledged judgement present, none twice), and the annotators
   resume (re-sending any submission whose answer they never saw) until the study is complete.

Run: ``python bench/bench_studio.py [--annotators 50 --items 200 --per-item 5 --kill-at 300 --json out.json]``.
Bounded: every phase has a deadline; the server is always killed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from vistkit.studio import db, service, simulate
from vistkit.studio.plan import PlanItem, PlanStory, create_study


def build(path: Path, *, items: int, per_item: int, annotators: int) -> list[tuple[str, str]]:
    """A rank study of ``items`` items x 3 stories (shipped human and LLaVA stories, and a shuffled human one)."""
    root = resources.files("vistkit.resources") / "demo"
    human = json.loads((root / "human_stories.json").read_text(encoding="utf-8"))
    llava = json.loads((root / "llava_stories.json").read_text(encoding="utf-8"))
    keys = sorted(human)
    rng = random.Random(0)
    plan = []
    for i in range(items):
        k = keys[i % len(keys)]
        words = human[k].split(" . ")
        rng.shuffle(words)
        plan.append(
            PlanItem(
                key=f"{k}-{i}",
                stories=[
                    PlanStory("human", k, human[k]),
                    PlanStory("llava", k, llava[k]),
                    PlanStory("shuffled", k, " . ".join(words)),
                ],
            )
        )
    create_study(path, task="rank", items=plan, per_item=per_item, seed=1)
    st = db.open_study(path)
    links = service.invite(st, n=annotators)
    st.engine.dispose()
    return links


def stats(res: simulate.RunResult) -> dict[str, Any]:
    p = simulate.percentile
    return {
        "seconds": res.seconds,
        "acknowledged": len(res.acked),
        "judgements_per_s": len(res.acked) / res.seconds if res.seconds else 0.0,
        "get_p50_ms": 1000 * p(res.get_latency, 50),
        "get_p95_ms": 1000 * p(res.get_latency, 95),
        "post_p50_ms": 1000 * p(res.post_latency, 50),
        "post_p95_ms": 1000 * p(res.post_latency, 95),
        "errors": len(res.errors),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--annotators", type=int, default=50)
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--per-item", type=int, default=5)
    ap.add_argument("--kill-at", type=int, default=300)
    ap.add_argument("--deadline", type=float, default=300.0, help="Seconds per phase at most.")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    target = args.items * args.per_item
    max_tasks = args.items  # an annotator can at most do every unit once
    out: dict[str, Any] = {
        "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}".strip(),
        "annotators": args.annotators,
        "items": args.items,
        "per_item": args.per_item,
        "target": target,
    }
    with tempfile.TemporaryDirectory(prefix="bench-studio-") as tmp:
        # ---- 1. load
        path = Path(tmp) / "load.db"
        links = build(path, items=args.items, per_item=args.per_item, annotators=args.annotators)
        names, tokens = [n for n, _ in links], [t for _, t in links]
        port = simulate.free_port()
        proc = simulate.start_server(path, port)
        try:
            res = asyncio.run(
                simulate.run_annotators(
                    f"http://127.0.0.1:{port}", tokens, max_tasks=max_tasks, seed=1, deadline=args.deadline
                )
            )
        finally:
            simulate.kill(proc, 15)
        check = simulate.verify(path, res.acked, names)
        out["load"] = {**stats(res), **{k: (len(v) if isinstance(v, list) else v) for k, v in check.items()}}
        ok_load = not check["missing"] and not check["wrong"] and not check["duplicated"]
        ok_load = ok_load and check["stored"] == target == check["acknowledged"]

        # ---- 2. kill -9 mid-run, restart, resume
        path = Path(tmp) / "fault.db"
        links = build(path, items=args.items, per_item=args.per_item, annotators=args.annotators)
        names, tokens = [n for n, _ in links], [t for _, t in links]
        proc = simulate.start_server(path, port)
        try:
            t_kill: list[float] = []

            def kill9() -> None:
                t_kill.append(time.perf_counter())
                simulate.kill(proc)

            first = asyncio.run(
                simulate.run_annotators(
                    f"http://127.0.0.1:{port}",
                    tokens,
                    max_tasks=max_tasks,
                    seed=2,
                    deadline=args.deadline,
                    stop_after_acks=args.kill_at,
                    on_stop=kill9,
                )
            )
        finally:
            simulate.kill(proc)
        killed_exit = proc.returncode
        after_kill = simulate.verify(path, first.acked, names)
        t0 = time.perf_counter()
        proc = simulate.start_server(path, port)
        restart_s = time.perf_counter() - t0
        try:
            second = asyncio.run(
                simulate.run_annotators(
                    f"http://127.0.0.1:{port}",
                    tokens,
                    max_tasks=max_tasks,
                    seed=3,
                    deadline=args.deadline,
                    pending=first.pending,
                )
            )
        finally:
            simulate.kill(proc, 15)
        final = simulate.verify(path, first.acked + second.acked, names)
        out["fault"] = {
            "killed_with": "SIGKILL",
            "server_exit": killed_exit,  # -9: killed by SIGKILL
            "acknowledged_before_kill": len(first.acked),
            "in_flight_at_kill": len(first.pending),
            "stored_after_kill": after_kill["stored"],
            "missing_after_kill": len(after_kill["missing"]),
            "wrong_after_kill": len(after_kill["wrong"]),
            "duplicated_after_kill": after_kill["duplicated"],
            "restart_seconds": restart_s,
            "resent_answered_duplicate": sum(a.duplicate for a in second.acked),
            "stored_final": final["stored"],
            "missing_final": len(final["missing"]),
            "duplicated_final": final["duplicated"],
            "resume": stats(second),
        }
        ok_fault = (
            not after_kill["missing"]
            and not after_kill["wrong"]
            and not after_kill["duplicated"]
            and not final["missing"]
            and not final["wrong"]
            and not final["duplicated"]
            and final["stored"] == target
        )
    out["ok"] = bool(ok_load and ok_fault)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
