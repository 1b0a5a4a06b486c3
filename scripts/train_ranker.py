"""Rebuild vistkit's offline default story ranker (metric `story-ranker`) bit for bit.

    python scripts/train_ranker.py [--out src/vistkit/resources/models/story-ranker-v1]

Training data (fair to every VIST test evaluation; see ../shared/data/RESERVED.md):
- better: the 3,000 human stories of VIST *val* (vist-11777-baselines/arel_reference/val_reference.json);
- worse: the same stories with one synthetic error (`vistkit.meta.perturb`), their photos' Descriptions-in-
  Isolation captions stitched together (val_reference_captions.json; Vrank's "description in isolation"), and
  continuations of their first sentence by SmolLM2-135M (scripts/data/ranker_smollm2_val.jsonl, made by
  scripts/gen_ranker_negatives.py; shipped so the rebuild needs no language model);
- graded pairs: a story with one error is better than the same story with more of the same error.
No VIST test story, no machine story of RESERVED.md and no human judgement is used. 10% of the val albums are held
out for the development numbers printed at the end. Seeds fixed; CPU, single thread for bit-for-bit output.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vistkit.meta.perturb import PERTURBATIONS, BlandRewriter, TrigramStoryGenerator, perturb  # noqa: E402
from vistkit.models.story_ranker import (  # noqa: E402
    CONFIG_FILE,
    DEFAULT_NAME,
    FEATURE_NAMES,
    FUNCTION_WORDS,
    HEAD_FILE,
    MONOTONE_SIGNS,
    StoryFeaturizer,
    build_head,
    normalise,
    sentences_of,
)

SHARED = Path(os.environ.get("VISTKIT_SHARED", ROOT.parent / "shared")) / "data"
VAL = SHARED / "vist-11777-baselines" / "arel_reference" / "val_reference.json"
VAL_CAPTIONS = SHARED / "vist-11777-baselines" / "arel_reference" / "val_reference_captions.json"
SMOLLM2 = ROOT / "scripts" / "data" / "ranker_smollm2_val.jsonl"
SEED = 7777
HIDDEN = 16


def split_text(text: str) -> list[str]:
    return [" ".join(s) for s in sentences_of(text)]


def load_val() -> tuple[list[tuple[str, str, str]], dict[str, list[str]]]:
    """(album, story key, text) for every val story, and each story's photo captions (3 per photo)."""
    stories = json.loads(VAL.read_text())
    captions = json.loads(VAL_CAPTIONS.read_text())
    rows, caps = [], {}
    for album in sorted(stories):
        for i, text in enumerate(stories[album]):
            key = f"{album}_{i}"
            rows.append((album, key, text))
            per_image = captions.get(album, [])
            if i < len(per_image):
                caps[key] = [img for img in per_image[i] if img]
    return rows, caps


def smollm2_continuations() -> dict[str, str]:
    """Story key -> first sentence + SmolLM2 continuation cut to at most five sentences."""
    out = {}
    if not SMOLLM2.is_file():
        return out
    for line in SMOLLM2.read_text().splitlines():
        r = json.loads(line)
        cont = r["continuation"].split("\n")[0] if r["continuation"].strip() else ""
        if not cont.strip():
            cont = next((c for c in r["continuation"].split("\n") if c.strip()), "")
        first = r["prompt"].rsplit("Story: ", 1)[-1]
        sents = split_text(first + " " + cont)[:5]
        if len(sents) >= 2:
            out[r["id"]] = " ".join(sents)
    return out


