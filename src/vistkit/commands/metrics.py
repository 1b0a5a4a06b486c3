"""``vistkit metrics``: list metrics, or show one metric's card."""

from __future__ import annotations

import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo
from vistkit.errors import InputError
from vistkit.metrics.base import Metric, get_metric_class, list_metrics, unavailable_metrics
from vistkit.report.tables import OutputFormat, dumps_json, render_table


def _bounds(cls: type[Metric]) -> str:
    lo = "-inf" if cls.lower_bound is None else f"{cls.lower_bound:g}"
    hi = "inf" if cls.upper_bound is None else f"{cls.upper_bound:g}"
    return f"[{lo}, {hi}]"


def option_defaults(cls: type[Metric]) -> dict[str, object]:
    """The metric's ``-O NAME.OPTION=VALUE`` options and their defaults, in the order its constructor takes them."""
    import inspect

    from vistkit.metrics.base import metric_options

    params = inspect.signature(cls.__init__).parameters
    return {name: params[name].default for name in metric_options(cls)}


def _shown_default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value!r}" if isinstance(value, str) and value != value.strip() else str(value)


def needs_text(cls: type[Metric], *, none: str = "-") -> str:
    """What a metric needs besides the stories (``references, images, weights: ...``), or ``none``: the weights
    it needs that vistkit does not ship are named, so a card never says a checkpoint metric needs nothing."""
    flags = (
        ("references", cls.needs_references),
        ("images", cls.needs_images),
        ("human story", cls.needs_human_story),
    )
    needs = [n for n, flag in flags if flag]
    if cls.needs_java:
        needs.append("Java 8+")
    if cls.weights:
        needs.append(f"weights: {cls.weights}")
    return ", ".join(needs) or none


def card_page(cls: type[Metric]) -> str:
    """The card as Markdown, with the options (and their defaults) and the declared properties the code gives
    the metric: what `vistkit metrics --info NAME` shows and docs/metrics/NAME.md holds."""
    needs = needs_text(cls)
    page = cls.card.render(cls.name)
    options = option_defaults(cls)
    if options:
        shown = ", ".join(f"`{k}` ({_shown_default(v)})" for k, v in options.items())
        page += f"\n\n## Options\n`-O {cls.name}.OPTION=VALUE`, default in brackets: {shown}."
    better = "higher" if cls.higher_is_better else "lower"
    return page + f"\n\n## Declared properties\nneeds: {needs}; range: {_bounds(cls)}; {better} is better.\n"


#: the widest a rendered card is drawn: rich pads every line to the width, so COLUMNS=10000000 made a 4 KB card
#: 180 MB (and 760 MB of memory); prose is no easier to read wider than this
MAX_CARD_WIDTH = 200


def render_markdown(text: str) -> str:
    """Markdown as a terminal shows it (rich: headings, emphasis, code), at the table width (at most
    `MAX_CARD_WIDTH`), without the spaces rich pads each line with."""
    from rich.console import Console
    from rich.markdown import Markdown

    from vistkit.report.tables import RenderBuffer, table_width

    width = min(table_width(), MAX_CARD_WIDTH)
    console = Console(file=RenderBuffer(), width=width, force_terminal=False, color_system=None)
    console.print(Markdown(text))
    rendered = str(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in rendered.splitlines()) + "\n"


@app.command()
def metrics(
    name: str | None = typer.Argument(
        None, metavar="NAME", help="Show the card of this metric (as --info NAME)."
    ),
    info: str | None = typer.Option(
        None,
        "--info",
        metavar="NAME",
        help="Show the card of this metric (Markdown, rendered; -f json|csv|latex: its fields).",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """List the metrics (with what they need and their range), or show one card: NAME or --info NAME."""
    if name is not None and info is not None:
        raise typer.BadParameter(
            f"give one metric, either as NAME or as --info NAME, not both ({name!r:.60} and --info {info:.60})",
            param_hint="NAME",
        )
    info = info if name is None else name
    if info is not None:
        if not info.strip():  # "unknown metric ''" read as if some metric had that odd name
            raise InputError(
                f"the metric name {info!r} is empty: give one of the names `vistkit metrics` lists (e.g. bleu-4)"
            )
        if "," in info:  # "unknown metric 'a,b' (did you mean a, b?)" read as two guesses
            from vistkit.commands.common import parse_metric_names

            first = next((n for n in parse_metric_names(info) if n in list_metrics()), "bleu-4")
            raise InputError(
                f"a card is one metric's, and {info!r} is a comma-separated list: give one metric name, e.g. "
                f"`vistkit metrics --info {first}`"
            )
        cls = get_metric_class(info)
        card = {"name": cls.name, **cls.card.__dict__, "weights": cls.weights or None}
        card["options"] = {
            k: v if v is None or isinstance(v, bool | int | float | str) else str(v)
            for k, v in option_defaults(cls).items()
        }
        if fmt is OutputFormat.JSON:
            echo(dumps_json(card))
        elif fmt is OutputFormat.TEXT:
            echo(render_markdown(card_page(cls)))
        else:  # csv / latex: the card's fields as a table (both printed the rendered Markdown)
            echo(render_table(["field", "value"], [[k, v] for k, v in card.items()], fmt, title=cls.name))
        return
    rows = [
        [
            name,
            cls.card.summary,
            needs_text(cls, none="nothing"),
            _bounds(cls),
            "higher" if cls.higher_is_better else "lower",
        ]
        for name, cls in list_metrics().items()
    ]
    rows += [[name, f"UNAVAILABLE: {reason}", "", "", ""] for name, reason in unavailable_metrics().items()]
    echo(render_table(["metric", "what it measures", "needs", "range", "better"], rows, fmt, title="metrics"))
