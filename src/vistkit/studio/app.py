"""The studio web app (Starlette, Jinja2 templates with autoescaping, vanilla JS).

Routes: ``GET /a/{token}`` (the annotator's next task), ``POST /a/{token}/submit``, ``GET /a/{token}/progress``,
``POST /a/{token}/stored`` (whether a submission's answer is stored: the page asks after a lost connection),
``GET /admin/{token}`` and ``/admin/{token}/summary.json`` (admin token only), ``GET /a/{token}/photos/{name}``
(files inside the study's photo folder only, to holders of an invite link or the admin link), ``/static/...`` and
``/healthz``. Bodies above `MAX_BODY` bytes are
refused with 413; every state-changing form carries a CSRF token.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from vistkit.studio import LIKERT_LABELS, LIKERT_STATEMENTS, analysis, charts, db, service
from vistkit.studio.service import StudioError

HERE = Path(__file__).parent
MAX_BODY = 16 * 1024
PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")

CSP = (
    "default-src 'self'; img-src 'self' https: data:; script-src 'self'; style-src 'self'; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'"
)
"""The pages' Content-Security-Policy (`content_security_policy` adds the origin of an http ``--photo-url``)."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def content_security_policy(photo_url: str | None) -> str:
    """`CSP` with the photos of a ``--photo-url`` template allowed: images come from the app and any https
    address, and also any http address when the template is on plain http (or scheme-relative, ``//host/...``,
    on a page served over http). Without it a study whose photos are on an http server
    (``http://127.0.0.1:9000/{id}.jpg``) showed every photo as broken: the browser refused to load them."""
    if not photo_url:
        return CSP
    text = photo_url.strip().lower()
    if text.startswith(("http:", "//")):
        return CSP.replace("https: data:", "https: http: data:")
    return CSP  # https: is allowed already; a path (/photos/{id}.jpg) is the app's own origin


class SecureResponses:
    """ASGI middleware: every response carries ``headers`` (the security headers) where it has none of its own,
    also the ones the app does not write itself (Starlette's 404 and 405, static files, photos, /healthz;
    static files and photos keep their own caching: `VersionedStatic`), and a redirect names a path on this
    server, never a host: Starlette's trailing-slash redirects (``/a/TOKEN/`` -> ``/a/TOKEN``) were built from
    the request's ``Host`` header, so a forged ``Host: evil.example`` got ``Location:
    http://evil.example/a/TOKEN`` (a poisoned cache or proxy sends the link's holder, token and all, to that
    host)."""

    def __init__(self, app: Any, headers: dict[str, str]) -> None:
        self.app = app
        self.headers = headers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                from urllib.parse import urlsplit, urlunsplit

                from starlette.datastructures import MutableHeaders

                headers = MutableHeaders(scope=message)
                for key, value in self.headers.items():
                    if key not in headers:  # static files and photos set their own caching
                        headers[key] = value
                location = headers.get("location")
                if location is not None:
                    parts = urlsplit(location)
                    path = "/" + parts.path.lstrip("/\\")  # never //host or /\\host (read as another host)
                    headers["location"] = urlunsplit(("", "", path, parts.query, parts.fragment))
            await send(message)

        await self.app(scope, receive, send_secured)


STATIC_FOREVER = "public, max-age=31536000, immutable"
"""The caching of a static file asked for by its current version (``/static/studio.js?v=HASH``)."""
STATIC_CHECK = "no-cache"
"""The caching of a static file asked for without its current version: the browser asks again each time (a 304
when unchanged)."""


STATIC_FOLDER = HERE / "static"
"""The folder of the pages' script, stylesheet and icons."""


def static_versions(folder: Path | None = None) -> dict[str, str]:
    """File name -> the first 12 hex digits of the SHA-256 of its content, for the files directly in ``folder``
    (default `STATIC_FOLDER`), as they are now."""
    import hashlib

    folder = STATIC_FOLDER if folder is None else folder
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in sorted(folder.iterdir()) if p.is_file()
    }


