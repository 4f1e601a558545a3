"""Deterministic synthetic videos and subtitle files for tests, sample data and benchmarks.

Real benchmark media are hundreds of GB on the Hugging Face Hub, so every test and sample run
uses small videos generated here with PyAV (H.264 in MP4, libx264): ``Shape``s drawn over a
background by ``write_video``, whose ground truth is ``shape_box`` (a sample benchmark's video: a ``Clip``).
Files are written to a temporary name and moved into place, so concurrent generators never leave a half-written video.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
from lmms_video_reasoning.utils.core.files import atomic_target

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30), "green": (30, 200, 60), "blue": (40, 70, 230), "yellow": (240, 220, 40),
    "white": (245, 245, 245), "magenta": (220, 40, 220), "cyan": (40, 220, 230), "orange": (245, 140, 20),
    "black": (0, 0, 0), "gray": (128, 128, 128),
}

SHAPE_KINDS = ("circle", "square", "triangle")

# VFR schedule: blocks of frames alternate between half and 1.5x the nominal frame interval,
# so the mean rate equals `fps` but mapping index -> time with the mean rate drifts by up to
# a quarter block (several frames) -- the failure mode the sampler must not have.
VFR_BLOCK = 25
VFR_FACTORS = (0.5, 1.5)
# Millisecond timestamps for VFR files (the MP4 default timescale for irregular times).
VFR_TIME_BASE = Fraction(1, 1000)

STAMP_BITS = 20


@dataclass(frozen=True)
class Shape:
    """A shape on screen from ``start`` (inclusive) to ``end`` (exclusive), in seconds; positions are
    centre fractions of width/height (``pos1``: linear motion from ``pos0``); ``size``: side as a
    fraction of the height; ``flash_hz > 0`` shows it in the first half of each period only."""

    kind: str
    color: str
    start: float
    end: float
    pos0: tuple[float, float] = (0.5, 0.5)
    pos1: tuple[float, float] | None = None
    size: float = 0.15
    flash_hz: float = 0

    def __post_init__(self) -> None:
        if self.kind not in SHAPE_KINDS:
            raise ValueError(f"Shape kind {self.kind!r} unknown; use one of {SHAPE_KINDS}")
        if self.color not in COLORS:
            raise ValueError(f"Shape color {self.color!r} unknown; use one of {sorted(COLORS)}")
        if not self.end > self.start:
            raise ValueError(f"Shape end ({self.end}) must be after start ({self.start})")
        if self.size <= 0:
            raise ValueError(f"Shape size must be positive, got {self.size}")

    @property
    def label(self) -> str:
        """How the sample benchmarks name it in questions and answers: "red circle"."""
        return f"{self.color} {self.kind}"


def _unclipped_box(shape: Shape, t: float, width: int, height: int) -> tuple[int, int, int, int]:
    side = max(1, round(shape.size * height))
    a = 0.0 if shape.pos1 is None else (t - shape.start) / (shape.end - shape.start)
    end = shape.pos1 or shape.pos0
    cx, cy = shape.pos0[0] + a * (end[0] - shape.pos0[0]), shape.pos0[1] + a * (end[1] - shape.pos0[1])
    x1 = round(cx * width - side / 2)
    y1 = round(cy * height - side / 2)
    return x1, y1, x1 + side, y1 + side


def shape_box(shape: Shape, t: float, width: int, height: int) -> tuple[int, int, int, int] | None:
    """Pixel box ``(x1, y1, x2, y2)`` of ``shape`` at ``t`` (x2/y2 exclusive, clipped to the frame);
    None when not visible (outside [start, end), in a flash-off half period, or off-frame)."""
    if not shape.start <= t < shape.end or (shape.flash_hz > 0 and ((t - shape.start) * shape.flash_hz) % 1.0 >= 0.5):
        return None
    x1, y1, x2, y2 = _unclipped_box(shape, t, width, height)
    cx1, cy1, cx2, cy2 = max(0, x1), max(0, y1), min(width, x2), min(height, y2)
    if cx1 >= cx2 or cy1 >= cy2:
        return None
    return cx1, cy1, cx2, cy2


def _shape_mask(kind: str, side: int) -> np.ndarray:
    if kind == "square":
        return np.ones((side, side), dtype=bool)
    c = (np.arange(side) + 0.5) / side  # pixel centres in [0, 1]
    if kind == "circle":
        return (c[:, None] - 0.5) ** 2 + (c[None, :] - 0.5) ** 2 <= 0.25
    # Upward triangle: apex at top centre, base along the bottom edge.
    return np.abs(c[None, :] - 0.5) <= c[:, None] / 2


def _draw(canvas: np.ndarray, shape: Shape, t: float, masks: dict) -> None:
    height, width = canvas.shape[:2]
    box = shape_box(shape, t, width, height)
    if box is None:
        return
    x1, y1, x2, _y2 = _unclipped_box(shape, t, width, height)
    key = (shape.kind, x2 - x1)  # the shape's side
    if key not in masks:
        masks[key] = _shape_mask(*key)
    cx1, cy1, cx2, cy2 = box
    canvas[cy1:cy2, cx1:cx2][masks[key][cy1 - y1 : cy2 - y1, cx1 - x1 : cx2 - x1]] = COLORS[shape.color]


def frame_times(duration: float, fps: float, vfr: bool = False) -> list[float]:
    """Presentation time (seconds) of every frame ``write_video`` writes (variable rate: see ``VFR_BLOCK``,
    times rounded to milliseconds)."""
    if duration <= 0 or fps <= 0:
        raise ValueError(f"duration and fps must be positive, got duration={duration}, fps={fps}")
    if not vfr:
        return [i / fps for i in range(max(1, round(duration * fps)))]
    times, t, i = [], 0.0, 0
    while t < duration - 1e-9:
        times.append(round(t, 3))
        t += VFR_FACTORS[(i // VFR_BLOCK) % 2] / fps
        i += 1
    return times


def _texture(width: int, height: int) -> np.ndarray:
    """A fixed noise + gradient field twice the frame size, scrolled per frame."""
    rng = np.random.default_rng(12345)
    h2, w2 = 2 * height, 2 * width
    noise = rng.integers(0, 256, size=(h2 // 4 + 1, w2 // 4 + 1, 3), dtype=np.uint8)
    # Upsample blocky noise and add fine noise: texture at several scales, like real footage.
    coarse = np.repeat(np.repeat(noise, 4, axis=0), 4, axis=1)[:h2, :w2].astype(np.int16)
    fine = rng.integers(-24, 25, size=(h2, w2, 1), dtype=np.int16)
    gy = np.linspace(0, 60, h2, dtype=np.float32)[:, None, None]
    gx = np.linspace(0, 60, w2, dtype=np.float32)[None, :, None]
    field = coarse // 2 + fine + (gy + gx).astype(np.int16)
    return np.clip(field, 0, 255).astype(np.uint8)


def _stamp_block(height: int) -> int:
    return max(4, height // 30)


def _stamp(canvas: np.ndarray, index: int) -> None:
    b = _stamp_block(canvas.shape[0])
    for bit in range(STAMP_BITS):
        canvas[0:b, bit * b : (bit + 1) * b] = 255 if (index >> bit) & 1 else 0


def read_index_stamp(frame) -> int:
    """The index written by ``write_video(..., stamp_index=True)`` in ``frame`` (RGB, written size)."""
    arr = np.asarray(frame)
    b = _stamp_block(arr.shape[0])
    return sum(1 << bit for bit in range(STAMP_BITS) if arr[1 : b - 1, bit * b + 1 : (bit + 1) * b - 1].mean() > 127)


def write_video(path, duration: float, shapes: Sequence[Shape] = (), *, fps: float = 10, width: int = 320, height: int = 240,
                gop: int = 250, bframes: int = 0, textured: bool = False, vfr: bool = False, stamp_index: bool = False,
                faststart: bool = False, open_gop: bool = False, pix_fmt: str = "yuv420p", preset: str = "ultrafast") -> Path:
    """Render ``shapes`` over ``duration`` seconds into a deterministic H.264 MP4 ``path`` (kept when
    it exists). ``gop``: keyframe interval, exact (no scene cuts); ``bframes``:
    consecutive B-frames (pyramid: some are references); ``textured``: a scrolling noise background
    (realistic bitrates); ``vfr``: see ``frame_times``; ``stamp_index``: each frame's index as a
    binary code (``read_index_stamp``); ``faststart``: moov first; ``open_gop``: non-IDR keyframes;
    ``pix_fmt``: ``yuv444p`` allows odd sizes; ``preset``: x264's (benchmarks/frame_sampling.py: veryfast)."""
    import av  # local: keeps `import synthetic` cheap for code that only needs Shape/shape_box

    path = Path(path)
    if path.exists():
        return path
    if pix_fmt == "yuv420p" and (width % 2 or height % 2):
        raise ValueError(f"width and height must be even for yuv420p (pix_fmt='yuv444p' takes odd ones), got {width}x{height}")
    path.parent.mkdir(parents=True, exist_ok=True)
    times = frame_times(duration, fps, vfr)
    texture = _texture(width, height) if textured else None
    rate = Fraction(fps).limit_denominator(1001)
    time_base = VFR_TIME_BASE if vfr else 1 / rate

    options = {"movflags": "faststart"} if faststart else {}
    with atomic_target(path) as tmp, av.open(str(tmp), mode="w", format="mp4", options=options) as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.codec_context.time_base = time_base
        stream.codec_context.gop_size = gop
        x264_params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}"
        if bframes:
            x264_params += ":b-adapt=0:b-pyramid=normal"
        if open_gop:
            x264_params += ":open-gop=1"
        stream.options = {"preset": preset, "crf": "23", "x264-params": x264_params}
        masks: dict = {}
        canvas = np.empty((height, width, 3), dtype=np.uint8)
        for i, t in enumerate(times):
            if texture is not None:
                # Scroll diagonally at a steady pace: motion the encoder can predict.
                dy, dx = (2 * i) % height, (3 * i) % width
                canvas[:] = texture[dy : dy + height, dx : dx + width]
            else:
                canvas[:] = 0  # black
            for shape in shapes:
                _draw(canvas, shape, t, masks)
            if stamp_index:
                _stamp(canvas, i)
            frame = av.VideoFrame.from_ndarray(canvas, format="rgb24")
            frame.pts = round(Fraction(t).limit_denominator(10**6) / time_base) if vfr else i
            frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@dataclass(frozen=True)
class Clip:
    """One synthetic video of the sample benchmarks: ``shapes`` over ``duration`` seconds at ``fps``, ``width`` x ``height``."""

    duration: float
    fps: float
    width: int
    height: int
    shapes: tuple[Shape, ...]

    def shape(self, label: str) -> Shape:
        """The first of its shapes called ``label`` (``Shape.label``)."""
        return next(shape for shape in self.shapes if shape.label == label)

    def write(self, path, **encoding) -> Path:
        """``write_video`` of the clip to ``path`` (kept when it exists); ``encoding``: its further options (e.g. ``gop``)."""
        return write_video(path, self.duration, self.shapes, fps=self.fps, width=self.width, height=self.height, **encoding)


def _srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def write_srt(path, cues: Sequence[tuple[float, float, str]]) -> Path:
    """Write ``(start_s, end_s, text)`` cues as a UTF-8 SRT file (indices from 1); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blocks = [f"{n}\n{_srt_time(start)} --> {_srt_time(end)}\n{text}\n" for n, (start, end, text) in enumerate(cues, start=1)]
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path

