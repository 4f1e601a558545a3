"""A real OpenAI-compatible chat server on 127.0.0.1 for tests, demos and the throughput benchmark:
``POST /v1/chat/completions`` answers ``responder(request_body) -> text`` (or ``faults``, tests/judge_faults.py,
do), ``GET /stats`` counts requests. As a subprocess its first stdout line is the base URL.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence


def echo_responder(body: dict) -> str:
    return "echo: " + last_user_text(body)


def last_user_text(body: dict) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(part.get("text", "") for part in content or [] if part.get("type") == "text")
    return ""


class _Server(ThreadingHTTPServer):  # daemon threads, address reuse: ThreadingHTTPServer's defaults
    request_queue_size = 512  # the benchmark opens 64+ connections at once


class LocalJudgeServer:
    """Threaded OpenAI-compatible HTTP server on 127.0.0.1:<free port>; a context manager."""

    def __init__(self, responder: Callable[[dict], str] | None = None, latency: float = 0.0, faults: Any = None,
                 model: str = "local-judge", port: int = 0, api_key: str | None = None, reply_model: str | None = None,
                 listed_models: Sequence[str] | None = None, usage: Callable[[dict, str], dict] | None = None) -> None:
        self.responder = responder or echo_responder
        self.latency = latency
        self.faults = faults  # `.answer(handler, number, body)` -> True when it answered the request itself
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
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
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


def _usage(body: dict, reply: str) -> dict:
    prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion_tokens = max(1, len(reply) // 4)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def _handler_for(server: LocalJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its pooled connections
        # Headers and body go out in separate writes; with Nagle's algorithm the body would
        # wait for the client's delayed ACK (~40 ms per reply).
        disable_nagle_algorithm = True
        judge_server = server

        def log_message(self, *args) -> None:  # keep test and benchmark output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/stats":
                self.send_json(200, {"requests": server.request_count})
            elif self.path.rstrip("/") == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{"id": name, "object": "model"} for name in server.listed_models]})
            else:
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self.send_json(400, {"error": {"message": "request body is not JSON"}})
                return
            with server._lock:
                server.requests.append(body)
                number = len(server.requests)
            if server.latency:
                time.sleep(server.latency)
            if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                self.send_json(401, {"error": {"message": "Incorrect API key provided: " + self.headers.get("Authorization", "")[7:], "type": "invalid_request_error"}})
                return
            if server.faults is not None and server.faults.answer(self, number, body):
                return
            try:
                reply = server.responder(body)
            except Exception as error:  # a responder bug shows up as a server error, like a real backend
                self.send_json(500, {"error": {"message": f"responder failed: {type(error).__name__}: {error}"}})
                return
            self.send_json(200, self.completion(number, body, reply))

        def completion(self, number: int, body: dict, reply: str) -> dict:
            return {
                "id": f"chatcmpl-local-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": server.reply_model or body.get("model", server.model),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": server.usage(body, reply),
            }

        def send_json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            self.send_bytes(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

        def send_bytes(self, status: int, payload: bytes, headers: dict) -> None:
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
    parser.add_argument("--api-key", default=None, help="require this bearer key (401 otherwise)")
    parser.add_argument("--model", default="local-judge")
    args = parser.parse_args(argv)

    server = LocalJudgeServer(_load_responder(args.responder), args.latency, None, args.model, args.port, args.api_key).start()
    print(server.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
