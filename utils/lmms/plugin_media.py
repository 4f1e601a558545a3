"""A benchmark's "get the frames" on its data root, and its `process_docs` hooks: one form for every
benchmark of the plugin (the upstream task folders have their own, on lmms-eval's dataset).

`FileMedia` reads a question's video where the benchmark's resolver finds it (a MediaError naming
the file, the variable and the command when it is absent): the frame plan from the container, the
frames from the exact sampler, and for video-native models the proxy clip of `model_video`, the
file decoded first either way (lmms-eval's `qwen2_vl` would swallow a decode error and answer from
the text alone). `docs_loader` makes a `process_docs` hook checked before generation (`preflight`), `with_media` a task's
`doc_to_*` hook on the benchmark's media.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.core.roots import DataSource, data_root, docs_dataset, usable_video
from lmms_video_reasoning.utils.media import video


class FileMedia:
    """The videos of `source` under its data root; `resolve(key)` is the file of a question's key (its
    document, or its video's id), MediaError when it is absent."""

    def __init__(self, source: DataSource, resolve: Callable[[Any], Path]):
        self.source, self.resolve = source, resolve

    def plan(self, key, plan: FramePlan, n: int):
        return video.plan_frames(self.resolve(key), plan, n)

    def frames(self, key, indices: Sequence[int], size: tuple[int, int] | None = None) -> list:
        return list(video.read_frames(self.resolve(key), list(indices), size=size))

    def checked(self, key) -> Path:
        """The file, opened once (cached) to check it decodes; MediaError naming it and the fix."""
        return usable_video(self.source, self.resolve(key))

    def video(self, key, pick: Callable[[int], list[int]] | None = None, size: tuple[int, int] | None = None) -> str:
        """What a video-native model is handed: a proxy clip of its own frames (or of `pick`'s, at `size`)."""
        from lmms_video_reasoning.utils.lmms import model_video

        return model_video.video_for_model(self.resolve(key), frames=pick, size=size, on_broken=lambda _path: self.checked(key))


def docs_loader(data: ModuleType, records: Callable[[], list[dict]], build: Callable[[list[dict]], list[dict]] = list,
                media: bool = True, judge: bool = True, key: str = ""):
    """A `process_docs` hook (lmms-eval hands it a placeholder dataset): the documents `build` makes of
    `records()`, with `preflight.task_load`'s checks (media: `data.media_kinds` on the data root)."""

    def load_docs(_placeholder=None):
        from lmms_video_reasoning.utils.lmms import preflight

        source = data.SOURCE
        kinds = (lambda: data.media_kinds(data_root(source), records())) if media else None
        return preflight.task_load(source, lambda: docs_dataset(build(records())), kinds, judge, key)

    return load_docs


def with_media(hook: Callable, media, chosen: Callable[[dict | None], dict | None] | None = None, **given) -> Callable:
    """The task's lmms-eval hook `doc_to_*(doc, lmms_eval_specific_kwargs, media, **given)` on the benchmark's `media`;
    `chosen`: the task's kwargs with the suite's environment overrides in place (`settings.chosen_values`)."""
    def on_media(doc: dict, lmms_eval_specific_kwargs: dict | None = None):
        return hook(doc, chosen(lmms_eval_specific_kwargs) if chosen else lmms_eval_specific_kwargs, media, **given)

    on_media.__name__ = on_media.__qualname__ = hook.__name__
    return on_media
