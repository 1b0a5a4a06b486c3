"""Render result tables as text (rich), JSON, CSV or LaTeX: one place for every command's ``--format``.

Numbers keep full precision in JSON and CSV; text and LaTeX round for display (4 decimals, as the papers do).
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any


class OutputFormat(StrEnum):
    """The output formats of tables: text, JSON, CSV or LaTeX."""

    TEXT = "text"
    JSON = "json"
    CSV = "csv"
    LATEX = "latex"


_LARGE = 1e12  # numbers at least this large are shown in scientific notation


def plain(value: Any) -> Any:
    """A numpy scalar (``np.float64``, ``np.float32``, ``np.int64``, ``np.bool_``) as the Python number it holds;
    anything else as it is. A table cell is written from it (numpy 2's repr of 0.5 is ``np.float64(0.5)``)."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def fmt_number(value: Any, digits: int = 4) -> str:
    """Display form of a cell: floats rounded, NaN as 'n/a'; a value that is not zero but would round to zero in
    ``digits`` decimals in two significant digits (BLEU-4 of 50 LLaVA stories, 8.1e-07, is not 0.0000)."""
    value = plain(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if value == 0.0:  # negative zero (a difference of equal scores) is shown as 0, never "-0.0000"
            value = 0.0
        if value != 0.0 and abs(value) < 0.5 * 10.0**-digits:
            return f"{value:.1e}"
        if math.isfinite(value) and abs(value) >= _LARGE:  # 1e20 in 4 decimals was 25 digits wide
            return f"{value:.{digits}e}"
        return f"{value:.{digits}f}"
    return "" if value is None else str(value)


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; NaN/inf become null (JSON has no NaN); numpy arrays lists, paths strings, sets sorted
    lists (each was an 'unexpected error' from json.dumps or ndarray.item)."""
    import os

    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return [to_jsonable(v) for v in sorted(obj, key=str)]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if getattr(obj, "ndim", 0) and callable(getattr(obj, "tolist", None)):  # numpy array
        return to_jsonable(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    return obj


def dumps_json(obj: Any) -> str:
    """``obj`` as indented JSON (`to_jsonable`: NaN and infinities as null), non-ASCII characters kept."""
    return json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False)


def render_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: OutputFormat | str,
    *,
    title: str | None = None,
    caption: str | None = None,
    digits: int = 4,
) -> str:
    """One table in the chosen format (JSON: a list of row objects)."""
    fmt = OutputFormat(fmt)
    rows = [[plain(v) for v in r] for r in rows]
    if fmt is OutputFormat.JSON:
        return dumps_json([dict(zip(columns, r, strict=True)) for r in rows])
    if fmt is OutputFormat.CSV:
        from vistkit.data.output import csv_writer  # cells neutralised against formula injection

        buf = io.StringIO()
        w = csv_writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            # an undefined number is an empty cell (as `score --per-item` writes it): "nan" made R and
            # spreadsheets read the whole column as text
            w.writerow(["" if _missing(v) else (repr(v) if isinstance(v, float) else v) for v in r])
        return buf.getvalue()
    if fmt is OutputFormat.LATEX:
        return latex_table(columns, rows, caption=caption or title, digits=digits)
    return text_table(columns, rows, title=title, caption=caption, digits=digits)


def _missing(value: Any) -> bool:
    """None or a float NaN (numpy's too): an undefined cell."""
    return value is None or (isinstance(value, float) and value != value)


class RenderBuffer(io.StringIO):
    """Where rich renders a text table or card: a string buffer that reports standard output's encoding, so that
    rich draws the borders in ASCII when they would not survive that encoding (``PYTHONIOENCODING=latin-1``, a
    cp1252 pipe on Windows: the box characters printed as ``\\u250f`` escapes)."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """Standard output's encoding (its codec name), ``utf-8`` when unknown."""
        import codecs
        import sys

        name = getattr(sys.stdout, "encoding", None) or "utf-8"
        try:
            return codecs.lookup(name).name
        except LookupError:
            return "utf-8"


def table_width() -> int:
    """Width of text tables: the terminal's (``COLUMNS`` when set), 200 when the output is not a terminal;
    at least 40. Long cells wrap inside their column instead of widening the table."""
    import shutil

    return max(40, shutil.get_terminal_size(fallback=(200, 24)).columns)


_SHORT_NAME = 24  # a cell this short without spaces (a metric, a system) is a name: kept whole while there is room
_MAX_NAME = 40  # names up to this long (hub ids) are kept whole when all of them fit
_MIN_SHARE = 4  # before any column gets more, every column gets up to this many characters (one at a time)
_MIN_READABLE = 8  # prose columns get at least this many characters before names are widened
_MAX_LINK = 300  # a link is never folded (a folded link cannot be copied)


def _never_fold(cell: str) -> bool:
    """A number or a link: folding it would change what it reads as, or break copying it."""
    if any(ch.isspace() for ch in cell):
        return False
    if cell.startswith(("http://", "https://")) and len(cell) <= _MAX_LINK:
        return True
    try:
        float(cell)
    except ValueError:
        return cell == "n/a"
    return True


def _unbreakable(cell: str) -> int:
    """Width a cell needs so that no number or link in it folds: the whole cell when it is one, else its longest
    word that is a number with its brackets and marks (compare's ``0.0610 [0.0582, 0.0641]*`` folded to
    ``7.76`` / ``58`` at COLUMNS=40), or 0."""
    if _never_fold(cell):
        return _cell_width(cell)
    words = [w for w in cell.split() if _never_fold(w.strip("[](),;:*%")) and w.strip("[](),;:*%")]
    return max((_cell_width(w) for w in words), default=0)


def _rather_not_fold(cell: str, *, row_name: bool = False, limit: int = _SHORT_NAME) -> bool:
    """A name of at most ``limit`` characters (a metric, a system, a model id; the first column's row names
    may have spaces) or a short value such as a range: kept whole when there is room."""
    n = _cell_width(cell)
    return n <= (limit if row_name else 12) or (n <= limit and not any(ch.isspace() for ch in cell))


def _cell_width(cell: str) -> int:
    """Terminal columns of a cell's longest line (wide characters count two, as rich counts them)."""
    from rich.cells import cell_len

    return max((cell_len(line) for line in cell.split("\n")), default=0)


def column_widths(columns: Sequence[str], cells: Sequence[Sequence[str]], width: int) -> list[int | None]:
    """Content widths of a text table's columns (None: natural widths, the table fits ``width``).

    Numbers and links always keep their whole width; then, while there is room, names and short values; then
    each header's longest word; prose and paths fold to share what is left. The table is wider than ``width``
    only when its numbers and links alone need more (the terminal then soft-wraps whole lines)."""
    n = len(columns)
    natural = [max([_cell_width(columns[i])] + [_cell_width(r[i]) for r in cells]) for i in range(n)]
    available = width - (3 * n + 1)  # one space of padding each side, n + 1 rules
    if sum(natural) <= available:
        return [None] * n

    def names(limit: int) -> list[int]:
        return [
            max([1] + [_cell_width(r[i]) for r in cells if _rather_not_fold(r[i], row_name=i == 0, limit=limit)])
            for i in range(n)
        ]

    def raise_to(tier: Sequence[int]) -> None:  # column by column, leftmost (the row's name) first, while room lasts
        for i in range(n):
            base[i] = max(base[i], min(tier[i], base[i] + max(0, available - sum(base))))

    base = [max([1] + [_unbreakable(r[i]) for r in cells]) for i in range(n)]
    # every column a few characters first: leftmost-first alone left the last headers one letter a line at COLUMNS=40
    for share in range(1, _MIN_SHARE + 1):
        raise_to([min(natural[i], share) for i in range(n)])
    raise_to([min(natural[i], _MIN_READABLE) for i in range(n)])  # a few words of prose before long names
    long_names = [max(base[i], t) for i, t in enumerate(names(_MAX_NAME))]
    if sum(long_names) <= available:  # hub ids and the like whole, only if all of them fit
        base = long_names
    raise_to(names(_SHORT_NAME))
    raise_to([min(natural[i], max(_cell_width(w) for w in (columns[i].split() or [""]))) for i in range(n)])  # headers
    want = [natural[i] - base[i] for i in range(n)]
    extra = max(0, available - sum(base))
    widths = [base[i] + (extra * want[i] // sum(want) if sum(want) else 0) for i in range(n)]
    i = 0
    while sum(widths) < available and any(widths[j] < natural[j] for j in range(n)):  # hand out the remainder
        if widths[i % n] < natural[i % n]:
            widths[i % n] += 1
        i += 1
    return list(widths)


# control characters but the line end (ESC, BEL, CR, DEL, C1's CSI) and the bidi overrides and isolates (U+202A-E,
# U+2066-9): a terminal obeys them (an ESC sequence in a system name cleared the screen or swallowed the output)
_INVISIBLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` for a terminal: control and bidi-override characters written as Python escapes (``\\x1b``,
    ``\\u202e``); line ends kept."""
    return _INVISIBLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def text_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    caption: str | None = None,
    digits: int = 4,
) -> str:
    """A text table drawn by rich, numeric columns right-aligned, fitted to the terminal width; ``caption``
    below it, unwrapped."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    cells = [[visible(fmt_number(v, digits)) for v in r] for r in rows]
    columns = [visible(str(c)) for c in columns]
    title = visible(title) if title else title
    caption = visible(caption) if caption else caption

    def is_number(v: Any) -> bool:
        return v is None or (isinstance(v, int | float) and not isinstance(v, bool))

    numeric = [bool(rows) and all(is_number(r[i]) for r in rows) for i in range(len(columns))]
    widths = column_widths([str(c) for c in columns], cells, table_width())
    table = Table(title=escape(title) if title else None)  # a file name "m[x].csv" lost its "[x]" as markup
    for i, c in enumerate(columns):
        table.add_column(escape(str(c)), justify="right" if numeric[i] else "left", overflow="fold", width=widths[i])
    for r in cells:
        table.add_row(*(escape(v) for v in r))
    fixed = [w for w in widths if w is not None]
    total = sum(fixed) + 3 * len(columns) + 1 if len(fixed) == len(columns) else 0
    console = Console(file=RenderBuffer(), width=max(table_width(), total), force_terminal=False, color_system=None)
    console.print(table)
    text: str = console.file.getvalue()  # type: ignore[attr-defined]
    # the caption (signatures, notes) goes below the table unwrapped, so long signatures stay copyable
    return text + (caption.rstrip("\n") + "\n" if caption else "")


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "|": r"\textbar{}",  # signatures: a bare | prints as an em dash in LaTeX's default font encoding
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


# combining accents that LaTeX writes as commands (an NFD-decomposed letter: e + U+0301 is \\'{e})
_LATEX_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
    "\u0328": "k",
}
# non-ASCII characters with a LaTeX command of their own (pdflatex stops at a character it has no glyph for)
_LATEX_SYMBOLS = {
    "\u00df": r"\ss{}",
    "\u00e6": r"\ae{}",
    "\u00c6": r"\AE{}",
    "\u00f8": r"\o{}",
    "\u00d8": r"\O{}",
    "\u0153": r"\oe{}",
    "\u0152": r"\OE{}",
    "\u0142": r"\l{}",
    "\u0141": r"\L{}",
    "\u0131": r"\i{}",
    "\u00a0": "~",
    "\u2013": "--",
    "\u2014": "---",
    "\u2018": "`",
    "\u2019": "'",
    "\u201c": "``",
    "\u201d": "''",
    "\u2026": r"\ldots{}",
    "\u00b1": r"$\pm$",
    "\u00d7": r"$\times$",
    "\u00b0": r"\textdegree{}",
    "\u20ac": r"\texteuro{}",
    "\u00a3": r"\pounds{}",
    "\u00a7": r"\S{}",
}


def _latex_char(ch: str) -> str:
    """One character in LaTeX: special characters escaped, accented letters as accent commands, other non-ASCII
    characters as they are (they need xelatex or lualatex; `latex_table` says so in a comment)."""
    if ch in _LATEX:
        return _LATEX[ch]
    if ch == "\t":
        return " "
    if _INVISIBLE.match(ch) and not ch.isspace():  # ESC, NUL, DEL, C1: pdflatex stops at them ("invalid character")
        return _LATEX["\\"] + ch.encode("unicode_escape").decode("ascii")[1:]
    if ch.isascii():
        return ch
    if ch in _LATEX_SYMBOLS:
        return _LATEX_SYMBOLS[ch]
    import unicodedata

    parts = unicodedata.normalize("NFD", ch)
    base, marks = parts[0], parts[1:]
    if marks and base.isascii() and base.isalpha() and all(m in _LATEX_ACCENTS for m in marks):
        out = "\\i" if base == "i" and marks[0] != "\u0327" else ("\\j" if base == "j" else base)
        for m in marks:
            out = f"\\{_LATEX_ACCENTS[m]}{{{out}}}"
        return out
    return ch


def _latex_escape(s: str) -> str:
    """Text safe in a LaTeX table cell or caption (one pass, so escapes are not escaped again); a hyphen before
    another is kept apart (``--per-item`` printed as an en dash and ``per-item``)."""
    return "".join("-{}" if ch == "-" and s[i + 1 : i + 2] == "-" else _latex_char(ch) for i, ch in enumerate(s))


def _latex_cell(s: str) -> str:
    """A cell: escaped, and ``[`` braced (a row starting with ``[`` read as the optional argument of the ``\\\\``
    or ``\\midrule`` before it: 'Missing number'), a leading ``*`` too (``\\\\*`` swallowed it)."""
    out = _latex_escape(" ".join(s.splitlines())).replace("[", "{[}").replace("]", "{]}")  # a row is one line
    return "{}" + out if out.startswith("*") else out


def _latex_caption(s: str) -> str:
    """A caption: escaped, without blank lines (a paragraph break inside \\caption stops LaTeX: 'Paragraph ended
    before \\@caption was complete')."""
    return "\n".join(line for line in _latex_escape(s).splitlines() if line.strip())


def _unsupported(texts: Sequence[str]) -> str:
    """The non-ASCII characters that `_latex_char` leaves as they are, in order of appearance."""
    seen: dict[str, None] = {}
    for t in texts:
        for ch in t:
            if not ch.isascii() and _latex_char(ch) == ch:
                seen[ch] = None
    return "".join(seen)


def latex_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str | None = None, digits: int = 4
) -> str:
    """A LaTeX ``table`` (booktabs rules), numeric columns right-aligned, with the caption when given."""
    def numeric(v: Any) -> bool:  # a number, or a cell that starts with one (compare's "0.06 [0.05, 0.07]*")
        if isinstance(v, bool):
            return False
        return v is None or isinstance(v, int | float) or re.match(r"[-+]?\d|n/a$", str(v)) is not None

    # prose columns left-aligned (a card's definition, a metric's summary were right-aligned)
    spec = "l" + "".join("r" if all(numeric(r[i]) for r in rows) else "l" for i in range(1, len(columns)))
    head = [str(c) for c in columns]
    cells = [[fmt_number(v, digits) for v in r] for r in rows]
    lines = []
    other = _unsupported([*head, *(c for r in cells for c in r), caption or ""])
    if other:  # a comment, so the table still compiles where these characters are set up
        lines.append(f"% non-ASCII characters left as they are (xelatex or lualatex typeset them): {other}")
    lines += [r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines.append(" & ".join(_latex_cell(c) for c in head) + r" \\")
    lines.append(r"\midrule")
    for r in cells:
        lines.append(" & ".join(_latex_cell(c) for c in r) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption and caption.strip():
        lines.append(rf"\caption{{{_latex_caption(caption)}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
