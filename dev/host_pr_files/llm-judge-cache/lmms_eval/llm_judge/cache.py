"""Judge replies kept on disk, and judge failures counted, for every task that judges with llm_judge.

With ``LMMS_EVAL_JUDGE_CACHE`` set to a file (or to ``1``: ``~/.cache/lmms_eval/judge_cache.sqlite``),
a server from ``get_server`` answers a request it has answered before (same provider, model,
messages, images and sampling settings) from that SQLite file, so a rerun or a resumed
evaluation pays for no judge call twice. Only successful, non-empty replies are stored; the
file is safe for the threads of one process and for several processes (SQLite locking).

Every server from ``get_server`` also counts its calls, cache hits and failures
(``judge_stats()``); when judge calls failed, one line on stderr at exit says how many and why, so a
score that lost judgments does not look complete.
"""

import atexit
import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from .base import ServerInterface
from .protocol import Request, Response

CACHE_ENV = "LMMS_EVAL_JUDGE_CACHE"
DEFAULT_CACHE = Path("~/.cache/lmms_eval/judge_cache.sqlite")

_stats: Counter = Counter()
_failures: Counter = Counter()
_lock = threading.Lock()


def judge_stats() -> dict:
    """Calls, cache hits and failures (by reason) of every judge server of this process."""
    with _lock:
        return {"calls": _stats["calls"], "cache_hits": _stats["cache_hits"], "failures": sum(_failures.values()), "failure_reasons": dict(_failures)}


def _count(name: str, reason: Optional[str] = None) -> None:
    with _lock:
        _stats[name] += 1
        if reason is not None:
            _failures[reason] += 1


@atexit.register
def _report_failures() -> None:
    stats = judge_stats()
    if stats["failures"]:  # the interpreter's own stderr: handlers may be closed by now
        print(f"LLM judge: {stats['failures']} of {stats['calls']} calls failed ({stats['failure_reasons']})", file=sys.__stderr__)


def _image_key(image: Any) -> str:
    if isinstance(image, str):
        return image
    data = image if isinstance(image, bytes) else image.tobytes()
    return hashlib.sha256(data).hexdigest()


class JudgeCache:
    """A SQLite table of replies keyed by what determines them."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, content TEXT NOT NULL, model TEXT)")

    def _connection(self) -> sqlite3.Connection:
        if getattr(self._local, "connection", None) is None:
            self._local.connection = sqlite3.connect(self.path, timeout=60)
            self._local.connection.execute("PRAGMA journal_mode=WAL")
        return self._local.connection

    @staticmethod
    def key(api_type: str, request: Request, config: Any) -> str:
        payload = {
            "api_type": api_type,
            "model": config.model_name,
            "messages": request.messages,
            "images": [_image_key(image) for image in request.images or []],
            "sampling": [config.temperature, config.max_tokens, config.top_p, config.response_format, config.system_prompt],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()

    def get(self, key: str) -> Optional[Response]:
        row = self._connection().execute("SELECT content, model FROM replies WHERE key = ?", (key,)).fetchone()
        return Response(content=row[0], model_used=row[1]) if row else None

    def put(self, key: str, response: Response) -> None:
        with self._connection() as connection:
            connection.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?)", (key, response.content, response.model_used))


def cache_from_env() -> Optional[JudgeCache]:
    value = os.getenv(CACHE_ENV, "").strip()
    if value in ("", "0", "off"):
        return None
    return JudgeCache(DEFAULT_CACHE if value == "1" else Path(value))


class AccountedServer(ServerInterface):
    """A provider whose ``evaluate`` is counted and, with a cache, answered from it when it can."""

    def __init__(self, server: ServerInterface, api_type: str, cache: Optional[JudgeCache] = None) -> None:
        super().__init__(server.config)
        self.server, self.api_type, self.cache = server, api_type, cache

    def is_available(self) -> bool:
        return self.server.is_available()

    def evaluate(self, request: Request) -> Response:
        key = self.cache.key(self.api_type, request, request.config or self.config) if self.cache is not None else None
        cached = self.cache.get(key) if key is not None else None
        if cached is not None:
            _count("cache_hits")
            return cached
        _count("calls")
        try:
            response = self.server.evaluate(request)
        except Exception as error:
            _count("failed", type(error).__name__)
            raise
        if not response.success:
            _count("failed", response.error_message or "unsuccessful response")
        elif key is not None and response.content:
            self.cache.put(key, response)
        return response

    def __getattr__(self, name: str) -> Any:  # the provider's own attributes (client, api_url, ...)
        return getattr(self.server, name)
