"""What the web app does with the database: invites, claiming the next task, validating and storing judgements.

Every judgement is stored in one transaction (the judgement row and its assignment's ``submitted_at``) before
the caller is told it was saved. The assignment is the idempotency key: a retried submission with the same answer
is acknowledged again and stored once; a different answer for a submitted task is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, or_, select, update

from vistkit.studio import LIKERT_STATEMENTS, db


class StudioError(Exception):
    """A request the study refuses: an HTTP status and one sentence for the person who sent it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Annotator:
    """A study annotator: id, name, and quota (None: no limit)."""

    id: int
    name: str
    quota: int | None


@dataclass
class Task:
    """One claimed assignment, ready to show."""

    assignment_id: int
    unit_id: int
    item_key: str
    photo_ids: list[str]
    stories: list[dict[str, Any]]  # display order: {"id", "text", "label"}
    done: int
    total: int


#: the longest ``--prefix`` of annotator names (the name column holds 128 characters with the number)
MAX_PREFIX = 64


def check_prefix(prefix: str) -> str:
    """The annotator-name prefix, NFC-normalised, or `InputError`: a name lands in every report, export and
    CSV, so it is 1 to `MAX_PREFIX` visible characters without control, format (right-to-left override,
    zero-width), surrogate or line-breaking characters and without spaces at either end."""
    fix = "use letters, digits and punctuation, e.g. --prefix pilot"
    text = _visible_text(prefix, option="--prefix", limit=MAX_PREFIX, fix=fix)
    if "," in text:
        from vistkit.errors import InputError

        raise InputError(
            f"--prefix {text!r} holds a comma, which `studio invite --withdraw` reads as the end of a name; "
            "use another character, e.g. --prefix pilot-2"
        )
    return text


def withdraw_names(st: db.Study, given: str) -> list[str]:
    """The annotator names of a ``--withdraw`` list: comma-separated, except that the whole text is taken as one
    name when it is one annotator's name (a name with a comma, made before `check_prefix` refused commas)."""
    whole = given.strip()
    if "," in whole:
        with st.read() as conn:
            if conn.execute(select(db.annotators.c.id).where(db.annotators.c.name == whole)).first() is not None:
                return [whole]
    return [x.strip() for x in given.split(",") if x.strip()]


def check_title(title: str) -> str:
    """The study's title (shown on every page and in reports), as `check_prefix` checks a prefix, up to
    `MAX_TITLE` characters; "" is no title."""
    if title == "":
        return title
    return _visible_text(title, option="--title", limit=MAX_TITLE, fix='e.g. --title "Story ranking, pilot 2"')


MAX_TITLE = 200


def _visible_text(given: str, *, option: str, limit: int, fix: str) -> str:
    import unicodedata

    from vistkit.errors import InputError

    text = unicodedata.normalize("NFC", given) if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in given) else given
    if not text.strip():
        raise InputError(f"{option} is empty; {fix}")
    if len(text) > limit:
        raise InputError(f"{option} is {len(text):,} characters long, more than {limit}; {fix}")
    bad = next((ch for ch in text if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), None)
    if bad is not None:
        raise InputError(f"{option} holds the invisible or control character U+{ord(bad):04X}; {fix}")
    if text != text.strip():
        raise InputError(f"{option} {text!r} starts or ends with a space; {fix}")
    return text


#: the setting listing annotators made by an `invite` run whose links have not (yet) been written out: the CLI
#: stores them with the annotators and clears them once the links are out, so a run killed in between (kill -9, a
#: power cut, a failed clean-up) leaves them named here (`unsent_invites`) for `withdraw_annotators`
UNSENT = "unsent_invites"


