"""Readers for every VIST story format, and writers for JSONL, CSV and challenge JSON.

Formats (``format=`` name, auto-detected from the content when not given):

- ``sis``: VIST SIS json: ``{"annotations": [[storylet], ...]}`` or a flat list of storylets under
  ``annotations``. A story = its storylets sorted by ``worker_arranged_photo_order``; text = the storylets' ``text``
  joined by one space (as the 2018 challenge's ``getNormalizedStoryText``); sentences = the storylets.
- ``storylets``: a bare JSON list of storylet records (e.g. PR-VIST's ``PR_VIST.json.zip``), read like ``sis``.
  ``field="predicted_story"`` reads PR-VIST's generated story instead of the human one.
- ``challenge``: the VIST-challenge submission (``output_stories`` with album_id, photo_sequence,
  story_text_normalized).
- ``story-dict``: ``{story_id: text}`` (dHM, GROOViST).
- ``tapm``: ``{"album_p1_p2_p3_p4_p5": text}``; ``tapm-nested``: ``{album: {"p1_p2_p3_p4_p5": text}}``.
- ``arel``: ``{album_id: [text, ...]}`` (one or several stories per album; AREL predictions and references).
- ``jsonl``: one JSON object per line with ``text`` (or ``story``) and any of ``story_id``, ``photo_ids`` (list or
  ``-``-joined), ``album_id``, ``sentences``, ``system``.
- ``csv``: a header row with the same column names (``photo_ids`` ``-``-joined; ``sentences`` ``|||``-joined).

``.zip`` and ``.gz`` files are opened transparently. JSONL and CSV stream line by line.
"""

from __future__ import annotations

import csv
import errno
import gzip
import io
import json
import os
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vistkit.data.output import restore_cell
from vistkit.data.story import Story, StorySet, sequence_key
from vistkit.errors import InputError

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


def split_member(path: str | Path) -> tuple[Path, str | None]:
    """``ARCHIVE.zip:MEMBER`` -> ``(ARCHIVE.zip, MEMBER)``; any other path -> ``(path, None)``.

    A path that exists as given is never split (a file may have ``.zip:`` in its name).
    """
    text = str(path)
    p = Path(text)
    if p.exists() or ".zip:" not in text:
        return p, None
    archive, _, member = text.rpartition(".zip:")
    return Path(archive + ".zip"), member


def is_input_file(path: str | Path) -> bool:
    """True when ``path`` can be read as a file: a file, a pipe or a device (``<(zcat x.gz)`` gives
    ``/dev/fd/63``; every read is capped, `open_binary`), or ``ARCHIVE.zip:MEMBER`` naming an existing archive
    (the member itself is checked when it is opened); not a folder."""
    p = split_member(path)[0]
    return p.exists() and not p.is_dir()


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
    if (
        _FIELD_NAME.fullmatch(field)
        and not field.lower().endswith(_FILE_SUFFIXES)
        and is_input_file(before)
    ):
        return before, field
    return path, default


