"""VRBench as an lmms-eval task, whoever runs it: inputs, per-question records and metrics. One generation
per question (the official CoT template) in the mode stamped on its document: `judge` (MCQ-O and OE-P),
`mcq` (MCQ-O only) or `text` (no visual input). Visual input: `lmms_eval_specific_kwargs` (README.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lmms_video_reasoning.utils.core import options, settings
from lmms_video_reasoning.utils.core.columns import SampleColumns, column
from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan
from lmms_video_reasoning.utils.lmms import responses
from lmms_video_reasoning.vrbench import frames, prompts, scoring

DEFAULT_NUM_FRAMES = 16  # inference/main.py --total_frames default
VIDEO_FRAMES = ("protocol", "model")
DEFAULT_VIDEO_FRAMES = "protocol"  # the official inference feeds every model these frames
PROTOCOL = options.Option("protocol", "choice", "default", "VRBench protocol: this suite's default or the "
                          "official code's", choices=scoring.PROTOCOLS)  # a task option
NUM_FRAMES = options.Option("num_frames", "int", None, "frames for frame-based models (overrides the task's "
                            "num_frames)", minimum=1)
VIDEO_FRAMES_SETTING = options.Option("video_frames", "choice", None, "what video-native models see: the "
                                      "protocol's frames or their own sampling", choices=VIDEO_FRAMES)
# The suite's variables overriding them (`settings.variable`; not exported with the options).
PROTOCOL_VARIABLE = settings.variable("VRBENCH_PROTOCOL", PROTOCOL)
FRAME_VARIABLES = (settings.variable("VRBENCH_NUM_FRAMES", NUM_FRAMES), settings.variable("VRBENCH_VIDEO_FRAMES", VIDEO_FRAMES_SETTING))

JUDGE_METRICS = ("mcq_accuracy", "process_score", "overall", *(f"type_{n}" for n in scoring.TYPE_NAMES), "judge_failed", "model_failed",
                 "reasoning_truncated")
MCQ_METRICS = ("mcq_accuracy", *(f"type_{n}" for n in scoring.TYPE_NAMES), "model_failed", "reasoning_truncated")
RECORD_KEYS = ("sample_id", "mode", "protocol", "reasoning_type", "answer")  # what a record copies of its question first


class Media(Protocol):
    """Gets a document's frames (the binding resolves its file): `plan`, the `n` frames a plan picks and their times;
    `frames`, those indices as RGB PIL images (resized to `size`); `video`, what a video model is handed: the
    video, or (`pick`, `size`) a video of just those frames."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> Chosen: ...
    def frames(self, doc: dict, indices: Sequence[int], size: tuple[int, int] | None = None) -> list: ...
    def video(self, doc: dict, pick: Callable[[int], list[int]] | None = None, size: tuple[int, int] | None = None) -> str: ...


# --- Documents
def stamp(docs: list[dict], mode: str, protocol: str) -> list[dict]:
    """The task's documents: every question, stamped with the task's mode and protocol (in place)."""
    for doc in docs:
        doc["mode"], doc["protocol"] = mode, protocol
    return docs


# --- Model input
def num_frames(kwargs: dict | None) -> int:
    """Frames for frame-based models: the task's `num_frames`."""
    value = (kwargs or {}).get("num_frames", DEFAULT_NUM_FRAMES)
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise DataError(f"VRBench num_frames must be a positive integer, got {value!r} (num_frames in lmms_eval_specific_kwargs)")
    return count


def kwarg(kwargs: dict | None, name: str, default: str, accepted: Sequence[str]) -> str:
    """The task's `name` setting (`lmms_eval_specific_kwargs`), one of `accepted`."""
    value = (kwargs or {}).get(name, default)
    if value not in accepted:
        raise DataError(f"VRBench {name} must be one of {tuple(accepted)}, got {value!r} ({name} in lmms_eval_specific_kwargs)")
    return value


