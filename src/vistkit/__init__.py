"""vistkit: exact, fast, tested evaluation for visual storytelling (VIST).

The core imports fast: metric modules and heavy dependencies (Java, torch) load only when used.

>>> from vistkit import read_stories, score
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import (
    InputError,
    MissingDependencyError,
    OutputError,
    UnavailableMetricError,
    UnknownMetricError,
    VistkitError,
)

if TYPE_CHECKING:  # what `__getattr__` loads on first use, typed for mypy and an IDE (it was all ``Any``)
    from vistkit.data.readers import read_stories
    from vistkit.metrics.base import Score, get_metric, list_metrics, prefer, score

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "Keying",
    "MissingDependencyError",
    "OutputError",
    "Score",
    "Story",
    "StorySet",
    "UnavailableMetricError",
    "UnknownMetricError",
    "VistkitError",
    "__version__",
    "get_metric",
    "list_metrics",
    "prefer",
    "read_stories",
    "score",
]

#: names `__getattr__` loads on first use (they import the readers or the metric registry)
_LAZY = ("Score", "get_metric", "list_metrics", "prefer", "read_stories", "score")


def __getattr__(name: str) -> Any:  # lazy re-exports keep `import vistkit` fast
    if name == "read_stories":
        from vistkit.data.readers import read_stories

        return read_stories
    if name in ("Score", "get_metric", "list_metrics", "prefer", "score"):
        from vistkit.metrics import base

        return getattr(base, name)
    hint = ""
    if not name.startswith("_"):  # tools probe private and dunder names: no guess for them
        import difflib

        close = difflib.get_close_matches(name, __all__, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
    raise AttributeError(f"module 'vistkit' has no attribute {name!r}{hint}")


def __dir__() -> list[str]:
    """The module's names and the lazy ones (a notebook's tab completion lists ``vistkit.score``)."""
    return sorted({*globals(), *_LAZY})