def invite(
    st: db.Study, *, n: int, prefix: str = "annotator", quota: int | None = None, unsent: bool = False
) -> list[tuple[str, str]]:
    """Create ``n`` annotators; returns ``(name, token)`` pairs (the tokens are shown once, stored hashed).
    ``prefix`` is checked first (`check_prefix`). With ``unsent`` they are also listed as unsent (`UNSENT`) in
    the same transaction, until `confirm_invites` says their links were written."""
    from vistkit.errors import InputError
    from vistkit.studio import MAX_INVITES, MAX_SLOTS

    if not 0 <= n <= MAX_INVITES:
        raise InputError(f"--n must be from 1 to {MAX_INVITES:,}, not {n:,}")
    if quota is not None and not 1 <= quota <= MAX_SLOTS:  # above a study's largest plan it is no limit at all
        raise InputError(f"--quota must be from 1 to {MAX_SLOTS:,} tasks, not {quota:,}")
    prefix = check_prefix(prefix)
    out: list[tuple[str, str]] = []
    with st.write() as conn:
        _lock_study(conn)  # two invites at once would count the same annotators and give out the same names
        existing = conn.execute(select(func.count()).select_from(db.annotators)).scalar_one()
        taken = set(conn.execute(select(db.annotators.c.name)).scalars())
        number = existing
        for _ in range(n):
            number += 1
            while f"{prefix}-{number:03d}" in taken:  # skip a name still taken (one withdrawn before it)
                number += 1
            token = db.new_token()
            name = f"{prefix}-{number:03d}"
            conn.execute(
                insert(db.annotators).values(
                    name=name, token_hash=db.token_hash(token), created_at=db.now(), quota=quota
                )
            )
            out.append((name, token))
        if unsent and out:
            _put_unsent(conn, st, _read_unsent(conn, st) + [name for name, _ in out])
    st._settings = None
    return out


def _read_unsent(conn: Connection, st: db.Study) -> list[str]:
    row = conn.execute(select(db.settings.c.value).where(db.settings.c.key == UNSENT)).first()
    try:
        value = [] if row is None else json.loads(row[0])
    except (TypeError, ValueError, RecursionError):
        value = None
    # only a hint (which links were never written): one changed by hand is read as naming nobody, not refused
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _put_unsent(conn: Connection, st: db.Study, names: list[str]) -> None:
    from sqlalchemy import delete

    if names:
        db.put_settings(conn, {UNSENT: names})
    else:
        conn.execute(delete(db.settings).where(db.settings.c.key == UNSENT))


def confirm_invites(st: db.Study, names: list[str]) -> list[str]:
    """The links of annotators ``names`` (made by `invite` with ``unsent``) have been written: no longer unsent.
    Returns those of ``names`` that are no longer annotators (withdrawn meanwhile: their links do not work)."""
    if not names:
        return []
    done = set(names)
    with st.write() as conn:
        _lock_study(conn)
        _put_unsent(conn, st, [n for n in _read_unsent(conn, st) if n not in done])
        present = set(conn.execute(select(db.annotators.c.name).where(db.annotators.c.name.in_(names))).scalars())
    st._settings = None
    return [n for n in names if n not in present]


def unsent_invites(st: db.Study) -> list[str]:
    """The annotators whose links an `invite` run stored but did not write out (killed, or its clean-up failed):
    nobody has those links. A run still printing its links lists its own annotators for that moment."""
    with st.read() as conn:
        listed = _read_unsent(conn, st)
        names = set(conn.execute(select(db.annotators.c.name)).scalars())
    return [n for n in listed if n in names]


def withdraw_invites(st: db.Study, names: list[str]) -> int:
    """Remove the annotators ``names`` made by `invite` whose links could not be handed out (the output failed):
    only their token hashes were stored, so nobody can use them. One that has claimed a task is kept. Returns how
    many were removed."""
    from sqlalchemy import delete

    an, a = db.annotators, db.assignments
    if not names:
        return 0
    with st.write() as conn:
        _lock_study(conn)
        used = select(a.c.annotator_id).where(a.c.annotator_id.is_not(None))
        res = conn.execute(delete(an).where(an.c.name.in_(names), an.c.id.not_in(used)))
        gone = set(names)
        _put_unsent(conn, st, [n for n in _read_unsent(conn, st) if n not in gone])
    st._settings = None
    return int(res.rowcount)


#: seconds after which an unsent annotator is taken for one whose `invite` run stopped (not one still printing)
UNSENT_SETTLE_S = 60.0


