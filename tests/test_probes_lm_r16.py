"""Probes of the LM metrics on odd texts and option values: a copy of a sentence without a word ("😀. 😀.")
got lm-coherence 0.0 instead of no value, and enumerated option values were read in one letter case only
(``precision=BF16`` refused, while ``device=CPU`` was read)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from vistkit.errors import InputError
from vistkit.metrics.base import get_metric


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random causal LM of `tiny_models`."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    return make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm-r16"))


@pytest.fixture(scope="module")
def lm(lm_folder: Path) -> dict[str, Any]:
    """The three LM metrics on the tiny LM."""
    names = ("lm-fluency", "lm-coherence", "lm-perplexity")
    return {name: get_metric(name, lm=str(lm_folder), device="cpu") for name in names}


# --------------------------------------------------------------------------- copies of sentences without a word
@pytest.mark.parametrize(
    "text", ["😀. 😀.", "\u200b. \u200b.", "😀. 🎉.", "😀. 😀. 😀.", "!!! !!!", "We went. 😀. 😀.", "We went. … …"]
)
def test_a_copy_of_a_sentence_without_a_word_has_no_coherence(lm: dict[str, Any], text: str) -> None:
    """A sentence without a word has no PMI, and neither has its copy: the duplicate rule's floor of 0 made such
    a story score 0.0 (a story of emoji ranked above most human stories' sentences with a negative PMI)."""
    metric = lm["lm-coherence"]
    score = metric.score([text])
    assert math.isnan(score.corpus)
    assert list(score.excluded) == ["0"]
    assert all(math.isnan(v) for v in metric.sentence_scores([text])[0])


def test_a_story_whose_later_sentences_have_no_word_says_so(lm: dict[str, Any]) -> None:
    """The reason names what is missing: the story has words, only not after its first sentence."""
    score = lm["lm-coherence"].score(["We went to the park. 😀. 😀."])
    assert score.excluded["0"].startswith("no sentence after the first has a word"), score.excluded
    assert lm["lm-coherence"].score(["😀. 🎉."]).excluded["0"] == "the story has no words the LM can score"


def test_a_copy_of_a_sentence_with_words_still_gets_the_floor(lm: dict[str, Any]) -> None:
    """The duplicate rule is unchanged for sentences that have a value: a copy gets the story's minimum (or 0)."""
    metric = lm["lm-coherence"]
    values = metric.sentence_scores(["We went to the park. The dog ran. The dog ran."])[0]
    assert math.isnan(values[0]) and values[2] == min(values[1], values[2])
    only_copies = metric.sentence_scores(["We went. We went. 😀."])[0]
    assert only_copies[1] <= 0.0 and math.isnan(only_copies[2])


def test_dedupe_keeps_a_copy_without_a_value_without_one() -> None:
    from vistkit.metrics.lm import _dedupe

    nan = math.nan
    out = _dedupe([nan, nan, nan], ["a", "a", "a"], first=1)
    assert all(math.isnan(v) for v in out)
    out = _dedupe([nan, 2.0, nan, 1.0, 5.0], ["a", "b", "c", "c", "b"], first=1)
    assert math.isnan(out[2]) and out[3] == 2.0 and out[4] == 2.0
    out = _dedupe([nan, 3.0, 3.0], ["a", "b", "b"], first=1)
    assert out == [out[0], 3.0, 3.0] and math.isnan(out[0])


# --------------------------------------------------------------------------- option values in any letter case
def test_enumerated_option_values_are_read_in_any_case() -> None:
    """One rule for every option whose value is a name from a list: a text in lower case without spaces."""
    from vistkit.metrics._options import ENUMERATED, canonical_options

    given = {"precision": " BF16 ", "sentences": "Source", "long": "TRUNCATE", "lm": "My/LM", "device": "CUDA:0",
             "batch_tokens": 8, "prefix": "A Photo"}
    assert canonical_options(given) == {**given, "precision": "bf16", "sentences": "source", "long": "truncate",
                                        "device": "cuda:0"}
    assert {"precision", "sentences", "long", "aggregate", "tagger", "tokenize", "smooth_method"} <= ENUMERATED


@pytest.mark.parametrize("metric", ["lm-perplexity", "lm-fluency", "lm-coherence"])
def test_an_lm_metric_takes_its_option_values_in_any_case(lm_folder: Path, metric: str) -> None:
    """``precision=BF16`` and ``sentences=SOURCE`` were refused (``device=CPU`` was read): they run as bf16 and
    source, and the signature spells them so (one signature for one setting)."""
    built = get_metric(metric, lm=str(lm_folder), device="CPU", precision="BF16", sentences=" SOURCE")
    plain = get_metric(metric, lm=str(lm_folder), device="cpu", precision="bf16", sentences="source")
    assert built.signature() == plain.signature()
    assert "precision:bf16" in built.signature() and "sent:source" in built.signature()
    assert built.scorer is plain.scorer  # one configuration: one model in memory, one cache
    assert built.score(["We went to the park. It was fun."]).corpus == plain.score(
        ["We went to the park. It was fun."]
    ).corpus


def test_the_lm_loader_takes_a_precision_in_any_case(lm_folder: Path) -> None:
    from vistkit.models.lm import load_lm

    assert load_lm(str(lm_folder), device="cpu", precision="FP32").precision == "fp32"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"sentences": "lines"}, "sentences must be 'split' or 'source', not 'lines'"),
        ({"sentences": 5}, "sentences must be 'split' or 'source', not 5"),
        ({"sentences": ""}, "sentences must be 'split' or 'source', not ''"),
        ({"precision": "FP8"}, "precision must be one of fp32, bf16"),
        ({"precision": None}, "precision must be one of fp32, bf16"),
    ],
)
def test_a_wrong_option_value_is_still_refused_in_one_sentence(
    lm_folder: Path, options: dict[str, Any], words: str
) -> None:
    from vistkit.metrics.lm import LMFluency

    for make in (lambda: get_metric("lm-fluency", lm=str(lm_folder), device="cpu", **options),
                 lambda: LMFluency(lm=str(lm_folder), device="cpu", **options)):
        with pytest.raises(InputError) as info:
            make()
        assert words in str(info.value) and "\n" not in str(info.value)


