"""Probes, round 10: the studio as a web application facing hostile content and hostile clients.

Classes probed: story text, system names, item keys, study titles and annotator names holding HTML, script,
``</textarea>``, ``javascript:`` URLs, ``{{ }}`` template syntax, U+2028/U+2029 and ``</script><!--`` on every page
(task pages of the three tasks, "thank you", messages, admin) and in the inline SVG chart, read with a strict
parser (no unexpected element, event-handler attribute, inline style or script, link off the server); whether
each page satisfies the Content-Security-Policy it is sent with (photos on an http ``--photo-url`` included);
security headers on every kind of response (Starlette's own 404/405, static files, photos, /healthz, JSON);
redirects built from a forged ``Host`` header; path traversal in static and photo URLs (encoded dots,
backslashes, NUL); unexpected methods; forged, replayed and foreign submissions (another rater's task, a task
nobody was given, a forged or mangled CSRF token); hostile bodies (deeply nested or non-object JSON, oversized
and chunked bodies, other content types); reflected input in error pages; annotator names in headers; exports
of hostile text read back exactly (CSV through vistkit's readers, JSON lines verbatim) with formula cells
neutralised; ``--photo-url`` templates that no browser would load.

Every test runs in process (Starlette's TestClient: no socket), on studies of two or three items.
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import count, read_page

from vistkit.errors import InputError
from vistkit.studio import analysis, charts, db, service
from vistkit.studio.app import create_app
from vistkit.studio.plan import PlanItem, PlanStory, create_study

TestClient = pytest.importorskip("starlette.testclient").TestClient

JSON = {"accept": "application/json"}

#: hostile story texts: each must come back as exactly this text, and none may add markup or run
EVIL_TEXTS = [
    '<script>window.__pwned = 1</script> we went to the beach .',
    '"><img src=x onerror="window.__pwned = 2"> the party started .',
    "</textarea></div><svg onload=alert(3)> the city was busy .",
    "javascript:alert(4) <a href=\"javascript:alert(5)\">click</a> .",
    "{{ 7*7 }} {% raw %}{{ config }}{% endraw %} ${7*7} #{7*7} .",
    "line\u2028separator\u2029paragraph </script><!-- <script> .",
    "=HYPERLINK(\"http://evil.example\",\"x\") +1 -1 @SUM .",
    "' or ''=' ; <style>body{display:none}</style> & &amp; &lt; .",
]
#: hostile system names (from --stories NAME=FILE): admin tables, chart labels, exports
EVIL_SYSTEMS = ['<img src=x onerror=alert("sys")>', "=cmd|' /C calc'!A0", "</script><b>m</b>"]
EVIL_TITLE = '<script>alert("title")</script>{{ 7*7 }}</title><b>'
EVIL_PREFIX = '<i>rater</i>"\'&'
EVIL_KEYS = ['k0<b>"\'', "k1</td><script>x</script>", "k2{{x}}"]


@dataclass
class Hostile:
    task: str
    path: Path
    study: db.Study
    admin: str
    tokens: list[str]
    names: list[str]
    texts: set[str]
    client: Any
    pages: dict[str, str] = field(default_factory=dict)


def _items(n: int) -> list[PlanItem]:
    out = []
    for i in range(n):
        systems = ["human", *EVIL_SYSTEMS]
        stories = [
            PlanStory(s, f"s{i}", EVIL_TEXTS[(i * len(systems) + j) % len(EVIL_TEXTS)]) for j, s in enumerate(systems)
        ]
        out.append(PlanItem(key=EVIL_KEYS[i], photo_ids=tuple(f"p{i}{j}" for j in range(5)), stories=stories))
    return out


def _answer(task: str, page_html: str, aspects: list[str]) -> dict[str, str]:
    n = len(re.findall(r'<div class="text" data-story=', page_html))
    if task == "rank":
        return {"ranking": ",".join(str(i) for i in range(n, 0, -1))}
    if task == "pairwise":
        return {"choice": "A"}
    return {a: "2" for a in aspects}


def _submit(h: Hostile, token: str) -> Any:
    page = read_page(h.client, token)
    assert page.assignment is not None, page.html[:300]
    answer = _answer(h.task, page.html, h.study.setting("aspects"))
    form = {"assignment": page.assignment, "csrf": page.csrf or "", **answer}
    return h.client.post(f"/a/{token}/submit", data=form, headers=JSON)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Hostile]]:
    """One hostile study per task: annotator 0 has submitted one task, annotator 1 has its first task open,
    annotator 2 (quota 1) has finished; the pages of each are kept in ``pages``."""
    out: dict[str, Hostile] = {}
    clients = []
    for task in ("rank", "pairwise", "likert"):
        tmp = tmp_path_factory.mktemp(task)
        path = tmp / "s.db"
        info = create_study(path, task=task, items=_items(2), per_item=2, title=EVIL_TITLE, seed=3)
        st = db.open_study(path)
        pairs = service.invite(st, n=2, prefix=EVIL_PREFIX)
        pairs += service.invite(st, n=1, prefix=EVIL_PREFIX, quota=1)
        client = TestClient(create_app(st))
        client.__enter__()
        clients.append(client)
        h = Hostile(task, path, st, info["admin_token"], [t for _, t in pairs], [n for n, _ in pairs], set(), client)
        with st.read() as conn:
            h.texts = {r.text for r in conn.execute(db.stories.select())}
        assert _submit(h, h.tokens[0]).json() == {"saved": True, "duplicate": False}
        assert _submit(h, h.tokens[2]).status_code == 200
        h.pages["task"] = client.get(f"/a/{h.tokens[1]}").text
        h.pages["done"] = client.get(f"/a/{h.tokens[2]}").text
        h.pages["admin"] = client.get(f"/admin/{h.admin}").text
        h.pages["bad link"] = client.get("/a/not-a-token").text
        h.pages["index"] = client.get("/").text
        out[task] = h
    yield out
    for c in clients:
        c.__exit__(None, None, None)


# ------------------------------------------------------------------------------------------- strict HTML check
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "link", "body", "header", "main", "section", "span", "ol", "li", "img", "div",
    "form", "input", "h1", "h2", "h3", "p", "kbd", "button", "fieldset", "legend", "label", "article", "table",
    "tr", "th", "td", "progress", "a", "figure", "figcaption", "script",
    "svg", "desc", "rect", "text", "line",
}  # fmt: skip
URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "background"}


class StrictPage(HTMLParser):
    """Collects what a page would make a browser do beyond showing text: every element not in `ALLOWED_TAGS`,
    event-handler and style attributes, inline script or style, and each URL it loads or links to."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.urls: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"element <{tag}>")
        for k, v in attrs:
            if k.startswith("on") or k in ("style", "srcdoc"):
                self.problems.append(f"<{tag} {k}={v!r}>")
            if k in URL_ATTRS:
                self.urls.append((tag, k, v or ""))
        if tag == "script":
            self.in_script = True
            if not re.fullmatch(r"/static/studio\.js\?v=[0-9a-f]{12}", dict(attrs).get("src") or ""):
                self.problems.append(f"<script {attrs!r}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script and data.strip():
            self.problems.append(f"inline script {data[:40]!r}")


def strict(html_text: str) -> StrictPage:
    p = StrictPage()
    p.feed(html_text)
    p.close()
    return p


def csp_directives(header: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0].lower()] = words[1:]
    return out


