"""Story-pair assessments (Hsu et al. 2022, "Learning to Rank Visual Stories from Human Ranking Data", Vrank).

- `pair_correct` / `pair_accuracy`: Eq. 1-2 (Sec. 5.1), a pair is correct only when the metric orders it strictly like
  people (a metric tie is wrong, which is why BLEU-4, often 0 for both stories, scores so low); per agreement
  subset Omega_3, Omega_4, Omega_5, Omega_{4,5} (Sec. 3.2, Table 2; the paper reports Omega_4, Omega_5 and
  Omega_{4,5} in Table 4, left); and per pair kind (reference-machine vs machine-machine, Table 4, right).
- `accuracy_by_gap`: accuracy per ranking-gap bucket (Sec. 5.2, Fig. 3).
- `beats_reference`: the share of a system's stories ranked above the human reference (appendix, Fig. 4).

A ranker (a pairwise metric) is compared through its preference per pair (`PairScores.difference`).
Pairs whose human gap is zero, or where the metric left a story undefined (NaN), count in no denominator; the
``n`` of every result says how many pairs did count.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from vistkit.errors import InputError
from vistkit.meta.human import StoryPair, is_reference_system
from vistkit.meta.resample import advance, check_resampling, index_blocks, percentile_interval
from vistkit.meta.scoring import PairScores

SUBSETS = ("all", "omega_3", "omega_4", "omega_5", "omega_4_5")
KINDS = ("reference-machine", "machine-machine")
DEFAULT_GAP_EDGES = (0.0, 0.2, 0.4, 0.6, 1.0)


def human_preference(pairs: Sequence[StoryPair]) -> np.ndarray:
    """+1 / -1 / 0 per pair (story 1 better / story 2 better / tie)."""
    return np.array([p.preference for p in pairs], dtype=float)


def pair_correct(scores: PairScores, pairs: Sequence[StoryPair]) -> np.ndarray:
    """Vrank Eq. 1: 1.0 when sign(metric(s1) - metric(s2)) equals the human preference, else 0.0 (metric ties
    are wrong); NaN for pairs that do not count (zero human gap, or a story the metric left undefined)."""
    if len(scores.score_1) != len(pairs):
        raise ValueError("scores and pairs differ in length")
    diff = scores.difference()
    pref = human_preference(pairs)
    out = (np.sign(diff) == pref).astype(float)
    out[(pref == 0) | np.isnan(diff)] = math.nan
    return out


def subset_masks(pairs: Sequence[StoryPair]) -> dict[str, np.ndarray]:
    """Boolean masks of the agreement subsets (Omega_a: pairs on which a of the rankers agree)."""
    agree = np.array([p.agreement if p.agreement is not None else -1 for p in pairs])
    return {
        "all": np.ones(len(pairs), dtype=bool),
        "omega_3": agree == 3,
        "omega_4": agree == 4,
        "omega_5": agree == 5,
        "omega_4_5": (agree == 4) | (agree == 5),
    }


def _acc(correct: np.ndarray, mask: np.ndarray) -> dict[str, Any]:
    sel = correct[mask]
    sel = sel[~np.isnan(sel)]
    return {
        "accuracy": float(sel.mean()) if sel.size else math.nan,
        "n": int(sel.size),
        "correct": int(sel.sum()),
    }


def pair_accuracy(scores: PairScores, pairs: Sequence[StoryPair]) -> dict[str, dict[str, Any]]:
    """Vrank Eq. 2: accuracy per agreement subset: ``{subset: {"accuracy", "n", "correct"}}``."""
    correct = pair_correct(scores, pairs)
    return {name: _acc(correct, mask) for name, mask in subset_masks(pairs).items()}


def accuracy_by_kind(scores: PairScores, pairs: Sequence[StoryPair]) -> dict[str, dict[str, Any]]:
    """Accuracy on reference-machine pairs and on machine-machine pairs (Vrank Table 4, right: R&M, M&M)."""
    correct = pair_correct(scores, pairs)
    kinds = np.array([p.kind for p in pairs])
    return {k: _acc(correct, kinds == k) for k in KINDS}


def gap_values(pairs: Sequence[StoryPair], *, normalised: bool = True) -> np.ndarray:
    """|gap| per pair: divided by N (VHED's ``rank_norm``) when ``normalised`` and N is known, else raw."""
    if normalised:
        return np.array([p.rank_norm for p in pairs], dtype=float)
    return np.array([abs(p.gap) for p in pairs], dtype=float)


GAP_TOLERANCE = 1e-9
"""Gaps closer than this (relative to max(1, |gap|)) are the same gap: 0.6 and 0.6000000000000001 are one value,
and a gap that close to a bucket edge lies on it."""


def _close(a: np.ndarray | float, b: float) -> np.ndarray:
    return np.abs(np.asarray(a, dtype=float) - b) <= GAP_TOLERANCE * max(1.0, abs(b))


def parse_edges(text: str | Sequence[float]) -> tuple[float, ...] | None:
    """``"0,0.2,0.4"`` -> (0.0, 0.2, 0.4); must be at least two increasing finite numbers, none negative (a gap
    is an absolute rank difference; NaN and infinity are refused: a NaN edge made empty buckets), and at most
    `vistkit.limits.MAX_GAP_BUCKETS` + 1 (the report's figure and tables took minutes and gigabytes for 10,000
    buckets). ``"auto"`` ->
    None: the buckets are chosen from the data (`auto_gap_edges`)."""
    from vistkit.limits import MAX_GAP_BUCKETS

    if isinstance(text, str) and text.strip().lower() == "auto":
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    if len(items) > MAX_GAP_BUCKETS + 1:  # said before anything is read or scored
        raise InputError(
            f"--gap-edges gives {len(items) - 1:,} buckets, more than the {MAX_GAP_BUCKETS} a gap table or figure "
            f"can show readably; give at most {MAX_GAP_BUCKETS + 1} edges (or auto)"
        )
    try:
        edges = tuple(float(x) for x in items)
    except ValueError:
        raise InputError(f"--gap-edges must be comma-separated numbers, got {text!r}") from None
    bad = next((e for e in edges if not math.isfinite(e)), None)
    if bad is not None:
        raise InputError(f"--gap-edges must be finite numbers (a gap is 0 or more), got {bad:g} in {text!r}")
    negative = next((e for e in edges if e < 0), None)
    if negative is not None:
        raise InputError(
            f"--gap-edges must be 0 or more (a ranking gap is the absolute difference of two ranks), got "
            f"{negative:g} in {text!r}"
        )
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise InputError(f"--gap-edges must be at least two increasing numbers, got {text!r}")
    return edges


def _counted_gaps(pairs: Sequence[StoryPair], *, normalised: bool) -> np.ndarray:
    """The gaps of the pairs with a human preference (the pairs that can count), NaN left out."""
    gaps = gap_values([p for p in pairs if p.gap != 0], normalised=normalised)
    return gaps[~np.isnan(gaps)]


def _groups(values: np.ndarray) -> list[tuple[float, float]]:
    """(lowest, highest) of each run of sorted ``values`` that differ by float noise only (`GAP_TOLERANCE`)."""
    out: list[tuple[float, float]] = []
    for v in np.sort(values):
        if out and _close(v, out[-1][1]):
            out[-1] = (out[-1][0], float(v))
        else:
            out.append((float(v), float(v)))
    return out


def _tidy(edge: float, low: float, high: float) -> float:
    """``edge`` without float noise (0.3, not 0.30000000000000004) when rounding to 6 decimals moves it by noise
    only and keeps it strictly between ``low`` and ``high``; else exactly as it is (a rounded quartile such as
    0.133333 for 2/15 would move the pairs whose gap is 2/15 into the next bucket)."""
    rounded = float(round(edge, 6))
    return rounded if bool(_close(rounded, edge)) and low < rounded < high else edge


def auto_gap_edges(pairs: Sequence[StoryPair], *, normalised: bool = True) -> tuple[float, ...] | None:
    """Bucket edges chosen from the gaps of the pairs that count (human gap != 0), for `accuracy_by_gap`.

    At most five distinct gaps (VHED's k/5, raw rank gaps; gaps differing by float noise are one): one bucket
    per value (edges at the midpoints); more: the quartiles of the gaps (duplicates merged). The first and last
    edges are the exact lowest and highest gap, so every pair that counts lies in a bucket. None when the gap
    takes fewer than two distinct values (e.g. proxy pairs, whose gap is always 1): then there is nothing to
    bucket.
    """
    gaps = _counted_gaps(pairs, normalised=normalised)
    groups = _groups(gaps)
    if len(groups) < 2:
        return None
    if len(groups) <= 5:
        mids = [_tidy((a[1] + b[0]) / 2.0, a[1], b[0]) for a, b in itertools.pairwise(groups)]
        return (groups[0][0], *mids, groups[-1][1])
    low, high = float(gaps.min()), float(gaps.max())
    edges = [low]
    for q in np.quantile(gaps, [0.25, 0.5, 0.75]):
        e = _tidy(float(q), low, high)
        if not _close(e, edges[-1]) and not _close(e, high) and e > edges[-1]:
            edges.append(e)
    return (*edges, high)


def _snapped(gaps: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """``gaps`` with every value within float noise of an edge set to that edge (see `GAP_TOLERANCE`)."""
    out = np.array(gaps, dtype=float)
    for e in edges:
        out[_close(out, float(e))] = float(e)
    return out


def gaps_outside(pairs: Sequence[StoryPair], edges: Sequence[float], *, normalised: bool = True) -> int:
    """How many pairs with a human preference have a gap outside every bucket of ``edges`` (below the first
    edge or above the last): `accuracy_by_gap` counts them nowhere."""
    gaps = _snapped(_counted_gaps(pairs, normalised=normalised), edges)
    return int(((gaps < edges[0]) | (gaps > edges[-1])).sum())


#: how a share's interval is computed when every counted value is the same (`accuracy_interval`, `preference_share`)
EXACT_INTERVAL = (
    "every counted {what} is {side}, so every bootstrap resample is too and the percentile interval was the point "
    "[{value:g}, {value:g}] whatever their number; the interval is the exact binomial (Clopper-Pearson) one"
)


def exact_share_interval(successes: int, n: int, confidence: float) -> tuple[float, float]:
    """The exact binomial (Clopper-Pearson) interval of ``successes`` out of ``n`` (n >= 1) at ``confidence``."""
    from scipy import stats

    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))


