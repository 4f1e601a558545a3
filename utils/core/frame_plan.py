"""A benchmark protocol's frame choice: pure index and timestamp functions, no decoding.

Each benchmark declares its plan in its own `frames.py`; whatever decodes the frames reads the
same plan. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FramePlan:
    """A benchmark protocol's frame choice, declared in the benchmark's folder (``frames.py``).

    ``pick(total, n)``: presentation indices for a video of ``total`` frames; or, for plans
    inside a question's intervals, ``pick_in_intervals(intervals_s, fps, total, n)`` returning
    ``(indices, n_intervals_clamped)``. ``times(indices, fps)``: the seconds shown to the model.
    ``size``: the protocol's frame size, None for the decoded size.
    """

    name: str
    times: Callable[[Sequence[int], float], list[float]]
    pick: Callable[[int, int], list[int]] | None = None
    pick_in_intervals: Callable[[Sequence[Sequence[float]], float, int, int], tuple[list[int], int]] | None = None
    size: tuple[int, int] | None = None


def check_counts(total: int, n: int) -> None:
    """ValueError unless a video of `total` frames can give `n` frames."""
    if total < 1:
        raise ValueError(f"a video needs at least one frame, got total={total}")
    if n < 1:
        raise ValueError(f"number of frames to sample must be >= 1, got {n}")


@dataclass(frozen=True)
class Chosen:
    """The frames a plan picks from a video of ``total`` frames at ``fps``: presentation
    ``indices``, the ``timestamps`` shown to the model, and how many of the question's intervals
    reached past the video end and were clamped (``clamped``)."""

    indices: list[int]
    timestamps: list[float]
    fps: float
    total_frames: int
    clamped: int = 0


def choose(plan: FramePlan, total: int, fps: float, n: int, intervals: Sequence[Sequence[float]] | None = None) -> Chosen:
    """The ``n`` frames ``plan`` picks from a video of ``total`` frames at ``fps``, and their times.

    The one step from a protocol's formulas to frame indices: whatever gives ``total`` and
    ``fps`` (a container probe, or the dataset's metadata checked against it) hands them here.
    """
    if not isinstance(plan, FramePlan):
        raise ValueError(f"unknown sampling protocol {plan!r}: pass a benchmark's FramePlan (its frames.py)")
    clamped = 0
    if plan.pick_in_intervals is not None:
        if not intervals:
            raise ValueError(f"frame plan {plan.name!r} needs the question's clue intervals (intervals=[[start, end], ...])")
        indices, clamped = plan.pick_in_intervals(intervals, fps, total, n)
    else:
        indices = plan.pick(total, n)
    indices = [int(i) for i in indices]
    return Chosen(indices, list(plan.times(indices, fps)), fps, total, clamped)
