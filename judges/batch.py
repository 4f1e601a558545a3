"""Judging without sending: the cost estimate, batch files and the state of batch judging.

The benchmarks' own judging code runs unchanged; `get_judge` hands it a `PassJudge` instead of
the synchronous one (`engine.judges_replaced_by`). A `PassJudge` serves cached replies exactly
as the synchronous judge does, and for a request with no servable reply it

- ``estimate``: counts it (input tokens with the judge model's tokenizer, `judges/tokens.py`;
  output tokens of the protocol's `expected_reply`) and, when walking, answers it with that
  expected reply so the chain goes on to its later steps (nothing is cached);
- ``collect``: records it as a batch request (the OpenAI Batch API / `vllm run-batch` line, with
  the cache key as `custom_id`) and answers ``PENDING``;
- ``import``: takes its reply from a batch results file and validates it with the synchronous
  rules: a reply that parses is cached, one that does not is kept in the cache's `rejected`
  table and the request's re-ask (the next attempt's key) becomes the next pending request.

A ``PENDING`` answer is a not-yet-available verdict: the benchmarks treat it as a failed
judgment for that pass (its dependent steps are not asked), and nothing about it is cached.

`BatchLedger` keeps, in new tables of the judge cache, which requests were exported or
submitted, answered, rejected (the next attempt is due), failed in a batch (retried up to the
judge's `max_attempts`), and the Batch API submissions (`batch_api.py`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.cache import CacheLockTimeout, CachedReply, ReplyCache
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError, cache_path_from_env, default_model
from lmms_video_reasoning.judges.engine import (
    UNNAMED_MODEL,
    Judge,
    JudgeRequest,
    JudgeResult,
    _AttemptFailed,
    _NotComputed,
    _read,
    configured_judge,
    _validate,
    parse_completion,
    reply_too_large,
    request_body,
    request_keys,
    same_model,
)

PENDING = "pending: judged later through a batch (no verdict yet)"
CHAT_URL = "/v1/chat/completions"
ESTIMATED = "(estimate)"  # the answering model of an assumed reply

# batch_requests.state
EXPORTED, IN_FLIGHT, ANSWERED, REJECTED, ERRORED, FAILED = "exported", "in_flight", "answered", "rejected", "errored", "failed"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS batch_requests (
        key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        benchmark TEXT,
        tag TEXT,
        state TEXT NOT NULL,
        errors INTEGER NOT NULL DEFAULT 0,
        submission TEXT,
        reason TEXT,
        updated REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS api_batches (
        submission TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        endpoint TEXT,
        state TEXT NOT NULL,
        input_file_id TEXT,
        batch_id TEXT,
        requests INTEGER NOT NULL,
        status TEXT,
        summary TEXT,
        created REAL NOT NULL,
        updated REAL NOT NULL
    )""",
)


@dataclass(frozen=True)
class LedgerEntry:
    state: str
    errors: int
    submission: str | None
    reason: str | None


