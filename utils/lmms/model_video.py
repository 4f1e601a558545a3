"""Video inputs for lmms-eval's video-native models, prepared once, fast, with bounded memory.

lmms-eval's simple video models take only a path and decode it themselves. `qwen2_vl` (and
the simple `qwen2_5_vl`) hand it to `qwen_vl_utils.fetch_video`, which decodes the video at
2 fps up to 768 frames and resizes them all, after which the model keeps (at most) 32 of them; on a
20-minute 720p file that is tens of seconds and ~17 GB per sample. This module computes, from
the container, the frames that path would end with (the composed indices), decodes only
those with `utils.video.read_frames`, applies the same resize, and writes them into a small
lossless *proxy clip* that the model reads as a video and ends up with exactly the same
frames (checked by simulating the model's selection on the proxy before using it).

Models that also read the video's timing (`qwen2_5_vl_chat`, `qwen3_vl_chat`, `qwen3_vl`:
their processor gets `video_metadata`, i.e. fps and frame indices) get a *timed* proxy: the
source's frame count and rate, their frames at their own indices, a tiny placeholder
elsewhere, so the reader reports the same metadata (``plan_timed_proxy``).

What is covered: the readings in ``_KNOWN`` on lmms-eval 0.7.3 with qwen-vl-utils 0.0.14
(``VERIFIED_VERSIONS``), proven by running lmms-eval's own classes on the path and on the proxy
(tests/test_model_equivalence.py). On other versions, and for settings or files whose frames the
container cannot decide, the model gets the original path (counted in the exit report).

Public interface
----------------
- ``INPUT_ENV`` (``LMMS_VR_VIDEO_INPUT``): ``fast`` (default) or ``path``: ``path`` restores
  plain video paths everywhere (the one switch back).
- ``Reading``: how a known lmms-eval model reads a video path (model name, frame budget,
  pixel limits); ``reading_of(model)`` for an lmms-eval model instance (None if unknown, or a
  batch size above 1 where the model's selection looks at the batch's first video only, or
  llava_onevision's pyav reader).
- ``VERIFIED_VERSIONS`` / ``version_verified(model)``: the package versions the readings were
  proven on; any other installed version turns the fast path off for that model (one log line).
- ``takes_as_video(model, path)``: whether the model's own code reads ``path`` as a video (by
  its extension); if not, it gets the path. ``qwen_reader_verified(model)``: qwen_vl_utils
  reads with decord (the reader the readings were proven with); if not, the path.
- ``model_frames(reading, total, fps, width, height) -> ModelFrames(indices, size)``: the
  presentation indices and the frame size the model's own path ends with.
- ``video_for_model(path, *, frames=None, size=None, on_broken=None) -> str``: what a
  ``doc_to_visual`` hook returns for a video: a cached proxy clip path when the calling model
  is known (or ``frames`` fixes the frames, e.g. a benchmark protocol), else ``str(path)``.
  A file that cannot be decoded raises through ``on_broken`` (the benchmark's checked-video
  function, whose error names the fix) or MediaError; this decode is the broken-file check.
- ``plan_proxy`` / ``plan_timed_proxy`` -> ``ProxyLayout``; ``write_proxy(target, frames, layout)``.
- ``usage``: this process's proxies made / reused / made again after eviction, logged at exit
  with the ``LMMS_VR_PROXY_CACHE_MB`` that would have kept every one, and the inputs a known
  model got as the original path, by reason (``usage.summary``).
- ``ProxyCache``: the bounded (``LMMS_VR_PROXY_CACHE_MB``, default 4096), least-recently-used,
  multi-process-safe folder of proxy clips (atomic writes, eviction under a file lock).
- Decode-ahead: while the model works on one document, the next ``LMMS_VR_DECODE_AHEAD``
  (default 2; 0 = off) documents in the model's own processing order are prepared by one
  background thread (their proxies land in the cache; memory is one document's frames at a
  time). The order comes from the model's ``generate_until`` frame (lmms-eval's ``Collator``);
  the queue is dropped when the run ends.

See ``utils/media/VIDEO.md`` ("Inputs for video-native models") for what is exact and why.
"""

from __future__ import annotations

import atexit
import collections
import fcntl
import hashlib
import logging
import math
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.lmms import host
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.files import atomic_target

logger = logging.getLogger("lmms_video_reasoning.model_video")

