"""Coherence: RoViST-C, dHM-C (official code, need the official ALBERT checkpoint) and an offline default.

- ``rovist-c`` (usydnlp/rovist ``scripts/coherence_scorer.py``; Wang et al. 2022, RoViST Sec. 3.2):
  sentences by NLTK ``sent_tokenize``; for each *adjacent* pair (A, B): 0 when ``A.strip() == B.strip()``
  (without the model; not in the paper), else P(B follows A) from the SOP ALBERT classifier (Eqs. 4-5:
  ``softmax(W_c ALBERT([CLS] A [SEP] B [SEP]) + b_c)``); the story score is the mean over pairs, as the
  paper says. A one-sentence story has no pair (the official ``np.mean([])`` is NaN): excluded.
- ``dhm-c`` (akskuchi/dHM-visual-storytelling ``evaluate/eval_C_R.py``; Surikuchi et al. 2024, Sec. 3.1):
  the same model, but segment A is the *prefix*, all preceding sentences joined by one space. The identical-sentence
  rule compares the prefix with the sentence, and on a match the prefix is *not* extended (the official
  ``continue`` skips ``prefix += ' ' + sentence``), so in practice it only fires while the story repeats its
  first sentence. Stories whose input exceeds 512 tokens, or that have one sentence, are excluded (the
  official script catches the exception and drops them).
- ``coherence`` (vistkit's offline default): the dHM-C procedure with a small head over packaged MiniLM
  sentence embeddings instead of ALBERT (`vistkit.models.coherence_head`), usable with no download.

The official checkpoint ``sop_model_epoch4.pth.tar`` holds pickles: pass ``trust_checkpoint=True`` to read it,
or convert it once (``vistkit models convert``) and pass the converted folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit import progress
from vistkit.data.story import Story
from vistkit.errors import InputError, MissingDependencyError
from vistkit.limits import too_many_context_sentences
from vistkit.metrics.base import Item, Metric, MetricCard, Score, mean_score, register
from vistkit.models.precision import PRECISIONS as SOP_PRECISIONS
from vistkit.models.precision import precision_fields
from vistkit.models.runtime import content_key

SENT_SPLITTER = "punkt-nltk3.8.1"
STORY_CHUNK = 64  # stories prepared per step of the CPU/GPU pipeline (rovist-c, dhm-c)


def split_sentences(text: str) -> list[str]:
    """NLTK ``sent_tokenize`` (Punkt English, NLTK 3.8.1 behaviour), as both official scripts use.

    The same splitter as `vistkit.text.sentences.sent_tokenize`, with Punkt's per-candidate decision
    (``text_contains_sentbreak(context)``, a pure function of the few words around a candidate boundary given
    the fixed English parameters) memoised: VIST stories repeat the same contexts (" . we"), so this is about
    3x faster with identical output (tests/test_batching.py checks it on the dHM stories).
    """
    return list(_memo_punkt().tokenize(text))


@lru_cache(maxsize=1)
def _memo_punkt() -> Any:
    import copy

    from vistkit.text.sentences import punkt_tokenizer

    base = punkt_tokenizer()
    tok = copy.copy(base)
    decide = lru_cache(maxsize=200_000)(type(base).text_contains_sentbreak.__get__(tok))
    tok.text_contains_sentbreak = decide
    return tok


def adjacent_pairs(sentences: Sequence[str]) -> list[tuple[str, str] | None]:
    """RoViST-C pairs: ``(s_i, s_i+1)`` for each i, or ``None`` where the two are identical after strip."""
    out: list[tuple[str, str] | None] = []
    for a, b in pairwise(sentences):
        out.append(None if a.strip() == b.strip() else (a, b))
    return out


def prefix_pairs(sentences: Sequence[str]) -> list[tuple[str, str] | None]:
    """dHM-C pairs: ``(prefix, s_i)`` for i >= 1, ``None`` where the prefix equals the sentence after strip.

    The prefix starts as ``s_0`` and grows by ``' ' + s_i`` only after a scored sentence (official behaviour).
    """
    if not sentences:
        return []
    prefix = sentences[0]
    out: list[tuple[str, str] | None] = []
    for sentence in sentences[1:]:
        if prefix.strip() == sentence.strip():
            out.append(None)
            continue
        out.append((prefix, sentence))
        prefix += " " + sentence
    return out


def prefix_contexts(sentences: Sequence[str]) -> list[tuple[list[str], str] | None]:
    """`prefix_pairs` with the prefix kept as its list of sentences (for the embedding model)."""
    if not sentences:
        return []
    context = [sentences[0]]
    out: list[tuple[list[str], str] | None] = []
    for sentence in sentences[1:]:
        if " ".join(context).strip() == sentence.strip():
            out.append(None)
            continue
        out.append((list(context), sentence))
        context.append(sentence)
    return out


def _checkpoint_missing(name: str) -> MissingDependencyError:
    from vistkit.models.sop import CHECKPOINT_HELP

    return MissingDependencyError(
        f"{name} needs {CHECKPOINT_HELP}: pass model=PATH (CLI: -O {name}.model=PATH), the .pth.tar with "
        f"trust_checkpoint=True (-O {name}.trust_checkpoint=true) or its folder converted by `vistkit models "
        "convert`; the offline metric `coherence` needs no download"
    )


#: largest |story score - exact fp32 story score| of the offline `coherence` metric per opt-in mode of its MiniLM
#: encoder (bench/bench_precision.py --metrics coherence --stories 200: tf32x3 2.2e-7 with the tensor cores'
#: rounding emulated, bf16 5.8e-3 on a CPU), rounded up; plain tf32 is not offered (a GPU must measure it)
COHERENCE_DEVIATION: dict[str, str] = {"tf32x3": "1e-6", "bf16": "1e-2"}
#: the precision modes of the offline `coherence` metric (checked before its model loads: `Metric.precheck`)
PRECISIONS = ("fp32", *COHERENCE_DEVIATION)

_SOP_CARD_COMMON = (
    "Model: the RoViST-C sentence-order classifier (ALBERT-large-v1 pooler -> Linear(1024, 2), softmax[1]; "
    "RoViST Sec. 3.2, Eqs. 4-5) from "
    "sop_model_epoch4.pth.tar. Input per pair: `[CLS] A [SEP] B [SEP]`, token types 0 for A (+2) and 1 for B "
    "(+1), no truncation. Sentences: NLTK sent_tokenize. Option precision: fp32 (default, exact); tf32x3 "
    "(fp32-accurate linear layers as three TF32 tensor-core products, CUTLASS's split; measured 7.5e-8 from "
    "fp32 with the tensor cores' rounding emulated); tf32 / bf16 (faster, ~3e-4 / ~2e-3): a non-fp32 mode "
    "adds precision and maxdev to the signature."
)


@register
class RovistC(Metric):
    """RoViST-C (official ``coherence_scorer.py``): mean SOP probability over adjacent sentence pairs."""

    name: ClassVar[str] = "rovist-c"
    #: the precision modes of the SOP model (`vistkit.models.sop`; `PRECISIONS` is the offline coherence's)
    PRECISIONS: ClassVar[tuple[str, ...]] = SOP_PRECISIONS
    weights: ClassVar[str] = "the official RoViST-C checkpoint (sop_model_epoch4.pth.tar; not shipped)"
    context: ClassVar[str] = "adjacent"
    card: ClassVar[MetricCard] = MetricCard(
        summary="RoViST coherence: mean probability that each sentence follows the one before (ALBERT SOP).",
        definition=(
            "RoViST Sec. 3.2: C = mean over adjacent sentence pairs (A, B) of P(B follows A); a pair with A.strip() == "
            "B.strip() "
            "scores 0 without the model. " + _SOP_CARD_COMMON
        ),
        range="[0, 1], higher is more coherent; one-sentence stories are excluded (no pair).",
        signature_fields="model (checkpoint name + SHA-256 prefix), cfg and tok (hashes of the ALBERT config "
        "and of the tokenizer used; the checkpoint's hash covers neither), context:adjacent, sentence splitter; "
        "precision and maxdev when a mode other than fp32 is chosen.",
        reproduces="usydnlp/rovist scripts/coherence_scorer.py given the official checkpoint.",
        differences=(
            "The paper describes the same adjacent-pair mean; the identical-pair rule is only in the code. "
            "The official script would crash on a pair longer than 512 tokens; here that story is excluded."
        ),
        citation="Wang, Han & Poon, RoViST: Learning Robust Metrics for Visual Storytelling, Findings of "
        "NAACL 2022.",
    )

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        trust_checkpoint: bool = False,
        config: Any = None,
        tokenizer: Any = None,
        device: str | None = None,
        batch_size: int | None = None,
        cache: bool | str | Path = False,
        precision: str = "fp32",
    ) -> None:
        if model is None:
            raise _checkpoint_missing(self.name)
        from vistkit.metrics._options import option_batch_size, option_bool
        from vistkit.models.sop import load_sop_model

        trust_checkpoint = option_bool(self.name, "trust_checkpoint", trust_checkpoint)
        if batch_size is not None:
            batch_size = option_batch_size(self.name, batch_size)
        # a boolean (or the word, as the CLI reads it); other text is the cache file's path
        words = ("true", "yes", "on", "1", "false", "no", "off", "0")
        if not isinstance(cache, Path) and not (isinstance(cache, str) and cache.strip().lower() not in words):
            cache = option_bool(self.name, "cache", cache)
        elif not str(cache).strip():
            raise InputError(f"{self.name}: cache is empty; give true, false or the cache file's path")

        self.model = load_sop_model(
            model,
            trust_checkpoint=trust_checkpoint,
            config=config,
            tokenizer=tokenizer,
            device=device,
            batch_size=batch_size,
            precision=precision,
        )
        self.cache = _open_cache(cache)

    def signature_fields(self) -> dict[str, object]:
        fields: dict[str, object] = {
            "model": f"rovist-sop-albert@{self.model.fingerprint}",
            # hashes of the ALBERT config (cfg) and the tokenizer (tok) used: the checkpoint's hash covers neither
            **getattr(self.model, "signature_overrides", {}),
            "context": self.context,
            "sent": SENT_SPLITTER,
        }
        from vistkit.models.sop import FAST_DEVIATION

        # an opt-in mode (tf32x3: fp32-accurate; tf32/bf16: faster) and its measured bound (BENCHMARKS.md)
        fields.update(precision_fields(self.model.precision, FAST_DEVIATION))
        return fields

    def story_pairs(self, sentences: Sequence[str]) -> list[tuple[str, str] | None]:
        """RoViST-C pairs: each sentence with the next (`adjacent_pairs`)."""
        return adjacent_pairs(sentences)

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Split, pair, tokenise (a worker thread, `STORY_CHUNK` stories at a time) while the model runs.

        Encoded pairs go into streaming length buckets (`LengthBuckets`); a full bucket (the device's token
        budget) is launched at once, asynchronously on a GPU, and everything is gathered once at the end, so
        the CPU work of the next chunk overlaps the GPU work of the full batches.
        """
        from vistkit.models.runtime import prefetch

        ids = [it.item_id for it in items]
        texts = [it.hypothesis.text for it in items]
        namespace = "|".join(f"{k}:{v}" for k, v in self.signature_fields().items() if k != "sent")
        runner = self.model.runner()
        plans: list[list[tuple[str, str] | None]] = []
        # per model pair, in plan order: (cached value or None, error or None, row in the runner)
        slots: list[tuple[float | None, str | None, int]] = []
        fresh_keys: list[tuple[int, str]] = []
        n_rows = 0

        too_long: dict[int, str] = {}  # story -> why it is not scored (prefix context: too many sentences)

        def plan_of(k: int) -> list[tuple[str, str] | None]:
            sentences = split_sentences(texts[k])
            reason = too_many_context_sentences(len(sentences)) if self.context == "prefix" else None
            if reason is not None:
                too_long[k] = reason  # before any pair is built: the prefixes grow with the square
                return []
            return self.story_pairs(sentences)

        def prepare(start: int) -> tuple[list[Any], list[Any], list[str], dict[str, float], list[int], list[Any]]:
            chunk_plans = [plan_of(k) for k in range(start, min(start + STORY_CHUNK, len(texts)))]
            flat = [p for plan in chunk_plans for p in plan if p is not None]
            keys = [content_key(namespace, a, b) for a, b in flat] if self.cache is not None else []
            known = self.cache.get_many(keys) if self.cache is not None else {}
            todo = [i for i in range(len(flat)) if not keys or keys[i] not in known]
            return chunk_plans, flat, keys, known, todo, self.model.encode_many([flat[i] for i in todo])

        starts = range(0, len(items), STORY_CHUNK)
        pipeline = prefetch(map(prepare, starts), depth=4 if len(starts) > 1 else 0)
        buckets = self.model.buckets()
        waiting: dict[int, Any] = {}  # row -> encoded pair, until its length bucket is full
        for chunk_plans, flat, keys, known, todo, encoded in pipeline:
            plans += chunk_plans
            for j, enc in enumerate(encoded):
                if enc.error is None:
                    waiting[n_rows + j] = enc
                    batch = buckets.add(n_rows + j, len(enc.input_ids))
                    if batch is not None:  # full: launch now, while the next chunk is prepared
                        self.model.launch(batch, [waiting.pop(r) for r in batch], runner)
            row_of = {i: n_rows + j for j, i in enumerate(todo)}
            error_of = {i: encoded[j].error for j, i in enumerate(todo)}
            for i in range(len(flat)):
                if i in row_of:
                    slots.append((None, error_of[i], row_of[i]))
                    if keys and error_of[i] is None:
                        fresh_keys.append((row_of[i], keys[i]))
                else:
                    slots.append((known[keys[i]], None, -1))
            n_rows += len(todo)
            progress.fraction(0.9 * len(plans), len(items))
        for batch in buckets.flush():
            self.model.launch(batch, [waiting.pop(r) for r in batch], runner)
        fresh = runner.gather(n_rows)
        if self.cache is not None and fresh_keys:
            self.cache.put_many({key: float(fresh[row]) for row, key in fresh_keys})
        per_story: list[list[float]] = [[] for _ in items]
        errors: dict[int, str] = {}
        it_slots = iter(slots)
        for k, plan in enumerate(plans):
            for p in plan:
                if p is None:
                    per_story[k].append(0.0)
                    continue
                value, err, row = next(it_slots)
                if err is not None:
                    errors.setdefault(k, err)
                per_story[k].append(float(fresh[row]) if value is None else value)
        values: list[float] = []
        excluded: dict[str, str] = {}
        for k, scores in enumerate(per_story):
            if k in errors or k in too_long:
                excluded[ids[k]] = errors.get(k) or too_long[k]
                values.append(math.nan)
            elif not scores:
                excluded[ids[k]] = "fewer than two sentences (no sentence pair)"
                values.append(math.nan)
            else:
                values.append(float(np.mean(scores)))
        return mean_score(self.name, ids, values, signature, excluded=excluded)


