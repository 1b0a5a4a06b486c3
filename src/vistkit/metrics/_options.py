"""Checks of metric options given through the Python API (the CLI already reads ``-O`` values as the declared
type, `vistkit.commands.score.coerce_option`).

Without them ``bool("false")`` is True (``trust_checkpoint="false"`` would allow unpickling), ``int(nan)`` is a
bare ValueError, a batch size of 0 a ``range()`` error and a NaN threshold a silent NaN score. Each function
returns the value in its plain type or raises one `InputError` naming the metric and the option.
"""

from __future__ import annotations

import math
from typing import Any

from vistkit.errors import InputError

#: the largest batch size a metric accepts (as ``vistkit vrank train --batch-size``): more only costs memory
MAX_BATCH_SIZE = 65_536
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


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
