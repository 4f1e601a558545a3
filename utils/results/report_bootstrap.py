"""A run's per-sample data of a task (`Sampled`) and the bootstrap over it: CIs and paired differences."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.columns import SampleColumns, point
from lmms_video_reasoning.utils.core.registry import ScoringAdapter
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results import resampling
from lmms_video_reasoning.utils.results.report_runs import _NoVerdicts, shortfall, spec_of, verdicts_for
from lmms_video_reasoning.utils.results.samples_io import read_samples, task_spec, unbuilt_items

log = logging.getLogger("lmms_video_reasoning.report")


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
        unit = self.bench.unit
        index, keys = resampling.unit_index([unit(record) for record in self.records])
        return index, {key: number for number, key in enumerate(keys)}

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
    def totals(self) -> resampling.UnitTotals | None:
        """The columns summed per unit, computed once (None without columns)."""
        if self.columns is None:
            return None
        return resampling.UnitTotals(self.columns, self.unit_numbers[0], len(self.unit_numbers[1]))

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


def load_sampled(task: str, path: Path, verdicts: Any = None, no_verdicts: str = "") -> tuple[Sampled | None, str]:
    """(Sampled, "") for a task's samples file, or (None, why not). Outcomes `lmms-vr score` stored are
    used as they are, else recomputed with verdicts read by `verdicts` (the run's judge cache; None:
    `no_verdicts` says why); verdicts not read leave `missing_verdicts` set (judge-free metrics only)."""
    spec = task_spec(task)  # a task of this suite (`task_stats` says so of one that is not)
    try:
        records, _coverage, outcomes = read_samples(path, spec)
    except (DataError, OSError) as error:
        return None, f"samples file unreadable: {error}"
    bench = registry.get(spec.benchmark).scoring
    settings = bench.settings(records)
    missing = gap = borrowed = ""
    if outcomes is None:
        if verdicts is None and not no_verdicts:  # no run's judge given: the configured judge's cache
            verdicts, no_verdicts, borrowed = verdicts_for(None, bench.judge_name)
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
    """{metric: its values on `n` resamples of the units} over the per-sample columns (`resampling`), else
    re-aggregated by `metrics`. `where` (a flag per record): the flagged records' metrics in each
    resample of all the units, as a group's metric (e.g. accuracy on short videos) is computed."""
    if sampled.unit_count < MIN_UNITS:  # every resample of one unit is that unit: no spread, no interval
        return {}
    if sampled.totals is None:
        return bootstrap_values_reference(sampled, n, seed, where)
    if where is None:
        return resampling.resampled(sampled.totals, n, seed)
    flagged = resampling.within(sampled.totals.columns, where)
    return resampling.resampled(resampling.UnitTotals(flagged, sampled.unit_numbers[0], sampled.unit_count), n, seed)


def bootstrap_values_reference(sampled: Sampled, n: int = 1000, seed: int = 0, where: Sequence[bool] | None = None) -> dict[str, list[float]]:
    """`bootstrap_values` by definition: each resample's records (those flagged by `where`)
    re-aggregated by the benchmark's `metrics` (the path of a benchmark without columns)."""
    groups = list(sampled.units().values())
    if where is not None:  # the same draws of units; a unit contributes only its flagged records
        groups = [[index for index in group if where[index]] for group in groups]
    return resampling.resampled_metrics(len(groups), lambda picks: sampled.metrics([i for pick in picks for i in groups[pick]]), n, seed)


def bootstrap_ci(sampled: Sampled, n: int = 1000, seed: int = 0,
                 where: Sequence[bool] | None = None) -> dict[str, tuple[float, float] | None]:
    """95% percentile CIs of every metric (`where`: see `bootstrap_values`)."""
    values = bootstrap_values(sampled, n, seed, where)
    return {name: resampling.percentile_interval(series) for name, series in values.items()}


@dataclass
class Difference:
    metric: str
    difference: float
    interval: tuple[float, float] | None
    common: int
    why: str = ""  # why the difference is not computable ("" when it is)


def paired_values(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0) -> tuple[list[str], dict[str, float], dict[str, Any]]:
    """(the common units, other - base on them, other - base on `n` paired resamples of them)."""
    import numpy as np

    common = [unit for unit in base.unit_numbers[1] if unit in other.unit_numbers[1]]  # in the base run's order
    if not common:
        return [], {}, {}
    draws = n if len(common) >= MIN_UNITS else 0
    if base.totals is None or other.totals is None:
        return common, *paired_values_reference(base, other, common, draws, seed)
    base_rows, other_rows = (np.array([s.unit_numbers[1][unit] for unit in common], dtype=np.int64) for s in (base, other))
    observed, values = resampling.paired(base.totals.of_units(base_rows), other.totals.of_units(other_rows), draws, seed)
    return common, observed, values


def paired_values_reference(base: Sampled, other: Sampled, common: list[str], n: int, seed: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`paired_values` by definition: each resample of the common units re-aggregated by the
    benchmark's metric function on both sides."""
    base_units, other_units = base.units(), other.units()

    def difference(picks) -> dict[str, float]:
        a = base.metrics([index for pick in picks for index in base_units[common[pick]]])
        b = other.metrics([index for pick in picks for index in other_units[common[pick]]])
        return {name: b[name] - a[name] for name in a if isinstance(a[name], (int, float)) and isinstance(b.get(name), (int, float))}

    return difference(range(len(common))), resampling.resampled_metrics(len(common), difference, n, seed)


def paired_difference(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0) -> list[Difference]:
    """other - base per metric on the questions both answered, with a paired bootstrap CI."""
    common, observed, values = paired_values(base, other, n, seed)
    return [Difference(name, value, resampling.percentile_interval(values.get(name, [])), len(common)) for name, value in observed.items()]
