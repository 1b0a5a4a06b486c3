"""Round-13 probes of the story ranker and the LM metrics on text a reader would not misread: abbreviations,
times, initials, decimal numbers and URLs ("7 a.m.", "Dr. Smith", "$3.50", "www.example.com") ended a sentence
for the ranker's word features, so "We left at 7 a.m. ... came home at 9 p.m." made two one-word sentences
``["m"]`` that overlapped completely (u -7.1 on the tiny LM, -6.5 of it from the word features alone)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vistkit.metrics.base import get_metric
from vistkit.models.story_ranker_v2 import story_words

REPO = Path(__file__).resolve().parents[1]
VAL = REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """story-ranker and the three LM metrics on the tiny random causal LM."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    lm = make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm-r13"))
    names = ("story-ranker", "lm-fluency", "lm-coherence", "lm-perplexity")
    return {name: get_metric(name, lm=str(lm), device="cpu") for name in names}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We woke up at 7 a.m. and left. We came home at 9 p.m. and slept.",
            [["we", "woke", "up", "at", "7", "a.m.", "and", "left"], ["we", "came", "home", "at", "9", "p.m.", "and",
                                                                      "slept"]],
        ),
        ("Dr. Smith met Mr. Jones. They talked.", [["dr", "smith", "met", "mr", "jones"], ["they", "talked"]]),
        ("It cost $3.50 each. We paid 4.5 in all.", [["it", "cost", "3.50", "each"], ["we", "paid", "4.5", "in",
                                                                                        "all"]]),
        ("We saw John F. Kennedy airport. It was big.", [["we", "saw", "john", "f", "kennedy", "airport"],
                                                         ["it", "was", "big"]]),
        ("We visited the U.S. Capitol. See www.example.com/a.b for more.",
         [["we", "visited", "the", "u.s.", "capitol"], ["see", "www.example.com/a.b", "for", "more"]]),
        ("See https://x.org/p?q=1.2. Then we left.", [["see", "https://x.org/p?q=1.2"], ["then", "we", "left"]]),
        # an abbreviation that ends a sentence still ends it when a capitalised sentence follows
        ("We came home at 9 p.m. The next day we slept.", [["we", "came", "home", "at", "9", "p.m."],
                                                          ["the", "next", "day", "we", "slept"]]),
        # VIST's own forms are read as before: a missing space after a period still ends the sentence
        ("it was a big hit.the food was good . we got a grade of a . then we left .",
         [["it", "was", "a", "big", "hit"], ["the", "food", "was", "good"], ["we", "got", "a", "grade", "of", "a"],
          ["then", "we", "left"]]),
        ("and so did I. Then we left.", [["and", "so", "did", "i"], ["then", "we", "left"]]),
        ("We chose plan B. Then we left.", [["we", "chose", "plan", "b"], ["then", "we", "left"]]),
        # VIST's lower case: a title before a word is no end either (as NLTK's Punkt reads it); before a "." it is
        ("across the street lives dr. wennington .", [["across", "the", "street", "lives", "dr", "wennington"]]),
        ("mr. staple came . mr. staple left .", [["mr", "staple", "came"], ["mr", "staple", "left"]]),
        ("we went to see the dr. . it was fine .", [["we", "went", "to", "see", "the", "dr"], ["it", "was", "fine"]]),
    ],
)
def test_an_abbreviation_or_a_number_does_not_end_a_sentence(text: str, expected: list[list[str]]) -> None:
    assert story_words(text) == expected


def test_times_and_titles_do_not_make_overlapping_one_word_sentences(tiny: dict[str, Any]) -> None:
    """The ranker's sentence-overlap and relatedness read the fragments ``["m"]``, ``["dr"]``: writing "a.m." and
    "p.m." (or "Dr." twice) lowered u by 7.1 (6.5) on the tiny LM; what is left is the LM reading another
    spelling."""
    ranker = tiny["story-ranker"]
    pairs = [
        ("We woke up at 7 a.m. and left for the beach. We came home at 9 p.m. and slept well.",
         "We woke up at 7 am and left for the beach. We came home at 9 pm and slept well."),
        ("Dr. Smith gave a talk. Dr. Jones asked questions after lunch.",
         "Doctor Smith gave a talk. Doctor Jones asked questions after lunch."),
        ("mr. staple gave a talk to the class . then mr. staple showed photos of the moon .",
         "mister staple gave a talk to the class . then mister staple showed photos of the moon ."),
        ("The tickets cost $3.50 each. The popcorn cost $4.50 and the drinks were cheap.",
         "The tickets cost $3 each. The popcorn cost $4 and the drinks were cheap."),
    ]
    lexical = ("ttr", "repeated_trigram_share", "max_sentence_overlap", "topic_relatedness")
    for a, b in pairs:
        ea, eb = ranker.explain([a, b])
        assert ea["max_sentence_overlap"] >= eb["max_sentence_overlap"] - 1e-9, (a, ea, eb)
        assert sum(ea[k] for k in lexical) > sum(eb[k] for k in lexical) - 1.0, (a, ea, eb)


