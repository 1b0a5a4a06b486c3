"""The GPU path's pieces: batched pair tokenisation identical to the official three calls, the generic
prefetch / device-batching utilities, and the opt-in fast precisions.

The reference for every encoding check is the official construction (usydnlp/rovist ``coherence_scorer.py``):
``tok.tokenize("[CLS] A [SEP] B [SEP]")`` -> ids, token types ``(len(tok(A)) + 2) * [0] + (len(tok(B)) + 1) *
[1]``, written out here independently of vistkit's encoder.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.metrics.coherence import adjacent_pairs, prefix_pairs, split_sentences
from vistkit.models.runtime import DeviceBatches, batches_by_length, pad_rows, prefetch

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)


def official_encoding(tok, a: str, b: str) -> tuple[list[int], list[int]]:  # type: ignore[no-untyped-def]
    ids = tok.convert_tokens_to_ids(tok.tokenize(" ".join(["[CLS]", a, "[SEP]", b, "[SEP]"])))
    types = (len(tok.tokenize(a)) + 2) * [0] + (len(tok.tokenize(b)) + 1) * [1]
    return list(ids), types


def story_vocab_tokenizer(texts: list[str]):  # type: ignore[no-untyped-def]
    """An ALBERT Unigram tokenizer whose vocabulary holds the stories' words (as bench_coherence.py builds)."""
    from transformers import AlbertTokenizer

    words = sorted({w for t in texts for w in t.lower().split()})[:5000]
    vocab = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
    vocab += [("▁" + w, -5.0) for w in words]
    vocab += [(c, -10.0) for c in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"[]"]
    return AlbertTokenizer(vocab=vocab)


def sop_model(tok):  # type: ignore[no-untyped-def]
    """An SOPModel shell (no weights needed for encoding)."""
    from vistkit.models.sop import SOPModel

    return SOPModel(torch.nn.Linear(1, 1), tok, fingerprint="x", max_positions=512, device="cpu")


@pytest.fixture(scope="module")
def real_pairs() -> list[tuple[str, str]]:
    """Adjacent and prefix pairs of 300 human + 300 LLaVA VIST test stories and 150 VWP stories (dHM data)."""
    texts: list[str] = []
    for sub, name, n in (("vist", "gt_test", 300), ("vist", "llava_vc_p3", 300), ("vwp", "gt_test", 150)):
        path = shared_file("dhm-visual-storytelling", "data", "stories", sub, f"{name}.json")
        data = json.loads(path.read_text(encoding="utf-8"))
        texts += [data[k] for k in sorted(data)[:n]]
    pairs: list[tuple[str, str]] = []
    for t in texts:
        s = split_sentences(t)
        pairs += [p for p in adjacent_pairs(s) + prefix_pairs(s) if p is not None]
    return pairs


def test_encode_many_equals_official_on_real_stories(real_pairs: list[tuple[str, str]]) -> None:
    """Ids and token types of every pair equal the official three-call construction (two tokenizers)."""
    from tests.tiny_models import make_tiny_albert_tokenizer

    texts = [a + " " + b for a, b in real_pairs]
    for tok in (story_vocab_tokenizer(texts), make_tiny_albert_tokenizer()):
        model = sop_model(tok)
        assert model._cls_sep is not None  # the word-memo fast path is taken for ALBERT pipelines
        got = model.encode_many(real_pairs)
        assert len(got) == len(real_pairs)
        for (a, b), enc in zip(real_pairs, got, strict=True):
            ids, types = official_encoding(tok, a, b)
            assert (enc.input_ids, enc.token_type_ids) == (ids, types), (a, b)
            assert (enc.error is None) == (len(ids) <= 512)
        # the one-pair `encode` (official calls) agrees too
        assert model.encode(*real_pairs[0]) == got[0]


_PIECES = [*list("abc xyz.,!?'\"`[]"), "[SEP]", "[CLS]", "<unk>", "``", "''", "  ", "\t", "\n", "é", "ﬁ", "\xa0", "Ä"]
odd_text = st.lists(st.sampled_from(_PIECES), max_size=20).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(odd_text, odd_text), min_size=1, max_size=6))
def test_encode_many_equals_official_on_any_text(pairs: list[tuple[str, str]]) -> None:
    """Property: for any text (special-token strings, quotes, odd whitespace, accents, ligatures) the batched
    encoding equals the official one, including its error when the parts' lengths disagree with the pair's."""
    from tests.tiny_models import make_tiny_albert_tokenizer

    tok = _tiny_tok()
    model = _tiny_model()
    for (a, b), enc in zip(pairs, model.encode_many(pairs), strict=True):
        ids, types = official_encoding(tok, a, b)
        assert enc.input_ids == ids and enc.token_type_ids == types, (a, b)
        assert (enc.error is None) == (len(ids) == len(types))
    del make_tiny_albert_tokenizer


_TINY: dict[str, object] = {}


def _tiny_tok():  # type: ignore[no-untyped-def]
    from tests.tiny_models import make_tiny_albert_tokenizer

    if "tok" not in _TINY:
        _TINY["tok"] = make_tiny_albert_tokenizer()
    return _TINY["tok"]


def _tiny_model():  # type: ignore[no-untyped-def]
    if "model" not in _TINY:
        _TINY["model"] = sop_model(_tiny_tok())
    return _TINY["model"]


