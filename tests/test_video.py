"""The shared video layer on generated videos: protocol indices and timestamps (hand-computed),
exact frames on VFR / B-frame files against a full sequential decode, bad inputs, metadata
cross-check, clue clips."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import av
import numpy as np
import pytest
from lmms_video_reasoning.cg_bench import frames as cg_frames
from lmms_video_reasoning.utils.media import synthetic as syn
from lmms_video_reasoning.utils.media import frame_decoder, frame_table, video
from lmms_video_reasoning.utils.media.frame_decoder import read_frames
from lmms_video_reasoning.utils.media.frame_table import VideoError, probe
from lmms_video_reasoning.vcr_bench import frames as vcr_frames
from lmms_video_reasoning.vrbench import frames as vr_frames

SMALL = {"width": 160, "height": 120, "stamp_index": True}


def sequential_decode(path) -> list[np.ndarray]:
    """Every frame, in presentation order, by a plain full decode (the reference)."""
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    shapes = [syn.Shape("circle", "red", 1, 25, (0.2, 0.3), (0.8, 0.7)), syn.Shape("square", "green", 5, 30, flash_hz=1)]
    return {
        "cfr": syn.write_video(d / "cfr.mp4", 30, shapes, fps=10, gop=25, **SMALL),
        "bframes": syn.write_video(d / "bframes.mp4", 30, shapes, fps=10, gop=40, bframes=3, textured=True, **SMALL),
        "vfr": syn.write_video(d / "vfr.mp4", 30, shapes, fps=10, gop=30, vfr=True, **SMALL),
        "vfr_bframes": syn.write_video(
            d / "vfr_bframes.mp4", 30, shapes, fps=10, gop=37, vfr=True, bframes=2, textured=True, **SMALL
        ),
        "open_gop": syn.write_video(d / "open_gop.mp4", 30, shapes, fps=10, gop=25, bframes=3, open_gop=True, **SMALL),
        "short": syn.write_video(d / "short.mp4", 2, fps=10, gop=250, **SMALL),
    }


# ---------------------------------------------------------------- protocol indices (hand-computed)


def test_vcr_bench_indices_and_timestamps():
    idx = vcr_frames.indices(300, 64)
    assert len(idx) == 64
    assert idx[:4] == [0, 4, 9, 14]  # floor(i * 300 / 64): 0, 4.6875, 9.375, 14.0625
    assert idx[-1] == 295  # floor(63 * 300 / 64) = floor(295.3125)
    assert vcr_frames.indices(64, 64) == list(range(64))
    assert vcr_frames.indices(10, 64) == list(range(10))  # fewer frames: all of them
    assert vcr_frames.timestamps([0, 4, 295], 29.97) == [0.0, 0.1, 9.8]  # 4/29.97=0.133, 295/29.97=9.843


def test_cg_bench_indices_and_timestamps():
    idx = cg_frames.long_indices(35140, 128)  # a real CG-Bench max_frame
    # seg = 274.53125: int(137.265625 + round(274.53125 * i))
    assert idx[:2] == [137, 412]
    assert idx[-1] == 35002  # round(34865.46875) = 34865
    # Short video: the official formula repeats indices (round half to even: round(2.5) = 2).
    assert cg_frames.long_indices(5, 8) == [0, 1, 1, 2, 2, 3, 4, 4]
    fps = 30000 / 1001
    assert cg_frames.timestamps([412, 0], fps) == [13.7471, 0.0]  # 412 * 1001 / 30000 = 13.747067


def test_vrbench_indices():
    # np.linspace(0, 100, 17, dtype=int) = 0, 6, 12, 18, 25, ...; midpoints (a + b) // 2
    assert vr_frames.indices(100, 16) == [3, 9, 15, 21, 28, 34, 40, 46, 53, 59, 65, 71, 78, 84, 90, 96]
    assert vr_frames.indices(10, 16) == list(range(10))


def test_cg_bench_clue_indices_proportional_and_clamped(caplog):
    with caplog.at_level(logging.WARNING):
        idx, n_clamped = cg_frames.clue_indices([[2, 3.5], [29, 40]], fps=10, total=300, n=8)
    # frames [20, 35) and [290, 300) after clamping: 15 and 10 frames; int(8*15/25)=4, int(8*10/25)=3
    assert idx == [21, 25, 29, 33, 291, 295, 298]
    assert n_clamped == 1
    assert "clamped" in caplog.text


def test_cg_bench_clue_indices_all_frames_when_few():
    assert cg_frames.clue_indices([[1, 1.5]], fps=10, total=300, n=32) == (list(range(10, 15)), 0)
    # reversed interval read as [start, end]
    assert cg_frames.clue_indices([[1.5, 1]], fps=10, total=300, n=32) == (list(range(10, 15)), 0)


def test_cg_bench_clue_indices_zero_length_and_past_end():
    idx, _ = cg_frames.clue_indices([[5, 5], [10, 20]], fps=10, total=300, n=8)
    # zero-length gets its one frame (max(1, 0)); [100, 200) gets 8 at 100 + 6.25 + 12.5 k
    assert idx == [50, 106, 118, 131, 143, 156, 168, 181, 193]
    assert cg_frames.clue_indices([[5, 5]], fps=10, total=300, n=8) == ([50], 0)
    idx, n_clamped = cg_frames.clue_indices([[40, 50]], fps=10, total=300, n=8)
    assert (idx, n_clamped) == ([299], 1)


def test_bad_counts_rejected():
    with pytest.raises(ValueError, match="at least one frame"):
        vcr_frames.indices(0, 64)
    with pytest.raises(ValueError, match=">= 1"):
        cg_frames.long_indices(100, 0)


# ---------------------------------------------------------------- exact frames


@pytest.mark.parametrize("name", ["cfr", "bframes", "vfr", "vfr_bframes", "open_gop"])
def test_read_frames_equals_sequential_decode(videos, name):
    path = videos[name]
    reference = sequential_decode(path)
    info = probe(path)
    assert info.total_frames == len(reference) == 300
    rng = np.random.default_rng(7)
    indices = [int(i) for i in rng.choice(300, 45, replace=False)] + [0, 299, 17, 17]
    for workers in (1, 2):
        frames = read_frames(path, indices, as_array=True, workers=workers)
        assert frames.shape == (len(indices), 120, 160, 3)
        for row, i in enumerate(indices):
            assert syn.read_index_stamp(frames[row]) == i
            assert np.array_equal(frames[row], reference[i]), (name, i)


def test_vfr_index_is_not_time_times_average_fps(videos):
    """On the VFR file index -> time by the average fps drifts; the sampler follows the frames."""
    times = syn.frame_times(30, 10, vfr=True)
    info = probe(videos["vfr"])
    drift = [abs(round(t * info.fps) - i) for i, t in enumerate(times)]
    assert max(drift) >= 5  # a time-based decoder would return other frames
    worst = int(np.argmax(drift))
    (frame,) = read_frames(videos["vfr"], [worst])
    assert syn.read_index_stamp(frame) == worst


def test_read_frames_pil_and_resize(videos):
    images = read_frames(videos["bframes"], [3, 150])
    assert [im.size for im in images] == [(160, 120), (160, 120)]
    assert [syn.read_index_stamp(im) for im in images] == [3, 150]
    small = read_frames(videos["bframes"], [3], size=(64, 48), as_array=True)
    assert small.shape == (1, 48, 64, 3)


def test_read_frames_index_out_of_range(videos):
    with pytest.raises(IndexError, match="300 frames"):
        read_frames(videos["cfr"], [300])


def test_shapes_land_where_shape_box_says(videos):
    """Ground-truth boxes from synthetic.shape_box match the decoded pixels."""
    shape = syn.Shape("circle", "red", 1, 25, (0.2, 0.3), (0.8, 0.7))
    (frame,) = read_frames(videos["cfr"], [100], as_array=True)  # t = 10.0 s
    x1, y1, x2, y2 = syn.shape_box(shape, 10.0, 160, 120)
    centre = frame[(y1 + y2) // 2, (x1 + x2) // 2].astype(int)
    assert abs(centre - np.array(syn.COLORS["red"])).max() < 40


# ---------------------------------------------------------------- plan_frames, then read


def sample(path, plan, n, *, size=None, as_array=False, **options):
    """The production path's two steps (`plan_frames`, then `read_frames` at the plan's size unless `size` says
    otherwise, "native": the decoded size): what the plan picks and tells the model, and the frames."""
    planned = video.plan_frames(path, plan, n, **options)
    size = size or planned.size or "native"
    frames = video.read_frames(planned.path, planned.indices, size=None if size == "native" else tuple(size), as_array=as_array)
    return SimpleNamespace(**{**vars(planned), "notes": list(planned.notes)}, frames=frames)


def test_sample_protocols(videos):
    path = videos["cfr"]
    vcr = sample(path, vcr_frames.PLAN, 64)
    assert vcr.indices == vcr_frames.indices(300, 64)
    assert vcr.timestamps[:3] == [0.0, 0.4, 0.9]  # 4 / 10, 9 / 10
    assert [syn.read_index_stamp(f) for f in vcr.frames] == vcr.indices
    cg = sample(path, cg_frames.LONG_PLAN, 8, as_array=True)
    assert cg.indices == [18, 56, 93, 130, 168, 206, 243, 280]  # seg 37.5
    assert cg.timestamps == [1.8, 5.6, 9.3, 13.0, 16.8, 20.6, 24.3, 28.0]
    assert cg.frames.shape == (8, 120, 160, 3)
    vr = sample(path, vr_frames.PLAN, 4)
    assert vr.indices == [37, 112, 187, 262]
    assert vr.frames[0].size == vr_frames.SIZE
    native = sample(path, vr_frames.PLAN, 4, size="native")
    assert native.frames[0].size == (160, 120)
    clue = sample(path, cg_frames.CLUE_PLAN, 32, intervals=[[2, 3.5], [29, 40]])
    assert clue.indices == list(range(20, 35)) + list(range(290, 300))
    assert any("clamped" in note for note in clue.notes)
    with pytest.raises(ValueError, match="clue intervals"):
        sample(path, cg_frames.CLUE_PLAN, 32)
    with pytest.raises(ValueError, match="unknown sampling protocol"):
        sample(path, "mvbench", 8)


def test_short_video_gets_all_frames(videos):
    result = sample(videos["short"], vcr_frames.PLAN, 64)
    assert result.indices == list(range(20))
    assert [syn.read_index_stamp(f) for f in result.frames] == list(range(20))


def test_meta_agreeing_is_used_disagreeing_is_overridden(videos, caplog):
    path = videos["cfr"]
    # CG-Bench max_frame is the count minus one: the official indices come from it.
    agreed = sample(path, cg_frames.LONG_PLAN, 8, meta={"max_frame": 299, "fps": 10.0})
    assert agreed.indices == cg_frames.long_indices(299, 8) != cg_frames.long_indices(300, 8)
    assert (agreed.total_frames, agreed.notes) == (299, [])
    with caplog.at_level(logging.WARNING):
        other = sample(path, cg_frames.LONG_PLAN, 8, meta={"max_frame": 899, "fps": 30.0})
    assert other.indices == cg_frames.long_indices(300, 8)
    assert other.fps == 10.0 and "disagrees" in other.notes[0] and "disagrees" in caplog.text
    with pytest.raises(ValueError, match="max_frame"):
        sample(path, cg_frames.LONG_PLAN, 8, meta={"duration": 30})


def test_meta_slightly_longer_than_file_clamps_indices(videos):
    # metadata two frames longer than the 20-frame file (within tolerance): indices 20, 21 dropped
    result = sample(videos["short"], vcr_frames.PLAN, 64, meta={"max_frame": 22, "fps": 10.0})
    assert result.indices == list(range(20)) and result.total_frames == 22
    assert any("2 index(es) past the last frame" in note for note in result.notes)


# ---------------------------------------------------------------- bad inputs


def _expect_video_error(path, match):
    with pytest.raises(VideoError, match=match) as info:
        probe(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)
    # no decoder exception chained into what the user sees
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_missing_and_empty_files(tmp_path):
    _expect_video_error(tmp_path / "nope.mp4", "not found")
    (tmp_path / "empty.mp4").write_bytes(b"")
    _expect_video_error(tmp_path / "empty.mp4", "empty")
    with pytest.raises(VideoError, match="not found"):
        read_frames(tmp_path / "nope.mp4", [0])


def test_truncated_files(tmp_path):
    for faststart, match in ((True, "truncated: .* lists 100 frames"), (False, "cannot be opened")):
        src = syn.write_video(tmp_path / f"src{faststart}.mp4", 10, fps=10, textured=True, faststart=faststart, **SMALL)
        cut = tmp_path / f"cut{faststart}.mp4"
        cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
        _expect_video_error(cut, match)


def test_corrupt_and_non_video_files(tmp_path):
    src = syn.write_video(tmp_path / "src.mp4", 5, fps=10, **SMALL)
    data = bytearray(src.read_bytes())
    data[:64] = os.urandom(64)
    (tmp_path / "header.mp4").write_bytes(bytes(data))
    _expect_video_error(tmp_path / "header.mp4", "corrupt")
    (tmp_path / "notes.mp4").write_text("1\n00:00:01,000 --> 00:00:02,000\nnot a video\n")
    _expect_video_error(tmp_path / "notes.mp4", "corrupt")


def test_file_without_video_stream(tmp_path):
    path = tmp_path / "audio.m4a"
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=16000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
        frame.sample_rate = 16000
        for i in range(10):
            frame.pts = i * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    _expect_video_error(path, "no video stream")


# ---------------------------------------------------------------- clips


def _stamps(path) -> list[int]:
    return [syn.read_index_stamp(f) for f in sequential_decode(path)]


def test_cut_clip_frames_and_cache(videos, tmp_path):
    path = videos["bframes"]
    intervals = [[10, 11], [2, 3.5], [3, 4], [28, 50], [5, 5]]
    clip = video.cut_clip(path, intervals, tmp_path)
    # merged and time-ordered: [2, 4) -> 20..39, [5, 5] -> 50, [10, 11) -> 100..109, [28, 30] -> 280..299
    expected = list(range(20, 40)) + [50] + list(range(100, 110)) + list(range(280, 300))
    assert _stamps(clip) == expected
    assert probe(clip).total_frames == len(expected)
    mtime = clip.stat().st_mtime_ns
    assert video.cut_clip(path, intervals, tmp_path) == clip and clip.stat().st_mtime_ns == mtime
    other = video.cut_clip(path, [[0, 1]], tmp_path)
    assert other != clip and _stamps(other) == list(range(10))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_cut_clip_concurrent_writers(videos, tmp_path):
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(video.cut_clip, videos["vfr"], [[1, 3]], tmp_path) for _ in range(4)]
        results = [f.result() for f in futures]
    assert len(set(results)) == 1
    times = syn.frame_times(30, 10, vfr=True)
    assert _stamps(results[0]) == [i for i, t in enumerate(times) if 1 <= t < 3]
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name]



def test_non_reference_frames_are_recognised(videos):
    """The skip relies on nal_ref_idc: x264 pyramid B-frames give non-reference frames, P-only none."""

    def flags(path):
        table = frame_table._frame_table(path)
        with av.open(str(path)) as container:
            return [
                frame_decoder._is_reference(p, table.nal_length_size) for p in container.demux(video=0) if p.size
            ]

    with_b = flags(videos["bframes"])
    assert 0.3 < with_b.count(False) / len(with_b) < 0.7
    assert all(flags(videos["cfr"]))


def test_seek_landing_after_keyframe_falls_back(videos, monkeypatch):
    real = frame_decoder._seek_to

    def lands_late(container, stream, table, start):
        if start == table.decode_pos[0]:
            real(container, stream, table, start)
        else:  # a demuxer that overshoots to the next keyframe
            container.seek(table.pts[start] + 1, stream=stream, backward=False, any_frame=False)

    monkeypatch.setattr(frame_decoder, "_seek_to", lands_late)
    frames = read_frames(videos["cfr"], [30, 60], workers=1)
    assert [syn.read_index_stamp(f) for f in frames] == [30, 60]