class StaticVersions:
    """File name -> the first 12 hex digits of the SHA-256 of its content now, for the files directly in
    ``folder``: hashed again whenever a file's size, modification time or inode changed. Hashes taken once when
    the server started named the old content after a file changed under a running server (vistkit upgraded in
    place): the old address served the new file "cached for a year" and the pages went on naming it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._known: dict[str, tuple[tuple[int, int, int], str]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> str | None:
        """The hash of file ``name`` as it is now; None when it is no file directly in the folder."""
        import hashlib
        import os
        import stat

        if not name or name in (".", "..") or "/" in name or "\\" in name:
            return None
        path = self.folder / name
        try:
            before = os.stat(path)
            if not stat.S_ISREG(before.st_mode):
                return None
            mark = (before.st_size, before.st_mtime_ns, before.st_ino)
            known = self._known.get(name)
            if known is not None and known[0] == mark:
                return known[1]
            data = path.read_bytes()
            after = os.stat(path)
        except OSError:
            return None
        if (after.st_size, after.st_mtime_ns, after.st_ino) != mark or len(data) != after.st_size:
            return None  # changed while it was read: no version now (its address is checked again on each use)
        digest = hashlib.sha256(data).hexdigest()[:12]
        with self._lock:
            self._known[name] = (mark, digest)
        return digest

    def __getitem__(self, name: str) -> str:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found


class VersionedStatic:
    """ASGI app: the static files of ``folder`` (Starlette's `StaticFiles`), cached for a year when asked for by
    their current content hash (``?v=HASH``, as `static_url` writes them in every page) and revalidated on each use
    otherwise. The URLs carried no version and no caching rule, so a browser kept a script it had cached by its
    own heuristics and could run an old studio.js against the pages of an upgraded server."""

    def __init__(self, folder: Path, versions: StaticVersions | dict[str, str] | None = None) -> None:
        self.files = StaticFiles(directory=str(folder))
        self.versions = StaticVersions(folder) if versions is None else versions

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from urllib.parse import parse_qs

        name = str(scope.get("path", "")).rsplit("/", 1)[-1]
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [""])
        current = await run_in_threadpool(self.versions.get, name) if asked != [""] else None
        rule = STATIC_FOREVER if current is not None and asked == [current] else STATIC_CHECK

        async def send_cached(message: Any) -> None:
            if message["type"] == "http.response.start":
                from starlette.datastructures import MutableHeaders

                headers = MutableHeaders(scope=message)
                headers["Cache-Control"] = rule if message.get("status") in (200, 304) else "no-store"
            await send(message)

        await self.files(scope, receive, send_cached)


def _photo_index(folder: str | None) -> dict[str, str]:
    """Photo id -> file name, for the image files directly inside ``folder``."""
    if not folder or not Path(folder).is_dir():
        return {}
    out: dict[str, str] = {}
    for p in sorted(Path(folder).iterdir()):
        if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES and _SAFE_NAME.match(p.name):
            out.setdefault(p.stem, p.name)
    return out


def photo_folder_problem(
    folder: str | Path, photo_ids: Iterable[str], *, index: dict[str, str] | None = None
) -> str | None:
    """What keeps the study's photo folder from showing ``photo_ids`` (it is not there, or holds no image file
    of some of them directly inside it, as `_photo_index` reads it: ``index``, when the caller has it), in words
    ending "... (not available)" in their place"; None when every photo has its file."""
    ids = list(dict.fromkeys(photo_ids))
    shown = 'so annotators see "Photo N (not available)" in their place'
    if not Path(folder).is_dir():
        return f"its photo folder {folder} is not there on this machine, {shown}"
    index = _photo_index(str(folder)) if index is None else index
    missing = [p for p in ids if p not in index]
    if not missing:
        return None
    looked = f"{missing[0]}{PHOTO_SUFFIXES[0]}, " + ", ".join(PHOTO_SUFFIXES[1:-1]) + f" or {PHOTO_SUFFIXES[-1]}"
    return (
        f"{len(missing):,} of the study's {len(ids):,} photos have no image file directly in its photo folder "
        f"{folder} (first: {missing[0]!r}; looked for {looked}), {shown}"
    )


def _study_photo_ids(st: db.Study) -> list[str]:
    """The photo ids of the study's items (an item whose ids cannot be read is left to the pages that show it)."""
    from sqlalchemy import select

    with st.read() as conn:
        rows = conn.execute(select(db.items.c.photo_ids)).scalars().all()
    ids: dict[str, None] = {}
    for raw in rows:
        try:
            value = json.loads(raw)
        except (TypeError, ValueError, RecursionError):
            continue
        if isinstance(value, list):
            ids.update(dict.fromkeys(str(p) for p in value))
    return list(ids)


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


