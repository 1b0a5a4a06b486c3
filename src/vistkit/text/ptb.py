"""pycocoevalcap 1.2's PTB tokenisation, exactly: Stanford PTBTokenizer (CoreNLP 3.4.1, ``-preserveLines
-lowerCase``) followed by pycocoevalcap's punctuation-token removal.

Used by the coco-style metrics (BLEU, METEOR, ROUGE-L, CIDEr as pycocoevalcap computes them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# pycocoevalcap/tokenizer/ptbtokenizer.py PUNCTUATIONS. The bracket tokens are listed upper-case but the
# tokenizer runs with -lowerCase, so "-lrb-"/"-rrb-" are NOT removed by pycocoevalcap; we keep that behaviour.
PUNCTUATIONS = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...", ";"]
)

# Characters the Stanford lexer treats as line ends. pycocoevalcap replaces only "\n" with a space (the others
# shift every later caption onto the wrong image there); we replace them all so each text stays one line.
_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\u2028\u2029]")


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """Tokenise ``texts`` as pycocoevalcap's ``PTBTokenizer().tokenize`` does (one JVM call for the batch).

    Returns one string per text: lower-cased PTB tokens joined by single spaces, punctuation tokens removed.
    Texts are read in Unicode NFC (`vistkit.text.tokenize.nfc`: "café" typed with a combining accent gives the
    tokens of "café"; pycocoevalcap passes the code points as they are, the same for NFC text).
    Raises `vistkit.errors.MissingDependencyError` when Java is missing.
    """
    from vistkit.models.java import run_ptb_tokenizer
    from vistkit.text.tokenize import nfc

    if not texts:
        return []
    lines = run_ptb_tokenizer([_BREAKS.sub(" ", nfc(t)) for t in texts])
    return [" ".join(w for w in line.rstrip().split(" ") if w not in PUNCTUATIONS) for line in lines]
