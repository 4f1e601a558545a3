"""lmms-eval hooks for the VRBench tasks (the functions the YAMLs in `tasks/vrbench/` name).

Tasks (one generation per question, the official CoT template):

- `vr_bench`: frames (or the video) + template; MCQ-O and OE-P from the same response.
- `vr_bench_mcq`: the same generation; MCQ-O only, no judge.
- `vr_bench_text`: the paper's LLM setting: summary + question, no visual input.
- `vr_bench_official`: `vr_bench` under the official protocol (see `scoring.py`).

The task's mode and protocol are stamped on every document by its `process_docs` hook and
copied into every record, so `score_records` re-scores a `--log_samples` file exactly as the
task's aggregation did. `VRBENCH_PROTOCOL=official` switches the other tasks to the official
protocol too.

Settings for the visual input come from `lmms_eval_specific_kwargs`: `visual_mode`
(`video`: a video, for video-native models; `frames`: `num_frames` frames at segment
midpoints, 224x224, for frame-based models), `num_frames` and `video_frames` (video mode:
`protocol`, the default, is a clip of those same `num_frames` 224x224 frames, as the official
inference ran video models; `model` lets the model sample the full video);
`VRBENCH_NUM_FRAMES` / `VRBENCH_VIDEO_FRAMES` override them; `LMMS_VR_VIDEO_INPUT=path` hands
the model the original path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer, keep_outcomes
from lmms_video_reasoning.utils.results.resampling import SampleColumns, column, ratio
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.core.roots import DataError, data_root, docs_dataset
from lmms_video_reasoning.utils.lmms.responses import failure_reason, final_answer, reasoning_truncated, reply_fields, warn_truncated
from lmms_video_reasoning.vrbench import data, frames, judging, prompts
from lmms_video_reasoning.vrbench.scoring import (
    NON_UNIQUE,
    PROTOCOLS,
    TYPE_NAMES,
    QuestionScore,
    aggregate,
    extract_mcq_answer,
    judge_prompt_kind,
    mcq_correct,
    record_model_failed,
    type_metric,
)

log = logging.getLogger("lmms_video_reasoning.vrbench")

PROTOCOL_ENV = "VRBENCH_PROTOCOL"
NUM_FRAMES_ENV = "VRBENCH_NUM_FRAMES"
DEFAULT_NUM_FRAMES = 16  # inference/main.py --total_frames default
VIDEO_FRAMES_ENV = "VRBENCH_VIDEO_FRAMES"
VIDEO_FRAMES = ("protocol", "model")
DEFAULT_VIDEO_FRAMES = "protocol"  # the official inference feeds every model these frames
PROTOCOL = settings.declare(PROTOCOL_ENV, "choice", "default", "VRBench protocol: this suite's default or the "
                            "official code's", choices=PROTOCOLS, scoring=True)
NUM_FRAMES = settings.declare(NUM_FRAMES_ENV, "int", None, "frames for frame-based models (overrides the task's "
                              "num_frames)", minimum=1, scoring=True)
VIDEO_FRAMES_SETTING = settings.declare(VIDEO_FRAMES_ENV, "choice", None, "what video-native models see: the protocol's "
                                        "frames or their own sampling", choices=VIDEO_FRAMES, scoring=True)

JUDGE_METRICS = ("mcq_accuracy", "process_score", "overall", *(f"type_{n}" for n in TYPE_NAMES), "judge_failed", "model_failed",
                 "reasoning_truncated")
MCQ_METRICS = ("mcq_accuracy", *(f"type_{n}" for n in TYPE_NAMES), "model_failed", "reasoning_truncated")

# ----------------------------------------------------------------------------------------
# Documents
# ----------------------------------------------------------------------------------------


def protocol_from_env() -> str:
    """`$VRBENCH_PROTOCOL` (default|official), `default` when unset."""
    try:
        return PROTOCOL.read()
    except settings.SettingError as error:
        raise DataError(str(error)) from None


def build_docs(mode: str, protocol: str) -> list[dict]:
    """The task's documents: every question of the annotation file, stamped with mode and protocol."""
    docs = data.flatten(data.load_records())
    for doc in docs:
        doc["mode"], doc["protocol"] = mode, protocol
    return docs


