"""This suite's tasks as scoring knows them (`TaskSpec`, from each benchmark's declared tasks), the
names of the files their runs write, reading samples files (`--log_samples`, `--predict_only`,
`lmms-vr score --out`) and replay predictions back into records, and finding the runs under an
output folder for `lmms-vr score` with what is missing from them (`missing_tasks`: the run manifest)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import glob
import importlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import files, registry
from lmms_video_reasoning.utils.core.roots import DataError

log = logging.getLogger("lmms_video_reasoning.score")

SAMPLES_PATTERN = re.compile(r"^(?P<prefix>.*)_samples_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
# Written by the tasks' aggregation before judging (`utils.aggregation.save_records`): a run
# whose aggregation failed, so that lmms-eval wrote no samples file, is recovered from these.
RECORDS_PATTERN = re.compile(r"^(?P<prefix>.*)_records_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
RESULTS_SUFFIX = "_results.json"
RUN_TASKS_FILE = "run_tasks.json"  # `aggregation.save_run_records`: every task of a run, before judging
RECORD_KEY = "record"  # our samples files: the record once, not under every metric name
OUTCOME_KEY = "lmms_vr_outcome"
_NO_OUTCOME = object()


def sample_line(index: int, record: Any, outcome: Any = _NO_OUTCOME) -> str:
    """One line of this suite's samples files (the records saved before judging, `lmms-vr score --out`):
    the record once, with its scored outcome when there is one."""
    row = {"doc_id": index, "sample_id": record.get("sample_id") if isinstance(record, dict) else None, RECORD_KEY: record}
    if outcome is not _NO_OUTCOME:
        row[OUTCOME_KEY] = outcome
    return json.dumps(row, ensure_ascii=False, default=str) + "\n"


def run_file_match(path: Path) -> re.Match | None:
    """A samples or records file's name, matched: its run `prefix` and `task`."""
    return SAMPLES_PATTERN.match(path.name) or RECORDS_PATTERN.match(path.name)


def results_stem(path: Path) -> str:
    """What a run's other files are named after: lmms-eval's `<date_id>` of `<date_id>_results.json`, else the file's stem."""
    return path.name[: -len(RESULTS_SUFFIX)] if path.name.endswith(RESULTS_SUFFIX) else path.stem


def samples_path(results: Path, task: str) -> Path:
    """The samples file of `task` beside a results file, as lmms-eval names it (`<date_id>_samples_<task>.jsonl`)."""
    return results.with_name(f"{results_stem(results)}_samples_{task}.jsonl")


@dataclass(frozen=True)
class TaskSpec:
    """What scoring needs to know about one task of this suite (from its declaration)."""

    name: str
    benchmark: str  # the registry name of the benchmark declaring it
    process_docs: str  # dotted path of the `process_docs` hook
    metrics: tuple[str, ...]
    target: str  # `doc_to_target`: the doc field lmms-eval logs as `target`
    declared: registry.Task  # the declaration itself (record options, settings)


def task_specs(benchmarks: list | None = None) -> dict[str, TaskSpec]:
    """Every task of `benchmarks` (default: the registered ones; groups left out), by name."""
    return {task.name: TaskSpec(task.name, benchmark.name, f"{benchmark.binding}.{task.process_docs}", tuple(task.metrics),
                                task.target, task)
            for benchmark in (registry.benchmarks() if benchmarks is None else benchmarks) for task in benchmark.tasks}


def task_spec(name: str) -> TaskSpec:
    owner = registry.owner(name)  # imports only the benchmark declaring it
    specs = task_specs([owner] if owner else None)
    if name not in specs:
        raise DataError(f"unknown task {name!r}: this suite's tasks are {', '.join(sorted(task_specs()))}")
    return specs[name]


