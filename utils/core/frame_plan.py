"""A benchmark protocol's frame choice (declared in its `frames.py`; whatever decodes the frames reads
the same plan): pure index and timestamp functions, no decoding. Standard library only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FramePlan:
    """``pick(total, n)``: presentation indices; or, inside a question's intervals,
    ``pick_in_intervals`` returning ``(indices, n_intervals_clamped)``. ``times``: the seconds shown
    to the model. ``size``: the protocol's frame size, None for the decoded size."""

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
    """The frames a plan picks; ``clamped``: the question's intervals that reached past the video end."""

    indices: list[int]
    timestamps: list[float]
    fps: float
    total_frames: int
    clamped: int = 0


def choose(plan: FramePlan, total: int, fps: float, n: int, intervals: Sequence[Sequence[float]] | None = None) -> Chosen:
    """The ``n`` frames ``plan`` picks from a video of ``total`` frames at ``fps`` (a container probe's, or
    the dataset's metadata checked against it), and their times."""
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