def _zip_member(zf: zipfile.ZipFile, p: Path, member: str | None) -> str:
    """The one member to read: the named one, else the only file in the archive (several: an error)."""
    names = [n for n in zf.namelist() if not n.startswith("__MACOSX") and not n.endswith("/")]
    unsafe = [n for n in names if n.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", n)]
    if member is not None:
        if member not in names:
            listed = shown_names(names, limit=10, none="no file")
            raise InputError(f"{p} has no member {member!r}; it holds {listed}")
        if member in unsafe:
            raise InputError(
                f"{p}: member {shown_names([member])!r} has an unsafe name (absolute or with '..'); rename it"
            )
        return member
    if not names:
        raise InputError(f"{p}: the zip archive holds no file")
    if unsafe:
        raise InputError(
            f"{p}: member name {shown_names(unsafe[:1])!r} is unsafe (absolute or with '..'); repack the archive"
        )
    if len(names) > 1:
        raise InputError(
            f"{p} holds several files ({shown_names(names, limit=10)}); choose one as {p.name}:MEMBER, e.g. "
            f"{p.name}:{shown_names(names[:1])}"
        )
    return names[0]


def missing_file(path: str | Path) -> InputError:
    """The error for a path that cannot be found: "no such file", or what is really wrong (a symbolic link
    loop, a link to nothing, a parent that is a file)."""
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
    return InputError(f"{p}: no such file")


class _Capped(io.RawIOBase):
    """A binary stream that stops with one `InputError` once more than ``limit`` bytes came out of it (an
    archive's header can lie about the size; the bytes are counted as they are inflated)."""

    def __init__(self, raw: Any, limit: int, where: str) -> None:
        super().__init__()
        self._raw = raw
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
            super().close()


def open_binary(path: str | Path, *, max_bytes: int | None = None) -> io.BufferedReader:
    """The decompressed bytes of a file (see `open_text`), capped at ``max_bytes`` (default:
    `vistkit.limits.max_input_bytes`)."""
    from vistkit.limits import input_too_large, max_input_bytes

    p, member = split_member(path)
    try:
        if not p.exists():
            raise missing_file(p)
        if p.is_dir():
            raise InputError(f"{p} is a folder; give a file")
        limit = max_input_bytes() if max_bytes is None else max_bytes
        if p.suffix == ".zip" or member is not None:
            zf = zipfile.ZipFile(p)
            name = _zip_member(zf, p, member)
            where = f"{p}:{name}"
            if zf.getinfo(name).file_size > limit:  # what the header declares; the stream is counted too
                zf.close()
                raise input_too_large(where, limit)
            raw: Any = zf.open(name)
        elif p.suffix == ".gz":
            where, raw = str(p), gzip.open(p)
        else:
            where, raw = str(p), open(p, "rb")
            if p.stat().st_size > limit:
                raw.close()
                raise input_too_large(where, limit)
        return io.BufferedReader(_Capped(raw, limit, where))
    except zipfile.BadZipFile as exc:
        raise InputError(f"{p}: not a valid zip archive ({exc})") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    except (RuntimeError, NotImplementedError) as exc:  # zip: encrypted or unknown compression
        raise InputError(f"{p}: cannot be read ({exc})") from None


def open_text(path: str | Path, *, newline: str | None = None, max_bytes: int | None = None) -> io.TextIOBase:
    """Open a text file (UTF-8, a leading BOM skipped), looking inside ``.zip`` and ``.gz``.

    A zip must hold one file, or the member is named as ``ARCHIVE.zip:MEMBER``. ``newline`` as for `open`
    (CSV needs ``""`` so line breaks inside quoted fields are kept). Decoding errors surface when reading:
    read through `read_text` or `iter_lines` (or `open_csv`) to turn them into one clear `InputError`. Reading
    past ``max_bytes`` decompressed bytes (default: `vistkit.limits.max_input_bytes`) raises one `InputError`.
    """
    return io.TextIOWrapper(open_binary(path, max_bytes=max_bytes), encoding=ENCODING, newline=newline)


def _decode_error(p: Path | str, exc: UnicodeDecodeError) -> InputError:
    return InputError(
        f"{p}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8 (e.g. 'CSV UTF-8' in Excel)"
    )


def iter_lines(fh: io.TextIOBase, path: str | Path, *, max_line: int | None = None) -> Iterator[str]:
    """The lines of ``fh``; a decoding or archive error becomes one `InputError` naming ``path``, and so does a
    line longer than ``max_line`` characters (when given)."""
    try:
        if max_line is None:
            yield from fh
            return
        n = 0
        while line := fh.readline(max_line + 1):
            n += 1
            if len(line) > max_line:
                raise InputError(f"{path} line {n}: longer than {max_line:,} characters; is this the right file?")
            yield line
    except UnicodeDecodeError as exc:
        raise _decode_error(path, exc) from None
    except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
        raise InputError(f"{path}: cannot be read ({exc})") from None


def read_text(path: str | Path) -> str:
    """The whole text of a file (see `open_text`), with one clear error for bytes that are not UTF-8."""
    with open_text(path) as fh:
        try:
            return fh.read()
        except UnicodeDecodeError as exc:
            raise _decode_error(path, exc) from None
        except _READ_ERRORS as exc:  # a corrupt .gz/.zip fails only when read
            raise InputError(f"{path}: cannot be read ({exc})") from None


def csv_delimiter(path: str | Path) -> str:
    """Tab for ``.tsv`` files (also inside ``.gz``/``.zip``), else comma."""
    return "\t" if _inner_suffix(Path(str(path).split(".zip:")[-1])) == ".tsv" else ","


class CsvFile:
    """Rows of a CSV file as dicts, read through the shared decoding path (see `open_csv`)."""

    def __init__(self, fh: io.TextIOBase, path: str | Path, delimiter: str) -> None:
        self.path = path
        self._reader = csv.DictReader(iter_lines(fh, path), delimiter=delimiter)
        try:
            names = self._reader.fieldnames
        except csv.Error as exc:
            raise InputError(f"{path}: malformed CSV ({exc})") from None
        self.fieldnames: list[str] = [restore_cell(n.strip()) for n in names] if names else []

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        """``(line number, row)`` pairs; keys stripped, missing cells ``""``, extra cells dropped."""
        try:
            for row in self._reader:
                yield self._reader.line_num, {
                    restore_cell(k.strip()): (restore_cell(v) if isinstance(v, str) else "")
                    for k, v in row.items()
                    if k is not None
                }
        except csv.Error as exc:
            raise InputError(f"{self.path}: malformed CSV ({exc})") from None


@contextmanager
def open_csv(path: str | Path, *, delimiter: str | None = None) -> Iterator[CsvFile]:
    """A CSV (TSV for ``.tsv``) with a header row, streamed; every reading error is one `InputError`."""
    with open_text(path, newline="") as fh:
        yield CsvFile(fh, path, delimiter or csv_delimiter(path))


def read_csv(path: str | Path, *, delimiter: str | None = None) -> tuple[list[str], list[dict[str, str]]]:
    """``(column names, rows)`` of a CSV with a header row (an empty file: an error)."""
    with open_csv(path, delimiter=delimiter) as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty CSV (no header row)")
        return f.fieldnames, [row for _, row in f]


def read_csv_rows(path: str | Path, *, delimiter: str | None = None) -> list[list[str]]:
    """All rows of a CSV as lists of cells (no header handling)."""
    with open_text(path, newline="") as fh:
        try:
            rows = csv.reader(iter_lines(fh, path), delimiter=delimiter or csv_delimiter(path))
            return [[restore_cell(c) for c in row] for row in rows]
        except csv.Error as exc:
            raise InputError(f"{path}: malformed CSV ({exc})") from None


def _inner_suffix(path: Path) -> str:
    name = path.name
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


def parse_json(text: str | bytes, where: str | Path) -> Any:
    """Parse JSON text read from ``where`` (named in every error): a syntax error names the line and column, a
    key given twice in one object is refused naming it (nothing is dropped silently)."""
    try:
        return json.loads(text, object_pairs_hook=unique_pairs)
    except DuplicateKeyError as exc:
        raise InputError(f"{where}: {exc}; each story (and each setting) must appear once") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer literal over Python's 4300-digit limit
        raise InputError(f"{where}: invalid JSON ({_first_clause(exc)})") from None


def load_json(path: str | Path) -> Any:
    """Parse a JSON file (UTF-8, BOM allowed); a syntax error names the line and column, a duplicate key is
    refused naming it."""
    return parse_json(read_text(path), path)


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
        values = list(data.values())
        if all(isinstance(v, str) for v in values):
            keys = list(data)
            if all(_TAPM_KEY.match(k) and len(k.split("_")) >= 3 for k in keys):
                return "tapm"
            return "story-dict"
        if all(isinstance(v, list) for v in values):
            return "arel"
        if all(isinstance(v, dict) for v in values):
            return "tapm-nested"
        raise InputError("the JSON object mixes value types; cannot tell its format (pass --format)")
    if isinstance(data, list):
        if data and all(isinstance(r, dict) for r in data[:50]):
            if all("worker_arranged_photo_order" in r for r in data[:50]):
                return "storylets"
            return "records"
        raise InputError("a JSON list must hold storylet or story records (objects)")
    raise InputError(f"expected a JSON object or list, found {type(data).__name__}")


# --------------------------------------------------------------------------------------------------- readers
def read_stories(
    path: str | Path,
    *,
    format: str | None = None,
    system: str | None = None,
    field: str | None = None,
) -> StorySet:
    """Read stories from ``path`` in any supported format (auto-detected unless ``format`` is given).

    ``-`` reads standard input (the format detected from the content: JSON, JSONL or CSV with a header).
    ``field``: which text field of storylet records (VIST SIS, PR-VIST) to read; None = ``text``.
    """
    if field is None:
        field = "text"
    elif not isinstance(field, str):
        raise InputError(f"field must be a text field name such as 'text' or 'original_text', not {field!r}")
    if str(path) == STDIN:
        return _read_stdin(format=format, system=system, field=field)
    p = Path(path)
    fmt = format
    suffix = _inner_suffix(p)
    if fmt is None and suffix == ".jsonl":
        fmt = "jsonl"
    if fmt is None and suffix in (".csv", ".tsv"):
        fmt = "csv"
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt in ("jsonl", "csv"):
        _check_field(field, fmt, p)
    if fmt == "jsonl":
        stories = list(iter_jsonl(p, system=system))
    elif fmt == "csv":
        stories = list(iter_csv(p, system=system))
    else:
        stories = _json_stories(load_json(p), fmt, p, system=system, field=field)
    if not stories:
        raise InputError(f"{p}: holds no stories")
    return StorySet(stories, source=str(p))


STDIN = "-"

#: formats whose records have several text fields, one of which is chosen (``--hyp-field``, ``FILE:FIELD``)
FIELD_FORMATS = ("sis", "storylets")


def _json_stories(data: Any, fmt: str | None, p: Path, *, system: str | None, field: str) -> list[Story]:
    """The stories of parsed JSON ``data`` (its format detected unless given; the field checked against it)."""
    if fmt is None:
        try:
            fmt = detect_format(data)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
    _check_field(field, fmt, p)
    return list(_from_json(data, fmt, p, system=system, field=field))


def _check_field(field: str, fmt: str, p: Path) -> None:
    """Refuse a story field for a format that has none, instead of silently reading its one text."""
    if field != "text" and fmt not in FIELD_FORMATS:
        raise InputError(
            f"{p}: the field {field!r} (--hyp-field or FILE:FIELD) applies to storylet files (VIST SIS, PR-VIST), "
            f"and this is a {fmt} file with one text per story; leave the field out"
        )


def _read_stdin(*, format: str | None, system: str | None, field: str) -> StorySet:
    """Stories piped into standard input (``-`` as the path), any format `read_stories` reads."""
    import sys

    name = Path("<stdin>")
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    stream = sys.stdin
    if stream is None or (hasattr(stream, "isatty") and stream.isatty()):
        raise InputError("- reads stories from standard input, but nothing is piped in (e.g. cat stories.json | ...)")
    raw = getattr(stream, "buffer", None)
    try:
        text = raw.read().decode(ENCODING) if raw is not None else stream.read().lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise _decode_error("<stdin>", exc) from None
    if not text.strip():
        raise InputError("standard input is empty (only one argument can be -, and it needs stories piped in)")
    fmt = format or sniff_format(text)
    if fmt in ("jsonl", "csv"):
        _check_field(field, fmt, name)
    if fmt == "jsonl":
        stories = list(_jsonl_stories(io.StringIO(text), name, system))
    elif fmt == "csv":
        delimiter = "\t" if "\t" in text.split("\n", 1)[0] else ","
        with io.StringIO(text, newline="") as fh:
            stories = list(_csv_stories(CsvFile(fh, name, delimiter), name, system))
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"<stdin>: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except (RecursionError, ValueError) as exc:
            raise InputError(f"<stdin>: invalid JSON ({_first_clause(exc)})") from None
        stories = _json_stories(data, fmt, name, system=system, field=field)
    if not stories:
        raise InputError("<stdin>: holds no stories")
    return StorySet(stories, source="<stdin>")


def sniff_format(text: str) -> str | None:
    """``jsonl``, ``csv`` or None (one JSON document: `detect_format` decides) for text piped in."""
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0].lstrip() if lines else ""
    if not head.startswith(("{", "[")):
        return "csv"
    if head.startswith("{") and head.rstrip().endswith("}"):
        try:
            first = json.loads(head)
        except (ValueError, RecursionError):
            return None
        if len(lines) > 1 or (isinstance(first, dict) and ("text" in first or "story" in first)):
            return "jsonl"
    return None


