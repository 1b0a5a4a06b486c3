"""Probe round 13, what people see: the annotator's page in a real browser (Debian's chromium driven by Playwright)
when the submission fails or is slow, right-to-left stories, photos that do not load; and the HTML reports opened
from disk (links to the files beside the page, nothing fetched from the internet). Browser tests skip with a reason
when Playwright or chromium is absent."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import (
    CHROMIUM,
    HUMAN,
    MACHINE_1,
    judgement_records,
    one_link_study,
    playwright_or_skip,
    served_browser,
)

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")

from vistkit.studio import db, service, simulate
from vistkit.studio.plan import PlanItem, PlanStory, create_study

RTL = "ذهبنا إلى الشاطئ. كان الرمل دافئا!"







def _refuse_submits(page: Any, status: int, error: str) -> None:
    """Answer the page's submits as the server refuses one: ``status`` with its JSON sentence."""
    body = json.dumps({"error": error})
    page.route("**/submit", lambda route: route.fulfill(status=status, content_type="application/json", body=body))


@pytest.mark.slow
def test_a_failed_or_refused_submission_keeps_the_answer_and_says_so(tmp_path: Path) -> None:
    """The network drops the submission (or the server answers 503): the annotator stays on the page, is told in
    words that it was not saved, the ranking they made is still there and Submit works again; a double click
    sends one request; a reload or Back afterwards neither says "Saved." again nor stores twice. Before: Chromium's
    "This site can't be reached" page, and Back showed the task with the ranking reset to the first order (the
    work lost); a reload of the next task said "Saved." again."""
    path, token = one_link_study(tmp_path, ("rtl", RTL))
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = browser.new_page(viewport={"width": 375, "height": 667})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(link)
        page.locator("li.story button.down").first.click()
        ranking = page.locator("#ranking").input_value()
        assert ranking == "2,1,3"
        order = page.locator("#ranking-list .text").all_inner_texts()

        page.route("**/submit", lambda route: route.abort())
        page.locator("#submit").click()
        alert = page.locator("#send-status")
        alert.wait_for(state="visible", timeout=10_000)
        assert page.url == link
        assert "not saved" in alert.inner_text().lower() and "again" in alert.inner_text()
        assert page.locator("#ranking").input_value() == ranking
        assert page.locator("#ranking-list .text").all_inner_texts() == order
        assert not page.locator("#submit").is_disabled()
        page.unroute("**/submit")

        # the server refuses for now (503): its sentence is shown, the answer kept
        message = "the study could not be saved (the study is busy); your answer was not stored"
        _refuse_submits(page, 503, message)
        page.locator("#submit").click()
        page.locator("#send-status", has_text="busy").wait_for(timeout=10_000)
        assert "again" in alert.inner_text()
        assert not page.locator("#submit").is_disabled()
        page.unroute("**/submit")
        assert judgement_records(path) == []

        # now it goes through, once, even double-clicked
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        page.locator("#submit").dblclick()
        page.wait_for_url(f"{link}?saved=1")
        assert page.locator("#saved").count() == 1 and page.locator("#progress").inner_text() == "Task 2 of 2"
        assert len(posts) == 1, posts
        # a reload does not say "Saved." again (nothing was just saved), and neither it nor Back (which leaves
        # the study: the next task took the answered one's place) then Forward stores anything twice or loses the
        # stored answer
        page.reload()
        assert page.locator("#saved").count() == 0 and page.locator("#progress").inner_text() == "Task 2 of 2"
        page.go_back()
        page.wait_for_load_state()
        assert not page.url.startswith(link)
        page.go_forward()
        page.wait_for_load_state()
        assert page.locator("#saved").count() == 0 and page.locator("#progress").inner_text() == "Task 2 of 2"
        assert len(judgement_records(path)) == 1
        assert errors == []
    [rec] = judgement_records(path)
    first, second = (t for t in order[:2])
    ranks = rec["answer"]["ranks"]
    by_text = {HUMAN[0]: "human", MACHINE_1[0]: "m1", RTL: "rtl"}
    assert ranks[by_text[first]] == 1 and ranks[by_text[second]] == 2


