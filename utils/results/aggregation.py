"""lmms-eval aggregation: score a task's records once, report many metrics, lose no run.

lmms-eval calls one aggregation per metric, each with the same records: a benchmark's binding
makes them over one `ScoreOnce` (`DeclaredHooks`), which scores once per distinct list of records.
lmms-eval's Stderr column asks `ScoreOnce.stderr_function`: for the headline metrics, the standard
deviation of the report's bootstrap over the scoring's outcomes, else N/A. lmms-eval writes nothing
if an aggregation raises or the run is killed, so every task's records are saved beside the run's
output before its first judging (`<date_id>_records_<task>.jsonl`, named in
`<date_id>_run_tasks.json`; `lmms-vr score` reads them) and an aggregation never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core import files, registry, settings as suite_settings
from lmms_video_reasoning.utils.core.memo import BoundedMemo
from lmms_video_reasoning.utils.core.records import records_of
from lmms_video_reasoning.utils.lmms import host, responses
from lmms_video_reasoning.utils.results.report_runs import headline_metrics
from lmms_video_reasoning.utils.results.samples_io import RUN_TASKS_FILE, sample_line, samples_differ

Records = Sequence[dict]

log = logging.getLogger("lmms_video_reasoning.aggregation")
# The score-changing settings every task of the suite carries besides its benchmark's own
# (`Benchmark.options`): which text the judges rating reasoning see and whether a reply starts
# inside its reasoning (the record's reply fields, `utils.lmms.responses`), and the share of
# failed judgments past which judged metrics are withheld (`judges.failure_share`).
SHARED_OPTIONS = (responses.REASONING_VARIABLE, responses.PREFILLED_VARIABLE, failure_share.FAILED_SHARE_VARIABLE)
RECORDS_FILE = "records_{task}.jsonl"  # beside the run's results: `<date_id>_records_<task>.jsonl`
REPORT_RESAMPLES = 1000  # `lmms-vr report --bootstrap` default
REPORT_SEED = 0  # `lmms-vr report --seed` default
STDERR_ENV = "LMMS_VR_STDERR"
STDERR = suite_settings.declare(STDERR_ENV, "bool", True, "bootstrap standard errors of the headline metrics in lmms-eval's "
                                "Stderr column (about a second per task at full size); off: N/A")


def records_key(records: Records) -> str:
    """A content hash of a list of records (order-insensitive), once per list of the same objects
    (lmms-eval hands every metric the same records, and the run's records are saved before any is
    scored)."""
    identity = tuple(map(id, records))
    known = _keys.get(identity)
    if known is None:
        digests = sorted(hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest() for r in records)
        known = (list(records), hashlib.sha256("".join(digests).encode()).hexdigest())  # the records held: their ids stay theirs
        _keys[identity] = known
    return known[1]


_keys: BoundedMemo[tuple[list, str]] = BoundedMemo(8)  # record lists (a run's tasks) by identity


class ScoringFailed(dict):
    """The scores of a task whose scoring raised: every metric NaN (empty mapping, `get` gives NaN)."""

    def __missing__(self, metric: str) -> float:
        return math.nan


@dataclass(frozen=True)
class ScoredRecords:
    """One scoring of a task's records: its scores (`ScoringFailed` when it raised), the per-sample
    outcomes behind them (None: no judge, or it failed), the settings it used, and the standard
    errors bootstrapped from them ({resamples: {metric: stderr}}, filled once per task)."""

    records: list
    scores: dict[str, Any]
    outcomes: list | None
    settings: Any
    stderrs: dict[int, dict[str, float]] = field(default_factory=dict)


class ScoreOnce:
    """A benchmark's scoring (its `ScoringAdapter`) memoised by the records' content, metrics and
    outcomes together. `scoring`: another adapter than the registry's (tests)."""

    def __init__(self, benchmark: str, scoring: "registry.ScoringAdapter | None" = None):
        self.benchmark = benchmark
        self._scoring = scoring
        self._results: BoundedMemo[ScoredRecords] = BoundedMemo(32)  # a run's tasks, several times over
        self._lock = threading.Lock()

    def scored(self, records: Records, run: "RunFiles | None" = None) -> tuple[ScoredRecords, bool]:
        """(the scoring of `records`, whether this call scored them). The first call for some content
        saves the records beside `run`'s output, then scores them; an error is logged, never raised."""
        records = records_of(records)  # one metric's values: the records, or stand-ins for them
        key = records_key(records)
        with self._lock:
            if key in self._results:
                return self._results[key], False
            save_run_records(run)  # every task of the run, before its first judging
            saved = save_records(records, run)
            settings = None
            try:
                scoring = self._scoring if self._scoring is not None else registry.get(self.benchmark).scoring
                settings = scoring.settings(records)
                from lmms_video_reasoning.judges import scoring_judge

                judge = scoring_judge(scoring, records)  # the configured judge, when the records need one
                metrics, outcomes = scoring.score(records, settings, judge)
                if judge is not None:
                    judge.log_summary()  # the owner of the judge reports on it
                self._results[key] = ScoredRecords(records, metrics, outcomes, settings)
            except Exception as error:  # noqa: BLE001 - lmms-eval would write nothing at all
                self._results[key] = ScoredRecords(records, ScoringFailed(), None, settings)
                log.error("%s: scoring failed (%s: %s); its metrics are reported as NaN. Nothing is lost: the "
                          "records are in %s, and `lmms-vr score %s` scores them again once the cause is fixed",
                          _task_label(), type(error).__name__, error, saved or "(no --output_path: not saved)",
                          run.folder if run is not None else "<output_path>")
                log.debug("scoring traceback", exc_info=True)
            return self._results[key], True

    def aggregation(self, metric: str, after: AfterScoring | None = None) -> Callable[..., Any]:
        """The lmms-eval aggregation of one metric. lmms-eval passes its CLI namespace to a parameter
        named `args`; `after(scores, run)` then runs once with the run's `RunFiles` (e.g. to write
        the judge accounting). Its `stderr_for(bootstrap_iters)` answers lmms-eval's Stderr column."""

        def aggregate(records: Records, args: Any = None) -> Any:
            run = run_files(args)
            scored, first = self.scored(records, run)
            scores = scored.scores
            if first and after is not None and not isinstance(scores, ScoringFailed):
                try:
                    after(scores, run)
                except Exception as error:  # noqa: BLE001 - e.g. a full disk: the metrics still count
                    log.error("%s: could not write the judge accounting beside the results (%s: %s)",
                              _task_label(), type(error).__name__, error)
            return scores[metric]

        aggregate.__name__ = f"aggregate_{metric}"
        aggregate.benchmark, aggregate.metric = self.benchmark, metric
        aggregate.stderr_for = lambda bootstrap_iters: self.stderr_function(metric, bootstrap_iters)
        return aggregate

    def stderr_function(self, metric: str, bootstrap_iters: int) -> Callable[[Records], Any] | None:
        """lmms-eval's `stderr_for_metric` for `metric`: a function of the records, or None (not a
        headline metric, no bootstrap, or `LMMS_VR_STDERR` off)."""
        if bootstrap_iters <= 0 or metric not in headline_metrics(self.benchmark) or not stderr_enabled():
            return None
        resamples = min(bootstrap_iters, REPORT_RESAMPLES)

        def of_records(records: Records) -> Any:
            scored = self.scored(records)[0]  # scored by the aggregation just before: its outcomes
            with self._lock:
                if resamples not in scored.stderrs:
                    scored.stderrs[resamples] = bootstrap_stderrs(self.benchmark, scored.records, scored.outcomes,
                                                                  scored.settings, resamples)
            value = scored.stderrs[resamples].get(metric)
            return "N/A" if value is None else value

        return of_records


