"""The fast exact decoder: the frames at given presentation indices, decoding no more than needed.

The frame table (``frame_table.py``) gives every packet's pts, keyframe flag and decode position.
Targets are grouped by the keyframe they must be decoded from; each group seeks once to it and
sends the decoder only reference frames and the targets (most B-frames are never decoded). Worker
threads pull groups from one queue (longest first), each with its own demuxer and decoder (PyAV
releases the GIL). ``benchmarks/frame_sampling.py`` measures it (figures in ``utils/media/VIDEO.md``).
``read_frames`` is the entry point; ``_plan`` / ``_decode_runs`` also serve clue clips (``video.cut_clip``).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lmms_video_reasoning.utils.media.frame_table import VideoError, _frame_table, _FrameTable, _open, _short

DEFAULT_WORKERS = max(1, min(2, os.cpu_count() or 1))


def _is_reference(data, nal_size: int) -> bool:
    """Whether a packet's picture may be referenced by others (so it cannot be skipped): for H.264 in
    MP4/MKV (``nal_size`` > 0), unless every slice NAL (type 1 or 5) has ``nal_ref_idc == 0``; other
    codecs: always (HEVC's "non-reference" types may still be referenced by higher temporal sub-layers)."""
    if nal_size == 0:
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
    """Last keyframe at or before decode position ``d`` whose pts does not follow ``d``'s (an open-GOP
    leading picture may reference the previous group, so it starts from the keyframe before)."""
    k = bisect.bisect_right(table.keyframes, d) - 1
    while k > 0 and table.pts[table.keyframes[k]] > table.pts[d]:
        k -= 1
    return table.keyframes[max(k, 0)]


def _plan(table: _FrameTable, targets: Iterable[int]) -> list[_Run]:
    """Target decode positions in runs that each start at one keyframe (adjacent or overlapping
    groups merge: decoding on is cheaper than seeking)."""
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
    """Decode ``runs`` with one demuxer + decoder, calling ``sink(decode_pos, frame)`` per target in
    presentation order; with ``skip_nonref`` only the keyframe, reference frames and targets are decoded."""
    import av

    try:
        with _open(table.path) as container:
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
        if d == run.start or d in run.targets or not skip_nonref or _is_reference(packet, table.nal_length_size):
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
    container.seek(table.pts[start], stream=stream, backward=True, any_frame=False)


def _decode_parallel(table: _FrameTable, runs: list[_Run], sink, workers: int) -> None:
    """Decode ``runs`` on ``workers`` threads pulling from one queue, longest first (fixed contiguous
    shares left one core idle for up to a third of the time)."""
    if workers <= 1 or len(runs) <= 1:
        _decode_runs(table, runs, sink)
        return
    # One list iterator shared by the threads: under the GIL each `next` hands a run to exactly one of them.
    queue = iter(sorted(runs, key=lambda run: run.end - run.start, reverse=True))
    threads = min(workers, len(runs))
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _n: _decode_runs(table, queue, sink), range(threads)))


def read_frames(path, indices: Sequence[int], *, size: tuple[int, int] | None = None, as_array: bool = False,
                workers: int = DEFAULT_WORKERS, resize: Callable[[np.ndarray, tuple[int, int]], np.ndarray] | None = None):
    """Frames at presentation-order ``indices`` of ``path`` (the ``i``-th frame a sequential decode
    yields), in the order given: RGB PIL images, or with ``as_array`` one ``(N, H, W, 3)`` uint8 array
    filled in place. ``size`` = ``(width, height)`` resizes with OpenCV ``INTER_LINEAR`` (as official
    code using cv2 does) or ``resize(frame, size)``, in the decoding threads (no full-size copy of
    every frame is held). VideoError for unreadable files, IndexError for indices outside the video."""
    import cv2
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
        arr = frame.to_ndarray(format="rgb24")
        if size is not None and (arr.shape[1], arr.shape[0]) != tuple(size):
            arr = resize(arr, tuple(size)) if resize is not None else cv2.resize(arr, tuple(size), interpolation=cv2.INTER_LINEAR)
        for r in rows[d]:
            out[r] = arr if as_array else Image.fromarray(arr)
        decoded.add(d)

    _decode_parallel(table, _plan(table, rows), sink, workers)
    missing = [i for i in indices if table.decode_pos[i] not in decoded]
    if missing:
        raise VideoError(f"video file is corrupt: frame {missing[0]} of {path} could not be decoded "
                         f"({len(set(missing))} frame(s) missing). Re-download it.")
    return out
