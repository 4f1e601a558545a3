"""VCR-Bench scoring: judge-reply parsers, grounding IoU and the metric arithmetic.

Small pure functions; each cites the rule it implements in the VCR-Bench protocol: the official
evaluation code (zhishuifeiqian/VCR-Bench `eval_code/`, commit 4e564b7) and the paper (the
folder's README.md, "How scoring runs", summarises them and lists where this suite differs). Nothing here calls a judge: `judging.py` does, and hands the
parsed replies to these functions.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lmms_video_reasoning.judges.parsing import (
    ParseError,
    extract_digit,
    extract_json,
    normalize_label,
)
from lmms_video_reasoning.utils.core import options, settings
from lmms_video_reasoning.utils.core.columns import SampleColumns, Totals, column, point, ratio, rowwise

log = logging.getLogger(__name__)

PERCEPTION = "Video Description Steps"
REASONING = "Logical Inference Steps"
BACKGROUND = "Background Review Steps"
STEP_TYPES = (PERCEPTION, REASONING, BACKGROUND)
# Spellings judges use for the same type (the prompt names them with and without "Steps").
STEP_TYPE_ALIASES = {
    "Video Description": PERCEPTION, "Video Description Step": PERCEPTION, "Perception": PERCEPTION,
    "Logical Inference": REASONING, "Logical Inference Step": REASONING, "Reasoning": REASONING,
    "Background Review": BACKGROUND, "Background Review Step": BACKGROUND, "Background": BACKGROUND,
}
# The precision prompt lists "Match" in its categories but "Matched" in its format: same verdict.
RECALL_LABELS = ("Matched", "Unmatched")
RECALL_ALIASES = {"Match": "Matched", "Unmatch": "Unmatched", "Not Matched": "Unmatched", "Mismatched": "Unmatched"}
PRECISION_LABELS = ("Matched", "Wrong", "Redundant")
PRECISION_ALIASES = {"Match": "Matched", "Incorrect": "Wrong", "Unmatched": "Wrong"}

# Grounding answers are judged by IoU when both sides parse (README.md, "How scoring runs" 2).
VTG_IOU_THRESHOLD = 0.7  # time IoU must exceed this
TSG_IOU_THRESHOLD = 0.5  # box IoU must exceed this

COT_KINDS = ("perception", "reasoning", "overall")
_KIND_TYPES = {"perception": (PERCEPTION,), "reasoning": (REASONING,)}

# A response that is only an option letter ("B", "(B)", "B.", "Answer: B"): official issue #2.
_BARE_LETTER = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?(?:answer\s*(?:is)?\s*[:：]?\s*)?[(\[]?\s*[A-I]\s*[)\].]?\s*$", re.IGNORECASE)


# ---------------------------------------------------------------- judge replies


def parse_extraction(reply: str) -> str:
    """Judge call 1: the extracted answer is the reply exactly as given (the official code stores
    it unstripped, and its IoU rule is whitespace-sensitive: " [1,2,3,4]" is not a box);
    a blank reply -> re-ask."""
    if not isinstance(reply, str) or not reply.strip():
        raise ParseError("empty answer-extraction reply")
    return reply


@dataclass(frozen=True)
class VerdictReading:
    """A scoring-judge reply read two ways: `exact` (official: correct iff the reply is exactly
    "1", `cau_acc.py`) and `lenient` (the first standalone 0/1 in it; None when there is none)."""

    exact: bool
    lenient: bool | None

    def correct(self, lenient: bool) -> bool:
        return self.lenient if lenient and self.lenient is not None else self.exact


def parse_verdict(reply: str, lenient: bool = False) -> VerdictReading:
    """Judge call 2: "1" consistent / "0" not.

    Official (default): correct iff the stored reply is exactly "1" ("1.", "**1**",
    "Output: 1" and "1\n" are wrong); never re-asked. `lenient`: the first standalone 0 or 1;
    a reply with none is re-asked (ParseError). Both readings are kept, so a run can count how
    many verdicts the lenient reading changes.
    """
    reply = reply if isinstance(reply, str) else ""
    try:
        lenient_value: bool | None = extract_digit(reply, "01") == 1
    except ParseError:
        if lenient:
            raise
        lenient_value = None
    return VerdictReading(reply == "1", lenient_value)


def _judged_steps(reply: str, labels: Sequence[str], aliases: dict) -> list[dict]:
    """[{"type", "judgment"}] from a fenced or bare JSON array of step objects."""
    items = extract_json(reply, expect=list)
    steps = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise ParseError(f"step {number} is not a JSON object: {item!r}")
        step_type = item.get("step_type", item.get("type"))
        judgment = item.get("judgment", item.get("judgement"))
        if step_type is None or judgment is None:
            raise ParseError(f"step {number} lacks step_type or judgment: {sorted(item)}")
        steps.append({
            "type": normalize_label(step_type, STEP_TYPES, STEP_TYPE_ALIASES),
            "judgment": normalize_label(judgment, labels, aliases),
        })
    return steps


def parse_recall(reply: str) -> list[dict]:
    """Judge call 3: each reference step typed and labelled Matched / Unmatched."""
    return _judged_steps(reply, RECALL_LABELS, RECALL_ALIASES)


def parse_precision(reply: str) -> list[dict]:
    """Judge call 4: each response step typed and labelled Matched / Wrong / Redundant."""
    return _judged_steps(reply, PRECISION_LABELS, PRECISION_ALIASES)


# ---------------------------------------------------------------- grounding by IoU


def parse_interval(text: str) -> tuple[float, float] | None:
    """A time answer as the official `is_valid_time_interval` accepts it: the whole text is a
    Python literal (`ast.literal_eval`) list of two int/float/bool values ("[13, 54]",
    "[.5, 20.]", "[2e0, 1e999]"); else None. Errors other than ValueError/SyntaxError escape
    (the official `match_answer` then scores the sample 0; see `grounding_verdict`)."""
    if not isinstance(text, str):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        return value[0], value[1]
    return None


def parse_box(text: str) -> tuple[int, int, int, int] | None:
    """A box answer as the official `is_valid_space_interval` accepts it: the text starts with
    "[" and ends with "]" (no surrounding space), and its four comma-separated parts are
    Python `int()` spellings ("+5", " 7 ", "1_000"; not "10.5"); else None."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    parts = text[1:-1].split(",")
    if len(parts) != 4:
        return None
    try:
        return tuple(int(part.strip()) for part in parts)
    except ValueError:
        return None


