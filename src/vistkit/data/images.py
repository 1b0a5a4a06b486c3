"""Photos and image regions for the grounding metrics (GROOViST, RoViST-VG, CLIPScore).

- Photos: a folder of ``<photo_id>.jpg`` (also ``.jpeg``, ``.png``, ``.gif``, ``.webp``, ``.bmp``, ``.tif``; any
  case of the suffix; the VIST photo id, e.g. ``1741642.jpg``).
- Regions: a CSV in the shape of RoViST's / GROOViST's ``vist_entities.csv`` (and GROOViST's
  ``data/aesop_entities.csv``): one row per detected box with at least the columns ``image_id`` and ``bbox``,
  where ``bbox`` is ``"[x1, y1, x2, y2]"`` in pixels (top-left / bottom-right corners). Rows are used in file
  order and the official scorers keep the first 10 per image (``B=10``). ``bbox`` may also be ``whole_img``
  (RoViST's name for the whole photo).

  The official scorers read pre-cut crops named ``<image_id>_<bbox>.jpg`` (the bbox string verbatim); when
  such a file is in the photo folder we use it, otherwise we cut the box from ``<image_id>.jpg`` (Pillow
  rounds the corners to whole pixels, as the crops were cut).
- Without a regions CSV (or for a photo the CSV has no row for), the whole photo is the only region. The
  official code would instead give every phrase cosine 0 for such an image (its exception path); we say which
  photos fell back in the score's ``extra``.
- Reading: Pillow opens ``.jpg`` / ``.jpeg`` / ``.png`` / ``.gif`` / ``.webp`` / ``.bmp`` / ``.tif`` / ``.tiff``
  (any of these in upper case too) and converts to RGB as the official code paths do (``Image.open(...)`` then
  ``.convert("RGB")``): an EXIF orientation is not applied (official CLIPScore and GROOViST do not transpose),
  alpha is dropped, an animated GIF gives its first frame. One departure: a 16-bit greyscale photo is scaled to
  8 bits (Pillow's conversion would clip it to white). A file that cannot be read (truncated, empty, not an
  image, over Pillow's decompression-bomb limit of ``2 * Image.MAX_IMAGE_PIXELS`` pixels), a pre-cut crop that
  cannot be read, and a box that lies outside its photo or is under one pixel once rounded raise `PhotoError`:
  the metrics exclude the stories that need that photo, with this reason. Photos are read one at a time, when a
  story needs them (never the whole folder at once).
- A photo map (``{story_id: [photo ids]}``, e.g. ../shared/data/ke-vist/storyid2images.json or GROOViST's
  ``vist_sid_2_iids.json``) gives photos to stories from a format without them (dHM's ``{story_id: text}``).
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import stat
import warnings
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageStore",
    "PhotoError",
    "Region",
    "attach_photos",
    "load_photo_map",
    "parse_bbox",
    "photo_map_from",
    "read_regions",
    "read_rgb",
]

_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff")
IMAGE_SUFFIXES = _SUFFIXES + tuple(x.upper() for x in _SUFFIXES)
WHOLE = "whole_img"

Box = tuple[float, float, float, float]
Region = tuple[str, Box | None]  # (bbox text as in the CSV, box or None for the whole photo)

#: a box corner further than this from the origin is no photo's (the largest JPEG is 65,535 pixels wide)
MAX_COORDINATE = 1_000_000
# Each piece matches one way only: ``\d+\.?\d*`` (a run of digits split any way between ``\d+`` and ``\d*``) and
# ``\s*[\[(]?\s*`` (spaces split any way between the two ``\s*``) made a failing match quadratic in a long cell
# (a bbox of 4,000 digits took 0.8 s, one of 100,000 minutes); the same texts match, with the same groups.
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_BBOX = re.compile(rf"^\s*(?:[\[(]\s*)?({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*(?:[\])]\s*)?$")


def parse_bbox(text: str, *, where: str = "") -> Box | None:
    """``"[x1, y1, x2, y2]"`` -> floats; ``whole_img`` -> ``None`` (the whole photo)."""
    if text.strip() == WHOLE:
        return None
    m = _BBOX.match(text)
    if not m:
        raise InputError(f"{where}bbox {text!r} is not '[x1, y1, x2, y2]' (or {WHOLE})")
    x1, y1, x2, y2 = (float(g) for g in m.groups())
    if not all(math.isfinite(v) and abs(v) <= MAX_COORDINATE for v in (x1, y1, x2, y2)):
        raise InputError(
            f"{where}bbox {text!r} has a coordinate beyond any photo (more than {MAX_COORDINATE:,} pixels)"
        )
    if x2 <= x1 or y2 <= y1:
        raise InputError(f"{where}bbox {text!r} is empty: it needs x2 > x1 and y2 > y1")
    return (x1, y1, x2, y2)


def read_regions(path: str | Path) -> dict[str, list[Region]]:
    """``image_id -> [(bbox text, box), ...]`` in file order, from a ``vist_entities.csv``-shaped file."""
    from vistkit.data.readers import is_input_file, missing_input, open_csv, shown_names

    p = Path(path)
    if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
        raise missing_input(p, "regions file (a CSV with columns image_id,bbox)")

    out: dict[str, list[Region]] = {}
    with open_csv(p, delimiter=",") as f:
        cols = f.fieldnames
        if "image_id" not in cols or "bbox" not in cols:
            raise InputError(f"{p}: the regions CSV needs the columns image_id and bbox (it has {shown_names(cols)})")
        for line, row in f:
            iid = row["image_id"].strip()
            text = row["bbox"].strip()
            if not iid or not text:
                raise InputError(f"{p}, line {line}: empty image_id or bbox")
            out.setdefault(iid, []).append((text, parse_bbox(text, where=f"{p}, line {line}: ")))
    return out


def load_photo_map(path: str | Path) -> dict[str, tuple[str, ...]]:
    """``{story_id: [photo ids in story order]}`` from a JSON file."""
    from vistkit.data.readers import is_input_file, load_json, missing_input

    p = Path(path)
    if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
        raise missing_input(p, "photo map (a JSON object story_id -> [photo ids])")

    return photo_map_from(load_json(p), str(p))


def photo_map_from(data: Any, where: str) -> dict[str, tuple[str, ...]]:
    """``{story_id: (photo ids in story order)}`` from a mapping read from JSON or given in Python (``where``
    names it in errors): each story's photos a list (or tuple) of ids, each id checked as the readers check
    them; a text in place of the list would be read letter by letter, so it is refused."""
    from vistkit.data.readers import id_text, photo_id_text
    from vistkit.data.story import clean_id

    if not isinstance(data, dict):
        raise InputError(f"{where}: a photo map must be a JSON object story_id -> [photo ids]")
    # each id as the stories' readers take it and `Story` compares it: spaces around a story id dropped (" 45530"
    # is story 45530), Unicode NFC ("cafe\u0301" is "café"), an invisible character refused; a photo id checked
    # (str(None) would look for the photo "None")
    out: dict[str, tuple[str, ...]] = {}
    given: dict[str, Any] = {}
    for k, v in data.items():
        try:
            key = clean_id(id_text(k, where, "a story id"), "story_id", str(k))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if not isinstance(v, list | tuple):
            raise InputError(
                f"{where}: story {k!r}: its photos must be a list of photo ids in story order, not "
                f"{type(v).__name__} {str(v)[:40]!r}"
            )
        if key in given:
            raise InputError(
                f"{where}: the story ids {given[key]!r} and {k!r} are one id ({key!r}) once the spaces around them are "
                "dropped and they are normalised to Unicode NFC; keep one"
            )
        given[key] = k
        out[key] = tuple(photo_id_text(x, f"{where}: story {k!r}", j) for j, x in enumerate(v, start=1))
    return out


def attach_photos(stories: StorySet, photo_map: dict[str, tuple[str, ...]] | None) -> StorySet:
    """Stories with their photos filled in from ``photo_map`` (by story id) where the source had none.

    One warning names the stories without photo ids that the map has no entry for (a map keyed by album, by
    sequence, or by ids written ``45530.0``: they are left out for want of photos, though a map was given), and
    one the stories whose own photo ids the map contradicts (their own are used). Each is said once for the same
    stories and map (every grounded metric of ``score -m clipscore,groovist --photos`` fills them in)."""
    if not photo_map:
        return stories
    out: list[Story] = []
    unmatched: list[str] = []
    bare = 0
    differ: list[Story] = []
    for s in stories:
        if not s.photo_ids:
            bare += 1
            if s.story_id in photo_map and not photo_map[s.story_id]:  # an empty list: no photos still
                unmatched.append(s.story_id)
            elif s.story_id in photo_map:
                s = replace(s, photo_ids=photo_map[s.story_id])
            else:
                unmatched.append(s.story_id)
        elif s.story_id in photo_map and photo_map[s.story_id] != s.photo_ids:
            differ.append(s)
        out.append(s)
    messages = _photo_map_warnings(unmatched, bare, differ, photo_map, stories.source)
    # the same stories (this very object) given a map that says the same: said once
    global _LAST_SAID
    if messages and not (_LAST_SAID is not None and _LAST_SAID[0] is stories and _LAST_SAID[1] == messages):
        from vistkit.errors import warn

        for message in messages:
            warn(message)
    _LAST_SAID = (stories, messages) if messages else None
    return StorySet(out, source=stories.source)


#: the stories and warnings `attach_photos` said last (a second metric of the same run says nothing again); the
#: stories are held, not their ``id``, which another set could take once they are freed
_LAST_SAID: tuple[StorySet, list[str]] | None = None


def _photo_map_warnings(
    unmatched: list[str],
    bare: int,
    differ: list[Story],
    photo_map: dict[str, tuple[str, ...]],
    source: str | None,
) -> list[str]:
    """`attach_photos`' warnings: stories without photo ids the map misses, stories the map contradicts (``source``,
    the stories' file, named: ``distance`` fills in the human and the model stories)."""
    from vistkit.data.story import sequence_key

    def shown(text: str) -> str:
        text = text if text.isprintable() else repr(text)[1:-1]
        return text if len(text) <= 60 else text[:57] + "..."

    where = f" in {shown(source)}" if source else ""
    out: list[str] = []
    empty = [sid for sid in unmatched if sid in photo_map]  # listed with no photos
    unmatched = [sid for sid in unmatched if sid not in photo_map]
    if unmatched:
        example = next(iter(photo_map))
        out.append(
            f"{len(unmatched):,} of the {bare:,} stories without photo ids{where} have no entry in the photo map "
            f"(e.g. story '{shown(unmatched[0])}'; the map's ids look like '{shown(example)}'), so they have no "
            "photos and are left out; key the photo map by the stories' ids"
        )
    if empty:
        stories = "1 story" if len(empty) == 1 else f"{len(empty):,} stories"
        has = "has" if len(empty) == 1 else "have"
        out.append(
            f"{stories} without photo ids{where} {has} an empty list in the photo map (e.g. story "
            f"'{shown(empty[0])}'), so no photos and {'is' if len(empty) == 1 else 'are'} left out; give the photo "
            "ids in story order"
        )
    if differ:
        s = differ[0]
        stories = "1 story" if len(differ) == 1 else f"{len(differ):,} stories"
        has = "has" if len(differ) == 1 else "have"
        out.append(
            f"{stories}{where} {has} photo ids of their own that differ from the photo map's (e.g. story "
            f"'{shown(s.story_id)}': {shown(sequence_key(s.photo_ids))} in the file, "
            f"{shown(sequence_key(photo_map[s.story_id]))} in the map); a story's own photo ids are used, the map "
            "only fills in stories without them"
        )
    return out


