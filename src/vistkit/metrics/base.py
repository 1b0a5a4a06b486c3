"""The metric protocol, `Score` objects, signatures and the registry.

Every metric is a subclass of `Metric` that declares what it needs and its bounds as class attributes, takes its
options keyword-only in ``__init__`` (load-once: a model metric loads its model there), and implements
`Metric.score_items`. Registration is by decorator; `get_metric` imports metric modules lazily so that
``import vistkit`` stays fast.

Scores are built from per-item statistics where the metric allows it (sacreBLEU's design): a metric whose corpus
score is not the mean of item scores (coco BLEU, CIDEr-D, pooled METEOR) returns ``stats`` (one row per item) and
implements `Metric.corpus_from_stats`, so bootstrap confidence intervals and paired tests resample rows instead of
recomputing the metric.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, cast

from vistkit.data.story import Keying, Story, StorySet, option_name, python_api
from vistkit.errors import InputError, UnavailableMetricError, UnknownMetricError

if TYPE_CHECKING:  # numpy is imported where it is used: `vistkit --help` does not load it
    import numpy as np

T = TypeVar("T")


# --------------------------------------------------------------------------------------------------- cards
@dataclass(frozen=True)
class MetricCard:
    """What a user needs to know about a metric (`vistkit metrics --info NAME`)."""

    summary: str
    definition: str
    range: str
    signature_fields: str
    reproduces: str
    differences: str = ""
    citation: str = ""

    def render(self, name: str) -> str:
        """The card as Markdown, headed by the metric's ``name``; differences and citation sections only when set."""
        parts = [
            f"# {name}",
            self.summary,
            "",
            "## Definition",
            self.definition,
            "",
            "## Range",
            self.range,
            "",
            "## Signature",
            self.signature_fields,
            "",
            "## Reproduces",
            self.reproduces,
        ]
        if self.differences:
            parts += ["", "## Official code vs paper", self.differences]
        if self.citation:
            parts += ["", "## Citation", self.citation]
        return "\n".join(parts)


