"""VCR-Bench annotations -> task documents, and where the media live.

Layout of the Hugging Face dataset `VLM-Reasoning/VCR-Bench` (README.md, "Data"), kept as is
under a local root (`VCR_BENCH_ROOT`): `v1/videos/meta_info_video.json` (a JSON list of
records) and `v1/videos/video.zip`, whose members `video/<source>/<name>.mp4` `lmms-vr prepare`
extracts into `v1/videos/` (the canonical place: a record's `video_path` is relative to
`v1/videos/`). `video_at` is the one resolver of the tasks and of `prepare`'s check: the
canonical path first, else the file of that name sharing most of the record's folders
(`utils.media_index.locate`), wherever another unzip put it; a path that leaves the root
(`..`, absolute) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.core.roots import (
    DataError,
    DataSource,
    annotation_file,
    data_root,
    read_json,
    require_fields,
    require_media,
    usable_video,
    video_problem,
)

# The Hugging Face dataset and the root variable (`lmms-vr prepare vcr_bench`).
VCR_BENCH = SOURCE = DataSource("vcr_bench", "VLM-Reasoning/VCR-Bench", "VCR_BENCH_ROOT")
# The release's size (paper, Hub card): (questions, videos) per split, checked by `lmms-vr prepare`.
RELEASE = {"all": (1034, 859)}

VIDEO_DIR = "v1/videos"
ANNOTATION = f"{VIDEO_DIR}/meta_info_video.json"

# What `lmms-vr prepare vcr_bench` fetches (huggingface_hub allow_patterns).
HUB_ANNOTATIONS = [ANNOTATION]
HUB_MEDIA_PATTERNS = [f"{VIDEO_DIR}/video.zip*", f"{VIDEO_DIR}/video/**"]

# The seven dimensions (paper Sec. 2.1.1) and the codes that name their metrics.
DIMENSIONS = {
    "Fundamental Temporal Reasoning": "ftr",
    "Video Temporal Counting": "vtc",
    "Video Temporal Grounding": "vtg",
    "Video Knowledge Reasoning": "vkr",
    "Temporal Spatial Reasoning": "tsr",
    "Video Plot Analysis": "vpa",
    "Temporal Spatial Grounding": "tsg",
}
# Duration buckets (paper Table 1): short <= 60 s, medium <= 300 s, long > 300 s.
SHORT_MAX_S, MEDIUM_MAX_S = 60, 300

RECORD_FIELDS = ("id", "video_path", "duration", "dimension", "question", "multiple-choice", "answer", "reasoning")


def dimension_code(name: str, where: str) -> str:
    """The code of a dimension name, matched case- and space-insensitively; DataError if unknown."""
    wanted = " ".join(str(name).split()).lower()
    for full, code in DIMENSIONS.items():
        if full.lower() == wanted or code == wanted:
            return code
    raise DataError(f"{where}: unknown dimension {name!r}; expected one of {list(DIMENSIONS)}")


def duration_bucket(duration_s: float) -> str:
    """'short' (<= 60 s), 'medium' (<= 300 s) or 'long' (README.md, "How scoring runs")."""
    if duration_s <= SHORT_MAX_S:
        return "short"
    return "medium" if duration_s <= MEDIUM_MAX_S else "long"


def record_to_doc(record: dict, where: str) -> dict:
    """Validate one official record and turn it into a task document (Arrow-friendly types)."""
    require_fields(record, RECORD_FIELDS, where)
    if isinstance(record["id"], bool) or not isinstance(record["id"], (int, str)) or not str(record["id"]).strip().isdigit():
        raise DataError(f"{where}: 'id' must be an integer, got {record['id']!r}")
    for name in ("video_path", "question"):
        if not isinstance(record[name], str) or not record[name].strip():
            raise DataError(f"{where}: '{name}' must be a non-empty string, got {record[name]!r}")
    if isinstance(record["duration"], bool) or not isinstance(record["duration"], (int, float)) or record["duration"] < 0:
        raise DataError(f"{where}: 'duration' must be a number of seconds, got {record['duration']!r}")
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
    code = dimension_code(record["dimension"], where)
    return {
        "sample_id": str(int(record["id"])),
        "id": int(record["id"]),
        "video_path": record["video_path"],
        "duration": float(record["duration"]),
        "dimension": next(full for full, c in DIMENSIONS.items() if c == code),
        "dimension_code": code,
        "question": record["question"],
        "multiple_choice": record["multiple-choice"],
        "choices": json.dumps(choices, ensure_ascii=False),  # variable keys: stored as JSON text
        "answer": str(record["answer"]),
        "reasoning": list(steps),
    }


def records_to_docs(records, source: str) -> list[dict]:
    """Documents for every record of an annotation list; DataError naming a bad record."""
    if not isinstance(records, list):
        raise DataError(f"{source}: expected a JSON list of VCR-Bench records, got {type(records).__name__}")
    docs = []
    seen: set[str] = set()
    for index, record in enumerate(records):
        rid = record.get("id", "?") if isinstance(record, dict) else "?"
        doc = record_to_doc(record, f"VCR-Bench record #{index} (id={rid}) in {source}")
        if doc["sample_id"] in seen:
            raise DataError(f"VCR-Bench record #{index} in {source}: duplicate id {doc['id']}")
        seen.add(doc["sample_id"])
        docs.append(doc)
    return docs


def load_records() -> list[dict]:
    """All task documents from the annotation file under the data root (or the Hub)."""
    path = annotation_file(VCR_BENCH, ANNOTATION)
    return records_to_docs(read_json(path), str(path))


def records_at(root: Path, split: str | None = None) -> list[dict]:
    """The documents of a local copy at `root` (for `lmms-vr prepare`; VCR-Bench has one split)."""
    path = Path(root) / ANNOTATION
    return records_to_docs(read_json(path), str(path))


def release_counts(records: list[dict]) -> tuple[int, int]:
    """(questions, videos) of `records_at`'s documents."""
    return len(records), len({doc["video_path"] for doc in records})


