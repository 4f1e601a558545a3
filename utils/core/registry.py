"""The benchmark contract, and the registry: the one place shared code learns about benchmarks.

A benchmark is one folder declaring itself in `benchmark.py` (`BENCHMARK = Benchmark(...)`, each
field described in docs/internals.md, *Adding a benchmark*), plus one registration. Every consumer
(`task_yaml`, the plugin, `lmms-vr prepare`, `score`, `report`, `doctor`, the preflight, `judges.config`)
reads the declaration, never a file or function name by convention; the hooks a task's YAML names
beyond `process_docs` and `doc_to_*` come from it too (`utils.results.aggregation.DeclaredHooks`).

Registration, in report order: the folders shipped with the suite (`BUILTIN`), then
`LMMS_VR_BENCHMARKS=module[:attribute],...` (default attribute `BENCHMARK`; an installed package's
or one on `PYTHONPATH`), which reaches lmms-eval subprocesses too. A look-up by name imports only the
benchmark it names; listing them all (`benchmarks()`) imports every one.
"""

from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.columns import point
from lmms_video_reasoning.utils.core.options import values as option_values
from lmms_video_reasoning.utils.core.roots import DataError

NAMESPACE = "lmms_video_reasoning"
ROOT = Path(__file__).resolve().parents[2]  # the namespace folder: one folder per benchmark of this suite
# The benchmark folders of this suite (`<folder>/benchmark.py` declares each, named as its folder), in
# report order, with the start of each of its task, group and alias names: a look-up imports only the
# benchmark it names (tests/test_benchmark_seam.py checks the declarations against it).
BUILTIN = {"vcr_bench": "vcr_", "vrbench": "vr_bench", "cg_bench": "cg_bench"}
BENCHMARKS_ENV = "LMMS_VR_BENCHMARKS"
BENCHMARKS = settings.declare(BENCHMARKS_ENV, "text", "", "benchmarks outside this suite, as comma-separated "
                              "module[:attribute] naming a Benchmark (attribute default BENCHMARK)")


class Scored(NamedTuple):
    """One scoring of a task's records: every metric, and the per-sample outcomes they were
    computed from (JSON-ready; None when they need a judge and none is configured, or it failed)."""

    metrics: dict
    outcomes: list[dict] | None


class ScoringAdapter:
    """One benchmark's scoring, as the aggregation (`ScoreOnce`), `lmms-vr score` and `report` use it.
    `judge` (`utils.core.ask.Judge`, or None: none configured) is handed over by the caller that owns
    it and does its accounting: the configured judge, a judge cache reader, the estimate or batch pass's."""

    name = ""
    judge_name = ""

    def settings(self, records: Sequence[dict]) -> Any:
        """The settings the task's aggregation would use (records and environment)."""
        return None

    def score(self, records: Sequence[dict], settings: Any, judge: Any) -> Scored:
        """The metrics of the records and their per-sample outcomes, from one scoring with `judge`."""
        raise NotImplementedError

    def needs_judge(self, records: Sequence[dict]) -> bool:
        return True

    def outcomes(self, records: Sequence[dict], settings: Any, judge: Any) -> list[dict] | None:
        """The same judging / parsing as `score`, per sample, with another judge (the report's cache
        reader, the judge agreement's recorder); None when they need a judge and `judge` is None."""
        raise NotImplementedError

    def metrics(self, records: Sequence[dict], outcomes: Sequence[dict], settings: Any) -> dict:
        """The metrics of the records from their outcomes: the `point` of `columns`, unless overridden."""
        return point(self.columns(records, outcomes, settings))

    def columns(self, records: Sequence[dict], outcomes: Sequence[dict], settings: Any) -> Any:
        """The metrics over per-sample columns (`utils.core.columns.SampleColumns`, whose `point` is
        `metrics`); None: each bootstrap resample is re-aggregated by `metrics` (slower)."""
        return None

    def report_record(self, record: dict) -> dict:
        """All `lmms-vr report` keeps of a record once its outcome is known (what `metrics`, `columns`,
        `question`, `unit`, `settings` and `needs_judge` read), so its memory follows what it needs."""
        return record

    def question(self, record: dict) -> str:
        """The question a record answers (several records may answer one, e.g. one per mode)."""
        return str(record["sample_id"])

    def unit(self, record: dict) -> str:
        """The resampling unit (and pairing key): the question, or a coarser one (e.g. the video)."""
        return self.question(record)

    def verdicts(self, tag: str, value: Any) -> list[tuple[str, str, Any]]:
        """`lmms-vr judge-agreement`: the verdicts in one parsed judge reply as (call type, item,
        label); `item` pairs the verdicts within one reply (e.g. "step 3")."""
        return [(tag, "", value)] if isinstance(value, (str, int, float, bool)) else []

    def rating_scale(self, call: str) -> tuple | None:
        """The ordered ratings of a call type (weighted kappa), or None for categories (Cohen's)."""
        return None

    def stratum(self, record: dict) -> str:
        return ""


