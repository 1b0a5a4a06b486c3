"""Matplotlib figures for meta-evaluation reports (every figure saved as PNG and PDF, and SVG on request).

Figures are drawn on `matplotlib.figure.Figure` objects (no pyplot, no backend) with matplotlib's defaults plus
vistkit's style, whatever the user's matplotlibrc says; names are drawn as they are (no mathtext), shortened or
escaped where matplotlib cannot draw them (`label_notes` says which); sizes are bounded; no date is written, so the
same figure gives the same bytes.

- `plot_pair_accuracy`: pair accuracy per metric with its bootstrap CI (Vrank Table 4 as a figure);
- `plot_accuracy_by_gap`: pair accuracy per ranking-gap bucket, one line per metric (Vrank Fig. 3);
- `plot_beats_reference`: machine-beats-reference ratio per system, people vs metrics (Vrank Fig. 4);
- `plot_correlation_heatmaps`: metrics x human aspects, one panel per correlation coefficient;
- `plot_score_distributions`: per-story score distributions per system, human first (dHM Fig. 12).
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HUMAN_COLOR = "#4d4d4d"
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")


def _matplotlib_folder() -> None:
    """Point ``MPLCONFIGDIR`` into vistkit's cache when matplotlib's own folders (``~/.config/matplotlib``,
    ``~/.cache/matplotlib``) cannot be written (no or a read-only HOME): matplotlib then printed two lines
    ("mkdir -p failed ... Matplotlib created a temporary cache directory ...") on every report; vistkit's cache
    says it once, in one warning, when it falls back itself. A ``MPLCONFIGDIR`` that cannot be used (under a file,
    not writable) is replaced the same way, with one warning naming it (matplotlib printed the same two lines and
    rebuilt its font cache in a new temporary folder on every run)."""
    import os
    import sys

    from vistkit.models.runtime import default_cache_dir, folder_problem

    if "matplotlib" in sys.modules:
        return
    chosen = os.environ.get("MPLCONFIGDIR", "").strip()
    if chosen:
        problem = folder_problem(Path(chosen).expanduser())
        if problem:
            from vistkit.errors import warn

            target = default_cache_dir() / "matplotlib"
            target.mkdir(exist_ok=True)
            warn(f"MPLCONFIGDIR={chosen} cannot be used ({problem}); matplotlib's cache goes to {target} instead")
            os.environ["MPLCONFIGDIR"] = str(target)
        return

    try:
        home: Path | None = Path.home()
    except (RuntimeError, KeyError, OSError):
        home = None
    usable = True
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        base = os.environ.get(var, "").strip()
        if base:
            folder = Path(base).expanduser() / "matplotlib"
        elif home is not None and home.is_dir():
            folder = home / sub / "matplotlib"
        else:
            usable = False
            break
        if folder_problem(folder):
            usable = False
            break
    if usable:
        return
    target = default_cache_dir() / "matplotlib"
    target.mkdir(exist_ok=True)
    os.environ["MPLCONFIGDIR"] = str(target)


_MAX_INCHES = 40.0  # neither side of a figure is longer (200 systems drew a 450-inch, 68,000-pixel-wide PNG)
_MAX_PIXELS = 6000  # nor has more pixels in the PNG (its dpi is lowered; a 200 x 50 heatmap was a 28 MB PNG)
_DPI = 150
_MAX_LABEL = 40  # characters of a name on a figure (longer names are shortened in the middle; tables keep them)
_MAX_CELL_TEXTS = 400  # heatmap panels with more cells show colours only (30,000 numbers drawn took 7 minutes)

_STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "svg.fonttype": "none",
    "svg.hashsalt": "vistkit",  # the same figure gives the same SVG bytes
    "figure.dpi": 100,
    "text.usetex": False,
    "text.parse_math": False,  # labels are names: "sys$a\\b$" was mathtext (ValueError), "a_b" TeX
}

_SHOWN: dict[str, str] = {}  # names drawn differently since `reset_label_notes`: the name -> what the figure shows


def _matplotlib() -> Any:
    """matplotlib, imported once. vistkit draws on `matplotlib.figure.Figure` objects, never through pyplot, so no
    backend is chosen: ``MPLBACKEND=garbage`` (an 'unexpected ValueError' at import) and a display-less machine
    do not matter, and a notebook's own backend and figures are left alone."""
    import os
    import sys

    if "matplotlib" not in sys.modules:
        _matplotlib_folder()
        backend = os.environ.pop("MPLBACKEND", None)  # validated at import, and not used by vistkit
        try:
            import matplotlib
        finally:
            if backend is not None:
                os.environ["MPLBACKEND"] = backend
    import matplotlib

    return matplotlib