def all_alike(values: np.ndarray) -> bool:
    """Whether the counted (non-NaN) 0/1 ``values`` are all 1 or all 0 (at least one counted): a bootstrap of
    their share cannot vary."""
    sel = np.asarray(values, dtype=float)
    sel = sel[~np.isnan(sel)]
    return bool(sel.size) and bool(np.all(sel == sel[0]))


def accuracy_interval(
    correct: np.ndarray, *, confidence: float = 0.95, n_resamples: int = 1000, seed: int | None = 12345
) -> tuple[float, float]:
    """Percentile-bootstrap interval of a pair accuracy (pairs resampled with replacement; NaN pairs, which do
    not count, left out first). (nan, nan) when no pair counts. When every counted pair is right (or every one
    wrong) each resample is too, and the percentile "interval" was [1, 1] even for one pair: the exact binomial
    (Clopper-Pearson) interval is returned instead (`all_alike` tells the caller, `EXACT_INTERVAL` says why).

    The resamples are drawn in blocks (`vistkit.meta.resample.index_blocks`): memory is bounded whatever
    ``n_resamples`` and the number of pairs, and the numbers are those of one ``rng.integers(0, n, (B, n))``.
    """
    check_resampling(n_resamples=n_resamples, confidence=confidence, seed=seed)
    sel = np.asarray(correct, dtype=float)
    sel = sel[~np.isnan(sel)]
    if sel.size == 0 or all_alike(sel):
        advance(n_resamples)
        if sel.size == 0:
            return (math.nan, math.nan)
        return exact_share_interval(int(sel.sum()), int(sel.size), confidence)
    rng = np.random.default_rng(seed)
    dist = np.concatenate([sel[idx].mean(axis=1) for idx in index_blocks(rng, sel.size, n_resamples)])
    low, high = percentile_interval(dist, confidence)
    return (low, high)


