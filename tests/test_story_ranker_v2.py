"""story-ranker v2 (the default ranker) and its guard rails (issue 17, item 4).

Guard rails, on VIST *val* human stories with the packaged model and the packaged SmolLM2 (marked ``models``),
and as hypothesis properties on a tiny random LM:
- adding a copy of one of its sentences never raises a story's score (ranker, lm-fluency, lm-coherence);
- swapping a sentence for a sentence of another story lowers it in most stories;
- the score is not a length score: |Pearson| with word count and with mean sentence length <= 0.2 on VIST val
  human stories, and joining two sentences with "and" does not lower it on average;
- shuffling the sentences lowers it on average.
Also: the shipped configuration is rebuilt bit for bit from the shipped features file, every weight has its
a-priori sign and is non-zero, and the card states them.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, requires_shared, shared_file
from vistkit.data.story import Story
from vistkit.models.lm import Unigram
from vistkit.models.story_ranker_v2 import (
    FEATURES,
    StoryRankerV2Model,
    config_sha256,
    default_model_dir,
    has_other_language_sentence,
    is_not_english,
    language_lists,
    lexical_features,
    other_script,
    story_words,
    word_specificity,
)

pytest.importorskip("torch")
pytest.importorskip("transformers")

WORDS = "the a we went to park beach dog family day fun great happy water sun friends party food".split()
N_GUARD = 24  # val stories per guard rail with the real LM (~1 min on a 2-core CPU for all of them)


# --------------------------------------------------------------------------------------------------- config
def test_shipped_config_signs_weights_and_card() -> None:
    config = json.loads((default_model_dir() / "config.json").read_text())
    by_name = {f["name"]: f for f in config["features"]}
    assert [f.name for f in FEATURES] == list(by_name)
    for f in FEATURES:
        assert by_name[f.name]["sign"] == f.sign and by_name[f.name]["weight"] == f.weight > 0
        assert by_name[f.name]["sd"] > 0 and by_name[f.name]["n"] >= 300
    assert "val" in config["training_data"] and "test" not in config["training_data"].replace("test story", "")
    card = (REPO / "docs" / "models" / "story-ranker-v2.md").read_text()
    for f in FEATURES:  # every parameter shown with its sign
        assert f"`{f.name}`" in card and f"{f.sign:+d}" in card


def test_rebuild_is_bit_for_bit(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train_ranker_v2.py"), "build", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rebuilt = json.loads((tmp_path / "config.json").read_text())
    shipped = json.loads((default_model_dir() / "config.json").read_text())
    assert config_sha256(rebuilt) == config_sha256(shipped)


def test_model_refuses_a_config_with_a_flipped_sign(tmp_path: Path) -> None:
    from vistkit.errors import InputError

    config = json.loads((default_model_dir() / "config.json").read_text())
    config["features"][0]["sign"] = -config["features"][0]["sign"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="must have sign"):
        StoryRankerV2Model(tmp_path)
    config["features"][0]["sign"] = -config["features"][0]["sign"]
    flu = next(f for f in config["features"] if f["name"] == "lm_fluency")
    flu["max_z"] = None  # the cap is part of the design too: a file cannot give fluency credit above typical
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=r"must have max_z 0\.0"):
        StoryRankerV2Model(tmp_path)
    flu["max_z"] = 0.0
    bad_values = [("clip", -1.0, "config"), ("clip", 0.0, "config"), ("weight", "Infinity", "flu"), ("sd", 0.0, "flu")]
    for field, value, where in bad_values:
        bad = json.loads(json.dumps(config))
        (bad if where == "config" else next(f for f in bad["features"] if f["name"] == "lm_fluency"))[field] = value
        (tmp_path / "config.json").write_text(json.dumps(bad).replace('"Infinity"', "Infinity"))
        with pytest.raises(InputError, match="clip that is not a positive number"):
            StoryRankerV2Model(tmp_path)


@requires_shared
def test_not_a_length_score_on_val_stories() -> None:
    """|Pearson(u, word count)| and |Pearson(u, mean sentence length)| <= 0.2 over the shipped val sample
    (the features of the stories the statistics came from, recomputed from the text for the lexical part)."""
    from vistkit.metrics.story_ranker import sentence_encoder
    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import FEATURES_FILE, val_stories

    payload = json.loads(FEATURES_FILE.read_text())
    table = np.asarray(payload["rows"], dtype=float)
    stories = val_stories(len(table))
    model = StoryRankerV2Model()
    u = model.utility(table)
    words = np.array([sum(map(len, story_words(t))) for t in stories], dtype=float)
    msl = np.array([np.mean([len(s) for s in story_words(t)]) for t in stories])
    assert abs(np.corrcoef(u, words)[0, 1]) <= 0.2
    assert abs(np.corrcoef(u, msl)[0, 1]) <= 0.2
    # the lexical columns of the file are what the code computes from the text (relatedness: float32 sentence
    # embeddings batched differently here, so within 1e-6)
    encoder = sentence_encoder("cpu")
    unigram = Unigram()
    for row, text in zip(table[:50], stories[:50], strict=True):
        lex = lexical_features(story_words(text), encoder.encode, unigram)
        for k, name in enumerate(f.name for f in FEATURES):
            if name in lex:
                assert row[k] == pytest.approx(lex[name], abs=1e-6 if name == "topic_relatedness" else 1e-9)


# --------------------------------------------------------------------------------------------------- lexical
def test_lexical_features_by_hand() -> None:
    f = lexical_features([["the", "dog", "ran"], ["the", "dog", "ran"], ["a", "cat", "sat"]])
    assert f["ttr"] == pytest.approx(6 / 9)
    assert f["repeated_trigram_share"] == pytest.approx(6 / 9)
    assert f["max_sentence_overlap"] == pytest.approx(1.0)
    assert np.isnan(f["topic_relatedness"])  # no word vectors given
    assert np.isnan(f["word_specificity"])  # no word frequencies given
    assert np.isnan(lexical_features([])["ttr"])


def test_word_specificity_by_hand() -> None:
    """Mean -ln P(w) over the distinct content words the frequency list knows: function words, placeholders,
    numbers and strings outside the list do not count, and a repeated word counts once."""
    unigram = Unigram()
    words = ["the", "dog", "and", "dog", "[male]", "female0", "1999", "zzqxv", "quaint", "didn't", "it's", "lake's"]
    expected = -np.mean([unigram.logprob(w) for w in ("dog", "lake", "quaint")])  # no function word, no clitic
    assert word_specificity(words, unigram.logprob, unigram.knows) == pytest.approx(expected)
    assert unigram.knows("quaint") and not unigram.knows("zzqxv") and unigram.logprob("zzqxv") == np.log(1e-8)
    assert np.isnan(word_specificity(["[male]", "zzqxv"], unigram.logprob, unigram.knows))
    # a specific word raises it, a generic one lowers it (the a-priori sign: detail is better)
    plain = lexical_features([["we", "had", "fun"], ["it", "was", "great"]], unigram=unigram)["word_specificity"]
    detail = lexical_features([["we", "had", "fun"], ["the", "lighthouse", "was", "great"]], unigram=unigram)
    assert detail["word_specificity"] > plain


@settings(max_examples=60, deadline=None)
@given(
    sents=st.lists(st.lists(st.sampled_from([*WORDS, "[male]", "zzqxv", "lighthouse"]), min_size=1), min_size=1),
    pick=st.integers(min_value=0),
)
@example(sents=[["the"], ["went", "zzqxv", "zzqxv"]], pick=1)  # a copy made it "made up" when tokens were counted
@example(sents=[["lighthouse", "went"], ["zzqxv", "lighthouse", "went"]], pick=0)  # a join added a function word
def test_word_specificity_ignores_copies_order_and_joins(sents: list[list[str]], pick: int) -> None:
    unigram = Unigram()
    spec = lexical_features(sents, unigram=unigram)["word_specificity"]
    copied = lexical_features([*sents, sents[pick % len(sents)]], unigram=unigram)["word_specificity"]
    reordered = lexical_features(sents[::-1], unigram=unigram)["word_specificity"]
    joined = lexical_features([[*sents[0], "and", *sents[-1]], *sents[1:-1]], unigram=unigram)["word_specificity"]
    assert (np.isnan(spec) and np.isnan(copied) and np.isnan(joined)) or spec == copied == reordered == joined


def test_topic_relatedness_by_hand() -> None:
    from vistkit.models.story_ranker_v2 import topic_relatedness

    vec = {"a dog": np.array([1.0, 0.0]), "a cat": np.array([1.0, 0.0]), "the car": np.array([0.0, 1.0])}
    seen: list[str] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return np.stack([vec[t] for t in texts])

    # sentences: dog, cat (same direction), car (orthogonal); the repeated "dog" sentence counts once
    value = topic_relatedness([["a", "dog"], ["a", "cat"], ["the", "car"], ["a", "dog"], []], encode)
    # dog vs mean(cat, car) = cos(45 deg); cat likewise; car vs mean(dog, cat) = 0
    assert value == pytest.approx((2 * np.sqrt(0.5) + 0.0) / 3)
    assert seen == ["a dog", "a cat", "the car"]  # each distinct non-empty sentence encoded once, words joined
    assert np.isnan(topic_relatedness([["a", "dog"], ["a", "dog"]], encode))  # one distinct sentence


# --------------------------------------------------------------------------------------------------- tiny LM
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_causal_lm

    return Path(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm")))


@pytest.fixture(scope="module")
def tiny_ranker(tiny_lm: Path):  # type: ignore[no-untyped-def]
    from vistkit.metrics.base import get_metric

    names = ("story-ranker", "lm-fluency", "lm-coherence")
    return {name: get_metric(name, lm=str(tiny_lm), device="cpu") for name in names}


sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(lambda ws: " ".join(ws) + " .")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sents=st.lists(sentence, min_size=2, max_size=6), pick=st.integers(min_value=0, max_value=5))
def test_copy_of_a_sentence_never_raises_the_score_tiny_lm(tiny_ranker, sents: list[str], pick: int) -> None:  # type: ignore[no-untyped-def]
    story = Story("s", " ".join(sents))
    copied = Story("s", " ".join([*sents, sents[pick % len(sents)]]))
    for name, metric in tiny_ranker.items():
        before, after = metric.score([story]).item_scores[0], metric.score([copied]).item_scores[0]
        if np.isfinite(before):
            assert after <= before + 1e-5, name  # float32 LM: batch shapes change the last bits


def test_progress_follows_the_blocks(tiny_lm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder's and the LM's inner loops move the count block by block (`progress.part`): the first block's
    inner loops once said the whole run was done (2,019/2,019 after 1,024 stories, then minutes of silence)."""
    from vistkit import progress
    from vistkit.metrics import story_ranker
    from vistkit.metrics.base import get_metric

    monkeypatch.setattr(story_ranker, "ENCODER_BLOCK", 8)
    seen: list[int] = []
    real = progress.Task.update

    def spy(self: progress.Task, done: int) -> None:
        real(self, done)
        if self.parent is None:
            seen.append(self.done)

    monkeypatch.setattr(progress.Task, "update", spy)
    metric = get_metric("story-ranker", lm=str(tiny_lm), device="cpu")
    metric.score([Story(str(k), f"we went to park {k} . the dog ran . we had fun .") for k in range(24)])
    assert seen and seen[-1] == 24
    assert all(d <= 8 for d in seen[: seen.index(8)]) and 8 in seen and 16 in seen, seen