def time_iou(gt: Sequence[float], pred: Sequence[float], ordered: bool = True) -> float:
    """The official `calculate_time_iou`: overlap / hull span of two intervals; 0 when the span
    is 0. `ordered` reads a reversed interval [end, start] as [start, end] (officially its
    bounds are used as given)."""
    if ordered:
        gt, pred = _ordered_pair(gt), _ordered_pair(pred)
    (s1, e1), (s2, e2) = gt, pred
    intersection = max(0, min(e1, e2) - max(s1, s2))
    union = max(e1, e2) - min(s1, s2)
    return 0 if union == 0 else intersection / union


def _ordered_pair(pair: Sequence[float]) -> tuple:
    return (pair[1], pair[0]) if pair[1] < pair[0] else (pair[0], pair[1])


def box_iou(a: Sequence[float], b: Sequence[float], ordered: bool = True) -> float:
    """The official `calculate_space_iou` of boxes [x1, y1, x2, y2]: 0.0 when they do not
    overlap; ZeroDivisionError when the union is 0 (officially the sample then scores 0).
    `ordered` reads corners given in either order (officially they are used as given)."""
    if ordered:
        a, b = _ordered_box(a), _ordered_box(b)
    ix1, iy1, ix2, iy2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    if ix2 < ix1 or iy2 < iy1:
        return 0.0
    inter = (ix2 - ix1) * (iy2 - iy1)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def _ordered_box(box: Sequence[float]) -> tuple:
    (x1, x2), (y1, y2) = sorted((box[0], box[2])), sorted((box[1], box[3]))
    return x1, y1, x2, y2


