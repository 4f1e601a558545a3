"""Judge calls in lmms-eval's own usage accounting (`results["usage"]`, source "judge").

The judge engine calls `record` once per answered HTTP request (cache hits are not API calls).
lmms-eval's usage records hold tokens only, so the estimated cost is added to its summary as
`by_source.judge.cost_usd` (`add_cost`). Outside lmms-eval (`lmms-vr score`) this is a no-op.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

from lmms_video_reasoning.judges import engine
from lmms_video_reasoning.judges.config import usd

# Read from sys.modules, so only when lmms-eval is running: importing it would cost seconds in `lmms-vr score`.
_USAGE_MODULE = "lmms_eval.models.model_utils.usage_metrics"
_lock = threading.Lock()
_cost_usd: float | None = None


def record(model: str, prompt_tokens: int, completion_tokens: int, price: dict[str, float] | None) -> None:
    """One answered judge request: tokens to lmms-eval's `log_usage(source="judge")`, cost kept here."""
    global _cost_usd
    usage = sys.modules.get(_USAGE_MODULE)
    if usage is None:
        return
    usage.log_usage(model_name=model, input_tokens=prompt_tokens, output_tokens=completion_tokens, source="judge")
    if price is not None:
        with _lock:
            _cost_usd = (_cost_usd or 0.0) + usd(price, prompt_tokens, completion_tokens)


engine.on_usage(record)


def reset() -> None:
    global _cost_usd
    with _lock:
        _cost_usd = None


def add_cost(summary: dict) -> dict:
    """lmms-eval's usage summary with the judge's estimated cost (when its price is known)."""
    judge = (summary or {}).get("by_source", {}).get("judge")
    if judge is not None:
        with _lock:
            judge["cost_usd"] = None if _cost_usd is None else round(_cost_usd, 6)
    return summary


_current_task: str | None = None  # the task lmms-eval is aggregating (names its records file)


def current_task() -> str | None:
    return _current_task


@contextlib.contextmanager
def task_context(task_name: str) -> Iterator[None]:
    """Attribute usage logged inside the block (our judging runs in aggregation) to `task_name`."""
    global _current_task
    saved_task, _current_task = _current_task, task_name
    usage = sys.modules.get(_USAGE_MODULE)
    previous = getattr(usage, "_CURRENT_TASK_CONTEXT", None)
    try:
        if usage is not None:
            usage.set_task_context(task_name)
        yield
    finally:
        if usage is not None:
            usage.set_task_context(previous)
        _current_task = saved_task
