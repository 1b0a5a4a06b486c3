"""Fifth CLI probe round: what the fourth round left to be said late is said before any slow work.

The photo metrics' ``--images``/``--regions``/``--photos`` (and ``-O METRIC.images=...``), the keys of ``meta
pairs`` against ``-r``, a CUDA/MPS device this machine lacks, coherence's ``precision``, and the mistakes of
``studio init|report|demo`` and ``models convert``: each is one ``error:`` sentence before a metric is built, a
checkpoint read or a folder written. Building a slow metric or opening an engine fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_probe_helpers import META, forbid_building, one_error, write_stories

from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.metrics.base import get_metric_class

SLOW = ("clipscore", "clipscore-story", "groovist", "rovist-vg", "bertscore", "coherence", "dhm-c", "lm-fluency",
        "story-ranker")  # fmt: skip


@pytest.fixture
def forbid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a slow metric or opening an engine fails the test."""
    forbid_building(monkeypatch, SLOW)


@pytest.fixture
def hyps(tmp_path: Path) -> Path:
    return write_stories(tmp_path / "hyps.jsonl")


# ---------------------------------------------------------------------------------------------- grounding paths
def test_photo_paths_are_checked_before_the_metric_is_built(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    text = tmp_path / "file.txt"
    text.write_text("x")
    err = one_error(capsys, "score", hyps, "-m", "clipscore", "--images", tmp_path / "nowhere")
    assert "nowhere: no such photo folder (give --images DIR" in err
    err = one_error(capsys, "score", hyps, "-m", "clipscore-story", "--images", text)
    assert "is a file, not a photo folder" in err
    err = one_error(capsys, "score", hyps, "-m", "groovist", "--images", photos, "--regions", tmp_path / "r.csv")
    assert "r.csv: no such regions file" in err
    cols = tmp_path / "cols.csv"
    cols.write_text("photo,box\n1,[0, 0, 1, 1]\n")
    err = one_error(capsys, "score", hyps, "-m", "groovist", "--images", photos, "--regions", cols)
    assert "the regions CSV needs the columns image_id and bbox (it has photo, box)" in err
    bad = tmp_path / "map.json"
    bad.write_text("{not json")
    err = one_error(capsys, "score", hyps, "-m", "clipscore-story", "--images", photos, "--photos", bad)
    assert "map.json: invalid JSON" in err
    err = one_error(capsys, "score", hyps, "-m", "rovist-vg", "--images", photos, "--photos", tmp_path / "m.json")
    assert "m.json: no such photo map" in err
    err = one_error(capsys, "score", hyps, "-m", "groovist", "-O", f"groovist.images={tmp_path / 'none'}")
    assert "no such photo folder" in err


def test_photo_paths_of_distance_and_meta_before_any_model(
    forbid: None, hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error(capsys, "distance", "--human-stories", hyps, "--model-stories", hyps, "--images", tmp_path / "no")
    assert "no such photo folder" in err
    err = one_error(capsys, "meta", "pairs", META / "vhed_small.csv", "-m", "groovist", "-O",
                 f"groovist.images={tmp_path / 'no'}")  # fmt: skip
    assert "no such photo folder" in err


def test_good_photo_paths_pass_the_precheck(tmp_path: Path) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    regions = tmp_path / "regions.csv"
    regions.write_text('image_id,bbox\n1,"[0, 0, 4, 4]"\n2,whole_img\n')
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"s0": ["1", "2"]}))
    get_metric_class("groovist").precheck({"images": photos, "regions": regions, "photos": mapping})
    get_metric_class("clipscore").precheck({"images": str(photos), "photos": {"s0": ["1"]}})  # a dict is the caller's


