"""The offline default story ranker: a small utility model on interpretable story features.

A story ``x`` gets a utility ``u(x)``; the ranker prefers ``a`` over ``b`` by ``u(a) - u(b)`` (a Bradley-Terry
model, so the preference is antisymmetric by construction and each distinct story is featurised once).

Features (all computed from the text alone, no references and no photos; `FEATURE_NAMES` lists them):

- **lexical diversity and repetition** (the "Rep" errors of Vrank's error analysis, Hsu et al. 2022, Sec. 3.2, Table 3):
  type-token ratio, a moving-window type-token ratio that does not fall with length, distinct bigrams/trigrams,
  the share of tokens inside repeated trigrams, the most repeated content word, repeated sentences, the largest
  and the mean adjacent word overlap between sentences, repeated sentence openings;
- **shape**: number of words, sentence length and its spread, share of function words, share of rare words
  (split into several word pieces), placeholders such as ``[male]``, one-sentence stories;
- **relatedness** (the "Desc" / "Abs" errors: isolated captions, off-topic or absurd sentences): cosines between
  the static vectors of the *novel* words of two sentences (words only one of them has), for adjacent sentences,
  all sentence pairs and the first sentence against the rest, so that relatedness is not rewarded for repeating
  words; and the largest cosine between two whole sentences (redundancy);
- the mean, first and last static sentence vectors (mean of the packaged MiniLM's input word-piece embeddings),
  through a learned projection (how a story opens and closes carries its order).

The head is ``u = w . z + v . tanh(P m)`` with standardised features ``z`` (clipped to +-4) and ``m`` the three
vectors; it is trained with the pairwise logistic loss ``log(1 + exp(-(u(better) - u(worse))))``
(`scripts/train_ranker.py`), the weights of `MONOTONE_SIGNS` held to their sign.
Static vectors keep it fast on a CPU (thousands of stories a second): the contextual MiniLM encoder is not run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.limits import RANKER_V1_MAX_SENTENCES
from vistkit.text.detokenize import canonical_placeholders
from vistkit.text.overlap import max_jaccard

DEFAULT_NAME = "story-ranker-v1"
#: v1 compares every pair of sentences (novel-word relatedness, redundancy): a story of more sentences is left
#: undefined (a VIST story has five; 20,000 one-word sentences took minutes and 8 GB before this limit)
MAX_SENTENCES = RANKER_V1_MAX_SENTENCES
HEAD_FILE = "head.safetensors"
CONFIG_FILE = "config.json"
KIND = "story-ranker"

_WORD = re.compile(r"\[[a-z]+\]|[a-z0-9]+(?:'[a-z]+)?|'[a-z]+|[^\sa-z0-9]")
_SENT_END = re.compile(r"(?<=[.!?])\s+")
_PUNCT = set(".,!?;:'\"()-…")

FUNCTION_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what when
    where which while who whom why will with you your yours yourself yourselves 's n't 're 've 'll 'm 'd""".split()
)

FEATURE_NAMES: tuple[str, ...] = (
    "log_words",
    "log_mean_sentence_words",
    "sentence_length_cv",
    "ttr",
    "window_ttr",
    "distinct_2",
    "distinct_3",
    "repeated_trigram_share",
    "top_content_word_share",
    "duplicate_sentence_share",
    "max_sentence_overlap",
    "mean_adjacent_overlap",
    "repeated_opening_share",
    "function_word_share",
    "rare_word_share",
    "placeholder_share",
    "novel_adjacent_cosine_mean",
    "novel_adjacent_cosine_min",
    "novel_pair_cosine_mean",
    "novel_first_rest_cosine",
    "pair_cosine_max",
    "one_sentence",
)


#: Signs the training keeps the weights of these standardised features to (projected gradient): all else equal,
#: a more repetitive story is never better and a more diverse one never worse. Without them the model learns
#: "diverse = incoherent" from the random-substitution negatives (which raise the type-token ratio), and then
#: misses the repetition that separates machine stories from human edits of them.
MONOTONE_SIGNS: dict[str, int] = {
    "ttr": 1,
    "window_ttr": 1,
    "distinct_2": 1,
    "distinct_3": 1,
    "repeated_trigram_share": -1,
    "top_content_word_share": -1,
    "duplicate_sentence_share": -1,
    "max_sentence_overlap": -1,
    "mean_adjacent_overlap": -1,
    "repeated_opening_share": -1,
    "pair_cosine_max": -1,
}


