"""Probe round 15: the reference-based metrics on odd inputs.

What was wrong:

- The same text typed in two Unicode forms scored as different words: a story whose accents are separate combining
  characters (NFD: "cafe" + U+0301, as macOS, a tokenizer's NFD step or a copy from a PDF gives) against a
  reference with composed ones (NFC: "café") lost every accented word: bleu-4 1.0 -> 0.50, meteor-coco 1.0 -> 0.42,
  sacrebleu 100 -> 54 for a story equal to its reference, in silence; so did two orders of the same combining marks
  (Vietnamese "ệ"), and bertscore with a cased tokenizer ([UNK] for the decomposed word: F1 1.0 -> 0.90). The PTB
  tokenizer (bleu-N, rouge-l, cider-d, meteor-coco) now reads every text in NFC; meteor-vist, meteor-album,
  sacrebleu and bertscore read an item in NFC when its story and references are typed in different forms (an item
  in one form keeps the package's own numbers). ASCII and NFC texts, all of VIST, give the numbers they gave.
- bertscore signed a baseline with six significant digits (``b=0.831235``), so two baselines differing after that
  (rescaled F1 0.84555308 vs 0.84555309) were signed alike; the values are now shown exactly when ``:g`` rounds them.
"""

from __future__ import annotations

import shutil
import unicodedata

import numpy as np
import pytest

from vistkit.data.story import Story, StorySet

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser, METEOR)")

ACCENTED = "the café was full and we ate crêpes at the café near the old église ."
VIETNAMESE = "chúng tôi đi chợ và mua một con cá lớn ở bến ệ"
OTHER_HYP = "a man went to the store and bought some bread"
OTHER_REF = "a man walked to a store to buy bread"


def _pair(hypothesis: str, reference: str) -> tuple[StorySet, StorySet]:
    """Two stories (cider-d's idf needs more than one): the first with the given texts, the second plain ASCII."""
    hyps = StorySet([Story(story_id="1", text=hypothesis), Story(story_id="2", text=OTHER_HYP)])
    refs = StorySet([Story(story_id="1", text=reference), Story(story_id="2", text=OTHER_REF)])
    return hyps, refs


def _score(name: str, options: dict[str, object], hypothesis: str, reference: str) -> list[float]:
    from vistkit.metrics.base import get_metric

    metric = get_metric(name, **options)
    result = metric.score(*_pair(hypothesis, reference), key="story")
    return [float(result.corpus), *(float(x) for x in result.item_scores)]


def _swap_marks(text: str) -> str:
    """``text`` in NFD with the two marks of "ệ" (dot below U+0323, circumflex U+0302) in the non-canonical order."""
    return unicodedata.normalize("NFD", text).replace("e\u0323\u0302", "e\u0302\u0323")


_METRICS = [
    pytest.param("bleu-4", {}, marks=[needs_java, pytest.mark.java]),
    pytest.param("rouge-l", {}, marks=[needs_java, pytest.mark.java]),
    pytest.param("cider-d", {}, marks=[needs_java, pytest.mark.java]),
    pytest.param("meteor-coco", {"prefetch": False}, marks=[needs_java, pytest.mark.java]),
    pytest.param("meteor-vist", {"prefetch": False}, marks=[needs_java, pytest.mark.java]),
    pytest.param("meteor-vist", {"prefetch": False, "drop_non_ascii": True}, marks=[needs_java, pytest.mark.java]),
    pytest.param("meteor-album", {"prefetch": False}, marks=[needs_java, pytest.mark.java]),
    pytest.param("sacrebleu", {}),
    pytest.param("sacrebleu", {"tokenize": "char"}),
    pytest.param("sacrebleu", {"tokenize": "intl"}),
]


