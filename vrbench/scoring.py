"""VRBench scoring: MCQ letter extraction, judge-tag parsing, per-question and per-task metrics.

Each function cites the official code it follows (OpenGVLab/VRBench, commit 47a22db):
`evaluation/calculate_scores.py` (MCQ-O, per-type combination) and
`evaluation/batch_evaluation_api_mp_time_async.py` (OE-P tags and weights). Two protocols:

- `default`: failures are visible. A missing tag or failed judge call is a judge failure,
  excluded from OE-P and counted in `judge_failed`; a model failure (lmms-eval's placeholder
  instead of an answer) is wrong for MCQ-O, never judged, excluded from OE-P the same way and
  counted in `model_failed`; counting questions are rated with the
  unique-answer prompt; synopsis questions (no steps) are left out of OE-P; a type's score is
  the mean of its MCQ accuracy and its OE-P (MCQ only for synopsis).
- `official`: the official numbers. Missing tags score 0, counting and synopsis questions are
  never rated yet count as 0 in OE-P, and a type's score uses the official "use whichever is
  above zero" combination. A model failure is not judged either and counts as 0 in OE-P
  (the official script would have rated the failure text; 0 is what an empty answer gets).
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
# Spelling in the data -> metric suffix. The data spells counting "Counting Porblems"; both
# spellings are accepted. "Multi-element Inference" is named by the official judge code
# (unique-answer prompt) but is not one of the paper's seven types: no per-type metric.
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
    """Which judge prompt rates this type: `unique`, `non_unique`, or None (not rated: synopsis; counting
    in the official protocol, which rates only the judge's two lists)."""
    name = reasoning_type.strip()
    if name in OFFICIAL_NON_UNIQUE:
        return NON_UNIQUE
    if name in OFFICIAL_UNIQUE or (protocol == "default" and name in COUNTING):
        return UNIQUE
    return None


# --- MCQ-O
def extract_mcq_answer(response: str | None) -> str | None:
    """The option letter (A-E) the official 8-stage cascade (`calculate_scores.py::extract_mcq_answer`,
    quirks included) reads from a response, or None: lmms-eval's port in its `vrbench` task folder,
    which agrees with the official code on every row of tests/differential (imported when first
    needed: it loads lmms-eval's task registry)."""
    from lmms_eval.tasks.vrbench.utils import extract_mcq_answer as ported

    return ported(response)


def mcq_correct(response: str | None, answer: str) -> bool:
    """MCQ-O per question: the extracted letter equals the gold letter (unextractable = wrong). lmms-eval's
    failure placeholder is wrong unread: the cascade would find a letter in the error text (e.g. an "e")."""
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
    """Default protocol: the four 0-10 ratings of a judge reply, in weight order, each tag's last occurrence
    read with the official number rule. A missing tag or a value outside 0-10 raises ParseError (the
    judge is re-asked, then the question is a judge failure)."""
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
    """Official tag reading: the first `<tag>...</tag>` on one line (`re.search`, no DOTALL)
    and its number; None where the tag (or a number in it) is missing."""
    values = []
    for tag in TAGS[kind]:
        match = re.search(rf"<{tag}>(.*?)</{tag}>", reply or "")
        values.append(_tag_number(match.group(1)) if match else None)
    return tuple(values)


def parse_tags_official(reply: str, kind: str) -> tuple[float, ...]:
    """Official protocol ratings: a missing tag scores 0. (A tag without a number crashes
    the official script; here it scores 0 too.)"""
    return tuple(0.0 if value is None else value for value in official_tag_values(reply, kind))


def process_score(ratings: Sequence[float]) -> float:
    """Process score of one question: the weighted sum of its four 0-10 ratings."""
    return sum(weight * value for weight, value in zip(WEIGHTS, ratings, strict=True))


def official_response(response: str) -> str:
    """The response as the official judge sees it: `str.strip('Assistant:')`, which strips
    the characters A s i t a n : from both ends (not the prefix "Assistant:")."""
    return response.strip("Assistant:")  # noqa: B005, PLE1310 - the official quirk, on purpose


# --- Aggregation
@dataclass(frozen=True)
class QuestionScore:
    """Everything aggregation needs about one question."""

    reasoning_type: str  # as spelled in the data
    correct: bool  # MCQ-O
    rated: bool  # the protocol sends this question to the judge
    process: float | None  # 0-10 weighted sum; None = not rated, judge or model failure, or no judge
    judge_failed: bool
    model_failed: bool = False  # lmms-eval's placeholder instead of an answer: wrong, never judged


def combine_type(mcq: float, oe: float, protocol: str, has_oe: bool) -> float:
    """A type's score from its MCQ accuracy and OE-P. default: their mean when the type is rated, the MCQ
    accuracy alone for types without steps (synopsis). official (`calculate_combined_scores`): the mean
    when both are > 0, else whichever is > 0, else 0."""
    if protocol == "official":
        if mcq > 0 and oe > 0:
            return (mcq + oe) / 2
        return mcq if mcq > 0 else (oe if oe > 0 else 0.0)
    if not has_oe:
        return mcq
    return (mcq + oe) / 2


def score_columns(scores: Sequence[QuestionScore], protocol: str) -> dict[str, np.ndarray]:
    """Each metric's per-question numbers (`utils/core/columns.py`): MCQ-O right or not; the process
    score where OE-P counts it (default: the rated questions the judge scored; official
    (`calculate_openqa_scores`): every question, unrated types and failures as 0); the failure
    flags, per reasoning type too; and the failure share's counts (`needed`: a rating was needed,
    `needed_failed`: and it failed)."""
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
    """All metrics of a task from the sums of `score_columns` (one value per row): MCQ-O (x 100),
    OE-P (mean process score x 10), overall (their mean) and each type (`combine_type`).
    `with_judge`: False gives the MCQ-only metrics (vr_bench_mcq). `judge_ran`: False when no judge is
    configured; then every judge-based value is NaN (not computed), never 0. `withhold`: past the judge
    failure share (`judges.failure_share`, decided on a whole run) those are not computed either and
    `judge_failed` counts the failed ratings. `model_failed` is counted in every task."""
    withheld = np.zeros(len(totals["questions"]), dtype=bool)
    if withhold and with_judge and judge_ran:
        withheld = np.array([failure_share.too_many_failed(f, int(n), limit) for f, n in zip(totals["needed_failed"], totals["needed"])], dtype=bool)
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
