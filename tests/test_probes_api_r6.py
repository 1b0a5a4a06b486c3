"""Bad-input probes, round 6: the Python library API and the scoring engines.

Every public entry point given a value of the wrong type, or a value no run can use, answers with one `InputError`
sentence naming what it accepts (never a raw TypeError / AttributeError / IndexError from deep inside); a value
that is the right type is never read in a surprising way (a text as a list of characters, ``"no"`` as True); a
scorer reused many times keeps its memory; engine errors are one sentence, never a Ray traceback dump.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vistkit import InputError, Story, StorySet, get_metric, read_stories, score
from vistkit.metrics.base import align

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser)")

HYPS = [f"we went to the park number {i} . it was fun and sunny . then we went home ." for i in range(12)]


def one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# ------------------------------------------------------------------------------------------------ read_stories
@pytest.mark.parametrize("path", [5, None, 3.5, ["a.json"], {"a": "b"}, np.array([1]), object()])
def test_read_stories_of_what_is_not_a_path_names_what_it_takes(path: object) -> None:
    """read_stories(5) raised "TypeError: expected str, bytes or os.PathLike object, not int" from pathlib."""
    with pytest.raises(InputError, match=r"named by a path \(a str or pathlib.Path\), not") as info:
        read_stories(path)  # type: ignore[arg-type]
    one_sentence(info.value)


@pytest.mark.parametrize(
    ("path", "message"),
    [("", "is empty"), ("a\x00b.json", "NUL character"), ("\ud800.json", "surrogate")],
)
def test_read_stories_of_a_path_no_file_can_have(path: str, message: str) -> None:
    """A NUL was a bare ValueError ("embedded null byte"), a lone surrogate a UnicodeEncodeError, "" "'.' is a
    folder"."""
    with pytest.raises(InputError, match=message):
        read_stories(path)


def test_read_stories_takes_str_path_and_bytes_alike(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text('{"story_id": "1", "text": "a b c ."}\n', encoding="utf-8")
    want = list(read_stories(str(f)))
    assert list(read_stories(f)) == want
    assert list(read_stories(os.fsencode(f))) == want  # type: ignore[arg-type]


def test_read_stories_options_of_the_wrong_type(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text('{"story_id": "1", "text": "a b c ."}\n', encoding="utf-8")
    with pytest.raises(InputError, match="format must be a format name"):
        read_stories(f, format=5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="system must be a text"):
        read_stories(f, system=5)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ Story / StorySet
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sentences": 5}, "sentences must be a list or tuple of texts, not int"),
        ({"sentences": "one. two."}, "sentences must be a list or tuple of texts, not str"),
        ({"sentences": ["a", 5]}, "every sentence must be a string, not int"),
        ({"photo_ids": 5}, "photo_ids must be a list or tuple of photo ids, not int"),
        ({"photo_ids": "123"}, "photo_ids must be a list or tuple of photo ids, not str"),
        ({"photo_ids": {"1", "2"}}, "photo_ids must be a list or tuple of photo ids, not set"),
        ({"system": 5}, "system must be a string"),
        ({"meta": 5}, "meta must be a dict"),
    ],
)
def test_story_fields_of_the_wrong_type(options: dict[str, Any], message: str) -> None:
    """photo_ids="123" was taken as photos 1, 2, 3 (sequence "1-2-3"); sentences=5 a bare TypeError."""
    with pytest.raises(InputError, match=message):
        Story("s1", "a text .", **options)


def test_story_lists_become_tuples_so_stories_hash_and_compare() -> None:
    """Story(photo_ids=[...]) kept the list: hash(story) raised "unhashable type: 'list'"."""
    a = Story("s1", "one . two .", sentences=["one .", "two ."], photo_ids=["1", "2"])
    b = Story("s1", "one . two .", sentences=("one .", "two ."), photo_ids=("1", "2"))
    assert a == b and hash(a) == hash(b) and a.photo_ids == ("1", "2") and a.sequence == "1-2"
    assert Story("s2", "x", photo_ids=(p for p in ["7", "8"])).photo_ids == ("7", "8")


