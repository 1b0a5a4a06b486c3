"""RoViST-VG: noun extraction, the log-sum-exp score (hand-computed), GloVe/IDF loading, and the whole path
with a tiny random ViT + projection checkpoint (saved as a legacy .pth.tar, loaded only when trusted) compared
with the same weights run through transformers' own ViT image processor."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError

pytest.importorskip("spacy")

from vistkit.metrics import rovist_vg as vg

PHOTOS = {"401": "chelsea", "402": "coffee", "403": "horse"}  # scikit-image CC0 photos
TINY_VIT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "image_size": 32,
    "patch_size": 8,
}


def test_log_sum_exp_hand_computed():
    # x = idf * recall = [1.0, 0.2]; log(e^1 + e^0.2)
    assert vg.log_sum_exp_score([0.5, 0.2], [2.0, 1.0]) == pytest.approx(math.log(math.e + math.exp(0.2)))
    assert vg.log_sum_exp_score([0.5, 0.2], [2.0, 1.0], aggregate="sum") == pytest.approx(1.2)
    assert vg.log_sum_exp_score([0.5, 0.2], [2.0, 1.0], aggregate="mean") == pytest.approx(0.6)
    # one noun: the score is its weighted recall
    assert vg.log_sum_exp_score([0.3], [1.5]) == pytest.approx(0.45)


def test_sentence_nouns_spacy_tagger():
    nouns = vg.sentence_nouns("i saw the dog and the dog saw the cats in the park .", tagger="spacy")
    assert nouns == ["dog", "cats", "park"]  # distinct per sentence, 'i' never a noun
    assert "male" in vg.sentence_nouns("the [male] waved at the crowd .", tagger="spacy")


def test_story_nouns_keep_repeats_across_sentences():
    nouns = vg.story_nouns(["the dog ran .", "the dog sat ."], tagger="spacy")
    assert nouns == ["dog", "dog"]


def test_load_glove_text_and_word2vec(tmp_path: Path):
    p = tmp_path / "g.txt"
    p.write_text("the 0.1 0.2\nunk 0.0 -1.0\n")
    g = vg.load_glove(p)
    assert g["the"].tolist() == pytest.approx([0.1, 0.2]) and g["unk"].tolist() == [0.0, -1.0]
    w2v = tmp_path / "g.w2v"
    w2v.write_text("2 2\nthe 0.1 0.2\nunk 0.0 -1.0\n")
    assert set(vg.load_glove(w2v)) == {"the", "unk"}
    (tmp_path / "nounk.txt").write_text("the 0.1 0.2\n")
    with pytest.raises(InputError, match="unk"):
        vg.load_glove(tmp_path / "nounk.txt")
    with pytest.raises(MissingDependencyError, match=r"glove\.6B\.300d\.txt"):
        vg.load_glove(tmp_path / "absent.txt")


def test_idf_pickle_needs_trust(tmp_path: Path):
    import pickle

    p = tmp_path / "idf_dict.pkl"
    p.write_bytes(pickle.dumps({"dog": 2.0}))
    with pytest.raises(InputError, match="pickle"):
        vg.load_idf(p)
    assert vg.load_idf(p, trust=True) == {"dog": 2.0}
    j = tmp_path / "idf.json"
    j.write_text('{"dog": 2.5}')
    assert vg.load_idf(j) == {"dog": 2.5}


# ------------------------------------------------------------------------------------------------ whole path
def tiny_options(assets: dict[str, Path]) -> dict[str, object]:
    """RovistVG options for the tiny official-format checkpoint, GloVe, IDF, photos and regions of `assets`."""
    return dict(
        checkpoint=assets["ckpt"],
        glove=assets["glove"],
        idf=assets["idf"],
        images=assets["photos"],
        regions=assets["regions"],
        vit_config=TINY_VIT,
        tagger="spacy",
        trust_checkpoint=True,
    )


def tiny_checkpoint(root: Path) -> Path:
    """A tiny random RoViST-VG checkpoint in the official layout (``r2p_model_epoch2.pth.tar``), seeded."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(3)
    vit = ViTModel(ViTConfig(**TINY_VIT), add_pooling_layer=True)
    state = {f"image_encoder.image_model.{k}": v for k, v in vit.state_dict().items()}
    state["image_encoder.linear.weight"] = torch.randn(24, 32) * 0.2
    state["image_encoder.linear.bias"] = torch.randn(24) * 0.1
    state["text_encoder.linear.weight"] = torch.randn(24, 50) * 0.2
    state["text_encoder.linear.bias"] = torch.randn(24) * 0.1
    ckpt = root / "r2p_model_epoch2.pth.tar"
    torch.save({"model": state, "opt": argparse.Namespace(joint_emb_dim=24)}, ckpt)
    return ckpt


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image

    root = tmp_path_factory.mktemp("rovist")
    ckpt = tiny_checkpoint(root)

    rng = np.random.default_rng(0)
    words = ["cat", "coffee", "cup", "horse", "field", "unk"]
    glove = root / "glove.tiny.50d.txt"
    glove.write_text(
        "".join(w + " " + " ".join(f"{x:.5f}" for x in rng.normal(size=50)) + "\n" for w in words)
    )
    idf = root / "idf.json"
    idf.write_text(
        json.dumps({"cat": 2.0, "coffee": 1.5, "cup": 1.2, "horse": 3.0, "field": 0.7, "grass": 1.0})
    )
    photos = root / "photos"
    photos.mkdir()
    for pid, name in PHOTOS.items():
        Image.fromarray(getattr(skdata, name)()).convert("RGB").save(photos / f"{pid}.jpg")
    regions = root / "vist_entities.csv"
    rows = ["image_id,bbox"] + [
        f'{pid},"[{5 * k}, {4 * k}, {60 + 5 * k}, {50 + 4 * k}]"' for pid in PHOTOS for k in range(11)
    ]
    regions.write_text("\n".join(rows) + "\n")
    return {"ckpt": ckpt, "glove": glove, "idf": idf, "photos": photos, "regions": regions}