def test_general_path_equals_official_when_words_are_not_separable(real_pairs: list[tuple[str, str]]) -> None:
    """A tokenizer whose pre-tokeniser is not word-separable takes the joined batch path: same ids."""
    from transformers import PreTrainedTokenizerFast

    from vistkit.models.sop import _word_separable

    tok = _tiny_tok()
    backend = tok.backend_tokenizer
    from tokenizers import pre_tokenizers

    backend2 = type(backend).from_str(backend.to_str())
    backend2.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok2 = PreTrainedTokenizerFast(tokenizer_object=backend2, pad_token="<pad>", unk_token="<unk>")
    tok2.add_special_tokens({"additional_special_tokens": ["[CLS]", "[SEP]"]})
    assert not _word_separable(tok2)
    model = sop_model(tok2)
    assert model._cls_sep is None
    sample = [*real_pairs[:200], ("a  b", " c"), ("x\ty", "[SEP] z")]
    for (a, b), enc in zip(sample, model.encode_many(sample), strict=True):
        ids, types = official_encoding(tok2, a, b)
        assert enc.input_ids == ids and enc.token_type_ids == types


# ----------------------------------------------------------------------------------------- utilities
def test_prefetch_keeps_order_and_reraises() -> None:
    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))
    assert list(prefetch(range(5), depth=0)) == list(range(5))

    def broken():  # type: ignore[no-untyped-def]
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        list(prefetch(broken(), depth=2))


def test_prefetch_overlaps_and_stops_early() -> None:
    """The producer runs ahead while the consumer works; leaving early stops the producer thread."""
    produced: list[int] = []

    def slow():  # type: ignore[no-untyped-def]
        for i in range(1000):
            produced.append(i)
            yield i

    before = threading.active_count()
    for i in prefetch(slow(), depth=2):
        if i == 0:
            time.sleep(0.05)
            assert len(produced) >= 2  # prepared ahead while item 0 was consumed
        if i == 3:
            break
    time.sleep(0.1)
    assert len(produced) < 20 and threading.active_count() == before


def test_batches_respect_token_budget_and_cover_all() -> None:
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(5, 120, size=500)]
    batches = list(batches_by_length(lengths, batch_size=64, max_tokens=2000, max_padding=0.15))
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 64 and (len(b) == 1 or len(b) * longest <= 2000)
        assert min(lengths[i] for i in b) >= 0.85 * longest


def test_device_batches_scatters_back_in_input_order() -> None:
    rows = [[int(v) for v in np.arange(n) + 1] for n in np.random.default_rng(1).integers(1, 40, size=97)]
    runner = DeviceBatches(torch.device("cpu"), token_budget=300, batch_size=16)
    for batch, (ids, mask) in runner.plan([len(r) for r in rows], lambda b: pad_rows([rows[i] for i in b])):
        ids, mask = runner.to_device((torch.from_numpy(ids), torch.from_numpy(mask)))
        runner.submit(batch, (ids * mask).sum(dim=1).double())
    got = runner.gather(len(rows))
    np.testing.assert_array_equal(got, [sum(r) for r in rows])


def test_fast_precisions_are_named_and_close() -> None:
    """tf32 (a no-op on a CPU) and bf16 (module cast, not autocast) are opt-in and named with their measured
    deviation in the signature (measured on ALBERT-large on an H100, BENCHMARKS.md); on a tiny random model on a
    CPU both stay close to the exact path."""
    import tempfile
    from pathlib import Path

    from tests.tiny_models import make_tiny_sop_folder
    from vistkit.data.story import Story
    from vistkit.metrics.base import get_metric
    from vistkit.models.sop import FAST_DEVIATION

    with tempfile.TemporaryDirectory() as tmp:
        folder = make_tiny_sop_folder(Path(tmp))
        stories = [Story("a", "the dog ran . we had a cake . then we went home ."), Story("b", "a day . a park .")]
        exact = get_metric("dhm-c", model=folder)
        base = exact.score(stories).item_scores
        for precision in ("tf32", "bf16"):
            fast = get_metric("dhm-c", model=folder, precision=precision)
            sig = fast.signature()
            assert f"|precision:{precision}|maxdev:{FAST_DEVIATION[precision]}|" in sig
            if precision == "bf16":
                assert next(fast.model.module.parameters()).dtype == torch.bfloat16
            np.testing.assert_allclose(fast.score(stories).item_scores, base, atol=0.05)  # tiny model, CPU


def test_memoised_splitter_equals_sent_tokenize() -> None:
    """coherence's memoised Punkt equals vistkit.text.sentences.sent_tokenize on every dHM story."""
    from vistkit.text.sentences import sent_tokenize

    for sub in ("vist", "vwp"):
        for name in ("gt_test", "llava_vc_p3"):
            path = shared_file("dhm-visual-storytelling", "data", "stories", sub, f"{name}.json")
            for text in json.loads(path.read_text(encoding="utf-8")).values():
                assert split_sentences(text) == sent_tokenize(text)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), max_size=400),
    budget=st.integers(64, 4000),
    padding=st.sampled_from([0.1, 0.15, 0.25, 0.5]),
)
def test_length_buckets_cover_everything_once_within_budget_and_padding(
    lengths: list[int], budget: int, padding: float
) -> None:
    """Property: streaming buckets return every index exactly once, no batch over the token budget (unless
    one item alone is longer) or the item cap, and no item padded by more than ``max_padding``."""
    from vistkit.models.runtime import LengthBuckets

    buckets = LengthBuckets(token_budget=budget, batch_size=50, max_padding=padding)
    batches = [b for i, n in enumerate(lengths) if (b := buckets.add(i, n)) is not None] + buckets.flush()
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 50 and (len(b) == 1 or len(b) * longest <= budget)
        assert min(lengths[i] for i in b) >= (1 - padding) * longest - 1e-9