def accuracy_by_gap(
    scores: PairScores,
    pairs: Sequence[StoryPair],
    *,
    edges: Sequence[float] = DEFAULT_GAP_EDGES,
    normalised: bool = True,
) -> list[dict[str, Any]]:
    """Accuracy per ranking-gap bucket (Vrank Fig. 3). Buckets are ``(lo, hi]`` except the first, ``[lo,
    hi]``; a gap within float noise of an edge counts as on it. Gaps outside all buckets are reported in no
    bucket (`gaps_outside` counts them)."""
    correct = pair_correct(scores, pairs)
    gaps = _snapped(gap_values(pairs, normalised=normalised), edges)
    out = []
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        mask = (gaps <= hi) & ((gaps >= lo) if i == 0 else (gaps > lo))
        out.append({"low": float(lo), "high": float(hi), **_acc(correct, mask)})
    return out


def beats_reference(scores: PairScores | None, pairs: Sequence[StoryPair]) -> dict[str, dict[str, Any]]:
    """Machine-beats-reference ratio per system (Vrank Fig. 4).

    Over the reference-machine pairs of each system: the share in which the machine story is ranked strictly
    above the reference, by the metric (``scores``) or, with ``scores=None``, by people. ``ties`` is the share
    of equal scores (not counted as beating). Pairs with an undefined score are left out.
    """
    out: dict[str, dict[str, Any]] = {}
    diff = scores.difference() if scores is not None else None
    for i, p in enumerate(pairs):
        r1, r2 = is_reference_system(p.system_1), is_reference_system(p.system_2)
        if r1 == r2:
            continue
        system = p.system_2 if r1 else p.system_1
        if scores is None:
            d = p.gap if r2 else -p.gap  # > 0: machine preferred
        else:
            assert diff is not None
            d = diff[i] if r2 else -diff[i]
            if math.isnan(d):
                continue
        acc = out.setdefault(system, {"wins": 0, "ties": 0, "n": 0})
        acc["n"] += 1
        acc["wins"] += int(d > 0)
        acc["ties"] += int(d == 0)
    for acc in out.values():
        acc["ratio"] = acc["wins"] / acc["n"]
        acc["tie_ratio"] = acc["ties"] / acc["n"]
    return dict(sorted(out.items()))


