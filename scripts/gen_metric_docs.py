"""Write one Markdown page per metric card into docs/metrics/ (run after changing a card).

    .venv/bin/python scripts/gen_metric_docs.py
"""

from __future__ import annotations

from pathlib import Path

from vistkit.commands.metrics import card_page, needs_text
from vistkit.metrics.base import list_metrics, unavailable_metrics

OUT = Path(__file__).resolve().parents[1] / "docs" / "metrics"


def _bounds(cls: type) -> str:
    lo = "-inf" if cls.lower_bound is None else f"{cls.lower_bound:g}"
    hi = "inf" if cls.upper_bound is None else f"{cls.upper_bound:g}"
    return f"[{lo}, {hi}]"


def pages() -> dict[str, str]:
    """File name -> Markdown of every page of docs/metrics (one per metric card, and the README index)."""
    out: dict[str, str] = {}
    index = [
        "# Metric cards",
        "",
        "Generated from the cards in the code (`vistkit metrics --info NAME` shows the same text).",
        "",
        "| metric | needs | range | better | summary |",
        "|---|---|---|---|---|",
    ]
    for name, cls in list_metrics().items():
        needs = needs_text(cls)
        better = "higher" if cls.higher_is_better else "lower"
        index.append(f"| [{name}]({name}.md) | {needs} | {_bounds(cls)} | {better} | {cls.card.summary} |")
        out[f"{name}.md"] = card_page(cls)
    index += ["", "## Unavailable here", ""]
    index += [f"- `{name}`: {reason}" for name, reason in unavailable_metrics().items()]
    out["README.md"] = "\n".join(index) + "\n"
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    written = pages()
    for name, text in written.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(written) - 1} cards to {OUT}")


if __name__ == "__main__":
    main()
