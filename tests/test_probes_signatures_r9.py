"""Probe round 9: signatures and options (reproducibility).

A signature names everything that changes a metric's value: two runs with one signature must give the same numbers,
so two runs whose numbers differ must show different signatures. Every option of every metric that builds offline
(tiny random models stand in for the weights) was scored on a few real VIST stories with each value, and every pair
of runs compared. What was signed alike although the numbers differed:

- sacrebleu ``max_ngram_order``: sacreBLEU's own signature leaves it out, so BLEU-2 (27.98) and BLEU-6 (1.20) were
  both signed as the default BLEU-4 (4.84); the signature now ends ``ngram:N`` when N is not 4;
- bertscore ``model`` as a folder: only the folder's name was shown (``model:enc``), so two fine-tuned encoders in
  ``run1/enc`` and ``run2/enc`` (F1 .7494 vs .7528) were signed alike; a folder or hub id is now ``NAME@HASH`` (the
  weights' hash; a hub id's cached revision may change too), a packaged model keeps its name (its hub id now
  reads as the packaged name: same weights, same signature);
- bertscore ``baseline_path``: only the file's name (``rescale:base.csv``), so two baseline files of one name
  (F1 -0.006 vs -0.258) were signed alike; now ``base.csv[b=P,R,F]`` with the values read;
- vrank ``anchors``: only the file's name; now ``NAME@HASH`` of the anchor stories' texts;
- rovist-vg ``glove``: only the file's name; now ``NAME@HASH`` of the vectors read;
- groovist / rovist-vg ``regions`` given as a table (Python API): every table was ``csv-given``; now its hash;
- coherence ``model`` as a folder: the hash covers the head's weights only and ``encoder:all-MiniLM-L6-v2`` was
  fixed text, so a folder with the packaged head and ``"objective": "pairwise"`` (.6910 vs .6823) or
  ``"max_length": 8`` (.6058) in its config.json was signed as the packaged model; the encoder is now read from
  the config, and ``maxlen`` / ``objective`` show when not 256 / pointwise;
- clipscore ``prefix``: the signature stripped it, so ``"A photo depicts"`` (no space before the sentence, other
  numbers) was signed as the default ``"A photo depicts "``, and ``""`` as an empty field; now a prefix of words
  each followed by one space keeps its ``A_photo_depicts`` form and any other is shown exactly, in JSON quotes.
  CLIP folders were shown by their full path (this machine's folders: the same weights elsewhere had another
  signature); now by the folder's name, before the weights' hash, as the LM metrics do.

Options that must not change numbers beyond float rounding (batch sizes) keep one signature.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import shared_file

from vistkit.data.story import Story, StorySet
from vistkit.metrics.base import list_metrics
from vistkit.text.sentences import sent_tokenize

HAS_JAVA = shutil.which("java") is not None
PHOTOS = [str(p) for p in range(101, 105)]


# --------------------------------------------------------------------------------------------------- inputs
@pytest.fixture(scope="module")
def real() -> tuple[StorySet, StorySet]:
    """Three AREL test stories (album keyed) and their human references (three or more each)."""
    hyps = json.loads(shared_file("vist-11777-baselines", "baseline_generations_results", "prediction_test_AREL.json")
                      .read_text(encoding="utf-8"))
    refs = json.loads(shared_file("vist-11777-baselines", "arel_reference", "test_reference.json")
                      .read_text(encoding="utf-8"))
    albums = [k for k in hyps if len(refs.get(k, ())) >= 3][:3]
    stories = []
    for a in albums:
        text = " ".join(hyps[a][0].split())
        parts = [p.strip(" .") for p in text.split(" . ") if p.strip(" .")]
        stories.append(Story(
            story_id=a, text=text, album_id=a, system="arel",
            # the reader's sentences: two of Punkt's each; a photo per Punkt sentence (sentence i <-> photo i)
            sentences=tuple(" . ".join(parts[i:i + 2]) + " ." for i in range(0, len(parts), 2)),
            photo_ids=tuple(PHOTOS[(len(stories) + j) % len(PHOTOS)] for j in range(len(sent_tokenize(text)))),
        ))  # fmt: skip
    hyp = StorySet(stories)
    ref = StorySet(Story(story_id=f"{a}-{j}", text=t, album_id=a, system="human")
                   for a in albums for j, t in enumerate(refs[a]))  # fmt: skip
    return hyp, ref


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's folder; torch on one thread meanwhile (tiny models gain nothing from two, and on a shared
    machine the second thread's waiting doubled the time), restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield tmp_path_factory.mktemp("signatures-r9")
    finally:
        torch.set_num_threads(threads)


def _photos(root: Path) -> Path:
    from tiny_models import make_photo_folder

    return make_photo_folder(root, PHOTOS)


def _twin_files(root: Path, name: str, texts: tuple[str, str]) -> tuple[str, str]:
    """Two files of one NAME (in folders a/ and b/) with different contents."""
    out = []
    for side, text in zip("ab", texts, strict=True):
        (root / side).mkdir(parents=True, exist_ok=True)
        (root / side / name).write_text(text, encoding="utf-8")
        out.append(str(root / side / name))
    return out[0], out[1]


# --------------------------------------------------------------------------------------------------- cases
# each case: metric -> (options of every run, given the module's folder; pairs whose numbers must differ; pairs
# whose numbers must agree to float rounding). Every pair of runs is then checked: numbers differ => signatures do.
Variants = dict[str, dict[str, Any]]


def _sacrebleu(root: Path) -> Variants:
    return {
        "default": {}, "lowercase": {"lowercase": True}, "tok-none": {"tokenize": "none"},
        "tok-intl": {"tokenize": "intl"}, "tok-char": {"tokenize": "char"},
        "floor": {"smooth_method": "floor"}, "floor-0.5": {"smooth_method": "floor", "smooth_value": 0.5},
        "add-k": {"smooth_method": "add-k"}, "add-k-2": {"smooth_method": "add-k", "smooth_value": 2},
        "none": {"smooth_method": "none"}, "ngram-2": {"max_ngram_order": 2}, "ngram-6": {"max_ngram_order": 6},
    }  # fmt: skip


def _sentences(root: Path) -> Variants:
    return {"split": {}, "source": {"sentences": "source"}}


def _meteor_vist(root: Path) -> Variants:
    return {"default": {}, "drop-non-ascii": {"drop_non_ascii": True}}


def _bertscore(root: Path) -> Variants:
    from tiny_models import make_tiny_encoder

    a, b = root / "bert-a" / "enc", root / "bert-b" / "enc"  # one folder name, other weights
    if not (b / "config.json").is_file():
        make_tiny_encoder(a, seed=0)
        make_tiny_encoder(b, seed=1)
    table = "LAYER,P,R,F\n" + "".join(f"{i},{{v}},{{v}},{{v}}\n" for i in range(3))
    base_a, base_b = _twin_files(root / "baselines", "base.csv", (table.format(v=0.5), table.format(v=0.6)))
    return {
        "enc-a": {"model": str(a)}, "enc-b": {"model": str(b)}, "layer-1": {"model": str(a), "layer": 1},
        "idf": {"model": str(a), "idf": True},
        "base-a": {"model": str(a), "baseline_path": base_a}, "base-b": {"model": str(a), "baseline_path": base_b},
        "b-0.5": {"model": str(a), "baseline": 0.5},
    }  # fmt: skip


def _vrank(root: Path) -> Variants:
    from tiny_models import make_tiny_vrank

    model = str(make_tiny_vrank(root / "vrank", seed=0))
    an_a, an_b = _twin_files(root / "anchors", "anchors.json", (
        json.dumps({"x": "we went to the beach . it was fun .", "y": "the dog ran ."}),
        json.dumps({"x": "the family had dinner . grandma cooked .", "y": "the city was busy ."}),
    ))  # fmt: skip
    return {
        "packaged": {"model": model}, "anchors-a": {"model": model, "anchors": an_a},
        "anchors-b": {"model": model, "anchors": an_b},
    }  # fmt: skip


def _clip(root: Path) -> dict[str, Any]:
    folder = root / "clip"
    if not folder.is_dir():
        from tiny_models import make_tiny_clip

        make_tiny_clip(folder)
    return {"images": str(_photos(root)), "clip_model": str(folder)}


def _clipscore(root: Path) -> Variants:
    base = _clip(root)
    return {
        "default": base, "no-space": {**base, "prefix": "A photo depicts"}, "empty": {**base, "prefix": ""},
        "source": {**base, "sentences": "source"}, "batch-1": {**base, "batch_size": 1},
    }  # fmt: skip


def _clipscore_story(root: Path) -> Variants:
    base = _clip(root)
    return {"exclude": base, "truncate": {**base, "long": "truncate"}, "no-space": {**base, "prefix": "A photo"}}


def _rovist_vg(root: Path) -> Variants:
    from tiny_models import make_tiny_rovist_vg

    folder = root / "rovist-vg"
    base = {**make_tiny_rovist_vg(folder), "images": str(_photos(root))}
    words = ("unk", "food", "day", "time", "book", "people", "the", "was")
    rng = np.random.default_rng(1)
    glove_b = "".join(f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) + "\n" for w in words)
    rng = np.random.default_rng(2)
    glove_c = "".join(f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) + "\n" for w in words)
    g_b, g_c = _twin_files(root / "glove", "glove.txt", (glove_b, glove_c))
    return {
        "default": base, "glove-b": {**base, "glove": g_b}, "glove-c": {**base, "glove": g_c},
        "regions-a": {**base, "regions": {"101": [("a", (0, 0, 20, 20))], "103": [("a", (0, 0, 30, 30))]}},
        "regions-b": {**base, "regions": {"101": [("a", (5, 5, 40, 40))], "103": [("a", (9, 9, 50, 40))]}},
        "mean": {**base, "aggregate": "mean"}, "batch-1": {**base, "batch_size": 1},
    }  # fmt: skip


def _lm(root: Path) -> Variants:
    from tiny_models import make_tiny_causal_lm

    a, b = root / "lm-a" / "lm", root / "lm-b" / "lm"  # one folder name, other weights
    if not a.is_dir():
        make_tiny_causal_lm(a, seed=0)
        make_tiny_causal_lm(b, seed=1)
    base = {"lm": str(a), "device": "cpu"}
    return {
        "lm-a": base, "lm-b": {**base, "lm": str(b)}, "bf16": {**base, "precision": "bf16"},
        "batch-tokens": {**base, "batch_tokens": 64},
    }  # fmt: skip


def _sop(root: Path) -> Variants:
    from tiny_models import make_tiny_sop_folder

    a = make_tiny_sop_folder(root / "sop-a", seed=0)
    b = make_tiny_sop_folder(root / "sop-b", seed=1)
    return {
        "sop-a": {"model": a}, "sop-b": {"model": b}, "bf16": {"model": a, "precision": "bf16"},
        "batch-1": {"model": a, "batch_size": 1},
    }  # fmt: skip


def _coherence(root: Path) -> Variants:
    from vistkit.models.resolve import resolve_model

    out: Variants = {"packaged": {}}
    for label, change in {"pairwise": {"objective": "pairwise"}, "maxlen-8": {"max_length": 8}}.items():
        folder = root / label
        if not folder.is_dir():  # the packaged head, another config.json
            shutil.copytree(resolve_model("coherence-minilm-v1"), folder)
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            (folder / "config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
        out[label] = {"model": str(folder)}
    return out


#: metric -> (variants, pairs whose numbers must differ (each a real case that was signed alike, or a plain
#: option), pairs whose numbers must agree to float rounding)
CASES: dict[str, tuple[Callable[[Path], Variants], list[tuple[str, str]], list[tuple[str, str]]]] = {
    "sacrebleu": (_sacrebleu, [("default", "ngram-2"), ("default", "ngram-6"), ("floor", "floor-0.5")], []),
    "rovist-nr": (_sentences, [("split", "source")], []),
    "rovist-nr-jaccard": (_sentences, [("split", "source")], []),
    "meteor-vist": (_meteor_vist, [("default", "drop-non-ascii")], []),
    "bertscore": (_bertscore, [("enc-a", "enc-b"), ("base-a", "base-b"), ("enc-a", "layer-1")],
                  [("base-a", "b-0.5")]),
    "vrank": (_vrank, [("anchors-a", "anchors-b"), ("packaged", "anchors-a")], []),
    "clipscore": (_clipscore, [("default", "no-space"), ("default", "empty"), ("default", "source")],
                  [("default", "batch-1")]),
    "clipscore-story": (_clipscore_story, [("exclude", "truncate")], []),
    "rovist-vg": (_rovist_vg, [("glove-b", "glove-c"), ("regions-a", "regions-b"), ("default", "mean")],
                  [("default", "batch-1")]),
    "lm-perplexity": (_lm, [("lm-a", "lm-b"), ("lm-a", "bf16")], [("lm-a", "batch-tokens")]),
    "coherence": (_coherence, [("packaged", "pairwise"), ("packaged", "maxlen-8")], []),
    "rovist-c": (_sop, [("sop-a", "sop-b"), ("sop-a", "bf16")], [("sop-a", "batch-1")]),
}  # fmt: skip

#: relative tolerance of "the same numbers" (float rounding of another batch or thread count)
RTOL = 1e-6


def _run(name: str, options: dict[str, Any], hyp: StorySet, ref: StorySet) -> tuple[str, np.ndarray]:
    """Signature and [corpus, item scores...] of one run."""
    metric = list_metrics()[name](**options)
    if name == "meteor-vist":  # a word whose accent hides a match unless dropped ("theé" vs "the")
        hyp = StorySet(Story(story_id=s.story_id, text=s.text.replace("the ", "theé "), album_id=s.album_id)
                       for s in hyp)  # fmt: skip
    key = "album" if metric.needs_references else "story"
    score = metric.score(hyp, ref if metric.needs_references else None, key=key)
    return score.signature, np.asarray([score.corpus, *score.item_scores], dtype=float)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=1e-9, equal_nan=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_differ_only_with_signatures(
    name: str, real: tuple[StorySet, StorySet], root: Path
) -> None:
    """For every two option values of the metric: numbers that differ come with signatures that differ (folder and
    file names alone, a stripped prefix and a sacreBLEU signature without max_ngram_order signed different runs
    alike); runs that must agree (batch size, one baseline given two ways) agree."""
    if name == "meteor-vist" and not HAS_JAVA:
        pytest.skip("needs Java 8+")
    build, differ, agree = CASES[name]
    runs = {label: _run(name, options, *real) for label, options in build(root / name).items()}
    for a, b in differ:
        assert not _same(runs[a][1], runs[b][1]), f"{name}: {a} and {b} should give other numbers"
    for a, b in agree:
        assert _same(runs[a][1], runs[b][1]), f"{name}: {a} and {b} should give the same numbers"
    for (la, (sig_a, va)), (lb, (sig_b, vb)) in itertools.combinations(runs.items(), 2):
        if not _same(va, vb):
            assert sig_a != sig_b, f"{name}: {la} and {lb} give other numbers under one signature {sig_a}"


def test_fixed_fields_read_as_documented(real: tuple[StorySet, StorySet], root: Path) -> None:
    """The new fields: sacrebleu's default signature is unchanged (no ngram field at 4), ngram:2 at 2; a packaged
    bertscore model keeps its name (its hub id reads the same); a folder is NAME@HASH without this machine's
    path; a baseline file shows the values read."""
    from vistkit.metrics.clipscore import prefix_label

    hyp, ref = real
    sig, _ = _run("sacrebleu", {}, hyp, ref)
    assert "ngram" not in sig and sig.startswith("sacrebleu|nrefs:3-4|key:album|sb:[nrefs:var|case:mixed|")
    assert _run("sacrebleu", {"max_ngram_order": 2}, hyp, ref)[0].endswith("]|ngram:2|vistkit:" + sig.split(":")[-1])
    assert prefix_label("A photo depicts ") == "A_photo_depicts"  # the default's signature as before
    assert prefix_label("A photo depicts") == '"A photo depicts"' and prefix_label("") == '""'
    assert prefix_label("a|b ") == '"a\\u007cb "'  # never a field separator

    from vistkit.metrics.bertscore import _model_label
    from vistkit.models.resolve import PACKAGED_MODELS, resolve_model

    packaged = resolve_model("minilm-l6")
    assert _model_label("minilm-l6", packaged) == "minilm-l6"
    assert _model_label(PACKAGED_MODELS["minilm-l6"].hub_id, packaged) == "minilm-l6"
    variants = _bertscore(root / "bertscore")  # the folders of test_numbers_differ_only_with_signatures
    from vistkit.metrics.bertscore import BertScore

    metric = BertScore(**variants["base-b"])
    sig = metric.signature()
    assert "|model:enc@" in sig and str(root) not in sig and "|rescale:base.csv[b=0.6,0.6,0.6]|" in sig


def test_reference_absent_and_key_are_signed(real: tuple[StorySet, StorySet]) -> None:
    """Outside the options: scoring human stories against the others of their album (reference absent) changes the
    numbers and the signature says refabsent:yes; the key is always in it."""
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    _, ref = real
    metric = SacreBleu()
    first = StorySet(next(s for s in ref if s.album_id == album) for album in dict.fromkeys(s.album_id for s in ref))
    plain = metric.score(first, ref, key="album")
    absent = metric.score(first, ref, key="album", reference_absent=True)
    assert plain.corpus == pytest.approx(100.0) and absent.corpus < 50.0
    assert "|refabsent:yes|key:album|" in absent.signature and "refabsent" not in plain.signature
