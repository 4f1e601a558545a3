"""The judge engine: cached, retried, budgeted, concurrent calls to an OpenAI-compatible chat endpoint.

``Judge.ask`` answers one ``JudgeRequest`` (blocking, thread-safe); ``Judge.map`` runs a
function over many items with bounded concurrency, so a benchmark's dependent steps
(extract -> score) chain per item without serialising the batch. Every request ends in a
``JudgeResult``: a reply, or ``ok=False`` with the reason — a failure is never silently a
score. Only ``JudgeConfigError`` (rejected key, unknown model, bad variable) is raised,
because no later request can succeed either.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache, request_key
from lmms_video_reasoning.judges.config import (
    BENCHMARKS,
    DUMMY_API_KEY,
    JudgeConfig,
    JudgeConfigError,
    not_configured_message,
)
from lmms_video_reasoning.utils import judge_usage

log = logging.getLogger("lmms_video_reasoning.judges")

T = TypeVar("T")
R = TypeVar("R")

# Statuses that say "this request/credential/model is wrong": retrying cannot help.
_CONFIG_STATUSES = (401, 403, 404)
# 400 usually concerns one request (e.g. a response too long for the judge's context): that
# request fails alone. Only when every request so far got a 400 is it the configuration.
_BAD_REQUESTS_BEFORE_CONFIG_ERROR = 8
_RETRY_STATUSES = (408, 409, 429)


@dataclass(frozen=True)
class JudgeRequest:
    """One chat completion to judge with; ``messages`` are OpenAI chat messages."""

    messages: list[dict]
    max_tokens: int = 2048
    temperature: float | None = 0.0  # None: not sent (VRBench's official calls leave it unset)
    parse: Callable[[str], Any] | None = None  # raises parsing.ParseError -> re-ask
    max_reasks: int = 2
    tag: str = ""  # e.g. "vcr.recall", for the per-tag accounting


@dataclass
class JudgeResult:
    ok: bool
    value: Any  # parse(raw) when parse is given, else the raw text; None when not ok
    raw: str | None  # last raw reply, kept even when it failed to parse
    error: str | None
    cached: bool  # the final reply came from the cache


_COUNTERS = ("calls", "cache_hits", "failures", "reasks", "retries", "prompt_tokens", "completion_tokens")


@dataclass
class JudgeStats:
    """Thread-safe accounting of one Judge. ``calls`` counts HTTP requests sent (retries included)."""

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    reasks: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    budget_exhausted: bool = False
    by_tag: dict[str, dict[str, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, tag: str = "", **deltas: int) -> None:
        with self._lock:
            per_tag = self.by_tag.setdefault(tag or "(untagged)", dict.fromkeys(_COUNTERS, 0))
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)
                per_tag[name] += delta

    def add_cost(self, usd: float) -> None:
        with self._lock:
            self.cost_usd = (self.cost_usd or 0.0) + usd

    def as_dict(self) -> dict:
        with self._lock:
            out = {name: getattr(self, name) for name in _COUNTERS}
            out["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
            out["budget_exhausted"] = self.budget_exhausted
            out["by_tag"] = {tag: dict(counts) for tag, counts in sorted(self.by_tag.items())}
            return out


class _AttemptFailed(Exception):
    """One HTTP attempt failed in a retryable way; ``retry_after`` is the server's hint (s)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _RequestFailed(Exception):
    """A request failed for good (attempts used up, a non-retryable status, budget)."""


