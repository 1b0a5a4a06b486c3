"""Round 3 of the bad-input probes on the metrics and their models (each test names the class it closes).

- Java that hangs or is not Java: ``java -version`` that never answers, a ``java`` that answers the version but
  then hangs, exits or prints garbage (METEOR's helper, Meteor's stdio fallback, the PTB tokenizer): one
  sentence within the timeout (``VISTKIT_JAVA_TIMEOUT``), never a wait forever, never tokens that are not the
  tokenizer's; the METEOR helper exits when the Python process that started it is killed.
- Metric options through the Python API: ``bool("false")`` is not True (``trust_checkpoint="false"`` must not
  unpickle), NaN / inf / 0 / text batch sizes, layers, thresholds and n-gram orders are one `InputError`.
- Adversarial stories: a story of thousands of sentences for rovist-vg (tagged in batches: minutes before), an
  over-long noun phrase for GROOViST (its story left out, not the run stopped), non-finite IDF weights and
  overflowing log-sum-exp, BERTScore of a text with itself within its declared [-1, 1], BERTScore holding a part
  of the stories' token vectors at a time (same values).
- Model folders: a CLIP "folder" that is a file, an ALBERT config that cannot build the SOP classifier (negative
  sizes) or declares far more weights than the checkpoint holds: one sentence, at conversion and at load.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError, VistkitError

HAS_JAVA = subprocess.run(["sh", "-c", "command -v java"], capture_output=True).returncode == 0
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java")


# ------------------------------------------------------------------------------------------------ fake javas
def _fake_java(folder: Path, body: str, *, version: bool = True) -> Path:
    """A ``java`` shell script: answers ``-version`` like OpenJDK 17 (unless ``version`` is False), else runs
    ``body``."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "java"
    answer = (
        'for a in "$@"; do if [ "$a" = "-version" ]; then echo \'openjdk version "17.0.1" 2021\' >&2; exit 0; fi; '
        "done\n"
        if version
        else ""
    )
    exe.write_text(f"#!/bin/sh\n{answer}{body}\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def java_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A clean java module state, a short timeout and a private cache; yields a function that puts a fake java
    first (as JAVA_HOME)."""
    import vistkit.models.java as vj

    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "2")
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(vj, "_JAVA_CACHE", {})
    monkeypatch.setattr(vj, "_JAR_RUNS", {})
    monkeypatch.setattr(vj, "_HUNG", {})
    monkeypatch.setattr(vj, "_SERVER", None)

    def use(body: str, *, version: bool = True) -> Path:
        exe = _fake_java(tmp_path / "jdk" / "bin", body, version=version)
        monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
        return exe

    yield use
    vj.shutdown()


def _elapsed(fn) -> tuple[BaseException | None, float]:
    t0 = time.monotonic()
    try:
        fn()
    except BaseException as exc:
        return exc, time.monotonic() - t0
    return None, time.monotonic() - t0


def test_java_that_hangs_on_version_is_named_not_called_missing(java_env) -> None:
    import vistkit.models.java as vj

    exe = java_env("exec /bin/sleep 1000", version=False)
    exc, took = _elapsed(vj.require_java)
    assert isinstance(exc, MissingDependencyError) and took < 20
    assert str(exe) in str(exc) and "hangs" in str(exc) and "no java found" not in str(exc)
    # asked again (the prefetch thread, then the caller): the answer is remembered, not waited for twice
    exc2, took2 = _elapsed(vj.require_java)
    assert isinstance(exc2, MissingDependencyError) and took2 < 1


def test_java_that_hangs_after_version_stops_the_meteor_helper_in_one_sentence(
    java_env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import vistkit.models.java as vj

    java_env("exec /bin/sleep 1000")
    helper = tmp_path / "helper"
    helper.mkdir()
    monkeypatch.setattr(vj, "_helper_classpath", lambda java: str(helper))  # the helper path, whatever javac does
    monkeypatch.setattr(vj, "meteor_jar", lambda: tmp_path / "meteor-1.5.jar")
    exc, took = _elapsed(vj.meteor_server)
    assert isinstance(exc, MissingDependencyError) and took < 20, exc
    assert "did not start METEOR's helper within 2 s" in str(exc)
    exc2, took2 = _elapsed(vj.meteor_server)  # the prefetch thread met it first: same sentence, at once
    assert isinstance(exc2, MissingDependencyError) and took2 < 1 and str(exc2) == str(exc)


@pytest.mark.parametrize(
    "body,expected",
    [
        ("exec /bin/sleep 1000", "did not run METEOR's jar within 2 s"),
        ("echo garbage; printf '\\001\\377\\376'; exit 0", "did not run METEOR's jar (it printed 'garbage ?"),
        ("exec /bin/cat", "did not run METEOR's jar"),
    ],
)
def test_java_without_javac_that_is_not_java_fails_in_one_sentence(
    java_env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str, expected: str
) -> None:
    """Meteor's stdio fallback (no javac): the jar's usage text is asked for first, so a java that hangs or is
    not Java is refused in seconds, before a table load that may take minutes."""
    import vistkit.models.java as vj

    java_env(body)
    monkeypatch.setattr(vj, "_helper_classpath", lambda java: None)
    monkeypatch.setattr(vj, "meteor_jar", lambda: tmp_path / "meteor-1.5.jar")
    server = vj.meteor_server()
    exc, took = _elapsed(lambda: server.pair_scores(vj.MeteorConfig(task="hter"), ["a b"], ["a c"]))
    assert isinstance(exc, MissingDependencyError) and took < 20, exc
    assert expected in str(exc), exc
    assert all(c.isprintable() for c in str(exc))


@pytest.mark.parametrize(
    "body,expected",
    [
        ("exec /bin/sleep 1000", "did not finish 2 texts within"),
        ("exec /bin/cat", "returned"),  # echoes the texts: as many lines, but not tokens
        ("echo one line; exit 0", "returned 0 lines for 2 texts"),
        ("exit 3", "failed: exit code 3"),
        ("printf '\\377\\376\\n'; exit 0", "not UTF-8"),
    ],
)
def test_ptb_tokenizer_from_a_java_that_is_not_java(java_env, body: str, expected: str) -> None:
    """Never a silent pad or shift of texts: the tokenizer's output must end with the known answer to the line
    vistkit adds after the texts."""
    from vistkit.models.java import run_ptb_tokenizer

    java_env(body)
    exc, took = _elapsed(lambda: run_ptb_tokenizer(["A dog ran.", "The end"]))
    assert isinstance(exc, MissingDependencyError) and took < 20, exc
    assert expected in str(exc), exc


@needs_java
def test_ptb_tokenizer_keeps_empty_texts_in_place() -> None:
    from vistkit.models.java import run_ptb_tokenizer

    texts = ["A b.", "", "b \"x\"", "  ", "c", ""]
    assert run_ptb_tokenizer(texts) == ["a b.", "", "b `` x ''", "", "c", ""]
    assert run_ptb_tokenizer([""]) == [""]
    assert run_ptb_tokenizer(["", ""]) == ["", ""]


@needs_java
def test_meteor_helper_exits_when_its_python_is_killed(tmp_path: Path) -> None:
    """SIGKILL/SIGTERM of vistkit closes no pipe the helper would notice mid-batch: its watchdog ends it."""
    script = (
        "import sys, time\n"
        "from vistkit.models.java import MeteorConfig, meteor_server\n"
        "s = meteor_server()\n"
        "s.config(MeteorConfig(task='hter'))\n"
        "print(s.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.strip().isdigit():
            pytest.skip("the METEOR helper did not start (no javac?)")
        pid = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its (dead) parent counts as gone
                if f.read().split(") ")[-1].startswith("Z"):
                    break
            time.sleep(0.5)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the METEOR helper outlived the Python process that started it")
    finally:
        if proc.poll() is None:
            proc.kill()


@needs_java
@pytest.mark.parametrize("name", ["meteor-vist", "meteor-album", "meteor-coco"])
def test_meteor_on_protocol_and_control_characters(name: str) -> None:
    """Separators of Meteor's protocols (|||, tabs, line breaks of every kind), NUL and other controls, lone
    (NUL and lone surrogates are refused by Story itself): a score in [0, 1] per item, never a desynchronised
    protocol."""
    from vistkit import score

    texts = {
        "a": "we ||| went ||| home . SCORE ||| EVAL ||| x",
        "b": "a\tb\tc . new\nline \r\n and\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029 more .",
        "c": "del\x7f here . bell\x07 . esc\x1b[31m .",
        "e": "",
    }
    s = score(name, texts, {k: [v, "we went home ."] for k, v in texts.items()})
    assert s.n == len(texts) and all(0.0 <= v <= 1.0 for v in s.item_scores), s.item_scores
    assert 0.0 <= s.corpus <= 1.0


# ------------------------------------------------------------------------------------------------ options
def test_option_checks() -> None:
    from vistkit.metrics._options import option_batch_size, option_bool, option_float, option_int

    assert option_bool("m", "x", "false") is False and option_bool("m", "x", "Yes") is True
    assert option_bool("m", "x", np.bool_(True)) is True and option_bool("m", "x", 0) is False
    for bad in ("maybe", "", 2, -1, 1.0, None, float("nan"), [True]):
        with pytest.raises(InputError, match="m: x must be true or false"):
            option_bool("m", "x", bad)
    assert option_int("m", "n", 8.0) == 8 and option_int("m", "n", np.int64(3)) == 3
    for bad in (float("nan"), float("inf"), 1.5, "8", True, None, 0, -3, 10**12):
        with pytest.raises(InputError, match="m: "):
            option_batch_size("m", bad)
    for bad in (float("nan"), float("-inf"), "1", True, None):
        with pytest.raises(InputError, match="m: t must be a finite number"):
            option_float("m", "t", bad)


@pytest.mark.parametrize(
    "name,options,match",
    [
        ("sacrebleu", {"max_ngram_order": float("nan")}, "max_ngram_order must be a whole number"),
        ("sacrebleu", {"max_ngram_order": 1.5}, "max_ngram_order must be a whole number"),
        ("sacrebleu", {"max_ngram_order": "4"}, "max_ngram_order must be a whole number"),
        ("sacrebleu", {"lowercase": "maybe"}, "lowercase must be true or false"),
        ("sacrebleu", {"smooth_method": "floor", "smooth_value": True}, "smooth_value must be a finite number"),
        ("meteor-vist", {"drop_non_ascii": "maybe", "prefetch": False}, "drop_non_ascii must be true or false"),
        ("meteor-coco", {"prefetch": "later"}, "prefetch must be true or false"),
        ("bertscore", {"batch_size": float("nan")}, "batch_size must be a whole number"),
        ("bertscore", {"batch_size": 0}, "batch_size must be from 1"),
        ("bertscore", {"batch_size": "x"}, "batch_size must be a whole number"),
        ("bertscore", {"layer": float("inf")}, "layer must be a whole number"),
        ("bertscore", {"idf": "nope"}, "idf must be true or false"),
        ("bertscore", {"lang": float("nan")}, "lang must be a non-empty text"),
        ("bertscore", {"baseline_path": 3}, "baseline_path must be a file name, not int"),
        ("coherence", {"batch_size": float("nan")}, "batch_size must be a whole number"),
        ("coherence", {"batch_size": 10**12}, "batch_size must be from 1 to 65,536"),
        ("clipscore", {"batch_size": 0, "clip_model": "x"}, "batch_size must be from 1"),
        ("groovist", {"theta": float("nan")}, "theta must be a finite number"),
        ("groovist", {"max_regions": 1.5}, "max_regions must be a whole number"),
        ("vrank", {"batch_size": -1, "model": "x"}, "batch_size must be from 1"),
        ("rovist-c", {"model": "x", "batch_size": float("inf")}, "batch_size must be a whole number"),
        ("rovist-c", {"model": "x", "trust_checkpoint": "false-ish"}, "trust_checkpoint must be true or false"),
    ],
)
def test_bad_option_values_are_one_input_error(name: str, options: dict, match: str) -> None:
    from vistkit.metrics.base import get_metric

    with pytest.raises(InputError, match=match):
        get_metric(name, **options)


def test_boolean_words_mean_what_they_say() -> None:
    """``lowercase="false"`` was ``bool("false")``, True: the score changed silently."""
    from vistkit import score

    hyp, ref = ["The Dog RAN home ."], [["the dog ran home ."]]
    plain = score("sacrebleu", hyp, ref)
    assert score("sacrebleu", hyp, ref, lowercase="false").corpus == plain.corpus
    assert score("sacrebleu", hyp, ref, lowercase="true").corpus == score("sacrebleu", hyp, ref, lowercase=True).corpus
    assert score("sacrebleu", hyp, ref, lowercase=True).corpus > plain.corpus


def test_trust_checkpoint_false_as_text_never_unpickles(tmp_path: Path) -> None:
    """A pickle checkpoint with ``trust_checkpoint="false"``: refused like False (``bool("false")`` was True)."""
    import pickle

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    ckpt = tmp_path / "sop_model_epoch4.pth.tar"
    ckpt.write_bytes(pickle.dumps({"model": Evil()}))
    from vistkit.metrics.base import get_metric

    with pytest.raises(InputError, match=r"pickle|trust"):
        get_metric("rovist-c", model=str(ckpt), trust_checkpoint="false")
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------ rovist-vg
def test_rovist_vg_idf_weights_must_be_finite(tmp_path: Path) -> None:
    import json

    from vistkit.metrics.rovist_vg import checked_idf, load_idf

    (tmp_path / "idf.json").write_text('{"dog": 1e400, "cat": 1.0}')  # json reads 1e400 as inf
    with pytest.raises(InputError, match="the IDF of 'dog' must be a finite number"):
        load_idf(tmp_path / "idf.json")
    for bad in (float("nan"), float("-inf"), True, "x", None):
        with pytest.raises(InputError, match="must be a finite number"):
            checked_idf({"dog": bad}, "idf")
    assert checked_idf({"dog": 2, "cat": "1.5"}, "idf") == {"dog": 2.0, "cat": 1.5}
    json.dumps(checked_idf({"dog": 2}, "idf"))


def test_log_sum_exp_does_not_overflow() -> None:
    from vistkit.metrics.rovist_vg import log_sum_exp_score

    assert log_sum_exp_score([0.5, 0.25], [2.0, 4.0]) == float(np.log(np.exp([1.0, 1.0]).sum()))  # unchanged
    big = log_sum_exp_score([1.0, 1.0], [1000.0, 1000.0])
    assert big == pytest.approx(1000.0 + math.log(2.0))
    small = log_sum_exp_score([-1.0, -1.0], [1000.0, 1000.0])
    assert small == pytest.approx(-1000.0 + math.log(2.0))


def test_rovist_vg_tags_many_sentences_in_batches_with_the_same_tags() -> None:
    pytest.importorskip("spacy")
    from vistkit.metrics import rovist_vg as vg
    from vistkit.metrics.groovist import load_spacy

    try:
        nlp = load_spacy("en_core_web_sm")
    except VistkitError as exc:
        pytest.skip(str(exc))
    from spacy.tokens import Doc

    sentences = [["the", "dog", "ran", "to", "the", "park"], [], ["[", "male", "]", "waved"], ["a"], ["cats", "sat"]]

    def alone(tokens: list[str]) -> list[str]:
        if not tokens:
            return []
        doc = Doc(nlp.vocab, words=tokens)
        for _, proc in nlp.pipeline:
            doc = proc(doc)
        return [t.tag_ for t in doc]

    assert vg.pos_tag_many(sentences, tagger="spacy") == [alone(s) for s in sentences]
    many = ["a dog ran .", "we saw cats ."] * 1500
    t0 = time.monotonic()
    nouns = vg.story_nouns(many, tagger="spacy")
    assert time.monotonic() - t0 < 120  # one sentence at a time: ~18 ms each, over a minute for these 3,000
    assert nouns == ["dog", "cats"] * 1500


# ------------------------------------------------------------------------------------------------ CLIP / SOP
@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests.tiny_models import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "clip")


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image

    d = tmp_path_factory.mktemp("photos")
    for pid, name in {"201": "chelsea", "202": "coffee"}.items():
        Image.fromarray(getattr(skdata, name)()).convert("RGB").save(d / f"{pid}.png")
    return d


def test_clip_model_that_is_a_file_is_one_sentence(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    f = tmp_path / "clip.bin"
    f.write_text("x")
    from vistkit.metrics.base import get_metric

    with pytest.raises(VistkitError, match="is a file, not a CLIP model folder"):
        get_metric("clipscore", clip_model=str(f))


def test_groovist_leaves_out_the_story_of_an_over_long_noun_phrase(tiny_clip: Path, photo_dir: Path) -> None:
    """The official clip.tokenize stops the whole run at a phrase over 77 tokens; here that story only is left
    out, with the reason, and the others score as they do alone."""
    pytest.importorskip("spacy")
    from vistkit.metrics.base import get_metric

    try:
        metric = get_metric("groovist", clip_model=str(tiny_clip), images=str(photo_dir))
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    ok = Story("ok", "the cat sat on the mat . the coffee was hot .", photo_ids=("201", "202"))
    long = Story("long", "the " + "a" * 400 + " sat there .", photo_ids=("201", "202"))
    both = metric.score(StorySet([ok, long]))
    assert "long" in both.excluded and "CLIP tokens" in both.excluded["long"] and "ok" not in both.excluded
    alone = metric.score(StorySet([ok]))
    assert both.item_scores[0] == alone.item_scores[0]


def _sop_checkpoint(tmp_path: Path) -> Path:
    pytest.importorskip("transformers")
    from tests.tiny_models import make_tiny_sop_checkpoint

    return make_tiny_sop_checkpoint(tmp_path / "sop")


@pytest.mark.parametrize(
    "change,match",
    [
        ({"hidden_size": -1}, "cannot load it as a RoViST SOP classifier"),
        ({"num_attention_heads": 0}, "cannot load it as a RoViST SOP classifier"),
        ({"num_hidden_layers": 10**6, "num_hidden_groups": 10**6}, "declares a model of at least"),
    ],
)
def test_sop_config_that_cannot_build_the_model_is_refused_at_conversion_and_load(
    tmp_path: Path, change: dict, match: str
) -> None:
    import json

    from vistkit.models.sop import convert_sop_checkpoint, load_sop_model

    ckpt = _sop_checkpoint(tmp_path)
    cfg = json.loads((ckpt.parent / "config.json").read_text())
    cfg.update(change)
    with pytest.raises(InputError, match=match):
        convert_sop_checkpoint(ckpt, tmp_path / "out", trust_checkpoint=True, config=cfg)
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match=match):
        load_sop_model(ckpt, trust_checkpoint=True, config=cfg)


# ------------------------------------------------------------------------------------------------ BERTScore
@pytest.fixture(scope="module")
def bertscore():
    from vistkit.metrics.base import get_metric

    try:
        return get_metric("bertscore")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))


ADVERSARIAL = [
    "",
    "   ",
    ". , ! ?",
    "\U0001f600\U0001f600 \U0001f431\u200d\U0001f464 \u2764\ufe0f .",
    "\u05e9\u05dc\u05d5\u05dd . \u0645\u0631\u062d\u0628\u0627 \u202ehello\u202c",
    "e\u0301\u0301\u0301 z\u0336\u0336 . " * 5,
    "we ||| went\tto\nthe \x00 beach \x07 .",
    "[male] went to [location] .",
    "a" * 3000,
    "the " * 600,
]


def test_bertscore_of_a_text_with_itself_stays_within_its_bounds(bertscore) -> None:
    p, r, f = bertscore.score_pairs(ADVERSARIAL, ADVERSARIAL)
    for values in (p, r, f):
        assert np.all(values <= 1.0) and np.all(values >= -1.0), values
    assert all(v == pytest.approx(1.0, abs=1e-6) for v in f[2:])


@settings(max_examples=25)
@given(
    st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=4),
    st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=3),
)
def test_bertscore_bounds_hold_on_any_text(bertscore, hyps: list[str], refs: list[str]) -> None:
    p, r, f = bertscore.score_pairs(hyps, [refs] * len(hyps))
    assert np.all(np.abs(np.stack([p, r, f])) <= 1.0)


def test_bertscore_in_parts_equals_bertscore_at_once(bertscore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Items are scored a part at a time (bounded memory on 50,000 stories): the same values as at once."""
    import vistkit.metrics.bertscore as bs

    hyps = [f"we went to the park {i} times . it was fun ." for i in range(12)] + ADVERSARIAL
    refs = [["the park was fun .", f"we went {i} times ."] for i in range(len(hyps))]
    bertscore._cache.clear()
    whole = bertscore.score_pairs(hyps, refs)
    assert len(bertscore._chunks(hyps, refs)) == 1
    monkeypatch.setattr(bs, "_CACHE_FLOATS", 384 * 200)  # a part of a few items
    bertscore._cache.clear()
    assert len(bertscore._chunks(hyps, refs)) > 3
    parts = bertscore.score_pairs(hyps, refs)
    for a, b in zip(whole, parts, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)
    bertscore._cache.clear()


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_bad_option_value_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Through the CLI as well: one sentence, exit 1, no traceback."""
    import json

    from vistkit.cli import main

    hyp = tmp_path / "h.json"
    hyp.write_text(json.dumps({"a": "we went home .", "b": "the dog ran ."}))
    code = main(["score", str(hyp), "-m", "sacrebleu", "-r", str(hyp), "-O", "sacrebleu.max_ngram_order=0"])
    err = capsys.readouterr().err
    assert code in (1, 2) and "Traceback" not in err and "max_ngram_order" in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1


def test_clip_s_stays_within_its_declared_range() -> None:
    from vistkit.metrics.clipscore import clip_s

    assert clip_s(np.array([1.0000001, -1.0000001, 0.5])).tolist() == [2.5, 0.0, 1.25]


def test_a_java_wrapper_that_hangs_leaves_no_child_behind(java_env) -> None:
    """A ``java`` script whose child hangs (not exec'd): on the timeout the whole process group is killed."""
    from vistkit.models.java import run_ptb_tokenizer

    java_env("/bin/sleep 4321\nexit 0")
    exc, _ = _elapsed(lambda: run_ptb_tokenizer(["a b"]))
    assert isinstance(exc, MissingDependencyError) and "did not finish" in str(exc)
    time.sleep(0.5)
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "/bin/sleep 4321" not in left
