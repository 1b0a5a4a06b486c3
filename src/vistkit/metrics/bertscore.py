"""``bertscore``: BERTScore (Zhang et al. 2020) with an offline default model.

Tokens of the hypothesis and of a reference are embedded by one layer of a transformer encoder; every
token is greedily matched to its most cosine-similar token on the other side (Eq. 1-2 of the paper: R sums
over reference tokens, P over hypothesis tokens, optionally weighted by idf, Eq. 3), F1 = 2PR / (P + R).
The arithmetic follows the official ``bert_score`` package (Tiiiger/bert_score 0.3.13) step by step:

- tokens are the tokenizer's ``encode(text.strip(), add_special_tokens=True, truncation=True)``
  ([CLS]/[SEP] included); an empty text is ``[CLS] [SEP]``. The special tokens take part in the matching
  but weigh 0;
- idf (``idf=True``) is computed from the references of the whole call as bert_score does: one document
  per reference (a reference shared by several items counts once per item), ``idf(w) = log((M + 1) /
  (df(w) + 1))``, unseen pieces ``log(M + 1)``; without idf every piece weighs 1 except [CLS]/[SEP] (0).
  The paper's Eq. 3 is the unsmoothed ``-log(df(w) / M)``; we follow the code (its numbers are the
  published ones);
- several references: P, R and F1 are each the maximum over the references (bert_score's multi-reference
  rule, so the three maxima may come from different references);
- baseline rescaling (section 4 of the paper / bert_score's ``rescale_with_baseline``): ``x' = (x - b) /
  (1 - b)`` with ``b`` the baseline of P, R, F1 for the chosen layer.

One deliberate difference: bert_score matches padded batches and masks padding to a cosine of 0, so when
every real similarity of a token is negative the padding wins and the result depends on the batch. We
match real tokens only, which equals bert_score with ``batch_size=1`` (and any batch size when no token has
only negative similarities; on 400 VIST pairs with MiniLM the largest F1 difference from bert_score at batch
size 64 was 6e-5, and 2e-8 for that pair at batch size 1).

The original default (roberta-large, layer 17) needs a download; the offline default here is the packaged
all-MiniLM-L6-v2 (``minilm-l6``) at the layer in `DEFAULT_LAYERS`. Hub ids (``roberta-large``) still work
from a local Hugging Face cache, with bert_score's own layer table and baseline files when that package is
installed.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vistkit import progress
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError, MissingDependencyError, warn
from vistkit.metrics.base import Item, Metric, MetricCard, Score, check_num_threads, corpus_mean, register
from vistkit.models.precision import precision_fields

DEFAULT_MODEL = "minilm-l6"
# Layer of each packaged model. minilm-l6: measured (bench/bench_bertscore.py layers: 300 VIST test
# sequences, 600 held-out-human vs machine (TAPM, PR-VIST) pairs, each scored against the other humans of its
# sequence): the human story wins 0.393 / 0.403 / 0.418 / 0.423 / 0.467 / 0.480 / 0.552 of pairs at layers
# 0-6, so the default is the last layer (the one all-MiniLM-L6-v2 was trained to pool).
DEFAULT_LAYERS: dict[str, int] = {"minilm-l6": 6}
#: opt-in modes (``precision=``): fp32 exact (default), tf32x3 fp32-accurate on tensor cores, bf16 faster; plain
#: tf32 is not offered here (its deviation needs a GPU to measure: attention products run in TF32 too)
PRECISIONS = ("fp32", "tf32x3", "bf16")
#: largest |F1 - exact fp32 F1| measured per mode (bench/bench_precision.py --metrics bertscore --stories 200:
#: MiniLM-L6 layer 6, VIST stories; tf32x3 1.5e-7 with the tensor cores' rounding emulated, bf16 1.8e-3 on a CPU),
#: rounded up with room for other stories and a GPU's summation order
FAST_DEVIATION: dict[str, str] = {"tf32x3": "1e-6", "bf16": "3e-3"}
_CACHE_FLOATS = 64_000_000  # 256 MB of float32 token embeddings kept between calls


def _warn_zero_idf(undefined: int, n: int, m: int) -> None:
    """Warn when idf weighs every word of ``undefined`` of ``n`` stories, or of a reference of theirs, zero (P or R
    undefined: bert_score's F1 0, kept), over ``m`` reference texts: a story equal to its one reference scored 0."""
    if not undefined:
        return
    why = (
        "with one reference text, idf = log(2/2) = 0 for every word"
        if m == 1
        else f"a word found in all {m:,} reference texts has idf log({m + 1:,}/{m + 1:,}) = 0"
    )
    warn(
        f"bertscore: idf weighs every word of {undefined:,} of {n:,} stories, or of a reference of theirs, zero "
        f"({why}): their P or R is undefined (NaN) and F1 0, as bert_score gives; score idf over more reference "
        "stories, or turn idf off"
    )


def _signed_values(values: Sequence[float]) -> str:
    """Baseline values for the signature: each as ``:g`` shows it when that is the value, else exactly (``:g`` keeps
    six digits, so baselines 0.83123451 and 0.83123454, other rescaled numbers, were signed alike)."""
    return ",".join(f"{v:g}" if float(f"{v:g}") == v else repr(float(v)) for v in values)


def _default_layer(model: str, n_layers: int) -> int:
    if model in DEFAULT_LAYERS:
        return DEFAULT_LAYERS[model]
    try:  # bert_score's tuned layers (WMT16) for hub ids such as roberta-large
        from bert_score.utils import model2layers

        if model in model2layers:
            return int(model2layers[model])
    except ImportError:
        pass
    return n_layers


def read_baseline(path: str | Path, layer: int) -> tuple[float, float, float]:
    """P, R, F baselines of ``layer`` from a bert_score baseline file (CSV ``LAYER,P,R,F``)."""
    from vistkit.data.readers import is_input_file, read_csv

    if not str(path).strip():  # Path("") would be the current folder
        raise InputError("bertscore: baseline_path is empty; pass a CSV with columns LAYER,P,R,F")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"bertscore: baseline file {p} is a folder; pass a CSV with columns LAYER,P,R,F")
    if not is_input_file(p):  # a file, or ARCHIVE.zip:MEMBER
        raise InputError(f"bertscore: baseline file {p} does not exist; pass a CSV with columns LAYER,P,R,F")
    names, rows = read_csv(p, delimiter=",")
    if missing := [c for c in ("LAYER", "P", "R", "F") if c not in names]:
        raise InputError(f"bertscore: baseline file {p} lacks the column(s) {', '.join(missing)} (LAYER,P,R,F)")
    for n, row in enumerate(rows, start=2):
        try:
            if not (row["LAYER"].strip() and float(row["LAYER"]) == layer):  # inf / nan / 1.5 match no layer
                continue
            values = float(row["P"]), float(row["R"]), float(row["F"])
            if not all(math.isfinite(v) for v in values):
                raise ValueError("not finite")
        except ValueError:
            raise InputError(
                f"bertscore: baseline file {p} line {n} holds a value that is not a finite number"
            ) from None
        if not all(v < 1.0 for v in values):  # rescaling divides by 1 - b: by zero, or turns the scale upside down
            raise InputError(
                f"bertscore: baseline file {p} line {n} holds a baseline of 1 or more (P, R, F = {row['P']}, "
                f"{row['R']}, {row['F']}); rescaling divides by 1 - b, so each must be below 1 (a baseline on a "
                "0-100 scale: divide it by 100)"
            )
        return values
    raise InputError(f"bertscore: baseline file {p} has no row for layer {layer}")


