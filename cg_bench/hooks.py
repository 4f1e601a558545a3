"""lmms-eval hooks of the CG-Bench tasks (the functions the YAMLs in `tasks/cg_bench/` name).

Tasks and their documents (one per question, `sample_id` = str(qid); `cg_bench_mcq` has
three per question, `sample_id` = "<qid>:<mode>"):

| task               | modes                     | metrics (each task also has `model_failed`, `reasoning_truncated`) |
|--------------------|---------------------------|----------------------------------------------------------------|
| cg_bench_long      | long                      | long_acc, parse_failed                                         |
| cg_bench_clue      | clue                      | clue_acc, parse_failed                                         |
| cg_bench_grounding | grounding                 | miou, rec_at_iou, parse_failed                                 |
| cg_bench_open      | open                      | oe_acc, parse_failed, judge_failed (LLM judge)                 |
| cg_bench_mcq       | long + clue + grounding   | long_acc, clue_acc, miou, rec_at_iou, acc_at_iou, crr, parse_failed |
| cg_bench_blind     | blind                     | blind_acc, parse_failed                                        |

Breakdowns (duration bucket, domain, kind), per-mode parse failures and the judge accounting
go to `<date_id>_cg_bench_<kind>_details.json` beside the run's `<date_id>_results.json`.

`cg_bench_full_*` are the same on `cgbench.json`. Settings come from
`lmms_eval_specific_kwargs` (`visual_mode`: video | frames, `long_frames`, `clue_frames`,
`subtitles`, `frame_times`); the parsing variant from `LMMS_VR_CG_STRICT` at scoring time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.cg_bench import data, inputs, judging, prompts  # noqa: F401 - judging declares the judge (preflight)
from lmms_video_reasoning.cg_bench.aggregate import (  # noqa: F401 - score_records / make_record: `lmms-vr score`
    METRICS,
    Settings,
    make_record,
    score_records,
)
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.results.aggregation import RunFiles, ScoreOnce
from lmms_video_reasoning.utils.core.roots import cache_home, data_root, docs_dataset

logger = logging.getLogger("lmms_video_reasoning.cg_bench")

DEFAULTS = {
    "visual_mode": "video",
    "long_frames": inputs.DEFAULT_LONG_FRAMES,
    "clue_frames": inputs.DEFAULT_CLUE_FRAMES,
    "subtitles": True,
    "frame_times": True,
}
VISUAL_MODES = ("video", "frames")


def settings_of(kwargs: dict | None) -> dict:
    """The task settings: `lmms_eval_specific_kwargs` over the defaults, checked."""
    merged = {**DEFAULTS, **{k: v for k, v in (kwargs or {}).items() if k in DEFAULTS}}
    if merged["visual_mode"] not in VISUAL_MODES:
        raise ValueError(f"cg_bench: visual_mode must be one of {VISUAL_MODES}, got {merged['visual_mode']!r} (lmms_eval_specific_kwargs)")
    for key in ("long_frames", "clue_frames"):
        if not isinstance(merged[key], int) or merged[key] < 1:
            raise ValueError(f"cg_bench: {key} must be a positive integer, got {merged[key]!r} (lmms_eval_specific_kwargs)")
    return merged


# ---------------------------------------------------------------------- documents


def build_docs(records: list[dict], task_kind: str, split: str) -> list[dict]:
    """Task documents from validated records: one per (question, mode) with a `sample_id`."""
    modes = ("long", "clue", "grounding") if task_kind == "mcq" else (task_kind,)
    docs = []
    for record in records:
        for mode in modes:
            docs.append({
                "sample_id": f"{record['qid']}:{mode}" if task_kind == "mcq" else str(record["qid"]),
                "task_kind": task_kind,
                "mode": mode,
                "split": split,
                "qid": record["qid"],
                "video_uid": record["video_uid"],
                "question": record["question"],
                "answer": record["answer"],
                "choices": record["choices"],
                "right_answer": record["right_answer"],
                "clue_intervals": record["clue_intervals"],
                "domain": record["domain"],
                "sub_category": record["sub_category"],
                "duration": record["duration"],
            })
    return docs


def _loader(task_kind: str, split: str):
    """The `process_docs` hook of one task, checked before generation (`utils/lmms/preflight.py`): the
    media (not for the blind task) and the judge (the open-ended task)."""
    media = None if task_kind == "blind" else preflight.MediaCheck(
        data.CG_BENCH, lambda: data.media_kinds(data_root(data.CG_BENCH), data.load_records(split)), key=split)

    def load_docs(_placeholder=None):
        return preflight.task_load("cg_bench", lambda: docs_dataset(build_docs(data.load_records(split), task_kind, split)),
                                   media, judge="cg_bench" if task_kind == "open" else None)

    load_docs.__name__ = f"load_{task_kind}_{split}"
    return load_docs


load_long, load_clue, load_grounding = _loader("long", "mini"), _loader("clue", "mini"), _loader("grounding", "mini")
load_open, load_mcq, load_blind = _loader("open", "mini"), _loader("mcq", "mini"), _loader("blind", "mini")
load_long_full, load_clue_full, load_grounding_full = _loader("long", "full"), _loader("clue", "full"), _loader("grounding", "full")
load_open_full, load_mcq_full, load_blind_full = _loader("open", "full"), _loader("mcq", "full"), _loader("blind", "full")


# ---------------------------------------------------------------------- model input


def _plan(doc: dict, settings: dict) -> inputs.FramePlan:
    return inputs.frame_plan(doc["video_uid"], doc["mode"], doc["clue_intervals"], settings["long_frames"], settings["clue_frames"])


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official text block (no decoding: frame times come from video_meta_info.json).

    Frames mode: system prompt + subtitles + frame times + question + options. Video mode:
    the same without the frame-times block (the model samples its own frames); subtitles
    are those the protocol's frames would show. Blind: the paper's Blind-MCQ prompt.
    """
    if doc["mode"] == "blind":
        return prompts.blind_prompt(doc["question"], doc["choices"])
    settings = settings_of(lmms_eval_specific_kwargs)
    plan = _plan(doc, settings)
    subtitles = inputs.subtitles_for(plan) if settings["subtitles"] else ""
    frame_times = prompts.frame_times_block(plan.indices, plan.fps) if settings["frame_times"] and settings["visual_mode"] == "frames" else ""
    return prompts.model_prompt(doc["mode"], doc["question"], doc["choices"], subtitles, frame_times)


