"""A real OpenAI-compatible chat server on 127.0.0.1 for tests, demos and the throughput benchmark.

``POST /v1/chat/completions`` answers with ``responder(request_body) -> text`` after an
optional latency, with token usage, and can inject faults (429 with Retry-After, 500,
timeouts, truncated bodies, malformed JSON, 401) per request number, probabilistically
with a seed, or for the first K attempts of each distinct request (so retries succeed
deterministically). ``GET /stats`` returns ``{"requests": n}``.

Run as a subprocess (tests kill and restart it)::

    python -m lmms_video_reasoning.judges.local_server --port 0 \\
        --responder lmms_video_reasoning.judges.local_server:echo_responder --latency 0.2

The first line on stdout is the base URL.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import json
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence

FAULT_KINDS = ("429", "500", "503", "timeout", "truncated", "malformed", "401", "400",
               # HTTP 200 but wrong inside: empty content (no parser accepts it); `usage` malformed; a body
               # sent one byte per `slow_interval`; a body of `huge_bytes`.
               "unparseable", "bad_usage", "slow_body", "huge",
               # 429 with a Retry-After that is not a number of seconds or a date.
               "429_soon", "429_nan")


def echo_responder(body: dict) -> str:
    """Default reply: the last user message's text, prefixed with "echo: "."""
    return "echo: " + last_user_text(body)