def test_explain_sums_to_the_utility(tiny_ranker) -> None:  # type: ignore[no-untyped-def]
    metric = tiny_ranker["story-ranker"]
    stories = [Story("a", "we went to the park . the dog ran . we had fun ."), Story("b", "the the the .")]
    parts = metric.explain(stories)
    u = metric.utility(stories)
    assert [sum(p.values()) for p in parts] == pytest.approx(u.tolist())
    assert set(parts[0]) == {f.name for f in FEATURES}
    empty = metric.explain([Story("c", "...")])[0]  # no words: every feature at its worst, summing to the floor
    assert sum(empty.values()) == pytest.approx(-15.0) and all(v < 0 for v in empty.values())
    made_up = Story("d", "qzxv blorp snarfle wibble . glorp zzyzx quux .")  # nothing repeats, all "rare": gated
    assert metric.utility([made_up])[0] == pytest.approx(-15.0)
    # another language: its words are in the English list (not made up), rare in English (specific), and the LM
    # reads them fluently; a French story scored +4.4 before this gate
    foreign = [
        "nous sommes allés au parc . c'était une belle journée . les enfants ont joué . nous sommes rentrés .",
        "Fuimos al parque. Fue un día hermoso. Los niños jugaron en los columpios. Volvimos a casa.",
        "Wir gingen in den Park. Es war ein schöner Tag. Die Kinder spielten auf der Schaukel. Wir fuhren nach Hause.",
    ]
    assert metric.utility([Story(str(k), t) for k, t in enumerate(foreign)]).tolist() == pytest.approx([-15.0] * 3)
    english = "we went to the park . it was a beautiful day . the kids played on the swings . we went home ."
    assert not is_not_english([w for s in story_words(english) for w in s])
    assert not is_not_english(["hello", "world"])  # too few words to tell
    # one sentence in another language or script inside an English story: 16 of 30 VIST val stories gained from it
    # before the sentence-level gate (new words raise the type-token ratio; English lists find them rare)
    mixed = [
        "we went to the beach . nous sommes allés à la plage avec nos amis . we had fun .",
        "we went to the park . fue un día hermoso . the kids played on the swings .",
        "we went to the party . на празднике было много людей . we went home .",
        "we went to the park . 我们在公园里玩得很开心 . we went home .",
    ]
    assert metric.utility([Story(str(k), t) for k, t in enumerate(mixed)]).tolist() == pytest.approx([-15.0] * 4)