@pytest.mark.slow
def test_right_to_left_stories_and_photos_that_do_not_load(tmp_path: Path) -> None:
    """An Arabic story is laid out right to left (its full stop at its end, on the left), the others left to
    right; photos whose address answers nothing show a box that says the photo could not be loaded instead of
    Chromium's broken-image icon. Before: every story was left to right and the photos were broken icons."""
    dead = simulate.free_port()  # nothing listens there
    path, token = one_link_study(tmp_path, ("rtl", RTL), photo_url=f"http://127.0.0.1:{dead}/{{id}}.jpg")
    with served_browser(path) as (browser, base):
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(f"{base}/a/{token}")
        # where the first and the last letter of each story are drawn: right to left, the first is right
        ends = page.evaluate(
            """Array.from(document.querySelectorAll('div.text')).map(e => {
                const t = e.firstChild, x = [];
                for (const i of [0, t.length - 1]) {
                    const r = document.createRange();
                    r.setStart(t, i); r.setEnd(t, i + 1); x.push(r.getBoundingClientRect());
                }
                const box = e.getBoundingClientRect();
                return [e.innerText, x[0].left > x[1].left, box.right - x[0].right < 40];
            })"""
        )
        assert [(rtl, right) for t, rtl, right in ends if t == RTL] == [(True, True)], ends
        assert {(rtl, right) for t, rtl, right in ends if t != RTL} == {(False, False)}, ends
        page.wait_for_function("document.querySelectorAll('ol.photos img').length === 0", timeout=10_000)
        boxes = page.locator("ol.photos .nophoto").all_inner_texts()
        assert len(boxes) == 5 and all("could not be loaded" in b for b in boxes), boxes
        assert "Photo 1" in boxes[0]


def test_a_photo_the_study_lacks_says_so_without_javascript(tmp_path: Path) -> None:
    """A study without photos shows numbered boxes; each now says the photo is missing (a grey "Photo 1" box read
    like one still loading); stories take their direction from their text (CSS ``unicode-bidi: plaintext``), so
    right-to-left text lays out without JavaScript."""
    from starlette.testclient import TestClient

    from vistkit.studio.app import create_app

    items = [PlanItem("s0", ("p1", "p2", "p3"), [PlanStory("human", "s0", HUMAN[0]), PlanStory("rtl", "s0", RTL)])]
    path = tmp_path / "study.db"
    create_study(path, task="pairwise", items=items, per_item=1, seed=1)
    st = db.open_study(path)
    [(_, token)] = service.invite(st, n=1)
    with TestClient(create_app(st)) as client:
        html = client.get(f"/a/{token}").text
        css = client.get("/static/studio.css").text
    assert "not available" in html
    assert re.search(r"\.story \.text \{[^}]*unicode-bidi: plaintext", css)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []
        self.metas: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("href", "src", "action", "data", "poster"):
                self.urls.append((tag, v or ""))
        if tag == "meta":
            self.metas.append(dict(attrs))


def _meta_reports(tmp_path: Path) -> list[Path]:
    from meta_dummies import FIX, dummy_metrics_registered

    from vistkit.cli import main

    out = []
    with dummy_metrics_registered():
        for verb in ("pairs",):
            folder = tmp_path / f"report-{verb}"
            args = ["meta", verb, str(FIX / "vhed_small.csv"), "-m", "meta-test-length,meta-test-shortness"]
            assert main([*args, "--report", str(folder)]) == 0
            out.append(folder)
    return out


def test_report_pages_name_the_files_beside_them_and_load_nothing_from_the_net(tmp_path: Path) -> None:
    """Every PDF, CSV and LaTeX file the report writes is named on the page next to its figure or table (before:
    the tables' files were named nowhere, so a reader of the page did not know they existed); every address on
    the page is an inline image (works offline, as test_probes_reports_r10 requires); the page is laid out for a
    phone's width too (viewport meta: before, a phone showed it zoomed out, unreadable)."""
    for folder in _meta_reports(tmp_path):
        page = (folder / "index.html").read_text(encoding="utf-8")
        parser = _Links()
        parser.feed(page)
        assert parser.urls and all(u.startswith("data:image/png;base64,") for _, u in parser.urls)
        named = set(re.findall(r"<code>([^<>]+\.(?:pdf|csv|tex))</code>", page))
        written = {p.name for p in folder.iterdir() if p.suffix in (".pdf", ".csv", ".tex")}
        assert written and named == written, (written - named, named - written)
        assert any(m.get("name") == "viewport" for m in parser.metas)


