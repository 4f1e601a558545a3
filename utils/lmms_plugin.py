"""Registration of this suite with lmms-eval.

lmms-eval (0.7.x) has no entry point for tasks, only one for models
(`lmms_eval.models`), whose callables run while `lmms_eval.models` is imported --
before the CLI builds its `TaskManager`. `register` uses that moment to add our
task folder to every `TaskManager` (by wrapping `TaskManager.initialize_tasks`)
and returns the manifest of the replay model. So, after `pip install`,
`python -m lmms_eval --tasks <one of our tasks> ...` finds them with no flag.

lmms-eval swallows exceptions raised here as a warning, so failures are logged
loudly and `tests/test_plugin.py` fails if the hook stops working.
`--include_path "$(lmms-vr tasks-path)"` is the documented fallback.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

logger = logging.getLogger("lmms_video_reasoning")

_MARKER = "_lmms_video_reasoning_wrapped"


def tasks_dir() -> Path:
    """The folder holding this suite's task YAMLs (installed package data)."""
    import lmms_video_reasoning.tasks as tasks_pkg

    return Path(tasks_pkg.__file__).resolve().parent


def _add_our_tasks(include_path):
    ours = str(tasks_dir())
    if include_path is None:
        return [ours]
    paths = [include_path] if isinstance(include_path, str) else list(include_path)
    if any(Path(p).resolve() == Path(ours) for p in paths):
        return paths  # already given with --include_path: index it once
    return paths + [ours]


def install_task_path() -> None:
    """Make every lmms-eval `TaskManager` index our task folder (idempotent)."""
    from lmms_eval.tasks import TaskManager

    original = TaskManager.initialize_tasks
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def initialize_tasks(self, include_path=None, include_defaults=True):
        return original(self, include_path=_add_our_tasks(include_path), include_defaults=include_defaults)

    setattr(initialize_tasks, _MARKER, True)
    TaskManager.initialize_tasks = initialize_tasks


def model_manifests() -> list:
    """Manifests of the models this suite adds (the replay model)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id="vr_replay", simple_class_path="lmms_video_reasoning.utils.replay_model.ReplayModel")]


def register() -> list:
    """Entry point `lmms_eval.models`: add our tasks, return our model manifests."""
    try:
        install_task_path()
    except Exception:  # lmms-eval would only print a warning: make it visible
        logger.exception("lmms-video-reasoning could not register its tasks with lmms-eval; "
                         "use --include_path \"$(lmms-vr tasks-path)\" meanwhile")
        raise
    return model_manifests()