def _from_json(data: Any, fmt: str, p: Path, *, system: str | None, field: str) -> Iterator[Story]:
    if fmt == "challenge":
        yield from _challenge(data, p, system)
    elif fmt == "sis":
        if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
            raise InputError(f"{p}: SIS json needs a list under 'annotations'")
        records = [r[0] if isinstance(r, list) and len(r) == 1 else r for r in data["annotations"]]
        yield from _storylets(records, p, system, field)
    elif fmt == "storylets":
        if not isinstance(data, list):
            raise InputError(f"{p}: a storylet file is a JSON list of records")
        yield from _storylets(data, p, system, field)
    elif fmt == "records":
        for i, rec in enumerate(data):
            yield _record(rec, f"{p} record {i + 1}", system)
    elif fmt == "story-dict":
        _need_dict(data, p)
        for sid, text in data.items():
            if not isinstance(text, str):
                raise InputError(f"{p}: story {sid!r}: text must be a string, found {type(text).__name__}")
            yield Story(story_id=str(sid), text=text, system=system)
    elif fmt == "tapm":
        _need_dict(data, p)
        for key, text in data.items():
            album, *photos = str(key).split("_")
            if not isinstance(text, str):
                raise InputError(f"{p}: key {key!r}: text must be a string")
            yield Story(story_id=str(key), text=text, photo_ids=tuple(photos), album_id=album, system=system)
    elif fmt == "tapm-nested":
        _need_dict(data, p)
        for album, seqs in data.items():
            if not isinstance(seqs, dict):
                raise InputError(f"{p}: album {album!r}: expected an object of sequences")
            for seq, text in seqs.items():
                if not isinstance(text, str):
                    raise InputError(f"{p}: album {album!r} sequence {seq!r}: text must be a string")
                seq_photos = tuple(str(seq).split("_"))
                yield Story(
                    story_id=f"{album}_{seq}", text=text, photo_ids=seq_photos, album_id=str(album), system=system
                )
    elif fmt == "arel":
        _need_dict(data, p)
        for album, texts in data.items():
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise InputError(f"{p}: album {album!r}: expected a list of story strings")
            for i, text in enumerate(texts):
                sid = str(album) if len(texts) == 1 else f"{album}#{i}"
                yield Story(story_id=sid, text=text, album_id=str(album), system=system)
    else:
        raise InputError(f"{p}: format {fmt!r} is not a JSON format")