def csp_allows(header: str, directive: str, url: str) -> bool:
    """Whether a CSP ``header`` lets a page served over http by this server load ``url`` under ``directive``
    (falling back to default-src); only the source kinds the studio uses: 'self', schemes, hosts."""
    d = csp_directives(header)
    sources = d.get(directive, d.get("default-src", []))
    if url.startswith("/") and not url.startswith("//"):
        return "'self'" in sources
    scheme = url.split(":", 1)[0].lower() + ":" if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", url) else "http:"
    if scheme in sources:
        return True
    host = re.sub(r"^([a-z]+:)?//", "", url).split("/")[0]
    return any(s in (host, f"{scheme}//{host}") for s in sources)


PAGES = ["task", "done", "admin", "bad link", "index"]


@pytest.mark.parametrize("task", ["rank", "pairwise", "likert"])
@pytest.mark.parametrize("which", PAGES)
def test_hostile_content_adds_no_markup_script_or_link_to_any_page(
    hostile: dict[str, Hostile], task: str, which: str
) -> None:
    """Every page of a study whose stories, systems, keys, title and annotator names are hostile markup holds only
    the studio's own elements, no event handler or inline style/script, and links only to the server itself."""
    page = hostile[task].pages[which]
    p = strict(page)
    assert p.problems == []
    for tag, attr, url in p.urls:
        assert url.startswith("/") and not url.startswith(("//", "/\\")), (tag, attr, url)
    assert "{{" not in page or "{{ 7*7 }}" in page  # template syntax in the data is shown, never evaluated
    assert ">49<" not in page and " 49 " not in page


