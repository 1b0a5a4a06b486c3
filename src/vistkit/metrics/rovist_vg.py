"""RoViST-VG: visual grounding of a story's nouns (Wang et al., Findings of NAACL 2022, "RoViST", Sec. 3.1).

Reproduces the official scorer (usydnlp/rovist ``scripts/visual_grounding_scorer.py`` with ``rovist_vg.py``
and ``extract_nouns.py``):

1. Nouns (``extract_nouns.py``): sentences by ``nltk.sent_tokenize`` (NLTK 3.8.1 Punkt, `vistkit.text`), VIST
   placeholders ``[male]``... replaced by the bare word, ``nltk.word_tokenize``, POS tags ``NN/NNS/NNP/NNPS``,
   the token ``i`` skipped, de-duplicated within each sentence (a noun in two sentences counts twice).
2. Text side (Algorithm 1, line 3): the GloVe-300 vector of the noun (``"unk"``'s vector for an unknown word;
   the lookup is case-sensitive, as gensim's) -> ``Linear(300, 1024)`` -> ``tanh`` -> L2-normalise.
3. Image side (Algorithm 1, lines 1-2): each region through ViT (``google/vit-base-patch16-224-in21k``
   architecture, weights fine-tuned inside the RoViST checkpoint) pooler output -> ``Linear(768, 1024)`` ->
   ``tanh`` -> L2-normalise; the first 10 regions of each photo (the paper's "top 10 by Faster R-CNN
   confidence": the order of the regions file), all photos of the sequence.
4. Eq. 2: ``recall`` = per noun the max cosine over regions and photos; ``x = idf(noun) * recall``; story
   score ``S_VG = log(sum(exp(x)))`` (log-sum-exp over nouns). ``idf`` is Eq. 1, ``log(N / (1 + df))``, as
   stored in the release's table.

Official code vs paper: the paper presents IDF weighting as an option ("we further experiment by
multiplying ..."); in the code ``--use_idf`` is parsed as a string, so ``bool("0")`` is True and IDF weighting
is always applied; we always apply it (the IDF table, ``idf_dict.pkl`` of the RoViST release, is required).
The paper's optional scaling (Eq. 3, ``2 / (1 + exp(-0.5 * S_VG)) - 1``) is not in the released scorer:
``rovist-vg`` returns the unscaled ``S_VG`` as the code does, and `RovistVGScaled` (``rovist-vg-scaled``)
applies Eq. 3 to it. The official code would crash on a noun without an IDF entry or a story with no noun
(``log(0)``); we exclude such stories with the reason.

POS tagging: NLTK's averaged-perceptron tagger when its data is installed (``nltk.download(
'averaged_perceptron_tagger')``: exact), else spaCy's tagger (``en_core_web_sm``) on NLTK's tokens (PTB tags
too; the signature says which).

Models: ``checkpoint`` is ``r2p_model_epoch2.pth.tar`` (a pickle: needs ``trust_checkpoint=True``) or a folder
converted once by ``vistkit.models.save_converted``; ``glove`` is ``glove.6B.300d.txt`` (or any GloVe/word2vec
text file). Neither can be downloaded here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit import progress
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics._grounding import PhotoMetric
from vistkit.metrics.base import Item, MetricCard, Score, mean_score, register
from vistkit.metrics.clipscore import story_sentences
from vistkit.metrics.groovist import (
    SPACY_BATCH_TOKENS,
    SPACY_PIECE_TOKENS,
    load_spacy,
    replace_placeholders,
    spacy_batches,
)

__all__ = [
    "NOUN_TAGS",
    "RovistVG",
    "RovistVGModel",
    "RovistVGScaled",
    "load_glove",
    "log_sum_exp_score",
    "rovist_vg_scaled_score",
    "rovist_vg_score",
    "scaled_sigmoid",
    "sentence_nouns",
    "story_nouns",
]

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
VIT_MEAN = (0.5, 0.5, 0.5)  # ViTFeatureExtractor of google/vit-base-patch16-224-in21k
VIT_STD = (0.5, 0.5, 0.5)


# ----------------------------------------------------------------------------------------------------- nouns
@lru_cache(maxsize=1)
def _nltk_tagger() -> Any | None:
    try:
        import nltk

        # NLTK >= 3.9 reads only the JSON tagger (same weights as 3.8's pickled averaged_perceptron_tagger)
        try:
            nltk.data.find("taggers/averaged_perceptron_tagger_eng")
            return nltk.pos_tag
        except (LookupError, PermissionError, ValueError):
            pass
    except ImportError:
        pass
    return None


def pos_tag(tokens: list[str], *, tagger: str = "auto", spacy_model: str = "en_core_web_sm") -> list[str]:
    """PTB tags of ``tokens``: NLTK's perceptron tagger (``"nltk"``) or spaCy's on the same tokens
    (``"spacy"``)."""
    if not tokens:
        return []
    if tagger in ("auto", "nltk"):
        fn = _nltk_tagger()
        if fn is not None:
            return [t for _, t in fn(tokens)]
        if tagger == "nltk":
            raise MissingDependencyError(
                "NLTK's POS tagger data is not installed: run "
                "nltk.download('averaged_perceptron_tagger_eng') "
                "where you have internet, or use tagger=spacy"
            )
    return pos_tag_many([tokens], tagger=tagger, spacy_model=spacy_model)[0]


def pos_tag_many(
    sentences: Sequence[list[str]], *, tagger: str = "auto", spacy_model: str = "en_core_web_sm"
) -> list[list[str]]:
    """`pos_tag` of each token list; spaCy tags them in batches (each sentence is its own Doc, so every sentence
    gets the tags it gets alone, at a fraction of the cost: a story of 24,000 sentences took minutes one by one)."""
    if tagger in ("auto", "nltk"):
        fn = _nltk_tagger()
        if fn is not None:
            return [[t for _, t in fn(tokens)] if tokens else [] for tokens in sentences]
        if tagger == "nltk":
            raise MissingDependencyError(
                "NLTK's POS tagger data is not installed: run "
                "nltk.download('averaged_perceptron_tagger_eng') "
                "where you have internet, or use tagger=spacy"
            )
    from spacy.tokens import Doc

    out: list[list[str]] = [[] for _ in sentences]
    todo = [i for i, tokens in enumerate(sentences) if tokens]
    if not todo:
        return out
    nlp = load_spacy(spacy_model)
    # a sentence over SPACY_PIECE_TOKENS tokens is tagged in pieces and a batch holds at most SPACY_BATCH_TOKENS
    # (spaCy's memory grows with the tokens it reads at once; no real sentence is cut)
    pieces = [
        (i, list(sentences[i][k : k + SPACY_PIECE_TOKENS]))
        for i in todo
        for k in range(0, len(sentences[i]), SPACY_PIECE_TOKENS)
    ]
    for batch in spacy_batches(pieces, lambda piece: len(piece[1]), SPACY_BATCH_TOKENS):
        docs: Any = (Doc(nlp.vocab, words=words) for _, words in batch)
        for _, proc in nlp.pipeline:
            docs = proc.pipe(docs, batch_size=len(batch)) if hasattr(proc, "pipe") else map(proc, docs)
        for (i, _), doc in zip(batch, docs, strict=True):
            out[i] += [t.tag_ for t in doc]
    return out


def tagger_name(tagger: str, spacy_model: str) -> str:
    if tagger in ("auto", "nltk") and _nltk_tagger() is not None:
        return "nltk-perceptron"
    from vistkit.metrics.groovist import spacy_model_name

    return "spacy-" + spacy_model_name(load_spacy(spacy_model))


def sentence_nouns(sentence: str, *, tagger: str = "auto", spacy_model: str = "en_core_web_sm") -> list[str]:
    """The distinct nouns of one sentence (``extract_nouns.py``), in first-occurrence order."""
    return story_nouns([sentence], tagger=tagger, spacy_model=spacy_model)


def story_nouns(sentences: Sequence[str], *, tagger: str = "auto", spacy_model: str = "en_core_web_sm") -> list[str]:
    """Nouns of a story: each sentence's distinct nouns, concatenated (repeats across sentences kept)."""
    from vistkit.text.tokenize import word_tokenize

    tokens = [word_tokenize(replace_placeholders(s)) for s in sentences]
    out: list[str] = []
    for toks, tags in zip(tokens, pos_tag_many(tokens, tagger=tagger, spacy_model=spacy_model), strict=True):
        out += dict.fromkeys(tok for tok, tag in zip(toks, tags, strict=True) if tok != "i" and tag in NOUN_TAGS)
    return out


