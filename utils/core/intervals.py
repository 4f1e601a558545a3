"""Time intervals in seconds, merged or limited to a video; a reversed interval ``[end, start]`` reads as
``[start, end]``; inputs are never mutated."""

from __future__ import annotations

import math
from collections.abc import Sequence

Interval = list[float]


def _normalized(intervals: Sequence[Sequence[float]]) -> list[Interval]:
    """Copies of ``intervals`` as ``[low, high]`` float pairs; ValueError on anything else."""
    out = []
    for item in intervals:
        try:
            a, b = (float(x) for x in item)
        except (TypeError, ValueError):
            raise ValueError(f"interval {item!r} is not a pair of numbers [start, end] in seconds") from None
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"interval {item!r} has a non-finite bound")
        out.append([min(a, b), max(a, b)])
    return out


def merge_intervals(intervals: Sequence[Sequence[float]]) -> list[Interval]:
    """The sorted union, touching intervals merged (as CG-Bench's official ``merge_intervals``)."""
    merged: list[Interval] = []
    for a, b in sorted(_normalized(intervals)):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def clamp_intervals(intervals: Sequence[Sequence[float]], duration: float) -> tuple[list[Interval], int]:
    """``intervals`` limited to ``[0, duration]`` (order kept), and how many had to change; one past
    the end becomes ``[duration, duration]``, so callers keep one entry per input interval."""
    if not duration >= 0:
        raise ValueError(f"duration must be >= 0, got {duration}")
    clamped, changed = [], 0
    for a, b in _normalized(intervals):
        ca, cb = min(max(a, 0.0), duration), min(max(b, 0.0), duration)
        changed += (ca, cb) != (a, b)
        clamped.append([ca, cb])
    return clamped, changed
