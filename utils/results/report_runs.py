"""The runs `lmms-vr report` reads: results files (or folders holding them), their samples files, their labels."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.samples_io import RESULTS_SUFFIX, results_stem

log = logging.getLogger("lmms_video_reasoning.report")


def spec_of(benchmark: str) -> ReportSpec:
    spec = registry.get(benchmark).report
    if spec is None:
        raise DataError(f"benchmark {benchmark} has no report specification")
    return spec


def headline_metrics(benchmark: str) -> tuple[str, ...]:
    """The benchmark's metrics with CIs and standard errors (none without a report)."""
    try:
        return spec_of(benchmark).headline
    except ValueError:  # an unknown benchmark, or one without a report (DataError)
        return ()


@dataclass
class Run:
    """One model's results: task -> {metric: value}, and per task its samples and results files."""

    label: str
    paths: list[Path]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: dict[str, Path] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # task -> the results file it came from
    sizes: dict[str, int] = field(default_factory=dict)  # task -> samples scored (lmms-eval's `n-samples`)
    settings: dict[str, dict] = field(default_factory=dict)  # task -> its score-changing settings (`settings_used`)


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
    """The results files at `path` (a file, or every results JSON under a folder), parsed. Added to
    `unread` with the reason: the file given if it does not parse, and under a folder any `*.json`
    that does not parse and any `*_results.json` that is not results (not e.g. judge accounting)."""
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
        elif must_be_results or not why.startswith("no `results`") or candidate.name.endswith(RESULTS_SUFFIX):
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
    for task in data.get("results", {}):
        name = f"{results_stem(path)}_samples_{task}.jsonl"
        if task not in found and _file_name(name) and path.with_name(name).is_file():
            found[task] = path.with_name(name)
    return found


def sample_counts(data: dict) -> dict[str, int]:
    """{task: samples it scored} from lmms-eval's `n-samples` (`effective`), where recorded."""
    counts = {}
    for task, entry in (data.get("n-samples") or {}).items():
        value = entry.get("effective") if isinstance(entry, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            counts[str(task)] = value
    return counts


def settings_used(data: dict) -> dict[str, dict]:
    """task -> the score-changing settings its scores used: `lmms-vr score`'s `lmms_vr.settings`, else
    lmms-eval's config block (`configs[task].metadata.settings`)."""
    found = {str(task): dict(entry.get("metadata", {}).get("settings") or {})
             for task, entry in (data.get("configs") or {}).items() if isinstance(entry, dict)}
    found.update({str(task): dict(values) for task, values in ((data.get("lmms_vr") or {}).get("settings") or {}).items()
                  if isinstance(values, dict)})
    return {task: values for task, values in found.items() if values}


def load_runs(items: Sequence[str], unread: list[Unread] | None = None) -> list[Run]:
    """Runs from the results arguments (same label + disjoint tasks = one run); files not read go to `unread`."""
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
            target.settings.update({task: values for task, values in settings_used(data).items() if task in results})
    return runs
