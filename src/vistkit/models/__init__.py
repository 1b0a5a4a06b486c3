"""Model provisioning: resolution, safe checkpoint loading/conversion, device choice, batching, caching.

- `resolve_model`: a name -> local files (explicit path, packaged offline default, local Hugging Face cache).
- `load_legacy_checkpoint` (pickles, only with ``trust=True``), `save_converted` / `load_converted`
  (safetensors + JSON), `load_pretrained` (HF-format folders, safetensors only unless trusted),
  `model_fingerprint`.
- `choose_device`, `batches_by_length`, `ScoreCache` + `content_key`.
- `vistkit.models.sop`: the RoViST sentence-order (SOP) ALBERT classifier used by ``rovist-c`` / ``dhm-c``.
- `vistkit.models.cpu_matmul`: float32 linear layers on the CPU through oneDNN with weights laid out once (the
  causal LM's, `vistkit.models.lm`).

Importing this package does not import torch.
"""

from vistkit.models.checkpoints import (
    file_sha256,
    is_converted,
    is_legacy_checkpoint,
    load_converted,
    load_legacy_checkpoint,
    load_pretrained,
    model_fingerprint,
    save_converted,
)
from vistkit.models.resolve import PACKAGED_MODELS, PackagedModel, register_packaged_model, resolve_model
from vistkit.models.runtime import ScoreCache, batches_by_length, choose_device, content_key

__all__ = [
    "PACKAGED_MODELS",
    "PackagedModel",
    "ScoreCache",
    "batches_by_length",
    "choose_device",
    "content_key",
    "file_sha256",
    "is_converted",
    "is_legacy_checkpoint",
    "load_converted",
    "load_legacy_checkpoint",
    "load_pretrained",
    "model_fingerprint",
    "register_packaged_model",
    "resolve_model",
    "save_converted",
]