@pytest.mark.parametrize("task", ["rank", "pairwise", "likert"])
def test_story_texts_come_back_exactly_as_stored(hostile: dict[str, Hostile], task: str) -> None:
    """The task page shows each hostile story as exactly its text (U+2028, ``{{ }}``, ``</script><!--`` and
    character references included): nothing is evaluated, dropped or double-escaped."""
    import html as html_mod

    h = hostile[task]
    page = read_page(h.client, h.tokens[1])
    assert page.html == h.pages["task"]  # the open task, shown again
    assert len(page.texts) == {"rank": 4, "pairwise": 2, "likert": 1}[task]
    assert all(t in h.texts for t in page.texts), page.texts
    with h.study.read() as conn:
        a = conn.execute(db.assignments.select().where(db.assignments.c.id == int(page.assignment or 0))).one()
        order = json.loads(a.story_order)
        by_id = dict(conn.execute(db.stories.select().with_only_columns(db.stories.c.id, db.stories.c.text)).all())
    assert page.texts == [by_id[i] for i in order]  # in the assignment's order, each exactly
    for t in page.texts:
        assert html_mod.escape(t, quote=True).replace("&#x27;", "&#39;").replace("&quot;", "&#34;") in page.html


@pytest.mark.parametrize("task", ["rank", "pairwise", "likert"])
def test_admin_page_names_every_hostile_system_item_and_rater_as_text(hostile: dict[str, Hostile], task: str) -> None:
    """The admin tables show the hostile system names, item keys, annotator names and title as text, exactly."""
    h = hostile[task]

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.cells: list[str] = []
            self.cur: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag in ("td", "span", "title"):
                self.cur = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "span", "title") and self.cur is not None:
                self.cells.append("".join(self.cur))
                self.cur = None

        def handle_data(self, data: str) -> None:
            if self.cur is not None:
                self.cur.append(data)

    c = Cells()
    c.feed(h.pages["admin"])
    judged = [r["system"] for r in h.client.get(f"/admin/{h.admin}/summary.json").json()["results"]]
    assert len(judged) >= 2 and set(judged) <= {"human", *EVIL_SYSTEMS}
    for name in [*judged, *EVIL_KEYS[:2], h.names[0], EVIL_TITLE]:
        assert name in c.cells, name


def test_results_chart_is_well_formed_svg_with_every_name_as_text() -> None:
    """The inline SVG chart is well-formed XML (a strict parser reads it) whose labels are the hostile system
    names exactly; nothing in it is an element the names made."""
    names = [*EVIL_SYSTEMS, "a]]>b", "&amp; <![CDATA[x]]>", "human"]
    results = [{"system": s, "mean rank": 1.0 + i / 2, "n": i + 1} for i, s in enumerate(names)]
    svg = charts.results_chart_svg("rank", results, n_systems=len(names))
    root = ET.fromstring(svg)
    tags = {el.tag.split("}")[-1] for el in root.iter()}
    assert tags == {"svg", "title", "desc", "rect", "line", "text"}
    labels = [el.text for el in root.iter() if el.tag.endswith("text") and el.get("text-anchor") == "end"]
    assert labels == names
    assert not any(k.startswith("on") or k == "style" for el in root.iter() for k in el.attrib)


# ------------------------------------------------------------------------------------------------ CSP and headers
@pytest.mark.parametrize("task", ["rank", "pairwise", "likert"])
def test_each_page_satisfies_the_content_security_policy_it_is_sent_with(
    hostile: dict[str, Hostile], task: str
) -> None:
    """Every script, style sheet, image and form target of each page is allowed by the page's own CSP."""
    h = hostile[task]
    for url in (f"/a/{h.tokens[1]}", f"/a/{h.tokens[2]}", f"/admin/{h.admin}"):
        r = h.client.get(url)
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        for tag, _, link in strict(r.text).urls:
            directive = {"script": "script-src", "link": "style-src", "img": "img-src", "form": "form-action"}.get(tag)
            if directive:
                assert csp_allows(csp, directive, link), (tag, link, csp)


