"""The plugin's binding of "ask the judge" (`utils.core.ask`) to the engine: a thin adapter.

Benchmark code builds `ask.Request`s and reads `ask.Result`s; the engine (`engine.Judge`,
`engine.CacheOnlyJudge`) keeps its own request type, whose cache key is made of the same
fields, so a request asked through the adapter hits the same cache entry as before.
Everything else (accounting, `log_summary`, `stats`, ...) is the engine's, reached through
the adapter unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from lmms_video_reasoning.judges.engine import Judge, JudgeRequest
from lmms_video_reasoning.utils.core.ask import Ask, Request, Result


class EngineJudge:
    """An engine judge seen through the benchmark-side interface."""

    def __init__(self, engine: Judge) -> None:
        self.engine = engine

    def ask(self, request: Request) -> Result:
        answer = self.engine.ask(JudgeRequest(messages=request.messages, max_tokens=request.max_tokens, temperature=request.temperature,
                                              parse=request.parse, max_reasks=request.max_reasks, tag=request.tag,
                                              expected_reply=request.expected_reply, later_steps=request.later_steps))
        return Result(answer.ok, answer.value, answer.raw, answer.error, answer.cached, answer.answered_by)

    def map(self, fn: Callable[[Any, Ask], Any], items: Sequence[Any], desc: str = "judging") -> list:
        return self.engine.map(lambda item, _engine_ask: fn(item, self.ask), items, desc=desc)

    def __getattr__(self, name: str) -> Any:  # the engine's accounting, summary, stats, config
        return getattr(self.engine, name)


def bind(judge: Judge | EngineJudge | None) -> EngineJudge | None:
    """`judge` as an `ask` judge (None stays None: no judge configured)."""
    if judge is None or isinstance(judge, EngineJudge):
        return judge
    return EngineJudge(judge)