def default_model_dir() -> Path:
    """The packaged default ranker folder."""
    return Path(__file__).resolve().parents[1] / "resources" / "models" / DEFAULT_NAME


# --------------------------------------------------------------------------------------------------- text
def normalise(text: str) -> str:
    """Lower-case, placeholders as ``[male]``-style tokens, one space between tokens.

    VIST and many story corpora are lower-cased and tokenised (``it 's a great day .``); others are not. Mapping
    both to one form keeps the features independent of the source's tokenisation.
    """
    text = canonical_placeholders(text.replace("\u2019", "'"))
    return " ".join(_WORD.findall(text.lower()))


def sentences_of(text: str) -> list[list[str]]:
    """Normalised sentences as token lists (split after ``.``, ``!``, ``?``; a story without end punctuation
    is one sentence)."""
    norm = normalise(text)
    out = [s.split() for s in _SENT_END.split(norm) if s.strip()]
    return [s for s in out if any(t not in _PUNCT for t in s)]


def _words(sentence: list[str]) -> list[str]:
    return [t for t in sentence if t not in _PUNCT]


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _distinct(tokens: Sequence[str], n: int) -> float:
    grams = _ngrams(tokens, n)
    return len(set(grams)) / len(grams) if grams else 1.0


def _window_ttr(tokens: Sequence[str], window: int = 25) -> float:
    if len(tokens) <= window:
        return len(set(tokens)) / max(len(tokens), 1)
    vals = [len(set(tokens[i : i + window])) / window for i in range(0, len(tokens) - window + 1, 5)]
    return float(np.mean(vals))


def _repeated_trigram_share(tokens: Sequence[str]) -> float:
    grams = _ngrams(tokens, 3)
    if not grams:
        return 0.0
    counts = Counter(grams)
    covered = np.zeros(len(tokens), dtype=bool)
    for i, g in enumerate(grams):
        if counts[g] > 1:
            covered[i : i + 3] = True
    return float(covered.mean())


def lexical_features(sentences: list[list[str]], *, rare: set[str]) -> list[float]:
    """The lexical and shape features of one story (`FEATURE_NAMES` up to ``placeholder_share``)."""
    words = [w for s in sentences for w in _words(s)]
    n = len(words)
    sent_words = [_words(s) for s in sentences]
    lengths = np.array([len(s) for s in sent_words], dtype=float) if sent_words else np.zeros(1)
    content = [w for w in words if w not in FUNCTION_WORDS and not w.startswith("[")]
    top_content = max(Counter(content).values()) / len(content) if content else 0.0
    keys = [" ".join(s) for s in sent_words]
    dup = (len(keys) - len(set(keys))) / max(len(keys), 1)  # sentences repeating an earlier one
    sets = [set(s) for s in sent_words]
    overlap = max_jaccard(sets)
    adjacent = [len(a & b) / len(a | b) for a, b in pairwise(sets) if a | b]
    openings = [s[0] for s in sent_words if s]
    rep_open = sum(1 for a, b in pairwise(openings) if a == b) / max(len(openings) - 1, 1)
    return [
        math.log1p(n),
        math.log1p(float(lengths.mean())),
        float(lengths.std() / lengths.mean()) if lengths.mean() > 0 else 0.0,
        len(set(words)) / n if n else 0.0,
        _window_ttr(words),
        _distinct(words, 2),
        _distinct(words, 3),
        _repeated_trigram_share(words),
        top_content,
        dup,
        overlap if overlap is not None else 0.0,
        float(np.mean(adjacent)) if adjacent else 0.0,
        rep_open,
        sum(1 for w in words if w in FUNCTION_WORDS) / n if n else 0.0,
        sum(1 for w in words if w in rare) / n if n else 0.0,
        sum(1 for w in words if w.startswith("[")) / n if n else 0.0,
    ]


def _cos(a: np.ndarray | None, b: np.ndarray | None) -> float:
    if a is None or b is None:
        return 0.0
    return float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-9))


