"""VCR-Bench as an lmms-eval task, whoever runs it: inputs, per-sample records and metrics.

The task's lmms-eval hooks call these functions with two small objects of their own: a judge
that answers `ask.Request`s (`ask.py`) and a `Media` that gets the frames. Nothing here
decodes, resolves a file or calls a judge client itself.

Inputs (README.md, "Tasks"; paper Table 5 for the ablations), chosen per task and model
by the task setting `visual_mode` in `lmms_eval_specific_kwargs`:
  video      the video (models with native video input; the default, as in the paper)
  frames     64 frames at floor(i * total / 64), with their times round(idx / fps, 1) s
             written before the question (frame-based models: `openai`, `gpt4v`); the
             task setting `frame_count` sets another number (paper Table 9: 16, 32, 64, 128)
  one_frame  the middle frame only (`vcr_one_frame`)
  none       no visual (`vcr_text_only`)
`chain_of_thought: false` drops the CoT instruction (`vcr_direct`).

A record (`build_record`) holds everything needed to score a sample later; it never
raises and never calls a judge. lmms-eval's failure placeholder is marked `model_failed` and
never judged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core import options, settings
from lmms_video_reasoning.utils.core.columns import SampleColumns, column, point
from lmms_video_reasoning.utils.core.ask import Judge
from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan
from lmms_video_reasoning.utils.lmms.responses import model_failed, reasoning_truncated, reply_record, warn_truncated
from lmms_video_reasoning.vcr_bench import docs, frames, judging, prompts, scoring

log = logging.getLogger(__name__)

VISUAL_MODES = ("video", "frames", "one_frame", "none")
VISUAL_MODE = options.Option("visual_mode", "choice", "", "what the video tasks show: the video, frames, one frame "
                             "or nothing", choices=VISUAL_MODES)
# The suite's variable overriding it (`settings.variable`; not exported with the option).
VISUAL_MODE_VARIABLE = settings.variable("VCR_BENCH_VISUAL_MODE", VISUAL_MODE)
FRAME_COUNT = frames.FRAME_COUNT


class Media(Protocol):
    """Get the frames: what the task needs from a video (the binding resolves the document's file)."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> Chosen:
        """The `n` frames `plan` picks in the document's video and their times (`frame_plan.choose`
        on the video's frame count and fps; no decoding)."""

    def frames(self, doc: dict, indices: Sequence[int]) -> list:
        """The frames at these presentation indices, as RGB PIL images."""

    def video(self, doc: dict) -> str:
        """What a video-native model is handed for the document's video."""


# ---------------------------------------------------------------- task settings


def task_settings(kwargs: dict | None) -> tuple[str, bool]:
    """(visual_mode, chain_of_thought) from the task's `lmms_eval_specific_kwargs`."""
    kwargs = kwargs or {}
    mode = kwargs.get("visual_mode", "video")
    try:
        override = VISUAL_MODE.value()
    except options.OptionError as error:
        raise DataError(f"VCR-Bench visual mode: {error}") from None
    if override and mode in ("video", "frames"):
        mode = override
    if mode not in VISUAL_MODES:
        raise DataError(f"VCR-Bench visual_mode {mode!r} (task setting or {VISUAL_MODE.sources()}) is not one of {VISUAL_MODES}")
    return mode, bool(kwargs.get("chain_of_thought", True))


def frame_count(kwargs: dict | None, mode: str) -> int:
    """The frames of `frames` mode: the task setting `frame_count` (paper Table 9 varies it: 16, 32,
    64, 128), else 64 (section 3.1). Set with any other mode it would change nothing, so it is an
    error (a video model's count is its own `--model_args`, e.g. `max_num_frames`)."""
    kwargs = kwargs or {}
    if "frame_count" not in kwargs:
        return FRAME_COUNT
    count = kwargs["frame_count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise DataError(f"VCR-Bench frame_count {count!r} (lmms_eval_specific_kwargs) must be a positive integer, "
                        "e.g. 16, 32, 64 or 128 (paper Table 9)")
    if mode != "frames":
        raise DataError(f"VCR-Bench frame_count {count} is set but visual_mode is {mode!r}: frame_count sets the frames of "
                        "visual_mode frames only; for a video model pass its own frame count in --model_args "
                        "(e.g. max_num_frames), or set visual_mode: frames")
    return count


def frame_plan(doc: dict, mode: str, media: Media, count: int = FRAME_COUNT) -> Chosen:
    """The frames of the frame modes and their times: `count` start-aligned frames (`frames`) or
    the middle frame (`one_frame`), from the container (no decoding)."""
    if mode == "one_frame":
        return media.plan(doc, frames.ONE_FRAME, 1)
    return media.plan(doc, frames.PLAN, count)


# ---------------------------------------------------------------- model inputs


def doc_to_text(doc: dict, kwargs: dict | None, media: Media) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    mode, chain_of_thought = task_settings(kwargs)
    count = frame_count(kwargs, mode)
    preamble = prompts.frame_times_preamble(frame_plan(doc, mode, media, count).timestamps) if mode == "frames" else ""
    return prompts.model_prompt(doc["question"], chain_of_thought, preamble)


def doc_to_visual(doc: dict, kwargs: dict | None, media: Media) -> list:
    """`[video]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    mode, _ = task_settings(kwargs)
    count = frame_count(kwargs, mode)
    if mode == "none":
        return []
    if mode == "video":
        return [media.video(doc)]
    return list(media.frames(doc, frame_plan(doc, mode, media, count).indices))


def doc_to_messages(doc: dict, kwargs: dict | None, media: Media) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    visuals = doc_to_visual(doc, kwargs, media)
    content = [{"type": "video", "url": item} if isinstance(item, str) else {"type": "image", "url": item} for item in visuals]
    content.append({"type": "text", "text": doc_to_text(doc, kwargs, media)})
    return [{"role": "user", "content": content}]


# ---------------------------------------------------------------- per-sample records


def build_record(doc: dict, response: Any, chain_of_thought: bool = True, settings: dict | None = None) -> dict:
    """The record of one sample (`Benchmark.build_record`); `chain_of_thought` (`score_cot`): recall
    and precision are judged too (`vcr_cot`; the Table 5 ablations score accuracy only); `settings`:
    the task's, under which `reply_record` reads the reply (lmms-eval's failure placeholder marked
    `model_failed` and never judged; the final answer; a reasoning cut off: wrong without a judge
    call). A document that cannot be read becomes a record with its `error` (a failed sample, not a
    retry loop)."""
    record = {"sample_id": str(doc.get("sample_id", "?")), "id": doc.get("id"), "dimension_code": doc.get("dimension_code"),
              "duration": None, "duration_bucket": None, "multiple_choice": doc.get("multiple_choice"),
              "question": doc.get("question"), "answer": doc.get("answer"), "reasoning": [],
              **reply_record(response, settings), "score_cot": chain_of_thought, "error": None}
    try:
        duration = float(doc["duration"])
        record.update(sample_id=str(doc["sample_id"]), id=int(doc["id"]), dimension_code=doc["dimension_code"], duration=duration,
                      duration_bucket=docs.duration_bucket(duration), multiple_choice=bool(doc["multiple_choice"]),
                      question=doc["question"], answer=doc["answer"], reasoning=list(doc["reasoning"]))
    except Exception as error:  # noqa: BLE001 - a bad doc must become a failed sample, not a retry loop
        record["error"] = f"{type(error).__name__}: {error}"
    return record


def metric_names(chain_of_thought: bool) -> tuple[str, ...]:
    """The metrics of a task: all of them for `vcr_cot`, accuracy and counts for the ablations."""
    return scoring.METRICS if chain_of_thought else scoring.ACCURACY_METRICS + scoring.COUNT_METRICS


# ---------------------------------------------------------------- scoring


def score_with(records: Sequence[dict], judge: Judge | None, settings: dict | None = None,
               how_to_configure: str = "") -> tuple[dict[str, float], list[dict] | None]:
    """All VCR-Bench metrics (0-100; `judge_failed`, `model_failed` counts) of a task's records,
    and the judge's per-sample outcomes they come from (`judging.judge_records`; None without a judge).

    Without a judge nothing can be scored, not even accuracy (the answer is extracted by the
    judge): every judge-based metric is NaN and one log line says how many samples were left
    unscored (ending with `how_to_configure`); `model_failed` needs no judge and is still counted.
    """
    settings = scoring.resolve_settings(settings)
    records = list(records)
    chain_of_thought = any(record.get("score_cot", True) for record in records)
    warn_truncated(log, "VCR-Bench", count_truncated(records), len(records))
    if judge is None:
        log.warning("VCR-Bench: no judge configured, so none of the %d samples is scored: accuracy and CoT metrics "
                    "are NaN (answers are extracted by the judge).%s", len(records), how_to_configure)
        return {**dict.fromkeys(scoring.METRICS, math.nan), "model_failed": count_model_failures(records),
                "reasoning_truncated": count_truncated(records)}, None
    outcomes = judging.judge_records(records, judge, chain_of_thought, settings)
    metrics, judged = metrics_from_outcomes(records, outcomes, settings), judged_count(records)
    limit = settings.get(failure_share.FAILED_SHARE.option)
    if failure_share.too_many_failed(metrics["judge_failed"], judged, limit):
        log.error(failure_share.explain("VCR-Bench", metrics["judge_failed"], judged, limit))
    return metrics, outcomes


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of judged records (`judging.judge_records` outcomes); no judge call: the
    aggregate of the run's `metric_columns`."""
    return point(metric_columns(records, outcomes, settings))