def test_storyset_wrong_types() -> None:
    stories = StorySet([Story("1", "a . b ."), Story("2", "c . d .")])
    with pytest.raises(InputError, match="not int"):
        StorySet(5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="source"):
        StorySet([], source=5)  # type: ignore[arg-type]
    assert repr(StorySet([], source=Path("x.json"))) == "StorySet(0 stories, from x.json)"
    with pytest.raises(InputError, match=r"by_key\('story'\)"):
        stories["1"]  # type: ignore[call-overload]
    with pytest.raises(InputError, match="list or set of texts, not str"):
        stories.filter("12", "story")
    with pytest.raises(InputError, match="function"):
        stories.map_text(5)  # type: ignore[arg-type]
    assert stories[np.int64(1)].story_id == "2"
    with pytest.raises(IndexError):  # a sequence's own protocol
        stories[5]


# ------------------------------------------------------------------------------------------------ score()
@pytest.mark.parametrize(
    ("hyps", "hint"),
    [
        (np.array(HYPS[:2]), "array.tolist()"),
        (set(HYPS[:2]), "a set has no order"),
        ((h for h in HYPS[:2]), "list(...)"),
    ],
)
def test_containers_score_does_not_take_say_how_to_convert(hyps: Any, hint: str) -> None:
    with pytest.raises(InputError, match=re.escape(hint)):
        score("rovist-nr", hyps)


def test_a_pandas_series_says_how_to_convert() -> None:
    pd = pytest.importorskip("pandas")
    series = pd.Series(HYPS[:2])
    with pytest.raises(InputError, match=re.escape("series.to_dict()")):
        score("rovist-nr", series)
    assert score("rovist-nr", series.tolist()).corpus == score("rovist-nr", HYPS[:2]).corpus


@pytest.mark.parametrize(
    ("template", "message"),
    [(5, "not int"), ("0", "not str"), ({"0": 1}, "not dict"), ([0, 1], "holds a int"), ([], "no sequence keys")],
)
def test_a_template_that_is_not_a_list_of_keys(template: Any, message: str) -> None:
    """template=5 was a TypeError; template="01" was read as the keys "0" and "1"."""
    with pytest.raises(InputError, match=message):
        score("rovist-nr", HYPS[:2], template=template)
    with pytest.raises(InputError, match=message):
        get_metric("rovist-nr").score(HYPS[:2], template=template)


def test_yes_no_options_are_booleans() -> None:
    """reference_absent="no" switched the Reference Absent Algorithm on (bool("no") is True)."""
    for value in ("no", "false", 0, None):
        with pytest.raises(InputError, match="reference_absent must be True or False"):
            score("rovist-nr", HYPS[:2], reference_absent=value)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="require_all must be True or False"):
        get_metric("rovist-nr").check_inputs(StorySet([Story("1", "a . b .")]), None, require_all="no")  # type: ignore[arg-type]
    assert score("rovist-nr", HYPS[:2], reference_absent=np.bool_(False)).corpus == score("rovist-nr", HYPS[:2]).corpus


@pytest.mark.parametrize("text", ["a\u200bb . c d .", "\u202eabc . def .", "e\u0301\u0301 . x .", "😀 🎉 . 👍 ."])
def test_unusual_unicode_in_story_text_scores(text: str) -> None:
    """Zero-width, right-to-left, stacked combining marks and emoji are text: scored, never a crash."""
    result = score("rovist-nr", [text, HYPS[0]])
    assert result.item_ids == ["0", "1"] and len(result.item_scores) == 2


# ------------------------------------------------------------------------------------------------ Score objects
@pytest.fixture(scope="module")
def nr() -> Any:
    return score("rovist-nr", HYPS)


