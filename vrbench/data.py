"""VRBench annotations and videos: load `VRBench_eval.jsonl` (one line per video), find videos.

Layout (Hugging Face dataset `OpenGVLab/VRBench`, or a local copy under `$VRBENCH_ROOT`): the
annotation file at the root and each record's `video_path`, `VRBench/videos/v001/<id>.mp4`. The Hub's
videos are an Info-ZIP split set in `v001_360p_zips/` (`v001_360p.z01`..`.z39` + `.zip`, ~421 GB) of
unverified inner nesting; `lmms-vr prepare` streams every `.mp4` member into `VRBench/videos/v001/`.
`video_at`, the one resolver of the tasks and of `prepare`'s check, tries the record's path, then that
folder, else the file of that name anywhere under the root (sharing most of the record's folders
wins), so a copy extracted by other means works too. A record path leaving the root is refused; a
missing file is an error naming the path, the variable and the command that fetches the data.
"""

from __future__ import annotations

from pathlib import Path

from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.core.data_errors import require_fields
from lmms_video_reasoning.utils.core.roots import DataError, DataSource, data_root, read_json, require_media
from lmms_video_reasoning.utils.data.bench_records import annotation_at, resolvers, videos_kind
from lmms_video_reasoning.vrbench.docs import ANNOTATIONS, VIDEO_FIELDS, VIDEO_FOLDER

# The Hugging Face dataset and the root variable (`lmms-vr prepare vrbench`).
VRBENCH = SOURCE = DataSource("vrbench", "OpenGVLab/VRBench", "VRBENCH_ROOT")
# The release's size (VRBench_eval.jsonl, one line per video): (questions, videos), checked by `lmms-vr prepare`.
RELEASE = {"all": (8243, 960)}

HUB_ANNOTATIONS = [ANNOTATIONS]
# The split zip of the 360p videos (Hub folder v001_360p_zips/; `lmms-vr prepare` streams it).
HUB_MEDIA_PATTERNS = ["v001_360p_zips/v001_360p.z*", "v001_360p.z*"]


def records_in(path: Path) -> list[dict]:
    """The validated per-video records of an annotation file (`VRBench_eval.jsonl`, one line per video)."""
    records = read_json(path)  # JSON Lines: a list of objects
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


def records_at(root: Path | None = None, split: str | None = None) -> list[dict]:
    """The records under `root` (`lmms-vr prepare`; VRBench has one split), else under the data root (or the Hub)."""
    return records_in(annotation_at(VRBENCH, root, ANNOTATIONS))


def release_counts(records: list[dict]) -> tuple[int, int]:
    """(questions, videos) of `records_at`'s per-video records."""
    return sum(len(r["mcq"]) if isinstance(r.get("mcq"), dict) else 0 for r in records), len(records)


def video_at(root: Path, video_path: str, where: str = "VRBench record") -> Path | None:
    """The video a record's `video_path` names under `root`, or None (see the module doc)."""
    rel = media_index.inside_root(video_path, where)
    return media_index.locate(root, rel, canonical=[rel, f"{VIDEO_FOLDER}/{rel.rsplit('/', 1)[-1]}"], what="VRBench video")


def resolve_video(video_path: str) -> Path:
    """Absolute path of a record's video under the VRBench root; MediaError if absent or empty."""
    path = video_at(data_root(VRBENCH), video_path)
    return require_media(VRBENCH, path, f"VRBench video {video_path}")


def media_kinds(root: Path, records: list[dict]) -> list[media_index.MediaKind]:
    """What `lmms-vr prepare` checks, with the resolver the tasks use."""
    return [videos_kind(resolvers(records, lambda record: str(record["video_path"]),
                                  lambda record: video_at(root, str(record["video_path"]), f"VRBench video {record.get('video_id')}")))]


def extraction_target(archive: str, member: str) -> str | None:
    """Where `lmms-vr prepare` puts an archive member: every `.mp4` into `VRBench/videos/v001/`
    by its name, whatever the archive's nesting; other files are skipped."""
    name = member.rsplit("/", 1)[-1]
    return f"{VIDEO_FOLDER}/{name}" if name.lower().endswith(".mp4") else None
