"""The ``vistkit`` command (typer). Thin: every verb lives in `vistkit.commands.<verb>` and calls the library.

Exit codes: 0 success, 1 invalid input or a failed check, 2 usage error. A `VistkitError` becomes one sentence on
stderr, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

app = typer.Typer(
    name="vistkit",
    help="Evaluate visual stories and the metrics themselves: validate, score, compare, distance, meta.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module registers its command(s) on `app` when imported. A missing module (work in progress) is skipped.
COMMAND_MODULES = (
    "score", "metrics", "validate", "distance", "compare", "meta", "models", "demo", "formats", "vrank",
    "studio",
)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"vistkit.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"vistkit.commands.{name}":
                raise


def _print_version(value: bool) -> None:
    if value:
        from vistkit import __version__

        typer.echo(f"vistkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    """Evaluate visual stories and the metrics themselves."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, mapping user errors to one sentence and exit 1."""
    from vistkit.errors import VistkitError

    # our own progress display is on stderr; keep Hugging Face's loading bars and advisories out of the output
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    _load_commands()
    try:
        # without standalone mode click returns (not raises) the code of a `typer.Exit`
        rv = app(args=argv, standalone_mode=False, prog_name="vistkit")  # also under `python -m`
    except VistkitError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        return 1
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except Exception as exc:  # click usage errors (typer >= 0.2x vendors click as typer._click: duck-type)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        from vistkit.data.output import environment_error  # a full disk or a read-only file system: not a bug

        if (machine := environment_error(exc)) is not None:
            typer.secho(f"error: {machine}", fg=typer.colors.RED, err=True)
            return 1
        if os.environ.get("VISTKIT_DEBUG"):
            raise
        # not a user error we foresaw: still one sentence, never a traceback (VISTKIT_DEBUG=1 shows it)
        first = (str(exc).splitlines() or [""])[0][:300]
        typer.secho(
            f"error: unexpected {type(exc).__name__}: {first} - this is a bug in vistkit; please report it with "
            "the same command run with VISTKIT_DEBUG=1 (which shows where it happened)",
            fg=typer.colors.RED,
            err=True,
        )
        return 1
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


if __name__ == "__main__":
    # `python -m vistkit.cli`: this file runs as `__main__`, a copy of the module, while the verbs register on
    # `vistkit.cli.app` (the module they import); run that module's entry point, not this copy's empty app
    from vistkit.cli import main as _main

    sys.exit(_main())