def accuracy_table(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the pair-accuracy table (per subset and pair kind) of a ``pairs_assessment`` dict."""
    columns = ["metric", *SUBSETS, "ref-machine", "machine-machine", "n"]
    rows = [
        [
            m,
            *[result["accuracy"][m][k] for k in SUBSETS],
            result["by_kind"][m]["reference-machine"]["accuracy"],
            result["by_kind"][m]["machine-machine"]["accuracy"],
            result["n"][m]["all"],
        ]
        for m in result["accuracy"]
    ]
    return columns, rows


def edge_texts(edges: Sequence[float], *, min_digits: int = 3) -> list[str]:
    """Bucket edges in as few significant digits (at least ``min_digits``) as keep different edges different
    ("0.5" and "0.5000000000000001" were both "0.5")."""
    for digits in range(min_digits, 18):
        texts = [f"{e:.{digits}g}" for e in edges]
        if len(set(texts)) == len(set(edges)):
            return texts
    return [repr(float(e)) for e in edges]


def gap_table(by_gap: dict[str, list[dict[str, Any]]]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the accuracy-by-gap table (one row per metric and bucket); edges in 6 significant
    digits (``:g``), more where that would print two different edges alike."""
    rows = []
    for m, bs in by_gap.items():
        text = edge_texts([b["low"] for b in bs] + [b["high"] for b in bs], min_digits=6)
        rows += [[m, f"{text[i]}-{text[len(bs) + i]}", b["accuracy"], b["n"]] for i, b in enumerate(bs)]
    return ["metric", "bucket", "accuracy", "n"], rows


def preference_share(
    diff: np.ndarray,
    *,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    seed: int | None = 12345,
) -> dict[str, Any]:
    """Head to head: the share of matched items on which story A is preferred over story B.

    ``diff`` holds one value per item (a ranker's ``prefer(a, b)``, or the oriented score difference), > 0 when
    A is preferred; NaN items are left out. Returns ``share`` (strictly preferred; ties count for neither),
    ``ties``, ``losses``, ``n`` and ``ci``: the percentile-bootstrap interval of ``share`` (items resampled with
    replacement, ``n_bootstrap`` times, ``seed``). When A is preferred on every item, or on none, every
    resample is too: ``ci`` is then the exact binomial (Clopper-Pearson) interval and ``ci_method`` says so (the
    percentile "interval" was [1, 1] even for one item).
    """
    check_resampling(n_resamples=n_bootstrap, confidence=confidence, seed=seed)
    d = np.asarray(diff, dtype=float)
    d = d[~np.isnan(d)]
    n = int(d.size)
    if n == 0:
        return {"share": math.nan, "ties": math.nan, "losses": math.nan, "n": 0, "ci": [math.nan, math.nan]}
    wins = (d > 0).astype(float)
    out: dict[str, Any] = {
        "share": float(wins.mean()),
        "ties": float((d == 0).mean()),
        "losses": float((d < 0).mean()),
        "n": n,
    }
    if all_alike(wins):
        out["ci"] = list(exact_share_interval(int(wins.sum()), n, confidence))
        out["ci_method"] = EXACT_INTERVAL.format(
            what="item", side="one where A is preferred" if wins[0] else "one where A is not preferred", value=wins[0]
        )
        return out
    dist = np.concatenate([wins[idx].mean(axis=1) for idx in index_blocks(np.random.default_rng(seed), n, n_bootstrap)])
    low, high = percentile_interval(dist, confidence)
    out["ci"] = [float(low), float(high)]
    return out
