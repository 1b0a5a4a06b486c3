"""The studio under faults on the owner's side: a static file changed under a running server, an invite link
withdrawn while its holder's page is loading, and other races of the owner's commands with serving. Every server
listens on 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from studio_helpers import make_study, read_page, served_browser

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from vistkit.studio import app as app_module
from vistkit.studio import service
from vistkit.studio.app import VersionedStatic, create_app


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


# ------------------------------------------------------------------------------ static files changed while serving
def test_a_static_file_changed_while_serving_is_never_cached_under_its_old_version(tmp_path: Path) -> None:
    """Before: the content hashes were taken once when the server started, so after the file changed on disk
    (vistkit upgraded in place under a running server) the old address ``?v=OLD`` served the new content with
    "cache for a year", and the pages went on naming the old address: a browser kept whichever it got first,
    under a name that no longer says which content it is. Now the hash follows the file: the pages name the new
    hash, that address is cached for good, and the old one is revalidated on each use."""
    folder = tmp_path / "static"
    folder.mkdir()
    js = folder / "studio.js"
    js.write_text("console.log('old');\n")
    versions = app_module.StaticVersions(folder)
    old = versions["studio.js"]
    assert old == _digest(js.read_bytes())
    client = TestClient(Starlette(routes=[Mount("/static", app=VersionedStatic(folder, versions))]))
    r = client.get(f"/static/studio.js?v={old}")
    assert r.status_code == 200 and "immutable" in r.headers["cache-control"]

    js.write_text("console.log('new, and longer');\n")
    new = versions["studio.js"]
    assert new == _digest(js.read_bytes()) != old
    r = client.get(f"/static/studio.js?v={old}")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-cache", r.headers
    r = client.get(f"/static/studio.js?v={new}")
    assert r.status_code == 200 and "immutable" in r.headers["cache-control"] and "new" in r.text


def test_the_pages_name_the_static_files_as_they_are_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages of a running server name each static file by the hash of its content at the time of the page,
    not the one it had when the server started."""
    import shutil

    folder = tmp_path / "static"
    shutil.copytree(app_module.HERE / "static", folder)
    monkeypatch.setattr(app_module, "STATIC_FOLDER", folder)
    made = make_study(tmp_path, task="pairwise")
    client = TestClient(create_app(made.study))
    before = read_page(client, made.tokens[0]).html
    css = folder / "studio.css"
    assert f"studio.css?v={_digest(css.read_bytes())}" in before
    css.write_text(css.read_text() + "\n/* upgraded */\n")
    after = client.get(f"/admin/{made.admin}").text
    assert f"studio.css?v={_digest(css.read_bytes())}" in after
    r = client.get(f"/static/studio.css?v={_digest(css.read_bytes())}")
    assert "upgraded" in r.text and "immutable" in r.headers["cache-control"]


# ------------------------------------------------------------------------------ withdrawn while loading
def test_a_link_withdrawn_while_its_page_loads_is_told_it_is_withdrawn_not_a_server_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `studio invite --withdraw NAME` between the server reading who the link is and claiming a task for
    them made the claim fail on the database's foreign key: a 500 "unexpected error" for the annotator and a
    traceback in the server's log. Now the claim sees the annotator is gone: 404, the link was withdrawn, and
    nothing is claimed."""
    made = make_study(tmp_path, task="rank", annotators=3)
    real_claim = service.claim_next

    def withdrawn_first(st, who):  # type: ignore[no-untyped-def]
        service.withdraw_annotators(st, [who.name])
        return real_claim(st, who)

    monkeypatch.setattr(service, "claim_next", withdrawn_first)
    client = TestClient(create_app(made.study), raise_server_exceptions=False)
    r = client.get(f"/a/{made.tokens[2]}")
    assert r.status_code == 404, (r.status_code, r.text[-300:])
    assert "withdrawn" in r.text and "unexpected" not in r.text
    from studio_helpers import count

    from vistkit.studio import db

    assert count(made.study, db.annotators) == 2


def test_a_claim_for_an_annotator_removed_meanwhile_is_refused_in_one_sentence(tmp_path: Path) -> None:
    """The service itself: `claim_next` for an annotator withdrawn after they were looked up is a `StudioError`
    404, not the database's IntegrityError."""
    made = make_study(tmp_path, task="pairwise", annotators=2)
    with made.study.read() as conn:
        who = service.authenticate(conn, made.tokens[1])
    assert who is not None
    service.withdraw_annotators(made.study, [who.name])
    with pytest.raises(service.StudioError) as info:
        service.claim_next(made.study, who)
    assert info.value.status == 404 and "withdrawn" in info.value.message


