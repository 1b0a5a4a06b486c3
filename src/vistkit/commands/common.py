"""Options and helpers shared by commands."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand

from vistkit.report.tables import OutputFormat

if TYPE_CHECKING:
    from vistkit.data.story import StorySet
    from vistkit.engine import Engine

def one_of(*choices: str) -> Callable[[str | None], str | None]:
    """Typer callback of an option whose value is one of ``choices``: any other value is a usage error (exit 2,
    ``Invalid value for '--engine': ...``) before anything is read, as for ``--format xml``."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            listed = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise typer.BadParameter(f"use {listed}, not {value!r:.60}")
        return value

    return check


def check_workers_option(value: int | None) -> int | None:
    """Typer callback of ``--workers``: unset, or a whole number of worker processes from 1 to the engine's
    limit (the engine checks it again for API calls)."""
    from vistkit.engine.ray import MAX_WORKERS

    if value is not None and not 1 <= value <= MAX_WORKERS:
        raise typer.BadParameter(f"must be from 1 to {MAX_WORKERS:,} worker processes, got {value:,}")
    return value


def check_gpus_option(value: float) -> float:
    """Typer callback of ``--num-gpus-per-worker``: a finite number of GPUs, 0 or more."""
    import math

    if not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"must be a number of GPUs, 0 or more (e.g. 1, or 0.5 to share one), got {value:g}")
    return value


FormatOption = typer.Option(OutputFormat.TEXT, "--format", "-f", help="Output format: text, json, csv or latex.")

# options of `vistkit score` and `vistkit compare` (and `vistkit meta`: RefFormatOption, MetricOptionOption)
MetricsOption = typer.Option(
    ...,
    "--metrics",
    "-m",
    metavar="METRICS",
    help="Metric names, comma-separated (`vistkit metrics`), or all (every metric these inputs allow).",
)
ReferencesOption = typer.Option(
    None, "--references", "-r", metavar="FILE", help="Reference (human) stories (- : standard input)."
)
TemplateOption = typer.Option(
    None, "--template", metavar="FILE", help="Challenge template: score only its sequences, require a story for each."
)
KeyOption = typer.Option(
    None,
    "--key",
    "-k",
    metavar="KEY",
    help="Match stories by story, sequence or album (default: sequence if known).",
)
#: the story formats `read_stories` reads (auto-detected unless forced): see `vistkit formats`
STORY_FORMATS = "sis|storylets|challenge|story-dict|tapm|tapm-nested|arel|jsonl|csv"
HypFormatOption = typer.Option(
    None,
    "--hyp-format",
    metavar="FORMAT",
    help=f"Force the story file format: {STORY_FORMATS.replace('|', ', ')}.",
    callback=one_of(*STORY_FORMATS.split("|")),
)
RefFormatOption = typer.Option(
    None,
    "--ref-format",
    metavar="FORMAT",
    help="Force the reference file format (as --hyp-format).",
    callback=one_of(*STORY_FORMATS.split("|")),
)
MetricOptionOption = typer.Option(
    [], "--option", "-O", metavar="METRIC.OPTION=VALUE", help="A metric option, e.g. bertscore.idf=true (repeatable)."
)


# where scoring runs (score, compare, meta pairs, distance --human-stories): vistkit.engine
EngineOption = typer.Option(
    "local",
    "--engine",
    metavar="local|ray",
    help="Where to score: local (this process) or ray (a Ray cluster: pip install 'vistkit[ray]').",
    callback=one_of("local", "ray"),
)
AddressOption = typer.Option(
    None,
    "--address",
    metavar="ADDRESS",
    help="--engine ray: the cluster (auto, or ray://HOST:PORT); default: a new local one.",
)
WorkersOption = typer.Option(
    None,
    "--workers",
    help="--engine ray: worker actors (default: the cluster's CPUs, or GPUs / GPUs per worker).",
    callback=check_workers_option,
)
GpusPerWorkerOption = typer.Option(
    0.0,
    "--num-gpus-per-worker",
    help="--engine ray: GPUs each worker reserves (e.g. 1, or 0.5 to share one).",
    callback=check_gpus_option,
)