def stderr_enabled() -> bool:
    """`LMMS_VR_STDERR` is not off (said once). A bad value keeps them on with one error line: raising
    here, while lmms-eval aggregates, would lose the run's results."""
    try:
        on = STDERR.read()
    except suite_settings.SettingError as error:
        _say_once("bad", logging.ERROR, "%s; standard errors stay on", error)
        return True
    if not on:
        _say_once("off", logging.INFO, "%s=%s: no standard errors for this suite's metrics (lmms-eval's Stderr column "
                  "shows N/A); `lmms-vr report` computes the confidence intervals from the samples file",
                  STDERR_ENV, os.environ.get(STDERR_ENV, "").strip())
    return on


_said: set[str] = set()  # log lines already written once in this process


def _say_once(key: str, level: int, message: str, *args: Any) -> None:
    if key not in _said:
        _said.add(key)
        log.log(level, message, *args)


def bootstrap_stderrs(benchmark: str, records: list[dict], outcomes: Sequence[dict] | None, settings: Any,
                      resamples: int = REPORT_RESAMPLES) -> dict[str, float]:
    """{metric: bootstrap standard error} of a task's records from their scored outcomes, as the report's
    bootstrap draws them (`REPORT_SEED`); {} when they cannot be computed (said in the log, never raised)."""
    import numpy as np

    from lmms_video_reasoning.judges import get_judge
    from lmms_video_reasoning.utils.results import report_bootstrap

    try:
        bench = registry.get(benchmark).scoring
        if bench.needs_judge(records):
            judge = get_judge(bench.judge_name)
            if judge is None or judge.cache is None:
                log.warning("%s: judge %s, so no standard errors for its judged metrics", benchmark,
                            "not configured" if judge is None else "cache off")
                return {}
        if outcomes is None:
            log.warning("%s: the scoring gave no per-sample outcomes (no judge, or it failed), so no standard errors", benchmark)
            return {}
        sampled = report_bootstrap.Sampled(benchmark, records, list(outcomes), settings)
        values = report_bootstrap.bootstrap_values(sampled, resamples, REPORT_SEED)
        whole = sampled.metrics()  # only to see which metrics the run could not compute (NaN)
        stderrs = {}
        for metric in headline_metrics(benchmark):
            if isinstance(whole.get(metric), float) and math.isnan(whole[metric]):
                continue  # not computed (e.g. past the judge failure share): no standard error either
            finite = report_bootstrap.defined(values.get(metric, []))  # as the report: undefined when most resamples are
            if finite is not None:
                stderrs[metric] = float(np.std(finite, ddof=1))
        return stderrs
    except Exception:  # a standard error is never worth failing the run for
        log.exception("%s: bootstrap standard errors failed; lmms-eval will show N/A", benchmark)
        return {}


