"""Decode only the video frames Qwen2-VL keeps, and hand it exactly the tensor it built before.

`Qwen2_VL.generate_until` gives `qwen_vl_utils.process_vision_info` the video path:
`fetch_video` decodes it at 2 fps (4 to 768 frames) and resizes every frame, then the model
keeps at most `max_num_frames` of them (`kept_positions`). On a 20-minute video that is 768
frames decoded and resized for 32 kept.

`video_inputs_of_kept_frames` computes the same choice from the file's frame count and rate
before decoding: qwen_vl_utils' frame indices (`smart_nframes`, then `round(linspace)` over the
video), the positions the model keeps among them, and `fetch_video`'s resize target for the
number of frames it would have decoded. It decodes only the kept frames with the reader
qwen_vl_utils uses (decord) and resizes them with the same call. Where that reader is not the
one qwen_vl_utils would use, or the messages ask for something this does not reproduce, it
returns None and the model takes its usual path.

It reads qwen_vl_utils' internals (`smart_nframes`, its token-budget constants), so it runs only
with the releases it was checked against (`CHECKED_QWEN_VL_UTILS`); with another, or if any of
those internals is missing or fails, the model takes its usual path (logged once).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from loguru import logger as eval_logger

# The keys lmms-eval's Qwen2_VL puts in a video element; any other key (fps, nframes, a time
# range, a fixed size) changes what fetch_video does, and the usual path handles it.
PLAIN_VIDEO_KEYS = {"type", "video", "max_pixels", "min_pixels"}
IMAGE_PATCH_SIZE = 14  # process_vision_info's default, which Qwen2_VL uses
# qwen-vl-utils releases whose fetch_video this reproduces (their `fetch_video`, `smart_nframes`,
# `smart_resize` and constants were compared); another release takes the usual path until checked.
CHECKED_QWEN_VL_UTILS = ("0.0.13", "0.0.14")
_reported = set()  # the reasons for the usual path already logged


def kept_positions(decoded: int, max_num_frames: int) -> np.ndarray:
    """The positions Qwen2_VL keeps among `decoded` frames: evenly spaced, first and last included,
    at most `max_num_frames`, without repeats (all of them when there are fewer)."""
    return np.unique(np.linspace(0, decoded - 1, max_num_frames, dtype=int, endpoint=True))


def _is_image(element: Dict[str, Any]) -> bool:
    return "image" in element or "image_url" in element  # process_vision_info tests images first


def video_inputs_of_kept_frames(conversations: List, max_num_frames: int) -> Optional[Tuple[Optional[list], List[torch.Tensor]]]:
    """`(image_inputs, video_inputs)` as `process_vision_info` followed by Qwen2_VL's frame
    selection would give them, decoding only the kept frames; None where this does not apply
    (a qwen_vl_utils release not checked, not one plain video path in the batch, another reader,
    a file decord cannot read, a qwen_vl_utils internal renamed or failing)."""
    release = _qwen_vl_utils_version()
    if release not in CHECKED_QWEN_VL_UTILS:
        _fall_back(f"qwen-vl-utils {release} is not a release the kept-frames path was checked against ({', '.join(CHECKED_QWEN_VL_UTILS)})")
        return None
    try:
        return _video_inputs(conversations, max_num_frames)
    except Exception as error:  # the usual path reads it, or reports the error where it is one
        _fall_back(f"the kept-frames path failed ({type(error).__name__}: {error})")
        return None


def _qwen_vl_utils_version() -> Optional[str]:
    try:
        return version("qwen-vl-utils")
    except PackageNotFoundError:
        return None


def _fall_back(reason: str) -> None:
    if reason not in _reported:  # once per reason: a long evaluation would repeat it for every video
        _reported.add(reason)
        eval_logger.info(f"qwen2_vl decodes every frame qwen_vl_utils samples: {reason}")


def _video_inputs(conversations: List, max_num_frames: int) -> Optional[Tuple[Optional[list], List[torch.Tensor]]]:
    from qwen_vl_utils import vision_process

    elements = vision_process.extract_vision_info(conversations)
    videos = [element for element in elements if not _is_image(element) and "video" in element]
    # Qwen2_VL selects frames in the batch's first video only: with more, the usual path keeps its behaviour.
    if len(videos) != 1 or not isinstance(videos[0]["video"], str) or set(videos[0]) - PLAIN_VIDEO_KEYS:
        return None
    if vision_process.get_video_reader_backend() != "decord":
        return None
    video = _kept_frames(videos[0], max_num_frames, vision_process)
    images = [vision_process.fetch_image(element, image_patch_size=IMAGE_PATCH_SIZE) for element in elements if _is_image(element)]
    return images or None, [video]


def _kept_frames(element: Dict[str, Any], max_num_frames: int, vision_process) -> torch.Tensor:
    import decord
    from torchvision import transforms
    from torchvision.transforms import InterpolationMode

    reader = decord.VideoReader(element["video"])
    total, fps = len(reader), reader.get_avg_fps()
    decoded = vision_process.smart_nframes(element, total_frames=total, video_fps=fps)
    indices = torch.linspace(0, total - 1, decoded).round().long().tolist()  # what fetch_video would decode
    kept = [indices[position] for position in kept_positions(decoded, max_num_frames)]
    frames = torch.from_numpy(reader.get_batch(kept).asnumpy()).permute(0, 3, 1, 2)

    # fetch_video's resize target depends on how many frames it decoded, not on how many are kept.
    factor = IMAGE_PATCH_SIZE * vision_process.SPATIAL_MERGE_SIZE
    min_pixels = element.get("min_pixels", vision_process.VIDEO_MIN_TOKEN_NUM * factor * factor)
    total_pixels = vision_process.MODEL_SEQ_LEN * factor * factor * 0.9
    max_pixels = max(min(vision_process.VIDEO_MAX_TOKEN_NUM * factor * factor, total_pixels / decoded * vision_process.FRAME_FACTOR), int(min_pixels * 1.05))
    max_pixels = min(element.get("max_pixels", max_pixels), max_pixels)
    height, width = vision_process.smart_resize(frames.shape[2], frames.shape[3], factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return transforms.functional.resize(frames, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True).float()