def test_score_resample_takes_row_numbers_in_range(nr: Any) -> None:
    """resample([99]) was a bare IndexError, resample([0.5]) "arrays used as indices must be of integer type",
    and resample([-1]) silently read the last row."""
    assert nr.resample([0, 1]) == nr.resample(np.array([0, 1]))
    for rows, message in (([99], "row 99 is not one of the 12"), ([-1], "row -1"), ([0.5], "integers")):
        with pytest.raises(InputError, match=message):
            nr.resample(rows)
    assert math.isnan(nr.resample(np.array([], dtype=int)))


def test_score_as_dict_is_strict_json_when_undefined() -> None:
    """as_dict() said JSON-ready but held NaN, which strict JSON (and every other language's parser) refuses."""
    undefined = score("rovist-nr", ["one sentence only"])
    assert math.isnan(undefined.corpus)
    assert json.loads(json.dumps(undefined.as_dict(), allow_nan=False))["corpus"] is None


def test_scores_and_cheap_scorers_pickle(nr: Any) -> None:
    """For multiprocessing: a Score and a scorer object travel through pickle and give the same numbers."""
    back = pickle.loads(pickle.dumps(nr))
    np.testing.assert_array_equal(back.item_scores, nr.item_scores)
    metric = pickle.loads(pickle.dumps(get_metric("rovist-nr", sentences="split")))
    np.testing.assert_array_equal(metric.score(HYPS).item_scores, nr.item_scores)


def test_a_ray_engine_metric_says_it_cannot_be_pickled() -> None:
    """It raised PicklingError "attribute lookup RemoteRougeL on abc failed"."""
    from vistkit.engine import EngineError
    from vistkit.engine.ray import _remote_class
    from vistkit.metrics.base import get_metric_class

    remote = _remote_class(get_metric_class("rouge-l"))(None, "rouge-l", {})  # type: ignore[arg-type]
    with pytest.raises(EngineError, match=r"cannot be pickled.*get_metric\('rouge-l'"):
        pickle.dumps(remote)


def test_one_scorer_reused_keeps_its_memory_and_is_thread_safe() -> None:
    """200 calls of one scorer object: resident memory stays put; four threads sharing it get the same numbers."""
    metric = get_metric("rovist-nr")
    texts = HYPS[:6]
    want = metric.score(texts).item_scores

    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in range(20):
        metric.score(texts)
    before = rss()
    for _ in range(200):
        metric.score(texts)
    assert rss() - before < 8 * 1024**2
    got: list[np.ndarray] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(5):
                got.append(metric.score(texts).item_scores)
        except BaseException as exc:  # pragma: no cover - the failure is the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(got) == 20
    assert all(np.array_equal(g, want) for g in got)


# ------------------------------------------------------------------------------------------------ scores.stats
def _two() -> tuple[Any, Any]:
    a = score("rovist-nr", HYPS)
    b = score("rovist-nr", [h.replace("fun", "fun fun fun") for h in HYPS])
    return a, b


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"confidence": "0.9"}, "confidence must be a number"),
        ({"confidence": None}, "confidence must be a number"),
        ({"n_bootstrap": "100"}, "resamples must be a whole number"),
        ({"n_bootstrap": None}, "resamples must be a whole number"),
        ({"n_bootstrap": 10.5}, "resamples must be a whole number"),
        ({"n_bootstrap": True}, "resamples must be a whole number"),
        ({"seed": math.nan}, "seed must be a whole number"),
        ({"seed": "x"}, "seed must be a whole number"),
        ({"seed": 1.5}, "seed must be a whole number"),
        ({"seed": -1}, "seed must be 0 or more"),
    ],
)
def test_bootstrap_options_of_the_wrong_type(options: dict[str, Any], message: str) -> None:
    from vistkit.scores.stats import bootstrap_ci

    a, _ = _two()
    with pytest.raises(InputError, match=message):
        bootstrap_ci(a, **options)


def test_bootstrap_takes_a_whole_float_as_the_number() -> None:
    from vistkit.scores.stats import bootstrap_ci

    a, _ = _two()
    assert bootstrap_ci(a, n_bootstrap=200.0) == bootstrap_ci(a, n_bootstrap=200)


