"""`JudgeStats`: the thread-safe counters of one judge, per request tag too (calls, cache hits and
refusals, failures and why, re-asks, retries, tokens, cost, the snapshots that answered)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

# Recorded as the answering model when a reply has no `model` field.
UNNAMED_MODEL = "(not named in the reply)"


@dataclass
class JudgeStats:
    """Its int fields are the counters (`_COUNTERS`), each kept per request tag too."""

    # calls: HTTP requests sent (retries included); cache_refused: cached replies not served
    # (did not parse, another judge's, or recorded before the answering model was kept);
    # not_computed: CacheOnlyJudge misses; usage_unreported: replies without a valid `usage`;
    # cache_errors: cache reads and writes that failed (a verdict not stored is paid for again);
    # batch_failed / batch_due: not_computed requests the offline batch flow holds (judges/batch_ledger.py,
    # `BatchBoundJudge`): failed in its batches / exported or due again but not answered yet.
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


_COUNTERS = tuple(name for name, spec in JudgeStats.__dataclass_fields__.items() if spec.type == "int")