@pytest.mark.parametrize(
    ("sentence", "foreign"),
    [
        ("nous sommes allés à la plage avec nos amis", True),
        ("es war ein schöner tag", True),
        ("die kinder spielten im park", True),  # the lowest foreign sentence measured: 4.46 nats per word
        ("we gingen met onze vrienden naar het strand", True),
        ("fomos à praia com os nossos amigos", True),
        ("на празднике было много людей", True),
        ("我们在公园里玩得很开心", True),
        ("ciao bella", False),  # too short to tell
        ("the tour de france", False),
        ("i do i do", False),  # the highest of ~100,000 English sentences: 1.26
        ("we ate tacos and enchiladas at la casa de pepe", False),
        ("[female] went as cruella de vil", False),
        ("the sign read bienvenue a paris", False),
        ("we ate 饺子 and noodles at the market", False),  # a few letters of another script
    ],
)
def test_sentence_in_another_language(sentence: str, foreign: bool) -> None:
    words = story_words(sentence)[0]
    assert (other_script(words) or language_lists().other_language(words)) is foreign
    english = story_words("we went to the park . it was a beautiful day .")
    assert has_other_language_sentence([*english, words], language_lists()) is foreign


@requires_shared
def test_no_vist_val_story_is_taken_for_another_language() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import val_stories

    stories = val_stories(3000)
    assert len(stories) >= 2500
    assert not [t for t in stories if is_not_english([w for s in story_words(t) for w in s])]
    assert not [t for t in stories if has_other_language_sentence(story_words(t), language_lists())]


