"""Time intervals in seconds: merging, temporal IoU and clamping to a video's length.

Public interface:

- ``merge_intervals(intervals)``: sorted union of ``[start, end]`` intervals, overlapping or
  touching ones merged (CG-Bench official ``merge_intervals`` merges when
  ``start <= previous end``).
- ``intervals_iou(pred, gt)``: CG-Bench temporal IoU of two interval sets,
  ``|union P & union G| / |union P | union G|`` after merging overlaps within each set; 0 when
  the union is empty (the official runner's ``calculate_intervals_iou``, CG-Bench/CG-Bench ``run/utils.py``).
- ``clamp_intervals(intervals, duration)``: intervals limited to ``[0, duration]`` and the
  number that had to change.

Every function reads a reversed interval ``[end, start]`` as ``[start, end]`` (so a reversed
prediction can never give an IoU above 1) and returns new lists: inputs are never mutated
(the official ``merge_intervals`` sorts and extends its argument in place).
"""

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
    """Sorted union of ``intervals``; overlapping or touching intervals become one."""
    merged: list[Interval] = []
    for a, b in sorted(_normalized(intervals)):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _length(merged: list[Interval]) -> float:
    return sum(b - a for a, b in merged)


def _intersection(p: list[Interval], g: list[Interval]) -> float:
    """Total overlap of two merged (sorted, disjoint) interval lists, by a linear sweep."""
    i = j = 0
    total = 0.0
    while i < len(p) and j < len(g):
        total += max(0.0, min(p[i][1], g[j][1]) - max(p[i][0], g[j][0]))
        if p[i][1] < g[j][1]:
            i += 1
        else:
            j += 1
    return total


def intervals_iou(pred: Sequence[Sequence[float]], gt: Sequence[Sequence[float]]) -> float:
    """Temporal IoU of the unions of ``pred`` and ``gt`` (0.0 when the union is empty)."""
    p, g = merge_intervals(pred), merge_intervals(gt)
    inter = _intersection(p, g)
    union = _length(p) + _length(g) - inter
    return inter / union if union > 0 else 0.0


def clamp_intervals(intervals: Sequence[Sequence[float]], duration: float) -> tuple[list[Interval], int]:
    """``intervals`` limited to ``[0, duration]`` (order kept), and how many had to change.

    An interval entirely past the end becomes ``[duration, duration]`` (zero length) rather
    than disappearing, so callers keep one entry per input interval.
    """
    if not duration >= 0:
        raise ValueError(f"duration must be >= 0, got {duration}")
    clamped, changed = [], 0
    for a, b in _normalized(intervals):
        ca, cb = min(max(a, 0.0), duration), min(max(b, 0.0), duration)
        changed += (ca, cb) != (a, b)
        clamped.append([ca, cb])
    return clamped, changed
