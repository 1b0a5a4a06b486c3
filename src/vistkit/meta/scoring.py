"""Score the two stories of every pair (or every judged story) with a registered metric, via `Metric.score`.

`Metric.score` aligns one hypothesis per key, but a pairs file holds several stories per photo sequence (and
the Reference Absent Algorithm needs a different reference set per pair), so the unique (story, reference set)
units are split into rounds with at most one unit per key and each round is one `Metric.score` call. For
metrics whose item scores depend on the whole call (CIDEr-D's idf), every round is padded to the same keys.

A pairwise metric (`vistkit.metrics.base.Ranker`) is asked per pair instead: `score_pairs` calls
`Ranker.preference` on the two stories of every pair, and `score_stories` uses its per-story score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vistkit import progress
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError
from vistkit.meta.human import StoryPair, is_reference_system
from vistkit.metrics.base import Metric, Ranker, Score, is_same_story


@dataclass
class PairScores:
    """One metric's scores of story 1 and story 2 of every pair (NaN: the metric left the story undefined).

    For a ranker, ``preference`` holds its `Ranker.preference` per pair (> 0: story 1 preferred) and
    ``score_1`` / ``score_2`` are ``+preference / 2`` / ``-preference / 2``, so that their difference is the
    preference wherever scores are compared.
    """

    metric: str
    signature: str
    higher_is_better: bool
    score_1: np.ndarray
    score_2: np.ndarray
    excluded: dict[str, str]
    preference: np.ndarray | None = None

    def oriented(self) -> tuple[np.ndarray, np.ndarray]:
        """Scores turned so that higher is better."""
        sign = 1.0 if self.higher_is_better else -1.0
        return sign * self.score_1, sign * self.score_2

    def difference(self) -> np.ndarray:
        """Per pair, > 0 when the metric prefers story 1 (a ranker's preference, else the oriented score
        difference); NaN where undefined. Equal scores are a tie (0) whatever their size: two infinite scores
        of one sign gave NaN (numpy's warning, and the pair silently in no denominator)."""
        if self.preference is not None:
            return self.preference
        m1, m2 = self.oriented()
        with np.errstate(invalid="ignore"):
            return np.where(m1 == m2, 0.0, m1 - m2)

    def swapped(self) -> PairScores:
        """The same scores with story 1 and story 2 exchanged (a ranker's preference negated)."""
        pref = None if self.preference is None else -self.preference
        return PairScores(
            self.metric, self.signature, self.higher_is_better, self.score_2, self.score_1, self.excluded, pref
        )


@dataclass(frozen=True)
class _Unit:
    text: str
    system: str
    key: str
    story_id: str
    img_seq: tuple[str, ...]
    drop_ref: str | None  # text of the reference removed from this unit's references (Reference Absent)


def _corpus_dependent(metric: Metric) -> bool:
    """Whether an item's score depends on the other items of the call (corpus idf: CIDEr, CIDEr-D)."""
    return bool(getattr(metric, "item_scores_depend_on_corpus", metric.name.lower().startswith("cider")))


def _pair_key(pair: StoryPair, keying: Keying) -> str:
    if keying is Keying.SEQUENCE:
        if not pair.img_seq:
            raise InputError(
                f"pair {pair.pair_id}: no img_seq, so it cannot be keyed by sequence; use --key story"
            )
        return "-".join(pair.img_seq)
    if keying is Keying.STORY:
        if not pair.story_id:
            raise InputError(
                f"pair {pair.pair_id}: no story_id, so it cannot be keyed by story; use --key sequence"
            )
        return pair.story_id
    raise InputError(
        "stories are matched to their references by story id or photo sequence here, not by album (an album holds "
        "stories of other photos); pass --key story or --key sequence"
    )


def score_pairs(
    metric: Metric,
    pairs: Sequence[StoryPair],
    *,
    references: StorySet | None = None,
    key: Keying | str | None = None,
    reference_absent: bool = True,
) -> PairScores:
    """Score story 1 and story 2 of every pair with ``metric``.

    Reference-based metrics need ``references`` keyed like the pairs (``key``: ``sequence`` = img_seq,
    ``story`` = story_id; default sequence when every pair has img_seq). With ``reference_absent`` (Vrank Eq.
    3, the Reference Absent Algorithm) a pair that contains a human reference is scored with that reference
    removed from the reference set of BOTH its stories, so neither story is compared with the human story of
    the pair. A `Ranker` is asked per pair (`rank_pairs`).
    """
    if isinstance(metric, Ranker):
        return rank_pairs(metric, pairs)
    return _score_each_story(metric, pairs, references=references, key=key, reference_absent=reference_absent)


def rank_pairs(ranker: Ranker, pairs: Sequence[StoryPair]) -> PairScores:
    """A ranker's preference for story 1 over story 2 of every pair (> 0: story 1 preferred)."""
    a = [
        Story(story_id=p.story_id or f"{p.pair_id}-1", text=p.text_1, photo_ids=p.img_seq, system=p.system_1)
        for p in pairs
    ]
    b = [
        Story(story_id=p.story_id or f"{p.pair_id}-2", text=p.text_2, photo_ids=p.img_seq, system=p.system_2)
        for p in pairs
    ]
    pref = ranker.preference(a, b)
    excluded = {
        p.pair_id: "the ranker left this pair undefined" for p, v in zip(pairs, pref, strict=True) if math.isnan(v)
    }
    return PairScores(ranker.name, ranker.signature(), True, pref / 2.0, -pref / 2.0, excluded, pref)


def _score_each_story(
    metric: Metric,
    pairs: Sequence[StoryPair],
    *,
    references: StorySet | None,
    key: Keying | str | None,
    reference_absent: bool,
    what: str = "pair",
) -> PairScores:
    """Score story 1 and story 2 of every pair one story at a time (see `score_pairs`); ``what`` names the pairs
    in a message (``story`` for `score_stories`, whose pairs are each one story twice)."""
    if metric.needs_references and references is None:
        raise InputError(f"{metric.name} is reference-based: pass --references FILE (the human stories)")
    if key is None:
        keying = Keying.SEQUENCE if all(p.img_seq for p in pairs) else Keying.STORY
    else:
        keying = Keying.parse(key)
    ref_groups: dict[str, list[Story]] = references.group(keying) if references is not None else {}

    units: dict[_Unit, int] = {}
    unit_of: list[tuple[int, int]] = []
    for idx, pr in enumerate(pairs):
        k = _pair_key(pr, keying) if metric.needs_references else f"{idx}"
        drop = None
        if metric.needs_references and reference_absent and pr.has_reference:
            drop = pr.text_1 if is_reference_system(pr.system_1) else pr.text_2
        ids = []
        for text, system in ((pr.text_1, pr.system_1), (pr.text_2, pr.system_2)):
            u = _Unit(text, system, k, pr.story_id, pr.img_seq, drop)
            if not metric.needs_references:  # reference-free: one unit per distinct text (and photos)
                u = _Unit(text, "", "", "", pr.img_seq if metric.needs_images else (), None)
            ids.append(units.setdefault(u, len(units)))
        unit_of.append((ids[0], ids[1]))

    # rounds: at most one unit per key. A reference-free metric's units are each their own story (ids u0, u1, ...)
    # and share the empty key, which made one round, so one `Metric.score` call, per story (160,000 pairs: 80,000
    # calls, a batched model unbatched): they are one round now, unless the metric's item scores depend on the
    # call (then each story is still scored alone, as before)
    one_call = not metric.needs_references and not _corpus_dependent(metric)
    rounds: list[list[tuple[_Unit, int]]] = []
    depth: dict[str, int] = {}
    for u, i in units.items():
        r = 0 if one_call else depth.get(u.key, 0)
        depth[u.key] = r + 1
        if r == len(rounds):
            rounds.append([])
        rounds[r].append((u, i))
    corpus = _round_corpus(metric) if metric.needs_references and len(rounds) > 1 else None
    if len(rounds) > 1:  # the coco metrics' texts tokenised in one jar call, not one per round
        from vistkit.metrics.coco import pretokenize

        pretokenize(metric, [*(u.text for u in units), *(r.text for k in depth for r in ref_groups.get(k, []))])
    if corpus is not None:
        metric.rounds = corpus  # type: ignore[attr-defined]
    try:
        return _score_rounds(metric, units, unit_of, rounds, pairs, corpus, ref_groups, keying, reference_absent, what)
    finally:
        if corpus is not None:
            metric.rounds = None  # type: ignore[attr-defined]


def _round_corpus(metric: Metric) -> Any:
    """CIDEr-D's `vistkit.metrics.coco.RoundCorpus` for scoring in rounds, else None (the padding of
    `_score_rounds` keeps another corpus-dependent metric's corpus)."""
    from vistkit.metrics.coco import CiderD, RoundCorpus

    return RoundCorpus() if isinstance(metric, CiderD) and metric.rounds is None else None


def _score_rounds(
    metric: Metric,
    units: dict[_Unit, int],
    unit_of: list[tuple[int, int]],
    rounds: list[list[tuple[_Unit, int]]],
    pairs: Sequence[StoryPair],
    corpus: Any,
    ref_groups: dict[str, list[Story]],
    keying: Keying,
    reference_absent: bool,
    what: str,
) -> PairScores:
    """The rounds of `_score_each_story`, one `Metric.score` call each (``corpus``: CIDEr-D's, or None)."""
    values = np.full(len(units), math.nan)
    reasons: dict[int, str] = {}
    signature = ""
    if corpus is None and metric.needs_references and len(rounds) > 1 and _corpus_dependent(metric):
        # CIDEr-D takes its idf from the references of the whole call: pad every round with a filler unit of
        # each missing key (its score is discarded) so that all rounds see the same corpus of keys (CIDEr-D
        # itself is given the first round's corpus instead, `vistkit.metrics.coco.RoundCorpus`: the same numbers).
        first: dict[str, _Unit] = {}
        for u in units:
            first.setdefault(u.key, u)
        for rnd in rounds:
            present = {u.key for u, _ in rnd}
            rnd += [(u, -1) for k, u in first.items() if k not in present]
    done = 0
    for rnd in rounds:
        progress.fraction(done, len(units))  # the caller's task over the pairs, if any
        if corpus is not None:
            corpus.present = {u.key for u, _ in rnd}
        done += sum(1 for _, i in rnd if i >= 0)
        result, index = _score_round(metric, rnd, ref_groups, keying, reference_absent)
        if result is None and corpus is not None:
            # nothing of the round could be scored: padded (as rounds were), each story says its own reason
            present = {u.key for u, _ in rnd}
            padded = rnd + [(u, -1) for u in {u.key: u for u in reversed(units)}.values() if u.key not in present]
            metric.rounds = None  # type: ignore[attr-defined]
            try:
                result, index = _score_round(metric, padded, ref_groups, keying, reference_absent)
            finally:
                metric.rounds = corpus  # type: ignore[attr-defined]
        if corpus is not None and corpus.first is None:  # a first round of which nothing could be scored
            corpus.first, corpus.df = {}, {}
        if result is None:
            for _, i in rnd:
                reasons[i] = "no reference story shares its key"
            continue
        signature = signature or result.signature
        for item_id, v in zip(result.item_ids, result.item_scores, strict=True):
            if index[item_id] >= 0:
                values[index[item_id]] = float(v)
        for item_id, why in result.excluded.items():
            if index.get(item_id, -1) >= 0:
                reasons[index[item_id]] = why
    if not signature:  # say why (the most common reason a story was left out), not only where to look
        from collections import Counter

        commonest = Counter(r for r in reasons.values() if r).most_common(1)
        said = f": {commonest[0][0]} ({commonest[0][1]:,} of {len(units):,} stories)" if commonest else ""
        # Reference Absent is named only where it removed a reference: "no reference shares its key" of stories
        # none of which is a human one was blamed on it too (and `meta correlate` spoke of pairs it has none of)
        removed = any(u.drop_ref is not None and ref_groups.get(u.key) for u in units)
        hint = (
            " (Reference Absent, on by default, removes each story from its own references, so a story whose only"
            " reference is itself has none left: give more references per key, or --no-reference-absent)"
            if reference_absent and metric.needs_references and removed
            else ""
        )
        first_key = next(iter(units)).key if metric.needs_references and units else ""
        keyed = (
            f" (by {keying.value}: the first {what}'s key is {first_key!r:.60})" if first_key and not removed else ""
        )
        raise InputError(
            f"{metric.name}: no {what} could be scored{said}{keyed}{hint}; check --references and --key"
        )
    if metric.needs_references and reference_absent and "refabsent" not in signature:
        signature = signature.replace("|key:", "|refabsent:yes|key:", 1)
    if not metric.needs_references:  # each story was scored alone, under an internal story key: sign the key used
        signature = re.sub(r"\|key:[^|]*", lambda _: f"|key:{keying.value}", signature, count=1)
    s1 = np.array([values[a] for a, _ in unit_of])
    s2 = np.array([values[b] for _, b in unit_of])
    excluded = {
        pr.pair_id: reasons.get(a) or reasons.get(b) or "the metric left a story undefined"
        for pr, (a, b), x, y in zip(pairs, unit_of, s1, s2, strict=True)
        if math.isnan(x) or math.isnan(y)
    }
    return PairScores(metric.name, signature, metric.higher_is_better, s1, s2, excluded)


def _score_round(
    metric: Metric,
    rnd: list[tuple[_Unit, int]],
    ref_groups: dict[str, list[Story]],
    keying: Keying,
    reference_absent: bool,
) -> tuple[Score | None, dict[str, int]]:
    """One `Metric.score` call on the units of a round: its result (None when no story shares a reference's key)
    and the unit index of each item id (-1: a filler)."""
    hyps: list[Story] = []
    refs: list[Story] = []
    index: dict[str, int] = {}
    for n, (u, i) in enumerate(rnd):
        sid = f"u{n}"
        if metric.needs_references:
            photo = tuple(u.key.split("-")) if keying is Keying.SEQUENCE else ()
            sid = u.key if keying is Keying.STORY else u.story_id or sid
            hyps.append(Story(story_id=sid, text=u.text, photo_ids=photo, system=u.system or None))
            for ref in ref_groups.get(u.key, []):
                if u.drop_ref is not None and " ".join(ref.text.split()) == " ".join(u.drop_ref.split()):
                    continue
                refs.append(ref)
            index[u.key] = i
        else:
            hyps.append(Story(story_id=sid, text=u.text, photo_ids=u.img_seq))
            index[sid] = i
    try:
        result = metric.score(
            StorySet(hyps),
            StorySet(refs) if metric.needs_references else None,
            key=keying if metric.needs_references else Keying.STORY,
            reference_absent=reference_absent and metric.needs_references,
        )
    except InputError as exc:
        if "no hypothesis shares" not in str(exc):
            raise
        return None, index
    return result, index


def score_stories(
    metric: Metric,
    stories: Sequence[Story],
    *,
    references: StorySet | None = None,
    key: Keying | str | None = None,
    reference_absent: bool = True,
) -> tuple[np.ndarray, str]:
    """Per-story scores (NaN where undefined) of any stories, several per key allowed; returns (scores,
    signature).

    With ``reference_absent`` a human story is scored with itself removed from its references (Vrank Eq. 3).
    """
    pairs = [
        StoryPair(
            pair_id=str(i),
            story_id=s.story_id,
            img_seq=s.photo_ids,
            text_1=s.text,
            text_2=s.text,
            system_1=s.system or "",
            system_2=s.system or "",
            gap=0.0,
        )
        for i, s in enumerate(stories)
    ]
    ps = _score_each_story(
        metric, pairs, references=references, key=key, reference_absent=reference_absent, what="story"
    )
    return ps.score_1, ps.signature


__all__ = ["PairScores", "is_same_story", "rank_pairs", "score_pairs", "score_stories"]