@dataclass(frozen=True)
class ReportSpec:
    """What `lmms-vr report` needs besides the scoring: `section(runs, stats, out, n, seed)` builds
    the benchmark's part (paper tables, CIs, plots), or None when no run has its tasks."""

    section: Callable[..., Any]
    headline: tuple[str, ...]  # metrics with bootstrap CIs (and a standard error in lmms-eval's Stderr column)
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
class JudgeDefaults:
    """A benchmark's judge as its official code sets it (`judges.config` resolves it;
    `LMMS_VR_JUDGE_*` override everything)."""

    benchmark: str  # the benchmark's registry name (names its judge in logs and accounting)
    model: str
    key_env: str
    model_env: str | None = None
    base_url: str | None = None  # None: OpenAI's
    base_url_envs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """One lmms-eval task, declared once in Python; its YAML is generated from it (`utils.core.task_yaml`).

    `metrics`: the scoring's names, in lmms-eval's order; `record_options`: what
    `build_record(doc, reply, settings=..., **record_options)` gets; `settings`: the task's values of
    the benchmark's `options` (the environment variable of each overrides it); `model_kwargs`:
    lmms-eval's `lmms_eval_specific_kwargs` (a model-named block replaces `default`: repeat every
    key); `output_type`: lmms-eval's; `about`: the YAML's first comment line(s).
    """

    name: str
    metrics: tuple[str, ...]
    process_docs: str = "process_docs"
    record_options: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    generation_kwargs: Mapping[str, Any] = field(default_factory=dict)  # lmms-eval's (e.g. until, max_new_tokens)
    model_kwargs: Mapping[str, Mapping[str, Any]] | None = None
    target: str = "answer"  # `doc_to_target`: the document field lmms-eval logs as `target`
    output_type: str = "generate_until"
    about: str = ""


@dataclass(frozen=True)
class Group:
    name: str
    tasks: tuple[str, ...]
    about: str = ""


