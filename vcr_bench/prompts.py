"""VCR-Bench prompts: the model's instruction and the four official judge prompts, the files in `prompts/`
(verbatim runtime values of `eval_code/prompt.py` in zhishuifeiqian/VCR-Bench, commit 4e564b7) filled as the
official code does: extraction and scoring append a `str.format`-filled part 2 to an unformatted part 1;
recall and precision format one template, the reference steps as `str(list)`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
# The sole chain-of-thought instruction, after the question (README.md, "Tasks").
COT_INSTRUCTION = "Please provide a step-by-step solution to the given question."


@cache
def official_prompt(name: str) -> str:
    """The official prompt file `prompts/<name>.txt`, newlines untranslated."""
    with open(PROMPT_DIR / f"{name}.txt", encoding="utf-8", newline="") as handle:
        return handle.read()


def model_prompt(question: str, chain_of_thought: bool = True, timestamps: Sequence[float] = ()) -> str:
    """What the evaluated model reads: [when each frame was taken] question [+ the CoT instruction, not in `vcr_direct`]."""
    times = [f"The video is given as {len(timestamps)} frames, taken at these times: {', '.join(f'{t:.1f}s' for t in timestamps)}."]
    return "\n".join([*(times if timestamps else []), question.rstrip(), *([COT_INSTRUCTION] if chain_of_thought else [])])


def extraction_prompt(question: str, response: str) -> str:
    """Judge call 1, answer extraction."""
    return official_prompt("Answer_Extraction_Prompt_part1") + official_prompt("Answer_Extraction_Prompt_part2").format(
        question=question, response=response)


def scoring_prompt(question: str, extract_answer: str, gt_answer: str) -> str:
    """Judge call 2, answer scoring."""
    return official_prompt("Answer_Scoring_Prompt_part1") + official_prompt("Answer_Scoring_Prompt_part2").format(
        question=question, extract_answer=extract_answer, gt_answer=gt_answer)


def recall_prompt(question: str, answer: str, response: str, reference_steps: Sequence[str]) -> str:
    """Judge call 3, recall of the reference steps."""
    return official_prompt("Recall_Evaluation_Prompt").format(question=question, answer=answer, solution=response, gt_annotation=str(list(reference_steps)))


def precision_prompt(question: str, response: str, reference_steps: Sequence[str]) -> str:
    """Judge call 4, precision: the response re-stepped and judged against the reference."""
    return official_prompt("Precision_Evaluation_Prompt").format(question=question, solution=response, gt_annotation=str(list(reference_steps)))
