"""vistkit.text.ptb.ptb_tokenize == pycocoevalcap 1.2's PTBTokenizer (Stanford jar + its punctuation list)."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import shared_file

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None, reason="needs Java"),
]


def coco_tokenize(texts: list[str]) -> list[str]:
    """The reference: pycocoevalcap's own tokenizer, one caption per fake image id."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    out = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    return [out[i][0] for i in range(len(texts))]


def test_hand_checked_examples() -> None:
    from vistkit.text.ptb import ptb_tokenize

    got = ptb_tokenize(['Hello, World! It\'s a "test".', "Second (with) café…", "", "a\nb"])
    # hand-checked against the rules: lower-case, PTB splits, punctuation tokens dropped, "-lrb-" kept
    # (pycocoevalcap lists "-LRB-" upper-case but tokenises with -lowerCase)
    assert got == ["hello world it 's a test", "second -lrb- with -rrb- café", "", "a b"]


def test_equals_pycocoevalcap_on_real_stories() -> None:
    from vistkit.data.readers import read_stories
    from vistkit.text.ptb import ptb_tokenize

    path = shared_file("pr-vist", "PR_VIST.json.zip")
    raw = [s.text for s in list(read_stories(path, field="original_text"))[:200]]
    norm = [s.text for s in list(read_stories(path))[200:400]]
    texts = raw + norm + ["Café “quoted” — dash… 3 1/2 $5.00 U.S.A.", "multi\nline\n\ntext", "  spaces  ", ""]
    assert ptb_tokenize(texts) == coco_tokenize(texts)


def test_line_breaks_do_not_shift_texts() -> None:
    from vistkit.text.ptb import ptb_tokenize

    # \r, \x0b, \x0c, \u2028 end a line for the Stanford lexer; each text must still come back as one line
    got = ptb_tokenize(["a\rb", "c\x0bd\x0ce", "f\u2028g", "h"])
    assert got == ["a b", "c d e", "f g", "h"]


def test_empty_batch_and_empty_last_text() -> None:
    from vistkit.text.ptb import ptb_tokenize

    assert ptb_tokenize([]) == []
    assert ptb_tokenize(["the end.", ""]) == ["the end", ""]
    assert ptb_tokenize(["the end.", ""]) == coco_tokenize(["the end.", ""])
    assert ptb_tokenize([""]) == [""]
