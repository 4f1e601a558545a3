"""Recognise the placeholder texts lmms-eval returns instead of a model answer.

When an API model gives up, lmms-eval 0.7.3 does not raise: it returns a string as the
"response" (`models/chat/openai.py`, `models/simple/openai.py`, `models/simple/gemini.py`:
``[LMMS_EVAL_REQUEST_FAILED after N retries] <error>``; the usage budget:
``[LMMS_EVAL_BUDGET_EXCEEDED]``; generation backends: ``[GENERATION_FAILED] <error>``).
Scored as an answer, such a string would reach the judge and become a silent 0 (or,
worse, a letter parsed out of the error text). Benchmarks call `is_model_failure` in
`process_results`, keep the sample as a failure (wrong for accuracy, as an unanswered
question is in the papers' protocols) and report how many there were.
"""

from __future__ import annotations

import re

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
