"""Options and helpers shared by commands."""

from __future__ import annotations

from pathlib import Path

import typer

from vistkit.report.tables import OutputFormat

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
