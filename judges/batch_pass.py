"""Judging without sending: the passes of the cost estimate and of batch judging.

`lmms-vr score` hands each benchmark's unchanged scoring a `PassJudge` (`JudgePass.judge_for`). It
serves cached replies as the synchronous judge does; a request with no servable reply is
- ``estimate``: counted (input tokens with the judge model's tokenizer, `tokens.py`; output tokens
  of the protocol's `expected_reply`) and, when walking, answered with that expected reply so the
  chain goes on to its later steps (nothing is cached);
- ``collect``: recorded as a batch request line (its cache key as `custom_id`), answered ``PENDING``;
- ``import``: answered from a batch results file with the synchronous rules: a reply that parses
  is cached, one that does not is kept in `rejected` and the re-ask becomes the next pending request.
``PENDING`` is a failed judgment for that pass (dependent steps are not asked); nothing of it is
cached. What was exported, answered or failed is `batch_ledger`'s; the lines are `batch_files`'.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.accounting import UNNAMED_MODEL
from lmms_video_reasoning.judges.batch_files import ResultLine, ResultRead, place_order, request_line
from lmms_video_reasoning.judges.batch_ledger import ANSWERED, ERRORED, FAILED, IN_FLIGHT, REJECTED, BatchLedger
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError, cache_path_from_env, default_model
from lmms_video_reasoning.judges.engine import Judge, reply_value, request_keys, same_model, validate_request
from lmms_video_reasoning.judges.transport import AttemptFailed, parse_completion, reply_too_large
from lmms_video_reasoning.utils.core.ask import Request, Result

PENDING = "pending: judged later through a batch (no verdict yet)"
ESTIMATED = "(estimate)"  # the answering model of an assumed reply


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


@dataclass
class ImportCounts:
    """What an import did with every line of its results (`accounted()` of them add up to the lines read)."""

    cached: int = 0  # parsed, stored as servable replies
    rejected: int = 0  # did not parse: kept apart, the re-ask is due
    errors: int = 0  # error lines / non-200 responses / unreadable bodies: the request is due again
    failed: int = 0  # of those (and of the too large), requests whose batch attempts are used up (judged failed)
    refused_model: int = 0  # answered by another model than the judge's
    refused_foreign: int = 0  # custom_id not exported from this cache
    refused_stale: int = 0  # custom_id no longer asked for (already answered, or not part of this scoring)
    refused_too_large: int = 0  # a reply over the judge's max_reply_bytes (LMMS_VR_JUDGE_MAX_REPLY_BYTES), as synchronous replies
    refused: list[str] = field(default_factory=list)  # every refused line: "file:line: custom_id: why"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    read: ResultRead = field(default_factory=ResultRead)  # the lines as read: blank, duplicates, conflicts... (`take`)

    def take(self, read: ResultRead) -> None:
        self.read.absorb(read)

    def refuse(self, kind: str, line: "ResultLine", why: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.refused.append(f"{line.where}: {line.custom_id[:16]}: {why}")

    def accepted(self) -> int:
        return self.cached + self.rejected + self.errors

    def accounted(self) -> int:
        read = self.read
        return (self.accepted() + self.refused_model + self.refused_foreign + self.refused_stale + self.refused_too_large
                + read.blank + len(read.duplicates) + read.conflict_lines + len(read.undecodable) + len(read.unreadable))

    def as_dict(self) -> dict:
        read = self.read
        out = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "read"}
        out.update(lines=read.lines, blank=read.blank, duplicates=read.duplicates, conflict_lines=read.conflict_lines,
                   conflicts=[f"{key[:16]}: {', '.join(wheres)}" for key, wheres in read.conflicts.items()],
                   undecodable=read.undecodable, unreadable=read.unreadable)
        out["refused"] = sorted(self.refused, key=lambda line: place_order(line.split(": ", 1)[0]))
        out["accepted"], out["unaccounted"] = self.accepted(), read.lines - self.accounted()
        return out


class _Ctx(threading.local):
    assumed = False  # this item's chain went on from an assumed reply
    last: tuple[str, int] | None = None  # (tag, later_steps) of the item's last request


class JudgePass:
    """One pass of the benchmarks' judging with `PassJudge`s: estimates by task and tag, pending
    requests, import counts."""

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

    def judge_for(self, benchmark: str, config: JudgeConfig | None) -> "PassJudge":
        """The pass's one judge of ``benchmark``, from its configured judge's ``config`` (None: see `pass_config`)."""
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
        from lmms_video_reasoning.judges.config import MAX_REPLY_BYTES, price_overrides, read_setting

        config = JudgeConfig(model=default_model(benchmark), benchmark=benchmark, cache_path=cache_path_from_env(),
                             model_env="(batch)", prices=price_overrides(), max_reply_bytes=read_setting(MAX_REPLY_BYTES))
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
            entry = self.ledger.entry(key) if self.ledger is not None else None
            if entry is not None and entry.state == REJECTED:
                last_reason = entry.reason
                continue  # this attempt's reply did not parse: the next attempt is the re-ask
            if entry is not None and entry.state == FAILED:
                return self._failed(request, entry.reason or "batch attempts used up")
            outcome = self._uncached(request, key, attempt, len(keys), entry)
            if isinstance(outcome, Result):
                return outcome
            last_reason, last_raw = outcome  # rejected just now: on to the re-ask
        return self._failed(request, f"{last_reason or 'parse: no reply parsed'} (after {len(keys)} replies)", last_raw)

    def _failed(self, request: Request, error: str, raw: str | None = None) -> Result:
        self.stats.add_failure(request.tag, error)
        return Result(False, None, raw, error, False)

    def _pending(self) -> Result:
        return Result(False, None, None, PENDING, False)

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
            if not (self.owner.walk and known):
                entry.later_steps += request.later_steps
        if self.owner.walk and known and request.later_steps:
            try:
                value = reply_value(request, request.expected_reply)
            except parsing.ParseError:
                return self._pending()
            self._ctx.assumed = True
            return Result(True, value, request.expected_reply, None, False, ESTIMATED)
        return self._pending()

    def _collect(self, request: Request, key: str, attempt: int, attempts: int) -> None:
        rounds = (attempts - attempt) + request.later_steps * attempts
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
                except AttemptFailed:
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

    def _after_import(self, request, key, attempt, attempts):
        """The same request asked again in this pass after its line was imported: as the cache and ledger say."""
        hit, _refusal = self._lookup(key, request)
        if hit is not None:
            return hit
        entry = self.ledger.entry(key)
        if entry is not None and entry.state == REJECTED:
            return entry.reason, None
        if entry is not None and entry.state == FAILED:
            return self._failed(request, entry.reason or "batch attempts used up")
        self._collect(request, key, attempt, attempts)
        return self._pending()


def refuse_unasked(counts: ImportCounts, results: dict[str, ResultLine], consumed: set[str], ledgers: Sequence[BatchLedger]) -> None:
    """Refuse the result lines no request of the pass asked for: stale if this cache exported them, else foreign."""
    for key in sorted(results.keys() - consumed, key=lambda k: place_order(results[k].where)):
        if any(ledger.entry(key) is not None for ledger in ledgers):
            counts.refuse("refused_stale", results[key], "stale: already answered, or not asked by this scoring")
        else:
            counts.refuse("refused_foreign", results[key], "a custom_id this cache never exported")


def summarize_estimates(estimates: dict[str, TagEstimate]) -> TagEstimate:
    total = TagEstimate()
    for entry in estimates.values():
        for name in total.__dataclass_fields__:
            setattr(total, name, getattr(total, name) + getattr(entry, name))
    return total
