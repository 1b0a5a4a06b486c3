"""METEOR 1.5 (Denkowski & Lavie 2014) as the VIST literature computed it, in three named variants.

All three run Meteor's own Java code (``meteor-1.5.jar`` as shipped by pycocoevalcap 1.2) in one warm JVM
shared by the whole process (`vistkit.models.java.meteor_server`), so they give the jar's numbers exactly:

- ``meteor-vist``: the NAACL 2018 VIST challenge evaluator (``EvalVISTSharedTask.java``): task ``hter``,
  English, no normalisation (case-sensitive, whitespace tokens), ``getMeteorStats(test, ref).score`` for every
  reference of a photo sequence, the max per sequence, the mean over sequences.
- ``meteor-album``: lichengunc/vist_eval as used by AREL (``-stdio -t hter``, no ``-norm``): one hypothesis
  per album against all stories of the album, Meteor's best-reference statistics per album, corpus score from
  the statistics pooled over albums (one ``EVAL`` line).
- ``meteor-coco``: pycocoevalcap 1.2's ``Meteor`` (``-stdio -l en -norm``, default task) on PTB-tokenised
  text (its ``PTBTokenizer``), per-item ``SCORE`` lines, corpus score = the pooled ``EVAL``.

Meteor's score for one set of statistics (``MeteorScorer.computeMetrics``; Denkowski & Lavie 2014, Sec. 2.3):
P and R are weighted match ratios (content/function words weighted by delta, modules by their weights),
Fmean = P R / (alpha P + (1 - alpha) R), Pen = gamma (ch / m)^beta, score = Fmean (1 - Pen).
`meteor_from_stats` re-implements it in Python (same operation order) for resampled rows (bootstrap) and for
pooled corpus scores, so that the local engine, merged Ray shards and bootstrap resamples all run the same code
on the same integer statistics and agree bit for bit. Per-item scores come from the jar. Against the jar's own
``EVAL`` the Python formula agrees to within 1 ulp, not always bit for bit: ``Math.pow`` in the JVM (an intrinsic
whose last bit may depend on the CPU and on whether the method is JIT-compiled yet) and C's ``pow`` need not
round alike (tests/test_meteor.py compares them within 4e-16 relative).
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Keying, Story, StorySet
from vistkit.limits import METEOR_MAX_WORD_PAIRS, METEOR_MAX_WORDS
from vistkit.metrics.base import Item, Metric, MetricCard, Score, get_metric, mean_score, register

METEOR_VERSION = "meteor-1.5"
N_STAGES = 4  # Meteor's stats text always carries 4 module stages (exact, stem, synonym, paraphrase)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n]")

#: Meteor's aligner grows much faster than the square of a text's length. Two copies of one text, in the official
#: jar as pycocoevalcap runs it (-Xmx2G): 1,000 words 7 s, 2,000 words 17 s, 4,000 words over 5 minutes, 8,000 words
#: out of memory. A VIST story has ~60 words: a hypothesis or reference over this many whitespace-separated words is
#: not sent to Meteor (its item is excluded, with the reason), so one such text cannot stall or kill a whole run.
MAX_WORDS = METEOR_MAX_WORDS
_TOO_LONG = f"more than {MAX_WORDS:,} words: Meteor's aligner would take minutes and gigabytes (not scored)"
#: Equal words multiply the aligner's work too (`vistkit.limits.METEOR_MAX_WORD_PAIRS`)
MAX_WORD_PAIRS = METEOR_MAX_WORD_PAIRS
_TOO_REPETITIVE = (
    f"repeat words so much (more than {MAX_WORD_PAIRS:,} pairs of equal words) that Meteor's aligner would take "
    "minutes (not scored)"
)
_LONG_TEXT_NOTE = (
    f" A story or reference of more than {MAX_WORDS:,} words is not scored (its item is excluded with the reason): "
    "the jar's aligner takes minutes on 4,000 words and runs out of its 2 GB heap on 8,000. So is an item whose "
    f"story and a reference hold more than {MAX_WORD_PAIRS:,} pairs of equal words (a story looping on one word "
    "against a reference that does: 1,000 x 1,000 took six minutes)."
)


#: The words Meteor's -norm (meteor-coco) may make, an upper bound of the jar's count: runs of ASCII, Latin-1/Extended
#: and Cyrillic letters and digits (joined in the jar: "cafécafé" is one word), and every other character but the
#: five the jar splits at (space, tab, \n, \r, \f) as a word of its own (the jar splits "_ / @ * + = & # | ~ ^ $ % <
#: > [ {", CJK, Greek and Arabic characters, combining marks and C0 controls so; it drops some others, e.g. NBSP).
#: Whitespace words alone let a story of 1,500 "dog"s joined by "_" (one word; 2,999 to Meteor) kill the helper JVM.
_NORM_WORDS = re.compile(r"[0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0400-\u04ff]+|[^ \t\n\r\f]")


def meteor_words(text: str, *, norm: bool = False) -> list[str]:
    """The words Meteor aligns in ``text`` (case-blind), for its limits: whitespace-separated without -norm (Python
    splits at more characters than the jar's five, so never fewer words); with -norm (meteor-coco) every word the
    normaliser may make (`_NORM_WORDS`: at least as many as the jar's)."""
    return _NORM_WORDS.findall(text.lower()) if norm else text.lower().split()


def _too_long(text: str, *, norm: bool = False) -> bool:
    return len(meteor_words(text, norm=norm)) > MAX_WORDS


def word_pairs(a: str, b: str, *, norm: bool = False) -> int:
    """The pairs of equal words (`meteor_words`), one from ``a`` and one from ``b`` (case-blind: the most that
    Meteor's exact matcher, with or without -norm, may have to place)."""
    from collections import Counter

    ca, cb = Counter(meteor_words(a, norm=norm)), Counter(meteor_words(b, norm=norm))
    if len(ca) > len(cb):
        ca, cb = cb, ca
    return sum(n * cb[w] for w, n in ca.items() if w in cb)


def _too_repetitive(hypothesis: str, reference: str, *, norm: bool = False) -> bool:
    return word_pairs(hypothesis, reference, norm=norm) > MAX_WORD_PAIRS


def skip_reason(hypothesis: str, references: Sequence[str], *, norm: bool = False) -> str | None:
    """Why an item is not sent to Meteor (a text over `MAX_WORDS`, or a pair over `MAX_WORD_PAIRS`), else None;
    ``norm``: the words as Meteor's -norm makes them (meteor-coco)."""
    if _too_long(hypothesis, norm=norm):
        return f"the story has {_TOO_LONG}"
    if any(_too_long(r, norm=norm) for r in references):
        return f"a reference has {_TOO_LONG}"
    if any(_too_repetitive(hypothesis, r, norm=norm) for r in references):
        return f"the story and a reference {_TOO_REPETITIVE}"
    return None


_CITATION = (
    "Denkowski & Lavie, Meteor Universal: Language Specific Translation Evaluation for Any Target Language, "
    "WMT 2014; code: Meteor 1.5 (www.cs.cmu.edu/~alavie/METEOR), the jar shipped by pycocoevalcap 1.2."
)


# --------------------------------------------------------------------------------------------------- helpers
def _config(task: str, norm: bool) -> Any:
    from vistkit.models.java import MeteorConfig

    return MeteorConfig(task=task, language="en", norm=norm)


def _prefetch(task: str, norm: bool) -> None:
    from vistkit.models.java import prefetch

    if shutil.which("java") is not None or "JAVA_HOME" in os.environ:
        prefetch(_config(task, norm))


def check_java_settings() -> None:
    """An `InputError` for a METEOR Java setting that cannot work (``VISTKIT_JAVA_OPTS`` with an unclosed quote,
    ``VISTKIT_METEOR_THREADS`` or ``VISTKIT_JAVA_TIMEOUT`` out of range), said by `check_tools` before any metric
    of a run scores instead of when METEOR's turn comes."""
    from vistkit.models.java import default_threads, helper_jvm_options, java_timeout

    helper_jvm_options()
    default_threads()
    java_timeout()


def stdio_line(hypothesis: str, references: Sequence[str]) -> str:
    """The ``SCORE ||| ref1 ||| ... ||| hyp`` line pycocoevalcap/vist_eval's ``Meteor._stat`` writes.

    Like them we remove ``|||`` from the hypothesis and replace the first double spaces; a ``|||`` inside a
    reference splits it, as it does in their wrapper. Line breaks become spaces (their wrapper would break the
    protocol; Meteor tokenises on whitespace, so this changes nothing else).
    """
    hyp = _LINE_BREAKS.sub(" ", hypothesis).replace("|||", "").replace("  ", " ")
    refs = [_LINE_BREAKS.sub(" ", r) for r in references]
    return " ||| ".join(("SCORE", " ||| ".join(refs), hyp))


#: column of the chunk count in a row of Meteor statistics (after lengths, function words and 4 values per stage)
CHUNKS = 4 + 4 * N_STAGES


def pool_meteor_stats(rows: np.ndarray) -> np.ndarray:
    """The sum of rows of Meteor statistics as ``MeteorStats.addStats`` pools them (the jar's ``EVAL``).

    ``addStats`` adds every field, except the chunk count of a PERFECT item (all test and reference words matched,
    in one chunk): its chunk is left out, so that pooled identical texts keep a fragmentation penalty of 0 (two
    perfect items pool to score 1.0, not the 0.6 a plain sum of their chunks would give).
    """
    a = np.asarray(rows, dtype=float)
    if a.ndim == 1:
        a = a[None, :]
    stages = a[:, 4 : 4 + 4 * N_STAGES].reshape(a.shape[0], N_STAGES, 4)
    t_total = stages[:, :, 0].sum(axis=1) + stages[:, :, 2].sum(axis=1)
    r_total = stages[:, :, 1].sum(axis=1) + stages[:, :, 3].sum(axis=1)
    perfect = (t_total == a[:, 0]) & (r_total == a[:, 1]) & (a[:, CHUNKS] == 1)
    total = a.sum(axis=0)
    total[CHUNKS] -= float(np.count_nonzero(perfect))
    return total


def _pooled_corpus(
    rows: np.ndarray, *, alpha: float, beta: float, gamma: float, delta: float, weights: tuple[float, ...]
) -> float:
    """The corpus METEOR of per-item statistics ``rows``, pooled as the jar's EVAL pools them (a perfect item's
    chunk is not added), with Meteor's formula (`meteor_from_stats`)."""
    return meteor_from_stats(
        pool_meteor_stats(rows), alpha=alpha, beta=beta, gamma=gamma, delta=delta, weights=weights
    )


def meteor_from_stats(
    stats: np.ndarray, *, alpha: float, beta: float, gamma: float, delta: float, weights: Sequence[float]
) -> float:
    """Meteor's score of one row of sufficient statistics (``MeteorScorer.computeMetrics``, same op order).

    Row layout = Meteor's stats text: test/ref length, test/ref function words, then per stage (test content,
    ref content, test function, ref function) matches, then chunks, test/ref word matches.
    """
    s = [float(x) for x in stats]
    t_len, r_len, t_fun, r_fun = s[0], s[1], s[2], s[3]
    stages = [s[4 + 4 * i : 8 + 4 * i] for i in range(N_STAGES)]
    chunks, t_words, r_words = s[4 + 4 * N_STAGES], s[5 + 4 * N_STAGES], s[6 + 4 * N_STAGES]
    t_total = 0.0
    r_total = 0.0
    for tc, rc, tf, rf in stages:
        t_total += tc
        t_total += tf
        r_total += rc
        r_total += rf
    t_wlen = (delta * (t_len - t_fun)) + ((1.0 - delta) * t_fun)
    r_wlen = (delta * (r_len - r_fun)) + ((1.0 - delta) * r_fun)
    t_match = 0.0
    r_match = 0.0
    for i, w in enumerate(weights):
        t_match += stages[i][0] * w * delta
    for i, w in enumerate(weights):
        r_match += stages[i][1] * w * delta
    for i, w in enumerate(weights):
        t_match += stages[i][2] * w * (1.0 - delta)
    for i, w in enumerate(weights):
        r_match += stages[i][3] * w * (1.0 - delta)
    with np.errstate(all="ignore"):
        p = np.float64(t_match) / np.float64(t_wlen)
        r = np.float64(r_match) / np.float64(r_wlen)
        fmean = 1.0 / (((1.0 - alpha) / p) + (alpha / r))
        if t_total == t_len and r_total == r_len and chunks == 1:
            frag = np.float64(0.0)
        else:
            frag = np.float64(chunks) / ((np.float64(t_words + r_words)) / 2)
        pen = gamma * np.power(frag, beta)
        score = float(fmean * (1.0 - pen))
    if math.isnan(score):
        return 0.0
    return max(score, 0.0)


# --------------------------------------------------------------------------------------------------- vist
@register
class MeteorVist(Metric):
    """METEOR of the NAACL 2018 VIST challenge: max over a sequence's references, mean over sequences."""

    name = "meteor-vist"
    needs_references: ClassVar[bool] = True
    needs_java: ClassVar[str] = "METEOR"
    card = MetricCard(
        summary=(
            "METEOR 1.5 exactly as the NAACL 2018 VIST challenge evaluator (EvalVISTSharedTask.java) "
            "computes "
            "it: the best score over the sequence's human stories, averaged over sequences."
        ),
        definition=(
            "For each photo sequence s with hypothesis h_s and references R_s: "
            "score_s = max_{r in R_s} METEOR_hter(h_s, r), via MeteorScorer.getMeteorStats(h_s, r).score "
            "with "
            'MeteorConfiguration.setTask("hter") (alpha 0.4, beta 1.5, gamma 0.35, delta 0.55; modules '
            "exact/stem/synonym/paraphrase with weights 1.0/0.2/0.6/0.8), English, no normalisation. "
            "Corpus = mean of score_s (the challenge README's evaluation procedure, steps 1-2). Keyed by "
            "sequence (photo ids joined by '-'); --template restricts to the challenge's 1,938 sequences and "
            "makes a missing hypothesis an error, as the evaluator does."
        ),
        range="[0, 1]; an empty hypothesis scores 0.",
        signature_fields=(
            "nrefs, key, task:hter, norm:no (case-sensitive, whitespace tokens), lang:en, agg:max-mean "
            "(max over references, mean over items), ascii:drop when drop_non_ascii, version:meteor-1.5"
        ),
        reproduces=(
            "windx0303/VIST-Challenge-NAACL-2018 EvalVISTSharedTask.java with meteor-1.5.jar: TAPM's "
            "ours.json against the VIST test stories (PR_VIST.json.zip) on the challenge template gives "
            "0.24295302494444548 over 1,936 sequences (the jar's mean; vistkit's is within 1e-15 of it, the same "
            "per-sequence scores summed in another order); equal to the jar pair by pair (tests/test_meteor.py)."
        ),
        differences=(
            "The challenge README says 'Any non-ASCII characters will be ignored for evaluation', but the "
            "evaluator's code never removes them: the default follows the code (the published numbers); "
            "drop_non_ascii=True (CLI --drop-non-ascii) follows the README and deletes non-ASCII characters "
            "from hypotheses and references first. Unlike meteor-coco there is no -norm: METEOR here is "
            "case-sensitive and splits on whitespace only, so 'Dog.' does not match 'dog .'. The task is "
            "hter, not Meteor's default task (other parameters, see definition), as in Huang et al. 2016 "
            "(Sec. 5, footnote 8: 'Meteor version 1.5 with hter weights'). The challenge's gold standard "
            "also held 3 extra, non-public stories per test sequence (README, gsFile), so its leaderboard "
            "scores used more references than the public test set scored here. Meteor reads text through its "
            "Java API here, as the evaluator does, so '|||' is an ordinary word and words are split where Meteor's "
            "tokeniser (java.util.StringTokenizer) splits them: at spaces, tabs, \\n, \\r and \\f only; U+2028, "
            "U+2029, U+0085, \\x0b, \\x1c-\\x1f, no-break and other Unicode spaces stay INSIDE a word (the story "
            "'we went\\u2028to the park' scores 0.80, not 1.0, against 'we went to the park', as in the "
            "evaluator; tests/test_probes_content_r7.py)." + _LONG_TEXT_NOTE
        ),
        citation=(
            "Mitchell et al., Proceedings of the First Workshop on Storytelling (NAACL 2018), VIST "
            "challenge; "
            "code github.com/windx0303/VIST-Challenge-NAACL-2018. Huang et al., Visual Storytelling, NAACL "
            "2016. " + _CITATION
        ),
    )

    def __init__(self, *, drop_non_ascii: bool = False, prefetch: bool = True) -> None:
        from vistkit.metrics._options import option_bool

        self.drop_non_ascii = option_bool(self.name, "drop_non_ascii", drop_non_ascii)
        # load-once scorer: the JVM loads Meteor's tables while the caller reads its files
        if option_bool(self.name, "prefetch", prefetch):
            _prefetch("hter", False)

    @classmethod
    def check_tools(cls) -> None:
        """Java found (`Metric.check_tools`), and METEOR's Java settings usable (`check_java_settings`)."""
        check_java_settings()
        super().check_tools()

    def signature_fields(self) -> dict[str, object]:
        fields: dict[str, object] = {"task": "hter", "norm": False, "lang": "en", "agg": "max-mean"}
        if self.drop_non_ascii:
            fields["ascii"] = "drop"
        fields["version"] = METEOR_VERSION
        return fields

    def _clean(self, text: str) -> str:
        return _NON_ASCII.sub("", text) if self.drop_non_ascii else text

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per item the best METEOR over its references (the jar's hter task), corpus = mean of the items; an item
        with an over-long story or reference is excluded."""
        from vistkit.models.java import meteor_server

        tests: list[str] = []
        refs: list[str] = []
        owner: list[int] = []
        excluded: dict[str, str] = {}
        from vistkit.text.tokenize import one_form

        for i, item in enumerate(items):
            # a story and references typed in two Unicode forms are read in NFC (before non-ASCII is dropped)
            texts = [self._clean(t) for t in one_form([item.hypothesis.text, *(r.text for r in item.references)])]
            hyp, kept = texts[0], texts[1:]
            # the whole item is left out, as the pooled variants do: the max over the other references would not be
            # the jar's
            if (why := skip_reason(hyp, kept)) is not None:
                excluded[item.item_id] = why
                continue
            for r in kept:
                tests.append(hyp)
                refs.append(r)
                owner.append(i)
        pair = meteor_server().pair_scores(_config("hter", False), tests, refs) if tests else []
        best = np.full(len(items), -1.0)
        for i, s in zip(owner, pair, strict=True):
            if s > best[i]:  # strict, as the evaluator: the first of equal scores wins (same value anyway)
                best[i] = s
        values = np.where(best < 0, np.nan, best)
        for i in range(len(items)):
            if best[i] < 0:
                excluded.setdefault(items[i].item_id, "no reference")
        return mean_score(
            self.name,
            [it.item_id for it in items],
            values.tolist(),
            signature,
            excluded=excluded,
            extra={"pairs": len(pair)},
        )


# --------------------------------------------------------------------------------------------------- pooled
class _PooledMeteor(Metric):
    """Meteor's stdio protocol: best-reference statistics per item, corpus score from pooled statistics."""

    needs_references: ClassVar[bool] = True
    needs_java: ClassVar[str] = "METEOR"
    task: ClassVar[str]
    norm: ClassVar[bool]

    def __init__(self, *, prefetch: bool = True) -> None:
        from vistkit.metrics._options import option_bool

        # load-once scorer: the JVM loads Meteor's tables while the caller reads its files
        if option_bool(self.name, "prefetch", prefetch):
            _prefetch(self.task, self.norm)

    @classmethod
    def check_tools(cls) -> None:
        """Java found (`Metric.check_tools`), and METEOR's Java settings usable (`check_java_settings`)."""
        check_java_settings()
        super().check_tools()

    def _texts(self, items: Sequence[Item]) -> tuple[list[str], list[list[str]]]:
        """The texts sent to Meteor; an item's in NFC when they are typed in two Unicode forms (`one_form`)."""
        from vistkit.text.tokenize import one_form

        texts = [one_form([it.hypothesis.text, *(r.text for r in it.references)]) for it in items]
        return [t[0] for t in texts], [t[1:] for t in texts]

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        from vistkit.models.java import meteor_server

        hyps, refs = self._texts(items)
        server = meteor_server()
        cfg = _config(self.task, self.norm)
        info = server.config(cfg)
        # a text Meteor cannot align in reasonable time and memory: its item is left out (NaN, zero statistics,
        # so it adds nothing to the pooled corpus score)
        excluded = {
            it.item_id: why
            for it, h, r in zip(items, hyps, refs, strict=True)
            if (why := skip_reason(h, r, norm=self.norm)) is not None
        }
        keep = [k for k, it in enumerate(items) if it.item_id not in excluded]
        width = 7 + 4 * N_STAGES
        stats = np.zeros((len(items), width))
        scores = np.full(len(items), np.nan)
        if keep:
            result = server.score_lines(cfg, [stdio_line(hyps[k], refs[k]) for k in keep])
            stats[keep] = np.asarray(result.stats, dtype=float).reshape(len(keep), width)
            scores[keep] = np.asarray(result.scores, dtype=float)

        corpus_from_stats = functools.partial(
            _pooled_corpus,
            alpha=info.alpha,
            beta=info.beta,
            gamma=info.gamma,
            delta=info.delta,
            weights=tuple(info.module_weights),
        )  # a module-level function: a result can be pickled (a multiprocessing pool returning it)

        # the pooled corpus score from the statistics with Meteor's formula in Python, the code the Ray merge and
        # the bootstrap use, so all three agree bit for bit; the jar's EVAL (result.corpus) may differ by 1 ulp
        exact = math.isfinite(info.alpha) and len(keep) > 0
        return Score(
            metric=self.name,
            corpus=corpus_from_stats(stats) if exact else float(result.corpus) if keep else math.nan,
            item_ids=[it.item_id for it in items],
            item_scores=scores,
            signature=signature,
            stats=stats,
            corpus_from_stats=corpus_from_stats if math.isfinite(info.alpha) else None,
            excluded=excluded,
        )


@register
class MeteorAlbum(_PooledMeteor):
    """METEOR as lichengunc/vist_eval (AREL, and the papers that reuse its numbers) computes it, per album."""

    name = "meteor-album"
    default_keying = Keying.ALBUM  # AREL / vist_eval: the album's stories are the references
    task = "hter"
    norm = False
    card = MetricCard(
        summary=(
            "METEOR 1.5 as lichengunc/vist_eval and AREL (eric-xw/AREL vist_eval/meteor) compute it: one "
            "story "
            "per album against all the album's human stories, statistics pooled over albums."
        ),
        definition=(
            "Meteor's stdio server started as 'java -jar meteor-1.5.jar - - -stdio -t hter' (English, hter "
            "parameters, no -norm): one 'SCORE ||| ref_1 ||| ... ||| hyp' line per album gives the "
            "statistics "
            "of the best reference (MeteorScorer.getMeteorStats(test, refs)); the per-album score is "
            "Meteor's "
            "score of those statistics and the corpus score is the score of their sum (one 'EVAL' line), NOT "
            "the mean of the album scores. Keyed by album by default."
        ),
        range="[0, 1].",
        signature_fields=(
            "nrefs, key (album by default), task:hter, norm:no, lang:en, agg:pooled, version:meteor-1.5"
        ),
        reproduces=(
            "eric-xw/AREL test_scores.json METEOR of its released prediction_test.json (references: each "
            "album's stories from PR_VIST.json.zip). AREL pooled 1,010 albums; the shared PR-VIST copy of "
            "the test set lacks 9 of them (10 test albums are missing there), so the pooled score differs a "
            "little: 0.353637 vs 0.353795 (IRL-XE-ss-init), 0.349053 vs 0.348813 (IRL-init-iter100), "
            "0.352645 vs 0.352446 (IRL-init-iter100-tahn), |diff| <= 2.4e-4. Equal to the jar's stdio "
            "protocol (-t hter) item by item, statistics included (tests/test_meteor.py); the pooled corpus "
            "score is Meteor's formula in Python on those statistics pooled as the jar's EVAL pools them "
            "(MeteorStats.addStats leaves out the one chunk of a perfectly matched album), within 1 ulp of the "
            "jar's EVAL (Java's Math.pow and C's pow may differ in the last bit) and bit for bit the Ray engine's."
        ),
        differences=(
            "vist_eval's wrapper says 'MSR VIST group's measurement' and uses -t hter without -norm, while "
            "pycocoevalcap (meteor-coco) uses -l en -norm; the two differ by several points. Texts are not "
            "tokenised (AREL's album_eval imports PTBTokenizer but never calls it). As in their wrapper, "
            "'|||' "
            "is removed from hypotheses; a line break (which would break their protocol) becomes a space."
            + _LONG_TEXT_NOTE
        ),
        citation=(
            "Wang et al., No Metrics Are Perfect: Adversarial Reward Learning for Visual Storytelling, ACL "
            "2018; "
            "code github.com/eric-xw/AREL, github.com/lichengunc/vist_eval. " + _CITATION
        ),
    )

    def signature_fields(self) -> dict[str, object]:
        return {"task": "hter", "norm": False, "lang": "en", "agg": "pooled", "version": METEOR_VERSION}


@register
class MeteorCoco(_PooledMeteor):
    """METEOR as pycocoevalcap 1.2's ``Meteor`` computes it (after its PTB tokenisation)."""

    name = "meteor-coco"
    task = ""
    norm = True
    card = MetricCard(
        summary="METEOR 1.5 exactly as pycocoevalcap 1.2 (COCOEvalCap) computes it, on PTB-tokenised text.",
        definition=(
            "Texts tokenised by pycocoevalcap's PTBTokenizer (Stanford CoreNLP 3.4.1, lower-cased, "
            "punctuation "
            "tokens removed), then Meteor's stdio server 'java -jar meteor-1.5.jar - - -stdio -l en -norm' "
            "(default task: alpha 0.85, beta 0.2, gamma 0.6, delta 0.75; weights 1.0/0.6/0.8/0.6): one SCORE "
            "line per item (best reference), per-item score = Meteor's score of its statistics, corpus "
            "score = "
            "the score of the pooled statistics (the final EVAL line), not the mean of item scores."
        ),
        range="[0, 1].",
        signature_fields=(
            "nrefs, key, tok:ptb-coco, task:default, norm:yes, lang:en, agg:pooled, version:meteor-1.5"
        ),
        reproduces=(
            "pycocoevalcap 1.2 Meteor().compute_score after PTBTokenizer().tokenize, equal to 1e-9 corpus "
            "and per item (tests/test_meteor.py); on TAPM's ours.json, all 1,999 test sequences: "
            "0.11909292788829454, pycocoevalcap's value, to 1e-15 (the corpus score is Meteor's formula in "
            "Python on the statistics pooled as the jar's EVAL pools them, MeteorStats.addStats leaving out the "
            "one chunk of a perfectly matched item: within 1 ulp of the jar's EVAL, bit for bit the Ray engine's)."
        ),
        differences=(
            "pycocoevalcap writes one text per line to the jar: a line break inside a text breaks its "
            "protocol "
            "(here it is a space; PTB tokenisation already removes them; see bleu-4 for \\r, U+2028 and the other "
            "characters its tokenizer also ends a line at). Scores differ from meteor-album "
            "(task hter, no -norm) and meteor-vist (hter, no -norm, max-mean)." + _LONG_TEXT_NOTE
            + " Words are counted for these limits as Meteor's -norm splits them: '_', '/', '@' and most other "
            "symbols, and CJK or Greek characters, are words of their own (\"dog_dog\" is three)."
        ),
        citation=(
            "Chen et al., Microsoft COCO Captions: Data Collection and Evaluation Server, arXiv:1504.00325 "
            "(2015); code github.com/salaniz/pycocoevalcap (1.2). " + _CITATION
        ),
    )

    def signature_fields(self) -> dict[str, object]:
        return {
            "tok": "ptb-coco",
            "task": "default",
            "norm": True,
            "lang": "en",
            "agg": "pooled",
            "version": METEOR_VERSION,
        }

    def _texts(self, items: Sequence[Item]) -> tuple[list[str], list[list[str]]]:
        from vistkit.metrics.coco import ptb_tokenize_cached

        texts = [it.hypothesis.text for it in items]
        for it in items:
            texts.extend(r.text for r in it.references)
        tokens = iter(ptb_tokenize_cached(texts))
        hyps = [next(tokens) for _ in items]
        refs = [[next(tokens) for _ in it.references] for it in items]
        return hyps, refs


# ------------------------------------------------------------------------------------------------ functions
def _as_set(stories: StorySet | Sequence[Story] | None) -> StorySet | None:
    if stories is None or isinstance(stories, StorySet):
        return stories
    return StorySet(stories)


def meteor_vist_score(
    hypotheses: StorySet | Sequence[Story],
    references: StorySet | Sequence[Story],
    *,
    key: Keying | str | None = None,
    template: Sequence[str] | None = None,
    drop_non_ascii: bool = False,
) -> Score:
    """``meteor-vist`` (the 2018 challenge's METEOR); pass ``template`` to score the challenge's sequences."""
    metric = get_metric("meteor-vist", drop_non_ascii=drop_non_ascii)
    return metric.score(
        _as_set(hypotheses) or StorySet([]),
        _as_set(references),
        key=key,
        template=template,
        require_all=template is not None,
    )


def meteor_album_score(
    hypotheses: StorySet | Sequence[Story],
    references: StorySet | Sequence[Story],
    *,
    key: Keying | str | None = None,
) -> Score:
    """``meteor-album`` (vist_eval / AREL): keyed by album unless ``key`` is given."""
    return get_metric("meteor-album").score(_as_set(hypotheses) or StorySet([]), _as_set(references), key=key)


def meteor_coco_score(
    hypotheses: StorySet | Sequence[Story],
    references: StorySet | Sequence[Story],
    *,
    key: Keying | str | None = None,
) -> Score:
    """``meteor-coco`` (pycocoevalcap 1.2)."""
    return get_metric("meteor-coco").score(_as_set(hypotheses) or StorySet([]), _as_set(references), key=key)