def semantic_features(
    vectors: np.ndarray, content: list[list[str]], word_vector: Callable[[str], np.ndarray]
) -> tuple[list[float], np.ndarray]:
    """Flow features (the last five of `FEATURE_NAMES` before ``one_sentence``) and the mean sentence vector.

    Relatedness is measured on *novel* words: for two sentences, the cosine between the mean vector of the
    content words only the first has and that of the words only the second has. Related sentences ("the sand
    was hot" / "we swam in the ocean") score high, a sentence from another story low, and repeating a word
    does not raise it (a shared word is in neither set). ``pair_cosine_max`` is the largest cosine between two
    whole sentences (redundancy).
    """
    n = len(vectors)
    mean = vectors.mean(0) if n else np.zeros(vectors.shape[1], dtype=np.float32)
    if n < 2:
        return [1.0, 1.0, 1.0, 1.0, 1.0], mean
    sets = [set(c) for c in content]

    def novel(i: int, j: int) -> float:
        a = [word_vector(w) for w in sorted(sets[i] - sets[j])]
        b = [word_vector(w) for w in sorted(sets[j] - sets[i])]
        return _cos(np.mean(a, axis=0) if a else None, np.mean(b, axis=0) if b else None)

    adjacent = [novel(i, i + 1) for i in range(n - 1)]
    pairs = [novel(i, j) for i in range(n) for j in range(i + 1, n)]
    first = sets[0]
    rest = [word_vector(w) for w in sorted(set().union(*sets[1:]) - first)]
    own = [word_vector(w) for w in sorted(first)]
    sims = vectors @ vectors.T
    iu = np.triu_indices(n, 1)
    feats = [
        float(np.mean(adjacent)),
        float(np.min(adjacent)),
        float(np.mean(pairs)),
        _cos(np.mean(own, axis=0) if own else None, np.mean(rest, axis=0) if rest else None),
        float(sims[iu].max()),
    ]
    return feats, mean