@contextlib.contextmanager
def _drawing() -> Iterator[None]:
    """Inside the block, matplotlib's own defaults plus `_STYLE`, whatever the user's matplotlibrc or session says
    (``text.usetex: True`` without LaTeX was an 'unexpected RuntimeError'; an unknown ``font.family`` printed a
    findfont line per label); the user's settings are back after it. Glyph warnings are not shown: `_label` has
    already written the characters that the font lacks as escapes."""
    matplotlib = _matplotlib()
    from matplotlib import MatplotlibDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
        defaults = {k: v for k, v in matplotlib.rcParamsDefault.items() if not _session_setting(k)}
        with matplotlib.rc_context({**defaults, **_STYLE}):
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from")
            yield


def _session_setting(key: str) -> bool:
    """An rcParam of the session rather than of a figure's look (the backend, interactive mode, the toolbar...):
    `_drawing` leaves it as it is (the keys matplotlib's styles leave alone)."""
    return key in _SESSION_KEYS or key.startswith("webagg.")


_SESSION_KEYS = frozenset(
    {
        "backend",
        "backend_fallback",
        "interactive",
        "toolbar",
        "timezone",
        "figure.max_open_warning",
        "figure.raise_window",
        "savefig.directory",
        "tk.window_focus",
        "docstring.hardcopy",
        "date.epoch",
    }
)


def _figure(width: float, height: float, **kwargs: Any) -> Any:
    """A new `Figure` (not registered with pyplot: nothing to close, no backend) of at most `_MAX_INCHES` a side."""
    from matplotlib.figure import Figure

    return Figure(figsize=(min(width, _MAX_INCHES), min(height, _MAX_INCHES)), **kwargs)


@functools.lru_cache(maxsize=8)
def _font_chars(path: str) -> frozenset[int]:
    from matplotlib.font_manager import get_font

    return frozenset(get_font(path).get_charmap())


def _drawable(ch: str) -> bool:
    """Whether matplotlib draws ``ch`` as it is: in the figures' font (else a box), not a right-to-left letter (it
    lays text out left to right: Arabic and Hebrew names came out reversed), not a control or format character."""
    import unicodedata

    from matplotlib.font_manager import FontProperties, findfont

    if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or unicodedata.bidirectional(ch) in ("R", "AL"):
        return False
    return ord(ch) in _font_chars(findfont(FontProperties()))


def _labels(names: Sequence[Any]) -> list[str]:
    """Names as drawn on a figure: characters matplotlib cannot draw as they are (`_drawable`) written as Python
    escapes (``\\n``, ``\\u4e2d``), more than `_MAX_LABEL` characters shortened in the middle, and names that would
    then look alike told apart by ``#k``. What changed is remembered for `label_notes` (the tables and the page
    keep the names whole)."""
    shown = []
    for name in names:
        text = str(name)
        out = "".join(ch if _drawable(ch) else ch.encode("unicode_escape").decode("ascii") for ch in text)
        if len(out) > _MAX_LABEL:
            half = (_MAX_LABEL - 1) // 2
            out = out[:half] + "\u2026" + out[len(out) - (_MAX_LABEL - 1 - half) :]
        shown.append(out)
    alike: dict[str, dict[str, None]] = {}  # what is drawn -> the different names drawn so, in order
    for name, s in zip(names, shown, strict=True):
        alike.setdefault(s, {})[str(name)] = None
    for i, (name, s) in enumerate(zip(names, list(shown), strict=True)):
        if len(alike[s]) > 1:
            shown[i] = f"{s} #{list(alike[s]).index(str(name)) + 1}"
    for name, s in zip(names, shown, strict=True):
        if s != str(name):
            _SHOWN[str(name)] = s
    return shown


