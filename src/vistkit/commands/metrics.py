"""``vistkit metrics``: list metrics, or show one metric's card."""

from __future__ import annotations

import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo
from vistkit.metrics.base import Metric, get_metric_class, list_metrics, unavailable_metrics
from vistkit.report.tables import OutputFormat, dumps_json, render_table


def _bounds(cls: type[Metric]) -> str:
    lo = "-inf" if cls.lower_bound is None else f"{cls.lower_bound:g}"
    hi = "inf" if cls.upper_bound is None else f"{cls.upper_bound:g}"
    return f"[{lo}, {hi}]"


def _needs(cls: type[Metric]) -> str:
    needs = [
        n
        for n, flag in (
            ("references", cls.needs_references),
            ("images", cls.needs_images),
            ("human story", cls.needs_human_story),
        )
        if flag
    ]
    if cls.weights:
        needs.append(f"weights: {cls.weights}")
    return ", ".join(needs) or "nothing"


def render_markdown(text: str) -> str:
    """Markdown as a terminal shows it (rich: headings, emphasis, code), at the table width."""
    from rich.console import Console
    from rich.markdown import Markdown

    from vistkit.report.tables import RenderBuffer, table_width

    console = Console(file=RenderBuffer(), width=table_width(), force_terminal=False, color_system=None)
    console.print(Markdown(text))
    return str(console.file.getvalue())  # type: ignore[attr-defined]


@app.command()
def metrics(
    info: str | None = typer.Option(
        None,
        "--info",
        metavar="NAME",
        help="Show the card of this metric (Markdown, rendered; -f json|csv|latex: its fields).",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """List the metrics (with what they need and their range), or show one card with --info NAME."""
    if info is not None:
        cls = get_metric_class(info)
        card = {"name": cls.name, **cls.card.__dict__, "weights": cls.weights or None}
        if fmt is OutputFormat.JSON:
            echo(dumps_json(card))
        elif fmt is OutputFormat.TEXT:
            echo(render_markdown(cls.card.render(cls.name)))
        else:  # csv / latex: the card's fields as a table (both printed the rendered Markdown)
            echo(render_table(["field", "value"], [[k, v] for k, v in card.items()], fmt, title=cls.name))
        return
    rows = [
        [name, cls.card.summary, _needs(cls), _bounds(cls), "higher" if cls.higher_is_better else "lower"]
        for name, cls in list_metrics().items()
    ]
    rows += [[name, f"UNAVAILABLE: {reason}", "", "", ""] for name, reason in unavailable_metrics().items()]
    echo(render_table(["metric", "what it measures", "needs", "range", "better"], rows, fmt, title="metrics"))
