"""VCR-Bench prompts: the model's instruction and the four official judge prompts.

The judge prompts are the official files in `prompts/` (verbatim runtime values of
`eval_code/prompt.py` in zhishuifeiqian/VCR-Bench, commit 4e564b7), read as bytes-exact text and filled exactly as the
official evaluation code does (README.md, "How scoring runs"): extraction and scoring concatenate an
unformatted part 1 with a `str.format`-filled part 2; recall and precision format one
template, with the reference steps rendered as Python's list repr (`str(list)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"

# The sole chain-of-thought instruction, placed after the question (README.md, "Tasks").
COT_INSTRUCTION = "Please provide a step-by-step solution to the given question."


@cache
def official_prompt(name: str) -> str:
    """The official prompt file `prompts/<name>.txt`, newlines untranslated."""
    with open(PROMPT_DIR / f"{name}.txt", encoding="utf-8", newline="") as handle:
        return handle.read()


def model_prompt(question: str, chain_of_thought: bool = True, preamble: str = "") -> str:
    """What the evaluated model reads: [frame-time preamble] question [+ CoT instruction].

    `vcr_direct` (paper Table 5, "Direct") sends the question alone.
    """
    parts = [preamble] if preamble else []
    parts.append(question.rstrip())
    if chain_of_thought:
        parts.append(COT_INSTRUCTION)
    return "\n".join(parts)


def frame_times_preamble(timestamps: Sequence[float]) -> str:
    """The line telling a frame-based model when each frame was taken (round(idx/fps, 1) s)."""
    times = ", ".join(f"{t:.1f}s" for t in timestamps)
    return f"The video is given as {len(timestamps)} frames, taken at these times: {times}."


def extraction_prompt(question: str, response: str) -> str:
    """Judge call 1, answer extraction: part1 + part2.format(question, response)."""
    return official_prompt("Answer_Extraction_Prompt_part1") + official_prompt("Answer_Extraction_Prompt_part2").format(
        question=question, response=response
    )


def scoring_prompt(question: str, extract_answer: str, gt_answer: str) -> str:
    """Judge call 2, answer scoring: part1 + part2.format(question, extract_answer, gt_answer)."""
    return official_prompt("Answer_Scoring_Prompt_part1") + official_prompt("Answer_Scoring_Prompt_part2").format(
        question=question, extract_answer=extract_answer, gt_answer=gt_answer
    )


def recall_prompt(question: str, answer: str, response: str, reference_steps: Sequence[str]) -> str:
    """Judge call 3, recall: the reference steps go in as the official code's list repr."""
    return official_prompt("Recall_Evaluation_Prompt").format(
        question=question, answer=answer, solution=response, gt_annotation=str(list(reference_steps))
    )


def precision_prompt(question: str, response: str, reference_steps: Sequence[str]) -> str:
    """Judge call 4, precision: the response is re-stepped and judged against the reference."""
    return official_prompt("Precision_Evaluation_Prompt").format(
        question=question, solution=response, gt_annotation=str(list(reference_steps))
    )
