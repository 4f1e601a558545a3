"""VCR-Bench annotations -> task documents, and where the media live.

The Hugging Face dataset `VLM-Reasoning/VCR-Bench` kept as is under `VCR_BENCH_ROOT` (README.md, "Data"):
`v1/videos/meta_info_video.json` and `v1/videos/video.zip`, which `lmms-vr prepare` extracts into `v1/videos/`.
`video_at`, the one resolver of the tasks and of `prepare`'s check: the canonical path, else the file of that
name sharing most of the record's folders (`media_index.locate`); a path leaving the root is refused.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from lmms_video_reasoning.utils.data import bench_records, media_index
from lmms_video_reasoning.utils.data.bench_records import annotation_at, resolvers, videos_kind
from lmms_video_reasoning.utils.core.roots import DataSource, data_root, read_json, require_media
from lmms_video_reasoning.vcr_bench.docs import ANNOTATION, VIDEO_DIR, records_to_docs

VCR_BENCH = SOURCE = DataSource("vcr_bench", "VLM-Reasoning/VCR-Bench", "VCR_BENCH_ROOT")
# The release's size (paper, Hub card): (questions, videos) per split, checked by `lmms-vr prepare`.
RELEASE = {"all": (1034, 859)}

# What `lmms-vr prepare vcr_bench` fetches (huggingface_hub allow_patterns)
HUB_ANNOTATIONS = [ANNOTATION]
HUB_MEDIA_PATTERNS = [f"{VIDEO_DIR}/video.zip*", f"{VIDEO_DIR}/video/**"]


def records_at(root: Path | None = None, split: str | None = None) -> list[dict]:
    """The documents under `root` (`lmms-vr prepare`; one split), else under the data root (or the Hub)."""
    path = annotation_at(VCR_BENCH, root, ANNOTATION)
    return records_to_docs(read_json(path), str(path))


# (questions, videos) of `records_at`'s documents
release_counts = partial(bench_records.release_counts, video_key="video_path")


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


def media_kinds(root: Path, records: list[dict]) -> list[media_index.MediaKind]:
    """What `lmms-vr prepare` checks, with the resolver the tasks use."""
    return [videos_kind(resolvers(records, lambda doc: f"{VIDEO_DIR}/{doc['video_path']}",
                                  lambda doc: video_at(root, doc["video_path"], _where(doc))))]


def extraction_target(archive: str, member: str) -> str | None:
    """Where `lmms-vr prepare` puts an archive member: `video/<source>/<name>` under `v1/videos/` (the
    `video/` folder added when missing); folders and hidden or macOS metadata entries are skipped."""
    parts = member.split("/")
    if not parts[-1] or any(part.startswith(".") or part == "__MACOSX" for part in parts):
        return None
    return "/".join([VIDEO_DIR, *(parts[parts.index("video"):] if "video" in parts[:-1] else ["video", *parts])])
