"""The judge engine: cached, retried, budgeted, concurrent calls to an OpenAI-compatible chat endpoint.

``Judge.ask`` answers one ``JudgeRequest`` (blocking, thread-safe); ``Judge.map`` runs a
function over many items with bounded concurrency, so a benchmark's dependent steps
(extract -> score) chain per item without serialising the batch. Every request ends in a
``JudgeResult``: a reply, or ``ok=False`` with the reason — a failure is never silently a
score. Only ``JudgeConfigError`` (rejected key, unknown model, bad variable) is raised,
because no later request can succeed either.

What may be served from the cache: a reply that parsed, answered by the requested model
(the response's ``model`` field, or a dated snapshot of it) or by the same endpoint. A
reply that did not parse is kept in the cache's ``rejected`` table and never served.
``CacheOnlyJudge`` serves cached verdicts with no endpoint and no key.
"""

from __future__ import annotations

import email.utils
import heapq
import itertools
import json
import logging
import math
import random
import re
import socket
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache, request_key
from lmms_video_reasoning.judges.config import (
    DUMMY_API_KEY,
    OPENAI_DEFAULT_BASE_URL,
    JudgeConfig,
    JudgeConfigError,
    JudgeDefaults,
    cache_path_from_env,
    connect_error_reason,
    default_model,
    judge_name,
    not_configured_message,
)
from lmms_video_reasoning.utils.core import settings

log = logging.getLogger("lmms_video_reasoning.judges")

# Told of every answered request: (model, prompt tokens, completion tokens, price per 1M or None).
# lmms-eval's usage accounting subscribes (utils/lmms/judge_usage.py); the engine knows no host.
UsageListener = Callable[[str, int, int, "dict[str, float] | None"], None]
_usage_listeners: list[UsageListener] = []


def on_usage(listener: UsageListener) -> None:
    """Call `listener` for every answered judge request (once per listener)."""
    if listener not in _usage_listeners:
        _usage_listeners.append(listener)

T = TypeVar("T")
R = TypeVar("R")

# Statuses that say "this request/credential/model is wrong": retrying cannot help.
_CONFIG_STATUSES = (401, 403, 404)
# 400 usually concerns one request (e.g. a response too long for the judge's context): that
# request fails alone. Only when every request so far got a 400 is it the configuration.
_BAD_REQUESTS_BEFORE_CONFIG_ERROR = 8
_RETRY_STATUSES = (408, 409, 429)
# Recorded as the answering model when a reply has no `model` field.
UNNAMED_MODEL = "(not named in the reply)"
# Error of a request that a CacheOnlyJudge could not answer from the cache.
NOT_COMPUTED = "not computed: no verdict for it in the judge cache (its judgment failed or was never made); nothing was sent"


@dataclass(frozen=True)
class JudgeRequest:
    """One chat completion to judge with; ``messages`` are OpenAI chat messages."""

    messages: list[dict]
    max_tokens: int = 2048
    temperature: float | None = 0.0  # None: not sent (some official evaluations leave it unset)
    parse: Callable[[str], Any] | None = None  # raises parsing.ParseError -> re-ask
    max_reasks: int = 2
    tag: str = ""  # e.g. "<benchmark>.recall", for the per-tag accounting
    # Protocol facts for the cost estimate and batch judging (judges/batch.py); they never change a verdict:
    expected_reply: str | None = None  # a typical reply in the protocol's format (its tokens; the estimate follows it)
    later_steps: int = 0  # judge calls that may follow this one in its chain, depending on its reply


@dataclass
class JudgeResult:
    ok: bool
    value: Any  # parse(raw) when parse is given, else the raw text; None when not ok
    raw: str | None  # last raw reply, kept even when it failed to parse
    error: str | None
    cached: bool  # the final reply came from the cache
    answered_by: str | None = None  # the model that produced the reply (response `model` field)


# calls: HTTP requests sent (retries included); cache_refused: cached replies not served
# (did not parse, another judge's, or recorded before the answering model was kept);
# not_computed: CacheOnlyJudge misses; usage_unreported: replies without a valid `usage`;
# cache_errors: cache reads and writes that failed (a verdict not stored is paid for again);
# batch_failed / batch_due: not_computed requests the offline batch flow holds (judges/batch.py,
# `BatchBoundJudge`): failed in its batches / exported or due again but not answered yet.
_COUNTERS = ("calls", "cache_hits", "cache_refused", "failures", "not_computed", "reasks", "retries",
             "prompt_tokens", "completion_tokens", "usage_unreported", "cache_errors", "batch_failed", "batch_due")


