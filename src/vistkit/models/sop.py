"""The RoViST sentence-order (SOP) classifier behind ``rovist-c`` and ``dhm-c``.

Architecture of usydnlp/rovist ``scripts/rovist_c.py`` (``SOPClassifier``; RoViST Sec. 3.2, Eqs. 4-5): an
``AlbertModel`` (``albert-large-v1``), its pooler output (tanh(W h_[CLS]), 1024-d; Eq. 4) -> ``Linear(1024,
2)``; the probability that B follows A is ``softmax(logits)[1]`` (Eq. 5). The official forward computes a
dropout but feeds the *undropped* pooler output to the linear layer; at evaluation both are the same. The
checkpoint ``sop_model_epoch4.pth.tar`` is ``{'model': state_dict, 'opt': argparse.Namespace(hidden_dim=1024,
dropout_prob=0.4, ...), 'epoch', ...}`` with keys ``albert_model.*``, ``linear.weight``, ``linear.bias``; it
holds neither the ALBERT config nor the tokenizer (the official code takes both from the hub id
``albert-large-v1``).

Pair encoding follows the official code exactly (the paper's ``[CLS], s_i-1, [SEP], s_i, [SEP]``, Sec. 3.2):
the text ``"[CLS] A [SEP] B [SEP]"`` is tokenised as one string, token types are ``(len(tok(A)) + 2) * [0] +
(len(tok(B)) + 1) * [1]``, no truncation. Where the two lengths disagree, or the input is longer than the
position table, the official code raises; we report such a pair as unscorable (`EncodedPair.error`) and the
metric excludes its story.

The official code uses the slow (sentencepiece) ``AlbertTokenizer`` of transformers 4.x; transformers 5 only
has the ``tokenizers``-backed one converted from the same ``spiece.model``, which gives the same pieces on
ordinary text.
"""

from __future__ import annotations

import itertools
import json
import re
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
from vistkit.models.resolve import user_path
from vistkit.models.runtime import (
    DeviceBatches,
    LengthBuckets,
    choose_device,
    default_token_budget,
    gc_paused,
    pad_rows,
)

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
        from vistkit.data.readers import is_input_file, load_json

        p = Path(config)
        p = p / "config.json" if p.is_dir() else p
        if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
            raise InputError(f"ALBERT config {p} does not exist")
        data = load_json(p)
        if not isinstance(data, dict):
            raise InputError(f"ALBERT config {p} must be a JSON object, found {type(data).__name__}")
        return data
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


# Largest |story score - exact fp32 story score| measured for each opt-in fast path (random ALBERT-large SOP
# model, 1,000 dHM VIST test stories, H100, bench/bench_coherence.py): tf32 2.45e-4, bf16 1.8e-3 (rovist-c and
# dhm-c alike). Rounded up and named in the metric signature (``maxdev``); the trained checkpoint may differ.
FAST_DEVIATION: dict[str, str] = {"tf32x3": "1e-6", "tf32": "3e-4", "bf16": "2e-3"}

_SAFE_TEXT = re.compile(r"[\x20-\x7e]*")  # printable ASCII and plain spaces: the word-memo fast path


