"""`lmms-vr score`: score lmms-eval samples files or replay predictions, later and elsewhere.

    lmms-vr score OUTPUT_PATH                 every run under it (one `<date>_samples_<task>.jsonl` prefix per run)
    lmms-vr score FILE_samples_<task>.jsonl   one samples file (`--log_samples`, also `--predict_only`)
    lmms-vr score predictions.jsonl --task T  replay predictions (`{"task", "id", "response"}` lines)
    ... [--task T] [--out results.json]

The metrics are computed by the task's own scoring entry (its benchmark's `scoring.score`, what
its lmms-eval aggregation calls), on the task's own records, with the per-sample outcomes that
one scoring computed them from:
- a `--log_samples` file holds each sample's record under each metric name: used as is;
- a `--predict_only` file holds only the response, `doc_id` and `target`: the task's
  documents are rebuilt with its `process_docs` hook (annotations from the local root or
  the Hub), the line's `doc_id` picks the document (checked against the logged `target`),
  and the benchmark's declared record builder (`Benchmark.build_record`, with the options of
  the task's `process_results` hook) builds the record from the raw response (`resps`), as
  lmms-eval hands it over under the tasks' `reasoning_tags: none`;
- replay predictions are matched on the documents' `sample_id`, as the `vr_replay` model does.
Judge calls go through the shared judge engine and its cache, so a second run (or a run
resumed after an interruption) costs nothing. No GPU and no model are needed.

Nothing is left out silently: every run in a folder is scored (samples files of tasks that
are not this suite's are listed as not scored); a row repeated verbatim is scored once and
counted, two different rows for one document are refused; the samples are compared with the
task's documents (when they can be loaded) and the documents without a sample, the samples
of no document and the replay predictions matching no document are printed and recorded
under `lmms_vr.coverage`.

With `--out FILE` the results are written shaped like lmms-eval's
(`{"results": {task: {"metric,none": value}}}`) with the judge accounting under `lmms_vr`,
and next to it `<FILE stem>_samples_<task>.jsonl`: each sample's record and its scored
outcome (what the judge and the parsers decided), which `lmms-vr report` bootstraps.
Several runs give one results file each, `<FILE stem>_<run>.json`.

A run whose lmms-eval aggregation failed has no samples file: the records its tasks saved
before judging (`<date_id>_records_<task>.jsonl`) are scored instead. Exit status 3: the judge
had an outage (circuit breaker open), so the metrics it could not judge are not computed; run
the same command again once it works (nothing failed was cached); after an offline batch flow
(--batch-export / --batch-import) a configured judge sends nothing that flow exported, so a
judgment it failed is counted as failed and printed as NOT SENT with how to judge it
(`--batch-export`, `--judge-online`), not an outage (docs/judges.md). Exit status 4: the judge cache
could not be read or written (the metrics stand; a rerun would pay again for what was not stored).
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import importlib
import json
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.utils.core import files, registry
from lmms_video_reasoning.utils.core.roots import DataError, read_jsonl

log = logging.getLogger("lmms_video_reasoning.score")

SAMPLES_PATTERN = re.compile(r"^(?P<prefix>.*)_samples_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
# Written by the tasks' aggregation before judging (`utils.aggregation.save_records`): a run
# whose aggregation failed, so that lmms-eval wrote no samples file, is recovered from these.
RECORDS_PATTERN = re.compile(r"^(?P<prefix>.*)_records_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
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
    benchmark: str  # the registry name of the benchmark whose package holds the hooks
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
    """Every task of the registered benchmarks' task folders (groups left out), by name. The YAMLs are parsed once per process
    (again only when a file, a folder or the registered benchmarks change)."""
    paths = [path for folder in registry.task_dirs() for path in sorted(Path(folder).rglob("*.yaml"))]
    key = (tuple((b.name, b.package) for b in registry.benchmarks()), tuple((str(p), _stamp(p)) for p in paths))
    cached = _specs_cache.get("specs")
    if cached is not None and cached[0] == key:
        return dict(cached[1])
    specs = {}
    for path in paths:
        config = _read_yaml(path)
        name = config.get("task")
        if not isinstance(name, str) or "process_results" not in config:
            continue  # a template or a group
        owner = registry.owning(config["process_results"])
        if owner is None:
            continue  # hooks of no registered benchmark
        benchmark = owner.name
        metrics = tuple(entry["metric"] for entry in config.get("metric_list", []))
        specs[name] = TaskSpec(name, benchmark, config["process_docs"], config["process_results"], metrics, str(config.get("doc_to_target", "")))
    _specs_cache["specs"] = (key, specs)
    return dict(specs)


_specs_cache: dict[str, tuple] = {}


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


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
    from lmms_video_reasoning.utils.lmms import preflight

    with preflight.off():  # scoring needs the documents, not the videos or a reachable judge
        dataset = _function(spec.process_docs)(None)
    return [dict(doc) for doc in dataset]


def response_text(row: dict) -> str:
    """A predict-only line's response as the tasks' `process_results` receives it: the raw
    generation (`resps`). `filtered_resps` may hold it with the reasoning blocks stripped
    (lmms-eval's `--reasoning_tags`); the tasks set `reasoning_tags: none` and split the reply
    themselves (`utils/lmms/responses.py`)."""
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
    `target`), then the task's record builder (`record_builder`) on the raw response.

    lmms-eval's `doc_hash` cannot identify a doc (it hashes the request, the same for every
    line), so the doc's position and its target are what tie a line to its document.
    """
    docs = task_docs(spec)
    build_record = record_builder(spec)
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
        records.append(build_record(doc, response_text(row)))
    return records


def record_builder(spec: TaskSpec) -> Callable[[dict, str], dict]:
    """The record of one (document, raw reply) of the task: the benchmark's declared
    `build_record` with the options of the task's `process_results` hook (`record_options`,
    `utils.core.records.process_results`), as lmms-eval's run built it."""
    options = getattr(_function(spec.process_results), "record_options", {})
    build = registry.get(spec.benchmark).build_record
    return lambda doc, response: build(doc, response, **options)


@dataclass
class Coverage:
    """Which of the task's documents a file's samples cover: nothing is left out silently.

    `documents` is None when the task's documents could not be loaded (then only
    duplicates are checked, and `note` says why).
    """

    samples: int  # rows (or predictions) read for the task
    scored: int = 0
    documents: int | None = None
    duplicates_dropped: int = 0  # rows repeated verbatim, scored once
    missing: list[str] = dataclasses.field(default_factory=list)  # documents with no sample (or prediction)
    unknown: list[str] = dataclasses.field(default_factory=list)  # samples of no current document
    unmatched_predictions: list[str] = dataclasses.field(default_factory=list)  # replay ids matching no document
    missing_scored_as_empty: bool = False  # replay: documents without a prediction scored as empty responses
    note: str = ""

    def problems(self) -> list[str]:
        """One line per difference between the samples and the task's documents."""
        lines = []
        if self.duplicates_dropped:
            lines.append(f"{self.duplicates_dropped} duplicated rows scored once")
        if self.missing:
            what = "scored as empty responses" if self.missing_scored_as_empty else "not scored"
            lines.append(f"{len(self.missing)} of {self.documents} documents have no sample, {what} ({_some(self.missing)})")
        if self.unknown:
            lines.append(f"{len(self.unknown)} samples match no document of the task found now ({_some(self.unknown)})")
        if self.unmatched_predictions:
            lines.append(f"{len(self.unmatched_predictions)} predictions match no document and were not scored "
                         f"({_some(self.unmatched_predictions)})")
        if self.note:
            lines.append(self.note)
        return lines

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "problems": self.problems()}


