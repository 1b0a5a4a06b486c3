"""An offline sentence-order cross-encoder: MiniLM with fine-tuned top layers (``coherence-minilm-ce-v1``).

Same task as the official RoViST-C / dHM-C ALBERT model: input ``[CLS] A [SEP] B [SEP]`` (token types 0 for
A, 1 for B), P(B follows A) = softmax(Linear(pooler(h_CLS)))[1]. For dHM-C, A is the prefix (all preceding
sentences joined by one space) and B the next sentence. Differences from the official model: the encoder is
``all-MiniLM-L6-v2`` (6-layer uncased BERT, 384-d, packaged as ``minilm-l6``) of which only the top layers,
the pooler and the classifier were fine-tuned; A is cut from the *left* (oldest context first) so a pair
fits ``max_length`` tokens (the official code has no truncation and drops stories over 512 tokens).

The shipped folder holds only the fine-tuned tensors (``top.safetensors``, float16: ``bert.encoder.layer.K.*``
for the trained layers, ``bert.pooler.*``, ``classifier.*``) and ``config.json`` (base model, layer split);
at load time the other weights come from the packaged base model. `scripts/train_coherence_ce.py` rebuilds
it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.errors import InputError
from vistkit.models.checkpoints import file_sha256
from vistkit.models.runtime import batches_by_length, choose_device

KIND = "coherence-cross-encoder"
DEFAULT_NAME = "coherence-minilm-ce-v1"
WEIGHTS_FILE = "top.safetensors"


def default_model_dir() -> Path:
    """The packaged cross-encoder coherence model folder."""
    return Path(__file__).resolve().parents[1] / "resources" / "models" / DEFAULT_NAME


def is_cross_encoder_folder(folder: str | Path) -> bool:
    """True when ``folder/config.json`` declares a `KIND` model."""
    cfg = Path(folder) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("kind") == KIND
    except (OSError, ValueError):
        return False


def cross_encoder_folder(model: str | Path | None) -> Path | None:
    """The folder of a cross-encoder coherence model named by ``model`` (the packaged name or a local folder),
    or None when ``model`` names something else."""
    if model is None:
        return None
    if str(model) == DEFAULT_NAME:
        return default_model_dir()
    return Path(model) if is_cross_encoder_folder(model) else None


class SopCrossEncoder:
    """BERT encoder + pooler + ``Linear(hidden, 2)`` sentence-order classifier (torch module wrapper).

    ``bert`` is a transformers ``BertModel`` (with pooler); ``classifier`` a ``torch.nn.Linear``.
    """

    def __init__(self, bert: Any, classifier: Any) -> None:
        import torch

        self.bert = bert
        self.classifier = classifier
        self.module = torch.nn.ModuleDict({"bert": bert, "classifier": classifier})

    def logits(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return self.classifier(out.pooler_output)


def encode_pairs(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], *, max_length: int
) -> list[dict[str, list[int]]]:
    """Token ids of ``[CLS] A [SEP] B [SEP]`` per pair; A loses tokens from its left beyond ``max_length``."""
    out = []
    for a, b in pairs:
        ids_a = tokenizer(a, add_special_tokens=False)["input_ids"]
        ids_b = tokenizer(b, add_special_tokens=False)["input_ids"]
        ids_b = ids_b[: max_length - 4]  # keep room for [CLS], [SEP], [SEP] and one token of A
        room = max_length - 3 - len(ids_b)
        ids_a = ids_a[len(ids_a) - room :] if len(ids_a) > room else ids_a
        input_ids = [tokenizer.cls_token_id, *ids_a, tokenizer.sep_token_id, *ids_b, tokenizer.sep_token_id]
        types = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
        out.append({"input_ids": input_ids, "token_type_ids": types})
    return out


def pad_batch(encoded: Sequence[dict[str, list[int]]], *, pad_id: int) -> dict[str, Any]:
    """Right-padded ``input_ids``/``token_type_ids``/``attention_mask`` tensors for a batch."""
    import torch

    width = max(len(e["input_ids"]) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(encoded), width), dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for k, e in enumerate(encoded):
        n = len(e["input_ids"])
        ids[k, :n] = torch.tensor(e["input_ids"])
        types[k, :n] = torch.tensor(e["token_type_ids"])
        mask[k, :n] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def build_base(base: str | Path) -> tuple[Any, Any, Any]:
    """(tokenizer, BertModel with pooler, Linear(hidden, 2)) from the packaged/local base model."""
    import torch
    from transformers import AutoTokenizer, BertModel

    from vistkit.models.resolve import resolve_model

    folder = resolve_model(base)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    bert = BertModel.from_pretrained(str(folder), use_safetensors=True, add_pooling_layer=True)
    classifier = torch.nn.Linear(int(bert.config.hidden_size), 2)
    return tokenizer, bert, classifier


class CrossEncoderCoherenceModel:
    """The packaged (or a retrained) cross-encoder coherence model."""

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        base: Any = None,
    ) -> None:
        """``base``: an already built ``(tokenizer, bert, classifier)`` (tests); else ``config["base"]``."""
        import torch
        from safetensors.torch import load_file

        self.folder = default_model_dir() if folder is None else Path(folder)
        cfg_path = self.folder / "config.json"
        if not cfg_path.is_file() or not (self.folder / WEIGHTS_FILE).is_file():
            raise InputError(
                f"{self.folder} is not a cross-encoder coherence model folder (needs config.json and "
                f"{WEIGHTS_FILE})"
            )
        self.config = json.loads(cfg_path.read_text(encoding="utf-8"))
        if self.config.get("kind") != KIND:
            raise InputError(f"{cfg_path} is not a {KIND!r} model config")
        tokenizer, bert, classifier = base if base is not None else build_base(self.config["base"])
        state = {k: v.float() for k, v in load_file(str(self.folder / WEIGHTS_FILE)).items()}
        bert_state = {k[len("bert.") :]: v for k, v in state.items() if k.startswith("bert.")}
        head_state = {k[len("classifier.") :]: v for k, v in state.items() if k.startswith("classifier.")}
        missing = set(bert_state) - set(bert.state_dict())
        if missing or not head_state:
            raise InputError(
                f"{self.folder / WEIGHTS_FILE} does not match its base model {self.config['base']}"
            )
        bert.load_state_dict(bert_state, strict=False)
        classifier.load_state_dict(head_state)
        self.device = choose_device(device)
        self.net = SopCrossEncoder(bert, classifier)
        self.net.module.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = int(self.config.get("max_length", 256))
        self.fingerprint = file_sha256(self.folder / WEIGHTS_FILE)[:12]
        self.name = str(self.config.get("name", self.folder.name))
        self._torch = torch

    def pair_probs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(B follows A) for each ``(A, B)``: length-sorted padded batches under ``inference_mode``."""
        torch = self._torch
        if not pairs:
            return np.zeros(0)
        encoded = encode_pairs(self.tokenizer, pairs, max_length=self.max_length)
        lengths = [len(e["input_ids"]) for e in encoded]
        out = np.zeros(len(pairs))
        with torch.inference_mode():
            for batch in batches_by_length(lengths, batch_size=self.batch_size, max_padding=0.25):
                feats = pad_batch([encoded[i] for i in batch], pad_id=int(self.tokenizer.pad_token_id))
                logits = self.net.logits(**{k: v.to(self.device) for k, v in feats.items()})
                out[batch] = torch.softmax(logits.float(), dim=-1)[:, 1].double().cpu().numpy()
        return out

    def context_probs(self, contexts: Sequence[Sequence[str]], candidates: Sequence[str]) -> np.ndarray:
        """P(candidate follows its context) with A = the context sentences joined by one space (dHM-C)."""
        return self.pair_probs([(" ".join(c), s) for c, s in zip(contexts, candidates, strict=True)])