# ---------------------------------------------------------------------------------------------- meta pairs keys
def test_meta_pairs_keys_before_the_model(forbid: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = META / "vhed_small.csv"
    hyps = write_stories(tmp_path / "other.jsonl", prefix="x")  # no story id or photo sequence of the pairs
    err = one_error(capsys, "meta", "pairs", pairs, "-m", "bertscore", "-r", hyps)
    assert "bertscore: no pair could be scored, as no reference story has the sequence key of any pair" in err
    err = one_error(capsys, "meta", "pairs", pairs, "-m", "bertscore", "-r", hyps, "--key", "story")
    assert "has the story key of any pair" in err
    assert "bertscore is reference-based: pass --references" in one_error(capsys, "meta", "pairs", pairs, "-m",
                                                                       "bertscore")  # fmt: skip


def test_pair_keys_shared_with_the_references_pass() -> None:
    from vistkit.commands.common import read_references
    from vistkit.commands.meta.common import _check_pair_keys
    from vistkit.meta.human import read_pairs

    pairs = read_pairs(META / "ref_pairs_small.csv")
    refs = read_references(META / "references_small.jsonl", None, system="human")
    _check_pair_keys([get_metric_class("bertscore"), get_metric_class("story-ranker")], pairs, refs, None)


# ---------------------------------------------------------------------------------------------- device
def test_a_device_this_machine_lacks_before_the_model(
    forbid: None, hyps: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuda/mps are checked with torch (`choose_device`) before the model loads; cpu and auto import nothing,
    and a metric built on a Ray cluster (whose workers may have the GPU) is not checked here."""
    import vistkit.models.runtime as runtime
    from vistkit.commands.score import plan_metrics

    asked: list[str] = []

    def choose(device: str | None = None) -> None:
        asked.append(str(device))
        raise InputError(f"device {device!r} was asked for but CUDA is not available here; use device='cpu'")

    monkeypatch.setattr(runtime, "choose_device", choose)
    err = one_error(capsys, "score", hyps, "-m", "lm-fluency", "-O", "lm-fluency.device=cuda:1")
    assert "device 'cuda:1' was asked for but CUDA is not available" in err and asked == ["cuda:1"]
    for device in ("cpu", "auto", "CPU"):
        plan_metrics(["bertscore"], {}, {"bertscore": {"device": device}})
    plan_metrics(["bertscore"], {}, {"bertscore": {"device": "mps"}}, local=False)
    assert asked == ["cuda:1"]
    import vistkit.models.vrank as vrank

    def loaded(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Vrank model was loaded before the mistake was reported")

    monkeypatch.setattr(vrank, "load_vrank", loaded)
    err = one_error(capsys, "vrank", "predict", META / "vhed_small.csv", "--model", hyps.parent, "--device", "mps")
    assert "device 'mps' was asked for" in err and asked == ["cuda:1", "mps"]


# ---------------------------------------------------------------------------------------------- precision
def test_coherence_precision_before_the_model(forbid: None, hyps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error(capsys, "score", hyps, "-m", "coherence", "-O", "coherence.precision=fp8")
    assert "coherence: precision must be one of fp32, tf32x3, bf16" in err
    with pytest.raises(InputError, match="coherence: precision must be one of fp32, tf32x3, bf16 "):
        get_metric_class("coherence").precheck({"precision": "tf32"})  # the offline head does not offer tf32
    get_metric_class("dhm-c").precheck({"precision": "tf32"})  # the SOP model does
    with pytest.raises(InputError, match="dhm-c: precision must be one of fp32, tf32x3, tf32, bf16"):
        get_metric_class("dhm-c").precheck({"precision": "fp16"})


# ---------------------------------------------------------------------------------------------- studio
def test_studio_report_checks_metrics_and_references_before_the_study(
    forbid: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    import vistkit.studio.analysis as analysis

    def export(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the study was exported before the mistake was reported")

    monkeypatch.setattr(analysis, "export", export)
    study = tmp_path / "study.db"
    assert "unknown metric 'nope'" in one_error(capsys, "studio", "report", study, "-m", "nope")
    err = one_error(capsys, "studio", "report", study, "-m", "bertscore", "-O", "bertscore.batch_size=0")
    assert "batch_size must be from 1" in err
    assert "no such file" in one_error(capsys, "studio", "report", study, "-m", "bleu-4", "-r", tmp_path / "r.json")
    assert "is not a keying" in one_error(capsys, "studio", "report", study, "-m", "bleu-4", "--key", "nope")


def test_studio_init_and_demo_refuse_before_writing(
    hyps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    err = one_error(capsys, "studio", "init", tmp_path / "s.db", "--task", "rank", "-s", f"a={hyps}", "-s",
                 f"b={tmp_path / 'missing.jsonl'}", "--key", "nope")  # fmt: skip
    assert "--key must be story, sequence or album, not 'nope'" in err
    err = one_error(capsys, "studio", "init", tmp_path / "s.db", "--task", "rnk", "-s", f"a={tmp_path / 'x.json'}")
    assert "--task must be one of rank, pairwise, likert, not 'rnk'" in err
    assert not (tmp_path / "s.db").exists()
    err = one_error(capsys, "studio", "demo", "--dir", tmp_path / "demo", "--task", "bogus", "--no-serve")
    assert "--task must be one of rank, pairwise, likert" in err
    assert not (tmp_path / "demo").exists()  # the folder and its photos were written before the task was checked


# ---------------------------------------------------------------------------------------------- models convert
def test_models_convert_checks_before_reading_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import vistkit.models.checkpoints as checkpoints
    import vistkit.models.sop as sop

    def read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the checkpoint was read before the mistake was reported")

    monkeypatch.setattr(sop, "convert_sop_checkpoint", read)
    monkeypatch.setattr(checkpoints, "load_legacy_checkpoint", read)
    ckpt = tmp_path / "ck.pth.tar"
    ckpt.write_bytes(b"\x80\x02}q\x00.")
    out = tmp_path / "out"
    base = ["models", "convert", ckpt, out, "--trust-checkpoint"]
    err = one_error(capsys, *base, "--kind", "bogus", "--config", tmp_path / "missing.json")
    assert "unknown --kind 'bogus'" in err
    assert "--tokenizer: model" in one_error(capsys, *base, "--tokenizer", tmp_path / "no" / "tok")
    empty = tmp_path / "tok"
    empty.mkdir()
    assert "holds no tokenizer (tokenizer.json" in one_error(capsys, *base, "--tokenizer", empty)
    assert "is a file; give the folder" in one_error(capsys, *base, "--tokenizer", ckpt)
    assert not out.exists()
    (empty / "tokenizer_config.json").write_text("{}")
    with pytest.raises(AssertionError, match="the checkpoint was read"):  # every check passed: it is read now
        main([str(a) for a in [*base, "--kind", "state-dict", "--tokenizer", empty]])
    assert "--tokenizer is ignored: it applies to --kind rovist-sop" in capsys.readouterr().err


def test_meta_all_skips_a_metric_no_reference_can_serve_before_building_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``--metrics all`` a reference-based metric whose references share no key with the pairs was built
    (its model loaded) and only then skipped; it is now skipped, with the same reason, unbuilt."""
    from vistkit.commands.common import read_references
    from vistkit.commands.meta import common
    from vistkit.meta.human import read_pairs

    built: list[str] = []
    monkeypatch.setattr(
        "vistkit.commands.score.build_metrics", lambda names, *a, **k: built.extend(names) or list(names)
    )
    pairs = read_pairs(META / "vhed_small.csv")
    refs = read_references(write_stories(tmp_path / "other.jsonl", prefix="x"), None, system="human")
    common._metrics("all", [], pairs=pairs, refs=refs, key=None)
    assert "bleu-4" in common.SKIPPED and "bleu-4" not in built
    assert "no reference story has the sequence key of any pair" in common.SKIPPED["bertscore"]
    assert "bertscore" not in built and "rovist-nr" in built  # a reference-free metric is still built


def test_a_layer_check_reads_an_odd_config_without_failing(tmp_path: Path) -> None:
    """The early layer check reads the model's config.json: one that is a list, or names no layer count, leaves
    the check to the constructor (before, a list raised AttributeError, shown as a bug)."""
    from vistkit.metrics._options import _hidden_layers

    for config in ("[1, 2]", '{"num_hidden_layers": true}', '{"num_hidden_layers": 4, "is_encoder_decoder": true}'):
        (tmp_path / "config.json").write_text(config, encoding="utf-8")
        assert _hidden_layers(str(tmp_path)) is None
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 6}', encoding="utf-8")
    assert _hidden_layers(str(tmp_path)) == 6
