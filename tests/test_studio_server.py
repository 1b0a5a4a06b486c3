"""The real server (uvicorn on loopback): judgements acknowledged before a kill -9 survive it, and the study
resumes after a restart (a small, fast version of bench/bench_studio.py)."""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

import pytest
from studio_helpers import make_study

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
pytest.importorskip("httpx", reason="the simulated annotators need httpx (studio extra)")

from sqlalchemy import func, select

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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_server_leaves_every_judgement_in_the_study_file(tmp_path: Path, sig: int) -> None:
    """SIGTERM (systemd, docker, kill) and SIGINT (Ctrl-C): the server checkpoints the write-ahead log on its way
    out, so the .db file alone, copied elsewhere, holds every acknowledged judgement."""
    import httpx
    from studio_helpers import read_page

    from vistkit.studio import db

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    made.study.close()
    port = simulate.free_port()
    proc = simulate.start_server(made.path, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for _ in range(2):
                page = read_page(client, made.tokens[0])
                r = client.post(
                    f"/a/{made.tokens[0]}/submit",
                    data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"},
                    headers={"accept": "application/json"},
                )
                assert r.json() == {"saved": True, "duplicate": False}
        assert Path(f"{made.path}-wal").stat().st_size > 0  # the judgements are in the log while it runs
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        simulate.kill(proc)
    assert not Path(f"{made.path}-wal").exists() or Path(f"{made.path}-wal").stat().st_size == 0
    copy = tmp_path / "copy" / "study.db"
    copy.parent.mkdir()
    shutil.copyfile(made.path, copy)  # the .db file alone
    st = db.open_study(copy)
    with st.read() as conn:
        assert conn.execute(select(func.count()).select_from(db.judgements)).scalar_one() == 2
    st.close()
