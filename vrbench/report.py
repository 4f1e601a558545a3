"""VRBench in `lmms-vr report`: the paper's Table 2 (VLM and LLM rows) beside your runs, CIs by video, comparisons, plots."""

from __future__ import annotations

from pathlib import Path

from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.results.report_plots import grouped_bars
from lmms_video_reasoning.utils.results.report_runs import Run
from lmms_video_reasoning.utils.results.report_stats import interval_of, value_of
from lmms_video_reasoning.utils.results.report_tables import (
    Coverage, Section, ci_table, comparison_tables, paper_table, reference, released_coverage, row_label, stats_row,
)
from lmms_video_reasoning.vrbench.data import RELEASE

TASKS = ("vr_bench", "vr_bench_official", "vr_bench_text", "vr_bench_mcq", "vr_bench_two_phase", "vr_bench_text_two_phase")
HEADLINE = ("overall", "mcq_accuracy", "process_score")
LABELS = {
    "overall": "Overall", "mcq_accuracy": "MCQ-O", "process_score": "OE-P",
    "type_event_attribution": "EA", "type_counting": "CP", "type_hypothetical_reasoning": "HR", "type_implicit_inference": "II",
    "type_information_synopsis": "IS", "type_event_prediction": "EP", "type_logical_linkage": "LL",
}


# How every run of this suite differs from the protocol of the paper's Table 2 rows (README, differences)
ONE_GENERATION = ("one generation with the options shown, as the official code (the paper's rows: reasoning first, "
                  "without the options, then the choice: tasks vr_bench_two_phase, vr_bench_text_two_phase)")
TWO_PHASE = ("generation in two phases, as the rows; OE-P weights the official code's 0.4/0.4/0.1/0.1 for every type "
             "(the paper: 8:1:1 without the similarity term for EP and HR)")
JUDGE_PROTOCOL = {"default": "judge: this suite's default protocol", "official": "judge: the official script's behaviour"}


def coverage(run: Run, task: str, stats) -> Coverage:
    """A run's task beside Table 2: the released questions it scored, its protocol."""
    protocol = TWO_PHASE if task.endswith("_two_phase") else ONE_GENERATION
    if task != "vr_bench_mcq":
        judged = stats.sampled.settings.get("protocol") if stats.sampled is not None else ("official" if task == "vr_bench_official" else None)
        protocol += f" ({JUDGE_PROTOCOL.get(judged, 'judge protocol not recorded')})"
    return released_coverage(row_label(run.label, task, "vr_bench"), run, task, stats, RELEASE["all"][0], protocol)


def section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    present = [(run, task) for run in runs for task in TASKS if (run.label, task) in stats]
    if not present:
        return None
    section = Section("vrbench")
    columns = reference("vrbench")["tables"]["table2"]["columns"]
    for group, suffix, tasks in (("VLMs", " — VLMs (frames)", ("vr_bench", "vr_bench_official", "vr_bench_mcq", "vr_bench_two_phase")),
                                 ("LLMs", " — LLMs (summary, no frames)", ("vr_bench_text", "vr_bench_text_two_phase"))):
        shown = [(run, task) for run, task in present if task in tasks]
        if shown:
            rows = [stats_row(row_label(run.label, task, "vr_bench"), task, stats[(run.label, task)], "vrbench", columns) for run, task in shown]
            section.tables.append(paper_table("vrbench", "table2", rows, groups=(group,), title_suffix=suffix,
                                              coverage=[coverage(run, task, stats[(run.label, task)]) for run, task in shown]))
    section.tables.append(ci_table("vrbench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    section.tables += comparison_tables("vrbench", TASKS, stats, runs, n, seed)
    types = columns[3:]
    paper_row = next(r for r in reference("vrbench")["tables"]["table2"]["rows"] if r["model"].startswith("GPT-4o") and r["group"].startswith("VLMs"))
    section.figures.append(("Score by reasoning type", grouped_bars(
        out / "vrbench_by_type.png", "VRBench score by reasoning type", [LABELS[t] for t in types],
        [(row_label(run.label, task, "vr_bench"), [value_of(stats[(run.label, task)], t) for t in types], [interval_of(stats[(run.label, task)], t) for t in types])
         for run, task in present], "Score", ("paper: GPT-4o (VLM)", paper_row["values"][3:]))))
    return section


def report_spec() -> ReportSpec:
    # the paper prints two decimals; the bootstrap resamples videos (the adapter's unit)
    return ReportSpec(section=section, headline=HEADLINE, labels=LABELS, two_decimals=("*",), unit="videos",
                      judge_free=("mcq_accuracy", "model_failed"))
