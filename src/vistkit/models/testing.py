"""Tiny randomly initialised models in the official formats, for tests (no download, a second to build).

`make_tiny_sop_checkpoint` writes a RoViST-style ``.pth.tar`` (``{'model': state_dict, 'opt': Namespace,
...}``)
of a small ALBERT + ``Linear`` head, with its ``config.json`` and an ALBERT tokenizer over a small word list;
`make_tiny_sop_folder` converts it to the safe folder that ``rovist-c`` / ``dhm-c`` accept as ``model=``, e.g.
in suite-wide property tests::

    folder = make_tiny_sop_folder(tmp_path) get_metric("rovist-c", model=folder)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WORDS = (
    "the a an and to of in on at it was we my our they he she his her i you is are were had have with for "
    "this that there then went family day time party friends beach park dog cat car house home food dinner "
    "great fun happy good nice beautiful big little first last after before all so very got took picture "
    "pictures water sun trip city street people kids baby mom dad wedding cake birthday game team new old "
    ". , ! ? ' s n't"
).split()

TINY_ALBERT: dict[str, Any] = {
    "model_type": "albert",
    "vocab_size": 0,  # set from the tokenizer
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_hidden_groups": 1,
    "inner_group_num": 1,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "initializer_range": 0.2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "bos_token_id": 2,
    "eos_token_id": 3,
}


def make_tiny_albert_tokenizer() -> Any:
    """An ALBERT (Unigram, lower-casing) tokenizer over `WORDS` plus letters; ids 0-4 as in albert-large."""
    from transformers import AlbertTokenizer

    vocab: list[tuple[str, float]] = [
        ("<pad>", 0.0),
        ("<unk>", 0.0),
        ("[CLS]", 0.0),
        ("[SEP]", 0.0),
        ("[MASK]", 0.0),
    ]
    seen = {v for v, _ in vocab}
    for w in WORDS:
        piece = "▁" + w
        if piece not in seen:
            vocab.append((piece, -2.0))
            seen.add(piece)
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789'":
        for piece in (ch, "▁" + ch):
            if piece not in seen:
                vocab.append((piece, -8.0))
                seen.add(piece)
    vocab.append(("▁", -9.0))
    return AlbertTokenizer(vocab=vocab)


def make_tiny_sop_checkpoint(directory: str | Path, *, seed: int = 0, max_positions: int = 64) -> Path:
    """Write ``sop_model_epoch4.pth.tar`` (official format), ``config.json`` and tokenizer files into a
    folder."""
    import torch
    from torch import nn
    from transformers import AlbertConfig, AlbertModel

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = make_tiny_albert_tokenizer()
    cfg_dict = dict(TINY_ALBERT, vocab_size=len(tok), max_position_embeddings=max_positions)
    torch.manual_seed(seed)

    class OfficialLike(nn.Module):  # same parameter names as rovist_c.SOPClassifier
        def __init__(self) -> None:
            super().__init__()
            self.albert_model = AlbertModel(
                AlbertConfig(**{k: v for k, v in cfg_dict.items() if k != "model_type"})
            )
            self.dropout = nn.Dropout(p=0.4)
            self.linear = nn.Linear(cfg_dict["hidden_size"], 2)

    module = OfficialLike()
    with torch.no_grad():  # spread the head so probabilities differ visibly between pairs
        module.linear.weight.mul_(8.0)
    opt = argparse.Namespace(
        hidden_dim=cfg_dict["hidden_size"], dropout_prob=0.4, learning_rate=1e-5, batch_size=32
    )
    ckpt = out / "sop_model_epoch4.pth.tar"
    torch.save(
        {"epoch": 4, "model": module.state_dict(), "valid_loss": 0.5, "valid_acc": 0.8, "opt": opt}, ckpt
    )
    (out / "config.json").write_text(json.dumps(cfg_dict, indent=2), encoding="utf-8")
    tok.save_pretrained(str(out / "tokenizer"))
    return ckpt


def make_tiny_sop_folder(directory: str | Path, *, seed: int = 0) -> Path:
    """A converted (safetensors) tiny SOP folder with its tokenizer: pass it as ``model=`` to
    rovist-c/dhm-c."""
    from vistkit.models.sop import convert_sop_checkpoint

    base = Path(directory)
    ckpt = make_tiny_sop_checkpoint(base / "official", seed=seed)
    return convert_sop_checkpoint(
        ckpt,
        base / "converted",
        trust_checkpoint=True,
        config=ckpt.parent / "config.json",
        tokenizer=ckpt.parent / "tokenizer",
    )
