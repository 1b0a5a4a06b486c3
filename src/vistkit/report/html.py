"""Self-contained HTML reports (figures embedded as base64 PNG) plus the tables as CSV/JSON/LaTeX files.

Each page lists the exact command that produced it and every metric signature, so a reader can reproduce it.
"""

from __future__ import annotations

import base64
import functools
import html
import os
import platform
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from vistkit.data.output import MARKER, replaced_folder, write_text
from vistkit.report.tables import OutputFormat, dumps_json, fmt_number, plain, render_table

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{padding:.25em .7em;border-bottom:1px solid #e4e4e4;overflow-wrap:anywhere;min-width:4.5em}
th{text-align:left;background:#f6f6f6}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}
pre,code{background:#f4f4f4;border-radius:3px}pre{padding:.6em;overflow-x:auto;white-space:pre-wrap;
overflow-wrap:anywhere}
figure{margin:1em 0}img{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
.files{font-size:.85em;color:#555}div.table{overflow-x:auto;max-width:100%}
.note{background:#fff8e1;border-left:4px solid #f0c000;padding:.5em .8em}
"""


def _whole_folder(write: Callable[..., Any]) -> Callable[..., Path]:
    """A report writer ``write(folder, ...)`` that fills a new folder, which then replaces ``folder`` whole (new,
    empty or an earlier vistkit report with --force; `vistkit.data.output.replaced_folder`): a report never
    keeps files of an earlier one, and an interruption leaves the old report or the new one."""

    @functools.wraps(write)
    def wrapper(folder: Path, *args: Any, **kwargs: Any) -> Path:
        with replaced_folder(folder) as fresh:
            write(fresh, *args, **kwargs)
        return Path(folder)

    return wrapper


def html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 4) -> str:
    """An HTML table of ``rows`` under ``columns``, cells escaped, numbers formatted (`fmt_number`), class ``num``,
    in a ``div.table`` that scrolls sideways when the table is wider than the screen."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for v in map(plain, r):
            num = isinstance(v, int | float) and not isinstance(v, bool)
            cells.append(f"<td{' class=num' if num else ''}>{html.escape(fmt_number(v, digits))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="table">{table}</div>'  # a table wider than the screen scrolls in its box, not the page


def embed_png(path: Path, caption: str) -> str:
    """A figure with the PNG at ``path`` inlined as base64 and ``caption``, naming the PDF beside it."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    pdf = Path(path).with_suffix(".pdf").name
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)} (vector version: <code>{html.escape(pdf)}</code>)</figcaption>"
        "</figure>"
    )


def _generated_at() -> datetime:
    """When the page was made: now, or ``SOURCE_DATE_EPOCH`` (seconds) when set, as reproducible builds expect (the
    same run then gives the same page; the figures carry no date at all)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        try:
            return datetime.fromtimestamp(int(epoch), UTC)
        except (OverflowError, OSError, ValueError):
            pass
    return datetime.now(UTC)


def write_html(
    path: Path,
    *,
    title: str,
    sections: Sequence[tuple[str, str]],
    commands: Sequence[str],
    signatures: dict[str, str],
    notes: Sequence[str] = (),
) -> Path:
    """Write one self-contained page: title, notes, sections (heading, inner HTML), commands, signatures."""
    from vistkit import __version__

    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>vistkit {html.escape(__version__)} · Python {html.escape(platform.python_version())} · "
        f"{_generated_at().strftime('%Y-%m-%d %H:%M UTC')}</p>",
    ]
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in notes]
    for heading, inner in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>{inner}")
    parts.append("<h2>Reproduce</h2>")
    if (Path(path).parent / "result.json").is_file():
        parts.append("<p>Every number of this page is in <code>result.json</code>, in this folder.</p>")
    parts.append("<p>Command(s):</p>")
    parts += [f"<pre>{html.escape(c)}</pre>" for c in commands]
    parts.append("<p>Metric signatures:</p>")
    parts.append(html_table(["metric", "signature"], [[m, s] for m, s in signatures.items()]))
    parts.append("</body></html>")
    write_text(path, "\n".join(parts), force=True)  # inside a report's folder (`_whole_folder`)
    return Path(path)


def write_table_files(
    folder: Path, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str
) -> str:
    """``name.csv`` and ``name.tex`` (booktabs) next to the page (in a report's folder, `_whole_folder`); returns
    the line that names them, to put under the table on the page."""
    write_text(folder / f"{name}.csv", render_table(columns, rows, OutputFormat.CSV), force=True)
    write_text(folder / f"{name}.tex", render_table(columns, rows, OutputFormat.LATEX, caption=caption), force=True)
    return table_files_note(name)


def table_files_note(name: str) -> str:
    """The line under a table naming its CSV and LaTeX files in the report's folder (plain text, not links: the
    page references no other file, so it can be mailed or moved alone)."""
    csv, tex = (html.escape(f"{name}{ext}") for ext in (".csv", ".tex"))
    return f'<p class="files">This table, in this folder: <code>{csv}</code> (CSV), <code>{tex}</code> (LaTeX).</p>'


# --------------------------------------------------------------------------------------------------- pages
def _scores_by_system(pairs: Sequence[Any], scores: Sequence[Any]) -> dict[str, dict[str, np.ndarray]]:
    from vistkit.meta.human import is_reference_system

    out: dict[str, dict[str, np.ndarray]] = {}
    for s in scores:
        # a story once per item (its photo sequence, else its story id), met in however many of the item's pairs;
        # by text alone, a model's generic story repeated over many items was one story with one score
        seen: dict[tuple[str, Any, str], float] = {}
        for p, a, b in zip(pairs, s.score_1, s.score_2, strict=True):
            item = tuple(p.img_seq) or p.story_id
            for text, system, v in ((p.text_1, p.system_1, a), (p.text_2, p.system_2, b)):
                name = "human" if is_reference_system(system) else system
                seen.setdefault((name, item, text), float(v))
        systems: dict[str, list[float]] = {}
        for (name, _, _), v in seen.items():
            systems.setdefault(name, []).append(v)
        out[s.metric] = {k: np.array(v) for k, v in systems.items()}
    return out


@_whole_folder
def pairs_report(
    folder: Path,
    pairs: Sequence[Any],
    scores: Sequence[Any],
    result: dict[str, Any],
    *,
    command: str,
    notes: Sequence[str] = (),
) -> Path:
    """Pair-accuracy report: tables (CSV/LaTeX/JSON), gap and beats-reference figures, score distributions.
    ``notes``: what the printed table says under it (pairs left out), shown on the page too."""
    from vistkit.meta.pairs import accuracy_table, gap_table
    from vistkit.meta.significance import COMPARISON_COLUMNS, comparison_row
    from vistkit.report import plots

    write_text(folder / "result.json", dumps_json(result), force=True)
    plots.reset_label_notes()
    sections: list[tuple[str, str]] = []

    proxy = bool(result.get("proxy_label_pairs"))
    cols, rows = accuracy_table(result)
    acc_files = write_table_files(
        folder, "accuracy", cols, rows, caption="Story-pair ranking accuracy (ties count as wrong)."
    )
    acc_all = {m: v["all"] for m, v in result["accuracy"].items()}
    n_all = {m: v["all"] for m, v in result["n"].items()}
    sections.append(
        (
            "Pair accuracy (Vrank Eq. 1-2)",
            "<p>A pair is correct only if the metric orders it strictly like "
            + ("the (proxy) label" if proxy else "people")
            + "; metric ties are wrong. Omega_a: pairs on which a of 5 rankers agree.</p>"
            + embed_png(
                plots.plot_pair_accuracy(
                    acc_all, result.get("accuracy_ci", {}), n_all, folder / "pair_accuracy", proxy=proxy
                ),
                "Pair accuracy per metric over all pairs that count, with 95% bootstrap confidence intervals; "
                "pairs per metric: " + ", ".join(f"{m} n={k:,}" for m, k in n_all.items()),
            )
            + html_table(cols, rows)
            + acc_files,
        )
    )

    if result["gap_edges"]:
        gap_png = plots.plot_accuracy_by_gap(
            result["by_gap"], folder / "accuracy_by_gap", normalised=result["gap_normalised"]
        )
        gcols, grows = gap_table(result["by_gap"])
        gap_files = write_table_files(
            folder, "accuracy_by_gap", gcols, grows, caption="Pair accuracy by ranking gap."
        )
        sections.append(
            (
                "Accuracy by ranking gap (Vrank Fig. 3)",
                embed_png(
                    gap_png,
                    "Pair accuracy per human ranking-gap bucket (edges "
                    + ", ".join(f"{e:g}" for e in result["gap_edges"])
                    + "); each metric's pairs per bucket in the legend",
                )
                + html_table(gcols, grows)
                + gap_files,
            )
        )
    else:
        sections.append(
            (
                "Accuracy by ranking gap (Vrank Fig. 3)",
                '<p class="note">No figure: every pair that counts has the same ranking gap'
                + (" (proxy pairs always do)" if proxy else "")
                + ", so there is nothing to bucket.</p>",
            )
        )

    beats = result["beats_reference"]
    if any(beats.values()):
        judge = "proxy label (human story assumed better)" if proxy else "people"
        bpng = plots.plot_beats_reference(beats, folder / "beats_reference", reference_judge=judge)
        bcols = ["judge", "system", "ratio", "ties", "n"]
        brows = [
            [("proxy label" if proxy else "people") if j == "human" else j, s, v["ratio"], v["tie_ratio"], v["n"]]
            for j, d in beats.items()
            for s, v in d.items()
        ]
        beats_files = write_table_files(
            folder, "beats_reference", bcols, brows, caption="Machine-beats-reference ratio."
        )
        sections.append(
            (
                "Machine-beats-reference ratio (Vrank Fig. 4)",
                embed_png(
                    bpng,
                    "Share of each system's stories ranked above the human reference, by "
                    + judge
                    + " and by each metric",
                )
                + html_table(bcols, brows)
                + beats_files,
            )
        )

    dist_png = plots.plot_score_distributions(
        _scores_by_system(pairs, scores),
        folder / "score_distributions",
        lower_is_better=[s.metric for s in scores if not s.higher_is_better],
    )
    sections.append(
        (
            "Score distributions per system (as dHM Fig. 12)",
            embed_png(dist_png, "Per-story metric scores, human stories first"),
        )
    )

    if result["comparisons"]:
        ccols = list(COMPARISON_COLUMNS)
        crows = [comparison_row(c) for c in result["comparisons"]]
        sig_files = write_table_files(
            folder, "significance", ccols, crows, caption="Pair accuracy: metric A vs metric B."
        )
        sections.append(
            ("Metric A vs metric B (exact McNemar, paired bootstrap)", html_table(ccols, crows) + sig_files)
        )

    notes = list(notes)
    if result.get("proxy_label_pairs"):
        notes.append(
            "These pairs carry a PROXY label (the human story is assumed better); they are not human "
            "judgements, so accuracy here means 'how often the metric prefers the human story'."
        )
    return write_html(
        folder / "index.html",
        title="vistkit meta: story-pair accuracy",
        sections=sections,
        commands=[command],
        signatures=result["signatures"],
        notes=notes + plots.label_notes(),
    )


@_whole_folder
def correlation_report(
    folder: Path,
    table: Any,
    stories: Sequence[Any],
    values: dict[str, np.ndarray],
    result: dict[str, Any],
    *,
    command: str,
    notes: Sequence[str] = (),
) -> Path:
    """Correlation report: heatmaps (metrics x aspects) per level, tables, score distributions per system.
    ``notes``: what the printed table says under it (why a coefficient is n/a), shown on the page too."""
    from vistkit.report import plots

    write_text(folder / "result.json", dumps_json(result), force=True)
    plots.reset_label_notes()
    metrics = list(values)
    aspects = list(table.aspects)
    sections: list[tuple[str, str]] = []
    for level in ("story", "system"):
        rows = [r for r in result["correlations"] if r["level"] == level]
        if not rows:
            continue
        mats: dict[str, np.ndarray] = {}
        for method, label in (
            ("pearson", "Pearson r"),
            ("spearman", "Spearman rho"),
            ("kendall", f"Kendall tau-{result.get('kendall_variant', 'b')}"),
        ):
            mat = np.full((len(metrics), len(aspects)), np.nan)
            for r in rows:
                if r["method"] == method:
                    mat[metrics.index(r["metric"]), aspects.index(r["aspect"])] = r["r"]
            mats[label] = mat
        png = plots.plot_correlation_heatmaps(
            mats,
            metrics,
            aspects,
            folder / f"heatmap_{level}",
            title=f"Correlation with human scores, {level} level",
        )
        sections.append(
            (
                f"Correlation with human scores, {level} level",
                embed_png(
                    png,
                    f"Metric vs human aspect ({level} level); scores of lower-is-better "
                    "metrics are negated, so r > 0 always means agreement",
                ),
            )
        )
        cols = ["metric", "aspect", "method", "r", "ci low", "ci high", "p", "n"]
        trows = [
            [r["metric"], r["aspect"], r["method"], r["r"], r["ci"][0], r["ci"][1], r["p"], r["n"]]
            for r in rows
        ]
        corr_files = write_table_files(
            folder,
            f"correlations_{level}",
            cols,
            trows,
            caption=f"Correlation with human scores ({level} level, 95% bootstrap CI).",
        )
        sections.append((f"Table: {level} level (95% bootstrap CIs)", html_table(cols, trows) + corr_files))
    if result["williams"]:
        wcols = ["level", "aspect", "A", "B", "r A", "r B", "r AB", "t", "p (A > B)", "n"]
        wrows = [
            [
                w["level"],
                w["aspect"],
                w["a"],
                w["b"],
                w["r_a"],
                w["r_b"],
                w["r_ab"],
                w["t"],
                w["p_one_sided"],
                w["n"],
            ]
            for w in result["williams"]
        ]
        williams_files = write_table_files(folder, "williams", wcols, wrows, caption="Williams test on Pearson r.")
        undefined = "".join(
            '<p class="note">'
            + html.escape(f"n/a for {w['a']} vs {w['b']} / {w['aspect']} ({w['level']} level): {w['undefined']}")
            + "</p>"
            for w in result["williams"]
            if w.get("undefined")
        )
        sections.append(
            (
                "Williams test (Pearson r; system level = system means)",
                html_table(wcols, wrows) + williams_files + undefined,
            )
        )
    by_system: dict[str, dict[str, np.ndarray]] = {}
    for m, v in values.items():
        groups: dict[str, list[float]] = {}
        for s, x in zip(stories, v, strict=True):
            groups.setdefault(s.system or "?", []).append(float(x))
        by_system[m] = {k: np.array(x) for k, x in groups.items()}
    png = plots.plot_score_distributions(
        by_system, folder / "score_distributions", lower_is_better=result.get("lower_is_better", [])
    )
    sections.append(
        (
            "Score distributions per system (as dHM Fig. 12)",
            embed_png(png, "Per-story metric scores, human stories first"),
        )
    )
    return write_html(
        folder / "index.html",
        title="vistkit meta: correlation with human scores",
        sections=sections,
        commands=[command],
        signatures=result.get("signatures", {}),
        notes=[*notes, *plots.label_notes()],
    )


@_whole_folder
def errors_report(
    folder: Path,
    errors: Sequence[str],
    payload: dict[str, Any],
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    command: str,
    notes: Sequence[str] = (),
) -> Path:
    """Point-biserial report: heatmap (metrics x error types), table, page. ``notes``: what the printed table says
    under it (tied annotators, undefined r), shown on the page too."""
    from vistkit.report import plots

    write_text(folder / "result.json", dumps_json(payload), force=True)
    plots.reset_label_notes()
    result = payload["point_biserial"]
    metrics = list(result)
    mat = np.array([[result[m][e]["r"] for e in errors] for m in metrics], dtype=float)
    png = plots.plot_correlation_heatmaps(
        {"point-biserial r": mat},
        metrics,
        list(errors),
        folder / "heatmap_errors",
        title="Metric scores vs error labels",
    )
    pb_files = write_table_files(
        folder, "point_biserial", columns, rows, caption="Point-biserial r with error labels."
    )
    sections = [
        (
            "Point-biserial r with error labels (Vrank Table 5)",
            "<p>r &lt; 0: stories with the error get lower scores (scores of lower-is-better metrics are "
            "negated first).</p>"
            + embed_png(png, "Point-biserial r of metric scores with each binary error label")
            + html_table(columns, rows)
            + pb_files,
        )
    ]
    return write_html(
        folder / "index.html",
        title="vistkit meta: metric scores vs error labels",
        sections=sections,
        commands=[command],
        signatures=payload["signatures"],
        notes=[*notes, *plots.label_notes()],
    )


def written_files(folder: Path, since: float) -> list[Path]:
    """The files under ``folder`` written at or after ``since`` (a ``time.time()``), index.html first; vistkit's
    own marker file (`MARKER`, the list of the report's files) is not one of them."""
    folder = Path(folder)
    files = [
        p for p in folder.rglob("*") if p.is_file() and p.name != MARKER and p.stat().st_mtime >= since - 1.0
    ]
    return sorted(files, key=lambda p: (p.name != "index.html", p.suffix != ".png", str(p)))


def describe_written(folder: Path, since: float) -> str:
    """One line per kind of file a report wrote (for the command to print on stderr)."""
    files = written_files(folder, since)
    if not files:
        return f"report: nothing written to {folder}"
    lines = [f"report: wrote {len(files)} files to {folder}/"]
    kinds = {
        "page (open in a browser)": [p for p in files if p.suffix == ".html"],
        "figures (PNG)": [p for p in files if p.suffix == ".png"],
        "figures (PDF)": [p for p in files if p.suffix == ".pdf"],
        "tables (CSV)": [p for p in files if p.suffix == ".csv"],
        "tables (LaTeX)": [p for p in files if p.suffix == ".tex"],
        "data (JSON)": [p for p in files if p.suffix == ".json"],
    }
    for kind, paths in kinds.items():
        if paths:
            lines.append(f"  {kind}: " + ", ".join(str(p.relative_to(folder)) for p in paths))
    return "\n".join(lines)
