"""Frame sampling: a benchmark's frame plan, and a fast exact decoder for the frames it picks.

Every benchmark decides which frames a frame-based model sees and tells it their times; the
published numbers depend on those exact frames. Each benchmark declares that choice as a
``FramePlan`` in its own folder (``frames.py``); this module decodes exactly those frames.

Public interface
----------------
- ``VideoError`` (a ``ValueError``): the file is missing, empty, truncated, corrupt or has no
  video stream. The message names the file and what to do; never a decoder traceback.
- ``probe(path) -> VideoInfo(total_frames, fps, duration, width, height)``: from the container.
  ``total_frames`` is exact: it counts the packets of the video stream (a packet scan), because
  header counts are missing or wrong in real files (and a truncated file is detected by
  comparing the two); ``probe(path, exact=False)`` reads only the header when it has a count.
- ``FramePlan(name, times, pick=..., pick_in_intervals=..., size=...)``: a protocol's pure index
  and timestamp functions, declared by each benchmark (``<benchmark>/frames.py``).
- ``read_frames(path, indices, *, size=None, as_array=False)``: the frames at those
  presentation-order indices (index ``i`` = the ``i``-th frame a full sequential decode
  yields), as RGB PIL images or one ``(N, H, W, 3)`` uint8 array, in the order asked.
- ``plan_frames(path, plan, n, *, intervals=None, meta=None) -> PlannedFrames``
  ``(path, indices, timestamps, fps, total_frames, size, notes)``: what every benchmark's
  production code calls (its ``frames.py``) to turn its plan into indices and the times it
  shows, before decoding; ``resolve_meta`` is the rule for dataset metadata (a per-video frame
  table) that disagrees with the file; ``notes`` lists what was clamped, dropped or overridden
  (also logged as warnings). ``PlannedFrames.read()`` decodes them.
- ``sample(path, plan, n, *, intervals=None, size=None, meta=None) -> SampledFrames``: the
  two steps at once (frames, indices, timestamps, fps, total_frames, notes).
- ``cut_clip(path, intervals_s, cache_dir) -> Path``: the clue intervals concatenated into a
  new MP4, for models that only accept a video path; ``clue_clip(official_clip, path,
  intervals_s, cache_dir)`` prefers the dataset's own clip when it exists.

How the decoder is fast and exact
---------------------------------
A packet scan gives the frame table: every packet's pts, keyframe flag and decode position.
Presentation index ``i`` is the ``i``-th smallest pts, so variable-frame-rate and B-frame files
map index -> frame exactly (anything that maps index -> time with the average fps drifts on
VFR files, and container index timestamps are in decode order on B-frame files). Targets are
grouped by the keyframe they must be decoded from; each group seeks once to its keyframe and
sends the decoder only the packets it needs: reference frames (others depend on them) and the
targets themselves. Non-reference frames that are not targets (most B-frames) are never
decoded. Worker threads pull groups from one queue (longest first), each with its own demuxer
and decoder (PyAV releases the GIL while decoding). ``benchmarks/frame_sampling.py`` measures
this against decord and a full sequential decode; ``utils/media/VIDEO.md`` records the figures.
"""

from __future__ import annotations

import bisect
import collections
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
from lmms_video_reasoning.utils.core.files import atomic_target
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.core.frame_plan import FramePlan, choose
from lmms_video_reasoning.utils.core.intervals import clamp_intervals

logger = logging.getLogger(__name__)

# Meta and container agree when the frame counts differ by at most this many frames or this
# fraction (CG-Bench `max_frame` is the container count minus one) and the fps by this fraction.
META_FRAME_TOLERANCE = 2
META_FRAME_TOLERANCE_FRACTION = 0.01
META_FPS_TOLERANCE_FRACTION = 0.01

DEFAULT_WORKERS = max(1, min(2, os.cpu_count() or 1))


class VideoError(ValueError):
    """A video file cannot be used: missing, empty, truncated, corrupt, or no video stream."""


@dataclass(frozen=True)
class VideoInfo:
    """What the container says, with an exact frame count from a packet scan."""

    total_frames: int
    fps: float
    duration: float
    width: int
    height: int


