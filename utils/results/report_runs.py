"""The runs `lmms-vr report` reads: results files (or folders holding them), their samples files, their labels,
and the judge each used (`lmms-vr report`, `lmms-vr score`): its verdicts are read back from its cache."""

from __future__ import annotations

import glob
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.samples_io import RESULTS_SUFFIX, results_stem, samples_path

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
        if task not in found and _file_name(task) and (samples := samples_path(path, task)).is_file():  # a task name is no path
            found[task] = samples
    return found


def sample_counts(data: dict) -> dict[str, int]:
    """{task: samples it scored} from lmms-eval's `n-samples` (`effective`), where recorded."""
    counts = {str(task): entry.get("effective") for task, entry in (data.get("n-samples") or {}).items() if isinstance(entry, dict)}
    return {task: value for task, value in counts.items() if isinstance(value, int) and not isinstance(value, bool)}


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


def judge_settings(data: Any, judge_name: str, depth: int = 0) -> list[dict]:
    """Every judge configuration of `judge_name` in a JSON document (`Judge.accounting()`'s
    `judge` object: benchmark, model, cache_path), wherever the writer nested it."""
    if depth > 4:
        return []
    if isinstance(data, dict):
        if data.get("benchmark") == judge_name and isinstance(data.get("model"), str) and "cache_path" in data:
            return [data]
        return [found for value in data.values() for found in judge_settings(value, judge_name, depth + 1)]
    if isinstance(data, list):
        return [found for value in data[:50] for found in judge_settings(value, judge_name, depth + 1)]
    return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def run_accounting_files(results_file: Path) -> list[Path]:
    """The files of this run that may record its judge: `<date_id>_<name>.json` beside its
    `<date_id>_results.json` or in the folder above (never another run's)."""
    if not results_file.name.endswith(RESULTS_SUFFIX):
        return []
    prefix = glob.escape(results_stem(results_file))
    return sorted((p for folder in (results_file.parent, results_file.parent.parent) for p in folder.glob(f"{prefix}_?*.json")
                   if p != results_file), key=_mtime, reverse=True)


def verdicts_for(results_file: Path | None, judge_name: str) -> tuple[Any, str, str]:
    """(a `judges.CacheOnlyJudge` on the cache of the judge the run recorded, "", borrowed) or (None, why
    not, ""). The judge: in the results file (`lmms-vr score`), else in the run's accounting beside
    it; a run that recorded none gets the configured judge, whose verdicts are then `borrowed`
    (the caller checks that they reproduce the run's results)."""
    candidates: list[dict] = []
    if results_file is not None:
        data, _ = read_results(results_file)
        candidates += judge_settings(data, judge_name) if data else []
        for path in [] if candidates else run_accounting_files(results_file):
            try:
                if path.stat().st_size < 1 << 22:
                    candidates += judge_settings(json.loads(path.read_text(encoding="utf-8")), judge_name)
            except (ValueError, OSError):
                continue
    recorded = len(candidates)
    try:
        from lmms_video_reasoning.judges import JudgeConfig

        configured = JudgeConfig.from_env(judge_name)
    except Exception:  # noqa: BLE001 - an unknown judge name or a bad variable: no configured judge
        configured = None
    if configured is not None and not recorded:
        candidates.append({"model": configured.model, "cache_path": str(configured.cache_path) if configured.cache_path else None,
                           "base_url": configured.endpoint})
    caches = [(c["model"], c["cache_path"], _endpoint(c.get("base_url")), i >= recorded) for i, c in enumerate(candidates) if c.get("cache_path")]
    for model, cache, endpoint, borrowed in caches:
        if Path(cache).is_file():
            from lmms_video_reasoning.judges.process_registry import cache_only_judge

            why = f"verdicts borrowed from the configured judge's cache {cache} (the run recorded no judge)" if borrowed else ""
            return cache_only_judge(judge_name, model, cache, endpoint), "", why
    if caches:
        return None, f"the judge cache {caches[0][1]} recorded for this run is not on this machine", ""
    if candidates:
        return None, "the run's judge had its cache off (LMMS_VR_JUDGE_CACHE=off)", ""
    return None, NO_JUDGE, ""


NO_JUDGE = "no judge recorded with the results and none configured"


def _endpoint(base_url: Any) -> str | None:
    """The endpoint an accounting records (`base_url`), None for the provider's default."""
    return base_url if isinstance(base_url, str) and base_url.startswith("http") and " " not in base_url else None


class InOrderJudge:
    """A judge whose `map` runs the items in order, counting those whose code raised as `item_errors`."""

    item_errors = 0

    def map(self, fn, items, desc: str = "") -> list:
        out = []
        for item in items:
            try:
                out.append(fn(item, self.ask))
            except Exception as error:  # noqa: BLE001 - an item that cannot even be rebuilt is missing too
                self.item_errors += 1
                log.debug("%s: a judge item could not be rebuilt: %s: %s", desc, type(error).__name__, error)
                out.append(None)
        return out

    def log_summary(self) -> None:
        pass


class _NoVerdicts(InOrderJudge):
    """The judge of a run whose cache is not available: every request is missing, none is sent."""

    misses = 0

    def ask(self, request):
        from lmms_video_reasoning.utils.core.ask import Result

        self.misses += 1
        return Result(False, None, None, "no judge cache", False)


def shortfall(judge: Any) -> tuple[int, int]:
    """(requests not answered from the cache, judging items that failed before asking) so far."""
    if isinstance(judge, _NoVerdicts):
        return judge.misses, judge.item_errors
    stats = judge.stats.as_dict()
    return stats.get("not_computed", 0), items_failed(stats)


def items_failed(stats: dict) -> int:
    """Judging items whose code failed before or between requests (e.g. a request's media not found), of a judge's stats."""
    return ((stats.get("by_tag") or {}).get("(map)") or {}).get("failures", 0)
