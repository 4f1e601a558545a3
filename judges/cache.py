"""Persistent judge reply cache: SQLite in WAL mode, shared by threads and processes.

Only successful replies are stored (raw text + token usage), keyed by a hash of the
endpoint-independent request content, so a rerun or an interrupted run pays for no call
twice, and the same cache serves OpenAI, a proxy or a mirror of the same model.
Writers use ``INSERT OR IGNORE`` (first reply wins; ranks racing on one key agree).
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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    raw TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
)
"""


@dataclass(frozen=True)
class CachedReply:
    raw: str
    prompt_tokens: int
    completion_tokens: int


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
            connection = self._connection()
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise JudgeConfigError(
                f"cannot open the judge cache {self.path} ({error}); set LMMS_VR_JUDGE_CACHE to a writable "
                "file path, or LMMS_VR_JUDGE_CACHE=off to disable caching"
            ) from None

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
        """The stored reply, or None (also when the database fails: judging goes on uncached)."""
        try:
            row = self._connection().execute(
                "SELECT raw, prompt_tokens, completion_tokens FROM replies WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as error:
            self._warn_once(error)
            return None
        return CachedReply(*row) if row else None

    def put(self, key: str, model: str, reply: CachedReply) -> None:
        """Store a reply; the first writer of a key wins. A database error loses the entry, not the reply."""
        try:
            self._connection().execute(
                "INSERT OR IGNORE INTO replies (key, model, raw, prompt_tokens, completion_tokens, created) VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, reply.raw, reply.prompt_tokens, reply.completion_tokens, time.time()),
            )
        except sqlite3.Error as error:
            self._warn_once(error)

    def _warn_once(self, error: sqlite3.Error) -> None:
        if not self._warned:
            self._warned = True
            log.warning("judge cache %s failed (%s); continuing without it for the affected requests "
                        "(check the file, or set LMMS_VR_JUDGE_CACHE)", self.path, error)

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "entries": len(self)}
