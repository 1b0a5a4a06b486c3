"""One writer for every file vistkit produces (DESIGN.md, "Writing files").

- **Never onto an input.** A command that writes declares its inputs (`output_policy`; the CLI does it for every
  writing verb); an output that is the same file as one of them (same path, a symlink or a hard link to it;
  ``ARCHIVE.zip:MEMBER`` counts as ``ARCHIVE.zip``), an existing file inside an input folder (a model folder)
  and an input's SQLite ``-wal``/``-shm``/``-journal`` file are refused, ``--force`` or not; so are standard
  output when it goes to an input (``... >> INPUT``), an output file that the shell also opened as standard
  output or error (``--per-item out.csv >> out.csv``: it would be replaced by name), a SQLite database in use
  (a ``-wal``, ``-shm`` or ``-journal`` file beside it: a served study) or one of those files, and in the CLI an
  existing file or folder of vistkit's cache (`CACHE_ENTRIES` of `cache_folders`).
- **Never over an existing file without ``--force``.** In the CLI an existing output file is refused unless the
  verb got ``--force``; the Python API overwrites (as `open(path, "w")` would), atomically. Without ``--force`` the
  new file takes its name only if the name is still free when it is done (a hard link, which fails on a taken
  name), so a file or folder made there while the command ran is never replaced.
- **Links and permissions.** An output that is a symbolic link is written through: the file it leads to is
  replaced and the link stays (a dangling link creates the file it names). A replaced file keeps its permission
  bits (never more writable than before; setuid/setgid/sticky dropped) and, where the process may set them, its
  owner and group; a new file gets what ``open`` gives under the umask. Another hard link to a replaced file keeps
  the old content (the rename gives the name a new file).
- **Folders** (reports, converted or trained models, the studio demo) are written only if they are new, empty or
  carry vistkit's marker file `MARKER` (replacing an earlier vistkit output needs ``--force``); a folder holding
  anything else (a user's ``index.html``) is never written into. A folder replaced whole (`replaced_folder`: a
  report, a model) lists its files in its marker, and ``--force`` refuses it while it holds anything else that the
  user put there (notes, a sub-folder, a table of their own). A command that fails removes only an output folder
  its own writers made, never one that appeared under that name while it ran (`removable`).
- **Atomic.** Every file is written to a temporary file in the same folder, flushed to disk (``fsync``) and renamed
  over the final name (`os.replace`): a crash or a full disk never leaves a half-written file under that name, and
  the temporary file (``.NAME.partial-XXXXXXXX.tmp``) is removed on failure, on Ctrl-C, and in the CLI on
  SIGTERM and SIGHUP too (`Terminated`: the process then still ends by that signal); only ``kill -9`` can leave
  one, hidden and named as partial. Devices and pipes (``/dev/null``, ``/dev/stdout``) are written directly
  (not a disk: a block device is refused); ``-`` means standard output where a verb allows it.
- **One sentence per failure** (`vistkit.errors.OutputError`, exit 1): a missing parent folder, a read-only
  folder, a full disk, a folder where a file is expected and the reverse, each naming the path and the fix.
- **CSV cells are neutralised against formula injection** (OWASP): a text cell that starts with ``=``, ``+``,
  ``-``, ``@``, a tab or a carriage return (after any leading single quotes) is written with one more leading
  ``'``; numbers, and text that is a plain number (``-0.5``, ``1e-3``, ``-inf``), are written as they are. Every
  CSV reader of vistkit removes exactly that one quote again (`restore_cell`), so writing and reading back is
  lossless.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import errno
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

from vistkit.errors import OutputError

MARKER = ".vistkit-output"
"""The file that marks a folder as written by vistkit (a report, a converted model, the studio demo)."""

MODEL_MARKERS = (MARKER, "vistkit_model.json")
"""What marks a model folder as vistkit's: the marker, or the ``vistkit_model.json`` of a converted folder."""

STDOUT = "-"

def _error(message: str) -> OutputError:
    """An `OutputError` whose message shows the bytes of a file name that is not UTF-8 as ``\\xff`` (Python keeps
    them as lone surrogates, which no terminal shows and a strict UTF-8 stream refuses to write)."""
    try:
        shown = message.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeError:
        shown = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return OutputError(shown)


