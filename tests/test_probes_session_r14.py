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


def test_meta_stories_with_an_empty_file_after_the_system_name_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`meta correlate -s human=$UNSET` said "error: . is a folder" (the empty name read as the current folder)."""
    from meta_dummies import FIX, dummy_metrics_registered

    from vistkit.cli import main

    with dummy_metrics_registered():
        capsys.readouterr()
        code = main(["meta", "correlate", str(FIX / "likert_small.csv"), "-m", "meta-test-length", "-s", "m1="])
    err = capsys.readouterr().err
    assert code == 1 and "the file after '=' is empty" in err and "is a folder" not in err, err


def test_a_verb_that_does_not_read_standard_input_says_so_for_a_dash() -> None:
    """`meta rankings-to-pairs -` (and the other verbs that read files by name only) said "-: no such file"."""
    from vistkit.data.readers import missing_file

    message = str(missing_file("-"))
    assert message.startswith("- (standard input) is not read here") and "score, compare and validate" in message


def test_metrics_all_keeps_the_whole_reason_a_metric_was_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`meta ... --metrics all` cut each skip reason at its first ';', so rovist-c's stopped at "see its README's
    Google Drive link" and lost how to provide the checkpoint (`-O rovist-c.model=PATH`)."""
    import vistkit.commands.score as score_module
    from vistkit.commands.meta import common
    from vistkit.errors import MissingDependencyError

    def build(names: list[str], *args: object, **kwargs: object) -> list[object]:
        if names == ["rovist-c"]:
            raise MissingDependencyError("rovist-c needs its checkpoint (see its README); pass model=PATH")
        return [names[0]] if names == ["rovist-nr"] else []

    monkeypatch.setattr(score_module, "build_metrics", build)
    common._metrics("all", [])
    assert common.SKIPPED["rovist-c"].endswith("; pass model=PATH")


def test_lm_metrics_read_a_markdown_story_as_its_prose(tmp_path: Path) -> None:
    """The lm-* metrics read "**We went.**" with its asterisks and "2." as a sentence of its own (story-ranker
    stopped reading markdown marks this round); they now read the prose, sentence by sentence."""
    pytest.importorskip("torch")
    from tiny_models import make_tiny_causal_lm

    from vistkit.metrics.base import get_metric

    lm = make_tiny_causal_lm(tmp_path / "lm")
    prose = "We went to the park. The dog ran fast. We ate cake at home."
    forms = [
        "**We went to the park.** **The dog ran fast.** **We ate cake at home.**",
        "1. We went to the park.\n2. The dog ran fast.\n3. We ate cake at home.",
        "- We went to the park.\n- The dog ran fast.\n- We ate cake at home.",
    ]
    for name in ("lm-fluency", "lm-coherence", "lm-perplexity"):
        metric = get_metric(name, lm=str(lm), device="cpu")
        plain, *others = metric.score([prose, *forms]).item_scores
        assert others == pytest.approx([plain] * len(forms), rel=1e-5), name


def test_lm_metrics_are_split_into_shards_and_give_the_whole_runs_scores(tmp_path: Path) -> None:
    """The lm-* metrics ran as one shard on one worker under `--engine ray` (and could not be streamed): a story's
    LM values depend on its own tokens only, so they are now split like coherence; the shards' item scores and
    corpus equal the whole run's (to float32 batching)."""
    pytest.importorskip("torch")
    from tiny_models import make_tiny_causal_lm

    from vistkit.engine import make_engine
    from vistkit.engine.merge import merge_scores, strategy
    from vistkit.metrics.base import align, as_story_sets, get_metric

    lm = make_tiny_causal_lm(tmp_path / "lm")
    texts = [f"We went to the park {i}. The dog ran {'fast ' * (i % 4)}home. It was fun." for i in range(9)]
    hyps, _, _ = as_story_sets(texts, None)
    items = align(hyps, None, keying="story").items
    for name in ("lm-perplexity", "lm-fluency", "lm-coherence"):
        assert strategy(name) == "items"
        metric = get_metric(name, lm=str(lm), device="cpu")
        whole = metric.score(texts)
        parts = [metric.score_items(items[k : k + 2], signature=whole.signature) for k in range(0, len(items), 2)]
        merged = merge_scores(parts, signature=whole.signature)
        assert merged.item_scores == pytest.approx(whole.item_scores, rel=1e-5)
        assert merged.corpus == pytest.approx(whole.corpus, rel=1e-5)
        assert len(merged.extra["item_sentences"]) == len(texts)
        totals = make_engine("local").score_stream(metric, iter(items), signature=whole.signature, batch_size=4)
        assert totals.corpus() == pytest.approx(whole.corpus, rel=1e-5)
