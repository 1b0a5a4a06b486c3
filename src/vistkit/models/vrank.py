"""Vrank (Hsu et al., ACL 2022, "Learning to Rank Visual Stories From Human Ranking Data"): training, saving,
loading and prediction.

As published (Sec. 4 and "Training Details" of the appendix):

- the encoder is SimCSE BERT-base (default id ``princeton-nlp/sup-simcse-bert-base-uncased``), first
  pre-trained with the masked-language-model objective on human stories (the paper always does, on the SIND
  reference stories; here only when ``mlm_stories`` are given);
- the input is ``story1 [SEP] story2`` (BERT's pair encoding: ``[CLS] s1 [SEP] s2 [SEP]``) and a regression
  layer on the pooled embedding predicts the ranking gap, trained with mean squared error;
- the training set is made symmetric: every pair also appears swapped with its gap negated (Sec. 4, "to
  minimize dataset bias"), and every VHED pair is used, agreement 3 included;
- Adam, learning rate 2e-5, batch size 32, 30 epochs, seed 7777, mixed precision (fp16 on a CUDA device).

The paper does not name its training loop, but its setup (a Hugging Face model, checkpoints every 500 steps, mixed
precision, a seed) is that of the Hugging Face ``Trainer``, so the unstated details follow its defaults: Adam(W)
with weight decay 0, betas (0.9, 0.999), eps 1e-8, a learning rate decaying linearly to 0 without warm-up, gradient
norm clipped at 1.0, and the regression head of ``AutoModelForSequenceClassification`` (``num_labels=1``: dropout
then a linear layer on BERT's pooler output, MSE loss). The MLM stage's settings are not given; vistkit uses Hugging
Face ``run_mlm.py``'s defaults (3 epochs, learning rate 5e-5, 15% masking).

Sign convention: vistkit regresses ``StoryPair.gap`` (``avg_rank_2 - avg_rank_1``, > 0 when story 1 is
preferred), the negation of VHED's ``label`` column; a negated regression target gives the same model up to the
sign of the last layer, so predictions are the published ones with the sign vistkit uses everywhere.
Units: the paper's ranking gap (Sec. 3.1) is the difference of average ranks divided by N, the number of
stories in the task (N = 2-5, Table 1; its Table 2 gaps 0.12-0.42 are in these units); VHED's ``label``, the
default target (``target="gap"``), is the same difference before the division; ``target="normalised"``
regresses the paper's normalised gap (the two differ by the per-task factor 1/N).

A trained model is saved as a converted folder (`vistkit.models.checkpoints`): ``model.safetensors`` (no pickle),
``vistkit_model.json`` (kind ``vrank``, the encoder config, training settings, data name and hash) and the
tokenizer files.
"""

from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vistkit import progress
from vistkit.errors import InputError, MissingDependencyError

KIND = "vrank"
DEFAULT_ENCODER = "princeton-nlp/sup-simcse-bert-base-uncased"
TARGETS = ("gap", "normalised")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")

Progress = Callable[[str, int, int], None]  # (stage, done, total)
#: the largest ``--seed``: torch's generators take an unsigned 64-bit seed
SEED_MAX = 2**64 - 1


def _number(value: int) -> str:
    """An option's whole number for an error message: with thousands separators, or its leading digits and length
    when it is long (Python will not even print an integer of more than 4,300 digits)."""
    if abs(value) < 10**30:
        return f"{value:,}"
    digits = value.bit_length() * 30103 // 100000 + 1  # about log10(2) digits per bit
    return f"a {'negative ' if value < 0 else ''}number of about {digits:,} digits"


