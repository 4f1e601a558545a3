"""Registration of this suite with lmms-eval: the `install_*` hooks `autoload.HOOKS` runs once each of
lmms-eval's modules is imported, and `register`, the `lmms_eval.models` entry point (run while
`lmms_eval.models` is imported, before the CLI builds its `TaskManager`), which starts those hooks and
returns the replay model's manifest. Every registered benchmark's task folders (`registry.task_dirs`)
join every `TaskManager`: after `pip install`, `python -m lmms_eval --tasks <ours>` needs no flag.
Every change to lmms-eval goes through a touchpoint of `host.py`; `--include_path "$(lmms-vr
tasks-path)"` is the documented fallback for the task path.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from pathlib import Path
from typing import Callable

from lmms_video_reasoning.utils.lmms import host, judge_usage

logger = logging.getLogger("lmms_video_reasoning")


def task_dirs() -> list[Path]:
    """The task folders of every registered benchmark; when an external declaration cannot be loaded,
    this suite's own, with one error naming it (it must not hide the other tasks from lmms-eval)."""
    from lmms_video_reasoning.utils.core import registry

    try:
        return registry.task_dirs()
    except Exception as error:  # noqa: BLE001 - lmms-eval would only show a warning, or nothing
        _report_unindexed(str(error))
        return registry.task_dirs(registry.builtin())


@functools.cache  # once per process and error
def _report_unindexed(error: str) -> None:
    logger.error("lmms-video-reasoning: %s; its tasks are not indexed (this suite's own are)", error)


def include_path() -> tuple[Path, list[Path]]:
    """(one folder for lmms-eval's `--include_path`, the registered task folders it does not hold):
    installed, the namespace folder holds every built-in benchmark's `tasks/` and no other YAML."""
    from lmms_video_reasoning.utils.core import registry

    folders, root = task_dirs(), registry.ROOT  # <namespace>/<benchmark>/tasks
    if root.name != registry.NAMESPACE:  # a source checkout: one folder per benchmark
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
    from lmms_eval.tasks import TaskManager

    def check_and_wrap() -> None:
        host.require("include_path" in host.parameter_names(TaskManager.initialize_tasks),
                     "TaskManager.initialize_tasks has no include_path parameter")

        def include_path(arguments: dict) -> list:
            from lmms_video_reasoning.utils.lmms import autoload

            # lmms-eval's CLI builds its TaskManager once `lmms_eval.evaluator` is imported: its hooks now,
            # when the finder came too late to see it (the entry point runs inside its import)
            autoload.hook()
            return _add_our_tasks(arguments.get("include_path"))

        host.wrap(TaskManager, "initialize_tasks", _replacing("include_path", include_path))

    host.TASK_PATH.install(check_and_wrap)


