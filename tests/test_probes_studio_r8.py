"""Fault probes, round 8: the studio server losing data or going unresponsive under faults.

Each test names the class of problem it guards: the study's ``-wal`` or ``-shm`` file deleted, moved or replaced
under a running server (answers acknowledged and then lost at a kill -9), a full disk (a file-size limit) during
a write, two servers and the read-only verbs on one study at once, a client that resends a submission whose
answer it never saw, stop/continue/terminate/hang-up signals, study paths with spaces, non-ASCII characters or a
symlink, and request bodies and connections that are too large, malformed, too many or too slow.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from studio_helpers import count, make_study, read_page

from vistkit.studio import db, simulate

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
httpx = pytest.importorskip("httpx", reason="the studio tests need httpx (studio extra)")

JSON = {"accept": "application/json"}
CLI = "import sys; from vistkit.cli import main; sys.exit(main(sys.argv[1:]))"


def _start(
    study: Path, port: int, *, preexec: Callable[[], None] | None = None, extra: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """`vistkit studio serve` in a child process (``preexec`` runs in the child first: limits, signals), once it
    answers /healthz; `simulate.start_server` where nothing special is needed."""
    if preexec is None and not extra:
        return simulate.start_server(study, port)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "studio", "serve", str(study), "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode(errors="replace") if proc.stderr else "exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    simulate.kill(proc)
    raise RuntimeError("the server did not start")


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> str:
    """Stop the server with ``sig`` (kill -9 after 20 s) and return its log."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        simulate.kill(proc)
    return proc.stderr.read().decode(errors="replace") if proc.stderr else ""


def _post(client: httpx.Client, token: str, answer: str = "1,2,3") -> httpx.Response:
    page = read_page(client, token)
    if page.assignment is None:  # the task page itself was refused (503 while claiming)
        return httpx.Response(page.status, text=page.html)
    form = {"assignment": page.assignment, "csrf": page.csrf or "", "ranking": answer}
    return client.post(f"/a/{token}/submit", data=form, headers=JSON)


def _stored(path: Path) -> int:
    st = db.open_study(path)
    try:
        return count(st, db.judgements)
    finally:
        st.engine.dispose()


@pytest.fixture
def study(tmp_path: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    made = make_study(tmp_path, n_items=6, per_item=1, annotators=6)
    made.study.close()
    yield made.path, made.tokens, made.names


# ------------------------------------------------------------------------------------------- the -wal / -shm files
@pytest.mark.parametrize("change", ["delete -wal", "delete -shm", "replace -wal", "move -wal"])
def test_a_changed_wal_or_shm_file_is_503_and_nothing_acknowledged_is_lost_at_kill_9(
    study: tuple[Path, list[str], list[str]], change: str
) -> None:
    """Before: deleting (or replacing, moving) only the -wal file under a running server went unnoticed: every
    later answer was acknowledged, and a kill -9 then lost all of them together with the earlier ones (4 of 4
    acknowledged, 0 stored). After: 503 "not stored" from the change on (claims too), the server copies what its
    open log holds into the study file at once, so every acknowledged answer survives a kill -9."""
    path, tokens, _ = study
    port = simulate.free_port()
    proc = _start(path, port)
    acked = 0
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            for token in tokens[:2]:
                assert _post(c, token).json() == {"saved": True, "duplicate": False}
                acked += 1
            how, side = change.split()
            target = Path(f"{path}{side}")
            if how == "delete":
                target.unlink()
            elif how == "move":
                target.rename(path.parent / "elsewhere")
            else:
                (path.parent / "new").write_bytes(b"")
                os.replace(path.parent / "new", target)
            for token in tokens[2:4]:
                r = _post(c, token)
                assert r.status_code == 503, r.text[:300]
                assert "moved or replaced on the server" in r.text
    finally:
        simulate.kill(proc)  # kill -9: no checkpoint on the way out
    log = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    assert f"{side} file was deleted, moved or replaced" in log and "Traceback" not in log
    if how != "delete":  # what was put in its place is not the log
        Path(f"{path}{side}").unlink(missing_ok=True)
    assert _stored(path) == acked == 2


def test_sqlite_re_creating_its_wal_file_is_not_a_change(study: tuple[Path, list[str], list[str]]) -> None:
    """SQLite removes the -wal and -shm files when the last connection closes and makes new ones on the next:
    an in-process study whose connections were all closed (or a study served after `export` ran) goes on."""
    from starlette.testclient import TestClient

    from vistkit.studio.app import create_app

    path, tokens, _ = study
    st = db.open_study(path)
    c = TestClient(create_app(st))
    assert _post(c, tokens[0]).json() == {"saved": True, "duplicate": False}  # type: ignore[arg-type]
    st.close()  # every connection closed: the -wal file is gone ...
    assert not Path(f"{path}-wal").exists()
    assert _post(c, tokens[1]).json() == {"saved": True, "duplicate": False}  # type: ignore[arg-type]
    assert Path(f"{path}-wal").exists()  # ... and a new one took its place
    st.close()
    assert _stored(path) == 2
