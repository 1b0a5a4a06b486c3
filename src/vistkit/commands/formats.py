"""``vistkit formats``: the story formats vistkit reads (and how each is keyed)."""

from __future__ import annotations

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo
from vistkit.report.tables import OutputFormat, render_table

FORMAT_ROWS = [
    [
        "sis",
        '{"annotations": [[storylet], ...]} (VIST SIS json; flat list also read)',
        "story, sequence, album",
    ],
    [
        "storylets",
        "[storylet, ...] (bare list, e.g. PR_VIST.json.zip; --hyp-field predicted_story)",
        "story, sequence, album",
    ],
    [
        "challenge",
        '{"output_stories": [{album_id, photo_sequence, story_text_normalized}]}',
        "sequence, album",
    ],
    ["story-dict", "{story_id: text} (dHM, GROOViST)", "story"],
    ["tapm", '{"album_p1_p2_p3_p4_p5": text}', "sequence, album"],
    ["tapm-nested", '{album: {"p1_p2_p3_p4_p5": text}}', "sequence, album"],
    ["arel", "{album_id: [text, ...]} (AREL predictions and references)", "album (story = album#i)"],
    [
        "jsonl",
        "one object per line: text + story_id / photo_ids / album_id / sentences / system",
        "any given",
    ],
    [
        "csv",
        "header row with the same column names (photo_ids '-'-joined, sentences '|||'-joined)",
        "any given",
    ],
]


@app.command()
def formats(fmt: OutputFormat = FormatOption) -> None:
    """List the story formats vistkit reads (auto-detected; force one with --hyp-format/--ref-format)."""
    echo(
        render_table(
            ["format", "shape", "keys it supports"],
            FORMAT_ROWS,
            fmt,
            title="story formats",
            caption=".zip and .gz are opened transparently; JSONL and CSV are streamed.",
        )
    )
