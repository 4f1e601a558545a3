"""The judge a run used (`lmms-vr report`, `lmms-vr score`): its verdicts are read back from its cache."""

from __future__ import annotations

import glob
import json
import logging
import re
from pathlib import Path
from typing import Any

from lmms_video_reasoning.utils.results.report_runs import read_results
from lmms_video_reasoning.utils.results.samples_io import RESULTS_SUFFIX

log = logging.getLogger("lmms_video_reasoning.report")


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
    prefix = results_file.name[: -len(RESULTS_SUFFIX)]
    pattern = re.compile(re.escape(prefix) + r"_.+\.json")
    return sorted((p for folder in (results_file.parent, results_file.parent.parent) for p in folder.glob(f"{glob.escape(prefix)}_*.json")
                   if pattern.fullmatch(p.name) and p != results_file), key=_mtime, reverse=True)


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
