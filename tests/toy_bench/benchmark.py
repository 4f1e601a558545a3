"""ToyBench as shared code sees it: counting dots, one rule-based metric, a paper table; its one task,
declared here (`tasks/toy_count.yaml` is generated from it: `LMMS_VR_BENCHMARKS=toy_bench.benchmark
PYTHONPATH=tests python -m lmms_video_reasoning.utils.core.task_yaml toy_bench`), and its lmms-eval hooks."""

from __future__ import annotations

from pathlib import Path

from lmms_video_reasoning.utils.core.registry import Benchmark, ReportSpec, Scored, ScoringAdapter, Task
from lmms_video_reasoning.utils.core.roots import docs_dataset
from lmms_video_reasoning.utils.lmms.responses import model_failed
from lmms_video_reasoning.utils.results import report_stats, report_tables
from lmms_video_reasoning.utils.results.aggregation import DeclaredHooks

from . import data, records

METRICS = ("accuracy", "model_failed")
TASKS = (Task("toy_count", METRICS, generation_kwargs={"until": [], "max_new_tokens": 16, "do_sample": False, "temperature": 0},
              about="ToyBench: how many dots? (documents from $TOY_BENCH_ROOT/annotations.json)"),)

PAPER_TABLES = {
    "paper": {"title": "ToyBench: Counting Dots", "authors": "Nobody et al.", "year": 2026, "arxiv": "2601.00001"},
    "tables": {"table1": {"number": 1, "title": "Table 1: counting accuracy", "task": "toy_count", "columns": ["accuracy"],
                          "rows": [{"model": "Paper-Model-7B", "group": None, "values": [61.5]}]}},
}


def process_docs(_dataset=None):
    return docs_dataset(data.load_records())


def doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return []


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"]


def metrics_of(records_: list[dict], outcomes: list[dict]) -> dict:
    """Accuracy (0-100) and the samples the model never answered."""
    if not outcomes:
        return {"accuracy": float("nan"), "model_failed": 0}
    return {"accuracy": 100.0 * sum(o["correct"] for o in outcomes) / len(outcomes),
            "model_failed": sum(model_failed(record) for record in records_)}


def outcomes_of(records_: list[dict]) -> list[dict]:
    return [{"correct": records.correct(record)} for record in records_]


class ToyScoring(ScoringAdapter):
    name = judge_name = "toy_bench"

    def score(self, records_, settings, judge):
        outcomes = outcomes_of(records_)
        return Scored(metrics_of(list(records_), outcomes), outcomes)

    def needs_judge(self, records_):
        return False

    def outcomes(self, records_, settings, judge):
        return outcomes_of(records_)

    def metrics(self, records_, outcomes, settings):
        return metrics_of(list(records_), list(outcomes))


def section(runs, stats, out, n, seed):
    """The report's ToyBench section: the paper table with the runs beside it, and the CIs."""
    present = [(run, "toy_count") for run in runs if (run.label, "toy_count") in stats]
    if not present:
        return None
    part = report_tables.Section("toy_bench")
    rows = [report_tables.run_row(run.label, task, [report_stats.value_of(stats[(run.label, task)], "accuracy")], "toy_bench", ["accuracy"])
            for run, task in present]
    part.tables.append(report_tables.paper_table("toy_bench", "table1", rows))
    part.tables.append(report_tables.ci_table("toy_bench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    return part


BENCHMARK = Benchmark(
    name="toy_bench",
    title="ToyBench",
    package=__package__,
    task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=records.build_record,
    scoring=ToyScoring(),
    tasks=TASKS,
    report=ReportSpec(section=section, headline=("accuracy",), labels={"accuracy": "Acc"}),
    failure_counts=("model_failed",),
    reference=PAPER_TABLES,
    data_module=f"{__package__}.data",
    aliases=("toy",),
)

__getattr__ = DeclaredHooks(BENCHMARK)  # process_results_toy_count, aggregate_accuracy, aggregate_model_failed
