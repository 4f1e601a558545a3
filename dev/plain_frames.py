"""Get the frames, plainly: a frame count, and the frames at given presentation indices (index `i` =
the `i`-th frame the decoder yields) by one sequential PyAV decode, resized with OpenCV's bilinear
filter as the official code does. Exact for any file PyAV decodes (a keyframe-seeking sampler is faster)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from lmms_video_reasoning.utils.core.frame_plan import choose


class PlainMedia:
    """A task's `Media` for `path_of(doc)`, the document's video file: video models get the file itself
    (they sample it: `pick` and `size` are not applied)."""

    def __init__(self, path_of: Callable[[dict], str]) -> None:
        self.path_of = path_of

    def plan(self, doc, plan, n, intervals=None):
        return choose(plan, *probe(self.path_of(doc)), n, intervals)

    def frames(self, doc, indices, size=None):
        return read_frames(self.path_of(doc), indices, size)

    def video(self, doc, pick=None, size=None):
        return self.path_of(doc)


def probe(path: str | Path) -> tuple[int, float]:
    """(frame count, average fps) of a video: its packets counted (headers can be wrong)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        count = sum(1 for packet in container.demux(stream) if packet.size and not packet.is_discard)
        seconds = float(stream.duration * stream.time_base) if stream.duration else (container.duration or 0) / 1_000_000
        fps = float(stream.average_rate) if stream.average_rate else (count / seconds if seconds > 0 else 0.0)
    if count < 1 or fps <= 0:
        raise ValueError(f"{path}: no decodable video stream (frames={count}, fps={fps})")
    return count, fps


def read_frames(path: str | Path, indices: Sequence[int], size: tuple[int, int] | None = None) -> list:
    """RGB PIL images of the frames at `indices` (in the order asked, repeats allowed), decoded by
    lmms-eval's `record_video_length_stream`; `size` = (width, height) resizes them (bilinear).
    IndexError for an index past the last frame."""
    import av
    from PIL import Image

    from lmms_eval.models.model_utils.load_video import record_video_length_stream

    wanted = sorted(set(int(i) for i in indices))
    with av.open(str(path)) as container:
        container.streams.video[0].thread_type = "AUTO"
        decoded = record_video_length_stream(container, wanted) if wanted else []
        found = dict(zip(wanted, (_rgb(frame, size) for frame in decoded)))  # the frames found: a prefix of `wanted`
    if len(found) < len(wanted):
        raise IndexError(f"frame index {wanted[len(found)]} out of range for {path}")
    return [Image.fromarray(found[int(i)]) for i in indices]


def _rgb(frame, size: tuple[int, int] | None):
    array = frame.to_ndarray(format="rgb24")
    if size is not None and (array.shape[1], array.shape[0]) != tuple(size):
        import cv2

        array = cv2.resize(array, tuple(size), interpolation=cv2.INTER_LINEAR)
    return array
