"""The judge agreement document (`lmms-vr judge-agreement --out FILE`) read back, and its section in
`lmms-vr report --agreement FILE`: the judges and their snapshots, the tables, the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.report_plots import error_bars, pyplot
from lmms_video_reasoning.utils.results.report_tables import Section, Table

FORMAT = "lmms_vr_judge_agreement"  # the key marking an agreement document


def number_text(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def interval_text(interval: Any, digits: int = 3) -> str:
    return "–" if not interval else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def read_document(path: Path) -> dict:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: not a judge agreement file ({error}); write one with `lmms-vr judge-agreement ... --out FILE`") from None
    if not isinstance(document, dict) or FORMAT not in document:
        raise DataError(f"{path}: not a judge agreement file (written by `lmms-vr judge-agreement --out FILE`)")
    return document


def agreement_plot(document: dict, path: Path) -> Path:
    """Kappa per judge call type and the headline metrics' differences, each with its 95% CI."""
    plt = pyplot()
    calls, metrics = document["calls"], document["metrics"]
    rows = max(len(calls), len(metrics), 1)
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.2 + 0.38 * rows), dpi=110)
    for ax, entries, value_key, ci_key, label, title in (
            (axes[0], calls, "kappa", "kappa_ci", lambda c: f"{c['benchmark']} {c['call']}", "kappa (weighted for ratings)"),
            (axes[1], metrics, "difference", "ci", lambda m: f"{m['run']} {m['task']} {m['metric']}", "candidate − reference")):
        shown = [e for e in entries if isinstance(e.get(value_key), (int, float)) and not math.isnan(e[value_key])]
        ys = list(range(len(shown)))[::-1]
        values = [e[value_key] for e in shown]
        intervals = [tuple(e[ci_key]) if e.get(ci_key) else None for e in shown]
        ax.barh(ys, values, xerr=error_bars(values, intervals) if any(intervals) else None, color="#4c72b0",
                capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333"})
        ax.scatter(values, ys, s=12, color="black", zorder=3)  # a value of 0 has no bar: the dot shows it
        ax.set_yticks(ys, [label(e) for e in shown], fontsize=8)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        if value_key == "kappa":
            ax.set_xlim(min(-0.1, *(v for v in values), *(i[0] for i in intervals if i)) if values else -0.1, 1.05)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def agreement_section(path: Path, out: Path, index: int = 1):
    """The report's section for one agreement file: the judges and their snapshots, the tables, the plot."""
    document = read_document(path)
    judges = "; ".join(
        f"{registry.get(b).title}: reference {s['reference']['model']} (snapshots: "
        + (", ".join(f"{m} x{c}" for m, c in s["reference"]["snapshots"].items()) or "none")
        + f"), candidate {s['candidate']['model']} (snapshots: "
        + (", ".join(f"{m} x{c}" for m, c in s["candidate"]["snapshots"].items()) or "none") + ")"
        for b, s in document["judges"].items())
    digits = 3
    calls = Table("Verdict agreement per judge call type (95% bootstrap CIs)",
                         ["Benchmark", "Call", "Pairs", "Agreement", "95% CI", "Kappa", "95% CI", "Statistic"],
                         [([registry.get(c["benchmark"]).title, c["call"], str(c["pairs"]), number_text(c["agreement"], digits),
                            interval_text(c["agreement_ci"], digits), number_text(c["kappa"], digits), interval_text(c["kappa_ci"], digits), c["statistic"]], True)
                          for c in document["calls"]],
                         [f"Bootstrap over questions ({document['bootstrap']} resamples, seed {document['seed']}); kappa is NaN (n/a) "
                          "where both judges gave one and the same label throughout."])
    metrics = Table("Headline metrics under both judges (candidate − reference, paired)",
                           ["Run", "Task", "Metric", "Reference", "Candidate", "Difference", "95% CI", "Samples"],
                           [([m["run"], m["task"], m["metric"], number_text(m["reference"], 2), number_text(m["candidate"], 2),
                              f"{m['difference']:+.2f}" if isinstance(m["difference"], (int, float)) else "n/a", interval_text(m["ci"], 2),
                              str(m["samples"])], True) for m in document["metrics"]],
                           ["On the samples both judges judged completely."])
    tables = [calls, metrics]
    if document["ranking"]:
        tables.append(Table("Ranking agreement across runs (Kendall tau-b)", ["Task", "Metric", "Runs", "Tau", "95% CI", "Questions"],
                                   [([r["task"], r["metric"], ", ".join(r["runs"]), number_text(r["tau"]), interval_text(r["ci"]), str(r["questions"])], True)
                                    for r in document["ranking"]]))
    missing = [f"{row['run']} {row['task']}: {row['samples'] - row['compared']} of {row['samples']} samples not compared"
               for row in document["coverage"] if row["samples"] > row["compared"]]
    if missing:
        tables[0].notes += missing
    calibration = document.get("calibration")
    intro = f"Judges: {judges}." + (f" Calibration: {calibration['samples']} samples judged by the reference "
                                    f"({calibration['bound']['calls']} requests, {calibration['bound']['spent_usd']:.4f} USD)."
                                    if calibration else "")
    figure = agreement_plot(document, out / f"judge_agreement_{index}.png")
    return Section("judge_agreement", tables, [("Judge agreement: kappa and metric differences with 95% CIs", figure)],
                          {"agreement_file": str(path)}, title="Judge agreement", intro=intro)
