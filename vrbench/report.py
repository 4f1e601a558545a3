"""VRBench in `lmms-vr report`: the paper's Table 2 (VLM and LLM rows) beside your runs, CIs by video, comparisons, plots."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.results.report import (
    Run, Section, ci_table, comparison_table, comparisons_for, grouped_bars, interval_of, paper_table, reference, run_row, value_of,
)

TASKS = ("vr_bench", "vr_bench_official", "vr_bench_text", "vr_bench_mcq")
HEADLINE = ("overall", "mcq_accuracy", "process_score")
LABELS = {
    "overall": "Overall", "mcq_accuracy": "MCQ-O", "process_score": "OE-P",
    "type_event_attribution": "EA", "type_counting": "CP", "type_hypothetical_reasoning": "HR", "type_implicit_inference": "II",
    "type_information_synopsis": "IS", "type_event_prediction": "EP", "type_logical_linkage": "LL",
}


def section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    present = [(run, task) for run in runs for task in TASKS if (run.label, task) in stats]
    if not present:
        return None
    section = Section("vrbench")
    columns = reference("vrbench")["tables"]["table2"]["columns"]

    def rows(tasks: Sequence[str]) -> list:
        return [run_row(run.label if task == "vr_bench" else f"{run.label} · {task}", task,
                        [value_of(stats[(run.label, task)], c) for c in columns], "vrbench", columns)
                for run, task in present if task in tasks]

    vlm = rows(("vr_bench", "vr_bench_official", "vr_bench_mcq"))
    if vlm:
        section.tables.append(paper_table("vrbench", "table2", vlm, groups=("VLMs",), title_suffix=" — VLMs (frames)"))
    llm = rows(("vr_bench_text",))
    if llm:
        section.tables.append(paper_table("vrbench", "table2", llm, groups=("LLMs",), title_suffix=" — LLMs (summary, no frames)"))
    section.tables.append(ci_table("vrbench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    comparisons = comparisons_for("vrbench", TASKS, stats, runs, n, seed)
    if comparisons:
        section.tables.append(comparison_table("vrbench", comparisons))
    types = columns[3:]
    shown = [(run.label if task == "vr_bench" else f"{run.label} · {task}", stats[(run.label, task)]) for run, task in present]
    paper_row = next(r for r in reference("vrbench")["tables"]["table2"]["rows"] if r["model"].startswith("GPT-4o") and r["group"].startswith("VLMs"))
    section.figures.append(("Score by reasoning type", grouped_bars(
        out / "vrbench_by_type.png", "VRBench score by reasoning type", [LABELS[t] for t in types],
        [(label, [value_of(s, t) for t in types], [interval_of(s, t) for t in types]) for label, s in shown], "Score",
        ("paper: GPT-4o (VLM)", paper_row["values"][3:]))))
    return section


def report_spec() -> ReportSpec:
    # the paper prints two decimals; the bootstrap resamples videos (the adapter's unit)
    return ReportSpec(section=section, headline=HEADLINE, labels=LABELS, two_decimals=("*",), unit="videos",
                      judge_free=("mcq_accuracy", "model_failed"))
