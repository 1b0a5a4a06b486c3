"""Round-14 probes of the model layer (LM metrics, the sentence encoder of the coherence metric).

- An LM folder (``-O lm-fluency.lm=DIR``) whose tokenizer belongs to another model (more token ids than the model
  has embeddings) loaded, then stopped scoring with "unexpected IndexError: index out of range in self - this is a
  bug in vistkit"; it is now refused at load, as round 13 did for CLIP and SOP.
- The sentence encoder a coherence model names (its config.json's ``encoder``) was loaded without the checks the
  other model folders get: weights holding NaN scored every sentence NaN with no reason, and a tokenizer of
  another model crashed with the same IndexError. Both are refused at load. Its ``max_length`` (from a coherence
  config.json) is checked: 2.5 cut every sentence to 2 tokens, 0/-5/null crashed, and 1024 (past MiniLM's 512
  positions) crashed on the first long sentence with a RuntimeError about tensor sizes.
- ``vistkit models info LM_DIR`` showed a fingerprint that no lm-* signature carries (those hash the config and
  tokenizer too); it now also shows ``lm_signature``, the ``lm:`` field of the lm-* metrics.
- A model folder saved over in one session (a notebook that fine-tunes and saves into the same folder, then scores
  again) kept scoring with the weights loaded first, under their old hash (LM metrics, CLIP for clipscore and
  groovist); it is loaded again when its files changed.
- GROOViST signed a custom theta to 6 digits, so 0.1234567 and 0.1234568 were signed alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vistkit.data.story import Story
from vistkit.errors import InputError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message


# ---------------------------------------------------------------------------------- LM: a foreign tokenizer
def _shrink_vocab(folder: Path, vocab_size: int, make_model: object) -> None:
    """Replace the weights of ``folder`` by a model of ``vocab_size`` embeddings (its tokenizer stays)."""
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["vocab_size"] = vocab_size
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    make_model(folder)  # type: ignore[operator]


def test_lm_with_a_tokenizer_of_another_model_is_refused_at_load(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    import torch
    from tiny_models import make_tiny_causal_lm
    from transformers import LlamaConfig, LlamaForCausalLM

    from vistkit.metrics.base import get_metric
    from vistkit.models.lm import load_lm

    lm = make_tiny_causal_lm(tmp_path / "lm")

    def save(folder: Path) -> None:
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig.from_pretrained(folder)).save_pretrained(str(folder))

    _shrink_vocab(lm, 20, save)  # the tokenizer gives ids up to ~140
    with pytest.raises(InputError, match=r"tokenizer gives token ids up to .* only 20 token embeddings") as exc:
        load_lm(lm, device="cpu")
    assert str(lm) in str(exc.value)
    one_sentence(str(exc.value))
    with pytest.raises(InputError, match="another model"):
        get_metric("lm-fluency", lm=str(lm), device="cpu").score(
            [Story(story_id="a", text="We went to the park. It was fun.")]
        )


def test_lm_whose_embeddings_outnumber_its_tokenizer_still_loads(tmp_path: Path) -> None:
    """Padded embedding tables (more rows than the tokenizer's ids, as many real LMs have) are fine."""
    pytest.importorskip("transformers")
    import torch
    from tiny_models import make_tiny_causal_lm
    from transformers import LlamaConfig, LlamaForCausalLM

    from vistkit.metrics.base import get_metric

    lm = make_tiny_causal_lm(tmp_path / "lm")

    def save(folder: Path) -> None:
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig.from_pretrained(folder)).save_pretrained(str(folder))

    _shrink_vocab(lm, 512, save)
    score = get_metric("lm-perplexity", lm=str(lm), device="cpu").score(
        [Story(story_id="a", text="We went to the park. It was fun.")]
    )
    assert score.item_scores[0] > 1


# ------------------------------------------------------------------------------ the coherence sentence encoder
def test_sentence_encoder_with_nan_weights_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from safetensors.torch import load_file, save_file
    from tiny_models import make_tiny_encoder

    from vistkit.models.coherence_head import SentenceEncoder

    enc = make_tiny_encoder(tmp_path / "enc")
    weights = load_file(str(enc / "model.safetensors"))
    name = next(k for k in weights if k.endswith("attention.self.query.weight"))
    weights[name][0, 0] = float("nan")
    save_file(weights, str(enc / "model.safetensors"))
    with pytest.raises(InputError, match="NaN or infinite") as exc:
        SentenceEncoder(str(enc), device="cpu")
    assert str(enc) in str(exc.value)
    one_sentence(str(exc.value))


def test_sentence_encoder_with_a_tokenizer_of_another_model_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    import torch
    from tiny_models import make_tiny_encoder
    from transformers import BertConfig, BertModel

    from vistkit.models.coherence_head import SentenceEncoder

    enc = make_tiny_encoder(tmp_path / "enc")

    def save(folder: Path) -> None:
        torch.manual_seed(0)
        BertModel(BertConfig.from_pretrained(folder)).eval().save_pretrained(str(folder), safe_serialization=True)

    _shrink_vocab(enc, 10, save)
    with pytest.raises(InputError, match="another model") as exc:
        SentenceEncoder(str(enc), device="cpu")
    assert str(enc) in str(exc.value)
    one_sentence(str(exc.value))