# --------------------------------------------------------------------------------------------------- vectors
class StaticSentenceVectors:
    """Sentence vector = mean of the packaged MiniLM's input word-piece embeddings (no transformer layers).

    Only ``tokenizer.json`` and the embedding matrix are read, so loading takes well under a second.
    """

    def __init__(self, encoder: str | Path = "minilm-l6") -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        from vistkit.models.resolve import resolve_model

        folder = resolve_model(encoder)
        self.folder = folder
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        tensors = load_file(str(folder / "model.safetensors"))
        key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
        self.table = tensors[key].astype(np.float32)
        self.special = {self.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")} - {None}
        self.dim = int(self.table.shape[1])

    def encode(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit sentence vectors ``(n, d)`` and the number of word pieces per sentence."""
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        encs = self.tokenizer.encode_batch(list(sentences), add_special_tokens=False)
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        pieces = np.zeros(len(sentences), dtype=np.int64)
        for i, e in enumerate(encs):
            ids = [t for t in e.ids if t not in self.special]
            pieces[i] = len(ids)
            if ids:
                v = self.table[ids].mean(0)
                out[i] = v / max(float(np.linalg.norm(v)), 1e-9)
        return out, pieces

    def rare_words(self, words: set[str]) -> set[str]:
        """Words the word-piece vocabulary splits into several pieces (rare or misspelt words)."""
        encode = self.tokenizer.encode
        return {w for w in words if not w.startswith("[") and len(encode(w, add_special_tokens=False).ids) > 1}


@lru_cache(maxsize=4)
def static_vectors(encoder: str = "minilm-l6") -> StaticSentenceVectors:
    """One loaded `StaticSentenceVectors` per encoder name (load once)."""
    return StaticSentenceVectors(encoder)


class StoryFeaturizer:
    """Story texts -> (features ``(n, len(FEATURE_NAMES))``, vectors ``(n, 3d)``: the mean, first and last
    sentence vectors, so the head can learn how stories open and close)."""

    def __init__(self, encoder: str = "minilm-l6") -> None:
        self.vectors = static_vectors(encoder)
        self._rare: dict[str, bool] = {}
        self._word_vectors: dict[str, np.ndarray] = {}

    def word_vector(self, word: str) -> np.ndarray:
        """Mean input embedding of a word's pieces (memoised)."""
        v = self._word_vectors.get(word)
        if v is None:
            v = self.vectors.encode([word])[0][0]
            self._word_vectors[word] = v
        return v

    def _rare_set(self, words: set[str]) -> set[str]:
        todo = [w for w in words if w not in self._rare]
        if todo:
            found = self.vectors.rare_words(set(todo))
            for w in todo:
                self._rare[w] = w in found
        return {w for w in words if self._rare[w]}

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The features and sentence vectors of ``texts`` (see the class docstring)."""
        split = [sentences_of(t) for t in texts]
        flat = [" ".join(s) for sents in split for s in sents]
        vecs, _ = self.vectors.encode(flat)
        feats = np.zeros((len(texts), len(FEATURE_NAMES)), dtype=np.float32)
        means = np.zeros((len(texts), 3 * self.vectors.dim), dtype=np.float32)
        pos = 0
        for i, sents in enumerate(split):
            words = {w for s in sents for w in _words(s)}
            lex = lexical_features(sents, rare=self._rare_set(words))
            story_vecs = vecs[pos : pos + len(sents)]
            content = [[w for w in _words(x) if w not in FUNCTION_WORDS and w.isalpha()] for x in sents]
            sem, mean = semantic_features(story_vecs, content, self.word_vector)
            sem.append(1.0 if len(sents) < 2 else 0.0)
            pos += len(sents)
            feats[i] = lex + sem
            if len(sents):
                means[i] = np.concatenate([mean, story_vecs[0], story_vecs[-1]])
        return feats, means


# --------------------------------------------------------------------------------------------------- head
def build_head(n_features: int, width: int, hidden: int) -> Any:
    """``u = w . z + v . tanh(P m)`` as a torch module taking ``(z, m)``."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(n_features, 1)
            self.project = nn.Linear(width, hidden)
            self.out = nn.Linear(hidden, 1, bias=False)
            self.feature_mean = nn.Parameter(torch.zeros(n_features), requires_grad=False)
            self.feature_std = nn.Parameter(torch.ones(n_features), requires_grad=False)

        def forward(self, z: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            # standardised and clipped, so a story far outside the training range cannot dominate a score
            zs = ((z - self.feature_mean) / self.feature_std).clamp(-4.0, 4.0)
            return (self.linear(zs) + self.out(torch.tanh(self.project(m)))).squeeze(-1)

    return Head()


class StoryRankerModel:
    """The packaged (or a retrained) ranker: featurizer + head; `utility` gives one float per story."""

    def __init__(self, folder: str | Path | None = None) -> None:
        import torch
        from safetensors.torch import load_file

        from vistkit.models.resolve import resolve_model

        # a folder path, or a packaged name such as "story-ranker-v1"
        self.folder = resolve_model(folder) if folder is not None else default_model_dir()
        cfg_path = self.folder / CONFIG_FILE
        from vistkit.data.readers import load_json
        from vistkit.errors import InputError

        if not cfg_path.is_file() or not (self.folder / HEAD_FILE).is_file():
            raise InputError(f"{self.folder} is not a story-ranker folder (needs {CONFIG_FILE} and {HEAD_FILE})")
        self.config: dict[str, Any] = load_json(cfg_path)
        if not isinstance(self.config, dict) or not isinstance(self.config.get("hidden"), int):
            raise InputError(f"{cfg_path} is not a story-ranker config (no integer 'hidden')")
        self.featurizer = StoryFeaturizer(self.config.get("encoder", "minilm-l6"))
        self.head = build_head(len(FEATURE_NAMES), 3 * self.featurizer.vectors.dim, int(self.config["hidden"]))
        try:
            self.head.load_state_dict(load_file(str(self.folder / HEAD_FILE)))
        except Exception as exc:  # a damaged or foreign weights file (safetensors or shape errors)
            message = f"{self.folder / HEAD_FILE} is not this story-ranker head's weights ({exc})"
            raise InputError(message[:400]) from None
        # float64 at inference: a story's utility is then the same whatever else is in the batch (to ~1e-12)
        self.head.double().eval()
        self._torch = torch

    def utility(self, texts: Sequence[str]) -> np.ndarray:
        """One utility per text (higher = better story; NaN for a text of more than `MAX_SENTENCES` sentences);
        each distinct text is featurised once."""
        torch = self._torch
        lookup = dict.fromkeys(texts, math.nan)
        distinct = sorted(t for t in lookup if len(sentences_of(t)) <= MAX_SENTENCES)
        if distinct:
            feats, means = self.featurizer(distinct)
            with torch.inference_mode():
                u = self.head(torch.from_numpy(feats).double(), torch.from_numpy(means).double()).numpy()
            lookup.update(zip(distinct, u.tolist(), strict=True))
        return np.array([lookup[t] for t in texts], dtype=np.float64)