class DeclaredHooks:
    """A binding module's `__getattr__` (`DeclaredHooks(BENCHMARK, after)`): `aggregate_<metric>` over one
    ScoreOnce and `process_results_<task>` (`Benchmark.record` under each metric), each made once so
    that lmms-eval's `!function` gets the same object every time (the task's metrics share one scoring)."""

    def __init__(self, benchmark: "registry.Benchmark", after: AfterScoring | None = None):
        self.benchmark, self.after = benchmark, after
        self.score_once = ScoreOnce(benchmark.name)

    @functools.cache  # each hook made once; the cache holds `self`, which lives as long as its binding module anyway
    def __call__(self, name: str) -> Callable[..., Any]:
        from lmms_video_reasoning.utils.core.records import process_results

        metric = name[len(registry.AGGREGATE):] if name.startswith(registry.AGGREGATE) else None
        if metric in self.benchmark.metrics():
            return self.score_once.aggregation(metric, self.after)
        task = name[len(registry.PROCESS_RESULTS):] if name.startswith(registry.PROCESS_RESULTS) else None
        declared = {t.name: t for t in self.benchmark.tasks}
        if task in declared:
            hook = process_results(functools.partial(self.benchmark.record, declared[task]), declared[task].metrics)
            hook.__name__ = hook.__qualname__ = name
            return hook
        raise AttributeError(f"module {self.benchmark.binding!r} has no attribute {name!r} (nor does benchmark "
                             f"{self.benchmark.name} declare a task or metric it would be made for)")


def _task_label() -> str:
    from lmms_video_reasoning.utils.lmms import judge_usage

    return f"task {judge_usage.current_task()}" if judge_usage.current_task() else "a task of this suite"


