"""What a known lmms-eval video model reads from a video path: its frames, their size, and timing.

Computed from the container alone, so a proxy clip (`proxy_clips.py`) can hold exactly those frames
(see `model_video.py`). Covered: the readings in ``KNOWN_MODELS`` on the ``VERIFIED_VERSIONS``, proven by
running lmms-eval's own classes on the path and on the proxy (tests/test_model_equivalence.py); on
other versions the model gets the original path. See ``utils/media/VIDEO.md``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from lmms_video_reasoning.utils.lmms import host

logger = logging.getLogger("lmms_video_reasoning.model_video")


@dataclass(frozen=True)
class Reading:
    """How an lmms-eval model reads a video path (its constructor's settings)."""

    model: str  # a value of KNOWN_MODELS: "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_onevision", "qwen2_5_vl_chat", ...
    max_frames: int
    max_pixels: int | None = None
    min_pixels: int | None = None
    fps: float | None = None  # chat models: sample at this rate instead of a frame count
    total_pixels: int | None = None  # qwen3_vl: a pixel budget over all frames

    @property
    def timed(self) -> bool:  # the model reads the video's timing (frame indices / fps) with its frames
        return self.model in TIMED_READINGS


# These models hand qwen_vl_utils the path and pass its `video_metadata` (fps, frame indices,
# frame count) to the processor: Qwen2.5-VL's M-RoPE time step and Qwen3-VL's `<t seconds>`
# come from it, so their proxy keeps the source's frame count and rate ("timed" layout).
# lmms-eval 0.7 resolves `--model qwen2_5_vl` / `qwen3_vl` to the chat classes.
TIMED_READINGS = ("qwen2_5_vl_chat", "qwen3_vl_chat", "qwen3_vl")
_CHAT_READINGS = ("qwen2_5_vl_chat", "qwen3_vl_chat")

# lmms-eval class -> reading name; matched anywhere in a model's MRO (subclasses count; the
# chat classes subclass the simple ones, and the MRO meets the subclass first).
KNOWN_MODELS = {
    "lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL": "qwen2_5_vl_chat",
    "lmms_eval.models.chat.qwen3_vl.Qwen3_VL": "qwen3_vl_chat",
    "lmms_eval.models.simple.qwen3_vl.Qwen3_VL": "qwen3_vl",
    "lmms_eval.models.simple.qwen2_vl.Qwen2_VL": "qwen2_vl",
    "lmms_eval.models.simple.qwen2_5_vl.Qwen2_5_VL": "qwen2_5_vl",
    "lmms_eval.models.simple.llava_onevision.Llava_OneVision": "llava_onevision",
}

# The readings above are facts about these releases' code (see the module doc): any other installed
# version hands the model the original path until that test has passed on it and it is added (lmms-eval: host.VERIFIED).
VERIFIED_VERSIONS = {"lmms-eval": host.VERIFIED, "qwen-vl-utils": ("0.0.14",)}


def _packages_of(model: str) -> tuple[str, ...]:
    """The distributions whose code decides what ``model`` reads (llava_onevision: decord directly)."""
    return ("lmms-eval",) if model == "llava_onevision" else ("lmms-eval", "qwen-vl-utils")


def unverified_versions(model: str) -> list[str]:
    """``name version`` of each installed package ``model``'s reading was not verified on (empty: verified)."""
    versions = {package: host.host_version(package) or "absent" for package in _packages_of(model)}
    return [f"{package} {version}" for package, version in versions.items() if version not in VERIFIED_VERSIONS[package]]


@functools.cache
def version_verified(model: str) -> bool:
    """Whether the fast path may serve ``model`` on the installed versions (asked once per process and
    model; else one WARNING)."""
    unverified = unverified_versions(model)
    if unverified:
        verified = " + ".join(f"{name} {'/'.join(VERIFIED_VERSIONS[name])}" for name in _packages_of(model))
        logger.warning("video proxies are off for %s: installed %s, its frame selection was verified on %s only; "
                       "it reads the original video paths (run tests/test_model_equivalence.py on this version, then "
                       "add it to VERIFIED_VERSIONS in utils/lmms/model_readings.py)", model, ", ".join(unverified), verified)
    return not unverified


def qwen_reader_verified(model: str) -> bool:
    """Whether qwen_vl_utils reads videos with decord here, the reader the readings were proven
    with (it prefers torchcodec when installed, or FORCE_QWENVL_VIDEO_READER; their frame counts
    and rates come from elsewhere). llava_onevision calls decord itself."""
    if model == "llava_onevision":
        return True
    from qwen_vl_utils import vision_process

    return vision_process.get_video_reader_backend() == "decord"


def _optional_int(value) -> int | None:
    return None if value is None else int(value)


# Readings whose probe or frame selection looks only at the first video of a batch
# (``video_inputs[0]`` / ``videos[0]`` in their generate_until): with a batch size above one
# the other documents' frames depend on their batch-mates, so only batch size 1 is known.
_FIRST_VIDEO_ONLY = ("qwen2_vl", "qwen2_5_vl", "qwen2_5_vl_chat")


def known_model(model) -> str | None:
    """The ``KNOWN_MODELS`` name of ``model``'s class or nearest known base (None: a model we do not know)."""
    for cls in type(model).__mro__:
        name = KNOWN_MODELS.get(f"{cls.__module__}.{cls.__qualname__}")
        if name is not None:
            return name
    return None


def reading_of(model) -> Reading | None:
    """The ``Reading`` of an lmms-eval model instance, or None (a model or settings we do not know)."""
    name = known_model(model)
    if name is None or getattr(model, "is_simple", True) == (name in _CHAT_READINGS):
        return None  # a model we do not know, or a subclass that changed how it takes inputs
    if name in _FIRST_VIDEO_ONLY and int(getattr(model, "batch_size_per_gpu", 1)) != 1:
        return None
    if name == "llava_onevision":
        if getattr(model, "video_decode_backend", "decord") != "decord":
            return None  # its "pyav" reader samples differently (lmms_eval.models.model_utils.load_video)
        return Reading(name, int(model.max_frames_num))
    if name in TIMED_READINGS:
        fps = getattr(model, "fps", None)
        return Reading(name, int(model.max_num_frames), _optional_int(model.max_pixels), _optional_int(model.min_pixels),
                       None if fps is None else float(fps), _optional_int(getattr(model, "total_pixels", None)))
    return Reading(name, int(model.max_num_frames), int(model.max_pixels), int(model.min_pixels))


def takes_as_video(model: str, path: str) -> bool:
    """Whether ``model``'s own code treats the path ``path`` as a video (else it drops it, or
    reads it as another medium, and a proxy, an ``.avi``, would be a video where the path was not)."""
    if model in ("qwen2_vl", "qwen2_5_vl"):  # inline in their generate_until, case-sensitive
        return path.endswith((".mp4", ".avi", ".mov"))
    if model == "qwen3_vl":
        from lmms_eval.models.simple.qwen3_vl import _is_video_path

        return _is_video_path(path)
    if model in _CHAT_READINGS:  # lmms-eval's default doc_to_messages types a path by its extension
        from lmms_eval.api.task import ConfigurableMessagesTask

        return ConfigurableMessagesTask._visual_to_content(path)["type"] == "video"
    return True  # llava_onevision: any string is a video path


@dataclass(frozen=True)
class ModelFrames:
    """Presentation indices (in order, repeats kept) and ``(height, width)`` the model ends with."""

    indices: tuple[int, ...]
    size: tuple[int, int]


def _video_kwargs(reading: Reading, total: int) -> tuple[dict, int]:
    """The ``ele`` a Qwen model hands ``qwen_vl_utils.fetch_video`` for a video path of ``total``
    frames, and its image patch size (lmms-eval 0.7's ``generate_until`` of each model)."""
    if reading.model in ("qwen3_vl_chat", "qwen3_vl"):  # Qwen3_VL._build_video_kwargs
        ele: dict = {"min_pixels": reading.min_pixels}
        if reading.fps is not None:
            ele.update(fps=reading.fps, max_frames=reading.max_frames)
        elif reading.total_pixels is not None:
            ele["max_frames"] = reading.max_frames
        else:  # the simple class caps the count at the video's frames (its decord probe); chat does not
            ele["nframes"] = reading.max_frames if reading.model == "qwen3_vl_chat" else min(reading.max_frames, total)
        if reading.total_pixels is not None:
            ele["total_pixels"] = reading.total_pixels
        else:
            ele["max_pixels"] = reading.max_pixels
        return ele, 16
    ele = {"max_pixels": reading.max_pixels, "min_pixels": reading.min_pixels}
    if reading.model == "qwen2_5_vl_chat":  # its decord probe: an even frame count within the video
        if reading.fps is not None:
            ele["fps"] = reading.fps
        else:
            ele["nframes"] = max(2, min(reading.max_frames, total) // 2 * 2)
    return ele, 14


def _qwen_stage(reading: Reading, total: int, fps: float, height: int, width: int) -> tuple[list[int], tuple[int, int]]:
    """``qwen_vl_utils.fetch_video`` on a path (decord reader): its indices and resize target."""
    import torch
    from qwen_vl_utils import vision_process as vp

    ele, patch = _video_kwargs(reading, total)
    nframes = vp.smart_nframes(ele, total_frames=total, video_fps=fps)
    indices = torch.linspace(0, total - 1, nframes).round().long().tolist()
    factor = patch * vp.SPATIAL_MERGE_SIZE
    # fetch_video's arithmetic, key for key (a key set to None fails there, and so here: TypeError).
    min_pixels = ele.get("min_pixels", vp.VIDEO_MIN_TOKEN_NUM * factor * factor)
    total_pixels = ele.get("total_pixels", vp.MODEL_SEQ_LEN * factor * factor * 0.9)
    max_pixels = max(min(vp.VIDEO_MAX_TOKEN_NUM * factor * factor, total_pixels / nframes * vp.FRAME_FACTOR), int(min_pixels * 1.05))
    max_pixels = min(ele.get("max_pixels", max_pixels), max_pixels)
    size = vp.smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return indices, size


def model_frames(reading: Reading, total: int, fps: float, width: int, height: int) -> ModelFrames:
    """The frames (presentation indices) and size ``reading``'s own path ends with on a video of
    ``total`` frames at ``fps`` (decord's count and average rate), ``width`` x ``height``.

    - ``qwen2_vl``: ``fetch_video`` indices ``round(linspace(0, total-1, n))`` with ``n`` from
      ``smart_nframes`` (2 fps, 4..768, even), resized as ``fetch_video`` does for ``n``
      frames, then the model keeps ``unique(linspace(0, n-1, max_num_frames, dtype=int))``
      (fewer than ``max_num_frames`` when ``n`` is smaller: a 2 s clip gives 4).
    - ``qwen2_5_vl`` (simple): the same decode and ``unique(linspace(...))``, plus the last.
    - ``qwen2_5_vl_chat`` / ``qwen3_vl_chat`` / ``qwen3_vl``: ``fetch_video`` with the model's
      own kwargs (``nframes`` = its frame budget, or its ``fps``), all of them kept.
    - ``llava_onevision``: ``linspace(0, total-1, max_frames_num, dtype=int)``, native size.
    """
    if reading.model == "llava_onevision":
        keep = np.linspace(0, total - 1, reading.max_frames, dtype=int)
        return ModelFrames(tuple(int(i) for i in keep), (height, width))
    decoded, size = _qwen_stage(reading, total, fps, height, width)
    size = (int(size[0]), int(size[1]))
    if reading.timed:
        return ModelFrames(tuple(decoded), size)
    n = len(decoded)
    # Both simple classes drop repeats (a budget above n keeps each decoded frame once);
    # qwen2_5_vl also appends the last decoded frame.
    keep = np.unique(np.linspace(0, n - 1, reading.max_frames, dtype=int))
    if reading.model == "qwen2_5_vl" and n - 1 not in keep:
        keep = np.unique(np.append(keep, n - 1))
    return ModelFrames(tuple(decoded[int(k)] for k in keep), size)
