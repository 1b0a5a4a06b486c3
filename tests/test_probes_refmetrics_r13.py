"""Probe round 13: the reference-based metrics (coco BLEU/ROUGE-L/CIDEr-D, the three METEORs, sacrebleu, bertscore)
against their reference implementations on odd inputs, and their signatures.

What was compared and agreed (no test needed beyond the existing ones, recorded here): pycocoevalcap 1.2 end to end
(PTBTokenizer + Bleu/Rouge/Cider/Meteor) on combining marks, NFC/NFD, full-width letters, emoji, RTL text,
zero-width and bidi characters, C0/C1 controls, PTB's special tokens, punctuation-only stories, empty, duplicate and
identical references, 1 to 5 references per story and three random 150-story batches of such text: equal to 1e-9;
meteor-album against the jar's own ``-stdio`` server on the same odd text: equal; sacrebleu against
``sacrebleu.BLEU`` with every tokenizer, smoothing and order; vistkit's NLTK 3.8.1 Treebank tokenizer and Punkt
splitter against NLTK 3.8.1 itself (4,000 random strings): equal.

What was wrong:

- sacrebleu's signature showed ``smooth_value`` as sacreBLEU prints it, to two decimals: ``floor`` with 0.001 and
  with 0.004 (corpus 6.15 vs 8.69 on one story) were both signed ``smooth:floor[0.00]``, 0.1 and 0.104 both
  ``floor[0.10]``. The signature now adds ``smooth_value:V`` (the exact value) whenever sacreBLEU's own field does
  not show it exactly.
- METEOR's 1,000-word limit did not bound its time: a story looping on one word against a reference that loops on
  it too, both under the limit, took 14 s at 600 words and six minutes at 1,000 (every pair of equal words is a
  match the aligner places; 1,000-word natural texts take ~7 s). An item whose story and one reference hold more
  than 250,000 pairs of equal words is now left out with the reason, as an over-long text is.
- The compact paraphrase tables (~114 MB each, one per pycocoevalcap install: path, size and mtime) were never
  removed: 14 of them (1.5 GB) in ~/.cache/vistkit/meteor-tables after one day on the probe machine. A helper start
  now marks its table used and removes tables, locks and leftovers unused for 30 days.
"""

from __future__ import annotations

import math
import shutil
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story, StorySet

pytest.importorskip("sacrebleu")


def _one(text: str, ref: str) -> tuple[StorySet, StorySet]:
    return (
        StorySet([Story(story_id="h", text=text, album_id="A")]),
        StorySet([Story(story_id="r", text=ref, album_id="A")]),
    )


HYP = "we went to the park and saw a big dog"
REF = "we went to a park and saw the big cat"


@pytest.mark.parametrize(
    ("method", "a", "b"),
    [("floor", 0.001, 0.004), ("floor", 0.1, 0.104), ("add-k", 1, 1.004), ("add-k", 1e-9, 2e-9)],
)
def test_sacrebleu_smooth_values_that_give_other_numbers_are_signed_apart(method: str, a: float, b: float) -> None:
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    hyps, refs = _one(HYP, REF)
    first = SacreBleu(smooth_method=method, smooth_value=a).score(hyps, refs, key="album")
    second = SacreBleu(smooth_method=method, smooth_value=b).score(hyps, refs, key="album")
    assert first.corpus != second.corpus
    assert first.signature != second.signature
    assert f"smooth_value:{float(b)!r}" in second.signature


@pytest.mark.parametrize(("method", "value"), [("floor", None), ("floor", 0.5), ("add-k", None), ("add-k", 2)])
def test_sacrebleu_smooth_values_sacrebleu_shows_exactly_keep_its_signature(method: str, value: float | None) -> None:
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    signature = SacreBleu(smooth_method=method, smooth_value=value).signature()
    assert "smooth_value" not in signature


# ------------------------------------------------------------------------------------------ METEOR's aligner
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for METEOR")


