"""``story-ranker``: vistkit's offline default learned ranker (reference-free, text only, no download).

It reads a story and gives it a utility u; of two stories of the same photos it prefers the one with the larger
u (``prefer(a, b) = u(a) - u(b)``, a Bradley-Terry model). The model (`vistkit.models.story_ranker`) is a small
head over interpretable features (repetition, diversity, shape, relatedness of sentences) and
the mean / first / last static sentence vectors, trained with the pairwise logistic loss on VIST *val* human
stories against synthetic errors, stitched photo captions and SmolLM2 continuations (`scripts/train_ranker.py`
rebuilds it bit for bit; card: docs/models/story-ranker.md).

It is not Vrank (Hsu et al. 2022, Sect. 4), which encodes both stories at once and needs VHED to train: that is
the ``vrank`` metric and ``vistkit vrank train``. This ranker was trained without any human judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Story
from vistkit.errors import MissingDependencyError
from vistkit.metrics.base import Item, MetricCard, Score, UtilityRanker, mean_score, register


@register
class StoryRanker(UtilityRanker):
    """The offline default ranker: a utility per story, preference = difference of utilities."""

    name: ClassVar[str] = "story-ranker"
    higher_is_better: ClassVar[bool] = True
    card: ClassVar[MetricCard] = MetricCard(
        summary=(
            "vistkit's offline learned ranker: which of two stories people would prefer, from the text alone "
            "(reference-free, no photos, no download)."
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
        reproduces="Not an official metric. Development numbers (proxy pairs, VWP synthetic errors) in its card.",
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
        return self.model.utility([s.text for s in stories])

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per-story score sigmoid(u): under the Bradley-Terry model, the probability that the story is preferred
        over a typical VIST val human story (training centres their mean utility at 0). Bounded in (0, 1), so a
        few degenerate stories cannot dominate a story-level correlation; pair preferences use u itself."""
        u = self._utilities([i.hypothesis for i in items])
        values = 1.0 / (1.0 + np.exp(-np.clip(u, -700.0, 700.0)))
        return mean_score(self.name, [i.item_id for i in items], values.tolist(), signature)


def story_ranker_score(stories: Sequence[Story], **options: Any) -> Any:
    """Per-story utilities of the offline default ranker (options as `StoryRanker`)."""
    return StoryRanker(**options).score(stories)


def story_ranker_prefer(a: Sequence[Story], b: Sequence[Story], **options: Any) -> np.ndarray:
    """Preference of each ``a[i]`` over ``b[i]`` (> 0: ``a[i]`` preferred) by the offline default ranker."""
    return StoryRanker(**options).preference(a, b)