class Judge:
    """Thread-safe judge client for one configuration (endpoint, model, cache, budget)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.stats = JudgeStats()
        if config.price() is not None:
            self.stats.cost_usd = 0.0
        self.cache = ReplyCache(config.cache_path) if config.cache_path else None
        self._client = None
        self._client_lock = threading.Lock()
        self._budget_lock = threading.Lock()
        # Bounds in-flight HTTP requests across map() and direct ask() callers (e.g. lmms-eval's
        # parallel process_results threads), not time spent in backoff sleeps.
        self._in_flight = threading.BoundedSemaphore(config.concurrency)
        self._status_lock = threading.Lock()
        self._succeeded = False
        self._bad_requests_in_a_row = 0

    # ------------------------------------------------------------------ public API

    def ask(self, request: JudgeRequest) -> JudgeResult:
        """Answer one request: cache, else HTTP with retries; parse and re-ask if a parser is given."""
        _validate(request)
        raw: str | None = None
        for attempt in range(request.max_reasks + 1 if request.parse else 1):
            try:
                raw, cached = self._reply(request, attempt)
            except _RequestFailed as failure:
                self.stats.add(request.tag, failures=1)
                return JudgeResult(ok=False, value=None, raw=raw, error=str(failure), cached=False)
            if request.parse is None:
                return JudgeResult(ok=True, value=raw, raw=raw, error=None, cached=cached)
            try:
                return JudgeResult(ok=True, value=request.parse(raw), raw=raw, error=None, cached=cached)
            except parsing.ParseError as error:
                parse_error = error
                if attempt < request.max_reasks:
                    self.stats.add(request.tag, reasks=1)
                    log.debug("judge reply did not parse (%s); re-asking (%d/%d)", error, attempt + 1, request.max_reasks)
        self.stats.add(request.tag, failures=1)
        return JudgeResult(
            ok=False, value=None, raw=raw, error=f"parse: {parse_error} (after {request.max_reasks + 1} replies)", cached=cached
        )

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
        """Stats, configuration (no key) and cache location as one JSON-ready dict."""
        summary = {"judge": self.config.public_dict(), "stats": self.stats.as_dict()}
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
        log.info(
            "judge %s: %d calls, %d cache hits, %d failures, %d re-asks, %d retries, %d+%d tokens, est. cost %s%s",
            self.config.model, stats["calls"], stats["cache_hits"], stats["failures"], stats["reasks"],
            stats["retries"], stats["prompt_tokens"], stats["completion_tokens"], cost,
            ", BUDGET EXHAUSTED" if stats["budget_exhausted"] else "",
        )

    # ------------------------------------------------------------------ one reply

    def _reply(self, request: JudgeRequest, attempt: int) -> tuple[str, bool]:
        """Raw reply text for re-ask number ``attempt``: from the cache, else from the endpoint."""
        key = request_key(self.config.model, request.messages, request.max_tokens, request.temperature, attempt)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.add(request.tag, cache_hits=1)
                return hit.raw, True
        reply = self._fetch(request)
        if self.cache is not None:
            self.cache.put(key, self.config.model, reply)
        return reply.raw, False

    def _fetch(self, request: JudgeRequest) -> CachedReply:
        """POST with bounded retries: backoff with jitter, Retry-After honoured (capped)."""
        last_reason = "no attempt made"
        for attempt in range(self.config.max_attempts):
            if attempt:
                self.stats.add(request.tag, retries=1)
            self._reserve_call(request.tag)
            try:
                with self._in_flight:
                    reply = self._post(request)
            except _AttemptFailed as failure:
                last_reason = failure.reason
                if attempt + 1 < self.config.max_attempts:
                    time.sleep(self._delay(attempt, failure.retry_after))
                continue
            self.stats.add(request.tag, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
            self._charge(reply)
            with self._status_lock:
                self._succeeded, self._bad_requests_in_a_row = True, 0
            return reply
        raise _RequestFailed(f"{last_reason} after {self.config.max_attempts} attempts")

    def _reserve_call(self, tag: str) -> None:
        """Count one HTTP request against the budget, or fail the request if it is spent."""
        with self._budget_lock:
            budget = self.config.max_calls
            if budget is not None and self.stats.calls >= budget:
                if not self.stats.budget_exhausted:
                    self.stats.budget_exhausted = True
                    log.warning("judge budget exhausted: %d calls made (LMMS_VR_JUDGE_MAX_CALLS=%d); further uncached requests fail", self.stats.calls, budget)
                raise _RequestFailed("budget exhausted")
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
        judge_usage.record(self.config.model, reply.prompt_tokens, reply.completion_tokens, price)  # lmms-eval's usage report

    # ------------------------------------------------------------------ HTTP

    def _openai(self):
        with self._client_lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    base_url=self.config.base_url,
                    api_key=self.config.api_key or DUMMY_API_KEY,
                    max_retries=0,  # retries are ours: bounded, budgeted, counted
                    timeout=self.config.timeout,
                )
            return self._client

    def _post(self, request: JudgeRequest) -> CachedReply:
        """One HTTP attempt. Raises _AttemptFailed (retry), JudgeConfigError or _RequestFailed."""
        import openai

        body: dict[str, Any] = {"model": self.config.model, "messages": request.messages, "max_tokens": request.max_tokens}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        try:
            # The client's documented raw-request path: the same auth, URL handling and error
            # classes as chat.completions.create, without per-call schema transforms (a third
            # of the client's CPU time per request, which limits throughput at concurrency 64).
            text = self._openai().post("/chat/completions", body=body, cast_to=str)
        except openai.APIStatusError as error:
            self._raise_for_status(error.status_code, error)
        except openai.APITimeoutError:
            raise _AttemptFailed("timeout") from None
        except openai.APIConnectionError as error:
            raise _AttemptFailed(f"connection error ({type(error.__cause__ or error).__name__})") from None
        except Exception as error:  # httpx errors while reading a truncated body
            raise _AttemptFailed(f"transport error ({type(error).__name__})") from None
        return _parse_completion(text)

    def _raise_for_status(self, status: int, error: Exception) -> None:
        detail = self._scrub(_error_detail(error))
        if status in _CONFIG_STATUSES:
            raise JudgeConfigError(self._config_message(status, detail)) from None
        if status == 400:
            with self._status_lock:
                self._bad_requests_in_a_row += 1
                systematic = not self._succeeded and self._bad_requests_in_a_row >= _BAD_REQUESTS_BEFORE_CONFIG_ERROR
            if systematic:
                raise JudgeConfigError(self._config_message(status, detail)) from None
        if status in _RETRY_STATUSES or status >= 500:
            response = getattr(error, "response", None)
            raise _AttemptFailed(f"http {status}", _retry_after(response.headers if response is not None else {}))
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


def _validate(request: JudgeRequest) -> None:
    if not isinstance(request, JudgeRequest):
        raise TypeError(f"Judge.ask takes a JudgeRequest, got {type(request).__name__}")
    if not isinstance(request.messages, list) or not request.messages:
        raise ValueError("JudgeRequest.messages must be a non-empty list of chat messages")
    if request.max_reasks < 0:
        raise ValueError(f"JudgeRequest.max_reasks must be >= 0, got {request.max_reasks}")


def _parse_completion(text: str) -> CachedReply:
    """Reply text and usage from a chat-completion body; malformed bodies are retryable."""
    try:
        body = json.loads(text)
        message = body["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _AttemptFailed("malformed reply") from None
    content = message.get("content") if isinstance(message, dict) else None
    usage = body.get("usage") or {}
    return CachedReply(
        raw=content if isinstance(content, str) else "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )


def _error_detail(error: Exception) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        return str(message)[:300]
    return str(error)[:300]


def _retry_after(headers) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return float(milliseconds) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


# ---------------------------------------------------------------------- per-process registry

_registry_lock = threading.Lock()
_judges: dict[tuple, Judge] = {}
_warned: set[str] = set()


def get_judge(benchmark: str) -> Judge | None:
    """The shared Judge for ``benchmark`` configured from the environment, or None.

    None comes with one log line per benchmark per process naming the variables to set.
    The same resolved configuration always gives the same instance (shared stats, cache
    and concurrency bound across tasks and threads of a process).
    """
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; expected one of {list(BENCHMARKS)}")
    config = JudgeConfig.from_env(benchmark)
    with _registry_lock:
        if config is None:
            if benchmark not in _warned:
                _warned.add(benchmark)
                log.warning(not_configured_message(benchmark))
            return None
        judge = _judges.get(config.identity)
        if judge is None:
            judge = _judges[config.identity] = Judge(config)
        return judge
