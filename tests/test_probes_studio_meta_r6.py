"""Bad-input probes, round 6: the studio server and verbs, and `vistkit meta`'s readers of human judgements.

Each test names the class of problem it guards: a study file deleted, moved or replaced under a running server
(acknowledged answers written into a file nobody finds again), storage failures that are operating-system errors,
JSON bodies with lone surrogates, senders that vanish mid-body or trickle it, annotator-name prefixes that are
invisible or huge, agreement that is undefined without saying why, and judgement tables read whole into memory
with line numbers that drift after a multi-line cell.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path

import pytest
from studio_helpers import count, make_study, read_page

from vistkit.cli import main
from vistkit.studio import db, service

pytest.importorskip("httpx", reason="the studio tests need httpx (studio extra)")

from starlette.testclient import TestClient

from vistkit.studio.app import create_app

JSON = {"accept": "application/json"}


def _submit(client: TestClient, token: str, **answer: str) -> tuple[int, dict]:
    page = read_page(client, token)
    assert page.assignment is not None, page.html[-400:]
    r = client.post(
        f"/a/{token}/submit",
        data={"assignment": page.assignment, "csrf": page.csrf or "", **(answer or {"ranking": "1,2,3"})},
        headers=JSON,
    )
    return r.status_code, r.json()


def _judgements_in(path: Path) -> int:
    st = db.open_study(path)
    try:
        return count(st, db.judgements)
    finally:
        st.close()


# ------------------------------------------------------------------------------------------- the study file
@pytest.mark.parametrize("change", ["delete", "replace", "move"])
def test_a_study_file_changed_under_the_server_is_503_and_nothing_acknowledged_is_lost(
    tmp_path: Path, change: str
) -> None:
    """Before: every answer after the change was acknowledged ("saved": true) and went into the deleted or
    replaced file (lost when the server stopped), or into a moved file whose write-ahead log stayed behind.
    After: 503 with one sentence, nothing acknowledged; no empty file is re-created under the old name."""
    made = make_study(tmp_path, n_items=3, per_item=2, annotators=3)
    c = TestClient(create_app(made.study))
    assert _submit(c, made.tokens[0]) == (200, {"saved": True, "duplicate": False})
    if change == "delete":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{made.path}{suffix}").unlink(missing_ok=True)
    elif change == "replace":
        (tmp_path / "other").mkdir()
        other = make_study(tmp_path / "other", n_items=3, per_item=2, annotators=1)
        other.study.close()
        os.replace(other.path, made.path)
    else:
        os.rename(made.path, tmp_path / "moved.db")
    for token in made.tokens[1:]:
        r = c.get(f"/a/{token}", headers=JSON)  # claiming a task writes: refused the same way
        assert r.status_code == 503 and "moved or replaced on the server" in r.json()["error"]
    page = c.post(
        f"/a/{made.tokens[0]}/submit", data={"assignment": "2", "csrf": "x", "ranking": "1,2,3"}, headers=JSON
    )
    assert page.status_code in (403, 409, 503)  # never "saved"
    made.study.close()
    if change == "delete":
        assert not made.path.exists()  # the pool did not re-create an empty study under the old name
    elif change == "replace":
        assert _judgements_in(made.path) == 0  # the replacement is untouched
    else:
        assert _judgements_in(tmp_path / "moved.db") == 1  # the one acknowledged answer, in the moved file


def test_the_same_answer_is_stored_once_the_file_is_back(tmp_path: Path) -> None:
    """Moving the study back under its name lets the server store again (the refusal is not sticky)."""
    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    c = TestClient(create_app(made.study))
    page = read_page(c, made.tokens[0])
    form = {"assignment": page.assignment or "", "csrf": page.csrf or "", "ranking": "1,2,3"}
    os.rename(made.path, tmp_path / "away.db")
    r = c.post(f"/a/{made.tokens[0]}/submit", data=form, headers=JSON)
    assert r.status_code == 503 and "your answer was not stored" in r.json()["error"]
    os.rename(tmp_path / "away.db", made.path)
    r = c.post(f"/a/{made.tokens[0]}/submit", data=form, headers=JSON)
    assert r.json() == {"saved": True, "duplicate": False}
    assert count(made.study, db.judgements) == 1


@pytest.mark.parametrize(
    ("code", "reason"),
    [(errno.ENOSPC, "the server's disk is full"), (errno.EROFS, "the study is read-only on the server")],
)
def test_an_os_error_while_storing_is_503_and_earlier_judgements_survive(
    tmp_path: Path, code: int, reason: str
) -> None:
    """Before: an OSError (ENOSPC, EROFS) raised while a judgement was written was 500 "unexpected error".
    After: 503 naming the disk, the transaction rolled back, earlier judgements intact, a retry stored once."""
    from sqlalchemy import event

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=2)
    c = TestClient(create_app(made.study))
    assert _submit(c, made.tokens[0])[0] == 200
    page = read_page(c, made.tokens[1])
    form = {"assignment": page.assignment or "", "csrf": page.csrf or "", "ranking": "3,2,1"}

    def full(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE")):
            raise OSError(code, os.strerror(code))

    event.listen(made.study.engine, "before_cursor_execute", full)
    r = c.post(f"/a/{made.tokens[1]}/submit", data=form, headers=JSON)
    assert r.status_code == 503 and reason in r.json()["error"] and "not stored" in r.json()["error"]
    assert r.headers["retry-after"] == "60"
    event.remove(made.study.engine, "before_cursor_execute", full)
    assert count(made.study, db.judgements) == 1  # the earlier one, and nothing half-written
    with made.study.read() as conn:
        ok = json.loads(conn.execute(db.judgements.select()).first().answer)  # type: ignore[union-attr]
    assert sorted(ok["ranks"].values()) == [1, 2, 3]
    r = c.post(f"/a/{made.tokens[1]}/submit", data=form, headers=JSON)
    assert r.json() == {"saved": True, "duplicate": False}
    assert count(made.study, db.judgements) == 2


# ------------------------------------------------------------------------------------------- request bodies
@pytest.mark.parametrize("field", ["csrf", "ranking", "assignment", "\ud800"])
def test_a_lone_surrogate_in_a_json_field_is_400(tmp_path: Path, field: str) -> None:
    """Before: {"csrf": "\\ud800"} (valid JSON) reached the CSRF check and crashed it: 500 "unexpected error".
    After: 400 "not a valid form", nothing stored; the real answer is stored afterwards."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = TestClient(create_app(made.study), raise_server_exceptions=False)
    page = read_page(c, made.tokens[0])
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
    bad = {**form, field: "\ud800"}
    r = c.post(
        f"/a/{made.tokens[0]}/submit",
        content=json.dumps(bad).encode(),  # json.dumps escapes the surrogate: "\ud800"
        headers={**JSON, "content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json() == {"error": "the request body is not a valid form"}
    assert count(made.study, db.judgements) == 0
    r = c.post(f"/a/{made.tokens[0]}/submit", json=form, headers=JSON)
    assert r.json() == {"saved": True, "duplicate": False}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One real server (uvicorn on loopback) for the tests that need real sockets."""
    pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
    from vistkit.studio import simulate

    made = make_study(tmp_path_factory.mktemp("srv"), n_items=4, per_item=2, annotators=4)
    made.study.close()
    port = simulate.free_port()
    proc = simulate.start_server(made.path, port)
    try:
        yield made, port, proc
    finally:
        simulate.kill(proc, 15)


def _raw(port: int, data: bytes, *, close_after: bool = False, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if close_after:
            return b""
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def test_a_sender_that_vanishes_mid_body_or_trickles_it_blocks_nobody(server) -> None:  # type: ignore[no-untyped-def]
    """A client that announces a body and hangs up (before: "Exception in ASGI application" and a traceback in
    the server's log), and one that sends a byte and waits: the others are answered at once, and the server
    keeps running."""
    import httpx

    made, port, proc = server
    head = f"POST /a/{made.tokens[0]}/submit HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
    _raw(port, (head + "Content-Length: 500\r\n\r\nassignment=1").encode(), close_after=True)
    slow = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        slow.sendall((head + "Content-Length: 500\r\n\r\na").encode())  # and nothing more
        start = time.monotonic()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
            status, body = _submit(c, made.tokens[1])  # type: ignore[arg-type]
        assert (status, body) == (200, {"saved": True, "duplicate": False})
        assert time.monotonic() - start < 3
    finally:
        slow.close()
    reply = _raw(port, b"GET /a/" + b"x" * 1_000_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")  # a 10^6-char token
    assert reply.startswith(b"HTTP/1.1 4")
    reply = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 4")
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).text == "ok"
    assert proc.poll() is None
    time.sleep(0.2)  # the disconnect is logged, if at all, once the server notices it
    proc.send_signal(15)
    proc.wait(timeout=20)
    log = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-2000:]


# ------------------------------------------------------------------------------------------- studio verbs
@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("a\x00b", "control character U+0000"),
        ("\u202eevil", "U+202E"),  # right-to-left override: a name shown reversed in every report
        ("pilot\u200b", "U+200B"),  # zero-width space: two names that look alike
        ("a\nb", "U+000A"),
        ("\ud800", "U+D800"),  # a lone surrogate (before: a crash)
        ("x" * 1_000_000, "1,000,000 characters long"),
        ("", "--prefix is empty"),
        (" pilot", "starts or ends with a space"),
    ],
)
def test_invite_refuses_prefixes_no_report_can_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prefix: str, said: str
) -> None:
    """Before: any --prefix was stored as part of annotator names (NUL, bidi overrides, a million characters
    in a 128-character column). After: one sentence, no annotator added."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    made.study.close()
    assert main(["studio", "invite", str(made.path), "--prefix", prefix]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --prefix") and said in err and len(err.splitlines()) == 1
    assert _judgements_in(made.path) == 0
    st = db.open_study(made.path)
    assert count(st, db.annotators) == 1
    assert service.invite(st, n=1, prefix="Pilot 日本 😀")[0][0] == "Pilot 日本 😀-002"  # visible text is fine
    st.close()


@pytest.mark.parametrize(
    ("title", "said"),
    [
        ("Pilot\u202e2", "U+202E"),  # a right-to-left override would reverse the rest of every page's heading
        ("a\x07b", "U+0007"),
        ("two\nlines", "U+000A"),
        ("x" * 201, "201 characters long, more than 200"),
        ("   ", "--title is empty"),
        ("pilot ", "starts or ends with a space"),
    ],
)
def test_init_refuses_titles_no_page_can_show(tmp_path: Path, title: str, said: str) -> None:
    """Before: `studio init --title` stored any text (control and bidi characters) and every page showed it.
    After: the --prefix rules, up to 200 characters; no study file is left."""
    from vistkit.errors import InputError

    with pytest.raises(InputError, match=r"^--title ") as info:
        make_study(tmp_path, n_items=1, per_item=1, annotators=1, title=title)
    assert said in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "rank.db").exists()
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1, title="Cafe\u0301 日本 😀")
    assert made.study.setting("title") == "Caf\u00e9 日本 😀"  # NFC, as the prefix
    made.study.close()


def test_status_says_why_agreement_is_undefined(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: alpha was a blank cell with 0 judgements, one annotator or identical answers. After: n/a and a
    note saying why (JSON: alpha_undefined)."""
    made = make_study(tmp_path, task="likert", n_items=1, per_item=2, annotators=2, systems=2, aspects=["coherent"])
    c = TestClient(create_app(made.study))
    assert main(["studio", "status", str(made.path)]) == 0
    assert "note: alpha (coherent) is undefined: nothing has been judged yet" in capsys.readouterr().out
    for token in made.tokens[:1]:
        while read_page(c, token).assignment:
            assert _submit(c, token, coherent="3")[0] == 200
    assert main(["studio", "status", str(made.path)]) == 0
    out = capsys.readouterr().out
    assert "n/a" in out and "undefined: only one annotator has judged so far" in out
    while read_page(c, made.tokens[1]).assignment:
        assert _submit(c, made.tokens[1], coherent="3")[0] == 200
    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["alpha"] == {"coherent": None}
    assert s["alpha_undefined"] == {"coherent": "every answer is the same (3), so agreement beyond chance is undefined"}


# ------------------------------------------------------------------------------------------- meta readers
def test_likert_and_pairs_errors_name_the_files_line_after_multi_line_cells(tmp_path: Path) -> None:
    """Before: the line was the row number + 1, wrong after a quoted multi-line text or a blank line (the
    message sent users to the wrong row). After: the file's line."""
    from vistkit.errors import InputError
    from vistkit.meta.human import read_likert, read_pairs, read_rankings

    likert = tmp_path / "l.csv"
    likert.write_text('system,item,worker,q,text\n\nh,i1,w1,3,"two\nlines"\nm,i1,w1,9,x\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"l\.csv line 5: rating 'q' is '9'"):
        read_likert(likert)
    pairs = tmp_path / "p.csv"
    pairs.write_text(
        'sent1,sent2,label,avg_rank_base,avg_rank_comp\n"a\nb\nc",d,-1,1,2\nx,y,zz,1,2\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"p\.csv line 5: column 'label' must be a number"):
        read_pairs(pairs)
    ranks = tmp_path / "r.csv"
    ranks.write_text('task,worker,story,rank,text\nT,w,A,1,"a\n\nb"\nT,w,B,x,c\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"r\.csv line 5: column .rank."):  # was: line 3
        read_rankings(ranks)


def test_a_large_likert_table_is_streamed_not_kept(tmp_path: Path) -> None:
    """Before: every row was kept as a dict (10^6 rows: ~780 MB, 12 s). After: per story a running sum
    (10^6 rows: ~170 MB, 8 s); here 12,000 rows peak at ~2 MB of Python allocations (kept rows: ~7 MB), and
    the means are exact."""
    import tracemalloc

    from vistkit.meta.human import read_likert

    path = tmp_path / "big.csv"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("system,item,worker,q\n")
        for i in range(60):
            for s in range(4):
                for w in range(50):
                    fh.write(f"s{s},i{i},w{w},{1 + (i + s + w) % 5}\n")
    tracemalloc.start()
    try:
        table = read_likert(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(table) == 240 and table.n_workers.tolist() == [50] * 240
    assert table.values[0, 0] == pytest.approx(sum(1 + (0 + 0 + w) % 5 for w in range(50)) / 50)
    assert peak < 4 * 2**20, peak


def test_likert_repeats_are_counted_and_named_by_line(tmp_path: Path) -> None:
    """The streamed reader refuses what the old one did: a worker's second rating of a story, with the count."""
    from vistkit.errors import InputError
    from vistkit.meta.human import read_likert

    path = tmp_path / "rep.csv"
    path.write_text("system,item,worker,q\na,i,w,3\na,i,w,4\nb,i,w,2\na,i,w,5\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"2 rows judge a story a worker already judged \(first: line 3 .* line 2\)"):
        read_likert(path)


@pytest.mark.parametrize("command", ["correlate", "errors"])
def test_a_reference_based_metric_without_references_is_refused_before_any_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Before: `meta correlate -m rovist-nr,rouge-l` (no -r) scored every story with rovist-nr, then refused
    rouge-l. After: refused before any metric is built or scores."""
    from vistkit.meta import scoring

    table = tmp_path / "t.csv"
    column, low = ("q", 2) if command == "correlate" else ("Gram", 0)
    table.write_text(
        f"system,item,worker,{column},text\nh,i1,w1,1,the dog ran .\nm,i1,w1,{low},a cat sat .\n", encoding="utf-8"
    )
    monkeypatch.setattr(scoring, "score_stories", lambda *a, **k: pytest.fail("scored before the refusal"))
    assert main(["meta", command, str(table), "-m", "rovist-nr,rouge-l"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: rouge-l is reference-based: pass --references FILE (the human stories)"
