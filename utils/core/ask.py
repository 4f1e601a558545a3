"""Ask the judge: the one interface through which benchmark code talks to an LLM judge.

Benchmark code never knows who answers (lmms-eval's judge layer through `llm_judge_ask.py`, or a
cached judge engine): any client with `ask` and `map` will do. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence


class ParseError(ValueError):
    """A judge reply that does not have the required form (the judge is asked again)."""


@dataclass(frozen=True)
class Request:
    """One chat completion to judge with; `messages` are OpenAI chat messages."""

    messages: list[dict]
    max_tokens: int = 2048
    temperature: float | None = 0.0  # None: not sent (some official evaluations leave it unset)
    parse: Callable[[str], Any] | None = None  # raises ParseError -> asked again
    max_reasks: int = 2
    tag: str = ""  # e.g. "<benchmark>.recall", for the accounting
    # Protocol facts a judge may use to estimate cost or batch requests; they never change a verdict:
    expected_reply: str | None = None  # a typical reply in the protocol's format
    later_steps: int = 0  # judge calls that may follow this one in its chain, depending on its reply


@dataclass(frozen=True)
class Result:
    """A judge's answer: `value` is `parse(raw)` (the raw text without a parser); None unless `ok`."""

    ok: bool
    value: Any
    raw: str | None
    error: str | None
    cached: bool = False
    answered_by: str | None = None


Ask = Callable[[Request], Result]


class Judge(Protocol):
    """What benchmark code needs from a judge."""

    def ask(self, request: Request) -> Result: ...

    def map(self, fn: Callable[[Any, Ask], Any], items: Sequence, desc: str = "judging") -> list:
        """`[fn(item, self.ask) for item in items]`, concurrently; None where `fn` raised (a failed judgment)."""
        ...
