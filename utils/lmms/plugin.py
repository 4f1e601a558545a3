"""Registration of this suite with lmms-eval.

lmms-eval (0.7.x) has no entry point for tasks, only one for models
(`lmms_eval.models`), whose callables run while `lmms_eval.models` is imported --
before the CLI builds its `TaskManager`. `register` uses that moment to add the task
folders of every registered benchmark (`utils.core.registry.task_dirs`: this suite's, and
those declared by entry point or `LMMS_VR_BENCHMARKS`) to every `TaskManager` (by wrapping
`TaskManager.initialize_tasks`) and returns the manifest of the replay model. So, after
`pip install`, `python -m lmms_eval --tasks <one of our tasks> ...` finds them with no flag.

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


_reported: set[str] = set()


def task_dirs() -> list[Path]:
    """The task folders of every registered benchmark. When a benchmark declared outside this
    suite cannot be loaded, this suite's own, with one error naming the declaration: a broken
    external declaration must not hide the other tasks from lmms-eval."""
    from lmms_video_reasoning.utils.core import registry

    try:
        return registry.task_dirs()
    except Exception as error:  # noqa: BLE001 - lmms-eval would only show a warning, or nothing
        if str(error) not in _reported:
            _reported.add(str(error))
            logger.error("lmms-video-reasoning: %s; its tasks are not indexed (this suite's own are)", error)
        return registry.task_dirs(registry.builtin())


def include_path() -> tuple[Path, list[Path]]:
    """(one folder for lmms-eval's `--include_path`, the registered task folders it does not hold).

    lmms-eval indexes that folder recursively; in an installed package the namespace folder
    `lmms_video_reasoning/` holds every built-in benchmark's `tasks/` and no other YAML."""
    from lmms_video_reasoning.utils.core import registry

    folders = task_dirs()
    builtin = registry.task_dirs(registry.builtin())
    parents = {folder.parent.parent for folder in builtin}  # <namespace>/<benchmark>/tasks
    root = parents.pop() if len(parents) == 1 else None
    if root is None or root.name != registry.NAMESPACE:  # a source checkout: one folder per benchmark
        return folders[0], folders[1:]
    return root, [folder for folder in folders if root not in folder.parents]


def _add_our_tasks(include_path):
    ours = [str(folder) for folder in task_dirs()]
    if include_path is None:
        return ours
    paths = [include_path] if isinstance(include_path, str) else list(include_path)
    given = {Path(p).resolve() for p in paths}
    # a folder already given with --include_path (or one holding it) is indexed once
    return paths + [folder for folder in ours if not any(g == Path(folder) or g in Path(folder).parents for g in given)]


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


def model_manifests() -> list:
    """Manifests of the models this suite adds (the replay model)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id="vr_replay", simple_class_path="lmms_video_reasoning.utils.lmms.replay_model.ReplayModel")]


def register() -> list:
    """Entry point `lmms_eval.models`: add our tasks, return our model manifests."""
    try:
        install_task_path()
    except Exception:  # lmms-eval would only print a warning: make it visible
        logger.exception("lmms-video-reasoning could not register its tasks with lmms-eval; "
                         "use --include_path \"$(lmms-vr tasks-path)\" meanwhile")
        raise
    return model_manifests()
