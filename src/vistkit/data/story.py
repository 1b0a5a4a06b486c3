"""The data model: a `Story`, explicit keying, and an ordered `StorySet`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import overload

from vistkit.errors import InputError

#: set while a Python API call runs (`python_api`): its errors name Python's arguments, not the CLI's flags
_API_CALL: ContextVar[bool] = ContextVar("vistkit_api_call", default=False)


@contextmanager
def python_api() -> Iterator[None]:
    """Mark the code inside as called through the Python API (`vistkit.score`, a scorer's ``score``): errors it
    raises name Python's arguments (`option_name`)."""
    token = _API_CALL.set(True)
    try:
        yield
    finally:
        _API_CALL.reset(token)


def option_name(flag: str, argument: str) -> str:
    """How an error names an option: the Python ``argument`` (``key='album'``) inside a Python API call
    (`python_api`), else the command line's ``flag`` (``--key album``). A `vistkit` command that calls the API in
    its own process (``meta pairs``, ``distance``) keeps naming its flags."""
    if not _API_CALL.get():
        return flag
    cli = sys.modules.get("vistkit.cli")
    return flag if cli is not None and getattr(cli, "RAW_ARGS", None) else argument


class Keying(StrEnum):
    """How stories are matched to each other (hypothesis to references, human to model).

    - ``story``: by ``story_id``;
    - ``sequence``: by the ordered photo ids joined by ``-`` (the 2018 challenge's key, without its trailing ``-``);
    - ``album``: by ``album_id`` (AREL / vist_eval style: all stories of an album are references).
    """

    STORY = "story"
    SEQUENCE = "sequence"
    ALBUM = "album"

    @property
    def article(self) -> str:
        """The article before the key's name in a sentence: "an album key", "a story key"."""
        return "an" if self is Keying.ALBUM else "a"

    @classmethod
    def parse(cls, value: Keying | str) -> Keying:
        """``value`` as a Keying (case and surrounding spaces ignored); `InputError` naming the choices."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InputError(f"key {value!r} is not a keying; use one of {', '.join(k.value for k in cls)}") from None


def _shown(text: str) -> str:
    """An id for a message: control characters escaped, at most 60 characters."""
    shown = text if text.isprintable() else repr(text)[1:-1]
    if not _INVISIBLE_LETTERS.isdisjoint(shown):  # printable, yet shown as nothing: escaped as repr escapes U+200B
        shown = "".join(f"\\u{ord(c):04x}" if c in _INVISIBLE_LETTERS else c for c in shown)
    return shown if len(shown) <= 60 else shown[:57] + "..."


#: Unicode categories no id may hold: control characters (tab, newline, ESC...), invisible format characters
#: (zero-width space, byte-order mark, direction marks) and line/paragraph separators
_BAD_ID_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
#: letters that show as nothing though Unicode calls them letters (category Lo): the Hangul fillers, refused in
#: ids as the invisible format characters are
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


#: spaces around an id (``"45530 "`` from a CSV cell written ``45530, text``) are dropped, so the id matches the
#: same id written without them; tabs and new lines stay refused (control characters, below)
ID_EDGE_SPACES = " \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def clean_id(value: str, what: str, story_id: str) -> str:
    """An id (story, album, photo) as it is matched: spaces around it dropped (`ID_EDGE_SPACES`: ``" 45530 "``
    matches ``"45530"``) and Unicode NFC (``café`` typed as ``e`` + accent matches the composed ``é``); an id
    holding a control or invisible character (``"a\\u200b"`` looks like ``"a"`` and would silently match nothing)
    is refused in one sentence. ASCII ids without control characters or edge spaces pass unchanged."""
    if type(value) is not str:
        if not isinstance(value, str):
            raise InputError(
                f"story {_shown(str(story_id))!r}: {what} must be a string, not {type(value).__name__}"
            )
        value = _plain(value)
    if value[:1] in ID_EDGE_SPACES or value[-1:] in ID_EDGE_SPACES:
        value = value.strip(ID_EDGE_SPACES)
    if value.isascii() and value.isprintable():
        return value
    import unicodedata

    for ch in value:
        if unicodedata.category(ch) in _BAD_ID_CATEGORIES or ch in _INVISIBLE_LETTERS:
            name = unicodedata.name(ch, "")
            char = f"U+{ord(ch):04X} ({name.lower()})" if name else f"the control character U+{ord(ch):04X}"
            owner = "" if what == "story_id" else f"story {_shown(str(story_id))!r}: "
            raise InputError(
                f"{owner}{what} '{_shown(value)}' holds {char}, which is invisible in an id (it would not match "
                "the same id typed without it); remove it"
            )
    return unicodedata.normalize("NFC", value)


def _plain(value: str) -> str:
    """A str subclass (NumPy's ``np.str_`` from an array of ids, pandas' or a user's own) as the plain text it
    holds: ``str.__str__`` copies the characters, whatever the subclass's ``__str__`` says."""
    return value if type(value) is str else str.__str__(value)


def _texts(value: object, field_name: str, items: str, story_id: str) -> tuple[str, ...]:
    """A Story's ``photo_ids`` or ``sentences`` as a tuple (a list, a tuple or any other iterable of texts is
    welcome); one text or a non-iterable value is refused, since a string would be read character by character."""
    from collections.abc import Iterable as _Iterable

    if isinstance(value, str | bytes) or not isinstance(value, _Iterable) or isinstance(value, dict | set | frozenset):
        raise InputError(
            f"story {_shown(str(story_id))!r}: {field_name} must be a list or tuple of {items}, not "
            f"{type(value).__name__}"
        )
    return tuple(value)


def _check_photo_ids(photos: tuple[str, ...], story_id: str) -> None:
    """`InputError` for a photo id the readers refuse (`vistkit.data.readers.photo_id_text`): an empty one, or one
    holding ``-``, the joiner of sequence keys (``("1-2", "3")`` and ``("1", "2-3")`` are both ``1-2-3``)."""
    for position, photo in enumerate(photos, start=1):
        if photo and "-" not in photo:
            continue
        problem = "is empty" if not photo else f"('{_shown(photo)}') contains '-'"
        raise InputError(
            f"story {_shown(story_id)!r}: photo id {position} {problem}, but sequence keys join photo ids with '-', "
            "so different sequences would collide; give each photo's own id"
        )


def sequence_key(photo_ids: Iterable[str]) -> str:
    """The sequence key of an ordered photo list: ids joined by ``-``."""
    return "-".join(str(p) for p in photo_ids)


@dataclass(frozen=True, slots=True)
class Story:
    """One story.

    ``sentences`` is set when the source knows the sentence boundaries (the five VIST storylets); otherwise
    ``None`` and metrics split ``text`` themselves. ``photo_ids`` are in story order. Ids follow the readers'
    rules: ``story_id`` and ``album_id`` (when given) are not empty, no photo id is empty or holds ``-`` (the
    joiner of sequence keys), and no id holds a control or invisible character.
    """

    story_id: str
    text: str
    sentences: tuple[str, ...] | None = None
    photo_ids: tuple[str, ...] = ()
    album_id: str | None = None
    system: str | None = None
    meta: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __new__(cls, *args: object, **fields: object) -> Story:
        """A misspelt field (``id=``, ``photos=``) is refused naming the one meant: Python said only "got an
        unexpected keyword argument"."""
        known = cls.__dataclass_fields__  # a subclass's own fields too
        if fields and not known.keys() >= fields.keys():
            _refuse_story_field(cls.__name__, list(known), next(k for k in fields if k not in known))
        return object.__new__(cls)  # (not super(): a slots dataclass is a new class, which the cell does not name)

    def __post_init__(self) -> None:
        from vistkit.limits import STORY_CHARS_ENV, max_story_chars

        if not isinstance(self.story_id, str) or not isinstance(self.text, str):
            bad = "story_id" if not isinstance(self.story_id, str) else "text"
            raise InputError(
                f"a Story's {bad} must be a string, not {type(getattr(self, bad)).__name__} "
                f"(Story(story_id='1', text='We went to the park. ...'))"
            )

        object.__setattr__(self, "story_id", clean_id(self.story_id, "story_id", self.story_id))
        if not self.story_id:  # as the readers refuse a record without one: no key could find the story
            raise InputError(
                "story_id is empty (or only spaces); give every story an id of its own (the photo sequence, "
                "'1-2-3-4-5', where the photos are all that names it)"
            )
        if type(self.text) is not str:  # np.str_ and other str subclasses: their plain text
            object.__setattr__(self, "text", _plain(self.text))
        if type(self.photo_ids) is not tuple:
            object.__setattr__(self, "photo_ids", _texts(self.photo_ids, "photo_ids", "photo ids", self.story_id))
        if self.sentences is not None and type(self.sentences) is not tuple:
            object.__setattr__(self, "sentences", _texts(self.sentences, "sentences", "texts", self.story_id))
        if self.sentences is not None and not all(type(x) is str for x in self.sentences):
            plain = tuple(_plain(x) if isinstance(x, str) else x for x in self.sentences)
            object.__setattr__(self, "sentences", plain)
        if self.sentences is not None and not all(type(x) is str for x in self.sentences):
            bad = next(x for x in self.sentences if type(x) is not str)
            raise InputError(
                f"story {_shown(self.story_id)!r}: every sentence must be a string, not {type(bad).__name__}"
            )
        if self.system is not None and not isinstance(self.system, str):
            raise InputError(
                f"story {_shown(self.story_id)!r}: system must be a string (the name of the model or 'human'), "
                f"not {type(self.system).__name__}"
            )
        if self.system is not None and type(self.system) is not str:
            object.__setattr__(self, "system", _plain(self.system))
        if not isinstance(self.meta, dict):
            raise InputError(
                f"story {_shown(self.story_id)!r}: meta must be a dict of extra fields, not {type(self.meta).__name__}"
            )
        if self.album_id is not None:
            object.__setattr__(self, "album_id", clean_id(self.album_id, "album_id", self.story_id))
            if not self.album_id:  # album '' would group every such story into one album under key='album'
                raise InputError(
                    f"story {_shown(self.story_id)!r}: album_id is empty (or only spaces); give the album's id, or "
                    "None for a story without an album"
                )
        if self.photo_ids and not all(
            type(p) is str and p and p.isascii() and p.isprintable() and p[0] != " " and p[-1] != " " and "-" not in p
            for p in self.photo_ids
        ):
            photos = tuple(clean_id(p, "a photo id", self.story_id) for p in self.photo_ids)
            _check_photo_ids(photos, self.story_id)
            object.__setattr__(self, "photo_ids", photos)
        for part in (self.text, *(self.sentences or ())):
            if isinstance(part, str) and "\x00" in part:
                raise InputError(
                    f"story {_shown(self.story_id)!r} holds a NUL character (U+0000), which is not text; is the file "
                    "UTF-16 (save it as UTF-8) or binary?"
                )
            if isinstance(part, str) and not part.isascii():
                try:
                    part.encode("utf-8")
                except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no tokenizer or file takes it
                    shown = self.story_id if len(self.story_id) <= 60 else self.story_id[:57] + "..."
                    raise InputError(
                        f"story {shown!r} holds a lone UTF-16 surrogate (U+{ord(part[exc.start]):04X}, half of a "
                        "surrogate pair), which is not text; remove it or give the whole pair"
                    ) from None
        limit = max_story_chars()
        if len(self.text) > limit:
            shown = self.story_id if len(self.story_id) <= 60 else self.story_id[:57] + "..."
            raise InputError(
                f"story {shown!r} holds {len(self.text):,} characters, over vistkit's limit of {limit:,} per "
                f"story (a VIST story has a few hundred); split it, or raise the limit with {STORY_CHARS_ENV}"
            )

    @property
    def sequence(self) -> str:
        """The sequence key (photo ids joined by ``-``); empty when the photos are unknown."""
        return sequence_key(self.photo_ids)

    def key(self, key: Keying | str | None = None, *, keying: Keying | str | None = None) -> str:
        """The key of this story under ``key`` (``story``, ``sequence`` or ``album``; ``keying=`` is its deprecated
        name); raises `InputError` when the source lacks that field."""
        keying = key if isinstance(key, Keying) and keying is None else _keying_given("story.key", key, keying)
        if keying is Keying.STORY:
            return self.story_id
        if keying is Keying.SEQUENCE:
            if not self.photo_ids:
                raise InputError(
                    f"story {_shown(self.story_id)!r} has no photo ids, so it cannot be keyed by sequence; "
                    "use --key story (key='story' in Python), or read a format that carries photo sequences"
                )
            return self.sequence
        if self.album_id is None:
            raise InputError(
                f"story {_shown(self.story_id)!r} has no album id, so it cannot be keyed by album; use --key story "
                "(key='story' in Python)"
            )
        return self.album_id

    def with_text(self, text: str, sentences: tuple[str, ...] | None = None) -> Story:
        """A copy with other text (and sentences)."""
        return replace(self, text=text, sentences=sentences)


class _FieldsSignature:
    """``Story(story_id, text, sentences=None, ...)`` (a subclass's own fields too): what ``help(Story)``,
    ``inspect.signature`` and an IDE show; `Story.__new__` takes ``*args, **fields`` to name a misspelt field,
    which hid the fields."""

    def __get__(self, obj: object, owner: type) -> object:
        import inspect

        init = inspect.signature(next(c.__dict__["__init__"] for c in owner.__mro__ if "__init__" in c.__dict__))
        return init.replace(parameters=list(init.parameters.values())[1:], return_annotation=owner.__name__)


Story.__signature__ = _FieldsSignature()  # type: ignore[attr-defined]

#: what other tools call a Story's fields (VIST's JSON, captioning code, the studio's ``img_seq``)
_STORY_FIELD_ALIASES = {
    **dict.fromkeys(("id", "storyid", "sid"), "story_id"),
    **dict.fromkeys(("story", "caption", "txt", "prediction", "hypothesis"), "text"),
    **dict.fromkeys(("sents", "storylets", "sentence", "lines"), "sentences"),
    **dict.fromkeys(
        ("photos", "photo", "images", "image_ids", "imageids", "img_ids", "imgseq", "photosequence", "photoid"),
        "photo_ids",
    ),
    **dict.fromkeys(("album", "albumid", "albums"), "album_id"),
    **dict.fromkeys(("model", "systemname", "method"), "system"),
    **dict.fromkeys(("metadata", "extra", "extras"), "meta"),
}


def _refuse_story_field(kind: str, known: list[str], name: str) -> None:
    """`InputError` for a keyword a `Story` (class ``kind``, fields ``known``) does not take, naming its fields and
    the one probably meant."""
    import difflib

    folded = str(name).lower().replace("_", "").replace("-", "")
    meant = _STORY_FIELD_ALIASES.get(folded)
    if meant is None:
        close = difflib.get_close_matches(folded, [f.replace("_", "") for f in known], n=1, cutoff=0.6)
        meant = next((f for f in known if close and f.replace("_", "") == close[0]), None)
    raise InputError(
        f"{kind} has no field {_shown(str(name))!r} (its fields: {', '.join(known)})"
        + (f"; did you mean {meant}=?" if meant else "")
    )


class StorySet:
    """An ordered collection of stories with keyed access.

    Keeps input order (so outputs are stable) and knows where it came from (``source``) for error messages.
    """

    __slots__ = ("_stories", "source")

    def __init__(self, stories: Iterable[Story] = (), *, source: str | None = None) -> None:
        if stories is None or isinstance(stories, str | bytes) or not isinstance(stories, Iterable):
            raise InputError(
                f"a StorySet is made of Story objects, not {type(stories).__name__} "
                "(give a list or any iterable of them)"
            )
        if isinstance(source, os.PathLike):
            source = os.fspath(source)  # type: ignore[assignment]
        if source is not None and not isinstance(source, str):
            raise InputError(f"a StorySet's source names where it came from (a str), not {type(source).__name__}")
        self._stories: list[Story] = list(stories)
        bad = next((i for i, s in enumerate(self._stories) if not isinstance(s, Story)), None)
        if bad is not None:
            raise InputError(
                f"a StorySet is made of Story objects; item {bad} is a {type(self._stories[bad]).__name__} "
                "(vistkit.read_stories reads files; Story(story_id, text) makes one)"
            )
        self.source = source

    def __iter__(self) -> Iterator[Story]:
        return iter(self._stories)

    def __len__(self) -> int:
        return len(self._stories)

    @overload
    def __getitem__(self, index: int) -> Story: ...

    @overload
    def __getitem__(self, index: slice) -> StorySet: ...

    def __getitem__(self, index: int | slice) -> Story | StorySet:
        """``stories[0]`` is a `Story`; ``stories[:100]`` a `StorySet` (same source), as a list slices."""
        if isinstance(index, slice):
            try:
                return StorySet(self._stories[index], source=self.source)
            except (TypeError, ValueError) as exc:  # stories["a":], stories[::0]
                raise InputError(f"a StorySet is sliced by positions (ints) as a list is: {exc}") from None
        if not _is_position(index):
            raise InputError(
                f"a StorySet is indexed by position (an int) or a slice, not {type(index).__name__}; "
                "stories.by_key('story')[ID] finds a story by its id, StorySet(stories[i] for i in POSITIONS) "
                "takes several"
            )
        return self._stories[index]

    def __add__(self, other: object) -> StorySet:
        """``a + b``: the stories of both, in order (``b`` a StorySet or a list or tuple of stories); the source is
        shared when both sets come from one file, else both are named (``a.json + b.json``)."""
        if not isinstance(other, StorySet | list | tuple):
            return NotImplemented
        return StorySet([*self._stories, *other], source=_joined_source(self, other))

    def __radd__(self, other: object) -> StorySet:
        """``[story] + stories``: a StorySet too."""
        if not isinstance(other, list | tuple):
            return NotImplemented
        return StorySet([*other, *self._stories], source=self.source)

    def __contains__(self, item: object) -> bool:
        """``story in stories``: whether it holds that `Story`. An id is refused, saying how to look it up: it was
        compared with every Story and was never found, silently."""
        if isinstance(item, Story):
            return item in self._stories
        raise InputError(
            f"a StorySet holds Story objects, not ids: {_shown(repr(item))} in stories.by_key('story') looks up a "
            "story id (by_key('sequence') a photo sequence, by_key('album') an album)"
        )

    def __eq__(self, other: object) -> bool:
        """Equal when both hold equal stories in the same order, as two lists are (``read_stories(f) ==
        read_stories(f)``); where they came from (``source``) is not compared, and a list is not a StorySet."""
        if not isinstance(other, StorySet):
            return NotImplemented
        return self is other or self._stories == other._stories

    def __hash__(self) -> int:
        """The hash of its stories, in order: equal StorySets hash alike (a StorySet is never changed in place)."""
        return hash(tuple(self._stories))

    def __repr__(self) -> str:
        return f"StorySet({len(self)} stories{', from ' + self.source if self.source else ''})"

    @property
    def stories(self) -> list[Story]:
        """The stories, in order (a new list)."""
        return list(self._stories)

    def has_photos(self) -> bool:
        """True when every story knows its photo sequence."""
        return bool(self._stories) and all(s.photo_ids for s in self._stories)

    def default_keying(self) -> Keying:
        """``sequence`` when every story carries its photos, else ``story``. Always reported in signatures."""
        return Keying.SEQUENCE if self.has_photos() else Keying.STORY

    def _key(self, story: Story, keying: Keying | str) -> str:
        """``story.key(keying)``; a story without that field is refused naming this set's file too (a reference
        file in AREL's format has no photo sequences: the message says which of the inputs lacks them)."""
        try:
            return story.key(keying)
        except InputError as exc:
            if self.source is None:
                raise
            raise InputError(f"{self.source}: {exc}") from None

    def by_key(self, key: Keying | str | None = None, *, keying: Keying | str | None = None) -> dict[str, Story]:
        """One story per key (``key``: ``story``, ``sequence`` or ``album``, as `vistkit.score` takes it; ``keying=``
        is its deprecated name); raises `InputError` naming the first duplicated key."""
        keying = _keying_given("stories.by_key", key, keying)
        out: dict[str, Story] = {}
        for story in self._stories:
            k = self._key(story, keying)
            if k in out:
                where = f" in {self.source}" if self.source else ""
                raise InputError(
                    f"more than one story has {Keying(keying).value} key {k!r}{where}; "
                    + option_name(
                        "a hypothesis file must hold one story per key (choose another --key?)",
                        "the stories scored must be one per key (choose another key=, or give each its own id)",
                    )
                )
            out[k] = story
        return out

    def group(self, key: Keying | str | None = None, *, keying: Keying | str | None = None) -> dict[str, list[Story]]:
        """All stories per ``key`` (``keying=`` is its deprecated name), in input order (e.g. the references of each
        sequence). In a set read from a file (``source`` set), a story given twice (the same id and the same text
        under one key: a file concatenated with itself) is refused naming it: it would count as two references,
        which changes CIDEr-D and the signature's nrefs, while the storylet formats already refuse a story whose
        storylets repeat. (References given as lists of texts share their prediction's id, so identical texts
        there stay two references.)"""
        keying = _keying_given("stories.group", key, keying)
        out: dict[str, list[Story]] = {}
        seen: set[tuple[str, str, str]] = set()
        for story in self._stories:
            k = self._key(story, keying)
            mark = (k, story.story_id, story.text)
            if self.source is not None and mark in seen:
                raise InputError(
                    f"{self.source}: story {_shown(story.story_id)!r} is given twice with the same text under "
                    f"{keying.article} {keying.value} key {_shown(k)!r}, so it would count as two references; "
                    "remove the copy (was a file joined with itself?)"
                )
            if self.source is not None:
                seen.add(mark)
            out.setdefault(k, []).append(story)
        return out

    def filter(
        self, keep: Iterable[str], key: Keying | str | None = None, *, keying: Keying | str | None = None
    ) -> StorySet:
        """Only the stories whose ``key`` (``story``, ``sequence`` or ``album``, as `vistkit.score` takes it;
        ``keying=`` is its deprecated name) is in ``keep``."""
        keying = _keying_given("stories.filter", key, keying)
        if isinstance(keep, str | bytes) or not isinstance(keep, Iterable):
            raise InputError(f"filter keeps the keys given as a list or set of texts, not {type(keep).__name__}")
        wanted = {_plain(k) if isinstance(k, str) else k for k in keep}
        bad = next((k for k in wanted if not isinstance(k, str)), None)
        if bad is not None:  # an int never equals a text id: nothing would be kept, silently
            raise InputError(
                f"filter keeps the keys given as texts (ids are texts); key {bad!r:.60} is {type(bad).__name__}: "
                f"give str({bad!r:.60})"
            )
        return StorySet((s for s in self._stories if self._key(s, keying) in wanted), source=self.source)

    def map_text(self, fn: Callable[[str], str]) -> StorySet:
        """A copy with ``fn`` applied to every text and sentence."""
        if not callable(fn):
            raise InputError(f"map_text takes a function from text to text, not {type(fn).__name__}")

        def text_of(story: Story, text: str) -> str:
            out = fn(text)
            if not isinstance(out, str):
                raise InputError(
                    f"map_text: the function returned {type(out).__name__} for story {_shown(story.story_id)!r}, "
                    "not a text; it must return the new text"
                )
            return out

        return StorySet(
            (
                s.with_text(
                    text_of(s, s.text),
                    tuple(text_of(s, x) for x in s.sentences) if s.sentences is not None else None,
                )
                for s in self._stories
            ),
            source=self.source,
        )


def _keying_given(method: str, key: Keying | str | None, keying: Keying | str | None) -> Keying:
    """The keying a method was given as ``key`` (`vistkit.score`'s name for it) or as the deprecated ``keying``
    (a `DeprecationWarning`); both, or neither, is an `InputError`."""
    if keying is not None:
        if key is not None:
            raise InputError(
                f"{method} was given key={key!s:.20} and keying={keying!s:.20}, which name one thing: give the keying "
                "once, as key="
            )
        import warnings

        warnings.warn(
            f"{method}(keying=...): keying= is deprecated; use key= (the name vistkit.score gives it)",
            DeprecationWarning,
            stacklevel=3,
        )
        key = keying
    if key is None:
        raise InputError(f"{method} needs the key the ids are of: key='story', key='sequence' or key='album'")
    return Keying.parse(key)


def _is_position(index: object) -> bool:
    """Whether ``index`` is one position (an int, a NumPy integer), not a bool, an array or a list of them."""
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        return False
    if getattr(index, "ndim", 0) != 0 or getattr(getattr(index, "dtype", None), "kind", "") == "b":
        return False
    try:
        index.__index__()  # type: ignore[attr-defined]
    except TypeError:
        return False
    return True


def _joined_source(a: StorySet, b: object) -> str | None:
    """The source of ``a + b``: the one both share (or the only one given), or both named (``a.json + b.json``);
    None when neither has one."""
    other = b.source if isinstance(b, StorySet) else None
    if a.source == other or other is None:
        return a.source
    if a.source is None:
        return other
    return f"{a.source} + {other}"
