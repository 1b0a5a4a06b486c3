"""The ``vistkit`` command (typer). Thin: every verb lives in `vistkit.commands.<verb>` and calls the library.

Exit codes: 0 success, 1 invalid input or a failed check, 2 usage error. A `VistkitError` becomes one sentence on
stderr, never a traceback.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


# ------------------------------------------------------------------------------------------- help conventions
class _Argument(TyperArgument):
    """An argument shown as ``FILE`` / ``NAME`` in usage lines (typer would write ``{hypotheses}``)."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the name column says it (FILE, SYSTEMS...)


class _Option(TyperOption):
    """An option whose value is shown as a plain metavar (FILE, INTEGER, local|ray), never ``<bool>``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag or self.count:
            return None
        if self.metavar is not None:
            return self.metavar
        return plain_metavar(self)


def plain_metavar(param: Any) -> str:
    """``text|json|csv|latex`` for choices, ``FILE`` for paths, ``INTEGER``, ``FLOAT``, ``TEXT``."""
    from typing import get_args

    desc = getattr(param, "type_descriptor", None)
    if desc is None:
        return "TEXT"
    if desc.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    if desc.is_path:
        return "PATH"
    annotation = desc.annotation
    if desc.is_list and get_args(annotation):
        annotation = get_args(annotation)[0]
    return {int: "INTEGER", float: "FLOAT", bool: "BOOLEAN"}.get(annotation, "TEXT")


def first_sentence(text: str) -> str:
    """The first sentence of a help text ("Vrank (Hsu et al. 2022): train ..." is not cut after "al.")."""
    import re

    para = " ".join(text.strip().split("\n\n")[0].split())
    for m in re.finditer(r"\.(?:\s|$)", para):
        if not re.search(r"\b(?:al|e\.g|i\.e|vs|Eqs?|Figs?|Sects?|Tab)$", para[: m.start()]):
            return para[: m.start() + 1]
    return para


def _conventions(command: Any, quiet: Any, seen: set[int]) -> None:
    """Every verb: plain metavars (FILE, INTEGER, local|ray), the shared ``-q/--quiet`` option and the command-line
    checks of `_parse_once`; every group alone shows its help. Help is
    plain click text (``rich_markup_mode=None``): nothing in it is read as markup, so ``[ray]`` shows as
    written, and it wraps at the terminal width instead of truncating option names."""
    if id(command) in seen:
        return
    seen.add(id(command))
    if command.help and not command.short_help:  # `vistkit --help` lists whole first sentences, wrapped
        command.short_help = first_sentence(command.help)
    for param in command.params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "").upper()
            param.__class__ = _Argument
        elif isinstance(param, TyperOption):
            param.__class__ = _Option
    original_help_option = command.get_help_option

    def get_help_option(ctx: Any) -> Any:  # built on demand by click: same plain display
        option = original_help_option(ctx)
        if isinstance(option, TyperOption):
            option.__class__ = _Option
        return option

    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        _conventions(sub, quiet, seen)
    if getattr(command, "commands", None):  # `vistkit models` alone lists its verbs, as `vistkit meta` does
        command.no_args_is_help = True
    else:
        _parse_once(command)
    if quiet is not None and not getattr(command, "commands", None) and not any(
        "--quiet" in p.opts for p in command.params
    ):
        own = copy.copy(quiet)
        own.expose_value = False
        command.params.append(own)


def _parse_once(command: Any) -> None:
    """Every verb's command line is checked as `vistkit.commands.common.OnceCommand` checks it: a single-value
    option given twice (``--report a --report b``) and an empty or blank file or folder (``-r "$UNSET"``, read as
    the current folder) are usage errors (exit 2), before anything is read or written; ``-r=FILE`` is ``-r FILE``
    (click read the value ``=FILE``)."""
    from vistkit.commands.common import OnceCommand

    cls = type(command)
    if issubclass(cls, OnceCommand):
        return
    if cls is not TyperCommand and cls not in _ONCE_CLASSES:  # a verb with a command class of its own keeps it
        _ONCE_CLASSES[cls] = type(f"Once{cls.__name__}", (OnceCommand, cls), {})
    command.__class__ = OnceCommand if cls is TyperCommand else _ONCE_CLASSES[cls]


#: `_parse_once`'s command classes for verbs declared with a class of their own (``cls=``)
_ONCE_CLASSES: dict[type, type] = {}


class VistkitGroup(TyperGroup):
    """The top-level group: applies `_conventions` to every verb once the click command is built."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        quiet = next((p for p in self.params if "--quiet" in getattr(p, "opts", ())), None)
        _conventions(self, quiet, set())

    def invoke(self, ctx: Any) -> Any:
        """Run the command; Ctrl-C prints ``interrupted`` and exits with status 130."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # typer would turn Ctrl-C into a silent Exit(130): say so in one line
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None


app = typer.Typer(
    name="vistkit",
    help=(
        "Evaluate visual stories and the metrics themselves: validate, score, compare, distance, meta; run human "
        "studies (studio); train and use Vrank (vrank); try it all (demo)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=VistkitGroup,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["--help", "-h"]},  # every verb's contexts inherit it
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


def _set_quiet(value: bool) -> None:
    from vistkit import progress

    if value:
        progress.set_quiet(True)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress display, no notes and no warnings on stderr (errors still show); also VISTKIT_QUIET=1.",
        callback=_set_quiet,
    ),
) -> None:
    """Evaluate visual stories and the metrics themselves."""


def _colour() -> bool | None:
    """False where the error line must carry no colour (NO_COLOR, TERM=dumb: `vistkit.progress.colour`)."""
    from vistkit.progress import colour

    return colour()


#: the exit status when the reader of stdout went away (`| head`): 128 + SIGPIPE, as a process killed by it
EXIT_BROKEN_PIPE = 141

#: an error message longer than this keeps its start and end (a 100,000-character value echoed back would bury it)
MAX_MESSAGE_CHARS = 1000


def one_readable_line(message: str) -> str:
    """An error message as one line of at most about `MAX_MESSAGE_CHARS` characters: line breaks inside echoed
    values shown as \\n, the middle of an over-long message left out (saying how much)."""
    text = message.replace("\r", "\\r").replace("\n", "\\n")
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    half = MAX_MESSAGE_CHARS // 2
    return f"{text[:half]} [... {len(text) - 2 * half:,} characters left out ...] {text[-half:]}"


def bad_value(exc: BaseException) -> str | None:
    """Click's message for an option or argument given a value it refuses (``--bootstrap 0``, ``--format xml``):
    shown as one ``error:`` sentence like the bad values a verb refuses itself, not click's Usage/Try/Error
    block (kept for a missing or unknown option or command, where the usage line helps). None for other errors."""
    names = {cls.__name__ for cls in type(exc).__mro__}  # typer may vendor click: match by name
    if "BadParameter" not in names or "MissingParameter" in names:
        return None
    format_message = getattr(exc, "format_message", None)
    if not callable(format_message):
        return None
    # typer's own choice check (an Enum option such as --key) words its ValueError "Value error, 'x' is not ..."
    return str(format_message()).replace(": Value error, ", ": ", 1)


def _asks_for_help(args: list[str]) -> bool:
    """Whether the command line only asks for help or the version (no verb's work runs)."""
    return not args or any(a in ("--help", "-h", "--version") for a in args)


def _user_code(exc: BaseException) -> str | None:
    """``FILE:LINE`` of the innermost traceback frame in a module that registered a metric of its own (a user's
    metric, `vistkit.metrics.base.register`), or None: an error raised there is no bug in vistkit."""
    base = sys.modules.get("vistkit.metrics.base")
    registry = getattr(base, "_REGISTRY", {}) if base is not None else {}
    theirs = {cls.__module__ for cls in registry.values() if not cls.__module__.startswith("vistkit.")}
    tb, found = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") in theirs:
            found = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, mapping user errors to one sentence and exit 1."""
    # our own progress display is on stderr; keep Hugging Face's loading bars and advisories out of the output
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:  # imported before (in-process callers): its bars were decided then
        with contextlib.suppress(Exception):
            sys.modules["transformers"].utils.logging.disable_progress_bar()
    _load_commands()
    from vistkit import progress

    progress.set_quiet(None)  # shown (VISTKIT_QUIET=1 hides it) until a -q/--quiet says otherwise
    restore = _encodable_standard_streams()
    restore_stdout = _whole_writes_stdout()
    quiet = _asks_for_quiet(sys.argv[1:] if argv is None else [str(a) for a in argv])
    _drop_invalid_thread_counts(quiet=quiet)
    _drop_invalid_source_date_epoch(quiet=quiet)
    try:
        if sys.stdout is None:  # `vistkit ... >&-`: every result would be dropped in silence, with exit code 0
            typer.secho(
                "error: standard output is closed (>&-), so the results would be lost; redirect it to a file or to "
                "/dev/null instead",
                fg=typer.colors.RED,
                err=True,
                color=_colour(),
            )
            return 1
        try:
            os.getcwd()
        except OSError:  # torch and the JVM cannot even start there, and a relative path means nothing
            if _asks_for_help(sys.argv[1:] if argv is None else argv):
                return _stdout_written(_run(argv))  # help and the version read no file and start no model
            typer.secho(
                "error: the current folder no longer exists (it was deleted or moved while the shell was in it); cd "
                "to an existing folder and run vistkit again",
                fg=typer.colors.RED,
                err=True,
                color=_colour(),
            )
            return 1
        return _stdout_written(_run(argv))
    finally:
        progress.set_quiet("library")  # in-process callers (tests, scripts) get the library default back
        RAW_ARGS.clear()  # a verb function called in process later reads no stale command line
        restore_stdout()
        restore()


def _whole_writes_stdout() -> Any:
    """Under ``PYTHONUNBUFFERED=1`` (``python -u``; set in many Docker images and job scripts) stdout writes
    straight to the file, and a write the disk takes only part of (a disk that fills up, ``ulimit -f``) lost the
    rest in silence: Python's text layer ignores a short write there, so a truncated JSON document ended with exit
    0. Stdout then gets a line-buffered writer whose flush writes everything or raises; returns what undoes it."""
    import io

    stream = sys.stdout
    raw = getattr(stream, "buffer", None)
    if not isinstance(stream, io.TextIOWrapper) or not isinstance(raw, io.RawIOBase):
        return lambda: None
    try:
        whole = io.TextIOWrapper(
            io.BufferedWriter(raw), encoding=stream.encoding, errors=stream.errors, line_buffering=True
        )
    except (OSError, ValueError):
        return lambda: None
    sys.stdout = whole

    def restore() -> None:
        try:
            whole.flush()
        except OSError:  # what could not be written goes nowhere (a closed pipe, a full disk: already said)
            _drop_unwritten_stdout(raw)
        except ValueError:
            return
        with contextlib.suppress(OSError, ValueError):
            whole.flush()
            whole.detach().detach()  # (never closes the file: it is the process's stdout)
        # click wraps stdout after a closed pipe (PacifyFlushWrapper); the original takes its place as well
        if sys.stdout is whole or getattr(sys.stdout, "wrapped", None) is whole:
            sys.stdout = stream

    return restore


def _stdout_written(code: int) -> int:
    """Flush stdout once the verb is done and return the exit status: a file that could not take the rest of the
    output (a full disk, ``ulimit -f``) is one sentence and exit 1, not Python's "Exception ignored ... OSError"
    and exit 120 at exit (or silence), and a reader that went away (``| head``) exit 141. What could not be
    written is then dropped (stdout goes to /dev/null), so Python's own last flush finds nothing to fail on."""
    try:
        sys.stdout.flush()
        return code
    except ValueError:  # closed (by the verb, or a caller in process)
        return code
    except OSError as exc:
        from vistkit.data.output import environment_error

        if code == 0:
            if exc.errno == errno.EPIPE:
                code = EXIT_BROKEN_PIPE
            else:
                machine = environment_error(exc) or f"cannot write the output: {exc.strerror or exc}"
                typer.secho(f"error: {one_readable_line(machine)}", fg=typer.colors.RED, err=True, color=_colour())
                code = 1
        _drop_unwritten_stdout(sys.stdout)
        return code


def _drop_unwritten_stdout(stream: Any) -> None:
    """Point the file descriptor of ``stream`` (stdout) at /dev/null, so that what stayed in its buffer goes
    nowhere instead of failing again when Python flushes it on the way out (the Python documentation's advice for
    a closed pipe)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)


#: thread-count variables the native libraries under torch read when they load; OpenMP's takes a list per level
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _asks_for_quiet(args: list[str]) -> bool:
    """Whether the command line has ``-q``/``--quiet`` (before or after the verb): the environment's variables are
    checked (and warned about) before click reads it."""
    for arg in args:
        if arg == "--":
            return False
        if arg in ("-q", "--quiet"):
            return True
    return False


def _drop_invalid_thread_counts(*, quiet: bool = False) -> None:
    """A thread count that is not a positive whole number (``OMP_NUM_THREADS=0`` / ``abc``) made libgomp print
    "Invalid value for environment variable" (with blank lines) each time torch loaded, and was then ignored:
    it is removed before anything loads, with one warning saying so."""
    import re

    from vistkit.errors import warn

    for name in _THREAD_VARIABLES:
        value = os.environ.get(name)
        if value is None or "torch" in sys.modules:
            continue
        if not re.fullmatch(r"\s*[1-9]\d{0,5}\s*(,\s*[1-9]\d{0,5}\s*)*", value):
            del os.environ[name]
            if not quiet:
                warn(f"{name}={value!r} is not a positive whole number of threads; ignored (the default is used)")


#: the last second of the year 9999: a later SOURCE_DATE_EPOCH has no calendar date (Python's datetime ends there)
_LAST_EPOCH = 253_402_300_799


def _drop_invalid_source_date_epoch(*, quiet: bool = False) -> None:
    """``SOURCE_DATE_EPOCH`` (reproducible builds: the date a report states) that is not a whole number of seconds
    from 0 to the year 9999 crashed numpy (read when scipy loads) and matplotlib's PDF writer with "invalid
    literal for int()" / "year is out of range", after the work was done; it is removed before anything loads,
    with one warning (the reports then state the current time)."""
    import re

    from vistkit.errors import warn

    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None or (re.fullmatch(r"\s*\d{1,12}\s*", value) and int(value) <= _LAST_EPOCH):
        return
    if not value.strip():  # set but empty (`SOURCE_DATE_EPOCH= cmd`): unset, as most tools read it; no warning
        del os.environ["SOURCE_DATE_EPOCH"]
        return
    del os.environ["SOURCE_DATE_EPOCH"]
    if quiet:  # (-q: no warnings)
        return
    warn(
        f"SOURCE_DATE_EPOCH={value!r} is not a whole number of seconds from 0 to {_LAST_EPOCH:,} (the year 9999); "
        "ignored (reports state the current time)"
    )


def _encodable_standard_streams() -> Any:
    """Make stdout and stderr able to print any story text, whatever the locale; returns what undoes it.

    An ASCII stream (``LC_ALL=C`` without Python's UTF-8 mode, ``PYTHONIOENCODING=ascii``) is taken as
    misconfigured and writes UTF-8, as click already does for what it echoes (so a ``--per-item -`` table and
    the results table agree, and equal the UTF-8 files vistkit writes); any other encoding that is not UTF
    (``PYTHONIOENCODING=latin-1``) is kept, and a character it cannot hold is written as a backslash escape
    instead of stopping the command with a UnicodeEncodeError after part of the output.
    """
    import codecs

    undo: list[tuple[Any, str, str]] = []
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        reconfigure = getattr(stream, "reconfigure", None)
        if not encoding or reconfigure is None:
            continue
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            continue
        if name.startswith("utf"):
            continue
        errors = getattr(stream, "errors", None) or "strict"
        try:
            if name == "ascii":
                reconfigure(encoding="utf-8", errors=errors)
            elif errors == "strict":
                reconfigure(errors="backslashreplace")
            else:
                continue
        except (OSError, ValueError):  # a stream that cannot change (already written to in some other way)
            continue
        undo.append((stream, encoding, errors))

    def restore() -> None:
        for stream, encoding, errors in undo:
            with contextlib.suppress(OSError, ValueError):
                stream.reconfigure(encoding=encoding, errors=errors)

    return restore


#: the command line of the running `main` call, as typed: a path option's trailing "/" is gone once typer has
#: made it a Path ("out/" -> "out"), so `vistkit.commands.common.writes_output` reads it here
RAW_ARGS: list[str] = []


def _run(argv: list[str] | None) -> int:
    from vistkit.errors import VistkitError

    RAW_ARGS[:] = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        # without standalone mode click returns (not raises) the code of a `typer.Exit`
        rv = app(args=argv, standalone_mode=False, prog_name="vistkit")  # also under `python -m`
    except VistkitError as exc:
        typer.secho(f"error: {one_readable_line(str(exc))}", fg=typer.colors.RED, err=True, color=_colour())
        return 1
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except SystemExit as exc:
        # click answers a closed stdout (`vistkit ... | head`) with a silent exit 1; say it as Unix tools do,
        # 141 (128 + SIGPIPE): the reader stopped reading, nothing went wrong here
        cause = exc.__context__
        if exc.code == 1 and isinstance(cause, OSError) and cause.errno == errno.EPIPE:
            return EXIT_BROKEN_PIPE
        raise
    except Exception as exc:  # click usage errors (typer >= 0.2x vendors click as typer._click: duck-type)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            if (message := bad_value(exc)) is not None:  # as every other bad value: one sentence (exit 2)
                typer.secho(f"error: {one_readable_line(message)}", fg=typer.colors.RED, err=True, color=_colour())
                return code
            show()
            return code
        from vistkit.data.output import environment_error  # a full disk or a read-only file system: not a bug
        from vistkit.errors import out_of_memory

        if (machine := environment_error(exc) or out_of_memory(exc)) is not None:
            typer.secho(f"error: {one_readable_line(machine)}", fg=typer.colors.RED, err=True, color=_colour())
            return 1
        from vistkit.progress import env_flag

        if env_flag("VISTKIT_DEBUG"):  # (VISTKIT_DEBUG=0 is off)
            raise
        # not a user error we foresaw: still one sentence, never a traceback (VISTKIT_DEBUG=1 shows it)
        first = (str(exc).splitlines() or [""])[0][:300]
        if (where := _user_code(exc)) is not None:  # raised in the user's own code (their metric): say where
            message = (
                f"error: {type(exc).__name__}: {first} (raised in {where}, your code, not vistkit's; "
                "VISTKIT_DEBUG=1 shows the whole traceback)"
            )
        else:
            message = (
                f"error: unexpected {type(exc).__name__}: {first} - this is a bug in vistkit; please report it with "
                "the same command run with VISTKIT_DEBUG=1 (which shows where it happened)"
            )
        typer.secho(message, fg=typer.colors.RED, err=True, color=_colour())
        return 1
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


if __name__ == "__main__":
    # `python -m vistkit.cli`: this file runs as `__main__`, a copy of the module, while the verbs register on
    # `vistkit.cli.app` (the module they import); run that module's entry point, not this copy's empty app
    from vistkit.cli import main as _main

    sys.exit(_main())
