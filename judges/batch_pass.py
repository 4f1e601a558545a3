"""Judging without sending: the passes of the cost estimate and of batch judging, and the batch lines.

Each benchmark's unchanged scoring gets a `PassJudge`, which serves cached replies as usual; a
request with no servable reply is
- ``estimate``: counted (`tokens.py`) and answered with the protocol's `expected_reply`, so the
  chain goes on to its later steps (nothing is cached);
- ``collect``: recorded as a batch request line (its cache key as `custom_id`), answered ``PENDING``;
- ``import``: answered from batch result lines with the synchronous rules (a reply that does not
  parse is kept in `rejected`; its re-ask is the next pending request).
``PENDING`` fails the judgment for that pass. Every result line is counted (`ResultRead`).
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.accounting import UNNAMED_MODEL
from lmms_video_reasoning.judges.batch_ledger import ANSWERED, ERRORED, FAILED, IN_FLIGHT, REJECTED, BatchLedger
from lmms_video_reasoning.judges.cache import CachedReply
from lmms_video_reasoning.judges.config import (MAX_REPLY_BYTES, JudgeConfig, JudgeConfigError, cache_path_from_env, default_model,
                                                price_overrides, read_setting)
from lmms_video_reasoning.judges.engine import Judge, reply_value, request_keys, same_model, validate_request
from lmms_video_reasoning.judges.transport import AttemptFailed, parse_completion, reply_too_large, request_body
from lmms_video_reasoning.utils.core.ask import Request, Result
from lmms_video_reasoning.utils.core.files import atomic_target

PENDING = "pending: judged later through a batch (no verdict yet)"
PENDING_RESULT = Result(False, None, None, PENDING, False)
ESTIMATED = "(estimate)"  # the answering model of an assumed reply
CHAT_URL = "/v1/chat/completions"


def write_lines(path: Path, lines: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as partial, partial.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


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

    def completion(self, endpoint: str = "") -> CachedReply | None:
        """Its chat completion, None for an error line or a body that is not one."""
        try:
            return parse_completion(json.dumps(self.body).encode("utf-8"), endpoint) if self.ok else None
        except AttemptFailed:
            return None

    def reply(self) -> tuple[str, str] | None:
        """What would be cached of it (the reply text and the answering model), None for an error line."""
        reply = self.completion()
        if reply is None:
            return ("(malformed)", json.dumps(self.body, sort_keys=True)) if self.ok else None
        return (reply.raw, reply.answered_by)


@dataclass
class ResultRead:
    """Batch result lines as read (one per custom_id: duplicates imported once, conflicts not at all),
    then what an import did with each (`unaccounted()`: 0)."""

    results: dict[str, ResultLine] = field(default_factory=dict)
    lines: int = 0
    blank: int = 0
    undecodable: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # custom_id -> the file:line of each of its lines
    cached: int = 0  # parsed, stored as servable replies
    rejected: int = 0  # did not parse: kept apart, the re-ask is due
    errors: int = 0  # error lines / non-200 responses / unreadable bodies: the request is due again
    failed: int = 0  # of those (and of the too large), requests whose batch attempts are used up (judged failed)
    # refused lines by kind: "model" (answered by another model than the judge's), "foreign" (a custom_id not exported
    # from this cache), "stale" (no longer asked for), "too_large" (over the judge's max_reply_bytes, as synchronous replies)
    refusals: Counter = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)  # every refused line: "file:line: custom_id: why"

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

    def refuse(self, kind: str, line: ResultLine, why: str) -> None:
        self.refusals[kind] += 1
        self.refused.append(f"{line.where}: {line.custom_id[:16]}: {why}")

    def accepted(self) -> int:
        return self.cached + self.rejected + self.errors

    def unaccounted(self) -> int:
        return self.lines - (self.accepted() + sum(self.refusals.values()) + self.blank + len(self.duplicates)
                             + self.conflict_lines + len(self.undecodable) + len(self.unreadable))


def read_result_lines(lines: Iterable[bytes], where: str, into: ResultRead | None = None) -> ResultRead:
    read = into if into is not None else ResultRead()
    for number, data in enumerate(lines, 1):
        read.lines += 1
        place = f"{where}:{number}"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            read.undecodable.append(f"{place}: not UTF-8 (byte 0x{data[error.start]:02x} at column {error.start + 1})")
            continue
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


@dataclass
class TagEstimate:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    after_assumed: int = 0  # requests reached only by assuming an earlier step's expected reply
    later_steps: int = 0  # possible dependent requests not counted (no expected reply to assume)
    output_unknown: int = 0  # requests without an expected reply: max_tokens counted
    not_built: int = 0  # later requests of this step not counted: the item's code failed building them (`Unbuilt`)


@dataclass
class Unbuilt:
    """A judging item whose code failed in an estimate pass: its requests from there on are not counted."""

    task: str
    after: str | None  # the tag of its last request (None: it failed before its first one)
    later_steps: int  # the requests that last request declares after it (0: unknown, at least one)
    reason: str


@dataclass
class Pending:
    """A request to send now: its batch line and the rounds it can still take."""

    key: str
    benchmark: str
    tag: str
    line: dict
    rounds_left: int


class _Ctx(threading.local):
    assumed = False  # this item's chain went on from an assumed reply
    last: tuple[str, int] | None = None  # (tag, later_steps) of the item's last request


class JudgePass:
    """One pass ("estimate", "collect" or "import" of `read`) of the benchmarks' judging."""

    def __init__(self, mode: str, read: ResultRead | None = None, endpoint: str = "(batch file)") -> None:
        self.mode, self.endpoint = mode, endpoint
        self.counts = read or ResultRead()
        self.consumed: set[str] = set()
        self.task = ""  # set by the caller before each task's judging
        self.estimates: dict[str, dict[str, TagEstimate]] = defaultdict(lambda: defaultdict(TagEstimate))
        self.pending: dict[str, Pending] = {}
        self.judges: dict[str, PassJudge] = {}
        self.served: dict[str, int] = defaultdict(int)  # task -> cache hits
        self.unbuilt: list[Unbuilt] = []  # estimate: items whose code failed, their later requests not counted
        self.lock = threading.Lock()

    def judge_for(self, benchmark: str, config: JudgeConfig | None) -> "PassJudge":
        """The pass's one judge of ``benchmark``: with its configured judge's ``config``, or (None: no key here,
        e.g. a GPU node) with the model the environment names and the cache of LMMS_VR_JUDGE_CACHE."""
        if benchmark not in self.judges:
            if config is None:
                config = JudgeConfig(model=default_model(benchmark), benchmark=benchmark, cache_path=cache_path_from_env(),
                                     model_env="(batch)", prices=price_overrides(), max_reply_bytes=read_setting(MAX_REPLY_BYTES))
            if self.mode != "estimate" and config.cache_path is None:
                raise JudgeConfigError("batch judging keeps its replies in the judge cache, which is off (LMMS_VR_JUDGE_CACHE=off): "
                                       "set LMMS_VR_JUDGE_CACHE to a file")
            self.judges[benchmark] = PassJudge(self, config)
        return self.judges[benchmark]

    def refuse_unasked(self) -> None:
        """Refuse the result lines no request of the pass asked for: stale if this cache exported them, else foreign."""
        ledgers = [judge.ledger for judge in self.judges.values() if judge.ledger is not None]
        for key in self.counts.results.keys() - self.consumed:  # listed in file order by `print_counts`
            line = self.counts.results[key]
            if any(ledger.entry(key) is not None for ledger in ledgers):
                self.counts.refuse("stale", line, "stale: already answered, or not asked by this scoring")
            else:
                self.counts.refuse("foreign", line, "a custom_id this cache never exported")


