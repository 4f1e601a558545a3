"""A clean temporal IoU over the suite's interval merging, the reference the tests hold CG-Bench's
official tIoU (`cg_bench.scoring.tiou_official`) to (tests/differential/test_properties.py).

``intervals_iou(pred, gt)``: ``|union P & union G| / |union P | union G|`` after merging overlaps
within each set; 0 when the union is empty (the official runner's ``calculate_intervals_iou``,
CG-Bench/CG-Bench ``run/utils.py``). Checked against hand-computed values in tests/test_intervals.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from lmms_video_reasoning.utils.core.intervals import Interval, merge_intervals


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
