"""The benchmarks of this suite, found in one place.

Each benchmark folder declares one `Benchmark` in its `benchmark.py` (`BENCHMARK = Benchmark(...)`);
shared code (`lmms-vr score`, `report`, `prepare`) finds benchmarks here and never imports
one by name. The folders shipped with the suite are listed in `BUILTIN` (their order is the
order of the report's sections); another benchmark joins with `register()` (e.g. a test's
toy benchmark), with no change to shared code.
"""

from __future__ import annotations

import importlib
import json
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lmms_video_reasoning.utils.core.roots import DataError

NAMESPACE = "lmms_video_reasoning"
# The benchmark folders of this suite (`<folder>/benchmark.py` declares each), in report order.
BUILTIN = ("vcr_bench", "vrbench", "cg_bench")


class ScoringAdapter:
    """One benchmark's scoring, as `lmms-vr score` and `lmms-vr report` use it.

    `score` is the benchmark's own `score_records` (the task aggregation's code path).
    `outcomes` runs the same judging / parsing per sample (through the judge cache) and
    returns JSON-ready outcomes; `metrics` recomputes every metric from records and outcomes
    with the benchmark's pure aggregation functions, so a bootstrap resample is re-aggregated
    exactly as the benchmark aggregates (macro means, F1 of means, joins per question).
    `judge` is the judge to use (the configured one by default; the report passes a reader
    of the judge cache, which never calls an endpoint).
    """

    name = ""
    judge_name = ""

    def settings(self, records: Sequence[dict]) -> Any:
        """The settings the task's aggregation would use (records and environment)."""
        return None

    def score(self, records: Sequence[dict], settings: Any) -> dict:
        raise NotImplementedError

    def needs_judge(self, records: Sequence[dict]) -> bool:
        return True

    def outcomes(self, records: Sequence[dict], settings: Any, judge: Any = None) -> list[dict] | None:
        """Per-sample outcomes, or None when they need a judge and none is configured."""
        raise NotImplementedError

    def metrics(self, records: Sequence[dict], outcomes: Sequence[dict], settings: Any) -> dict:
        raise NotImplementedError

    def unit(self, record: dict) -> str:
        """The resampling unit (and pairing key) of a record."""
        return str(record["sample_id"])

    # `lmms-vr judge-agreement`: what two judges' replies to the same request are compared on.

    def verdicts(self, tag: str, value: Any) -> list[tuple[str, str, Any]]:
        """The verdicts in one parsed judge reply (the request's `tag`, the parser's value), as
        (call type, item, label): the call type is usually the tag; `item` pairs the verdicts
        within one reply (e.g. "step 3"). Default: a plain value is one label."""
        return [(tag, "", value)] if isinstance(value, (str, int, float, bool)) else []

    def rating_scale(self, call: str) -> tuple | None:
        """The ordered ratings of a call type whose verdicts are ratings (weighted kappa), or
        None when they are categories (Cohen's kappa)."""
        return None

    def stratum(self, record: dict) -> str:
        """The stratum of a record when a calibration subset is drawn (`--calibrate`)."""
        return ""


@dataclass(frozen=True)
class ReportSpec:
    """What `lmms-vr report` needs from a benchmark besides its scoring.

    `section(runs, stats, out, n, seed)` builds the benchmark's part of the report (its
    paper tables, CI table, comparisons, plots) or returns None when no run has its tasks.
    """

    section: Callable[..., Any]
    headline: tuple[str, ...]  # metrics with bootstrap CIs
    labels: Mapping[str, str] = field(default_factory=dict)  # metric -> column label of the paper
    two_decimals: tuple[str, ...] = ()  # metrics the paper prints with two decimals ("*": all)
    unit: str = "questions"  # what the bootstrap resamples (the adapter's `unit`)
    per_task_bootstrap: bool = True  # False: the section bootstraps its joined rows itself
    judge_free: tuple[str, ...] = ()  # metrics computed without a judge verdict

    def digits(self, metric: str) -> int:
        return 2 if "*" in self.two_decimals or metric in self.two_decimals else 1

    def label(self, metric: str) -> str:
        return self.labels.get(metric, metric)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark, as shared code sees it.

    `package` is the module path its task YAMLs' hooks live under (a task belongs to the
    benchmark whose package holds its `process_results`). `reference` is the papers' tables:
    a package-data file name in `package` (JSON), or the tables themselves.
    """

    name: str
    title: str
    package: str
    scoring: ScoringAdapter
    report: ReportSpec | None = None
    reference: str | Mapping | None = None
    aliases: tuple[str, ...] = ()
    task_dirs: tuple[Path, ...] = ()  # YAML folders besides the suite's tasks/ (a benchmark defined elsewhere)
    data_module: str | None = None  # the module `lmms-vr prepare` uses (see `data()`)
    demo_tasks: tuple[str, ...] = ()  # what `lmms-vr demo` runs by default

    def data(self):
        """The benchmark's data module, imported on use. `lmms-vr prepare` needs: `SOURCE` (a
        `utils.data.DataSource`), `HUB_ANNOTATIONS`, `HUB_MEDIA_PATTERNS`, `extraction_target`,
        `records_at(root, split=...)` and `media_kinds(root, records)`."""
        if self.data_module is None:
            raise DataError(f"benchmark {self.name} has no data to prepare")
        return importlib.import_module(self.data_module)

    def reference_tables(self) -> dict:
        """The papers' tables: {"paper": {...}, "tables": {name: {..., "rows": [{..., "source"}]}}}."""
        if self.reference is None:
            return {"paper": {}, "tables": {}}
        if isinstance(self.reference, str):
            return load_reference(self.package, self.reference)
        return with_row_sources(dict(self.reference))


