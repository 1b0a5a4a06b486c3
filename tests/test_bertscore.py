"""``bertscore`` against the official bert_score package (0.3.13) given the same local model: a tiny randomly
initialised BERT written by the test, and the packaged MiniLM default."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
bert_score = pytest.importorskip("bert_score")

from vistkit.data.story import Story  # noqa: E402
from vistkit.errors import InputError, MissingDependencyError  # noqa: E402
from vistkit.metrics.base import list_metrics  # noqa: E402
from vistkit.metrics.bertscore import DEFAULT_LAYERS, BertScore, bertscore_score, read_baseline  # noqa: E402

pytestmark = pytest.mark.models

WORDS = (
    "the a we went to park beach party family friends had fun great day at and then it was time home dog cat "
    "played ate food cake birthday smiled happy sun sky water boat walked long everyone is on mat sat ."
).split()

CANDS = [
    "the cat sat on the mat .",
    "we went to the beach and had a great time .",
    "everyone is happy .",
    "the dog played in the water then it was time to go home",
    "a",
]
REFS = [
    ["the cat is on the mat .", "a cat sat there"],
    ["we had fun at the beach today ."],
    ["the family was happy at the party .", "everyone smiled", "cake"],
    ["the dog and the cat played at the park ."],
    ["a long walk home"],
]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-d BERT with random weights and a WordPiece vocabulary of the test words."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS)), "##s", "##ed", "##ing"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True, model_max_length=64).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(folder)
    return folder


def official(model: Path | str, layer: int, *, idf: bool = False, **kw: object) -> np.ndarray:
    p, r, f = bert_score.score(
        CANDS,
        REFS,
        model_type=str(model),
        num_layers=layer,
        idf=idf,
        batch_size=1,
        nthreads=0,
        device="cpu",
        **kw,
    )
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1)


def ours(model: Path | str, layer: int | None, **kw: object) -> np.ndarray:
    metric = BertScore(model=str(model), layer=layer, device="cpu", batch_size=3, **kw)
    return np.stack(metric.score_pairs(CANDS, REFS), axis=1)


@pytest.mark.parametrize("layer", [0, 1, 2])
@pytest.mark.parametrize("idf", [False, True])
def test_tiny_random_bert_equals_bert_score(tiny_bert: Path, layer: int, idf: bool) -> None:
    """P, R, F1 with multiple references, every layer, with and without idf: equal to bert_score."""
    expected = official(tiny_bert, layer, idf=idf)
    got = ours(tiny_bert, layer, idf=idf)
    np.testing.assert_allclose(got, expected, atol=2e-6)


def test_tiny_bert_baseline_rescaling_equals_bert_score(tiny_bert: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.tsv"
    baseline.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n1,0.5,0.4,0.45\n2,0.6,0.7,0.65\n", encoding="utf-8")
    expected = official(tiny_bert, 1, rescale_with_baseline=True, baseline_path=str(baseline), lang="en")
    got = ours(tiny_bert, 1, baseline_path=str(baseline))
    np.testing.assert_allclose(got, expected, atol=5e-6)
    assert read_baseline(baseline, 2) == (0.6, 0.7, 0.65)
    # a value given directly rescales the same way: x' = (x - b) / (1 - b)
    raw = ours(tiny_bert, 1)
    direct = ours(tiny_bert, 1, baseline="0.5,0.4,0.45")
    np.testing.assert_allclose(direct, (raw - [0.5, 0.4, 0.45]) / (1 - np.array([0.5, 0.4, 0.45])), atol=1e-9)


def test_packaged_minilm_equals_bert_score_on_the_same_folder() -> None:
    from vistkit.models.resolve import resolve_model

    path = resolve_model("minilm-l6")
    layer = DEFAULT_LAYERS["minilm-l6"]
    for idf in (False, True):
        np.testing.assert_allclose(
            ours("minilm-l6", None, idf=idf), official(path, layer, idf=idf), atol=2e-6
        )


def test_hand_computed_greedy_matching(tiny_bert: Path) -> None:
    """Eq. 1-3 by hand from the encoder's own unit vectors: P, R over real tokens, [CLS]/[SEP] weigh 0."""
    metric = BertScore(model=str(tiny_bert), layer=2, device="cpu")
    hyp, ref = "the cat sat", "a cat sat on the mat"
    ids_h, ids_r = metric._encoder.encode(hyp), metric._encoder.encode(ref)
    e_h, e_r = metric._encoder.embed([ids_h, ids_r], batch_size=1)
    sim = e_h @ e_r.T
    p = sim.max(axis=1)[1:-1].mean()
    r = sim.max(axis=0)[1:-1].mean()
    got_p, got_r, got_f = metric.score_pairs([hyp], [ref])
    assert got_p[0] == pytest.approx(p, abs=1e-6) and got_r[0] == pytest.approx(r, abs=1e-6)
    assert got_f[0] == pytest.approx(2 * p * r / (p + r), abs=1e-6)


def test_empty_hypothesis_scores_zero_and_identity_scores_one(tiny_bert: Path) -> None:
    metric = BertScore(model=str(tiny_bert), layer=2, device="cpu")
    p, r, f = metric.score_pairs(["", "we had fun at the beach ."], ["the cat", "we had fun at the beach ."])
    assert (p[0], r[0], f[0]) == (0.0, 0.0, 0.0)  # bert_score's rule for an empty side
    assert f[1] == pytest.approx(1.0, abs=1e-6)


