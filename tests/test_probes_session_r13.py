"""Probe round 13, fixes made while reviewing the helpers' reports: a missing Java is said before any metric
scores (not after the metrics before a coco or METEOR metric have run), ..."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vistkit.cli import main
from vistkit.errors import MissingDependencyError


@pytest.fixture
def no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import vistkit.models.java as vj

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(vj, "_SERVER", None)
    monkeypatch.setattr(vj, "_JAVA_CACHE", {})


@pytest.mark.parametrize("name", ["bleu-4", "rouge-l", "cider-d", "meteor-vist", "meteor-album", "meteor-coco"])
def test_java_metrics_say_a_missing_java_before_they_are_built(no_java: None, name: str) -> None:
    from vistkit.commands.score import construct
    from vistkit.metrics.base import get_metric_class

    with pytest.raises(MissingDependencyError, match=r"needs Java 8\+"):
        get_metric_class(name).check_tools()
    with pytest.raises(MissingDependencyError, match=r"needs Java 8\+"):
        construct([(get_metric_class("sacrebleu"), {}), (get_metric_class(name), {})])


def test_a_missing_java_stops_the_run_before_the_first_metric_scores(
    no_java: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-m sacrebleu,rouge-l` scored every story with sacrebleu, then failed on rouge-l's tokeniser and lost that
    work (minutes with bertscore first), against docs/cli.md's "Mistakes come first"."""
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("sacrebleu scored before the missing Java was said")

    monkeypatch.setattr(SacreBleu, "score_items", never)
    rows = [{"story_id": f"s{i}", "text": f"we went to the park number {i} ."} for i in range(3)]
    for name in ("h", "r"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["score", str(tmp_path / "h.jsonl"), "-r", str(tmp_path / "r.jsonl"), "-m", "sacrebleu,rouge-l"])
    err = capsys.readouterr().err
    assert code == 1
    assert "the PTB tokenizer (coco metrics) needs Java 8+" in err


def test_metrics_all_leaves_the_java_metrics_out_with_the_reason(no_java: None) -> None:
    from vistkit.commands.score import construct_all
    from vistkit.metrics.base import get_metric_class

    names = ["sacrebleu", "bleu-4", "rouge-l", "cider-d", "meteor-vist"]
    skipped: dict[str, str] = {}
    built = construct_all([(get_metric_class(n), {}) for n in names], skipped, engine=None)
    assert set(skipped) == set(names[1:]) and "needs Java 8+" in skipped["rouge-l"]
    assert [m.name for m in built] == ["sacrebleu"]


