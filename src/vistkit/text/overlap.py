"""Word-set overlap between the sentences of one story, in time and memory that do not grow with all pairs.

The story rankers' "largest overlap of two sentences" compared every pair of sentences in Python: a 100,000-character
story (the input limit) of 20,000 one-word sentences built a list of 200 million floats (9 GB resident, over a
minute). `max_jaccard` gives the same value with a bounded amount of memory: identical sets end the search at 1,
a few sets are compared pair by pair as before, many sets as a sparse product in row blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import numpy as np

#: up to this many distinct sets, every pair in Python (a VIST story has five sentences)
PAIRWISE_MAX = 64
#: at most this many pair counts held at once by the sparse product
BLOCK_PAIRS = 2_000_000


def max_jaccard(sets: Sequence[AbstractSet[str]], *, pairwise_max: int = PAIRWISE_MAX) -> float | None:
    """The largest Jaccard overlap ``|a & b| / |a | b|`` over the pairs of ``sets`` (two positions, not two
    values) whose union is not empty; None when there is no such pair.

    Exact: both paths divide the same two integers. ``pairwise_max``: above this many distinct non-empty sets,
    the intersections come from a sparse set-by-word product, ``BLOCK_PAIRS`` counts at a time.
    """
    nonempty = [frozenset(s) for s in sets if s]
    if len(nonempty) < 2:
        # an empty set against a non-empty one overlaps 0; two empty sets have no union
        return 0.0 if nonempty and len(sets) > 1 else None
    distinct = list(dict.fromkeys(nonempty))
    if len(distinct) < len(nonempty):
        return 1.0  # two positions hold the same set: the largest overlap there is
    if len(distinct) <= pairwise_max:
        return max(len(a & b) / len(a | b) for i, a in enumerate(distinct) for b in distinct[i + 1 :])
    return _max_jaccard_sparse(distinct)


def _max_jaccard_sparse(sets: Sequence[frozenset[str]]) -> float:
    """`max_jaccard` of distinct non-empty sets: intersection counts as ``A[rows] @ A.T`` (A: set x word, 0/1)."""
    from scipy import sparse

    vocabulary: dict[str, int] = {}
    indices = [vocabulary.setdefault(w, len(vocabulary)) for s in sets for w in sorted(s)]
    sizes = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    a = sparse.csr_matrix(
        (np.ones(len(indices), dtype=np.int64), np.asarray(indices, dtype=np.int64), indptr),
        shape=(len(sets), len(vocabulary)),
    )
    at = a.T.tocsr()
    best = 0.0
    block = max(1, BLOCK_PAIRS // len(sets))
    for start in range(0, len(sets), block):
        counts = (a[start : start + block] @ at).tocoo()
        rows = counts.row + start
        later = counts.col > rows  # each pair once, never a set with itself
        inter = counts.data[later]
        if inter.size:
            union = sizes[rows[later]] + sizes[counts.col[later]] - inter
            best = max(best, float(np.max(inter / union)))
    return best
