"""Standard errors for the headline metrics, in lmms-eval's `Stderr` column.

lmms-eval asks `stderr_for_metric(aggregation, bootstrap_iters)` for a function of the
metric's records; it knows only its own aggregation functions. For ours (found by
`stderr_function`), the standard error is the standard deviation of the same bootstrap that
gives `lmms-vr report` its 95% CIs: the benchmark's resampling units (its `ReportSpec.unit`:
questions, or videos whose questions are correlated), the benchmark's own metric functions on every
resample, the report's seed and resample count. Per-sample outcomes come through the judge
cache, read without sending anything (``judges.cache_reader``), so they cost no call. One bootstrap per
distinct list of records serves all of a task's headline metrics.

Not a standard error (N/A, as lmms-eval prints for any metric it cannot bootstrap): other
metrics (breakdowns, failure counts), judged metrics when the judge is not configured or
its cache is off (the bootstrap would pay for every judge call again), and runs with
`--bootstrap_iters 0`.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
from typing import Any, Callable, Sequence

from lmms_video_reasoning.utils.core.memo import BoundedMemo

log = logging.getLogger("lmms_video_reasoning.standard_error")

REPORT_RESAMPLES = 1000  # `lmms-vr report --bootstrap` default
REPORT_SEED = 0  # `lmms-vr report --seed` default
_PACKAGE = "lmms_video_reasoning."

_lock = threading.Lock()
_bootstraps: BoundedMemo[dict[str, float]] = BoundedMemo(64)  # per task's records


def find_benchmark(aggregation: Callable) -> tuple[str, str] | None:
    """(benchmark folder, metric) of one of our aggregation functions, else None.

    Our aggregations are `aggregate_<metric>` attributes of a benchmark's hooks module
    (`lmms_video_reasoning.<benchmark>.hooks`); the module is found by identity.
    """
    name = getattr(aggregation, "__name__", "")
    if not name.startswith("aggregate_"):
        return None
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith(_PACKAGE) and getattr(module, name, None) is aggregation:
            return module_name[len(_PACKAGE):].split(".")[0], name[len("aggregate_"):]
    return None


def headline_metrics(benchmark: str) -> Sequence[str]:
    from lmms_video_reasoning.utils.core import registry

    try:
        spec = registry.get(benchmark).report
    except ValueError:
        return ()
    return spec.headline if spec is not None else ()


def stderr_function(aggregation: Callable, bootstrap_iters: int) -> Callable[[Sequence[dict]], Any] | None:
    """lmms-eval's `stderr_for_metric` contract: a function of the records, or None."""
    found = find_benchmark(aggregation)
    if found is None or bootstrap_iters <= 0:
        return None
    benchmark, metric = found
    if metric not in headline_metrics(benchmark):
        return None
    resamples = min(bootstrap_iters, REPORT_RESAMPLES)

    def stderr(records: Sequence[dict]) -> Any:
        value = bootstrap_stderrs(benchmark, list(records), resamples).get(metric)
        return "N/A" if value is None else value

    return stderr


def bootstrap_stderrs(benchmark: str, records: list[dict], resamples: int = REPORT_RESAMPLES, seed: int = REPORT_SEED) -> dict[str, float]:
    """{metric: bootstrap standard error} of a task's records (memoised by content)."""
    from lmms_video_reasoning.utils.results.aggregation import records_key

    key = (benchmark, records_key(records), resamples, seed)
    with _lock:
        if key in _bootstraps:
            return _bootstraps[key]
    try:
        result = _compute(benchmark, records, resamples, seed)
    except Exception:  # a standard error is never worth failing the run for
        log.exception("%s: bootstrap standard errors failed; lmms-eval will show N/A", benchmark)
        result = {}
    with _lock:
        _bootstraps[key] = result
    return result


def _compute(benchmark: str, records: list[dict], resamples: int, seed: int) -> dict[str, float]:
    import numpy as np

    from lmms_video_reasoning.judges import cache_reader, get_judge
    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.utils.results import report

    bench = registry.get(benchmark).scoring
    if bench.needs_judge(records):
        judge = get_judge(bench.judge_name)
        if judge is None or judge.cache is None:  # without its cache, the bootstrap would judge everything again
            log.warning("%s: judge %s, so no standard errors for its judged metrics", benchmark,
                        "not configured" if judge is None else "cache off")
            return {}
    settings = bench.settings(records)
    # Read back the verdicts the aggregation just used: a failed judgment stays failed, as in
    # the metrics, and is never paid for again.
    outcomes = bench.outcomes(records, settings, judge=cache_reader(judge) if bench.needs_judge(records) else None)
    if outcomes is None:
        log.warning("%s: no judge configured, so no standard errors for its judged metrics", benchmark)
        return {}
    sampled = report.Sampled(benchmark, records, list(outcomes), settings)
    values = report.bootstrap_values(sampled, resamples, seed)
    whole = sampled.metrics()
    stderrs = {}
    for metric in headline_metrics(benchmark):
        if isinstance(whole.get(metric), float) and math.isnan(whole[metric]):
            continue  # not computed (e.g. past the judge failure share): no standard error either
        finite = [v for v in values.get(metric, []) if not math.isnan(v)]
        if len(finite) >= max(2, resamples // 2):  # as the report: undefined when most resamples are
            stderrs[metric] = float(np.std(finite, ddof=1))
    return stderrs