# ----------------------------------------------------------------------------------------------- CSV cells
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""Leading characters a spreadsheet reads as the start of a formula (OWASP, "CSV Injection")."""

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def is_number_text(text: str) -> bool:
    """Whether ``text`` is a plain number (``-0.5``, ``+3``, ``1e-3``, ``-inf``, ``nan``): never quoted."""
    return _NUMBER.fullmatch(text) is not None


def neutralise_cell(value: Any) -> Any:
    """A CSV cell safe to open in a spreadsheet: text starting with a formula trigger (after any leading ``'``)
    gets one more leading ``'``; numbers and text that is a plain number are returned unchanged."""
    if not isinstance(value, str):
        return value
    if value.lstrip("'")[:1] in CSV_TRIGGERS and not is_number_text(value):
        return "'" + value
    return value


def restore_cell(text: str) -> str:
    """Undo `neutralise_cell`: drop one leading ``'`` when the rest (after any more quotes) starts with a formula
    trigger; any other text is returned unchanged."""
    if text[:1] == "'" and text.lstrip("'")[:1] in CSV_TRIGGERS:
        return text[1:]
    return text


class CsvWriter:
    """`csv.writer` whose every cell goes through `neutralise_cell` (the one CSV writer of vistkit)."""

    def __init__(self, fh: IO[str], **kwargs: Any) -> None:
        self._writer = csv.writer(fh, **kwargs)

    def writerow(self, row: Iterable[Any]) -> None:
        """Write one row, its formula cells neutralised."""
        self._writer.writerow([neutralise_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        """Write each row (`writerow`)."""
        for row in rows:
            self.writerow(row)


def csv_writer(fh: IO[str], **kwargs: Any) -> CsvWriter:
    """A CSV writer on ``fh`` that neutralises formula cells (see module doc); ``kwargs`` as for `csv.writer`."""
    return CsvWriter(fh, **kwargs)


# ----------------------------------------------------------------------------------------------- policy
@dataclasses.dataclass(frozen=True)
class OutputPolicy:
    """What the running command allows: overwrite existing outputs (``force``), and the files it reads."""

    force: bool = True  # the Python API overwrites like open(path, "w"); the CLI sets False unless --force
    inputs: tuple[str, ...] = ()
    cli: bool = False


_DEFAULT_POLICY = OutputPolicy()
_POLICY: ContextVar[OutputPolicy] = ContextVar("vistkit_output_policy", default=_DEFAULT_POLICY)


@contextlib.contextmanager
def output_policy(*, force: bool, inputs: Iterable[Any] = (), cli: bool = True) -> Iterator[OutputPolicy]:
    """Within the block, writers refuse existing outputs unless ``force`` and refuse to write onto any path
    found in ``inputs`` (paths, ``NAME=FILE[:FIELD]`` strings, ``ARCHIVE.zip:MEMBER``, lists, dataclasses)."""
    policy = OutputPolicy(force=force, inputs=tuple(input_paths(inputs)), cli=cli)
    if cli:
        refuse_stdout_input(policy)
    token = _POLICY.set(policy)
    folders = _FOLDERS.set(_FOLDERS.get() or _Folders())  # a nested policy: the same command
    try:
        with _terminated_cleanly() if cli else contextlib.nullcontext():
            yield policy
    finally:
        _FOLDERS.reset(folders)
        _POLICY.reset(token)


@dataclasses.dataclass
class _Folders:
    """The folders (device, inode) that writers made within the running `output_policy`, and those they refused
    as another's (a folder that appeared under an output name while the command ran: the user's, another run's
    report); see `removable`."""

    made: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    refused: set[tuple[int, int]] = dataclasses.field(default_factory=set)


_FOLDERS: ContextVar[_Folders | None] = ContextVar("vistkit_output_folders", default=None)


def _folder_id(folder: str | Path) -> tuple[int, int] | None:
    """A folder's (device, inode), or None when it is no folder (a link is not followed)."""
    try:
        st = os.lstat(folder)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _note_folder(folder: Path, *, made: bool) -> None:
    """Remember that this command made ``folder``, or refused it as another's (see `removable`)."""
    record = _FOLDERS.get()
    ident = _folder_id(folder)
    if record is not None and ident is not None:
        if made:
            record.made.add(ident)
        elif ident not in record.made:
            record.refused.add(ident)


def removable(folder: str | Path) -> bool:
    """Whether a command that failed may remove ``folder``, an output folder that did not exist when it started:
    only a folder (not a link) that a writer of this command made (`replaced_folder`, `prepare_folder`). A folder
    that another process made under that name while the command ran (a user's folder with their files, another
    run's finished report) is kept, also when the command failed (or was stopped with Ctrl-C) before its writer
    came to that folder: removing what no writer of this run made could delete someone else's files."""
    ident = _folder_id(folder)
    record = _FOLDERS.get()
    return ident is not None and record is not None and ident in record.made


def refuse_stdout_input(policy: OutputPolicy | None = None) -> None:
    """Refuse a command whose standard output is one of its input files, or the ``-wal``/``-shm``/``-journal``
    file SQLite keeps beside one (``vistkit score x.jsonl --per-item - >> x.jsonl``, ``vistkit studio status
    study.db >> study.db``): what it prints would be written into the file it reads (``cat x >> x`` refuses the
    same)."""
    policy = current_policy() if policy is None else policy
    try:
        out = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in a test, closed)
        return
    if not stat.S_ISREG(out.st_mode):
        return
    for inp in (f"{i}{suffix}" for i in policy.inputs for suffix in ("", *SQLITE_SIDECARS)):
        try:
            st = os.stat(inp)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            if _emptied_by_redirect(out):  # `> INPUT`: nothing is left to protect, and saying so matters
                raise _error(
                    f"standard output goes to {inp}, an input of this command, and the shell's > has already "
                    f"emptied it before vistkit started ({inp} is now empty); restore {inp} (from a copy, or by "
                    "making it again) and send the output to another file"
                )
            raise _error(
                f"standard output goes to {inp}, an input of this command; writing there would destroy that "
                "input, so send the output to another file"
            )


def _emptied_by_redirect(out: os.stat_result) -> bool:
    """Whether standard output (``out``: its status) is an empty file opened for writing without appending, as the
    shell's ``> FILE`` leaves it (``>>`` appends and keeps the file)."""
    if out.st_size:
        return False
    try:
        import fcntl

        flags = fcntl.fcntl(sys.stdout.fileno(), fcntl.F_GETFL)
    except (ImportError, OSError, ValueError, AttributeError):  # Windows, no real stdout
        return False
    return not flags & os.O_APPEND


def _refuse_redirected(target: Path) -> None:
    """Refuse an output file that the shell also opened as this command's standard output or error
    (``vistkit score x --per-item out.csv --force > out.csv``): the new file would replace it by name, and all
    that the command prints would go into the replaced file, lost. ``--per-item -`` writes there on purpose."""
    try:
        st = os.stat(target)
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(st.st_mode):
        return
    for fd, name in ((1, "standard output"), (2, "standard error")):
        try:
            other = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(other.st_mode) and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise _error(
                f"{target} is also where {name} goes (a redirection of the shell); replacing it would lose what "
                "the command prints there, so choose another output name"
                + (" or write it with - (standard output)" if fd == 1 else "")
            )


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while a command that writes files ran (`output_policy`): raised like Ctrl-C's
    KeyboardInterrupt, so that the writers remove their temporary files and a folder the command created, before
    the process ends by that signal after all (`_terminated_cleanly`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: what must happen before SIGTERM or SIGHUP ends a CLI command (`_terminated_cleanly`), which Python's exit would
#: have done (``atexit``) but the signal's default action skips: stopping child processes (`at_termination`)
_AT_TERMINATION: list[Callable[[], None]] = []


def at_termination(func: Callable[[], None]) -> Callable[[], None]:
    """Register ``func`` to run (best effort, once) when SIGTERM or SIGHUP ends a CLI command, after the writers'
    cleanup and before the process ends by the signal (the Java processes vistkit started: `vistkit.models.java`)."""
    if func not in _AT_TERMINATION:
        _AT_TERMINATION.append(func)
    return func


#: the signals that end a process without running Python's ``finally`` blocks (SIGINT already raises
#: KeyboardInterrupt): ``kill``, a closed terminal
_END_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def _terminated_cleanly() -> Iterator[None]:
    """Within the block (a command of the CLI that writes), SIGTERM and SIGHUP raise `Terminated` instead of ending
    the process at once: the writers' cleanup runs (no ``.NAME.*.tmp`` file, no half-made output folder stays), then
    the process ends by the same signal (exit status 128 + the signal, as before). Only where the signal has its
    default action (a server or an engine that handles it keeps its own handler) and only in the main thread
    (the only one Python runs handlers in); a forked child that inherited the handler dies by the signal as
    before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != pid:  # a forked worker: its parent's cleanup is not its business
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    handler.vistkit_terminates = True  # type: ignore[attr-defined]  # (`_signals_held` may hold it back)
    installed: list[int] = []
    for sig in _END_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, handler)
                installed.append(sig)
    try:
        yield
    except Terminated as exc:
        if exc.signum not in installed:
            raise
        _restore_signals(installed, handler)
        installed = []
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for func in list(_AT_TERMINATION):
            with contextlib.suppress(Exception):
                func()
        os.kill(pid, exc.signum)  # its default action again: the process ends as it would have without cleanup
        raise SystemExit(128 + exc.signum) from None  # (where the signal is somehow not fatal)
    finally:
        _restore_signals(installed, handler)


def _restore_signals(signals: list[int], handler: Any) -> None:
    for sig in signals:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(sig) is handler:
                signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait while the block renames files into place (they are noted, then raised
    again when it ends), so that an interruption cannot fall between moving an old output aside and moving the
    new one in. Only in the main thread (where Python runs signal handlers); a handler that is neither Python's
    own nor a default one (a server's, an engine's) is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: Any) -> None:
        pending.append(signum)

    swapped: dict[int, Any] = {}
    for sig in (signal.SIGINT, *_END_SIGNALS):
        with contextlib.suppress(OSError, ValueError):
            current = signal.getsignal(sig)
            if current in (signal.SIG_DFL, signal.default_int_handler) or getattr(current, "vistkit_terminates", False):
                swapped[sig] = signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, before in swapped.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, before)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)  # now handled as it would have been (KeyboardInterrupt, Terminated, the end)


def current_policy() -> OutputPolicy:
    """The `OutputPolicy` in force (set by `output_policy`; the default outside one)."""
    return _POLICY.get()


def _path_candidates(text: str) -> Iterator[str]:
    """Paths a command-line value may name: itself, the part after ``NAME=``, a SQLite URL's file, and each
    prefix before a ``:`` (``FILE:FIELD``, ``ARCHIVE.zip:MEMBER``)."""
    if text == STDOUT:  # an input read from standard input: the file the shell redirected into it (< FILE)
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISREG(os.fstat(0).st_mode):
                yield "/dev/stdin"
        return
    if not text:
        return
    values = [text]
    if "=" in text:
        values.append(text.split("=", 1)[1])
    if text.startswith("sqlite:///"):
        values.append(text[len("sqlite:///") :].split("?", 1)[0])
    for value in values:
        yield value
        rest = value
        for _ in range(3):
            if ":" not in rest:
                break
            rest = rest.rpartition(":")[0]
            if rest:
                yield rest


def input_paths(values: Iterable[Any]) -> list[str]:
    """The existing files and folders named in ``values`` (see `output_policy`)."""
    found: list[str] = []

    def visit(v: Any) -> None:
        if v is None or isinstance(v, bool | int | float):
            return
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, str):
            for c in _path_candidates(v):
                try:
                    if os.path.exists(c) and c not in found:
                        found.append(c)
                except (OSError, ValueError):  # a NUL byte, a name too long
                    continue
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                visit(getattr(v, f.name))
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)
        elif isinstance(v, list | tuple | set | frozenset):
            for x in v:
                visit(x)

    visit(list(values))
    return found


# ----------------------------------------------------------------------------------------------- checks
def _shown(path: Path | str) -> str:
    return str(path)


def _same_file(a: Path, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


#: files SQLite keeps beside a database while it is open (a studio): part of that input, never an output
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def _inside(target: Path, folder: str) -> bool:
    """Whether ``target`` (which need not exist) lies inside ``folder``, links resolved."""
    try:
        return Path(os.path.realpath(target)).is_relative_to(os.path.realpath(folder))
    except (OSError, ValueError):
        return False


def _refuse_inputs(target: Path, policy: OutputPolicy, what: str = "file") -> None:
    """Refuse an output that would destroy an input: the same file or folder (a link to it too), an existing
    file inside an input folder (a model's weights, a score table), or a SQLite sidecar of an input file."""
    exists = os.path.lexists(target)

    def refuse(how: str) -> OutputError:
        return _error(
            f"{_shown(target)} is {how}; writing it would destroy that input, so choose another output name"
        )

    for inp in policy.inputs:
        if exists and _same_file(target, inp):
            same = "" if os.path.abspath(inp) == os.path.abspath(target) else f" (the same {what} as {inp})"
            raise refuse(f"an input of this command{same}")
        if os.path.isfile(inp) and any(
            _same_file(target.parent if str(target.parent) else Path("."), os.path.dirname(inp) or ".")
            and target.name == os.path.basename(inp) + suffix
            for suffix in SQLITE_SIDECARS
        ):
            raise refuse(f"part of the input {inp} (SQLite keeps its unsaved changes there)")
        if exists and os.path.isdir(inp) and not os.path.isdir(target) and _inside(target, inp):
            raise refuse(f"a file inside the folder {inp}, an input of this command")
    if policy.cli and exists and (held := _cache_holding(target)) is not None:  # vistkit's own, read by later runs
        where = "is" if _same_file(target, held) else f"is inside {held},"
        raise _error(
            f"{_shown(target)} {where} part of vistkit's cache (converted models, compiled helpers, cached scores, "
            f"which later runs read); writing it would destroy that {what}, so choose another output name"
        )


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _is_sqlite(path: str) -> bool:
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _refuse_live_database(target: Path) -> None:
    """Refuse to replace a SQLite database that is open or holds unsaved changes (a ``-wal``, ``-shm`` or
    ``-journal`` file beside it: a running studio's study), or one of those files of a database: the server would
    go on writing into the replaced file (every answer after the last checkpoint lost) and the log's changes
    would never reach the study. ``--force`` or not: a study is never an output of another command."""
    real = os.path.realpath(target)
    if _is_sqlite(real):
        beside = [suffix for suffix in SQLITE_SIDECARS if os.path.lexists(real + suffix)]
        if beside:
            raise _error(
                f"{target} is a SQLite database in use (its {os.path.basename(real)}{beside[0]} file is beside it: "
                "a studio may be serving it, or it holds changes not yet saved into it); replacing it would lose "
                "them, so choose another output name"
            )
    for suffix in SQLITE_SIDECARS:
        if real.endswith(suffix) and _is_sqlite(real[: -len(suffix)]):
            raise _error(
                f"{target} is the name of the {suffix} file SQLite keeps beside the database "
                f"{real[: -len(suffix)]} (for changes not yet saved into it); writing it could destroy them, so "
                "choose another output name"
            )


#: what vistkit keeps in its cache folder (`vistkit.models.runtime.default_cache_dir`): compiled Java helpers,
#: converted language models, METEOR's tables, matplotlib's font cache, cached scores
CACHE_ENTRIES = ("java", "lm", "meteor-tables", "matplotlib", "scores.sqlite")


def cache_folders() -> list[str]:
    """vistkit's cache folders that exist, found without creating one: the folder chosen in this process,
    ``$VISTKIT_CACHE``, ``$XDG_CACHE_HOME/vistkit``, ``~/.cache/vistkit``."""
    found: list[Path] = []
    runtime = sys.modules.get("vistkit.models.runtime")
    found += list(getattr(runtime, "_CACHE_DIRS", {}).values())
    if explicit := os.environ.get("VISTKIT_CACHE", "").strip():
        found.append(Path(explicit).expanduser())
    if xdg := os.environ.get("XDG_CACHE_HOME", "").strip():
        found.append(Path(xdg).expanduser() / "vistkit")
    with contextlib.suppress(RuntimeError, KeyError, OSError):
        found.append(Path.home() / ".cache" / "vistkit")
    out: list[str] = []
    for folder in found:
        with contextlib.suppress(OSError, ValueError):
            if folder.is_dir() and str(folder) not in out:
                out.append(str(folder))
    return out


def _cache_holding(target: Path) -> str | None:
    """The part of vistkit's cache that ``target`` is or lies in (the cache folder itself, one of its
    `CACHE_ENTRIES`, ``$VISTKIT_METEOR_TABLE_CACHE``), or None. Only those: a cache folder pointed at a busy
    place (``VISTKIT_CACHE=/tmp``) does not make every file there vistkit's."""
    for cache in cache_folders():
        if _same_file(target, cache):
            return cache
        for entry in CACHE_ENTRIES:
            held = os.path.join(cache, entry)
            if os.path.lexists(held) and _inside(target, held):
                return held
    tables = os.environ.get("VISTKIT_METEOR_TABLE_CACHE", "").strip()
    if tables and os.path.isdir(tables) and _inside(target, tables):
        return tables
    return None


def _os_error(path: Path | str, exc: OSError, *, folder: bool = False) -> OutputError:
    """One sentence for an operating-system error while writing ``path``."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    code = exc.errno
    if code == errno.ENOENT and parent.is_dir():  # the folder is there (/proc/self): it takes no new files
        return _error(f"cannot write {p}: the folder {parent} does not take new files; choose another output path")
    if code == errno.ENOENT:
        return _error(
            f"cannot write {p}: the folder {parent} does not exist; create it first (mkdir -p {parent}) or choose "
            "another output path"
        )
    if code == errno.ENOTDIR:
        return _error(f"cannot write {p}: a part of its path is a file, not a folder; choose another output path")
    if code == errno.EISDIR:
        return _error(f"{p} is a folder; give a file name for the output (e.g. {p / 'out.csv'})")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        where = p if folder else parent
        return _error(
            f"cannot write {p}: the folder {where} is read-only or not writable by you; choose a writable folder "
            "for the output"
        )
    if code == errno.EFBIG:  # `ulimit -f` (or the file system's largest file), not a full disk
        return _error(
            f"cannot write {p}: it grew past the largest file this process may write (ulimit -f) or its file "
            "system holds; raise the limit, or write the output to another disk"
        )
    if code in (errno.ENOSPC, errno.EDQUOT):
        return _error(
            f"cannot write {p}: the disk is full (or over its quota); free some space or write the output to "
            "another disk"
        )
    if code == errno.ENAMETOOLONG:
        return _error(f"cannot write {p}: the file name is too long; choose a shorter output name")
    if code == errno.EEXIST:
        return _error(f"{p} exists already; choose another output path")
    reason = exc.strerror or type(exc).__name__
    return _error(f"cannot write {p}: {reason.lower()}; check the output path and try again")


#: operating-system errors about a path the user gave (reading or writing), and how to say them
_PATH_ERRORS = {
    errno.ENAMETOOLONG: "the file name is too long",
    errno.ELOOP: "a symbolic link loop (a link that leads back to itself)",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.ENOENT: "no such file or folder",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files on this machine",
    errno.EIO: "an input/output error of the disk",
}


def too_many_open_files(code: int) -> str:
    """One sentence for EMFILE (this process's limit, ``ulimit -n``) or ENFILE (the machine's)."""
    if code == errno.ENFILE:
        return "too many files are open on this machine; close some programs and run vistkit again"
    limit = "its limit, ulimit -n"
    try:
        import resource

        limit += f", is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,}"
    except (ImportError, OSError, ValueError):
        pass
    return f"too many open files for this process ({limit}); raise it (e.g. ulimit -n 4096) and run vistkit again"


def environment_error(exc: BaseException) -> str | None:
    """One sentence for an error of the machine or of a path that escaped the readers and writers (a full disk,
    a read-only file system, a file too large, a file name too long, no permission), or None for any other
    exception."""
    if not isinstance(exc, OSError):
        return None
    if exc.errno in (errno.EMFILE, errno.ENFILE):  # opening a file, a pipe or a child process, anywhere
        return too_many_open_files(exc.errno)
    if exc.errno in (errno.EAGAIN, errno.ENOMEM) and exc.filename is None:  # fork/exec of a helper (Java)
        return (
            "cannot start another process (too little memory, or a limit on processes: ulimit -u); free some "
            "memory or raise the limit and run vistkit again"
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS):
        return str(_os_error(exc.filename or "the output", exc))
    if exc.errno in _PATH_ERRORS and exc.filename is not None:
        return f"cannot use {exc.filename}: {_PATH_ERRORS[exc.errno]}; check the path"
    return None


def check_output(path: str | Path, *, force: bool | None = None) -> Path:
    """Check that a file may be written at ``path`` (see module doc) without writing anything; returns it.

    ``force`` overrides the running command's ``--force`` (`output_policy`).
    """
    policy = current_policy()
    force = policy.force if force is None else force
    if str(path) == "":
        raise _error("the output path is empty; give a file name")
    if str(path) == STDOUT:
        refuse_stdout_input(policy)
        return Path(STDOUT)
    p = Path(path)
    if os.path.isdir(p):
        raise _error(f"{p} is a folder; give a file name for the output (e.g. {p / 'out.csv'})")
    _refuse_inputs(p, policy)
    with contextlib.suppress(OSError, ValueError):
        if stat.S_ISBLK(os.stat(p).st_mode):  # /dev/sda, /dev/vda1: a typo that would overwrite a disk (as root)
            raise _error(
                f"{path} is a disk or a partition (a block device); writing the output there would overwrite what "
                "it holds, so give a regular file name"
            )
    if _is_stream(p):
        _refuse_others_file(p)
        return p
    if os.path.islink(p):  # a link is written through: its target is replaced, the link stays
        p = _follow_links(p)[0]
        if os.path.isdir(p):
            raise _error(f"{path} is a link to a folder; give a file name for the output")
        _refuse_inputs(p, policy)
    _refuse_live_database(p)
    if policy.cli:
        _refuse_redirected(p)
    _refuse_shadowing(p)
    if os.path.lexists(p):
        if not force:
            raise _error(f"{path} exists already; pass --force to overwrite it, or choose another output file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise _os_error(p, OSError(errno.ENOENT, "no such folder"))
    if not parent.is_dir():
        raise _os_error(p, OSError(errno.ENOTDIR, "not a folder"))
    return p


def _refuse_shadowing(p: Path) -> None:
    """Refuse a new file named ``FILE:REST`` where FILE is an existing file: vistkit's readers take such a name as
    a member of an archive (``stories.zip:a.jsonl``) or a field of a file (``PR_VIST.json.zip:predicted_story``)
    only while no file has that very name, so writing one would hide that input from every later command."""
    text = str(p)
    if ":" not in p.name or os.path.lexists(p):
        return
    folder = text[: len(text) - len(p.name)]
    for i, ch in enumerate(p.name):
        before = folder + p.name[:i]
        if ch == ":" and os.path.isfile(before):
            raise _error(
                f"{_shown(p)} is how vistkit names a part of the file {_shown(Path(before))} (ARCHIVE.zip:MEMBER, "
                "FILE:FIELD); a file of that name would hide it from later commands, so choose another output name"
            )


#: where a link names a file the process already has open (``/dev/stdout`` -> ``/proc/self/fd/1``): written in place
#: names of a file a process has open: /dev/fd/N, /proc/(self|thread-self|PID)[/task/TID]/fd/N (only those: a
#: plain /proc/x is not one, and passing it as such skipped the early check of a --report folder there)
_OPEN_FILE_LINK = re.compile(r"/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd|dev/fd)/\d+")


def _follow_links(p: Path) -> tuple[Path, bool]:
    """The file ``p`` names once the links of its last part are followed (``out.csv`` -> ``real/out.csv``), and
    whether one of those links is an open file of a process (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``):
    such a name is written in place, since replacing it would replace the link (``/dev/stdout`` itself) and the
    file the shell opened would never see the output."""
    current = os.path.abspath(p)
    for _ in range(40):  # the kernel's own limit on links in a row
        if _OPEN_FILE_LINK.fullmatch(current):
            return Path(current), True
        if not os.path.islink(current):
            return Path(current), False
        try:
            target = os.readlink(current)
        except OSError:
            return Path(current), False
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    raise _error(f"cannot write {p}: a symbolic link loop (a link that leads back to itself); check the path")


_FD_LINK = re.compile(r"/(?:proc/(self|thread-self|\d+)(?:/task/\d+)?/fd|dev/fd)/(\d+)")


def _process_fd(p: Path) -> int | None:
    """The file descriptor of this process that ``p`` names (``/dev/stderr`` -> 2), or None: such an output is
    written through a copy of that descriptor, at its current offset (as a shell's ``>&2``); opening the name
    anew would start at offset 0 and write over what the process already wrote there."""
    where, open_file = _follow_links(p)
    match = _FD_LINK.fullmatch(str(where)) if open_file else None
    if match is None or match.group(1) not in (None, "self", "thread-self", str(os.getpid())):
        return None
    return int(match.group(2))


def _refuse_others_file(p: Path) -> None:
    """Refuse a name of a regular file that another process has open (``/proc/PID/fd/N``): it would be opened by
    that name and overwritten in place (truncated at once, not atomic, no ``--force`` asked). This process's own
    descriptors (``/dev/stdout``, ``/dev/fd/3``) are written through as the shell's redirection says, unless one
    is open for reading only."""
    if not _follow_links(p)[1]:
        return
    fd = _process_fd(p)
    if fd is not None:
        if _read_only_descriptor(fd):  # writing gave "unexpected OSError: Bad file descriptor"
            raise _error(
                f"{p} is open for reading only (a redirection such as {fd}< FILE); open it for writing ({fd}> FILE) "
                "or give a file name for the output"
            )
        return
    try:
        st = os.stat(p)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        raise _error(
            f"{p} names the file {os.path.realpath(p)}, which another process has open; writing there would "
            "overwrite it in place, so give the file's own path (an existing file is then replaced only with --force) "
            "or another output name"
        )


def _read_only_descriptor(fd: int) -> bool:
    """Whether this process's descriptor ``fd`` is open for reading only (``3< FILE``)."""
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except (ImportError, OSError, AttributeError):
        return False


def _is_stream(p: Path) -> bool:
    """A device or a pipe (``/dev/null``, ``/dev/full``, a FIFO), or a name of a file the process has open
    (``/dev/stdout``, `_follow_links`): written in place, never replaced."""
    if _follow_links(p)[1]:
        return True
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)


def is_standard_output(path: str | Path) -> bool:
    """Whether writing ``path`` writes this process's standard output (``-``, ``/dev/stdout``, or the very file
    or pipe stdout goes to): a command then says what it did on stderr, so as not to mix it into its output."""
    if str(path) == STDOUT:
        return True
    try:
        return _process_fd(Path(path)) == sys.stdout.fileno()
    except (OSError, ValueError, AttributeError, OutputError):
        return False


def check_output_folder(
    path: str | Path, *, force: bool | None = None, markers: Sequence[str] = (MARKER,), whole: bool = False
) -> Path:
    """Check that an output folder may be written (new, empty, or vistkit's with ``--force``); writes nothing.
    ``whole``: the folder is to be replaced whole (`replaced_folder`), so an earlier output holding files vistkit
    did not write there (the user's notes) is refused too. A folder refused is noted as not this command's to
    remove (`removable`)."""
    try:
        return _check_output_folder(path, force=force, markers=markers, whole=whole)
    except OutputError:
        _note_folder(Path(path), made=False)
        raise


def _check_output_folder(path: str | Path, *, force: bool | None, markers: Sequence[str], whole: bool) -> Path:
    policy = current_policy()
    force = policy.force if force is None else force
    p = Path(path)
    if str(p) in ("", STDOUT):
        raise _error("the output folder is empty or '-'; give a folder name")
    if os.path.islink(p) and not os.path.exists(p):  # a link to nothing, or a loop: not "a file"
        raise _error(
            f"{p} is a symbolic link that leads nowhere (its target is missing, or it leads back to itself); remove "
            "it or give another folder for the output"
        )
    if os.path.lexists(p) and not p.is_dir():
        raise _error(f"{p} is a file, not a folder; give a new or empty folder for the output")
    _refuse_inputs(p, policy, what="folder")
    if not p.exists():
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.exists():
            raise _error(
                f"cannot write {p}: the folder {parent} does not exist; create it first (mkdir -p {parent}) or "
                "choose another output folder"
            )
        if not parent.is_dir():
            raise _error(f"cannot write {p}: {parent} is a file, not a folder; choose another output folder")
        return p
    try:
        entries = sorted(os.listdir(p))
    except OSError as exc:
        raise _os_error(p, exc, folder=True) from None
    own = [e for e in entries if e in markers]
    others = [e for e in entries if e not in (MARKER,)]
    if not others:
        return p
    if not own:
        raise _error(
            f"{p} holds files vistkit did not write ({_some(others)}); give a new or empty folder (vistkit never "
            "writes into a folder it did not make)"
        )
    listed = marker_files(p) if whole else None
    added = [] if listed is None else [e for e in others if e not in listed]
    if added:  # the user's notes put into an earlier report: replacing the folder would delete them
        raise _error(
            f"{p} holds an earlier vistkit output and files vistkit did not write there ({_some(added)}); "
            "replacing the folder would delete them, so move them out of it or choose another folder"
        )
    if not force:
        raise _error(f"{p} holds an earlier vistkit output; pass --force to replace it, or choose another folder")
    return p


def _some(names: Sequence[str]) -> str:
    """The first three names, then how many more."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


_MARKER_FILES = "files: "

def _write_marker(folder: Path, files: Sequence[str] | None = None) -> None:
    """Write ``folder``'s `MARKER`; ``files``: the names vistkit put into it (`replaced_folder`), on a last line
    ``files: ["a.csv", ...]`` (JSON, ASCII), so that ``--force`` can tell them from files added later."""
    from vistkit import __version__

    text = f"written by vistkit {__version__}; vistkit replaces this folder's files only with --force\n"
    if files is not None:
        text += _MARKER_FILES + json.dumps(sorted(files)) + "\n"
    (folder / MARKER).write_text(text, encoding="utf-8")


def marker_files(folder: str | Path) -> list[str] | None:
    """The names that vistkit wrote into ``folder`` as its `MARKER` lists them, or None where it lists none (a
    folder filled bit by bit, an older vistkit, a marker not vistkit's): such a folder is judged by its marker
    alone."""
    try:
        lines = (Path(folder) / MARKER).read_text(encoding="utf-8").splitlines()
        value = json.loads(lines[-1][len(_MARKER_FILES) :]) if lines[-1].startswith(_MARKER_FILES) else None
    except (OSError, UnicodeError, ValueError, IndexError):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def probe_writable(path: str | Path) -> None:
    """Create and remove a temporary file where ``path`` (a file or a folder to be written) will go, so that a
    read-only or missing folder is reported before any work is done (root ignores permission bits, not a
    read-only file system). Devices and pipes are left alone."""
    p = Path(path)
    if _is_stream(p):
        return
    folder = p if p.is_dir() else (p.parent if str(p.parent) else Path("."))
    try:
        with _signals_held():  # never left behind by an interruption
            fd, name = tempfile.mkstemp(dir=folder, prefix=".vistkit-probe-", suffix=".tmp")
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        raise _os_error(p, exc, folder=p.is_dir()) from None


def prepare_folder(path: str | Path, *, force: bool | None = None, markers: Sequence[str] = (MARKER,)) -> Path:
    """`check_output_folder`, then create the folder and its marker file; returns the folder."""
    p = check_output_folder(path, force=force, markers=markers)
    try:
        if not p.exists():
            p.mkdir()
            _note_folder(p, made=True)
        if not (p / MARKER).exists():
            _write_marker(p)
    except OSError as exc:
        raise _os_error(p / MARKER if p.exists() else p, exc, folder=p.exists()) from None
    return p


@contextlib.contextmanager
def replaced_folder(
    path: str | Path, *, force: bool | None = None, markers: Sequence[str] = (MARKER,)
) -> Iterator[Path]:
    """An output folder written whole (a report): `check_output_folder`, then a new hidden folder beside it to
    fill in the block. When the block ends the new folder takes the name: an earlier vistkit folder is first
    moved aside (and removed after), so that no file of the old report stays among the new one's, and an
    interruption leaves the old report or the new one, never a mix (between the two renames, the old one waits
    beside it as ``.NAME.old-*``). If the block fails, the new folder is removed and the old one is untouched
    (a converted model replaced with ``--force`` on a full disk stays loadable). ``markers``: what marks a folder
    as vistkit's (`MODEL_MARKERS` for a model folder).
    A file that the running command reads inside the folder is refused first (replacing the folder would
    delete it)."""
    p = check_output_folder(path, force=force, markers=markers, whole=True)
    p = Path(os.path.realpath(p)) if p.is_symlink() else Path(os.path.abspath(p))  # a link stays: its folder goes
    if Path(os.getcwd()).resolve().is_relative_to(p.resolve()):
        raise _error(
            f"{path} is the current folder (or holds it), and this output (a report, a model) replaces its folder "
            "whole; give a new folder name for it"
        )
    if p.is_dir():
        for inp in current_policy().inputs:
            if os.path.lexists(inp) and _inside(Path(inp), str(p)):
                raise _error(
                    f"{inp} is inside {path}, which this command replaces whole; move that input out of the "
                    "folder or choose another output folder"
                )
    parent = p.parent if str(p.parent) else Path(".")
    try:
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{p.name}.new-"))
        _note_folder(tmp, made=True)  # the rename keeps its inode: the folder under the final name is this command's
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0o700; a report is as readable as any folder
    except OSError as exc:
        raise _os_error(p, exc, folder=True) from None
    old: Path | None = None
    try:
        prepare_folder(tmp, force=True)
        try:
            with _write_faults(p, folder=True):
                yield tmp
        except OutputError as exc:  # a file of the report: named where it was to go, not in the hidden folder
            if str(tmp) not in str(exc):
                raise
            raise _error(str(exc).replace(str(tmp), str(path).rstrip(os.sep))) from None
        try:
            _write_marker(tmp, [e for e in os.listdir(tmp) if e != MARKER])  # what --force may replace later
            _fsync_files(tmp)
            with _signals_held():
                # judged as at the start: a folder made meanwhile, files the user put into the old one meanwhile
                check_output_folder(p, force=force, markers=markers, whole=True)
                if p.exists():
                    _take_mode(tmp, p)  # a replaced folder keeps its permissions (a private report stays private)
                    old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{p.name}.old-"))
                    os.replace(p, old)  # an empty folder is replaced by the rename
                os.replace(tmp, p)
        except OSError as exc:
            if old is not None and not p.exists():  # put the old folder back
                with contextlib.suppress(OSError):
                    os.replace(old, p)
                    old = None
            raise _os_error(p, exc, folder=True) from None
        _fsync_folder(parent)
    finally:
        with _signals_held():  # a second Ctrl-C or SIGTERM does not cut the cleanup short
            shutil.rmtree(tmp, ignore_errors=True)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- writing
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _umask_mode() -> int:
    return 0o666 & ~_umask()


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_files(folder: Path) -> None:
    """Flush every file under ``folder`` to disk (before it is renamed into place)."""
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())


_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")

_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


@contextlib.contextmanager
def _write_faults(target: Path, *, folder: bool = False) -> Iterator[None]:
    """A machine fault while the block writes ``target`` (a full disk, a read-only or failing one) as one
    sentence naming it (`_os_error`), also when the library writing it stumbled over it into another error
    (matplotlib's PDF writer answers a full disk with an AttributeError raised while handling it) or says it in
    its own error (safetensors: "I/O error: No space left on device (os error 28)"); any other error as it is."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, OutputError):
            raise
        cause: BaseException | None = exc
        for _ in range(8):  # the error, then what it was raised while handling
            if cause is None:
                break
            if isinstance(cause, OSError) and cause.errno in _WRITE_ERRNOS:
                raise _os_error(target, cause, folder=folder) from None
            # a library written in Rust (safetensors, tokenizers) says the OS error in its text: "(os error 28)"
            code = _RUST_OS_ERROR.search(str(cause))
            if code is not None and int(code.group(1)) in _WRITE_ERRNOS:
                raise _os_error(target, OSError(int(code.group(1)), str(cause)), folder=folder) from None
            cause = cause.__cause__ or cause.__context__
        raise


#: in the name of a temporary file (``.out.csv.partial-k2j3h4.tmp``): what a ``kill -9`` in the middle of a write
#: leaves behind is hidden, says it is partial, and ends in ``.tmp``, so no reader takes it for a table
TEMP_MARK = "partial-"


def _take_mode(tmp: Path, target: Path) -> None:
    """Give the new file ``tmp`` the permissions ``target`` will have: an existing file's own (its owner and group
    too, where this process may set them: root replacing a user's file leaves it the user's), so a replaced output
    is as private or as shared as before, never more writable; setuid, setgid and sticky bits are not carried over
    (a table is no program). A new file gets what a plain ``open`` gives under the umask."""
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        os.chmod(tmp, _umask_mode())
        return
    if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.chown(tmp, st.st_uid, st.st_gid)
    os.chmod(tmp, stat.S_IMODE(st.st_mode) & 0o777)


#: what ``link`` says on a file system without hard links (FAT: EPERM; some network or FUSE ones)
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV, errno.EMLINK}


def _link_new(tmp: Path, target: Path) -> bool:
    """Put ``tmp`` under the name ``target`` only if that name is still free (no ``--force``): a hard link fails
    when the name is taken, so a file made there while the command ran (another run, the user) is never replaced.
    True when done; False where the file system has no hard links (the caller renames, the name checked just
    before)."""
    try:
        os.link(tmp, target)
    except OSError as exc:
        taken = isinstance(exc, FileExistsError) or (exc.errno in _NO_HARD_LINKS and os.path.lexists(target))
        if taken:
            raise _error(
                f"{target} was created while this command ran (it did not exist when the command started) and is left "
                "as it is; pass --force to overwrite it, or choose another output file"
            ) from None
        if exc.errno not in _NO_HARD_LINKS:  # a full disk, an I/O error: said as such by the caller
            raise
        return False
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return True


@contextlib.contextmanager
def output_path(path: str | Path, *, force: bool | None = None, private: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` for a library that wants a file name (matplotlib, safetensors): fill it
    in the block; it is then flushed to disk and renamed to ``path`` (removed if the block fails). ``private``:
    the file is its owner's only (0600, whatever the umask or a replaced file's mode), for secrets such as
    invite tokens."""
    target = check_output(path, force=force)
    if _is_stream(target):
        raise _error(f"{target} is a device or a pipe; give a regular file name for this output")
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.{TEMP_MARK}", suffix=".tmp")
        try:  # mkstemp's 0600 goes through the umask: under umask 777 the file could not be opened again to fill
            if hasattr(os, "fchmod"):  # POSIX (Windows has no modes to restore)
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _os_error(target, exc) from None
    tmp = Path(tmp_name)
    try:
        with _write_faults(target):
            yield tmp
        policy = current_policy()
        clobber = policy.force if force is None else force
        try:
            with open(tmp, "rb") as fh:  # before the chmod: a mode without read (umask 777) would refuse it
                os.fsync(fh.fileno())
            with _signals_held():
                if private:
                    os.chmod(tmp, 0o600)
                else:
                    _take_mode(tmp, target)
                _refuse_inputs(target, policy)
                _refuse_live_database(target)
                if clobber or not _link_new(tmp, target):
                    os.replace(tmp, target)
        except OSError as exc:
            raise _os_error(target, exc) from None
        _fsync_folder(parent)
    finally:
        with _signals_held(), contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def files_into(folder: str | Path) -> Iterator[Path]:
    """A temporary folder inside ``folder`` (an output folder already prepared) for a library that saves several
    files at once (``save_pretrained``): fill it in the block; each file is then flushed and renamed into
    ``folder``, so a crash never leaves half a file there (the temporary folder is removed either way)."""
    target = Path(folder)
    try:
        tmp = Path(tempfile.mkdtemp(dir=target, prefix=".saving-"))
    except OSError as exc:
        raise _os_error(target, exc, folder=True) from None
    try:
        with _write_faults(target, folder=True):
            yield tmp
        try:
            _fsync_files(tmp)
            for f in sorted(tmp.rglob("*")):
                dest = target / f.relative_to(tmp)
                if f.is_dir():
                    dest.mkdir(exist_ok=True)
                else:
                    os.replace(f, dest)
        except OSError as exc:
            raise _os_error(target, exc, folder=True) from None
        _fsync_folder(target)
    finally:
        with _signals_held():
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def open_output(
    path: str | Path,
    *,
    binary: bool = False,
    encoding: str = "utf-8",
    newline: str | None = None,
    force: bool | None = None,
    private: bool = False,
) -> Iterator[IO[Any]]:
    """A file object that becomes ``path`` when the block ends without an error (temp file + fsync + rename; see
    module doc). ``-`` is standard output, and so is a name of the file stdout goes to (``/dev/stdout``: written
    through stdout itself, so that it does not overwrite what the command prints there); a device or a pipe is
    written in place. ``private``: as `output_path`'s."""
    if is_standard_output(path):
        refuse_stdout_input()
        stream: IO[Any] = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    target = check_output(path, force=force)
    mode = "wb" if binary else "w"
    # errors: a file name that is not UTF-8 (kept by Python as lone surrogates) written into a report's command
    # line stopped the report with a UnicodeEncodeError; it is written as ``\\udcff``, so the file stays UTF-8
    text_kwargs: dict[str, Any] = (
        {} if binary else {"encoding": encoding, "newline": newline, "errors": "backslashreplace"}
    )
    if _is_stream(target):
        try:
            fd = _process_fd(target)
            fh = open(target, mode, **text_kwargs) if fd is None else os.fdopen(os.dup(fd), mode, **text_kwargs)
        except OSError as exc:
            raise _os_error(target, exc) from None
        try:
            yield fh
            fh.flush()
            fh.close()
        except OSError as exc:
            with contextlib.suppress(OSError):
                fh.close()
            if exc.errno in _WRITE_ERRNOS:
                raise _os_error(target, exc) from None
            raise
        except BaseException:
            with contextlib.suppress(OSError):
                fh.close()
            raise
        return
    with output_path(target, force=force, private=private) as tmp:
        with _write_faults(target), open(tmp, mode, **text_kwargs) as fh:
            yield fh
            fh.flush()


def write_text(
    path: str | Path, text: str, *, force: bool | None = None, newline: str | None = None, private: bool = False
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through `open_output`; returns the path."""
    with open_output(path, force=force, newline=newline, private=private) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes, *, force: bool | None = None) -> Path:
    """Write ``data`` to ``path`` through `open_output`; returns the path."""
    with open_output(path, binary=True, force=force) as fh:
        fh.write(data)
    return Path(path)


@contextlib.contextmanager
def open_csv_output(path: str | Path, *, force: bool | None = None, **kwargs: Any) -> Iterator[CsvWriter]:
    """A neutralising `CsvWriter` on `open_output` (UTF-8, no newline translation)."""
    with open_output(path, newline="", force=force) as fh:
        yield csv_writer(fh, **kwargs)


def write_csv_rows(
    path: str | Path, columns: Sequence[Any], rows: Iterable[Sequence[Any]], *, force: bool | None = None
) -> Path:
    """A header and rows as CSV through the one writer; returns the path."""
    with open_csv_output(path, force=force) as w:
        w.writerow(columns)
        w.writerows(rows)
    return Path(path)


def copy_file(src: str | Path, dst: str | Path, *, force: bool | None = None) -> Path:
    """Copy ``src`` to ``dst`` through `open_output` (atomic)."""
    import shutil

    with open(src, "rb") as fin, open_output(dst, binary=True, force=force) as fout:
        shutil.copyfileobj(fin, fout)
    return Path(dst)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for library writers: an `OSError` escaping ``func`` becomes one `OutputError` naming its first
    argument (the path written)."""
    import functools

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OutputError:
            raise
        except OSError as exc:
            target = exc.filename or (args[0] if args else "the output")
            raise _os_error(target, exc) from None

    return wrapper
