"""Validate a VIST-challenge (NAACL 2018) submission exactly as the challenge's evaluator did, then more.

The challenge's checks (windx0303/VIST-Challenge-NAACL-2018, ``EvalVISTSharedTask.java`` with Gson 2.8.2),
in its order and with its messages:

1. the file is JSON (``[Error] Incorrect JSON syntax (JsonSyntaxException).``; vistkit adds the line and
   column). Gson binds ``output_stories`` to typed objects, so a value of the wrong shape (a photo sequence
   that is not a list, a story that is an object, ...) is also a ``JsonSyntaxException`` there; we print the
   same message and say which field. Then, story by story, every story needs ``album_id``,
   ``photo_sequence`` and ``story_text_normalized`` (missing or ``null``: ``[Error] One story is missing
   some attributes. Photo seq: ...``).
2. ``[Passed] Test file is in valid JSON syntax.``
3. one story per photo sequence (``[Error] One photo sequence has more than one stories. Photo seq: ...`` /
   ``[Passed] Each photo sequence has only one story.``).
4. every required sequence has a story (``[Error] One story is missing in this submission. Photo seq: ...``
   / ``[Passed] All required stories are submitted.``). The challenge requires the gold-standard sequences
   that are also in its template; vistkit requires the ``template`` sequences, intersected with the
   ``references``' sequences when both are given (only the references' when no template is given; not
   checked when neither is). A template and references that share no sequence (two splits) are refused: none
   would be required, so every submission would pass.

Sequence keys: in messages, a photo sequence is written as the challenge writes it, every photo id followed
by ``-`` (``"1-2-3-4-5-"``, ``VistChallengeStory.getPhotoIdSeqStr``). In structured results
(`Finding.sequences`, JSON output) sequences are vistkit keys: ids joined by ``-`` without the trailing
``-`` (`vistkit.data.story.Keying`).

Where we differ from the Java program, on purpose:

- it stops at the first error and names one offender; we name the first offender with its exact message and
  keep every offender in the report (the text output lists up to `MAX_LISTED`);
- it prints both ``[Passed]`` lines of checks 1-3 together once both pass; we print each as soon as its
  check passes (the same lines in the same order when the file is valid);
- Gson reads leniently (comments, single quotes, unquoted names, ``NaN``, data after the top-level value, a
  control character such as a tab written raw inside a string); vistkit requires standard JSON (RFC 8259), since
  other tools cannot read such files (the detail says what is at fault);
- a key given twice in one JSON object (which RFC 8259 allows): Gson's ``JsonObject`` keeps the last value and
  the evaluator judged on, and so do the challenge's checks here; vistkit then adds an error naming the key
  (``json-duplicate-key``), since ``vistkit score`` refuses such a file rather than drop a value silently;
- where the Java program crashes (the top level is not an object, ``output_stories`` is missing or ``null``,
  a story is ``null``) we report a vistkit error instead.

Gson turns JSON numbers and booleans into strings where a string is expected (``123`` -> ``"123"``, as
written); so do we, with a warning (and vistkit's reader refuses what it cannot take as an id or a text, a
boolean or a fraction: an error, below).

After the challenge's checks come vistkit's own, marked ``(vistkit)``: encoding (not UTF-8 is an error; a
byte-order mark a warning), values Gson coerced (warning), ``null`` photo ids and empty photo sequences
(errors), sequences of other than 5 photos or with a repeated photo (warnings), album ids that differ from
the template's and sequences outside the template (warnings), empty stories (warning), non-ASCII characters
(warning: the challenge README says they are ignored in evaluation), a submission without stories (error), and
last the submission read as ``vistkit score`` reads it (`_reader_check`: vistkit's story reader, one story per
sequence key): whatever the reader refuses (an id with a control or invisible character, a NUL character, an
unpaired surrogate, a story over the length limit, an empty photo id, a value that is not a string or a whole
number, two sequences that are one once the spaces around ids are dropped and ids are NFC-normalised ...) is an
error in the reader's words, so that ``validate`` never passes a file ``score`` refuses.

Text shown from the submission (ids, paths) has its control, format and bidi characters written as Python escapes
(``\\x1b``, ``\\u202e``), as ``score`` writes ids: a file cannot drive the terminal. Counts (the text summary,
JSON's ``errors`` and ``warnings``, the rows of ``--format csv|latex``) are of offenders: one per story or required
sequence at fault (`Finding.count`), next to the number of checks that failed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from vistkit.data.story import ID_EDGE_SPACES, StorySet, sequence_key
from vistkit.errors import InputError, VistkitError

MAX_LISTED = 10
EXPECTED_PHOTOS = 5

# The challenge's messages, verbatim.
MSG_SYNTAX = "Incorrect JSON syntax (JsonSyntaxException)."
MSG_ATTRIBUTES = "One story is missing some attributes."
MSG_DUPLICATE = "One photo sequence has more than one stories."
MSG_MISSING = "One story is missing in this submission."
MSG_PASSED_SYNTAX = "Test file is in valid JSON syntax."
MSG_PASSED_UNIQUE = "Each photo sequence has only one story."
MSG_PASSED_COMPLETE = "All required stories are submitted."

FIELDS = ("album_id", "photo_sequence", "story_text_normalized")


class Level(StrEnum):
    """How serious a finding is: a passed check, an error, a warning or a note."""

    PASSED = "passed"
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Origin(StrEnum):
    """Whose check a finding comes from: the challenge's validator or vistkit's own."""

    CHALLENGE = "challenge"
    VISTKIT = "vistkit"


#: the columns of ``vistkit validate --format csv|latex``: one row per offender (`Finding.rows`)
ROW_COLUMNS = ("level", "origin", "check", "message", "detail", "sequence", "index", "line", "column")

#: an offender: its sequence (a vistkit key; None when the story has no photo_sequence) and its position in
#: ``output_stories`` (None for a required sequence that has no story)
Offender = tuple[str | None, int | None]


@dataclass(frozen=True)
class Finding:
    """One result line: a passed check, an error, a warning or a note.

    ``message`` is the line as printed (the challenge's exact text for its checks). ``sequences`` are vistkit
    keys (ids joined by ``-``) and ``indices`` positions in ``output_stories`` of all offenders; ``offenders``
    pairs them, one per story (or missing sequence) at fault, in order: `count` counts them.
    """

    check: str
    level: Level
    origin: Origin
    message: str
    detail: str = ""
    sequences: tuple[str, ...] = ()
    indices: tuple[int, ...] = ()
    line: int | None = None
    column: int | None = None
    offenders: tuple[Offender, ...] = ()

    @property
    def count(self) -> int:
        """How many problems (or warnings) this finding stands for: one per offender, at least one."""
        return max(1, len(self.offenders))

    def _listed(self) -> bool:
        """True when each offender gets a line of its own (the challenge's errors name one sequence a line)."""
        return self.origin is Origin.CHALLENGE and self.level is Level.ERROR and len(self.offenders) > 1

    def _offender_message(self, position: int) -> str:
        """The line naming offender ``position``, as the challenge prints it for that story."""
        if position == 0 or not self._listed():
            return self.message
        prefix = self.message.split(" Photo seq: ")[0]
        seq = self.offenders[position][0]
        return prefix if seq is None else f"{prefix} Photo seq: {seq + '-' if seq else ''}"

    def lines(self, *, max_listed: int = MAX_LISTED) -> list[str]:
        """The printed lines: the message, then (for several offenders) more of them and a count."""
        out = [self.message]
        if self.detail:
            out.append(f"  (vistkit: {self.detail})")
        if self._listed():
            out.extend(self._offender_message(i) for i in range(1, min(max_listed, len(self.offenders))))
            if len(self.offenders) > max_listed:
                out.append(f"  (vistkit: ... and {len(self.offenders) - max_listed} more; see --format json)")
        return out

    def rows(self) -> list[list[Any]]:
        """The rows of ``--format csv|latex`` (`ROW_COLUMNS`): one per offender (one when there is none), each
        with its own message line, the detail, its sequence and index, and the line and column."""
        offenders: tuple[Offender, ...] = self.offenders or ((None, None),)
        return [
            [
                self.level.value,
                self.origin.value,
                self.check,
                self._offender_message(i),
                self.detail if i == 0 else "",  # it speaks of the first offender (or of all)
                seq,
                index,
                self.line,
                self.column,
            ]
            for i, (seq, index) in enumerate(offenders)
        ]

    def as_dict(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict."""
        return {
            "check": self.check,
            "level": self.level.value,
            "origin": self.origin.value,
            "message": self.message,
            "detail": self.detail,
            "count": self.count,
            "sequences": list(self.sequences),
            "indices": list(self.indices),
            "line": self.line,
            "column": self.column,
        }


def _plural(n: int, noun: str, plural: str = "") -> str:
    """``1 error``, ``3 errors``, ``2 stories``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


@dataclass
class ValidationReport:
    """Everything `validate_submission` found, in the order it was checked."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    n_stories: int | None = None
    n_required: int | None = None

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        """The findings at error level (the failed checks)."""
        return [f for f in self.findings if f.level is Level.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """The findings at warning level."""
        return [f for f in self.findings if f.level is Level.WARNING]

    @property
    def error_count(self) -> int:
        """The errors: one per story or required sequence at fault (`Finding.count`), over all failed checks."""
        return sum(f.count for f in self.errors)

    @property
    def warning_count(self) -> int:
        """The warnings, counted as `error_count` counts errors."""
        return sum(f.count for f in self.warnings)

    def summary(self) -> str:
        """The last line of the text report: the verdict, the errors (one per story or sequence at fault) and the
        failed checks, the warnings, the stories."""
        verdict = "VALID" if self.ok else "INVALID"
        errors = _plural(self.error_count, "error") if self.errors else "0 errors"
        if self.errors:
            errors += f" ({_plural(len(self.errors), 'check')} failed)"
        warnings = _plural(self.warning_count, "warning") if self.warnings else "0 warnings"
        if self.warnings:
            warnings += f" ({_plural(len(self.warnings), 'check')})"
        return (
            f"(vistkit) {verdict}: {errors}, {warnings}"
            + (f"; {_plural(self.n_stories, 'story', 'stories')}" if self.n_stories is not None else "")
            + (f", {self.n_required:,} required" if self.n_required is not None else "")
        )

    def lines(self, *, max_listed: int = MAX_LISTED) -> list[str]:
        """The text report: the challenge's ``[Test File]`` line, every finding, a summary."""
        out = [f"[Test File] {self.path}"]
        for f in self.findings:
            out.extend(f.lines(max_listed=max_listed))
        out.append(self.summary())
        return out

    def rows(self) -> list[list[Any]]:
        """The rows of ``--format csv|latex`` (`ROW_COLUMNS`), finding by finding: one per offender."""
        return [row for f in self.findings for row in f.rows()]

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``vistkit validate --format json``: ``path``, ``valid``, ``n_stories``, ``n_required``,
        ``errors`` and ``warnings`` (counted as the text summary counts them: one per story or sequence at fault),
        ``failed_checks`` and ``warning_checks`` (the findings at those levels) and ``findings`` (each
        `Finding.as_dict`: check, level, origin, message, detail, count, sequences, indices, line, column)."""
        return {
            "path": self.path,
            "valid": self.ok,
            "n_stories": self.n_stories,
            "n_required": self.n_required,
            "errors": self.error_count,
            "failed_checks": len(self.errors),
            "warnings": self.warning_count,
            "warning_checks": len(self.warnings),
            "findings": [f.as_dict() for f in self.findings],
        }


def challenge_key(photo_ids: Iterable[str]) -> str:
    """The challenge's photo-sequence string: every id followed by ``-`` (``getPhotoIdSeqStr``)."""
    return "".join(f"{p}-" for p in photo_ids)


#: the Unicode categories a printed id or message shows escaped: control characters (ESC, BEL, tab, C1 controls
#: such as CSI), format characters (bidi overrides, zero-width spaces), line/paragraph separators, lone surrogates
_ESCAPED_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))


def _printable(text: str) -> str:
    """Text safe to print on a terminal and to encode as UTF-8: control, format and bidi characters and lone
    surrogates (from ``\\ud800`` escapes) written as Python escapes (``\\x1b``, ``\\u202e``, ``\\ud800``), as
    ``vistkit score`` shows ids; anything else, non-ASCII letters included, as it is (the challenge's messages
    stay byte-identical for ids without such characters)."""
    if text.isprintable():
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in text)


