"""The annotator's page in a real browser (Debian's chromium driven by Playwright): an answer in progress kept
over a closed tab (and never shown to another link on the same computer), and what else an annotator can do
oddly. Browser tests skip with a reason when Playwright or chromium is absent; every wait is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from studio_helpers import change_answer, judgement_records, one_link_study, served_browser

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")

from vistkit.studio import db, service

THIRD = "We went home tired. The dog slept all the way."
WAIT_MS = 30_000  # the box may be busy; every wait is still bounded


def _page(context: Any) -> Any:
    """A new tab of ``context`` (a browser: its own context) with bounded waits."""
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.set_default_navigation_timeout(WAIT_MS)
    return page


def _answer(page: Any, task: str) -> Any:
    if task == "rank":
        return page.locator("#ranking").input_value()
    return sorted(page.locator("input[type=radio]:checked").evaluate_all("xs => xs.map(x => x.name + x.value)"))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "likert", "pairwise"])
def test_an_answer_in_progress_survives_a_closed_tab_but_not_another_link(task: str, tmp_path: Path) -> None:
    """An annotator halfway through a task closes the tab (or the browser) and opens their link again: before, the
    answer made so far was gone (kept per tab only). Now it comes back for that link and task; another annotator's
    link on the same computer starts blank, and once the answer is stored nothing of it is kept in the browser."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task)
    st = db.open_study(path)
    [(_, other)] = service.invite(st, n=1)
    st.engine.dispose()
    with served_browser(path) as (browser, base):
        context = browser.new_context()
        link = f"{base}/a/{token}"
        page = _page(context)
        page.goto(link)
        blank = _answer(page, task)
        change_answer(page, task)
        made = _answer(page, task)
        assert made != blank
        page.close()
        page = _page(context)
        page.goto(link)
        assert _answer(page, task) == made
        # the other link on this computer: its own task, blank, whatever its assignment number
        stranger = _page(context)
        stranger.goto(f"{base}/a/{other}")
        assert _answer(stranger, task) == blank
        stranger.close()
        old = page.locator("input[name=assignment]").input_value()
        page.locator("#submit").click()
        page.wait_for_url(f"{link}?saved=1")
        page.wait_for_load_state()
        keys = page.evaluate("() => [localStorage, sessionStorage].flatMap(s => Object.keys(s))")
        assert [k for k in keys if token in k] == [], keys  # the link itself is never kept
        assert [k for k in keys if "vistkit" in k and k.endswith(f" {old}")] == [], keys  # the stored answer
        context.close()
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
def test_picking_up_a_story_by_keyboard_is_announced_and_ends_when_focus_leaves(tmp_path: Path) -> None:
    """A screen-reader user presses Space on a story to pick it up (as the help says): before, nothing was
    announced (nor when Space or Escape put it down), so they could not tell the arrows now move the story; and a
    story left picked up while they tabbed away still moved on the arrow keys when they came back to it, instead of
    moving the focus. Now picking up and putting down are announced with the story's place, and leaving the story
    puts it down."""
    path, token = one_link_study(tmp_path, ("m2", THIRD))
    with served_browser(path) as (browser, base):
        page = _page(browser)
        page.goto(f"{base}/a/{token}")
        first = page.locator("li.story").first
        label = first.get_attribute("data-label")
        status = page.locator("#rank-status")
        first.focus()
        page.keyboard.press("Space")
        said = status.inner_text()
        assert f"Story {label}" in said and "picked up" in said and "place 1" in said, said
        page.keyboard.press("ArrowDown")
        assert page.locator("#ranking").input_value() == "2,1,3"
        assert page.locator("li.story.grabbed").count() == 1  # still held after the move
        page.keyboard.press("Escape")
        said = status.inner_text()
        assert "put down" in said and "place 2" in said, said
        assert page.locator("li.story.grabbed").count() == 0
        page.keyboard.press("Enter")
        assert page.locator("li.story.grabbed").count() == 1
        page.keyboard.press("Tab")  # to its arrow button: the story is put down
        page.keyboard.press("Shift+Tab")
        page.locator("li.story.grabbed").wait_for(state="detached")  # no eval: the page's CSP forbids it
        page.keyboard.press("ArrowDown")  # moves the focus, not the story
        assert page.locator("#ranking").input_value() == "2,1,3"
        assert page.evaluate("document.activeElement.getAttribute('data-pos')") == "3"


