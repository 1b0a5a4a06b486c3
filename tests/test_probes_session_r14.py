"""Probe round 14, the lead's own findings and the fixes it applied for the helpers (tests written failing first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vistkit.errors import InputError


@pytest.mark.parametrize("form", [{}, {"ranking": ""}, {"ranking": "  "}])
def test_a_rank_form_without_its_ranking_says_the_pages_script_did_not_run(form: dict[str, str]) -> None:
    """The task page's script fills in ``ranking`` (the field starts empty, so a page whose script did not run
    cannot store the order it showed); such a form was told "ranking must list the story positions best first,
    e.g. 2,1,3", which an annotator cannot act on."""
    pytest.importorskip("sqlalchemy")
    from vistkit.studio import service
    from vistkit.studio.service import StudioError

    with pytest.raises(StudioError) as info:
        service.parse_answer("rank", form, [3, 1, 2], [], False)
    assert info.value.status == 422 and "did not run" in str(info.value)
    answer = service.parse_answer("rank", {"ranking": "2,1,3"}, [3, 1, 2], [], False)
    assert answer == {"ranks": {"1": 1, "3": 2, "2": 3}}


def _foreign_or_nan(folder: Path, kind: str) -> None:
    """Make the tiny BERT in ``folder`` hold a NaN weight, or weights of 10 embeddings beside its tokenizer."""
    from safetensors.torch import load_file, save_file

    if kind == "nan":
        weights = load_file(str(folder / "model.safetensors"))
        name = next(k for k in weights if k.endswith("attention.self.query.weight"))
        weights[name][0, 0] = float("nan")
        save_file(weights, str(folder / "model.safetensors"))
        return
    import torch
    from transformers import BertConfig, BertModel

    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["vocab_size"] = 10
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    torch.manual_seed(0)
    BertModel(BertConfig.from_pretrained(folder)).eval().save_pretrained(str(folder), safe_serialization=True)


@pytest.mark.parametrize("kind", ["nan", "foreign"])
def test_bertscore_and_vrank_encoders_with_nan_weights_or_another_models_tokenizer_are_refused(
    tmp_path: Path, kind: str
) -> None:
    """A BERTScore model with a NaN weight scored 0.0 in silence, and one whose tokenizer belongs to another model
    stopped with IndexError; Vrank's encoder loaded the same way (the LM, CLIP, SOP and coherence encoders are
    checked since rounds 13 and 14)."""
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_encoder

    from vistkit.metrics.base import get_metric
    from vistkit.models import vrank

    enc = make_tiny_encoder(tmp_path / "enc")
    _foreign_or_nan(enc, kind)
    match = "NaN or infinite" if kind == "nan" else "another model"
    with pytest.raises(InputError, match=match) as info:
        get_metric("bertscore", model=str(enc), layer=1, device="cpu")
    assert str(enc) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InputError, match=match):
        vrank.load_encoder(str(enc))


def test_distance_prints_its_numbers_when_the_per_item_name_was_taken_meanwhile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vistkit distance --per-item` wrote the per-story file before printing, so a file made under that name
    during the run (another run's) lost the distances of the whole run; they are printed, then the error names the
    file (exit 1), as `vistkit score` does since this round."""
    from conftest import shared_file

    from vistkit.cli import main
    from vistkit.scores import distance

    shared_file("dhm-visual-storytelling", "data", "scores", "vwp", "gt_test_G.json")
    folder = shared_file("dhm-visual-storytelling", "data", "scores", "vwp")
    out = tmp_path / "per-story.csv"
    original = distance.dhm_distance

    def distance_then_collide(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)  # type: ignore[arg-type]
        out.write_text("another run's file\n", encoding="utf-8")
        return result

    monkeypatch.setattr(distance, "dhm_distance", distance_then_collide)
    argv = ["distance", "--human", str(folder / "gt_test"), "--model", str(folder / "llava_vc_p3"), "-f", "json"]
    code = main([*argv, "--per-item", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert round(json.loads(captured.out)["dHM"], 4) == 0.1796  # the paper's VWP number, not lost
    errors = [ln for ln in captured.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "per-story.csv" in errors[0], captured.err
    assert out.read_text(encoding="utf-8") == "another run's file\n"


@pytest.mark.parametrize("float_side", ["hypotheses", "references"])
def test_keys_written_as_floats_are_named_when_nothing_matches(float_side: str) -> None:
    """Ids a spreadsheet or pandas wrote as floats (``45530.0``) matched no reference with only "no hypothesis
    shares a story key"; the error now says what differs and what to do."""
    import vistkit

    hyps = {"45530": "we went to the park .", "45531": "it was fun ."}
    refs = {"45530": ["we went to a park ."], "45531": ["it was great fun ."]}
    if float_side == "hypotheses":
        hyps = {f"{k}.0": v for k, v in hyps.items()}
    else:
        refs = {f"{k}.0": v for k, v in refs.items()}
    with pytest.raises(InputError, match=r"2 keys of one side are keys of the other written as floats \(e\.g\. "
                                         r"'45530\.0'.*write the ids as whole numbers"):
        vistkit.score("sacrebleu", hyps, refs)