# --------------------------------------------------------------------------------------------------- parsing
class _Number:
    """A JSON number kept as written (Gson hands a number to a string field as its literal text)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (Gson's lenient reader accepted it; write a number or a string)")


def _decode(raw: bytes) -> tuple[str, list[Finding]]:
    """UTF-8 text of ``raw`` (undecodable bytes replaced, as a Java reader does) and encoding findings."""
    found: list[Finding] = []
    body = memoryview(raw)  # a byte-order mark is skipped without copying the bytes after it
    skipped = 0
    if raw.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
        skipped = 3
        found.append(
            Finding(
                "encoding",
                Level.WARNING,
                Origin.VISTKIT,
                "[Warning] (vistkit) The file starts with a UTF-8 byte-order mark; save it without one "
                "(the challenge's reader, Gson, skips it only when Java reads the file as UTF-8).",
            )
        )
    try:
        text = str(body, "utf-8")
    except UnicodeDecodeError as exc:
        from vistkit.data.readers import HEAD_BYTES, binary_kind, cp1252_hint

        text = str(body, "utf-8", errors="replace")
        line = bytes(body[: exc.start]).count(b"\n") + 1
        kind = binary_kind(bytes(body[:HEAD_BYTES]))  # a zip or bzip2 archive starts with bytes that decode
        found.append(
            Finding(
                "encoding",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) The file is not UTF-8 text but {kind}."
                if kind
                else f"[Error] (vistkit) The file is not UTF-8 text (byte {exc.start + skipped:,}, line {line:,}: "
                f"{exc.reason}){cp1252_hint(body[exc.start])}; save it as UTF-8.",
                line=line,
            )
        )
    return text, found


def _syntax_error(detail: str, *, line: int | None = None, column: int | None = None) -> Finding:
    return Finding(
        "json-syntax",
        Level.ERROR,
        Origin.CHALLENGE,
        f"[Error] {MSG_SYNTAX}",
        _printable(detail),
        line=line,
        column=column,
    )


def _as_string(value: Any) -> str | None:
    """What Gson's string adapter makes of a JSON scalar (``None`` for null); raises TypeError for others."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Number):
        return value.literal
    raise TypeError(_kind(value))


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, _Number):
        return "a number"
    return "null"


