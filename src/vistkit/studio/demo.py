"""The studio demo: a small study from data the package ships, on any machine, without network.

Stories: the 50 dHM sample stories (human VIST stories and LLaVA-NeXT's, CC BY 4.0; see
``vistkit/resources/demo/SOURCE.md``). Photos: the shipped stories carry no photo ids and the Flickr photos are
not shipped, so each item shows five stand-in photos: scikit-image's bundled public-domain / CC0 sample photos
when scikit-image is installed, otherwise generated placeholder images. They are stand-ins: they do not show
what the stories tell.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import struct
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

from vistkit.errors import InputError, warn

#: scikit-image sample photos that are public domain or CC0 (per their docstrings in skimage.data).
SKIMAGE_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "hubble_deep_field.jpg",
    "camera.png",
)


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A tiny solid-colour PNG (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height, 9)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def stand_in_photos(folder: Path) -> tuple[list[str], str]:
    """Write the stand-in photos into ``folder``; returns their photo ids and where they came from."""
    from vistkit.data.output import copy_file, write_bytes

    folder.mkdir(parents=True, exist_ok=True)
    try:
        import skimage.data

        src = Path(skimage.data.__file__).parent
        found = [n for n in SKIMAGE_PHOTOS if (src / n).is_file()]
    except ImportError:
        found = []
    if len(found) >= 5:
        ids = []
        for name in found:  # photo ids of letters and digits only (hubble_deep_field -> hubbledeepfield): see plan
            pid = "".join(ch for ch in Path(name).stem if ch.isascii() and ch.isalnum())
            copy_file(src / name, folder / f"{pid}{Path(name).suffix}", force=True)
            ids.append(pid)
        return ids, "scikit-image sample photos (public domain / CC0), stand-ins"
    colours = [(200, 90, 80), (80, 150, 200), (90, 170, 110), (210, 180, 70), (150, 110, 190), (120, 120, 120)]
    ids = []
    for n, c in enumerate(colours, start=1):
        write_bytes(folder / f"placeholder{n}.png", _png(64, 48, c), force=True)
        ids.append(f"placeholder{n}")
    return ids, "generated placeholder images"


def _read_links(links_file: Path, folder: Path) -> dict[str, Any]:
    """The demo's saved links (``links.json``), checked: a file emptied, cut short or edited by hand is one
    sentence that says to remove the folder (the tokens it held cannot be recovered from the study)."""
    import json

    try:
        saved = json.loads(links_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or "not the JSON the demo writes"
        saved, problem = None, f"cannot be read ({why})"
    else:
        problem = "is not the links file the demo writes"
    ok = (
        isinstance(saved, dict)
        and isinstance(saved.get("paths"), list)
        and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in saved["paths"]
        )
        and isinstance(saved.get("admin_path"), str)
        and isinstance(saved.get("task"), str)
        and isinstance(saved.get("items"), int)
        and isinstance(saved.get("photos"), str)
    )
    if not ok:
        raise InputError(
            f"{links_file} {problem}, so the demo's links are lost; remove the folder (rm -r {folder}) or choose "
            "another --dir"
        )
    assert isinstance(saved, dict)
    return saved


def _warn_ignored_on_reuse(folder: Path, study: Path, saved: dict[str, Any], asked: dict[str, Any]) -> None:
    """One warning naming the options asked (not None) that the demo reused from ``folder`` was built otherwise
    with: it is served as it is, so they would otherwise be ignored without a word."""
    from vistkit.studio import db

    asked = {k: v for k, v in asked.items() if v is not None}
    if not asked:
        return
    built: dict[str, Any] = {"--task": saved["task"], "--items": saved["items"], "--annotators": len(saved["paths"])}
    if "--per-item" in asked:
        try:
            st = db.open_study(study)
        except Exception:  # a study that cannot be opened: serving it says so, in one sentence
            built["--per-item"] = None
        else:
            try:
                built["--per-item"] = st.setting("per_item")
            finally:
                st.engine.dispose()
    ignored = [f"{k} {v}" for k, v in asked.items() if k in built and built[k] is not None and built[k] != v]
    if not ignored:
        return
    words = [f"{saved['task']}", f"{saved['items']} items", f"{len(saved['paths'])} annotator links"]
    if built.get("--per-item") is not None:
        words.append(f"{built['--per-item']} annotators per unit")
    one = len(ignored) == 1
    warn(
        f"{folder} holds a demo built earlier ({', '.join(words)}), which is served as it is: "
        f"{' and '.join(ignored)} {'is' if one else 'are'} ignored; for a new demo remove the folder "
        f"(rm -r {shlex.quote(str(folder))}) or choose another --dir"
    )


def build_demo(
    folder: str | Path,
    *,
    task: str | None = None,
    items: int | None = None,
    annotators: int | None = None,
    per_item: int | None = None,
    base_url: str = "http://127.0.0.1:8000",
) -> dict[str, Any]:
    """Build (or reuse) the demo study in ``folder``; returns its links. Reusing keeps the judgements so far.

    ``task``, ``items``, ``annotators`` and ``per_item`` left None are the defaults of a new demo (rank, 10, 3, 3);
    a reused demo that was built otherwise than asked is one warning naming the options it ignores."""
    import json

    from vistkit.data.readers import read_stories
    from vistkit.studio import MAX_INVITES, MAX_PER_ITEM, TASKS, db, service
    from vistkit.studio.plan import create_study, items_from_story_sets

    asked = {"--task": task, "--items": items, "--annotators": annotators, "--per-item": per_item}
    task = "rank" if task is None else task
    items = 10 if items is None else items
    annotators = 3 if annotators is None else annotators
    per_item = 3 if per_item is None else per_item
    if task not in TASKS:  # before the folder and its photos are written
        raise InputError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    if not 1 <= annotators <= MAX_INVITES:
        raise InputError(f"--annotators must be from 1 to {MAX_INVITES:,}, not {annotators:,}")
    if not 1 <= per_item <= MAX_PER_ITEM:
        raise InputError(f"--per-item must be from 1 to {MAX_PER_ITEM:,}, not {per_item:,}")
    out = Path(folder)
    study = out / "study.db"
    links_file = out / "links.json"
    base = base_url.rstrip("/")
    if study.exists():
        if not links_file.exists():
            raise InputError(f"{out} holds a study but no links.json; remove the folder or choose another --dir")
        with contextlib.suppress(OSError):  # a folder an older vistkit made: its links.json was 0644
            os.chmod(links_file, 0o600)
        saved = _read_links(links_file, out)
        _warn_ignored_on_reuse(out, study, saved, asked)
        return {
            **saved,
            "study": str(study),  # the one in this folder (links.json has the path as given then: maybe relative)
            "links": [(name, f"{base}{path}") for name, path in saved["paths"]],
            "admin_link": f"{base}{saved['admin_path']}",
            "links_file": str(links_file),
            "reused": True,
        }
    if not 1 <= items <= 50:
        raise InputError("--items must be between 1 and 50 (the demo ships 50 story pairs)")
    from vistkit.data.output import prepare_folder, write_text

    prepare_folder(out, force=True)  # new, empty or an unfinished demo of vistkit's; never a folder of yours
    photo_ids, photo_note = stand_in_photos(out / "photos")
    root = resources.files("vistkit.resources") / "demo"
    with resources.as_file(root) as demo_dir:
        sets = {
            "human": read_stories(demo_dir / "human_stories.json", system="human"),
            "llava": read_stories(demo_dir / "llava_stories.json", system="llava"),
        }
    plan_items = items_from_story_sets(sets, key="story", max_items=items)
    for n, it in enumerate(plan_items):
        it.photo_ids = tuple(photo_ids[(n + i) % len(photo_ids)] for i in range(5))
    summary = create_study(
        study,
        task=task,
        items=plan_items,
        per_item=per_item,
        photos_dir=out / "photos",
        gold=1 if task != "likert" else 0,
        title="vistkit studio demo",
    )
    st = db.open_study(study)
    paths = [(name, f"/a/{token}") for name, token in service.invite(st, n=annotators)]
    st.engine.dispose()
    info = {
        "study": str(study),
        "task": task,
        "items": len(plan_items),
        "photos": photo_note,
        "paths": paths,
        "admin_path": f"/admin/{summary['admin_token']}",
    }
    # the demo's links are kept beside it (a real study shows its tokens once and stores only their hashes)
    write_text(links_file, json.dumps(info, indent=2) + "\n", force=True, private=True)  # tokens: as the study
    return {
        **info,
        "links": [(name, f"{base}{path}") for name, path in paths],
        "admin_link": f"{base}{info['admin_path']}",
        "links_file": str(links_file),
        "reused": False,
    }