# ------------------------------------------------------------------------------------------------ arithmetic
def log_sum_exp_score(
    recall: Sequence[float] | np.ndarray, idf: Sequence[float] | np.ndarray, *, aggregate: str = "log_sum_exp"
) -> float:
    """``vg_score``: x = idf * recall; ``log(sum(exp(x)))`` (RoViST Eq. 2; or ``sum`` / ``mean``, the code's
    other options)."""
    x = np.asarray(recall, dtype=np.float64) * np.asarray(idf, dtype=np.float64)
    if aggregate == "log_sum_exp":
        with np.errstate(over="ignore", divide="ignore"):
            value = float(np.log(np.exp(x).sum()))
        if not math.isfinite(value) and x.size and np.isfinite(x).all():
            # exp overflowed (or every term underflowed): the same quantity without it, max + log(sum(exp(x - max)))
            top = float(x.max())
            value = top + float(np.log(np.exp(x - top).sum()))
        return value
    if aggregate == "sum":
        return float(x.sum())
    if aggregate == "mean":
        return float(x.mean())
    raise InputError(f"aggregate must be log_sum_exp, sum or mean, not {aggregate!r}")


def scaled_sigmoid(s_vg: float) -> float:
    """RoViST Eq. 3, the optional scaling of ``S_VG``: ``2 / (1 + exp(-0.5 * S_VG)) - 1``.

    Computed as ``tanh(S_VG / 4)``, the same function (no overflow for a very negative ``S_VG``). Strictly
    increasing, odd, in (-1, 1); in [0, 1) when ``S_VG >= 0``, the case the paper describes."""
    return math.tanh(0.25 * s_vg)


