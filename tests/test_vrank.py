"""Vrank end to end on a tiny random BERT the tests build and synthetic VHED-layout pairs (no download).

Synthetic preference: a story's quality is the share of its words drawn from a "good" word list; people prefer
the better story of a pair by a gap of 4 x the quality difference (rank units, N = 5). ``vistkit vrank train``
must learn it well enough to order > 90% of held-out pairs (fresh stories) correctly, through ``vistkit vrank
predict``, the ``vrank`` metric in ``vistkit meta pairs`` and ``vistkit score``.
"""

from __future__ import annotations

import csv
import inspect
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from vistkit.cli import main
from vistkit.meta.human import StoryPair, read_pairs, write_pairs

pytestmark = pytest.mark.models

GOOD = "sunny happy beach family picnic laugh smile garden dance music friends sweet".split()
BAD = "broken sad rain lost angry crash dirty late cold noise alone sick".split()
# settings that let a 2-layer, 32-d random BERT learn in seconds (the published ones are the CLI defaults)
FAST = [
    "--lr",
    "3e-3",
    "--epochs",
    "8",
    "--target",
    "normalised",
    "--precision",
    "fp32",
    "--device",
    "cpu",
    "--threads",
    "1",
]


def _story(rng: np.random.Generator, q: float) -> str:
    n = int(rng.integers(8, 13))
    k = round(q * n)
    words = [str(w) for w in rng.choice(GOOD, k)] + [str(w) for w in rng.choice(BAD, n - k)]
    rng.shuffle(words)
    return " ".join(words) + " ."


def synthetic_pairs(n: int, seed: int) -> list[StoryPair]:
    """``n`` pairs of fresh random stories whose qualities differ by at least 0.3."""
    rng = np.random.default_rng(seed)
    out: list[StoryPair] = []
    while len(out) < n:
        q1, q2 = (float(x) for x in rng.uniform(0, 1, 2))
        if abs(q1 - q2) < 0.3:
            continue
        gap = round(4 * (q1 - q2), 2)
        i = len(out)
        out.append(
            StoryPair(
                pair_id=str(i),
                story_id=f"s{seed}-{i}",
                img_seq=tuple(f"{seed}{i}{j}" for j in range(5)),
                text_1=_story(rng, q1),
                text_2=_story(rng, q2),
                system_1="m1" if i % 3 else "gt",
                system_2="m2",
                gap=gap,
                agreement=3 + i % 3,
                n_stories=5,
                avg_rank_1=(3 - gap / 2) / 5,
                avg_rank_2=(3 + gap / 2) / 5,
            )
        )
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tiny_models import make_tiny_encoder

    root = tmp_path_factory.mktemp("vrank")
    write_pairs(synthetic_pairs(160, seed=1), root / "train.csv")
    write_pairs(synthetic_pairs(120, seed=2), root / "heldout.csv")
    return {
        "root": root,
        "train": root / "train.csv",
        "heldout": root / "heldout.csv",
        "encoder": make_tiny_encoder(root / "enc", words=GOOD + BAD),
    }


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def trained(data: dict[str, Path]) -> Path:
    out = data["root"] / "model"
    code = main(
        [
            "vrank",
            "train",
            str(data["train"]),
            "--encoder",
            str(data["encoder"]),
            "--output",
            str(out),
            *FAST,
            "-f",
            "json",
        ]
    )
    assert code == 0
    return out


# --------------------------------------------------------------------------------------------------- recipe
def test_symmetric_examples_swap_every_pair_and_negate_the_gap() -> None:
    from vistkit.models.vrank import symmetric_examples

    pairs = synthetic_pairs(3, seed=5)
    ex = symmetric_examples(pairs)
    assert len(ex) == 6
    for k, p in enumerate(pairs):
        assert ex[2 * k] == (p.text_1, p.text_2, p.gap)
        assert ex[2 * k + 1] == (p.text_2, p.text_1, -p.gap)
    norm = symmetric_examples(pairs, target="normalised")
    assert [y for _, _, y in norm] == pytest.approx([y / 5 for _, _, y in ex])


