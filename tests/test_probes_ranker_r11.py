"""Round-11 probes of the model metrics' API: a copy that pushed a story past the LM's context raised the ranker's
score, a bare string was scored one story per character, word-less sentences gamed lm-coherence, the per-item CSV
did not say why an item was undefined, and `vistkit.score` refused `require_all`."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vistkit import Story
from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.metrics.base import get_metric, score

SENTENCES = [
    "we went to the park .",
    "the dog ran fast .",
    "we had fun at the lake .",
    "my sister found a big red ball .",
    "the sun was hot today .",
    "we ate lunch by the water .",
]


@pytest.fixture(scope="module")
def short_context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """story-ranker and the LM metrics on a tiny random LM whose context is 40 tokens."""
    from tiny_models import make_tiny_causal_lm

    lm = make_tiny_causal_lm(tmp_path_factory.mktemp("short-lm"), max_positions=40)
    return {name: get_metric(name, lm=str(lm), device="cpu") for name in ("story-ranker", "lm-fluency", "lm-coherence")}


def test_a_copy_that_pushes_a_story_past_the_context_never_raises_the_ranker(short_context: dict[str, Any]) -> None:
    """Past the LM's context the LM features were undefined and counted as typical (z = 0), so a story just under
    it that was less fluent or coherent than typical gained when a copy of its own sentence pushed it over (+1.0 of
    u at 8,189 tokens with the packaged LM). The LM features now read the longest run of whole sentences from the
    start that fits."""
    ranker = short_context["story-ranker"]
    lm = ranker.scorer.lm
    raised = []
    crossed = 0
    for n in range(2, 9):
        for shift in range(len(SENTENCES)):
            sents = [SENTENCES[(shift + k) % len(SENTENCES)] for k in range(n)]
            for pick in range(n):
                before, after = " ".join(sents), " ".join([*sents, sents[pick]])
                fits_before = lm.sentences_that_fit(sents) == n
                fits_after = lm.sentences_that_fit([*sents, sents[pick]]) == n + 1
                crossed += fits_before and not fits_after
                u = ranker.utility([Story("a", before), Story("b", after)])
                if u[1] > u[0] + 1e-5:
                    raised.append((n, shift, pick, float(u[1] - u[0])))
    assert crossed >= 5  # the sample does cross the context
    assert not raised


def test_a_story_past_the_context_has_lm_features_from_its_start(short_context: dict[str, Any]) -> None:
    ranker = short_context["story-ranker"]
    from vistkit.models.story_ranker_v2 import FEATURES

    long_story = " ".join(SENTENCES * 3)
    names = [f.name for f in FEATURES]
    row = ranker.features([long_story])[0]
    assert ranker.scorer.lm.sentences_that_fit(SENTENCES * 3) < len(SENTENCES) * 3
    assert np.isfinite(row[names.index("lm_fluency")]) and np.isfinite(row[names.index("lm_coherence")])
    # the LM metrics themselves still leave such a story out, saying why
    result = short_context["lm-fluency"].score([Story("a", long_story)])
    assert math.isnan(result.item_scores[0]) and "more than the LM's context" in result.excluded["a"]


def test_a_bare_string_is_not_a_list_of_stories(short_context: dict[str, Any]) -> None:
    """`explain("We went home. It was fun.")` gave 25 results, one per character; so did `sentence_scores`, and
    `preference("good", "bad!")` compared four pairs of letters."""
    ranker, fluency = short_context["story-ranker"], short_context["lm-fluency"]
    text = "We went home. It was fun."
    with pytest.raises(InputError, match=r"takes a list of stories, not one str; wrap a single story as \[text\]"):
        ranker.explain(text)
    with pytest.raises(InputError, match="takes a list of stories, not one str"):
        ranker.preference("good", "bad!")
    with pytest.raises(InputError, match="takes a list of stories, not one str"):
        fluency.sentence_scores(text)
    with pytest.raises(InputError, match="story 0 is NoneType"):
        fluency.sentence_scores([None])
    with pytest.raises(InputError, match="story 1 is int"):
        ranker.explain([text, 123])
    with pytest.raises(InputError, match="NUL character"):
        fluency.sentence_scores(["x \x00 y ."])
    assert len(ranker.explain([text])) == 1 and len(fluency.sentence_scores([text, ["One.", "Two."]])) == 2


def test_a_sentence_without_a_word_has_no_coherence(short_context: dict[str, Any]) -> None:
    """A "..." or "!!!" sentence is predictable from the story before it, so its PMI was large (6 to 14 per token
    with the packaged LM, human sentences ~1.6): a "..." after each sentence nearly tripled lm-coherence."""
    coherence = short_context["lm-coherence"]
    values = coherence.sentence_scores([["We went to the park.", "...", "The dog ran fast.", "!!!"]])[0]
    assert math.isnan(values[0]) and math.isnan(values[1]) and math.isnan(values[3]) and np.isfinite(values[2])
    story = coherence.score([Story("a", "We went to the park. ... The dog ran fast. !!!")])
    assert story.item_scores[0] == pytest.approx(values[2])


def test_the_per_item_csv_says_why_an_item_is_undefined(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table pointed to --per-item for the excluded items, whose cells were only empty."""
    hyps = tmp_path / "h.jsonl"
    hyps.write_text('{"story_id": "a", "text": "we went out . it was fun ."}\n{"story_id": "b", "text": "one ."}\n')
    items = tmp_path / "items.csv"
    assert main(["score", str(hyps), "-m", "rovist-nr", "--per-item", str(items), "-q"]) == 0
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(items.read_text(encoding="utf-8")))}
    assert rows["b"]["rovist-nr"] == "" and rows["b"]["rovist-nr note"].startswith("fewer than two sentences")
    assert rows["a"]["rovist-nr note"] == "" and float(rows["a"]["rovist-nr"]) == pytest.approx(1.0)


def test_functional_score_takes_require_all() -> None:
    """`vistkit.score(..., require_all=True)` was passed on as a metric option: "rovist-nr has no option"."""
    hyps = [Story("a", "we went out . it was fun .")]
    refs = [Story("a", "we went out . it was great ."), Story("c", "we stayed in . it was dull .")]
    assert score("bleu-4", hyps, refs, key="story").item_ids == ["a"]  # c, without a story, is not scored
    with pytest.raises(InputError, match=r"One story is missing in this submission\. Photo seq: c"):
        score("bleu-4", hyps, refs, key="story", require_all=True)