# ----------------------------------------------------------------------------------------------- GloVe / IDF
GLOVE_MAX_BYTES = 16 << 30
GLOVE_MAX_LINE = 1 << 20


def load_glove(path: str | Path) -> dict[str, np.ndarray]:
    """GloVe (``word v1 v2 ...`` per line) or word2vec text (a ``count dim`` first line) -> ``{word:
    vector}``."""
    from vistkit.data.readers import is_input_file, iter_lines, open_text

    p = Path(path)
    if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
        raise MissingDependencyError(
            f"GloVe vectors not found at {p}: rovist-vg needs glove.6B.300d.txt (Stanford GloVe 6B), passed "
            "as glove=PATH"
        )

    out: dict[str, np.ndarray] = {}
    # the vectors are streamed line by line: the 1 GB glove.6B.300d.txt (and the 5.6 GB 840B) exceed the input
    # limit for stories, so only a line (a 300-d vector is ~3 KB) is bounded
    with open_text(p, max_bytes=GLOVE_MAX_BYTES) as fh:
        for n, line in enumerate(iter_lines(fh, p, max_line=GLOVE_MAX_LINE)):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if n == 0 and len(parts) == 2 and all(x.isdigit() for x in parts):
                continue
            try:
                out[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                raise InputError(f"{p} line {n + 1}: not 'word v1 v2 ...' with numbers") from None
    if "unk" not in out:
        raise InputError(f"{p}: the vectors have no 'unk' entry, which RoViST-VG uses for unknown words")
    return out


# what RoViST's idf_dict.pkl may hold beyond plain dict/str/float/int (which a pickle stores without naming any
# global): the mapping types of ``collections`` with int/float default factories, and numpy float scalars (an
# IDF computed with ``np.log``). Anything else is refused by name: no code in the file runs.
IDF_PICKLE_GLOBALS: dict[str, set[str]] = {
    "builtins": {"dict", "float", "int"},
    "__builtin__": {"dict", "float", "int"},
    "collections": {"OrderedDict", "defaultdict", "Counter"},
    "_codecs": {"encode"},  # how protocol-2 pickles store a numpy scalar's bytes
    "numpy": {"dtype"},
    "numpy.core.multiarray": {"scalar"},
    "numpy._core.multiarray": {"scalar"},
}


def load_idf(path: str | Path, *, trust: bool = False) -> dict[str, float]:
    """The IDF table: JSON ``{word: idf}``, or RoViST's ``idf_dict.pkl`` (a pickle: only with ``trust``, and
    even then through a restricted unpickler that admits only a word -> number mapping, see
    `IDF_PICKLE_GLOBALS`)."""
    from vistkit.data.readers import is_input_file, load_json, split_member
    from vistkit.models.checkpoints import load_restricted_pickle

    p = Path(path)
    if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
        raise MissingDependencyError(
            f"IDF table not found at {p}: rovist-vg needs RoViST's idf_dict.pkl (idf=PATH)"
        )
    archive, member = split_member(p)
    if (member or archive.name).lower().endswith((".json", ".json.gz", ".json.zip")):
        data = load_json(p)
    else:
        if not trust:
            raise InputError(
                f"{p.name} is a pickle, which can run code when loaded; pass trust_checkpoint=True if you "
                "trust it, or give the table as JSON {word: idf}"
            )
        data = load_restricted_pickle(
            p, allowed=IDF_PICKLE_GLOBALS, what="an IDF table may hold only a dictionary of words and numbers"
        )
    if not isinstance(data, dict):
        raise InputError(f"{p.name}: an IDF table is a dictionary {{word: idf}}, found {type(data).__name__}")
    out: dict[str, float] = {}
    for k, v in data.items():
        word = k.decode("utf-8", "replace") if isinstance(k, bytes) else k
        if not isinstance(word, str):
            raise InputError(f"{p.name}: IDF keys must be words, found {type(k).__name__} {k!r:.40}")
        try:
            out[word] = float(v)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{p.name}: the IDF of {word[:40]!r} is not a number ({v!r:.40})") from None
    return checked_idf(out, p.name)


def checked_idf(table: dict[Any, Any], where: str) -> dict[str, float]:
    """``table`` as {word: finite float}; a non-finite or non-numeric weight is one `InputError` naming the word
    (an infinite IDF would make every story with that noun score inf or NaN)."""
    out: dict[str, float] = {}
    for word, v in table.items():
        if not isinstance(word, str):
            raise InputError(f"{where}: IDF keys must be words, found {type(word).__name__} {word!r:.40}")
        try:
            value = float(v)
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        if isinstance(v, bool) or not math.isfinite(value):
            raise InputError(f"{where}: the IDF of {word[:40]!r} must be a finite number, not {v!r:.40}")
        out[word] = value
    return out


# ----------------------------------------------------------------------------------------------------- model
# transformers < 5 ViT parameter names (as in the 2022 RoViST checkpoint) -> transformers >= 5 names
_LEGACY_VIT = (
    (r"^encoder\.layer\.(\d+)\.attention\.attention\.query\.", r"layers.\1.attention.q_proj."),
    (r"^encoder\.layer\.(\d+)\.attention\.attention\.key\.", r"layers.\1.attention.k_proj."),
    (r"^encoder\.layer\.(\d+)\.attention\.attention\.value\.", r"layers.\1.attention.v_proj."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.attention.o_proj."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.mlp.fc1."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.mlp.fc2."),
    (r"^encoder\.layer\.(\d+)\.layernorm_(before|after)\.", r"layers.\1.layernorm_\2."),
)


def legacy_vit_keys(state: dict[str, Any], model_keys: set[str]) -> dict[str, Any]:
    """Rename a transformers-4 ViT state dict (``encoder.layer.N.attention.attention.query``...) to the names
    of the installed transformers when it uses the newer ones (``layers.N.attention.q_proj``...)."""
    import re

    if not any(k.startswith("encoder.layer.") for k in state) or any(
        k.startswith("encoder.layer.") for k in model_keys
    ):
        return state
    out = {}
    for key, value in state.items():
        for pattern, repl in _LEGACY_VIT:
            key, n = re.subn(pattern, repl, key)
            if n:
                break
        out[key] = value
    return out


class RovistVGModel:
    """The Region2Phrase scorer: ViT + Linear(768, d) + tanh for regions; Linear(300, d) + tanh for GloVe
    vectors.

    Built from a state dict with the official key names (``image_encoder.image_model.*``,
    ``image_encoder.linear.*``, ``text_encoder.linear.*``).
    """

    def __init__(
        self,
        state_dict: dict[str, Any],
        *,
        vit_config: dict[str, Any] | None = None,
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        import torch
        from transformers import ViTConfig, ViTModel

        from vistkit.models import choose_device

        self.device = choose_device(device)
        self.batch_size = batch_size
        prefix = "image_encoder.image_model."
        vit_state = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
        config = ViTConfig(**(vit_config or {}))  # defaults = ViT-Base/16 at 224 px, as the in21k checkpoint
        self.image_size = int(config.image_size)  # type: ignore[arg-type]
        self.vit = ViTModel(config, add_pooling_layer=True)
        vit_state = legacy_vit_keys(vit_state, set(self.vit.state_dict()))
        try:
            missing, unexpected = self.vit.load_state_dict(vit_state, strict=False)
        except RuntimeError as exc:  # shape mismatch: another ViT size
            first = str(exc).strip().splitlines()[1:2] or [str(exc)]
            raise InputError(
                f"the RoViST-VG checkpoint does not fit this ViT configuration ({first[0].strip()})"
            ) from None
        if missing or unexpected:
            raise InputError(
                f"the RoViST-VG checkpoint does not fit ViT (missing {len(missing)} keys, e.g. "
                f"{missing[:2]}; "
                f"unexpected {len(unexpected)}, e.g. {unexpected[:2]})"
            )
        self.vit = self.vit.to(self.device).eval()

        def linear(name: str) -> Any:
            w = state_dict[f"{name}.linear.weight"]
            layer = torch.nn.Linear(w.shape[1], w.shape[0])
            layer.load_state_dict({"weight": w, "bias": state_dict[f"{name}.linear.bias"]})
            return layer.to(self.device).eval()

        try:
            self.image_linear = linear("image_encoder")
            self.text_linear = linear("text_encoder")
        except KeyError as exc:
            raise InputError(f"the RoViST-VG checkpoint lacks {exc.args[0]}") from None
        self.word_dim = int(self.text_linear.in_features)
        self._torch = torch

    def preprocess(self, images: Sequence[Any]) -> Any:
        """ViTFeatureExtractor: resize to size x size (bilinear), scale to [0, 1], normalise with mean/std
        0.5."""
        from PIL import Image

        size = (self.image_size, self.image_size)
        raw = np.stack(
            [np.asarray(im.convert("RGB").resize(size, Image.Resampling.BILINEAR)) for im in images]
        )
        scaled = raw.astype(np.float32) / np.float32(255.0)
        arr = (scaled - np.asarray(VIT_MEAN, dtype=np.float32)) / np.asarray(VIT_STD, dtype=np.float32)
        return self._torch.from_numpy(arr.transpose(0, 3, 1, 2).copy())

    def encode_images(self, images: Sequence[Any]) -> np.ndarray:
        """L2-normalised region embeddings, one row per image: ViT pooled output, Linear, tanh."""
        torch = self._torch
        rows = []
        for start in range(0, len(images), self.batch_size):
            pix = self.preprocess(images[start : start + self.batch_size]).to(self.device)
            with torch.no_grad():
                pooled = self.vit(pixel_values=pix).pooler_output
                emb = torch.tanh(self.image_linear(pooled))
                rows.append(torch.nn.functional.normalize(emb, p=2, dim=-1).cpu().numpy())
            progress.fraction(0.9 * (start + len(pix)), len(images))
        return np.concatenate(rows)

    def encode_words(self, vectors: np.ndarray) -> np.ndarray:
        """L2-normalised word embeddings of GloVe vectors (one row each): Linear, tanh."""
        torch = self._torch
        with torch.no_grad():
            emb = torch.tanh(
                self.text_linear(torch.from_numpy(np.asarray(vectors, dtype=np.float32)).to(self.device))
            )
            return torch.nn.functional.normalize(emb, p=2, dim=-1).cpu().numpy()


def load_rovist_vg(
    checkpoint: str | Path, *, trust: bool = False, **kwargs: Any
) -> tuple[RovistVGModel, str]:
    """``(model, fingerprint)`` from ``r2p_model_epoch2.pth.tar`` (trusted) or a converted folder."""
    from vistkit.models import is_converted, load_converted, load_legacy_checkpoint, model_fingerprint
    from vistkit.models.checkpoints import extract_state_dict

    p = Path(checkpoint)
    if not p.exists():
        raise MissingDependencyError(
            f"the RoViST-VG checkpoint {p} is not on this machine: get r2p_model_epoch2.pth.tar from the "
            f"RoViST "
            "authors (usydnlp/rovist) and pass checkpoint=PATH (with trust_checkpoint=True, or convert it "
            "once)"
        )
    if is_converted(p):
        state, meta = load_converted(p)
        if kwargs.get("vit_config") is None:
            kwargs["vit_config"] = meta.get("config", {}).get("vit_config")
    else:
        state = extract_state_dict(load_legacy_checkpoint(p, trust=trust), where=p)
    return RovistVGModel(state, **kwargs), model_fingerprint(p)


# ---------------------------------------------------------------------------------------------------- metric
@register
class RovistVG(PhotoMetric):
    """RoViST-VG as the released scorer computes it (IDF always on, log-sum-exp)."""

    name: ClassVar[str] = "rovist-vg"
    weights: ClassVar[str] = (
        "the official RoViST-VG checkpoint, GloVe 6B 300-d vectors and RoViST's IDF table (not shipped)"
    )
    higher_is_better: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = None
    upper_bound: ClassVar[float | None] = None
    needs_images: ClassVar[bool] = True
    card: ClassVar[MetricCard] = MetricCard(
        summary="Visual grounding: IDF-weighted best region match of each noun, pooled by log-sum-exp.",
        definition="RoViST Sec. 3.1. Nouns (NLTK PTB tags NN*, minus 'i', distinct per sentence); GloVe-300 "
        "-> Linear(300,1024) + tanh; regions (first 10 per photo) -> ViT-B/16 pooler -> Linear(768,1024) + "
        "tanh (Algorithm 1); recall = max cosine over regions and photos; score S_VG = log(sum_n exp(idf(n) "
        "* recall(n))) (Eq. 2), idf(n) = log(N / (1 + df(n))) (Eq. 1) from the release's IDF table.",
        range="Unbounded (grows with the number of nouns; negative only when every noun's idf * recall is "
        "negative); higher = better grounded.",
        signature_fields="checkpoint hash, GloVe file (name @ hash of the vectors read), IDF table hash, POS "
        "tagger, regions (+precut when the folder holds pre-cut crops), aggregate.",
        reproduces="usydnlp/rovist scripts/visual_grounding_scorer.py (vg_score, log_sum_exp); checked by "
        "tests/test_rovist_vg.py::test_whole_path_tiny_checkpoint against the same weights run through "
        "transformers' ViT image processor.",
        differences="The paper offers IDF weighting as an experiment (Sec. 3.1); the code always applies "
        "it (a string flag: bool('0') is True) - we follow the code. The paper's optional scaling to "
        "(-1, 1) (Eq. 3) is not in the code: rovist-vg returns S_VG unscaled, as the code does; "
        "rovist-vg-scaled applies Eq. 3. Stories with no noun or a noun missing from the IDF table are "
        "excluded (the code crashes).",
        citation="Wang, Han & Poon, RoViST: Learning Robust Metrics for Visual Storytelling, Findings of "
        "NAACL 2022.",
    )

    def __init__(
        self,
        *,
        checkpoint: str | Path = "r2p_model_epoch2.pth.tar",
        glove: str | Path = "glove.6B.300d.txt",
        idf: str | Path | dict[str, float] | None = None,
        images: str | Path | None = None,
        regions: str | Path | None = None,
        photos: str | Path | dict[str, Sequence[str]] | None = None,
        sentences: str = "split",
        tagger: str = "auto",
        spacy_model: str = "en_core_web_sm",
        aggregate: str = "log_sum_exp",
        idf_default: float | None = None,
        max_regions: int = 10,
        vit_config: dict[str, Any] | None = None,
        device: str | None = None,
        batch_size: int = 32,
        trust_checkpoint: bool = False,
    ) -> None:
        from vistkit.metrics._options import (
            named_with_hash,
            option_batch_size,
            option_bool,
            option_float,
            option_int,
            short_hash,
        )

        if aggregate not in ("log_sum_exp", "sum", "mean"):
            raise InputError(f"aggregate must be log_sum_exp, sum or mean, not {aggregate!r}")
        max_regions = option_int(self.name, "max_regions", max_regions, low=1, high=10_000)
        batch_size = option_batch_size(self.name, batch_size)
        trust_checkpoint = option_bool(self.name, "trust_checkpoint", trust_checkpoint)
        if tagger not in ("auto", "nltk", "spacy"):
            raise InputError(f"tagger must be auto, nltk or spacy, not {tagger!r}")
        from vistkit.models.resolve import user_path

        # ``-O rovist-vg.checkpoint=~/r2p...``: the shell leaves a ~ after "=" as it is (the model options of the
        # other metrics expand it; these files were "not on this machine")
        checkpoint, glove = user_path(checkpoint), user_path(glove)
        if idf is not None and not isinstance(idf, dict):
            idf = user_path(idf)
        missing = [
            what
            for what, value, ok in (
                (
                    f"the RoViST-VG checkpoint (r2p_model_epoch2.pth.tar, -O {self.name}.checkpoint=PATH)",
                    checkpoint,
                    Path(checkpoint).exists(),
                ),
                (
                    f"GloVe 6B 300-d vectors (glove.6B.300d.txt, -O {self.name}.glove=PATH)",
                    glove,
                    Path(glove).is_file(),
                ),
                (
                    f"RoViST's IDF table (idf_dict.pkl, -O {self.name}.idf=PATH)",
                    idf,
                    isinstance(idf, dict) or (idf is not None and Path(idf).is_file()),
                ),
            )
            if not ok
        ]
        if missing:
            raise MissingDependencyError(
                f"{self.name} needs {', '.join(missing)}, which are not on this machine: get them from the "
                "RoViST release (usydnlp/rovist) and Stanford GloVe, and pass them as shown (pickles also "
                "need trust_checkpoint=true)"
            )
        self.model, self.fingerprint = load_rovist_vg(
            checkpoint, trust=trust_checkpoint, vit_config=vit_config, device=device, batch_size=batch_size
        )
        self.glove = load_glove(glove)
        # the file's name and the hash of the vectors read (two GloVe files of one name were signed alike)
        vectors = (v.data for v in self.glove.values())
        self.glove_name = named_with_hash(glove, short_hash("\0".join(self.glove), *vectors))
        dim = len(self.glove["unk"])
        if dim != self.model.word_dim:
            raise InputError(
                f"the GloVe vectors are {dim}-d but the checkpoint's text layer takes {self.model.word_dim}"
            )
        if idf is None:
            raise MissingDependencyError(
                f"{self.name} needs RoViST's IDF table (idf_dict.pkl, always applied by the official scorer): "
                "pass idf=PATH"
            )
        self.idf = checked_idf(idf, "idf") if isinstance(idf, dict) else load_idf(idf, trust=trust_checkpoint)
        if idf_default is not None:
            idf_default = option_float(self.name, "idf_default", idf_default)
        import hashlib

        self.idf_hash = hashlib.sha256(json.dumps(sorted(self.idf.items())).encode()).hexdigest()[:12]
        self.idf_default = idf_default
        self.sentences = sentences
        self.tagger = tagger
        self.spacy_model = spacy_model
        self.aggregate = aggregate
        self._use_photos(images, photos, regions, max_regions)

    def signature_fields(self) -> dict[str, object]:
        return {
            "ckpt": self.fingerprint,
            "glove": self.glove_name,
            "idf": self.idf_hash,
            "pos": tagger_name(self.tagger, self.spacy_model),
            "regions": self.store.describe() if self.store is not None else "?",
            "agg": self.aggregate,
            **({"idfdefault": self.idf_default} if self.idf_default is not None else {}),
            "sent": self.sentences,
        }

    def _encode_images(self, images: Sequence[Any]) -> np.ndarray:
        return self.model.encode_images(images)

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per story ``S_VG`` (RoViST Eq. 2, idf from Eq. 1) of its nouns against its photos' regions, through
        `_scale`; a story with no noun, a noun without an IDF weight or a photo problem is excluded."""
        self._check_ready()
        items = self._photos_filled(items)  # a streamed run's stories get the photo map's photos too
        excluded: dict[str, str] = {}
        values: list[float] = []
        for item in items:
            story: Story = item.hypothesis
            problem = self._photo_problem(story)
            nouns: list[str] = []
            if problem is None:
                nouns = story_nouns(
                    story_sentences(story, self.sentences), tagger=self.tagger, spacy_model=self.spacy_model
                )
                if not nouns:
                    problem = "the story has no noun (the official score would be log(0))"
                elif self.idf_default is None and (unknown := [n for n in nouns if n not in self.idf]):
                    shown = [n if len(n) <= 40 else n[:40] + "..." for n in sorted(set(unknown))[:5]]
                    problem = f"noun(s) {', '.join(shown)} have no IDF weight"
            if problem is not None:
                excluded[item.item_id] = problem
                values.append(math.nan)
                continue
            vecs = np.stack([self.glove.get(n, self.glove["unk"]) for n in nouns])
            text = self.model.encode_words(vecs)
            per_photo = [np.max(text @ self._regions(p).T, axis=1) for p in story.photo_ids]
            recall = np.max(np.stack(per_photo), axis=0)
            default = math.nan if self.idf_default is None else self.idf_default  # not reached when None
            idf = [self.idf.get(n, default) for n in nouns]
            values.append(self._scale(log_sum_exp_score(recall, idf, aggregate=self.aggregate)))
        extra: dict[str, Any] = {}
        if fell := self._whole_photo_fallback(items, excluded):
            extra["whole_photo_fallback"] = fell
        return mean_score(
            self.name, [i.item_id for i in items], values, signature, excluded=excluded, extra=extra
        )

    def _scale(self, s_vg: float) -> float:
        """The story score from ``S_VG`` (Eq. 2): unchanged here, as the official scorer returns it."""
        return s_vg


@register
class RovistVGScaled(RovistVG):
    """RoViST-VG mapped through the paper's scaled sigmoid (Eq. 3); options and scoring as `RovistVG`."""

    name: ClassVar[str] = "rovist-vg-scaled"
    lower_bound: ClassVar[float | None] = -1.0
    upper_bound: ClassVar[float | None] = 1.0
    card: ClassVar[MetricCard] = MetricCard(
        summary="RoViST-VG scaled by the paper's shifted sigmoid: 2 / (1 + exp(-0.5 * S_VG)) - 1.",
        definition="RoViST Sec. 3.1, Eq. 3 applied per story to rovist-vg's S_VG (Eq. 2: nouns, GloVe + "
        "ViT region embeddings, IDF-weighted max cosine, log-sum-exp; see rovist-vg): "
        "2 / (1 + exp(-0.5 * S_VG)) - 1 = tanh(S_VG / 4). Corpus score = mean over stories.",
        range="(-1, 1), strictly increasing in S_VG; [0, 1) whenever S_VG >= 0 (the paper's 'between 0 and "
        "1'), which holds as soon as one noun has idf * recall >= 0; higher = better grounded.",
        signature_fields="those of rovist-vg (checkpoint hash, GloVe file name @ vectors hash, IDF table hash, "
        "POS tagger, regions, aggregate) plus scale:eq3.",
        reproduces="RoViST Eq. 3 on the official scorer's S_VG (the released code does not scale); "
        "tests/test_rovist_vg.py checks it equals Eq. 3 applied to rovist-vg's per-story values.",
        differences="Eq. 3 is in the paper only ('one can optionally scale'); the released scorer returns "
        "S_VG, so published RoViST-VG numbers are reproduced by rovist-vg. The paper says the scaled score "
        "lies between 0 and 1; that needs S_VG >= 0, and S_VG < 0 (every noun with a negative idf * "
        "recall) gives a value in (-1, 0), which we keep rather than clip. Everything else as rovist-vg "
        "(IDF always on, as the code).",
        citation="Wang, Han & Poon, RoViST: Learning Robust Metrics for Visual Storytelling, Findings of "
        "NAACL 2022.",
    )

    def signature_fields(self) -> dict[str, object]:
        return {**super().signature_fields(), "scale": "eq3"}

    def _scale(self, s_vg: float) -> float:
        """Eq. 3: ``2 / (1 + exp(-0.5 * S_VG)) - 1``."""
        return scaled_sigmoid(s_vg)


def rovist_vg_score(stories: StorySet | Sequence[Story], **options: Any) -> Score:
    """Functional face: ``rovist_vg_score(stories, checkpoint=..., glove=..., idf=..., images=...)``."""
    return RovistVG(**options).score(stories)


def rovist_vg_scaled_score(stories: StorySet | Sequence[Story], **options: Any) -> Score:
    """Functional face of ``rovist-vg-scaled`` (Eq. 3); the options of `rovist_vg_score`."""
    return RovistVGScaled(**options).score(stories)