class PhotoError(InputError):
    """A photo (or a pre-cut crop, or a box of it) that is not usable: one sentence naming the file. The metrics
    exclude the stories that need it, with this reason, and go on (the sentence has no ``": "`` or ``"; "`` after
    the file's name, where ``distance`` cuts a reason into its summary)."""


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise MissingDependencyError("reading photos needs Pillow: pip install 'vistkit[grounding]'") from None
    return Image


class ImageStore:
    """Photos from a folder and their regions (first ``max_regions`` boxes of each photo), loaded on demand.

    ``regions_of(photo_id)`` returns RGB Pillow images: the crops, or ``[whole photo]`` when there are no
    boxes.
    """

    def __init__(
        self,
        images: str | Path,
        *,
        regions: str | Path | dict[str, list[Region]] | None = None,
        max_regions: int = 10,
    ) -> None:
        from vistkit.data.readers import check_input_folder

        self.root = check_input_folder(images, "photo folder", "give --images DIR holding <photo_id>.jpg files")
        if max_regions < 1:
            raise InputError(f"max_regions must be at least 1, not {max_regions}")
        self.max_regions = max_regions
        self.regions_file: str | None = None
        self.regions_name = "the regions given"  # for messages: the regions file's name
        if regions is None:
            self.boxes: dict[str, list[Region]] = {}
        elif isinstance(regions, dict):
            self.boxes = regions
            self.regions_file = "given"
        else:
            self.boxes = read_regions(regions)
            self.regions_name = f"the regions file {regions}"
            from vistkit.data.readers import open_input, split_member

            digest = hashlib.sha256()
            with open_input(split_member(regions)[0])[0] as fh:  # an archive member: the archive's bytes
                while block := fh.read(1 << 20):
                    digest.update(block)
            self.regions_file = digest.hexdigest()[:12]
        self.whole_fallback: set[str] = set()
        self._precut: bool | None = None
        self._mixed_case: dict[tuple[str, str], str] | None = None  # (id, lower-case suffix) -> file name

    # -- lookup --------------------------------------------------------------------------------------------
    def path_of(self, photo_id: str) -> Path | None:
        """The photo's file in the folder (the first of `IMAGE_SUFFIXES` that is a file, else one with a mixed-case
        suffix), or None (also for an id that is no file name: with a path separator, NUL, ``.`` / ``..``, or too
        long)."""
        if not _file_name(photo_id):
            return None
        for suffix in IMAGE_SUFFIXES:
            p = self.root / f"{photo_id}{suffix}"
            if _is_file(p):
                return p
        return self._mixed_case_path(photo_id)

    def _mixed_case_path(self, photo_id: str) -> Path | None:
        """``<id>.Jpg``, ``<id>.jpG``: a suffix in mixed case (some cameras and Windows tools write them). One scan
        of the folder, on the first photo that no exact suffix finds; the id itself must match exactly."""
        if self._mixed_case is None:
            found: dict[tuple[str, str], str] = {}
            try:
                with os.scandir(self.root) as entries:
                    for entry in entries:
                        stem, dot, suffix = entry.name.rpartition(".")
                        if dot and f".{suffix.lower()}" in _SUFFIXES:
                            found.setdefault((stem, f".{suffix.lower()}"), entry.name)
            except OSError:
                pass  # an unreadable folder: the photo is "not found", with the reason `why_missing` gives
            self._mixed_case = found
        for suffix in _SUFFIXES:
            name = self._mixed_case.get((photo_id, suffix))
            if name is not None and _is_file(self.root / name):
                return self.root / name
        return None

    def has(self, photo_id: str) -> bool:
        """Whether the folder has the photo, or (official layout) a pre-cut crop of its first region."""
        if self.path_of(photo_id) is not None:
            return True
        # pre-cut crops only (the official layout)
        return any(self._crop_file(photo_id, text) is not None for text, _ in self.boxes.get(photo_id, [])[:1])

    def missing(self, photo_ids: Iterable[str]) -> list[str]:
        """The photos of ``photo_ids`` that are not in the folder."""
        return [p for p in photo_ids if not self.has(p)]

    def why_missing(self, photo_id: str) -> str | None:
        """Why a photo the folder lacks is not there, when something stands in its name (a folder, a link to
        nothing, a FIFO or device named ``<id>.jpg``; an id that is no file name), or None."""
        if not _file_name(photo_id):
            return f"the photo id {photo_id!r} is not a file name (no '/', '\\' or NUL, not '.' or '..')"
        for suffix in IMAGE_SUFFIXES:
            p = self.root / f"{photo_id}{suffix}"
            try:
                mode = os.lstat(p).st_mode
                if stat.S_ISLNK(mode):
                    mode = os.stat(p).st_mode
            except FileNotFoundError:
                if p.is_symlink():
                    return f"{p} is a link to nothing"
                continue
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    return f"the photo id {photo_id[:40]!r}... is too long for a file name"
                return f"{p} cannot be looked at ({exc.strerror or exc})"
            if stat.S_ISDIR(mode):
                return f"{p} is a folder, not a photo"
            if not stat.S_ISREG(mode):
                return f"{p} is not a regular file (a FIFO, a device or a socket), not a photo"
        named = self.root / photo_id
        if photo_id.endswith(IMAGE_SUFFIXES) and _is_file(named):
            return f"{named} is there, but photo ids name no suffix (give {Path(photo_id).stem!r})"
        return None

    def _crop_file(self, photo_id: str, bbox_text: str) -> Path | None:
        if not _file_name(photo_id):
            return None
        p = self.root / f"{photo_id}_{bbox_text}.jpg"
        return p if _is_file(p) else None

    # -- loading -------------------------------------------------------------------------------------------
    def image(self, photo_id: str) -> Any:
        """The photo as an RGB Pillow image; `PhotoError` when it is missing or cannot be read."""
        p = self.path_of(photo_id)
        if p is None:
            why = self.why_missing(photo_id)
            raise PhotoError(
                why
                or f"photo {photo_id} is not in {self.root} (expected {photo_id}.jpg, or .jpeg, .png, .gif, .webp, "
                ".bmp, .tif, .tiff)"
            )
        return read_rgb(p)

    def regions_of(self, photo_id: str) -> list[Any]:
        """The first ``max_regions`` regions of a photo as RGB images (the whole photo when it has no
        boxes)."""
        boxes = self.boxes.get(photo_id, [])[: self.max_regions]
        if not boxes:
            if self.boxes:
                self.whole_fallback.add(photo_id)
            return [self.image(photo_id)]
        full = None
        out = []
        for text, box in boxes:
            pre = self._crop_file(photo_id, text)
            if pre is not None:
                out.append(read_rgb(pre))
                continue
            if full is None:
                full = self.image(photo_id)
            out.append(full if box is None else _cut(full, box, f"photo {photo_id}", text))
        return out

    def describe(self) -> str:
        """For signatures: where regions come from (``+precut`` when the folder holds pre-cut crops of them: the
        official layout's JPEG crops give other numbers than boxes cut from the photos)."""
        if self.regions_file is None:
            return "whole"
        return f"csv-{self.regions_file}-first{self.max_regions}" + ("+precut" if self._has_precut() else "")

    def _has_precut(self) -> bool:
        """Whether any file of the folder is a pre-cut crop ``<photo>_<bbox>.jpg`` of a box used (one scan,
        kept)."""
        if self._precut is None:
            names = {f"{iid}_{text}.jpg" for iid, rows in self.boxes.items() for text, _ in rows[: self.max_regions]}
            self._precut = False
            if names:
                try:
                    with os.scandir(self.root) as entries:
                        self._precut = any(e.name in names for e in entries)
                except OSError:
                    pass
        return self._precut


