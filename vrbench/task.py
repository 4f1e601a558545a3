"""VRBench as an lmms-eval task, whoever runs it: inputs, per-question records and metrics.

One generation per question with the official CoT template, scored for both tracks, in a mode
stamped on every document and copied into every record (re-scored as the aggregation scored it):
`judge` (MCQ-O and OE-P from the same response), `mcq` (MCQ-O only, no judge), `text` (the paper's
LLM setting: no visual input). The protocol (`scoring.py`): the task's option `protocol`.

Visual input (`lmms_eval_specific_kwargs`):
`visual_mode` (`video`, or `frames`: `num_frames` segment-midpoint frames at 224x224), `video_frames`
(video mode: `protocol`, a clip of those frames, as the official inference; `model`: the model samples it).
"""

from __future__ import annotations

import json
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
TWO_PHASE = "two_phase"  # marks the documents of the paper's protocol: the reasoning round, then the choice round
ROUNDS = "rounds"  # the key of the two replies in a two-phase response
RECORD_KEYS = ("sample_id", "mode", "protocol", "reasoning_type", "answer")  # what a record copies of its question first


class Media(Protocol):
    """Get the frames: what the task needs from a document's video (the binding resolves the file)."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> Chosen:
        """The `n` frames `plan` picks in the video and their times (no decoding)."""

    def frames(self, doc: dict, indices: Sequence[int], size: tuple[int, int] | None = None) -> list:
        """The frames at these presentation indices, as RGB PIL images (resized to `size`)."""

    def video(self, doc: dict, pick: Callable[[int], list[int]] | None = None, size: tuple[int, int] | None = None) -> str:
        """What a video-native model is handed: the video, or (`pick`, `size`) a video of just those frames."""


# --- Documents
def task_protocol_of(declared: dict | None = None) -> str:
    """The protocol of a task declaring `declared` (its options; `default` when it declares none),
    overridden when its override is set (`Option.value`)."""
    try:
        return PROTOCOL.value(declared)
    except options.OptionError as error:
        raise DataError(str(error)) from None


def stamp(docs: list[dict], mode: str, protocol: str) -> list[dict]:
    """The task's documents: every question, stamped with the task's mode and protocol (in place)."""
    for doc in docs:
        doc["mode"], doc["protocol"] = mode, protocol
    return docs


# --- Model input
def num_frames(kwargs: dict | None) -> int:
    """Frames for frame-based models: the override of `num_frames` when set, else the task's `num_frames`."""
    value = NUM_FRAMES.value() or (kwargs or {}).get("num_frames", DEFAULT_NUM_FRAMES)
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise DataError(f"VRBench num_frames must be a positive integer, got {value!r} ({NUM_FRAMES.sources()} in lmms_eval_specific_kwargs)")
    return count


def visual_mode(doc: dict, kwargs: dict | None) -> str:
    """`none` for the text task, else the task's `visual_mode` (`video` or `frames`)."""
    if doc["mode"] == "text":
        return "none"
    mode = (kwargs or {}).get("visual_mode", "video")
    if mode not in ("video", "frames"):
        raise DataError(f"VRBench visual_mode must be 'video' or 'frames', got {mode!r}")
    return mode


def video_frames(kwargs: dict | None) -> str:
    """Which frames video mode shows: `protocol` (default: the official `num_frames` segment midpoints at
    224x224 as a clip; per model the paper's Table A3) or `model` (it samples the video); the override of `video_frames` wins."""
    value = VIDEO_FRAMES_SETTING.value() or (kwargs or {}).get("video_frames", DEFAULT_VIDEO_FRAMES)
    if value not in VIDEO_FRAMES:
        raise DataError(f"VRBench video_frames must be one of {VIDEO_FRAMES}, got {value!r} ({VIDEO_FRAMES_SETTING.sources()} in lmms_eval_specific_kwargs)")
    return value