@pytest.mark.slow
def test_answers_kept_in_the_browser_do_not_outlive_their_task(tmp_path: Path) -> None:
    """Answers in progress are kept in the browser across closed tabs, so they must not pile up there: a draft left
    by a second tab of a task already stored goes once the link shows no task (the thank-you page), and any
    study's draft untouched for a month (or unreadable) goes on the next studio page; a recent draft of another
    link, and what other sites' pages keep, stay."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), n_items=1)
    with served_browser(path) as (browser, base):
        context = browser.new_context()
        link = f"{base}/a/{token}"
        one, two = _page(context), _page(context)
        one.goto(link)
        two.goto(link)
        old = 1_000 * 86_400 * 40  # forty days, in ms
        one.evaluate(
            """old => {
                localStorage.setItem("vistkit-draft zzold 7", JSON.stringify({ranking: "1,2,3", at: Date.now() - old}));
                localStorage.setItem("vistkit-draft zzbad 7", "{not json");
                localStorage.setItem("vistkit-draft zznew 7", JSON.stringify({ranking: "1,2,3", at: Date.now()}));
                localStorage.setItem("someone-else", "kept");
            }""",
            old,
        )
        one.locator("#submit").click()
        one.wait_for_url(f"{link}?saved=1")
        two.locator("li.story button.down").first.click()  # the stored task, changed in the other tab
        mine = two.evaluate(
            "() => Object.keys(localStorage).filter(k => k.startsWith('vistkit-draft') && !k.includes('zz'))"
        )
        assert len(mine) == 1, mine
        one.reload()
        assert "Thank you" in one.content()
        keys = sorted(one.evaluate("() => Object.keys(localStorage)"))
        assert keys == ["someone-else", "vistkit-draft zznew 7"], keys
        context.close()
    assert len(judgement_records(path)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("task", ["rank", "pairwise"])
def test_an_answer_cannot_change_while_it_is_being_sent(task: str, tmp_path: Path) -> None:
    """A slow server: the annotator presses Submit, notices a slip and fixes it while the page waits. Before, the
    fix was shown (a story moved, another choice checked) but the answer sent before it was the one stored, and
    the page then moved on without a word. Now the answer cannot change while it is being sent (the button says
    it is sending, a screen reader hears why a move did nothing), and what is stored is what the page showed."""
    path, token = one_link_study(tmp_path, ("m2", THIRD), task=task)
    with served_browser(path) as (browser, base):
        link = f"{base}/a/{token}"
        page = _page(browser)
        page.goto(link)
        held: list[Any] = []
        page.route("**/submit", lambda route: held.append(route))
        if task == "pairwise":
            page.locator("input[name='choice'][value='A']").check()
        page.locator("#submit").click()
        page.locator("#submit:disabled").wait_for()
        assert "Sending" in page.locator("#submit").inner_text()
        if task == "rank":
            page.locator("li.story button.down").first.click()
            assert page.locator("#ranking").input_value() == "1,2,3"
            assert "being sent" in page.locator("#rank-status").inner_text()
            page.locator("li.story").first.focus()
            page.keyboard.press("Alt+ArrowDown")
            assert page.locator("#ranking").input_value() == "1,2,3"
        else:
            page.locator("input[name='choice'][value='B']").click(force=True)
            page.locator("input[name='choice'][value='A']").focus()
            page.keyboard.press("ArrowRight")
            assert page.locator("input[name='choice']:checked").evaluate_all("xs => xs.map(x => x.value)") == ["A"]
        shown = page.locator("#ranking-list .text").all_inner_texts()
        checked = page.locator("input[name='choice']:checked").evaluate_all("xs => xs.map(x => x.value)")
        assert len(held) == 1
        held[0].continue_()
        page.wait_for_url(f"{link}?saved=1")
    [rec] = judgement_records(path)
    if task == "rank":  # the order on the page when it was saved
        by_system = {s["system"]: shown.index(s["text"]) + 1 for s in rec["shown"]}
        assert rec["answer"]["ranks"] == by_system
    else:
        assert [rec["answer"]["choice"]] == checked == ["A"]


def test_the_admin_results_say_how_many_judgements_they_are_from(tmp_path: Path) -> None:
    """A study with gold items: the admin page's results chart said "from 4 judgements (gold items left out)"
    while the 4 counted the gold ones too, and its position-bias table gave mean ranks by position (2.0, 1.0, 3.0
    from a handful of judgements) with nothing to compare them with. Now the caption counts only what the results
    are made of, and the table says what no bias looks like and when there are too few judgements to tell."""
    import re

    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.studio import analysis
    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=3, per_item=2, annotators=2, gold=1)
    with TestClient(create_app(made.study)) as client:
        for token in made.tokens:
            for _ in range(3):
                assert submit_ranking(client, token, "2,1,3").status_code == 200
        page = client.get(f"/admin/{made.admin}").text
    data = analysis.load(made.study)
    real = sum(not j.is_gold for j in data.judgements)
    assert 0 < real < len(data.judgements)  # some answers were gold
    caption = re.search(r"<figcaption>(.*?)</figcaption>", page, re.S)
    assert caption and f"from {real} judgement" in caption.group(1), caption
    note = re.search(r'id="position-bias-note">(.*?)</p>', page, re.S)
    assert note and "middle rank (2 for 3 stories)" in note.group(1) and "too few" in note.group(1), note
    made.study.engine.dispose()