def save_run_records(run: "RunFiles | None") -> None:
    """Every task's records of the run being aggregated before its first judging (a kill during the first
    task's judging must not lose the others' generations), then `<date_id>_run_tasks.json` naming each
    task's records file, count and checksum, which `lmms-vr score` checks the folder against. Never raises."""
    if run is None:
        return
    try:
        records_by_task = host.suite_records_of_run()
    except Exception as error:  # noqa: BLE001 - each task's aggregation still saves its own records
        log.warning("could not read the run's task list (%s: %s): each task's records are saved when its judging starts",
                    type(error).__name__, error)
        return
    if not records_by_task:
        return
    state = _state_of(run)
    listed = tuple(sorted((task, id(records)) for task, records in records_by_task.items()))
    if state.listed == listed:
        return  # the next task's aggregation of the same run: all saved already
    state.listed = listed
    entries = {}
    for task, records in records_by_task.items():
        path = save_records(records, run, task)
        entries[task] = ({"records_file": path.name, "records": len(records), "sha256": state.records[path][1]} if path
                         else {"records_file": None, "records": len(records), "error": "not saved (see the log)"})
    manifest = run.folder / f"{run.date_id}_{RUN_TASKS_FILE}"
    try:
        files.write_durably(manifest, json.dumps({"tasks": entries, "written": "before judging, by lmms-video-reasoning"},
                                                 indent=1).encode("utf-8"))
    except OSError as error:
        log.error("could not write %s (%s; %s): `lmms-vr score` cannot tell which tasks the run had",
                  manifest, error.strerror or error, files.free_space_text(run.folder))
        return
    state.manifest, state.all_saved = manifest, all(entry["records_file"] for entry in entries.values())


def save_records(records: Records, run: "RunFiles | None", task: str | None = None) -> Path | None:
    """Write the task's records beside the run's output, durably and read back against their checksum,
    once per run, task and content. None without an output folder or when the disk refuses (logged
    with the file and the free space, never raised)."""
    if run is None:
        return None
    from lmms_video_reasoning.utils.lmms import judge_usage

    key = records_key(records)
    task = task or judge_usage.current_task() or f"unnamed_{key[:12]}"
    state = _state_of(run)
    if (task, key) in state.saved:
        return state.saved[(task, key)]
    path = None
    try:
        path = run.path(RECORDS_FILE.format(task=task))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(sample_line(index, record) for index, record in enumerate(records)).encode("utf-8")
        digest = hashlib.sha256(data)
        files.write_durably(path, data)
        if files.sha256_of(path) != digest.hexdigest():  # what the disk gives back, not what was handed to it
            raise OSError(f"{path} does not read back as written")
    except OSError as error:
        where = path if path is not None else run.folder
        free = files.free_space_text(path.parent if path is not None else Path(run.folder))
        log.error("task %s: could not save its %d records to %s (%s; %s): this suite's copy of the generations is NOT on "
                  "disk, only lmms-eval's samples file will be; free space in the output folder (--output_path) "
                  "and keep the samples file", task, len(records), where, error.strerror or error, free)
        return None
    log.info("task %s: %d records saved to %s before scoring", task, len(records), path)
    state.records[path] = (task, digest.hexdigest())
    state.saved[(task, key)] = path
    return path


@dataclass(frozen=True)
class RunFiles:
    """Where one lmms-eval run writes (`<folder>/<date_id>_results.json`); `path(name)` is
    `<folder>/<date_id>_<name>` beside it, never another run's file."""

    folder: Path
    date_id: str

    def path(self, name: str) -> Path:
        written = _state_of(self).written
        with _runs_lock:
            for number in itertools.count(1):  # another run of the same second wrote it: keep both
                path = self.folder / (f"{self.date_id}_{name}" if number == 1 else f"{self.date_id}_{number}_{name}")
                if path in written or not path.exists():
                    written.add(path)
                    return path