INPUT_ENV = "LMMS_VR_VIDEO_INPUT"
INPUT_MODES = ("fast", "path")
CACHE_MB_ENV = "LMMS_VR_PROXY_CACHE_MB"
CACHE_DIR_ENV = "LMMS_VR_PROXY_CACHE_DIR"
DECODE_AHEAD_ENV = "LMMS_VR_DECODE_AHEAD"
DEFAULT_CACHE_MB = 4096
DEFAULT_DECODE_AHEAD = 2
INPUT = settings.declare(INPUT_ENV, "choice", "fast", "video inputs of known video-native models: fast proxy clips "
                         "of the frames they keep, or the original path", choices=INPUT_MODES)
CACHE_MB = settings.declare(CACHE_MB_ENV, "float", DEFAULT_CACHE_MB, "size limit of the proxy clip cache in MB", minimum=0)
CACHE_DIR = settings.declare(CACHE_DIR_ENV, "text", "", "folder of the proxy clip cache (default: the suite's cache)")
DECODE_AHEAD = settings.declare(DECODE_AHEAD_ENV, "int", DEFAULT_DECODE_AHEAD, "documents decoded ahead of the model "
                                "(0 = off)", minimum=0)
PROXY_SUFFIX = ".avi"  # UT Video (lossless RGB, intra-only) in AVI: decord and PyAV read it exactly
PROXY_VERSION = 1  # part of every cache key: bump when the proxy layout changes


def input_mode() -> str:
    """``fast`` (proxy clips for known models) or ``path`` (plain paths), from ``LMMS_VR_VIDEO_INPUT``."""
    return INPUT.read()


# --------------------------------------------------------------------------------------------
# What a model's own path selects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """How an lmms-eval model reads a video path (its constructor's settings)."""

    model: str  # a value of _KNOWN: "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_onevision", "qwen2_5_vl_chat", ...
    max_frames: int
    max_pixels: int | None = None
    min_pixels: int | None = None
    fps: float | None = None  # chat models: sample at this rate instead of a frame count
    total_pixels: int | None = None  # qwen3_vl: a pixel budget over all frames

    @property
    def timed(self) -> bool:
        """Whether the model reads the video's timing (frame indices / fps) along with its frames."""
        return self.model in TIMED_READINGS


# These models hand qwen_vl_utils the path and pass its `video_metadata` (fps, frame indices,
# frame count) to the processor: Qwen2.5-VL's M-RoPE time step and Qwen3-VL's `<t seconds>`
# come from it, so their proxy keeps the source's frame count and rate ("timed" layout).
# lmms-eval 0.7 resolves `--model qwen2_5_vl` / `qwen3_vl` to the chat classes.
TIMED_READINGS = ("qwen2_5_vl_chat", "qwen3_vl_chat", "qwen3_vl")
_CHAT_READINGS = ("qwen2_5_vl_chat", "qwen3_vl_chat")

# lmms-eval class -> reading name; matched anywhere in a model's MRO (subclasses count; the
# chat classes subclass the simple ones, and the MRO meets the subclass first).
_KNOWN = {
    "lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL": "qwen2_5_vl_chat",
    "lmms_eval.models.chat.qwen3_vl.Qwen3_VL": "qwen3_vl_chat",
    "lmms_eval.models.simple.qwen3_vl.Qwen3_VL": "qwen3_vl",
    "lmms_eval.models.simple.qwen2_vl.Qwen2_VL": "qwen2_vl",
    "lmms_eval.models.simple.qwen2_5_vl.Qwen2_5_VL": "qwen2_5_vl",
    "lmms_eval.models.simple.llava_onevision.Llava_OneVision": "llava_onevision",
}


# The readings above are facts about these releases' code (checked by
# tests/test_model_equivalence.py, which runs the models' own generate_until on a grid of
# videos). Any other installed version: the model gets the original path until that harness
# has passed on it and the version is added here.
VERIFIED_VERSIONS = {"lmms-eval": ("0.7.3",), "qwen-vl-utils": ("0.0.14",)}


def _packages_of(model: str) -> tuple[str, ...]:
    """The distributions whose code decides what ``model`` reads (llava_onevision: decord directly)."""
    return ("lmms-eval",) if model == "llava_onevision" else ("lmms-eval", "qwen-vl-utils")


def unverified_versions(model: str) -> list[str]:
    """``name version`` of each installed package ``model``'s reading was not verified on (empty: verified)."""
    from importlib import metadata

    found = []
    for package in _packages_of(model):
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "absent"
        if version not in VERIFIED_VERSIONS[package]:
            found.append(f"{package} {version}")
    return found


_version_warned: set[str] = set()


