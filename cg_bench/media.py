"""The plugin's binding of "get the frames" for CG-Bench: `sampling.py` (frames, times,
subtitles) with the data root's media.

`PluginMedia`: frame plans from the sampler's table of the data root (`data.video_meta`: the
packaged official table, the root's own, else the file probed) checked against the file when
it is at hand (`utils.media.video.plan_frames`, the one path every benchmark's plans take),
files found under the root (`data`), frames from the exact sampler (`utils.media.video`),
and for video-native models a proxy clip of exactly the frames their own path keeps
(`utils.model_video`; `LMMS_VR_VIDEO_INPUT=path` hands over the path).
`sampling` and `outcomes` are called with `MEDIA` by the hooks and `aggregate.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.cg_bench import data
from lmms_video_reasoning.utils.core.roots import cache_home
from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.media.video import PlannedFrames, plan_frames


def clip_cache_dir() -> Path:
    return cache_home() / "cg_bench_clips"


class PluginMedia:
    """Files under the CG-Bench data root; see the module doc."""

    def plan(self, video_uid: str, plan: FramePlan, n: int, intervals: Sequence[Sequence[float]] | None = None) -> PlannedFrames:
        """The table's values while they describe the file; a video not at hand leaves them
        unchecked, as the official runner uses them (replay predictions are scored where the
        videos are not); reading the frames then fails naming the file (`frames`)."""
        meta = data.video_meta(video_uid)
        path = data.video_at(data.data_root(data.CG_BENCH), video_uid)
        return plan_frames(path, plan, n, intervals=intervals, meta={"max_frame": meta.max_frame, "fps": meta.fps})

    def subtitle_path(self, video_uid: str) -> Path | None:
        return data.subtitle_path(video_uid)

    def frames(self, video_uid: str, indices: Sequence[int]) -> list:
        from lmms_video_reasoning.utils.media import video

        return video.read_frames(data.video_path(video_uid), list(indices))

    def full_video(self, doc: dict) -> str:
        """The question's full video, checked to decode (video mode hands only the path to the model)."""
        return data.usable_video(data.video_path(doc["video_uid"]))

    def clue_video(self, doc: dict) -> str:
        """The dataset's clip (checked), else one cut from the (checked) full video."""
        clip = data.clue_clip_path(doc["qid"])
        if clip is not None:
            return data.usable_video(clip)
        from lmms_video_reasoning.utils.media import video

        return Path(video.cut_clip(self.full_video(doc), doc["clue_intervals"], clip_cache_dir()))

    def video(self, doc: dict) -> str:
        """The model's own frames in a proxy clip of the full video (clue mode: of the clue clip).
        The file is decoded either way (MediaError naming it otherwise): lmms-eval's `qwen2_vl`
        would swallow a decode error."""
        from lmms_video_reasoning.utils.lmms import model_video

        if doc["mode"] == "clue":
            return model_video.video_for_model(self.clue_video(doc))
        return model_video.video_for_model(data.video_path(doc["video_uid"]), on_broken=data.usable_video)


MEDIA = PluginMedia()