def test_story_words_counts_words_only() -> None:
    """Punctuation and symbols are not words; a placeholder is one word in one spelling; a word of any script
    stays whole; typographic quotes are ASCII ones; sentences end at . ! ?"""
    assert story_words("`` we went ! '' [MALE] & [ Female ] paid $ 20 -- wow ... José's café / bar") == [
        ["we", "went"],
        ["[male]", "[female]", "paid", "20", "wow"],
        ["josé's", "café", "bar"],
    ]
    assert story_words("\u201cWe didn\u2019t go.\u201d it 's fine . did n't we ?") == [
        ["we", "didn't", "go"], ["it", "'s", "fine"], ["did", "n't", "we"]]
    assert story_words("... !? “ ”") == []
    assert story_words("[male0] met [FEMALE1] .") == [["[male0]", "met", "[female1]"]]  # VWP numbers them


def _respelled(sents: list[str], how: str) -> str:
    if how == "curly quotes around each sentence":
        return " ".join(f"\u201c {s} \u201d" for s in sents)
    if how == "straight quotes around each sentence":
        return " ".join(f'" {s} "' for s in sents)
    if how == "upper-case placeholders":
        return " ".join(sents).replace("[male]", "[MALE]").replace("[female]", "[ Female ]")
    if how == "PTB quotes around each sentence":
        return " ".join(f"`` {s} ''" for s in sents)
    raise AssertionError(how)


