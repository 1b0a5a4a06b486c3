"""Bootstrap confidence intervals and paired significance tests over `Score` objects.

Everything resamples *items*. When a metric provides per-item sufficient statistics (``Score.stats`` +
``Score.corpus_from_stats``, e.g. sacreBLEU's n-gram counts) a resample recomputes the corpus score from
the selected rows, so the corpus formula is applied exactly (Koehn 2004; sacreBLEU's design); otherwise
the corpus score is the mean of the defined item scores and resampling is vectorised.

Random draws follow sacreBLEU 2.x (``sacrebleu/significance.py``) number for number:
``numpy.random.default_rng(seed)`` then ``rng.choice(n, size=(B, n))`` for the bootstrap and
``rng.integers(2, size=(B, n), dtype=bool)`` for approximate randomisation, so with the same seed and
sample count our p-values equal sacreBLEU's on BLEU. The draws are made in blocks of rows (`resample_blocks`)
that give the same numbers as one call, so memory stays bounded whatever ``B`` (at most `MAX_BOOTSTRAP`).

- Confidence intervals: percentile bootstrap ``[q(alpha/2), q(1 - alpha/2)]`` of the resampled corpus
  scores. sacreBLEU instead prints ``mean +- half`` with ``half`` = half the width of its 2.5/97.5 order
  statistics (``estimate_ci``), a symmetric interval around the bootstrap mean; we report the percentile
  interval itself because it stays inside the metric's range and is what ``--confidence`` asks for.
- Paired bootstrap (Koehn 2004, as in Moses' ``bootstrap-hypothesis-difference-significance.pl`` and
  sacreBLEU's ``paired_bs``): two-sided, ``p = (#{|d*_b| - mean|d*| > |d|} + 1) / (B + 1)`` where ``d*_b``
  is the difference of the two systems on the b-th common resample and ``d`` the observed difference.
- Approximate randomisation (Riezler & Maxwell 2005; sacreBLEU's ``paired_ar``, after multeval): every
  item's statistics are swapped between the systems with probability 1/2, ``p = (#{|s(A*) - s(B*)| > |d|}
  + 1) / (B + 1)``. Both p-values are 1.0 when the systems score the same (see `_p_value`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from vistkit.errors import InputError
from vistkit.limits import MAX_BOOTSTRAP
from vistkit.metrics.base import Score
from vistkit.scores import DEFAULT_SEED as DEFAULT_SEED  # sacreBLEU's default (SACREBLEU_SEED)

_CHUNK = 256  # resamples per vectorised block (bounds memory at CHUNK x n floats)


_BLOCK_CELLS = 1 << 21  # resample indices drawn per block (16 MiB of int64): memory does not grow with B


# --------------------------------------------------------------------------------------------------- helpers
def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(_check_seed(seed))


def _check_seed(seed: object) -> int | None:
    """A seed: None (fresh randomness) or a whole number from 0 (NumPy's integers too, not a bool or a float)."""
    if seed is None:
        return None
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer):
        raise InputError(f"the seed must be a whole number from 0, or None (got {seed!r:.60})")
    if seed < 0:
        raise InputError(f"the seed must be 0 or more (got {seed})")
    return int(seed)


def _check_score(score: object, what: str = "score") -> Score:
    """``score`` when it is a `Score` (what `vistkit.score` and `Metric.score` return); one sentence otherwise."""
    if not isinstance(score, Score):
        raise InputError(
            f"the {what} must be a vistkit Score (what vistkit.score(...) returns), not {type(score).__name__}"
        )
    return score


def resample_blocks(rng: np.random.Generator, n: int, n_samples: int) -> Iterator[np.ndarray]:
    """``rng.choice(n, size=(n_samples, n))`` drawn in blocks of rows, in order: the same numbers as one call
    (`Generator.choice` with replacement draws integers one after another), in bounded memory."""
    rows = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, n_samples, rows):
        yield rng.choice(n, size=(min(rows, n_samples - start), n), replace=True)


