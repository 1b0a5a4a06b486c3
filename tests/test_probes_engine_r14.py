"""Probe round 14: the Python API's scorer objects, the metric registry, Vrank as a metric and the engines' merge.

What was wrong:

- a load-once scorer's ``.score(...)`` given a misspelt or foreign keyword (``keying=``, ``refs=``, Hugging Face's
  ``predictions=``) failed with Python's bare "Metric.score() got an unexpected keyword argument", where
  ``vistkit.score`` says what was meant (rounds 12 and 13 fixed the functional face only);
- ``get_metric("bleu-4", key="sequence")`` (a scoring argument given to the scorer) said "bleu-4 has no option
  'key' (its options: none)", not where ``key`` goes;
- an unknown metric name: ``""`` suggested all 27 metrics, and ``"BLEU_4"``, ``"bleu 4"`` or ``"Rouge_L"`` (a
  name written as in a paper's table) suggested none;
- ``vistkit.score(scorer, ...)`` with a scorer object, or a list of names, said only "a metric is named by a
  string", not how to use the object or score several metrics;
- Vrank without a model told a Python user to "pass --option vrank.model=DIR" (a command-line flag);
- ``vistkit.prefer`` (the functional face of a ranker, documented in `vistkit.metrics.base.prefer`) was not
  exported: AttributeError;
- a scorer printed as ``<vistkit.metrics.coco.Bleu4 object at 0x...>``, a Ray engine's as
  ``<abc.RemoteBleu4 object at 0x...>``: neither said the metric nor its options;
- `merge.strategy` of a Ray engine's metric object ignored the options it was made with, so streaming a Ray
  ``bertscore`` with ``idf=True`` through `LocalEngine.score_stream` took its idf weights from each batch alone.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import vistkit
from vistkit.errors import InputError, MissingDependencyError, UnknownMetricError
from vistkit.metrics.base import get_metric, get_metric_class

HYPS = ["the dog ran to the park . it was fun .", "we ate cake . the kids sang ."]
REFS = [["a dog ran in the park . it was happy ."], ["we had cake . children sang a song ."]]


# ------------------------------------------------------------------------------------------ scorer keywords
@pytest.mark.parametrize(
    ("keyword", "meant"),
    [("keying", "key"), ("refs", "references"), ("templates", "template"), ("requireall", "require_all")],
)
def test_a_scorer_says_what_a_misspelt_keyword_meant(keyword: str, meant: str) -> None:
    """``bleu.score(h, r, keying="story")`` was Python's bare TypeError; now one InputError naming the keyword."""
    bleu = get_metric("bleu-4")
    args: tuple[Any, ...] = (HYPS,) if keyword == "refs" else (HYPS, REFS)
    with pytest.raises(InputError, match=re.escape(f"did you mean {meant}?")) as info:
        bleu.score(*args, **{keyword: REFS if keyword == "refs" else "story"})
    assert f"{keyword!r}" in str(info.value) and "\n" not in str(info.value)
    assert bleu.score(HYPS, REFS).n == 2  # the scorer is fine afterwards


def test_a_scorer_given_predictions_says_where_the_stories_go() -> None:
    """Hugging Face evaluate's ``predictions=`` on a scorer object."""
    bleu = get_metric("bleu-4")
    with pytest.raises(InputError, match=r"predictions=.*hypotheses="):
        bleu.score(predictions=HYPS, references=REFS)
    with pytest.raises(InputError, match=r"no stories to score"):
        bleu.score(references=REFS)
    assert bleu.score(hypotheses=HYPS, references=REFS) == bleu.score(HYPS, REFS)


def test_a_scoring_argument_given_to_get_metric_says_where_it_goes() -> None:
    with pytest.raises(InputError, match=r"key is an argument of scoring.*\.score\(stories, references, key=") as info:
        get_metric("bleu-4", key="sequence")
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match=r"references is an argument of scoring"):
        get_metric("rouge-l", references=REFS)
    # a real option of the metric is not touched
    with pytest.raises(InputError, match=r"did you mean sentences\?"):
        get_metric("rovist-nr", sentence="split")


