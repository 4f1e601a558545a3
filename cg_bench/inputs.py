"""What a model (or the step-2 judge) is shown for one CG-Bench question: frames, times, subtitles.

Frame choice is the official sampler's (`utils/media/video.py`): long video, grounding and open take
segment centres of the whole video (`frames.long_indices`, 128 by default); clue mode takes
frames inside the clue intervals (`frames.clue_indices`, 32 by default). Indices are
computed from `video_meta_info.json` (`max_frame`, `fps`), as the official runner does, so the
prompt text needs no decoding. Subtitles follow `get_subtitles` (`utils/media/subtitles.py`): a cue is shown when its span strictly
contains a sampled frame's time (integer milliseconds), each line once, as `[start, end] text`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.cg_bench import data, frames, prompts

logger = logging.getLogger("lmms_video_reasoning.cg_bench")

DEFAULT_LONG_FRAMES = 128  # paper Table 3 "#F long"; also grounding and open
DEFAULT_CLUE_FRAMES = 32  # paper Table 3 "#F clue"; run.sh caps clue_acc at 32


@dataclass(frozen=True)
class FramePlan:
    """The frames a mode samples from a video: indices into the full video and its fps."""

    video_uid: str
    indices: tuple[int, ...]
    fps: float

    @property
    def times(self) -> list[float]:
        return [prompts.frame_time(i, self.fps) for i in self.indices]


def frame_plan(video_uid: str, mode: str, clue_intervals: Sequence[Sequence[float]], long_frames: int = DEFAULT_LONG_FRAMES,
               clue_frames: int = DEFAULT_CLUE_FRAMES) -> FramePlan:
    """The official sampling of `mode` for a question (no decoding; meta from video_meta_info.json)."""

    meta = data.video_meta(video_uid)
    if mode == "clue":
        indices, _clamped = frames.clue_indices(clue_intervals, meta.fps, meta.max_frame, clue_frames)
    else:
        indices = frames.long_indices(meta.max_frame, long_frames)
    return FramePlan(video_uid, tuple(int(i) for i in indices), meta.fps)


# ---------------------------------------------------------------------- subtitles


_cue_lock = threading.Lock()
_cue_cache: BoundedMemo[tuple] = BoundedMemo(1024)  # SRT cues per subtitle file
_warned: set[str] = set()


def load_cues(path: Path) -> tuple:
    """The cues of an SRT file (`utils.subtitles.parse_srt`, parsed once per file and process)."""
    from lmms_video_reasoning.utils.media import subtitles

    key = str(path)
    with _cue_lock:
        if key not in _cue_cache:
            _cue_cache[key] = tuple(subtitles.parse_srt(path).cues)
        return _cue_cache[key]


def subtitles_for(plan: FramePlan) -> str:
    """The subtitles block for a frame plan ('' when the video has no SRT or no cue applies).

    `get_subtitles` with `sub_time=True`, via `utils.subtitles.lines_for_times` at the
    frames' exact times `index / fps`.
    """
    from lmms_video_reasoning.utils.media import subtitles

    path = data.subtitle_path(plan.video_uid)
    if path is None:
        return ""
    cues = load_cues(path)
    if not cues and str(path) not in _warned:
        _warned.add(str(path))
        logger.warning("cg_bench: %s yields no subtitle line (%s); its questions are asked without subtitles and "
                       "counted in subtitles_unusable", path, data.subtitle_problem(path))
    times = [index / plan.fps for index in plan.indices]
    return subtitles.subtitle_prompt(subtitles.lines_for_times(cues, times))


def subtitles_missing(video_uid: str) -> bool:
    """The video has no subtitle file under the data root (its prompt goes without subtitles)."""
    try:
        return data.subtitle_path(video_uid) is None
    except ValueError:
        return False


def subtitles_unusable(video_uid: str) -> str | None:
    """Why the video's SRT gives the prompt nothing, when it has an SRT (None: fine or absent).
    Never raises: a root that cannot be read is reported where the media are resolved."""
    try:
        path = data.subtitle_path(video_uid)
    except ValueError:
        return None
    if path is None or load_cues(path):
        return None
    return data.subtitle_problem(path) or "no subtitle line"


def frames_for(plan: FramePlan) -> list:
    """The sampled frames as RGB PIL images (decodes the full video)."""
    from lmms_video_reasoning.utils.media import video

    return video.read_frames(data.video_path(plan.video_uid), list(plan.indices))
