"""Probes of the model layer and the model-based metrics (round 16).

- A model path, LM, checkpoint, tokenizer or cache folder under ``~user`` for a user this machine does not know
  (``~nouser/models/x``, a typo of ``~/models/x``), or ``~`` where there is no home folder, stopped the command
  with "unexpected RuntimeError: Could not determine home directory ... a bug in vistkit"; each is now one
  sentence naming the path.
- A model folder given relative to the wrong folder (``models/coh``) was "not in the local Hugging Face cache ...
  or pass a local folder path instead"; ``runs/2024/coh`` (no hub id) too. The folder that does not exist is named.
- lm-* per-sentence values of a story longer than the LM's context were ``[]`` (``sentence_scores`` and
  ``--per-item``), not one value per sentence: zipped with the sentences they said nothing, without a word.
- ``models convert`` of a quantized or meta-device state dict ("unexpected KeyError: torch.qint8") or of float8
  weights ("unexpected NotImplementedError: isfinite") crashed; a ``model`` entry holding a non-tensor was "no state
  dict found (keys: ['model'])".
- rovist-vg's checkpoint, GloVe and IDF files under ``~/`` (``-O rovist-vg.checkpoint=~/r2p...``) were "not on this
  machine".
- groovist ``noun_phrases`` keyed by other ids matched no story without a word (spaCy's phrases scored under a
  ``+given-HASH`` signature); ``" a"`` was not story ``a``; a null phrase was scored as "None".
- ``-O clipscore.prefix=`` is refused as empty and ``-O 'clipscore.prefix=""'`` scored with two quote marks as the
  prefix: no prefix could not be asked for on the command line (now ``prefix=none``).
- a coherence head on another encoder folder was signed by the encoder folder's name only.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from vistkit.cli import main
from vistkit.data.story import Story

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: a ``~user`` no machine has
NO_USER = "~vistkit-no-such-user-r16"


@pytest.fixture
def stories(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"story_id": "1", "text": "We went to the park. The kids played on the swings."}\n', encoding="utf-8"
    )
    return path


def _said_in_one_sentence(capsys: pytest.CaptureFixture[str], *, names: str) -> str:
    err = capsys.readouterr().err
    assert "unexpected" not in err and "RuntimeError" not in err, err
    assert names in err, err
    return err


# ------------------------------------------------------------------------------ ~user that is no user here
@pytest.mark.parametrize(
    "option",
    ["lm-perplexity.lm", "lm-coherence.lm", "coherence.model", "rovist-c.model", "dhm-c.model", "clipscore.clip_model"],
)
def test_a_model_under_an_unknown_users_home_is_one_sentence(
    option: str, stories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metric = option.split(".")[0]
    args = ["score", str(stories), "-m", metric, "-O", f"{option}={NO_USER}/models/x", "--images", str(stories.parent)]
    rc = main(args)
    assert rc != 0
    _said_in_one_sentence(capsys, names=NO_USER)


def test_models_info_and_convert_under_an_unknown_users_home_are_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "info", f"{NO_USER}/x"]) != 0
    _said_in_one_sentence(capsys, names=NO_USER)
    assert main(["models", "convert", f"{NO_USER}/sop.pth.tar", str(tmp_path / "out")]) != 0
    _said_in_one_sentence(capsys, names=NO_USER)
    from tiny_models import make_tiny_sop_checkpoint

    checkpoint = make_tiny_sop_checkpoint(tmp_path / "official")
    args = ["models", "convert", str(checkpoint), str(tmp_path / "out"), "--tokenizer", f"{NO_USER}/tok"]
    assert main(args) != 0
    _said_in_one_sentence(capsys, names=NO_USER)
    assert not (tmp_path / "out").exists()


def test_the_python_loaders_say_an_unknown_users_home_in_one_sentence() -> None:
    from vistkit.errors import VistkitError
    from vistkit.models.lm import resolve_lm
    from vistkit.models.resolve import resolve_model
    from vistkit.models.sop import load_sop_model, read_sop_weights

    for call in (resolve_model, resolve_lm, read_sop_weights, load_sop_model):
        with pytest.raises(VistkitError, match=NO_USER):
            call(f"{NO_USER}/x")


@pytest.mark.parametrize("variable", ["VISTKIT_CACHE", "XDG_CACHE_HOME"])
def test_a_cache_folder_under_an_unknown_users_home_is_one_sentence(
    variable: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.errors import InputError
    from vistkit.models import runtime

    monkeypatch.delenv("VISTKIT_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.setenv(variable, f"{NO_USER}/cache")
    monkeypatch.setattr(runtime, "_CACHE_DIRS", {})
    if variable == "VISTKIT_CACHE":  # the user's explicit choice: an error naming it
        with pytest.raises(InputError, match=f"VISTKIT_CACHE={NO_USER}/cache") as caught:
            runtime.default_cache_dir()
        assert "home folder" in str(caught.value)
    else:  # a derived folder that cannot be used: the warning and a private folder, as for a missing HOME
        folder = runtime.default_cache_dir()
        assert folder.is_dir() and NO_USER not in str(folder)
        assert f"XDG_CACHE_HOME={NO_USER}/cache" in capsys.readouterr().err


# ------------------------------------------------------------------------------ a relative path that is not there
@pytest.mark.parametrize("name", ["models/typo", "runs/2024/coherence", "models/typo/", "my models/x"])
def test_a_relative_model_path_that_is_not_there_is_called_a_missing_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model folder given relative to the wrong folder was "not in the local Hugging Face cache ... (hf download
    models/typo) or pass a local folder path instead", though a local folder path was what was passed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    assert main(["models", "info", name]) != 0
    err = capsys.readouterr().err
    assert f"{tmp_path / name.rstrip('/')} does not exist" in err, err
    can_be_hub_id = name == "models/typo"
    assert ("hf download" in err) == can_be_hub_id, err
    from vistkit.errors import VistkitError
    from vistkit.models.lm import resolve_lm

    with pytest.raises(VistkitError, match="does not exist"):
        resolve_lm(name)


# ------------------------------------------------------------------------------ lm-*: a story over the context
@pytest.fixture(scope="module")
def short_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_causal_lm

    return make_tiny_causal_lm(tmp_path_factory.mktemp("short-lm"), max_positions=24)


@pytest.mark.parametrize("name", ["lm-perplexity", "lm-fluency", "lm-coherence"])
def test_a_story_over_the_lm_context_has_one_missing_value_per_sentence(name: str, short_lm: Path) -> None:
    from vistkit import get_metric

    metric = get_metric(name, lm=str(short_lm), device="cpu")
    long = ["the cat sat on the mat ."] * 2 + ["it was a red mat and the dog sat on it too ."] * 3
    fits = ["the cat sat on the mat .", "it was a red mat ."]
    got = metric.sentence_scores([long, fits, " ".join(long)])
    assert len(got[0]) == 5 and all(math.isnan(v) for v in got[0]), got[0]
    assert len(got[1]) == 2 and not math.isnan(got[1][1])
    assert len(got[2]) == 5 and all(math.isnan(v) for v in got[2]), got[2]  # a text: Punkt's five sentences
    score = metric.score([Story(story_id="long", text=" ".join(long)), Story(story_id="fits", text=" ".join(fits))])
    assert "context" in score.excluded["long"]
    assert score.extra["item_sentences"][0] == [None] * 5


# ------------------------------------------------------------------------------ models convert: odd tensor kinds
STATE_DICT = ["--kind", "state-dict", "--trust-checkpoint"]


def _odd_tensors() -> dict[str, object]:
    import torch

    return {
        "quantized": torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.qint8),
        "meta": torch.zeros(4, device="meta"),
    }


@pytest.mark.parametrize("kind", ["quantized", "meta"])
def test_a_checkpoint_of_tensors_safetensors_cannot_hold_is_one_sentence(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A quantized state dict (torch.ao.quantization) or one saved on the meta device stopped `models convert` with
    "unexpected KeyError: torch.qint8" / "unexpected RuntimeError: Tensor.item() cannot be called on meta
    tensors"."""
    import torch

    checkpoint = tmp_path / f"{kind}.pt"
    torch.save({"model": {"w": _odd_tensors()[kind], "b": torch.zeros(2)}}, checkpoint)
    rc = main(["models", "convert", str(checkpoint), str(tmp_path / "out"), *STATE_DICT])
    assert rc != 0
    err = capsys.readouterr().err
    assert "unexpected" not in err and "'w'" in err, err
    assert not (tmp_path / "out").exists()