def unbuilt_items(benchmark: str, items: int) -> tuple[str, str]:
    """(a sentence on `items` judging items whose request could not be built, a few words for a table
    cell). Such a request holds media (e.g. CG-Bench's clue frames): an unset data root is named."""
    import os

    root_env = registry.get(benchmark).data().SOURCE.root_env
    unset = not os.environ.get(root_env, "").strip()
    return (f"{items} judge items could not be rebuilt (see the log; e.g. media not found" + (f": {root_env} is not set" if unset else "") + ")",
            f"needs {root_env}" if unset else "judge items not rebuilt")


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

    module, _, hook = spec.process_docs.rpartition(".")
    with preflight.off():  # scoring needs the documents, not the videos or a reachable judge
        dataset = getattr(importlib.import_module(module), hook)(None)
    return [dict(doc) for doc in dataset]


def response_text(row: dict) -> str:
    """A predict-only line's raw generation (`resps`), as `process_results` receives it under the tasks'
    `reasoning_tags: none` (`filtered_resps` may have the reasoning stripped)."""
    value = row.get("resps", row.get("filtered_resps"))
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else ""


def rebuild_records(rows: Sequence[dict], spec: TaskSpec, where: str) -> list[dict]:
    """Records for predict-only lines: the doc at `doc_id`, checked against the logged `target`
    (lmms-eval's `doc_hash` is the same for every line), built from the raw response."""
    docs = task_docs(spec)
    benchmark = registry.get(spec.benchmark)
    records = []
    for row in rows:
        doc_id = row.get("doc_id")
        if not isinstance(doc_id, int) or not 0 <= doc_id < len(docs):
            raise DataError(f"{where}: doc_id {doc_id!r} is not one of the {len(docs)} documents of task {spec.name} found now; "
                            f"point the benchmark's data root at the annotations the run used (see `lmms-vr prepare`)")
        doc = docs[doc_id]
        expected = str(doc[spec.target]) if spec.target in doc else None
        if expected is not None and "target" in row and str(row["target"]) != expected:
            raise DataError(f"{where}: doc_id {doc_id} of task {spec.name} has target {row['target']!r} in the file but "
                            f"{expected!r} in the annotations found now: they are not the ones the run used; point the "
                            f"benchmark's data root at the same annotations (see `lmms-vr prepare`)")
        records.append(benchmark.record(spec.declared, doc, response_text(row)))
    return records


@dataclass
class Coverage:
    """Which of the task's documents a file's samples cover (`documents` None: not loaded, `note` says why)."""

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


def read_samples(path: Path, spec: TaskSpec) -> tuple[list[dict], Coverage, list[dict] | None]:
    """(the task's records from a samples file, logged or rebuilt for predict-only lines; what they
    cover; the outcomes `lmms-vr score --out` stored, None unless every sample has one), in one
    streamed pass keeping only what scoring reads (an lmms-eval line's record parsed once, not under
    every metric name). A row repeated verbatim is counted and scored once; two different rows for
    one `doc_id`, or records for one `sample_id`, are an error."""
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
        fields = _up_to_record(text, spec, first_copy)
        if fields is None:  # another shape than lmms-eval's: parsed whole
            try:
                fields = json.loads(text)
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(fields, dict):
                raise DataError(f"{path}:{number}: expected a JSON object")
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


def _up_to_record(text: str, spec: TaskSpec, first_copy: list[str]) -> dict | None:
    """An lmms-eval line (the record under each metric name) parsed only up to the record's first
    copy, or None for another shape (then parsed whole). The fields before the copy, closed with
    "}", must parse as an object (the key is the line's own); `first_copy` holds the metric name
    that came first on an earlier line (the lines of a file share their key order)."""
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
    """The lines at these offsets are the same row (the same text, or JSON equal but for key order)."""
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


