"""Matrix-product precision modes for the model metrics: TF32 for one call, and fp32-accurate "3xTF32".

On NVIDIA GPUs since Ampere, plain fp32 matrix products run without tensor cores (about 50 TFLOP/s on an H100)
while TF32 products run on them (about 330 TFLOP/s) with 10 mantissa bits instead of 23, so a TF32 forward pass
deviates by ~1e-4 (BENCHMARKS.md, issue 12). ``tf32x3`` recovers fp32 accuracy on the tensor cores by the
split-precision trick of NVIDIA's CUTLASS ("3xTF32"): each fp32 operand is written as ``hi + lo`` with ``hi``
exactly representable in TF32 and ``lo = x - hi`` (exact in fp32, ``|lo| <= 2**-11 |x|``), and

    x @ W.T  ~=  (x_lo @ W_hi.T + x_hi @ W_lo.T) + x_hi @ W_hi.T

drops only ``x_lo @ W_lo.T`` (relative size ``2**-22``) and the TF32 rounding of the ``lo`` terms (the same
order), with fp32 accumulation throughout: the error is a few fp32 units in the last place, like a change of
summation order, at three TF32 products' cost (~2x plain fp32 on an H100 for the linear layers, which hold
almost all of a transformer's arithmetic). Only ``torch.nn.Linear`` layers are split; attention products stay
plain fp32 (TF32 off around them), so nothing else changes.

On a CPU the three products run in fp32 (TF32 does not exist there): same result as fp32 to rounding, slower;
`tf32_round` lets tests emulate the tensor cores' input rounding on any machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_TF32_DROP = 13  # fp32 has 23 mantissa bits, TF32 10


def tf32_round(x: Any) -> Any:
    """``x`` (fp32 tensor) rounded to the nearest TF32 value (ties away from zero), still stored as fp32."""
    import torch

    bits = x.contiguous().view(torch.int32)
    half = 1 << (_TF32_DROP - 1)
    mask = ~((1 << _TF32_DROP) - 1)
    # adding half an ulp of TF32 to the magnitude bits rounds |x| to nearest (sign bit untouched for finite x)
    return torch.bitwise_and(bits + half, mask).view(torch.float32)


def split_tf32(x: Any) -> tuple[Any, Any]:
    """``(hi, lo)`` with ``hi = tf32_round(x)`` and ``lo = x - hi`` (exact): ``hi + lo == x``."""
    hi = tf32_round(x)
    return hi, x - hi


@contextlib.contextmanager
def tf32_matmuls(enabled: bool = True) -> Iterator[None]:
    """CUDA matrix products in TF32 inside the block (restored after; no effect on a CPU)."""
    import torch

    if not enabled:
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _split_linear_class() -> Any:
    import torch
    import torch.nn.functional as F

    class SplitTF32Linear(torch.nn.Module):
        """``torch.nn.Linear`` computed as three TF32 products of split operands (see the module docstring).

        ``emulate=True`` rounds every product's inputs to TF32 first, as the tensor cores do: a CPU test of
        the GPU's arithmetic."""

        def __init__(self, linear: torch.nn.Linear, *, emulate: bool = False) -> None:
            super().__init__()
            w_hi, w_lo = split_tf32(linear.weight.detach().float())
            self.register_buffer("w_hi", w_hi)
            self.register_buffer("w_lo", w_lo)
            bias = linear.bias.detach().float() if linear.bias is not None else None
            self.register_buffer("bias", bias)
            self.emulate = emulate

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x_hi, x_lo = split_tf32(x.float())
            r = tf32_round if self.emulate else (lambda t: t)
            with tf32_matmuls(x.is_cuda):
                small = F.linear(r(x_lo), r(self.w_hi)) + F.linear(r(x_hi), r(self.w_lo))
                bias: torch.Tensor | None = self.bias  # type: ignore[assignment]  # a buffer (or None)
                return F.linear(r(x_hi), r(self.w_hi), bias) + small

    return SplitTF32Linear


#: every mode a model metric may offer: "fp32" exact (the default), "tf32x3" fp32-accurate on tensor cores,
#: "tf32" and "bf16" faster and approximate (each metric says which it offers and their measured deviation)
PRECISIONS = ("fp32", "tf32x3", "tf32", "bf16")


def check_precision(precision: str, *, offered: tuple[str, ...] = PRECISIONS, what: str = "precision") -> str:
    """``precision`` if the metric offers it, else one sentence naming the choices."""
    if precision not in offered:
        from vistkit.errors import InputError

        # what each offered mode is (a mode the metric does not offer is not described)
        said = ["fp32 is exact"] if "fp32" in offered else []
        if "tf32x3" in offered:
            said.append("tf32x3 keeps fp32's accuracy on tensor cores")
        fast = [m for m in ("tf32", "bf16") if m in offered]
        if fast:
            said.append(f"{' / '.join(fast)} {'are' if len(fast) > 1 else 'is'} faster and approximate")
        raise InputError(f"{what} must be one of {', '.join(offered)} ({'; '.join(said)}), not {precision!r}")
    return precision


def apply_precision(module: Any, precision: str) -> Any:
    """``module`` set up for ``precision`` (in place where possible): bf16 casts the module (not autocast around
    fp32 weights), tf32x3 splits its linear layers; fp32 and tf32 leave it as it is (tf32 is a mode of the
    matrix units: `precision_context`)."""
    import torch

    if precision == "bf16":
        return module.to(torch.bfloat16)
    if precision == "tf32x3":
        return use_split_tf32(module)
    return module


def precision_context(precision: str, device: Any) -> contextlib.AbstractContextManager[None]:
    """The context to run a forward pass in: TF32 matrix products for ``tf32`` on a CUDA device, else
    nothing."""
    return tf32_matmuls(precision == "tf32" and getattr(device, "type", str(device)) == "cuda")


def precision_fields(precision: str, maxdev: dict[str, str]) -> dict[str, object]:
    """Signature fields of a non-default mode: its name and its measured largest deviation (none for fp32)."""
    if precision == "fp32":
        return {}
    return {"precision": precision, "maxdev": maxdev[precision]}


def use_split_tf32(module: Any, *, emulate: bool = False) -> Any:
    """Replace every ``torch.nn.Linear`` inside ``module`` (in place) by its 3xTF32 form; returns ``module``."""
    import torch

    cls = _split_linear_class()
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear):
            setattr(module, name, cls(child, emulate=emulate))
        else:
            use_split_tf32(child, emulate=emulate)
    return module
