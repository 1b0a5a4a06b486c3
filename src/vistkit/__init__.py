"""vistkit: exact, fast, tested evaluation for visual storytelling (VIST).

The core imports fast: metric modules and heavy dependencies (Java, torch) load only when used.

>>> from vistkit import read_stories, score
"""

from __future__ import annotations

from typing import Any

from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError, MissingDependencyError, VistkitError

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "Keying",
    "MissingDependencyError",
    "Story",
    "StorySet",
    "VistkitError",
    "__version__",
    "get_metric",
    "list_metrics",
    "read_stories",
    "score",
]


def __getattr__(name: str) -> Any:  # lazy re-exports keep `import vistkit` fast
    if name == "read_stories":
        from vistkit.data.readers import read_stories

        return read_stories
    if name in ("get_metric", "list_metrics", "score"):
        from vistkit.metrics import base

        return {"get_metric": base.get_metric, "list_metrics": base.list_metrics, "score": base.score}[name]
    raise AttributeError(name)