def _need_dict(data: Any, p: Path) -> None:
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a JSON object")


def _challenge(data: Any, p: Path, system: str | None) -> Iterator[Story]:
    if not isinstance(data, dict) or not isinstance(data.get("output_stories"), list):
        raise InputError(f"{p}: a challenge submission needs a list under 'output_stories'")
    team = data.get("team_name") if isinstance(data.get("team_name"), str) else None
    for i, rec in enumerate(data["output_stories"]):
        where = f"{p}: output_stories[{i}]"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object")
        photos = rec.get("photo_sequence")
        text = rec.get("story_text_normalized")
        album = rec.get("album_id")
        if not isinstance(photos, list) or not photos or not all(isinstance(x, str | int) for x in photos):
            raise InputError(f"{where}: 'photo_sequence' must be a non-empty list of photo ids")
        if not isinstance(text, str):
            raise InputError(f"{where}: 'story_text_normalized' must be a string")
        if album is not None and not isinstance(album, str | int):
            raise InputError(f"{where}: 'album_id' must be a string")
        ids = tuple(str(x) for x in photos)
        yield Story(
            story_id=sequence_key(ids),
            text=text,
            photo_ids=ids,
            album_id=None if album is None else str(album),
            system=system or team,
        )


def _storylets(records: Iterable[Any], p: Path, system: str | None, field: str) -> Iterator[Story]:
    by_story: dict[str, list[dict[str, Any]]] = {}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{p}: storylet {i + 1} is not an object")
        for name in ("story_id", "photo_flickr_id", "worker_arranged_photo_order", field):
            if name not in rec:
                raise InputError(f"{p}: storylet {i + 1} has no field {name!r}")
        by_story.setdefault(str(rec["story_id"]), []).append(rec)
    for sid, recs in by_story.items():
        try:
            recs.sort(key=lambda r: int(r["worker_arranged_photo_order"]))
        except (TypeError, ValueError):
            raise InputError(f"{p}: story {sid}: worker_arranged_photo_order must be integers") from None
        photos = tuple(str(r["photo_flickr_id"]) for r in recs)
        album = recs[0].get("album_id")
        if field == "text":
            sentences = tuple(str(r["text"]) for r in recs)
            text = " ".join(sentences).strip()
        else:  # a story-level field repeated on every storylet (PR-VIST's predicted_story)
            sentences = None
            text = str(recs[0][field])
        yield Story(
            story_id=sid,
            text=text,
            sentences=sentences,
            photo_ids=photos,
            album_id=None if album is None else str(album),
            system=system or ("human" if field == "text" else None),
        )


