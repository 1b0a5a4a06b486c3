"""The offline default ranker `story-ranker`: the packaged model, its features, the synthetic errors it is
trained on, and a bit-for-bit rebuild of a small model by scripts/train_ranker.py.

The generic ranker properties (antisymmetry, determinism, batched == one by one) run over every registered
ranker in tests/test_rankers.py, this one included.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, requires_shared, shared_file
from vistkit.data.story import Story
from vistkit.meta.perturb import PERTURBATIONS, BlandRewriter, TrigramStoryGenerator, perturb

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from vistkit.metrics.base import get_metric
from vistkit.models.story_ranker import (
    FEATURE_NAMES,
    StoryRankerModel,
    default_model_dir,
    lexical_features,
    normalise,
    sentences_of,
)

HUMAN = (
    "we went to the beach for our summer vacation . the kids built a huge sand castle near the water . "
    "dad tried surfing for the first time and fell off the board . we ate fresh fish at a little shack . "
    "at sunset everyone sat on the pier and watched the boats come in ."
)
SENTENCES = [" ".join(s) for s in sentences_of(HUMAN)]


@pytest.fixture(scope="module")
def model() -> StoryRankerModel:
    return StoryRankerModel()


def test_normalise_maps_tokenised_and_raw_text_to_one_form() -> None:
    assert normalise("We had a GREAT time.It's [MALE]'s day!") == "we had a great time . it's [male] 's day !"
    assert normalise("we had a great time . it 's") == "we had a great time . it 's"
    assert sentences_of("one . two ! three ?") == [["one", "."], ["two", "!"], ["three", "?"]]
    assert sentences_of("no end punctuation here") == [["no", "end", "punctuation", "here"]]
    assert sentences_of("") == []


def test_novel_word_relatedness(model: StoryRankerModel) -> None:
    """Related sentences score higher than unrelated ones; repeating a word does not raise the score."""
    f = model.featurizer
    z, _ = f(["the sand was hot . we swam in the ocean .", "the sand was hot . my boss yelled at the printer ."])
    i = FEATURE_NAMES.index("novel_adjacent_cosine_mean")
    assert z[0, i] > z[1, i] + 0.1
    z2, _ = f(["the sand was hot near the pier . we swam in the ocean near the pier ."])
    assert z2[0, i] == pytest.approx(z[0, i], abs=1e-6)  # "pier" is in both sentences: in neither novel set


def test_lexical_features_by_hand() -> None:
    sents = sentences_of("the dog ran . the dog ran .")
    f = dict(zip(FEATURE_NAMES, lexical_features(sents, rare=set()), strict=False))
    assert f["ttr"] == pytest.approx(3 / 6)
    assert f["duplicate_sentence_share"] == pytest.approx(1 / 2)
    assert f["max_sentence_overlap"] == pytest.approx(1.0)
    assert f["distinct_2"] == pytest.approx(3 / 5)  # the dog, dog ran, ran the, (the dog), (dog ran)
    assert f["repeated_trigram_share"] == pytest.approx(1.0)
    assert f["function_word_share"] == pytest.approx(2 / 6)


def test_packaged_model_and_signature(model: StoryRankerModel) -> None:
    config = json.loads((default_model_dir() / "config.json").read_text())
    assert config["features"] == list(FEATURE_NAMES)
    metric = get_metric("story-ranker-v1")
    sig = metric.signature()
    assert f"model:story-ranker-v1@{config['head_sha256'][:12]}" in sig
    assert "encoder:static:minilm-l6" in sig and "data:vist-val-3000" in sig
    size = sum(p.stat().st_size for p in default_model_dir().iterdir())
    assert size < 2_000_000  # small enough to ship in the package


def test_each_synthetic_error_lowers_the_utility(model: StoryRankerModel) -> None:
    """Errors the model was trained on, on a story it never saw (a hand-written one)."""
    rng = random.Random(0)
    pool = ["the museum had old paintings .", "my cat sleeps all day .", "the train was late again ."]
    human = model.utility([HUMAN])[0]
    for kind in ("repeat-sentence", "repeat-phrase", "generic", "truncate", "merge"):
        worse = " ".join(perturb(SENTENCES, kind, rng=rng, pool=pool))
        assert model.utility([worse])[0] < human, kind


def test_utility_is_per_story_and_deterministic(model: StoryRankerModel) -> None:
    texts = [HUMAN, "we had a great time . we had a great time .", "", "one sentence only"]
    u = model.utility(texts)
    assert u.shape == (4,) and np.all(np.isfinite(u))
    one_by_one = np.array([model.utility([t])[0] for t in texts])
    np.testing.assert_allclose(u, one_by_one, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(u, model.utility(texts))


def test_prefer_and_score() -> None:
    metric = get_metric("story-ranker-v1")
    a = [Story(story_id="1", text=HUMAN)]
    b = [Story(story_id="1", text="we had a great time . we had a great time . we had a great time .")]
    pref = metric.preference(a, b)
    assert pref[0] > 0
    assert metric.preference(b, a)[0] == pytest.approx(-pref[0], abs=1e-12)
    score = metric.score([*a, Story(story_id="2", text="the end .")])
    assert score.n == 2


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(alphabet="abc xyz.!?", min_size=1, max_size=30), min_size=1, max_size=6),
    st.sampled_from(sorted(PERTURBATIONS)),
    st.integers(0, 10_000),
)
def test_perturbations_are_total_and_seeded(sents: list[str], kind: str, seed: int) -> None:
    pool = ["a b c .", "x y z !"]
    one = perturb(sents, kind, rng=random.Random(seed), pool=pool)
    two = perturb(sents, kind, rng=random.Random(seed), pool=pool)
    assert one == two
    assert isinstance(one, list) and all(isinstance(s, str) for s in one)
    if kind == "shuffle":
        assert sorted(one) == sorted(sents)


def test_machine_like_generators() -> None:
    pool = [" ".join(s) for s in sentences_of(HUMAN)] * 3
    bland = BlandRewriter(pool, stop=frozenset({"the", "a", "at", "and", "for", "of"}))
    rng = random.Random(1)
    out = bland(SENTENCES, rng)
    assert len(out) == len(SENTENCES) and all(s in pool or s.endswith(".") for s in out)
    gen = TrigramStoryGenerator(pool)
    story = gen(SENTENCES, random.Random(2), temperature=0.5)
    assert story[0] == SENTENCES[0] and len(story) == len(SENTENCES)
    assert gen(SENTENCES, random.Random(2), temperature=0.5) == story


@requires_shared
@pytest.mark.slow
def test_small_rebuild_is_bit_for_bit(tmp_path: Path) -> None:
    """scripts/train_ranker.py on 30 val albums, twice: identical weights; the folder loads as a ranker."""
    shared_file("vist-11777-baselines", "arel_reference", "val_reference.json")
    spec = importlib.util.spec_from_file_location("train_ranker", REPO / "scripts" / "train_ranker.py")
    assert spec and spec.loader
    train_ranker = importlib.util.module_from_spec(spec)
    sys.modules["train_ranker"] = train_ranker
    spec.loader.exec_module(train_ranker)
    a = train_ranker.build(tmp_path / "a", epochs=2, albums_limit=30)
    b = train_ranker.build(tmp_path / "b", epochs=2, albums_limit=30)
    assert a["head_sha256"] == b["head_sha256"]
    u = StoryRankerModel(tmp_path / "a").utility([HUMAN, "we had fun . we had fun ."])
    assert np.all(np.isfinite(u))


def test_story_of_too_many_sentences_is_undefined(model: StoryRankerModel) -> None:
    """v1 compares every pair of sentences: a story of more than MAX_SENTENCES is left undefined, with its reason,
    instead of minutes and gigabytes (20,000 one-word sentences took 8 GB)."""
    from vistkit.models.story_ranker import MAX_SENTENCES

    many = " ".join(["go ."] * (MAX_SENTENCES + 1))
    fine = " ".join(["we went to the park ."] * 5)
    u = model.utility([many, fine, many])
    assert np.isnan(u[0]) and np.isnan(u[2]) and not np.isnan(u[1])
    score = get_metric("story-ranker-v1").score([Story("many", many), Story("fine", fine)])
    assert score.excluded == {"many": f"story-ranker-v1 reads stories of at most {MAX_SENTENCES} sentences"}
    assert score.item_scores[1] == pytest.approx(1 / (1 + np.exp(-u[1])))


def test_not_a_model_folder(tmp_path: Path) -> None:
    from vistkit.errors import InputError

    with pytest.raises(InputError, match="not a story-ranker folder"):
        StoryRankerModel(tmp_path)
