"""The state of batch judging in the judge cache's database (`BatchLedger`: each exported request,
each Batch API submission), and the configured judge that respects it (`BatchBoundJudge`)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError
from lmms_video_reasoning.judges.engine import Judge, NotComputed, request_keys
from lmms_video_reasoning.judges.process_registry import configured_judge
from lmms_video_reasoning.utils.core.ask import Request

# batch_requests.state
EXPORTED, IN_FLIGHT, ANSWERED, REJECTED, ERRORED, FAILED = "exported", "in_flight", "answered", "rejected", "errored", "failed"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batch_requests (key TEXT PRIMARY KEY, model TEXT NOT NULL, benchmark TEXT, tag TEXT, "
    "state TEXT NOT NULL, errors INTEGER NOT NULL DEFAULT 0, submission TEXT, reason TEXT, updated REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS api_batches (submission TEXT PRIMARY KEY, model TEXT NOT NULL, endpoint TEXT, state TEXT NOT NULL, "
    "input_file_id TEXT, batch_id TEXT, requests INTEGER NOT NULL, status TEXT, summary TEXT, created REAL NOT NULL, "
    "updated REAL NOT NULL)",
)


class LedgerEntry(NamedTuple):
    state: str
    errors: int
    reason: str | None


class BatchLedger:
    """Batch judging state beside the judge cache's `replies` / `rejected`."""

    def __init__(self, cache: ReplyCache) -> None:
        self.cache = cache
        try:
            cache.create(lambda db: [db.execute(statement) for statement in _SCHEMA])
        except sqlite3.OperationalError as error:
            raise JudgeConfigError(f"cannot set up batch judging in the judge cache {cache.path} ({error}); "
                                   "set LMMS_VR_JUDGE_CACHE to a writable file") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, holding the cache (its dot-lock on a network file system) throughout."""
        with self.cache.locked() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def entry(self, key: str) -> LedgerEntry | None:
        rows = self.cache.execute("SELECT state, errors, reason FROM batch_requests WHERE key = ?", (key,))
        return LedgerEntry(*rows[0]) if rows else None

    def mark(self, key: str, model: str, state: str, *, benchmark: str = "", tag: str = "", reason: str | None = None,
             add_error: bool = False, submission: str | None = None) -> None:
        self.cache.execute(
            "INSERT INTO batch_requests (key, model, benchmark, tag, state, errors, submission, reason, updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state, "
            "errors = batch_requests.errors + ?, submission = excluded.submission, reason = COALESCE(excluded.reason, batch_requests.reason), "
            "updated = excluded.updated, benchmark = COALESCE(NULLIF(excluded.benchmark, ''), batch_requests.benchmark), "
            "tag = COALESCE(NULLIF(excluded.tag, ''), batch_requests.tag)",
            (key, model, benchmark, tag, state, int(add_error), submission, reason, time.time(), int(add_error)),
        )

    def mark_many(self, keys: Sequence[str], model: str, state: str, meta: dict[str, tuple[str, str]] | None = None,
                  submission: str | None = None, submitted: tuple | None = None) -> None:
        """One transaction for many keys (`meta`: key -> (benchmark, tag)), and their submission's row (`submitted`)."""
        with self._transaction() as db:
            if submitted is not None:
                db.execute("INSERT INTO api_batches (submission, model, endpoint, state, requests, created, updated) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", submitted)
            for key in keys:
                benchmark, tag = (meta or {}).get(key, ("", ""))
                self.mark(key, model, state, benchmark=benchmark, tag=tag, submission=submission)

    def keys_of(self, submission: str) -> list[str]:
        return [row[0] for row in self.cache.execute("SELECT key FROM batch_requests WHERE submission = ?", (submission,))]

    def held(self, keys: Sequence[str]) -> str | None:
        """What the batch flow says of an uncached request (its attempts' `request_keys`): None (never
        exported), FAILED (attempts used up, or every reply rejected), else EXPORTED (due)."""
        marks = ",".join("?" * len(keys))
        states = dict(self.cache.execute(f"SELECT key, state FROM batch_requests WHERE key IN ({marks})", tuple(keys)))
        if not states:
            return None
        if FAILED in states.values() or all(states.get(key) == REJECTED for key in keys):
            return FAILED
        return EXPORTED

    def has(self, model: str, state: str | None = None) -> bool:
        """Whether it holds a request of ``model`` (in ``state``)."""
        rows = self.cache.execute("SELECT 1 FROM batch_requests WHERE model = ? AND state = COALESCE(?, state) LIMIT 1", (model, state))
        return bool(rows)

    def submissions(self, model: str, state: str) -> list[dict]:
        names = ("submission", "input_file_id", "batch_id", "requests", "created")
        rows = self.cache.execute(f"SELECT {', '.join(names)} FROM api_batches WHERE model = ? AND state = ? ORDER BY created",
                                  (model, state))
        return [dict(zip(names, row)) for row in rows]

    def add_submission(self, submission: str, model: str, endpoint: str, keys: Sequence[str], meta: dict) -> None:
        """The submission row and its keys in flight, in one transaction (before anything is uploaded)."""
        now = time.time()
        self.mark_many(keys, model, IN_FLIGHT, meta, submission, (submission, model, endpoint, "uploading", len(keys), now, now))

    def update_submission(self, submission: str, **values: Any) -> None:
        names = ", ".join(f"{name} = ?" for name in values)
        self.cache.execute(f"UPDATE api_batches SET {names}, updated = ? WHERE submission = ?", (*values.values(), time.time(), submission))

    def drop_submission(self, submission: str) -> None:
        """A submission that never reached the API (killed before its upload finished): its keys are due again."""
        with self._transaction() as db:
            db.execute("UPDATE batch_requests SET state = ?, submission = NULL WHERE submission = ? AND state = ?", (EXPORTED, submission, IN_FLIGHT))
            db.execute("DELETE FROM api_batches WHERE submission = ?", (submission,))