def _some(ids: Sequence[str], shown: int = 5) -> str:
    return "ids " + ", ".join(map(repr, ids[:shown])) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def read_samples(path: Path, spec: TaskSpec) -> tuple[list[dict], Coverage]:
    """The task's records from a samples file (logged, or rebuilt for predict-only lines) and
    what they cover; verbatim repeated rows are scored once, conflicting ones refused."""
    records, coverage, _outcomes = read_samples_with_outcomes(path, spec)
    return records, coverage


def read_samples_with_outcomes(path: Path, spec: TaskSpec) -> tuple[list[dict], Coverage, list[dict] | None]:
    """`read_samples`, and the per-sample outcomes `lmms-vr score --out` stored beside the
    records (None when not every sample has one), in one pass over the file.

    The file is streamed and each line keeps only what scoring reads: its record once (an
    lmms-eval line holds it under every metric name: the first copy is parsed, the others are
    not), its stored outcome; a predict-only line keeps its `doc_id`, `target` and response.
    A row repeated verbatim (same `doc_id`, same text) is dropped and counted; two different
    rows for one `doc_id` are an error, as are two different records for one `sample_id`."""
    kept: dict[Any, int] = {}  # doc_id -> the offset of its line (read again only when the doc_id repeats)
    first_copy: list[str] = []  # the metric name whose copy of the record comes first in this file's lines
    logged: list[dict | None] = []
    outcomes: list[Any] = []
    predict_only: list[dict] = []
    rows = dropped = 0
    for number, offset, raw in _lines(path):
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        rows += 1
        fields = _row_fields(text, spec, f"{path}:{number}", first_copy)
        identity = fields.get("doc_id")
        if isinstance(identity, int):
            if identity in kept:
                if not _same_row(path, kept[identity], offset):
                    raise DataError(f"{path}: doc_id {identity} appears twice with different content (row {number}); "
                                    "the file mixes runs or was edited: keep one row per document")
                dropped += 1
                continue
            kept[identity] = offset
        record = logged_record(fields, spec)
        logged.append(record)
        outcomes.append(fields.get(OUTCOME_KEY, _NO_OUTCOME))
        if record is None:
            predict_only.append({key: fields[key] for key in ("doc_id", "target", "resps", "filtered_resps") if key in fields})
    if not rows:
        raise DataError(f"{path}: the file is empty (no samples in it): lmms-eval wrote no sample of task {spec.name} "
                        "there; run the task again with --log_samples, or move the file away to score the rest")
    coverage = Coverage(samples=rows, duplicates_dropped=dropped)
    if not predict_only:
        records, kept_at = _unique_records(logged, path)
        coverage.duplicates_dropped += len(logged) - len(records)
        stored = [outcomes[i] for i in kept_at]
        return records, coverage, None if any(o is _NO_OUTCOME for o in stored) else stored
    if len(predict_only) < len(logged):
        raise DataError(f"{path}: some lines hold records and some do not; the file mixes runs")
    log.info("%s: a --predict_only file; rebuilding %d records from the task's documents", path.name, len(predict_only))
    return rebuild_records(predict_only, spec, str(path)), coverage, None


