"""The bootstrap over arrays: each sample's contribution computed once, resamples as unit counts.

A benchmark's metrics are functions of sums over its samples: right answers and questions per
group, summed per-sample ratios and how many are defined, tIoUs over thresholds, failure counts.
The benchmark gives those per-sample numbers once per run (`SampleColumns`, from its scoring
adapter's `columns`) and an `aggregate` that turns sums into its metrics with the arithmetic of
its own metric functions (macro means, F1 of the means, accuracy per group, CRR of two means).

A bootstrap resample draws resampling units (questions, or videos) with replacement: it is the
number of times each unit was drawn, and every sum of the resample is a product of those counts
with the units' totals. So `n` resamples are a few matrix products (in chunks, so memory stays
small) instead of `n` runs of the metric function over copied records. Per-question joins
(CG-Bench's acc@IoU, whose official join keeps one pair per question however often the question
is drawn) are `once` columns: summed over the units drawn at least once.

The draws are exactly those of the reference bootstrap, one `rng.integers(0, units, units)` per
resample from `numpy.random.default_rng(seed)`, so for the same seed and resample count every
value equals the reference's (re-aggregating each resample's records with the metric function,
`report.bootstrap_values_reference`) up to floating-point summation order (tests hold 1e-9).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

Totals = Mapping[str, np.ndarray]
# aggregate(totals, whole) -> {metric: one value per row of totals}; `whole` is True when the
# totals are a run's own (each row a whole set of samples: the judge failure share applies, as in
# the benchmark's metric function), False for bootstrap resamples (the share is the run's decision).
Aggregate = Callable[[Totals, bool], dict[str, np.ndarray]]

CHUNK_CELLS = 4_000_000  # resamples x units per matrix product (32 MB of float64 counts)


@dataclass(frozen=True)
class SampleColumns:
    """A run's per-sample contributions: `counted` columns are summed with each sample's
    multiplicity in a resample, `once` columns once per unit drawn (a benchmark places a per-unit
    value on one sample of the unit and 0 on the others). `aggregate` computes the metrics."""

    counted: Mapping[str, np.ndarray]
    aggregate: Aggregate
    once: Mapping[str, np.ndarray] = field(default_factory=dict)


def column(values: Sequence[float] | Iterator[float]) -> np.ndarray:
    """A float64 column from per-sample numbers (bools count 1 / 0)."""
    return np.fromiter((float(v) for v in values), dtype=float)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (nothing to average)."""
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


class UnitTotals:
    """A run's columns summed per resampling unit (units in the order of `keys`)."""

    def __init__(self, columns: SampleColumns, unit_of_sample: np.ndarray, units: int) -> None:
        self.columns = columns
        self.units = units
        self.counted_names = list(columns.counted)
        self.once_names = list(columns.once)
        self.counted = _per_unit(columns.counted, unit_of_sample, units)
        self.once = _per_unit(columns.once, unit_of_sample, units)

    def totals(self, counts: np.ndarray, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The sums of each resample (`counts`: resamples x units drawn, over `rows` of this run's
        units, all of them by default)."""
        counted = self.counted if rows is None else self.counted[rows]
        once = self.once if rows is None else self.once[rows]
        sums = counts @ counted
        present = (counts > 0).astype(float) @ once if self.once_names else np.zeros((len(counts), 0))
        return {**{name: sums[:, i] for i, name in enumerate(self.counted_names)},
                **{name: present[:, i] for i, name in enumerate(self.once_names)}}


def _per_unit(columns: Mapping[str, np.ndarray], unit_of_sample: np.ndarray, units: int) -> np.ndarray:
    matrix = np.zeros((units, len(columns)))
    for i, values in enumerate(columns.values()):
        matrix[:, i] = np.bincount(unit_of_sample, weights=values, minlength=units)
    return matrix


def unit_index(keys: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(the unit number of each sample, the units in first-appearance order)."""
    numbers: dict[str, int] = {}
    index = np.fromiter((numbers.setdefault(key, len(numbers)) for key in keys), dtype=np.int64, count=len(keys))
    return index, list(numbers)


def draws(rng: np.random.Generator, units: int, n: int) -> Iterator[np.ndarray]:
    """`n` resamples of `units` units with replacement as count matrices (chunks of rows), drawn
    one resample at a time as the reference bootstrap draws them (same seed, same resamples)."""
    chunk = max(1, CHUNK_CELLS // max(1, units))
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        picks = np.stack([rng.integers(0, units, units) for _ in range(rows)])
        offsets = (np.arange(rows) * units)[:, None]
        yield np.bincount((picks + offsets).ravel(), minlength=rows * units).reshape(rows, units).astype(float)


def resampled(totals: UnitTotals, n: int, seed: int) -> dict[str, np.ndarray]:
    """Every metric on `n` resamples of the units (seeded): {metric: n values}."""
    rng = np.random.default_rng(seed)
    parts = [totals.columns.aggregate(totals.totals(counts), False) for counts in draws(rng, totals.units, n)]
    return _joined(parts)


def whole(totals: UnitTotals, rows: np.ndarray | None = None) -> dict[str, float]:
    """The metrics of the run itself (or of its units `rows`, each once)."""
    units = totals.units if rows is None else len(rows)
    values = totals.columns.aggregate(totals.totals(np.ones((1, units)), rows), True)
    return {name: float(value[0]) for name, value in values.items()}


def paired(base: UnitTotals, base_rows: np.ndarray, other: UnitTotals, other_rows: np.ndarray, n: int,
           seed: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """(other - base on the common units, each once; other - base on `n` resamples of the common
    units, drawn together): the paired bootstrap. `base_rows[i]` and `other_rows[i]` are the same
    unit in each run. Metrics are those of the base that the other run has too."""
    a, b = whole(base, base_rows), whole(other, other_rows)
    observed = {name: b[name] - a[name] for name in a if name in b}
    rng = np.random.default_rng(seed)
    parts = []
    for counts in draws(rng, len(base_rows), n):
        left = base.columns.aggregate(base.totals(counts, base_rows), False)
        right = other.columns.aggregate(other.totals(counts, other_rows), False)
        parts.append({name: right[name] - left[name] for name in left if name in right})
    return observed, _joined(parts)


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {}
    return {name: np.concatenate([np.asarray(part[name], dtype=float) for part in parts]) for name in parts[0]}
