"""dHM end to end from stories: golden comparison with the official dHM R scores (../shared), the excluded
stories and their reasons (the 156 unpunctuated VIST human stories), storylets as sentence boundaries, the
distance arithmetic, G through a tiny random CLIP, and one-sentence errors for missing models."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_file

from vistkit.data.readers import read_stories
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.scores.dhm import compute_dhm, distance_from_tables

DHM = ("dhm-visual-storytelling", "data")


def _official_r(name: str) -> dict[str, float]:
    with open(shared_file(*DHM, "scores", "vist", f"{name}_R.csv"), encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    return {r[0].strip(): float(r[1]) for r in rows}


def _story_sets(limit: int | None = None) -> tuple[StorySet, StorySet]:
    h = read_stories(shared_file(*DHM, "stories", "vist", "gt_test.json"), system="human")
    m = read_stories(shared_file(*DHM, "stories", "vist", "llava_vc_p3.json"), system="llava")
    if limit is not None:
        keep = sorted({s.story_id for s in h}, key=int)[:limit]
        h, m = h.filter(keep, "story"), m.filter(keep, "story")
    return h, m


def test_distance_arithmetic_hand_computed():
    human = {"G": {"1": 0.5, "2": 2.0}, "C": {"1": 0.9, "2": 0.8}, "R": {"1": 0.95, "2": math.nan}}
    model = {"G": {"1": 0.1, "2": 1.0}, "C": {"1": 0.7, "2": 0.8}, "R": {"1": 0.85, "2": 0.9}}
    d = distance_from_tables(human, model)
    dg = abs(math.tanh(0.5) - math.tanh(0.1))  # story 2 has no human R: left out
    assert d.n == 1
    assert d.d["G"] == pytest.approx(dg) and d.d["C"] == pytest.approx(0.2) and d.d["R"] == pytest.approx(0.1)
    assert d.dHM == pytest.approx((dg + 0.2 + 0.1) / 3)
    sub = distance_from_tables(human, model, dimensions=("C",))
    assert sub.n == 2 and sub.d["C"] == pytest.approx(0.1) and sub.dHM == pytest.approx(0.1)
    assert set(sub.as_dict()) == {"dC", "dHM", "n"}


def test_distance_matches_score_file_distance_when_complete():
    """With all three dimensions the end-to-end distance is the official dHM.py one (vistkit.scores.distance)."""
    from vistkit.scores.distance import dhm_distance

    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(40)]
    h = {d: dict(zip(ids, rng.normal(size=40).tolist(), strict=True)) for d in "GCR"}
    m = {d: dict(zip(ids, rng.normal(size=40).tolist(), strict=True)) for d in "GCR"}
    ours = distance_from_tables(h, m)
    ref = dhm_distance(h, m)
    assert (ours.d["G"], ours.d["C"], ours.d["R"], ours.dHM, ours.n) == pytest.approx(
        (ref.dG, ref.dC, ref.dR, ref.dHM, ref.n)
    )


def test_r_end_to_end_reproduces_official_dR_on_500_stories():
    h, m = _story_sets(limit=500)
    result = compute_dhm(h, m, dimensions="R")
    off_h, off_m = _official_r("gt_test"), _official_r("llava_vc_p3")
    ids = [s.story_id for s in h]
    common = [s for s in ids if s in off_h and s in off_m]
    official_dr = float(np.mean([abs(off_h[s] - off_m[s]) for s in common]))
    assert result.distance.n == len(common)
    assert result.distance.d["R"] == pytest.approx(official_dr, abs=1e-12)
    # every story the official CSVs lack is reported, with its reason
    assert set(result.excluded) == {s for s in ids if s not in common}
    assert all("R (rovist-nr): fewer than two sentences" in r for r in result.excluded.values())
    for side, off in (("human", off_h), ("model", off_m)):
        for sid in common[:50]:
            assert result.tables[side]["R"][sid] == pytest.approx(off[sid], abs=1e-9)
    assert any("sentences: Punkt split" in n for n in result.notes)


@pytest.mark.slow
def test_the_156_unpunctuated_human_stories_are_named():
    h, m = _story_sets()
    result = compute_dhm(h, m, dimensions="R")
    human_out = [s for s, r in result.excluded.items() if r.startswith("human R")]
    model_out = [s for s, r in result.excluded.items() if "model R" in r]
    assert len(human_out) == 156 and len(model_out) == 2  # 5055 - 4899 and 5055 - 5053 official rows
    assert set(human_out) == {s.story_id for s in h} - set(_official_r("gt_test"))
    assert result.distance.n == 5055 - 158


def test_storylets_as_sentence_boundaries():
    # an unpunctuated human story: Punkt sees one sentence (R undefined); its storylets give five
    parts = (
        "we went to the park",
        "the dog ran far",
        "we ate some food",
        "it started to rain",
        "we went home",
    )
    human = StorySet(
        [
            Story("1", " ".join(parts), sentences=parts),
            Story(
                "2",
                "a cat sat . a dog ran . the end .",
                sentences=("a cat sat .", "a dog ran .", "the end ."),
            ),
        ]
    )
    model = StorySet(
        [
            Story("1", "we went to a park . a dog ran . we ate . it rained . home ."),
            Story("2", "a cat sat . a cat sat . a cat sat ."),
            Story("3", "no human story for this one ."),
        ]
    )
    split = compute_dhm(human, model, dimensions="R")
    assert "human R (rovist-nr): fewer than two sentences" in split.excluded["1"]
    assert split.excluded["3"] == "no human story with this id"
    assert split.distance.n == 1
    source = compute_dhm(human, model, dimensions="R", sentences="source")
    assert "1" not in source.excluded and source.distance.n == 2
    assert any("the source's for 2 of 4 stories" in n for n in source.notes)
    assert any("sent:source" in n for n in source.notes)


def test_offline_coherence_and_r_on_real_stories():
    pytest.importorskip("torch")
    from vistkit.errors import UnknownMetricError

    h, m = _story_sets(limit=25)
    try:
        result = compute_dhm(h, m, c_metric="coherence", dimensions="C,R")
    except (MissingDependencyError, UnknownMetricError, InputError) as exc:
        pytest.skip(f"offline coherence model not available (yet): {exc}")
    assert set(result.tables["human"]) == {"C", "R"}
    d = result.distance
    manual_c = np.mean(
        [abs(result.tables["human"]["C"][s] - result.tables["model"]["C"][s]) for s in d.per_story]
    )
    assert d.d["C"] == pytest.approx(manual_c)
    assert d.dHM == pytest.approx((d.d["C"] + d.d["R"]) / 2)
    assert 0 <= d.d["C"] <= 1 and 0 <= d.dHM <= 1


def test_missing_coherence_checkpoint_is_one_sentence():
    h, m = _story_sets(limit=3)
    with pytest.raises(MissingDependencyError) as err:
        compute_dhm(h, m, dimensions="C,R")  # dhm-c needs the RoViST ALBERT checkpoint
    msg = str(err.value)
    assert msg.startswith("dHM's coherence dimension C cannot run:") and "--dimensions R" in msg
    with pytest.raises(MissingDependencyError) as err:
        compute_dhm(h, m, dimensions="C")  # nothing else to keep: another C metric, not "--dimensions C,R"
    msg = str(err.value)
    assert msg.endswith("(or choose other dimensions with --dimensions G,R)")  # no C left in the suggestion
    assert "coherence" in msg and "--dimensions C" not in msg


def test_missing_clip_is_one_sentence(tmp_path: Path):
    h = StorySet([Story("1", "a cat . a dog .", photo_ids=("1",))])
    with pytest.raises(MissingDependencyError) as err:
        compute_dhm(
            h, h, dimensions="G,R", images=tmp_path, options={"G": {"clip_model": "openai/not-cached"}}
        )
    assert "dHM's grounding dimension G cannot run: groovist needs CLIP ViT-B/32 weights" in str(err.value)
    assert "--dimensions R" in str(err.value)


def test_bad_dimensions():
    h = StorySet([Story("1", "a . b .")])
    with pytest.raises(InputError, match="subset of G,C,R"):
        compute_dhm(h, h, dimensions="X")


@pytest.mark.slow
def test_g_end_to_end_with_tiny_clip(tmp_path: Path):
    pytest.importorskip("transformers")
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image
    from tiny_models import make_tiny_clip

    from vistkit.metrics.groovist import Groovist

    clip = make_tiny_clip(tmp_path / "clip", seed=2)
    photos = tmp_path / "photos"
    photos.mkdir()
    for pid, name in {"11": "chelsea", "12": "coffee", "13": "horse"}.items():
        Image.fromarray(getattr(skdata, name)()).convert("RGB").save(photos / f"{pid}.jpg")
    photo_map = {"a": ["11", "12", "13"], "b": ["13", "12", "11"]}
    human = StorySet(
        [
            Story("a", "the cat sat . the coffee was hot . a horse ran ."),
            Story("b", "a horse . a cup . a cat ."),
        ]
    )
    model = StorySet(
        [Story("a", "a cat . some coffee . the horse ."), Story("b", "it was fun . we liked it .")]
    )
    result = compute_dhm(
        human,
        model,
        dimensions="G,R",
        images=photos,
        photos=photo_map,
        options={"G": {"clip_model": str(clip)}},
    )
    direct = Groovist(images=photos, photos=photo_map, clip_model=str(clip)).score(human)
    assert result.tables["human"]["G"]["a"] == pytest.approx(float(direct.item_scores[0]), abs=1e-6)
    assert result.tables["model"]["G"]["b"] == 0.0  # only pronouns: official 0.0
    for sid in ("a", "b"):
        dg = abs(math.tanh(result.tables["human"]["G"][sid]) - math.tanh(result.tables["model"]["G"][sid]))
        assert result.distance.per_story[sid]["G"] == pytest.approx(dg)
    assert result.distance.n == 2


def test_story_file_helpers_render_and_per_story(tmp_path: Path):
    import json

    from vistkit.scores.dhm import dhm_from_story_files, exclusion_summary, render_dhm, write_dhm_per_story

    human = tmp_path / "h.json"
    model = tmp_path / "m.json"
    human.write_text(json.dumps({"1": "a cat sat . a dog ran .", "2": "no punctuation here", "3": "x . y ."}))
    model.write_text(json.dumps({"1": "a cat sat . a cat sat .", "2": "a b . c d .", "4": "q . r ."}))
    result = dhm_from_story_files(human, model, dimensions="R")
    assert result.distance.n == 1
    assert set(result.excluded) == {"2", "3", "4"}
    assert sorted(exclusion_summary(result.excluded)) == [
        "1 story: human R (rovist-nr): fewer than two sentences",
        "1 story: no human story with this id",
        "1 story: no model story with this id",
    ]
    data = json.loads(render_dhm(result, "json"))
    assert data["n"] == 1 and data["dimensions"] == ["R"] and set(data["excluded"]) == {"2", "3", "4"}
    assert data["dR"] == pytest.approx(data["dHM"])
    # the signature at the top level, as `score -f json` has it (it was only inside the notes)
    assert data["metrics"] == {"R": "rovist-nr"}
    assert data["signatures"] == {"rovist-nr": result.signatures["R"]["signature"]}
    assert data["signatures"]["rovist-nr"].startswith("rovist-nr")
    assert any(data["signatures"]["rovist-nr"] in line for line in data["notes"])
    table = list(csv.DictReader(io.StringIO(render_dhm(result, "csv"))))
    assert table[0]["signature R"] == data["signatures"]["rovist-nr"] and float(table[0]["dR"]) == data["dR"]
    text = render_dhm(result, "text")
    assert "3 stories left out:" in text and "no human story with this id" in text
    out = tmp_path / "per_story.csv"
    write_dhm_per_story(result, out)
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["story_id", "dR", "dHM", "excluded"]
    assert rows[1][0] == "1" and float(rows[1][1]) == pytest.approx(result.distance.per_story["1"]["R"])
    assert {r[0] for r in rows[2:]} == {"2", "3", "4"} and all(r[3] for r in rows[2:])


@pytest.mark.slow
def test_vist_storylets_recover_the_unpunctuated_human_stories():
    """PR-VIST's copy of the VIST test SIS gives the five storylets of 154 of the 156 one-sentence stories."""
    from vistkit.text.sentences import sent_tokenize

    storylets = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"), system="human")
    _, model = _story_sets()
    unpunctuated = {s.story_id for s in storylets if len(sent_tokenize(s.text)) < 2}
    assert len(unpunctuated) == 154
    split = compute_dhm(storylets, model, dimensions="R")
    source = compute_dhm(storylets, model, dimensions="R", sentences="source")
    assert unpunctuated <= {s for s, r in split.excluded.items() if r.startswith("human R")}
    assert not unpunctuated & {s for s, r in source.excluded.items() if r.startswith("human R")}
    assert source.distance.n == split.distance.n + 154 - len(
        unpunctuated & {s for s, r in split.excluded.items() if "model R" in r}
    )
    assert any("the source's for 5005 of 10010 stories" in n for n in source.notes)


