"""Probe round 10: the PHOTO INPUTS of the grounded metrics (clipscore, clipscore-story, groovist, rovist-vg and
dHM's G through ``distance --images``), as real photo folders hold them.

Probed (67 probes): files named ``<id>.jpg`` that are truncated, empty, text, over Pillow's decompression-bomb
limits (error and warning bands); PNG with alpha, palette + transparency, 16-bit and 8-bit greyscale, CMYK JPEG,
animated GIF, WebP (as ``.webp`` and under ``.jpg``), EXIF orientation 6; a folder, a FIFO and a dangling link
named ``<id>.jpg``; ``.JPG``, ``.gif``, ``.webp`` suffixes; ids with spaces, quotes, non-ASCII, ``/``, ``..``,
NUL and 300 characters; pre-cut crops that are corrupt (with and without the photo); boxes outside the photo,
partly outside, under a pixel, and NaN / negative / zero-area / infinite in the CSV; crops 1 and 3 pixels high
through CLIP's processor; the three metrics with one bad photo among good ones, in both orders; signatures with
and without pre-cut crops. What was wrong:

- a photo over Pillow's bomb limit (a 20000x20000 PNG is 48 KB on disk) raised ``DecompressionBombError`` out of
  vistkit ("unexpected ..."); a corrupt pre-cut crop ``<id>_<bbox>.jpg`` raised ``UnidentifiedImageError`` (the
  crop path had no error handling); a 300-character id raised ``OSError: File name too long``;
- any unreadable photo (truncated, empty, text) stopped the whole run with an `InputError`; now `PhotoError`
  (one sentence naming the file) excludes the stories that need the photo, and the others score as alone;
- a box wholly outside its photo gave a black crop, scored silently; a box under one pixel once rounded gave a
  0x0 crop; both now exclude the story with the box and the photo's size;
- a folder, FIFO or dangling link named ``<id>.jpg`` read as "not found" only; now the reason names the file;
- ``distance --images`` summarised a photo's reason ``DIR/4.jpg: cannot be read ...`` as ``DIR/4.jpg`` (it cuts
  reasons at their second ": "); photo reasons now read ``DIR/4.jpg cannot be read as an image (...)``;
- an id ``../x`` read a photo outside the folder; now it is no file name (not found, with the reason); an id
  ``x.jpg`` (a photo map of file names) is not found, now with the hint to give ``x``;
- ``.gif`` / ``.webp`` / ``.bmp`` / ``.tif`` photos were "not in the folder"; now read (a GIF's first frame);
- a 16-bit greyscale PNG was clipped to white (mean 254.4 of 255); now scaled to 8 bits (``v / 257``);
- the groovist / rovist-vg signature did not say when pre-cut crops were read instead of cutting the boxes
  (other numbers); now ``regions:csv-HASH-first10+precut``.

Kept as the official code paths do (CLIPScore, GROOViST open with ``Image.open(...).convert("RGB")``): EXIF
orientation is not applied, alpha is dropped, a box partly outside the photo is padded black.
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from vistkit.data.images import ImageStore, PhotoError, read_regions, read_rgb
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError

Image = pytest.importorskip("PIL.Image")


def _photo(seed: int = 0, size: tuple[int, int] = (64, 48)) -> object:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def _one_sentence(msg: str, name: str) -> None:
    assert name in msg and "\n" not in msg and "Traceback" not in msg and "unexpected" not in msg
    after = msg.split(name, 1)[1]  # ``distance`` cuts a reason at its second ": " and splits it at "; "
    assert ": " not in after and "; " not in msg


# ------------------------------------------------------------------------------------------------ bad files
def _truncated(p: Path) -> None:
    buf = io.BytesIO()
    _photo().save(buf, "JPEG")
    p.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])


def _png_header(width: int, height: int) -> bytes:
    """A 1-bit greyscale PNG of ``width`` x ``height`` as Pillow's open sees it (header, one empty IDAT): what a
    20000x20000 PNG of one colour looks like on disk (48 KB), without the second it takes Pillow to write one."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


