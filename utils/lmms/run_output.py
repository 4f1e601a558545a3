"""Where the lmms-eval run in progress writes its results (touchpoint `run-files` of host.py).

Our records and judge accounting go beside lmms-eval's `<date_id>_results.json` with the same
`date_id`, so the files of one run pair up. lmms-eval keeps that date only as a local of
`simple_evaluate`, on the stack of the thread that aggregates; the walk looks for the frame
by its function name (no fixed depth, so inlined comprehensions of Python 3.12 change nothing).
Without it (another lmms-eval), the date and folder are rebuilt from the CLI arguments the way
lmms-eval 0.7 builds them, and failing that the folder is the output path and the time UTC.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any

from lmms_video_reasoning.utils.lmms import host


def run_identity(args: Any) -> tuple[str, str]:
    """(date_id, model folder) of the run in progress ("" folder when unknown)."""
    date_id, folder = _from_simple_evaluate()
    if date_id is not None:
        host.RUN_FILES.worked()
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


def _from_simple_evaluate() -> tuple[str | None, str | None]:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "simple_evaluate" and "datetime_str" in frame.f_locals:
            tracker = frame.f_locals.get("evaluation_tracker")
            folder = getattr(getattr(tracker, "general_config_tracker", None), "model_name_sanitized", None)
            return str(frame.f_locals["datetime_str"]).replace(":", "-"), folder
        frame = frame.f_back
    return None, None