def check_engine(kind: str) -> None:
    """`InputError` for an ``--engine`` vistkit does not have, before any input is read or model loaded."""
    from vistkit.engine import ENGINES
    from vistkit.errors import InputError

    if kind not in ENGINES:
        raise InputError(f"unknown engine {kind!r}: use --engine local or --engine ray")
    if kind == "ray":  # its settings too (the module imports Ray only when an engine starts)
        from vistkit.engine.ray import start_timeout

        start_timeout()


def open_engine(kind: str, address: str | None, workers: int | None, num_gpus_per_worker: float) -> Engine:
    """The engine the command's ``--engine`` options ask for (close it, or use it in a ``with`` block)."""
    from vistkit.engine import make_engine

    given = [
        flag
        for flag, used in (
            ("--address", address is not None),
            ("--workers", workers is not None),
            ("--num-gpus-per-worker", bool(num_gpus_per_worker)),
        )
        if used
    ]
    if kind == "local" and given:
        warn_ignored(given, "--engine ray, and this runs on the local engine")
    return make_engine(kind, address=address, workers=workers, num_gpus_per_worker=num_gpus_per_worker)


def warn_ignored(flags: list[str], applies_to: str) -> None:
    """One warning for options given that this run cannot use: ``--a and --b are ignored: they apply to ...``."""
    from vistkit.errors import warn

    one = len(flags) == 1
    warn(
        f"{' and '.join(flags)} {'is' if one else 'are'} ignored: {'it applies' if one else 'they apply'} to "
        f"{applies_to}"
    )


def read_references(
    references: str | Path | None, ref_format: str | None, *, system: str | None = None
) -> StorySet | None:
    """The ``--references`` stories (``FILE:FIELD`` reads a storylet field: `story_file`), or None; a
    ``--ref-format`` without references is a warning, not silence."""
    from vistkit.data.readers import read_stories
    from vistkit.errors import warn

    if references is None:
        if ref_format is not None:
            warn("--ref-format is ignored: no --references given")
        return None
    path, field = story_file(references)
    return read_stories(path, format=ref_format, system=system, field=field)


def story_file(path: str | Path, field: str | None = None, *, flag: str | None = None) -> tuple[str | Path, str | None]:
    """A story file argument and the storylet field to read: ``FILE:FIELD`` (``PR_VIST.json.zip:predicted_story``,
    as `meta` and `studio` read it: `vistkit.data.readers.split_field`) gives its own field, any other path
    ``field`` (the ``flag`` option's value, e.g. ``--hyp-field``; ``text`` is its default). ``flag``: a
    ``FILE:FIELD`` beside that option naming another field is refused (the verb reads one file)."""
    from vistkit.data.readers import split_field
    from vistkit.errors import InputError

    name, own = split_field(str(path), default="")
    if not own:
        return path, field
    if flag is not None and field not in (None, "text", own):
        raise InputError(
            f"{name}:{own} names the field {own!r} and {flag} {field!r} another; give the field once (FILE:FIELD or "
            f"{flag})"
        )
    return name, own


def parse_metric_names(value: str | list[str]) -> list[str]:
    """``"a,b" ["c"]`` -> ``["a", "b", "c"]`` (order kept, duplicates dropped)."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        for name in item.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def echo(text: str) -> None:
    """A line of output on stdout (one trailing newline at most)."""
    typer.echo(text.rstrip("\n"))


def note(text: str) -> None:
    """An informative line on stderr (a metric skipped and why); silent under -q/--quiet."""
    from vistkit import progress

    if not progress.is_quiet():
        typer.secho(text, fg=typer.colors.YELLOW, err=True, color=progress.colour())


def emit(text: str, *, to_stderr: bool = False) -> None:
    """The command's result: on stdout, or on stderr when stdout carries a ``--per-item -`` CSV."""
    typer.echo(text.rstrip("\n"), err=to_stderr)


# ------------------------------------------------------------------------------------------ writing files
ForceOption = typer.Option(False, "--force", help="Overwrite an existing output (never one of the inputs).")


