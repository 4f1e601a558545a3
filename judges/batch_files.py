"""Batch files: the request lines the OpenAI Batch API and `vllm run-batch` read, and their result lines.

A request line carries the request's cache key as its `custom_id` and the body the synchronous
judge would send. Every result line is accounted for (`ResultRead`): a line that is not UTF-8, not
a result line, a duplicate or a conflict is counted and named by its "file:line".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from lmms_video_reasoning.judges.config import JudgeConfigError
from lmms_video_reasoning.judges.transport import AttemptFailed, parse_completion, request_body
from lmms_video_reasoning.utils.core.ask import Request
from lmms_video_reasoning.utils.core.files import atomic_target

CHAT_URL = "/v1/chat/completions"


def request_line(key: str, model: str, request: Request) -> dict:
    return {"custom_id": key, "method": "POST", "url": CHAT_URL, "body": request_body(model, request)}


@dataclass(frozen=True)
class ResultLine:
    """One line of a batch output or error file; `where` is its "file:line"."""

    custom_id: str
    status: int | None
    body: Any
    error: str | None
    where: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200 and isinstance(self.body, dict)

    def reply(self) -> tuple[str, str] | None:
        """What would be cached of it (the reply text and the answering model), None for an error line."""
        if not self.ok:
            return None
        try:
            reply = parse_completion(json.dumps(self.body).encode("utf-8"), "")
        except AttemptFailed:
            return ("(malformed)", json.dumps(self.body, sort_keys=True))
        return (reply.raw, reply.answered_by)


@dataclass
class ResultRead:
    """Batch result lines as read: `results` (one line per custom_id), and the lines not in it: blank,
    undecodable, unreadable (not a result line), duplicates (the same reply again, or an error line
    beside its reply: imported once) and conflicts (different replies: none imported)."""

    results: dict[str, ResultLine] = field(default_factory=dict)
    lines: int = 0
    blank: int = 0
    undecodable: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # custom_id -> the file:line of each of its lines

    @property
    def conflict_lines(self) -> int:
        return sum(len(wheres) for wheres in self.conflicts.values())

    def add(self, line: ResultLine) -> None:
        key = line.custom_id
        if key in self.conflicts:
            self.conflicts[key].append(line.where)
            return
        kept = self.results.get(key)
        if kept is None:
            self.results[key] = line
            return
        mine, theirs = line.reply(), kept.reply()
        if mine is not None and theirs is not None and mine != theirs:
            del self.results[key]
            self.conflicts[key] = [kept.where, line.where]
            return
        if mine is not None and theirs is None:  # a reply after an error line (a retry's success): the reply counts
            self.results[key] = line
            self.duplicates.append(f"{kept.where}: {key[:16]}: an error line beside its reply at {line.where}")
        else:
            self.duplicates.append(f"{line.where}: {key[:16]}: {'the same reply' if mine is not None else 'an error line'} "
                                   f"as at {kept.where}")

    def absorb(self, other: "ResultRead") -> None:
        """Another file's read, under the same rules."""
        self.lines += other.lines
        self.blank += other.blank
        self.undecodable += other.undecodable
        self.unreadable += other.unreadable
        self.duplicates += other.duplicates
        for key, wheres in other.conflicts.items():
            kept = self.results.pop(key, None)
            self.conflicts[key] = self.conflicts.get(key, []) + ([kept.where] if kept else []) + wheres
        for line in other.results.values():
            self.add(line)


def read_result_lines(lines: Iterable[bytes | str], where: str, into: ResultRead | None = None) -> ResultRead:
    """Read batch output/error lines (bytes decoded one by one) of the file ``where``."""
    read = into if into is not None else ResultRead()
    for number, data in enumerate(lines, 1):
        read.lines += 1
        place = f"{where}:{number}"
        if isinstance(data, bytes):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as error:
                read.undecodable.append(f"{place}: not UTF-8 (byte 0x{data[error.start]:02x} at column {error.start + 1})")
                continue
        else:
            text = data
        if not text.strip():
            read.blank += 1
            continue
        try:
            row = json.loads(text)
            custom_id = row["custom_id"]
            if not isinstance(custom_id, str):
                raise TypeError("custom_id is not a string")
        except (ValueError, KeyError, TypeError) as error:
            read.unreadable.append(f"{place}: not a batch result line ({type(error).__name__}: {str(error)[:80]})")
            continue
        response = row.get("response") if isinstance(row.get("response"), dict) else {}
        error = row.get("error")
        status = response.get("status_code")
        message = None
        if error:
            message = f"batch error: {error.get('code') or ''} {error.get('message') or ''}".strip() if isinstance(error, dict) else f"batch error: {error}"
        elif status != 200:
            message = f"batch http {status}"
        read.add(ResultLine(custom_id, status, response.get("body"), message, place))
    return read


def place_order(where: str) -> tuple[str, int]:
    """A "file:line" place as (file, line number), for listing lines in file order."""
    name, _, number = where.rpartition(":")
    return (name, int(number)) if number.isdigit() else (where, 0)


def split_bytes(data: bytes) -> list[bytes]:
    """A downloaded file's lines, split as reading the file splits them (on b"\\n" only)."""
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def write_lines(path: Path, lines: Sequence[dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as partial, partial.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def split_lines(lines: Sequence[dict], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """Batch input lines (encoded) in files within the API's limits (requests and bytes per file)."""
    files: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        if len(data) > max_bytes:
            raise JudgeConfigError(f"one judge request ({line['custom_id'][:12]}...) is {len(data)} bytes, over the batch "
                                   f"file limit of {max_bytes} bytes")
        if current and (len(current) >= max_requests or size + len(data) > max_bytes):
            files.append(current)
            current, size = [], 0
        current.append(data)
        size += len(data)
    if current:
        files.append(current)
    return files

