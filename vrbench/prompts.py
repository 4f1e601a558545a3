"""VRBench prompts: the files in `prompts/`, byte-exact runtime values of the official code (OpenGVLab/VRBench,
commit 47a22db; `prompts/README.md`), filled as it does: inference by `inference/utils/prepare_input.py
::prepare_qa_text_input`, the judge by `evaluation/model_api/base_model.py` (separate mode)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).with_name("prompts")

MCQ_COT_PROMPT = "MCQ_COT_PROMPT.template.txt"
UNIQUE_SYSTEM = "UNIQUE_ANSWER_EVAL_SYSTEM_PROMPT_SEPARATE.txt"
UNIQUE_HUMAN = "UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"
NON_UNIQUE_SYSTEM = "NON_UNIQUE_ANSWER_EVAL_SYSTEM_PROMPT_SEPARATE.txt"
NON_UNIQUE_HUMAN = "NON_UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"
# The two-phase protocol's round 1: the paper's Fig. A20 prompt (b) for VLMs or (a) for LLMs, then (c), transcribed
# from the paper's text (arXiv:2506.10857; no official code holds it).
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
# What the non-unique-answer judge sees of the summary (evaluation/model_api/base_model.py: `limit = 10000; summary = summary[:limit]`).
SUMMARY_LIMIT = 10_000


@cache
def load(name: str) -> str:
    """The text of one prompt file, exactly as stored (UTF-8, no newline translation)."""
    return (PROMPTS_DIR / name).read_bytes().decode("utf-8")


def multiple_choice_question(question: str, options: Sequence[tuple[str, str]]) -> str:
    """`$multiple_choice_question` as the official `dict_to_text`: question, then `X: text` lines."""
    option_lines = "\n".join(f"{letter}: {text}" for letter, text in options)
    return f"Question: {question}\nOptions:\n{option_lines}"


def inference_prompt(question: str, options: Sequence[tuple[str, str]], summary: str) -> str:
    """The official CoT prompt for one question (`Template.substitute`, as the official code)."""
    return Template(load(MCQ_COT_PROMPT)).substitute(multiple_choice_question=multiple_choice_question(question, options), video_summary=summary)


def format_procedure(steps: Sequence[tuple[str, str]]) -> str:
    """Reference steps as the official `format_process`: `<Step n> text` lines, by step number."""
    ordered = sorted(steps, key=lambda step: int(step[0]))
    return "\n".join(f"<Step {number}> {text}" for number, text in ordered)


def judge_prompt(system: str, human: str, **fields: str) -> list[dict]:
    """Chat messages of a judge: its system prompt, its human template filled with `fields` (a `video_summary` as given)."""
    return [{"role": "system", "content": load(system)}, {"role": "user", "content": load(human).format(**fields)}]
