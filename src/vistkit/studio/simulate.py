"""Simulated annotators against a real studio server (loopback): the load/fault benchmark and its test use this.

Each simulated annotator opens its invite link, reads the task form (assignment, CSRF token, number of
stories), submits a random valid answer and records what the server acknowledged. Everything is bounded: a
maximum number of tasks per annotator, HTTP timeouts, and a deadline.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ASSIGN = re.compile(r'name="assignment" value="(\d+)"')
_CSRF = re.compile(r'name="csrf" value="(\w+)"')
_ASPECT = re.compile(r'type="radio" name="(\w+)" value="1"')


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(study: str | Path, port: int, *, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """``vistkit studio serve STUDY --port PORT`` in a child process, once it answers ``/healthz``."""
    import httpx

    code = "import sys; from vistkit.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "studio", "serve", str(study), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"the studio server exited with {proc.returncode}: {err[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    kill(proc)
    raise RuntimeError(f"the studio server did not answer on port {port} within {timeout:.0f} s")


def kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (kill -9 by default) to the server and reap it."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    proc.wait(timeout=30)


@dataclass
class Ack:
    """A submission the server acknowledged: annotator, assignment, form sent, and whether it was a duplicate."""

    annotator: int
    assignment: int
    form: dict[str, str]
    duplicate: bool


@dataclass
class RunResult:
    """What a simulated run saw: acknowledgements, unanswered submissions, latencies, errors, finished annotators."""

    acked: list[Ack] = field(default_factory=list)
    pending: dict[int, dict[str, str]] = field(default_factory=dict)  # annotator -> form sent, no answer seen
    get_latency: list[float] = field(default_factory=list)
    post_latency: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)
    seconds: float = 0.0


def _answer(html: str, rng: random.Random) -> dict[str, str]:
    n = html.count('class="story" draggable')
    if n:
        pos = list(range(1, n + 1))
        rng.shuffle(pos)
        return {"ranking": ",".join(map(str, pos))}
    if 'name="choice"' in html:
        return {"choice": rng.choice(["A", "B", "same"] if 'value="same"' in html else ["A", "B"])}
    return {a: str(rng.randint(1, 5)) for a in _ASPECT.findall(html)}


async def _post(client: Any, url: str, form: dict[str, str], res: RunResult) -> dict[str, Any] | None:
    t = time.perf_counter()
    r = await client.post(url, data=form, headers={"accept": "application/json"})
    res.post_latency.append(time.perf_counter() - t)
    if r.status_code != 200:
        res.errors.append(f"POST {r.status_code}: {r.text[:200]}")
        return None
    return dict(r.json())


async def _annotator(
    client: Any,
    base: str,
    n: int,
    token: str,
    res: RunResult,
    *,
    max_tasks: int,
    rng: random.Random,
    stop: asyncio.Event,
) -> None:
    import httpx

    url = f"{base}/a/{token}"
    form = res.pending.pop(n, None)
    try:
        if form is not None:  # a submission whose answer was lost: send it again (idempotent)
            res.pending[n] = form
            ack = await _post(client, f"{url}/submit", form, res)
            res.pending.pop(n, None)
            if ack is not None:
                res.acked.append(Ack(n, int(form["assignment"]), form, bool(ack["duplicate"])))
        for _ in range(max_tasks):
            if stop.is_set():
                return
            t = time.perf_counter()
            r = await client.get(url)
            res.get_latency.append(time.perf_counter() - t)
            if r.status_code != 200:
                res.errors.append(f"GET {r.status_code}")
                return
            m = _ASSIGN.search(r.text)
            if m is None:
                res.finished.add(n)
                return
            csrf = _CSRF.search(r.text)
            form = {"assignment": m.group(1), "csrf": csrf.group(1) if csrf else "", **_answer(r.text, rng)}
            res.pending[n] = form
            ack = await _post(client, f"{url}/submit", form, res)
            res.pending.pop(n, None)
            if ack is None:
                return
            res.acked.append(Ack(n, int(form["assignment"]), form, bool(ack["duplicate"])))
    except (httpx.TransportError, httpx.RemoteProtocolError):
        return  # the server went away; `pending` keeps the unanswered submission


async def run_annotators(
    base: str,
    tokens: list[str],
    *,
    max_tasks: int,
    seed: int = 0,
    deadline: float = 300.0,
    stop_after_acks: int | None = None,
    on_stop: Any = None,
    pending: dict[int, dict[str, str]] | None = None,
    expected: int | None = None,
) -> RunResult:
    """Run one coroutine per token concurrently; with ``stop_after_acks``, call ``on_stop()`` (e.g. kill -9 the
    server) once that many judgements were acknowledged. Progress (acknowledged judgements of ``expected``, when
    known) shows on stderr (`vistkit.progress`)."""
    import httpx

    from vistkit import progress

    res = RunResult(pending=dict(pending or {}))
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=len(tokens) + 4, max_keepalive_connections=len(tokens) + 4)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as client:
        workers = [
            asyncio.create_task(
                _annotator(
                    client, base, n, tok, res, max_tasks=max_tasks, rng=random.Random(seed * 1000 + n), stop=stop
                )
            )
            for n, tok in enumerate(tokens)
        ]

        async def watch() -> None:
            while stop_after_acks is not None and len(res.acked) < stop_after_acks:
                if all(w.done() for w in workers):
                    return
                await asyncio.sleep(0.005)
            if stop_after_acks is not None and on_stop is not None:
                await asyncio.get_running_loop().run_in_executor(None, on_stop)

        async def report(task: progress.Task) -> None:
            while True:
                task.update(len(res.acked))
                await asyncio.sleep(0.25)

        watcher = asyncio.create_task(watch())
        with progress.task("simulated annotators", expected, unit="judgements", verb="acknowledged") as task:
            reporter = asyncio.create_task(report(task))
            await asyncio.wait(workers, timeout=deadline)
            reporter.cancel()
            task.update(len(res.acked))
        stop.set()
        for w in workers:
            if not w.done():
                w.cancel()
                res.errors.append("deadline reached")
        watcher.cancel()
    res.seconds = time.perf_counter() - t0
    return res


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (NaN when empty)."""
    import numpy as np

    return float(np.percentile(np.array(values), q)) if values else float("nan")


