"""The HTTP side of a judge: one chat-completion POST to an OpenAI-compatible endpoint per attempt,
bounded as a whole by the judge's timeout and its reply by `max_reply_bytes` (the retries around it
are the engine's). The batch flow reads its replies with `parse_completion` too.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import re
import socket
import threading
import time
from typing import Any, Mapping

from lmms_video_reasoning.judges.accounting import UNNAMED_MODEL
from lmms_video_reasoning.judges.cache import CachedReply
from lmms_video_reasoning.judges.config import (DUMMY_API_KEY, OPENAI_DEFAULT_BASE_URL, JudgeConfig, JudgeConfigError,
                                                connect_error_reason)
from lmms_video_reasoning.utils.core.ask import Request

# Statuses that say "this request/credential/model is wrong": retrying cannot help.
_CONFIG_STATUSES = (401, 403, 404)
# 400 usually concerns one request (e.g. a response too long for the judge's context): that
# request fails alone. Only when every request so far got a 400 is it the configuration.
_BAD_REQUESTS_BEFORE_CONFIG_ERROR = 8
_RETRY_STATUSES = (408, 409, 429)


class AttemptFailed(Exception):
    """One HTTP attempt failed in a retryable way; ``retry_after`` is the server's hint (s)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class RequestFailed(Exception):
    """A request failed for good (attempts used up, a non-retryable status, budget)."""


class Unreachable(AttemptFailed):
    """The endpoint could not be connected to (refused, host name unknown, TLS handshake)."""


def _cut_off_at(deadline: float, response) -> threading.Timer | None:
    """A timer shutting the reply's socket down at ``deadline``: httpx's timeouts bound each socket
    read, not a request (a server sending one byte a second)."""
    stream = response.extensions.get("network_stream")
    try:
        sock = stream.get_extra_info("socket") if stream is not None else None
    except Exception:  # noqa: BLE001 - a transport without a socket: per-chunk deadline checks still apply
        sock = None
    if sock is None:
        return None
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), _shut_down, (sock,))
    timer.daemon = True
    timer.start()
    return timer


def _shut_down(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class ChatEndpoint:
    """Chat-completion POSTs to one judge configuration's endpoint (thread-safe; one HTTP client)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._client = None
        self._lock = threading.Lock()  # the client's creation, the 400 counts
        self._succeeded = False  # after a reply, a 400 is that request's alone
        self._bad_requests = 0

    def _http(self):
        with self._lock:
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

    def post(self, request: Request) -> CachedReply:
        """One HTTP attempt: a reply, or AttemptFailed (retryable; `Unreachable`: nothing could connect),
        RequestFailed (this request's failure) or JudgeConfigError (a rejected key, an unknown model)."""
        import httpx

        payload = json.dumps(request_body(self.config.model, request), ensure_ascii=False).encode("utf-8")
        deadline = time.monotonic() + self.config.timeout
        timer = None
        try:
            with self._http().stream("POST", "chat/completions", content=payload) as response:
                timer = _cut_off_at(deadline, response)
                data = self._read_body(response, deadline)
                status, headers = response.status_code, response.headers
        except httpx.ConnectTimeout:
            raise AttemptFailed("timeout while connecting") from None
        except httpx.TimeoutException:
            raise AttemptFailed("timeout") from None
        except httpx.ConnectError as error:
            raise Unreachable(connect_error_reason(error, self.config.endpoint)) from None
        except (httpx.HTTPError, OSError) as error:  # incl. a body cut off at the deadline or by the server
            if time.monotonic() >= deadline - 0.05:
                raise AttemptFailed(f"timeout (the reply took over {self.config.timeout:g} s)") from None
            raise AttemptFailed(f"connection error ({type(error).__name__})") from None
        finally:
            if timer is not None:
                timer.cancel()
        if status >= 300:
            self._raise_for_status(status, data, headers)
        reply = parse_completion(data, self.config.endpoint)
        self._succeeded = True
        return reply

    def _read_body(self, response, deadline: float) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            refusal = reply_too_large(size, self.config.max_reply_bytes)
            if refusal:
                raise RequestFailed(refusal)
            if time.monotonic() > deadline:
                raise AttemptFailed(f"timeout (the reply was still arriving after {self.config.timeout:g} s)")
            chunks.append(chunk)
        return b"".join(chunks)

    def _raise_for_status(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        detail = scrub(_error_detail(data), self.config.api_key)
        if status in _CONFIG_STATUSES:
            raise JudgeConfigError(self._config_message(status, detail)) from None
        if status == 400:
            with self._lock:
                self._bad_requests += 1
                systematic = not self._succeeded and self._bad_requests >= _BAD_REQUESTS_BEFORE_CONFIG_ERROR
            if systematic:
                raise JudgeConfigError(self._config_message(status, detail)) from None
        if status in _RETRY_STATUSES or status >= 500:
            raise AttemptFailed(f"http {status}", retry_after_seconds(headers))
        raise RequestFailed(f"http {status}: {detail}")

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


def scrub(text: str, api_key: str | None) -> str:
    """``text`` without the key (and key-looking fragments servers echo back)."""
    if api_key and api_key != DUMMY_API_KEY:
        text = text.replace(api_key, "***")
    text = re.sub(r"\b(sk|key)-[A-Za-z0-9_\-*.]{3,}", r"\1-***", text)
    return re.sub(r"(Incorrect API key provided:)\s*\S+", r"\1 ***", text)


def request_body(model: str, request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": request.messages, "max_tokens": request.max_tokens}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _token_count(value: Any) -> int | None:
    """A token count from `usage`, or None when it is not a non-negative whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


def reply_too_large(size: int, limit: int) -> str | None:
    """Why a reply body of ``size`` bytes is refused (synchronous and batch-imported replies alike), or None."""
    if size > limit:
        return f"reply larger than {limit} bytes refused (LMMS_VR_JUDGE_MAX_REPLY_BYTES); check the endpoint"
    return None


def parse_completion(data: bytes, endpoint: str) -> CachedReply:
    """Reply text, usage and answering model from a chat-completion body (malformed: retryable); a
    malformed or missing ``usage`` does not lose the reply: its tokens count as 0 (``usage_ok`` False)."""
    try:
        body = json.loads(data)
        message = body["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise AttemptFailed("malformed reply") from None
    content = message.get("content") if isinstance(message, dict) else None
    usage = body.get("usage") if isinstance(body, dict) else None
    prompt = _token_count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    completion = _token_count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    model = body.get("model")
    return CachedReply(content if isinstance(content, str) else "", prompt or 0, completion or 0,
                       model.strip() if isinstance(model, str) and model.strip() else UNNAMED_MODEL, endpoint,
                       usage_ok=prompt is not None and completion is not None)


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
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date; None (normal
    backoff) for anything else (``soon``, ``nan``, ``inf``, garbage)."""
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
        if seconds is not None and math.isfinite(seconds):
            return max(seconds, 0.0)  # a date in the past, or a negative number: at once
    return None
