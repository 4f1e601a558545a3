"""What a model (or the step-2 judge) is shown for one CG-Bench question: frames, times, subtitles.

Frame choice is the official sampler's: long video, grounding and open take segment centres
of the whole video (`frames.LONG_PLAN`, 128 by default); clue mode takes frames inside the
clue intervals (`frames.CLUE_PLAN`, 32 by default). Indices are computed from the video's
`max_frame` and fps in `video_meta_info.json`, as the official runner does (the binding's
`Media.plan`; the plugin checks the entry against the file), so the prompt text needs no decoding. Subtitles follow `get_subtitles`: a cue is shown when its span strictly
contains a sampled frame's time (integer milliseconds), each line once, as `[start, end] text`.

Files come through a `Media` (get the frames), supplied by the task's lmms-eval hooks.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from lmms_video_reasoning.cg_bench import frames, prompts
from lmms_video_reasoning.utils.core.frame_plan import Chosen, FramePlan
from lmms_video_reasoning.utils.media import subtitles

logger = logging.getLogger(__name__)

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

    @property
    def times(self) -> list[float]:
        return [prompts.frame_time(i, self.fps) for i in self.indices]


def frame_plan(video_uid: str, mode: str, clue_intervals: Sequence[Sequence[float]], media: Media, long_frames: int = DEFAULT_LONG_FRAMES,
               clue_frames: int = DEFAULT_CLUE_FRAMES) -> QuestionFrames:
    """The official sampling of `mode` for a question (no decoding; the sampler's table)."""
    if mode == "clue":
        chosen = media.plan(video_uid, frames.CLUE_PLAN, clue_frames, clue_intervals)
    else:
        chosen = media.plan(video_uid, frames.LONG_PLAN, long_frames)
    return QuestionFrames(video_uid, tuple(int(i) for i in chosen.indices), chosen.fps)


# ---------------------------------------------------------------------- subtitles


_warned: set[str] = set()


def load_cues(path: Path) -> tuple:
    """The cues of an SRT file (parsed once per file, for the last 1,024 files of the process)."""
    return _cues(str(path))


@functools.lru_cache(maxsize=1024)
def _cues(path: str) -> tuple:
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
