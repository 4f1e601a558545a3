"""VRBench scoring: MCQ letter extraction, judge-tag parsing, per-question and per-task metrics.

Every function is pure and cites the official code it follows (OpenGVLab/VRBench, commit 47a22db):
`evaluation/calculate_scores.py` (MCQ-O, per-type combination) and
`evaluation/batch_evaluation_api_mp_time_async.py` (OE-P tags and weights). Two protocols: `default`
(failures visible: judge and model failures out of OE-P, counted) and `official` (the official numbers:
they, and unrated questions, score 0 in OE-P); `score_columns` and `combine_type` tell how.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.judges.parsing import ParseError, extract_tag
from lmms_video_reasoning.utils.core.columns import Totals, column, ratio, rowwise
from lmms_video_reasoning.utils.lmms.responses import is_model_failure

PROTOCOLS = ("default", "official")

# --- Reasoning types
# Spelling in the data (counting: "Counting Porblems") -> metric suffix. "Multi-element Inference", named by
# the official judge code, is not one of the paper's seven types: no per-type metric.
TYPE_METRIC = {
    "Event Prediction": "event_prediction",
    "Hypothetical Reasoning": "hypothetical_reasoning",
    "Event Attribution": "event_attribution",
    "Implicit Inference": "implicit_inference",
    "Logical Linkage": "logical_linkage",
    "Event Summarization": "information_synopsis",
    "Counting Porblems": "counting",
    "Counting Problems": "counting",
    "Multi-element Inference": None,
}
TYPE_NAMES = tuple(dict.fromkeys(name for name in TYPE_METRIC.values() if name))  # the seven, in the order above

# The official judge's type lists (`question_type.strip() in [...]`).
OFFICIAL_UNIQUE = ("Event Attribution", "Multi-element Inference", "Implicit Inference", "Logical Linkage")
OFFICIAL_NON_UNIQUE = ("Hypothetical Reasoning", "Event Prediction")
COUNTING = ("Counting Porblems", "Counting Problems")

UNIQUE, NON_UNIQUE = "unique", "non_unique"


def judge_prompt_kind(reasoning_type: str, protocol: str) -> str | None:
    """`unique`, `non_unique` or None (not rated: synopsis; counting under the official protocol): its judge prompt."""
    name = reasoning_type.strip()
    if name in OFFICIAL_NON_UNIQUE:
        return NON_UNIQUE
    if name in OFFICIAL_UNIQUE or (protocol == "default" and name in COUNTING):
        return UNIQUE
    return None


# --- MCQ-O: the official 8-stage extraction cascade (calculate_scores.py::extract_mcq_answer)
# Stage 4 keywords, in the official order: all matches of all keywords, in keyword order, the last
# wins (the last match of the last keyword that matched, not the match nearest the end of the text).
_KEYWORDS = ("Answer", "answer is", "correct answer", "final answer", "final", "therefore", "conclusion")
_KEYWORD_PATTERNS = [re.compile(keyword + r"[:\s]+([A-E])(?:\s|$|\.|,)", re.IGNORECASE) for keyword in _KEYWORDS]
# Stage 5: the first label style with any match decides (its last match).
_LABEL_PATTERNS = [re.compile(r"([A-E])" + re.escape(mark), re.IGNORECASE) for mark in (".", ")", ":")]
_BOXED = re.compile(r"\\boxed\{([A-E])\}", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<Answer>\s*([A-E])", re.IGNORECASE)
_OPTION_LINE = re.compile(r"^([A-E])\.\s*(.+)$", re.IGNORECASE | re.MULTILINE)
# Stage 6: IGNORECASE makes the `[A-Z]` look-ahead accept lower-case words too.
_LETTER_BEFORE_WORD = re.compile(r"(?:^|\n|\s)([A-E])\s+(?=[A-Z]|$|\n)", re.IGNORECASE | re.MULTILINE)
_STANDALONE = re.compile(r"\b([A-E])\b")
_STANDALONE_ANY_CASE = re.compile(r"\b([A-E])\b", re.IGNORECASE)

# Stage 7 text clean-up (the official `process_punctuation`, from a VQA normaliser).
_PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_DIGIT_COMMA_DIGIT = re.compile(r"(\d)(,)(\d)")
_PERIOD = re.compile(r"\.(?!\d)")
# The official `period_strip.sub("", output, re.UNICODE)` passes re.UNICODE (32) as `count`: 32 periods at most.
_PERIOD_LIMIT = int(re.UNICODE)


def _last(matches: Sequence[str]) -> str | None:
    return matches[-1].upper() if matches else None


def _strip_punctuation(text: str) -> str:
    """Official `process_punctuation`: each mark deleted if it touches a space anywhere in the original text (or
    the text has a digit,digit comma), else replaced by a space; then up to 32 periods not before a digit deleted."""
    output = text
    has_number_comma = _DIGIT_COMMA_DIGIT.search(text) is not None
    for mark in _PUNCTUATION:
        output = output.replace(mark, "" if mark + " " in text or " " + mark in text or has_number_comma else " ")
    return _PERIOD.sub("", output, count=_PERIOD_LIMIT)


def extract_mcq_answer(response: str | None) -> str | None:
    """The option letter (A-E) `calculate_scores.py::extract_mcq_answer` reads, or None: its stages, quirks included."""
    if not response:
        return None
    # 1. `\\boxed{X}`; 2. `<Answer>`, optional whitespace, the letter (`[X]` fails): first occurrence
    for pattern in (_BOXED, _ANSWER_TAG):
        match = pattern.search(response)
        if match:
            return match.group(1).upper()
    letter = (
        _last([letter for letter, _rest in _OPTION_LINE.findall(response.strip())])  # 3. the last line `X. text`
        or _last([found for pattern in _KEYWORD_PATTERNS for found in pattern.findall(response)])  # 4. keywords
        # 5. `X.`, then `X)`, then `X:` anywhere, any case (so "the house." gives E): the first style found decides
        or next((_last(found) for found in (pattern.findall(response) for pattern in _LABEL_PATTERNS) if found), None)
        or _last(_LETTER_BEFORE_WORD.findall(response))  # 6. a letter between whitespace and a letter, or the end
    )
    if letter:
        return letter
    # 7. Punctuation stripped, lower-cased: the last standalone a-e.
    cleaned = _strip_punctuation(response.replace("\n", " ").replace("\t", " ").strip())
    letter = _last(_STANDALONE_ANY_CASE.findall(cleaned.strip("'").strip('"').strip(")").strip("(").strip().lower()))
    if letter or not _STANDALONE.findall(response):
        return letter
    # 8. A standalone capital A-E: the last one in the final 50 characters (any case there), else the last one anywhere.
    return _last(_STANDALONE_ANY_CASE.findall(response.lower()[-50:])) or _last(_STANDALONE.findall(response))


def mcq_correct(response: str | None, answer: str) -> bool:
    """MCQ-O: the extracted letter is the gold one; lmms-eval's failure placeholder is wrong unread (its text has letters)."""
    return not is_model_failure(response) and extract_mcq_answer(response) == answer


