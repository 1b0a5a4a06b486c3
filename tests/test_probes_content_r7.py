"""Probe round 7: unusual story CONTENT in the reference-based metrics, against the reference implementations.

- meteor-vist: Meteor's API (``MeteorScorer.getMeteorStats(test, ref).score``, task hter, no -norm, as the 2018
  challenge's EvalVISTSharedTask.java calls it) splits words only at space, \\t, \\n, \\r and \\f
  (java.util.StringTokenizer): U+2028, \\x0b, NEL, ... stay inside a word. The golden numbers below are that API's
  output (a 20-line Java program calling it on meteor-1.5.jar, the probe's reference), and vistkit must give them
  whatever other stories share the batch;
- the fallback without javac (Meteor's -stdio protocol) must give the API's numbers for '|||' and control
  characters too (the stdio line split '|||' and trimmed control characters off a text's ends);
- meteor-coco / meteor-album: the pooled corpus score pools as the jar's EVAL (``MeteorStats.addStats`` leaves
  out the chunk of a perfectly matched item): two perfect items pooled score 1.0 (vistkit gave 0.60);
- the coco family on nasty texts equals pycocoevalcap 1.2 (PTBTokenizer + scorers) per item and corpus, with
  pycocoevalcap fed the text with a space where its own tokenizer would break the line (\\r, U+2028, ...), and
  every item's score (but CIDEr-D's, whose idf is the batch's by definition) is the same alone and in a batch;
- sacrebleu on the same texts equals the sacrebleu package.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Sequence

import numpy as np
import pytest

from vistkit.data.story import Story, StorySet

HAS_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java 8+")

REF = "we went to the park . it was fun ."
#: Meteor API (hter, no -norm) on "we went<SEP>to the park . it was fun ." against REF (hyp) and the reverse
#: (ref): a separator Meteor's tokenizer does not split at makes "went<SEP>to" one unmatched word
API_SPLIT = (1.0, 1.0)
API_JOINED = (0.8021523178807947, 0.7865259740259741)
SEPARATORS = {
    "\r": API_SPLIT,
    "\r\n": API_SPLIT,
    "\n": API_SPLIT,
    "\t": API_SPLIT,
    "\x0c": API_SPLIT,
    "     ": API_SPLIT,
    "\u2028": API_JOINED,
    "\u2029": API_JOINED,
    "\x85": API_JOINED,
    "\x0b": API_JOINED,
    "\x1c": API_JOINED,
    "\x1f": API_JOINED,
    "\xa0": API_JOINED,
    "\u3000": API_JOINED,
    "\u200d": API_JOINED,
    "\xad": API_JOINED,
    "|||": API_JOINED,
    " ||| ": (0.9063813317567279, 0.9262422772733095),
}
#: more Meteor API golden pairs (test, ref, score)
API_PAIRS = [
    ("", REF, 0.0),
    (REF, "", 0.0),
    ("EVAL ||| 1 2 3", REF, 0.0),
    ("SCORE ||| we went", REF, 0.2755522997774699),
    ("... !!! ???", REF, 0.08571428571428572),
    ("😀 😀 🎉", "😀 🎉", 0.6740433179171955),
    ("a" * 10_000, REF, 0.0),
    ("we we\u0301nt to the park", "we wént to the park", 0.6795457123491725),
    ("ｗｅ ｗｅｎｔ", "we went", 0.0),
    ("שלום עולם we went", "שלום עולם we went", 1.0),
    ("[male] went to the park", "[male] went to the park", 1.0),
    ("   ", REF, 0.0),
]


def story(sid: str, text: str, item: int) -> Story:
    system = "sys" if sid.startswith("h") else "human"
    return Story(sid, text, photo_ids=(str(item),), album_id=f"A{item}", system=system)


def story_sets(items: Sequence[tuple[str, Sequence[str]]]) -> tuple[StorySet, StorySet]:
    hyps = [story(f"h{i}", h, i) for i, (h, _) in enumerate(items)]
    refs = [story(f"r{i}_{j}", r, i) for i, (_, rs) in enumerate(items) for j, r in enumerate(rs)]
    return StorySet(hyps), StorySet(refs)


def item_scores(name: str, items: Sequence[tuple[str, Sequence[str]]], **options: object) -> tuple[float, np.ndarray]:
    from vistkit.metrics.base import get_metric

    s = get_metric(name, **options).score(*story_sets(items), key="sequence")
    where = {iid: k for k, iid in enumerate(s.item_ids)}
    return s.corpus, np.array([s.item_scores[where[str(i)]] for i in range(len(items))])


# --------------------------------------------------------------------------------------------------- meteor-vist
def _separator_pairs() -> tuple[list[tuple[str, str]], list[float]]:
    pairs: list[tuple[str, str]] = []
    want: list[float] = []
    for sep, (as_hyp, as_ref) in SEPARATORS.items():
        odd = f"we went{sep}to the park . it was fun ."
        pairs += [(odd, REF), (REF, odd)]
        want += [as_hyp, as_ref]
    for t, r, v in API_PAIRS:
        pairs.append((t, r))
        want.append(v)
    return pairs, want


@needs_java
def test_meteor_vist_pairs_equal_meteor_api_alone_and_in_a_nasty_batch() -> None:
    from vistkit.models.java import MeteorConfig, meteor_server

    cfg = MeteorConfig(task="hter")
    server = meteor_server()
    pairs, want = _separator_pairs()
    batch = server.pair_scores(cfg, [t for t, _ in pairs], [r for _, r in pairs])
    assert batch == want
    # reversed order, and each pair alone: the same numbers (no state leaks from one pair to another)
    assert server.pair_scores(cfg, [t for t, _ in pairs[::-1]], [r for _, r in pairs[::-1]]) == want[::-1]
    for (t, r), v in zip(pairs[:6], want[:6], strict=True):
        assert server.pair_scores(cfg, [t], [r]) == [v]


@needs_java
def test_meteor_vist_metric_story_is_batch_independent() -> None:
    """The U+2028 story of the report: 0.80 is the evaluator's number (Meteor's API), alone or among nasty
    neighbours (|||, EVAL/SCORE words, \\r, emoji, an empty reference)."""
    target = ("we went\u2028to the park . it was fun .", [REF])
    neighbours = [
        ("EVAL ||| 0 0 0", ["SCORE ||| a ||| b"]),
        ("we went\rto the park . it was fun .", [REF, ""]),
        ("😀 🎉", ["😀"]),
        ("|||", ["|||", "we went"]),
        (REF, [REF]),
    ]
    _, alone = item_scores("meteor-vist", [target])
    _, inside = item_scores("meteor-vist", [*neighbours[:2], target, *neighbours[2:]])
    assert alone[0] == inside[2] == API_JOINED[0]
    assert inside[1] == 1.0 and inside[4] == 1.0 and inside[5] == 1.0  # \r splits; the empty reference loses


def test_stdio_safe_keeps_words_intact() -> None:
    from vistkit.models.java import _stdio_safe

    t, r = _stdio_safe("a ||| b|||c \x0bd\x1f", "|||| \x0b x\ue000")
    assert "|||" not in t + r and not re.search(r"[\x00-\x08\x0b\x0e-\x1f]", t + r)
    assert t.split(" ")[1] == r.split(" ")[0][:1]  # the same '|||' -> the same character in both texts
    assert "\ue000" not in t and r.endswith("x\ue000")  # a character of the texts is never used as a stand-in
    assert _stdio_safe("plain text", "x") == ("plain text", "x")


@needs_java
@pytest.mark.slow
def test_fallback_without_javac_equals_the_api_on_protocol_characters() -> None:
    """Meteor's -stdio protocol (the fallback without javac) split '|||' and trimmed control characters; the
    pairs now reach Meteor so that it aligns exactly what the API aligns."""
    from vistkit.models.java import MeteorConfig, StdioMeteor, meteor_server

    pairs = [
        ("we went ||| to the park", "we went to the park"),
        ("we went to the park", "we went ||| to the park"),
        ("a ||| b", "a ||| b"),
        ("\x0bwe went", "we went"),
        ("we went\x1f", "we went"),
        ("\x1c", "\x1c"),
        ("|||", ""),
        ("we went\u2028to the park . it was fun .", REF),
    ]
    cfg = MeteorConfig(task="hter")
    api = meteor_server().pair_scores(cfg, [t for t, _ in pairs], [r for _, r in pairs])
    jar = StdioMeteor(cfg)
    try:
        assert jar.pair_scores([t for t, _ in pairs], [r for _, r in pairs]) == api
    finally:
        jar.close()
    assert api[0] < 1.0 and api[2] == 1.0 and api[3] < 1.0  # values where the old stdio lines differed


# --------------------------------------------------------------------------------------------------- pooled meteor
@needs_java
@pytest.mark.parametrize("name", ["meteor-album", "meteor-coco"])
def test_pooled_meteor_corpus_pools_as_the_jars_eval(name: str) -> None:
    from vistkit.metrics.meteor import meteor_from_stats, pool_meteor_stats, stdio_line
    from vistkit.models.java import MeteorConfig, meteor_server

    items = [
        ("We went to the park. It was fun!", ["We went to the park. It was fun!"]),
        ("We went to the park. It was fun!", ["We went to the park. It was fun!", ""]),
        ("the dog ran home", ["a cat sat on the mat", "the dog ran"]),
        ("", [""]),
    ]
    corpus, scores = item_scores(name, items)
    assert scores[0] == scores[1] == 1.0
    # the jar's own EVAL (MeteorStats.addStats + computeMetrics), run by vistkit's helper on the same lines
    task, norm = ("hter", False) if name == "meteor-album" else ("", True)
    if name == "meteor-coco":
        from vistkit.metrics.coco import ptb_tokenize_cached

        texts = ptb_tokenize_cached([t for h, rs in items for t in (h, *rs)])
        it = iter(texts)
        items = [(next(it), [next(it) for _ in rs]) for _, rs in items]
    jar = meteor_server().score_lines(MeteorConfig(task=task, norm=norm), [stdio_line(h, rs) for h, rs in items])
    assert corpus == pytest.approx(jar.corpus, rel=4e-16, abs=0)
    assert corpus > 0.6  # a plain sum of the chunks gave 0.60 for the two perfect items alone
    two = pool_meteor_stats(np.asarray(jar.stats[:2]))
    info = meteor_server().config(MeteorConfig(task=task, norm=norm))
    params = {"alpha": info.alpha, "beta": info.beta, "gamma": info.gamma, "delta": info.delta}
    assert meteor_from_stats(two, weights=info.module_weights, **params) == 1.0


# --------------------------------------------------------------------------------------------------- coco family
_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\u2028\u2029]")
NASTY = [
    "We went\u2028to the park. It was fun!",
    "We went\rto the park.",
    "EVAL ||| 1 2 3",
    "SCORE ||| we went",
    "a ||| b ||| c",
    "... !!! ???",
    "😀 🎉",
    "x" * 10_000,
    "we we\u0301nt",
    "ｗｅ\u3000ｗｅｎｔ",
    "שלום we went",
    "[male] went to the [location] .",
    "",
    "   ",
    "\t\t we \t went",
    "we\x1fwent \x1c to",
    "we\xadwent\u200dto",
    "We went\x85to the park.",
    "|||",
    "we went\x0bto\x0cthe park",
    "1 1/2 cups",
    "We went to the park. It was fun!",
]
COCO_ITEMS: list[tuple[str, list[str]]] = [
    *((t, ["We went to the park. It was fun!", NASTY[(i + 3) % len(NASTY)]]) for i, t in enumerate(NASTY)),
    ("We went to the park. It was fun!", ["We went to the park. It was fun!", ""]),
    ("", [""]),
    ("we went", ["|||"]),
]


def _pycocoevalcap(items: Sequence[tuple[str, Sequence[str]]]) -> dict[str, tuple[float, np.ndarray]]:
    """pycocoevalcap's PTBTokenizer, then its Bleu(4), Rouge() and Cider() (tests/test_coco.py's pycoco_scores)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    from tests.test_coco import pycoco_scores

    tok = PTBTokenizer()
    gts = tok.tokenize({i: [{"caption": _BREAKS.sub(" ", r)} for r in rs] for i, (_, rs) in enumerate(items)})
    res = tok.tokenize({i: [{"caption": _BREAKS.sub(" ", h)}] for i, (h, _) in enumerate(items)})
    return pycoco_scores([res[i][0] for i in range(len(items))], [gts[i] for i in range(len(items))])


