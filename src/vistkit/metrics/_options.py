"""Checks of metric options given through the Python API (the CLI already reads ``-O`` values as the declared
type, `vistkit.commands.score.coerce_option`).

Without them ``bool("false")`` is True (``trust_checkpoint="false"`` would allow unpickling), ``int(nan)`` is a
bare ValueError, a batch size of 0 a ``range()`` error and a NaN threshold a silent NaN score. Each function
returns the value in its plain type or raises one `InputError` naming the metric and the option.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vistkit.errors import InputError

#: the largest batch size a metric accepts (as ``vistkit vrank train --batch-size``): more only costs memory
MAX_BATCH_SIZE = 65_536
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


#: the options whose values are names from a fixed list of lower-case names: a precision mode, a sentence source,
#: clipscore-story's long-story policy, sacreBLEU's tokenizer and smoothing, RoViST-VG's aggregate and tagger,
#: GROOViST's dataset, a device. Their values are read in any letter case and without surrounding spaces
#: (`canonical_options`), as device names always were: ``precision=BF16`` was refused while ``device=CPU`` ran.
ENUMERATED = frozenset(
    {"precision", "sentences", "long", "aggregate", "tagger", "dataset", "tokenize", "smooth_method", "device"}
)


def canonical_choice(value: Any) -> Any:
    """An enumerated option's value as its list spells it: a text in lower case without surrounding spaces;
    anything else as given (the option's own check refuses it)."""
    return value.strip().lower() if isinstance(value, str) else value


def canonical_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with each `ENUMERATED` option's value spelled as its list spells it (`canonical_choice`): what
    a metric is checked and built with, so ``precision=BF16`` runs as ``bf16`` and its signature says ``bf16``."""
    return {k: canonical_choice(v) if k in ENUMERATED else v for k, v in options.items()}


def option_choice(metric: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` as one of ``choices`` (lower-case names), read in any letter case (`canonical_choice`); else
    one `InputError` naming the choices."""
    chosen = canonical_choice(value)
    if isinstance(chosen, str) and chosen in choices:
        return chosen
    listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}" if len(choices) > 1 else repr(choices[0])
    raise InputError(f"{metric}: {name} must be {listed}, not {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def option_bool(metric: str, name: str, value: Any) -> bool:
    """``value`` as a boolean: True/False (numpy's too), 0/1, or the words true/false, yes/no, on/off."""
    import numpy as np

    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InputError(f"{metric}: {name} must be true or false (got {_shown(value)})")


def option_int(metric: str, name: str, value: Any, *, low: int = 1, high: int | None = None) -> int:
    """``value`` as a whole number from ``low`` to ``high`` (a float such as 8.0 is fine; 8.5, NaN, inf and
    text are not)."""
    import numpy as np

    whole = (isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)) or (
        isinstance(value, float | np.floating) and math.isfinite(value) and float(value).is_integer()
    )
    span = f"from {low:,}" + (f" to {high:,}" if high is not None else " or more")
    if not whole:
        raise InputError(f"{metric}: {name} must be a whole number {span} (got {_shown(value)})")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise InputError(f"{metric}: {name} must be {span} (got {number:,})")
    return number


def option_batch_size(metric: str, value: Any) -> int:
    """A batch size: a whole number from 1 to `MAX_BATCH_SIZE`."""
    return option_int(metric, "batch_size", value, low=1, high=MAX_BATCH_SIZE)


def option_float(metric: str, name: str, value: Any) -> float:
    """``value`` as a finite number (not NaN or infinite, not a boolean or text)."""
    import numpy as np

    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_):
        number = float(value)
        if math.isfinite(number):
            return number
    raise InputError(f"{metric}: {name} must be a finite number (got {_shown(value)})")


def option_text(metric: str, name: str, value: Any) -> str:
    """``value`` as a non-empty text (a name, a path)."""
    from pathlib import PurePath

    if isinstance(value, PurePath):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{metric}: {name} must be a non-empty text (got {_shown(value)})")
    if "\x00" in value:
        raise InputError(f"{metric}: {name} holds a NUL character, which no name or path can hold")
    return value


