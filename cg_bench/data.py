"""CG-Bench annotations and media: loading, validation, and finding files by name.

Layout of the Hugging Face dataset `CG-Bench/CG-Bench` (and of a local `$CGBENCH_ROOT`):
`cgbench_mini.json` (3,000 questions, the default), `cgbench.json` (12,129),
`video_meta_info.json` (duration, `max_frame`, fps per video: the official sampler's input),
`cg_videos_720p/{video_uid}.mp4`, `cg_clue_videos/{qid}.mp4` (pre-cut clue clips, not for
every question) and `cg_subtitles/{video_uid}.srt` (not every video has subtitles). On the
Hub the media come as split zips (`video_chunk_*.zip`, `clue_video_chunk_*.zip`,
`subtitles.zip`) whose folder nesting was repacked over time, so media are looked up by
file name anywhere under the root (an index built once per root and process).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from lmms_video_reasoning.utils.data import (
    CG_BENCH,
    DataError,
    MediaError,
    annotation_file,
    data_root,
    read_json,
    require_fields,
    usable_video as shared_usable_video,
)

SPLIT_FILES = {"mini": "cgbench_mini.json", "full": "cgbench.json"}
META_FILE = "video_meta_info.json"
HUB_ANNOTATIONS = (SPLIT_FILES["mini"], SPLIT_FILES["full"], META_FILE)
# allow_patterns for huggingface_hub.snapshot_download: the split zips of the media
# (concatenate the chunks in chunk order, then unzip; see the official unzip_hf_zip.py).
HUB_MEDIA_PATTERNS = ("video_chunk_*.zip", "clue_video_chunk_*.zip", "subtitles.zip")

VIDEO_DIR, CLUE_DIR, SUBTITLE_DIR = "cg_videos_720p", "cg_clue_videos", "cg_subtitles"
FIELDS = ("qid", "video_uid", "question", "answer", "choices", "right_answer", "clue_intervals", "domain", "sub_category", "duration")
MAX_CHOICES = 8  # letters A..H


# ---------------------------------------------------------------------- annotations


def validate_record(record: Any, where: str) -> dict:
    """Check one annotation record against the official schema; return it normalised.

    Normalised: `qid` int, `choices` list of str, `clue_intervals` list of [float, float],
    `duration` int. Raises DataError naming the record and the field.
    """
    require_fields(record, FIELDS, where)
    where = f"{where} (qid {record.get('qid')!r})"

    def fail(message: str):
        raise DataError(f"{where}: {message}")

    if not isinstance(record["qid"], int) or isinstance(record["qid"], bool):
        fail(f"qid must be an integer, got {record['qid']!r}")
    for name in ("video_uid", "question", "answer", "right_answer", "domain", "sub_category"):
        if not isinstance(record[name], str) or not record[name]:
            fail(f"{name} must be a non-empty string, got {record[name]!r}")
    choices = record["choices"]
    if not isinstance(choices, list) or not 2 <= len(choices) <= MAX_CHOICES or not all(isinstance(c, str) for c in choices):
        fail(f"choices must be a list of 2 to {MAX_CHOICES} strings, got {choices!r}")
    letter = record["right_answer"]
    if len(letter) != 1 or not "A" <= letter < chr(ord("A") + len(choices)):
        fail(f"right_answer {letter!r} is not one of the {len(choices)} option letters")
    intervals = record["clue_intervals"]
    if not isinstance(intervals, list) or not intervals:
        fail(f"clue_intervals must be a non-empty list of [start, end], got {intervals!r}")
    clean = []
    for interval in intervals:
        if (not isinstance(interval, (list, tuple)) or len(interval) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in interval)
                or interval[0] > interval[1] or interval[0] < 0):
            fail(f"clue interval {interval!r} is not [start, end] seconds with 0 <= start <= end")
        clean.append([float(interval[0]), float(interval[1])])
    if not isinstance(record["duration"], (int, float)) or record["duration"] <= 0:
        fail(f"duration must be a positive number of seconds, got {record['duration']!r}")
    return {**record, "choices": list(choices), "clue_intervals": clean, "duration": int(record["duration"])}


def split_file(split: str) -> str:
    if split not in SPLIT_FILES:
        raise DataError(f"CG-Bench split {split!r} unknown; use one of {sorted(SPLIT_FILES)}")
    return SPLIT_FILES[split]


def load_records(split: str = "mini") -> list[dict]:
    """The validated annotation records of a split (`mini` = cgbench_mini.json, `full` = cgbench.json)."""
    path = annotation_file(CG_BENCH, split_file(split))
    return validate_records(read_json(path), str(path))


def validate_records(records: Any, where: str) -> list[dict]:
    """Validate a whole annotation file: a list of records with unique qids."""
    if not isinstance(records, list) or not records:
        raise DataError(f"{where}: expected a non-empty JSON list of question records")
    clean = [validate_record(record, f"{where} record #{index}") for index, record in enumerate(records)]
    seen: set[int] = set()
    for record in clean:
        if record["qid"] in seen:
            raise DataError(f"{where}: qid {record['qid']} appears more than once")
        seen.add(record["qid"])
    return clean


@dataclass(frozen=True)
class VideoMeta:
    """What the official sampler knows about a video (`video_meta_info.json`)."""

    duration: float
    max_frame: int
    fps: float


_meta_lock = threading.Lock()
_meta_cache: dict[str, dict[str, VideoMeta]] = {}


def video_meta_table() -> dict[str, VideoMeta]:
    """`video_meta_info.json` of the current root as {video_uid: VideoMeta} (cached per root)."""
    path = annotation_file(CG_BENCH, META_FILE)
    key = str(path)
    with _meta_lock:
        if key not in _meta_cache:
            raw = read_json(path)
            if not isinstance(raw, dict):
                raise DataError(f"{path}: expected a JSON object {{video_uid: {{duration, max_frame, fps}}}}")
            table = {}
            for uid, entry in raw.items():
                require_fields(entry, ("max_frame", "fps"), f"{path} entry {uid!r}")
                if not entry["fps"] or entry["fps"] <= 0 or entry["max_frame"] <= 0:
                    raise DataError(f"{path} entry {uid!r}: fps and max_frame must be positive, got {entry}")
                table[uid] = VideoMeta(float(entry.get("duration") or entry["max_frame"] / entry["fps"]), int(entry["max_frame"]), float(entry["fps"]))
            _meta_cache[key] = table
        return _meta_cache[key]


def video_meta(video_uid: str) -> VideoMeta:
    """The sampler's meta of one video: `video_meta_info.json`, else probed from the file."""
    table = video_meta_table()
    if video_uid in table:
        return table[video_uid]
    from lmms_video_reasoning.utils import video

    info = video.probe(video_path(video_uid))
    return VideoMeta(float(info.duration), int(info.total_frames), float(info.fps))