def test_the_command_line_reads_lm_option_values_in_any_case(
    lm_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from meta_dummies import run_vistkit

    stories = tmp_path / "one.json"
    stories.write_text('[{"story_id": "1", "text": "We went to the park. It was fun."}]', encoding="utf-8")
    code, out, err = run_vistkit(
        capsys, "score", stories, "-m", "lm-fluency", "-f", "json", "-q",
        "-O", f"lm-fluency.lm={lm_folder}", "-O", "lm-fluency.device=CPU",
        "-O", "lm-fluency.precision=BF16", "-O", "lm-fluency.sentences=SOURCE",
    )
    assert code == 0, err
    assert "precision:bf16" in out and "sent:source" in out and "BF16" not in out


# --------------------------------------------------------------------------- an LM sure of other tokens
@pytest.fixture(scope="module")
def sure_lm(lm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny LM with its final norm scaled by 1,000: finite weights whose logits are so sharp that a token
    it does not expect gets a log-probability far below -709 (exp(709) is the largest float)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("sure-lm") / "lm"
    shutil.copytree(lm_folder, out)
    model = AutoModelForCausalLM.from_pretrained(str(lm_folder))
    with torch.no_grad():
        model.model.norm.weight.mul_(1000.0)
    model.save_pretrained(str(out))
    return out


def test_a_perplexity_past_the_float_range_is_infinite_not_a_crash(
    sure_lm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-perplexity stopped with a bare OverflowError ("math range error"); its range is [1, inf)."""
    metric = get_metric("lm-perplexity", lm=str(sure_lm), device="cpu")
    text = "We went to the park. It was fun. The dog ran."
    score = metric.score([text])
    assert score.corpus == math.inf and not score.excluded
    assert all(v == math.inf for v in metric.sentence_scores([text])[0])
    from meta_dummies import run_vistkit

    stories = tmp_path / "one.json"
    stories.write_text(f'[{{"story_id": "1", "text": "{text}"}}]', encoding="utf-8")
    code, out, err = run_vistkit(capsys, "score", stories, "-m", "lm-perplexity", "-q",
                                 "-O", f"lm-perplexity.lm={sure_lm}", "-O", "lm-perplexity.device=cpu")
    assert code == 0 and "Traceback" not in err and "inf" in out, err


# --------------------------------------------------------------------------- sentence_scores of a list of sentences
@pytest.mark.parametrize("metric", ["lm-perplexity", "lm-fluency", "lm-coherence"])
def test_a_list_of_sentences_is_read_as_the_same_sentences_in_a_story(lm_folder: Path, metric: str) -> None:
    """``sentence_scores([[...]])`` read markdown marks and invisible characters (a soft hyphen, a zero-width
    space) that scoring strips: other per-sentence values than ``score`` gives the same sentences."""
    from vistkit import Story

    scorer = get_metric(metric, lm=str(lm_folder), device="cpu", sentences="source")
    sentences = ["**We went to the park.**", "It was\u00ad fun\u200b.", "\u200b", "The *dog* ran."]
    story = Story(story_id="1", text=" ".join(sentences), sentences=sentences)
    from_list = scorer.sentence_scores([sentences])[0]
    assert from_list == pytest.approx(scorer.sentence_scores([story])[0], nan_ok=True)
    per_item = [math.nan if v is None else v for v in scorer.score([story]).extra["item_sentences"][0]]
    assert from_list == pytest.approx(per_item, nan_ok=True)
    plain = ["We went to the park.", "It was fun.", "", "The dog ran."]
    assert from_list == pytest.approx(scorer.sentence_scores([plain])[0], nan_ok=True)