def _file_name(photo_id: str) -> bool:
    """Whether a photo id can name a file of the folder (no path separator or NUL, not ``.`` / ``..``): an id
    ``../x`` read a photo outside the folder."""
    return not ("/" in photo_id or "\\" in photo_id or "\0" in photo_id or photo_id in ("", ".", ".."))


def _is_file(p: Path) -> bool:
    """A regular file (links followed); False for anything else, a name too long included (``is_file`` raised
    ``OSError: File name too long``)."""
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except (OSError, ValueError):
        return False


def _rgb(im: Any) -> Any:
    """An opened image as RGB, as the official code paths read photos (``Image.open(path).convert("RGB")``).

    No ``ImageOps.exif_transpose``: official CLIPScore (jmhessel/clipscore) and GROOViST (akskuchi/groovist) never
    apply an EXIF orientation, so a photo whose EXIF says "rotate" is scored as stored, as theirs. Alpha is dropped
    and an animated GIF gives its first frame, as theirs. The one departure: 16-bit greyscale (``I;16``), which
    Pillow's RGB conversion clips to white above 255, is scaled to 8 bits (``v / 257``) first.
    """
    if im.mode.startswith("I;16") or (im.mode == "I" and im.format == "PNG"):  # older Pillow: 16-bit PNG as I
        import numpy as np

        Image = _pil()
        eight = np.rint(np.asarray(im, dtype=np.float64) / 257.0).astype(np.uint8)
        return Image.fromarray(eight, "L").convert("RGB")
    return im.convert("RGB")