# ------------------------------------------------------------------------------ the owner's commands while serving
def test_the_admin_page_of_a_running_server_names_links_an_invite_run_left_unsent(tmp_path: Path) -> None:
    """Before: the server read the study's settings once, when it started, so annotators left unsent by an
    `invite` run killed while the study was served (the usual case: links are made while the study runs) never
    showed on the admin page or in summary.json, though the docs say the admin page names them; `status` did.
    Now each admin page reads the settings of its own snapshot; withdrawing them clears the note again."""
    from vistkit.studio import db

    made = make_study(tmp_path, task="rank")
    client = TestClient(create_app(made.study))
    assert 'id="unsent-invites"' not in client.get(f"/admin/{made.admin}").text
    other = db.open_study(made.path)  # `studio invite` in another process, killed before its links were written
    try:
        names = [n for n, _ in service.invite(other, n=2, unsent=True)]
    finally:
        other.engine.dispose()
    page = client.get(f"/admin/{made.admin}").text
    assert 'id="unsent-invites"' in page and all(n in page for n in names)
    assert client.get(f"/admin/{made.admin}/summary.json").json()["unsent_invites"] == names
    other = db.open_study(made.path)  # `studio invite --withdraw unsent`, also from another process
    try:
        service.withdraw_annotators(other, ["unsent"], settle_s=0)
    finally:
        other.engine.dispose()
    assert 'id="unsent-invites"' not in client.get(f"/admin/{made.admin}").text


def test_an_annotator_named_with_a_comma_can_be_withdrawn_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `invite --prefix "pilot, batch 2"` made ``pilot, batch 2-001``, and `--withdraw "pilot, batch
    2-001"` (the name as `status` shows it) split it at the comma and said "pilot, batch 2-001 are not
    annotators". Now a --withdraw that is one annotator's whole name withdraws that annotator, and a new --prefix
    with a comma is refused in one sentence (the names would be ambiguous in --withdraw lists)."""
    from vistkit.cli import main
    from vistkit.studio import db

    made = make_study(tmp_path, task="rank", annotators=1)
    with made.study.write() as conn:  # a study whose names have commas (made before they were refused)
        conn.execute(
            db.annotators.insert().values(
                name="pilot, batch 2-001", token_hash=db.token_hash("t"), created_at=db.now()
            )
        )
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--withdraw", "pilot, batch 2-001", "-f", "json"]) == 0
    out = capsys.readouterr()
    assert "pilot, batch 2-001" in out.out and "not annotators" not in out.err
    st = db.open_study(made.path)
    try:
        from studio_helpers import count

        assert count(st, db.annotators) == 1
    finally:
        st.engine.dispose()
    # names separated by commas still work
    assert main(["studio", "invite", str(made.path), "--n", "2", "--prefix", "b"]) == 0
    capsys.readouterr()
    assert main(["studio", "invite", str(made.path), "--withdraw", "b-002, b-003", "-f", "json"]) == 0
    assert "b-002" in capsys.readouterr().out
    # a new prefix with a comma
    assert main(["studio", "invite", str(made.path), "--prefix", "pilot, batch 3"]) == 1
    err = capsys.readouterr().err
    assert "--prefix" in err and "comma" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ the page's check after a lost answer
def test_a_lost_submission_the_server_refused_for_good_says_why_instead_of_waiting(tmp_path: Path) -> None:
    """Before: when a submission's connection broke, the page asked ``/stored`` and, on any answer but
    stored/none/other, kept saying "the server could not be reached ... moves on by itself" and asked again every
    5 s for 10 minutes, although the server had said for good why (here the task had gone to another annotator
    after the claim timeout: "not (or no longer) assigned to you"). Now such a refusal (4xx other than 408 and
    429) stops the asking and is shown, with the link that reloads the page."""
    import time

    import httpx

    made = make_study(
        tmp_path, task="pairwise", n_items=1, systems=2, per_item=1, annotators=2, claim_timeout=1.0
    )
    made.study.close()
    with served_browser(made.path) as (browser, base):
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/a/{made.tokens[0]}")
        page.locator("input[name='choice'][value='B']").check()
        time.sleep(1.5)  # past the claim timeout: the only task goes to the second annotator
        assert 'name="assignment"' in httpx.get(f"{base}/a/{made.tokens[1]}", timeout=30).text
        page.route("**/submit", lambda route: route.abort())  # the connection breaks
        page.locator("#submit").click()
        notice = page.locator("#send-status")
        notice.filter(has_text="no longer) assigned to you").wait_for(timeout=20_000)
        assert "could not be reached" not in notice.inner_text()
        assert notice.locator("a").count() == 1  # "Reload the page"
        context.close()


# ------------------------------------------------------------------------------ a slow admin check
def test_a_slow_admin_link_check_does_not_stop_the_server_answering_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the admin pages checked their token with a database read on the server's event loop, so while that
    read waited (a busy disk, every pooled connection in use by other pages) no other request was answered, not
    even /healthz. Now the check runs in a worker thread as every other database read does."""
    import threading
    import time

    import httpx
    import uvicorn

    from vistkit.studio import simulate

    made = make_study(tmp_path, task="rank")
    real = service.is_admin

    def slow_is_admin(st, token):  # type: ignore[no-untyped-def]
        time.sleep(3.0)  # a read that waits
        return real(st, token)

    monkeypatch.setattr(service, "is_admin", slow_is_admin)
    port = simulate.free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(made.study), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        admin = threading.Thread(target=lambda: httpx.get(f"{base}/admin/{made.admin}", timeout=30), daemon=True)
        admin.start()
        time.sleep(0.5)  # the admin check is waiting now
        t0 = time.monotonic()
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
        assert time.monotonic() - t0 < 1.5, "the server answered nothing while the admin link was checked"
        admin.join(timeout=30)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