def clip_cache_dir() -> Path:
    return cache_home() / "cg_bench_clips"


def full_video(doc: dict) -> Path:
    """The question's full video, checked to decode (video mode hands only the path to the model)."""
    return data.usable_video(data.video_path(doc["video_uid"]))


def clue_video(doc: dict) -> Path:
    """A video of the clue intervals only: the dataset's clip (checked), else one cut from the (checked) full video."""
    clip = data.clue_clip_path(doc["qid"])
    if clip is not None:
        return data.usable_video(clip)
    from lmms_video_reasoning.utils.media import video

    return Path(video.cut_clip(full_video(doc), doc["clue_intervals"], clip_cache_dir()))


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """Simple models: the video (video mode; clue mode gets the clue clip) or the sampled PIL frames.

    Video mode: a proxy clip of exactly the frames the calling model's own path keeps
    (`utils/lmms/model_video.py`; `LMMS_VR_VIDEO_INPUT=path` hands over the path). The file is decoded
    either way (MediaError naming it otherwise): lmms-eval's `qwen2_vl` would swallow a decode error.
    """
    if doc["mode"] == "blind":
        return []
    settings = settings_of(lmms_eval_specific_kwargs)
    if settings["visual_mode"] == "frames":
        return inputs.frames_for(_plan(doc, settings))
    from lmms_video_reasoning.utils.lmms import model_video

    if doc["mode"] == "clue":
        return [model_video.video_for_model(clue_video(doc))]
    return [model_video.video_for_model(data.video_path(doc["video_uid"]), on_broken=data.usable_video)]


