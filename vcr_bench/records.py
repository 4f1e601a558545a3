"""VCR-Bench per-sample records: what `process_results` logs, and `lmms-vr score` rebuilds.

A record is everything needed to score the sample later (the question, the reference answer
and steps, the grouping fields of the accuracy breakdowns) plus the reply fields every
benchmark's record has (`utils.core.records`): cheap, JSON-ready, never judged, never raises.
"""

from __future__ import annotations

from typing import Any

from lmms_video_reasoning.utils.lmms.responses import reply_record
from lmms_video_reasoning.vcr_bench import data


def build_record(doc: dict, response: Any, chain_of_thought: bool = True) -> dict:
    """The record of one sample; `chain_of_thought` (`score_cot`): recall and precision are
    judged too (`vcr_cot`; the paper's Table 5 ablations score accuracy only).

    lmms-eval's placeholder for a request that got no answer ("[LMMS_EVAL_REQUEST_FAILED ...]")
    is kept as the response and marked `model_failed`, with its first line as `model_failure`:
    it is never judged (`utils.lmms.responses.model_failed`). The response is the raw reply;
    `reply_record` adds its final answer, whether its reasoning was cut off (then the answer is
    wrong without a judge call) and which text the judges see. A document that cannot be read
    becomes a record with its `error` (a failed sample, not a retry loop).
    """
    reply = reply_record(response)
    try:
        return {
            "sample_id": str(doc["sample_id"]),
            "id": int(doc["id"]),
            "dimension_code": doc["dimension_code"],
            "duration": float(doc["duration"]),
            "duration_bucket": data.duration_bucket(float(doc["duration"])),
            "multiple_choice": bool(doc["multiple_choice"]),
            "question": doc["question"],
            "answer": doc["answer"],
            "reasoning": list(doc["reasoning"]),
            **reply,
            "score_cot": chain_of_thought,
            "error": None,
        }
    except Exception as error:  # noqa: BLE001 - a bad doc must become a failed sample, not a retry loop
        return {
            "sample_id": str(doc.get("sample_id", "?")), "id": doc.get("id"), "dimension_code": doc.get("dimension_code"),
            "duration": None, "duration_bucket": None, "multiple_choice": doc.get("multiple_choice"),
            "question": doc.get("question"), "answer": doc.get("answer"), "reasoning": [], **reply,
            "score_cot": chain_of_thought, "error": f"{type(error).__name__}: {error}",
        }
