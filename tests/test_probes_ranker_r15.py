"""How the story-ranker and the lm-* metrics read layout, letter case and markup (`readable_text`), on the forms
LLM-written and web-copied stories take: a title above the story, a scene break, a quoted block, prose
hard-wrapped at a line width, a story in capitals with one unit in lower case, HTML from a word processor, and
angle brackets or character references in ordinary use."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from ranker_helpers import PLAIN, REPO, SENTENCES, VAL

from vistkit.metrics.base import get_metric
from vistkit.text.detokenize import lines_as_sentences, readable_text, unshouted, without_html, without_markdown

TOP, BOTTOM = " ".join(SENTENCES[:2]), " ".join(SENTENCES[2:])
#: each form and the plain text it must score as, feature by feature
FORMS = {
    "a title paragraph": ("A Day At The Park\n\n" + PLAIN, "A Day At The Park.\n\n" + PLAIN),
    "a markdown title": ("# A Day At The Park\n\n" + PLAIN, "A Day At The Park. " + PLAIN),
    "a bold title": ("**A Day At The Park**\n\n" + PLAIN, "A Day At The Park. " + PLAIN),
    "an underlined title": ("A Day At The Park\n=================\n" + PLAIN, "A Day At The Park. " + PLAIN),
    "a scene break of dashes": (f"{TOP}\n\n---\n\n{BOTTOM}", f"{TOP}\n\n{BOTTOM}"),
    "a scene break of stars": (f"{TOP}\n\n* * *\n\n{BOTTOM}", f"{TOP}\n\n{BOTTOM}"),
    "a quoted block": ("\n".join("> " + s for s in SENTENCES), "\n".join(SENTENCES)),
    "a hard-wrapped sentence": (
        "We went to the park with our dog on a sunny day\nin July and the grass was green",
        "We went to the park with our dog on a sunny day in July and the grass was green",
    ),
    "capitals with a unit in lower case": (
        (PLAIN + " We left at 5pm.").upper().replace("5PM", "5pm"),
        PLAIN + " We left at 5pm.",
    ),
    "soft hyphens as references": (PLAIN.replace("sandwiches", "sand&shy;wich&shy;es"), PLAIN),
    "zero-width spaces as references": (PLAIN.replace(" ", "&#8203; "), PLAIN),
    "word-processor html": (
        "".join(f'<p class=MsoNormal style="margin:0">{s}<o:p></o:p></p>' for s in SENTENCES),
        "\n".join(SENTENCES),
    ),
    "an image and a comment": (f'{TOP} <img src="dog.jpg" alt="our dog"><!-- photo 3 --> {BOTTOM}', f"{TOP} {BOTTOM}"),
}


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    return get_metric(
        "story-ranker", lm=str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm-ranker-r15"))), device="cpu"
    )


@pytest.mark.parametrize("form", list(FORMS))
def test_a_story_in_an_llm_or_web_form_scores_as_its_prose(ranker: Any, form: str) -> None:
    """A title is a sentence of its own, not the start of the story's first one; scene-break and quote marks, HTML
    of word processors and invisible characters written as references are no words; a story in capitals with one
    unit in lower case is still read in lower case; a sentence hard-wrapped at a line width is one sentence."""
    text, plain = FORMS[form]
    formed, expected = ranker.explain([text, plain])
    for name, value in expected.items():
        assert formed[name] == pytest.approx(value, abs=1e-9), (form, name, readable_text(text), formed, expected)


def test_prose_wrapped_at_a_width_gets_no_period_inside_a_sentence() -> None:
    """A line that starts in lower case where the others start with a capital goes on from the line before."""
    wrapped = [
        "We went to the park with my family on a sunny day\nin July to see the fireworks over the lake",
        "We drove to the lake with my whole family in July\nand my little brother caught a fish as big as his arm",
        '"Once upon a time," she said, "there was a dog\nwho loved the sea"',
    ]
    for text in wrapped:
        assert lines_as_sentences(text) == text, text
    # still a sentence per line: lower-case stories, placeholders and numbers at a line start
    # text without capitals: case, the one cue to wrapping, tells nothing, so only a paragraph ends a sentence
    # (each break is decided locally, so that a sentence appended never changes how the lines before it read)
    assert lines_as_sentences("we went to the park\nit was fun") == "we went to the park\nit was fun"
    assert (
        lines_as_sentences("We met Sam\n[male] was late\n3 dogs came") == "We met Sam.\n[male] was late.\n3 dogs came."
    )


def test_a_paragraph_ends_a_sentence() -> None:
    assert lines_as_sentences("The Lost Kite\n\nOnce upon a time, a boy had a kite. It flew away") == (
        "The Lost Kite.\n\nOnce upon a time, a boy had a kite. It flew away"
    )
    kept = [
        "Here is your story:\n\nOnce upon a time, a boy had a kite. It flew away.",  # a colon goes on
        "We went to the park. It was\nfun, and the dog ran",
        "We went to the park. It was fun.\n\nThe dog ran. We left.",
    ]
    for text in kept:
        assert lines_as_sentences(text) == text, text


def test_capitals_are_most_letters_of_a_story_in_capitals() -> None:
    assert unshouted("WE WENT TO THE PARK AT 3pm. IT WAS FUN AND WE ATE LUNCH.") == (
        "we went to the park at 3pm. it was fun and we ate lunch."
    )
    kept = [
        "\u6211\u4eec\u5728NASA\u548cUSA\u770b\u5230\u4e86NBA\u6bd4\u8d5b\u3002",  # a caseless script with acronyms
        "NASA, FBI, CIA, NSA, DHS, USA, UK, EU, UN, NATO, WHO and IMF met.",  # acronyms with some lower-case words
        "We met the USA team at NASA.",
    ]
    for text in kept:
        assert unshouted(text) == text, text


def test_words_in_angle_brackets_are_no_tags() -> None:
    kept = [
        "He whispered <i love you> and <a secret> to her.",
        "we met <male> at <location> .",
        "x <b and c> y",
    ]
    for text in kept:
        assert without_html(text) == text, text
    assert without_html('<a href="x.html" target=_blank>We</a> went.<br />') == "We went.\n"


def test_markdown_breaks_and_quotes_are_no_words() -> None:
    assert without_markdown("We went.\n\n---\n\nWe left.") == "We went.\n\n\n\nWe left."
    assert without_markdown("We went.\r\n\r\n* * *\r\n\r\nWe left.") == "We went.\r\n\r\n\r\n\r\nWe left."
    assert readable_text("Our Day\r\n=======\r\nWe went. We left.") == "Our Day.\n\nWe went. We left."
    assert without_markdown("> We went.\n> > It was fun.\n>\n> We left.") == "We went.\nIt was fun.\n\nWe left."
    kept = ["We went -- and came back.", "a --- b", "It was 5 > 3."]
    for text in kept:
        assert without_markdown(text) == text, text


def test_long_odd_markup_stays_fast() -> None:
    texts = (
        "<a " + "x=1 " * 50_000,
        "<a" + " x" * 100_000 + ">",
        "<!--" * 50_000,
        "-\n" * 100_000,
        "> " * 100_000,
        "A\na" * 50_000,
        "Aa" * 100_000,
        "&shy;" * 40_000,
        "A\n\nb" * 50_000,
    )
    for text in texts:
        start = time.perf_counter()
        readable_text(text)
        assert time.perf_counter() - start < 1.0, text[:10]


@pytest.mark.skipif(not VAL.is_file(), reason="needs ../shared (VIST val)")
def test_vist_val_stories_read_as_before() -> None:
    """None of the 3,000 VIST val human stories (the ranker's statistics among them) reads differently."""
    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import val_stories

    from vistkit.text.detokenize import visible_text

    assert [t for t in val_stories(3000) if readable_text(t) != without_markdown(visible_text(t))] == []


def test_typographic_quotes_and_an_ellipsis_end_a_line_as_their_ascii_forms_do() -> None:
    """LLMs write \u201c\u201d, \u2019 and \u2026: a line ending ``.\u201d`` or ``\u2026`` has its end (no period
    after it), and one with ``.\u201d`` inside is a line of prose, as with ASCII quotes and ``...``."""
    from vistkit.text.detokenize import plain_quotes

    ascii_texts = [
        '"Let\'s go to the park."\n"Okay!"\nWe went',
        'She said, "It was fun." We left\nThe dog ran',
        "Once upon a time...\nThere was a dog",
        "We went to the park... It was\nfun and we left",
        "(We went.)\n'It was fun.'\nThe end",
    ]
    for text in ascii_texts:
        typographic = (
            text.replace('"L', "\u201cL").replace('"O', "\u201cO").replace('"I', "\u201cI").replace('"', "\u201d")
        )
        typographic = typographic.replace("'s", "\u2019s").replace("'I", "\u2018I").replace(".'", ".\u2019")
        typographic = typographic.replace("...", "\u2026")
        assert plain_quotes(lines_as_sentences(typographic)).replace("\u2026", "...") == lines_as_sentences(text), text
    assert lines_as_sentences("\u6211\u4eec\u53bb\u4e86\u516c\u56ed\u3002\n\u5929\u6c14\u5f88\u597d") == (
        "\u6211\u4eec\u53bb\u4e86\u516c\u56ed\u3002\n\u5929\u6c14\u5f88\u597d."
    )
