"""The judges a process shares: one per configuration (stats, cache and concurrency bound shared
across tasks and threads), one call budget per process, one circuit breaker per endpoint. The code
that scores is handed its judge explicitly (`ScoringAdapter.score(records, settings, judge)`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from lmms_video_reasoning.judges.config import JudgeConfig, JudgeDefaults, judge_name, not_configured_message
from lmms_video_reasoning.judges.engine import CacheOnlyJudge, Judge
from lmms_video_reasoning.judges.limits import CallBudget, CircuitBreaker

log = logging.getLogger("lmms_video_reasoning.judges")

_registry_lock = threading.Lock()
_judges: dict[tuple, Judge] = {}
_budgets: dict[int | None, CallBudget] = {}
_breakers: dict[str, CircuitBreaker] = {}  # endpoint -> the breaker its judges share
_warned: set[str] = set()


def get_judge(benchmark: "str | JudgeDefaults", quiet: bool = False) -> Judge | None:
    """The shared Judge for ``benchmark`` (its name, or its ``JudgeDefaults``) configured from the
    environment, or None with one log line per benchmark naming the variables to set (not ``quiet``)."""
    config = JudgeConfig.from_env(benchmark)  # ValueError for a benchmark without a judge
    benchmark = judge_name(benchmark)
    if config is None:
        with _registry_lock:
            if benchmark not in _warned and not quiet:
                _warned.add(benchmark)
                log.warning(not_configured_message(benchmark))
        return None
    return configured_judge(config)


def scoring_judge(scoring: Any, records: Any) -> Judge | None:
    """The configured judge a `ScoringAdapter` of ``records`` is handed: None (and no warning) when
    the records need no judge."""
    if not scoring.judge_name or not scoring.needs_judge(records):
        return None
    return get_judge(scoring.judge_name)


def configured_judge(config: JudgeConfig, kind: "type[Judge]" = None, *args: Any) -> Judge:
    """The process's one judge of class ``kind`` (default `Judge`; a subclass takes
    ``(config, budget, breaker, *args)``) for ``config``."""
    kind = kind or Judge
    identity = config.identity if kind is Judge else (kind.__name__, config.identity)
    with _registry_lock:
        judge = _judges.get(identity)
        if judge is None:
            budget = _budgets.setdefault(config.max_calls, CallBudget(config.max_calls, "process"))
            breaker = _breakers.setdefault(config.endpoint, CircuitBreaker(config.concurrency))
            judge = _judges[identity] = kind(config, budget, breaker, *args)
        return judge


def cache_only_judge(benchmark: str, model: str | None = None, cache_path: str | Path | None = None,
                     endpoint: str | None = None) -> CacheOnlyJudge:
    """The process's one ``CacheOnlyJudge`` for these arguments."""
    identity = ("cache-only", benchmark, model, str(cache_path) if cache_path else None, endpoint)
    with _registry_lock:
        reader = _judges.get(identity)
        if reader is None:
            reader = _judges[identity] = CacheOnlyJudge(benchmark, model, cache_path, endpoint)
        return reader


def cache_reader(judge: Judge) -> CacheOnlyJudge:
    """A reader of what ``judge`` would serve from its cache, sending nothing (a failed judgment stays failed)."""
    config = judge.config
    return cache_only_judge(config.benchmark, config.model, config.cache_path, config.base_url)
