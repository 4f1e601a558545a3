"""CG-Bench prompt text, assembled exactly as the official runner does (`run/utils.py`, commit f826608).

One text block after the frames: the mode's system prompt (`prompts/<mode>.txt`, byte-exact), subtitles,
frame times, `Question: ...` and the options as `A:text` lines (multiple-choice modes only).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.cg_bench.frames import timestamps
from lmms_video_reasoning.utils.core.data_errors import letters

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

# Our task modes -> the official runner's `task_mode` (the prompt file names).
OFFICIAL_MODE = {"long": "long_acc", "clue": "clue_acc", "grounding": "miou", "open": "open"}
CHOICE_MODES = ("long", "clue", "grounding")  # the official modes that list the options


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of `prompts/<name>.txt`, byte-exact (no newline stripping)."""
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"CG-Bench prompt file missing: {path} (reinstall the package)")
    return path.read_bytes().decode("utf-8")


def frame_times_block(indices: Sequence[int], fps: float) -> str:
    """`get_frame_times`: how many frames were sampled and their times, comma separated."""
    return f"A total of {len(indices)} frames are sampled. Their corresponding timestamps are:\n\n{', '.join(map(str, timestamps(indices, fps)))}\n\n"


def question_block(question: str) -> str:
    return f"Question: {question}\n\n"


def model_prompt(mode: str, question: str, choices: Sequence[str], subtitles: str = "", frame_times: str = "") -> str:
    """The text block a model receives in `mode` (`get_prompt`); `subtitles` / `frame_times`: the ready blocks, or ''.
    The multiple-choice modes end with the options as `A:text` lines (no space after the colon), then a blank line."""
    options = "\n".join(f"{letter}:{choice}" for letter, choice in zip(letters(len(choices)), choices)) + "\n\n" if mode in CHOICE_MODES else ""
    return load_prompt(OFFICIAL_MODE[mode]) + subtitles + frame_times + question_block(question) + options


def judge_step1_text(question: str, answer: str, prediction: str) -> str:
    """Open-ended judge, step 1 (text only, no subtitles, no frame times): question, reference, prediction."""
    return load_prompt("eval_open_step_1") + question_block(question) + f"The ground truth answer is '{answer}'\n\nThe model's prediction is '{prediction}'\n\n"


def judge_step2_text(question: str, prediction: str, subtitles: str, frame_times: str) -> str:
    """Open-ended judge, step 2 (after the clue frames): subtitles, frame times, question, prediction; no reference."""
    return load_prompt("eval_open_step_2") + subtitles + frame_times + question_block(question) + f"The model's prediction is '{prediction}'\n\n"


def blind_prompt(question: str, choices: Sequence[str]) -> str:
    """The paper's Blind-MCQ prompt (appendix B.2) with the question and `A. text` choice lines."""
    choice_lines = "\n".join(f"{letter}. {text}" for letter, text in zip(letters(len(choices)), choices))
    # Placeholders are replaced once each, in order, so a question containing "<Choices>" stays intact.
    head, tail = load_prompt("blind_mcq").split("<Question>", 1)
    middle, rest = tail.split("<Choices>", 1)
    return head + question + middle + choice_lines + rest
