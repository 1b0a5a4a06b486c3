"""Study storage: the schema (SQLAlchemy Core), its version and migrations, engines, tokens.

SQLite runs in WAL mode with ``synchronous=FULL`` and a busy timeout, so a judgement the server acknowledged
survives a killed process; any other SQLAlchemy URL (``postgresql://...``) works the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    select,
    text,
)

from vistkit.errors import InputError, MissingDependencyError, OutputError, VistkitError

#: The current schema version; `migrate` brings older study files up to it.
SCHEMA_VERSION = 2


def _tables(md: MetaData, version: int) -> dict[str, Table]:
    """The tables as they are at schema ``version`` (migration 1 creates the version-1 shape)."""
    t: dict[str, Table] = {}
    t["settings"] = Table("settings", md, Column("key", String(64), primary_key=True), Column("value", Text))
    t["items"] = Table(
        "items",
        md,
        Column("id", Integer, primary_key=True),
        Column("key", String(512), nullable=False, unique=True),
        Column("photo_ids", Text, nullable=False, default="[]"),
        Column("is_gold", Boolean, nullable=False, default=False),
    )
    t["stories"] = Table(
        "stories",
        md,
        Column("id", Integer, primary_key=True),
        Column("item_id", Integer, ForeignKey("items.id"), nullable=False, index=True),
        Column("system", String(256), nullable=False),
        Column("story_id", String(512), nullable=False),
        Column("text", Text, nullable=False),
        Column("gold_role", String(16), nullable=False, default=""),
    )
    t["units"] = Table(
        "units",
        md,
        Column("id", Integer, primary_key=True),
        Column("item_id", Integer, ForeignKey("items.id"), nullable=False, index=True),
        Column("story_ids", Text, nullable=False),
        Column("is_gold", Boolean, nullable=False, default=False),
    )
    t["annotators"] = Table(
        "annotators",
        md,
        Column("id", Integer, primary_key=True),
        Column("name", String(128), nullable=False, unique=True),
        Column("token_hash", String(64), nullable=False, unique=True),
        Column("created_at", Float, nullable=False),
        *([Column("quota", Integer, nullable=True)] if version >= 2 else []),
    )
    t["assignments"] = Table(
        "assignments",
        md,
        Column("id", Integer, primary_key=True),
        Column("unit_id", Integer, ForeignKey("units.id"), nullable=False, index=True),
        Column("slot", Integer, nullable=False),
        Column("story_order", Text, nullable=False),
        Column("rnd", Float, nullable=False),
        Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=True, index=True),
        Column("claimed_at", Float, nullable=True),
        Column("submitted_at", Float, nullable=True),
        UniqueConstraint("unit_id", "annotator_id", name="one_unit_per_annotator"),
        UniqueConstraint("unit_id", "slot", name="one_row_per_slot"),
    )
    t["judgements"] = Table(
        "judgements",
        md,
        Column("id", Integer, primary_key=True),
        Column("assignment_id", Integer, ForeignKey("assignments.id"), nullable=False, unique=True),
        Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False, index=True),
        Column("unit_id", Integer, ForeignKey("units.id"), nullable=False, index=True),
        Column("answer", Text, nullable=False),
        Column("gold_passed", Boolean, nullable=True),
        Column("seconds", Float, nullable=True),
        Column("created_at", Float, nullable=False),
    )
    return t


metadata = MetaData()
T = _tables(metadata, SCHEMA_VERSION)
settings, items, stories, units, annotators, assignments, judgements = (
    T["settings"],
    T["items"],
    T["stories"],
    T["units"],
    T["annotators"],
    T["assignments"],
    T["judgements"],
)


def _migration_1(conn: Connection) -> None:
    _tables(MetaData(), 1)["settings"].metadata.create_all(conn)


def _migration_2(conn: Connection) -> None:
    """Per-annotator quota (how many tasks an invite link may take; NULL: no limit). A table that has the column
    already (a study whose version mark was set back) is left as it is."""
    if "quota" not in {c["name"] for c in inspect(conn).get_columns("annotators")}:
        conn.execute(text("ALTER TABLE annotators ADD COLUMN quota INTEGER"))


MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _migration_1, 2: _migration_2}


def study_url(study: str | Path) -> str:
    """A SQLAlchemy URL for ``study``: a URL is kept (``postgresql://...``), anything else is a SQLite file."""
    s = str(study)
    if "://" in s:
        return s
    if s.strip() in ("", "-", "."):
        raise InputError(
            f"{s!r} cannot hold a study: give a file name (study.db) or a database URL (postgresql://...)"
        )
    return f"sqlite:///{Path(s).resolve()}"


def display_name(study: str | Path) -> str:
    """``study`` for messages: a URL's password is masked."""
    s = str(study)
    if "://" not in s:
        return s
    from sqlalchemy.engine import make_url

    try:
        return make_url(s).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL: show only its scheme
        return s.split("://", 1)[0] + "://..."


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class StudyFileChanged(OutputError):
    """The SQLite file of an open study was deleted, moved or replaced by another file: what is written now would
    go to a file nobody will find again (a deleted or replaced one), so nothing is written."""


class StudyLogChanged(StudyFileChanged):
    """Only the ``-wal`` or ``-shm`` file of an open SQLite study was deleted, moved or replaced: `Study.write`
    recovers from it (`Study.recover`) where it can. ``log_file``: the name of the file that changed."""

    def __init__(self, message: str, *, log_file: str = "-wal or -shm") -> None:
        super().__init__(message)
        self.log_file = log_file


def _note_log(file: Path) -> Callable[[Any, Any], None]:
    """A ``connect`` listener that notes, in the pooled connection's ``info``, the (device, inode) of the ``-wal``
    file it opened (SQLite opens the log by name when a connection first reads, in `_sqlite_pragmas`): the
    connections that hold the log this process wrote can then be told from ones opened after it was changed."""
    def note(_dbapi_conn: Any, record: Any) -> None:
        record.info["vistkit_wal"] = _identity(Path(f"{os.path.realpath(file)}-wal"))

    return note


def _lock_holders(path: Path) -> set[int] | None:
    """The ids of the processes that hold a lock on the file ``path`` (SQLite's connections hold one on the study
    file while they are open), from ``/proc/locks``; None where the system does not list them."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders: set[int] = set()
    for line in lines:
        fields = line.split()
        if key in fields:
            try:
                holders.add(int(fields[fields.index(key) - 1]))  # "1: POSIX ADVISORY READ PID MAJ:MIN:INODE ..."
            except ValueError:
                return None
    return holders


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of ``path``, or None when there is no file there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


#: the files SQLite keeps beside a study in WAL mode: the write-ahead log and its shared-memory index
SIDE_FILES = ("-wal", "-shm")


def _open_identities() -> set[tuple[int, int]] | None:
    """The (device, inode) of every file this process holds open (``/proc/self/fd``, or ``/dev/fd``), or None
    where the system does not list them."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        out = set()
        for fd in names:
            try:
                st = os.stat(f"{folder}/{fd}")
            except OSError:  # closed meanwhile
                continue
            out.add((st.st_dev, st.st_ino))
        return out
    return None


class Study:
    """An open study database: the engine, a write lock (SQLite has one writer) and the settings.

    ``file``: the SQLite study file; every write transaction checks that the file under that name is still the
    one opened (`check_file`)."""

    def __init__(self, engine: Engine, name: str = "", *, file: Path | None = None) -> None:
        self.engine = engine
        self.name = name or engine.url.render_as_string(hide_password=True)  # for messages
        self.write_lock = threading.Lock()
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._settings: dict[str, Any] | None = None
        self.file = file.absolute() if file is not None else None  # a later chdir does not change which file
        self._identity = _identity(self.file) if self.file is not None else None
        #: the (device, inode) of the -wal and -shm files when last checked (`check_file`)
        self._sides: dict[str, tuple[int, int] | None] = {}
        self._salvaged = False
        self._remember_sides()

    def _side(self, side: str) -> Path:
        """The ``-wal`` or ``-shm`` file: beside the file the study's name leads to (SQLite opens a symlinked study
        through its target, whose folder holds them)."""
        assert self.file is not None
        return Path(f"{os.path.realpath(self.file)}{side}")

    def _remember_sides(self) -> None:
        if self.file is not None and self.is_sqlite:
            self._sides = {side: _identity(self._side(side)) for side in SIDE_FILES}

    def check_file(self) -> None:
        """Raise `StudyFileChanged` when the study's SQLite file was deleted, moved or replaced since it was
        opened: the open connections would go on writing into the old file (a deleted one vanishes with the
        server, a moved one loses its write-ahead log), so an answer stored now could never be found again.

        The same for its ``-wal`` and ``-shm`` files: one that is no longer the file this process holds open (it
        was deleted, moved or replaced; SQLite itself removing and re-creating them after every connection closed
        is not a change) means the answers written now go into a log that a killed server loses, and that other
        processes (``export``, ``status``) do not see: that is `StudyLogChanged`, which `write` recovers from."""
        if self.file is None or self._identity is None:
            return
        if _identity(self.file) != self._identity:
            raise StudyFileChanged(
                f"study {self.name}: its file was deleted, moved or replaced while it was open, so nothing more is "
                "stored; put the study file back (or restore it from a backup) and restart the server"
            )
        if not self.is_sqlite:
            return
        for side in SIDE_FILES:
            before = self._sides.get(side)
            now = _identity(self._side(side))
            if now == before:
                continue
            if before is not None:
                held = _open_identities()
                # an inode freed when SQLite removed the old log may already be the study's new -shm (or -wal):
                # that is the file now under that name, not the old log still held
                current = {_identity(self._side(x)) for x in SIDE_FILES} | {self._identity}
                if held is None or (before in held and before not in current):  # the old one is still in use
                    raise StudyLogChanged(
                        f"study {self.name}: its {self._side(side).name} file was deleted, moved or replaced while "
                        "the study was open, so this write was not stored; the next one copies what this process "
                        "wrote into the study file and opens the study again (`recover`)",
                        log_file=self._side(side).name,
                    )
            self._sides[side] = now

    def salvage(self) -> bool:
        """After `check_file` found the ``-wal`` or ``-shm`` file changed: copy what this process's write-ahead
        log holds (through the file it still has open) into the study file (``PRAGMA wal_checkpoint(FULL)``),
        once, so the answers acknowledged before the change survive even a kill -9. True when it ran."""
        if not self.is_sqlite or self._salvaged or self.file is None or _identity(self.file) != self._identity:
            return False
        with self.write_lock:
            self._salvaged = self._checkpoint_old_log()
        return self._salvaged

    def _checkpoint_old_log(self, tries: int = 6) -> bool:
        """``PRAGMA wal_checkpoint(FULL)`` through a pooled connection that holds the log this process wrote (the
        ``-wal`` file `check_file` remembers, noted by `_note_log`): one opened after the log was changed reads
        another file, and would copy nothing, or garbage. True when every frame of the log is in the study file.
        The caller holds `write_lock`."""
        wanted = self._sides.get("-wal")
        held: list[Connection] = []
        try:
            for _ in range(tries):
                conn = self.engine.connect()
                held.append(conn)
                if wanted is None or conn.connection.info.get("vistkit_wal") != wanted:
                    continue
                row = conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)").first()
                return row is not None and row[0] == 0 and row[1] == row[2]  # not busy; every frame copied
            return False
        finally:
            for conn in held:
                conn.close()

    def recover(self, log_file: str = "-wal or -shm") -> None:
        """After `check_file` found the ``-wal`` or ``-shm`` file deleted, moved or replaced (a backup or clean-up
        tool): copy this process's log into the study file (`_checkpoint_old_log`), close every connection (the
        next ones open the files now beside the study, so the server goes on, and other programs see what it
        writes), and check again. Only when this process alone has the study open: another program (a second
        server) may still write through the old files, so it stays `StudyLogChanged` until each is restarted.
        Raises `StudyLogChanged` when it could not recover (nothing was lost: the next request tries again). The
        caller holds `write_lock`."""
        from vistkit.errors import warn

        assert self.file is not None
        if not self._salvaged and not self._checkpoint_old_log():  # once copied, the old log takes no more writes
            raise StudyLogChanged(
                f"study {self.name}: its -wal or -shm file was changed while the study was open and what this server "
                "wrote could not be copied into the study file yet, so nothing more is stored; the next request "
                "tries again (stop the server with Ctrl-C or SIGTERM, not kill -9, if this repeats)"
            )
        self._salvaged = True
        with self.engine.connect():  # an open connection holds a lock on the study file: this process is listed
            alone = _lock_holders(self.file) == {os.getpid()}  # None: the system does not say; the safe side
        if not alone:
            raise StudyLogChanged(
                f"study {self.name}: its -wal or -shm file was changed while the study was open; what this server "
                "wrote is safe in the study file, but another program has the study open too (a second server?), "
                "so nothing more is stored until every program using the study is stopped (Ctrl-C or SIGTERM) and "
                "the server is started again"
            )
        kept = self._set_aside_foreign_log()
        deadline = time.monotonic() + 5.0
        while True:  # requests still reading through old connections return them in a moment
            self.engine.dispose()
            try:
                self.check_file()
                break
            except StudyLogChanged:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._salvaged = False  # a later change is copied again
        warn(
            f"study {self.name}: its {log_file} file was deleted, moved or replaced by another program while the "
            "study was open; every judgement was copied into the study file first and the study was opened again "
            "(nothing was lost; keep backup and clean-up tools away from a served study's -wal and -shm files)"
            + (f"; the -wal file found in its place was kept as {kept.name}, not read" if kept else "")
        )

    def _set_aside_foreign_log(self) -> Path | None:
        """Rename a ``-wal`` file that holds frames and is not the log this process wrote (another program put it
        there: an earlier copy restored by a backup tool, another database's log) to ``-wal.replaced-TIME``, and
        return its new name: SQLite would replay its pages over the study when the study is opened again (a
        stale copy of this study's own log is a valid log). Kept, not deleted: it is someone's file. Only called
        when this process alone has the study open, after its own log was copied into the study file."""
        p = self._side("-wal")
        now = _identity(p)
        try:
            holds_frames = now is not None and p.stat().st_size > 0
        except OSError:
            return None
        if not holds_frames or now == self._sides.get("-wal"):
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        kept = p.with_name(f"{p.name}.replaced-{stamp}")
        n = 1
        while kept.exists():
            n += 1
            kept = p.with_name(f"{p.name}.replaced-{stamp}-{n}")
        os.replace(p, kept)
        return kept

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[Connection]:
        """One write transaction (committed on exit, rolled back on error), serialised within this process.

        SQLite: ``durable`` commits are synced to disk (``synchronous=FULL``); others (task claims, which are
        harmless to lose) use ``NORMAL``, which in WAL mode still survives a killed process, only not a power cut.
        A study file deleted, moved or replaced since it was opened is `StudyFileChanged` (checked before the
        transaction and again before its commit; the transaction is rolled back). A changed ``-wal`` or ``-shm``
        file found before the transaction begins is recovered from first (`recover`).
        """
        with self.write_lock:
            try:
                self.check_file()
            except StudyLogChanged as changed:
                self.recover(changed.log_file)
            with self.engine.begin() as conn:
                if self.is_sqlite:
                    conn.exec_driver_sql(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self.check_file()
                yield conn
                self.check_file()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reading, closed after the block: one snapshot, so every query of the block sees the
        same committed state while servers write (SQLite: a read transaction begun before the first query; Python's
        sqlite3 otherwise runs each SELECT on its own; other databases: REPEATABLE READ). Nothing written in the
        block is kept (it is rolled back on close): write with `write`."""
        with self.engine.connect() as conn:
            if self.is_sqlite:
                conn.exec_driver_sql("BEGIN")
                yield conn
            else:
                yield conn.execution_options(isolation_level="REPEATABLE READ")

    @property
    def settings(self) -> dict[str, Any]:
        """The study's settings, decoded and checked (`check_settings`); a damaged one is an `InputError`."""
        if self._settings is None:
            with self.read() as conn:
                return self.read_settings(conn)
        return self._settings

    def read_settings(self, conn: Connection) -> dict[str, Any]:
        """The study's settings as ``conn`` sees them now (checked as `settings` checks them, which then returns
        them): a long-running server caches them, so a page that shows what other processes change (the unsent
        invites `studio invite` marks) reads them in its own snapshot."""
        rows = conn.execute(select(settings.c.key, settings.c.value)).all()
        values = {str(k): loads(v, self.name, f"its setting {k!r}") for k, v in rows}
        check_settings(values, self.name)
        self._settings = values
        return values

    def setting(self, key: str, default: Any = None) -> Any:
        """One of the study's settings, ``default`` when it is not set."""
        return self.settings.get(key, default)

    def secret(self) -> bytes:
        """The study's secret (its ``secret`` setting, hex-decoded)."""
        return bytes.fromhex(self.settings["secret"])

    def close(self) -> None:
        """Checkpoint SQLite's write-ahead log into the study file (``PRAGMA wal_checkpoint(TRUNCATE)``: the
        ``.db`` file alone then holds every judgement) and close the engine's connections (a later use reconnects).
        A checkpoint the storage refuses (a full disk) is a warning: the ``-wal`` file still holds the data."""
        if self.is_sqlite:
            try:
                with self.write_lock:
                    try:
                        self.check_file()
                        log_changed = False
                    except StudyLogChanged:
                        log_changed = True
                    except StudyFileChanged:  # a moved study file gets its log all the same
                        log_changed = False
                    if log_changed:  # only a connection on the log this process wrote may copy it
                        self._checkpoint_old_log()
                    else:
                        with self.engine.connect() as conn:
                            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            except Exception as exc:
                problem = storage_problem(exc)
                if problem is None:
                    raise
                from vistkit.errors import warn

                warn(f"the study's write-ahead log was not checkpointed ({problem[1]}); keep its -wal file with it")
        self.engine.dispose()
        self._remember_sides()  # every connection is closed: SQLite removed (or will re-create) the -wal and -shm


def make_engine(study: str | Path) -> Engine:
    """The engine of ``study``. A SQLite study file that exists (`open_study` creates a new one first) is opened
    by every connection with ``mode=rw``, so a study file deleted while a server runs is not silently re-created
    empty by the next connection (that connection fails instead, and the request is answered with 503)."""
    url = study_url(study)
    if url.startswith("sqlite"):
        file = sqlite_path(study)
        if file is not None and file.is_file():
            import sqlite3

            uri = f"{file.resolve().as_uri()}?mode=rw"

            def connect() -> sqlite3.Connection:
                return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)

            engine = create_engine(url, creator=connect, pool_size=20)
        else:
            engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=20)
        event.listen(engine, "connect", _sqlite_pragmas)
        if file is not None:
            event.listen(engine, "connect", _note_log(file))  # after the pragmas: the log is open by then
        return engine
    try:
        return create_engine(url, pool_pre_ping=True, pool_size=20)
    except ImportError as exc:  # the URL names a database whose Python driver is not installed
        driver = (getattr(exc, "name", None) or str(exc)).split(".")[0]
        package = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary"}.get(driver, driver)
        raise MissingDependencyError(
            f"study {display_name(study)} needs the database driver {driver!r}, which is not installed: "
            f"pip install {package}"
        ) from None
    except Exception as exc:  # sqlalchemy.exc.ArgumentError: not a URL it can read, an unknown dialect
        first = (str(exc).splitlines() or [""])[0][:200]
        raise InputError(f"study {display_name(study)} is not a database URL vistkit can open ({first})") from None


