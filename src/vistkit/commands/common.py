"""Options and helpers shared by commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vistkit.report.tables import OutputFormat

if TYPE_CHECKING:
    from vistkit.engine import Engine

FormatOption = typer.Option(
    OutputFormat.TEXT, "--format", "-f", help="Output format: text, json, csv or latex."
)

# options of `vistkit score` and `vistkit compare` (and `vistkit meta`: RefFormatOption, MetricOptionOption)
MetricsOption = typer.Option(..., "--metrics", "-m", help="Metric names, comma-separated.")
ReferencesOption = typer.Option(None, "--references", "-r", help="Reference (human) stories.")
TemplateOption = typer.Option(
    None, "--template", help="Challenge template: score only its sequences, require a story for each."
)
KeyOption = typer.Option(
    None, "--key", "-k", help="Match stories by story, sequence or album (default: sequence if known)."
)
RefFormatOption = typer.Option(None, "--ref-format", help="Force the reference file format.")
MetricOptionOption = typer.Option([], "--option", "-o", help="METRIC.OPTION=VALUE, repeatable.")


# where scoring runs (score, compare, meta pairs, distance --human-stories): vistkit.engine
EngineOption = typer.Option(
    "local", "--engine", help="Where to score: local (this process) or ray (a Ray cluster: pip install 'vistkit[ray]')."
)
AddressOption = typer.Option(
    None, "--address", help="--engine ray: the cluster (auto, or ray://HOST:PORT); default: a new local one."
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

    if kind == "local" and (workers is not None or num_gpus_per_worker):
        from vistkit.errors import warn

        given = "--workers" if workers is not None else "--num-gpus-per-worker"
        warn(f"{given} is ignored: it applies to --engine ray, and this runs on the local engine")
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


def existing(path: Path | None) -> Path | None:
    return path


def check_resamples(value: int | None) -> int | None:
    """Typer callback of the resample counts (--n-bootstrap, --bootstrap, --n-samples): 1 to MAX_BOOTSTRAP."""
    from vistkit.limits import MAX_BOOTSTRAP

    if value is not None and not 1 <= value <= MAX_BOOTSTRAP:
        raise typer.BadParameter(f"must be from 1 to {MAX_BOOTSTRAP:,} resamples, got {value:,}")
    return value


def check_seed(value: int) -> int:
    """Typer callback of --seed: a whole number from 0 (numpy's generators take no negative seed)."""
    if value < 0:
        raise typer.BadParameter(f"must be 0 or more, got {value}")
    return value
