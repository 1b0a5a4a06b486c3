"""Probe round 14, the annotator's page in a real browser (Debian's chromium driven by Playwright): a ranking made
without JavaScript, a reload or Back/Forward in the middle of a task, keyboard use of the arrow buttons, a
submission redirected by a sign-in proxy, and a refused submission with nothing to do next. Browser tests skip
with a reason when Playwright or chromium is absent; every wait is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from studio_helpers import (
    change_answer,
    judgement_records,
    one_link_study,
    served_browser,
)

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")


THIRD = "We went home tired. The dog slept all the way."
WAIT_MS = 30_000  # the box may be busy; every wait is still bounded









def _page(browser: Any, **options: Any) -> Any:
    page = browser.new_page(**options)
    page.set_default_timeout(WAIT_MS)
    page.set_default_navigation_timeout(WAIT_MS)
    return page


@pytest.mark.slow
def test_a_ranking_cannot_be_made_without_javascript_and_is_not_stored_as_shown(tmp_path: Path) -> None:
    """With JavaScript off (or studio.js not loaded) the stories cannot be reordered, yet Submit stored the order
    they were shown in as the annotator's ranking, without a word: a ranking nobody made. Now the page says that
    ordering needs its script (a paragraph the script removes: no <noscript>, so a script that failed to load is
    covered too), and a submission without it is refused (nothing stored)."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        page = _page(browser, java_script_enabled=False)
        page.goto(f"{base}/a/{token}")
        assert page.locator("#ranking").input_value() == ""
        assert page.locator("#needs-script").is_visible() and "JavaScript" in page.locator("#needs-script").inner_text()
        page.locator("#submit").click()
        page.wait_for_load_state()
        assert "Not saved" in page.content()
        # the script did not load (a dropped connection, a filter): the same notice, and the same refusal
        page = _page(browser)
        page.route("**/static/studio.js*", lambda route: route.abort())
        page.goto(f"{base}/a/{token}")
        assert page.locator("#needs-script").is_visible() and page.locator("#ranking").input_value() == ""
        # with JavaScript the untouched order is sent as before (the annotator saw it and agreed)
        page = _page(browser)
        page.goto(f"{base}/a/{token}")
        assert page.locator("#ranking").input_value() == "1,2,3"
        assert page.locator("#needs-script").count() == 0  # the script ran: no such notice
    assert judgement_records(path) == []


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "likert", "pairwise"])
def test_a_reload_or_back_and_forward_mid_task_keeps_the_answer_made_so_far(task: str, tmp_path: Path) -> None:
    """An annotator halfway through a task reloads the page (or goes Back and Forward): before, the ranking went
    back to the shown order and every Likert or pairwise choice was cleared (the page is sent ``no-store``, so the
    browser restores nothing). Now the answer in progress comes back, for this task only: after the submission
    the next task starts blank."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)

        def answer() -> Any:
            if task == "rank":
                return page.locator("#ranking-list .text").all_inner_texts(), page.locator("#ranking").input_value()
            return sorted(page.locator("input[type=radio]:checked").evaluate_all("xs => xs.map(x => x.name + x.value)"))

        change_answer(page, task)
        made = answer()
        assert made not in ([], (page.locator("#ranking-list .text").all_inner_texts(), "1,2,3"))
        page.reload()
        assert answer() == made
        page.goto(f"{base}/")
        page.go_back()
        page.wait_for_load_state()
        assert answer() == made
        if task == "rank":
            assert page.locator("#ranking").input_value() == made[1] != "1,2,3"
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
        assert page.locator("#progress").inner_text().startswith("Task 2 of ")
        blank = answer()
        assert blank == [] or blank[1] == "1,2,3", blank
    [rec] = judgement_records(path)
    if task == "rank":
        assert len(rec["answer"]["ranks"]) == 3


@pytest.mark.slow
def test_the_arrow_buttons_keep_the_keyboard_focus(tmp_path: Path) -> None:
    """A keyboard user presses Space on "Move story down" twice: before, the first press moved the story and put
    the focus on the story itself, so the second press picked the story up ("grabbed") instead of moving it again;
    a press at the end of the list did nothing and said nothing. Now the focus stays on the button (which moves
    with its story), each press moves it one place, and a press that cannot move it says so."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        page = _page(browser)
        page.goto(f"{base}/a/{token}")
        first = page.locator("li.story").first.get_attribute("data-label")
        page.locator("li.story button.down").first.focus()
        page.keyboard.press("Space")
        page.keyboard.press("Space")
        assert page.locator("#ranking").input_value() == "2,3,1"
        assert page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Move story {first} down"
        assert page.locator("li.story.grabbed").count() == 0
        page.keyboard.press("Enter")  # already last
        assert page.locator("#ranking").input_value() == "2,3,1"
        said = page.locator("#rank-status").inner_text()
        assert "already last" in said and f"Story {first}" in said, said
        page.keyboard.press("Shift+Tab")  # its "up" button
        page.keyboard.press("Enter")
        assert page.locator("#ranking").input_value() == "2,1,3"
        assert page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Move story {first} up"