def make_pairs(rows, caps, gens, *, rng: random.Random) -> list[tuple[str, str, str]]:
    """(better text, worse text, kind) pairs for the given stories."""
    pool = [s for _, _, t in rows for s in split_text(t)]
    bland = BlandRewriter(pool, stop=FUNCTION_WORDS)
    trigram = TrigramStoryGenerator(pool)
    pairs = []
    for _, key, text in rows:
        s = split_text(text)
        if len(s) < 3:
            continue
        human = " ".join(s)
        for kind in PERTURBATIONS:
            worse = " ".join(perturb(s, kind, rng=rng, pool=pool))
            if worse != human:
                pairs.append((human, worse, kind))
        full = " ".join(bland(s, rng, share=1.0))
        pairs.append((human, full, "bland"))
        half = " ".join(bland(s, rng, share=0.5))
        pairs.append((human, half, "bland-half"))
        pairs.append((half, full, "graded-bland"))
        pairs.append((human, " ".join(bland.on_topic(s, rng)), "bland-topic"))
        pairs.append((human, " ".join(trigram(s, rng, temperature=rng.choice([0.3, 0.6, 1.0]))), "trigram"))
        # graded: one error is better than three of the same
        one = " ".join(PERTURBATIONS["substitute"](s, rng, pool, times=1))
        three = " ".join(PERTURBATIONS["substitute"](s, rng, pool, times=3))
        pairs.append((one, three, "graded-substitute"))
        one = " ".join(PERTURBATIONS["repeat-sentence"](s, rng, pool, times=1))
        two = " ".join(PERTURBATIONS["repeat-sentence"](s, rng, pool, times=2))
        if one != two:
            pairs.append((one, two, "graded-repeat"))
        if key in caps and len(caps[key]) >= 3:
            pairs.append((human, " ".join(normalise(c[0]) + " ." for c in caps[key]), "captions"))
            # every caption of every photo: long, detailed description without a narrative
            pairs.append((human, " ".join(normalise(x) + " ." for c in caps[key] for x in c), "captions-all"))
        if key in gens:
            pairs.append((human, gens[key], "smollm2"))
    return pairs


def featurise(texts: list[str], featurizer: StoryFeaturizer) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    distinct = sorted(set(texts))
    out = {}
    for b in range(0, len(distinct), 2048):
        chunk = distinct[b : b + 2048]
        f, m = featurizer(chunk)
        for i, t in enumerate(chunk):
            out[t] = (f[i], m[i])
    return out