@pytest.mark.skipif(not VAL.is_file(), reason="needs ../shared (VIST val)")
def test_vist_val_stories_are_split_as_before() -> None:
    """The ranker's statistics come from VIST val human stories: of the 3,000, only those with a period inside a
    word read otherwise than with the first splitter (every period an end): "d.j.", "26.2" and a lower-case title
    ("mr. staple", "dr. suess", "mrs. claus"; one statistics story, rebuilt with it)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import val_stories

    from vistkit.models.story_ranker_v2 import _TOKEN
    from vistkit.text.detokenize import canonical_placeholders, plain_quotes

    def before(text: str) -> list[list[str]]:  # the splitting of the release the statistics were built with
        out: list[list[str]] = []
        sentence: list[str] = []
        for token in _TOKEN_V0.findall(canonical_placeholders(plain_quotes(text)).lower()):
            if token[0] in ".!?":
                if sentence:
                    out.append(sentence)
                sentence = []
            else:
                sentence.append(token)
        return [*out, sentence] if sentence else out

    import re

    _TOKEN_V0 = re.compile(r"\[[^\W_]+\]|[^\W_]+(?:'[^\W_]+)*|'[^\W_]+|[.!?]+")
    assert _TOKEN is not None
    stats = val_stories(400)
    assert [i for i, t in enumerate(stats) if story_words(t) != before(t)] == [288]  # "lives dr. wennington ."
    # of all 3,000: "the d.j.'s started", "a huge 26.2 marathon" and lower-case titles; no fragments "d", "mr"
    changed = [t for t in val_stories(3000) if story_words(t) != before(t)]
    assert len(changed) == 13 and all(re.search(r"d\.j\.|26\.2|\b(?:mrs?|dr)\. \w", t) for t in changed), changed
    assert not [t for t in changed if any(s in (["mr"], ["mrs"], ["dr"]) for s in story_words(t))]


ODD_WORDS = ["we", "went", "to", "the", "park", "Dr.", "Smith", "a.m.", "p.m.", "3.50", "www.example.com/a.b",
             "U.S.", "F.", "Kennedy", "😀", "!!!", "\t", "\n", "[male]", "<b>", "...", "The", "fun", "dog", "ran"]
odd_sentence = st.lists(st.sampled_from(ODD_WORDS), min_size=1, max_size=7).map(lambda ws: " ".join(ws) + " .")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sents=st.lists(odd_sentence, min_size=1, max_size=5), pick=st.integers(min_value=0, max_value=4))
def test_copies_and_explain_on_odd_text(tiny: dict[str, Any], sents: list[str], pick: int) -> None:
    """The card's invariants on text with abbreviations, URLs, emoji, markup and tabs: a copied sentence never
    raises a score, and explain()'s contributions sum to u."""
    story = " ".join(sents)
    copied = " ".join([*sents, sents[pick % len(sents)]])
    for name in ("story-ranker", "lm-fluency", "lm-coherence"):
        before, after = tiny[name].score([story, copied]).item_scores
        if np.isfinite(before):
            assert after <= before + 1e-5, (name, story)
    ranker = tiny["story-ranker"]
    parts = ranker.explain([story, copied])
    assert [sum(p.values()) for p in parts] == pytest.approx(ranker.utility([story, copied]).tolist())


@pytest.mark.parametrize("how", ["safetensors", "oserror"])
def test_a_full_disk_while_converting_the_lm_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A full disk (ENOSPC, or a file-size limit: EFBIG) while the packaged LM was converted said "unexpected
    SafetensorError: Error while serializing: I/O error: File too large (os error 27) - this is a bug in vistkit";
    it is an `OutputError` naming the cache and the fix, and nothing half-written stays behind."""
    import errno

    from vistkit.errors import OutputError
    from vistkit.models import lm as lm_module
    from vistkit.models.checkpoints import file_sha256

    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    root = tmp_path / "cache" / "lm"
    src = lm_module.LMSource(
        "smollm2-135m", "packaged", root / "smollm2-135m-abc", gguf, file_sha256(gguf), "packaged"
    )

    def full(source: Path, out: Path, *, source_sha256: str) -> None:
        (out / "model.safetensors").write_bytes(b"\0" * 1024)  # a part was written before the disk filled up
        if how == "safetensors":
            from safetensors import SafetensorError

            raise SafetensorError("Error while serializing: I/O error: File too large (os error 27)")
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "tokenizer.json"))

    monkeypatch.setattr(lm_module, "_write_converted", full)
    with pytest.raises(OutputError, match=r"could not be written into .*cache.*(full|too large).*VISTKIT_CACHE"):
        lm_module.convert_packaged(src)
    assert [p.name for p in root.iterdir()] == [".smollm2-135m-abc.lock"]  # no folder, no temporary folder
