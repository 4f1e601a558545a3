"""A reply as the benchmarks read it: lmms-eval's failure placeholders, and a thinking model's final answer.

When an API model gives up, lmms-eval 0.7.3 returns a placeholder string as the response
(``[LMMS_EVAL_REQUEST_FAILED after N retries] <error>``, ``[LMMS_EVAL_BUDGET_EXCEEDED]``,
``[GENERATION_FAILED] <error>``). Scored as an answer it would become a silent 0 (or a letter parsed
out of the error text), so a record flags it (`model_failed`): wrong, never parsed nor judged, counted.

The tasks set lmms-eval's `reasoning_tags: none`, so hooks receive the reply as generated and split it
here (the record's fields: `records.py`), under the task options `REASONING` and `PREFILLED`.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from lmms_video_reasoning.utils.core import options, settings

# Prefixes lmms-eval writes in place of a response (checked against lmms-eval 0.7.3).
FAILURE_PREFIXES = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]", "[GENERATION_FAILED]")
_FAILURE = re.compile(r"\s*(" + "|".join(re.escape(prefix) for prefix in FAILURE_PREFIXES) + ")")


def is_model_failure(response: object) -> bool:
    """True when `response` is lmms-eval's placeholder for a request that got no answer."""
    return isinstance(response, str) and _FAILURE.match(response) is not None


def failure_reason(response: object) -> str | None:
    """The placeholder's first line (what went wrong), or None for a real response."""
    if not is_model_failure(response):
        return None
    return str(response).strip().splitlines()[0][:300]


def model_failed(record: dict) -> bool:
    """Whether a record holds the placeholder instead of a model answer (its `model_failed`
    flag, or its response for records logged before the flag existed)."""
    return bool(record.get("model_failed")) or is_model_failure(record.get("response"))


# ---------------------------------------------------------------- reasoning and final answer

# lmms-eval 0.7.3's default `--reasoning_tags`: the blocks it would strip (case-sensitive).
REASONING_TAGS = (("<think>", "</think>"), ("<analysis>", "</analysis>"))
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)

FULL, STRIPPED = "full", "stripped"
REASONING = options.Option("judged_reply", "choice", FULL, "what the judges rating reasoning see: the full reply or "
                           "the reply with its reasoning blocks stripped", choices=(FULL, STRIPPED))
# Prefilled: e.g. Qwen3-VL Thinking's template; off, a reply without tags is a plain answer.
PREFILLED = options.Option("think_prefilled", "bool", False, "the chat template opens <think> in the prompt, so every "
                           "reply starts inside it")
# The suite's variables overriding them (`settings.variable`; not exported with the options).
REASONING_ENV, PREFILLED_ENV = "LMMS_VR_REASONING", "LMMS_VR_THINK_PREFILLED"
REASONING_VARIABLE, PREFILLED_VARIABLE = settings.variable(REASONING_ENV, REASONING), settings.variable(PREFILLED_ENV, PREFILLED)


def split_reply(text: str, prefilled: bool = False) -> tuple[str, bool]:
    """(final answer, truncated): the part after the last closing reasoning tag (or inside the last
    `<answer>...</answer>` there), stripped; truncated when a reasoning block is still open at the end.
    A reply cut off before `</think>` whose template prefilled `<think>` carries no tag at all: it reads
    as a plain answer unless `prefilled` says every reply opens inside a reasoning block."""
    text = text or ""
    tail_start = 0
    for _opening, closing in REASONING_TAGS:
        position = text.rfind(closing)
        if position != -1:
            tail_start = max(tail_start, position + len(closing))
    tail = text[tail_start:]
    if any(opening in tail for opening, _closing in REASONING_TAGS) or (prefilled and tail_start == 0 and text.strip()):
        return "", True
    answers = _ANSWER_BLOCK.findall(tail)
    return (answers[-1] if answers else tail).strip(), False


def strip_reasoning(text: str) -> str:
    """The reply as lmms-eval's default `--reasoning_tags` hands it to `process_results`: its own
    `strip_reasoning_tags` (each closed block removed, a lone closing tag keeps only what follows it)."""
    from lmms_eval.api.reasoning import strip_reasoning_tags

    return strip_reasoning_tags(text or "", [list(pair) for pair in REASONING_TAGS])


def reply_record(response: object, task_settings: Mapping[str, Any] | None = None) -> dict:
    """The record fields about the reply every benchmark's record has (`utils.core.records`), made under
    the task's settings (`judged_reply`, `think_prefilled`; none given: their defaults). `final_answer`
    is the whole reply when the final part is empty (the answer was written inside the reasoning)."""
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    reason = failure_reason(text)
    final, truncated = split_reply(text, bool(PREFILLED.value(task_settings)))
    return {"response": text, "final_answer": "" if truncated else final or text.strip(), "reasoning_truncated": truncated and reason is None,
            "judged_reply": REASONING.value(task_settings) or FULL, "model_failed": reason is not None, "model_failure": reason}


def judged_text(record: dict) -> str:
    """The text the judges that rate reasoning are shown for a record: its raw `response`, or
    that with the reasoning blocks stripped when the record was made under `stripped`."""
    response = record.get("response") or ""
    return strip_reasoning(response) if record.get("judged_reply") == STRIPPED else response


def final_answer(record: dict) -> str:
    """The text rule-based parsing reads for a record (`reply_record`'s, for records logged before the field existed)."""
    return (record if "final_answer" in record else reply_record(record.get("response")))["final_answer"] or ""


def reasoning_truncated(record: dict) -> bool:
    """Whether the record's reply ended inside an open reasoning block (never for a failure placeholder;
    `reply_record`'s for records logged before the field)."""
    return bool((record if "reasoning_truncated" in record else reply_record(record.get("response")))["reasoning_truncated"])


def warn_truncated(logger, benchmark: str, count: int, total: int) -> None:
    """One warning line when replies ended inside their reasoning (they are counted, not hidden)."""
    if count:
        logger.warning("%s: %d of %d replies end inside an open reasoning block (the generation stopped mid-thought: raise "
                       "max_new_tokens); no answer is read from them, they count as wrong (reasoning_truncated=%d)",
                       benchmark, count, total, count)