def version_verified(model: str) -> bool:
    """Whether the fast path may serve ``model`` on the installed versions; logs once per model
    (one line) when it may not."""
    unverified = unverified_versions(model)
    if unverified and model not in _version_warned:
        _version_warned.add(model)
        verified = " + ".join(f"{name} {'/'.join(VERIFIED_VERSIONS[name])}" for name in _packages_of(model))
        logger.warning("video proxies are off for %s: installed %s, its frame selection was verified on %s only; "
                       "it reads the original video paths (run tests/test_model_equivalence.py on this version, then "
                       "add it to VERIFIED_VERSIONS in utils/lmms/model_video.py)", model, ", ".join(unverified), verified)
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
    """The ``_KNOWN`` name of ``model``'s class or nearest known base (None: a model we do not know)."""
    for cls in type(model).__mro__:
        name = _KNOWN.get(f"{cls.__module__}.{cls.__qualname__}")
        if name is not None:
            return name
    return None


def reading_of(model) -> Reading | None:
    """The ``Reading`` of an lmms-eval model instance, or None (a model, or settings, we do not know)."""
    name = known_model(model)
    if name is not None:
        if getattr(model, "is_simple", True) == (name in _CHAT_READINGS):
            return None  # a subclass that changed how it takes inputs: its reading is not one we know
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
    return None


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


# --------------------------------------------------------------------------------------------
# Proxy layout: which frame goes where so the model's selection on the proxy yields the targets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyLayout:
    """A proxy of ``len(fill)`` frames at ``rate`` fps; slot ``s`` shows target ``fill[s]``
    (a position in the target list), or a placeholder when ``fill[s]`` is None."""

    fill: tuple[int | None, ...]
    rate: Fraction


def _proxy_rate(slots: int, duration: float) -> Fraction:
    """The source's temporal extent, at most 2 fps (Qwen readers sample a path at 2 fps, so a
    slower clip is read frame by frame; other readers ignore the rate)."""
    rate = Fraction(slots / duration).limit_denominator(1_000_000) if duration > 0 else Fraction(1)
    return max(min(rate, Fraction(2)), Fraction(1, 1_000_000))


def source_rate(fps: float) -> Fraction:
    """The source's average rate as a fraction (30000/1001 for 29.97...), for a timed proxy: the
    one with the smallest denominator tried whose float is the rate to the last bit (a variable
    frame rate's average can need more than a million, e.g. 66256000/1104043)."""
    for bound in (1_000_000, 100_000_000, 2**31 - 1):
        rate = Fraction(fps).limit_denominator(bound)
        if float(rate) == fps:
            break
    return rate


def plan_timed_proxy(reading: Reading, total: int, fps: float, targets: Sequence[int], size: tuple[int, int]) -> ProxyLayout | None:
    """The timed layout: as many frames as the source at its rate, each target at its own index,
    placeholders between. The model's reader then finds the same frame count and fps, picks the
    same indices and reports the same ``video_metadata``; None if its resize of the (already
    resized) frames would not be the identity."""
    got = model_frames(reading, total, fps, size[1], size[0])
    if got.indices != tuple(targets) or got.size != size:
        return None
    fill: list[int | None] = [None] * total
    for j, index in enumerate(targets):
        fill[index] = j
    return ProxyLayout(tuple(fill), source_rate(fps))


def plan_proxy(reading: Reading | None, targets: Sequence[int], size: tuple[int, int], duration: float) -> ProxyLayout | None:
    """A short layout whose reading by ``reading`` (simulated with ``model_frames``) gives
    ``targets`` in order at ``size``; None if no small layout does. ``reading=None``: the targets
    as they are (a protocol's frames). Not for timed readings (``plan_timed_proxy``)."""
    k = len(targets)
    for slots in range(k, k + 4):
        rate = _proxy_rate(slots, duration)
        if reading is None:
            return ProxyLayout(tuple(range(k)), rate)
        got = model_frames(reading, slots, float(rate), size[1], size[0])
        if len(got.indices) != k or got.size != size:
            continue
        fill: dict[int, int] = {}  # proxy slot -> position in targets
        if any(fill.setdefault(slot, j) != j and targets[fill[slot]] != targets[j] for j, slot in enumerate(got.indices)):
            continue  # one slot would have to show two different frames
        order, last = [], 0
        for slot in range(slots):
            last = fill.get(slot, last)
            order.append(last)
        return ProxyLayout(tuple(order), rate)
    return None


# --------------------------------------------------------------------------------------------
# Bounded, multi-process-safe cache of proxy clips
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    from lmms_video_reasoning.utils.core.roots import cache_home

    value = CACHE_DIR.read()
    return Path(value) if value else cache_home() / "video_proxies"


