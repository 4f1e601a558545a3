"""Judge verdicts read back from the judge cache, with no endpoint and no key.

`lmms-vr report` recomputes per-sample outcomes for its confidence intervals; every verdict
it needs was paid for during the run and sits in the judge cache, keyed by the request and
the judge model. `CachedVerdicts` offers the `ask` / `map` a benchmark's judging code calls,
answers each request from the cache (with the engine's re-ask sequence), and never sends a
request: a verdict not in the cache is a failed request, counted in `missing`, so the caller
knows the outcomes are incomplete rather than scoring a failure.

A small reader over `judges/cache.py`'s public API (`ReplyCache`, `request_key`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.cache import ReplyCache, request_key
from lmms_video_reasoning.judges.engine import JudgeRequest, JudgeResult

log = logging.getLogger("lmms_video_reasoning.report")

NOT_CACHED = "not in the judge cache"


class CachedVerdicts:
    """A cache-only stand-in for `judges.Judge` (sequential; reads are local)."""

    def __init__(self, model: str | None, cache_path: str | Path | None) -> None:
        """`cache_path` None: no cache at all (every request is missing)."""
        self.model = model
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.cache = ReplyCache(self.cache_path) if self.cache_path is not None and model is not None else None
        self.missing = 0  # requests without a cached answer
        self.item_errors: list[str] = []  # judging items whose requests could not even be rebuilt (e.g. media absent)
        self.hits = 0
        self._lock = threading.Lock()

    def ask(self, request: JudgeRequest) -> JudgeResult:
        raw: str | None = None
        error = NOT_CACHED
        for attempt in range(request.max_reasks + 1 if request.parse else 1):
            key = request_key(self.model, request.messages, request.max_tokens, request.temperature, attempt) if self.cache else None
            hit = self.cache.get(key) if self.cache else None
            if hit is None:
                with self._lock:
                    self.missing += 1
                return JudgeResult(ok=False, value=None, raw=raw, error=NOT_CACHED, cached=False)
            with self._lock:
                self.hits += 1
            raw = hit.raw
            if request.parse is None:
                return JudgeResult(ok=True, value=raw, raw=raw, error=None, cached=True)
            try:
                return JudgeResult(ok=True, value=request.parse(raw), raw=raw, error=None, cached=True)
            except parsing.ParseError as parse_error:
                error = f"parse: {parse_error} (after {attempt + 1} replies)"
        # every re-ask is cached and none parsed: the run's own judge failure, a real outcome
        return JudgeResult(ok=False, value=None, raw=raw, error=error, cached=True)

    def map(self, fn: Callable[[Any, Callable[[JudgeRequest], JudgeResult]], Any], items: Sequence, desc: str = "") -> list:
        results = []
        for index, item in enumerate(items):
            try:
                results.append(fn(item, self.ask))
            except Exception as error:  # noqa: BLE001 - as the engine: one item's failure is that item's
                log.warning("%s: item %d could not be re-read (%s: %s)", desc or "judging", index, type(error).__name__, error)
                with self._lock:
                    self.item_errors.append(f"{type(error).__name__}: {error}")
                results.append(None)
        return results

    def shortfall(self) -> int:
        """Requests and items not answered from the cache so far."""
        return self.missing + len(self.item_errors)

    def log_summary(self) -> None:
        log.info("judge cache %s (model %s): %d cached replies read, %d requests not cached", self.cache_path, self.model, self.hits, self.missing)
