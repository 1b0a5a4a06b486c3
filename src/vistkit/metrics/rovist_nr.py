"""RoViST-NR: non-redundancy of a story (Wang et al., Findings of NAACL 2022, Sec. 3.3), as dHM uses it for R.

``rovist-nr`` reproduces the official code: usydnlp/rovist ``scripts/non_redun_scorer.py`` (``jaccard_sim``)
in the form dHM runs it (akskuchi/dHM-visual-storytelling ``evaluate/eval_C_R.py``, ``eval_repetition``),
which made the committed ``data/scores/{vist,vwp}/*_R.csv``. Step by step (every quirk is kept):

1. Sentences: ``nltk.sent_tokenize(story)`` (NLTK 3.8.1 English Punkt, `vistkit.text.sentences`; dHM's
   ``evaluate/requirements.txt`` pins ``nltk==3.8.1``).
2. Tokens: ``nltk.word_tokenize(sentence)[:-1]``, i.e. Punkt is run again on each sentence and the Treebank
   tokens of the result are taken (this re-split matters for 4 dHM sentences ending in ``."`` + ``.``); the
   LAST token of every sentence is dropped (meant to drop the final punctuation, so a sentence without one
   loses its last word instead).
3. Inter-sentence: for every pair (earlier sentence j, sentence i), ratio = number of EQUAL TOKEN PAIRS
   (``sum over a in s_i, b in s_j of [a == b]``, a multiset product, not a set intersection) divided by the
   size of the union of the two token SETS. Pairs whose union is empty (both sentences had <= 1 token) are
   skipped (dHM's guard; the RoViST script would divide by zero).
4. Intra-sentence: each sentence's tokens are cut into consecutive non-overlapping 4-token blocks, and every
   block is compared with the next one (block k vs k+1, the last may be shorter; no pair when the sentence has
   <= 4 tokens) with the same pair-count / set-union ratio.
5. NR = 1 - mean(mean(inter), mean(intra)), with mean(intra) = 0 when there is no intra pair (the code's
   "sentences are way too short" branch). Means are numpy's (``np.mean``), as in the code.
6. No inter pair (a one-sentence story, or every pair skipped): the code's mean of nothing is NaN and dHM
   drops the story from the CSV; we mark it undefined (NaN) with the reason in ``Score.excluded``.

Paper vs code: the paper describes the similarity as the Jaccard similarity |A ∩ B| / |A ∪ B| of the two token sets
(RoViST Eq. 7; dHM Sec. 3.1 likewise), and says the score lies between 0 and 1. The code's numerator counts equal
pairs, so a repeated word counts many times: the ratio can exceed 1 (``"the the the"`` vs ``"the"``: 3 / 1) and NR
can go below 0; it never exceeds 1. ``rovist-nr`` follows the code (it reproduces the published numbers);
``rovist-nr-jaccard`` follows the paper: the true set-Jaccard |set(a) ∩ set(b)| / |set(a) ∪ set(b)| in both places,
everything else unchanged, so every ratio is in [0, 1] and so is NR. The two agree on a story unless a token shared
by two compared sentences (or blocks) occurs more than once in one of them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError
from vistkit.metrics.base import Item, Metric, MetricCard, Score, mean_score, progress_items, register
from vistkit.text.sentences import PUNKT_MODEL, sent_tokenize
from vistkit.text.tokenize import word_tokenize

__all__ = [
    "BLOCK",
    "RovistNR",
    "RovistNRJaccard",
    "nr_components",
    "rovist_nr_score",
    "rovist_nr_story",
    "sentence_tokens",
]

BLOCK = 4
"""The intra-sentence block length (``--intra_sent_ngram_len`` 4 in RoViST's code; its paper says only
"non-overlapping n-grams", Sec. 3.3; dHM's code and paper, Sec. 3.1, use 4)."""

_UNDEFINED_ONE = "fewer than two sentences: RoViST-NR has no inter-sentence pair (dHM drops such stories)"
_UNDEFINED_EMPTY = (
    "no inter-sentence pair with a non-empty token union (every sentence has at most one token); "
    "RoViST-NR is undefined (dHM drops such stories)"
)


# --------------------------------------------------------------------------------------------------- core
def sentence_tokens(sentences: Sequence[str]) -> list[list[str]]:
    """Step 2: ``word_tokenize(sentence)[:-1]`` per sentence (NLTK's default runs Punkt again on it)."""
    return [word_tokenize(sentence)[:-1] for sentence in sentences]


def _pair_count_ratio(a: list[str], b: list[str]) -> float | None:
    """Official similarity: equal (x, y) pairs over |set(a) ∪ set(b)|; None when the union is empty."""
    return _Sentence(a).pair_count_ratio(_Sentence(b))


def _set_jaccard(a: list[str], b: list[str]) -> float | None:
    """Set-Jaccard |A ∩ B| / |A ∪ B|; None when the union is empty."""
    return _Sentence(a).jaccard(_Sentence(b))


class _Sentence:
    """A sentence's tokens as a multiset, counted once (the same integers as the code's ``list.count`` loop and
    set union, so every ratio is the same float)."""

    __slots__ = ("counts", "types")

    def __init__(self, tokens: list[str]) -> None:
        counts: dict[str, int] = {}
        for t in tokens:
            counts[t] = counts.get(t, 0) + 1
        self.counts = counts
        self.types = counts.keys()

    def pair_count_ratio(self, other: _Sentence) -> float | None:
        shared = self.types & other.types
        union = len(self.counts) + len(other.counts) - len(shared)
        if union == 0:
            return None
        # sum over x in a, y in b of [x == y] = sum over shared types of count_a * count_b
        return sum(self.counts[t] * other.counts[t] for t in shared) / union

    def jaccard(self, other: _Sentence) -> float | None:
        shared = len(self.types & other.types)
        union = len(self.counts) + len(other.counts) - shared
        return None if union == 0 else shared / union


def _inter_ratios(sentences: Sequence[_Sentence], *, jaccard: bool) -> Iterator[float]:
    """The inter-sentence ratios in the code's order (i = 1.., j = 0..i-1), skipping empty unions."""
    for i in range(1, len(sentences)):
        a = sentences[i]
        for j in range(i):
            r = a.jaccard(sentences[j]) if jaccard else a.pair_count_ratio(sentences[j])
            if r is not None:  # dHM: `if union == 0: continue`
                yield r


def _intra_ratios(tokens: Sequence[list[str]], *, jaccard: bool) -> list[float]:
    """Block k vs block k + 1 of every sentence (linear in the story's length)."""
    intra: list[float] = []
    for words in tokens:
        for start in range(0, len(words), BLOCK):
            block, following = words[start : start + BLOCK], words[start + BLOCK : start + 2 * BLOCK]
            if not following:
                continue
            a, b = _Sentence(block), _Sentence(following)
            r = a.jaccard(b) if jaccard else a.pair_count_ratio(b)
            if r is not None:  # never None here (following is non-empty); kept as in dHM
                intra.append(r)
    return intra


def nr_components(tokens: Sequence[list[str]], *, jaccard: bool = False) -> tuple[list[float], list[float]]:
    """The inter- and intra-sentence ratios of a story given its per-sentence tokens (steps 3-4).

    Inter: pairs (j, i) with j < i in the code's order (i = 1.., j = 0..i-1); intra: block k vs block k + 1 of
    every sentence. ``jaccard=True`` uses set-Jaccard instead of the official pair count. (The metric itself
    never holds the quadratic list of inter ratios: see `rovist_nr_story`.)
    """
    return (
        list(_inter_ratios([_Sentence(t) for t in tokens], jaccard=jaccard)),
        _intra_ratios(tokens, jaccard=jaccard),
    )


#: values summed by one numpy call at the leaves of the pairwise recursion (numpy sums a contiguous array with
#: the same recursion, so the leaf size does not change a bit; it bounds the memory held: 128 KB)
_LEAF = 1 << 14
#: from this many sentences on, the inter-sentence ratios are made a row of numpy arrays at a time (the same
#: integers divided, so the same floats) instead of one Python pair at a time: 20,000 sentences took ~150 s
VECTOR_SENTENCES = 32


class _Values:
    """Float64 values arriving as arrays (an iterator of arrays); `take` returns the next ``k`` as one array."""

    def __init__(self, arrays: Iterator[np.ndarray]) -> None:
        self._arrays = arrays
        self._head = np.zeros(0)
        self._at = 0

    def take(self, k: int) -> np.ndarray:
        parts = []
        while k:
            if self._at == len(self._head):
                nxt = next(self._arrays, None)
                if nxt is None:
                    raise AssertionError("streamed_mean: fewer values than counted")
                self._head, self._at = np.asarray(nxt, dtype=np.float64).ravel(), 0
                continue
            piece = self._head[self._at : self._at + k]
            self._at += len(piece)
            k -= len(piece)
            parts.append(piece)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def exhausted(self) -> bool:
        while self._at == len(self._head):
            nxt = next(self._arrays, None)
            if nxt is None:
                return True
            self._head, self._at = np.asarray(nxt, dtype=np.float64).ravel(), 0
        return False


def _pairwise_sum(n: int, values: _Values) -> float:
    """numpy's pairwise summation (``pairwise_sum`` in its add loops: 8 accumulators up to 128 values, halves at
    multiples of 8 above) of the next ``n`` values: its recursion down to `_LEAF` values, numpy itself on each
    leaf. The same float as ``np.add.reduce`` of the whole array, holding one leaf at a time."""
    if n <= _LEAF:
        return float(np.add.reduce(values.take(n))) if n else 0.0
    half = n // 2
    half -= half % 8
    first = _pairwise_sum(half, values)
    return first + _pairwise_sum(n - half, values)


def _chunks(values: Iterator[float], size: int = 4096) -> Iterator[np.ndarray]:
    while True:
        block = np.fromiter(itertools.islice(values, size), dtype=np.float64)
        if not block.size:
            return
        yield block


def streamed_mean(n: int, values: Iterator[Any], *, arrays: bool = False) -> float:
    """``float(np.mean(all values))`` for ``n`` values, bit for bit, without holding them (NaN for none).
    ``values``: floats, or (``arrays=True``) arrays of floats whose concatenation is the sequence."""
    if n == 0:
        return math.nan
    stream = _Values(values if arrays else _chunks(values))
    total = _pairwise_sum(n, stream)
    if not stream.exhausted():
        raise AssertionError("streamed_mean: more values than counted")
    return total / n


class _Postings:
    """The sentences a word occurs in so far (ascending) and its count in each, in growable arrays."""

    __slots__ = ("counts", "length", "sentences")

    def __init__(self) -> None:
        self.sentences = np.zeros(4, dtype=np.int64)
        self.counts = np.zeros(4, dtype=np.int64)
        self.length = 0

    def add(self, sentence: int, count: int) -> None:
        if self.length == len(self.sentences):
            self.sentences = np.resize(self.sentences, 2 * self.length)
            self.counts = np.resize(self.counts, 2 * self.length)
        self.sentences[self.length] = sentence
        self.counts[self.length] = count
        self.length += 1


def _inter_ratio_rows(tokens: Sequence[list[str]], *, jaccard: bool) -> Iterator[np.ndarray]:
    """`_inter_ratios` as one array per sentence i = 1.. (its ratios against j = 0..i-1, empty unions skipped),
    from per-word postings: numerator (equal pairs, or shared types for ``jaccard``) and union are the same
    integers as `_Sentence`'s, and one division of two exact integers gives the same float. Memory: O(i) per row.

    Sentences with the same tokens (the same multiset) form one class, numbered by first occurrence; the ratios
    are computed against each earlier class once and spread to the sentences of the class. A story of 33,000
    copies of one short sentence ("A. A. A. ...", 100,000 characters) computed its 5.5 * 10^8 pairs one by one
    in numpy (~30 s); now each row is a copy of one number. The values and their order are unchanged."""
    postings: dict[str, _Postings] = {}  # word -> the classes holding it, with its count in each
    class_ids: dict[frozenset[tuple[str, int]], int] = {}
    class_of = np.zeros(len(tokens), dtype=np.int64)
    sizes = np.zeros(len(tokens), dtype=np.int64)  # distinct tokens per class
    for i, words in enumerate(tokens):
        counts: dict[str, int] = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        key = frozenset(counts.items())
        k = len(class_ids)  # the classes of sentences 0..i-1
        c = class_ids.setdefault(key, k)
        class_of[i] = c
        if i:
            shared = np.zeros(k, dtype=np.int64)
            pairs = np.zeros(k, dtype=np.int64)
            for w, n in counts.items():
                post = postings.get(w)
                if post is not None:
                    js = post.sentences[: post.length]
                    shared[js] += 1  # a class occurs once in a word's postings
                    pairs[js] += post.counts[: post.length] * n
            union = sizes[:k] + len(counts) - shared
            empty = union == 0  # dHM: `if union == 0: continue`
            ratio = (shared if jaccard else pairs) / np.where(empty, 1, union)
            if k == i:  # every earlier sentence is a class of its own: class j is sentence j
                row = ratio
            elif k == 1:
                row = np.full(i, ratio[0])
            else:
                row = ratio.take(class_of[:i])
            yield row[~empty.take(class_of[:i])] if empty.any() else row
        if c == k:  # a new class
            sizes[c] = len(counts)
            for w, n in counts.items():
                postings.setdefault(w, _Postings()).add(c, n)


def rovist_nr_story(sentences: Sequence[str], *, jaccard: bool = False) -> tuple[float, str | None]:
    """NR of one story from its sentences (step 5): ``(value, None)``, or ``(nan, reason)`` when undefined.

    Memory is linear in the story: the quadratic number of inter-sentence ratios is averaged as it is made,
    with numpy's own summation order, so the value equals the code's ``np.mean`` of the list to the last bit.
    """
    tokens = sentence_tokens(sentences)
    bags = [_Sentence(t) for t in tokens]
    empty = sum(1 for t in tokens if not t)
    # every pair j < i except those of two empty sentences (an empty union, skipped)
    n_inter = len(tokens) * (len(tokens) - 1) // 2 - empty * (empty - 1) // 2
    if n_inter == 0:
        return math.nan, (_UNDEFINED_ONE if len(sentences) < 2 else _UNDEFINED_EMPTY)
    # np.mean (pairwise summation) as the code does, so values match it to the last bit.
    if len(tokens) >= VECTOR_SENTENCES:
        inter_mean = streamed_mean(n_inter, _inter_ratio_rows(tokens, jaccard=jaccard), arrays=True)
    else:
        inter_mean = streamed_mean(n_inter, _inter_ratios(bags, jaccard=jaccard))
    intra = _intra_ratios(tokens, jaccard=jaccard)
    intra_mean = float(np.mean(intra)) if intra else 0.0
    return 1.0 - float(np.mean([inter_mean, intra_mean])), None


# --------------------------------------------------------------------------------------------------- metric
_DEFINITION = (
    "RoViST Sec. 3.3 (Eq. 7 for sim). Sentences = NLTK 3.8.1 Punkt; tokens = NLTK word_tokenize of each "
    "sentence minus its last token. "
    "inter = mean over sentence pairs (j < i) of sim(s_i, s_j); intra = mean over each sentence's "
    "consecutive non-overlapping 4-token blocks of sim(block k, block k+1), 0 when there is none; "
    "NR = 1 - (inter + intra) / 2. Pairs whose token-set union is empty are skipped; a story with no inter "
    "pair (one sentence) is undefined."
)
_CITATION = (
    "Wang, Han & Poon, RoViST: Learning Robust Metrics for Visual Storytelling, Findings of NAACL "
    "2022; as used for R in Surikuchi, Fernández & Pezzelle, Not (yet) the whole story: Evaluating Visual "
    "Storytelling Requires More than Measuring Coherence, Grounding, and Repetition, Findings of EMNLP 2024."
)


@register
class RovistNR(Metric):
    """RoViST-NR exactly as the official code (and dHM's ``eval_C_R.py``) computes it."""

    name: ClassVar[str] = "rovist-nr"
    higher_is_better: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = None  # the pair count can exceed the union: NR < 0 is possible
    upper_bound: ClassVar[float | None] = 1.0
    jaccard: ClassVar[bool] = False
    card: ClassVar[MetricCard] = MetricCard(
        summary="Non-redundancy: 1 minus the word overlap between sentences and between 4-token blocks "
        "within sentences (official RoViST / dHM code).",
        definition=_DEFINITION + " sim(a, b) = number of equal token pairs (x in a, y in b, x == y) / "
        "|set(a) ∪ set(b)|.",
        range="At most 1 (no repetition); NOT bounded below: a word repeated k times in one sentence and "
        "once in another contributes k pairs over a union that counts it once, so a ratio can exceed 1 and "
        "NR can be negative (in practice 0.29 to 1 on the dHM VIST/VWP stories). Higher = less redundant.",
        signature_fields="variant (pairs), sentence source (split = Punkt on the text, as dHM; source = the "
        "reader's sentences), sentence splitter.",
        reproduces="akskuchi/dHM-visual-storytelling evaluate/eval_C_R.py (eval_repetition) = usydnlp/rovist "
        "scripts/non_redun_scorer.py plus dHM's union-0 guard: all 11,124 committed R scores "
        "(data/scores/{vist,vwp}/*_R.csv) to 1e-9, e.g. 48454 -> 0.9658162011308464, 50392 -> "
        "0.9197617252029017; the 158 stories missing from those CSVs are exactly the one-sentence stories.",
        differences="The paper calls the similarity Jaccard (|A ∩ B| / |A ∪ B|, RoViST Sec. 3.3, Eq. 7) and "
        "the score 'between 0 and 1' (as dHM Sec. 3.1); the code counts equal token pairs over the union of "
        "the sets, which is not Jaccard for repeated words (see rovist-nr-jaccard) and can go below 0. "
        "The code also drops the last token of each sentence even when it is a word, and sets intra to 0 "
        "(not undefined) when no sentence has more than 4 tokens; both kept. The RoViST script divides by "
        "zero on two sentences of at most one token each; dHM skips those pairs, and we follow dHM.",
        citation=_CITATION,
    )

    def __init__(self, *, sentences: str = "split") -> None:
        if sentences not in ("split", "source"):
            raise InputError(f"sentences must be 'split' or 'source', not {sentences!r}")
        self.sentences = sentences

    def signature_fields(self) -> dict[str, object]:
        return {
            "variant": "jaccard" if self.jaccard else "pairs",
            "sent": self.sentences,
            "split": PUNKT_MODEL,
        }

    def story_sentences(self, story: Story) -> list[str]:
        """``split``: Punkt on the text (dHM); ``source``: the reader's sentences when known, else Punkt."""
        if self.sentences == "source" and story.sentences is not None:
            return list(story.sentences)
        return sent_tokenize(story.text)

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per story its NR (`rovist_nr_story`, RoViST Sec. 3.3; the overlap is Eq. 7's Jaccard only with ``jaccard``),
        corpus = mean; an undefined story is excluded."""
        values: list[float] = []
        excluded: dict[str, str] = {}
        for item in progress_items(items):
            value, reason = rovist_nr_story(self.story_sentences(item.hypothesis), jaccard=self.jaccard)
            values.append(value)
            if reason is not None:
                excluded[item.item_id] = reason
        return mean_score(self.name, [i.item_id for i in items], values, signature, excluded=excluded)


@register
class RovistNRJaccard(RovistNR):
    """RoViST-NR with the paper's true set-Jaccard similarity: bounded in [0, 1]."""

    name: ClassVar[str] = "rovist-nr-jaccard"
    lower_bound: ClassVar[float | None] = 0.0
    upper_bound: ClassVar[float | None] = 1.0
    jaccard: ClassVar[bool] = True
    card: ClassVar[MetricCard] = MetricCard(
        summary="Non-redundancy with true set-Jaccard overlap (the RoViST paper's definition, Eq. 7); in "
        "[0, 1].",
        definition=_DEFINITION + " sim(a, b) = |set(a) ∩ set(b)| / |set(a) ∪ set(b)|.",
        range="[0, 1]: every similarity is a Jaccard index in [0, 1], so both means and NR are too. "
        "Higher = less redundant.",
        signature_fields="variant (jaccard), sentence source, sentence splitter.",
        reproduces="Not an official number: the corrected definition. Equals rovist-nr on every story in "
        "which no token shared by two compared sentences (or blocks) occurs twice in either of them; on the "
        "dHM stories that is rare (corpus means official -> jaccard: VIST human 0.9306 -> 0.9469, VIST LLaVA "
        "0.8185 -> 0.9033, VWP human 0.8815 -> 0.9195, VWP LLaVA 0.8176 -> 0.8982), so the human-model gap "
        "shrinks from 0.112 to 0.044 (VIST) and from 0.064 to 0.021 (VWP).",
        differences="Only the similarity differs from rovist-nr (official): the official numerator counts "
        "equal token PAIRS, so 'the the the' vs 'the' scores 3 / 1 = 3 there and 1 here; the official score "
        "can therefore drop below 0, this one cannot. Sentence split, the dropped last token, skipped empty "
        "unions, the 4-token blocks, intra = 0 without blocks and undefined one-sentence stories are as in "
        "the official code.",
        citation=_CITATION,
    )


def rovist_nr_score(
    stories: StorySet | Sequence[Story], *, variant: str = "official", sentences: str = "split"
) -> Score:
    """Functional face: RoViST-NR of each story (reference-free, keyed by story id).

    ``variant``: ``"official"`` (``rovist-nr``, the code's pair count; reproduces dHM's R) or ``"jaccard"``
    (``rovist-nr-jaccard``, set-Jaccard, in [0, 1]). ``sentences``: ``"split"`` (Punkt on the text, as dHM) or
    ``"source"`` (the reader's sentences when known).
    """
    classes: dict[str, type[RovistNR]] = {"official": RovistNR, "jaccard": RovistNRJaccard}
    if variant not in classes:
        raise InputError(f"variant must be 'official' or 'jaccard', not {variant!r}")
    stories = stories if isinstance(stories, StorySet) else StorySet(stories)
    return classes[variant](sentences=sentences).score(stories, key="story")
