"""The annotator's and the organiser's pages in a real browser (Debian's chromium driven by Playwright): how the
page moves on after an answer, high-contrast themes, a larger browser font on a phone, slow photos, and a server
restarted in the middle of a task. Browser tests skip with a reason when Playwright or chromium is absent; every
wait is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from studio_helpers import (
    CHROMIUM,
    change_answer,
    judgement_records,
    one_link_study,
    playwright_or_skip,
    serve_child,
    served_browser,
)

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")

from vistkit.studio import db, service

THIRD = "We went home tired. The dog slept all the way."
WAIT_MS = 30_000  # the box may be busy; every wait is still bounded


def _page(context: Any, **kw: Any) -> Any:
    """A new tab of ``context`` (a browser: its own context) with bounded waits."""
    page = context.new_page(**kw)
    page.set_default_timeout(WAIT_MS)
    page.set_default_navigation_timeout(WAIT_MS)
    return page


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "pairwise"])
def test_back_after_several_answers_leaves_the_study(task: str, tmp_path: Path) -> None:
    """An annotator comes from the study's invitation (another page), answers three tasks, then presses Back once
    to return where they came from. Before, each saved answer added a history entry, so Back showed the current
    task again, once per task answered (20 presses after 20 tasks). Now the next task replaces the answered one,
    so one Back leaves the study; nothing is stored twice and nothing is lost."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task, n_items=4)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(f"{base}/healthz")  # where the annotator came from
        page.goto(link)
        total = page.locator("#progress").inner_text().split(" of ")[1]
        for n in range(1, 4):
            change_answer(page, task)
            # from the second task on the next address is the one already shown (?saved=1): wait for the
            # navigation itself, not for an address that already matches
            with page.expect_navigation(url=f"{link}?saved=1", timeout=60_000):
                page.locator("#submit").click()
            page.locator("#progress").filter(has_text=f"Task {n + 1} of {total}").wait_for(timeout=30_000)
        assert page.locator("#saved").count() == 1
        page.go_back()
        page.wait_for_url(f"{base}/healthz")
        page.go_forward()
        page.wait_for_url(link)
        assert page.locator("#progress").inner_text() == f"Task 4 of {total}"
        assert page.locator("#saved").count() == 0  # nothing was just saved
    assert len(judgement_records(path)) == 3


@pytest.mark.slow
def test_in_high_contrast_mode_the_submit_button_and_a_picked_up_story_can_be_seen(tmp_path: Path) -> None:
    """Windows' high-contrast themes (forced colours) replace a page's colours by the user's few: before, the
    Submit button, drawn only by its blue background, was plain text with no edge, and a story picked up by
    keyboard (Space) looked exactly like one that was not, since only its colours changed. Now the button has an
    edge and a picked-up story's border changes shape, in forced colours as in ordinary ones."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        for forced in ("active", "none"):
            page = _page(browser)
            page.emulate_media(forced_colors=forced)
            page.goto(f"{base}/a/{token}")
            edge = page.locator("#submit").evaluate(
                "b => { const s = getComputedStyle(b); return [s.borderTopStyle, parseFloat(s.borderTopWidth)]; }"
            )
            assert edge[0] != "none" and edge[1] >= 1, (forced, edge)
            story = page.locator("li.story").first
            story.focus()
            before = story.screenshot()
            page.keyboard.press("Space")
            assert page.locator("li.story.grabbed").count() == 1
            assert story.screenshot() != before, forced
            page.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "likert", "pairwise"])
def test_the_pages_follow_the_browsers_font_size_without_a_sideways_scroll(task: str, tmp_path: Path) -> None:
    """A low-vision annotator sets their browser's font size to 32 (twice the usual) instead of zooming: before,
    every studio page stayed at 16 pixels (its size was fixed in pixels), while other sites grew. Now the task
    and admin pages follow that setting, and on a phone-wide screen nothing runs off the side."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task)
    st = db.open_study(path)
    admin = service.new_admin_token(st)
    st.engine.dispose()
    with served_browser(path) as (browser, base):
        context = browser.new_context(viewport={"width": 320, "height": 640})
        page = _page(context)
        context.new_cdp_session(page).send("Page.setFontSizes", {"fontSizes": {"standard": 32}})
        for where in (f"/a/{token}", f"/admin/{admin}"):
            page.goto(base + where)
            size, wide = page.evaluate(
                "[getComputedStyle(document.body).fontSize, document.documentElement.scrollWidth]"
            )
            assert (size, wide) == ("32px", 320), where
        context.close()


@pytest.mark.slow
def test_photos_still_loading_say_so_until_they_come(tmp_path: Path) -> None:
    """The photos come from a slow server (a busy photo host, a weak connection): before, the annotator saw five
    empty grey boxes with no word, not knowing whether photos were on their way or the study had none, and ranked
    the stories without them. Now each box says the photo is loading; the note goes once the photo comes (and a
    photo that fails says it could not be loaded, as before)."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        page = _page(browser)
        held: list[Any] = []
        page.route("**/photos/**", lambda route: held.append(route))
        page.goto(f"{base}/a/{token}", wait_until="domcontentloaded")
        notes = page.locator("ol.photos li", has_text="loading")
        notes.nth(4).wait_for()
        assert notes.count() == 5
        first = page.locator("ol.photos li").first
        assert "Photo 1 of 5" in first.inner_text()
        while len(held) < 5:
            page.wait_for_timeout(50)
        held[0].continue_()  # the first photo comes
        held[1].abort()  # the second fails
        first.locator("img").wait_for()
        page.wait_for_function("() => document.querySelector('ol.photos img').naturalWidth > 0")
        notes.nth(2).wait_for()
        page.wait_for_function("() => document.querySelectorAll('ol.photos li .photo-loading').length === 3")
        assert first.inner_text().strip() == ""
        assert "could not be loaded" in page.locator("ol.photos li").nth(1).inner_text()
        for route in held[2:]:
            route.continue_()
        page.wait_for_function("() => document.querySelectorAll('ol.photos li .photo-loading').length === 0")


@pytest.mark.slow
def test_a_server_restarted_mid_task_keeps_the_answer_and_stores_it_once(tmp_path: Path) -> None:
    """The organiser restarts `studio serve` while an annotator is halfway through a task: their Submit while it
    is down says it was not saved and keeps the ranking; once it is back, Submit stores it (once) and goes on, and
    a reload while it was down brings the answer in progress back."""
    from vistkit.studio import simulate

    api = playwright_or_skip()
    path, token = one_link_study(tmp_path, ("m2", THIRD), n_items=2)
    port = simulate.free_port()
    proc = serve_child(path, port)
    try:
        with api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                link = f"http://127.0.0.1:{port}/a/{token}"
                page = _page(browser)
                page.goto(link)
                change_answer(page, "rank")
                made = page.locator("#ranking").input_value()
                simulate.kill(proc, 15)
                page.locator("#submit").click()
                page.locator("#send-status", has_text="Not saved").wait_for()
                assert page.locator("#ranking").input_value() == made
                with pytest.raises(api.Error):
                    page.reload()  # the browser's own error page
                proc = serve_child(path, port)
                page.goto(link)
                assert page.locator("#ranking").input_value() == made
                page.locator("#submit").click()
                page.wait_for_url(f"{link}?saved=1")
                assert page.locator("#progress").inner_text() == "Task 2 of 2"
            finally:
                browser.close()
    finally:
        simulate.kill(proc, 15)
    [rec] = judgement_records(path)
    assert rec["answer"]["ranks"]
