"""VCR-Bench in `lmms-vr report`: the paper's Tables 2-5 beside your runs, CIs, comparisons and Fig. 4-style plots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.results.report_plots import error_bars, grouped_bars, pyplot, saved
from lmms_video_reasoning.utils.results.report_runs import Run
from lmms_video_reasoning.utils.results.report_stats import NotComputed, TaskStats, interval_of, value_of
from lmms_video_reasoning.utils.results.report_tables import (
    MINE, Coverage, Section, ci_table, comparison_tables, paper_table, reference, released_coverage, row_label, run_row, stats_row,
)
from lmms_video_reasoning.vcr_bench import scoring
from lmms_video_reasoning.vcr_bench.data import RELEASE
from lmms_video_reasoning.vcr_bench.frames import TABLE9_COUNTS

TASKS = ("vcr_cot", "vcr_direct", "vcr_text_only", "vcr_one_frame")
# Table 9: `vcr_cot` with `frame_count` N in frames mode (README, "Reproducing the paper's tables")
FRAME_TASKS = tuple(f"vcr_cot_frames{count}" for count in TABLE9_COUNTS)
HEADLINE = ("accuracy", "perception_f1", "reasoning_f1", "cot_recall", "cot_precision", "cot_f1")
LABELS = {
    "perception_recall": "Perc. Rec", "perception_precision": "Perc. Pre", "perception_f1": "Perc. F1",
    "reasoning_recall": "Reas. Rec", "reasoning_precision": "Reas. Pre", "reasoning_f1": "Reas. F1",
    "cot_recall": "Avg Rec", "cot_precision": "Avg Pre", "cot_f1": "Avg F1 (CoT score)",
    **{f"accuracy_{code}": code.upper() for code in scoring.DIMENSIONS.values()}, "accuracy": "Avg acc",
    "accuracy_short": "Short", "accuracy_medium": "Med", "accuracy_long": "Long",
    "vcr_text_only:accuracy": "Text", "vcr_one_frame:accuracy": "1 Frame", "vcr_direct:accuracy": "Direct", "vcr_cot:accuracy": "CoT",
    "full_cot_given_correct": "P(full CoT | correct)",
    **{f"{task}:accuracy": f"{task.removeprefix('vcr_cot_frames')} frames" for task in FRAME_TASKS},
}


# Paper Table 10: the full-CoT share of the correct answers.
def fully_correct_cot(recall_steps: Sequence[dict] | None, precision_steps: Sequence[dict] | None,
                      include_background: bool = False) -> bool | None:
    """The paper's "full CoT score" (Table 10) of a sample: overall recall and precision both 1 (undefined
    is not full); None when either CoT judgment is missing."""
    if recall_steps is None or precision_steps is None:
        return None
    return scoring.recall_ratios(recall_steps, include_background)["overall"] == 1 and scoring.precision_ratios(precision_steps, include_background)["overall"] == 1


@dataclass(frozen=True)
class FullCotShare:
    """Paper Table 10: the share (0-100, NaN without any) of the `correct` answers with both CoT judgments
    that are `full` (`fully_correct_cot`); `unjudged`: correct answers left out for a missing judgment."""

    share: float
    full: int
    correct: int
    unjudged: int


def full_cot_share(outcomes: Sequence[dict], include_background: bool = False) -> FullCotShare:
    """`FullCotShare` of a run's outcomes (`correct`, `recall_steps`, `precision_steps`)."""
    judged = [fully_correct_cot(o["recall_steps"], o["precision_steps"], include_background) for o in outcomes if o["correct"] is True]
    full = sum(j is True for j in judged)
    correct = sum(j is not None for j in judged)
    return FullCotShare(100.0 * full / correct if correct else math.nan, full, correct, len(judged) - correct)


def full_cot_given_correct(label: str, stats: TaskStats) -> tuple[float, str]:
    """Paper Table 10 for a `vcr_cot` run, from its per-sample outcomes (`full_cot_share`),
    and the note under the table: what the share counts, or why the report cannot compute it."""
    judged = value_of(stats, "cot_f1")
    if isinstance(judged, NotComputed):  # the run's judged metrics are not computed: neither is this (run_row says why)
        return judged, ""
    if stats.sampled is None:
        return math.nan, f"{label}: needs the run's per-sample outcomes ({stats.note})"
    for metric in ("accuracy", "cot_f1"):
        if not stats.sampled.trusted(metric):
            return math.nan, f"{label}: the outcomes are not the run's ({stats.sampled.why_not(metric)})"
    share = full_cot_share(stats.sampled.outcomes, scoring.resolve_settings(stats.sampled.settings)["include_background"])
    note = (f"{label}: {share.full} of the {share.correct} correct answers have a fully correct CoT" if share.correct
            else f"{label}: no correct answer with its CoT judged: the share is undefined")
    if share.unjudged:
        note += f" ({share.unjudged} correct answers without a CoT judgment left out)"
    return share.share, note


