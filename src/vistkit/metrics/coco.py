"""The coco caption-evaluation family, exactly as pycocoevalcap 1.2 computes it: BLEU-1..4, ROUGE-L, CIDEr-D.

The published VIST numbers (AREL, TAPM, most of the field) come from pycocoevalcap's ``COCOEvalCap.evaluate``:
its PTB tokeniser (Stanford CoreNLP 3.4.1 ``PTBTokenizer -preserveLines -lowerCase``, then punctuation tokens
removed), then ``Bleu(4)``, ``Meteor()``, ``Rouge()`` and ``Cider()``. This module reproduces those numbers
(corpus and per item, to 1e-9) with its own vectorised code:

- tokenisation: one jar call for all texts of a run (`ptb_tokenize_cached`; pycocoevalcap calls the jar once
  for the references and once for the hypotheses of every system), cached per text so that the second metric
  of a run, and the second system scored against the same references, reuse it;
- n-gram statistics of every text at once with numpy (`_NgramTable`), shared by BLEU and CIDEr-D;
- ROUGE-L with a bit-parallel LCS (Hyyrö 2004) instead of the dynamic-programming table.

``meteor-coco`` (METEOR 1.5 ``-l en -norm``, pycocoevalcap's corpus aggregation) lives in its own module.
SPICE and BLEURT are registered as unavailable (see `SPICE_REASON`, `BLEURT_REASON`).
"""

from __future__ import annotations

import array
import math
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import MissingDependencyError, warn
from vistkit.metrics.base import (
    Item,
    Metric,
    MetricCard,
    Score,
    corpus_mean,
    get_metric,
    register,
    register_unavailable,
)

SPICE_REASON = (
    "spice is unavailable in vistkit: SPICE parses every text with Stanford CoreNLP 3.6.0 (about 1 GB of models, "
    "Java 8), which vistkit neither ships nor downloads; on a machine with Java and internet, pip install "
    "pycocoevalcap==1.2 and call pycocoevalcap.spice.spice.Spice().compute_score(refs, hyps) (it fetches CoreNLP "
    "on first use), or score with cider-d or meteor-coco in vistkit"
)
BLEURT_REASON = (
    "bleurt is unavailable in vistkit: BLEURT is Google's TensorFlow model and needs a BLEURT checkpoint (such "
    "as BLEURT-20); its only PyTorch port on PyPI, bleurt-pytorch 0.0.1 (2024), does not load with "
    "transformers 5; with TensorFlow, install Google's bleurt package and run python -m bleurt.score_files "
    "-candidate_file=HYP.txt -reference_file=REF.txt -bleurt_checkpoint=DIR, or score with bertscore or "
    "meteor-coco in vistkit"
)
register_unavailable("spice", SPICE_REASON)
register_unavailable("bleurt", BLEURT_REASON)

COCO_VERSION = "pycocoevalcap-1.2"
TOKENISER = "ptb-coco"
MAX_N = 4
#: table entries ((text, gram) counts) per part of a computation (`_NgramTable.item_parts`): ~100 MB of arrays
PART_ENTRIES = 1_000_000
BLEU_SMALL = 1e-9  # pycocoevalcap's bleu_scorer: added to denominators
BLEU_TINY = 1e-15  # ... and to numerators, "so that if guess is 0 still return 0"
ROUGE_BETA = 1.2
CIDER_SIGMA = 6.0
COCO_METRICS = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor-coco", "rouge-l", "cider-d")

#: what vistkit does where pycocoevalcap's own tokenisation breaks (shared by the coco cards)
_BREAKS_NOTE = (
    " pycocoevalcap replaces only '\\n' before its tokenizer, which also ends a line at '\\r', '\\r\\n', \\x0b, "
    "\\x0c, U+2028 and U+2029: such a text is split in two there and every later caption of the call is scored "
    "against the wrong references. vistkit replaces those characters by a space (pycocoevalcap's numbers for the "
    "text with a space there) and scores every story independently of the others in the batch "
    "(tests/test_probes_content_r7.py). A story and its references typed in different Unicode forms (accents as "
    "combining marks, NFD, against composed ones, NFC) are compared in NFC: the PTB tokenizer reads every text "
    "in NFC, where pycocoevalcap lost every accented word (NFC text, all of VIST, scores as in pycocoevalcap)."
)
_CITATION_COCO = (
    "Chen et al., Microsoft COCO Captions: Data Collection and Evaluation Server, arXiv:1504.00325 (2015); "
    "code: github.com/salaniz/pycocoevalcap (version 1.2)."
)


# ----------------------------------------------------------------------------------------------- tokenisation
_TOKEN_CACHE: dict[str, str] = {}
_TOKEN_CACHE_LIMIT = 400_000
#: bytes the cache holds, about (a text and its tokens, ~1 byte a character of VIST's ASCII, plus each entry's
#: overhead); at most `vistkit.limits.cache_bytes` (VISTKIT_CACHE_MB), so 400,000 long stories cannot hold GBs
_TOKEN_CACHE_BYTES = [0]
_ENTRY_OVERHEAD = 200
#: guards the two caches of this module (`_TOKEN_CACHE`, `_INPUTS_CACHE`): scorers may run in threads
_CACHE_LOCK = threading.RLock()