_NO_OUTCOME = object()
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _lines(path: Path):
    """(line number, byte offset, raw line) of a file, lines ended by "\\n" only (a lone "\\r" is
    JSON whitespace inside a record)."""
    with Path(path).open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, 1):
            yield number, offset, raw
            offset += len(raw)


def _row_fields(text: str, spec: TaskSpec, where: str, first_copy: list[str]) -> dict:
    """The top-level fields of one samples line that scoring reads; a line that is not a JSON
    object is an error naming the file and line."""
    fields = _up_to_record(text, spec, first_copy)
    if fields is not None:
        return fields
    try:
        row = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object")
    return row


def _up_to_record(text: str, spec: TaskSpec, first_copy: list[str]) -> dict | None:
    """An lmms-eval line (the record under each of the task's metric names) parsed only up to
    the record's first copy: the fields before it and the record. None when the line has
    another shape (ours, with the record once; predict-only; other separators): it is then
    parsed whole. The fields before the copy, closed with "}", must parse as an object: the
    copy's key is then a key of the line itself, not of a nested object. `first_copy` holds the
    name whose copy came first on an earlier line (lines of one file share their key order)."""
    start = text.find(f'"{first_copy[0]}": ') if first_copy else -1
    if start <= 0:
        starts = [(at, name) for name in spec.metrics if (at := text.find(f'"{name}": ')) > 0]
        if not starts:
            return None
        start, name = min(starts)
        first_copy[:] = [name]
    head = text[:start].rstrip()
    if not head.endswith(",") or not text[-8:].rstrip().endswith("}") or f'"{RECORD_KEY}": ' in head:
        return None
    try:
        fields = json.loads(head[:-1] + "}")
        key, position = _DECODER.raw_decode(text, start)
        colon = _SPACE.match(text, position).end()
        value, _end = _DECODER.raw_decode(text, _SPACE.match(text, colon + 1).end())
    except ValueError:
        return None
    if not (isinstance(fields, dict) and text[colon:colon + 1] == ":" and isinstance(value, dict) and "sample_id" in value):
        return None
    fields[key] = value
    return fields


def _same_row(path: Path, first_offset: int, offset: int) -> bool:
    """Two lines of the file at these offsets are the same row: the same text, or the same JSON
    (key order aside)."""
    with Path(path).open("rb") as handle:
        lines = []
        for start in (first_offset, offset):
            handle.seek(start)
            lines.append(handle.readline().rstrip(b"\r\n"))
    if lines[0] == lines[1]:
        return True
    rows = [json.dumps(json.loads(line.decode("utf-8", errors="replace")), sort_keys=True, default=str) for line in lines]
    return rows[0] == rows[1]


def _unique_records(records: list[dict], path: Path) -> tuple[list[dict], list[int]]:
    """(records with verbatim repeats of a sample_id dropped, the index of each one kept);
    different records for one sample_id are an error."""
    seen: dict[str, int] = {}
    unique, kept_at = [], []
    for index, record in enumerate(records):
        sample_id = str(record.get("sample_id"))
        if sample_id in seen:
            first = records[seen[sample_id]]
            if first is not record and json.dumps(first, sort_keys=True, default=str) != json.dumps(record, sort_keys=True, default=str):
                raise DataError(f"{path}: sample {sample_id!r} appears twice with different records; the file mixes runs "
                                "or was edited: keep one row per document")
            continue
        seen[sample_id] = index
        unique.append(record)
        kept_at.append(index)
    return unique, kept_at


def records_from_samples(path: Path, spec: TaskSpec) -> list[dict]:
    """The task's records from a samples file: logged records, or rebuilt for predict-only lines."""
    return read_samples(path, spec)[0]


def check_coverage(records: Sequence[dict], spec: TaskSpec, coverage: Coverage) -> Coverage:
    """Compare the records' sample ids with the task's documents (when they can be loaded now)."""
    try:
        docs = task_docs(spec)
    except Exception as error:  # noqa: BLE001 - no annotations here: coverage is unknown, said so
        coverage.note = f"the task's documents could not be loaded ({type(error).__name__}: {error}); coverage not checked"
        return coverage
    doc_ids = [str(doc["sample_id"]) for doc in docs]
    present = {str(record.get("sample_id")) for record in records}
    known = set(doc_ids)
    coverage.documents = len(doc_ids)
    coverage.missing = [sample_id for sample_id in doc_ids if sample_id not in present]
    coverage.unknown = sorted(present - known)
    return coverage


def read_predictions(path: Path, spec: TaskSpec) -> tuple[list[dict], Coverage]:
    """Records for replay predictions (`{"task", "id", "response"}`), matched on `sample_id`.

    A document with no prediction is scored as an empty response (counted in the coverage);
    predictions that match no document are listed in the coverage.
    """
    from lmms_video_reasoning.utils.lmms.replay_model import load_predictions, lookup, unmatched

    table = load_predictions(path)
    build_record = record_builder(spec)
    docs = task_docs(spec)
    records, missing = [], []
    for doc in docs:
        response = lookup(table, spec.name, str(doc["sample_id"]))
        if response is None:
            missing.append(str(doc["sample_id"]))
            response = ""
        records.append(build_record(doc, response))  # as the replay model answers it
    if len(missing) == len(records):
        raise DataError(f"{path}: no prediction for any document of task {spec.name} (ids are the documents' sample_id)")
    ids = {str(doc["sample_id"]) for doc in docs}
    coverage = Coverage(samples=len(records) - len(missing), documents=len(docs), missing=missing, missing_scored_as_empty=True,
                        unmatched_predictions=[i for i in unmatched(table, spec.name, ids) if (spec.name, i) in table])
    return records, coverage