@dataclass
class SampledFrames:
    """Frames a protocol shows a model, with the indices and times it tells the model.

    ``timestamps`` are the protocol's (``round(idx / fps, k)``), ``fps`` and ``total_frames``
    the values the indices and timestamps were computed from (see ``resolve_meta``);
    ``notes`` lists anything worth a warning (meta disagreement, clamped intervals).
    """

    frames: list | np.ndarray
    indices: list[int]
    timestamps: list[float]
    fps: float
    total_frames: int
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Opening files and the frame table
# --------------------------------------------------------------------------------------------


def _open(path: Path):
    """Open ``path`` with PyAV, turning every failure into a VideoError that says what to do."""
    import av

    if not path.exists():
        raise VideoError(f"video file not found: {path}. Check the dataset path (or download the video).")
    if path.is_dir():
        raise VideoError(f"video path is a directory, not a file: {path}")
    if path.stat().st_size == 0:
        raise VideoError(f"video file is empty (0 bytes): {path}. Re-download or re-extract it.")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError, OSError) as exc:
        raise VideoError(
            f"video file cannot be opened (truncated or corrupt, or not a video): {path} ({_short(exc)}). "
            "Re-download or re-extract it."
        ) from None
    if not container.streams.video:
        container.close()
        raise VideoError(f"file has no video stream: {path}. Point the dataset at the video file itself.")
    return container


def _short(exc: BaseException) -> str:
    """One line about ``exc``: FFmpeg's reason without errno noise."""
    text = getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
    return text.splitlines()[0][:200]


@dataclass(frozen=True)
class _FrameTable:
    """Packets of the video stream in decode order, and the presentation order over them."""

    path: Path
    info: VideoInfo
    codec: str
    time_base: Fraction  # of pts
    nal_length_size: int  # AVCC/HVCC NAL length prefix (0: unknown format, no packet skipping)
    pts: list[int]  # decode order
    keyframes: list[int]  # decode positions of keyframes, ascending
    decode_pos: list[int]  # presentation index -> decode position
    pos_of_pts: dict[int, int]  # pts -> decode position


_TABLE_CACHE: dict[tuple, _FrameTable] = {}
_TABLE_LOCK = threading.Lock()
_TABLE_CACHE_SIZE = 8