def train(pairs, feats, *, epochs: int, lr: float, seed: int):
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    texts = sorted({t for p in pairs for t in p[:2]})
    index = {t: i for i, t in enumerate(texts)}
    z = torch.from_numpy(np.stack([feats[t][0] for t in texts]))
    m = torch.from_numpy(np.stack([feats[t][1] for t in texts]))
    a = torch.tensor([index[p[0]] for p in pairs])
    b = torch.tensor([index[p[1]] for p in pairs])
    head = build_head(z.shape[1], m.shape[1], HIDDEN)
    head.feature_mean.data = z.mean(0)
    head.feature_std.data = z.std(0).clamp_min(1e-6)
    opt = torch.optim.Adam([p for p in head.parameters() if p.requires_grad], lr=lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(seed)
    pos = torch.tensor([i for i, n in enumerate(FEATURE_NAMES) if MONOTONE_SIGNS.get(n) == 1])
    neg = torch.tensor([i for i, n in enumerate(FEATURE_NAMES) if MONOTONE_SIGNS.get(n) == -1])
    for epoch in range(epochs):
        order = torch.randperm(len(pairs), generator=gen)
        total = 0.0
        for k in range(0, len(order), 256):
            idx = order[k : k + 256]
            ua = head(z[a[idx]], m[a[idx]])
            ub = head(z[b[idx]], m[b[idx]])
            loss = torch.nn.functional.softplus(-(ua - ub)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():  # keep the monotone features' weights on their side of zero
                w = head.linear.weight[0]
                w[pos] = w[pos].clamp_min(0.0)
                w[neg] = w[neg].clamp_max(0.0)
            total += float(loss.detach()) * len(idx)
        if epoch % 5 == 4 or epoch == epochs - 1:
            print(f"epoch {epoch + 1}: loss {total / len(pairs):.4f}", flush=True)
    # centre: the mean utility of the training human stories is 0 (a shift; preferences are unchanged)
    humans = sorted({p[0] for p in pairs if p[2] in PERTURBATIONS})
    with torch.no_grad():
        zh = torch.from_numpy(np.stack([feats[t][0] for t in humans]))
        mh = torch.from_numpy(np.stack([feats[t][1] for t in humans]))
        head.linear.bias -= head(zh, mh).mean()
    return head.eval()


def accuracy_by_kind(head, pairs, feats) -> dict[str, float]:
    import torch

    texts = sorted({t for p in pairs for t in p[:2]})
    z = torch.from_numpy(np.stack([feats[t][0] for t in texts]))
    m = torch.from_numpy(np.stack([feats[t][1] for t in texts]))
    with torch.inference_mode():
        u = dict(zip(texts, head(z, m).numpy(), strict=True))
    by: dict[str, list[bool]] = {}
    for better, worse, kind in pairs:
        by.setdefault(kind, []).append(bool(u[better] > u[worse]))
    out = {k: float(np.mean(v)) for k, v in sorted(by.items())}
    out["all"] = float(np.mean([x for v in by.values() for x in v]))
    return out


def build(out: Path, *, epochs: int = 40, lr: float = 3e-3, albums_limit: int | None = None) -> dict:
    """Train and write the model folder; returns its config. ``albums_limit`` keeps the first N shuffled val
    albums (tests use a small subset)."""
    t0 = time.time()
    rows, caps = load_val()
    gens = smollm2_continuations()
    albums = sorted({a for a, _, _ in rows})
    random.Random(SEED).shuffle(albums)
    if albums_limit:
        albums = albums[:albums_limit]
        rows = [r for r in rows if r[0] in set(albums)]
    dev_albums = set(albums[: len(albums) // 10])
    train_rows = [r for r in rows if r[0] not in dev_albums]
    dev_rows = [r for r in rows if r[0] in dev_albums]
    train_pairs = make_pairs(train_rows, caps, gens, rng=random.Random(SEED))
    dev_pairs = make_pairs(dev_rows, caps, gens, rng=random.Random(SEED + 1))
    print(f"{len(train_rows)} train / {len(dev_rows)} dev stories; {len(train_pairs)} / {len(dev_pairs)} pairs; "
          f"{len(gens)} SmolLM2 continuations", flush=True)
    featurizer = StoryFeaturizer()
    feats = featurise([t for p in train_pairs + dev_pairs for t in p[:2]], featurizer)
    print(f"features: {len(feats)} stories in {time.time() - t0:.0f} s", flush=True)
    head = train(train_pairs, feats, epochs=epochs, lr=lr, seed=SEED)
    dev = accuracy_by_kind(head, dev_pairs, feats)
    print("dev accuracy (held-out val albums):", json.dumps(dev, indent=1))
    out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in head.state_dict().items()}, str(out / HEAD_FILE))
    digest = hashlib.sha256((out / HEAD_FILE).read_bytes()).hexdigest()
    config = {
        "kind": "story-ranker",
        "name": DEFAULT_NAME,
        "encoder": "minilm-l6",
        "vectors": "static input word-piece embeddings, mean per sentence",
        "hidden": HIDDEN,
        "features": list(FEATURE_NAMES),
        "training_data": "vist-val-3000+synthetic-errors+dii-captions+smollm2-135m-continuations",
        "seed": SEED,
        "epochs": epochs,
        "lr": lr,
        "train_pairs": len(train_pairs),
        "smollm2_continuations": len(gens),
        "dev_accuracy": dev,
        "head_sha256": digest,
    }
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
    print(f"wrote {out} ({digest[:12]}) in {time.time() - t0:.0f} s")
    return config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "src" / "vistkit" / "resources" / "models" / DEFAULT_NAME)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--check", action="store_true", help="rebuild into a temporary folder and compare with --out")
    args = ap.parse_args()
    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            got = build(Path(tmp), epochs=args.epochs, lr=args.lr)["head_sha256"]
        want = json.loads((args.out / CONFIG_FILE).read_text())["head_sha256"]
        print(f"rebuilt {got[:12]}, shipped {want[:12]}: {'identical' if got == want else 'DIFFERENT'}")
        sys.exit(0 if got == want else 1)
    build(args.out, epochs=args.epochs, lr=args.lr)


if __name__ == "__main__":
    main()
