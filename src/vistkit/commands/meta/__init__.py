"""``vistkit meta``: how well does a metric agree with people? (meta-evaluation on human-judgement data)

Sub-commands: ``pairs`` (pair accuracy per agreement subset and pair kind), ``gap`` (accuracy by ranking-gap
bucket), ``beats-ref`` (machine-beats-reference ratio), ``compare`` (significance between two metrics' pair
accuracies), ``correlate`` (story/system-level correlations with Likert scores + Williams test), ``errors``
(point-biserial r with binary error labels), and the builders ``build-pairs`` (human-vs-machine proxy pairs)
and ``rankings-to-pairs`` (raw rankings -> VHED pairs). Every assessment prints ``--format
text|json|csv|latex``; ``--report DIR`` also writes tables, figures and a self-contained HTML page.
"""

from __future__ import annotations

import importlib

import typer

from vistkit.cli import app

meta_app = typer.Typer(
    help="Meta-evaluation: how well does a metric agree with human judgements?", no_args_is_help=True
)
app.add_typer(meta_app, name="meta")

# one module per sub-command group; each registers its commands on `meta_app` when imported (help lists them
# in this order)
for _group in ("pairs", "judged", "builders"):
    importlib.import_module(f"vistkit.commands.meta.{_group}")
