"""The plugin's binding of "get the frames" for VRBench (`task.Media`): videos under the data
root (`data.resolve_video`), frame plans from the container (`utils.media.video.plan_frames`,
the one path every benchmark's plans take), frames from the exact sampler, and for video-native
models a proxy clip (`utils.lmms.model_video`) of the protocol frames or of the model's own frames."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.media import video
from lmms_video_reasoning.vrbench import data


class PluginMedia:
    """Videos under the data root, frames from the exact sampler, and for video-native models a
    proxy clip (`utils.model_video`) of the protocol frames or of the model's own frames. The
    file is decoded either way: lmms-eval's qwen2_vl would log a decode error and answer from
    the text alone."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> video.PlannedFrames:
        return video.plan_frames(data.resolve_video(doc["video_path"]), plan, n)

    def frames(self, doc: dict, indices: Sequence[int], size: tuple[int, int] | None = None) -> list:
        return video.read_frames(data.resolve_video(doc["video_path"]), list(indices), size=size)

    def video(self, doc: dict, pick: Callable[[int], list[int]] | None = None, size: tuple[int, int] | None = None) -> str:
        from lmms_video_reasoning.utils.lmms import model_video

        path = data.resolve_video(doc["video_path"])
        checked = lambda _path: data.resolve_checked_video(doc["video_path"])  # noqa: E731 - names the fix on failure
        if pick is None:
            return model_video.video_for_model(path, on_broken=checked)
        return model_video.video_for_model(path, frames=pick, size=size, on_broken=checked)


MEDIA = PluginMedia()