def _mask_blocks(rng: np.random.Generator, n: int, n_samples: int) -> Iterator[np.ndarray]:
    """``rng.integers(2, size=(n_samples, n), dtype=bool)`` in blocks of rows, the same bits as one call: a
    block holds a multiple of 32 cells (numpy draws booleans from 32-bit words and drops a word's unused bits
    at the end of a call)."""
    step = 32 // math.gcd(max(n, 1), 32)
    rows = max(step, (_BLOCK_CELLS // max(n, 1)) // step * step)
    for start in range(0, n_samples, rows):
        yield rng.integers(2, size=(min(rows, n_samples - start), n), dtype=bool)


def _uses_stats(score: Score) -> bool:
    return score.stats is not None and score.corpus_from_stats is not None


def subset(score: Score, item_ids: Sequence[str]) -> Score:
    """The same score restricted to ``item_ids`` (in that order); the corpus value is recomputed."""
    _check_score(score)
    if isinstance(item_ids, str | bytes) or not isinstance(item_ids, Iterable):
        raise InputError(f"{score.metric}: subset takes a list of item ids, not {type(item_ids).__name__}")
    item_ids = list(item_ids)
    where = {k: i for i, k in enumerate(score.item_ids)}
    missing = [k for k in item_ids if k not in where]
    if missing:
        raise InputError(f"{score.metric}: item {missing[0]!r} was not scored")
    rows = np.array([where[k] for k in item_ids], dtype=int)
    out = replace(
        score,
        item_ids=list(item_ids),
        item_scores=score.item_scores[rows],
        stats=score.stats[rows] if score.stats is not None else None,
        excluded=dict(score.excluded),
    )
    out.corpus = score.resample(rows)
    return out


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Row means of a 2-D array ignoring NaN (NaN where a row has no defined value)."""
    defined = ~np.isnan(values)
    counts = defined.sum(axis=1)
    sums = np.where(defined, values, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _from_sums(score: Score) -> Callable[[np.ndarray], float] | None:
    """A metric with additive statistics says so by a ``from_sums`` attribute on ``corpus_from_stats``."""
    fn = getattr(score.corpus_from_stats, "from_sums", None)
    return fn if callable(fn) and score.stats is not None else None


def _resampled(score: Score, idx: np.ndarray) -> np.ndarray:
    """Corpus score of every row of resample indices ``idx`` (B x n)."""
    from_sums = _from_sums(score)
    if from_sums is not None:  # additive statistics: counts of each item per resample, times the statistics
        assert score.stats is not None
        stats = score.stats.astype(float)
        n = stats.shape[0]
        out = np.empty(idx.shape[0], dtype=float)
        for start in range(0, idx.shape[0], _CHUNK):
            block = idx[start : start + _CHUNK]
            counts = np.stack([np.bincount(row, minlength=n) for row in block]).astype(float)
            out[start : start + _CHUNK] = [from_sums(s) for s in counts @ stats]
        return out
    if _uses_stats(score):
        return np.array([score.resample(row) for row in idx], dtype=float)
    out = np.empty(idx.shape[0], dtype=float)
    for start in range(0, idx.shape[0], _CHUNK):
        block = idx[start : start + _CHUNK]
        out[start : start + _CHUNK] = _nanmean_rows(score.item_scores[block])
    return out


#: a null statistic within this much (times the larger of 1 and the two corpus scores) of the observed difference
#: equals it: the null and the observed value are summed in different orders, and the last bits must not decide
TIE_TOLERANCE = 1e-9


def _p_value(null_stats: np.ndarray, observed: float, scale: float = 1.0) -> float:
    """``(#{null > observed} + 1) / (B + 1)`` (multeval / sacreBLEU), but 1.0 when the systems score the
    same.

    sacreBLEU and multeval count strictly greater null statistics, so two identical systems (every null
    statistic and the observed difference are 0) get the smallest p-value, 1/(B+1). We return 1.0 there: a
    zero observed difference is no evidence of a difference. A null statistic that equals the observed one up
    to rounding (`TIE_TOLERANCE` x ``scale``, the size of the scores) is a tie, not greater: for a mean of item
    scores the swapped means are summed in another order than the observed ones, and two systems differing in
    one item (where every shuffle ties with the observed difference) got any p-value from 1/(B+1) to 1 by
    rounding; sacreBLEU's BLEU sums whole-number statistics and ties exactly. Any other case is theirs exactly.
    """
    if observed == 0.0:
        return 1.0
    greater = null_stats > observed + TIE_TOLERANCE * max(1.0, abs(scale))
    return (int(np.sum(greater)) + 1) / (null_stats.size + 1)


def _check_args(*, n: int, n_samples: int, confidence: float | None = None, seed: object = None) -> None:
    if n == 0:
        raise InputError("there are no items to resample")
    _check_seed(seed)
    if isinstance(n_samples, bool | np.bool_) or not isinstance(n_samples, int | np.integer | float):
        raise InputError(f"the number of resamples must be a whole number, e.g. 1000 (got {n_samples!r:.60})")
    if isinstance(n_samples, float) and math.isfinite(n_samples) and not float(n_samples).is_integer():
        raise InputError(f"the number of resamples must be a whole number, e.g. 1000 (got {n_samples})")
    if not 1 <= n_samples <= MAX_BOOTSTRAP:
        raise InputError(f"the number of resamples must be from 1 to {MAX_BOOTSTRAP:,} (got {n_samples:,})")
    if confidence is not None and (
        isinstance(confidence, bool | np.bool_) or not isinstance(confidence, int | float | np.integer | np.floating)
    ):
        raise InputError(f"the confidence must be a number between 0 and 1, e.g. 0.95 (got {confidence!r:.60})")
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise InputError(f"--confidence must be between 0 and 1, e.g. 0.95 (got {confidence})")


# ---------------------------------------------------------------------------------------------- bootstrap CIs
def bootstrap_distribution(
    score: Score, *, n_bootstrap: int = 1000, seed: int | None = DEFAULT_SEED
) -> np.ndarray:
    """Corpus scores of ``n_bootstrap`` resamples of the items (with replacement), sacreBLEU's draws."""
    n = len(_check_score(score).item_ids)
    _check_args(n=n, n_samples=n_bootstrap, seed=seed)
    rng = _rng(seed)
    return np.concatenate([_resampled(score, idx) for idx in resample_blocks(rng, n, int(n_bootstrap))])


@dataclass(frozen=True)
class ConfidenceInterval:
    """A percentile-bootstrap interval around a corpus score."""

    low: float
    high: float
    confidence: float
    n_bootstrap: int
    seed: int | None

    def as_list(self) -> list[float]:
        """``[low, high]``."""
        return [self.low, self.high]


def bootstrap_ci(
    score: Score, *, confidence: float = 0.95, n_bootstrap: int = 1000, seed: int | None = DEFAULT_SEED
) -> ConfidenceInterval:
    """Percentile bootstrap confidence interval of the corpus score (items resampled with replacement)."""
    if confidence is None:
        raise InputError("the confidence must be a number between 0 and 1, e.g. 0.95 (got None)")
    _check_args(n=len(_check_score(score).item_ids), n_samples=n_bootstrap, confidence=confidence, seed=seed)
    dist = bootstrap_distribution(score, n_bootstrap=n_bootstrap, seed=seed)
    dist = dist[~np.isnan(dist)]
    if dist.size == 0:
        return ConfidenceInterval(math.nan, math.nan, confidence, n_bootstrap, seed)
    alpha = 1.0 - confidence
    low, high = (float(x) for x in np.quantile(dist, [alpha / 2.0, 1.0 - alpha / 2.0]))
    point = float(score.corpus)
    if math.isfinite(point) and high - low <= 8 * np.finfo(float).eps * max(abs(low), abs(high), 1.0):
        # every resample is the same score up to rounding (all items alike): resample means summed in another
        # order may all round past the corpus score, and the interval then left out its own point estimate
        low, high = min(low, point), max(high, point)
    return ConfidenceInterval(low, high, confidence, n_bootstrap, seed)


# ----------------------------------------------------------------------------------------------- paired tests
@dataclass(frozen=True)
class PairedResult:
    """A paired test of ``system`` against ``baseline`` on the same items."""

    metric: str
    test: str  # "bs" (paired bootstrap) or "ar" (approximate randomisation)
    baseline: float  # corpus score of the baseline on the common items
    system: float  # corpus score of the system on the common items
    p_value: float
    n_samples: int
    n_items: int
    seed: int | None

    @property
    def difference(self) -> float:
        """``system - baseline``."""
        return self.system - self.baseline


def pairable_items(baseline: Score, system: Score) -> list[str]:
    """The items a paired test of ``system`` against ``baseline`` runs on (baseline order): those both scored,
    less, for metrics scored as a mean of item scores, those either system left undefined (NaN)."""
    _check_score(baseline, "baseline")
    _check_score(system, "system")
    if baseline.metric != system.metric:
        raise InputError(f"cannot pair {baseline.metric} with {system.metric}: compare one metric at a time")
    theirs = set(system.item_ids)
    common = [k for k in baseline.item_ids if k in theirs]
    if not _uses_stats(baseline) or not _uses_stats(system):
        a_val = dict(zip(baseline.item_ids, baseline.item_scores, strict=True))
        b_val = dict(zip(system.item_ids, system.item_scores, strict=True))
        common = [k for k in common if not (math.isnan(a_val[k]) or math.isnan(b_val[k]))]
    return common


def pair_up(baseline: Score, system: Score) -> tuple[Score, Score]:
    """Both scores restricted to the items they share (baseline order).

    For metrics scored as a mean of item scores an item left undefined (NaN) by either system is dropped
    too, so both means run over the same items.
    """
    common = pairable_items(baseline, system)
    if not common:
        raise InputError(f"{baseline.metric}: the two systems share no scored item, so they cannot be paired")
    return subset(baseline, common), subset(system, common)


def paired_bootstrap(
    baseline: Score, system: Score, *, n_samples: int = 1000, seed: int | None = DEFAULT_SEED
) -> PairedResult:
    """Two-sided paired bootstrap resampling test (Koehn 2004; sacreBLEU ``paired_bs``)."""
    a, b = pair_up(baseline, system)
    n = len(a.item_ids)
    _check_args(n=n, n_samples=n_samples, seed=seed)
    rng = _rng(seed)
    blocks = [(_resampled(a, idx), _resampled(b, idx)) for idx in resample_blocks(rng, n, int(n_samples))]
    sa = np.concatenate([x for x, _ in blocks])
    sb = np.concatenate([y for _, y in blocks])
    observed = abs(b.corpus - a.corpus)
    sample_diffs = np.abs(sb - sa)
    centred = sample_diffs - sample_diffs.mean()  # the null: shift the bootstrap distribution to mean 0
    p = _p_value(centred, observed, max(abs(a.corpus), abs(b.corpus)))
    return PairedResult(a.metric, "bs", a.corpus, b.corpus, p, n_samples, n, seed)


def _swapped(a: Score, b: Score, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corpus scores of the pseudo-systems: A* takes ``a`` where ``mask`` is true, else ``b``; B* the rest."""
    trials = mask.shape[0]
    out_a = np.empty(trials, dtype=float)
    out_b = np.empty(trials, dtype=float)
    sums_a, sums_b = _from_sums(a), _from_sums(b)
    if sums_a is not None and sums_b is not None:  # additive statistics: one matrix product per block
        assert a.stats is not None and b.stats is not None
        fa, fb = a.stats.astype(float), b.stats.astype(float)
        for start in range(0, trials, _CHUNK):
            m = mask[start : start + _CHUNK].astype(float)
            out_a[start : start + _CHUNK] = [sums_a(s) for s in m @ fa + (1.0 - m) @ fb]
            out_b[start : start + _CHUNK] = [sums_b(s) for s in m @ fb + (1.0 - m) @ fa]
        return out_a, out_b
    if _uses_stats(a) and _uses_stats(b):
        sa, sb = a.stats, b.stats
        assert sa is not None and sb is not None and a.corpus_from_stats and b.corpus_from_stats
        for t in range(trials):
            m = mask[t][:, None]
            out_a[t] = a.corpus_from_stats(np.where(m, sa, sb))
            out_b[t] = b.corpus_from_stats(np.where(m, sb, sa))
        return out_a, out_b
    va, vb = a.item_scores, b.item_scores  # no NaN left after pair_up
    n = va.size
    for start in range(0, trials, _CHUNK):
        block = mask[start : start + _CHUNK].astype(float)
        out_a[start : start + _CHUNK] = (block @ va + (1.0 - block) @ vb) / n
        out_b[start : start + _CHUNK] = (block @ vb + (1.0 - block) @ va) / n
    return out_a, out_b


def approximate_randomization(
    baseline: Score, system: Score, *, n_samples: int = 10000, seed: int | None = DEFAULT_SEED
) -> PairedResult:
    """Two-sided paired approximate randomisation test (Riezler & Maxwell 2005; sacreBLEU ``paired_ar``)."""
    a, b = pair_up(baseline, system)
    n = len(a.item_ids)
    _check_args(n=n, n_samples=n_samples, seed=seed)
    rng = _rng(seed)
    blocks = [_swapped(a, b, mask) for mask in _mask_blocks(rng, n, int(n_samples))]
    shuf_a = np.concatenate([x for x, _ in blocks])
    shuf_b = np.concatenate([y for _, y in blocks])
    observed = abs(a.corpus - b.corpus)
    p = _p_value(np.abs(shuf_a - shuf_b), observed, max(abs(a.corpus), abs(b.corpus)))
    return PairedResult(a.metric, "ar", a.corpus, b.corpus, p, n_samples, n, seed)


DEFAULT_SAMPLES = {"bs": 1000, "ar": 10000}  # sacreBLEU's defaults


def paired_test(
    baseline: Score,
    system: Score,
    *,
    test: str = "bs",
    n_samples: int | None = None,
    seed: int | None = DEFAULT_SEED,
) -> PairedResult:
    """``test="bs"`` (paired bootstrap) or ``"ar"`` (approximate randomisation) of ``system`` vs
    ``baseline``.
    """
    if test not in DEFAULT_SAMPLES:
        raise InputError(
            f"unknown test {test!r}: use bs (paired bootstrap) or ar (approximate randomisation)"
        )
    n = n_samples if n_samples is not None else DEFAULT_SAMPLES[test]
    if test == "bs":
        return paired_bootstrap(baseline, system, n_samples=n, seed=seed)
    return approximate_randomization(baseline, system, n_samples=n, seed=seed)


def significance_mark(
    p_value: float, *, levels: Sequence[tuple[float, str]] = ((0.01, "**"), (0.05, "*"))
) -> str:
    """``**`` for p < 0.01, ``*`` for p < 0.05, else an empty string."""
    if isinstance(p_value, bool | np.bool_) or not isinstance(p_value, int | float | np.integer | np.floating):
        raise InputError(f"a p-value is a number from 0 to 1, not {type(p_value).__name__}")
    for level, mark in levels:
        if p_value < level:
            return mark
    return ""


# ------------------------------------------------------------------------------------------------ comparisons
@dataclass(frozen=True)
class SystemResult:
    """One system on one metric, on the items every compared system shares."""

    score: float
    ci: ConfidenceInterval
    paired: PairedResult | None  # None for the baseline itself

    @property
    def mark(self) -> str:
        """The significance mark of the paired test against the baseline (`significance_mark`; "" without one)."""
        return significance_mark(self.paired.p_value) if self.paired is not None else ""


@dataclass
class Comparison:
    """Systems x metrics with CIs and paired tests against ``baseline``."""

    systems: list[str]
    metrics: list[str]
    baseline: str
    test: str
    n_samples: int
    confidence: float
    n_bootstrap: int
    seed: int | None
    results: dict[str, dict[str, SystemResult]]  # system -> metric -> result
    signatures: dict[str, str]  # metric -> signature (of the baseline's run)
    n_items: dict[str, int]  # metric -> shared items
    dropped: dict[str, dict[str, int]]  # metric -> system -> items it had that were not shared
    # metric -> system -> signature of that system's run: data-dependent fields (nrefs) can differ from the baseline's
    system_signatures: dict[str, dict[str, str]] = field(default_factory=dict)


def compare_scores(
    scores: dict[str, dict[str, Score]],
    *,
    baseline: str | None = None,
    test: str = "bs",
    n_samples: int | None = None,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    seed: int | None = DEFAULT_SEED,
) -> Comparison:
    """Compare systems (``scores[system][metric]``) on the items they all share, metric by metric.

    Every system gets a bootstrap CI; every system but the baseline (the first, unless named) gets a
    paired test against it. Items not scored for every system are dropped and counted in ``dropped``. A system
    with no item defined alongside the baseline's (every story undefined on a mean metric) gets a test with a
    NaN p-value on 0 items, so one such metric does not stop the comparison.
    """
    if not isinstance(scores, Mapping):
        raise InputError(
            f"compare_scores takes {{system: {{metric: Score}}}}, not {type(scores).__name__}"
        )
    systems = list(scores)
    if len(systems) < 2:
        raise InputError("compare needs at least two systems")
    for s, by_metric in scores.items():
        if not isinstance(by_metric, Mapping):
            raise InputError(
                f"system {s!r}: compare_scores takes {{metric: Score}} per system, not {type(by_metric).__name__}"
            )
        for m, sc in by_metric.items():
            _check_score(sc, f"score of system {s!r} on {m}")
    base = systems[0] if baseline is None else baseline
    if base not in scores:
        raise InputError(f"--baseline {base!r} is not one of the systems: {', '.join(systems)}")
    metrics = list(scores[base])
    if test not in DEFAULT_SAMPLES:
        raise InputError(
            f"unknown test {test!r}: use bs (paired bootstrap) or ar (approximate randomisation)"
        )
    n = n_samples if n_samples is not None else DEFAULT_SAMPLES[test]
    results: dict[str, dict[str, SystemResult]] = {s: {} for s in systems}
    n_items: dict[str, int] = {}
    dropped: dict[str, dict[str, int]] = {}
    for metric in metrics:
        lacking = [s for s in systems if metric not in scores[s]]
        if lacking:
            raise InputError(
                f"system {lacking[0]!r} has no {metric} score and the baseline {base!r} has one; score every system "
                "with the same metrics"
            )
        shared = set(scores[base][metric].item_ids)
        for s in systems:
            shared &= set(scores[s][metric].item_ids)
        common = [k for k in scores[base][metric].item_ids if k in shared]
        if not common:
            raise InputError(f"{metric}: the systems share no scored item (check --key and the files)")
        n_items[metric] = len(common)
        dropped[metric] = {s: len(scores[s][metric].item_ids) - len(common) for s in systems}
        restricted = {s: subset(scores[s][metric], common) for s in systems}
        for s in systems:
            r = restricted[s]
            ci = bootstrap_ci(r, confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
            paired = None
            if s != base and not pairable_items(restricted[base], r):  # e.g. every story of s undefined
                paired = PairedResult(metric, test, math.nan, math.nan, math.nan, n, 0, seed)
            elif s != base:
                paired = paired_test(restricted[base], r, test=test, n_samples=n, seed=seed)
            results[s][metric] = SystemResult(r.corpus, ci, paired)
    return Comparison(
        systems=systems,
        metrics=metrics,
        baseline=base,
        test=test,
        n_samples=n,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
        results=results,
        signatures={m: scores[base][m].signature for m in metrics},
        n_items=n_items,
        dropped=dropped,
        system_signatures={m: {s: scores[s][m].signature for s in systems} for m in metrics},
    )
