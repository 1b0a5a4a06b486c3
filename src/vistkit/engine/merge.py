"""How a metric is split over shards of items, and how the shards' `Score` parts are merged back.

Three strategies, chosen per metric by name (`strategy`):

- ``items``: an item's score and statistics depend on that item only. Each shard is scored on its own and
  the parts are concatenated in input order; the corpus score is recomputed from the merged rows
  (`Score.corpus_from_stats` on the stacked per-item statistics for BLEU and pooled METEOR, else the mean of
  the defined item scores), so it is the same number the local engine computes from the same array.
- ``cider``: CIDEr-D's idf uses the document frequencies of the WHOLE evaluated set (Vedantam et al. 2015,
  Eq. 1). Pass 1 counts, per shard, the items whose references hold each n-gram (`cider_df_part`); the counts
  are added; pass 2 scores each shard with the merged df and the total item count (`cider_score_part`).
- ``whole``: anything else (a metric whose item scores depend on the other items, or that is not verified
  here, e.g. bertscore with idf weights): one shard, scored by one worker. Correct, not parallel.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from vistkit.errors import InputError
from vistkit.metrics.base import Item, Metric, Score, corpus_mean

#: metrics whose item scores and statistics depend on the item only (verified against the local engine in
#: tests/test_engine*.py or by construction: one model call or one METEOR line per item)
ITEM_METRICS = frozenset(
    {
        "bleu-1",
        "bleu-2",
        "bleu-3",
        "bleu-4",
        "rouge-l",
        "meteor-vist",
        "meteor-album",
        "meteor-coco",
        "rovist-nr",
        "rovist-nr-jaccard",
        "coherence",
        "rovist-c",
        "dhm-c",
        "bertscore",  # without idf (see `strategy`)
        # a story's LM values depend on its own tokens only (the batch it shares changes float32's last bits, as a
        # local run's length buckets do); the corpus score is the mean of the item scores
        "lm-perplexity",
        "lm-fluency",
        "lm-coherence",
        # a story's score depends on its own text and photos only: CLIP / ViT embeddings of its sentences, phrases
        # or nouns against its own photos (or their regions); GROOViST's concreteness and RoViST-VG's IDF weights come
        # from fixed tables, not from the scored set; the corpus score is the mean of the item scores
        "clipscore",
        "clipscore-story",
        "groovist",
        "rovist-vg",
        "rovist-vg-scaled",
    }
)

#: ``Score.extra`` lists that name a set (sorted, each once): a merge keeps each element once, sorted, as the whole
#: run lists them (the photos scored without regions were listed once per shard)
SET_EXTRAS = frozenset({"whole_photo_fallback"})


def strategy(metric: Metric | str, options: dict[str, Any] | None = None) -> str:
    """``"items"``, ``"cider"`` or ``"whole"`` for a metric (and its options)."""
    if not isinstance(metric, str | Metric):
        raise InputError(f"a metric is a name such as 'bleu-4' or a metric object, not {type(metric).__name__}")
    name = metric if isinstance(metric, str) else metric.name
    # a Ray engine's metric object keeps its options (`RemoteMetric.options`), a local one its attributes
    made_with = getattr(metric, "options", None) if not isinstance(metric, str) else None
    opts = {**(made_with if isinstance(made_with, dict) else {}), **(options or {})}
    if not isinstance(metric, str) and getattr(metric, "idf", False):
        opts["idf"] = True
    if name == "cider-d":
        return "cider"
    if name == "bertscore" and opts.get("idf"):
        return "whole"  # idf weights come from all the references of the set
    return "items" if name in ITEM_METRICS else "whole"


#: metrics whose item scores are known to depend on the other items of the set, and how
WHOLE_SET_REASONS = {
    "cider-d": "its idf weights come from the references of the whole set",
    "sacrebleu": "its result depends on the whole set (sacreBLEU's nrefs)",
}


def depends_on_the_set(metric: Metric) -> bool:
    """Whether a metric's item scores depend on which other items are scored with them (CIDEr-D's idf weights,
    sacreBLEU's, BERTScore's idf weights): two systems scored on different sets of items are then scored on
    different scales, even on the items they share."""
    return strategy(metric) != "items" and (metric.name in WHOLE_SET_REASONS or metric.name == "bertscore")


def cannot_stream(metric: Metric) -> InputError:
    """The error for streaming a metric whose strategy is not ``items``, saying why: its scores depend on the whole
    set, or vistkit has not checked that they depend on each item alone (the message said "depend on the whole
    set" for every such metric, per-story language-model scores and rankers included)."""
    name = metric.name
    if name == "bertscore":
        why = "with idf=True its idf weights come from the references of the whole set"
    else:
        why = WHOLE_SET_REASONS.get(
            name,
            "vistkit streams only the metrics whose item scores it has checked to depend on each story alone, "
            f"such as {', '.join(sorted(ITEM_METRICS)[:4])} and {len(ITEM_METRICS) - 4} more",
        )
    return InputError(f"{name} cannot be streamed in batches: {why}; score the stories at once with its score(...)")


# --------------------------------------------------------------------------------------------------- merge
def merge_scores(parts: Sequence[Score], *, signature: str) -> Score:
    """One `Score` from the scores of consecutive shards (``items`` / ``cider`` strategies)."""
    if not parts:
        raise ValueError("nothing to merge")
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    item_ids = [i for p in parts for i in p.item_ids]
    scores = np.concatenate([np.asarray(p.item_scores, dtype=float) for p in parts])
    stats = None
    if all(p.stats is not None for p in parts):
        stats = np.concatenate([np.asarray(p.stats) for p in parts], axis=0)
    excluded: dict[str, str] = {}
    for p in parts:
        excluded.update(p.excluded)
    if stats is not None and first.corpus_from_stats is not None:
        corpus = float(first.corpus_from_stats(stats))
    else:
        corpus = corpus_mean(scores)
    return Score(
        metric=first.metric,
        corpus=corpus,
        item_ids=item_ids,
        item_scores=scores,
        signature=signature,
        keying=first.keying,
        stats=stats,
        corpus_from_stats=first.corpus_from_stats,
        excluded=excluded,
        extra=merge_extra([p.extra for p in parts]),
    )


def merge_extra(extras: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge per-shard ``Score.extra``: lists concatenated (those of `SET_EXTRAS` joined as sorted sets), dicts
    joined, counts added; a float ``K`` with a per-item list ``item_K`` (bertscore's P and R) becomes the mean of the
    merged list."""
    extras = [e for e in extras if e]
    if not extras:
        return {}
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for e in extras for k in e):  # every shard's keys (a later shard's were dropped)
        values = [e[key] for e in extras if key in e]
        v0 = values[0]
        if key in SET_EXTRAS and all(isinstance(v, list) for v in values):
            out[key] = sorted({x for v in values for x in v})
        elif isinstance(v0, list):
            out[key] = [x for v in values for x in v]
        elif isinstance(v0, dict):
            out[key] = {k: x for v in values for k, x in v.items()}
        elif isinstance(v0, bool):
            out[key] = any(values)
        elif isinstance(v0, int):
            out[key] = sum(values)
        else:
            out[key] = v0
    for key in list(out):
        items = out.get(f"item_{key}")
        if isinstance(out[key], float) and isinstance(items, list) and items:
            out[key] = float(np.asarray(items, dtype=float).mean())
    return out


class StreamTotals:
    """Bounded-memory accumulator of a streamed run: per-item scores (8 bytes an item) and the column sums of
    additive statistics, no ids or texts. ``corpus()`` equals the merged corpus score for metrics whose
    `corpus_from_stats` sums its rows (BLEU, pooled METEOR) and for mean metrics (to rounding)."""

    def __init__(self) -> None:
        self.n_items = 0
        self._values = array("d")  # 8 bytes an item however small the batches (an array per batch: ~160 each)
        self.stat_sums: np.ndarray | None = None
        self.corpus_from_stats: Any = None

    def add(self, part: Score) -> None:
        """Add one part's item scores (a copy: the engine then hands ``part`` to the caller's ``on_part``, which may
        change it) and, when it has additive statistics, their column sums."""
        self.n_items += len(part.item_ids)
        self._values.frombytes(np.ascontiguousarray(part.item_scores, dtype=float).tobytes())
        if part.stats is not None and part.corpus_from_stats is not None:
            s = np.asarray(part.stats).sum(axis=0)
            self.stat_sums = s if self.stat_sums is None else self.stat_sums + s
            self.corpus_from_stats = part.corpus_from_stats

    def corpus(self) -> float:
        """The corpus score so far: from the summed statistics when the parts had them, else the mean of the defined
        item scores (NaN when none is defined)."""
        if self.stat_sums is not None:
            return float(self.corpus_from_stats(self.stat_sums[None, :]))
        return corpus_mean(self.scores[0])

    @property
    def scores(self) -> list[np.ndarray]:
        """The item scores so far, in input order, as one array in a list (``np.concatenate(totals.scores)``)."""
        return [np.frombuffer(self._values, dtype=float).copy() if self._values else np.zeros(0)]


class FallbackTally:
    """The photos a photo metric's run scored, over its shards or streamed batches, and those it scored without a
    regions row (``whole_photo_fallback``): the run's one regions warning (`fallback`) gives the counts the local
    engine gives for the run scored at once (each batch said its own). ``photos``: the metric's photo map (a path
    or a mapping), which fills in the photos of a story without photo ids, as the metric does. Keeps each photo id
    once (bounded by the photos of the data set, not by the stories)."""

    def __init__(self, photos: Any = None) -> None:
        self.photos = photos
        self._map: dict[str, tuple[str, ...]] | None = None
        self.used: dict[str, None] = {}  # in first-scored order
        self.fell: set[str] = set()

    def _photos_of(self, item: Item) -> Sequence[str]:
        story = item.hypothesis
        if story.photo_ids or self.photos is None:
            return story.photo_ids
        if self._map is None:
            import os

            from vistkit.data.images import load_photo_map, photo_map_from
            from vistkit.errors import VistkitError

            photos = self.photos
            path = isinstance(photos, str | os.PathLike)
            try:
                self._map = load_photo_map(os.fspath(photos)) if path else photo_map_from(photos, "photos")
            except (VistkitError, OSError):  # read where the metric runs (a cluster's worker), not here
                self._map = {}
        return self._map.get(story.story_id, ())

    def add(self, items: Sequence[Item], part: Score) -> None:
        """One shard's or batch's items and its score."""
        fallback = part.extra.get("whole_photo_fallback")
        if isinstance(fallback, list):  # else every photo had its regions rows (or the metric reads none)
            self.fell.update(str(p) for p in fallback)
        for item in items:
            if item.item_id not in part.excluded:
                self.used.update(dict.fromkeys(str(p) for p in self._photos_of(item)))

    def fallback(self) -> tuple[list[str], int] | None:
        """The photos scored without regions (in scored order) and the number of photos scored; None when none."""
        if not self.fell:
            return None
        fell = [p for p in self.used if p in self.fell] or sorted(self.fell)
        return fell, max(len(self.used), len(fell))


# --------------------------------------------------------------------------------------------------- CIDEr-D
def cider_df_part(items: Sequence[Item]) -> tuple[Counter[str], int]:
    """Pass 1 of a sharded CIDEr-D: per n-gram (words joined by a space), how many of these items hold it in
    their references, and the number of items."""
    from vistkit.metrics.coco import coco_inputs

    if not items:
        return Counter(), 0
    table = coco_inputs(items).table()
    df = table.reference_document_frequency()
    strings = table.gram_strings()
    nz = np.flatnonzero(df)
    return Counter({strings[g]: int(df[g]) for g in nz.tolist()}), len(items)


def cider_score_part(
    metric: Metric, items: Sequence[Item], *, df: dict[str, int], n_docs: int, signature: str
) -> Score:
    """Pass 2: CIDEr-D of a shard with the document frequencies ``df`` and item count ``n_docs`` of the whole
    set (the same per-item values as `vistkit.metrics.coco.CiderD` on the whole set)."""
    from vistkit.metrics.coco import cider_d_item_scores, coco_inputs

    table = coco_inputs(items).table()
    shard_df = np.array([df.get(s, 0) for s in table.gram_strings()], dtype=float)
    values = cider_d_item_scores(table, df=shard_df, n_docs=n_docs)
    return Score(
        metric=metric.name,
        corpus=corpus_mean(values),
        item_ids=[it.item_id for it in items],
        item_scores=values,
        signature=signature,
    )