def reset_label_notes() -> None:
    """Forget the names `_labels` changed (a report calls it before its first figure)."""
    _SHOWN.clear()


def label_notes(limit: int = 10) -> list[str]:
    """One sentence on the names that the figures since `reset_label_notes` show differently (none: empty)."""
    if not _SHOWN:
        return []
    pairs = [f"'{shown}' is {name!r}" for name, shown in list(_SHOWN.items())[:limit]]  # as drawn, as Python writes it
    more = f" and {len(_SHOWN) - limit} more" if len(_SHOWN) > limit else ""
    return [
        f"In the figures, {len(_SHOWN)} name{'s are' if len(_SHOWN) != 1 else ' is'} shortened to "
        f"{_MAX_LABEL} characters or {'have' if len(_SHOWN) != 1 else 'has'} characters that matplotlib cannot draw "
        "as they are (missing from its font, right-to-left script, control characters) written as \\u escapes; the "
        f"tables give the names in full: {'; '.join(pairs)}{more}."
    ]


def _num(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, never as a negative zero ("-0.00" for -0.004)."""
    text = format(value, spec)
    return text[1:] if text.startswith("-") and float(text) == 0 else text


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", ":", "-.")
_HATCHES = (None, "//", "..", "xx", "\\\\", "oo", "--", "++")


def _line(i: int) -> dict[str, Any]:
    """Marker and line style of the ``i``-th line: the colours repeat after `PALETTE`'s eight (metrics 1 and 9 were
    the same line), so each round of colours gets another marker, each round of markers another line style."""
    n = len(PALETTE)
    return {"marker": _MARKERS[i // n % len(_MARKERS)], "linestyle": _LINESTYLES[i // (n * len(_MARKERS)) % 4]}


def _tick_rotation(names: Sequence[str]) -> dict[str, Any]:
    """Tick label keywords for names along an x axis: level when few and short, slanted, upright when very many."""
    if len(names) > 40:
        return {"rotation": 90, "fontsize": 7}
    if len(names) <= 12 and all(len(n) <= 8 for n in names):
        return {}
    return {"rotation": 30, "ha": "right", "rotation_mode": "anchor"}


def _figure_stems(stem: Path) -> tuple[Path, tuple[str, ...]]:
    """The name a figure's files share and their suffixes: PNG and PDF always, SVG when ``stem`` ends in
    ``.svg``. A stem ending in ``.png``/``.pdf``/``.svg`` loses that ending; any other ending is kept (the stem
    ``run_0.5`` wrote ``run_0.png``, its ``.5`` taken for a file type)."""
    stem = Path(stem)
    suffix = stem.suffix.lower()
    if suffix in (".png", ".pdf", ".svg"):
        return stem.with_suffix(""), (".png", ".pdf", ".svg") if suffix == ".svg" else (".png", ".pdf")
    return stem, (".png", ".pdf")


def save_figure(fig: Any, stem: Path) -> Path:
    """Save ``stem.png`` (150 dpi, lowered so that no side has more than `_MAX_PIXELS` pixels) and ``stem.pdf``,
    and ``stem.svg`` when ``stem`` ends in ``.svg``; return the PNG path. No date is written into them (the same
    figure gives the same bytes). Through vistkit's writer: temp file + rename."""
    from vistkit.data.output import output_path

    base, suffixes = _figure_stems(stem)
    dpi = min(_DPI, _MAX_PIXELS / max(fig.get_size_inches()))
    metadata = {
        ".png": {"Software": "vistkit"},
        ".pdf": {"Creator": "vistkit", "CreationDate": None},
        ".svg": {"Creator": "vistkit", "Date": None},
    }
    with _drawing():
        for suffix in suffixes:  # in a report folder (`report.html._whole_folder`): as every vistkit output
            with output_path(base.parent / (base.name + suffix), force=True) as tmp:
                fig.savefig(
                    tmp, format=suffix[1:], dpi=dpi, bbox_inches="tight", metadata=metadata[suffix]
                )
    return base.parent / (base.name + ".png")


