"""Fault injection for `judges.LocalJudgeServer` (test-only): which requests fail, and how.

A `FaultPlan` handed to the server as ``faults`` answers the requests it selects itself (429
with Retry-After, 500, timeouts, truncated bodies, malformed JSON, 401, ...) per request number,
probabilistically with a seed, or for the first K attempts of each distinct request (so
retries succeed deterministically).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

FAULT_KINDS = ("429", "500", "503", "timeout", "truncated", "malformed", "401", "400",
               # HTTP 200 but wrong inside: empty content (no parser accepts it); `usage` malformed; a body
               # sent one byte per `slow_interval`; a body of `huge_bytes`.
               "unparseable", "bad_usage", "slow_body", "huge",
               # 429 with a Retry-After that is not a number of seconds or a date.
               "429_soon", "429_nan")


def request_fingerprint(body: dict) -> str:
    """Identity of a distinct request (same body -> same fingerprint), for per-request faults."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass
class FaultPlan:
    """Which requests fail and how. All rules combine; the first that applies wins.

    - ``by_request``: 1-based arrival number -> fault kind (e.g. ``{1: "401"}``).
    - ``first_k``: the first K attempts of each distinct request fail, cycling ``kinds``.
    - ``rate``: each attempt fails with this probability, decided by a hash of
      (seed, request, attempt number) so a run is reproducible whatever the thread timing;
      at most ``max_failures_per_request`` failures per distinct request.
    """

    by_request: dict[int, str] = field(default_factory=dict)
    first_k: int = 0
    rate: float = 0.0
    kinds: Sequence[str] = ("429", "500", "timeout", "truncated", "malformed")
    seed: int = 0
    max_failures_per_request: int = 3
    retry_after: float = 0.05  # seconds sent in Retry-After for 429
    timeout_sleep: float = 2.0  # a "timeout" reply waits this long (longer than the client's timeout)
    slow_interval: float = 1.0  # "slow_body": seconds between bytes
    huge_bytes: int = 200 * 1024 * 1024  # "huge": body size
    _attempts: dict[str, int] = field(default_factory=dict, repr=False)
    _failures: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        unknown = [kind for kind in [*self.kinds, *self.by_request.values()] if kind not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; expected some of {list(FAULT_KINDS)}")

    def decide(self, number: int, body: dict) -> str | None:
        """Fault for the ``number``-th request overall (1-based) with this body, or None."""
        if number in self.by_request:
            return self.by_request[number]
        fingerprint = request_fingerprint(body)
        with self._lock:
            attempt = self._attempts.get(fingerprint, 0)
            self._attempts[fingerprint] = attempt + 1
            failures = self._failures.get(fingerprint, 0)
            fault = None
            if attempt < self.first_k:
                fault = self.kinds[attempt % len(self.kinds)]
            elif self.rate and failures < self.max_failures_per_request:
                draw = random.Random(f"{self.seed}:{fingerprint}:{attempt}").random()
                if draw < self.rate:
                    fault = self.kinds[int(draw / self.rate * len(self.kinds)) % len(self.kinds)]
            if fault:
                self._failures[fingerprint] = failures + 1
            return fault

    def answer(self, handler, number: int, body: dict) -> bool:
        """Answer the request with its fault, if it has one (True); the server's `faults` hook."""
        fault = self.decide(number, body)
        if fault:
            self.send_fault(handler, fault, number, body)
        return bool(fault)

    def send_fault(self, handler, fault: str, number: int, body: dict) -> None:
        plan, server = self, handler.judge_server
        if fault == "429":
            handler.send_json(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": f"{plan.retry_after:g}"})
        elif fault in ("500", "503"):
            handler.send_json(int(fault), {"error": {"message": "injected server error"}})
        elif fault == "400":  # what OpenAI answers to a prompt longer than the context
            handler.send_json(400, {"error": {"message": "injected: maximum context length exceeded", "code": "context_length_exceeded"}})
        elif fault == "401":
            handler.send_json(401, {"error": {"message": "injected: invalid api key", "type": "invalid_request_error"}})
        elif fault == "timeout":
            time.sleep(plan.timeout_sleep)
            handler.send_json(200, {"error": "too late"})
        elif fault == "malformed":
            handler.send_bytes(200, b'{"choices": [{"message": {"content": "broken', {"Content-Type": "application/json"})
        elif fault == "truncated":
            payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 200}}]}).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            handler.close_connection = True
        elif fault == "unparseable":  # what an overloaded or degraded judge sends with a 200: no content
            handler.send_json(200, handler.completion(number, body, ""))
        elif fault == "bad_usage":
            completion = handler.completion(number, body, server.responder(body))
            completion["usage"] = {"prompt_tokens": "many", "completion_tokens": [3]}
            handler.send_json(200, completion)
        elif fault in ("429_soon", "429_nan"):
            handler.send_json(429, {"error": {"message": "rate limited"}}, {"Retry-After": fault[4:]})
        elif fault == "slow_body":
            payload = json.dumps(handler.completion(number, body, server.responder(body))).encode()
            self._stream(handler, len(payload), (payload[i:i + 1] for i in range(len(payload))), plan.slow_interval)
        elif fault == "huge":
            head, tail = b'{"choices": [{"message": {"role": "assistant", "content": "', b'"}}]}'
            chunk = b"x" * (1024 * 1024)
            count = max(1, plan.huge_bytes // len(chunk))
            pieces = itertools.chain([head], itertools.repeat(chunk, count), [tail])
            self._stream(handler, len(head) + count * len(chunk) + len(tail), pieces, 0.0)

    @staticmethod
    def _stream(handler, length: int, pieces, interval: float) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(length))
            handler.end_headers()
            for piece in pieces:
                handler.wfile.write(piece)
                handler.wfile.flush()
                if interval:
                    time.sleep(interval)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up, as it should
        handler.close_connection = True