def test_score_given_a_scorer_object_or_several_names() -> None:
    bleu = get_metric("bleu-4")
    with pytest.raises(InputError, match=r"scorer object.*\.score\(stories, references\)"):
        vistkit.score(bleu, HYPS, REFS)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"one metric per call"):
        vistkit.score(["bleu-4", "rouge-l"], HYPS, REFS)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ registry names
@pytest.mark.parametrize(
    ("name", "meant"),
    [("BLEU_4", "bleu-4"), ("bleu 4", "bleu-4"), ("Rouge_L", "rouge-l"), ("CIDEr-D", "cider-d"), ("bleu4", "bleu-4")],
)
def test_a_name_written_otherwise_suggests_the_metric(name: str, meant: str) -> None:
    with pytest.raises(UnknownMetricError, match=re.escape(f"(did you mean {meant}?)")):
        get_metric_class(name)


@pytest.mark.parametrize("name", ["", " ", "\n"])
def test_an_empty_name_suggests_no_metric(name: str) -> None:
    """``""`` suggested every one of the 27 metrics."""
    with pytest.raises(UnknownMetricError) as info:
        get_metric_class(name)
    text = str(info.value)
    assert "did you mean" not in text and "vistkit.list_metrics()" in text and len(text) < 200


def test_a_family_name_still_suggests_its_members() -> None:
    with pytest.raises(UnknownMetricError, match=r"did you mean meteor-album, meteor-coco, meteor-vist\?"):
        get_metric_class("METEOR")


# ------------------------------------------------------------------------------------------ exports and reprs
def test_prefer_is_exported() -> None:
    from vistkit.metrics.base import prefer

    assert vistkit.prefer is prefer and "prefer" in vistkit.__all__ and "prefer" in dir(vistkit)
    with pytest.raises(InputError, match="not a pairwise metric"):
        vistkit.prefer("bleu-4", ["a"], ["b"])


def test_a_scorer_prints_its_metric_and_options() -> None:
    assert repr(get_metric("bleu-4")) == "vistkit.get_metric('bleu-4')"
    assert repr(get_metric("rovist-nr-jaccard", sentences="split")) == (
        "vistkit.get_metric('rovist-nr-jaccard', sentences='split')"
    )


def test_vrank_without_a_model_names_the_python_option() -> None:
    with pytest.raises(MissingDependencyError, match=r"model=DIR in Python") as info:
        get_metric("vrank")
    assert "--option vrank.model=DIR" in str(info.value)


# ------------------------------------------------------------------------------------------ engines
def test_a_ray_metric_object_keeps_its_options_in_the_strategy() -> None:
    """A Ray engine's bertscore made with idf=True cannot be split (its idf comes from the whole set), whether
    the strategy is asked with the name and options or with the metric object."""
    pytest.importorskip("ray")
    from vistkit.engine.merge import strategy
    from vistkit.engine.ray import RemoteMetric, _remote_class

    remote = _remote_class(get_metric_class("bertscore"))(None, "bertscore", {"idf": True})  # type: ignore[arg-type]
    assert isinstance(remote, RemoteMetric)
    assert strategy("bertscore", {"idf": True}) == "whole"
    assert strategy(remote) == "whole"
    plain = _remote_class(get_metric_class("bertscore"))(None, "bertscore", {})  # type: ignore[arg-type]
    assert strategy(plain) == "items"


def test_a_ray_metric_prints_as_an_engine_metric() -> None:
    pytest.importorskip("ray")
    from vistkit.engine.ray import _remote_class

    remote = _remote_class(get_metric_class("rovist-nr"))(None, "rovist-nr", {"sentences": "split"})  # type: ignore[arg-type]
    assert repr(remote) == "<rovist-nr on a Ray engine, sentences='split'>"
    assert type(remote).__module__ == "vistkit.engine.ray"


