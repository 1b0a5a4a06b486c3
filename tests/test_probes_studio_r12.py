"""Round-12 probes of vistkit studio: the answers uvicorn writes itself carry the security headers, a study whose
``-wal`` or ``-shm`` file was changed under a running server recovers on the next request (nothing acknowledged is
lost), two ``init`` runs on one path at once, and hostile bodies, names and texts against the real server.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from studio_helpers import count, make_study, plan_items, serve_child, stored_judgements, submit_ranking

from vistkit.studio import db, simulate

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
httpx = pytest.importorskip("httpx", reason="the studio tests need httpx (studio extra)")

SECURITY = ("content-security-policy", "x-content-type-options", "referrer-policy", "x-frame-options")


def _start(study: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """`vistkit studio serve` in a child process (log on a pipe), once it answers /healthz."""
    return serve_child(study, port, *extra)  # type: ignore[no-any-return]


def _log(proc: subprocess.Popen[bytes]) -> str:
    simulate.kill(proc)
    return proc.stderr.read().decode(errors="replace") if proc.stderr else ""


def _raw(port: int, data: bytes, *, wait: float = 10.0) -> bytes:
    """Send ``data`` on a new connection and read until the server closes it (at most ``wait`` seconds)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
        return out


def _headers(answer: bytes) -> tuple[int, dict[str, str]]:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    return status, {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}


