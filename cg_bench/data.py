"""CG-Bench annotations and media on the data root: loading, validation, finding files by name.

Hugging Face dataset `CG-Bench/CG-Bench` (gated): `cgbench_mini.json` (3,000 questions, the default),
`cgbench.json` (12,129), media in `video_chunk_*.zip`, `clue_video_chunk_*.zip` and `subtitles.zip`
(complete zips since the 2025 repack, byte slices of one zip before it, as the official `unzip_hf_zip.py`
reads them). `lmms-vr prepare` extracts them into `cg_videos_720p/`, `cg_clue_videos/` (clue clips, not
for every question) and `cg_subtitles/` (not every video has subtitles). The resolvers, shared by the tasks
and `prepare`'s check, look there, else for the file of that name under the root (`utils/data/media_index.py`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from lmms_video_reasoning.utils.data import bench_records, media_index
from lmms_video_reasoning.utils.data.bench_records import annotation_at, resolvers, videos_kind
from lmms_video_reasoning.utils.media import subtitles
from lmms_video_reasoning.utils.core.roots import DataError, DataSource, data_root, read_json, require_media, video_problem
from lmms_video_reasoning.cg_bench.docs import SPLIT_FILES, VideoMeta, meta_table, validate_records

# The Hugging Face dataset and the root variable (`lmms-vr prepare cg_bench`).
CG_BENCH = SOURCE = DataSource("cg_bench", "CG-Bench/CG-Bench", "CGBENCH_ROOT")

# The release's size: (questions, videos) per split, checked by `lmms-vr prepare`.
RELEASE = {"mini": (3000, 1118), "full": (12129, 1219)}
HUB_ANNOTATIONS = (SPLIT_FILES["mini"], SPLIT_FILES["full"])
# allow_patterns for huggingface_hub.snapshot_download
HUB_MEDIA_PATTERNS = ("video_chunk_*.zip", "clue_video_chunk_*.zip", "subtitles.zip")

VIDEO_DIR, CLUE_DIR, SUBTITLE_DIR = "cg_videos_720p", "cg_clue_videos", "cg_subtitles"
release_counts = partial(bench_records.release_counts, video_key="video_uid")


def records_at(root: Path | None = None, split: str = "mini") -> list[dict]:
    """The validated records of a split (`mini` = cgbench_mini.json, `full` = cgbench.json) under `root`
    (`lmms-vr prepare`), else under the data root (or the Hub)."""
    if split not in SPLIT_FILES:
        raise DataError(f"CG-Bench split {split!r} unknown; use one of {sorted(SPLIT_FILES)}")
    path = annotation_at(CG_BENCH, root, SPLIT_FILES[split])
    return validate_records(read_json(path), str(path))


def video_meta(video_uid: str) -> VideoMeta:
    """The sampler's meta of one video: the tables (`meta_table`), else probed from the file."""
    table = meta_table(data_root(CG_BENCH))
    if video_uid in table:
        return table[video_uid]
    from lmms_video_reasoning.utils.media.frame_table import probe

    info = probe(video_path(video_uid))
    # the official table's max_frame is the last frame's index (frame count - 1; e.g. JuBBIJ7adjM:
    # 1172.538 s x 29.97 fps = 35,141 frames, max_frame 35,140)
    return VideoMeta(float(info.duration), max(1, int(info.total_frames) - 1), float(info.fps))


# --- Media
def _in_clue_folder(parts) -> bool:
    return any("clue" in part.lower() for part in parts[:-1])


def video_at(root: Path, video_uid: str) -> Path | None:
    """The full video of `video_uid` under `root` (any folder but a clue folder), or None."""
    rel = media_index.inside_root(f"{VIDEO_DIR}/{video_uid}.mp4", f"CG-Bench video_uid {video_uid!r}")
    return media_index.locate(root, rel, [rel], lambda parts: not _in_clue_folder(parts), "CG-Bench video")


def clue_clip_at(root: Path, qid: int | str) -> Path | None:
    """The dataset's pre-cut clue clip of question `qid` (only in a `*clue*` folder), or None."""
    rel = media_index.inside_root(f"{CLUE_DIR}/{qid}.mp4", f"CG-Bench qid {qid!r}")
    return media_index.locate(root, rel, [rel], _in_clue_folder, "CG-Bench clue clip")


def subtitle_at(root: Path, video_uid: str) -> Path | None:
    """The SRT of `video_uid` under `root` (any folder), or None."""
    rel = media_index.inside_root(f"{SUBTITLE_DIR}/{video_uid}.srt", f"CG-Bench video_uid {video_uid!r}")
    return media_index.locate(root, rel, [rel], None, "CG-Bench subtitles")


def video_path(video_uid: str) -> Path:
    """The full video of `video_uid`; raises MediaError naming the file, variable and command."""
    return require_media(CG_BENCH, video_at(data_root(CG_BENCH), video_uid), f"CG-Bench video {VIDEO_DIR}/{video_uid}.mp4")


def media_kinds(root: Path, records: list[dict]) -> list[media_index.MediaKind]:
    """What `lmms-vr prepare` checks (the tasks' own resolvers), and what the tasks do about gaps."""
    videos = resolvers(records, lambda r: f"{VIDEO_DIR}/{r['video_uid']}.mp4", lambda r: video_at(root, r["video_uid"]))
    clips = resolvers(records, lambda r: f"{CLUE_DIR}/{r['qid']}.mp4", lambda r: clue_clip_at(root, r["qid"]))
    subs = resolvers(records, lambda r: f"{SUBTITLE_DIR}/{r['video_uid']}.srt", lambda r: subtitle_at(root, r["video_uid"]))
    return [videos_kind(videos),
            media_index.MediaKind("clue clips", False, clips, video_problem, "clip cut from the full video",
                                  "error in clue mode (video): delete it so a clip is cut from the full video", unusable_fails=True),
            media_index.MediaKind("subtitles", False, subs, subtitles.srt_problem, "prompt without subtitles (not every video has them)",
                                  "prompt without subtitles, counted in the run's subtitles_unusable", list_missing=True)]


def extraction_target(archive: str, member: str) -> str | None:
    """Where `lmms-vr prepare` puts a member of a CG-Bench archive, by its name, whatever its nesting (None: skipped);
    a video in a `*clue*` folder or of a `clue_*` archive is a clue clip."""
    parts = member.split("/")
    name, lower = parts[-1], parts[-1].lower()
    if lower.endswith(".srt"):
        return f"{SUBTITLE_DIR}/{name}"
    if not lower.endswith(".mp4"):
        return None
    clue = _in_clue_folder(parts) or archive.rsplit("/", 1)[-1].lower().startswith("clue")
    return f"{CLUE_DIR if clue else VIDEO_DIR}/{name}"