def test_float8_weights_are_checked_and_converted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Float8 weights (an FP8-trained model) stopped `models convert` with "unexpected NotImplementedError:
    "isfinite" not implemented for 'Float8_e4m3fn'"; they are checked for NaN like any float and converted."""
    import torch

    from vistkit.models.checkpoints import load_converted

    good = torch.tensor([0.5, -1.0, 2.0]).to(torch.float8_e4m3fn)
    checkpoint = tmp_path / "fp8.pt"
    torch.save({"model": {"w": good}}, checkpoint)
    args = ["models", "convert", str(checkpoint), str(tmp_path / "out"), *STATE_DICT]
    assert main(args) == 0, capsys.readouterr().err
    state, _ = load_converted(tmp_path / "out", kind="state-dict")
    assert state["w"].dtype == torch.float8_e4m3fn and torch.equal(state["w"].float(), good.float())
    bad = tmp_path / "fp8-nan.pt"
    torch.save({"model": {"w": torch.tensor([0.5, float("nan")]).to(torch.float8_e4m3fn)}}, bad)
    assert main(["models", "convert", str(bad), str(tmp_path / "out2"), *STATE_DICT]) != 0
    err = capsys.readouterr().err
    assert "NaN or infinite" in err and "unexpected" not in err, err


@pytest.mark.parametrize(
    ("inner", "said"), [({"n": 3}, "'n', an int, not a tensor"), ({}, "is empty"), ({"enc": {}}, "'enc', a dict")]
)
def test_a_model_entry_that_is_no_state_dict_is_named(
    inner: dict[str, object], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``{"model": {"w": tensor, "n": 3}}`` was "no state dict found in the checkpoint (keys: ['model'])", though
    the 'model' entry is right there."""
    import torch

    checkpoint = tmp_path / "c.pt"
    torch.save({"model": {"w": torch.zeros(2), **inner} if inner else {}, "epoch": 3}, checkpoint)
    rc = main(["models", "convert", str(checkpoint), str(tmp_path / "out"), *STATE_DICT])
    assert rc != 0
    err = capsys.readouterr().err
    assert "'model' entry" in err and said in err, err


# ------------------------------------------------------------------------------ rovist-vg files under ~
def test_rovist_vg_files_under_the_home_folder_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-O rovist-vg.checkpoint=~/r2p`` (the shell leaves a ``~`` after ``=`` as it is) said the checkpoint, GloVe
    and IDF files "are not on this machine", while ``-O clipscore.clip_model=~/clip`` was found."""
    import pickle

    from tiny_models import make_tiny_rovist_vg

    from vistkit.metrics.rovist_vg import RovistVG

    made = make_tiny_rovist_vg(tmp_path / "home")
    idf = tmp_path / "home" / "idf_dict.pkl"
    idf.write_bytes(pickle.dumps(made["idf"]))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = {k: "~/" + Path(made[k]).name for k in ("checkpoint", "glove")}
    metric = RovistVG(**home, idf="~/idf_dict.pkl", trust_checkpoint=True, device="cpu")
    plain = RovistVG(checkpoint=made["checkpoint"], glove=made["glove"], idf=idf, trust_checkpoint=True, device="cpu")
    assert metric.signature_fields() == plain.signature_fields()


# ------------------------------------------------------------------------------ groovist: noun phrases given
@pytest.fixture(scope="module")
def clip_and_photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("transformers")
    from tiny_models import make_photo_folder, make_tiny_clip

    clip = make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip")
    return clip, make_photo_folder(tmp_path_factory.mktemp("ph"), [str(i) for i in range(1, 7)])


def _two_photo_stories() -> list[Story]:
    return [
        Story("a", "a cat sat . the dog ran . a horse .", photo_ids=("1", "2", "3")),
        Story("b", "a man . a cup . the beach .", photo_ids=("4", "5", "6")),
    ]


def test_groovist_noun_phrases_that_miss_the_stories_are_said(
    clip_and_photos: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Noun phrases keyed by other ids (GROOViST's extract_nphrases.py output of another split, or ids written
    ``" a"``) matched no story: every story's phrases were extracted with spaCy, without a word, under a signature
    saying ``+given-HASH``."""
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    clip, photos = clip_and_photos
    capsys.readouterr()
    Groovist(images=photos, clip_model=str(clip), noun_phrases={"zz": ["a cat"]}).score(_two_photo_stories())
    err = capsys.readouterr().err
    assert "2 of the 2 stories" in err and "noun phrases" in err and "'zz'" in err, err
    both = {"a": ["a cat"], "b": ["a cup"]}
    Groovist(images=photos, clip_model=str(clip), noun_phrases=both).score(_two_photo_stories())
    assert "noun phrases" not in capsys.readouterr().err


def test_groovist_noun_phrase_ids_are_read_as_the_stories_ids(clip_and_photos: tuple[Path, Path]) -> None:
    pytest.importorskip("spacy")
    from vistkit.metrics.groovist import Groovist

    clip, photos = clip_and_photos
    spaced = Groovist(images=photos, clip_model=str(clip), noun_phrases={" a": ["a dog"], "b": ["a cup"]})
    plain = Groovist(images=photos, clip_model=str(clip), noun_phrases={"a": ["a dog"], "b": ["a cup"]})
    stories = _two_photo_stories()
    assert list(spaced.score(stories).item_scores) == list(plain.score(stories).item_scores)
    assert spaced.signature_fields() == plain.signature_fields()


@pytest.mark.parametrize(
    ("phrases", "said"),
    [
        ({"a": ["a cat", None]}, "is null"),
        ({"a": ["a cat", 3]}, "int"),
        ({"a": [["a", "cat"]]}, "list"),
        ({"a": ["a cat"], " a": ["a dog"]}, "one id"),
    ],
)
def test_groovist_noun_phrases_that_are_no_texts_are_refused(
    phrases: dict[str, object], said: str, clip_and_photos: tuple[Path, Path]
) -> None:
    """``[null]`` was scored as the phrase "None", ``[3]`` as "3", a list as "['a', 'cat']"."""
    from vistkit.errors import InputError
    from vistkit.metrics.groovist import Groovist

    clip, photos = clip_and_photos
    with pytest.raises(InputError, match=said):
        Groovist(images=photos, clip_model=str(clip), noun_phrases=phrases)


# ------------------------------------------------------------------------------ clipscore: no prefix from the CLI
@pytest.mark.parametrize("metric", ["clipscore", "clipscore-story"])
def test_clipscore_without_a_prefix_can_be_asked_for_on_the_command_line(
    metric: str, clip_and_photos: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-O clipscore.prefix=`` is refused as empty, and ``-O 'clipscore.prefix=""'`` scored with the prefix of two
    quote marks (signed ``prefix:"\\"\\""``): no prefix (a usual CLIPScore ablation) could not be asked for."""
    import json

    from vistkit.metrics.clipscore import ClipScore, ClipScoreStory

    clip, photos = clip_and_photos
    stories = tmp_path / "s.jsonl"
    rows = [{"story_id": s.story_id, "text": s.text, "photo_ids": list(s.photo_ids)} for s in _two_photo_stories()]
    stories.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    base = ["score", str(stories), "-m", metric, "--images", str(photos), "-O", f"{metric}.clip_model={clip}"]
    for quoted in ('""', "''"):
        assert main([*base, "-O", f"{metric}.prefix={quoted}"]) != 0
        err = capsys.readouterr().err
        assert "quote marks" in err and "prefix=none" in err, err
    assert main([*base, "-O", f"{metric}.prefix=none", "-f", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cls = ClipScore if metric == "clipscore" else ClipScoreStory
    direct = cls(images=photos, clip_model=str(clip), prefix="").score(_two_photo_stories())
    assert got["scores"][metric] == pytest.approx(direct.corpus)
    assert 'prefix:""' in got["signatures"][metric]


# ------------------------------------------------------------------------------ coherence: a head on another encoder
def _head_on(folder: Path, encoder: str) -> Path:
    from safetensors.torch import save_file

    from vistkit.models.coherence_head import KIND, build_head

    folder.mkdir(parents=True)
    config = {"kind": KIND, "name": "my-head", "encoder": encoder, "dim": 32, "hidden": 8, "features": "v1"}
    (folder / "config.json").write_text(__import__("json").dumps(config), encoding="utf-8")
    head = build_head(32, 8, "v1")
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(folder / "head.safetensors"))
    return folder


def test_coherence_heads_on_two_encoders_of_one_name_are_signed_apart(tmp_path: Path) -> None:
    """A coherence head whose config.json names an encoder folder was signed ``encoder:enc`` by the folder's name
    alone: two encoders of one name (retrained) gave different numbers under one signature."""
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_encoder

    from vistkit.metrics.coherence import Coherence

    signatures = []
    for seed in (0, 1):
        enc = make_tiny_encoder(tmp_path / f"run{seed}" / "enc", seed=seed)
        head = _head_on(tmp_path / f"run{seed}" / "head", str(enc))
        signatures.append(Coherence(model=str(head), device="cpu").signature_fields())
    assert signatures[0]["encoder"] != signatures[1]["encoder"]
    assert str(signatures[0]["encoder"]).startswith("enc@")