@pytest.fixture
def study(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    made = make_study(tmp_path, n_items=8, per_item=1, annotators=8)
    made.study.close()
    yield made.path, made.tokens


# ------------------------------------------------------------------------------------ the server's own answers
@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GARBAGE\r\n\r\n", id="bad request line"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", id="bad header line"),
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", id="no Host"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", id="two lengths"),
        pytest.param(
            b"POST /a/x/submit HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", id="bad chunk"
        ),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n", id="408: head never finished"),
    ],
)
def test_answers_the_server_writes_itself_carry_the_security_headers(
    study: tuple[Path, list[str]], request_bytes: bytes
) -> None:
    """Before: uvicorn's own 400 (a request h11 cannot parse) and the 408 of the request deadline had none of the
    headers every app answer carries (CSP, nosniff, no-referrer, DENY), and every answer said ``server: uvicorn``.
    After: the same headers on them, and no server banner."""
    path, _ = study
    port = simulate.free_port()
    proc = _start(path, port, "--request-timeout", "1")
    try:
        status, headers = _headers(_raw(port, request_bytes))
        assert status == (408 if request_bytes.endswith(b"x\r\n") else 400)
        assert all(h in headers for h in SECURITY), headers
        assert headers["x-content-type-options"] == "nosniff" and headers["connection"] == "close"
        _, ok = _headers(_raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        assert "server" not in ok and all(h in ok for h in SECURITY)
    finally:
        log = _log(proc)
    assert "Traceback" not in log


# ------------------------------------------------------------------------------------------- the -wal / -shm files
def _change(path: Path, change: str) -> None:
    how, side = change.split()
    target = Path(f"{path}{side}")
    if how == "delete":
        target.unlink()
    elif how == "move":
        target.rename(path.parent / "elsewhere")
    else:
        (path.parent / "new").write_bytes(b"\0" * 4096)
        os.replace(path.parent / "new", target)


@pytest.mark.parametrize("change", ["delete -wal", "delete -shm", "replace -wal", "replace -shm", "move -wal"])
def test_a_changed_wal_or_shm_file_is_recovered_from_on_the_next_request(
    study: tuple[Path, list[str]], change: str
) -> None:
    """Before: once a backup or clean-up tool had deleted, moved or replaced the study's -wal or -shm file, the
    server answered 503 to every request until it was restarted. After: the next request copies what the server's
    own log holds into the study file, reopens the study and is answered; every acknowledged answer (before and
    after the change) survives a kill -9, and the log says once what happened."""
    path, tokens = study
    port = simulate.free_port()
    proc = _start(path, port)
    acked = 0
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as c:
            for token in tokens[:3]:
                assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
                acked += 1
            _change(path, change)
            for token in tokens[3:6]:
                r = submit_ranking(c, token)
                assert r.status_code == 200 and r.json() == {"saved": True, "duplicate": False}, r.text[:300]
                acked += 1
            assert c.get(f"/a/{tokens[0]}/progress").json()["done"] == 1
    finally:
        log = _log(proc)  # kill -9: no checkpoint on the way out
    assert log.count("was opened again (nothing was lost") == 1 and "Traceback" not in log, log
    assert stored_judgements(path) == acked == 6


def test_a_changed_log_while_another_program_has_the_study_open_is_503_until_it_is_closed(
    study: tuple[Path, list[str]],
) -> None:
    """Another program holding the study open (a second server) may still write through the old -wal/-shm files:
    the server does not reopen the study then (503, nothing lost), and does so once it is alone."""
    path, tokens = study
    port = simulate.free_port()
    proc = _start(path, port)
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('select 1 from "
            "settings').fetchall(); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as c:
            assert submit_ranking(c, tokens[0]).json() == {"saved": True, "duplicate": False}
            time.sleep(0.5)  # the other program has opened the study
            _change(path, "delete -wal")
            r = submit_ranking(c, tokens[1])
            assert r.status_code == 503 and "moved or replaced on the server" in r.text, r.text[:300]
            assert other.stdin is not None
            other.stdin.close()
            other.wait(timeout=30)
            r = submit_ranking(c, tokens[2])
            assert r.status_code == 200 and r.json()["saved"] is True, r.text[:300]
    finally:
        if other.poll() is None:
            other.kill()
            other.wait(timeout=30)
        log = _log(proc)
    assert "another program has the study open too" in log and "Traceback" not in log
    assert stored_judgements(path) == 2


# ------------------------------------------------------------------------------------------- two inits at once
def _init_child(path: str, go: object, out: object) -> None:
    from studio_helpers import plan_items as items

    from vistkit.studio.plan import create_study

    go.wait()  # type: ignore[attr-defined]
    try:
        create_study(path, task="rank", items=items(30), per_item=5)
        out.put("ok")  # type: ignore[attr-defined]
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_two_inits_of_one_path_at_once_exactly_one_wins_and_the_other_is_told_why(tmp_path: Path) -> None:
    """Before: of three inits started together on one path, one won and the others were told the file "holds no
    finished study (an interrupted init leaves such a file); delete it (rm ...)": the study being built, which the
    advice would have destroyed. After: the study is built under a work name and takes the path's name atomically
    (a hard link): exactly one wins, the others are told the file exists already, and no work file is left."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for trial in range(4):
        path = tmp_path / f"s{trial}.db"
        go, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_init_child, args=(str(path), go, out)) for _ in range(3)]
        for p in procs:
            p.start()
        time.sleep(0.3)
        go.set()
        results = sorted(out.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(timeout=60)
        assert results.count("ok") == 1, results
        assert all("exists already" in r and "holds no finished study" not in r for r in results if r != "ok")
        st = db.open_study(path)
        assert st.setting("task") == "rank" and count(st, db.items) == 30
        st.engine.dispose()
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.tmp-*"))


def test_a_study_being_built_is_never_under_its_name_and_a_failed_init_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While init writes the study, nothing is at the path (a reader or a second init cannot see a half-made
    study); an init that fails midway (a full disk, Ctrl-C) removes its work file and leaves the path free."""
    from vistkit.studio import plan

    path = tmp_path / "s.db"
    seen: list[bool] = []
    real = db.put_settings

    def spy(conn: object, values: dict) -> None:
        seen.append(path.exists())
        real(conn, values)  # type: ignore[arg-type]
        if values.get("title") == "boom":
            raise KeyboardInterrupt

    monkeypatch.setattr(db, "put_settings", spy)
    with pytest.raises(KeyboardInterrupt):
        plan.create_study(path, task="rank", items=plan_items(3), per_item=1, title="boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    plan.create_study(path, task="rank", items=plan_items(3), per_item=1)
    assert seen == [False, False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
    assert path.stat().st_mode & 0o077 == 0
    st = db.open_study(path)
    assert count(st, db.units) == 3
    st.engine.dispose()


def test_an_old_copy_of_the_log_put_back_under_a_served_study_is_never_replayed(
    study: tuple[Path, list[str]],
) -> None:
    """A backup tool that restores an earlier copy of the study's -wal file while the server runs: the copy is a
    valid log of this very study, so SQLite would replay its stale pages over newer answers when the study is opened
    again. Recovery copies the server's own log into the study file and sets the foreign file aside (kept, never
    replayed): every acknowledged answer survives a kill -9."""
    path, tokens = study
    port = simulate.free_port()
    proc = _start(path, port)
    acked = 0
    wal = Path(f"{path}-wal")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as c:
            assert submit_ranking(c, tokens[0]).json() == {"saved": True, "duplicate": False}
            acked += 1
            snapshot = wal.read_bytes()
            for token in tokens[1:4]:
                assert submit_ranking(c, token).json() == {"saved": True, "duplicate": False}
                acked += 1
            (path.parent / "restored").write_bytes(snapshot)
            os.replace(path.parent / "restored", wal)
            for token in tokens[4:6]:
                r = submit_ranking(c, token)
                assert r.status_code == 200 and r.json() == {"saved": True, "duplicate": False}, r.text[:300]
                acked += 1
    finally:
        log = _log(proc)
    assert "Traceback" not in log, log
    assert stored_judgements(path) == acked == 6
    kept = list(path.parent.glob(f"{wal.name}.replaced-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == snapshot


# ------------------------------------------------------------------------------------ one item per photo sequence
def test_machine_stories_repeated_across_story_ids_are_said_and_one_per_sequence_drops_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's real study (human, LLaVA and PR-VIST stories keyed by story id) put one machine story in
    several items word for word: those machines wrote one story per photo sequence, and VIST has several human
    stories (story ids) per sequence; 100 items held 40 distinct LLaVA stories, judged again and again without a
    word. Now a warning says so, and `--one-per-sequence` keeps the first story id of each sequence."""
    from vistkit.data.story import Story, StorySet
    from vistkit.errors import InputError
    from vistkit.studio.plan import items_from_story_sets, warn_repeated_stories

    seqs = [tuple(f"{s}{i}" for i in range(5)) for s in "abc"]
    human = StorySet(
        Story(f"{n}", f"human story {n} .", photo_ids=seqs[n // 2], system="human") for n in range(6)
    )  # two story ids per sequence
    machine = StorySet(Story(f"{n}", f"machine story of {seqs[n // 2][0]} .", system="m") for n in range(6))
    items = items_from_story_sets({"human": human, "m": machine}, key="story")
    warn_repeated_stories(items)  # `studio init` says it once the study is made
    err = capsys.readouterr().err
    assert len(items) == 6 and "3 of m's 6 stories repeat another item's story word for word" in err
    assert "human" not in err.split("repeat")[0]
    items = items_from_story_sets({"human": human, "m": machine}, key="story", one_per_sequence=True, max_items=2)
    warn_repeated_stories(items)
    assert [it.key for it in items] == ["0", "2"] and capsys.readouterr().err == ""
    with pytest.raises(InputError, match="--one-per-sequence needs the photo sequence"):
        items_from_story_sets({"m": machine}, key="story", one_per_sequence=True)
