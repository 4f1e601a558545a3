"""`lmms-vr report`: the papers' tables for your runs, with bootstrap CIs, comparisons and plots.

    lmms-vr report RESULTS... [--out DIR] [--seed S] [--bootstrap N] [--pairs baseline|all]

RESULTS are results JSON files or folders holding them (lmms-eval's `*_results.json` or the
output of `lmms-vr score --out`), each optionally prefixed `LABEL=` to name the run. Runs
with the same label and different tasks are one model (e.g. a benchmark's modes run as
separate tasks: its section may join them per question across the files).

Writes `DIR/report.md`, `DIR/report.html` (plots inline, self-contained), `DIR/*.png` and
`DIR/report.json` (every number below). For each benchmark present: the paper's tables with
your rows beside the paper's reference rows (each benchmark's `reference_tables.json`, with their source),
95% bootstrap confidence intervals for the headline metrics, paired differences with CIs
when runs share a task (each run against the first one given; every pair with `--pairs all`),
and the plots.

Per-sample data: the samples file next to each results file (`--log_samples`, or the one
`lmms-vr score --out` writes, which also stores each sample's scored outcome). Outcomes not
stored are recomputed with the benchmark's own judging / parsing, the judge's verdicts read
from the judge cache the run wrote (`judges.CacheOnlyJudge`, on the judge the accounting
beside the results records, else the configured one): no key is needed, no request is sent. When
verdicts are missing, only the metrics that need no judge get CIs (and the report says
why). Each bootstrap resample is aggregated as the benchmark's own metric functions aggregate
(macro means, F1 of averaged precision and recall, per-question joins): over per-sample arrays
computed once per run (`resampling.py`, each benchmark's `columns`), equal to re-aggregating
each resample's records (`bootstrap_values_reference`). Resampling units are the benchmark's
(`ReportSpec.unit`: questions, or videos), and a paired comparison resamples the units both
runs answered. Tables count questions (`ScoringAdapter.question`: a question answered in several
modes counts once) and, where the bootstrap resamples coarser units, those in their own column
(e.g. Questions and Videos). A group's metric (e.g. accuracy by duration) gets its CI from
the same resamples, computed on the group's samples of each (`bootstrap_values`'s `where`). Each samples file is read once, streamed, and only what the metrics read of each
record is kept (`ScoringAdapter.report_record`).

Each benchmark's part of the report (tables, plots) is its folder's `report.py`, found
through `utils/core/registry.py`; this module is the shared machinery.

Files under a folder that look like results but do not parse are listed as not read (in the
report and on stderr), never silently dropped.
"""

from __future__ import annotations

import base64
import contextvars
import functools
import html
import json
import logging
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.results import resampling
from lmms_video_reasoning.utils.results import score as scoring
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.core.registry import ReportSpec, ScoringAdapter

log = logging.getLogger("lmms_video_reasoning.report")

MINE = "▶ "


def spec_of(benchmark: str) -> ReportSpec:
    """The benchmark's report specification (registry)."""
    spec = registry.get(benchmark).report
    if spec is None:
        raise DataError(f"benchmark {benchmark} has no report specification")
    return spec


# ---------------------------------------------------------------------------------------------
# Runs: results files, their samples files, their labels
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One model's results: task -> {metric: value}, the samples file and results file of each task."""

    label: str
    paths: list[Path]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: dict[str, Path] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # task -> the results file it came from
    sizes: dict[str, int] = field(default_factory=dict)  # task -> samples scored (lmms-eval's `n-samples`)


@dataclass
class Unread:
    """A file given (or found) as results that could not be read: shown in the report, never dropped silently."""

    path: Path
    reason: str


def split_label(item: str) -> tuple[str | None, Path]:
    """`LABEL=PATH` -> (LABEL, PATH); a bare path (even one containing '=') -> (None, PATH)."""
    if "=" in item and not Path(item).exists():
        label, _, path = item.partition("=")
        return label, Path(path)
    return None, Path(item)


def read_results(path: Path) -> tuple[dict | None, str]:
    """(the results JSON, "") or (None, why it is not one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except ValueError as error:
        return None, f"not valid JSON ({error})"
    except OSError as error:
        return None, f"unreadable ({error.strerror or error})"
    if not (isinstance(data, dict) and isinstance(data.get("results"), dict)):
        return None, "no `results` object (not an lmms-eval or `lmms-vr score` results file)"
    return data, ""


def results_files(path: Path, unread: list[Unread] | None = None) -> list[tuple[Path, dict]]:
    """The results files at `path` (a file, or every results JSON under a folder), parsed.

    A file that does not parse is added to `unread` with the reason: the file given, or
    under a folder any `*.json` that does not parse and any `*_results.json` that is not
    results. (Other JSON files under a folder, such as judge accounting, are not results.)
    """
    unread = unread if unread is not None else []
    if path.is_file():
        candidates, must_be_results = [path], True
    elif path.is_dir():
        candidates, must_be_results = sorted(path.rglob("*.json")), False
    else:
        raise DataError(f"{path}: no such results file or folder")
    found = []
    for candidate in candidates:
        data, why = read_results(candidate)
        if data is not None:
            found.append((candidate, data))
        elif must_be_results or not why.startswith("no `results`") or candidate.name.endswith(scoring.RESULTS_SUFFIX):
            unread.append(Unread(candidate, why))
            log.warning("%s: not read: %s", candidate, why)
    if not found and not unread:
        raise DataError(f"{path}: no results JSON under it (lmms-eval's *_results.json or `lmms-vr score --out`)")
    return found


def metric_values(entry: dict) -> dict[str, Any]:
    """{metric: value} from lmms-eval's `{"metric,none": value}` (stderr entries left out)."""
    values = {}
    for key, value in entry.items():
        name, _, filter_name = key.partition(",")
        if filter_name and "_stderr" not in name and isinstance(value, (int, float)):
            values[name] = float(value)
    return values


def default_label(data: dict, path: Path) -> str:
    """The model a results file is for: lmms-eval's model and its checkpoint, or the file name."""
    if "lmms_vr" in data:
        return path.stem
    config = data.get("config") or {}
    model = config.get("model") or data.get("model_name") or path.parent.name
    args = str(config.get("model_args") or "")
    match = re.search(r"(?:pretrained|model_version|model)=([^,]+)", args)
    return f"{model} ({match.group(1)})" if match else str(model)


def _file_name(name: Any) -> bool:
    """A plain file name (a task name such as `a/b` names no file beside the results)."""
    return isinstance(name, str) and bool(name) and Path(name).name == name and name not in (".", "..") and "\\" not in name


