"""CG-Bench documents: the official annotation schema, checked, and the official frame table.

`video_meta_info.json` (duration, `max_frame`, fps per video: the official sampler's input) is not on the
Hub: it ships beside this module from the official repository (`run/video_meta_info.json`, 1,219 videos).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lmms_video_reasoning.utils.core import data_errors

SPLIT_FILES = {"mini": "cgbench_mini.json", "full": "cgbench.json"}
META_FILE = "video_meta_info.json"
PACKAGED_META = Path(__file__).with_name(META_FILE)  # official GitHub run/video_meta_info.json
FIELDS = ("qid", "video_uid", "question", "answer", "choices", "right_answer", "clue_intervals", "domain", "sub_category", "duration")
MAX_CHOICES = 8  # letters A..H
logger = logging.getLogger(__name__)


def validate_record(record: Any, where: str) -> dict:
    """One annotation record checked against the official schema (DataError naming the record and the field),
    normalised: `choices` a list, `clue_intervals` [float, float] pairs, `duration` int."""
    data_errors.require_fields(record, FIELDS, where)
    where = f"{where} (qid {record.get('qid')!r})"

    def fail(message: str):
        raise data_errors.DataError(f"{where}: {message}")

    if not isinstance(record["qid"], int) or isinstance(record["qid"], bool):
        fail(f"qid must be an integer, got {record['qid']!r}")
    for name in ("video_uid", "question", "answer", "right_answer", "domain", "sub_category"):
        if not isinstance(record[name], str) or not record[name]:
            fail(f"{name} must be a non-empty string, got {record[name]!r}")
    choices = record["choices"]
    if not isinstance(choices, list) or not 2 <= len(choices) <= MAX_CHOICES or not all(isinstance(c, str) for c in choices):
        fail(f"choices must be a list of 2 to {MAX_CHOICES} strings, got {choices!r}")
    data_errors.option_letter(record["right_answer"], data_errors.letters(len(choices)), "right_answer", where)
    intervals = record["clue_intervals"]
    if not isinstance(intervals, list) or not intervals:
        fail(f"clue_intervals must be a non-empty list of [start, end], got {intervals!r}")
    clean = []
    for interval in intervals:
        if not isinstance(interval, (list, tuple)) or len(interval) != 2:
            fail(f"clue interval {interval!r} is not [start, end] seconds")
        start, end = (data_errors.finite_number(value, f"clue interval {interval!r} {side}", where) for side, value in zip(("start", "end"), interval))
        if start > end:
            fail(f"clue interval {interval!r} is not [start, end] seconds with 0 <= start <= end")
        clean.append([start, end])
    duration = data_errors.finite_number(record["duration"], "duration", where, positive=True)
    return {**record, "choices": list(choices), "clue_intervals": clean, "duration": int(duration)}


def validate_records(records: Any, where: str) -> list[dict]:
    """Validate a whole annotation file: a list of records with unique qids."""
    if not isinstance(records, list) or not records:
        raise data_errors.DataError(f"{where}: expected a non-empty JSON list of question records")
    clean = [validate_record(record, f"{where} record #{index}") for index, record in enumerate(records)]
    repeated = [qid for qid, count in Counter(record["qid"] for record in clean).items() if count > 1]
    if repeated:
        raise data_errors.DataError(f"{where}: qid {repeated[0]} appears more than once; {data_errors.RECORD_FIX}")
    return clean


@dataclass(frozen=True)
class VideoMeta:
    """What the official sampler knows about a video (`video_meta_info.json`)."""

    duration: float
    max_frame: int
    fps: float


@cache
def read_meta(path: Path) -> dict[str, VideoMeta]:
    """The sampler's table in a `video_meta_info.json` (read once per path)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise data_errors.DataError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}): restore the file") from None
    if not isinstance(raw, dict):
        raise data_errors.DataError(f"{path}: expected a JSON object {{video_uid: {{duration, max_frame, fps}}}}")
    table = {}
    for uid, entry in raw.items():
        where_entry = f"{path} entry {uid!r}"
        data_errors.require_fields(entry, ("max_frame", "fps"), where_entry)
        fps = data_errors.finite_number(entry["fps"], "fps", where_entry, positive=True, unit="frames per second")
        max_frame = data_errors.finite_number(entry["max_frame"], "max_frame", where_entry, positive=True, unit="frames")
        # no duration (or 0): the sampler's own max_frame / fps
        duration = data_errors.finite_number(entry["duration"], "duration", where_entry) if entry.get("duration") else max_frame / fps
        table[uid] = VideoMeta(duration, int(max_frame), fps)
    return table


def meta_table(root: str | Path | None) -> dict[str, VideoMeta]:
    """The sampler's table for a data root: the official one, overridden entry by entry by the root's own
    `video_meta_info.json` when it has one (it describes that root's files)."""
    own = Path(root) / META_FILE if root else None
    return _overridden(own) if own is not None and own.is_file() else read_meta(PACKAGED_META)


@cache
def _overridden(own: Path) -> dict[str, VideoMeta]:
    official, override = read_meta(PACKAGED_META), read_meta(own)
    differ = sorted(uid for uid, meta in override.items() if uid in official and official[uid] != meta)
    if differ:
        logger.warning("cg_bench: %s lists %d video(s) differently from the official table (e.g. %s); the root's values are used",
                       own, len(differ), differ[0])
    return {**official, **override}
