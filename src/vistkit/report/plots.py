"""Matplotlib figures for meta-evaluation reports (Agg backend; every figure saved as PNG and PDF).

- `plot_pair_accuracy`: pair accuracy per metric with its bootstrap CI (Vrank Table 4 as a figure);
- `plot_accuracy_by_gap`: pair accuracy per ranking-gap bucket, one line per metric (Vrank Fig. 3);
- `plot_beats_reference`: machine-beats-reference ratio per system, people vs metrics (Vrank Fig. 4);
- `plot_correlation_heatmaps`: metrics x human aspects, one panel per correlation coefficient;
- `plot_score_distributions`: per-story score distributions per system, human first (dHM Fig. 12).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HUMAN_COLOR = "#4d4d4d"
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")


def _matplotlib_folder() -> None:
    """Point ``MPLCONFIGDIR`` into vistkit's cache when matplotlib's own folders (``~/.config/matplotlib``,
    ``~/.cache/matplotlib``) cannot be written (no or a read-only HOME): matplotlib then printed two lines
    ("mkdir -p failed ... Matplotlib created a temporary cache directory ...") on every report; vistkit's cache
    says it once, in one warning, when it falls back itself."""
    import os
    import sys

    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    from vistkit.models.runtime import default_cache_dir, folder_problem

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


def _pyplot() -> Any:
    _matplotlib_folder()
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "pdf.fonttype": 42,
            "svg.fonttype": "none",
            "figure.dpi": 100,
        }
    )
    if "text.parse_math" in plt.rcParams:  # labels are names: "sys$a\b$" was mathtext (ValueError), "a_b" TeX
        plt.rcParams["text.parse_math"] = False
    return plt


def save_figure(fig: Any, stem: Path) -> Path:
    """Save ``stem.png`` (150 dpi) and ``stem.pdf``; close the figure; return the PNG path."""
    from vistkit.data.output import output_path

    plt = _pyplot()
    png = stem.with_suffix(".png")
    try:  # in a report folder (`report.html._whole_folder`): temp file + rename, as every vistkit output
        with output_path(png, force=True) as tmp:
            fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight", metadata={"Software": "vistkit"})
        with output_path(stem.with_suffix(".pdf"), force=True) as tmp:
            fig.savefig(tmp, format="pdf", bbox_inches="tight")
    finally:
        plt.close(fig)
    return png


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
    the number of pairs at each bar, dashed 0.5 = coin flip. ``proxy``: the x axis says what the number means
    on proxy-labelled pairs (how often the metric prefers the human story)."""
    plt = _pyplot()
    metrics = list(accuracy)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(metrics) + 1.6))
    y = np.arange(len(metrics))[::-1]
    acc = np.array([np.nan if accuracy[m] is None else accuracy[m] for m in metrics], dtype=float)
    low = np.array([ci.get(m, (np.nan, np.nan))[0] for m in metrics], dtype=float)
    high = np.array([ci.get(m, (np.nan, np.nan))[1] for m in metrics], dtype=float)
    err = np.vstack([np.clip(acc - low, 0, None), np.clip(high - acc, 0, None)])
    err = np.nan_to_num(err)
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(metrics))]
    ax.barh(y, np.nan_to_num(acc), color=colors, height=0.6, xerr=err, capsize=3, ecolor="#333333")
    for yi, m, a, h in zip(y, metrics, acc, high, strict=True):
        if not np.isnan(a):
            ax.text(
                (h if not np.isnan(h) else a) + 0.015, yi, f"{a:.3f} (n={n.get(m, 0):,})", va="center", fontsize=8
            )
    ax.axvline(0.5, color="#999999", linestyle="--", linewidth=1, zorder=0)
    ax.set_yticks(y, metrics)
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


def plot_accuracy_by_gap(
    by_gap: dict[str, list[dict[str, Any]]], stem: Path, *, normalised: bool = True
) -> Path:
    """Lines of accuracy per gap bucket (x: the buckets), dashed 0.5 = coin flip; each metric's legend entry
    gives its number of pairs per bucket (metrics leave different pairs undefined, so n differs by metric)."""
    plt = _pyplot()
    metrics = list(by_gap)
    buckets = by_gap[metrics[0]] if metrics else []
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(buckets) + 3.0), 3.6))
    x = np.arange(len(buckets))
    for i, m in enumerate(metrics):
        acc = [np.nan if b["accuracy"] is None else b["accuracy"] for b in by_gap[m]]
        counts = " / ".join(f"{b['n']:,}" for b in by_gap[m])
        ax.plot(x, acc, marker="o", color=PALETTE[i % len(PALETTE)], label=f"{m} (n = {counts})", linewidth=1.8)
    ax.axhline(0.5, color="#999999", linestyle="--", linewidth=1, zorder=0)
    labels = [f"{b['low']:.3g}–{b['high']:.3g}" for b in buckets]
    ax.set_xticks(x, labels)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("pair accuracy")
    ax.set_xlabel("ranking gap / N" if normalised else "ranking gap (rank units)")
    ax.set_title("Pair accuracy by human ranking gap")
    ax.legend(
        frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="metric (pairs per bucket)"
    )
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)