def writes_output(*, force_flag: bool = True, **outputs: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator (below ``@app.command``) for a verb that writes files: ``outputs`` names its output parameters,
    each ``"file"``, ``"folder"`` or ``"model"`` (a model folder). The verb gets ``--force`` (unless it declares
    ``force`` itself). Before it runs, each given output is checked: not an input of the command, not an existing
    file without ``--force``, a folder that is new, empty or vistkit's, an existing writable parent folder. While
    it runs, every writer of `vistkit.data.output` applies the same rules, with every other argument as the
    command's inputs. ``force_flag=False``: a verb that never overwrites (its own refusal says why) gets no
    ``--force``."""
    from vistkit.data.output import (
        MARKER,
        MODEL_MARKERS,
        check_output,
        check_output_folder,
        output_policy,
        probe_writable,
        removable,
    )
    from vistkit.errors import OutputError

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(func, eval_str=True)
        if unknown := [name for name in outputs if name not in sig.parameters]:  # a renamed option: fail loudly
            raise TypeError(f"writes_output: {func.__name__} has no parameter {', '.join(unknown)}")
        own_force = "force" in sig.parameters
        params = list(sig.parameters.values())
        if force_flag and not own_force:
            params.append(
                inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, default=ForceOption, annotation=bool)
            )

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> None:
            force = bool(kwargs["force"] if own_force else kwargs.pop("force", False)) or not force_flag
            inputs = [v for k, v in kwargs.items() if k not in outputs and k != "force"]
            _refuse_stdin_twice(sig, {k: v for k, v in kwargs.items() if k not in outputs})
            new_folders: list[Path] = []  # output folders this run creates: removed again if it fails
            with output_policy(force=force, inputs=[*args, *inputs]):
                for name, kind in outputs.items():
                    value = kwargs.get(name)
                    if str(value) == "-" and kind in ("folder", "model"):  # refused by its writer only at the end
                        what = "a model" if kind == "model" else "a report"
                        raise OutputError(
                            f"{_parameter_label(sig, name)} is -, but {what} is a folder of files and cannot go to "
                            "standard output; give a folder name"
                        )
                    if value is None or str(value) == "-" or "://" in str(value):
                        continue
                    if kind in ("folder", "model"):
                        markers = MODEL_MARKERS if kind == "model" else (MARKER,)
                        probe_writable(check_output_folder(value, markers=markers))
                        if not os.path.lexists(value):
                            new_folders.append(Path(value))
                    elif force_flag or not os.path.isfile(value):
                        refuse_folder_spelling(option_flags(sig.parameters[name].default, name))
                        probe_writable(check_output(value))
                    # else: a verb that never overwrites refuses an existing file itself, saying what it holds
                    # (`studio init` over what an interrupted init left names the leftover and how to remove it)
                try:
                    func(*args, **kwargs)
                except BaseException:  # an error or Ctrl-C: no half-written folder under the name the user gave
                    for folder in new_folders:  # not a folder of the user's (or another run's report) made
                        if removable(folder):  # under that name while this run worked (its writer refused it)
                            shutil.rmtree(folder, ignore_errors=True)
                    raise

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return command

    return decorate


def _parameter_label(sig: inspect.Signature, name: str) -> str:
    """How the command line spells parameter ``name``: its first flag (``--report``) or, for an argument, OUT."""
    default = sig.parameters[name].default if name in sig.parameters else None
    is_option = bool(getattr(default, "param_decls", None)) or isinstance(default, typer.models.OptionInfo)
    return option_flags(default, name)[0] if is_option else name.upper()


def _refuse_stdin_twice(sig: inspect.Signature, kwargs: dict[str, Any]) -> None:
    """Two file arguments given as ``-``: the first read all of standard input and the second found it "empty";
    say so before anything is read."""
    from vistkit.errors import InputError

    piped: list[str] = []
    total = 0
    for name, value in kwargs.items():
        values = value if isinstance(value, list | tuple) else [value]
        n = sum(1 for v in values if isinstance(v, Path) and str(v) == "-")
        total += n
        if n:
            label = _parameter_label(sig, name)
            piped.append(label if n == 1 else f"{label} ({n} times)")
    if total > 1:
        raise InputError(
            f"{' and '.join(piped)} {'are' if len(piped) > 1 else 'is'} -, but standard input can be read only once; "
            "give all but one of them as files"
        )


def option_flags(default: Any, name: str) -> list[str]:
    """The flags of a typer option parameter (``--output``, ``-o``), from its ``typer.Option(...)`` default."""
    decls = [d for d in getattr(default, "param_decls", None) or () if isinstance(d, str)]
    flags = [f for d in decls for f in d.split("/") if f.startswith("-")]
    return flags or ["--" + name.replace("_", "-")]


def refuse_folder_spelling(flags: list[str]) -> None:
    """Refuse a file output typed as a folder (``--per-item out/``): typer's Path drops the trailing "/", so the
    file ``out`` was written where the user meant a folder. Reads the command line as typed (`vistkit.cli.RAW_ARGS`;
    in-process callers of the verb functions have none)."""
    from vistkit.cli import RAW_ARGS
    from vistkit.errors import InputError

    for i, token in enumerate(RAW_ARGS):
        if token == "--":
            break
        for flag in flags:
            value = RAW_ARGS[i + 1] if token == flag and i + 1 < len(RAW_ARGS) else None
            if token.startswith(flag + "="):  # --output=out/
                value = token[len(flag) + 1 :]
            elif not flag.startswith("--") and token.startswith(flag) and token != flag:  # -oout/
                value = token[len(flag) :]
            if value is not None and value != "-" and value.endswith(("/", os.sep)):
                raise InputError(
                    f"{flag} {value} ends with '{value[-1]}', so it names a folder, but {flag} writes one file: give a "
                    f"file name (e.g. {value.rstrip('/' + os.sep) or '.'}/items.csv)"
                )


def check_resamples(value: int | None) -> int | None:
    """Typer callback of the resample counts (--n-bootstrap, --bootstrap, --n-samples): 1 to MAX_BOOTSTRAP."""
    from vistkit.limits import MAX_BOOTSTRAP

    if value is not None and not 1 <= value <= MAX_BOOTSTRAP:
        raise typer.BadParameter(f"must be from 1 to {MAX_BOOTSTRAP:,} resamples, got {value:,}")
    return value


def check_seed(value: int | None) -> int | None:
    """Typer callback of --seed: a whole number from 0 (numpy's generators take no negative seed)."""
    if value is not None and value < 0:
        raise typer.BadParameter(f"must be 0 or more, got {value}")
    return value


def warn_few_resamples(
    *, confidence: float | None, n_bootstrap: int, flag: str = "--n-bootstrap", n_samples: int | None = None
) -> None:
    """Warn when a percentile interval at ``confidence`` rests on so few resamples (``n_bootstrap``) that less than
    one falls in each tail (`vistkit.meta.resample.few_resamples`), and when a significance test of ``n_samples``
    cannot give a p-value below the 0.05 or 0.01 that ``compare`` marks (its smallest is 1/(n + 1)). The numbers
    are still computed as asked."""
    from vistkit.errors import warn
    from vistkit.meta.resample import few_resamples

    if confidence is not None and (text := few_resamples(n_bootstrap, confidence=confidence, flag=flag)):
        warn(text)
    if n_samples is not None and n_samples + 1 <= 100:
        marks = "p < 0.05 (*) or p < 0.01 (**)" if n_samples + 1 <= 20 else "p < 0.01 (**)"
        warn(
            f"--n-samples {n_samples:,} can give no p-value below 1/{n_samples + 1:,} = {1 / (n_samples + 1):.3g}, "
            f"so no system can be marked {marks}; use at least 1,000"
        )


def check_confidence(value: float | None) -> float | None:
    """Typer callback of --confidence: a level strictly between 0 and 1 (NaN and infinities refused), checked
    before any scoring (a late refusal would waste the scoring and leave a ``--per-item`` file behind)."""
    if value is not None and not 0.0 < value < 1.0:
        raise typer.BadParameter(f"must be between 0 and 1, e.g. 0.95, got {value}")
    return value


def parse_metric_selection(value: str | list[str]) -> list[str]:
    """`parse_metric_names`, with ``all`` only alone (``-m rovist-nr,all`` is refused in one sentence)."""
    from vistkit.errors import InputError

    names = parse_metric_names(value)
    if "all" in names and len(names) > 1:
        others = ", ".join(n for n in names if n != "all")
        raise InputError(
            f"--metrics all must be used alone (it runs every metric these inputs allow), not with {others}"
        )
    return names


def _repeated_single_values(order: list[Any]) -> list[tuple[str, int]]:
    """``(option, times)`` for each single-value option that ``order`` (click's parse order) holds twice or
    more; flags, counters and repeatable options may repeat."""
    counts: dict[int, int] = {}
    params: dict[int, Any] = {}
    for param in order:
        if (
            getattr(param, "param_type_name", "") != "option"
            or getattr(param, "multiple", False)
            or getattr(param, "is_flag", False)
            or getattr(param, "count", False)
        ):
            continue
        counts[id(param)] = counts.get(id(param), 0) + 1
        params[id(param)] = param
    return [("/".join(sorted(params[k].opts, key=len)), n) for k, n in counts.items() if n > 1]


def _takes_paths(descriptor: Any) -> bool:
    """Whether a typer parameter (its type descriptor) takes a path or a list of paths."""
    from typing import get_args

    if getattr(descriptor, "is_path", False):
        return True
    args = get_args(getattr(descriptor, "annotation", None)) if getattr(descriptor, "is_list", False) else ()
    return any(isinstance(a, type) and issubclass(a, Path) for a in args)


def _refuse_blank_paths(params: list[Any], opts: dict[str, Any], ctx: Any) -> None:
    """A file or folder given as empty or blank text (``-r "$REFS"`` with REFS unset) is a usage error: Python
    reads ``""`` as the current folder ("error: . is a folder"), and an output named ``" "`` was written as a file no
    listing shows."""
    for param in params:
        if param.name not in opts or not _takes_paths(getattr(param, "type_descriptor", None)):
            continue
        given = opts[param.name]
        values = given if isinstance(given, list | tuple) else [given]
        if any(isinstance(v, str) and not v.strip() for v in values):
            blank = next(v for v in values if isinstance(v, str) and not v.strip())
            what = "empty" if blank == "" else f"blank ({blank!r})"
            raise typer.BadParameter(
                f"the path is {what}: give a file name (a shell variable that is unset or empty, as in \"$FILE\", "
                "gives an empty one)",
                ctx=ctx,
                param=param,
            )


def _short_equals(params: list[Any], args: list[str], opts: dict[str, Any]) -> None:
    """``-r=refs.json`` (the habit of ``--references=refs.json``) gave ``-r`` the value ``=refs.json``, which then
    failed as "=refs.json: no such file" or "unknown metric '=bleu'": it reads as ``-r refs.json``, as argparse and
    `refuse_folder_spelling` read it (``opts`` is changed in place)."""
    shorts = {
        flag: param
        for param in params
        if getattr(param, "param_type_name", "") == "option"
        and not getattr(param, "is_flag", False)
        and not getattr(param, "count", False)
        for flag in param.opts
        if not flag.startswith("--")
    }
    for token in args:
        if token == "--":
            return
        flag, equals, value = token.partition("=")
        if not equals or flag not in shorts:
            continue
        name = shorts[flag].name
        given = opts.get(name)
        if isinstance(given, list | tuple) and "=" + value in given:
            at = list(given).index("=" + value)
            opts[name] = type(given)([*given[:at], value, *given[at + 1 :]])
        elif given == "=" + value:
            opts[name] = value
        # else: the token was another option's value


class OnceCommand(TyperCommand):
    """A verb whose single-value options may be given once: ``-r A -r B`` is a usage error in one sentence
    instead of silently keeping B, and so is an empty or blank path (``-r "$UNSET"``); ``-r=FILE`` reads as
    ``-r FILE``. Every verb is one (`vistkit.cli`'s conventions make it so; ``@app.command(cls=OnceCommand)``
    says it explicitly)."""

    def make_parser(self, ctx: Any) -> Any:
        """Click's parser, changed to fail on a single-value option given twice and a blank path, and to read
        ``-r=FILE`` as ``-r FILE``."""
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_once(args: list[str]) -> Any:
            typed = list(args)  # (click's parser empties the list it is given)
            opts, rest, order = parse(args=args)
            if (repeated := _repeated_single_values(order)) and not ctx.resilient_parsing:
                name, times = repeated[0]
                ctx.fail(f"{name} is given {times} times but takes one value: give it once")
            if not ctx.resilient_parsing:
                _short_equals(self.params, typed, opts)
                _refuse_blank_paths(self.params, opts, ctx)
            return opts, rest, order

        setattr(parser, "parse_args", parse_once)  # noqa: B010  (click keeps the parse order local)
        return parser
