"""A video file's frame table: every packet's timestamp and keyframe flag, from one packet scan.

Header frame counts are often missing or wrong, and index timestamps are in decode order on B-frame
files, so the exact sampler works from this table: presentation index ``i`` is the ``i``-th smallest
pts (exact for variable-rate and B-frame files). ``probe`` gives a file's ``VideoInfo``;
``VideoError`` (a ValueError) names the file and the fix, never a decoder traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from lmms_video_reasoning.utils.core.memo import BoundedMemo


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
        raise VideoError(f"video file cannot be opened (truncated or corrupt, or not a video): {path} ({_short(exc)}). "
                         "Re-download or re-extract it.") from None
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
    time_base: Fraction  # of pts
    nal_length_size: int  # H.264 AVCC NAL length prefix (0: another codec or format, no packet skipping)
    pts: list[int]  # decode order
    keyframes: list[int]  # decode positions of keyframes, ascending
    decode_pos: list[int]  # presentation index -> decode position
    pos_of_pts: dict[int, int]  # pts -> decode position


_TABLE_CACHE: BoundedMemo[_FrameTable] = BoundedMemo(8)


def file_key(path: Path) -> tuple:
    """The key of a file in the memos and caches of what is made from it: its path, size and mtime (a file
    that cannot be read has no size; it fails to open, so nothing is remembered under its path alone)."""
    try:
        st = path.stat()
    except OSError:
        return (str(path),)
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _frame_table(path) -> _FrameTable:
    path = Path(path)
    return _TABLE_CACHE.get_or_make(file_key(path), lambda: _scan(path))


def _scan(path: Path) -> _FrameTable:
    import av

    with _open(path) as container:
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        extradata = stream.codec_context.extradata  # avcC: the length prefix of MP4/MKV H.264 NAL units (0: unknown)
        nal_size = (extradata[4] & 0x03) + 1 if codec == "h264" and extradata and extradata[0] == 1 and len(extradata) > 4 else 0
        header_frames = stream.frames
        pts: list[int] = []
        keyframes: list[int] = []
        try:
            for packet in container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue
                p = packet.pts if packet.pts is not None else packet.dts
                if p is None:
                    raise VideoError(f"video has packets without timestamps, frames cannot be located exactly: {path}. "
                                     "Remux it (ffmpeg -i in -c copy out.mp4).")
                if packet.is_keyframe:
                    keyframes.append(len(pts))
                pts.append(p)
        except av.error.FFmpegError as exc:
            raise VideoError(f"video file is truncated or corrupt: {path} ({_short(exc)}). Re-download it.") from None
        if not pts:
            raise VideoError(f"video stream has no frames: {path}. Re-download or re-extract it.")
        if header_frames and len(pts) < header_frames:
            raise VideoError(f"video file is truncated: {path} lists {header_frames} frames but only {len(pts)} can be "
                             "read. Re-download it.")
        if not keyframes or keyframes[0] != 0:
            # Frames before the first keyframe cannot be decoded; treat the first packet as the
            # start point (decoders conceal what they can), as a sequential decode would.
            keyframes.insert(0, 0)
        order = sorted(range(len(pts)), key=pts.__getitem__)
        pos_of_pts = {p: i for i, p in enumerate(pts)}
        if len(pos_of_pts) != len(pts):
            raise VideoError(f"video has duplicate frame timestamps, frames cannot be located exactly: {path}. Remux it.")
        tb = stream.time_base
        duration = (float(stream.duration * tb) if stream.duration else container.duration / 1_000_000 if container.duration
                    else float((pts[order[-1]] - pts[order[0]]) * tb))
        if stream.average_rate:
            fps = float(stream.average_rate)
        elif duration > 0:
            fps = len(pts) / duration
        else:
            raise VideoError(f"video has no frame rate and no duration: {path}. Remux it.")
        info = VideoInfo(len(pts), fps, duration, stream.codec_context.width, stream.codec_context.height)
        return _FrameTable(path, info, tb, nal_size, pts, keyframes, order, pos_of_pts)


_INFO_CACHE: BoundedMemo[VideoInfo] = BoundedMemo(4096)  # a few hundred bytes each: one per video of a split


def probe(path, *, exact: bool = True) -> VideoInfo:
    """Frame count, average fps, duration (s), width, height of ``path`` (remembered per file).
    ``exact``: the count of a packet scan; ``exact=False``: the header's count when it has one
    (milliseconds for an hour of video; what a metadata check needs before any decoding)."""
    path = Path(path)

    def make() -> VideoInfo:
        return (None if exact else _header_info(path)) or _frame_table(path).info

    return _INFO_CACHE.get_or_make((*file_key(path), exact), make)


def _header_info(path: Path) -> VideoInfo | None:
    """What the container header says, when it counts the frames and gives a rate (else None)."""
    with _open(path) as container:
        stream = container.streams.video[0]
        if not stream.frames or not stream.average_rate:
            return None
        duration = float(stream.duration * stream.time_base) if stream.duration else stream.frames / float(stream.average_rate)
        return VideoInfo(int(stream.frames), float(stream.average_rate), duration, stream.codec_context.width,
                         stream.codec_context.height)
