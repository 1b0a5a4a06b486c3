"""Helpers shared by the studio tests: tiny studies, invite tokens, reading a task page like a client."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", reason="vistkit studio needs the studio extra (sqlalchemy)")
pytest.importorskip("starlette", reason="vistkit studio needs the studio extra (starlette)")

from vistkit.studio import db, service
from vistkit.studio.plan import PlanItem, PlanStory, create_study

HUMAN = [
    "we went to the beach . the sand was warm . we built a castle . the waves took it . we went home happy .",
    "the party started early . everyone brought food . the cake was huge . we danced all night . it was fun .",
    "the city was busy . we saw tall buildings . we ate lunch downtown . the park was green . we took a train .",
    "the game was close . our team scored first . the crowd cheered loudly . they tied it late . we won at last .",
]
MACHINE_1 = ["a beach . a beach . a beach .", "a party .", "a city with buildings .", "a game ."]
MACHINE_2 = ["the sea is blue .", "people at a party .", "a busy street .", "players on a field ."]


def plan_items(n: int = 3, *, systems: int = 3, photos: bool = True) -> list[PlanItem]:
    out = []
    for i in range(n):
        stories = [PlanStory("human", f"s{i}", HUMAN[i % 4]), PlanStory("m1", f"s{i}", MACHINE_1[i % 4])]
        if systems >= 3:
            stories.append(PlanStory("m2", f"s{i}", MACHINE_2[i % 4]))
        pids = tuple(f"p{i}{j}" for j in range(5)) if photos else ()
        out.append(PlanItem(key=f"s{i}", photo_ids=pids, stories=stories))
    return out


@dataclass
class Made:
    path: Path
    study: db.Study
    admin: str
    tokens: list[str]
    names: list[str]


def make_study(
    tmp: Path,
    *,
    task: str = "rank",
    n_items: int = 3,
    systems: int = 3,
    per_item: int = 2,
    annotators: int = 3,
    **kw: Any,
) -> Made:
    path = tmp / f"{task}.db"
    s = create_study(path, task=task, items=plan_items(n_items, systems=systems), per_item=per_item, **kw)
    st = db.open_study(path)
    pairs = service.invite(st, n=annotators)
    return Made(path, st, s["admin_token"], [t for _, t in pairs], [n for n, _ in pairs])


def count(st: db.Study, table: Any) -> int:
    from sqlalchemy import func, select

    with st.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


@dataclass
class Page:
    status: int
    html: str
    assignment: str | None
    csrf: str | None
    texts: list[str]
    progress: str | None


def read_page(client: Any, token: str) -> Page:
    import html as html_mod

    r = client.get(f"/a/{token}")
    a = re.search(r'name="assignment" value="(\d+)"', r.text)
    c = re.search(r'name="csrf" value="(\w+)"', r.text)
    p = re.search(r"Task \d+ of \d+|\d+ of \d+ done", r.text)
    texts = [html_mod.unescape(t) for t in re.findall(r'<div class="text" data-story="\w">(.*?)</div>', r.text, re.S)]
    return Page(r.status_code, r.text, a and a.group(1), c and c.group(1), texts, p and p.group(0))


def rank_by(texts: list[str], preference: list[str]) -> str:
    """The ``ranking`` field that orders the shown ``texts`` as in ``preference`` (best first)."""
    return ",".join(str(texts.index(t) + 1) for t in preference)


def submit_ranking(client: Any, token: str, answer: str = "1,2,3") -> Any:
    """Open ``token``'s task page and submit ``answer`` as its ranking, asking for JSON; the page's own answer
    (an ``httpx.Response``) when the page offered no task (503 while claiming)."""
    import httpx

    page = read_page(client, token)
    if page.assignment is None:
        return httpx.Response(page.status, text=page.html)
    form = {"assignment": page.assignment, "csrf": page.csrf or "", "ranking": answer}
    return client.post(f"/a/{token}/submit", data=form, headers={"accept": "application/json"})


def stored_judgements(path: Path) -> int:
    """How many judgements the study at ``path`` holds, read by a fresh connection."""
    st = db.open_study(path)
    try:
        return count(st, db.judgements)
    finally:
        st.engine.dispose()


#: the Chromium the browser tests drive (Debian's `chromium`, or VISTKIT_CHROMIUM)
CHROMIUM = os.environ.get("VISTKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def playwright_or_skip() -> Any:
    """Playwright's sync API, or skip the test with the reason (no playwright, no chromium)."""
    api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install 'vistkit[studio]')")
    if CHROMIUM is None:
        pytest.skip("no chromium browser found (apt-get install chromium, or set VISTKIT_CHROMIUM)")
    return api


