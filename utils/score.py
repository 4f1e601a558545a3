"""`lmms-vr score`: score lmms-eval samples files or replay predictions, later and elsewhere.

    lmms-vr score OUTPUT_PATH                 every task with a `*_samples_<task>.jsonl` under it
    lmms-vr score FILE_samples_<task>.jsonl   one samples file (`--log_samples`, also `--predict_only`)
    lmms-vr score predictions.jsonl --task T  replay predictions (`{"task", "id", "response"}` lines)
    ... [--task T] [--out results.json]

The metrics are computed by the task's own scoring entry (`score_records`), the function its
lmms-eval aggregation calls, on the task's own records:
- a `--log_samples` file holds each sample's record under each metric name: used as is;
- a `--predict_only` file holds only the response, `doc_id` and `target`: the task's
  documents are rebuilt with its `process_docs` hook (annotations from the local root or
  the Hub), the line's `doc_id` picks the document (checked against the logged `target`),
  and the task's `process_results` hook builds the record from the raw response (`resps`),
  as lmms-eval hands it over under the tasks' `reasoning_tags: none`;
- replay predictions are matched on the documents' `sample_id`, as the `vr_replay` model does.
Judge calls go through the shared judge engine and its cache, so a second run (or a run
resumed after an interruption) costs nothing. No GPU and no model are needed.

With `--out FILE` the results are written shaped like lmms-eval's
(`{"results": {task: {"metric,none": value}}}`) with the judge accounting under `lmms_vr`,
and next to it `<FILE stem>_samples_<task>.jsonl`: each sample's record and its scored
outcome (what the judge and the parsers decided), which `lmms-vr report` bootstraps.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from lmms_video_reasoning.utils.data import DataError, read_jsonl

log = logging.getLogger("lmms_video_reasoning.score")

SAMPLES_PATTERN = re.compile(r"^(?P<prefix>.*)_samples_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
RESULTS_SUFFIX = "_results.json"
RECORD_KEY = "record"  # our samples files: the record once, not under every metric name
OUTCOME_KEY = "lmms_vr_outcome"


# ---------------------------------------------------------------------------------------------
# The task's own hooks, read from its YAML (no lmms-eval import)
# ---------------------------------------------------------------------------------------------


class _TaskYamlLoader(yaml.SafeLoader):
    """Reads `!function dotted.path` as the string `dotted.path`."""


_TaskYamlLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


@dataclass(frozen=True)
class TaskSpec:
    """What scoring needs to know about one task of this suite."""

    name: str
    benchmark: str  # "vcr_bench" | "vrbench" | "cg_bench"
    process_docs: str  # dotted path of the `process_docs` hook
    process_results: str  # dotted path of the `process_results` hook
    metrics: tuple[str, ...]
    target: str  # `doc_to_target`: the doc field lmms-eval logs as `target`


def _read_yaml(path: Path) -> dict:
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskYamlLoader) or {}
    include = config.pop("include", None)
    if include:
        base = _read_yaml(path.parent / include)
        base.update(config)
        config = base
    return config


def task_specs() -> dict[str, TaskSpec]:
    """Every task of the suite (groups left out), by name."""
    from lmms_video_reasoning.utils.lmms_plugin import tasks_dir

    specs = {}
    for path in sorted(tasks_dir().rglob("*.yaml")):
        config = _read_yaml(path)
        name = config.get("task")
        if not isinstance(name, str) or "process_results" not in config:
            continue  # a template or a group
        benchmark = config["process_results"].split(".")[1]
        metrics = tuple(entry["metric"] for entry in config.get("metric_list", []))
        specs[name] = TaskSpec(name, benchmark, config["process_docs"], config["process_results"], metrics, str(config.get("doc_to_target", "")))
    return specs


def task_spec(name: str) -> TaskSpec:
    specs = task_specs()
    if name not in specs:
        raise DataError(f"unknown task {name!r}: this suite's tasks are {', '.join(sorted(specs))}")
    return specs[name]


def _function(dotted: str) -> Callable:
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


# ---------------------------------------------------------------------------------------------
# Benchmarks: the scoring entry, per-sample outcomes, and the pure metrics over them
# ---------------------------------------------------------------------------------------------


class BenchmarkScoring:
    """One benchmark's scoring, seen from here.

    `score` is the benchmark's own `score_records` (the task aggregation's code path).
    `outcomes` runs the same judging / parsing per sample (through the judge cache) and
    returns JSON-ready outcomes; `metrics` recomputes every metric from records and outcomes
    with the benchmark's pure aggregation functions, so a bootstrap resample is re-aggregated
    exactly as the benchmark aggregates (macro means, F1 of means, joins per question).
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

    def outcomes(self, records: Sequence[dict], settings: Any) -> list[dict] | None:
        """Per-sample outcomes, or None when they need a judge and none is configured."""
        raise NotImplementedError

    def metrics(self, records: Sequence[dict], outcomes: Sequence[dict], settings: Any) -> dict:
        raise NotImplementedError

    def unit(self, record: dict) -> str:
        """The resampling unit (and pairing key) of a record."""
        return str(record["sample_id"])

    def judge(self):
        from lmms_video_reasoning.judges import get_judge

        return get_judge(self.judge_name)