def _word_separable(tokenizer: Any) -> bool:
    """True when the fast tokenizer's pipeline tokenises space-separated printable-ASCII words independently.

    That holds for the ALBERT/sentencepiece pipeline (normaliser: quote replacements, NFKD, strip accents,
    lower case, precompiled charsmap, space collapsing; pre-tokeniser: whitespace split then Metaspace with a
    ``▁`` before every word; model: Unigram/BPE/WordPiece over each word), so a text's ids are the
    concatenation of its words' ids. Any other pipeline uses the general (batched, offset-checked) path.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    try:
        spec = json.loads(backend.to_str())
    except Exception:
        return False

    def parts(node: Any, key: str) -> list[dict[str, Any]]:
        if node is None:
            return []
        if node.get("type") == "Sequence":
            return [q for child in node.get(key, []) for q in parts(child, key)]
        return [node]

    for norm in parts(spec.get("normalizer"), "normalizers"):
        kind = norm.get("type")
        if kind in ("NFKD", "NFKC", "NFD", "NFC", "StripAccents", "Lowercase", "Precompiled"):
            continue
        if kind == "Replace":
            pattern = norm.get("pattern", {})
            text = pattern.get("String", pattern.get("Regex", ""))
            content = norm.get("content", "")
            if " " in content and not (pattern.get("Regex") == " {2,}" and content == " "):
                return False
            if "String" in pattern and (" " in text or not text):
                return False
            if "Regex" in pattern and text != " {2,}":
                return False
            continue
        return False
    pre = parts(spec.get("pre_tokenizer"), "pretokenizers")
    if len(pre) != 2 or pre[0].get("type") != "WhitespaceSplit" or pre[1].get("type") != "Metaspace":
        return False
    meta = pre[1]
    always = meta.get("prepend_scheme") == "always" or meta.get("add_prefix_space") is True
    return bool(always and meta.get("split", True) and meta.get("replacement") == "▁")


class SOPModel:
    """A loaded SOP classifier + tokenizer; `pair_probs` scores many pairs in padded, length-sorted
    batches.

    ``precision``: ``"fp32"`` (exact; the default), ``"tf32x3"`` (fp32-accurate linear layers as three TF32
    products on the tensor cores, `vistkit.models.precision`), or an opt-in fast path: ``"tf32"`` (CUDA TF32
    matrix products, fp32 weights) or ``"bf16"`` (the module cast to bfloat16, not autocast around fp32
    weights); the measured deviation of each is in `FAST_DEVIATION` and in the metric signature.
    """

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
        token_budget: int | None = None,
    ) -> None:

        from vistkit.models.precision import apply_precision, check_precision

        self.precision = check_precision(precision)
        self.device = choose_device(device)
        self.module = apply_precision(module.to(self.device).eval(), precision)
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        #: signature fields for what the checkpoint's hash does not cover (a config or tokenizer given beside it)
        self.signature_overrides: dict[str, str] = {}
        self.max_positions = max_positions
        # CPU: small batches (compute-bound, cache-friendly); GPU: large ones, by a token budget
        cuda = self.device.type == "cuda"
        self.batch_size = batch_size or (1024 if cuda else 8)
        # fp32 on a GPU is bound by arithmetic: padding costs time, so tight buckets; the fast paths are bound
        # by Python's kernel launches (24 layers per batch): fewer, larger batches (BENCHMARKS.md, issue 12)
        fast = cuda and precision != "fp32"
        self.max_padding = (0.3 if fast else 0.15) if cuda else 0.25
        self.token_budget = token_budget or (
            default_token_budget(self.device) * (2 if fast else 1) if cuda else self.batch_size * 128
        )
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self._word_ids: dict[str, list[int]] = {}
        self._cls_sep: tuple[int, int] | None = None
        self._added_re: re.Pattern[str] | None = None
        if self._backend is not None and _word_separable(tokenizer):
            cls_ids = self._backend.encode("[CLS]", add_special_tokens=False).ids
            sep_ids = self._backend.encode("[SEP]", add_special_tokens=False).ids
            if len(cls_ids) == 1 and len(sep_ids) == 1:
                self._cls_sep = (cls_ids[0], sep_ids[0])
                added: dict[str, int] = getattr(tokenizer, "get_added_vocab", dict)()
                self._added_re = re.compile("|".join(re.escape(t) for t in sorted({*added, "[CLS]", "[SEP]"})))

    # -- encoding ----------------------------------------------------------------------------------------
    def _pair(self, ids: list[int], len_a: int, len_b: int) -> EncodedPair:
        types = (len_a + 2) * [0] + (len_b + 1) * [1]
        if len(types) != len(ids):
            return EncodedPair(
                ids, types, "the pair's token count differs from its parts' (the official code fails)"
            )
        if len(ids) > self.max_positions:
            return EncodedPair(ids, types, f"the pair is longer than {self.max_positions} tokens")
        return EncodedPair(ids, types)

    def encode(self, a: str, b: str) -> EncodedPair:
        """``[CLS] a [SEP] b [SEP]`` with the official segment ids, by the official three tokenizer calls."""
        tok = self.tokenizer
        tokens = tok.tokenize(" ".join(["[CLS]", a, "[SEP]", b, "[SEP]"]))
        ids = list(tok.convert_tokens_to_ids(tokens))
        return self._pair(ids, len(tok.tokenize(a)), len(tok.tokenize(b)))

    def _fast_ok(self, text: str) -> bool:
        return _SAFE_TEXT.fullmatch(text) is not None and (self._added_re is None or not self._added_re.search(text))

    def encode_many(self, pairs: Sequence[tuple[str, str]]) -> list[EncodedPair]:
        """`encode` of every pair, identical ids and token types, without a tokenizer call per pair.

        Fast path (tokenizers whose words tokenise independently, `_word_separable`, and printable-ASCII text
        with no special-token string in it): each distinct word is tokenised once through the fast
        tokenizer's batch API and memoised; a pair's ids are ``[CLS]`` + the words of A + ``[SEP]`` + the
        words of B + ``[SEP]``, so ``len(tok(A))`` and ``len(tok(B))`` (the official token types) come from
        the same pieces. Other pairs: one batched call over the joined strings, whose offsets give the
        tokens of A, checked against one batched call over the parts (the official lengths).
        """
        with gc_paused():
            return self._encode_many(pairs)

    def _encode_many(self, pairs: Sequence[tuple[str, str]]) -> list[EncodedPair]:
        out: list[EncodedPair | None] = [None] * len(pairs)
        rest: list[int] = []
        backend: Any = self._backend
        if self._cls_sep is not None:
            memo = self._word_ids
            if len(memo) > 2_000_000:
                memo.clear()
            fast = [i for i, (a, b) in enumerate(pairs) if self._fast_ok(a) and self._fast_ok(b)]
            fast_set = set(fast)
            rest = [i for i in range(len(pairs)) if i not in fast_set]
            split = {i: (pairs[i][0].split(), pairs[i][1].split()) for i in fast}
            new = sorted({w for wa, wb in split.values() for w in (*wa, *wb) if w not in memo})
            if new:
                for w, enc in zip(new, backend.encode_batch(new, add_special_tokens=False), strict=True):
                    memo[w] = list(enc.ids)
            cls, sep = self._cls_sep
            chain, get = itertools.chain.from_iterable, memo.__getitem__
            for i in fast:
                wa, wb = split[i]
                ids_a = list(chain(map(get, wa)))
                ids_b = list(chain(map(get, wb)))
                out[i] = self._pair([cls, *ids_a, sep, *ids_b, sep], len(ids_a), len(ids_b))
        else:
            rest = list(range(len(pairs)))
        if rest and self._backend is not None:
            joined = [" ".join(["[CLS]", pairs[i][0], "[SEP]", pairs[i][1], "[SEP]"]) for i in rest]
            encs = self._backend.encode_batch(joined, add_special_tokens=False)
            parts = self._backend.encode_batch(
                [p for i in rest for p in pairs[i]], add_special_tokens=False
            )
            for k, i in enumerate(rest):
                out[i] = self._pair(list(encs[k].ids), len(parts[2 * k].ids), len(parts[2 * k + 1].ids))
        elif rest:  # a slow (Python) tokenizer: the official calls
            for i in rest:
                out[i] = self.encode(*pairs[i])
        return [p for p in out if p is not None]

    # -- scoring -----------------------------------------------------------------------------------------
    def _precision_context(self) -> Any:
        from vistkit.models.precision import precision_context

        return precision_context(self.precision, self.device)

    def _prepare(self, pairs: Sequence[EncodedPair]) -> Any:
        import torch

        ids, mask = pad_rows([p.input_ids for p in pairs], pad_id=self.pad_id)
        first_b = np.array([p.token_type_ids.count(0) for p in pairs], dtype=np.int64)
        types = (np.arange(ids.shape[1])[None, :] >= first_b[:, None]).astype(np.int64) * mask
        return torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)

    def launch(self, rows: Sequence[int], pairs: Sequence[EncodedPair], runner: DeviceBatches) -> None:
        """Run the model on one batch of encodable ``pairs`` (asynchronously on a GPU); their P(B follows A)
        become rows ``rows`` of ``runner.gather``."""
        import torch

        with torch.inference_mode(), self._precision_context():
            ids, mask, types = runner.to_device(runner.host(self._prepare(pairs)))
            logits = self.module(ids, mask, types)
            runner.submit(list(rows), torch.softmax(logits.float(), dim=1)[:, 1])

    def buckets(self) -> LengthBuckets:
        """Streaming length buckets sized for this model's device (see `LengthBuckets`)."""
        return LengthBuckets(
            token_budget=self.token_budget,
            batch_size=self.batch_size,
            max_padding=self.max_padding,
        )

    def submit(self, pairs: Sequence[EncodedPair], runner: DeviceBatches, *, offset: int = 0) -> None:
        """Launch the model on every encodable pair (asynchronously on a GPU); rows are ``offset + index``.

        Collect with ``runner.gather(n)``: P(B follows A) per row (NaN for pairs with an error).
        """
        buckets = self.buckets()
        full: list[list[int]] = []
        for i, p in enumerate(pairs):
            if p.error is None:
                batch = buckets.add(i, len(p.input_ids))
                if batch is not None:
                    full.append(batch)
        for batch in full + buckets.flush():
            self.launch([offset + i for i in batch], [pairs[i] for i in batch], runner)

    def runner(self) -> DeviceBatches:
        """A `DeviceBatches` with this model's device, batch size and token budget."""
        return DeviceBatches(self.device, token_budget=self.token_budget, batch_size=self.batch_size)

    def pair_probs(self, pairs: Sequence[EncodedPair]) -> np.ndarray:
        """P(B follows A) = softmax(logits)[1] for each encodable pair (NaN for pairs with an error)."""
        runner = self.runner()
        self.submit(pairs, runner)
        return runner.gather(len(pairs))

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
                out[i] = float(torch.softmax(logits.float(), dim=1)[0, 1])
        return out


