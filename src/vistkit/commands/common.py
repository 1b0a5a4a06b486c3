"""Options and helpers shared by commands."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from vistkit.report.tables import OutputFormat

if TYPE_CHECKING:
    from vistkit.engine import Engine

FormatOption = typer.Option(
    OutputFormat.TEXT, "--format", "-f", help="Output format: text, json, csv or latex."
)

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
    None, "--hyp-format", metavar="FORMAT", help=f"Force the story file format: {STORY_FORMATS.replace('|', ', ')}."
)
RefFormatOption = typer.Option(
    None, "--ref-format", metavar="FORMAT", help="Force the reference file format (as --hyp-format)."
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
)
AddressOption = typer.Option(
    None,
    "--address",
    metavar="ADDRESS",
    help="--engine ray: the cluster (auto, or ray://HOST:PORT); default: a new local one.",
)
WorkersOption = typer.Option(
    None, "--workers", help="--engine ray: worker actors (default: the cluster's CPUs, or GPUs / GPUs per worker)."
)
GpusPerWorkerOption = typer.Option(
    0.0, "--num-gpus-per-worker", help="--engine ray: GPUs each worker reserves (e.g. 1, or 0.5 to share one)."
)


def open_engine(kind: str, address: str | None, workers: int | None, num_gpus_per_worker: float) -> Engine:
    """The engine the command's ``--engine`` options ask for (close it, or use it in a ``with`` block)."""
    from vistkit.engine import make_engine

    return make_engine(kind, address=address, workers=workers, num_gpus_per_worker=num_gpus_per_worker)


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
    typer.echo(text.rstrip("\n"))


def note(text: str) -> None:
    """An informative line on stderr (a metric skipped and why); silent under -q/--quiet."""
    from vistkit import progress

    if not progress.is_quiet():
        typer.secho(text, fg=typer.colors.YELLOW, err=True)


def emit(text: str, *, to_stderr: bool = False) -> None:
    """The command's result: on stdout, or on stderr when stdout carries a ``--per-item -`` CSV."""
    typer.echo(text.rstrip("\n"), err=to_stderr)


@contextlib.contextmanager
def output_file(path: Path | str) -> Iterator[TextIO]:
    """A text file to write (UTF-8, CSV-ready newlines), or standard output for ``-``."""
    if str(path) == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8", newline="") as fh:
        yield fh


def existing(path: Path | None) -> Path | None:
    return path