# The hooks a declaration implies (`utils.results.aggregation.DeclaredHooks` makes them): one
# aggregation per metric, one `process_results` per task.
AGGREGATE, PROCESS_RESULTS = "aggregate_", "process_results_"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark, as shared code sees it. `binding`: the module of its lmms-eval hooks (default
    `<package>.benchmark`); `reference`: the papers' tables, or their JSON file in `package`."""

    name: str
    title: str
    package: str
    task_dirs: tuple[Path, ...]
    build_record: Callable[..., dict]
    scoring: ScoringAdapter
    tasks: tuple[Task, ...] = ()
    groups: tuple[Group, ...] = ()
    binding: str = ""
    options: tuple[settings.Setting, ...] = ()  # the score-changing settings its tasks declare (`Setting.option`)
    judge: JudgeDefaults | None = None
    report: ReportSpec | None = None
    failure_counts: tuple[str, ...] = ()
    reference: str | Mapping | None = None
    aliases: tuple[str, ...] = ()
    data_module: str | None = None  # the module `lmms-vr prepare` uses (see `data()`)
    sample_module: str | None = None  # the generated sample (see `sample()`)
    demo_tasks: tuple[str, ...] = ()  # what `lmms-vr demo` runs by default

    def __post_init__(self) -> None:
        if not self.task_dirs:
            raise DataError(f"benchmark {self.name}: declare its task folder(s) (task_dirs=(Path(__file__).parent / 'tasks',))")
        object.__setattr__(self, "task_dirs", tuple(Path(folder) for folder in self.task_dirs))
        if self.judge is not None and self.judge.benchmark != self.name:
            raise DataError(f"benchmark {self.name}: its judge is declared for {self.judge.benchmark!r}; use JudgeDefaults({self.name!r}, ...)")
        object.__setattr__(self, "binding", self.binding or f"{self.package}.benchmark")
        names = names_of(self)
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise DataError(f"benchmark {self.name}: tasks or groups declared twice: {', '.join(repeated)}")
        for group in self.groups:
            unknown = [name for name in group.tasks if name not in names]
            if unknown:
                raise DataError(f"benchmark {self.name}: group {group.name} lists undeclared tasks {unknown}; declare them in `tasks`")
        unnamed = [setting.name for setting in self.options if not setting.option]
        if unnamed:
            raise DataError(f"benchmark {self.name}: options {unnamed} name no task option; declare them with option=...")
        known = {setting.option for setting in self.options}
        for task in self.tasks:
            unknown = sorted(set(task.settings) - known)
            if unknown:
                raise DataError(f"benchmark {self.name}: task {task.name} sets {unknown}, not options of the benchmark "
                                f"({', '.join(sorted(known)) or 'none'})")

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise DataError(f"benchmark {self.name} has no task {name!r}; its tasks are {', '.join(t.name for t in self.tasks)}")

    def task_options(self, task: Task) -> dict[str, Any]:
        """Every option of the benchmark for `task` (its value, or the default): its YAML's `metadata.settings`."""
        return option_values(self.options, task.settings)

    def record(self, task: Task, doc: dict, response: Any) -> dict:
        """One sample's record of `task`: `build_record` with the task's record options and its
        settings in effect (`settings.task_settings`), which the record carries for its scoring."""
        values = settings.task_settings(self.options, task.settings)
        record = self.build_record(doc, response, settings=values, **task.record_options)
        record["settings"] = values
        return record

    def settings_of(self, records: Sequence[Mapping]) -> dict[str, Any]:
        """The options a task's records were made with (each record's `settings`, else the defaults),
        each overridden by its environment variable when set now; `settings.FROM_ENV` lists the
        variables set at the run and now. DataError when the records disagree (several runs)."""
        made = {}
        for record in records:
            recorded = record.get("settings") or {}
            key = tuple((s.option, recorded.get(s.option, s.default)) for s in self.options if not s.is_set())
            made.setdefault(key, recorded)
        if len(made) > 1:
            differing = sorted({option for key in made for option, value in key if any(dict(other)[option] != value for other in made)})
            named = ", ".join(f"{option} ({next(s.name for s in self.options if s.option == option)})" for option in differing)
            raise DataError(f"benchmark {self.name}: these records were made with different settings: {named}; score the runs "
                            "apart, or set the variable to score them all alike")
        recorded = next(iter(made.values()), {})
        values = settings.task_settings(self.options, {k: v for k, v in recorded.items() if k != settings.FROM_ENV})
        values[settings.FROM_ENV] = {**(recorded.get(settings.FROM_ENV) or {}), **values[settings.FROM_ENV]}
        return values

    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(metric for task in self.tasks for metric in task.metrics))

    def higher_is_better(self, metric: str) -> bool:
        return metric not in self.failure_counts

    def data(self):
        """The data module `lmms-vr prepare` uses: `SOURCE`, `HUB_ANNOTATIONS`, `HUB_MEDIA_PATTERNS`,
        `extraction_target`, `records_at(root, split=...)`, `media_kinds(root, records)`."""
        if self.data_module is None:
            raise DataError(f"benchmark {self.name} has no data to prepare")
        return importlib.import_module(self.data_module)

    def sample(self):
        """The generated sample's module (`write_sample`, `demo_predictions`, `oracle_judge_reply`), or None."""
        return None if self.sample_module is None else importlib.import_module(self.sample_module)

    def reference_tables(self) -> dict:
        """The papers' tables: {"paper": {...}, "citation": str, "tables": {name: {..., "rows": [{..., "source"}]}}},
        each row's source naming the paper's title, arXiv id and the table number."""
        data = _reference_file(self.package, self.reference) if isinstance(self.reference, str) else self.reference or {}
        paper, tables = data.get("paper") or {}, {}
        for name, table in (data.get("tables") or {}).items():
            source = {"paper": paper.get("title"), "arxiv": paper.get("arxiv"), "table": table.get("number")}
            tables[name] = {**table, "rows": [{**row, "source": source} for row in table["rows"]]}
        return {**data, "paper": paper, "citation": _citation(paper), "tables": tables}