@dataclass(slots=True)
class _Entry:
    """One story as Gson binds it: strings (or None) plus what was coerced. Of its text only what the checks ask
    is kept (given, blank, ASCII), not the text itself: a submission's texts are most of its bytes, and the
    parsed document is let go story by story as it is bound (`_challenge_checks`)."""

    index: int
    album_id: str | None
    photos: list[str | None] | None
    text_given: bool  # story_text_normalized is there and not null
    text_blank: bool  # ... and holds nothing but spaces
    text_ascii: bool  # ... and holds ASCII characters only
    coerced: tuple[str, ...]

    @property
    def has_null(self) -> bool:  # VistChallengeStory.hasNull
        return self.album_id is None or self.photos is None or not self.text_given

    @property
    def key(self) -> str:
        return sequence_key("null" if p is None else p for p in (self.photos or ()))

    @property
    def cha_key(self) -> str | None:
        if self.photos is None:
            return None
        return challenge_key("null" if p is None else p for p in self.photos)


def _offender(entry: _Entry) -> Offender:
    """``entry`` as an offender: its sequence (printable; None without a photo_sequence) and its position."""
    return (None if entry.photos is None else _printable(entry.key), entry.index)


def _bind(rec: Any, index: int) -> _Entry:
    """Bind one ``output_stories`` element like Gson's reflective adapter; TypeError names the bad field."""
    if not isinstance(rec, dict):
        raise TypeError(f"output_stories[{index}] is {_kind(rec)}, not a story object")
    coerced: list[str] = []
    values: dict[str, Any] = {}
    for name in ("album_id", "story_text_normalized"):
        raw = rec.get(name)
        try:
            values[name] = _as_string(raw)
        except TypeError:
            raise TypeError(f"output_stories[{index}].{name} is {_kind(raw)}, not a string") from None
        if raw is not None and not isinstance(raw, str):
            coerced.append(f"{name} is {_kind(raw)}")
    raw_photos = rec.get("photo_sequence")
    photos: list[str | None] | None
    if raw_photos is None:
        photos = None
    elif isinstance(raw_photos, list):
        photos = []
        for j, p in enumerate(raw_photos):
            try:
                photos.append(_as_string(p))
            except TypeError:
                raise TypeError(
                    f"output_stories[{index}].photo_sequence[{j}] is {_kind(p)}, not a photo id string"
                ) from None
            if p is not None and not isinstance(p, str):
                coerced.append(f"photo id {j + 1} is {_kind(p)}")
    else:
        raise TypeError(f"output_stories[{index}].photo_sequence is {_kind(raw_photos)}, not a list of photo ids")
    text = values["story_text_normalized"]
    return _Entry(
        index,
        values["album_id"],
        photos,
        text_given=text is not None,
        text_blank=text is not None and not text.strip(),
        text_ascii=text is not None and text.isascii(),
        coerced=tuple(coerced),
    )


