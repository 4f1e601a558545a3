"""CG-Bench's protocol tasks with the official subtitle input: the lines of `cg_subtitles/<video_uid>.srt` at the
sampled frames' times, in each question's text block (`frames.subtitles_for`).

The documents, frames and scoring are `protocol.py`'s; here: the subtitle files, and the text hooks that show them.
"""

import os
from pathlib import Path

from lmms_eval.tasks.cgbench.protocol import Media, resolve, video_path
from lmms_video_reasoning.cg_bench import frames, task


class SubtitledMedia(Media):
    """The protocol's media, with each video's subtitles (not every video has them)."""

    def subtitle_path(self, video_uid):
        path = resolve(f"{video_uid}.srt", "CGBENCH_SUBTITLE_DIR", ("cg_subtitles", "subtitles"))
        return Path(path) if os.path.exists(path) else None


MEDIA = SubtitledMedia(video_path)


def cgbench_protocol_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA, frames.subtitles_for)


def cgbench_protocol_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA, frames.subtitles_for)
