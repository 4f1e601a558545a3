"""The paper's two-phase protocol (`vr_bench_two_phase`, `vr_bench_text_two_phase`; section 4,
"Evaluation Protocols"), two generations through lmms-eval's agentic loop: round 1 shows the Fig. A20
prompt (no options; `PAPER_REASONING_PROMPT`, transcribed from the paper), round 2 the options beside
the round-1 reasoning (`CHOICE_PROMPT`, this suite's wording: the paper prints none). OE-P rates
round 1, MCQ-O reads round 2. The rest of the task (documents, records, metrics) is `task.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from string import Template
from typing import Any

from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.lmms.responses import reply_record, strip_reasoning
from lmms_video_reasoning.vrbench.prompts import multiple_choice_question

MARK = "two_phase"  # marks the documents of the paper's protocol: the reasoning round, then the choice round
ROUNDS = "rounds"  # the key of the two replies in a two-phase response
# Round 1: the paper's Fig. A20 prompt, system prompt (b) for VLMs ("video and summary") or (a) for LLMs
# ("video summary"), then the user prompt (c), transcribed from the paper's text (arXiv:2506.10857; no
# official code holds it).
PAPER_REASONING_PROMPT = Template("""You are a helpful video understanding assistant designed to answer multi-step reasoning \
questions based on the $basis.
You should break down the reasoning process into clear, specific events.

# Format:
Your answer should be formatted as follows:
<Step 1> [Event1 for Step 1]
<Step 2> [Event for Step 2]
...
<Step N> [Final Event for the last Step]
<Answer> [Final conclusion based on the reasoning process]

# Video Summary
$video_summary

# Question
$question
""")
# Round 2 (the paper prints no wording for it): the official template's option block and answer line.
CHOICE_PROMPT = Template("""# Your Reasoning
$reasoning

Based on your reasoning above, choose the best option.

# Multiple Choice Question
$multiple_choice_question

# Output Format:
<Answer> [Option letter]
""")


def turn(doc: dict, replies: Sequence[str]) -> str | tuple:
    """lmms-eval's `generate_until_agentic` step. Before any reply: the Fig. A20 prompt for VLMs, or
    LLMs (text task). After round 1: round 2, text only (`[]` visuals): the options beside the round-1
    reply without its reasoning blocks (as a chat template keeps an earlier turn). After round 2: done,
    both replies packed into the one response lmms-eval logs."""
    if not replies:
        basis = "video summary" if doc["mode"] == "text" else "video and summary"
        return PAPER_REASONING_PROMPT.substitute(basis=basis, question=doc["question"], video_summary=doc["video_summary"])
    if len(replies) == 1:
        options = multiple_choice_question(doc["question"], [tuple(o) for o in doc["options"]])
        return [], CHOICE_PROMPT.substitute(reasoning=strip_reasoning(replies[0]), multiple_choice_question=options), False, None, None
    return None, None, True, [json.dumps({ROUNDS: list(replies[:2])}, ensure_ascii=False)], None


def unpack_rounds(response: Any) -> tuple[str, str]:
    """(reasoning, choice) replies of a two-phase response: the packed JSON lmms-eval logs, or
    the two replies as a list (a replay prediction); "" (no prediction) is two empty replies."""
    if response in ("", None):
        return "", ""
    rounds = response
    if isinstance(response, str):
        try:
            rounds = json.loads(response).get(ROUNDS)
        except (ValueError, AttributeError):
            rounds = None
    if not (isinstance(rounds, (list, tuple)) and len(rounds) == 2 and all(isinstance(text, str) for text in rounds)):
        raise DataError(f"VRBench two-phase task: expected the two rounds' replies ({{\"{ROUNDS}\": [reasoning, choice]}} or a "
                        f"list of two strings), got {str(response)[:200]!r}; run the task with lmms-eval's agentic loop")
    return rounds[0], rounds[1]


def reply(response: Any, settings: dict | None) -> dict:
    """The reply fields of a two-phase record: `response` is round 1 (what the OE-P judge rates),
    `choice_response` round 2 (its final answer gives the MCQ letter); a failure in either
    round is a model failure (never judged, wrong)."""
    reasoning, choice = unpack_rounds(response)
    first, second = reply_record(reasoning, settings), reply_record(choice, settings)
    return {**first, "choice_response": choice, "final_answer": second["final_answer"],
            "reasoning_truncated": second["reasoning_truncated"], "model_failed": first["model_failed"] or second["model_failed"],
            "model_failure": first["model_failure"] or second["model_failure"]}