@dataclass
class JudgeStats:
    """Thread-safe accounting of one Judge."""

    calls: int = 0
    cache_hits: int = 0
    cache_refused: int = 0
    failures: int = 0
    not_computed: int = 0
    reasks: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_unreported: int = 0
    cache_errors: int = 0
    batch_failed: int = 0
    batch_due: int = 0
    cost_usd: float | None = None
    budget_exhausted: bool = False
    answered_by: dict[str, int] = field(default_factory=dict)  # answering model -> replies used
    live_snapshot: str | None = None  # the model named by the latest fresh (not cached) reply
    by_tag: dict[str, dict[str, int]] = field(default_factory=dict)
    failure_reasons: dict[str, int] = field(default_factory=dict)  # why requests failed -> how many
    outage: dict | None = None  # set when the circuit breaker stopped judging (endpoint, reason)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, tag: str = "", **deltas: int) -> None:
        with self._lock:
            per_tag = self.by_tag.setdefault(tag or "(untagged)", dict.fromkeys(_COUNTERS, 0))
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)
                per_tag[name] += delta

    def add_answer(self, model: str, cached: bool = False) -> bool:
        """Count a reply used, by the model (snapshot) that answered it; True when this is the
        first reply of a second snapshot (the verdicts of this judge then mix snapshots)."""
        with self._lock:
            known = set(self.answered_by) - {UNNAMED_MODEL}
            self.answered_by[model] = self.answered_by.get(model, 0) + 1
            if not cached:
                self.live_snapshot = model
            return model != UNNAMED_MODEL and bool(known) and model not in known

    def snapshots(self) -> dict:
        """{"current": the snapshot answering now (else the most frequent), "other": replies used
        from any other snapshot, "by": {snapshot: replies}} (replies naming no model left out)."""
        with self._lock:
            by = {model: count for model, count in self.answered_by.items() if model != UNNAMED_MODEL}
            current = self.live_snapshot if self.live_snapshot in by else max(by, key=by.get, default=None)
            return {"current": current, "other": sum(count for model, count in by.items() if model != current), "by": dict(sorted(by.items()))}

    def add_failure(self, tag: str, reason: str) -> None:
        """One request that ended without a verdict, and why (the accounting keeps the reasons)."""
        self.add(tag, failures=1)
        with self._lock:
            self.failure_reasons[reason] = self.failure_reasons.get(reason, 0) + 1

    def add_cost(self, usd: float) -> None:
        with self._lock:
            self.cost_usd = (self.cost_usd or 0.0) + usd

    def as_dict(self) -> dict:
        snapshots = self.snapshots()
        with self._lock:
            out = {name: getattr(self, name) for name in _COUNTERS}
            out["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
            out["budget_exhausted"] = self.budget_exhausted
            out["answered_by"] = dict(sorted(self.answered_by.items()))
            out["snapshots"] = snapshots
            out["by_tag"] = {tag: dict(counts) for tag, counts in sorted(self.by_tag.items())}
            out["failure_reasons"] = dict(sorted(self.failure_reasons.items(), key=lambda item: -item[1]))
            out["outage"] = dict(self.outage) if self.outage else None
            return out


class CallBudget:
    """At most ``max_calls`` HTTP requests, shared by every Judge holding this budget.

    ``get_judge`` gives all judges of a process one budget (LMMS_VR_JUDGE_MAX_CALLS is per
    process, whatever the number of benchmarks or tasks); a Judge built directly has its own.
    """

    def __init__(self, max_calls: int | None, scope: str) -> None:
        self.max_calls = max_calls
        self.scope = scope
        self.used = 0
        self.exhausted = False
        self._lock = threading.Lock()

    def reserve(self) -> bool:
        """Count one request; False (and nothing counted) once the budget is spent."""
        with self._lock:
            if self.max_calls is not None and self.used >= self.max_calls:
                self.exhausted = True
                return False
            self.used += 1
            return True

    def as_dict(self) -> dict:
        with self._lock:
            return {"scope": self.scope, "max_calls": self.max_calls, "calls": self.used, "exhausted": self.exhausted}


class _AttemptFailed(Exception):
    """One HTTP attempt failed in a retryable way; ``retry_after`` is the server's hint (s)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _RequestFailed(Exception):
    """A request failed for good (attempts used up, a non-retryable status, budget)."""


class _NotComputed(_RequestFailed):
    """A CacheOnlyJudge miss: nothing was sent."""


class _BudgetExhausted(_RequestFailed):
    """LMMS_VR_JUDGE_MAX_CALLS is spent: the user's limit, not a fault of the endpoint."""


class _Unreachable(_AttemptFailed):
    """The endpoint could not be connected to (refused, host name unknown, TLS handshake)."""


# The circuit breaker's rules (see `CircuitBreaker`).
UNREACHABLE_IN_A_ROW = 3
FAILED_REQUESTS_BEFORE_ANY_VERDICT = 8


class CircuitBreaker:
    """Stops judging when the endpoint is down, so an outage costs seconds and is named once.

    It opens (for the rest of the judge's life) when
    - `UNREACHABLE_IN_A_ROW` attempts in a row could not connect (connection refused, a host
      name that does not resolve, a TLS error), whatever came before: the server is gone;
    - `attempt_limit` attempts in a row failed (HTTP 5xx, malformed bodies, timeouts) with no
      reply between them: max(16, 2 x concurrency + 8), so a merely flaky endpoint (every
      request answered after a few retries) never reaches it, while a dead one does within
      about three backoff rounds;
    - the first `FAILED_REQUESTS_BEFORE_ANY_VERDICT` requests all ended without a verdict
      (e.g. an endpoint whose every reply is garbage).
    Once open, requests fail at once with the reason, sleeping retries wake up and give up,
    nothing is cached, and cached verdicts are still served: a later run re-sends exactly the
    judgments that were not made.
    """

    def __init__(self, concurrency: int) -> None:
        self.attempt_limit = max(16, 2 * concurrency + 8)
        self.reason: str | None = None
        self._opened = threading.Event()
        self._lock = threading.Lock()
        self._unreachable = 0
        self._failed_attempts = 0
        self._failed_requests = 0
        self._verdicts = 0

    @property
    def open(self) -> bool:
        return self._opened.is_set()

    def attempt_failed(self, reason: str, unreachable: bool) -> bool:
        """Count a failed HTTP attempt; True when this one opened the breaker."""
        with self._lock:
            self._unreachable = self._unreachable + 1 if unreachable else 0
            self._failed_attempts += 1
            if self._unreachable >= UNREACHABLE_IN_A_ROW:
                return self._trip(f"{reason} ({self._unreachable} attempts in a row)")
            if self._failed_attempts >= self.attempt_limit:
                return self._trip(f"{reason} ({self._failed_attempts} failed attempts in a row, no reply between them)")
            return False

    def attempt_answered(self) -> None:
        with self._lock:
            self._unreachable = self._failed_attempts = 0

    def request_ended(self, verdict: bool, reason: str = "") -> bool:
        """Count a request's end; True when this failure opened the breaker."""
        with self._lock:
            if verdict:
                self._verdicts += 1
                return False
            self._failed_requests += 1
            if not self._verdicts and self._failed_requests >= FAILED_REQUESTS_BEFORE_ANY_VERDICT:
                return self._trip(f"the first {self._failed_requests} requests all failed, the last with: {reason}")
            return False

    def wait(self, seconds: float) -> None:
        """Sleep before a retry; returns at once when the breaker opens."""
        self._opened.wait(seconds)

    def _trip(self, reason: str) -> bool:
        if self._opened.is_set():
            return False
        self.reason = reason
        self._opened.set()
        return True


class _Watchdog:
    """One daemon thread that shuts down the socket of any request still running at its deadline.

    httpx's timeouts bound each socket read, not a request: a server sending one byte a
    second would never time out. Shutting the socket down makes the blocked read fail at once.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, socket.socket]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, sock: socket.socket | None) -> int | None:
        if sock is None:
            return None
        with self._condition:
            token = next(self._ids)
            heapq.heappush(self._heap, (deadline, token, sock))
            self._live.add(token)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="judge-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0][1] == token:  # an earlier deadline than the thread is waiting for
                self._condition.notify()
            return token

    def cancel(self, token: int | None) -> None:
        if token is not None:
            with self._condition:
                self._live.discard(token)

    def _run(self) -> None:
        with self._condition:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][1] not in self._live or self._heap[0][0] <= now):
                    _deadline, token, sock = heapq.heappop(self._heap)
                    if token in self._live:
                        self._live.discard(token)
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                self._condition.wait(timeout=self._heap[0][0] - now if self._heap else None)


_WATCHDOG = _Watchdog()


def _socket_of(response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    try:
        return stream.get_extra_info("socket") if stream is not None else None
    except Exception:  # noqa: BLE001 - a transport without a socket: per-chunk deadline checks still apply
        return None


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
        self.stats = JudgeStats()
        self.budget = budget or CallBudget(config.max_calls, "this judge")
        if config.price() is not None:
            self.stats.cost_usd = 0.0
        self.cache = ReplyCache(config.cache_path) if config.cache_path else None
        self._client = None
        self._client_lock = threading.Lock()
        # Bounds in-flight HTTP requests across map() and direct ask() callers (e.g. lmms-eval's
        # parallel process_results threads), not time spent in backoff sleeps.
        self._in_flight = threading.BoundedSemaphore(config.concurrency)
        self._status_lock = threading.Lock()
        self._succeeded = False
        self._bad_requests_in_a_row = 0
        self._warned: set[str] = set()
        # Shared by the judges of one endpoint (`get_judge`): an outage is found and named once.
        self.breaker = breaker or CircuitBreaker(config.concurrency)

    # ------------------------------------------------------------------ public API

    def ask(self, request: JudgeRequest) -> JudgeResult:
        """Answer one request: cache, else HTTP with retries; parse and re-ask if a parser is given.

        The first cached reply (over the re-ask numbers) that may be served is (see
        ``_lookup``); otherwise the endpoint is asked. A fresh reply that parses is cached;
        one that does not is kept in the cache's ``rejected`` table and the request re-asked.
        """
        _validate(request)
        keys = request_keys(self.config.model, request)
        replies = len(keys)
        # A verdict reached after re-asks is served too: a rerun repeats no call that succeeded.
        refused: dict[int, tuple[CachedReply, str]] = {}
        for attempt, key in enumerate(keys):
            hit, refusal = self._lookup(key, request)
            if hit is not None:
                cached_reply, value = hit
                self._count_answer(cached_reply.answered_by or UNNAMED_MODEL, cached=True)
                return JudgeResult(True, value, cached_reply.raw, None, True, cached_reply.answered_by)
            if refusal is not None:
                refused[attempt] = refusal
        reply: CachedReply | None = None
        parse_error: parsing.ParseError | None = None
        for attempt, key in enumerate(keys):
            try:
                reply = self._fetch(request, key)
            except _NotComputed as missing:
                self.stats.add(request.tag, not_computed=1)
                return JudgeResult(False, None, None, str(missing), False)
            except _RequestFailed as failure:
                self._request_failed(request.tag, str(failure), endpoint_fault=not isinstance(failure, _BudgetExhausted))
                return JudgeResult(False, None, reply.raw if reply else None, str(failure), False)
            try:
                value = _read(request, reply.raw)
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
            return JudgeResult(True, value, reply.raw, None, False, reply.answered_by)
        error = f"parse: {parse_error} (after {replies} replies)"
        self._request_failed(request.tag, error)
        return JudgeResult(False, None, reply.raw if reply else None, error, False, reply.answered_by if reply else None)

    def map(self, fn: Callable[[T, Callable[[JudgeRequest], JudgeResult]], R], items: Sequence[T], desc: str = "judging") -> list[R | None]:
        """``[fn(item, self.ask) for item in items]`` with ``config.concurrency`` threads, in input order.

        ``fn`` may call ``ask`` several times in sequence (dependent steps). A
        ``JudgeConfigError`` stops the batch and is re-raised. Any other exception raised by
        ``fn`` is logged with the item index, counted in ``stats.failures`` and gives ``None``
        in that slot: callers must treat ``None`` as a judge failure, never as a score.
        """
        from tqdm.auto import tqdm

        items = list(items)
        results: list[R | None] = [None] * len(items)
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
            futures = [pool.submit(run, index) for index in range(len(items))]
            for future in futures:
                future.add_done_callback(lambda _f: bar.update(1))
            done, _pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise future.exception()
        return results

    def accounting(self, extra: dict | None = None) -> dict:
        """Stats (with the models that answered), configuration (no key), budget and cache as one JSON-ready dict."""
        summary = {"judge": self.config.public_dict(), "stats": self.stats.as_dict(), "budget": self.budget.as_dict(),
                   "settings": settings.resolved(scoring_only=True)}  # what else decided the scores
        if self.cache is not None:
            try:
                summary["cache"] = self.cache.stats()
            except Exception as error:  # noqa: BLE001 - accounting must not fail on a broken cache
                summary["cache"] = {"path": str(self.cache.path), "error": str(error)}
        if extra:
            summary["extra"] = extra
        return summary

    def write_accounting(self, path: str | Path, extra: dict | None = None) -> None:
        """Write ``accounting(extra)`` as JSON to ``path`` (the key is never part of it)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.accounting(extra), indent=2, sort_keys=True, default=str)
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

    # ------------------------------------------------------------------ one reply

    def _stored(self, tag: str, ok: bool) -> None:
        """Count a cache write that failed (the cache logs the first with its path and fix)."""
        if not ok:
            self.stats.add(tag, cache_errors=1)

    def _count_answer(self, model: str, cached: bool) -> None:
        """Count the reply's snapshot; say once when this judge's verdicts come from a second one
        (e.g. `gpt-4o` answered by gpt-4o-2024-08-06 for the cached verdicts, gpt-4o-2024-11-20 now)."""
        if self.stats.add_answer(model, cached):
            snapshots = self.stats.snapshots()
            self._warn_once("snapshots", "judge %r: its verdicts come from more than one model snapshot (%s; %s answering now). "
                            "Cached verdicts of another snapshot are still served under the same name; they are counted in "
                            "the accounting (stats.snapshots.other). To judge with one snapshot, name it (%s) or use a new "
                            "LMMS_VR_JUDGE_CACHE.", self.config.model,
                            ", ".join(f"{name} x{count}" for name, count in snapshots["by"].items()),
                            snapshots["current"] if self.stats.live_snapshot else "none", self.config.model_env)

    def _lookup(self, key: str, request: JudgeRequest) -> tuple[tuple[CachedReply, Any] | None, tuple[CachedReply, str] | None]:
        """(servable cached reply and its parsed value, None) | (None, refused row and why) | (None, None)."""
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
                value = _read(request, row.raw)
            except parsing.ParseError as error:
                reason = f"cached reply does not parse: {error}"
        if reason is not None:
            self.stats.add(request.tag, cache_refused=1)
            self._warn_once(reason.split(":")[0], "judge cache %s: a cached reply is not served (%s); asking again", self.cache.path, reason)
            return None, (row, reason)
        self.stats.add(request.tag, cache_hits=1)
        return (row, value), None

    def _untrusted(self, row: CachedReply) -> str | None:
        """Why a cached reply must not be served by this judge, or None."""
        if row.answered_by is None:
            return "recorded before the answering model was kept with each reply"
        if same_model(self.config.model, row.answered_by):
            return None
        if row.endpoint is not None and row.endpoint == self.config.endpoint:
            return None  # this endpoint names its model differently (e.g. an Azure deployment)
        return f"answered by {row.answered_by!r} at {row.endpoint}, not by {self.config.model!r} at {self.config.endpoint}"

    def _fetch(self, request: JudgeRequest, key: str = "") -> CachedReply:
        """POST with bounded retries: backoff with jitter, Retry-After honoured (capped);
        nothing is sent once the circuit breaker is open."""
        last_reason = "no attempt made"
        for attempt in range(self.config.max_attempts):
            if self.breaker.open:
                raise _RequestFailed(self._outage_error())
            if attempt:
                self.stats.add(request.tag, retries=1)
            self._reserve_call(request.tag)
            try:
                with self._in_flight:
                    if self.breaker.open:  # opened while this request waited for a slot
                        raise _RequestFailed(self._outage_error())
                    reply = self._post(request)
            except _AttemptFailed as failure:
                last_reason = failure.reason
                if self.breaker.attempt_failed(failure.reason, isinstance(failure, _Unreachable)):
                    self._announce_outage()
                if attempt + 1 < self.config.max_attempts:
                    self.breaker.wait(self._delay(attempt, failure.retry_after))
                continue
            self.breaker.attempt_answered()
            self.stats.add(request.tag, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
            self._charge(reply)
            if not reply.usage_ok:
                self.stats.add(request.tag, usage_unreported=1)
            if not same_model(self.config.model, reply.answered_by or UNNAMED_MODEL):
                self._warn_once(f"answered:{reply.answered_by}", "judge endpoint %s answers requests for %r as %r; its replies are recorded "
                                "(cache, accounting) as that model's", self.config.endpoint, self.config.model, reply.answered_by)
            with self._status_lock:
                self._succeeded, self._bad_requests_in_a_row = True, 0
            return reply
        raise _RequestFailed(f"{last_reason} after {self.config.max_attempts} attempts")

    def _request_failed(self, tag: str, reason: str, endpoint_fault: bool = True) -> None:
        self.stats.add_failure(tag, reason)
        if endpoint_fault and self.breaker.request_ended(verdict=False, reason=reason):
            self._announce_outage()

    def _outage_error(self) -> str:
        self._record_outage()
        return f"judge unavailable (circuit breaker open): {self.breaker.reason}"

    def _record_outage(self) -> None:
        with self.stats._lock:
            if self.stats.outage is None:
                self.stats.outage = {"endpoint": self.config.public_dict()["base_url"], "model": self.config.model,
                                     "reason": self.breaker.reason}

    def _announce_outage(self) -> None:
        """The one log line of an outage: the endpoint, the cause, what happens and the fix."""
        config = self.config
        endpoint = config.public_dict()["base_url"]
        self._record_outage()
        log.error("judge %r at %s is unavailable: %s. Judging stopped for this process: the judgments not made are "
                  "reported as failed (metrics past the failure share are not computed), nothing is cached for them, "
                  "and `lmms-vr score <output_path>` re-sends exactly those once the endpoint works (check %s and %s).",
                  config.model, endpoint, self._scrub(self.breaker.reason or ""), config.base_url_env, config.key_env)

    def _reserve_call(self, tag: str) -> None:
        """Count one HTTP request against the budget, or fail the request if it is spent."""
        if not self.budget.reserve():
            if not self.stats.budget_exhausted:
                self.stats.budget_exhausted = True
                log.warning("judge budget exhausted: %d calls made by %s (LMMS_VR_JUDGE_MAX_CALLS=%s); further uncached "
                            "requests fail", self.budget.used, "this process" if self.budget.scope == "process" else "this judge",
                            self.budget.max_calls)
            raise _BudgetExhausted("budget exhausted")
        self.stats.add(tag, calls=1)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.config.retry_after_cap)
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2**attempt)
        return ceiling * (0.5 + random.random() / 2)  # jitter de-synchronises the workers

    def _charge(self, reply: CachedReply) -> None:
        price = self.config.price()
        if price is not None:
            self.stats.add_cost((reply.prompt_tokens * price["input"] + reply.completion_tokens * price["output"]) / 1e6)
        for listener in _usage_listeners:
            try:
                listener(self.config.model, reply.prompt_tokens, reply.completion_tokens, price)
            except Exception as error:  # noqa: BLE001 - accounting never costs a verdict
                self._warn_once("usage", "judge usage listener failed (%s: %s); usage may be incomplete", type(error).__name__, error)

    def _warn_once(self, topic: str, message: str, *args: Any) -> None:
        with self._status_lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        log.warning(message, *args)

    # ------------------------------------------------------------------ HTTP

    def _http(self):
        with self._client_lock:
            if self._client is None:
                import httpx

                key = self.config.api_key or DUMMY_API_KEY
                self._client = httpx.Client(
                    base_url=(self.config.base_url or OPENAI_DEFAULT_BASE_URL).rstrip("/") + "/",
                    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": "application/json"},
                    timeout=httpx.Timeout(self.config.timeout),
                    limits=httpx.Limits(max_connections=self.config.concurrency, max_keepalive_connections=self.config.concurrency),
                )
            return self._client

    def _post(self, request: JudgeRequest) -> CachedReply:
        """One HTTP attempt, bounded as a whole by ``config.timeout`` and ``config.max_reply_bytes``.

        Raises _AttemptFailed (retry), JudgeConfigError or _RequestFailed.
        """
        import httpx

        payload = json.dumps(request_body(self.config.model, request), ensure_ascii=False).encode("utf-8")
        deadline = time.monotonic() + self.config.timeout
        token = None
        try:
            with self._http().stream("POST", "chat/completions", content=payload) as response:
                token = _WATCHDOG.watch(deadline, _socket_of(response))
                data = self._read_body(response, deadline)
                status, headers = response.status_code, response.headers
        except httpx.ConnectTimeout:
            raise _AttemptFailed("timeout while connecting") from None
        except httpx.TimeoutException:
            raise _AttemptFailed("timeout") from None
        except httpx.ConnectError as error:
            raise _Unreachable(connect_error_reason(error, self.config.endpoint)) from None
        except (httpx.HTTPError, OSError) as error:  # incl. a body cut off by the watchdog or the server
            if time.monotonic() >= deadline - 0.05:
                raise _AttemptFailed(f"timeout (the reply took over {self.config.timeout:g} s)") from None
            raise _AttemptFailed(f"connection error ({type(error).__name__})") from None
        finally:
            _WATCHDOG.cancel(token)
        if status >= 300:
            self._raise_for_status(status, data, headers)
        return parse_completion(data, self.config.endpoint)

    def _read_body(self, response, deadline: float) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            refusal = reply_too_large(size, self.config.max_reply_bytes)
            if refusal:
                raise _RequestFailed(refusal)
            if time.monotonic() > deadline:
                raise _AttemptFailed(f"timeout (the reply was still arriving after {self.config.timeout:g} s)")
            chunks.append(chunk)
        return b"".join(chunks)

    def _raise_for_status(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        detail = self._scrub(_error_detail(data))
        if status in _CONFIG_STATUSES:
            raise JudgeConfigError(self._config_message(status, detail)) from None
        if status == 400:
            with self._status_lock:
                self._bad_requests_in_a_row += 1
                systematic = not self._succeeded and self._bad_requests_in_a_row >= _BAD_REQUESTS_BEFORE_CONFIG_ERROR
            if systematic:
                raise JudgeConfigError(self._config_message(status, detail)) from None
        if status in _RETRY_STATUSES or status >= 500:
            raise _AttemptFailed(f"http {status}", retry_after_seconds(headers))
        raise _RequestFailed(f"http {status}: {detail}")

    def _config_message(self, status: int, detail: str) -> str:
        config = self.config
        where = f"judge endpoint {config.public_dict()['base_url']} (model {config.model!r}, benchmark {config.benchmark})"
        if status in (401, 403):
            fix = f"check the API key in {config.key_env}" + (
                f" (a server at {config.base_url_env} gets its key from LMMS_VR_JUDGE_API_KEY)" if config.key_env == "LMMS_VR_JUDGE_API_KEY" else ""
            )
        elif status == 404:
            fix = f"check the model name ({config.model_env}) and the base URL ({config.base_url_env}; it usually ends in /v1)"
        else:
            fix = f"check the model ({config.model_env}) and endpoint ({config.base_url_env}) support this request"
        return f"HTTP {status} from {where}: {detail or 'no detail'}. {fix}; not retrying."

    def _scrub(self, text: str) -> str:
        """Remove the key (and key-looking fragments servers echo back) from text."""
        key = self.config.api_key
        if key and key != DUMMY_API_KEY:
            text = text.replace(key, "***")
        text = re.sub(r"\b(sk|key)-[A-Za-z0-9_\-*.]{3,}", r"\1-***", text)
        return re.sub(r"(Incorrect API key provided:)\s*\S+", r"\1 ***", text)


class CacheOnlyJudge(Judge):
    """Verdicts read from the judge cache alone: no endpoint, no key, no HTTP request.

    A cached reply is served exactly when a configured judge of ``model`` would serve it
    (it parses, and was answered by ``model`` or a dated snapshot of it, or by ``endpoint``
    when given); any other request gives ``JudgeResult(ok=False, error=NOT_COMPUTED)``,
    counted in ``stats.not_computed``, never sent anywhere. Pass the ``model`` the run was
    judged with (its accounting's ``judge.model``); default: what the environment names for
    ``benchmark``, else its built-in judge. The cache: ``cache_path``, else
    ``LMMS_VR_JUDGE_CACHE`` / the default path.
    """

    def __init__(self, benchmark: str, model: str | None = None, cache_path: str | Path | None = None,
                 endpoint: str | None = None) -> None:
        path = Path(cache_path) if cache_path is not None else cache_path_from_env()
        if path is None:
            raise JudgeConfigError("the judge cache is off (LMMS_VR_JUDGE_CACHE=off): no cached verdict can be read")
        config = JudgeConfig(model=model or default_model(benchmark), base_url=endpoint, benchmark=benchmark,
                             model_env="(cache only)", cache_path=path, max_calls=0)
        super().__init__(config)

    def _fetch(self, request: JudgeRequest, key: str = "") -> CachedReply:
        raise _NotComputed(NOT_COMPUTED)


def request_body(model: str, request: JudgeRequest) -> dict[str, Any]:
    """The chat-completion body sent for a request (also a batch file line's `body`)."""
    body: dict[str, Any] = {"model": model, "messages": request.messages, "max_tokens": request.max_tokens}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def request_keys(model: str, request: JudgeRequest) -> list[str]:
    """The cache keys of a request's replies: the first ask and each re-ask."""
    replies = request.max_reasks + 1 if request.parse else 1
    return [request_key(model, request.messages, request.max_tokens, request.temperature, attempt) for attempt in range(replies)]


def _read(request: JudgeRequest, raw: str) -> Any:
    """The request's value of a reply. An empty reply is never an answer, whatever the parser
    accepts (what an overloaded endpoint sends with HTTP 200): it is re-asked, never cached."""
    if not raw.strip():
        raise parsing.ParseError("empty reply")
    return request.parse(raw) if request.parse else raw


def _validate(request: JudgeRequest) -> None:
    if not isinstance(request, JudgeRequest):
        raise TypeError(f"Judge.ask takes a JudgeRequest, got {type(request).__name__}")
    if not isinstance(request.messages, list) or not request.messages:
        raise ValueError("JudgeRequest.messages must be a non-empty list of chat messages")
    if request.max_reasks < 0:
        raise ValueError(f"JudgeRequest.max_reasks must be >= 0, got {request.max_reasks}")


def _token_count(value: Any) -> int | None:
    """A token count from `usage`, or None when it is not a non-negative whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


def reply_too_large(size: int, limit: int) -> str | None:
    """Why a reply body of ``size`` bytes is refused (over the judge's ``max_reply_bytes``), None if it is not:
    the one cap of synchronous replies and batch-imported ones."""
    if size > limit:
        return f"reply larger than {limit} bytes refused (LMMS_VR_JUDGE_MAX_REPLY_BYTES); check the endpoint"
    return None


def parse_completion(data: bytes, endpoint: str) -> CachedReply:
    """Reply text, usage and answering model from a chat-completion body; malformed bodies are retryable.

    A malformed or missing ``usage`` does not lose the reply: its tokens count as 0 and the
    reply is counted in ``usage_unreported`` (the cost estimate is then a lower bound).
    """
    try:
        body = json.loads(data)
        message = body["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _AttemptFailed("malformed reply") from None
    content = message.get("content") if isinstance(message, dict) else None
    usage = body.get("usage") if isinstance(body, dict) else None
    prompt = _token_count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    completion = _token_count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    model = body.get("model")
    return CachedReply(
        raw=content if isinstance(content, str) else "",
        prompt_tokens=prompt or 0,
        completion_tokens=completion or 0,
        answered_by=model.strip() if isinstance(model, str) and model.strip() else UNNAMED_MODEL,
        endpoint=endpoint,
        usage_ok=prompt is not None and completion is not None,
    )


def _error_detail(data: bytes) -> str:
    try:
        body = json.loads(data)
    except ValueError:
        return data[:300].decode("utf-8", "replace")
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        return str(message)[:300]
    return str(body)[:300]


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date.

    None (normal backoff) for anything else (``soon``, ``nan``, ``inf``, negative, garbage).
    """
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = (headers.get(name) or "").strip()
        if not value:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
            seconds = parsed.timestamp() - time.time() if parsed.tzinfo else None
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
        if seconds is not None and math.isfinite(seconds):
            return 0.0  # a date in the past
    return None


# ---------------------------------------------------------------------- per-process registry

_registry_lock = threading.Lock()
_judges: dict[tuple, Judge] = {}
_budgets: dict[int | None, CallBudget] = {}
_breakers: dict[str, CircuitBreaker] = {}  # endpoint -> the breaker its judges share
_warned: set[str] = set()
# set by `judges_replaced_by`: (benchmark, its configured JudgeConfig or None) -> the judge to use
_replacement: Callable[[str, "JudgeConfig | None"], "Judge | None"] | None = None


def get_judge(benchmark: "str | JudgeDefaults", quiet: bool = False) -> Judge | None:
    """The shared Judge for ``benchmark`` (its name, or the ``JudgeDefaults`` it declares)
    configured from the environment, or None.

    None comes with one log line per benchmark per process naming the variables to set
    (``quiet``: no line, for
    callers that only report on a judge if there is one). The same resolved
    configuration always gives the same instance (shared stats, cache and concurrency bound
    across tasks and threads of a process); all judges of a process share one call budget.
    """
    config = JudgeConfig.from_env(benchmark)  # ValueError for a benchmark without a judge
    benchmark = judge_name(benchmark)
    if _replacement is not None:
        replaced = _replacement(benchmark, config)
        if replaced is not CONFIGURED:
            return replaced
    if config is None:
        with _registry_lock:
            if benchmark not in _warned and not quiet:
                _warned.add(benchmark)
                log.warning(not_configured_message(benchmark))
        return None
    return configured_judge(config)


def configured_judge(config: JudgeConfig, kind: "type[Judge]" = None, *args: Any) -> Judge:
    """The process's one judge of class ``kind`` (default `Judge`; a subclass taking
    ``(config, budget, breaker, *args)``) for ``config``: every judge of a process shares the
    call budget, and the judges of one endpoint its circuit breaker."""
    kind = kind or Judge
    identity = config.identity if kind is Judge else (kind.__name__, config.identity)
    with _registry_lock:
        judge = _judges.get(identity)
        if judge is None:
            budget = _budgets.get(config.max_calls)
            if budget is None:
                budget = _budgets[config.max_calls] = CallBudget(config.max_calls, "process")
            breaker = _breakers.setdefault(config.endpoint, CircuitBreaker(config.concurrency))
            judge = _judges[identity] = kind(config, budget, breaker, *args)
        return judge


def cache_only_judge(benchmark: str, model: str | None = None, cache_path: str | Path | None = None,
                     endpoint: str | None = None) -> CacheOnlyJudge:
    """The process's one ``CacheOnlyJudge`` for these arguments (shared stats across tasks)."""
    identity = ("cache-only", benchmark, model, str(cache_path) if cache_path else None, endpoint)
    with _registry_lock:
        reader = _judges.get(identity)
        if reader is None:
            reader = _judges[identity] = CacheOnlyJudge(benchmark, model, cache_path, endpoint)
        return reader


def cache_reader(judge: Judge) -> CacheOnlyJudge:
    """A reader of what ``judge`` would serve from its cache (same model, cache and endpoint),
    sending nothing: to re-read the verdicts a judging pass just used (a failed judgment stays
    failed). Passed explicitly to the code that needs it; no judge of the process is swapped."""
    config = judge.config
    return cache_only_judge(config.benchmark, config.model, config.cache_path, config.base_url)


CONFIGURED = object()  # a `judges_replaced_by` factory's answer: "use the configured judge as usual"


@contextmanager
def judges_replaced_by(factory: Callable[[str, "JudgeConfig | None"], "Judge | None"]) -> Iterator[None]:
    """Within the block, ``get_judge(benchmark)`` returns ``factory(benchmark, configured config or None)``
    (``CONFIGURED``: the configured judge as usual). Only for `lmms-vr` commands that own the process:
    how the cost estimate and batch judging (judges/batch.py) run the benchmarks' own judging code
    with a judge that collects, estimates or imports instead of sending."""
    global _replacement
    with _registry_lock:
        saved = _replacement
        _replacement = factory
    try:
        yield
    finally:
        with _registry_lock:
            _replacement = saved