# --------------------------------------------------------------------------------------------------- checks
def _load_side(source: str | Path | StorySet | None, what: str) -> StorySet | None:
    if source is None or isinstance(source, StorySet):
        return source
    from vistkit.data.readers import read_stories, read_template_stories, split_field

    if what == "template":
        return read_template_stories(source)
    path, field = split_field(str(source))  # FILE:FIELD (PR_VIST.json.zip:predicted_story), as `score -r` reads it
    return read_stories(path, field=field)


def required_sequences(template: StorySet | None, references: StorySet | None) -> list[str] | None:
    """The sequences that need a story: template ∩ references (either alone; None when neither is given). Both given
    and sharing no sequence (two splits) is an `InputError`: nothing would be required, and every file would pass."""
    ref_keys: list[str] | None = None
    if references is not None:  # as `score` groups them: a file without photo sequences is named
        try:
            ref_keys = list(references.group("sequence"))
        except InputError as exc:  # the challenge keys by photo sequence only: no --key to suggest here
            text = str(exc).split("; use --key story")[0]
            if text == str(exc):
                raise
            raise InputError(
                f"{text}; validate needs references with photo sequences (SIS, storylets or a challenge file)"
            ) from None
    if template is None:
        return ref_keys
    keys = list(dict.fromkeys(s.key("sequence") for s in template))
    if ref_keys is not None:
        wanted = set(ref_keys)
        common = [k for k in keys if k in wanted]
        if keys and wanted and not common:  # nothing would be required: every submission would pass
            raise InputError(
                f"--template {_printable(template.source or '(stories)')} and --references "
                f"{_printable(references.source or '(stories)') if references is not None else ''} share no photo "
                f"sequence ({len(keys):,} and {len(wanted):,} sequences), so no story would be required; are they of "
                "two splits? give the references of the template's split (the VIST test SIS for the challenge's "
                "template)"
            )
        keys = common
    return keys