def _packaged_baseline(model: str, lang: str) -> Path | None:
    try:
        import bert_score
    except ImportError:
        return None
    p = Path(bert_score.__file__).resolve().parent / "rescale_baseline" / lang / f"{model}.tsv"
    return p if p.is_file() else None


def _resolve(name: str) -> Path:
    """`resolve_model`, plus legacy hub ids with no organisation (``roberta-large``) from the local cache."""
    from vistkit.models.resolve import resolve_model

    try:
        return resolve_model(name)
    except MissingDependencyError:
        if "/" in name or Path(name).expanduser().exists():
            raise
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))  # never downloads
    except Exception:
        raise MissingDependencyError(
            f"bertscore: model {name!r} is neither a local folder, a packaged model (minilm-l6) nor in the "
            "local Hugging Face cache; download it once where you have internet (hf download "
            f"{name}) or pass a local folder"
        ) from None


def _model_label(name: str, path: Path) -> str:
    """The signature's model: a packaged model by its name (its hub id too: the same weights), any other by its
    name (a folder by its own name) and the hash of its weights: two folders of one name, or a hub id whose
    cached revision changed, were signed alike."""
    from vistkit.metrics._options import model_label
    from vistkit.models.checkpoints import model_fingerprint
    from vistkit.models.resolve import PACKAGED_MODELS

    if not Path(name).expanduser().exists():
        for packaged in PACKAGED_MODELS.values():
            if name in (packaged.name, packaged.hub_id):
                return packaged.name
    return f"{model_label(name)}@{model_fingerprint(path)}"


