"""The judges a process shares: one per configuration (stats, cache and concurrency bound shared
across tasks and threads), one call budget per process, one circuit breaker per endpoint. The code
that scores is handed its judge explicitly (`ScoringAdapter.score(records, settings, judge)`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

from lmms_video_reasoning.judges.config import JudgeConfig, JudgeDefaults, judge_name, not_configured_message
from lmms_video_reasoning.judges.engine import CacheOnlyJudge, Judge
from lmms_video_reasoning.judges.limits import CallBudget, CircuitBreaker

log = logging.getLogger("lmms_video_reasoning.judges")
T = TypeVar("T")

_registry_lock = threading.RLock()
# ("judge", ...) -> Judge, ("budget", max_calls) -> CallBudget, ("breaker", endpoint) -> CircuitBreaker,
# ("warned", benchmark): the missing judge was logged
_shared: dict[tuple, Any] = {}


def _one(key: tuple, make: Callable[[], T]) -> T:
    """The process's one object for ``key``, made by ``make()`` the first time."""
    with _registry_lock:
        if key not in _shared:
            _shared[key] = make()
        return _shared[key]


def get_judge(benchmark: "str | JudgeDefaults", quiet: bool = False) -> Judge | None:
    """The shared Judge for ``benchmark`` (its name, or its ``JudgeDefaults``) configured from the
    environment, or None with one log line per benchmark naming the variables to set (not ``quiet``)."""
    config = JudgeConfig.from_env(benchmark)  # ValueError for a benchmark without a judge
    if config is None and not quiet:
        _one(("warned", judge_name(benchmark)), lambda: log.warning(not_configured_message(benchmark)))
    return None if config is None else configured_judge(config)


def scoring_judge(scoring: Any, records: Any) -> Judge | None:
    """The configured judge a `ScoringAdapter` of ``records`` is handed: None (and no warning) when
    the records need no judge."""
    if not scoring.judge_name or not scoring.needs_judge(records):
        return None
    return get_judge(scoring.judge_name)


def configured_judge(config: JudgeConfig, kind: "type[Judge]" = Judge, *args: Any) -> Judge:
    """The process's one judge of class ``kind`` (constructed with ``(config, budget, breaker, *args)``)."""
    def make() -> Judge:
        budget = _one(("budget", config.max_calls), lambda: CallBudget(config.max_calls, "process"))
        breaker = _one(("breaker", config.endpoint), lambda: CircuitBreaker(config.concurrency))
        return kind(config, budget, breaker, *args)

    return _one(("judge", kind.__name__, config), make)


def cache_only_judge(benchmark: str, model: str | None = None, cache_path: str | Path | None = None,
                     endpoint: str | None = None) -> CacheOnlyJudge:
    """The process's one ``CacheOnlyJudge`` for these arguments."""
    key = ("judge", "cache-only", benchmark, model, str(cache_path) if cache_path else None, endpoint)
    return _one(key, lambda: CacheOnlyJudge(benchmark, model, cache_path, endpoint))

