"""The real server (uvicorn on loopback): judgements acknowledged before a kill -9 survive it, and the study
resumes after a restart (a small, fast version of bench/bench_studio.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from studio_helpers import make_study

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
pytest.importorskip("httpx", reason="the simulated annotators need httpx (studio extra)")

from vistkit.studio import simulate


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_judgement_and_the_study_resumes(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=8, per_item=2, annotators=6)  # 16 judgements to collect
    made.study.engine.dispose()
    port = simulate.free_port()
    base = f"http://127.0.0.1:{port}"
    proc = simulate.start_server(made.path, port)
    try:
        first = asyncio.run(
            simulate.run_annotators(
                base,
                made.tokens,
                max_tasks=8,
                seed=1,
                deadline=60,
                stop_after_acks=5,
                on_stop=lambda: simulate.kill(proc),
            )
        )
    finally:
        simulate.kill(proc)
    assert proc.returncode == -9  # it really was killed, not shut down
    assert 5 <= len(first.acked) < 16
    check = simulate.verify(made.path, first.acked, made.names)
    assert check["missing"] == [] and check["wrong"] == [] and check["duplicated"] == 0
    assert check["stored"] >= len(first.acked)  # a submission may be stored without its answer arriving

    proc = simulate.start_server(made.path, port)
    try:
        second = asyncio.run(
            simulate.run_annotators(base, made.tokens, max_tasks=8, seed=2, deadline=60, pending=first.pending)
        )
    finally:
        simulate.kill(proc, 15)
    assert second.errors == []
    acked = first.acked + second.acked
    check = simulate.verify(made.path, acked, made.names)
    assert check["missing"] == [] and check["wrong"] == [] and check["duplicated"] == 0
    assert check["stored"] == check["target"] == 16 == check["acknowledged"]
    assert second.finished == set(range(6))  # everyone was told there is nothing left
