"""Probe round 14: the reference-based metrics on odd inputs and under concurrency.

What was wrong:

- meteor-coco (Meteor's ``-norm``) counted a text's words for its 1,000-word and 250,000-equal-pairs limits by
  whitespace, while Meteor's normaliser makes a word of every ``_ / @ * + = & # | ~ ^ \\ $ % < > [ {`` (and of most
  non-Latin characters): a story of 1,500 "dog"s joined by "_" (one word to vistkit, 2,999 to Meteor) scored
  against itself killed the helper JVM ("the METEOR Java helper stopped unexpectedly", the whole run lost). Words
  are now counted as Meteor's normaliser may split them (an upper bound), so such an item is left out with the
  reason.
- The coco metrics' PTB token cache and tokenised-set cache were shared by threads without a lock: scoring several
  systems from threads (a ThreadPoolExecutor) raised ``KeyError: 'a reference text'`` when one thread emptied the
  cache (its size bound) while another read it.
- cider-d of one story scored alone is 0 whatever its text (idf log(1/1) = 0; pycocoevalcap's value, kept), and
  bertscore with idf over one reference is 0 for a story equal to it (every idf log(2/2) = 0: P and R NaN, F1 0,
  bert_score's values, kept); bertscore reads a text only up to the model's 512 tokens (two stories that differ
  after that score alike). All three were silent; each now warns, saying why.
"""

from __future__ import annotations

import math
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from vistkit.data.story import Story, StorySet

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser, METEOR)")

HYP = "we went to the park and saw a big dog"
REF = "we went to a park and saw the big cat"


@needs_java
@pytest.mark.java
@pytest.mark.parametrize("sep", ["_", "/", "@"])
def test_meteor_coco_counts_words_as_its_normaliser_splits_them(sep: str) -> None:
    """600 "dog"s joined by "_" are one whitespace word but 1,199 words to Meteor -norm: over the limit."""
    from vistkit.metrics.base import get_metric

    hyps = StorySet(
        [
            Story(story_id="h1", text=sep.join(["dog"] * 600), album_id="A"),
            Story(story_id="h2", text=HYP, album_id="B"),
        ]
    )
    refs = StorySet(
        [Story(story_id="r1", text="a cat sat", album_id="A"), Story(story_id="r2", text=REF, album_id="B")]
    )
    result = get_metric("meteor-coco", prefetch=False).score(hyps, refs, key="album")
    assert "A" in result.excluded and "1,000 words" in result.excluded["A"]
    scores = dict(zip(result.item_ids, result.item_scores, strict=True))
    assert math.isnan(scores["A"]) and 0 < scores["B"] < 1


def test_meteor_norm_word_pairs_count_the_words_meteor_makes() -> None:
    """400 "dog"s joined by "/" against the same text: one word each by whitespace, but Meteor -norm aligns 400 x
    400 equal "dog"s and 399 x 399 equal "/"s (319,201 pairs, over the 250,000 limit)."""
    from vistkit.metrics.meteor import meteor_words, skip_reason, word_pairs

    text = "/".join(["dog"] * 400)
    assert word_pairs(text, text) == 1  # whitespace words (meteor-vist, meteor-album: no -norm)
    assert word_pairs(text, text, norm=True) == 400 * 400 + 399 * 399
    assert skip_reason(text, [text], norm=True) is not None
    assert skip_reason(text, [text]) is None
    # an upper bound of what Meteor -norm makes (each count checked against the jar's test length)
    for sample, meteor in [
        ("日本語日本語", 6),
        ("dog\xa0dog\xa0dog", 3),
        ("a\x1cb\x1cc", 5),
        ("dog's", 2),
        ("a,b,c", 3),
        ("cafécafé", 1),
        ("ŁódźŁódź", 1),
        ("x\x00y", 3),
        ("😀😀😀", 3),
        ("e\u0301e\u0301e\u0301", 6),
    ]:
        assert len(meteor_words(sample, norm=True)) >= meteor, sample
    assert len(meteor_words(HYP, norm=True)) == len(HYP.split())  # plain English: the same words