@register
class DhmC(RovistC):
    """dHM-C (official ``eval_C_R.py``): RoViST-C with all preceding sentences as segment A."""

    name: ClassVar[str] = "dhm-c"
    context: ClassVar[str] = "prefix"
    card: ClassVar[MetricCard] = MetricCard(
        summary="dHM coherence: mean probability that each sentence follows all preceding ones (ALBERT SOP).",
        definition=(
            "dHM Sec. 3.1: C = mean over sentences i >= 2 of P(s_i follows prefix), prefix = s_1 ... s_i-1 "
            "joined by one space; a sentence equal (after strip) to the prefix scores 0 and does not extend it. "
            + _SOP_CARD_COMMON
        ),
        range="[0, 1], higher is more coherent; excludes one-sentence stories and inputs over 512 tokens.",
        signature_fields="model (checkpoint name + SHA-256 prefix), cfg and tok (hashes of the ALBERT config "
        "and of the tokenizer used; the checkpoint's hash covers neither), context:prefix, sentence splitter; "
        "precision and maxdev when a mode other than fp32 is chosen.",
        reproduces="akskuchi/dHM-visual-storytelling evaluate/eval_C_R.py (the data/scores/*/*_C.csv files).",
        differences=(
            "The dHM paper (Sec. 3.1) describes RoViST-C with the concatenated prefix of all preceding "
            "sentences as context and no identical-sentence rule; the code's identical rule compares the "
            "whole prefix, so it only catches a repeated first sentence. We follow the code."
        ),
        citation=(
            "Surikuchi et al. 2024, Not (yet) the whole story: Evaluating Visual Storytelling Requires More "
            "than Measuring Coherence, Grounding, and Repetition (Findings of EMNLP)."
        ),
    )

    def story_pairs(self, sentences: Sequence[str]) -> list[tuple[str, str] | None]:
        """dHM-C pairs: the preceding sentences with each sentence (`prefix_pairs`)."""
        return prefix_pairs(sentences)


