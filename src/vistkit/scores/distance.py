"""The dHM human-model distance (Surikuchi et al., "Not (yet) the whole story", EMNLP 2024 Findings, Sec. 3.2).

dHM compares model stories with the human stories of the same image sequences along three reference-free
dimensions (Sec. 3.1): visual grounding G (GROOViST), coherence C (RoViST-C with the prefix of all preceding
sentences as context: ``dhm-c``) and non-redundancy R (RoViST-NR). For every story id s scored in all six
tables (human and model x G, C, R), with tanh applied to the raw GROOViST score:

    d_X(s) = |X_human(s) - X_model(s)|            for X in {G, C, R}        (Eq. 1)
    dHM(s) = (d_G(s) + d_C(s) + d_R(s)) / 3                                   (Eq. 2)

and the reported values are the means over those stories: dG, dC, dR and dHM (= the mean of dG, dC, dR). Lower
is closer to humans; each lies in [0, 2] for G (tanh range), in [0, 1] for C, and in practice in [0, 1] for R
(the official R is at most 1 but not bounded below, see ``rovist-nr``).

This follows the official ``dHM.py`` (akskuchi/dHM-visual-storytelling) exactly: it reads GROOViST ``G`` as
``tanh(G)`` (GROOViST's own code writes the unbounded score and prints ``tanh`` as its [-1, 1] form; the paper,
Sec. 3.1, calls G "bound to range [-1, 1]", while its figures show the raw, unbounded scores), drops
``NaN`` and empty scores, keeps only the story ids present in all six tables, and averages per story. The
official script rounds to 4 decimals; we keep full precision and round only for display.

The core, `dhm_distance`, takes per-story score tables, so any source plugs in: the official score files
(`read_dhm_scores`), per-item CSVs written by ``vistkit score --per-item`` (`read_per_item_scores`), or scores
computed from stories (`table_from_scores` turns G, C, R `Score` objects into a table).
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.data.readers import shown_names
from vistkit.data.story import clean_id
from vistkit.errors import InputError

DIMENSIONS = ("G", "C", "R")

ScoreTable = Mapping[str, Mapping[str, float]]
"""Scores per dimension then per story id (``{"G": {sid: g}, "C": {...}, "R": {...}}``), or per story id
then per dimension (``{sid: {"G": g, "C": c, "R": r}}``), or a pandas DataFrame (index = story ids, columns
G, C, R)."""


@dataclass(frozen=True)
class DistanceResult:
    """dHM and its three components (means over ``n`` common stories) plus the per-story distances."""

    dG: float
    dC: float
    dR: float
    dHM: float
    n: int
    story_ids: list[str] = field(default_factory=list, repr=False)
    per_story: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    tanh_g: bool = True
    dropped: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """``{"dG", "dC", "dR", "dHM", "n"}`` at full precision."""
        return {"dG": self.dG, "dC": self.dC, "dR": self.dR, "dHM": self.dHM, "n": self.n}


def _is_missing(value: Any) -> bool:
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _as_float(value: Any, where: str) -> float:
    if isinstance(value, bool | np.bool_):  # True is 1 to float(), but no score is a yes/no
        raise InputError(f"{where}: {value!r} is not a number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {value!r:.60} is not a number") from None
    except OverflowError:
        raise InputError(f"{where}: the score is too large") from None
    if math.isinf(out):
        raise InputError(f"{where}: the score is infinite")
    return out


def normalize_table(table: Any, *, side: str = "scores") -> dict[str, dict[str, float]]:
    """``{dimension: {story_id: score}}`` with missing (``None``/``NaN``/empty) scores left out."""
    if hasattr(table, "to_dict") and hasattr(table, "columns"):  # a pandas DataFrame
        cols = [str(c) for c in table.columns]
        missing = [d for d in DIMENSIONS if d not in cols]
        if missing:
            raise InputError(
                f"{side}: the table needs columns G, C and R; it has {shown_names(cols)}"
            )
        index = [str(i) for i in table.index]
        _refuse_repeated_ids(index, side)
        table = {d: dict(zip(index, table[d].tolist(), strict=True)) for d in DIMENSIONS}
    if not isinstance(table, Mapping):
        raise InputError(f"{side}: expected a mapping of scores, found {type(table).__name__}")
    keys = set(map(str, table))
    if keys and keys <= set(DIMENSIONS) | {"g", "c", "r"}:
        _refuse_repeated_ids([str(k).upper() for k in table], side, what="dimension")
        by_dim = {str(k).upper(): v for k, v in table.items()}
    else:  # story-major: {sid: {"G": .., "C": .., "R": ..}}
        _refuse_repeated_ids([str(k) for k in table], side)
        by_dim = {d: {} for d in DIMENSIONS}
        for sid, row in table.items():
            if not isinstance(row, Mapping):
                raise InputError(
                    f"{side}: story {sid!r}: expected G, C and R scores, found {type(row).__name__}"
                )
            _refuse_repeated_ids(
                [str(k).upper() for k in row if str(k).upper() in DIMENSIONS], f"{side} story {sid!r}", what="dimension"
            )
            for k, v in row.items():
                if str(k).upper() in DIMENSIONS:
                    by_dim[str(k).upper()][str(sid)] = v
    out: dict[str, dict[str, float]] = {}
    for d in DIMENSIONS:
        col = by_dim.get(d)
        if col is None:
            raise InputError(f"{side}: no {d} scores (dHM needs G, C and R)")
        if not isinstance(col, Mapping):
            raise InputError(f"{side}: the {d} scores must map story ids to numbers")
        _refuse_repeated_ids([str(k) for k in col], f"{side} {d}")
        # ids as the story readers match them (spaces around dropped, Unicode NFC): " 1" in a G table and "1" in
        # a C table, or café typed two ways, silently matched nothing
        ids = {str(sid): clean_id(str(sid), "story_id", str(sid)) for sid in col}
        _refuse_repeated_ids(list(ids.values()), f"{side} {d} (once spaces are dropped and NFC applied)")
        out[d] = {
            ids[str(sid)]: _as_float(v, f"{side} {d} story {sid!r}")
            for sid, v in col.items()
            if not _is_missing(v)
        }
    return out


def _id_samples(tables: Mapping[str, Mapping[str, float]]) -> str:
    """`` (human G: 2 ids such as '1', '2'; model C: none; ...)``: what each table holds, to show how the ids
    differ (``45530`` against ``45530.0``, or a table left empty)."""
    parts = []
    for name, table in tables.items():
        shown = ", ".join(f"'{shown_names([i])}'" for i in sorted(table, key=_natural_key)[:2])
        many = f"{len(table)} ids such as {shown}"
        parts.append(f"{name}: " + ("none" if not table else f"1 id, {shown}" if len(table) == 1 else many))
    return f" ({'; '.join(parts)})"


def _refuse_repeated_ids(ids: Sequence[str], side: str, *, what: str = "story id") -> None:
    """Refuse a story id (or dimension) given twice, e.g. ``1`` and ``"1"`` or a DataFrame index entry twice."""
    if len(set(ids)) == len(ids):
        return
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise InputError(
                f"{side}: {what} {shown_names([i])!r} is given twice (e.g. as 1 and '1', or in either case), and "
                "only one of its scores could count; give each once"
            )
        seen.add(i)


def dimension_distances(
    human: Mapping[str, Mapping[str, float]],
    model: Mapping[str, Mapping[str, float]],
    order: Sequence[str],
    dimensions: Iterable[str],
    *,
    tanh_g: bool,
) -> dict[str, np.ndarray]:
    """Per dimension X, d_X(s) = |X_human(s) - X_model(s)| over the story ids in ``order`` (``tanh`` first on
    both sides of G when ``tanh_g``, as dHM does with raw GROOViST scores)."""
    out: dict[str, np.ndarray] = {}
    for dim in dimensions:
        h = np.array([human[dim][s] for s in order], dtype=float)
        m = np.array([model[dim][s] for s in order], dtype=float)
        if dim == "G" and tanh_g:
            h, m = np.tanh(h), np.tanh(m)
        with np.errstate(over="ignore"):  # said below, as one sentence, not as numpy's RuntimeWarning
            out[dim] = np.abs(h - m)
        if not np.all(np.isfinite(out[dim])):
            k = int(np.argmin(np.isfinite(out[dim])))
            raise InputError(
                f"story {order[k]!r}: its {dim} scores ({h[k]:g} human, {m[k]:g} model) are too far apart for a "
                "float64 difference; check the score tables (a distance of finite scores must be finite)"
            )
    return out


def finite_mean(values: np.ndarray, axis: int | None = None) -> Any:
    """``np.mean(values, axis)`` of finite values, never overflowing: when the plain sum runs past float64's range
    (two distances of 1e308, each finite), the mean is taken on the values scaled down by their largest
    magnitude, then scaled back."""
    with np.errstate(over="ignore"):
        out = np.mean(values, axis=axis)
    if np.all(np.isfinite(out)):
        return out
    scale = float(np.max(np.abs(values)))
    return np.mean(values / scale, axis=axis) * scale


def dhm_distance(human: Any, model: Any, *, tanh_g: bool = True) -> DistanceResult:
    """dHM between ``human`` and ``model`` per-story score tables (see `ScoreTable`).

    ``tanh_g``: apply tanh to G, as dHM does to raw GROOViST scores; pass False when G is already in [-1, 1].
    Only story ids with all six scores count; `DistanceResult.dropped` says how many each side lost.
    """
    if not isinstance(tanh_g, bool | np.bool_):
        raise InputError(f"tanh_g must be True or False, not {tanh_g!r:.60}")
    tanh_g = bool(tanh_g)
    h = normalize_table(human, side="human")
    m = normalize_table(model, side="model")
    tables = [h[d] for d in DIMENSIONS] + [m[d] for d in DIMENSIONS]
    everything: set[str] = set().union(*tables)
    common = set(tables[0]).intersection(*tables[1:])
    if not common:
        raise InputError(
            "no story id has all six scores (human and model G, C, R)"
            + _id_samples(dict(zip([f"{s} {d}" for s in ("human", "model") for d in DIMENSIONS], tables, strict=True)))
            + "; check that both sides use the same story ids"
        )
    order = sorted(common, key=_natural_key)
    per_story = dimension_distances(h, m, order, DIMENSIONS, tanh_g=tanh_g)
    per_story["HM"] = finite_mean(np.stack([per_story[d] for d in DIMENSIONS]), axis=0)
    dropped = {
        "human": len(set().union(*tables[:3]) - common),
        "model": len(set().union(*tables[3:]) - common),
        "any": len(everything - common),
    }
    return DistanceResult(
        dG=float(finite_mean(per_story["G"])),
        dC=float(finite_mean(per_story["C"])),
        dR=float(finite_mean(per_story["R"])),
        dHM=float(finite_mean(per_story["HM"])),
        n=len(order),
        story_ids=order,
        per_story=per_story,
        tanh_g=tanh_g,
        dropped=dropped,
    )


def table_from_scores(scores: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """A score table from vistkit `Score` objects, ``{"G": Score, "C": Score, "R": Score}`` (e.g. groovist,
    rovist-c and rovist-nr run on one side's stories); undefined (NaN) items are left out."""
    from vistkit.metrics.base import Score

    if not isinstance(scores, Mapping):
        raise InputError(f"table_from_scores takes {{'G': Score, 'C': Score, 'R': Score}}, not {type(scores).__name__}")
    missing = [d for d in DIMENSIONS if d not in scores]
    if missing:
        raise InputError(f"no {', '.join(missing)} scores (dHM needs G, C and R)")
    bad = next((d for d in DIMENSIONS if not isinstance(scores[d], Score)), None)
    if bad is not None:
        raise InputError(
            f"the {bad} scores must be a vistkit Score (what vistkit.score(...) returns), not "
            f"{type(scores[bad]).__name__}; a table {{dimension: {{story_id: number}}}} goes to dhm_distance directly"
        )
    table: dict[str, dict[str, float]] = {}
    for d in DIMENSIONS:
        pairs = zip(scores[d].item_ids, scores[d].item_scores, strict=True)
        table[d] = {str(i): float(v) for i, v in pairs if not math.isnan(float(v))}
    return table


def _natural_key(sid: str) -> tuple[int, int, str]:
    """Ids of decimal digits first, in numeric order (as ``int(sid)``), then the others as text. Compared by
    length and digits, not converted: ``int`` refused an id of more than 4,300 digits, and ``str.isdigit`` let
    through ``²``, which ``int`` cannot read (both stopped the command with an unexpected ValueError)."""
    if not sid.isdecimal():
        return (1, 0, sid)
    digits = "".join(str(unicodedata.decimal(c)) for c in sid).lstrip("0")
    return (0, len(digits), digits)


# --------------------------------------------------------------------------------------------------- readers
class _Ids:
    """The line of every story id of one score table, refusing an id given twice (a dict would keep the last)."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.lines: dict[str, int] = {}

    def add(self, sid: str, line: int) -> None:
        first = self.lines.setdefault(sid, line)
        if first != line:
            raise InputError(
                f"{self.path}: story id {shown_names([sid])!r} is given twice (lines {first} and {line}), and "
                "only one score per story can count; remove one of the rows"
            )


#: the value column of dHM's ``<prefix>_C.csv`` / ``_R.csv`` by name (the official files: ``C_score``, ``R_score``)
SCORE_COLUMNS: dict[str, tuple[str, ...]] = {d: (f"{d}_score", d, "score") for d in DIMENSIONS}


def score_csv_columns(header: Sequence[str], dim: str, path: Path | str) -> tuple[str, str]:
    """The story id and score columns of a dHM ``<prefix>_C.csv`` / ``_R.csv`` (``dim`` C or R): ``story_id``
    (else the first column) and the one other column, or, when there are more, the one named ``<dim>_score``,
    ``<dim>`` or ``score``; a table whose score column cannot be told, or is named for another dimension, is
    refused."""
    cols = list(header)
    if len(cols) < 2:
        raise InputError(f"{path} line 1: expected the header story_id,{dim}_score (two columns)")
    numbers = [c for c in cols[1:] if _is_number(c)]
    if numbers:  # a table without its header row: its first story would be read as the header and lost
        raise InputError(
            f"{path} line 1: {shown_names(cols)} is a row of data, not a header ({numbers[0]!r} is a "
            f"number); add the header story_id,{dim}_score as the first line"
        )
    id_col = "story_id" if "story_id" in cols else cols[0]
    rest = [c for c in cols if c != id_col]
    named = [c for c in rest if c.lower() in {n.lower() for n in SCORE_COLUMNS[dim]}]
    if len(rest) == 1:
        other = [d for d in DIMENSIONS if d != dim and rest[0].lower() in {n.lower() for n in SCORE_COLUMNS[d]}]
        if other and not named:
            raise InputError(
                f"{path}: its score column {shown_names(rest)!r} holds {other[0]} scores, but this file should "
                f"hold {dim} scores (header story_id,{dim}_score); check which file is which"
            )
        return id_col, rest[0]
    if len(named) != 1:
        raise InputError(
            f"{path}: cannot tell which column holds the {dim} scores (columns {shown_names(cols)}); keep only "
            f"story_id and {dim}_score, as dHM's files have"
        )
    return id_col, named[0]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_score_csv(path: str | Path, dim: str = "C") -> dict[str, float]:
    """dHM's ``<prefix>_C.csv`` / ``_R.csv`` (``dim`` C or R): a header row, then ``story_id,score`` (the
    score column picked by name when there are more, see `score_csv_columns`; ids stripped, NaN dropped, an id
    given twice refused naming both lines)."""
    from vistkit.data.readers import open_csv

    out: dict[str, float] = {}
    ids = _Ids(path)
    with open_csv(path, delimiter=",") as f:
        if not f.fieldnames:
            raise InputError(f"{path}: empty file (expected a header row, then story_id,{dim}_score rows)")
        id_col, score_col = score_csv_columns(f.fieldnames, dim, path)
        for n, row in f:
            sid, value = row[id_col].strip(), row[score_col]
            if not sid and not value.strip():
                continue
            sid = _story_id(sid, f"{path} line {n}")
            ids.add(sid, n)
            if _is_missing(value):
                continue
            out[sid] = _as_float(value.strip(), f"{path} line {n}")
    return out


def _read_score_json(path: str | Path) -> dict[str, float]:
    """dHM's ``<prefix>_G.json``: ``{story_id: score}`` (empty and NaN scores dropped)."""
    from vistkit.data.readers import load_json

    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object {{story_id: score}}")
    ids = {str(k): _story_id(str(k), str(path)) for k in data}
    _refuse_repeated_ids(list(ids.values()), f"{path} (once spaces are dropped and NFC applied)")
    return {ids[str(k)]: _as_float(v, f"{path}: story {k!r}") for k, v in data.items() if not _is_missing(v)}


