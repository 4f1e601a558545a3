"""Video inputs for lmms-eval's video-native models, prepared once, fast, with bounded memory.

lmms-eval's simple video models take a path and decode it themselves (`qwen2_vl`: 2 fps up to 768
frames, all resized, then at most 32 kept; tens of seconds and ~17 GB on a 20-minute 720p file). A
task's `doc_to_visual` calls `video_for_model`: the frames that path would end with
(`model_readings`), decoded alone with the same resize, in a small lossless proxy clip
(`proxy_clips`) the model reads back as exactly those frames. On other package versions, and for
settings or files the container cannot decide, the model gets the original path (counted in the
exit report, `usage`); `LMMS_VR_VIDEO_INPUT=path` everywhere. See `utils/media/VIDEO.md`.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.lmms import host, proxy_clips
from lmms_video_reasoning.utils.lmms.model_readings import (Reading, known_model, model_frames, qwen_reader_verified,
                                                            reading_of, takes_as_video, version_verified)
from lmms_video_reasoning.utils.lmms.proxy_clips import ProxyCache, ProxyLayout

logger = logging.getLogger("lmms_video_reasoning.model_video")

INPUT_ENV = "LMMS_VR_VIDEO_INPUT"
INPUT = settings.declare(INPUT_ENV, "choice", "fast", "video inputs of known video-native models: fast proxy clips "
                         "of the frames they keep, or the original path", choices=("fast", "path"))


@dataclass(frozen=True)
class Request:
    """What to put in a proxy: the model's own frames (``reading``) or fixed ``frames``/``size``."""

    reading: Reading | None
    frames: tuple[int, ...] | None = None  # fixed presentation indices (a benchmark protocol)
    size: tuple[int, int] | None = None  # fixed (width, height) for ``frames``


# One lock per video being made; an evicted lock only lets two threads make the same clip (last one wins).
_locks: BoundedMemo[threading.Lock] = BoundedMemo(4096)
_locks_guard = threading.Lock()


class _TimingMismatch(Exception):
    """A written timed proxy whose container does not declare the source's frame count and rate."""


def _layout_for(request: Request, info) -> tuple[list[int], tuple[int, int], ProxyLayout] | None:
    """``(frames to decode, (height, width), layout over those frames)`` for ``request`` on a
    video described by ``info``; None when no exact proxy exists."""
    if request.frames is not None:
        targets = list(request.frames)
        size = (request.size[1], request.size[0]) if request.size else (info.height, info.width)
        layout = proxy_clips.ProxyLayout(tuple(range(len(targets))), proxy_clips.proxy_rate(len(targets), info.duration))
    else:
        try:
            chosen = model_frames(request.reading, info.total_frames, info.fps, info.width, info.height)
        except (ValueError, TypeError) as exc:  # e.g. a frame budget larger than a short video: the model's own error
            logger.warning("%s cannot read this video as configured (%s)", request.reading.model, exc)
            return None
        targets, size = list(chosen.indices), chosen.size
        if request.reading.timed:
            layout = proxy_clips.plan_timed_proxy(request.reading, info.total_frames, info.fps, targets, size)
        else:
            layout = proxy_clips.plan_proxy(request.reading, targets, size, info.duration)
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
        self.made_again = self.reused = 0
        self.paths: collections.Counter = collections.Counter()  # (model, reason) -> inputs handed the original path

    def record_made(self, target: Path) -> None:
        size = target.stat().st_size if target.exists() else 0
        with self.lock:
            self.made_again += target.name in self.made
            self.made.setdefault(target.name, size)

    def record_reused(self) -> None:
        with self.lock:
            self.reused += 1

    def record_path(self, model: str, reason: str) -> None:
        with self.lock:
            self.paths[(model, reason)] += 1

    def summary(self, limit: int) -> str | None:
        """One line for the log (None when nothing was made or handed over), naming the setting when
        the bound made the run decode a video twice."""
        with self.lock:
            if not self.made and not self.paths:
                return None
            total = sum(self.made.values())
            line = (f"video proxies: {len(self.made)} made ({total / 2**20:.0f} MB), {self.reused} reused from the cache, "
                    f"{self.made_again} made again after the cache evicted them ({proxy_clips.CACHE_MB_ENV}={limit / 2**20:.0f})")
            if self.made_again:
                line += (f"; to decode each video once, raise {proxy_clips.CACHE_MB_ENV} to at least {math.ceil(total * 1.1 / 2**20)} "
                         "(this process's proxies plus 10%)")
            if self.paths:
                reasons = ", ".join(f"{model}: {count} {reason}" for (model, reason), count in sorted(self.paths.items()))
                line += f"; {sum(self.paths.values())} handed the original path ({reasons})"
            return line

    def report(self) -> None:
        if self.made or self.paths:  # else no setting is read
            (logger.warning if self.made_again else logger.info)(self.summary(proxy_clips.cache_limit_bytes()))


