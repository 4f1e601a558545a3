"""CG-Bench as lmms-eval tasks, whoever runs them: documents, model inputs and records.

Tasks and their documents (one per question, `sample_id` = str(qid); the joined multiple-choice
task has three per question, `sample_id` = "<qid>:<mode>"):

| task kind | modes                     | metrics (each task also has `model_failed`, `reasoning_truncated`) |
|-----------|---------------------------|----------------------------------------------------------------|
| long      | long                      | long_acc, parse_failed                                         |
| clue      | clue                      | clue_acc, parse_failed                                         |
| grounding | grounding                 | miou, rec_at_iou, parse_failed                                 |
| open      | open                      | oe_acc, parse_failed, judge_failed (LLM judge)                 |
| mcq       | long + clue + grounding   | long_acc, clue_acc, miou, rec_at_iou, acc_at_iou, crr, parse_failed |
| blind     | blind                     | blind_acc, parse_failed                                        |

Settings come from `lmms_eval_specific_kwargs` (`visual_mode`: video | frames | none, `long_frames`,
`clue_frames`, `subtitles`, `subtitle_times`, `subtitle_span`, `frame_times`). The paper's prompt &
modality ablations (Table 4 / Table 10) combine them: frames (F), frame timestamps (FT), subtitles
(S), subtitle timestamps (ST); `none` with subtitles is its "S" rows (subtitles only), `none`
without them the text-only row of Table 3. Files come through a `sampling.Media` (get the
frames), supplied by the task's lmms-eval hooks.
"""

from __future__ import annotations

from lmms_video_reasoning.cg_bench import outcomes, prompts, sampling

DEFAULTS = {
    "visual_mode": "video",
    "long_frames": sampling.DEFAULT_LONG_FRAMES,
    "clue_frames": sampling.DEFAULT_CLUE_FRAMES,
    "subtitles": True,
    "subtitle_times": True,  # each subtitle line as `[start, end] text` (ST); False: the text only
    "subtitle_span": "frames",  # the subtitles at the sampled frames' times; "video": every subtitle of the video
    "frame_times": True,
}
VISUAL_MODES = ("video", "frames", "none")  # none: no visual at all (subtitles only, or the text alone)
SUBTITLE_SPANS = ("frames", "video")


def settings_of(kwargs: dict | None) -> dict:
    """The task settings: `lmms_eval_specific_kwargs` over the defaults, checked."""
    merged = {**DEFAULTS, **{k: v for k, v in (kwargs or {}).items() if k in DEFAULTS}}
    if merged["visual_mode"] not in VISUAL_MODES:
        raise ValueError(f"cg_bench: visual_mode must be one of {VISUAL_MODES}, got {merged['visual_mode']!r} (lmms_eval_specific_kwargs)")
    for key in ("long_frames", "clue_frames"):
        if not isinstance(merged[key], int) or merged[key] < 1:
            raise ValueError(f"cg_bench: {key} must be a positive integer, got {merged[key]!r} (lmms_eval_specific_kwargs)")
    if not isinstance(merged["subtitle_times"], bool):
        raise ValueError(f"cg_bench: subtitle_times must be true or false, got {merged['subtitle_times']!r} (lmms_eval_specific_kwargs)")
    if merged["subtitle_span"] not in SUBTITLE_SPANS:
        raise ValueError(f"cg_bench: subtitle_span must be one of {SUBTITLE_SPANS}, got {merged['subtitle_span']!r} (lmms_eval_specific_kwargs)")
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


# ---------------------------------------------------------------------- model input


def plan(doc: dict, settings: dict, media: sampling.Media) -> sampling.QuestionFrames:
    """The frames the document's mode samples (no decoding)."""
    return sampling.frame_plan(doc["video_uid"], doc["mode"], doc["clue_intervals"], media, settings["long_frames"], settings["clue_frames"])


def doc_to_text(doc: dict, kwargs: dict | None, media: sampling.Media) -> str:
    """The official text block (no decoding: frame times come from the sampler's table).

    Frames mode: system prompt + subtitles + frame times + question + options. Video mode:
    the same without the frame-times block (the model samples its own frames); subtitles
    are those the protocol's frames would show. No visual (`none`): the same without frame
    times. Subtitle lines carry their times unless `subtitle_times` is false; `subtitle_span`
    "video" shows every subtitle of the video. Blind: the paper's Blind-MCQ prompt.
    """
    if doc["mode"] == "blind":
        return prompts.blind_prompt(doc["question"], doc["choices"])
    settings = settings_of(kwargs)
    frame_plan = plan(doc, settings, media)
    subtitles = sampling.subtitles_for(frame_plan, media, settings["subtitle_times"], settings["subtitle_span"] == "video") if settings["subtitles"] else ""
    frame_times = prompts.frame_times_block(frame_plan.indices, frame_plan.fps) if settings["frame_times"] and settings["visual_mode"] == "frames" else ""
    return prompts.model_prompt(doc["mode"], doc["question"], doc["choices"], subtitles, frame_times)


def doc_to_visual(doc: dict, kwargs: dict | None, media: sampling.Media) -> list:
    """Simple models: the video (video mode; clue mode gets a video of the clue intervals) or the sampled PIL frames."""
    settings = settings_of(kwargs)
    if doc["mode"] == "blind" or settings["visual_mode"] == "none":
        return []
    if settings["visual_mode"] == "frames":
        return sampling.frames_for(plan(doc, settings, media), media)
    return [media.video(doc)]


def video_part(doc: dict, media: sampling.Media) -> dict:
    """Chat video content; one clue interval is sent exactly as start_time/end_time of the full video."""
    if doc["mode"] == "clue":
        if len(doc["clue_intervals"]) == 1:
            start, end = doc["clue_intervals"][0]
            return {"type": "video", "url": str(media.full_video(doc)), "start_time": float(start), "end_time": float(end)}
        return {"type": "video", "url": str(media.clue_video(doc))}
    return {"type": "video", "url": str(media.full_video(doc))}


def doc_to_messages(doc: dict, kwargs: dict | None, media: sampling.Media) -> list[dict]:
    """Chat models: one user turn, visuals first then the text block (as the official runner)."""
    settings = settings_of(kwargs)
    text = doc_to_text(doc, kwargs, media)
    if doc["mode"] == "blind" or settings["visual_mode"] == "none":
        content = []
    elif settings["visual_mode"] == "frames":
        content = [{"type": "image", "url": frame} for frame in sampling.frames_for(plan(doc, settings, media), media)]
    else:
        content = [video_part(doc, media)]
    return [{"role": "user", "content": content + [{"type": "text", "text": text}]}]


def metric_names(doc: dict) -> tuple[str, ...]:
    """The metrics of the document's task."""
    return outcomes.METRICS[doc["task_kind"]]
