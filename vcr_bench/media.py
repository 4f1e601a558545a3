"""The plugin's binding of "get the frames" for VCR-Bench (`task.Media`): videos under the data
root (`data.video_file`), frame plans from the container (`utils.media.video.plan_frames`, the
one path every benchmark's plans take), frames from the exact sampler, and the proxy clip of the
model's own frames for video-native models (`utils.lmms.model_video`)."""

from __future__ import annotations

from collections.abc import Sequence

from lmms_video_reasoning.utils.lmms import model_video
from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.media import video
from lmms_video_reasoning.vcr_bench import data


class PluginMedia:
    """Videos under the data root (`data.video_file`), frame plans from the container
    (`video.plan_frames`, the one path every benchmark's plans take), frames from the exact
    sampler, and the proxy clip of the model's own frames for video-native models."""

    def plan(self, doc: dict, plan: FramePlan, n: int) -> video.PlannedFrames:
        return video.plan_frames(data.video_file(doc), plan, n)

    def frames(self, doc: dict, indices: Sequence[int]) -> list:
        return list(video.read_frames(data.video_file(doc), list(indices)))

    def video(self, doc: dict) -> str:
        # The model's own frames in a proxy clip (utils.model_video; `LMMS_VR_VIDEO_INPUT=path`
        # hands over the path). Either way the file is decoded here first: native-video models
        # swallow a decode error and answer from the text alone, so a broken file fails here.
        return model_video.video_for_model(data.video_file(doc), on_broken=lambda _path: data.checked_video_file(doc))


MEDIA = PluginMedia()