def doc_to_visual(doc: dict, kwargs: dict | None, media: Media) -> list:
    """`[video]` (video mode: of the protocol frames, or the video for the model to sample itself),
    the sampled frames (frames mode), or `[]` (text task)."""
    mode = visual_mode(doc, kwargs)
    if mode == "none":
        return []
    if mode == "frames":
        return media.frames(doc, media.plan(doc, frames.PLAN, num_frames(kwargs)).indices, size=frames.SIZE)
    if video_frames(kwargs) == "model":
        return [media.video(doc)]
    n = num_frames(kwargs)
    return [media.video(doc, pick=lambda total: frames.indices(total, n), size=frames.SIZE)]


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official CoT prompt."""
    return prompts.inference_prompt(doc["question"], [tuple(o) for o in doc["options"]], doc["video_summary"])


def doc_to_messages(doc: dict, kwargs: dict | None, media: Media, text: str) -> list[dict]:
    """One user turn: the video or frames first, then the prompt `text` (as the official inference)."""
    kind = "video" if visual_mode(doc, kwargs) == "video" else "image"
    content = [{"type": kind, "url": visual} for visual in doc_to_visual(doc, kwargs, media)]
    return [{"role": "user", "content": [*content, {"type": "text", "text": text}]}]


# --- Records and metrics
def build_record(doc: dict, response: Any, settings: dict | None = None) -> dict:
    """The per-question record: all that scores it again (also from a `--predict_only` file). The OE-P judge
    rates the whole `response`, as the official judge; the MCQ letter is read from its final answer
    (`utils.lmms.responses.reply_record`, made with the task's `settings`): none for a failed reply or one cut
    off inside its reasoning, and a thinking model's reasoning cannot lend it one."""
    return record_of(doc, responses.reply_record(response, settings))


def record_of(doc: dict, reply: dict) -> dict:
    """The record of a question and its reply fields (`utils.lmms.responses.reply_record`)."""
    judge_summary = scoring.judge_prompt_kind(doc["reasoning_type"], doc["protocol"]) == scoring.NON_UNIQUE and doc["mode"] != "mcq"
    letter = None if reply["model_failed"] or reply["reasoning_truncated"] else scoring.extract_mcq_answer(reply["final_answer"])
    return {**{key: doc[key] for key in RECORD_KEYS}, **reply, "mcq_pred": letter, **{key: doc[key] for key in ("question", "procedure", "original_answer")},
            "summary": doc["video_summary"][:prompts.SUMMARY_LIMIT] if judge_summary else ""}


def metric_names(doc: dict) -> tuple[str, ...]:
    """The metrics of the document's task (MCQ-only for `mcq` mode)."""
    return MCQ_METRICS if doc["mode"] == "mcq" else JUDGE_METRICS


def metric_columns(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str,
                   with_judge: bool, judge_ran: bool = True, failed_share: float | None = None) -> SampleColumns:
    """Every metric of the task over per-question columns (`utils/core/columns.py`; `scoring.score_columns`,
    `scoring.metrics_from_totals`): on a whole run, the judge-based ones withheld past the failure share
    (`failed_share` the task's, None: the environment's). A model-failed record is never judged."""
    # per record r: MCQ-O right (a reply cut off inside its reasoning has no letter), rated, (process score, judge failed), model failed
    scores = [scoring.QuestionScore(r["reasoning_type"], not responses.reasoning_truncated(r) and scoring.mcq_correct(responses.final_answer(r), r["answer"]),
                                    scoring.judge_prompt_kind(r["reasoning_type"], protocol) is not None, p, f, responses.model_failed(r))
              for r, (p, f) in zip(records, outcomes, strict=True)]
    counted = scoring.score_columns(scores, protocol)
    counted["reasoning_truncated"] = column(map(responses.reasoning_truncated, records))

    def metrics(totals, whole: bool) -> dict:
        return {**scoring.metrics_from_totals(totals, protocol, with_judge, judge_ran, withhold=whole, limit=failed_share),
                "reasoning_truncated": totals["reasoning_truncated"]}

    return SampleColumns(counted, metrics, counts=("model_failed", "judge_failed", "reasoning_truncated"))


# --- The paper's two-phase protocol (section 4, "Evaluation Protocols"; tasks vr_bench_two_phase and
# vr_bench_text_two_phase, whose documents are marked TWO_PHASE: `benchmark.py` dispatches here), two
# generations: OE-P rates round 1, MCQ-O reads round 2.
def two_phase_turn(doc: dict, replies: Sequence[str]) -> str | tuple:
    """lmms-eval's `generate_until_agentic` step. Before any reply: the Fig. A20 prompt for VLMs, or LLMs
    (text task). After round 1: round 2, text only (`[]` visuals): the options beside the round-1 reply
    without its reasoning blocks (as a chat template keeps an earlier turn). After round 2: done, both
    replies packed into the one response lmms-eval logs."""
    if not replies:
        basis = "video summary" if doc["mode"] == "text" else "video and summary"
        return prompts.PAPER_REASONING_PROMPT.substitute(basis=basis, question=doc["question"], video_summary=doc["video_summary"])
    if len(replies) == 1:
        options = prompts.multiple_choice_question(doc["question"], [tuple(o) for o in doc["options"]])
        return [], prompts.CHOICE_PROMPT.substitute(reasoning=responses.strip_reasoning(replies[0]), multiple_choice_question=options), False, None, None
    return None, None, True, [json.dumps({ROUNDS: list(replies[:2])}, ensure_ascii=False)], None


def unpack_rounds(response: Any) -> tuple[str, str]:
    """(reasoning, choice) replies of a two-phase response: the packed JSON lmms-eval logs, or
    the two replies as a list (a replay prediction); "" (no prediction) is two empty replies."""
    if response in ("", None):
        return "", ""
    rounds = response
    if isinstance(response, str):
        try:
            rounds = json.loads(response).get(ROUNDS)
        except (ValueError, AttributeError):
            rounds = None
    if not (isinstance(rounds, (list, tuple)) and len(rounds) == 2 and all(isinstance(text, str) for text in rounds)):
        raise DataError(f"VRBench two-phase task: expected the two rounds' replies ({{\"{ROUNDS}\": [reasoning, choice]}} or a "
                        f"list of two strings), got {str(response)[:200]!r}; run the task with lmms-eval's agentic loop")
    return rounds[0], rounds[1]


def two_phase_reply(response: Any, settings: dict | None) -> dict:
    """The reply fields of a two-phase record: `response` is round 1 (what the OE-P judge rates),
    `choice_response` round 2 (its final answer gives the MCQ letter); a failure in either
    round is a model failure (never judged, wrong)."""
    reasoning, choice = unpack_rounds(response)
    first, second = responses.reply_record(reasoning, settings), responses.reply_record(choice, settings)
    return {**first, "choice_response": choice, "final_answer": second["final_answer"],
            "reasoning_truncated": second["reasoning_truncated"], "model_failed": first["model_failed"] or second["model_failed"],
            "model_failure": first["model_failure"] or second["model_failure"]}


def task_protocol(records: Sequence[dict], settings: dict | None) -> tuple[str, bool]:
    """(protocol, with_judge) of one task's records (`settings["protocol"]` overrides the records')."""
    protocol = (settings or {}).get("protocol") or records[0]["protocol"]
    modes = {record["mode"] for record in records}
    if len(modes) != 1:
        raise DataError(f"VRBench records mix task modes {sorted(modes)}; score one task at a time")
    return protocol, modes.pop() != "mcq"