def withdraw_annotators(
    st: db.Study, names: list[str], *, settle_s: float | None = None
) -> tuple[list[str], list[str]]:
    """Remove the annotators ``names`` (``["unsent"]``: those of `unsent_invites` made more than ``settle_s``
    seconds ago, default `UNSENT_SETTLE_S`: a younger one may belong to an `invite` run still writing its
    links), whose links then stop working; returns the names removed and the unsent ones kept as too young. A
    name that is no annotator, or one that has claimed or judged a task (their judgements are part of the
    study), is an `InputError` and nothing is removed."""
    from sqlalchemy import delete

    from vistkit.errors import InputError

    an, a, j = db.annotators, db.assignments, db.judgements
    young: list[str] = []
    with st.write() as conn:
        _lock_study(conn)
        listed = _read_unsent(conn, st)
        known = dict(conn.execute(select(an.c.name, an.c.id)).all())
        if names == ["unsent"]:
            made = dict(conn.execute(select(an.c.name, an.c.created_at).where(an.c.name.in_(listed))).all())
            recent = db.now() - (UNSENT_SETTLE_S if settle_s is None else settle_s)
            young = [n for n in listed if n in made and made[n] > recent]
            wanted = [n for n in listed if n in made and n not in young]
        else:
            wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in known]
        if unknown:
            what = "is not an annotator" if len(unknown) == 1 else "are not annotators"
            raise InputError(
                f"--withdraw: {', '.join(unknown[:5])} {what} "
                f"of {st.name}, nothing was withdrawn; `vistkit studio status` lists the annotators (or give "
                "--withdraw unsent)"
            )
        ids = [known[n] for n in wanted]
        if ids:  # their rows locked as `claim_next` locks them: a claim in flight is seen below (not on SQLite)
            conn.execute(update(an).where(an.c.id.in_(ids)).values(quota=an.c.quota))
        used_ids = set(conn.execute(select(a.c.annotator_id).where(a.c.annotator_id.in_(ids))).scalars())
        used_ids |= set(conn.execute(select(j.c.annotator_id).where(j.c.annotator_id.in_(ids))).scalars())
        used = [n for n in wanted if known[n] in used_ids]
        if used:
            raise InputError(
                f"--withdraw: {', '.join(used[:5])} {'has' if len(used) == 1 else 'have'} claimed or judged tasks, "
                "so their link was handed out and their work is part of the study; nothing was withdrawn"
            )
        if ids:
            conn.execute(delete(an).where(an.c.id.in_(ids)))
        gone = set(wanted)
        _put_unsent(conn, st, [n for n in listed if n not in gone])
    st._settings = None
    return wanted, young


def new_admin_token(st: db.Study) -> str:
    """Replace the admin token (the old link stops working); returns the new one."""
    token = db.new_token()
    set_admin_token(st, token)
    return token


def set_admin_token(st: db.Study, token: str) -> None:
    """Make ``token`` the admin token (the old link stops working): `studio invite --admin` calls it only once
    the new link has been written, so a failure in between leaves the old one working."""
    with st.write() as conn:
        db.put_settings(conn, {"admin_token_hash": db.token_hash(token)})
    st._settings = None


def photo_link(template: str, photo_id: str) -> str:
    """A photo's URL from the study's ``--photo-url`` template: ``{id}`` replaced, nothing else read (a template
    holding ``{0}`` or ``{id.x}`` is refused by `check_photo_url` when the study is made)."""
    return template.replace("{{", "\0").replace("}}", "\1").replace("{id}", photo_id).replace(
        "\0", "{"
    ).replace("\1", "}")