def validate_submission(
    submission: str | Path | bytes,
    *,
    template: str | Path | StorySet | None = None,
    references: str | Path | StorySet | None = None,
    name: str | None = None,
) -> ValidationReport:
    """Check a challenge submission (a path, or the file's bytes) with the challenge's checks, then vistkit's.

    ``template``: a challenge-format file (or its `StorySet`) naming the required sequences; ``references``:
    human stories with photo sequences (e.g. the VIST test SIS); the module doc says how they combine. Any one
    of the three may be ``-``: standard input. A bad template or reference file raises `InputError`; nothing
    about the submission does: every problem becomes a `Finding`.
    """
    from vistkit.data.readers import STDIN, read_stdin_bytes

    piped = [
        what
        for what, value in (("the submission", submission), ("--template", template), ("--references", references))
        if isinstance(value, str | Path) and str(value) == STDIN
    ]
    if len(piped) > 1:
        raise InputError(
            f"{' and '.join(piped)} are both -, but standard input can be read only once; give one of them as a file"
        )
    if isinstance(submission, bytes):
        raw, path = submission, name or "<bytes>"
    elif str(submission) == STDIN:
        raw, path = read_stdin_bytes("the submission"), name or "<stdin>"
    else:
        from vistkit.data.readers import read_json_bytes

        path = name or str(submission)
        # .zip / .gz opened as everywhere, capped at the input limit; a FIFO or a device refused before reading; too
        # many JSON values refused while reading
        raw = read_json_bytes(submission)
    tmpl = _load_side(template, "template")
    refs = _load_side(references, "references")
    required = required_sequences(tmpl, refs)
    report = ValidationReport(path=_printable(path), n_required=None if required is None else len(required))
    text, encoding_findings = _decode(raw)
    del raw  # from here on the text alone is held (a caller that gave the bytes keeps its own)
    from vistkit.data.readers import check_json_values

    check_json_values(text, path)  # before parsing: the parsed document is held whole
    # the file read as `vistkit score` reads it comes first, though it is reported last (`_reader_check`): one
    # parsed document at a time is held, and of this one only the verdict is kept
    as_score = _read_as_score(text, path)
    later: list[Finding] = []
    entries = _challenge_checks(text, report, required, later)
    del text
    if entries is not None:
        report.n_stories = len(entries)
    report.findings.extend(encoding_findings)
    report.findings.extend(later)
    if entries is not None:
        _vistkit_checks(entries, report, tmpl)
        _reader_check(as_score, path, entries, report)
    return report


def _parse(text: str, *, unique: bool) -> Any:
    """JSON ``text`` as the challenge's checks read it: numbers kept as written (`_Number`), NaN and Infinity
    refused; with ``unique``, a key given twice in one object raises `DuplicateKeyError`, else the last one
    wins, as in Gson's ``JsonObject`` (the challenge's reader)."""
    from vistkit.data.readers import unique_pairs

    return json.loads(
        text,
        parse_int=_Number,
        parse_float=_Number,
        parse_constant=_reject_constant,
        object_pairs_hook=unique_pairs if unique else None,
    )


#: the end of a detail naming a story file given as a submission
_CONVERT = (
    "a story file vistkit score reads, but not a challenge submission, which is one JSON object with the stories "
    "under 'output_stories' (vistkit.data.readers.write_challenge writes one from any story file)"
)


def _story_file_text(text: str) -> str:
    """``; the file is JSONL ...`` when ``text``, which is not JSON, is a JSONL or CSV story file (its first record
    or header has a text field); "" otherwise."""
    import csv

    from vistkit.data.readers import sniff_format

    head = text.lstrip("\ufeff \t\r\n")[: 1 << 16].split("\n", 1)[0]
    fmt = sniff_format(text)
    texts = ("text", "story", "story_text_normalized")
    if fmt == "jsonl":
        try:
            first = json.loads(head)
        except (ValueError, RecursionError):
            return ""
        if isinstance(first, dict) and any(isinstance(first.get(f), str) for f in texts):
            return f"; the file is JSONL (one story per line), {_CONVERT}"
    elif fmt == "csv":
        for sep, name in ((",", "CSV"), ("\t", "TSV")):
            try:
                cells = next(csv.reader([head.rstrip("\r")], delimiter=sep), [])
            except csv.Error:  # a quote or a carriage return inside: no story file's header
                continue
            if any(c.strip() in texts for c in cells):
                return f"; the file is {name} with a header row, {_CONVERT}"
    return ""


def _other_json(data: dict[Any, Any]) -> str:
    """The detail for a JSON object without ``output_stories``: a key that is it written otherwise
    (``Output_Stories``), or the story format the file is in (SIS, one story record, TAPM); "" otherwise."""
    from vistkit.data.readers import _TAPM_KEY, _dii_error, _one_record

    for key in data:
        if isinstance(key, str) and re.sub(r"[\s_\-]", "", key).casefold() == "outputstories":
            return f"it has the key '{key}': name it 'output_stories' (lower case, with '_')"
    if isinstance(annotations := data.get("annotations"), list):
        first = annotations[0] if annotations else None
        first = first[0] if isinstance(first, list) and first else first
        if isinstance(first, dict) and _dii_error(first, "") is not None:
            return (
                "it is VIST's description-in-isolation (DII) file, one caption per photo and no story; a submission "
                "holds one story per photo sequence under 'output_stories'"
            )
        what = "a VIST story-in-sequence (SIS) file"
    elif _one_record(data):
        what = "one story record (as a JSONL line)"
    elif data and all(isinstance(k, str) and _TAPM_KEY.match(k) and isinstance(v, str) for k, v in data.items()):
        what = "a tapm file ({album_photo1_..._photo5: text})"
    else:
        return ""
    return f"it is {what}, {_CONVERT}"