def _story_id(sid: str, where: str) -> str:
    """``sid`` as the story readers match ids (`clean_id`: edge spaces dropped, NFC), an id holding an invisible
    character refused naming ``where`` (the file and line)."""
    try:
        out = clean_id(sid, "story_id", sid)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    if not out:
        raise InputError(f"{where}: a score with an empty story id; give each score its story's id, or remove it")
    return out


def dhm_score_paths(prefix: str | Path) -> dict[str, Path]:
    """The three files of a dHM score prefix: ``<prefix>_G.json``, ``<prefix>_C.csv``, ``<prefix>_R.csv``."""
    p = Path(prefix)
    return {
        "G": p.with_name(p.name + "_G.json"),
        "C": p.with_name(p.name + "_C.csv"),
        "R": p.with_name(p.name + "_R.csv"),
    }


#: how each file of a dHM score prefix may be stored, as every vistkit reader opens it: plain, gzip'd or zipped
#: alone (``gt_test_G.json.gz``, ``gt_test_C.csv.zip``; the suffix in either letter case)
PACKINGS = ("", ".gz", ".zip", ".GZ", ".ZIP")
#: the ends of a dHM score prefix's files (``DIR/gt_test_G.json.gz`` is a file of ``DIR/gt_test``)
_PREFIX_ENDS = tuple(f"_{f}{ext}" for f in ("g.json", "c.csv", "r.csv") for ext in ("", ".gz", ".zip"))