@pytest.mark.parametrize(
    ("template", "photo"),
    [
        ("http://127.0.0.1:9/{id}.jpg", "http://127.0.0.1:9/p00.jpg"),
        ("https://cdn.example.org/vist/{id}.jpg", "https://cdn.example.org/vist/p00.jpg"),
        ("//photos.example.org/{id}.jpg", "//photos.example.org/p00.jpg"),
        ("http://{id}.photos.example.org/x.jpg", "http://p00.photos.example.org/x.jpg"),
        ("/vist/{id}.jpg", "/vist/p00.jpg"),
    ],
)
def test_photos_of_a_photo_url_template_are_allowed_by_the_csp(tmp_path: Path, template: str, photo: str) -> None:
    """A study whose --photo-url is on plain http sent ``img-src 'self' https: data:``: the browser blocked every
    photo (checked in chromium: naturalWidth 0, "violates the following Content Security Policy directive").
    Now the page's CSP allows the template's photos (https ones as before)."""
    path = tmp_path / "s.db"
    create_study(path, task="rank", items=_items(1), per_item=1, photo_url=template)
    st = db.open_study(path)
    [(_, tok)] = service.invite(st, n=1)
    with TestClient(create_app(st)) as c:
        r = c.get(f"/a/{tok}")
    assert f'src="{photo}"' in r.text
    for tag, _, link in strict(r.text).urls:
        if tag == "img":
            assert csp_allows(r.headers["content-security-policy"], "img-src", link), (link, r.headers)
    assert "script-src 'self'" in r.headers["content-security-policy"]


@pytest.mark.parametrize(
    "template",
    ["javascript:alert(1)//{id}", "data:text/html,<script>{id}</script>", "file:///srv/photos/{id}.jpg",
     "photos/{id}.jpg", "ftp://x/{id}.jpg", " vbscript:{id}"],
)  # fmt: skip
def test_a_photo_url_no_browser_would_load_is_refused_at_init(tmp_path: Path, template: str) -> None:
    """--photo-url took any text with {id}: javascript:, data:, file: (a folder on the organiser's machine) or a
    relative path made every photo broken (or a script URL) on every task page. Now init refuses it in one
    sentence naming --photos for local files; nothing is written."""
    with pytest.raises(InputError, match=r"not an http\(s\) address.*--photos FOLDER") as err:
        create_study(tmp_path / "s.db", task="rank", items=_items(1), per_item=1, photo_url=template)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "s.db").exists()


def _security_headers_ok(headers: Any) -> None:
    assert headers.get("x-content-type-options") == "nosniff"
    assert headers.get("x-frame-options") == "DENY"
    assert headers.get("referrer-policy") == "no-referrer"
    assert "frame-ancestors 'none'" in headers.get("content-security-policy", "")