_TEXT_FIELDS = ("text", "story", "story_text_normalized")


def _record(rec: Any, where: str, system: str | None) -> Story:
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected an object")
    text = next((rec[f] for f in _TEXT_FIELDS if f in rec), None)
    if not isinstance(text, str):
        raise InputError(f"{where}: needs a string field 'text' (or 'story')")
    photos_raw = rec.get("photo_ids", rec.get("photo_sequence", ()))
    if isinstance(photos_raw, str):
        photos = tuple(x for x in photos_raw.split("-") if x)
    elif isinstance(photos_raw, list | tuple):  # () = no photo ids given
        photos = tuple(str(x) for x in photos_raw)
    else:
        raise InputError(f"{where}: 'photo_ids' must be a list or a '-'-joined string")
    sents_raw = rec.get("sentences")
    if sents_raw is None or sents_raw == "":
        sentences = None
    elif isinstance(sents_raw, list) and all(isinstance(x, str) for x in sents_raw):
        sentences = tuple(sents_raw)
    elif isinstance(sents_raw, str):
        sentences = tuple(x.strip() for x in sents_raw.split("|||"))
    else:
        raise InputError(f"{where}: 'sentences' must be a list of strings")
    sid = rec.get("story_id")
    if sid is None or sid == "":
        sid = sequence_key(photos) if photos else None
    if sid is None:
        raise InputError(f"{where}: needs 'story_id' or 'photo_ids'")
    album = rec.get("album_id")
    return Story(
        story_id=str(sid),
        text=text,
        sentences=sentences,
        photo_ids=photos,
        album_id=None if album in (None, "") else str(album),
        system=system or (str(rec["system"]) if rec.get("system") else None),
    )


