"""This suite's tasks as scoring knows them (`TaskSpec`: the hooks read from each task's YAML, no lmms-eval
import) and the names of the files their runs write."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError


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


def unbuilt_items(benchmark: str, items: int) -> tuple[str, str]:
    """(a sentence on `items` judging items of `benchmark` whose request could not be built, a few
    words for a table cell). Such a request holds the benchmark's media (e.g. CG-Bench's clue
    frames): when the data root's variable is not set, that is what is missing."""
    import os

    root_env = registry.get(benchmark).data().SOURCE.root_env
    unset = not os.environ.get(root_env, "").strip()
    return (f"{items} judge items could not be rebuilt (see the log; e.g. media not found" + (f": {root_env} is not set" if unset else "") + ")",
            f"needs {root_env}" if unset else "judge items not rebuilt")
