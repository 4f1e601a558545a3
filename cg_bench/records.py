"""CG-Bench per-answer records: what `process_results` logs, and `lmms-vr score` rebuilds.

A record is the question's facts plus the raw reply (`aggregate.score_records` parses and
judges it later): no parsing, no judge, never raises on a reply.
"""

from __future__ import annotations

from typing import Any

from lmms_video_reasoning.cg_bench import data
from lmms_video_reasoning.utils.lmms.responses import reply_record


def build_record(doc: dict, response: Any) -> dict:
    """The logged record of one answer: the question's facts plus the raw reply.

    lmms-eval's failure placeholder is kept as the response and marked: `model_failed` True,
    `model_failure` its first line (what went wrong). The response is the raw reply;
    `final_answer` (what the parsers read) and `reasoning_truncated` come from `reply_record`.
    """
    return {
        "sample_id": doc["sample_id"],
        "task_kind": doc.get("task_kind", doc["mode"]),
        "mode": doc["mode"],
        "qid": int(doc["qid"]),
        "video_uid": doc["video_uid"],
        "question": doc["question"],
        "answer": doc["answer"],
        "right_answer": doc["right_answer"],
        "clue_intervals": [[float(a), float(b)] for a, b in doc["clue_intervals"]],
        "domain": doc["domain"],
        "sub_category": doc["sub_category"],
        "duration": int(doc["duration"]),
        **reply_record(response),
        # the video's SRT exists but yields no line: the prompt went without subtitles (reported)
        "subtitles_unusable": None if doc["mode"] == "blind" else data.subtitles_unusable(doc["video_uid"]),
        # no SRT found for the video: asked without subtitles (counted, `prepare --verify-only` lists them)
        "subtitles_missing": doc["mode"] != "blind" and data.subtitles_missing(doc["video_uid"]),
    }