def ptb_tokenize_cached(texts: Sequence[str]) -> list[str]:
    """pycocoevalcap's PTB tokenisation of each text (lower-cased, punctuation removed), cached per text.

    All texts not seen before go to the jar in ONE call. Caching per text gives pycocoevalcap's exact output
    because ``-preserveLines`` tokenises each line on its own (the jar's only cross-line state, the direction
    of a double quote, only picks between two tokens that are both removed as punctuation). Threads may call it
    at once: the cache is read and changed under a lock (another thread may empty it for its size bound while the
    jar runs), and the jar runs outside it.
    """
    from vistkit.limits import cache_bytes

    with _CACHE_LOCK:
        known = {t: _TOKEN_CACHE[t] for t in texts if t in _TOKEN_CACHE}
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if not missing:
        return [known[t] for t in texts]
    tokenized = _ptb_backend(missing)
    if len(tokenized) != len(missing):
        raise RuntimeError(f"the PTB tokeniser returned {len(tokenized)} lines for {len(missing)} texts")
    new = dict(zip(missing, tokenized, strict=True))
    out = [new[t] if t in new else known[t] for t in texts]
    size = sum(len(t) + len(k) + _ENTRY_OVERHEAD for t, k in new.items())
    budget = cache_bytes()
    with _CACHE_LOCK:
        if len(_TOKEN_CACHE) + len(new) > _TOKEN_CACHE_LIMIT or _TOKEN_CACHE_BYTES[0] + size > budget:
            _TOKEN_CACHE.clear()
            _TOKEN_CACHE_BYTES[0] = 0
        if size <= budget:
            added = {t: k for t, k in new.items() if t not in _TOKEN_CACHE}  # another thread's, counted once
            _TOKEN_CACHE.update(added)
            _TOKEN_CACHE_BYTES[0] += sum(len(t) + len(k) + _ENTRY_OVERHEAD for t, k in added.items())
    return out


def pretokenize(metric: object, texts: Iterable[str]) -> None:
    """Tokenise ``texts`` in one jar call ahead of many small calls of a coco ``metric`` (bleu, rouge-l, cider-d),
    which then find them cached (`vistkit.meta.scoring` scores a pairs file in rounds: one jar start, ~0.1 s, per
    round); nothing for another metric."""
    if isinstance(metric, _CocoMetric):
        ptb_tokenize_cached(list(dict.fromkeys(texts)))


def _ptb_backend(texts: list[str]) -> list[str]:
    """`vistkit.text.ptb.ptb_tokenize` when present, else pycocoevalcap's ``PTBTokenizer`` (one jar call)."""
    try:
        from vistkit.text.ptb import ptb_tokenize
    except ImportError:
        return _pycocoevalcap_ptb(texts)
    return list(ptb_tokenize(list(texts)))


def _pycocoevalcap_ptb(texts: list[str]) -> list[str]:
    if shutil.which("java") is None:
        raise MissingDependencyError(
            "the coco metrics need Java (java on PATH) for the PTB tokeniser; install a JRE (8 or newer)"
        )
    try:
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    except ImportError:
        raise MissingDependencyError(
            "the coco metrics need pycocoevalcap's tokeniser jar; pip install pycocoevalcap==1.2"
        ) from None
    out = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    return [out[i][0] for i in range(len(texts))]


