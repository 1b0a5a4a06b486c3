"""The RoViST sentence-order (SOP) classifier behind ``rovist-c`` and ``dhm-c``.

Architecture of usydnlp/rovist ``scripts/rovist_c.py`` (``SOPClassifier``): an ``AlbertModel``
(``albert-large-v1``), its pooler output (tanh(W h_[CLS]), 1024-d) -> ``Linear(1024, 2)``; the probability
that B follows A is ``softmax(logits)[1]``. The official forward computes a dropout but feeds the
*undropped* pooler output to the linear layer; at evaluation both are the same. The checkpoint
``sop_model_epoch4.pth.tar`` is ``{'model': state_dict, 'opt': argparse.Namespace(hidden_dim=1024,
dropout_prob=0.4, ...), 'epoch', ...}`` with keys ``albert_model.*``, ``linear.weight``, ``linear.bias``; it
holds neither the ALBERT config nor the tokenizer (the official code takes both from the hub id
``albert-large-v1``).

Pair encoding follows the official code exactly: the text ``"[CLS] A [SEP] B [SEP]"`` is tokenised as one
string, token types are ``(len(tok(A)) + 2) * [0] + (len(tok(B)) + 1) * [1]``, no truncation. Where the two
lengths disagree, or the input is longer than the position table, the official code raises; we report such a
pair as unscorable (`EncodedPair.error`) and the metric excludes its story.

The official code uses the slow (sentencepiece) ``AlbertTokenizer`` of transformers 4.x; transformers 5 only
has the ``tokenizers``-backed one converted from the same ``spiece.model``, which gives the same pieces on
ordinary text.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.errors import InputError, MissingDependencyError
from vistkit.models.checkpoints import (
    file_sha256,
    is_converted,
    is_legacy_checkpoint,
    jsonable,
    load_converted,
    load_legacy_checkpoint,
    model_fingerprint,
    save_converted,
)
from vistkit.models.runtime import batches_by_length, choose_device

KIND = "rovist-sop-albert"
CHECKPOINT_NAME = "sop_model_epoch4.pth.tar"
CHECKPOINT_HELP = (
    f"the official RoViST-C checkpoint {CHECKPOINT_NAME} (published by usydnlp/rovist: see its README's "
    "Google Drive link; dHM-visual-storytelling expects it at data/sop_model_epoch4.pth.tar)"
)
TOKENIZER_ID = "albert/albert-large-v1"

# albert-large-v1's config.json (the hub model the official SOPClassifier starts from); used when a
# checkpoint's tensor shapes match it and no config is given (the official checkpoint stores no config).
# Checked field by field against https://huggingface.co/albert/albert-large-v1/blob/main/config.json (the
# hub file also lists down_scale_factor, gap_size, net_structure_type and num_memory_blocks, which
# transformers' AlbertConfig does not use).
ALBERT_LARGE_V1: dict[str, Any] = {
    "model_type": "albert",
    "attention_probs_dropout_prob": 0.1,
    "bos_token_id": 2,
    "classifier_dropout_prob": 0.1,
    "embedding_size": 128,
    "eos_token_id": 3,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "inner_group_num": 1,
    "intermediate_size": 4096,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "num_attention_heads": 16,
    "num_hidden_groups": 1,
    "num_hidden_layers": 24,
    "pad_token_id": 0,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def build_sop_module(config: Mapping[str, Any], *, hidden_dim: int | None = None) -> Any:
    """A randomly initialised ``SOPClassifier`` (same parameter names as the official module)."""
    import torch
    from torch import nn
    from transformers import AlbertConfig, AlbertModel

    cfg = AlbertConfig(**{k: v for k, v in config.items() if k != "model_type"})

    class SOPClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.albert_model = AlbertModel(cfg)
            self.dropout = nn.Dropout(p=0.0)
            self.linear = nn.Linear(hidden_dim or cfg.hidden_size, 2)

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            pooled = self.albert_model(
                input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).pooler_output
            return self.linear(pooled)

    return SOPClassifier()


def _config_from(config: str | Path | Mapping[str, Any] | None, state: Mapping[str, Any]) -> dict[str, Any]:
    if config is not None:
        if isinstance(config, Mapping):
            return dict(config)
        if hasattr(config, "to_dict"):
            return dict(config.to_dict())  # an AlbertConfig
        p = Path(config)
        p = p / "config.json" if p.is_dir() else p
        if not p.is_file():
            raise InputError(f"ALBERT config {p} does not exist")
        return json.loads(p.read_text(encoding="utf-8"))
    words = state.get("albert_model.embeddings.word_embeddings.weight")
    dense = state.get("albert_model.encoder.embedding_hidden_mapping_in.weight")
    if (
        words is not None
        and dense is not None
        and tuple(words.shape) == (30000, 128)
        and dense.shape[0] == 1024
    ):
        return dict(ALBERT_LARGE_V1)
    raise InputError(
        "this SOP checkpoint is not albert-large-v1 sized; pass config=PATH to the ALBERT config.json it was "
        "trained from"
    )


def _clean_state(state: Mapping[str, Any]) -> dict[str, Any]:
    # older transformers saved the position_ids buffer; newer ones do not expect it
    return {k: v for k, v in state.items() if not k.endswith("embeddings.position_ids")}


@dataclass
class EncodedPair:
    """One (A, B) input: token ids and token types as the official code builds them, or why it cannot run."""

    input_ids: list[int]
    token_type_ids: list[int]
    error: str | None = None


class SOPModel:
    """A loaded SOP classifier + tokenizer; `pair_probs` scores many pairs in padded, length-sorted
    batches."""

    def __init__(
        self,
        module: Any,
        tokenizer: Any,
        *,
        fingerprint: str,
        max_positions: int,
        device: str | None = None,
        batch_size: int | None = None,
        precision: str = "fp32",
    ) -> None:
        if precision not in ("fp32", "bf16"):
            raise InputError(
                f"precision must be 'fp32' (exact) or 'bf16' (faster, approximate), not {precision!r}"
            )
        self.precision = precision
        self.device = choose_device(device)
        self.module = module.to(self.device).eval()
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.max_positions = max_positions
        # CPU: small batches (compute-bound, cache-friendly); GPU: large ones
        self.batch_size = batch_size or (64 if self.device.type == "cuda" else 8)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0

    # -- encoding ----------------------------------------------------------------------------------------
    def encode(self, a: str, b: str) -> EncodedPair:
        """``[CLS] a [SEP] b [SEP]`` with the official segment ids (see the module docstring)."""
        tok = self.tokenizer
        tokens = tok.tokenize(" ".join(["[CLS]", a, "[SEP]", b, "[SEP]"]))
        ids = list(tok.convert_tokens_to_ids(tokens))
        len_a = len(tok.tokenize(a))
        len_b = len(tok.tokenize(b))
        types = (len_a + 2) * [0] + (len_b + 1) * [1]
        if len(types) != len(ids):
            return EncodedPair(
                ids, types, "the pair's token count differs from its parts' (the official code fails)"
            )
        if len(ids) > self.max_positions:
            return EncodedPair(ids, types, f"the pair is longer than {self.max_positions} tokens")
        return EncodedPair(ids, types)

    # -- scoring -----------------------------------------------------------------------------------------
    def pair_probs(self, pairs: Sequence[EncodedPair]) -> np.ndarray:
        """P(B follows A) = softmax(logits)[1] for each encodable pair (NaN for pairs with an error)."""
        import torch

        out = np.full(len(pairs), np.nan, dtype=np.float64)
        todo = [i for i, p in enumerate(pairs) if p.error is None]
        lengths = [len(pairs[i].input_ids) for i in todo]
        with torch.inference_mode():
            for batch in batches_by_length(
                lengths, batch_size=self.batch_size, max_tokens=self.batch_size * 128, max_padding=0.25
            ):
                rows = [pairs[todo[j]] for j in batch]
                width = max(len(r.input_ids) for r in rows)
                ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
                types = torch.zeros((len(rows), width), dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for k, r in enumerate(rows):
                    n = len(r.input_ids)
                    ids[k, :n] = torch.tensor(r.input_ids)
                    types[k, :n] = torch.tensor(r.token_type_ids)
                    mask[k, :n] = 1
                # bf16 is opt-in: faster on CPUs with AVX512-BF16/AMX and on GPUs, but not exact (~1e-2)
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                    logits = self.module(ids.to(self.device), mask.to(self.device), types.to(self.device))
                probs = torch.softmax(logits.float(), dim=1)[:, 1].cpu().numpy()
                for k, j in enumerate(batch):
                    out[todo[j]] = float(probs[k])
        return out

    def pair_probs_one_by_one(self, pairs: Sequence[EncodedPair]) -> np.ndarray:
        """The official loop: one pair at a time, no padding (reference for tests and the benchmark)."""
        import torch

        out = np.full(len(pairs), np.nan, dtype=np.float64)
        with torch.no_grad():
            for i, p in enumerate(pairs):
                if p.error is not None:
                    continue
                ids = torch.tensor([p.input_ids], device=self.device)
                types = torch.tensor([p.token_type_ids], device=self.device)
                mask = torch.ones_like(ids)
                logits = self.module(ids, mask, types)
                out[i] = float(torch.softmax(logits, dim=1)[0, 1])
        return out


def _load_tokenizer(tokenizer: Any, folder: Path | None) -> Any:
    if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
        return tokenizer  # a ready tokenizer object
    from transformers import AutoTokenizer

    if tokenizer is None and folder is not None and (folder / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(folder))
    from vistkit.models.resolve import resolve_model

    try:
        where = resolve_model(tokenizer or TOKENIZER_ID)
    except MissingDependencyError:
        raise MissingDependencyError(
            f"the SOP model needs the albert-large-v1 tokenizer: pass tokenizer=PATH to a folder with its "
            f"tokenizer files, or download it once where you have internet (huggingface-cli download "
            f"{TOKENIZER_ID}); `vistkit models convert --tokenizer` copies it into a converted folder"
        ) from None
    return AutoTokenizer.from_pretrained(str(where))


def read_sop_weights(
    model: str | Path, *, trust_checkpoint: bool = False, config: Any = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(state_dict, albert_config, meta)`` from the official ``.pth.tar`` (trusted) or a converted dir."""
    p = Path(model).expanduser()
    if is_converted(p):
        state, meta = load_converted(p, kind=KIND)
        cfg = dict(config) if isinstance(config, Mapping) else meta["config"]
        return state, cfg, meta
    if is_legacy_checkpoint(p):
        obj = load_legacy_checkpoint(p, trust=trust_checkpoint)
        from vistkit.models.checkpoints import extract_state_dict

        state = _clean_state(extract_state_dict(obj))
        cfg = _config_from(config, state)
        opt = obj.get("opt")
        meta = {
            "source": {"file": p.name, "sha256": file_sha256(p)},
            "opt": jsonable(opt) if opt is not None else {},
            "epoch": jsonable(obj.get("epoch")),
        }
        return state, cfg, meta
    if p.exists():
        raise InputError(
            f"{p} is neither {CHECKPOINT_NAME} (a .pth.tar file) nor a converted SOP model folder"
        )
    raise MissingDependencyError(f"{p} does not exist; provide {CHECKPOINT_HELP}")