def grounding_verdict(gt_answer: str, extracted: str, official_reversed: bool = False) -> tuple[bool, float | None] | None:
    """(correct, IoU) by the official IoU rule, or None (the scoring judge decides).

    As `match_answer`, decided by the answers' shape in any dimension: both parse as time
    intervals -> correct iff time IoU > 0.7; else both parse as integer boxes -> box IoU > 0.5.
    Where the official code raises inside this rule (a zero-area union, a literal nested too
    deeply, a non-text answer) the sample scores 0: (False, None), with a warning naming the error. Reversed bounds are read in
    order unless `official_reversed` (README.md, "How scoring runs" 2; README differences).
    """
    ordered = not official_reversed
    try:
        gt, pred = parse_interval(gt_answer), None
        if gt is not None:
            pred = parse_interval(extracted)
        if gt is not None and pred is not None:
            iou = time_iou(gt, pred, ordered)
            return iou > VTG_IOU_THRESHOLD, iou
        gt_box = parse_box(gt_answer)
        pred_box = parse_box(extracted) if gt_box is not None else None
        if gt_box is not None and pred_box is not None:
            iou = box_iou(gt_box, pred_box, ordered)
            return iou > TSG_IOU_THRESHOLD, iou
    except (ArithmeticError, RecursionError, MemoryError, TypeError, AttributeError) as error:
        # `match_answer` catches these and stores 0 (wrong); said, never swallowed silently
        log.warning("VCR-Bench: the official IoU rule raised %s: %s on answer %.80r (reference %.80r); scored 0 as officially",
                    type(error).__name__, error, extracted, gt_answer)
        return False, None
    return None


# ---------------------------------------------------------------- official issue #2


def is_bare_answer(response: str) -> bool:
    """True when the response is only an option letter (no reasoning to split into steps).

    Official issue #2: given such a response, the precision judge splits the *reference*
    steps instead and precision is inflated. Such a response is one step, the final answer.
    """
    return bool(_BARE_LETTER.match(response or ""))


def bare_answer_steps(correct: bool) -> list[dict]:
    """Precision steps of a bare answer: one final-answer step, a logical inference (per the
    precision prompt, "Final answer determination counts as logical inference"), Matched iff
    the answer is correct."""
    return [{"type": REASONING, "judgment": "Matched" if correct else "Wrong"}]


# ---------------------------------------------------------------- per-sample ratios


def _types_for(kind: str, include_background: bool) -> tuple[str, ...]:
    if kind in _KIND_TYPES:
        return _KIND_TYPES[kind]
    return STEP_TYPES if include_background else (PERCEPTION, REASONING)


def recall_ratios(steps: Iterable[dict], include_background: bool = False) -> dict[str, float | None]:
    """Per kind: Matched / reference steps of that type; None when the sample has none.

    Overall leaves Background Review steps out unless `include_background` (README.md, "How scoring runs").
    """
    steps = list(steps)
    out = {}
    for kind in COT_KINDS:
        of_kind = [s for s in steps if s["type"] in _types_for(kind, include_background)]
        out[kind] = sum(s["judgment"] == "Matched" for s in of_kind) / len(of_kind) if of_kind else None
    return out


def precision_ratios(steps: Iterable[dict], include_background: bool = False) -> dict[str, float | None]:
    """Per kind: Matched / (Matched + Wrong) over response steps (Redundant ignored); None if 0/0."""
    steps = list(steps)
    out = {}
    for kind in COT_KINDS:
        judged = [s["judgment"] for s in steps if s["type"] in _types_for(kind, include_background) and s["judgment"] != "Redundant"]
        out[kind] = judged.count("Matched") / len(judged) if judged else None
    return out


# ---------------------------------------------------------------- aggregation
#
# Each metric is defined once, over per-sample columns (`utils/core/columns.py`): a run's value is
# the aggregate of the run's sums, a bootstrap resample's the aggregate of the resample's sums.


