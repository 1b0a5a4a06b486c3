"""Natural text from VIST-style tokenised text, for models that read text as people write it.

VIST and most story corpora derived from it are lower-cased and tokenised (``we went to the park . it 's
big !``); a causal language model trained on ordinary text gives such strings odd probabilities (a space
before every full stop, ``'s`` as a word, ``i`` in lower case). `natural_sentence` undoes the tokenisation and
the lower-casing of a sentence's first letter and of the pronoun ``I``; text that is already natural passes
through unchanged (the function is idempotent), so stories of both kinds can be compared on one scale.
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\s+([.,!?;:%)\]}])"), r"\1"),  # no space before closing punctuation
    (re.compile(r"([(\[{$])\s+"), r"\1"),  # nor after opening punctuation
    (re.compile(r"(\w)\s+(n't|'s|'re|'ve|'ll|'m|'d)\b", re.IGNORECASE), r"\1\2"),  # clitics join their word
    (re.compile(r"\s+'\s+s\b"), "'s"),
    (re.compile(r"(?<![\w'])i(?=$|[\s',.!?;:])"), "I"),  # the pronoun
    (re.compile(r"\s+-\s+"), " - "),
)


def natural_sentence(sentence: str) -> str:
    """One sentence as people write it: tokenisation undone, first letter and the pronoun I upper-cased.

    >>> natural_sentence("we went to the park , and i loved it .")
    'We went to the park, and I loved it.'
    >>> natural_sentence("it 's my brother 's car !")
    "It's my brother's car!"
    """
    text = " ".join(sentence.split())
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    for i, ch in enumerate(text):  # the first letter, after any opening quote or bracket
        if ch.isalpha():
            return text[:i] + ch.upper() + text[i + 1 :]
        if ch.isdigit():
            break
    return text