def _nothing(stem: Path, title: str, why: str) -> Path:
    """A small figure that says there is nothing to draw (no metric, no system)."""
    with _drawing():
        fig = _figure(5.0, 1.6)
        fig.text(0.5, 0.6, title, ha="center", va="center", fontsize=11)
        fig.text(0.5, 0.3, why, ha="center", va="center", fontsize=9, color="#555555")
        return save_figure(fig, stem)


def _drawn(plot: Any) -> Any:
    """A plot function run inside `_drawing` (every artist made with vistkit's settings)."""

    @functools.wraps(plot)
    def wrapper(*args: Any, **kwargs: Any) -> Path:
        with _drawing():
            return Path(plot(*args, **kwargs))

    return wrapper


def _value(v: Any) -> float:
    """A number to draw: None (undefined) as NaN."""
    return math.nan if v is None else float(v)


@_drawn
def plot_pair_accuracy(
    accuracy: dict[str, float],
    ci: dict[str, Sequence[float]],
    n: dict[str, int],
    stem: Path,
    *,
    proxy: bool = False,
    confidence: float = 0.95,
) -> Path:
    """Horizontal bars: pair accuracy per metric (all pairs that count) with its bootstrap CI as error bars,
    the number of pairs at each bar (``n/a`` where no pair counts), dashed 0.5 = coin flip. ``proxy``: the x axis
    says what the number means on proxy-labelled pairs (how often the metric prefers the human story)."""
    metrics = list(accuracy)
    if not metrics:
        return _nothing(stem, "Pair accuracy per metric", "no metric")
    fig = _figure(6.4, 0.45 * len(metrics) + 1.6)
    ax = fig.subplots()
    y = np.arange(len(metrics))[::-1]
    acc = np.array([_value(accuracy[m]) for m in metrics], dtype=float)
    acc[~np.isfinite(acc)] = np.nan
    bounds = [tuple(ci.get(m) or (None, None)) for m in metrics]
    low = np.array([_value(b[0]) for b in bounds], dtype=float)
    high = np.array([_value(b[1]) for b in bounds], dtype=float)
    low[~np.isfinite(low)], high[~np.isfinite(high)] = np.nan, np.nan
    err = np.nan_to_num(np.vstack([np.clip(acc - low, 0, None), np.clip(high - acc, 0, None)]))
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(metrics))]
    ax.barh(y, np.nan_to_num(acc), color=colors, height=0.6, xerr=err, capsize=3, ecolor="#333333")
    for yi, m, a, h in zip(y, metrics, acc, high, strict=True):
        count = f"n={n.get(m, 0) or 0:,}"
        if np.isnan(a):
            ax.text(0.015, yi, f"n/a ({count})", va="center", fontsize=8, color="#555555")
        else:
            ax.text((h if not np.isnan(h) else a) + 0.015, yi, f"{_num(a, '.3f')} ({count})", va="center", fontsize=8)
    ax.axvline(0.5, color="#999999", linestyle="--", linewidth=1, zorder=0)
    ax.set_yticks(y, _labels(metrics))
    ax.set_xlim(0, 1.18)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("metric")
    ax.set_xlabel(
        "share of pairs where the metric prefers the human story (proxy label)"
        if proxy
        else "pair accuracy (agrees with people; ties are wrong)"
    )
    ax.set_title(f"Pair accuracy per metric, {confidence:.0%} bootstrap CI")
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, stem)


