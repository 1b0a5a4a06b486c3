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


def warn(message: str) -> None:
    """One sentence on stderr about something vistkit does not refuse but a user should know (``warning: ...``).

    Library code calls this instead of printing, so the CLI can silence all of them at once (``VISTKIT_QUIET``).
    """
    import os
    import sys

    if not os.environ.get("VISTKIT_QUIET"):
        print(f"warning: {message}", file=sys.stderr)