BAD_FILES = {
    "truncated": (_truncated, "7.jpg cannot be read as an image (image file is truncated"),
    "empty": (lambda p: p.write_bytes(b""), "7.jpg is empty"),
    "text": (lambda p: p.write_text("id,caption\n1,a cat\n"), "not an image Pillow can identify"),
    "bomb": (lambda p: p.write_bytes(_png_header(20000, 20000)), "400,000,000 pixels, over Pillow's limit"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_unreadable_photo_is_one_sentence_naming_the_file(tmp_path: Path, kind: str):
    """A truncated / empty / text / bomb ``<id>.jpg``: the bomb raised Pillow's DecompressionBombError out of
    vistkit; the others an InputError stopping the run. Now a `PhotoError` (an InputError) naming the file."""
    make, said = BAD_FILES[kind]
    make(tmp_path / "7.jpg")
    store = ImageStore(tmp_path)
    assert store.has("7")
    with pytest.raises(PhotoError) as err:
        store.image("7")
    assert isinstance(err.value, InputError) and said in str(err.value)
    _one_sentence(str(err.value), "7.jpg")


def test_bomb_limits_follow_pillow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Between MAX_IMAGE_PIXELS and twice it Pillow warns and reads: read, and no raw Python warning line;
    beyond twice it: one sentence (a 20000x20000 PNG is small on disk)."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    _photo(size=(40, 40)).save(tmp_path / "warn.png")  # 1,600 pixels: Pillow's warning band
    _photo(size=(50, 50)).save(tmp_path / "bomb.png")  # 2,500 > 2,000
    store = ImageStore(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.image("warn").size == (40, 40)
    with pytest.raises(PhotoError, match=r"bomb\.png is 2,500 pixels, over Pillow's limit"):
        store.image("bomb")


MODES = {
    "rgba.png": lambda im: im.convert("RGBA"),
    "palette_transparent.png": lambda im: im.convert("P"),
    "grey.png": lambda im: im.convert("L"),
    "cmyk.jpg": lambda im: im.convert("CMYK"),
    "webp.webp": lambda im: im,
    "webp_named.jpg": lambda im: im,
    "anim.gif": lambda im: im,
    "upper.JPG": lambda im: im,
    "mixed.Jpg": lambda im: im,
    "mixed_tiff.tIf": lambda im: im,
    "bitmap.bmp": lambda im: im,
    "tiff.tif": lambda im: im,
}


@pytest.mark.parametrize("name", sorted(MODES))
def test_image_modes_read_as_the_official_code(tmp_path: Path, name: str):
    """Every mode and format reads as ``Image.open(path).convert("RGB")`` (the official code paths); ``.gif``,
    ``.webp``, ``.bmp``, ``.tif`` were "not in the folder" before."""
    im = MODES[name](_photo(1))
    path = tmp_path / name
    if name == "webp_named.jpg":
        im.save(path, "WEBP")
    elif name == "anim.gif":
        im.save(path, save_all=True, append_images=[_photo(2)])
    elif name == "palette_transparent.png":
        im.save(path, transparency=0)
    else:
        im.save(path)
    store = ImageStore(tmp_path)
    got = store.image(name.split(".")[0])
    with Image.open(path) as ref:
        expected = np.asarray(ref.convert("RGB"))
    assert got.mode == "RGB" and got.size == (64, 48)
    assert np.array_equal(np.asarray(got), expected)


def test_mixed_case_suffix_is_found_but_the_id_must_match_exactly(tmp_path: Path):
    """``<id>.Jpg`` was "not in the folder" (only all-lower and all-upper suffixes were tried). The id itself
    still matches exactly, and an exact suffix is taken before a mixed-case one."""
    _photo(1).save(tmp_path / "Abc.Jpeg")
    _photo(2).save(tmp_path / "both.Png")
    _photo(3).save(tmp_path / "both.jpg")
    store = ImageStore(tmp_path)
    assert store.path_of("Abc") == tmp_path / "Abc.Jpeg" and store.has("Abc")
    assert store.path_of("abc") is None and store.path_of("ABC") is None and store.missing(["abc"]) == ["abc"]
    assert store.path_of("both") == tmp_path / "both.jpg"
    with Image.open(tmp_path / "Abc.Jpeg") as ref:
        assert np.array_equal(np.asarray(store.image("Abc")), np.asarray(ref.convert("RGB")))


def test_exif_rotation_is_not_applied_as_official(tmp_path: Path):
    """EXIF orientation 6 (rotate 90): scored as stored, as official CLIPScore / GROOViST read photos."""
    exif = Image.Exif()
    exif[0x0112] = 6
    _photo(3).save(tmp_path / "r.png", exif=exif)
    _photo(3).save(tmp_path / "plain.png")
    store = ImageStore(tmp_path)
    assert store.image("r").size == (64, 48)
    assert np.array_equal(np.asarray(store.image("r")), np.asarray(store.image("plain")))


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path: Path):
    """A 16-bit greyscale PNG was clipped to 255 above 255 (a white photo); now v / 257 rounded."""
    values = np.array([[0, 257, 32896, 65535], [128, 1000, 40000, 65000]], dtype=np.uint16)
    Image.fromarray(values).save(tmp_path / "g.png")
    got = np.asarray(ImageStore(tmp_path).image("g"))
    assert got[..., 0].tolist() == [[0, 1, 128, 255], [0, 4, 156, 253]]
    assert np.array_equal(got[..., 0], got[..., 2])


# ------------------------------------------------------------------------------------------------ names
@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling"])
def test_non_file_named_like_a_photo(tmp_path: Path, kind: str):
    """A folder / FIFO / dangling link named ``<id>.jpg``: "not found" only; now the reason names the file (and
    a FIFO is never opened: no hang)."""
    p = tmp_path / "5.jpg"
    if kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(p)
    else:
        p.symlink_to(tmp_path / "gone.jpg")
    store = ImageStore(tmp_path)
    assert not store.has("5")
    said = {"folder": "is a folder", "fifo": "is not a regular file", "dangling": "is a link to nothing"}[kind]
    assert said in (store.why_missing("5") or "")
    with pytest.raises(PhotoError, match=said):
        store.image("5")


def test_odd_ids(tmp_path: Path):
    """Ids with spaces, quotes and non-ASCII read; ``../x`` read a photo outside the folder and a 300-character
    id raised OSError (File name too long): now both are not found, with the reason."""
    inner = tmp_path / "photos"
    inner.mkdir()
    for pid in ["a b", "it's", "café", "x"]:
        _photo().save(inner / f"{pid}.jpg")
    _photo().save(tmp_path / "outside.jpg")
    store = ImageStore(inner)
    assert store.missing(["a b", "it's", "café", "../outside", "y" * 300, "a\0b", ".."]) == [
        "../outside",
        "y" * 300,
        "a\0b",
        "..",
    ]
    assert "is not a file name" in (store.why_missing("../outside") or "")
    assert "too long for a file name" in (store.why_missing("y" * 300) or "")
    with pytest.raises(PhotoError):
        store.image("../outside")
    # a photo map giving file names: not found (as before), with the hint
    assert store.missing(["x.jpg"]) == ["x.jpg"]
    assert "x.jpg is there, but photo ids name no suffix (give 'x')" in (store.why_missing("x.jpg") or "")


# ------------------------------------------------------------------------------------------------ regions
def _store_with_boxes(tmp_path: Path, rows: list[str]) -> ImageStore:
    _photo(4).save(tmp_path / "9.jpg")
    csv = tmp_path / "entities.csv"
    csv.write_text("image_id,bbox\n" + "".join(f'9,"{r}"\n' for r in rows))
    return ImageStore(tmp_path, regions=csv)


@pytest.mark.parametrize(
    ("box", "said"),
    [
        ("[100, 100, 200, 200]", "is 64x48 pixels and its box [100, 100, 200, 200] lies outside it"),
        ("[-30, -30, 0, 0]", "lies outside it"),
        ("[10.2, 10.2, 10.4, 10.4]", "the box [10.2, 10.2, 10.4, 10.4] of photo 9 is under one pixel once rounded"),
    ],
)
def test_unusable_box_is_a_photo_error(tmp_path: Path, box: str, said: str):
    """A box wholly outside its photo gave an all-black crop, a sub-pixel one a 0x0 crop: now the story's
    exclusion reason, with the box and the photo's size."""
    store = _store_with_boxes(tmp_path, [box])
    with pytest.raises(PhotoError, match=said.replace("[", r"\[").replace("]", r"\]")):
        store.regions_of("9")


def test_box_partly_outside_is_padded_as_pillow_crops(tmp_path: Path):
    """Kept: a box partly outside is cut as Pillow's crop cuts it (the official crops), black outside."""
    store = _store_with_boxes(tmp_path, ["[-10, -10, 10.4, 10.6]", "[50, 40, 70, 60]"])
    a, b = store.regions_of("9")
    with Image.open(tmp_path / "9.jpg") as full:
        full = full.convert("RGB")
        assert np.array_equal(np.asarray(a), np.asarray(full.crop((-10, -10, 10.4, 10.6))))
    assert a.size == (20, 21) and np.asarray(a)[:10, :10].max() == 0
    assert b.size == (20, 20) and np.asarray(b)[8:, 14:].max() == 0


@pytest.mark.parametrize(
    "bbox", ["[nan, 1, 2, 3]", "[1, 1, 1, 5]", "[5, 1, 2, 3]", "[1, 2, inf, 4]", "[1, 2, 3]", "[-1e9, 0, 1, 1]"]
)
def test_bad_boxes_in_the_csv_name_the_line(tmp_path: Path, bbox: str):
    """NaN, zero-area, negative, infinite, short and far-away boxes: one sentence naming the CSV line."""
    csv = tmp_path / "e.csv"
    csv.write_text(f'image_id,bbox\n9,"[1, 2, 3, 4]"\n9,"{bbox}"\n')
    with pytest.raises(InputError, match=r"e\.csv, line 3: bbox"):
        read_regions(csv)


@pytest.mark.parametrize("with_photo", [True, False])
def test_corrupt_pre_cut_crop(tmp_path: Path, with_photo: bool):
    """A corrupt ``<id>_<bbox>.jpg`` raised Pillow's UnidentifiedImageError (the crop path had no error
    handling); now a `PhotoError` naming the crop."""
    if with_photo:
        _photo().save(tmp_path / "9.jpg")
    (tmp_path / "9_[1, 2, 30, 40].jpg").write_text("not a jpeg")
    store = ImageStore(tmp_path, regions={"9": [("[1, 2, 30, 40]", (1.0, 2.0, 30.0, 40.0))]})
    assert store.has("9")
    with pytest.raises(PhotoError) as err:
        store.regions_of("9")
    _one_sentence(str(err.value), "9_[1, 2, 30, 40].jpg")


def test_read_rgb_closes_nothing_open(tmp_path: Path):
    """One photo at a time: `read_rgb` returns a loaded copy, the file is closed (a folder is never held
    open or in memory at once)."""
    _photo().save(tmp_path / "1.jpg")
    im = read_rgb(tmp_path / "1.jpg")
    os.remove(tmp_path / "1.jpg")
    assert np.asarray(im).shape == (48, 64, 3)


# ------------------------------------------------------------------------------------------------ metrics
@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip", seed=2)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """Photos 1-3 good, 4 truncated, 5 a folder named 5.jpg; boxes for 1-3, one of 3's outside it."""
    d = tmp_path / "photos"
    d.mkdir()
    for i in (1, 2, 3):
        _photo(10 + i, size=(80, 60)).save(d / f"{i}.jpg")
    _truncated(d / "4.jpg")
    (d / "5.jpg").mkdir()
    return d


def _stories(order: list[str]) -> StorySet:
    photos = {"good": ("1", "2"), "trunc": ("1", "4"), "dir": ("5", "2"), "also": ("2", "3")}
    sents = ("a cat sat .", "a cup of coffee .")  # the source's sentences: no Punkt to load (3 s)
    return StorySet([Story(k, " ".join(sents), sentences=sents, photo_ids=photos[k]) for k in order])


@pytest.mark.slow
def test_clipscore_excludes_stories_with_unreadable_photos(tiny_clip: Path, folder: Path):
    """One truncated photo stopped the whole clipscore run (InputError); now its stories are excluded with the
    file named, and the others score as they do alone, in any order."""
    from vistkit.metrics.clipscore import ClipScore, ClipScoreStory

    for cls, opts in ((ClipScore, {"sentences": "source"}), (ClipScoreStory, {})):
        alone = cls(images=folder, clip_model=str(tiny_clip), **opts).score(_stories(["good", "also"]))
        for order in (["trunc", "good", "dir", "also"], ["also", "dir", "good", "trunc"]):
            res = cls(images=folder, clip_model=str(tiny_clip), **opts).score(_stories(order))
            got = dict(zip(res.item_ids, res.item_scores, strict=True))
            assert got["good"] == pytest.approx(alone.item_scores[0], abs=1e-6)
            assert got["also"] == pytest.approx(alone.item_scores[1], abs=1e-6)
            assert math.isnan(got["trunc"]) and math.isnan(got["dir"])
            assert "4.jpg cannot be read as an image (image file is truncated" in res.excluded["trunc"]
            assert "5.jpg is a folder, not a photo" in res.excluded["dir"]
            assert res.corpus == pytest.approx(np.mean(alone.item_scores), abs=1e-6)
    # dHM's summary of G's exclusions (distance --images) keeps the reason: it cut "4.jpg: cannot be read ..."
    # to the file's name
    from vistkit.scores.dhm import exclusion_summary

    lines = exclusion_summary({k: f"human G (clipscore): {v}" for k, v in res.excluded.items()})
    assert any("4.jpg cannot be read as an image (image file is truncated (" in line for line in lines), lines


@pytest.mark.slow
def test_groovist_box_outside_and_precut_signature(tiny_clip: Path, folder: Path, tmp_path: Path):
    """groovist: a box outside its photo scored a black crop silently; now the story is excluded with the box.
    Pre-cut crops (other numbers than cutting the boxes) were not in the signature; now ``+precut``."""
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    csv = tmp_path / "e.csv"
    csv.write_text(
        "image_id,bbox\n"
        '1,"[0, 0, 40, 30]"\n1,"[20, 10, 80, 60]"\n2,"[5, 5, 50, 50]"\n3,"[200, 200, 300, 300]"\n'
    )
    opts = {"images": folder, "regions": csv, "clip_model": str(tiny_clip), "sentences": "source"}
    res = Groovist(**opts).score(_stories(["also", "good", "trunc"]))
    assert "box [200, 200, 300, 300] lies outside it" in res.excluded["also"]
    assert "image file is truncated" in res.excluded["trunc"]
    assert not math.isnan(res.item_scores[1]) and "+precut" not in res.signature
    one = Groovist(**opts, batch_size=1).score(_stories(["good"]))
    assert one.item_scores[0] == pytest.approx(res.item_scores[1], abs=1e-6)  # regions one at a time: same
    with Image.open(folder / "1.jpg") as im:
        im.convert("RGB").crop((0, 0, 40, 30)).save(folder / "1_[0, 0, 40, 30].jpg", quality=30)
    pre = Groovist(**opts).score(_stories(["good"]))
    assert "regions:csv-" in pre.signature and "-first10+precut" in pre.signature
    assert pre.signature != res.signature


@pytest.mark.slow
def test_rovist_vg_corrupt_crop_excludes_the_story(tmp_path: Path):
    """rovist-vg: a corrupt pre-cut crop raised UnidentifiedImageError; now the story is excluded, naming it."""
    pytest.importorskip("torch")
    pytest.importorskip("spacy")
    from test_rovist_vg import TINY_VIT

    import vistkit.metrics.rovist_vg as vg

    a = _rovist_assets(tmp_path)
    regions = {"1": [("[1, 2, 30, 40]", (1.0, 2.0, 30.0, 40.0))], "2": [("whole_img", None)]}
    (a["photos"] / "1_[1, 2, 30, 40].jpg").write_bytes(b"\xff\xd8junk")
    metric = vg.RovistVG(
        checkpoint=a["ckpt"], glove=a["glove"], idf=a["idf"], images=a["photos"], regions=regions,
        vit_config=TINY_VIT, tagger="spacy", trust_checkpoint=True, sentences="source",
    )
    stories = StorySet(
        [
            Story("bad", "the cat drank coffee .", sentences=("the cat drank coffee .",), photo_ids=("1", "2")),
            Story("ok", "the cat drank coffee .", sentences=("the cat drank coffee .",), photo_ids=("2", "2")),
        ]
    )
    res = metric.score(stories)
    assert "1_[1, 2, 30, 40].jpg is not an image Pillow can identify" in res.excluded["bad"]
    assert "ok" not in res.excluded and not math.isnan(res.item_scores[1])


def _rovist_assets(root: Path) -> dict[str, Path]:
    """A tiny RoViST-VG checkpoint, GloVe and IDF (as tests/test_rovist_vg.py builds them) and photos 1, 2."""
    import json

    from test_rovist_vg import tiny_checkpoint

    ckpt = tiny_checkpoint(root)
    rng = np.random.default_rng(0)
    glove = root / "glove.tiny.50d.txt"
    vectors = {w: " ".join(f"{x:.5f}" for x in rng.normal(size=50)) for w in ["cat", "coffee", "unk"]}
    glove.write_text("".join(f"{w} {v}\n" for w, v in vectors.items()))
    idf = root / "idf.json"
    idf.write_text(json.dumps({"cat": 2.0, "coffee": 1.5}))
    photos = root / "photos"
    photos.mkdir()
    for i in (1, 2):
        _photo(20 + i).save(photos / f"{i}.jpg")
    return {"ckpt": ckpt, "glove": glove, "idf": idf, "photos": photos}


@pytest.mark.slow
def test_thin_crops_through_clip_processor(tiny_clip: Path):
    """Crops 1 or 3 pixels high are (1|3, W, 3) arrays, which transformers 4's numpy processor took for
    channels-first; the channels are now given, and such crops encode to unit vectors."""
    from vistkit.metrics.clipscore import load_clip

    enc = load_clip(str(tiny_clip))
    rng = np.random.default_rng(5)
    for h in (1, 3):
        row = Image.fromarray(rng.integers(0, 256, (h, 40, 3), dtype=np.uint8))
        v = enc.encode_images([row])
        assert v.shape == (1, enc.dim) and np.isfinite(v).all()
        assert float(np.linalg.norm(v[0])) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_one_photo_in_memory_at_a_time(tiny_clip: Path, folder: Path, monkeypatch: pytest.MonkeyPatch):
    """A folder of huge photos: each photo is read when a story needs it and dropped once encoded (at most one
    decoded photo alive at any read), never the folder at once; only embeddings are kept."""
    import weakref

    import vistkit.data.images as images
    from vistkit.metrics.clipscore import ClipScore

    alive: list[weakref.ref] = []
    most = [0]
    real = images.read_rgb

    def counting(path: Path) -> object:
        most[0] = max(most[0], sum(r() is not None for r in alive))
        im = real(path)
        alive.append(weakref.ref(im))
        return im

    monkeypatch.setattr(images, "read_rgb", counting)
    ClipScore(images=folder, clip_model=str(tiny_clip), sentences="source").score(
        _stories(["good", "also", "trunc", "dir"])
    )
    assert len(alive) == 3 and most[0] == 0  # photos 1, 2, 3 read once each, none alive at the next read


def test_photo_map_story_ids_are_read_as_the_stories_readers_read_them(tmp_path: Path):
    """Spaces around a photo map's story ids were kept, so " 7" gave story 7 no photos (the story readers drop
    them since r10); two keys that are one id once stripped are refused."""
    from vistkit.data.images import attach_photos, load_photo_map

    p = tmp_path / "photos.json"
    p.write_text(json.dumps({" 7 ": ["11", " 12"], "8": ["13"]}))
    mapping = load_photo_map(p)
    assert mapping == {"7": ("11", "12"), "8": ("13",)}
    [story] = attach_photos(StorySet([Story("7", "a dog .")]), mapping)
    assert story.photo_ids == ("11", "12")
    p.write_text(json.dumps({"7": ["11"], " 7": ["12"]}))
    with pytest.raises(InputError, match=r"the story ids '7' and ' 7' are one id \('7'\) once the spaces"):
        load_photo_map(p)
