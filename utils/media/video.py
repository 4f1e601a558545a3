"""Frame sampling: a benchmark's frame plan on a video file, and clue clips.

The published numbers depend on the exact frames a model sees. Each benchmark declares its choice
as a ``FramePlan`` (its ``frames.py``); ``plan_frames`` turns it into the indices and times of one
file (checked against the dataset's metadata) and ``read_frames`` decodes exactly those
(``frame_decoder``); ``cut_clip`` serves models that take only a path.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from lmms_video_reasoning.utils.core.files import atomic_target
from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan, choose
from lmms_video_reasoning.utils.core.intervals import clamp_intervals, merge_intervals
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.media.frame_decoder import _decode_runs, _plan, read_frames  # noqa: F401 - `video.read_frames`
from lmms_video_reasoning.utils.media.frame_table import VideoError, VideoInfo, _frame_table, _FrameTable, file_key, probe

logger = logging.getLogger(__name__)

_META_WARNED: BoundedMemo[str] = BoundedMemo(4096)  # notes already logged


def resolve_meta(info: VideoInfo | None, meta: dict | None, path=None) -> tuple[int, float, list[str]]:
    """Frame count and fps the protocol formulas use: ``(total, fps, notes)``. The dataset's metadata
    (``max_frame`` or ``total_frames``, ``fps``) is what the official sampler used, so it wins while
    it describes this file (within the tolerances below); otherwise it describes another
    encoding, and the container wins with a note (logged once). Without ``info``: the metadata."""
    if not meta:
        return info.total_frames, info.fps, []
    meta_total = meta.get("max_frame", meta.get("total_frames"))
    meta_fps = meta.get("fps")
    if meta_total is None or not meta_fps:
        raise ValueError(f"video metadata needs 'max_frame' (or 'total_frames') and 'fps', got keys {sorted(meta)}")
    if info is None:
        return int(meta_total), float(meta_fps), []
    # frame counts within 2 frames or 1 % (CG-Bench `max_frame` is the container count minus one), fps within 1 %
    if (abs(int(meta_total) - info.total_frames) <= max(2, 0.01 * info.total_frames)
            and abs(float(meta_fps) - info.fps) <= 0.01 * info.fps):
        return int(meta_total), float(meta_fps), []
    note = (f"metadata ({meta_total} frames at {float(meta_fps):.4f} fps) disagrees with the video file "
            f"{path or ''} ({info.total_frames} frames at {info.fps:.4f} fps); using the file's values")
    if note not in _META_WARNED:  # once per file and process: a video's questions all ask for its plan
        _META_WARNED[note] = note
        logger.warning(note)
    return info.total_frames, info.fps, [note]


@dataclass(frozen=True)
class PlannedFrames(Chosen):
    """The frames a protocol picks in one file, before any decoding (``fps`` and ``total_frames``:
    ``resolve_meta``'s), with the protocol's frame ``size`` and ``notes`` (each logged)."""

    path: Path | None = None
    size: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()


def plan_frames(path, plan: FramePlan, n: int, *, intervals: Sequence[Sequence[float]] | None = None,
                meta: dict | None = None) -> PlannedFrames:
    """The ``n`` frames ``plan`` (via ``frame_plan.choose``) picks in ``path``, and their times.
    ``intervals``: the question's (seconds), for plans picking inside them. ``meta``: the dataset's
    per-video metadata, checked against the container header only (a prompt showing frame times needs
    no decoding); a file not at hand (``path`` None, e.g. replayed predictions) or unreadable then
    leaves it unchecked, with a note. Without ``meta``: the exact count of a packet scan."""
    if not isinstance(plan, FramePlan):  # before any file is opened
        raise ValueError(f"unknown sampling protocol {plan!r}: pass a benchmark's FramePlan (its frames.py)")
    path = None if path is None else Path(path)
    info, notes = None, []  # info None: the file is not checked, no index is dropped
    try:
        if path is None:
            raise VideoError("the video file is not at hand")
        info = probe(path, exact=not meta)
    except VideoError as error:
        if not meta:
            raise
        notes.append(f"metadata not checked against the file {path or ''}: {error}")
        logger.debug(notes[-1])
    total, fps, mismatch = resolve_meta(info, meta, path)
    notes += mismatch
    chosen = choose(plan, total, fps, n, intervals)
    if chosen.clamped:
        notes.append(f"{chosen.clamped} clue interval(s) past the video end ({total / fps:.3f} s) were clamped")
    indices = chosen.indices
    past_end = 0 if info is None else sum(i >= info.total_frames for i in indices)
    if past_end:  # metadata a frame or two longer than the file: drop, as official CG-Bench does
        indices = [i for i in indices if i < info.total_frames]
        notes.append(f"{past_end} index(es) past the last frame ({info.total_frames - 1}) were dropped")
        logger.warning("%s: %s", path, notes[-1])
    return PlannedFrames(indices, plan.times(indices, fps), fps, total, chosen.clamped, path, plan.size, tuple(notes))


def _clip_frames(table: _FrameTable, merged: list[list[float]]) -> list[int]:
    """Presentation indices of the frames whose time (from the first frame) is in a ``[s, e)`` of
    ``merged`` (seconds); a zero-length interval gives the frame on screen at ``s``."""
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


def cut_clip(path, intervals_s: Sequence[Sequence[float]], cache_dir) -> Path:
    """An MP4 of the frames inside ``intervals_s`` (seconds; clamped and merged), in time order, for
    models that take only a path. Re-encoded (H.264, CRF 18), not stream-copied, so it starts exactly
    at the interval; played at the source's average fps; cached in ``cache_dir`` by the video's path,
    size, mtime and the intervals (written whole, then renamed)."""
    import av

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
    key = hashlib.sha256(f"{file_key(path)}|{merged!r}".encode()).hexdigest()[:16]
    target = cache_dir / f"{path.stem}-{key}.mp4"
    if target.exists() and target.stat().st_size > 0:
        return target
    indices = _clip_frames(table, merged)
    decode_positions = {table.decode_pos[i]: n for n, i in enumerate(indices)}
    rate = Fraction(table.info.fps).limit_denominator(1001)
    with atomic_target(target) as tmp, av.open(str(tmp), mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = table.info.width, table.info.height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "18"}

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