RESPELLINGS = (
    "curly quotes around each sentence", "straight quotes around each sentence", "upper-case placeholders",
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sents=st.lists(st.lists(st.sampled_from([*WORDS, "[male]", "[female]"]), min_size=1, max_size=8), min_size=1,
                   max_size=5).map(lambda ss: [" ".join(s) + " ." for s in ss]),
    how=st.sampled_from(RESPELLINGS),
)
def test_spelling_of_quotes_and_placeholders_does_not_move_the_score(tiny_ranker, sents: list[str], how: str) -> None:  # type: ignore[no-untyped-def]
    """Curly or straight quotes, and ``[MALE]`` for ``[male]``, are the same story to every feature: the LM reads
    the same text and the lexical features count the same words. Before: curly quotes around each sentence of 40
    VIST val stories lowered u by 3.1 on average (the quote marks counted as repeated words)."""
    metric = tiny_ranker["story-ranker"]
    curly = metric.utility([Story("a", _respelled(sents, "curly quotes around each sentence"))])[0]
    quoted = metric.utility([Story("a", _respelled(sents, how))])[0]
    if how == "upper-case placeholders":
        assert quoted == metric.utility([Story("a", " ".join(sents))])[0]
    else:
        assert quoted == curly
    plain, marked = story_words(" ".join(sents)), story_words(_respelled(sents, how))
    assert plain == marked  # the lexical features see the same words
    assert story_words(_respelled(sents, "PTB quotes around each sentence")) == plain


def test_made_up_words_gate() -> None:
    """Fewer than half of the plain words known -> no story; placeholders and numbers do not count either way."""
    from vistkit.models.story_ranker_v2 import is_made_up

    unigram = Unigram()
    assert is_made_up(["qzxv", "blorp", "the"], unigram.knows)
    assert not is_made_up(["qzxv", "the", "dog"], unigram.knows)  # 2 of 3 known
    assert not is_made_up(["[male]", "female0", "1999", "went", "qzxv"], unigram.knows)  # 1 of 2 plain: not fewer
    assert not is_made_up(["[male]", "1999"], unigram.knows)  # no plain word: not judged here
    assert np.isnan(lexical_features([["qzxv", "blorp"], ["the"]], unigram=unigram)["ttr"])
    assert lexical_features([["qzxv", "blorp"], ["the"]])["ttr"] == 1.0  # without a frequency list: no gate


def test_per_item_csv_shows_each_feature_contribution(tiny_lm: Path, tmp_path: Path) -> None:
    import csv
    import json

    from vistkit.cli import main

    texts = {"a": "we went to the park . the dog ran . we had fun .", "b": "the the the .", "c": "..."}
    src = tmp_path / "stories.json"
    src.write_text(json.dumps([{"story_id": k, "story": v} for k, v in texts.items()]))
    out = tmp_path / "items.csv"
    opts = ["-O", f"story-ranker.lm={tiny_lm}", "-O", "story-ranker.device=cpu"]
    assert main(["score", str(src), "-m", "story-ranker", "--per-item", str(out), "-q", *opts]) == 0
    rows = list(csv.DictReader(out.open(newline="")))
    names = [f.name for f in FEATURES]
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    for r in rows:
        assert float(r["story-ranker"]) == pytest.approx(sum(float(r[f"story-ranker.{n}"]) for n in names))
    assert float(rows[2]["story-ranker"]) == pytest.approx(-15.0)
    # the lowest score says why, in its own column and on stderr's caption
    assert [r["story-ranker note"] for r in rows] == ["", "", "lowest score: no words"]


def test_floor_reasons_name_the_gate() -> None:
    from vistkit.models.story_ranker_v2 import floor_reason

    unigram, languages = Unigram(), language_lists()
    english = story_words("we went to the park . the dog ran after the ball . we had fun .")
    assert floor_reason(english, unigram, languages) is None
    assert floor_reason([], unigram, languages) == "no words"
    french = story_words("nous sommes allés au parc . les enfants ont joué dans le sable toute la journée .")
    assert floor_reason(french, unigram, languages).startswith("not English")
    assert floor_reason(story_words("the qzxv blorp frumb snarx ."), unigram, languages).startswith("made-up")
    russian = "мы пошли в парк и играли весь день"
    mixed = [*english, *story_words(russian + " .")]
    assert floor_reason(mixed, unigram, languages) == f"a sentence in another language: {russian}"


@requires_shared
def test_a_long_english_text_is_english_and_a_long_french_one_is_not() -> None:
    """The share of function-word types falls with length: 18,000 words of VIST sentences were once floored as
    "not English". Judged in windows of ~250 words, a long English text stays English, a long French one does not,
    and a VIST-length story is one window (the verdict of the whole story, as before)."""
    from vistkit.models.story_ranker_v2 import LANGUAGE_WINDOW_WORDS, _few_function_words

    sys.path.insert(0, str(REPO / "scripts"))
    from train_ranker_v2 import val_stories

    stories = val_stories(400)
    joined = [w for t in stories for s in story_words(t) for w in s]
    assert len(joined) > 15_000 and _few_function_words(joined)  # the whole text's share is below the line
    assert not is_not_english(joined)
    french = "nous sommes allés au parc avec toute la famille . les enfants ont joué dans le sable . " * 400
    assert is_not_english([w for s in story_words(french) for w in s])
    for t in stories[:100]:
        words = [w for s in story_words(t) for w in s]
        assert len(words) <= LANGUAGE_WINDOW_WORDS and is_not_english(words) == _few_function_words(words)