#: padded tokens of one CPU batch at most, whatever ``batch_size`` says: 2,000 texts of 512 tokens in one batch
#: (``-O bertscore.batch_size=65536``) needed tens of GB of attention scores; the default (64 texts) never reaches it
CPU_TOKEN_BUDGET = 1 << 16


class _Encoder:
    """A tokenizer + encoder truncated to the chosen layer; embeds texts into unit-norm token vectors."""

    def __init__(
        self,
        path: Path,
        *,
        layer: int | None,
        model_name: str,
        fast_tokenizer: bool,
        device: str | None,
        precision: str = "fp32",
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from vistkit.models.checkpoints import (
            refuse_foreign_tokenizer,
            refuse_missing_weights,
            refuse_non_finite,
            transformers_load_errors,
        )
        from vistkit.models.runtime import quiet_transformers

        self.torch = torch
        try:
            with quiet_transformers():  # no "Loading weights" bar or load report on the user's stderr
                if path.is_dir() and not (path / "config.json").is_file():  # not a model folder at all
                    raise InputError(
                        f"bertscore: {path} has no config.json, so it is not a Hugging Face model folder: give one "
                        "(config.json, weights and tokenizer files) or a hub id in the local cache"
                    )
                self.tokenizer = AutoTokenizer.from_pretrained(
                    str(path), trust_remote_code=False, use_fast=fast_tokenizer
                )
                with transformers_load_errors(path, "BERTScore encoder"):  # e.g. weights that do not fit the config
                    model, info = AutoModel.from_pretrained(
                        str(path), trust_remote_code=False, output_loading_info=True
                    )
        except InputError:
            raise
        except (OSError, ValueError) as exc:
            raise MissingDependencyError(f"bertscore: cannot load the model at {path}: {exc}") from None

        # BERTScore reads the hidden states only: a checkpoint saved from a masked LM has no pooler
        refuse_missing_weights(info, path, what="BERTScore encoder", unused=("pooler.",))
        # NaN weights scored 0.0 in silence; a tokenizer of another model stopped with IndexError mid-run
        refuse_non_finite(model.named_parameters(), path)
        refuse_foreign_tokenizer(
            self.tokenizer, int(model.get_input_embeddings().weight.shape[0]), path, what="BERTScore model"
        )
        model.eval()
        if hasattr(model, "decoder") and hasattr(
            model, "encoder"
        ):  # encoder-decoder: its encoder (bert_score)
            model = model.encoder
        n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
        self.layer = _default_layer(model_name, n_layers) if layer is None else int(layer)
        if not 0 <= self.layer <= n_layers:
            raise InputError(
                f"bertscore: layer must be between 0 and {n_layers} for {model_name} (got {layer})"
            )
        # Run only the layers needed, as bert_score does (the top layer's output then IS the chosen layer).
        self.truncated = False
        encoder = getattr(model, "encoder", None)
        if encoder is not None and hasattr(encoder, "layer"):
            encoder.layer = torch.nn.ModuleList(list(encoder.layer[: self.layer]))
            self.truncated = True
        from vistkit.models.runtime import choose_device

        self.device = str(choose_device(device))
        self.size = "small" if int(getattr(model.config, "hidden_size", 1024) or 1024) <= 768 else "large"
        from vistkit.models.precision import apply_precision

        self.precision = precision
        self.model = apply_precision(model.to(self.device), precision)
        tok = self.tokenizer
        self.special = {i for i in (tok.cls_token_id, tok.sep_token_id) if i is not None}
        limit = getattr(tok, "model_max_length", None) or 512
        positions = getattr(model.config, "max_position_embeddings", None)
        # bert_score truncates at model_max_length; a tokenizer saved without one reports a huge number
        self.max_length = int(min(limit, positions)) if positions and limit > 100_000 else int(limit)
        self.prefix_space = type(tok).__name__.startswith(("Roberta", "GPT2", "Bart", "Longformer"))

    def encode(self, text: str) -> list[int]:
        text = text.strip()
        if not text:  # bert_score: build_inputs_with_special_tokens([]), i.e. the special tokens alone
            return list(self.tokenizer.encode("", add_special_tokens=True))
        kwargs: dict[str, Any] = {
            "add_special_tokens": True,
            "max_length": self.max_length,
            "truncation": True,
        }
        if self.prefix_space:
            kwargs["add_prefix_space"] = True
        return list(self.tokenizer.encode(text, **kwargs))

    def cut(self, text: str, ids: Sequence[int]) -> bool:
        """Whether ``text``, tokenised as ``ids``, was cut at `max_length` (re-tokenised whole only when it
        reaches that length)."""
        if len(ids) < self.max_length:
            return False
        kwargs: dict[str, Any] = {"add_special_tokens": True, "truncation": False, "verbose": False}
        if self.prefix_space:
            kwargs["add_prefix_space"] = True
        return len(self.tokenizer.encode(text.strip(), **kwargs)) > self.max_length

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` of each text, the non-empty ones in one batched tokenizer call (identical ids)."""
        out: list[list[int] | None] = [None] * len(texts)
        todo = [i for i, t in enumerate(texts) if t.strip()]
        for i, t in enumerate(texts):
            if not t.strip():
                out[i] = self.encode(t)
        if todo and getattr(self.tokenizer, "is_fast", False):
            kwargs: dict[str, Any] = {"add_special_tokens": True, "max_length": self.max_length, "truncation": True}
            if self.prefix_space:
                kwargs["add_prefix_space"] = True
            enc = self.tokenizer([texts[i].strip() for i in todo], **kwargs)["input_ids"]
            for i, ids in zip(todo, enc, strict=True):
                out[i] = list(ids)
        else:
            for i in todo:
                out[i] = self.encode(texts[i])
        return [x if x is not None else [] for x in out]

    def embed(self, ids: Sequence[Sequence[int]], *, batch_size: int) -> list[np.ndarray]:
        """Unit-norm embeddings (tokens x dim, float32) of each id sequence, batched by length.

        On a CPU a batch holds ``batch_size`` texts and at most `CPU_TOKEN_BUDGET` padded tokens. On a GPU the
        batches are sized by a token budget (`default_token_budget`) rather than ``batch_size``,
        every batch is launched before any result is copied back (no wait per batch), and the padded
        embeddings come back in one copy per batch at the end.
        """
        from vistkit.models.runtime import DeviceBatches, default_token_budget, pad_rows, prefetch

        torch = self.torch
        out: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        device = torch.device(self.device)
        gpu = device.type == "cuda"
        runner = DeviceBatches(
            device,
            token_budget=default_token_budget(device, model_size=self.size) if gpu else CPU_TOKEN_BUDGET,
            batch_size=4096 if gpu else batch_size,
            max_padding=0.15 if gpu else None,
        )
        lengths = [len(x) for x in ids]
        pending: list[tuple[list[int], Any]] = []
        launched = 0

        def prepare(batch: list[int]) -> Any:
            x, mask = pad_rows([ids[i] for i in batch], pad_id=pad)
            return torch.from_numpy(x), torch.from_numpy(mask)

        from vistkit.models.precision import precision_context

        with torch.inference_mode(), precision_context(self.precision, device):
            for chunk, tensors in prefetch(runner.plan(lengths, prepare), depth=2 if gpu else 0):
                x, mask = runner.to_device(tensors)
                if self.truncated:
                    hidden = self.model(x, attention_mask=mask)[0]
                else:
                    hidden = self.model(x, attention_mask=mask, output_hidden_states=True).hidden_states[
                        self.layer
                    ]
                hidden = hidden.float()
                pending.append((chunk, hidden / hidden.norm(dim=-1, keepdim=True)))
                launched += len(chunk)
                progress.fraction(0.9 * launched, len(ids))  # embedding is most of the time
            for chunk, hidden in pending:
                values = hidden.cpu().numpy()
                for row, i in enumerate(chunk):
                    out[i] = values[row, : lengths[i]]
        return out


@register
class BertScore(Metric):
    """BERTScore F1 per item (P and R in ``extra``); the corpus score is the mean F1 (as bert_score
    reports)."""

    name = "bertscore"
    higher_is_better = True
    lower_bound = -1.0
    upper_bound = 1.0
    needs_references = True
    card = MetricCard(
        summary="BERTScore: greedy soft token matching of contextual embeddings (F1 by default).",
        definition=(
            "Each token (word piece) of the hypothesis x and of a reference y is embedded by one layer of an"
            " encoder and L2-normalised. R = sum_{y_j} w(y_j) max_{x_i} cos(x_i, y_j) / sum w(y_j) and P "
            "likewise over hypothesis tokens (Zhang et al. 2020, Eq. 1-3; w = idf from the references when "
            "idf is on, else 1 with [CLS]/[SEP] weighing 0), F1 = 2PR/(P+R). With several references each of"
            " P, R, F1 is the maximum over them. The item score is F1; the corpus score is the mean item F1."
        ),
        range=(
            "Cosine-based: -1 to 1 (in practice 0.3-1 for trained encoders, 1 = identical). With baseline "
            "rescaling (x - b)/(1 - b) the top stays 1 and the bottom is unbounded. Higher is better."
        ),
        signature_fields=(
            "nrefs, key, refabsent as for every reference-based metric; model (packaged name, or a hub id or "
            "folder name with @ and its weights' hash), layer (the encoder layer whose output is used; 0 = "
            "embeddings), idf (yes/no), rescale (no, the baseline file's name with the [b=P,R,F] values read from "
            "it, or the b values given), tok (slow or fast tokenizer), hf (transformers version); with "
            "precision=tf32x3 (fp32-accurate on tensor cores) or bf16, precision and maxdev (the measured "
            "largest F1 deviation: 1e-6 / 3e-3); then the vistkit version."
        ),
        reproduces=(
            "bert_score 0.3.13 (Tiiiger/bert_score): bert_score.score(cands, refs, model_type=<same local "
            "model>, num_layers=L, idf=..., rescale_with_baseline=..., baseline_path=...) gives the same P, "
            "R, F1 (tests: a tiny random BERT and the packaged MiniLM, single and multiple references, idf, "
            "rescaling). The default model differs from the paper's: vistkit never downloads at run time and no "
            "package ships roberta-large (layer 17), so the default is the packaged all-MiniLM-L6-v2 at layer "
            f"{DEFAULT_LAYERS['minilm-l6']} (its last layer, chosen by measurement: of its 7 outputs it "
            "prefers a held-out human VIST story to machine stories most often: 55% of 600 pairs, 48% at "
            "layer 5, 39% at layer 0); absolute values are NOT "
            "comparable with roberta-large numbers. With roberta-large in your Hugging Face cache "
            "(hf download roberta-large), pass model='roberta-large' to use the original."
        ),
        differences=(
            "Matching uses real tokens only; bert_score's batched matching lets padding (cosine 0) win when "
            "all real similarities of a token are negative, which makes its numbers depend on batch "
            "composition (identical with batch_size=1). idf is bert_score's smoothed log((M+1)/(df+1)), not "
            "the paper's -log(df/M) (Eq. 3); we follow the code. The packaged baselines of bert_score are "
            "for its own models, so rescaling the MiniLM default needs a baseline you provide (baseline_path "
            "or baseline). As in bert_score, a text longer than the model's max length (512 tokens) is cut there, "
            "and with idf on, a story all of whose words are in every reference (any story, with one reference) "
            "weighs zero: P and R NaN, F1 0; vistkit warns of both."
        ),
        citation=(
            "Zhang, Kishore, Wu, Weinberger, Artzi (2020) BERTScore: Evaluating Text Generation with BERT, "
            "ICLR."
        ),
    )

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        layer: int | None = None,
        idf: bool = False,
        rescale_with_baseline: bool = False,
        baseline_path: str | None = None,
        baseline: float | str | Sequence[float] | None = None,
        lang: str = "en",
        batch_size: int = 64,
        device: str | None = None,
        fast_tokenizer: bool = False,
        num_threads: int | None = None,
        precision: str = "fp32",
    ) -> None:

        try:
            import torch
            import transformers  # noqa: F401
        except ImportError:
            raise MissingDependencyError(
                "bertscore needs torch and transformers: pip install 'vistkit[models]'"
            ) from None
        from vistkit.metrics._options import option_batch_size, option_bool, option_int, option_text

        threads = check_num_threads(self.name, num_threads)
        batch_size = option_batch_size(self.name, batch_size)
        idf = option_bool(self.name, "idf", idf)
        rescale_with_baseline = option_bool(self.name, "rescale_with_baseline", rescale_with_baseline)
        fast_tokenizer = option_bool(self.name, "fast_tokenizer", fast_tokenizer)
        layer = None if layer is None else option_int(self.name, "layer", layer, low=0)
        lang = option_text(self.name, "lang", lang)
        if baseline_path is not None and not isinstance(baseline_path, str | Path):  # "" is `read_baseline`'s
            raise InputError(f"bertscore: baseline_path must be a file name, not {type(baseline_path).__name__}")
        if isinstance(model, Path):
            model = str(model)
        if not isinstance(model, str) or not model.strip():  # Path("") would be the current folder
            raise InputError(
                "bertscore: model is empty; give a packaged model (minilm-l6), a hub id in the local Hugging Face "
                "cache or a model folder"
            )
        if threads is not None:
            torch.set_num_threads(threads)
        self.model_name = str(model)
        self.idf = bool(idf)
        self.batch_size = int(batch_size)
        self.fast_tokenizer = bool(fast_tokenizer)
        from vistkit.models.precision import check_precision

        self.precision = check_precision(precision, offered=PRECISIONS, what="bertscore: precision")
        path = _resolve(self.model_name)
        self._encoder = _Encoder(
            path,
            layer=layer,
            model_name=self.model_name,
            fast_tokenizer=self.fast_tokenizer,
            device=device,
            precision=self.precision,
        )
        self.layer = self._encoder.layer
        self._model_label = _model_label(self.model_name, path)
        self.baseline_values: tuple[float, float, float] | None = None
        self._rescale_label = "no"
        if baseline is not None or baseline_path is not None:
            rescale_with_baseline = True
        if rescale_with_baseline:
            self.baseline_values, self._rescale_label = self._baseline(baseline, baseline_path, lang)
            self.lower_bound = None  # type: ignore[misc,assignment]
        # text -> (token ids, unit embeddings), kept across calls (e.g. the references of every system that
        # `vistkit compare` scores), least recently used first out beyond _CACHE_FLOATS numbers
        self._cache: OrderedDict[str, tuple[list[int], np.ndarray]] = OrderedDict()

    def _baseline(
        self, values: float | str | Sequence[float] | None, path: str | None, lang: str
    ) -> tuple[tuple[float, float, float], str]:
        if values is not None:
            if isinstance(values, str):
                try:
                    parts = [float(v) for v in values.split(",")]
                except ValueError:
                    raise InputError(f"bertscore: baseline {values!r} must be a number or 'P,R,F'") from None
            elif isinstance(values, int | float):
                parts = [float(values)]
            else:
                try:
                    parts = [float(v) for v in values]
                except (TypeError, ValueError):
                    parts = []  # refused below, in one sentence
            if len(parts) == 1:
                parts = parts * 3
            if len(parts) != 3 or not all(math.isfinite(v) and v < 1.0 for v in parts):
                raise InputError(
                    f"bertscore: baseline must be one finite number below 1 or three (P,R,F), not {values!r}"
                )
            b = (parts[0], parts[1], parts[2])
            return b, "b=" + _signed_values(b)
        if path is not None:  # the file's name and the values read (two files of one name signed alike)
            b = read_baseline(path, self.layer)
            return b, f"{Path(path).name}[b={_signed_values(b)}]"
        packaged = _packaged_baseline(self.model_name, lang)
        if packaged is None:
            raise InputError(
                f"bertscore: there is no rescaling baseline for model {self.model_name!r} (bert_score ships "
                "baselines only for its own hub models); pass baseline_path=FILE (CSV LAYER,P,R,F) or "
                "baseline=B, or turn rescaling off"
            )
        return read_baseline(packaged, self.layer), f"{lang}/{packaged.name}"

    def signature_fields(self) -> dict[str, object]:
        import transformers

        return {
            "model": self._model_label,
            "layer": self.layer,
            "idf": self.idf,
            "rescale": self._rescale_label,
            "tok": "fast" if self.fast_tokenizer else "slow",
            "hf": transformers.__version__,
            **precision_fields(self.precision, FAST_DEVIATION),
        }

    # -- arithmetic ------------------------------------------------------------------------------------------
    def _embedded(self, texts: Sequence[str]) -> None:
        wanted = set(texts)
        for t in wanted & self._cache.keys():
            self._cache.move_to_end(t)
        todo = sorted(wanted - self._cache.keys())
        if not todo:
            return
        ids = self._encoder.encode_many(todo)
        embs = self._encoder.embed(ids, batch_size=self.batch_size)
        for t, i, e in zip(todo, ids, embs, strict=True):
            self._cache[t] = (i, e)

    def _trim_cache(self) -> None:
        size = sum(e.size for _, e in self._cache.values())
        while self._cache and size > _CACHE_FLOATS:
            _, (_, e) = self._cache.popitem(last=False)
            size -= e.size

    def idf_weights(self, references: Sequence[str]) -> dict[int, float]:
        """bert_score's ``get_idf_dict``: ``log((M + 1) / (df + 1))`` over M reference documents."""
        df: Counter[int] = Counter()
        ids: dict[str, list[int]] = {}  # the distinct texts of a block, tokenised in one batched call
        for start in range(0, len(references), 4096):
            block = references[start : start + 4096]
            todo = list(dict.fromkeys(t for t in block if t not in self._cache))
            ids = dict(zip(todo, self._encoder.encode_many(todo), strict=True))
            for text in block:
                cached = self._cache.get(text)
                df.update(set(cached[0] if cached is not None else ids[text]))
        m = len(references)
        return {tok: math.log((m + 1) / (c + 1)) for tok, c in df.items()} | {-1: math.log(m + 1)}

    def _weights(self, ids: Sequence[int], idf: dict[int, float] | None) -> np.ndarray:
        if idf is None:
            arr = np.asarray(ids)
            keep = np.ones(len(arr), dtype=bool)
            for special in self._encoder.special:
                keep &= arr != special
            return keep.astype(np.float32)
        unseen = idf[-1]
        return np.array([idf.get(t, unseen) for t in ids], dtype=np.float32)

    def _pair(self, hyp: str, ref: str, idf: dict[int, float] | None) -> tuple[float, float, float]:
        h_ids, h_emb = self._cache[hyp]
        r_ids, r_emb = self._cache[ref]
        sim = h_emb @ r_emb.T
        wh = self._weights(h_ids, idf)
        wr = self._weights(r_ids, idf)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = float((sim.max(axis=1) * (wh / wh.sum())).sum())
            r = float((sim.max(axis=0) * (wr / wr.sum())).sum())
        # bert_score: an empty side ([CLS] [SEP] only) gives P = R = 0; F1 = 0 where it is undefined
        if len(h_ids) == 2 or len(r_ids) == 2:
            p, r = 0.0, 0.0
        f = 2 * p * r / (p + r) if (p + r) != 0 else math.nan
        return p, r, (0.0 if math.isnan(f) else f)

    def score_pairs(
        self, candidates: Sequence[str], references: Sequence[str | Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """P, R, F1 per candidate, like ``bert_score.score(cands, refs)`` (refs: one string or a list
        each). A candidate and references typed in different Unicode forms are read in NFC
        (`vistkit.text.tokenize.one_form`): a cased or byte-level tokenizer made other pieces (or [UNK]) of "café"
        typed with a combining accent than of the composed one; texts in one form are bert_score's as they are."""
        from vistkit.text.tokenize import one_form

        if len(candidates) != len(references):
            raise InputError("bertscore: there must be one reference (or list of references) per candidate")
        groups = [[r] if isinstance(r, str) else list(r) for r in references]
        candidates = list(candidates)
        for k, (cand, group) in enumerate(zip(candidates, groups, strict=True)):
            if isinstance(cand, str) and all(isinstance(r, str) for r in group):
                candidates[k], *groups[k] = one_form([cand, *group])
        if any(not g for g in groups):
            raise InputError("bertscore: every candidate needs at least one reference")
        flat = [r for g in groups for r in g]
        idf = self.idf_weights(flat) if self.idf else None  # token ids only: no embedding held for it
        out = np.zeros((len(candidates), 3), dtype=float)
        chunks = self._chunks(candidates, groups)
        seen: set[str] = set()
        cut = 0
        for lo, hi in chunks:
            # a part of the items at a time, so the embeddings held stay within the cache's size whatever the
            # number of stories (50,000 stories held ~12 GB of token vectors at once); each text's vectors do not
            # depend on the part (real tokens only are matched)
            texts = [*candidates[lo:hi], *(r for g in groups[lo:hi] for r in g)]
            with progress.part(lo, hi, len(candidates)):
                self._embedded(texts)
            fresh = set(texts) - seen
            seen |= fresh
            cut += sum(1 for t in fresh if self._encoder.cut(t, self._cache[t][0]))
            for k in range(lo, hi):
                prf = np.array([self._pair(candidates[k], ref, idf) for ref in groups[k]], dtype=float)
                out[k] = prf.max(axis=0)  # each of P, R, F1 maximised separately (bert_score)
            self._trim_cache()
            progress.fraction(hi, len(candidates))
        if cut:
            warn(
                f"bertscore: {cut:,} of {len(seen):,} texts (stories and references) are longer than the model's "
                f"{self._encoder.max_length:,} tokens and only their first {self._encoder.max_length:,} are compared, "
                "as bert_score does: differences after that do not change the score"
            )
        if idf is not None:
            _warn_zero_idf(int(np.isnan(out[:, :2]).any(axis=1).sum()), len(candidates), len(flat))
        if self.baseline_values is not None:
            b = np.array(self.baseline_values, dtype=float)
            out = (out - b) / (1.0 - b)
        # float32 dot products of a text with itself can round to 1 + 1e-7: the declared range [-1, 1] holds
        np.clip(out, -1.0, 1.0, out=out)
        return out[:, 0], out[:, 1], out[:, 2]

    def _chunks(self, candidates: Sequence[str], groups: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
        """Runs of items whose texts' token vectors fit in half the cache (a text's tokens estimated from its
        characters: at most one token per two characters, plus the special tokens, at most ``max_length``)."""
        dim = int(getattr(self._encoder.model.config, "hidden_size", 0) or 1024)
        budget = max(1, _CACHE_FLOATS // 2 // dim)
        cap = self._encoder.max_length

        def tokens(text: str) -> int:
            return min(len(text) // 2 + 2, cap)

        out: list[tuple[int, int]] = []
        lo, used = 0, 0
        seen: set[str] = set()
        for k, cand in enumerate(candidates):
            cost = sum(tokens(t) for t in {cand, *groups[k]} - seen)
            if k > lo and used + cost > budget:
                out.append((lo, k))
                lo, used = k, 0
                seen = set()
                cost = sum(tokens(t) for t in {cand, *groups[k]})
            used += cost
            seen.update((cand, *groups[k]))
        if lo < len(candidates):
            out.append((lo, len(candidates)))
        return out

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Per item F1 with its references (Zhang et al. 2020, Eq. 1-3); corpus = mean F1; mean P, R in ``extra``."""
        cands = [it.hypothesis.text for it in items]
        refs = [[r.text for r in it.references] for it in items]
        p, r, f = self.score_pairs(cands, refs) if items else (np.zeros(0), np.zeros(0), np.zeros(0))
        extra: dict[str, Any] = {}
        if len(f):
            extra = {
                "P": float(p.mean()),
                "R": float(r.mean()),
                "item_P": [float(x) for x in p],
                "item_R": [float(x) for x in r],
            }
        return Score(
            metric=self.name,
            corpus=corpus_mean(f),
            item_ids=[it.item_id for it in items],
            item_scores=f.astype(float),
            signature=signature,
            extra=extra,
        )


def bertscore_score(
    hypotheses: StorySet | Sequence[Story],
    references: StorySet | Sequence[Story],
    *,
    key: Keying | str | None = None,
    reference_absent: bool = False,
    **options: Any,
) -> Score:
    """Functional face: ``bertscore_score(hyps, refs, idf=True)`` (loads the model for this call)."""
    return BertScore(**options).score(hypotheses, references, key=key, reference_absent=reference_absent)