@dataclass
class _RunState:
    """What this process wrote for one run (removed at exit where lmms-eval's files hold it all)."""

    written: set[Path] = field(default_factory=set)  # its files (rewritten as the run's accounting grows)
    records: dict[Path, tuple[str, str]] = field(default_factory=dict)  # its records files -> (task, sha256)
    saved: dict[tuple[str, str], Path] = field(default_factory=dict)  # (task, records key) -> its records file
    listed: tuple = ()  # (task, id of its records list)... of the run's tasks saved together
    manifest: Path | None = None  # `<date_id>_run_tasks.json`
    all_saved: bool = False  # the manifest names a records file for every task


_runs: dict[RunFiles, _RunState] = {}  # the runs of this process (an aggregation thread each at most)
_runs_lock = threading.Lock()


def _state_of(run: RunFiles) -> _RunState:
    with _runs_lock:
        return _runs.setdefault(run, _RunState())


@atexit.register
def _drop_records_lmms_eval_also_wrote() -> None:
    """At exit, a records file whose samples file lmms-eval wrote whole (`samples_differ`) is
    a copy: removed, and the run's manifest with the last of them. Otherwise it stays for `lmms-vr
    score`, with a warning saying why when there is a samples file."""
    for state in list(_runs.values()):
        kept = False
        for path, (task, _digest) in list(state.records.items()):
            prefix = path.name[: -len(RECORDS_FILE.format(task=task))]
            samples = path.parent / f"{prefix}samples_{task}.jsonl"
            why = "there is no samples file (lmms-eval did not finish, or ran without --log_samples)"
            if samples.is_file():
                try:
                    why = samples_differ(samples, path, task)
                except Exception as error:  # noqa: BLE001 - at exit, keeping the records is the safe answer
                    why = f"it could not be read back ({type(error).__name__}: {error})"
                if why:
                    log.warning("task %s: %s: %s; the records %s are kept: `lmms-vr score %s` scores them", task, samples,
                                why, path, path.parent)
            if why:
                kept = True
                continue
            with contextlib.suppress(OSError):
                path.unlink()
        if state.manifest is not None and state.all_saved and not kept:
            with contextlib.suppress(OSError):
                state.manifest.unlink()


def run_files(args: Any) -> RunFiles | None:
    """The output files of the lmms-eval run in progress (`host.run_identity`; None without `--output_path`
    or when they cannot be told)."""
    path = getattr(args, "output_path", None) if args is not None else None
    if not path:
        return None
    try:
        date_id, model_folder = host.run_identity(args)
    except Exception as error:  # noqa: BLE001 - where to write is worth a warning, never the run
        log.warning("could not tell where this run writes (%s: %s); records are not saved early", type(error).__name__, error)
        return None
    return RunFiles(Path(path) / model_folder if model_folder else Path(path), date_id)


AfterScoring = Callable[[dict[str, Any], "RunFiles | None"], None]


def judge_accounting_writer(benchmark: str, details: Callable[[dict[str, Any]], tuple[str, bool]] | None = None) -> AfterScoring:
    """An `after` hook writing the accounting of a benchmark's judge (never the key) beside the run's
    results: `<date_id>_judge_accounting_<benchmark>.json`. With `details` (the scores -> their name,
    whether they were judged): the scores, that accounting under `judge` (None when not judged) and the
    scoring settings in `<date_id>_<benchmark>_<name>_details.json`."""

    def write(scores: dict[str, Any], run: RunFiles | None) -> None:
        from lmms_video_reasoning.judges import get_judge

        name, judged = details(scores) if details is not None else (None, True)
        judge = get_judge(benchmark, quiet=True) if judged else None  # a judge-free task must not warn that no judge is set
        if run is None or (name is None and judge is None):
            return
        if name is None:
            judge.write_accounting(run.path(f"judge_accounting_{benchmark}.json"))
            return
        written = {**scores, "judge": judge.accounting() if judge is not None else None,
                   "settings": suite_settings.resolved(scoring_only=True)}
        text = json.dumps(written, indent=2, default=str, sort_keys=True)
        run.path(f"{benchmark}_{name}_details.json").write_text(text + "\n", encoding="utf-8")  # its folder holds the saved records

    return write