#: the devices `vistkit.models.runtime.choose_device` knows, checked here without importing torch
_DEVICE = r"(auto|cpu|cuda(:\d+)?|mps)"


def check_device(value: Any) -> None:
    """The refusal `vistkit.models.runtime.choose_device` gives a device name it does not know, without importing
    torch (whether this machine has that device is for `choose_device` to say)."""
    import re

    if isinstance(value, str) and value.strip() and not re.fullmatch(_DEVICE, value.strip().lower()):
        raise InputError(f"device {value!r} is not one vistkit runs on; use auto, cpu, cuda, cuda:N or mps")


def check_device_here(value: Any) -> None:
    """`check_device`, then, for a device other than auto or cpu, whether this machine has it (as
    `vistkit.models.runtime.choose_device` says when the model loads): torch is imported only then."""
    check_device(value)
    if isinstance(value, str) and value.strip().lower() not in ("", "auto", "cpu"):
        from vistkit.models.runtime import choose_device

        choose_device(value)


#: the photo metrics' path options (each checked before the metric is built): the folder's noun, and the hint on
#: the command line and in Python (`vistkit.data.story.option_name`)
_PHOTO_FOLDER = (
    "photo folder",
    "give --images DIR holding <photo_id>.jpg files",
    "give images=DIR holding <photo_id>.jpg files",
)


def check_grounding_path(key: str, value: Any) -> None:
    """The photo metrics' ``images`` (a folder), ``regions`` (a CSV image_id,bbox) and ``photos`` (a JSON photo
    map) read as the metric reads them once built: the folder checked, the two small files parsed (once per
    file and version: `_parsed`). Values that are not paths (an `ImageStore`, a dict) are the caller's."""
    from pathlib import Path, PurePath

    if not isinstance(value, str | PurePath):
        return
    if key == "images":
        from vistkit.data.readers import check_input_folder
        from vistkit.data.story import option_name

        noun, flag, argument = _PHOTO_FOLDER
        check_input_folder(Path(value), noun, option_name(flag, argument))
    elif key == "regions":
        from vistkit.data.images import read_regions

        _parsed(read_regions, str(value))
    elif key == "photos":
        from vistkit.data.images import load_photo_map

        _parsed(load_photo_map, str(value))


_PARSED: dict[tuple[Any, ...], bool] = {}