def plot_beats_reference(
    data: dict[str, dict[str, dict[str, Any]]], stem: Path, *, reference_judge: str = "people"
) -> Path:
    """Grouped bars: per system, the share of its stories ranked above the reference by each judge.
    ``reference_judge`` names the ``"human"`` judge in the legend by what its judgements are (people, or a
    proxy label that is not a judgement at all)."""
    plt = _pyplot()
    judges = list(data)
    systems = sorted({s for d in data.values() for s in d})
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(systems) * max(1, len(judges)) / 2 + 2.5), 3.4))
    width = 0.8 / max(1, len(judges))
    x = np.arange(len(systems))
    for i, j in enumerate(judges):
        vals = [data[j].get(s, {}).get("ratio", np.nan) for s in systems]
        color = HUMAN_COLOR if j == "human" else PALETTE[(i - ("human" in judges)) % len(PALETTE)]
        label = reference_judge if j == "human" else j
        bars = ax.bar(x + (i - (len(judges) - 1) / 2) * width, vals, width, label=label, color=color)
        ax.bar_label(bars, labels=["" if np.isnan(v) else f"{v:.2f}" for v in vals], fontsize=7, padding=1)
    ax.set_xticks(x, systems)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("share ranked above the reference")
    ax.set_xlabel("system")
    ax.set_title("Machine-beats-reference ratio")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, stem)


def plot_correlation_heatmaps(
    matrices: dict[str, np.ndarray], metrics: Sequence[str], aspects: Sequence[str], stem: Path, *, title: str
) -> Path:
    """One heatmap panel per correlation (rows: metrics, columns: aspects), colours fixed to [-1, 1]."""
    plt = _pyplot()
    k = len(matrices)
    panel_w = 0.9 * len(aspects) + 1.0
    fig, axes = plt.subplots(
        1,
        k,
        figsize=(panel_w * k + 2.2, 0.5 * len(metrics) + 2.0),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    im = None
    for ax, (name, matrix) in zip(axes[0], matrices.items(), strict=True):
        im = ax.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_xticks(range(len(aspects)), aspects, rotation=35, ha="right")
        ax.set_yticks(range(len(metrics)), metrics)
        for i in range(len(metrics)):
            for j in range(len(aspects)):
                v = matrix[i, j]
                ax.text(
                    j,
                    i,
                    "n/a" if np.isnan(v) else f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if (not np.isnan(v) and abs(v) > 0.6) else "black",
                )
        ax.spines[:].set_visible(False)
        ax.set_title(name)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.02)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, stem)


def plot_score_distributions(
    scores: dict[str, dict[str, np.ndarray]], stem: Path, *, lower_is_better: Sequence[str] = ()
) -> Path:
    """One panel per metric: box plots of per-story scores per system, the human stories first and grey
    (whiskers at 1.5 IQR, outliers hidden); a panel title says when lower is better."""
    plt = _pyplot()
    metrics = list(scores)
    ncols = min(3, max(1, len(metrics)))
    nrows = (len(metrics) + ncols - 1) // ncols
    systems_all = [len(scores[m]) for m in metrics] or [1]
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(ncols * max(3.2, 0.75 * max(systems_all) + 1.2), 3.0 * nrows), squeeze=False
    )
    for ax, m in zip(axes.flat, metrics, strict=False):
        by_system = scores[m]
        names = sorted(by_system, key=lambda s: (s != "human", s))
        data = [by_system[s][~np.isnan(by_system[s])] for s in names]
        bp = ax.boxplot(data, patch_artist=True, widths=0.6, showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
        for k, (patch, name) in enumerate(zip(bp["boxes"], names, strict=True)):
            patch.set_facecolor(HUMAN_COLOR if name == "human" else PALETTE[k % len(PALETTE)])
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        ax.set_title(f"{m} (lower is better)" if m in lower_is_better else m)
        ax.set_ylabel("score per story")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    fig.suptitle("Per-story scores by system", y=1.0)
    fig.tight_layout()
    return save_figure(fig, stem)
