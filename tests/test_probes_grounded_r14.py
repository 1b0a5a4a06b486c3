"""Probe round 14 (second wave): the photo-grounded metrics (clipscore, clipscore-story, groovist, rovist-vg),
their photo maps and regions files, and `vistkit distance`, as a researcher runs them.

What was wrong:

- ``score -m clipscore,groovist --photos map.json``: each metric filled the photos in from the map on its own, so
  the map's warnings (stories the map misses, stories it contradicts) were printed once per metric; they did not
  name the stories' file either (``distance`` fills in the human and the model stories);
- a story the photo map lists with an empty list got no photos and was left out "give a photo map", without a
  word about the map that was given;
- a story without photo ids was excluded "give a photo map: photos=JSON", on the command line too, where the
  option is ``--photos`` (and ``distance`` cut the reason at its ": ", leaving "(give a photo map");
- a regions file keyed by other ids than the photos' (pandas' ``1741642.0``, file names ``1741642.jpg``) matched
  no photo, so GROOViST and RoViST-VG scored every photo as one region, the whole photo, without a word (only
  GROOViST's JSON details listed the photos, and those of earlier calls too), under a signature saying the
  regions file was used;
- ``distance --human h.csv --model m.csv`` took each file's first C column: ``dhm-c`` on one side and
  ``rovist-c`` on the other (hand-made tables without signature columns) mixed two metrics into dC silently;
- ``distance --human-stories ... --c-metric rovist-nr`` (or ``compute_dhm``) scored C and R with one metric and
  counted it twice in dHM, without a word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vistkit.data.images import attach_photos
from vistkit.data.story import Story, StorySet

pytest.importorskip("PIL.Image")


def _stories() -> StorySet:
    return StorySet(
        [
            Story("a", "a cat sat . the dog ran . a horse ."),
            Story("b", "we went . it was fun . a cup ."),
            Story("c", "x . y . z ."),
        ],
        source="stories.json",
    )


# ------------------------------------------------------------------------------------- photo map, said once
def test_photo_map_warning_once_for_the_same_stories(capsys: pytest.CaptureFixture[str]) -> None:
    stories = _stories()
    mapping = {"a": ("1", "2", "3"), "b": ("4", "5", "6")}
    first = attach_photos(stories, mapping)
    second = attach_photos(stories, mapping)  # a second metric of the same run
    err = capsys.readouterr().err
    assert err.count("no entry in the photo map") == 1, err
    assert [s.photo_ids for s in first] == [s.photo_ids for s in second]
    # other stories (the model side of `distance`) are warned about on their own
    attach_photos(StorySet(list(stories), source="model.json"), mapping)
    err = capsys.readouterr().err
    assert err.count("no entry in the photo map") == 1 and "model.json" in err, err


def test_photo_map_contradiction_warning_once(capsys: pytest.CaptureFixture[str]) -> None:
    stories = StorySet([Story("a", "a cat . a dog .", photo_ids=("1", "2"))], source="s.jsonl")
    mapping = {"a": ("2", "1")}
    attach_photos(stories, mapping)
    attach_photos(stories, mapping)
    err = capsys.readouterr().err
    assert err.count("differ from the photo map") == 1, err


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip")


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_photo_folder

    return make_photo_folder(tmp_path_factory.mktemp("ph"), [str(i) for i in range(1, 7)])


def test_cli_two_metrics_warn_about_the_map_once(
    tmp_path: Path, tiny_clip: Path, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("spacy")
    from vistkit.cli import main

    stories = tmp_path / "stories.json"
    stories.write_text(json.dumps({s.story_id: s.text for s in _stories()}))
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"a": ["1", "2", "3"], "b": ["4", "5", "6"]}))
    code = main(
        ["score", str(stories), "-m", "clipscore,groovist", "--images", str(photos), "--photos", str(mapping),
         "-O", f"clipscore.clip_model={tiny_clip}", "-O", f"groovist.clip_model={tiny_clip}", "-f", "json"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.count("no entry in the photo map") == 1, err
    excluded = json.loads(out)["excluded"]
    # on the command line the photo map is --photos
    assert "--photos" in excluded["clipscore"]["c"] and "--photos" in excluded["groovist"]["c"], excluded


# ------------------------------------------------------------------------ regions that match no photo
def _regions(path: Path, key: str) -> Path:
    rows = ["image_name,image_id,bbox,object,score"]
    for pid in range(1, 7):
        for k in range(3):
            rows.append(f'{pid}.jpg,{key.format(pid)},"[{2 + k}, {2 + k}, {20 + k}, {20 + k}]",cat,0.9')
    path.write_text("\n".join(rows) + "\n")
    return path


def _photo_stories() -> StorySet:
    return StorySet(
        [
            Story("a", "a cat sat . the dog ran . a horse .", photo_ids=("1", "2", "3")),
            Story("b", "a man . a cup . the beach .", photo_ids=("4", "5", "6")),
        ]
    )


@pytest.mark.parametrize("key", ["{}.0", "{}.jpg"])
def test_groovist_regions_of_other_ids_are_said(
    tmp_path: Path, tiny_clip: Path, photos: Path, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    regions = _regions(tmp_path / "entities.csv", key)
    score = Groovist(images=photos, regions=regions, clip_model=str(tiny_clip)).score(_photo_stories())
    err = capsys.readouterr().err
    assert "6 of the 6 photos" in err and "regions file" in err and key.format(1) in err, err
    assert score.extra["whole_photo_fallback"] == ["1", "2", "3", "4", "5", "6"]


def test_groovist_regions_matching_say_nothing(
    tmp_path: Path, tiny_clip: Path, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    regions = _regions(tmp_path / "entities.csv", "{}")
    score = Groovist(images=photos, regions=regions, clip_model=str(tiny_clip)).score(_photo_stories())
    assert "regions file" not in capsys.readouterr().err
    assert "whole_photo_fallback" not in score.extra


def test_groovist_fallback_lists_this_runs_photos_only(
    tmp_path: Path, tiny_clip: Path, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store outlives one score call: photos of an earlier call are not listed (nor counted) again."""
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    rows = ["image_id,bbox", '1,"[2, 2, 20, 20]"']
    regions = tmp_path / "entities.csv"
    regions.write_text("\n".join(rows) + "\n")
    scorer = Groovist(images=photos, regions=regions, clip_model=str(tiny_clip))
    stories = _photo_stories()
    scorer.score(stories[1:])  # photos 4, 5, 6 fall back
    capsys.readouterr()
    score = scorer.score(stories[:1])  # photo 1 has a box, 2 and 3 fall back
    err = capsys.readouterr().err
    assert score.extra["whole_photo_fallback"] == ["2", "3"]
    assert "2 of the 3 photos" in err, err


