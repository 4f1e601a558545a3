"""Dataset repos shaped as the Hub serves the three benchmarks (docs/data.md, "What the Hub serves"),
built from the generated sample benchmark's real (tiny) videos, for `tests/fake_hub.py`.

- VCR-Bench: `v1/videos/meta_info_video.json` + `v1/videos/video.zip` (members `video/<source>/<name>.mp4`).
- VRBench: `VRBench_eval.jsonl` + an Info-ZIP split set made by `zip -s` in `v001_360p_zips/`
  (`v001_360p.z01`.. + `v001_360p.zip`), the videos nested under one of `VRBENCH_NESTINGS`.
- CG-Bench (`CG_LAYOUTS`): "new-flat" / "new-foldered" (each `video_chunk_NN.zip` /
  `clue_video_chunk_NN.zip` a complete zip; members `<uid>.mp4` or `cg_videos_720p/<uid>.mp4`),
  "old-sliced" (byte slices of one foldered zip, as the official `unzip_hf_zip.py` expects);
  `subtitles.zip` beside them; never `video_meta_info.json` (it is not on the Hub).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
from pathlib import Path

VRBENCH_NESTINGS = ("VRBench/videos/v001", "videos/v001", "v001", "v001_360p", "")
CG_LAYOUTS = ("new-flat", "new-foldered", "old-sliced")


def zip_bytes(members: dict[str, bytes | Path], method: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data.read_bytes() if isinstance(data, Path) else data)
    return buffer.getvalue()


def vcr_repo(sample: Path, extra_members: dict[str, bytes] | None = None) -> dict[str, bytes]:
    base = sample / "vcr_bench" / "v1" / "videos"
    members = {p.relative_to(base).as_posix(): p for p in sorted((base / "video").rglob("*.mp4"))}
    members.update(extra_members or {})
    return {"v1/videos/meta_info_video.json": (base / "meta_info_video.json").read_bytes(),
            "v1/videos/video.zip": zip_bytes(members)}


def vrbench_repo(sample: Path, nesting: str, work: Path) -> dict[str, bytes]:
    """The split set as Info-ZIP makes it (`zip -s 64k`), videos under `nesting`."""
    root = sample / "vrbench"
    stage = work / "stage"
    shutil.rmtree(stage, ignore_errors=True)
    folder = stage / nesting if nesting else stage
    folder.mkdir(parents=True)
    for video in sorted(root.rglob("*.mp4")):
        shutil.copy(video, folder / video.name)
    out = work / "split"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    subprocess.run(["zip", "-q", "-r", "-0", "-s", "64k", str(out / "v001_360p.zip"), "."], cwd=stage, check=True,
                   stdin=subprocess.DEVNULL)
    files = {f"v001_360p_zips/{part.name}": part.read_bytes() for part in sorted(out.iterdir())}
    assert len(files) > 2, "the split set should have several parts"
    files["VRBench_eval.jsonl"] = (root / "VRBench_eval.jsonl").read_bytes()
    return files


def _slices(data: bytes, count: int) -> list[bytes]:
    size = len(data) // count + 1
    return [data[i:i + size] for i in range(0, len(data), size)]


def cg_repo(sample: Path, layout: str) -> dict[str, bytes]:
    root = sample / "cg_bench"
    videos = sorted((root / "cg_videos_720p").glob("*.mp4"))
    clips = sorted((root / "cg_clue_videos").glob("*.mp4"))
    subtitles = sorted((root / "cg_subtitles").glob("*.srt"))
    files = {name: (root / name).read_bytes() for name in ("cgbench_mini.json", "cgbench.json")}
    if layout == "old-sliced":
        for prefix, folder, items, count in (("video", "cg_videos_720p", videos, 3), ("clue_video", "cg_clue_videos", clips, 2)):
            whole = zip_bytes({f"{folder}/{p.name}": p for p in items})
            for number, piece in enumerate(_slices(whole, count), 1):
                files[f"{prefix}_chunk_{number}.zip"] = piece
        files["subtitles.zip"] = zip_bytes({f"cg_subtitles/{p.name}": p for p in subtitles})
        return files
    folder = "" if layout == "new-flat" else "cg_videos_720p/"
    clue_folder = "" if layout == "new-flat" else "cg_clue_videos/"
    for number, start in enumerate(range(0, len(videos), 2), 1):  # two videos per chunk
        files[f"video_chunk_{number:02d}.zip"] = zip_bytes({folder + p.name: p for p in videos[start:start + 2]},
                                                           zipfile.ZIP_DEFLATED)
    for number, start in enumerate(range(0, len(clips), 8), 1):
        files[f"clue_video_chunk_{number:02d}.zip"] = zip_bytes({clue_folder + p.name: p for p in clips[start:start + 8]})
    files["subtitles.zip"] = zip_bytes({("" if layout == "new-flat" else "cg_subtitles/") + p.name: p for p in subtitles},
                                       zipfile.ZIP_DEFLATED)
    return files