def read_rgb(path: Path) -> Any:
    """The image file at ``path`` as RGB (`_rgb`), or one `PhotoError` sentence naming the file."""
    Image = _pil()
    try:
        with warnings.catch_warnings():
            # over MAX_IMAGE_PIXELS (but under twice it) Pillow warns and reads: we read too (one photo at a time)
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            warnings.filterwarnings("ignore", message="Palette images with Transparency")
            with Image.open(path) as im:
                return _rgb(im)
    except Image.DecompressionBombError as exc:
        sizes = re.findall(r"\d+", str(exc))
        found = f"{int(sizes[0]):,} pixels, over" if len(sizes) >= 2 else "over"
        raise PhotoError(
            f"{path} is {found} Pillow's limit for one image (a decompression bomb? shrink it, or raise "
            "PIL.Image.MAX_IMAGE_PIXELS in Python if you trust it)"
        ) from None
    except Image.UnidentifiedImageError:
        from vistkit.models.checkpoints import lfs_pointer_problem

        if pointer := lfs_pointer_problem(path):  # a photo folder cloned without git-lfs
            raise PhotoError(pointer) from None
        try:
            empty = path.stat().st_size == 0
        except OSError:
            empty = False
        what = (
            "is empty"
            if empty
            else "is not an image Pillow can identify (a text or another format under an image name?)"
        )
        raise PhotoError(f"{path} {what}") from None
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, ValueError, EOFError, ... on bad files
        raise PhotoError(f"{path} cannot be read as an image ({str(exc) or type(exc).__name__})") from None


def _cut(full: Any, box: Box, what: str, text: str) -> Any:
    """The box cut from the photo as Pillow's ``crop`` cuts it (corners rounded to whole pixels; parts outside
    the photo black), or `PhotoError` for a box wholly outside the photo or under one pixel once rounded (a
    black crop, or a zero-size one CLIP cannot read)."""
    x1, y1, x2, y2 = (round(v) for v in box)  # Pillow's crop rounds the same way
    width, height = full.size
    if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
        raise PhotoError(
            f"{what} is {width}x{height} pixels and its box {text} lies outside it (regions of other photos, or "
            "of another size of them?)"
        )
    if x2 <= x1 or y2 <= y1:
        raise PhotoError(f"the box {text} of {what} is under one pixel once rounded to whole pixels")
    return full.crop(box)