def iter_jsonl(path: str | Path, *, system: str | None = None) -> Iterator[Story]:
    """Stream stories from a JSONL file (one object per line; blank lines skipped)."""
    p = Path(path)
    with open_text(p) as fh:
        yield from _jsonl_stories(fh, p, system)


def _jsonl_stories(fh: io.TextIOBase, p: Path, system: str | None) -> Iterator[Story]:
    for n, line in enumerate(iter_lines(fh, p), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, object_pairs_hook=unique_pairs)
        except DuplicateKeyError as exc:
            raise InputError(f"{p} line {n}: {exc}; give each field once") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{p} line {n}: invalid JSON at column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{p} line {n}: JSON nested too deeply") from None
        except ValueError as exc:  # an integer literal over Python's 4300-digit limit
            raise InputError(f"{p} line {n}: invalid JSON ({_first_clause(exc)})") from None
        yield _record(rec, f"{p} line {n}", system)


def iter_csv(path: str | Path, *, system: str | None = None) -> Iterator[Story]:
    """Stream stories from a CSV (or TSV) file with named columns."""
    with open_csv(path) as f:
        yield from _csv_stories(f, path, system)


def _csv_stories(f: CsvFile, path: str | Path, system: str | None) -> Iterator[Story]:
    if not f.fieldnames:
        raise InputError(f"{path}: empty CSV (no header row)")
    if not any(c in f.fieldnames for c in _TEXT_FIELDS):
        raise InputError(f"{path}: CSV needs a 'text' column; found {shown_names(f.fieldnames)}")
    for n, row in f:
        yield _record(row, f"{path} line {n}", system)


def read_template(path: str | Path) -> list[str]:
    """The sequence keys of a challenge template (or any challenge-format file)."""
    return [s.sequence for s in read_stories(path, format="challenge")]


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
