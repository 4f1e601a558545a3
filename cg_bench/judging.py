"""The open-ended judge of CG-Bench: the official two-step heuristic evaluation (`run_api.py`).

Step 1 (text only): question, reference answer and prediction -> 0 wrong, 1 right, 2 "needs visual
check". Step 2 (only for the 2s): the clue frames, subtitles, frame times, question and prediction, no
reference -> 0 / 1. The two steps of a question chain inside one `judge.map` item.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Sequence

from lmms_video_reasoning.cg_bench import frames, prompts
from lmms_video_reasoning.cg_bench.scoring import judge_verdict, parse_open
from lmms_video_reasoning.cg_bench.task import NO_JUDGE, Outcome
from lmms_video_reasoning.utils.core.ask import Ask, Judge, Request
from lmms_video_reasoning.utils.lmms.responses import final_answer

# The official judge (run/run_api.py: GPT-4o).
JUDGE_MODEL = "gpt-4o-2024-08-06"


@dataclass(frozen=True)
class OpenItem:  # one open-ended answer to judge
    qid: int
    video_uid: str
    question: str
    answer: str
    prediction: str
    clue_intervals: tuple[tuple[float, float], ...]


def image_part(frame) -> dict:
    """A PIL frame as an OpenAI image part: JPEG (PIL defaults, as the runner) base64 data URL, detail low."""
    buffer = io.BytesIO()
    frame.convert("RGB").save(buffer, format="jpeg")
    encoded = base64.b64encode(buffer.getvalue()).decode("utf-8")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{encoded}", "detail": "low"}}


def _request(content: list, allowed: tuple, step: int, assumed: int) -> Request:
    """One judge step: one user turn, temperature 0, the step's verdict parser (`scoring.judge_verdict`); the cost
    estimate assumes the reply `assumed` in the prompts' output format (step 1: 2, so step 2 follows)."""
    return Request(messages=[{"role": "user", "content": content}], temperature=0.0, parse=lambda raw: judge_verdict(raw, allowed),
                   tag=f"cg_bench.open.step{step}", expected_reply=f'```json\n{{"result": {assumed}}}\n```', later_steps=int(step == 1))


def judge_one(item: OpenItem, ask: Ask, media: frames.Media) -> tuple[int | None, str | None]:
    """(verdict 0/1, None) of both steps for one item, step 2 (the clue frames, from `media`) only when step 1
    says 2; a failed step: (None, the error)."""
    # Step 1: text only (the runner turns subtitles and frame times off for this step). The estimate
    # assumes "needs a visual check", so step 2 is counted for every question (an upper bound).
    first = ask(_request([{"type": "text", "text": prompts.judge_step1_text(item.question, item.answer, item.prediction)}], (0, 1, 2), 1, assumed=2))
    if not first.ok:
        return None, f"step 1: {first.error}"
    if first.value in (0, 1):
        return first.value, None
    # Step 2: the clue frames, then subtitles + frame times + question + prediction (no reference).
    plan = media.plan(item.video_uid, frames.CLUE_PLAN, frames.DEFAULT_CLUE_FRAMES, item.clue_intervals)
    images = [image_part(frame) for frame in media.frames(item.video_uid, list(plan.indices))]
    text = prompts.judge_step2_text(item.question, item.prediction, frames.subtitles_for(item.video_uid, plan, media),
                                    prompts.frame_times_block(plan.indices, plan.fps))
    second = ask(_request(images + [{"type": "text", "text": text}], (0, 1), 2, assumed=1))
    return (second.value, None) if second.ok else (None, f"step 2: {second.error}")


def judge_pending(outcomes: list[Outcome], records: Sequence[dict], judge: Judge | None, media: frames.Media) -> list[Outcome]:
    """`outcomes` (of `records`, `task.read_outcomes`) with the open answers it left pending judged, once, in place
    (`judge` None: none configured, they stay pending); `media` gives the clue frames of step 2."""
    pending = [(outcome, record) for outcome, record in zip(outcomes, records) if outcome.judge_error == NO_JUDGE]
    if judge is None or not pending:
        return outcomes
    # a pending answer has a prediction, the same in both parsing settings (strict only refuses a blank reply)
    items = [OpenItem(record["qid"], record["video_uid"], record["question"], record["answer"], parse_open(final_answer(record)),
                      tuple(tuple(pair) for pair in record["clue_intervals"])) for _outcome, record in pending]
    # every item judged concurrently, its steps chained; an item whose code failed gets an error
    results = judge.map(lambda item, ask: judge_one(item, ask, media), items, desc="cg_bench open-ended judge")
    for (outcome, _record), result in zip(pending, results):
        verdict, outcome.judge_error = result if result is not None else (None, "judge item failed (see log)")
        outcome.value = None if verdict is None else float(verdict)
    return outcomes
