"""Judge replies kept on disk, and every judge request counted, for the servers of ``get_server``.

With ``LMMS_EVAL_JUDGE_CACHE`` set to a file (or to ``1``: ``~/.cache/lmms_eval/judge_cache.sqlite``),
a server answers a request it has answered before (same provider, model, messages, images and
sampling settings) from that SQLite file, so a rerun or a resumed evaluation pays for no judge
call twice. Only successful, non-empty replies are stored; the file is safe for the threads of
one process and for several processes (SQLite locking).

Every request, cached or not, synchronous, asynchronous or in a batch, is counted by its outcome
in the run's usage (``usage_metrics.log_judge_request``: ``results["usage"]["judge_requests"]``).
"""

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Optional, Tuple

from lmms_eval.models.model_utils.usage_metrics import log_judge_request

from .base import AsyncServerInterface, ServerInterface
from .protocol import Request, Response

CACHE_ENV = "LMMS_EVAL_JUDGE_CACHE"
DEFAULT_CACHE = Path("~/.cache/lmms_eval/judge_cache.sqlite")


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
    def key(provider: str, request: Request, config: Any) -> str:
        payload = {
            "provider": provider,
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


class _Accounting:
    """One server's requests: looked up in the cache, counted, stored once answered."""

    def __init__(self, server: ServerInterface, cache: Optional[JudgeCache]) -> None:
        self.server, self.cache, self.provider = server, cache, type(server).__qualname__

    def lookup(self, request: Request) -> Tuple[Optional[str], Optional[Response]]:
        if self.cache is None:
            return None, None
        key = self.cache.key(self.provider, request, request.config or self.server.config)
        cached = self.cache.get(key)
        if cached is not None:
            log_judge_request("cached")
        return key, cached

    def settle(self, key: Optional[str], response: Response) -> Response:
        if not response.success:
            log_judge_request("failed: unsuccessful response")  # its error message may quote the provider: not in results
        else:
            log_judge_request("answered")
            if key is not None and response.content:
                self.cache.put(key, response)
        return response


def accounted(server: ServerInterface, cache: Optional[JudgeCache] = None) -> ServerInterface:
    """`server`, its requests counted and, with `cache`, answered from it when they can be.

    The provider's own `evaluate` and `evaluate_async` are wrapped on the instance: every other
    method (`evaluate_binary`, `evaluate_batch`, the `*_async` helpers) calls one of them, and an
    async provider's synchronous `evaluate` (``AsyncServerInterface``'s) runs `evaluate_async`,
    where the request is counted once."""
    accounting = _Accounting(server, cache)
    if type(server).evaluate is not AsyncServerInterface.evaluate:
        evaluate = server.evaluate

        def accounted_evaluate(request: Request) -> Response:
            key, cached = accounting.lookup(request)
            if cached is not None:
                return cached
            try:
                response = evaluate(request)
            except Exception as error:
                log_judge_request(f"failed: {type(error).__name__}")
                raise
            return accounting.settle(key, response)

        server.evaluate = accounted_evaluate
    if isinstance(server, AsyncServerInterface):
        evaluate_async = server.evaluate_async

        async def accounted_evaluate_async(request: Request) -> Response:
            key, cached = accounting.lookup(request)
            if cached is not None:
                return cached
            try:
                response = await evaluate_async(request)
            except Exception as error:
                log_judge_request(f"failed: {type(error).__name__}")
                raise
            return accounting.settle(key, response)

        server.evaluate_async = accounted_evaluate_async
    return server