def samples_for(path: Path, data: dict) -> dict[str, Path]:
    """{task: samples file} of a results file: lmms-eval's `<date>_samples_<task>.jsonl` or ours."""
    ours = (data.get("lmms_vr") or {}).get("samples") or {}
    found = {task: path.with_name(name) for task, name in ours.items() if _file_name(name) and path.with_name(name).is_file()}
    prefix = path.name[: -len(scoring.RESULTS_SUFFIX)] if path.name.endswith(scoring.RESULTS_SUFFIX) else path.stem
    for task in data.get("results", {}):
        if task in found or not _file_name(f"{prefix}_samples_{task}.jsonl"):
            continue
        candidate = path.with_name(f"{prefix}_samples_{task}.jsonl")
        if candidate.is_file():
            found[task] = candidate
    return found


def sample_counts(data: dict) -> dict[str, int]:
    """{task: samples it scored} from lmms-eval's `n-samples` (`effective`), where recorded."""
    counts = {}
    for task, entry in (data.get("n-samples") or {}).items():
        value = entry.get("effective") if isinstance(entry, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            counts[str(task)] = value
    return counts


def load_runs(items: Sequence[str], unread: list[Unread] | None = None) -> list[Run]:
    """Runs from the command line's results arguments (same label + disjoint tasks = one run).

    Files that could not be read are appended to `unread`."""
    runs: list[Run] = []
    for item in items:
        label, path = split_label(item)
        for file, data in results_files(path, unread):
            results = {str(task): metric_values(entry) for task, entry in data["results"].items() if isinstance(entry, dict)}
            name = label or default_label(data, file)
            target = next((r for r in runs if r.label == name and not set(r.results) & set(results)), None)
            if target is None:
                taken = {r.label for r in runs}
                unique, number = name, 2
                while unique in taken:
                    unique, number = f"{name} #{number}", number + 1
                target = Run(unique, [])
                runs.append(target)
            target.paths.append(file)
            target.results.update(results)
            target.samples.update(samples_for(file, data))
            target.sources.update(dict.fromkeys(results, file))
            target.sizes.update(sample_counts(data))
    return runs


# ---------------------------------------------------------------------------------------------
# The judge a run used: its verdicts are read back from its cache (no key, no request)
# ---------------------------------------------------------------------------------------------


def judge_settings(data: Any, judge_name: str, depth: int = 0) -> list[dict]:
    """Every judge configuration of `judge_name` in a JSON document (`Judge.accounting()`'s
    `judge` object: benchmark, model, cache_path), wherever the writer nested it."""
    if depth > 4:
        return []
    if isinstance(data, dict):
        if data.get("benchmark") == judge_name and isinstance(data.get("model"), str) and "cache_path" in data:
            return [data]
        return [found for value in data.values() for found in judge_settings(value, judge_name, depth + 1)]
    if isinstance(data, list):
        return [found for value in data[:50] for found in judge_settings(value, judge_name, depth + 1)]
    return []


_readers: dict[tuple, Any] = {}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def run_accounting_files(results_file: Path) -> list[Path]:
    """The files of this run that may record its judge: `<date_id>[_N]_<name>.json` beside
    `<date_id>_results.json` (in its folder, or the one above it), e.g. its
    `..._judge_accounting_<benchmark>.json` or a benchmark's details file. Another run's files in
    the same folder name another run's judge and cache: never used for this one."""
    if not results_file.name.endswith(scoring.RESULTS_SUFFIX):
        return []
    prefix = results_file.name[: -len(scoring.RESULTS_SUFFIX)]
    pattern = re.compile(re.escape(prefix) + r"_.+\.json")
    return sorted((p for folder in (results_file.parent, results_file.parent.parent) for p in folder.glob(f"{glob_escape(prefix)}_*.json")
                   if pattern.fullmatch(p.name) and p != results_file), key=_mtime, reverse=True)


def glob_escape(text: str) -> str:
    """`text` matched literally by `Path.glob`."""
    import glob

    return glob.escape(text)


def verdicts_for(results_file: Path | None, judge_name: str) -> tuple[Any, str, str]:
    """(a `judges.CacheOnlyJudge` on a judge cache, "", borrowed) or (None, why there is none, "").

    The judge is the one the run recorded: in the results file itself (`lmms-vr score`), or
    in the run's own judge accounting beside lmms-eval's results (`run_accounting_files`).
    A run that recorded none gets the judge configured in this environment, whose cache may
    hold verdicts made for another run: `borrowed` then says so (and the caller checks that
    they reproduce the run's results before trusting them).
    """
    candidates: list[dict] = []
    if results_file is not None:
        data, _ = read_results(results_file)
        candidates += judge_settings(data, judge_name) if data else []
        for path in [] if candidates else run_accounting_files(results_file):
            try:
                if path.stat().st_size < 1 << 22:
                    candidates += judge_settings(json.loads(path.read_text(encoding="utf-8")), judge_name)
            except (ValueError, OSError):
                continue
    recorded = len(candidates)
    try:
        from lmms_video_reasoning.judges import JudgeConfig

        configured = JudgeConfig.from_env(judge_name)
    except Exception:  # noqa: BLE001 - an unknown judge name or a bad variable: no configured judge
        configured = None
    if configured is not None and not recorded:
        candidates.append({"model": configured.model, "cache_path": str(configured.cache_path) if configured.cache_path else None,
                           "base_url": configured.endpoint})
    caches = [(c["model"], c["cache_path"], _endpoint(c.get("base_url")), i >= recorded) for i, c in enumerate(candidates) if c.get("cache_path")]
    for model, cache, endpoint, borrowed in caches:
        if Path(cache).is_file():
            from lmms_video_reasoning.judges import CacheOnlyJudge

            key = (judge_name, model, str(cache), endpoint)
            if key not in _readers:
                _readers[key] = CacheOnlyJudge(judge_name, model, cache, endpoint)
            return _readers[key], "", (f"verdicts borrowed from the configured judge's cache {cache} (the run recorded no judge)"
                                       if borrowed else "")
    if caches:
        return None, f"the judge cache {caches[0][1]} recorded for this run is not on this machine", ""
    if candidates:
        return None, "the run's judge had its cache off (LMMS_VR_JUDGE_CACHE=off)", ""
    return None, "no judge recorded with the results and none configured", ""


def _endpoint(base_url: Any) -> str | None:
    """The endpoint an accounting records (`base_url`), None for the provider's default."""
    return base_url if isinstance(base_url, str) and base_url.startswith("http") and " " not in base_url else None


class _NoVerdicts:
    """The judge of a run whose cache is not available: every request is missing, none is sent."""

    def __init__(self) -> None:
        self.misses = self.item_errors = 0

    def ask(self, request):
        from lmms_video_reasoning.judges import JudgeResult

        self.misses += 1
        return JudgeResult(False, None, None, "no judge cache", False)

    def map(self, fn, items, desc=""):
        out = []
        for item in items:
            try:
                out.append(fn(item, self.ask))
            except Exception:  # noqa: BLE001 - an item that cannot even be rebuilt is missing too
                self.item_errors += 1
                out.append(None)
        return out

    def log_summary(self) -> None:
        pass


def shortfall(judge: Any) -> tuple[int, int]:
    """(requests not answered from the cache, judging items that failed before asking) so far."""
    if isinstance(judge, _NoVerdicts):
        return judge.misses, judge.item_errors
    stats = judge.stats.as_dict()
    return stats.get("not_computed", 0), stats.get("by_tag", {}).get("(map)", {}).get("failures", 0)


# ---------------------------------------------------------------------------------------------
# Per-sample data and the bootstrap
# ---------------------------------------------------------------------------------------------


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
        """(the unit number of each record, {unit: number}), units in first-appearance order."""
        unit = self.bench.unit
        index, keys = resampling.unit_index([unit(record) for record in self.records])
        return index, {key: number for number, key in enumerate(keys)}

    @property
    def unit_count(self) -> int:
        """How many resampling units (questions, or videos) the records hold."""
        return len(self.unit_numbers[1])

    @functools.cached_property
    def question_count(self) -> int:
        """How many questions the records answer (`ScoringAdapter.question`: a question answered
        in several modes counts once)."""
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
    def totals(self) -> resampling.UnitTotals | None:
        """The per-sample contributions summed per unit, computed once (None when the benchmark
        gives no array form of its metrics: each resample is then re-aggregated by `metrics`)."""
        columns = self.bench.columns(self.records, self.outcomes, self.settings)
        if columns is None:
            return None
        return resampling.UnitTotals(columns, self.unit_numbers[0], len(self.unit_numbers[1]))

    def metrics(self, indices: Sequence[int] | None = None) -> dict[str, float]:
        if indices is None:
            return self.bench.metrics(self.records, self.outcomes, self.settings)
        return self.bench.metrics([self.records[i] for i in indices], [self.outcomes[i] for i in indices], self.settings)

    def trusted(self, metric: str) -> bool:
        """The recomputed metric is the run's: every verdict was read, or it needs none, and it
        reproduces the run's value (`task_stats`)."""
        return metric not in self.untrusted and (not self.missing_verdicts or metric in spec_of(self.benchmark).judge_free)

    def why_not(self, metric: str) -> str:
        """A few words on why `metric` is not the run's ("" when it is)."""
        if self.trusted(metric):
            return ""
        return self.gap or "no verdicts" if metric not in self.untrusted else "differs from the results"


def load_sampled(task: str, path: Path, verdicts: Any = None, no_verdicts: str = "") -> tuple[Sampled | None, str]:
    """(Sampled, "") for a task's samples file, or (None, why not).

    Outcomes stored by `lmms-vr score` are used as they are; otherwise they are recomputed
    with the benchmark's own code, its judge verdicts read by `verdicts` (a reader of the
    run's judge cache; None: `no_verdicts` says why there is none). Verdicts that cannot be
    read leave `missing_verdicts` set: only the judge-free metrics are then the run's.
    """
    try:
        spec = scoring.task_spec(task)
    except DataError:
        return None, f"{task} is not a task of this suite"
    try:
        records, _coverage, outcomes = scoring.read_samples_with_outcomes(path, spec)
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
            reason, gap = scoring.unbuilt_items(spec.benchmark, errors)
            reasons.append(reason)
        if reasons:
            missing = "; ".join(reasons) + "; judge-based CIs left out (run `lmms-vr score` with the judge and report on its output)"
    # only what the metrics read from now on: memory follows what the report needs, not the samples file
    records = [bench.report_record(record) for record in records]
    return Sampled(spec.benchmark, records, list(outcomes), settings, missing, gap, borrowed), ""


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of bootstrap values; None when most resamples are undefined (NaN)."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    finite = values[~np.isnan(values)]
    if len(finite) < max(2, len(values) // 2):
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


MIN_UNITS = 2  # resampling units a bootstrap needs (with one, every resample is the sample itself)


def bootstrap_values(sampled: Sampled, n: int = 1000, seed: int = 0, where: Sequence[bool] | None = None) -> dict[str, Any]:
    """Every metric on `n` resamples of the questions (units) with replacement (seeded):
    {metric: array of n values}. Over the benchmark's per-sample arrays (`resampling`), else
    (a benchmark without them) each resample re-aggregated by its metric function.

    `where` (one flag per record): the metrics of the flagged records of each resample of all the
    run's units, as a group's metric (e.g. accuracy on short videos) is computed from the run."""
    if sampled.unit_count < MIN_UNITS:  # every resample of one unit is that unit: no spread, no interval
        return {}
    if sampled.totals is None:
        return bootstrap_values_reference(sampled, n, seed, where)
    if where is None:
        return resampling.resampled(sampled.totals, n, seed)
    import numpy as np

    within = resampling.UnitTotals(sampled.totals.columns.where(np.asarray(where, dtype=bool)), sampled.unit_numbers[0], sampled.unit_count)
    return resampling.resampled(within, n, seed)


def _resampled_values(draw, compute, n: int) -> dict[str, list[float]]:
    from lmms_video_reasoning.judges import failure_share

    values: dict[str, list[float]] = {}
    with failure_share.decided_on_the_whole_run():  # the failure share is the run's decision
        for _ in range(n):
            for name, value in compute(draw()).items():
                if isinstance(value, (int, float)):
                    values.setdefault(name, []).append(float(value))
    return values


def bootstrap_values_reference(sampled: Sampled, n: int = 1000, seed: int = 0, where: Sequence[bool] | None = None) -> dict[str, list[float]]:
    """`bootstrap_values` by definition: each resample's records (those flagged by `where`)
    re-aggregated by the benchmark's own metric function (the reference the array form is held
    to, and the path of a benchmark without one)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    groups = list(sampled.units().values())
    if len(groups) < MIN_UNITS:
        return {}
    if where is not None:  # the same draws of units; a unit contributes only its flagged records
        groups = [[index for index in group if where[index]] for group in groups]

    def draw() -> list[int]:
        return [index for pick in rng.integers(0, len(groups), len(groups)) for index in groups[pick]]

    return _resampled_values(draw, sampled.metrics, n)


def bootstrap_ci(sampled: Sampled, n: int = 1000, seed: int = 0, level: float = 0.95,
                 where: Sequence[bool] | None = None) -> dict[str, tuple[float, float] | None]:
    """95% percentile CIs of every metric, resampling questions with replacement (seeded);
    `where`: of the flagged records' metrics (see `bootstrap_values`)."""
    values = bootstrap_values(sampled, n, seed, where)
    return {name: percentile_interval(series, level) for name, series in values.items()}


@dataclass
class Difference:
    metric: str
    difference: float
    interval: tuple[float, float] | None
    common: int
    why: str = ""  # why the difference is not computable ("" when it is)


def common_units(base: Sampled, other: Sampled) -> list[str]:
    """The units both runs answered, in the base run's order."""
    theirs = other.unit_numbers[1]
    return [unit for unit in base.unit_numbers[1] if unit in theirs]


def paired_values(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0) -> tuple[list[str], dict[str, float], dict[str, Any]]:
    """(the common units, other - base on them, other - base on `n` paired resamples of them).
    Over both runs' per-sample arrays (`resampling.paired`), else by the metric functions."""
    import numpy as np

    common = common_units(base, other)
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
    import numpy as np

    base_units, other_units = base.units(), other.units()
    rng = np.random.default_rng(seed)

    def indices(units: dict[str, list[int]], picks) -> list[int]:
        return [index for pick in picks for index in units[common[pick]]]

    def point(picks) -> dict[str, float]:
        a, b = base.metrics(indices(base_units, picks)), other.metrics(indices(other_units, picks))
        return {name: b[name] - a[name] for name in a if isinstance(a[name], (int, float)) and isinstance(b.get(name), (int, float))}

    observed = point(range(len(common)))
    values = _resampled_values(lambda: rng.integers(0, len(common), len(common)), point, n) if n else {}
    return observed, values


def paired_difference(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0, level: float = 0.95) -> list[Difference]:
    """other - base per metric on the questions both answered, with a paired bootstrap CI."""
    common, observed, values = paired_values(base, other, n, seed)
    return [Difference(name, value, percentile_interval(values.get(name, []), level), len(common)) for name, value in observed.items()]


# ---------------------------------------------------------------------------------------------
# The numbers behind the tables: per run and task, points from the results, CIs from samples
# ---------------------------------------------------------------------------------------------


@dataclass
class TaskStats:
    point: dict[str, float]
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    questions: int | None = None  # the questions the samples answer
    units: int | None = None  # the resampling units they fall in (`ReportSpec.unit`: the questions, or e.g. their videos)
    note: str = ""  # why intervals are missing (or the per-sample data disagrees)
    sampled: Sampled | None = None
    source: str = ""  # for a row joining several tasks: which
    not_computed: dict[str, str] = field(default_factory=dict)  # metric -> why the run has no value ("judge_failed 9 of 9")
    failed_judgments: str = ""  # judgments that failed and were counted wrong, under the share ("judge_failed 1 of 40")


class NotComputed(float):
    """A metric the run did not compute (NaN) with the reason: rendered "not computed", left
    out of plots, its reason under the table that shows it."""

    def __new__(cls, reason: str):
        value = super().__new__(cls, math.nan)
        value.reason = reason
        return value


def judge_failures(run: Run, task: str, stats: TaskStats) -> str:
    """"judge_failed N of M" for a task whose run counted judge failures ("" for none)."""
    failed = stats.point.get("judge_failed")
    if not isinstance(failed, float) or math.isnan(failed) or failed <= 0:
        return ""
    total = run.sizes.get(task) or (len(stats.sampled.records) if stats.sampled is not None else None)
    return f"judge_failed {failed:g}" + (f" of {total}" if total else "")


def mark_not_computed(run: Run, task: str, stats: TaskStats, benchmark: str) -> None:
    """Judge-based metrics the run reported as NaN while it counted judge failures are not
    computed (the failure share rule), never a value; under the share, the failures are noted."""
    failures = judge_failures(run, task, stats)
    if not failures:
        return
    judge_free, counts = spec_of(benchmark).judge_free, failure_counts(benchmark)
    for metric, value in stats.point.items():
        if math.isnan(value) and metric not in judge_free and metric not in counts:
            stats.not_computed[metric] = failures
    if any(not math.isnan(v) and m not in judge_free and m not in counts for m, v in stats.point.items()):
        stats.failed_judgments = failures


def reproduces_run(sampled: Sampled, point: dict, recomputed: dict) -> bool:
    """The recomputed judge-based metrics equal the run's, judge_failed included: the judge
    requests with no cached verdict are the judgments that failed in the run itself."""
    judge_free = spec_of(sampled.benchmark).judge_free
    shared = [m for m in point if m in recomputed and m not in judge_free]
    return "judge_failed" in shared and all(scoring.same_value(point[m], recomputed[m]) for m in shared)


def task_stats(run: Run, task: str, n: int, seed: int) -> TaskStats:
    stats = TaskStats(point=dict(run.results.get(task, {})))
    try:
        benchmark = registry.get(scoring.task_spec(task).benchmark)
    except DataError:
        stats.note = f"{task} is not a task of this suite"
        return stats
    path = run.samples.get(task)
    if path is None:
        stats.note = "no samples file next to the results (run lmms-eval with --log_samples)"
        mark_not_computed(run, task, stats, benchmark.name)
        return stats
    verdicts, no_verdicts, borrowed = verdicts_for(run.sources.get(task), benchmark.scoring.judge_name)
    sampled, why = load_sampled(task, path, verdicts, no_verdicts)
    if sampled is None:
        stats.note = why
        mark_not_computed(run, task, stats, benchmark.name)
        return stats
    # borrowed verdicts matter only where the records ask the judge
    sampled.borrowed = (sampled.borrowed or borrowed) if sampled.bench.needs_judge(sampled.records) else ""
    stats.sampled, stats.questions, stats.units = sampled, sampled.question_count, sampled.unit_count
    mark_not_computed(run, task, stats, benchmark.name)
    # the run's metrics recomputed from its samples (to check them against its results): over the arrays when
    # the benchmark has them (equal to its metric function to 1e-9, the tolerance of the check)
    recomputed = resampling.whole(sampled.totals) if sampled.totals is not None else sampled.metrics()
    if sampled.missing_verdicts and not sampled.borrowed and reproduces_run(sampled, stats.point, recomputed):
        sampled.missing_verdicts = sampled.gap = ""  # the missing verdicts are the run's own failed judgments
    differ = [m for m, v in stats.point.items() if m in recomputed and sampled.trusted(m) and not scoring.same_value(v, recomputed[m])]
    sampled.untrusted.update(differ)
    notes = []
    if differ:
        notes.append(f"per-sample re-scoring differs from the results file for {', '.join(differ)}"
                     + (" (the verdicts are borrowed)" if sampled.borrowed else " (judge cache missing?)"))
    elif sampled.missing_verdicts:
        notes.append(sampled.missing_verdicts)
    if sampled.borrowed:
        notes.append(sampled.borrowed)
    stats.note = "; ".join(notes)
    if n > 0 and spec_of(sampled.benchmark).per_task_bootstrap:  # else the section bootstraps its joined rows
        stats.ci = trusted_only(sampled, bootstrap_ci(sampled, n, seed), stats.point)
    return stats


def trusted_only(sampled: Sampled, intervals: dict, point: dict | None = None) -> dict:
    """The CIs of the metrics whose per-sample outcomes are the run's (see `Sampled.trusted`);
    never one for a metric whose run value is NaN (not computed)."""
    point = point or {}
    return {metric: interval for metric, interval in intervals.items()
            if sampled.trusted(metric) and not math.isnan(point.get(metric, 0.0))}


# ---------------------------------------------------------------------------------------------
# Tables (one structure, rendered to Markdown and HTML)
# ---------------------------------------------------------------------------------------------


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[list[str], bool]]  # (cells, is the user's row)
    notes: list[str] = field(default_factory=list)


def fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, NotComputed):
        return "not computed"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_ci(interval: tuple[float, float] | None, digits: int = 1) -> str:
    return "–" if interval is None else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def reference(benchmark: str) -> dict:
    """The benchmark's papers' tables (package data, loaded through the registry)."""
    return registry.get(benchmark).reference_tables()


