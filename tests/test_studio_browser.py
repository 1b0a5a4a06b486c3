"""A real browser (Debian's chromium driven by Playwright) through a whole annotation session on the real server:
open the invite link, rank by keyboard, drag and buttons, submit, see the progress, on a desktop and a phone
screen; a ``<script>`` story renders as text; screenshots are written (set VISTKIT_STUDIO_SCREENSHOTS=DIR to keep
them). Skips with a reason when Playwright or chromium is absent (`make system-deps` installs chromium)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from studio_helpers import HUMAN, MACHINE_1

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
playwright_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install 'vistkit[studio]')")

from vistkit.studio import db, service, simulate  # noqa: E402
from vistkit.studio.demo import stand_in_photos  # noqa: E402
from vistkit.studio.plan import PlanItem, PlanStory, create_study  # noqa: E402

CHROMIUM = os.environ.get("VISTKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium browser found (apt-get install chromium, or set VISTKIT_CHROMIUM)"
    ),
]

EVIL = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"> we saw a show .'


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    photos, _ = stand_in_photos(tmp_path / "photos")
    items = [
        PlanItem(
            "s0",
            tuple(photos[:5]),
            [PlanStory("human", "s0", HUMAN[0]), PlanStory("m1", "s0", MACHINE_1[0]), PlanStory("evil", "s0", EVIL)],
        ),
        PlanItem(
            "s1",
            tuple(photos[1:6]),
            [PlanStory("human", "s1", HUMAN[1]), PlanStory("m1", "s1", MACHINE_1[1]), PlanStory("evil", "s1", EVIL)],
        ),
    ]
    path = tmp_path / "study.db"
    info = create_study(
        path, task="rank", items=items, per_item=1, photos_dir=tmp_path / "photos", seed=5, title="Browser test study"
    )
    st = db.open_study(path)
    [(_, token)] = service.invite(st, n=1)
    st.engine.dispose()
    port = simulate.free_port()
    proc = simulate.start_server(path, port)
    try:
        yield {"base": f"http://127.0.0.1:{port}", "token": token, "admin": info["admin_token"], "path": path}
    finally:
        simulate.kill(proc, 15)


def _shots(tmp_path: Path) -> Path:
    keep = os.environ.get("VISTKIT_STUDIO_SCREENSHOTS")
    out = Path(keep) if keep else tmp_path / "shots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def assert_not_blank(png: bytes) -> None:
    """A PNG that shows something: decodable, not one flat colour, some dark pixels (text, bars, lines)."""
    import io

    from matplotlib import image

    pixels = image.imread(io.BytesIO(png), format="png")
    assert pixels.ndim == 3 and pixels.shape[0] > 50 and pixels.shape[1] > 50
    gray = pixels[..., :3].mean(axis=2)
    assert gray.std() > 0.05, f"an almost flat image (std {gray.std():.4f})"
    assert (gray < 0.6).mean() > 0.002, "no dark pixels: nothing drawn"


def _order(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.locator("#ranking-list li.story .text").all_inner_texts()


def test_a_person_ranks_and_submits_in_a_real_browser(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shots = _shots(tmp_path)
    link = f"{server['base']}/a/{server['token']}"
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(link)
            assert page.locator("#progress").inner_text() == "Task 1 of 2"
            imgs = page.locator("ol.photos img")
            assert imgs.count() == 5
            page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
            # the <script> story is shown as text, and nothing in it ran
            assert page.get_by_text("<script>window.__pwned = 1</script>", exact=False).count() == 1
            assert page.evaluate("window.__pwned === undefined")
            page.screenshot(path=str(shots / "1-task-desktop.png"), full_page=True)

            # keyboard: focus the human story, pick it up with Space, move it to the top with ArrowUp
            human = page.locator("#ranking-list li.story", has_text=HUMAN[0][:30])
            human.focus()
            page.keyboard.press("Space")
            page.keyboard.press("ArrowUp")
            page.keyboard.press("ArrowUp")
            page.keyboard.press("Space")
            assert _order(page)[0] == HUMAN[0]
            # drag: the machine story below the script story
            machine = page.locator("#ranking-list li.story", has_text=MACHINE_1[0])
            machine.drag_to(page.locator("#ranking-list li.story").nth(2), target_position={"x": 20, "y": 60})
            assert _order(page) == [HUMAN[0], EVIL, MACHINE_1[0]]
            # the hidden field the server reads follows the list
            ranking = page.locator("#ranking").input_value()
            assert len(ranking.split(",")) == 3
            page.screenshot(path=str(shots / "2-ranked-desktop.png"), full_page=True)
            page.locator("#submit").click()
            page.wait_for_url(f"{link}?saved=1")
            assert page.locator("#saved").inner_text().startswith("Saved")
            assert page.locator("#progress").inner_text() == "Task 2 of 2"

            # the second task on a phone screen, with the arrow buttons only
            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(path=str(shots / "3-task-phone.png"), full_page=True)
            evil = page.locator("#ranking-list li.story", has_text="we saw a show")
            for _ in range(3):  # press its "down" button until it is last
                if "we saw a show" in _order(page)[-1]:
                    break
                evil.locator("button.down").click()
            assert "we saw a show" in _order(page)[-1]
            page.locator("#submit").click()
            page.wait_for_url(f"{link}?saved=1")
            assert "Thank you" in page.content() and page.locator("#progress").inner_text() == "2 of 2 done"
            page.screenshot(path=str(shots / "4-done-phone.png"), full_page=True)

            # the admin page, and an annotator token refused there
            page.set_viewport_size({"width": 1280, "height": 900})
            page.goto(f"{server['base']}/admin/{server['admin']}")
            assert "2 of 2 judgements" in page.locator("#overall").inner_text()
            # the progress bar (judgements collected / planned) and the results chart (mean rank per system)
            bar = page.locator("progress#progress-bar")
            assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("2", "2")
            chart = page.locator("#results-chart svg")
            assert chart.count() == 1 and page.locator("#results-chart svg rect.bar").count() == 3
            assert page.locator("#results-chart svg > title").text_content() == "Mean rank per system (1 = best)"
            assert "2 judgements" in page.locator("#results-chart figcaption").inner_text()
            assert chart.bounding_box()["width"] > 300  # type: ignore[index]
            assert_not_blank(chart.screenshot(path=str(shots / "5-admin-chart.png")))
            desc = page.locator("#results-chart svg > desc").text_content() or ""
            page.screenshot(path=str(shots / "5-admin.png"), full_page=True)
            assert page.goto(f"{server['base']}/admin/{server['token']}").status == 403
            assert page.evaluate("window.__pwned === undefined") and errors == []
        finally:
            browser.close()
    # what the browser sent is what the database holds
    from vistkit.studio.analysis import jsonl_records, load

    data = load(db.open_study(server["path"]))
    recs = jsonl_records(data, data.judgements)
    assert recs[0]["answer"]["ranks"] == {"human": 1, "evil": 2, "m1": 3}
    assert recs[1]["answer"]["ranks"]["evil"] == 3
    # the chart's bars are the mean ranks of what was submitted (evil: 2 then 3)
    for system in ("human", "m1", "evil"):
        mean = sum(r["answer"]["ranks"][system] for r in recs) / 2
        assert f"{system}: {mean:.3f} (n=2)" in desc
    assert "evil: 2.500 (n=2)" in desc
    assert all(len(p.read_bytes()) > 1000 for p in shots.glob("*.png"))
    (shots / "answers.json").write_text(json.dumps([r["answer"] for r in recs]))


def _tab_to(page, selector: str, limit: int = 60) -> None:  # type: ignore[no-untyped-def]
    """Press Tab until the focused element matches ``selector`` (bounded)."""
    for _ in range(limit):
        if page.evaluate(f"document.activeElement && document.activeElement.matches({selector!r})"):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


@pytest.mark.parametrize("task", ["pairwise", "likert"])
def test_pairwise_and_likert_by_keyboard_alone_on_a_phone(task: str, tmp_path: Path) -> None:
    photos, _ = stand_in_photos(tmp_path / "photos")
    items = [PlanItem("s0", tuple(photos[:5]), [PlanStory("human", "s0", HUMAN[0]), PlanStory("evil", "s0", EVIL)])]
    path = tmp_path / "study.db"
    create_study(
        path,
        task=task,
        items=items,
        per_item=1,
        photos_dir=tmp_path / "photos",
        seed=2,
        aspects=["focused", "coherent", "share"],
    )
    st = db.open_study(path)
    [(_, token)] = service.invite(st, n=1)
    st.engine.dispose()
    port = simulate.free_port()
    proc = simulate.start_server(path, port)
    shots = _shots(tmp_path)
    link = f"http://127.0.0.1:{port}/a/{token}"
    try:
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 390, "height": 844})
                page.goto(link)
                assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
                if task == "pairwise":
                    _tab_to(page, 'input[name="choice"]')
                    page.keyboard.press("Space")  # A
                    page.keyboard.press("ArrowDown")  # B
                    texts = page.locator("div.text").all_inner_texts()
                    page.screenshot(path=str(shots / "6-pairwise-phone.png"), full_page=True)
                    page.keyboard.press("Enter")
                else:
                    assert page.get_by_text("This story is focused.").count() == 1
                    for aspect in ("focused", "coherent", "share"):
                        _tab_to(page, f'input[name="{aspect}"]')
                        page.keyboard.press("Space")  # 1 = Strongly Disagree
                        page.keyboard.press("ArrowRight")  # 2
                    texts = page.locator("div.text").all_inner_texts()
                    page.screenshot(path=str(shots / f"7-likert-phone-{len(texts)}.png"), full_page=True)
                    page.keyboard.press("Enter")
                page.wait_for_url(f"{link}?saved=1")
                assert page.evaluate("window.__pwned === undefined")
                if task == "likert":  # the second story of the item
                    assert page.locator("#progress").inner_text() == "Task 2 of 2"
                else:
                    assert "Thank you" in page.content()
            finally:
                browser.close()
    finally:
        simulate.kill(proc, 15)
    from vistkit.studio.analysis import jsonl_records, load

    [rec] = jsonl_records(load(db.open_study(path)), load(db.open_study(path)).judgements)
    if task == "pairwise":
        second = "evil" if "we saw a show" in texts[1] else "human"
        assert rec["answer"] == {"choice": "B", "preferred": second}
    else:
        assert rec["answer"] == {"ratings": {"focused": 2, "coherent": 2, "share": 2}}
        assert texts[0] in (HUMAN[0], EVIL)


def test_the_meta_report_renders_its_figures_in_a_real_browser(tmp_path: Path) -> None:
    """`vistkit meta pairs --report` on human rankings and on proxy pairs: the page opened from disk shows every
    figure (loaded, not blank, with alt text and a caption); the proxy page names the proxy, not people, and
    says why it has no gap figure."""
    import base64

    from meta_dummies import FIX, dummy_metrics_registered

    from vistkit.cli import main

    shots = _shots(tmp_path)
    human, proxy = tmp_path / "report-human", tmp_path / "report-proxy"
    refs, machine, proxy_csv = tmp_path / "refs.jsonl", tmp_path / "m1.json", tmp_path / "proxy.csv"
    refs.write_text(
        "".join(
            json.dumps({"story_id": f"r{i}", "photo_ids": f"{i}1-{i}2-{i}3", "text": text}) + "\n"
            for i, text in enumerate(HUMAN)
        )
    )
    machine.write_text(json.dumps({f"r{i}": text for i, text in enumerate(MACHINE_1)}))
    metrics = "meta-test-length,meta-test-shortness"
    with dummy_metrics_registered():
        assert main(["meta", "pairs", str(FIX / "vhed_small.csv"), "-m", metrics, "--report", str(human)]) == 0
        assert main(["meta", "build-pairs", "-r", str(refs), "--machine", f"m1={machine}", "-o", str(proxy_csv)]) == 0
        assert main(["meta", "pairs", str(proxy_csv), "-m", metrics, "--report", str(proxy)]) == 0
    pages = [(human, 4), (proxy, 3)]
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            for folder, n_figures in pages:
                page.goto((folder / "index.html").as_uri())
                page.wait_for_function("Array.from(document.images).every(i => i.complete)")
                figures = page.locator("figure")
                assert figures.count() == n_figures
                for i in range(n_figures):
                    fig = figures.nth(i)
                    img = fig.locator("img")
                    assert img.evaluate("i => i.naturalWidth") > 200 and img.evaluate("i => i.naturalHeight") > 100
                    assert len(img.get_attribute("alt") or "") > 20
                    assert len(fig.locator("figcaption").inner_text()) > 20
                    src = img.get_attribute("src") or ""
                    assert src.startswith("data:image/png;base64,")
                    assert_not_blank(base64.b64decode(src.split(",", 1)[1]))
                caption = figures.nth(0).locator("figcaption").inner_text()
                assert "confidence intervals" in caption and "meta-test-length n=" in caption
                page.screenshot(path=str(shots / f"8-{folder.name}.png"), full_page=True)
            human_page = (human / "index.html").read_text()
            assert "ranked above the human reference, by people and by each metric" in human_page
            proxy_page = (proxy / "index.html").read_text()
            assert "by proxy label (human story assumed better) and by each metric" in proxy_page
            assert "No figure: every pair that counts has the same ranking gap (proxy pairs always do)" in proxy_page
            assert not (proxy / "accuracy_by_gap.png").exists() and "people" not in proxy_page
            assert errors == []
        finally:
            browser.close()