def video_at(root: Path, video_path: str, where: str = "VCR-Bench record") -> Path | None:
    """The video a record's `video_path` names under `root`, or None (see the module doc)."""
    rel = media_index.inside_root(video_path, where)
    return media_index.locate(root, rel, canonical=[f"{VIDEO_DIR}/{rel}"], what="VCR-Bench video")


def _where(doc: dict) -> str:
    return f"VCR-Bench record id={doc.get('id')}"


def video_file(doc: dict) -> Path:
    """The document's video under the data root; MediaError naming the file and the fix."""
    path = video_at(data_root(VCR_BENCH), doc["video_path"], _where(doc))
    return require_media(VCR_BENCH, path, f"VCR-Bench video {VIDEO_DIR}/{doc['video_path']}")


def checked_video_file(doc: dict) -> Path:
    """`video_file`, opened once (cached) to check it has a video stream and a first frame;
    MediaError naming the file and the fix (for models that are handed only the path)."""
    return usable_video(VCR_BENCH, video_file(doc))


def media_files(records) -> list[str]:
    """Root-relative canonical paths of the videos the records need."""
    return sorted({f"{VIDEO_DIR}/{record['video_path']}" for record in records})


def media_kinds(root: Path, records: list[dict]) -> list[media_index.MediaKind]:
    """What `lmms-vr prepare` checks, with the resolver the tasks use."""
    items = {}
    for doc in records:
        items.setdefault(f"{VIDEO_DIR}/{doc['video_path']}", (lambda d=doc: video_at(root, d["video_path"], _where(d))))
    return [media_index.MediaKind("videos", True, items, video_problem, "error: the question cannot run",
                                  "error: the question cannot run")]


def extraction_target(archive: str, member: str) -> str | None:
    """Where `lmms-vr prepare` puts an archive member: `video.zip`'s `video/<source>/<name>` under
    `v1/videos/` (members without the `video/` folder get it); folders and hidden or macOS
    metadata entries are skipped."""
    parts = member.split("/")
    if not parts[-1] or any(part.startswith(".") or part == "__MACOSX" for part in parts):
        return None
    if "video" in parts[:-1]:
        parts = parts[parts.index("video"):]
    else:
        parts = ["video", *parts]
    return "/".join([VIDEO_DIR, *parts])
