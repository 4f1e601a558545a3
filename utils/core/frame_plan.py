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
