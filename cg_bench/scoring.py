"""CG-Bench scoring: reply parsing, tIoU, and the metric arithmetic, as small pure functions.

Defaults follow the official runner (CG-Bench/CG-Bench, commit f826608: `post_process` in
`run/utils.py`, the sums of `run/stat_with_key.py`); `strict=True` is this suite's stricter
variant. Each function cites the rule it implements. Metrics are percentages (0-100) as in
the paper's Table 3.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from lmms_video_reasoning.judges.parsing import ParseError
from lmms_video_reasoning.utils.intervals import intervals_iou

IOU_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5)  # stat_with_key.py; the paper's rec.@IoU / acc.@IoU
DURATION_BUCKETS = ("0-10", "10-20", "20-30", "30-40", "40-50", "50-60", "60+")  # minutes
KINDS = ("perception", "reasoning", "hallucination")

_FENCE_OPEN = "```json"
# `post_process`: bare words after ": " are quoted before json.loads (multiple choice only).
_BARE_WORD = re.compile(r"(?<=:\s)([A-Za-z_]\w*)")
_LETTER = re.compile(r"\b[A-H]\b")
_NUMBER = re.compile(r"-?\d+\.?\d*")


# ---------------------------------------------------------------------- reply parsing


def fenced_json(response: str) -> str:
    """The text between the first "```json" and the next "```", stripped; '' if there is none.

    `post_process`: only a block opened with ```json counts (a bare ``` fence does not).
    """
    start = response.find(_FENCE_OPEN)
    if start == -1:
        return ""
    end = response.find("```", start + len(_FENCE_OPEN))
    if end == -1:
        return ""
    return response[start + len(_FENCE_OPEN) : end].strip()


def json_result(response: str, quote_bare_words: bool = False) -> tuple[bool, Any]:
    """(found, value) of `{"result": ...}` in the reply's fenced JSON block.

    `quote_bare_words`: `{"result": B}` is read as `{"result": "B"}` (the runner does this
    for the multiple-choice modes only). found is False for no block, invalid JSON or no
    `result` key, the cases where the runner falls back to scanning the whole reply.
    """
    content = fenced_json(response)
    if not content:
        return False, None
    if quote_bare_words:
        content = _BARE_WORD.sub(r'"\1"', content)
    try:
        value = json.loads(content)
        return True, value["result"]
    except (ValueError, TypeError, KeyError, IndexError):
        return False, None


@dataclass(frozen=True)
class McqParse:
    """A multiple-choice reply read: correct is None when the reply could not be read."""

    correct: bool | None
    letters: tuple[str, ...]  # the letter(s) the verdict was based on
    how: str  # "json" | "letters" | "failed"


def parse_mcq(response: str, right_answer: str, strict: bool = False) -> McqParse:
    """Score a multiple-choice reply (long-acc, clue-acc, blind).

    Official: the fenced JSON `result` decides (correct iff it equals the right letter
    exactly); otherwise the reply is correct if ANY standalone letter A-H in it equals the
    right letter (lenient: "A or B" counts); no letter: unparseable (left out).
    Strict: the JSON `result` if it is a single letter, else the LAST standalone letter;
    no letter: wrong (and still counted as a parse failure).
    """
    response = response or ""
    if response:
        found, value = json_result(response, quote_bare_words=True)
        if found:
            if not strict:
                return McqParse(value == right_answer, (str(value),), "json")
            if isinstance(value, str) and _LETTER.fullmatch(value.strip()):
                letter = value.strip()
                return McqParse(letter == right_answer, (letter,), "json")
        letters = _LETTER.findall(response)
        if letters:
            if strict:
                return McqParse(letters[-1] == right_answer, (letters[-1],), "letters")
            return McqParse(right_answer in letters, tuple(letters), "letters")
    return McqParse(False if strict else None, (), "failed")


def _as_intervals(value: Any) -> list[list[float]] | None:
    """A JSON `result` as [[start, end], ...] of numbers, or None if it is not that shape."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if (not isinstance(item, (list, tuple)) or len(item) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in item)):
            return None
        out.append([float(item[0]), float(item[1])])
    return out


def parse_intervals(response: str, strict: bool = False) -> tuple[list[list[float]] | None, str]:
    """Read a grounding reply into predicted intervals: (intervals or None, how).

    Official: the fenced JSON `result` when it is a list of [start, end] numbers; otherwise
    every number in the reply (`-?\\d+\\.?\\d*`), paired in order ("10-20" reads as 10 and
    -20); an odd count is unparseable; no numbers at all gives [] (tIoU 0); an empty reply
    is unparseable. Strict: the same reading, a failure counts as [] (tIoU 0).
    """
    response = response or ""
    if response:
        found, value = json_result(response)
        intervals = _as_intervals(value) if found else None
        if intervals is not None:
            return intervals, "json"
        numbers = [float(n) for n in _NUMBER.findall(response)]
        if len(numbers) % 2 == 0:
            return [[numbers[i], numbers[i + 1]] for i in range(0, len(numbers), 2)], "numbers"
    return ([] if strict else None), "failed"