def _reference(assets: dict[str, Path], nouns: list[str]) -> float:
    """The official computation with transformers' ViTImageProcessor (the feature extractor the code uses)."""
    import torch
    from PIL import Image
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    from vistkit.data.images import read_regions

    state = torch.load(assets["ckpt"], map_location="cpu", weights_only=False)["model"]
    vit = ViTModel(ViTConfig(**TINY_VIT), add_pooling_layer=True)
    vit.load_state_dict(
        {
            k[len("image_encoder.image_model.") :]: v
            for k, v in state.items()
            if k.startswith("image_encoder.image_model.")
        }
    )
    vit.eval()
    # google/vit-base-patch16-224-in21k's preprocessor: resize (bilinear) to a square, rescale, mean=std=0.5
    proc = ViTImageProcessor(
        size={"height": 32, "width": 32}, resample=2, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    glove = vg.load_glove(assets["glove"])
    idf = json.loads(assets["idf"].read_text())
    boxes = read_regions(assets["regions"])
    with torch.no_grad():
        t = torch.tensor(np.stack([glove.get(n, glove["unk"]) for n in nouns]))
        t = torch.tanh(t @ state["text_encoder.linear.weight"].T + state["text_encoder.linear.bias"])
        t = t / t.norm(dim=-1, keepdim=True)
        per_photo = []
        for pid in PHOTOS:
            im = Image.open(assets["photos"] / f"{pid}.jpg").convert("RGB")
            crops = [im.crop(b) for _, b in boxes[pid]][:10]
            pooled = vit(**proc(images=crops, return_tensors="pt")).pooler_output
            v = torch.tanh(
                pooled @ state["image_encoder.linear.weight"].T + state["image_encoder.linear.bias"]
            )
            v = v / v.norm(dim=-1, keepdim=True)
            per_photo.append((t @ v.T).max(dim=1).values)
        recall = torch.stack(per_photo).max(dim=0).values
        x = recall * torch.tensor([idf[n] for n in nouns], dtype=torch.float32)
        return float(torch.log(torch.exp(x).sum()))


@pytest.mark.slow
def test_whole_path_tiny_checkpoint(assets: dict[str, Path]):
    stories = StorySet(
        [
            Story(
                "a",
                "the cat sat in the field . a cup of coffee . the horse ate grass .",
                photo_ids=tuple(PHOTOS),
            ),
            Story("b", "it is what it is .", photo_ids=tuple(PHOTOS)),  # no noun
            Story("c", "the zebra ran .", photo_ids=tuple(PHOTOS)),  # zebra has no IDF
        ]
    )
    metric = vg.RovistVG(**tiny_options(assets))
    res = metric.score(stories)
    nouns = vg.story_nouns(
        ["the cat sat in the field .", "a cup of coffee .", "the horse ate grass ."], tagger="spacy"
    )
    assert sorted(nouns) == ["cat", "coffee", "cup", "field", "grass", "horse"]
    # 'grass' is not in the tiny GloVe: it takes 'unk''s vector, as the official lookup does
    assert res.item_scores[0] == pytest.approx(_reference(assets, nouns), abs=1e-5)
    assert "no noun" in res.excluded["b"] and "zebra" in res.excluded["c"]
    assert math.isnan(res.item_scores[1]) and math.isnan(res.item_scores[2])
    assert "agg:log_sum_exp" in res.signature and "pos:spacy-" in res.signature and "ckpt:" in res.signature


def test_checkpoint_needs_trust(assets: dict[str, Path]):
    with pytest.raises(InputError, match="pickle-based"):
        vg.RovistVG(checkpoint=assets["ckpt"], glove=assets["glove"], idf=assets["idf"], vit_config=TINY_VIT)


def test_missing_checkpoint_message(tmp_path: Path):
    with pytest.raises(MissingDependencyError) as err:
        vg.RovistVG(checkpoint=tmp_path / "r2p_model_epoch2.pth.tar")
    msg = str(err.value)
    for what in (
        "r2p_model_epoch2.pth.tar",
        "glove.6B.300d.txt",
        "idf_dict.pkl",
        "-O rovist-vg.checkpoint=PATH",
    ):
        assert what in msg
    assert "\n" not in msg


@pytest.mark.slow
def test_converted_checkpoint_scores_and_signs_like_the_pickle(assets: dict[str, Path], tmp_path: Path):
    """`vistkit models convert --kind state-dict` output loads without unpickling and changes nothing."""
    from vistkit.models import file_sha256, load_legacy_checkpoint, save_converted
    from vistkit.models.checkpoints import extract_state_dict

    obj = load_legacy_checkpoint(assets["ckpt"], trust=True)
    folder = save_converted(
        tmp_path / "converted",
        extract_state_dict(obj),
        kind="state-dict",
        config={},
        source={"file": assets["ckpt"].name, "sha256": file_sha256(assets["ckpt"])},
    )
    stories = StorySet([Story("a", "the cat sat in the field . a cup of coffee .", photo_ids=tuple(PHOTOS))])
    common = dict(
        glove=assets["glove"], idf=assets["idf"], images=assets["photos"], vit_config=TINY_VIT, tagger="spacy"
    )
    pickled = vg.RovistVG(checkpoint=assets["ckpt"], trust_checkpoint=True, **common).score(stories)
    converted = vg.RovistVG(checkpoint=folder, **common).score(stories)
    assert converted.item_scores[0] == pytest.approx(pickled.item_scores[0], abs=1e-6)
    assert converted.signature == pickled.signature


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1, 1, allow_nan=False), st.floats(0, 10, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
def test_log_sum_exp_bounds(pairs: list[tuple[float, float]]) -> None:
    """max(x) <= LSE(x) <= max(x) + log(n), for x = idf * recall."""
    recall, idf = [r for r, _ in pairs], [w for _, w in pairs]
    x = [r * w for r, w in pairs]
    lse = vg.log_sum_exp_score(recall, idf)
    assert max(x) - 1e-9 <= lse <= max(x) + math.log(len(x)) + 1e-9


# transformers >= 5 ViT names -> the transformers 4.x names the 2022 RoViST checkpoint was saved with
_TO_LEGACY = {
    "attention.q_proj": "attention.attention.query",
    "attention.k_proj": "attention.attention.key",
    "attention.v_proj": "attention.attention.value",
    "attention.o_proj": "attention.output.dense",
    "mlp.fc1": "intermediate.dense",
    "mlp.fc2": "output.dense",
    "layernorm_before": "layernorm_before",
    "layernorm_after": "layernorm_after",
}


@pytest.mark.slow
def test_checkpoint_with_transformers4_vit_names(assets: dict[str, Path], tmp_path: Path):
    import re

    import torch

    from vistkit.models import load_legacy_checkpoint

    state = load_legacy_checkpoint(assets["ckpt"], trust=True)["model"]
    if not any(".layers." in k for k in state):
        pytest.skip("the installed transformers already uses the 4.x ViT names")
    legacy = {}
    for key, value in state.items():
        m = re.match(r"^(image_encoder\.image_model\.)layers\.(\d+)\.(.+?)\.(weight|bias)$", key)
        if m:
            key = f"{m.group(1)}encoder.layer.{m.group(2)}.{_TO_LEGACY[m.group(3)]}.{m.group(4)}"
        legacy[key] = value
    assert any(".encoder.layer.0.attention.attention.query.weight" in k for k in legacy)
    old = tmp_path / "r2p_model_epoch2.pth.tar"
    torch.save({"model": legacy}, old)
    stories = StorySet([Story("a", "the cat sat in the field . a cup of coffee .", photo_ids=tuple(PHOTOS))])
    common = dict(
        glove=assets["glove"],
        idf=assets["idf"],
        images=assets["photos"],
        vit_config=TINY_VIT,
        tagger="spacy",
        trust_checkpoint=True,
    )
    new_names = vg.RovistVG(checkpoint=assets["ckpt"], **common).score(stories)
    old_names = vg.RovistVG(checkpoint=old, **common).score(stories)
    assert old_names.item_scores[0] == pytest.approx(new_names.item_scores[0], abs=1e-6)


# ------------------------------------------------------------------------------- rovist-vg-scaled (RoViST Eq. 3)
def _eq3(s_vg: float) -> float:
    """RoViST Eq. 3 as printed: 1 / (1 + exp(-0.5 * S_VG)) * 2 - 1."""
    return 1.0 / (1.0 + math.exp(-0.5 * s_vg)) * 2.0 - 1.0


def test_scaled_sigmoid_hand_computed():
    assert vg.scaled_sigmoid(0.0) == 0.0
    # 2 / (1 + e^-1) - 1 = (e - 1) / (e + 1)
    assert vg.scaled_sigmoid(2.0) == pytest.approx((math.e - 1) / (math.e + 1), abs=1e-15)
    assert vg.scaled_sigmoid(-2.0) == pytest.approx(-(math.e - 1) / (math.e + 1), abs=1e-15)
    assert vg.scaled_sigmoid(-5000.0) == -1.0 and vg.scaled_sigmoid(5000.0) == 1.0  # no overflow
    assert math.isnan(vg.scaled_sigmoid(math.nan))


@settings(max_examples=300, deadline=None)
@given(st.floats(-1400, 1400, allow_nan=False), st.floats(-1400, 1400, allow_nan=False))
def test_scaled_sigmoid_is_eq3_bounded_and_monotone(a: float, b: float) -> None:
    """Eq. 3 exactly (to rounding), within [-1, 1], non-negative for S_VG >= 0, increasing, odd."""
    fa, fb = vg.scaled_sigmoid(a), vg.scaled_sigmoid(b)
    assert fa == pytest.approx(_eq3(a), abs=1e-12)
    assert -1.0 <= fa <= 1.0
    assert (fa >= 0.0) == (a >= 0.0) or fa == 0.0
    if a < b:
        assert fa <= fb
    assert vg.scaled_sigmoid(-a) == -fa


def test_scaled_is_registered_with_its_bounds():
    from vistkit.metrics.base import list_metrics

    cls = list_metrics()["rovist-vg-scaled"]
    assert cls is vg.RovistVGScaled and issubclass(cls, vg.RovistVG)
    assert (cls.lower_bound, cls.upper_bound) == (-1.0, 1.0) and cls.higher_is_better
    assert (vg.RovistVG.lower_bound, vg.RovistVG.upper_bound) == (None, None)
    assert "Eq. 3" in cls.card.definition and "rovist-vg-scaled" in vg.RovistVG.card.differences


def test_scaled_missing_checkpoint_message_names_its_options(tmp_path: Path):
    with pytest.raises(MissingDependencyError) as err:
        vg.RovistVGScaled(checkpoint=tmp_path / "r2p_model_epoch2.pth.tar")
    msg = str(err.value)
    assert msg.startswith("rovist-vg-scaled needs") and "-O rovist-vg-scaled.checkpoint=PATH" in msg
    assert "-O rovist-vg-scaled.idf=PATH" in msg and "\n" not in msg


@pytest.mark.slow
def test_scaled_equals_eq3_of_rovist_vg_per_item(assets: dict[str, Path]):
    """Same tiny model, same stories: each rovist-vg-scaled value is Eq. 3 of rovist-vg's; same exclusions;
    the signature is rovist-vg's plus scale:eq3; the corpus score is the mean of the scaled values."""
    stories = StorySet(
        [
            Story("a", "the cat sat in the field . a cup of coffee .", photo_ids=tuple(PHOTOS)),
            Story("b", "the horse ate grass in the field .", photo_ids=tuple(PHOTOS)),
            Story("c", "a cup .", photo_ids=tuple(PHOTOS)[:1]),
            Story("d", "it is what it is .", photo_ids=tuple(PHOTOS)),  # no noun: excluded by both
        ]
    )
    common = tiny_options(assets)
    raw = vg.RovistVG(**common).score(stories)
    scaled = vg.rovist_vg_scaled_score(stories, **common)
    assert scaled.item_ids == raw.item_ids and set(scaled.excluded) == set(raw.excluded) == {"d"}
    assert math.isnan(scaled.item_scores[3])
    for s_vg, value in zip(raw.item_scores[:3], scaled.item_scores[:3], strict=True):
        assert value == pytest.approx(_eq3(float(s_vg)), abs=1e-12)
        assert -1.0 < value < 1.0
    assert len(set(raw.item_scores[:3].tolist())) == 3  # three distinct S_VG values were scaled
    assert scaled.corpus == pytest.approx(float(np.mean([_eq3(float(x)) for x in raw.item_scores[:3]])))
    assert scaled.signature == raw.signature.replace("rovist-vg|", "rovist-vg-scaled|", 1).replace(
        "|vistkit:", "|scale:eq3|vistkit:", 1
    )
    # order of the S_VG values is kept (Eq. 3 is increasing)
    assert np.argsort(raw.item_scores[:3]).tolist() == np.argsort(scaled.item_scores[:3]).tolist()
