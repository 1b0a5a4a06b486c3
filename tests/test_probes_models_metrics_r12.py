"""Probe round 12: the model-based reference-free metrics whose weights vistkit does not ship (clipscore,
groovist, rovist-vg, rovist-c / dhm-c, vrank) and the shipped offline ``coherence``, with tiny random models.

Probed: photos missing, 1x1, CMYK, WebP, animated GIF; duplicate photo ids in one sequence; stories with more
and fewer sentences than photos, empty text, empty source sentences; photo maps given as JSON (a list, a string
value, null, nested lists, ids that differ by spaces, a missing file) and as a Python object; a CLIP folder
with a truncated ``model.safetensors``, with a config.json of other shapes, with a config.json that is no
JSON; devices ``cuda``, ``cuda:1``, ``mps``, ``gpu``, ``cpu:0`` on a CPU-only machine; ``batch_size`` and
``max_regions`` at and beyond their bounds. What was wrong:

- a photo map given in Python (``photos={...}``) was not checked as the JSON file is: a string value
  ``{"s1": "12"}`` became the photos ``1`` and ``2`` (a silently wrong score), ``None`` became the photo
  ``"None"``, and a list instead of a mapping raised ``TypeError``; now the same one-sentence errors as the file;
- a converted SOP folder (rovist-c / dhm-c) whose ALBERT config has other shapes than its weights was said to
  have "no config.json"; now "the SOP weights have other shapes than its ALBERT config declares (...)"; an ALBERT
  config declaring 10^9 positions tried to allocate 64 GB (positions were not counted in the size check unless the
  config named ``position_embedding_type``); now refused before anything is built;
- a coherence model folder whose config.json does not fit its head.safetensors (``hidden`` 10^9 tried to
  allocate 13 TB; ``hidden`` 0, another ``dim``: ``RuntimeError``; no ``dim``: ``KeyError``; ``dim`` "x":
  ``ValueError``; features "v9" was built as v2) is now one sentence, checked before the encoder loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError


# --------------------------------------------------------------------------------------------- photo maps
@pytest.mark.parametrize(
    ("photos", "said"),
    [
        ({"a": "12"}, "story 'a'"),
        ({"a": [None, "1"]}, "photo id 1 is null"),
        ({"a": ["1", ["2"]]}, "photo id 2 is a list"),
        ([["1", "2"]], "JSON object story_id -> [photo ids]"),
        ({"a": ["1"], " a": ["2"]}, "one id"),
        ({"a": ["1-2"]}, "contains '-'"),
        ({("a",): ["1"]}, "a story id"),
    ],
)
def test_a_photo_map_given_in_python_is_checked_as_the_file_is(photos: object, said: str) -> None:
    from vistkit.metrics._grounding import with_photo_map

    with pytest.raises(InputError) as err:
        with_photo_map(StorySet([Story("a", "A cat. A dog.")]), photos)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_photo_map_in_python_with_tuples_and_numbers_is_used() -> None:
    from vistkit.metrics._grounding import with_photo_map

    out = with_photo_map(StorySet([Story("a", "A cat. A dog."), Story("7", "x.")]), {"a": ("1", 2), 7: ["3"]})
    assert [s.photo_ids for s in out] == [("1", "2"), ("3",)]


def test_a_photo_map_file_path_still_reads(tmp_path: Path) -> None:
    from vistkit.metrics._grounding import with_photo_map

    p = tmp_path / "map.json"
    p.write_text('{"a": ["1", 2]}')
    for given in (p, str(p)):
        assert with_photo_map(StorySet([Story("a", "A cat. A dog.")]), given)[0].photo_ids == ("1", "2")


# ------------------------------------------------------------------------------------------- SOP configs
@pytest.fixture(scope="module")
def tiny_sop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_sop_folder

    return make_tiny_sop_folder(tmp_path_factory.mktemp("sop"))


def _sop_with(tiny_sop: Path, tmp_path: Path, **changes: object) -> Path:
    import json
    import shutil

    folder = tmp_path / "sop"
    shutil.copytree(tiny_sop, folder)
    manifest = json.loads((folder / "vistkit_model.json").read_text())
    manifest["config"].update(changes)
    (folder / "vistkit_model.json").write_text(json.dumps(manifest))
    return folder


def test_a_sop_config_of_other_shapes_says_so_not_that_config_json_is_missing(tiny_sop: Path, tmp_path: Path) -> None:
    from vistkit.models.sop import load_sop_model

    folder = _sop_with(tiny_sop, tmp_path, hidden_size=64)
    with pytest.raises(InputError) as err:
        load_sop_model(folder)
    said = str(err.value)
    assert "other shapes" in said and "config.json" not in said and "\n" not in said


def test_a_sop_config_with_a_billion_positions_is_refused_before_allocating(
    tiny_sop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vistkit.models.sop as sop

    folder = _sop_with(tiny_sop, tmp_path, max_position_embeddings=10**9)

    def no_build(*a: object, **k: object) -> None:
        raise AssertionError("the module was built")

    monkeypatch.setattr(sop, "build_sop_module", no_build)
    with pytest.raises(InputError) as err:
        sop.load_sop_model(folder)
    assert "declares a model of at least" in str(err.value)


# ------------------------------------------------------------------------------------- coherence folders
@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"hidden": 10**9}, "other shapes"),  # built first, it tried to allocate 13 TB
        ({"hidden": 0}, "'hidden' must be"),
        ({"dim": None}, "'dim'"),
        ({"dim": "x"}, "'dim'"),
        ({"features": "v9"}, "features"),
    ],
)
def test_a_coherence_config_that_does_not_fit_its_head_is_one_sentence(
    tmp_path: Path, changes: dict[str, object], said: str
) -> None:
    import json
    import shutil

    from vistkit.models.coherence_head import CoherenceModel, default_model_dir

    folder = tmp_path / "coherence"
    shutil.copytree(default_model_dir(), folder)
    cfg = json.loads((folder / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as err:
        CoherenceModel(folder)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_config_that_leaves_out_its_position_type_still_counts_its_positions() -> None:
    """A BERT-family config that leaves `position_embedding_type` out has learned (absolute) positions, but the
    size check counted none: `max_position_embeddings` of 10^9 went through to an allocation of tens of GB."""
    from vistkit.models.checkpoints import declared_values_floor

    base = {"hidden_size": 8, "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 10}
    for model_type in ("albert", "bert", "roberta", "vit"):
        cfg = {**base, "model_type": model_type, "max_position_embeddings": 10**9}
        assert declared_values_floor(cfg) >= 8 * 10**9, model_type
    rotary = {**base, "model_type": "llama", "max_position_embeddings": 10**9}
    assert declared_values_floor(rotary) < 10**6  # rotary positions hold no weights
