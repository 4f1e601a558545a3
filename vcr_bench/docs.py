"""VCR-Bench documents: an official record of `v1/videos/meta_info_video.json` -> a checked task document (a bad
record is an error naming it), with its dimension code and duration bucket. Standard library only."""

from __future__ import annotations

import json
import re

from lmms_video_reasoning.utils.core.data_errors import DataError, finite_number, option_letter, require_fields
from lmms_video_reasoning.vcr_bench.scoring import DIMENSIONS, parse_interval

VIDEO_DIR = "v1/videos"  # a record's `video_path` is relative to it
ANNOTATION = f"{VIDEO_DIR}/meta_info_video.json"
# An option inside a multiple-choice question's text ("...?A. He ...\nB. ..."): a capital not after a letter, then ". ".
QUESTION_OPTION = re.compile(r"(?<![A-Za-z])([A-Z])\.\s")
RECORD_FIELDS = ("id", "video_path", "duration", "dimension", "question", "multiple-choice", "answer", "reasoning")


def dimension_code(name: str, where: str) -> str:
    """The code of a dimension name (case- and space-insensitive) or code; DataError if unknown."""
    wanted = " ".join(str(name).split()).lower()
    for full, code in DIMENSIONS.items():
        if full.lower() == wanted or code == wanted:
            return code
    raise DataError(f"{where}: unknown dimension {name!r}; expected one of {list(DIMENSIONS)}")


def duration_bucket(duration_s: float) -> str:
    """Paper Table 1: 'short' (<= 60 s), 'medium' (<= 300 s) or 'long'."""
    return "short" if duration_s <= 60 else "medium" if duration_s <= 300 else "long"


def option_letters(question: str, choices: dict) -> list[str]:
    """A multiple-choice question's letters: its `choices` with a text, else the options in its text."""
    found = [letter for letter, text in choices.items() if str(text).strip()]
    return found or list(dict.fromkeys(QUESTION_OPTION.findall(question)))


def record_to_doc(record: dict, where: str) -> dict:
    """Validate one official record and turn it into a task document (Arrow-friendly types)."""
    require_fields(record, RECORD_FIELDS, where)
    if isinstance(record["id"], bool) or not isinstance(record["id"], (int, str)) or not str(record["id"]).strip().isdigit():
        raise DataError(f"{where}: 'id' must be an integer, got {record['id']!r}")
    for name in ("video_path", "question"):
        if not isinstance(record[name], str) or not record[name].strip():
            raise DataError(f"{where}: '{name}' must be a non-empty string, got {record[name]!r}")
    duration = finite_number(record["duration"], "duration", where)
    if not isinstance(record["multiple-choice"], bool):
        raise DataError(f"{where}: 'multiple-choice' must be true or false, got {record['multiple-choice']!r}")
    if not isinstance(record["answer"], (str, int, float)) or isinstance(record["answer"], bool):
        raise DataError(f"{where}: 'answer' must be a string, got {record['answer']!r}")
    steps = record["reasoning"]
    if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
        raise DataError(f"{where}: 'reasoning' must be a list of step strings, got {type(steps).__name__}")
    choices = record.get("choices") or {}
    if not isinstance(choices, dict):
        raise DataError(f"{where}: 'choices' must be an object of option letter -> text, got {type(choices).__name__}")
    if record["multiple-choice"]:
        answer = record["answer"]
        option_letter(answer.strip().upper() if isinstance(answer, str) else answer,
                      option_letters(record["question"], choices), "answer", where)
    else:  # a grounding answer in time ("[13, 54]", scored by IoU) holds finite seconds
        for side, value in zip(("start", "end"), parse_interval(record["answer"]) or ()):
            finite_number(value, f"answer {record['answer']!r} {side}", where)
    code = dimension_code(record["dimension"], where)
    doc = {"sample_id": str(int(record["id"])), "id": int(record["id"]), "video_path": record["video_path"], "duration": duration,
           "dimension": next(full for full, c in DIMENSIONS.items() if c == code)}
    # `choices` has variable keys: stored as JSON text (Arrow-friendly)
    doc.update(dimension_code=code, question=record["question"], multiple_choice=record["multiple-choice"],
               choices=json.dumps(choices, ensure_ascii=False), answer=str(record["answer"]), reasoning=list(steps))
    return doc


def records_to_docs(records, source: str) -> list[dict]:
    """Documents for every record of an annotation list; DataError naming a bad record."""
    if not isinstance(records, list):
        raise DataError(f"{source}: expected a JSON list of VCR-Bench records, got {type(records).__name__}")
    docs: dict[str, dict] = {}
    for index, record in enumerate(records):
        rid = record.get("id", "?") if isinstance(record, dict) else "?"
        doc = record_to_doc(record, f"VCR-Bench record #{index} (id={rid}) in {source}")
        if doc["sample_id"] in docs:
            raise DataError(f"VCR-Bench record #{index} in {source}: duplicate id {doc['id']}")
        docs[doc["sample_id"]] = doc
    return list(docs.values())
