"""This suite's tasks as scoring knows them (`TaskSpec`: each registered benchmark's declared tasks,
`registry.Task`) and the names of the files their runs write."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Callable

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError


SAMPLES_PATTERN = re.compile(r"^(?P<prefix>.*)_samples_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
# Written by the tasks' aggregation before judging (`utils.aggregation.save_records`): a run
# whose aggregation failed, so that lmms-eval wrote no samples file, is recovered from these.
RECORDS_PATTERN = re.compile(r"^(?P<prefix>.*)_records_(?P<task>[A-Za-z0-9_\-]+)\.jsonl$")
RESULTS_SUFFIX = "_results.json"
RECORD_KEY = "record"  # our samples files: the record once, not under every metric name
OUTCOME_KEY = "lmms_vr_outcome"


@dataclass(frozen=True)
class TaskSpec:
    """What scoring needs to know about one task of this suite (from its declaration)."""

    name: str
    benchmark: str  # the registry name of the benchmark declaring it
    process_docs: str  # dotted path of the `process_docs` hook
    process_results: str  # dotted path of the `process_results` hook
    metrics: tuple[str, ...]
    target: str  # `doc_to_target`: the doc field lmms-eval logs as `target`
    declared: registry.Task  # the declaration itself (record options, settings)


def task_specs() -> dict[str, TaskSpec]:
    """Every task of the registered benchmarks (groups left out), by name."""
    return {task.name: TaskSpec(task.name, benchmark.name, f"{benchmark.binding}.{task.process_docs}",
                                f"{benchmark.binding}.{task.process_results}", tuple(task.metrics), task.target, task)
            for benchmark in registry.benchmarks() for task in benchmark.tasks}


def task_spec(name: str) -> TaskSpec:
    specs = task_specs()
    if name not in specs:
        raise DataError(f"unknown task {name!r}: this suite's tasks are {', '.join(sorted(specs))}")
    return specs[name]


def _function(dotted: str) -> Callable:
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def unbuilt_items(benchmark: str, items: int) -> tuple[str, str]:
    """(a sentence on `items` judging items of `benchmark` whose request could not be built, a few
    words for a table cell). Such a request holds the benchmark's media (e.g. CG-Bench's clue
    frames): when the data root's variable is not set, that is what is missing."""
    import os

    root_env = registry.get(benchmark).data().SOURCE.root_env
    unset = not os.environ.get(root_env, "").strip()
    return (f"{items} judge items could not be rebuilt (see the log; e.g. media not found" + (f": {root_env} is not set" if unset else "") + ")",
            f"needs {root_env}" if unset else "judge items not rebuilt")
