"""``story-ranker`` (v2, the default) and ``story-ranker-v1``: vistkit's offline learned rankers.

Each reads a story and gives it a utility u; of two stories of the same photos it prefers the one with the
larger u (``prefer(a, b) = u(a) - u(b)``, a Bradley-Terry model; each distinct story is featurised once, so n
stories in any number of pairs cost n stories' work).

- ``story-ranker`` (v2, `vistkit.models.story_ranker_v2`): seven interpretable features on one z scale
  (type-token ratio, repeated trigrams, sentence overlap, LM fluency as SLOR, LM coherence as PMI, topic
  relatedness, word specificity) with signs and weights fixed beforehand; only the
  features' means and SDs on VIST *val* human stories are fitted (`scripts/train_ranker_v2.py`).
  Card: docs/models/story-ranker-v2.md.
- ``story-ranker-v1`` (`vistkit.models.story_ranker`): the first default, a small head trained on synthetic
  negatives; kept loadable by name with its held-out numbers in its card (it agrees with people less than a
  type-token ratio does).

Neither is Vrank (Hsu et al. 2022, Sect. 4), which encodes both stories at once and needs VHED to train: that is
the ``vrank`` metric and ``vistkit vrank train``. Neither was trained on any human judgement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Story
from vistkit.errors import MissingDependencyError
from vistkit.metrics.base import Item, MetricCard, Score, UtilityRanker, mean_score, register

V1_HELD_OUT = (
    "Held-out human judgements (measured outside the repository on stories not in ../shared): pair accuracy "
    ".674 (edit pairs, set A) and .480 (set B), Pearson .075 with 1,000 rated text-only stories; a type-token "
    "ratio scores .838 / .820 / .100 there. Its training pinned the repetition weights at 0 and taught it that "
    "long sentences are bad (from caption-stitching and LLaVA-like negatives)."
)


@register
class StoryRankerV1(UtilityRanker):
    """The first offline ranker (v1): a learned head over static-vector story features; not the default."""

    name: ClassVar[str] = "story-ranker-v1"
    higher_is_better: ClassVar[bool] = True
    # the per-story score is sigmoid(u), whatever the model folder (pair preferences u(a) - u(b) stay unbounded)
    lower_bound: ClassVar[float | None] = 0.0
    upper_bound: ClassVar[float | None] = 1.0
    card: ClassVar[MetricCard] = MetricCard(
        summary=(
            "vistkit's first offline learned ranker (v1, superseded by story-ranker v2): which of two stories "
            "people would prefer, from the text alone. Agrees with people less than a type-token ratio. "
            + V1_HELD_OUT
        ),
        definition=(
            "u(story) = w . z + v . tanh(P m): z = 22 standardised, clipped story features (type-token ratios, "
            "distinct n-grams, repeated trigrams / sentences / words / openings, length and sentence lengths, "
            "function-word, rare-word and placeholder shares, relatedness of the novel words of adjacent and of "
            "all sentences, redundancy), with the repetition and diversity weights held to their sign (a more "
            "repetitive story is never better, all else equal); m = the mean, first and last static "
            "sentence vectors (mean of the packaged MiniLM's input word-piece embeddings). Pair preference "
            "prefer(a, b) = u(a) - u(b) (> 0: a preferred); per-story score (`vistkit score`) = sigmoid(u), the "
            "modelled probability that the story is preferred over a typical VIST val human story (their mean "
            "utility is 0). Trained with "
            "the pairwise logistic loss on 3,000 VIST val human stories vs synthetic errors (repetition, "
            "shuffle, substitution, generic filler, truncation, grammar noise, incoherent merge, bland "
            "rewrites), stitched photo captions and SmolLM2-135M continuations. See docs/models/story-ranker.md."
        ),
        range=(
            "Per-story score in (0, 1), higher is better (about 0.5 for a typical human story); pair "
            "preferences u(a) - u(b) are unbounded."
        ),
        signature_fields="model (name + SHA-256 prefix of head and bigram table), encoder (static vectors), data.",
        reproduces="Not an official metric. " + V1_HELD_OUT + " Development numbers in docs/models/story-ranker.md.",
        differences=(
            "Vrank (Hsu et al. 2022, Sect. 4) regresses the human ranking gap from both stories read together "
            "and is trained on VHED; this ranker is trained without human judgements, so it measures what the "
            "synthetic errors and machine-like negatives teach (repetition, coherence, specificity, grammar), "
            "not the photos."
        ),
    )

    def __init__(self, *, model: str | Path | None = None) -> None:
        from vistkit.models.story_ranker import StoryRankerModel

        try:
            self.model = StoryRankerModel(model)
        except ImportError as exc:
            raise MissingDependencyError(
                f"the story-ranker metric needs torch, safetensors and tokenizers ({exc.name} is missing): "
                "pip install 'vistkit[models]'"
            ) from None
        config = self.model.config
        self.model_hash = f"{config.get('name', 'story-ranker')}@{config.get('head_sha256', 'unknown')[:12]}"
        self.encoder = f"static:{config.get('encoder', 'minilm-l6')}"
        self.training_data = str(config.get("training_data", "unknown"))

    def signature_fields(self) -> dict[str, object]:
        return {"model": self.model_hash, "encoder": self.encoder, "data": self.training_data}

    def utility(self, stories: Sequence[Story]) -> np.ndarray:
        """The model's utility of each story's text."""
        return self.model.utility([s.text for s in stories])

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per-story score sigmoid(u): under the Bradley-Terry model, the probability that the story is preferred
        over a typical VIST val human story (training centres their mean utility at 0). Bounded in (0, 1), so a
        few degenerate stories cannot dominate a story-level correlation; pair preferences use u itself."""
        from vistkit.models.story_ranker import MAX_SENTENCES

        u = self._utilities([i.hypothesis for i in items])
        values = 1.0 / (1.0 + np.exp(-np.clip(u, -700.0, 700.0)))
        excluded = {
            i.item_id: f"story-ranker-v1 reads stories of at most {MAX_SENTENCES} sentences"
            for i, v in zip(items, u, strict=True)
            if math.isnan(v)
        }
        return mean_score(self.name, [i.item_id for i in items], values.tolist(), signature, excluded=excluded)


