"""Readers for every VIST story format, and writers for JSONL, CSV and challenge JSON.

Formats (``format=`` name, auto-detected from the content when not given):

- ``sis``: VIST SIS json: ``{"annotations": [[storylet], ...]}`` or a flat list of storylets under
  ``annotations``. A story = its storylets sorted by ``worker_arranged_photo_order``; text = the storylets' ``text``
  joined by one space (as the 2018 challenge's ``getNormalizedStoryText``); sentences = the storylets.
- ``storylets``: a bare JSON list of storylet records (e.g. PR-VIST's ``PR_VIST.json.zip``), read like ``sis``.
  ``field="predicted_story"`` reads PR-VIST's generated story instead of the human one: a field equal on every
  storylet of every story is one text per story; one that differs within any story is a sentence per storylet.
- ``challenge``: the VIST-challenge submission (``output_stories`` with album_id, photo_sequence,
  story_text_normalized).
- ``story-dict``: ``{story_id: text}`` (dHM, GROOViST).
- ``tapm``: ``{"album_p1_p2_p3_p4_p5": text}``; ``tapm-nested``: ``{album: {"p1_p2_p3_p4_p5": text}}``.
- ``arel``: ``{album_id: [text, ...]}`` (one or several stories per album; AREL predictions and references);
  forced (``format="arel"``), ``{album_id: text}`` too.
- ``jsonl``: one JSON object per line with ``text`` (or ``story``) and any of ``story_id``, ``photo_ids`` (list or
  ``-``-joined), ``album_id``, ``sentences``, ``system``.
- ``csv``: a header row with the same column names (``photo_ids`` ``-``-joined; ``sentences`` ``|||``-joined).
- a JSON list of JSONL's records, or one such record alone (``{"story_id": "1", "text": ...}``: one story, not a
  ``story-dict`` of its field names).

``.zip`` and ``.gz`` files (any letter case: ``.ZIP``, ``.GZ``) are opened transparently. JSONL and CSV stream line
by line.
"""

from __future__ import annotations

import csv
import errno
import gzip
import io
import itertools
import json
import os
import re
import stat
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vistkit.data.output import restore_cell
from vistkit.data.story import ID_EDGE_SPACES, Story, StorySet, sequence_key
from vistkit.errors import InputError, VistkitError

FORMATS = ("sis", "storylets", "challenge", "story-dict", "tapm", "tapm-nested", "arel", "jsonl", "csv")

# album_photo1_..._photoN with numeric Flickr ids (so VWP keys like "tt0104348_0007_6;2" stay story ids)
_TAPM_KEY = re.compile(r"^\d+(?:_\d+){2,}$")
_READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error)


# --------------------------------------------------------------------------------------------------- opening
ENCODING = "utf-8-sig"  # UTF-8, with or without the byte-order mark Excel and many Windows tools write


def shown_names(names: Iterable[str], *, limit: int = 12, none: str = "none") -> str:
    """Column or member names for an error message: at most ``limit``, each shortened, control characters
    escaped (a header that is really one huge line of data must not flood the terminal)."""
    names = list(names)

    def short(name: str) -> str:
        text = name if name.isprintable() else repr(name)[1:-1]
        return text if len(text) <= 40 else text[:37] + "..."

    shown = ", ".join(short(n) for n in names[:limit]) or none
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def input_path(path: Any, what: str = "a file") -> str:
    """``path`` (a ``str``, a `pathlib.Path` or any ``os.PathLike``; bytes are decoded as the file system does) as
    text with a leading ``~`` expanded, or one `InputError` naming what is accepted: another type (an int, None, a
    list of paths, stories themselves), an empty path, or a path no file can have (a NUL character, a lone UTF-16
    surrogate)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        hint = (
            "; for stories already in memory build a StorySet of Story objects"
            if isinstance(path, list | tuple | dict | StorySet)
            else ""
        )
        raise InputError(
            f"{what} is named by a path (a str or pathlib.Path), not {type(path).__name__}{hint}"
        )
    if not path:
        raise InputError(f"the path of {what} is empty; name a file")
    if "\x00" in path:
        raise InputError(f"the path {path!r:.80} holds a NUL character, which no file name can hold")
    try:
        os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise InputError(
            f"the path {path!r:.80} holds U+{ord(path[exc.start]):04X} (half of a UTF-16 surrogate pair), which no "
            "file name can hold; give the whole character"
        ) from None
    if path.startswith("~"):  # `--images=~/photos`: no shell expands a ~ after `=` (model paths expand it too)
        path = os.path.expanduser(path)  # an unknown ~user stays as written, and is then "no such file"
    return path


#: where ``ARCHIVE.zip:MEMBER`` splits: ``.zip:`` in any letter case (``ARCHIVE.ZIP:MEMBER`` as well)
_ZIP_COLON = re.compile(r"\.zip:", re.IGNORECASE | re.ASCII)


def is_zip_name(path: str | Path) -> bool:
    """Whether ``path``'s name ends in ``.zip``, in any letter case (``.ZIP`` too): opened as a zip archive."""
    return Path(path).suffix.lower() == ".zip"


def split_member(path: str | Path) -> tuple[Path, str | None]:
    """``ARCHIVE.zip:MEMBER`` -> ``(ARCHIVE.zip, MEMBER)`` (``.zip`` in any letter case: ``ARCHIVE.ZIP:MEMBER``);
    any other path -> ``(path, None)``.

    A path that exists as given is never split (a file may have ``.zip:`` in its name).
    """
    text = input_path(path)
    p = Path(text)
    if p.exists():
        return p, None
    found = list(_ZIP_COLON.finditer(text))
    if not found:
        return p, None
    last = found[-1]  # the last ``.zip:``, as rpartition finds it
    return Path(text[: last.start() + 4]), text[last.end() :]


def is_input_file(path: str | Path) -> bool:
    """True when ``path`` names something that exists and is not a folder, or ``ARCHIVE.zip:MEMBER`` naming an
    existing archive: a caller then opens it with `open_binary`, which refuses what is not a regular file (a
    FIFO, a device, a socket: `open_input`) in one sentence, and checks the member."""
    p = split_member(path)[0]
    return p.exists() and not p.is_dir()


# ------------------------------------------------------------------------------------- what a path may name
#: how `open_input` opens a path: O_NONBLOCK so that opening a FIFO (or a device) can never wait for a writer;
#: O_NOCTTY so that a terminal never becomes the controlling one
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
#: the target of ``/proc/self/fd/N`` for an unnamed pipe (``cat x | ... /dev/stdin``, ``<(zcat x.gz)``)
_PIPE_LINK = re.compile(r"pipe:\[\d+\]")


#: the names of an open file descriptor (``/dev/stdin``, ``/dev/fd/0``, ``/proc/self/fd/0``): no suffix tells the
#: format of what they hold, so `read_stories` detects it from the content, as for ``-``
_FD_NAME = re.compile(r"/dev/std(?:in|out|err)|/dev/fd/\d+|/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd/\d+")


def unnamed_pipe(path: str | Path) -> bool:
    """Whether ``path`` reaches an unnamed pipe through the links of an open file descriptor (``/dev/stdin``,
    ``/dev/fd/63`` as ``<(zcat x.gz)`` gives, ``/proc/self/fd/0``): data a shell pipes in, read like ``-``. A
    named pipe (a FIFO made by ``mkfifo``) is not one."""
    current = str(path)
    for _ in range(40):  # the kernel's own limit on links in a row
        try:
            target = os.readlink(current)
        except OSError:
            return False
        if _PIPE_LINK.fullmatch(target):
            return True
        current = os.path.join(os.path.dirname(current), target)
    return False