def _challenge_checks(
    text: str, report: ValidationReport, required: Sequence[str] | None, later: list[Finding]
) -> list[_Entry] | None:
    """Checks 1-4 of the challenge; returns the bound stories when they could be bound. A key given twice in one
    JSON object is vistkit's error, added to ``later`` (it comes after the challenge's findings): the challenge's
    reader kept the last value of such a key and judged on, and so do these checks."""
    add = report.findings.append
    # 1. JSON syntax
    from vistkit.data.readers import DuplicateKeyError

    try:
        try:
            data = _parse(text, unique=True)
        except DuplicateKeyError as exc:
            shown = _printable(str(exc))
            later.append(
                Finding(
                    "json-duplicate-key",
                    Level.ERROR,
                    Origin.VISTKIT,
                    f"[Error] (vistkit) {shown[:1].upper()}{shown[1:]}: the challenge's reader kept only the last "
                    "one (as the checks above do) and vistkit score refuses the file; give each key once.",
                )
            )
            data = _parse(text, unique=False)
    except json.JSONDecodeError as exc:
        from vistkit.data.readers import json_error_text

        detail = f"line {exc.lineno}, column {exc.colno}: {json_error_text(exc)}{_story_file_text(text)}"
        add(_syntax_error(detail, line=exc.lineno, column=exc.colno))
        return None
    except ValueError as exc:  # NaN / Infinity
        add(_syntax_error(str(exc)))
        return None
    except RecursionError:
        add(
            Finding(
                "json-syntax",
                Level.ERROR,
                Origin.VISTKIT,
                "[Error] (vistkit) The JSON is nested too deeply to read.",
            )
        )
        return None
    if not isinstance(data, dict):
        add(
            Finding(
                "structure",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) The file holds {_kind(data)}, not a JSON object with 'output_stories' "
                "(the challenge's evaluator crashes on it).",
            )
        )
        return None
    stories = data.get("output_stories")
    if stories is None:
        add(
            Finding(
                "structure",
                Level.ERROR,
                Origin.VISTKIT,
                "[Error] (vistkit) The file has no 'output_stories' list (the challenge's evaluator crashes "
                "on it); put the stories in a list under 'output_stories'.",
                _printable(_other_json(data)),
            )
        )
        return None
    if not isinstance(stories, list):
        add(_syntax_error(f"output_stories is {_kind(stories)}, not a list of stories"))
        return None
    # Gson binds the whole list before any check: the first shape error anywhere wins. Each parsed story is let go
    # once bound (its text is not kept: `_Entry`), so the parsed document shrinks as the entries grow.
    entries: list[_Entry] = []
    nulls: list[int] = []
    for i, rec in enumerate(stories):
        if rec is None:
            nulls.append(i)
            continue
        try:
            entries.append(_bind(rec, i))
        except TypeError as exc:
            add(_syntax_error(str(exc), line=None))
            return None
        stories[i] = None
    del data, stories
    if nulls:
        add(
            Finding(
                "structure",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) output_stories[{nulls[0]}] is null, not a story object (the challenge's "
                "evaluator crashes on it).",
                indices=tuple(nulls),
                offenders=tuple((None, i) for i in nulls),
            )
        )
        return None
    # 1b. every story has its three attributes (VistChallengeStory.hasNull)
    incomplete = [e for e in entries if e.has_null]
    if incomplete:
        first = incomplete[0]
        msg = f"[Error] {MSG_ATTRIBUTES}"
        if first.cha_key is not None:
            msg += f" Photo seq: {_printable(first.cha_key)}"
        absent = (first.album_id is None, first.photos is None, not first.text_given)
        missing = [f for f, gone in zip(FIELDS, absent, strict=True) if gone]
        add(
            Finding(
                "attributes",
                Level.ERROR,
                Origin.CHALLENGE,
                msg,
                f"output_stories[{first.index}] has no {', '.join(missing)} (missing or null)"
                + (f"; {len(incomplete) - 1} more such stories" if len(incomplete) > 1 else ""),
                sequences=tuple(_printable(e.key) for e in incomplete if e.photos is not None),
                indices=tuple(e.index for e in incomplete),
                offenders=tuple(_offender(e) for e in incomplete),
            )
        )
        return entries
    # 2.
    add(Finding("json-syntax", Level.PASSED, Origin.CHALLENGE, f"[Passed] {MSG_PASSED_SYNTAX}"))
    # 3. one story per sequence
    seen: set[str] = set()
    seen_challenge: set[str | None] = set()  # the challenge's HashSet of getPhotoIdSeqStr()
    dups: list[_Entry] = []
    for e in entries:
        if e.cha_key in seen_challenge:
            dups.append(e)
        seen_challenge.add(e.cha_key)
        seen.add(e.key)
    if dups:
        add(
            Finding(
                "one-story-per-sequence",
                Level.ERROR,
                Origin.CHALLENGE,
                f"[Error] {MSG_DUPLICATE} Photo seq: {_printable(dups[0].cha_key or '')}",
                f"output_stories[{dups[0].index}] repeats an earlier sequence",
                sequences=tuple(dict.fromkeys(_printable(e.key) for e in dups)),
                indices=tuple(e.index for e in dups),
                offenders=tuple(_offender(e) for e in dups),
            )
        )
        return entries
    add(Finding("one-story-per-sequence", Level.PASSED, Origin.CHALLENGE, f"[Passed] {MSG_PASSED_UNIQUE}"))
    # 4. every required sequence has a story
    if required is None:
        add(
            Finding(
                "all-stories",
                Level.NOTE,
                Origin.VISTKIT,
                "[Note] (vistkit) Not checked whether all required stories are submitted: give --template "
                "(the challenge's vist-challenge-template.json) and/or --references.",
            )
        )
        return entries
    missing_keys = [k for k in required if k not in seen]
    if missing_keys:
        add(
            Finding(
                "all-stories",
                Level.ERROR,
                Origin.CHALLENGE,
                f"[Error] {MSG_MISSING} Photo seq: {_printable(challenge_key(missing_keys[0].split('-')))}",
                f"{len(missing_keys)} of {len(required)} required stories are missing"
                + (
                    "; none of the submission's sequences is a required one: is the submission, or the --template "
                    "or --references, of another split?"
                    if seen and len(missing_keys) == len(required)
                    else ""
                ),
                sequences=tuple(_printable(k) for k in missing_keys),
                offenders=tuple((_printable(k), None) for k in missing_keys),
            )
        )
        return entries
    add(Finding("all-stories", Level.PASSED, Origin.CHALLENGE, f"[Passed] {MSG_PASSED_COMPLETE}"))
    return entries


