"""Every assumption this suite makes about lmms-eval, declared in one place.

lmms-eval (0.7.x) offers entry points for models only, so the rest of the integration touches the
host's internals. Each such place is a `Touchpoint` (`TOUCHPOINTS`: what it gives the user, what
it assumes of lmms-eval, what the user loses while it is off, the workaround). `Touchpoint.install`
leaves it off, with one WARNING, on an lmms-eval version not in `VERIFIED` (unless
`LMMS_VR_HOST_UNVERIFIED=1`), when its own check of the host fails, or when installing raises:
nothing here ever fails an lmms-eval command. `lmms-vr doctor` prints every touchpoint's state.

Reading lmms-eval's internals from the stack happens here too, and only here: `calling_model`
(touchpoint fast-inputs) and `caller_locals`: our records and judge accounting go beside lmms-eval's
`<date_id>_results.json` with the same `date_id`, a local of `simple_evaluate` (`run_identity`,
touchpoint run-files; without it rebuilt from the CLI arguments as lmms-eval 0.7 does, failing that
the output path and the time UTC), and every task's records come from `evaluate`'s (run-records).
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import logging
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from lmms_video_reasoning.utils.core import settings

log = logging.getLogger("lmms_video_reasoning.host")

HOST_UNVERIFIED = settings.declare("LMMS_VR_HOST_UNVERIFIED", "bool", False,
                                   "install host touchpoints on lmms-eval versions they were not verified on")

VERIFIED = ("0.7.3",)  # lmms-eval versions every touchpoint below was run against (tests/test_host.py)
WRAPPED = "_lmms_video_reasoning_wrapped"  # marks a host function we wrapped (installing twice is a no-op)


class HostAssumptionFailed(RuntimeError):
    """The installed lmms-eval is not what a touchpoint assumes (message: what differs)."""


def host_version(package: str = "lmms-eval") -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class Touchpoint:
    name: str
    gives: str  # what the user gets while it is on
    assumes: str  # the host facts it relies on
    lost: str  # what the user loses while it is off
    workaround: str
    state: str = "not installed"  # "on", "off: <why>", or "not installed" (its lmms-eval module never loaded)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _installing: bool = field(default=False, repr=False)

    def install(self, install: Callable[[], None]) -> bool:
        """Run `install` (which raises HostAssumptionFailed when the host differs) unless off."""
        with self._lock:
            if self.state == "on":
                return True
            # off: decided once per process, warned once; installing imports lmms-eval modules whose hooks land here again
            if self.state.startswith("off") or self._installing:
                return False
            why = unverified()
            if why:
                return self._off(why)
            self._installing = True
            try:
                install()
            except Exception as error:  # noqa: BLE001 - never break the host's own import
                return self._off(str(error) if isinstance(error, HostAssumptionFailed) else f"{type(error).__name__}: {error}")
            finally:
                self._installing = False
            self.state = "on"
            return True

    def worked(self) -> None:
        if self.state == "not installed":
            self.state = "on"

    def switch_off(self, why: str) -> None:
        """Turn off at run time (an assumption found false while running), warning once."""
        with self._lock:
            if not self.state.startswith("off"):
                self._off(why)

    def _off(self, why: str) -> bool:
        self.state = f"off: {why}"
        log.warning("lmms-video-reasoning: %s is off (%s). You lose: %s. Workaround: %s.",
                    self.name, why, self.lost, self.workaround)
        return False


def unverified() -> str | None:
    """Why the touchpoints stay off on this lmms-eval (a version not in `VERIFIED`, not overridden), or None."""
    version = host_version()
    if version in VERIFIED or HOST_UNVERIFIED.read():
        return None
    return f"lmms-eval {version} is not among the verified versions {', '.join(VERIFIED)} (LMMS_VR_HOST_UNVERIFIED=1 tries anyway)"


def require(condition: bool, what: str) -> None:
    if not condition:
        raise HostAssumptionFailed(what)


def wrap(owner: object, attribute: str, make: Callable[[Callable], Callable]) -> None:
    """Replace `owner.attribute` with `make(original)` (once; the replacement is marked)."""
    original = getattr(owner, attribute)
    if getattr(original, WRAPPED, False):
        return
    replacement = functools.wraps(original)(make(original))
    setattr(replacement, WRAPPED, True)
    setattr(owner, attribute, replacement)


def parameter_names(function: Callable) -> list[str]:
    return list(inspect.signature(function).parameters)


# -- the touchpoints (installed by utils/lmms/plugin.py; used where named): Touchpoint(name, gives, assumes, lost, workaround)
TOUCHPOINTS: dict[str, Touchpoint] = {point.name: point for point in (
    Touchpoint("task-path", "this suite's tasks in every lmms-eval command (run, `tasks list`, serve) with no flag",
        "lmms_eval.tasks.TaskManager.initialize_tasks(include_path=...) builds every task index",
        "the tasks are not found by name",
        'pass --include_path "$(lmms-vr tasks-path)"'),
    Touchpoint("model-manifests", "the `vr_replay` model (replay predictions)",
        "lmms_eval.models.MODEL_REGISTRY_V2 with register_manifest / list_canonical_model_ids and "
            "lmms_eval.models.registry_v2.ModelManifest(model_id, simple_class_path)",
        "--model vr_replay is unknown",
        "score predictions with `lmms-vr score PREDICTIONS.jsonl --task TASK`"),
    Touchpoint("stderr", "bootstrap standard errors of the headline metrics in lmms-eval's Stderr column",
        "lmms_eval.api.metrics.stderr_for_metric(metric, bootstrap_iters), imported by name into "
            "lmms_eval.evaluator_utils (its `cluster_key` CLT errors cover means of per-sample scores only, "
            "not F1 of means or per-question joins)",
        "Stderr shows N/A for this suite's metrics",
        "`lmms-vr report RESULTS` gives the same bootstrap intervals"),
    Touchpoint("task-context", "judge usage attributed to the task being aggregated, and the task's records file named",
        "lmms_eval.evaluator_utils.TaskOutput.calculate_aggregate_metric(self, ...) with self.task_name; "
            "usage_metrics.set_task_context and its module variable _CURRENT_TASK_CONTEXT",
        "judge usage is not split by task; records files are named `records_task.jsonl`",
        "the judge accounting file beside the results holds the judge's calls and cost"),
    Touchpoint("judge-usage", "the judge's tokens and cost in lmms-eval's usage summary (results['usage'])",
        "lmms_eval.models.model_utils.usage_metrics.summarize_usage_metrics / reset_usage_metrics / "
            "log_usage(model_name, input_tokens, output_tokens, source), bound by lmms_eval.evaluator at its import",
        "the judge's cost is missing from results['usage']",
        "read `<date>_judge_accounting_<benchmark>.json` beside the results"),
    Touchpoint("run-files", "the records and judge accounting written beside the run's results with the same date prefix",
        "lmms_eval.evaluator.simple_evaluate's locals `datetime_str` and `evaluation_tracker` on the "
            "aggregating thread's stack",
        "extra files carry a date rebuilt from the CLI arguments (may differ from the results file by a second)",
        "`lmms-vr score OUTPUT_PATH` pairs files by task, not only by date"),
    Touchpoint("run-records", "every task's records written before the run's first judging starts",
        "lmms_eval.evaluator.evaluate's local `eval_tasks` (TaskOutput with task_name, task, "
            "sample_metrics) on the aggregating thread's stack, all filled before the first aggregation",
        "each task's records are written when its own aggregation starts: a run killed while judging "
            "an earlier task loses the later tasks' generations",
        "generate with --predict_only --log_samples, then `lmms-vr score OUTPUT_PATH`"),
    Touchpoint("fast-inputs", "video-native models decode only the frames they keep, from a small proxy clip",
        "the model classes of utils/lmms/model_readings.py KNOWN_MODELS and their frame readings "
            "(qwen-vl-utils versions in model_readings.VERIFIED_VERSIONS); the model calling a hook is on its stack "
            "(calling_model)",
        "models decode the whole video themselves (slower, more memory; the same frames)",
        "none needed for correctness; LMMS_VR_VIDEO_INPUT=path is the same behaviour on purpose"),
    Touchpoint("failure-placeholders", "API models' give-up strings counted as model failures instead of scored as answers",
        "the placeholder texts of lmms-eval's API models (utils/lmms/responses.py)",
        "a failed API request may be scored as a wrong answer",
        "check `model_failed` against your API logs"),
    Touchpoint("cli-arguments", "the preflight knows --model, --output_path and --predict_only before generation",
        "lmms-eval's CLI flags --model, --output_path, --predict_only in sys.argv",
        "the preflight checks everything (judge and media) whatever the flags",
        "LMMS_VR_PREFLIGHT=off skips the preflight"),
    Touchpoint("start-up-check", "every setting, the data roots and the output folder checked before the model loads, all problems in one "
            "message; every task that fails to load named at once; `--tasks cg_bench` run from a folder holding ./cg_bench",
        "lmms_eval.evaluator.simple_evaluate(model, ..., tasks=..., cli_args=...) loads the model after it starts, and "
            "loads the tasks through lmms_eval.evaluator.get_task_dict(task_name_list, ...)",
        "the start-up checks run when the first task loads (after the model), and stop at the first task that fails",
        "`lmms-vr doctor` lists every invalid setting and data root before a run"),
    Touchpoint("judge-server", "the judge server `--launcher_args` starts judges this suite's tasks and lives until their judging (in "
            "aggregation) is done",
        "lmms_eval.evaluator.get_launcher(name)(**launcher_args) builds the launcher (simple_evaluate); evaluate calls "
            "launch() on rank 0 after generation, clean() on rank 0 before aggregation, then consolidate_results(...); "
            "launchers have host, port, model (api_key) and serve the OpenAI API under /v1 (utils/lmms/launcher.py)",
        "a server started with --launcher_args is stopped before this suite judges: its judged metrics are not computed",
        "start the judge server yourself and set LMMS_VR_JUDGE_BASE_URL and LMMS_VR_JUDGE_MODEL, or judge later "
            "with `lmms-vr score`"),
        )}
(TASK_PATH, MODEL_MANIFESTS, STDERR, TASK_CONTEXT, JUDGE_USAGE, RUN_FILES, RUN_RECORDS, FAST_INPUTS,
 FAILURE_PLACEHOLDERS, CLI_ARGUMENTS, STARTUP_CHECK, JUDGE_SERVER) = TOUCHPOINTS.values()


# -- lmms-eval's internals read from the stack ----------------------------------------------------


def caller_locals(function: str, name: str) -> dict | None:
    """The locals of the nearest frame, from the caller's caller outwards, running `function` with
    the local `name` (lmms-eval keeps the run's date and tasks as locals of simple_evaluate /
    evaluate); None when none does. By name, not depth: inlined comprehensions change nothing."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == function and name in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    return None