# --- OE-P: the four judge tags and their weights
# batch_evaluation_api_mp_time_async.py: 0.4 / 0.4 / 0.1 / 0.1, in this tag order.
TAGS = {UNIQUE: ("step_matching", "logical_consistency", "factual_accuracy", "process_clarity"),
        NON_UNIQUE: ("relevance", "logical_consistency", "factual_accuracy", "clarity")}
WEIGHTS = (0.4, 0.4, 0.1, 0.1)

# The official `extract_numbers` pattern (int, float, signed).
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


def _tag_number(content: str) -> float | None:
    """Official value rule: `float(content)`, else the first number in it, else None."""
    content = content.strip()
    try:
        return float(content)
    except ValueError:
        numbers = _NUMBER.findall(content)
        return float(numbers[0]) if numbers else None


def parse_tags(reply: str, kind: str) -> tuple[float, ...]:
    """Default protocol: the four 0-10 ratings in weight order (each tag's last occurrence); ParseError if one is missing or out of range."""
    values = []
    for tag in TAGS[kind]:
        content = extract_tag(reply, tag)
        if content is None:
            raise ParseError(f"judge reply has no <{tag}> tag")
        value = _tag_number(content)
        if value is None or not 0 <= value <= 10:
            raise ParseError(f"<{tag}> holds {content!r}, not a rating from 0 to 10")
        values.append(value)
    return tuple(values)


def official_tag_values(reply: str, kind: str) -> tuple[float | None, ...]:
    """Official tag reading: the first `<tag>...</tag>` on one line (`re.search`, no DOTALL), its number or None."""
    values = []
    for tag in TAGS[kind]:
        match = re.search(rf"<{tag}>(.*?)</{tag}>", reply or "")
        values.append(_tag_number(match.group(1)) if match else None)
    return tuple(values)


def process_score(ratings: Sequence[float | None]) -> float:
    """Process score of one question: the weighted sum of its four 0-10 ratings; officially a missing one (None) scores 0
    (a tag without a number, which crashes the official script, too)."""
    return sum(weight * (0.0 if value is None else value) for weight, value in zip(WEIGHTS, ratings, strict=True))