@_drawn
def plot_accuracy_by_gap(
    by_gap: dict[str, list[dict[str, Any]]], stem: Path, *, normalised: bool = True
) -> Path:
    """Lines of accuracy per gap bucket (x: the buckets), dashed 0.5 = coin flip; each metric's legend entry
    gives its number of pairs per bucket (metrics leave different pairs undefined, so n differs by metric)."""
    metrics = list(by_gap)
    buckets = by_gap[metrics[0]] if metrics else []
    if not buckets:
        return _nothing(stem, "Pair accuracy by human ranking gap", "no metric" if not metrics else "no bucket")
    fig = _figure(max(5.5, 1.1 * len(buckets) + 3.0), 3.6 + 0.1 * len(metrics))
    ax = fig.subplots()
    x = np.arange(len(buckets))
    for i, (m, shown) in enumerate(zip(metrics, _labels(metrics), strict=True)):
        acc = [_value(b["accuracy"]) for b in by_gap[m]]
        counts = " / ".join(f"{b['n']:,}" for b in by_gap[m])
        ax.plot(x, acc, color=PALETTE[i % len(PALETTE)], label=f"{shown} (n = {counts})", linewidth=1.8, **_line(i))
    ax.axhline(0.5, color="#999999", linestyle="--", linewidth=1, zorder=0)
    from vistkit.meta.pairs import edge_texts

    edges = edge_texts([b["low"] for b in buckets] + [b["high"] for b in buckets])
    labels = [f"{a}\u2013{b}" for a, b in zip(edges[: len(buckets)], edges[len(buckets) :], strict=True)]
    ax.set_xticks(x, labels, **(_tick_rotation(labels) if len(labels) > 8 else {}))
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("pair accuracy")
    ax.set_xlabel("ranking gap / N" if normalised else "ranking gap (rank units)")
    ax.set_title("Pair accuracy by human ranking gap")
    ax.legend(
        frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="metric (pairs per bucket)"
    )
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)


@_drawn
def plot_beats_reference(
    data: dict[str, dict[str, dict[str, Any]]], stem: Path, *, reference_judge: str = "people"
) -> Path:
    """Grouped bars: per system, the share of its stories ranked above the reference by each judge.
    ``reference_judge`` names the ``"human"`` judge in the legend by what its judgements are (people, or a
    proxy label that is not a judgement at all). Past `MAX_SYSTEM_BOXES` systems, one box per judge of its
    systems' ratios (a bar and a name per system of 3,000 took 90 s to draw and could not be read; the table has
    them)."""
    judges = list(data)
    systems = sorted({s for d in data.values() for s in d})
    if not systems:
        return _nothing(stem, "Machine-beats-reference ratio", "no system set against the reference")
    if len(systems) > MAX_SYSTEM_BOXES:
        return _beats_reference_boxes(data, systems, stem, reference_judge=reference_judge)
    fig = _figure(max(4.5, 0.9 * len(systems) * max(1, len(judges)) / 2 + 2.5), 3.4)
    ax = fig.subplots()
    width = 0.8 / max(1, len(judges))
    x = np.arange(len(systems))
    shown = _labels([reference_judge if j == "human" else j for j in judges])
    for i, (j, label) in enumerate(zip(judges, shown, strict=True)):
        vals = np.array([_value(data[j].get(s, {}).get("ratio")) for s in systems], dtype=float)
        k = i - ("human" in judges)
        color = HUMAN_COLOR if j == "human" else PALETTE[k % len(PALETTE)]
        hatch = None if j == "human" else _HATCHES[k // len(PALETTE) % len(_HATCHES)]
        bars = ax.bar(
            x + (i - (len(judges) - 1) / 2) * width, np.nan_to_num(vals), width, label=label, color=color, hatch=hatch
        )
        if len(systems) * len(judges) <= 120:  # more numbers than fit: the table has them
            ax.bar_label(bars, labels=["n/a" if np.isnan(v) else _num(v, ".2f") for v in vals], fontsize=7, padding=1)
    names = _labels(systems)
    ax.set_xticks(x, names, **_tick_rotation(names))
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("share ranked above the reference")
    ax.set_xlabel("system")
    ax.set_title("Machine-beats-reference ratio")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)