def not_a_file(path: str | Path, mode: int, *, fix: str = "give a regular file") -> InputError | None:
    """The error for a path whose ``st_mode`` is not a regular file's (a folder, a FIFO, a device, a socket),
    ending with ``fix``; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return InputError(f"{path} is a folder; {fix}")
    if stat.S_ISFIFO(mode):
        what = "a named pipe (FIFO), not a regular file, and reading it would wait for a writer forever"
    elif stat.S_ISCHR(mode):
        what = "a character device (a terminal, or a device such as /dev/zero that never ends), not a regular file"
    elif stat.S_ISBLK(mode):
        what = "a block device (a disk), not a regular file"
    elif stat.S_ISSOCK(mode):
        what = "a socket, not a regular file"
    else:
        what = "not a regular file"
    return InputError(f"{path} is {what}; {fix}")


def open_input(path: str | Path) -> tuple[io.BufferedReader, int | None]:
    """Open the file at ``path`` to read its bytes: ``(file, size)``, size None for a pipe.

    Every user-given input goes through here. Only a regular file is opened, or an unnamed pipe reached through
    ``/dev/stdin``, ``/dev/fd/N`` or ``/proc/self/fd/N`` (`unnamed_pipe`; its reader caps what it reads). A
    missing path, a link to nothing, a link loop, a folder, a FIFO, a device, a socket and an unreadable file
    are each refused in one sentence naming ``path`` (`InputError`). The path is checked before it is opened (a
    device is never opened), opened without waiting (``O_NONBLOCK``), and what was opened checked again
    (``fstat``), so a path swapped in between is refused too.
    """
    p = Path(input_path(path))
    piped = unnamed_pipe(p)

    def check(mode: int) -> None:
        if not (piped and stat.S_ISFIFO(mode)) and (error := not_a_file(p, mode)) is not None:
            raise error

    try:
        check(os.stat(p).st_mode)
        fd = os.open(p, _OPEN_FLAGS)
    except OSError as exc:
        raise _open_error(p, exc) from None
    try:
        st = os.fstat(fd)
        check(st.st_mode)
        os.set_blocking(fd, True)  # reads wait for a pipe's data as usual; only the open must not
        return os.fdopen(fd, "rb"), (st.st_size if stat.S_ISREG(st.st_mode) else None)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise _open_error(p, exc) from None
        raise


def _open_error(p: Path, exc: OSError) -> InputError:
    """One sentence for an `OSError` from stat or open: missing, a link loop or to nothing, no permission."""
    if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
        return missing_file(p)
    if exc.errno == errno.EACCES or exc.errno == errno.EPERM:
        return InputError(f"{p}: cannot be read (permission denied); make it readable (chmod u+r) or copy it")
    return InputError(f"{p}: cannot be read ({exc.strerror or exc})")


def check_input_folder(path: str | Path, noun: str, hint: str) -> Path:
    """``path`` when it is a folder (links followed); otherwise one `InputError` naming it as ``noun`` (e.g.
    "photo folder") with ``hint`` (what to give): missing, a link to nothing or a loop, or a file (or a FIFO, a
    device) where a folder is expected."""
    p = Path(input_path(path, f"a {noun}"))
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            found = str(missing_file(p))
            found = f"{p}: no such {noun}" if found == f"{p}: no such file" else found
            raise InputError(f"{found} ({hint})") from None
        raise InputError(f"{p}: cannot be read as a {noun} ({exc.strerror or exc}; {hint})") from None
    if not stat.S_ISDIR(mode):
        kind = "a file" if stat.S_ISREG(mode) else "not a folder"
        raise InputError(f"{p} is {kind}, not a {noun} ({hint})")
    return p


# FILE:FIELD (a storylet field, e.g. predicted_story): a plain name that is not a file name
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_FILE_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".gz", ".zip")


def split_field(path: str, *, default: str = "text") -> tuple[str, str]:
    """``FILE:FIELD`` -> ``(FILE, FIELD)``; any other path -> ``(path, default)``.

    Unambiguous next to ``ARCHIVE.zip:MEMBER``: the part after the last ``:`` is a field only when it is a plain
    name (letters, digits, ``_``, ``-``, ``.``) not ending in a file suffix (``.json``, ``.jsonl``, ``.csv``,
    ``.tsv``, ``.txt``, ``.gz``, ``.zip``) and the part before is an existing file (or a member of an existing
    zip). So ``A.zip:m.json`` is a member, ``PR_VIST.json.zip:predicted_story`` a file and a field, and
    ``A.zip:m.json:predicted_story`` a member and a field. A path that exists as given is never split.
    """
    if ":" not in path or Path(path).exists():
        return path, default
    before, _, field = path.rpartition(":")
    if _FIELD_NAME.fullmatch(field) and not field.lower().endswith(_FILE_SUFFIXES) and is_input_file(before):
        return before, field
    return path, default


def _zip_member(zf: zipfile.ZipFile, p: Path, member: str | None) -> str:
    """The one member to read: the named one, else the only file in the archive (several: an error); a member
    that is itself an archive (``.zip``, ``.gz``...) is refused in one sentence (vistkit opens one level)."""
    name = _pick_member(zf, p, member)
    if name.lower().endswith(_ARCHIVE_SUFFIXES):
        raise InputError(
            f"{p}: the member {shown_names([name])!r} is itself compressed; vistkit opens one archive level, so "
            "unpack it and give the inner file"
        )
    return name


_ARCHIVE_SUFFIXES = (".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".tar", ".rar", ".zst")


def _member_key(name: str) -> str:
    """A member name as unzipping places it: a leading ``./`` or ``/`` (repeated) dropped, so ``./a.jsonl`` and
    ``a.jsonl`` are one file."""
    return _MEMBER_LEAD.sub("", name)


_MEMBER_LEAD = re.compile(r"^(?:\.?/)+")


def _same_name(p: Path, member: str, same: list[str]) -> InputError:
    """The error for ``member``, a name that ``same`` (several members of ``p``) share: which one is meant cannot
    be told (zipfile silently reads the last), so it is refused."""
    spelled = f" (as {shown_names(same, limit=4)})" if len(set(same)) > 1 else ""
    return InputError(
        f"{p} holds {len(same)} members named {shown_names([member])!r}{spelled}, and vistkit cannot tell which one "
        "to read; repack the archive with a distinct name for each file"
    )


#: files that macOS (Finder's .DS_Store, ``._NAME`` AppleDouble forks, ``Icon\r``) and Windows (Thumbs.db,
#: desktop.ini) leave in folders, and so in a zipped folder: never the file to read when none is named
_SYSTEM_FILES = frozenset({".ds_store", "thumbs.db", "ehthumbs.db", "desktop.ini", "icon\r"})


def _system_file(name: str) -> bool:
    """Whether the zip member ``name`` is a file the system leaves in folders (`_SYSTEM_FILES`, ``._NAME``)."""
    base = re.split(r"[/\\]", name)[-1]
    return base.lower() in _SYSTEM_FILES or base.startswith("._")


def _pick_member(zf: zipfile.ZipFile, p: Path, member: str | None) -> str:
    names = [n for n in zf.namelist() if not n.startswith("__MACOSX") and not n.endswith("/")]
    unsafe = [n for n in names if n.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", n)]
    counts = Counter(_member_key(n) for n in names)

    def twins(name: str) -> list[str]:
        return [n for n in names if _member_key(n) == _member_key(name)]

    if member is not None:
        if member not in names:
            listed = shown_names(names, limit=10, none="no file")
            raise InputError(f"{p} has no member {member!r}; it holds {listed}")
        if member in unsafe:
            raise InputError(
                f"{p}: member {shown_names([member])!r} has an unsafe name (absolute or with '..'); rename it"
            )
        if counts[_member_key(member)] > 1:
            raise _same_name(p, member, twins(member))
        return member
    if not names:
        raise InputError(f"{p}: the zip archive holds no file")
    if system := [n for n in names if _system_file(n)]:  # a folder zipped by Finder or Explorer: not a choice
        names = [n for n in names if not _system_file(n)]
        if not names:
            raise InputError(
                f"{p}: the zip archive holds no file but the system's own ({shown_names(system, limit=4)}, which "
                "macOS or Windows leave in folders); zip the story file itself"
            )
        unsafe = [n for n in unsafe if n in names]
        counts = Counter(_member_key(n) for n in names)
    if unsafe:
        raise InputError(
            f"{p}: member name {shown_names(unsafe[:1])!r} is unsafe (absolute or with '..'); repack the archive"
        )
    if len(names) > 1:
        single = [n for n in names if counts[_member_key(n)] == 1]
        if not single and len(counts) == 1:  # one name, stored several times
            raise _same_name(p, names[0], names)
        if not single:
            raise InputError(
                f"{p} holds several files, each name more than once ({shown_names(names, limit=10)}), and vistkit "
                "cannot tell which to read; repack the archive with a distinct name for each file"
            )
        twice = [n for n in dict.fromkeys(_member_key(n) for n in names) if counts[n] > 1]
        unusable = (
            f" ({shown_names(twice, limit=4)} appear{'s' if len(twice) == 1 else ''} more than once and cannot be "
            "chosen: repack the archive to read them)"
            if twice
            else ""
        )
        example = f", e.g. {p.name}:{shown_names(single[:1])}" if single else ""
        raise InputError(
            f"{p} holds several files ({shown_names(names, limit=10)}); choose one as {p.name}:MEMBER{example}"
            f"{unusable}"
        )
    return names[0]


def missing_file(path: str | Path) -> InputError:
    """The error for a path that cannot be found: "no such file", or what is really wrong (a symbolic link
    loop, a link to nothing, a parent that is a file)."""
    if str(path) == "-":  # a verb that does not read standard input
        return InputError(
            "- (standard input) is not read here: give the file's name (score, compare and validate read -)"
        )
    p = Path(path)
    try:
        p.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return InputError(f"{p}: a symbolic link loop (a link that leads back to itself); fix or remove the link")
        if p.is_symlink():
            return InputError(f"{p}: a symbolic link to {os.readlink(p)!r}, which does not exist")
        if exc.errno == errno.ENOTDIR:
            return InputError(f"{p}: no such file (a folder on its path is a file)")
        if (near := _stray_edges(str(path))) is not None:
            return near
    return InputError(f"{p}: no such file")


#: what a path picks up around it on its way from a list or a clipboard: spaces, CR/LF, tabs, quotes
_EDGE_JUNK = " \t\r\n\v\f\u00a0\u200b\ufeff\"'"


def _stray_edges(text: str) -> InputError | None:
    """The error for a missing path that exists once the spaces, line ends or quotes around it are dropped
    (``s.json\r`` from a file list saved on Windows, a pasted trailing space, Windows' "Copy as path" quotes),
    naming what is in the way, with control characters escaped (a raw CR printed the rest of the message over
    the name); None when there is no such file."""
    plain = text.strip(_EDGE_JUNK)
    if not plain or plain == text or not os.path.lexists(plain):
        return None
    edges = text[: len(text) - len(text.lstrip(_EDGE_JUNK))] + text[len(text.rstrip(_EDGE_JUNK)) :]
    names = {"\r": "a carriage return", "\n": "a new line", "\t": "a tab", " ": "a space", '"': "a quote"}
    what = " and ".join(dict.fromkeys(names.get(ch.replace("'", '"'), f"U+{ord(ch):04X}") for ch in edges))
    hint = " (a file list saved on Windows?)" if "\r" in edges else ""
    return InputError(
        f"'{repr(text)[1:-1]}': no such file, but '{repr(plain)[1:-1]}' exists; the name given has {what} around "
        f"it{hint}: give '{repr(plain)[1:-1]}'"
    )


def missing_input(path: str | Path, what: str) -> InputError:
    """The error for a path `is_input_file` refused, naming ``what`` it was to be (e.g. "regions file (a CSV with
    columns image_id,bbox)"): a folder, a link to nothing or a loop (`missing_file`), else "no such WHAT"."""
    p = split_member(path)[0]
    if p.is_dir():
        return InputError(f"{p} is a folder; give the {what}")
    error = missing_file(p)
    return error if str(error) != f"{p}: no such file" else InputError(f"{p}: no such {what}")


class _Capped(io.RawIOBase):
    """A binary stream that stops with one `InputError` once more than ``limit`` bytes came out of it (an
    archive's header can lie about the size; the bytes are counted as they are inflated)."""

    def __init__(self, raw: Any, limit: int, where: str, *, also: tuple[Any, ...] = ()) -> None:
        super().__init__()
        self._raw = raw
        self._also = also  # closed after ``raw``: the archive and the file it reads (which it does not close)
        self._left = limit
        self._limit = limit
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        want = min(len(view), self._left + 1)  # one byte more than allowed tells "over the limit"
        data = self._raw.read(want)
        n = len(data)
        if n > self._left:
            from vistkit.limits import input_too_large

            raise input_too_large(self._where, self._limit)
        self._left -= n
        view[:n] = data
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            for other in self._also:
                other.close()
            super().close()


def content_name(path: str | Path) -> str:
    """The name of the file whose bytes `open_binary` reads: ``ARCHIVE.zip:MEMBER`` as given, a zip's one member
    (``stories.zip`` holding ``stories.jsonl`` -> ``stories.zip:stories.jsonl``), else the path; a zip that
    cannot be listed keeps its own name (opening it then says what is wrong)."""
    p, member = split_member(path)
    if member is not None or not is_zip_name(p) or not p.is_file():
        return str(path)
    try:
        with open(p, "rb") as fh:
            _check_zip_listing(fh, p)
            with zipfile.ZipFile(fh) as zf:
                return f"{p}:{_pick_member(zf, p, None)}"
    except (InputError, *_READ_ERRORS, RuntimeError, NotImplementedError, ValueError):
        return str(path)


#: the most files a zip vistkit reads may list, and the most bytes that list may take: a story file's zip holds a
#: few, and zipfile makes an object for each before anything is read (256 MiB of empty members: millions of them,
#: minutes and gigabytes)
ZIP_MEMBERS_MAX = 10_000
ZIP_LISTING_MAX = 16 << 20
_EOCD = struct.Struct("<4s4H2LH")  # the end of central directory record (APPNOTE 4.3.16)
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # the zip64 one (4.3.14), found through its locator (4.3.15)


def _check_zip_listing(fh: Any, p: Path) -> None:
    """Refuse the zip archive open as ``fh`` when its last record says that it lists more than `ZIP_MEMBERS_MAX`
    files, or that the list takes more than `ZIP_LISTING_MAX` bytes, before zipfile reads that list; an archive
    whose record cannot be found passes (zipfile then says what is wrong). ``fh`` is left at its start."""
    try:
        size = fh.seek(0, os.SEEK_END)
        tail_size = min(size, _EOCD.size + 0xFFFF)  # the record, then a comment of at most 65,535 bytes
        fh.seek(size - tail_size)
        tail = fh.read(tail_size)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return
        entries, listing = _EOCD.unpack_from(tail, at)[4:6]
        if (entries == 0xFFFF or listing == 0xFFFFFFFF) and at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07":
            fh.seek(struct.unpack_from("<Q", tail, at - 12)[0])
            record = fh.read(_EOCD64.size)
            if len(record) == _EOCD64.size and record[:4] == b"PK\x06\x06":
                entries, listing = _EOCD64.unpack(record)[7:9]
    except (OSError, ValueError, struct.error):
        return
    finally:
        try:
            fh.seek(0)
        except (OSError, ValueError):
            pass
    if entries > ZIP_MEMBERS_MAX or listing > ZIP_LISTING_MAX:
        count = f"{entries:,} files" if entries > ZIP_MEMBERS_MAX else f"files in {listing:,} bytes of names"
        raise InputError(
            f"{p}: the zip archive lists {count}, over vistkit's limit of {ZIP_MEMBERS_MAX:,} files (in "
            f"{ZIP_LISTING_MAX >> 20} MiB) per archive (a zipped story file holds one); give the file itself, or "
            "a zip holding only it"
        )


def open_binary(path: str | Path, *, max_bytes: int | None = None) -> io.BufferedReader:
    """The decompressed bytes of a file (see `open_text`), capped at ``max_bytes`` (default:
    `vistkit.limits.max_input_bytes`); what is not a regular file (a FIFO, a device, a folder ...) is refused
    before anything is read (`open_input`)."""
    from vistkit.limits import input_too_large, max_input_bytes

    p, member = split_member(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    fh, size = open_input(p)
    zf: zipfile.ZipFile | None = None
    try:
        if is_zip_name(p) or member is not None:
            try:
                _check_zip_listing(fh, p)
                zf = zipfile.ZipFile(fh)
            except zipfile.BadZipFile as exc:
                fh.seek(0)  # a zip may start with other bytes (a self-extracting one): only a failed one is looked at
                _check_named_kind(fh, p, (b"PK",), "a zip archive")
                if bytes(fh.peek(4)[:4]) == b"PK\x03\x04" and "not a zip file" in str(exc):  # no list of files
                    raise InputError(
                        f"{p}: cannot be read: it starts as a zip archive, but its end, which lists the files inside, "
                        f"is missing, so the file is cut short{_CUT_SHORT}"
                    ) from None
                raise
            name = _zip_member(zf, p, member)
            _check_member_method(p, zf.getinfo(name))
            where = f"{p}:{name}"
            if zf.getinfo(name).file_size > limit:  # what the header declares; the stream is counted too
                raise input_too_large(where, limit)
            return io.BufferedReader(_Capped(zf.open(name), limit, where, also=(zf, fh)))
        if p.suffix.lower() == ".gz":
            _check_named_kind(fh, p, (b"\x1f\x8b",), "gzip-compressed")
            return io.BufferedReader(_Capped(gzip.GzipFile(fileobj=fh, mode="rb"), limit, str(p), also=(fh,)))
        if size is not None and size > limit:
            raise input_too_large(p, limit)
        return io.BufferedReader(_Capped(fh, limit, str(p)))
    except BaseException as exc:
        if zf is not None:
            zf.close()
        fh.close()
        if isinstance(exc, zipfile.BadZipFile):
            raise InputError(f"{p}: not a valid zip archive ({exc})") from None
        if isinstance(exc, OSError):
            raise InputError(f"{p}: cannot be read ({exc.strerror or exc})") from None
        if isinstance(exc, RuntimeError | NotImplementedError):  # zip: encrypted or unknown compression
            raise InputError(f"{p}: cannot be read ({exc})") from None
        raise


#: the compression methods of zip members that Python's zipfile inflates (bzip2 and LZMA when Python has them)
_ZIP_METHODS = frozenset((zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA))
#: the other methods of the zip specification (APPNOTE 4.4.5) by name, as errors name them
_ZIP_METHOD_NAMES = {
    1: "Shrink",
    2: "Reduce",
    3: "Reduce",
    4: "Reduce",
    5: "Reduce",
    6: "Implode",
    9: "Deflate64 (Enhanced Deflate)",
    10: "PKWARE DCL Implode",
    18: "IBM TERSE",
    19: "IBM LZ77",
    20: "Zstandard",
    93: "Zstandard",
    94: "MP3",
    95: "xz",
    96: "JPEG",
    97: "WavPack",
    98: "PPMd",
}
#: what to do with an archive whose member cannot be read
_REZIP = (
    "unzip it (7-Zip, or Windows' Extract All) and give the file, or zip it again with the standard Deflate method "
    "(zip ARCHIVE.zip FILE, or 7-Zip's 'Deflate' method)"
)


def _check_member_method(p: Path, info: zipfile.ZipInfo) -> None:
    """Refuse a zip member that Python cannot read, naming what it is and what to do: an encrypted one (a password;
    WinZip's AES, which 7-Zip and Windows write) and one compressed with a method zipfile does not inflate
    (Deflate64, which Windows' Compressed Folders writes for large files; PPMd, Zstandard ... from 7-Zip). Python
    said only "That compression method is not supported" or "... is encrypted, password required"."""
    name = shown_names([info.filename])
    if info.flag_bits & 0x1:
        how = "with AES (WinZip AES, as 7-Zip writes it)" if info.compress_type == 99 else "with a password"
        raise InputError(
            f"{p}: the member {name!r} is encrypted {how}, and vistkit does not open encrypted archives; unzip it "
            "with its password and give the file (or zip it again without a password)"
        )
    if info.compress_type not in _ZIP_METHODS:
        method = _ZIP_METHOD_NAMES.get(info.compress_type)
        what = f"the {method} method" if method else f"compression method {info.compress_type}"
        raise InputError(
            f"{p}: the member {name!r} is compressed with {what}, which Python's zip reader does not inflate; {_REZIP}"
        )


#: why a file is cut short, and what to do
_CUT_SHORT = " (an interrupted download or copy?); download or copy it again"


def read_error(path: str | Path, exc: BaseException) -> InputError:
    """One sentence for an error met while reading (and inflating) ``path``: compressed data that ends too early
    (a ``.gz`` or ``.zip`` cut short: Python said "Compressed file ended before the end-of-stream marker was
    reached") or that is damaged (a bad CRC, zlib's "invalid distance too far back"), else what the system said."""
    if isinstance(exc, EOFError):
        return InputError(
            f"{path}: cannot be read: its compressed data ends too early, so the file is cut short{_CUT_SHORT}"
        )
    if isinstance(exc, zlib.error | zipfile.BadZipFile | gzip.BadGzipFile):
        return InputError(
            f"{path}: cannot be read: its compressed data is damaged ({_first_clause(exc)}); download or copy it again"
        )
    if isinstance(exc, OSError):
        return InputError(f"{path}: cannot be read ({exc.strerror or exc})")
    return InputError(f"{path}: cannot be read ({exc})")


def _check_named_kind(fh: io.BufferedReader, p: Path, magic: tuple[bytes, ...], what: str) -> None:
    """Refuse a file whose name says it is ``what`` (``.gz``, ``.zip``) but whose first bytes are none of ``magic``
    (a plain JSONL named ``.jsonl.gz``): the archive library's own words ("Not a gzipped file (b'{"')") do not say
    that the name is at fault. An empty file passes (it holds nothing, said later)."""
    head = bytes(fh.peek(16)[:16])
    if not head or head.startswith(magic):
        return
    try:
        text = head.decode("utf-8")
        start = f"'{_printable(text)}'" if text.isprintable() else repr(head)
    except UnicodeDecodeError:
        start = repr(head)
    problem = "not a valid zip archive" if what == "a zip archive" else "cannot be read"
    raise InputError(
        f"{p}: {problem}: the name ends in {p.suffix}, but the file is not {what} (it starts with {start}); rename "
        f"it without {p.suffix}"
    )


def open_text(path: str | Path, *, newline: str | None = None, max_bytes: int | None = None) -> io.TextIOBase:
    """Open a text file (UTF-8, a leading BOM skipped), looking inside ``.zip`` and ``.gz`` (any letter case).

    A zip must hold one file, or the member is named as ``ARCHIVE.zip:MEMBER``. ``newline`` as for `open`
    (CSV needs ``""`` so line breaks inside quoted fields are kept). Content that is no text at all (a zip, gzip,
    bzip2, xz, zstd, 7z or tar archive, UTF-16/32: `binary_kind`) and text starting with two byte-order marks
    are refused here, from the first bytes (`check_head`); other decoding errors surface when reading: read
    through `read_text` or `iter_lines` (or `open_csv`) to turn them into one clear `InputError`. Reading past
    ``max_bytes`` decompressed bytes (default: `vistkit.limits.max_input_bytes`) raises one `InputError`.
    """
    fh = open_binary(path, max_bytes=max_bytes)
    try:
        head = fh.peek(HEAD_BYTES)[:HEAD_BYTES]
        check_head(head, path)
    except BaseException as exc:
        fh.close()
        if isinstance(exc, _READ_ERRORS):  # a corrupt .gz/.zip fails once read
            raise read_error(path, exc) from None
        raise
    return io.TextIOWrapper(fh, encoding=ENCODING, newline=newline)


#: how many first bytes tell what a file is (`binary_kind`: a tar header is 512 bytes; a gzip'd one is inflated)
HEAD_BYTES = 4096

#: what files that are not UTF-8 text are, and what to do (`binary_kind`)
_UTF32 = "UTF-32 text (it starts with a UTF-32 byte-order mark); save it as UTF-8"
_UTF16 = "UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"
_KINDS = {
    "utf32": _UTF32,
    "utf16": _UTF16,
    "zip": "a zip archive; vistkit opens a zip whose name ends in .zip (rename it so), or unzip it first if it was "
    "zipped twice",
    "gzip": "gzip-compressed data; vistkit opens gzip data whose name ends in .gz (rename it so), or unpack it first "
    "if it was compressed twice",
    "tar": "a tar archive (a bundle of files); extract it (tar xf FILE) and give the story file inside",
    "tar.gz": "a tar archive compressed with gzip (.tar.gz, .tgz: a bundle of files); extract it (tar xzf FILE) and "
    "give the story file inside",
    "bzip2": "bzip2-compressed data, which vistkit does not open; decompress it first (bunzip2 FILE)",
    "xz": "xz-compressed data, which vistkit does not open; decompress it first (unxz FILE)",
    "zstd": "zstd-compressed data, which vistkit does not open; decompress it first (unzstd FILE)",
    "7z": "a 7z archive, which vistkit does not open; extract it first (7z x FILE)",
    "rar": "a RAR archive, which vistkit does not open; extract it first (unrar x FILE)",
    "xlsx": "an Excel workbook (.xlsx), which vistkit does not read; save the sheet as CSV (in Excel: File > Save As "
    "> 'CSV UTF-8 (Comma delimited)')",
    "ooxml": "an Office document (.docx, .pptx ...), which vistkit does not read; save its table as CSV (UTF-8)",
    "ods": "an OpenDocument spreadsheet (.ods), which vistkit does not read; save the sheet as CSV (in LibreOffice: "
    "File > Save As > 'Text CSV', character set UTF-8)",
    "odf": "an OpenDocument file (.odt ...), which vistkit does not read; save its table as CSV (UTF-8)",
    "ole2": "an Excel 97-2003 workbook (.xls) or another old Office document, which vistkit does not read; save the "
    "sheet as CSV (in Excel: File > Save As > 'CSV UTF-8 (Comma delimited)')",
}
#: the first bytes of each kind: whole signatures, so that no text file matches by chance (text may start "BZh")
_MAGIC = (
    (b"\x00\x00\xfe\xff", "utf32"),
    (b"\xff\xfe\x00\x00", "utf32"),
    (b"\xff\xfe", "utf16"),
    (b"\xfe\xff", "utf16"),
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),  # a zip holding nothing
    (b"PK\x07\x08", "zip"),  # a zip written as a stream (spanned)
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "rar"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2"),  # .xls, .doc: OLE2 compound files
)
#: names of the members an Office Open XML document (.xlsx, .docx) starts with, as Excel, Word, openpyxl and
#: LibreOffice write them (a zip's local headers name each member, so they show in its first bytes)
_OOXML_MEMBERS = (b"[Content_Types].xml", b"_rels/.rels", b"docProps/")
#: bzip2: "BZh", the block size (1-9), then a block's or the end's magic number (48 bits of pi, or of sqrt(pi))
_BZIP2 = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
#: a tar header: "ustar" and its NUL (POSIX) or two spaces and a NUL (GNU) at byte 257; no text holds a NUL
_TAR_MAGIC = (b"ustar\x00", b"ustar  \x00")


def _is_tar(head: bytes) -> bool:
    return head[257:263] == _TAR_MAGIC[0] or head[257:265] == _TAR_MAGIC[1]


def _binary_code(head: bytes) -> str | None:
    """The `_KINDS` key of content starting with ``head``, or None (text, or too little to tell)."""
    code = next((code for magic, code in _MAGIC if head.startswith(magic)), None)
    if code == "zip":  # a spreadsheet or another office document is a zip too: told as what it is
        return _office_code(head) or code
    if code == "gzip":  # a .tar.gz: the first inflated bytes are a tar header
        try:
            inner = zlib.decompressobj(wbits=31).decompress(head, 512)
        except zlib.error:
            inner = b""
        return "tar.gz" if _is_tar(inner) else code
    if code is None and _BZIP2.match(head):
        return "bzip2"
    if code is None and _is_tar(head):
        return "tar"
    return code


def _office_code(head: bytes) -> str | None:
    """The `_KINDS` key of a zip starting with ``head`` that is an office document (an Excel workbook, an
    OpenDocument spreadsheet ...: their first members' names tell), or None."""
    if head[30:38] == b"mimetype":  # OpenDocument: an uncompressed first member 'mimetype' holding the type
        return "ods" if b"opendocument.spreadsheet" in head[:200] else "odf"
    if any(name in head for name in _OOXML_MEMBERS):
        return "xlsx" if b"xl/" in head else "ooxml"
    return None


def binary_kind(head: bytes) -> str | None:
    """What content starting with ``head`` (its first `HEAD_BYTES`: a tar is told at byte 257) is when it is not
    UTF-8 text, and what to do: UTF-16/32, a zip, gzip, bzip2, xz, zstd, 7z, RAR or tar archive (a gzip'd one
    too); None for anything else."""
    code = _binary_code(bytes(head))
    return None if code is None else _KINDS[code]


_TWO_BOMS = b"\xef\xbb\xbf\xef\xbb\xbf"


def check_head(head: bytes, where: str | Path) -> None:
    """Refuse content whose first bytes ``head`` (read from ``where``) say it is no UTF-8 text (`binary_kind`),
    or that starts with two UTF-8 byte-order marks (the reader skips one; the other would be part of the first
    id, column name or JSON value), each in one sentence naming ``where``."""
    if (kind := binary_kind(head)) is not None:
        raise InputError(f"{where}: not UTF-8 text but {kind}")
    if head.startswith(_TWO_BOMS):
        raise InputError(f"{where}: starts with two byte-order marks (U+FEFF); remove the second")


def _decode_error(p: Path | str, exc: UnicodeDecodeError, data: bytes | None = None) -> InputError:
    """One sentence for bytes that are not UTF-8; ``data``: the whole content when it is at hand (its first bytes
    tell a zip or bzip2 archive, which fail to decode only later on)."""
    if data is not None:
        head = bytes(data[:HEAD_BYTES])
    elif isinstance(exc.object, bytes | bytearray) and exc.start < 4:
        head = bytes(exc.object[:HEAD_BYTES])
    else:
        head = b""
    if (kind := binary_kind(head)) is not None:
        return InputError(f"{p}: not UTF-8 text but {kind}")
    # a text stream decodes in chunks, so exc.start is a place in the chunk: the content is scanned for the place
    found = _first_bad_byte(data, p)
    if found is None:  # the file cannot be read again (or changed meanwhile): what the decoder said
        return InputError(f"{p}: not UTF-8 text ({exc.reason}); save it as UTF-8 (e.g. 'CSV UTF-8' in Excel)")
    at, line, byte, reason = found
    return InputError(
        f"{p}: not UTF-8 text (line {line:,}, byte {at:,}: {reason}){cp1252_hint(byte)}; save it as UTF-8 (e.g. "
        "'CSV UTF-8' in Excel)"
    )


def cp1252_hint(byte: int) -> str:
    """`` (0xE9 is 'é' in Windows-1252 ...)`` for a byte that is not UTF-8 but a letter or sign in Windows-1252
    (what Excel's plain 'CSV' and many Windows tools write); "" for any other byte."""
    try:
        char = bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:
        return ""
    if not char.isprintable() or char.isascii():
        return ""
    return f" (0x{byte:02X} is '{char}' in Windows-1252 or Latin-1: the file is likely saved in that encoding)"


def _first_bad_byte(data: bytes | None, p: Path | str) -> tuple[int, int, int, str] | None:
    """Where the first byte that is not UTF-8 is in ``data`` (or, when None, in the decompressed content of the file
    ``p``, read again in blocks): its offset, its line, the byte and why; None when the file cannot be read again
    or holds no such byte (it changed since)."""
    try:
        if data is not None:
            return _scan_utf8([data])
        if not stat.S_ISREG(os.stat(split_member(p)[0]).st_mode):  # a pipe cannot be read again from its start
            return None
        with open_binary(p) as fh:
            return _scan_utf8(iter(lambda: fh.read(1 << 20), b""))
    except (VistkitError, *_READ_ERRORS):
        return None


def _scan_utf8(blocks: Iterable[bytes]) -> tuple[int, int, int, str] | None:
    """`_first_bad_byte` over the content given as ``blocks``."""
    offset, lines, pending = 0, 1, b""
    for block in blocks:
        chunk = pending + block
        pending = b""
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data":  # a byte no UTF-8 text holds
                return offset + exc.start, lines + chunk.count(b"\n", 0, exc.start), chunk[exc.start], exc.reason
            pending = chunk[exc.start :]  # a character cut by the block's end: decoded with the next block
            chunk = chunk[: exc.start]
        offset += len(chunk)
        lines += chunk.count(b"\n")
    if pending:  # the content ends inside a character
        return offset, lines, pending[0], "unexpected end of data"
    return None


def _decimal_text(text: str) -> bool:
    """``text`` is a whole number ``int`` reads: decimal digits only (``str.isdigit`` also passes ``²``, which
    ``int`` refuses) and no more of them than Python converts (4,300 by default)."""
    import sys

    limit = sys.get_int_max_str_digits()
    return text.isdecimal() and (limit == 0 or len(text) <= limit)


def iter_lines(fh: io.TextIOBase, path: str | Path, *, max_line: int | None = None, why: str = "") -> Iterator[str]:
    """The lines of ``fh``; a decoding or archive error becomes one `InputError` naming ``path``, and so does a
    line longer than ``max_line`` characters (when given; ``why``: what sets that limit, shown after it)."""
    try:
        if max_line is None:
            yield from fh
            return
        n = 0
        while line := fh.readline(max_line + 1):
            n += 1
            if len(line) > max_line:
                raise InputError(
                    f"{path} line {n}: longer than {max_line:,} characters, over vistkit's limit per line{why}; is "
                    "this the right file?"
                )
            yield line
    except UnicodeDecodeError as exc:
        raise _decode_error(path, exc) from None
    except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
        raise read_error(path, exc) from None


#: what sets the limit on a JSONL or CSV line (`vistkit.limits.max_line_chars`), as `iter_lines` shows it
LINE_LIMIT_WHY = " (16 characters per story character: VISTKIT_MAX_STORY_CHARS raises it)"


class BlankRun:
    """Counts the blank lines in a row a JSONL or CSV reader skips, refusing more than
    `vistkit.limits.BLANK_LINES_MAX` in one sentence (each costs a step of Python: 256 MiB of them took 76 s)."""

    def __init__(self, path: str | Path) -> None:
        from vistkit.limits import BLANK_LINES_MAX

        self.path = path
        self.limit = BLANK_LINES_MAX
        self.count = 0

    def add(self, line: int) -> None:
        """One more blank line, line ``line`` of the file."""
        self.count += 1
        if self.count > self.limit:
            raise InputError(
                f"{self.path} line {line}: more than {self.limit:,} blank lines in a row, which no story file has; "
                "is this the right file?"
            )

    def reset(self) -> None:
        """A line that is not blank."""
        self.count = 0


def read_bytes(path: str | Path) -> bytes:
    """The whole decompressed content of a file (see `open_binary`: ``.zip``/``.gz`` opened, capped at the input
    limit), every reading error one `InputError` naming ``path``."""
    with open_binary(path) as fh:
        try:
            return fh.read()
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise read_error(path, exc) from None


def read_text(path: str | Path) -> str:
    """The whole text of a file (see `open_text`), with one clear error for bytes that are not UTF-8."""
    with open_text(path) as fh:
        try:
            return fh.read()
        except UnicodeDecodeError as exc:
            raise _decode_error(path, exc) from None
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise read_error(path, exc) from None


def csv_delimiter(path: str | Path) -> str:
    """Tab for ``.tsv`` files (also inside ``.gz``/``.zip``), comma for ``.csv``; a name that says neither (no
    suffix, ``.txt``) is tab-separated when its first line that is not blank (within its first MiB) holds a tab,
    as for text piped into ``-`` (`header_delimiter`)."""
    suffix = _inner_suffix(Path(_ZIP_COLON.split(content_name(path))[-1]))
    if suffix in (".csv", ".tsv"):
        return "\t" if suffix == ".tsv" else ","
    if str(path) == STDIN or _FD_NAME.fullmatch(str(path)) or unnamed_pipe(str(path)):
        return ","  # a pipe is read once: its first line cannot be looked at twice
    try:
        with open_text(path) as fh:
            head = fh.read(1 << 20)
    except (UnicodeDecodeError, *_READ_ERRORS):
        return ","  # the reader says what is wrong with the file
    return header_delimiter(head)


def header_delimiter(text: str) -> str:
    """Tab when the first line of ``text`` that is not blank (the header row: blank lines before it are skipped)
    holds a tab, else comma."""
    found = _NOT_SPACE.search(text)
    if found is None:
        return ","
    at = found.start()
    start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
    end = line_end.start() if (line_end := _LINE_END.search(text, at)) else len(text)
    return "\t" if "\t" in text[start:end] else ","


#: the first line Excel writes (and reads) to name a CSV file's separator: ``sep=,``, ``sep=;``, ``sep=<tab>``
_EXCEL_SEP = re.compile(r"sep=([^\r\n])[\r\n]*")
_SEPARATOR_NAMES = {",": "commas", "\t": "tabs", ";": "';'"}


def _check_excel_sep(sep: str, delimiter: str, where: str) -> None:
    """Refuse Excel's ``sep=X`` line (read at ``where``) when X is not the ``delimiter`` the file is read with."""
    if sep == delimiter:
        return
    what = _SEPARATOR_NAMES.get(sep, f"'{_printable(sep)}'")
    if sep in ",\t":
        fix = "name it .tsv" if sep == "\t" else "name it .csv"
    else:
        fix = "which vistkit does not read; save it separated by commas (in Excel: 'CSV UTF-8 (Comma delimited)')"
    raise InputError(f"{where}: 'sep={_printable(sep)}' is Excel's note that the file is separated by {what}; {fix}")


def _csv_reader(lines: Iterable[str], delimiter: str) -> Any:
    """A strict `csv.reader` over ``lines`` whose cells may be as long as a line (`vistkit.limits.max_line_chars`):
    the module's own limit, 131,072 characters a cell, refused a story that the story limit allows (and JSONL
    reads) as "malformed CSV (field larger than field limit)". A cell that runs past it (a quote never closed) is
    named by `CsvFile._malformed`."""
    from vistkit.limits import max_line_chars

    if csv.field_size_limit() < (limit := max_line_chars()):
        csv.field_size_limit(limit)  # process-wide; only ever raised
    return csv.reader(lines, delimiter=delimiter, strict=True)


class CsvFile:
    """Rows of a CSV file as dicts, read through the shared decoding path (see `open_csv`).

    Nothing is dropped silently: a header naming a column twice, a row with more or fewer cells than the header
    and a quoted cell that never ends (or text after a closing quote) are refused naming the line. Lines that
    are empty or hold only spaces are skipped.
    """

    def __init__(self, fh: io.TextIOBase, path: str | Path, delimiter: str) -> None:
        from vistkit.limits import max_line_chars

        self.path = path
        self.delimiter = delimiter
        lines = iter_lines(fh, path, max_line=max_line_chars(), why=LINE_LIMIT_WHY)
        blank = BlankRun(path)
        skipped = 0  # lines before the header: blank ones (skipped, as between rows) and Excel's "sep=," line

        def filled() -> str | None:
            nonlocal skipped
            line = next(lines, None)
            while line is not None and not line.strip():
                skipped += 1
                blank.add(skipped)
                line = next(lines, None)
            return line

        first = filled()
        if first is not None and (hint := _EXCEL_SEP.fullmatch(first)) is not None:
            _check_excel_sep(hint.group(1), delimiter, f"{path} line {skipped + 1}")
            skipped += 1
            blank.reset()
            first = filled()
        #: the line of the header row (1 but after blank lines), and that line as written (a JSON object there: the
        #: file is JSONL, `jsonl_not_csv`)
        self.header_line = skipped + 1
        self.first_line = first or ""
        # the lines skipped go to the csv reader as empty lines, so that its line numbers stay the file's
        before = itertools.repeat("\n", skipped)
        self._rows = _csv_reader(itertools.chain(before, [] if first is None else [first], lines), delimiter)
        self._end = 0  # the last line read so far
        try:
            for _ in range(skipped):
                next(self._rows)
            self._end = skipped
            header: list[str] = next(self._rows, [])
        except csv.Error as exc:
            raise jsonl_not_csv(path, self.first_line, self.header_line) or self._malformed(exc) from None
        self._end = self._rows.line_num
        where = f"{path} line {self.header_line}"
        if any("\x00" in n for n in header):
            raise InputError(
                f"{where}: the header holds a NUL byte, which no CSV text holds; is the file UTF-16 (save it "
                "as UTF-8) or not a CSV file?"
            )
        self.fieldnames: list[str] = [restore_cell(n.strip()) for n in header]
        self._inside = 0  # lines inside quoted cells that read as rows of their own (`_rows_inside`)
        self._inside_first: tuple[int, int, int, str] | None = None  # the row's first and last line, the line, its text
        seen: dict[str, int] = {}
        for i, name in enumerate(self.fieldnames, start=1):
            if name and name in seen:
                raise InputError(
                    f"{where}: the header names the column {shown_names([name])!r} twice (columns "
                    f"{seen[name]} and {i}), so one of them would be ignored; rename or remove one"
                )
            seen[name] = i

    def _malformed(self, exc: csv.Error) -> InputError:
        start, end = self._end + 1, self._rows.line_num
        if "unexpected end of data" in str(exc):
            return InputError(
                f"{self.path} line {start}: a quoted cell of the row starting here is never closed (its '\"' runs "
                f"to the end of the file, line {end}); add the closing quote"
            )
        if "expected after" in str(exc):
            return InputError(
                f"{self.path} line {end}: text follows a closing quote ({exc}); quote the whole cell and double "
                "every '\"' inside it"
            )
        if "field larger than field limit" in str(exc):
            return InputError(
                f"{self.path} line {start}: a cell of the row starting here runs past line {end} and holds more than "
                f"{csv.field_size_limit():,} characters (a quote that opens the cell and is never closed?); close "
                "the quote, or double every '\"' inside a quoted cell"
            )
        return InputError(f"{self.path} line {end}: malformed CSV ({exc})")

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        """``(line number, row)`` pairs (the row's last line); keys stripped, cells restored (`restore_cell`)."""
        names = self.fieldnames
        width = len(names)
        rows = self._rows
        blank = BlankRun(self.path)
        # a row that is the header again (two files joined with cat): it would be read as data ("story_id" a
        # story id, "text" its text); only told for a header of two or more named columns, where no real row
        # matches every column name in order
        header = names if width > 1 and all(names) else None
        try:
            for row in rows:
                if len(row) != width:
                    if not row or (len(row) == 1 and not row[0].strip()):  # a blank line
                        blank.add(rows.line_num)
                        self._end = rows.line_num
                        continue
                    raise InputError(
                        f"{self.path} line {self._end + 1}: {len(row)} cell{'s' if len(row) != 1 else ''} where "
                        f"the header has {width} column{'s' if width != 1 else ''}; give every row one cell "
                        "per column (quote cells that hold the delimiter)"
                    )
                blank.reset()
                if (
                    header is not None
                    and restore_cell(row[0].strip().removeprefix("\ufeff")) == header[0]  # a second file's BOM too
                    and [restore_cell(c.strip()) for c in row[1:]] == header[1:]
                ):
                    raise InputError(
                        f"{self.path} line {self._end + 1} repeats the header row, which would be read as data "
                        "(files joined with cat, each with its header?); remove the repeated header"
                    )
                if rows.line_num > self._end + 1:  # a quoted cell holds line breaks
                    self._rows_inside(row, self._end + 1, rows.line_num)
                self._end = rows.line_num
                yield self._end, dict(zip(names, map(restore_cell, row), strict=True))
        except csv.Error as exc:
            raise self._malformed(exc) from None
        self._report_inside()

    def _rows_inside(self, row: list[str], start: int, end: int) -> None:
        """Note the lines inside the cells of ``row`` (lines ``start`` to ``end``) that read as rows of their own:
        as many cells as the header, the first shaped as the row's own first cell, an id (``7``, ``story_12``). A
        cell opened by a '"' that was meant as text (a story starting with a quote, in a file written without CSV
        quoting) runs to the next '"' that ends a cell, taking the rows in between."""
        width = len(self.fieldnames)
        first = row[0].strip()
        if width < 2 or not first:
            return
        shape = _id_shape(first)
        line_no = start
        for i, cell in enumerate(row):
            lines = _CELL_BREAK.split(cell)
            for text in lines[1:]:
                line_no += 1
                if i == 0 or self.delimiter not in text:
                    continue
                try:
                    cells = next(csv.reader([text], delimiter=self.delimiter), [])
                except csv.Error:
                    continue
                if len(cells) == width and (head := cells[0].strip()) and _id_shape(head) == shape:
                    self._inside += 1
                    if self._inside_first is None:
                        self._inside_first = (start, end, line_no, text)

    def _report_inside(self) -> None:
        """One warning for the rows `_rows_inside` found, naming the first (none when there is none)."""
        if self._inside_first is None:
            return
        from vistkit.errors import warn

        start, end, line_no, text = self._inside_first
        n = self._inside
        warn(
            f"{self.path} line {start}: a cell of this row opens with a quote ('\"') that closes only on line {end}, "
            + (
                f"so line {line_no} ('{_printable(text.strip())}'), which reads as a row of its own, is read as part "
                "of that cell, not as a row"
                if n == 1
                else f"so {n:,} lines that read as rows of their own (the first: line {line_no}, "
                f"'{_printable(text.strip())}') are read as part of such cells, not as rows"
            )
            + "; if a story starts with a quote, quote its cell and double every '\"' inside it (Python's csv module "
            "writes so)"
        )


#: a line break inside a CSV cell
_CELL_BREAK = re.compile(r"\r\n|\r|\n")
_ID_RUNS = re.compile(r"(\d+)|[^\W\d_]+")


def _id_shape(text: str) -> str:
    """What kind of id ``text`` is, as runs of digits (``0``) and letters (``a``): ``45530`` -> ``0``, ``story_12``
    -> ``a_0``, ``Later`` -> ``a``."""
    return _ID_RUNS.sub(lambda m: "0" if m.group(1) else "a", text)


@contextmanager
def open_csv(path: str | Path, *, delimiter: str | None = None) -> Iterator[CsvFile]:
    """A CSV (TSV for ``.tsv``) with a header row, streamed; every reading error is one `InputError`."""
    with open_text(path, newline="") as fh:
        yield CsvFile(fh, path, delimiter or csv_delimiter(path))


def read_csv(path: str | Path, *, delimiter: str | None = None) -> tuple[list[str], list[dict[str, str]]]:
    """``(column names, rows)`` of a CSV with a header row (an empty file: an error); see `CsvFile`."""
    with open_csv(path, delimiter=delimiter) as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty CSV (no header row)")
        return f.fieldnames, [row for _, row in f]


def read_csv_rows(path: str | Path, *, delimiter: str | None = None) -> list[list[str]]:
    """All rows of a CSV as lists of cells (no header handling; an unterminated quote is refused)."""
    from vistkit.limits import max_line_chars

    with open_text(path, newline="") as fh:
        lines = iter_lines(fh, path, max_line=max_line_chars(), why=LINE_LIMIT_WHY)
        rows = _csv_reader(lines, delimiter or csv_delimiter(path))
        try:
            return [[restore_cell(c) for c in row] for row in rows]
        except csv.Error as exc:
            what = "a quoted cell is never closed" if "unexpected end of data" in str(exc) else str(exc)
            raise InputError(f"{path} line {rows.line_num}: malformed CSV ({what})") from None


def _inner_suffix(path: Path) -> str:
    """The suffix of the file inside: ``s.jsonl.gz`` -> ``.jsonl``, in lower case (``S.JSONL.GZ`` too)."""
    name = path.name.lower()
    for outer in (".zip", ".gz"):
        if name.endswith(outer):
            name = name[: -len(outer)]
    return Path(name).suffix.lower()


class DuplicateKeyError(ValueError):
    """A JSON object that holds the same key twice (Python's json keeps the last one and drops the others)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {shown_names([key])!r} appears twice in one JSON object")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for `json.loads`: a dict, refusing a key given twice (`DuplicateKeyError`)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(text: str) -> str:
    """``text`` safe to print (lone surrogates and control characters escaped), shortened to 60 characters."""
    shown = text if text.isprintable() else repr(text)[1:-1]
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _json_path(path: tuple[Any, ...]) -> str:
    """``("annotations", 3, 0, "text")`` -> ``annotations[3][0].text`` (odd keys quoted)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"['{_printable(part)}']" if out else f"'{_printable(part)}'"
    return out


def unpaired_surrogate(data: Any) -> tuple[str, str] | None:
    """The first lone UTF-16 surrogate in parsed JSON (json turns a ``"\\ud800"`` escape without its partner
    into one, which no UTF-8 writer can write out): ``(where, the escape)``, e.g. ``("the key 's\\ud800'",
    "\\ud800")`` or ``("the string at annotations[3][0].text", "\\udc00")``; None when there is none."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if m := _LONE_SURROGATE.search(value):
                at = f"the string at {_json_path(path)}" if path else "the top-level string"
                return at, f"\\u{ord(m.group()):04x}"
        elif isinstance(value, dict):
            for key in value:
                if m := _LONE_SURROGATE.search(key):
                    inside = f" in {_json_path(path)}" if path else ""
                    return f"the key '{_printable(key)}'{inside}", f"\\u{ord(m.group()):04x}"
            stack.extend((v, (*path, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(value))))
    return None


def refuse_surrogates(text: str, data: Any, where: str | Path) -> None:
    """Refuse parsed JSON ``data`` (from ``text``, read from ``where``) that holds a lone surrogate, in one sentence
    naming the key or string; a cheap test on ``text`` first, so files without ``\\uD8..`` escapes cost nothing."""
    if "\\ud" not in text and "\\uD" not in text:
        return
    found = unpaired_surrogate(data)
    if found is not None:
        at, escape = found
        raise InputError(
            f"{where}: {at} holds an unpaired {escape} escape, which is not valid Unicode (half of a UTF-16 "
            "surrogate pair); remove it or give the whole pair"
        )


def parse_json(text: str | bytes, where: str | Path) -> Any:
    """Parse JSON text read from ``where`` (named in every error): a syntax error names the line and column, a
    key given twice in one object is refused naming it (nothing is dropped silently), and so is a lone surrogate
    (`refuse_surrogates`)."""
    if isinstance(text, bytes | bytearray):
        raw = bytes(text)
        check_head(raw[:HEAD_BYTES], where)
        try:
            text = raw.decode(ENCODING)
        except UnicodeDecodeError as exc:
            raise _decode_error(where, exc, raw) from None
    if text.startswith("\ufeff"):  # after the byte-order mark decoding skips: a second one
        raise InputError(f"{where}: starts with two byte-order marks (U+FEFF); remove the second")
    check_json_values(text, where)
    try:
        data = json.loads(text, object_pairs_hook=unique_pairs)
    except DuplicateKeyError as exc:
        raise InputError(f"{where}: {exc}; each story (and each setting) must appear once") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {json_error_text(exc)}"
        ) from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer literal over Python's 4300-digit limit
        raise InputError(f"{where}: invalid JSON ({_first_clause(exc)})") from None
    refuse_surrogates(text, data, where)
    return data


#: how a raw control character is written escaped in a JSON string
_JSON_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def json_error_text(exc: json.JSONDecodeError) -> str:
    """What is wrong at a JSON syntax error (after its line and column): json's message, or, where that is a NUL
    byte or a raw control character, what it is and what to do (json says only "Expecting value" or "Invalid
    control character at")."""
    at = exc.doc[exc.pos : exc.pos + 1] if isinstance(exc.doc, str) else ""
    if isinstance(exc.doc, str) and not exc.doc.strip():
        return f"{exc.msg}: the file is empty (or holds only spaces and blank lines); is this the right file?"
    if at == "\x00":
        return "a NUL byte, which no JSON text holds; is the file UTF-16 (save it as UTF-8) or not a JSON file?"
    if exc.msg.startswith("Invalid control character") and at and ord(at) < 0x20:
        escaped = _JSON_ESCAPES.get(at, f"\\u{ord(at):04x}")
        return (
            f"a raw control character (U+{ord(at):04X}) inside a string, which JSON needs escaped; write it as "
            f"{escaped}"
        )
    return exc.msg


def json_values(text: str) -> int:
    """An upper bound on the memory the values of JSON ``text`` take when parsed, counted in values: every
    ``[`` and ``,`` one, every ``{`` three (an object costs about three times a string); a ``,`` or bracket inside
    a string counts too, so real files are overestimated a little."""
    return text.count(",") + text.count("[") + 3 * text.count("{") + 1


def check_json_values(text: str, where: str | Path) -> None:
    """Refuse JSON ``text`` whose values (`json_values`) exceed `vistkit.limits.max_json_values`, before it is
    parsed (parsing holds the whole document: 256 MiB of ``[[],[],...`` would take 6 GiB)."""
    from vistkit.limits import max_json_values

    limit = max_json_values()
    if 3 * len(text) + 1 <= limit:  # too short to hold that many values
        return
    if (n := json_values(text)) > limit:
        raise _too_many_values(where, f"about {n:,}", limit)


def _too_many_values(where: str | Path, count: str, limit: int) -> InputError:
    from vistkit.limits import JSON_VALUES_ENV

    return InputError(
        f"{where} holds {count} JSON values (objects, lists, strings, numbers), over vistkit's limit of "
        f"{limit:,} per file (the whole file is held in memory while it is read); split it, or if it is "
        f"genuine raise the limit with {JSON_VALUES_ENV}=<n>"
    )


#: how much of a JSON file is read at a time while its values are counted (`read_json_text`, `read_json_bytes`)
_JSON_BLOCK = 1 << 22


def read_json_text(path: str | Path) -> str:
    """The whole text of a JSON file (see `read_text`), read block by block: its values are counted as it is
    read, so a file over `vistkit.limits.max_json_values` (``[[[[...``, ``[0,0,0,...``) is refused once the
    count passes the limit, a file that is only blank lines or spaces is refused without being held, and one
    that cannot be JSON from its first character on is read no further (`_JsonBlocks`)."""
    blocks = _JsonBlocks(path)
    with open_text(path) as fh:
        try:
            while not blocks.stop and (block := fh.read(_JSON_BLOCK)):
                blocks.add(block, block.isspace(), json_values(block) - 1)
        except UnicodeDecodeError as exc:
            raise _decode_error(path, exc) from None
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise read_error(path, exc) from None
    return "".join(blocks.end())


def read_json_bytes(path: str | Path) -> bytes:
    """The whole decompressed bytes of a JSON file (see `read_bytes`), refused as `read_json_text` refuses them
    (the values counted on the bytes, whatever their encoding)."""
    blocks = _JsonBlocks(path)
    with open_binary(path) as fh:
        try:
            while not blocks.stop and (block := fh.read(_JSON_BLOCK)):
                blocks.add(block, block.isspace(), block.count(b",") + block.count(b"[") + 3 * block.count(b"{"))
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise read_error(path, exc) from None
    return b"".join(blocks.end())


#: the characters a JSON value starts with (NaN and Infinity too: a reader names them)
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


class _JsonBlocks:
    """The blocks of a JSON file as it is read: more values than `vistkit.limits.max_json_values` are refused
    when the count passes the limit; more than one block of blank lines or spaces before the first value is
    not kept, and refused at the first value or at the end (no JSON file starts with megabytes of nothing); a
    first character that no JSON value starts with (a letter, ``<``, ``#``...) stops the reading (`stop`): parsing
    fails there whatever follows, with the same line and column, so the rest need not be read or held."""

    def __init__(self, path: str | Path) -> None:
        from vistkit.limits import max_json_values

        self.path = path
        self.limit = max_json_values()
        self.count = 1
        self.blocks: list[Any] = []
        self.blank = 0  # characters (bytes) of blank blocks while no value has come yet; -1 once one has
        self.stop = False

    def add(self, block: Any, blank: bool, values: int) -> None:
        """One more block: whether it is all blank, and the values it adds (`json_values` less one)."""
        if self.blank >= 0:
            if blank:
                self.blank += len(block)
                if self.blank <= _JSON_BLOCK:
                    self.blocks.append(block)
                return
            if self.blank > _JSON_BLOCK:
                raise InputError(
                    f"{self.path} starts with more than {_JSON_BLOCK // (1 << 20)} MiB of blank lines or spaces "
                    "before any JSON; is this the right file?"
                )
            self.blank = -1
            first = block.lstrip()[:1]
            first = chr(first[0]) if isinstance(first, bytes) else first
            self.stop = "!" <= first <= "~" and first not in _JSON_STARTS
        self.count += values
        if self.count > self.limit:
            raise _too_many_values(self.path, f"more than {self.limit:,}", self.limit)
        self.blocks.append(block)

    def end(self) -> list[Any]:
        """The blocks read, once the file has ended."""
        if self.blank > _JSON_BLOCK:
            raise InputError(f"{self.path} holds only blank lines or spaces, no JSON; is this the right file?")
        return self.blocks


def load_json(path: str | Path) -> Any:
    """Parse a JSON file (UTF-8, BOM allowed); a syntax error names the line and column, a duplicate key is
    refused naming it, and a file with too many values is refused while it is read (`read_json_text`)."""
    return parse_json(read_json_text(path), path)


def _first_clause(exc: BaseException) -> str:
    return str(exc).split(";")[0].strip()[:200]


# --------------------------------------------------------------------------------------------------- detection
def detect_format(data: Any) -> str:
    """The format name of parsed JSON content (see module doc)."""
    if isinstance(data, dict):
        if "output_stories" in data:
            return "challenge"
        if "annotations" in data:
            return "sis"
        if not data:
            raise InputError("the JSON object is empty: no stories")
        if _one_record(data):  # {"story_id": "1", "text": ...}: one story (json.dump of a record), not {id: text}
            return "records"
        values = list(data.values())
        if all(isinstance(v, str) for v in values):
            keys = list(data)
            if all(_TAPM_KEY.match(k) and len(k.split("_")) >= 3 for k in keys):
                return "tapm"
            return "story-dict"
        if all(isinstance(v, list) for v in values):
            if _photo_lists(values):
                raise InputError(
                    "holds lists of photo ids under its keys, a photo map ({story_id: [photo ids]}), not stories; "
                    "give it as --photos (photos= in Python) beside a story file"
                )
            return "arel"
        if all(isinstance(v, dict) for v in values):
            return "tapm-nested"
        if all(type(v) in (int, float) for v in values):
            raise InputError(
                "the JSON object holds numbers under its keys (scores, as a metrics result file holds), not story "
                "texts; is this the right file?"
            )
        def shown(key: Any) -> str:
            value = data[key]
            return f"'{_printable(str(key))}' holds {'a text' if isinstance(value, str) else _kind(value)}"

        first = next(iter(data))
        odd = next((k for k, v in data.items() if type(v) is not type(data[first])), None)
        if odd is None:  # one kind of value, none of them stories (null, true ...)
            raise InputError(f"the JSON object holds no story texts ({shown(first)}); is this the right file?")
        raise InputError(
            f"the JSON object mixes value types ({shown(first)}, {shown(odd)}), so its format is unknown; give "
            "every story as a text (or pass --format)"
        )
    if isinstance(data, list):
        if data and all(isinstance(r, dict) for r in data[:50]):
            # a storylet names its photo (VIST's photo_flickr_id; a story record has photo_ids): one that lacks its
            # order is refused as a storylet, not read as a story of one sentence
            if all("worker_arranged_photo_order" in r or "photo_flickr_id" in r for r in data[:50]):
                return "storylets"
            return "records"
        if data and all(isinstance(r, str) for r in data[:50]):
            raise InputError(
                f"a JSON list of story texts without ids; {_NEEDS_IDS}: write records, "
                '[{"story_id": "...", "text": "..."}, ...], or JSONL'
            )
        raise InputError("a JSON list must hold storylet or story records (objects)")
    raise InputError(f"expected a JSON object or list, found {type(data).__name__}")


#: a photo id as a photo map lists it: a whole number (VIST's Flickr ids), or a photo's file name
_PHOTO_ID = re.compile(r"\d+(?:\.(?:jpe?g|png|gif))?", re.IGNORECASE)


def _photo_lists(values: list[Any]) -> bool:
    """Whether the lists ``values`` (of a ``{key: [...]}`` object) hold photo ids only, as a photo map does, not
    story texts (no story is a photo id, every one of them)."""
    seen = False
    for value in values:
        for x in value:
            if not (isinstance(x, str | int) and _PHOTO_ID.fullmatch(str(x).strip())):
                return False  # a story (at once, in a real AREL file)
            seen = True
    return seen


#: fields that only a story record has (a ``{story_id: text}`` dict holding one of them as an id is not one)
_ID_FIELDS = ("story_id", "photo_ids", "photo_sequence")


def _one_record(data: dict[Any, Any]) -> bool:
    """Whether a JSON object is one story record (a JSONL line, a record of a JSON list: ``{"story_id": "1",
    "text": ...}``) rather than a ``{story_id: text}`` dict: it has a text field, and an id field or no field
    vistkit does not read."""
    return any(f in data for f in _TEXT_FIELDS) and (
        any(f in data for f in _ID_FIELDS) or data.keys() <= _RECORD_FIELDS.keys()
    )


# --------------------------------------------------------------------------------------------------- readers
def read_stories(
    path: str | Path,
    *,
    format: str | None = None,
    system: str | None = None,
    field: str | None = None,
) -> StorySet:
    """Read stories from ``path`` in any supported format (auto-detected unless ``format`` is given).

    ``-`` reads standard input (the format detected from the content: JSON, JSONL or CSV with a header), and so
    does a path to an unnamed pipe without a file suffix (``/dev/stdin``, ``<(zcat x.gz)``: `unnamed_pipe`).
    ``field``: which text field of storylet records (VIST SIS, PR-VIST) to read; None = ``text``.
    """
    path = input_path(path, "read_stories' file")
    if field is None:
        field = "text"
    elif not isinstance(field, str):
        raise InputError(f"field must be a text field name such as 'text' or 'original_text', not {field!r}")
    if format is not None and not isinstance(format, str):
        raise InputError(f"format must be a format name ({', '.join(FORMATS)}), not {type(format).__name__}")
    if system is not None and not isinstance(system, str):
        raise InputError(f"system must be a text (the name of the model that wrote the stories), not {system!r:.60}")
    if path == STDIN:
        return _read_stdin(format=format, system=system, field=field)
    p = Path(path)
    if not p.suffix and (unnamed_pipe(p) or _FD_NAME.fullmatch(str(p))):  # /dev/stdin: format from content, as -
        return _read_stdin(format=format, system=system, field=field, path=p)
    fmt = format
    suffix = _inner_suffix(Path(content_name(p)))  # a zip's one member: its own name (stories.zip:s.jsonl)
    if fmt is None and suffix == ".jsonl":
        fmt = "jsonl"
    if fmt is None and suffix in (".csv", ".tsv"):
        fmt = "csv"
    if fmt is None and suffix != ".json":  # no suffix, .txt, ...: the content tells, as for - (`sniff_format`)
        fmt = _sniff_file(p)
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt in ("jsonl", "csv"):
        _check_field(field, fmt, p)
    if fmt == "jsonl":
        stories = _collect(iter_jsonl(p, system=system), p)
    elif fmt == "csv":
        stories = _collect(iter_csv(p, system=system), p)
    else:
        try:
            data = load_json(p)
        except InputError as exc:
            if fmt is None and ": Extra data" in str(exc) and _sniff_file(p) == "jsonl":
                raise InputError(
                    f"{exc}; it holds one JSON object per line, which is JSONL: name it .jsonl, or pass "
                    "--hyp-format jsonl (--ref-format for references)"
                ) from None
            raise
        stories = _json_stories(data, fmt, p, system=system, field=field)
    if not stories:
        raise InputError(f"{p}: holds no stories")
    return StorySet(stories, source=str(p))


def _sniff_file(p: Path) -> str | None:
    """``jsonl``, ``csv`` or None (JSON) for a file whose name does not say, from its first MiB as `sniff_format`
    decides for text piped in."""
    with open_text(p) as fh:
        try:
            head = fh.read(1 << 20)
        except UnicodeDecodeError as exc:
            raise _decode_error(p, exc) from None
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise read_error(p, exc) from None
    return sniff_format(head) if head.strip() else None


def _collect(stories: Iterable[Story], where: str | Path) -> list[Story]:
    """``stories`` as a list, refused in one sentence once there are more than `vistkit.limits.max_stories`
    (counted as they are read, so memory stays bounded)."""
    from vistkit.limits import STORIES_ENV, max_stories

    limit = max_stories()
    out: list[Story] = []
    for story in stories:
        if len(out) >= limit:
            raise InputError(
                f"{where} holds more than {limit:,} stories, over vistkit's limit per file; split it, or raise the "
                f"limit with {STORIES_ENV}=<n>"
            )
        out.append(story)
    return out


STDIN = "-"

#: formats whose records have several text fields, one of which is chosen (``--hyp-field``, ``FILE:FIELD``)
FIELD_FORMATS = ("sis", "storylets")


def _json_stories(
    data: Any, fmt: str | None, p: Path, *, system: str | None, field: str, slim: bool = False
) -> list[Story]:
    """The stories of parsed JSON ``data`` (its format detected unless given; the field checked against it).
    ``slim``: each story, once read (and so checked), is kept without its text and sentences, for a caller that asks
    only for its ids and keys (`vistkit.data.validate`): the texts are let go as the document is read."""
    if fmt is None:
        try:
            fmt = detect_format(data)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
    _check_field(field, fmt, p)
    stories = _from_json(data, fmt, p, system=system, field=field)
    return _collect(_without_texts(stories) if slim else stories, p)


def _without_texts(stories: Iterable[Story]) -> Iterator[Story]:
    """``stories``, each emptied of its text and sentences once made (and so checked); they are new, held by no one
    else, so they are emptied in place (`dataclasses.replace` would check each again: a third of validate's time)."""
    for story in stories:
        object.__setattr__(story, "text", "")
        object.__setattr__(story, "sentences", None)
        yield story


def _check_field(field: str, fmt: str, p: Path) -> None:
    """Refuse a story field for a format that has none, instead of silently reading its one text."""
    if field != "text" and fmt not in FIELD_FORMATS:
        raise InputError(
            f"{p}: the field {field!r} (--hyp-field or FILE:FIELD) applies to storylet files (VIST SIS, PR-VIST), "
            f"and this is a {fmt} file with one text per story; leave the field out"
        )


def read_stdin_bytes(what: str = "stories") -> bytes:
    """The bytes piped into standard input (``-`` as a path), at most `vistkit.limits.max_input_bytes`; a
    terminal (nothing piped in) is refused in one sentence saying what ``-`` was to read."""
    import sys

    from vistkit.limits import input_too_large, max_input_bytes

    stream = sys.stdin
    if stream is None or (hasattr(stream, "isatty") and stream.isatty()):
        raise InputError(f"- reads {what} from standard input, but nothing is piped in (e.g. cat FILE | ...)")
    limit = max_input_bytes()
    raw = getattr(stream, "buffer", None)
    try:
        if raw is not None:
            data = raw.read(limit + 1)
        else:  # a text stream (e.g. replaced in tests): its text back as the bytes it came from
            data = stream.read(limit + 1).encode("utf-8", "surrogateescape")
    except OSError as exc:
        raise InputError(f"<stdin>: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise input_too_large("<stdin>", limit)
    return data


def _read_stdin(*, format: str | None, system: str | None, field: str, path: Path | None = None) -> StorySet:
    """Stories piped into standard input (``-`` as the path), or through the unnamed pipe at ``path``
    (``/dev/stdin``, ``/dev/fd/63``), in any format `read_stories` reads (detected from the content)."""
    where = "<stdin>" if path is None else str(path)
    name = Path(where)
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    raw = read_stdin_bytes() if path is None else read_bytes(path)
    _check_piped_head(raw[:HEAD_BYTES], where)
    try:
        text = raw.decode(ENCODING)
    except UnicodeDecodeError as exc:
        raise _decode_error(where, exc, raw) from None
    if not text.strip():
        if path is not None:
            raise InputError(f"{where}: nothing was piped in (the pipe is empty)")
        raise InputError("standard input is empty (only one argument can be -, and it needs stories piped in)")
    fmt = format or sniff_format(text)
    if fmt in ("jsonl", "csv"):
        _check_field(field, fmt, name)
    if fmt == "jsonl":
        stories = _collect(_jsonl_stories(io.StringIO(text), name, system), name)
    elif fmt == "csv":
        with io.StringIO(text, newline="") as fh:
            stories = _collect(_csv_stories(CsvFile(fh, name, header_delimiter(text)), name, system), name)
    else:
        stories = _json_stories(parse_json(text, where), fmt, name, system=system, field=field)
    if not stories:
        raise InputError(f"{where}: holds no stories")
    return StorySet(stories, source=where)


def _check_piped_head(head: bytes, where: str) -> None:
    """`check_head` for data piped in (``where``: ``<stdin>`` or the pipe's path): a zip needs to be a file (it is
    read from its end), and gzip data is opened from a file named .gz; each is told in one sentence."""
    code = _binary_code(head)
    source = "standard input" if where == "<stdin>" else where
    if code == "zip":
        raise InputError(
            f"{source} holds a zip archive, which vistkit reads only from a file; give it as a file name "
            "(ARCHIVE.zip, or ARCHIVE.zip:MEMBER), or pipe in the file inside (unzip -p ARCHIVE.zip MEMBER | ...)"
        )
    if code == "gzip":
        raise InputError(
            f"{source} holds gzip-compressed data, which vistkit reads only from a file; give it as a file name "
            "ending in .gz, or pipe it through zcat (zcat FILE.gz | ...)"
        )
    check_head(head, where)


_NOT_SPACE = re.compile(r"\S")
#: what the JSONL and CSV readers end a line at (a file's universal newlines): not `str.splitlines`' U+2028,
#: U+2029 or U+0085, which JSON allows raw inside a string (``json.dumps(..., ensure_ascii=False)`` writes them)
_LINE_END = re.compile("[\n\r]")


def sniff_format(text: str) -> str | None:
    """``jsonl``, ``csv`` or None (one JSON document: `detect_format` decides) for text piped in."""
    # the first line that is not blank, and whether another follows (without splitting all the text in lines)
    first_char = _NOT_SPACE.search(text)
    start = first_char.start() if first_char else len(text)
    end = line_end.start() if (line_end := _LINE_END.search(text, start)) else len(text)
    head = text[start:end]
    if not head.startswith(("{", "[")):
        return "csv"
    if head.startswith("{") and head.rstrip().endswith("}"):
        try:
            first = json.loads(head)
        except (ValueError, RecursionError):
            return None
        more = _NOT_SPACE.search(text, end) is not None
        if more or (isinstance(first, dict) and ("text" in first or "story" in first)):
            return "jsonl"
    return None


def _from_json(data: Any, fmt: str, p: Path, *, system: str | None, field: str) -> Iterator[Story]:
    if fmt == "challenge":
        yield from _challenge(data, p, system)
    elif fmt == "sis":
        if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
            what = "a challenge file" if isinstance(data, dict) and "output_stories" in data else _json_words(data)
            raise InputError(f"{p}: SIS json needs a list under 'annotations'" + (f"; this is {what}" if what else ""))
        # the release's [[storylet], ...], or a story's storylets in one list ([[s1, ..., s5], ...])
        records = [x for r in data["annotations"] for x in (r if isinstance(r, list) else (r,))]
        yield from _storylets(records, p, system, field)
    elif fmt == "storylets":
        if not isinstance(data, list):
            raise InputError(f"{p}: a storylet file is a JSON list of records")
        yield from _storylets(data, p, system, field)
    elif fmt == "records":
        agreement = SentenceAgreement(p)
        for i, rec in enumerate([data] if isinstance(data, dict) else data):  # a list, or one record
            yield agreement.check(_record(rec, f"{p} record {i + 1}", system), f"{p} record {i + 1}")
        agreement.report()
    elif fmt == "story-dict":
        _need_dict(data, p)
        for sid, text in data.items():
            if not isinstance(text, str):
                raise InputError(f"{p}: story {sid!r}: text must be a string, found {type(text).__name__}")
            yield _story(p, story_id=str(sid), text=text, system=system)
    elif fmt == "tapm":
        _need_dict(data, p)
        for key, text in data.items():
            album, *photos = str(key).split("_")
            if not isinstance(text, str):
                raise InputError(f"{p}: key {key!r}: text must be a string")
            where = f"{p}: key '{_printable(key)}'"
            if not photos:  # (--hyp-format tapm on {story_id: text}: each id would be an album without photos)
                raise InputError(
                    f"{where} is not a tapm key, ALBUM_PHOTO1_..._PHOTO5 (an album id and its photo ids joined by "
                    "'_'); a file keyed by story ids is a story-dict: leave the format out, or give story-dict"
                )
            ids = tuple(photo_id_text(x, where, j) for j, x in enumerate(photos, start=1))
            yield _story(p, story_id=str(key), text=text, photo_ids=ids, album_id=album, system=system)
    elif fmt == "tapm-nested":
        _need_dict(data, p)
        for album, seqs in data.items():
            if not isinstance(seqs, dict):
                raise InputError(f"{p}: album {album!r}: expected an object of sequences")
            for seq, text in seqs.items():
                if not isinstance(text, str):
                    raise InputError(f"{p}: album {album!r} sequence {seq!r}: text must be a string")
                where = f"{p}: album '{_printable(album)}' sequence '{_printable(seq)}'"
                seq_photos = tuple(photo_id_text(x, where, j) for j, x in enumerate(seq.split("_"), start=1))
                yield _story(
                    p, story_id=f"{album}_{seq}", text=text, photo_ids=seq_photos, album_id=str(album), system=system
                )
    elif fmt == "arel":
        _need_dict(data, p)
        made: dict[str, str] = {}  # story id -> the album it came from
        for album, texts in data.items():
            if isinstance(texts, str):  # {album: text} read as AREL (--hyp-format arel): that album's one story
                texts = [texts]
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise InputError(f"{p}: album {album!r}: expected a story string or a list of story strings")
            for i, text in enumerate(texts):
                sid = str(album) if len(texts) == 1 else f"{album}#{i}"
                if sid in made:  # album "1" with two stories makes "1#0", as does an album named "1#0"
                    raise InputError(
                        f"{p}: albums '{_printable(made[sid])}' and '{_printable(album)}' both give a story the id "
                        f"'{_printable(sid)}' (the stories of an album are ALBUM#0, ALBUM#1, ...); rename one album"
                    )
                made[sid] = album
                yield _story(p, story_id=sid, text=text, album_id=str(album), system=system)
    else:
        raise InputError(f"{p}: format {fmt!r} is not a JSON format")


def _story(where: str | Path, **fields: Any) -> Story:
    """A `Story` read at ``where`` (a file, a line, a record): a story the model refuses (an id with a control
    character, a text over the length limit ...) is refused naming the place."""
    try:
        return Story(**fields)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def _need_dict(data: Any, p: Path) -> None:
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a JSON object")


class NotChallengeError(InputError):
    """A file read as a challenge file (``--format challenge``, a template) without an ``output_stories`` list;
    ``what``: the story format it is in, in words (`_FORMAT_WORDS`), or None."""

    def __init__(self, message: str, what: str | None) -> None:
        super().__init__(message)
        self.what = what


#: the JSON story formats in words, as errors name what a file is
_FORMAT_WORDS = {
    "sis": "a VIST story-in-sequence (SIS) file",
    "storylets": "a list of storylets (as VIST SIS or PR-VIST hold)",
    "records": "story records (as JSONL lines)",
    "story-dict": "a {story_id: text} file",
    "tapm": "a tapm file ({album_photo1_..._photo5: text})",
    "tapm-nested": "a nested tapm file ({album: {photo1_..._photo5: text}})",
    "arel": "an AREL file ({album_id: [text, ...]})",
}


def _json_words(data: Any) -> str | None:
    """What story format parsed JSON ``data`` is in, in words (`_FORMAT_WORDS`; VIST's DII file named as such), or
    None when it is none of them."""
    try:
        fmt = detect_format(data)
    except InputError:
        return None
    if fmt == "sis" and isinstance(data.get("annotations"), list) and data["annotations"]:
        first = data["annotations"][0]
        first = first[0] if isinstance(first, list) and first else first
        if isinstance(first, dict) and _dii_error(first, "") is not None:
            return "VIST's description-in-isolation (DII) file, one caption per photo and no story"
    return _FORMAT_WORDS.get(fmt)


def _challenge(data: Any, p: Path, system: str | None) -> Iterator[Story]:
    """The stories of a challenge file's parsed ``data``; each record of its ``output_stories`` is replaced by None
    once read, so the parsed document shrinks as the stories grow (the caller holds no other use of it)."""
    if not isinstance(data, dict) or not isinstance(data.get("output_stories"), list):
        what = _json_words(data)
        raise NotChallengeError(
            f"{p}: a challenge submission needs a list under 'output_stories'" + (f"; this is {what}" if what else ""),
            what,
        )
    team = data.get("team_name") if isinstance(data.get("team_name"), str) else None
    records = data["output_stories"]
    for i in range(len(records)):
        rec, records[i] = records[i], None  # each parsed record let go once read: the story keeps what it needs
        where = f"{p}: output_stories[{i}]"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object")
        photos = rec.get("photo_sequence")
        text = rec.get("story_text_normalized")
        album = rec.get("album_id")
        if not isinstance(photos, list) or not photos:
            raise InputError(f"{where}: 'photo_sequence' must be a non-empty list of photo ids")
        if not isinstance(text, str):
            raise InputError(f"{where}: 'story_text_normalized' must be a string")
        ids = tuple(photo_id_text(x, where, j) for j, x in enumerate(photos, start=1))
        yield _story(
            where,
            story_id=sequence_key(ids),
            text=text,
            photo_ids=ids,
            album_id=album_text(album, where),
            system=system or team,
        )


def _storylets(records: Iterable[Any], p: Path, system: str | None, field: str) -> Iterator[Story]:
    by_story: dict[str, list[dict[str, Any]]] = {}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{p}: storylet {i + 1} is not an object")
        for name in ("story_id", "photo_flickr_id", "worker_arranged_photo_order", field):
            if name not in rec:
                raise _dii_error(rec, f"{p}: storylet {i + 1}") or InputError(
                    f"{p}: storylet {i + 1} has no field {name!r}"
                )
        where = f"{p}: storylet {i + 1}"
        photo_id_text(rec["photo_flickr_id"], where, "photo_flickr_id")  # checked here, where the storylet can be named
        album_text(rec.get("album_id"), where)
        if not isinstance(rec[field], str):  # str(None) would score the story "None"
            raise InputError(
                f"{where}: the field {field!r} is {_kind(rec[field])}, not text; every storylet needs its "
                f"{field} as a string" + ("" if field == "text" else " (is it the right --hyp-field?)")
            )
        sid = id_text(rec["story_id"], where, "story_id")
        order = rec["worker_arranged_photo_order"]
        if type(order) is not int and not (isinstance(order, str) and _decimal_text(order.strip())):
            shown = f"the text '{_printable(order)}'" if isinstance(order, str) else _kind(order)
            raise InputError(
                f"{p}: story {_printable(sid)}, storylet {i + 1}: worker_arranged_photo_order is {shown}, but it "
                "must be a whole number (the photo's place in the story: 0, 1, ...)"
            )
        by_story.setdefault(sid, []).append(rec)
    # a story-level field (PR-VIST's predicted_story) is the same on every storylet of every story; a field that
    # differs within one story is a sentence per storylet in every story, even where a story repeats one sentence
    # (a model's degenerate output: read once, a five-photo story would be one sentence). Decided for the file.
    per_storylet = field == "text" or any(r[field] != recs[0][field] for recs in by_story.values() for r in recs[1:])
    for sid, recs in by_story.items():
        recs.sort(key=lambda r: int(r["worker_arranged_photo_order"]))
        orders = [int(r["worker_arranged_photo_order"]) for r in recs]
        if len(set(orders)) != len(orders):
            seen: set[int] = set()  # the first repeated place (a scan of orders[:i] per i was quadratic)
            twice = orders[0]
            for twice in orders:
                if twice in seen:
                    break
                seen.add(twice)
            raise InputError(
                f"{p}: story '{_printable(sid)}' has two storylets at worker_arranged_photo_order {twice}, so the "
                "order of its sentences is unknown; give each storylet its own place"
            )
        photos = tuple(str(r["photo_flickr_id"]) for r in recs)
        album = _story_album(recs, p, sid)
        if per_storylet:
            # one sentence per storylet (SIS `text`, `original_text`): the story is their sentences in order
            sentences = tuple(r[field] for r in recs)
            text = " ".join(sentences).strip()
        else:  # a story-level field repeated on every storylet (PR-VIST's predicted_story)
            sentences = None
            text = recs[0][field]
        yield _story(
            p,
            story_id=sid,
            text=text,
            sentences=sentences,
            photo_ids=photos,
            album_id=album,
            system=system or ("human" if field == "text" else None),
        )


def _dii_error(rec: dict[Any, Any], where: str) -> InputError | None:
    """The error for a record of VIST's description-in-isolation (DII) file (``"tier":
    "descriptions-in-isolation"``, a ``photo_order_in_story`` and no ``story_id``): one caption per photo, no
    story; None for any other record."""
    if "story_id" in rec or not (rec.get("tier") == "descriptions-in-isolation" or "photo_order_in_story" in rec):
        return None
    return InputError(
        f"{where} is a caption of VIST's description-in-isolation (DII) file, one caption per photo and no story; "
        "give the story-in-sequence (SIS) file of the same split (e.g. test.story-in-sequence.json)"
    )


def _story_album(recs: list[dict[str, Any]], p: Path, sid: str) -> str | None:
    """The album of a story's storylets ``recs`` (None when none names one); storylets naming two albums
    (compared as `Story` compares ids: spaces around dropped, NFC, ``7`` and ``"7"`` one) are refused, since
    ``--key album`` would group the story under one of them at random."""
    import unicodedata

    albums: dict[str, str] = {}
    for i, rec in enumerate(recs):
        if (text := album_text(rec.get("album_id"), f"{p}: story '{_printable(sid)}', storylet {i + 1}")) is not None:
            albums.setdefault(unicodedata.normalize("NFC", text), text)
    if len(albums) > 1:
        a, b = list(albums.values())[:2]
        raise InputError(
            f"{p}: the storylets of story '{_printable(sid)}' name two albums, '{_printable(a)}' and "
            f"'{_printable(b)}', so the story's album is unknown; give every storylet of a story its one album_id"
        )
    return next(iter(albums.values()), None)


_TEXT_FIELDS = ("text", "story", "story_text_normalized")
#: what no photo id of a '-'-joined photo_ids holds: a space inside (ids joined by spaces, or a list as Python,
#: pandas or json.dumps write it: "['1', '2']")
_NOT_JOINED = re.compile(r"\s")
_PHOTO_FIELDS = ("photo_ids", "photo_sequence")


def _kind(value: Any) -> str:
    """A JSON value as an error message shows it: ``null``, ``true``, ``the number 1.5``, ``an object``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def id_text(value: Any, where: str, what: str) -> str:
    """An id (story, album, photo) as text: a string as it is, an integer (not a boolean) in decimal; anything
    else (null, true, 1.5, NaN, an object, a list) is refused in one sentence naming ``where`` and ``what``."""
    if type(value) is str:
        return value.strip(ID_EDGE_SPACES)  # " 45530" matches "45530", as `Story` compares it
    if type(value) is int:
        return str(value)
    raise InputError(
        f"{where}: {what} is {_kind(value)}, but ids must be strings or whole numbers; write it as a string "
        '(e.g. "1741642")'
    )


def album_text(value: Any, where: str) -> str | None:
    """A record's ``album_id`` as text (`id_text`), or None when it is missing, null, or empty or spaces only (what
    the challenge writer, a CSV's empty cell and pandas write for a story without an album): read as album ``''``,
    every such story would be one album under ``--key album``."""
    if value is None:
        return None
    text = id_text(value, where, "album_id")
    return text or None


def photo_id_text(value: Any, where: str, position: int | str) -> str:
    """Photo ``position`` of a sequence (1-based, or a field name) as text (`id_text`), refusing an empty id and
    one holding ``-``, the joiner of sequence keys (``["1-2", "3"]`` and ``["1", "2-3"]`` would both be
    ``1-2-3``)."""
    what = f"photo id {position}" if isinstance(position, int) else position
    text = id_text(value, where, what)
    if "-" in text or not text:
        problem = "is empty" if not text else f"('{_printable(text)}') contains '-'"
        raise InputError(
            f"{where}: {what} {problem}, but sequence keys join photo ids with '-', so different sequences would "
            "collide; give each photo's own id"
        )
    return text


#: the fields a story record (JSONL, CSV, a JSON list of records) is read from, each with the group it belongs to
#: (one of a group is read: `_TEXT_FIELDS`, `_PHOTO_FIELDS`)
_RECORD_FIELDS: dict[str, tuple[str, ...]] = {
    **{f: _TEXT_FIELDS for f in _TEXT_FIELDS},
    **{f: _PHOTO_FIELDS for f in _PHOTO_FIELDS},
    **{f: (f,) for f in ("story_id", "album_id", "sentences", "system")},
}
#: what a field name is compared without (`_field_key`): spaces, '_', '-', invisible format characters
_FIELD_NOISE = re.compile(r"[\s_\-\u200b-\u200f\u2060\ufeff]")


def _field_key(name: str) -> str:
    """A field name as `_missed_field` compares it: NFKC, no spaces, '_', '-' or invisible characters, case-folded
    (``Story_ID``, ``storyId``, `` album_id`` and ``story-id`` are all ``storyid``)."""
    import unicodedata

    return _FIELD_NOISE.sub("", unicodedata.normalize("NFKC", name)).casefold()


_FIELD_KEYS = {_field_key(f): f for f in _RECORD_FIELDS}


def _missed_field(names: Iterable[str]) -> tuple[str, str] | None:
    """The first of ``names`` (a record's keys, a CSV header) that is a field vistkit reads written another way
    (other letter case, spaces, '-' for '_', an invisible character: ``Story_ID``) while neither that field nor
    another of its group is given, with the field it stands for: it would be ignored silently. None when there is
    none (other fields are ignored, as ever)."""
    names = list(names)
    given = set(names)
    for name in names:
        if name in _RECORD_FIELDS:
            continue
        meant = _FIELD_KEYS.get(_field_key(name)) if isinstance(name, str) else None
        if meant is not None and given.isdisjoint(_RECORD_FIELDS[meant]):
            return name, meant
    return None


def _refuse_missed_field(names: Iterable[str], where: str, what: str) -> None:
    """Refuse a field `_missed_field` finds in ``names``, naming ``where`` and ``what`` it is ("field", "column")."""
    if (missed := _missed_field(names)) is not None:
        name, meant = missed
        raise InputError(
            f"{where}: the {what} '{_printable(name)}' is not one vistkit reads, so it would be ignored; name it "
            f"{meant!r} (field names are lower case, with '_')"
        )


def _record(rec: Any, where: str, system: str | None) -> Story:
    if isinstance(rec, str):
        raise InputError(
            f"{where}: a story text without ids (a JSON string, not an object); {_NEEDS_IDS}: write each as "
            '{"story_id": "...", "text": "..."}'
        )
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected an object")
    if not rec.keys() <= _RECORD_FIELDS.keys():
        _refuse_missed_field(rec, where, "field")
    for group in (_TEXT_FIELDS, _PHOTO_FIELDS):
        if len(given := [f for f in group if f in rec]) > 1:
            raise InputError(
                f"{where}: has both {given[0]!r} and {given[1]!r}, and vistkit would not know which to read; keep one"
            )
    text = next((rec[f] for f in _TEXT_FIELDS if f in rec), None)
    if isinstance(text, list) and text and all(isinstance(x, str) for x in text):
        name = next(f for f in _TEXT_FIELDS if f in rec)
        raise InputError(
            f"{where}: '{name}' is a list (of sentences?), but a story's text is one string; give the story as one "
            f"string in '{name}' (and its sentences, if you want them kept, as a list in 'sentences')"
        )
    if not isinstance(text, str):
        raise InputError(f"{where}: needs a string field 'text' (or 'story')")
    photos_raw = rec.get("photo_ids", rec.get("photo_sequence", ()))
    if isinstance(photos_raw, str):  # "1-2-3", or the challenge's "1-2-3-" (its one trailing '-' dropped)
        joined = photos_raw.strip(ID_EDGE_SPACES)
        parts = joined.removesuffix("-").split("-") if joined else []
        if any(_NOT_JOINED.search(x.strip(ID_EDGE_SPACES)) for x in parts):
            shown = _printable(joined if len(joined) <= 60 else joined[:57] + "...")
            raise InputError(
                f"{where}: photo_ids '{shown}' is not a '-'-joined list of photo ids (a list "
                "written by Python or pandas, or ids joined by spaces?); write them as 1-2-3, or as a JSON "
                "list in JSONL"
            )
        photos = tuple(photo_id_text(x, where, j) for j, x in enumerate(parts, start=1))
    elif isinstance(photos_raw, list | tuple):  # () = no photo ids given
        photos = tuple(photo_id_text(x, where, j) for j, x in enumerate(photos_raw, start=1))
    else:
        raise InputError(f"{where}: 'photo_ids' must be a list or a '-'-joined string")
    sents_raw = rec.get("sentences")
    if sents_raw is None or (isinstance(sents_raw, str) and not sents_raw.strip()):  # a CSV cell of spaces too
        sentences = None
    elif isinstance(sents_raw, list) and all(isinstance(x, str) for x in sents_raw):
        sentences = tuple(sents_raw)
    elif isinstance(sents_raw, str):
        sentences = tuple(x.strip() for x in sents_raw.split("|||"))
    else:
        raise InputError(f"{where}: 'sentences' must be a list of strings")
    sid = rec.get("story_id")
    if isinstance(sid, str):
        sid = sid.strip(ID_EDGE_SPACES)  # a cell of spaces is an empty cell
    if sid is None or sid == "":
        sid = sequence_key(photos) if photos else None
    if sid is None:
        raise _dii_error(rec, where) or InputError(f"{where}: needs 'story_id' or 'photo_ids'")
    album = album_text(rec.get("album_id"), where)
    return _story(
        where,
        story_id=id_text(sid, where, "story_id"),
        text=text,
        sentences=sentences,
        photo_ids=photos,
        album_id=album,
        system=system or _system_name(rec.get("system"), where),
    )


def _system_name(value: Any, where: str) -> str | None:
    """A record's ``system`` field: text (empty or missing: None); another kind of value is refused."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: 'system' is {_kind(value)}, but a system name is text; write it as a string")
    return value


class SentenceAgreement:
    """Counts the stories of one file whose ``sentences`` hold other words than their ``text`` (compared without
    spaces: ``"a . b ."`` and ``["a .", "b ."]`` agree), and warns once the file is read, naming the first: metrics
    read the text by default, but ``-O METRIC.sentences=source`` reads the sentences, so a story that disagrees
    with itself is scored as two different stories. Nothing is refused (a story is read as given)."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.first: str | None = None
        self.count = 0

    def check(self, story: Story, where: str) -> Story:
        """``story`` (read at ``where``), noted when its sentences disagree with its text."""
        if story.sentences is not None and "".join(story.text.split()) != "".join("".join(story.sentences).split()):
            self.count += 1
            if self.first is None:
                self.first = where
        return story

    def report(self) -> None:
        """The warning, once every story is read (none when all agree)."""
        if self.count:
            from vistkit.errors import warn

            stories = "1 story" if self.count == 1 else f"{self.count:,} stories"
            warn(
                f"{self.first}: the story's 'sentences' hold other words than its 'text' ({stories} so in "
                f"{self.path}); metrics read the text, but -O METRIC.sentences=source reads the sentences, so make "
                "the two agree or leave 'sentences' out"
            )


def iter_jsonl(path: str | Path, *, system: str | None = None) -> Iterator[Story]:
    """Stream stories from a JSONL file (one object per line; blank lines skipped)."""
    p = Path(path)
    with open_text(p) as fh:
        yield from _jsonl_stories(fh, p, system)


def _jsonl_stories(fh: io.TextIOBase, p: Path, system: str | None) -> Iterator[Story]:
    from vistkit.limits import max_line_chars

    decoder = json.JSONDecoder(object_pairs_hook=unique_pairs)  # one for all lines (json.loads makes one each)
    blank = BlankRun(p)
    agreement = SentenceAgreement(p)
    first = True
    for n, line in enumerate(iter_lines(fh, p, max_line=max_line_chars(), why=LINE_LIMIT_WHY), start=1):
        if not line.strip():
            blank.add(n)
            continue
        blank.reset()
        if first and (document := _json_document_start(line)) is not None:
            raise _not_jsonl(p, n, document)
        if "\x00" in line:
            raise InputError(
                f"{p} line {n}: holds a NUL byte, which no JSON text has; is the file UTF-16 (save it as UTF-8) "
                "or not a JSONL file?"
            )
        try:
            rec = decoder.decode(line)
        except DuplicateKeyError as exc:
            raise InputError(f"{p} line {n}: {exc}; give each field once") from None
        except json.JSONDecodeError as exc:
            if line.lstrip(" \t").startswith("\ufeff"):
                raise InputError(
                    f"{p} line {n}: starts with a byte-order mark (U+FEFF), which belongs only at the start of a "
                    "file (files joined with cat, or two marks?); remove it"
                ) from None
            if exc.msg == "Extra data" and line[exc.pos :].strip() == ",":
                raise InputError(
                    f"{p} line {n}: a ',' follows the story object, but a JSONL line holds one object and nothing "
                    "after it (a JSON list split into lines?); remove the commas (and any '[' and ']' lines)"
                ) from None
            raise InputError(f"{p} line {n}: invalid JSON at column {exc.colno}: {json_error_text(exc)}") from None
        except RecursionError:
            raise InputError(f"{p} line {n}: JSON nested too deeply") from None
        except ValueError as exc:  # an integer literal over Python's 4300-digit limit
            raise InputError(f"{p} line {n}: invalid JSON ({_first_clause(exc)})") from None
        refuse_surrogates(line, rec, f"{p} line {n}")
        if first and (document := _whole_file_words(rec)) is not None:
            raise _not_jsonl(p, n, document)
        first = False
        yield agreement.check(_record(rec, f"{p} line {n}", system), f"{p} line {n}")
    agreement.report()


def _json_document_start(line: str) -> str | None:
    """What the first line of a JSONL file is when it opens a JSON list, in words, or ``{`` when it opens an object
    written over lines (``json.dump(..., indent=2)``); None otherwise (a story object, or a line the JSON parser
    names)."""
    text = line.strip()
    if text.startswith("["):
        return "a JSON list" + (", written over several lines" if text == "[" else "")
    return "{" if text == "{" else None


def _whole_file_words(rec: Any) -> str | None:
    """What the first record of a JSONL file is, in words, when it is a whole story file of another format on one
    line (a challenge file, a ``{story_id: text}`` object ...) rather than a story record; None otherwise."""
    if not isinstance(rec, dict) or not rec.keys().isdisjoint(_RECORD_FIELDS):  # a record (its text missing?)
        return None
    words = "a challenge submission ({'output_stories': [...]})" if "output_stories" in rec else _json_words(rec)
    return None if words is None or words.startswith("story records") else f"{words} on one line"


def _not_jsonl(p: Path, n: int, what: str) -> InputError:
    """The error for a JSONL file whose line ``n`` (its first) shows ``what`` it is: a JSON document, or objects
    written over several lines."""
    if what == "{":
        return InputError(
            f"{p} line {n}: '{{' alone, an object written over several lines (json.dump with indent), but a JSONL "
            "line holds one whole story object; write each on one line, or name the file .json if it is one JSON "
            "document"
        )
    return InputError(
        f"{p} line {n}: {what}, so the file is one JSON document, not JSONL (one story object a line); name it .json"
    )


def iter_csv(path: str | Path, *, system: str | None = None) -> Iterator[Story]:
    """Stream stories from a CSV (or TSV) file with named columns."""
    with open_csv(path) as f:
        yield from _csv_stories(f, path, system)


def _csv_stories(f: CsvFile, path: str | Path, system: str | None) -> Iterator[Story]:
    if not f.fieldnames:
        raise InputError(f"{path}: empty CSV (no header row)")
    _refuse_missed_field(f.fieldnames, f"{path} line {f.header_line}", "column")
    if not any(c in f.fieldnames for c in _TEXT_FIELDS):
        if (headless := _no_header(f, path)) is not None:
            raise headless
        raise InputError(f"{path}: CSV needs a 'text' column; found {shown_names(f.fieldnames)}{_other_delimiter(f)}")
    for group in (_TEXT_FIELDS, _PHOTO_FIELDS):
        if len(given := [c for c in group if c in f.fieldnames]) > 1:
            raise InputError(
                f"{path} line {f.header_line}: the header has both {given[0]!r} and {given[1]!r} columns, and vistkit "
                "would not know which to read; keep one (or rename the other)"
            )
    agreement = SentenceAgreement(path)
    floats = FloatIds(path)
    for n, row in f:
        _refuse_missing_marks(row, f"{path} line {n}")
        story = _record(row, f"{path} line {n}", system)
        floats.check(row, f"{path} line {n}")
        yield agreement.check(story, f"{path} line {n}")
    agreement.report()
    floats.report()


#: what R (NA), spreadsheets (#N/A), pandas (nan) and Python (None) write for a missing value: in a CSV id column
#: (which has no null) such a cell would be read as an id, one shared by every story missing it
_MISSING_MARKS = frozenset({"na", "n/a", "#n/a", "n.a.", "nan", "null", "none", "nil"})
_ID_COLUMNS = ("story_id", "album_id", "photo_ids", "photo_sequence")


def _refuse_missing_marks(row: dict[str, str], where: str) -> None:
    """Refuse a CSV row whose id cell (story, album, photo ids) is a missing-value mark (`_MISSING_MARKS`): read
    as an id, every story missing its album would be album 'NA', one album under ``--key album``."""
    for column in _ID_COLUMNS:
        cell = row.get(column)
        if cell and cell.strip(ID_EDGE_SPACES).lower() in _MISSING_MARKS:
            raise InputError(
                f"{where}: {column} is '{_printable(cell.strip())}', a mark for a missing value (R writes NA, "
                "spreadsheets #N/A, Python None), not an id; leave the cell empty where there is none (R: "
                'write.csv(..., na = ""))'
            )


def _float_id(text: str) -> bool:
    """Whether ``text`` is a whole number as pandas writes it from a float column (an integer column holding a
    missing value): ``45530.0``."""
    return text.endswith(".0") and text[:-2].isascii() and text[:-2].isdigit()


#: a number in scientific notation: a long id as a spreadsheet saves it (``7.21576E+16``: Excel keeps six digits of
#: VIST's 17-digit album ids) or as pandas writes it from a float column (``7.215759446230739e+16``)
_SCIENTIFIC_ID = re.compile(r"[0-9](?:\.[0-9]+)?[eE]\+?[0-9]+")


class FloatIds:
    """Notes the id columns of one CSV file (story, album, photo ids) in which every id given is a number written
    as a float, and warns once the file is read: a whole number ending in ``.0`` (``45530.0``: pandas writes an
    integer column that holds a missing value so) or one in scientific notation (``7.21576E+16``: a spreadsheet
    saves a long id so, and pandas a float one from 10^16 up; its digits are lost). Such ids match nothing written
    ``45530`` (the references, a photo folder). The ids are read as given."""

    _COLUMNS = ("story_id", "album_id", *_PHOTO_FIELDS)

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.given: Counter[str] = Counter()
        self.floats: Counter[str] = Counter()
        self.first: dict[str, tuple[str, str]] = {}
        self.scientific: dict[str, tuple[str, str]] = {}

    def check(self, row: dict[str, str], where: str) -> None:
        """Note the id cells of ``row`` (read at ``where``)."""
        for column in self._COLUMNS:
            cell = row.get(column, "").strip()
            if not cell:
                continue
            parts = cell.removesuffix("-").split("-") if column in _PHOTO_FIELDS else [cell]
            self.given[column] += 1
            parts = [x.strip() for x in parts]
            if all(_float_id(x) or _SCIENTIFIC_ID.fullmatch(x) for x in parts):
                self.floats[column] += 1
                self.first.setdefault(column, (where, cell))
                if any(_SCIENTIFIC_ID.fullmatch(x) for x in parts):
                    self.scientific.setdefault(column, (where, cell))

    def report(self) -> None:
        """One warning naming the columns whose every id is a number written as a float (none when there is
        none)."""
        columns = [c for c in self._COLUMNS if self.given[c] and self.floats[c] == self.given[c]]
        if not columns:
            return
        from vistkit.errors import warn

        names = " and ".join(f"'{c}'" for c in columns)
        plural = "s" if len(columns) > 1 else ""
        if sci := next((c for c in columns if c in self.scientific), None):
            where, cell = self.scientific[sci]
            warn(
                f"{where}: {sci} '{_printable(_shorter(cell))}' is a number in scientific notation, and every id "
                f"of the column{plural} {names} in {self.path} is a number written as a float (a spreadsheet saves "
                "long numbers so, and pandas a float column); the digits are lost, so they match no id written in full "
                "(references, photo files): keep the ids as text (Excel: format the column as Text; pandas: "
                "dtype=str) and save the file again from the source"
            )
            return
        where, cell = self.first[columns[0]]
        warn(
            f"{where}: {columns[0]} '{_printable(_shorter(cell))}' is a whole number written as a float, as is "
            f"every id of the column{plural} {names} in {self.path} (pandas writes an integer column holding a "
            "missing value so); they will not match the same ids written without '.0' (references, photo files): "
            "write them as whole numbers (pandas: .astype('Int64') or dtype=str)"
        )


def _shorter(cell: str) -> str:
    """``cell`` cut to 40 characters for a message."""
    return cell if len(cell) <= 40 else cell[:37] + "..."


#: why a story file needs ids (stories given as bare texts)
_NEEDS_IDS = "vistkit matches stories to references and photos by id, so each story needs one"
def _prose(cell: str) -> bool:
    """Whether a first-line cell reads as a story, not a column name: five words or more, or three ending a
    sentence ("we went home ."; a column name such as "my story text" does not end with a stop)."""
    words = len(cell.split())
    return words >= 5 or (words >= 3 and cell.rstrip()[-1:] in ".!?\"'")


def jsonl_not_csv(path: str | Path, first_line: str, line_no: int = 1) -> InputError | None:
    """The error for a file read as CSV whose first line (that is not blank: line ``line_no``) is a JSON object
    (JSONL given the format csv); None for any other line."""
    line = first_line.strip()
    if not (line.startswith("{") and line.endswith("}")):
        return None
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return None
    return InputError(
        f"{path}: line {line_no} is a JSON object, so the file is JSONL (one story object a line), not CSV; read it as "
        "JSONL (name it .jsonl, or give the format jsonl: --hyp-format jsonl, --ref-format jsonl)"
    )


def _no_header(f: CsvFile, path: str | Path) -> InputError | None:
    """The error for a file whose first line is no header row but a story (`_prose`): plain text with one story per
    line (no ids to match it by), or rows of ids and stories without the header; None when the first line reads as
    column names."""
    cells = f.fieldnames
    if (jsonl := jsonl_not_csv(path, f.first_line, f.header_line)) is not None:
        return jsonl
    if not any(_prose(c) for c in cells):
        return None
    line = _printable((f.delimiter if f.delimiter == "\t" else f.delimiter + " ").join(cells))
    if not any(c and len(c.split()) == 1 for c in cells):  # no id beside the story
        return InputError(
            f"{path}: plain text, one story per line (line {f.header_line}: '{line}'), not a CSV with a header row; "
            f"{_NEEDS_IDS}: "
            'write JSONL, one {"story_id": "...", "text": "..."} a line, or a CSV whose first row names its columns '
            "(story_id,text)"
        )
    header = "story_id\\t" if f.delimiter == "\t" else "story_id,"
    return InputError(
        f"{path} line {f.header_line}: '{line}' reads as a story, not as the header row that names the columns; add a "
        f"first row naming them (e.g. {header}text for an id and a story)"
    )


def _other_delimiter(f: CsvFile) -> str:
    """Why a header read as one column is one (the file is separated by another character), as the end of a
    sentence; "" when it is not so."""
    if len(f.fieldnames) != 1:
        return ""
    head = f.fieldnames[0]
    if "\t" in head and f.delimiter != "\t":
        return " (one column: the file is tab-separated; name it .tsv)"
    if "," in head and f.delimiter != ",":
        return " (one column: the file is comma-separated; name it .csv)"
    if ";" in head:
        return (
            " (one column: the file is separated by ';', which vistkit does not read; save it separated by commas, "
            "e.g. as 'CSV UTF-8 (Comma delimited)' in Excel)"
        )
    return ""


def read_template_stories(path: str | Path) -> StorySet:
    """The stories of a challenge template (or any challenge-format file); a story file of another format (the VIST
    test SIS given as the template instead of as the references) is refused saying what it is."""
    try:
        return read_stories(path, format="challenge")
    except NotChallengeError as exc:
        human = exc.what is not None and exc.what.startswith(("a VIST story-in", "a list of storylets"))
        raise InputError(
            f"{path}: a template is the challenge's vist-challenge-template.json, one JSON object listing the required "
            "photo sequences under 'output_stories'"
            + (f", but this file is {exc.what}" if exc.what else ", and this file has none")
            + ("; human stories go to --references (-r)" if human else "")
        ) from None


def read_template(path: str | Path) -> list[str]:
    """The sequence keys of a challenge template (or any challenge-format file; see `read_template_stories`)."""
    return [s.sequence for s in read_template_stories(path)]


# --------------------------------------------------------------------------------------------------- writers
def _record_of(story: Story) -> dict[str, Any]:
    rec: dict[str, Any] = {"story_id": story.story_id, "text": story.text}
    if story.photo_ids:
        rec["photo_ids"] = list(story.photo_ids)
    if story.album_id is not None:
        rec["album_id"] = story.album_id
    if story.sentences is not None:
        rec["sentences"] = list(story.sentences)
    if story.system is not None:
        rec["system"] = story.system
    return rec


def write_jsonl(stories: Iterable[Story], path: str | Path) -> None:
    """One JSON object per story (readable back with `read_stories`)."""
    from vistkit.data.output import open_output

    with open_output(path) as fh:
        for s in stories:
            fh.write(json.dumps(_record_of(s), ensure_ascii=False) + "\n")


def write_csv(stories: Iterable[Story], path: str | Path) -> None:
    """CSV with columns story_id, album_id, photo_ids (``-``-joined), system, sentences (``|||``), text (cells
    neutralised against formula injection, see `vistkit.data.output`)."""
    from vistkit.data.output import open_csv_output

    with open_csv_output(path) as w:
        w.writerow(["story_id", "album_id", "photo_ids", "system", "sentences", "text"])
        for s in stories:
            w.writerow(
                [
                    s.story_id,
                    s.album_id or "",
                    "-".join(s.photo_ids),
                    s.system or "",
                    " ||| ".join(s.sentences) if s.sentences is not None else "",
                    s.text,
                ]
            )


def write_challenge(
    stories: Iterable[Story], path: str | Path, *, team_name: str = "vistkit", description: str = ""
) -> None:
    """A VIST-challenge submission file (needs photo sequences and album ids)."""
    out = []
    for s in stories:
        if not s.photo_ids:
            raise InputError(f"story {s.story_id!r} has no photo sequence; the challenge format needs one")
        out.append(
            {
                "album_id": s.album_id or "",
                "photo_sequence": list(s.photo_ids),
                "story_text_normalized": s.text,
            }
        )
    data = {
        "team_name": team_name,
        "evaluation_info": {"additional_description": description},
        "output_stories": out,
    }
    from vistkit.data.output import write_text

    write_text(path, json.dumps(data, indent=2, ensure_ascii=False))
