"""The bootstrap over a benchmark's per-sample columns (`utils/core/columns.py`): resamples as unit counts.

A resample is how often each resampling unit (question, or video) was drawn, so `n` resamples are
a few matrix products of those counts and the units' totals; `once` columns (per-question joins
such as CG-Bench's acc@IoU) are summed over the units drawn at least once. The draws are the
reference bootstrap's (`report_bootstrap.bootstrap_values_reference`): the same values up to
summation order.
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from lmms_video_reasoning.utils.core.columns import SampleColumns
from lmms_video_reasoning.utils.core.memo import BoundedMemo

T = TypeVar("T")
CHUNK_CELLS = 1_000_000  # resamples x units per matrix product (8 MB of float64 counts)


def within(columns: SampleColumns, mask: Sequence[bool]) -> SampleColumns:
    """The contributions of the samples where `mask` holds, the others' 0 (a breakdown's group)."""
    keep = np.asarray(mask, dtype=float)
    return SampleColumns({name: values * keep for name, values in columns.counted.items()}, columns.aggregate,
                         {name: values * keep for name, values in columns.once.items()}, columns.counts)


class UnitTotals:
    """A run's columns summed per resampling unit. Columns 0 for every sample (another mode's, a
    failure that never happened) stay out of the matrices: their sums are 0 in every resample."""

    def __init__(self, columns: SampleColumns, unit_of_sample: np.ndarray, units: int) -> None:
        self.columns = columns
        self.units = units
        counted = {name: values for name, values in columns.counted.items() if values.any()}
        once = {name: values for name, values in columns.once.items() if values.any()}
        self.zero_names = [name for name in (*columns.counted, *columns.once) if name not in counted and name not in once]
        self.counted_names, self.once_names = list(counted), list(once)
        self.counted = _per_unit(counted, unit_of_sample, units)
        self.once = _per_unit(once, unit_of_sample, units)

    def of_units(self, rows: np.ndarray) -> "UnitTotals":
        """The same run restricted to its units `rows`, in that order (a paired comparison's common units)."""
        restricted = copy.copy(self)
        restricted.units, restricted.counted, restricted.once = len(rows), self.counted[rows], self.once[rows]
        return restricted

    def totals(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        """The sums of each resample (`counts`: resamples x how often each unit was drawn)."""
        sums = counts @ self.counted
        totals = {name: sums[:, i] for i, name in enumerate(self.counted_names)}
        if self.once_names:
            present = (counts > 0).astype(float) @ self.once
            totals.update({name: present[:, i] for i, name in enumerate(self.once_names)})
        zero = np.zeros(len(counts))
        totals.update(dict.fromkeys(self.zero_names, zero))
        return totals


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


_drawn: BoundedMemo[list[np.ndarray]] = BoundedMemo(2)  # the last draws (seed, units, n), as compact counts


def draws(seed: int, units: int, n: int) -> Iterator[np.ndarray]:
    """`n` resamples of `units` units as count matrices (chunks of rows), drawn as the reference
    bootstrap draws them. The last draws are kept: a report resamples the same units for every
    task and every pair of runs."""
    chunks = _drawn.get((seed, units, n))
    if chunks is None:
        chunks = list(_draw(np.random.default_rng(seed), units, n))
        _drawn[(seed, units, n)] = chunks
    for chunk in chunks:
        yield chunk.astype(float)


def _draw(rng: np.random.Generator, units: int, n: int) -> Iterator[np.ndarray]:
    chunk = max(1, CHUNK_CELLS // max(1, units))
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        picks = np.stack([rng.integers(0, units, units) for _ in range(rows)])
        offsets = (np.arange(rows) * units)[:, None]
        counts = np.bincount((picks + offsets).ravel(), minlength=rows * units).reshape(rows, units)
        yield counts.astype(np.uint8 if counts.max(initial=0) < 256 else np.int64)


def resampled(totals: UnitTotals, n: int, seed: int) -> dict[str, np.ndarray]:
    """Every metric on `n` resamples of the units (seeded): {metric: n values}."""
    return _joined([totals.columns.aggregate(totals.totals(counts), False) for counts in draws(seed, totals.units, n)])


def whole(totals: UnitTotals) -> dict[str, float]:
    """The metrics of the run itself (each unit once)."""
    values = totals.columns.aggregate(totals.totals(np.ones((1, totals.units))), True)
    return {name: float(value[0]) for name, value in values.items()}


def paired(base: UnitTotals, other: UnitTotals, n: int, seed: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """(other - base, other - base on `n` resamples of the units drawn together: the same `draws`): the
    paired bootstrap of two runs over the same units in the same order (see `UnitTotals.of_units`).
    Metrics are those of the base that the other run has too."""
    a, b = whole(base), whole(other)
    observed = {name: b[name] - a[name] for name in a if name in b}
    left, right = resampled(base, n, seed), resampled(other, n, seed)
    return observed, {name: right[name] - left[name] for name in left if name in right}


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {}
    return {name: np.concatenate([np.asarray(part[name], dtype=float) for part in parts]) for name in parts[0]}


def defined(values: Sequence[float]) -> np.ndarray | None:
    """The defined (not NaN) bootstrap values; None when most resamples are undefined."""
    values = np.asarray(values, dtype=float)
    finite = values[~np.isnan(values)]
    return finite if len(finite) >= max(2, len(values) // 2) else None


LEVEL = 0.95  # every interval the suite reports
TAIL = (1 - LEVEL) / 2 * 100  # percent in each tail (computed, as the published figures were)


def percentile_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The `LEVEL` percentile interval of bootstrap values; None when most resamples are undefined (NaN)."""
    finite = defined(values)
    if finite is None:
        return None
    low, high = np.percentile(finite, [TAIL, 100 - TAIL])
    return float(low), float(high)


def resampled_metrics(count: int, compute: Callable[[Sequence[int]], dict], n: int = 1000, seed: int = 0) -> dict[str, list[float]]:
    """{metric: [numeric values]} of ``compute(picks)`` on ``n`` resamples of ``range(count)`` with replacement,
    drawn as `draws` draws them ({} with fewer than two or ``n`` = 0); a resample's judge failure share is
    the whole run's (`failure_share.decided_on_the_whole_run`)."""
    from lmms_video_reasoning.judges import failure_share

    values: dict[str, list[float]] = {}
    rng = np.random.default_rng(seed)
    with failure_share.decided_on_the_whole_run():
        for _ in range(n if count >= 2 else 0):
            for name, value in compute(rng.integers(0, count, count)).items():
                if isinstance(value, (int, float)):
                    values.setdefault(name, []).append(float(value))
    return values


def bootstrap_interval(units: Sequence[Sequence[T]], statistic: Callable[[list[T]], float], n: int = 1000,
                       seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of ``statistic`` over resamples of ``units`` (each a list of items, e.g.
    one question's verdict pairs); None with fewer than two units or ``n`` = 0."""
    values = resampled_metrics(len(units), lambda picks: {"": statistic([item for pick in picks for item in units[pick]])}, n, seed)
    return percentile_interval(values.get("", []))
