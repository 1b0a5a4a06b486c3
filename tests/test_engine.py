"""The engine layer without a cluster: shard merging equals whole-set scoring (the property the Ray engine relies
on), CIDEr-D's two-pass document frequencies, the streaming local path, and the one-sentence error when Ray is
missing."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.readers import read_stories
from vistkit.data.story import Story, StorySet
from vistkit.engine import batched, make_engine
from vistkit.engine.merge import (
    StreamTotals,
    cider_df_part,
    cider_score_part,
    merge_extra,
    merge_scores,
    strategy,
)
from vistkit.errors import InputError
from vistkit.metrics.base import Item, Score, align, get_metric
from vistkit.metrics.coco import _NgramTable, cider_d_item_scores


def sharded(metric_name: str, items: list[Item], size: int, signature: str = "sig") -> Score:
    """What the Ray engine does, in process: score shards, merge (two passes for CIDEr-D)."""
    metric = get_metric(metric_name)
    shards = list(batched(items, size))
    if strategy(metric) == "cider":
        df: Counter[str] = Counter()
        n = 0
        for s in shards:
            d, k = cider_df_part(s)
            df.update(d)
            n += k
        parts = [cider_score_part(metric, s, df=dict(df), n_docs=n, signature=signature) for s in shards]
    else:
        parts = [metric.score_items(s, signature=signature) for s in shards]
    return merge_scores(parts, signature=signature)


def _tok(words: list[str]) -> str:
    return " ".join(words)


words = st.lists(st.sampled_from(list("abcdefg")), min_size=0, max_size=9)


@settings(max_examples=40, deadline=None)
@given(
    hyps=st.lists(words, min_size=1, max_size=12),
    data=st.data(),
    size=st.integers(min_value=1, max_value=5),
)
def test_cider_shards_with_global_df_equal_the_whole_set_bit_for_bit(
    hyps: list[list[str]], data: st.DataObject, size: int
) -> None:
    """CIDEr-D item scores from shards (df and N of the whole set) == the whole set's, exactly."""
    refs = [data.draw(st.lists(words, min_size=1, max_size=3)) for _ in hyps]
    h = [_tok(w) for w in hyps]
    r = [[_tok(w) for w in rs] for rs in refs]
    whole = cider_d_item_scores(_NgramTable(h, r))
    tables = [_NgramTable(h[i : i + size], r[i : i + size]) for i in range(0, len(h), size)]
    df: Counter[str] = Counter()
    for t in tables:
        d = t.reference_document_frequency()
        df.update({s: int(d[g]) for g, s in enumerate(t.gram_strings()) if d[g]})
    parts = [
        cider_d_item_scores(t, df=np.array([df.get(s, 0) for s in t.gram_strings()], float), n_docs=len(h))
        for t in tables
    ]
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_gram_strings_name_each_gram() -> None:
    t = _NgramTable(["a b a"], [["b a c"]])
    strings = t.gram_strings()
    assert len(strings) == t.n_grams
    assert {"a", "b", "c", "a b", "b a", "a c", "a b a", "b a c"} == set(strings)
    df = t.reference_document_frequency()
    expected = {"b": 1, "a": 1, "c": 1, "b a": 1, "a c": 1, "b a c": 1}
    assert {s: int(df[g]) for g, s in enumerate(strings) if df[g]} == expected


@pytest.fixture(scope="module")
def real_items() -> tuple[StorySet, StorySet]:
    refs = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"))
    hyps = read_stories(shared_file("tapm-vist-outputs", "vist", "ours.json"))
    return StorySet(list(hyps)[:300]), refs


@pytest.mark.parametrize("name", ["bleu-4", "rouge-l", "cider-d", "rovist-nr"])
def test_shard_merge_equals_local_on_real_data(name: str, real_items: tuple[StorySet, StorySet]) -> None:
    """TAPM outputs vs the VIST test stories (sequence keying): merged shards == the local score, bit for bit,
    bootstrap statistics included."""
    hyps, refs = real_items
    metric = get_metric(name)
    local = metric.score(hyps, refs if metric.needs_references else None, key="sequence")
    al = align(hyps, refs if metric.needs_references else None, keying="sequence")
    merged = sharded(name, al.items, 37, signature=local.signature)
    assert merged.corpus == local.corpus
    np.testing.assert_array_equal(merged.item_scores, local.item_scores)
    assert merged.item_ids == local.item_ids
    assert merged.extra == local.extra
    if local.stats is not None:
        np.testing.assert_array_equal(merged.stats, local.stats)
        idx = np.random.default_rng(0).integers(0, len(local.item_ids), size=(5, len(local.item_ids)))
        assert [merged.resample(i) for i in idx] == [local.resample(i) for i in idx]


def test_cider_needs_the_global_df() -> None:
    """Shards scored with their own df differ from the whole set (why CIDEr-D takes two passes)."""
    items = [
        Item(str(i), Story(str(i), h), (Story(f"r{i}", r),))
        for i, (h, r) in enumerate([("a b c", "a b d"), ("a b c", "a x y"), ("e f g", "e f g"), ("a c", "c a")])
    ]
    from vistkit.metrics.coco import coco_inputs

    whole = coco_inputs(items).cider_d()
    naive = np.concatenate([coco_inputs(items[:2]).cider_d(), coco_inputs(items[2:]).cider_d()])
    assert not np.array_equal(whole, naive)


