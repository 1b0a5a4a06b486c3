"""Issue 9, items 1-3: nothing vistkit reads can run code, crash with a traceback, or hang.

1. Malicious pickles (``os.system`` / ``subprocess.call`` / ``eval`` / ``exec`` through ``__reduce__``, nested in a
   dict or an ``argparse.Namespace``; zip-format torch checkpoints, legacy ``torch.save`` files, bare protocol 0
   and 2 pickles) given to `load_legacy_checkpoint`, RoViST's `load_idf` and the CLI (``models convert``,
   ``score -m rovist-c / rovist-vg`` with ``trust_checkpoint``): a marker file the pickle would create never
   appears and the error is one sentence naming the refused global.
2. Every file reader, fuzzed with hypothesis (random bytes, BOM + junk, Latin-1, truncated UTF-8, NUL, wrong
   columns, NaN/inf cells, .gz/.zip containers, deep JSON), returns or raises `VistkitError`, never another
   exception; and every CLI verb that reads a file, fed the bad files through `typer.testing.CliRunner` in
   process, exits 1 or 2 with a one-line message and no traceback. Verbs that serve or block are excluded by
   name, and every invocation runs under a hard ``SIGALRM`` timeout.
3. The UTF-8 BOM and the zip rules (one member, or ``ARCHIVE.zip:MEMBER``; several members refused naming them;
   missing and ``../`` members refused), for every reader, and `vistkit formats` documenting all of it.
4. The leftovers: GloVe, bertscore baselines, GROOViST's concreteness and WordNet files and the SOP config in the
   reader fuzz; ``-s NAME=FILE:FIELD`` next to ``ARCHIVE.zip:MEMBER``; an empty study file left untouched;
   ``python -m vistkit(.cli)``; Hugging Face folders with a malicious ``pytorch_model.bin``.
"""

from __future__ import annotations

import argparse
import builtins
import csv
import gzip
import io
import json
import math
import os
import pickle
import signal
import subprocess
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import cli_verbs, message_lines
from vistkit.cli import _load_commands, app, main
from vistkit.data import images, readers
from vistkit.data.validate import validate_submission
from vistkit.errors import InputError, VistkitError
from vistkit.meta import human
from vistkit.scores import distance

