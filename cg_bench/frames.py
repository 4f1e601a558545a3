"""CG-Bench frame plans: the whole video (long / grounding / open) and the clue intervals.

Source: the official runner (CG-Bench/CG-Bench, commit f826608, ``run/utils.py``). Indices come
from the video's `video_meta_info.json` entry (`max_frame`, `fps`), as the official runner
computes them; in the plugin that entry is checked against the file (``utils.media.video.plan_frames``:
an entry that describes another encoding of the video gives way to the file, with a warning).
Either way the prompt text needs no decoding (`sampling.frame_plan`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from lmms_video_reasoning.utils.core.frame_plan import FramePlan, check_counts
from lmms_video_reasoning.utils.core.intervals import clamp_intervals

logger = logging.getLogger(__name__)


def long_indices(total: int, n: int = 128) -> list[int]:
    """CG-Bench long video / grounding / open: segment centres ``int(seg/2 + round(seg*i))``.

    ``seg = total / n`` (official ``sample_frames_global_average`` in CG-Bench ``run/utils.py``,
    called with the metadata ``max_frame`` as ``total``). Rounding is Python/NumPy's
    round-half-to-even, as in the official code. The official code does not shorten the list
    for short videos (indices repeat); neither does this.
    """
    check_counts(total, n)
    seg = float(total) / n
    return [int(seg / 2 + round(seg * i)) for i in range(n)]


def clue_indices(
    intervals_s: Sequence[Sequence[float]], fps: float, total: int, n: int = 32
) -> tuple[list[int], int]:
    """CG-Bench clue mode: frames inside the clue intervals; returns ``(indices, n_clamped)``.

    Official ``sample_frames_clue_average`` (CG-Bench ``run/utils.py``): intervals become frame
    ranges ``[round(s * fps), round(e * fps))``; if they hold ``<= n`` frames in total, all of
    them are used (interval order, repeats kept); otherwise each interval gets
    ``int(n * len / total_len)`` frames, at least 1, at ``int(a + seg/2 + seg*k)`` with
    ``seg = len / count`` (so the total can exceed ``n`` by the number of tiny intervals, as
    in the official code).

    Project additions (documented in the protocol notes): intervals are first clamped to the
    video (``[0, total / fps]``; ``n_clamped`` counts those changed, a warning is logged) and
    reversed intervals read as ``[start, end]``, so no index points past the last frame (the
    official code silently drops such frames); a zero-length interval gets one frame at its
    start when no other interval holds frames (the official code would return none).
    """
    check_counts(total, n)
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    clamped, n_clamped = clamp_intervals(intervals_s, total / fps)
    if n_clamped:
        logger.warning("%d clue interval(s) reached past the video end (%.3f s) and were clamped", n_clamped, total / fps)
    ranges = [(round(s * fps), round(e * fps)) for s, e in clamped]
    ranges = [(min(a, total - 1), min(b, total)) for a, b in ranges]
    lengths = [b - a for a, b in ranges]
    total_len = sum(lengths)
    if total_len == 0:
        return [a for a, _ in ranges], n_clamped
    if n >= total_len:
        return [f for a, b in ranges for f in range(a, b)], n_clamped
    indices: list[int] = []
    for (a, b), length in zip(ranges, lengths):
        count = max(1, int(n * (length / total_len)))
        seg = length / count
        indices.extend(int(a + seg / 2 + seg * k) for k in range(count))
    return indices, n_clamped


def timestamps(indices: Iterable[int], fps: float) -> list[float]:
    """CG-Bench frame times (official ``get_frame_times``): ``round(idx / fps, 4)`` seconds."""
    return [round(i / fps, 4) for i in indices]


LONG_PLAN = FramePlan("cg_bench", pick=long_indices, times=timestamps)
CLUE_PLAN = FramePlan("cg_bench_clue", pick_in_intervals=clue_indices, times=timestamps)
