"""The numbers behind the report's tables: per run and task, points from the results, CIs from samples; the pairs compared."""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.report_bootstrap import Difference, Sampled, bootstrap_ci, load_sampled, paired_difference
from lmms_video_reasoning.utils.results.report_runs import Run, spec_of
from lmms_video_reasoning.utils.results.score import same_value
from lmms_video_reasoning.utils.results.samples_io import task_spec


@dataclass
class TaskStats:
    point: dict[str, float]
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    questions: int | None = None  # the questions the samples answer
    units: int | None = None  # the resampling units they fall in (`ReportSpec.unit`: the questions, or e.g. their videos)
    note: str = ""  # why intervals are missing (or the per-sample data disagrees)
    sampled: Sampled | None = None
    source: str = ""  # for a row joining several tasks: which
    not_computed: dict[str, str] = field(default_factory=dict)  # metric -> why the run has no value ("judge_failed 9 of 9")
    failed_judgments: str = ""  # judgments that failed and were counted wrong, under the share ("judge_failed 1 of 40")


class NotComputed(float):
    """A metric the run did not compute (NaN) with the reason: "not computed", no bar, the reason under its table."""

    def __new__(cls, reason: str):
        value = super().__new__(cls, math.nan)
        value.reason = reason
        return value


def mark_not_computed(run: Run, task: str, stats: TaskStats, benchmark: str) -> None:
    """Judged metrics NaN in a run that counted judge failures ("judge_failed N of M") are not computed
    (the failure share); under the share, the failures are noted."""
    failed = stats.point.get("judge_failed")
    if not isinstance(failed, float) or math.isnan(failed) or failed <= 0:
        return
    total = run.sizes.get(task) or (len(stats.sampled.records) if stats.sampled is not None else None)
    failures = f"judge_failed {failed:g}" + (f" of {total}" if total else "")
    judge_free, counts = spec_of(benchmark).judge_free, registry.get(benchmark).failure_counts
    for metric, value in stats.point.items():
        if math.isnan(value) and metric not in judge_free and metric not in counts:
            stats.not_computed[metric] = failures
    if any(not math.isnan(v) and m not in judge_free and m not in counts for m, v in stats.point.items()):
        stats.failed_judgments = failures


def reproduces_run(sampled: Sampled, point: dict, recomputed: dict) -> bool:
    """The recomputed judged metrics, judge_failed included, equal the run's: the missing verdicts are its failed judgments."""
    judge_free = spec_of(sampled.benchmark).judge_free
    shared = [m for m in point if m in recomputed and m not in judge_free]
    return "judge_failed" in shared and all(same_value(point[m], recomputed[m]) for m in shared)


def task_stats(run: Run, task: str, n: int, seed: int) -> TaskStats:
    stats = TaskStats(point=dict(run.results.get(task, {})))
    try:
        benchmark = task_spec(task).benchmark
    except DataError:
        stats.note = f"{task} is not a task of this suite"
        return stats
    path = run.samples.get(task)
    if path is None:
        sampled, why = None, "no samples file next to the results (run lmms-eval with --log_samples)"
    else:
        sampled, why = load_sampled(task, path, run.sources.get(task))
    if sampled is not None:
        # borrowed verdicts matter only where the records ask the judge
        sampled.borrowed = sampled.borrowed if sampled.bench.needs_judge(sampled.records) else ""
        stats.sampled, stats.questions, stats.units = sampled, sampled.question_count, sampled.unit_count
    mark_not_computed(run, task, stats, benchmark)
    if sampled is None:
        stats.note = why
        return stats
    recomputed = sampled.metrics()  # the run's metrics recomputed from its samples, to check them against its results
    if sampled.missing_verdicts and not sampled.borrowed and reproduces_run(sampled, stats.point, recomputed):
        sampled.missing_verdicts = sampled.gap = ""  # the missing verdicts are the run's own failed judgments
    differ = [m for m, v in stats.point.items() if m in recomputed and sampled.trusted(m) and not same_value(v, recomputed[m])]
    sampled.untrusted.update(differ)
    differs = (f"per-sample re-scoring differs from the results file for {', '.join(differ)}"
               + (" (the verdicts are borrowed)" if sampled.borrowed else " (judge cache missing?)")) if differ else sampled.missing_verdicts
    stats.note = "; ".join(filter(None, (differs, sampled.borrowed)))
    if n > 0 and spec_of(sampled.benchmark).per_task_bootstrap:  # else the section bootstraps its joined rows
        stats.ci = trusted_only(sampled, bootstrap_ci(sampled, n, seed), stats.point)
    return stats