def _beats_reference_boxes(
    data: dict[str, dict[str, dict[str, Any]]], systems: Sequence[str], stem: Path, *, reference_judge: str
) -> Path:
    """`plot_beats_reference` of many systems: per judge, a box of its systems' ratios (whiskers at 1.5 IQR,
    every system a dot); a judge without a defined ratio says so."""
    judges = list(data)
    shown = _labels([reference_judge if j == "human" else j for j in judges])
    ratios = [np.array([_value(data[j].get(s, {}).get("ratio")) for s in systems], dtype=float) for j in judges]
    defined = [r[~np.isnan(r)] for r in ratios]
    fig = _figure(max(4.5, 1.1 * len(judges) + 2.5), 3.8)
    ax = fig.subplots()
    bp = ax.boxplot(defined, patch_artist=True, widths=0.6, showfliers=False)
    for k, (patch, j) in enumerate(zip(bp["boxes"], judges, strict=True)):
        patch.set_facecolor(HUMAN_COLOR if j == "human" else PALETTE[(k - ("human" in judges)) % len(PALETTE)])
        patch.set_alpha(0.75)
    for med in bp["medians"]:
        med.set_color("black")
    rng = np.random.default_rng(0)  # the dots' horizontal jitter: the same figure gives the same bytes
    for k, d in enumerate(defined, start=1):
        ax.plot(k + rng.uniform(-0.2, 0.2, d.size), d, ".", color="#333333", markersize=2, alpha=0.4)
        if not d.size:
            ax.text(k, 0.5, "n/a", ha="center", va="center", color="#555555")
    ax.set_xticks(range(1, len(judges) + 1), shown, **_tick_rotation(shown))
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("share ranked above the reference")
    ax.set_xlabel("judge")
    ax.set_title(
        f"Machine-beats-reference ratio\n{len(systems):,} systems: one box per judge (each system's ratio is in the "
        "table)",
        fontsize=10,
    )
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)


@_drawn
def plot_correlation_heatmaps(
    matrices: dict[str, np.ndarray], metrics: Sequence[str], aspects: Sequence[str], stem: Path, *, title: str
) -> Path:
    """One heatmap panel per correlation (rows: metrics, columns: aspects), colours fixed to [-1, 1], each cell's
    value written in it (``n/a`` when undefined) unless a panel has more than `_MAX_CELL_TEXTS` cells or its cells
    are too small for a number (the title then says the values are in the table)."""
    k = len(matrices)
    if not k or not len(metrics) or not len(aspects):
        return _nothing(stem, title, "no metric or no aspect")
    panel_w = 0.9 * len(aspects) + 1.0
    fig = _figure(panel_w * k + 2.2, 0.5 * len(metrics) + 2.0, layout="constrained")
    axes = fig.subplots(1, k, squeeze=False, sharey=True)
    rows, columns = _labels(metrics), _labels(aspects)
    width, height = fig.get_size_inches()
    cell_w, cell_h = (width - 2.2) / k / len(aspects), (height - 2.0) / len(metrics)
    # a number per cell only where it fits (300 aspects of one metric: cells of 0.04 inch, numbers on each other)
    written = len(metrics) * len(aspects) <= _MAX_CELL_TEXTS and cell_w >= 0.4 and cell_h >= 0.2
    im = None
    for ax, (name, matrix) in zip(axes[0], matrices.items(), strict=True):
        matrix = np.asarray(matrix, dtype=float)
        im = ax.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_xticks(range(len(aspects)), columns, **_tick_rotation(columns))
        ax.set_yticks(range(len(metrics)), rows, **({"fontsize": 7} if len(rows) > 40 else {}))
        for i in range(len(metrics)) if written else ():
            for j in range(len(aspects)):
                v = matrix[i, j]
                ax.text(
                    j,
                    i,
                    "n/a" if np.isnan(v) else _num(v, ".2f"),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if (not np.isnan(v) and abs(v) > 0.6) else "black",
                )
        ax.spines[:].set_visible(False)
        ax.set_title(str(name))
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.02)
    fig.suptitle(title if written else f"{title} (values in the table)", fontsize=11)
    return save_figure(fig, stem)