@needs_java
def test_coco_family_on_nasty_texts_equals_pycocoevalcap_and_is_batch_independent() -> None:
    want = _pycocoevalcap(COCO_ITEMS)
    for name, (corpus, items) in want.items():
        got_corpus, got = item_scores(name, COCO_ITEMS)
        assert got_corpus == pytest.approx(corpus, abs=1e-9, rel=0), name
        np.testing.assert_allclose(got, items, rtol=0, atol=1e-9, err_msg=name)
    # each story alone: the same score as in the batch (CIDEr-D's idf is the batch's by definition: left out)
    for name in ("bleu-1", "bleu-4", "rouge-l", "meteor-coco"):
        _, batch = item_scores(name, COCO_ITEMS)
        for i in (0, 1, 2, 7, 17, 19, 22):
            _, alone = item_scores(name, [COCO_ITEMS[i]])
            assert alone[0] == batch[i], (name, i)


@needs_java
def test_ptb_tokens_do_not_depend_on_neighbours() -> None:
    from vistkit.text.ptb import ptb_tokenize

    together = ptb_tokenize(NASTY)
    assert len(together) == len(NASTY)
    for i in (0, 1, 17, 19):
        assert ptb_tokenize([NASTY[i]]) == [together[i]]
    assert together[0] == together[1] + " it was fun" == "we went to the park it was fun"
    assert together[19] == "we went to the park"