def check_photo_url(template: str) -> None:
    """Refuse a ``--photo-url`` template that is not a URL with ``{id}`` as its only field (``{0}``, ``{name}``
    or an unmatched brace would make every task page fail), or whose address a browser would not load into a
    study page: anything but ``https://``, ``http://``, ``//host/...`` or ``/path`` (``file:``, ``javascript:``,
    ``data:``, a relative ``photos/{id}.jpg``)."""
    import string

    from vistkit.errors import InputError

    example = "e.g. https://example.org/photos/{id}.jpg"
    try:
        parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:  # a single { or }
        raise InputError(
            f"--photo-url {template!r}: {exc}; write {{{{ or }}}} for a literal brace, {example}"
        ) from None
    for field, spec, conv in parts:
        if field != "id" or spec or conv:
            shown = "{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise InputError(
                f"--photo-url {template!r}: {shown} is not a field vistkit fills; only {{id}} is, {example}"
            )
    if not parts:
        raise InputError(f"--photo-url must contain {{id}}, {example}")
    if not template.strip().lower().startswith(("https://", "http://", "/")):  # file:, javascript:, data:, a typo
        raise InputError(
            f"--photo-url {template!r} is not an http(s) address or a path on the study's server, so browsers "
            f"would not show the photos; {example} (photos on this machine: --photos FOLDER)"
        )


def authenticate(conn: Connection, token: str) -> Annotator | None:
    """The annotator whose invite token this is (looked up by hash, compared in constant time), else None."""
    if not token or len(token) > 200:
        return None
    h = db.token_hash(token)
    row = conn.execute(
        select(db.annotators.c.id, db.annotators.c.name, db.annotators.c.quota, db.annotators.c.token_hash).where(
            db.annotators.c.token_hash == h
        )
    ).first()
    if row is None or not db.tokens_equal(row.token_hash, h):
        return None
    return Annotator(row.id, row.name, row.quota)


def is_admin(st: db.Study, token: str) -> bool:
    """Whether ``token`` is the admin token (constant-time comparison of hashes; annotator tokens never are).

    The stored hash is read each time, so `vistkit studio invite --admin` takes effect on a running server."""
    if not token or len(token) > 200:
        return False
    with st.read() as conn:
        row = conn.execute(select(db.settings.c.value).where(db.settings.c.key == "admin_token_hash")).first()
    stored = db.loads(row[0], st.name, "its setting 'admin_token_hash'") if row else ""
    return db.tokens_equal(db.token_hash(token), str(stored))


def _counts(conn: Connection, annotator: Annotator) -> tuple[int, int]:
    done = conn.execute(
        select(func.count()).select_from(db.judgements).where(db.judgements.c.annotator_id == annotator.id)
    ).scalar_one()
    n_units = conn.execute(select(func.count()).select_from(db.units)).scalar_one()
    total = n_units if annotator.quota is None else min(annotator.quota, n_units)
    return int(done), int(total)


def _open_claim(conn: Connection, annotator: Annotator) -> int | None:
    row = conn.execute(
        select(db.assignments.c.id)
        .where(db.assignments.c.annotator_id == annotator.id, db.assignments.c.submitted_at.is_(None))
        .order_by(db.assignments.c.claimed_at, db.assignments.c.id)
        .limit(1)
    ).first()
    return None if row is None else int(row.id)


def _lock_study(conn: Connection) -> None:
    """Serialise this transaction with every other writer of the study, across processes: a write that changes
    nothing to the study's id setting (SQLite: takes the database's write lock; PostgreSQL and others: that row's
    lock, which every caller of this function takes)."""
    s = db.settings
    conn.execute(update(s).where(s.c.key == "study_id").values(value=s.c.value))


#: what a link withdrawn by `studio invite --withdraw` is told (also one withdrawn while its page was loading)
WITHDRAWN = "this invite link was withdrawn by the study's organiser; ask them for a new one"


def _lock_annotator(conn: Connection, annotator: Annotator) -> None:
    """Serialise this annotator's claims across threads and processes for the rest of the transaction: a write
    that changes nothing (SQLite: takes the database's write lock before anything is read; PostgreSQL and others:
    locks the annotator's row), so what the transaction reads next is not changed under it by another claim.

    An annotator no longer there (withdrawn by `studio invite --withdraw` after the request looked them up) is
    `StudioError` 404: a claim written for them would fail on the database's foreign key (a 500)."""
    an = db.annotators
    if conn.execute(update(an).where(an.c.id == annotator.id).values(quota=an.c.quota)).rowcount == 0:
        raise StudioError(404, WITHDRAWN)