FORM_TYPES = ("application/x-www-form-urlencoded", "application/json")
"""The encodings a submission may use (no content type at all: urlencoded)."""


def _charset(params: str) -> str | None:
    """The ``charset`` parameter of a Content-Type header's parameters (lower case, unquoted), or None."""
    for part in params.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


async def _read_form(request: Request) -> dict[str, str]:
    """The urlencoded (or JSON) body, at most `MAX_BODY` bytes: else `StudioError` 415 (another encoding, such
    as multipart, or a charset other than UTF-8), 413 (too large) or 400 (not a form of that encoding, such as a
    percent-escape that is not UTF-8)."""
    ctype, _, params = request.headers.get("content-type", "").partition(";")
    ctype = ctype.strip().lower()
    if ctype and ctype not in FORM_TYPES:
        raise StudioError(
            415, f"send the form urlencoded ({FORM_TYPES[0]}) or as JSON ({FORM_TYPES[1]}), not {ctype[:60]}"
        )
    charset = _charset(params)
    if charset is not None and charset not in ("utf-8", "utf8"):  # another encoding of the text: 415, as documented
        raise StudioError(415, f"send the form in UTF-8 (charset=utf-8), not charset={charset[:40]}")
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > MAX_BODY:
                raise StudioError(413, f"the request is larger than {MAX_BODY} bytes")
        except ValueError:
            raise StudioError(400, "bad Content-Length header") from None
    from starlette.requests import ClientDisconnect

    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise StudioError(413, f"the request is larger than {MAX_BODY} bytes")
    except ClientDisconnect:  # the sender went away mid-body: nobody reads the answer, nothing is stored
        raise StudioError(400, "the request ended before its body was complete") from None
    try:
        text = body.decode("utf-8")
        if ctype == "application/json":
            from vistkit.data.readers import unique_pairs

            data = json.loads(text or "{}", object_pairs_hook=unique_pairs)  # a field given twice: refused
            if not isinstance(data, dict):
                raise ValueError
            form = {str(k): str(v) for k, v in data.items()}
            for k, v in form.items():  # a lone surrogate (JSON's "\ud800") is no text: UnicodeEncodeError
                k.encode("utf-8")
                v.encode("utf-8")
            return form
        fields = parse_qsl(  # errors="strict": a percent-escape that is not UTF-8 is a bad body (400)
            text, keep_blank_values=True, max_num_fields=64, strict_parsing=False, encoding="utf-8", errors="strict"
        )
        if len({k for k, _ in fields}) != len(fields):  # a field given twice: which one counts is ambiguous
            raise ValueError
        return dict(fields)
    except (ValueError, UnicodeError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise StudioError(400, "the request body is not a valid form") from None


#: what an annotator is told when the study's storage fails (`db.storage_problem` kinds)
_STORAGE_REASONS = {
    "damaged": "the study file is damaged",
    "read-only": "the study is read-only on the server",
    "full": "the server's disk is full",
    "io": "the server's disk could not write it",
    "locked": "the study is busy",
    "unopenable": "the study file cannot be opened",
}


#: what an operating-system error of a request says about the server's storage (errno name -> `_STORAGE_REASONS` kind)
_OS_PROBLEMS = {"ENOSPC": "full", "EDQUOT": "full", "EROFS": "read-only", "EACCES": "read-only", "EIO": "io"}


def _os_problem(exc: BaseException) -> tuple[str, str] | None:
    """``(kind, what the system said)`` for an `OSError` of the storage (a full disk, a read-only file system,
    an input/output error) raised while a request ran, else None."""
    import errno

    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    kind = _OS_PROBLEMS.get(errno.errorcode.get(exc.errno, ""))
    return None if kind is None else (kind, (exc.strerror or str(exc))[:200])


def _quiet_accept_errors(study_name: str, every: float = 10.0) -> Any:
    """An event-loop exception handler that turns asyncio's "socket.accept() out of system resource" (the server
    used up its open files: thousands of connections) into one warning line every ``every`` seconds. asyncio logs
    it with a traceback once per waiting connection: 3 MB of log in a few seconds, and a server whose log is a
    pipe nobody reads stopped altogether. Anything else goes to the loop's default handler."""
    import errno
    import time

    said = [float("-inf")]

    def handler(loop: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            if time.monotonic() - said[0] >= every:
                said[0] = time.monotonic()
                from vistkit.errors import warn

                warn(
                    f"study {study_name}: the server cannot take more connections ({exc.strerror}); new clients "
                    "wait until slow or idle ones are disconnected (raise the open-file limit, ulimit -n, if this "
                    "repeats)"
                )
            return
        loop.default_exception_handler(context)

    return handler


def create_app(study: str | Path | db.Study, *, name: str | None = None) -> Starlette:
    """The ASGI app for one study (a path, a SQLAlchemy URL or an open `Study`; ``name`` for the server's log).

    A request the study's storage fails (a full disk, a read-only or damaged file) is answered with 503 and one
    sentence (nothing of it is stored: its transaction is rolled back); any other failure with 500 and one
    sentence (its traceback goes to the server's log only). On shutdown the SQLite write-ahead log is checkpointed
    into the study file and the engine is closed (`db.Study.close`)."""
    st = study if isinstance(study, db.Study) else db.open_study(study)
    study_name = name or st.name
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(["html"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    static_folder = STATIC_FOLDER
    versions = StaticVersions(static_folder)

    def static_url(name: str) -> str:
        """The address of a static file with the hash of its content now: an upgraded server's pages name a new
        address (also one upgraded in place while it ran); a file that cannot be read now gets no version."""
        current = versions.get(name)
        return f"/static/{name}" if current is None else f"/static/{name}?v={current}"

    env.globals["static_url"] = static_url
    photos_dir = st.setting("photos_dir")
    photo_files = _photo_index(photos_dir)
    photo_url = st.setting("photo_url")
    secure = {**SECURITY_HEADERS, "Content-Security-Policy": content_security_policy(photo_url)}
    task_kind = st.setting("task")

    def page(name: str, status: int = 200, headers: dict[str, str] | None = None, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(title=st.setting("title") or "vistkit studio", **ctx)
        return HTMLResponse(html, status_code=status, headers=headers or secure)

    def error(request: Request, exc: StudioError) -> Response:
        if _wants_json(request):
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=secure)
        return page("message.html", status=exc.status, heading="Sorry", message=exc.message)

    def photo_src(pid: str, token: str) -> str | None:
        if photo_url:
            return service.photo_link(str(photo_url), pid)
        name = photo_files.get(pid)
        return None if name is None else f"/a/{token}/photos/{name}"  # served only to holders of a study link

    def _auth(token: str) -> service.Annotator:
        with st.read() as conn:
            who = service.authenticate(conn, token)
        if who is None:
            raise StudioError(404, "this invite link is not valid; ask the study's organiser for yours")
        return who

    def _task_page(token: str, saved: bool) -> Response:
        who = _auth(token)
        aid = service.claim_next(st, who)
        if aid is None:
            done, total = service.progress(st, who)
            return page("done.html", done=done, total=total, saved=saved)
        t = service.load_task(st, who, aid)
        return page(
            "task.html",
            task=t,
            kind=task_kind,
            token=token,
            csrf=db.csrf_token(st.secret(), who.id, aid),
            photos=[{"id": p, "src": photo_src(p, token)} for p in t.photo_ids],
            statements=[(a, LIKERT_STATEMENTS[a]) for a in st.setting("aspects", [])],
            labels=LIKERT_LABELS,
            allow_same=bool(st.setting("allow_same", True)),
            saved=saved,
            annotator=who.name,
        )

    async def annotate(request: Request) -> Response:
        try:
            return await run_in_threadpool(
                _task_page, request.path_params["token"], request.query_params.get("saved") == "1"
            )
        except StudioError as exc:
            return error(request, exc)

    async def submit(request: Request) -> Response:
        token = request.path_params["token"]
        try:
            form = await _read_form(request)
            who = await run_in_threadpool(_auth, token)
            result = await run_in_threadpool(service.submit, st, who, form)
        except StudioError as exc:
            if _wants_json(request):
                return JSONResponse({"error": exc.message}, status_code=exc.status, headers=secure)
            return page("message.html", status=exc.status, heading="Not saved", message=exc.message, token=token)
        if _wants_json(request):
            return JSONResponse(result, headers=secure)
        return RedirectResponse(f"/a/{token}?saved=1", status_code=303, headers=secure)

    async def stored(request: Request) -> Response:
        """Whether a submission's answer is stored (`service.stored_answer`), as JSON; stores nothing."""
        try:
            form = await _read_form(request)
            who = await run_in_threadpool(_auth, request.path_params["token"])
            result = await run_in_threadpool(service.stored_answer, st, who, form)
        except StudioError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=secure)
        return JSONResponse(result, headers=secure)

    async def annotator_progress(request: Request) -> Response:
        try:
            who = await run_in_threadpool(_auth, request.path_params["token"])
        except StudioError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=secure)
        done, total = await run_in_threadpool(service.progress, st, who)
        return JSONResponse({"annotator": who.name, "done": done, "total": total}, headers=secure)

    def _admin(token: str) -> None:
        if not service.is_admin(st, token):
            raise StudioError(403, "this is not the admin link of this study")

    async def admin(request: Request) -> Response:
        try:  # a database read: in a worker thread, not on the event loop (it would stop every other request)
            await run_in_threadpool(_admin, request.path_params["token"])
        except StudioError as exc:
            return error(request, exc)
        s = await run_in_threadpool(lambda: analysis.summary(analysis.load(st)))
        chart = charts.results_chart_svg(
            s["task"],
            s["results"],
            reference_system=str(st.setting("reference_system") or "human"),
            n_systems=len(s["results"]),
        )
        return page("admin.html", s=s, token=request.path_params["token"], chart=chart)

    async def admin_json(request: Request) -> Response:
        try:
            await run_in_threadpool(_admin, request.path_params["token"])
        except StudioError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=secure)
        s = await run_in_threadpool(lambda: analysis.summary(analysis.load(st)))
        return JSONResponse(s, headers=secure)

    def _may_see_photos(token: str) -> bool:
        if service.is_admin(st, token):
            return True
        with st.read() as conn:
            return service.authenticate(conn, token) is not None

    async def photo(request: Request) -> Response:
        name = request.path_params["name"]
        if not await run_in_threadpool(_may_see_photos, request.path_params["token"]):
            return PlainTextResponse("no such photo", status_code=404)
        if not photos_dir or not _SAFE_NAME.match(name) or Path(name).suffix.lower() not in PHOTO_SUFFIXES:
            return PlainTextResponse("no such photo", status_code=404)
        root = Path(photos_dir).resolve()
        path = (root / name).resolve()
        if not path.is_relative_to(root) or path.parent != root or not path.is_file():
            return PlainTextResponse("no such photo", status_code=404)
        return FileResponse(
            path, headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"}
        )

    async def index(request: Request) -> Response:
        return page("message.html", heading="vistkit studio", message="Open the invite link you were given.")

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    def failure(request: Request, status: int, message: str, headers: dict[str, str]) -> Response:
        if _wants_json(request) or request.url.path.endswith((".json", "/progress", "/stored")):  # the JSON routes
            return JSONResponse({"error": message}, status_code=status, headers=headers)
        post = request.method == "POST"
        token = request.path_params.get("token") if post else None
        heading = "Not saved" if post else "Sorry"
        return page("message.html", status=status, headers=headers, heading=heading, message=message, token=token)

    async def storage_failed(request: Request, exc: Exception) -> Response:
        """A database error or an `OSError` of the storage (a full disk, a read-only or damaged file): 503 and
        one sentence; anything else goes on to the 500 handler."""
        problem = db.storage_problem(exc) or _os_problem(exc)
        if problem is None:
            raise exc  # not the storage: the 500 handler answers, and the traceback goes to the server's log
        kind = problem[0]
        from vistkit.errors import warn

        if db.storage_problem(exc) is not None:
            warn(str(db.study_error(exc, study_name)))  # for the organiser, in the server's log
        else:
            warn(f"study {study_name}: a request failed on the server's storage ({problem[1]}); nothing was stored")
        reason = _STORAGE_REASONS[kind]
        if request.method == "POST":
            message = f"the study could not be saved ({reason}); your answer was not stored, try again in a few minutes"
        else:
            message = f"the study could not be read or updated ({reason}); try again in a few minutes"
        return failure(request, 503, message, {**secure, "Retry-After": "60"})

    async def study_file_changed(request: Request, exc: Exception) -> Response:
        """The study file was deleted, moved or replaced under the running server (`db.StudyFileChanged`): 503,
        nothing stored, the organiser's sentence in the server's log. A changed ``-wal`` or ``-shm`` file the next
        write could not recover from (`db.Study.recover`: another program has the study open too): what the
        server's open log holds is copied into the study file first (`db.Study.salvage`), once."""
        from vistkit.errors import warn

        warn(str(exc))
        try:
            if await run_in_threadpool(st.salvage):
                warn(f"study {study_name}: the judgements this server held were copied into the study file")
        except Exception as salvage_failed:  # the log says so; the answer is 503 all the same
            warn(f"study {study_name}: the judgements this server held could not be copied ({salvage_failed})")
        if request.method == "POST":
            message = (
                "the study could not be saved (its file was moved or replaced on the server); your answer was not "
                "stored, tell the study's organiser"
            )
        else:
            message = (
                "the study cannot be used (its file was moved or replaced on the server); tell the study's organiser"
            )
        return failure(request, 503, message, {**secure, "Retry-After": "60"})

    async def study_damaged(request: Request, exc: Exception) -> Response:
        """A study whose content vistkit cannot use (a row or setting changed by hand: `db.damaged`): 503 and one
        sentence, the organiser's sentence in the server's log (no traceback)."""
        from vistkit.errors import warn

        warn(str(exc))
        if request.method == "POST":
            message = "the study could not be saved (the study file is damaged); your answer was not stored"
        else:
            message = "the study could not be read (the study file is damaged); tell the study's organiser"
        return failure(request, 503, message, secure)

    async def unexpected(request: Request, exc: Exception) -> Response:
        message = "the server hit an unexpected error (the organiser finds it in the server's log); reload the page"
        return failure(request, 500, message, secure)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import asyncio

        loop = asyncio.get_running_loop()
        mine = loop.get_exception_handler() is None
        if mine:
            loop.set_exception_handler(_quiet_accept_errors(study_name))
        try:
            yield
        finally:
            if mine:
                loop.set_exception_handler(None)
        await run_in_threadpool(st.close)

    routes = [
        Route("/", index),
        Route("/healthz", health),
        Route("/a/{token}", annotate, methods=["GET"]),
        Route("/a/{token}/submit", submit, methods=["POST"]),
        Route("/a/{token}/progress", annotator_progress, methods=["GET"]),
        Route("/a/{token}/stored", stored, methods=["POST"]),
        Route("/admin/{token}", admin, methods=["GET"]),
        Route("/admin/{token}/summary.json", admin_json, methods=["GET"]),
        Route("/a/{token}/photos/{name:path}", photo, methods=["GET"]),
        Mount("/static", app=VersionedStatic(static_folder, versions), name="static"),
    ]
    from sqlalchemy.exc import DBAPIError
    from starlette.middleware import Middleware

    from vistkit.errors import VistkitError

    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecureResponses, headers=secure)],
        exception_handlers={
            DBAPIError: storage_failed,
            OSError: storage_failed,
            db.StudyFileChanged: study_file_changed,
            VistkitError: study_damaged,
            Exception: unexpected,
        },
        lifespan=lifespan,
    )
    app.state.study = st
    app.state.photo_files = photo_files
    app.state.security_headers = secure
    return app


