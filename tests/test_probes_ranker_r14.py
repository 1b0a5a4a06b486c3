"""Round-14 probes of the story ranker on list formatting: a story written as a numbered list ("1. We went to the
park. 2. It was fun.") raised u by 0.90 on average on 40 VIST val stories with the packaged LM (88% raised, up to
+2.5): each "2." was a one-number sentence with new "words" for the type-token ratio, a far-off sentence that the
relatedness and the LM's coherence read as easy; bulleted lines ("- We went ...") lowered it by 0.50 (to -4.0)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from ranker_helpers import PLAIN, REPO, SENTENCES, VAL

from vistkit.metrics.base import get_metric

LISTS = {
    "numbered inline": " ".join(f"{i}. {s}" for i, s in enumerate(SENTENCES, 1)),
    "numbered lines": "\n".join(f"{i}. {s}" for i, s in enumerate(SENTENCES, 1)),
    "paren lines": "\n".join(f"{i}) {s}" for i, s in enumerate(SENTENCES, 1)),
    "bracketed inline": " ".join(f"({i}) {s}" for i, s in enumerate(SENTENCES, 1)),
    "dash bullets": "\n".join(f"- {s}" for s in SENTENCES),
    "star bullets": "\n".join(f"  * {s}" for s in SENTENCES),
    "dot bullets": "\n".join(f"\u2022 {s}" for s in SENTENCES),
    "heading": "## Our day\n\n" + PLAIN,
    "bold": " ".join(f"**{s}**" for s in SENTENCES),
    "emphasis": PLAIN.replace("sunny", "*sunny*").replace("red ball", "__red ball__"),
}


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    return get_metric("story-ranker", lm=str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm-r14"))), device="cpu")


@pytest.mark.parametrize("form", [k for k in LISTS if k != "heading"])
def test_a_list_marker_is_no_sentence(ranker: Any, form: str) -> None:
    """A story's sentences numbered or bulleted score as the same sentences written as prose, feature by feature."""
    listed, plain = ranker.explain([LISTS[form], PLAIN])
    for name, value in plain.items():
        assert listed[name] == pytest.approx(value, abs=1e-9), (form, name, listed, plain)


def test_list_markers_are_removed_only_where_they_start_a_line_or_a_sentence() -> None:
    from vistkit.text.detokenize import without_markdown

    assert without_markdown(LISTS["numbered inline"]) == PLAIN
    # a numbered item that starts with a placeholder, a quote or a bracket (2 of 40 VIST val stories numbered)
    numbered = "we met . 2. [male] came . 3. \"hi\" he said . 4. (it was late) . 5. `` bye '' ."
    assert without_markdown(numbered) == "we met . [male] came . \"hi\" he said . (it was late) . `` bye '' ."
    assert without_markdown("## Our day\n\n- We went.") == "Our day\n\nWe went."
    assert without_markdown("* We **really** went.\n* It was *so* fun!") == "We really went.\nIt was so fun!"
    kept = [
        "we were number 1 . 2 more teams came .",  # VIST's tokenised numbers
        "We scored 2. The others scored 1.",  # a number that ends a sentence
        "It cost $3.50 each. We left at 7 p.m. and slept.",
        "The score was 3-2 - a close game.",
        "We went - and came back.\nIt was 5 degrees.",
        "We counted 5 * 3 = 15 apples * 2 baskets.",
        "The file my_photo_1.jpg was * lost.",
    ]
    for text in kept:
        assert without_markdown(text) == text


def test_a_long_line_of_asterisks_stays_fast() -> None:
    """The emphasis search is bounded: 100,000 characters of lone and paired asterisks take well under a second."""
    import time

    from vistkit.text.detokenize import without_markdown

    texts = ("*a " * 33_000, "**" + "a " * 50_000, "*" * 100_000, "__a_" * 25_000, "__" + "a" * 99_000)
    for text in (*texts, ("**" + "a " * 1000) * 50, ("__" + "a " * 1000) * 50):
        start = time.perf_counter()
        without_markdown(text)
        assert time.perf_counter() - start < 1.0


@pytest.mark.skipif(not VAL.is_file(), reason="needs ../shared (VIST val)")
def test_vist_val_stories_hold_no_list_marker() -> None:
    """The ranker's statistics stories (and all 3,000 VIST val human stories) read exactly as before."""
    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import val_stories

    from vistkit.text.detokenize import without_markdown

    assert [t for t in val_stories(3000) if without_markdown(t) != t] == []