def _video_part(doc: dict) -> dict:
    """Chat video content (checked to decode); one clue interval is sent exactly as start_time/end_time of the full video."""
    if doc["mode"] == "clue":
        if len(doc["clue_intervals"]) == 1:
            start, end = doc["clue_intervals"][0]
            return {"type": "video", "url": str(full_video(doc)), "start_time": float(start), "end_time": float(end)}
        return {"type": "video", "url": str(clue_video(doc))}
    return {"type": "video", "url": str(full_video(doc))}


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: one user turn, visuals first then the text block (as the official runner)."""
    settings = settings_of(lmms_eval_specific_kwargs)
    text = doc_to_text(doc, lmms_eval_specific_kwargs)
    if doc["mode"] == "blind":
        content = []
    elif settings["visual_mode"] == "frames":
        content = [{"type": "image", "url": frame} for frame in inputs.frames_for(_plan(doc, settings))]
    else:
        content = [_video_part(doc)]
    return [{"role": "user", "content": content + [{"type": "text", "text": text}]}]


# ---------------------------------------------------------------------- results and aggregation


record_from_response = make_record  # for `--predict_only` files: (doc, raw response) -> record


def process_results(doc: dict, results: list) -> dict:
    """One record per metric of the task (the same record): cheap, never raises, no judge."""
    response = results[0] if results else ""
    record = make_record(doc, response if isinstance(response, str) else str(response))
    return {metric: record for metric in METRICS[doc["task_kind"]]}


_scorer = ScoreOnce(lambda records: score_records(records, Settings.from_env()))


def details_path(run: RunFiles, task_kind: str) -> Path:
    """Where a task's breakdowns and judge accounting are written, beside the run's results:
    `<output_path>/<model>/<date_id>_cg_bench_<kind>_details.json`."""
    return run.path(f"cg_bench_{task_kind}_details.json")


def _write_details(scores: dict, run: RunFiles | None) -> None:
    """Write every metric, the breakdowns and the judge accounting beside lmms-eval's results."""
    if run is None:
        return
    from lmms_video_reasoning.judges.engine import get_judge

    judge = get_judge("cg_bench") if scores["breakdown"]["task_kind"] in ("open",) else None
    details = {**scores, "judge": judge.accounting() if judge is not None else None,
               "settings": settings.resolved(scoring_only=True)}
    path = details_path(run, scores["breakdown"]["task_kind"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(details, indent=2, default=str, sort_keys=True) + "\n", encoding="utf-8")
    logger.debug("cg_bench: breakdowns by duration / domain / kind written to %s", path)


aggregate_long_acc = _scorer.aggregation("long_acc", _write_details)
aggregate_clue_acc = _scorer.aggregation("clue_acc", _write_details)
aggregate_miou = _scorer.aggregation("miou", _write_details)
aggregate_rec_at_iou = _scorer.aggregation("rec_at_iou", _write_details)
aggregate_acc_at_iou = _scorer.aggregation("acc_at_iou", _write_details)
aggregate_crr = _scorer.aggregation("crr", _write_details)
aggregate_oe_acc = _scorer.aggregation("oe_acc", _write_details)
aggregate_blind_acc = _scorer.aggregation("blind_acc", _write_details)
aggregate_parse_failed = _scorer.aggregation("parse_failed", _write_details)
aggregate_judge_failed = _scorer.aggregation("judge_failed", _write_details)
aggregate_model_failed = _scorer.aggregation("model_failed", _write_details)
aggregate_reasoning_truncated = _scorer.aggregation("reasoning_truncated", _write_details)
