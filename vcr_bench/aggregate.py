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


def judged_count(records: Sequence[dict]) -> int:
    """Samples that needed judging (lmms-eval's failure placeholder is never judged)."""
    return len(records) - count_model_failures(records)


def count_model_failures(records: Sequence[dict]) -> int:
    """How many samples got lmms-eval's failure placeholder instead of a model answer."""
    return common.count(records, model_failed)


def count_truncated(records: Sequence[dict]) -> int:
    """How many replies ended inside an open reasoning block (wrong for accuracy, not extracted)."""
    return common.count(records, reasoning_truncated)
