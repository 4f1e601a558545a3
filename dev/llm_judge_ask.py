"""Ask the judge (`ask.py`) through lmms-eval's judge layer, `lmms_eval.llm_judge`, and its settings:
`API_TYPE` picks the provider (`openai` by default; `azure`, `local` for a vLLM / SGLang server, ...)
with its variables (`OPENAI_API_KEY`, `OPENAI_API_URL`, `AZURE_*`, `LLM_JUDGE_URL`); `MODEL_VERSION`
names the model, else the benchmark's official judge. A request that still fails after the provider's
own retries is a failed judgment: the benchmark counts it (`judge_failed`) and never scores it."""
from __future__ import annotations

import functools
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from lmms_eval.llm_judge import Request as ServerRequest
from lmms_eval.llm_judge import ServerConfig, get_server
from lmms_video_reasoning.utils.core.ask import Ask, ParseError, Request, Result

log = logging.getLogger(__name__)

API_TYPE_ENV = "API_TYPE"
MODEL_ENV = "MODEL_VERSION"
# Concurrent requests of one batch (lmms-eval's ServerConfig default) and the provider's retries.
MAX_CONCURRENT = 10
NUM_RETRIES = 3
RETRY_DELAY_S = 2.0
TIMEOUT_S = 120
# A request sent without a temperature (some official judges set none) gets the APIs' default, 1.0
# (lmms-eval's providers always send one).
UNSET_TEMPERATURE = 1.0


class LlmJudge:
    """One judge model behind one lmms-eval provider, answering `ask.Request`s."""

    def __init__(self, model: str, server: Any) -> None:
        self.model, self.server = model, server

    def ask(self, request: Request) -> Result:
        """The reply, parsed; a reply that does not parse is asked again, a failed call is a failed Result."""
        temperature = UNSET_TEMPERATURE if request.temperature is None else request.temperature
        config = ServerConfig(model_name=self.model, temperature=temperature, max_tokens=request.max_tokens, timeout=TIMEOUT_S,
                              num_retries=NUM_RETRIES, retry_delay=RETRY_DELAY_S, max_concurrent=MAX_CONCURRENT)
        replies = request.max_reasks + 1 if request.parse else 1
        raw, error, model = None, None, None
        for _attempt in range(replies):
            try:
                response = self.server.evaluate(ServerRequest(messages=request.messages, config=config))
            except Exception as failure:  # noqa: BLE001 - the provider raises after its retries: a failed judgment
                return Result(False, None, raw, f"{type(failure).__name__}: {failure}")
            if not getattr(response, "success", True):
                return Result(False, None, raw, f"provider error: {getattr(response, 'error_message', '')}")
            raw, model = response.content, getattr(response, "model_used", None)
            if not isinstance(raw, str) or not raw.strip():
                error = "empty reply"
                continue
            try:
                return Result(True, request.parse(raw) if request.parse else raw, raw, None, answered_by=model)
            except ParseError as unparsed:
                error = f"parse: {unparsed}"
        return Result(False, None, raw, f"{error} (after {replies} replies)", answered_by=model)

    def map(self, fn: Callable[[Any, Ask], Any], items: Sequence[Any], desc: str = "judging") -> list:
        """`[fn(item, self.ask) for item in items]` on `MAX_CONCURRENT` threads, in input order; None
        where `fn` raised (logged; the caller counts it as a failed judgment)."""
        items = list(items)

        def run(index: int) -> Any:
            try:
                return fn(items[index], self.ask)
            except Exception as failure:  # noqa: BLE001 - one item must not lose the batch
                log.error("%s: item %d failed: %s: %s", desc, index, type(failure).__name__, failure)
                return None

        with ThreadPoolExecutor(max(1, min(MAX_CONCURRENT, len(items))), "judge") as pool:
            return list(pool.map(run, range(len(items))))


def configured_judge(default_model: str) -> LlmJudge | None:
    """The judge of lmms-eval's settings (`API_TYPE`, `MODEL_VERSION` or `default_model`), one per
    process and model; None (logged once) when its provider is not available, e.g. no key."""
    api_type = os.getenv(API_TYPE_ENV, "openai").strip().lower() or "openai"
    return _connect(api_type, os.getenv(MODEL_ENV, "").strip() or default_model)


@functools.lru_cache(maxsize=None)
def _connect(api_type: str, model: str) -> LlmJudge | None:
    try:  # a key-based provider without its key raises here, naming the variable
        server = get_server(api_type, ServerConfig(model_name=model, num_retries=NUM_RETRIES, retry_delay=RETRY_DELAY_S, timeout=TIMEOUT_S))
        available = server.is_available()
    except Exception as failure:  # noqa: BLE001 - a provider that cannot start is no judge, named once
        log.warning("no LLM judge: API_TYPE=%s (model %s) cannot start: %s: %s", api_type, model, type(failure).__name__, failure)
        return None
    if not available:
        log.warning("no LLM judge available (API_TYPE=%s, model %s): set the provider's variables; judged metrics are not computed", api_type, model)
        return None
    return LlmJudge(model, server)