@pytest.mark.slow
def test_a_submission_redirected_to_a_sign_in_page_says_so(tmp_path: Path) -> None:
    """A study behind a sign-in proxy whose session has ended answers the submission with a redirect to its login
    page: before, the annotator was told "the server could not be reached (check your connection)", which no
    connection check fixes. Now the notice says the submission was sent to another page (a sign-in that ended?),
    keeps the answer, and a later Submit goes through."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)
        page.locator("li.story button.down").first.click()
        page.route("**/submit", lambda route: route.fulfill(status=302, headers={"Location": "/login"}))
        page.locator("#submit").click()
        notice = page.locator("#send-status")
        notice.wait_for(state="visible")
        text = notice.inner_text()
        assert "sign" in text and "could not be reached" not in text and "again" in text, text
        assert page.url == link and page.locator("#ranking").input_value() == "2,1,3"
        page.unroute("**/submit")
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
def test_an_answer_refused_for_good_offers_the_way_on(tmp_path: Path) -> None:
    """The same task open in two tabs: the first tab's answer is stored, the second tab sends another ranking and
    is refused (409, already submitted with another answer). Before, the notice ended there, Submit kept failing
    and nothing on the page led on. Now the notice has a link that reloads the page, which shows the next task."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        one, two = _page(browser), _page(browser)
        one.goto(link)
        two.goto(link)
        one.locator("#submit").click()
        one.wait_for_url(f"{link}?saved=1")
        two.locator("li.story button.down").first.click()
        two.locator("#submit").click()
        notice = two.locator("#send-status")
        notice.wait_for(state="visible")
        assert "already submitted" in notice.inner_text() and "again" not in notice.inner_text()
        notice.locator("a").click()
        two.wait_for_load_state()
        assert two.locator("#progress").inner_text() == "Task 2 of 2"
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
def test_a_long_study_title_does_not_make_a_phone_zoom_out(tmp_path: Path) -> None:
    """A title with a long word (``--title Evaluation_of_generated_stories_2026_pilot_batch_one``, allowed up to
    200 characters) on a 320 px screen (a phone, or 400 % zoom): before, the header could not wrap it, so every
    page (task, admin) was laid out 600 px wide and shown zoomed out, the progress cut off at the right. Now the
    title wraps and the page is the screen's width, the progress in view."""
    from studio_helpers import make_study

    title = "Evaluation_of_generated_stories_2026_pilot_batch_one_" + "x" * 40
    made = make_study(tmp_path, annotators=1, title=title)
    made.study.engine.dispose()
    with served_browser(made.path) as (browser, base):
        page = _page(browser, viewport={"width": 320, "height": 640}, is_mobile=True)
        for address in (f"/a/{made.tokens[0]}", f"/admin/{made.admin}", "/"):
            page.goto(base + address)
            assert title in page.locator("header").inner_text()
            assert page.evaluate("window.innerWidth") == 320, address
            assert page.evaluate("document.documentElement.scrollWidth") <= 320, address
            right = page.evaluate(
                "Math.max(...Array.from(document.querySelectorAll('header *'), e => e.getBoundingClientRect().right))"
            )
            assert right <= 320, (address, right)


@pytest.mark.slow
def test_a_submission_answered_by_a_page_that_is_not_the_studys_says_so(tmp_path: Path) -> None:
    """A hotel or company network that answers the submission with its own page (200, HTML: "accept the terms"):
    before, the annotator read "Not saved: the server answered 200." (a success code) and nothing else. Now they
    are told the answer came from something between them and the study, to sign in there if asked and press
    Submit again; their answer is kept and the next Submit goes through."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task="pairwise")
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)
        page.locator("input[name='choice'][value='B']").check()
        portal = "<html><body>Accept the terms of this network</body></html>"
        page.route("**/submit", lambda route: route.fulfill(status=200, content_type="text/html", body=portal))
        page.locator("#submit").click()
        notice = page.locator("#send-status")
        notice.wait_for(state="visible")
        text = notice.inner_text()
        assert "answered 200" not in text and "sign in" in text and "again" in text, text
        assert page.locator("input[value='B']:checked").count() == 1
        page.unroute("**/submit")
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
    assert len(judgement_records(path)) == 1


def test_a_link_that_gets_no_task_is_not_thanked_for_finishing(tmp_path: Path) -> None:
    """More annotators invited than the study needs: a latecomer opening their link for the first time got
    "Thank you! You have finished 0 tasks.", as if they had done their part (and one who did some, while the rest
    were taken by others, was told there was nothing more, not that tasks may come back). Now a link with no task
    says that every task is taken or finished and that one left unfinished comes back later; one that did some
    too."""
    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=3)
    with TestClient(create_app(made.study)) as client:
        first, second, late = made.tokens
        assert submit_ranking(client, first).status_code == 200
        client.get(f"/a/{second}")  # claims the last task and leaves it open
        page = client.get(f"/a/{late}").text
        assert "finished 0" not in page and "close this page" not in page, page
        assert "no task for you" in page and "taken" in page and "later" in page
        page = client.get(f"/a/{first}").text
        assert "finished 1 task" in page and "later" in page, page
        assert submit_ranking(client, second).status_code == 200
        page = client.get(f"/a/{second}").text
        assert "Thank you" in page and "finished 1 task" in page
    made.study.engine.dispose()


@pytest.mark.slow
def test_reloading_the_thank_you_page_does_not_say_saved_again(tmp_path: Path) -> None:
    """The last answer leads to the thank-you page at ``/a/TOKEN?saved=1``: round 13 made a reload of a task page
    stop saying "Saved." again, but the thank-you page kept ``?saved=1`` in its address, so a reload (or the
    address bookmarked, or opened the next day) said "Saved." each time. Now it says so once there too."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), n_items=1)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(link)
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
        assert "Thank you" in page.content() and page.locator("p.saved").count() == 1
        page.wait_for_load_state()  # the script has run (or never will)
        page.reload()
        assert "Thank you" in page.content() and page.locator("p.saved").count() == 0
        assert errors == []
    assert len(judgement_records(path)) == 1
