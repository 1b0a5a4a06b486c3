"""The ``sacrebleu`` metric against the sacreBLEU package itself (corpus and sentence BLEU, signatures)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.story import Story
from vistkit.errors import InputError
from vistkit.metrics.base import get_metric, list_metrics, score
from vistkit.metrics.sacrebleu_bleu import SacreBleu, sacrebleu_score

WORDS = "we went to the park and had a great time with our friends family dog cat beach sun".split()


def stories(texts: list[str], keys: list[str], prefix: str) -> list[Story]:
    return [
        Story(f"{prefix}{i}", t, photo_ids=(k,)) for i, (t, k) in enumerate(zip(texts, keys, strict=True))
    ]


def corpus(n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    refs = [
        [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15))) for _ in range(rng.randint(1, 4))]
        for _ in range(n)
    ]
    hyps = [" ".join(w if rng.random() < 0.7 else rng.choice(WORDS) for w in rs[0].split()) for rs in refs]
    return hyps, refs


def as_sets(hyps: list[str], refs: list[list[str]]) -> tuple[list[Story], list[Story]]:
    keys = [f"k{i}" for i in range(len(hyps))]
    h = stories(hyps, keys, "h")
    r = [
        Story(f"r{i}-{j}", t, photo_ids=(k,))
        for i, (k, rs) in enumerate(zip(keys, refs, strict=True))
        for j, t in enumerate(rs)
    ]
    return h, r


def streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(map(len, refs))
    return [[rs[j] if j < len(rs) else None for rs in refs] for j in range(width)]


def test_registered_with_a_card() -> None:
    cls = list_metrics()["sacrebleu"]
    assert cls.needs_references and cls.upper_bound == 100.0
    assert "sacreBLEU" in cls.card.render("sacrebleu")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"lowercase": True},
        {"tokenize": "none", "smooth_method": "floor"},
        {"smooth_method": "add-k", "smooth_value": 2},
        {"max_ngram_order": 2},
    ],
)
def test_corpus_and_sentence_scores_equal_sacrebleu_with_a_variable_number_of_references(
    options: dict,
) -> None:
    hyps, refs = corpus(40, seed=1)
    hyps[3] = hyps[3].upper()
    hyps[5] = ""  # an empty hypothesis is legal
    h, r = as_sets(hyps, refs)
    result = score("sacrebleu", h, r, **options)
    bleu = sacrebleu.metrics.BLEU(**options)
    expected = bleu.corpus_score(hyps, streams(refs))
    assert result.corpus == pytest.approx(expected.score, abs=1e-12)
    assert "sb:[nrefs:var|" in result.signature and "nrefs:1-4" in result.signature
    sig = str(bleu.get_signature())
    assert f"sb:[{sig}]" in result.signature
    sent = sacrebleu.metrics.BLEU(**options, effective_order=True)
    for got, hyp, rs in zip(result.item_scores, hyps, refs, strict=True):
        assert got == pytest.approx(sent.sentence_score(hyp, rs).score, abs=1e-12)
    assert result.extra["sys_len"] == expected.sys_len and result.extra["ref_len"] == expected.ref_len


def test_resampling_rows_is_corpus_bleu_of_those_stories() -> None:
    hyps, refs = corpus(30, seed=2)
    h, r = as_sets(hyps, refs)
    result = sacrebleu_score(h, r)
    rows = np.array([0, 0, 5, 7, 7, 7, 29])
    expected = sacrebleu.metrics.BLEU().corpus_score(
        [hyps[i] for i in rows], streams([refs[i] for i in rows])
    )
    assert result.resample(rows) == pytest.approx(expected.score, abs=1e-12)
    assert result.resample(np.arange(30)) == pytest.approx(result.corpus)


def test_single_reference_signature_and_identity() -> None:
    texts = ["the cat sat on the mat .", "we had a great day at the beach today"]
    h, r = as_sets(texts, [[t] for t in texts])
    result = get_metric("sacrebleu").score(h, r)
    assert result.corpus == pytest.approx(100.0)
    assert result.signature.startswith(
        "sacrebleu|nrefs:1|key:sequence|sb:[nrefs:1|case:mixed|eff:no|tok:13a|"
    )
    assert f"version:{sacrebleu.__version__}]" in result.signature


def test_bad_options_are_input_errors() -> None:
    with pytest.raises(InputError):
        SacreBleu(tokenize="moses")
    with pytest.raises(InputError):
        SacreBleu(smooth_method="laplace")


def test_tapm_outputs_against_their_human_references() -> None:
    """A real corpus (TAPM's VIST test outputs vs one human story per sequence): equal to sacreBLEU."""
    ours = json.loads(shared_file("tapm-vist-outputs", "vist", "structured", "ours.json").read_text())
    gt = json.loads(shared_file("tapm-vist-outputs", "vist", "structured", "gt.json").read_text())
    keys = [k for k in ours if k in gt][:600]
    h = stories([ours[k] for k in keys], keys, "h")
    r = stories([gt[k] for k in keys], keys, "r")
    result = sacrebleu_score(h, r)
    expected = sacrebleu.corpus_bleu([ours[k] for k in keys], [[gt[k] for k in keys]])
    assert result.corpus == pytest.approx(expected.score, abs=1e-12)
    assert result.n == len(keys)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_properties_bounds_and_order_invariance(seed: int, rnd: random.Random) -> None:
    hyps, refs = corpus(8, seed=seed)
    h, r = as_sets(hyps, refs)
    a = sacrebleu_score(h, r)
    rnd.shuffle(h)
    rnd.shuffle(r)
    b = sacrebleu_score(h, r)
    assert 0.0 <= a.corpus <= 100.0
    assert np.all((a.item_scores >= 0) & (a.item_scores <= 100.0))
    assert a.corpus == pytest.approx(b.corpus, abs=1e-9)