@dataclass(frozen=True)
class VrankSettings:
    """Training options (defaults: the published ones; see the module docstring)."""

    lr: float = 2e-5
    batch_size: int = 32
    epochs: int = 30
    seed: int = 7777
    precision: str = "auto"
    max_length: int = 512
    target: str = "gap"
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    mlm_epochs: int = 3
    mlm_lr: float = 5e-5
    mlm_probability: float = 0.15

    def check(self) -> None:
        """`InputError` naming the flag of the first setting out of range (learning rates, sizes, epochs, ...)."""
        for flag, rate in (("--lr", self.lr), ("--mlm-lr", self.mlm_lr)):
            if not (math.isfinite(rate) and 0 < rate <= 1):
                raise InputError(f"{flag} must be a learning rate above 0 and at most 1, e.g. 2e-5 (got {rate})")
        for flag, value, lo, hi in (
            ("--batch-size", self.batch_size, 1, 65_536),
            ("--epochs", self.epochs, 1, 10_000),
            ("--mlm-epochs", self.mlm_epochs, 0, 10_000),
            ("--max-length", self.max_length, 8, 1 << 20),
        ):
            if not lo <= value <= hi:
                raise InputError(f"{flag} must be from {lo:,} to {hi:,}, not {_number(value)}")
        if not 0 <= self.seed <= SEED_MAX:  # torch.manual_seed takes at most 64 bits (a larger one: ValueError)
            raise InputError(f"--seed must be from 0 to {SEED_MAX:,} (2**64 - 1), not {_number(self.seed)}")
        if self.precision not in PRECISIONS:
            raise InputError(f"--precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.target not in TARGETS:
            raise InputError(f"--target must be gap or normalised, not {self.target!r}")
        if self.schedule not in ("linear", "constant"):
            raise InputError(f"--schedule must be linear or constant, not {self.schedule!r}")


def check_threads(threads: int | None) -> None:
    """Refuse a thread count outside 1..1024 (None: torch's choice), without importing torch."""
    if threads is not None and not 1 <= threads <= 1024:
        raise InputError(f"--threads must be from 1 to 1,024, not {_number(threads)}")


def set_threads(threads: int | None) -> None:
    """torch's CPU threads (process-wide), 1..1024; None leaves torch's choice."""
    check_threads(threads)
    if threads is None:
        return
    import torch

    torch.set_num_threads(int(threads))


# --------------------------------------------------------------------------------------------------- data
def pair_target(pair: Any, target: str) -> float:
    """The regression target of a `StoryPair`: its gap (rank units) or the gap divided by N (``normalised``;
    `check_target` refuses pairs without N first, whose raw gap this gives)."""
    if target == "normalised":
        if pair.gap_norm is not None:
            return float(math.copysign(abs(pair.gap_norm), pair.gap)) if pair.gap else 0.0
        return float(pair.gap / pair.n_stories) if pair.n_stories else float(pair.gap)
    return float(pair.gap)


def check_target(pairs: Sequence[Any], target: str) -> None:
    """Refuse ``target="normalised"`` when a pair gives neither its N (``order``) nor its ``rank_norm``:
    `pair_target` could only give its raw gap, and the model would regress two units under one name."""
    if target != "normalised":
        return
    lacking = [p for p in pairs if not p.n_stories and p.gap_norm is None]
    if lacking:
        raise InputError(
            f"--target normalised divides each pair's gap by N, but {len(lacking):,} of the {len(pairs):,} pairs "
            f"give neither order nor rank_norm (first: pair {lacking[0].pair_id!r:.40}); give every pair its order "
            "(the number of stories ranked), or train with --target gap"
        )


def symmetric_examples(pairs: Sequence[Any], *, target: str = "gap") -> list[tuple[str, str, float]]:
    """(story 1, story 2, target) for every pair and its swap with the target negated (Vrank Sec. 4)."""
    out: list[tuple[str, str, float]] = []
    for p in pairs:
        y = pair_target(p, target)
        out.append((p.text_1, p.text_2, y))
        out.append((p.text_2, p.text_1, -y))
    return out


# --------------------------------------------------------------------------------------------------- torch bits
def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("Vrank needs PyTorch and transformers: pip install 'vistkit[models]'") from None
    return torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) like ``transformers.set_seed``."""
    torch = _torch()
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def resolve_encoder(encoder: str | Path) -> Path:
    """The local folder of an encoder id or path (path > packaged > Hugging Face cache; never downloaded)."""
    from vistkit.models.resolve import resolve_model

    try:
        folder = resolve_model(encoder)
    except MissingDependencyError as exc:
        raise MissingDependencyError(
            f"the Vrank encoder {str(encoder)!r} is not available offline ({str(exc).rstrip('.')}); "
            "pass --encoder with a local folder of a BERT-like model"
        ) from None
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise InputError(f"{folder} is not a Hugging Face model folder (no config.json); pass --encoder FOLDER")
    return folder


def _use_safetensors(folder: Path) -> bool:
    """Safetensors when the folder has them; else ``pytorch_model.bin``, which transformers reads with torch's
    tensors-only unpickler (``weights_only=True``), so no code in the file runs."""
    return any(folder.glob("*.safetensors"))


def load_encoder(encoder: str | Path, *, mlm: bool = False) -> tuple[Any, Any, Path]:
    """``(tokenizer, model, folder)``: a regression model (``num_labels=1``) or, with ``mlm``, a masked LM."""
    _torch()
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    from vistkit.models.checkpoints import refuse_foreign_tokenizer, refuse_missing_weights, refuse_non_finite

    folder = resolve_encoder(encoder)
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        kw = {"use_safetensors": _use_safetensors(folder), "output_loading_info": True}
        if mlm:
            model, info = AutoModelForMaskedLM.from_pretrained(str(folder), trust_remote_code=False, **kw)
        else:
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(folder), num_labels=1, problem_type="regression", trust_remote_code=False, **kw
            )
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:  # a damaged or foreign folder
        first = (str(exc).splitlines() or [""])[0][:200]
        raise InputError(
            f"cannot load the encoder in {folder} ({type(exc).__name__}: {first}); is it a complete Hugging Face "
            "model folder (config.json, tokenizer files, weights)?"
        ) from None
    # training starts a new head (and a pooler, if the folder has none) by design; the encoder itself must be whole
    encoder_part = f"{model.base_model_prefix}."
    in_encoder = [k for k in info.get("missing_keys") or () if k.startswith(encoder_part)]
    refuse_missing_weights({"missing_keys": in_encoder}, folder, what="encoder", unused=(f"{encoder_part}pooler.",))
    # NaN weights train NaN; a tokenizer of another model stops training with IndexError at its first such token
    refuse_non_finite(model.named_parameters(), folder)
    refuse_foreign_tokenizer(tok, int(model.get_input_embeddings().weight.shape[0]), folder, what="encoder")
    return tok, model, folder


def fit_max_length(max_length: int, config: Any) -> int:
    """``max_length`` capped at the positions the encoder has (RoBERTa-style models reserve two)."""
    positions = int(getattr(config, "max_position_embeddings", max_length) or max_length)
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        positions -= 2
    return min(max_length, positions)


def _autocast(torch: Any, device: Any, precision: str) -> tuple[Any, bool]:
    """``(context factory, use a grad scaler)`` for the precision on this device (auto: fp16 on CUDA)."""
    import contextlib

    if precision == "auto":
        precision = "fp16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext, False
    if precision == "fp16" and device.type != "cuda":
        raise InputError("fp16 mixed precision needs a CUDA device; use --precision fp32 or bf16 here")
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return (lambda: torch.autocast(device_type=device.type, dtype=dtype)), precision == "fp16"


def resolved_precision(precision: str, device: Any) -> str:
    """``auto`` resolved for ``device``: fp16 on CUDA, fp32 elsewhere; any other value as given."""
    return ("fp16" if device.type == "cuda" else "fp32") if precision == "auto" else precision


def _batches(n: int, batch_size: int, generator: Any) -> list[list[int]]:
    torch = _torch()
    order = torch.randperm(n, generator=generator).tolist()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def _linear_lambda(total: int, schedule: str) -> Callable[[int], float]:
    if schedule == "constant":
        return lambda step: 1.0
    return lambda step: max(0.0, (total - step) / max(1, total))


def mlm_pretrain(
    encoder: str | Path,
    texts: Sequence[str],
    out: Path,
    *,
    settings: VrankSettings,
    device: Any,
    progress: Progress | None = None,
) -> Path:
    """Masked-LM pre-training of ``encoder`` on ``texts`` (one story per example); saves the model and tokenizer
    to ``out`` and returns it."""
    torch = _torch()
    from transformers import DataCollatorForLanguageModeling

    tok, model, _ = load_encoder(encoder, mlm=True)
    seed_everything(settings.seed)
    model.to(device).train()
    enc = tok(list(texts), truncation=True, max_length=fit_max_length(settings.max_length, model.config))
    features = [{"input_ids": ids} for ids in enc["input_ids"]]
    collator = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=settings.mlm_probability)
    gen = torch.Generator().manual_seed(settings.seed)
    steps_per_epoch = math.ceil(len(features) / settings.batch_size)
    total = steps_per_epoch * settings.mlm_epochs
    opt = torch.optim.AdamW(model.parameters(), lr=settings.mlm_lr, weight_decay=0.0, eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _linear_lambda(total, "linear"))
    autocast, scaled = _autocast(torch, device, settings.precision)
    scaler = torch.amp.GradScaler(device.type) if scaled else None
    step = 0
    for _ in range(settings.mlm_epochs):
        for idx in _batches(len(features), settings.batch_size, gen):
            batch = {k: v.to(device) for k, v in collator([features[i] for i in idx]).items()}
            with autocast():
                loss = model(**batch).loss
            _step(torch, model, opt, sched, loss, scaler, settings.max_grad_norm)
            step += 1
            if progress:
                progress("mlm", step, total)
    from vistkit.data.output import files_into

    out.mkdir(parents=True, exist_ok=True)
    with files_into(out) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
    return out


def _step(torch: Any, model: Any, opt: Any, sched: Any, loss: Any, scaler: Any, max_norm: float) -> None:
    opt.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() < scale:  # inf/NaN gradients: the step was skipped, so is the schedule (as the Trainer)
            return
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
    sched.step()


# --------------------------------------------------------------------------------------------------- model
class VrankModel:
    """A loaded Vrank: ``predict(texts_1, texts_2)`` gives the raw predicted gap g(s1, s2) per pair (> 0: story 1
    preferred), batched by length, in fp32, independent of batch composition."""

    def __init__(
        self, tokenizer: Any, model: Any, *, meta: dict[str, Any], device: Any = None, batch_size: int = 32
    ) -> None:
        from vistkit.models.runtime import choose_device

        self.tokenizer = tokenizer
        self.device = device if device is not None and not isinstance(device, str) else choose_device(device)
        self.model = model.to(self.device).eval()
        self.meta = meta
        self.batch_size = batch_size
        self.max_length = fit_max_length(int(meta.get("config", {}).get("max_length", 512)), model.config)

    def predict(self, texts_1: Sequence[str], texts_2: Sequence[str]) -> np.ndarray:
        """The raw predicted gap g(s1, s2) per pair of texts (> 0: the first is preferred); `InputError` when the
        lists differ in length."""
        torch = _torch()
        from vistkit.models.runtime import batches_by_length

        if len(texts_1) != len(texts_2):
            raise InputError("Vrank needs as many first stories as second stories")
        out = np.zeros(len(texts_1))
        if not len(texts_1):
            return out
        enc = self.tokenizer(list(texts_1), list(texts_2), truncation=True, max_length=self.max_length)
        ids = enc["input_ids"]
        done = 0
        with torch.inference_mode():
            for batch in batches_by_length([len(x) for x in ids], batch_size=self.batch_size):
                feats = self.tokenizer.pad({k: [enc[k][i] for i in batch] for k in enc.keys()}, return_tensors="pt")
                feats = {k: v.to(self.device) for k, v in feats.items()}
                logits = self.model(**feats).logits.float().squeeze(-1)
                out[batch] = logits.cpu().numpy().astype(float)
                done += len(batch)
                progress.fraction(done, len(ids))  # the open task (vistkit.progress), if any
        return out


def tensors_sha256(state_dict: Any) -> str:
    """SHA-256 over the tensors (sorted names, dtype, shape, bytes): the model's identity in signatures.

    Unlike a hash of ``model.safetensors`` it does not depend on the file header, whose metadata order safetensors
    does not fix (two identical trainings would otherwise get different hashes).
    """
    import hashlib

    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(_torch().uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_vrank(
    folder: Path,
    model: Any,
    tokenizer: Any,
    *,
    encoder: str,
    settings: VrankSettings,
    data: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a trained Vrank as a converted folder (safetensors + JSON + tokenizer files)."""
    from vistkit.models.checkpoints import save_converted

    config = {"encoder_config": model.config.to_dict(), "max_length": settings.max_length, "target": settings.target}
    save_converted(
        folder,
        model.state_dict(),
        kind=KIND,
        config=config,
        source={"encoder": str(encoder)},
        extra={
            "training": asdict(settings),
            "data": data,
            "tensors_sha256": tensors_sha256(model.state_dict()),
            **(extra or {}),
        },
        files=lambda tmp: tokenizer.save_pretrained(str(tmp)),
    )
    return folder