def digits_for(benchmark: str, metric: str) -> int:
    """The paper's precision for a metric (`ReportSpec.two_decimals`)."""
    return spec_of(benchmark).digits(metric)


def user_cell(label: str) -> str:
    return f"{MINE}{label}"


def paper_rows(table: dict, columns: Sequence[str], benchmark: str, table_name: str, groups: Sequence[str] | None = None) -> list:
    """The paper's reference rows of `table`, restricted to `columns` (and groups), marked with their source."""
    index = [table["columns"].index(c) for c in columns]
    source = f"paper, {table_name}"
    rows = []
    for row in table["rows"]:
        if groups is not None and not any(row["group"] and row["group"].startswith(g) for g in groups):
            continue
        values = [row["values"][i] for i in index]
        source_cell = f"{source} · {row['group']}" if row.get("group") else source
        rows.append(([row["model"], source_cell] + [fmt(v, digits_for(benchmark, c)) for c, v in zip(columns, values)], False))
    return rows


@dataclass
class Coverage:
    """What one run beside a paper table scored, to compare with the data and protocol of the
    table's rows (`provenance` in the benchmark's `reference_tables.json`)."""

    label: str  # the run as its row names it (with its task)
    questions: int | None  # the questions it scored (None: unknown, no samples file nor lmms-eval's n-samples)
    available: int | None  # the questions of the data it drew them from (the release, or the split)
    data: str  # that data in one word before "questions" ("released", "mini-split")
    protocol: str = ""  # how its protocol differs from the rows' ("" = the same)