class VcrBenchScoring(BenchmarkScoring):
    """VCR-Bench: `vcr_bench.hooks.score_records`; outcomes from `vcr_bench.judging.judge_records`."""

    name = judge_name = "vcr_bench"

    def settings(self, records):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.resolve_settings(None)

    def score(self, records, settings):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.score_records(records, settings)

    def outcomes(self, records, settings):
        from lmms_video_reasoning.vcr_bench import judging

        judge = self.judge()
        if judge is None:
            return None
        chain_of_thought = any(record.get("score_cot", True) for record in records)
        return judging.judge_records(list(records), judge, chain_of_thought)

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.metrics_from_outcomes(records, outcomes, settings)


class VrBenchScoring(BenchmarkScoring):
    """VRBench: `vrbench.hooks.score_records`; outcomes from `vrbench.judging.rate`."""

    name = judge_name = "vrbench"

    def settings(self, records):
        return {"protocol": records[0]["protocol"]} if records else {"protocol": "default"}

    def score(self, records, settings):
        from lmms_video_reasoning.vrbench import hooks

        return hooks.score_records(records, settings)

    def needs_judge(self, records):
        return any(record["mode"] != "mcq" for record in records)

    def outcomes(self, records, settings):
        from lmms_video_reasoning.vrbench import judging

        if not self.needs_judge(records):
            return [{"process": None, "judge_failed": False, "judged": False} for _ in records]
        judge = self.judge()
        if judge is None:
            return None
        rated = judging.rate(list(records), settings["protocol"], judge)
        return [{"process": process, "judge_failed": failed, "judged": True} for process, failed in rated]

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.vrbench import hooks

        pairs = [(outcome["process"], outcome["judge_failed"]) for outcome in outcomes]
        return hooks.metrics_from_outcomes(records, pairs, settings["protocol"], self.needs_judge(records), judge_ran=True)

    def unit(self, record):
        """The video: its ~9 questions share a story and are correlated, so the bootstrap
        resamples videos (ids are `"{video_id}_{qa_key}"` with qa keys such as `qa3`)."""
        return str(record["sample_id"]).rsplit("_", 1)[0]


class CgBenchScoring(BenchmarkScoring):
    """CG-Bench: `cg_bench.aggregate.score_records`; outcomes from `read_outcomes`, metrics from `metrics_of`.

    Records of several CG-Bench tasks of one run may be scored together: long + clue +
    grounding give `crr` and `acc_at_iou` joined per question, as `cg_bench_mcq` does.
    """

    name = judge_name = "cg_bench"

    def settings(self, records):
        from lmms_video_reasoning.cg_bench.aggregate import Settings

        return Settings.from_env()

    def score(self, records, settings):
        from lmms_video_reasoning.cg_bench.aggregate import score_records

        return score_records(records, settings)

    def needs_judge(self, records):
        return any(record["mode"] == "open" for record in records)

    def outcomes(self, records, settings):
        from lmms_video_reasoning.cg_bench.aggregate import read_outcomes

        if self.needs_judge(records) and self.judge() is None:
            return None
        return [dataclasses.asdict(outcome) for outcome in read_outcomes(records, settings)]

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, metrics_of

        return metrics_of([Outcome(**outcome) for outcome in outcomes])

    def breakdown(self, outcomes: Sequence[dict]) -> dict:
        """Metrics by duration bucket, domain and question kind (`cg_bench.aggregate.breakdown`)."""
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, breakdown

        return breakdown([Outcome(**outcome) for outcome in outcomes])

    def unit(self, record):
        return str(record["qid"])