PRIVATE = 0o600  # the study file holds the CSRF secret and every judgement: its owner only


def make_private(path: Path) -> None:
    """Owner-only permissions on a SQLite study and its WAL/SHM files (created so, tightened if they exist)."""
    path = Path(os.path.realpath(path))  # a symlinked study: SQLite keeps its -wal and -shm beside the target
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        try:
            if p.is_file() and p.stat().st_mode & 0o077:
                os.chmod(p, PRIVATE)
        except OSError:  # not ours (another user's study opened read-only): leave it
            pass


def _create_private(path: Path, *, exist_ok: bool = True) -> None:
    """Create an empty study file readable by its owner only, before SQLite opens it (SQLite gives the WAL and
    SHM files the database file's permissions); ``exist_ok=False``: a file already there is refused."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE))
    except FileExistsError:
        if not exist_ok:
            raise InputError(f"{path} exists already; choose a new file name (a study is never overwritten)") from None
    except OSError as exc:
        raise InputError(f"cannot create study {path}: {exc.strerror or exc}") from None


def damaged(name: str, what: str) -> InputError:
    """The one sentence for a study that can be read but whose content is wrong: ``what`` says what and where."""
    return InputError(f"study {name} is damaged ({what}); restore it from a backup")


def loads(value: Any, name: str, what: str) -> Any:
    """``value`` (a JSON text the study stores) decoded; a value that is not JSON is `damaged` (``what`` names
    the row and field, e.g. "judgement 3: its answer")."""
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        shown = repr(value) if value is None or len(str(value)) <= 40 else repr(str(value)[:40]) + "..."
        raise damaged(name, f"{what} is {shown}, not valid JSON") from None


def schema_version(conn: Connection, name: str = "the study") -> int:
    """The schema version stored in the study (0: an empty database); a mark that is not a whole number from 1 is
    `damaged`."""
    if not inspect(conn).has_table("settings"):
        return 0
    row = conn.execute(select(settings.c.value).where(settings.c.key == "schema_version")).first()
    if row is None:
        return 0
    value = loads(row[0], name, "its schema version")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise damaged(name, f"its schema version is {row[0]!r}, not a whole number from 1")
    return value


def check_schema(conn: Connection, name: str) -> None:
    """Refuse, as `damaged`, a study that lacks a table or a column of the current schema (e.g. a table dropped
    by hand): every verb and every request would fail on it later."""
    found = inspect(conn)
    for table in T.values():
        if not found.has_table(table.name):
            raise damaged(name, f"it has no {table.name} table")
        have = {c["name"] for c in found.get_columns(table.name)}
        missing = [c.name for c in table.columns if c.name not in have]
        if missing:
            raise damaged(name, f"its {table.name} table has no {', '.join(missing)} column")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def check_settings(values: dict[str, Any], name: str) -> None:
    """Refuse, as `damaged`, a finished study (one with a ``task``) whose settings lack or mistype a value the
    verbs and the server use. A study without a task (an empty database, an interrupted ``init``) passes: the
    commands say it holds no study."""
    from vistkit.studio import LIKERT_STATEMENTS, MAX_PER_ITEM, TASKS

    if "task" not in values:
        return

    def bad(key: str, wanted: str) -> InputError:
        shown = "missing" if key not in values else f"{json.dumps(values[key])[:60]}"
        return damaged(name, f"its setting {key!r} is {shown}, not {wanted}")

    if values["task"] not in TASKS:
        raise bad("task", f"one of {', '.join(TASKS)}")
    per_item = values.get("per_item")
    if isinstance(per_item, bool) or not isinstance(per_item, int) or not 1 <= per_item <= MAX_PER_ITEM:
        raise bad("per_item", f"a whole number of annotators from 1 to {MAX_PER_ITEM:,}")
    if not isinstance(values.get("study_id"), str) or not values["study_id"]:
        raise bad("study_id", "a text")
    secret = values.get("secret")
    if not isinstance(secret, str) or len(secret) < 32 or re.fullmatch(r"[0-9a-fA-F]+", secret) is None:
        raise bad("secret", "a hexadecimal key")
    aspects = values.get("aspects", [])
    if not isinstance(aspects, list) or not all(isinstance(a, str) and a in LIKERT_STATEMENTS for a in aspects):
        raise bad("aspects", f"a list of statements from {', '.join(LIKERT_STATEMENTS)}")
    if values["task"] == "likert" and not aspects:
        raise bad("aspects", "a non-empty list of statements (a Likert study rates at least one)")
    for key in ("title", "photos_dir", "photo_url", "reference_system", "admin_token_hash"):
        if values.get(key) is not None and not isinstance(values[key], str):
            raise bad(key, "a text")
    if "allow_same" in values and not isinstance(values["allow_same"], bool):
        raise bad("allow_same", "true or false")
    if "gold_pass" in values and not (_is_number(values["gold_pass"]) and 0 <= values["gold_pass"] <= 1):
        raise bad("gold_pass", "a number from 0 to 1")
    if "claim_timeout" in values and not (_is_number(values["claim_timeout"]) and values["claim_timeout"] > 0):
        raise bad("claim_timeout", "a number of seconds above 0")
    for key in ("created_at", "seed"):
        if values.get(key) is not None and not _is_number(values[key]):
            raise bad(key, "a number")


def migrate(engine: Engine, *, target: int = SCHEMA_VERSION, name: str = "the study") -> int:
    """Apply every migration above the stored version up to ``target``, each in its own transaction."""
    with engine.begin() as conn:
        current = schema_version(conn, name)
    if current > SCHEMA_VERSION:
        raise InputError(
            f"this study has schema version {current}, newer than this vistkit understands ({SCHEMA_VERSION}); "
            "upgrade vistkit"
        )
    for version in range(current + 1, target + 1):
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            _put_setting(conn, "schema_version", version)
    return max(current, target)


def _put_setting(conn: Connection, key: str, value: Any) -> None:
    conn.execute(settings.delete().where(settings.c.key == key))
    conn.execute(settings.insert().values(key=key, value=json.dumps(value)))


def put_settings(conn: Connection, values: dict[str, Any]) -> None:
    """Store each of ``values`` as a setting."""
    for k, v in values.items():
        _put_setting(conn, k, v)


def _check_is_study(path: Path) -> None:
    """Refuse, without writing a byte, an SQLite file that is not a vistkit study (another program's database,
    or not a database): it is read through a read-only connection before the engine (WAL mode) touches it."""
    import sqlite3

    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            row = (
                con.execute("SELECT value FROM settings WHERE key = 'schema_version'").fetchone()
                if "settings" in tables
                else None
            )
        finally:
            con.close()
    except sqlite3.Error as exc:
        problem = storage_problem(exc)
        if problem is not None and problem[0] in ("io", "full"):  # e.g. no room for the -shm file of a WAL study
            raise InputError(f"cannot open study {path}: {problem[1]} ({_HINTS[problem[0]]})") from None
        raise InputError(f"cannot open study {path}: {exc} (is it a vistkit study?)") from None
    if row is None:
        raise InputError(
            f"{path} is not a vistkit study (no schema version in it); create one with `vistkit studio init STUDY "
            "...`"
        )


def unfinished_study(path: Path) -> bool:
    """Whether the SQLite file ``path`` holds no finished study and nothing else: an empty file, or a vistkit
    database with its tables but no study in them (what ``init`` leaves when it is killed before it commits).
    Read through a read-only connection; anything else (a study, another program's database) is False."""
    import sqlite3

    try:
        if path.stat().st_size == 0:
            return True
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "settings" not in tables or not {t for t in tables if not t.startswith("sqlite_")} <= set(T):
                return False
            keys = {r[0] for r in con.execute("SELECT key FROM settings")}
            if "schema_version" not in keys or "task" in keys:
                return False
            return "items" not in tables or con.execute("SELECT 1 FROM items LIMIT 1").fetchone() is None
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False


def sqlite_path(study: str | Path) -> Path | None:
    """The file of a SQLite study (a path, or the database of a ``sqlite:///FILE`` URL), None for other databases.

    Raises `InputError` for an in-memory SQLite URL (``sqlite://``), which cannot hold a study."""
    url = study_url(study)
    if not url.startswith("sqlite"):
        return None
    if "://" not in str(study):
        return Path(str(study))
    from sqlalchemy.engine import make_url

    try:
        database = make_url(url).database
    except Exception:  # not a URL SQLAlchemy can read: make_engine says so
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        raise InputError(
            f"study {display_name(study)} names no database file; write sqlite:///study.db (or sqlite:////abs/study.db)"
        )
    return Path(database)


def _check_study_file(path: Path) -> None:
    """Refuse a SQLite study path that exists and is not a regular file (a folder, a FIFO, a device such as
    /dev/zero), before SQLite opens it: it would wait on a FIFO, and write a journal file beside a device."""
    from vistkit.data.readers import not_a_file

    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing (init creates it; the others say so) or unreadable (SQLite says so)
        return
    if (error := not_a_file(path, mode, fix="give a study file (study.db)")) is not None:
        raise error


def open_study(study: str | Path, *, create: bool = False) -> Study:
    """Open (and migrate) a study; ``create`` allows a new empty database, otherwise it must exist."""
    path = sqlite_path(study)
    if path is not None:
        _check_study_file(path)
    if path is not None and not create:
        if not path.exists():
            raise InputError(f"no study file {path}; create it with `vistkit studio init {path} ...`")
        if path.is_file() and path.stat().st_size == 0:  # refused before connecting: SQLite would write into it
            raise InputError(f"{path} is an empty file, not a study; create one with `vistkit studio init STUDY ...`")
        if path.is_file():
            _check_is_study(path)
    if path is not None:
        if create and not path.exists():
            _create_private(path)
        make_private(path)
    engine = make_engine(study)
    name = display_name(study)
    try:
        migrate(engine, name=name)
        with engine.connect() as conn:
            check_schema(conn, name)
        st = Study(engine, name, file=path)
        st.settings  # noqa: B018  (read and checked now: a damaged setting is refused before any work)
    except InputError:
        engine.dispose()
        raise
    except Exception as exc:  # a file that is not a database, an unreachable server
        engine.dispose()
        problem = storage_problem(exc)
        if problem is not None:
            raise study_error(exc, display_name(study)) from None
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise InputError(f"cannot open study {display_name(study)}: {exc.__class__.__name__}: {first}"[:400]) from None
    return st


# --------------------------------------------------------------------------------------------------- storage errors
#: (words in the database's message, kind): how a failing SQLite (or other) database says what is wrong
_PROBLEMS = (
    ("malformed", "damaged"),
    ("not a database", "damaged"),
    ("file is encrypted", "damaged"),
    ("readonly", "read-only"),
    ("read-only", "read-only"),
    ("disk is full", "full"),
    ("no space left", "full"),
    ("disk i/o error", "io"),
    ("database is locked", "locked"),
    ("unable to open database file", "unopenable"),
)

_HINTS = {
    "damaged": "restore it from a backup",
    "read-only": "give the user running vistkit write access to the file and its folder",
    "full": "free some disk space and try again",
    "io": "the disk may be full or failing: free some space or check the disk, then try again",
    "locked": "another program holds the study's lock; try again when it is done",
    "unopenable": "check that the file and its folder exist and are readable and writable by this user",
}


def storage_problem(exc: BaseException) -> tuple[str, str] | None:
    """``(kind, what the database said)`` for an error of the study's storage (a damaged file, a read-only file,
    a full disk, an input/output error, a lock held elsewhere), or None for any other exception.

    ``kind`` is one of ``damaged``, ``read-only``, ``full``, ``io``, ``locked``, ``unopenable``."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        said = str(exc.orig) if exc.orig is not None else str(exc)
    elif isinstance(exc, sqlite3.Error):
        said = str(exc)
    else:
        return None
    said = (said.splitlines() or [""])[0].strip()[:200]
    low = said.lower()
    for words, kind in _PROBLEMS:
        if words in low:
            return kind, said
    return None


def study_error(exc: BaseException, name: str) -> VistkitError:
    """One sentence for a storage error of study ``name`` (``exc`` one that `storage_problem` recognises): an
    `InputError` for a study that cannot be read, an `OutputError` for one that cannot be written."""
    kind, said = storage_problem(exc) or ("io", (str(exc).splitlines() or [""])[0][:200])
    if kind == "damaged":
        return InputError(f"cannot read study {name}: {said} ({_HINTS[kind]})")
    if kind in ("locked", "unopenable"):
        return InputError(f"cannot use study {name}: {said} ({_HINTS[kind]})")
    return OutputError(f"cannot write study {name}: {said} ({_HINTS[kind]}); nothing was stored")


def check_writable(st: Study, name: str) -> None:
    """Refuse, with one sentence, a study this process cannot write (a read-only file or folder) or whose SQLite
    file is damaged: a server would otherwise start and then fail every request. Nothing is changed."""
    try:
        with st.engine.connect() as conn:
            if st.is_sqlite:
                row = conn.exec_driver_sql("PRAGMA quick_check").first()
                conn.rollback()
                if row is not None and str(row[0]).lower() != "ok":
                    raise InputError(f"cannot read study {name}: {row[0]} ({_HINTS['damaged']})")
            try:  # a write that changes nothing, rolled back: SQLite refuses it on a read-only file
                conn.execute(settings.update().where(settings.c.key == "schema_version").values(value=settings.c.value))
            finally:
                conn.rollback()
    except InputError:
        raise
    except Exception as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        kind, said = problem
        if kind in ("read-only", "full", "io"):
            raise OutputError(
                f"study {name} cannot be written ({said}), so no judgement could be stored; {_HINTS[kind]}"
            ) from None
        raise study_error(exc, name) from None


# --------------------------------------------------------------------------------------------------- tokens
def new_token() -> str:
    """A fresh random token (32 bytes from `secrets`, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What the database keeps of a token: its SHA-256 (a leaked study file does not leak working links)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def tokens_equal(a: str, b: str) -> bool:
    """Constant-time comparison of two token hashes (or tokens)."""
    return hmac.compare_digest(a.encode(), b.encode())


def csrf_token(secret: bytes, annotator_id: int, assignment_id: int) -> str:
    """The CSRF token of one task form: an HMAC of who may submit what, checked in constant time."""
    msg = f"csrf:{annotator_id}:{assignment_id}".encode()
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def now() -> float:
    """The current time, seconds since the epoch."""
    return time.time()