MISMATCH = "⚠ "  # starts a note saying a run is not on the rows' data or protocol


def questions_of(run: Run, task: str, stats: TaskStats | None) -> int | None:
    """The questions a run's task scored: its samples' (`TaskStats.questions`), else lmms-eval's n-samples."""
    if stats is not None and stats.questions is not None:
        return stats.questions
    return run.sizes.get(task)


def provenance_notes(benchmark: str, name: str, coverage: Sequence[Coverage]) -> list[str]:
    """Under a paper table: the data version and protocol its rows come from, then for each run
    the questions it scored and, as a visible note (`MISMATCH`), where it is not on the rows'
    data (another question count, or rows whose data the paper does not state) or protocol."""
    prov = reference(benchmark)["tables"][name].get("provenance")
    if not prov:
        return []
    notes = [f"Reference rows: data: {prov['data']}; protocol: {prov['protocol']}."]
    rows_questions = prov.get("questions")
    for run in coverage:
        if run.questions is None:
            scored = f"{run.data} questions, how many unknown (no samples file, no n-samples)"
        elif run.available:
            scored = f"{run.questions:,} of the {run.available:,} {run.data} questions"
            if run.questions < run.available:
                scored += " (a part of it: a --limit or sample run)"
        else:
            scored = f"{run.questions:,} {run.data} questions"
        problems = []
        if rows_questions is None:
            problems.append("the paper does not state the data of its rows, so the run cannot be matched to them")
        elif run.questions != rows_questions:
            problems.append(f"data mismatch: the rows are on {rows_questions:,} questions")
        if run.protocol:
            problems.append(f"protocol mismatch: {run.protocol}")
        if problems:
            notes.append(f"{MISMATCH}{run.label}: {scored}; " + "; ".join(problems) + ".")
        else:
            notes.append(f"{run.label}: {scored}; the same data and protocol as the rows.")
    return notes


