"""VRBench documents: one per question of `VRBench_eval.jsonl` (a line per video), with what inference and
scoring need; a malformed record is an error naming it. Standard library only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lmms_video_reasoning.utils.core.data_errors import DataError, option_letter, require_fields
from lmms_video_reasoning.vrbench import prompts
from lmms_video_reasoning.vrbench.scoring import TYPE_METRIC

ANNOTATIONS = "VRBench_eval.jsonl"
VIDEO_FOLDER = "VRBench/videos/v001"  # canonical: where the records' video_path points
VIDEO_FIELDS = ("video_id", "video_path", "video_summary", "mcq")
QUESTION_FIELDS = ("question", "options", "answer", "original_answer", "reasoning_process", "reasoning_type")


def _steps(process: Any, where: str) -> list[list[str]]:
    """Reference steps as `[[number, text], ...]` (a dict keyed "1", "2", ... in the data)."""
    if isinstance(process, str):  # the official formatter passes strings through
        return [["1", process]] if process else []
    if not isinstance(process, dict):
        raise DataError(f"{where}: 'reasoning_process' must be an object of step number -> text")
    try:
        return [[str(int(number)), str(text)] for number, text in process.items()]
    except ValueError:
        raise DataError(f"{where}: 'reasoning_process' keys must be step numbers, got {list(process)}") from None


def flatten(records: Iterable[dict], source: str = ANNOTATIONS) -> list[dict]:
    """One document per question, id `"{video_id}_{qa_key}"` (the official question id)."""
    docs = []
    for record in records:
        video_id = str(record["video_id"])
        if not isinstance(record["mcq"], dict):
            raise DataError(f"{source}, video {video_id}: 'mcq' must be an object of qa key -> question")
        for qa_key, qa in record["mcq"].items():
            where = f"{source}, video {video_id}, question {qa_key}"
            require_fields(qa, QUESTION_FIELDS, where)
            reasoning_type = str(qa["reasoning_type"])
            if reasoning_type.strip() not in TYPE_METRIC:
                raise DataError(f"{where}: unknown reasoning_type {reasoning_type!r}; expected one of {sorted(TYPE_METRIC)}")
            if not isinstance(qa["options"], dict) or not qa["options"]:
                raise DataError(f"{where}: 'options' must be a non-empty object of letter -> text")
            options = [[str(letter), str(text)] for letter, text in qa["options"].items()]  # in the record's order (Arrow needs fixed keys)
            option_letter(qa["answer"], [letter for letter, _text in options], "answer", where)
            steps = _steps(qa["reasoning_process"], where)
            docs.append(
                {
                    "sample_id": f"{video_id}_{qa_key}",
                    "video_id": video_id,
                    "qa_key": str(qa_key),
                    "video_path": str(record["video_path"]),
                    "video_read_type": str(record.get("video_read_type") or "decord"),
                    "video_summary": str(record["video_summary"]),
                    "question": str(qa["question"]),
                    "options": options,
                    "answer": str(qa["answer"]),
                    "original_answer": str(qa["original_answer"]),
                    "steps": steps,
                    "procedure": prompts.format_procedure(steps),
                    "reasoning_type": reasoning_type,
                }
            )
    if not docs:
        raise DataError(f"{source}: no questions found")
    return docs


def without_arrow_gaps(record: dict) -> dict:
    """A video record as its JSON line has it, from a `datasets` row: `mcq` and `reasoning_process` are Arrow
    structs, every row with the union of their keys (None where a video lacks one); such entries are dropped."""

    def present(mapping: Any) -> Any:
        return {key: value for key, value in mapping.items() if value is not None} if isinstance(mapping, dict) else mapping

    mcq = {key: {**qa, "options": present(qa.get("options")), "reasoning_process": present(qa.get("reasoning_process"))}
           for key, qa in present(record.get("mcq")).items()} if isinstance(record.get("mcq"), dict) else record.get("mcq")
    return {**record, "mcq": mcq}
