"""The judge engine: cached, retried, budgeted, concurrent calls to an OpenAI-compatible chat endpoint.

``Judge.ask`` answers a ``Request`` with a ``Result``: a reply, or ``ok=False`` with the reason (a
failure is never silently a score). Only ``JudgeConfigError`` (rejected key, unknown model, bad
variable) is raised: no later request can succeed either.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Sequence

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.accounting import UNNAMED_MODEL, JudgeStats
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache, request_key
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError, cache_path_from_env, default_model, usd
from lmms_video_reasoning.judges.limits import CallBudget, CircuitBreaker
from lmms_video_reasoning.judges.transport import AttemptFailed, ChatEndpoint, RequestFailed, Unreachable, scrub
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.ask import Ask, Request, Result

log = logging.getLogger("lmms_video_reasoning.judges")

# Told of every answered request: (model, prompt tokens, completion tokens, price per 1M or None).
# lmms-eval's usage accounting subscribes (utils/lmms/judge_usage.py); the engine knows no host.
UsageListener = Callable[[str, int, int, "dict[str, float] | None"], None]
_usage_listeners: list[UsageListener] = []


def on_usage(listener: UsageListener) -> None:
    if listener not in _usage_listeners:
        _usage_listeners.append(listener)


# Error of a request that a CacheOnlyJudge could not answer from the cache.
NOT_COMPUTED = "not computed: no verdict for it in the judge cache (its judgment failed or was never made); nothing was sent"


class NotComputed(RequestFailed):
    """A CacheOnlyJudge miss: nothing was sent."""


class BudgetExhausted(RequestFailed):
    """LMMS_VR_JUDGE_MAX_CALLS is spent: the user's limit, not a fault of the endpoint."""


def same_model(requested: str, answered: str) -> bool:
    """Whether a reply's ``model`` field names the requested model: the same name (case and an
    ``org/`` prefix aside), or a dated snapshot of it (``gpt-4o`` -> ``gpt-4o-2024-08-06``)."""
    requested, answered = requested.strip().lower(), answered.strip().lower()
    if requested.rsplit("/", 1)[-1] == answered.rsplit("/", 1)[-1]:
        return True
    suffix = answered[len(requested) + 1:] if answered.startswith(requested + "-") else ""
    return bool(re.fullmatch(r"\d{4}(-\d{2}-\d{2}|\d{4})?", suffix))


