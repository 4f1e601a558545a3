"""CG-Bench scoring as small pure functions: reply parsing, tIoU, metric arithmetic (percentages, as Table 3).

Defaults follow the official runner (CG-Bench/CG-Bench, commit f826608: `post_process` in `run/utils.py`,
the sums of `run/stat_with_key.py`); `strict=True` is this suite's stricter variant.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Sequence

from lmms_video_reasoning.utils.core.ask import ParseError  # the judge interface's re-ask signal

IOU_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5)  # stat_with_key.py; the paper's rec.@IoU / acc.@IoU
DURATION_BUCKETS = ("0-10", "10-20", "20-30", "30-40", "40-50", "50-60", "60+")  # minutes
KINDS = ("perception", "reasoning", "hallucination")
# The annotations' `sub_category`: the paper's 12 level-2 question categories (appendix, Table 7), in its order
SUB_CATEGORIES = ("Entity Perception", "Event Perception", "Scene Perception", "Text Perception", "Time Perception",
                  "2D Spatial Perception", "Entity Cognition", "Event Cognition", "Scene Cognition", "Text Cognition",
                  "Time Cognition", "Hallucination")

_FENCE_OPEN = "```json"
# `post_process`: bare words after ": " are quoted before json.loads (multiple choice only).
_BARE_WORD = re.compile(r"(?<=:\s)([A-Za-z_]\w*)")
_LETTER = re.compile(r"\b[A-H]\b")
_NUMBER = re.compile(r"-?\d+\.?\d*")


# --- Reply parsing
def fenced_json(response: str) -> str:
    """`post_process`: the text between the first "```json" (a bare ``` does not count) and the next "```", stripped; ''."""
    start = response.find(_FENCE_OPEN)
    end = -1 if start == -1 else response.find("```", start + len(_FENCE_OPEN))
    return "" if end == -1 else response[start + len(_FENCE_OPEN) : end].strip()


def json_result(response: str, quote_bare_words: bool = False) -> tuple[bool, Any]:
    """(found, value) of `{"result": ...}` in the reply's fenced JSON block (`quote_bare_words`: `{"result": B}`
    reads as `{"result": "B"}`, as the runner's multiple-choice modes). Not found: no block, any error, no key."""
    content = fenced_json(response)  # '' (no block) fails json.loads below
    content = _BARE_WORD.sub(r'"\1"', content) if quote_bare_words else content
    try:
        return True, json.loads(content)["result"]
    except Exception:  # noqa: BLE001 - as `post_process`: any failure means "no JSON answer"
        return False, None


def parse_mcq(response: str, right_answer: str, strict: bool = False) -> tuple[bool | None, str]:
    """(correct or None, how: "json" | "letters" | "failed") of a multiple-choice reply (long, clue, blind).
    Official: the fenced JSON `result` decides (equal to the right letter); else correct if ANY standalone
    letter A-H is the right one ("A or B" counts); no letter: unparseable (left out). Strict: the JSON
    `result` if a single letter, else the LAST standalone letter; no letter: wrong (a parse failure)."""
    if response:
        found, value = json_result(response, quote_bare_words=True)
        if found and not strict:
            return value == right_answer, "json"
        if found and isinstance(value, str) and _LETTER.fullmatch(value.strip()):
            return value.strip() == right_answer, "json"
        letters = _LETTER.findall(response)
        if letters:
            return (letters[-1] == right_answer if strict else right_answer in letters), "letters"
    return (False if strict else None), "failed"


# --- Grounding
class Unscorable(ValueError):
    """The official tIoU code raises on this prediction (the runner then saves no result)."""


def _merged(intervals: Any, mutable: bool, ordered: bool) -> list:
    """The official `merge_intervals` on a copy, raising where it raises (`mutable` False: the number fallback's
    tuples, so any overlapping or touching pair raises). `ordered` reads each reversed pair [b, a] as [a, b]."""
    if not intervals:
        return []
    if not isinstance(intervals, list):
        raise Unscorable(f"result {type(intervals).__name__} has no sort()")
    items = [list(item) if isinstance(item, list) or (mutable and isinstance(item, tuple)) else item for item in intervals]
    items = [type(item)((item[1], item[0])) if ordered and _reversed_pair(item) else item for item in items]
    items.sort(key=lambda pair: pair[0])
    merged = [items[0]]
    for current in items[1:]:
        last = merged[-1]
        if current[0] <= last[1]:
            if not isinstance(last, list):
                raise Unscorable("overlapping pairs cannot be merged (the official fallback builds tuples)")
            last[1] = max(last[1], current[1])
        else:
            merged.append(current)
    return merged


def _reversed_pair(item: Any) -> bool:
    """A pair of numbers (bool included, as Python arithmetic reads it) whose end is before its start."""
    return (isinstance(item, (list, tuple)) and len(item) == 2
            and all(isinstance(v, (int, float)) for v in item) and item[1] < item[0])


def _official_arithmetic(predicted: Any, truth: Sequence[Sequence[float]], mutable: bool, ordered: bool) -> float:
    try:
        pred = _merged(predicted, mutable, ordered)
        gt = _merged([list(pair) for pair in truth], True, ordered)
        length_pred = sum(end - start for start, end in pred)
        length_gt = sum(end - start for start, end in gt)
        inter = sum(max(0, min(a[1], b[1]) - max(a[0], b[0])) for a in pred for b in gt)
        union = length_pred + length_gt - inter
        return inter / union if union > 0 else 0
    except Unscorable:
        raise
    except Exception as error:  # noqa: BLE001 - every error of the official arithmetic means "no result"
        raise Unscorable(f"{type(error).__name__}: {error}") from None


def tiou_official(predicted: Any, truth: Sequence[Sequence[float]], mutable: bool = True,
                  reversed_as_official: bool = True) -> float:
    """tIoU as the official `calculate_intervals_iou` computes it, or Unscorable where it raises. Scorable is
    decided officially; then, unless `reversed_as_official`, a reversed [end, start] is read as [start, end]
    (officially a negative length: the tIoU can exceed 1 or be negative)."""
    value = _official_arithmetic(predicted, truth, mutable, ordered=False)
    if reversed_as_official or not isinstance(predicted, list) or not any(_reversed_pair(item) for item in predicted):
        return value
    try:
        return _official_arithmetic(predicted, truth, True, ordered=True)
    except Unscorable:
        return value


def grounding_tiou(response: str, truth: Sequence[Sequence[float]], strict: bool = False,
                   reversed_as_official: bool = False) -> tuple[float | None, str]:
    """(tIoU or None, how) of a grounding reply, as `post_process` + `calculate_intervals_iou`: the JSON `result`
    first, else the reply's numbers paired; where the official code raises (an overlapping or touching pair of
    the fallback: any "m:ss" time) the reply is unparseable ("failed"; strict: tIoU 0)."""
    if response:
        found, value = json_result(response)
        if found:  # null, 0, "" and [] are an empty prediction (tIoU 0), as officially
            try:
                return float(tiou_official(value, truth, True, reversed_as_official)), "json"
            except Unscorable:
                pass
        numbers = [float(n) for n in _NUMBER.findall(response)]
        if len(numbers) % 2 == 0:
            pairs = [(numbers[i], numbers[i + 1]) for i in range(0, len(numbers), 2)]
            try:
                return float(tiou_official(pairs, truth, False, reversed_as_official)), "numbers"
            except Unscorable:
                pass
    return (0.0 if strict else None), "failed"


# --- Open-ended
def parse_open(response: str, strict: bool = False) -> str | None:
    """The open-ended prediction the step-1 judge sees (`post_process`: the JSON `result` unless null, by `str()`,
    else the whole reply), or None (left out of OE-acc): an empty reply (strict: a blank one too)."""
    if not response or (strict and not response.strip()):
        return None
    found, value = json_result(response)
    if found and value is not None:
        return value if isinstance(value, str) else str(value)
    return response


def judge_verdict(reply: str, allowed: Sequence[int]) -> int:
    """A judge step's verdict as the official statistics count it, of its result: the JSON `result` as read, else
    the first character among `allowed` in the reply as an int; neither: ParseError (the judge is re-asked, as the
    runner re-runs the step). Step 1 (`allowed` with 2): a result `in [0, 1]` is final, anything else gives 2
    (step 2). Step 2: 1 iff the result `== 1`. Not comparable: not final / wrong."""
    reply = reply or ""
    found, value = json_result(reply)
    if not found or value is None:
        match = re.search("[" + "".join(str(a) for a in allowed) + "]", reply)
        if match is None:
            raise ParseError(f"no verdict in {list(allowed)} in judge reply {reply[:120]!r}")
        value = int(match.group())
    try:
        if 2 in allowed:
            return int(value == 1) if value in (0, 1) else 2
        return int(bool(value == 1))
    except Exception:  # noqa: BLE001 - an exotic value that cannot be compared
        return 2 if 2 in allowed else 0


# --- Metric arithmetic
def crr(long_acc: float, clue_acc: float) -> float:
    """Clue Recovery Rate = min(long-acc, clue-acc) / clue-acc x 100 (paper eq. 2); NaN if clue-acc is 0."""
    if clue_acc is None or long_acc is None or math.isnan(clue_acc) or math.isnan(long_acc) or clue_acc == 0:
        return math.nan
    return 100.0 * min(long_acc, clue_acc) / clue_acc


def duration_bucket(seconds: float) -> str:
    """The VLMEvalKit duration bucket of a video: 10-minute bins, right-closed, 60+ last."""
    uppers = range(10, 70, 10)  # the buckets' upper bounds, in minutes
    return next((bucket for bucket, upper in zip(DURATION_BUCKETS, uppers) if seconds / 60 <= upper), DURATION_BUCKETS[-1])


def question_kind(sub_category: str) -> str:
    """perception / reasoning / hallucination from `sub_category` ("... Perception", "... Cognition", "Hallucination")."""
    if sub_category == "Hallucination":
        return "hallucination"
    if sub_category.endswith(("Perception", "Cognition")):
        return "perception" if sub_category.endswith("Perception") else "reasoning"
    raise ValueError(f"CG-Bench sub_category {sub_category!r} is neither '... Perception', '... Cognition' nor 'Hallucination'")
