"""The lead's own fixes of probe round 16, and the helpers' proposals for files outside their own: ``~`` in a path
after ``=`` (no shell expands it there), a reference-free metric given a template through the Python API, and a
Vrank folder under an unknown ``~user``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import vistkit
from vistkit.data.readers import input_path, read_stories
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError


def test_a_story_file_under_the_home_folder_is_found_when_given_with_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--images=~/photos`` or ``--photos=~/map.json``: bash leaves a ``~`` after ``=`` as it is, and every other
    path option (model folders) already expanded it, so the file "did not exist"."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "s.jsonl").write_text('{"story_id": "a", "text": "we went . it was fun ."}\n', encoding="utf-8")
    assert input_path("~/s.jsonl") == str(tmp_path / "s.jsonl")
    assert [s.story_id for s in read_stories("~/s.jsonl")] == ["a"]
    assert input_path("-") == "-" and input_path("a~b") == "a~b"  # only a leading ~, and standard input stays
    # a ~user this machine does not know stays as written, and is then a file that does not exist
    assert input_path("~no-such-user-here/s.jsonl") == "~no-such-user-here/s.jsonl"
    assert os.path.expanduser("~no-such-user-here") == "~no-such-user-here"


def test_a_template_makes_a_reference_free_score_refuse_missing_stories_in_python_too() -> None:
    """``vistkit.score(reference-free metric, stories, template=..., require_all=True)`` checked missing stories only
    against references, so with none it scored the stories it had without a word (the CLI refuses it)."""
    stories = StorySet(
        [
            Story("a", "we went to the park . it was sunny .", photo_ids=("1", "2")),
            Story("b", "the dog ran home . we laughed .", photo_ids=("3", "4")),
        ]
    )
    with pytest.raises(InputError, match=r"One story is missing in this submission\. Photo seq: 5-6"):
        vistkit.score("rovist-nr", stories, key="sequence", template=["1-2", "3-4", "5-6"], require_all=True)
    # without require_all the template only selects, as before
    partial = vistkit.score("rovist-nr", stories, key="sequence", template=["1-2", "5-6"])
    assert partial.n == 1
    whole = vistkit.score("rovist-nr", stories, key="sequence", template=["1-2", "3-4"], require_all=True)
    assert whole.n == 2


def test_a_vrank_folder_under_an_unknown_user_is_one_sentence() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from vistkit.models.vrank import load_vrank

    with pytest.raises(InputError, match=r"no-such-user-here.*does not know"):
        load_vrank("~no-such-user-here/vrank")


def test_a_streamed_run_keeps_8_bytes_an_item_however_small_its_batches() -> None:
    """`StreamTotals` kept one NumPy array per batch: with batches of one story, a million items took ~160 MB where
    its docstring promises 8 bytes an item."""
    import sys

    import numpy as np

    from vistkit.engine.merge import StreamTotals
    from vistkit.metrics.base import Score

    totals = StreamTotals()
    for i in range(5_000):
        totals.add(Score("m", float(i), [str(i)], np.array([float(i)]), "m|test"))
    held = sys.getsizeof(totals._values)
    assert held < 5_000 * 8 * 1.5 + 1_000  # an array of doubles (plus its growth margin), not 5,000 objects
    np.testing.assert_array_equal(np.concatenate(totals.scores), np.arange(5_000, dtype=float))
    assert totals.corpus() == np.arange(5_000).mean() and totals.n_items == 5_000


def test_the_prefetch_thread_runs_in_the_callers_context() -> None:
    """A warning said while a prefetched piece is prepared belongs to the run (its once-per-run filter) and a
    Python API call's wording holds there too: both are context variables, which a plain thread does not see."""
    import contextvars

    from vistkit.models.runtime import prefetch

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="outside")
    token = marker.set("the caller's")
    try:
        seen = list(prefetch((marker.get() for _ in range(3)), depth=2))
    finally:
        marker.reset(token)
    assert seen == ["the caller's"] * 3
