"""Word tokenisation: NLTK 3.8.1's ``word_tokenize`` (improved Treebank tokenizer), with no data download.

``nltk.word_tokenize(text)`` = split ``text`` into sentences with Punkt
(`vistkit.text.sentences.sent_tokenize`) unless ``preserve_line=True``, then tokenise each sentence with
``NLTKWordTokenizer`` (Penn-Treebank-style regexes with NLTK's additions: unicode quotes, ellipses, ``*``,
MacIntyre's contractions). The rules below are NLTK 3.8.1's, in its order; later NLTK versions changed
several of them (3.9+: the opening-apostrophe rule, whitespace collapsing before the clitic rules, possessive
``*+`` in the final-period rule, figure/en/em dashes split off), so we keep our own copy of the 3.8.1
behaviour rather than calling whatever NLTK is installed. RoViST-NR and dHM's R were computed with NLTK 3.8.x.

Note the final-period rule: only the period at the very end of the text (optionally followed by closing
quotes or brackets) is split off, so with ``preserve_line=True`` a multi-sentence text keeps ``"them."``
glued.
"""

from __future__ import annotations

import re

from vistkit.text.sentences import sent_tokenize

__all__ = ["treebank_tokenize", "word_tokenize"]

_Rule = tuple[re.Pattern[str], str]

# Opening quotes. ``...``/`` and the unicode opening quotes are padded; a leading " becomes ``.
_STARTING_QUOTES: list[_Rule] = [
    (re.compile("([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    # 3.8.1: an apostrophe not starting a clitic is split from the word it starts ('tis is handled later).
    (re.compile(r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b"), r"\1 \2"),
]

_PUNCTUATION: list[_Rule] = [
    # A final period followed by closing quotes/brackets/spaces (incl. unicode closing quotes).
    (re.compile(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*)\s*$"), r"\1 \2 \3 "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]"), r" \g<0> "),
]

_PARENS_BRACKETS: _Rule = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_CONVERT_PARENTHESES: list[_Rule] = [
    (re.compile(r"\("), "-LRB-"),
    (re.compile(r"\)"), "-RRB-"),
    (re.compile(r"\["), "-LSB-"),
    (re.compile(r"\]"), "-RSB-"),
    (re.compile(r"\{"), "-LCB-"),
    (re.compile(r"\}"), "-RCB-"),
]
_DOUBLE_DASHES: _Rule = (re.compile(r"--"), r" -- ")

_ENDING_QUOTES: list[_Rule] = [
    (re.compile("([»”’])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
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


def treebank_tokenize(text: str, *, convert_parentheses: bool = False) -> list[str]:
    """NLTK 3.8.1 ``NLTKWordTokenizer().tokenize(text)``: tokenise one sentence (no sentence splitting)."""
    for pattern, repl in _STARTING_QUOTES:
        text = pattern.sub(repl, text)
    for pattern, repl in _PUNCTUATION:
        text = pattern.sub(repl, text)
    pattern, repl = _PARENS_BRACKETS
    text = pattern.sub(repl, text)
    if convert_parentheses:
        for pattern, repl in _CONVERT_PARENTHESES:
            text = pattern.sub(repl, text)
    pattern, repl = _DOUBLE_DASHES
    text = pattern.sub(repl, text)
    text = f" {text} "
    for pattern, repl in _ENDING_QUOTES:
        text = pattern.sub(repl, text)
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