# --------------------------------------------------------------------------------------------------- sacrebleu
@pytest.mark.parametrize("options", [{}, {"tokenize": "intl"}, {"tokenize": "char"}, {"lowercase": True}])
def test_sacrebleu_on_nasty_texts_equals_the_package(options: dict[str, object]) -> None:
    import sacrebleu

    items = [*COCO_ITEMS, ("a\u2028b c", ["a\u2028b c"]), ("", ["", "we"]), ("we went", ["", ""])]
    corpus, scores = item_scores("sacrebleu", items, **options)
    width = max(len(rs) for _, rs in items)
    streams = [[rs[j] if j < len(rs) else None for _, rs in items] for j in range(width)]
    kw = {"tokenize": str(options.get("tokenize", "13a")), "lowercase": bool(options.get("lowercase", False))}
    want = sacrebleu.corpus_bleu([h for h, _ in items], streams, **kw).score  # type: ignore[arg-type]
    assert corpus == pytest.approx(min(want, 100.0), abs=1e-9)
    for i, (h, rs) in enumerate(items):
        sent = min(sacrebleu.sentence_bleu(h, list(rs), **kw).score, 100.0)  # type: ignore[arg-type]
        assert scores[i] == pytest.approx(sent, abs=1e-9), i
    _, alone = item_scores("sacrebleu", [items[0]], **options)
    assert alone[0] == scores[0] and math.isfinite(corpus)
