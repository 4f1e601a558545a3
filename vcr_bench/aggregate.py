"""VCR-Bench metrics in the plugin: the task's scoring (`task.score_with`) with the plugin's judge,
and the same metrics over per-sample arrays for the bootstrap.

`scored_records(records, settings)` is the one code path of the lmms-eval aggregation and
`lmms-vr score` (through `benchmark.VcrBenchScoring.score`): it judges every record in one batch
with the configured judge engine (cached, accounted) and returns the metrics with the outcomes
they come from (the in-run standard errors bootstrap those); `score_records` is its metrics.
`metric_columns` is `task.metrics_from_outcomes` over arrays (`utils/results/resampling.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lmms_video_reasoning.judges import failure_share, get_judge
from lmms_video_reasoning.utils.lmms.responses import model_failed, reasoning_truncated
from lmms_video_reasoning.utils.results.resampling import SampleColumns, column, ratio
from lmms_video_reasoning.vcr_bench import judging, scoring, task

log = logging.getLogger("lmms_video_reasoning.vcr_bench")

NO_JUDGE_HINT = (" Configure one (LMMS_VR_JUDGE_BASE_URL or OPENAI_API_KEY) or re-score the --log_samples file later "
                 "with `lmms-vr score`.")


def scored_records(records: Sequence[dict], settings: dict | None, judge) -> tuple[dict[str, float], list[dict] | None]:
    """All VCR-Bench metrics (0-100; `judge_failed`, `model_failed` counts) of a task's records,
    judged by `judge` (`task.score_with`; NaN without one), and the judge's outcomes per sample
    (None without a judge)."""
    return task.score_with(records, judge, settings, NO_JUDGE_HINT)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of `scored_records` with the configured judge."""
    return scored_records(records, settings, get_judge("vcr_bench"))[0]


def metric_columns(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> SampleColumns:
    """`metrics_from_outcomes` over arrays, for the bootstrap (`utils/results/resampling.py`):
    each sample's contribution once (group membership and verdict, its recall and precision
    ratios per kind from `scoring.recall_ratios` / `precision_ratios`, its failure flags), and
    the metrics from their sums with the same arithmetic (micro accuracy per group, macro means
    where the ratio is defined, F1 of the means, the failure share on a whole run)."""
    import numpy as np

    settings = scoring.resolve_settings(settings)
    correct = np.array([outcome["correct"] is True for outcome in outcomes], dtype=float)
    members = {
        "accuracy": [True] * len(records),
        **{f"accuracy_{code}": [r["dimension_code"] == code for r in records] for code in scoring.DIMENSION_CODES},
        **{f"accuracy_{bucket}": [r["duration_bucket"] == bucket for r in records] for bucket in scoring.DURATION_BUCKETS},
        "accuracy_mc": [bool(r["multiple_choice"]) for r in records],
        "accuracy_open": [not r["multiple_choice"] for r in records],
    }
    counted: dict[str, np.ndarray] = {}
    for name, member in members.items():
        counted[f"n:{name}"] = column(member)
        counted[f"right:{name}"] = counted[f"n:{name}"] * correct
    for side, steps_key, ratios_of in (("recall", "recall_steps", scoring.recall_ratios), ("precision", "precision_steps", scoring.precision_ratios)):
        ratios = [None if o[steps_key] is None else ratios_of(o[steps_key], settings["include_background"]) for o in outcomes]
        for kind in scoring.COT_KINDS:
            values = [None if r is None else r[kind] for r in ratios]
            counted[f"{side}_sum:{kind}"] = column(0.0 if v is None else v for v in values)
            counted[f"{side}_n:{kind}"] = column(v is not None for v in values)
    counted["score_cot"] = column(record.get("score_cot", True) for record in records)
    counted["judge_failed"] = column(bool(outcome["errors"]) for outcome in outcomes)
    counted["verdict_lenient_changed"] = column(judging.lenient_changed([outcome]) for outcome in outcomes)
    counted["model_failed"] = column(model_failed(record) for record in records)
    counted["reasoning_truncated"] = column(map(reasoning_truncated, records))
    counted["samples"] = np.ones(len(records))
    return SampleColumns(counted, _metrics_from_totals)


def _metrics_from_totals(totals, whole: bool) -> dict:
    """The metrics of `metrics_from_outcomes` from column sums (one value per row)."""
    import numpy as np

    metrics = {name: ratio(100.0 * totals[f"right:{name}"], totals[f"n:{name}"]) for name in scoring.ACCURACY_METRICS}
    scored = totals["score_cot"] > 0  # any sample with CoT scoring (else the CoT metrics are NaN)
    for kind in scoring.COT_KINDS:
        r = ratio(totals[f"recall_sum:{kind}"], totals[f"recall_n:{kind}"])
        p = ratio(totals[f"precision_sum:{kind}"], totals[f"precision_n:{kind}"])
        f1 = np.where(np.isnan(p) | np.isnan(r), np.nan, ratio(2 * p * r, p + r))  # 0/0 -> 0, as scoring.f1
        f1 = np.where(~np.isnan(p) & ~np.isnan(r) & (p + r == 0), 0.0, f1)
        prefix = scoring._COT_PREFIX[kind]
        for part, value in (("recall", r), ("precision", p), ("f1", f1)):
            metrics[f"{prefix}_{part}"] = np.where(scored, value * 100.0, np.nan)
    metrics["judge_failed"] = totals["judge_failed"]
    if whole:  # the failure share, per row as `failure_share.withhold` decides it on a run
        judged = totals["samples"] - totals["model_failed"]
        withheld = np.array([failure_share.too_many_failed(f, int(j)) for f, j in zip(metrics["judge_failed"], judged)], dtype=bool)
        for name in scoring.METRICS:
            if name not in scoring.COUNT_METRICS and name in metrics:
                metrics[name] = np.where(withheld, np.nan, metrics[name])
    metrics["verdict_lenient_changed"] = totals["verdict_lenient_changed"]
    metrics["model_failed"] = totals["model_failed"]
    metrics["reasoning_truncated"] = totals["reasoning_truncated"]
    return metrics