def official_response(response: str) -> str:
    """The response as the official judge sees it: `str.strip('Assistant:')` strips the characters A s i t a n : from both ends."""
    return response.strip("Assistant:")  # noqa: B005, PLE1310 - the official quirk, on purpose


# --- Aggregation
@dataclass(frozen=True)
class QuestionScore:
    """Everything aggregation needs about one question: MCQ-O `correct`, `rated` by the protocol, its `process` score."""

    reasoning_type: str
    correct: bool
    rated: bool
    process: float | None  # None = not rated, judge or model failure, or no judge
    judge_failed: bool
    model_failed: bool = False  # lmms-eval's placeholder instead of an answer: wrong, never judged


def combine_type(mcq: float, oe: float, protocol: str, has_oe: bool) -> float:
    """A type's score from its MCQ accuracy and OE-P. default: their mean when the type is rated, the MCQ
    accuracy alone for types without steps (synopsis). official (`calculate_combined_scores`): the mean
    when both are > 0, else whichever is > 0, else 0."""
    if protocol == "official" and not (mcq > 0 and oe > 0):
        return mcq if mcq > 0 else (oe if oe > 0 else 0.0)
    return (mcq + oe) / 2 if has_oe or protocol == "official" else mcq


def score_columns(scores: Sequence[QuestionScore], protocol: str) -> dict[str, np.ndarray]:
    """Each metric's per-question columns, per reasoning type too. The process score counts where the judge rated,
    or officially (`calculate_openqa_scores`) for every question, 0 if unrated or failed."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown VRBench protocol {protocol!r}; use one of {PROTOCOLS}")
    correct = column(s.correct for s in scores)
    rated = column(s.rated for s in scores)
    if protocol == "official":
        process_sum, process_n = column(0.0 if s.process is None else s.process for s in scores), np.ones(len(scores))
    else:
        process_n = rated * column(s.process is not None for s in scores)
        process_sum = process_n * column(0.0 if s.process is None else s.process for s in scores)
    failed, failed_model = column(s.judge_failed for s in scores), column(s.model_failed for s in scores)
    out = {"questions": np.ones(len(scores)), "correct": correct, "process_sum": process_sum, "process_n": process_n,
           "judge_failed": failed, "model_failed": failed_model}
    kinds = [TYPE_METRIC[s.reasoning_type.strip()] for s in scores]
    for name in TYPE_NAMES:
        member = column(kind == name for kind in kinds)
        out.update({f"n:{name}": member, f"correct:{name}": member * correct, f"rated:{name}": member * rated,
                    f"process_sum:{name}": member * process_sum, f"process_n:{name}": member * process_n})
    out["needed"] = rated * (1.0 - failed_model)
    out["needed_failed"] = out["needed"] * failed
    return out


def metrics_from_totals(totals: Totals, protocol: str, with_judge: bool, judge_ran: bool = True, withhold: bool = False,
                        limit: float | None = None) -> dict[str, np.ndarray]:
    """All metrics from the sums of `score_columns`: MCQ-O, OE-P, overall, each type; MCQ-only unless `with_judge`. The
    judge-based values are NaN, never 0, when no judge ran, and past the failure share when `withhold` (a whole run)."""
    withheld = np.zeros(len(totals["questions"]), dtype=bool)
    if withhold and with_judge and judge_ran:
        withheld = failure_share.withheld(totals["needed_failed"], totals["needed"], limit)
    ran = judge_ran & ~withheld
    metrics = {"mcq_accuracy": 100 * ratio(totals["correct"], totals["questions"]), "model_failed": totals["model_failed"]}
    if not with_judge:
        for name in TYPE_NAMES:
            metrics[f"type_{name}"] = 100 * ratio(totals[f"correct:{name}"], totals[f"n:{name}"])
        return metrics
    metrics["process_score"] = np.where(ran, 10 * ratio(totals["process_sum"], totals["process_n"]), np.nan)
    metrics["overall"] = (metrics["mcq_accuracy"] + metrics["process_score"]) / 2
    for name in TYPE_NAMES:
        mcq = 100 * ratio(totals[f"correct:{name}"], totals[f"n:{name}"])
        oe = 10 * ratio(totals[f"process_sum:{name}"], totals[f"process_n:{name}"])
        has_oe = totals[f"rated:{name}"] > 0
        combined = rowwise(lambda m, o, h: combine_type(m, o, protocol, bool(h)), mcq, oe, has_oe)
        metrics[f"type_{name}"] = np.where((totals[f"n:{name}"] == 0) | (has_oe & ~ran), np.nan, combined)
    metrics["judge_failed"] = np.where(withheld, totals["needed_failed"], np.where(ran, totals["judge_failed"], np.nan))
    return metrics
