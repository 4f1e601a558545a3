"""Persistent judge reply cache: SQLite in WAL mode, shared by threads and processes.

Two tables:

- ``replies``: replies that may be served again, i.e. replies that parsed (or had no parser).
  Keyed by a hash of the endpoint-independent request content, so a rerun or an interrupted
  run pays for no call twice and the same cache serves OpenAI, a proxy or a mirror of the
  same model. Each row records the model that actually answered (the response's ``model``
  field) and the endpoint (credentials removed); the engine checks both before serving it.
- ``rejected``: replies that did not parse (or a row refused later), kept for inspection and
  never served. Append-only.

Rows written before the answering model was recorded (no ``answered_by``) are never served.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmms_video_reasoning.judges.config import JudgeConfigError

log = logging.getLogger("lmms_video_reasoning.judges")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS replies (
        key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        raw TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        created REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS rejected (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        model TEXT NOT NULL,
        answered_by TEXT,
        endpoint TEXT,
        raw TEXT NOT NULL,
        reason TEXT NOT NULL,
        created REAL NOT NULL
    )""",
)
# Columns added to `replies` after its first release (caches made before get them, NULL).
_ADDED_COLUMNS = (("answered_by", "TEXT"), ("endpoint", "TEXT"))
_INIT_ATTEMPTS = 40  # creating a new cache while another process does (about 40 s at most)


@dataclass(frozen=True)
class CachedReply:
    raw: str
    prompt_tokens: int
    completion_tokens: int
    answered_by: str | None = None  # the response's `model` field
    endpoint: str | None = None  # base URL without credentials
    usage_ok: bool = True  # the reply's `usage` was well formed (not stored)


def request_key(model: str, messages: list[dict], max_tokens: int, temperature: float | None, attempt: int) -> str:
    """sha256 of the canonical JSON of what determines a reply (no endpoint, no key).

    ``attempt`` is the re-ask number: a re-asked request must not read back the reply
    that failed to parse.
    """
    payload = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature, "attempt": attempt}
    try:
        canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise ValueError(f"JudgeRequest.messages must be JSON data (images as base64 data URLs): {error}") from None
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ReplyCache:
    """Thread-safe, process-safe key -> reply store (one SQLite connection per thread)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._local = threading.local()
        self._warned = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Two processes creating a new cache at once: switching to WAL can report "database
            # is locked" at once, without SQLite's busy handler; the schema is idempotent, so retry.
            for attempt in range(_INIT_ATTEMPTS):
                try:
                    self._create_schema()
                    break
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or attempt == _INIT_ATTEMPTS - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
        except (OSError, sqlite3.Error) as error:
            raise JudgeConfigError(
                f"cannot open the judge cache {self.path} ({error}); set LMMS_VR_JUDGE_CACHE to a writable "
                "file path, or LMMS_VR_JUDGE_CACHE=off to disable caching"
            ) from None

    def _create_schema(self) -> None:
        connection = self._connection()
        connection.execute("PRAGMA journal_mode=WAL")
        for statement in _SCHEMA:
            connection.execute(statement)
        present = {row[1] for row in connection.execute("PRAGMA table_info(replies)")}
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
            # Autocommit mode: each INSERT is its own short transaction, so writers in other
            # threads/processes wait at most one statement (busy_timeout covers that).
            connection = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA busy_timeout=60000")
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
        return connection

    def get(self, key: str) -> CachedReply | None:
        """The stored reply, or None (also when the database fails: judging goes on uncached).

        The caller decides whether the reply may be served (answering model, parse)."""
        try:
            row = self._connection().execute(
                "SELECT raw, prompt_tokens, completion_tokens, answered_by, endpoint FROM replies WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as error:
            self._warn_once(error)
            return None
        return CachedReply(*row) if row else None  # usage_ok: not stored, tokens as recorded

    def put(self, key: str, model: str, reply: CachedReply, replace: bool = False) -> None:
        """Store a servable reply. The first writer of a key wins (ranks racing on a key agree),
        unless ``replace``: the stored row was refused and this reply supersedes it.
        A database error loses the entry, not the reply."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        try:
            self._connection().execute(
                f"{verb} INTO replies (key, model, raw, prompt_tokens, completion_tokens, created, answered_by, endpoint) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, model, reply.raw, reply.prompt_tokens, reply.completion_tokens, time.time(), reply.answered_by, reply.endpoint),
            )
        except sqlite3.Error as error:
            self._warn_once(error)

    def reject(self, key: str, model: str, reply: CachedReply, reason: str) -> None:
        """Keep a reply that must not be served (it did not parse, or was refused) for inspection."""
        try:
            self._connection().execute(
                "INSERT INTO rejected (key, model, answered_by, endpoint, raw, reason, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, model, reply.answered_by, reply.endpoint, reply.raw, reason[:500], time.time()),
            )
        except sqlite3.Error as error:
            self._warn_once(error)

    def rejected(self, key: str | None = None) -> list[dict[str, Any]]:
        """Kept replies that were never served (all, or those of one request key), oldest first."""
        query = "SELECT key, model, answered_by, endpoint, raw, reason, created FROM rejected"
        rows = self._connection().execute(query + (" WHERE key = ?" if key else "") + " ORDER BY id", (key,) if key else ())
        names = ("key", "model", "answered_by", "endpoint", "raw", "reason", "created")
        return [dict(zip(names, row)) for row in rows]

    def _warn_once(self, error: sqlite3.Error) -> None:
        if not self._warned:
            self._warned = True
            log.warning("judge cache %s failed (%s); continuing without it for the affected requests "
                        "(check the file, or set LMMS_VR_JUDGE_CACHE)", self.path, error)

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        rejected = self._connection().execute("SELECT COUNT(*) FROM rejected").fetchone()[0]
        return {"path": str(self.path), "entries": len(self), "rejected_kept": rejected}