#: files of which a Hugging Face tokenizer needs at least one (fast or slow, WordPiece, BPE or SentencePiece)
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def load_vrank(folder: str | Path, *, device: str | None = None, batch_size: int = 32) -> VrankModel:
    """A trained Vrank folder (written by `save_vrank`; no pickle is read)."""
    _torch()
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from vistkit.models.checkpoints import is_converted, load_converted
    from vistkit.models.resolve import user_path

    p = user_path(folder)
    if not p.exists():
        raise MissingDependencyError(
            f"no Vrank model at {p}; train one with `vistkit vrank train PAIRS.csv --output DIR` and pass that folder"
        )
    if not is_converted(p):
        raise InputError(f"{p} is not a trained Vrank folder (it needs model.safetensors and vistkit_model.json)")
    state, meta = load_converted(p, kind=KIND)
    cfg = dict(meta["config"]["encoder_config"])
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = AutoModelForSequenceClassification.from_config(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise InputError(
            f"{p}: the weights do not fit the saved config (missing {missing[:3]}, extra {unexpected[:3]})"
        )
    from vistkit.models.checkpoints import transformers_load_errors

    if not any((p / name).is_file() for name in _TOKENIZER_FILES):
        raise InputError(
            f"{p}: the tokenizer files are missing (was its saving interrupted?); train the model again"
        )
    with transformers_load_errors(p, what="Vrank model's tokenizer"):  # a folder saved before files_sha256
        tok = AutoTokenizer.from_pretrained(str(p), trust_remote_code=False)
    from vistkit.models.checkpoints import refuse_foreign_tokenizer

    refuse_foreign_tokenizer(tok, int(model.get_input_embeddings().weight.shape[0]), p, what="Vrank model")
    return VrankModel(tok, model, meta=meta, device=device, batch_size=batch_size)


# --------------------------------------------------------------------------------------------------- training
def train_vrank(
    pairs: Sequence[Any],
    out: str | Path,
    *,
    encoder: str | Path = DEFAULT_ENCODER,
    settings: VrankSettings | None = None,
    mlm_texts: Sequence[str] | None = None,
    data_name: str = "pairs",
    data_sha256: str = "",
    device: str | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
) -> Path:
    """Train Vrank on ``pairs`` (`StoryPair`; zero-gap pairs are kept: their target is 0) and save it to ``out``.

    Returns the folder. ``mlm_texts``: optional MLM pre-training stories (Sec. 4); ``progress(stage, done,
    total)`` is called after every optimiser step. ``threads``: CPU threads for torch (process-wide; e.g. 1 for tiny
    models on a busy machine).
    """
    settings = settings or VrankSettings()
    settings.check()
    if not pairs:
        raise InputError("there are no pairs to train on")
    check_target(pairs, settings.target)  # before torch loads or a folder is made
    _torch()
    set_threads(threads)
    from vistkit.models.runtime import choose_device

    dev = choose_device(device)
    out = Path(out)
    from vistkit.data.output import MARKER, MODEL_MARKERS, prepare_folder

    if not (out / MARKER).is_file():  # new, empty or vistkit's; marked before the MLM stage writes into it
        out.parent.mkdir(parents=True, exist_ok=True)
        prepare_folder(out, markers=MODEL_MARKERS)
    start = time.time()
    scratch = out / "mlm"  # the MLM stage's model: removed when training ends, however it ends
    shutil.rmtree(scratch, ignore_errors=True)  # left by a run that was killed
    try:
        return _train_from(
            pairs, out, scratch, encoder=encoder, settings=settings, mlm_texts=mlm_texts, data_name=data_name,
            data_sha256=data_sha256, dev=dev, progress=progress, start=start,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _train_from(
    pairs: Sequence[Any],
    out: Path,
    scratch: Path,
    *,
    encoder: str | Path,
    settings: VrankSettings,
    mlm_texts: Sequence[str] | None,
    data_name: str,
    data_sha256: str,
    dev: Any,
    progress: Progress | None,
    start: float,
) -> Path:
    """`train_vrank` once its folder is prepared: MLM stage (into ``scratch``), regression, save."""
    torch = _torch()
    source: str | Path = encoder
    pooler: dict[str, Any] = {}
    if mlm_texts:
        source = mlm_pretrain(encoder, mlm_texts, scratch, settings=settings, device=dev, progress=progress)
        # the masked LM has no pooler: keep the encoder's own (SimCSE's), take every other weight from the MLM stage
        _, base_model, _ = load_encoder(encoder)
        pooler = {k: v for k, v in base_model.state_dict().items() if ".pooler." in k}
        del base_model
    seed_everything(settings.seed)  # before the regression head is created, so it is the same on every run
    tok, model, _ = load_encoder(source)
    if pooler:
        model.load_state_dict(pooler, strict=False)
    max_length = fit_max_length(settings.max_length, model.config)
    model.to(dev).train()
    examples = symmetric_examples(pairs, target=settings.target)
    enc = tok([a for a, _, _ in examples], [b for _, b, _ in examples], truncation=True, max_length=max_length)
    labels = [y for _, _, y in examples]
    gen = torch.Generator().manual_seed(settings.seed)
    steps_per_epoch = math.ceil(len(examples) / settings.batch_size)
    total = steps_per_epoch * settings.epochs
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _linear_lambda(total, settings.schedule))
    autocast, scaled = _autocast(torch, dev, settings.precision)
    scaler = torch.amp.GradScaler(dev.type) if scaled else None
    losses: list[float] = []
    step = 0
    loop_start = time.time()
    for _ in range(settings.epochs):
        epoch_loss = 0.0
        for idx in _batches(len(examples), settings.batch_size, gen):
            feats = tok.pad({k: [enc[k][i] for i in idx] for k in enc.keys()}, return_tensors="pt")
            feats = {k: v.to(dev) for k, v in feats.items()}
            y = torch.tensor([labels[i] for i in idx], dtype=torch.float32, device=dev)
            with autocast():
                pred = model(**feats).logits.squeeze(-1)
            loss = torch.nn.functional.mse_loss(pred.float(), y)
            _step(torch, model, opt, sched, loss, scaler, settings.max_grad_norm)
            epoch_loss += float(loss.detach()) * len(idx)
            step += 1
            if progress:
                progress("train", step, total)
        losses.append(epoch_loss / len(examples))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    loop_seconds = time.time() - loop_start
    model.eval()
    data = {
        "name": data_name,
        "sha256": data_sha256,
        "pairs": len(pairs),
        "examples": len(examples),
        "mlm_stories": len(mlm_texts or []),
    }
    extra = {
        "epoch_loss": losses,
        "device": str(dev),
        "precision": resolved_precision(settings.precision, dev),
        "seconds": round(time.time() - start, 1),
        "train_loop_seconds": round(loop_seconds, 3),
    }
    save_vrank(out, model, tok, encoder=str(encoder), settings=settings, data=data, extra=extra)
    return out