usage = _Usage()
atexit.register(usage.report)  # reads nothing, says nothing when no proxy was made or handed over


def prepare(path, request: Request, cache: ProxyCache | None = None) -> str | None:
    """The proxy clip for ``request`` on ``path`` (made or found in the cache), or None when no exact
    layout exists (the caller hands over the path); VideoError for a file that cannot be decoded."""
    from lmms_video_reasoning.utils.media.frame_decoder import read_frames
    from lmms_video_reasoning.utils.media.frame_table import file_key, probe

    path = Path(path)  # a missing file: `probe`'s VideoError (its key, the path alone, is never in the cache)
    text = f"v{proxy_clips.PROXY_VERSION}|{file_key(path)}|{request!r}"
    key = hashlib.sha256(text.encode()).hexdigest()[:20]  # the proxy's cache key, and the key of its lock
    with _locks_guard:
        lock = _locks.get_or_make(key, threading.Lock)
    with lock:  # two threads never prepare the same input twice
        cache = cache or ProxyCache(proxy_clips.cache_dir(), proxy_clips.cache_limit_bytes())
        target = cache.path_for(path.stem, key)
        if cache.hit(target):
            usage.record_reused()
        else:
            info = probe(path)
            planned = _layout_for(request, info)
            if planned is None:
                logger.warning("%s: no exact proxy layout for %s; handing the model the original path", path, request.reading)
                if request.reading is not None:
                    usage.record_path(request.reading.model, "without an exact proxy layout")
                return None
            unique, size, layout = planned
            # a model's frames resized as qwen_vl_utils does (llava_onevision's are native: not resized), a protocol's with OpenCV
            resize = proxy_clips.resize_like_qwen if request.frames is None else None
            frames = read_frames(path, unique, size=(size[1], size[0]), resize=resize, as_array=True)
            timed = request.frames is None and request.reading.timed

            def write(tmp: Path) -> None:
                proxy_clips.write_proxy(tmp, frames, layout)
                if timed and not proxy_clips.check_timed_proxy(tmp, info.total_frames, info.fps):
                    raise _TimingMismatch

            try:
                cache.store(target, write)
            except _TimingMismatch:
                logger.warning("%s: the proxy would not report the source's frame count and rate (%d at %s fps); "
                               "handing the model the original path", path, info.total_frames, info.fps)
                usage.record_path(request.reading.model, "whose rate a proxy cannot declare")
                return None
            usage.record_made(target)
            logger.debug("%s: proxy %s (%d frames at %dx%d)", path, target.name, len(unique), size[1], size[0])
        return str(target)


def video_for_model(path, *, frames: Sequence[int] | Callable[[int], Sequence[int]] | None = None,
                    size: tuple[int, int] | None = None, on_broken: Callable[[Path], object] | None = None) -> str:
    """What a ``doc_to_visual`` hook hands a simple video model for the video ``path``: when the calling
    model is known (``reading_of``) or ``frames`` fixes the frames (indices, or a function of the
    frame count; ``size`` = ``(width, height)``), a proxy clip the model reads back as exactly those
    frames; else (and with ``LMMS_VR_VIDEO_INPUT=path``) the path checked by ``on_broken`` (the
    benchmark's decode check, raising with its advice). A file our decoder rejects goes through
    ``on_broken``, or raises MediaError."""
    from lmms_video_reasoning.utils.core.roots import MediaError
    from lmms_video_reasoning.utils.media.frame_table import VideoError, probe

    def original() -> str:
        return str(on_broken(path) if on_broken else path)

    path = Path(path)
    model = host.calling_model() if INPUT.read() == "fast" else None
    reading = reading_of(model) if model is not None else None
    if model is None or (reading is None and frames is None):  # LMMS_VR_VIDEO_INPUT=path, outside a run, or not known
        if model is not None and known_model(model) is not None:  # known, with settings that make its frames depend on more
            usage.record_path(known_model(model), "with settings the video alone does not decide (batch size, reader, subclass)")
        return original()
    if frames is None:
        reason = ("on unverified package versions" if not version_verified(reading.model)
                  else "with a qwen-vl-utils video reader other than decord" if not qwen_reader_verified(reading.model)
                  else None if takes_as_video(reading.model, str(path)) else "not read as a video by the model (file extension)")
        if reason is not None:
            usage.record_path(reading.model, reason)
            return original()
    try:
        if callable(frames):
            frames = frames(probe(path).total_frames)
        request = Request(reading if frames is None else None, tuple(int(i) for i in frames) if frames is not None else None,
                          tuple(size) if size is not None else None)
        proxy = prepare(path, request)
    except VideoError as exc:
        if on_broken is not None:
            on_broken(path)  # raises with the benchmark's own advice when the file is broken
        raise MediaError(str(exc)) from None
    return proxy if proxy is not None else original()