"""Standard errors for the headline metrics, in lmms-eval's `Stderr` column.

lmms-eval asks `stderr_for_metric(aggregation, bootstrap_iters)` for a function of the
metric's records; it knows only its own aggregation functions. Ours carry their benchmark and
metric (`aggregation.ScoreOnce`), and `stderr_function` gives the standard error of the
benchmark's headline metrics (`ReportSpec.headline`): the standard error is the standard deviation of the same bootstrap that
gives `lmms-vr report` its 95% CIs: the benchmark's resampling units (its `ReportSpec.unit`:
questions, or videos whose questions are correlated), the report's seed and resample count,
and the same code (`report_bootstrap.bootstrap_values`: the benchmark's per-sample columns, each
resample's metrics from its sums, `resampling.py`). The per-sample outcomes are handed in: those
the task's scoring computed its metrics from (`aggregation.ScoreOnce.stderr_function`), so they
cost no call and no second parse. One bootstrap per distinct list of records serves all of a
task's headline metrics; on a full CG-Bench run it takes about a second (`benchmarks/statistics.py`).

Not a standard error (N/A, as lmms-eval prints for any metric it cannot bootstrap): other
metrics (breakdowns, failure counts), judged metrics when the judge is not configured or
its cache is off (verdicts not kept: `lmms-vr report` could not give their intervals either), a
task whose scoring failed (its metrics are NaN), runs with
`LMMS_VR_STDERR=off` (said once in the log), and `simple_evaluate(bootstrap_iters=0)` from
Python (lmms-eval 0.7.3's command line has no flag for it).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any, Callable, Sequence

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.memo import BoundedMemo

log = logging.getLogger("lmms_video_reasoning.standard_error")

REPORT_RESAMPLES = 1000  # `lmms-vr report --bootstrap` default
REPORT_SEED = 0  # `lmms-vr report --seed` default

STDERR_ENV = "LMMS_VR_STDERR"
STDERR = settings.declare(STDERR_ENV, "bool", True, "bootstrap standard errors of the headline metrics in lmms-eval's Stderr "
                          "column (about a second per task at full size); off: N/A")

_lock = threading.Lock()
_said: set[str] = set()  # log lines already written once in this process
_bootstraps: BoundedMemo[dict[str, float]] = BoundedMemo(64)  # per task's records


def enabled() -> bool:
    """`LMMS_VR_STDERR` is not off (said once in the log when it is). A value the setting does not
    accept keeps them on, with one error line naming the variable and the accepted values: this is
    read while lmms-eval aggregates, where raising would lose the run's results."""
    try:
        on = STDERR.read()
    except settings.SettingError as error:
        _say_once("bad", logging.ERROR, "%s; standard errors stay on", error)
        return True
    if not on:
        _say_once("off", logging.INFO, "%s=%s: no standard errors for this suite's metrics (lmms-eval's Stderr column "
                  "shows N/A); `lmms-vr report` computes the confidence intervals from the samples file",
                  STDERR_ENV, os.environ.get(STDERR_ENV, "").strip())
    return on


def _say_once(key: str, level: int, message: str, *args: Any) -> None:
    with _lock:
        if key in _said:
            return
        _said.add(key)
    log.log(level, message, *args)


def headline_metrics(benchmark: str) -> Sequence[str]:
    from lmms_video_reasoning.utils.core import registry

    try:
        spec = registry.get(benchmark).report
    except ValueError:
        return ()
    return spec.headline if spec is not None else ()


def stderr_function(benchmark: str, metric: str, bootstrap_iters: int) -> Callable[[Sequence[dict], Sequence[dict] | None, Any], Any] | None:
    """lmms-eval's `stderr_for_metric` contract for one of our aggregations (its `benchmark`
    and `metric`): a function of the records, the per-sample outcomes the scoring computed for
    them and its settings (`aggregation.ScoreOnce` binds the last two), or None (not a headline
    metric, or no bootstrap)."""
    if bootstrap_iters <= 0 or metric not in headline_metrics(benchmark) or not enabled():
        return None
    resamples = min(bootstrap_iters, REPORT_RESAMPLES)

    def stderr(records: Sequence[dict], outcomes: Sequence[dict] | None, settings: Any) -> Any:
        value = bootstrap_stderrs(benchmark, list(records), outcomes, settings, resamples).get(metric)
        return "N/A" if value is None else value

    return stderr


def bootstrap_stderrs(benchmark: str, records: list[dict], outcomes: Sequence[dict] | None, settings: Any,
                      resamples: int = REPORT_RESAMPLES, seed: int = REPORT_SEED) -> dict[str, float]:
    """{metric: bootstrap standard error} of a task's records, from the per-sample outcomes (and
    settings) its scoring computed the metrics with (`ScoringAdapter.score`); memoised by content."""
    from lmms_video_reasoning.utils.results.aggregation import records_key

    key = (benchmark, records_key(records), resamples, seed)
    with _lock:
        if key in _bootstraps:
            return _bootstraps[key]
    try:
        result = _compute(benchmark, records, outcomes, settings, resamples, seed)
    except Exception:  # a standard error is never worth failing the run for
        log.exception("%s: bootstrap standard errors failed; lmms-eval will show N/A", benchmark)
        result = {}
    with _lock:
        _bootstraps[key] = result
    return result


def _compute(benchmark: str, records: list[dict], outcomes: Sequence[dict] | None, settings: Any, resamples: int,
             seed: int) -> dict[str, float]:
    import numpy as np

    from lmms_video_reasoning.judges import get_judge
    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.utils.results import report_bootstrap

    bench = registry.get(benchmark).scoring
    if bench.needs_judge(records):
        judge = get_judge(bench.judge_name)
        if judge is None or judge.cache is None:
            log.warning("%s: judge %s, so no standard errors for its judged metrics", benchmark,
                        "not configured" if judge is None else "cache off")
            return {}
    if outcomes is None:
        log.warning("%s: the scoring gave no per-sample outcomes (no judge, or it failed), so no standard errors", benchmark)
        return {}
    sampled = report_bootstrap.Sampled(benchmark, records, list(outcomes), settings)
    values = report_bootstrap.bootstrap_values(sampled, resamples, seed)
    whole = sampled.metrics()  # only to see which metrics the run could not compute (NaN)
    stderrs = {}
    for metric in headline_metrics(benchmark):
        if isinstance(whole.get(metric), float) and math.isnan(whole[metric]):
            continue  # not computed (e.g. past the judge failure share): no standard error either
        finite = [v for v in values.get(metric, []) if not math.isnan(v)]
        if len(finite) >= max(2, resamples // 2):  # as the report: undefined when most resamples are
            stderrs[metric] = float(np.std(finite, ddof=1))
    return stderrs
