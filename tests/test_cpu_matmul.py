"""Float32 linear layers through oneDNN with weights laid out once (vistkit.models.cpu_matmul).

oneDNN and PyTorch's BLAS sum in different orders, so the two are compared within float32 rounding (relative to
a float64 product), never bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from vistkit.errors import InputError
from vistkit.models import cpu_matmul
from vistkit.models.cpu_matmul import PackedLinear, cpu_matmul_choice, onednn_works, pack_linears

needs_onednn = pytest.mark.skipif(not onednn_works(), reason="oneDNN's packed linear is not usable in this build")


def _float64_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = x.double() @ w.double().T
    return out + b.double() if b is not None else out


@needs_onednn
@settings(max_examples=25, deadline=None)
@given(
    lead=st.lists(st.integers(1, 9), min_size=1, max_size=2),
    sizes=st.tuples(st.integers(1, 70), st.integers(1, 70)),
    bias=st.booleans(),
    strided=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_packed_linear_is_a_float32_product(
    lead: list[int], sizes: tuple[int, int], bias: bool, strided: bool, seed: int
) -> None:
    """Any leading shape, width, with or without bias, contiguous input or not: within float32 rounding of the
    float64 product, as close as PyTorch's own float32 product is (up to a small factor: another summation
    order)."""
    gen = torch.Generator().manual_seed(seed)
    d_in, d_out = sizes
    linear = torch.nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(d_out, d_in, generator=gen))
        if bias:
            linear.bias.copy_(torch.randn(d_out, generator=gen))
    x = torch.randn(*lead, d_in, generator=gen)
    if strided:  # the same values in a transposed memory layout
        x = x.movedim(-1, 0).contiguous().movedim(0, -1)
        assert x.is_contiguous() == (d_in == 1 or all(n == 1 for n in lead))
    packed = PackedLinear(linear)
    with torch.inference_mode():
        got, plain = packed(x), linear(x)
    want = _float64_linear(x, linear.weight.detach(), None if linear.bias is None else linear.bias.detach())
    assert got.shape == plain.shape and got.dtype == torch.float32
    scale = float(want.abs().max()) + 1.0
    assert float((got.double() - want).abs().max()) <= 1e-5 * scale * max(1.0, d_in / 8)


@needs_onednn
def test_packed_linear_keeps_the_layer_and_falls_back_outside_float32_cpu_inference() -> None:
    linear = torch.nn.Linear(12, 5)
    packed = PackedLinear(linear)
    assert packed.weight is linear.weight and packed.bias is linear.bias
    assert packed.state_dict().keys() == linear.state_dict().keys()
    x = torch.randn(3, 12, requires_grad=True)
    y = packed(x)  # a gradient is wanted: the ordinary product, so backward works
    y.sum().backward()
    assert x.grad is not None and torch.allclose(y, linear(x))
    packed.weight.grad = None
    packed(torch.randn(3, 12)).sum().backward()  # the weights' gradient, with an input that needs none
    assert packed.weight.grad is not None and linear.weight.grad is packed.weight.grad
    x64 = torch.randn(3, 12, dtype=torch.float64)
    assert torch.equal(packed.double()(x64), torch.nn.functional.linear(x64, packed.weight, packed.bias))


@needs_onednn
def test_pack_linears_replaces_every_linear_but_the_skipped_and_keeps_the_output() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(32, 32)), torch.nn.Linear(32, 4)
    )
    head = model[3]
    x = torch.randn(5, 7, 16)
    with torch.inference_mode():
        before = model(x)
    params = [p.data_ptr() for p in model.parameters()]
    assert pack_linears(model, skip=[head]) is True
    assert isinstance(model[0], PackedLinear) and isinstance(model[2][0], PackedLinear)
    assert type(model[3]) is torch.nn.Linear  # skipped
    assert [p.data_ptr() for p in model.parameters()] == params
    with torch.inference_mode():
        after = model(x)
    np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=0, atol=1e-5)


def test_blas_choice_leaves_the_model_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_matmul.ENV, "BLAS")
    assert cpu_matmul_choice() == "blas"
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert pack_linears(model) is False and type(model[0]) is torch.nn.Linear
    monkeypatch.setenv(cpu_matmul.ENV, "fast")
    with pytest.raises(InputError, match="VISTKIT_CPU_MATMUL must be one of onednn, blas"):
        cpu_matmul_choice()
    monkeypatch.delenv(cpu_matmul.ENV)
    assert cpu_matmul_choice() == "onednn"


def test_a_failing_self_check_leaves_the_model_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build without a usable oneDNN (or one whose product is not float32-exact) keeps PyTorch's product."""
    monkeypatch.setattr(cpu_matmul, "onednn_works", lambda: False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert pack_linears(model) is False and type(model[0]) is torch.nn.Linear


@needs_onednn
def test_the_lm_uses_onednn_on_the_cpu_in_fp32_and_equals_blas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_lm packs every linear layer but the head (packed in vocabulary blocks); the log-probabilities equal
    those of PyTorch's BLAS to float32 rounding; bf16 and VISTKIT_CPU_MATMUL=blas keep the default product."""
    from tiny_models import make_tiny_causal_lm

    from vistkit.models.lm import load_lm

    folder = make_tiny_causal_lm(tmp_path / "lm")
    fast = load_lm(folder, device="cpu")
    assert fast.matmul == "onednn"
    layers = [m for m in fast.model.modules() if isinstance(m, torch.nn.Linear)]
    head = fast.model.get_output_embeddings()
    assert all(isinstance(m, PackedLinear) for m in layers if m is not head) and type(head) is torch.nn.Linear
    monkeypatch.setenv(cpu_matmul.ENV, "blas")
    plain = load_lm(folder, device="cpu")
    assert plain.matmul == "default"
    assert not any(isinstance(m, PackedLinear) for m in plain.model.modules())
    assert load_lm(folder, device="cpu", precision="bf16").matmul == "default"
    stories = [["we went to the beach today .", "the water was cold .", "we had fun ."], ["a dog ran ."]]
    for a, b in zip(fast.story_logprobs(stories), plain.story_logprobs(stories), strict=True):
        for sa, sb in zip(a.sentences, b.sentences, strict=True):
            np.testing.assert_allclose(sa.in_story, sb.in_story, rtol=0, atol=1e-4)
            np.testing.assert_allclose(sa.alone, sb.alone, rtol=0, atol=1e-4)