HELD_FAILED = ("not sent: the offline batch flow failed it (its batch attempts used up, or no reply parsed); "
               "`lmms-vr score PATH --judge-online` sends it to the configured judge")
HELD_DUE = ("not sent: the offline batch flow exported it and has no answer for it yet; export it with "
            "`lmms-vr score PATH --batch-export FILE`, or send it with `lmms-vr score PATH --judge-online`")


class BatchBoundJudge(Judge):
    """The configured judge when its cache holds a batch flow of its model: a request the flow holds
    (`BatchLedger.held`) is not computed, counted as `batch_failed` or `batch_due`; others as usual."""

    def __init__(self, config: JudgeConfig, budget, breaker, ledger: "BatchLedger") -> None:
        super().__init__(config, budget, breaker)
        self.ledger = ledger

    def _fetch(self, request: Request) -> CachedReply:
        state = self.ledger.held(request_keys(self.config.model, request))
        if state is None:
            return super()._fetch(request)
        failed = state == FAILED
        self.stats.add(request.tag, **{"batch_failed" if failed else "batch_due": 1})
        raise NotComputed(HELD_FAILED if failed else HELD_DUE)


def existing_ledger(path: Path | str | None) -> "BatchLedger | None":
    """The ledger of the judge cache at ``path`` if it has one (nothing is created; unreadable: None)."""
    if path is None or not Path(path).is_file():
        return None
    try:
        cache = ReplyCache(path)
        if not cache.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batch_requests'"):
            return None
        return BatchLedger(cache)
    except (sqlite3.Error, OSError, JudgeConfigError):
        return None


def batch_bound_judge(config: JudgeConfig) -> "BatchBoundJudge | None":
    """The process's `BatchBoundJudge` for ``config`` when its judge cache holds batch requests of its model, else None."""
    ledger = existing_ledger(config.cache_path)
    if ledger is None or not ledger.has(config.model):
        return None
    return configured_judge(config, BatchBoundJudge, ledger)
