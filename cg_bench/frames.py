"""What a model (or the step-2 judge) is shown for one CG-Bench question: frames, times, subtitles.

Source: the official runner (CG-Bench/CG-Bench, commit f826608, ``run/utils.py``): frame indices from the
video's `video_meta_info.json` entry (`max_frame`, `fps`), so the prompt text needs no decoding.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from lmms_video_reasoning.utils.core import frame_plan
from lmms_video_reasoning.utils.core.intervals import clamp_intervals
from lmms_video_reasoning.utils.media import subtitles

logger = logging.getLogger(__name__)


def long_indices(total: int, n: int) -> list[int]:
    """Long video / grounding / open: segment centres (official ``sample_frames_global_average``, ``total`` = the
    metadata's ``max_frame``; indices repeat for short videos, as officially)."""
    frame_plan.check_counts(total, n)
    seg = float(total) / n
    return [int(seg / 2 + round(seg * i)) for i in range(n)]


def clue_indices(intervals_s: Sequence[Sequence[float]], fps: float, total: int, n: int) -> tuple[list[int], int]:
    """Clue mode: frames inside the clue intervals, ``(indices, n_clamped)``, as the official
    ``sample_frames_clue_average``. Additions (protocol notes): intervals clamped to the video (counted, a
    warning logged) and reversed ones read as ``[start, end]``, so no index points past the last frame
    (officially dropped silently); zero-length intervals alone get one frame at their start (officially none)."""
    frame_plan.check_counts(total, n)
    clamped, n_clamped = clamp_intervals(intervals_s, total / fps)
    if n_clamped:
        logger.warning("%d clue interval(s) reached past the video end (%.3f s) and were clamped", n_clamped, total / fps)
    ranges = [(min(round(s * fps), total - 1), min(round(e * fps), total)) for s, e in clamped]
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


LONG_PLAN = frame_plan.FramePlan("cg_bench", pick=long_indices, times=timestamps)
CLUE_PLAN = frame_plan.FramePlan("cg_bench_clue", pick_in_intervals=clue_indices, times=timestamps)

DEFAULT_LONG_FRAMES = 128  # paper Table 3 "#F long"; also grounding and open
DEFAULT_CLUE_FRAMES = 32  # paper Table 3 "#F clue"; run.sh caps clue_acc at 32


class Media(Protocol):
    """Get the frames: what CG-Bench needs from a question's video, subtitles and clue clip."""

    # The `n` frames `plan` picks (clue plan: inside `intervals`) from (max_frame, fps) as the official sampler sees them (its table)
    def plan(self, video_uid: str, plan: frame_plan.FramePlan, n: int, intervals: Sequence[Sequence[float]] | None = None) -> frame_plan.Chosen: ...
    def subtitle_path(self, video_uid: str) -> Path | None: ...  # None: no SRT (not every video has one)
    def frames(self, video_uid: str, indices: Sequence[int]) -> list: ...  # RGB PIL images of the full video
    def video(self, doc: dict) -> str: ...  # what a video-native model is handed (clue mode: of the clue intervals)
    def full_video(self, doc: dict) -> str: ...  # checked to decode
    def clue_video(self, doc: dict) -> str: ...  # a video of the clue intervals only (the dataset's clip when it has one)


# --- Subtitles
def subtitles_for(video_uid: str, plan: frame_plan.Chosen, media: Media, with_times: bool = True, whole_video: bool = False) -> str:
    """The subtitles block of a video's frame plan ('' without an SRT or a cue): `get_subtitles` at the frames'
    times `index / fps` (`with_times` False: `sub_time=False`, the paper's "S" without "ST");
    `whole_video`: every subtitle, by the same rule at each cue's midpoint (the paper's "S (full-video)")."""
    path = media.subtitle_path(video_uid)
    if path is None:
        return ""
    cues = subtitles.load_cues(path)
    times = [(cue.start + cue.end) / 2 for cue in cues] if whole_video else [index / plan.fps for index in plan.indices]
    return subtitles.subtitle_prompt(subtitles.lines_for_times(cues, times, with_times=with_times))