def _prefix_of_file(path: str) -> str | None:
    """The dHM score prefix whose file ``path`` is (``DIR/gt_test_G.json.gz`` -> ``DIR/gt_test``), else None.
    String ends, not a regular expression: a backtracking ``(.+)_...`` took quadratic time on a long name."""
    low = path.lower()
    for end in _PREFIX_ENDS:
        if low.endswith(end) and len(path) > len(end):
            return path[: -len(end)]
    return None
_MEMBER_LEAD = re.compile(r"^(?:\.?/)+")


def dhm_score_candidates(prefix: str | Path) -> dict[str, list[str]]:
    """Where each file of a dHM score prefix may be: ``<prefix>_G.json`` plain, ``.gz`` or ``.zip`` beside it,
    or, for ``ARCHIVE.zip:PREFIX``, the member ``PREFIX_G.json`` of that archive (as ``ARCHIVE.zip:MEMBER``)."""
    from vistkit.data.readers import split_member

    archive, member = split_member(prefix)
    if member is None:
        return {d: [f"{p}{ext}" for ext in PACKINGS] for d, p in dhm_score_paths(archive).items()}
    return {d: [f"{archive}:{p}{ext}" for ext in PACKINGS] for d, p in dhm_score_paths(member).items()}


def _zip_names(archive: Path) -> dict[str, str] | None:
    """An archive's member names by the name they unpack to (a leading ``./`` dropped), None when it cannot be
    listed (its reader then says why)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, EOFError):
        return None
    out: dict[str, str] = {}
    for n in names:
        out.setdefault(_MEMBER_LEAD.sub("", n), n)
    return out


class _MissingScores(InputError):
    """A dHM score prefix none of whose candidates exist for some dimension (`resolve_dhm_files`)."""


def resolve_dhm_files(prefix: str | Path) -> dict[str, str]:
    """The file each of G, C, R of a dHM score prefix is read from (`dhm_score_candidates`: plain, ``.gz``,
    ``.zip``, or members of ``ARCHIVE.zip:PREFIX``); a dimension with none is refused naming what was looked for,
    one with two (``gt_test_G.json`` and ``gt_test_G.json.gz``) is refused too: which is current cannot be told."""
    from vistkit.data.readers import split_member

    archive, member = split_member(prefix)
    candidates = dhm_score_candidates(prefix)
    names: dict[str, str] | None = {}
    if member is not None:
        if not archive.is_file():
            from vistkit.data.readers import missing_input

            raise missing_input(archive, "zip archive of dHM score files")
        names = _zip_names(archive)
    found: dict[str, str] = {}
    absent: list[str] = []
    for dim, paths in candidates.items():
        if member is None:
            there = _distinct_files([c for c in paths if Path(c).exists()])
        elif names is None:  # not a readable zip: its reader says why
            there = paths[:1]
        else:  # the members, as named in the archive
            keys = [_MEMBER_LEAD.sub("", c[len(str(archive)) + 1 :]) for c in paths]
            there = list(dict.fromkeys(f"{archive}:{names[k]}" for k in keys if k in names))
        if len(there) > 1:
            files = ", ".join(Path(t).name if member is None else t[len(str(archive)) + 1 :] for t in there)
            raise InputError(
                f"{prefix}: its {dim} scores are in {len(there)} files ({files}), and vistkit cannot tell which one "
                "is current; remove (or rename) all but one"
            )
        if there:
            found[dim] = there[0]
        else:
            absent.append(paths[0] if member is None else paths[0][len(str(archive)) + 1 :])
    if absent:
        where = f"{archive} has no member" if member is not None else "missing"
        raise _MissingScores(
            f"{prefix}: {where} {', '.join(absent)} (nor the same name with .gz or .zip); a dHM score prefix "
            "needs <prefix>_G.json, <prefix>_C.csv and <prefix>_R.csv, each plain, .gz or .zip, beside each other "
            "or in one ARCHIVE.zip given as ARCHIVE.zip:PREFIX (or give a per-item CSV from `vistkit score "
            "--per-item`)"
        )
    return found


def _distinct_files(paths: list[str]) -> list[str]:
    """``paths`` without a second name of one file (``x.gz`` and ``x.GZ`` on a case-insensitive disk)."""
    out: list[str] = []
    for p in paths:
        if not any(_same_file(p, q) for q in out):
            out.append(p)
    return out


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _one_file(a: str, b: str) -> bool:
    """Whether two score files (or ``ARCHIVE.zip:MEMBER`` names) are one file, whatever names lead to it."""
    from vistkit.data.readers import split_member

    (archive_a, member_a), (archive_b, member_b) = split_member(a), split_member(b)
    return member_a == member_b and _same_file(str(archive_a), str(archive_b))


def same_score_source(human: str | Path, model: str | Path) -> bool:
    """Whether two score sources (`read_scores`) are one per-item CSV or one dHM prefix's files, however named
    (``x.csv`` and ``./x.csv``, a link to it). False when either cannot be read (its reader says why)."""
    try:
        files = []
        for p in (human, model):
            if is_per_item_csv(p):
                files.append([str(p)])
            else:
                found = resolve_dhm_files(p)
                files.append([found[d] for d in DIMENSIONS])
        return len(files[0]) == len(files[1]) and all(map(_one_file, files[0], files[1]))
    except (OSError, ValueError, KeyError, InputError):
        return False


def score_files(path: str | Path) -> list[str]:
    """The files a score source (``--human`` / ``--model``) may read: a per-item CSV itself, or every place a file
    of a dHM score prefix may be (`dhm_score_candidates`); a command counts each that exists as an input it must
    never write over."""
    p = Path(path)
    if is_per_item_csv(p) or p.is_dir():
        return [str(p)]
    return [str(p), *(c for paths in dhm_score_candidates(p).values() for c in paths)]


def read_dhm_scores(prefix: str | Path) -> dict[str, dict[str, float]]:
    """Scores from dHM's files: ``<prefix>_G.json`` (raw GROOViST), ``<prefix>_C.csv``, ``<prefix>_R.csv``, each
    plain, ``.gz`` or ``.zip``, or all in one archive as ``ARCHIVE.zip:PREFIX`` (`resolve_dhm_files`)."""
    # only what is not there is "missing": a folder, a FIFO or a device there is refused by its reader, by name
    paths = resolve_dhm_files(prefix)
    return {
        "G": _read_score_json(paths["G"]),
        "C": _read_score_csv(paths["C"], "C"),
        "R": _read_score_csv(paths["R"], "R"),
    }


DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "G": ("groovist", "G", "G_score"),
    "C": ("dhm-c", "rovist-c", "coherence", "C", "C_score"),  # dhm-c first: the metric --human-stories uses
    "R": ("rovist-nr", "non-redundancy", "R", "R_score"),
}


def read_per_item_scores(
    path: str | Path, *, columns: Mapping[str, str | None] | None = None
) -> dict[str, dict[str, float]]:
    """Scores from a per-item CSV (``id,<metric>,...``, as ``vistkit score --per-item`` writes).

    ``columns`` maps G, C and R to column names; a dimension left out (or ``None``) takes the first column
    found among `DEFAULT_COLUMNS`. Empty cells are missing scores.
    """
    from vistkit.data.readers import open_csv

    p = Path(path)
    out: dict[str, dict[str, float]] = {d: {} for d in DIMENSIONS}
    ids = _Ids(p)
    with open_csv(p, delimiter=",") as f:
        header = f.fieldnames
        if not header:
            raise InputError(f"{p}: empty CSV (expected a header row id,<metric>,...)")
        id_col = header[0]
        if len(header) == 1:
            raise InputError(
                f"{p} line 1: the header is one column ({shown_names(header)!r}); a per-item CSV is comma-separated, "
                "id then one column per metric, as `vistkit score --per-item` writes it: save it with commas"
            )
        chosen = resolve_columns(header[1:], columns or {}, where=str(p))
        for n, row in f:
            sid = row[id_col].strip()
            if not sid:
                raise InputError(f"{p} line {n}: empty {id_col!r}")
            sid = _story_id(sid, f"{p} line {n}")
            ids.add(sid, n)
            for d, col in chosen.items():
                value = row[col]
                if not _is_missing(value):
                    out[d][sid] = _as_float(value, f"{p} line {n} column {col!r}")
    return out


def resolve_columns(header: Iterable[str], wanted: Mapping[str, str | None], *, where: str) -> dict[str, str]:
    """Which column holds G, C and R: the given names, else the first default found."""
    cols = list(header)
    out: dict[str, str] = {}
    for d in DIMENSIONS:
        name = wanted.get(d)
        if name is not None:
            if name not in cols:
                raise InputError(f"{where}: no column {name!r} for {d}; the columns are {shown_names(cols)}")
            out[d] = name
            continue
        found = next((c for c in DEFAULT_COLUMNS[d] if c in cols), None)
        if found is None:
            raise InputError(
                f"{where}: no {d} column (looked for {', '.join(DEFAULT_COLUMNS[d])}); the columns are "
                f"{shown_names(cols)}: name it with --{d.lower()}-metric"
            )
        out[d] = found
    return out


def is_per_item_csv(path: str | Path) -> bool:
    """Whether ``path`` is a per-item CSV file (``.csv``, also inside ``.gz`` / ``.zip``)."""
    from vistkit.data.readers import split_member

    archive, member = split_member(path)
    name = (member or archive.name).lower()
    return archive.is_file() and any(name.endswith(ext) for ext in (".csv", ".csv.gz", ".csv.zip"))


def per_item_header(path: str | Path) -> list[str]:
    """The column names of a per-item CSV (``[]`` for an empty file), as `read_per_item_scores` reads them."""
    from vistkit.data.readers import open_csv

    with open_csv(path, delimiter=",") as f:
        return f.fieldnames


def per_item_signatures(path: str | Path, *, columns: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The signature of each dimension's column of a per-item CSV, from its ``<column> signature`` column (written
    by ``vistkit score --per-item``); a dimension whose column has none is left out. A column holding rows of two
    runs (two signatures) is refused: its numbers are not one metric's."""
    from vistkit.data.readers import open_csv

    p = Path(path)
    with open_csv(p, delimiter=",") as f:
        header = f.fieldnames
        if not header:
            return {}
        chosen = resolve_columns(header[1:], columns or {}, where=str(p))
        wanted = {d: f"{col} signature" for d, col in chosen.items() if f"{col} signature" in header}
        found: dict[str, dict[str, int]] = {d: {} for d in wanted}
        for n, row in f:
            for d, col in wanted.items():
                value = (row[col] or "").strip()
                if value:
                    found[d].setdefault(value, n)
    out: dict[str, str] = {}
    for d, values in found.items():
        if len(values) > 1:
            (a, la), (b, lb) = list(values.items())[:2]
            raise InputError(
                f"{p}: column {wanted[d]!r} holds more than one signature ({a!r} on line {la}, {b!r} on line "
                f"{lb}): the file joins runs of different metrics or options; keep one run's rows"
            )
        if values:
            out[d] = next(iter(values))
    return out


