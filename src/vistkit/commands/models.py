"""``vistkit models list|info|convert``: the models vistkit knows, what a model folder holds, safe
conversion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo, writes_output
from vistkit.report.tables import OutputFormat, dumps_json, render_table

models_app = typer.Typer(help="List, inspect and convert models (offline defaults, official checkpoints).")
app.add_typer(models_app, name="models")


def _json_object(data: object, path: Path) -> dict[str, Any]:
    """``data`` if it is a JSON object, else one clear error naming ``path``."""
    from vistkit.errors import InputError

    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


@models_app.command("list")
def list_models(fmt: OutputFormat = FormatOption) -> None:
    """List the packaged offline models and whether each is installed."""
    from vistkit.errors import MissingDependencyError
    from vistkit.models.resolve import PACKAGED_MODELS

    rows = []
    for name, m in sorted(PACKAGED_MODELS.items()):
        try:
            path = m.path()
        except MissingDependencyError:
            where = f"not installed (pip install {m.pip_name})"
        else:
            where = str(path)
            if (problem := _packaged_problem(path)) is not None:
                where = f"damaged: {problem}; reinstall it: pip install --force-reinstall {m.pip_name}"
        rows.append([name, m.description, m.hub_id if m.hub_id != name else "none (vistkit's own)", where])
    from vistkit.models.lm import lm_list_row

    rows.append(lm_list_row())
    echo(render_table(["model", "what it is", "stands in for", "location"], rows, fmt, title="models"))


def _packaged_problem(path: Path) -> str | None:
    """What is wrong with a packaged model's folder, cheaply (no model file holds it; a safetensors file whose header
    does not match its size: truncated), or None; its listed path would say it is installed."""
    from vistkit.errors import InputError
    from vistkit.models.checkpoints import check_safetensors

    if not path.is_dir():
        return None
    weights = sorted(path.glob("*.safetensors"))
    if not weights and not (path / "config.json").is_file():
        return f"{path} holds no model (no config.json and no .safetensors weights)"
    for f in weights:
        try:
            check_safetensors(f)
        except InputError as exc:
            return str(exc).removesuffix("; convert or download it again")
    return None


@models_app.command("prepare-lm")
def prepare_lm() -> None:
    """Convert the packaged language model (SmolLM2-135M) once into the user cache and check its hash."""
    from vistkit.models.lm import convert_packaged, verify_converted

    folder = convert_packaged(repair=True)  # a damaged conversion (a file changed or missing) is converted again
    verify_converted(folder)
    echo(f"language model ready: {folder}")


def _lm_info(fmt: OutputFormat) -> None:
    """`models info smollm2-135m`: the packaged GGUF, its conversion in the cache and the weights' hash."""
    from vistkit.errors import MissingDependencyError
    from vistkit.models.lm import DEFAULT_LM, _records_every_file, resolve_lm, verify_converted

    src = resolve_lm(DEFAULT_LM)
    if src.state == "missing":
        raise MissingDependencyError(src.reason)
    state = src.state if src.state == "converted" else "not converted yet: run `vistkit models prepare-lm`"
    older = src.state == "converted" and src.folder is not None and not _records_every_file(src.folder)
    if older:  # its next load converts it again (its record lacks the config's and tokenizer's hashes)
        state = "converted by an older vistkit: converted again on first use or by `vistkit models prepare-lm`"
    data: dict[str, object] = {
        "model": DEFAULT_LM,
        "kind": "causal LM (packaged GGUF, converted once to safetensors)",
        "source": str(src.source),
        "source_sha256": src.source_sha256,
        "path": str(src.folder),
        "state": state,
    }
    if src.state == "converted" and src.folder is not None and not older:
        meta = verify_converted(src.folder)  # refuses a tampered cache in one sentence
        weights = meta.get("weights", {})
        digest = next(iter(weights.values()), "") if isinstance(weights, dict) else ""
        data.update(fingerprint=str(digest)[:12], weights_sha256=digest)
    if fmt is OutputFormat.JSON:
        echo(dumps_json(data))
    else:
        echo(render_table(["field", "value"], [[k, str(v)] for k, v in data.items()], fmt, title="model"))