_lock = threading.Lock()
_registered: dict[str, Benchmark] = {}
_builtin_loaded = False


def _load_builtin() -> None:
    global _builtin_loaded
    if _builtin_loaded:
        return
    with _lock:
        if _builtin_loaded:
            return
        found = {}
        for folder in BUILTIN:
            module = importlib.import_module(f"{NAMESPACE}.{folder}.benchmark")
            found[module.BENCHMARK.name] = module.BENCHMARK
        # built-in first (report order), then anything registered before the first look-up
        _registered.update({**found, **{k: v for k, v in _registered.items() if k not in found}})
        _builtin_loaded = True


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark (replacing one of the same name); returns it."""
    _load_builtin()
    with _lock:
        _registered[benchmark.name] = benchmark
    return benchmark


def unregister(name: str) -> None:
    _load_builtin()
    with _lock:
        _registered.pop(name, None)


def benchmarks() -> list[Benchmark]:
    """Every benchmark, in report order."""
    _load_builtin()
    return list(_registered.values())


def names() -> list[str]:
    return [b.name for b in benchmarks()]


def get(name: str) -> Benchmark:
    """The benchmark called `name` (or one of its aliases)."""
    for benchmark in benchmarks():
        if name == benchmark.name or name in benchmark.aliases:
            return benchmark
    raise DataError(f"unknown benchmark {name!r}: this suite's benchmarks are {', '.join(names())}")


def owning(dotted: str) -> Benchmark | None:
    """The benchmark whose package holds the hook `dotted` (None if none)."""
    for benchmark in benchmarks():
        if dotted.startswith(benchmark.package + "."):
            return benchmark
    return None


# ---------------------------------------------------------------------------------------------
# The papers' reference tables (package data)
# ---------------------------------------------------------------------------------------------


def paper_citation(paper: Mapping) -> str:
    """"Title (Authors, year; arXiv:id)": how the report names a paper."""
    if not paper:
        return ""
    detail = "; ".join(p for p in (f"{paper.get('authors', '')}, {paper.get('year', '')}".strip(", "),
                                   f"arXiv:{paper['arxiv']}" if paper.get("arxiv") else "") if p)
    return f"{paper['title']} ({detail})" if detail else paper["title"]


def with_row_sources(data: dict) -> dict:
    """Each row of each table gets its source: the paper's title, arXiv id and the table number."""
    paper = data.get("paper") or {}
    tables = {}
    for name, table in (data.get("tables") or {}).items():
        source = {"paper": paper.get("title"), "arxiv": paper.get("arxiv"), "table": table.get("number")}
        tables[name] = {**table, "rows": [{**row, "source": source} for row in table["rows"]]}
    return {**data, "paper": paper, "citation": paper_citation(paper), "tables": tables}


_reference_cache: dict[tuple[str, str], dict] = {}


def load_reference(package: str, filename: str) -> dict:
    """The reference tables shipped as `filename` in `package` (read once per process)."""
    key = (package, filename)
    if key not in _reference_cache:
        try:
            text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        except (FileNotFoundError, ModuleNotFoundError) as error:
            raise DataError(f"{package}: reference tables {filename} not found ({error}); reinstall the package") from None
        _reference_cache[key] = with_row_sources(json.loads(text))
    return _reference_cache[key]
