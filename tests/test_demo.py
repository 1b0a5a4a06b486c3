"""`vistkit demo` runs on the data the package ships, with no ../shared and no download."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vistkit.cli import main
from vistkit.commands.demo import DEMO_METRICS

#: stories of each side the demo test scores: the metrics, tables and distance of the whole demo on fewer stories
#: (the LM metrics cost ~1-2 s a story on a 2-core CPU; `make demo` runs all 50)
DEMO_TEST_STORIES = 6


@pytest.mark.slow
def test_demo_scores_every_offline_metric_and_the_distance(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vistkit.data import readers
    from vistkit.data.story import StorySet

    real_read = readers.read_stories
    kept: set[str] = set()

    def first_stories(path: Path, **kwargs: object) -> StorySet:
        """The shipped LLaVA file's first stories, and the human stories of the same ids."""
        stories = real_read(path, **kwargs)  # type: ignore[arg-type]
        if not kept:
            kept.update(s.story_id for s in list(stories)[:DEMO_TEST_STORIES])
        return StorySet([s for s in stories if s.story_id in kept], source=stories.source)

    monkeypatch.setattr(readers, "read_stories", first_stories)
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert f"vistkit demo: {DEMO_TEST_STORIES} LLaVA-NeXT stories" in out
    assert "skipped" not in err and "excluded" not in out + err  # every demo metric runs offline, on every story
    for name in DEMO_METRICS:
        assert f"{name}: {name}|" in out  # its signature line
    assert "dHM, human vs LLaVA" in out and "rovist-nr (human)" in out
    # vistkit's own ranker is shown with what is known of it: v2's agreement with people is not measured yet
    assert "how far its v2 agrees with people is not known yet" in out
    # mixed scales say so: each metric's declared range beside its score
    assert re.search(r"│ sacrebleu\s+│\s+[\d.]+ │ 0-100\s+│", out)
    assert re.search(r"│ bleu-4\s+│\s+[\d.e-]+ │ 0-1\s+│", out)  # 8.1e-07: no shared 4-gram, not 0.0000


def test_running_out_of_memory_is_one_sentence_and_the_demo_keeps_the_other_metrics(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a memory limit a model metric fails inside torch (oneDNN: "could not create a primitive"); the
    demo used to stop with "a bug in vistkit" and print none of the metrics it had scored."""
    import vistkit.commands.demo as demo
    from vistkit.errors import out_of_memory
    from vistkit.metrics.base import get_metric

    monkeypatch.setattr(demo, "DEMO_METRICS", ("rovist-nr", "story-ranker"))
    real = get_metric

    def failing(name: str, **kwargs: object) -> object:
        if name == "story-ranker":
            raise RuntimeError("could not create a primitive")
        return real(name, **kwargs)

    monkeypatch.setattr("vistkit.metrics.base.get_metric", failing)
    monkeypatch.setattr("vistkit.scores.dhm.compute_dhm", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert "rovist-nr: rovist-nr|" in out
    assert "skipped story-ranker: ran out of memory (could not create a primitive)" in err
    assert "skipped dHM distance: ran out of memory" in err and "bug" not in err
    # the same errors outside the demo: one sentence, not "a bug in vistkit"
    assert out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 9 GB")) is not None
    assert out_of_memory(RuntimeError("shape mismatch")) is None and out_of_memory(ValueError("x")) is None


def test_the_cli_says_out_of_memory_in_one_sentence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stories = tmp_path / "s.json"
    stories.write_text('{"a": "we went out . it rained ."}', encoding="utf-8")
    monkeypatch.delenv("VISTKIT_DEBUG", raising=False)

    def no_memory(*_a: object, **_k: object) -> None:
        raise MemoryError("Unable to allocate 320. MiB for an array with shape (42000001,)")

    monkeypatch.setattr("vistkit.metrics.rovist_nr.RovistNR.score_items", no_memory)
    assert main(["score", str(stories), "-m", "rovist-nr"]) == 1
    err = capsys.readouterr().err
    assert "error: ran out of memory (Unable to allocate 320. MiB" in err and "bug" not in err