def names_of(benchmark: Benchmark) -> list[str]:
    return [task.name for task in benchmark.tasks] + [group.name for group in benchmark.groups]


@functools.lru_cache(maxsize=None)
def _registered() -> dict[str, Benchmark]:
    """{name: benchmark} of the `LMMS_VR_BENCHMARKS` entries, read on the first look-up."""
    found: dict[str, Benchmark] = {}
    for target in filter(None, (entry.strip() for entry in BENCHMARKS.read().split(","))):
        source = f"{BENCHMARKS_ENV} entry {target!r}"
        module_name, _, attribute = (part.strip() for part in target.partition(":"))
        attribute = attribute or "BENCHMARK"
        try:
            benchmark = getattr(importlib.import_module(module_name), attribute)
        except ImportError as error:
            raise DataError(f"{source}: cannot import {module_name!r} ({error}); install it or put its folder on "
                            f"PYTHONPATH, or remove the entry") from None
        except AttributeError:
            raise DataError(f"{source}: {module_name!r} has no {attribute!r}; name the Benchmark as module:attribute") from None
        if not isinstance(benchmark, Benchmark):
            raise DataError(f"{source}: {target} is a {type(benchmark).__name__}, not a Benchmark (utils.core.registry.Benchmark)")
        if benchmark.name in BUILTIN:
            raise DataError(f"{source}: benchmark {benchmark.name!r} ({target}) has the name of a benchmark of this suite; rename it")
        found[benchmark.name] = benchmark
    return found


def _builtin(folder: str) -> Benchmark:
    return importlib.import_module(f"{NAMESPACE}.{folder}.benchmark").BENCHMARK


def builtin() -> list[Benchmark]:
    """The suite's own benchmarks only (what stays usable when an external declaration is broken)."""
    return [_builtin(folder) for folder in BUILTIN]


def benchmarks() -> list[Benchmark]:
    return builtin() + list(_registered().values())


def usable() -> list[Benchmark]:
    """Every benchmark, or the suite's own when an external declaration cannot be loaded."""
    try:
        return benchmarks()
    except DataError:
        return builtin()


def _owner_first(name: str, every: Callable[[], list[Benchmark]] = benchmarks) -> Iterator[Benchmark]:
    """The suite's benchmark that `name` (a benchmark, alias, task or group name) starts like, imported
    alone (`BUILTIN`), then `every()` benchmark: a look-up imports only the benchmark it needs."""
    for folder, prefix in BUILTIN.items():
        if name == folder or name.startswith(prefix):
            yield _builtin(folder)
    yield from every()