@needs_java
@pytest.mark.java
@pytest.mark.parametrize("name", ["meteor-vist", "meteor-album", "meteor-coco"])
def test_meteor_leaves_out_a_pair_that_repeats_one_word_hundreds_of_times(name: str) -> None:
    """A looping story against a looping reference, both under the 1,000-word limit: Meteor's aligner tries every
    pair of equal words (600 x 600 took 14 s, 1,000 x 1,000 six minutes): its item is left out with the reason,
    and the other items are scored as before."""
    from vistkit.metrics.base import get_metric

    hyps = StorySet(
        [Story(story_id="h1", text="dog " * 600, album_id="A"), Story(story_id="h2", text=HYP, album_id="B")]
    )
    refs = StorySet(
        [
            Story(story_id="r1", text="dog " * 600, album_id="A"),
            Story(story_id="r1b", text=REF, album_id="A"),
            Story(story_id="r2", text=REF, album_id="B"),
        ]
    )
    started = time.perf_counter()
    result = get_metric(name, prefetch=False).score(hyps, refs, key="album")
    scores = dict(zip(result.item_ids, result.item_scores, strict=True))
    assert "A" in result.excluded and "repeat" in result.excluded["A"]
    assert math.isnan(scores["A"]) and 0 < scores["B"] < 1
    alone = get_metric(name, prefetch=False).score(StorySet([hyps[1]]), StorySet([refs[2]]), key="album")
    assert result.corpus == alone.corpus  # the left-out item adds nothing
    assert time.perf_counter() - started < 60


def test_word_pairs_count_equal_words_across_the_two_texts() -> None:
    from vistkit.metrics.meteor import word_pairs

    assert word_pairs("a a b", "a b b c") == 2 * 1 + 1 * 2
    assert word_pairs("Dog dog", "DOG") == 2  # counted case-blind: -norm lower-cases
    assert word_pairs("", "a") == 0


# ------------------------------------------------------------------------------------ the table cache's disk
@needs_java
@pytest.mark.java
def test_meteor_table_cache_drops_tables_unused_for_a_month(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pycocoevalcap install (a venv, a reinstall: another path or mtime) got its own 114 MB compact table,
    kept forever (1.5 GB in one day on the probe machine). Tables and leftovers unused for `TABLE_CACHE_DAYS` are
    removed when a helper starts; the current table is marked used; recent tables of other installs stay."""
    import os

    import vistkit.models.java as vj

    cache = tmp_path / "tables"
    cache.mkdir()
    monkeypatch.setenv("VISTKIT_METEOR_TABLE_CACHE", str(cache))
    old = time.time() - 60 * 86400
    java = vj.require_java()
    current = cache / f"paraphrase-{vj.table_cache_key(java)}.bin"
    stale = cache / "paraphrase-0123456789abcdef.bin"
    stale_lock = cache / "paraphrase-0123456789abcdef.lock"
    leftover = cache / "paraphrase-0123456789abcdef.bin.tmp12345"
    recent = cache / "paraphrase-fedcba9876543210.bin"
    other = cache / "notes.txt"
    for path in (current, stale, stale_lock, leftover, recent, other):
        path.write_bytes(b"x")
    for path in (current, stale, stale_lock, leftover, other):
        os.utime(path, (old, old))
    vj.tend_table_cache(java)
    assert not stale.exists() and not stale_lock.exists() and not leftover.exists()
    assert current.exists() and current.stat().st_mtime > old + 86400  # in use: marked
    assert recent.exists() and other.exists()  # another install's recent table; not ours to judge


WORD = st.sampled_from(["a", "A", "b", "dog", "Dog", "the"])


@settings(max_examples=200, deadline=None)
@given(st.lists(WORD, max_size=12), st.lists(WORD, max_size=12))
def test_word_pairs_is_the_count_of_equal_word_pairs(a: list[str], b: list[str]) -> None:
    from vistkit.metrics.meteor import word_pairs

    brute = sum(1 for x in a for y in b if x.lower() == y.lower())
    assert word_pairs(" ".join(a), " ".join(b)) == brute == word_pairs(" ".join(b), " ".join(a))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["floor", "add-k"]),
    st.floats(min_value=1e-6, max_value=5, allow_nan=False),
    st.floats(min_value=1e-6, max_value=5, allow_nan=False),
)
def test_sacrebleu_smooth_values_with_other_numbers_have_other_signatures(method: str, a: float, b: float) -> None:
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    hyps, refs = _one(HYP, REF)
    first = SacreBleu(smooth_method=method, smooth_value=a).score(hyps, refs, key="album")
    second = SacreBleu(smooth_method=method, smooth_value=b).score(hyps, refs, key="album")
    if first.corpus != second.corpus:
        assert first.signature != second.signature