def read_scores(
    path: str | Path, *, columns: Mapping[str, str | None] | None = None
) -> dict[str, dict[str, float]]:
    """A per-item CSV (a ``.csv`` file, also ``.csv.gz``/``.csv.zip``), or a dHM score prefix (``DIR/gt_test``
    names ``DIR/gt_test_G.json``, ``_C.csv`` and ``_R.csv``, each plain, ``.gz`` or ``.zip``;
    ``ARCHIVE.zip:gt_test`` the three inside one archive). A file that is neither is refused saying so."""
    from vistkit.data.readers import unnamed_pipe

    p = Path(path)
    if str(path) == "-" or unnamed_pipe(p):
        raise InputError(
            f"{path}: score tables are read from files, not from standard input or a pipe (a dHM prefix names "
            "three files); save the per-item CSV to a file and give its name"
        )
    if is_per_item_csv(p):
        if _prefix_of_file(str(p)) is not None and not _has_score_columns(p, columns or {}):
            raise _not_a_score_source(p)  # DIR/gt_test_C.csv given for the prefix DIR/gt_test
        return read_per_item_scores(p, columns=columns)
    if p.is_dir():
        raise InputError(f"{p} is a folder; give a score prefix such as {p / 'gt_test'} or a per-item CSV")
    try:
        return read_dhm_scores(p)
    except _MissingScores:
        from vistkit.data.readers import is_input_file, split_member

        archive, member = split_member(p)
        if not (is_input_file(p) if member is None else member in (_zip_names(archive) or {})):
            raise
        raise _not_a_score_source(p) from None