def test_distance_from_story_files_cli_face(tmp_path: Path):
    import json

    from vistkit.scores.dhm import distance_from_story_files

    human = tmp_path / "h.json"
    model = tmp_path / "m.json"
    human.write_text(json.dumps({"1": "a cat sat . a dog ran .", "2": "x . y ."}))
    model.write_text(json.dumps({"1": "a cat sat . a cat sat .", "2": "x . x ."}))
    per = tmp_path / "per.csv"
    out = distance_from_story_files(human, model, dimensions="R", fmt="json", per_item=per)
    data = json.loads(out)
    assert data["n"] == 2 and data["excluded"] == {}
    assert per.read_text().startswith("story_id,dR,dHM,excluded")
    with pytest.raises(InputError, match="not both"):
        distance_from_story_files(human, model, human_scores=human, dimensions="R")
    with pytest.raises(InputError, match="--model-stories"):
        distance_from_story_files(human, None, dimensions="R")


def test_distance_command_from_stories(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    import json

    from vistkit.cli import main

    human = tmp_path / "h.json"
    model = tmp_path / "m.json"
    human.write_text(json.dumps({"1": "a cat sat . a dog ran .", "2": "no punctuation here", "3": "x . y ."}))
    model.write_text(json.dumps({"1": "a cat sat . a cat sat .", "2": "a b . c d .", "3": "x . x ."}))
    args = ["distance", "--human-stories", str(human), "--model-stories", str(model), "--dimensions", "R"]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n"] == 2 and list(data["excluded"]) == ["2"]
    assert "fewer than two sentences" in data["excluded"]["2"]
    assert main([*args, "--format", "csv"]) == 0  # a CSV has no caption: what was left out is said on stderr
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "dR,dHM,n,signature R"
    assert "1 story left out" in err and "fewer than two sentences" in err
    # the default dimensions need the dhm-c checkpoint: one sentence, exit 1
    assert main(args[:5]) == 1
    err = capsys.readouterr().err
    assert "dHM's" in err and "--dimensions" in err and "Traceback" not in err