def test_why_a_metric_cannot_be_streamed() -> None:
    """Every metric the engines do not split said "its item scores depend on the whole set", false for per-story
    scores vistkit has only not checked shard by shard (story-ranker-v1, the lm-* metrics)."""
    from vistkit.engine.local import LocalEngine
    from vistkit.engine.merge import ITEM_METRICS, cannot_stream, strategy

    why = r"^sacrebleu cannot be streamed in batches: its result depends on the whole set \(sacreBLEU's nrefs\);"
    with pytest.raises(InputError, match=why):
        LocalEngine().score_stream(get_metric("sacrebleu"), iter([]), signature="s")
    ranker = get_metric_class("story-ranker-v1").__new__(get_metric_class("story-ranker-v1"))  # no model loaded
    text = str(cannot_stream(ranker))
    assert "whole set" not in text and "checked to depend on each story alone" in text
    assert f"and {len(ITEM_METRICS) - 4} more" in text
    assert "idf=True" in str(cannot_stream(get_metric_class("bertscore").__new__(get_metric_class("bertscore"))))
    assert "idf" in str(cannot_stream(get_metric_class("cider-d")()))
    assert strategy("story-ranker-v1") == "whole"


# ------------------------------------------------------------------------------------------ vrank anchors
@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_vrank_refuses_an_anchor_story_without_words(tmp_path: Any, text: str) -> None:
    """An anchors file holding a story without text (a cell lost in an export) was read without a word, and every
    per-story score silently averaged in the preference over an empty story; now one sentence names it, before the
    model is loaded."""
    import json

    anchors = tmp_path / "anchors.json"
    stories = [{"story_id": "a1", "text": "we went to the park ."}, {"story_id": "a2", "text": text}]
    anchors.write_text(json.dumps(stories))
    with pytest.raises(InputError, match=r"anchor story 'a2' .* has no words") as info:
        get_metric("vrank", model=str(tmp_path / "no-model"), anchors=str(anchors))
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------ huge whole numbers
HUGE = 10**5000  # past Python's 4,300-digit limit for printing an integer


def test_a_huge_whole_number_is_one_sentence() -> None:
    """batch_size, workers, num_gpus_per_worker and num_threads of 10**5000 failed with Python's "Exceeds the limit
    (4300 digits) for integer string conversion" or "int too large to convert to float"."""
    from vistkit.engine import check_batch_size
    from vistkit.engine.local import LocalEngine
    from vistkit.metrics.base import check_num_threads

    about = r"\(got a number of about 5,001 digits\)$"
    with pytest.raises(InputError, match=r"^batch_size must be from 1 to 1,048,576 stories " + about):
        check_batch_size(HUGE)
    with pytest.raises(InputError, match=r"batch_size must be from 1"):
        LocalEngine().score_stream(get_metric("bleu-4"), iter([]), signature="s", batch_size=-HUGE)
    with pytest.raises(InputError, match=r"num_threads must be from 1 to 1,024 \(got a number of about"):
        check_num_threads("vrank", HUGE)
    with pytest.raises(InputError, match=r"\(got 2,000\)"):
        check_num_threads("vrank", 2000)
    pytest.importorskip("ray")
    from vistkit.engine.ray import _number, check_workers

    with pytest.raises(InputError, match=r"--workers must be from 1 to 4,096 \(got a number of about"):
        check_workers(HUGE)
    with pytest.raises(InputError, match=r"^--num-gpus-per-worker must be a finite number >= 0, not a number of about"):
        _number(HUGE, "--num-gpus-per-worker", low=0.0, strict=False)
    with pytest.raises(InputError, match=r"must be a number >= 0, not -1$"):
        _number(-1, "--num-gpus-per-worker", low=0.0, strict=False)


def test_streaming_a_ray_engines_ranker_is_refused_for_its_reason() -> None:
    """`RayEngine.metric` hands out a ranker as a local object (rankers run in the driver); streaming it said "pass
    engine.metric(NAME, OPTIONS) rather than a metric built in this process", which is what the caller had done.
    Now the reason: rankers are not streamed. (The check comes before any worker is used: no cluster needed.)"""
    pytest.importorskip("ray")
    from vistkit.engine.ray import RayEngine

    cls = get_metric_class("story-ranker-v1")
    ranker = cls.__new__(cls)  # what engine.metric("story-ranker-v1") hands out, without loading its model
    engine = object.__new__(RayEngine)  # not started: the refusal needs no cluster
    with pytest.raises(InputError, match=r"^story-ranker-v1 cannot be streamed in batches: ") as info:
        engine.score_stream(ranker, iter([]), signature="s")
    assert "engine.metric" not in str(info.value)
