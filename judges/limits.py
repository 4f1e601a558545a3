"""What stops a judge from sending: the call budget and the circuit breaker (`process_registry`
hands every judge of a process one budget, and the judges of one endpoint one breaker)."""

from __future__ import annotations

import threading


class CallBudget:
    """At most ``max_calls`` HTTP requests (LMMS_VR_JUDGE_MAX_CALLS), shared by every Judge holding it."""

    def __init__(self, max_calls: int | None, scope: str) -> None:
        self.max_calls = max_calls
        self.scope = scope
        self.used = 0
        self.exhausted = False
        self._lock = threading.Lock()

    def reserve(self) -> bool:
        """Count one request; False (nothing counted) once the budget is spent."""
        with self._lock:
            if self.max_calls is not None and self.used >= self.max_calls:
                self.exhausted = True
                return False
            self.used += 1
            return True

    def as_dict(self) -> dict:
        with self._lock:
            return {"scope": self.scope, "max_calls": self.max_calls, "calls": self.used, "exhausted": self.exhausted}


UNREACHABLE_IN_A_ROW = 3
FAILED_REQUESTS_BEFORE_ANY_VERDICT = 8


class CircuitBreaker:
    """Stops judging when the endpoint is down, so an outage costs seconds and is named once: it opens
    for good on `UNREACHABLE_IN_A_ROW` attempts in a row that could not connect, `attempt_limit` failed
    attempts in a row with no reply between them (a flaky endpoint never gets there, a dead one within
    about three backoff rounds), or a first `FAILED_REQUESTS_BEFORE_ANY_VERDICT` requests all without a
    verdict. Then requests fail at once, sleeping retries give up, cached verdicts are still served."""

    def __init__(self, concurrency: int) -> None:
        self.attempt_limit = max(16, 2 * concurrency + 8)
        self.reason: str | None = None
        self.opened = threading.Event()  # set: nothing more is sent; a retry's backoff sleep wakes
        self._lock = threading.Lock()
        self._unreachable = 0
        self._failed_attempts = 0
        self._failed_requests = 0
        self._verdicts = 0

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

    def _trip(self, reason: str) -> bool:
        if self.opened.is_set():
            return False
        self.reason = reason
        self.opened.set()
        return True