@needs_java
def test_coco_metrics_scored_from_threads_with_a_small_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads scoring systems against one reference set while the token cache is emptied for its size bound."""
    import random

    from vistkit.metrics.base import get_metric

    monkeypatch.setenv("VISTKIT_CACHE_MB", "0.02")
    refs = StorySet(
        [Story(story_id=f"r{i}", text=f"we went to the park {i} and saw a dog", album_id=f"A{i}") for i in range(20)]
    )

    def system(k: int) -> StorySet:
        rnd = random.Random(k)
        return StorySet(
            [
                Story(story_id=f"h{i}", text=f"system {k} says {rnd.random()} about park {i}", album_id=f"A{i}")
                for i in range(20)
            ]
        )

    def job(k: int) -> tuple[float, float]:
        hyps = system(k)
        return (
            get_metric("bleu-4").score(hyps, refs, key="album").corpus,
            get_metric("cider-d").score(hyps, refs, key="album").corpus,
        )

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(job, range(16)))
    assert got == [job(k) for k in range(16)]


def test_bertscore_idf_that_weighs_a_story_zero_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """idf over one reference story is log(2/2) = 0 for each of its words: a story equal to its reference scores F1
    0 (P and R undefined; bert_score's numbers, kept), which now comes with a warning saying why."""
    pytest.importorskip("torch")
    from vistkit.metrics.base import get_metric

    metric = get_metric("bertscore", idf=True)
    hyps = StorySet([Story(story_id="h", text=HYP, album_id="A")])
    refs = StorySet([Story(story_id="r", text=HYP, album_id="A")])
    result = metric.score(hyps, refs, key="album")
    assert result.corpus == 0.0  # bert_score's value
    err = capsys.readouterr().err
    assert "idf" in err and "1 of 1 stories" in err and "one reference" in err
    # idf over several references that weighs no story zero: no warning
    hyps = StorySet(
        [Story(story_id="h", text=HYP, album_id="A"), Story(story_id="h2", text="my old dog", album_id="B")]
    )
    refs = StorySet(
        [Story(story_id="r", text=REF, album_id="A"), Story(story_id="r2", text="my old dog sleeps", album_id="B")]
    )
    metric.score(hyps, refs, key="album")
    assert "idf" not in capsys.readouterr().err
    assert not any(math.isnan(x) for x in metric.score(hyps, refs, key="album").extra["item_P"])


@needs_java
def test_cider_d_of_one_story_says_why_it_is_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """CIDEr-D's idf is log(N / df) over the N stories scored: one story (a quick check, or stories scored one at a
    time) gets idf log(1/1) = 0 for every n-gram and CIDEr-D 0 whatever its text (pycocoevalcap's value, kept);
    a warning now says so."""
    from vistkit.metrics.base import get_metric

    hyps = StorySet([Story(story_id="h", text=HYP, album_id="A")])
    refs = StorySet([Story(story_id="r", text=HYP, album_id="A")])
    assert get_metric("cider-d").score(hyps, refs, key="album").corpus == 0.0
    err = capsys.readouterr().err
    assert "cider-d" in err and "one story" in err
    hyps = StorySet([Story(story_id="h", text=HYP, album_id="A"), Story(story_id="h2", text="a cat", album_id="B")])
    refs = StorySet([Story(story_id="r", text=HYP, album_id="A"), Story(story_id="r2", text="a cat", album_id="B")])
    assert get_metric("cider-d").score(hyps, refs, key="album").corpus > 0
    assert "cider-d" not in capsys.readouterr().err


def test_bertscore_says_when_a_story_is_cut_at_the_model_length(capsys: pytest.CaptureFixture[str]) -> None:
    """The encoder reads at most its max length (512 tokens for minilm-l6), as bert_score: two stories that differ
    only after it score alike. That was silent; a warning now counts the texts cut."""
    pytest.importorskip("torch")
    from vistkit.metrics.base import get_metric

    metric = get_metric("bertscore")
    cap = metric._encoder.max_length
    long_a = " ".join(["we went to the park"] * cap + ["and saw a dog"])
    long_b = " ".join(["we went to the park"] * cap + ["and ate a cake"])
    hyps = StorySet([Story(story_id="h1", text=long_a, album_id="A"), Story(story_id="h2", text=HYP, album_id="B")])
    refs = StorySet([Story(story_id="r1", text=REF, album_id="A"), Story(story_id="r2", text=REF, album_id="B")])
    first = metric.score(hyps, refs, key="album")
    err = capsys.readouterr().err
    assert "bertscore" in err and f"{cap:,} tokens" in err and "1 of 3 texts" in err
    hyps = StorySet([Story(story_id="h1", text=long_b, album_id="A"), Story(story_id="h2", text=HYP, album_id="B")])
    assert metric.score(hyps, refs, key="album").corpus == first.corpus  # bert_score's numbers: the tail unread
    assert "1 of 3 texts" in capsys.readouterr().err  # the cached tokens are checked too
    metric.score(StorySet([hyps[1]]), StorySet([refs[1]]), key="album")
    assert "tokens" not in capsys.readouterr().err
