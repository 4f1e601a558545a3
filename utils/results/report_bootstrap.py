"""A run's per-sample data of a task (`Sampled`) and the bootstrap over it: CIs and paired differences.

The bootstrap runs over the benchmark's per-sample columns (`utils/core/columns.py`) as unit counts:
a resample is how often each resampling unit (question, or video) was drawn, so `n` resamples are
a few matrix products of those counts and the units' totals; `once` columns (per-question joins
such as CG-Bench's acc@IoU) are summed over the units drawn at least once. The draws are the
reference bootstrap's (`bootstrap_values_reference`, re-aggregating each resample's records by the
benchmark's `metrics`): the same values up to summation order.
"""

from __future__ import annotations

import copy
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.columns import SampleColumns, point
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.core.registry import ScoringAdapter
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.report_runs import _NoVerdicts, shortfall, spec_of, verdicts_for
from lmms_video_reasoning.utils.results.samples_io import read_samples, task_spec, unbuilt_items

log = logging.getLogger("lmms_video_reasoning.report")
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
    parts = [totals.columns.aggregate(totals.totals(counts), False) for counts in draws(seed, totals.units, n)]
    if not parts:
        return {}
    return {name: np.concatenate([np.asarray(part[name], dtype=float) for part in parts]) for name in parts[0]}


def whole(totals: UnitTotals) -> dict[str, float]:
    """The metrics of the run itself (each unit once)."""
    values = totals.columns.aggregate(totals.totals(np.ones((1, totals.units))), True)
    return {name: float(value[0]) for name, value in values.items()}


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



@dataclass
class Sampled:
    """A task's records and per-sample outcomes, ready to be resampled by question."""

    benchmark: str
    records: list[dict]
    outcomes: list[dict]
    settings: Any
    missing_verdicts: str = ""  # why judge-based metrics cannot be recomputed ("" when they can)
    gap: str = ""  # the same, in a few words for a table cell ("no verdicts", "needs <ROOT_VAR>")
    borrowed: str = ""  # the verdicts come from a cache not recorded for this run (see `verdicts_for`)
    untrusted: set = field(default_factory=set)  # metrics whose recomputed value is not the run's

    @property
    def bench(self) -> ScoringAdapter:
        return registry.get(self.benchmark).scoring

    @functools.cached_property
    def unit_numbers(self) -> tuple[Any, dict[str, int]]:
        """(the unit number of each record, {unit: number}) in first-appearance order."""
        unit, numbers = self.bench.unit, {}
        index = np.fromiter((numbers.setdefault(unit(record), len(numbers)) for record in self.records), dtype=np.int64,
                            count=len(self.records))
        return index, numbers

    @property
    def unit_count(self) -> int:
        return len(self.unit_numbers[1])

    @functools.cached_property
    def question_count(self) -> int:
        """How many questions the records answer (`ScoringAdapter.question`: one in several modes counts once)."""
        question = self.bench.question
        return len({question(record) for record in self.records})

    def units(self) -> dict[str, list[int]]:
        """{question: [its record indices]} in first-appearance order."""
        groups: dict[str, list[int]] = {key: [] for key in self.unit_numbers[1]}
        keys = list(groups)
        for index, number in enumerate(self.unit_numbers[0].tolist()):
            groups[keys[number]].append(index)
        return groups

    @functools.cached_property
    def columns(self) -> SampleColumns | None:
        """The benchmark's per-sample columns, computed once (None: each resample re-aggregated by `metrics`)."""
        return self.bench.columns(self.records, self.outcomes, self.settings)

    @functools.cached_property
    def totals(self) -> UnitTotals | None:
        """The columns summed per unit, computed once (None without columns)."""
        if self.columns is None:
            return None
        return UnitTotals(self.columns, self.unit_numbers[0], len(self.unit_numbers[1]))

    def metrics(self, indices: Sequence[int] | None = None) -> dict[str, float]:
        """The metrics of these samples (of the samples at `indices`), as the benchmark defines them."""
        if indices is None:
            return point(self.columns) if self.columns is not None else self.bench.metrics(self.records, self.outcomes, self.settings)
        return self.bench.metrics([self.records[i] for i in indices], [self.outcomes[i] for i in indices], self.settings)

    def trusted(self, metric: str) -> bool:
        """The recomputed metric is the run's: its verdicts were all read (or it needs none) and it reproduces the run's value."""
        return metric not in self.untrusted and (not self.missing_verdicts or metric in spec_of(self.benchmark).judge_free)

    def why_not(self, metric: str) -> str:
        """A few words on why `metric` is not the run's ("" when it is)."""
        if self.trusted(metric):
            return ""
        return self.gap or "no verdicts" if metric not in self.untrusted else "differs from the results"


