"""CLIPScore for stories (Hessel et al., EMNLP 2021), and the CLIP encoder the grounding metrics share.

CLIPScore (Hessel et al. 2021, Eq. 1): ``CLIP-S(c, v) = w * max(cos(E_c, E_v), 0)`` with ``w = 2.5``; the
official code (jmhessel/clipscore) prefixes every caption with ``"A photo depicts "``, L2-normalises both
embeddings, and tokenises with ``clip.tokenize(..., truncate=True)`` (a caption over CLIP's 77-token context
is cut silently).

For stories (a story = one text and its ordered photos) we offer:

- ``clipscore``: each sentence against its own photo (sentence i <-> photo i), the story score is the mean
  over its sentences (the per-sentence values are kept in ``extra``). Sentences: the source's (the five VIST
  storylets) with ``sentences="source"``, or NLTK-3.8.1 Punkt splitting (default ``"split"``); a story whose
  sentence count differs from its photo count is excluded with the reason. Sentences longer than 77 tokens are
  truncated, as the official code does; how many were is reported in ``extra``. A story with a sentence of no text
  (an empty storylet, or only spaces or invisible format characters) is excluded with the reason: scoring it would
  score the prefix alone.
- ``clipscore-story``: the whole story against every photo, mean over photos. The whole text must fit CLIP's
  77-token context: by default a longer story is excluded with its token count (``long="exclude"``);
  ``long="truncate"`` cuts it like the official code (and says so in the signature). A story of no text is
  excluded, and a ``prefix`` that fills CLIP's context by itself is refused.

Models: ``clip_model`` is a local folder in Hugging Face format, or a hub id already in the local cache
(default ``openai/clip-vit-base-patch32``, the HF port of OpenAI's ViT-B/32). Nothing is downloaded at run
time. Preprocessing uses transformers' CLIP image processor (resize shortest side to 224 bicubic, centre crop,
CLIP mean/std) with Pillow/numpy, which matches OpenAI's torchvision transform up to resampling round-off.
Embeddings are computed in float32 (the official GPU runs used CLIP's float16 weights, so the last digits of
published scores differ).
"""

from __future__ import annotations

import inspect
import math
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics._grounding import PhotoMetric
from vistkit.metrics._grounding import image_store as image_store  # re-exported (moved to _grounding)
from vistkit.metrics._grounding import with_photo_map as with_photo_map
from vistkit.metrics.base import Item, MetricCard, Score, mean_score, progress_items, register
from vistkit.models.runtime import ArrayCache

__all__ = [
    "CLIPSCORE_PREFIX",
    "CLIPSCORE_W",
    "DEFAULT_CLIP",
    "ClipEncoder",
    "ClipScore",
    "ClipScoreStory",
    "clip_s",
    "clipscore_score",
    "load_clip",
    "story_sentences",
]

DEFAULT_CLIP = "openai/clip-vit-base-patch32"
CLIPSCORE_W = 2.5
CLIPSCORE_PREFIX = "A photo depicts "


def clip_s(cosines: np.ndarray | float, *, w: float = CLIPSCORE_W) -> np.ndarray:
    """CLIP-S = w * max(cos, 0) (Hessel et al. 2021, Eq. 1), elementwise (a float32 cosine rounded above 1 counts
    as 1, so the declared range [0, w] holds)."""
    return w * np.clip(np.asarray(cosines, dtype=np.float64), 0.0, 1.0)


def story_sentences(story: Story, mode: str) -> list[str]:
    """The sentences of a story: the source's (``"source"``, when known) or Punkt-split text (``"split"``)."""
    if mode == "source":
        if story.sentences is not None:
            return [s for s in story.sentences]
        from vistkit.text.sentences import sent_tokenize

        return sent_tokenize(story.text)
    if mode == "split":
        from vistkit.text.sentences import sent_tokenize

        return sent_tokenize(story.text)
    raise InputError(f"sentences must be 'split' or 'source', not {mode!r}")


def _no_text(text: str) -> bool:
    """Whether a caption is empty once spaces and invisible format characters (which CLIP's tokenizer drops) are
    left out: scoring it would score the prefix alone."""
    from vistkit.text.detokenize import visible_text

    return not visible_text(text).strip()


# --------------------------------------------------------------------------------------------------- encoder
def _features(out: Any) -> Any:
    """transformers < 5 returns a tensor from get_*_features; >= 5 an output whose pooler_output is
    projected."""
    import torch

    return out if isinstance(out, torch.Tensor) else out.pooler_output