def tasks_in_predictions(path: Path) -> list[str]:
    return sorted({row["task"] for row in read_jsonl(path) if isinstance(row.get("task"), str)})


def samples_runs(folder: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """({run: {task: samples file}}, skipped files with the reason) under an lmms-eval output folder.

    A run is one `<folder>/<date_id>_samples_<task>.jsonl` prefix: lmms-eval names every file
    of a run with the same date under the model's folder, so two models or two dates in one
    output path are two runs.
    """
    folder = Path(folder)
    runs: dict[str, dict[str, Path]] = {}
    skipped = []
    specs = task_specs()
    for name in sorted(glob.glob(str(folder / "**" / "*_samples_*.jsonl"), recursive=True)):
        path = Path(name)
        match = SAMPLES_PATTERN.match(path.name)
        if not match:
            skipped.append(f"{path}: not named <run>_samples_<task>.jsonl")
            continue
        if match["task"] not in specs:
            skipped.append(f"{path}: task {match['task']!r} is not a task of this suite")
            continue
        run = str(path.parent.relative_to(folder) / match["prefix"])
        runs.setdefault(run, {})[match["task"]] = path
    # The records saved before judging stand in for the samples files lmms-eval did not write.
    for name in sorted(glob.glob(str(folder / "**" / "*_records_*.jsonl"), recursive=True)):
        path = Path(name)
        match = RECORDS_PATTERN.match(path.name)
        if not match or match["task"] not in specs:
            continue
        run = str(path.parent.relative_to(folder) / match["prefix"])
        samples = runs.get(run, {}).get(match["task"])
        if samples is None:
            log.info("%s: no samples file for task %s of run %s; scoring the records saved before its judging", path,
                     match["task"], run)
            runs.setdefault(run, {})[match["task"]] = path
            continue
        # Records left beside a samples file: lmms-eval's copy was not verified whole at exit.
        why = samples_differ(samples, path, match["task"])
        if why:
            log.warning("%s: %s; scoring the records saved before its judging (%s) instead", samples, why, path.name)
            runs[run][match["task"]] = path
    return runs, skipped


RUN_TASKS_SUFFIX = "_run_tasks.json"  # `aggregation.save_run_records`: every task of a run, before judging


def missing_tasks(folder: Path, runs: dict[str, dict[str, Path]]) -> list[str]:
    """What is missing or damaged in the runs of an output folder, one line each: a task of this
    suite that a run had (its `<date_id>_run_tasks.json`, written before judging, or the `configs`
    of lmms-eval's `<date_id>_results.json`) with neither a samples file nor a records file, and a
    records file that no longer matches the checksum written with it."""
    folder = Path(folder)
    specs = task_specs()
    problems = []
    for suffix, tasks_in in ((RUN_TASKS_SUFFIX, lambda data: data.get("tasks")), (RESULTS_SUFFIX, lambda data: data.get("configs"))):
        for name in sorted(glob.glob(str(folder / "**" / f"*{suffix}"), recursive=True)):
            path = Path(name)
            run = str(path.parent.relative_to(folder) / path.name[: -len(suffix)])
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                tasks = tasks_in(data) if isinstance(data, dict) else None
            except (OSError, ValueError):
                continue  # not a file of a run (or not readable): nothing it says can be checked
            for task, entry in (tasks or {}).items() if isinstance(tasks, dict) else ():
                found = runs.get(run, {}).get(task)
                if task not in specs:
                    continue
                if found is None:
                    line = (f"task {task} of run {run} ({path.name}): neither its samples file nor the records saved before "
                            f"judging are in {path.parent}")
                    if line not in problems:
                        problems.append(line)
                elif suffix == RUN_TASKS_SUFFIX and isinstance(entry, dict) and found.name == entry.get("records_file") \
                        and entry.get("sha256") and files.sha256_of(found) != entry["sha256"]:
                    problems.append(f"task {task} of run {run}: {found} was changed since it was written before judging "
                                    f"(its checksum differs from {path.name}): scored as it is now")
    return problems


def samples_differ(samples: Path, records: Path, task: str) -> str | None:
    """Why lmms-eval's samples file of `task` is not a whole copy of the records this suite saved
    (`<date_id>_records_<task>.jsonl`), or None when it is: every line a JSON object, as many
    samples as records, every record's sample present. The one test of both the removal of the
    records at the end of a run (`aggregation`) and of which file `lmms-vr score` reads."""
    spec = task_spec(task)
    try:
        kept, _ = read_samples(records, spec)
    except (OSError, DataError) as error:
        return f"the records file {records} cannot be read back ({error})"
    try:
        size = samples.stat().st_size
    except OSError as error:
        return f"lmms-eval's samples file cannot be read ({error.strerror or error})"
    if size == 0:
        return f"lmms-eval's samples file is empty (0 bytes; 0 of {len(kept)} samples)"
    try:
        got, _ = read_samples(samples, spec)
    except (OSError, DataError) as error:
        whole = _whole_lines(samples)
        return f"lmms-eval's samples file is truncated or damaged: {whole} of {len(kept)} samples whole ({size} bytes; {error})"
    if len(got) != len(kept):
        return f"lmms-eval's samples file is truncated: {len(got)} of {len(kept)} samples ({size} bytes)"
    missing = collections.Counter(str(r.get("sample_id")) for r in kept) - collections.Counter(str(r.get("sample_id")) for r in got)
    if missing:
        return (f"lmms-eval's samples file lacks {sum(missing.values())} of the {len(kept)} records' samples "
                f"({_some(sorted(missing))})")
    return None


def _whole_lines(path: Path) -> int:
    """Lines of a file that are whole JSON objects."""
    whole = 0
    for _number, _offset, raw in _lines(path):
        try:
            whole += isinstance(json.loads(raw), dict)
        except ValueError:
            pass
    return whole


def task_of_samples_file(path: Path) -> str | None:
    match = SAMPLES_PATTERN.match(Path(path).name) or RECORDS_PATTERN.match(Path(path).name)
    return match["task"] if match else None


def is_predictions_file(path: Path) -> bool:
    """True for replay predictions (first object has `id` and `response`, no `doc_id`)."""
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(row, dict) and "response" in row and "id" in row and "doc_id" not in row
    return False


def _has_content(path: Path) -> bool:
    """The file holds a non-blank line."""
    with Path(path).open("rb") as handle:
        return any(line.strip() for line in handle)


@dataclass
class Gathered:
    """One task of one run, read back into records."""

    run: str
    task: str
    records: list[dict]
    source: str
    coverage: Coverage


def _from_samples(run: str, task: str, path: Path) -> Gathered:
    spec = task_spec(task)
    records, coverage = read_samples(path, spec)
    return Gathered(run, task, records, str(path), check_coverage(records, spec, coverage))


def gather_records(path: Path, task: str | None = None) -> tuple[list[Gathered], list[str], list[str]]:
    """(every run and task in a folder, a samples file or a predictions file, read back into
    records; the files found but not scored, with the reason; the tasks a run of the folder had
    that are missing or damaged, `missing_tasks`)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder (give an lmms-eval --output_path folder, a samples .jsonl or a predictions .jsonl)")
    if path.is_dir():
        runs, skipped = samples_runs(path)
        missing = missing_tasks(path, runs)
        if task is not None:
            runs = {run: {task: found[task]} for run, found in runs.items() if task in found}
            missing = [line for line in missing if line.startswith(f"task {task} ")]
        if not runs:
            what = f"for task {task} " if task else ""
            found = "".join(f"; found but not scored: {line}" for line in skipped[:5])
            lost = "".join(f"; missing: {line}" for line in missing)
            raise DataError(f"{path}: no lmms-eval samples file {what}of this suite's tasks (*_samples_<task>.jsonl) under it{found}{lost}; "
                            "run lmms-eval with --log_samples and give its --output_path folder")
        return [_from_samples(run, name, file) for run, found in sorted(runs.items()) for name, file in sorted(found.items())], skipped, missing
    if not _has_content(path):
        raise DataError(f"{path}: the file is empty (no JSON line in it): nothing to score; give the samples file an lmms-eval "
                        "run wrote with --log_samples (<date>_samples_<task>.jsonl), its --output_path folder, or a replay "
                        "predictions .jsonl")
    if is_predictions_file(path):
        tasks = [task] if task else tasks_in_predictions(path)
        if not tasks:
            raise DataError(f"{path}: replay predictions without a task field; give --task")
        gathered = []
        for name in tasks:
            records, coverage = read_predictions(path, task_spec(name))
            gathered.append(Gathered(path.stem, name, records, str(path), coverage))
        return gathered, [], []
    name = task or task_of_samples_file(path)
    if name is None and path.name.endswith(RESULTS_SUFFIX):
        raise DataError(f"{path}: an lmms-eval results file, not a samples file: give its folder ({path.parent}), where "
                        "--log_samples wrote the *_samples_<task>.jsonl files")
    if name is None:
        raise DataError(f"{path}: not named *_samples_<task>.jsonl and not replay predictions "
                        "({\"task\", \"id\", \"response\"} lines); name the task with --task")
    match = SAMPLES_PATTERN.match(path.name) or RECORDS_PATTERN.match(path.name)
    return [_from_samples(match["prefix"] if match else path.stem, name, path)], [], []


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
    run: str = ""
    coverage: Coverage | None = None


def _stats_delta(before: dict | None, after: dict | None) -> dict | None:
    """Judge statistics of one scoring step (the judge's counters are per process)."""
    if after is None:
        return None
    before = before or {}
    delta = {key: value - before.get(key, 0) for key, value in after.items() if isinstance(value, (int, float)) and not isinstance(value, bool)}
    delta["budget_exhausted"] = after.get("budget_exhausted", False)
    # judging items whose code failed before or between requests (e.g. the media of a request not found)
    delta["items_failed"] = (((after.get("by_tag") or {}).get("(map)") or {}).get("failures", 0)
                             - (((before.get("by_tag") or {}).get("(map)") or {}).get("failures", 0)))
    answered = {model: count - (before.get("answered_by") or {}).get(model, 0) for model, count in (after.get("answered_by") or {}).items()}
    delta["answered_by"] = {model: count for model, count in answered.items() if count}
    reasons = {reason: count - (before.get("failure_reasons") or {}).get(reason, 0)
               for reason, count in (after.get("failure_reasons") or {}).items()}
    delta["failure_reasons"] = {reason: count for reason, count in reasons.items() if count}
    delta["outage"] = after.get("outage")
    delta["snapshots"] = after.get("snapshots")  # of the judge in this process (the cache may mix snapshots)
    return delta


def unbuilt_items(benchmark: str, items: int) -> tuple[str, str]:
    """(a sentence on `items` judging items of `benchmark` whose request could not be built, a few
    words for a table cell). Such a request holds the benchmark's media (e.g. CG-Bench's clue
    frames): when the data root's variable is not set, that is what is missing."""
    import os

    root_env = registry.get(benchmark).data().SOURCE.root_env
    unset = not os.environ.get(root_env, "").strip()
    return (f"{items} judge items could not be rebuilt (see the log; e.g. media not found" + (f": {root_env} is not set" if unset else "") + ")",
            f"needs {root_env}" if unset else "judge items not rebuilt")


def score_task(task: str, records: Sequence[dict], source: str = "", run: str = "",
               coverage: Coverage | None = None) -> TaskScore:
    """The task's metrics by its own scoring entry, with the per-sample outcomes that scoring
    computed them from (None when they need a judge and none is configured)."""
    spec = task_spec(task)
    bench = registry.get(spec.benchmark).scoring
    records = list(records)
    settings = bench.settings(records)
    judge = get_judge(bench.judge_name) if bench.needs_judge(records) else None
    before = judge.stats.as_dict() if judge is not None else None
    computed, outcomes = bench.score(records, settings)
    metrics = {name: computed[name] for name in spec.metrics if name in computed} or computed  # the task's metrics
    accounting = None
    if judge is not None:
        accounting = {**judge.accounting(), "stats": _stats_delta(before, judge.stats.as_dict())}
    if coverage is not None:
        coverage.scored = len(records)
        for line in coverage.problems():
            log.warning("%s (%s): %s", task, source, line)
    return TaskScore(task, spec.benchmark, metrics, records, outcomes, accounting, source, run, coverage)


def same_value(a: Any, b: Any) -> bool:
    """Equal metric values (NaN equals NaN; floats to 1e-9)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def result_entry(task: str, metrics: dict) -> dict:
    """lmms-eval's per-task results shape: `{"alias": task, "metric,none": value}`."""
    return {"alias": task, **{f"{name},none": value for name, value in metrics.items()}}


def samples_path(out: Path, task: str) -> Path:
    stem = out.name[: -len(RESULTS_SUFFIX)] if out.name.endswith(RESULTS_SUFFIX) else out.stem
    return out.with_name(f"{stem}_samples_{task}.jsonl")


def write_results(out: Path, scores: Sequence[TaskScore], source: str) -> dict:
    """Write the results JSON (lmms-eval's shape) and one samples file per task beside it (one run)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "results": {s.task: result_entry(s.task, s.metrics) for s in scores},
        "n-samples": {s.task: {"original": _original(s), "effective": len(s.records)} for s in scores},
        "config": {"model": "lmms-vr score", "source": source},
        "lmms_vr": {
            "scored_by": "lmms-vr score",
            "run": next((s.run for s in scores if s.run), ""),
            "samples": {s.task: samples_path(out, s.task).name for s in scores},
            "sources": {s.task: s.source for s in scores},
            "coverage": {s.task: s.coverage.as_dict() for s in scores if s.coverage is not None},
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


def _original(score: TaskScore) -> int:
    coverage = score.coverage
    return coverage.documents if coverage is not None and coverage.documents is not None else len(score.records)


def results_paths(out: Path, runs: Sequence[str]) -> dict[str, Path]:
    """{run: results file}: `out` itself for one run, `<out stem>_<run>.json` beside it for several."""
    out = Path(out)
    if len(runs) <= 1:
        return {run: out for run in runs}
    stem = out.name[: -len(RESULTS_SUFFIX)] if out.name.endswith(RESULTS_SUFFIX) else out.stem
    suffix = RESULTS_SUFFIX if out.name.endswith(RESULTS_SUFFIX) else out.suffix or ".json"
    return {run: out.with_name(f"{stem}_{re.sub(r'[^A-Za-z0-9_.-]+', '__', run)}{suffix}") for run in runs}


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2f}"
    if isinstance(value, dict):
        return "(details)"
    return str(value)


def print_scores(scores: Sequence[TaskScore]) -> None:
    for s in scores:
        run = f"run {s.run}, " if s.run else ""
        print(f"\n{s.task}  ({len(s.records)} samples; {run}{s.source})")
        for name, value in s.metrics.items():
            if not isinstance(value, dict):
                print(f"  {name:<28} {_format(value)}")
        if s.accounting is not None:
            stats = s.accounting["stats"]
            cost = stats.get("cost_usd")
            answered = ", ".join(stats.get("answered_by") or {}) or "none"
            print(f"  judge {s.accounting['judge'].get('model')} (answered by {answered}): {stats.get('calls', 0)} calls, "
                  f"{stats.get('cache_hits', 0)} cache hits, {stats.get('failures', 0)} failures"
                  + (f", {stats['not_computed']} with no cached verdict (not sent: counted as failed)" if stats.get("not_computed") else "")
                  + ("" if cost is None else f", ${cost:.4f}"))
            if stats.get("cache_errors"):
                print(f"  JUDGE CACHE ERRORS: {stats['cache_errors']} reads/writes of {(s.accounting.get('cache') or {}).get('path')} "
                      "failed (see the log): the verdicts not stored are paid for again by the next run")
            if stats.get("items_failed"):
                print(f"  NOTE: {unbuilt_items(s.benchmark, stats['items_failed'])[0]}: the judgments they need are counted "
                      "as failed; fix that and score again (the cached verdicts are reused)")
            snapshots = stats.get("snapshots") or {}
            if snapshots.get("other"):
                print(f"  WARNING: {snapshots['other']} verdicts from another snapshot than {snapshots.get('current')} under the "
                      f"name {s.accounting['judge'].get('model')} (" + ", ".join(f"{m} x{n}" for m, n in snapshots["by"].items()) + ")")
        for line in s.coverage.problems() if s.coverage is not None else []:
            print(f"  NOTE: {line}")


def main(args) -> int:
    from lmms_video_reasoning.judges import JudgeConfigError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
    from lmms_video_reasoning.utils.lmms import launcher

    launcher.register_judge_settings()  # no LMMS_VR_JUDGE_* set: lmms-eval's API_TYPE=local judge
    try:
        gathered, skipped, missing = gather_records(Path(args.path), args.task)
        if _batch_step(args, gathered):
            return 0
        said: set = set()
        scores = []
        for item in gathered:
            with _verdicts_source(args, [item], said):
                scores.append(_score(item))
    except JudgeConfigError as error:
        raise DataError(f"the judge cannot run: {error}") from None
    except OSError as error:
        raise DataError(f"cannot read {error.filename or args.path}: {error.strerror or error}") from None
    print_scores(scores)
    for line in skipped:
        print(f"\nNOT SCORED: {line}")
    for line in missing:
        print(f"\nMISSING: {line}")
    outages = {json.dumps(s.accounting["stats"]["outage"], sort_keys=True) for s in scores
               if s.accounting is not None and (s.accounting.get("stats") or {}).get("outage")}
    for outage in map(json.loads, sorted(outages)):
        # An outage is not a result: say so in the exit status too (scripts check it).
        print(f"\nJUDGE OUTAGE: {outage['model']} at {outage['endpoint']}: {outage['reason']}. The judgments it did not make "
              "are not computed (nothing cached for them); run the same command again once the judge works.")
    print_held(scores, str(args.path))
    cache_errors = {(s.accounting.get("cache") or {}).get("path"): (s.accounting.get("cache") or {}).get("errors")
                    for s in scores if s.accounting is not None and (s.accounting.get("stats") or {}).get("cache_errors")}
    for path, count in cache_errors.items():
        # Not a silent re-payment: the next run would pay again for what was not stored.
        print(f"\nJUDGE CACHE ERROR: {count} reads/writes of {path} failed; the metrics stand, but the verdicts not stored are "
              "paid for again by the next run. Fix the file (disk space, permissions) or set LMMS_VR_JUDGE_CACHE to a writable file.")
    if args.out:
        runs = list(dict.fromkeys(s.run for s in scores))
        for run, path in results_paths(Path(args.out), runs).items():
            try:
                write_results(path, [s for s in scores if s.run == run], str(args.path))
            except OSError as error:
                raise DataError(f"cannot write the results to {path}: {error.strerror or error} (give another --out)") from None
            print(f"\nresults{f' of run {run}' if len(runs) > 1 else ''} written to {path}")
    return 3 if outages else 4 if cache_errors else 5 if missing else 0


def print_held(scores: Sequence[TaskScore], path: str) -> None:
    """The judgments a configured judge did not send because the offline batch flow holds them
    (`batch.BatchBoundJudge`), per judge and cache, and how to retry them."""
    held: dict[tuple, list[int]] = {}
    for s in scores:
        stats = (s.accounting or {}).get("stats") or {}
        if stats.get("batch_failed") or stats.get("batch_due"):
            judge = s.accounting.get("judge") or {}
            counts = held.setdefault((judge.get("model"), judge.get("base_url"), (s.accounting.get("cache") or {}).get("path")), [0, 0])
            counts[0] += stats.get("batch_failed", 0)
            counts[1] += stats.get("batch_due", 0)
    for (model, endpoint, cache), (failed, due) in held.items():
        # Not an outage and not a silent re-send: the batch's verdicts stand, the rest is counted as failed.
        retry = [f"`lmms-vr score {path} --batch-export FILE` exports the {due} still due"] if due else []
        retry.append(f"`lmms-vr score {path} --judge-online` sends them to the configured judge ({model} at {endpoint})")
        print(f"\nNOT SENT: {failed + due} judgments of the offline batch flow were not sent: {failed} failed in the batch "
              f"(attempts used up, or no reply parsed), {due} exported and not answered yet (cache {cache}). They are counted "
              "as failed judgments (judge_failed; metrics past the failure share are not computed). To judge them: "
              + "; ".join(retry) + ".")


def _batch_step(args, gathered: Sequence[Gathered]) -> bool:
    """--estimate, --batch-export, --batch-import (then nothing is scored: True) and --batch (judging
    through the Batch API before the scoring: False). See `batch_judging`."""
    from lmms_video_reasoning.utils.results import batch_judging

    if getattr(args, "estimate", False):
        data = batch_judging.estimate(gathered)
        batch_judging.print_estimate(data)
        if args.out:
            Path(args.out).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            print(f"\nestimate written to {args.out}")
        return True
    if getattr(args, "batch_export", None):
        batch_judging.print_export(batch_judging.export(gathered, Path(args.batch_export)))
        return True
    if getattr(args, "batch_import", None):
        imported = batch_judging.import_results(gathered, Path(args.batch_import))
        batch_judging.print_import(imported, args.batch_import)
        refusal = batch_judging.nothing_accepted(imported, args.batch_import)
        if refusal:
            raise DataError(refusal)
        return True
    if getattr(args, "batch", False):
        batch_judging.print_api(batch_judging.api_judging(gathered))
    return False


def _verdicts_source(args, gathered: Sequence[Gathered], said: set | None = None):
    """After --batch, every verdict is read from the cache (a request the batches could not answer
    is not sent now: it is counted as failed). A configured judge whose cache holds an offline batch
    flow of its model (--batch-export / --batch-import) sends no request that flow holds
    (`batch.BatchBoundJudge`: counted as failed, `print_held` says how to retry), unless
    --judge-online. With no judge configured, a benchmark is scored from
    the judge cache its run recorded (`recorded_verdicts`: the judge `lmms-vr report` reads too),
    else, when its judge model has batch-imported replies in the cache, from them (a GPU node with
    no key). `said`: the notes already printed (one per judge and cache)."""
    from contextlib import nullcontext

    from lmms_video_reasoning.judges.batch import batch_bound_judge
    from lmms_video_reasoning.judges.config import JudgeConfig
    from lmms_video_reasoning.judges.engine import CONFIGURED, cache_only_judge, judges_replaced_by
    from lmms_video_reasoning.utils.results.batch_judging import cache_answers_for

    said = set() if said is None else said
    if getattr(args, "batch", False):  # every judge reads its own cache, sending nothing
        return judges_replaced_by(lambda benchmark, config: cache_only_judge(
            benchmark, *((config.model, config.cache_path, config.base_url) if config is not None else ())))
    names = sorted({registry.get(task_spec(item.task).benchmark).scoring.judge_name for item in gathered} - {""})
    readers: dict[str, Any] = {}
    bound: dict[str, Any] = {}  # configured judges bound to the batch flow of their cache
    for name in names:
        try:
            config = JudgeConfig.from_env(name)
        except ValueError:  # a benchmark that declares no judge: there is no recorded judge to read
            continue
        if config is not None:
            judge = None if getattr(args, "judge_online", False) else batch_bound_judge(config)
            if judge is not None:
                bound[name] = judge
            continue
        for item in gathered:
            reader, why = recorded_verdicts(Path(item.source), name)
            note = (f"no judge configured for {name}: verdicts read from the judge cache {reader.config.cache_path} the run "
                    f"recorded (model {reader.config.model}; nothing is sent, a request without a cached verdict counts as a "
                    "failed judgment)") if reader is not None else (
                    f"no judge configured for {name}, and {why}: its judge-based metrics cannot be computed; configure the "
                    "judge (LMMS_VR_JUDGE_BASE_URL, or the provider's API key) or put the run's judge cache on this machine")
            if why or reader is not None:
                if note not in said:
                    said.add(note)
                    print(note)
            if reader is not None:
                readers[name] = reader
                break
    models = cache_answers_for([name for name in names if name not in readers])
    if models:
        note = ("no judge configured for " + ", ".join(sorted(models)) + ": verdicts read from the judge cache "
                "(batch-imported replies; nothing is sent, a request without a reply counts as a failed judgment)")
        if note not in said:
            said.add(note)
            print(note)
    if readers or models or bound:
        return judges_replaced_by(lambda benchmark, config: (bound.get(benchmark) or CONFIGURED) if config is not None
                                  else readers.get(benchmark) or cache_only_judge(benchmark, models.get(benchmark)))
    return nullcontext()


def run_results_file(samples: Path) -> Path | None:
    """The results file of the run that wrote a samples file: lmms-eval's `<date_id>_results.json`
    beside its `<date_id>_samples_<task>.jsonl` (or `_records_`), or the `<stem>.json` of
    `lmms-vr score --out` beside `<stem>_samples_<task>.jsonl`. None when there is none."""
    match = SAMPLES_PATTERN.match(samples.name) or RECORDS_PATTERN.match(samples.name)
    if match is None:
        return None
    for name in (match["prefix"] + RESULTS_SUFFIX, match["prefix"] + ".json"):
        if (samples.parent / name).is_file():
            return samples.parent / name
    return None


def recorded_verdicts(samples: Path, judge_name: str) -> tuple[Any, str]:
    """(a reader of the judge cache the run of `samples` recorded for `judge_name`, "") or (None,
    why there is none: "" when the run has no results file or recorded no judge). The judge is
    found as `lmms-vr report` finds it (`report.verdicts_for`: the results file, then the run's
    judge accounting beside it); nothing configured here is borrowed."""
    from lmms_video_reasoning.utils.results import report

    results = run_results_file(samples)
    if results is None:
        return None, ""
    reader, why, borrowed = report.verdicts_for(results, judge_name)
    if borrowed:
        return None, ""
    return reader, why if why.startswith("the judge cache") or why.startswith("the run's judge") else ""


def _score(item: Gathered) -> TaskScore:
    try:
        return score_task(item.task, item.records, item.source, run=item.run, coverage=item.coverage)
    except (KeyError, TypeError, AttributeError) as error:
        raise DataError(f"{item.source}: task {item.task}: a record lacks what scoring needs ({type(error).__name__}: {error}); "
                        "the file was not written by this suite's task or was edited") from None
