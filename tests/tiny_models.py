"""Tiny randomly initialised models in the official formats, for tests (no downloads, a second to build).

- `make_tiny_clip`: a CLIP in Hugging Face format with a made-up byte-level BPE vocab.
- `make_tiny_sop_checkpoint`: a RoViST-style ``.pth.tar`` (``{'model': state_dict, 'opt': Namespace, ...}``) of a
  small ALBERT + ``Linear`` head, with its ``config.json`` and an ALBERT tokenizer over a small word list (`WORDS`);
  `make_tiny_sop_folder` converts it to the safe folder that ``rovist-c`` / ``dhm-c`` accept as ``model=``.
- `make_tiny_encoder` / `make_tiny_vrank`: a random BERT with a WordPiece vocab (a stand-in for SimCSE) and an
  untrained Vrank folder saved like a trained one.
- `make_tiny_rovist_vg`: a converted RoViST-VG checkpoint (random ViT + heads), a 4-d GloVe file and an IDF table.

The weights are random, so the numbers mean nothing; tests use them to run the whole path (tokeniser, image
processor, model, normalisation, alignment) and compare against the same model called directly. No user-facing
command needs them (they lived in ``vistkit.models.testing`` until the house-keeping of issue 9).
"""

from __future__ import annotations

import argparse
import json
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible byte -> printable-character table."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def make_tiny_clip(folder: Path, *, seed: int = 0, image_size: int = 32) -> Path:
    """Write a random 2-layer CLIP (text and vision width 32, projection 16) + tokenizer + processor."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    folder.mkdir(parents=True, exist_ok=True)
    chars = list(_bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for c in chars:
        vocab[c] = len(vocab)
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    merges = ["t h", "th e</w>", "o n", "on e</w>", "a n", "an d</w>"]
    for m in merges:
        vocab.setdefault(m.replace(" ", ""), len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "CLIPTokenizer", "model_max_length": 77}), encoding="utf-8"
    )
    (folder / "special_tokens_map.json").write_text(
        json.dumps(
            {
                "bos_token": "<|startoftext|>",
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
            }
        ),
        encoding="utf-8",
    )
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "CLIPImageProcessor",
                "do_resize": True,
                "size": {"shortest_edge": image_size},
                "resample": 3,
                "do_center_crop": True,
                "crop_size": {"height": image_size, "width": image_size},
                "do_rescale": True,
                "rescale_factor": 1 / 255,
                "do_normalize": True,
                "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711],
                "do_convert_rgb": True,
            }
        ),
        encoding="utf-8",
    )
    torch.manual_seed(seed)
    eos = vocab["<|endoftext|>"]
    config = CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 77,
            "eos_token_id": eos,
            "bos_token_id": vocab["<|startoftext|>"],
            "pad_token_id": eos,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": image_size,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    model = CLIPModel(config).eval()
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder


# ------------------------------------------------------------------------------ RoViST / dHM coherence (SOP)
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


def official_sop(cfg: dict[str, Any]) -> Any:
    """A module written from RoViST's ``rovist_c.SOPClassifier`` (same parameter names): ALBERT's pooled
    output -> ``Linear(hidden, 2)``; ``forward(ids, attention_mask, token_type_ids)`` gives the two logits."""
    import torch
    from transformers import AlbertConfig, AlbertModel

    class SOPClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.albert_model = AlbertModel(AlbertConfig(**{k: v for k, v in cfg.items() if k != "model_type"}))
            self.dropout = torch.nn.Dropout(p=0.4)
            self.linear = torch.nn.Linear(cfg["hidden_size"], 2)

        def forward(self, ids: torch.Tensor, att: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
            return self.linear(self.albert_model(ids, attention_mask=att, token_type_ids=seg)[1])

    return SOPClassifier()


def load_official_sop(ckpt: Path) -> tuple[Any, dict[str, Any], Any]:
    """The tiny checkpoint loaded as the official code loads it (full unpickle: the test wrote the file):
    the `official_sop` module in eval mode, its config and the tokenizer."""
    import torch

    cfg = json.loads((ckpt.parent / "config.json").read_text())
    module = official_sop(cfg)
    module.load_state_dict(torch.load(ckpt, weights_only=False)["model"])
    module.eval()
    return module, cfg, make_tiny_albert_tokenizer()


def make_tiny_sop_checkpoint(directory: str | Path, *, seed: int = 0, max_positions: int = 64) -> Path:
    """Write ``sop_model_epoch4.pth.tar`` (official format), ``config.json`` and tokenizer files into a
    folder."""
    import torch

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = make_tiny_albert_tokenizer()
    cfg_dict = dict(TINY_ALBERT, vocab_size=len(tok), max_position_embeddings=max_positions)
    torch.manual_seed(seed)

    module = official_sop(cfg_dict)
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


def make_tiny_rovist_vg(folder: Path) -> dict[str, Any]:
    """RoViST-VG options for the registry-wide property tests: a converted random checkpoint (ViT + heads), a 4-d
    GloVe file and an IDF table (random weights: the numbers mean nothing)."""
    import numpy as np
    import torch
    from transformers import ViTConfig, ViTModel

    from vistkit.models import save_converted

    folder.mkdir(parents=True, exist_ok=True)
    vit_config: dict[str, Any] = {
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 20,
        "image_size": 16,
        "patch_size": 8,
    }
    gen = torch.Generator().manual_seed(0)
    state = {
        f"image_encoder.image_model.{k}": v
        for k, v in ViTModel(ViTConfig(**vit_config), add_pooling_layer=True).state_dict().items()
    }
    state["image_encoder.linear.weight"] = torch.randn(8, 16, generator=gen)
    state["image_encoder.linear.bias"] = torch.zeros(8)
    state["text_encoder.linear.weight"] = torch.randn(8, 4, generator=gen)
    state["text_encoder.linear.bias"] = torch.zeros(8)
    ckpt = save_converted(
        folder / "rovist-vg-tiny", state, kind="rovist-vg", config={"vit_config": vit_config}
    )
    rng = np.random.default_rng(0)
    glove = folder / "glove.tiny.4d.txt"
    glove.write_text(
        "".join(
            f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) + "\n"
            for w in ("unk", "beach", "water", "dinner", "city", "team")
        )
    )
    return {"checkpoint": ckpt, "glove": glove, "idf": {"beach": 2.0, "water": 1.5}, "idf_default": 1.0}


# --------------------------------------------------------------------------------------------------- causal LM
LM_WORDS = (
    "we went to the beach today the water was blue and cold my brother built a sand castle ate sandwiches on "
    "blanket sun set over sea family gathered for dinner grandma cooked big turkey everyone sat at long table "
    "kids played games after it wonderful night city busy this morning people walked work in rain man sold "
    "flowers corner buses were full found quiet cafe our team won game crowd cheered loudly players lifted "
    "coach fans waved flags stands celebrated all i you he she they had fun day great time of with "
    "did n't 's 're was is were be so very then"
).split()


def make_tiny_causal_lm(folder: str | Path, *, seed: int = 0, max_positions: int = 256) -> Path:
    """Write a random 2-layer Llama causal LM (width 32) with a WordLevel tokenizer over `LM_WORDS`.

    The tokenizer splits on whitespace and punctuation (``tokenizers``' ``Whitespace``), maps unknown words to
    ``[UNK]`` and has ``<|endoftext|>`` (id 0), which vistkit's LM layer uses as the start token. Weights are
    drawn with a large initializer range so that the random LM's predictions vary from token to token.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    vocab = {"<|endoftext|>": 0, "[UNK]": 1}
    for w in [*LM_WORDS, *string.punctuation]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.save_pretrained(str(out))
    cfg = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        initializer_range=0.3,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).save_pretrained(str(out))
    return out


def make_photo_folder(root: Path, photo_ids: Iterable[str]) -> Path:
    """``root/photos`` with a random 48x64 JPEG per photo id (seeded: the same pixels every run); made once."""
    import numpy as np
    from PIL import Image

    folder = root / "photos"
    if not folder.is_dir():
        folder.mkdir()
        rng = np.random.default_rng(0)
        for pid in photo_ids:
            Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(folder / f"{pid}.jpg")
    return folder

