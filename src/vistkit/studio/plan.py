"""Building a study: items from story files, gold items, units and the assignment plan.

An *item* is one photo sequence (or story key) and its stories, one per system. A *unit* is what one annotator
judges at once: the item's N stories (rank), one pair of them (pairwise) or one story (Likert). Each unit gets
``per_item`` assignment slots (k annotators, 5 as in VHED), each with its own random story order, recorded so
position bias can be measured. Gold items replace a machine story by the human story with its sentences shuffled:
a careful annotator prefers the original (rank, pairwise) or does not agree the shuffled story is coherent (Likert).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import secrets
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vistkit.data.story import Keying, StorySet
from vistkit.errors import InputError, VistkitError, warn
from vistkit.studio import LIKERT_STATEMENTS, MAX_CLAIM_TIMEOUT_S, MAX_PER_ITEM, MAX_SLOTS, TASKS


@dataclass
class PlanStory:
    """One story of a planned item: its system, story id, text and gold role ("", original or shuffled)."""

    system: str
    story_id: str
    text: str
    gold_role: str = ""  # "", "original" or "shuffled"


@dataclass
class PlanItem:
    """One planned item: its key, photo ids and stories, and whether it is a gold item."""

    key: str
    photo_ids: tuple[str, ...] = ()
    stories: list[PlanStory] = field(default_factory=list)
    is_gold: bool = False
    photo_source: str = ""  # the system whose story gave the photo ids (for messages)


#: a photo id that survives the exports: they join an item's ids with "-" (the challenge's img_seq), and
#: `vistkit.meta.human.parse_img_seq` reads back the runs of ASCII letters and digits
PHOTO_ID = re.compile(r"[A-Za-z0-9]+")


def check_items(items: Sequence[PlanItem]) -> None:
    """Refuse, with one sentence naming the system and the item, a blank story or a photo id that the exports
    would not give back (see `PHOTO_ID`)."""
    for it in items:
        for s in it.stories:
            if not s.text.strip():
                raise InputError(
                    f"--stories {s.system}: the story of item {it.key!r} is empty; fill it in or leave the item out"
                )
        for pid in it.photo_ids:
            if not PHOTO_ID.fullmatch(pid):
                source = f"--stories {it.photo_source}: " if it.photo_source else ""
                read_back = "-".join(PHOTO_ID.findall(pid)) or "nothing"
                raise InputError(
                    f"{source}item {it.key!r} has the photo id {pid!r}, which the exports' img_seq (ids joined by "
                    f"'-') would give back as {read_back!r}; photo ids may hold only ASCII letters and digits"
                )


def items_from_story_sets(
    sets: Mapping[str, StorySet],
    *,
    key: Keying | str = Keying.STORY,
    max_items: int | None = None,
    one_per_sequence: bool = False,
) -> list[PlanItem]:
    """One item per key that every system has (in the first system's order); stories of other keys are dropped.

    ``one_per_sequence``: keep only the first key of each photo sequence (VIST has several human stories per
    sequence, while most machines wrote one story per sequence, copied under each story id: without it, those
    machine stories come back word for word in several items). Applied before ``max_items``. A system whose story
    repeats word for word across items is a warning that says so.

    Raises `InputError` when no key is shared by all systems or a system has two stories for one key.
    """
    keying = Keying.parse(key)
    if not sets:
        raise InputError("give at least one --stories NAME=FILE")
    by_system: dict[str, dict[str, Any]] = {}
    for name, ss in sets.items():
        keyed: dict[str, Any] = {}
        for story in ss:
            k = story.key(keying)
            if k in keyed:
                raise InputError(
                    f"--stories {name}: two stories share the {keying.value} key {k!r}; choose another --key"
                )
            keyed[k] = story
        by_system[name] = keyed
    first = next(iter(by_system.values()))
    shared = [k for k in first if all(k in s for s in by_system.values())]
    if not shared:
        raise InputError(f"no {keying.value} key is shared by every system ({', '.join(sets)}); check --key")
    _warn_left_out(by_system, set(shared), keying.value)
    if one_per_sequence:
        shared = _first_per_sequence(shared, by_system)
    if max_items is not None:
        if max_items < 1:
            raise InputError(f"--max-items must be at least 1, not {max_items}")
        shared = shared[:max_items]
    out = []
    for k in shared:
        photos: tuple[str, ...] = ()
        source = ""
        row = []
        for name, keyed in by_system.items():
            s = keyed[k]
            if not photos and s.photo_ids:
                photos, source = tuple(s.photo_ids), name
            row.append(PlanStory(system=name, story_id=s.story_id, text=s.text))
        out.append(PlanItem(key=k, photo_ids=photos, stories=row, photo_source=source))
    return out


def _first_per_sequence(keys: list[str], by_system: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``keys`` less every key whose photo sequence an earlier key has (the sequence from the first system whose
    story has photo ids); `InputError` when no system gives a key's photos."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for k in keys:
        photos = next((tuple(keyed[k].photo_ids) for keyed in by_system.values() if keyed[k].photo_ids), None)
        if photos is None:
            raise InputError(
                f"--one-per-sequence needs the photo sequence of each item, and no --stories file gives the photos "
                f"of {k!r}; read at least one system from a format that carries photo ids (VIST SIS, PR-VIST, "
                "the challenge format)"
            )
        if photos not in seen:
            seen.add(photos)
            kept.append(k)
    return kept


def warn_repeated_stories(items: Sequence[PlanItem]) -> None:
    """One warning naming the systems whose story text is the same in two or more items (annotators would judge
    one story again and again, and each copy would count as another judgement of the system)."""
    from vistkit.errors import warn

    texts: dict[str, list[str]] = {}
    for it in items:
        for st in it.stories:
            texts.setdefault(st.system, []).append(" ".join(st.text.split()))
    repeated = {name: len(t) - len(set(t)) for name, t in texts.items() if len(set(t)) < len(t)}
    if not repeated:
        return
    parts = [f"{n:,} of {name}'s {len(texts[name]):,} stories" for name, n in repeated.items()]
    warn(
        f"{' and '.join(parts)} repeat another item's story word for word (one story per photo sequence, copied "
        "under each story id?): annotators would judge the same story again; --one-per-sequence keeps one item per "
        "photo sequence"
    )


def _warn_left_out(by_system: Mapping[str, Mapping[str, Any]], shared: set[str], what: str) -> None:
    """One warning naming, per system, how many stories were left out because not every system has their key,
    and the keys that would match once Unicode-normalised (NFC): the ids are never changed, only reported."""
    import unicodedata

    from vistkit.errors import warn

    left = {name: [k for k in keyed if k not in shared] for name, keyed in by_system.items()}
    left = {name: keys for name, keys in left.items() if keys}
    if not left:
        return
    parts = [f"{len(keys):,} of {name}" for name, keys in left.items()]
    n_first = len(next(iter(left.values())))
    parts[0] = parts[0].replace(" of ", f" {'story' if n_first == 1 else 'stories'} of ", 1)
    counts = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    first_name, first_keys = next(iter(left.items()))
    message = (
        f"{counts} {'was' if sum(map(len, left.values())) == 1 else 'were'} left out because not every system has "
        f"their {what} key (first: {first_keys[0]!a} of {first_name}); the study's items are drawn from the "
        f"{len(shared):,} keys all systems share"
    )
    nfc: dict[str, list[tuple[str, str]]] = {}
    for name, keys in left.items():
        for k in keys:
            nfc.setdefault(unicodedata.normalize("NFC", k), []).append((name, k))
    # keys of two systems written differently that normalise alike (a key spelled alike in two systems and
    # missing from a third is no spelling problem)
    close = [found for found in nfc.values() if len({name for name, _ in found}) > 1 and len({k for _, k in found}) > 1]
    if close:
        (a_sys, a_key), (b_sys, b_key) = close[0][:2]
        message += (
            f"; {len(close)} of those keys match across systems once Unicode-normalised (NFC), e.g. "
            f"{a_key!a} of {a_sys} and {b_key!a} of {b_sys}: write them the same way in every file"
        )
    warn(message)


def shuffle_sentences(text: str, rng: random.Random) -> str | None:
    """``text`` with its sentences in another order (``None`` when it has fewer than two distinct sentences)."""
    from vistkit.text.sentences import sent_tokenize

    sents = [s for s in sent_tokenize(text) if s.strip()]
    if len(set(sents)) < 2:
        return None
    for _ in range(20):
        order = sents[:]
        rng.shuffle(order)
        if order != sents:
            return " ".join(order)
    return " ".join(reversed(sents))


#: the system name of a gold item's shuffled story (a study's own systems may not use it when it has gold items)
GOLD_SYSTEM = "gold-shuffled"


def gold_items(
    items: Sequence[PlanItem], *, n: int, reference_system: str, task: str, rng: random.Random
) -> list[PlanItem]:
    """``n`` attention-check items built from items that have a ``reference_system`` story."""
    if n <= 0:
        return []
    out: list[PlanItem] = []
    candidates = [it for it in items if any(s.system == reference_system for s in it.stories)]
    rng.shuffle(candidates)
    for it in candidates:
        ref = next(s for s in it.stories if s.system == reference_system)
        shuffled = shuffle_sentences(ref.text, rng)
        if shuffled is None:
            continue
        original = PlanStory(reference_system, ref.story_id, ref.text, gold_role="original")
        bad = PlanStory(GOLD_SYSTEM, ref.story_id, shuffled, gold_role="shuffled")
        if task == "rank":
            others = [s for s in it.stories if s.system != reference_system][1:]
            stories = [original, bad, *[PlanStory(s.system, s.story_id, s.text) for s in others]]
        elif task == "pairwise":
            stories = [original, bad]
        else:
            stories = [bad]
        out.append(PlanItem(key=f"gold:{it.key}", photo_ids=it.photo_ids, stories=stories, is_gold=True))
        if len(out) == n:
            break
    if len(out) < n:
        raise InputError(
            f"--gold {n}: only {len(out)} items have a {reference_system!r} story of two or more sentences; "
            "ask for fewer gold items or name the human system with --reference-system"
        )
    return out


def _units(task: str, story_ids: list[int]) -> list[list[int]]:
    if task == "rank":
        return [story_ids]
    if task == "pairwise":
        return [list(p) for p in itertools.combinations(story_ids, 2)]
    return [[s] for s in story_ids]


def _n_units(task: str, n_stories: int) -> int:
    """How many units `_units` makes of an item with ``n_stories`` stories."""
    if task == "rank":
        return 1
    if task == "pairwise":
        return n_stories * (n_stories - 1) // 2
    return n_stories


def _remove_new_study(file: Path | None) -> None:
    """Remove a SQLite study that `create_study` made and could not finish (and its -wal, -shm, -journal files).
    The side files go first: an interruption meanwhile leaves the study file, which a later init can clean up."""
    if file is None:
        return
    for p in (Path(f"{file}-wal"), Path(f"{file}-shm"), Path(f"{file}-journal"), file):
        with contextlib.suppress(OSError):
            os.unlink(p)


#: the byte of a work file that its init locks while it runs (an open file description lock), far beyond the
#: bytes SQLite locks (around 1 GiB), so the two never meet
_WORK_LOCK_BYTE = 1 << 40
#: a work file younger than this, empty and unlocked, may belong to an init that has created it and not yet locked it
_WORK_GRACE_S = 60.0


def work_locks_supported() -> bool:
    """Whether this system has the locks (Linux open file description locks, 64-bit) that tell the work file of a
    running init from one left by a killed init; elsewhere leftovers are never removed automatically."""
    import fcntl
    import struct

    return hasattr(fcntl, "F_OFD_SETLK") and struct.calcsize("P") == 8


def _lock_work(fd: int) -> bool:
    """Take the lock of a work file through ``fd`` (open for writing), without waiting; False when another init
    holds it (or the system has no such locks)."""
    import fcntl
    import struct

    if not work_locks_supported():
        return False
    flock = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, _WORK_LOCK_BYTE, 1, 0)  # struct flock; l_pid 0
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock)
    except OSError:
        return False
    return True


def remove_leftover_work_files(file: Path) -> list[Path]:
    """Remove the work files (``FILE.init-XXXXXXXX.tmp`` and its -wal, -shm, -journal) that an init of ``file``
    killed with ``kill -9`` left beside it, and return the work files removed. Only a regular file of exactly that
    name whose lock (`_lock_work`) no running init holds is removed; a fresh empty one (an init that has just
    created it) is left for `_WORK_GRACE_S`. Nothing is removed where the system has no such locks."""
    if not work_locks_supported():
        return []
    pattern = re.compile(re.escape(file.name) + r"\.init-[0-9a-f]{8}\.tmp")
    try:
        names = sorted(n for n in os.listdir(file.parent) if pattern.fullmatch(n))
    except OSError:
        return []
    try:
        study = os.stat(file)
    except OSError:
        study = None
    removed = []
    for name in names:
        p = file.parent / name
        try:
            seen = os.lstat(p)
        except OSError:
            continue
        if study is not None and (seen.st_dev, seen.st_ino) == (study.st_dev, study.st_ino):
            # an init killed right after it gave the study its name: a second name of the finished study (never
            # opened here: closing a descriptor of a file SQLite has open in this process would drop its locks)
            with contextlib.suppress(OSError):
                os.unlink(p)
                removed.append(p)
            continue
        if not stat.S_ISREG(seen.st_mode):  # a symlink, a folder, a device: never opened
            continue
        try:
            fd = os.open(p, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # a symlink, a folder, another user's file, gone meanwhile
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _lock_work(fd):
                continue
            with contextlib.suppress(OSError):
                now = os.stat(p)
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):  # another file took the name meanwhile
                    continue
                wal = Path(f"{p}-wal")
                written = st.st_size > 0 or (wal.is_file() and wal.stat().st_size > 0)
                if not written and time.time() - st.st_mtime < _WORK_GRACE_S:
                    continue
                _remove_new_study(p)
                removed.append(p)
        finally:
            os.close(fd)
    return removed


def _work_file(file: Path) -> tuple[Path, int]:
    """A new, empty, owner-only file beside ``file`` (same folder, so it can take ``file``'s name by a link) for
    `create_study` to build the study in, and an open descriptor through which this init holds its lock (close it
    once the work file is gone): a later init or serve tells a running init's work file from a killed one's."""
    from vistkit.studio import db

    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        work = file.with_name(f"{file.name}.init-{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(work, flags, db.PRIVATE)
        except FileExistsError:  # that random name is taken: draw another
            continue
        except OSError as exc:
            raise InputError(f"cannot create study {file}: {exc.strerror or exc}") from None
        _lock_work(fd)
        return work, fd
    raise InputError(f"cannot create a work file beside {file}; remove the {file.name}.init-*.tmp files there")


def _rename_in_error(exc: BaseException, work: Path | None, file: Path | None) -> None:
    """Raise ``exc`` again naming the study the user gave where it names the work file (gone by now) the study
    was being built in ("cannot write study s.db.init-1a2b3c4d.tmp: disk I/O error"); else return."""
    if isinstance(exc, VistkitError) and work is not None and file is not None and str(work) in str(exc):
        raise type(exc)(str(exc).replace(str(work), str(file))) from None


def _release(fd: int | None) -> None:
    """Close the descriptor that holds a work file's lock (`_work_file`)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _publish(work: Path, file: Path) -> None:
    """Give the finished study ``work`` the name ``file``, atomically and only if no file has that name: a hard
    link (exactly one of two inits wins; the other is refused), then the work name is removed. Where the file
    system has no hard links, ``file`` is claimed with an exclusive create and replaced by the study."""
    import errno

    taken = InputError(
        f"{file} exists already (made while this init ran: another `vistkit studio init`?); choose a new file "
        "name (a study is never overwritten)"
    )
    try:
        os.link(work, file)
    except FileExistsError:
        raise taken from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS, errno.EXDEV):
            raise InputError(f"cannot create study {file}: {exc.strerror or exc}") from None
        from vistkit.studio import db

        try:
            db._create_private(file, exist_ok=False)
        except InputError:
            raise taken from None
        os.replace(work, file)
        return
    _remove_new_study(work)


def create_study(
    study_path: str | Path,
    *,
    task: str,
    items: Sequence[PlanItem],
    per_item: int = 5,
    aspects: Sequence[str] = tuple(LIKERT_STATEMENTS),
    photos_dir: str | Path | None = None,
    photo_url: str | None = None,
    gold: int = 0,
    gold_pass: float = 0.8,
    reference_system: str = "human",
    allow_same: bool = True,
    claim_timeout: float = 3600.0,
    seed: int = 0,
    title: str = "",
) -> dict[str, Any]:
    """Create a new study database with its items, units and assignment plan; returns its summary (with the
    admin token, shown once: only its hash is stored). A file already there is refused (a study is never
    overwritten); the refusal says when it holds no finished study (what an interrupted ``init`` leaves)."""
    from sqlalchemy import insert

    from vistkit.studio import db

    if task not in TASKS:
        raise InputError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    from vistkit.studio.service import check_title

    title = check_title(title)
    if not 1 <= per_item <= MAX_PER_ITEM:
        raise InputError(f"--per-item must be from 1 to {MAX_PER_ITEM:,} annotators per unit, not {per_item:,}")
    if gold < 0:
        raise InputError(f"--gold must be 0 or more (attention-check items), not {gold}")
    if not 0 < claim_timeout <= MAX_CLAIM_TIMEOUT_S:
        raise InputError(
            f"--claim-timeout must be a number of seconds above 0 and at most {MAX_CLAIM_TIMEOUT_S:,.0f} (a year), "
            f"not {claim_timeout}"
        )
    bad = [a for a in aspects if a not in LIKERT_STATEMENTS]
    if bad:
        raise InputError(f"unknown aspect {bad[0]!r}; choose from {', '.join(LIKERT_STATEMENTS)}")
    if task == "likert" and not aspects:
        raise InputError("--aspects must name at least one aspect for a Likert study")
    if task == "likert" and gold and "coherent" not in aspects:
        raise InputError("Likert gold items check the 'coherent' statement; add it to --aspects or drop --gold")
    if photos_dir is not None and photo_url is not None:
        raise InputError("give --photos or --photo-url, not both")
    if photos_dir is not None and not Path(photos_dir).is_dir():
        raise InputError(f"--photos {photos_dir}: not a folder")
    if photo_url is not None:
        from vistkit.studio.service import check_photo_url

        check_photo_url(photo_url)
    if not 0.0 <= gold_pass <= 1.0:
        raise InputError("--gold-pass must be between 0 and 1")
    items = list(items)
    if not items:
        raise InputError("the study has no items")
    check_items(items)
    if task != "likert" and any(len(it.stories) < 2 for it in items):
        raise InputError(f"a {task} study needs at least two systems (give two or more --stories)")
    file = db.sqlite_path(study_path)
    if file is not None and (cleaned := remove_leftover_work_files(file)):
        names = ", ".join(p.name for p in cleaned)
        warn(f"removed what an earlier init of {file} left when it was killed (its work file {names})")
    if file is not None and file.exists():
        if db.unfinished_study(file):
            sidecars = (Path(f"{file}{x}") for x in ("-wal", "-shm", "-journal"))
            files = [shlex.quote(str(p)) for p in (file, *sidecars) if p.exists()]
            raise InputError(
                f"{file} holds no finished study (an interrupted `vistkit studio init` leaves such a file); delete "
                f"it (rm {' '.join(files)}) and run init again, or choose a new file name"
            )
        raise InputError(f"{file} exists already; choose a new file name (a study is never overwritten)")
    systems = sorted({s.system for it in items for s in it.stories if s.system})
    if reference_system != "human" and reference_system not in systems:
        raise InputError(
            f"--reference-system {reference_system!r} is none of the study's systems ({', '.join(systems)})"
        )
    if gold and GOLD_SYSTEM in systems:
        raise InputError(
            f"a system is named {GOLD_SYSTEM!r}, the name of the shuffled story of --gold items; rename that system "
            "(-s OTHER=FILE) or drop --gold"
        )
    rng = random.Random(seed)
    plan = [*items, *gold_items(items, n=gold, reference_system=reference_system, task=task, rng=rng)]
    slots = per_item * sum(_n_units(task, len(it.stories)) for it in plan)
    if slots > MAX_SLOTS:
        raise InputError(
            f"this study would plan {slots:,} assignments ({per_item:,} per unit); at most {MAX_SLOTS:,}: "
            "use fewer items (--max-items), fewer systems or a smaller --per-item"
        )
    # A SQLite study is built under a work name beside FILE and given FILE's name only once it is whole
    # (`_publish`): two inits of one FILE at once both build, exactly one gets the name, and nothing ever sees a
    # half-made study under it (before, the other init was told to delete the "interrupted" one being built).
    work, hold = (None, None) if file is None else _work_file(file)
    try:  # a failure (a full disk, Ctrl-C) leaves no half-made study behind: the new file is removed
        st = db.open_study(study_path if work is None else work, create=True)
    except BaseException as exc:
        _remove_new_study(work)
        _release(hold)
        _rename_in_error(exc, work, file)
        raise
    try:
        admin_token = db.new_token()
        study_id = db.new_token()[:12]
        n_units = n_assign = 0
        with st.write() as conn:
            if conn.execute(db.items.select().limit(1)).first() is not None:
                raise InputError(f"{study_path} already holds a study")
            db.put_settings(
                conn,
                {
                    "study_id": study_id,
                    "title": title,
                    "task": task,
                    "per_item": per_item,
                    "aspects": list(aspects),
                    "photos_dir": None if photos_dir is None else str(Path(photos_dir).resolve()),
                    "photo_url": photo_url,
                    "gold_pass": gold_pass,
                    "reference_system": reference_system,
                    "allow_same": allow_same,
                    "claim_timeout": claim_timeout,
                    "seed": seed,
                    "created_at": db.now(),
                    "secret": secrets.token_hex(32),
                    "admin_token_hash": db.token_hash(admin_token),
                },
            )
            for it in plan:
                item_id = conn.execute(
                    insert(db.items).values(key=it.key, photo_ids=json.dumps(list(it.photo_ids)), is_gold=it.is_gold)
                ).inserted_primary_key[0]  # type: ignore[index]
                sids = [
                    conn.execute(
                        insert(db.stories).values(
                            item_id=item_id, system=s.system, story_id=s.story_id, text=s.text, gold_role=s.gold_role
                        )
                    ).inserted_primary_key[0]  # type: ignore[index]
                    for s in it.stories
                ]
                for unit in _units(task, sids):
                    if it.is_gold and task == "pairwise" and len(unit) != 2:
                        continue
                    unit_id = conn.execute(
                        insert(db.units).values(item_id=item_id, story_ids=json.dumps(unit), is_gold=it.is_gold)
                    ).inserted_primary_key[0]  # type: ignore[index]
                    n_units += 1
                    rows = []
                    for slot in range(per_item):
                        order = unit[:]
                        rng.shuffle(order)
                        rows.append(
                            {"unit_id": unit_id, "slot": slot, "story_order": json.dumps(order), "rnd": rng.random()}
                        )
                    conn.execute(insert(db.assignments), rows)
                    n_assign += len(rows)
        if work is not None and file is not None:
            st.close()  # the log checkpointed into the file and removed: the file alone is the study
            _publish(work, file)
    except BaseException as exc:
        st.engine.dispose()
        _remove_new_study(work)
        _rename_in_error(exc, work, file)
        raise
    finally:
        _release(hold)  # after the work file is gone (published or removed)
    st.engine.dispose()
    bare = [it.key for it in items if not it.photo_ids]  # once the study is made: photos it cannot show
    if bare and photos_dir is not None:
        which = "the stories carry" if len(bare) == len(items) else f"{len(bare):,} of the {len(items):,} items carry"
        warn(
            f"{which} no photo ids (first: item {bare[0]!r}), so --photos shows no photo for them; read at least "
            "one system from a format with photo ids (VIST SIS, PR-VIST, the challenge format) if they should be "
            "shown"
        )
    if photos_dir is not None and len(bare) < len(items):  # photos in subfolders, or named by other ids
        from vistkit.studio.app import photo_folder_problem

        problem = photo_folder_problem(Path(photos_dir).resolve(), (p for it in items for p in it.photo_ids))
        if problem is not None:
            warn(
                f"{problem}; --photos needs a folder holding a file PHOTO_ID.jpg (or .png, ...) for each photo id of "
                "the stories, directly inside it: make the study again with such a folder if they should be shown"
            )
    return {
        "study_id": study_id,
        "task": task,
        "items": len(items),
        "gold_items": len(plan) - len(items),
        "units": n_units,
        "assignments": n_assign,
        "per_item": per_item,
        "admin_token": admin_token,
    }