BENCHMARKS: dict[str, BenchmarkScoring] = {b.name: b for b in (VcrBenchScoring(), VrBenchScoring(), CgBenchScoring())}


# ---------------------------------------------------------------------------------------------
# Reading samples files and predictions back into records
# ---------------------------------------------------------------------------------------------


def logged_record(row: dict, spec: TaskSpec) -> dict | None:
    """The record a `--log_samples` line holds under the task's metric names (None: predict-only)."""
    if isinstance(row.get(RECORD_KEY), dict):
        return row[RECORD_KEY]
    for name in spec.metrics:
        value = row.get(name)
        if isinstance(value, dict) and "sample_id" in value:
            return value
    return None


def task_docs(spec: TaskSpec) -> list[dict]:
    """The task's documents, built by its own `process_docs` hook (annotations needed)."""
    dataset = _function(spec.process_docs)(None)
    return [dict(doc) for doc in dataset]


def response_text(row: dict) -> str:
    """A predict-only line's response as the tasks' `process_results` receives it: the raw
    generation (`resps`). `filtered_resps` may hold it with the reasoning blocks stripped
    (lmms-eval's `--reasoning_tags`); the tasks set `reasoning_tags: none` and split the reply
    themselves (`utils.responses`)."""
    value = row.get("resps", row.get("filtered_resps"))
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else ""


def target_of(doc: dict, spec: TaskSpec) -> str | None:
    """The logged `target` of a doc (the YAML's `doc_to_target` field), None if not a plain field."""
    if spec.target in doc:
        return str(doc[spec.target])
    return None


def rebuild_records(rows: Sequence[dict], spec: TaskSpec, where: str) -> list[dict]:
    """Records for predict-only lines: the doc at `doc_id` (checked against the logged
    `target`), then the task's `process_results` on the raw response.

    lmms-eval's `doc_hash` cannot identify a doc (it hashes the request, the same for every
    line), so the doc's position and its target are what tie a line to its document.
    """
    docs = task_docs(spec)
    process_results = _function(spec.process_results)
    records = []
    for row in rows:
        doc_id = row.get("doc_id")
        if not isinstance(doc_id, int) or not 0 <= doc_id < len(docs):
            raise DataError(f"{where}: doc_id {doc_id!r} is not one of the {len(docs)} documents of task {spec.name} found now; "
                            f"point the benchmark's data root at the annotations the run used (see `lmms-vr prepare`)")
        doc = docs[doc_id]
        expected = target_of(doc, spec)
        if expected is not None and "target" in row and str(row["target"]) != expected:
            raise DataError(f"{where}: doc_id {doc_id} of task {spec.name} has target {row['target']!r} in the file but "
                            f"{expected!r} in the annotations found now: they are not the ones the run used; point the "
                            f"benchmark's data root at the same annotations (see `lmms-vr prepare`)")
        produced = process_results(doc, [response_text(row)])
        records.append(next(iter(produced.values())))
    return records


def records_from_samples(path: Path, spec: TaskSpec) -> list[dict]:
    """The task's records from a samples file: logged records, or rebuilt for predict-only lines."""
    rows = read_jsonl(path)
    if not rows:
        raise DataError(f"{path}: no samples in the file")
    logged = [logged_record(row, spec) for row in rows]
    missing = [row for row, record in zip(rows, logged) if record is None]
    if not missing:
        return logged
    if len(missing) < len(rows):
        raise DataError(f"{path}: some lines hold records and some do not; the file mixes runs")
    log.info("%s: a --predict_only file; rebuilding %d records from the task's documents", path.name, len(rows))
    return rebuild_records(rows, spec, str(path))


def stored_outcomes(path: Path) -> list[dict] | None:
    """The per-sample outcomes `lmms-vr score --out` stored in its samples file (None if absent)."""
    rows = read_jsonl(path)
    if rows and all(OUTCOME_KEY in row for row in rows):
        return [row[OUTCOME_KEY] for row in rows]
    return None