def claim_next(st: db.Study, annotator: Annotator) -> int | None:
    """The annotator's open assignment, or a newly claimed one (never a unit they already have), or None.

    An annotator holds at most one open claim, and claims no more tasks than their quota: both are checked in the
    same write transaction that makes the claim, so parallel page loads (one link opened in many tabs, or several
    server processes) cannot claim more. Claims left unsubmitted for longer than the study's ``claim_timeout`` are
    given to someone else once no unclaimed slot is left.
    """
    with st.read() as conn:  # the common case, without the write lock: the task already claimed
        current = _open_claim(conn, annotator)
        done, total = _counts(conn, annotator)
    if current is not None and done < total:
        return current
    if current is None and done >= total:
        return None
    a = db.assignments
    stale = db.now() - float(st.setting("claim_timeout", 3600.0))
    with st.write(durable=False) as conn:
        _lock_annotator(conn, annotator)
        current = _open_claim(conn, annotator)
        done, total = _counts(conn, annotator)
        if done >= total:
            if current is not None:  # claims beyond the quota (left by an older vistkit): free them for others
                conn.execute(
                    update(a)
                    .where(a.c.annotator_id == annotator.id, a.c.submitted_at.is_(None))
                    .values(annotator_id=None, claimed_at=None)
                )
            return None
        if current is not None:
            return current
        mine = select(a.c.unit_id).where(a.c.annotator_id == annotator.id).scalar_subquery()
        # and never a unit they judged on a slot that is no longer theirs (a study written by an older vistkit)
        judged = select(db.judgements.c.unit_id).where(db.judgements.c.annotator_id == annotator.id)
        for _ in range(8):  # another annotator may take the same slot between the two statements (not on SQLite)
            cand = conn.execute(
                select(a.c.id)
                .where(
                    a.c.submitted_at.is_(None),
                    or_(a.c.annotator_id.is_(None), a.c.claimed_at < stale),
                    a.c.unit_id.not_in(mine),
                    a.c.unit_id.not_in(judged.scalar_subquery()),
                )
                # free slots first: a claim past the timeout is given to someone else only when none is left, so
                # an annotator back from a break keeps their open task (and their answer) while others remain
                .order_by(a.c.annotator_id.is_not(None), a.c.slot, a.c.rnd)
                .limit(1)
            ).first()
            if cand is None:
                return None
            res = conn.execute(
                update(a)
                .where(
                    a.c.id == cand.id,
                    a.c.submitted_at.is_(None),
                    or_(a.c.annotator_id.is_(None), a.c.claimed_at < stale),
                )
                .values(annotator_id=annotator.id, claimed_at=db.now())
            )
            if res.rowcount == 1:
                return int(cand.id)
    return None


def load_task(st: db.Study, annotator: Annotator, assignment_id: int) -> Task:
    """Assignment ``assignment_id`` ready to show, with the annotator's progress; `StudioError` 404 when there is
    no such assignment."""
    with st.read() as conn:
        row = conn.execute(
            select(a := db.assignments, db.items.c.key, db.items.c.photo_ids)
            .join(db.units, db.units.c.id == a.c.unit_id)
            .join(db.items, db.items.c.id == db.units.c.item_id)
            .where(a.c.id == assignment_id)
        ).first()
        if row is None:
            raise StudioError(404, "no such task")
        order = _story_order(st, row)
        texts = dict(conn.execute(select(db.stories.c.id, db.stories.c.text).where(db.stories.c.id.in_(order))).all())
        done, total = _counts(conn, annotator)
    photo_ids = db.loads(row.photo_ids, st.name, f"item {row.key!r}: its photo ids")
    if not isinstance(photo_ids, list) or any(sid not in texts for sid in order):
        raise db.damaged(st.name, f"assignment {assignment_id}: its item or stories are not what vistkit stores")
    return Task(
        assignment_id=assignment_id,
        unit_id=row.unit_id,
        item_key=row.key,
        photo_ids=[str(p) for p in photo_ids],
        stories=[{"id": sid, "text": texts[sid], "label": story_label(i)} for i, sid in enumerate(order)],
        done=done,
        total=max(total, done + 1),
    )


def story_label(position: int) -> str:
    """The label of the story shown at 0-based ``position``: A..Z, then AA, AB, ... (as spreadsheet columns), so
    no two stories of a task share one."""
    label = ""
    n = position + 1
    while n:
        n, rest = divmod(n - 1, 26)
        label = chr(ord("A") + rest) + label
    return label


