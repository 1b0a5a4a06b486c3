"""``vistkit formats``: every input vistkit reads (stories, and the other files the verbs take), with the
encoding and archive rules shared by all of them (`vistkit.data.readers`)."""

from __future__ import annotations

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo
from vistkit.report.tables import OutputFormat, render_table

FORMAT_ROWS = [
    [
        "sis",
        '{"annotations": [[storylet], ...]} (VIST SIS json; flat list also read; a DII file, captions without '
        "stories, is refused naming it)",
        "sequence (default), story, album",
    ],
    [
        "storylets",
        "[storylet, ...] (bare list, e.g. PR_VIST.json.zip; --hyp-field predicted_story: a field equal on every "
        "storylet of every story is one text per story, else one sentence per storylet)",
        "sequence (default), story, album",
    ],
    [
        "challenge",
        '{"output_stories": [{album_id, photo_sequence, story_text_normalized}]}',
        "sequence (default), album (story = the sequence)",
    ],
    ["story-dict", "{story_id: text} (dHM, GROOViST)", "story (default)"],
    ["tapm", '{"album_p1_p2_p3_p4_p5": text}', "sequence (default), album (story = the key)"],
    ["tapm-nested", '{album: {"p1_p2_p3_p4_p5": text}}', "sequence (default), album (story = album_p1_...)"],
    ["arel", "{album_id: [text, ...]} (AREL predictions and references; {album_id: text} with --hyp-format arel)",
     "story (default: album, or album#i), album"],
    [
        "jsonl",
        "one object per line: text + story_id / photo_ids / album_id / sentences / system (in a .json file: a "
        "list of such objects, or one object alone, which is one story)",
        "any given (default sequence when every story has photo_ids, else story)",
    ],
    [
        "csv",
        "header row with the same column names (photo_ids '-'-joined, sentences '|||'-joined)",
        "any given (default as jsonl)",
    ],
    [
        "pairs",
        "CSV in the VHED layout: sent1, sent2, label (or avg_rank_base/avg_rank_comp), story_id, img_seq, "
        "model_base, model_comp, agreement, order, rank_norm (meta pairs/gap/beats-ref/compare, vrank); agreement "
        "and order are whole counts (agreement 0-100, at most the optional 'workers' column); a header without "
        "rows is refused; rows repeating an earlier row exactly are counted, with one warning",
        "pair (one row each)",
    ],
    ["rankings", "CSV: task, worker, story, rank (+ text, system, story_id, img_seq) (meta rankings-to-pairs)", "task"],
    [
        "likert",
        "CSV: system (or model), item (or story_id), worker, one numeric column per aspect (+ text) "
        "(meta correlate); empty or nan = missing, infinity refused; ratings must lie on --scale (default 1-5); "
        "a system + item + worker given twice is refused",
        "system + item",
    ],
    ["error labels", "CSV: system, item, one 0/1 column per error type, e.g. Gram, Rep (meta errors)", "system + item"],
    [
        "per-item scores",
        "CSV: id, then one column per metric, as `vistkit score --per-item` writes (distance --human/--model)",
        "id",
    ],
    [
        "dHM scores",
        "a prefix DIR/run naming run_G.json {story_id: score}, run_C.csv and run_R.csv (story_id,score) "
        "(distance --human/--model)",
        "story",
    ],
    ["regions", "CSV: image_id, bbox '[x1, y1, x2, y2]' (as vist_entities.csv) (score/distance --regions)", "photo"],
    ["photo map", "JSON {story_id: [photo ids in order]} (score/distance --photos)", "story"],
    ["IDF table", "JSON {word: idf} for rovist-vg (-O rovist-vg.idf=PATH; idf_dict.pkl only with trust)", "word"],
    ["word vectors", "GloVe / word2vec text: 'word v1 v2 ...' per line (-O rovist-vg.glove=PATH)", "word"],
    ["noun phrases", "JSON {story_id: [phrases]} as GROOViST's extract_nphrases.py writes (-O groovist.noun_phrases=)",
     "story"],
    ["BERTScore baseline", "CSV LAYER,P,R,F as bert_score's rescale_baseline files (-O bertscore.baseline_path=)",
     "layer"],
]

