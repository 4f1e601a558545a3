"""A benchmark's metrics, each defined once: per-sample columns and the metrics of their sums.

Every metric of these benchmarks is a function of sums over samples: right answers and questions
per group, summed per-sample ratios and how many are defined, tIoUs over thresholds, failure
counts. A benchmark states them once, as `SampleColumns`: each sample's numbers (from its pure
per-sample rules: parsers, IoU rules, per-sample ratios) and an `aggregate` that turns sums into
metrics with the arithmetic of its protocol (micro and macro means, F1 of the means, CRR of two
means, the judge failure share). A run's metrics are the aggregate of the run's own sums
(`point`); the bootstrap (`utils/results/resampling.py`) applies the same aggregate to the sums
of each resample, so a confidence interval and the value it surrounds come from one definition.
numpy only: the benchmarks' task modules (exported to lmms-eval by `dev/upstream.py`) use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

Totals = Mapping[str, np.ndarray]
# aggregate(totals, whole) -> {metric: one value per row of totals}; `whole` is True when the
# totals are a run's own (each row a whole set of samples: the judge failure share applies),
# False for bootstrap resamples (the share is the run's decision).
Aggregate = Callable[[Totals, bool], dict[str, np.ndarray]]


@dataclass(frozen=True)
class SampleColumns:
    """A run's per-sample contributions: `counted` columns are summed with each sample's
    multiplicity in a resample, `once` columns once per unit drawn (a benchmark places a per-unit
    value on one sample of the unit and 0 on the others). `aggregate` computes the metrics;
    `counts` names the metrics that count samples (whole numbers in a run's metrics)."""

    counted: Mapping[str, np.ndarray]
    aggregate: Aggregate
    once: Mapping[str, np.ndarray] = field(default_factory=dict)
    counts: tuple[str, ...] = ()

    def where(self, mask: np.ndarray) -> "SampleColumns":
        """The contributions of the samples where `mask` holds (the others' set to 0): summed over a
        resample of all the units, they give the metrics of those samples in that resample (a group
        of a breakdown, as a benchmark's per-group metrics are computed from the run's samples)."""
        keep = np.asarray(mask, dtype=float)
        return SampleColumns({name: values * keep for name, values in self.counted.items()}, self.aggregate,
                             {name: values * keep for name, values in self.once.items()}, self.counts)


def column(values: Sequence[float] | Iterator[float]) -> np.ndarray:
    """A float64 column from per-sample numbers (bools count 1 / 0)."""
    return np.fromiter((float(v) for v in values), dtype=float)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (nothing to average)."""
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def rowwise(function: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """A protocol's scalar rule on aggregated values (e.g. F1 of two means), applied to each row."""
    return np.array([function(*values) for values in zip(*(np.asarray(a, dtype=float).tolist() for a in arrays))], dtype=float)


def point(columns: SampleColumns, whole: bool = True) -> dict[str, float]:
    """The metrics of the samples themselves: each column summed in sample order (as a mean over
    the samples adds them), the aggregate of those sums. `whole`: the samples are a run's (the
    judge failure share applies). Count metrics are ints where defined."""
    totals = {name: np.array([float(sum(values.tolist()))]) for name, values in (*columns.counted.items(), *columns.once.items())}
    metrics = {}
    for name, value in columns.aggregate(totals, whole).items():
        value = float(np.asarray(value)[0])
        metrics[name] = int(value) if name in columns.counts and not math.isnan(value) else value
    return metrics
