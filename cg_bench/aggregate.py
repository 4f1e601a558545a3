"""From per-answer records to CG-Bench metrics in the plugin: the one code path of the tasks and `lmms-vr score`.

The logic (records, outcomes, metrics, breakdowns, how failures enter them) is `outcomes.py`,
shared with the task folder that `dev/upstream.py` writes into lmms-eval; here it is bound to
the plugin: the configured judge engine with its cache (`judges`) and the data root's media
(`media.MEDIA`). Records of separate runs can be concatenated: long + clue + grounding
records of one model give `crr` and `acc_at_iou` exactly as `cg_bench_mcq` does.
`outcome_columns` is `task_metrics` over per-sample arrays, for the bootstrap
(`utils/results/resampling.py`); `scored_records` gives the metrics with the outcomes they come
from (the in-run standard errors bootstrap those), `score_records` its metrics.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Sequence

from lmms_video_reasoning.cg_bench import media, outcomes, scoring
from lmms_video_reasoning.cg_bench.outcomes import (  # noqa: F401 - part of this module's interface
    BREAKDOWN_GROUPS,
    HEADLINE,
    JUDGE_OFF,
    METRICS,
    MODES,
    NO_JUDGE,
    OFFICIAL_REVERSED,
    OFFICIAL_REVERSED_ENV,
    RECORD_FIELDS,
    STRICT,
    STRICT_ENV,
    Outcome,
    Settings,
    acc_at_iou_pairs,
    breakdown,
    judge_failed_count,
    metrics_of,
    model_failed,
    open_count,
    task_metrics,
)
from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.results.resampling import SampleColumns, ratio

logger = logging.getLogger("lmms_video_reasoning.cg_bench")


def build_record(doc: dict, response: Any) -> dict:
    """The logged record of one answer (`Benchmark.build_record`: `outcomes.make_record` with the
    data root's subtitles): the question's facts plus the raw reply, no parsing, no judge."""
    return outcomes.make_record(doc, response, media.MEDIA)


def read_outcomes(records: Sequence[dict], settings: Settings, judge) -> list[Outcome]:
    """Parse every record and judge the open-ended ones with `judge` (the judge runs here, once;
    None: none configured); `lmms-vr report` passes a reader of the judge cache."""
    return outcomes.read_outcomes(records, settings, judge, media.MEDIA)


def _configured_judge(records: Sequence[dict], settings: Settings):
    """The configured judge when open answers are to be judged (looked up only then: no warning otherwise)."""
    if not settings.judge or not any(record.get("mode") == "open" for record in records):
        return None
    from lmms_video_reasoning.judges import get_judge

    return get_judge("cg_bench")


def scored_records(records: Sequence[dict], settings: "Settings | dict | None", judge) -> tuple[dict, list[Outcome]]:
    """All metrics of a list of records (what the tasks' aggregations and `lmms-vr score` report),
    and the per-answer outcomes they come from, the open answers judged by `judge` (None: none configured).

    `settings`: a Settings, a dict such as `{"strict": True}`, or None (official parsing, judge
    on). See `outcomes.score_with`.
    """
    settings = outcomes.as_settings(settings)
    scores, answers = outcomes.score_with(records, settings, judge, media.MEDIA)
    if scores["subtitles_missing"]:
        logger.info("cg_bench: `lmms-vr prepare cg_bench --verify-only` lists the videos without a subtitle file")
    return scores, answers


def score_records(records: Sequence[dict], settings: "Settings | dict | None" = None) -> dict:
    """The metrics of `scored_records` with the configured judge."""
    settings = outcomes.as_settings(settings)
    return scored_records(records, settings, _configured_judge(records, settings))[0]


def outcome_columns(outcomes: Sequence[Outcome | dict]) -> SampleColumns:
    """`task_metrics` over arrays, for the bootstrap (`utils/results/resampling.py`): each
    answer's contribution once (its value per mode where it has one, tIoU >= each threshold,
    failure flags) and, for acc@IoU, one pair per question (`acc_at_iou_pairs` keeps one per qid
    however often the question is drawn: a `once` column, on the question's last long answer);
    the metrics from their sums with the arithmetic of `metrics_of` and `scoring`."""
    import numpy as np

    modes = ("long", "clue", "open", "blind", "grounding")
    code = {mode: number for number, mode in enumerate(modes)}
    # one pass over the outcomes (Outcome objects, or their fields as dicts: `lmms-vr report`'s
    # stored outcomes); every column below is numpy over these
    fields = [o if isinstance(o, dict) else vars(o) for o in outcomes]
    mode = np.fromiter((code.get(o["mode"], -1) for o in fields), dtype=np.int64, count=len(fields))
    value = np.fromiter((math.nan if o["value"] is None else o["value"] for o in fields), dtype=float, count=len(fields))
    flags = np.array([(o["parse_failed"], o["model_failed"], o["reasoning_truncated"], o["judge_error"] is not None,
                       o["judge_error"] in (NO_JUDGE, JUDGE_OFF)) for o in fields], dtype=float).reshape(len(fields), 5)
    valued = ~np.isnan(value)
    counted: dict[str, np.ndarray] = {}
    for name in modes:
        of_mode = (mode == code[name]) & valued
        counted[f"n:{name}"] = of_mode.astype(float)
        counted[f"sum:{name}"] = np.where(of_mode, value, 0.0)
    grounded = (mode == code["grounding"]) & valued
    for k, threshold in enumerate(scoring.IOU_THRESHOLDS):
        counted[f"iou_at:{k}"] = (grounded & (np.where(valued, value, -np.inf) >= threshold)).astype(float)
    counted["parse_failed"], counted["model_failed"], counted["reasoning_truncated"] = flags[:, 0], flags[:, 1], flags[:, 2]
    is_open = (mode == code["open"]).astype(float)
    counted["open"], counted["open_failed"], counted["open_not_run"] = is_open, is_open * flags[:, 3], is_open * flags[:, 4]
    # acc@IoU's join: per qid the last long value and the last grounding value (as the dicts of
    # `acc_at_iou_pairs` keep them), the pair counted once on the sample of the last long answer
    long_at: dict[int, int] = {}
    ground: dict[int, float] = {}
    for index in np.flatnonzero(valued & ((mode == code["long"]) | grounded)).tolist():
        if mode[index] == code["long"]:
            long_at[fields[index]["qid"]] = index
        else:
            ground[fields[index]["qid"]] = float(value[index])
    once = {"pairs": np.zeros(len(outcomes)), **{f"pair_at:{k}": np.zeros(len(outcomes)) for k in range(len(scoring.IOU_THRESHOLDS))}}
    for qid, index in long_at.items():
        if qid in ground:
            once["pairs"][index] = 1.0
            for k, threshold in enumerate(scoring.IOU_THRESHOLDS):
                once[f"pair_at:{k}"][index] = float(value[index] == 1.0 and ground[qid] >= threshold)
    return SampleColumns(counted, _metrics_from_totals, once)


def _metrics_from_totals(totals, whole: bool) -> dict:
    """The metrics of `task_metrics` from column sums (one value per row)."""
    import numpy as np

    def percent(mode: str) -> np.ndarray:  # scoring.percent_mean: 100 x the mean
        return ratio(100.0 * totals[f"sum:{mode}"], totals[f"n:{mode}"])

    def over_thresholds(prefix: str, count: np.ndarray) -> np.ndarray:  # scoring.rec_at_iou / acc_at_iou
        shares = 0.0
        for k in range(len(scoring.IOU_THRESHOLDS)):
            shares = shares + ratio(totals[f"{prefix}:{k}"], count)
        return 100.0 * shares / len(scoring.IOU_THRESHOLDS)

    long_acc, clue_acc = percent("long"), percent("clue")
    crr = np.where(np.isnan(long_acc) | np.isnan(clue_acc) | (clue_acc == 0), np.nan,
                   ratio(100.0 * np.minimum(long_acc, clue_acc), clue_acc))
    judge_failed = np.where((totals["open"] == 0) | (totals["open_not_run"] > 0), np.nan, totals["open_failed"])
    metrics = {
        "long_acc": long_acc,
        "clue_acc": clue_acc,
        "miou": percent("grounding"),
        "rec_at_iou": over_thresholds("iou_at", totals["n:grounding"]),
        "acc_at_iou": over_thresholds("pair_at", totals["pairs"]),
        "crr": crr,
        "oe_acc": percent("open"),
        "blind_acc": percent("blind"),
        "parse_failed": totals["parse_failed"],
        "judge_failed": judge_failed,
        "model_failed": totals["model_failed"],
        "reasoning_truncated": totals["reasoning_truncated"],
    }
    if whole:  # `task_metrics`: oe_acc not computed past the failure share
        withheld = np.array([failure_share.too_many_failed(f, int(n)) for f, n in zip(judge_failed, totals["open"])], dtype=bool)
        metrics["oe_acc"] = np.where(withheld, np.nan, metrics["oe_acc"])
    return metrics