def samples_runs(folder: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """({run: {task: samples file}}, skipped files with the reason) under an lmms-eval output folder;
    a run is one `<folder>/<date_id>` prefix (two models or two dates are two runs)."""
    runs: dict[str, dict[str, Path]] = {}
    skipped = []
    specs = task_specs()

    def found(pattern: re.Pattern, kind: str):  # (run, task, path) of each `*_<kind>_*.jsonl` of a task of this suite
        for path in map(Path, sorted(glob.glob(str(folder / "**" / f"*_{kind}_*.jsonl"), recursive=True))):
            match = pattern.match(path.name)
            if match and match["task"] in specs:
                yield str(path.parent.relative_to(folder) / match["prefix"]), match["task"], path
            elif kind == "samples":
                skipped.append(f"{path}: task {match['task']!r} is not a task of this suite" if match
                               else f"{path}: not named <run>_samples_<task>.jsonl")

    for run, task, path in found(SAMPLES_PATTERN, "samples"):
        runs.setdefault(run, {})[task] = path
    # The records saved before judging stand in for the samples files lmms-eval did not write.
    for run, task, path in found(RECORDS_PATTERN, "records"):
        samples = runs.get(run, {}).get(task)
        if samples is None:
            log.info("%s: no samples file for task %s of run %s; scoring the records saved before its judging", path, task, run)
            runs.setdefault(run, {})[task] = path
            continue
        # Records left beside a samples file: lmms-eval's copy was not verified whole at exit.
        why = samples_differ(samples, path, task)
        if why:
            log.warning("%s: %s; scoring the records saved before its judging (%s) instead", samples, why, path.name)
            runs[run][task] = path
    return runs, skipped


def missing_tasks(folder: Path, runs: dict[str, dict[str, Path]]) -> list[str]:
    """What is missing or damaged in the runs of a folder, one line each: a task a run had (its
    `<date_id>_run_tasks.json` or the `configs` of its results) with neither a samples nor a records
    file, and a records file that no longer matches the checksum written with it."""
    specs = task_specs()
    problems, named = [], set()
    for suffix, tasks_in in (("_" + RUN_TASKS_FILE, lambda data: data.get("tasks")), (RESULTS_SUFFIX, lambda data: data.get("configs"))):
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
                    if (run, task) not in named:  # once, whether the manifest or the results file names it
                        named.add((run, task))
                        problems.append(f"task {task} of run {run} ({path.name}): neither its samples file nor the records "
                                        f"saved before judging are in {path.parent}")
                elif suffix == "_" + RUN_TASKS_FILE and isinstance(entry, dict) and found.name == entry.get("records_file") \
                        and entry.get("sha256") and files.sha256_of(found) != entry["sha256"]:
                    problems.append(f"task {task} of run {run}: {found} was changed since it was written before judging "
                                    f"(its checksum differs from {path.name}): scored as it is now")
    return problems


def samples_differ(samples: Path, records: Path, task: str) -> str | None:
    """Why lmms-eval's samples file of `task` is not a whole copy of the records this suite saved, or
    None: the one test of both the records' removal at exit (`aggregation`) and which file `score` reads."""
    spec = task_spec(task)
    try:
        kept = read_samples(records, spec)[0]
    except (OSError, DataError) as error:
        return f"the records file {records} cannot be read back ({error})"
    try:
        size = samples.stat().st_size
    except OSError as error:
        return f"lmms-eval's samples file cannot be read ({error.strerror or error})"
    if size == 0:
        return f"lmms-eval's samples file is empty (0 bytes; 0 of {len(kept)} samples)"
    try:
        got = read_samples(samples, spec)[0]
    except (OSError, DataError) as error:
        whole = 0
        for _number, _offset, raw in _lines(samples):  # the lines that are whole JSON objects
            with contextlib.suppress(ValueError):
                whole += isinstance(json.loads(raw), dict)
        return f"lmms-eval's samples file is truncated or damaged: {whole} of {len(kept)} samples whole ({size} bytes; {error})"
    if len(got) != len(kept):
        return f"lmms-eval's samples file is truncated: {len(got)} of {len(kept)} samples ({size} bytes)"
    missing = collections.Counter(str(r.get("sample_id")) for r in kept) - collections.Counter(str(r.get("sample_id")) for r in got)
    if missing:
        return (f"lmms-eval's samples file lacks {sum(missing.values())} of the {len(kept)} records' samples "
                f"({_some(sorted(missing))})")
    return None


@dataclass
class Gathered:
    """One task of one run, read back into records."""

    run: str
    task: str
    records: list[dict]
    source: str
    coverage: Coverage


def _from_samples(run: str, task: str, path: Path) -> Gathered:
    """A samples file's records, their sample ids compared with the task's documents (when they can be loaded now)."""
    spec = task_spec(task)
    records, coverage, _outcomes = read_samples(path, spec)
    try:
        docs = task_docs(spec)
    except Exception as error:  # noqa: BLE001 - no annotations here: coverage is unknown, said so
        coverage.note = f"the task's documents could not be loaded ({type(error).__name__}: {error}); coverage not checked"
    else:
        doc_ids = [str(doc["sample_id"]) for doc in docs]
        present = {str(record.get("sample_id")) for record in records}
        coverage.documents = len(doc_ids)
        coverage.missing = [sample_id for sample_id in doc_ids if sample_id not in present]
        coverage.unknown = sorted(present - set(doc_ids))
    return Gathered(run, task, records, str(path), coverage)


def gather_records(path: Path, task: str | None = None) -> tuple[list[Gathered], list[str], list[str]]:
    """(every run and task of a folder, samples file or predictions file as records; the files not
    scored, with the reason; what is missing or damaged, `missing_tasks`)."""
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
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = next((line for line in handle if line.strip()), None)
    if first is None:
        raise DataError(f"{path}: the file is empty (no JSON line in it): nothing to score; give the samples file an lmms-eval "
                        "run wrote with --log_samples (<date>_samples_<task>.jsonl), its --output_path folder, or a replay "
                        "predictions .jsonl")
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        row = None
    if isinstance(row, dict) and "response" in row and "id" in row and "doc_id" not in row:  # replay predictions
        return _from_predictions(path, task), [], []
    match = run_file_match(path)
    name = task or (match["task"] if match else None)
    if name is None and path.name.endswith(RESULTS_SUFFIX):
        raise DataError(f"{path}: an lmms-eval results file, not a samples file: give its folder ({path.parent}), where "
                        "--log_samples wrote the *_samples_<task>.jsonl files")
    if name is None:
        raise DataError(f"{path}: not named *_samples_<task>.jsonl and not replay predictions "
                        "({\"task\", \"id\", \"response\"} lines); name the task with --task")
    return [_from_samples(match["prefix"] if match else path.stem, name, path)], [], []


def _from_predictions(path: Path, task: str | None) -> list[Gathered]:
    """Records for replay predictions (`{"task", "id", "response"}`) matched on `sample_id`, per task
    (`task`, else each task the lines name): a document without one is scored as an empty response,
    predictions of no document listed (both in the coverage)."""
    from lmms_video_reasoning.utils.lmms.replay_model import load_predictions, lookup, unmatched

    table = load_predictions(path)
    tasks = [task] if task else sorted({name for name, _id in table if isinstance(name, str)})
    if not tasks:
        raise DataError(f"{path}: replay predictions without a task field; give --task")
    gathered = []
    for name in tasks:
        spec = task_spec(name)
        benchmark = registry.get(spec.benchmark)
        docs = task_docs(spec)
        records, missing = [], []
        for doc in docs:
            response = lookup(table, name, str(doc["sample_id"]))
            if response is None:
                missing.append(str(doc["sample_id"]))
                response = ""
            records.append(benchmark.record(spec.declared, doc, response))  # as the replay model answers it
        if len(missing) == len(records):
            raise DataError(f"{path}: no prediction for any document of task {name} (ids are the documents' sample_id)")
        ids = {str(doc["sample_id"]) for doc in docs}
        coverage = Coverage(samples=len(records) - len(missing), documents=len(docs), missing=missing, missing_scored_as_empty=True,
                            unmatched_predictions=unmatched(table, name, ids))
        gathered.append(Gathered(path.stem, name, records, str(path), coverage))
    return gathered