@register
class StoryRanker(UtilityRanker):
    """The offline default ranker (v2): a-priori weighted z-scores of repetition, diversity and LM features."""

    name: ClassVar[str] = "story-ranker"
    higher_is_better: ClassVar[bool] = True
    card: ClassVar[MetricCard] = MetricCard(
        summary=(
            "vistkit's offline default ranker (v2): which of two stories people would prefer, from the text alone "
            "(reference-free, no photos, no download): repetition and diversity, LM fluency, LM coherence, relatedness "
            "and detail, each standardised on VIST val human stories, with signs and weights fixed beforehand."
        ),
        definition=(
            "u(x) = sum_k w_k s_k z_k(x), z_k = clip((f_k(x) - m_k) / d_k, -3, 3), over seven features f_k with "
            "a-priori signs s_k "
            "and weights w_k: type-token ratio (+, 0.5); share of words in repeated trigrams (-, 1.0); largest word "
            "Jaccard overlap of two sentences (-, 1.0); lm-fluency = mean SLOR of the sentences read alone (Kann et "
            "al. 2018, Eq. 1) (+, 0.5; no credit above a typical human story: z_k = min(z, 0) - c_k, c_k the "
            "mean of min(z, 0) over the statistics stories, because above typical SLOR rewards blandness, repetition "
            "and long sentences); lm-coherence = mean PMI of each sentence given the story before it, copied "
            "words not counted as gain (+, 0.5); topic relatedness = mean cosine of each distinct sentence's "
            "embedding (packaged all-MiniLM-L6-v2, mean pooled) with the mean of the other sentences' (+, 1.0); word "
            "specificity = mean unigram surprisal -ln P(w) (wordfreq) of the story's distinct known content words, for "
            "the 'detail' aspect of VIST's human evaluation (+, 0.5). m_k, d_k: mean and SD over 400 VIST val human "
            "stories (the only fitted numbers; scripts/train_ranker_v2.py). The LM (SmolLM2-135M-Instruct by default) "
            "reads the sentences detokenised and sentence-cased; invisible format characters (zero-width spaces, "
            "soft hyphens, bidi controls) are not read at all, nor are markdown emphasis, list markers and heading "
            "marks (`**x**`, `- `, `1. `, `## `), HTML formatting tags (`<p>`, `<br>`) or emoji; a story written "
            "one sentence per line reads as those sentences, and one in capitals as the same words in lower "
            "case. prefer(a, b) = u(a) - u(b); the per-story score is u "
            "(0 = a typical VIST val human story; one unit = one SD of one feature). An undefined feature (sentence "
            "overlap, coherence or relatedness of a one-sentence story) counts as typical (z_k = 0); the LM "
            "features of a story longer than the LM's context are those of its longest run of whole sentences from "
            "the start that fits; a story in broken English (fluency z <= -2) gets no credit from "
            "any feature (each s_k z_k <= 0: the PMI of garbled sentences is inflated, text without its function "
            "words repeats fewer words); the cap, the centre and this rule are in the config, whose hash the "
            "signature carries; "
            "a story without words (or with numbers only), or whose distinct content words are mostly not in the "
            "frequency list (a "
            "string of made-up words), or that is not English (under 8% English function words among 5 or more "
            "distinct plain words: French, Spanish, German text; or a sentence in another language: mostly letters "
            "of another script, or 4+ Latin-script words at least 3 nats per word likelier under another language's "
            "wordfreq list than under English's), gets the lowest utility, -15 (a text over 250 words is judged "
            "for language in windows of ~250 words; the reason is in the `story-ranker note` column of "
            "`--per-item` and `item_notes` in JSON). See docs/models/story-ranker-v2.md."
        ),
        range=(
            "Within +-15 with the packaged model (each |z_k| at most 3, weights summing to 5; a `model` folder "
            "with other weights or another clip has other bounds, so the declared range is unbounded); "
            "0 = a typical VIST val human story; higher is better."
        ),
        signature_fields=(
            "model (story-ranker-v2@SHA-256 prefix of its config), lm (name@weights hash12), precision + maxdev "
            "for bf16 (a bound on the utility's change: 0.4, from the LM metrics' bounds), unigram (wordfreq "
            "version) of lm-fluency and word specificity, encoder (the sentence encoder of topic relatedness, fp32 "
            "on the LM's device), data (the statistics' sample)."
        ),
        reproduces=(
            "Not an official metric. v2's agreement with held-out human judgements (measured outside the "
            "repository) is not known yet; v1's, in its card, lost to a type-token ratio. The "
            "development numbers (proxy pairs, VWP synthetic errors, the reserved AREL / XE stories for evaluation "
            "only, trivial baselines beside it) are in docs/models/story-ranker-v2.md and come from "
            "scripts/eval_ranker.py."
        ),
        differences=(
            "Vrank (Hsu et al. 2022, Sect. 4) regresses the human ranking gap from both stories read together "
            "and is trained on VHED; this ranker learns no weight at all: its signs and weights are a design "
            "decision stated here, because negatives made by the team teach whatever separates them from "
            "human text (story-ranker-v1 learnt that long sentences are bad). It does not see the photos."
        ),
    )

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        lm: str | None = None,
        device: str = "auto",
        precision: str = "fp32",
        batch_tokens: int | None = None,
    ) -> None:
        from vistkit.metrics.lm import get_scorer
        from vistkit.models.story_ranker_v2 import StoryRankerV2Model

        self.model = StoryRankerV2Model(model)
        try:
            self.scorer = get_scorer(
                self.model.lm if lm is None else lm, device=device, precision=precision, batch_tokens=batch_tokens
            )
        except ImportError as exc:
            raise MissingDependencyError(
                f"story-ranker needs torch and transformers for its language model ({exc.name} is missing): "
                "pip install 'vistkit[models]'"
            ) from None
        fitted = self.model.config.get("lm_used_for_statistics")
        used = f"{self.scorer.lm.name}@{self.scorer.lm.fingerprint}"
        if fitted and used != fitted:
            from vistkit.errors import warn

            warn(
                f"story-ranker's feature statistics were computed with the LM {fitted}, and this run uses {used}: "
                "its LM features are on another scale (u = 0 no longer means a typical human story), so compare "
                "only scores made with the same LM (the signature names it)"
            )

    def signature_fields(self) -> dict[str, object]:
        lm = self.scorer.signature_fields("lm-fluency")
        if "maxdev" in lm:  # bf16: the utility's bound, from the LM features' bounds through their weights / SDs
            lm["maxdev"] = self.model.lm_deviation_bound()
        model = f"{self.model.config.get('name', 'story-ranker-v2')}@{self.model.fingerprint}"
        n = next((f.get("n") for f in self.model.config["features"] if f.get("name") == "ttr"), "unknown")
        return {"model": model, **lm, "encoder": "minilm-l6", "data": f"vist-val-{n}"}

    def features(self, stories: Sequence[Story | str]) -> np.ndarray:
        """The raw feature table (rows: stories, columns: `vistkit.models.story_ranker_v2.FEATURES`)."""
        from vistkit.metrics.base import as_stories

        texts = [s.text for s in as_stories(stories, f"{self.name}: features")]
        return story_features(texts, self.scorer)

    def utility(self, stories: Sequence[Story]) -> np.ndarray:
        """The model's utility of each story's feature row (the weighted sum of its `explain` contributions)."""
        return self.model.utility(self.features(stories))

    def explain(self, stories: Sequence[Story | str]) -> list[dict[str, float]]:
        """Per story, each feature's contribution w_k s_k z_k to u (which feature made a story weak; they sum
        to u)."""
        table = self.model.contributions(self.features(stories))
        return [dict(zip(self.model.names, row.tolist(), strict=True)) for row in table]

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per story u, with each feature's contribution in ``extra["item_features"]`` (the ``--per-item`` CSV
        shows them as ``story-ranker.<feature>`` columns). Each distinct story is featurised once."""
        distinct, where = self._distinct([i.hypothesis for i in items])
        table = self.features(distinct) if distinct else np.zeros((0, len(self.model.names)))
        rows = self.model.contributions(table)[where] if distinct else np.zeros((0, 0))
        per_feature = [dict(zip(self.model.names, row.tolist(), strict=True)) for row in rows]
        values = [float(row.sum()) for row in rows]
        extra: dict[str, Any] = {"item_features": per_feature}
        floored = self.floor_reasons(distinct, table)
        if any(floored):
            notes = [floored[k] for k in where]
            extra["item_notes"] = [f"lowest score: {n}" if n else "" for n in notes]
        return mean_score(self.name, [i.item_id for i in items], values, signature, extra=extra)

    def floor_reasons(self, stories: Sequence[Story | str], table: np.ndarray) -> list[str]:
        """Per story of a feature table, why it got the lowest utility there is (no words, not English, made-up
        words, a sentence in another language; `vistkit.models.story_ranker_v2.floor_reason`); "" for the rest."""
        from vistkit.models.story_ranker_v2 import floor_reason, language_lists, story_words
        from vistkit.text.detokenize import readable_text

        unread = np.isnan(table[:, self.model.names.index("ttr")]) if len(table) else np.zeros(0, dtype=bool)
        reasons = []
        for story, floored in zip(stories, unread.tolist(), strict=True):
            text = readable_text(story.text if isinstance(story, Story) else str(story))
            reason = floor_reason(story_words(text), self.scorer.unigram, language_lists()) if floored else None
            reasons.append(reason or "")
        return reasons


def story_features(texts: Sequence[str], scorer: Any) -> np.ndarray:
    """v2's feature table for ``texts`` with an `vistkit.metrics.lm.LMScorer` (one LM pass per distinct story; the
    MiniLM sentence encoder of topic relatedness on the LM's device, fp32, each distinct sentence once)."""
    from vistkit import progress
    from vistkit.metrics.coherence import split_sentences
    from vistkit.metrics.lm import coherence_sentences, fluency_sentences
    from vistkit.models.story_ranker_v2 import FEATURES, language_lists, lexical_features, story_words
    from vistkit.text.detokenize import natural_sentence, plain_quotes, readable_text

    names = [f.name for f in FEATURES]
    table = np.full((len(texts), len(names)), np.nan)
    texts = [readable_text(t) for t in texts]
    words = [story_words(text) for text in texts]
    encoder = sentence_encoder(str(scorer.lm.device))
    for start in range(0, len(texts), ENCODER_BLOCK):  # the sentence vectors of one block of stories at a time
        rows = range(start, min(start + ENCODER_BLOCK, len(texts)))
        keys = sorted({" ".join(s) for row in rows for s in words[row] if s})
        # progress: the encoder moves the first tenth of this block's span, the LM pass the rest
        lm_start = start + 0.1 * len(rows)
        with progress.part(start, lm_start, len(texts)):
            vectors = dict(zip(keys, encoder.encode(keys), strict=True))  # one length-batched pass, distinct sentences
        encoder.forget()  # the vectors live as long as this block, not in the load-once encoder

        def encode(sentences: Sequence[str], vectors: dict[str, np.ndarray] = vectors) -> np.ndarray:
            return np.stack([vectors[k] for k in sentences])

        for row in rows:
            lex = lexical_features(words[row], encode, scorer.unigram, language_lists())
            for k, v in lex.items():
                table[row, names.index(k)] = v
        # the LM pass of the same block (its log-probabilities are held for one block, as the vectors);
        # ASCII quotes before splitting: NLTK 3.8.1's Punkt keeps "\u201cA.\u201d \u201cB.\u201d" as one sentence
        lm_input = [[natural_sentence(s) for s in split_sentences(plain_quotes(texts[row]))] for row in rows]
        with progress.part(lm_start, rows.stop, len(texts)):
            block_logprobs = scorer.logprobs(lm_input)
        block_logprobs = [
            lp if lp.error is None else _prefix_that_fits(scorer, sents, lp)
            for sents, lp in zip(lm_input, block_logprobs, strict=True)
        ]
        for row, lp in zip(rows, block_logprobs, strict=True):
            if lp.error is not None or not lp.sentences:
                continue
            table[row, names.index("lm_fluency")] = _mean_defined(fluency_sentences(lp, scorer.unigram))
            table[row, names.index("lm_coherence")] = _mean_defined(coherence_sentences(lp)[1:])
        progress.fraction(rows.stop, len(texts))
    return table


