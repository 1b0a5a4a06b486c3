"""Float32 linear layers on the CPU through oneDNN, with each weight reordered once (imports torch).

PyTorch multiplies float32 matrices on an x86 CPU with MKL's sgemm, which lays the weight out anew on every call.
oneDNN (MKL-DNN, bundled with PyTorch) can lay a weight out once in its own blocked format
(``torch.ops.mkldnn._reorder_linear_weight``) and then multiply with it directly (``_linear_pointwise``, the
operators PyTorch's own compiler uses for frozen CPU models). On the 2-core AMD EPYC (Zen 4) box the LM's shapes
ran 15-20% faster that way (576 -> 1536: 180 -> 213 GFLOP/s; the LM head's 576 -> 1024 blocks 180 -> 219), and
the three LM metrics together 1.2x faster (`bench/bench_lm.py --matmul`, BENCHMARKS.md).

Both are float32 products with float32 accumulation; only the order of the sums differs, so values are equal to
float rounding, not bit for bit (SmolLM2 on 60 VIST val stories against a float64 pass: largest token
log-probability error 2.1e-3 nats with oneDNN, 2.3e-4 with MKL; means 9.5e-6 and 3.6e-6). Used only where a
self-check on a small random product passes (`onednn_works`); ``VISTKIT_CPU_MATMUL=blas`` turns it off. The
reordered copy costs memory once per weight (+4 bytes per parameter: about 0.5 GB for SmolLM2-135M).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

from vistkit.errors import InputError

ENV = "VISTKIT_CPU_MATMUL"
CHOICES = ("onednn", "blas")


def cpu_matmul_choice() -> str:
    """``$VISTKIT_CPU_MATMUL``: ``onednn`` (the default) or ``blas`` (PyTorch's own float32 product)."""
    value = os.environ.get(ENV, "").strip().lower() or "onednn"
    if value not in CHOICES:
        raise InputError(f"{ENV} must be one of {', '.join(CHOICES)}, not {value!r}")
    return value


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """A float32 ``(out, in)`` weight in oneDNN's layout, for `packed_linear`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` with the weight as `pack_weight` laid it out (``x``: float32, ``(..., in)``)."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


@functools.cache
def onednn_works() -> bool:
    """True when this PyTorch build runs `packed_linear` here and its product agrees with float64 as a float32
    product should (relative error below 1e-4; a reduced-precision or broken kernel fails it)."""
    if not torch.backends.mkldnn.is_available():
        return False
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 7, 96, generator=gen)
    w = torch.randn(80, 96, generator=gen)
    b = torch.randn(80, generator=gen)
    try:
        with torch.inference_mode():
            got = packed_linear(x, pack_weight(w), b)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    want = x.double() @ w.double().T + b.double()
    if got.shape != want.shape or got.dtype != torch.float32:
        return False
    return bool((got.double() - want).abs().max() <= 1e-4 * want.abs().max())


class PackedLinear(torch.nn.Linear):
    """An `nn.Linear` whose float32 CPU forward runs oneDNN on a copy of its weight reordered once.

    ``weight`` and ``bias`` stay as they were (same tensors), so parameter counts, ``state_dict`` and FLOP
    counting are unchanged; any other input (another dtype or device) and any call that records gradients (of the
    input or the weights) takes the ordinary `F.linear`. Build it after the weights are final: the copy does not
    follow later changes.
    """

    def __init__(self, linear: torch.nn.Linear) -> None:
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.packed = pack_weight(linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The packed oneDNN product for a float32 CPU input without gradients, else `F.linear`."""
        wants_grad = torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)
        if x.dtype != torch.float32 or x.device.type != "cpu" or wants_grad:
            return F.linear(x, self.weight, self.bias)
        return packed_linear(x, self.packed, self.bias)


def pack_linears(model: torch.nn.Module, *, skip: Iterable[torch.nn.Module] = ()) -> bool:
    """Replace every float32 CPU `nn.Linear` of ``model`` (but those in ``skip``) by a `PackedLinear`, in place.

    Returns True when oneDNN is in use (chosen by `cpu_matmul_choice` and passing `onednn_works`), else False
    and the model is left as it was.
    """
    if cpu_matmul_choice() != "onednn" or not onednn_works():
        return False
    skipped = {id(m) for m in skip}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (
                type(child) is torch.nn.Linear
                and id(child) not in skipped
                and child.weight.dtype == torch.float32
                and child.weight.device.type == "cpu"
            ):
                setattr(parent, name, PackedLinear(child))
    return True


def packed_blocks(weight: torch.Tensor, block: int) -> list[Any]:
    """``weight`` (``(out, in)``, float32, CPU) in row blocks of ``block``, each laid out by `pack_weight`."""
    return [pack_weight(weight[a : a + block]) for a in range(0, int(weight.shape[0]), block)]
