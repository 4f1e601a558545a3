"""VCR-Bench frames for frame-based models, as the official inference code (zhishuifeiqian/VCR-Bench,
commit 4e564b7) picks them: start-aligned indices, times rounded to 0.1 s."""

from __future__ import annotations

from collections.abc import Iterable

from lmms_video_reasoning.utils.core.frame_plan import FramePlan, check_counts

FRAME_COUNT = 64  # paper Sec. 3.1 and Table 9
TABLE9_COUNTS = (16, 32, 64, 128)  # paper Table 9: tasks vcr_cot_frames<N>


def indices(total: int, n: int = FRAME_COUNT) -> list[int]:
    """``floor(i * total / n)`` for i in 0..n-1; every frame if ``total <= n``."""
    check_counts(total, n)
    return list(range(total)) if total <= n else [i * total // n for i in range(n)]


def timestamps(indices: Iterable[int], fps: float) -> list[float]:
    """The frame times shown to the model: ``round(idx / fps, 1)`` seconds."""
    return [round(i / fps, 1) for i in indices]


PLAN = FramePlan("vcr_bench", pick=indices, times=timestamps)
ONE_FRAME = FramePlan("vcr_bench_one_frame", pick=lambda total, _n: [total // 2], times=timestamps)  # `vcr_one_frame`: the middle frame
