"""A small stand-in for the data folder of docs/data.md (``DATA=~/vist-data``), for the README doc test.

Same file names and formats as the real files (PR-VIST's zipped VIST test SIS, the 2018 challenge template and
example submission, TAPM's outputs, dHM's stories and score tables), built from the 50 dHM stories that ship with
vistkit (`vistkit/resources/demo`, CC BY 4.0): ``SEQUENCES`` photo sequences with two human stories each, so the
Reference Absent Algorithm has a second reference. Photo ids, albums and dHM's score values are made up.
"""

from __future__ import annotations

import csv
import json
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np

SEQUENCES = 5


def _demo(name: str) -> dict[str, str]:
    text = resources.files("vistkit").joinpath("resources", "demo", name).read_text(encoding="utf-8")
    return dict(json.loads(text))


def _five_parts(text: str) -> list[str]:
    """The story cut into five sentences (VIST stories have five): whole sentences grouped, else words split."""
    sentences = [s.strip() + " ." for s in text.replace(" .", " .\n").split("\n") if s.strip(" .")]
    if len(sentences) >= 5:
        groups = np.array_split(np.arange(len(sentences)), 5)
        return [" ".join(sentences[i] for i in g) for g in groups]
    words = text.split()
    return [" ".join(words[i] for i in g) for g in np.array_split(np.arange(len(words)), 5)]


def build(folder: Path) -> Path:
    """Write the stand-in data folder under ``folder`` and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    human, llava = _demo("human_stories.json"), _demo("llava_stories.json")
    ids = sorted(human)[: 2 * SEQUENCES]
    seqs = []
    for j in range(SEQUENCES):
        photos = [str(1_000_000 + 10 * j + k) for k in range(5)]
        seqs.append({"album": str(500 + j // 2), "photos": photos, "stories": ids[2 * j : 2 * j + 2]})

    # PR-VIST's zip: one record per sentence, all VIST SIS fields plus predicted_story
    records = []
    for seq in seqs:
        for sid in seq["stories"]:
            for k, (photo, sentence) in enumerate(zip(seq["photos"], _five_parts(human[sid]), strict=True)):
                records.append(
                    {
                        "original_text": sentence,
                        "album_id": seq["album"],
                        "photo_flickr_id": photo,
                        "setting": "first-2-pick-and-tell",
                        "worker_id": f"W{sid}",
                        "story_id": sid,
                        "tier": "story-in-sequence",
                        "worker_arranged_photo_order": k,
                        "text": sentence,
                        "storylet_id": f"{sid}{k}",
                        "predicted_story": llava[sid].lower(),
                    }
                )
    with zipfile.ZipFile(folder / "PR_VIST.json.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("PR_VIST.json", json.dumps(records))

    def challenge(stories: list[str]) -> dict:
        return {
            "team_name": "readme-test",
            "evaluation_info": {"additional_description": "stand-in data"},
            "output_stories": [
                {"album_id": s["album"], "photo_sequence": s["photos"], "story_text_normalized": t}
                for s, t in zip(seqs, stories, strict=True)
            ],
        }

    (folder / "vist-challenge-template.json").write_text(json.dumps(challenge([""] * SEQUENCES)))
    first_human = [" ".join(_five_parts(human[s["stories"][0]])) for s in seqs]
    (folder / "example-submission-file.test.json").write_text(json.dumps(challenge(first_human)))

    tapm = folder / "tapm"
    tapm.mkdir(exist_ok=True)
    (tapm / "ours.json").write_text(json.dumps(challenge([llava[s["stories"][1]].lower() for s in seqs])))
    for name, texts in (
        ("AREL", [" ".join(llava[s["stories"][0]].lower().split(". ")[:3]) for s in seqs]),
        ("XE", [human[seqs[(j + 1) % SEQUENCES]["stories"][0]] for j in range(SEQUENCES)]),
    ):
        by_album: dict[str, dict[str, str]] = {}
        for s, t in zip(seqs, texts, strict=True):
            by_album.setdefault(s["album"], {})["_".join(s["photos"])] = t
        (tapm / f"{name}.json").write_text(json.dumps(by_album))

    stories = folder / "dhm" / "stories" / "vist"
    scores = folder / "dhm" / "scores" / "vist"
    stories.mkdir(parents=True, exist_ok=True)
    scores.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(18)
    for name, texts in (("gt_test", human), ("llava_vc_p3", llava)):
        (stories / f"{name}.json").write_text(json.dumps({sid: texts[sid] for sid in ids}, indent=1))
        (scores / f"{name}_G.json").write_text(json.dumps({sid: float(rng.uniform(0, 2)) for sid in ids}))
        for dim in ("C", "R"):
            with open(scores / f"{name}_{dim}.csv", "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["story_id", f"{dim}_score"])
                w.writerows([sid, f"{rng.uniform(0, 1):.6f}"] for sid in ids)
    return folder


def command_env(base: Path, root: Path) -> dict[str, object]:
    """What the doc tests run commands in: the stand-in data under ``base`` (``data``), an empty working folder
    (``work``) and an environment (``env``) with ``DATA`` set, the ``vistkit`` next to this Python first on PATH
    and ``root``'s code under test first on PYTHONPATH (also when the installed vistkit is another checkout's).
    Skips the test when no ``vistkit`` command is installed."""
    import os
    import shutil
    import sys

    import pytest

    vistkit = Path(sys.executable).parent / "vistkit"
    exe = str(vistkit) if vistkit.exists() else shutil.which("vistkit")
    if exe is None:
        pytest.skip("no `vistkit` command installed next to this Python (pip install '.[models]')")
    data = build(base / "vist-data")
    work = base / "work"
    work.mkdir()
    env = dict(os.environ)
    env.update(
        PATH=f"{Path(exe).parent}{os.pathsep}{env.get('PATH', '')}", DATA=str(data), COLUMNS="120", VISTKIT_DEBUG="1"
    )
    src = str(root / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return {"data": data, "work": work, "env": env}