def _replacing(parameter: str, value: Callable[[dict], object]) -> Callable[[Callable], Callable]:
    """A `make` for `host.wrap`: the original called with `parameter` set to `value(its arguments by
    name)`, every other argument passed on as given (a parameter the host adds later included)."""

    def make(original):
        signature = inspect.signature(original)

        def replacement(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.arguments[parameter] = value(bound.arguments)
            return original(*bound.args, **bound.kwargs)

        return replacement

    return make


def install_model_manifests() -> None:
    """Register our models if lmms-eval's entry-point loading did not (it stops at the first failing one)."""

    def register_missing() -> None:
        from lmms_eval.models import MODEL_REGISTRY_V2

        for attribute in ("register_manifest", "list_canonical_model_ids"):
            host.require(hasattr(MODEL_REGISTRY_V2, attribute), f"MODEL_REGISTRY_V2 has no {attribute}")
        for manifest in model_manifests():
            if manifest.model_id not in MODEL_REGISTRY_V2.list_canonical_model_ids():
                MODEL_REGISTRY_V2.register_manifest(manifest)

    host.MODEL_MANIFESTS.install(register_missing)


def install_metric_hooks() -> None:
    """Standard errors for our headline metrics (our aggregations carry `stderr_for(bootstrap_iters)`,
    asked first), and judge usage attributed to the task being aggregated (our judging runs there)."""
    import lmms_eval.api.metrics as metrics
    import lmms_eval.evaluator_utils as evaluator_utils

    def wrap_stderr() -> None:
        host.require(host.parameter_names(metrics.stderr_for_metric)[:2] == ["metric", "bootstrap_iters"],
                     "stderr_for_metric(metric, bootstrap_iters) has another signature")
        host.require(hasattr(evaluator_utils, "stderr_for_metric"), "evaluator_utils no longer imports stderr_for_metric")

        def make(original):
            def stderr_for_metric(metric, bootstrap_iters, *args, **kwargs):  # the parameters checked above
                own = getattr(metric, "stderr_for", None)
                ours = own(bootstrap_iters) if callable(own) else None
                return ours if ours is not None else original(metric, bootstrap_iters, *args, **kwargs)

            return stderr_for_metric

        host.wrap(metrics, "stderr_for_metric", make)
        evaluator_utils.stderr_for_metric = metrics.stderr_for_metric

    def wrap_task_context() -> None:
        task_output = getattr(evaluator_utils, "TaskOutput", None)
        host.require(task_output is not None and hasattr(task_output, "calculate_aggregate_metric"),
                     "evaluator_utils.TaskOutput.calculate_aggregate_metric is gone")
        host.require("task_name" in host.parameter_names(task_output.__init__), "TaskOutput has no task_name")
        usage = sys.modules.get("lmms_eval.models.model_utils.usage_metrics")  # what task_context sets, when loaded
        host.require(usage is None or callable(getattr(usage, "set_task_context", None)), "usage_metrics.set_task_context is gone")
        host.require(usage is None or hasattr(usage, "_CURRENT_TASK_CONTEXT"), "usage_metrics._CURRENT_TASK_CONTEXT is gone")

        def make(original):
            def calculate_aggregate_metric(self, *args, **kwargs):
                with judge_usage.task_context(getattr(self, "task_name", None)):
                    return original(self, *args, **kwargs)

            return calculate_aggregate_metric

        host.wrap(task_output, "calculate_aggregate_metric", make)

    host.STDERR.install(wrap_stderr)
    host.TASK_CONTEXT.install(wrap_task_context)


def install_usage_hooks() -> None:
    """Judge cost in lmms-eval's usage summary, our total reset with lmms-eval's (`lmms_eval.evaluator`
    binds both by name at its import: when already imported, its names are rebound too)."""
    import lmms_eval.models.model_utils.usage_metrics as usage

    def wrap_usage() -> None:
        for name in ("summarize_usage_metrics", "reset_usage_metrics", "log_usage"):
            host.require(callable(getattr(usage, name, None)), f"usage_metrics.{name} is gone")
        host.require({"model_name", "input_tokens", "output_tokens", "source"} <= set(host.parameter_names(usage.log_usage)),
                     "usage_metrics.log_usage(model_name, input_tokens, output_tokens, source) has another signature")
        originals = usage.summarize_usage_metrics, usage.reset_usage_metrics
        host.wrap(usage, "summarize_usage_metrics", lambda summarize: lambda *a, **k: judge_usage.add_cost(summarize(*a, **k)))
        host.wrap(usage, "reset_usage_metrics", lambda reset: lambda *a, **k: judge_usage.reset() or reset(*a, **k))
        evaluator = sys.modules.get("lmms_eval.evaluator")
        for name, original in zip(("summarize_usage_metrics", "reset_usage_metrics"), originals):
            if evaluator is not None and getattr(evaluator, name, None) is original:
                setattr(evaluator, name, getattr(usage, name))

    host.JUDGE_USAGE.install(wrap_usage)


def install_evaluator_hooks() -> None:
    """`lmms_eval.evaluator`'s hooks: its judge server kept for our judging (`launcher.py`),
    `preflight.start` when `simple_evaluate` starts, `preflight.load_tasks` around its task loading."""
    from lmms_video_reasoning.utils.lmms import launcher, preflight

    launcher.install()
    import lmms_eval.evaluator as evaluator

    def check_and_wrap() -> None:
        for name in ("simple_evaluate", "get_task_dict"):
            host.require(callable(getattr(evaluator, name, None)), f"lmms_eval.evaluator.{name} is gone")
        host.require({"model", "tasks", "cli_args"} <= set(host.parameter_names(evaluator.simple_evaluate)),
                     "simple_evaluate(model, ..., tasks, ..., cli_args) has another signature")
        host.require(host.parameter_names(evaluator.get_task_dict)[:1] == ["task_name_list"],
                     "get_task_dict(task_name_list, ...) has another signature")

        def tasks(arguments: dict) -> list | None:
            return preflight.start(arguments.get("tasks"), getattr(arguments.get("cli_args"), "tasks", None))

        def make_load(original):
            def get_task_dict(task_name_list, *args, **kwargs):
                return preflight.load_tasks(lambda tasks: original(tasks, *args, **kwargs), task_name_list)

            return get_task_dict

        host.wrap(evaluator, "simple_evaluate", _replacing("tasks", tasks))
        host.wrap(evaluator, "get_task_dict", make_load)

    host.STARTUP_CHECK.install(check_and_wrap)


def model_manifests() -> list:
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id="vr_replay", simple_class_path="lmms_video_reasoning.utils.lmms.replay_model.ReplayModel")]


def register() -> list:
    """Entry point `lmms_eval.models`: the post-import hooks (`autoload.hook`) and our model manifests
    (the registry is being built)."""
    from lmms_video_reasoning.utils.lmms import autoload, launcher

    autoload.hook()
    launcher.register_judge_settings()  # the evaluator is wrapped once it is imported (autoload, or the first TaskManager)
    return model_manifests()