def tiou(predicted: Sequence[Sequence[float]], truth: Sequence[Sequence[float]]) -> float:
    """Temporal IoU of two interval sets after merging overlaps within each (paper eq. 1).

    A reversed predicted interval [end, start] is read as [start, end] (the official code
    subtracts it as a negative length, which can push IoU above 1). Inputs are not mutated.
    """
    normalised = [[min(a, b), max(a, b)] for a, b in predicted]
    return intervals_iou(normalised, [list(pair) for pair in truth])


def parse_open(response: str, strict: bool = False) -> str | None:
    """The open-ended prediction: the fenced JSON `result` (as text), else the whole reply.

    Official `post_process` for `open`; an empty reply has no prediction (left out of
    OE-acc, or wrong when strict: the caller decides).
    """
    response = response or ""
    if not response.strip():
        return None
    found, value = json_result(response)
    if found:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else str(value)
    return response


def judge_verdict(reply: str, allowed: Sequence[int]) -> int:
    """A judge step's verdict: fenced JSON `result` in `allowed`, else the first allowed digit.

    Official `post_process` for `eval_open_step_1/2` (`re.search(r'[012]', ...)`: the first
    such character anywhere). Raises ParseError (the judge re-asks) when there is none.
    """
    reply = reply or ""
    found, value = json_result(reply)
    if found and not isinstance(value, bool):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int) and value in allowed:
            return value
    match = re.search("[" + "".join(str(a) for a in allowed) + "]", reply)
    if match is None:
        raise ParseError(f"no verdict in {list(allowed)} in judge reply {reply[:120]!r}")
    return int(match.group())


# ---------------------------------------------------------------------- metric arithmetic


def percent_mean(values: Iterable[float]) -> float:
    """100 x the mean, NaN when there is nothing to average."""
    values = list(values)
    return 100.0 * sum(values) / len(values) if values else math.nan


def rec_at_iou(ious: Sequence[float], thresholds: Sequence[float] = IOU_THRESHOLDS) -> float:
    """rec.@IoU: mean over thresholds of the share of questions with tIoU >= threshold (x100).

    `>=` as `stat_with_key.py` (VLMEvalKit and the paper's text say `>`).
    """
    if not ious:
        return math.nan
    return 100.0 * sum(sum(iou >= t for iou in ious) / len(ious) for t in thresholds) / len(thresholds)


def acc_at_iou(pairs: Sequence[tuple[bool, float]], thresholds: Sequence[float] = IOU_THRESHOLDS) -> float:
    """acc.@IoU: like rec.@IoU, but a question also needs its long-video answer correct.

    `pairs` = (long answer correct, grounding tIoU) per question, joined on qid.
    """
    if not pairs:
        return math.nan
    return 100.0 * sum(sum(ok and iou >= t for ok, iou in pairs) / len(pairs) for t in thresholds) / len(thresholds)


def crr(long_acc: float, clue_acc: float) -> float:
    """Clue Recovery Rate = min(long-acc, clue-acc) / clue-acc x 100 (paper eq. 2); NaN if clue-acc is 0."""
    if clue_acc is None or long_acc is None or math.isnan(clue_acc) or math.isnan(long_acc) or clue_acc == 0:
        return math.nan
    return 100.0 * min(long_acc, clue_acc) / clue_acc


def duration_bucket(seconds: float) -> str:
    """The VLMEvalKit duration bucket of a video: 10-minute bins, right-closed, 60+ last."""
    minutes = seconds / 60
    for index, upper in enumerate(range(10, 70, 10)):
        if minutes <= upper:
            return DURATION_BUCKETS[index]
    return DURATION_BUCKETS[-1]


def question_kind(sub_category: str) -> str:
    """perception / reasoning / hallucination from `sub_category` ("... Perception", "... Cognition", "Hallucination")."""
    if sub_category == "Hallucination":
        return "hallucination"
    if sub_category.endswith("Perception"):
        return "perception"
    if sub_category.endswith("Cognition"):
        return "reasoning"
    raise ValueError(f"CG-Bench sub_category {sub_category!r} is neither '... Perception', '... Cognition' nor 'Hallucination'")