@models_app.command("info")
def info(
    model: str = typer.Argument(..., help="A model path, packaged name or hub id."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Show where a model resolves to, its kind, and its fingerprint (the hash used in metric signatures; a causal
    LM folder also its lm_signature, the lm: field of the lm-* metrics)."""
    from vistkit.data.readers import load_json
    from vistkit.models.checkpoints import (
        META_FILE,
        WEIGHTS_FILE,
        check_safetensors,
        is_converted,
        is_legacy_checkpoint,
        model_fingerprint,
        weights_sha256,
    )
    from vistkit.models.lm import DEFAULT_LM
    from vistkit.models.resolve import resolve_model

    if model == DEFAULT_LM:  # the packaged LM lives in the user cache once converted (`models prepare-lm`)
        _lm_info(fmt)
        return
    path = resolve_model(model)
    data: dict[str, object] = {"model": model, "path": str(path), "fingerprint": model_fingerprint(path)}
    if is_converted(path):
        meta = _json_object(load_json(path / META_FILE), path / META_FILE)
        check_safetensors(path / WEIGHTS_FILE)
        data.update(
            kind=meta.get("kind"),
            source=meta.get("source"),
            format=meta.get("format"),
            weights_sha256=weights_sha256(path, meta),  # checked against the one recorded at conversion
        )
    elif is_legacy_checkpoint(path):
        data.update(
            kind="pickle checkpoint (needs --trust-checkpoint; convert it with `vistkit models convert`)"
        )
    elif (path / "config.json").is_file():
        cfg = _json_object(load_json(path / "config.json"), path / "config.json")
        kind = cfg.get("kind")  # vistkit's own heads (e.g. coherence-head) name their kind
        data.update(kind=kind if isinstance(kind, str) else f"huggingface {cfg.get('model_type', '?')}")
        from vistkit.models.story_ranker_v2 import KIND, config_sha256

        if kind == KIND:  # no weights: the ranker's identity is its configuration (as in story-ranker's signature)
            data["fingerprint"] = config_sha256(cfg)[:12]
        elif _is_causal_lm(cfg):
            data["lm_signature"] = _lm_signature(model, path)
    elif not (path.is_dir() and any(path.glob("*.safetensors"))):
        from vistkit.errors import InputError

        raise InputError(
            f"{model or repr(model)} ({path}) is not a model: no converted folder ({META_FILE}), Hugging Face folder "
            "(config.json) or checkpoint; `vistkit models list` shows the packaged ones"
        )
    if fmt is OutputFormat.JSON:
        echo(dumps_json(data))
    else:
        echo(render_table(["field", "value"], [[k, str(v)] for k, v in data.items()], fmt, title="model"))


def _is_causal_lm(cfg: dict[str, Any]) -> bool:
    """Whether a Hugging Face config.json names a causal LM architecture (``LlamaForCausalLM``,
    ``GPT2LMHeadModel``)."""
    archs = cfg.get("architectures")
    return isinstance(archs, list) and any(
        isinstance(a, str) and a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs
    )


def _lm_signature(model: str, path: Path) -> str:
    """``NAME@HASH12`` as the lm-* metrics sign this folder (``lm:`` field): their hash covers the config and
    tokenizer files besides the weights (`vistkit.models.lm.folder_fingerprint`), so it differs from
    ``fingerprint``."""
    from vistkit.models.lm import folder_fingerprint
    from vistkit.models.resolve import user_path

    label = path.name if user_path(model).exists() else model  # a hub id is signed by its id
    return f"{label}@{folder_fingerprint(path)[:12]}"


@models_app.command("convert")
@writes_output(out="model")
def convert(
    checkpoint: Path = typer.Argument(..., help="The official checkpoint, e.g. sop_model_epoch4.pth.tar."),
    out: Path = typer.Argument(..., help="Folder to write (safetensors + vistkit_model.json)."),
    trust_checkpoint: bool = typer.Option(
        False,
        "--trust-checkpoint",
        help="Allow reading a pickle-based checkpoint (only for files you trust).",
    ),
    kind: str = typer.Option(
        "rovist-sop",
        "--kind",
        metavar="rovist-sop|state-dict",
        help="rovist-sop (RoViST-C ALBERT) or state-dict (generic).",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Model config.json when the checkpoint lacks one."
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Tokenizer folder or hub id to copy into the converted folder."
    ),
) -> None:
    """Convert a pickle checkpoint once into a safe folder that loads without unpickling."""
    from vistkit.data.readers import load_json
    from vistkit.errors import InputError
    from vistkit.models.checkpoints import (
        extract_state_dict,
        file_sha256,
        jsonable,
        load_legacy_checkpoint,
        save_converted,
    )

    # every mistake said before the checkpoint is read (torch imported, a large file unpickled)
    if kind not in ("rovist-sop", "state-dict"):
        raise InputError(f"unknown --kind {kind!r}; use rovist-sop or state-dict")
    _check_checkpoint_path(checkpoint)
    cfg = None  # read here, so a bad config.json is one clear error (a folder means its config.json)
    if config is not None:
        config_file = config / "config.json" if config.is_dir() else config
        cfg = _json_object(load_json(config_file), config_file)
    if tokenizer is not None and kind == "state-dict":
        from vistkit.commands.common import warn_ignored

        warn_ignored(["--tokenizer"], "--kind rovist-sop (a state-dict folder holds no tokenizer)")
    elif tokenizer is not None:
        check_tokenizer(tokenizer)
    from vistkit.data.output import MODEL_MARKERS, replaced_folder

    # written whole beside it, then renamed into place: a failed or interrupted conversion (a full disk) leaves an
    # earlier model of that name loadable, never a folder without its vistkit_model.json
    with replaced_folder(out, markers=MODEL_MARKERS) as fresh:
        if kind == "rovist-sop":
            from vistkit.models.sop import convert_sop_checkpoint

            convert_sop_checkpoint(
                checkpoint, fresh, trust_checkpoint=trust_checkpoint, config=cfg, tokenizer=tokenizer
            )
        elif kind == "state-dict":
            obj = load_legacy_checkpoint(checkpoint, trust=trust_checkpoint)
            save_converted(
                fresh,
                extract_state_dict(obj, where=checkpoint),
                kind="state-dict",
                config=cfg or {},
                source={"file": checkpoint.name, "sha256": file_sha256(checkpoint)},
                extra={"opt": jsonable(obj.get("opt", {}))},
            )
    echo(f"converted {checkpoint} -> {out}")


def _check_checkpoint_path(checkpoint: Path) -> None:
    """A checkpoint that is a FIFO, a device, a socket or a link to nothing, said as what it is (a FIFO was "does not
    exist", or waited for a writer); a missing one is left to the converter, which says what to provide."""
    import stat

    from vistkit.data.readers import not_a_file
    from vistkit.models.resolve import broken_link

    broken_link(checkpoint, str(checkpoint), fix="give the checkpoint file")
    try:
        mode = checkpoint.stat().st_mode
    except OSError:
        return
    if not stat.S_ISDIR(mode) and (error := not_a_file(checkpoint, mode, fix="give the checkpoint file")) is not None:
        raise error


#: the files of a Hugging Face tokenizer folder, one of which `models convert --tokenizer DIR` needs
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "spiece.model")


def check_tokenizer(tokenizer: str) -> None:
    """``--tokenizer`` names a tokenizer folder (or a hub id in the local cache) holding tokenizer files, checked
    without loading it: one sentence, before the checkpoint is read."""
    from vistkit.errors import InputError, VistkitError
    from vistkit.models.resolve import resolve_model

    try:
        where = resolve_model(tokenizer)
    except VistkitError as exc:
        raise type(exc)(f"--tokenizer: {exc}") from None
    if not where.is_dir():
        raise InputError(f"--tokenizer {tokenizer} is a file; give the folder holding the tokenizer's files")
    if not any((where / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(
            f"--tokenizer {tokenizer} holds no tokenizer ({', '.join(TOKENIZER_FILES)}); give the folder of the "
            "albert-large-v1 tokenizer"
        )