def _story_order(st: db.Study, row: Any) -> list[int]:
    """An assignment's story order (display order of story ids); one that is not a list of ids is `db.damaged`."""
    order = db.loads(row.story_order, st.name, f"assignment {row.id}: its story order")
    if not isinstance(order, list) or not order or not all(isinstance(s, int) for s in order):
        raise db.damaged(st.name, f"assignment {row.id}: its story order {row.story_order!r} is not a list of ids")
    return order


def progress(st: db.Study, annotator: Annotator) -> tuple[int, int]:
    """The annotator's judgements so far and the number they may make (their quota or the number of units)."""
    with st.read() as conn:
        return _counts(conn, annotator)


# --------------------------------------------------------------------------------------------------- answers
def parse_answer(task: str, form: dict[str, str], order: list[int], aspects: list[str], allow_same: bool) -> dict:
    """The canonical answer from a submitted form, or `StudioError` 422 saying what is wrong.

    rank: ``ranking`` = display positions (1-based) best first, a permutation (no ties);
    pairwise: ``choice`` = A, B or same; likert: one field 1..5 per aspect.
    """
    if task == "rank":
        raw = form.get("ranking", "")
        if not raw.strip():  # the page's script fills it in: a form sent without it ranked nothing
            raise StudioError(
                422,
                "no ranking was sent (the story positions best first, e.g. 2,1,3, which the page's script fills in: "
                "it did not run): reload the page with JavaScript on",
            )
        try:
            positions = [int(x) for x in raw.split(",")]
        except ValueError:
            raise StudioError(422, "ranking must list the story positions best first, e.g. 2,1,3") from None
        if sorted(positions) != list(range(1, len(order) + 1)):
            raise StudioError(422, f"ranking must order all {len(order)} stories exactly once (no ties, no gaps)")
        return {"ranks": {str(order[p - 1]): r for r, p in enumerate(positions, start=1)}}
    if task == "pairwise":
        choice = form.get("choice", "")
        allowed = ("A", "B", "same") if allow_same else ("A", "B")
        if choice not in allowed:
            raise StudioError(422, f"choice must be {' or '.join(allowed)}")
        preferred = None if choice == "same" else order[0 if choice == "A" else 1]
        return {"choice": choice, "preferred": preferred}
    ratings: dict[str, int] = {}
    for aspect in aspects:
        v = form.get(aspect, "")
        if v not in ("1", "2", "3", "4", "5"):
            raise StudioError(422, f"rate the statement {LIKERT_STATEMENTS[aspect]!r} from 1 to 5")
        ratings[aspect] = int(v)
    return {"ratings": ratings}


def gold_result(task: str, answer: dict, roles: dict[int, str]) -> bool | None:
    """Whether a gold unit was passed (None for a normal unit)."""
    if not any(roles.values()):
        return None
    orig = next((s for s, r in roles.items() if r == "original"), None)
    bad = next((s for s, r in roles.items() if r == "shuffled"), None)
    if task == "rank":
        return bool(answer["ranks"][str(orig)] < answer["ranks"][str(bad)])
    if task == "pairwise":
        return bool(answer["preferred"] == orig)
    return bool(answer["ratings"].get("coherent", 5) <= 3)


def submit(st: db.Study, annotator: Annotator, form: dict[str, str]) -> dict[str, Any]:
    """Validate and store one judgement (one transaction). Returns ``{"saved": True, "duplicate": bool}``.

    Two processes storing the same assignment at once (several server workers) meet the database's unique
    constraint; the loser reads the winner's row and answers as for a resent submission."""
    from sqlalchemy.exc import IntegrityError

    try:
        return _submit(st, annotator, form)
    except IntegrityError:
        return _submit(st, annotator, form)


