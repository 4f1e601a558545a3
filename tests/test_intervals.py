"""Interval merging, CG-Bench temporal IoU and clamping."""

from __future__ import annotations

import copy

import pytest
from interval_iou import intervals_iou
from lmms_video_reasoning.utils.core.intervals import clamp_intervals, merge_intervals


def test_merge_overlapping_touching_disjoint_reversed():
    assert merge_intervals([[5, 7], [0, 2], [1, 3], [3, 4], [10, 9]]) == [[0.0, 4.0], [5.0, 7.0], [9.0, 10.0]]
    assert merge_intervals([]) == []


def test_inputs_never_mutated():
    pred, gt = [[5, 7], [0, 2], [3, 1]], [(1, 6)]
    before = copy.deepcopy((pred, gt))
    intervals_iou(pred, gt)
    merge_intervals(pred)
    clamp_intervals(pred, 4)
    assert (pred, gt) == before


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        ([[0, 10]], [[0, 10]], 1.0),
        ([[0, 10]], [[5, 15]], 5 / 15),
        ([[0, 4], [2, 6]], [[0, 6]], 1.0),  # overlaps within a set are merged first
        ([[0, 2], [2, 4]], [[0, 4]], 1.0),  # touching
        ([[0, 1], [3, 4]], [[0, 4]], 2 / 4),  # disjoint parts
        ([[0, 1]], [[2, 3]], 0.0),  # disjoint sets
        ([], [[0, 1]], 0.0),  # empty prediction
        ([], [], 0.0),  # empty union
        ([[1, 1]], [[1, 1]], 0.0),  # zero-length union
        ([[10, 0]], [[0, 10]], 1.0),  # reversed read as [start, end]
        ([[10, 0], [0, 10]], [[0, 5]], 0.5),  # reversed cannot push IoU above 1
    ],
)
def test_iou(pred, gt, expected):
    assert intervals_iou(pred, gt) == pytest.approx(expected)
    assert intervals_iou(gt, pred) == pytest.approx(expected)


def test_iou_never_above_one_many_sets():
    import random

    rng = random.Random(3)
    for _ in range(200):
        p = [[rng.uniform(-5, 50), rng.uniform(-5, 50)] for _ in range(rng.randint(0, 6))]
        g = [[rng.uniform(-5, 50), rng.uniform(-5, 50)] for _ in range(rng.randint(0, 6))]
        assert 0.0 <= intervals_iou(p, g) <= 1.0 + 1e-12


def test_clamp():
    assert clamp_intervals([[1, 2], [-1, 3], [8, 12], [15, 20], [3, 1]], 10) == (
        [[1.0, 2.0], [0.0, 3.0], [8.0, 10.0], [10.0, 10.0], [1.0, 3.0]],
        3,
    )
    with pytest.raises(ValueError, match="not a pair"):
        clamp_intervals([[1, 2, 3]], 10)
    with pytest.raises(ValueError, match="not a pair"):
        intervals_iou([["a", 2]], [[0, 1]])
