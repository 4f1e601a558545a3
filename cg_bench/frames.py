"""What a model (or the step-2 judge) is shown for one CG-Bench question: frames, times, subtitles.

Source: the official runner (CG-Bench/CG-Bench, commit f826608, ``run/utils.py``). Long video,
grounding and open take segment centres of the whole video (`LONG_PLAN`, 128 by default); clue
mode takes frames inside the clue intervals (`CLUE_PLAN`, 32 by default). Indices come from the
video's `video_meta_info.json` entry (`max_frame`, `fps`), as the official runner computes them
(the binding's `Media.plan`), so the prompt text needs no decoding. Subtitles follow
`get_subtitles`: a cue is shown when its span strictly contains a sampled frame's time (integer
milliseconds), each line once, as `[start, end] text`. Files come through a `Media` (get the
frames), supplied by the task's lmms-eval hooks.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan, check_counts
from lmms_video_reasoning.utils.core.intervals import clamp_intervals
from lmms_video_reasoning.utils.media import subtitles

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

DEFAULT_LONG_FRAMES = 128  # paper Table 3 "#F long"; also grounding and open
DEFAULT_CLUE_FRAMES = 32  # paper Table 3 "#F clue"; run.sh caps clue_acc at 32


class Media(Protocol):
    """Get the frames: what CG-Bench needs from a question's video, subtitles and clue clip."""

    def plan(self, video_uid: str, plan: FramePlan, n: int, intervals: Sequence[Sequence[float]] | None = None) -> Chosen:
        """The `n` frames `plan` picks in the video (inside `intervals` for the clue plan), from
        (max_frame, fps) as the official sampler sees them (its table): `frame_plan.choose`."""

    def subtitle_path(self, video_uid: str) -> Path | None:
        """The video's SRT file, or None (not every video has subtitles)."""

    def frames(self, video_uid: str, indices: Sequence[int]) -> list:
        """The full video's frames at these presentation indices, as RGB PIL images."""

    def video(self, doc: dict) -> str:
        """What a video-native model is handed (clue mode: a video of the clue intervals)."""

    def full_video(self, doc: dict) -> str:
        """The full video's path (checked to decode)."""

    def clue_video(self, doc: dict) -> str:
        """A video of the clue intervals only (the dataset's clip when it has one)."""


@dataclass(frozen=True)
class QuestionFrames:
    """The frames a mode samples from a question's video: indices into the full video and its fps."""

    video_uid: str
    indices: tuple[int, ...]
    fps: float


def frame_plan(video_uid: str, mode: str, clue_intervals: Sequence[Sequence[float]], media: Media, long_frames: int = DEFAULT_LONG_FRAMES,
               clue_frames: int = DEFAULT_CLUE_FRAMES) -> QuestionFrames:
    """The official sampling of `mode` for a question (no decoding; the sampler's table)."""
    if mode == "clue":
        chosen = media.plan(video_uid, CLUE_PLAN, clue_frames, clue_intervals)
    else:
        chosen = media.plan(video_uid, LONG_PLAN, long_frames)
    return QuestionFrames(video_uid, tuple(int(i) for i in chosen.indices), chosen.fps)


# ---------------------------------------------------------------------- subtitles


_warned: set[str] = set()


@functools.lru_cache(maxsize=1024)
def load_cues(path: Path) -> tuple:
    """The cues of an SRT file (parsed once per file, for the last 1,024 files of the process)."""
    return tuple(subtitles.parse_srt(Path(path)).cues)


def subtitle_problem(path: Path) -> str | None:
    """Why an SRT gives the prompt nothing (empty, or no block parses into a subtitle line), or None."""
    try:
        parsed = subtitles.parse_srt(Path(path))
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not parsed.cues:
        return "the file is empty" if Path(path).stat().st_size == 0 else f"no subtitle line could be read from it ({parsed.skipped} malformed block(s))"
    return None


def subtitles_for(plan: QuestionFrames, media: Media, with_times: bool = True, whole_video: bool = False) -> str:
    """The subtitles block for a frame plan ('' when the video has no SRT or no cue applies).

    `get_subtitles` with `sub_time=True` (`with_times` False: `sub_time=False`, the text only;
    the paper's "S" without "ST"), via `subtitles.lines_for_times` at the frames' exact times
    `index / fps`. `whole_video`: every subtitle of the video (the paper's "S (full-video)"),
    by the same rule at each cue's midpoint (each line once, in order).
    """
    path = media.subtitle_path(plan.video_uid)
    if path is None:
        return ""
    cues = load_cues(path)
    if not cues and str(path) not in _warned:
        _warned.add(str(path))
        logger.warning("cg_bench: %s yields no subtitle line (%s); its questions are asked without subtitles and counted in subtitles_unusable", path, subtitle_problem(path))
    times = [(cue.start + cue.end) / 2 for cue in cues] if whole_video else [index / plan.fps for index in plan.indices]
    return subtitles.subtitle_prompt(subtitles.lines_for_times(cues, times, with_times=with_times))


def subtitles_missing(video_uid: str, media: Media) -> bool:
    """The video has no subtitle file (its prompt goes without subtitles)."""
    try:
        return media.subtitle_path(video_uid) is None
    except ValueError:
        return False


def subtitles_unusable(video_uid: str, media: Media) -> str | None:
    """Why the video's SRT gives the prompt nothing, when it has an SRT (None: fine or absent).
    Never raises: a root that cannot be read is reported where the media are resolved."""
    try:
        path = media.subtitle_path(video_uid)
    except ValueError:
        return None
    if path is None or load_cues(path):
        return None
    return subtitle_problem(path) or "no subtitle line"


def frames_for(plan: QuestionFrames, media: Media) -> list:
    """The sampled frames as RGB PIL images (decodes the full video)."""
    return media.frames(plan.video_uid, list(plan.indices))