def doc_to_visual(doc: dict, kwargs: dict | None, media: Media) -> list:
    """`[video]` (of the protocol frames, or whole), the sampled frames (the task's `visual_mode` frames), or `[]` (text task)."""
    if doc["mode"] == "text":
        return []
    if kwarg(kwargs, "visual_mode", "video", ("video", "frames")) == "frames":
        return media.frames(doc, media.plan(doc, frames.PLAN, num_frames(kwargs)).indices, size=frames.SIZE)
    # which frames video mode shows: `protocol` (the official frames as a clip; paper Table A3) or `model` (its own)
    if kwarg(kwargs, "video_frames", DEFAULT_VIDEO_FRAMES, VIDEO_FRAMES) == "model":
        return [media.video(doc)]
    n = num_frames(kwargs)
    return [media.video(doc, pick=lambda total: frames.indices(total, n), size=frames.SIZE)]


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official CoT prompt."""
    return prompts.inference_prompt(doc["question"], [tuple(o) for o in doc["options"]], doc["video_summary"])


def doc_to_messages(doc: dict, kwargs: dict | None, media: Media, text: str) -> list[dict]:
    """One user turn: the video or frames first, then the prompt `text` (as the official inference)."""
    content = [{"type": "video" if isinstance(visual, str) else "image", "url": visual} for visual in doc_to_visual(doc, kwargs, media)]
    return [{"role": "user", "content": [*content, {"type": "text", "text": text}]}]


# --- Records and metrics
def record_of(doc: dict, reply: dict) -> dict:
    """The record of a question and its reply fields (`utils.lmms.responses.reply_record`)."""
    judge_summary = scoring.judge_prompt_kind(doc["reasoning_type"], doc["protocol"]) == scoring.NON_UNIQUE and doc["mode"] != "mcq"
    letter = None if reply["model_failed"] or reply["reasoning_truncated"] else scoring.extract_mcq_answer(reply["final_answer"])
    return {**{key: doc[key] for key in RECORD_KEYS}, **reply, "mcq_pred": letter, **{key: doc[key] for key in ("question", "procedure", "original_answer")},
            "summary": doc["video_summary"][:prompts.SUMMARY_LIMIT] if judge_summary else ""}


def build_record(doc: dict, response: Any, settings: dict | None = None) -> dict:
    """The per-question record, all that scores it again: the judge rates the whole response, as officially; the
    MCQ letter comes from its final answer (`responses.reply_record`), none for a failed or cut-off reply."""
    return record_of(doc, responses.reply_record(response, settings))


def metric_names(doc: dict) -> tuple[str, ...]:
    """The metrics of the document's task (MCQ-only for `mcq` mode)."""
    return MCQ_METRICS if doc["mode"] == "mcq" else JUDGE_METRICS


def metric_columns(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str,
                   with_judge: bool, judge_ran: bool = True, failed_share: float | None = None) -> SampleColumns:
    """Every metric of the task over per-question columns; on a whole run the judge-based ones are withheld past
    the failure share (`failed_share`; None: the environment's)."""
    scores = [scoring.QuestionScore(r["reasoning_type"], not responses.reasoning_truncated(r) and scoring.mcq_correct(responses.final_answer(r), r["answer"]),
                                    scoring.judge_prompt_kind(r["reasoning_type"], protocol) is not None, p, f, responses.model_failed(r))
              for r, (p, f) in zip(records, outcomes, strict=True)]
    counted = scoring.score_columns(scores, protocol)
    counted["reasoning_truncated"] = column(map(responses.reasoning_truncated, records))

    def metrics(totals, whole: bool) -> dict:
        return {**scoring.metrics_from_totals(totals, protocol, with_judge, judge_ran, withhold=whole, limit=failed_share),
                "reasoning_truncated": totals["reasoning_truncated"]}

    return SampleColumns(counted, metrics, counts=("model_failed", "judge_failed", "reasoning_truncated"))


def task_protocol(records: Sequence[dict], settings: dict | None) -> tuple[str, bool]:
    """(protocol, with_judge) of one task's records (`settings["protocol"]` overrides the records')."""
    protocol = (settings or {}).get("protocol") or records[0]["protocol"]
    modes = {record["mode"] for record in records}
    if len(modes) != 1:
        raise DataError(f"VRBench records mix task modes {sorted(modes)}; score one task at a time")
    return protocol, modes.pop() != "mcq"