CAPTION = (
    "Every file: UTF-8, with or without a byte-order mark (BOM; Excel's 'CSV UTF-8'); other encodings are "
    "refused with one error naming the line and byte (and what a Windows-1252 byte stands for), and a spreadsheet "
    "(.xlsx, .xls, .ods) is named as such, to be saved as CSV. .gz and .zip (any letter case) are opened "
    "transparently; other archives "
    "(bz2, xz, tar ...) are named in the error; a zip must hold one file "
    "(__MACOSX, .DS_Store, Thumbs.db and desktop.ini ignored; at most 10,000 members; Deflate64 or encrypted "
    "members are named, to be re-zipped) and is read in the format of that file's name (stories.zip holding "
    "stories.jsonl reads as JSONL), a zip with several is refused naming them: choose one as ARCHIVE.zip:MEMBER; "
    "member names with '..' or a leading '/' and archives inside an archive are refused. .tsv reads as "
    "tab-separated; a story file whose name does not say its format (no suffix, .txt) is read as - is, from its "
    "content; JSONL and CSV are streamed, and a CSV header row repeated inside the file (files joined with cat) is "
    "refused naming its line. A CSV cell opened by a quote may hold line breaks, but lines inside one that read as "
    "rows of their own (a story starting with '\"' in a file written without CSV quoting) are warned about; a "
    "story file of plain text, one story per line without ids or header, is refused saying so. A key given twice "
    "in one JSON object (two stories with one id, a "
    "setting twice) is refused naming it. Ids (story, album, photo) are compared without the spaces around them "
    "and in Unicode NFC (an accent typed as a separate mark matches the composed letter), letter case kept; an "
    "id holding a control or invisible character (tab, "
    "newline, zero-width space, byte-order mark) is refused, and so is a story holding a NUL character. A JSONL "
    "field or CSV column named like one vistkit reads but written otherwise (Story_ID, ' album_id', storyId) is "
    "refused naming the name to use (other fields are ignored); a story whose 'sentences' hold other words than its "
    "'text' is read as given, with one warning per file (-O METRIC.sentences=source reads the sentences), and so "
    "is a CSV id column whose every id is a float such as 45530.0 (pandas' writing of whole numbers). The "
    "'limit:' rows bound memory and time on any input (the third column: how to change one)."
)

WRITING = (
    "Every output vistkit writes (--per-item, -o/--output, --report, --keep, models convert OUT): never onto "
    "one of the command's inputs (the same path, a symlink or a hard link; ARCHIVE.zip:MEMBER counts as the "
    "archive); an existing file is replaced only with --force; a report or model folder is written only if it is "
    "new, empty or marked by vistkit (its .vistkit-output file; replacing it needs --force), never a folder of "
    "yours; each file goes to a temporary file in the same folder and is renamed into place, so a crash or a "
    "full disk never leaves half a file. CSV files: a text cell that starts with =, +, -, @, a tab or a carriage "
    "return (a spreadsheet formula) is written with a leading ' (OWASP); numbers, and text that is a plain "
    "number such as -0.5, are written as they are. vistkit's CSV readers drop exactly that one ' again, so "
    "exported files read back unchanged."
)


def _limit_rows() -> list[list[str]]:
    from vistkit.limits import LIMIT_ROWS

    return [[f"limit: {name}", what, "override: " + how if how != "-" else "fixed"] for name, what, how in LIMIT_ROWS]


@app.command()
def formats(fmt: OutputFormat = FormatOption) -> None:
    """List every input vistkit reads: story formats (auto-detected; force one with --hyp-format/--ref-format),
    human judgements, score tables, regions and photo maps, with the encoding and zip rules."""
    # JSON and CSV have no caption: the reading and writing rules are two rows of their own there
    rules = (
        [["rule: reading", CAPTION, "-"], ["rule: writing", WRITING, "-"]]
        if fmt in (OutputFormat.JSON, OutputFormat.CSV)
        else []
    )
    echo(
        render_table(
            ["format", "shape", "keys it supports"],
            FORMAT_ROWS + _limit_rows() + rules,
            fmt,
            title="input formats",
            caption=CAPTION,
        )
    )
    if fmt is OutputFormat.TEXT:
        echo("\n" + WRITING)
