"""CG-Bench as lmms-eval tasks, whoever runs them: documents, model inputs, records and metrics.

Documents: one per question; `mcq` has three (long + clue + grounding), joined per qid by CRR and acc@IoU.
Failures (official): an unparseable reply is left out of its metric (`parse_failed`), `oe_acc` counts final
verdicts only (`judge_failed`); strict: unparseable is wrong. lmms-eval's failure placeholder (`model_failed`)
and a reply ending inside its reasoning (`reasoning_truncated`) are wrong, never parsed nor judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from lmms_video_reasoning.cg_bench import docs, frames, prompts, scoring
from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core import columns, options, settings
from lmms_video_reasoning.utils.core.data_errors import require_fields
from lmms_video_reasoning.utils.lmms import responses

# The tasks' scoring options (a task chooses them; its records carry them).
STRICT = options.Option("strict", "bool", False, "CG-Bench answers parsed strictly (the official parser only)")
OFFICIAL_REVERSED = options.Option("official_reversed", "bool", False, "a reversed predicted interval computed "
                                   "as the official code does (negative length)")
# The suite's variables overriding them (`settings.variable`; not exported with the options).
VARIABLES = (settings.variable("LMMS_VR_CG_STRICT", STRICT), settings.variable("LMMS_VR_CG_OFFICIAL_REVERSED", OFFICIAL_REVERSED))
FAILURES = ("parse_failed", "model_failed", "reasoning_truncated")  # every task's failure counts (open: and judge_failed)
METRICS = {"long": ("long_acc", *FAILURES), "clue": ("clue_acc", *FAILURES), "grounding": ("miou", "rec_at_iou", *FAILURES),
           "open": ("oe_acc", "parse_failed", "judge_failed", "model_failed", "reasoning_truncated"),
           "mcq": ("long_acc", "clue_acc", "miou", "rec_at_iou", "acc_at_iou", "crr", *FAILURES), "blind": ("blind_acc", *FAILURES)}
HEADLINE = ("long_acc", "clue_acc", "miou", "rec_at_iou", "acc_at_iou", "crr", "oe_acc", "blind_acc")
RECORD_FIELDS = ("sample_id", "mode", *(key for key in docs.FIELDS if key != "choices"), "response")  # what `read_outcomes` reads
MODES = ("long", "clue", "grounding", "open", "blind")
# judge_error of open answers that were not judged at all (oe_acc and judge_failed are then NaN)
NO_JUDGE, JUDGE_OFF = "no judge configured", "judge not run (settings judge=False)"


def make_record(doc: dict, response: Any, task_settings: dict | None = None) -> dict:
    """The logged record of one answer: the question's facts, the raw reply and what `reply_record` reads of it; no parsing, no judge."""
    record = {"sample_id": doc["sample_id"], "task_kind": doc.get("task_kind", doc["mode"]), "mode": doc["mode"],
              **{key: doc[key] for key in docs.FIELDS if key != "choices"}}
    record.update(qid=int(doc["qid"]), clue_intervals=[[float(a), float(b)] for a, b in doc["clue_intervals"]], duration=int(doc["duration"]))
    return {**record, **responses.reply_record(response, task_settings)}


@dataclass
class Outcome:
    """One answer read: `value` is correct (0/1) for multiple choice and open, tIoU for grounding."""

    qid: int
    mode: str
    value: float | None  # None: left out of the metric (unparseable, or no judge verdict)
    parse_failed: bool
    duration: int
    domain: str
    kind: str
    judge_error: str | None = None  # open: why there is no verdict (NO_JUDGE / JUDGE_OFF: not judged at all)
    model_failed: bool = False  # lmms-eval's placeholder, no answer: value 0, never parsed nor judged
    reasoning_truncated: bool = False  # the reply ended inside its reasoning, no answer: value 0, never parsed nor judged
    sub_category: str = ""  # the annotation's level-2 category (`scoring.SUB_CATEGORIES`; "" in outcomes stored before it was kept)