def trusted_only(sampled: Sampled, intervals: dict, point: dict | None = None) -> dict:
    """The CIs of the metrics whose outcomes are the run's (`Sampled.trusted`) and value is not NaN."""
    point = point or {}
    return {metric: interval for metric, interval in intervals.items()
            if sampled.trusted(metric) and not math.isnan(point.get(metric, 0.0))}


def value_of(stats: TaskStats | None, metric: str) -> float:
    """The run's value; `NotComputed` (NaN with the reason) for a metric the run could not compute."""
    if stats is None:
        return math.nan
    if metric in stats.not_computed:
        return NotComputed(stats.not_computed[metric])
    return stats.point.get(metric, math.nan)


def interval_of(stats: TaskStats | None, metric: str):
    """The metric's CI; None without one or without a value."""
    if stats is None or not stats.ci or math.isnan(value_of(stats, metric)):
        return None
    return stats.ci.get(metric)


def side_gap(label: str, stats: TaskStats, metric: str) -> str:
    """Why one run of a paired comparison has no value of its own for `metric` ("" when it has)."""
    value = value_of(stats, metric)
    if isinstance(value, NotComputed):
        return f"{label} has no value ({value.reason})"
    if metric in stats.point and math.isnan(value):
        return f"{label} has no value (NaN in its results)"
    if not stats.sampled.trusted(metric):
        return f"{label}'s per-sample outcomes are not its run's ({stats.sampled.why_not(metric)})"
    return ""


PAIRINGS = ("baseline", "all")
# Which pairs of runs the report compares (`--pairs`); set by `build_report` for the sections it builds.
PAIRING: contextvars.ContextVar[str] = contextvars.ContextVar("lmms_vr_report_pairs", default="baseline")


def pairs_of(having: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The pairs compared among the runs having a task: each against the first (`baseline`) or every pair (`all`)."""
    if PAIRING.get() == "all":
        return [(having[i], having[j]) for i in range(len(having)) for j in range(i + 1, len(having))]
    return [(having[0], other) for other in having[1:]]


def pairing_note() -> str:
    """What the comparison tables compare, as the report says it."""
    if PAIRING.get() == "all":
        return "Pairs compared: every pair of runs that share a task (--pairs all)."
    return ("Pairs compared: each run against the baseline, the first run given that has the task "
            "(--pairs all compares every pair).")


def comparisons_for(benchmark: str, tasks: Sequence[str], stats: dict, runs: list[Run], n: int, seed: int) -> list:
    """The paired differences of `pairs_of` among the runs with per-sample data of each task; a metric
    one side has no value or trusted outcomes of is not computable, saying which side and why."""
    out = []
    for task in tasks:
        having = [(run.label, stats[(run.label, task)]) for run in runs if (run.label, task) in stats and stats[(run.label, task)].sampled]
        for (base_label, base), (label, other) in pairs_of(having):
            differences = []
            for d in paired_difference(base.sampled, other.sampled, n, seed):
                why = "; ".join(filter(None, (side_gap(base_label, base, d.metric), side_gap(label, other, d.metric))))
                differences.append(Difference(d.metric, math.nan, None, d.common, why) if why else d)
            out.append((task, base_label, label, differences))
    return out