class ClipEncoder:
    """A loaded CLIP model: normalised text and image embeddings (float32 numpy), with per-content caches."""

    def __init__(
        self, folder: Path, *, name: str, device: str | None = None, trust: bool = False, batch_size: int = 64
    ) -> None:
        import torch
        from transformers import CLIPModel, CLIPTokenizer

        processor_class: Any
        try:  # transformers >= 5 without torchvision: the Pillow/numpy processor
            from transformers import CLIPImageProcessorPil as processor_class
        except ImportError:
            from transformers import CLIPImageProcessor as processor_class

        from vistkit.models import choose_device, load_pretrained, model_fingerprint
        from vistkit.models.checkpoints import refuse_missing_weights
        from vistkit.models.runtime import quiet_transformers

        self.name = name
        self.folder = folder
        self.device = choose_device(device)
        self.batch_size = batch_size
        from vistkit.data.readers import check_input_folder
        from vistkit.models.checkpoints import transformers_load_errors

        check_input_folder(
            folder, "CLIP model folder", "config.json, model.safetensors and the tokenizer's vocab.json and merges.txt"
        )
        with transformers_load_errors(folder, "CLIP tokenizer and image processor"):
            self.tokenizer = CLIPTokenizer.from_pretrained(str(folder), trust_remote_code=False)
            self.processor = processor_class.from_pretrained(str(folder), trust_remote_code=False)
        with quiet_transformers():
            model, info = load_pretrained(
                CLIPModel, folder, trust=trust, what="CLIP model", output_loading_info=True
            )
        refuse_missing_weights(info, folder, what="CLIP model")
        from vistkit.models.checkpoints import refuse_foreign_tokenizer

        refuse_foreign_tokenizer(self.tokenizer, int(model.config.text_config.vocab_size), folder, what="CLIP model")
        self.model = model.to(self.device).eval()
        self.max_tokens = int(self.model.config.text_config.max_position_embeddings)
        self.fingerprint = model_fingerprint(folder)
        self._torch = torch
        self._text_cache = ArrayCache()  # (text, truncate) -> unit vector, least recently used out first

    def n_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts including the start and end tokens (what must fit ``max_tokens``)."""
        return [len(ids) for ids in self.tokenizer(list(texts), truncation=False)["input_ids"]]

    def encode_texts(self, texts: Sequence[str], *, truncate: bool = True) -> np.ndarray:
        """L2-normalised text embeddings, one row per text (cached by text).

        Texts are batched by length (less padding) and every batch is launched before any result is copied
        back (one wait for the device, not one per batch).
        """
        found = {t: v for t in dict.fromkeys(texts) if (v := self._text_cache.get((t, truncate))) is not None}
        todo = sorted((t for t in dict.fromkeys(texts) if t not in found), key=len)
        torch = self._torch
        pending = []
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            limit = {"truncation": True, "max_length": self.max_tokens} if truncate else {}
            enc = self.tokenizer(chunk, padding=True, return_tensors="pt", **limit)
            if enc["input_ids"].shape[1] > self.max_tokens:
                raise InputError(
                    f"a text is longer than CLIP's {self.max_tokens} tokens: {chunk[0][:60]!r}..."
                )
            with torch.no_grad():
                feats = _features(
                    self.model.get_text_features(**{k: v.to(self.device) for k, v in enc.items()})
                )
                pending.append((chunk, torch.nn.functional.normalize(feats.float(), p=2, dim=-1)))
        for chunk, feats in pending:
            for t, f in zip(chunk, feats.cpu().numpy(), strict=True):
                found[t] = self._text_cache.put((t, truncate), f.copy())
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    @property
    def dim(self) -> int:
        """The size of CLIP's joint embedding (``projection_dim``)."""
        return int(self.model.config.projection_dim)

    def encode_images(self, images: Sequence[Any]) -> np.ndarray:
        """L2-normalised image embeddings of RGB Pillow images, one row per image.

        The CPU preprocessing (resize, crop, normalise) of the next batches runs in a worker thread
        (`vistkit.models.runtime.prefetch`) while the device encodes the current one.
        """
        from vistkit.models.runtime import prefetch

        torch = self._torch
        starts = range(0, len(images), self.batch_size)

        def pixels(start: int) -> Any:
            chunk = list(images[start : start + self.batch_size])
            # channels_last: a crop 1 or 3 pixels high is (1|3, W, 3), which transformers 4 guessed channels-first
            return self.processor(images=chunk, return_tensors="pt", input_data_format="channels_last")["pixel_values"]

        rows = []
        for pix in prefetch(map(pixels, starts), depth=2 if len(starts) > 1 else 0):
            with torch.no_grad():
                feats = _features(self.model.get_image_features(pixel_values=pix.to(self.device)))
                rows.append(torch.nn.functional.normalize(feats.float(), p=2, dim=-1))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([r.cpu().numpy() for r in rows])