def f1(precision: float, recall: float) -> float:
    """CoT score: 2PR / (P + R) of the *averaged* P and R; 0 when both are 0; NaN if either is."""
    if math.isnan(precision) or math.isnan(recall):
        return math.nan
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


DIMENSION_CODES = ("ftr", "vtc", "vtg", "vkr", "tsr", "vpa", "tsg")
DURATION_BUCKETS = ("short", "medium", "long")
ACCURACY_METRICS = (
    "accuracy",
    *(f"accuracy_{code}" for code in DIMENSION_CODES),
    *(f"accuracy_{bucket}" for bucket in DURATION_BUCKETS),
    "accuracy_mc",
    "accuracy_open",
)
_COT_PREFIX = {"perception": "perception", "reasoning": "reasoning", "overall": "cot"}
COT_METRICS = tuple(f"{_COT_PREFIX[kind]}_{part}" for kind in COT_KINDS for part in ("recall", "precision", "f1"))
# Counts, lower is better: samples with a failed judge call or record / with no model answer /
# whose reply ended inside an open reasoning block.
COUNT_METRICS = ("judge_failed", "model_failed", "reasoning_truncated")
METRICS = ACCURACY_METRICS + COT_METRICS + COUNT_METRICS


def accuracy_columns(records: Sequence[dict], verdicts: Sequence[bool | None]) -> dict[str, np.ndarray]:
    """Micro accuracy overall, per dimension, per duration bucket, multiple choice vs open, per
    sample: `n:<metric>` (the sample is in the group) and `right:<metric>` (and its verdict is
    correct; a sample without a verdict, failed, counts as wrong)."""
    groups = {
        "accuracy": lambda r: True,
        **{f"accuracy_{code}": (lambda r, c=code: r["dimension_code"] == c) for code in DIMENSION_CODES},
        **{f"accuracy_{bucket}": (lambda r, b=bucket: r["duration_bucket"] == b) for bucket in DURATION_BUCKETS},
        "accuracy_mc": lambda r: bool(r["multiple_choice"]),
        "accuracy_open": lambda r: not r["multiple_choice"],
    }
    correct = column(verdict is True for verdict in verdicts)
    out = {}
    for name, member in groups.items():
        out[f"n:{name}"] = column(map(member, records))
        out[f"right:{name}"] = out[f"n:{name}"] * correct
    return out


def accuracy_from_totals(totals: Totals) -> dict[str, np.ndarray]:
    """Each group's accuracy in percent: its right answers over its samples; NaN for an empty group."""
    return {name: ratio(100.0 * totals[f"right:{name}"], totals[f"n:{name}"]) for name in ACCURACY_METRICS}


def cot_columns(recall_steps: Sequence[list | None], precision_steps: Sequence[list | None],
                include_background: bool = False) -> dict[str, np.ndarray]:
    """Per sample and kind, its recall and precision ratio (`recall_ratios`, `precision_ratios`)
    where it is defined (`<side>_sum:<kind>`) and whether it is (`<side>_n:<kind>`): a sample whose
    judgement failed (None), or whose ratio is 0/0, is left out of that mean only."""
    out = {}
    for side, all_steps, ratios_of in (("recall", recall_steps, recall_ratios), ("precision", precision_steps, precision_ratios)):
        ratios = [None if steps is None else ratios_of(steps, include_background) for steps in all_steps]
        for kind in COT_KINDS:
            values = [None if r is None else r[kind] for r in ratios]
            out[f"{side}_sum:{kind}"] = column(0.0 if v is None else v for v in values)
            out[f"{side}_n:{kind}"] = column(v is not None for v in values)
    return out