def metric_columns(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> SampleColumns:
    """Every metric of the task, over per-sample columns (`utils/core/columns.py`): each sample's
    groups and verdict (`scoring.accuracy_columns`), its recall and precision ratios per kind
    (`scoring.cot_columns`) and its failure flags; the metrics from their sums (`metrics_from_totals`)."""
    settings = scoring.resolve_settings(settings)
    counted = scoring.accuracy_columns(records, [outcome["correct"] for outcome in outcomes])
    counted.update(scoring.cot_columns([o["recall_steps"] for o in outcomes], [o["precision_steps"] for o in outcomes],
                                       settings["include_background"]))
    counted["score_cot"] = column(record.get("score_cot", True) for record in records)
    counted["judge_failed"] = column(bool(outcome["errors"]) for outcome in outcomes)
    counted["verdict_lenient_changed"] = column(judging.lenient_changed([outcome]) for outcome in outcomes)
    counted["model_failed"] = column(map(model_failed, records))
    counted["reasoning_truncated"] = column(map(reasoning_truncated, records))
    counted["samples"] = np.ones(len(records))
    limit = settings.get(failure_share.FAILED_SHARE.option)
    return SampleColumns(counted, lambda totals, whole: metrics_from_totals(totals, whole, limit),
                         counts=(*scoring.COUNT_METRICS, "verdict_lenient_changed"))


def metrics_from_totals(totals, whole: bool, limit: float | None = None) -> dict:
    """The task's metrics from column sums (one value per row): accuracy per group, the CoT
    metrics when any sample is CoT-scored (else NaN), the failure counts; on a whole run, the
    judged metrics not computed past the judge failure share (`limit`: the task's; the option's value in effect when None)."""
    metrics = scoring.accuracy_from_totals(totals)
    scored = totals["score_cot"] > 0
    metrics.update({name: np.where(scored, value, np.nan) for name, value in scoring.cot_from_totals(totals).items()})
    metrics["judge_failed"] = totals["judge_failed"]
    if whole:  # past the failure share, the judged metrics would measure the judge's outage, not the model
        judged = totals["samples"] - totals["model_failed"]
        withheld = np.array([failure_share.too_many_failed(f, int(j), limit) for f, j in zip(metrics["judge_failed"], judged)], dtype=bool)
        for name in scoring.METRICS:
            if name not in scoring.COUNT_METRICS and name in metrics:
                metrics[name] = np.where(withheld, np.nan, metrics[name])
    # Not a task metric (no YAML entry): how many verdicts the other reading of the scoring
    # judge's reply would change (`lenient_verdict`); in the scored output and the logs.
    metrics["verdict_lenient_changed"] = totals["verdict_lenient_changed"]
    metrics["model_failed"] = totals["model_failed"]
    metrics["reasoning_truncated"] = totals["reasoning_truncated"]
    return metrics


def judged_count(records: Sequence[dict]) -> int:
    """Samples that needed judging (lmms-eval's failure placeholder is never judged)."""
    return len(records) - count_model_failures(records)


def count_model_failures(records: Sequence[dict]) -> int:
    """How many samples got lmms-eval's failure placeholder instead of a model answer."""
    return sum(map(model_failed, records))


def count_truncated(records: Sequence[dict]) -> int:
    """How many replies ended inside an open reasoning block (wrong for accuracy, not extracted)."""
    return sum(map(reasoning_truncated, records))