_CLIP_CACHE: dict[tuple[str, str, bool], ClipEncoder] = {}
#: the `folder_stamp` of each cached encoder's folder when it was loaded
_CLIP_STAMPS: dict[tuple[str, str, bool], tuple[Any, ...]] = {}


def load_clip(
    name_or_path: str | Path = DEFAULT_CLIP,
    *,
    metric: str = "clipscore",
    device: str | None = None,
    trust: bool = False,
    batch_size: int = 64,
) -> ClipEncoder:
    """A (process-cached) `ClipEncoder`; a missing model raises one sentence naming the hub id and the
    option."""
    from vistkit.metrics._options import option_batch_size, option_bool, option_text

    batch_size = option_batch_size(metric, batch_size)
    trust = option_bool(metric, "trust_checkpoint", trust)
    name_or_path = option_text(metric, "clip_model", name_or_path)
    from vistkit.models.runtime import folder_stamp

    # a folder saved over since it was loaded (fine-tuned and saved in the same notebook) is loaded again: the
    # old model would score, and sign, the weights the folder held before
    key = (str(name_or_path), str(device), trust)
    stamp = folder_stamp(name_or_path)
    if key in _CLIP_CACHE and _CLIP_STAMPS.get(key) == stamp:
        _CLIP_CACHE[key].batch_size = batch_size
        return _CLIP_CACHE[key]
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"{metric} needs transformers and torch: pip install 'vistkit[models]'"
        ) from None
    from vistkit.models import resolve_model

    try:
        folder = resolve_model(name_or_path)
    except MissingDependencyError:
        raise MissingDependencyError(
            f"{metric} needs CLIP ViT-B/32 weights ({name_or_path}), which are not on this machine: download "
            f"them once where you have internet (hf download {DEFAULT_CLIP}) and pass the "
            f"folder "
            f"with -O {metric}.clip_model=PATH (Python: clip_model=PATH)"
        ) from None
    enc = ClipEncoder(folder, name=str(name_or_path), device=device, trust=trust, batch_size=batch_size)
    _CLIP_CACHE[key] = enc
    _CLIP_STAMPS[key] = stamp
    return enc


# --------------------------------------------------------------------------------------------------- metrics
_CARD_COMMON = (
    "CLIP-S(c, v) = 2.5 * max(cos(CLIP_text('A photo depicts ' + c), CLIP_image(v)), 0) (Hessel et al. 2021, "
    "Eq. 1), embeddings L2-normalised, CLIP ViT-B/32."
)


def prefix_label(prefix: str) -> str:
    """The signature's prefix: words joined by ``_`` for a prefix of words each followed by one space (the
    default ``A photo depicts `` -> ``A_photo_depicts``), else the exact text in JSON quotes. Stripping it signed
    ``"A photo depicts"`` (no space before the caption, other numbers) and ``""`` alike or as an empty field."""
    import json

    words = prefix.split()
    if words and prefix == " ".join(words) + " " and not any(c in prefix for c in "_|\"'"):
        return "_".join(words)
    return json.dumps(prefix, ensure_ascii=False).replace("|", "\\u007c")