def _frame_table(path, *, use_cache: bool = True) -> _FrameTable:
    """The frame table of ``path`` (cached by path, size and mtime)."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if use_cache and key is not None:
        with _TABLE_LOCK:
            if key in _TABLE_CACHE:
                return _TABLE_CACHE[key]
    table = _scan(path)
    if use_cache and key is not None:
        with _TABLE_LOCK:
            if len(_TABLE_CACHE) >= _TABLE_CACHE_SIZE:
                _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
            _TABLE_CACHE[key] = table
    return table


def _nal_length_size(codec: str, extradata: bytes | None) -> int:
    """Length-prefix size of NAL units in MP4/MKV H.264 packets (from avcC); 0 when unknown."""
    if not extradata:
        return 0
    if codec == "h264" and extradata[0] == 1 and len(extradata) > 4:
        return (extradata[4] & 0x03) + 1
    return 0


def _scan(path: Path) -> _FrameTable:
    """Read every packet header of the video stream (no decoding) into a frame table."""
    import av

    container = _open(path)
    try:
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        nal_size = _nal_length_size(codec, stream.codec_context.extradata)
        header_frames = stream.frames
        pts: list[int] = []
        keyframes: list[int] = []
        try:
            for packet in container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue
                p = packet.pts if packet.pts is not None else packet.dts
                if p is None:
                    raise VideoError(
                        f"video has packets without timestamps, frames cannot be located exactly: {path}. "
                        "Remux it (ffmpeg -i in -c copy out.mp4)."
                    )
                if packet.is_keyframe:
                    keyframes.append(len(pts))
                pts.append(p)
        except av.error.FFmpegError as exc:
            raise VideoError(f"video file is truncated or corrupt: {path} ({_short(exc)}). Re-download it.") from None
        if not pts:
            raise VideoError(f"video stream has no frames: {path}. Re-download or re-extract it.")
        if header_frames and len(pts) < header_frames:
            raise VideoError(
                f"video file is truncated: {path} lists {header_frames} frames but only {len(pts)} can be read. "
                "Re-download it."
            )
        if not keyframes or keyframes[0] != 0:
            # Frames before the first keyframe cannot be decoded; treat the first packet as the
            # start point (decoders conceal what they can), as a sequential decode would.
            keyframes.insert(0, 0)
        order = sorted(range(len(pts)), key=pts.__getitem__)
        pos_of_pts = {p: i for i, p in enumerate(pts)}
        if len(pos_of_pts) != len(pts):
            raise VideoError(f"video has duplicate frame timestamps, frames cannot be located exactly: {path}. Remux it.")
        tb = stream.time_base
        if stream.duration:
            duration = float(stream.duration * tb)
        elif container.duration:
            duration = container.duration / 1_000_000
        else:
            duration = float((pts[order[-1]] - pts[order[0]]) * tb)
        if stream.average_rate:
            fps = float(stream.average_rate)
        elif duration > 0:
            fps = len(pts) / duration
        else:
            raise VideoError(f"video has no frame rate and no duration: {path}. Remux it.")
        info = VideoInfo(
            total_frames=len(pts),
            fps=fps,
            duration=duration,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
        )
        return _FrameTable(path, info, codec, tb, nal_size, pts, keyframes, order, pos_of_pts)
    finally:
        container.close()


_INFO_CACHE_SIZE = 4096  # a few hundred bytes each: one per video of a benchmark's split
_INFO_CACHE: BoundedMemo[VideoInfo] = BoundedMemo(_INFO_CACHE_SIZE)
_META_WARNED: set[str] = set()


def probe(path, *, exact: bool = True) -> VideoInfo:
    """Frame count, average fps, duration (s), width, height of ``path``.

    ``exact``: the frame count of a packet scan (header counts are missing or wrong in real
    files). ``exact=False``: the container header's count when it has one (no packet scan;
    milliseconds for an hour of video), else the packet scan's; what a metadata check needs
    when frames are not decoded yet. Remembered per file (path, size, mtime).
    """
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns, exact)
    except OSError:
        key = None
    if key is None:
        return (None if exact else _header_info(path)) or _frame_table(path).info
    return _INFO_CACHE.get_or_make(key, lambda: (None if exact else _header_info(path)) or _frame_table(path).info)


def _header_info(path: Path) -> VideoInfo | None:
    """What the container header says, when it counts the frames and gives a rate (else None)."""
    container = _open(path)
    try:
        stream = container.streams.video[0]
        if not stream.frames or not stream.average_rate:
            return None
        if stream.duration:
            duration = float(stream.duration * stream.time_base)
        else:
            duration = stream.frames / float(stream.average_rate)
        return VideoInfo(int(stream.frames), float(stream.average_rate), duration, stream.codec_context.width,
                         stream.codec_context.height)
    finally:
        container.close()


# --------------------------------------------------------------------------------------------
# Decoding planned per keyframe group
# --------------------------------------------------------------------------------------------


def _is_reference(data, codec: str, nal_size: int) -> bool:
    """Whether a packet's picture may be referenced by others (so it cannot be skipped).

    H.264 (length-prefixed NAL units, as in MP4/MKV): reference unless every slice NAL
    (type 1 or 5) has ``nal_ref_idc == 0``, the standard's mark of a picture no other picture
    uses. Other codecs or layouts: always True (never skipped; HEVC's "non-reference" types
    may still be referenced by higher temporal sub-layers).
    """
    if nal_size == 0 or codec != "h264":
        return True
    view = memoryview(data)
    i, end, slices = 0, len(view), 0
    while i + nal_size < end:
        length = int.from_bytes(view[i : i + nal_size], "big")
        header = view[i + nal_size]
        if header & 0x1F in (1, 5):
            if header & 0x60:
                return True
            slices += 1
        i += nal_size + length
    return slices == 0


@dataclass(frozen=True)
class _Run:
    """Decode positions ``start`` (a keyframe) .. ``end`` and the targets inside."""

    start: int
    end: int
    targets: frozenset[int]  # decode positions


def _start_keyframe(table: _FrameTable, d: int) -> int:
    """Last keyframe at or before decode position ``d`` whose pts does not follow ``d``'s.

    A frame shown before its keyframe but decoded after it (an open-GOP leading picture) may
    reference the previous group, so it starts from the keyframe before.
    """
    k = bisect.bisect_right(table.keyframes, d) - 1
    while k > 0 and table.pts[table.keyframes[k]] > table.pts[d]:
        k -= 1
    return table.keyframes[max(k, 0)]


def _plan(table: _FrameTable, targets: Iterable[int]) -> list[_Run]:
    """Group target decode positions into runs that each start at one keyframe.

    Adjacent or overlapping groups merge into one run (decoding on is cheaper than seeking).
    """
    by_key: dict[int, list[int]] = {}
    for d in sorted(set(targets)):
        by_key.setdefault(_start_keyframe(table, d), []).append(d)
    runs: list[_Run] = []
    for k in sorted(by_key):
        ds = by_key[k]
        if runs and k <= runs[-1].end + 1:
            last = runs[-1]
            runs[-1] = _Run(last.start, max(last.end, max(ds)), last.targets | frozenset(ds))
        else:
            runs.append(_Run(k, max(ds), frozenset(ds)))
    return runs


def _decode_runs(table: _FrameTable, runs: Iterable[_Run], sink, skip_nonref: bool = True) -> None:
    """Decode ``runs`` with one demuxer + decoder, calling ``sink(decode_pos, frame)`` per target.

    Within a run frames arrive in presentation order (the decoder reorders). With
    ``skip_nonref`` only the keyframe, reference frames and the targets are decoded.
    """
    import av

    container = _open(table.path)
    try:
        stream = container.streams.video[0]
        cc = stream.codec_context
        cc.thread_type = "NONE"
        cc.thread_count = 1
        for run in runs:
            if not _decode_run(container, stream, table, run, sink, skip_nonref, seek_to_start=False):
                # The demuxer landed after the keyframe (an unusual index): read from the start.
                _decode_run(container, stream, table, run, sink, skip_nonref, seek_to_start=True)
    except av.error.FFmpegError as exc:
        raise VideoError(f"video file is corrupt, decoding failed: {table.path} ({_short(exc)}). Re-download it.") from None
    finally:
        container.close()


def _decode_run(container, stream, table: _FrameTable, run: _Run, sink, skip_nonref: bool, seek_to_start: bool) -> bool:
    """Seek, then decode one run; False (nothing decoded) if the seek landed past its keyframe."""
    cc, pos_of_pts = stream.codec_context, table.pos_of_pts
    _seek_to(container, stream, table, table.decode_pos[0] if seek_to_start else run.start)
    started = False
    for packet in container.demux(stream):
        if packet.size == 0 or packet.is_discard:
            continue
        d = pos_of_pts.get(packet.pts if packet.pts is not None else packet.dts)
        if d is None or d < run.start:
            continue
        if not started and d > run.start:
            return False
        if d > run.end:
            break
        started = True
        if (
            d == run.start
            or d in run.targets
            or not skip_nonref
            or _is_reference(packet, table.codec, table.nal_length_size)
        ):
            _deliver(cc.decode(packet), run, pos_of_pts, sink)
    _deliver(cc.decode(None), run, pos_of_pts, sink)  # drain frames held for reordering
    cc.flush_buffers()
    return True


def _deliver(frames, run: _Run, pos_of_pts: dict[int, int], sink) -> None:
    for frame in frames:
        d = pos_of_pts.get(frame.pts)
        if d in run.targets:
            sink(d, frame)


def _seek_to(container, stream, table: _FrameTable, start: int) -> None:
    """Position the demuxer at or before decode position ``start`` (a keyframe)."""
    container.seek(table.pts[start], stream=stream, backward=True, any_frame=False)


def _to_rgb(frame, size: tuple[int, int] | None, resize: Callable[[np.ndarray, tuple[int, int]], np.ndarray] | None = None) -> np.ndarray:
    """RGB uint8 array of a decoded frame, resized when ``size`` differs: with ``resize(arr, size)``
    when given, else OpenCV bilinear."""
    arr = frame.to_ndarray(format="rgb24")
    if size is not None and (arr.shape[1], arr.shape[0]) != tuple(size):
        if resize is not None:
            return resize(arr, tuple(size))
        import cv2

        arr = cv2.resize(arr, tuple(size), interpolation=cv2.INTER_LINEAR)
    return arr


def _decode_parallel(table: _FrameTable, runs: list[_Run], sink, workers: int) -> None:
    """Decode ``runs`` on ``workers`` threads, each with its own demuxer and decoder, pulling
    runs from one shared queue, longest first: no thread idles while another still has work
    (fixed contiguous shares left one core idle for up to a third of the time)."""
    if workers <= 1 or len(runs) <= 1:
        _decode_runs(table, runs, sink)
        return
    queue = collections.deque(sorted(runs, key=lambda run: run.end - run.start, reverse=True))

    def pull():
        while True:
            try:
                yield queue.popleft()  # atomic: each run goes to exactly one thread
            except IndexError:
                return

    threads = min(workers, len(runs))
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(lambda _n: _decode_runs(table, pull(), sink), range(threads)):
            pass


def read_frames(
    path,
    indices: Sequence[int],
    *,
    size: tuple[int, int] | None = None,
    as_array: bool = False,
    workers: int = DEFAULT_WORKERS,
    resize: Callable[[np.ndarray, tuple[int, int]], np.ndarray] | None = None,
):
    """Frames at presentation-order ``indices`` of ``path``, in the order given (repeats allowed).

    Index ``i`` is the ``i``-th frame a full sequential decode yields. Returns RGB PIL images,
    or with ``as_array`` one ``(N, H, W, 3)`` uint8 array (filled in place: peak memory is the
    returned frames plus one frame per worker). ``size`` = ``(width, height)`` resizes with
    bilinear interpolation (OpenCV ``INTER_LINEAR``, as official code that resizes with cv2 does),
    or with ``resize(frame, (width, height))`` when given (run in the decoding threads, so a
    full-size copy of every frame is never held).
    ``workers``: decoding threads. Raises VideoError for unreadable files, IndexError for
    indices outside the video.
    """
    from PIL import Image

    path = Path(path)
    table = _frame_table(path)
    total = table.info.total_frames
    indices = [int(i) for i in indices]
    bad = [i for i in indices if not 0 <= i < total]
    if bad:
        raise IndexError(f"frame index {bad[0]} out of range for {path} ({total} frames)")
    rows: dict[int, list[int]] = {}  # decode position -> output positions
    for r, i in enumerate(indices):
        rows.setdefault(table.decode_pos[i], []).append(r)
    width, height = size if size is not None else (table.info.width, table.info.height)
    out = np.empty((len(indices), height, width, 3), dtype=np.uint8) if as_array else [None] * len(indices)

    decoded: set[int] = set()

    def sink(d: int, frame) -> None:
        arr = _to_rgb(frame, size, resize)
        for r in rows[d]:
            out[r] = arr if as_array else Image.fromarray(arr)
        decoded.add(d)

    _decode_parallel(table, _plan(table, rows), sink, workers)
    missing = [i for i in indices if table.decode_pos[i] not in decoded]
    if missing:
        raise VideoError(
            f"video file is corrupt: frame {missing[0]} of {path} could not be decoded "
            f"({len(set(missing))} frame(s) missing). Re-download it."
        )
    return out


# --------------------------------------------------------------------------------------------
# Protocol sampling with metadata cross-check
# --------------------------------------------------------------------------------------------


def resolve_meta(info: VideoInfo | None, meta: dict | None, path=None) -> tuple[int, float, list[str]]:
    """Frame count and fps the protocol formulas use: ``(total, fps, notes)``.

    Rule: the dataset's metadata (CG-Bench ``video_meta_info.json``: ``max_frame``, ``fps``;
    ``total_frames`` is accepted too) is what the official sampler used, so it wins while it
    describes this file: frame counts within ``META_FRAME_TOLERANCE`` frames or
    ``META_FRAME_TOLERANCE_FRACTION`` and fps within ``META_FPS_TOLERANCE_FRACTION``
    (CG-Bench ``max_frame`` is one less than the container count). Otherwise the metadata
    describes another encoding of the video, the container wins (it is the file being
    decoded) and a note is returned and logged. Without metadata: the container. Without the
    file's figures (``info`` None): the metadata, as it stands.
    """
    if not meta:
        return info.total_frames, info.fps, []
    meta_total = meta.get("max_frame", meta.get("total_frames"))
    meta_fps = meta.get("fps")
    if meta_total is None or not meta_fps:
        raise ValueError(f"video metadata needs 'max_frame' (or 'total_frames') and 'fps', got keys {sorted(meta)}")
    if info is None:
        return int(meta_total), float(meta_fps), []
    frame_tol = max(META_FRAME_TOLERANCE, META_FRAME_TOLERANCE_FRACTION * info.total_frames)
    agrees = (
        abs(int(meta_total) - info.total_frames) <= frame_tol
        and abs(float(meta_fps) - info.fps) <= META_FPS_TOLERANCE_FRACTION * info.fps
    )
    if agrees:
        return int(meta_total), float(meta_fps), []
    note = (
        f"metadata ({meta_total} frames at {float(meta_fps):.4f} fps) disagrees with the video file "
        f"{path or ''} ({info.total_frames} frames at {info.fps:.4f} fps); using the file's values"
    )
    with _TABLE_LOCK:  # once per file and process: a video's questions all ask for its plan
        first = note not in _META_WARNED
        if first and len(_META_WARNED) < _INFO_CACHE_SIZE:
            _META_WARNED.add(note)
    if first:
        logger.warning(note)
    return info.total_frames, info.fps, [note]


_NATIVE = "native"


@dataclass(frozen=True)
class PlannedFrames:
    """The frames a protocol picks in one file, before any decoding: presentation ``indices``,
    the ``timestamps`` shown to the model, the ``fps`` and ``total_frames`` they were computed
    from (``resolve_meta``), the protocol's frame ``size`` and ``notes`` (meta disagreement,
    clamped intervals, dropped indices; each also logged as a warning)."""

    path: Path | None
    indices: list[int]
    timestamps: list[float]
    fps: float
    total_frames: int
    size: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()

    def read(self, *, size: tuple[int, int] | str | None = None, as_array: bool = False, workers: int = DEFAULT_WORKERS):
        """The planned frames (``read_frames``); ``size`` None: the plan's size (or the decoded
        size), ``(width, height)``, or ``"native"``."""
        if self.path is None:
            raise VideoError(f"no video file to read the planned frames from ({'; '.join(self.notes)})")
        size = size if size is not None else (self.size or _NATIVE)
        return read_frames(self.path, self.indices, size=None if size == _NATIVE else tuple(size), as_array=as_array, workers=workers)


def plan_frames(
    path,
    plan: FramePlan,
    n: int,
    *,
    intervals: Sequence[Sequence[float]] | None = None,
    meta: dict | None = None,
) -> PlannedFrames:
    """The ``n`` frames ``plan`` (a benchmark's ``FramePlan``) picks in ``path``, and their times.

    The plugin's path from a file to a protocol's frame indices, for every benchmark (the indices
    themselves come from ``frame_plan.choose``, as upstream's plain probe does). ``intervals``:
    the question's intervals (seconds), for plans that pick inside them. ``meta``: the dataset's
    per-video metadata (e.g. CG-Bench's ``video_meta_info.json`` entry), checked against the file
    (``resolve_meta``: the official values while they describe this file, else the file's, with a
    note); then only the container header is read (``probe(exact=False)``), so a prompt that
    shows frame times needs no decoding. Without ``meta``: the exact frame count of a packet scan.
    Indices the metadata puts past the file's last frame are dropped with a note (the official
    CG-Bench code skips frames it cannot find). With ``meta``, a file that is not at hand
    (``path`` None, e.g. replay predictions scored where the videos are not) or cannot be opened
    leaves the metadata unchecked, with a note; reading the frames then fails, naming the file.
    """
    if not isinstance(plan, FramePlan):  # before any file is opened
        raise ValueError(f"unknown sampling protocol {plan!r}: pass a benchmark's FramePlan (its frames.py)")
    path = None if path is None else Path(path)
    try:
        if path is None:
            raise VideoError("the video file is not at hand")
        info = probe(path, exact=not meta)
        total, fps, notes = resolve_meta(info, meta, path)
        in_file = info.total_frames
    except VideoError as error:
        if not meta:
            raise
        total, fps, _none = resolve_meta(None, meta)
        notes = [f"metadata not checked against the file {path or ''}: {error}"]
        in_file = None  # unknown: no index is dropped
        logger.debug(notes[-1])
    chosen = choose(plan, total, fps, n, intervals)
    if chosen.clamped:
        notes.append(f"{chosen.clamped} clue interval(s) past the video end ({total / fps:.3f} s) were clamped")
    indices = chosen.indices
    past_end = 0 if in_file is None else sum(i >= in_file for i in indices)
    if past_end:  # metadata a frame or two longer than the file: drop, as official CG-Bench does
        indices = [i for i in indices if i < in_file]
        notes.append(f"{past_end} index(es) past the last frame ({in_file - 1}) were dropped")
        logger.warning("%s: %s", path, notes[-1])
    return PlannedFrames(path, indices, plan.times(indices, fps), fps, total, plan.size, tuple(notes))


def sample(
    path,
    plan: FramePlan,
    n: int,
    *,
    intervals: Sequence[Sequence[float]] | None = None,
    size: tuple[int, int] | str | None = None,
    meta: dict | None = None,
    as_array: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> SampledFrames:
    """Sample ``n`` frames of ``path`` as ``plan`` says (``plan_frames``, then ``read``): frames,
    indices and the plan's timestamps. ``size``: None = the plan's size (or the decoded size),
    ``(width, height)``, or ``"native"``."""
    planned = plan_frames(path, plan, n, intervals=intervals, meta=meta)
    frames = planned.read(size=size, as_array=as_array, workers=workers)
    return SampledFrames(frames, planned.indices, planned.timestamps, planned.fps, planned.total_frames, list(planned.notes))


# --------------------------------------------------------------------------------------------
# Clue clips for models that only take a video path
# --------------------------------------------------------------------------------------------


def _clip_key(path: Path, intervals: list[list[float]]) -> str:
    st = path.stat()
    text = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{intervals!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _clip_frames(table: _FrameTable, merged: list[list[float]]) -> list[int]:
    """Presentation indices of the frames shown inside ``merged`` intervals (seconds).

    A frame belongs to ``[s, e)`` when its presentation time (from the first frame) does; a
    zero-length interval contributes the frame on screen at ``s``.
    """
    first = table.pts[table.decode_pos[0]]
    seconds = [float((table.pts[d] - first) * table.time_base) for d in table.decode_pos]
    picked: list[int] = []
    for s, e in merged:
        lo, hi = bisect.bisect_left(seconds, s), bisect.bisect_left(seconds, e)
        if hi <= lo:  # zero-length (or between two frames): the frame on screen at s
            lo = max(0, bisect.bisect_right(seconds, s) - 1)
            hi = lo + 1
        picked.extend(i for i in range(lo, hi) if not picked or i > picked[-1])
    return picked


def cut_clip(path, intervals_s: Sequence[Sequence[float]], cache_dir, *, crf: int = 18) -> Path:
    """A new MP4 of the frames inside ``intervals_s`` (seconds), concatenated in time order.

    For models that only take a video path (clue-only questions). Intervals are clamped to
    the video and merged (overlaps would repeat frames); frames are re-encoded (H.264,
    ``crf``) rather than stream-copied, so the clip starts exactly at the interval, not at
    the previous keyframe, and is played at the source's average fps. The file is cached in
    ``cache_dir`` under a name keyed by the video's path, size, mtime and the intervals;
    concurrent writers are safe (each writes a temporary file, then ``os.replace``).
    """
    import av
    from lmms_video_reasoning.utils.core.intervals import merge_intervals

    path = Path(path)
    table = _frame_table(path)
    clamped, n_clamped = clamp_intervals(intervals_s, table.info.duration)
    if n_clamped:
        logger.warning("%s: %d clip interval(s) past the end (%.3f s) were clamped", path, n_clamped, table.info.duration)
    merged = merge_intervals(clamped)
    if not merged:
        raise ValueError(f"cut_clip needs at least one interval for {path}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{path.stem}-{_clip_key(path, merged)}.mp4"
    if target.exists() and target.stat().st_size > 0:
        return target
    indices = _clip_frames(table, merged)
    decode_positions = {table.decode_pos[i]: n for n, i in enumerate(indices)}
    rate = Fraction(table.info.fps).limit_denominator(1001)
    with atomic_target(target) as tmp:
        with av.open(str(tmp), mode="w", format="mp4") as out:
            stream = out.add_stream("libx264", rate=rate)
            stream.width, stream.height, stream.pix_fmt = table.info.width, table.info.height, "yuv420p"
            stream.options = {"preset": "veryfast", "crf": str(crf)}

            def sink(d: int, frame) -> None:
                frame.pts, frame.time_base = decode_positions[d], 1 / rate
                frame.pict_type = av.video.frame.PictureType.NONE
                for packet in stream.encode(frame):
                    out.mux(packet)

            # Runs arrive in time order and frames in presentation order within a run.
            _decode_runs(table, _plan(table, decode_positions), sink, skip_nonref=False)
            for packet in stream.encode():
                out.mux(packet)
    return target


def clue_clip(official_clip, path, intervals_s: Sequence[Sequence[float]], cache_dir) -> Path:
    """The dataset's own clue clip (e.g. CG-Bench ``cg_clue_videos/{qid}.mp4``) when it exists
    and is not empty, else ``cut_clip(path, intervals_s, cache_dir)``."""
    if official_clip is not None:
        official_clip = Path(official_clip)
        if official_clip.is_file() and official_clip.stat().st_size > 0:
            return official_clip
    return cut_clip(path, intervals_s, cache_dir)