# --------------------------------------------------------------------------------------------------- inputs
class CocoInputs:
    """Tokenised hypotheses and references of one evaluated set, with its statistics computed once, lazily."""

    def __init__(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        if len(hypotheses) != len(references):
            raise ValueError("one list of references per hypothesis")
        self.hypotheses = list(hypotheses)
        self.references = [list(r) for r in references]
        self._cache: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.hypotheses)

    def _memo(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self._cache:
            self._cache[name] = compute()
        return self._cache[name]

    def table(self) -> _NgramTable:
        """The n-gram table of the hypotheses and references (built once)."""
        return self._memo("table", lambda: _NgramTable(self.hypotheses, self.references))

    def bleu_stats(self) -> np.ndarray:
        """Per-item BLEU statistics (one row per item), computed once."""
        return self._memo("bleu", lambda: bleu_stats(self.table()))

    def rouge_l(self) -> np.ndarray:
        """Per-item ROUGE-L F-measures (Lin 2004, Eqs. 2-4), computed once."""
        return self._memo("rouge", lambda: rouge_l_item_scores(self.hypotheses, self.references))

    def cider_d(self) -> np.ndarray:
        """Per-item CIDEr-D scores, computed once (the idf is over this set's references)."""
        return self._memo("cider", lambda: cider_d_item_scores(self.table()))


_INPUTS_CACHE: OrderedDict[tuple[tuple[str, ...], tuple[tuple[str, ...], ...]], CocoInputs] = OrderedDict()
_INPUTS_CACHE_SIZE = 2  # a run scores one set with several metrics; tables are tens of MB


def coco_inputs(items: Sequence[Item]) -> CocoInputs:
    """The tokenised set for ``items``.

    The same texts give the same (cached) object, so the metrics of one run share the tokenisation and the
    n-gram statistics. More words than `vistkit.limits.max_ngram_words` are refused (`InputError`).
    """
    from vistkit.limits import too_many_ngram_words

    texts = [it.hypothesis.text for it in items]
    for it in items:
        texts.extend(r.text for r in it.references)
    tokenized = ptb_tokenize_cached(texts)
    # the table repeats a reference for each item it serves: counted as it holds them
    error = too_many_ngram_words(sum(len(t.split()) for t in tokenized))
    if error is not None:
        raise error
    tokens = iter(tokenized)
    hyps = tuple(next(tokens) for _ in items)
    refs = tuple(tuple(next(tokens) for _ in it.references) for it in items)
    key = (hyps, refs)
    with _CACHE_LOCK:
        found = _INPUTS_CACHE.get(key)
        if found is not None:
            _INPUTS_CACHE.move_to_end(key)
            return found
        inputs = CocoInputs(hyps, refs)
        _INPUTS_CACHE[key] = inputs
        while len(_INPUTS_CACHE) > _INPUTS_CACHE_SIZE:
            _INPUTS_CACHE.popitem(last=False)
    return inputs


# --------------------------------------------------------------------------------------------------- n-grams
# Sort-based uniques: numpy 2's hash-based np.unique is pathologically slow on these structured int64 keys.
def _unique_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.sort(a)
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    idx = np.flatnonzero(start)
    return s[idx], np.diff(np.append(idx, s.size))


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(a, kind="stable")
    s = a[order]
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    inverse = np.empty(a.size, dtype=np.int64)
    inverse[order] = np.cumsum(start) - 1
    return s[start], inverse


class _NgramTable:
    """The 1..4-gram counts of every hypothesis and reference of one evaluated set, as sorted sparse entries
    ``(text, gram, count)`` (pycocoevalcap's ``precook``: whitespace ``split()``).

    Texts ``0..N-1`` are the hypotheses (text i belongs to item i); the references follow, item by item. Gram
    ids are global over orders; ``order[g]`` is the n-gram order minus one.
    """

    def __init__(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        n_items = len(hypotheses)
        self.n_items = n_items
        self.n_refs = np.array([len(r) for r in references], dtype=np.int64)
        self.item_of_text = np.concatenate(
            [np.arange(n_items, dtype=np.int64), np.repeat(np.arange(n_items, dtype=np.int64), self.n_refs)]
        )
        # memory: a few int64 arrays per token, no per-token Python objects kept (1M tiny stories took 5.5 GB)
        self._texts = [*hypotheses, *(r for refs in references for r in refs)]
        vocab: dict[str, int] = {}
        ids_of = array.array("q")
        lengths = array.array("q")
        for text in self._texts:
            ws = text.split()
            lengths.append(len(ws))
            ids_of.extend([vocab.setdefault(w, len(vocab)) for w in ws])
        tok = np.frombuffer(ids_of, dtype=np.int64) if len(ids_of) else np.zeros(0, dtype=np.int64)
        self.lengths = np.frombuffer(lengths, dtype=np.int64) if len(lengths) else np.zeros(0, dtype=np.int64)
        n_texts = len(self._texts)
        text_of = np.repeat(np.arange(n_texts, dtype=np.int64), self.lengths)
        starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)
        remaining = self.lengths[text_of] - (np.arange(tok.size, dtype=np.int64) - starts[text_of])
        del starts
        v = max(len(vocab), 1)
        del vocab
        # (text, gram) keys with a multiplier fixed beforehand (at least the number of gram ids, which is at most
        # MAX_N per token), so each order's keys are made as soon as its grams are: the order of the keys, and so
        # the table, is the one that the exact number of gram ids gives
        bound = MAX_N * max(tok.size, 1) + 1
        keys: list[np.ndarray] = []
        orders: list[np.ndarray] = []
        first_pos: list[np.ndarray] = []  # a token position where each gram starts (for `gram_strings`)
        offset = 0
        ids = tok
        for k in range(1, MAX_N + 1):
            where = np.nonzero(remaining >= k)[0]
            if k == 1:
                local, n_k = tok, v
            else:
                code = ids[where] * v + tok[where + k - 1]
                uniq, local = _unique_inverse(code)
                del code
                n_k = uniq.size
                del uniq
                ids = np.full(tok.size, -1, dtype=np.int64)
                ids[where] = local
            keys.append(text_of[where] * bound + (local + offset))
            pos = np.zeros(n_k, dtype=np.int64)
            pos[local] = where
            first_pos.append(pos)
            orders.append(np.full(n_k, k - 1, dtype=np.int64))
            offset += n_k
            del where, local
        del ids, remaining, text_of
        self.n_grams = max(offset, 1)
        self.order = np.concatenate(orders) if orders else np.zeros(0, dtype=np.int64)
        all_keys = np.concatenate(keys)
        del keys
        uniq_keys, counts = _unique_counts(all_keys)
        del all_keys
        self.text = uniq_keys // bound
        self.gram = uniq_keys % bound
        del uniq_keys
        self.count = counts.astype(np.int64)
        self.is_hyp = self.text < n_items
        self.n_texts = n_texts
        self._gram_pos = np.concatenate(first_pos) if first_pos else np.zeros(0, dtype=np.int64)

    def gram_strings(self) -> list[str]:
        """Each gram id's words joined by one space (a key that is the same in every table)."""
        words = [w for text in self._texts for w in text.split()]
        return [
            " ".join(words[p : p + k + 1]) for p, k in zip(self._gram_pos.tolist(), self.order.tolist(), strict=True)
        ]

    def reference_document_frequency(self) -> np.ndarray:
        """Per gram id: how many items hold it in at least one of their references (CIDEr's df)."""
        g = self.n_grams
        df = np.zeros(g, dtype=np.int64)
        for part in self.item_parts():  # items are disjoint across parts: their counts add up exactly
            ref = ~part.is_hyp
            item_gram, _ = _unique_counts(part.item_of_text[part.text[ref]] * g + part.gram[ref])
            df += np.bincount(item_gram % g, minlength=g)
        return df.astype(float)

    def item_parts(self, max_entries: int | None = None) -> Iterator[_NgramTable]:
        """The table cut into runs of whole items of at most ``max_entries`` entries each (one item may have
        more), each a table of its own with the same gram ids: every per-item statistic of a part equals that
        of the whole table, while the temporary arrays of a computation stay the size of a part."""
        n = self.n_items
        max_entries = PART_ENTRIES if max_entries is None else max_entries
        if self.text.size <= max_entries or n <= 1:
            yield self
            return
        ref_start = np.concatenate(([0], np.cumsum(self.n_refs)))  # item i's references: texts n + ref_start[i]..
        hyp_end = np.searchsorted(self.text, np.arange(1, n + 1), side="left")  # entries of hyp texts < i
        ref_end = np.searchsorted(self.text, n + ref_start, side="left")  # entries of ref texts before item i
        # entries of items 0..c-1 (their hypotheses and references): a part's size is a difference of two
        ends = np.concatenate(([0], hyp_end)) + ref_end
        a = 0
        while a < n:
            b = max(a + 1, int(np.searchsorted(ends, ends[a] + max_entries, side="right")) - 1)
            yield self._items(a, b, hyp_end, ref_end, ref_start)
            a = b

    def _items(
        self, a: int, b: int, hyp_end: np.ndarray, ref_end: np.ndarray, ref_start: np.ndarray
    ) -> _NgramTable:
        """Items ``a..b-1`` as a table of their own (texts renumbered, gram ids kept)."""
        n = self.n_items
        part = object.__new__(_NgramTable)
        h0, h1 = (int(hyp_end[a - 1]) if a else 0), int(hyp_end[b - 1])
        r0, r1 = int(ref_end[a]), int(ref_end[b])
        m = b - a
        shift_ref = n + int(ref_start[a]) - m  # ref text t of the whole table is text t - shift_ref of the part
        part.n_items = m
        part.n_refs = self.n_refs[a:b]
        part.item_of_text = np.concatenate(
            [np.arange(m, dtype=np.int64), np.repeat(np.arange(m, dtype=np.int64), part.n_refs)]
        )
        part.lengths = np.concatenate(
            [self.lengths[a:b], self.lengths[n + int(ref_start[a]) : n + int(ref_start[b])]]
        )
        part.text = np.concatenate([self.text[h0:h1] - a, self.text[r0:r1] - shift_ref])
        part.gram = np.concatenate([self.gram[h0:h1], self.gram[r0:r1]])
        part.count = np.concatenate([self.count[h0:h1], self.count[r0:r1]])
        part.is_hyp = part.text < m
        part.n_texts = m + int(part.n_refs.sum())
        part.n_grams, part.order, part._gram_pos = self.n_grams, self.order, self._gram_pos
        part._texts = []
        return part


# --------------------------------------------------------------------------------------------------- BLEU
# Statistics columns: testlen, reflen (closest), guess_1..4, correct_1..4.
_BLEU_COLUMNS = 2 + 2 * MAX_N


def bleu_stats(table: _NgramTable) -> np.ndarray:
    """Per-item BLEU sufficient statistics (pycocoevalcap's ``cook_test`` with ``eff="closest"``).

    ``correct_k`` clips each hypothesis k-gram count by its largest count in any one reference (Papineni et
    al., 2002, Eq. 1); ``reflen`` is the reference length closest to the hypothesis length, the shorter on a
    tie. Computed one part of the items at a time (`_NgramTable.item_parts`: the same values, bounded memory).
    """
    parts = [_bleu_stats(part) for part in table.item_parts()]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _bleu_stats(table: _NgramTable) -> np.ndarray:
    n = table.n_items
    g = table.n_grams
    hyp = table.is_hyp
    h_item, h_gram, h_count = table.text[hyp], table.gram[hyp], table.count[hyp]
    r_item = table.item_of_text[table.text[~hyp]]
    r_key = r_item * g + table.gram[~hyp]
    r_count = table.count[~hyp]
    # the largest count of each (item, gram) over the item's references: sort by key then count, keep the last
    order = np.lexsort((r_count, r_key))
    r_key, r_count = r_key[order], r_count[order]
    last = np.ones(r_key.size, dtype=bool)
    last[:-1] = r_key[1:] != r_key[:-1]
    max_key, max_count = r_key[last], r_count[last]
    h_key = h_item * g + h_gram
    pos = np.searchsorted(max_key, h_key)
    pos_ok = np.minimum(pos, max(max_key.size - 1, 0))
    found = (pos < max_key.size) & (max_key[pos_ok] == h_key) if max_key.size else np.zeros(h_key.size, bool)
    clipped = np.where(found, np.minimum(h_count, max_count[pos_ok] if max_key.size else 0), 0)
    correct = np.bincount(
        h_item * MAX_N + table.order[h_gram], weights=clipped, minlength=n * MAX_N
    ).reshape(n, MAX_N)

    stats = np.zeros((n, _BLEU_COLUMNS), dtype=np.int64)
    testlen = table.lengths[:n]
    stats[:, 0] = testlen
    ref_lengths = np.split(table.lengths[n:], np.cumsum(table.n_refs)[:-1]) if n else []
    for i, lens in enumerate(ref_lengths):
        t = int(testlen[i])
        stats[i, 1] = min((abs(int(rl) - t), int(rl)) for rl in lens)[1]
    for k in range(MAX_N):
        stats[:, 2 + k] = np.maximum(0, testlen - k)
    stats[:, 2 + MAX_N :] = np.rint(correct).astype(np.int64)
    return stats


def bleu_from_counts(
    testlen: int, reflen: int, guess: Sequence[int], correct: Sequence[int], n: int
) -> float:
    """BLEU-n from (summed) statistics, with pycocoevalcap's arithmetic (Papineni et al., 2002, Eq. 2).

    The geometric mean is built as a running product ``prod_k (correct_k + tiny) / (guess_k + small)`` raised
    to ``1/n``, and the brevity penalty ``exp(1 - r/c)`` is applied when ``(c + tiny) / (r + small) < 1``.
    """
    bleu = 1.0
    for k in range(n):
        bleu *= (float(correct[k]) + BLEU_TINY) / (float(guess[k]) + BLEU_SMALL)
    value = bleu ** (1.0 / n)
    ratio = (testlen + BLEU_TINY) / (reflen + BLEU_SMALL)
    if ratio < 1:
        value *= math.exp(1 - 1 / ratio)
    return value


def bleu_corpus_from_stats(stats: np.ndarray, *, n: int) -> float:
    """Corpus BLEU-n of any selection of item rows: the statistics are summed, then combined (bootstrap)."""
    totals = [int(x) for x in np.asarray(stats, dtype=np.int64).sum(axis=0)]
    return bleu_from_counts(totals[0], totals[1], totals[2 : 2 + MAX_N], totals[2 + MAX_N :], n)


def bleu_item_scores(stats: np.ndarray, *, n: int) -> np.ndarray:
    """pycocoevalcap's per-item BLEU-n (each item's own statistics, its own brevity penalty)."""
    rows = np.asarray(stats, dtype=np.int64).tolist()
    return np.array(
        [bleu_from_counts(r[0], r[1], r[2 : 2 + MAX_N], r[2 + MAX_N :], n) for r in rows], dtype=float
    )


# --------------------------------------------------------------------------------------------------- ROUGE-L
def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel, Hyyrö 2004)."""
    return _lcs_with_masks(_match_masks(a), len(a), b)


def _match_masks(a: Sequence[str]) -> dict[str, int]:
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    return masks


def _lcs_with_masks(masks: dict[str, int], m: int, b: Sequence[str]) -> int:
    full = (1 << m) - 1
    v = full
    for tok in b:
        match = masks.get(tok)
        if match is not None:
            u = v & match
            v = ((v + u) | (v - u)) & full
    return m - v.bit_count()


def rouge_l_item_scores(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
    """pycocoevalcap's ROUGE-L of each item (Lin 2004, Eqs. 2-4, with beta = 1.2).

    Precision and recall are maximised over the references separately, then combined:
    ``F = (1 + beta^2) P R / (R + beta^2 P)``. Tokens are ``split(" ")`` as in pycocoevalcap (so an empty text
    is one empty token).
    """
    beta2 = ROUGE_BETA**2
    out = np.empty(len(hypotheses), dtype=float)
    for i, (hyp, refs) in enumerate(zip(hypotheses, references, strict=True)):
        cand = hyp.split(" ")
        masks = _match_masks(cand)
        prec_max = rec_max = 0.0
        for ref in refs:
            tokens = ref.split(" ")
            lcs = _lcs_with_masks(masks, len(cand), tokens)
            prec_max = max(prec_max, lcs / float(len(cand)))
            rec_max = max(rec_max, lcs / float(len(tokens)))
        if prec_max != 0 and rec_max != 0:
            out[i] = ((1 + beta2) * prec_max * rec_max) / float(rec_max + beta2 * prec_max)
        else:
            out[i] = 0.0
    return out


# --------------------------------------------------------------------------------------------------- CIDEr-D
def _sum_by(bins: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """``np.bincount(bins, values)`` with each bin summed in increasing order of value (a canonical order)."""
    perm = np.lexsort((values, bins))
    return np.bincount(bins[perm], weights=values[perm], minlength=size)


def cider_d_item_scores(
    table: _NgramTable,
    *,
    sigma: float = CIDER_SIGMA,
    df: np.ndarray | None = None,
    n_docs: int | None = None,
) -> np.ndarray:
    """pycocoevalcap's CIDEr-D of each item (Vedantam et al., 2015, Eqs. 1-4 with the CIDEr-D changes).

    - tf-idf weights ``g_k = tf * (log N - log max(1, df))`` where N is the number of evaluated items and df
      the number of items whose references contain the n-gram (Eq. 1: idf from the evaluated references);
    - per order n, the clipped cosine ``sum min(g_hyp, g_ref) * g_ref / (|g_hyp| |g_ref|)`` times the Gaussian
      length penalty ``exp(-delta^2 / (2 sigma^2))`` (sigma = 6), averaged over the references (Eq. 3);
    - the mean over n = 1..4, times 10 (Eq. 4 and the CIDEr-D scaling).

    Official code vs paper: the "length" in the penalty is the number of BIGRAMS of each text (pycocoevalcap
    counts term frequencies of index-1 n-grams), i.e. words - 1 for non-empty texts; we follow the code.

    ``df`` (per gram id of ``table``) and ``n_docs`` replace the table's own document frequencies and item
    count: a distributed run scores each shard with the df and N of the WHOLE evaluated set
    (`vistkit.engine`). Sums run in an order fixed by the values (not by gram ids, which depend on the
    table), so a shard gives bit for bit the scores of the whole set.
    """
    if table.n_items == 0:
        return np.zeros(0, dtype=float)
    if df is None:  # document frequency: items whose references hold the gram (each item counted once)
        df = table.reference_document_frequency()
    n_docs = table.n_items if n_docs is None else n_docs
    if n_docs == 1:
        warn(
            "cider-d: one story scored alone has idf log(1/1) = 0 for every n-gram, so its CIDEr-D is 0 whatever "
            "its text (pycocoevalcap's value); score the stories together: CIDEr-D's idf comes from the references "
            "of all the stories scored"
        )
    parts = [_cider_d_items(part, sigma=sigma, df=df, n_docs=n_docs) for part in table.item_parts()]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _cider_d_items(table: _NgramTable, *, sigma: float, df: np.ndarray, n_docs: int) -> np.ndarray:
    """`cider_d_item_scores` of one part of the items, with the whole set's ``df`` and ``n_docs``."""
    n = table.n_items
    g = table.n_grams
    ref_entries = ~table.is_hyp
    ref_len = np.log(float(n_docs))
    weight = table.count.astype(float) * (ref_len - np.log(np.maximum(1.0, df[table.gram])))
    order = table.order[table.gram]
    norm = np.sqrt(_sum_by(table.text * MAX_N + order, weight**2, table.n_texts * MAX_N)).reshape(
        table.n_texts, MAX_N
    )
    length = np.maximum(table.lengths - 1, 0)  # bigram count (see the docstring)

    # clipped dot products: every reference entry against its item's hypothesis weight of the same gram
    hyp_key = table.text[table.is_hyp] * g + table.gram[table.is_hyp]  # sorted (entries sorted by text, gram)
    hyp_weight = weight[table.is_hyp]
    r_text = table.text[ref_entries]
    r_item = table.item_of_text[r_text]
    r_weight = weight[ref_entries]
    key = r_item * g + table.gram[ref_entries]
    pos = np.minimum(np.searchsorted(hyp_key, key), max(hyp_key.size - 1, 0))
    found = (hyp_key[pos] == key) if hyp_key.size else np.zeros(key.size, dtype=bool)
    contrib = np.where(found, np.minimum(hyp_weight[pos] if hyp_key.size else 0.0, r_weight) * r_weight, 0.0)
    n_ref_texts = table.n_texts - n
    val = _sum_by((r_text - n) * MAX_N + order[ref_entries], contrib, n_ref_texts * MAX_N).reshape(
        n_ref_texts, MAX_N
    )

    ref_item = table.item_of_text[n:]
    denom = norm[ref_item] * norm[n:]
    nonzero = (norm[ref_item] != 0) & (norm[n:] != 0)
    val = np.where(nonzero, val / np.where(nonzero, denom, 1.0), val)
    delta = (length[ref_item] - length[n:]).astype(float)
    val = val * (np.e ** (-(delta**2) / (2 * sigma**2)))[:, None]
    summed = np.zeros((n, MAX_N), dtype=float)
    np.add.at(summed, ref_item, val)  # in reference order, as pycocoevalcap's running sum
    scores = np.mean(summed, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = scores / table.n_refs
    return scores * 10.0


# --------------------------------------------------------------------------------------------------- metrics
_BLEU_CARD = (
    "Corpus BLEU-{n} as pycocoevalcap 1.2 computes it (the coco/VIST papers' 'BLEU-{n}').",
    "Modified n-gram precisions p_1..p_{n} (hypothesis n-gram counts clipped by their largest count in any "
    "one reference), summed over the corpus, combined as a geometric mean times the brevity penalty exp(1 - "
    "r/c) when c < r (Papineni et al. 2002, Eqs. 1-2). r is the sum over items of the reference length "
    "closest to the hypothesis length (the shorter on a tie). Text is PTB-tokenised and lower-cased by "
    "Stanford CoreNLP 3.4.1 with punctuation removed, as pycocoevalcap does. Per-item scores are each item's "
    "own BLEU-{n} (pycocoevalcap's per-image list); the corpus score is NOT their mean. pycocoevalcap adds "
    "1e-15 to numerators and 1e-9 to denominators, so a zero precision gives a tiny positive value instead "
    "of 0.",
)


def _bleu_card(n: int) -> MetricCard:
    summary, definition = _BLEU_CARD
    return MetricCard(
        summary=summary.format(n=n),
        definition=definition.format(n=n),
        range="[0, 1]; higher is better.",
        signature_fields=(
            "nrefs, key, tok:ptb-coco (CoreNLP 3.4.1 PTBTokenizer, lower-cased, punctuation removed), "
            "reflen:closest, smooth:coco (1e-15/1e-9), impl:pycocoevalcap-1.2"
        ),
        reproduces=(
            "pycocoevalcap 1.2 Bleu(4) after PTBTokenizer, equal to 1e-9 (corpus and per item) on the TAPM, "
            "AREL and XE VIST test outputs (tests/test_coco.py). Bootstrap resamples the per-item statistics "
            "(testlen, closest reflen, guesses and clipped matches per order) and recombines them."
        ),
        differences=(
            "The paper's brevity penalty uses the effective reference length; pycocoevalcap (and vistkit) "
            "use the 'closest' rule summed over items, and the 1e-15/1e-9 guards described above." + _BREAKS_NOTE
        ),
        citation="Papineni et al., BLEU: a Method for Automatic Evaluation of Machine Translation, ACL 2002. "
        + _CITATION_COCO,
    )


class _CocoMetric(Metric):
    """Shared plumbing: tokenise through the per-text cache, compute on the shared `CocoInputs`."""

    needs_references: ClassVar[bool] = True
    needs_java: ClassVar[str] = "the PTB tokenizer (coco metrics)"  # `vistkit.models.java.run_ptb_tokenizer`

    def signature_fields(self) -> dict[str, object]:
        return {"tok": TOKENISER, **self._extra_fields(), "impl": COCO_VERSION}

    def _extra_fields(self) -> dict[str, object]:
        return {}

    def _mean_score(self, items: Sequence[Item], values: np.ndarray, signature: str) -> Score:
        """A score whose corpus value is the mean of the item values."""
        return Score(
            metric=self.name,
            corpus=corpus_mean(values),
            item_ids=[it.item_id for it in items],
            item_scores=values,
            signature=signature,
        )


class _Bleu(_CocoMetric):
    n: ClassVar[int]

    def _extra_fields(self) -> dict[str, object]:
        return {"reflen": "closest", "smooth": "coco"}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        stats = coco_inputs(items).bleu_stats()
        totals = stats.sum(axis=0)
        return Score(
            metric=self.name,
            corpus=bleu_corpus_from_stats(stats, n=self.n),
            item_ids=[it.item_id for it in items],
            item_scores=bleu_item_scores(stats, n=self.n),
            signature=signature,
            stats=stats,
            corpus_from_stats=partial(bleu_corpus_from_stats, n=self.n),
            extra={"testlen": int(totals[0]), "reflen": int(totals[1])},
        )


def _bleu_metric(n: int) -> type[Metric]:
    """The registered metric ``bleu-N``: `_Bleu` with ``n`` = N."""
    attrs = {"name": f"bleu-{n}", "n": n, "card": _bleu_card(n), "__module__": __name__}
    return register(type(f"Bleu{n}", (_Bleu,), attrs))


Bleu1, Bleu2, Bleu3, Bleu4 = (_bleu_metric(n) for n in (1, 2, 3, 4))


@register
class RougeL(_CocoMetric):
    """ROUGE-L as pycocoevalcap 1.2 computes it (the card has the definition)."""

    name = "rouge-l"
    card = MetricCard(
        summary="ROUGE-L (LCS F-measure, beta 1.2) as pycocoevalcap 1.2 computes it.",
        definition=(
            "For each item, the longest common subsequence (LCS) of the hypothesis with each reference gives "
            "P = LCS/|hyp| and R = LCS/|ref|; P and R are each maximised over the references, then F = (1 + "
            "beta^2) P R / (R + beta^2 P) with beta = 1.2 (Lin 2004, Eqs. 2-4). The corpus score is the mean "
            "of the item scores. Text is PTB-tokenised and lower-cased with punctuation removed (CoreNLP "
            "3.4.1, as pycocoevalcap), tokens split on single spaces."
        ),
        range="[0, 1]; higher is better.",
        signature_fields="nrefs, key, tok:ptb-coco, beta:1.2, impl:pycocoevalcap-1.2",
        reproduces=(
            "pycocoevalcap 1.2 Rouge() after PTBTokenizer, equal to 1e-9 (corpus and per item) on the TAPM, "
            "AREL and XE VIST test outputs (tests/test_coco.py)."
        ),
        differences=(
            "Lin (2004) defines ROUGE-L over multiple references as the best F per reference (or a "
            "jackknife); pycocoevalcap maximises precision and recall separately (possibly from different "
            "references) and uses beta = 1.2 rather than the paper's large beta. We follow the code." + _BREAKS_NOTE
        ),
        citation="Lin, ROUGE: A Package for Automatic Evaluation of Summaries, ACL workshop 2004. "
        + _CITATION_COCO,
    )

    def _extra_fields(self) -> dict[str, object]:
        return {"beta": ROUGE_BETA}

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        return self._mean_score(items, coco_inputs(items).rouge_l(), signature)


@register
class CiderD(_CocoMetric):
    """CIDEr-D as pycocoevalcap 1.2 computes it (its ``CIDEr``; the card has the definition)."""

    name = "cider-d"
    upper_bound = None  # in practice <= 10 per item
    card = MetricCard(
        summary="CIDEr-D (consensus tf-idf n-gram similarity) as pycocoevalcap 1.2 computes it ('CIDEr').",
        definition=(
            "n-grams (n = 1..4) of the PTB-tokenised texts are weighted by tf-idf, the idf taken from the "
            "references of the evaluated set: log(N) - log(max(1, df)), N = number of items, df = items "
            "whose references contain the n-gram. Per order, the cosine of the hypothesis and each reference "
            "vector with the hypothesis weights clipped at the reference weights, times the Gaussian length "
            "penalty exp(-delta^2 / 72) (sigma = 6), averaged over references; the mean over n, times 10 "
            "(Vedantam et al. 2015, Eqs. 1-4, CIDEr-D). The corpus score is the mean of the item scores."
        ),
        range="[0, 10] per item in practice (unbounded by declaration); higher is better.",
        signature_fields="nrefs, key, tok:ptb-coco, sigma:6, df:refs, impl:pycocoevalcap-1.2",
        reproduces=(
            "pycocoevalcap 1.2 Cider() after PTBTokenizer, equal to 1e-9 (corpus and per item) on the TAPM, "
            "AREL and XE VIST test outputs (tests/test_coco.py). Because df depends on the whole evaluated "
            "set, an item's score depends on the other items: bootstrap and paired tests resample the "
            "per-item scores computed with df (and N) fixed from the full set, not recomputing df per "
            "resample."
        ),
        differences=(
            "pycocoevalcap's Gaussian penalty measures length as the number of bigrams (words - 1), not "
            "words; it drops the paper's stemming; idf comes from the evaluated references (not a fixed "
            "corpus such as coco-train). We follow the code. The coco papers report this number as 'CIDEr'. So one "
            "story scored alone scores 0 whatever its text (idf log(1/1) = 0; vistkit warns)."
            + _BREAKS_NOTE
        ),
        citation="Vedantam et al., CIDEr: Consensus-based Image Description Evaluation, CVPR 2015. "
        + _CITATION_COCO,
    )

    def _extra_fields(self) -> dict[str, object]:
        return {"sigma": f"{CIDER_SIGMA:g}", "df": "refs"}

    #: set by `vistkit.meta.scoring` while it scores a pairs file in rounds (`RoundCorpus`), else None
    rounds: RoundCorpus | None = None

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        if self.rounds is None:
            return self._mean_score(items, coco_inputs(items).cider_d(), signature)
        return self._mean_score(items, self.rounds.score(coco_inputs(items).table(), items), signature)


class RoundCorpus:
    """CIDEr-D's corpus over the rounds of `vistkit.meta.scoring` (at most one story per key in a call).

    Every round is scored as if the stories of the first round whose keys it lacks were in the call too (the
    same df and N), without scoring them again: the first call records the n-grams each item's references hold,
    and a later call (``present``: its keys) adds those of the first round's items of the keys it lacks. Padding
    each round with those items instead made the work the rounds times the keys (2,200 pairs with 200 stories of
    one key and 2,000 other keys: 116 s).
    """

    def __init__(self) -> None:
        self.first: dict[str, dict[str, int]] | None = None  # per item id of the first round: its reference grams
        self.df: dict[str, int] = {}  # the first round's document frequencies
        self.present: set[str] = set()  # the keys of the round being scored (set before each later call)

    def score(self, table: _NgramTable, items: Sequence[Item]) -> np.ndarray:
        """The CIDEr-D of ``items`` (``table``: theirs) in the first round's corpus with this round's items."""
        strings = table.gram_strings()
        own = table.reference_document_frequency()
        if self.first is None:
            self.first = _item_reference_grams(table, items, strings)
            self.df = {strings[g]: int(own[g]) for g in np.flatnonzero(own).tolist()}
            return cider_d_item_scores(table, df=own, n_docs=table.n_items)
        replaced = [self.first[k] for k in self.present if k in self.first]
        lost: dict[str, int] = {}
        for grams in replaced:
            for gram in grams:
                lost[gram] = lost.get(gram, 0) + 1
        df = own + np.array([self.df.get(s, 0) - lost.get(s, 0) for s in strings], dtype=float)
        n_docs = table.n_items + len(self.first) - len(replaced)
        return cider_d_item_scores(table, df=df, n_docs=n_docs)


def _item_reference_grams(table: _NgramTable, items: Sequence[Item], strings: list[str]) -> dict[str, dict[str, int]]:
    """Per item id: the n-grams (words joined by a space) its references hold, as a dict used as a set."""
    ref = ~table.is_hyp
    codes = np.unique(table.item_of_text[table.text[ref]] * table.n_grams + table.gram[ref])
    out: dict[str, dict[str, int]] = {it.item_id: {} for it in items}
    ids = [it.item_id for it in items]
    for item, gram in zip((codes // table.n_grams).tolist(), (codes % table.n_grams).tolist(), strict=True):
        out[ids[item]][strings[gram]] = 1
    return out


# -------------------------------------------------------------------------------------------- functional face
_Stories = StorySet | Sequence[Story]


def _as_set(stories: _Stories) -> StorySet:
    return stories if isinstance(stories, StorySet) else StorySet(stories)


def _score(name: str, hypotheses: _Stories, references: _Stories, key: Keying | str | None) -> Score:
    return get_metric(name).score(_as_set(hypotheses), _as_set(references), key=key)


def bleu_score(hypotheses: _Stories, references: _Stories, *, n: int = 4, key: Keying | str | None = None) -> Score:
    """pycocoevalcap BLEU-n (n = 1..4) of ``hypotheses`` against ``references``."""
    if n not in (1, 2, 3, 4):
        raise ValueError("n must be 1, 2, 3 or 4")
    return _score(f"bleu-{n}", hypotheses, references, key)


def rouge_l_score(hypotheses: _Stories, references: _Stories, *, key: Keying | str | None = None) -> Score:
    """pycocoevalcap ROUGE-L of ``hypotheses`` against ``references``."""
    return _score("rouge-l", hypotheses, references, key)


def cider_d_score(hypotheses: _Stories, references: _Stories, *, key: Keying | str | None = None) -> Score:
    """pycocoevalcap CIDEr-D of ``hypotheses`` against ``references``."""
    return _score("cider-d", hypotheses, references, key)


def coco_family(
    systems: Mapping[str, StorySet],
    references: StorySet,
    *,
    key: Keying | str | None = None,
    metrics: Sequence[str] = COCO_METRICS,
    template: Sequence[str] | None = None,
) -> dict[str, dict[str, Score]]:
    """Score several systems with the coco family at once: ``{system: {metric: Score}}``.

    Every hypothesis and reference text goes to the PTB tokeniser in one jar call; each metric then reuses it.
    ``meteor-coco`` is included when that metric is registered (its module is separate).
    """
    from vistkit.metrics.base import align, list_metrics

    available = list_metrics()
    names = [m for m in metrics if m in available]
    texts: list[str] = [s.text for s in references]
    for stories in systems.values():
        texts.extend(s.text for s in stories)
    ptb_tokenize_cached(texts)
    built = {name: get_metric(name) for name in names}
    out: dict[str, dict[str, Score]] = {}
    for system, hyps in systems.items():
        alignment = align(hyps, references, keying=key, template=template)
        out[system] = {}
        for name, metric in built.items():
            signature = metric.signature(keying=alignment.keying, n_refs=alignment.n_refs)
            result = metric.score_items(alignment.items, signature=signature)
            result.excluded = {**alignment.excluded, **result.excluded}
            result.keying = alignment.keying
            out[system][name] = result
    return out
