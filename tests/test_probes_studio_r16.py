"""The studio's web pages after a lost connection, after an upgrade (cached script and stylesheet), and the study
owner's side (admin page, export, status) in odd states. Browser tests drive Debian's chromium through Playwright
and skip with a reason where either is missing; every server listens on 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import (
    change_answer,
    count,
    judgement_records,
    make_study,
    one_link_study,
    read_page,
    served_browser,
)

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")

from starlette.testclient import TestClient

from vistkit.studio import app as app_module
from vistkit.studio import db
from vistkit.studio.app import create_app

THIRD = "We went home tired. The dog slept all the way."
WAIT_MS = 30_000


def _page(context: Any, **kw: Any) -> Any:
    page = context.new_page(**kw)
    page.set_default_timeout(WAIT_MS)
    page.set_default_navigation_timeout(WAIT_MS)
    return page


# ------------------------------------------------------------------------------ cached script and stylesheet
def test_pages_name_their_script_and_stylesheet_by_content_so_an_upgrade_is_never_served_stale(
    tmp_path: Path,
) -> None:
    """Before: the pages named ``/static/studio.js`` and ``/static/studio.css`` with no version and the files were
    sent with no caching rule, so a browser could keep the script of an older vistkit by its own heuristics and run
    it against the pages of an upgraded server. Now each page names the files by their content hash, that address
    is cached for good (it never changes content), and any other address of a static file is revalidated on every
    use."""
    made = make_study(tmp_path, task="pairwise")
    client = TestClient(create_app(made.study))
    html = client.get(f"/a/{made.tokens[0]}").text
    for name in ("studio.js", "studio.css"):
        digest = hashlib.sha256((app_module.HERE / "static" / name).read_bytes()).hexdigest()[:12]
        url = f"/static/{name}?v={digest}"
        assert f'"{url}"' in html, name
        r = client.get(url)
        assert r.status_code == 200 and "immutable" in r.headers["cache-control"], r.headers
        for stale in (f"/static/{name}", f"/static/{name}?v=0123456789ab", f"/static/{name}?v={digest}&v=x"):
            r = client.get(stale)
            assert r.status_code == 200 and r.headers["cache-control"] == "no-cache", (stale, r.headers)
        assert "nosniff" in r.headers["x-content-type-options"]
    # the thank-you page and the admin page name them the same way
    done = client.get(f"/admin/{made.admin}").text
    assert re.search(r'href="/static/studio\.css\?v=[0-9a-f]{12}"', done)
    # a file that is not there is not cached
    r = client.get("/static/nothing.js?v=0123456789ab")
    assert r.status_code == 404 and r.headers["cache-control"] == "no-store"


# ------------------------------------------------------------------------------ lost connection
def _form(client: TestClient, token: str, **answer: str) -> dict[str, str]:
    page = read_page(client, token)
    assert page.assignment and page.csrf
    return {"assignment": page.assignment, "csrf": page.csrf, **answer}


def test_the_server_says_whether_an_answer_is_stored_without_storing_it(tmp_path: Path) -> None:
    """What the page asks after a lost connection: ``POST /a/TOKEN/stored`` with the form it sent answers "none",
    "same" (this very answer is stored) or "other" (another tab's answer is), stores nothing, and refuses a form
    that is not this annotator's, as a submission is refused."""
    made = make_study(tmp_path, task="pairwise")
    client = TestClient(create_app(made.study))
    tok, other = made.tokens[0], made.tokens[1]
    form = _form(client, tok, choice="A")
    json_ = {"accept": "application/json"}
    assert client.post(f"/a/{tok}/stored", data=form, headers=json_).json() == {"stored": "none"}
    assert count(made.study, db.judgements) == 0
    assert client.post(f"/a/{tok}/submit", data=form, headers=json_).json()["saved"] is True
    assert client.post(f"/a/{tok}/stored", data=form).json() == {"stored": "same"}
    assert client.post(f"/a/{tok}/stored", data={**form, "choice": "B"}).json() == {"stored": "other"}
    assert count(made.study, db.judgements) == 1
    # not this annotator's form, a forged token, no task number: refused as JSON, in one sentence
    r = client.post(f"/a/{other}/stored", data=form)
    assert r.status_code == 403 and "security token" in r.json()["error"]
    r = client.post(f"/a/{tok}/stored", data={**form, "csrf": "x"})
    assert r.status_code == 403
    r = client.post(f"/a/{tok}/stored", data={"choice": "A"})
    assert r.status_code == 422 and "task number" in r.json()["error"]
    r = client.post("/a/nobody/stored", data=form)
    assert r.status_code == 404 and "error" in r.json()
    assert count(made.study, db.judgements) == 1


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "pairwise"])
def test_an_answer_stored_before_the_connection_broke_is_said_saved(task: str, tmp_path: Path) -> None:
    """The server stores the answer, then the connection breaks before its answer reaches the browser (a train
    entering a tunnel, a Wi-Fi hand-over). Before: the page said "Not saved: the server could not be reached" and
    stayed on the task, although the answer was stored. Now the page asks the server whether it stored it and,
    since it did, moves on to the next task saying "Saved."; the answer is stored once."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task, n_items=2)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)
        change_answer(page, task)

        def stored_then_lost(route: Any) -> None:
            route.fetch()  # the server gets it and stores it...
            route.abort("connectionreset")  # ...and its answer never arrives

        page.route("**/submit", stored_then_lost)
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1", timeout=WAIT_MS)
        page.locator("#progress").filter(has_text="Task 2 of ").wait_for()
        assert page.locator("#saved").count() == 1
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
def test_an_answer_the_server_stored_after_the_page_gave_up_waiting_is_said_saved(tmp_path: Path) -> None:
    """The server stores the answer but its reply takes longer than the page waits (30 s): the page said "Not
    confirmed" and stayed there for good. Now it keeps asking the server, learns the answer is stored and moves
    on saying "Saved."."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task="pairwise", n_items=2)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.clock.install()
        page.goto(link)
        change_answer(page, "pairwise")
        held: list[Any] = []

        def stored_then_slow(route: Any) -> None:
            route.fetch()  # stored; the reply is held back
            held.append(route)

        page.route("**/submit", stored_then_slow)
        page.locator("#submit").click()
        page.locator("#submit[aria-busy=true]").wait_for()
        for _ in range(200):  # 10 s at most
            if held:
                break
            page.wait_for_timeout(50)
        page.clock.run_for(31_000)
        page.wait_for_url(f"{link}?saved=1", timeout=WAIT_MS)
        assert page.locator("#saved").count() == 1
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
def test_an_answer_that_never_reached_the_server_still_says_not_saved(tmp_path: Path) -> None:
    """The sibling: the request never reached the server (refused at once). The page says "Not saved" and stays,
    with the answer, as before: asking the server did not turn it into "Saved"."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task="pairwise", n_items=2)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)
        change_answer(page, "pairwise")
        page.route("**/submit", lambda route: route.abort("connectionrefused"))
        page.locator("#submit").click()
        page.locator("#send-status", has_text="Not saved").wait_for()
        page.wait_for_timeout(1000)  # time for the page to ask the server (bounded)
        page.wait_for_load_state("networkidle")
        assert page.url == link and page.locator("input[value='B']").is_checked()
        assert "Not saved" in page.locator("#send-status").inner_text()
    assert judgement_records(path) == []


# ------------------------------------------------------------------------------ the owner's side
def test_the_admin_page_says_why_agreement_is_undefined(tmp_path: Path) -> None:
    """Two annotators judged every pair "about the same". Before: the admin page's agreement row said "n/a (too
    few overlapping judgements)", though every task was judged twice, and `status` said "every answer is the
    same (0)", a code the owner never saw. Now both give the real reason, in the words of the page: "about the
    same"."""
    made = make_study(tmp_path, task="pairwise", per_item=2, annotators=2)
    client = TestClient(create_app(made.study))
    assert "nothing has been judged yet" in client.get(f"/admin/{made.admin}").text
    for tok in made.tokens:
        for _ in range(20):
            page = read_page(client, tok)
            if page.assignment is None:
                break
            form = {"assignment": page.assignment, "csrf": page.csrf or "", "choice": "same"}
            assert client.post(f"/a/{tok}/submit", data=form, headers={"accept": "application/json"}).status_code == 200
    html = client.get(f"/admin/{made.admin}").text
    row = re.search(r"<td>preference</td><td>(.*?)</td>", html)
    assert row is not None and "too few" not in row.group(1), html
    assert "every answer is the same (about the same)" in row.group(1)
    summary = client.get(f"/admin/{made.admin}/summary.json").json()
    assert summary["alpha_undefined"]["preference"].startswith("every answer is the same (about the same)")