def records_from_predictions(path: Path, spec: TaskSpec) -> list[dict]:
    """Records for replay predictions (`{"task", "id", "response"}`), matched on `sample_id`."""
    from lmms_video_reasoning.utils.replay_model import load_predictions, lookup

    table = load_predictions(path)
    process_results = _function(spec.process_results)
    records, missing = [], 0
    for doc in task_docs(spec):
        response = lookup(table, spec.name, str(doc["sample_id"]))
        if response is None:
            missing += 1
            response = ""
        produced = process_results(doc, [response])  # as the replay model answers it
        records.append(next(iter(produced.values())))
    if missing == len(records):
        raise DataError(f"{path}: no prediction for any document of task {spec.name} (ids are the documents' sample_id)")
    if missing:
        log.warning("%s: %d of %d documents of %s have no prediction; scored as empty responses", path, missing, len(records), spec.name)
    return records


def tasks_in_predictions(path: Path) -> list[str]:
    return sorted({row["task"] for row in read_jsonl(path) if isinstance(row.get("task"), str)})


def samples_files(folder: Path) -> dict[str, Path]:
    """{task: newest samples file} under an lmms-eval output folder (or one of ours)."""
    found: dict[str, Path] = {}
    for name in sorted(glob.glob(str(Path(folder) / "**" / "*_samples_*.jsonl"), recursive=True), key=os.path.getmtime):
        match = SAMPLES_PATTERN.match(Path(name).name)
        if match:
            found[match["task"]] = Path(name)
    return found


def task_of_samples_file(path: Path) -> str | None:
    match = SAMPLES_PATTERN.match(Path(path).name)
    return match["task"] if match else None


def is_predictions_file(path: Path) -> bool:
    """True for replay predictions (first object has `id` and `response`, no `doc_id`)."""
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(row, dict) and "response" in row and "id" in row and "doc_id" not in row
    return False


def gather_records(path: Path, task: str | None = None) -> dict[str, tuple[list[dict], str]]:
    """{task: (records, source)} for a folder, a samples file or a predictions file."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder (give an lmms-eval --output_path folder, a samples .jsonl or a predictions .jsonl)")
    if path.is_dir():
        files = samples_files(path)
        if task is not None:
            files = {task: files[task]} if task in files else {}
        if not files:
            what = f"for task {task} " if task else ""
            raise DataError(f"{path}: no lmms-eval samples file {what}(*_samples_<task>.jsonl) under it; run lmms-eval with --log_samples")
        return {name: (records_from_samples(file, task_spec(name)), str(file)) for name, file in sorted(files.items())}
    if is_predictions_file(path):
        tasks = [task] if task else tasks_in_predictions(path)
        if not tasks:
            raise DataError(f"{path}: replay predictions without a task field; give --task")
        return {name: (records_from_predictions(path, task_spec(name)), str(path)) for name in tasks}
    name = task or task_of_samples_file(path)
    if name is None:
        raise DataError(f"{path}: not named *_samples_<task>.jsonl; give --task")
    return {name: (records_from_samples(path, task_spec(name)), str(path))}


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


@dataclass
class TaskScore:
    """A task's metrics (from its scoring entry) with the per-sample data behind them."""

    task: str
    benchmark: str
    metrics: dict
    records: list[dict]
    outcomes: list[dict] | None
    accounting: dict | None
    source: str


def _stats_delta(before: dict | None, after: dict | None) -> dict | None:
    """Judge statistics of one scoring step (the judge's counters are per process)."""
    if after is None:
        return None
    before = before or {}
    delta = {key: value - before.get(key, 0) for key, value in after.items() if isinstance(value, (int, float)) and not isinstance(value, bool)}
    delta["budget_exhausted"] = after.get("budget_exhausted", False)
    return delta