def cot_vs_accuracy_plot(path: Path, user: list[tuple[str, float, float, tuple | None, tuple | None]]) -> Path:
    """VCR-Bench Fig. 4: CoT score vs accuracy, the paper's models (grey) and your runs (with CIs)."""
    import numpy as np

    plt = pyplot()
    tables = reference("vcr_bench")["tables"]
    accuracy = {row["model"]: row["values"][-1] for row in tables["table3"]["rows"]}
    paper = [(row["model"], row["values"][-1], accuracy[row["model"]]) for row in tables["table2"]["rows"]
             if row["model"] in accuracy and row["model"] != "Human Performance"]
    fig, ax = plt.subplots(figsize=(7.5, 5.2), dpi=110)
    xs, ys = np.array([p[1] for p in paper]), np.array([p[2] for p in paper])
    ax.scatter(xs, ys, color="#9a9a9a", s=22, label="paper (VCR-Bench Tables 2 and 3)")
    labelled: list[tuple[float, float]] = []
    for name, x, y in sorted(paper, key=lambda p: -p[2]):  # label a point only where labels do not collide
        if all(abs(x - lx) > 7 or abs(y - ly) > 2.5 for lx, ly in labelled):
            ax.annotate(name, (x, y), fontsize=6.5, color="#6a6a6a", xytext=(3, 2), textcoords="offset points")
            labelled.append((x, y))
    slope, intercept = np.polyfit(xs, ys, 1)
    line = np.linspace(0, 80, 2)
    r = float(np.corrcoef(xs, ys)[0, 1])
    ax.plot(line, slope * line + intercept, color="#bbbbbb", linestyle="--", linewidth=1, label=f"paper fit (r = {r:.2f})")
    for label, x, y, x_ci, y_ci in user:
        ax.errorbar([x], [y], xerr=error_bars([x], [x_ci]), yerr=error_bars([y], [y_ci]), fmt="*", markersize=14, capsize=3, label=f"{MINE}{label} (95% CI)")
    ax.set(xlabel="CoT score (overall F1)", ylabel="Accuracy", xlim=(0, 100), ylim=(0, 100),
           title="CoT score vs accuracy (VCR-Bench Fig. 4 style)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    return saved(fig, path)


def section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    present = [(run, task) for run in runs for task in TASKS + FRAME_TASKS if (run.label, task) in stats]
    if not present:
        return None
    section = Section("vcr_bench")
    tables = reference("vcr_bench")["tables"]

    def covered(tasks: Sequence[str], among: Sequence[Run] = runs) -> list[Coverage]:
        """The released questions each run's task scored (the rows are on all 1,034)."""
        return [released_coverage(row_label(run.label, task, "vcr_cot"), run, task, stats[(run.label, task)], RELEASE["all"][0])
                for run, task in present if task in tasks and run in among]

    for name, tasks in (("table2", ("vcr_cot",)), ("table3", TASKS), ("table4", TASKS)) if any(t in TASKS for _, t in present) else ():
        rows = [stats_row(row_label(run.label, task, "vcr_cot"), task, stats[(run.label, task)], "vcr_bench", tables[name]["columns"])
                for run, task in present if task in tasks]
        section.tables.append(paper_table("vcr_bench", name, rows, coverage=covered(tasks)))
    # accuracy across tasks: the Table 5 ablations (runs with two or more of them), Table 9's frame counts
    for name, tasks, what, fewest in (("table5", TASKS, "vcr_* tasks", 2), ("table9", FRAME_TASKS, "vcr_cot_frames* tasks", 1)):
        among, columns = [run for run in runs if sum((run.label, t) in stats for t in tasks) >= fewest], tables[name]["columns"]
        user = [run_row(run.label, what, [value_of(stats.get((run.label, c.split(":")[0])), "accuracy") for c in columns], "vcr_bench", columns)
                for run in among]
        if among:
            section.tables.append(paper_table("vcr_bench", name, user, coverage=covered(tasks, among)))
    cot_runs = [(run.label, stats[(run.label, "vcr_cot")]) for run, task in present if task == "vcr_cot"]
    if cot_runs:  # Table 10 from the vcr_cot outcomes: no generation of its own
        shares = [(label, *full_cot_given_correct(label, s)) for label, s in cot_runs]
        table10 = paper_table("vcr_bench", "table10", [run_row(label, "vcr_cot", [value], "vcr_bench", ["full_cot_given_correct"])
                                                       for label, value, _ in shares], coverage=covered(("vcr_cot",)))
        table10.notes += [note for _, _, note in shares if note]
        section.tables.append(table10)
    section.tables.append(ci_table("vcr_bench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    section.tables += comparison_tables("vcr_bench", TASKS + FRAME_TASKS, stats, runs, n, seed)

    if cot_runs:
        user = [(label, value_of(s, "cot_f1"), value_of(s, "accuracy"), interval_of(s, "cot_f1"), interval_of(s, "accuracy")) for label, s in cot_runs]
        user = [point for point in user if not (math.isnan(point[1]) or math.isnan(point[2]))]  # not computed: no point
        section.figures.append(("CoT score vs accuracy", cot_vs_accuracy_plot(out / "vcr_bench_cot_vs_accuracy.png", user)))
        for by, table, names in (("duration", "table4", ["Short (≤60 s)", "Medium (≤300 s)", "Long"]), ("dimension", "table3", None)):
            metrics = tables[table]["columns"][:3 if names else 7]  # table4 opens with the buckets, table3 with the dimensions
            paper_row = next(r for r in tables[table]["rows"] if r["model"] == "GPT-4o")
            section.figures.append((f"Accuracy by {by}", grouped_bars(
                out / f"vcr_bench_accuracy_by_{by}.png", f"VCR-Bench accuracy by {by} (vcr_cot)", names or [LABELS[m] for m in metrics],
                [(label, [value_of(s, m) for m in metrics], [interval_of(s, m) for m in metrics]) for label, s in cot_runs], "Accuracy",
                ("paper: GPT-4o", paper_row["values"][:len(metrics)]))))
    return section


def report_spec() -> ReportSpec:
    # every VCR-Bench metric, accuracy included, rests on the judge's answer extraction
    return ReportSpec(section=section, headline=HEADLINE, labels=LABELS)