# Checked before generation (`utils/lmms/preflight.py`): the videos (not for the text-only task) and
# the judge (not for the MCQ-only task).
_MEDIA = preflight.MediaCheck(data.VRBENCH, lambda: data.media_kinds(data_root(data.VRBENCH), data.load_records()))


def load_docs(_placeholder=None):
    """`process_docs` of vr_bench."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("judge", protocol_from_env())), _MEDIA, judge="vrbench")


def load_docs_mcq(_placeholder=None):
    """`process_docs` of vr_bench_mcq."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("mcq", protocol_from_env())), _MEDIA)


def load_docs_text(_placeholder=None):
    """`process_docs` of vr_bench_text."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("text", protocol_from_env())), judge="vrbench")


def load_docs_official(_placeholder=None):
    """`process_docs` of vr_bench_official."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("judge", "official")), _MEDIA, judge="vrbench")


# ----------------------------------------------------------------------------------------
# Model input
# ----------------------------------------------------------------------------------------


def num_frames(kwargs: dict | None) -> int:
    """Frames for frame-based models: `$VRBENCH_NUM_FRAMES`, else the task's `num_frames`."""
    value = NUM_FRAMES.read() or (kwargs or {}).get("num_frames", DEFAULT_NUM_FRAMES)
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise DataError(f"VRBench num_frames must be a positive integer, got {value!r} ({NUM_FRAMES_ENV} or lmms_eval_specific_kwargs)")
    return count


def visual_mode(doc: dict, kwargs: dict | None) -> str:
    """`none` for the text task, else the task's `visual_mode` (`video` or `frames`)."""
    if doc["mode"] == "text":
        return "none"
    mode = (kwargs or {}).get("visual_mode", "video")
    if mode not in ("video", "frames"):
        raise DataError(f"VRBench visual_mode must be 'video' or 'frames', got {mode!r}")
    return mode


def sample_frames(path: Path, n: int) -> list:
    """The official frame sampling: `n` segment midpoints, resized to 224x224 (PIL images)."""
    from lmms_video_reasoning.utils.media import video

    total = video.probe(path).total_frames
    return video.read_frames(path, frames.indices(total, n), size=frames.SIZE)


def video_frames(kwargs: dict | None) -> str:
    """Which frames video mode shows: `protocol` (default) or `model`; `$VRBENCH_VIDEO_FRAMES` wins.

    `protocol`: the official inference's `num_frames` segment-midpoint frames at 224x224, as a
    video clip (the paper ran every model, video-native ones included, on these frames, with
    per-model frame counts in its Table A3). `model`: the model samples the full video itself.
    """
    value = VIDEO_FRAMES_SETTING.read() or (kwargs or {}).get("video_frames", DEFAULT_VIDEO_FRAMES)
    if value not in VIDEO_FRAMES:
        raise DataError(f"VRBench video_frames must be one of {VIDEO_FRAMES}, got {value!r} ({VIDEO_FRAMES_ENV} or lmms_eval_specific_kwargs)")
    return value


