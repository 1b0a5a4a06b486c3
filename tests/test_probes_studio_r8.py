"""Fault probes, round 8: the studio server losing data or going unresponsive under faults.

Each test names the class of problem it guards: the study's ``-wal`` or ``-shm`` file deleted, moved or replaced
under a running server (answers acknowledged and then lost at a kill -9), a full disk (a file-size limit) during
a write, two servers and the read-only verbs on one study at once, a client that resends a submission whose
answer it never saw, stop/continue/terminate/hang-up signals, study paths with spaces, non-ASCII characters or a
symlink, and request bodies and connections that are too large, malformed, too many or too slow.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from meta_dummies import dummy_metrics_registered
from studio_helpers import make_study, read_page, serve_child, stored_judgements, submit_ranking

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
    return serve_child(study, port, *extra, preexec=preexec)  # type: ignore[no-any-return]


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> str:
    """Stop the server with ``sig`` (kill -9 after 20 s) and return its log."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        simulate.kill(proc)
    return proc.stderr.read().decode(errors="replace") if proc.stderr else ""


@pytest.fixture
def study(tmp_path: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    made = make_study(tmp_path, n_items=6, per_item=1, annotators=6)
    made.study.close()
    yield made.path, made.tokens, made.names


# ------------------------------------------------------------------------------------------- the -wal / -shm files
@pytest.mark.parametrize("change", ["delete -wal", "delete -shm", "replace -wal", "move -wal"])
def test_a_changed_wal_or_shm_file_loses_nothing_acknowledged_at_kill_9(
    study: tuple[Path, list[str], list[str]], change: str
) -> None:
    """Before: deleting (or replacing, moving) only the -wal file under a running server went unnoticed: every
    later answer was acknowledged, and a kill -9 then lost all of them together with the earlier ones (4 of 4
    acknowledged, 0 stored). Round 8: 503 "not stored" from the change on, after copying what the open log held
    into the study file. Round 12: the next request copies the log, reopens the study and is stored; every
    acknowledged answer survives a kill -9."""
    path, tokens, _ = study
    port = simulate.free_port()
    proc = _start(path, port)
    acked = 0
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            for token in tokens[:2]:
                assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
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
            for token in tokens[2:4]:  # round 12: the next request recovers (log copied, study reopened)
                assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
                acked += 1
    finally:
        simulate.kill(proc)  # kill -9: no checkpoint on the way out
    log = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    assert f"{side} file was deleted, moved or replaced" in log and "Traceback" not in log
    assert stored_judgements(path) == acked == 4


def test_sqlite_re_creating_its_wal_file_is_not_a_change(study: tuple[Path, list[str], list[str]]) -> None:
    """SQLite removes the -wal and -shm files when the last connection closes and makes new ones on the next:
    an in-process study whose connections were all closed (or a study served after `export` ran) goes on."""
    from starlette.testclient import TestClient

    from vistkit.studio.app import create_app

    path, tokens, _ = study
    st = db.open_study(path)
    c = TestClient(create_app(st))
    assert submit_ranking(c, tokens[0]).json() == {"saved": True, "duplicate": False}  # type: ignore[arg-type]
    st.close()  # every connection closed: the -wal file is gone ...
    assert not Path(f"{path}-wal").exists()
    assert submit_ranking(c, tokens[1]).json() == {"saved": True, "duplicate": False}  # type: ignore[arg-type]
    assert Path(f"{path}-wal").exists()  # ... and a new one took its place
    st.close()
    assert stored_judgements(path) == 2


def test_a_symlinked_study_on_a_path_with_spaces_and_non_ascii_characters(tmp_path: Path) -> None:
    """A study in "p ath é/日本 x" served, exported and reported through a symlink works. Before: the -wal check
    looked for "link.db-wal" beside the link, while SQLite keeps the log beside the target, so a deleted log was
    not noticed for a symlinked study (200 "saved"); and the log's permissions were never tightened. After: the
    log beside the target is checked (503)."""
    from vistkit.cli import main

    folder = tmp_path / "p ath é" / "日本 x"
    folder.mkdir(parents=True)
    made = make_study(folder, n_items=3, per_item=1, annotators=3)
    made.study.close()
    link = tmp_path / "p ath é" / "link to.db"
    link.symlink_to(made.path)
    port = simulate.free_port()
    proc = _start(link, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            assert submit_ranking(c, made.tokens[0]).json() == {"saved": True, "duplicate": False}
            assert sorted(p.name for p in folder.iterdir()) == ["rank.db", "rank.db-shm", "rank.db-wal"]
            assert Path(f"{made.path}-wal").stat().st_mode & 0o077 == 0
            assert main(["studio", "export", str(link), "--format", "jsonl", "-o", str(folder / "ö ut.jsonl")]) == 0
            assert main(["studio", "export", str(link), "--format", "jsonl", "-o", str(made.path)]) == 1  # the study
            Path(f"{made.path}-wal").unlink()
            assert submit_ranking(c, made.tokens[1]).json() == {"saved": True, "duplicate": False}  # recovered
    finally:
        log = _stop(proc)
    assert "rank.db-wal file was deleted" in log
    assert len((folder / "ö ut.jsonl").read_text(encoding="utf-8").splitlines()) == 1
    assert stored_judgements(link) == 2


# ------------------------------------------------------------------------------------------- connections
def _few_files() -> None:
    """In the server child: at most 150 open files (soft and hard), so 200 connections use them all up."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (150, 150))


def _reply(s: socket.socket) -> bytes:
    try:
        return s.recv(1000)
    except OSError:  # reset: cut off too
        return b""


def test_slow_and_idle_connections_are_cut_and_the_others_are_answered(
    study: tuple[Path, list[str], list[str]], tmp_path: Path
) -> None:
    """200 connections that send half a request head and wait, and one client sending its body a byte a second,
    against a server with 150 open files. Before: the half-open connections were held for ever, so nobody else
    was answered for as long as they stayed (12 s tried), SIGTERM could not stop it, and asyncio logged a
    traceback per waiting connection (3 MB in 12 s). After: each client has --request-timeout seconds for a whole
    request (408, or the connection closed), others are answered again right after, the log says it in one
    line, and the trickled body stores nothing."""
    path, tokens, _ = study
    port = simulate.free_port()
    log_file = tmp_path / "server.log"
    with log_file.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "studio", "serve", str(path), "--port", str(port), "--request-timeout", "2"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=_few_files,
        )
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            page = read_page(c, tokens[0])
        body = f"assignment={page.assignment}&csrf={page.csrf}&ranking=1,2,3".encode()
        slow = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = f"POST /a/{tokens[0]}/submit HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
        head += f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
        slow.sendall(head.encode())
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            socks.append(s)
        start = time.monotonic()
        sent, slow_closed = 0, None
        answered = None
        while time.monotonic() - start < 10 and (answered is None or slow_closed is None):
            try:
                slow.sendall(body[sent : sent + 1])
                sent += 1
            except OSError:
                slow_closed = slow_closed or time.monotonic() - start
            if answered is None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.9).text == "ok":
                        answered = time.monotonic() - start
                except httpx.HTTPError:
                    pass
            else:
                time.sleep(0.9)
        assert answered is not None and answered < 6, answered  # 2 s for the slow ones, then the others
        slow.settimeout(3)
        try:
            reply = slow.recv(1000)
        except OSError:
            reply = b""
        assert slow_closed is not None or reply == b""  # the trickler was cut off before its body was complete
        assert sent < len(body)
        replies = [_reply(s) for s in socks]
        assert all(r.startswith(b"HTTP/1.1 408") or r == b"" for r in replies), {r[:40] for r in replies}
        assert any(r.startswith(b"HTTP/1.1 408") for r in replies)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            assert submit_ranking(c, tokens[1]).json() == {"saved": True, "duplicate": False}  # an ordinary client
    finally:
        for s in socks:
            s.close()
        _stop(proc)
    text = log_file.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text and len(text) < 2000, text[-2000:]
    assert stored_judgements(path) == 1  # the trickled answer was not stored


# ------------------------------------------------------------------------------------------- signals
def test_sighup_stops_the_server_as_sigterm_does(study: tuple[Path, list[str], list[str]], tmp_path: Path) -> None:
    """SIGHUP (the terminal that started `serve` closed, an ssh session dropped). Before: the process died at
    once, without checkpointing: the .db file alone held none of the answers (they stayed in the -wal file).
    After: it stops as for SIGTERM, so study.db alone holds every acknowledged answer. A server started under
    nohup (SIGHUP ignored) keeps ignoring it."""
    import shutil

    path, tokens, _ = study
    port = simulate.free_port()
    # SIGHUP as a terminal leaves it, also when the suite itself runs under nohup (which the child would inherit)
    proc = _start(path, port, preexec=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        for token in tokens[:2]:
            assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
    log = _stop(proc, signal.SIGHUP)
    assert proc.returncode == -signal.SIGHUP and "Traceback" not in log
    copy = tmp_path / "copy" / "alone.db"
    copy.parent.mkdir()
    shutil.copyfile(path, copy)  # the .db file alone
    assert stored_judgements(copy) == 2

    def nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    port = simulate.free_port()
    proc = _start(path, port, preexec=nohup)
    try:
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).text == "ok"
    finally:
        _stop(proc)


def test_sigstop_then_a_resent_submission_is_stored_once(study: tuple[Path, list[str], list[str]]) -> None:
    """A stopped server (SIGSTOP: a debugger, a suspended VM) makes clients time out; they resend. After SIGCONT
    every resend is acknowledged and the answer is stored once (the assignment is the idempotency key); ten
    copies sent at once are one judgement; the same task with another answer is 409."""
    from concurrent.futures import ThreadPoolExecutor

    path, tokens, _ = study
    port = simulate.free_port()
    proc = _start(path, port)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=10) as c:
            page = read_page(c, tokens[0])
            form = {"assignment": page.assignment or "", "csrf": page.csrf or "", "ranking": "2,1,3"}
            proc.send_signal(signal.SIGSTOP)
            with pytest.raises(httpx.TimeoutException):
                httpx.post(f"{base}/a/{tokens[0]}/submit", data=form, headers=JSON, timeout=1.0)
            proc.send_signal(signal.SIGCONT)
            r = c.post(f"/a/{tokens[0]}/submit", data=form, headers=JSON)
            assert r.status_code == 200 and r.json()["saved"] is True
            page = read_page(c, tokens[1])
            form1 = {"assignment": page.assignment or "", "csrf": page.csrf or "", "ranking": "3,2,1"}

            def send(_: int) -> dict:
                with httpx.Client(base_url=base, timeout=10) as own:
                    return dict(own.post(f"/a/{tokens[1]}/submit", data=form1, headers=JSON).json())

            with ThreadPoolExecutor(10) as pool:
                acks = list(pool.map(send, range(10)))
            assert all(a["saved"] for a in acks) and sum(not a["duplicate"] for a in acks) == 1, acks
            r = c.post(f"/a/{tokens[1]}/submit", data={**form1, "ranking": "1,2,3"}, headers=JSON)
            assert r.status_code == 409
    finally:
        proc.send_signal(signal.SIGCONT)
        log = _stop(proc)
    assert "Traceback" not in log
    assert stored_judgements(path) == 2


def test_sigterm_while_annotators_submit_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """SIGTERM in the middle of writes from 12 annotators, with 4 more clients half-way through sending a body:
    every acknowledged answer is in the .db file alone, none twice. Before: the half-sent requests held the stop
    for uvicorn's whole grace period (5 s) and were then cancelled with a CancelledError traceback each in the
    log. After: they are disconnected at once (they stored nothing), the rest is answered, and the server exits
    promptly."""
    made = make_study(tmp_path, n_items=12, per_item=2, annotators=12)
    made.study.close()
    port = simulate.free_port()
    proc = _start(made.path, port)
    half: list[socket.socket] = []
    stopped: list[float] = []

    def term() -> None:
        stopped.append(time.monotonic())
        proc.send_signal(signal.SIGTERM)

    try:
        for token in made.tokens[:4]:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"POST /a/{token}/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nassign".encode())
            half.append(s)
        res = asyncio.run(
            simulate.run_annotators(
                f"http://127.0.0.1:{port}",
                made.tokens,
                max_tasks=4,
                seed=3,
                deadline=30,
                stop_after_acks=6,
                on_stop=term,
            )
        )
        proc.wait(timeout=20)
        took = time.monotonic() - stopped[0]
    finally:
        for s in half:
            s.close()
        log = _stop(proc)
    assert proc.returncode == -signal.SIGTERM and "Traceback" not in log, log[-2000:]
    assert took < 4, took
    assert not Path(f"{made.path}-wal").exists() or Path(f"{made.path}-wal").stat().st_size == 0
    check = simulate.verify(made.path, res.acked, made.names)
    assert len(res.acked) >= 6 and check["missing"] == [] and check["wrong"] == [] and check["duplicated"] == 0


# ------------------------------------------------------------------------------------------- a full disk
def test_a_file_size_limit_during_writes_is_503_and_the_study_still_opens_and_exports(tmp_path: Path) -> None:
    """The server's files may not grow past a limit (RLIMIT_FSIZE, SIGXFSZ ignored: what a full disk looks like
    to SQLite). Every write that needs more room is 503 "not stored" (claims too), nothing half-written; once the
    room is back the same server stores again; after a kill -9 the study opens, every acknowledged answer is in
    it, and it exports."""
    from vistkit.cli import main

    made = make_study(tmp_path, n_items=10, per_item=1, annotators=10)
    made.study.close()
    limit = made.path.stat().st_size + 20 * 1024  # the log's header and a few commits

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    port = simulate.free_port()
    proc = _start(made.path, port, preexec=small_files)
    acked, refused = 0, 0
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            for token in made.tokens[:7]:
                r = submit_ranking(c, token)
                if r.status_code == 200:
                    assert refused == 0  # once full, it stays full
                    acked += 1
                    continue
                assert r.status_code == 503, r.text[:300]
                assert "your answer was not stored" in r.text or "could not be read or updated" in r.text
                refused += 1
            unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, unlimited)  # the disk has room again
            for token in made.tokens[7:]:
                assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
                acked += 1
    finally:
        simulate.kill(proc)
    log = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    assert acked >= 1 and refused >= 1 and "Traceback" not in log
    assert stored_judgements(made.path) == acked
    out = tmp_path / "out.jsonl"
    assert main(["studio", "export", str(made.path), "--format", "jsonl", "-o", str(out)]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == acked


@pytest.mark.parametrize("verb", ["status", "serve"])
def test_a_study_on_a_full_disk_is_not_called_a_non_study(tmp_path: Path, verb: str) -> None:
    """Opening a WAL study makes its -shm file (32 KiB); on a full disk (a 300-byte file-size limit here) that
    fails. Before: "cannot open study s.db: disk I/O error (is it a vistkit study?)", sending the organiser to
    check the wrong thing. After: the sentence says the disk may be full or failing."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    made.study.close()

    def tiny_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

    args = [sys.executable, "-c", CLI, "studio", verb, str(made.path)]
    if verb == "serve":
        args += ["--port", str(simulate.free_port())]
    r = subprocess.run(args, capture_output=True, text=True, preexec_fn=tiny_files, timeout=60)
    assert r.returncode == 1, r.stderr[-500:]
    assert r.stderr.strip() == (
        f"error: cannot open study {made.path}: disk I/O error (the disk may be full or failing: free some space "
        "or check the disk, then try again)"
    )


# ------------------------------------------------------------------------------------------- two servers, verbs
def test_two_servers_and_the_read_verbs_on_one_study_at_once(tmp_path: Path) -> None:
    """A second `serve` on the same study is not refused: both write through SQLite's locks (one open task per
    annotator, one judgement per unit and annotator), while `export`, `status` and `report` run against it.
    Every acknowledged answer is stored once, and no verb fails."""
    import threading

    from vistkit.cli import main

    made = make_study(tmp_path, n_items=6, per_item=2, annotators=6)
    made.study.close()
    ports = [simulate.free_port(), simulate.free_port()]
    procs = [_start(made.path, p) for p in ports]
    stop, codes, reports = threading.Event(), [], []

    def report() -> None:
        args = ["studio", "report", str(made.path), "-m", "meta-test-length", "--bootstrap", "20", "-f", "json"]
        reports.append(main(args))

    def verbs() -> None:
        n = 0
        while not stop.is_set():
            out = tmp_path / f"o{n}.jsonl"
            codes.append(main(["studio", "export", str(made.path), "--format", "jsonl", "-o", str(out)]))
            codes.append(main(["studio", "status", str(made.path), "-f", "json"]))
            if not reports and len(out.read_text(encoding="utf-8").splitlines()) >= 2:
                report()
            n += 1

    side = threading.Thread(target=verbs)
    registered = dummy_metrics_registered()
    registered.__enter__()
    side.start()
    try:

        async def both() -> list[simulate.RunResult]:
            return list(
                await asyncio.gather(
                    *(
                        simulate.run_annotators(
                            f"http://127.0.0.1:{p}", made.tokens[3 * i : 3 * i + 3], max_tasks=12, seed=i, deadline=40
                        )
                        for i, p in enumerate(ports)
                    )
                )
            )

        results = asyncio.run(both())
    finally:
        stop.set()
        side.join(timeout=60)
        if not reports:  # the annotators were faster than the first export: the servers still run
            report()
        registered.__exit__(None, None, None)
        logs = [_stop(p) for p in procs]
    assert all("Traceback" not in log for log in logs)
    assert [r.errors for r in results] == [[], []]
    acked = results[0].acked + [
        simulate.Ack(a.annotator + 3, a.assignment, a.form, a.duplicate) for a in results[1].acked
    ]
    check = simulate.verify(made.path, acked, made.names)
    assert check["missing"] == [] and check["wrong"] == [] and check["duplicated"] == 0
    assert check["stored"] == check["target"] == 12
    assert codes and set(codes) == {0} and reports == [0]


# ------------------------------------------------------------------------------------------- request bodies
def test_bodies_at_and_over_the_limit_malformed_and_mistyped_and_200_at_once(
    study: tuple[Path, list[str], list[str]],
) -> None:
    """Through a real server: a body of exactly 16 KiB is read (and stored), one byte more is 413 (declared or
    chunked), malformed JSON 400, other types and charsets 415, an impossible Content-Length 400 from the HTTP
    layer; then 200 requests at once are all answered. Nothing but the one valid answer is stored."""
    from vistkit.studio.app import MAX_BODY

    path, tokens, _ = study
    port = simulate.free_port()
    proc = _start(path, port)
    url = f"/a/{tokens[0]}/submit"
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            page = read_page(c, tokens[0])
            start = f"assignment={page.assignment}&csrf={page.csrf}&ranking=1,2,3&pad="
            form = {**JSON, "content-type": "application/x-www-form-urlencoded"}
            over = c.post(url, content=(start + "x" * (MAX_BODY + 1 - len(start))).encode(), headers=form)
            assert over.status_code == 413
            chunked = c.post(url, content=iter([b"a" * MAX_BODY, b"b"]), headers=form)
            assert chunked.status_code == 413
            for ctype, body, status in [
                ("application/json", b"{bad", 400),
                ("application/json", b"[1, 2]", 400),
                ("application/json", b'{"assignment": ' + b"9" * 5000 + b"}", 400),
                ("application/json; charset=latin-1", b"{}", 415),
                ("text/plain", b"assignment=1", 415),
                ("multipart/form-data; boundary=x", b"--x--", 415),
                ("application/x-www-form-urlencoded", b"ranking=%ff", 400),
            ]:
                r = c.post(url, content=body, headers={**JSON, "content-type": ctype})
                assert r.status_code == status and "error" in r.json(), (ctype, r.status_code, r.text[:200])
            at = c.post(url, content=(start + "x" * (MAX_BODY - len(start))).encode(), headers=form)
            assert at.json() == {"saved": True, "duplicate": False}
        for header in (b"Content-Length: -1", b"Content-Length: 99999999999999999999999"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(f"POST {url} HTTP/1.1\r\nHost: x\r\n".encode() + header + b"\r\n\r\n{}")
                assert s.recv(100).startswith(b"HTTP/1.1 400")

        async def many() -> set[int]:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits) as c:
                rs = await asyncio.gather(*(c.get(f"/a/{tokens[i % 6]}/progress") for i in range(200)))
                return {r.status_code for r in rs}

        assert asyncio.run(many()) == {200}
    finally:
        log = _stop(proc)
    assert "Traceback" not in log
    assert stored_judgements(path) == 1


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "3601"])
def test_a_request_timeout_out_of_range_is_one_sentence(
    study: tuple[Path, list[str], list[str]], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    from vistkit.cli import main

    path, _, _ = study
    assert main(["studio", "serve", str(path), "--request-timeout", value]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --request-timeout must be a number of seconds") and len(err.splitlines()) == 1
