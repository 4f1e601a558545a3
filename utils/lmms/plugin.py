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

The entry point does not run for the subcommands that never import `lmms_eval.models`
(`lmms-eval tasks`, `power`, `serve`): `lmms_autoload` (started by the installed
`lmms_video_reasoning.pth`) calls the `install_*` functions below as soon as lmms-eval's
own modules are imported, which covers every entry point.
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


def install_model_manifests() -> None:
    """Register our models in lmms-eval's registry if its entry-point loading did not
    (lmms-eval stops at the first failing third-party entry point)."""
    from lmms_eval.models import MODEL_REGISTRY_V2

    for manifest in model_manifests():
        if manifest.model_id not in MODEL_REGISTRY_V2.list_canonical_model_ids():
            MODEL_REGISTRY_V2.register_manifest(manifest)


def install_metric_hooks() -> None:
    """Standard errors for our headline metrics, and judge usage attributed to the task
    being aggregated (judging runs in aggregation, after lmms-eval cleared its task context).

    `stderr_for_metric` gives a standard error only for lmms-eval's own aggregation
    functions; ours carry theirs (`aggregation.stderr_for(bootstrap_iters)`, set by
    `utils/results/aggregation.py`), so it is asked first.
    """
    import lmms_eval.api.metrics as metrics
    import lmms_eval.evaluator_utils as evaluator_utils

    from lmms_video_reasoning.utils.lmms import judge_usage

    original = metrics.stderr_for_metric
    if not getattr(original, _MARKER, False):

        @functools.wraps(original)
        def stderr_for_metric(metric, bootstrap_iters: int):
            own = getattr(metric, "stderr_for", None)
            ours = own(bootstrap_iters) if callable(own) else None
            return ours if ours is not None else original(metric, bootstrap_iters)

        setattr(stderr_for_metric, _MARKER, True)
        metrics.stderr_for_metric = evaluator_utils.stderr_for_metric = stderr_for_metric

    task_output = evaluator_utils.TaskOutput
    calculate = task_output.calculate_aggregate_metric
    if not getattr(calculate, _MARKER, False):

        @functools.wraps(calculate)
        def calculate_aggregate_metric(self, *args, **kwargs):
            with judge_usage.task_context(self.task_name):
                return calculate(self, *args, **kwargs)

        setattr(calculate_aggregate_metric, _MARKER, True)
        task_output.calculate_aggregate_metric = calculate_aggregate_metric


def install_usage_hooks() -> None:
    """Judge cost in lmms-eval's usage summary; our running total reset with lmms-eval's."""
    import lmms_eval.models.model_utils.usage_metrics as usage

    from lmms_video_reasoning.utils.lmms import judge_usage

    summarize, reset = usage.summarize_usage_metrics, usage.reset_usage_metrics
    if getattr(summarize, _MARKER, False):
        return

    @functools.wraps(summarize)
    def summarize_usage_metrics():
        return judge_usage.add_cost(summarize())

    @functools.wraps(reset)
    def reset_usage_metrics():
        judge_usage.reset()
        return reset()

    setattr(summarize_usage_metrics, _MARKER, True)
    usage.summarize_usage_metrics, usage.reset_usage_metrics = summarize_usage_metrics, reset_usage_metrics


def install_launcher_hooks() -> None:
    """lmms-eval's judge settings (API_TYPE=local, --launcher_args) for our judges, and its judge
    server kept until our judging is done (`launcher.py`)."""
    from lmms_video_reasoning.utils.lmms import launcher

    launcher.install()


def model_manifests() -> list:
    """Manifests of the models this suite adds (the replay model)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id="vr_replay", simple_class_path="lmms_video_reasoning.utils.lmms.replay_model.ReplayModel")]


def register() -> list:
    """Entry point `lmms_eval.models`: add our tasks, return our model manifests."""
    from lmms_video_reasoning.utils.lmms import launcher

    launcher.register_judge_settings()  # the launcher itself is wrapped once lmms_eval.evaluator is imported (autoload)
    try:
        install_task_path()
    except Exception:  # lmms-eval would only print a warning: make it visible
        logger.exception("lmms-video-reasoning could not register its tasks with lmms-eval; "
                         "use --include_path \"$(lmms-vr tasks-path)\" meanwhile")
        raise
    return model_manifests()
