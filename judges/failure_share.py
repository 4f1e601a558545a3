"""When too many judgments failed, a judged metric is not computed: one rule for every benchmark.

A few failed judgments are counted as each benchmark documents; past a share of the judged samples
the score is the judge's outage, not the model's (a refused endpoint makes every answer "wrong"), so
the judged metrics are NaN when failed / judged > the task option judge_failed_share (default 0.05).
A pure function of counts: the task's aggregation, a re-scoring and a bootstrap decide alike.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from typing import Iterator, Sequence

import numpy as np

from lmms_video_reasoning.utils.core import options, settings

FAILED_SHARE = options.Option("judge_failed_share", "float", 0.05, "the share of failed judgments above "
                              "which judged metrics are not computed (e.g. 0.05)", minimum=0.0, maximum=1.0)
# The suite's variable overriding it (`settings.variable`; not exported with the option).
FAILED_SHARE_VARIABLE = settings.variable("LMMS_VR_JUDGE_FAILED_SHARE", FAILED_SHARE)


_resampling = threading.local()


@contextlib.contextmanager
def decided_on_the_whole_run() -> Iterator[None]:
    """Inside a bootstrap: the rule is the whole run's decision, not each resample's (a resample
    drawing one failed sample twice must not cross the share). A run over the share has NaN
    point values and so no interval; under it, no resample withholds anything."""
    previous = getattr(_resampling, "active", False)
    _resampling.active = True
    try:
        yield
    finally:
        _resampling.active = previous


def too_many_failed(failed: float, judged: int, limit: float | None = None) -> bool:
    """True when `failed` of `judged` judgments exceed the share (never for nothing judged, nor
    inside `decided_on_the_whole_run`)."""
    if getattr(_resampling, "active", False) or judged <= 0 or not isinstance(failed, (int, float)) or math.isnan(failed) or failed <= 0:
        return False
    return failed / judged > (FAILED_SHARE.default if limit is None else limit)


def withheld(failed: Sequence[float], judged: Sequence[float], limit: float | None = None) -> np.ndarray:
    """`too_many_failed` for each row of column sums (`utils/core/columns.py`): True where the judged metrics are NaN."""
    return np.array([too_many_failed(f, int(n), limit) for f, n in zip(failed, judged)], dtype=bool)


def log_if_withheld(logger: logging.Logger, benchmark: str, failed: float, judged: int, limit: float | None = None) -> bool:
    """`too_many_failed`, and if so an error in the log saying why the judged metrics are NaN (the cause is in the judge's accounting)."""
    if not too_many_failed(failed, judged, limit):
        return False
    logger.error(f"{benchmark}: {int(failed)} of {judged} judgments failed, more than the {FAILED_SHARE.default if limit is None else limit:.0%} "
                 f"({FAILED_SHARE.option}) a score can absorb: the judged metrics are not computed (NaN) rather than "
                 "published as the model's score; the judge's log says why they failed, and judging the saved samples "
                 "again once the judge works gives the score")
    return True