def last_user_text(body: dict) -> str:
    """Text of the last user message of a chat request (text parts joined)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(part.get("text", "") for part in content or [] if part.get("type") == "text")
    return ""


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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the benchmark opens 64+ connections at once
    allow_reuse_address = True


class LocalJudgeServer:
    """Threaded OpenAI-compatible HTTP server on 127.0.0.1:<free port>; a context manager."""

    def __init__(
        self,
        responder: Callable[[dict], str] | None = None,
        latency: float = 0.0,
        faults: FaultPlan | None = None,
        model: str = "local-judge",
        port: int = 0,
        api_key: str | None = None,
        reply_model: str | None = None,
        listed_models: Sequence[str] | None = None,
        usage: Callable[[dict, str], dict] | None = None,
    ) -> None:
        self.responder = responder or echo_responder
        self.latency = latency
        self.faults = faults
        self.model = model
        self.api_key = api_key  # when set, requests without "Bearer <api_key>" get 401
        # The reply's `model` field: the requested name (None, like a server serving that
        # model), or always this name (a server answering with its own model whatever is asked).
        self.reply_model = reply_model
        self.listed_models = list(listed_models) if listed_models is not None else [model]  # GET /v1/models
        # (request body, reply) -> the reply's `usage`: e.g. counted with a real tokenizer (default: 4 characters a token)
        self.usage = usage or _usage
        self.requests: list[dict] = []
        self._port = port
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("LocalJudgeServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "LocalJudgeServer":
        self._httpd = _Server(("127.0.0.1", self._port), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "LocalJudgeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _record(self, body: dict) -> int:
        with self._lock:
            self.requests.append(body)
            return len(self.requests)


def _usage(body: dict, reply: str) -> dict:
    """Rough token counts (4 characters per token), enough for cost accounting tests."""
    prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion_tokens = max(1, len(reply) // 4)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def _handler_for(server: LocalJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its pooled connections
        # Headers and body go out in separate writes; with Nagle's algorithm the body would
        # wait for the client's delayed ACK (~40 ms per reply).
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:  # keep test and benchmark output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/stats":
                self._json(200, {"requests": server.request_count})
            elif self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": name, "object": "model"} for name in server.listed_models]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, {"error": {"message": "request body is not JSON"}})
                return
            number = server._record(body)
            if server.latency:
                time.sleep(server.latency)
            if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                self._json(401, {"error": {"message": "Incorrect API key provided: " + self.headers.get("Authorization", "")[7:], "type": "invalid_request_error"}})
                return
            fault = server.faults.decide(number, body) if server.faults else None
            if fault:
                self._fault(fault, server.faults, number, body)
                return
            try:
                reply = server.responder(body)
            except Exception as error:  # a responder bug shows up as a server error, like a real backend
                self._json(500, {"error": {"message": f"responder failed: {type(error).__name__}: {error}"}})
                return
            self._json(200, self._completion(number, body, reply))

        def _completion(self, number: int, body: dict, reply: str) -> dict:
            return {
                "id": f"chatcmpl-local-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": server.reply_model or body.get("model", server.model),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": server.usage(body, reply),
            }

        def _fault(self, fault: str, plan: FaultPlan, number: int = 0, body: dict | None = None) -> None:
            if fault == "429":
                self._json(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": f"{plan.retry_after:g}"})
            elif fault in ("500", "503"):
                self._json(int(fault), {"error": {"message": "injected server error"}})
            elif fault == "400":  # what OpenAI answers to a prompt longer than the context
                self._json(400, {"error": {"message": "injected: maximum context length exceeded", "code": "context_length_exceeded"}})
            elif fault == "401":
                self._json(401, {"error": {"message": "injected: invalid api key", "type": "invalid_request_error"}})
            elif fault == "timeout":
                time.sleep(plan.timeout_sleep)
                self._json(200, {"error": "too late"})
            elif fault == "malformed":
                self._send(200, b'{"choices": [{"message": {"content": "broken', {"Content-Type": "application/json"})
            elif fault == "truncated":
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 200}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
            elif fault == "unparseable":  # what an overloaded or degraded judge sends with a 200: no content
                self._json(200, self._completion(number, body or {}, ""))
            elif fault == "bad_usage":
                completion = self._completion(number, body or {}, server.responder(body or {}))
                completion["usage"] = {"prompt_tokens": "many", "completion_tokens": [3]}
                self._json(200, completion)
            elif fault in ("429_soon", "429_nan"):
                self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": fault[4:]})
            elif fault == "slow_body":
                payload = json.dumps(self._completion(number, body or {}, server.responder(body or {}))).encode()
                self._stream(len(payload), (payload[i:i + 1] for i in range(len(payload))), plan.slow_interval)
            elif fault == "huge":
                head, tail = b'{"choices": [{"message": {"role": "assistant", "content": "', b'"}}]}'
                chunk = b"x" * (1024 * 1024)
                count = max(1, plan.huge_bytes // len(chunk))
                pieces = itertools.chain([head], itertools.repeat(chunk, count), [tail])
                self._stream(len(head) + count * len(chunk) + len(tail), pieces, 0.0)

        def _stream(self, length: int, pieces, interval: float) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(length))
                self.end_headers()
                for piece in pieces:
                    self.wfile.write(piece)
                    self.wfile.flush()
                    if interval:
                        time.sleep(interval)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass  # the client gave up, as it should
            self.close_connection = True

        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

        def _send(self, status: int, payload: bytes, headers: dict) -> None:
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (timeout fault)

    return Handler


def _load_responder(spec: str) -> Callable[[dict], str]:
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise SystemExit(f"--responder must look like pkg.module:function, got {spec!r}")
    return getattr(importlib.import_module(module_name), attribute)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--responder", default="lmms_video_reasoning.judges.local_server:echo_responder")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each reply")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-kinds", default="429,500,truncated,malformed")
    parser.add_argument("--first-k", type=int, default=0, help="first K attempts of each distinct request fail")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--api-key", default=None, help="require this bearer key (401 otherwise)")
    parser.add_argument("--model", default="local-judge")
    args = parser.parse_args(argv)

    faults = None
    if args.fault_rate or args.first_k:
        faults = FaultPlan(rate=args.fault_rate, first_k=args.first_k, kinds=tuple(args.fault_kinds.split(",")), seed=args.seed)
    server = LocalJudgeServer(_load_responder(args.responder), args.latency, faults, args.model, args.port, args.api_key).start()
    print(server.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
