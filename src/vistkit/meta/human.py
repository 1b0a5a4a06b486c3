"""Readers (and builders) for human-judgement data: story pairs, raw rankings, Likert tables, error labels.

Sign convention (one place, used everywhere in `vistkit.meta`): a `StoryPair` stores ``gap`` in rank units as
``avg_rank_2 - avg_rank_1``. Lower rank is better, so ``gap > 0`` means people prefer story 1, ``gap < 0``
story 2 and ``gap == 0`` is a tie (such pairs are dropped, as in VHED). ``preference`` is the sign of ``gap``.

VHED's CSV (AcademiaSinicaNLPLab/VHED, ``dataset/VHED.csv``) names story 1 ``base`` and story 2 ``comp``; its
``label`` is the unnormalised difference of the two average ranks and ``rank_norm`` that gap divided by
``order`` (the number of stories ranked in the task; the VHED README calls ``order`` "number of rankers", the
issue and the Vrank paper's construction use N stories, which is what ``rank_norm = label / order`` needs).
Which way ``label`` is subtracted is checked against the rows' own ``avg_rank_base``/``avg_rank_comp``
(``label_sign="auto"``) or given explicitly; vistkit writes ``label = avg_rank_base - avg_rank_comp``
(negative: story 1 better).
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from vistkit.data.readers import shown_names
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError

#: System names that mean "a human-written reference story".
REFERENCE_SYSTEMS = frozenset(
    {"human", "gt", "reference", "ref", "groundtruth", "ground_truth", "ground-truth"}
)

#: VHED column layout (the order vistkit writes).
VHED_COLUMNS = (
    "sent1",
    "sent2",
    "label",
    "story_id",
    "img_seq",
    "model_base",
    "model_comp",
    "agreement",
    "avg_rank_base",
    "avg_rank_comp",
    "order",
    "rank_norm",
)

#: The six VIST human-evaluation aspects (Huang et al. 2016 / Hsu et al. 2020) and the Vrank error types.
VIST_ASPECTS = ("focused", "coherent", "share", "human", "grounded", "detailed")
VRANK_ERRORS = ("Gram", "Rep", "Desc", "Abs", "Event", "Obj")


#: how a message names a file that a command wrote for a moment (studio report's export): path -> words
SHOWN_AS: dict[str, str] = {}


def _shown(p: Path) -> str:
    return SHOWN_AS.get(str(p), str(p))


def _rows(n: int, plural: str, singular: str) -> str:
    """``3 rows judge`` / ``1 row judges``."""
    return f"{n} rows {plural}" if n != 1 else f"1 row {singular}"


def name_of(value: str | None) -> str:
    """A system, item or worker name of a table as it is matched: the spaces around it dropped and in Unicode NFC,
    as story ids are (`vistkit.data.story.clean_id`), so that ``résumé`` typed with a combining accent on some rows
    is the same system as ``résumé`` on the others (it was two systems that print alike)."""
    text = (value or "").strip()
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def is_reference_system(system: str | None) -> bool:
    """Whether ``system`` names a human reference story ("human", "gt", "reference", ...)."""
    return system is not None and system.strip().lower() in REFERENCE_SYSTEMS


# --------------------------------------------------------------------------------------------------- pairs
@dataclass(frozen=True)
class StoryPair:
    """Two stories of the same photo sequence and the human judgement of which is better.

    ``gap = avg_rank_2 - avg_rank_1`` (rank units, unnormalised); > 0: story 1 is better. ``agreement`` is the
    number of rankers ordering the pair like the average (3, 4 or 5 of 5), ``None`` when unknown.
    """

    pair_id: str
    story_id: str
    img_seq: tuple[str, ...]
    text_1: str
    text_2: str
    system_1: str
    system_2: str
    gap: float
    agreement: int | None = None
    n_stories: int | None = None
    avg_rank_1: float | None = None
    avg_rank_2: float | None = None
    gap_norm: float | None = None
    meta: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def preference(self) -> int:
        """+1: people prefer story 1; -1: story 2; 0: tie."""
        return int(np.sign(self.gap))

    @property
    def rank_norm(self) -> float:
        """|normalised ranking gap|: the file's ``rank_norm`` when it has one, else ``|gap| / N``, else
        ``|gap|``."""
        if self.gap_norm is not None:
            return abs(self.gap_norm)
        return abs(self.gap) / self.n_stories if self.n_stories else abs(self.gap)

    @property
    def has_reference(self) -> bool:
        """Whether one of the two stories is a human reference (a reference-machine pair)."""
        return is_reference_system(self.system_1) or is_reference_system(self.system_2)

    @property
    def kind(self) -> str:
        """``reference-machine``, ``machine-machine`` or ``reference-reference``."""
        n = is_reference_system(self.system_1) + is_reference_system(self.system_2)
        return ("machine-machine", "reference-machine", "reference-reference")[n]

    def swapped(self) -> StoryPair:
        """The same judgement with the two stories exchanged (the gap changes sign)."""
        return replace(
            self,
            text_1=self.text_2,
            text_2=self.text_1,
            system_1=self.system_2,
            system_2=self.system_1,
            gap=-self.gap,
            avg_rank_1=self.avg_rank_2,
            avg_rank_2=self.avg_rank_1,
        )

    def story(self, side: int) -> Story:
        """Story 1 or 2 as a `Story` (story id and photo sequence of the pair, system of that side)."""
        text, system = (self.text_1, self.system_1) if side == 1 else (self.text_2, self.system_2)
        return Story(story_id=self.story_id, text=text, photo_ids=self.img_seq, system=system)


_ID = re.compile(r"[A-Za-z0-9]+")


def parse_img_seq(value: str) -> tuple[str, ...]:
    """Photo ids from any common spelling: ``1-2-3``, ``1_2_3``, ``['1', '2']``, ``1 2 3``, ``1,2,3``."""
    return tuple(_ID.findall(value or ""))


def _separator_hint(names: Sequence[str]) -> str:
    """What to do (after "; ") when a comma-separated table's header came out as one column holding ``;``, a tab
    or ``|``: the file is separated by that (a spreadsheet saved in a language whose decimal mark is a comma
    writes ``;``); else ``""``."""
    if len(names) != 1:
        return ""
    sep = next((d for d in (";", "\t", "|") if d in names[0]), None)
    if sep is None:
        return ""
    return (
        f"; the header is one column, so the file looks separated by {sep!r}, not by commas (a spreadsheet in a "
        "language whose decimal mark is a comma saves ';'): save it as comma-separated CSV"
        + (", or name it .tsv" if sep == "\t" else "")
    )


#: what R (NA), spreadsheets (#N/A, -) and other tools write for a missing value, answered with how to write one
MISSING_MARKERS = frozenset(
    {"na", "n/a", "#n/a", "n.a.", "null", "none", "nil", "-", "--", "?", "missing"}
)


def _float(value: str | None, where: str, name: str) -> float | None:
    """A cell as a number; empty or ``nan`` (pandas' missing value) is ``None``; infinity is an error."""
    if value is None or str(value).strip() == "" or str(value).strip().lower() == "nan":
        return None
    try:
        if "_" in str(value):  # Python reads "4_0" as 40 (digit grouping); in a cell it is a typo, not forty
            raise ValueError
        number = float(value)
    except ValueError:
        if str(value).strip().lower() in MISSING_MARKERS:  # R's NA, a spreadsheet's #N/A: a missing value
            raise InputError(
                f"{where}: column {name!r} holds {value!r}, which vistkit does not read as a missing value; leave a "
                "missing value's cell empty (or write nan)"
            ) from None
        raise InputError(f"{where}: column {name!r} must be a number, got {value!r:.60}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: column {name!r} must be a finite number, got {value!r:.60}")
    return number


def _check_story_length(text: str | None, where: str, column: str, limit: int) -> None:
    """Refuse a story cell over ``limit`` characters (`vistkit.limits.max_story_chars`) naming its line and column,
    as the file is read: the `Story` made of it later refused it under an internal id (``story 'u0'``), after
    the models loaded."""
    from vistkit.limits import STORY_CHARS_ENV

    if text is not None and len(text) > limit:
        raise InputError(
            f"{where}: the story in column {column!r} holds {len(text):,} characters, over vistkit's limit of "
            f"{limit:,} per story (a VIST story has a few hundred); split it, or raise the limit with {STORY_CHARS_ENV}"
        )


def shown_number(value: float) -> str:
    """A number for a message: whole numbers as such (``3``), anything else, and huge or tiny values, in short
    form (``1e+30``, ``0.333333``), never thirty digits."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


# the most workers one pair's agreement can count: VHED has 5 per ranking, the studio's default is 5; a count over
# this (or below 0, or not whole) is a broken file, not a judgement
MAX_AGREEMENT = 100


def _count(value: str | None, where: str, name: str, *, high: int | None = None) -> int | None:
    """A cell that counts something (agreement, order): empty is ``None``; else a whole number in
    ``0..high``."""
    number = _float(value, where, name)
    if number is None:
        return None
    if number != int(number) or number < 0 or (high is not None and number > high):
        bound = f"0 to {high}" if high is not None else "0 or more"
        raise InputError(f"{where}: column {name!r} must be a whole number from {bound}, got {value!r:.60}")
    return int(number)


class _RepeatedRows:
    """Counts rows that repeat an earlier row cell for cell, for one warning (each still counts: two tasks may
    judge the same two stories alike, but a copy-paste slip counts one judgement twice). Keeps a hash of each
    row, not the row, so a file is not held twice (two different rows of one hash, a chance of 1 in 2^64 per two
    rows, would be counted in the warning only)."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}  # hash of the row's cells -> its first line
        self.repeats = 0
        self.first: tuple[int, int] | None = None  # (line, the earlier line it repeats)

    def add(self, row: dict[str, str], line: int) -> None:
        earlier = self.seen.setdefault(hash(tuple(sorted(row.items()))), line)
        if earlier != line:
            self.repeats += 1
            self.first = self.first or (line, earlier)

    def warn(self, p: Path) -> None:
        if self.repeats and self.first:
            from vistkit.errors import warn

            warn(
                f"{_shown(p)}: {_rows(self.repeats, 'repeat', 'repeats')} an earlier row exactly (first: line "
                f"{self.first[0]} = line {self.first[1]}); each is counted as a separate pair: remove copies that are "
                "not separate judgements"
            )


def _warn_repeated_rows(rows: Sequence[dict[str, str]], p: Path, lines: Sequence[int] | None = None) -> None:
    """One warning when rows repeat an earlier row cell for cell (`_RepeatedRows`). ``lines``: each row's line in
    the file (default: the row number + 1)."""
    repeated = _RepeatedRows()
    for n, row in zip(lines or range(2, len(rows) + 2), rows, strict=True):
        repeated.add(row, n)
    repeated.warn(p)


class _SignVotes:
    """`detect_label_sign` row by row: which way each row's ``label`` is subtracted, by its average ranks."""

    def __init__(self) -> None:
        self.votes = {"base-minus-comp": 0, "comp-minus-base": 0}
        self.has_ranks = self.has_preference = False

    def add(self, label: float | None, a: float | None, b: float | None) -> None:
        self.has_ranks |= a is not None and b is not None
        self.has_preference |= bool(label) or (label is None and a is not None and b is not None and a != b)
        if label is None or a is None or b is None or label == 0 or a == b:
            return
        self.votes["base-minus-comp" if np.sign(label) == np.sign(a - b) else "comp-minus-base"] += 1

    def result(self, where: str) -> str:
        votes = self.votes
        if votes["base-minus-comp"] and votes["comp-minus-base"]:
            raise InputError(
                f"{where}: the sign of 'label' disagrees with avg_rank_base - avg_rank_comp in "
                f"{min(votes.values())} of {sum(votes.values())} rows; fix the file or pass --label-sign"
            )
        if not any(votes.values()):
            if not self.has_preference:
                raise InputError(
                    f"{where}: every label is 0 or empty (no pair has a human preference), so there is nothing to "
                    "assess"
                )
            why = (
                "no row with a non-zero label has two different average ranks"
                if self.has_ranks
                else "no avg_rank_base/avg_rank_comp"
            )
            raise InputError(
                f"{where}: cannot tell which way 'label' is subtracted ({why}); "
                "pass --label-sign base-minus-comp or comp-minus-base"
            )
        return max(votes, key=lambda k: votes[k])


def detect_label_sign(
    rows: Sequence[dict[str, str]], *, where: str = "pairs", lines: Sequence[int] | None = None
) -> str:
    """``"base-minus-comp"`` or ``"comp-minus-base"``: the way ``label`` is subtracted, read off the rows.

    Needs ``avg_rank_base``/``avg_rank_comp``; every row with a non-zero label must agree (a mixed file is an
    error). The average ranks may be normalised (divided by N) while the label is not: only signs are
    compared. A file whose every label is 0 is refused as such: no pair has a preference to assess.
    """
    votes = _SignVotes()
    for n, row in zip(lines or range(2, len(rows) + 2), rows, strict=True):
        votes.add(
            _float(row.get("label"), f"{where} line {n}", "label"),
            _float(row.get("avg_rank_base"), f"{where} line {n}", "avg_rank_base"),
            _float(row.get("avg_rank_comp"), f"{where} line {n}", "avg_rank_comp"),
        )
    return votes.result(where)


class _PairRow(NamedTuple):
    """One row of a pairs CSV, read and checked, before the file's label sign is known (`read_pairs`)."""

    pair_id: str
    story_id: str
    img_seq: tuple[str, ...]
    text_1: str
    text_2: str
    system_1: str
    system_2: str
    label: float | None
    gap: float  # from the average ranks, where there is no label
    agreement: int | None
    order: int | None
    avg_rank_1: float | None
    avg_rank_2: float | None
    rank_norm: float | None
    label_source: str


# how far an average rank may lie outside 1..order (or 1/order..1, divided by order), and a label outside
# -(order - 1)..order - 1, before the row is refused: ranks rounded in the file
RANK_TOLERANCE = 0.005


def _check_ranks(a: float | None, b: float | None, label: float | None, order: int | None, *, where: str) -> None:
    """Refuse average ranks that no ranking gives: 0 or less; with ``order`` (N), outside 1 to N or, divided by N
    as VHED stores them (both 1 or less), outside 1/N to 1; a ``label`` (the unnormalised gap) over N - 1; without
    ``order`` and ``label``, ranks divided by N (both below 1), whose gap could not be put back in rank units."""
    names = (("avg_rank_base", a), ("avg_rank_comp", b))
    for name, v in names:
        if v is not None and v <= 0:
            raise InputError(
                f"{where}: {name} is {shown_number(v)}, but an average rank is 1 (the best) or more, or above 0 "
                "once divided by the number of stories ranked"
            )
    ranks = [v for _, v in names if v is not None]
    if order is not None:
        normalised = bool(ranks) and max(ranks) <= 1.0  # as read_pairs decides it
        low, high = (1 / order, 1.0) if normalised else (1.0, float(order))
        for name, v in names:
            if v is not None and not low - RANK_TOLERANCE <= v <= high + RANK_TOLERANCE:
                span = (
                    f"{shown_number(low)} to 1 divided by order"
                    if normalised
                    else f"1 to {order} (or {shown_number(1 / order)} to 1 divided by order, for both ranks)"
                )
                raise InputError(
                    f"{where}: {name} is {shown_number(v)}, but the average ranks of a task of {order} stories "
                    f"(order) run from {span}; fix the row"
                )
        if label is not None and abs(label) > order - 1 + RANK_TOLERANCE:
            raise InputError(
                f"{where}: label is {shown_number(label)}, but two average ranks of a task of {order} stories (order) "
                f"differ by at most {order - 1}; fix the row"
            )
    elif label is None and len(ranks) == 2 and max(ranks) < 1.0:
        raise InputError(
            f"{where}: the average ranks ({shown_number(ranks[0])}, {shown_number(ranks[1])}) are divided by the "
            "number of stories ranked (below 1), and the row has no order to multiply the gap back; give the row its "
            "order or its label"
        )


def read_pairs(path: str | Path, *, label_sign: str = "auto") -> list[StoryPair]:
    """Read a VHED-layout pairs CSV into `StoryPair` objects (zero-gap pairs are kept; assessments skip them).

    ``label_sign``: ``auto`` (check against the average ranks; see `detect_label_sign`), ``base-minus-comp``
    (``label = avg_rank_base - avg_rank_comp``; negative: story 1 better) or ``comp-minus-base``.

    Streamed: each row is checked as it is read and kept as a compact record (texts and names read once per
    distinct value), and a file of more than `vistkit.limits.max_pairs` rows is refused on the row past it. An
    ``order`` is at least 2, an average rank lies in 1..order (or 1/order..1), and either every row gives its
    ``order`` or ``rank_norm`` or none does: a gap divided by N is never bucketed with one that is not.
    """
    from vistkit.data.readers import open_csv
    from vistkit.limits import PAIRS_ENV, max_pairs, max_story_chars, too_many_rows

    p = Path(path)
    limit = max_pairs()
    story_chars = max_story_chars()
    records: list[_PairRow] = []
    strings: dict[str, str] = {}  # one object per distinct text, name or id (a story is in several pairs)
    votes = _SignVotes()
    repeated = _RepeatedRows()
    odd_norms: list[tuple[int, float, str]] = []  # (line, rank_norm, what label and order say) where they disagree
    same_text: list[int] = []  # lines whose two stories are one text: no metric can order them
    empty_story: list[int] = []  # lines with a story cell that holds no text (a broken row, most likely)
    lines = array("L")  # the line each row ends on, as in every message (a quoted story may span lines)

    def kept(value: str) -> str:
        return strings.setdefault(value, value)

    scaled: tuple[int, str] | None = None  # the first row that gives order or rank_norm: (line, which)
    unscaled: int | None = None  # the first row that gives neither
    with open_csv(p) as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty CSV (no header row)")
        names = list(f.fieldnames)
        if names and names[0] in ("", "Unnamed: 0"):
            names = names[1:]  # a pandas index column
        missing = [c for c in ("sent1", "sent2") if c not in names]
        if missing or ("label" not in names and not {"avg_rank_base", "avg_rank_comp"} <= set(names)):
            raise InputError(
                f"{p}: a pairs CSV needs columns sent1, sent2 and label (or avg_rank_base/avg_rank_comp); "
                f"found {shown_names(names)}{_separator_hint(names)}"
            )
        if label_sign not in ("auto", "base-minus-comp", "comp-minus-base"):
            raise InputError(f"--label-sign must be auto, base-minus-comp or comp-minus-base, not {label_sign!r}")
        for n, row in f:
            if len(records) >= limit:
                raise too_many_rows(p, limit, what="pairs (rows)", kind="story pairs", env=PAIRS_ENV)
            where = f"{p} line {n}"
            a = _float(row.get("avg_rank_base"), where, "avg_rank_base")
            b = _float(row.get("avg_rank_comp"), where, "avg_rank_comp")
            label = _float(row.get("label"), where, "label")
            if "label" in names and label_sign == "auto":
                votes.add(label, a, b)
            order = _count(row.get("order"), where, "order")
            if order is not None and order < 2:
                raise InputError(
                    f"{where}: column 'order' is the number of stories ranked in the task, so at least 2 (a pair "
                    f"needs two), got {row['order']!r:.60}"
                )
            _check_ranks(a, b, label, order, where=where)
            if label is None:
                if a is None or b is None:
                    raise InputError(f"{where}: no label and no average ranks")
                gap = b - a
                if order and max(a, b) <= 1.0:  # normalised average ranks
                    gap *= order
            else:
                gap = label
            agreement = _count(row.get("agreement"), where, "agreement", high=MAX_AGREEMENT)
            n_workers = _count(row.get("workers"), where, "workers")  # optional: who judged the pair
            if agreement is not None and n_workers is not None and agreement > n_workers:
                raise InputError(
                    f"{where}: agreement {agreement} is more than the {n_workers} workers who judged the pair"
                )
            rank_norm = _float(row.get("rank_norm"), where, "rank_norm")
            if rank_norm is not None:
                disagreement = _check_rank_norm(rank_norm, label, gap, order, where=where)
                if disagreement is not None:
                    odd_norms.append((n, rank_norm, disagreement))
            if order is not None or rank_norm is not None:
                scaled = scaled or (n, f"order {order}" if order is not None else f"rank_norm {row['rank_norm']}")
            else:
                unscaled = unscaled or n
            if scaled is not None and unscaled is not None:
                raise InputError(
                    f"{p} line {unscaled} gives neither order nor rank_norm, while line {scaled[0]} gives "
                    f"{scaled[1]:.40}: the ranking gap of one is divided by N and the other's cannot be, so the gap "
                    "buckets would mix two units; give every row its order (the number of stories ranked), or no row"
                )
            for column in ("sent1", "sent2"):
                _check_story_length(row[column], where, column, story_chars)
            repeated.add(row, n)
            lines.append(n)
            if row["sent1"] == row["sent2"] or row["sent1"].split() == row["sent2"].split():
                same_text.append(n)
            elif not row["sent1"].strip() or not row["sent2"].strip():
                empty_story.append(n)
            records.append(
                _PairRow(
                    pair_id=str(row.get("pair_id") or n - 2),
                    story_id=kept(str(row.get("story_id") or "")),
                    img_seq=parse_img_seq(row.get("img_seq", "")),
                    text_1=kept(row["sent1"]),
                    text_2=kept(row["sent2"]),
                    system_1=kept(name_of(row.get("model_base")) or "story1"),
                    system_2=kept(name_of(row.get("model_comp")) or "story2"),
                    label=label,
                    gap=float(gap),
                    agreement=agreement,
                    order=order,
                    avg_rank_1=a,
                    avg_rank_2=b,
                    rank_norm=rank_norm,
                    label_source=kept(row.get("label_source") or ""),
                )
            )
    if not records:
        raise InputError(f"{p}: has a header but no rows: no pairs to read")
    if "label" in names and label_sign == "auto":
        label_sign = votes.result(str(p))
    repeated.warn(p)
    repeated.seen.clear()
    _warn_same_text(same_text, p)
    _warn_empty_story(empty_story, p)
    strings.clear()  # the records hold the strings they need
    pairs = _pairs_of(records, label_sign)
    _warn_odd_rank_norms(odd_norms, len(pairs), p)
    _warn_contradicting_pairs(pairs, p, lines)
    return pairs


def _pairs_of(records: list[_PairRow], label_sign: str) -> list[StoryPair]:
    """`read_pairs`' records as `StoryPair` objects, ``records`` emptied as they are made (the two are never
    held whole at once); pairs of one label sign and source share one ``meta`` dict."""
    metas: dict[tuple[str, str], dict[str, str]] = {}
    pairs: list[StoryPair] = []
    records.reverse()
    while records:
        r = records.pop()
        sign = label_sign if r.label is not None else "from average ranks"
        meta = metas.get((sign, r.label_source))
        if meta is None:
            meta = metas[(sign, r.label_source)] = {
                "label_sign": sign,
                **({"label": r.label_source} if r.label_source else {}),
            }
        gap = r.gap if r.label is None else (-r.label if label_sign == "base-minus-comp" else r.label)
        pairs.append(
            StoryPair(
                pair_id=r.pair_id,
                story_id=r.story_id,
                img_seq=r.img_seq,
                text_1=r.text_1,
                text_2=r.text_2,
                system_1=r.system_1,
                system_2=r.system_2,
                gap=float(gap),
                agreement=r.agreement,
                n_stories=r.order,
                avg_rank_1=r.avg_rank_1,
                avg_rank_2=r.avg_rank_2,
                gap_norm=r.rank_norm,
                meta=meta,
            )
        )
    return pairs


# how far a file's rank_norm may lie from label / order (rounding in the file) before it is said to disagree
RANK_NORM_TOLERANCE = 0.005


def _check_rank_norm(rank_norm: float, label: float | None, gap: float, order: int | None, *, where: str) -> str | None:
    """Check a row's ``rank_norm`` (VHED: ``label / order``, the gap divided by the number of stories ranked):
    one outside -1..1 is impossible and refused; returns what ``label`` and ``order`` say instead when the two
    disagree (sign, or size where ``order`` is known), else None."""
    if abs(rank_norm) > 1:
        raise InputError(
            f"{where}: rank_norm is {shown_number(rank_norm)}, but it is the ranking gap divided by the number of "
            "stories ranked (label / order), so it lies between -1 and 1; fix the file or remove its rank_norm column"
        )
    if label is not None:
        if order:
            expected = label / order
            if abs(rank_norm - expected) > RANK_NORM_TOLERANCE:
                return f"label / order is {shown_number(expected)}"
            return None
        if np.sign(rank_norm) != np.sign(label):  # no order: only the sign can be checked
            return f"label is {shown_number(label)}"
        return None
    if order:
        expected = abs(gap) / order
        if abs(abs(rank_norm) - expected) > RANK_NORM_TOLERANCE:
            return f"|gap| / order is {shown_number(expected)}"
    return None


def _warn_odd_rank_norms(odd: Sequence[tuple[int, float, str]], total: int, p: Path) -> None:
    """One warning for the rows whose ``rank_norm`` disagrees with their ``label`` and ``order``."""
    if not odd:
        return
    from vistkit.errors import warn

    line, got, instead = odd[0]
    warn(
        f"{p}: rank_norm disagrees with label / order in {len(odd)} of {total} rows (first: line {line}, rank_norm "
        f"{shown_number(got)} where {instead}); the gap buckets use the file's rank_norm, so fix those rows or "
        "remove the rank_norm column to use label / order"
    )


def _warn_same_text(lines: Sequence[int], p: Path) -> None:
    """One warning for the rows whose two stories are the same text (spaces aside): every metric ties on such a
    pair, and a tie counts as wrong wherever people preferred one of them."""
    if not lines:
        return
    from vistkit.errors import warn

    warn(
        f"{_shown(p)}: {_rows(len(lines), 'set', 'sets')} a story against the same text (first: line {lines[0]}); "
        "no metric can order such a pair, so it counts as wrong wherever its label prefers one side: check that "
        "sent1 and sent2 hold the two stories"
    )


def _warn_empty_story(lines: Sequence[int], p: Path) -> None:
    """One warning for the rows one of whose stories is empty (a cell lost in an export, most likely): a metric
    scores an empty story as it scores any text, so the pair counts as if someone had judged an empty story."""
    if not lines:
        return
    from vistkit.errors import warn

    warn(
        f"{_shown(p)}: {_rows(len(lines), 'have', 'has')} an empty story in sent1 or sent2 (first: line {lines[0]}); "
        "such a pair is scored and counted as any other: check that the file lost no text"
    )


def _warn_contradicting_pairs(pairs: Sequence[StoryPair], p: Path, lines: Sequence[int]) -> None:
    """One warning when rows judge the same two stories (same texts, either order) the other way round from an
    earlier row; each still counts (two tasks may disagree), but a label with the wrong sign looks the same.
    ``lines``: each pair's line in the file (not its row number: a quoted story may hold new lines)."""
    first_seen: dict[tuple[str, str], tuple[int, int]] = {}  # the two texts in order -> (preference, line)
    contradicting = 0
    example: tuple[int, int] | None = None
    for n, pr in zip(lines, pairs, strict=True):  # one pair per row, in file order
        if pr.preference == 0:
            continue
        in_order = pr.text_1 <= pr.text_2
        key = (pr.text_1, pr.text_2) if in_order else (pr.text_2, pr.text_1)
        pref = pr.preference if in_order else -pr.preference
        seen = first_seen.setdefault(key, (pref, n))
        if seen[0] != pref:
            contradicting += 1
            example = example or (n, seen[1])
    if contradicting and example:
        from vistkit.errors import warn

        warn(
            f"{_shown(p)}: {_rows(contradicting, 'judge', 'judges')} the same two stories as an earlier row "
            f"but {'prefers' if contradicting == 1 else 'prefer'} the other one (first: line {example[0]} against "
            f"line {example[1]}); both are counted, so check that no label has the wrong sign"
        )


def write_pairs(pairs: Iterable[StoryPair], path: str | Path) -> None:
    """Write pairs in the VHED column layout with ``label = avg_rank_base - avg_rank_comp`` (see module doc).

    ``avg_rank_*`` are written normalised (mean rank / N) when N is known, as VHED's pair construction does.
    Pairs with a proxy label (`build_reference_pairs`) get an extra last column ``label_source`` saying so.
    """
    pairs = list(pairs)
    proxy = any(pr.meta.get("label") for pr in pairs)
    from vistkit.data.output import open_csv_output

    with open_csv_output(path) as w:
        w.writerow([*VHED_COLUMNS, "label_source"] if proxy else VHED_COLUMNS)
        for pr in pairs:
            n = pr.n_stories
            w.writerow(
                [
                    pr.text_1,
                    pr.text_2,
                    repr(-pr.gap),
                    pr.story_id,
                    "-".join(pr.img_seq),
                    pr.system_1,
                    pr.system_2,
                    "" if pr.agreement is None else pr.agreement,
                    "" if pr.avg_rank_1 is None else repr(pr.avg_rank_1),
                    "" if pr.avg_rank_2 is None else repr(pr.avg_rank_2),
                    "" if n is None else n,
                    repr(-float(np.sign(pr.gap)) * pr.rank_norm) if (n or pr.gap_norm is not None) else "",
                    *([pr.meta.get("label", "")] if proxy else []),
                ]
            )


# --------------------------------------------------------------------------------------------------- rankings
@dataclass(frozen=True)
class RankedStory:
    """One story of a ranking task (text and system when the rankings file carries them)."""

    key: str
    text: str = ""
    system: str = ""
    story_id: str = ""
    img_seq: tuple[str, ...] = ()


def read_rankings(path: str | Path) -> dict[str, dict[str, Any]]:
    """Raw rankings CSV (``task, worker, story, rank`` + optional ``text, system, story_id, img_seq``).

    Returns ``{task: {"stories": {key: RankedStory}, "ranks": {worker: {key: rank}}, "lines": {(worker, key):
    line}}}`` in file order. A rank is a whole number from 1 (best) to N, the number of stories in its task (two
    stories may share a rank: a tie); every worker of a task ranks every story of it once; task, worker and story
    names are matched as `name_of` (spaces around them dropped) and none may be blank. Anything else is refused
    naming the line. Streamed (rows are not kept, and each worker and story name is held once); a file of
    more than `vistkit.limits.max_stories` rows is refused on the row past it.
    """
    from vistkit.data.readers import open_csv
    from vistkit.limits import STORIES_ENV, max_stories, max_story_chars, too_many_rows

    p = Path(path)
    limit = max_stories()
    story_chars = max_story_chars()
    tasks: dict[str, dict[str, Any]] = {}
    first_line: dict[tuple[str, str], dict[str, int]] = {}  # (task, story) -> {"text"/"system": its first line}
    names_seen: dict[str, str] = {}  # one object per distinct task, worker or story name

    def kept(value: str) -> str:
        return names_seen.setdefault(value, value)

    with open_csv(p) as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty CSV (no header row)")
        need = [c for c in ("task", "worker", "story", "rank") if c not in f.fieldnames]
        if need:
            raise InputError(
                f"{p}: a rankings CSV needs columns task, worker, story, rank; missing {', '.join(need)}"
                f"{_separator_hint(list(f.fieldnames))}"
            )
        count = 0
        for n, row in f:
            count += 1
            if count > limit:
                raise too_many_rows(
                    p, limit, what="rows (each a worker's rank of a story)", kind="stories per file", env=STORIES_ENV
                )
            where = f"{p} line {n}"
            # names matched as the other tables' (spaces around them dropped, NFC); a blank one put every such row
            # in one task "" (a spreadsheet's merged task cells export blank after the first row), one worker or
            # one story, and paired stories of different tasks without a word
            task_id, key, worker = (kept(name_of(row[c])) for c in ("task", "story", "worker"))
            blank = next((c for c, v in (("task", task_id), ("worker", worker), ("story", key)) if not v), None)
            if blank is not None:
                raise InputError(f"{where}: the {blank} cell is empty; every row names its {blank}")
            _check_story_length(row.get("text"), where, "text", story_chars)
            task = tasks.setdefault(task_id, {"stories": {}, "ranks": {}, "lines": {}})
            if key not in task["stories"]:
                task["stories"][key] = RankedStory(
                    key=key,
                    text=row.get("text", ""),
                    system=name_of(row.get("system")),
                    story_id=row.get("story_id", ""),
                    img_seq=parse_img_seq(row.get("img_seq", "")),
                )
            task["stories"][key] = _same_story(
                task["stories"][key], row, first_line.setdefault((task_id, key), {}), where=where, line=n
            )
            cell = row["rank"]
            rank = _float(cell, where, "rank")
            if rank is None and not cell.strip():
                raise InputError(f"{where}: empty rank")
            if rank is None or rank != int(rank) or rank < 1:
                raise InputError(
                    f"{where}: rank must be a whole number from 1 (the best) to the number of stories in the task, "
                    f"got {cell!r:.30}{' (not a number)' if rank is None else ''}"
                )
            ranks = task["ranks"].setdefault(worker, {})
            if key in ranks:
                raise InputError(f"{where}: worker {worker!r} ranks story {key!r} twice in task {task_id!r}")
            ranks[key] = rank
            task["lines"][(worker, key)] = n
    for task_id, task in tasks.items():
        check_task_ranks(task_id, task, where=p)
    return tasks


def _same_story(
    story: RankedStory, row: dict[str, str], lines: dict[str, int], *, where: str, line: int
) -> RankedStory:
    """``story`` with the text, system, story_id and img_seq of another row of it filled in where it had none; a
    row of the same task and story with a different one is refused (it is another story, or other photos: the
    first would be kept silently). ``lines``: the first line that gave each field."""
    found = {
        "text": " ".join((row.get("text") or "").split()),
        "system": name_of(row.get("system")),
        "story_id": (row.get("story_id") or "").strip(),
        "img_seq": "-".join(parse_img_seq(row.get("img_seq", ""))),
    }
    known = {
        "text": " ".join(story.text.split()),
        "system": name_of(story.system),
        "story_id": story.story_id.strip(),
        "img_seq": "-".join(story.img_seq),
    }
    for name, value in found.items():
        if not value:
            continue
        if not known[name]:
            filled: dict[str, Any] = {
                "text": row.get("text", ""),
                "system": value,
                "story_id": row.get("story_id", ""),
                "img_seq": parse_img_seq(value),
            }
            story = replace(story, **{name: filled[name]})
        elif value != known[name]:
            raise InputError(
                f"{where}: story {row['story']!r} of task {row['task']!r} has a different {name} than on line "
                f"{lines.get(name, '?')}; one story of a task is one story, so give the other story its own id"
            )
        lines.setdefault(name, line)
    return story


def check_task_ranks(task_id: str, task: dict[str, Any], *, where: str | Path | None = None) -> None:
    """Refuse a task (`read_rankings` layout) in which a worker leaves a story unranked or gives a rank that is
    not a whole number from 1 to N (N = the task's stories); names the line of file ``where`` when the task
    carries its lines."""
    stories, ranks = task["stories"], task["ranks"]
    n = len(stories)
    lines: dict[tuple[str, str], int] = task.get("lines", {})
    for worker, r in ranks.items():
        lacking = [k for k in stories if k not in r]
        if lacking:
            raise InputError(f"task {task_id!r}: worker {worker!r} did not rank story {lacking[0]!r}")
        for key, rank in r.items():
            if math.isfinite(rank) and rank == int(rank) and 1 <= rank <= n:
                continue
            line = lines.get((worker, key))
            at = f"{where} line {line}" if line is not None and where is not None else f"task {task_id!r}"
            raise InputError(
                f"{at}: worker {worker!r} ranks story {key!r} {shown_number(rank)}, but ranks run from 1 (the best) to "
                f"{n}, the number of stories in task {task_id!r}"
            )


def pairs_from_rankings(tasks: dict[str, dict[str, Any]]) -> list[StoryPair]:
    """VHED-style pairs from raw rankings, built as VHED was (Hsu et al. 2022, Sec. 3.1):

    C(N, 2) pairs per task (stories in first-seen order, story 1 = the earlier); each story's average rank
    over the k workers; ``gap = mean_rank_2 - mean_rank_1`` (unnormalised; ``rank_norm = |gap| / N``); pairs with
    zero gap are dropped. Average ranks are stored normalised (divided by N).

    ``agreement`` = ``max(a, d)``: ``a`` workers order the pair like the average, ``d`` the other way, and a
    worker who gives both stories the same rank (a tie) counts for neither. Without ties ``d = k - a``, which is
    VHED's fold ``max(a, k - a)`` (2 of 5 is 3 of 5 "the other way": values 3, 4, 5 for k = 5); a tie never
    counts as the opposite order, so 4 ties and 1 preference is agreement 1, in no Omega subset. One worker
    gives agreement 1. ``meta["ties"]`` is the number of tying workers. Ranks are checked first
    (`check_task_ranks`); a task with one story gives no pair and is named in one warning.
    """
    from vistkit.limits import too_many_pairs

    error = too_many_pairs(sum(len(t["stories"]) * (len(t["stories"]) - 1) // 2 for t in tasks.values()), "the tasks")
    if error is not None:
        raise error
    pairs: list[StoryPair] = []
    single: list[str] = []
    for task_id, task in tasks.items():
        check_task_ranks(task_id, task)
        stories: dict[str, RankedStory] = task["stories"]
        ranks: dict[str, dict[str, float]] = task["ranks"]
        keys = list(stories)
        n = len(keys)
        _check_one_sequence(task_id, stories)
        if n == 1:
            single.append(str(task_id))
        means = {key: float(np.mean([r[key] for r in ranks.values()])) for key in keys}
        if n < 2:
            continue
        # worker x story ranks: each story's agreements with all later ones in one numpy pass (a Python loop over
        # the workers of every pair took 19 s for one task of 1,000 stories); the same integers and floats
        table = np.array([[r[key] for key in keys] for r in ranks.values()], dtype=np.float64).reshape(-1, n)
        mean_row = np.array([means[key] for key in keys], dtype=np.float64)
        for i in range(n - 1):
            gaps = mean_row[i + 1 :] - mean_row[i]
            orders = np.sign(table[:, i + 1 :] - table[:, i : i + 1])
            agrees = (orders == np.sign(gaps)).sum(axis=0).tolist()
            disagrees = (orders == -np.sign(gaps)).sum(axis=0).tolist()
            a, sa = keys[i], stories[keys[i]]
            for j, gap in enumerate(gaps.tolist(), start=i + 1):
                if gap == 0:
                    continue
                b, sb = keys[j], stories[keys[j]]
                agree, disagree = agrees[j - i - 1], disagrees[j - i - 1]
                pairs.append(
                    StoryPair(
                        pair_id=f"{task_id}:{a}:{b}",
                        story_id=sa.story_id or sb.story_id or str(task_id),
                        img_seq=sa.img_seq or sb.img_seq,
                        text_1=sa.text,
                        text_2=sb.text,
                        system_1=sa.system or a,
                        system_2=sb.system or b,
                        gap=gap,
                        agreement=max(agree, disagree),
                        n_stories=n,
                        avg_rank_1=means[a] / n,
                        avg_rank_2=means[b] / n,
                        meta={"task": str(task_id), "ties": str(len(table) - agree - disagree)},
                    )
                )
    if single:
        from vistkit.errors import warn

        many = len(single) > 1
        warn(
            f"{len(single)} task{'s' if many else ''} {'have' if many else 'has'} only one story and give"
            f"{'' if many else 's'} no pair (first: task {single[0]!r})"
        )
    return pairs


def _check_one_sequence(task_id: str, stories: dict[str, RankedStory]) -> None:
    """Refuse a task whose stories carry different photo sequences: each pair carries one img_seq (the first
    story's), so the other story would be scored against the references of photos it was not written for."""
    seqs = {key: s.img_seq for key, s in stories.items() if s.img_seq}
    first = next(iter(seqs), None)
    other = next((key for key, seq in seqs.items() if first is not None and seq != seqs[first]), None)
    if first is not None and other is not None:
        raise InputError(
            f"task {task_id!r}: story {first!r} has img_seq {'-'.join(seqs[first])!r:.60} but story {other!r} has "
            f"{'-'.join(seqs[other])!r:.60}; a pair carries one photo sequence, so rank stories of one sequence per "
            "task (or leave img_seq empty)"
        )


# --------------------------------------------------------------------------------------------------- proxy pa
def build_reference_pairs(
    references: StorySet,
    machines: Sequence[StorySet],
    *,
    key: Keying | str = Keying.STORY,
    reference_system: str = "human",
    limit: int | None = None,
) -> list[StoryPair]:
    """Human-vs-machine pairs with the PROXY label "the human reference is better" (gap = +1, N = 2).

    For every machine story, one pair per reference story sharing its ``key`` (story 1 = the reference, story
    2 = the machine story); only the first ``limit`` when given. More than `vistkit.limits.max_pairs` is refused
    before any pair is built. The label is an assumption, not a judgement: use these pairs as a smoke test and
    to measure how often a metric prefers the human story, never as human-evaluation data.

    A machine file whose every story is the text of its reference (the human stories themselves) is refused; a
    warning counts the pairs of one text and the machine stories that share no key with the references.
    """
    from vistkit.limits import too_many_pairs

    keying = Keying.parse(key)
    refs = references.group(keying)
    keyed: list[tuple[Story, list[Story]]] = []
    for machine in machines:
        first = len(keyed)
        for hyp in machine:
            try:
                k = hyp.key(keying)
            except InputError:
                raise InputError(
                    f"{machine.source or 'machine stories'} cannot be keyed by {keying.value}; "
                    "pass --key story or --key sequence to match the references"
                ) from None
            keyed.append((hyp, refs.get(k, [])))
        _check_machine_matches(machine, keyed[first:], keying, limit=limit)
    # counted before any is built: 10,000 references and 10,000 machine stories of one album are 10^8 pairs
    count = sum(len(matched) for _, matched in keyed)
    error = too_many_pairs(count if limit is None else min(count, limit), "the machine stories and references")
    if error is not None:
        raise error
    pairs: list[StoryPair] = []
    for hyp, matched in keyed:
        if limit is not None and len(pairs) >= limit:
            break
        for ref in matched[: None if limit is None else limit - len(pairs)]:
            pairs.append(
                StoryPair(
                    pair_id=f"{ref.story_id}:{hyp.system}",
                    story_id=ref.story_id,
                    img_seq=ref.photo_ids or hyp.photo_ids,
                    text_1=ref.text,
                    text_2=hyp.text,
                    system_1=reference_system,
                    system_2=hyp.system or "machine",
                    gap=1.0,
                    agreement=None,
                    n_stories=2,
                    avg_rank_1=0.5,
                    avg_rank_2=1.0,
                    meta={"label": "proxy: human is better"},
                )
            )
    if count == 0:
        hints = []
        for other in (Keying.STORY, Keying.SEQUENCE):  # the keys --key SYSTEM=KEY takes
            try:
                ref_keys = references.group(other)
                shared = sum(1 for machine in machines for hyp in machine if hyp.key(other) in ref_keys)
            except InputError:  # a side without photo sequences
                continue
            if other is not keying and shared:
                total = sum(len(m) for m in machines)
                names = {hyp.system for machine in machines for hyp in machine}
                name = next(iter(names)) if len(names) == 1 and None not in names else "SYSTEM"
                hints.append(f"; with --key {name}={other.value}, {shared:,} of {total:,} machine stories would")
        raise InputError(
            f"no machine story shares {keying.article} {keying.value} key with the references"
            + ("".join(hints) or "; check --key")
        )
    return pairs


def _check_machine_matches(
    machine: StorySet,
    keyed: Sequence[tuple[Story, list[Story]]],
    keying: Keying,
    *,
    limit: int | None,
) -> None:
    """Refuse a machine file that holds the references themselves (every pair one text: the human story set
    against itself, labelled "the human story is better"); warn about some such pairs, and, without ``limit``,
    about machine stories that share no key with the references (they were left out without a word)."""
    from vistkit.errors import warn

    def text(story: Story) -> str:  # as the metrics compare: spaces aside, in NFC
        return unicodedata.normalize("NFC", " ".join(story.text.split()))

    name = machine.source or "machine stories"
    pairs = sum(len(m) for _, m in keyed)
    same = sum(1 for hyp, matched in keyed for ref in matched if text(ref) == text(hyp))
    if pairs and same == pairs:
        raise InputError(
            f"{name}: every one of its {pairs:,} pairs sets a human story against the same text, so the file holds the "
            "human stories themselves; give the machine stories (for a file of several stories per record, name "
            "the field: --machine SYSTEM=FILE:FIELD, e.g. PR_VIST.json.zip:predicted_story)"
        )
    if same:
        warn(
            f"{name}: {same:,} of {pairs:,} pairs set a machine story against the same text (a copy of its "
            "reference); no metric can order such a pair, so it counts as wrong in `meta pairs`"
        )
    empty = sum(1 for hyp, matched in keyed if matched and not hyp.text.strip())
    if empty:
        warn(
            f"{name}: {empty:,} of {len(keyed):,} machine stories are empty (no text); their pairs are written, and "
            "`meta pairs` will warn about them: check that the file holds the stories (or its :FIELD names them)"
        )
    unmatched = sum(1 for _, matched in keyed if not matched)
    if pairs and unmatched and limit is None:
        warn(
            f"{name}: {unmatched:,} of {len(keyed):,} machine stories share no {keying.value} key with the "
            "references and have no pair"
        )


# --------------------------------------------------------------------------------------------------- scores
@dataclass
class HumanScores:
    """Per-story human judgements: one row per (system, item), one column per aspect (means over workers).

    ``texts[i]`` is the story text when the table carries it (column ``text``), else ``""``.
    """

    systems: list[str]
    items: list[str]
    aspects: list[str]
    values: np.ndarray
    texts: list[str]
    n_workers: np.ndarray
    binary: bool = False
    ties: np.ndarray | None = None  # error labels: where the annotators split evenly (majority vote: error present)
    #: each row's photo sequence when the table has an ``img_seq`` column (a studio export), else None
    img_seqs: list[str] | None = None

    def __len__(self) -> int:
        return len(self.items)

    def column(self, aspect: str) -> np.ndarray:
        """The values of one aspect, one per row; `InputError` naming the table's aspects when it has no ``aspect``."""
        try:
            return self.values[:, self.aspects.index(aspect)]
        except ValueError:
            raise InputError(f"no aspect {aspect!r}; the table has {', '.join(self.aspects)}") from None


_NON_ASPECT = {"system", "item", "worker", "text", "story_id", "img_seq", "task", "model", "story"}


def parse_scale(text: str | Sequence[float]) -> tuple[float, float]:
    """``"1-5"`` (or ``"1,5"``, ``"0:100"``, a pair of numbers) -> ``(1.0, 5.0)``: the lowest and highest rating."""
    import re

    if isinstance(text, str):
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*[-,:]\s*(-?\d+(?:\.\d+)?)\s*", text)
        if m is None:
            raise InputError(f"--scale must be LOW-HIGH, e.g. 1-5, got {text!r}")
        low, high = float(m.group(1)), float(m.group(2))
    else:
        low, high = (float(x) for x in text)
    if not low < high:
        raise InputError(f"--scale {text!r}: the lowest rating must be below the highest")
    return low, high


def _cell(value: str | None, where: str, column: str, *, guessed: bool, binary: bool) -> float | None:
    """A rating or label cell as `_float`; when the columns were not named (every column but the id and text
    ones is read), a cell that is not a number says how to name them, since the column may be no rating at all
    (a comment, a time stamp). An error label may also be TRUE or FALSE (in any case), as a spreadsheet exports a
    checkbox column."""
    if binary and value is not None and value.strip().lower() in ("true", "false"):
        return 1.0 if value.strip().lower() == "true" else 0.0
    try:
        return _float(value, where, column)
    except InputError as error:
        exc = (
            InputError(f"{where}: column {column!r} must be an error label, 0 or 1 (or TRUE/FALSE), got {value!r:.60}")
            if binary
            else error
        )
        if not guessed:
            raise exc from None
        option = "--errors" if binary else "--aspects"
        raise InputError(
            f"{exc}; every column but {', '.join(sorted(_NON_ASPECT))} is read as "
            f"{'an error label' if binary else 'a rating'}: if {column!r} is not one, name the columns to read with "
            f"{option}"
        ) from None


def _read_judgements(
    path: str | Path,
    *,
    aspects: Sequence[str] | None,
    binary: bool,
    scale: tuple[float, float] | None = None,
) -> HumanScores:
    """Stream the table (rows are not kept: per story a running sum and count of each aspect), so memory grows
    with the number of stories and (story, worker) judgements, not with the file, and a file of more than
    `vistkit.limits.max_stories` rows is refused on the row past it; line numbers in messages are the file's (a
    quoted cell may span lines)."""
    from vistkit.data.readers import open_csv
    from vistkit.limits import STORIES_ENV, max_stories, max_story_chars, too_many_rows

    p = Path(path)
    limit = max_stories()
    story_chars = max_story_chars()
    with open_csv(p) as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty CSV (no header row)")
        names = list(f.fieldnames)
        if names and names[0] in ("", "Unnamed: 0"):
            names = names[1:]  # a pandas index column
        sys_col = "system" if "system" in names else ("model" if "model" in names else None)
        item_col = "item" if "item" in names else ("story_id" if "story_id" in names else None)
        if sys_col is None or item_col is None:
            raise InputError(
                f"{p}: needs columns system and item (one row per story and worker); found {shown_names(names)}"
                f"{_separator_hint(names)}"
            )
        cols = list(aspects) if aspects else [c for c in names if c not in _NON_ASPECT]
        bad = [c for c in cols if c not in names]
        kind, option = ("error", "--errors") if binary else ("aspect", "--aspects")
        if bad:
            raise InputError(f"{p}: no {kind} column {bad[0]!r:.60}; columns are {shown_names(names)}")
        if not cols:  # said "no aspect column ''": every column has a name read as an id or a text
            maybe = [c for c in names if c not in (sys_col, item_col, "worker", "text", "img_seq")]
            example = f" (e.g. {option} {maybe[0]})" if maybe else ""
            raise InputError(
                f"{p}: no {'error label' if binary else 'rating'} column: its columns ({shown_names(names)}) are all "
                f"read as ids or text; name the {kind} columns with {option}{example}"
            )
        index: dict[tuple[str, str], int] = {}  # (system, item) -> story number, in order of first appearance
        first_line: list[int] = []
        sums: list[list[float]] = []
        counts: list[list[int]] = []
        n_rows: list[int] = []
        texts: dict[int, tuple[str, int]] = {}  # story -> (text, its first line)
        has_img_seq = "img_seq" in names
        img_seqs: dict[int, str] = {}  # story -> its photo sequence (the first row that gives one)
        workers: dict[str, int] = {}
        judged: dict[tuple[int, int], int] = {}  # (story, worker) -> first line
        repeats = 0
        first_repeat: tuple[int, int] | None = None  # (line, the earlier line it repeats)
        # a Likert story rated on several rows must say by whom: without a worker column a copy-pasted row would
        # be averaged in as one more judgement (error labels are documented as one row per annotator, no worker)
        has_worker = "worker" in names
        anonymous_repeats = not binary and not has_worker
        low, high = scale if scale is not None else (-math.inf, math.inf)
        n_read = 0
        for n, row in f:
            n_read += 1
            if n_read > limit:
                what = "rows (each an annotator's labels of a story)" if binary else "rows (each a worker's ratings)"
                raise too_many_rows(p, limit, what=what, kind="stories per file", env=STORIES_ENV)
            k = (name_of(row[sys_col]), name_of(row[item_col]))
            blank = next((c for c, v in ((sys_col, k[0]), (item_col, k[1])) if not v), None)
            if blank is None and has_worker and not row["worker"].strip():
                blank = "worker"
            if blank is not None:  # one blank id would merge every such row into one story (or one worker)
                raise InputError(f"{p} line {n}: the {blank} cell is empty; every row names its {blank}")
            i = index.get(k)
            if i is None:
                i = index[k] = len(first_line)
                first_line.append(n)
                sums.append([0.0] * len(cols))
                counts.append([0] * len(cols))
                n_rows.append(0)
            elif anonymous_repeats:
                repeats += 1
                first_repeat = first_repeat or (n, first_line[i])
            if has_worker:
                w = workers.setdefault(name_of(row["worker"]), len(workers))
                seen = judged.setdefault((i, w), n)
                if seen != n:
                    repeats += 1
                    first_repeat = first_repeat or (n, seen)
            if has_img_seq and (row.get("img_seq") or "").strip():
                img_seqs.setdefault(i, row["img_seq"].strip())
            text = row.get("text") or ""
            if text:
                _check_story_length(text, f"{p} line {n}", "text", story_chars)
                known = texts.setdefault(i, (text, n))
                if known[0] != text and " ".join(known[0].split()) != " ".join(text.split()):
                    raise InputError(
                        f"{p} line {n}: system {k[0]!r} item {k[1]!r} has a different text than on line "
                        f"{known[1]}; one system and item is one story, so give the other story its own item id"
                    )
            total, count = sums[i], counts[i]
            for j, c in enumerate(cols):
                v = _cell(row.get(c), f"{p} line {n}", c, guessed=not aspects, binary=binary)
                if v is None:
                    continue
                if binary and v not in (0.0, 1.0):
                    raise InputError(
                        f"{p} line {n}: error label {c!r} must be 0 or 1 (or TRUE/FALSE), got {row.get(c)!r:.60}"
                    )
                if not low <= v <= high:
                    raise InputError(
                        f"{p} line {n}: rating {c!r} is {row.get(c)!r:.30}, outside the scale "
                        f"{low:g}-{high:g}; fix the file or pass the scale it uses with --scale LOW-HIGH"
                    )
                total[j] += v
                count[j] += 1
            n_rows[i] += 1
    if first_repeat is not None and anonymous_repeats:
        n, first = first_repeat
        raise InputError(
            f"{_shown(p)}: {_rows(repeats, 'rate', 'rates')} a story rated on an earlier row and "
            f"there is no worker column to tell whose ratings they are (first: line {n} repeats system and item of "
            f"line {first}); add a worker column, or remove the copies"
        )
    if first_repeat is not None:
        n, first = first_repeat
        raise InputError(
            f"{_shown(p)}: {_rows(repeats, 'judge', 'judges')} a story a worker already judged "
            f"(first: line {n} repeats system, item and worker of line {first}); remove the copies"
        )
    if not index:
        raise InputError(f"{p}: has a header but no rows: no judgements to read")
    keys = list(index)
    # an aspect nobody rated for a story: NaN (missing)
    values = np.array(
        [[t / c if c else math.nan for t, c in zip(sums[i], counts[i], strict=True)] for i in range(len(keys))],
        dtype=float,
    ).reshape(len(keys), len(cols))
    ties = None
    if binary:
        # several annotators: majority vote; a tie (as many 1 as 0, e.g. 1 of 2) counts as the error being present
        ties = values == 0.5
        values = np.where(np.isnan(values), np.nan, (values >= 0.5).astype(float))
    return HumanScores(
        systems=[k[0] for k in keys],
        items=[k[1] for k in keys],
        aspects=cols,
        values=values,
        texts=[texts[i][0] if i in texts else "" for i in range(len(keys))],
        n_workers=np.array(n_rows),
        binary=binary,
        ties=ties,
        img_seqs=[img_seqs.get(i, "") for i in range(len(keys))] if has_img_seq else None,
    )


LIKERT_SCALE = (1.0, 5.0)


def read_likert(
    path: str | Path, *, aspects: Sequence[str] | None = None, scale: tuple[float, float] | None = LIKERT_SCALE
) -> HumanScores:
    """Likert table: ``system, item, worker`` + one numeric column per aspect (e.g. `VIST_ASPECTS`); averaged
    over workers per (system, item). An optional ``text`` column holds the story.

    Every rating must lie on ``scale`` (default 1-5, the studio's; ``None``: any finite number), and a
    (system, item, worker) may appear once: a rating outside the scale or a repeated row is refused. Without a
    ``worker`` column each (system, item) may have one row (ratings already averaged); two rows of one (system,
    item) whose texts differ are refused (they are two stories)."""
    return _read_judgements(path, aspects=aspects, binary=False, scale=scale)


def read_error_labels(path: str | Path, *, errors: Sequence[str] | None = None) -> HumanScores:
    """Binary error labels per story (``system, item`` + 0/1 columns such as `VRANK_ERRORS`); several
    annotators of one story (one row each, a ``worker`` column optional) are merged by majority vote, a tie (as
    many 1 as 0) counting as the error present (`HumanScores.ties` marks those). Two rows of one (system, item)
    whose texts differ are refused."""
    return _read_judgements(path, aspects=errors, binary=True)
