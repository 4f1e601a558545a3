"""VCR-Bench as an lmms-eval task, whoever runs it: inputs, records and metrics, with the judge and the
`Media` the hooks hand in; task settings `visual_mode`, `frame_count`, `chain_of_thought` (README.md, "Tasks")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core import options, settings
from lmms_video_reasoning.utils.core import columns
from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan
from lmms_video_reasoning.utils.lmms import responses
from lmms_video_reasoning.vcr_bench import docs, frames, judging, prompts, scoring

VISUAL_MODES = ("video", "frames", "one_frame", "none")
VISUAL_MODE = options.Option("visual_mode", "choice", "", "what the video tasks show: the video, frames, one frame "
                             "or nothing", choices=VISUAL_MODES)
# The suite's variable overriding it (`settings.variable`; not exported with the option).
VISUAL_MODE_VARIABLE = settings.variable("VCR_BENCH_VISUAL_MODE", VISUAL_MODE)


class Media(Protocol):
    """Gets a document's frames (the binding resolves its file): `plan`, the `n` frames a plan picks and their
    times, from the container; `frames`, those indices as RGB PIL images; `video`, what a video model is handed."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> Chosen: ...
    def frames(self, doc: dict, indices: Sequence[int]) -> list: ...
    def video(self, doc: dict) -> str: ...


def task_settings(kwargs: dict | None) -> tuple[str, bool, int]:
    """(visual_mode, chain_of_thought, frame_count) from the task's `lmms_eval_specific_kwargs`: `frame_count`
    (paper Table 9: 16, 32, 64, 128; else 64) sets the frames of `frames` mode only."""
    kwargs = kwargs or {}
    mode = kwargs.get("visual_mode", "video")
    if mode not in VISUAL_MODES:
        raise DataError(f"VCR-Bench visual_mode {mode!r} (lmms_eval_specific_kwargs) is not one of {VISUAL_MODES}")
    count = kwargs.get("frame_count", frames.FRAME_COUNT)
    if "frame_count" in kwargs and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise DataError(f"VCR-Bench frame_count {count!r} (lmms_eval_specific_kwargs) must be a positive integer, "
                        "e.g. 16, 32, 64 or 128 (paper Table 9)")
    if "frame_count" in kwargs and mode != "frames":
        raise DataError(f"VCR-Bench frame_count {count} is set but visual_mode is {mode!r}: frame_count sets the frames of "
                        "visual_mode frames only; for a video model pass its own frame count in --model_args "
                        "(e.g. max_num_frames), or set visual_mode: frames")
    return mode, bool(kwargs.get("chain_of_thought", True)), count


def doc_to_text(doc: dict, kwargs: dict | None, media: Media) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    mode, chain_of_thought, count = task_settings(kwargs)
    timestamps = media.plan(doc, frames.PLAN, count).timestamps if mode == "frames" else ()
    return prompts.model_prompt(doc["question"], chain_of_thought, timestamps)


