"""Finding the runs under an output folder (samples files, records files, predictions) for `lmms-vr score`,
with what is missing from them (`missing_tasks`: the run manifest)."""

from __future__ import annotations

import collections
import glob
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from lmms_video_reasoning.utils.core import files, registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.aggregation import RUN_TASKS_FILE
from lmms_video_reasoning.utils.results.samples_io import (RECORDS_PATTERN, RESULTS_SUFFIX, SAMPLES_PATTERN, Coverage, _lines, _some, check_coverage,
                                                           read_samples, run_file_match, task_docs, task_spec, task_specs)

log = logging.getLogger("lmms_video_reasoning.score")


def samples_runs(folder: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """({run: {task: samples file}}, skipped files with the reason) under an lmms-eval output folder;
    a run is one `<folder>/<date_id>` prefix (two models or two dates are two runs)."""
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


RUN_TASKS_SUFFIX = "_" + RUN_TASKS_FILE  # `aggregation.save_run_records`: every task of a run, before judging


def missing_tasks(folder: Path, runs: dict[str, dict[str, Path]]) -> list[str]:
    """What is missing or damaged in the runs of a folder, one line each: a task a run had (its
    `<date_id>_run_tasks.json` or the `configs` of its results) with neither a samples nor a records
    file, and a records file that no longer matches the checksum written with it."""
    folder = Path(folder)
    specs = task_specs()
    problems, named = [], set()
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
                    if (run, task) not in named:  # once, whether the manifest or the results file names it
                        named.add((run, task))
                        problems.append(f"task {task} of run {run} ({path.name}): neither its samples file nor the records "
                                        f"saved before judging are in {path.parent}")
                elif suffix == RUN_TASKS_SUFFIX and isinstance(entry, dict) and found.name == entry.get("records_file") \
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


def first_row(path: Path) -> str | None:
    """The file's first non-blank line (None: the file has none)."""
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        return next((line for line in handle if line.strip()), None)


def is_predictions_row(line: str) -> bool:
    """True for a line of replay predictions (an object with `id` and `response`, no `doc_id`)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "response" in row and "id" in row and "doc_id" not in row


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
    records, coverage, _outcomes = read_samples(path, spec)
    return Gathered(run, task, records, str(path), check_coverage(records, spec, coverage))


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
    first = first_row(path)
    if first is None:
        raise DataError(f"{path}: the file is empty (no JSON line in it): nothing to score; give the samples file an lmms-eval "
                        "run wrote with --log_samples (<date>_samples_<task>.jsonl), its --output_path folder, or a replay "
                        "predictions .jsonl")
    if is_predictions_row(first):
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
