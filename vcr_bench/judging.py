"""The four VCR-Bench judge calls, run for a whole task in one concurrent batch.

Per sample (README.md, "How scoring runs"): answer extraction, then answer scoring (or the IoU rule
for VTG / TSG); recall and precision in parallel with that chain, all through one `judge.map`. Each
request carries its official prompt as one user message, temperature 0, max_tokens 2048, a parser
that raises `ParseError` (bounded re-asks) and a tag for the accounting. A failed call is recorded
in the sample's `errors`, never turned into a score; a sample without a model answer gets no judge
call. Every call is shown the model's whole reply, thinking included, as officially
(`responses.judged_text`; stripped under the task option `judged_reply: stripped`); a reply ending inside an
open reasoning block is wrong without an extraction call, its reasoning still rated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core.ask import Ask, Judge, Request
from lmms_video_reasoning.utils.lmms.responses import judged_text, model_failed, reasoning_truncated
from lmms_video_reasoning.vcr_bench import prompts, scoring

log = logging.getLogger(__name__)

# The official judge (eval_code: GPT-4o through the OpenAI client).
JUDGE_MODEL = "gpt-4o-2024-08-06"
JUDGE_MAX_TOKENS = 2048
MAX_REASKS = 2


def judge_request(prompt: str, parse: Callable, tag: str, expected_reply: str | None = None, later_steps: int = 0) -> Request:
    """One official judge call: the prompt as a single user message, temperature 0.

    `expected_reply` / `later_steps`: what the cost estimate assumes (the reply's format and
    size; answer extraction is followed by the scoring call unless the IoU rule decides)."""
    return Request(
        messages=[{"role": "user", "content": prompt}],
        max_tokens=JUDGE_MAX_TOKENS,
        temperature=0.0,
        parse=parse,
        max_reasks=MAX_REASKS,
        tag=tag,
        expected_reply=expected_reply,
        later_steps=later_steps,
    )


# A typical `reasons_for_judgment` of the precision judge (about 30 tokens), for the estimate.
_TYPICAL_REASON = ("The ground truth states the same event at the same time in the video, so the step is supported "
                   "by the ground truth information.")


def expected_steps_reply(steps: Sequence[str], precision: bool) -> str:
    """A recall / precision reply in the official output format, one object per step (the estimate's
    assumption: its size grows with the steps judged)."""
    items = []
    for step in steps:
        item = {"step": step, "step_type": "Video Description Steps"}
        if precision:
            item["reasons_for_judgment"] = _TYPICAL_REASON
        item["judgment"] = "Matched"
        items.append(item)
    return json.dumps(items, indent=2, ensure_ascii=False)


def response_steps(response: str) -> list[str]:
    """The response's non-empty lines, at most 35 (the precision prompt's limit): the steps the
    precision judge re-formats, as the estimate counts them."""
    return [line.strip() for line in response.splitlines() if line.strip()][:35]


def judge_answer(record: dict, ask: Ask, settings: dict | None = None) -> dict:
    """Extraction -> (IoU rule | scoring judge): {"extracted", "correct", "iou"} or {"error"}.

    With the scoring judge, "verdict" keeps both readings of its reply (`scoring.VerdictReading`);
    `settings["lenient_verdict"]` picks the lenient one, the official exact "1" otherwise.
    """
    settings = settings or {}
    response = judged_text(record)
    if not response.strip() or reasoning_truncated(record):
        return {"extracted": "", "correct": False, "iou": None}  # nothing (or no answer yet) to extract: wrong
    # The estimate assumes an extraction as long as the reference answer (then the IoU rule or the scoring call).
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
    return {"extracted": extracted, "correct": reading.correct(lenient), "iou": None,
            "verdict_exact": reading.exact, "verdict_lenient": reading.lenient}


def judge_steps(record: dict, ask: Ask, kind: str) -> dict:
    """Recall (each reference step) or precision (each response step) judge: {"steps": [{"type",
    "judgment"}]} or {"error"}."""
    response = judged_text(record)
    if kind == "recall":
        prompt = prompts.recall_prompt(record["question"], record["answer"], response, record["reasoning"])
        request = judge_request(prompt, scoring.parse_recall, "vcr.recall", expected_reply=expected_steps_reply(record["reasoning"], precision=False))
    else:
        prompt = prompts.precision_prompt(record["question"], response, record["reasoning"])
        request = judge_request(prompt, scoring.parse_precision, "vcr.precision",
                                expected_reply=expected_steps_reply(response_steps(response), precision=True))
    result = ask(request)
    return {"steps": result.value} if result.ok else {"error": f"{kind}: {result.error}"}


def needs_precision_judge(response: str) -> bool:
    """Precision is judged only for responses with content beyond a bare option letter.

    An empty response has no steps; a bare letter is one final-answer step scored from the
    answer verdict (official issue #2, see `scoring.is_bare_answer`).
    """
    return bool(response.strip()) and not scoring.is_bare_answer(response)


def plan_jobs(records: Sequence[dict], chain_of_thought: bool) -> list[tuple[int, str]]:
    """(record index, job kind) for every judge job of the batch."""
    jobs = []
    for index, record in enumerate(records):
        if record.get("error") or model_failed(record):
            continue  # unprocessable record or no model answer: counted, nothing to judge
        jobs.append((index, "answer"))
        if chain_of_thought:
            jobs.append((index, "recall"))
            if needs_precision_judge(judged_text(record)):
                jobs.append((index, "precision"))
    return jobs


def empty_outcome(record: dict) -> dict:
    """A sample's outcome before judging; a record that failed processing starts with its error."""
    return {
        "extracted": None, "correct": None, "iou": None, "recall_steps": None, "precision_steps": None,
        "errors": [f"processing: {record['error']}"] if record.get("error") else [],
    }


def combine(records: Sequence[dict], jobs: Sequence[tuple[int, str]], results: Sequence[dict | None], chain_of_thought: bool) -> list[dict]:
    """Per-sample outcomes from the job results (None from judge.map = the job itself failed)."""
    outcomes = [empty_outcome(record) for record in records]
    for (index, kind), result in zip(jobs, results, strict=True):
        outcome = outcomes[index]
        if result is None:
            outcome["errors"].append(f"{kind}: judge job failed")
            continue
        if "error" in result:
            outcome["errors"].append(result["error"])
        if kind == "answer":
            outcome.update({key: result.get(key) for key in ("extracted", "correct", "iou", "verdict_exact", "verdict_lenient")
                            if key in result})
        elif "steps" in result:
            outcome[f"{kind}_steps"] = result["steps"]
    if chain_of_thought:
        for record, outcome in zip(records, outcomes):
            if record.get("error") or model_failed(record) or needs_precision_judge(judged_text(record)):
                continue
            if not judged_text(record).strip():
                outcome["precision_steps"] = []  # no steps: precision undefined for every kind
            elif outcome["correct"] is not None:
                outcome["precision_steps"] = scoring.bare_answer_steps(outcome["correct"])
    return outcomes


def lenient_changed(outcomes: Sequence[dict]) -> int:
    """Samples whose scoring-judge verdict differs between the official exact "1" reading and
    the lenient one (first standalone 0/1), whichever the run used."""
    return sum(o.get("verdict_lenient") is not None and o["verdict_lenient"] != o.get("verdict_exact") for o in outcomes)


def judge_records(records: Sequence[dict], judge: Judge, chain_of_thought: bool, settings: dict | None = None) -> list[dict]:
    """Judge every record in one concurrent batch; returns one outcome per record, in order.

    `settings` None: the scoring options in effect (`scoring.resolve_settings`)."""
    if settings is None:
        settings = scoring.resolve_settings(None)
    jobs = plan_jobs(records, chain_of_thought)

    def run(job, ask):
        index, kind = job
        return judge_answer(records[index], ask, settings) if kind == "answer" else judge_steps(records[index], ask, kind)

    results = judge.map(run, jobs, desc="VCR-Bench judging")
    outcomes = combine(records, jobs, results, chain_of_thought)
    unanswered = sum(model_failed(record) for record in records)
    if unanswered:
        log.warning("VCR-Bench: %d of %d samples have lmms-eval's failure placeholder instead of a model answer; "
                    "not judged, wrong for accuracy, left out of the CoT means (model_failed=%d)",
                    unanswered, len(records), unanswered)
    changed = lenient_changed(outcomes)
    if changed:
        log.warning("VCR-Bench: the scoring judge's verdict of %d sample(s) is not exactly \"1\"/\"0\" and reads differently "
                    "leniently (first standalone 0/1); used: %s (setting lenient_verdict)", changed,
                    "lenient" if (settings or {}).get("lenient_verdict") else "official exact \"1\"")
    failed = sum(bool(o["errors"]) for o in outcomes)
    # Past the failure share the metrics are not computed at all (task.metrics_from_outcomes says so).
    if failed and not failure_share.too_many_failed(failed, len(records) - unanswered, settings.get(failure_share.FAILED_SHARE.option)):
        log.warning("VCR-Bench: %d of %d samples had a failed judge call or record; they count as wrong for accuracy "
                    "and are left out of the CoT mean they could not enter (judge_failed=%d)", failed, len(records), failed)
    return outcomes