def cot_from_totals(totals: Totals) -> dict[str, np.ndarray]:
    """Recall and precision per kind (the mean over the samples where each is defined) and F1 of
    those means, in percent."""
    out = {}
    for kind in COT_KINDS:
        r = ratio(totals[f"recall_sum:{kind}"], totals[f"recall_n:{kind}"])
        p = ratio(totals[f"precision_sum:{kind}"], totals[f"precision_n:{kind}"])
        prefix = _COT_PREFIX[kind]
        out[f"{prefix}_recall"], out[f"{prefix}_precision"], out[f"{prefix}_f1"] = r * 100.0, p * 100.0, rowwise(f1, p, r) * 100.0
    return out


def cot_metrics(recall_steps: Sequence[list | None], precision_steps: Sequence[list | None], include_background: bool = False) -> dict[str, float]:
    """The CoT metrics of these samples (`cot_columns` summed, `cot_from_totals`)."""
    return point(SampleColumns(cot_columns(recall_steps, precision_steps, include_background), lambda totals, _whole: cot_from_totals(totals)))


# ---------------------------------------------------------------- paper Table 10


def fully_correct_cot(recall_steps: Sequence[dict] | None, precision_steps: Sequence[dict] | None,
                      include_background: bool = False) -> bool | None:
    """The paper's "full CoT score" (appendix, Table 10) of one sample: its overall recall and
    precision are both 1 (every reference step Matched, no response step Wrong; Redundant steps
    do not count, as in precision). A ratio the sample does not define (no steps of the kind)
    is not a full score. None when either CoT judgment is missing (failed or not run)."""
    if recall_steps is None or precision_steps is None:
        return None
    recall = recall_ratios(recall_steps, include_background)["overall"]
    precision = precision_ratios(precision_steps, include_background)["overall"]
    return recall == 1 and precision == 1


@dataclass(frozen=True)
class FullCotShare:
    """Paper Table 10: of the correctly answered questions, the share (0-100) with a fully correct
    CoT (`fully_correct_cot`). `correct` counts the correct answers with both CoT judgments
    (the denominator), `full` those with a full CoT score, `unjudged` the correct answers left
    out because a CoT judgment is missing. `share` is NaN when `correct` is 0."""

    share: float
    full: int
    correct: int
    unjudged: int


def full_cot_share(outcomes: Sequence[dict], include_background: bool = False) -> FullCotShare:
    """`FullCotShare` of a run's per-sample outcomes (`correct`, `recall_steps`, `precision_steps`)."""
    judged = [fully_correct_cot(o["recall_steps"], o["precision_steps"], include_background) for o in outcomes if o["correct"] is True]
    full = sum(j is True for j in judged)
    correct = sum(j is not None for j in judged)
    return FullCotShare(100.0 * full / correct if correct else math.nan, full, correct, len(judged) - correct)


# ---------------------------------------------------------------- scoring settings

# The tasks' scoring options (a task chooses them; its records carry them).
INCLUDE_BACKGROUND = options.Option("include_background", "bool", False, "overall CoT counts Background Review "
                                    "steps (paper-era code)")
LENIENT_VERDICT = options.Option("lenient_verdict", "bool", False, "the scoring judge's first standalone 0/1 "
                                 "decides instead of the exact reply '1'")
OFFICIAL_REVERSED = options.Option("official_reversed", "bool", False, "reversed intervals / boxes enter the IoU "
                                   "rule as given, as officially")
OPTIONS = (INCLUDE_BACKGROUND, LENIENT_VERDICT, OFFICIAL_REVERSED)
# The suite's variables overriding them (`settings.variable`; not exported with the options).
VARIABLES = (settings.variable("VCR_BENCH_INCLUDE_BACKGROUND", INCLUDE_BACKGROUND),
             settings.variable("VCR_BENCH_LENIENT_VERDICT", LENIENT_VERDICT),
             settings.variable("VCR_BENCH_OFFICIAL_REVERSED", OFFICIAL_REVERSED))


def resolve_settings(settings: dict | None = None) -> dict:
    """The scoring settings (`OPTIONS`): those given (a task's, as its records carry them), the
    defaults for the others, other keys kept; None (a caller with no task's): `options.values`."""
    if settings is None:
        return options.values(OPTIONS)
    return {**{option.option: option.default for option in OPTIONS}, **settings}
