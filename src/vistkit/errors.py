"""Errors a user can cause. Each carries one clear sentence: what is wrong and how to fix it.

The CLI turns these into a message and exit code 1, never a traceback.
"""

from __future__ import annotations


class VistkitError(Exception):
    """Base class for every error vistkit reports to a user."""


class InputError(VistkitError, ValueError):
    """A bad input file, record or field (says which)."""


class MissingDependencyError(VistkitError, RuntimeError):
    """Something vistkit needs is not installed or not found (Java, a model, an extra)."""


class UnavailableMetricError(VistkitError, LookupError):
    """A metric that is known but cannot run here (e.g. SPICE needs Stanford CoreNLP)."""


class UnknownMetricError(VistkitError, LookupError):
    """A metric name that vistkit does not know."""


class OutputError(VistkitError):
    """An output vistkit may not or cannot write (an input, an existing file without --force, a read-only
    folder, a full disk): names the path and the fix."""


#: what PyTorch, oneDNN and CUDA say when an allocation fails (they raise RuntimeError, not MemoryError)
_OUT_OF_MEMORY_TEXTS = (
    "out of memory",
    "can't allocate memory",
    "could not create a primitive",
    "std::bad_alloc",
    "unable to allocate",
)


def out_of_memory(exc: BaseException) -> str | None:
    """One sentence for an allocation that failed (Python's or numpy's `MemoryError`, torch's allocator, oneDNN,
    CUDA), or None for any other exception: the machine's limit, not a bug in vistkit."""
    text = (str(exc).splitlines() or [""])[0][:200]
    if not (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or (isinstance(exc, RuntimeError) and any(t in text.lower() for t in _OUT_OF_MEMORY_TEXTS))
    ):
        return None
    why = f" ({text})" if text else ""
    return (
        f"ran out of memory{why}; score fewer stories at a time, lower the metric's batch size "
        "(-O METRIC.batch_size=N where it has one), or give the process more memory"
    )


def warn(message: str) -> None:
    """One sentence on stderr about something vistkit does not refuse but a user should know (``warning: ...``).

    Library code calls this instead of printing, so the CLI can silence all of them at once (``-q`` or
    ``VISTKIT_QUIET=1``, `vistkit.progress.warnings_silenced`).
    """
    from vistkit.progress import say, warnings_silenced

    if not warnings_silenced():
        say(f"warning: {message}")