def listing(benchmarks_: Sequence[Benchmark]) -> str:
    return ", ".join(b.name + (f" (or {', '.join(b.aliases)})" if b.aliases else "") for b in benchmarks_)


def get(name: str) -> Benchmark:
    """The benchmark called `name` or one of its aliases (messages print its name)."""
    for benchmark in _owner_first(name):
        if name == benchmark.name or name in benchmark.aliases:
            return benchmark
    raise DataError(f"unknown benchmark {name!r}: this suite's benchmarks are {listing(benchmarks())}")


def owner(name: str) -> Benchmark | None:
    """The benchmark declaring the task or group `name`, or None (this suite's first, as `task_names`)."""
    for benchmark in _owner_first(name, usable):
        if name in names_of(benchmark):
            return benchmark
    return None


def task_dirs(benchmarks_: Sequence[Benchmark] | None = None) -> list[Path]:
    """The task folders of `benchmarks_`, else of every benchmark: this suite's are `<folder>/tasks`,
    named without importing its benchmarks (lmms-eval asks at every start)."""
    folders = [ROOT / folder / "tasks" for folder in BUILTIN] if benchmarks_ is None else []
    for benchmark in _registered().values() if benchmarks_ is None else benchmarks_:
        for folder in benchmark.task_dirs:
            if not folder.is_dir():
                raise DataError(f"benchmark {benchmark.name}: its task folder {folder} does not exist (Benchmark.task_dirs)")
            if folder not in folders:
                folders.append(folder)
    return folders


def task_names() -> dict[str, Benchmark]:
    """{task or group name: its benchmark}, of every benchmark."""
    found: dict[str, Benchmark] = {}
    for benchmark in usable():
        for name in names_of(benchmark):
            found.setdefault(name, benchmark)
    return found


def judge_defaults(name: str) -> JudgeDefaults:
    benchmark = get(name)
    if benchmark.judge is None:
        with_judge = [b.name for b in benchmarks() if b.judge is not None]
        raise DataError(f"benchmark {benchmark.name} declares no judge; these do: {', '.join(with_judge)}")
    return benchmark.judge


@functools.lru_cache(maxsize=None)
def _reference_file(package: str, filename: str) -> dict:
    try:
        return json.loads(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))
    except (FileNotFoundError, ModuleNotFoundError) as error:
        raise DataError(f"{package}: reference tables {filename} not found ({error}); reinstall the package") from None


def _citation(paper: Mapping) -> str:
    """"Title (Authors, year; arXiv:id)": how the report names a paper."""
    detail = "; ".join(p for p in (f"{paper.get('authors', '')}, {paper.get('year', '')}".strip(", "),
                                   f"arXiv:{paper['arxiv']}" if paper.get("arxiv") else "") if p)
    return f"{paper.get('title', '')} ({detail})" if detail else paper.get("title", "")


# The modules outside the benchmark folders that declare settings (a benchmark's binding imports its
# own); tests/test_settings.py checks that `declare_all_settings` reaches every `declare` of the package.
SUITE_MODULES = ("utils.core.registry", "utils.lmms.autoload", "utils.lmms.host", "utils.lmms.model_video",
                 "utils.lmms.proxy_clips", "utils.lmms.preflight", "utils.lmms.responses", "utils.results.aggregation",
                 "judges.batch_api", "judges.cache_lock", "judges.failure_share")


def declare_all_settings(benchmarks_: Sequence[Benchmark] | None = None) -> list[settings.Setting]:
    """Import every module that declares a setting (this suite's, then the binding of each of `benchmarks_`,
    default every benchmark); all declared settings."""
    for module in SUITE_MODULES:
        importlib.import_module(f"{NAMESPACE}.{module}")
    for benchmark in usable() if benchmarks_ is None else benchmarks_:
        importlib.import_module(benchmark.binding)
    return settings.declared()
