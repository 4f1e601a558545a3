"""VRBench per-question records: what `process_results` logs, and `lmms-vr score` rebuilds.

The task's mode and protocol are stamped on every document by its `process_docs` hook and
copied into the record, so a `--log_samples` file is re-scored exactly as the task's
aggregation scored it.
"""

from __future__ import annotations

from typing import Any

from lmms_video_reasoning.utils.lmms.responses import reply_record
from lmms_video_reasoning.vrbench import prompts
from lmms_video_reasoning.vrbench.scoring import NON_UNIQUE, extract_mcq_answer, judge_prompt_kind


def build_record(doc: dict, response: Any) -> dict:
    """The per-question record: everything needed to score it again, nothing expensive.

    Also the way to score a `--predict_only` file: pair each raw response with its document.
    lmms-eval's failure placeholder (an API model that gave up) is marked `model_failed`
    with its first line as `model_failure`, and no letter is read from it. `response` is the
    raw reply (the OE-P judge rates it whole, as the official judge rates the model's whole
    output); the MCQ letter is read from its final answer (`utils.lmms.responses.reply_record`),
    so a thinking model's reasoning cannot lend it a letter, and a reply cut off inside its
    reasoning has no letter (wrong, counted in `reasoning_truncated`).
    """
    reply = reply_record(response)
    needs_summary = judge_prompt_kind(doc["reasoning_type"], doc["protocol"]) == NON_UNIQUE and doc["mode"] != "mcq"
    no_letter = reply["model_failed"] or reply["reasoning_truncated"]
    return {
        "sample_id": doc["sample_id"],
        "mode": doc["mode"],
        "protocol": doc["protocol"],
        "reasoning_type": doc["reasoning_type"],
        "answer": doc["answer"],
        **reply,
        "mcq_pred": None if no_letter else extract_mcq_answer(reply["final_answer"]),
        "question": doc["question"],
        "procedure": doc["procedure"],
        "original_answer": doc["original_answer"],
        "summary": prompts.cut_summary(doc["video_summary"]) if needs_summary else "",
    }