def _vistkit_checks(entries: list[_Entry], report: ValidationReport, template: StorySet | None) -> None:
    """vistkit's own checks (after the challenge's): each finding names every offender."""

    def flag(check: str, level: Level, offenders: list[_Entry], what: str, *, fix: str = "") -> None:
        if not offenders:
            return
        label = "[Error] (vistkit)" if level is Level.ERROR else "[Warning] (vistkit)"
        first, n = offenders[0], len(offenders)
        msg = (
            f"{label} {what}: {n} (first: output_stories[{first.index}]"
            + (f", Photo seq: {_printable(first.cha_key)}" if first.cha_key else "")
            + ")"
            + (f"; {fix}" if fix else ".")
        )
        report.findings.append(
            Finding(
                check,
                level,
                Origin.VISTKIT,
                msg,
                sequences=tuple(_printable(e.key) for e in offenders if e.photos is not None),
                indices=tuple(e.index for e in offenders),
                offenders=tuple(_offender(e) for e in offenders),
            )
        )

    if not entries:
        report.findings.append(
            Finding("empty", Level.ERROR, Origin.VISTKIT, "[Error] (vistkit) The submission holds no stories.")
        )
        return
    flag(
        "types",
        Level.WARNING,
        [e for e in entries if e.coerced],
        "Stories with numbers or booleans where the format has strings",
        fix="write album_id, photo ids and story_text_normalized as strings (the challenge read them as written).",
    )
    with_photos = [e for e in entries if e.photos is not None]
    flag(
        "null-photo-id",
        Level.ERROR,
        [e for e in with_photos if any(p is None for p in e.photos or ())],
        "Stories with a null photo id",
        fix="give every photo id as a string.",
    )
    flag(
        "empty-photo-sequence",
        Level.ERROR,
        [e for e in with_photos if not e.photos],
        "Stories with an empty photo_sequence",
        fix="list the story's photo ids in order.",
    )
    flag(
        "photo-count",
        Level.WARNING,
        [e for e in with_photos if e.photos and len(e.photos) != EXPECTED_PHOTOS],
        f"Stories whose photo_sequence has other than {EXPECTED_PHOTOS} photos",
        fix="VIST sequences have 5 photos; check the ids.",
    )
    flag(
        "repeated-photo",
        Level.WARNING,
        [e for e in with_photos if e.photos and len(set(e.photos)) != len(e.photos)],
        "Stories that repeat a photo id within their photo_sequence",
    )
    if template is not None:
        albums = {s.key("sequence"): s.album_id for s in template}
        flag(
            "album",
            Level.WARNING,
            [
                e
                for e in with_photos
                if e.key in albums
                and albums[e.key] is not None
                and e.album_id is not None
                and e.album_id != albums[e.key]
            ],
            "Stories whose album_id differs from the template's",
            fix="copy album_id from the template (the challenge ignores it, so scores are unaffected).",
        )
        flag(
            "not-in-template",
            Level.WARNING,
            [e for e in with_photos if e.key not in albums],
            "Stories whose photo sequence is not in the template",
            fix="the challenge ignores them when scoring.",
        )
    flag(
        "empty-story",
        Level.WARNING,
        [e for e in entries if e.text_blank],
        "Empty stories",
        fix="an empty story scores 0.",
    )
    flag(
        "non-ascii",
        Level.WARNING,
        [e for e in entries if e.text_given and not e.text_ascii],
        "Stories with non-ASCII characters",
        fix="the challenge README says they are ignored in evaluation (meteor-vist --drop-non-ascii does that).",
    )


# ------------------------------------------------------------------------------------- as `vistkit score` reads
_STORY_AT = re.compile(r"output_stories\[(\d+)\]")
_KEY_HINT = " (choose another --key?)"  # by_key's hint: validate keys by sequence only, as the challenge did


#: what `_read_as_score` found: None (read as ``vistkit score`` reads it), or the reader's refusal and, when every
#: story was read but two have one key, the stories
_AsScore = tuple[str, StorySet | None] | None