def stored_answer(st: db.Study, annotator: Annotator, form: dict[str, str]) -> dict[str, Any]:
    """Whether the answer of a submission form (as `submit` takes it) is stored, storing nothing:
    ``{"stored": "same"}`` (this very answer), ``"other"`` (the task holds another answer: another tab's) or
    ``"none"``. A page whose submission lost its connection asks this before saying "Not saved": the server may
    have stored the answer before the connection broke. `StudioError` as `submit` for a form that is not this
    annotator's or not an answer."""
    try:
        assignment_id = int(form.get("assignment", ""))
    except ValueError:
        raise StudioError(422, "the form has no task number; reload the page") from None
    expected = db.csrf_token(st.secret(), annotator.id, assignment_id)
    if not db.tokens_equal(form.get("csrf", ""), expected):
        raise StudioError(403, "the form's security token is missing or wrong; reload the page and try again")
    a = db.assignments
    with st.read() as conn:
        row = conn.execute(select(a).where(a.c.id == assignment_id)).first()
        if row is None or row.annotator_id != annotator.id:
            raise StudioError(409, "this task is not (or no longer) assigned to you; reload the page")
        prior = conn.execute(
            select(db.judgements.c.answer).where(db.judgements.c.assignment_id == assignment_id)
        ).first()
    if prior is None:
        return {"stored": "none"}
    order = _story_order(st, row)
    answer = parse_answer(
        st.setting("task"), form, order, list(st.setting("aspects", [])), bool(st.setting("allow_same", True))
    )
    return {"stored": "same" if prior.answer == json.dumps(answer, sort_keys=True) else "other"}


def _submit(st: db.Study, annotator: Annotator, form: dict[str, str]) -> dict[str, Any]:
    try:
        assignment_id = int(form.get("assignment", ""))
    except ValueError:
        raise StudioError(422, "the form has no task number; reload the page") from None
    task, aspects = st.setting("task"), list(st.setting("aspects", []))
    allow_same = bool(st.setting("allow_same", True))
    expected = db.csrf_token(st.secret(), annotator.id, assignment_id)
    if not db.tokens_equal(form.get("csrf", ""), expected):
        raise StudioError(403, "the form's security token is missing or wrong; reload the page and try again")
    a = db.assignments
    not_yours = StudioError(409, "this task is not (or no longer) assigned to you; reload the page")
    with st.write() as conn:
        # the write lock before the assignment is read: another server process may give a stale claim to someone
        # else between a plain read and this transaction's writes (Python's sqlite3 begins a transaction only at
        # the first write; on other databases the row lock below does it)
        _lock_annotator(conn, annotator)
        row = conn.execute(select(a).where(a.c.id == assignment_id).with_for_update()).first()
        if row is None or row.annotator_id != annotator.id:
            raise not_yours
        order = _story_order(st, row)
        answer = parse_answer(task, form, order, aspects, allow_same)
        canonical = json.dumps(answer, sort_keys=True)
        prior = conn.execute(
            select(db.judgements.c.answer).where(db.judgements.c.assignment_id == assignment_id)
        ).first()
        if prior is not None:
            if prior.answer == canonical:
                return {"saved": True, "duplicate": True}
            raise StudioError(409, "this task was already submitted with another answer")
        if annotator.quota is not None:  # two tabs submitting at once cannot both pass (the lock above)
            done, total = _counts(conn, annotator)
            if done >= total:
                raise StudioError(
                    409, f"this invite link has done all {total} of its tasks; this answer was not stored"
                )
        roles = dict(
            conn.execute(select(db.stories.c.id, db.stories.c.gold_role).where(db.stories.c.id.in_(order))).all()
        )
        t = db.now()
        conn.execute(
            insert(db.judgements).values(
                assignment_id=assignment_id,
                annotator_id=annotator.id,
                unit_id=row.unit_id,
                answer=canonical,
                gold_passed=gold_result(task, answer, roles),
                seconds=None if row.claimed_at is None else t - row.claimed_at,
                created_at=t,
            )
        )
        done_now = conn.execute(
            update(a)
            .where(a.c.id == assignment_id, a.c.annotator_id == annotator.id, a.c.submitted_at.is_(None))
            .values(submitted_at=t)
        )
        if done_now.rowcount != 1:  # the assignment changed hands after all: nothing of this answer is kept
            raise not_yours
    return {"saved": True, "duplicate": False}