# ----------------------------------------------------------------------------- models info on an LM folder
def test_models_info_of_an_lm_folder_shows_the_hash_its_signature_carries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`models info DIR` said "fingerprint 3e17..." for an LM folder whose lm-* signatures say ``lm:DIR@1eda...``
    (the LM metrics hash the config and tokenizer too): the user could not find the model of a signature."""
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    from vistkit.cli import main
    from vistkit.metrics.base import get_metric

    lm = make_tiny_causal_lm(tmp_path / "mylm")
    score = get_metric("lm-perplexity", lm=str(lm), device="cpu").score(
        [Story(story_id="a", text="We went to the park. It was fun.")]
    )
    signed = next(part for part in score.signature.split("|") if part.startswith("lm:")).removeprefix("lm:")
    capsys.readouterr()
    assert main(["models", "info", str(lm), "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lm_signature"] == signed, data


# ------------------------------------------------------------------- a model folder saved over in one session
def test_lm_folder_saved_over_is_loaded_again(tmp_path: Path) -> None:
    """A notebook that scores, trains on and saves the LM into the same folder, then scores again, got the first
    weights' numbers under the first weights' hash: the loaded model was kept by the folder's path alone."""
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_causal_lm

    from vistkit.metrics.base import get_metric
    from vistkit.models.lm import load_lm

    stories = [Story(story_id="a", text="We went to the park. It was fun.")]
    lm = make_tiny_causal_lm(tmp_path / "lm", seed=0)
    first = get_metric("lm-perplexity", lm=str(lm), device="cpu").score(stories)
    again = get_metric("lm-perplexity", lm=str(lm), device="cpu")
    assert again.score(stories).corpus == first.corpus  # unchanged folder: the loaded model is shared
    make_tiny_causal_lm(tmp_path / "lm", seed=1)  # trained further, saved over
    second = get_metric("lm-perplexity", lm=str(lm), device="cpu").score(stories)
    assert f"@{load_lm(lm, device='cpu').fingerprint}|" in second.signature
    assert second.signature != first.signature
    assert second.corpus != first.corpus


def test_clip_folder_saved_over_is_loaded_again(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_clip

    from vistkit.metrics.clipscore import load_clip

    clip = make_tiny_clip(tmp_path / "clip", seed=0)
    first = load_clip(str(clip), device="cpu")
    assert load_clip(str(clip), device="cpu") is first
    make_tiny_clip(tmp_path / "clip", seed=1)
    second = load_clip(str(clip), device="cpu")
    assert second is not first
    assert second.fingerprint != first.fingerprint
    assert not (second.encode_texts(["a dog"]) == first.encode_texts(["a dog"])).all()


# ---------------------------------------------------------------------------------------- groovist's theta
def test_groovist_signature_tells_close_thetas_apart(tmp_path: Path) -> None:
    """theta was signed to 6 significant digits: 0.1234567 and 0.1234568 (different scores) were signed alike."""
    pytest.importorskip("transformers")
    pytest.importorskip("spacy")
    from tiny_models import make_photo_folder, make_tiny_clip

    from vistkit.metrics.base import get_metric

    clip = make_tiny_clip(tmp_path / "clip")
    photos = make_photo_folder(tmp_path, ["1"])

    def theta_field(theta: float) -> str:
        metric = get_metric("groovist", images=str(photos), clip_model=str(clip), device="cpu", theta=theta)
        return str(metric.signature_fields()["theta"])

    assert theta_field(0.1234567) != theta_field(0.1234568)
    assert theta_field(0.6159241924121119) == "vist:0.615924"  # the dataset values are signed as before
    assert theta_field(0.5) == "custom:0.5"


# -------------------------------------------------------------------- coherence: the encoder's token limit
PACKAGED_COHERENCE = Path(__file__).resolve().parents[1] / "src" / "vistkit" / "resources" / "models" / (
    "coherence-minilm-v1"
)


def _coherence_with_max_length(tmp_path: Path, value: object) -> Path:
    import shutil

    folder = tmp_path / "coherence"
    shutil.copytree(PACKAGED_COHERENCE, folder)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["max_length"] = value
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


@pytest.mark.parametrize("value", [0, -5, 2.5, "256", None, True])
def test_coherence_config_max_length_that_is_not_a_count_is_refused(tmp_path: Path, value: object) -> None:
    """A config.json whose max_length was 2.5 scored with every sentence cut to 2 tokens (signed ``maxlen:2``);
    0 crashed on a long sentence (RuntimeError), -5 with OverflowError, null with TypeError."""
    pytest.importorskip("transformers")
    from vistkit.metrics.base import get_metric

    folder = _coherence_with_max_length(tmp_path, value)
    with pytest.raises(InputError, match="max_length") as exc:
        get_metric("coherence", model=str(folder), device="cpu")
    assert str(folder / "config.json") in str(exc.value)
    one_sentence(str(exc.value))


def test_coherence_max_length_past_the_encoder_positions_is_refused_at_load(tmp_path: Path) -> None:
    """max_length 1024 over MiniLM's 512 positions loaded, then a long sentence crashed scoring with "RuntimeError:
    The expanded size of the tensor (706) must match the existing size (512)"."""
    pytest.importorskip("transformers")
    from vistkit.metrics.base import get_metric
    from vistkit.models.coherence_head import SentenceEncoder

    folder = _coherence_with_max_length(tmp_path, 1024)
    with pytest.raises(InputError, match=r"max_length 1024 .* 512") as exc:
        get_metric("coherence", model=str(folder), device="cpu")
    one_sentence(str(exc.value))
    with pytest.raises(InputError, match="max_length"):
        SentenceEncoder("minilm-l6", device="cpu", max_length=513)
    # the packaged model and a limit within the positions still load and score a long sentence
    story = Story(story_id="a", text="We went " + "very " * 700 + "far. It was fun. We left.")
    assert 0 <= get_metric("coherence", device="cpu").score([story]).corpus <= 1
    fitting = _coherence_with_max_length(tmp_path / "fits", 512)
    assert 0 <= get_metric("coherence", model=str(fitting), device="cpu").score([story]).corpus <= 1