class Judge:
    """Thread-safe judge client for one configuration (endpoint, model, cache, budget)."""

    def __init__(self, config: JudgeConfig, budget: CallBudget | None = None, breaker: CircuitBreaker | None = None) -> None:
        self.config = config
        self.stats = JudgeStats(cost_usd=None if config.price() is None else 0.0)  # priced: $0 until a call
        self.budget = budget or CallBudget(config.max_calls, "this judge")
        self.cache = ReplyCache(config.cache_path) if config.cache_path else None
        self.transport = ChatEndpoint(config)
        # Bounds in-flight HTTP requests across map() and direct ask() callers (e.g. lmms-eval's
        # parallel process_results threads), not time spent in backoff sleeps.
        self._in_flight = threading.BoundedSemaphore(config.concurrency)
        self._warned_lock = threading.Lock()
        self._warned: set[str] = set()
        # Shared by the judges of one endpoint (`get_judge`): an outage is found and named once.
        self.breaker = breaker or CircuitBreaker(config.concurrency)

    def ask(self, request: Request) -> Result:
        """The first servable cached reply over the re-ask numbers (a rerun repeats no call that
        succeeded), else HTTP with retries. A fresh reply that parses is cached; one that does not
        is kept in the cache's ``rejected`` table and the request re-asked."""
        validate_request(request)
        keys = request_keys(self.config.model, request)
        refused: dict[int, tuple[CachedReply, str]] = {}
        for attempt, key in enumerate(keys):
            hit, refusal = self._lookup(key, request)
            if hit is not None:
                self._count_answer(hit.answered_by or UNNAMED_MODEL, cached=True)
                return hit
            if refusal is not None:
                refused[attempt] = refusal
        reply: CachedReply | None = None
        parse_error: parsing.ParseError | None = None
        for attempt, key in enumerate(keys):
            try:
                reply = self._fetch(request)
            except NotComputed as missing:
                self.stats.add(request.tag, not_computed=1)
                return Result(False, None, None, str(missing), False)
            except RequestFailed as failure:
                self._request_failed(request.tag, str(failure), endpoint_fault=not isinstance(failure, BudgetExhausted))
                return Result(False, None, reply.raw if reply else None, str(failure), False)
            try:
                value = reply_value(request, reply.raw)
            except parsing.ParseError as error:
                parse_error = error
                if self.cache is not None:
                    self._stored(request.tag, self.cache.reject(key, self.config.model, reply, f"parse: {error}"))
                if attempt < request.max_reasks:
                    self.stats.add(request.tag, reasks=1)
                    log.debug("judge reply did not parse (%s); re-asking (%d/%d)", error, attempt + 1, request.max_reasks)
                continue
            if self.cache is not None:
                if attempt in refused:  # keep what it supersedes
                    self._stored(request.tag, self.cache.reject(key, self.config.model, *refused[attempt]))
                self._stored(request.tag, self.cache.put(key, self.config.model, reply, replace=attempt in refused))
            self._count_answer(reply.answered_by or UNNAMED_MODEL, cached=False)
            self.breaker.request_ended(verdict=True)
            return Result(True, value, reply.raw, None, False, reply.answered_by)
        error = f"parse: {parse_error} (after {len(keys)} replies)"
        self._request_failed(request.tag, error)
        return Result(False, None, reply.raw if reply else None, error, False, reply.answered_by if reply else None)

    def map(self, fn: Callable[[Any, Ask], Any], items: Sequence, desc: str = "judging") -> list:
        """``[fn(item, self.ask) for item in items]`` with ``config.concurrency`` threads, in input order.
        A ``JudgeConfigError`` stops the batch and is re-raised; any other exception of ``fn`` is
        logged, counted in ``stats.failures`` and gives ``None`` (a judge failure, never a score)."""
        from tqdm.auto import tqdm

        items = list(items)
        results: list = [None] * len(items)
        if not items:
            return results

        def run(index: int) -> None:
            try:
                results[index] = fn(items[index], self.ask)
            except JudgeConfigError:
                raise
            except Exception as error:  # noqa: BLE001 - one item's bug must not lose the batch
                self.stats.add("(map)", failures=1)
                log.error("%s: item %d failed: %s: %s", desc, index, type(error).__name__, self._scrub(str(error)))

        workers = min(self.config.concurrency, len(items))
        with tqdm(total=len(items), desc=desc, mininterval=1.0) as bar, ThreadPoolExecutor(workers, "judge") as pool:
            for future in as_completed([pool.submit(run, index) for index in range(len(items))]):
                bar.update(1)
                if future.exception() is not None:  # a JudgeConfigError: the items not started never are
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise future.exception()
        return results

    def accounting(self) -> dict:
        """Stats (with the models that answered), configuration (no key), budget and cache as one JSON-ready dict."""
        summary = {"judge": self.config.public_dict(), "stats": self.stats.as_dict(), "budget": self.budget.as_dict(),
                   "settings": settings.resolved(scoring_only=True)}  # what else decided the scores
        if self.cache is not None:
            try:
                summary["cache"] = self.cache.stats()
            except Exception as error:  # noqa: BLE001 - accounting must not fail on a broken cache
                summary["cache"] = {"path": str(self.cache.path), "error": str(error)}
        return summary

    def write_accounting(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.accounting(), indent=2, sort_keys=True, default=str)
        path.write_text(self._scrub(text) + "\n", encoding="utf-8")

    def log_summary(self) -> None:
        stats = self.stats.as_dict()
        cost = "n/a" if stats["cost_usd"] is None else f"${stats['cost_usd']:.4f}"
        answered = ", ".join(f"{model} x{count}" for model, count in stats["answered_by"].items()) or "none"
        log.info(
            "judge %s: %d calls, %d cache hits, %d failures, %d re-asks, %d retries, %d+%d tokens, est. cost %s; "
            "answered by %s%s",
            self.config.model, stats["calls"], stats["cache_hits"], stats["failures"], stats["reasks"],
            stats["retries"], stats["prompt_tokens"], stats["completion_tokens"], cost, answered,
            f", BUDGET EXHAUSTED ({self.budget.scope})" if stats["budget_exhausted"] else "",
        )
        if stats["cache_errors"]:
            log.error("judge %s: %d judge cache reads/writes failed (%s): a rerun pays again for the verdicts not stored",
                      self.config.model, stats["cache_errors"], self.cache.path if self.cache is not None else "no cache")
        if stats["snapshots"]["other"]:
            log.warning("judge %s: %d verdicts came from another snapshot than %s (%s)", self.config.model,
                        stats["snapshots"]["other"], stats["snapshots"]["current"],
                        ", ".join(f"{name} x{count}" for name, count in stats["snapshots"]["by"].items()))

    def _stored(self, tag: str, ok: bool) -> None:
        if not ok:  # the cache logs the first failed write with its path and fix
            self.stats.add(tag, cache_errors=1)

    def _count_answer(self, model: str, cached: bool) -> None:
        """Count the reply's snapshot; say once when this judge's verdicts come from a second one."""
        if self.stats.add_answer(model, cached):
            snapshots = self.stats.snapshots()
            self._warn_once("snapshots", "judge %r: its verdicts come from more than one model snapshot (%s; %s answering now). "
                            "Cached verdicts of another snapshot are still served under the same name; they are counted in "
                            "the accounting (stats.snapshots.other). To judge with one snapshot, name it (%s) or use a new "
                            "LMMS_VR_JUDGE_CACHE.", self.config.model,
                            ", ".join(f"{name} x{count}" for name, count in snapshots["by"].items()),
                            snapshots["current"] if self.stats.live_snapshot else "none", self.config.model_env)

    def _lookup(self, key: str, request: Request) -> tuple[Result | None, tuple[CachedReply, str] | None]:
        """(the servable cached reply's Result, None) | (None, refused row and why) | (None, None)."""
        if self.cache is None:
            return None, None
        row, read = self.cache.lookup(key)
        if not read:  # counted; the request is asked again
            self.stats.add(request.tag, cache_errors=1)
        if row is None:
            return None, None
        reason = self._untrusted(row)
        value: Any = row.raw
        if reason is None:
            try:
                value = reply_value(request, row.raw)
            except parsing.ParseError as error:
                reason = f"cached reply does not parse: {error}"
        if reason is not None:
            self.stats.add(request.tag, cache_refused=1)
            self._warn_once(reason.split(":")[0], "judge cache %s: a cached reply is not served (%s); asking again", self.cache.path, reason)
            return None, (row, reason)
        self.stats.add(request.tag, cache_hits=1)
        return Result(True, value, row.raw, None, True, row.answered_by), None

    def _untrusted(self, row: CachedReply) -> str | None:
        """Why a cached reply must not be served by this judge, or None."""
        if row.answered_by is None:
            return "recorded before the answering model was kept with each reply"
        if same_model(self.config.model, row.answered_by):
            return None
        if row.endpoint is not None and row.endpoint == self.config.endpoint:
            return None  # this endpoint names its model differently (e.g. an Azure deployment)
        return f"answered by {row.answered_by!r} at {row.endpoint}, not by {self.config.model!r} at {self.config.endpoint}"

    def _fetch(self, request: Request) -> CachedReply:
        """POST with bounded retries (jittered backoff, Retry-After honoured up to a cap); nothing is
        sent once the circuit breaker is open."""
        last_reason = "no attempt made"
        for attempt in range(self.config.max_attempts):
            if self.breaker.opened.is_set():
                raise RequestFailed(self._outage())
            if attempt:
                self.stats.add(request.tag, retries=1)
            self._reserve_call(request.tag)
            try:
                with self._in_flight:
                    if self.breaker.opened.is_set():  # opened while this request waited for a slot
                        raise RequestFailed(self._outage())
                    reply = self.transport.post(request)
            except AttemptFailed as failure:
                last_reason = str(failure)
                if self.breaker.attempt_failed(last_reason, isinstance(failure, Unreachable)):
                    self._announce_outage()
                if attempt + 1 < self.config.max_attempts:
                    self.breaker.opened.wait(self._delay(attempt, failure.retry_after))
                continue
            self.breaker.attempt_answered()
            self._charge(request.tag, reply)
            self.stats.add(request.tag, usage_unreported=int(not reply.usage_ok))
            if not same_model(self.config.model, reply.answered_by or UNNAMED_MODEL):
                self._warn_once(f"answered:{reply.answered_by}", "judge endpoint %s answers requests for %r as %r; its replies are recorded "
                                "(cache, accounting) as that model's", self.config.endpoint, self.config.model, reply.answered_by)
            return reply
        raise RequestFailed(f"{last_reason} after {self.config.max_attempts} attempts")

    def _request_failed(self, tag: str, reason: str, endpoint_fault: bool = True) -> None:
        self.stats.add_failure(tag, reason)
        if endpoint_fault and self.breaker.request_ended(verdict=False, reason=reason):
            self._announce_outage()

    def _outage(self) -> str:
        """Record the outage in the stats (once); the error of a request it stops."""
        with self.stats._lock:
            if self.stats.outage is None:
                self.stats.outage = {"endpoint": self.config.public_dict()["base_url"], "model": self.config.model,
                                     "reason": self.breaker.reason}
        return f"judge unavailable (circuit breaker open): {self.breaker.reason}"

    def _announce_outage(self) -> None:
        """The one log line of an outage: the endpoint, the cause, what happens and the fix."""
        config = self.config
        self._outage()
        log.error("judge %r at %s is unavailable: %s. Judging stopped for this process: the judgments not made are "
                  "reported as failed (metrics past the failure share are not computed), nothing is cached for them, "
                  "and `lmms-vr score <output_path>` re-sends exactly those once the endpoint works (check %s and %s).",
                  config.model, config.public_dict()["base_url"], self._scrub(self.breaker.reason or ""), config.base_url_env, config.key_env)

    def _reserve_call(self, tag: str) -> None:
        if not self.budget.reserve():
            if not self.stats.budget_exhausted:
                self.stats.budget_exhausted = True
                log.warning("judge budget exhausted: %d calls made by %s (LMMS_VR_JUDGE_MAX_CALLS=%s); further uncached "
                            "requests fail", self.budget.used, "this process" if self.budget.scope == "process" else "this judge",
                            self.budget.max_calls)
            raise BudgetExhausted("budget exhausted")
        self.stats.add(tag, calls=1)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.config.retry_after_cap)
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2**attempt)
        return ceiling * (0.5 + random.random() / 2)  # jitter de-synchronises the workers

    def _charge(self, tag: str, reply: CachedReply) -> None:
        """Count a reply's tokens and cost (and tell the usage listeners)."""
        self.stats.add(tag, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        price = self.config.price()
        if price is not None:
            self.stats.add_cost(usd(price, reply.prompt_tokens, reply.completion_tokens))
        for listener in _usage_listeners:
            try:
                listener(self.config.model, reply.prompt_tokens, reply.completion_tokens, price)
            except Exception as error:  # noqa: BLE001 - accounting never costs a verdict
                self._warn_once("usage", "judge usage listener failed (%s: %s); usage may be incomplete", type(error).__name__, error)

    def _warn_once(self, topic: str, message: str, *args: Any) -> None:
        with self._warned_lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        log.warning(message, *args)

    def _scrub(self, text: str) -> str:
        return scrub(text, self.config.api_key)


class CacheOnlyJudge(Judge):
    """Verdicts read from the judge cache alone (no endpoint, no key), served exactly when a configured
    judge of ``model`` (default: what the environment names) at ``endpoint`` would serve them; any other
    request is ``NOT_COMPUTED``, counted in ``stats.not_computed``."""

    def __init__(self, benchmark: str, model: str | None = None, cache_path: str | Path | None = None,
                 endpoint: str | None = None) -> None:
        path = Path(cache_path) if cache_path is not None else cache_path_from_env()
        if path is None:
            raise JudgeConfigError("the judge cache is off (LMMS_VR_JUDGE_CACHE=off): no cached verdict can be read")
        config = JudgeConfig(model=model or default_model(benchmark), base_url=endpoint, benchmark=benchmark,
                             model_env="(cache only)", cache_path=path, max_calls=0)
        super().__init__(config)

    def _fetch(self, request: Request) -> CachedReply:
        raise NotComputed(NOT_COMPUTED)


def request_keys(model: str, request: Request) -> list[str]:
    """The cache keys of the first ask and each re-ask."""
    replies = request.max_reasks + 1 if request.parse else 1
    return [request_key(model, request.messages, request.max_tokens, request.temperature, attempt) for attempt in range(replies)]


def reply_value(request: Request, raw: str) -> Any:
    """The request's value of a reply. An empty reply is never an answer, whatever the parser
    accepts (what an overloaded endpoint sends with HTTP 200): it is re-asked, never cached."""
    if not raw.strip():
        raise parsing.ParseError("empty reply")
    return request.parse(raw) if request.parse else raw


def validate_request(request: Request) -> None:
    if not isinstance(request, Request):
        raise TypeError(f"Judge.ask takes a Request, got {type(request).__name__}")
    if not isinstance(request.messages, list) or not request.messages:
        raise ValueError("Request.messages must be a non-empty list of chat messages")
    if request.max_reasks < 0:
        raise ValueError(f"Request.max_reasks must be >= 0, got {request.max_reasks}")

