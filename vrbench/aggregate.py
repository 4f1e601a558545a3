"""VRBench metrics in the plugin: the task's scoring (`task.score_with`) with the plugin's judge,
and the same metrics over per-sample arrays for the bootstrap.

`scored_records(records, settings)` is the one code path of the lmms-eval aggregation and
`lmms-vr score` (through `benchmark.VrBenchScoring.score`): the configured judge engine (cached,
accounted) rates the rated records, and the metrics come with the ratings (the in-run standard
errors bootstrap those); `score_records` is its metrics. `metric_columns` is
`task.metrics_from_outcomes` over arrays (`utils/results/resampling.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lmms_video_reasoning.judges import failure_share, get_judge
from lmms_video_reasoning.utils.lmms.responses import final_answer, model_failed, reasoning_truncated
from lmms_video_reasoning.utils.results.resampling import SampleColumns, column, ratio
from lmms_video_reasoning.vrbench import task
from lmms_video_reasoning.vrbench.scoring import PROTOCOLS, TYPE_NAMES, judge_prompt_kind, mcq_correct, type_metric

log = logging.getLogger("lmms_video_reasoning.vrbench")


def scored_records(records: Sequence[dict], settings: dict | None, judge
                   ) -> tuple[dict[str, float], list[tuple[float | None, bool]] | None]:
    """All metrics of one task's records (the aggregation's and `lmms-vr score`'s path) and the
    ratings per question they come from (`task.score_with`).

    `settings`: optional `{"protocol": "default"|"official"}` overriding the records' protocol.
    `judge` (None: none configured) rates the rated records.
    """
    return task.score_with(records, judge, settings)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of `scored_records` with the configured judge (looked up only for rated records)."""
    with_judge = bool(records) and task.task_protocol(records, settings)[1]
    return scored_records(records, settings, get_judge("vrbench") if with_judge else None)[0]


def metric_columns(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str,
                   with_judge: bool, judge_ran: bool = True) -> SampleColumns:
    """`metrics_from_outcomes` over arrays, for the bootstrap (`utils/results/resampling.py`):
    each question's contribution once (MCQ-O right or not, its process score where OE-P counts
    it under `protocol`, its type, its failure flags), and the metrics from their sums with the
    arithmetic of `scoring.aggregate` (means x 100 / x 10, the protocol's per-type combination,
    the failure share on a whole run)."""
    import numpy as np

    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown VRBench protocol {protocol!r}; use one of {PROTOCOLS}")
    correct = column(not reasoning_truncated(r) and mcq_correct(final_answer(r), r["answer"]) for r in records)
    rated = column(judge_prompt_kind(r["reasoning_type"], protocol) is not None for r in records)
    failed_model = column(map(model_failed, records))
    process = [p for p, _failed in outcomes]
    if protocol == "official":  # over every question, no rating = 0
        process_sum, process_n = column(0.0 if p is None else p for p in process), np.ones(len(records))
    else:  # over the rated questions the judge scored
        process_n = rated * column(p is not None for p in process)
        process_sum = process_n * column(0.0 if p is None else p for p in process)
    counted = {"questions": np.ones(len(records)), "correct": correct, "process_sum": process_sum, "process_n": process_n,
               "judge_failed": column(failed for _p, failed in outcomes), "model_failed": failed_model,
               "reasoning_truncated": column(map(reasoning_truncated, records))}
    kinds = [type_metric(r["reasoning_type"]) for r in records]
    for name in TYPE_NAMES:
        member = column(kind == name for kind in kinds)
        counted.update({f"n:{name}": member, f"correct:{name}": member * correct, f"rated:{name}": member * rated,
                        f"process_sum:{name}": member * process_sum, f"process_n:{name}": member * process_n})
    # the failure share's counts (`judge_failures`): ratings failed of the questions that needed one
    needed = rated * (1.0 - failed_model)
    counted["needed"], counted["needed_failed"] = needed, needed * counted["judge_failed"]

    def metrics(totals, whole: bool) -> dict:
        return _metrics_from_totals(totals, whole, protocol, with_judge, judge_ran)

    return SampleColumns(counted, metrics)


def _metrics_from_totals(totals, whole: bool, protocol: str, with_judge: bool, judge_ran: bool) -> dict:
    """The metrics of `metrics_from_outcomes` (`scoring.aggregate`) from column sums (one value per row)."""
    import numpy as np

    withheld = np.zeros(len(totals["questions"]), dtype=bool)
    if whole and with_judge and judge_ran:
        withheld = np.array([failure_share.too_many_failed(f, int(j)) for f, j in zip(totals["needed_failed"], totals["needed"])], dtype=bool)
    ran = judge_ran & ~withheld
    metrics = {"mcq_accuracy": 100 * ratio(totals["correct"], totals["questions"]), "model_failed": totals["model_failed"]}
    if not with_judge:
        for name in TYPE_NAMES:
            metrics[f"type_{name}"] = 100 * ratio(totals[f"correct:{name}"], totals[f"n:{name}"])
        metrics["reasoning_truncated"] = totals["reasoning_truncated"]
        return metrics
    metrics["process_score"] = np.where(ran, 10 * ratio(totals["process_sum"], totals["process_n"]), np.nan)
    metrics["overall"] = (metrics["mcq_accuracy"] + metrics["process_score"]) / 2
    for name in TYPE_NAMES:
        mcq = 100 * ratio(totals[f"correct:{name}"], totals[f"n:{name}"])
        oe = 10 * ratio(totals[f"process_sum:{name}"], totals[f"process_n:{name}"])
        has_oe = totals[f"rated:{name}"] > 0
        if protocol == "official":  # `scoring.combine_type`: the mean when both > 0, else whichever is > 0, else 0
            combined = np.where((mcq > 0) & (oe > 0), (mcq + oe) / 2, np.where(mcq > 0, mcq, np.where(oe > 0, oe, 0.0)))
        else:
            combined = np.where(has_oe, (mcq + oe) / 2, mcq)
        empty = totals[f"n:{name}"] == 0
        metrics[f"type_{name}"] = np.where(empty | (has_oe & ~ran), np.nan, combined)
    metrics["judge_failed"] = np.where(ran, totals["judge_failed"], np.nan)
    metrics["judge_failed"] = np.where(withheld, totals["needed_failed"], metrics["judge_failed"])
    metrics["reasoning_truncated"] = totals["reasoning_truncated"]
    return metrics