class BatchLedger:
    """Batch judging state in the judge cache's database (tables of its own; the replies stay in
    `replies` / `rejected`)."""

    def __init__(self, cache: ReplyCache) -> None:
        self.cache = cache
        for attempt in range(40):  # a new database being created by another process: retry "locked"
            try:
                with cache.locked() as db:
                    for statement in _SCHEMA:
                        db.execute(statement)
                break
            except sqlite3.OperationalError as error:
                if isinstance(error, CacheLockTimeout) or "locked" not in str(error) or attempt == 39:
                    raise JudgeConfigError(f"cannot set up batch judging in the judge cache {cache.path} ({error}); "
                                           "set LMMS_VR_JUDGE_CACHE to a writable file") from None
                time.sleep(0.05 * (attempt + 1))

    def _rows(self, statement: str, parameters: tuple = ()) -> list[tuple]:
        return self.cache.execute(statement, parameters)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, holding the cache (its dot-lock on a network file system) throughout."""
        with self.cache.locked() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def entry(self, key: str) -> LedgerEntry | None:
        rows = self._rows("SELECT state, errors, submission, reason FROM batch_requests WHERE key = ?", (key,))
        return LedgerEntry(*rows[0]) if rows else None

    def mark(self, key: str, model: str, state: str, *, benchmark: str = "", tag: str = "", reason: str | None = None,
             add_error: bool = False, submission: str | None = None) -> None:
        self._rows(
            "INSERT INTO batch_requests (key, model, benchmark, tag, state, errors, submission, reason, updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state, "
            "errors = batch_requests.errors + ?, submission = excluded.submission, reason = COALESCE(excluded.reason, batch_requests.reason), "
            "updated = excluded.updated, benchmark = COALESCE(NULLIF(excluded.benchmark, ''), batch_requests.benchmark), "
            "tag = COALESCE(NULLIF(excluded.tag, ''), batch_requests.tag)",
            (key, model, benchmark, tag, state, int(add_error), submission, reason, time.time(), int(add_error)),
        )

    def mark_many(self, keys: Sequence[str], model: str, state: str, submission: str | None = None,
                  meta: dict[str, tuple[str, str]] | None = None) -> None:
        """One transaction for many keys (`meta`: key -> (benchmark, tag))."""
        with self._transaction():
            for key in keys:
                benchmark, tag = (meta or {}).get(key, ("", ""))
                self.mark(key, model, state, benchmark=benchmark, tag=tag, submission=submission)

    def keys_of(self, submission: str) -> list[str]:
        return [row[0] for row in self._rows("SELECT key FROM batch_requests WHERE submission = ?", (submission,))]

    def held(self, keys: Sequence[str]) -> str | None:
        """What the batch flow says of a request (its attempts' keys, as `request_keys` gives them)
        that has no cached verdict: None (none of them was ever exported: not the batch's),
        FAILED (its attempts used up in the batches, or each of its replies rejected: what an
        export would now count as failed), else EXPORTED (due: exported or in flight, due again
        after a failed line, or its re-ask not answered yet)."""
        marks = ",".join("?" * len(keys))
        states = dict(self._rows(f"SELECT key, state FROM batch_requests WHERE key IN ({marks})", tuple(keys)))
        if not states:
            return None
        if FAILED in states.values() or all(states.get(key) == REJECTED for key in keys):
            return FAILED
        return EXPORTED

    def has_answers(self, model: str) -> bool:
        """Whether replies for ``model`` were imported from a batch into this cache."""
        return bool(self._rows("SELECT 1 FROM batch_requests WHERE model = ? AND state = ? LIMIT 1", (model, ANSWERED)))

    # -- Batch API submissions (batch_api.py)

    def submissions(self, model: str, states: Sequence[str]) -> list[dict]:
        marks = ",".join("?" * len(states))
        rows = self._rows(f"SELECT submission, model, endpoint, state, input_file_id, batch_id, requests, status, summary, "
                          f"created FROM api_batches WHERE model = ? AND state IN ({marks}) ORDER BY created",
                          (model, *states))
        names = ("submission", "model", "endpoint", "state", "input_file_id", "batch_id", "requests", "status", "summary", "created")
        return [dict(zip(names, row)) for row in rows]

    def add_submission(self, submission: str, model: str, endpoint: str, keys: Sequence[str], meta: dict) -> None:
        """The submission row and its keys in flight, in one transaction (before anything is uploaded)."""
        with self._transaction() as db:
            now = time.time()
            db.execute("INSERT INTO api_batches (submission, model, endpoint, state, requests, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (submission, model, endpoint, "uploading", len(keys), now, now))
            for key in keys:
                benchmark, tag = meta.get(key, ("", ""))
                self.mark(key, model, IN_FLIGHT, benchmark=benchmark, tag=tag, submission=submission)

    def update_submission(self, submission: str, **values: Any) -> None:
        names = ", ".join(f"{name} = ?" for name in values)
        self._rows(f"UPDATE api_batches SET {names}, updated = ? WHERE submission = ?", (*values.values(), time.time(), submission))

    def drop_submission(self, submission: str) -> None:
        """A submission that never reached the API (killed before its upload finished): its keys are due again."""
        with self._transaction() as db:
            db.execute("UPDATE batch_requests SET state = ?, submission = NULL WHERE submission = ? AND state = ?", (EXPORTED, submission, IN_FLIGHT))
            db.execute("DELETE FROM api_batches WHERE submission = ?", (submission,))


# ---------------------------------------------------------------------- scoring after the batch flow

HELD_FAILED = ("not sent: the offline batch flow failed it (its batch attempts used up, or no reply parsed); "
               "`lmms-vr score PATH --judge-online` sends it to the configured judge")
HELD_DUE = ("not sent: the offline batch flow exported it and has no answer for it yet; export it with "
            "`lmms-vr score PATH --batch-export FILE`, or send it with `lmms-vr score PATH --judge-online`")


class BatchBoundJudge(Judge):
    """The configured judge when its cache holds an offline batch flow of its model (`--batch-export`
    / `--batch-import`): cached verdicts are served as usual, and so is (sent) a request the flow
    never exported; a request the flow holds (`BatchLedger.held`) is not sent: it is not computed
    (a failed judgment, as a `CacheOnlyJudge` miss), counted as `batch_failed` or `batch_due`. So a
    key in the environment never re-sends, on its own, what was judged (or failed) in a batch;
    `lmms-vr score --judge-online` uses the plain configured judge."""

    def __init__(self, config: JudgeConfig, budget, breaker, ledger: "BatchLedger") -> None:
        super().__init__(config, budget, breaker)
        self.ledger = ledger

    def _fetch(self, request: JudgeRequest, key: str = "") -> CachedReply:
        state = self.ledger.held(request_keys(self.config.model, request))
        if state is None:
            return super()._fetch(request, key)
        failed = state == FAILED
        self.stats.add(request.tag, **{"batch_failed" if failed else "batch_due": 1})
        raise _NotComputed(HELD_FAILED if failed else HELD_DUE)


def batch_bound_judge(config: JudgeConfig) -> "BatchBoundJudge | None":
    """The process's `BatchBoundJudge` for ``config`` when its judge cache holds batch requests of its
    model, else None (the configured judge, unchanged). A cache that cannot be read: None (the judge
    reports its cache errors)."""
    if config.cache_path is None or not Path(config.cache_path).is_file():
        return None
    try:
        cache = ReplyCache(config.cache_path)
        if not cache.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batch_requests'"):
            return None
        if not cache.execute("SELECT 1 FROM batch_requests WHERE model = ? LIMIT 1", (config.model,)):
            return None
        ledger = BatchLedger(cache)
    except (sqlite3.Error, OSError, JudgeConfigError):
        return None
    return configured_judge(config, BatchBoundJudge, ledger)


# ---------------------------------------------------------------------- batch lines


def request_line(key: str, model: str, request: JudgeRequest) -> dict:
    """One line of a batch input file (OpenAI Batch API and `vllm run-batch` share it)."""
    return {"custom_id": key, "method": "POST", "url": CHAT_URL, "body": request_body(model, request)}


@dataclass(frozen=True)
class ResultLine:
    """One line of a batch output or error file: the reply body, or the error; `where` is its
    file and line number ("results.jsonl:12")."""

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
        except _AttemptFailed:
            return ("(malformed)", json.dumps(self.body, sort_keys=True))
        return (reply.raw, reply.answered_by)


@dataclass
class ResultRead:
    """Batch result lines as read, every line accounted for: `results` (one line per custom_id),
    and the lines that are not in it: blank, undecodable (not UTF-8), unreadable (not a batch
    result line), duplicates (the custom_id's reply again, or an error line beside its reply:
    imported once) and conflicts (one custom_id with different replies: none of its lines is
    imported). Each listed line is named "file:line"."""

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
        """One result line, under the rule for a custom_id seen before."""
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
        """Another read's lines (another file of the same import), under the same rules."""
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
    """Read batch output/error lines (bytes, each decoded on its own: a line that is not UTF-8 or
    not a result line is counted and named, and the others are read). `where` names the file."""
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


# ---------------------------------------------------------------------- the pass judge


@dataclass
class TagEstimate:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    after_assumed: int = 0  # requests reached only by assuming an earlier step's expected reply
    later_steps: int = 0  # possible dependent requests not counted (not walking)
    output_unknown: int = 0  # requests without an expected reply: max_tokens counted
    not_built: int = 0  # later requests of this step not counted: the item's code failed building them (`Unbuilt`)


@dataclass
class Unbuilt:
    """A judging item whose code failed in an estimate pass (e.g. the media of its next request not
    found): the requests it would have made from there on are not in the estimate."""

    task: str
    after: str | None  # the tag of its last request (None: it failed before its first one)
    later_steps: int  # the requests that last request declares after it (0: unknown, at least one)
    reason: str


@dataclass
class Pending:
    """A request to send now: its batch line and what bounds the rounds it can still take."""

    key: str
    benchmark: str
    tag: str
    line: dict
    rounds_left: int


@dataclass
class ImportCounts:
    """What an import did with every line of its results (`accounted()` of them add up to `lines`)."""

    lines: int = 0  # the results' lines, every one of them
    cached: int = 0  # parsed, stored as servable replies
    rejected: int = 0  # did not parse: kept apart, the re-ask is due
    errors: int = 0  # error lines / non-200 responses / unreadable bodies: the request is due again
    failed: int = 0  # of those (and of the too large), requests whose batch attempts are used up (judged failed)
    refused_model: int = 0  # answered by another model than the judge's
    refused_foreign: int = 0  # custom_id not exported from this cache
    refused_stale: int = 0  # custom_id no longer asked for (already answered, or not part of this scoring)
    refused_too_large: int = 0  # a reply over the judge's max_reply_bytes (LMMS_VR_JUDGE_MAX_REPLY_BYTES), as synchronous replies
    refused: list[str] = field(default_factory=list)  # every refused line: "file:line: custom_id: why"
    blank: int = 0
    duplicates: list[str] = field(default_factory=list)  # imported once (`ResultRead`)
    conflicts: list[str] = field(default_factory=list)  # "custom_id: file:line, file:line": different replies, none imported
    conflict_lines: int = 0
    undecodable: list[str] = field(default_factory=list)  # not UTF-8: "file:line: ..."
    unreadable: list[str] = field(default_factory=list)  # not a batch result line: "file:line: ..."
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def take(self, read: "ResultRead") -> None:
        """The lines a read kept out of the results."""
        self.lines += read.lines
        self.blank += read.blank
        self.duplicates += read.duplicates
        self.conflicts += [f"{key[:16]}: {', '.join(wheres)}" for key, wheres in read.conflicts.items()]
        self.conflict_lines += read.conflict_lines
        self.undecodable += read.undecodable
        self.unreadable += read.unreadable

    def refuse(self, kind: str, line: "ResultLine", why: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.refused.append(f"{line.where}: {line.custom_id[:16]}: {why}")

    def accepted(self) -> int:
        """Lines whose result was taken (cached, kept apart as unparsed, or counted as a failed attempt)."""
        return self.cached + self.rejected + self.errors

    def accounted(self) -> int:
        return (self.accepted() + self.refused_model + self.refused_foreign + self.refused_stale + self.refused_too_large
                + self.blank + len(self.duplicates) + self.conflict_lines + len(self.undecodable) + len(self.unreadable))

    def as_dict(self) -> dict:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["refused"] = sorted(self.refused, key=lambda line: place_order(line.split(": ", 1)[0]))
        out["accepted"], out["unaccounted"] = self.accepted(), self.lines - self.accounted()
        return out


class _Ctx(threading.local):
    assumed = False  # this item's chain went on from an assumed reply
    last: tuple[str, int] | None = None  # (tag, later_steps) of the item's last request


class JudgePass:
    """One pass of the benchmarks' judging with `PassJudge`s (use as `factory` of
    `engine.judges_replaced_by`). Shared state, per benchmark's judge: estimates by task and
    tag, pending requests, import counts."""

    def __init__(self, mode: str, results: dict[str, ResultLine] | None = None, walk: bool = False,
                 endpoint: str = "(batch file)") -> None:
        if mode not in ("estimate", "collect", "import"):
            raise ValueError(f"unknown pass mode {mode!r}")
        self.mode, self.walk, self.endpoint = mode, walk, endpoint
        self.results = results or {}
        self.consumed: set[str] = set()
        self.task = ""  # set by the caller before each task's judging
        self.estimates: dict[str, dict[str, TagEstimate]] = defaultdict(lambda: defaultdict(TagEstimate))
        self.pending: dict[str, Pending] = {}
        self.counts = ImportCounts()
        self.judges: dict[str, PassJudge] = {}
        self.served: dict[str, int] = defaultdict(int)  # task -> cache hits
        self.unbuilt: list[Unbuilt] = []  # estimate: items whose code failed, their later requests not counted
        self.lock = threading.Lock()

    def __call__(self, benchmark: str, config: JudgeConfig | None) -> "PassJudge | None":
        judge = self.judges.get(benchmark)
        if judge is None:
            judge = self.judges[benchmark] = PassJudge(self, pass_config(benchmark, config, need_cache=self.mode != "estimate"))
        return judge

    def models(self) -> dict[str, str]:
        return {benchmark: judge.config.model for benchmark, judge in self.judges.items()}


def pass_config(benchmark: str, config: JudgeConfig | None, need_cache: bool) -> JudgeConfig:
    """The configured judge's configuration, or (no key here, e.g. a GPU node) the model the
    environment names for ``benchmark`` with the cache of LMMS_VR_JUDGE_CACHE."""
    if config is None:
        from lmms_video_reasoning.judges.config import DEFAULT_MAX_REPLY_BYTES, _int, _prices
        import os

        config = JudgeConfig(model=default_model(benchmark), benchmark=benchmark, cache_path=cache_path_from_env(),
                             model_env="(batch)", prices=_prices(os.environ),
                             max_reply_bytes=_int(os.environ, "LMMS_VR_JUDGE_MAX_REPLY_BYTES", DEFAULT_MAX_REPLY_BYTES, minimum=1024))
    if need_cache and config.cache_path is None:
        raise JudgeConfigError("batch judging keeps its replies in the judge cache, which is off (LMMS_VR_JUDGE_CACHE=off): "
                               "set LMMS_VR_JUDGE_CACHE to a file")
    return config


class PassJudge(Judge):
    """A judge that never sends (see the module doc); cached replies are served as usual."""

    def __init__(self, owner: JudgePass, config: JudgeConfig) -> None:
        super().__init__(config)
        self.owner = owner
        # The estimate reads the cache only: no batch tables are created for it.
        self.ledger = BatchLedger(self.cache) if self.cache is not None and owner.mode != "estimate" else None
        self._ctx = _Ctx()
        if owner.mode == "estimate":
            from lmms_video_reasoning.judges.tokens import tokenizer_for

            self.tokenizer = tokenizer_for(config.model)

    def map(self, fn, items, desc="judging"):
        def each(item, ask):
            self._ctx.assumed, self._ctx.last = False, None
            try:
                return fn(item, ask)
            except JudgeConfigError:
                raise
            except Exception as error:  # noqa: BLE001 - counted here, then failed as `Judge.map` fails it
                if self.owner.mode == "estimate":
                    self._not_built(f"{type(error).__name__}: {self._scrub(str(error))}")
                raise

        return super().map(each, items, desc=f"{desc} ({self.owner.mode} pass)")

    def _not_built(self, reason: str) -> None:
        last = self._ctx.last
        with self.owner.lock:
            self.owner.unbuilt.append(Unbuilt(self.owner.task, last[0] if last else None, last[1] if last else 0, reason))
            if last is not None:
                self.owner.estimates[self.owner.task][last[0]].not_built += last[1]

    def ask(self, request: JudgeRequest) -> JudgeResult:
        _validate(request)
        self._ctx.last = (request.tag or "(untagged)", request.later_steps)
        keys = request_keys(self.config.model, request)
        for key in keys:
            hit, _refusal = self._lookup(key, request)
            if hit is not None:
                with self.owner.lock:
                    self.owner.served[self.owner.task] += 1
                return JudgeResult(True, hit[1], hit[0].raw, None, True, hit[0].answered_by)
        last_reason, last_raw = None, None
        for attempt, key in enumerate(keys):
            entry = self.ledger.entry(key) if self.ledger is not None and self.owner.mode != "estimate" else None
            if entry is not None and entry.state == REJECTED:
                last_reason = entry.reason
                continue  # this attempt's reply did not parse: the next attempt is the re-ask
            if entry is not None and entry.state == FAILED:
                return self._failed(request, entry.reason or "batch attempts used up")
            outcome = self._uncached(request, key, attempt, len(keys), entry)
            if isinstance(outcome, JudgeResult):
                return outcome
            last_reason, last_raw = outcome  # rejected just now: on to the re-ask
        return self._failed(request, f"{last_reason or 'parse: no reply parsed'} (after {len(keys)} replies)", last_raw)

    def _failed(self, request: JudgeRequest, error: str, raw: str | None = None) -> JudgeResult:
        self.stats.add_failure(request.tag, error)
        return JudgeResult(False, None, raw, error, False)

    def _pending(self) -> JudgeResult:
        return JudgeResult(False, None, None, PENDING, False)

    # -- per mode

    def _uncached(self, request, key, attempt, attempts, entry):
        mode = self.owner.mode
        if mode == "estimate":
            return self._estimate(request)
        if mode == "collect":
            if entry is None or entry.state != IN_FLIGHT:
                self._collect(request, key, attempt, attempts)
            return self._pending()
        return self._import(request, key, attempt, attempts, entry)

    def _estimate(self, request: JudgeRequest) -> JudgeResult:
        tokens_in = self.tokenizer.request_tokens(request.messages)
        known = request.expected_reply is not None
        tokens_out = self.tokenizer.text_tokens(request.expected_reply) if known else request.max_tokens
        with self.owner.lock:
            entry = self.owner.estimates[self.owner.task][request.tag or "(untagged)"]
            entry.requests += 1
            entry.input_tokens += tokens_in
            entry.output_tokens += tokens_out
            entry.output_unknown += not known
            entry.after_assumed += self._ctx.assumed
            if not (self.owner.walk and known):
                entry.later_steps += request.later_steps
        if self.owner.walk and known and request.later_steps:
            try:
                value = _read(request, request.expected_reply)
            except parsing.ParseError:
                return self._pending()
            self._ctx.assumed = True
            return JudgeResult(True, value, request.expected_reply, None, False, ESTIMATED)
        return self._pending()

    def _collect(self, request: JudgeRequest, key: str, attempt: int, attempts: int) -> None:
        per_step = attempts
        rounds = (attempts - attempt) + request.later_steps * per_step
        pending = Pending(key, self.config.benchmark, request.tag, request_line(key, self.config.model, request), rounds)
        with self.owner.lock:
            self.owner.pending.setdefault(key, pending)

    def _import(self, request, key, attempt, attempts, entry):
        line = self.owner.results.get(key)
        if line is None:
            if entry is None or entry.state != IN_FLIGHT:
                self._collect(request, key, attempt, attempts)  # due in the next round
            return self._pending()
        counts, owner = self.owner.counts, self.owner
        with owner.lock:
            first = key not in owner.consumed
            owner.consumed.add(key)
        if not first:  # another task asked the same request in this pass: its line was handled
            return self._after_import(request, key, attempt, attempts)
        if entry is None:
            with owner.lock:
                counts.refuse("refused_foreign", line, "a custom_id this cache never exported")
            self._collect(request, key, attempt, attempts)
            return self._pending()
        reply, too_large = None, None
        if line.ok:
            data = json.dumps(line.body).encode("utf-8")
            too_large = reply_too_large(len(data), self.config.max_reply_bytes)
            if too_large is None:
                try:
                    reply = parse_completion(data, owner.endpoint)
                except _AttemptFailed:
                    reply = None
        if reply is None:
            error = too_large or line.error or "batch reply without a chat completion"
            used_up = entry.errors + 1 >= self.config.max_attempts
            self.ledger.mark(key, self.config.model, FAILED if used_up else ERRORED, reason=error, add_error=True)
            with owner.lock:
                if too_large:
                    counts.refuse("refused_too_large", line, too_large)
                else:
                    counts.errors += 1
                counts.failed += used_up
            if used_up:
                return self._failed(request, f"{error} ({entry.errors + 1} batch attempts)")
            self._collect(request, key, attempt, attempts)
            return self._pending()
        with owner.lock:
            counts.prompt_tokens += reply.prompt_tokens
            counts.completion_tokens += reply.completion_tokens
        if not same_model(self.config.model, reply.answered_by or UNNAMED_MODEL):
            self.cache.reject(key, self.config.model, reply, f"batch import: answered by {reply.answered_by!r}, not {self.config.model!r}")
            with owner.lock:
                counts.refuse("refused_model", line, f"answered by {reply.answered_by!r}, not {self.config.model!r}")
            self._collect(request, key, attempt, attempts)
            return self._pending()
        self.stats.add(request.tag, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        self._charge(reply)
        try:
            value = _read(request, reply.raw)
        except parsing.ParseError as error:
            reason = f"parse: {error}"
            self.cache.reject(key, self.config.model, reply, reason)
            self.ledger.mark(key, self.config.model, REJECTED, reason=reason)
            self.stats.add(request.tag, reasks=int(attempt + 1 < attempts))
            with owner.lock:
                counts.rejected += 1
            return reason, reply.raw
        self.cache.put(key, self.config.model, reply)
        self.ledger.mark(key, self.config.model, ANSWERED)
        self.stats.add_answer(reply.answered_by or UNNAMED_MODEL)
        with owner.lock:
            counts.cached += 1
        return JudgeResult(True, value, reply.raw, None, False, reply.answered_by)

    def _after_import(self, request, key, attempt, attempts):
        """The same request asked again in this pass, after its line was imported: as the cache
        and the ledger now say."""
        hit, _refusal = self._lookup(key, request)
        if hit is not None:
            return JudgeResult(True, hit[1], hit[0].raw, None, True, hit[0].answered_by)
        entry = self.ledger.entry(key)
        if entry is not None and entry.state == REJECTED:
            return entry.reason, None
        if entry is not None and entry.state == FAILED:
            return self._failed(request, entry.reason or "batch attempts used up")
        self._collect(request, key, attempt, attempts)
        return self._pending()


def refuse_unasked(counts: ImportCounts, results: dict[str, ResultLine], consumed: set[str], ledgers: Sequence[BatchLedger]) -> None:
    """The result lines no request of the pass asked for, refused: stale when this cache exported
    the custom_id (answered since, or another scoring's), else foreign."""
    for key in sorted(results.keys() - consumed, key=lambda k: place_order(results[k].where)):
        if any(ledger.entry(key) is not None for ledger in ledgers):
            counts.refuse("refused_stale", results[key], "stale: already answered, or not asked by this scoring")
        else:
            counts.refuse("refused_foreign", results[key], "a custom_id this cache never exported")


def write_lines(path: Path, lines: Sequence[dict]) -> None:
    """A batch input file, written whole (atomically)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    partial.replace(path)


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


def cached_reply(body: dict, endpoint: str) -> CachedReply:
    return parse_completion(json.dumps(body).encode("utf-8"), endpoint)


def summarize_estimates(estimates: dict[str, TagEstimate]) -> TagEstimate:
    total = TagEstimate()
    for entry in estimates.values():
        for name in total.__dataclass_fields__:
            setattr(total, name, getattr(total, name) + getattr(entry, name))
    return total


Factory = Callable[[str, "JudgeConfig | None"], Judge]