def _parsed(reader: Any, path: str) -> None:
    """``reader(path)`` unless it already read this file (same size and change time) without error: several
    metrics share one ``--regions``/``--photos``, each planned with its own check."""
    import os

    from vistkit.data.readers import split_member

    try:
        st = os.stat(split_member(path)[0])
        key: tuple[Any, ...] | None = (reader.__name__, path, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:  # the reader names what is wrong
        key = None
    if key is not None and key in _PARSED:
        return
    reader(path)
    if key is not None:
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[key] = True


def check_values(cls: type[Any], options: dict[str, Any], *, local: bool = True) -> None:
    """The checks of ``options`` (for metric class ``cls``) that need no model, no torch and no Java, made before
    anything slow starts (`vistkit score` checks every option this way before it loads a model): the same checks
    the constructor makes first, by option name (batch_size, num_threads, batch_tokens, booleans, device,
    precision, sentences, lm, a model path that names nothing, the photo metrics' images/regions/photos paths;
    a cuda or mps device this machine lacks, importing torch only then). Whether the value fits the model (a
    layer it lacks) is left to the constructor, unless its config tells (bertscore's layer). ``local``: the
    metric is built on this machine (not on a Ray cluster, whose workers may have the GPU this one lacks)."""
    import inspect
    import sys

    name = str(getattr(cls, "name", cls.__name__))
    params = inspect.signature(cls.__init__).parameters
    module = sys.modules.get(cls.__module__)
    options = canonical_options(options)
    for key, value in options.items():
        param = params.get(key)
        if param is None or value is None:
            continue
        annotation = str(param.annotation)
        if key == "batch_size":
            option_batch_size(name, value)
        elif key == "num_threads":
            from vistkit.metrics.base import check_num_threads

            check_num_threads(name, value)
        elif key == "batch_tokens":
            from vistkit.models.lm import check_batch_tokens

            check_batch_tokens(value)
        elif annotation == "bool":
            option_bool(name, key, value)
        elif key == "layer":
            option_int(name, key, value, low=0)
            if name == "bertscore":
                model = str(options.get("model") or getattr(module, "DEFAULT_MODEL", ""))
                layers = _hidden_layers(model)
                if layers is not None and int(value) > layers:  # as the constructor says once the model is loaded
                    raise InputError(f"bertscore: layer must be between 0 and {layers} for {model} (got {value})")
        elif key == "device":
            check_device_here(value) if local else check_device(value)
        elif key in ("images", "regions", "photos"):
            check_grounding_path(key, value)
        elif key == "precision":
            offered = getattr(cls, "PRECISIONS", None) or getattr(module, "PRECISIONS", None)
            if offered is None and "lm" in params:  # the LM metrics and story-ranker: `vistkit.models.lm`
                from vistkit.models.lm import PRECISIONS as offered
            if offered is not None:
                from vistkit.models.precision import check_precision

                check_precision(str(value), offered=tuple(offered), what=f"{name}: precision")
        elif key == "sentences" and getattr(module, "SENTENCE_MODES", None):
            option_choice(name, key, value, tuple(module.SENTENCE_MODES))  # type: ignore[union-attr]
        elif key == "lm":
            from vistkit.models.lm import DEFAULT_LM, resolve_lm

            if str(value) != DEFAULT_LM:
                resolve_lm(value)  # a folder, or a hub id in the local cache: nothing converted or loaded
        elif key == "model" and isinstance(value, str) and name in _RESOLVED_MODELS:
            from vistkit.models.resolve import resolve_model

            if "/" in value:  # a path or a hub id (in the local cache): one sentence when it names nothing
                resolve_model(value)


#: metrics whose ``model`` option `vistkit.models.resolve.resolve_model` reads (a name with no slash may be a
#: legacy hub id such as ``roberta-large``, which bertscore looks up itself: not checked here)
_RESOLVED_MODELS = ("bertscore",)


def _hidden_layers(model: str) -> int | None:
    """``num_hidden_layers`` of the config of an encoder ``model`` names (packaged, a folder or a hub id in the
    local cache), read without loading it; None when that is not known without loading it."""
    from vistkit.data.readers import load_json
    from vistkit.errors import VistkitError
    from vistkit.models.resolve import resolve_model

    try:  # load_json: a config.json that is a FIFO or a device is refused, not waited on
        config = load_json(resolve_model(model) / "config.json")
    except (VistkitError, OSError, ValueError, TypeError):
        return None
    if not isinstance(config, dict) or config.get("is_encoder_decoder"):
        return None
    layers = config.get("num_hidden_layers")
    return layers if isinstance(layers, int) and not isinstance(layers, bool) else None


# --------------------------------------------------------------------------------------------------- signatures
def short_hash(*parts: bytes | str | memoryview) -> str:
    """12 hex digits of the SHA-256 of ``parts`` (each length-prefixed, so ("ab", "c") and ("a", "bc") differ): the
    content hash a signature shows for a file or table the user gives (GloVe vectors, anchor stories, regions)."""
    import hashlib

    digest = hashlib.sha256()
    for part in parts:
        data = memoryview(part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part).cast("B")
        digest.update(data.nbytes.to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:12]


def named_with_hash(path: Any, digest: str) -> str:
    """``NAME@HASH`` for a signature: the file or folder's own name (not its folder on this machine, which two
    runs of the same files would not share) and the hash of what was read from it (two files of one name but
    different contents were the same signature)."""
    from pathlib import PurePath

    return f"{PurePath(str(path)).name or str(path)}@{digest}"


def model_label(name: str) -> str:
    """A model's name as a signature shows it: a hub id or packaged name as given, a local folder by its own name
    (its full path named this machine's folders: the same weights elsewhere had another signature; the weights'
    hash that follows it tells models apart)."""
    from pathlib import Path

    text = str(name)
    if text.startswith((".", "/", "~")) or Path(text).expanduser().exists():
        return Path(text).expanduser().name or text
    return text