def cache_limit_bytes() -> int:
    return int(CACHE_MB.read() * 2**20)


class ProxyCache:
    """Proxy clips in one folder, at most ``limit`` bytes, least recently used evicted first.

    A hit touches the file (mtime = last use). A new clip is written to a temporary file and
    renamed into place (``atomic_target``), so readers never see a partial clip and two
    processes making the same clip both end with a complete one. Eviction runs under an
    exclusive ``flock`` on ``.lock`` (one process at a time) and never removes the clip just
    made, nor clips used in the last ``protect_s`` seconds while others can go (the ones the
    model is about to read, including decode-ahead results).
    """

    def __init__(self, folder: Path, limit: int, protect_s: float = 120.0):
        self.folder, self.limit, self.protect_s = Path(folder), int(limit), protect_s

    def path_for(self, stem: str, key: str) -> Path:
        return self.folder / f"{stem[:40]}-{key}{PROXY_SUFFIX}"

    def hit(self, path: Path) -> bool:
        try:
            os.utime(path)
            return path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def store(self, path: Path, write: Callable[[Path], None]) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_target(path) as tmp:
            write(tmp)
        self.evict(keep=path)
        return path

    def entries(self) -> list[tuple[float, int, Path]]:
        found = []
        for entry in os.scandir(self.folder):
            if entry.name.startswith(".") and ".tmp" in entry.name:
                self._remove_if_stale(Path(entry.path))
            elif entry.name.endswith(PROXY_SUFFIX) and not entry.name.startswith("."):
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime, st.st_size, Path(entry.path)))
        return sorted(found)

    @staticmethod
    def _remove_if_stale(path: Path, age_s: float = 3600.0) -> None:
        """A temporary clip no writer has touched for an hour was cut short (e.g. at exit): removed."""
        import time

        try:
            if time.time() - path.stat().st_mtime > age_s:
                path.unlink()
        except FileNotFoundError:
            pass

    def size(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: Path | None = None) -> int:
        """Remove least recently used clips until the folder fits the limit; returns bytes freed."""
        import time

        freed = 0
        with open(self.folder / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                entries = self.entries()
                total = sum(size for _, size, _ in entries)
                now = time.time()
                # Oldest first; recently used ones only when nothing older is left.
                ordered = [e for e in entries if now - e[0] > self.protect_s] + [e for e in entries if now - e[0] <= self.protect_s]
                for _mtime, size, path in ordered:
                    if total <= self.limit:
                        break
                    if keep is not None and path == keep:
                        continue
                    try:
                        path.unlink()
                    except FileNotFoundError:
                        pass
                    total -= size
                    freed += size
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return freed


PLACEHOLDER_GREY = 128  # the colour of a timed proxy's unused frames (no model reads them)


def write_proxy(target: Path, frames: np.ndarray, layout: ProxyLayout) -> None:
    """Encode ``frames`` into the AVI ``target`` in ``layout``'s order, losslessly (UT Video,
    planar RGB, every frame a keyframe). Each distinct frame is encoded once and its packet
    repeated where the layout repeats it; placeholders are one encoded grey frame (about 800
    bytes), so a timed proxy of a long video stays small and is written in well under a second."""
    import av

    height, width = frames.shape[1:3]
    with av.open(str(target), mode="w", format="avi") as out:
        stream = out.add_stream("utvideo", rate=layout.rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "gbrp"
        encoded: dict[int | None, bytes] = {}
        time_base = None

        def encode(image: np.ndarray) -> bytes:
            nonlocal time_base
            packets = list(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")))
            if len(packets) != 1:  # an intra-only encoder answers each frame with one packet
                raise RuntimeError(f"utvideo returned {len(packets)} packets for one frame")
            time_base = packets[0].time_base
            return bytes(packets[0])

        for j in layout.fill:
            if j not in encoded:
                encoded[j] = encode(np.full((height, width, 3), PLACEHOLDER_GREY, np.uint8) if j is None else frames[j])
        for slot, j in enumerate(layout.fill):
            packet = av.Packet(encoded[j])
            packet.pts = packet.dts = slot
            packet.time_base, packet.stream, packet.is_keyframe = time_base, stream, True
            out.mux(packet)


def check_timed_proxy(path: Path, total: int, fps: float) -> bool:
    """Whether the container of ``path`` declares ``total`` frames at ``fps`` (the frame count and
    average rate decord and qwen_vl_utils' other readers take from FFmpeg). Reads the header only:
    opening a long proxy with decord reads every packet (about a second for 170,000 frames)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate
        return stream.frames == total and rate is not None and float(rate) == fps  # the model's metadata: to the last bit


def _resize_one_like_qwen(frame: np.ndarray, width_height: tuple[int, int]) -> np.ndarray:
    """``resize_like_qwen`` of one ``(H, W, 3)`` frame (per frame: the result is the same as in a
    batch, and it runs in the sampler's decoding threads)."""
    return resize_like_qwen(frame[None], (width_height[1], width_height[0]))[0]


def resize_like_qwen(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``fetch_video``'s resize (torchvision bicubic, antialias, on uint8) of ``(N, H, W, 3)`` frames."""
    if frames.shape[1:3] == tuple(size):
        return frames
    import torch
    from torchvision import transforms
    from torchvision.transforms import InterpolationMode

    tensor = torch.from_numpy(frames).permute(0, 3, 1, 2)
    resized = transforms.functional.resize(tensor, list(size), interpolation=InterpolationMode.BICUBIC, antialias=True)
    return resized.permute(0, 2, 3, 1).contiguous().numpy()


# --------------------------------------------------------------------------------------------
# Preparing one input
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What to put in a proxy: the model's own frames (``reading``) or fixed ``frames``/``size``."""

    reading: Reading | None
    frames: tuple[int, ...] | None = None  # fixed presentation indices (a benchmark protocol)
    size: tuple[int, int] | None = None  # fixed (width, height) for ``frames``


# One lock per video being made; an evicted lock only lets two threads make the same clip (last one wins).
_locks: BoundedMemo[threading.Lock] = BoundedMemo(4096)
_locks_guard = threading.Lock()
_done: "collections.OrderedDict[tuple, str]" = collections.OrderedDict()


def _lock_for(ident: tuple) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(ident, threading.Lock())


def _key(path: Path, request: Request) -> str:
    st = path.stat()
    text = f"v{PROXY_VERSION}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{request!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class _TimingMismatch(Exception):
    """A written timed proxy whose container does not declare the source's frame count and rate."""


def _layout_for(request: Request, info) -> tuple[list[int], tuple[int, int], ProxyLayout] | None:
    """``(frames to decode, (height, width), layout over those frames)`` for ``request`` on a
    video described by ``info``; None when no exact proxy exists."""
    if request.frames is not None:
        targets = list(request.frames)
        size = (request.size[1], request.size[0]) if request.size else (info.height, info.width)
        layout = plan_proxy(None, targets, size, info.duration)
    else:
        try:
            chosen = model_frames(request.reading, info.total_frames, info.fps, info.width, info.height)
        except (ValueError, TypeError) as exc:  # e.g. a frame budget larger than a short video: the model's own error
            logger.warning("%s cannot read this video as configured (%s)", request.reading.model, exc)
            return None
        targets, size = list(chosen.indices), chosen.size
        if request.reading.timed:
            layout = plan_timed_proxy(request.reading, info.total_frames, info.fps, targets, size)
        else:
            layout = plan_proxy(request.reading, targets, size, info.duration)
    if layout is None:
        return None
    unique = sorted(set(targets))
    row = {index: r for r, index in enumerate(unique)}
    return unique, size, ProxyLayout(tuple(None if j is None else row[targets[j]] for j in layout.fill), layout.rate)


class _Usage:
    """This process's proxy work, reported once at exit: how many were made, reused, and made
    again because the cache bound evicted them before a later question on the same video."""

    def __init__(self):
        self.lock = threading.Lock()
        self.made: dict[str, int] = {}  # proxy file name -> bytes (first making)
        self.made_again = 0
        self.reused = 0
        self.paths: collections.Counter = collections.Counter()  # (model, reason) -> inputs handed the original path
        self.registered = False

    def _register(self) -> None:  # under self.lock
        if not self.registered:
            self.registered = True
            atexit.register(self.report)

    def record_made(self, target: Path) -> None:
        size = target.stat().st_size if target.exists() else 0
        with self.lock:
            if target.name in self.made:
                self.made_again += 1
            self.made.setdefault(target.name, size)
            self._register()

    def record_reused(self) -> None:
        with self.lock:
            self.reused += 1

    def record_path(self, model: str, reason: str) -> None:
        """A known model's input handed over as the original path (no proxy), and why."""
        if getattr(_context, "prefetching", False):
            return  # a decode-ahead job: the document's own call counts it
        with self.lock:
            self.paths[(model, reason)] += 1
            self._register()

    def summary(self, limit: int) -> str | None:
        """One line for the log (None when nothing was made or handed over); names the setting
        when the bound made the run decode a video twice, and counts the inputs that went to a
        known model as the original path, by reason."""
        with self.lock:
            if not self.made and not self.paths:
                return None
            total = sum(self.made.values())
            line = (f"video proxies: {len(self.made)} made ({total / 2**20:.0f} MB), {self.reused} reused from the cache, "
                    f"{self.made_again} made again after the cache evicted them ({CACHE_MB_ENV}={limit / 2**20:.0f})")
            if self.made_again:
                line += (f"; to decode each video once, raise {CACHE_MB_ENV} to at least {math.ceil(total * 1.1 / 2**20)} "
                         "(this process's proxies plus 10%)")
            if self.paths:
                reasons = ", ".join(f"{model}: {count} {reason}" for (model, reason), count in sorted(self.paths.items()))
                line += f"; {sum(self.paths.values())} handed the original path ({reasons})"
            return line

    def report(self) -> None:
        line = self.summary(cache_limit_bytes())
        if line:
            (logger.warning if self.made_again else logger.info)(line)


usage = _Usage()


def prepare(path, request: Request, cache: ProxyCache | None = None) -> str | None:
    """The proxy clip for ``request`` on ``path`` (made or found in the cache), or None when no
    exact proxy layout exists (the caller hands over the path). Raises VideoError for a file
    that cannot be decoded."""
    from lmms_video_reasoning.utils.media import video

    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        raise video.VideoError(f"video file not found: {path}. Check the dataset path (or download the video).") from None
    ident = (str(path), st.st_size, st.st_mtime_ns, request)
    with _lock_for(ident):  # foreground and decode-ahead never prepare the same input twice
        with _locks_guard:
            known = _done.get(ident)
        cache = cache or ProxyCache(cache_dir(), cache_limit_bytes())
        if known is not None and cache.hit(Path(known)):
            usage.record_reused()
            return known
        target = cache.path_for(path.stem, _key(path, request))
        if cache.hit(target):
            usage.record_reused()
            result = str(target)
        else:
            info = video.probe(path)
            planned = _layout_for(request, info)
            if planned is None:
                logger.warning("%s: no exact proxy layout for %s; handing the model the original path", path, request.reading)
                if request.reading is not None:
                    usage.record_path(request.reading.model, "without an exact proxy layout")
                return None
            unique, size, layout = planned
            if request.frames is not None and request.size is not None:
                frames = video.read_frames(path, unique, size=request.size, as_array=True)
            elif request.frames is None and request.reading.model != "llava_onevision":
                frames = video.read_frames(path, unique, size=(size[1], size[0]), resize=_resize_one_like_qwen, as_array=True)
            else:
                frames = video.read_frames(path, unique, as_array=True)
            timed = request.frames is None and request.reading.timed

            def write(tmp: Path) -> None:
                write_proxy(tmp, frames, layout)
                if timed and not check_timed_proxy(tmp, info.total_frames, info.fps):
                    raise _TimingMismatch

            try:
                cache.store(target, write)
            except _TimingMismatch:
                logger.warning("%s: the proxy would not report the source's frame count and rate (%d at %s fps); "
                               "handing the model the original path", path, info.total_frames, info.fps)
                usage.record_path(request.reading.model, "whose rate a proxy cannot declare")
                return None
            result = str(target)
            usage.record_made(target)
            logger.debug("%s: proxy %s (%d frames at %dx%d)", path, target.name, len(unique), size[1], size[0])
        with _locks_guard:
            _done[ident] = result
            while len(_done) > 4096:
                _done.popitem(last=False)
        return result


# --------------------------------------------------------------------------------------------
# The calling model, its processing order, and decode-ahead
# --------------------------------------------------------------------------------------------

_context = threading.local()  # .reading set by decode-ahead jobs (no model frame on their stack)


def _is_method_of(frame, obj) -> bool:
    """Whether ``frame`` runs a method called on ``obj``: its code's first parameter is ``self``
    bound to ``obj``. A comprehension (its own frame before Python 3.12, inlined since PEP 709), a
    generator expression, a lambda or a nested function sees ``self`` only as a free variable, so
    it never matches, whichever Python runs it."""
    code = frame.f_code
    return code.co_argcount > 0 and code.co_varnames[0] == "self" and frame.f_locals.get("self") is obj


def _model_frame(start):
    """The innermost stack frame, from ``start`` outwards, running a method of an lmms-eval model
    (None outside one). The walk goes to the bottom of the stack: no frame count, which would
    differ between Pythons that do and do not give comprehensions a frame of their own."""
    try:
        from lmms_eval.api.model import lmms
    except Exception:  # noqa: BLE001 - lmms-eval absent: no model to find
        return None
    frame = start
    while frame is not None:
        code = frame.f_code
        if code.co_argcount > 0 and code.co_varnames[0] == "self":  # cheap test first: f_locals copies on 3.11
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, lmms):
                return frame
        frame = frame.f_back
    return None


def calling_model() -> tuple[bool, Reading | None]:
    """Whether an lmms-eval model called the hook, and its ``Reading`` (decode-ahead jobs: theirs)."""
    if getattr(_context, "prefetching", False):
        return True, _context.reading
    frame = _model_frame(sys._getframe(1))
    return (True, reading_of(frame.f_locals["self"])) if frame is not None else (False, None)


EXIT_WAIT_S = 1.0  # at exit, a running decode gets this long; then the daemon thread dies with the process


class DecodeAhead:
    """One background thread preparing the next documents' inputs, in the model's order.

    ``schedule(jobs)`` replaces the queue with ``jobs`` (callables, nearest first, at most
    ``depth``); a job already running finishes (its result lands in the cache, where the
    foreground call finds it; ``prepare`` serialises the two). ``stop()`` drops the queue and
    waits for the running job: called at exit, so no temporary file or thread is left behind.
    """

    def __init__(self, depth: int):
        self.depth = depth
        self._queue: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.completed = 0

    def schedule(self, jobs: list[Callable[[], object]]) -> None:
        with self._cv:
            if self._stopped:
                return
            self._queue.clear()
            self._queue.extend(jobs[: self.depth])
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lmms-vr-decode-ahead", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                job = self._queue.popleft()
            try:
                job()
                self.completed += 1
            except Exception as exc:  # noqa: BLE001 - the foreground call reports it with context
                logger.debug("decode-ahead job failed (the document will report it): %s", exc)

    def stop(self, timeout: float | None = EXIT_WAIT_S) -> None:
        with self._cv:
            self._stopped = True
            self._queue.clear()
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)  # a clip cut short leaves a hidden .tmp file: `evict` removes stale ones


_ahead: DecodeAhead | None = None
_ahead_guard = threading.Lock()
_orders: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def decode_ahead_depth() -> int:
    return DECODE_AHEAD.read()


def decode_ahead() -> DecodeAhead | None:
    global _ahead
    depth = decode_ahead_depth()
    if depth == 0:
        return None
    with _ahead_guard:
        if _ahead is None:
            _ahead = DecodeAhead(depth)
            atexit.register(_ahead.stop, EXIT_WAIT_S)
        return _ahead


def _processing_order(collator) -> tuple[list[tuple], dict]:
    """Request args in the order a model's ``Collator`` hands them out (groups, then sort key),
    and each ``(task, doc_id)``'s position in it."""
    cached = _orders.get(collator)
    if cached is not None:
        return cached
    groups = collator.arr_with_indices
    groups = groups.values() if isinstance(groups, dict) else [groups]
    order = [args for values in groups for _i, args in sorted(values, key=lambda x: collator.fn(x[1]))]
    position = {(args[4], args[3]): n for n, args in enumerate(order) if len(args) >= 6}
    _orders[collator] = order, position
    return order, position


def _upcoming(frame) -> list[tuple[Callable, dict]]:
    """(doc_to_visual, doc) of the documents after the current chunk, in the model's order."""
    model = frame.f_locals["self"]
    local = frame.f_locals  # names as in lmms-eval 0.7's models' generate_until
    task, doc_ids = local.get("task"), local.get("doc_id", local.get("batched_doc_id"))
    # The Collator may live a method up (qwen3_vl handles each chunk in a helper method): walk out
    # through the model's own methods and what runs inside them (comprehension, generator, lambda
    # frames, whether or not their body names ``self``: Python < 3.12 gives a comprehension a frame
    # of its own; nested functions closing over ``self``), and stop at the first frame that is neither.
    owner, collator = frame, None
    while owner is not None:
        code = owner.f_code
        if _is_method_of(owner, model):
            collator = owner.f_locals.get("re_ords")
            if collator is not None:
                break
        elif not (code.co_name.startswith("<") or ("self" in code.co_freevars and owner.f_locals.get("self") is model)):
            break
        owner = owner.f_back
    if collator is None or doc_ids is None or not hasattr(collator, "arr_with_indices"):
        return []
    task = task[0] if isinstance(task, tuple) else task
    order, position = _processing_order(collator)
    current = [position.get((task, d)) for d in doc_ids]
    if None in current:
        return []
    upcoming = []
    for args in order[max(current) + 1 :]:
        # Simple models' args: (context, gen_kwargs, doc_to_visual, doc_id, task, split);
        # chat models': (context, doc_to_messages, gen_kwargs, ...), which calls doc_to_visual.
        fn = args[2] if callable(args[2]) else args[1]
        doc_id, task_name, split = args[3], args[4], args[5]
        if callable(fn):
            upcoming.append((fn, model.task_dict[task_name][split][doc_id]))
    return upcoming


def schedule_ahead(reading: Reading) -> None:
    """Queue the next documents' ``doc_to_visual`` calls (as ``reading``'s model) in the background."""
    if getattr(_context, "prefetching", False):
        return
    ahead = decode_ahead()
    if ahead is None or host.DECODE_AHEAD.state.startswith("off"):
        return
    frame = _model_frame(sys._getframe(1))
    if frame is None:
        return
    try:
        upcoming = _upcoming(frame)[: ahead.depth]
    except Exception as exc:  # noqa: BLE001 - an unexpected model layout only disables decode-ahead
        host.DECODE_AHEAD.switch_off(f"cannot read the model's processing order ({type(exc).__name__}: {exc})")
        return

    def job(fn, doc):
        def run():
            _context.prefetching, _context.reading = True, reading
            try:
                fn(doc)
            finally:
                _context.prefetching, _context.reading = False, None

        return run

    ahead.schedule([job(fn, doc) for fn, doc in upcoming])


# --------------------------------------------------------------------------------------------
# The hook-facing entry point
# --------------------------------------------------------------------------------------------


def video_for_model(path, *, frames: Sequence[int] | Callable[[int], Sequence[int]] | None = None,
                    size: tuple[int, int] | None = None, on_broken: Callable[[Path], object] | None = None) -> str:
    """What a ``doc_to_visual`` hook hands a simple video model for the video ``path``.

    With ``LMMS_VR_VIDEO_INPUT=path``: ``str(path)`` after ``on_broken(path)`` (the benchmark's
    decode check). Otherwise, when the calling model is known (``reading_of``) or ``frames``
    fixes the frames (indices, or a function of the frame count; ``size`` = ``(width, height)``): a proxy clip (``prepare``) the model
    reads back as exactly those frames, and the next documents are queued for decode-ahead.
    Unknown models (without ``frames``) and calls from outside a model (scripts, tests) get the
    checked path. A file our decoder rejects goes through
    ``on_broken`` (which raises with the benchmark's advice) or raises MediaError.
    """
    from lmms_video_reasoning.utils.core.roots import MediaError
    from lmms_video_reasoning.utils.media.video import VideoError

    path = Path(path)
    if input_mode() == "path":
        return str(on_broken(path) if on_broken else path)
    inside, reading = calling_model()
    if not inside or (reading is None and frames is None):  # called outside a run, or by a model we do not know
        frame = _model_frame(sys._getframe(1)) if inside else None
        name = known_model(frame.f_locals["self"]) if frame is not None else None
        if name is not None:  # a known model whose settings make its frames depend on more than the video
            usage.record_path(name, "with settings the video alone does not decide (batch size, reader, subclass)")
        return str(on_broken(path) if on_broken else path)
    if reading is not None and frames is None:
        reason = ("on unverified package versions" if not version_verified(reading.model)
                  else "with a qwen-vl-utils video reader other than decord" if not qwen_reader_verified(reading.model)
                  else None if takes_as_video(reading.model, str(path)) else "not read as a video by the model (file extension)")
        if reason is not None:
            usage.record_path(reading.model, reason)
            return str(on_broken(path) if on_broken else path)
    try:
        if callable(frames):
            from lmms_video_reasoning.utils.media.video import probe

            frames = frames(probe(path).total_frames)
        request = Request(reading if frames is None else None, tuple(int(i) for i in frames) if frames is not None else None,
                          tuple(size) if size is not None else None)
        proxy = prepare(path, request)
    except VideoError as exc:
        if on_broken is not None:
            on_broken(path)  # raises with the benchmark's own advice when the file is broken
        raise MediaError(str(exc)) from None
    if reading is not None:  # after this document's input, so the two never compete for the CPU
        schedule_ahead(reading)
    return proxy if proxy is not None else str(on_broken(path) if on_broken else path)
