"""The report's plots (matplotlib, Agg)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.results.report_tables import MINE


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def error_bars(points: Sequence[float], intervals: Sequence[tuple[float, float] | None]):
    """Asymmetric error bars for matplotlib from CIs (0 where there is none)."""
    low = [p - i[0] if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    high = [i[1] - p if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    return [[max(0.0, v) for v in low], [max(0.0, v) for v in high]]


def grouped_bars(path: Path, title: str, categories: Sequence[str], series: list[tuple[str, list[float], list]], ylabel: str,
                 reference: tuple[str, list[float | None]] | None = None) -> Path:
    """Bars per category, one colour per run (CIs as error bars), optionally a paper row as markers."""
    plt = pyplot()
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories) * max(1, len(series)) ** 0.5 + 2), 4.2), dpi=110)
    for k, (label, values, intervals) in enumerate(series):
        # a value the run does not have (not computed, NaN) gets no bar: a bar of 0 would read as a score
        kept = [i for i, v in enumerate(values) if not math.isnan(v)]
        if not kept:
            continue
        xs = [i + (k - (len(series) - 1) / 2) * width for i in kept]
        shown, shown_intervals = [values[i] for i in kept], [intervals[i] for i in kept]
        errors = error_bars(shown, shown_intervals) if any(shown_intervals) else None
        bars = ax.bar(xs, shown, width * 0.92, label=f"{MINE}{label}", yerr=errors, capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333"})
        for bar, value in zip(bars, shown):  # the value itself, inside the bar's foot
            ax.text(bar.get_x() + bar.get_width() / 2, 1.5, f"{value:.1f}", ha="center", va="bottom", fontsize=7.5,
                    color="white" if value >= 8 else "#333", rotation=90 if len(series) > 2 else 0)
    if reference is not None:
        name, values = reference
        ax.scatter([i for i, v in enumerate(values) if v is not None], [v for v in values if v is not None], marker="_", s=500,
                   color="black", zorder=3, label=name)
    ax.set_xticks(range(len(categories)), categories)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return saved(fig, path)


def saved(fig, path: Path) -> Path:
    """Write a figure laid out tight to `path`, and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