def judgement_records(path: Path) -> list[dict[str, Any]]:
    """The judgements of the study at ``path`` as `studio export --format jsonl` writes them."""
    from vistkit.studio.analysis import jsonl_records, load

    st = db.open_study(path)
    try:
        data = load(st)
        return jsonl_records(data, data.judgements)
    finally:
        st.engine.dispose()


def serve_child(study: Path, port: int, *extra: str, preexec: Any = None) -> Any:
    """`vistkit studio serve STUDY --port PORT EXTRA...` in a child process (its log on a pipe; ``preexec`` runs in
    the child first: limits, signals), returned once it answers /healthz (60 s at most)."""
    import subprocess
    import sys
    import time

    import httpx

    from vistkit.studio import simulate

    cli = "import sys; from vistkit.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", cli, "studio", "serve", str(study), "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode(errors="replace") if proc.stderr else "exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    simulate.kill(proc)
    raise RuntimeError("the server did not start")


@contextmanager
def served_browser(study: Path) -> Iterator[tuple[Any, str]]:
    """``vistkit studio serve STUDY`` in a child process and a launched Chromium: ``(browser, base address)``; the
    test is skipped without Playwright or Chromium, and both are stopped afterwards."""
    from vistkit.studio import simulate

    api = playwright_or_skip()
    port = simulate.free_port()
    proc = serve_child(study, port)
    try:
        with api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                yield browser, f"http://127.0.0.1:{port}"
            finally:
                browser.close()
    finally:
        simulate.kill(proc, 15)


def one_link_study(
    tmp_path: Path,
    third: tuple[str, str],
    *,
    task: str = "rank",
    n_items: int = 2,
    photo_url: str | None = None,
) -> tuple[Path, str]:
    """A study of ``n_items`` items (the human story, MACHINE_1 and the ``third`` (system, text)) over stand-in
    photos (or ``photo_url``), one slot each, and one annotator: ``(study path, their token)``."""
    from vistkit.studio.demo import stand_in_photos

    photos, _ = stand_in_photos(tmp_path / "photos")
    system, text = third
    items = [
        PlanItem(
            f"s{i}",
            tuple(photos[:5]),
            [
                PlanStory("human", f"s{i}", HUMAN[0]),
                PlanStory("m1", f"s{i}", MACHINE_1[0]),
                PlanStory(system, f"s{i}", text),
            ],
        )
        for i in range(n_items)
    ]
    path = tmp_path / "study.db"
    where: dict[str, Any] = {"photo_url": photo_url} if photo_url else {"photos_dir": tmp_path / "photos"}
    create_study(path, task=task, items=items, per_item=1, seed=5, **where)
    st = db.open_study(path)
    [(_, token)] = service.invite(st, n=1)
    st.engine.dispose()
    return path, token


def change_answer(page: Any, task: str) -> None:
    """Answer the task on a studio page in a way that differs from its initial state: a ranking moved (the first
    story down, the last up), every Likert statement rated 1..5 in turn, or story B chosen."""
    if task == "rank":
        page.locator("li.story button.down").first.click()
        page.locator("li.story button.up").last.click()
    elif task == "likert":
        names = page.locator("fieldset.likert input[value='4']").evaluate_all("xs => xs.map(x => x.name)")
        for i, name in enumerate(names):
            page.locator(f"input[name='{name}'][value='{1 + i % 5}']").check()
    else:
        page.locator("input[name='choice'][value='B']").check()
