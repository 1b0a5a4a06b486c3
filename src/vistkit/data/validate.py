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
   checked when neither is).

Sequence keys: in messages, a photo sequence is written as the challenge writes it, every photo id followed
by ``-`` (``"1-2-3-4-5-"``, ``VistChallengeStory.getPhotoIdSeqStr``). In structured results
(`Finding.sequences`, JSON output) sequences are vistkit keys: ids joined by ``-`` without the trailing
``-`` (`vistkit.data.story.Keying`).

Where we differ from the Java program, on purpose:

- it stops at the first error and names one offender; we name the first offender with its exact message and
  keep every offender in the report (the text output lists up to `MAX_LISTED`);
- it prints both ``[Passed]`` lines of checks 1-3 together once both pass; we print each as soon as its
  check passes (the same lines in the same order when the file is valid);
- Gson reads leniently (comments, single quotes, unquoted names, ``NaN``, data after the top-level value);
  vistkit requires standard JSON (RFC 8259), since other tools cannot read such files;
- where the Java program crashes (the top level is not an object, ``output_stories`` is missing or ``null``,
  a story is ``null``) we report a vistkit error instead.

Gson turns JSON numbers and booleans into strings where a string is expected (``123`` -> ``"123"``, as
written); so do we, with a warning.

After the challenge's checks come vistkit's own, marked ``(vistkit)``: encoding (not UTF-8 is an error; a
byte-order mark a warning), values Gson coerced (warning), ``null`` photo ids and empty photo sequences
(errors), sequences of other than 5 photos or with a repeated photo (warnings), album ids that differ from
the template's and sequences outside the template (warnings), empty stories (warning), non-ASCII characters
(warning: the challenge README says they are ignored in evaluation), a submission without stories (error).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from vistkit.data.story import StorySet, sequence_key
from vistkit.errors import InputError

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


