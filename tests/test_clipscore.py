"""CLIPScore for stories (per sentence, whole story with the 77-token limit explicit) and photo/region
loading.

Whole-path tests use a tiny random CLIP (tests/tiny_models.py) on scikit-image's CC0 photos and compare with
the same model called directly through transformers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from vistkit.data.images import ImageStore, attach_photos, load_photo_map, parse_bbox, read_regions
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics.clipscore import CLIPSCORE_PREFIX, clip_s

PHOTOS = {"201": "chelsea", "202": "coffee", "203": "camera"}  # scikit-image CC0 photos


# ------------------------------------------------------------------------------------------------ arithmetic
def test_clip_s_is_2_5_times_clipped_cosine():
    assert clip_s(np.array([0.3, -0.2, 0.0, 1.0])).tolist() == pytest.approx([0.75, 0.0, 0.0, 2.5])
    assert CLIPSCORE_PREFIX == "A photo depicts "


# ------------------------------------------------------------------------------------------------ images
def test_parse_bbox():
    assert parse_bbox("[518.0260009765625, 30.21845054626465, 655.0294799804688, 189.49876403808594]") == (
        518.0260009765625,
        30.21845054626465,
        655.0294799804688,
        189.49876403808594,
    )
    assert parse_bbox("[1, 2, 3, 4]") == (1.0, 2.0, 3.0, 4.0)
    assert parse_bbox("whole_img") is None
    with pytest.raises(InputError):
        parse_bbox("[3, 2, 1, 4]")
    with pytest.raises(InputError):
        parse_bbox("1 2 3")


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image

    d = tmp_path_factory.mktemp("photos")
    for pid, name in PHOTOS.items():
        Image.fromarray(getattr(skdata, name)()).convert("RGB").save(d / f"{pid}.png")
    return d


def test_regions_csv_crops_first_b(tmp_path: Path, photo_dir: Path):
    csv = tmp_path / "entities.csv"
    csv.write_text(
        "image_id,bbox\n"
        '201,"[10.0, 20.0, 110.0, 70.0]"\n'
        '201,"[0.4, 0.6, 50.5, 40.49]"\n'
        '201,"[5, 5, 25, 25]"\n'
        "202,whole_img\n"
    )
    regions = read_regions(csv)
    assert [t for t, _ in regions["201"]] == [
        "[10.0, 20.0, 110.0, 70.0]",
        "[0.4, 0.6, 50.5, 40.49]",
        "[5, 5, 25, 25]",
    ]
    store = ImageStore(photo_dir, regions=csv, max_regions=2)
    crops = store.regions_of("201")
    # Pillow rounds the corners (half to even): (0.4, 0.6, 50.5, 40.49) -> (0, 1, 50, 40), 50 x 39 pixels
    assert [c.size for c in crops] == [(100, 50), (50, 39)]
    full = store.image("201")
    assert np.array_equal(np.asarray(crops[0]), np.asarray(full)[20:70, 10:110])
    assert store.regions_of("202")[0].size == store.image("202").size  # whole_img
    assert store.regions_of("203")[0].size == store.image("203").size  # no boxes: whole photo
    assert store.whole_fallback == {"203"}
    assert store.missing(["201", "999"]) == ["999"]
    assert store.describe().startswith("csv-") and store.describe().endswith("-first2")


def test_pre_cut_crop_files_are_preferred(tmp_path: Path, photo_dir: Path):
    from PIL import Image

    d = tmp_path / "photos"
    d.mkdir()
    Image.new("RGB", (40, 30), "red").save(d / "301.jpg")
    Image.new("RGB", (7, 9), "blue").save(d / "301_[1, 2, 3, 4].jpg")  # RoViST's vist-entities layout
    store = ImageStore(d, regions={"301": [("[1, 2, 3, 4]", (1.0, 2.0, 3.0, 4.0))]})
    assert store.regions_of("301")[0].size == (7, 9)


def test_photo_map(tmp_path: Path):
    p = tmp_path / "map.json"
    p.write_text('{"45530": ["1741642", "1741640"], "x": []}')
    m = load_photo_map(p)
    assert m["45530"] == ("1741642", "1741640")
    stories = attach_photos(StorySet([Story("45530", "a ."), Story("other", "b .")]), m)
    assert stories[0].photo_ids == ("1741642", "1741640") and stories[1].photo_ids == ()


def test_missing_photo_folder_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="no such photo folder"):
        ImageStore(tmp_path / "nope")


# ------------------------------------------------------------------------------------------------ whole path
@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip", seed=1)


def _direct_cosines(folder: Path, photo_dir: Path, texts: list[str], photos: list[str]) -> np.ndarray:
    """cos(text_i, photo_i) with transformers called directly (reference for our encoder)."""
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPTokenizer

    try:
        from transformers import CLIPImageProcessorPil as Proc
    except ImportError:
        from transformers import CLIPImageProcessor as Proc
    model = CLIPModel.from_pretrained(str(folder)).eval()
    tok = CLIPTokenizer.from_pretrained(str(folder))
    proc = Proc.from_pretrained(str(folder))

    def feats(out):
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    with torch.no_grad():
        t = feats(
            model.get_text_features(
                **tok(texts, padding=True, truncation=True, max_length=77, return_tensors="pt")
            )
        )
        ims = [Image.open(photo_dir / f"{p}.png").convert("RGB") for p in photos]
        v = feats(model.get_image_features(**proc(images=ims, return_tensors="pt")))
    t = t / t.norm(dim=-1, keepdim=True)
    v = v / v.norm(dim=-1, keepdim=True)
    return (t * v).sum(dim=-1).numpy().astype(np.float64)


@pytest.mark.slow
def test_per_sentence_clipscore_tiny_clip(tiny_clip: Path, photo_dir: Path):
    from vistkit.metrics.clipscore import ClipScore

    sents = ("a cat looks at us .", "coffee is served .", "a man with a camera .")
    stories = StorySet(
        [
            Story("a", " ".join(sents), sentences=sents, photo_ids=tuple(PHOTOS)),
            Story("b", "only one sentence here .", photo_ids=tuple(PHOTOS)),  # 1 sentence for 3 photos
            Story("c", "x . y . z .", photo_ids=("201", "202", "404")),
        ]
    )
    result = ClipScore(images=photo_dir, clip_model=str(tiny_clip), sentences="source").score(stories)
    cos = _direct_cosines(tiny_clip, photo_dir, [CLIPSCORE_PREFIX + s for s in sents], list(PHOTOS))
    expected = 2.5 * np.clip(cos, 0, None)
    assert result.extra["per_sentence"]["a"] == pytest.approx(expected.tolist(), abs=1e-5)
    assert result.item_scores[0] == pytest.approx(expected.mean(), abs=1e-5)
    assert "1 sentences for 3 photos" in result.excluded["b"]
    assert "404" in result.excluded["c"]
    assert math.isnan(result.item_scores[1]) and math.isnan(result.item_scores[2])
    assert 0.0 <= result.corpus <= 2.5
    assert "sent:source" in result.signature and "w:2.5" in result.signature


@pytest.mark.slow
def test_whole_story_77_token_limit_is_explicit(tiny_clip: Path, photo_dir: Path):
    from vistkit.metrics.clipscore import ClipScoreStory

    short = Story("s", "a cat , a coffee and a camera .", photo_ids=tuple(PHOTOS))
    long = Story("l", " ".join(["word"] * 200), photo_ids=tuple(PHOTOS))
    res = ClipScoreStory(images=photo_dir, clip_model=str(tiny_clip)).score(StorySet([short, long]))
    assert math.isnan(res.item_scores[1])
    assert "CLIP tokens, over the 77-token context" in res.excluded["l"]
    cos = _direct_cosines(tiny_clip, photo_dir, [CLIPSCORE_PREFIX + short.text] * 3, list(PHOTOS))
    assert res.item_scores[0] == pytest.approx(float((2.5 * np.clip(cos, 0, None)).mean()), abs=1e-5)
    assert "long:exclude" in res.signature

    trunc = ClipScoreStory(images=photo_dir, clip_model=str(tiny_clip), long="truncate").score(
        StorySet([long])
    )
    assert trunc.extra["truncated_stories"] == 1
    cos = _direct_cosines(tiny_clip, photo_dir, [CLIPSCORE_PREFIX + long.text] * 3, list(PHOTOS))
    assert trunc.item_scores[0] == pytest.approx(float((2.5 * np.clip(cos, 0, None)).mean()), abs=1e-5)


def test_missing_clip_is_one_sentence(tmp_path: Path):
    from vistkit.metrics.clipscore import ClipScore

    with pytest.raises(MissingDependencyError) as err:
        ClipScore(images=tmp_path, clip_model="openai/not-a-cached-clip")
    assert "clipscore needs CLIP ViT-B/32 weights" in str(err.value)
    assert "-O clipscore.clip_model=PATH" in str(err.value)


def test_needs_images(tiny_clip: Path):
    from vistkit.metrics.clipscore import ClipScore

    with pytest.raises(InputError, match="needs the story photos"):
        ClipScore(clip_model=str(tiny_clip)).score([Story("a", "x .", photo_ids=("1",))])


@pytest.mark.slow
def test_embedding_caches_are_bounded_and_values_unchanged(
    tiny_clip: Path, photo_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    """The text and photo caches keep at most VISTKIT_CACHE_MB (least recently used out first): a budget of
    about two embeddings gives the same scores as the default, and the caches stay within it."""
    from vistkit.metrics.clipscore import ClipScore

    sents = ("a cat looks at us .", "coffee is served .", "a man with a camera .")
    stories = StorySet([Story(f"s{i}", " ".join(sents), sentences=sents, photo_ids=tuple(PHOTOS)) for i in range(3)])
    wide = ClipScore(images=photo_dir, clip_model=str(tiny_clip), sentences="source").score(stories)
    monkeypatch.setenv("VISTKIT_CACHE_MB", "0.0001")  # ~105 bytes: one tiny-CLIP embedding or two at most
    monkeypatch.setattr("vistkit.metrics.clipscore._CLIP_CACHE", {})  # a fresh encoder (and text cache)
    metric = ClipScore(images=photo_dir, clip_model=str(tiny_clip), sentences="source")
    narrow = metric.score(stories)
    assert narrow.item_scores == pytest.approx(wide.item_scores, abs=1e-6)
    for cache in (metric._image_cache, metric.encoder._text_cache):
        assert cache.max_bytes == 104 and 0 < cache.nbytes <= 104 and len(cache) < 3