def _load_tokenizer(tokenizer: Any, folder: Path | None) -> Any:
    if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
        return tokenizer  # a ready tokenizer object
    from transformers import AutoTokenizer

    if tokenizer is None and folder is not None and (folder / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    from vistkit.models.resolve import resolve_model

    try:
        where = resolve_model(tokenizer or TOKENIZER_ID)
    except MissingDependencyError:
        raise MissingDependencyError(
            f"the SOP model needs the albert-large-v1 tokenizer: pass tokenizer=PATH to a folder with its "
            f"tokenizer files, or download it once where you have internet (hf download "
            f"{TOKENIZER_ID}); `vistkit models convert --tokenizer` copies it into a converted folder"
        ) from None
    return AutoTokenizer.from_pretrained(str(where), trust_remote_code=False)


def read_sop_weights(
    model: str | Path, *, trust_checkpoint: bool = False, config: Any = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(state_dict, albert_config, meta)`` from the official ``.pth.tar`` (trusted) or a converted dir."""
    p = user_path(model)
    if is_converted(p):
        state, meta = load_converted(p, kind=KIND)
        cfg = dict(config) if isinstance(config, Mapping) else meta["config"]
        return state, cfg, meta
    if is_legacy_checkpoint(p):
        obj = load_legacy_checkpoint(p, trust=trust_checkpoint)
        from vistkit.models.checkpoints import extract_state_dict

        state = _clean_state(extract_state_dict(obj, where=p))
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


def sop_module_with(state: Mapping[str, Any], cfg: Mapping[str, Any], p: Path) -> Any:
    """The SOP classifier built from ``cfg`` holding ``state``; a config that cannot build it (negative or zero
    sizes, far larger than the weights: a memory bomb) or weights that do not fit it are one `InputError`."""
    from vistkit.limits import DECLARED_FLOOR_VALUES, DECLARED_RATIO
    from vistkit.models.checkpoints import declared_values_floor, transformers_load_errors

    stored = sum(int(t.numel()) for t in state.values() if hasattr(t, "numel"))
    # ALBERT always learns absolute positions; its config.json rarely says so, and the floor counts them only
    # when it does (a max_position_embeddings of 10^9 allocated 64 GB)
    declared = declared_values_floor({"position_embedding_type": "absolute", **cfg})
    if declared > DECLARED_FLOOR_VALUES and declared > DECLARED_RATIO * stored:
        raise InputError(
            f"{p}: its ALBERT config declares a model of at least {declared:,} weights, but the checkpoint holds "
            f"{stored:,}; is it the config.json these weights were trained with?"
        )
    weight: Any = state.get("linear.weight")
    hidden_dim = int(weight.shape[1]) if getattr(weight, "ndim", 0) == 2 else None
    with transformers_load_errors(p, "RoViST SOP classifier (ALBERT)"):
        module = build_sop_module(cfg, hidden_dim=hidden_dim)
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # "size mismatch for ...": not the translation above (it blamed a config.json)
        shown = next((line.strip() for line in str(exc).splitlines() if "size mismatch" in line), "")[:200]
        raise InputError(
            f"{p}: the SOP weights have other shapes than its ALBERT config declares ({shown or 'size mismatch'}); "
            "give the config these weights were trained with"
        ) from None
    if missing or unexpected:
        raise InputError(
            f"{p.name} does not match the SOP classifier (missing {sorted(missing)[:3]}, unexpected "
            f"{sorted(unexpected)[:3]}); is it {CHECKPOINT_NAME}?"
        )
    return module


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
    p = user_path(model)
    state, cfg, _meta = read_sop_weights(p, trust_checkpoint=trust_checkpoint, config=config)
    module = sop_module_with(state, cfg, p)
    tok = _load_tokenizer(tokenizer, p if p.is_dir() else None)
    from vistkit.models.checkpoints import refuse_foreign_tokenizer

    refuse_foreign_tokenizer(
        tok, int(module.albert_model.config.vocab_size), tokenizer if tokenizer is not None else p, what="SOP model"
    )
    loaded = SOPModel(
        module,
        tok,
        fingerprint=model_fingerprint(p),
        max_positions=int(cfg.get("max_position_embeddings", 512)),
        device=device,
        batch_size=batch_size,
        precision=precision,
    )
    # the checkpoint's hash does not cover the config or the tokenizer, and either changes the numbers (ALBERT's
    # layer count and head count, for one, change no weight's shape): both are named by content, so the official
    # checkpoint with its config and tokenizer beside it and its converted folder are signed alike
    from vistkit.models.checkpoints import tokenizer_fingerprint

    loaded.signature_overrides["cfg"] = albert_config_fingerprint(cfg)
    loaded.signature_overrides["tok"] = tokenizer_fingerprint(tok)
    return loaded


#: the ALBERT settings that change an evaluation-mode forward pass (dropout and bookkeeping keys do not)
_ALBERT_FORWARD_KEYS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups", "num_attention_heads",
    "intermediate_size", "inner_group_num", "hidden_act", "max_position_embeddings", "type_vocab_size",
    "layer_norm_eps", "position_embedding_type", "pad_token_id",
)  # fmt: skip


def albert_config_fingerprint(config: Mapping[str, Any]) -> str:
    """8 hex digits naming an ALBERT config by the settings its forward pass reads (defaults filled in)."""
    from transformers import AlbertConfig

    resolved = AlbertConfig(**{k: v for k, v in config.items() if k != "model_type"}).to_dict()
    from vistkit.models.checkpoints import json_hash

    return json_hash({k: resolved.get(k) for k in _ALBERT_FORWARD_KEYS})


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
    module = sop_module_with(state, cfg, Path(checkpoint))  # a folder that could never load is not written
    tok = _load_tokenizer(tokenizer, None) if tokenizer is not None else None
    if tok is not None:
        from vistkit.models.checkpoints import refuse_foreign_tokenizer

        refuse_foreign_tokenizer(tok, int(module.albert_model.config.vocab_size), str(tokenizer), what="SOP model")
    return save_converted(
        out_dir,
        state,
        kind=KIND,
        config=cfg,
        source=meta.get("source", {}),
        extra={"opt": meta.get("opt", {}), "epoch": meta.get("epoch")},
        files=None if tok is None else (lambda tmp: tok.save_pretrained(str(tmp))),
    )


def copy_tokenizer_files(src: str | Path, dst: str | Path) -> None:
    """Copy the tokenizer files of an HF folder into ``dst`` (used to make a converted folder
    self-contained)."""
    from vistkit.data.output import copy_file

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "spiece.model"):
        f = Path(src) / name
        if f.is_file():
            copy_file(f, Path(dst) / name, force=True)  # into the model folder being written
