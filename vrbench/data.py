"""VRBench annotations and videos: load `VRBench_eval.jsonl`, flatten it into questions, find videos.

Layout (Hugging Face dataset `OpenGVLab/VRBench`, or a local copy under `$VRBENCH_ROOT`):

    VRBench_eval.jsonl            one line per video (schema of the official VRBench_debug.jsonl)
    VRBench/videos/v001/<id>.mp4  the record's `video_path`, relative to the root

The videos ship as a split zip (`v001_360p.z01`..`.z39` + `.zip`, ~421 GB). Depending on how
it was extracted, the files end up at `<root>/VRBench/videos/v001/<id>.mp4` (the path the
records name), `<root>/videos/v001/<id>.mp4`, `<root>/v001/<id>.mp4`, `<root>/v001_360p/<id>.mp4`
or `<root>/<id>.mp4`. `resolve_video` accepts any of these, in that order; a missing file is
an error naming the expected path, the variable and the command that fetches the data;
`resolve_checked_video` (video mode) also rejects a file that does not decode.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from lmms_video_reasoning.utils.data import (
    VRBENCH,
    DataError,
    annotation_file,
    checked_video,
    data_root,
    media_file,
    read_json,
    require_fields,
)
from lmms_video_reasoning.vrbench import prompts
from lmms_video_reasoning.vrbench.scoring import TYPE_METRIC

ANNOTATIONS = "VRBench_eval.jsonl"
HUB_ANNOTATIONS = [ANNOTATIONS]
# The split zip of the 360p videos (`lmms-vr prepare` assembles and extracts it).
HUB_MEDIA_PATTERNS = ["*v001_360p.z*"]
ZIP_FOLDER = "v001_360p"

VIDEO_FIELDS = ("video_id", "video_path", "video_summary", "mcq")
QUESTION_FIELDS = ("question", "options", "answer", "original_answer", "reasoning_process", "reasoning_type")


def load_records(path: Path | None = None) -> list[dict]:
    """The per-video records of `VRBench_eval.jsonl` (local root, else the Hub)."""
    path = Path(path) if path is not None else annotation_file(VRBENCH, ANNOTATIONS)
    records = read_json(path)
    if not isinstance(records, list):
        raise DataError(f"{path}: expected one JSON object per line (JSON Lines)")
    first_line: dict[str, int] = {}
    for number, record in enumerate(records, 1):
        require_fields(record, VIDEO_FIELDS, f"{path.name} line {number}")
        # A repeated video would repeat its ~9 questions under the same ids (counted twice).
        video_id = str(record["video_id"])
        if video_id in first_line:
            raise DataError(f"{path}: video {video_id} has a second record at line {number} (first at line "
                            f"{first_line[video_id]}); keep one record per video")
        first_line[video_id] = number
    return records


def records_at(root: Path, split: str | None = None) -> list[dict]:
    """The records of a local copy at `root` (for `lmms-vr prepare`; VRBench has one split)."""
    return load_records(Path(root) / ANNOTATIONS)


def _options(options: Any, where: str) -> list[list[str]]:
    """Options as `[[letter, text], ...]` in the record's order (Arrow needs fixed keys)."""
    if not isinstance(options, dict) or not options:
        raise DataError(f"{where}: 'options' must be a non-empty object of letter -> text")
    return [[str(letter), str(text)] for letter, text in options.items()]


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
    """One document per question, id `"{video_id}_{qa_key}"` (the official question id).

    Each document carries what inference and scoring need: the question and its options, the
    gold letter, the open-ended reference answer, the reference steps (formatted as the
    official judge sees them), the reasoning type and the video's summary and path.
    """
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
            options = _options(qa["options"], where)
            if qa["answer"] not in dict(options):
                raise DataError(f"{where}: answer {qa['answer']!r} is not one of the option letters {[o[0] for o in options]}")
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


def video_candidates(video_path: str) -> list[str]:
    """Relative paths where a record's video may sit, most specific first (see module doc)."""
    parts = PurePosixPath(video_path.replace("\\", "/")).parts
    candidates = ["/".join(parts[k:]) for k in range(len(parts))]
    candidates.insert(len(candidates) - 1, f"{ZIP_FOLDER}/{parts[-1]}")
    return list(dict.fromkeys(candidates))


def video_relpath(video_path: str) -> str:
    """The first candidate (see `video_candidates`) present under the VRBench root, else the
    path the record gives (so errors name it)."""
    root = data_root(VRBENCH)
    return next((relpath for relpath in video_candidates(video_path) if (root / relpath).is_file()), video_path)


def resolve_video(video_path: str) -> Path:
    """Absolute path of a record's video under the VRBench root; MediaError if absent or empty."""
    return media_file(VRBENCH, video_relpath(video_path))


def resolve_checked_video(video_path: str) -> Path:
    """`resolve_video` for a video that must also decode (`utils.data.checked_video`: opens,
    has a video stream, yields a first frame; cached). MediaError naming the file and the fix."""
    return checked_video(VRBENCH, video_relpath(video_path))


def media_files(records: Iterable[dict]) -> list[str]:
    """The video paths (relative to the root) the records need, for `lmms-vr prepare`."""
    return sorted({str(record["video_path"]) for record in records})