def load_sampled(task: str, path: Path, results_file: Path | None = None) -> tuple[Sampled | None, str]:
    """(Sampled, "") for a task's samples file, or (None, why not). Outcomes `lmms-vr score` stored are
    used as they are, else recomputed with verdicts read from the judge cache the run recorded in
    `results_file` (`verdicts_for`); verdicts not read leave `missing_verdicts` set (judge-free metrics only)."""
    spec = task_spec(task)  # a task of this suite (`task_stats` says so of one that is not)
    try:
        records, _coverage, outcomes = read_samples(path, spec)
    except (DataError, OSError) as error:
        return None, f"samples file unreadable: {error}"
    bench = registry.get(spec.benchmark).scoring
    settings = bench.settings(records)
    missing = gap = borrowed = ""
    if outcomes is None:
        verdicts, no_verdicts, borrowed = verdicts_for(results_file, bench.judge_name)
        reader = verdicts if verdicts is not None else _NoVerdicts()
        before = shortfall(reader)
        log.info("%s: recomputing per-sample outcomes from %s (verdicts from the judge cache)", task, path.name)
        outcomes = bench.outcomes(records, settings, judge=reader)
        if outcomes is None:
            return None, "the benchmark could not recompute per-sample outcomes"
        after = shortfall(reader)
        misses, errors = after[0] - before[0], after[1] - before[1]
        reasons = []
        if misses:
            where = (f"judge cache {reader.cache.path}, model {reader.config.model}" if verdicts is not None
                     else (no_verdicts or "no judge cache"))
            reasons.append(f"{misses} judge requests have no cached verdict ({where})")
            gap = "no cached verdicts"
        if errors:
            # a judge request that holds media (e.g. frames) cannot be rebuilt without the data root
            reason, gap = unbuilt_items(spec.benchmark, errors)
            reasons.append(reason)
        if reasons:
            missing = "; ".join(reasons) + "; judge-based CIs left out (run `lmms-vr score` with the judge and report on its output)"
    # only what the metrics read from now on: memory follows what the report needs, not the samples file
    records = [bench.report_record(record) for record in records]
    return Sampled(spec.benchmark, records, list(outcomes), settings, missing, gap, borrowed), ""


MIN_UNITS = 2  # resampling units a bootstrap needs (with one, every resample is the sample itself)


def bootstrap_values(sampled: Sampled, n: int = 1000, seed: int = 0, where: Sequence[bool] | None = None) -> dict[str, Any]:
    """{metric: its values on `n` resamples of the units} over the per-sample columns (`resampled`), else
    re-aggregated by `metrics`. `where` (a flag per record): the flagged records' metrics in each
    resample of all the units, as a group's metric (e.g. accuracy on short videos) is computed."""
    if sampled.unit_count < MIN_UNITS:  # every resample of one unit is that unit: no spread, no interval
        return {}
    if sampled.totals is None:
        return bootstrap_values_reference(sampled, n, seed, where)
    if where is None:
        return resampled(sampled.totals, n, seed)
    flagged = within(sampled.totals.columns, where)
    return resampled(UnitTotals(flagged, sampled.unit_numbers[0], sampled.unit_count), n, seed)


def bootstrap_values_reference(sampled: Sampled, n: int = 1000, seed: int = 0, where: Sequence[bool] | None = None) -> dict[str, list[float]]:
    """`bootstrap_values` by definition: each resample's records (those flagged by `where`)
    re-aggregated by the benchmark's `metrics` (the path of a benchmark without columns)."""
    groups = list(sampled.units().values())
    if where is not None:  # the same draws of units; a unit contributes only its flagged records
        groups = [[index for index in group if where[index]] for group in groups]
    return resampled_metrics(len(groups), lambda picks: sampled.metrics([i for pick in picks for i in groups[pick]]), n, seed)


def bootstrap_ci(sampled: Sampled, n: int = 1000, seed: int = 0,
                 where: Sequence[bool] | None = None) -> dict[str, tuple[float, float] | None]:
    """95% percentile CIs of every metric (`where`: see `bootstrap_values`)."""
    values = bootstrap_values(sampled, n, seed, where)
    return {name: percentile_interval(series) for name, series in values.items()}


@dataclass
class Difference:
    metric: str
    difference: float
    interval: tuple[float, float] | None
    common: int
    why: str = ""  # why the difference is not computable ("" when it is)


def paired_values(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0) -> tuple[list[str], dict[str, float], dict[str, Any]]:
    """(the common units, other - base on them, other - base on `n` paired resamples of them)."""
    common = [unit for unit in base.unit_numbers[1] if unit in other.unit_numbers[1]]  # in the base run's order
    if not common:
        return [], {}, {}
    resamples = n if len(common) >= MIN_UNITS else 0
    if base.totals is None or other.totals is None:
        return common, *paired_values_reference(base, other, common, resamples, seed)
    # both runs restricted to the common units in one order, resampled by the same `draws`: the paired bootstrap
    left, right = (s.totals.of_units(np.array([s.unit_numbers[1][unit] for unit in common], dtype=np.int64)) for s in (base, other))
    a, b = whole(left), whole(right)
    observed = {name: b[name] - a[name] for name in a if name in b}  # the base's metrics that the other run has too
    left_values, right_values = resampled(left, resamples, seed), resampled(right, resamples, seed)
    return common, observed, {name: right_values[name] - left_values[name] for name in left_values if name in right_values}


def paired_values_reference(base: Sampled, other: Sampled, common: list[str], n: int, seed: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`paired_values` by definition: each resample of the common units re-aggregated by the
    benchmark's metric function on both sides."""
    base_units, other_units = base.units(), other.units()

    def difference(picks) -> dict[str, float]:
        a = base.metrics([index for pick in picks for index in base_units[common[pick]]])
        b = other.metrics([index for pick in picks for index in other_units[common[pick]]])
        return {name: b[name] - a[name] for name in a if isinstance(a[name], (int, float)) and isinstance(b.get(name), (int, float))}

    return difference(range(len(common))), resampled_metrics(len(common), difference, n, seed)


def paired_difference(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0) -> list[Difference]:
    """other - base per metric on the questions both answered, with a paired bootstrap CI."""
    common, observed, values = paired_values(base, other, n, seed)
    return [Difference(name, value, percentile_interval(values.get(name, [])), len(common)) for name, value in observed.items()]