def doc_to_visual(doc: dict, kwargs: dict | None, media: Media) -> list:
    """`[video]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    mode, _, count = task_settings(kwargs)
    if mode == "none":
        return []
    if mode == "video":
        return [media.video(doc)]
    plan, n = (frames.ONE_FRAME, 1) if mode == "one_frame" else (frames.PLAN, count)  # the middle frame, or `count`
    return list(media.frames(doc, media.plan(doc, plan, n).indices))


def doc_to_messages(doc: dict, kwargs: dict | None, media: Media) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    content = [{"type": "video" if isinstance(item, str) else "image", "url": item} for item in doc_to_visual(doc, kwargs, media)]
    content.append({"type": "text", "text": doc_to_text(doc, kwargs, media)})
    return [{"role": "user", "content": content}]


def build_record(doc: dict, response: Any, chain_of_thought: bool = True, settings: dict | None = None) -> dict:
    """The record of one sample, never raising (a bad document: its `error`)."""
    record = {"sample_id": str(doc.get("sample_id", "?")), "id": doc.get("id"), "dimension_code": doc.get("dimension_code"),
              "duration": None, "duration_bucket": None, "multiple_choice": doc.get("multiple_choice")}
    record.update(question=doc.get("question"), answer=doc.get("answer"), reasoning=[], **responses.reply_record(response, settings))
    record.update(score_cot=chain_of_thought, error=None)
    try:  # every value read before the record changes: a bad document leaves it as it was
        duration = float(doc["duration"])
        read = dict(sample_id=str(doc["sample_id"]), id=int(doc["id"]), dimension_code=doc["dimension_code"], duration=duration,
                    duration_bucket=docs.duration_bucket(duration))
        record.update(read, multiple_choice=bool(doc["multiple_choice"]), question=doc["question"], answer=doc["answer"],
                      reasoning=list(doc["reasoning"]))
    except Exception as error:  # noqa: BLE001 - a bad doc must become a failed sample, not a retry loop
        record["error"] = f"{type(error).__name__}: {error}"
    return record


def metric_names(chain_of_thought: bool) -> tuple[str, ...]:
    """The metrics of a task: all of them for `vcr_cot`, accuracy and counts for the ablations."""
    return scoring.METRICS if chain_of_thought else scoring.ACCURACY_METRICS + scoring.COUNT_METRICS


def unjudged_metrics(records: Sequence[dict]) -> dict[str, float]:
    """The metrics without a judge: NaN (even accuracy needs the extraction judge) but the two counts."""
    return {**dict.fromkeys(scoring.METRICS, math.nan), "model_failed": sum(map(responses.model_failed, records)),
            "reasoning_truncated": sum(map(responses.reasoning_truncated, records))}


def metrics_from_totals(totals, whole: bool, limit: float | None = None) -> dict:
    """The metrics from column sums; CoT ones NaN unless a sample is CoT-scored; on a whole run, the judged ones
    withheld past the judge failure share (`limit`)."""
    metrics = scoring.accuracy_from_totals(totals)
    scored = totals["score_cot"] > 0
    metrics.update({name: np.where(scored, value, np.nan) for name, value in scoring.cot_from_totals(totals).items()})
    if whole:  # past the failure share, the judged metrics would measure the judge's outage, not the model
        judged = totals["samples"] - totals["model_failed"]
        withheld = failure_share.withheld(totals["judge_failed"], judged, limit)
        metrics = {name: np.where(withheld, np.nan, value) for name, value in metrics.items()}
    # `verdict_lenient_changed` is no task metric: how many verdicts the other reading of the scoring reply would change.
    metrics.update({name: totals[name] for name in ("judge_failed", "verdict_lenient_changed", "model_failed", "reasoning_truncated")})
    return metrics


def metric_columns(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> columns.SampleColumns:
    """Every metric of the task over per-sample columns (groups, verdict, ratios, failure flags) and from their sums."""
    settings = scoring.resolve_settings(settings)
    counted = scoring.accuracy_columns(records, [outcome["correct"] for outcome in outcomes])
    counted.update(scoring.cot_columns([o["recall_steps"] for o in outcomes], [o["precision_steps"] for o in outcomes],
                                       settings["include_background"]))
    counted["score_cot"] = columns.column(record.get("score_cot", True) for record in records)
    counted["judge_failed"] = columns.column(bool(outcome["errors"]) for outcome in outcomes)
    counted["verdict_lenient_changed"] = columns.column(judging.lenient_changed([outcome]) for outcome in outcomes)
    counted["model_failed"] = columns.column(map(responses.model_failed, records))
    counted["reasoning_truncated"] = columns.column(map(responses.reasoning_truncated, records))
    counted["samples"] = np.ones(len(records))
    limit = settings.get(failure_share.FAILED_SHARE.option)
    return columns.SampleColumns(counted, lambda totals, whole: metrics_from_totals(totals, whole, limit),
                         counts=(*scoring.COUNT_METRICS, "verdict_lenient_changed"))


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of judged records (`judging.judge_records` outcomes), from their `metric_columns`."""
    return columns.point(metric_columns(records, outcomes, settings))
