"""A fake OpenAI Batch API on 127.0.0.1, reached by the real `openai` client through `base_url`.

Routes: `POST /v1/files` (multipart upload), `GET /v1/files/{id}` and `/content`, `POST /v1/batches`,
`GET /v1/batches` (list, newest first), `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`,
`GET /v1/models`. A batch moves validating -> in_progress -> an end state over successive
retrieves; its requests are answered by a responder (the sample oracle) when it ends. Scenarios,
taken one per created batch (then "ok"):

- ``ok``: every request answered (output file);
- ``expire``: the first half answered, the rest in the error file as `batch_expired`;
- ``partial``: every third request fails (HTTP 500 in the error file), the others answered;
- ``failed``: input validation fails: no output, the batch's `errors` say why;
- ``hold``: stays in progress until cancelled (`POST .../cancel`): then the first half is answered
  and the batch is `cancelled`.

`pause(step)` holds the next request at a step ("upload", "create", "retrieve", "content") after the
server has done its work, until `release(step)`: a client killed there has e.g. created a batch
whose id it never received.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from batch_runner import chatml_prompt_tokens


class FakeBatchApi:
    def __init__(self, responder: Callable[[dict], str], scenarios: list[str] | None = None, polls_to_finish: int = 2,
                 api_key: str | None = None, model: str = "sample-oracle") -> None:
        self.responder = responder
        self.scenarios = list(scenarios or [])
        self.polls_to_finish = polls_to_finish
        self.api_key = api_key
        self.model = model
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []  # batch ids in creation order
        self.lock = threading.RLock()
        self.arrived: dict[str, threading.Event] = {}
        self._release: dict[str, threading.Event] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self._httpd: ThreadingHTTPServer | None = None
        from lmms_video_reasoning.judges.tokens import tokenizer_for

        self.encode = tokenizer_for("gpt-4o").encode

    # -- control

    def pause(self, step: str) -> None:
        self.arrived[step] = threading.Event()
        self._release[step] = threading.Event()

    def release(self, step: str) -> None:
        if step in self._release:
            self._release[step].set()

    def _hold(self, step: str) -> None:
        if step in self._release and not self._release[step].is_set():
            self.arrived[step].set()
            self._release[step].wait(30)

    def submitted_ids(self) -> list[list[str]]:
        """The custom_ids of each created batch's input file, in creation order."""
        return [[json.loads(line)["custom_id"] for line in self.files[self.batches[b]["input_file_id"]]["content"].decode().splitlines()
                 if line.strip()] for b in self.created]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "FakeBatchApi":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        for event in self._release.values():
            event.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- the API's behaviour

    def add_file(self, name: str, content: bytes, purpose: str) -> dict:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        entry = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()), "filename": name,
                 "purpose": purpose, "status": "processed", "content": content}
        with self.lock:
            self.files[file_id] = entry
        return entry

    def create_batch(self, body: dict) -> dict:
        if body.get("input_file_id") not in self.files:
            raise KeyError("no such file")
        lines = [line for line in self.files[body["input_file_id"]]["content"].decode().splitlines() if line.strip()]
        with self.lock:
            scenario = self.scenarios.pop(0) if self.scenarios else "ok"
            batch_id = f"batch_{uuid.uuid4().hex[:24]}"
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"], "status": "validating", "created_at": int(time.time()),
                "metadata": body.get("metadata"), "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "output_file_id": None, "error_file_id": None, "errors": None,
                "_scenario": scenario, "_polls": 0, "_lines": lines,
            }
            self.created.append(batch_id)
        return self.public(batch_id)

    def public(self, batch_id: str) -> dict:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def advance(self, batch_id: str) -> dict:
        with self.lock:
            batch = self.batches[batch_id]
            if batch["status"] in ("completed", "failed", "expired", "cancelled"):
                return self.public(batch_id)
            batch["_polls"] += 1
            if batch["status"] == "cancelling":
                self._finish(batch, "cancelled", len(batch["_lines"]) // 2)
            elif batch["_scenario"] == "failed" and batch["_polls"] >= 1:
                batch["status"] = "failed"
                batch["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": "injected validation failure", "line": 1}]}
            elif batch["_scenario"] == "hold":
                batch["status"] = "in_progress"
            elif batch["_polls"] >= self.polls_to_finish:
                if batch["_scenario"] == "expire":
                    self._finish(batch, "expired", len(batch["_lines"]) // 2)
                else:
                    self._finish(batch, "completed", len(batch["_lines"]))
            else:
                batch["status"] = "in_progress"
                total = len(batch["_lines"])
                batch["request_counts"]["completed"] = total * batch["_polls"] // (self.polls_to_finish + 1)
            return self.public(batch_id)

    def cancel(self, batch_id: str) -> dict:
        with self.lock:
            batch = self.batches[batch_id]
            if batch["status"] not in ("completed", "failed", "expired", "cancelled"):
                batch["status"] = "cancelling"
            return self.public(batch_id)

    def _finish(self, batch: dict, status: str, answered: int) -> None:
        output, errors = [], []
        for number, text in enumerate(batch["_lines"]):
            line = json.loads(text)
            key = line["custom_id"]
            if number >= answered:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                errors.append({"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": key, "response": None,
                               "error": {"code": code, "message": f"This request could not be executed before the batch {status}."}})
            elif batch["_scenario"] == "partial" and number % 3 == 2:
                errors.append({"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": key, "error": None,
                               "response": {"status_code": 500, "request_id": key[:8], "body": {"error": {"message": "injected server error"}}}})
            else:
                output.append(self._answer(line))
        batch["request_counts"] = {"total": len(batch["_lines"]), "completed": len(output), "failed": len(errors)}
        if output:
            batch["output_file_id"] = self.add_file("output.jsonl", _jsonl(output), "batch_output")["id"]
        if errors:
            batch["error_file_id"] = self.add_file("errors.jsonl", _jsonl(errors), "batch_output")["id"]
        batch["status"] = status

    def _answer(self, line: dict) -> dict:
        body = line["body"]
        reply = self.responder(body)
        prompt = chatml_prompt_tokens(body["messages"], self.encode)
        completion = len(self.encode(reply))
        return {"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": line["custom_id"], "error": None, "response": {
            "status_code": 200, "request_id": uuid.uuid4().hex[:12],
            "body": {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                     "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}}}


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """{field: (filename, bytes)} of a multipart/form-data body."""
    boundary = re.search(r"boundary=\"?([^\";]+)\"?", content_type).group(1).encode()
    fields = {}
    for part in body.split(b"--" + boundary):
        if b"\r\n\r\n" not in part:
            continue
        head, _, data = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        filename = re.search(rb'filename="([^"]*)"', head)
        if name:
            fields[name.group(1).decode()] = (filename.group(1).decode() if filename else None, data[:-2] if data.endswith(b"\r\n") else data)
    return fields


def _handler(api: FakeBatchApi):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, payload, content_type: str = "application/json") -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if api.api_key is not None and self.headers.get("Authorization") != f"Bearer {api.api_key}":
                self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
                return False
            return True

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            api.requests.append(("GET", path))
            if not self._authorized():
                return
            if path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": api.model, "object": "model"}]})
            match = re.fullmatch(r"/v1/files/([\w-]+)/content", path)
            if match and match.group(1) in api.files:
                api._hold("content")
                return self._send(200, api.files[match.group(1)]["content"], "application/octet-stream")
            match = re.fullmatch(r"/v1/files/([\w-]+)", path)
            if match and match.group(1) in api.files:
                return self._send(200, {k: v for k, v in api.files[match.group(1)].items() if k != "content"})
            if path == "/v1/batches":
                data = [api.public(b) for b in reversed(api.created)]
                return self._send(200, {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                                        "last_id": data[-1]["id"] if data else None, "has_more": False})
            match = re.fullmatch(r"/v1/batches/([\w-]+)", path)
            if match and match.group(1) in api.batches:
                batch = api.advance(match.group(1))
                api._hold("retrieve")
                return self._send(200, batch)
            self._send(404, {"error": {"message": f"no route {path}"}})

        def do_POST(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            api.requests.append(("POST", path))
            if not self._authorized():
                return
            if path == "/v1/files":
                fields = _multipart(body, self.headers["Content-Type"])
                filename, content = fields["file"]
                entry = api.add_file(filename or "upload.jsonl", content, fields.get("purpose", (None, b"batch"))[1].decode())
                api._hold("upload")
                return self._send(200, {k: v for k, v in entry.items() if k != "content"})
            if path == "/v1/batches":
                try:
                    batch = api.create_batch(json.loads(body))
                except KeyError:
                    return self._send(400, {"error": {"message": "input file not found"}})
                api._hold("create")
                return self._send(200, batch)
            match = re.fullmatch(r"/v1/batches/([\w-]+)/cancel", path)
            if match and match.group(1) in api.batches:
                return self._send(200, api.cancel(match.group(1)))
            self._send(404, {"error": {"message": f"no route {path}"}})

    return Handler
