"""lmms-eval hooks of the VCR-Bench tasks (`vcr_bench/tasks/*.yaml` point here).

Inputs (README.md, "Tasks"; paper Table 5 for the ablations), chosen per task and model
by the task setting `visual_mode` in `lmms_eval_specific_kwargs`:
  video      the video (models with native video input; the default, as in the paper):
             simple models get a proxy clip of exactly the frames their own path keeps
             (`utils/lmms/model_video.py`), chat models the path; `LMMS_VR_VIDEO_INPUT=path` = paths
  frames     64 frames at floor(i * total / 64), with their times round(idx / fps, 1) s
             written before the question (frame-based models: `openai`, `gpt4v`)
  one_frame  the middle frame only (`vcr_one_frame`)
  none       no visual (`vcr_text_only`)
`VCR_BENCH_VISUAL_MODE=video|frames` overrides video/frames for `vcr_cot` and `vcr_direct`.
`chain_of_thought: false` drops the CoT instruction (`vcr_direct`).

Scoring: `process_results` only builds a self-contained record (`records.build_record`: never
calls a judge, never raises; lmms-eval's failure placeholder is marked `model_failed`, never
judged); the first aggregation of a task judges all records in one batch
(`aggregate.score_records`, memoised by content so the metric aggregations share one batch) and
writes the judge accounting next to the results. `score_records` is also what `lmms-vr score`
calls on records read back from a `--log_samples` file, and `build_record` builds the same
record from a doc and a raw response (`--predict_only` files, replay predictions).
"""

from __future__ import annotations

from typing import Any

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.records import process_results as records_hook
from lmms_video_reasoning.utils.core.roots import DataError, data_root, docs_dataset
from lmms_video_reasoning.utils.lmms import model_video, preflight
from lmms_video_reasoning.utils.media import video
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer
from lmms_video_reasoning.vcr_bench import aggregate, data, frames, judging, prompts, records, scoring

VISUAL_MODES = ("video", "frames", "one_frame", "none")
VISUAL_MODE_ENV = "VCR_BENCH_VISUAL_MODE"
VISUAL_MODE = settings.declare(VISUAL_MODE_ENV, "choice", "", "what the video tasks show: the video, frames, one frame "
                               "or nothing", choices=VISUAL_MODES, scoring=True)


# ---------------------------------------------------------------- documents


def load_docs(dataset=None) -> Any:
    """`process_docs`: replace the one-row placeholder with the benchmark's documents (checked
    before generation: `utils/lmms/preflight.py`)."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), _MEDIA, judge=judging.JUDGE)


def load_docs_no_visual(dataset=None) -> Any:
    """`process_docs` of `vcr_text_only`: the same documents; no video is needed."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), judge=judging.JUDGE)


_MEDIA = preflight.MediaCheck(data.VCR_BENCH, lambda: data.media_kinds(data_root(data.VCR_BENCH), data.load_records()))


# ---------------------------------------------------------------- task settings


def task_settings(kwargs: dict | None) -> tuple[str, bool]:
    """(visual_mode, chain_of_thought) from the task's `lmms_eval_specific_kwargs`."""
    kwargs = kwargs or {}
    mode = kwargs.get("visual_mode", "video")
    try:
        override = VISUAL_MODE.read()
    except settings.SettingError as error:
        raise DataError(f"VCR-Bench visual mode: {error}") from None
    if override and mode in ("video", "frames"):
        mode = override
    if mode not in VISUAL_MODES:
        raise DataError(f"VCR-Bench visual_mode {mode!r} (task setting or {VISUAL_MODE_ENV}) is not one of {VISUAL_MODES}")
    return mode, bool(kwargs.get("chain_of_thought", True))


def frame_plan(doc: dict, mode: str) -> video.PlannedFrames:
    """The frames of the frame modes and their times, from the container (no decoding)."""
    return frames.for_document(data.video_file(doc), mode)