def read_outcomes(records: Sequence[dict], strict: bool = False, official_reversed: bool = False) -> list[Outcome]:
    """Parse every record; an open-ended answer with a prediction is left pending (judge_error NO_JUDGE) for the
    open-ended judge (`judging.judge_pending`); `strict`, `official_reversed`: the options above."""
    outcomes = []
    for index, record in enumerate(records):
        require_fields(record, RECORD_FIELDS, f"cg_bench record #{index}")
        mode = record["mode"]
        if mode not in MODES:
            raise ValueError(f"cg_bench record #{index}: mode {mode!r} is not one of {MODES}")
        value, how, pending = None, "", None
        no_answer, truncated, answer = responses.model_failed(record), responses.reasoning_truncated(record), responses.final_answer(record)
        if no_answer or truncated:  # a missing answer: wrong / tIoU 0 in both settings, nothing to parse or judge
            value = 0.0
        elif mode in ("long", "clue", "blind"):
            correct, how = scoring.parse_mcq(answer, record["right_answer"], strict)
            value = None if correct is None else float(correct)
        elif mode == "grounding":
            value, how = scoring.grounding_tiou(answer, record["clue_intervals"], strict, official_reversed)
        elif scoring.parse_open(answer, strict) is None:
            value, how = (0.0 if strict else None), "failed"
        else:
            pending = NO_JUDGE
        outcomes.append(Outcome(record["qid"], mode, value, how == "failed", record["duration"], record["domain"],
                                scoring.question_kind(record["sub_category"]), pending, no_answer, truncated, record["sub_category"]))
    return outcomes


def joined_on_qid(fields: Sequence[dict]) -> dict[int, tuple[int, float]]:
    """acc@IoU's join on qid (`stat_with_key.py`): {qid: (index of its last long answer with a value, its last
    grounding tIoU)} for the qids having both."""
    answers = {o["qid"]: index for index, o in enumerate(fields) if o["mode"] == "long" and o["value"] is not None}
    ground = {o["qid"]: o["value"] for o in fields if o["mode"] == "grounding" and o["value"] is not None}
    return {qid: (index, ground[qid]) for qid, index in answers.items() if qid in ground}


def outcome_columns(outcomes: Sequence[Outcome], failed_share: float | None = None) -> columns.SampleColumns:
    """Every metric over per-answer columns (`utils/core/columns.py`): value per mode, tIoU `>=` each threshold
    (`stat_with_key.py`), failures, acc@IoU's pairs (once per qid, on its answer)."""
    fields = [vars(o) for o in outcomes]
    mode = np.array([o["mode"] for o in fields], dtype=str)
    value = columns.column(math.nan if o["value"] is None else o["value"] for o in fields)
    valued = ~np.isnan(value)
    counted = {name: columns.column(o[name] for o in fields) for name in FAILURES}
    for name in MODES:
        scored = (mode == name) & valued
        counted[f"n:{name}"], counted[f"sum:{name}"] = scored.astype(float), np.where(scored, value, 0.0)
    for k, threshold in enumerate(scoring.IOU_THRESHOLDS):
        counted[f"iou_at:{k}"] = counted["n:grounding"] * (np.where(valued, value, -np.inf) >= threshold)
    counted["open"] = (mode == "open").astype(float)
    counted["open_failed"] = counted["open"] * columns.column(o["judge_error"] is not None for o in fields)
    counted["open_not_run"] = counted["open"] * columns.column(o["judge_error"] in (NO_JUDGE, JUDGE_OFF) for o in fields)
    pairs = dict(joined_on_qid(fields).values())  # {index of the question's long answer: its tIoU}
    once = {"pairs": columns.column(index in pairs for index in range(len(fields))),
            **{f"pair_at:{k}": columns.column(index in pairs and fields[index]["value"] == 1.0 and pairs[index] >= threshold
                                              for index in range(len(fields))) for k, threshold in enumerate(scoring.IOU_THRESHOLDS)}}
    return columns.SampleColumns(counted, lambda totals, whole: metrics_from_totals(totals, whole, failed_share), once,
                                 ("parse_failed", "judge_failed", "model_failed", "reasoning_truncated"))