def test_stats_of_what_is_not_a_score() -> None:
    """bootstrap_ci(None) was "AttributeError: 'NoneType' object has no attribute 'item_ids'"."""
    from vistkit.scores.stats import bootstrap_ci, compare_scores, paired_test, significance_mark, subset

    a, b = _two()
    for bad in (None, 5, [1.0, 2.0]):
        with pytest.raises(InputError, match="must be a vistkit Score"):
            bootstrap_ci(bad)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="must be a vistkit Score"):
            paired_test(a, bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="resamples must be a whole number"):
        paired_test(a, b, n_samples="5")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="takes a list of item ids, not str"):
        subset(a, "01")  # was read as the ids "0" and "1"
    with pytest.raises(InputError, match=r"compare_scores takes \{system"):
        compare_scores([a, b])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="must be a vistkit Score"):
        compare_scores({"x": {"m": 1.0}, "y": {"m": 2.0}})
    with pytest.raises(InputError, match="system 'y' has no rovist-nr score"):  # was KeyError: 'rovist-nr'
        compare_scores({"x": {"rovist-nr": a}, "y": {"other": b}})
    with pytest.raises(InputError, match="p-value is a number"):
        significance_mark("0.01")  # type: ignore[arg-type]
    result = compare_scores({"x": {"rovist-nr": a}, "y": {"rovist-nr": b}}, n_samples=100, n_bootstrap=100)
    assert result.results["y"]["rovist-nr"].paired is not None


# ------------------------------------------------------------------------------------------------ scores.distance
def test_distance_refuses_yes_no_scores_and_a_truthy_tanh_flag() -> None:
    """True was read as the score 1.0; tanh_g="no" kept tanh on."""
    from vistkit.scores.distance import dhm_distance, table_from_scores

    table = {"G": {"1": 0.5}, "C": {"1": 0.5}, "R": {"1": 0.2}}
    with pytest.raises(InputError, match="True is not a number"):
        dhm_distance({"G": {"1": True}, "C": {"1": 1.0}, "R": {"1": 1.0}}, table)
    with pytest.raises(InputError, match="tanh_g must be True or False"):
        dhm_distance(table, table, tanh_g="no")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"takes \{'G': Score"):
        table_from_scores(None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="G scores must be a vistkit Score"):
        table_from_scores({"G": 1, "C": 2, "R": 3})
    assert dhm_distance(table, table, tanh_g=np.bool_(True)).dHM == 0.0