def _prefix_that_fits(scorer: Any, sentences: list[str], failed: Any) -> Any:
    """The log-probabilities of the longest run of ``sentences`` from the first that fits in the LM's context
    (``failed`` when even the first sentence does not, or the LM refused the story for another reason).

    A story longer than the context had no LM features, so they counted as typical (z = 0): a story just under
    the context that was less fluent or coherent than typical lost those penalties when one more sentence, a
    copy of its own included, pushed it over (+1.0 of u for a human story at 8,189 tokens, +2.9 with its words
    shuffled). Read from its start, a copy appended to a long story leaves its LM features as they were."""
    k = scorer.lm.sentences_that_fit(sentences)
    if k == len(sentences) or k == 0:  # refused for another reason, or not even the first sentence fits
        return failed
    lp = scorer.logprobs([sentences[:k]])[0]
    return failed if lp.error is not None else lp


#: stories whose sentence vectors and LM log-probabilities are held at once (~5 sentences x 384 floats each:
#: ~8 MB per block; ~36 KB of log-probabilities per VIST story: ~37 MB)
ENCODER_BLOCK = 1024


@lru_cache(maxsize=4)
def sentence_encoder(device: str) -> Any:
    """The packaged MiniLM sentence encoder of topic relatedness, loaded once per device (fp32)."""
    from vistkit.models.coherence_head import SentenceEncoder
    from vistkit.models.runtime import quiet_transformers

    with quiet_transformers():  # no "Loading weights" bar on an API user's stderr
        return SentenceEncoder("minilm-l6", device=device)


def _mean_defined(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return float(np.mean(kept)) if kept else math.nan


def story_ranker_score(stories: Sequence[Story], **options: Any) -> Any:
    """Per-story utilities of the offline default ranker (options as `StoryRanker`)."""
    return StoryRanker(**options).score(stories)


def story_ranker_prefer(a: Sequence[Story], b: Sequence[Story], **options: Any) -> np.ndarray:
    """Preference of each ``a[i]`` over ``b[i]`` (> 0: ``a[i]`` preferred) by the offline default ranker."""
    return StoryRanker(**options).preference(a, b)