class _ClipScoreBase(PhotoMetric):
    higher_is_better: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = 0.0
    upper_bound: ClassVar[float | None] = 2.5
    images_usage: ClassVar[str] = "--images DIR (Python: images=DIR)"

    def __init__(
        self,
        *,
        images: str | Path | None = None,
        photos: str | Path | dict[str, Sequence[str]] | None = None,
        clip_model: str | Path = DEFAULT_CLIP,
        prefix: str | None = CLIPSCORE_PREFIX,
        device: str | None = None,
        batch_size: int = 64,
        trust_checkpoint: bool = False,
    ) -> None:
        if prefix is None:  # no prefix (``-O clipscore.prefix=none``: the command line refuses an empty value)
            prefix = ""
        if not isinstance(prefix, str):
            raise InputError(f"{self.name}: prefix must be a text (got {type(prefix).__name__})")
        if prefix and not prefix.strip("\"'"):  # -O 'clipscore.prefix=""': the shell passes the quote marks on
            raise InputError(
                f"{self.name}: the prefix {prefix} is quote marks only, which would be put before every caption; "
                "for no prefix give prefix=none (Python: prefix=\"\")"
            )
        self.encoder = load_clip(
            clip_model, metric=self.name, device=device, trust=trust_checkpoint, batch_size=batch_size
        )
        self._use_photos(images, photos)
        n = self.encoder.n_tokens([prefix])[0]
        if n >= self.encoder.max_tokens:
            raise InputError(
                f"{self.name}: the prefix is {n} CLIP tokens with the start and end tokens, which leaves no room for "
                f"the text in CLIP's {self.encoder.max_tokens}-token context (every caption would be cut to the "
                "prefix); give a shorter prefix"
            )
        self.prefix = prefix
        self._image_cache = ArrayCache()  # photo id -> unit vector

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A variant declares only its own option, ``__init__(self, *, OPTION=..., **options)``; its signature
        is completed with the shared options here, so that ``vistkit score -O`` (which reads the signature)
        lists and accepts them all."""
        super().__init_subclass__(**kwargs)
        own = [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is not p.VAR_KEYWORD]
        shared = list(inspect.signature(_ClipScoreBase.__init__).parameters.values())[1:]
        cls.__init__.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]

    def _encode_images(self, images: Sequence[Any]) -> np.ndarray:
        return self.encoder.encode_images(images)

    def _load_photo(self, photo_id: str) -> None:
        self._photo_embedding(photo_id)

    def _photo_embedding(self, photo_id: str) -> np.ndarray:
        found = self._image_cache.get(photo_id)
        if found is None:
            found = self._image_cache.put(photo_id, self._encode_images([self.store.image(photo_id)])[0].copy())
        return found

    def signature_fields(self) -> dict[str, object]:
        from vistkit.metrics._options import model_label

        return {
            "model": f"{model_label(self.encoder.name)}@{self.encoder.fingerprint}",
            "prefix": prefix_label(self.prefix),
            "w": CLIPSCORE_W,
            **self._variant_fields(),
        }

    @abstractmethod
    def _variant_fields(self) -> dict[str, object]:
        """The signature fields of the variant (after model, prefix and w)."""

    @abstractmethod
    def _empty_extra(self) -> dict[str, Any]:
        """The variant's ``extra`` before any story is scored (`_story_value` fills it in)."""

    @abstractmethod
    def _story_value(self, story: Story, item_id: str, extra: dict[str, Any]) -> float | str:
        """The score of a story whose photos are all there (floats), or why it has none (a string)."""

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        self._check_ready()
        items = self._photos_filled(items)  # a streamed run's stories get the photo map's photos too
        excluded: dict[str, str] = {}
        values: list[float] = []
        extra = self._empty_extra()
        for item in progress_items(items):
            story = item.hypothesis
            problem = self._photo_problem(story)
            result = problem if problem is not None else self._story_value(story, item.item_id, extra)
            if isinstance(result, str):
                excluded[item.item_id] = result
                values.append(math.nan)
            else:
                values.append(result)
        return mean_score(
            self.name, [i.item_id for i in items], values, signature, excluded=excluded, extra=extra
        )


@register
class ClipScore(_ClipScoreBase):
    """Per-sentence CLIPScore against each sentence's own photo, averaged over the story."""

    name: ClassVar[str] = "clipscore"
    weights: ClassVar[str] = "CLIP ViT-B/32 (openai/clip-vit-base-patch32 in the Hugging Face cache; not shipped)"
    card: ClassVar[MetricCard] = MetricCard(
        summary="CLIPScore per sentence against its own photo (sentence i <-> photo i), mean over the story.",
        definition=_CARD_COMMON + " Story score = mean over sentences; sentences over 77 CLIP tokens are "
        "truncated as in the official code (counted in the output).",
        range="[0, 2.5], higher = text closer to its photos.",
        signature_fields="model (hub id or folder name @ weights hash), prefix (its words joined by _, or the "
        "exact text in quotes when it is not words each followed by one space; `-O clipscore.prefix=none` "
        "scores without one), w, sentence source.",
        reproduces="jmhessel/clipscore get_clip_score per (sentence, photo) pair.",
        differences="A story-level CLIPScore is not defined by Hessel et al.; the per-sentence pairing and "
        "the mean "
        "are ours. The official code runs CLIP in float16 on GPU; we use float32. A story with a sentence of no "
        "text (an empty storylet) is excluded with the reason (the official code would score the prefix alone).",
        citation="Hessel et al., CLIPScore: A Reference-free Evaluation Metric for Image Captioning, EMNLP "
        "2021.",
    )

    def __init__(self, *, sentences: str = "split", **options: Any) -> None:
        if sentences not in ("split", "source"):
            raise InputError(f"sentences must be 'split' or 'source', not {sentences!r}")
        self.sentences = sentences
        super().__init__(**options)

    def _variant_fields(self) -> dict[str, object]:
        return {"sent": self.sentences}

    def _empty_extra(self) -> dict[str, Any]:
        return {"truncated_sentences": 0, "per_sentence": {}}

    def _story_value(self, story: Story, item_id: str, extra: dict[str, Any]) -> float | str:
        sents = story_sentences(story, self.sentences)
        if len(sents) != len(story.photo_ids):
            return f"{len(sents)} sentences for {len(story.photo_ids)} photos (sentence i needs photo i)"
        if blank := [i for i, s in enumerate(sents, 1) if _no_text(s)]:
            return (
                f"sentence {blank[0]} of {len(sents)} has no text (CLIPScore would score the prefix "
                f"{self.prefix!r} alone against photo {blank[0]})"
            )
        texts = [self.prefix + s for s in sents]
        extra["truncated_sentences"] += sum(n > self.encoder.max_tokens for n in self.encoder.n_tokens(texts))
        t = self.encoder.encode_texts(texts, truncate=True)
        v = np.stack([self._photo_embedding(p) for p in story.photo_ids])
        cos = np.sum(t.astype(np.float64) * v.astype(np.float64), axis=1)
        scores = clip_s(cos)
        extra["per_sentence"][item_id] = scores.tolist()
        return float(scores.mean())


