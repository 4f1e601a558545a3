"""The synthetic video generator: geometry ground truth, determinism, GOP/B-frame/VFR options."""

from __future__ import annotations

import time

import av
import numpy as np
import pytest
from lmms_video_reasoning.utils.media import synthetic as syn


def test_shape_box_static_moving_flashing_clipped():
    static = syn.Shape("square", "red", 1, 5, pos0=(0.5, 0.5), size=0.25)
    assert syn.shape_box(static, 0.5, 320, 240) is None  # before start
    assert syn.shape_box(static, 1.0, 320, 240) == (130, 90, 190, 150)  # side 60 centred
    assert syn.shape_box(static, 5.0, 320, 240) is None  # end is exclusive
    moving = syn.Shape("circle", "blue", 0, 10, pos0=(0.0, 0.5), pos1=(1.0, 0.5), size=0.25)
    assert syn.shape_box(moving, 5.0, 320, 240) == (130, 90, 190, 150)  # halfway
    assert syn.shape_box(moving, 0.0, 320, 240) == (0, 90, 30, 150)  # clipped at the left edge
    flashing = syn.Shape("triangle", "white", 0, 10, flash_hz=2)  # 0.5 s period, on 0.25 s
    assert syn.shape_box(flashing, 0.1, 320, 240) is not None
    assert syn.shape_box(flashing, 0.3, 320, 240) is None
    assert syn.shape_box(flashing, 0.6, 320, 240) is not None


def test_shape_validation():
    with pytest.raises(ValueError, match="kind"):
        syn.Shape("hexagon", "red", 0, 1)
    with pytest.raises(ValueError, match="color"):
        syn.Shape("circle", "mauve", 0, 1)
    with pytest.raises(ValueError, match="after start"):
        syn.Shape("circle", "red", 2, 1)


def _packets(path):
    with av.open(str(path)) as c:
        return [(p.pts, p.dts, p.is_keyframe) for p in c.demux(video=0) if p.size]


def test_write_video_gop_bframes_deterministic_and_cached(tmp_path):
    shapes = [syn.Shape("circle", "red", 0.5, 3, (0.3, 0.3), (0.7, 0.7))]
    a = syn.write_video(tmp_path / "a.mp4", 6, shapes, fps=10, gop=20, bframes=2, textured=True)
    b = syn.write_video(tmp_path / "b.mp4", 6, shapes, fps=10, gop=20, bframes=2, textured=True)
    assert a.read_bytes() == b.read_bytes()
    packets = _packets(a)
    assert len(packets) == 60
    assert [i for i, p in enumerate(sorted(packets)) if p[2]] == [0, 20, 40]
    assert any(pts != dts for pts, dts, _ in packets)  # B-frames reorder
    mtime = a.stat().st_mtime_ns
    syn.write_video(a, 6, shapes, fps=10, gop=20)  # exists: skipped
    assert a.stat().st_mtime_ns == mtime
    a.unlink()  # written again without B-frames: no reordering
    syn.write_video(a, 6, shapes, fps=10, gop=20)
    assert all(pts == dts for pts, dts, _ in _packets(a))


def test_vfr_timestamps_follow_frame_times(tmp_path):
    path = syn.write_video(tmp_path / "v.mp4", 10, fps=10, vfr=True, stamp_index=True)
    with av.open(str(path)) as c:
        frames = [(float(f.pts * f.time_base), syn.read_index_stamp(f.to_ndarray(format="rgb24"))) for f in c.decode(video=0)]
    expected = syn.frame_times(10, 10, vfr=True)
    assert [round(t, 3) for t, _ in frames] == expected
    assert [s for _, s in frames] == list(range(len(expected)))
    gaps = np.diff(expected)
    assert gaps.min() == pytest.approx(0.05) and gaps.max() == pytest.approx(0.15)


def test_colors_render(tmp_path):
    path = syn.write_video(tmp_path / "c.mp4", 1, [syn.Shape("square", "green", 0, 1, size=0.5)], fps=10)
    with av.open(str(path)) as c:
        frame = next(c.decode(video=0)).to_ndarray(format="rgb24")
    assert np.abs(frame[120, 160].astype(int) - syn.COLORS["green"]).max() < 30
    assert np.abs(frame[5, 5].astype(int) - syn.COLORS["black"]).max() < 30


def test_two_minute_video_is_quick(tmp_path):
    start = time.perf_counter()
    syn.write_video(tmp_path / "long.mp4", 120, [syn.Shape("circle", "red", 0, 60)])
    assert time.perf_counter() - start < 10  # about a second on an idle machine


def test_write_srt_format(tmp_path):
    path = syn.write_srt(tmp_path / "s.srt", [(0, 1.5, "hi"), (3661.25, 3662, "x")])
    assert path.read_text() == "1\n00:00:00,000 --> 00:00:01,500\nhi\n\n2\n01:01:01,250 --> 01:01:02,000\nx\n"