def verify(study: str | Path, acked: list[Ack], names: list[str]) -> dict[str, Any]:
    """Check the database against what the clients saw acknowledged: every acknowledged judgement stored, with
    the annotator and answer sent (rank studies), none twice. ``names[n]`` is the name behind token ``n``."""
    import json

    from sqlalchemy import select

    from vistkit.studio import db

    st = db.open_study(study)
    try:
        with st.read() as conn:
            rows = conn.execute(
                select(
                    db.judgements.c.assignment_id,
                    db.judgements.c.unit_id,
                    db.judgements.c.answer,
                    db.annotators.c.name,
                    db.assignments.c.story_order,
                )
                .join(db.annotators, db.annotators.c.id == db.judgements.c.annotator_id)
                .join(db.assignments, db.assignments.c.id == db.judgements.c.assignment_id)
            ).all()
            target = len(conn.execute(select(db.assignments.c.id)).all())
    finally:
        st.engine.dispose()
    stored = {r.assignment_id: r for r in rows}
    missing, wrong = [], []
    for ack in acked:
        r = stored.get(ack.assignment)
        if r is None:
            missing.append(ack.assignment)
            continue
        if r.name != names[ack.annotator]:
            wrong.append(ack.assignment)
        elif "ranking" in ack.form:
            ranks = json.loads(r.answer)["ranks"]
            order = json.loads(r.story_order)
            shown = ",".join(str(order.index(int(s)) + 1) for s in sorted(ranks, key=lambda s: ranks[s]))
            if shown != ack.form["ranking"]:
                wrong.append(ack.assignment)
    pairs = [(r.name, r.unit_id) for r in rows]
    return {
        "stored": len(rows),
        "target": target,
        "acknowledged": len({a.assignment for a in acked}),
        "missing": missing,
        "wrong": wrong,
        "duplicated": len(pairs) - len(set(pairs)),
    }