HEADER_ROUTES = [
    ("GET", "/nope"),
    ("GET", "/a/{token}/nope/deeper"),
    ("POST", "/a/{token}"),
    ("PUT", "/a/{token}/submit"),
    ("DELETE", "/admin/{admin}"),
    ("OPTIONS", "/a/{token}/progress"),
    ("TRACE", "/"),
    ("GET", "/static/studio.js"),
    ("GET", "/static/studio.css"),
    ("GET", "/static/../app.py"),
    ("GET", "/healthz"),
    ("GET", "/a/{token}/progress"),
    ("GET", "/admin/{admin}/summary.json"),
    ("GET", "/a/{token}/photos/p00.png"),
    ("GET", "/a/{token}/photos/none.png"),
    ("GET", "/a/{token}/"),
    ("HEAD", "/a/{token}"),
]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A small rank study with one photo file (p00.png) and a secret beside the photo folder."""
    tmp = tmp_path_factory.mktemp("plain")
    photos = tmp / "photos"
    photos.mkdir()
    (photos / "p00.png").write_bytes(b"\x89PNG\r\n\x1a\n fake")
    (tmp / "secret.png").write_bytes(b"SECRET")
    (photos / "out.png").symlink_to(tmp / "secret.png")
    path = tmp / "s.db"
    info = create_study(path, task="rank", items=_items(2), per_item=2, photos_dir=photos)
    st = db.open_study(path)
    pairs = service.invite(st, n=3)
    c = TestClient(create_app(st))
    c.__enter__()
    yield {"client": c, "study": st, "admin": info["admin_token"], "tokens": [t for _, t in pairs], "tmp": tmp}
    c.__exit__(None, None, None)


@pytest.mark.parametrize(("method", "route"), HEADER_ROUTES)
def test_every_response_carries_the_security_headers(plain: dict[str, Any], method: str, route: str) -> None:
    """Starlette's own 404 and 405 answers, static files, photos, /healthz and the trailing-slash redirect were
    sent without X-Content-Type-Options, X-Frame-Options, Referrer-Policy and CSP (only the app's own pages had
    them: a static file or a photo could be framed or sniffed). Now every response carries them."""
    url = route.format(token=plain["tokens"][0], admin=plain["admin"])
    r = plain["client"].request(method, url, follow_redirects=False)
    _security_headers_ok(r.headers)
    if method not in ("GET", "HEAD"):
        assert r.status_code in (404, 405), r.status_code
    if url.startswith("/static/studio"):
        assert r.status_code == 200 and "no-store" not in r.headers.get("cache-control", "")  # still cacheable


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8443", "127.0.0.1.evil.example", "[::1]:1"])
@pytest.mark.parametrize("route", ["/a/{token}/", "/static", "/admin/{admin}/"])
def test_redirects_never_name_the_host_the_client_claimed(plain: dict[str, Any], host: str, route: str) -> None:
    """Starlette's trailing-slash redirects were absolute URLs built from the Host header: ``Host: evil.example``
    on ``/a/TOKEN/`` answered ``Location: http://evil.example/a/TOKEN`` (a cache or proxy that keeps it sends
    the link's holder, token included, to that host). Now a redirect is a path on this server."""
    url = route.format(token=plain["tokens"][0], admin=plain["admin"])
    r = plain["client"].get(url, headers={"host": host}, follow_redirects=False)
    assert r.status_code in (307, 308)
    loc = r.headers["location"]
    assert loc.startswith("/") and not loc.startswith(("//", "/\\")) and host not in loc, loc
    assert loc == url.rstrip("/") or loc == url + "/"


