"""Synthetic story errors: a human story made worse in one controlled way.

Used to train the default ranker (on VIST *val* stories only) and to evaluate any metric on error types it was
never trained on (VWP stories). The kinds follow the error analysis of Vrank (Hsu et al. 2022, Sec. 3.2 and
Table 3: grammar, repetition, description in isolation, absurdity) and the negative samples of UNION (Guan and Huang
2020: repetition, substitution, reordering): each function takes the story's sentences and returns new ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from vistkit.errors import InputError

Sentences = list[str]

GENERIC_SENTENCES: tuple[str, ...] = (
    "we had a great time .",
    "it was a great day .",
    "everyone had a lot of fun .",
    "it was a beautiful day .",
    "we all had a great time .",
    "the family was very happy .",
    "this is a picture of the place .",
    "there were a lot of people there .",
    "it was a fun day .",
    "we went to the place .",
)


def _words(sentence: str) -> list[str]:
    return sentence.split()


def _check_story(s: Sequence[str], what: str) -> None:
    """Refuse a story with no sentences: there is nothing to make worse, and the functions below crashed on it
    (``randrange(0)``) or returned an empty "worse" story. Checked before any random draw, so the seeded stream
    of the other stories is unchanged. (Blank sentences are sentences: every function takes them.)"""
    if not s:
        raise InputError(
            f"{what}: the story has no sentences, so it cannot be made worse; leave out stories without text "
            "(e.g. keep only those with 3 or more sentences, as the ranker scripts do)"
        )


def _check_times(times: int, what: str) -> None:
    if times < 1:
        raise InputError(f"{what}: times must be 1 or more (the sentences to change), not {times}")


def _check_pool(pool: Sequence[str], what: str) -> None:
    if not pool:
        raise InputError(
            f"{what}: the sentence pool is empty, so there is no other story's sentence to use; pass the sentences "
            "of other stories as pool"
        )


def repeat_sentence(s: Sentences, rng: random.Random, pool: Sequence[str], *, times: int = 1) -> Sentences:
    """Another sentence of the story overwritten with a copy of one of its sentences (``times`` copies)."""
    _check_story(s, "repeat-sentence")
    _check_times(times, "repeat-sentence")
    if len(s) < 2:
        return s + s
    out = list(s)
    src = rng.randrange(len(s))
    targets = [i for i in range(len(s)) if i != src]
    for i in rng.sample(targets, min(times, len(targets))):
        out[i] = s[src]
    return out


def repeat_phrase(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """A 3-6 word span of one sentence written again over the words that follow it ("they had a party they had
    a"): the length stays the same, so only the repetition differs from the original."""
    _check_story(s, "repeat-phrase")
    out = list(s)
    i = rng.randrange(len(s))
    w = _words(s[i])
    if len(w) < 7:
        return repeat_sentence(s, rng, pool)
    n = rng.randint(3, min(6, len(w) // 2))
    start = rng.randrange(len(w) - 2 * n + 1)
    span = w[start : start + n]
    out[i] = " ".join(w[: start + n] + span + w[start + 2 * n :])
    return out


def shuffle(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """The sentences in a random different order."""
    _check_story(s, "shuffle")
    if len(s) < 2:
        return s
    out = list(s)
    while out == s:
        rng.shuffle(out)
        if len(set(s)) < 2:
            break
    return out


def substitute(s: Sentences, rng: random.Random, pool: Sequence[str], *, times: int = 1) -> Sentences:
    """``times`` sentences replaced by random sentences of other stories (off-topic, absurd)."""
    _check_story(s, "substitute")
    _check_times(times, "substitute")
    _check_pool(pool, "substitute")
    out = list(s)
    for i in rng.sample(range(len(s)), min(times, len(s))):
        out[i] = pool[rng.randrange(len(pool))]
    return out


def generic(s: Sentences, rng: random.Random, pool: Sequence[str], *, times: int = 2) -> Sentences:
    """``times`` sentences replaced by generic filler ("we had a great time .")."""
    _check_story(s, "generic")
    _check_times(times, "generic")
    out = list(s)
    for i in rng.sample(range(len(s)), min(times, len(s))):
        out[i] = GENERIC_SENTENCES[rng.randrange(len(GENERIC_SENTENCES))]
    return out


def truncate(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """Only the first one or two sentences."""
    _check_story(s, "truncate")
    return s[: rng.randint(1, 2)] if len(s) > 2 else s[:1]


def word_noise(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """Grammar errors: in about half of the sentences a word dropped, doubled or swapped with its neighbour."""
    _check_story(s, "word-noise")
    out = []
    for sent in s:
        w = _words(sent)
        if len(w) > 3 and rng.random() < 0.6:
            j = rng.randrange(len(w) - 2)
            op = rng.randrange(3)
            if op == 0:
                del w[j]
            elif op == 1:
                w.insert(j, w[j])
            else:
                w[j], w[j + 1] = w[j + 1], w[j]
        out.append(" ".join(w))
    return out


GENERIC_WORDS: tuple[str, ...] = ("people", "place", "thing", "things", "day", "time", "fun", "great", "good", "nice")
_STOP = frozenset(
    "a an the and or but of to in on at for with was were is are it this that they we i he she his her their our "
    "my you there here had have has be been very so all some one as by from up out . , ! ?".split()
)


def generic_words(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """About 40% of the content words replaced by generic words ("the people", "a great thing"): the
    specifics a human editor adds to a machine story, taken away."""
    _check_story(s, "generic-words")
    out = []
    for sent in s:
        w = [rng.choice(GENERIC_WORDS) if x not in _STOP and x.isalpha() and rng.random() < 0.4 else x
             for x in _words(sent)]
        out.append(" ".join(w))
    return out


def repeat_word(s: Sentences, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """Two or three content words of other sentences replaced by one content word of the story (the same noun
    in every sentence)."""
    _check_story(s, "repeat-word")
    content = [(i, j) for i, x in enumerate(s) for j, w in enumerate(_words(x)) if w not in _STOP and w.isalpha()]
    if len(content) < 4:
        return repeat_phrase(s, rng, pool)
    i0, j0 = content[rng.randrange(len(content))]
    word = _words(s[i0])[j0]
    others = [(i, j) for i, j in content if i != i0]
    out = [_words(x) for x in s]
    for i, j in rng.sample(others, min(len(others), rng.randint(2, 3))):
        out[i][j] = word
    return [" ".join(x) for x in out]


def merge(s: Sentences, rng: random.Random, pool: Sequence[str], *, other: Sentences | None = None) -> Sentences:
    """The first half of the story followed by sentences of another story (incoherent merge)."""
    _check_story(s, "merge")
    k = max(1, len(s) // 2)
    if not other and len(s) > k:
        _check_pool(pool, "merge")
    tail = other if other else [pool[rng.randrange(len(pool))] for _ in range(len(s) - k)]
    return s[:k] + list(tail[k : k + len(s) - k] or tail[: len(s) - k])


PERTURBATIONS: dict[str, Callable[..., Sentences]] = {
    "repeat-sentence": repeat_sentence,
    "repeat-phrase": repeat_phrase,
    "shuffle": shuffle,
    "substitute": substitute,
    "generic": generic,
    "truncate": truncate,
    "word-noise": word_noise,
    "merge": merge,
    "generic-words": generic_words,
    "repeat-word": repeat_word,
}


def perturb(sentences: Sequence[str], kind: str, *, rng: random.Random, pool: Sequence[str]) -> Sentences:
    """Apply the named perturbation (a key of `PERTURBATIONS`) to a story's sentences."""
    if kind not in PERTURBATIONS:
        raise InputError(f"no perturbation is named {kind!r:.60}; use one of {', '.join(PERTURBATIONS)}")
    if isinstance(sentences, str):  # one character per "sentence"
        raise InputError("perturb takes a story's sentences (a list of strings), not one string; split it first")
    return PERTURBATIONS[kind](list(sentences), rng, pool)


class BlandRewriter:
    """Machine-like rewrites: each sentence replaced by a short, generic sentence of the corpus that shares one of
    its content words ("there were a lot of crafts ."), the on-topic blandness of VIST models trained with
    maximum likelihood (frequent words, few specifics, the topic word repeated).

    Genericness of a corpus sentence is the mean log frequency of its words in the corpus.
    """

    def __init__(self, pool: Sequence[str], *, stop: frozenset[str], max_words: int = 12) -> None:
        import math
        from collections import Counter

        self.pool = [p for p in dict.fromkeys(pool) if 3 <= len(p.split()) <= max_words]
        freq = Counter(w for p in pool for w in p.split())
        total = sum(freq.values())
        self.generic = [sum(math.log(freq[w] / total) for w in p.split()) / len(p.split()) for p in self.pool]
        self.by_word: dict[str, list[int]] = {}
        for i, p in enumerate(self.pool):
            for w in set(p.split()):
                if w not in stop and w.isalpha():
                    self.by_word.setdefault(w, []).append(i)
        for idx in self.by_word.values():
            idx.sort(key=lambda i: -self.generic[i])
            del idx[8:]
        self.stop = stop

    def sentence(self, sentence: str, rng: random.Random) -> str:
        """A generic corpus sentence sharing a content word with ``sentence`` (one of the five most generic for a
        random such word), or a fixed generic sentence when there is none."""
        words = [w for w in sentence.split() if w not in self.stop and w.isalpha() and w in self.by_word]
        if not words:
            return GENERIC_SENTENCES[rng.randrange(len(GENERIC_SENTENCES))]
        cands = [i for i in self.by_word[rng.choice(words)] if self.pool[i] != sentence]
        if not cands:
            return GENERIC_SENTENCES[rng.randrange(len(GENERIC_SENTENCES))]
        return self.pool[cands[rng.randrange(min(5, len(cands)))]]

    def on_topic(self, s: Sentences, rng: random.Random) -> Sentences:
        """Every sentence replaced by a generic corpus sentence about the story's most frequent content word:
        the topic repeated in every sentence, as maximum-likelihood story models do ("the beach was beautiful .
        we went to the beach . the kids played on the beach .")."""
        _check_story(s, "bland on-topic")
        from collections import Counter

        words = Counter(w for x in s for w in x.split() if w in self.by_word)
        if not words:
            return self(s, rng)
        top = max(words.items(), key=lambda kv: (kv[1], kv[0]))[0]
        cands = self.by_word[top]
        return [self.pool[cands[rng.randrange(len(cands))]] for _ in s]

    def __call__(self, s: Sentences, rng: random.Random, *, share: float = 1.0) -> Sentences:
        """The story with ``share`` of its sentences (at least one) rewritten by `sentence`, chosen at random."""
        _check_story(s, "bland")
        if not 0.0 <= share <= 1.0:
            raise InputError(f"bland: share must be from 0 to 1 (the part of the sentences to rewrite), not {share}")
        k = max(1, round(share * len(s)))
        chosen = set(rng.sample(range(len(s)), min(k, len(s))))
        return [self.sentence(x, rng) if i in chosen else x for i, x in enumerate(s)]


class TrigramStoryGenerator:
    """A word trigram model of a story corpus that continues a story's first sentence with sharpened sampling.

    Its output has what maximum-likelihood story generators are criticised for (Vrank Sect. 3.3; Hsu et al.
    2019): frequent phrases, generic events, repeated words and sentence openings, weak links between
    sentences. Temperature below 1 sharpens the distribution (more generic, more repetitive).
    """

    def __init__(self, sentences: Sequence[str]) -> None:
        from collections import Counter, defaultdict

        self.next: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for s in sentences:
            w = ["<s>", "<s>", *s.split(), "</s>"]
            for a, b, c in zip(w, w[1:], w[2:], strict=False):
                self.next[(a, b)][c] += 1
        self.table = {k: (list(v), [float(x) for x in v.values()]) for k, v in sorted(self.next.items())}
        if set(self.table.get(("<s>", "<s>"), ([], []))[0]) <= {"</s>"}:  # every sentence would be a lone "."
            raise InputError("trigram: the corpus has no words to learn from; pass the sentences of many stories")

    def sentence(self, rng: random.Random, *, temperature: float, max_words: int = 16) -> str:
        """One sentence sampled from the trigram table, counts raised to ``1 / temperature``, at most ``max_words``
        words, ending in punctuation."""
        a, b = "<s>", "<s>"
        out: list[str] = []
        for _ in range(max_words):
            words, counts = self.table.get((a, b), ([], []))
            if not words:
                break
            weights = [c ** (1.0 / temperature) for c in counts]
            c = rng.choices(words, weights=weights)[0]
            if c == "</s>":
                break
            out.append(c)
            a, b = b, c
        if not out or out[-1] not in {".", "!", "?"}:
            out.append(".")
        return " ".join(out)

    def __call__(self, s: Sentences, rng: random.Random, *, temperature: float = 0.6) -> Sentences:
        """The story's first sentence followed by generated sentences, as many as the story had."""
        _check_story(s, "trigram")
        if not temperature > 0:  # NaN too
            raise InputError(
                f"trigram: temperature must be above 0 (below 1 sharpens, above 1 flattens), not {temperature}"
            )
        return [s[0]] + [self.sentence(rng, temperature=temperature) for _ in s[1:]]