def load_sop_model(
    model: str | Path,
    *,
    trust_checkpoint: bool = False,
    config: Any = None,
    tokenizer: Any = None,
    device: str | None = None,
    batch_size: int | None = None,
    precision: str = "fp32",
) -> SOPModel:
    """Load the SOP classifier from the official checkpoint (``trust_checkpoint=True``) or a converted
    folder."""
    p = Path(model).expanduser()
    state, cfg, _meta = read_sop_weights(p, trust_checkpoint=trust_checkpoint, config=config)
    hidden_dim = int(state["linear.weight"].shape[1]) if "linear.weight" in state else None
    module = build_sop_module(cfg, hidden_dim=hidden_dim)
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(
            f"{p.name} does not match the SOP classifier (missing {sorted(missing)[:3]}, unexpected "
            f"{sorted(unexpected)[:3]}); is it {CHECKPOINT_NAME}?"
        )
    tok = _load_tokenizer(tokenizer, p if p.is_dir() else None)
    return SOPModel(
        module,
        tok,
        fingerprint=model_fingerprint(p),
        max_positions=int(cfg.get("max_position_embeddings", 512)),
        device=device,
        batch_size=batch_size,
        precision=precision,
    )


def convert_sop_checkpoint(
    checkpoint: str | Path,
    out_dir: str | Path,
    *,
    trust_checkpoint: bool = False,
    config: Any = None,
    tokenizer: str | Path | None = None,
) -> Path:
    """Convert ``sop_model_epoch4.pth.tar`` once to a safe folder (safetensors + JSON [+ tokenizer files])."""
    state, cfg, meta = read_sop_weights(checkpoint, trust_checkpoint=trust_checkpoint, config=config)
    out = save_converted(
        out_dir,
        state,
        kind=KIND,
        config=cfg,
        source=meta.get("source", {}),
        extra={"opt": meta.get("opt", {}), "epoch": meta.get("epoch")},
    )
    if tokenizer is not None:
        tok = _load_tokenizer(tokenizer, None)
        tok.save_pretrained(str(out))
    return out


def copy_tokenizer_files(src: str | Path, dst: str | Path) -> None:
    """Copy the tokenizer files of an HF folder into ``dst`` (used to make a converted folder
    self-contained)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "spiece.model"):
        f = Path(src) / name
        if f.is_file():
            shutil.copy2(f, Path(dst) / name)
