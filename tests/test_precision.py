"""The fp32-accurate tensor-core mode ``tf32x3`` (`vistkit.models.precision`): the TF32 split is exact, and with
the tensor cores' input rounding emulated on the CPU, three TF32 products give fp32's accuracy where one gives
TF32's (checked against float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.models.precision import split_tf32, tf32_round, use_split_tf32

finite = st.floats(min_value=-(2.0**100), max_value=2.0**100, width=32).filter(
    lambda v: v == 0 or abs(v) > 2.0**-100
)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=64))
def test_split_is_exact_and_hi_is_tf32(values: list[float]) -> None:
    x = torch.tensor(values, dtype=torch.float32)
    hi, lo = split_tf32(x)
    assert torch.equal(hi + lo, x)  # exact: no information lost
    assert torch.all(hi.view(torch.int32) & ((1 << 13) - 1) == 0)  # 10 mantissa bits left
    assert torch.all(lo.abs() <= x.abs() * 2.0**-11)  # round to nearest: half a TF32 ulp at most
    assert torch.equal(tf32_round(hi), hi)  # idempotent


def _errors(seed: int) -> tuple[float, float, float]:
    """Largest relative error vs float64 of fp32, of one emulated TF32 product and of emulated 3xTF32."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 256, generator=gen)
    lin = torch.nn.Linear(256, 128)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(128, 256, generator=gen) / 16)
        want = x.double() @ lin.weight.double().T + lin.bias.double()
        scale = want.abs().max().item()
        fp32 = lin(x)
        tf32 = torch.nn.functional.linear(tf32_round(x), tf32_round(lin.weight), lin.bias)
        split = use_split_tf32(torch.nn.Sequential(lin), emulate=True)(x)
    return tuple(float((y.double() - want).abs().max()) / scale for y in (fp32, tf32, split))  # type: ignore[return-value]


@pytest.mark.parametrize("seed", range(4))
def test_three_tf32_products_are_as_accurate_as_fp32(seed: int) -> None:
    fp32, tf32, split = _errors(seed)
    assert tf32 > 1e-5  # one TF32 product: ~3e-4 relative here (10 mantissa bits)
    assert split < 4 * max(fp32, 2.0**-24)  # 3xTF32: fp32's accuracy
    assert split * 100 < tf32


def test_dhm_c_tf32x3_named_and_equal_to_fp32_on_a_cpu() -> None:
    """On a CPU the three products run in fp32: scores equal the exact path to rounding; the signature names the
    mode and its bound."""
    import tempfile
    from pathlib import Path

    from tests.tiny_models import make_tiny_sop_folder
    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric
    from vistkit.models.sop import FAST_DEVIATION

    with tempfile.TemporaryDirectory() as tmp:
        folder = make_tiny_sop_folder(Path(tmp))
        stories = [Story("a", "the dog ran . we had a cake . then we went home ."), Story("b", "a day . a park .")]
        base = get_metric("dhm-c", model=folder).score(stories).item_scores
        split = get_metric("dhm-c", model=folder, precision="tf32x3")
        assert f"|precision:tf32x3|maxdev:{FAST_DEVIATION['tf32x3']}|" in split.signature()
        np.testing.assert_allclose(split.score(stories).item_scores, base, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["bertscore", "coherence"])
def test_minilm_metrics_offer_tf32x3_and_bf16(name: str) -> None:
    """bertscore and the offline coherence metric take ``precision=``: tf32x3 (three fp32 products on a CPU)
    equals fp32 to rounding, bf16 stays within the bound its signature states; plain tf32 and unknown modes are
    refused in one sentence."""
    from vistkit.data.story import Story, StorySet
    from vistkit.errors import InputError
    from vistkit.metrics.base import get_metric

    texts = [
        "we went to the beach . the water was cold . my brother built a castle . we ate lunch . the sun set .",
        "the family met for dinner . grandma made a turkey . the kids played games . it was a good night .",
        "our team won the game . the crowd cheered . the players lifted the coach . we celebrated all night .",
    ]
    hyps = StorySet([Story(str(i), t) for i, t in enumerate(texts)])
    refs = StorySet([Story(str(i), texts[(i + 1) % 3]) for i in range(3)])
    args = (hyps, refs) if name == "bertscore" else (hyps,)
    base = get_metric(name, device="cpu")
    want = base.score(*args, key="story").item_scores
    assert "precision:" not in base.signature()
    for precision, atol in (("tf32x3", 1e-6), ("bf16", None)):
        metric = get_metric(name, device="cpu", precision=precision)
        sig = metric.signature()
        bound = float(sig.split("|maxdev:")[1].split("|")[0])
        assert f"|precision:{precision}|maxdev:" in sig
        got = metric.score(*args, key="story").item_scores
        np.testing.assert_allclose(got, want, rtol=0, atol=atol if atol is not None else bound)
    for bad in ("tf32", "fp16"):
        with pytest.raises(InputError, match="must be one of fp32, tf32x3, bf16"):
            get_metric(name, device="cpu", precision=bad)