def test_features_do_not_depend_on_the_encoder_block(tiny_ranker, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Sentence vectors are held one block of stories at a time (bounded memory); the table is the same."""
    import vistkit.metrics.story_ranker as module

    metric = tiny_ranker["story-ranker"]
    texts = [f"we went to park number {i} . the dog ran far . it was fun ." for i in range(7)]
    texts += ["a cat sat . a cat sat .", "", "one sentence only ."]
    whole = metric.features(texts)
    monkeypatch.setattr(module, "ENCODER_BLOCK", 3)
    blocks = metric.features(texts)
    np.testing.assert_allclose(blocks, whole, rtol=0, atol=1e-6)  # same code; float32 batches may differ by ulps
    assert np.isnan(whole[8]).all() and np.isnan(whole[9, [2, 4, 5]]).all()  # no words; one sentence


@settings(max_examples=300, deadline=None)
@given(
    z=st.lists(st.one_of(st.floats(-6, 6), st.just(float("nan"))), min_size=len(FEATURES), max_size=len(FEATURES)),
    more=st.floats(0, 6),
)
def test_fluency_above_typical_earns_nothing_and_broken_english_earns_no_credit(z: list[float], more: float) -> None:
    """Over any feature row (z scale, undefined values included): raising fluency while it is at or above the
    mean never changes u; below the line for broken English no feature's contribution is positive."""
    model = StoryRankerV2Model()
    flu = model.names.index("lm_fluency")
    row = model.mean + np.asarray(z) * model.sd
    ttr = model.names.index("ttr")
    row[ttr] = np.nan_to_num(row[ttr], nan=model.mean[ttr])  # a story with words (an undefined ttr means none)
    typical, fluent = row.copy(), row.copy()
    typical[flu], fluent[flu] = model.mean[flu], model.mean[flu] + more * model.sd[flu]
    assert model.utility(np.vstack([typical, fluent]))[1] == pytest.approx(model.utility(typical[None])[0], abs=1e-12)
    broken = row.copy()
    broken[flu] = model.mean[flu] + (model.rules["no_credit_fluency_z"] - more) * model.sd[flu]
    assert np.all(model.contributions(broken[None]) <= 0)


def test_rules_for_text_the_lm_cannot_read() -> None:
    """Fluency gives no credit above a typical human story (its cap, max_z 0): a story more fluent than typical
    scores like a typical one (SLOR's high end is blandness, repetition and long sentences; a story that lost its
    periods is one long sentence), a less fluent one loses. The centre (mean capped z of the statistics stories)
    keeps a typical story at 0 on average; one-sentence stories follow the same rule."""
    model = StoryRankerV2Model()
    flu, coh = model.names.index("lm_fluency"), model.names.index("lm_coherence")
    assert model.max_z[flu] == 0 and -0.5 < model.centre[flu] < -0.2  # E[min(z, 0)] of a normal z: -0.40
    assert all(model.max_z[k] == model.clip and model.centre[k] == 0 for k in range(len(model.names)) if k != flu)
    typical = model.mean.copy()
    fluent, broken = typical.copy(), typical.copy()
    fluent[flu] += 2 * model.sd[flu]
    broken[flu] -= 2 * model.sd[flu]
    table = np.vstack([fluent, broken, fluent, broken, typical])
    table[2:4, coh] = np.nan  # one sentence
    z = model.z(table)
    c = model.centre[flu]
    assert z[0, flu] == pytest.approx(-c) == z[4, flu] and z[1, flu] == pytest.approx(-2 - c)
    assert z[2, flu] == pytest.approx(-c) and z[3, flu] == pytest.approx(-2 - c) and (z[2:4, coh] == 0).all()
    # broken English (fluency z <= -2): no feature can count for the story (the PMI of garbled text is inflated,
    # text without function words repeats fewer words), but each can still count against it
    good = np.sign(model.coef) * 2 * model.sd  # every feature 2 SD on its good side
    garbled, coherent = typical + good, typical + good
    garbled[flu] = typical[flu] - 2.5 * model.sd[flu]
    coherent[flu] = typical[flu]
    bad = typical - np.sign(model.coef) * model.sd
    bad[flu] = garbled[flu]
    parts = model.contributions(np.vstack([garbled, coherent, bad]))
    assert np.all(parts[0, [k for k in range(len(model.names)) if k != flu]] == 0)
    assert parts[1, coh] == pytest.approx(2 * abs(model.coef[coh])) and np.all(parts[1] > 0)
    assert np.all(parts[2] < 0)  # a penalty stays a penalty
    assert model.rules == {"no_credit_fluency_z": -2.0}
    assert model.config["rules"] == model.rules  # in the config, so the signature's hash names them
    no_words = np.full((1, len(model.names)), np.nan)
    assert model.utility(no_words)[0] == pytest.approx(-model.clip * np.abs(model.coef).sum())


# --------------------------------------------------------------------------------------------------- real LM
def _val_stories(n: int) -> list[list[str]]:
    from vistkit.metrics.coherence import split_sentences

    data = json.loads(shared_file("vist-11777-baselines", "arel_reference", "val_reference.json").read_text())
    stories = [s for album in sorted(data) for s in data[album]]
    random.Random(11).shuffle(stories)  # not the sample the statistics came from (seed 2)
    out = [split_sentences(t) for t in stories[: 3 * n]]
    return [s for s in out if len(s) >= 4][:n]


@pytest.fixture(scope="module")
def real() -> dict[str, object]:
    from vistkit.metrics.base import get_metric

    return {name: get_metric(name, device="cpu") for name in ("story-ranker", "lm-fluency", "lm-coherence")}


@pytest.fixture(scope="module")
def guard(real: dict[str, object]) -> dict[str, dict[str, np.ndarray]]:
    """Scores of N_GUARD val stories and of four variants of each, for the three metrics (one LM pass each)."""
    rng = random.Random(5)
    stories = _val_stories(N_GUARD)
    pool = [s for ss in _val_stories(3 * N_GUARD)[N_GUARD:] for s in ss]
    kinds = ("original", "copy", "swap", "join", "shuffle", "near", "unpunctuated")
    variants: dict[str, list[str]] = {kind: [] for kind in kinds}
    for ss in stories:
        variants["original"].append(" ".join(ss))
        variants["copy"].append(" ".join([*ss, ss[rng.randrange(len(ss))]]))
        k = rng.randrange(1, len(ss))
        variants["swap"].append(" ".join([*ss[:k], rng.choice(pool), *ss[k + 1 :]]))
        j = rng.randrange(len(ss) - 1)
        joined = ss[j].rstrip(" .!?") + " and " + ss[j + 1]
        variants["join"].append(" ".join([*ss[:j], joined, *ss[j + 2 :]]))
        shuffled = list(ss)
        while shuffled == ss:
            rng.shuffle(shuffled)
        variants["shuffle"].append(" ".join(shuffled))
        # a near-copy: sentence 2 less one inner word replaces sentence 3 (what repetitive machine stories do)
        words = ss[1].split()
        i = rng.randrange(1, len(words) - 1) if len(words) > 2 else 0
        variants["near"].append(" ".join([*ss[:2], " ".join(words[:i] + words[i + 1 :]), *ss[3:]]))
        # every sentence's end punctuation lost: one run-on sentence
        variants["unpunctuated"].append(" ".join(s.rstrip(" .!?") for s in ss))
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, metric in real.items():
        # the LM metrics' rails read these kinds only (each kind costs its stories' LM passes: ~15 s in a test run)
        scored = kinds if name == "story-ranker" else ("original", "copy", "swap", "shuffle")
        texts = [t for v in scored for t in variants[v]]
        scores = metric.score([Story(str(i), t) for i, t in enumerate(texts)]).item_scores  # type: ignore[attr-defined]
        out[name] = {v: scores[i * len(stories) : (i + 1) * len(stories)] for i, v in enumerate(scored)}
    return out


Guard = dict[str, dict[str, np.ndarray]]
SWAP_AND_SHUFFLE = ("story-ranker", "lm-coherence")  # the metrics a foreign or moved sentence must lower


def _copy_never_raises(guard: Guard) -> list[str]:
    return [name for name, s in guard.items() if not np.all(s["copy"] <= s["original"] + 1e-5)]


def _foreign_sentence_lowers_most_stories(guard: Guard) -> list[str]:
    shares = {name: float(np.mean(guard[name]["swap"] < guard[name]["original"])) for name in SWAP_AND_SHUFFLE}
    return [f"{name}: lowered {share:.2f} of the stories" for name, share in shares.items() if not share > 0.5]


def _near_copy_of_a_sentence_lowers_most_stories(guard: Guard) -> list[str]:
    """Replacing a sentence by a near-copy of another raises topic relatedness (two sentences of one meaning) but
    the repetition features must outweigh it: on 150 other val stories it lowered every one (mean -6.3)."""
    s = guard["story-ranker"]
    share = float(np.mean(s["near"] < s["original"]))
    return [] if share >= 0.9 else [f"lowered {share:.2f} of the stories"]


def _join_with_and_does_not_lower_on_average(guard: Guard) -> list[str]:
    s = guard["story-ranker"]
    mean = float(np.mean(s["join"] - s["original"]))
    return [] if mean >= 0 else [f"mean change {mean:.3f}"]


def _losing_end_punctuation_is_no_reward(guard: Guard) -> list[str]:
    """A story whose periods are gone is one run-on sentence: no sentence pair can overlap and SLOR rises with
    sentence length, which raised u by 2.7 on average (in 95% of 60 val stories) before a one-sentence story's
    overlap became undefined and its fluency z capped at 0 (today every story's is). Now it gains a little on
    average (150 other val stories: +0.17, in .56 of them), though not story by story: a repetitive story escapes
    the sentence-overlap penalty (the other repetition features still see it)."""
    s = guard["story-ranker"]
    change = s["unpunctuated"] - s["original"]
    mean, share = float(np.mean(change)), float(np.mean(change > 0))
    return [] if mean < 0.5 and share < 0.75 else [f"mean change {mean:.3f}, raised {share:.2f} of the stories"]


def _shuffle_lowers_on_average(guard: Guard) -> list[str]:
    means = {name: float(np.mean(guard[name]["shuffle"] - guard[name]["original"])) for name in SWAP_AND_SHUFFLE}
    return [f"{name}: mean change {mean:.3f}" for name, mean in means.items() if not mean < 0]


GUARD_RAILS = (
    _copy_never_raises,
    _foreign_sentence_lowers_most_stories,
    _near_copy_of_a_sentence_lowers_most_stories,
    _join_with_and_does_not_lower_on_average,
    _losing_end_punctuation_is_no_reward,
    _shuffle_lowers_on_average,
)


@pytest.mark.models
@pytest.mark.slow
@requires_shared
def test_guard_rails_with_the_real_lm_on_val_stories(guard: Guard) -> None:
    """Every guard rail of the issue on N_GUARD val stories and their variants (the rails' docstrings say why each
    holds). One test, so one process builds `guard` (~2.5 minutes): xdist may send a module's tests to both of
    its workers, and six tests made both build it."""
    failed = {rail.__name__.strip("_"): out for rail in GUARD_RAILS if (out := rail(guard))}
    assert not failed, failed


def test_bf16_bound_of_the_utility_follows_from_the_lm_metrics_bounds() -> None:
    """The signature's maxdev of a bf16 ranker bounds |u(bf16) - u(fp32)|: clip is 1-Lipschitz, so it is at most
    sum of weight x (metric bound) / SD over the two LM features."""
    from vistkit.models.lm import BF16_DEVIATION

    model = StoryRankerV2Model()
    by = dict(zip(model.names, zip(model.coef, model.sd, strict=True), strict=True))
    bound = sum(
        abs(by[f][0]) * float(BF16_DEVIATION[m]) / by[f][1]
        for f, m in (("lm_fluency", "lm-fluency"), ("lm_coherence", "lm-coherence"))
    )
    assert float(model.lm_deviation_bound()) >= bound > float(model.lm_deviation_bound()) - 0.1


def test_models_info_shows_the_fingerprint_of_the_signature(capsys: pytest.CaptureFixture[str]) -> None:
    """`vistkit models info story-ranker-v2` names the ranker by the hash its signature carries (its config's)."""
    from vistkit.cli import main

    assert main(["models", "info", "story-ranker-v2", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "story-ranker-v2" and shown["fingerprint"] == StoryRankerV2Model().fingerprint