def _has_score_columns(path: Path, columns: Mapping[str, str | None]) -> bool:
    """Whether a CSV has the G, C and R columns of a per-item CSV (`resolve_columns`)."""
    try:
        resolve_columns(per_item_header(path)[1:], columns, where=str(path))
    except InputError:
        return False
    return True


def _not_a_score_source(p: Path) -> InputError:
    """The error for a file given as ``--human``/``--model`` that is neither a per-item CSV nor a dHM prefix
    (read as a prefix, it said "missing FILE_G.json, ...")."""
    from vistkit.data.readers import is_zip_name

    prefix = _prefix_of_file(str(p))
    if prefix is not None:
        name = prefix.rpartition(":")[2].replace("\\", "/").rpartition("/")[2]
        return InputError(
            f"{p} is one of the three files of the dHM score prefix {prefix}; give the prefix itself ({prefix}: "
            f"{name}_G.json, {name}_C.csv and {name}_R.csv, each plain, .gz or .zip)"
        )
    inside = (
        "; for a file inside the archive give ARCHIVE.zip:FILE.csv, for dHM files in it ARCHIVE.zip:PREFIX"
        if is_zip_name(p)
        else ""
    )
    return InputError(
        f"{p} is neither a per-item CSV (a comma-separated .csv, also .csv.gz or .csv.zip, as `vistkit score "
        "--per-item` writes) nor a dHM score prefix (DIR/NAME for NAME_G.json, NAME_C.csv and NAME_R.csv); give "
        f"one of those{inside}"
    )


def per_story_rows(result: DistanceResult) -> list[list[Any]]:
    """Rows ``story_id, dG, dC, dR, dHM`` (full precision)."""
    return [
        [sid, *(float(result.per_story[d][i]) for d in ("G", "C", "R", "HM"))]
        for i, sid in enumerate(result.story_ids)
    ]