@register
class Coherence(Metric):
    """Offline default: the dHM-C procedure with a MiniLM-embedding sentence-order head shipped in vistkit."""

    name: ClassVar[str] = "coherence"
    card: ClassVar[MetricCard] = MetricCard(
        summary="Coherence by vistkit's offline model: mean P(each sentence follows the ones before it).",
        definition=(
            "The dHM-C procedure (prefix context, identical-prefix rule, mean over sentences 2..n) with "
            "P(s_i follows s_1..s_i-1) from a small MLP over frozen all-MiniLM-L6-v2 sentence embeddings "
            "(previous sentence, mean of the prefix, candidate), trained self-supervised on human VIST *val* "
            "stories (swap / future / other-story / repeat negatives). See docs/models/coherence.md."
        ),
        range="[0, 1], higher is more coherent; one-sentence stories are excluded.",
        signature_fields="model (name + head SHA-256 prefix), encoder, maxlen and objective (from the model's "
        "config.json, when not 256 and pointwise), context:prefix, sentence splitter; with "
        "precision=tf32x3 (fp32-accurate on tensor cores) or bf16, precision and maxdev (measured: 1e-6 / 1e-2).",
        reproduces=(
            "Not an official metric: an offline stand-in for dHM-C / RoViST-C. Agreement with the official "
            "dHM C "
            "scores is reported in its model card."
        ),
        differences="Not the official ALBERT SOP checkpoint; do not compare its numbers with rovist-c/dhm-c.",
    )

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        device: str | None = None,
        batch_size: int = 64,
        precision: str = "fp32",
    ) -> None:
        from vistkit.metrics._options import option_batch_size
        from vistkit.models.coherence_head import CoherenceModel

        batch_size = option_batch_size(self.name, batch_size)
        try:
            self.model = CoherenceModel(model, device=device, batch_size=batch_size, precision=precision)
        except ImportError:
            raise MissingDependencyError(
                "the coherence metric needs torch and transformers: pip install 'vistkit[models]'"
            ) from None

    def signature_fields(self) -> dict[str, object]:
        # the hash is the head's weights; the encoder, its token limit and the objective come from the folder's
        # config.json (a folder with the same head and another config was signed as the packaged model)
        config = self.model.config
        encoder = str(config.get("encoder", "minilm-l6"))
        fields: dict[str, object] = {
            "model": f"{self.model.name}@{self.model.fingerprint}",
            # another encoder by its name and its weights' hash: two folders of one name (retrained) differ
            "encoder": "all-MiniLM-L6-v2" if encoder == "minilm-l6" else self._encoder_label(encoder),
        }
        if int(config.get("max_length", 256)) != 256:
            fields["maxlen"] = int(config.get("max_length", 256))
        if self.model.objective != "pointwise":
            fields["objective"] = self.model.objective
        return {
            **fields,
            "context": "prefix",
            "sent": SENT_SPLITTER,
            **precision_fields(self.model.encoder.precision, COHERENCE_DEVIATION),
        }

    def _encoder_label(self, encoder: str) -> str:
        """``NAME@HASH12`` of the encoder a head's config.json names (its weights' `model_fingerprint`, hashed
        once)."""
        from vistkit.metrics._options import model_label
        from vistkit.models.checkpoints import model_fingerprint

        if getattr(self, "_encoder_hash", None) is None:
            self._encoder_hash = model_fingerprint(self.model.encoder.folder)
        return f"{model_label(encoder)}@{self._encoder_hash}"

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per story the mean head probability over its dHM-C (prefix, sentence) pairs, a pair whose prefix equals the
        sentence counted as 0; a story with fewer than two sentences, or too many for the context, is excluded."""
        ids = [it.item_id for it in items]
        split = [split_sentences(it.hypothesis.text) for it in items]
        too_long = {k: r for k, s in enumerate(split) if (r := too_many_context_sentences(len(s))) is not None}
        plans = [[] if k in too_long else prefix_contexts(s) for k, s in enumerate(split)]
        flat = [p for plan in plans for p in plan if p is not None]
        probs = iter(self.model.context_probs([c for c, _ in flat], [s for _, s in flat]))
        values: list[float] = []
        excluded: dict[str, str] = {}
        for k, plan in enumerate(plans):
            scores = [0.0 if p is None else float(next(probs)) for p in plan]
            if k in too_long:
                excluded[ids[k]] = too_long[k]
                values.append(math.nan)
            elif not scores:
                excluded[ids[k]] = "fewer than two sentences (no sentence pair)"
                values.append(math.nan)
            else:
                values.append(float(np.mean(scores)))
        return mean_score(self.name, ids, values, signature, excluded=excluded)


def _open_cache(cache: bool | str | Path) -> Any:
    if cache is False or cache is None:
        return None
    from vistkit.models.runtime import ScoreCache

    return ScoreCache(None if cache is True else cache)


# ---------------------------------------------------------------------------------------------------
# functional
def rovist_c_score(stories: Sequence[Story], **options: Any) -> Score:
    """RoViST-C of ``stories`` (options as `RovistC`: ``model=``, ``trust_checkpoint=``, ...)."""
    return RovistC(**options).score(stories)


def dhm_c_score(stories: Sequence[Story], **options: Any) -> Score:
    """dHM-C of ``stories`` (options as `RovistC`)."""
    return DhmC(**options).score(stories)


def coherence_score(stories: Sequence[Story], **options: Any) -> Score:
    """vistkit's offline coherence of ``stories`` (``model=`` a retrained head folder, optional)."""
    return Coherence(**options).score(stories)