@pytest.mark.parametrize(("name", "options"), _METRICS)
@pytest.mark.parametrize("text", [ACCENTED, VIETNAMESE])
def test_a_story_typed_in_another_unicode_form_scores_as_the_same_text(
    name: str, options: dict[str, object], text: str
) -> None:
    """A story equal to its reference scores the same whether its accents are composed (NFC), decomposed (NFD) or
    decomposed in another order, on either side."""
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert nfc != nfd
    expected = _score(name, options, nfc, nfc)
    swapped = _swap_marks(text)
    for hypothesis, reference in [(nfd, nfc), (nfc, nfd), (swapped, nfc), (swapped, nfd), (nfd, nfd)]:
        both_nfd = all(unicodedata.is_normalized("NFD", t) for t in (hypothesis, reference))
        if both_nfd and name == "sacrebleu" and options.get("tokenize") == "char":
            continue  # sacreBLEU's own numbers: it counts a combining mark as a character
        np.testing.assert_allclose(_score(name, options, hypothesis, reference), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("options", [{}, {"tokenize": "char"}, {"tokenize": "intl"}])
def test_sacrebleu_of_texts_typed_in_one_unicode_form_is_the_packages(options: dict[str, object]) -> None:
    """Texts all in NFD (or all in NFC) are sacreBLEU's as they are: its character tokenizer counts a combining
    accent as a character of its own."""
    import sacrebleu

    from vistkit.metrics.base import get_metric

    hyps = [unicodedata.normalize("NFD", ACCENTED), OTHER_HYP]
    refs = [unicodedata.normalize("NFD", ACCENTED.replace("old", "new")), OTHER_REF]
    result = get_metric("sacrebleu", **options).score(*_pair(hyps[0], refs[0]), key="story")
    kw = {"tokenize": str(options.get("tokenize", "13a"))}
    assert result.corpus == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], **kw).score, abs=1e-9)  # type: ignore[arg-type]


def test_bertscore_with_a_cased_tokenizer_reads_a_decomposed_accent_as_the_composed_one(tmp_path) -> None:
    """A cased WordPiece tokenizer (no accent stripping) made [UNK] of "café" typed with a combining accent: a story
    equal to its reference scored F1 0.90, not 1.0. An uncased one (the packaged model) strips accents anyway."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_models import make_tiny_encoder
    from transformers import BertTokenizer

    from vistkit.metrics.base import get_metric

    folder = make_tiny_encoder(tmp_path / "enc", words=["café", "crêpes", "the", "was", "full", "of"])
    BertTokenizer(str(folder / "vocab.txt"), do_lower_case=False, model_max_length=256).save_pretrained(str(folder))
    metric = get_metric("bertscore", model=str(folder))
    text = "the café was full of crêpes"
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    expected = metric.score(*_pair(nfc, nfc), key="story")
    for hypothesis, reference in [(nfd, nfc), (nfc, nfd)]:
        result = metric.score(*_pair(hypothesis, reference), key="story")
        np.testing.assert_allclose(result.item_scores, expected.item_scores, rtol=0, atol=1e-6)
        assert result.item_scores[0] == pytest.approx(1.0, abs=1e-6)
    f = metric.score_pairs([nfd], [[nfc]])[2]
    assert f[0] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("a", "b"),
    [("0.83123451", "0.83123454"), ("0.2,0.3,-0.12345671", "0.2,0.3,-0.12345674")],
)
def test_bertscore_baselines_that_give_other_numbers_are_signed_apart(a: str, b: str, tmp_path) -> None:
    """The baseline was signed with six significant digits, so two baselines (given as values or read from files)
    that differ after that rescaled to other numbers under one signature."""
    from vistkit.metrics.base import get_metric

    hyps, refs = _pair("we went to the park and saw a dog", "we went to a park and saw the cat")
    signatures, scores = set(), set()
    for value in (a, b):
        metric = get_metric("bertscore", baseline=value)
        result = metric.score(hyps, refs, key="story")
        signatures.add(result.signature)
        scores.add(float(result.corpus))
        parts = value.split(",") * (3 if "," not in value else 1)
        csv = tmp_path / f"{value}.csv"
        csv.write_text("LAYER,P,R,F\n" + f"{metric.layer}," + ",".join(parts) + "\n", encoding="utf-8")
        from_file = get_metric("bertscore", baseline_path=str(csv)).score(hyps, refs, key="story")
        assert from_file.corpus == result.corpus
        signatures.add(from_file.signature)
    assert len(scores) == 2 and len(signatures) == 4


def test_bertscore_baselines_shown_exactly_keep_their_signature() -> None:
    from vistkit.metrics.base import get_metric

    assert "|rescale:b=0.6,0.6,0.6|" in get_metric("bertscore", baseline=0.6).signature()
    assert "|rescale:b=0.83,-0.1,1e-05|" in get_metric("bertscore", baseline="0.83,-0.1,0.00001").signature()