# ---------------------------------------------------------------------- media


_index_lock = threading.Lock()
_indexes: dict[str, dict[tuple[str, str], Path]] = {}


def _kind_of(relparts: Sequence[str]) -> str | None:
    """Which media folder a file sits in, by its folder names (`cg_clue_videos_1/...` counts)."""
    for part in relparts[:-1]:
        if part.startswith(CLUE_DIR):
            return CLUE_DIR
        if part.startswith(SUBTITLE_DIR):
            return SUBTITLE_DIR
        if part.startswith("cg_videos"):
            return VIDEO_DIR
    return None


def media_index(root: Path) -> dict[tuple[str, str], Path]:
    """{(media folder, file name): path} for every .mp4 / .srt under `root` (built once per root)."""
    key = str(Path(root).resolve())
    with _index_lock:
        if key not in _indexes:
            index: dict[tuple[str, str], Path] = {}
            for folder, _dirs, files in os.walk(key):
                relparts = Path(folder).relative_to(key).parts
                for name in files:
                    if name.endswith((".mp4", ".srt")):
                        kind = _kind_of((*relparts, name))
                        if kind is not None:
                            index.setdefault((kind, name), Path(folder) / name)
            _indexes[key] = index
        return _indexes[key]


def clear_media_index() -> None:
    """Forget the media indexes (after files were added under a root)."""
    with _index_lock:
        _indexes.clear()


def find_media(kind: str, name: str) -> Path | None:
    """Path of `<kind>/<name>` under the root: the official place first, else by name anywhere."""
    root = data_root(CG_BENCH)
    direct = root / kind / name
    if direct.is_file():
        return direct
    return media_index(root).get((kind, name))


def _require(path: Path | None, relpath: str) -> Path:
    if path is None:
        root = data_root(CG_BENCH)
        raise MediaError(
            f"CG-Bench media file {relpath} not found under {root} (searched by name in every folder). "
            f"Set {CG_BENCH.root_env} to your copy of {CG_BENCH.hub_repo}, or fetch it with `{CG_BENCH.prepare_command}`"
        )
    if path.stat().st_size == 0:
        raise MediaError(f"CG-Bench media file is empty: {path}. Re-download it with `{CG_BENCH.prepare_command}`")
    return path


def video_path(video_uid: str) -> Path:
    """The full video of `video_uid`; raises MediaError naming the file, variable and command."""
    return _require(find_media(VIDEO_DIR, f"{video_uid}.mp4"), f"{VIDEO_DIR}/{video_uid}.mp4")


def usable_video(path: Path) -> Path:
    """`path` if it opens and decodes, else MediaError naming the file and the fix
    (`utils.data.usable_video`; for the video mode, where the model only gets the path)."""
    return shared_usable_video(CG_BENCH, path)


def clue_clip_path(qid: int) -> Path | None:
    """The dataset's pre-cut clue clip of a question, or None (not every question has one)."""
    return find_media(CLUE_DIR, f"{qid}.mp4")


def subtitle_path(video_uid: str) -> Path | None:
    """The SRT of a video, or None (not every video has subtitles)."""
    return find_media(SUBTITLE_DIR, f"{video_uid}.srt")


def media_files(records: Iterable[dict]) -> list[str]:
    """Relative paths of the media every record needs: the full videos (what `lmms-vr prepare` verifies).

    Clue clips and subtitles exist only for some questions / videos; see `optional_media_files`.
    """
    return list(dict.fromkeys(f"{VIDEO_DIR}/{record['video_uid']}.mp4" for record in records))


def optional_media_files(records: Iterable[dict]) -> list[str]:
    """Media used when present: the pre-cut clue clips and the subtitles (absent ones are not errors)."""
    paths: dict[str, None] = {}
    for record in records:
        paths[f"{SUBTITLE_DIR}/{record['video_uid']}.srt"] = None
        paths[f"{CLUE_DIR}/{record['qid']}.mp4"] = None
    return list(paths)


def records_at(root, split: str = "mini") -> list[dict]:
    """The validated records of a split read from a local root (for `lmms-vr prepare`)."""
    path = Path(root) / split_file(split)
    return validate_records(read_json(path), str(path))
