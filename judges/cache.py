"""Persistent judge reply cache: SQLite, shared by threads, processes and hosts (locking: `cache_lock`).

- ``replies``: replies that may be served again, keyed by a hash of the endpoint-independent request
  (`request_key`), so a rerun pays for no call twice and one cache serves OpenAI, a proxy or a mirror
  of the same model; the engine checks the recorded answering model and endpoint before serving one.
- ``rejected``: replies that did not parse (or were refused later), kept for inspection, never served.

A failed read or write is counted (``errors``, the accounting's ``cache_errors``; `lmms-vr score`
exits non-zero) and the first is logged with the path and the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lmms_video_reasoning.judges.cache_lock import LOCAL, MODE_ENV, NETWORK, CacheLockTimeout, cache_mode, dot_lock
from lmms_video_reasoning.judges.config import JudgeConfigError

log = logging.getLogger("lmms_video_reasoning.judges")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, raw TEXT NOT NULL, "
    "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rejected (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, model TEXT NOT NULL, "
    "answered_by TEXT, endpoint TEXT, raw TEXT NOT NULL, reason TEXT NOT NULL, created REAL NOT NULL)",
)
# Columns added to `replies` after its first release (caches made before get them, NULL).
_ADDED_COLUMNS = (("answered_by", "TEXT"), ("endpoint", "TEXT"))
_INIT_ATTEMPTS = 40  # creating a new cache while another process does (about 40 s at most)


@dataclass(frozen=True)
class CachedReply:
    raw: str
    prompt_tokens: int
    completion_tokens: int
    answered_by: str | None = None  # the response's `model` field (the snapshot that answered)
    endpoint: str | None = None  # base URL without credentials
    usage_ok: bool = True  # the reply's `usage` was well formed (not stored)


def request_key(model: str, messages: list[dict], max_tokens: int, temperature: float | None, attempt: int) -> str:
    """sha256 of the canonical JSON of what determines a reply (no endpoint, no key); ``attempt``
    is the re-ask number, so a re-ask never reads back the reply that failed to parse."""
    payload = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature, "attempt": attempt}
    try:
        canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise ValueError(f"Request.messages must be JSON data (images as base64 data URLs): {error}") from None
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ReplyCache:
    """Thread-safe, process-safe key -> reply store (one SQLite connection per thread).
    ``mode``: ``"local"`` or ``"network"`` (see `cache_lock`); None: detected."""

    def __init__(self, path: str | Path, mode: str | None = None) -> None:
        self.path = Path(path).expanduser()
        self._local = threading.local()
        self._errors_lock = threading.Lock()
        self.errors = 0  # failed reads and writes (each one a verdict not kept or not found)
        self._first_error: str | None = None
        try:
            self.mode, self.mode_reason = (mode, "given") if mode else cache_mode(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = dot_lock(self.path) if self.mode == NETWORK else None
            if self._lock is not None:
                with self._lock:  # not `locked`: its connection cannot open a WAL file
                    self._leave_wal()
            self.create(self._create_tables)
        except CacheLockTimeout as error:
            raise JudgeConfigError(f"cannot open the judge cache {self.path}: {error}") from None
        except (OSError, sqlite3.Error) as error:
            raise JudgeConfigError(
                f"cannot open the judge cache {self.path} ({error}); set LMMS_VR_JUDGE_CACHE to a writable "
                "file path, or LMMS_VR_JUDGE_CACHE=off to disable caching"
            ) from None
        if self.mode == NETWORK:
            log.info("judge cache %s is %s: rollback journal with a dot-file lock (%s.lock), safe across hosts",
                     self.path, self.mode_reason, self.path.name)

    def _leave_wal(self) -> None:
        """A cache made in WAL mode (before it was on a network file system, or by an older
        version) is switched to a rollback journal once: the dot-file VFS cannot open WAL files."""
        try:
            with self.path.open("rb") as handle:
                header = handle.read(20)
        except OSError:
            return
        if header[:16] != b"SQLite format 3\x00" or header[18:20] != b"\x02\x02":  # bytes 18-19 are 2 in WAL mode
            return
        connection = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            mode = connection.execute("PRAGMA journal_mode=DELETE").fetchall()
        except sqlite3.Error as error:
            raise sqlite3.OperationalError(f"it is in WAL mode and could not be switched to a rollback journal ({error}); "
                                           "stop the runs using it and retry, or give LMMS_VR_JUDGE_CACHE a new file") from None
        finally:
            connection.close()
        if not mode or str(mode[0][0]).lower() != "delete":
            raise sqlite3.OperationalError("it is in WAL mode and another process holds it; stop the runs using it and retry")
        log.warning("judge cache %s: switched from WAL to a rollback journal (it is on a network file system)", self.path)

    def create(self, tables: Callable[[sqlite3.Connection], None]) -> None:
        """Run idempotent ``tables(connection)``, retried while another process creates the same file:
        switching to WAL can report "database is locked" at once, without SQLite's busy handler."""
        for attempt in range(_INIT_ATTEMPTS):
            try:
                with self.locked() as connection:
                    tables(connection)
                return
            except sqlite3.OperationalError as error:
                if isinstance(error, CacheLockTimeout) or "locked" not in str(error) or attempt == _INIT_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _create_tables(self, connection: sqlite3.Connection) -> None:
        if self.mode == LOCAL:
            connection.execute("PRAGMA journal_mode=WAL").fetchall()
        for statement in _SCHEMA:
            connection.execute(statement)
        present = {row[1] for row in connection.execute("PRAGMA table_info(replies)").fetchall()}
        for name, kind in _ADDED_COLUMNS:
            if name not in present:
                try:
                    connection.execute(f"ALTER TABLE replies ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as error:  # another process added it first
                    if "duplicate column" not in str(error):
                        raise

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            # Autocommit mode: each statement is its own short transaction, so writers in other
            # threads/processes wait at most one statement (the 60 s busy timeout covers that). Every
            # query is read to its end (fetchall), which ends its transaction and lock.
            network = self.mode == NETWORK
            # Network mode: the dot-lock is taken by `locked` (which records its owner), so SQLite takes none.
            target = f"file:{self.path.absolute().as_posix()}?vfs=unix-none" if network else self.path
            connection = sqlite3.connect(target, uri=network, timeout=60.0, isolation_level=None, check_same_thread=False)
            if network:
                connection.execute("PRAGMA journal_mode=DELETE").fetchall()
            # a rollback journal needs FULL to survive a crash
            connection.execute(f"PRAGMA synchronous={'FULL' if network else 'NORMAL'}")
            self._local.connection = connection
        return connection

    @property
    def lock_path(self) -> Path:
        """The dot-lock held while a statement runs (network mode)."""
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, with the cache to itself for the block (network mode: the dot-lock;
        local mode: SQLite's own locks); every statement in it read to its end and every transaction ended."""
        with self._lock or contextlib.nullcontext():
            yield self._connection()

    def execute(self, statement: str, parameters: tuple = ()) -> list[tuple]:
        """Every row of one statement under this cache's locking (other tables in the file must go through
        this or `locked`: SQLite's default locking would not take the dot-lock on a network file system)."""
        with self.locked() as connection:
            return connection.execute(statement, parameters).fetchall()

    def get(self, key: str) -> CachedReply | None:
        return self.lookup(key)[0]

    def lookup(self, key: str) -> tuple[CachedReply | None, bool]:
        """(the stored reply or None, whether the read worked); a failed read is counted and logged, and
        the caller asks the endpoint. Whether the reply may be served is the caller's decision."""
        try:
            rows = self.execute("SELECT raw, prompt_tokens, completion_tokens, answered_by, endpoint FROM replies WHERE key = ?", (key,))
        except sqlite3.Error as error:
            self._failed("read", error)
            return None, False
        return (CachedReply(*rows[0]) if rows else None), True  # usage_ok: not stored, tokens as recorded

    def put(self, key: str, model: str, reply: CachedReply, replace: bool = False) -> bool:
        """Store a servable reply; False when the database failed (counted and logged). The first writer
        of a key wins (ranks racing on a key agree), unless ``replace``: the stored row was refused."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        return self._write(f"{verb} INTO replies (key, model, raw, prompt_tokens, completion_tokens, created, answered_by, "
                           "endpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (key, model, reply.raw, reply.prompt_tokens, reply.completion_tokens, time.time(), reply.answered_by,
                            reply.endpoint))

    def reject(self, key: str, model: str, reply: CachedReply, reason: str) -> bool:
        """Keep a reply that must not be served, for inspection; False when the database failed."""
        return self._write("INSERT INTO rejected (key, model, answered_by, endpoint, raw, reason, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (key, model, reply.answered_by, reply.endpoint, reply.raw, reason[:500], time.time()))

    def rejected(self, key: str | None = None) -> list[dict[str, Any]]:
        """Kept replies that were never served (all, or those of one request key), oldest first."""
        names = ("key", "model", "answered_by", "endpoint", "raw", "reason", "created")
        query = f"SELECT {', '.join(names)} FROM rejected" + (" WHERE key = ?" if key else "") + " ORDER BY id"
        return [dict(zip(names, row)) for row in self.execute(query, (key,) if key else ())]

    def _write(self, statement: str, parameters: tuple) -> bool:
        try:
            self.execute(statement, parameters)
        except sqlite3.Error as error:
            self._failed("write", error)
            return False
        return True

    def _failed(self, what: str, error: sqlite3.Error) -> None:
        """Count a failed read or write; the first is logged at ERROR with the path and the fix."""
        with self._errors_lock:
            self.errors += 1
            first = self._first_error is None
            if first:
                self._first_error = f"{what}: {error}"
        if first:
            log.error("judge cache %s: a %s failed (%s). Verdicts not stored are paid for again by the next run, and a "
                      "failed read asks the judge again; the count is in the judge accounting (cache_errors). Fix the "
                      "file (disk space, permissions, a lock left by a killed process: %s), or set LMMS_VR_JUDGE_CACHE to "
                      "a writable file (%s=network on a shared file system the detection missed).",
                      self.path, what, error, self.lock_path, MODE_ENV)

    def __len__(self) -> int:
        return self.execute("SELECT COUNT(*) FROM replies")[0][0]

    def stats(self) -> dict[str, Any]:
        rejected = self.execute("SELECT COUNT(*) FROM rejected")[0][0]
        return {"path": str(self.path), "entries": len(self), "rejected_kept": rejected, "mode": self.mode,
                "mode_reason": self.mode_reason, "errors": self.errors, "first_error": self._first_error}