def test_published_training_settings_are_the_defaults() -> None:
    """Adam lr 2e-5, batch 32, 30 epochs, seed 7777, mixed precision where the device has it (Vrank appendix)."""
    from vistkit.commands.vrank import train_cmd
    from vistkit.models.vrank import DEFAULT_ENCODER, VrankSettings

    s = VrankSettings()
    assert (s.lr, s.batch_size, s.epochs, s.seed, s.precision) == (2e-5, 32, 30, 7777, "auto")
    defaults = {n: p.default.default for n, p in inspect.signature(train_cmd).parameters.items()}
    assert (defaults["lr"], defaults["batch_size"], defaults["epochs"], defaults["seed"]) == (2e-5, 32, 30, 7777)
    assert defaults["encoder"] == DEFAULT_ENCODER == "princeton-nlp/sup-simcse-bert-base-uncased"


# --------------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_trained_vrank_predicts_held_out_synthetic_preferences(
    data: dict[str, Path], trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = data["root"] / "pred.csv"
    summary = json.loads(
        _run(
            [
                "vrank",
                "predict",
                str(data["heldout"]),
                "--model",
                str(trained),
                "-o",
                str(pred),
                "-f",
                "json",
                "--threads",
                "1",
            ],
            capsys,
        )
    )
    with open(pred, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    gold = np.array([float(r["gap"]) for r in rows])
    raw = np.array([float(r["pred_gap"]) for r in rows])
    sym = np.array([float(r["pred_gap_sym"]) for r in rows])
    assert len(rows) == 120
    assert np.mean(np.sign(raw) == np.sign(gold)) > 0.9  # the published read-out: sign of g(s1, s2)
    assert np.mean(np.sign(sym) == np.sign(gold)) > 0.9  # the ranker's antisymmetrised preference
    assert summary["accuracy"] == pytest.approx(np.mean(np.sign(raw) == np.sign(gold)))
    # the regression follows the gap, not only its sign
    assert np.corrcoef(sym, gold / 5)[0, 1] > 0.8


@pytest.mark.slow
def test_trained_folder_is_the_vrank_metric(
    data: dict[str, Path], trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opt = ["--option", f"vrank.model={trained}", "--option", "vrank.device=cpu", "--option", "vrank.num_threads=1"]
    res = json.loads(_run(["meta", "pairs", str(data["heldout"]), "-m", "vrank", *opt, "-f", "json"], capsys))
    assert res["accuracy"]["vrank"]["all"] > 0.9
    sig = res["signatures"]["vrank"]
    weights = json.loads((trained / "vistkit_model.json").read_text(encoding="utf-8"))["tensors_sha256"][:12]
    assert sig.startswith(f"vrank|model:{weights}|encoder:{data['encoder']}|data:train.csv|cfg:")
    assert re.search(r"\|cfg:[0-9a-f]{8}\|tok:[0-9a-f]{8}\|anchors:packaged-val8\|", sig)
    # safetensors + JSON, no pickle
    names = {p.name for p in trained.iterdir()}
    assert {"model.safetensors", "vistkit_model.json"} <= names
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pth", ".pkl", ".ckpt"))]
    # vistkit score: the per-story score against the packaged anchors; a good story beats a bad one
    stories = data["root"] / "stories.jsonl"
    stories.write_text(
        json.dumps({"story_id": "good", "text": " ".join(GOOD)})
        + "\n"
        + json.dumps({"story_id": "bad", "text": " ".join(BAD)})
        + "\n",
        encoding="utf-8",
    )
    code = main(
        ["score", str(stories), "-m", "vrank", *opt, "-f", "json", "--per-item", str(data["root"] / "items.csv")]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    with open(data["root"] / "items.csv", encoding="utf-8") as fh:
        items = {r["id"]: float(r["vrank"]) for r in csv.DictReader(fh)}
    assert items["good"] > items["bad"]


@pytest.mark.slow
def test_training_is_reproducible_and_mlm_keeps_the_encoder_pooler(data: dict[str, Path], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from vistkit.models.vrank import VrankSettings, tensors_sha256, train_vrank

    pairs = read_pairs(data["train"])[:24]
    quick = VrankSettings(lr=1e-3, batch_size=8, epochs=1, mlm_epochs=1, max_length=64)
    a = train_vrank(pairs, tmp_path / "a", encoder=data["encoder"], settings=quick, device="cpu", threads=1)
    b = train_vrank(pairs, tmp_path / "b", encoder=data["encoder"], settings=quick, device="cpu", threads=1)
    ta, tb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert ta.keys() == tb.keys() and all(bool((ta[k] == tb[k]).all()) for k in ta)  # seed 7777
    meta_a, meta_b = (json.loads((x / "vistkit_model.json").read_text(encoding="utf-8")) for x in (a, b))
    assert meta_a["tensors_sha256"] == meta_b["tensors_sha256"] == tensors_sha256(ta)
    texts = [p.text_1 for p in pairs]
    m = train_vrank(
        pairs, tmp_path / "m", encoder=data["encoder"], settings=quick, mlm_texts=texts, device="cpu", threads=1
    )
    meta = json.loads((m / "vistkit_model.json").read_text(encoding="utf-8"))
    assert meta["data"]["mlm_stories"] == 24 and not (m / "mlm").exists()
    # the pooler is trained afterwards, so compare the MLM-stage-only tensor: embeddings moved, pooler came from
    # the encoder (trained for one epoch from there, so close to it, while a fresh pooler would be unrelated)
    enc = load_file(str(data["encoder"] / "model.safetensors"))
    got = load_file(str(m / "model.safetensors"))
    pooler = next(k for k in enc if "pooler.dense.weight" in k)
    assert np.corrcoef(enc[pooler].flatten().numpy(), got["bert.pooler.dense.weight"].flatten().numpy())[0, 1] > 0.9


# --------------------------------------------------------------------------------------------------- errors
def test_missing_encoder_is_one_clear_sentence(
    data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main(["vrank", "train", str(data["train"]), "--output", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 1
    assert "princeton-nlp/sup-simcse-bert-base-uncased" in err and "--encoder" in err and "Traceback" not in err


def test_vrank_metric_without_a_model_says_how_to_train_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stories = tmp_path / "s.jsonl"
    stories.write_text(json.dumps({"story_id": "a", "text": "a b c"}) + "\n", encoding="utf-8")
    code = main(["score", str(stories), "-m", "vrank"])
    err = capsys.readouterr().err
    assert code == 1 and "vistkit vrank train" in err and "vrank.model=DIR" in err


# --------------------------------------------------------------------------------------------------- saving
def test_an_output_inside_the_model_folder_is_refused_and_the_model_kept(
    trained: Path, data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe that replaced the model's own vistkit_model.json (or its weights) by a CSV, exit 0."""
    model = tmp_path / "model"
    shutil.copytree(trained, model)
    before = {f.name: f.read_bytes() for f in model.iterdir() if f.is_file()}
    stories = tmp_path / "s.jsonl"
    stories.write_text(json.dumps({"story_id": "a", "text": "good day . bad day ."}) + "\n", encoding="utf-8")
    for name in ("vistkit_model.json", "model.safetensors", "tokenizer.json"):
        for argv in (
            ["vrank", "predict", str(data["heldout"]), "--model", str(model), "-o", str(model / name), "--force"],
            ["score", str(stories), "-m", "vrank", "-O", f"vrank.model={model}", "--per-item", str(model / name),
             "--force"],
        ):  # fmt: skip
            assert main(argv) == 1
            err = capsys.readouterr().err
            assert f"inside the folder {model}" in err and "Traceback" not in err, err
    assert {f.name: f.read_bytes() for f in model.iterdir() if f.is_file()} == before
    # a new file inside an input folder destroys nothing and is written
    assert main(["vrank", "predict", str(data["heldout"]), "--model", str(model), "-o", str(model / "p.csv")]) == 0
    capsys.readouterr()


def test_a_save_cut_short_is_refused_in_one_sentence_never_mixed(
    trained: Path, data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vistkit_model.json is the commit record: written last, listing the tokenizer files' hashes."""
    from vistkit.errors import InputError
    from vistkit.models import vrank as vr

    meta = json.loads((trained / "vistkit_model.json").read_text(encoding="utf-8"))
    assert set(meta["files_sha256"]) >= {"tokenizer.json"}
    for cut in ("tokenizer.json", "tokenizer_config.json"):
        broken = tmp_path / f"no-{cut}"
        shutil.copytree(trained, broken)
        (broken / cut).unlink()
        with pytest.raises(InputError, match=f"{cut}: no such file.*save or train it again"):
            vr.load_vrank(broken)
    changed = tmp_path / "changed"
    shutil.copytree(trained, changed)
    (changed / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="not the file this model was saved with"):
        vr.load_vrank(changed)
    # a retrain with --force killed while its tokenizer is written: the old record is gone first, so the folder is
    # refused (not loaded as new weights with the old tokenizer)
    again = tmp_path / "again"
    shutil.copytree(trained, again)

    class Killed(BaseException):
        pass

    def die(*_a: object, **_k: object) -> None:
        raise Killed

    tok, model, _ = vr.load_encoder(data["encoder"])
    monkeypatch.setattr(tok, "save_pretrained", die)
    with pytest.raises(Killed):
        vr.save_vrank(again, model, tok, encoder="enc", settings=vr.VrankSettings(), data={})
    assert not (again / "vistkit_model.json").exists()
    with pytest.raises(InputError, match="not a trained Vrank folder"):
        vr.load_vrank(again)
    assert not [f for f in again.iterdir() if f.name.startswith(".saving-")]


def test_a_failed_training_leaves_no_folder_behind(
    data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m"
    code = main(["vrank", "train", str(data["train"]), "--encoder", str(data["train"]), "-o", str(out), *FAST])
    assert code == 1 and "Traceback" not in capsys.readouterr().err
    assert not out.exists()


def test_predict_leaves_undefined_predictions_out_of_the_accuracy(
    data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN prediction (a model whose weights hold NaN) counted as a wrong pair; as in `meta pairs` it now counts
    in no denominator, and the summary says how many there were."""
    from vistkit.meta.human import read_pairs
    from vistkit.models import vrank as vr

    pairs = read_pairs(data["heldout"])
    gold = np.array([p.gap for p in pairs])
    n = len(pairs)

    class Fake:
        def predict(self, t1: list[str], t2: list[str]) -> np.ndarray:
            raw = np.concatenate([gold, -gold])  # always right, in both orders
            raw[[0, n]] = np.nan  # the first pair undefined
            return raw

    monkeypatch.setattr(vr, "load_vrank", lambda *a, **k: Fake())
    out = tmp_path / "p.csv"
    summary = json.loads(_run(["vrank", "predict", str(data["heldout"]), "--model", str(tmp_path), "-o", str(out),
                               "-f", "json"], capsys))  # fmt: skip
    assert gold[0] != 0
    assert summary["undefined_pairs"] == 1 and summary["scored_pairs"] == int((gold != 0).sum()) - 1
    assert summary["accuracy"] == 1.0 and summary["accuracy_sym"] == 1.0


@pytest.mark.slow
def test_the_signature_names_the_saved_config_and_the_tokenizer(
    trained: Path, data: dict[str, Path], tmp_path: Path
) -> None:
    """The weights' hash was the whole model name: a folder whose saved config was edited (a shorter max_length
    truncates the stories: other numbers) was signed as the original."""
    from vistkit.metrics.base import get_metric

    story = {"a": "good day . " * 60, "b": "bad day . good day ."}
    edited = tmp_path / "model"
    shutil.copytree(trained, edited)
    meta_file = edited / "vistkit_model.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["config"]["max_length"] = 16
    meta_file.write_text(json.dumps(meta), encoding="utf-8")
    runs = [get_metric("vrank", model=str(m), device="cpu", num_threads=1).score(story) for m in (trained, edited)]
    assert runs[0].item_scores[0] != pytest.approx(runs[1].item_scores[0], abs=1e-6)  # truncated: other numbers
    cfg = [re.search(r"\|cfg:([0-9a-f]{8})\|tok:([0-9a-f]{8})\|", r.signature) for r in runs]
    assert cfg[0] and cfg[1] and cfg[0][1] != cfg[1][1] and cfg[0][2] == cfg[1][2]
    assert runs[0].signature.split("|cfg:")[0] == runs[1].signature.split("|cfg:")[0]  # same weights' hash