def test_the_redirect_after_a_submission_is_a_path_of_this_server(plain: dict[str, Any]) -> None:
    """A browser submission is answered 303 to ``/a/TOKEN?saved=1`` whatever Host header it came with."""
    c, tok = plain["client"], plain["tokens"][1]
    page = read_page(c, tok)
    r = c.post(
        f"/a/{tok}/submit",
        data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3,4"},
        headers={"host": "evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/a/{tok}?saved=1"


TRAVERSALS = [
    "/static/../app.py",
    "/static/%2e%2e/app.py",
    "/static/%2E%2E%2Fapp.py",
    "/static/..%2f..%2fstudio%2fapp.py",
    "/static/..\\app.py",
    "/static/..%5capp.py",
    "/static/%2e%2e%5c%2e%2e%5cetc%5cpasswd",
    "/static//etc/passwd",
    "/static/%00",
    "/static/studio.js%00.png",
    "/static/templates/base.html",
    "/static/",
    "/a/{token}/photos/../../s.db",
    "/a/{token}/photos/..%2fs.db",
    "/a/{token}/photos/%2e%2e%2fsecret.png",
    "/a/{token}/photos/..%5csecret.png",
    "/a/{token}/photos/out.png",
    "/a/{token}/photos/p00.png%00.png",
    "/a/{token}/photos/%2fetc%2fpasswd",
    "/a/{token}/photos/C:%5cwindows%5cwin.ini",
    "/a/not-a-token/photos/p00.png",
    "/admin/{admin}/photos/p00.png",
]


@pytest.mark.parametrize("route", TRAVERSALS)
def test_traversal_in_static_and_photo_urls_reaches_nothing(plain: dict[str, Any], route: str) -> None:
    """Encoded dots, backslashes, NUL, absolute paths and a symlink out of the photo folder all answer 404 and
    none of the app's source, the study file or the secret beside the photo folder."""
    c = plain["client"]
    r = c.get(route.format(token=plain["tokens"][0], admin=plain["admin"]))
    assert r.status_code == 404, r.status_code
    assert b"SECRET" not in r.content and b"SQLite format" not in r.content and b"import" not in r.content
    _security_headers_ok(r.headers)


def test_a_real_photo_is_served_with_its_type_and_nosniff(plain: dict[str, Any]) -> None:
    """The positive control of the traversal probes: the photo file itself, as an image, never sniffed."""
    r = plain["client"].get(f"/a/{plain['tokens'][0]}/photos/p00.png")
    assert r.status_code == 200 and r.content.startswith(b"\x89PNG")
    assert r.headers["content-type"] == "image/png" and r.headers["x-content-type-options"] == "nosniff"


# ------------------------------------------------------------------------------------------- forged submissions
def _fresh(tmp_path: Path) -> tuple[Any, db.Study, list[str], str]:
    path = tmp_path / "f.db"
    info = create_study(path, task="rank", items=_items(2), per_item=2)
    st = db.open_study(path)
    toks = [t for _, t in service.invite(st, n=3)]
    return TestClient(create_app(st)), st, toks, info["admin_token"]


def test_forged_replayed_and_foreign_submissions_store_nothing(tmp_path: Path) -> None:
    """Another rater's form (their assignment and CSRF token) under my link, a forged or mangled CSRF token, a
    task nobody was given (with an HMAC only the server could make), a replay with another answer and the
    admin link as an invite are all refused; the one honest answer is stored once."""
    c, st, (a, b, _), admin = _fresh(tmp_path)
    pa, pb = read_page(c, a), read_page(c, b)
    answer = "1,2,3,4"
    cases = [
        (b, {"assignment": pa.assignment, "csrf": pa.csrf, "ranking": answer}, 403),  # A's form under B's link
        (a, {"assignment": pb.assignment, "csrf": pb.csrf, "ranking": answer}, 403),  # B's form under A's link
        (a, {"assignment": pa.assignment, "csrf": "0" * 64, "ranking": answer}, 403),
        (a, {"assignment": pa.assignment, "csrf": (pa.csrf or "").upper(), "ranking": answer}, 403),
        (a, {"assignment": pa.assignment, "csrf": (pa.csrf or "")[:-1], "ranking": answer}, 403),
        (a, {"assignment": pa.assignment, "csrf": "é" * 64, "ranking": answer}, 403),
        (a, {"assignment": pa.assignment, "ranking": answer}, 403),
        (a, {"assignment": str(int(pa.assignment or 0) + 1), "csrf": pa.csrf, "ranking": answer}, 403),
        (admin, {"assignment": pa.assignment, "csrf": pa.csrf, "ranking": answer}, 404),
    ]
    with st.read() as conn:
        who = service.authenticate(conn, a)
    assert who is not None
    # a task A never claimed, with the HMAC the server would make for it: the database says no (409)
    other = next(i for i in range(1, 40) if str(i) not in (pa.assignment, pb.assignment))
    forged = db.csrf_token(st.secret(), who.id, other)
    cases.append((a, {"assignment": str(other), "csrf": forged, "ranking": answer}, 409))
    for token, form, status in cases:
        r = c.post(f"/a/{token}/submit", data={k: v or "" for k, v in form.items()}, headers=JSON)
        assert r.status_code == status, (form, r.text)
        assert set(r.json()) == {"error"} and r.json()["error"].count(".") <= 2
        _security_headers_ok(r.headers)
    assert count(st, db.judgements) == 0
    honest = {"assignment": pa.assignment, "csrf": pa.csrf, "ranking": answer}
    assert c.post(f"/a/{a}/submit", data=honest, headers=JSON).json() == {"saved": True, "duplicate": False}
    assert c.post(f"/a/{a}/submit", data=honest, headers=JSON).json() == {"saved": True, "duplicate": True}
    replay = c.post(f"/a/{a}/submit", data={**honest, "ranking": "4,3,2,1"}, headers=JSON)
    assert replay.status_code == 409
    assert count(st, db.judgements) == 1
    with st.read() as conn:
        [row] = conn.execute(db.judgements.select()).all()
    assert row.annotator_id == who.id and str(row.assignment_id) == pa.assignment


HOSTILE_BODIES = [
    ("application/json", b"[" * 8000 + b"]" * 8000, 400),
    ("application/json", b'{"a":' * 2500 + b"1" + b"}" * 2500, 400),
    ("application/json", b'["assignment", "1"]', 400),
    ("application/json", b'"assignment=1"', 400),
    ("application/json", b"12", 400),
    ("application/json", b'{"assignment": "1", "assignment": "2"}', 400),
    ("application/json", b'{"assignment": "\\ud800"}', 400),
    ("application/json", b'{"assignment": {"$gt": 0}, "csrf": ["x"]}', 422),
    ("application/json", b'{"assignment": 1e999}', 422),
    ("application/json", b'{"assignment": ' + b"9" * 5000 + b"}", 400),
    ("application/x-www-form-urlencoded", b"&".join(b"f%d=1" % i for i in range(80)), 400),
    ("application/x-www-form-urlencoded", b"assignment=%ff%fe", 400),
    ("application/x-www-form-urlencoded", b"x" * 17000, 413),
    ("text/plain", b"assignment=1", 415),
    ("multipart/form-data; boundary=x", b"--x\r\n\r\n--x--", 415),
    ("application/xml", b"<a/>", 415),
    ("application/json; charset=utf-16", b'{"a": "1"}', 415),
    ("<script>alert(1)</script>", b"a=1", 415),
]


@pytest.mark.parametrize(("ctype", "body", "status"), HOSTILE_BODIES)
def test_hostile_bodies_get_one_sentence_and_store_nothing(
    plain: dict[str, Any], ctype: str, body: bytes, status: int
) -> None:
    """Deeply nested or non-object JSON, objects where text belongs, out-of-range numbers, too many fields, bad
    UTF-8, oversized bodies and other content types: one sentence with the documented status, headers intact,
    nothing stored; the browser page of a reflected content type shows it as text."""
    c, st, tok = plain["client"], plain["study"], plain["tokens"][2]
    before = count(st, db.judgements)
    r = c.post(f"/a/{tok}/submit", content=body, headers={"content-type": ctype, **JSON})
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"} and "\n" not in r.json()["error"] and "Traceback" not in r.text
    _security_headers_ok(r.headers)
    page = c.post(f"/a/{tok}/submit", content=body, headers={"content-type": ctype})
    assert page.status_code == status and strict(page.text).problems == []
    assert count(st, db.judgements) == before


def test_a_chunked_body_over_the_limit_is_refused(plain: dict[str, Any]) -> None:
    """A body without Content-Length (chunked) that runs past 16 KiB is cut off with 413, nothing stored."""
    c, st, tok = plain["client"], plain["study"], plain["tokens"][2]
    sent = []

    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            sent.append(1)
            yield b"a" * 1024

    before = count(st, db.judgements)
    urlencoded = {"content-type": "application/x-www-form-urlencoded", **JSON}
    r = c.post(f"/a/{tok}/submit", content=chunks(), headers=urlencoded)
    assert r.status_code == 413 and count(st, db.judgements) == before
    assert set(r.json()) == {"error"} and len(sent) == 100  # the test client sends it all: still refused


def test_annotator_names_never_reach_a_header_and_line_breaks_in_them_are_refused(hostile: dict[str, Hostile]) -> None:
    """No response header names the rater (no Content-Disposition, redirects carry only the token); a name
    prefix holding CR/LF (a header injection if it ever reached one) is refused when invited."""
    h = hostile["rank"]
    for url in (f"/a/{h.tokens[1]}", f"/a/{h.tokens[1]}/progress", f"/admin/{h.admin}/summary.json"):
        r = h.client.get(url)
        assert all(h.names[1] not in v and "rater" not in v for v in r.headers.values())
    assert h.client.get(f"/a/{h.tokens[1]}/progress").json()["annotator"] == h.names[1]
    for prefix in ("a\r\nSet-Cookie: x=1", "a\nb", "a\u2028b", "\x1b[31mred"):
        with pytest.raises(InputError):
            service.invite(h.study, n=1, prefix=prefix)


def test_studio_js_builds_no_markup_from_text() -> None:
    """The one script writes the page only through textContent and attributes it sets itself: no innerHTML,
    outerHTML, insertAdjacentHTML, document.write, eval, Function or string timers (so a story can never become
    markup or code in the browser, whatever the server sends)."""
    from vistkit.studio import app as app_module

    js = (app_module.HERE / "static" / "studio.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(", "srcdoc"):
        assert sink not in js, sink
    assert re.search(r"setTimeout\(\s*['\"`]", js) is None
    css = (app_module.HERE / "static" / "studio.css").read_text(encoding="utf-8")
    assert "url(" not in css.replace("url(data:", "") and "@import" not in css


# ----------------------------------------------------------------------------------------------------- exports
def test_exports_give_back_hostile_text_exactly_and_neutralise_formula_cells(
    hostile: dict[str, Hostile], tmp_path: Path
) -> None:
    """Rankings, likert and pairs CSVs read back through vistkit's readers with every hostile story text and
    system name exactly as stored; a raw CSV reader (a spreadsheet) sees each cell that would start a formula
    behind one ``'``; the JSON lines hold the text verbatim (U+2028 included)."""
    from vistkit.data.output import CSV_TRIGGERS
    from vistkit.meta.human import read_likert, read_pairs, read_rankings

    systems = {"human", *EVIL_SYSTEMS}
    h = hostile["rank"]
    rk = tmp_path / "rk.csv"
    analysis.export(h.study, rk, fmt="rankings")
    tasks = read_rankings(rk)
    stories = [s for t in tasks.values() for s in t["stories"].values()]
    assert {s.text for s in stories} <= h.texts and {s.system for s in stories} == systems
    assert {t for t in tasks} <= set(EVIL_KEYS)
    pairs_file = tmp_path / "pairs.csv"
    analysis.export(h.study, pairs_file, fmt="pairs")
    pairs = read_pairs(pairs_file)
    assert pairs and {p.text_1 for p in pairs} | {p.text_2 for p in pairs} <= h.texts
    assert {p.system_1 for p in pairs} | {p.system_2 for p in pairs} <= systems
    for f in (rk, pairs_file):
        with f.open(newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    if cell[:1] in CSV_TRIGGERS:
                        assert re.fullmatch(r"[+-]?[\d.]+(e[+-]?\d+)?", cell), (f.name, cell)  # a plain number
    jl = tmp_path / "j.jsonl"
    analysis.export(h.study, jl, fmt="jsonl")
    recs = [json.loads(line) for line in jl.read_text(encoding="utf-8").split("\n") if line]
    shown = {s["text"] for r in recs for s in r["shown"]}
    assert shown <= h.texts and any("\u2028" in t for t in h.texts)
    assert {r["annotator"] for r in recs} == {h.names[0], h.names[2]}
    lk = hostile["likert"]
    out = tmp_path / "lk.csv"
    analysis.export(lk.study, out, fmt="likert")
    scores = read_likert(out)
    assert set(scores.texts) <= lk.texts and set(scores.systems) <= systems and len(scores) == 2
    assert float(scores.values.min()) == 2.0 == float(scores.values.max())


@pytest.mark.parametrize(
    ("method", "route"),
    [("GET", "/a/{token}"), ("GET", "/a/{token}/progress"), ("GET", "/admin/{admin}/summary.json"),
     ("OPTIONS", "/a/{token}/submit"), ("POST", "/a/{token}/submit")],
)  # fmt: skip
def test_no_cross_origin_reads_and_no_cookies(plain: dict[str, Any], method: str, route: str) -> None:
    """A page on another origin cannot read any answer (no Access-Control-Allow-* header, a preflight is not
    granted) and nothing sets a cookie (the link is the only credential, so a forged cross-site request carries
    none)."""
    url = route.format(token=plain["tokens"][0], admin=plain["admin"])
    headers = {"origin": "https://evil.example", "access-control-request-method": "POST", **JSON}
    r = plain["client"].request(method, url, headers=headers, follow_redirects=False)
    assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers
    assert "set-cookie" not in r.headers
    if method == "OPTIONS":
        assert r.status_code == 405


@pytest.mark.parametrize(
    "path",
    ["/a/x%0d%0aSet-Cookie:%20a=b/", "/a/x%0aLocation:%20https:evil.example/", "/a/%5c%5cevil.example/",
     "/a/x%09y/", "/a/%E2%80%A8/"],
)  # fmt: skip
def test_a_redirect_never_splits_the_response_or_leaves_the_server(plain: dict[str, Any], path: str) -> None:
    """CR, LF, tab, backslashes and U+2028 in a path that gets the trailing-slash redirect: the Location is one
    percent-encoded path on this server, no header is added."""
    r = plain["client"].get(path, follow_redirects=False, headers={"host": "evil.example"})
    assert r.status_code == 307
    loc = r.headers["location"]
    assert loc.startswith("/a/") and not re.search(r"[\r\n\t\\ ]", loc) and "evil.example" not in loc.split("/")[2:3]
    assert "set-cookie" not in r.headers and len(r.headers.get_list("location")) == 1
