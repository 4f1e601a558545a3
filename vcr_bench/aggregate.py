"""VCR-Bench metrics of a task's records: the one code path of the aggregation and `lmms-vr score`.

`score_records(records, settings)` judges every record in one batch (`judging.judge_records`)
and returns every metric; `metrics_from_outcomes` computes them from records and judge outcomes
with no judge call (what `lmms-vr report` re-aggregates for each bootstrap resample).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from lmms_video_reasoning.judges import failure_share, get_judge
from lmms_video_reasoning.utils.core import records as common
from lmms_video_reasoning.utils.core import settings as env_settings
from lmms_video_reasoning.utils.results.aggregation import keep_outcomes
from lmms_video_reasoning.utils.results.resampling import SampleColumns, column, ratio
from lmms_video_reasoning.utils.lmms.responses import model_failed, reasoning_truncated, warn_truncated
from lmms_video_reasoning.vcr_bench import judging, scoring

log = logging.getLogger("lmms_video_reasoning.vcr_bench")

INCLUDE_BACKGROUND_ENV = "VCR_BENCH_INCLUDE_BACKGROUND"
LENIENT_VERDICT_ENV = "VCR_BENCH_LENIENT_VERDICT"
OFFICIAL_REVERSED_ENV = "VCR_BENCH_OFFICIAL_REVERSED"
INCLUDE_BACKGROUND = env_settings.declare(INCLUDE_BACKGROUND_ENV, "bool", False, "overall CoT counts Background Review "
                                          "steps (paper-era code)", scoring=True)
LENIENT_VERDICT = env_settings.declare(LENIENT_VERDICT_ENV, "bool", False, "the scoring judge's first standalone 0/1 "
                                       "decides instead of the exact reply '1'", scoring=True)
OFFICIAL_REVERSED = env_settings.declare(OFFICIAL_REVERSED_ENV, "bool", False, "reversed intervals / boxes enter the IoU "
                                         "rule as given, as officially", scoring=True)


def resolve_settings(settings: dict | None = None) -> dict:
    """Scoring settings, from the argument or the environment (`=1`): `include_background`
    (`VCR_BENCH_INCLUDE_BACKGROUND`: overall CoT counts Background Review steps, as the
    paper-era code did; default off as the current code); `lenient_verdict`
    (`VCR_BENCH_LENIENT_VERDICT`: the scoring judge's first standalone 0/1 decides instead of
    the official exact reply "1"); `official_reversed` (`VCR_BENCH_OFFICIAL_REVERSED`: reversed
    interval bounds / box corners enter the IoU rule as given, as officially)."""
    merged = {"include_background": INCLUDE_BACKGROUND.read(), "lenient_verdict": LENIENT_VERDICT.read(),
              "official_reversed": OFFICIAL_REVERSED.read()}
    merged.update(settings or {})
    return merged


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """All VCR-Bench metrics (0-100; `judge_failed`, `model_failed` counts) of a task's records.

    Without a judge nothing can be scored, not even accuracy (the answer is extracted by the
    judge): every judge-based metric is NaN and one log line says how many samples were left
    unscored; `model_failed` needs no judge and is still counted.
    """
    settings = resolve_settings(settings)
    records = list(records)
    chain_of_thought = any(record.get("score_cot", True) for record in records)
    warn_truncated(log, "VCR-Bench", count_truncated(records), len(records))
    judge = get_judge(judging.JUDGE)
    if judge is None:
        log.warning("VCR-Bench: no judge configured, so none of the %d samples is scored: accuracy and CoT metrics "
                    "are NaN (answers are extracted by the judge). Configure one (LMMS_VR_JUDGE_BASE_URL or "
                    "OPENAI_API_KEY) or re-score the --log_samples file later with `lmms-vr score`.", len(records))
        return {**dict.fromkeys(scoring.METRICS, math.nan), "model_failed": count_model_failures(records),
                "reasoning_truncated": count_truncated(records)}
    outcomes = judging.judge_records(records, judge, chain_of_thought, settings)
    keep_outcomes(records, settings, outcomes)  # the standard error reuses them
    judge.log_summary()
    metrics, judged = metrics_from_outcomes(records, outcomes, settings), judged_count(records)
    if failure_share.too_many_failed(metrics["judge_failed"], judged):
        log.error(failure_share.explain("VCR-Bench", metrics["judge_failed"], judged))
    return metrics


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of judged records (`judging.judge_records` outcomes); no judge call."""
    settings = resolve_settings(settings)
    metrics = scoring.accuracy_metrics(records, [outcome["correct"] for outcome in outcomes])
    if any(record.get("score_cot", True) for record in records):
        metrics.update(scoring.cot_metrics([o["recall_steps"] for o in outcomes], [o["precision_steps"] for o in outcomes],
                                           settings["include_background"]))
    else:
        metrics.update(dict.fromkeys(scoring.COT_METRICS, math.nan))
    metrics["judge_failed"] = sum(bool(outcome["errors"]) for outcome in outcomes)
    # Past the failure share, the judged metrics would measure the judge's outage, not the model.
    failure_share.withhold(metrics, [m for m in scoring.METRICS if m not in scoring.COUNT_METRICS],
                           metrics["judge_failed"], judged_count(records))
    # Not a task metric (no YAML entry): how many verdicts the other reading of the scoring
    # judge's reply would change (`lenient_verdict`); in `lmms-vr score` output and the logs.
    metrics["verdict_lenient_changed"] = judging.lenient_changed(outcomes)
    metrics["model_failed"] = count_model_failures(records)
    metrics["reasoning_truncated"] = count_truncated(records)
    return metrics


def metric_columns(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> SampleColumns:
    """`metrics_from_outcomes` over arrays, for the bootstrap (`utils/results/resampling.py`):
    each sample's contribution once (group membership and verdict, its recall and precision
    ratios per kind from `scoring.recall_ratios` / `precision_ratios`, its failure flags), and
    the metrics from their sums with the same arithmetic (micro accuracy per group, macro means
    where the ratio is defined, F1 of the means, the failure share on a whole run)."""
    import numpy as np

    settings = resolve_settings(settings)
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


def judged_count(records: Sequence[dict]) -> int:
    """Samples that needed judging (lmms-eval's failure placeholder is never judged)."""
    return len(records) - count_model_failures(records)


def count_model_failures(records: Sequence[dict]) -> int:
    """How many samples got lmms-eval's failure placeholder instead of a model answer."""
    return common.count(records, model_failed)


def count_truncated(records: Sequence[dict]) -> int:
    """How many replies ended inside an open reasoning block (wrong for accuracy, not extracted)."""
    return common.count(records, reasoning_truncated)