# ------------------------------------------------------------------------------------------------ engines
def test_local_engine_options_and_stream_arguments() -> None:
    """engine.metric("bleu-4", {"foo": 1}) was a TypeError; batch_size 0 a bare ValueError, 2.5 an islice error,
    a text as items "'str' object has no attribute 'hypothesis'"."""
    from vistkit.engine.local import LocalEngine
    from vistkit.engine.merge import strategy

    engine = LocalEngine()
    with pytest.raises(InputError, match="rovist-nr has no option 'foo'"):
        engine.metric("rovist-nr", {"foo": 1})
    with pytest.raises(InputError, match="options are a dict"):
        engine.metric("rovist-nr", [1])  # type: ignore[arg-type]
    metric = engine.metric("rovist-nr")
    stories = StorySet([Story(str(i), h) for i, h in enumerate(HYPS)])
    items = align(stories, None, keying="story").items
    signature = metric.signature(keying="story")
    for size in (0, -1, 2.5, math.nan, "4", None, True, 10**9):
        with pytest.raises(InputError, match="batch_size"):
            engine.score_stream(metric, items, signature=signature, batch_size=size)  # type: ignore[arg-type]
    for bad_items in (5, "abc", ["a", "b"]):
        with pytest.raises(InputError, match="Item objects"):
            engine.score_stream(metric, bad_items, signature=signature)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="a metric object"):
        engine.score_stream("rovist-nr", items, signature=signature)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="on_part must be a function"):
        engine.score_stream(metric, items, signature=signature, on_part=5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="a metric is a name"):
        strategy(5)  # type: ignore[arg-type]
    whole = metric.score(stories, key="story")
    totals = engine.score_stream(metric, iter(items), signature=signature, batch_size=5.0)  # shards 5, 5, 2
    np.testing.assert_array_equal(np.concatenate(totals.scores), whole.item_scores)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 10**6}, "--workers must be from 1 to 4,096"),
        ({"workers": "2"}, "--workers must be a whole number"),
        ({"workers": 2.5}, "--workers must be a whole number"),
        ({"workers": True}, "--workers must be a whole number"),
        ({"num_gpus_per_worker": None}, "--num-gpus-per-worker must be a number >= 0"),
        ({"num_gpus_per_worker": "1"}, "--num-gpus-per-worker must be a number >= 0"),
        ({"num_cpus_per_worker": 0}, "num_cpus_per_worker must be a number > 0"),
        ({"batch_size": 0}, "batch_size must be from 1"),
        ({"max_retries": -1}, "max_retries must be a whole number"),
        ({"address": ""}, "--address must be auto"),
    ],
)
def test_ray_engine_options_are_checked_before_ray_starts(
    options: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """workers=10**6 on a running cluster tried to create a million actors; workers=2.5 started a cluster first;
    num_cpus_per_worker=0 was a ZeroDivisionError."""
    from vistkit.engine import ray as ray_engine

    def no_ray() -> None:
        raise AssertionError("Ray was imported before the options were checked")

    monkeypatch.setattr(ray_engine, "_import_ray", no_ray)
    with pytest.raises(InputError, match=message):
        ray_engine.RayEngine(**options)


def test_a_worker_error_is_one_line_with_its_type() -> None:
    """An unforeseen error in a worker: its type and first line, never Ray's multi-line traceback."""
    from vistkit.engine.ray import _one_line

    cause = AttributeError("'NoneType' object has no attribute 'text'\n  File ...\n  more")
    assert _one_line(cause, RuntimeError("x")) == "AttributeError: 'NoneType' object has no attribute 'text'"
    assert _one_line(None, RuntimeError("Traceback\n  File x\nValueError: boom")) == "ValueError: boom"


@pytest.mark.ray
@pytest.mark.slow
def test_a_failing_shard_stops_the_run_in_one_sentence_without_ray_dumps(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A shard that fails while others are in flight: one EngineError naming the error; the abandoned shards'
    tracebacks ("Unhandled error ...") are not logged; one story and shards of unequal size equal the local
    engine; an option a metric lacks is refused before the workers build it."""
    ray = pytest.importorskip("ray", reason="needs the ray extra")
    from vistkit.engine import EngineError
    from vistkit.engine.ray import RayEngine
    from vistkit.metrics.base import Item

    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        stories = StorySet([Story(str(i), h) for i, h in enumerate(HYPS)])
        local = get_metric("rovist-nr")
        with RayEngine(workers=2, batch_size=5) as eng:  # 12 stories: shards of 5, 5 and 2
            remote = eng.metric("rovist-nr")
            np.testing.assert_array_equal(remote.score(stories).item_scores, local.score(stories).item_scores)
            assert remote.score(stories[:1]).corpus == local.score(stories[:1]).corpus
            with pytest.raises(InputError, match="rovist-nr has no option 'foo'"):
                eng.metric("rovist-nr", {"foo": 1})
            bad = [Item(str(i), None, ()) for i in range(30)]  # type: ignore[arg-type]
            with pytest.raises(EngineError, match=r"with rovist-nr: AttributeError: 'NoneType'") as info:
                eng.score_items(remote, bad, signature="s")  # type: ignore[arg-type]
            one_sentence(info.value)
            import gc
            import time

            del info  # its traceback holds the abandoned shards' references: Ray logs them once they are freed
            gc.collect()
            time.sleep(1.0)
            np.testing.assert_array_equal(remote.score(stories).item_scores, local.score(stories).item_scores)
    finally:
        ray.shutdown()
    err = capfd.readouterr().err
    assert "Unhandled error" not in err and "Traceback" not in err, err[-2000:]