def calling_model():
    """The lmms-eval model (an `lmms_eval.api.model.lmms`) whose method is running on this thread's
    stack, innermost first: the model that called a task's hook; None outside a model. The walk goes
    to the bottom of the stack (no frame count: Pythons differ in giving comprehensions a frame)."""
    try:
        from lmms_eval.api.model import lmms
    except Exception:  # noqa: BLE001 - lmms-eval absent: no model to find
        return None
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_argcount > 0 and code.co_varnames[0] == "self":  # cheap test first: f_locals copies on 3.11
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, lmms):
                return candidate
        frame = frame.f_back
    return None


def run_identity(args: Any) -> tuple[str, str]:
    """(date_id, model folder) of the run in progress ("" folder when unknown)."""
    date_id = folder = None
    scope = caller_locals("simple_evaluate", "datetime_str")
    if scope is not None:
        RUN_FILES.worked()
        date_id = str(scope["datetime_str"]).replace(":", "-")
        folder = getattr(getattr(scope.get("evaluation_tracker"), "general_config_tracker", None), "model_name_sanitized", None)
        if folder is not None:
            return date_id, folder
    else:
        RUN_FILES.switch_off("no lmms_eval.evaluator.simple_evaluate frame with datetime_str on the aggregating thread")
    try:
        from lmms_eval.loggers.evaluation_tracker import GeneralConfigTracker
        from lmms_eval.utils import get_datetime_str, sanitize_model_name

        folder = folder or sanitize_model_name(GeneralConfigTracker._get_model_name(str(getattr(args, "model_args", "") or "")))
        date_id = date_id or get_datetime_str(timezone=getattr(args, "timezone", None) or "Asia/Singapore").replace(":", "-")
    except Exception:  # noqa: BLE001 - another lmms-eval version: the output folder and a UTC time
        folder = folder or ""
        date_id = date_id or datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")
    return date_id, folder


def suite_records_of_run() -> dict[str, list] | None:
    """{task: its records} for every task of this suite (its aggregations carry their benchmark) in
    the run being aggregated, from `evaluate`'s `eval_tasks` (touchpoint `run-records`: every task's
    records are built before the first aggregation); None when not found."""
    from lmms_video_reasoning.utils.core.records import records_of

    scope = caller_locals("evaluate", "eval_tasks")
    if scope is None:
        RUN_RECORDS.switch_off("no lmms_eval.evaluator.evaluate frame with eval_tasks on the aggregating thread")
        return None
    found = {}
    for task_output in scope["eval_tasks"]:
        task = getattr(task_output, "task", None)
        aggregations = task.aggregation() if task is not None and hasattr(task, "aggregation") else {}
        for (metric, _filter), items in (getattr(task_output, "sample_metrics", None) or {}).items():
            if getattr(aggregations.get(metric), "benchmark", None):
                found[task_output.task_name] = records_of(items)
                break
    RUN_RECORDS.worked()
    return found