def test_merge_extra_rules() -> None:
    merged = merge_extra(
        [
            {"P": 0.5, "item_P": [0.5], "pairs": 2, "ids": ["a"], "per": {"a": 1}},
            {"P": 0.1, "item_P": [0.25, 0.75], "pairs": 3, "ids": ["b"], "per": {"b": 2}},
        ]
    )
    assert merged == {"P": 0.5, "item_P": [0.5, 0.25, 0.75], "pairs": 5, "ids": ["a", "b"], "per": {"a": 1, "b": 2}}


def test_strategies() -> None:
    assert strategy("bleu-4") == "items"
    assert strategy("cider-d") == "cider"
    assert strategy("bertscore") == "items"
    assert strategy("bertscore", {"idf": True}) == "whole"
    assert strategy("sacrebleu") == "whole"  # its signature's nrefs depends on the whole set


def test_local_stream_equals_whole_set(real_items: tuple[StorySet, StorySet]) -> None:
    """The streaming path keeps only scores and summed statistics yet gives the same corpus BLEU."""
    hyps, refs = real_items
    metric = get_metric("bleu-4")
    local = metric.score(hyps, refs, key="sequence")
    items = align(hyps, refs, keying="sequence").items
    seen: list[str] = []
    totals = make_engine("local").score_stream(  # type: ignore[attr-defined]
        metric, iter(items), signature=local.signature, batch_size=50, on_part=lambda p: seen.extend(p.item_ids)
    )
    assert isinstance(totals, StreamTotals)
    assert totals.n_items == len(items) and seen == local.item_ids
    assert totals.corpus() == local.corpus


def test_ray_missing_is_one_sentence(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Without Ray, --engine ray exits 1 with one sentence naming the extra."""
    from vistkit.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    hyps = shared_file("tapm-vist-outputs", "vist", "ours.json")
    assert main(["score", str(hyps), "-m", "rovist-nr", "--engine", "ray"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'vistkit[ray]'" in err and "Traceback" not in err and err.count("\n") == 1


def test_ray_missing_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'vistkit\[ray\]'"):
        make_engine("ray")


def test_ray_options_that_cannot_work_are_refused_at_once() -> None:
    """A NaN GPU share, or more workers than a local cluster holds: one sentence before any wait (Ray itself
    waited 120 s for workers that could never start)."""
    pytest.importorskip("ray")
    from vistkit.engine.ray import RayEngine, _check_fits

    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(InputError, match="--num-gpus-per-worker must be a number >= 0"):
            RayEngine(num_gpus_per_worker=bad)
    _check_fits(2, 1.0, 0.0, {"CPU": 2.0})
    _check_fits(4, 1.0, 0.5, {"CPU": 4.0, "GPU": 2.0})
    with pytest.raises(InputError, match=r"3 Ray workers need 3 CPUs .* has 2; ask for at most 2 with --workers"):
        _check_fits(3, 1.0, 0.0, {"CPU": 2.0})
    with pytest.raises(InputError, match="has no GPU; leave out --num-gpus-per-worker"):
        _check_fits(1, 1.0, 1.0, {"CPU": 2.0})
    with pytest.raises(InputError, match=r"need 3 GPUs .* has 2; ask for at most 2"):
        _check_fits(3, 1.0, 1.0, {"CPU": 8.0, "GPU": 2.0})


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "nan"])
def test_a_bad_ray_start_timeout_is_one_sentence_before_ray_starts(
    raw: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It was read when vistkit.engine.ray was imported: a value that is not a number crashed the import."""
    from vistkit.cli import main
    from vistkit.engine.ray import start_timeout

    monkeypatch.setenv("VISTKIT_RAY_START_TIMEOUT", raw)
    with pytest.raises(InputError, match="VISTKIT_RAY_START_TIMEOUT"):
        start_timeout()
    stories = tmp_path / "s.json"
    stories.write_text('{"a": "we went to the park . it was fun ."}')
    monkeypatch.setattr("vistkit.engine.make_engine", lambda *a, **k: pytest.fail("an engine was opened"))
    assert main(["score", str(stories), "-m", "rovist-nr", "--engine", "ray"]) == 1
    assert "VISTKIT_RAY_START_TIMEOUT" in capsys.readouterr().err
    monkeypatch.setenv("VISTKIT_RAY_START_TIMEOUT", "30")
    assert start_timeout() == 30


@pytest.mark.parametrize(("raw", "shown"), [("", True), ("0", True), ("no", True), ("1", False), ("yes", False)])
def test_warnings_follow_vistkit_quiet_as_progress_does(
    raw: str, shown: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.errors import warn

    monkeypatch.setenv("VISTKIT_QUIET", raw)
    warn("a thing to know")
    assert ("warning: a thing to know" in capsys.readouterr().err) is shown