# --------------------------------------------------------------------------------------------------- signatures
def make_signature(name: str, fields: dict[str, object]) -> str:
    """``name|k1:v1|k2:v2|version:x`` in the given field order (sacreBLEU style)."""
    from vistkit import __version__

    items = [name] + [f"{k}:{_fmt(v)}" for k, v in fields.items()] + [f"vistkit:{__version__}"]
    return "|".join(items)


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# --------------------------------------------------------------------------------------------------- scores
@dataclass
class Score:
    """The result of one metric on one set of stories.

    ``item_scores[i]`` belongs to ``item_ids[i]``; NaN marks an item the metric leaves undefined (e.g. a
    one-sentence story for RoViST-NR), and ``excluded`` says why. ``corpus`` is the system-level score.
    ``stats`` (items x k) holds per-item sufficient statistics when the corpus score is not a plain mean;
    ``corpus_from_stats`` then turns any selection of rows into a corpus score (bootstrap, paired tests).
    """

    metric: str
    corpus: float
    item_ids: list[str]
    item_scores: np.ndarray
    signature: str
    keying: Keying | None = None
    stats: np.ndarray | None = None
    corpus_from_stats: Callable[[np.ndarray], float] | None = field(default=None, repr=False)
    excluded: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Own copies of what the Score was given: a metric may hand out arrays it caches (the coco family keeps
        one table of statistics per set of texts), and a caller changing its result must never change the next
        result of the same stories."""
        import numpy as np

        self.item_scores = np.array(self.item_scores, dtype=float)
        if self.stats is not None:
            self.stats = np.array(self.stats)
        self.item_ids = list(self.item_ids)
        self.excluded = dict(self.excluded or {})
        self.extra = dict(self.extra or {})

    def __eq__(self, other: object) -> bool:
        """Equal results: the same metric, signature, keying, item ids, scores and statistics (NaN equal to NaN,
        as an undefined item is the same in both), exclusions and extras; ``corpus_from_stats`` (a function) is
        not compared."""
        if not isinstance(other, Score):
            return NotImplemented
        return (
            self.metric == other.metric
            and self.signature == other.signature
            and self.keying == other.keying
            and self.item_ids == other.item_ids
            and _same_value(self.corpus, other.corpus)
            and _same_value(self.item_scores, other.item_scores)
            and _same_value(self.stats, other.stats)
            and _same_value(self.excluded, other.excluded)
            and _same_value(self.extra, other.extra)
        )

    __hash__ = None  # type: ignore[assignment]  # a Score can be changed, so it is not hashable

    def __repr__(self) -> str:
        """A one-line summary (metric, corpus score, items, exclusions, keying, signature): the dataclass repr
        listed every item id, score and exclusion, megabytes for a test set at the end of a notebook cell; the
        items are ``item_ids`` / ``item_scores``."""
        try:
            corpus = repr(float(self.corpus))
        except (TypeError, ValueError):
            corpus = repr(self.corpus)
        keying = f", keying={self.keying.value!r}" if isinstance(self.keying, Keying) else ""
        return (
            f"Score(metric={self.metric!r}, corpus={corpus}, n={self.n:,} of {len(self.item_scores):,} items, "
            f"excluded={len(self.excluded):,}{keying}, signature={self.signature!r})"
        )

    def __format__(self, spec: str) -> str:
        """``f"{score:.3f}"`` formats the corpus score (a number's format); ``f"{score}"`` is the repr."""
        if not spec:
            return repr(self)
        try:
            return format(float(self.corpus), spec)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{spec!r} is not a format of the corpus score, a float ({exc}); use one such as '.4f' or '.1%'"
            ) from None

    def __float__(self) -> float:
        """``float(score)``: the corpus score."""
        return float(self.corpus)

    if not TYPE_CHECKING:  # at run time only: to mypy and an IDE a misspelt attribute stays an error

        def __getattr__(self, name: str) -> Any:
            """Only called for a name a Score lacks: other libraries' names for its parts (``to_dict``, ``score``)
            say which part is meant."""
            meant = _SCORE_ALIASES.get(name.lower()) if not name.startswith("_") else None
            hint = f"; the {meant[1]} is score.{meant[0]}" if meant else ""
            raise AttributeError(f"'Score' object has no attribute {name!r}{hint}")

    @property
    def n(self) -> int:
        """How many items count towards the corpus score."""
        import numpy as np
        return int(np.sum(~np.isnan(self.item_scores)))

    def resample(self, indices: np.ndarray | Sequence[int]) -> float:
        """The corpus score of a resample of items (row indices into ``item_ids``, from 0 to ``len - 1``)."""
        import numpy as np

        indices = np.asarray(indices)
        n = len(self.item_scores)
        if indices.ndim != 1:  # a (B, n) table of draws gave one number, the mean of them all, or a TypeError
            got = "one number" if indices.ndim == 0 else f"a {indices.ndim}-D table"
            raise InputError(
                f"{self.metric}: resample takes one resample at a time: a list of row numbers, not {got}; for many, "
                "call it once per row (vistkit.scores.stats.bootstrap_distribution draws and scores them all)"
            )
        if indices.dtype.kind not in "iu" and not (indices.size == 0 and indices.dtype.kind == "f"):
            raise InputError(
                f"{self.metric}: resample takes row numbers (integers) of the scored items, not {indices.dtype.name}"
            )
        indices = indices.astype(np.intp, copy=False)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
            bad = int(indices.min()) if int(indices.min()) < 0 else int(indices.max())
            raise InputError(f"{self.metric}: row {bad} is not one of the {n:,} scored items (0 to {n - 1:,})")
        if self.stats is not None and self.corpus_from_stats is not None:
            return float(self.corpus_from_stats(self.stats[indices]))
        return corpus_mean(self.item_scores[indices])

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (full precision; an undefined corpus score, NaN, is None as JSON has no NaN)."""
        return {
            "metric": self.metric,
            "corpus": None if math.isnan(self.corpus) or math.isinf(self.corpus) else float(self.corpus),
            "n": self.n,
            "signature": self.signature,
            "keying": self.keying.value if self.keying else None,
            "excluded": len(self.excluded),
            **({"extra": self.extra} if self.extra else {}),
        }


#: other libraries' names for a `Score`'s parts (pandas, sacreBLEU, Hugging Face evaluate): (vistkit's, what it is)
_SCORE_ALIASES = {
    **dict.fromkeys(("to_dict", "dict", "to_json", "json", "asdict"), ("as_dict()", "JSON-ready summary")),
    **dict.fromkeys(("score", "value", "mean", "result", "system", "system_score"), ("corpus", "system-level score")),
    **dict.fromkeys(("scores", "items", "values", "per_item", "item_score"), ("item_scores", "per-item score array")),
    **dict.fromkeys(("ids", "keys", "item_keys"), ("item_ids", "list of item ids")),
    **dict.fromkeys(("name", "metric_name"), ("metric", "metric's name")),
    **dict.fromkeys(("count", "size", "len"), ("n", "number of items the corpus score counts")),
}


def _same_value(a: Any, b: Any) -> bool:
    """Whether two parts of a `Score` are equal: arrays element by element and floats with NaN equal to NaN,
    dicts, lists and tuples part by part (never numpy's "truth value of an array is ambiguous")."""
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return False
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, float | np.floating) and isinstance(b, float | np.floating):
        return bool(a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # values whose == is not one yes/no
        return a is b


def corpus_mean(values: Any) -> float:
    """The mean of the defined (non-NaN) ``values``, NaN when none is: their exactly rounded sum (`math.fsum`)
    divided by their count, so the order of the items (a file's stories shuffled, an engine's shards) never
    changes a digit of a corpus score, as numpy's pairwise ``mean`` does in the last one."""
    import numpy as np

    arr = np.asarray(values, dtype=float).ravel()
    defined = arr[~np.isnan(arr)]
    if not defined.size:
        return math.nan
    if not np.isfinite(defined).all():  # fsum refuses inf - inf; the mean of infinities is numpy's
        return float(defined.mean())
    return math.fsum(defined.tolist()) / defined.size


def mean_score(
    metric: str,
    item_ids: Sequence[str],
    values: Sequence[float],
    signature: str,
    *,
    keying: Keying | None = None,
    excluded: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Score:
    """A `Score` whose corpus value is the mean of the defined (non-NaN) item scores."""
    import numpy as np
    arr = np.asarray(values, dtype=float)
    corpus = corpus_mean(arr)
    return Score(
        metric=metric,
        corpus=corpus,
        item_ids=list(item_ids),
        item_scores=arr,
        signature=signature,
        keying=keying,
        excluded=dict(excluded or {}),
        extra=dict(extra or {}),
    )


# --------------------------------------------------------------------------------------------------- alignment
@dataclass(frozen=True)
class Item:
    """One unit of evaluation: a hypothesis and (for reference-based metrics) its references."""

    item_id: str
    hypothesis: Story
    references: tuple[Story, ...] = ()


@dataclass
class Alignment:
    """What `align` returns: the items to score, the hypotheses left out (id -> reason), the keying used and the
    references per item for the signature (``"5"``, or ``"1-5"`` when items differ)."""

    items: list[Item]
    excluded: dict[str, str]
    keying: Keying
    n_refs: str


def _no_hypothesis_in_template(hyp_keys: list[str], template: list[str], keying: Keying) -> None:
    """One sentence for a template that none of the hypotheses is in, saying how each side is keyed."""
    h, t = hyp_keys[0], template[0] if template else ""
    if keying is not Keying.SEQUENCE:
        raise InputError(
            f"none of the {len(hyp_keys)} hypotheses is in the template: they are keyed by {keying.value} "
            f"(e.g. {h!r}) and a template by photo sequence (e.g. {t!r}); give hypotheses that carry photo "
            f"sequences (challenge, SIS, or JSONL/CSV with photo_ids) and {_key_option(Keying.SEQUENCE)}"
        )
    raise InputError(
        f"none of the {len(hyp_keys)} hypotheses' photo sequences is in the template (e.g. {h!r} vs the "
        f"template's {t!r}); check that the template is for the same split as the stories"
    )


def align(
    hypotheses: StorySet,
    references: StorySet | None,
    *,
    keying: Keying | str | None = None,
    template: Sequence[str] | None = None,
    require_all: bool = False,
    reference_absent: bool = False,
) -> Alignment:
    """Pair every hypothesis with the references that share its key.

    - Without references: every hypothesis is an item (reference-free metrics).
    - With references: items are the keys present in both (and in ``template`` when given, as the 2018 challenge
      does); hypotheses with no reference are excluded with a reason.
    - ``require_all``: a reference key (inside the template; without references, a template key) with no
      hypothesis is an error, as in the challenge
      ("One story is missing in this submission.").
    - ``reference_absent``: the Reference Absent Algorithm (Vrank, Sec. 5.1, Eq. 3): when the scored story is
      itself one of its references (same story id, or the same text up to whitespace), it is removed from that
      item's references first, so a human story is not scored against itself. Items left with no reference are
      excluded. Eq. 3 writes the score as the max of the metric over the remaining references; here the metric
      combines them by its own rule (max for meteor-vist, multi-reference statistics for BLEU, CIDEr-D, ...).
      For a story pair, `vistkit.meta.scoring` removes both stories of the pair (Eq. 3's ``R - x``).
    """
    keying = Keying.parse(keying) if keying is not None else hypotheses.default_keying()
    template = check_template(template)
    if template is not None and not template:
        raise InputError("the template holds no sequence keys, so nothing would be scored; give a template with keys")
    hyps = hypotheses.by_key(keying)
    excluded: dict[str, str] = {}
    keep = set(template) if template is not None else None
    if keep is not None and hyps and keep.isdisjoint(hyps):
        _no_hypothesis_in_template(list(hyps), list(template or ()), keying)
    if references is None:
        if require_all and template is not None:  # as with references: the challenge wants a story for each
            for k in template:
                if k not in hyps:
                    raise InputError(f"One story is missing in this submission. Photo seq: {k}")
        return Alignment([Item(k, s) for k, s in hyps.items() if keep is None or k in keep], excluded, keying, "0")
    refs = references.group(keying)
    if keep is not None:
        refs = {k: v for k, v in refs.items() if k in keep}
    if require_all:
        for k in refs:
            if k not in hyps:
                raise InputError(f"One story is missing in this submission. Photo seq: {k}")
    items: list[Item] = []
    for k, hyp in hyps.items():
        if keep is not None and k not in keep:
            continue
        rs = refs.get(k)
        if not rs:
            excluded[k] = NO_REFERENCE_KEY
            continue
        if reference_absent:
            rs = [r for r in rs if not is_same_story(hyp, r)]
            if not rs:
                excluded[k] = _SELF_REFERENCE
                continue
        items.append(Item(k, hyp, tuple(rs)))
    no_key = sum(1 for why in excluded.values() if why == NO_REFERENCE_KEY)
    if items and no_key >= len(items):  # most hypotheses found no reference: would another key match more?
        _warn_better_key(hypotheses, references, keying, keep, matched=len(items), unmatched=no_key)
    if not items:
        reasons = sorted(set(excluded.values()))
        hint = (  # the keys matched, but every reference was the story itself: no other key would help
            _self_reference_hint()
            if reasons == [_SELF_REFERENCE]
            else _other_keys_hint(hypotheses, references, keying, keep)
        )
        raise InputError(
            f"no hypothesis shares {keying.article} {keying.value} key with the references "
            f"({'; '.join(reasons) or 'no hypotheses'}); "
            + (hint or f"check {option_name('--key', 'key=')} and the files (e.g. story ids vs photo sequences)")
        )
    counts = {len(i.references) for i in items}
    n_refs = (
        str(counts.pop())
        if len(counts) == 1
        else f"{min(len(i.references) for i in items)}-" + str(max(len(i.references) for i in items))
    )
    return Alignment(items, excluded, keying, n_refs)


_SELF_REFERENCE = "its only reference is the scored story itself (reference absent)"


def _self_reference_hint() -> str:
    """Why every item lost its references under reference_absent (`is_same_story`), and what to do."""
    return (
        "a hypothesis with the same story id as a reference and no system named (or with the same text) is taken "
        f"for that human story itself, and {option_name('--reference-absent', 'reference_absent=True')} removes it "
        "from its own references; the option is meant for scoring human stories against the other stories of "
        "their key: leave it out for machine stories, or name their system (a `system` field)"
    )


def check_template(template: Any) -> list[str] | None:
    """A template (the sequence keys to score) as a list of texts: None, or a list, tuple or set of strings (e.g.
    `vistkit.data.readers.read_template`); one text would be read character by character, so it is refused."""
    if template is None:
        return None
    if isinstance(template, str | bytes) or not isinstance(template, Iterable) or isinstance(template, Mapping):
        raise InputError(
            "template must be a list of sequence keys (vistkit.data.readers.read_template(PATH) reads one), not "
            f"{type(template).__name__}"
        )
    keys = list(template)
    bad = next((k for k in keys if not isinstance(k, str)), None)
    if bad is not None:
        raise InputError(f"template must be a list of sequence keys (texts); it holds a {type(bad).__name__}")
    return keys


def check_flag(value: Any, name: str) -> bool:
    """A yes/no option of the Python API as a bool: True or False (numpy's too), never a truthy text such as
    ``"no"``."""
    import numpy as np

    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise InputError(f"{name} must be True or False, not {value!r:.60}")


NO_REFERENCE_KEY = "no reference story has this key"
_WARNED_KEYS: set[tuple[str, ...]] = set()


def _shared_by_key(
    hypotheses: StorySet, references: StorySet, keying: Keying, keep: set[str] | None
) -> dict[Keying, tuple[int, int]]:
    """For each keying other than ``keying`` that both sets support: (hypotheses sharing a key with the
    references, hypotheses)."""
    out = {}
    for other in Keying:
        if other is keying:
            continue
        try:
            hyps, refs = hypotheses.by_key(other), references.group(other)
        except InputError:  # a story without album or photos, or two hypotheses with one key
            continue
        out[other] = (sum(1 for k in hyps if k in refs and (keep is None or k in keep)), len(hyps))
    return out


def _warn_better_key(
    hypotheses: StorySet, references: StorySet, keying: Keying, keep: set[str] | None, *, matched: int, unmatched: int
) -> None:
    """Warn (once per process and files) when most hypotheses found no reference under ``keying`` and another key
    would match more of them: AREL predictions against AREL references by story key matched only the one album
    with a single reference story (1 of 897, BLEU 1.0 over n = 1) where ``--key album`` matches all."""
    better = {k: v for k, v in _shared_by_key(hypotheses, references, keying, keep).items() if v[0] > matched}
    if not better:
        return
    said = (str(hypotheses.source), str(references.source), keying.value, str(matched), str(unmatched))
    if said in _WARNED_KEYS:
        return
    _WARNED_KEYS.add(said)
    from vistkit.errors import warn

    options = "; ".join(f"with {_key_option(k)}, {n:,} would" for k, (n, _) in better.items())
    warn(
        f"only {matched:,} of {matched + unmatched:,} hypotheses share {keying.article} {keying.value} key with the "
        "references "
        f"({options}); the scores cover only the matched ones: choose the key that says how your files match"
    )


def _other_keys_hint(hypotheses: StorySet, references: StorySet, keying: Keying, keep: set[str] | None) -> str:
    """When no hypothesis shares a key with the references: the keying under which some would (AREL's
    ``{album: [stories]}`` on both sides matches by album, not by story), or the reading that would make
    ``{id: text}`` hypotheses match ``{id: [texts]}`` references; "" when nothing would."""
    hints = [
        f"with {_key_option(other)}, {shared:,} of {total:,} hypotheses would"
        for other, (shared, total) in _shared_by_key(hypotheses, references, keying, keep).items()
        if shared
    ]
    if hints:
        return "; ".join(hints) + " (choose the key that says how your files are meant to match)"
    albums = {s.album_id for s in references if s.album_id is not None}
    named = [s.story_id for s in hypotheses if s.album_id is None and s.story_id in albums]
    if named:
        return (
            f"{len(named):,} hypothesis ids are album ids of the references ({{album: [stories]}}, AREL's layout): "
            "read the hypotheses as albums too with "
            + option_name("--hyp-format arel --key album", "vistkit.read_stories(PATH, format='arel') and key='album'")
        )
    sequences = {s.sequence for s in references if s.photo_ids}
    named = [s.story_id for s in hypotheses if not s.photo_ids and s.story_id.rstrip("-") in sequences]
    if named:
        return (
            f"{len(named):,} hypothesis ids are photo sequences of the references (e.g. '{_shown_key(named[0])}'), "
            "but the hypotheses carry no photo ids: give them in a format that does (challenge JSON, JSONL or CSV "
            f"with photo_ids) and {_key_option(Keying.SEQUENCE)}"
        )
    folded = {k.casefold(): k for k in references.group(keying)}
    same = [  # (a key equal on both sides matched: it was left out for another reason)
        (k, folded[k.casefold()])
        for k in hypotheses.by_key(keying)
        if k.casefold() in folded and folded[k.casefold()] != k
    ]
    if same:
        h, r = (_shown_key(k) for k in same[0])
        return (
            f"{len(same):,} hypothesis keys differ from reference keys only in letter case (e.g. '{h}' and '{r}'), "
            "and ids keep their case; write them alike in both files"
        )
    refs = references.group(keying)
    floats = [k for k in hypotheses.by_key(keying) if k.endswith(".0") and k[:-2] in refs]
    floats = floats or [k for k in refs if k.endswith(".0") and k[:-2] in hypotheses.by_key(keying)]
    if floats:
        return (
            f"{len(floats):,} keys of one side are keys of the other written as floats (e.g. '{_shown_key(floats[0])}'"
            ", as pandas writes an id column with a gap); write the ids as whole numbers"
        )
    return ""


def _key_option(keying: Keying) -> str:
    """How a message asks for ``keying``: ``--key album`` on the command line, ``key='album'`` in Python."""
    return option_name(f"--key {keying.value}", f"key={keying.value!r}")


def _shown_key(key: str) -> str:
    """A key for a message: at most 60 characters (a five-photo sequence key has about 55)."""
    return key if len(key) <= 60 else key[:57] + "..."


def is_same_story(a: Story, b: Story) -> bool:
    """Whether ``b`` is the story ``a`` itself: same story id (both human) or same text up to whitespace and
    Unicode form (a copy whose accents are combining marks, NFD, is the same text: the metrics compare in NFC)."""
    if a.story_id == b.story_id and (a.system in (None, "human")) and (b.system in (None, "human")):
        return True
    x, y = " ".join(a.text.split()), " ".join(b.text.split())
    if x == y or x.isascii() or y.isascii():
        return x == y
    import unicodedata

    return unicodedata.normalize("NFC", x) == unicodedata.normalize("NFC", y)


# --------------------------------------------------------------------------------------------------- inputs
#: what `Metric.score` and `score` accept as stories (see `as_story_sets`)
Stories = StorySet | Sequence[Story] | Sequence[str] | Mapping[str, str]
References = StorySet | Sequence[Story] | Sequence[str] | Sequence[Sequence[str]] | Mapping[str, Any]


def _kind(value: Any) -> str:
    """``storyset``, ``stories``, ``texts``, ``groups`` (a list of texts or of text lists, one each), ``dict``
    or ``other``."""
    if isinstance(value, StorySet):
        return "storyset"
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return "other"
    if all(isinstance(v, Story) for v in value):
        return "stories"
    if all(isinstance(v, str) for v in value):
        return "texts"
    if all(isinstance(v, str) or (isinstance(v, Sequence) and not isinstance(v, bytes)) for v in value):
        return "groups"  # lists of texts, or one text each for some: references "one text or a list each"
    return "other"


_SHAPES = (
    "give stories as a StorySet (vistkit.read_stories), a list of Story objects, a list of strings (matched by "
    "position) or a dict {id: text} (matched by id); references likewise, one string or a list of strings each"
)


def as_stories(stories: Any, what: str, *, tag: str = "") -> list[Story]:
    """The stories a scorer method takes (`explain`, `preference`, `sentence_scores`...): a sequence of `Story`
    objects or texts, each text checked as a `Story` is (a NUL, a lone surrogate). A bare string is refused: it
    was iterated as one story per character, silently."""
    if isinstance(stories, str | bytes):
        raise InputError(
            f"{what} takes a list of stories, not one {type(stories).__name__}; wrap a single story as [text]"
        )
    if not isinstance(stories, Sequence | StorySet):
        raise InputError(f"{what} takes a list of stories, not {type(stories).__name__}{_convert_hint(stories)}")
    out: list[Story] = []
    for i, s in enumerate(stories):
        if isinstance(s, Story):
            out.append(s)
        elif isinstance(s, str):
            out.append(Story(story_id=f"{tag}{i}", text=s))
        else:
            raise InputError(f"{what}: story {i} is {type(s).__name__}, not a Story or a text")
    return out


def _convert_hint(value: Any) -> str:
    """How to turn a container `as_story_sets` does not take into one it does (a NumPy array, a pandas Series, a
    generator, a set: unordered, so it cannot be matched by position)."""
    import os

    if isinstance(value, str | bytes | os.PathLike):
        return " (a file: read it with vistkit.read_stories(PATH) first; one story: give [text])"
    if isinstance(value, set | frozenset):
        return " (a set has no order, so its texts cannot be matched by position: give a list)"
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas DataFrame
        return " (a DataFrame: pass dict(zip(frame[ID], frame[TEXT])) to match by id, or frame[TEXT].tolist())"
    if hasattr(value, "to_dict") and hasattr(value, "tolist"):  # a pandas Series
        return " (pass series.to_dict() to match by index, or series.tolist() by position)"
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # a NumPy array
        return " (pass array.tolist())"
    if isinstance(value, Iterator):
        return " (a generator or iterator: pass list(...))"
    return ""


def _odd_element(value: Any, what: str) -> str:
    """For a list `_kind` cannot read: the first element unlike the first one (a None or NaN among texts, a text
    among Story objects), or a first element that is no story at all (bytes); "" when there is none."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        return ""
    first = value[0]
    if isinstance(first, Story):
        wanted: tuple[type, ...] = (Story,)
    elif what == "reference":
        wanted = (str, list, tuple)
    elif isinstance(first, str):
        wanted = (str,)
    else:
        wanted = ()
    i = next((i for i, v in enumerate(value) if not isinstance(v, wanted)), None) if wanted else 0
    if i is None:
        return ""
    bad = value[i]
    expected = "a Story" if wanted == (Story,) else "a text or a list of texts" if what == "reference" else "a text"
    decode = "; decode it: text.decode('utf-8')" if isinstance(bad, bytes) else ""
    return f" ({what} {i} is {type(bad).__name__}, not {expected}{decode})"


def as_story_sets(hypotheses: Any, references: Any = None) -> tuple[StorySet, StorySet | None, Keying | None]:
    """Turn the inputs people pass (HF evaluate style) into StorySets, and the keying they imply.

    - StorySet / list of `Story`: as they are (keying: the caller's, else the metric's default);
    - list of strings: predictions by position (ids ``"0"``, ``"1"``, ...); references a list of strings (one each)
      or a list of lists (several each), of the same length;
    - dict ``{id: text}``: by id; references ``{id: text}`` or ``{id: [texts]}``.

    Lists and dicts are keyed by story (returned keying ``story``). Anything else is one `InputError`.
    """
    hk = _kind(hypotheses)
    if hk == "other":
        hint = _convert_hint(hypotheses) or _odd_element(hypotheses, "story")
        raise InputError(f"cannot score {type(hypotheses).__name__} stories{hint}: {_SHAPES}")
    rk = None if references is None else _kind(references)
    if rk == "other":
        hint = _convert_hint(references) or _odd_element(references, "reference")
        raise InputError(f"cannot use {type(references).__name__} references{hint}: {_SHAPES}")
    if len(hypotheses) == 0:  # nothing to score, whatever the references' shape: the metric says so
        # (`Metric._check_given`), not "Story objects are matched to references by key"
        empty = hypotheses if isinstance(hypotheses, StorySet) else StorySet([])
        return empty, None if references is None else StorySet([]), None
    if rk not in (None, "storyset") and len(references) == 0:  # {} crashed (IndexError), [] was "by position too"
        raise InputError(
            f"the references are an empty {type(references).__name__}: give each prediction its references, or "
            "leave references out for a reference-free metric"
        )
    if hk in ("storyset", "stories"):
        hyps = hypotheses if isinstance(hypotheses, StorySet) else StorySet(hypotheses)
        if rk is None or rk in ("storyset", "stories"):
            refs = references if (references is None or isinstance(references, StorySet)) else StorySet(references)
            return hyps, refs, None
        raise InputError(
            "Story objects are matched to references by key: give the references as Story objects or a "
            f"StorySet too ({_SHAPES})"
        )
    if hk == "groups":
        raise InputError(f"predictions must be one text each, not lists: {_SHAPES}")
    if hk == "texts":
        ids = [str(i) for i in range(len(hypotheses))]
        texts = list(hypotheses)
    else:
        bad = [k for k, v in hypotheses.items() if not isinstance(v, str)]
        if bad:
            kind = type(hypotheses[bad[0]]).__name__
            raise InputError(f"prediction {bad[0]!r} is not a text but {kind}: {_SHAPES}")
        ids, texts = [str(k) for k in hypotheses], list(hypotheses.values())
    hyps = StorySet(Story(story_id=i, text=t, system="prediction") for i, t in zip(ids, texts, strict=True))
    if hk == "dict":
        _refuse_merged_ids("predictions", list(hypotheses), [s.story_id for s in hyps])
    if rk is None:
        return hyps, None, Keying.STORY
    if hk == "texts":
        if rk not in ("texts", "groups"):
            raise InputError(f"predictions given by position (a list) need references by position too: {_SHAPES}")
        if len(references) != len(hypotheses):
            raise InputError(
                f"{len(hypotheses)} predictions but {len(references)} references: give one reference (or one list "
                "of references) per prediction, in the same order"
            )
        ref_ids = ids
        groups = [_reference_group(rid, r) for rid, r in zip(ref_ids, references, strict=True)]
    else:
        if rk != "dict":
            raise InputError(f"predictions given by id (a dict) need references by id too: {_SHAPES}")
        ref_ids = [str(k) for k in references]
        groups = [_reference_group(rid, r) for rid, r in zip(ref_ids, references.values(), strict=True)]
    pairs = zip(ref_ids, groups, strict=True)
    refs = StorySet(Story(story_id=rid, text=r, system="reference") for rid, group in pairs for r in group)
    if rk == "dict":
        _refuse_merged_ids("references", list(references), [s.story_id for s in refs], groups)
    return hyps, refs, Keying.STORY


def _refuse_merged_ids(what: str, keys: list[Any], ids: list[str], groups: list[list[str]] | None = None) -> None:
    """`InputError` when two keys of a dict given as ``what`` are one id once read as a `Story` id (``1`` and
    ``"1"``, ``"a"`` and ``"a "``): their references were merged into one item, silently. ``ids``: one per story,
    in order (``groups``: each key's references, so one id per key is read from them)."""
    if groups is not None:
        firsts = [0]
        for group in groups[:-1]:
            firsts.append(firsts[-1] + len(group))
        ids = [ids[i] for i in firsts]
    if len(set(ids)) == len(ids):
        return
    seen: dict[str, Any] = {}
    for key, story_id in zip(keys, ids, strict=True):
        if story_id in seen:
            raise InputError(
                f"{what} {_short_repr(seen[story_id])} and {_short_repr(key)} are both the id {story_id!r} once read "
                "as text (ids are texts; spaces around them are dropped), so they would be one item; give each "
                "its own id, or join them under one key"
            )
        seen[story_id] = key


def _reference_group(rid: str, refs: Any) -> list[str]:
    """One prediction's references: one text, or a list (or tuple) of texts."""
    if isinstance(refs, str):
        return [refs]
    if not isinstance(refs, list | tuple) or not refs or not all(isinstance(r, str) for r in refs):
        raise InputError(f"the references of {rid!r} must be one text or a non-empty list of texts: {_SHAPES}")
    return list(refs)


# --------------------------------------------------------------------------------------------------- protocol
#: `score`'s own keywords, suggested for a misspelt option (``keying=`` for ``key=``, ``refs=``)
_SCORE_KEYWORDS = ("references", "key", "template", "require_all", "reference_absent")
#: what other libraries call the stories to score (Hugging Face evaluate: ``predictions``)
_STORIES_KEYWORDS = ("predictions", "stories", "hyps", "candidates")

#: the default of ``hypotheses`` (`score`, `Metric.score`): told apart from a None given on purpose
class _Required:
    """The default of an argument that must be given, shown as ``<required>`` by ``help()`` and an IDE (a bare
    ``object()`` showed as ``<object object at 0x7f...>``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<required>"


_NOT_GIVEN: Any = _Required()


def _no_stories(given: Iterable[str], how: str) -> InputError:
    """The error for a call without stories to score; ``how`` shows the call with the stories in their place."""
    named = next((k for k in _STORIES_KEYWORDS if k in given), None)
    as_hf = ", as Hugging Face evaluate calls them," if named == "predictions" else ""
    named_text = f" ({named}={as_hf} is hypotheses= here)" if named else ""
    return InputError(f"no stories to score were given: pass them {how}, or as hypotheses=" + named_text)


def _refuse_score_keywords(name: str, wrong: Mapping[str, Any]) -> None:
    """`Metric.score` given keywords it does not take: one `InputError` naming the first and what it probably
    meant (Python said only "got an unexpected keyword argument")."""
    if not wrong:
        return
    bad = str(next(iter(wrong)))
    meant = did_you_mean(bad, _SCORE_KEYWORDS)
    raise InputError(
        f"{name}: score() takes no argument {bad!r} (it takes the stories, references, key, template, require_all "
        "and reference_absent; a metric's options go to vistkit.get_metric)"
        + (f"; did you mean {meant}?" if meant else "")
    )


def _short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to about ``limit`` characters (an option may hold a table of thousands of entries)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _remake_metric(cls: type[Metric], args: tuple[Any, ...], options: dict[str, Any]) -> Metric:
    """A metric made again from the options of a pickled one (`Metric.__reduce__`)."""
    return cls(*args, **options)


class Metric(ABC):
    """Base class of every metric.

    Class attributes declare behaviour (torchmetrics / scikit-learn style) so generic tests can run over the
    registry: ``higher_is_better``, ``lower_bound``/``upper_bound`` (``None`` = unbounded), ``needs_references``,
    ``needs_images``, ``needs_human_story``, ``needs_java``.
    """

    name: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = 0.0
    upper_bound: ClassVar[float | None] = 1.0
    needs_references: ClassVar[bool] = False
    needs_images: ClassVar[bool] = False
    needs_human_story: ClassVar[bool] = False
    #: what the metric runs on Java for (METEOR, the PTB tokeniser), "" for none: a missing Java is said by
    #: `check_tools` before any metric of the run scores, not after the metrics before it have run
    needs_java: ClassVar[str] = ""
    #: model weights the metric needs that vistkit does not ship ("" = none, or all shipped)
    weights: ClassVar[str] = ""
    #: keying used when the caller gives none (``None``: sequence when every story has photos, else story)
    default_keying: ClassVar[Keying | None] = None
    card: ClassVar[MetricCard]
    #: the arguments it was made with (`__reduce__` makes it again from them)
    _made_with: tuple[tuple[Any, ...], dict[str, Any]]

    def __init__(self, **options: Any) -> None:
        if options:
            raise TypeError(f"{self.name} takes no option {sorted(options)!r}")

    def __new__(cls, *args: Any, **options: Any) -> Self:
        """Record the constructor's arguments, so `__reduce__` can make the metric again in another process. A
        metric class without a method the protocol needs (a user's own) is refused in one sentence, wherever it is
        made (Python's "Can't instantiate abstract class" read as a bug in vistkit)."""
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise InputError(
                f"metric {getattr(cls, 'name', cls.__qualname__)!r} ({cls.__module__}.{cls.__qualname__}) does not "
                f"define {', '.join(missing)}, which every metric needs (see `vistkit.metrics.base.Metric`)"
            )
        self = super().__new__(cls)
        self._made_with = (args, dict(options))
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """A pickled scorer (a ``multiprocessing`` or other process pool) is made again from its options in the
        process that unpickles it, which loads its own model: a loaded torch model, a lock or a live JVM cannot be
        pickled (they stopped pickling with "cannot pickle 'module' object" and the like)."""
        args, options = self.__dict__.get("_made_with", ((), {}))
        return (_remake_metric, (type(self), args, options))

    def __repr__(self) -> str:
        """The call that makes this scorer, ``vistkit.get_metric('bleu-4')`` with its options (long values cut): the
        default repr named the class and an address, not the metric nor its options."""
        args, options = self.__dict__.get("_made_with", ((), {}))
        shown = [*(_short_repr(a) for a in args), *(f"{k}={_short_repr(v)}" for k, v in options.items())]
        return f"vistkit.get_metric({', '.join([repr(self.name), *shown])})"

    # -- to implement ------------------------------------------------------------------------------------
    @abstractmethod
    def signature_fields(self) -> dict[str, object]:
        """Everything that changes the value, in display order (keying and nrefs are added by `score`)."""

    @abstractmethod
    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Score aligned items (reference-free metrics see empty ``references``); put ``signature`` in the Score."""

    # -- shared ------------------------------------------------------------------------------------------
    def signature(
        self, *, keying: Keying | str | None = None, n_refs: str | None = None, reference_absent: bool = False
    ) -> str:
        """The metric's signature string: ``nrefs`` (reference-based metrics), ``refabsent``, ``key``, then
        `signature_fields`."""
        fields: dict[str, object] = {}
        if self.needs_references:
            fields["nrefs"] = n_refs if n_refs is not None else "?"
            if reference_absent:
                fields["refabsent"] = True
        if keying is not None:
            fields["key"] = Keying.parse(keying).value
        fields.update(self.signature_fields())
        return make_signature(self.name, fields)

    @classmethod
    def precheck(cls, options: Mapping[str, Any], *, local: bool = True) -> None:
        """The checks of ``options`` that need no model (names and values), before anything slow starts: an
        `InputError` for the first wrong one (``local``: the metric will be built on this machine, so a device
        it lacks is refused too). A metric may add its own cheap checks."""
        from vistkit.metrics._options import check_values

        check_options(cls, options)
        check_values(cls, dict(options), local=local)

    @classmethod
    def check_tools(cls) -> None:
        """A `MissingDependencyError` when a program the metric runs is missing here (`needs_java`). The CLI asks
        every metric of a run before it builds the first (`vistkit.commands.score.construct`): once the inputs
        are read, and before any metric scores."""
        if cls.needs_java:
            from vistkit.models.java import require_java

            require_java(cls.needs_java)

    @classmethod
    def check_inputs(
        cls,
        hypotheses: StorySet,
        references: StorySet | None,
        *,
        key: Keying | str | None = None,
        template: Sequence[str] | None = None,
        require_all: bool = False,
        reference_absent: bool = False,
    ) -> Alignment:
        """The items `score` would score (`align`), or the `InputError` it would raise (no stories, no
        references, no shared key...), without building the metric: callers check their inputs with it before
        loading any model."""
        require_all = check_flag(require_all, "require_all")
        reference_absent = check_flag(reference_absent, "reference_absent")
        with python_api():  # as `score` says it (the command line's own run still names its flags)
            cls._check_given(hypotheses, references)
            return align(
                hypotheses,
                references if cls.needs_references else None,
                keying=key if key is not None else cls.default_keying,
                template=template,
                require_all=require_all,
                reference_absent=reference_absent and cls.needs_references,
            )

    @classmethod
    def _check_given(cls, hypotheses: StorySet, references: StorySet | None) -> None:
        """`InputError` for no stories, or no references for a metric that needs them (whatever the stories'
        keys, and whatever `prepare_hypotheses` fills in)."""
        if len(hypotheses) == 0:
            raise InputError(f"{cls.name}: there are no stories to score")
        if cls.needs_references and references is None:
            raise InputError(
                f"{cls.name} needs reference stories: "
                + option_name("give them with --references FILE (-r)", "pass them as references=")
            )

    @classmethod
    def _check_before_building(
        cls,
        inputs: tuple[StorySet, StorySet | None, Keying | None],
        *,
        key: Keying | str | None = None,
        template: Sequence[str] | None = None,
        require_all: bool = False,
        reference_absent: bool = False,
    ) -> Alignment | None:
        """`check_inputs` of `as_story_sets`'s ``inputs``, for `score` to call before the metric is built (a
        model loads for seconds to minutes): the alignment, or None for a metric that fills its stories in once
        built (`prepare_hypotheses`: a photo map), which gets the checks that filling cannot change."""
        hyps, refs, implied = inputs
        key = implied if key is None else key
        if cls.prepare_hypotheses is not Metric.prepare_hypotheses:
            cls._check_given(hyps, refs)
            if key is not None:
                Keying.parse(key)
            return None
        return cls.check_inputs(
            hyps, refs, key=key, template=template, require_all=require_all, reference_absent=reference_absent
        )

    def prepare_hypotheses(self, hypotheses: StorySet) -> StorySet:
        """The stories `score` aligns and scores: ``hypotheses`` as given (a metric may fill something in)."""
        return hypotheses

    def score(
        self,
        hypotheses: Stories = _NOT_GIVEN,
        references: References | None = None,
        *,
        key: Keying | str | None = None,
        template: Sequence[str] | None = None,
        require_all: bool = False,
        reference_absent: bool = False,
        **wrong: Any,
    ) -> Score:
        """Score ``hypotheses`` (against ``references`` when the metric needs them).

        Stories may be StorySets, lists of `Story`, plain lists of texts (matched by position; references one text
        or a list of texts each) or dicts ``{id: text}`` / ``{id: [texts]}`` (matched by id): `as_story_sets`.
        ``reference_absent`` applies the Reference Absent Algorithm (Vrank Eq. 3; see `align`). Any other keyword
        (``keying=``, ``refs=``, ``predictions=``) is an `InputError` saying what was meant.
        """
        if hypotheses is _NOT_GIVEN:
            raise _no_stories(wrong, "first, scorer.score(stories, references)")
        _refuse_score_keywords(self.name, wrong)
        reference_absent = check_flag(reference_absent, "reference_absent")
        with python_api():  # its errors name Python's arguments (key=), not the command line's flags (--key)
            return self._score_inputs(
                as_story_sets(hypotheses, references),
                key=key,
                template=template,
                require_all=require_all,
                reference_absent=reference_absent,
            )

    def _score_inputs(
        self,
        inputs: tuple[StorySet, StorySet | None, Keying | None],
        *,
        key: Keying | str | None,
        template: Sequence[str] | None,
        require_all: bool,
        reference_absent: bool,
        alignment: Alignment | None = None,
    ) -> Score:
        """`score` of `as_story_sets`'s ``inputs``; ``alignment``: theirs from `_check_before_building`, when the
        module's `score` checked them before building this metric (None: aligned here)."""
        hyps, refs, implied = inputs
        if key is None and implied is not None:
            key = implied
        if alignment is None:
            hyps = self.prepare_hypotheses(hyps)
            alignment = type(self).check_inputs(
                hyps, refs, key=key, template=template, require_all=require_all, reference_absent=reference_absent
            )
        reference_absent = reference_absent and self.needs_references
        if implied is not None and refs is not None and self.needs_references:
            _warn_unmatched_predictions(alignment)
        signature = self.signature(keying=alignment.keying, n_refs=alignment.n_refs, reference_absent=reference_absent)
        from vistkit import progress

        # every metric shows its count; metrics with a long inner loop move it with `progress.fraction`
        with progress.task(self.name, len(alignment.items), unit="stories", outermost=True) as task:
            result = self.score_items(alignment.items, signature=signature)
            task.update(len(alignment.items))
        _check_every_item_scored(self.name, alignment.items, result)
        result.excluded = {**alignment.excluded, **result.excluded}
        result.keying = alignment.keying
        return result


def _check_every_item_scored(name: str, items: Sequence[Item], result: Score) -> None:
    """`InputError` unless ``score_items`` gave a score (a number or NaN with its reason) to every item it was
    given: a metric that dropped a story it could not score instead (a user's own metric) made it vanish from the
    corpus score without a word."""
    given = [it.item_id for it in items]
    if len(result.item_ids) == len(given) and set(result.item_ids) == set(given):
        return
    got, wanted = set(result.item_ids), set(given)  # (the given set was built again for each score: quadratic)
    missing = [k for k in given if k not in got]
    extra = [k for k in result.item_ids if k not in wanted]
    what = f"no score for {len(missing):,} of its {len(given):,} stories (first: {missing[0]!r:.60})" if missing else (
        f"scores for {len(extra):,} stories it was not given (first: {extra[0]!r:.60})" if extra
        else "a score list of another length than its stories"
    )
    raise InputError(
        f"metric {name!r} returned {what}; a metric gives every story it is given a score, NaN with a reason in "
        "`excluded` where it has none"
    )


def _warn_unmatched_predictions(alignment: Alignment) -> None:
    """Warn when predictions given by id (a dict) have no reference of that id: they are left out, and the corpus
    score covers the others only (the CLI says "N item(s) excluded" under its table; the Python API said nothing)."""
    missing = [k for k, why in alignment.excluded.items() if why == NO_REFERENCE_KEY]
    if not missing:
        return
    from vistkit.errors import warn

    total = len(missing) + len(alignment.items)
    shown = ", ".join(repr(_shown_key(k)) for k in missing[:3]) + (", ..." if len(missing) > 3 else "")
    warn(
        f"{len(missing):,} of {total:,} predictions have no reference with the same id ({shown}), so the corpus "
        f"score covers the other {len(alignment.items):,} only (the Score's excluded lists them); give every "
        "prediction its references, or check that the ids are written alike"
    )


# --------------------------------------------------------------------------------------------------- rankers
class Ranker(Metric):
    """A pairwise metric: it reads two stories of the same photos and says which one people would prefer.

    `prefer` is the primary face: one float per pair, ``> 0`` when story ``a`` is preferred, ``< 0`` when ``b``
    is, ``0`` for no preference (NaN: undefined). Every ranker guarantees (tests/test_rankers.py checks each
    registered one): antisymmetry, ``prefer(a, b) == -prefer(b, a)``; determinism; and that scoring pairs in
    one batch equals scoring them one by one. Rankers are reference-free (``needs_references = False``).

    `Metric.score_items` gives a per-story score so that ``vistkit score`` and story-level correlations work;
    each ranker defines it (a utility, or the mean preference against a documented anchor set) in its card.
    The signature names the model: ``model`` (a content hash of the weights), ``encoder`` and ``data`` (the
    training data name), set as instance attributes by the subclass.
    """

    needs_references: ClassVar[bool] = False
    lower_bound: ClassVar[float | None] = None
    upper_bound: ClassVar[float | None] = None
    #: bounds of `prefer` (``None``: unbounded); symmetric because `prefer` is antisymmetric
    preference_bound: ClassVar[float | None] = None

    model_hash: str = "none"
    encoder: str = "none"
    training_data: str = "none"

    @abstractmethod
    def prefer(self, a: Sequence[Story | str], b: Sequence[Story | str]) -> np.ndarray:
        """One float per pair ``(a[i], b[i])``: > 0 when ``a[i]`` is preferred (antisymmetric, batch-invariant)."""

    def signature_fields(self) -> dict[str, object]:
        """The ranker's model hash (first 12 characters), encoder and training data."""
        return {"model": self.model_hash[:12], "encoder": self.encoder, "data": self.training_data}

    def _pairs(
        self, a: Sequence[Story | str], b: Sequence[Story | str], what: str
    ) -> tuple[list[Story], list[Story]]:
        """The two sides of ``what`` (`prefer`, `preference`) as equally long lists of stories: texts are welcome,
        as in `score`; a bare string is refused (it was one story per character), and so are sides of unequal
        length (NumPy broadcast one second story against all the first ones)."""
        return _pair_stories(self.name, a, b, what)

    def preference(self, a: Sequence[Story | str], b: Sequence[Story | str]) -> np.ndarray:
        """`prefer` with its inputs checked: equal lengths (Story objects or texts), a float array of that length."""
        import numpy as np

        first, second = self._pairs(a, b, "preference")
        if not first:
            return np.zeros(0)
        out = np.asarray(self.prefer(first, second), dtype=float)
        if out.shape != (len(a),):
            raise RuntimeError(f"{self.name}.prefer returned shape {out.shape}, expected ({len(a)},)")
        return out


def _pair_stories(
    name: str, a: Sequence[Story | str], b: Sequence[Story | str], what: str
) -> tuple[list[Story], list[Story]]:
    """`Ranker._pairs` for the ranker ``name``: a function, so `prefer` checks the pairs before the ranker loads."""
    first = as_stories(a, f"{name}: {what}", tag="a")
    second = as_stories(b, f"{name}: {what}", tag="b")
    if len(first) != len(second):
        raise InputError(f"{name}: {len(first)} first stories but {len(second)} second stories; pass pairs")
    return first, second


class UtilityRanker(Ranker):
    """A ranker defined by a per-story utility u: ``prefer(a, b) = u(a) - u(b)``; the per-story score is u.

    Each DISTINCT story (by text, see `utility_key`) is encoded once per call, so scoring n pairs costs at most
    2n encodings and usually far fewer (the same human story appears in many pairs). Antisymmetry holds
    exactly; batch invariance holds when `utility` of a story does not depend on the other stories of the call.
    """

    @abstractmethod
    def utility(self, stories: Sequence[Story]) -> np.ndarray:
        """One float per story (NaN: undefined), independent of the other stories of the call."""

    def utility_key(self, story: Story) -> object:
        """What makes two stories the same for `utility` (the text; override when photos matter)."""
        return story.text

    def _distinct(self, stories: Sequence[Story]) -> tuple[list[Story], np.ndarray]:
        """The distinct stories (by `utility_key`, first occurrence kept) and, per story, its index among them."""
        import numpy as np
        index: dict[object, int] = {}
        distinct: list[Story] = []
        where = []
        for s in stories:
            k = self.utility_key(s)
            if k not in index:
                index[k] = len(distinct)
                distinct.append(s)
            where.append(index[k])
        return distinct, np.asarray(where, dtype=int)

    def _utilities(self, stories: Sequence[Story]) -> np.ndarray:
        import numpy as np
        distinct, where = self._distinct(stories)
        if not distinct:
            return np.zeros(0)
        return np.asarray(self.utility(distinct), dtype=float)[where]

    def prefer(self, a: Sequence[Story | str], b: Sequence[Story | str]) -> np.ndarray:
        """``u(a[i]) - u(b[i])`` for `Story` objects or texts; each distinct story's utility is computed once."""
        first, second = self._pairs(a, b, "prefer")
        u = self._utilities([*first, *second])
        return u[: len(first)] - u[len(first) :]

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """The per-story score is the utility u itself; a story whose utility is NaN is excluded."""
        values = self._utilities([i.hypothesis for i in items])
        excluded = {
            i.item_id: "the ranker leaves this story undefined"
            for i, v in zip(items, values, strict=True)
            if math.isnan(v)
        }
        return mean_score(self.name, [i.item_id for i in items], values.tolist(), signature, excluded=excluded)


class CrossEncoderRanker(Ranker):
    """A ranker that reads both stories at once, g(a, b) (e.g. Vrank: ``a [SEP] b`` through one encoder).

    ``prefer(a, b) = (g(a, b) - g(b, a)) / 2``, so antisymmetry holds exactly whatever g learnt. The per-story
    score of s is the mean of ``prefer(s, x)`` over a fixed, documented anchor set X (`anchors`), so it is
    comparable across calls and systems; its card must name the anchor set.
    """

    @abstractmethod
    def raw_preference(self, a: Sequence[Story], b: Sequence[Story]) -> np.ndarray:
        """g(a[i], b[i]) for every pair (not necessarily antisymmetric; independent of the other pairs)."""

    @abstractmethod
    def anchors(self) -> Sequence[Story]:
        """The fixed anchor stories the per-story score compares against (non-empty)."""

    def prefer(self, a: Sequence[Story | str], b: Sequence[Story | str]) -> np.ndarray:
        """The antisymmetrised preference ``(g(a, b) - g(b, a)) / 2``, one pass over both orders (`Story` objects
        or texts)."""
        import numpy as np

        a, b = self._pairs(a, b, "prefer")
        n = len(a)
        g = np.asarray(self.raw_preference([*a, *b], [*b, *a]), dtype=float)
        return (g[:n] - g[n:]) / 2.0

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """The per-story score is its mean `preference` over the `anchors` (their count in ``extra``)."""
        import numpy as np
        anchors = list(self.anchors())
        if not anchors:
            raise RuntimeError(f"{self.name} has no anchor stories")
        stories = [i.hypothesis for i in items]
        a = [s for s in stories for _ in anchors]
        b = [x for _ in stories for x in anchors]
        pref = self.preference(a, b).reshape(len(stories), len(anchors)) if stories else np.zeros((0, 1))
        values = pref.mean(axis=1)
        excluded = {
            i.item_id: "the ranker leaves this story undefined"
            for i, v in zip(items, values, strict=True)
            if math.isnan(v)
        }
        return mean_score(
            self.name, [i.item_id for i in items], values, signature, excluded=excluded, extra={"anchors": len(anchors)}
        )


def progress_items(items: Sequence[T]) -> Iterator[T]:
    """``for item in progress_items(items)``: a metric's loop over its items that moves the progress count of
    the task `Metric.score` opened (one per item; `vistkit.progress`)."""
    from vistkit import progress

    for item in items:
        yield item
        progress.advance()


def range_label(cls: type[Metric] | Metric) -> str:
    """A metric's declared range for a table column: ``0-1``, ``0-100``, ``-1 to 1``, ``>= 0``, ``unbounded``."""
    lo, hi = cls.lower_bound, cls.upper_bound
    if lo is None and hi is None:
        return "unbounded"
    if hi is None:
        return f">= {lo:g}"
    if lo is None:
        return f"<= {hi:g}"
    return f"{lo:g}-{hi:g}" if lo >= 0 else f"{lo:g} to {hi:g}"


def is_ranker(metric: Metric | type[Metric]) -> bool:
    """Whether ``metric`` (an instance or a class) is a pairwise `Ranker`."""
    cls = metric if isinstance(metric, type) else type(metric)
    return issubclass(cls, Ranker)


# --------------------------------------------------------------------------------------------------- registry
_REGISTRY: dict[str, type[Metric]] = {}
_UNAVAILABLE: dict[str, str] = {}
_DISCOVERED = False


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator: make a metric available by its ``name``. The same class of a module imported again (its
    first import was stopped by Ctrl-C or an error after this line, and Python forgot the module) takes the place
    of the old one; another class of that name is an error."""
    old = _REGISTRY.get(cls.name)
    if old is not None and old is not cls and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        # a user's own metric named like one of vistkit's (or two of theirs alike): say both, not "a bug in vistkit"
        raise InputError(
            f"two metrics are named {cls.name!r}: {old.__module__}.{old.__qualname__} and "
            f"{cls.__module__}.{cls.__qualname__}; give your own metric another name"
        )
    _REGISTRY[cls.name] = cls
    return cls


def register_unavailable(name: str, reason: str) -> None:
    """A metric users may ask for that cannot run here, with the sentence to show them."""
    _UNAVAILABLE[name] = reason


def _discover() -> None:
    """Import every module of `vistkit.metrics` once (each registers its metrics)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    import vistkit.metrics as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"vistkit.metrics.{mod.name}")
    _DISCOVERED = True


def list_metrics() -> dict[str, type[Metric]]:
    """All registered metrics by name (sorted)."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def unavailable_metrics() -> dict[str, str]:
    """The metrics users may ask for that cannot run here, by name (sorted), with the sentence to show them."""
    _discover()
    return dict(sorted(_UNAVAILABLE.items()))


def get_metric_class(name: str) -> type[Metric]:
    """The registered class of the metric ``name``; `UnavailableMetricError` or `UnknownMetricError` (with a
    suggestion) otherwise."""
    _discover()
    if not isinstance(name, str):
        raise UnknownMetricError(f"a metric is named by a string such as 'bleu-4', not {type(name).__name__}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in _UNAVAILABLE:
        raise UnavailableMetricError(_UNAVAILABLE[name])
    close = _close_metric_names(name, [*_REGISTRY, *_UNAVAILABLE])
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise UnknownMetricError(
        f"unknown metric {name!r}{hint}; `vistkit metrics` (Python: vistkit.list_metrics()) lists them"
    )


def _close_metric_names(name: str, names: Sequence[str]) -> list[str]:
    """The metrics ``name`` probably means, sorted: the same name but for case, spaces, ``_`` and ``-``
    (``BLEU_4``, ``bleu 4``), else the names holding it or held in it (``meteor``, ``bleu``; two letters at least,
    so an empty name suggests none rather than all), else a close spelling."""
    import difflib

    def folded(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    word = folded(name)
    if not word or len(word) > 100:  # nothing to compare, or not a name (a pasted text)
        return []
    same = [m for m in names if folded(m) == word]
    if same:
        return sorted(same)
    if len(word) >= 2:
        holding = [m for m in names if word in folded(m) or folded(m) in word]
        if holding:
            return sorted(holding)
    by_fold = {folded(m): m for m in names}
    return sorted(by_fold[f] for f in difflib.get_close_matches(word, list(by_fold), n=3, cutoff=0.75))


def metric_options(cls: type[Metric]) -> list[str]:
    """The keyword options a metric class takes."""
    import inspect

    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(cls.__init__).parameters
    return [p for p, v in params.items() if p != "self" and v.kind in named]


def check_options(cls: type[Metric], options: Iterable[str], *, keywords: Sequence[str] = ()) -> None:
    """`InputError` naming the first option ``cls`` does not take, the ones it does, and the option (or caller's
    keyword, ``keywords``: `score`'s own) it was probably meant to be (a metric whose ``__init__`` takes
    ``**options`` of its own decides itself)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters.values()
    if cls.__init__ is not Metric.__init__ and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    allowed = metric_options(cls)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        meant = did_you_mean(str(unknown[0]), [*allowed, *keywords])
        raise InputError(
            f"{cls.name} has no option {unknown[0]!r} (its options: {', '.join(allowed) or 'none'})"
            + (f"; did you mean {meant}?" if meant else "")
        )


def did_you_mean(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate ``name`` most likely misspells: the same but for case, ``_`` and ``-`` (``Key``,
    ``lower_case``), a close spelling (``tokenise``, ``keying``), or an abbreviation keeping its first letter
    and the order of its letters (``refs`` for ``references``); None when none is close."""
    import difflib

    def folded(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    word = folded(name)
    if not word:
        return None
    same = [c for c in candidates if folded(c) == word]
    if same:
        return same[0]
    close = difflib.get_close_matches(word, [folded(c) for c in candidates], n=1, cutoff=0.6)
    if close:
        return next(c for c in candidates if folded(c) == close[0])
    for c in candidates:
        letters = iter(folded(c))
        if len(word) >= 3 and folded(c)[:1] == word[:1] and all(ch in letters for ch in word):
            return c
    return None


def shown_whole(number: int) -> str:
    """A whole number for a message: with thousands separators, or its length when it is huge (Python refuses to
    print an integer of more than 4,300 digits: "Exceeds the limit ... for integer string conversion")."""
    if abs(number) < 10**30:
        return f"{number:,}"
    digits = number.bit_length() * 30103 // 100000 + 1  # about log10(2) digits per bit
    return f"a {'negative ' if number < 0 else ''}number of about {digits:,} digits"


#: the most CPU threads a metric's ``num_threads`` option may ask torch for (as ``vistkit vrank train --threads``)
MAX_THREADS = 1024


def check_num_threads(metric: str, value: int | None) -> int | None:
    """A metric's ``num_threads`` option: None (torch's choice) or a whole number from 1 to `MAX_THREADS`;
    anything else is an `InputError` naming the metric (torch would fail with a bare RuntimeError)."""
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise InputError(f"{metric}: num_threads must be a whole number from 1 to {MAX_THREADS:,} (got {value!r})")
    if not 1 <= int(value) <= MAX_THREADS:
        raise InputError(f"{metric}: num_threads must be from 1 to {MAX_THREADS:,} (got {shown_whole(int(value))})")
    return int(value)


def get_metric(name: str, **options: Any) -> Metric:
    """A ready scorer object for ``name`` (loads its model, if any, once); an unknown option is an `InputError`, and
    an argument of scoring (``key=``, ``references=``) says that it goes to the scorer's ``score``. The options'
    values (a photo folder that does not exist, a batch size of 0) are checked before the model loads."""
    cls = get_metric_class(name)
    scoring = [k for k in options if k in (*_SCORE_KEYWORDS, "hypotheses") and k not in metric_options(cls)]
    if scoring:
        raise InputError(
            f"{scoring[0]} is an argument of scoring, not an option of the {cls.name} scorer: "
            f"vistkit.get_metric({cls.name!r}).score(stories, references, {scoring[0]}=...)"
        )
    with python_api():
        cls.precheck(options)
        return cls(**options)


def score(
    name: str,
    hypotheses: Stories = _NOT_GIVEN,
    references: References | None = None,
    *,
    key: Keying | str | None = None,
    template: Sequence[str] | None = None,
    require_all: bool = False,
    reference_absent: bool = False,
    **options: Any,
) -> Score:
    """Functional face, as Hugging Face evaluate: ``score("bleu-4", ["a story"], [["a reference"]])``,
    ``score("rovist-nr", ["a story ."])``, ``score("meteor-vist", hyps, refs, key="sequence")`` with StorySets, or
    dicts by id (`as_story_sets`); ``key``, ``template``, ``require_all`` and ``reference_absent`` as
    `Metric.score`; the other ``options`` go to the metric."""
    if hypotheses is _NOT_GIVEN:  # Python said "missing 1 required positional argument: 'hypotheses'"
        raise _no_stories(options, "second, score(NAME, stories, references)")
    with python_api():  # its errors name Python's arguments (key=), not the command line's flags (--key)
        return _score(
            name,
            hypotheses,
            references,
            key=key,
            template=template,
            require_all=require_all,
            reference_absent=reference_absent,
            **options,
        )


def _score(
    name: str,
    hypotheses: Stories,
    references: References | None,
    *,
    key: Keying | str | None,
    template: Sequence[str] | None,
    require_all: bool,
    reference_absent: bool,
    **options: Any,
) -> Score:
    """`score`, inside `python_api`."""
    if isinstance(name, Metric):  # a load-once scorer: its own method scores with it
        raise InputError(
            f"score takes a metric's name; {name.name!r} is a scorer object: call its method, "
            "scorer.score(stories, references)"
        )
    if isinstance(name, list | tuple | set):
        raise InputError("score takes one metric name, such as 'bleu-4': score one metric per call")
    reference_absent = check_flag(reference_absent, "reference_absent")
    require_all = check_flag(require_all, "require_all")
    template = check_template(template)  # read once: a generator given as the template is then used up
    cls = get_metric_class(name)
    check_options(cls, options, keywords=_SCORE_KEYWORDS)
    # the stories are checked before the metric is built: a model loads for seconds to minutes (a language
    # model: 25 s), and an empty list, a wrong shape or missing references was refused only after it
    inputs = as_story_sets(hypotheses, references)
    alignment = cls._check_before_building(
        inputs, key=key, template=template, require_all=require_all, reference_absent=reference_absent
    )
    metric = get_metric(name, **options)
    if type(metric).score is not Metric.score:  # a metric of its own making scores its own way
        return metric.score(
            hypotheses,
            references,
            key=key,
            template=template,
            require_all=require_all,
            reference_absent=reference_absent,
        )
    return metric._score_inputs(
        inputs,
        key=key,
        template=template,
        require_all=require_all,
        reference_absent=reference_absent,
        alignment=alignment,
    )


def prefer(name: str, a: Sequence[Story | str], b: Sequence[Story | str], **options: Any) -> np.ndarray:
    """Functional face of a ranker: ``prefer("vrank", stories_a, stories_b, model=DIR)``, > 0 where ``a[i]`` is
    preferred; ``options`` go to the ranker. The metric, its options and the pairs are checked before the ranker
    loads its model."""
    cls = get_metric_class(name)
    if not issubclass(cls, Ranker):
        raise InputError(f"{cls.name} is not a pairwise metric (a ranker); score each story with `score` instead")
    check_options(cls, options)
    _pair_stories(cls.name, a, b, "prefer")
    with python_api():
        metric = get_metric(name, **options)
        return cast(Ranker, metric).preference(a, b)