#: seconds a client has to send one whole request (head and body), from connecting or from its previous answer
REQUEST_TIMEOUT = 30.0


def _plain_answer(status: int, reason: str, body: str, headers: dict[str, str]) -> bytes:
    """A whole ``text/plain`` HTTP/1.1 answer that closes the connection, with ``headers`` (the security headers):
    what the server itself writes when there is no request the app could answer."""
    data = body.encode()
    head = [f"HTTP/1.1 {status} {reason}", "content-type: text/plain; charset=utf-8", "connection: close"]
    head += [f"{k.lower()}: {v}" for k, v in headers.items()]
    head.append(f"content-length: {len(data)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


def guarded_protocol(request_timeout: float = REQUEST_TIMEOUT, *, headers: dict[str, str] | None = None) -> type:
    """uvicorn's h11 protocol with a deadline per request: a client that has not sent a whole request (head and
    body, at most `MAX_BODY` bytes) ``request_timeout`` seconds after connecting or after its previous answer is
    disconnected (a 408 when it had not sent its head). Without it, a client sending a byte now and then, or
    connecting and sending nothing, held its connection (and a file descriptor) for ever: a few hundred of them
    used up the server's descriptors and nobody else was answered.

    The answers the server writes itself, without the app (400 for a request that is not HTTP: a malformed request
    line, header or chunk, a missing ``Host``; the 408), carry ``headers`` (default `SECURITY_HEADERS`) as the
    app's answers do: uvicorn's own 400 had none of them."""
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    secure = dict(SECURITY_HEADERS if headers is None else headers)

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request h11 cannot parse, with the security headers; a connection that has
            begun an answer already (the app answered before the bad part arrived) is only closed."""
            if self.transport.is_closing():
                return
            if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                self.transport.write(_plain_answer(400, "Bad Request", "the request is not valid HTTP", secure))
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def shutdown(self) -> None:
            """The server stops (SIGTERM, Ctrl-C): a client still sending its request is disconnected now (it
            stored nothing and may send it again) instead of holding the stop for the grace period and being
            cancelled with a traceback in the log; a whole request is still answered."""
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                self.transport.close()
                return
            super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(request_timeout, self._expire)

        def _expire(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                return  # the whole request is in: the app answers it, however long that takes
            if self.cycle is None or self.cycle.response_complete:
                body = "the request took too long to arrive; send it again"
                self.transport.write(_plain_answer(408, "Request Timeout", body, secure))
            self.transport.close()  # an app still reading the body sees a disconnect: nothing is stored

    return GuardedH11Protocol


def serve(
    study: str | Path | db.Study,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    name: str | None = None,
    check: bool = True,
    request_timeout: float = REQUEST_TIMEOUT,
) -> None:
    """Run the app on uvicorn until interrupted (Ctrl-C, SIGTERM or SIGHUP, a closed terminal: the study is
    checkpointed and closed first).

    Host and port are checked first (`check_listen`), and a study this process cannot write (or a damaged one) is
    refused with one sentence (`db.check_writable`; ``check=False``: the caller did it) before the server starts.
    A client gets ``request_timeout`` seconds to send each whole request (`guarded_protocol`)."""
    import signal
    import threading

    import uvicorn

    from vistkit.studio.network import check_listen

    host = check_listen(host, port)
    st = study if isinstance(study, db.Study) else db.open_study(study)
    shown = name or st.name
    if check:
        db.check_writable(st, shown)
    app = create_app(st, name=shown)
    folder = st.setting("photos_dir")
    index = app.state.photo_files
    if folder and (problem := photo_folder_problem(folder, _study_photo_ids(st), index=index)) is not None:
        from vistkit.errors import warn

        warn(
            f"study {shown}: {problem}; put the photos there (a symlink to their folder will do) and restart the server"
        )
    secure = app.state.security_headers
    config = uvicorn.Config(
        SecureResponses(app, headers=secure),  # outermost too: also Starlette's last-resort 500
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
        server_header=False,  # no "server: uvicorn" on every answer
        http=guarded_protocol(request_timeout, headers=secure),
    )
    server = uvicorn.Server(config)
    hangup = getattr(signal, "SIGHUP", None)
    if (
        hangup is None
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(hangup) is not signal.SIG_DFL  # nohup (ignored) or the caller's own handler: kept
    ):
        server.run()
        return

    def hung_up(sig: int, frame: Any) -> None:  # a closed terminal: stop as for SIGTERM (checkpoint, close)
        signal.signal(sig, signal.SIG_DFL)  # uvicorn raises it again once the study is closed
        server.handle_exit(sig, frame)

    signal.signal(hangup, hung_up)
    try:
        server.run()
    finally:
        if signal.getsignal(hangup) is hung_up:
            signal.signal(hangup, signal.SIG_DFL)