def paper_table(benchmark: str, name: str, user_rows: list, groups: Sequence[str] | None = None, title_suffix: str = "",
                coverage: Sequence[Coverage] = ()) -> Table:
    """A paper table with the user's rows first, its source, its note and (`coverage`) how each
    run compares with the data and protocol of the rows (`provenance_notes`)."""
    spec = reference(benchmark)["tables"][name]
    columns = spec["columns"]
    table_name = name.replace("table", "Table ")
    notes = [f"Paper rows: {reference(benchmark)['citation']}, {table_name}."]
    if spec.get("note"):
        notes.append(spec["note"])
    notes += provenance_notes(benchmark, name, coverage)
    notes += list(dict.fromkeys(note for cells, _ in user_rows for note in getattr(cells, "notes", ())))
    return Table(spec["title"] + title_suffix, ["Model", "Source"] + [spec_of(benchmark).label(c) for c in columns],
                 user_rows + paper_rows(spec, columns, benchmark, table_name, groups), notes)


class Cells(list):
    """A user row's cells, with the notes its table must carry (why a value is not computed)."""

    notes: tuple[str, ...] = ()


def run_row(label: str, source: str, values: Sequence[Any], benchmark: str, columns: Sequence[str]) -> tuple[list[str], bool]:
    cells = Cells([user_cell(label), f"your run · {source}"] + [fmt(v, digits_for(benchmark, c)) for c, v in zip(columns, values)])
    reasons: dict[str, list[str]] = {}  # one note per reason, naming its metrics
    for column, value in zip(columns, values):
        if isinstance(value, NotComputed):
            reasons.setdefault(value.reason, []).append(spec_of(benchmark).label(column))
    cells.notes = tuple(f"{label}: {', '.join(metrics)} not computed ({reason}): the judge failed on more than the allowed "
                        "share of its samples" for reason, metrics in reasons.items())
    return cells, True


HEAD_MARK = " :: "  # in a long note, ends the words its cell keeps
NOTE_WIDTH = 60  # a Note cell longer than this moves under the table, the cell keeps its first words and a reference


