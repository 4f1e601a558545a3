"""VCR-Bench frame plan: which frames a frame-based model sees and the times it is told.

Source: the official inference code (zhishuifeiqian/VCR-Bench, commit 4e564b7): start-aligned
indices, times rounded to 0.1 s.
"""

from __future__ import annotations

from collections.abc import Iterable

from lmms_video_reasoning.utils.core.frame_plan import FramePlan, check_counts


def indices(total: int, n: int = 64) -> list[int]:
    """VCR-Bench: ``floor(i * total / n)`` for i in 0..n-1; every frame if ``total <= n``.

    Official inference code, start-aligned.
    """
    check_counts(total, n)
    if total <= n:
        return list(range(total))
    return [i * total // n for i in range(n)]


def timestamps(indices: Iterable[int], fps: float) -> list[float]:
    """VCR-Bench frame times shown to the model: ``round(idx / fps, 1)`` seconds."""
    return [round(i / fps, 1) for i in indices]


FRAME_COUNT = 64  # paper Sec. 3.1 and Table 9
PLAN = FramePlan("vcr_bench", pick=indices, times=timestamps)
# `vcr_one_frame` (paper Table 5 "1 Frame"): the middle frame
ONE_FRAME = FramePlan("vcr_bench_one_frame", pick=lambda total, _n: [total // 2], times=timestamps)
