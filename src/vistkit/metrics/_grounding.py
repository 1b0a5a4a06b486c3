"""What the metrics that score a story against its photos share (clipscore, groovist, rovist-vg).

`PhotoMetric` keys by story (several human stories share one photo sequence), fills in photos from a photo
map before scoring, checks that the photos are there, and caches the encoded regions of each photo.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError
from vistkit.metrics.base import Metric
from vistkit.models.runtime import ArrayCache

__all__ = ["PhotoMetric", "image_store", "with_photo_map"]


def image_store(images: Any, regions: Any = None, max_regions: int = 10) -> Any:
    """An `ImageStore` from a folder (or the store itself)."""
    from vistkit.data.images import ImageStore

    if images is None:
        return None
    if isinstance(images, ImageStore):
        return images
    return ImageStore(images, regions=regions, max_regions=max_regions)


def with_photo_map(stories: StorySet, photos: Any) -> StorySet:
    """Fill in photos from a ``{story_id: [photo ids]}`` map (a dict, or the path of a JSON file), checked as
    `load_photo_map` checks the file."""
    if photos is None:
        return stories
    import os

    from vistkit.data.images import attach_photos, load_photo_map, photo_map_from

    if isinstance(photos, str | os.PathLike):
        mapping = load_photo_map(os.fspath(photos))
    else:
        mapping = photo_map_from(photos, "photos")
    return attach_photos(stories, mapping)


class PhotoMetric(Metric):
    """A metric that reads the story photos; the subclass calls `_use_photos` in its ``__init__``."""

    needs_images: ClassVar[bool] = True
    #: several human stories share a photo sequence: one item per story
    default_keying: ClassVar[Keying | None] = Keying.STORY
    #: how to give the photos, for the error raised when they are missing
    images_usage: ClassVar[str] = "--images DIR [--regions CSV] (Python: images=DIR)"
    #: how to give a photo map, for the exclusion reason of a story without photo ids
    photo_map_usage: ClassVar[str] = "--photos FILE, a JSON object story_id -> [photo ids], or photos= in Python"

    store: Any
    photos: Any

    def _use_photos(self, images: Any, photos: Any, regions: Any = None, max_regions: int = 10) -> None:
        """Set the image store (from a folder), the photo map and an empty (bounded) region cache."""
        self.store = image_store(images, regions, max_regions)
        if self.store is not None and self.store.regions_file == "given":
            # regions given as a table: its hash, as a CSV's (any two tables were "given" in the signature)
            import json

            from vistkit.metrics._options import short_hash

            table = json.dumps(self.store.boxes, sort_keys=True, default=str)
            self.store.regions_file = "given-" + short_hash(table)
        self.photos = photos
        self._photo_map: dict[str, tuple[str, ...]] | None = None  # ``photos`` read, for `_photos_filled`
        #: set by the Ray engine while this object scores one shard of a run: the photos scored without regions are
        #: said once for the whole run (`fallback_message`), not once per shard
        self.shard_of_a_run = False
        self._region_cache = ArrayCache()  # photo id -> its regions' embeddings, least recently used out first
        self._photo_errors: dict[str, str] = {}  # photo id -> why it cannot be read

    @abstractmethod
    def _encode_images(self, images: Sequence[Any]) -> np.ndarray:
        """Embeddings of RGB images, one row per image."""

    def prepare_hypotheses(self, hypotheses: StorySet) -> StorySet:
        """The stories with the photos of the photo map (``photos``) filled in."""
        return with_photo_map(hypotheses, self.photos)

    def _photos_filled(self, items: Sequence[Any]) -> list[Any]:
        """``items`` with the photos of the photo map (``photos``) filled in where a story has none, as
        `prepare_hypotheses` fills them in for `score` (said there): items handed to `score_items` directly (a
        streamed run, `score_stream`) had none, and every story was left out "give a photo map" though one was
        given."""
        if self.photos is None:
            return list(items)
        if self._photo_map is None:
            import os

            from vistkit.data.images import load_photo_map, photo_map_from

            photos = self.photos
            is_path = isinstance(photos, str | os.PathLike)
            self._photo_map = load_photo_map(os.fspath(photos)) if is_path else photo_map_from(photos, "photos")
        from dataclasses import replace

        out = []
        for item in items:
            story = item.hypothesis
            if not story.photo_ids and self._photo_map.get(story.story_id):
                item = replace(item, hypothesis=replace(story, photo_ids=tuple(self._photo_map[story.story_id])))
            out.append(item)
        return out

    def _check_ready(self) -> None:
        if self.store is None:
            raise InputError(f"{self.name} needs the story photos: pass {self.images_usage}")

    def _photo_problem(self, story: Story) -> str | None:
        """Why the story's photos cannot be read (no photo ids, photos not in the folder), or None."""
        if not story.photo_ids:
            if self.photos is not None:
                usage = self.photo_map_usage
                return f"the story has no photo ids and the photo map given has no photos for it ({usage})"
            return f"the story has no photo ids (give a photo map with {self.photo_map_usage})"
        missing = self.store.missing(story.photo_ids)
        if missing:
            why = [w for p in missing if (w := self.store.why_missing(p))]
            found = f"photo(s) {', '.join(map(repr, missing))} not found in {self.store.root}"
            return found + (f" ({', '.join(why)})" if why else "")
        # read (and encode) the photos now: one that cannot be read excludes the stories that need it, and the
        # others go on (whatever their order)
        from vistkit.data.images import PhotoError

        for photo_id in story.photo_ids:
            if photo_id in self._photo_errors:
                return self._photo_errors[photo_id]
            try:
                self._load_photo(photo_id)
            except PhotoError as exc:
                self._photo_errors[photo_id] = str(exc)
                return str(exc)
        return None

    def _whole_photo_fallback(self, items: Sequence[Any], excluded: Mapping[str, str]) -> list[str]:
        """The photos of this call's scored stories that the regions file has no row for (each scored as one
        region, the whole photo), said in one warning: a regions file keyed by other ids (``1741642.0``,
        ``1741642.jpg``) matched no photo, and every story was scored on whole photos without a word."""
        if self.store is None or not self.store.whole_fallback:
            return []
        used = list(
            dict.fromkeys(p for i in items if i.item_id not in excluded for p in i.hypothesis.photo_ids)
        )
        fell = [p for p in used if p in self.store.whole_fallback]
        if fell and not self.shard_of_a_run:
            from vistkit.errors import warn

            warn(self.fallback_message(fell, len(used)))
        return sorted(fell)

    def fallback_message(self, fell: Sequence[str], used: int) -> str:
        """The warning for ``fell``, the photos of ``used`` scored ones that the regions file has no row for."""

        def shown(text: str) -> str:
            text = text if text.isprintable() else repr(text)[1:-1]
            return text if len(text) <= 40 else text[:37] + "..."

        example = next(iter(self.store.boxes))
        return (
            f"{self.name}: {len(fell):,} of the {used:,} photos scored have no row in "
            f"{self.store.regions_name} (e.g. photo '{shown(fell[0])}'; its image ids look like "
            f"'{shown(example)}'), so each was scored as one region, the whole photo; key the regions by the "
            "photos' ids (image_id) if that is not meant"
        )

    def _load_photo(self, photo_id: str) -> None:
        """Read and encode what the metric uses of a photo (its regions; clipscore: the whole photo), cached."""
        self._regions(photo_id)

    def _regions(self, photo_id: str) -> np.ndarray:
        """The encoded regions of a photo, one row per region (cached)."""
        found = self._region_cache.get(photo_id)
        if found is None:
            found = self._region_cache.put(photo_id, self._encode_images(self.store.regions_of(photo_id)))
        return found
