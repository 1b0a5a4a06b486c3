"""Rebuild story-ranker v2 bit for bit: its only fitted numbers are each feature's mean and SD over VIST val
human stories (signs and weights are fixed in `vistkit.models.story_ranker_v2.FEATURES`).

Two commands:

    python scripts/train_ranker_v2.py features   # LM + lexical features of the val stories (~10-40 CPU min)
        -> scripts/data/ranker_v2_val_features.json (+ its SHA-256 in ranker_v2_val_features.sha256)
    python scripts/train_ranker_v2.py build [--check] [--out DIR]   # seconds
        -> src/vistkit/resources/models/story-ranker-v2/config.json (or DIR); --check rebuilds into a temporary
           folder and compares the SHA-256 with the shipped config.

Fair data only (../shared/data/RESERVED.md): the human stories of the VIST *val* split as the CMU 11-777 project
ships them (vist-11777-baselines/arel_reference/val_reference.json), never a VIST test story, never a machine
story, never a human judgement. The sample is fixed (sorted album ids, every story, then a seeded shuffle).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vistkit.models.story_ranker_v2 import (  # noqa: E402
    CONFIG_FILE,
    DEFAULT_NAME,
    FEATURES,
    KIND,
    RULES,
    cap_z,
    config_sha256,
    default_model_dir,
    standardise,
)

VAL = ROOT.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"
FEATURES_FILE = ROOT / "scripts" / "data" / "ranker_v2_val_features.json"
FEATURES_SHA = FEATURES_FILE.with_suffix(".sha256")
N_STORIES = 400
SEED = 2
CLIP = 3.0


def val_stories(n: int = N_STORIES) -> list[str]:
    """The fixed sample of VIST val human stories."""
    data = json.loads(VAL.read_text(encoding="utf-8"))
    stories = [s for album in sorted(data) for s in data[album]]
    random.Random(SEED).shuffle(stories)
    return stories[:n]


def compute_features(n: int) -> None:
    from vistkit.metrics.lm import get_scorer
    from vistkit.metrics.story_ranker import story_features

    stories = val_stories(n)
    scorer = get_scorer(None, device="cpu")
    rows = []
    start = time.time()
    for i in range(0, len(stories), 50):
        part = stories[i : i + 50]
        table = story_features(part, scorer)
        rows += [[round(float(v), 12) for v in r] for r in table]
        rate = len(rows) / (time.time() - start)
        print(f"{len(rows)}/{len(stories)} stories ({rate:.2f}/s)", file=sys.stderr, flush=True)
    payload = {
        "source": "vist-11777-baselines/arel_reference/val_reference.json (VIST val human stories)",
        "sample": f"sorted albums, all stories, random.Random({SEED}).shuffle, first {n}",
        "lm": f"{scorer.lm.name}@{scorer.lm.fingerprint}",
        "unigram": scorer.unigram.signature,
        "features": [f.name for f in FEATURES],
        "rows": rows,
    }
    text = json.dumps(payload, indent=0) + "\n"
    FEATURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    FEATURES_FILE.write_text(text, encoding="utf-8")
    FEATURES_SHA.write_text(hashlib.sha256(text.encode()).hexdigest() + "\n", encoding="utf-8")
    print(f"wrote {FEATURES_FILE} ({len(rows)} stories, sha256 {FEATURES_SHA.read_text().strip()[:12]})")


def build(out: Path) -> str:
    text = FEATURES_FILE.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != FEATURES_SHA.read_text().strip():
        raise SystemExit(f"{FEATURES_FILE} does not match {FEATURES_SHA}: recompute it with `features`")
    payload = json.loads(text)
    if payload["features"] != [f.name for f in FEATURES]:
        raise SystemExit("the features file was computed for other features: recompute it with `features`")
    table = np.asarray(payload["rows"], dtype=np.float64)
    names = [f.name for f in FEATURES]
    defined = [table[np.isfinite(table[:, k]), k] for k in range(len(FEATURES))]
    mean = np.array([float(f"{col.mean():.9g}") for col in defined])
    sd = np.array([float(f"{col.std(ddof=1):.9g}") for col in defined])
    # a capped feature's centre: the mean of its capped z over these stories (u = 0 stays a typical human story)
    caps = np.array([cap_z(f.max_z, CLIP) for f in FEATURES])
    signs = np.array([float(f.sign) for f in FEATURES])
    capped = standardise(table, mean, sd, clip=CLIP, rules=RULES, names=names, max_z=caps, signs=signs)
    features = []
    for k, f in enumerate(FEATURES):
        centre = float(f"{np.nanmean(capped[:, k]):.9g}") if f.max_z is not None else 0.0
        features.append(
            {
                "name": f.name,
                "sign": f.sign,
                "weight": f.weight,
                "mean": float(mean[k]),
                "sd": float(sd[k]),
                "max_z": f.max_z,
                "centre": centre,
                "n": len(defined[k]),
                "what": f.what,
            }
        )
    config = {
        "name": DEFAULT_NAME,
        "kind": KIND,
        "version": 2,
        "lm": "smollm2-135m",
        "lm_used_for_statistics": payload["lm"],
        "unigram": payload["unigram"],
        "clip": CLIP,
        "rules": RULES,
        "features": features,
        "training_data": f"{len(table)} VIST val human stories ({payload['source']}; {payload['sample']})",
        "features_sha256": digest,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config_sha256(config)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("features", help="compute the val stories' features (slow: runs the LM)")
    f.add_argument("--n", type=int, default=N_STORIES)
    b = sub.add_parser("build", help="write config.json from the features file (seconds)")
    b.add_argument("--out", type=Path, default=default_model_dir())
    b.add_argument("--check", action="store_true", help="rebuild into a temporary folder and compare")
    args = ap.parse_args()
    if args.command == "features":
        compute_features(args.n)
        return
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            again = build(Path(tmp))
        shipped = json.loads((default_model_dir() / CONFIG_FILE).read_text(encoding="utf-8"))
        same = again == config_sha256(shipped)
        print(f"rebuilt {again[:12]}, shipped {config_sha256(shipped)[:12]}: {'identical' if same else 'DIFFERENT'}")
        raise SystemExit(0 if same else 1)
    digest = build(args.out)
    print(f"wrote {args.out / CONFIG_FILE} (story-ranker-v2@{digest[:12]})")


if __name__ == "__main__":
    main()
