"""Probes of time and memory on big or odd inputs of the `vistkit meta` scoring (bounded: call counts, not clocks)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from meta_dummies import dummy_metrics_registered

from vistkit.data.story import Story, StorySet
from vistkit.meta.human import StoryPair


@pytest.fixture
def dummies() -> Iterator[Any]:
    from meta_dummies import load_dummy_metrics

    with dummy_metrics_registered():
        yield load_dummy_metrics()


def _pairs(n: int) -> list[StoryPair]:
    """``n`` pairs of distinct texts, each of its own photo sequence."""
    return [
        StoryPair(
            pair_id=str(i),
            story_id=f"s{i}",
            img_seq=(str(i), "x"),
            text_1=" ".join(["w"] * (1 + i % 7)) + f" a{i}",
            text_2=" ".join(["w"] * (1 + i % 5)) + f" b{i}",
            system_1="m1",
            system_2="m2",
            gap=1.0,
        )
        for i in range(n)
    ]


def _calls(metric: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of stories of each `Metric.score` call ``metric`` gets, recorded in the returned list."""
    sizes: list[int] = []
    original = metric.score

    def counted(hyps: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(hyps))
        return original(hyps, *args, **kwargs)

    monkeypatch.setattr(metric, "score", counted)
    return sizes


@pytest.mark.parametrize("n", [50, 200])
def test_a_reference_free_metric_scores_the_stories_of_all_pairs_in_one_call(
    dummies: Any, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """`meta pairs` / `correlate` scored a reference-free metric one story per call (every unit had the same empty
    key, so each made a round of its own): 160,000 pairs took 80,000 calls, and a batched model metric lost its
    batches. They are one call now, with the same per-story scores."""
    from vistkit.meta.scoring import score_pairs

    metric = dummies.MetaLength()
    sizes = _calls(metric, monkeypatch)
    pairs = _pairs(n)
    got = score_pairs(metric, pairs)
    assert sizes == [2 * n]
    want_1 = [len(p.text_1.split()) for p in pairs]
    want_2 = [len(p.text_2.split()) for p in pairs]
    assert np.array_equal(got.score_1, want_1) and np.array_equal(got.score_2, want_2)
    assert got.excluded == {}


def test_a_reference_free_metric_scores_a_repeated_text_once_in_one_call(
    dummies: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stories repeated across pairs are still scored once each (one unit per distinct text)."""
    from vistkit.meta.scoring import score_stories

    metric = dummies.MetaLength()
    sizes = _calls(metric, monkeypatch)
    stories = [Story(story_id=f"s{i}", text="a b c" if i % 2 else "a b", photo_ids=()) for i in range(40)]
    values, _ = score_stories(metric, stories)
    assert sizes == [2]
    assert values.tolist() == [2.0, 3.0] * 20


# ------------------------------------------------------------------------------------ CIDEr-D's rounds
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for the PTB tokeniser")


def _skewed(heavy: int, keys: int = 30) -> tuple[list[StoryPair], StorySet]:
    """One pair per key of ``keys``, then ``heavy`` pairs of distinct stories that all share key 0, with two
    references per key (one of them the human story of some pairs, for Reference Absent)."""
    words = "the a we went to park dog was happy it fun day family beach".split()

    def text(seed: int) -> str:
        return " ".join(words[(seed * 7 + j * (seed % 5 + 1)) % len(words)] for j in range(8 + seed % 6)) + f" w{seed}"

    pairs = [StoryPair(str(k), f"s{k}", (str(k), "x"), text(k), text(k + 500), "m1", "m2", 1.0) for k in range(keys)]
    pairs += [
        StoryPair(f"h{j}", "s0", ("0", "x"), text(1000 + j), text(2000 + j) if j % 3 else text(9000), f"m{j}",
                  "human" if j % 3 == 0 else f"n{j}", 1.0)
        for j in range(heavy)
    ]  # fmt: skip
    refs = [Story(story_id=f"r{k}{v}", text=text(9000) if k == 0 and v == 0 else text(3000 + 2 * k + v),
                  photo_ids=(str(k), "x"))
            for k in range(keys) for v in range(2)]  # fmt: skip
    return pairs, StorySet(refs)


@needs_java
@pytest.mark.parametrize("reference_absent", [True, False])
def test_cider_d_scores_a_key_of_many_stories_without_rescoring_every_other_key_per_round(
    monkeypatch: pytest.MonkeyPatch, reference_absent: bool
) -> None:
    """CIDEr-D's idf comes from the whole call, and a pairs file is scored in rounds of one story per key, so every
    round was padded with a story of each key it lacked: the stories scored were the rounds times the keys (2,200
    pairs, 200 stories on one key and 2,000 other keys: 116 s; 800 on one key: 276 s). The rounds now score only
    their own stories, with the same numbers as the padded rounds."""
    from vistkit.meta import scoring
    from vistkit.metrics.coco import CiderD

    scored: dict[int, int] = {}
    padded: dict[int, int] = {}
    for heavy in (10, 40):
        pairs, refs = _skewed(heavy)
        metric = CiderD()
        sizes = _calls(metric, monkeypatch)
        got = scoring.score_pairs(metric, pairs, references=refs, reference_absent=reference_absent)
        scored[heavy] = sum(sizes)
        monkeypatch.setattr(scoring, "_round_corpus", lambda metric: None)  # the padded rounds, as before
        before = CiderD()
        sizes_before = _calls(before, monkeypatch)
        want = scoring.score_pairs(before, pairs, references=refs, reference_absent=reference_absent)
        padded[heavy] = sum(sizes_before)
        monkeypatch.undo()
        assert np.allclose(got.score_1, want.score_1, rtol=1e-12, atol=0, equal_nan=True)
        assert np.allclose(got.score_2, want.score_2, rtol=1e-12, atol=0, equal_nan=True)
        assert got.excluded == want.excluded and got.signature == want.signature
        assert metric.rounds is None
    # the stories scored grow with the pairs (30 + 2 x heavy units, and a first round of 30 keys), not with the
    # rounds times the keys (~2 x heavy x 30, as the padded rounds did)
    assert scored[40] < 2.5 * scored[10] and padded[40] > 3.5 * padded[10], (scored, padded)
    assert 5 * scored[40] < padded[40], (scored, padded)


@needs_java
@pytest.mark.parametrize("name", ["rouge-l", "cider-d"])
def test_a_key_of_many_stories_starts_the_tokeniser_once_not_once_per_round(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Each round of a pairs file was one `Metric.score` call, and each call sent its new texts to the PTB jar: a
    start of Java (~0.1 s) per round, 800 rounds for 400 pairs of one key (76 s of a 78 s run). The texts of all
    rounds are tokenised in one call first."""
    from vistkit.meta import scoring
    from vistkit.metrics import coco
    from vistkit.metrics.base import get_metric_class

    jar_calls: list[int] = []
    backend = coco._ptb_backend

    def counted(texts: list[str]) -> list[str]:
        jar_calls.append(len(texts))
        return backend(texts)

    monkeypatch.setattr(coco, "_ptb_backend", counted)
    for heavy in (10, 40):
        with coco._CACHE_LOCK:
            coco._TOKEN_CACHE.clear()
            coco._TOKEN_CACHE_BYTES[0] = 0
        jar_calls.clear()
        pairs, refs = _skewed(heavy)
        scoring.score_pairs(get_metric_class(name)(), pairs, references=refs)
        assert len(jar_calls) == 1, (heavy, jar_calls)