def test_per_item_has_a_row_for_an_item_left_out_for_want_of_a_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note under the table says "N item(s) excluded (see --per-item / --format json)", but an item with no
    reference had no row in --per-item (only --format json listed it)."""
    import csv

    hyps = [{"story_id": f"s{i}", "text": f"we went to the park number {i} ."} for i in range(3)]
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hyps))
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hyps[:2]))
    out = tmp_path / "items.csv"
    code = main(["score", str(tmp_path / "h.jsonl"), "-r", str(tmp_path / "r.jsonl"), "-m", "sacrebleu",
                 "--per-item", str(out), "-q"])
    assert code == 0, capsys.readouterr().err
    rows = {r["id"]: r for r in csv.DictReader(out.open(newline=""))}
    assert set(rows) == {"s0", "s1", "s2"}
    assert rows["s2"]["sacrebleu"] == "" and "no reference" in rows["s2"]["sacrebleu note"]
    assert rows["s0"]["sacrebleu note"] == "" and float(rows["s0"]["sacrebleu"]) > 0


def test_the_finite_check_of_weights_refuses_an_expansion_bomb_before_reading_it() -> None:
    """`refuse_non_finite` (r13) ran torch.isfinite over an expanded tensor, allocating its dense size (a 1.6 KB
    checkpoint holding a broadcast tensor: gigabytes) before the dense-size check could refuse it."""
    import torch

    from vistkit.errors import InputError
    from vistkit.models.checkpoints import extract_state_dict

    bomb = torch.zeros(1).expand(1 << 31)  # 8 GiB of float32 once dense, 4 bytes stored
    with pytest.raises(InputError, match="once made dense"):
        extract_state_dict({"model": {"w": bomb}}, where="c.pt")
    with pytest.raises(InputError, match="NaN or infinite"):
        extract_state_dict({"model": {"w": torch.tensor([1.0, float("nan")])}}, where="c.pt")


def test_score_distributions_pool_many_systems_into_one_box(tmp_path: Path) -> None:
    """`meta correlate --report` with 3,000 systems spent 140 s and ~800 MB drawing a box per system."""
    import numpy as np

    from vistkit.report.plots import MAX_SYSTEM_BOXES, _pool_systems, plot_score_distributions

    rng = np.random.default_rng(0)
    many = {"human": rng.random(5), **{f"sys{i}": rng.random(3) for i in range(3000)}}
    pooled = _pool_systems(many)
    assert list(pooled) == ["human", "all 3,000 systems"] and pooled["all 3,000 systems"].size == 9000
    assert plot_score_distributions({"m": many}, tmp_path / "dist").exists()
    few = {"m": {f"sys{i}": rng.random(3) for i in range(MAX_SYSTEM_BOXES)}}
    assert plot_score_distributions(few, tmp_path / "few").exists()


_DEMO = Path(__file__).resolve().parents[1] / "src" / "vistkit" / "resources" / "demo"


@pytest.mark.parametrize("photo_args", [[], ["--photo-url", "https://example.org/{id}.jpg"]])
def test_studio_init_without_photos_says_annotators_see_numbered_boxes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], photo_args: list[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    stories = ["-s", f"human={_DEMO}/human_stories.json", "-s", f"llava={_DEMO}/llava_stories.json"]
    code = main(["studio", "init", str(tmp_path / "s.db"), "--task", "rank", *stories, "--max-items", "3",
                 *photo_args])
    err = capsys.readouterr().err
    assert code == 0, err
    assert ("numbered box where each photo would be" in err) == (not photo_args)


def test_quiet_transformers_gives_the_users_settings_back_when_threads_load_at_once() -> None:
    """Two threads loading models at once left transformers' log level at ERROR for the rest of the session (each
    saved the other's ERROR as "the user's level"), and one thread's end turned the bars on during the other's."""
    import threading

    pytest.importorskip("transformers")
    from transformers.utils import logging as hf_logging

    from vistkit.models.runtime import quiet_transformers

    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:  # enters first, leaves while the second still loads
        with quiet_transformers():
            first_in.set()
            second_in.wait(timeout=10)
        first_out.set()

    def second() -> None:  # enters second (it saw ERROR as "the user's level" before), leaves last
        first_in.wait(timeout=10)
        with quiet_transformers():
            second_in.set()
            first_out.wait(timeout=10)
            seen.append(hf_logging.is_progress_bar_enabled())  # still loading: no bars

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert seen == [False]
    assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()


def test_a_run_waiting_for_another_lm_conversion_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs started while another process converted the packaged LM waited ~25 s in silence on its lock."""
    import fcntl
    import os
    import threading

    from vistkit.models.lm import _locked, _open_lock

    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.setenv("VISTKIT_PROGRESS", "1")  # the library default is quiet; the command line's is not
    lock = tmp_path / ".lm.lock"
    holder = _open_lock(lock)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process converting
    got: list[bool] = []

    def wait() -> None:
        with _locked(_open_lock(lock), waiting="waiting for another vistkit process ..."):
            got.append(True)

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(timeout=1.0)
    assert waiter.is_alive() and not got  # still waiting on the lock
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    waiter.join(timeout=10)
    assert got == [True]
    assert "waiting for another vistkit process" in capsys.readouterr().err
    with _locked(_open_lock(lock), waiting="waiting for another vistkit process ..."):
        pass  # a free lock: nothing said
    assert capsys.readouterr().err == ""


def test_a_pair_with_an_empty_story_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`meta pairs` / `vrank` read a row whose sent1 or sent2 was empty (a cell lost in an export) without a word,
    and scored the pair as if someone had judged an empty story."""
    from vistkit.meta.human import read_pairs

    path = tmp_path / "p.csv"
    path.write_text(
        "sent1,sent2,label\nwe went out .,the dog ran .,1\nwe went out .,,1\n  ,the dog ran .,-1\n", encoding="utf-8"
    )
    capsys.readouterr()
    assert len(read_pairs(path, label_sign="comp-minus-base")) == 3
    err = capsys.readouterr().err
    assert "2 rows have an empty story in sent1 or sent2 (first: line 3)" in err, err
    path.write_text("sent1,sent2,label\nwe went out .,the dog ran .,1\n", encoding="utf-8")
    read_pairs(path, label_sign="comp-minus-base")
    assert "empty story" not in capsys.readouterr().err