class PassJudge(Judge):
    """A judge that never sends (see the module doc)."""

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

    def ask(self, request: Request) -> Result:
        validate_request(request)
        self._ctx.last = (request.tag or "(untagged)", request.later_steps)
        keys = request_keys(self.config.model, request)
        for key in keys:
            hit, _refusal = self._lookup(key, request)
            if hit is not None:
                with self.owner.lock:
                    self.owner.served[self.owner.task] += 1
                return hit
        last_reason, last_raw = None, None
        for attempt, key in enumerate(keys):
            outcome = self._attempt(request, key, attempt, len(keys))
            if isinstance(outcome, Result):
                return outcome
            last_reason, last_raw = outcome[0], outcome[1] or last_raw  # its reply did not parse: on to the re-ask
        return self._failed(request, f"{last_reason or 'parse: no reply parsed'} (after {len(keys)} replies)", last_raw)

    def _failed(self, request: Request, error: str, raw: str | None = None) -> Result:
        self.stats.add_failure(request.tag, error)
        return Result(False, None, raw, error, False)

    def _due(self, request: Request, key: str, attempt: int, attempts: int) -> Result:
        rounds = (attempts - attempt) + request.later_steps * attempts
        line = {"custom_id": key, "method": "POST", "url": CHAT_URL, "body": request_body(self.config.model, request)}
        pending = Pending(key, self.config.benchmark, request.tag, line, rounds)
        with self.owner.lock:
            self.owner.pending.setdefault(key, pending)
        return PENDING_RESULT

    def _attempt(self, request: Request, key: str, attempt: int, attempts: int, claim: bool = True):
        """A Result, or (why, raw reply) when this attempt's reply did not parse (the re-ask is next)."""
        entry = self.ledger.entry(key) if self.ledger is not None else None
        if entry is not None and entry.state == REJECTED:
            return entry.reason, None
        if entry is not None and entry.state == FAILED:
            return self._failed(request, entry.reason or "batch attempts used up")
        if self.owner.mode == "estimate":
            return self._estimate(request)
        line = self.owner.counts.results.get(key) if claim else None
        if line is not None:
            with self.owner.lock:
                first = key not in self.owner.consumed
                self.owner.consumed.add(key)
            if first:
                return self._import(request, key, attempt, attempts, entry, line)
            # another request of this pass imported the line: as the cache and the ledger now say
            hit, _refusal = self._lookup(key, request)
            return hit or self._attempt(request, key, attempt, attempts, claim=False)
        if entry is not None and entry.state == IN_FLIGHT:
            return PENDING_RESULT
        return self._due(request, key, attempt, attempts)  # collect: this round; import: the next

    def _estimate(self, request: Request) -> Result:
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
            entry.later_steps += 0 if known else request.later_steps
        if known and request.later_steps:
            try:
                value = reply_value(request, request.expected_reply)
            except parsing.ParseError:
                return PENDING_RESULT
            self._ctx.assumed = True
            return Result(True, value, request.expected_reply, None, False, ESTIMATED)
        return PENDING_RESULT

    def _import(self, request, key, attempt, attempts, entry, line: ResultLine):
        counts, owner = self.owner.counts, self.owner
        if entry is None:
            with owner.lock:
                counts.refuse("foreign", line, "a custom_id this cache never exported")
            return self._due(request, key, attempt, attempts)
        too_large = reply_too_large(len(json.dumps(line.body).encode("utf-8")), self.config.max_reply_bytes) if line.ok else None
        reply = line.completion(owner.endpoint) if too_large is None else None
        if reply is None:
            error = too_large or line.error or "batch reply without a chat completion"
            used_up = entry.errors + 1 >= self.config.max_attempts
            self.ledger.mark(key, self.config.model, FAILED if used_up else ERRORED, reason=error, add_error=True)
            with owner.lock:
                if too_large:
                    counts.refuse("too_large", line, too_large)
                else:
                    counts.errors += 1
                counts.failed += used_up
            if used_up:
                return self._failed(request, f"{error} ({entry.errors + 1} batch attempts)")
            return self._due(request, key, attempt, attempts)
        if not same_model(self.config.model, reply.answered_by or UNNAMED_MODEL):
            self.cache.reject(key, self.config.model, reply, f"batch import: answered by {reply.answered_by!r}, not {self.config.model!r}")
            with owner.lock:
                counts.refuse("model", line, f"answered by {reply.answered_by!r}, not {self.config.model!r}")
            return self._due(request, key, attempt, attempts)
        self._charge(request.tag, reply)
        try:
            value = reply_value(request, reply.raw)
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
        return Result(True, value, reply.raw, None, False, reply.answered_by)