#: systems past which a panel of `plot_score_distributions` pools the machine systems into one box: a box per
#: system of 3,000 took minutes and most of a gigabyte to draw and could not be read
MAX_SYSTEM_BOXES = 40


def _pool_systems(by_system: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The human stories (if any) and one pooled entry for every other system's per-story scores."""
    machines = [np.asarray(v, dtype=float).ravel() for s, v in by_system.items() if s != "human"]
    pooled = {f"all {len(machines):,} systems": np.concatenate(machines) if machines else np.array([])}
    return {"human": by_system["human"], **pooled} if "human" in by_system else pooled


@_drawn
def plot_score_distributions(
    scores: dict[str, dict[str, np.ndarray]], stem: Path, *, lower_is_better: Sequence[str] = ()
) -> Path:
    """One panel per metric: box plots of per-story scores per system, the human stories first and grey
    (whiskers at 1.5 IQR, outliers hidden); a panel title says when lower is better, how many infinite scores
    it leaves out (a box cannot show them), and a panel without a finite score says so. Past `MAX_SYSTEM_BOXES`
    systems the machine systems share one box (the title says so)."""
    metrics = list(scores)
    if not metrics:
        return _nothing(stem, "Per-story scores by system", "no metric")
    pooled = {m: len(scores[m]) > MAX_SYSTEM_BOXES for m in metrics}
    scores = {m: _pool_systems(scores[m]) if pooled[m] else scores[m] for m in metrics}
    most = max(len(scores[m]) for m in metrics) or 1
    panel_w = max(3.2, 0.75 * most + 1.2)
    ncols = max(1, min(3, len(metrics), int(_MAX_INCHES // panel_w)))
    nrows = (len(metrics) + ncols - 1) // ncols
    fig = _figure(ncols * panel_w, 3.0 * nrows + 0.4, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, m in zip(axes.flat, metrics, strict=False):
        by_system = scores[m]
        names = sorted(by_system, key=lambda s: (s != "human", s))
        values = [np.asarray(by_system[s], dtype=float) for s in names]
        data = [v[np.isfinite(v)] for v in values]
        infinite = sum(int(np.isinf(v).sum()) for v in values)
        largest = max((float(np.abs(d).max()) for d in data if d.size), default=0.0)
        scale = 10.0 ** math.floor(math.log10(largest)) if largest > 1e300 else 1.0
        if scale != 1.0:  # scores of +-1.7e308: the axis span overflowed ("arange: cannot compute length")
            data = [d / scale for d in data]
        bp = ax.boxplot(data, patch_artist=True, widths=0.6, showfliers=False)
        shown = _labels(names)
        ax.set_xticks(range(1, len(names) + 1), shown, **_tick_rotation(shown))
        for k, (patch, name) in enumerate(zip(bp["boxes"], names, strict=True)):
            patch.set_facecolor(HUMAN_COLOR if name == "human" else PALETTE[k % len(PALETTE)])
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        if not any(d.size for d in data):
            ax.text(0.5, 0.5, "no finite score", transform=ax.transAxes, ha="center", va="center", color="#555555")
        [name] = _labels([m])
        title = f"{name} (lower is better)" if m in lower_is_better else name
        if infinite:
            title += f"\n{infinite:,} infinite score{'s' if infinite != 1 else ''} not shown"
        if pooled[m]:
            title += f"\nmore than {MAX_SYSTEM_BOXES} systems: one box for all machine systems"
        ax.set_title(title)
        ax.set_ylabel("score per story" if scale == 1.0 else f"score per story / {scale:.0e}")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    fig.suptitle("Per-story scores by system")
    return save_figure(fig, stem)
