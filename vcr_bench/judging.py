"""The four VCR-Bench judge calls (README.md, "How scoring runs"), a whole task in one concurrent batch:
answer extraction then scoring (or the IoU rule), recall and precision beside. A failed call is recorded in
the sample's `errors`, never scored; judges see the whole reply, thinking included, as officially."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core.ask import Ask, Judge, Request
from lmms_video_reasoning.utils.lmms import responses
from lmms_video_reasoning.vcr_bench import prompts, scoring

log = logging.getLogger(__name__)

JUDGE_MODEL = "gpt-4o-2024-08-06"  # the official judge (eval_code: GPT-4o through the OpenAI client)
# A typical precision `reasons_for_judgment` (about 30 tokens), for the cost estimate.
_TYPICAL_REASON = "The ground truth states the same event at the same time in the video, so the step is supported by the ground truth information."


def judge_request(prompt: str, parse: Callable, tag: str, expected_reply: str | None = None, later_steps: int = 0) -> Request:
    """One official judge call; `expected_reply` / `later_steps`: what the cost estimate assumes."""
    return Request(messages=[{"role": "user", "content": prompt}], max_tokens=2048, temperature=0.0, parse=parse, max_reasks=2,
                   tag=tag, expected_reply=expected_reply, later_steps=later_steps)


def expected_steps_reply(steps: Sequence[str], precision: bool) -> str:
    """A recall / precision reply in the official format, one object per step (the estimate's assumption)."""
    reason = {"reasons_for_judgment": _TYPICAL_REASON} if precision else {}
    return json.dumps([{"step": step, "step_type": scoring.PERCEPTION, **reason, "judgment": "Matched"} for step in steps], indent=2, ensure_ascii=False)


def judge_answer(record: dict, ask: Ask, settings: dict) -> dict:
    """Extraction, then the IoU rule or the scoring judge (both readings of its verdict): the outcome or {"error"}."""
    response = responses.judged_text(record)
    if not response.strip() or responses.reasoning_truncated(record):
        return {"extracted": "", "correct": False, "iou": None}  # nothing (or no answer yet) to extract: wrong
    # The estimate assumes an extraction as long as the reference answer.
    extraction = ask(judge_request(prompts.extraction_prompt(record["question"], response), scoring.parse_extraction, "vcr.extract",
                                   expected_reply=str(record["answer"]), later_steps=1))
    if not extraction.ok:
        return {"error": f"answer extraction: {extraction.error}"}
    extracted = extraction.value
    by_iou = scoring.grounding_verdict(record["answer"], extracted, bool(settings.get("official_reversed")))
    if by_iou is not None:
        return {"extracted": extracted, "correct": by_iou[0], "iou": by_iou[1]}
    lenient = bool(settings.get("lenient_verdict"))
    verdict = ask(judge_request(prompts.scoring_prompt(record["question"], extracted, record["answer"]),
                                lambda raw: scoring.parse_verdict(raw, lenient), "vcr.score", expected_reply="1"))
    if not verdict.ok:
        return {"extracted": extracted, "error": f"answer scoring: {verdict.error}"}
    reading = verdict.value
    return {"extracted": extracted, "correct": reading.correct(lenient), "iou": None, "verdict_exact": reading.exact, "verdict_lenient": reading.lenient}


def judge_steps(record: dict, ask: Ask, kind: str) -> dict:
    """Recall (reference steps) or precision (response steps, 35 at most): {"<kind>_steps": [{"type", "judgment"}]} or {"error"}."""
    response = responses.judged_text(record)
    if kind == "recall":
        prompt = prompts.recall_prompt(record["question"], record["answer"], response, record["reasoning"])
        request = judge_request(prompt, scoring.parse_recall, "vcr.recall", expected_reply=expected_steps_reply(record["reasoning"], precision=False))
    else:
        lines = [line.strip() for line in response.splitlines() if line.strip()][:35]
        prompt = prompts.precision_prompt(record["question"], response, record["reasoning"])
        request = judge_request(prompt, scoring.parse_precision, "vcr.precision", expected_reply=expected_steps_reply(lines, precision=True))
    result = ask(request)
    return {f"{kind}_steps": result.value} if result.ok else {"error": f"{kind}: {result.error}"}


def plan_jobs(records: Sequence[dict]) -> list[tuple[int, str]]:
    """(record index, job kind) of every judge job; a failed record or model is counted, not judged."""
    jobs = []
    for index, record in enumerate(records):
        if record.get("error") or responses.model_failed(record):
            continue
        jobs.append((index, "answer"))
        if record.get("score_cot", True):  # precision only for a response beyond a bare option letter (`scoring.is_bare_answer`)
            response = responses.judged_text(record)
            jobs += [(index, "recall")] + ([(index, "precision")] if response.strip() and not scoring.is_bare_answer(response) else [])
    return jobs


def combine(records: Sequence[dict], jobs: Sequence[tuple[int, str]], results: Sequence[dict | None]) -> list[dict]:
    """Per-sample outcomes from the job results (None from judge.map: the job itself failed)."""
    outcomes = [{"extracted": None, "correct": None, "iou": None, "recall_steps": None, "precision_steps": None,
                 "errors": [f"processing: {record['error']}"] if record.get("error") else []} for record in records]
    for (index, kind), result in zip(jobs, results, strict=True):
        result = {"error": f"{kind}: judge job failed"} if result is None else result
        outcomes[index]["errors"] += [result["error"]] if "error" in result else []
        outcomes[index].update({key: value for key, value in result.items() if key != "error"})
    # CoT-scored samples without a precision judge (`plan_jobs`): an empty reply or a bare answer
    for index in {index for index, kind in jobs if kind == "recall"} - {index for index, kind in jobs if kind == "precision"}:
        if not responses.judged_text(records[index]).strip():
            outcomes[index]["precision_steps"] = []  # no steps: precision undefined for every kind
        elif outcomes[index]["correct"] is not None:
            outcomes[index]["precision_steps"] = scoring.bare_answer_steps(outcomes[index]["correct"])
    return outcomes


def lenient_changed(outcomes: Sequence[dict]) -> int:
    """Samples whose scoring verdict differs between the official exact "1" and the lenient reading."""
    return sum(o.get("verdict_lenient") is not None and o["verdict_lenient"] != o.get("verdict_exact") for o in outcomes)


def judge_records(records: Sequence[dict], judge: Judge, settings: dict | None = None) -> list[dict]:
    """One outcome per record, in order, judged in one concurrent batch; `settings` None: the environment's."""
    settings = scoring.resolve_settings(None) if settings is None else settings
    jobs = plan_jobs(records)

    def run(job, ask):
        index, kind = job
        return judge_answer(records[index], ask, settings) if kind == "answer" else judge_steps(records[index], ask, kind)

    outcomes = combine(records, jobs, judge.map(run, jobs, desc="VCR-Bench judging"))
    unanswered = sum(map(responses.model_failed, records))
    if unanswered:
        log.warning("VCR-Bench: %d of %d samples have lmms-eval's failure placeholder instead of a model answer; "
                    "not judged, wrong for accuracy, left out of the CoT means (model_failed=%d)", unanswered, len(records), unanswered)
    changed = lenient_changed(outcomes)
    if changed:
        log.warning("VCR-Bench: %d scoring verdict(s) not exactly 1/0 read differently leniently (first standalone 0/1); "
                    "used: the %s reading (setting lenient_verdict)", changed, "lenient" if settings.get("lenient_verdict") else "exact")
    failed = sum(bool(o["errors"]) for o in outcomes)
    # Past the failure share the metrics are not computed at all (the scoring logs why).
    if failed and not failure_share.too_many_failed(failed, len(records) - unanswered, settings.get(failure_share.FAILED_SHARE.option)):
        log.warning("VCR-Bench: %d of %d samples had a failed judge call or record; they count as wrong for accuracy "
                    "and are left out of the CoT mean they could not enter (judge_failed=%d)", failed, len(records), failed)
    return outcomes