def score_task(task: str, records: Sequence[dict], source: str = "", with_outcomes: bool = True) -> TaskScore:
    """The task's metrics by its own scoring entry, then (judge cache permitting) per-sample outcomes."""
    spec = task_spec(task)
    bench = BENCHMARKS[spec.benchmark]
    records = list(records)
    settings = bench.settings(records)
    judge = bench.judge() if bench.needs_judge(records) else None
    before = judge.stats.as_dict() if judge is not None else None
    computed = bench.score(records, settings)
    metrics = {name: computed[name] for name in spec.metrics if name in computed} or computed  # the task's metrics
    accounting = None
    if judge is not None:
        accounting = {**judge.accounting(), "stats": _stats_delta(before, judge.stats.as_dict())}
    outcomes = None
    if with_outcomes and (judge is None or judge.cache is not None):
        outcomes = bench.outcomes(records, settings)
    elif with_outcomes:
        log.warning("%s: the judge cache is off, so per-sample outcomes are not recomputed (that would call the judge again); "
                    "the report will have no confidence intervals for its judge-based metrics", task)
    if outcomes is not None:
        _check_same(task, computed, bench.metrics(records, outcomes, settings))
    return TaskScore(task, spec.benchmark, metrics, records, outcomes, accounting, source)


def same_value(a: Any, b: Any) -> bool:
    """Equal metric values (NaN equals NaN; floats to 1e-9)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def _check_same(task: str, metrics: dict, recomputed: dict) -> None:
    """Warn when per-sample outcomes do not reproduce the metrics (a judge answering differently)."""
    differ = [name for name, value in recomputed.items() if name in metrics and not same_value(metrics[name], value)]
    if differ:
        log.warning("%s: per-sample outcomes give other values than the scoring for %s (a judge without cache "
                    "answering differently?); confidence intervals may not match the point estimates", task, ", ".join(differ))


def result_entry(task: str, metrics: dict) -> dict:
    """lmms-eval's per-task results shape: `{"alias": task, "metric,none": value}`."""
    return {"alias": task, **{f"{name},none": value for name, value in metrics.items()}}


def samples_path(out: Path, task: str) -> Path:
    stem = out.name[: -len(RESULTS_SUFFIX)] if out.name.endswith(RESULTS_SUFFIX) else out.stem
    return out.with_name(f"{stem}_samples_{task}.jsonl")


def write_results(out: Path, scores: Sequence[TaskScore], source: str) -> dict:
    """Write the results JSON (lmms-eval's shape) and one samples file per task beside it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "results": {s.task: result_entry(s.task, s.metrics) for s in scores},
        "n-samples": {s.task: {"original": len(s.records), "effective": len(s.records)} for s in scores},
        "config": {"model": "lmms-vr score", "source": source},
        "lmms_vr": {
            "scored_by": "lmms-vr score",
            "samples": {s.task: samples_path(out, s.task).name for s in scores},
            "sources": {s.task: s.source for s in scores},
            "judge_accounting": {s.task: s.accounting for s in scores if s.accounting is not None},
        },
    }
    for s in scores:
        with samples_path(out, s.task).open("w", encoding="utf-8") as handle:
            for index, record in enumerate(s.records):
                row = {"doc_id": index, "sample_id": record.get("sample_id"), RECORD_KEY: record}
                if s.outcomes is not None:
                    row[OUTCOME_KEY] = s.outcomes[index]
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    return results


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2f}"
    if isinstance(value, dict):
        return "(details)"
    return str(value)


def print_scores(scores: Sequence[TaskScore]) -> None:
    for s in scores:
        print(f"\n{s.task}  ({len(s.records)} samples; {s.source})")
        for name, value in s.metrics.items():
            if not isinstance(value, dict):
                print(f"  {name:<28} {_format(value)}")
        if s.accounting is not None:
            stats = s.accounting["stats"]
            cost = stats.get("cost_usd")
            print(f"  judge {s.accounting['judge'].get('model')}: {stats.get('calls', 0)} calls, {stats.get('cache_hits', 0)} cache hits, "
                  f"{stats.get('failures', 0)} failures" + ("" if cost is None else f", ${cost:.4f}"))


def main(args) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
    gathered = gather_records(Path(args.path), args.task)
    scores = [score_task(task, records, source) for task, (records, source) in gathered.items()]
    print_scores(scores)
    if args.out:
        write_results(Path(args.out), scores, str(args.path))
        print(f"\nresults written to {args.out}")
    return 0