def metrics_from_totals(totals, whole: bool, failed_share: float | None = None) -> dict:
    """The metrics from column sums (a row each): 100 x the mean per mode, the mean share over thresholds,
    CRR, failures; on a whole run `oe_acc` is not computed past the judge failure share (never per group)."""

    percent = {mode: columns.ratio(100.0 * totals[f"sum:{mode}"], totals[f"n:{mode}"]) for mode in MODES}

    def over_thresholds(prefix: str, count: np.ndarray) -> np.ndarray:
        thresholds = range(len(scoring.IOU_THRESHOLDS))
        return 100.0 * sum((columns.ratio(totals[f"{prefix}:{k}"], count) for k in thresholds), 0.0) / len(scoring.IOU_THRESHOLDS)

    judge_failed = np.where((totals["open"] == 0) | (totals["open_not_run"] > 0), np.nan, totals["open_failed"])
    oe_acc = percent["open"]
    if whole:
        oe_acc = np.where(failure_share.withheld(judge_failed, totals["open"], failed_share), np.nan, oe_acc)
    return {"long_acc": percent["long"], "clue_acc": percent["clue"], "miou": percent["grounding"],
            "rec_at_iou": over_thresholds("iou_at", totals["n:grounding"]), "acc_at_iou": over_thresholds("pair_at", totals["pairs"]),
            "crr": columns.rowwise(scoring.crr, percent["long"], percent["clue"]), "oe_acc": oe_acc, "blind_acc": percent["blind"],
            "parse_failed": totals["parse_failed"], "judge_failed": judge_failed, "model_failed": totals["model_failed"],
            "reasoning_truncated": totals["reasoning_truncated"]}


def task_metrics(outcomes: Sequence[Outcome], failed_share: float | None = None, whole: bool = True) -> dict[str, float]:
    """A task's metrics over its outcomes, `oe_acc` NaN past the judge failure share if `whole` (never in a group of them)."""
    return columns.point(outcome_columns(outcomes, failed_share=failed_share), whole)


# --- Task settings, documents and model inputs
DEFAULTS = {
    "visual_mode": "video", "long_frames": frames.DEFAULT_LONG_FRAMES, "clue_frames": frames.DEFAULT_CLUE_FRAMES, "subtitles": True,
    "subtitle_times": True,  # each subtitle line as `[start, end] text` (ST); False: the text only
    "subtitle_span": "frames",  # the subtitles at the sampled frames' times; "video": every subtitle of the video
    "frame_times": True,
}
# The paper's input ablations (README, "Reproducing the paper's tables"): the documents of `cg_bench_<kind><suffix>`
# with these inputs for every model, named by the suffix. F: the official sampled frames; FT: their times; S: subtitles; ST: their times.
MODALITY_INPUTS = {suffix: {"visual_mode": "frames", "subtitles": "_s" in suffix, **({"subtitle_times": "_st" in suffix} if "_s" in suffix else {}),
                            "frame_times": "_ft" in suffix} for suffix in ("_f", "_f_ft", "_f_s", "_f_s_st", "_f_s_ft", "_f_s_st_ft")}
# (kind, row label, inputs): subtitles only, no visual (Table 4's S rows)
TEXT_INPUTS = {"_s_frames": ("long", "S (128 frames)", {"visual_mode": "none", "subtitle_times": False}),
               "_s_video": ("long", "S (full-video)", {"visual_mode": "none", "subtitle_times": False, "subtitle_span": "video"})}
TEXT_ONLY = "_text"  # the text-only grounding / open tasks: the other cells of the paper's GPT4o (text) row (Table 3)
VISUAL_MODES = ("video", "frames", "none")  # none: no visual at all (subtitles only, or the text alone)
SUBTITLE_SPANS = ("frames", "video")


def settings_of(kwargs: dict | None) -> dict:
    """The task settings: `lmms_eval_specific_kwargs` over the defaults, checked."""
    merged = {**DEFAULTS, **{k: v for k, v in (kwargs or {}).items() if k in DEFAULTS}}
    positive = (lambda v: isinstance(v, int) and v >= 1, "a positive integer")
    checks = {"visual_mode": (lambda v: v in VISUAL_MODES, f"one of {VISUAL_MODES}"), "long_frames": positive, "clue_frames": positive,
              "subtitle_times": (lambda v: isinstance(v, bool), "true or false"),
              "subtitle_span": (lambda v: v in SUBTITLE_SPANS, f"one of {SUBTITLE_SPANS}")}
    for key, (ok, what) in checks.items():
        if not ok(merged[key]):
            raise ValueError(f"cg_bench: {key} must be {what}, got {merged[key]!r} (lmms_eval_specific_kwargs)")
    return merged


