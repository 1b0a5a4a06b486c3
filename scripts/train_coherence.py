"""Train the offline default coherence model (``coherence-minilm-v1``) - one command, fixed seed.

    .venv/bin/python scripts/train_coherence.py   # writes src/vistkit/resources/models/coherence-minilm-v1

Data: the human VIST *validation* stories of
../shared/data/vist-11777-baselines/arel_reference/val_reference.json (892 albums, 3,000 stories; free to
use per RESERVED.md; no test story, no reserved file). Self-supervised sentence-order examples from each
story with sentences s_0..s_n-1 and each position i >= 1:

- positive: (s_0..s_i-1) -> s_i
- negative (one per positive, type drawn at random): *swap* (s_0..s_i-2, s_i) -> s_i-1 (the SOP task of
  RoViST-C); *future* (s_0..s_i-1) -> s_j, j > i; *other* (s_0..s_i-1) -> a sentence of another album's
  story; *repeat* (s_0..s_i-1) -> s_i-1.

Negatives are redrawn every epoch. The MiniLM encoder stays frozen; only the MLP head is trained (CPU,
minutes). 10% of the albums are held out to report accuracy; nothing is tuned on the dHM/VIST test data.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"
)
NEG_TYPES = ("swap", "future", "other", "repeat")
NEGATIVE_MIXES = {
    "mixed": (0.35, 0.25, 0.30, 0.10),
    "sop": (1.0, 0.0, 0.0, 0.0),  # swapped order only: RoViST-C's own training task
}


def split_sentences(text: str) -> list[str]:
    from vistkit.text.sentences import sent_tokenize

    return [s for s in sent_tokenize(text) if s.strip()]


def make_examples(
    stories: list[list[int]],
    rng: random.Random,
    all_sentences: int,
    album_of: list[int],
    story_album: list[int],
    probs: tuple[float, ...],
) -> tuple[list[list[int]], list[int], list[int], list[str]]:
    """(context sentence ids, candidate id, label, type) for one epoch."""
    ctxs: list[list[int]] = []
    cands: list[int] = []
    labels: list[int] = []
    kinds: list[str] = []
    for si, sents in enumerate(stories):
        n = len(sents)
        for i in range(1, n):
            ctxs.append(sents[:i])
            cands.append(sents[i])
            labels.append(1)
            kinds.append("positive")
            kind = rng.choices(NEG_TYPES, probs)[0]
            if kind == "future" and i == n - 1:
                kind = "swap"
            if kind == "swap":
                ctx, cand = [*sents[: i - 1], sents[i]], sents[i - 1]
            elif kind == "future":
                ctx, cand = sents[:i], sents[rng.randrange(i + 1, n)]
            elif kind == "other":
                while True:
                    j = rng.randrange(all_sentences)
                    if album_of[j] != story_album[si]:
                        break
                ctx, cand = sents[:i], j
            else:
                ctx, cand = sents[:i], sents[i - 1]
            ctxs.append(ctx)
            cands.append(cand)
            labels.append(0)
            kinds.append(kind)
    return ctxs, cands, labels, kinds


def features(emb, pieces, ctxs: list[list[int]], cands: list[int], kind: str):  # type: ignore[no-untyped-def]
    """Head inputs for (context sentence ids, candidate id) rows; ``pieces`` = per-sentence first-piece
    vectors."""
    import torch

    from vistkit.models.coherence_head import N_PIECES, pair_features, position_onehot

    width = max(len(c) for c in ctxs)
    index = torch.full((len(ctxs), width), len(emb), dtype=torch.long)
    for k, c in enumerate(ctxs):
        index[k, : len(c)] = torch.tensor(c)
    padded = torch.cat([emb, torch.zeros(1, emb.shape[1])])
    counts = torch.tensor([len(c) for c in ctxs], dtype=torch.float32).unsqueeze(-1)
    mean = padded[index].sum(1) / counts
    prev = emb[[c[-1] for c in ctxs]]
    feats = pair_features(prev, mean, emb[cands])
    if kind == "v1":
        return feats
    dim = emb.shape[1]
    pos = position_onehot([len(c) for c in ctxs])
    return torch.cat(
        [feats, pos, pieces[cands][:, : N_PIECES * dim], pieces[[c[-1] for c in ctxs]][:, :dim]], -1
    )


def dev_predictions(head, x, objective: str):  # type: ignore[no-untyped-def]
    """0/1 predictions; pairwise: each (true, swapped) row pair is judged by the sign of the logit margin."""
    logits = head(x).squeeze(-1)
    if objective == "pointwise":
        return (logits > 0).float()
    margin = logits[0::2] - logits[1::2]
    out = logits.new_zeros(len(logits))
    out[0::2] = (margin > 0).float()  # the true order judged as following (label 1)
    out[1::2] = (margin <= 0).float()  # the swapped order: predicted 0 exactly when the margin is right
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=REPO / "src/vistkit/resources/models/coherence-minilm-v1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--features", choices=("v1", "v2"), default="v2")
    ap.add_argument("--negatives", choices=tuple(NEGATIVE_MIXES), default="sop")
    ap.add_argument(
        "--objective",
        choices=("pointwise", "pairwise"),
        default="pointwise",
        help="pointwise: classify each example; pairwise (needs --negatives sop): "
        "P = sigmoid(f(true order) - f(swapped order)), trained on both orders of each pair",
    )
    ap.add_argument("--embedding-cache", type=Path, default=None, help="reuse sentence embeddings (.pt)")
    args = ap.parse_args(argv)
    probs = NEGATIVE_MIXES[args.negatives]
    if args.objective == "pairwise" and args.negatives != "sop":
        ap.error("--objective pairwise needs --negatives sop")

    import torch
    from safetensors.torch import save_file

    from vistkit.models.checkpoints import file_sha256
    from vistkit.models.coherence_head import HEAD_FILE, KIND, SentenceEncoder, build_head

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    t0 = time.time()

    data = json.loads(args.data.read_text(encoding="utf-8"))
    albums = sorted(data)
    rng.shuffle(albums)
    n_dev = len(albums) // 10
    dev_albums = set(albums[:n_dev])
    sentences: list[str] = []
    album_of: list[int] = []
    sid: dict[str, int] = {}
    parts: dict[str, list[tuple[list[int], int]]] = {"train": [], "dev": []}
    for a_idx, album in enumerate(sorted(data)):
        for text in data[album]:
            ids = []
            for s in split_sentences(text):
                if s not in sid:
                    sid[s] = len(sentences)
                    sentences.append(s)
                    album_of.append(a_idx)
                ids.append(sid[s])
            if len(ids) >= 2:
                parts["dev" if album in dev_albums else "train"].append((ids, a_idx))
    print(
        f"{len(parts['train'])} train / {len(parts['dev'])} dev stories, {len(sentences)} sentences",
        flush=True,
    )

    encoder = SentenceEncoder("minilm-l6", device="cpu", batch_size=64)
    cache = args.embedding_cache
    if cache is not None and cache.is_file() and torch.load(cache)["sentences"] == sentences:
        emb = torch.load(cache)["emb"]
    else:
        emb = torch.from_numpy(encoder.encode(sentences))
        if cache is not None:
            torch.save({"sentences": sentences, "emb": emb}, cache)
    from vistkit.models.coherence_head import N_PIECES

    pieces = torch.from_numpy(encoder.first_pieces(sentences, N_PIECES))
    print(f"embedded in {time.time() - t0:.0f}s", flush=True)

    train_stories = [s for s, _ in parts["train"]]
    train_album = [a for _, a in parts["train"]]
    dev_stories = [s for s, _ in parts["dev"]]
    dev_album = [a for _, a in parts["dev"]]
    dev_rng = random.Random(args.seed + 1)
    d_ctx, d_cand, d_lab, d_kind = make_examples(
        dev_stories, dev_rng, len(sentences), album_of, dev_album, probs
    )
    x_dev = features(emb, pieces, d_ctx, d_cand, args.features)
    y_dev = torch.tensor(d_lab, dtype=torch.float32)

    head = build_head(encoder.dim, args.hidden, args.features)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=1e-4)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for epoch in range(args.epochs):
        ctx, cand, lab, _ = make_examples(train_stories, rng, len(sentences), album_of, train_album, probs)
        x = features(emb, pieces, ctx, cand, args.features)
        y = torch.tensor(lab, dtype=torch.float32)
        perm = torch.randperm(len(y))
        head.train()
        total = 0.0
        if args.objective == "pairwise":  # rows come as (true order, swapped order) pairs
            perm = 2 * torch.randperm(len(y) // 2)
        for start in range(0, len(perm), 256):
            idx = perm[start : start + 256]
            opt.zero_grad()
            if args.objective == "pairwise":
                margin = head(x[idx]).squeeze(-1) - head(x[idx + 1]).squeeze(-1)
                loss = loss_fn(margin, torch.ones_like(margin))
            else:
                loss = loss_fn(head(x[idx]).squeeze(-1), y[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        if epoch % 5 == 4 or epoch == args.epochs - 1:
            head.eval()
            with torch.no_grad():
                pred = dev_predictions(head, x_dev, args.objective)
            acc = float((pred == y_dev).float().mean())
            print(f"epoch {epoch + 1}: train loss {total / len(perm):.4f}, dev acc {acc:.4f}", flush=True)

    head.eval()
    with torch.no_grad():
        pred = dev_predictions(head, x_dev, args.objective)
    by_kind = {}
    for kind in ("positive", *NEG_TYPES):
        mask = torch.tensor([k == kind for k in d_kind])
        if mask.any():
            by_kind[kind] = round(float((pred[mask] == y_dev[mask]).float().mean()), 4)
    dev_acc = round(float((pred == y_dev).float().mean()), 4)
    print(f"dev accuracy {dev_acc}, by type {by_kind}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    # stored as float16 to keep the package small; the loader computes in float32
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(args.out / HEAD_FILE), metadata={"kind": KIND})
    config = {
        "kind": KIND,
        "name": args.out.name,
        "encoder": "minilm-l6",
        "encoder_hub_id": "sentence-transformers/all-MiniLM-L6-v2",
        "dim": encoder.dim,
        "hidden": args.hidden,
        "features": args.features,
        "objective": args.objective,
        "max_length": encoder.max_length,
        "context": "prefix (previous sentence + mean of all preceding sentences)",
        "training": {
            "data": "vist-11777-baselines/arel_reference/val_reference.json (human VIST val stories)",
            "data_sha256": file_sha256(args.data),
            "train_stories": len(train_stories),
            "dev_stories": len(dev_stories),
            "negatives": dict(zip(NEG_TYPES, probs, strict=True)),
            "negative_mix": args.negatives,
            "epochs": args.epochs,
            "lr": args.lr,
            "seed": args.seed,
            "dev_accuracy": dev_acc,
            "dev_accuracy_by_type": by_kind,
            "command": "python scripts/train_coherence.py",
        },
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
