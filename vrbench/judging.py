"""VRBench OE-P judge: the official judge requests, byte-exact, and the ratings of a batch of records.

Official pipeline: OpenGVLab/VRBench, commit 47a22db, `evaluation/batch_evaluation_api_mp_time_async.py
::async_process_sample` (separate mode). The judge sees the response as generated, thinking included (task
option `judged_reply: stripped` removes it); the default protocol puts the fields in their intended places,
sends temperature 0 and parses the tags strictly (a missing tag re-asks, then is a judge failure)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial

from lmms_video_reasoning.utils.core.ask import Judge, Request
from lmms_video_reasoning.utils.lmms import responses
from lmms_video_reasoning.vrbench import prompts, scoring

log = logging.getLogger(__name__)

JUDGE_MODEL = "deepseek-chat"  # the official judge, DeepSeek-V3
JUDGE_BASE_URL = "https://api.deepseek.com/v1"


def expected_reply(kind: str) -> str:
    """A reply in the official output format, four rated tags and a rationale of typical length (about 60 tokens): the cost estimate's assumption."""
    tags = "\n".join(f"<{tag}>7</{tag}>" for tag in scoring.TAGS[kind])
    return (f"{tags}\n<rationale>\n    - Alignment: the response follows most reference steps and reaches the correct answer.\n    - Deficiencies: one "
            "intermediate step is missing and a time reference is imprecise; the explanation is otherwise clear and consistent.\n</rationale>")


def judge_request(record: dict, protocol: str, kind: str) -> Request:
    """The judge request for one record rated with the `kind` prompt (`scoring.judge_prompt_kind`)."""
    response, procedure, answer = responses.judged_text(record), record["procedure"], record["original_answer"]
    official = protocol == "official"
    if official:
        response = scoring.official_response(response)
        # `evaluate_*_answer_response(..., procedure, answer)` takes `(..., answer, procedure)`: the answer fills {procedure}
        procedure, answer = answer, procedure
    fields = {"question": record["question"], "response": response, "procedure": procedure, "answer": answer}
    system, human = (prompts.UNIQUE_SYSTEM, prompts.UNIQUE_HUMAN) if kind == scoring.UNIQUE else (prompts.NON_UNIQUE_SYSTEM, prompts.NON_UNIQUE_HUMAN)
    # the summary (empty for the unique-answer types) fills the non-unique-answer template only
    messages = prompts.judge_prompt(system, human, video_summary=record["summary"], **fields)
    # official: no temperature sent, and the reply parsed after the call with the official rules (missing tags score 0, no re-ask)
    return Request(messages, temperature=None if official else 0.0, parse=None if official else partial(scoring.parse_tags, kind=kind),
                   tag=f"vrbench.{kind}", expected_reply=expected_reply(kind))


def _rate_one(record: dict, ask, protocol: str) -> tuple[float | None, bool]:
    """(process score or None, judge failed) for one rated record."""
    kind = scoring.judge_prompt_kind(record["reasoning_type"], protocol)
    result = ask(judge_request(record, protocol, kind))
    if protocol == "official":  # a missing tag counts as a failure, but scores as in the official code: 0
        values = scoring.official_tag_values(result.raw if result.ok else "", kind)
        return scoring.process_score(values), not result.ok or None in values
    if not result.ok:
        log.debug("VRBench judge failed for %s: %s", record.get("sample_id"), result.error)
        return None, True
    return scoring.process_score(result.value), False


def rate(records: Sequence[dict], protocol: str, judge: Judge) -> list[tuple[float | None, bool]]:
    """`(process score or None, judge failed)` per record; `(None, False)` for an unrated type or a failed model."""
    rated = [i for i, record in enumerate(records)
             if scoring.judge_prompt_kind(record["reasoning_type"], protocol) and not responses.model_failed(record)]
    outcomes: list[tuple[float | None, bool]] = [(None, False)] * len(records)
    results = judge.map(partial(_rate_one, protocol=protocol), [records[i] for i in rated], desc="VRBench OE-P judge")
    for index, result in zip(rated, results):
        # None: the item raised inside map (logged there): a failure, never a silent score.
        outcomes[index] = result if result is not None else ((0.0 if protocol == "official" else None), True)
    return outcomes
