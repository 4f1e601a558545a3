"""ToyBench records: the question's answer and the reply (with the fields every record has)."""

from __future__ import annotations

import re

from lmms_video_reasoning.utils.lmms.responses import reply_record


def build_record(doc: dict, response, settings: dict | None = None) -> dict:
    """`settings`: the task's (`registry.Benchmark.record`), which make the reply fields."""
    return {"sample_id": doc["sample_id"], "answer": doc["answer"], **reply_record(response, settings)}


def correct(record: dict) -> bool:
    """The rule-based metric: the first number of the final answer equals the answer."""
    found = re.search(r"\d+", record["final_answer"])
    return not record["model_failed"] and bool(found) and found.group(0) == record["answer"]