def short_notes(rows: list[tuple[list[str], bool]], column: int) -> list[str]:
    """Shorten the long notes of `column` in place to their first words + "[k]"; the footnotes ("[k] full text")."""
    footnotes: list[str] = []
    for cells, _ in rows:
        text = cells[column].replace(HEAD_MARK, ": ")
        if len(text) <= NOTE_WIDTH:
            cells[column] = text
            continue
        head = cells[column].split(HEAD_MARK, 1)[0] if HEAD_MARK in cells[column] else re.split(r" \(|; |: ", text, maxsplit=1)[0]
        head = head if len(head) <= NOTE_WIDTH - 5 else head[: NOTE_WIDTH - 6].rstrip() + "…"
        if text not in footnotes:
            footnotes.append(text)
        cells[column] = f"{head} [{footnotes.index(text) + 1}]"
    return [f"[{k}] {text}" for k, text in enumerate(footnotes, 1)]


def ci_reason(benchmark: str, stats: TaskStats, metric: str) -> str:
    """Why a metric with a value has no interval (the Note cell)."""
    if stats.units is not None and stats.units < MIN_UNITS:
        return f"no CI from {stats.units} {spec_of(benchmark).unit}"
    if stats.sampled is not None and not stats.sampled.trusted(metric):
        return stats.sampled.why_not(metric) + (HEAD_MARK + stats.note if stats.note else "")
    return stats.note or "undefined in too many resamples"


def count_columns(benchmark: str) -> list[str]:
    """The counts a CI table shows: the questions, and the resampling units when they are not the
    questions (e.g. videos), each in its own column."""
    unit = spec_of(benchmark).unit
    return ["Questions"] + ([] if unit == "questions" else [unit.capitalize()])


def ci_table(benchmark: str, entries: list[tuple[str, str, TaskStats]]) -> Table:
    """Headline metrics with their 95% bootstrap CIs, one row per (run, task, metric); a metric
    the run did not compute is a row saying so, with the reason and no interval."""
    counts = count_columns(benchmark)
    rows = []
    for label, task, stats in entries:
        for metric in spec_of(benchmark).headline:
            value = value_of(stats, metric)
            if metric not in stats.point or (math.isnan(value) and not isinstance(value, NotComputed)):
                continue
            digits = digits_for(benchmark, metric)
            interval = None if math.isnan(value) else interval_of(stats, metric)
            if isinstance(value, NotComputed):
                reason = value.reason
            elif interval is None:
                reason = ci_reason(benchmark, stats, metric)
            else:
                reason = f"{stats.failed_judgments} counted wrong" if stats.failed_judgments and metric not in spec_of(benchmark).judge_free else ""
            borrowed = stats.sampled.borrowed if stats.sampled is not None and metric not in spec_of(benchmark).judge_free else ""
            if borrowed:  # verdicts the run did not record: said in the cell, the cache under the table
                reason = (f"{reason}; " if reason else "") + "verdicts borrowed" + HEAD_MARK + borrowed
            rows.append(([user_cell(label), task, spec_of(benchmark).label(metric), fmt(value, digits), fmt_ci(interval, digits),
                          fmt(stats.questions)] + [fmt(stats.units)] * (len(counts) - 1) + [reason], True))
    notes = [f"Percentile bootstrap over {spec_of(benchmark).unit}, re-aggregated by the benchmark's own metric functions."
             + (f" Questions: the questions answered; {counts[1]}: the {spec_of(benchmark).unit} they belong to, what the bootstrap "
                "resamples." if len(counts) > 1 else ""),
             "judge_failed N of M: judgments that failed after retries; under the allowed share they count as wrong answers, "
             "beyond it the metric is not computed."]
    columns = ["Run", "Task", "Metric", "Value", "95% CI", *counts, "Note"]
    return Table("95% bootstrap confidence intervals (headline metrics)", columns, rows, notes + short_notes(rows, len(columns) - 1))


def comparison_table(benchmark: str, comparisons: list[tuple[str, str, str, list[Difference]]]) -> Table:
    rows = []
    for task, base, other, differences in comparisons:
        for d in differences:
            if d.metric not in spec_of(benchmark).headline or (math.isnan(d.difference) and not d.why):
                continue
            digits = digits_for(benchmark, d.metric)
            if d.why:
                cells = ["not computable", "–", str(d.common), "–", d.why]
            else:
                verdict = "–" if d.interval is None else ("yes" if d.interval[0] > 0 or d.interval[1] < 0 else "no (within noise)")
                note = "" if d.interval is not None or d.common >= MIN_UNITS else f"no CI from {d.common} {spec_of(benchmark).unit}"
                cells = [f"{d.difference:+.{digits}f}", fmt_ci(d.interval, digits), str(d.common), verdict, note]
            rows.append(([f"{MINE}{other} − {base}", task, spec_of(benchmark).label(d.metric)] + cells, True))
    unit = spec_of(benchmark).unit
    return Table(f"Paired comparisons (difference with 95% CI, same {unit})", ["Runs", "Task", "Metric", "Difference", "95% CI",
                 f"Common {unit}", "Significant", "Note"], rows,
                 [f"Paired bootstrap: the {unit} both runs answered, resampled together.", pairing_note()] + short_notes(rows, 7))


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md_text(text: Any) -> str:
    """Text as literal Markdown: every character Markdown (or HTML in it) would interpret is
    backslash-escaped, line breaks become spaces (a run label or task name cannot inject links,
    markup or table cells)."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", re.sub(r"[\r\n]+", " ", str(text)))


def markdown_table(table: Table) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    out = [f"#### {md_text(table.title)}", "", line([md_text(c) for c in table.columns]), line(["---"] * len(table.columns))]
    for cells, mine in table.rows:
        out.append(line([f"**{md_text(c)}**" if mine and i == 0 else md_text(c) for i, c in enumerate(cells)]))
    out += [""] + [f"_{md_text(note)}_  " for note in table.notes]
    return "\n".join(out) + "\n"


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        f'<tr class="{"mine" if mine else "paper"}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        for cells, mine in table.rows)
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in table.notes)
    return f"<h4>{html.escape(table.title)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


# ---------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg)
# ---------------------------------------------------------------------------------------------


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def error_bars(points: Sequence[float], intervals: Sequence[tuple[float, float] | None]):
    """Asymmetric error bars for matplotlib from CIs (0 where there is none)."""
    low = [p - i[0] if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    high = [i[1] - p if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    return [[max(0.0, v) for v in low], [max(0.0, v) for v in high]]


def grouped_bars(path: Path, title: str, categories: Sequence[str], series: list[tuple[str, list[float], list]], ylabel: str,
                 reference: tuple[str, list[float | None]] | None = None) -> Path:
    """Bars per category, one colour per run (CIs as error bars), optionally a paper row as markers."""
    plt = pyplot()
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories) * max(1, len(series)) ** 0.5 + 2), 4.2), dpi=110)
    for k, (label, values, intervals) in enumerate(series):
        # a value the run does not have (not computed, NaN) gets no bar: a bar of 0 would read as a score
        kept = [i for i, v in enumerate(values) if not math.isnan(v)]
        if not kept:
            continue
        xs = [i + (k - (len(series) - 1) / 2) * width for i in kept]
        shown, shown_intervals = [values[i] for i in kept], [intervals[i] for i in kept]
        errors = error_bars(shown, shown_intervals) if any(shown_intervals) else None
        bars = ax.bar(xs, shown, width * 0.92, label=f"{MINE}{label}", yerr=errors, capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333"})
        for bar, value in zip(bars, shown):  # the value itself, inside the bar's foot
            ax.text(bar.get_x() + bar.get_width() / 2, 1.5, f"{value:.1f}", ha="center", va="bottom", fontsize=7.5,
                    color="white" if value >= 8 else "#333", rotation=90 if len(series) > 2 else 0)
    if reference is not None:
        name, values = reference
        ax.scatter([i for i, v in enumerate(values) if v is not None], [v for v in values if v is not None], marker="_", s=500,
                   color="black", zorder=3, label=name)
    ax.set_xticks(range(len(categories)), categories)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------
# Sections per benchmark
# ---------------------------------------------------------------------------------------------


@dataclass
class Section:
    benchmark: str
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    title: str = ""  # a section that is not a benchmark's (e.g. judge agreement): its heading
    intro: str = ""  # ... and the line under it (a benchmark's section names its paper there)

    def heading(self) -> tuple[str, str]:
        if self.title:
            return self.title, self.intro
        return registry.get(self.benchmark).title, f"Paper: {reference(self.benchmark)['citation']}"


def value_of(stats: TaskStats | None, metric: str) -> float:
    """The run's value; `NotComputed` (NaN with the reason) for a metric the run could not compute."""
    if stats is None:
        return math.nan
    if metric in stats.not_computed:
        return NotComputed(stats.not_computed[metric])
    return stats.point.get(metric, math.nan)