@register
class ClipScoreStory(_ClipScoreBase):
    """Whole-story CLIPScore against every photo of the sequence, mean over photos."""

    name: ClassVar[str] = "clipscore-story"
    weights: ClassVar[str] = "CLIP ViT-B/32 (openai/clip-vit-base-patch32 in the Hugging Face cache; not shipped)"
    card: ClassVar[MetricCard] = MetricCard(
        summary="CLIPScore of the whole story text against each photo of its sequence, mean over the photos.",
        definition=_CARD_COMMON + " The whole story must fit CLIP's 77 tokens: longer stories are excluded "
        "with their token count (long=exclude, default) or truncated (long=truncate, as the official code "
        "would).",
        range="[0, 2.5], higher = text closer to its photos.",
        signature_fields="model (hub id or folder name @ weights hash), prefix (its words joined by _, or the "
        "exact text in quotes when it is not words each followed by one space; `-O clipscore.prefix=none` "
        "scores without one), w, long-text policy.",
        reproduces="jmhessel/clipscore get_clip_score with the whole story as the caption (long=truncate).",
        differences="The official code truncates long captions silently; by default we refuse to score a "
        "story "
        "CLIP cannot read whole and say so. A story of no text is excluded (the official code would score the "
        "prefix alone); a prefix that fills CLIP's context by itself is refused.",
        citation="Hessel et al., CLIPScore: A Reference-free Evaluation Metric for Image Captioning, EMNLP "
        "2021.",
    )

    def __init__(self, *, long: str = "exclude", **options: Any) -> None:
        if long not in ("exclude", "truncate"):
            raise InputError(f"long must be 'exclude' or 'truncate', not {long!r}")
        self.long = long
        super().__init__(**options)

    def _variant_fields(self) -> dict[str, object]:
        return {"long": self.long}

    def _empty_extra(self) -> dict[str, Any]:
        return {"truncated_stories": 0}

    def _story_value(self, story: Story, item_id: str, extra: dict[str, Any]) -> float | str:
        if _no_text(story.text):
            return f"the story has no text (CLIPScore would score the prefix {self.prefix!r} alone)"
        text = self.prefix + story.text
        n = self.encoder.n_tokens([text])[0]
        if n > self.encoder.max_tokens:
            if self.long == "exclude":
                return (
                    f"the story is {n} CLIP tokens, over the {self.encoder.max_tokens}-token context "
                    "(use long=truncate to cut it as the official code does)"
                )
            extra["truncated_stories"] += 1
        t = self.encoder.encode_texts([text], truncate=True)[0].astype(np.float64)
        v = np.stack([self._photo_embedding(p) for p in story.photo_ids]).astype(np.float64)
        return float(clip_s(v @ t).mean())


def clipscore_score(
    stories: StorySet | Sequence[Story], *, whole_story: bool = False, **options: Any
) -> Score:
    """Functional face: ``clipscore_score(stories, images="photos/", clip_model="path/to/clip")``."""
    cls = ClipScoreStory if whole_story else ClipScore
    return cls(**options).score(stories)
