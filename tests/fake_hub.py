"""A small Hugging Face Hub on loopback for dataset repos, reached by the real `huggingface_hub`
client through `HF_ENDPOINT` (no mock of the client).

It answers what huggingface_hub 2.x asks for `snapshot_download`, `hf_hub_download` and
`HfApi.dataset_info` (read from the installed client's code, `_snapshot_download.py`,
`file_download.py`, `hf_api.py`):

- `GET /api/datasets/<repo>/revision/<rev>` (optionally `?blobs=True`): repo info with `sha`
  and `siblings` (`rfilename`, and `size` / `lfs` with blobs);
- `GET /api/datasets/<repo>/tree/<rev>[/<folder>]?recursive=...`: the file and folder entries;
- `HEAD` / `GET /datasets/<repo>/resolve/<rev>/<path>`: the bytes, with `ETag` (the sha256,
  as the Hub gives for LFS files), `X-Repo-Commit`, `Content-Length`, `Accept-Ranges`, and
  `Range` requests answered with 206;
- errors as the Hub sends them: `X-Error-Code: RepoNotFound` (401), `GatedRepo` (403),
  `EntryNotFound` / `RevisionNotFound` (404).

`FakeHub.add(repo, {path: bytes | Path}, gated=False)` publishes (or replaces) a repo's files;
each change makes a new commit sha. `requests` records (method, path) of every request.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit


class _Repo:
    def __init__(self, files: dict[str, bytes | Path], gated: bool):
        self.files = {path: (Path(data) if isinstance(data, Path) else bytes(data)) for path, data in files.items()}
        self.gated = gated
        digest = hashlib.sha1()
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self._sha256(path).encode())
        self.sha = digest.hexdigest()

    def data(self, path: str) -> bytes:
        value = self.files[path]
        return value.read_bytes() if isinstance(value, Path) else value

    def size(self, path: str) -> int:
        value = self.files[path]
        return value.stat().st_size if isinstance(value, Path) else len(value)

    def _sha256(self, path: str) -> str:
        value = self.files[path]
        if isinstance(value, Path):
            digest = hashlib.sha256()
            with value.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
        return hashlib.sha256(value).hexdigest()

    def sha256(self, path: str) -> str:
        return self._sha256(path)


class FakeHub:
    def __init__(self):
        self.repos: dict[str, _Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.token: str | None = None  # when set, a gated repo needs "Authorization: Bearer <token>"
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, repo: str, files: dict[str, bytes | Path], gated: bool = False) -> None:
        self.repos[repo] = _Repo(files, gated)

    def downloads(self) -> list[str]:
        """Paths of files fetched with GET (not HEAD)."""
        return [path for method, path in self.requests if method == "GET" and "/resolve/" in path]

    # --- HTTP -----------------------------------------------------------------------------

    def _send(self, handler, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, str(value))
        handler.send_header("Content-Length", str(len(body)) if not (headers and "Content-Length" in headers) else headers["Content-Length"])
        handler.end_headers()
        if not head and body:
            handler.wfile.write(body)

    def _error(self, handler, status: int, code: str, message: str, head: bool) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(handler, status, body, {"X-Error-Code": code, "X-Error-Message": message,
                                           "Content-Type": "application/json"}, head)

    def _json(self, handler, value, head: bool) -> None:
        self._send(handler, 200, json.dumps(value).encode(), {"Content-Type": "application/json"}, head)

    def _repo(self, handler, name: str, head: bool) -> _Repo | None:
        repo = self.repos.get(name)
        if repo is None:
            self._error(handler, 401, "RepoNotFound", f"Repository Not Found for url: {name}", head)
            return None
        if repo.gated and handler.headers.get("Authorization") != f"Bearer {self.token}":
            self._error(handler, 403, "GatedRepo", f"Access to dataset {name} is restricted.", head)
            return None
        return repo

    def _serve(self, handler, head: bool) -> None:
        split = urlsplit(handler.path)
        path, query = unquote(split.path), parse_qs(split.query)
        self.requests.append(("HEAD" if head else "GET", path))
        info = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        tree = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
        resolve = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if info:
            repo = self._repo(handler, info[1], head)
            if repo is None:
                return
            if info[2] not in (None, "main", repo.sha):
                return self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {info[2]}", head)
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            siblings = []
            for name in sorted(repo.files):
                entry = {"rfilename": name}
                if blobs:
                    entry.update(size=repo.size(name), blobId=repo.sha256(name)[:40],
                                 lfs={"sha256": repo.sha256(name), "size": repo.size(name), "pointerSize": 134})
                siblings.append(entry)
            return self._json(handler, {"id": info[1], "sha": repo.sha, "private": False, "gated": "manual" if repo.gated else False,
                                        "disabled": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
                                        "lastModified": "2025-04-01T00:00:00.000Z", "cardData": None}, head)
        if tree:
            repo = self._repo(handler, tree[1], head)
            if repo is None:
                return
            folder = (tree[3] or "").strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries, folders = [], set()
            for name in sorted(repo.files):
                if folder and not name.startswith(folder + "/"):
                    continue
                rest = name[len(folder) + 1:] if folder else name
                if "/" in rest and not recursive:
                    folders.add((folder + "/" if folder else "") + rest.split("/", 1)[0])
                    continue
                parts = name.split("/")
                for k in range(1, len(parts)):
                    sub = "/".join(parts[:k])
                    if not folder or sub.startswith(folder + "/"):
                        folders.add(sub)
                entries.append({"type": "file", "path": name, "size": repo.size(name), "oid": repo.sha256(name)[:40],
                                "lfs": {"oid": repo.sha256(name), "size": repo.size(name), "pointerSize": 134}})
            entries = [{"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest()} for f in sorted(folders)] + entries
            return self._json(handler, entries, head)
        if resolve:
            repo = self._repo(handler, resolve[1], head)
            if repo is None:
                return
            if resolve[2] not in ("main", repo.sha):
                return self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {resolve[2]}", head)
            name = resolve[3]
            if name not in repo.files:
                return self._error(handler, 404, "EntryNotFound", f"{name} does not exist on 'main'", head)
            size = repo.size(name)
            headers = {"ETag": f'"{repo.sha256(name)}"', "X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes",
                       "Content-Type": "application/octet-stream"}
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", handler.headers.get("Range", ""))
            if head:
                return self._send(handler, 200, b"", {**headers, "Content-Length": size}, head=True)
            data = repo.data(name)
            if match:
                start = int(match[1])
                end = int(match[2]) if match[2] else size - 1
                body = data[start:end + 1]
                return self._send(handler, 206, body, {**headers, "Content-Range": f"bytes {start}-{end}/{size}"})
            return self._send(handler, 200, data, headers)
        self._error(handler, 404, "EntryNotFound", f"no route for {path}", head)
