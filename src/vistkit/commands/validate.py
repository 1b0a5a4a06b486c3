"""``vistkit validate``: check a VIST-challenge submission with the 2018 challenge's checks and vistkit's."""

from __future__ import annotations

from pathlib import Path

import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo, writes_output
from vistkit.report.tables import OutputFormat, dumps_json, render_table


@app.command()
@writes_output(force_flag=False)  # writes no file: refuses only a stdout appended to one of its inputs
def validate(
    submission: Path = typer.Argument(
        ..., help="The submission JSON (the challenge format); - reads standard input."
    ),
    template: Path | None = typer.Option(
        None,
        "--template",
        help="Challenge template (vist-challenge-template.json): the required sequences; - reads standard input.",
    ),
    references: Path | None = typer.Option(
        None,
        "--references",
        "-r",
        help="Human stories with photo sequences (e.g. the VIST test SIS); - reads standard input.",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Check SUBMISSION as the NAACL 2018 challenge did (same order and messages), then vistkit's own checks.

    Messages write a photo sequence as the challenge does, every id followed by '-' ("1-2-3-4-5-"); JSON
    output lists sequences as vistkit keys, ids joined by '-' ("1-2-3-4-5"). Without --template/--references
    the "all required stories" check is skipped. Exit code 0 when valid (warnings allowed), 1 when a check
    fails.
    """
    from vistkit.data.validate import ROW_COLUMNS, validate_submission

    report = validate_submission(submission, template=template, references=references)
    if fmt is OutputFormat.JSON:
        echo(dumps_json(report.as_dict()))
    elif fmt is OutputFormat.TEXT:
        echo("\n".join(report.lines()))
    else:  # one row per offender (every sequence and story at fault), with the detail JSON has
        title = f"validate {report.path}: {report.summary().removeprefix('(vistkit) ')}"
        echo(render_table(list(ROW_COLUMNS), report.rows(), fmt, title=title))
    if not report.ok:
        raise typer.Exit(1)
