"""A benchmark's metrics, each defined once: per-sample columns (from its per-sample rules) and an
aggregate of their sums. A run's metrics are the aggregate of its sums (`point`), a bootstrap
resample's the aggregate of the resample's (`utils/results/report_bootstrap.py`). numpy only (exported)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

Totals = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class SampleColumns:
    """Per-sample numbers: `counted` summed with each sample's multiplicity, `once` once per
    resampling unit drawn (a per-unit value placed on one sample of the unit). `aggregate(totals,
    whole)`: the metrics, one value per row of totals; `whole`: the rows are runs (the judge failure
    share applies), not bootstrap resamples. `counts`: metrics counting samples (ints in a run)."""

    counted: Mapping[str, np.ndarray]
    aggregate: Callable[[Totals, bool], dict[str, np.ndarray]]
    once: Mapping[str, np.ndarray] = field(default_factory=dict)
    counts: tuple[str, ...] = ()


def column(values: Sequence[float] | Iterator[float]) -> np.ndarray:
    """A float64 column from per-sample numbers (bools count 1 / 0)."""
    return np.fromiter((float(v) for v in values), dtype=float)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (nothing to average)."""
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def rowwise(function: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """A protocol's rule on aggregated values (e.g. F1 of two means) applied to each row."""
    return np.array([function(*values) for values in zip(*(np.asarray(a, dtype=float).tolist() for a in arrays))], dtype=float)


def point(columns: SampleColumns, whole: bool = True) -> dict[str, float]:
    """The metrics of the samples themselves (`whole`: a run): each column summed in sample order (as a
    mean adds its values: `cumsum`, not numpy's pairwise `sum`), then the aggregate."""
    totals = {name: np.array([(np.cumsum(values)[-1] if len(values) else 0.0) + 0.0])
              for name, values in (*columns.counted.items(), *columns.once.items())}
    metrics = {}
    for name, value in columns.aggregate(totals, whole).items():
        value = float(np.asarray(value)[0])
        metrics[name] = int(value) if name in columns.counts and not math.isnan(value) else value
    return metrics
