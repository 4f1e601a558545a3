"""Proxy clips: the frames a model keeps, in a small lossless clip it reads back exactly.

A proxy is a short AVI (UT Video: lossless RGB, every frame a keyframe) laid out so that the
model's own selection on it (``model_readings.model_frames``, simulated before use) yields the
target frames in order at the target size. Models that also read the video's timing get a
*timed* proxy: the source's frame count and rate, their frames at their own indices, a tiny
placeholder elsewhere, so the reader reports the same metadata (``plan_timed_proxy``).
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.files import atomic_target
from lmms_video_reasoning.utils.lmms.model_readings import Reading, model_frames

CACHE_MB_ENV = "LMMS_VR_PROXY_CACHE_MB"
CACHE_DIR_ENV = "LMMS_VR_PROXY_CACHE_DIR"
CACHE_MB = settings.declare(CACHE_MB_ENV, "float", 4096, "size limit of the proxy clip cache in MB", minimum=0)
CACHE_DIR = settings.declare(CACHE_DIR_ENV, "text", "", "folder of the proxy clip cache (default: the suite's cache)")
PROXY_SUFFIX = ".avi"  # UT Video (lossless RGB, intra-only) in AVI: decord and PyAV read it exactly
PROXY_VERSION = 1  # part of every cache key: bump when the proxy layout changes


@dataclass(frozen=True)
class ProxyLayout:
    """A proxy of ``len(fill)`` frames at ``rate`` fps; slot ``s`` shows target ``fill[s]``
    (a position in the target list), or a placeholder when ``fill[s]`` is None."""

    fill: tuple[int | None, ...]
    rate: Fraction


def proxy_rate(slots: int, duration: float) -> Fraction:
    """The source's temporal extent, at most 2 fps (Qwen readers sample a path at 2 fps, so a
    slower clip is read frame by frame; other readers ignore the rate)."""
    rate = Fraction(slots / duration).limit_denominator(1_000_000) if duration > 0 else Fraction(1)
    return max(min(rate, Fraction(2)), Fraction(1, 1_000_000))


def source_rate(fps: float) -> Fraction:
    """The source's average rate as the fraction with the smallest denominator tried whose float is
    the rate to the last bit (30000/1001; a variable rate's average can need 66256000/1104043)."""
    for bound in (1_000_000, 100_000_000, 2**31 - 1):
        rate = Fraction(fps).limit_denominator(bound)
        if float(rate) == fps:
            break
    return rate


def plan_timed_proxy(reading: Reading, total: int, fps: float, targets: Sequence[int], size: tuple[int, int]) -> ProxyLayout | None:
    """The timed layout: as many frames as the source at its rate, each target at its own index,
    placeholders between (the reader finds the same count and fps, picks the same indices, reports
    the same ``video_metadata``); None if its resize of the resized frames would not be the identity."""
    got = model_frames(reading, total, fps, size[1], size[0])
    if got.indices != tuple(targets) or got.size != size:
        return None
    fill: list[int | None] = [None] * total
    for j, index in enumerate(targets):
        fill[index] = j
    return ProxyLayout(tuple(fill), source_rate(fps))


def plan_proxy(reading: Reading, targets: Sequence[int], size: tuple[int, int], duration: float) -> ProxyLayout | None:
    """A short layout whose reading by ``reading`` (simulated) gives ``targets`` in order at ``size``;
    None if no small layout does."""
    k = len(targets)
    for slots in range(k, k + 4):
        rate = proxy_rate(slots, duration)
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


def cache_dir() -> Path:
    from lmms_video_reasoning.utils.core.roots import cache_home

    value = CACHE_DIR.read()
    return Path(value) if value else cache_home() / "video_proxies"


def cache_limit_bytes() -> int:
    return int(CACHE_MB.read() * 2**20)


class ProxyCache:
    """Proxy clips in one folder, at most ``limit`` bytes, least recently used evicted first.

    A hit touches the file (mtime = last use); a new clip is renamed into place whole
    (``atomic_target``). Eviction runs under an exclusive ``flock`` on ``.lock`` and never removes
    the clip just made.
    """

    def __init__(self, folder: Path, limit: int):
        self.folder, self.limit = Path(folder), int(limit)

    def path_for(self, stem: str, key: str) -> Path:
        return self.folder / f"{stem[:40]}-{key}{PROXY_SUFFIX}"

    def hit(self, path: Path) -> bool:
        try:
            os.utime(path)
            return path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def store(self, path: Path, write: Callable[[Path], None]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_target(path) as tmp:
            write(tmp)
        self.evict(keep=path)

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of each clip, oldest first; a temporary clip no writer touched for an
        hour was cut short (e.g. at exit) and is removed."""
        found, now = [], time.time()
        for entry in os.scandir(self.folder):
            try:
                if entry.name.startswith(".") and ".tmp" in entry.name:
                    if now - entry.stat().st_mtime > 3600:
                        os.unlink(entry.path)
                elif entry.name.endswith(PROXY_SUFFIX) and not entry.name.startswith("."):
                    st = entry.stat()
                    found.append((st.st_mtime, st.st_size, Path(entry.path)))
            except FileNotFoundError:
                continue
        return sorted(found)

    def evict(self, keep: Path) -> None:
        """Remove least recently used clips but `keep` until the folder fits the limit."""
        with open(self.folder / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            entries = self.entries()  # least recently used first
            total = sum(size for _, size, _ in entries)
            for _mtime, size, path in entries:
                if total <= self.limit:
                    break
                if path != keep:
                    path.unlink(missing_ok=True)
                    total -= size


PLACEHOLDER_GREY = 128  # the colour of a timed proxy's unused frames (no model reads them)


def write_proxy(target: Path, frames: np.ndarray, layout: ProxyLayout) -> None:
    """Encode ``frames`` into the AVI ``target`` in ``layout``'s order, losslessly. Each distinct frame
    is encoded once and its packet repeated; placeholders are one grey frame (about 800 bytes), so a
    timed proxy of a long video stays small and is written in well under a second."""
    import av

    height, width = frames.shape[1:3]
    with av.open(str(target), mode="w", format="avi") as out:
        stream = out.add_stream("utvideo", rate=layout.rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "gbrp"
        encoded: dict[int | None, av.Packet] = {}
        for j in layout.fill:
            if j not in encoded:
                image = np.full((height, width, 3), PLACEHOLDER_GREY, np.uint8) if j is None else frames[j]
                packets = list(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")))
                if len(packets) != 1:  # an intra-only encoder answers each frame with one packet
                    raise RuntimeError(f"utvideo returned {len(packets)} packets for one frame")
                encoded[j] = packets[0]
        for slot, j in enumerate(layout.fill):
            packet = av.Packet(bytes(encoded[j]))
            packet.pts = packet.dts = slot
            packet.time_base, packet.stream, packet.is_keyframe = encoded[j].time_base, stream, True
            out.mux(packet)


def check_timed_proxy(path: Path, total: int, fps: float) -> bool:
    """Whether the container of ``path`` declares ``total`` frames at ``fps`` (what decord and
    qwen_vl_utils take from FFmpeg); from the header only (decord would read every packet)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate
        return stream.frames == total and rate is not None and float(rate) == fps  # the model's metadata: to the last bit


def resize_like_qwen(frame: np.ndarray, width_height: tuple[int, int]) -> np.ndarray:
    """``fetch_video``'s resize (torchvision bicubic, antialias, on uint8) of one ``(H, W, 3)`` frame (per
    frame the result is the same as in a batch; it runs in the sampler's decoding threads)."""
    size = (width_height[1], width_height[0])
    if frame.shape[:2] == size:
        return frame
    import torch
    from torchvision import transforms
    from torchvision.transforms import InterpolationMode

    tensor = torch.from_numpy(frame[None]).permute(0, 3, 1, 2)
    resized = transforms.functional.resize(tensor, list(size), interpolation=InterpolationMode.BICUBIC, antialias=True)
    return resized.permute(0, 2, 3, 1).contiguous().numpy()[0]