def test_metric_interface_signature_and_extra() -> None:
    keys = [f"k{i}" for i in range(len(CANDS))]
    hyps = [Story(f"h{i}", c, photo_ids=(k,)) for i, (c, k) in enumerate(zip(CANDS, keys, strict=True))]
    refs = [
        Story(f"r{i}-{j}", t, photo_ids=(k,))
        for i, (k, rs) in enumerate(zip(keys, REFS, strict=True))
        for j, t in enumerate(rs)
    ]
    result = bertscore_score(hyps, refs)
    expected = ours("minilm-l6", None)
    np.testing.assert_allclose(result.item_scores, expected[:, 2], atol=1e-6)  # batching: float noise
    assert result.corpus == pytest.approx(expected[:, 2].mean(), abs=1e-6)
    assert result.extra["P"] == pytest.approx(expected[:, 0].mean(), abs=1e-6)
    assert result.extra["item_R"] == pytest.approx(list(expected[:, 1]), abs=1e-6)
    layer = DEFAULT_LAYERS["minilm-l6"]
    assert f"|model:minilm-l6|layer:{layer}|idf:no|rescale:no|tok:slow|hf:" in result.signature
    assert result.signature.startswith("bertscore|nrefs:1-3|key:sequence|")
    card = list_metrics()["bertscore"].card.render("bertscore")
    assert "Zhang" in card and f"layer {layer}" in card


def test_rescaling_without_a_baseline_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="no rescaling baseline for model 'minilm-l6'"):
        BertScore(rescale_with_baseline=True)
    with pytest.raises(InputError, match="layer must be between 0 and 6"):
        BertScore(layer=9)
    with pytest.raises(MissingDependencyError, match="not-a-model-xyz"):  # a legacy hub id, never downloaded
        BertScore(model="not-a-model-xyz")


def test_properties_bounds_order_and_reference_order(tiny_bert: Path) -> None:
    """Scores stay in [-1, 1]; shuffling items or a candidate's references changes nothing."""
    metric = BertScore(model=str(tiny_bert), layer=1, device="cpu", idf=True)
    rng = random.Random(4)
    cands = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(12)]
    refs = [
        [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 3))]
        for _ in range(12)
    ]
    p, r, f = metric.score_pairs(cands, refs)
    assert np.all(np.abs(np.stack([p, r, f])) <= 1 + 1e-6)
    order = list(range(12))
    rng.shuffle(order)
    _, _, f2 = metric.score_pairs([cands[i] for i in order], [list(reversed(refs[i])) for i in order])
    np.testing.assert_allclose(f2, f[order], atol=1e-6)
    assert not any(math.isnan(x) for x in f)


def test_embeddings_cached_across_calls_give_the_same_scores(tiny_bert: Path) -> None:
    """The load-once scorer keeps embeddings between calls (compare scores every system against the same
    references); a second call, and a fresh scorer, give the same numbers."""
    metric = BertScore(model=str(tiny_bert), layer=2, device="cpu", idf=True)
    first = np.stack(metric.score_pairs(CANDS, REFS))
    assert set(CANDS) <= metric._cache.keys()
    second = np.stack(metric.score_pairs(CANDS, REFS))
    fresh = BertScore(model=str(tiny_bert), layer=2, device="cpu", idf=True).score_pairs(CANDS, REFS)
    fresh = np.stack(fresh)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, fresh, atol=1e-6)


def test_num_threads_baselines_and_model_are_checked_in_one_sentence(tiny_bert: Path, tmp_path: Path) -> None:
    """num_threads from 1 (torch's bare RuntimeError before), baselines finite and below 1 (NaN and -inf gave a
    silent NaN score), an empty or folder baseline_path and an empty model name (the current folder) refused."""
    import torch

    before = torch.get_num_threads()
    for bad in (0, -3, 10**6):
        with pytest.raises(InputError, match="bertscore: num_threads must be from 1 to 1,024"):
            BertScore(model=str(tiny_bert), num_threads=bad)
    assert torch.get_num_threads() == before  # nothing set by a refused scorer
    with pytest.raises(InputError, match="num_threads must be a whole number"):
        BertScore(model=str(tiny_bert), num_threads=1.5)  # type: ignore[arg-type]
    for bad_b in (math.nan, -math.inf, 1.0, "0.5,0.5,nan", "0.5,inf,0.5", [0.1, 0.2, math.nan]):
        with pytest.raises(InputError, match="baseline must be one finite number below 1"):
            BertScore(model=str(tiny_bert), layer=1, baseline=bad_b)
    with pytest.raises(InputError, match=re.escape(f"baseline file {tmp_path} is a folder")):
        BertScore(model=str(tiny_bert), layer=1, baseline_path=str(tmp_path))
    with pytest.raises(InputError, match="baseline_path is empty"):
        BertScore(model=str(tiny_bert), layer=1, baseline_path="")
    with pytest.raises(InputError, match="bertscore: model is empty"):
        BertScore(model="")
    ok = BertScore(model=str(tiny_bert), layer=1, num_threads=before, baseline=-2.5)
    assert ok.baseline_values == (-2.5, -2.5, -2.5)


def test_vrank_num_threads_checked_before_anything_else() -> None:
    """vrank's num_threads (torch.set_num_threads, unchecked before) is refused in one sentence."""
    from vistkit.metrics.vrank import Vrank

    with pytest.raises(InputError, match="vrank: num_threads must be from 1 to 1,024 \\(got 0\\)"):
        Vrank(model="unused", num_threads=0)
    with pytest.raises(MissingDependencyError, match="trained Vrank folder"):  # a valid count: the next check
        Vrank(num_threads=1)