# ---------------------------------------------------------------- model inputs


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    mode, chain_of_thought = task_settings(lmms_eval_specific_kwargs)
    preamble = prompts.frame_times_preamble(frame_plan(doc, mode).timestamps) if mode == "frames" else ""
    return prompts.model_prompt(doc["question"], chain_of_thought, preamble)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video_path]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    mode, _ = task_settings(lmms_eval_specific_kwargs)
    if mode == "none":
        return []
    if mode == "video":
        # The model's own frames in a proxy clip (utils.model_video; `LMMS_VR_VIDEO_INPUT=path`
        # hands over the path). Either way the file is decoded here first: native-video models
        # swallow a decode error and answer from the text alone, so a broken file fails here.
        return [model_video.video_for_model(data.video_file(doc), on_broken=lambda _path: data.checked_video_file(doc))]
    return list(frame_plan(doc, mode).read())


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    visuals = doc_to_visual(doc, lmms_eval_specific_kwargs)
    content = [{"type": "video", "url": item} if isinstance(item, str) else {"type": "image", "url": item} for item in visuals]
    content.append({"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)})
    return [{"role": "user", "content": content}]


# ---------------------------------------------------------------- records and aggregation


def _metric_names(chain_of_thought: bool):
    names = scoring.METRICS if chain_of_thought else scoring.ACCURACY_METRICS + scoring.COUNT_METRICS
    return lambda doc: names


# `vcr_cot`: one record under every metric name (accuracy and CoT metrics).
process_results = records_hook(records.build_record, _metric_names(True), chain_of_thought=True)
# Ablations (paper Table 5 reports accuracy only): no recall / precision judging.
process_results_accuracy_only = records_hook(records.build_record, _metric_names(False), chain_of_thought=False)

_SCORE = ScoreOnce(aggregate.score_records, "vcr_bench")
_write_accounting = judge_accounting_writer(judging.JUDGE)


aggregate_accuracy = _SCORE.aggregation("accuracy", _write_accounting)
aggregate_accuracy_ftr = _SCORE.aggregation("accuracy_ftr", _write_accounting)
aggregate_accuracy_vtc = _SCORE.aggregation("accuracy_vtc", _write_accounting)
aggregate_accuracy_vtg = _SCORE.aggregation("accuracy_vtg", _write_accounting)
aggregate_accuracy_vkr = _SCORE.aggregation("accuracy_vkr", _write_accounting)
aggregate_accuracy_tsr = _SCORE.aggregation("accuracy_tsr", _write_accounting)
aggregate_accuracy_vpa = _SCORE.aggregation("accuracy_vpa", _write_accounting)
aggregate_accuracy_tsg = _SCORE.aggregation("accuracy_tsg", _write_accounting)
aggregate_accuracy_short = _SCORE.aggregation("accuracy_short", _write_accounting)
aggregate_accuracy_medium = _SCORE.aggregation("accuracy_medium", _write_accounting)
aggregate_accuracy_long = _SCORE.aggregation("accuracy_long", _write_accounting)
aggregate_accuracy_mc = _SCORE.aggregation("accuracy_mc", _write_accounting)
aggregate_accuracy_open = _SCORE.aggregation("accuracy_open", _write_accounting)
aggregate_perception_recall = _SCORE.aggregation("perception_recall", _write_accounting)
aggregate_perception_precision = _SCORE.aggregation("perception_precision", _write_accounting)
aggregate_perception_f1 = _SCORE.aggregation("perception_f1", _write_accounting)
aggregate_reasoning_recall = _SCORE.aggregation("reasoning_recall", _write_accounting)
aggregate_reasoning_precision = _SCORE.aggregation("reasoning_precision", _write_accounting)
aggregate_reasoning_f1 = _SCORE.aggregation("reasoning_f1", _write_accounting)
aggregate_cot_recall = _SCORE.aggregation("cot_recall", _write_accounting)
aggregate_cot_precision = _SCORE.aggregation("cot_precision", _write_accounting)
aggregate_cot_f1 = _SCORE.aggregation("cot_f1", _write_accounting)
aggregate_judge_failed = _SCORE.aggregation("judge_failed", _write_accounting)
aggregate_model_failed = _SCORE.aggregation("model_failed", _write_accounting)
aggregate_reasoning_truncated = _SCORE.aggregation("reasoning_truncated", _write_accounting)