@dataclass(frozen=True)
class Finding:
    """One result line: a passed check, an error, a warning or a note.

    ``message`` is the line as printed (the challenge's exact text for its checks). ``sequences`` are vistkit
    keys (ids joined by ``-``) and ``indices`` positions in ``output_stories`` of all offenders.
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

    def lines(self, *, max_listed: int = MAX_LISTED) -> list[str]:
        """The printed lines: the message, then (for several offenders) more of them and a count."""
        out = [self.message]
        if self.detail:
            out.append(f"  (vistkit: {self.detail})")
        if self.origin is Origin.CHALLENGE and self.level is Level.ERROR and len(self.sequences) > 1:
            prefix = self.message.split(" Photo seq: ")[0]
            for seq in self.sequences[1:max_listed]:
                out.append(f"{prefix} Photo seq: {seq + '-' if seq else ''}")
            if len(self.sequences) > max_listed:
                out.append(f"  (vistkit: ... and {len(self.sequences) - max_listed} more; see --format json)")
        return out

    def as_dict(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict."""
        return {
            "check": self.check,
            "level": self.level.value,
            "origin": self.origin.value,
            "message": self.message,
            "detail": self.detail,
            "sequences": list(self.sequences),
            "indices": list(self.indices),
            "line": self.line,
            "column": self.column,
        }


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
        """The findings at error level."""
        return [f for f in self.findings if f.level is Level.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """The findings at warning level."""
        return [f for f in self.findings if f.level is Level.WARNING]

    def lines(self, *, max_listed: int = MAX_LISTED) -> list[str]:
        """The text report: the challenge's ``[Test File]`` line, every finding, a summary."""
        out = [f"[Test File] {self.path}"]
        for f in self.findings:
            out.extend(f.lines(max_listed=max_listed))
        verdict = "VALID" if self.ok else "INVALID"
        out.append(
            f"(vistkit) {verdict}: {len(self.errors)} error(s), {len(self.warnings)} warning(s)"
            + (f"; {self.n_stories} stories" if self.n_stories is not None else "")
            + (f", {self.n_required} required" if self.n_required is not None else "")
        )
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``vistkit validate --format json``: ``path``, ``valid``, ``n_stories``, ``n_required``,
        ``errors``, ``warnings`` (counts) and ``findings`` (each `Finding.as_dict`: check, level, origin,
        message, detail, sequences, indices, line, column)."""
        return {
            "path": self.path,
            "valid": self.ok,
            "n_stories": self.n_stories,
            "n_required": self.n_required,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [f.as_dict() for f in self.findings],
        }


def challenge_key(photo_ids: Iterable[str]) -> str:
    """The challenge's photo-sequence string: every id followed by ``-`` (``getPhotoIdSeqStr``)."""
    return "".join(f"{p}-" for p in photo_ids)


def _printable(text: str) -> str:
    """Text safe to print and to encode as UTF-8 (lone surrogates from ``\\ud800`` escapes become escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
        found.append(
            Finding(
                "encoding",
                Level.WARNING,
                Origin.VISTKIT,
                "[Warning] (vistkit) The file starts with a UTF-8 byte-order mark; save it without one "
                "(the challenge's Java reader does not skip it).",
            )
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        from vistkit.data.readers import binary_kind

        text = raw.decode("utf-8", errors="replace")
        line = raw[: exc.start].count(b"\n") + 1
        kind = binary_kind(raw[:4]) if exc.start < 4 else None
        found.append(
            Finding(
                "encoding",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) The file is not UTF-8 text but {kind}."
                if kind
                else f"[Error] (vistkit) The file is not UTF-8 text (byte {exc.start}, line {line}: "
                f"{exc.reason}); save it as UTF-8.",
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


@dataclass
class _Entry:
    """One story as Gson binds it: strings (or None) plus what was coerced."""

    index: int
    album_id: str | None
    photos: list[str | None] | None
    text: str | None
    coerced: list[str]

    @property
    def has_null(self) -> bool:  # VistChallengeStory.hasNull
        return self.album_id is None or self.photos is None or self.text is None

    @property
    def key(self) -> str:
        return sequence_key("null" if p is None else p for p in (self.photos or ()))

    @property
    def cha_key(self) -> str | None:
        if self.photos is None:
            return None
        return challenge_key("null" if p is None else p for p in self.photos)


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
    return _Entry(index, values["album_id"], photos, values["story_text_normalized"], coerced)


# --------------------------------------------------------------------------------------------------- checks
def _load_side(source: str | Path | StorySet | None, what: str) -> StorySet | None:
    if source is None or isinstance(source, StorySet):
        return source
    from vistkit.data.readers import read_stories

    return read_stories(source, format="challenge" if what == "template" else None)


def required_sequences(template: StorySet | None, references: StorySet | None) -> list[str] | None:
    """The sequences that need a story: template ∩ references (either alone; None when neither is given)."""
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
        keys = [k for k in keys if k in wanted]
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
    from vistkit.data.readers import check_json_values

    check_json_values(text, path)  # before parsing: the parsed document is held whole
    entries = _challenge_checks(text, report, required)
    if entries is not None:
        report.n_stories = len(entries)
    report.findings.extend(encoding_findings)
    if entries is not None:
        _vistkit_checks(entries, report, tmpl)
    return report


def _challenge_checks(text: str, report: ValidationReport, required: Sequence[str] | None) -> list[_Entry] | None:
    """Checks 1-4 of the challenge; returns the bound stories when they could be bound."""
    add = report.findings.append
    # 1. JSON syntax
    from vistkit.data.readers import DuplicateKeyError, unique_pairs

    try:
        data = json.loads(
            text,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_reject_constant,
            object_pairs_hook=unique_pairs,
        )
    except DuplicateKeyError as exc:
        add(
            Finding(
                "json-duplicate-key",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) {_printable(str(exc))[:1].upper()}{_printable(str(exc))[1:]}: a JSON reader "
                "keeps only the last one and silently drops the others; give each key once.",
            )
        )
        return None
    except json.JSONDecodeError as exc:
        add(_syntax_error(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", line=exc.lineno, column=exc.colno))
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
            )
        )
        return None
    if not isinstance(stories, list):
        add(_syntax_error(f"output_stories is {_kind(stories)}, not a list of stories"))
        return None
    # Gson binds the whole list before any check: the first shape error anywhere wins.
    entries: list[_Entry] = []
    for i, rec in enumerate(stories):
        if rec is None:
            continue
        try:
            entries.append(_bind(rec, i))
        except TypeError as exc:
            add(_syntax_error(str(exc), line=None))
            return None
    nulls = [i for i, rec in enumerate(stories) if rec is None]
    if nulls:
        add(
            Finding(
                "structure",
                Level.ERROR,
                Origin.VISTKIT,
                f"[Error] (vistkit) output_stories[{nulls[0]}] is null, not a story object (the challenge's "
                "evaluator crashes on it).",
                indices=tuple(nulls),
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
        missing = [f for f, v in zip(FIELDS, (first.album_id, first.photos, first.text), strict=True) if v is None]
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
                f"{len(missing_keys)} of {len(required)} required stories are missing",
                sequences=tuple(_printable(k) for k in missing_keys),
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
        [e for e in entries if e.text is not None and not e.text.strip()],
        "Empty stories",
        fix="an empty story scores 0.",
    )
    flag(
        "non-ascii",
        Level.WARNING,
        [e for e in entries if e.text is not None and not e.text.isascii()],
        "Stories with non-ASCII characters",
        fix="the challenge README says they are ignored in evaluation (meteor-vist --drop-non-ascii does that).",
    )