@pytest.mark.slow
def test_report_opens_offline_in_a_real_browser_on_a_phone(tmp_path: Path) -> None:
    """Opened from disk on a 375 px wide screen: every request is for a file: or data: address (nothing from the
    internet); the page is laid out at the phone's width (before: 575 px wide, shown zoomed out, because the
    accuracy table is wider than the screen), a wide table scrolling sideways in its own box."""
    api = playwright_or_skip()
    [folder] = _meta_reports(tmp_path)
    with api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 375, "height": 667}, is_mobile=True)
            asked: list[str] = []
            page.on("request", lambda r: asked.append(r.url))
            page.goto((folder / "index.html").as_uri())
            page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
            assert all(u.startswith(("file:", "data:")) for u in asked), asked
            assert page.evaluate("window.innerWidth") == 375  # not a zoomed-out 980 px desktop layout
            assert page.evaluate("document.documentElement.scrollWidth") <= 375
            # a table wider than the screen scrolls in its own box, and shows its first columns
            boxes = page.locator("table").evaluate_all(
                "ts => ts.map(t => [t.scrollWidth > t.parentElement.clientWidth, getComputedStyle(t.parentElement)"
                ".overflowX])"
            )
            assert any(wide for wide, _ in boxes) and all(o == "auto" for wide, o in boxes if wide), boxes
        finally:
            browser.close()


@pytest.mark.slow
def test_the_admin_page_fits_a_phone_with_many_annotators(tmp_path: Path) -> None:
    """The admin page of a study with judgements (annotators with a last-seen time) on a 375 px screen: laid out
    at the phone's width, a wide table scrolling in its own box. Before: the annotators table made the page 519 px
    wide, so the phone showed all of it zoomed out, unreadable."""
    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=40, per_item=3, annotators=60)
    with TestClient(create_app(made.study)) as client:
        for token in made.tokens:
            assert submit_ranking(client, token).status_code == 200
    made.study.engine.dispose()
    with served_browser(made.path) as (browser, base):
        page = browser.new_page(viewport={"width": 375, "height": 667}, is_mobile=True)
        page.goto(f"{base}/admin/{made.admin}")
        assert page.locator("#annotators tr").count() == 61
        assert page.evaluate("window.innerWidth") == 375
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        wide = page.locator("table").evaluate_all(
            "ts => ts.filter(t => t.scrollWidth > t.parentElement.clientWidth)"
            ".map(t => getComputedStyle(t.parentElement).overflowX)"
        )
        assert wide and set(wide) == {"auto"}, wide


@pytest.mark.slow
def test_a_likert_page_keeps_its_choices_when_the_submission_fails(tmp_path: Path) -> None:
    """Likert (as pairwise: every task kind, not only ranking): the network drops the submission, the choices stay
    checked and the annotator is told to press Submit again; an answer the server refuses for good (409: the task
    is no longer theirs) shows the server's sentence without the advice to resend it. Before: the browser's error
    page, and the choices lost."""
    path, token = one_link_study(tmp_path, ("rtl", RTL), task="likert")
    with served_browser(path) as (browser, base):
        page = browser.new_page(viewport={"width": 375, "height": 667})
        page.goto(f"{base}/a/{token}")
        names = page.locator("fieldset.likert input[value='4']").evaluate_all("xs => xs.map(x => x.name)")
        for name in names:
            page.locator(f"input[name='{name}'][value='4']").check()
        page.route("**/submit", lambda route: route.abort())
        page.locator("#submit").click()
        page.locator("#send-status", has_text="again").wait_for(timeout=10_000)
        assert page.locator("input[value='4']:checked").count() == len(names) > 0
        page.unroute("**/submit")
        refused = "this task is not (or no longer) assigned to you; reload the page"
        _refuse_submits(page, 409, refused)
        page.locator("#submit").click()
        page.locator("#send-status", has_text="no longer").wait_for(timeout=10_000)
        assert "again" not in page.locator("#send-status").inner_text()
    assert judgement_records(path) == []


@pytest.mark.slow
def test_the_task_page_still_works_without_javascript(tmp_path: Path) -> None:
    """With JavaScript off the form posts as a page: the (empty) notice stays hidden, the submission is stored and
    the next task says it was saved."""
    path, token = one_link_study(tmp_path, ("rtl", RTL), task="pairwise")
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = browser.new_page(java_script_enabled=False)
        page.goto(link)
        assert not page.locator("#send-status").is_visible()
        page.locator("input[name='choice'][value='A']").check()
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
        assert page.locator("#saved").count() == 1
    assert len(judgement_records(path)) == 1