def video_input(doc: dict, kwargs: dict | None) -> str:
    """The video handed to a video-native model (`utils/lmms/model_video.py`): a clip of the protocol
    frames, or (`video_frames: model`) of exactly the frames the calling model's own path
    keeps (the original path for models it does not know). `LMMS_VR_VIDEO_INPUT=path`: the
    original path. The file is decoded either way: lmms-eval's qwen2_vl would log a decode
    error and answer from the text alone.
    """
    from lmms_video_reasoning.utils.lmms import model_video

    path = data.resolve_video(doc["video_path"])
    checked = lambda _path: data.resolve_checked_video(doc["video_path"])  # noqa: E731 - names the fix on failure
    if video_frames(kwargs) == "model":
        return model_video.video_for_model(path, on_broken=checked)
    n = num_frames(kwargs)
    return model_video.video_for_model(path, frames=lambda total: frames.indices(total, n), size=frames.SIZE,
                                       on_broken=checked)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video]` (video mode, see `video_input`), the sampled frames (frames mode), or `[]` (text task)."""
    mode = visual_mode(doc, lmms_eval_specific_kwargs)
    if mode == "none":
        return []
    if mode == "video":
        return [video_input(doc, lmms_eval_specific_kwargs)]
    return sample_frames(data.resolve_video(doc["video_path"]), num_frames(lmms_eval_specific_kwargs))


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official CoT prompt (question, `X: text` option lines, the video summary)."""
    return prompts.inference_prompt(doc["question"], [tuple(o) for o in doc["options"]], doc["video_summary"])


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """One user turn: the video or frames first, then the prompt (as the official inference)."""
    mode = visual_mode(doc, lmms_eval_specific_kwargs)
    visuals = doc_to_visual(doc, lmms_eval_specific_kwargs)
    kind = "video" if mode == "video" else "image"
    content = [{"type": kind, "url": visual} for visual in visuals]
    content.append({"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)})
    return [{"role": "user", "content": content}]


# ----------------------------------------------------------------------------------------
# Records and metrics
# ----------------------------------------------------------------------------------------


def build_record(doc: dict, response: Any) -> dict:
    """The per-question record: everything needed to score it again, nothing expensive.

    Also the way to score a `--predict_only` file: pair each raw response with its document.
    lmms-eval's failure placeholder (an API model that gave up) is marked `model_failed`
    with its reason, and no letter is read from it. `response` is the raw reply (the OE-P
    judge rates it whole, as the official judge rates the model's whole output); the MCQ
    letter is read from its final answer (`utils.responses.reply_fields`), so a thinking
    model's reasoning cannot lend it a letter, and a reply cut off inside its reasoning has
    no letter (wrong, counted in `reasoning_truncated`).
    """
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    reason = failure_reason(text)
    reasoning = reply_fields(text)
    needs_summary = judge_prompt_kind(doc["reasoning_type"], doc["protocol"]) == NON_UNIQUE and doc["mode"] != "mcq"
    return {
        "sample_id": doc["sample_id"],
        "mode": doc["mode"],
        "protocol": doc["protocol"],
        "reasoning_type": doc["reasoning_type"],
        "answer": doc["answer"],
        "response": text,
        **reasoning,
        "model_failed": reason is not None,
        "model_failure": reason or "",
        "mcq_pred": None if reason is not None or reasoning["reasoning_truncated"] else extract_mcq_answer(reasoning["final_answer"]),
        "question": doc["question"],
        "procedure": doc["procedure"],
        "original_answer": doc["original_answer"],
        "summary": prompts.cut_summary(doc["video_summary"]) if needs_summary else "",
    }


def process_results(doc: dict, results: Sequence[Any]) -> dict:
    """One record per metric of the task (never calls the judge, never raises on a response)."""
    record = build_record(doc, results[0] if results else "")
    names = MCQ_METRICS if doc["mode"] == "mcq" else JUDGE_METRICS
    return {name: record for name in names}


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str,
                          with_judge: bool, judge_ran: bool = True) -> dict[str, float]:
    """Metrics from records and their judge outcomes `(process score or None, judge failed)`.

    A model-failed record is never judged (`judging.rate` gives it `(None, False)`), so its
    process score is None: left out of OE-P (default) or 0 (official), see `scoring.oe_p`.
    """
    scores = [
        QuestionScore(
            reasoning_type=record["reasoning_type"],
            correct=not reasoning_truncated(record) and mcq_correct(final_answer(record), record["answer"]),
            rated=judge_prompt_kind(record["reasoning_type"], protocol) is not None,
            process=process,
            judge_failed=failed,
            model_failed=record_model_failed(record),
        )
        for record, (process, failed) in zip(records, outcomes, strict=True)
    ]
    failed, judged = judge_failures(records, outcomes, protocol)
    # Past the failure share the process ratings would measure the judge's outage: not computed.
    withheld = with_judge and judge_ran and failure_share.too_many_failed(failed, judged)
    metrics = aggregate(scores, protocol, with_judge, judge_ran=judge_ran and not withheld)
    if withheld:
        metrics["judge_failed"] = failed
    metrics["reasoning_truncated"] = sum(map(reasoning_truncated, records))
    return metrics


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
    model_failed = column(map(record_model_failed, records))
    process = [p for p, _failed in outcomes]
    if protocol == "official":  # over every question, no rating = 0
        process_sum, process_n = column(0.0 if p is None else p for p in process), np.ones(len(records))
    else:  # over the rated questions the judge scored
        process_n = rated * column(p is not None for p in process)
        process_sum = process_n * column(0.0 if p is None else p for p in process)
    counted = {"questions": np.ones(len(records)), "correct": correct, "process_sum": process_sum, "process_n": process_n,
               "judge_failed": column(failed for _p, failed in outcomes), "model_failed": model_failed,
               "reasoning_truncated": column(map(reasoning_truncated, records))}
    kinds = [type_metric(r["reasoning_type"]) for r in records]
    for name in TYPE_NAMES:
        member = column(kind == name for kind in kinds)
        counted.update({f"n:{name}": member, f"correct:{name}": member * correct, f"rated:{name}": member * rated,
                        f"process_sum:{name}": member * process_sum, f"process_n:{name}": member * process_n})
    # the failure share's counts (`judge_failures`): ratings failed of the questions that needed one
    needed = rated * (1.0 - model_failed)
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


def judge_failures(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str) -> tuple[int, int]:
    """(failed ratings, questions that needed a rating): the failure share's counts."""
    needed = [failed for record, (_process, failed) in zip(records, outcomes)
              if judge_prompt_kind(record["reasoning_type"], protocol) is not None and not record_model_failed(record)]
    return sum(needed), len(needed)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """All metrics of one task's records (the `lmms-vr score` entry; same path as aggregation).

    `settings`: optional `{"protocol": "default"|"official"}` overriding the records' protocol.
    Runs the judge (if configured) over the rated records.
    """
    if not records:
        return {}
    protocol = (settings or {}).get("protocol") or records[0]["protocol"]
    modes = {record["mode"] for record in records}
    if len(modes) != 1:
        raise DataError(f"VRBench records mix task modes {sorted(modes)}; score one task at a time")
    with_judge = modes.pop() != "mcq"
    warn_truncated(log, "VRBench", sum(map(reasoning_truncated, records)), len(records))
    outcomes = [(None, False)] * len(records)
    judge = None
    if with_judge:
        from lmms_video_reasoning.judges.engine import get_judge

        judge = get_judge("vrbench")
        if judge is not None:
            outcomes = judging.rate(records, protocol, judge)
            keep_outcomes(records, protocol, outcomes)  # the standard error reuses them
            judge.log_summary()
    if judge is not None:
        failed, judged = judge_failures(records, outcomes, protocol)
        if failure_share.too_many_failed(failed, judged):
            log.error(failure_share.explain("VRBench", failed, judged))
    return metrics_from_outcomes(records, outcomes, protocol, with_judge, judge_ran=judge is not None)


_score_once = ScoreOnce(score_records)
_write_accounting = judge_accounting_writer("vrbench")


aggregate_mcq_accuracy = _score_once.aggregation("mcq_accuracy", _write_accounting)
aggregate_process_score = _score_once.aggregation("process_score", _write_accounting)
aggregate_overall = _score_once.aggregation("overall", _write_accounting)
aggregate_judge_failed = _score_once.aggregation("judge_failed", _write_accounting)
aggregate_model_failed = _score_once.aggregation("model_failed", _write_accounting)
aggregate_reasoning_truncated = _score_once.aggregation("reasoning_truncated", _write_accounting)
aggregate_type_event_prediction = _score_once.aggregation("type_event_prediction", _write_accounting)
aggregate_type_hypothetical_reasoning = _score_once.aggregation("type_hypothetical_reasoning", _write_accounting)
aggregate_type_event_attribution = _score_once.aggregation("type_event_attribution", _write_accounting)
aggregate_type_implicit_inference = _score_once.aggregation("type_implicit_inference", _write_accounting)
aggregate_type_logical_linkage = _score_once.aggregation("type_logical_linkage", _write_accounting)
aggregate_type_information_synopsis = _score_once.aggregation("type_information_synopsis", _write_accounting)
aggregate_type_counting = _score_once.aggregation("type_counting", _write_accounting)