def interval_of(stats: TaskStats | None, metric: str):
    """The metric's CI; None when there is none or the run has no value (a CI is never shown without one)."""
    if stats is None or not stats.ci or math.isnan(value_of(stats, metric)):
        return None
    return stats.ci.get(metric)


def side_gap(label: str, stats: TaskStats, metric: str) -> str:
    """Why one run of a paired comparison has no value of its own for `metric` ("" when it has)."""
    value = value_of(stats, metric)
    if isinstance(value, NotComputed):
        return f"{label} has no value ({value.reason})"
    if metric in stats.point and math.isnan(value):
        return f"{label} has no value (NaN in its results)"
    if not stats.sampled.trusted(metric):
        return f"{label}'s per-sample outcomes are not its run's ({stats.sampled.why_not(metric)})"
    return ""


PAIRINGS = ("baseline", "all")
# Which pairs of runs the report compares (`--pairs`); set by `build_report` for the sections it builds.
PAIRING: contextvars.ContextVar[str] = contextvars.ContextVar("lmms_vr_report_pairs", default="baseline")


def pairs_of(having: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The pairs compared among the runs having a task, in the order given: each later run against
    the first (`baseline`, the default: k - 1 comparisons), or every pair (`all`: k(k-1)/2)."""
    if PAIRING.get() == "all":
        return [(having[i], having[j]) for i in range(len(having)) for j in range(i + 1, len(having))]
    return [(having[0], other) for other in having[1:]]


def pairing_note() -> str:
    """What the comparison tables compare, as the report says it."""
    if PAIRING.get() == "all":
        return "Pairs compared: every pair of runs that share a task (--pairs all)."
    return ("Pairs compared: each run against the baseline, the first run given that has the task "
            "(--pairs all compares every pair).")


def comparisons_for(benchmark: str, tasks: Sequence[str], stats: dict, runs: list[Run], n: int, seed: int) -> list:
    """The pairs of runs of `pairs_of` that share a task with per-sample data. A metric one side
    has no value of (not computed, or outcomes that are not the run's: see `Sampled.trusted`) is
    not computable, and says which side and why (never a difference of 0)."""
    out = []
    for task in tasks:
        having = [(run.label, stats[(run.label, task)]) for run in runs if (run.label, task) in stats and stats[(run.label, task)].sampled]
        for (base_label, base), (label, other) in pairs_of(having):
            differences = []
            for d in paired_difference(base.sampled, other.sampled, n, seed):
                why = "; ".join(filter(None, (side_gap(base_label, base, d.metric), side_gap(label, other, d.metric))))
                differences.append(Difference(d.metric, math.nan, None, d.common, why) if why else d)
            out.append((task, base_label, label, differences))
    return out

# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def failure_counts(benchmark: str) -> tuple[str, ...]:
    """The metrics counting samples not scored normally, as the benchmark declares them
    (`Benchmark.failure_counts`): no CI, never a judged metric left uncomputed."""
    return registry.get(benchmark).failure_counts


def failure_summary(run: Run) -> str:
    """Per task, the samples that could not be scored normally (never silently a zero):
    the model gave no answer, the judge gave no verdict, the reply did not parse, the reply
    ended inside its reasoning block."""
    parts = []
    specs = scoring.task_specs()
    for task in sorted(run.results):
        declared = failure_counts(specs[task].benchmark) if task in specs else ()
        counts = [f"{name} {run.results[task][name]:g}" for name in declared
                  if isinstance(run.results[task].get(name), (int, float)) and not math.isnan(run.results[task][name])]
        if counts:
            parts.append(f"{task}: {', '.join(counts)}")
    return "; ".join(parts)


def bootstrap_units(html_form: bool = False) -> str:
    """What the bootstrap resamples, as the report's header says it ("questions (X: over videos)")."""
    others = [(b.title, b.report.unit) for b in registry.benchmarks() if b.report is not None and b.report.unit != "questions"]
    if not others:
        return "questions"
    if html_form:
        return "questions, " + ", ".join(f"{title} over {unit}" for title, unit in others)
    return "questions (" + "; ".join(f"{title}: over {unit}" for title, unit in others) + ")"


def render_markdown(runs: list[Run], sections: list[Section], seed: int, n: int, unread: Sequence[Unread] = ()) -> str:
    out = ["# lmms-vr report", "", f"Rows marked **{MINE.strip()}** are your runs; every other row is a paper's reference row, "
           f"with its source. Confidence intervals: 95% percentile bootstrap over {bootstrap_units()} "
           f"({n} resamples, seed {seed}).", ""] + ([md_text(pairing_note()), ""] if len(runs) > 1 else []) + ["Runs:", ""]
    for run in runs:
        failures = failure_summary(run)
        out.append(f"- **{md_text(run.label)}**: " + ", ".join(md_text(p) for p in run.paths) + f" — tasks {md_text(', '.join(sorted(run.results)))}"
                   + (f" (failure counts: {md_text(failures)})" if failures else ""))
    if unread:
        out += ["", "Not read (not in any table below):", ""]
        out += [f"- {md_text(u.path)}: {md_text(u.reason)}" for u in unread]
    for section in sections:
        title, intro = section.heading()
        out += ["", f"## {md_text(title)}", "", md_text(intro), ""]
        out += [markdown_table(t) for t in section.tables]
        out += [f"![{md_text(title)}]({path.name})\n" for title, path in section.figures]
    return "\n".join(out) + "\n"


CSS = """
body { font-family: -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; margin: 24px auto; max-width: 1200px; color: #222; padding: 0 16px; }
h1 { font-size: 24px; } h2 { font-size: 20px; border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 36px; } h4 { font-size: 15px; margin: 22px 0 6px; }
table { border-collapse: collapse; font-size: 12.5px; margin-bottom: 4px; }
th, td { border: 1px solid #d5d5d5; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } td:first-child, td:nth-child(2), th:first-child, th:nth-child(2) { text-align: left; }
tr.mine td { background: #fff4d6; font-weight: 600; } tr.paper td { color: #444; }
.note { font-size: 12px; color: #666; margin: 2px 0; } .scroll { overflow-x: auto; }
figure { margin: 16px 0; } figure img { max-width: 100%; border: 1px solid #eee; } figcaption { font-size: 12px; color: #555; }
.legend { background: #fff4d6; padding: 2px 6px; font-weight: 600; }
"""


def render_html(runs: list[Run], sections: list[Section], seed: int, n: int, unread: Sequence[Unread] = ()) -> str:
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>lmms-vr report</title>",
             f"<style>{CSS}</style></head><body><h1>lmms-vr report</h1>",
             f"<p><span class='legend'>{html.escape(MINE)}highlighted rows</span> are your runs; every other row is a paper's reference "
             f"row with its source. Confidence intervals: 95% percentile bootstrap over {html.escape(bootstrap_units(html_form=True))} ({n} resamples, seed {seed}).</p>"
             + (f"<p>{html.escape(pairing_note())}</p>" if len(runs) > 1 else "") + "<ul>"]
    for run in runs:
        failures = failure_summary(run)
        parts.append(f"<li><b>{html.escape(run.label)}</b>: {html.escape(', '.join(str(p) for p in run.paths))} — tasks "
                     f"{html.escape(', '.join(sorted(run.results)))}"
                     + (f" <span class='note'>(failure counts: {html.escape(failures)})</span>" if failures else "") + "</li>")
    parts.append("</ul>")
    if unread:
        parts.append("<p>Not read (not in any table below):</p><ul>" + "".join(
            f"<li>{html.escape(str(u.path))}: {html.escape(u.reason)}</li>" for u in unread) + "</ul>")
    for section in sections:
        title, intro = section.heading()
        parts.append(f"<h2>{html.escape(title)}</h2><p class='note'>{html.escape(intro)}</p>")
        parts += [f"<div class='scroll'>{html_table(t)}</div>" for t in section.tables]
        for title, path in section.figures:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
            # onload/onerror: a plot the browser cannot decode says so instead of showing nothing.
            parts.append(f"<figure><img alt='{html.escape(title)}' onload='this.dataset.ok=1' "
                         f"onerror=\"this.replaceWith('[plot could not be displayed]')\" src='data:image/png;base64,{encoded}'>"
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
    if not sections:
        parts.append("<p>No task of this suite in the results given.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_report(items: Sequence[str], out: Path, n: int = 1000, seed: int = 0, pairs: str = "baseline",
                 agreement: Sequence[str] = ()) -> dict:
    """Read the runs, compute the statistics, write report.md / report.html / report.json / PNGs.
    `pairs`: which runs the paired comparisons compare (`PAIRINGS`, see `pairs_of`);
    `agreement`: files written by `lmms-vr judge-agreement --out`, each shown as a section."""
    if pairs not in PAIRINGS:
        raise DataError(f"--pairs {pairs!r}: use one of {', '.join(PAIRINGS)}")
    token = PAIRING.set(pairs)
    try:
        return _build_report(items, Path(out), n, seed, pairs, agreement)
    finally:
        PAIRING.reset(token)


def _build_report(items: Sequence[str], out: Path, n: int, seed: int, pairs: str, agreement: Sequence[str] = ()) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    unread: list[Unread] = []
    runs = load_runs(items, unread)
    specs = scoring.task_specs()
    stats = {(run.label, task): task_stats(run, task, n, seed) for run in runs for task in run.results if task in specs}
    builders = [b.report.section for b in registry.benchmarks() if b.report is not None]
    sections = [s for s in (build(runs, stats, out, n, seed) for build in builders) if s is not None]
    if agreement and sections:
        from lmms_video_reasoning.utils.results.judge_agreement import agreement_section

        sections += [agreement_section(Path(path), out, index) for index, path in enumerate(agreement, 1)]
    if not sections:
        not_read = "; ".join(f"{u.path}: {u.reason}" for u in unread)
        raise DataError(f"none of the results given holds a task of this suite ({', '.join(sorted(specs))})"
                        + (f"; not read: {not_read}" if not_read else ""))
    (out / "report.md").write_text(render_markdown(runs, sections, seed, n, unread), encoding="utf-8")
    (out / "report.html").write_text(render_html(runs, sections, seed, n, unread), encoding="utf-8")
    data = {
        "seed": seed, "bootstrap": n, "pairs": pairs,
        "not_read": [{"path": str(u.path), "reason": u.reason} for u in unread],
        "runs": {run.label: {"paths": [str(p) for p in run.paths], "tasks": sorted(run.results)} for run in runs},
        "tasks": {f"{label}|{task}": {"point": s.point, "ci": s.ci, "questions": s.questions, "units": s.units, "note": s.note}
                  for (label, task), s in stats.items()},
        "sections": {s.benchmark: {"tables": [{"title": t.title, "columns": t.columns, "rows": [c for c, _ in t.rows], "notes": t.notes} for t in s.tables],
                                   "figures": [p.name for _, p in s.figures], **s.data} for s in sections},
    }
    (out / "report.json").write_text(json.dumps(_json_ready(data), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def main(args) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
    from lmms_video_reasoning.utils.lmms import launcher

    launcher.register_judge_settings()  # no LMMS_VR_JUDGE_* set: lmms-eval's API_TYPE=local judge
    data = build_report(args.results, Path(args.out), n=args.bootstrap, seed=args.seed, pairs=getattr(args, "pairs", "baseline"),
                        agreement=getattr(args, "agreement", None) or ())
    for entry in data["not_read"]:
        print(f"lmms-vr report: not read: {entry['path']}: {entry['reason']}", file=sys.stderr)
    print(f"report written to {Path(args.out) / 'report.md'} and {Path(args.out) / 'report.html'}")
    return 0