def _read_as_score(text: str, path: str) -> _AsScore:
    """Read the submission as ``vistkit score`` reads a hypothesis file (`vistkit.data.readers.read_stories` on a
    challenge file: `parse_json`, the challenge reader, then one story per key under the default keying, which is
    ``sequence`` for a challenge file): None when it reads, else the refusal (without the hint to choose another
    ``--key``: validate keys by sequence only, as the challenge did) and the stories when only keys repeat.

    ``text`` is the text already read (the bytes decoded by `_decode`, one byte-order mark skipped), parsed again
    (a pipe or standard input cannot be read twice, and a file may change in between) through the functions
    `read_stories` calls for a JSON file (and ``vistkit score -`` for JSON piped in); the reader's checks on the
    bytes (`vistkit.data.readers.check_head`, UTF-8) are left out: content they refuse is not UTF-8 (an error
    already) or no JSON (no story bound, so `_reader_check` drops the verdict)."""
    from vistkit.data.readers import _json_stories, parse_json

    where = Path(path)
    stories: StorySet | None = None
    try:
        # each story is checked whole as it is read, then kept without its text (only keys are asked of it below),
        # while the challenge reader lets each parsed record go: the text and the parsed document are the peak
        read = _json_stories(parse_json(text, where), "challenge", where, system=None, field="text", slim=True)
        stories = StorySet(read, source=str(where))
        if not stories:
            raise InputError(f"{where}: holds no stories")
        stories.by_key(stories.default_keying())
        return None
    except VistkitError as exc:
        return str(exc).replace(_KEY_HINT, ""), stories


def _reader_check(as_score: _AsScore, path: str, entries: list[_Entry], report: ValidationReport) -> None:
    """Report what `_read_as_score` found (``as_score``): a refusal becomes an error in the reader's words, naming
    the offender. A refusal about a story that an earlier error names already, or of a file that is not UTF-8 or
    holds no stories, adds nothing and is left out (the reader stops at its first refusal, so it may not say
    more)."""
    if as_score is None:
        return
    message, stories = as_score
    where = Path(path)
    if any(f.check in ("encoding", "empty", "json-duplicate-key") for f in report.errors):
        return
    at_fault = {i for f in report.errors for _, i in f.offenders if i is not None}
    by_index = {e.index: e for e in entries}
    detail = ""
    offenders: tuple[Offender, ...] = ()
    if stories is not None:  # every story read, but two of them have one key
        repeats = _same_once_read(stories, by_index)
        if repeats is None:  # only sequences repeated as written: the challenge's check named them
            return
        detail, offenders = repeats
    else:
        found = _STORY_AT.search(message.removeprefix(f"{where}: "))
        if found is not None and int(found.group(1)) in by_index:
            if int(found.group(1)) in at_fault:
                return
            offenders = (_offender(by_index[int(found.group(1))]),)
    report.findings.append(
        Finding(
            "readable",
            Level.ERROR,
            Origin.VISTKIT,
            f"[Error] (vistkit) vistkit score refuses this submission: {_printable(message)}",
            detail,
            sequences=tuple(dict.fromkeys(seq for seq, _ in offenders if seq is not None)),
            indices=tuple(i for _, i in offenders if i is not None),
            offenders=offenders,
        )
    )


def _same_once_read(stories: StorySet, by_index: dict[int, _Entry]) -> tuple[str, tuple[Offender, ...]] | None:
    """The stories whose photo sequence, as written, differs from an earlier story's but is the same once read
    (`Story` drops the spaces around ids and normalises them to Unicode NFC, so that an id typed two ways
    matches), and why; None when there is none (every repeat is one as written, which the challenge names)."""
    groups: dict[str, list[int]] = {}
    for i, story in enumerate(stories):
        groups.setdefault(story.sequence, []).append(i)
    offenders: list[Offender] = []
    first_pair: tuple[_Entry, _Entry, str] | None = None
    for key, idx in groups.items():
        if len(idx) < 2 or not all(i in by_index for i in idx):
            continue
        written = {by_index[idx[0]].cha_key}
        for i in idx[1:]:
            entry = by_index[i]
            if entry.cha_key in written:
                continue
            written.add(entry.cha_key)
            offenders.append((_printable(key), i))
            if first_pair is None:
                first_pair = (by_index[idx[0]], entry, key)
    if first_pair is None:
        return None
    a, b, key = first_pair
    stripped = [tuple(p.strip(ID_EDGE_SPACES) if p is not None else p for p in (e.photos or ())) for e in (a, b)]
    shown = [_printable(e.key) for e in (a, b)]
    if stripped[0] == stripped[1]:
        why = "once the spaces around photo ids are dropped"
    else:
        shown = [ascii(e.key)[1:-1] for e in (a, b)]  # they look alike: the code points show the difference
        spaced = any(p is not None and p.strip(ID_EDGE_SPACES) != p for e in (a, b) for p in e.photos or ())
        why = (
            "once the spaces around photo ids are dropped and ids are normalised to Unicode NFC"
            if spaced
            else "once photo ids are normalised to Unicode NFC (an accent typed as its own character is composed)"
        )
    more = len(offenders) - 1
    detail = (
        f"output_stories[{a.index}] ('{shown[0]}') and output_stories[{b.index}] ('{shown[1]}') are one sequence, "
        f"'{_printable(key)}', {why}, as vistkit compares ids; give each sequence one story"
        + (f"; {more} more such {'story' if more == 1 else 'stories'}" if more > 0 else "")
    )
    return detail, tuple(offenders)
