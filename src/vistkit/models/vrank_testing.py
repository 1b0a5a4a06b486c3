"""Tiny random encoders and Vrank folders for tests (no downloads; the numbers mean nothing)."""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path

BASIC_WORDS = (
    "the a an and to of in on at for with we my our it was were is had have went day time fun family friends "
    "beach park party dog cat car city night sun water game team food dinner happy great good bad very all"
).split()


def _vocab(words: Iterable[str]) -> list[str]:
    letters = list(string.ascii_lowercase + string.digits)
    pieces = [f"##{c}" for c in letters]
    extra = sorted({w.lower() for w in words} - set(letters))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "'", *letters, *pieces, *extra]


def make_tiny_encoder(
    folder: str | Path,
    *,
    words: Iterable[str] = BASIC_WORDS,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    max_positions: int = 256,
) -> Path:
    """A random BERT (``hidden``-d, ``layers`` layers, ``heads`` heads, with pooler) and a WordPiece tokenizer over
    ``words`` plus single letters, in Hugging Face format with safetensors: a stand-in for SimCSE BERT-base."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    vocab = _vocab([*BASIC_WORDS, *words])
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(str(out / "vocab.txt"), do_lower_case=True, model_max_length=max_positions).save_pretrained(
        str(out)
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden if heads > 2 else 2 * hidden,
        max_position_embeddings=max_positions,
    )
    BertModel(config).eval().save_pretrained(str(out), safe_serialization=True)
    return out


def make_tiny_vrank(folder: str | Path, *, seed: int = 0) -> Path:
    """An untrained tiny Vrank folder (random encoder and head, saved like a trained one)."""
    import torch

    from vistkit.models.checkpoints import is_converted
    from vistkit.models.vrank import VrankSettings, load_encoder, save_vrank

    out = Path(folder)
    if is_converted(out / "vrank"):
        return out / "vrank"
    enc = make_tiny_encoder(out / "encoder", seed=seed)
    torch.manual_seed(seed)
    tok, model, _ = load_encoder(enc)
    with torch.no_grad():  # a visible spread of predictions
        model.classifier.weight.mul_(20.0)
    settings = VrankSettings(max_length=256)
    return save_vrank(out / "vrank", model, tok, encoder="tiny-random-bert", settings=settings, data={"name": "none"})
