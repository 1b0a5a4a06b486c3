"""Word tokenisation: NLTK 3.8.1's ``word_tokenize`` (improved Treebank tokenizer), with no data download.

``nltk.word_tokenize(text)`` = split ``text`` into sentences with Punkt
(`vistkit.text.sentences.sent_tokenize`) unless ``preserve_line=True``, then tokenise each sentence with
``NLTKWordTokenizer`` (Penn-Treebank-style regexes with NLTK's additions: unicode quotes, ellipses, ``*``,
MacIntyre's contractions). The rules below are NLTK 3.8.1's, in its order; later NLTK versions changed
several of them (3.9+: the opening-apostrophe rule, whitespace collapsing before the clitic rules,
figure/en/em dashes split off), so we keep our own copy of the 3.8.1 behaviour rather than calling whatever
NLTK is installed (we do take 3.9's possessive ``*+`` in the final-period rule: the same tokens, in linear
time). dHM's R scores were computed with nltk==3.8.1.

Note the final-period rule: only the period at the very end of the text (optionally followed by closing
quotes or brackets) is split off, so with ``preserve_line=True`` a multi-sentence text keeps ``"them."``
glued.
"""

from __future__ import annotations

import re
import unicodedata

from vistkit.text.sentences import sent_tokenize

__all__ = ["nfc", "one_form", "treebank_tokenize", "word_tokenize"]