def test_rovist_vg_regions_of_other_ids_are_said(
    tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("spacy")
    from tiny_models import make_tiny_rovist_vg

    from vistkit.metrics.rovist_vg import RovistVG

    opts: dict[str, Any] = make_tiny_rovist_vg(tmp_path / "vg")
    regions = _regions(tmp_path / "entities.csv", "{}.0")
    stories = StorySet(
        [
            Story("a", "we went to the beach . the water was blue .", photo_ids=("1", "2")),
            Story("b", "the beach was nice . water everywhere .", photo_ids=("3", "4")),
        ]
    )
    score = RovistVG(images=photos, regions=regions, **opts).score(stories)
    err = capsys.readouterr().err
    assert "4 of the 4 photos" in err and "regions file" in err, err
    assert score.extra["whole_photo_fallback"] == ["1", "2", "3", "4"]


# ------------------------------------------------------------------ distance: two metrics under one dimension
def _per_item(path: Path, c_column: str, *, signature: str | None = None, shift: float = 0.0) -> Path:
    sig = f",{c_column} signature" if signature else ""
    rows = [f"id,groovist,{c_column},rovist-nr{sig}"]
    for i, (g, c, r) in enumerate([(0.5 + shift, 0.3, 0.9), (0.2, 0.4, 0.8), (0.1, 0.7, 0.6)]):
        rows.append(f"s{i},{g},{c},{r}" + (f",{signature}" if signature else ""))
    path.write_text("\n".join(rows) + "\n")
    return path


def _distance(capsys: pytest.CaptureFixture[str], human: Path, model: Path, *extra: str) -> tuple[int, str]:
    from vistkit.cli import main

    code = main(["distance", "--human", str(human), "--model", str(model), "-f", "json", *extra])
    return code, capsys.readouterr().err


def test_distance_warns_when_the_sides_c_columns_are_different_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human = _per_item(tmp_path / "h.csv", "dhm-c")
    model = _per_item(tmp_path / "m.csv", "rovist-c", shift=0.1)  # no dhm-c column: rovist-c was taken without a word
    code, err = _distance(capsys, human, model)
    assert code == 0, err
    assert err.count("warning:") == 1 and "'dhm-c'" in err and "'rovist-c'" in err and "dC" in err, err
    assert "--c-metric" in err


@pytest.mark.parametrize("c_column", ["dhm-c", "C"])
def test_distance_same_or_generic_columns_say_nothing(
    tmp_path: Path, c_column: str, capsys: pytest.CaptureFixture[str]
) -> None:
    human = _per_item(tmp_path / "h.csv", "dhm-c")
    # a hand-made table's C: its metric is not known (other scores than the human side's: a copy is warned about)
    model = _per_item(tmp_path / "m.csv", c_column, shift=0.1)
    code, err = _distance(capsys, human, model)
    assert code == 0 and "warning:" not in err, err


def test_distance_different_signatures_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    human = _per_item(tmp_path / "h.csv", "dhm-c", signature="dhm-c|a")
    model = _per_item(tmp_path / "m.csv", "rovist-c", signature="rovist-c|b", shift=0.1)
    code, err = _distance(capsys, human, model)
    assert code == 0 and err.count("warning:") == 1 and "signatures" in err, err


# ------------------------------------------------------------------------------ a photo map's empty entry
def test_photo_map_empty_photo_list_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """``{"a": []}`` gave story a no photos, and it was left out "give a photo map" without a word about the map,
    though one was given and listed it."""
    stories = _stories()
    out = attach_photos(stories, {"a": (), "b": ("4", "5", "6"), "c": ("7", "8", "9")})
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "1 story without photo ids in stories.json has an empty list" in err, err
    assert "'a'" in err and "no entry" not in err, err
    assert [s.photo_ids for s in out] == [(), ("4", "5", "6"), ("7", "8", "9")]
    attach_photos(stories, {"zz": ()})  # not in the stories: nothing about it
    err = capsys.readouterr().err
    assert "empty list" not in err and "3 of the 3 stories" in err, err


def test_distance_from_stories_one_metric_for_two_dimensions_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--c-metric rovist-nr`` beside R's default rovist-nr scored the stories twice with one metric and averaged
    its distance twice into dHM, without a word."""
    from vistkit.cli import main

    human = tmp_path / "h.json"
    human.write_text(json.dumps({"1": "a cat sat . a dog ran .", "2": "we went . it was fun ."}))
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"1": "a cat sat . a cat sat .", "2": "we went . it was fun ."}))
    args = ["distance", "--human-stories", str(human), "--model-stories", str(model), "--dimensions", "C,R"]
    code = main([*args, "--c-metric", "rovist-nr"])
    err = capsys.readouterr().err
    assert code == 0 and err.count("warning:") == 1 and "rovist-nr scores both C and R" in err, err
    assert "--c-metric" in err


def test_compute_dhm_one_metric_for_two_dimensions_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.scores.dhm import compute_dhm

    stories = StorySet([Story("1", "a cat sat . a dog ran ."), Story("2", "we went . it was fun .")])
    compute_dhm(stories, stories, c_metric="rovist-nr", dimensions="C,R")
    assert "rovist-nr scores both C and R" in capsys.readouterr().err
    compute_dhm(stories, stories, c_metric="coherence", dimensions="C,R")
    assert "scores both" not in capsys.readouterr().err
