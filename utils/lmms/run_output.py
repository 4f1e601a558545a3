"""Where the lmms-eval run in progress writes its results (touchpoint `run-files` of host.py).

Our records and judge accounting go beside lmms-eval's `<date_id>_results.json` with the same
`date_id`, which lmms-eval keeps only as a local of `simple_evaluate` (`host.caller_locals`).
Without it, the date and folder are rebuilt from the CLI arguments as lmms-eval 0.7 does, and
failing that the folder is the output path and the time UTC.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from lmms_video_reasoning.utils.core.records import records_of
from lmms_video_reasoning.utils.lmms import host


def run_identity(args: Any) -> tuple[str, str]:
    """(date_id, model folder) of the run in progress ("" folder when unknown)."""
    date_id = folder = None
    scope = host.caller_locals("simple_evaluate", "datetime_str")
    if scope is not None:
        host.RUN_FILES.worked()
        date_id = str(scope["datetime_str"]).replace(":", "-")
        folder = getattr(getattr(scope.get("evaluation_tracker"), "general_config_tracker", None), "model_name_sanitized", None)
        if folder is not None:
            return date_id, folder
    else:
        host.RUN_FILES.switch_off("no lmms_eval.evaluator.simple_evaluate frame with datetime_str on the aggregating thread")
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
    scope = host.caller_locals("evaluate", "eval_tasks")
    if scope is None:
        host.RUN_RECORDS.switch_off("no lmms_eval.evaluator.evaluate frame with eval_tasks on the aggregating thread")
        return None
    found = {}
    for task_output in scope["eval_tasks"]:
        task = getattr(task_output, "task", None)
        aggregations = task.aggregation() if task is not None and hasattr(task, "aggregation") else {}
        for (metric, _filter), items in (getattr(task_output, "sample_metrics", None) or {}).items():
            if getattr(aggregations.get(metric), "benchmark", None):
                found[task_output.task_name] = records_of(items)
                break
    host.RUN_RECORDS.worked()
    return found