def build_docs(records: list[dict], task_kind: str, split: str) -> list[dict]:
    """Task documents from validated records: one per (question, mode) with a `sample_id`."""
    modes = ("long", "clue", "grounding") if task_kind == "mcq" else (task_kind,)
    return [{"sample_id": f"{record['qid']}:{mode}" if task_kind == "mcq" else str(record["qid"]), "task_kind": task_kind,
             "mode": mode, "split": split, **{key: record[key] for key in docs.FIELDS}} for record in records for mode in modes]


def plan(doc: dict, settings: dict, media: frames.Media) -> frames.frame_plan.Chosen:
    """The frames the document's mode samples, its official sampling (no decoding; the sampler's table): their `indices` and `fps`."""
    if doc["mode"] == "clue":
        return media.plan(doc["video_uid"], frames.CLUE_PLAN, settings["clue_frames"], doc["clue_intervals"])
    return media.plan(doc["video_uid"], frames.LONG_PLAN, settings["long_frames"])


def doc_to_text(doc: dict, kwargs: dict | None, media: frames.Media, subtitles_for: Callable | None = None) -> str:
    """The official text block, no decoding: subtitles by `subtitles_for` at the protocol's frames (`subtitle_span` "video":
    all), frame times in frames mode only (a video model samples its own); blind: the paper's Blind-MCQ prompt."""
    if doc["mode"] == "blind":
        return prompts.blind_prompt(doc["question"], doc["choices"])
    settings = settings_of(kwargs)
    if settings["subtitles"] and subtitles_for is None:
        raise ValueError("cg_bench: this task has no subtitle input: set subtitles: false (lmms_eval_specific_kwargs)")
    frame_plan = plan(doc, settings, media)
    subtitles = (subtitles_for(doc["video_uid"], frame_plan, media, settings["subtitle_times"], settings["subtitle_span"] == "video")
                 if settings["subtitles"] else "")
    frame_times = prompts.frame_times_block(frame_plan.indices, frame_plan.fps) if settings["frame_times"] and settings["visual_mode"] == "frames" else ""
    return prompts.model_prompt(doc["mode"], doc["question"], doc["choices"], subtitles, frame_times)


def doc_to_visual(doc: dict, kwargs: dict | None, media: frames.Media) -> list:
    """Simple models: the video (clue mode: a video of the clue intervals), the sampled PIL frames, or nothing."""
    settings = settings_of(kwargs)
    if doc["mode"] == "blind" or settings["visual_mode"] == "none":
        return []
    if settings["visual_mode"] == "frames":
        return media.frames(doc["video_uid"], list(plan(doc, settings, media).indices))
    return [media.video(doc)]


def doc_to_messages(doc: dict, kwargs: dict | None, media: frames.Media, subtitles_for: Callable | None = None) -> list[dict]:
    """Chat models: one user turn, visuals first then the text block (as the official runner); one clue
    interval is sent exactly as start_time/end_time of the full video."""
    text, video = doc_to_text(doc, kwargs, media, subtitles_for), settings_of(kwargs)["visual_mode"] == "video" and doc["mode"] != "blind"
    if not video:
        content = [{"type": "image", "url": frame} for frame in doc_to_visual(doc, kwargs, media)]
    elif doc["mode"] == "clue" and len(doc["clue_intervals"]) == 1:
        (start, end), = doc["clue_intervals"]
        content = [{"type": "video", "url": str(media.full_video(doc)), "start_time": float(start), "end_time": float(end)}]
    else:
        content = [{"type": "video", "url": str(media.clue_video(doc) if doc["mode"] == "clue" else media.full_video(doc))}]
    return [{"role": "user", "content": content + [{"type": "text", "text": text}]}]