# VISTKIT_FUZZ_EXAMPLES=500 for a longer local hunt; 40 keeps the file well under its time budget
FUZZ = settings(
    max_examples=int(os.environ.get("VISTKIT_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


# --------------------------------------------------------------------------------------------------- timeouts
class HardTimeout(BaseException):  # a BaseException: CliRunner and `except Exception` cannot swallow it
    """Raised by SIGALRM when a call runs past its limit."""


@contextmanager
def hard_timeout(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (restores an enclosing timer, e.g. the per-test one)."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise HardTimeout(f"still running after {seconds} s")

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(0.01, outer - (time.monotonic() - start)))


@pytest.fixture(autouse=True)
def _per_test_limit(request: pytest.FixtureRequest) -> Iterator[None]:
    """60 s per test, or the ``hard_limit(SECONDS)`` mark's: a test whose command may take longer (its own
    `cli` limit) must not be cut by this one, which fires wherever the test is (a crashed xdist worker once)."""
    mark = request.node.get_closest_marker("hard_limit")
    with hard_timeout(mark.args[0] if mark else 60):
        yield


def one_sentence(message: str) -> None:
    """A user error: one line, no traceback, not a dump of the input."""
    assert message.strip(), "empty error message"
    assert "\n" not in message.strip(), f"multi-line error: {message!r}"
    assert "Traceback" not in message
    assert len(message) < 1500, f"error of {len(message)} characters"


def returns_or_vistkit_error(call: Callable[[], Any]) -> None:
    try:
        call()
    except VistkitError as exc:
        one_sentence(str(exc))


# =========================================================================================== 1. pickles
class _Evil:
    """Pickles as ``func(*args)``: what a malicious checkpoint's ``__reduce__`` runs on load."""

    def __init__(self, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.func, self.args


def _payloads(marker: Path) -> dict[str, _Evil]:
    """Refused global name -> a payload that creates ``marker`` when unpickled."""
    return {
        "os.system": _Evil(os.system, (f"touch {marker}",)),
        "subprocess.call": _Evil(subprocess.call, (["touch", str(marker)],)),
        "builtins.eval": _Evil(builtins.eval, (f"open({str(marker)!r}, 'w')",)),
        "builtins.exec": _Evil(builtins.exec, (f"open({str(marker)!r}, 'w').close()",)),
    }


PICKLE_KINDS = ("torch-zip", "torch-legacy", "pickle-p0", "pickle-p2", "pickle-p5")


def _write_evil(path: Path, kind: str, payload: _Evil) -> Path:
    """A checkpoint-shaped object with the payload nested in the Namespace RoViST pickles as ``opt``."""
    torch = pytest.importorskip("torch")
    obj = {"model": {"w": torch.zeros(2)}, "opt": argparse.Namespace(lr=0.1, hook=[{"x": payload}])}
    if kind == "torch-zip":
        torch.save(obj, path)
    elif kind == "torch-legacy":
        torch.save(obj, path, _use_new_zipfile_serialization=False)
    else:
        plain = {"the": 1.5, "nested": {"deeper": [payload]}}  # no tensor: a bare pickle (idf_dict.pkl-like)
        path.write_bytes(pickle.dumps(plain, protocol=int(kind[-1])))
    return path


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    m = tmp_path / "PWNED"
    yield m
    assert not m.exists(), "a pickle ran code"


def test_the_payloads_do_run_code_when_fully_unpickled(tmp_path: Path) -> None:
    """The control: each payload really creates the marker under a plain unpickle (so the tests below mean
    something)."""
    for name, payload in _payloads(tmp_path / "m").items():
        pickle.loads(pickle.dumps(payload))
        assert (tmp_path / "m").exists(), name
        (tmp_path / "m").unlink()


@pytest.mark.parametrize("kind", PICKLE_KINDS)
def test_load_legacy_checkpoint_refuses_code_naming_the_global(tmp_path: Path, marker: Path, kind: str) -> None:
    from vistkit.models.checkpoints import load_legacy_checkpoint

    for name, payload in _payloads(marker).items():
        p = _write_evil(tmp_path / f"evil-{kind}.pth.tar", kind, payload)
        with pytest.raises(InputError) as untrusted:
            load_legacy_checkpoint(p, trust=False)
        assert "--trust-checkpoint" in str(untrusted.value)
        one_sentence(str(untrusted.value))
        with pytest.raises(InputError) as trusted:
            load_legacy_checkpoint(p, trust=True)
        one_sentence(str(trusted.value))
        assert f"`{name}`" in str(trusted.value), (kind, str(trusted.value))
        assert not marker.exists(), (kind, name)


def test_load_legacy_checkpoint_refuses_protocol0_global_opcode(tmp_path: Path, marker: Path) -> None:
    """A hand-written protocol-0 pickle (``c`` GLOBAL + ``R`` REDUCE), as exploit kits write them."""
    from vistkit.models.checkpoints import load_legacy_checkpoint

    p = tmp_path / "raw.pt"
    p.write_bytes(b"cposix\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    with pytest.raises(InputError, match=r"needs `os\.system`"):
        load_legacy_checkpoint(p, trust=True)


@pytest.mark.parametrize("kind", ["pickle-p0", "pickle-p2", "pickle-p5"])
def test_load_idf_refuses_code_naming_the_global(tmp_path: Path, marker: Path, kind: str) -> None:
    from vistkit.metrics.rovist_vg import load_idf

    for name, payload in _payloads(marker).items():
        p = _write_evil(tmp_path / "idf_dict.pkl", kind, payload)
        with pytest.raises(InputError, match="trust_checkpoint"):
            load_idf(p, trust=False)
        with pytest.raises(InputError) as exc:
            load_idf(p, trust=True)
        one_sentence(str(exc.value))
        assert f"`{name}`" in str(exc.value)
        # the payload as the whole table, and as a value of a plain word -> number dict
        p.write_bytes(pickle.dumps({"word": payload}, protocol=2))
        with pytest.raises(InputError, match=f"`{name}`"):
            load_idf(p, trust=True)


@pytest.mark.parametrize("kind", ["torch-zip", "torch-legacy"])
def test_load_idf_refuses_a_torch_checkpoint(tmp_path: Path, marker: Path, kind: str) -> None:
    """A torch file given as the IDF table is refused (not a pickle of a dict) without running anything."""
    from vistkit.metrics.rovist_vg import load_idf

    p = _write_evil(tmp_path / "idf_dict.pkl", kind, _payloads(marker)["os.system"])
    with pytest.raises(InputError) as exc:
        load_idf(p, trust=True)
    one_sentence(str(exc.value))


def test_load_idf_reads_a_real_table_and_numpy_scalars(tmp_path: Path) -> None:
    """The restricted unpickler still admits what RoViST's idf_dict.pkl holds."""
    np = pytest.importorskip("numpy")
    from vistkit.metrics.rovist_vg import load_idf

    p = tmp_path / "idf_dict.pkl"
    p.write_bytes(pickle.dumps({"dog": np.float64(2.5), "cat": 1, b"sky": 0.5}, protocol=2))
    assert load_idf(p, trust=True) == {"dog": 2.5, "cat": 1.0, "sky": 0.5}


def test_no_other_unpickling_in_the_package() -> None:
    """Every pickle / torch.load / np.load / joblib use in src is one of the two restricted readers above."""
    src = Path(__file__).resolve().parents[1] / "src" / "vistkit"
    needles = ("pickle.load", "pickle.Unpickler", "torch.load(", "allow_pickle", "joblib", "dill", "shelve",
               "marshal.load", "yaml.load(", "np.load(", "numpy.load(")  # fmt: skip
    hits = []
    for f in src.rglob("*.py"):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if any(x in code for x in needles):
                hits.append(f"{f.relative_to(src)}:{n}")
    allowed = {"models/checkpoints.py"}
    assert {h.split(":")[0] for h in hits} <= allowed, hits


# --------------------------------------------------------------------------------------------------- HF folders
def _hf_folder_with_bin(source: Path, folder: Path, state: dict[str, Any], *, zip_format: bool) -> Path:
    """``source`` (a Hugging Face model folder) with its safetensors replaced by ``pytorch_model.bin`` = ``state``."""
    torch = pytest.importorskip("torch")
    folder.mkdir()
    for f in source.iterdir():
        if f.is_file() and f.suffix != ".safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=zip_format)
    return folder


@pytest.mark.parametrize("zip_format", [True, False], ids=["torch-zip", "torch-legacy"])
def test_hf_folders_with_a_malicious_pytorch_model_bin(tmp_path: Path, marker: Path, zip_format: bool) -> None:
    """Every vistkit API that loads a Hugging Face folder (bertscore, Vrank's encoder, the coherence sentence
    encoder, CLIP with and without trust, `load_pretrained`; all resolve it with `resolve_model`) refuses a
    ``pytorch_model.bin`` that names code, naming the global, without running it; a tensors-only
    ``pytorch_model.bin`` still loads (transformers reads it with ``weights_only=True``), with the same weights."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from safetensors.torch import load_file
    from tiny_models import make_tiny_clip, make_tiny_encoder
    from transformers import BertModel

    from vistkit.metrics.bertscore import BertScore
    from vistkit.metrics.clipscore import load_clip
    from vistkit.models.checkpoints import load_pretrained
    from vistkit.models.coherence_head import SentenceEncoder
    from vistkit.models.vrank import load_encoder

    bert = make_tiny_encoder(tmp_path / "bert")
    clip = make_tiny_clip(tmp_path / "clip")
    weights = load_file(str(bert / "model.safetensors"))
    evil = {**weights, "pooler.hook": _payloads(marker)["os.system"]}
    bad_bert = _hf_folder_with_bin(bert, tmp_path / "bad-bert", evil, zip_format=zip_format)
    clip_state = {**load_file(str(clip / "model.safetensors")), "x": _payloads(marker)["os.system"]}
    bad_clip = _hf_folder_with_bin(clip, tmp_path / "bad-clip", clip_state, zip_format=zip_format)
    loads: dict[str, Callable[[], Any]] = {
        "bertscore": lambda: BertScore(model=str(bad_bert), layer=1, device="cpu"),
        "vrank encoder": lambda: load_encoder(bad_bert),
        "vrank mlm": lambda: load_encoder(bad_bert, mlm=True),
        "coherence encoder": lambda: SentenceEncoder(str(bad_bert), device="cpu"),
        "clip": lambda: load_clip(bad_clip, device="cpu"),
        "clip trusted": lambda: load_clip(bad_clip, device="cpu", trust=True),
        "load_pretrained trusted": lambda: load_pretrained(BertModel, bad_bert, trust=True),
    }
    for name, load in loads.items():
        with pytest.raises(InputError, match=r"`os\.system`") as exc:
            load()
        one_sentence(str(exc.value))
        assert not marker.exists(), name

    clean = _hf_folder_with_bin(bert, tmp_path / "clean-bert", weights, zip_format=zip_format)
    _, model, _ = load_encoder(clean)
    loaded = model.state_dict()
    same = [torch.equal(loaded[f"bert.{k}"], v) for k, v in weights.items() if f"bert.{k}" in loaded]
    assert len(same) > 10 and all(same)
    assert BertScore(model=str(clean), layer=1, device="cpu").signature_fields()


def test_hf_folders_whose_config_declares_weights_they_lack(tmp_path: Path) -> None:
    """A config that does not fit its weights (one more layer declared than saved) made transformers start the
    missing layer at random and only log it (quieted): bertscore, the sentence encoder, CLIP and the LM scored
    silently wrong, and Vrank trained from a partly random encoder. Each loader now refuses it in one sentence
    naming the folder and a missing weight (Vrank's new head is started by design); a checkpoint without the
    pooler (which none of them reads) still loads for the token and sentence encoders."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from safetensors.torch import load_file, save_file
    from tiny_models import make_tiny_causal_lm, make_tiny_clip, make_tiny_encoder

    from vistkit.metrics.bertscore import BertScore
    from vistkit.metrics.clipscore import load_clip
    from vistkit.models.coherence_head import SentenceEncoder
    from vistkit.models.lm import load_lm
    from vistkit.models.vrank import load_encoder

    def one_more_layer(folder: Path, *keys: str) -> Path:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        for key in keys:
            part = config
            *path, last = key.split(".")
            for k in path:
                part = part[k]
            part[last] += 1
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        return folder

    bert = one_more_layer(make_tiny_encoder(tmp_path / "bert", layers=1), "num_hidden_layers")
    clip = one_more_layer(make_tiny_clip(tmp_path / "clip"), "text_config.num_hidden_layers")
    lm = one_more_layer(make_tiny_causal_lm(tmp_path / "lm"), "num_hidden_layers")
    loads: dict[str, tuple[Path, Callable[[], Any]]] = {
        "bertscore": (bert, lambda: BertScore(model=str(bert), layer=1, device="cpu")),
        "sentence encoder": (bert, lambda: SentenceEncoder(str(bert), device="cpu")),
        "vrank encoder": (bert, lambda: load_encoder(bert)),
        "vrank mlm": (bert, lambda: load_encoder(bert, mlm=True)),
        "clip": (clip, lambda: load_clip(clip, device="cpu")),
        "lm": (lm, lambda: load_lm(lm, device="cpu")),
    }
    for name, (folder, load) in loads.items():
        lacks = r"its weights lack \d+ of the model's parameters \(\S*layers?\.\d+\."
        with pytest.raises(InputError, match=lacks) as exc:
            load()
        assert str(folder) in str(exc.value), name
        one_sentence(str(exc.value))

    no_pooler = make_tiny_encoder(tmp_path / "no-pooler")
    weights = load_file(str(no_pooler / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, str(no_pooler / "model.safetensors"))
    assert BertScore(model=str(no_pooler), layer=1, device="cpu").signature_fields()
    assert SentenceEncoder(str(no_pooler), device="cpu") is not None
    assert load_encoder(no_pooler)[1].config.num_labels == 1


def test_hf_folders_whose_config_does_not_fit_their_weights(tmp_path: Path) -> None:
    """Two more ways a config.json can lie about its weights, each one sentence naming the folder for every
    loader: other shapes (a width changed: transformers' RuntimeError was the catch-all "unexpected ... bug"),
    and a config bomb (a million layers over kilobytes of weights: transformers allocated until memory ran out),
    refused from config.json and the safetensors headers before anything is built."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import resource

    from tiny_models import make_tiny_causal_lm, make_tiny_clip, make_tiny_encoder

    from vistkit.metrics.bertscore import BertScore
    from vistkit.metrics.clipscore import load_clip
    from vistkit.models.checkpoints import declared_values_floor
    from vistkit.models.coherence_head import SentenceEncoder
    from vistkit.models.lm import load_lm
    from vistkit.models.vrank import load_encoder

    def edit(folder: Path, **changes: Any) -> Path:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        for key, value in changes.items():
            part = config
            *path, last = key.split("__")
            for k in path:
                part = part[k]
            part[last] = value
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        return folder

    def loaders(bert: Path, clip: Path, lm: Path) -> dict[str, Callable[[], Any]]:
        return {
            "bertscore": lambda: BertScore(model=str(bert), layer=1, device="cpu"),
            "sentence encoder": lambda: SentenceEncoder(str(bert), device="cpu"),
            "vrank encoder": lambda: load_encoder(bert),
            "clip": lambda: load_clip(clip, device="cpu"),
            "lm": lambda: load_lm(lm, device="cpu"),
        }

    wide = loaders(
        edit(make_tiny_encoder(tmp_path / "bert"), hidden_size=64),
        edit(make_tiny_clip(tmp_path / "clip"), text_config__hidden_size=64),
        edit(make_tiny_causal_lm(tmp_path / "lm"), hidden_size=64),
    )
    for name, load in wide.items():
        with pytest.raises(InputError, match=r"(other shapes than its config\.json declares|cannot load)") as exc:
            load()
        assert "bug" not in str(exc.value), name
        one_sentence(str(exc.value))

    bombs = loaders(
        edit(make_tiny_encoder(tmp_path / "bert-bomb"), num_hidden_layers=1_000_000),
        edit(make_tiny_clip(tmp_path / "clip-bomb"), vision_config__num_hidden_layers=1_000_000),
        edit(make_tiny_causal_lm(tmp_path / "lm-bomb"), num_hidden_layers=1_000_000),
    )
    wide_ffn = edit(make_tiny_causal_lm(tmp_path / "ffn-bomb"), intermediate_size=10**9)
    bombs["lm, a feed-forward width of 10^9"] = lambda: load_lm(wide_ffn, device="cpu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for name, load in bombs.items():
        with pytest.raises(InputError, match=r"its config\.json declares a model of at least [\d,]+ weights") as exc:
            load()
        one_sentence(str(exc.value))
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, name  # KiB: nothing built
    # real configs declare no more than they hold (the bound is a floor): SmolLM2-135M, GPT-2, BERT-base,
    # ALBERT-xxlarge (one shared layer, 128-wide embeddings); the refusal needs 16 times more
    smollm2 = {"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536, "vocab_size": 49152}
    assert declared_values_floor(smollm2) < 134_515_008
    assert declared_values_floor({"n_layer": 12, "n_embd": 768, "vocab_size": 50257, "n_positions": 1024}) < 124_439_808
    bert = {"num_hidden_layers": 12, "hidden_size": 768, "intermediate_size": 3072, "vocab_size": 30522}
    bert.update(position_embedding_type="absolute", max_position_embeddings=512)
    assert declared_values_floor(bert) < 109_482_240
    albert = {"num_hidden_layers": 12, "num_hidden_groups": 1, "hidden_size": 4096, "intermediate_size": 16384}
    albert.update(embedding_size=128, vocab_size=30000)
    assert declared_values_floor(albert) < 222_595_584


def test_a_hub_id_in_the_local_cache_gets_the_checks_of_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model named by hub id resolves to its snapshot in the local Hugging Face cache, which gets the same
    checks before any loader as a folder given by path (it got only the pickle check): here, a config bomb."""
    pytest.importorskip("transformers")
    import huggingface_hub.constants
    from tiny_models import make_tiny_causal_lm

    from vistkit.models.resolve import resolve_model

    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = make_tiny_causal_lm(repo / "snapshots" / ("a" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40, encoding="utf-8")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_model("org/tiny") == snapshot
    config = json.loads((snapshot / "config.json").read_text(encoding="utf-8"))
    (snapshot / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10**6}), encoding="utf-8")
    with pytest.raises(InputError, match=r"its config\.json declares a model of at least"):
        resolve_model("org/tiny")


# --------------------------------------------------------------------------------------------------- CLI runner
_shim = typer.Typer(add_completion=False)


@_shim.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})
def _vistkit(ctx: typer.Context) -> None:
    """The real entry point (`vistkit.cli.main`: error mapping included) under CliRunner."""
    raise SystemExit(main(list(ctx.args)))


RUNNER = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _click_command_built_once() -> Iterator[None]:
    """`main` calls ``app(args=...)``, which rebuilds the click command from the typer app on every call (~75 ms,
    most of a failing run); here it is built once and reused, with `main`'s error mapping untouched."""
    import vistkit.cli as cli_module

    _load_commands()
    command = typer.main.get_command(app)

    def run(*, args: list[str], standalone_mode: bool, **kwargs: Any) -> Any:
        return command.main(args=args, standalone_mode=standalone_mode, **kwargs)

    patch = pytest.MonkeyPatch()
    patch.setattr(cli_module, "app", run)
    yield
    patch.undo()


def cli(*args: str | Path, limit: float = 15.0) -> tuple[int, str, str]:
    """Run ``vistkit ARGS`` in process under a hard timeout; asserts no traceback; (code, stdout, stderr)."""
    with hard_timeout(limit):
        result = RUNNER.invoke(_shim, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        "".join(__import__("traceback").format_exception(result.exception)),
    )
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def cli_fails_cleanly(*args: str | Path) -> str:
    code, out, err = cli(*args)
    assert code in (1, 2), (args, code, out, err)
    lines = message_lines(err)
    if code == 1 and not lines and args[0] == "validate":  # a failed check: the findings are the report
        assert "Error" in out, (args, out)
    elif code == 1:
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        one_sentence(lines[0])
    else:
        assert any("Error" in ln or "error" in ln for ln in lines), (args, err)
    return err


# --------------------------------------------------------------------------------------------------- CLI pickles
def _stories(path: Path) -> Path:
    rows = [
        {"story_id": "s1", "text": "we went to the park . the park was nice . we left .", "photo_ids": ["1", "2"]},
        {"story_id": "s2", "text": "the cake was big . everyone sang . we danced .", "photo_ids": ["3", "4"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["torch-zip", "torch-legacy", "pickle-p2"])
def test_cli_never_runs_a_malicious_checkpoint(tmp_path: Path, marker: Path, kind: str) -> None:
    evil = _write_evil(tmp_path / "EVIL.pth.tar", kind, _payloads(marker)["os.system"])
    hyps = _stories(tmp_path / "h.jsonl")
    glove = tmp_path / "glove.txt"
    glove.write_text("unk 0.1 0.2\n", encoding="utf-8")
    idf = tmp_path / "idf.json"
    idf.write_text('{"park": 1.0}', encoding="utf-8")
    trusted = [
        ("models", "convert", evil, tmp_path / "out1", "--trust-checkpoint", "--kind", "state-dict"),
        ("models", "convert", evil, tmp_path / "out2", "--trust-checkpoint"),
        ("score", hyps, "-m", "rovist-c", "-O", f"rovist-c.model={evil}", "-O", "rovist-c.trust_checkpoint=true"),
        ("score", hyps, "-m", "dhm-c", "-O", f"dhm-c.model={evil}", "-O", "dhm-c.trust_checkpoint=true"),
        ("score", hyps, "-m", "rovist-vg", "-O", f"rovist-vg.checkpoint={evil}", "-O", f"rovist-vg.glove={glove}",
         "-O", f"rovist-vg.idf={idf}", "-O", "rovist-vg.trust_checkpoint=true"),
    ]  # fmt: skip
    for args in trusted:
        err = cli_fails_cleanly(*args)
        assert "`os.system`" in err, (args, err)
    for args in [
        ("models", "convert", evil, tmp_path / "out3", "--kind", "state-dict"),
        ("models", "convert", evil, tmp_path / "out4"),
        ("score", hyps, "-m", "rovist-c", "-O", f"rovist-c.model={evil}"),
    ]:
        err = cli_fails_cleanly(*args)
        assert "trust" in err, (args, err)
    code, out, _ = cli("models", "info", evil, "-f", "json")  # hashes the file; never unpickles it
    assert code == 0 and "pickle checkpoint" in out
    assert not any((tmp_path / f"out{i}").exists() for i in range(1, 5))


def test_cli_never_runs_a_malicious_idf_pickle(tmp_path: Path, marker: Path) -> None:
    """rovist-vg loads its IDF table after the checkpoint: checked through the library with trust."""
    from vistkit.metrics.rovist_vg import load_idf

    p = _write_evil(tmp_path / "idf_dict.pkl", "pickle-p5", _payloads(marker)["subprocess.call"])
    with pytest.raises(InputError, match=r"`subprocess\.call`"):
        load_idf(p, trust=True)


# =========================================================================================== 2. readers
def _csv_text(header: list[str], rows: list[list[str]], delimiter: str = ",") -> str:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _dhm_prefix(folder: Path, *, g: str | None = None, c: str | None = None, r: str | None = None) -> Path:
    """A dHM score prefix ``folder/run`` (``run_G.json``, ``run_C.csv``, ``run_R.csv``); any of the three texts
    may be replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_G.json").write_text(g if g is not None else '{"1": 0.5, "2": 0.25}', encoding="utf-8")
    (folder / "run_C.csv").write_text(c if c is not None else "story_id,score\n1,0.5\n2,0.75\n", encoding="utf-8")
    (folder / "run_R.csv").write_text(r if r is not None else "story_id,score\n1,0.9\n2,0.8\n", encoding="utf-8")
    return folder / "run"


def _dhm_from(part: str) -> Callable[[Path], Any]:
    def read(p: Path) -> Any:
        text = p.read_bytes().decode("utf-8", "surrogateescape")
        prefix = _dhm_prefix(p.parent / f"dhm-{p.stem}", **{part: ""})
        (prefix.parent / f"run_{part.upper()}.{'json' if part == 'g' else 'csv'}").write_bytes(p.read_bytes())
        del text
        return distance.read_scores(prefix)

    return read


def _validate(p: Path) -> Any:
    return validate_submission(p)


def _idf_json(p: Path) -> Any:
    from vistkit.metrics.rovist_vg import load_idf

    return load_idf(p)


def _glove(p: Path) -> Any:
    from vistkit.metrics.rovist_vg import load_glove

    return load_glove(p)


def _bertscore_baseline(p: Path) -> Any:
    from vistkit.metrics.bertscore import read_baseline

    return read_baseline(p, 1)


def _concreteness(p: Path) -> Any:
    from vistkit.metrics.groovist import read_concreteness

    return read_concreteness(p)


def _wordnet_index(p: Path) -> Any:
    from vistkit.metrics.groovist import read_wordnet_lemmas

    return sorted(read_wordnet_lemmas(p))


def _wordnet_exc(p: Path) -> Any:
    from vistkit.metrics.groovist import read_wordnet_exceptions

    return read_wordnet_exceptions(p)


def _sop_config(p: Path) -> Any:
    from vistkit.models.sop import _config_from

    return _config_from(p, {})


# name -> (file suffix, reader, the columns / keys its well-formed input uses)
READERS: dict[str, tuple[str, Callable[[Path], Any], tuple[str, ...]]] = {
    "stories-json": (".json", readers.read_stories,
                     ("annotations", "output_stories", "story_id", "text", "photo_flickr_id",
                      "worker_arranged_photo_order", "album_id", "photo_sequence", "story_text_normalized")),
    "stories-jsonl": (".jsonl", readers.read_stories,
                      ("story_id", "text", "story", "photo_ids", "album_id", "sentences", "system")),
    "stories-csv": (".csv", readers.read_stories,
                    ("story_id", "text", "story", "photo_ids", "album_id", "sentences", "system")),
    "stories-tsv": (".tsv", readers.read_stories, ("story_id", "text", "photo_ids", "sentences")),
    "template": (".json", readers.read_template,
                 ("output_stories", "album_id", "photo_sequence", "story_text_normalized")),
    "pairs": (".csv", human.read_pairs, (*human.VHED_COLUMNS, "pair_id", "label_source")),
    "rankings": (".csv", human.read_rankings, ("task", "worker", "story", "rank", "text", "system", "img_seq")),
    "likert": (".csv", human.read_likert,
               ("system", "model", "item", "story_id", "worker", "text", *human.VIST_ASPECTS)),
    "error-labels": (".csv", human.read_error_labels, ("system", "item", "worker", *human.VRANK_ERRORS)),
    "per-item-scores": (".csv", distance.read_scores, ("id", "groovist", "rovist-c", "rovist-nr", "G", "C", "R")),
    "dhm-G.json": (".json", _dhm_from("g"), ("1", "2", "3")),
    "dhm-C.csv": (".csv", _dhm_from("c"), ("story_id", "score")),
    "dhm-R.csv": (".csv", _dhm_from("r"), ("story_id", "score")),
    "regions": (".csv", images.read_regions, ("image_id", "bbox")),
    "photo-map": (".json", images.load_photo_map, ("s1", "s2")),
    "idf-json": (".json", _idf_json, ("dog", "park")),
    "glove": (".txt", _glove, ("unk", "dog")),
    "bertscore-baseline": (".csv", _bertscore_baseline, ("LAYER", "P", "R", "F")),
    "concreteness": (".csv", _concreteness, ("Word", "Concreteness", "Brysbaert")),
    "wordnet-index": (".txt", _wordnet_index, ("dog", "n", "1", "@", "geese")),
    "wordnet-exc": (".txt", _wordnet_exc, ("geese", "goose", "mice", "mouse")),
    "sop-config": (".json", _sop_config, ("hidden_size", "num_attention_heads", "vocab_size", "model_type")),
    "submission": (".json", _validate,
                   ("team_name", "output_stories", "album_id", "photo_sequence", "story_text_normalized")),
}  # fmt: skip

CELLS = st.sampled_from(
    ["", "nan", "NaN", "inf", "-inf", "1e999", "-1e999", "0", "1", "-1", "2.5", "3", "5", "x", "é", "1-2-3",
     "[0, 0, 10, 10]", "[10, 10, 0, 0]", "whole", "human", "gt", '"', "a,b", "a\nb", "\x00", "0.5", "unk 0.1 0.2"]
)  # fmt: skip
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), CELLS,
)  # fmt: skip


@st.composite
def _csv_doc(draw: st.DrawFn, columns: tuple[str, ...], delimiter: str) -> str:
    names = st.one_of(st.sampled_from(columns), st.text(max_size=4))
    header = draw(st.lists(names, max_size=len(columns) + 1))
    if draw(st.booleans()):  # a well-formed header: every column the reader knows
        header = list(columns)
    cell = st.one_of(CELLS, st.text(max_size=8))
    rows = draw(st.lists(st.lists(cell, max_size=len(header) + 1), max_size=4))
    if delimiter == " ":  # glove: word v1 v2 ...
        return "\n".join(" ".join(r) for r in [header, *rows]) + "\n"
    return _csv_text(header, rows, delimiter)


@st.composite
def _json_doc(draw: st.DrawFn, keys: tuple[str, ...]) -> str:
    key = st.one_of(st.sampled_from(keys), st.text(max_size=5))
    value = st.recursive(
        JSON_SCALARS,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(key, inner, max_size=4)),
        max_leaves=14,
    )
    doc = draw(st.one_of(st.dictionaries(key, value, max_size=5), st.lists(value, max_size=4), value))
    if draw(st.booleans()) and isinstance(doc, list):  # jsonl: one value per line
        return "\n".join(json.dumps(v) for v in doc)
    return json.dumps(doc)


@st.composite
def _damaged(draw: st.DrawFn, text: str) -> bytes:
    """The text's bytes, left alone or damaged as real files are."""
    raw = text.encode("utf-8", "surrogatepass")
    kind = draw(st.sampled_from(["utf8", "bom", "bom-junk", "latin1", "truncated", "nul", "junk", "crlf"]))
    if kind == "bom":
        return b"\xef\xbb\xbf" + raw
    if kind == "bom-junk":
        return b"\xef\xbb\xbf" + draw(st.binary(max_size=40)) + raw
    if kind == "latin1":
        return (text + " café").encode("latin-1", "replace")
    if kind == "truncated":
        whole = (text + " é€😀").encode("utf-8", "surrogatepass")
        return whole[: draw(st.integers(0, len(whole) - 1))]
    if kind == "nul":
        cut = draw(st.integers(0, len(raw)))
        return raw[:cut] + b"\x00" + raw[cut:]
    if kind == "junk":
        return draw(st.binary(max_size=120))
    if kind == "crlf":
        return raw.replace(b"\n", b"\r\n") + b"\r"
    return raw


def _bad_bytes(suffix: str, columns: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    if suffix in (".csv", ".tsv", ".txt"):
        doc = _csv_doc(columns, {".csv": ",", ".tsv": "\t", ".txt": " "}[suffix])
    else:
        doc = _json_doc(columns)
    return st.one_of(st.binary(max_size=200), doc.flatmap(_damaged))


def _write(folder: Path, name: str, suffix: str, data: bytes, container: str) -> Path:
    """``data`` as ``name+suffix``, plain, gzipped, or the one member of a zip (as users hand files over)."""
    folder.mkdir(parents=True, exist_ok=True)
    if container == "gz":
        p = folder / f"{name}{suffix}.gz"
        p.write_bytes(gzip.compress(data))
    elif container == "zip":
        p = folder / f"{name}{suffix}.zip"
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr(f"inner{suffix}", data)
    else:
        p = folder / f"{name}{suffix}"
        p.write_bytes(data)
    return p


_COUNTER = iter(range(10**9))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_fuzz_returns_or_raises_vistkit_error(reader: str, tmp_path: Path) -> None:
    suffix, read, columns = READERS[reader]

    @FUZZ
    @given(data=_bad_bytes(suffix, columns), container=st.sampled_from(["plain", "plain", "plain", "gz", "zip"]))
    def check(data: bytes, container: str) -> None:
        if reader in ("submission",) or reader.startswith("dhm-"):
            container = "plain"  # the validator reads the bytes itself; the dHM helper names plain files
        p = _write(tmp_path, f"f{next(_COUNTER)}", suffix, data, container)
        with hard_timeout(10):
            returns_or_vistkit_error(lambda: read(p))

    check()


@pytest.mark.parametrize(
    ("row", "expected"),
    [("inf,0.5,0.5,0.5", "has no row"), ("-1e999,0.5,0.5,0.5", "has no row"), ("nan,0.5,0.5,0.5", "has no row"),
     ("1.5,0.5,0.5,0.5", "has no row"), ("x,0.5,0.5,0.5", "line 2 holds a value that is not a finite number"),
     ("1,inf,0.5,0.5", "line 2 holds a value that is not a finite number"),
     ("1,0.5,nan,0.5", "line 2 holds a value that is not a finite number"),
     ("1,0.5,0.5,1e999", "line 2 holds a value that is not a finite number"),
     ("1,0.5,0.5,", "line 2 holds a value that is not a finite number")],
)  # fmt: skip
def test_bertscore_baseline_bad_cells(tmp_path: Path, row: str, expected: str) -> None:
    """bert_score's ``LAYER,P,R,F`` file: a non-finite or fractional LAYER matches no layer (an ``inf`` LAYER
    was an OverflowError), a non-finite P/R/F of the layer's row is one clear error; ``2.0`` is layer 2."""
    from vistkit.metrics.bertscore import read_baseline

    p = tmp_path / "baseline.tsv"  # bert_score names its comma-separated baselines .tsv
    p.write_text(f"LAYER,P,R,F\n{row}\n", encoding="utf-8")
    with pytest.raises(InputError, match=expected) as exc:
        read_baseline(p, 1)
    one_sentence(str(exc.value))
    p.write_text(f"LAYER,P,R,F\n{row}\n2.0,0.25,0.5,0.75\n", encoding="utf-8")
    if "has no row" in expected:
        assert read_baseline(p, 2) == (0.25, 0.5, 0.75)


def _bad_files(folder: Path, suffix: str) -> dict[str, Path]:
    """The fixed bad inputs of the brief, as files with ``suffix`` (what a reader or verb expects)."""
    folder.mkdir(parents=True, exist_ok=True)
    junk = bytes(range(256)) * 3
    good_csv = "story_id,text\ns1,café crème\n"
    contents = {
        "empty": b"",
        "random": junk,
        "bom-junk": b"\xef\xbb\xbf" + junk[::-1],
        "latin1": good_csv.encode("latin-1"),
        "truncated-utf8": good_csv.encode("utf-8")[:-8],
        "nul": b"story_id,text\ns1,a\x00b\n",
        "huge-field": b"story_id,text\ns1," + b"x" * 200_000 + b"\n",
        "huge-quoted": b'story_id,text\ns1,"' + b"y" * 200_000 + b"\n",
        "wrong-columns": b"foo,bar\n1,2\n",
        "nan-inf": _csv_text(
            ["sent1", "sent2", "label", "avg_rank_base", "avg_rank_comp", "agreement", "order", "rank_norm",
             "task", "worker", "story", "rank", "system", "item", "id", "groovist", "rovist-c", "rovist-nr",
             "image_id", "bbox", "text", "story_id", "focused", "Gram", "score", "LAYER", "P", "R", "F", "Word",
             "Brysbaert"],
            [["a", "b", "nan", "inf", "-inf", "nan", "inf", "nan", "t", "w", "s", "nan", "A", "1", "1", "nan",
              "inf", "-inf", "1", "[0, 0, inf, inf]", "a b .", "1", "inf", "nan", "nan", "inf", "0.5", "0.5", "0.5",
              "dog", "inf"],
             ["c", "d", "1e999", "1", "2", "inf", "-inf", "inf", "t", "w", "s2", "inf", "A", "1", "2", "inf",
              "nan", "1e999", "1", "[nan, 0, 1, 1]", "c d .", "2", "nan", "inf", "inf", "1", "inf", "nan", "1e999",
              "cat", "nan"]],
        ).encode(),
        "json-nan": b'{"1": NaN, "2": Infinity, "output_stories": NaN}',
        "json-deep": b"[" * 100_000,
        "json-huge-int": b'{"1": 1' + b"0" * 400 + b', "output_stories": [{"photo_sequence": [1' + b"0" * 400 + b"]}]}",
        "json-long-int": b'{"1": 1' + b"0" * 5000 + b"}",
        "zip-corrupt": b"PK\x03\x04" + junk,
        "gz-corrupt": b"\x1f\x8b\x08\x00" + junk,
    }  # fmt: skip
    out = {name: _write(folder, name, suffix, data, "plain") for name, data in contents.items()}
    out["gz-corrupt"] = out["gz-corrupt"].rename(out["gz-corrupt"].with_name(f"gz-corrupt{suffix}.gz"))
    out["zip-corrupt"] = out["zip-corrupt"].rename(out["zip-corrupt"].with_name(f"zip-corrupt{suffix}.zip"))
    out["gz-latin1"] = _write(folder, "gz-latin1", suffix, contents["latin1"], "gz")
    out["zip-random"] = _write(folder, "zip-random", suffix, junk, "zip")
    (folder / f"folder{suffix}").mkdir()
    out["folder"] = folder / f"folder{suffix}"
    out["missing"] = folder / f"missing{suffix}"
    for name, members in (
        ("zip-0-members", {}),
        ("zip-2-members", {f"a{suffix}": b"x", f"b{suffix}": b"y"}),
        ("zip-dotdot", {f"../evil{suffix}": b"x"}),
        ("zip-absolute", {f"/etc/evil{suffix}": b"x"}),
    ):
        p = folder / f"{name}{suffix}.zip"
        with zipfile.ZipFile(p, "w") as zf:
            for member, data in members.items():
                zf.writestr(member, data)
        out[name] = p
    return out


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_on_every_fixed_bad_file(reader: str, tmp_path: Path) -> None:
    suffix, read, _ = READERS[reader]
    for name, p in _bad_files(tmp_path / "bad", suffix).items():
        plain_only = reader.startswith("dhm-") or reader == "submission"  # no .gz/.zip for these
        if (reader.startswith("dhm-") and name in ("folder", "missing")) or (
            plain_only and name.startswith(("zip", "gz"))
        ):
            continue
        with hard_timeout(10):
            try:
                read(p)
            except VistkitError as exc:
                one_sentence(str(exc))
            except Exception as exc:  # pragma: no cover - the failure message
                raise AssertionError(f"{reader} on {name}: {type(exc).__name__}: {exc}") from exc


# =========================================================================================== 2b. every CLI verb
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "meta"

# verbs that serve or wait (never run here: a previous attempt at this file hung the suite)
BLOCKING = {"studio serve": "serves HTTP until stopped", "studio demo": "builds a study and can serve it (--serve)"}
# verbs that read no user file (their options are names and formats)
NO_FILE = {"metrics", "formats", "demo", "models list", "models prepare-lm"}


@pytest.fixture
def good(tmp_path: Path) -> dict[str, Path]:
    """Well-formed companions for the argument not under test."""
    torch = pytest.importorskip("torch")
    g = {"stories": _stories(tmp_path / "good-stories.jsonl")}
    sub = {"team_name": "t", "output_stories": [
        {"album_id": "a", "photo_sequence": ["1", "2"], "story_text_normalized": "a b ."}]}  # fmt: skip
    g["submission"] = tmp_path / "good-sub.json"
    g["submission"].write_text(json.dumps(sub), encoding="utf-8")
    fixtures = (("pairs", "vhed_small.csv"), ("likert", "likert_small.csv"), ("labels", "errors_small.csv"))
    for name, fixture in fixtures:
        g[name] = tmp_path / fixture
        g[name].write_bytes((FIXTURES / fixture).read_bytes())
    g["per_item"] = tmp_path / "good-per-item.csv"
    g["per_item"].write_text("id,groovist,rovist-c,rovist-nr\ns1,0.5,0.5,0.9\n", encoding="utf-8")
    g["ckpt"] = tmp_path / "good.pth.tar"
    torch.save({"model": {"w": torch.zeros(2)}}, g["ckpt"])
    g["out"] = tmp_path / "out"
    return g


def _in_folder(bad: Path, name: str) -> Path | None:
    """A model folder whose ``name`` (config.json, or vistkit_model.json of a converted folder) holds the bad
    bytes (None: no bytes to copy)."""
    if not bad.is_file():
        return None
    folder = bad.parent / f"model-{name}-{bad.name}"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(bad.read_bytes())
    if name == "vistkit_model.json":
        (folder / "model.safetensors").write_bytes(b"")
    return folder


Slot = tuple[str, Callable[[Path, dict[str, Path]], list[Any] | None]]

# verb -> slots: (suffix of the bad file, argv with the bad file in one place); cheap metrics only
VERB_SLOTS: dict[str, list[Slot]] = {
    "score": [
        (".jsonl", lambda b, g: ["score", b, "-m", "rovist-nr"]),
        (".json", lambda b, g: ["score", g["stories"], "-m", "bleu-4", "-r", b]),
        (".json", lambda b, g: ["score", g["stories"], "-m", "rovist-nr", "--template", b]),
    ],
    "compare": [
        (".csv", lambda b, g: ["compare", b, g["stories"], "-m", "rovist-nr", "--n-samples", "100"]),
        (".json", lambda b, g: ["compare", g["stories"], g["stories"], "-m", "bleu-4", "-r", b, "--n-samples",
                                "100"]),
    ],
    "validate": [
        (".json", lambda b, g: ["validate", b]),
        (".json", lambda b, g: ["validate", g["submission"], "--template", b]),
        (".json", lambda b, g: ["validate", g["submission"], "-r", b]),
    ],
    "distance": [
        (".csv", lambda b, g: ["distance", "--human", b, "--model", g["per_item"]]),
        (".jsonl", lambda b, g: ["distance", "--human-stories", b, "--model-stories", g["stories"], "--dimensions",
                                 "R"]),
    ],
    **{
        f"meta {verb}": [
            (".csv", lambda b, g, verb=verb, m=metrics: ["meta", verb, b, "-m", m]),
            (".json", lambda b, g, verb=verb, m=metrics: ["meta", verb, g["pairs"], "-m", m, "-r", b]),
        ]
        for verb, metrics in (("pairs", "rovist-nr"), ("gap", "rovist-nr"), ("beats-ref", "rovist-nr"),
                              ("compare", "rovist-nr,rovist-nr-jaccard"))
    },
    "meta correlate": [
        (".csv", lambda b, g: ["meta", "correlate", b, "-m", "rovist-nr", "-s", f"human={g['stories']}"]),
        (".jsonl", lambda b, g: ["meta", "correlate", g["likert"], "-m", "rovist-nr", "-s", f"human={b}"]),
    ],
    "meta errors": [
        (".csv", lambda b, g: ["meta", "errors", b, "-m", "rovist-nr", "-s", f"human={g['stories']}"]),
        (".jsonl", lambda b, g: ["meta", "errors", g["labels"], "-m", "rovist-nr", "-s", f"human={b}"]),
    ],
    "meta build-pairs": [
        (".jsonl", lambda b, g: ["meta", "build-pairs", "-r", b, "--machine", f"m={g['stories']}", "-o",
                                 g["out"] / "p.csv"]),
        (".json", lambda b, g: ["meta", "build-pairs", "-r", g["stories"], "--machine", f"m={b}", "-o",
                                g["out"] / "p.csv"]),
    ],
    "meta rankings-to-pairs": [(".csv", lambda b, g: ["meta", "rankings-to-pairs", b, "-o", g["out"] / "r.csv"])],
    "models info": [
        (".json", lambda b, g: (f := _in_folder(b, "config.json")) and ["models", "info", f]),
        (".json", lambda b, g: (f := _in_folder(b, "vistkit_model.json")) and ["models", "info", f]),
    ],
    "models convert": [
        (".pth.tar", lambda b, g: ["models", "convert", b, g["out"] / "c1", "--trust-checkpoint", "--kind",
                                   "state-dict"]),
        (".pth.tar", lambda b, g: ["models", "convert", b, g["out"] / "c2", "--trust-checkpoint"]),
        (".json", lambda b, g: ["models", "convert", g["ckpt"], g["out"] / "c3", "--trust-checkpoint", "--kind",
                                "state-dict", "--config", b]),
        (".json", lambda b, g: ["models", "convert", g["ckpt"], g["out"] / "c4", "--trust-checkpoint", "--config",
                                b]),
    ],
    "vrank train": [
        (".csv", lambda b, g: ["vrank", "train", b, "--output", g["out"] / "v", "--encoder", g["out"] / "no-encoder"]),
        (".jsonl", lambda b, g: ["vrank", "train", g["pairs"], "--output", g["out"] / "v", "--encoder",
                                 g["out"] / "no-encoder", "--mlm-stories", b]),
    ],
    "vrank predict": [(".csv", lambda b, g: ["vrank", "predict", b, "--model", g["out"] / "no-model"])],
    "studio init": [
        (".jsonl", lambda b, g: ["studio", "init", g["out"] / "s.db", "--task", "rank", "-s", f"a={b}", "-s",
                                 f"b={g['stories']}"]),
    ],
    **{
        f"studio {verb}": [(".db", lambda b, g, extra=extra, verb=verb: [
            "studio", verb, b, *extra, *(["-o", g["out"] / "x.csv"] if verb == "export" else [])])]
        for verb, extra in (("invite", ["--n", "1"]), ("status", []), ("export", ["-f", "pairs"]),
                            ("report", ["-m", "rovist-nr"]))
    },
}  # fmt: skip


CORE_BAD = {"empty", "random", "latin1", "nan-inf", "json-nan", "folder", "missing", "zip-2-members", "zip-dotdot"}


def test_every_cli_verb_is_covered_or_excluded_by_name() -> None:
    verbs = set(cli_verbs())
    assert verbs == set(VERB_SLOTS) | set(BLOCKING) | NO_FILE, (
        "a new verb: add it to VERB_SLOTS (it reads a file), NO_FILE or BLOCKING",
        verbs ^ (set(VERB_SLOTS) | set(BLOCKING) | NO_FILE),
    )


@pytest.mark.parametrize("verb", sorted(VERB_SLOTS))
def test_cli_verb_on_bad_files(verb: str, tmp_path: Path, good: dict[str, Path]) -> None:
    """Each bad file in each file argument of the verb: exit 1 or 2, one line, no traceback."""
    good["out"].mkdir()
    for n, (suffix, argv) in enumerate(VERB_SLOTS[verb]):
        for name, bad in _bad_files(tmp_path / f"bad{n}", suffix).items():
            if n > 0 and name not in CORE_BAD:  # every bad file in the first slot, the main kinds elsewhere
                continue
            if name in ("json-nan", "json-huge-int") and verb.startswith("models"):  # readable JSON objects
                continue
            args = argv(bad, good)
            if args is None:
                continue
            try:
                cli_fails_cleanly(*args)
            except AssertionError as exc:
                raise AssertionError(f"{verb} with {name} in slot {n}: {exc}") from None


# =========================================================================================== 2c. leftovers
def _storylets_zip(tmp_path: Path) -> tuple[Path, Path]:
    """PR-VIST-like storylets (``text`` and ``predicted_story``) for items i1, i2: a plain file and a zip that holds
    it as ``m.json`` next to another member."""
    recs = [
        {"story_id": sid, "photo_flickr_id": f"{sid}{k}", "worker_arranged_photo_order": k, "album_id": "al",
         "text": f"{sid} {word} number {k} was fine .", "predicted_story": "the dog . the dog . the dog ."}
        for sid in ("i1", "i2") for k, word in enumerate(("park", "lake", "cake"))
    ]  # fmt: skip
    plain = tmp_path / "m.json"
    plain.write_text(json.dumps(recs), encoding="utf-8")
    archive = tmp_path / "A.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("m.json", plain.read_bytes())
        zf.writestr("other.jsonl", b'{"story_id": "i1", "text": "x ."}\n')
    return plain, archive


def test_stories_option_takes_zip_members_and_fields(tmp_path: Path) -> None:
    """``-s NAME=FILE:FIELD`` (studio init, meta correlate/errors, build-pairs) and ``ARCHIVE.zip:MEMBER``: FIELD
    is split off only when it is a plain name without a file suffix and what precedes it is a file."""
    from vistkit.commands.meta.common import _parse_story_files
    from vistkit.commands.studio import _parse_stories
    from vistkit.data.readers import split_field

    plain, archive = _storylets_zip(tmp_path)
    odd = tmp_path / "odd.json:predicted_story"  # a file whose name looks like FILE:FIELD is never split
    odd.write_bytes(plain.read_bytes())
    cases = {
        f"{archive}:m.json": (f"{archive}:m.json", "text"),  # the member, not FILE A.zip with FIELD m.json
        f"{archive}:other.jsonl": (f"{archive}:other.jsonl", "text"),
        f"{archive}:m.json:predicted_story": (f"{archive}:m.json", "predicted_story"),
        f"{plain}:predicted_story": (str(plain), "predicted_story"),
        f"{plain}:story-v2.1": (str(plain), "story-v2.1"),
        str(plain): (str(plain), "text"),
        str(odd): (str(odd), "text"),
        f"{tmp_path}/missing.json:predicted_story": (f"{tmp_path}/missing.json:predicted_story", "text"),
        f"{plain}:dir/x": (f"{plain}:dir/x", "text"),
        f"{plain}:m.csv": (f"{plain}:m.csv", "text"),
    }
    for text, expected in cases.items():
        assert split_field(text) == expected, text
        assert _parse_story_files([f"s={text}"]) == {"s": (Path(expected[0]), expected[1])}, text
    assert _parse_stories([f"a={archive}:m.json:predicted_story"]) == {
        "a": (Path(f"{archive}:m.json"), "predicted_story")
    }
    with pytest.raises(InputError, match="no file"):
        _parse_stories([f"a={tmp_path}/missing.json:predicted_story"])

    likert = tmp_path / "likert.csv"
    likert.write_bytes((FIXTURES / "likert_small.csv").read_bytes())
    runs = {}
    for label, files in {
        "zip-text": f"{archive}:m.json", "plain-text": str(plain),
        "zip-field": f"{archive}:m.json:predicted_story", "plain-field": f"{plain}:predicted_story",
    }.items():  # fmt: skip
        code, out, err = cli("meta", "correlate", likert, "-m", "rovist-nr", "-s", f"m1={files}", "-f", "json")
        assert code == 0, (label, err)
        runs[label] = json.loads(out)
    assert runs["zip-text"] == runs["plain-text"] and runs["zip-field"] == runs["plain-field"]
    assert runs["zip-text"] != runs["zip-field"]  # the field was read: predicted_story is repetitive

    code, _, err = cli("studio", "init", tmp_path / "s.db", "--task", "rank", "-s",
                       f"a={archive}:m.json:predicted_story", "-s", f"b={archive}:m.json")  # fmt: skip
    assert code == 0, err


def test_empty_file_is_refused_as_a_study_without_writing_to_it(tmp_path: Path) -> None:
    """A 0-byte file given as a study database: one sentence, and the file stays byte-identical (SQLite used to
    write its header and the migrations' tables into it before the refusal)."""
    pytest.importorskip("sqlalchemy")
    from vistkit.studio.db import open_study

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file, not a study") as exc:
        open_study(empty)
    one_sentence(str(exc.value))
    for args in (
        ("status",),
        ("invite", "--n", "1"),
        ("export", "-f", "pairs", "-o", tmp_path / "x.csv"),
        ("report", "-m", "rovist-nr"),
    ):
        err = cli_fails_cleanly("studio", args[0], empty, *args[1:])
        assert "empty file" in err, (args, err)
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]  # no -wal
    stories = _stories(tmp_path / "a.jsonl")
    err = cli_fails_cleanly("studio", "init", empty, "--task", "rank", "-s", f"a={stories}", "-s", f"b={stories}")
    assert "holds no finished study" in err and empty.read_bytes() == b""  # init never overwrites it either


def test_another_programs_database_is_refused_as_a_study_without_writing_to_it(tmp_path: Path) -> None:
    """An SQLite database that is not a vistkit study (another program's), and a file that is no database at all:
    one sentence each, and both files stay byte-identical (no tables, no WAL switch, no -wal file)."""
    pytest.importorskip("sqlalchemy")
    import sqlite3

    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes (text) VALUES ('keep me')")
    con.commit()
    con.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100)
    before = {p: p.read_bytes() for p in (other, text)}
    for path, words in ((other, "not a vistkit study"), (text, "cannot open study")):
        for args in (("status",), ("invite", "--n", "1"), ("report", "-m", "rovist-nr")):
            err = cli_fails_cleanly("studio", args[0], path, *args[1:])
            assert words in err, (path, args, err)
        assert path.read_bytes() == before[path]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "other.db"]


def test_python_dash_m_behaves_like_the_vistkit_command(tmp_path: Path) -> None:
    """``python -m vistkit.cli ...`` ran cli.py as ``__main__``, a second copy of the module whose app had no verbs
    (the verbs register on `vistkit.cli.app`): "No such command". It and ``python -m vistkit ...`` now give what
    the entry point gives (`main`, run in process here): same exit code, stdout and stderr, usage line included."""
    import sys

    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    expected = {args: cli(*args) for args in (("formats", "-f", "json"), ("nonsense",))}
    assert expected[("formats", "-f", "json")][0] == 0 and "Usage: vistkit " in expected[("nonsense",)][2]
    procs = {
        (module, args): subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        for module in ("vistkit.cli", "vistkit") for args in expected
    }  # fmt: skip
    try:
        for (module, args), proc in procs.items():
            out, err = proc.communicate(timeout=60)
            assert (proc.returncode, out, err) == expected[args], (module, args)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# =========================================================================================== 3. BOM and zip rules
GOOD_INPUTS: dict[str, str] = {
    "stories-json": json.dumps({"s1": "we went to the park .", "s2": "a café ."}),
    "stories-jsonl": '{"story_id": "s1", "text": "a café ."}\n{"story_id": "s2", "text": "b ."}\n',
    "stories-csv": "story_id,text,photo_ids\ns1,a café .,1-2\ns2,b .,3-4\n",
    "stories-tsv": "story_id\ttext\ns1\ta café .\n",
    "template": json.dumps({"output_stories": [
        {"album_id": "a", "photo_sequence": ["1", "2"], "story_text_normalized": "x ."}]}),
    "pairs": (FIXTURES / "vhed_small.csv").read_text(encoding="utf-8"),
    "rankings": (FIXTURES / "rankings_small.csv").read_text(encoding="utf-8"),
    "likert": (FIXTURES / "likert_small.csv").read_text(encoding="utf-8"),
    "error-labels": (FIXTURES / "errors_small.csv").read_text(encoding="utf-8"),
    "per-item-scores": "id,groovist,rovist-c,rovist-nr\ns1,0.5,0.25,0.9\ns2,,0.5,1.0\n",
    "dhm-G.json": '{"1": 0.5, "2": 0.25}',
    "dhm-C.csv": "story_id,score\n1,0.5\n2,0.75\n",
    "dhm-R.csv": "story_id,score\n1,0.9\n2,nan\n",
    "regions": "image_id,bbox\n1,\"[0, 0, 10, 10]\"\n1,\"[5, 5, 20, 30]\"\n2,\"[1, 2, 3, 4]\"\n",
    "photo-map": '{"s1": ["1", "2"], "s2": [3]}',
    "idf-json": '{"dog": 2.5, "park": 1}',
    "glove": "unk 0.1 0.2\ndog 0.5 -0.5\n",
    "bertscore-baseline": "LAYER,P,R,F\n0,0.9,0.9,0.9\n1,0.8,0.7,0.75\n",
    "concreteness": "Word,Concreteness,Brysbaert\ndog,4.85,4.85\ncafé,4.1,\nidea,1.61,1.61\n",
    "wordnet-index": "  1 This software and database is being provided\ndog n 7 5 @ ~ #m 1 0 02084071\ngeese n 1\n",
    "wordnet-exc": "geese goose\nmice mouse\nbureaux bureau\n",
    "sop-config": json.dumps({"model_type": "albert", "hidden_size": 8, "num_attention_heads": 2}),
    "submission": GOOD_SUBMISSION if (GOOD_SUBMISSION := json.dumps({"team_name": "t", "output_stories": [
        {"album_id": "a", "photo_sequence": ["1", "2"], "story_text_normalized": "x ."}]})) else "",
}  # fmt: skip
ZIP_READERS = sorted(r for r in READERS if not r.startswith("dhm-") and r != "submission")


def _comparable(value: Any) -> Any:
    """What a reader returned, without the path it came from (story sets record their source)."""
    if isinstance(value, readers.StorySet):
        return [(s.story_id, s.text, s.photo_ids, s.sentences, s.system) for s in value]
    if hasattr(value, "findings"):
        return sorted(str(f) for f in value.findings if "BOM" not in str(f) and "byte-order" not in str(f))
    text = repr(value)
    return text if "array(" not in text else repr(getattr(value, "__dict__", value))


def test_good_inputs_cover_every_reader() -> None:
    assert set(GOOD_INPUTS) == set(READERS)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_utf8_bom_is_accepted_by_every_reader(reader: str, tmp_path: Path) -> None:
    suffix, read, _ = READERS[reader]
    text = GOOD_INPUTS[reader]
    plain = _write(tmp_path / "plain", "in", suffix, text.encode("utf-8"), "plain")
    bom = _write(tmp_path / "bom", "in", suffix, b"\xef\xbb\xbf" + text.encode("utf-8"), "plain")
    expected = _comparable(read(plain))
    assert _comparable(read(bom)) == expected
    if reader not in ZIP_READERS:
        return
    for container in ("gz", "zip"):  # the BOM inside a container too
        p = _write(tmp_path / container, "in", suffix, b"\xef\xbb\xbf" + text.encode("utf-8"), container)
        assert _comparable(read(p)) == expected, container


@pytest.mark.parametrize("reader", ZIP_READERS)
def test_zip_rules_for_every_reader(reader: str, tmp_path: Path) -> None:
    """One member: read; several: refused naming them; ``ARCHIVE.zip:MEMBER`` chooses; a missing member and
    ``../`` or absolute member names are refused."""
    suffix, read, _ = READERS[reader]
    data = GOOD_INPUTS[reader].encode("utf-8")
    expected = _comparable(read(_write(tmp_path, "plain", suffix, data, "plain")))
    assert _comparable(read(_write(tmp_path, "one", suffix, data, "zip"))) == expected

    several = tmp_path / f"several{suffix}.zip"
    with zipfile.ZipFile(several, "w") as zf:
        zf.writestr(f"first{suffix}", data)
        zf.writestr(f"dir/second{suffix}", b"junk \xff")
        zf.writestr("__MACOSX/._first", b"resource fork")  # macOS litter is not a member
    with pytest.raises(InputError) as exc:
        read(several)
    one_sentence(str(exc.value))
    assert f"first{suffix}" in str(exc.value) and f"dir/second{suffix}" in str(exc.value)
    assert "__MACOSX" not in str(exc.value) and f"{several.name}:MEMBER" in str(exc.value)
    assert _comparable(read(Path(f"{several}:first{suffix}"))) == expected
    with pytest.raises(VistkitError):
        read(Path(f"{several}:dir/second{suffix}"))  # chosen, read, and not valid UTF-8: one clear error
    with pytest.raises(InputError, match="has no member 'absent"):
        read(Path(f"{several}:absent{suffix}"))

    for bad_name in (f"../evil{suffix}", f"/abs/evil{suffix}", f"a/../../evil{suffix}"):
        unsafe = tmp_path / f"unsafe{suffix}.zip"
        with zipfile.ZipFile(unsafe, "w") as zf:
            zf.writestr(bad_name, data)
        with pytest.raises(InputError, match="unsafe") as exc:
            read(unsafe)
        one_sentence(str(exc.value))
        with pytest.raises(InputError, match="unsafe"):
            read(Path(f"{unsafe}:{bad_name}"))
        unsafe.unlink()

    empty = tmp_path / f"empty{suffix}.zip"
    with zipfile.ZipFile(empty, "w"):
        pass
    with pytest.raises(InputError, match="holds no file"):
        read(empty)


def test_formats_documents_every_input_kind_bom_and_zip_rules() -> None:
    code, out, err = cli("formats")
    assert code == 0, err
    for kind in ("sis", "storylets", "challenge", "story-dict", "tapm", "arel", "jsonl", "csv", "pairs",
                 "rankings", "likert", "error labels", "per-item scores", "dHM scores", "regions", "photo map",
                 "IDF"):  # fmt: skip
        assert kind in out, kind
    flat = " ".join(out.split())
    assert "BOM" in flat and "ARCHIVE.zip:MEMBER" in flat and "several" in flat and ".." in flat
    code, out, _ = cli("formats", "-f", "json")
    assert code == 0 and json.loads(out)


def test_an_unforeseen_exception_is_one_sentence_unless_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (an exception vistkit did not foresee) still ends in one `error:` line and exit code 1, saying it is a
    bug and how to see where; with VISTKIT_DEBUG=1 (as in the test suite) it propagates, so tests catch bugs."""
    import vistkit.commands.formats as formats_cmd

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(formats_cmd, "render_table", broken, raising=True)
    monkeypatch.delenv("VISTKIT_DEBUG", raising=False)
    err = cli_fails_cleanly("formats")
    assert "unexpected ZeroDivisionError: division by zero - this is a bug in vistkit" in err
    assert "VISTKIT_DEBUG=1" in err and "second line" not in err
    monkeypatch.setenv("VISTKIT_DEBUG", "1")
    with hard_timeout(15.0):
        result = RUNNER.invoke(_shim, ["formats"])
    assert isinstance(result.exception, ZeroDivisionError)


# ------------------------------------------------------------------------------------- the other probes
needs_java = pytest.mark.skipif(__import__("shutil").which("java") is None, reason="needs Java (METEOR)")


@needs_java
def test_meteor_helper_killed_mid_run_is_one_sentence_then_recovers() -> None:
    """The warm METEOR JVM killed between calls: the next call starts a fresh one (same scores); killed while a
    call talks to it: one sentence (MissingDependencyError), never a traceback or a hang."""
    from vistkit.errors import MissingDependencyError
    from vistkit.models.java import MeteorConfig, meteor_server

    cfg = MeteorConfig(task="hter", norm=False)
    tests, refs = ["the dog ran to the park ."] * 3, ["a dog runs in the park .", "the cat sat .", "dogs run ."]
    with hard_timeout(120):
        server = meteor_server()
        want = server.pair_scores(cfg, tests, refs)
        if not server.uses_helper:
            pytest.skip("no javac: the jar's own stdio protocol is used")
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait()
        with pytest.raises(MissingDependencyError, match="stopped unexpectedly") as exc:
            server.pair_scores(cfg, ["a new text the helper must score ."], ["another reference ."])
        one_sentence(str(exc.value))
        fresh = meteor_server()
        assert fresh is not server and fresh.pair_scores(cfg, tests, refs) == want


@needs_java
def test_three_processes_racing_on_a_cold_helper_cache(tmp_path: Path) -> None:
    """Three processes compile the METEOR helper into one empty cache at once: all get the same class folder, it
    works, and no temporary folder is left behind."""
    import sys

    code = "from vistkit.models.java import _helper_classpath, require_java\nprint(_helper_classpath(require_java()))\n"
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "VISTKIT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(src)}
    pipe = subprocess.PIPE
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=pipe, stderr=pipe, text=True, env=env) for _ in range(3)
    ]
    try:
        outs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outs]
    paths = {o.strip() for o, _ in outs}
    if paths == {"None"}:
        pytest.skip("no javac here")
    (folder,) = paths
    assert (Path(folder) / "VistkitMeteor.class").is_file()
    assert [p.name for p in (tmp_path / "cache" / "java").iterdir()] == [Path(folder).name]  # no .tmp left


@pytest.mark.hard_limit(600)
def test_ten_thousand_word_story_is_scored_or_excluded_never_a_traceback(tmp_path: Path) -> None:
    """A 10,000-word story (and its references) through the CLI with n-gram, redundancy and learned metrics:
    exit 0 and finite scores; where a model cannot take it, an exclusion with the reason, not a crash. (The
    ranker's LM reads the longest run of its sentences that fits the LM's 8,192 tokens: about 40 s of one
    story on an idle 2-core CPU, minutes on a loaded one.)"""
    words = "the family went to the beach and we saw a big boat on the water".split()
    long_text = " ".join(words[i % len(words)] + (" ." if i % 20 == 19 else "") for i in range(10_000))
    hyp = tmp_path / "hyp.jsonl"
    ref = tmp_path / "ref.jsonl"
    photos = ["1", "2", "3", "4", "5"]
    hyp.write_text(json.dumps({"story_id": "s1", "text": long_text, "photo_ids": photos}) + "\n")
    ref.write_text(json.dumps({"story_id": "r1", "text": long_text[::-1], "photo_ids": photos}) + "\n")
    metrics = ["bleu-4", "rouge-l", "rovist-nr", "story-ranker", "coherence"]
    code, out, err = cli("score", hyp, "-r", ref, "-m", ",".join(metrics), "--format", "json", limit=540)
    assert code == 0, err
    result = json.loads(out)
    assert all(math.isfinite(result["scores"][m]) for m in metrics), result["scores"]
    assert result["n"] == dict.fromkeys(metrics, 1) and result["excluded"] == {}
    assert result["scores"]["story-ranker"] < 1e-6  # a 13-word loop repeated: the ranker is sure it is bad