def nfc(text: str) -> str:
    """``text`` in Unicode NFC (ASCII returned as is), so that an accent typed as its own combining character ("cafe"
    + U+0301, NFD) matches the composed one ("café"), and two orders of the same marks match. Canonically equivalent
    texts are one text to Unicode, but the reference-based metrics' tools (the PTB tokenizer, Meteor, sacreBLEU, a
    cased tokenizer) compare code points: "café" in NFD against "café" in NFC lost every accented word. NFC leaves
    NFC text (all of VIST) unchanged, and folds no compatibility forms (full-width letters, ligatures stay)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def one_form(texts: list[str]) -> list[str]:
    """``texts`` as they are when they are all in NFC or all in NFD (each then compares as its own tool reads it:
    sacreBLEU's character tokenizer counts a combining accent as a character), else each in NFC (`nfc`): a story
    and its references typed in two Unicode forms are compared in one."""
    if all(t.isascii() for t in texts):
        return texts
    for form in ("NFC", "NFD"):
        if all(unicodedata.is_normalized(form, t) for t in texts):
            return texts
    return [nfc(t) for t in texts]

# A rule = (pattern, replacement, needles): the pattern can only match where one of the ``needles`` occurs
# in the text (a necessary condition, so skipping the rule otherwise changes nothing); None = always apply.
# The needles only save time: most sentences have no quotes, brackets or symbols.
_Rule = tuple[re.Pattern[str], str, tuple[str, ...] | None]

# Opening quotes. ``...``/`` and the unicode opening quotes are padded; a leading " becomes ``.
_STARTING_QUOTES: list[_Rule] = [
    (re.compile("([«“‘„]|[`]+)"), r" \1 ", ("«", "“", "‘", "„", "`")),
    (re.compile(r"^\""), r"``", ('"',)),
    (re.compile(r"(``)"), r" \1 ", ("``",)),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` ", ('"', "''")),
    # 3.8.1: an apostrophe not starting a clitic is split from the word it starts ('tis is handled later).
    (re.compile(r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b"), r"\1 \2", ("'",)),
]

_PUNCTUATION: list[_Rule] = [
    # A final period followed by closing quotes/brackets/spaces (incl. unicode closing quotes). The closing run is
    # possessive (``*+``, as NLTK >= 3.9 writes it): the run holds spaces and so does the ``\s*`` after it, so a
    # greedy run gave them back one at a time, quadratic in a run that ends in anything else (``"a." + 20,000
    # spaces + "b"`` took 3 s, a 100,000-character story minutes). Same matches: what the run gives back is
    # spaces or closing characters, and ``\s*`` cannot reach the end through a closing character.
    (re.compile(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*+)\s*$"), r"\1 \2 \3 ", (".",)),
    (re.compile(r"([:,])([^\d])"), r" \1 \2", (":", ",")),
    (re.compile(r"([:,])$"), r" \1 ", (":", ",")),
    (re.compile(r"\.{2,}"), r" \g<0> ", ("..",)),
    (re.compile(r"[;@#$%&]"), r" \g<0> ", (";", "@", "#", "$", "%", "&")),
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 ", (".",)),
    (re.compile(r"[?!]"), r" \g<0> ", ("?", "!")),
    (re.compile(r"([^'])' "), r"\1 ' ", ("' ",)),
    (re.compile(r"[*]"), r" \g<0> ", ("*",)),
]

_PARENS_BRACKETS: _Rule = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ", tuple("[](){}<>"))
_CONVERT_PARENTHESES: list[_Rule] = [
    (re.compile(r"\("), "-LRB-", ("(",)),
    (re.compile(r"\)"), "-RRB-", (")",)),
    (re.compile(r"\["), "-LSB-", ("[",)),
    (re.compile(r"\]"), "-RSB-", ("]",)),
    (re.compile(r"\{"), "-LCB-", ("{",)),
    (re.compile(r"\}"), "-RCB-", ("}",)),
]
_DOUBLE_DASHES: _Rule = (re.compile(r"--"), r" -- ", ("--",))

_ENDING_QUOTES: list[_Rule] = [
    (re.compile("([»”’])"), r" \1 ", ("»", "”", "’")),
    (re.compile(r"''"), " '' ", ("''",)),
    (re.compile(r'"'), " '' ", ('"',)),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 ", ("'",)),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 ", ("'",)),
]

# Robert MacIntyre's contractions (cannot -> can not, gonna -> gon na, 'tis -> 't is, ...); the two-part ones
# are split wherever the halves touch (NLTK writes (?#X) between the groups and replaces it by \s only in the
# detokenizer, so in the tokenizer it is an empty comment).
_CONTRACTIONS2 = [
    re.compile(p)
    for p in (
        r"(?i)\b(can)(not)\b",
        r"(?i)\b(d)('ye)\b",
        r"(?i)\b(gim)(me)\b",
        r"(?i)\b(gon)(na)\b",
        r"(?i)\b(got)(ta)\b",
        r"(?i)\b(lem)(me)\b",
        r"(?i)\b(more)('n)\b",
        r"(?i)\b(wan)(na)(?=\s)",
    )
]
_CONTRACTIONS3 = [re.compile(r"(?i) ('t)(is)\b"), re.compile(r"(?i) ('t)(was)\b")]
# Every contraction match contains one of these words (same engine and flags, so the same case folding).
_ANY_CONTRACTION = re.compile(r"(?i)cannot|d'ye|gimme|gonna|gotta|lemme|more'n|wanna|'tis|'twas")


def _apply(rule: _Rule, text: str) -> str:
    pattern, repl, needles = rule
    if needles is not None and not any(n in text for n in needles):
        return text
    return pattern.sub(repl, text)


def treebank_tokenize(text: str, *, convert_parentheses: bool = False) -> list[str]:
    """NLTK 3.8.1 ``NLTKWordTokenizer().tokenize(text)``: tokenise one sentence (no sentence splitting)."""
    for rule in _STARTING_QUOTES:
        text = _apply(rule, text)
    for rule in _PUNCTUATION:
        text = _apply(rule, text)
    text = _apply(_PARENS_BRACKETS, text)
    if convert_parentheses:
        for rule in _CONVERT_PARENTHESES:
            text = _apply(rule, text)
    text = _apply(_DOUBLE_DASHES, text)
    text = f" {text} "
    for rule in _ENDING_QUOTES:
        text = _apply(rule, text)
    if _ANY_CONTRACTION.search(text):
        for pattern in _CONTRACTIONS2:
            text = pattern.sub(r" \1 \2 ", text)
        for pattern in _CONTRACTIONS3:
            text = pattern.sub(r" \1 \2 ", text)
    return text.split()


def word_tokenize(text: str, *, preserve_line: bool = False) -> list[str]:
    """NLTK 3.8.1 ``nltk.word_tokenize(text, preserve_line=...)`` for English.

    ``preserve_line=False`` (NLTK's default): split ``text`` into sentences with Punkt first, tokenise each
    and concatenate the tokens (so every sentence-final period is split off). ``preserve_line=True``:
    tokenise ``text`` as one line (only a period at its very end is split off).
    """
    sentences = [text] if preserve_line else sent_tokenize(text)
    return [token for sentence in sentences for token in treebank_tokenize(sentence)]
