"""Train the cross-encoder coherence model (``coherence-minilm-ce-v1``) - one command, fixed seed, CPU.

    .venv/bin/python scripts/train_coherence_ce.py  # -> src/vistkit/resources/models/coherence-minilm-ce-v1

Data: the human VIST *validation* stories of
../shared/data/vist-11777-baselines/arel_reference/val_reference.json (free to use per RESERVED.md; no VIST
test story, no reserved file); 10% of the albums are held out for the dev accuracy. For each story
s_0..s_n-1 and each i >= 1 (sentences by vistkit's NLTK-equivalent ``sent_tokenize``), as in dHM-C:

- positive: A = s_0 .. s_i-1 joined by one space, B = s_i  -> label 1
- negative (SOP, swapped order, the task the official RoViST ALBERT model was trained on):
  A = s_0 .. s_i-2, s_i, B = s_i-1 -> label 0

Model: packaged all-MiniLM-L6-v2 (``minilm-l6``) as ``[CLS] A [SEP] B [SEP]`` cross-encoder; embeddings and
the lower layers frozen; the top ``--train-layers`` layers + pooler + ``Linear(384, 2)`` fine-tuned. As the
lower layers are frozen and the examples fixed, their outputs are computed once and cached in memory; each
epoch then runs only the top layers. Only the fine-tuned tensors are saved (float16).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"
)
DEFAULT_OUT = REPO / "src/vistkit/resources/models/coherence-minilm-ce-v1"
PROBES = [  # fixed pairs whose probabilities are stored so tests can check the loader
    ("we went to the beach today .", "the water was very cold ."),
    ("the water was very cold .", "we went to the beach today ."),
    ("my family had a party . we had a lot of food .", "at the end of the night we were all tired ."),
    ("at the end of the night we were all tired . my family had a party .", "we had a lot of food ."),
]


def split_sentences(text: str) -> list[str]:
    from vistkit.text.sentences import sent_tokenize

    return [s for s in sent_tokenize(text) if s.strip()]


def make_examples(stories: list[list[str]], rng: random.Random, positions: int) -> list[tuple[str, str, int]]:
    """(A, B, label) for ``positions`` random positions i >= 1 of every story (0: all): the true order and
    its swap."""
    out: list[tuple[str, str, int]] = []
    for sents in stories:
        chosen = list(range(1, len(sents)))
        if positions:
            chosen = sorted(rng.sample(chosen, min(positions, len(chosen))))
        for i in chosen:
            out.append((" ".join(sents[:i]), sents[i], 1))
            out.append((" ".join([*sents[: i - 1], sents[i]]), sents[i - 1], 0))
    return out


def top_forward(bert: Any, classifier: Any, hidden: Any, mask: Any, first: int) -> Any:
    """Logits from the hidden states entering layer ``first`` (the training path; the loader runs the
    whole model)."""
    ext = bert._create_attention_masks(
        attention_mask=mask,
        encoder_attention_mask=None,
        embedding_output=hidden,
        encoder_hidden_states=None,
        past_key_values=None,
    )[0]
    for layer in bert.encoder.layer[first:]:
        out = layer(hidden, attention_mask=ext)
        hidden = out[0] if isinstance(out, tuple) else out
    return classifier(bert.pooler(hidden))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument(
        "--positions", type=int, default=1, help="sentence positions sampled per story (0: all; CPU budget)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="use only this many train stories (smoke tests)")
    args = ap.parse_args(argv)

    import torch
    from safetensors.torch import save_file

    from vistkit.models.checkpoints import file_sha256
    from vistkit.models.coherence_ce import KIND, WEIGHTS_FILE, build_base, encode_pairs, pad_batch
    from vistkit.models.runtime import batches_by_length

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    t0 = time.time()

    data = json.loads(args.data.read_text(encoding="utf-8"))
    albums = sorted(data)
    rng.shuffle(albums)
    dev_albums = set(albums[: len(albums) // 10])
    train_stories: list[list[str]] = []
    dev_stories: list[list[str]] = []
    for album in sorted(data):
        for text in data[album]:
            sents = split_sentences(text)
            if len(sents) >= 2:
                (dev_stories if album in dev_albums else train_stories).append(sents)
    if args.limit:
        train_stories, dev_stories = train_stories[: args.limit], dev_stories[: max(1, args.limit // 10)]
    train = make_examples(train_stories, rng, args.positions)
    dev = make_examples(dev_stories, random.Random(args.seed + 1), args.positions)
    print(f"{len(train_stories)} train / {len(dev_stories)} dev stories, {len(train)} / {len(dev)} pairs")

    tokenizer, bert, classifier = build_base("minilm-l6")
    n_layers = int(bert.config.num_hidden_layers)
    first = n_layers - args.train_layers
    for p in bert.parameters():
        p.requires_grad_(False)
    trained = [*bert.encoder.layer[first:].parameters(), *bert.pooler.parameters(), *classifier.parameters()]
    for p in trained:
        p.requires_grad_(True)
    pad_id = int(tokenizer.pad_token_id)

    def frozen_states(examples: list[tuple[str, str, int]]) -> list[Any]:
        """float16 hidden states entering layer ``first`` for each example (unpadded)."""
        enc = encode_pairs(tokenizer, [(a, b) for a, b, _ in examples], max_length=args.max_length)
        states: list[Any] = [None] * len(enc)
        bert.eval()
        with torch.inference_mode():
            for batch in batches_by_length(
                [len(e["input_ids"]) for e in enc], batch_size=64, max_padding=0.2
            ):
                feats = pad_batch([enc[i] for i in batch], pad_id=pad_id)
                out = bert(**feats, output_hidden_states=True)
                h = out.hidden_states[first]
                for k, i in enumerate(batch):
                    states[i] = h[k, : len(enc[i]["input_ids"])].to(torch.float16).clone()
        return states

    train_h = frozen_states(train)
    dev_h = frozen_states(dev)
    print(f"lower {first} layers cached in {time.time() - t0:.0f}s", flush=True)

    def padded(states: list[Any], idx: list[int]) -> tuple[Any, Any]:
        width = max(len(states[i]) for i in idx)
        h = torch.zeros(len(idx), width, states[idx[0]].shape[-1])
        mask = torch.zeros(len(idx), width, dtype=torch.long)
        for k, i in enumerate(idx):
            h[k, : len(states[i])] = states[i].float()
            mask[k, : len(states[i])] = 1
        return h, mask

    def evaluate(states: list[Any], labels: list[int]) -> tuple[float, list[float]]:
        bert.eval()
        classifier.eval()
        probs = [0.0] * len(states)
        with torch.inference_mode():
            for batch in batches_by_length([len(s) for s in states], batch_size=64):
                h, mask = padded(states, batch)
                p = torch.softmax(top_forward(bert, classifier, h, mask, first), -1)[:, 1]
                for k, i in enumerate(batch):
                    probs[i] = float(p[k])
        acc = sum((p > 0.5) == bool(y) for p, y in zip(probs, labels, strict=True)) / max(1, len(labels))
        return acc, probs

    y_train = torch.tensor([y for _, _, y in train])
    dev_labels = [y for _, _, y in dev]
    # batches of similar length (less padding), shuffled every epoch
    buckets = list(batches_by_length([len(s) for s in train_h], batch_size=args.batch_size))
    steps = args.epochs * len(buckets)
    opt = torch.optim.AdamW(trained, lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / (0.06 * steps)) * max(0.0, 1.0 - s / steps)
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    history = []
    for epoch in range(args.epochs):
        rng.shuffle(buckets)
        bert.encoder.layer[first:].train()
        bert.pooler.train()
        classifier.train()
        total = 0.0
        for step, batch in enumerate(buckets):
            h, mask = padded(train_h, batch)
            loss = loss_fn(top_forward(bert, classifier, h, mask, first), y_train[batch])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(batch)
            if step % 200 == 0:
                print(
                    f"  epoch {epoch + 1} step {step}/{len(buckets)} loss {float(loss.detach()):.4f} "
                    f"({time.time() - t0:.0f}s)",
                    flush=True,
                )
        acc, _ = evaluate(dev_h, dev_labels)
        history.append(
            {"epoch": epoch + 1, "train_loss": round(total / len(train), 4), "dev_acc": round(acc, 4)}
        )
        print(f"epoch {epoch + 1}: {history[-1]} ({time.time() - t0:.0f}s)", flush=True)

    # float16 storage; evaluate (and record probes) with exactly the rounded weights that ship
    bert_state = {
        k: v
        for k, v in bert.state_dict().items()
        if k.startswith("pooler.") or (k.startswith("encoder.layer.") and int(k.split(".")[2]) >= first)
    }
    state16 = {f"bert.{k}": v.detach().to(torch.float16).contiguous() for k, v in bert_state.items()}
    state16.update(
        {
            f"classifier.{k}": v.detach().to(torch.float16).contiguous()
            for k, v in classifier.state_dict().items()
        }
    )
    bert.load_state_dict({k: state16[f"bert.{k}"].float() for k in bert_state}, strict=False)
    classifier.load_state_dict({k: state16[f"classifier.{k}"].float() for k in classifier.state_dict()})
    dev_acc, dev_probs = evaluate(dev_h, dev_labels)
    pos_acc = sum(p > 0.5 for p, y in zip(dev_probs, dev_labels, strict=True) if y) / max(1, sum(dev_labels))
    neg_acc = sum(p <= 0.5 for p, y in zip(dev_probs, dev_labels, strict=True) if not y) / max(
        1, len(dev_labels) - sum(dev_labels)
    )
    # probes through the training path (cached lower layers + top_forward), float32 lower layers
    probe_h = [h.float() for h in frozen_states([(a, b, 0) for a, b in PROBES])]
    with torch.inference_mode():
        probe_p = [
            float(
                torch.softmax(
                    top_forward(bert, classifier, h[None], torch.ones(1, len(h), dtype=torch.long), first), -1
                )[0, 1]
            )
            for h in probe_h
        ]
    print(f"dev accuracy {dev_acc:.4f} (true order {pos_acc:.4f}, swapped {neg_acc:.4f}); probes {probe_p}")

    args.out.mkdir(parents=True, exist_ok=True)
    save_file(state16, str(args.out / WEIGHTS_FILE), metadata={"kind": KIND})
    config = {
        "kind": KIND,
        "name": args.out.name,
        "base": "minilm-l6",
        "base_hub_id": "sentence-transformers/all-MiniLM-L6-v2",
        "num_layers": n_layers,
        "trained_layers": list(range(first, n_layers)),
        "frozen": f"embeddings + layers 0..{first - 1}",
        "head": "pooler (dense+tanh on [CLS]) -> Linear(384, 2); P(B follows A) = softmax[1]",
        "max_length": args.max_length,
        "truncation": "segment A cut from the left",
        "context": "prefix: all preceding sentences joined by one space (dHM-C)",
        "training": {
            "data": "vist-11777-baselines/arel_reference/val_reference.json (human VIST val stories)",
            "data_sha256": file_sha256(args.data),
            "train_stories": len(train_stories),
            "dev_stories": len(dev_stories),
            "train_pairs": len(train),
            "negatives": "swapped order (SOP): A = s_0..s_i-2 + s_i, B = s_i-1",
            "epochs": args.epochs,
            "lr": args.lr,
            "positions_per_story": args.positions,
            "train_layers": args.train_layers,
            "batch_size": args.batch_size,
            "seed": args.seed,
            "history": history,
            "dev_accuracy": round(dev_acc, 4),
            "dev_accuracy_true_order": round(pos_acc, 4),
            "dev_accuracy_swapped": round(neg_acc, 4),
            "seconds": round(time.time() - t0),
            "threads": args.threads,
            "command": "python scripts/train_coherence_ce.py",
        },
        "probes": [{"a": a, "b": b, "p": p} for (a, b), p in zip(PROBES, probe_p, strict=True)],
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
