"""VCR-Bench scoring: judge-reply parsers, grounding IoU and the metric arithmetic, as pure functions, each
citing the rule it implements: the official evaluation code (zhishuifeiqian/VCR-Bench `eval_code/`, commit
4e564b7) or the paper (README.md, "How scoring runs", lists where this suite differs)."""

from __future__ import annotations

import ast
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.utils.core import columns, options, settings

log = logging.getLogger(__name__)

PERCEPTION, REASONING, BACKGROUND = "Video Description Steps", "Logical Inference Steps", "Background Review Steps"
STEP_TYPES = (PERCEPTION, REASONING, BACKGROUND)
# Spellings judges use for the same type (the prompt names them with and without "Steps").
STEP_TYPE_ALIASES = {
    **dict.fromkeys(("Video Description", "Video Description Step", "Perception"), PERCEPTION),
    **dict.fromkeys(("Logical Inference", "Logical Inference Step", "Reasoning"), REASONING),
    **dict.fromkeys(("Background Review", "Background Review Step", "Background"), BACKGROUND)}
# The precision prompt lists "Match" in its categories but "Matched" in its format: same verdict.
RECALL_ALIASES = {"Match": "Matched", "Unmatch": "Unmatched", "Not Matched": "Unmatched", "Mismatched": "Unmatched"}
PRECISION_ALIASES = {"Match": "Matched", "Incorrect": "Wrong", "Unmatched": "Wrong"}
# The seven dimensions (paper Sec. 2.1.1) and the codes that name their metrics.
DIMENSIONS = {"Fundamental Temporal Reasoning": "ftr", "Video Temporal Counting": "vtc", "Video Temporal Grounding": "vtg",
              "Video Knowledge Reasoning": "vkr", "Temporal Spatial Reasoning": "tsr", "Video Plot Analysis": "vpa",
              "Temporal Spatial Grounding": "tsg"}
COT_KINDS = ("perception", "reasoning", "overall")
# A response that is only an option letter ("B", "(B)", "B.", "Answer: B"): official issue #2.
_BARE_LETTER = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?(?:answer\s*(?:is)?\s*[:：]?\s*)?[(\[]?\s*[A-I]\s*[)\].]?\s*$", re.IGNORECASE)


def parse_extraction(reply: str) -> str:
    """Judge call 1: the extracted answer, unstripped as officially (" [1,2,3,4]" is no box); blank: re-asked."""
    if not isinstance(reply, str) or not reply.strip():
        raise parsing.ParseError("empty answer-extraction reply")
    return reply


@dataclass(frozen=True)
class VerdictReading:
    """A scoring-judge reply read two ways: `exact` (official, `cau_acc.py`: correct iff the reply is
    exactly "1") and `lenient` (the first standalone 0/1 in it; None when there is none)."""

    exact: bool
    lenient: bool | None

    def correct(self, lenient: bool) -> bool:
        return self.lenient if lenient and self.lenient is not None else self.exact


def parse_verdict(reply: str, lenient: bool = False) -> VerdictReading:
    """Judge call 2, "1" consistent / "0" not, read both ways; re-asked only if `lenient` and without a standalone 0/1."""
    try:
        lenient_value: bool | None = parsing.extract_digit(reply, "01") == 1
    except parsing.ParseError:
        if lenient:
            raise
        lenient_value = None
    return VerdictReading(reply == "1", lenient_value)


def _judged_steps(reply: str, labels: Sequence[str], aliases: dict) -> list[dict]:
    """[{"type", "judgment"}] from a fenced or bare JSON array of step objects."""
    steps = []
    for number, item in enumerate(parsing.extract_json(reply, expect=list), 1):
        if not isinstance(item, dict):
            raise parsing.ParseError(f"step {number} is not a JSON object: {item!r}")
        step_type, judgment = item.get("step_type", item.get("type")), item.get("judgment", item.get("judgement"))
        if step_type is None or judgment is None:
            raise parsing.ParseError(f"step {number} lacks step_type or judgment: {sorted(item)}")
        steps.append({"type": parsing.normalize_label(step_type, STEP_TYPES, STEP_TYPE_ALIASES), "judgment": parsing.normalize_label(judgment, labels, aliases)})
    return steps


def parse_recall(reply: str) -> list[dict]:
    """Judge call 3: each reference step typed and labelled Matched / Unmatched."""
    return _judged_steps(reply, ("Matched", "Unmatched"), RECALL_ALIASES)


def parse_precision(reply: str) -> list[dict]:
    """Judge call 4: each response step typed and labelled Matched / Wrong / Redundant."""
    return _judged_steps(reply, ("Matched", "Wrong", "Redundant"), PRECISION_ALIASES)


def parse_interval(text: str) -> tuple[float, float] | None:
    """A time answer as the official `is_valid_time_interval` accepts it: an `ast.literal_eval` list of two
    numbers ("[13, 54]", "[.5, 20.]"); else None. Other errors escape (`grounding_verdict` scores them 0)."""
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
    """A box answer as the official `is_valid_space_interval` accepts it: "[...]", four `int()` spellings; else None."""
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
    """The official `calculate_time_iou`: overlap / hull span, 0 for no span; `ordered`: [end, start] read in order."""
    (s1, e1), (s2, e2) = (sorted(pair) for pair in (gt, pred)) if ordered else (gt, pred)
    intersection = max(0, min(e1, e2) - max(s1, s2))
    union = max(e1, e2) - min(s1, s2)
    return 0 if union == 0 else intersection / union


def box_iou(a: Sequence[float], b: Sequence[float], ordered: bool = True) -> float:
    """The official `calculate_space_iou` of [x1, y1, x2, y2] boxes (a zero union raises); `ordered`: corners in order."""
    if ordered:
        a, b = ((min(x[0], x[2]), min(x[1], x[3]), max(x[0], x[2]), max(x[1], x[3])) for x in (a, b))
    ix1, iy1, ix2, iy2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    if ix2 < ix1 or iy2 < iy1:
        return 0.0
    inter = (ix2 - ix1) * (iy2 - iy1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def grounding_verdict(gt_answer: str, extracted: str, official_reversed: bool = False) -> tuple[bool, float | None] | None:
    """(correct, IoU) by the official `match_answer` IoU rule, or None (the scoring judge decides). Where the
    official code raises, the sample scores 0 with a warning; reversed bounds are read in order unless `official_reversed`."""
    ordered = not official_reversed
    try:
        gt = parse_interval(gt_answer)
        pred = parse_interval(extracted) if gt is not None else None
        if gt is not None and pred is not None:
            iou = time_iou(gt, pred, ordered)
            return iou > 0.7, iou
        gt_box = parse_box(gt_answer)
        pred_box = parse_box(extracted) if gt_box is not None else None
        if gt_box is not None and pred_box is not None:
            iou = box_iou(gt_box, pred_box, ordered)
            return iou > 0.5, iou
    except (ArithmeticError, RecursionError, MemoryError, TypeError, AttributeError) as error:
        log.warning("VCR-Bench: the official IoU rule raised %s: %s on answer %.80r (reference %.80r); scored 0 as officially",
                    type(error).__name__, error, extracted, gt_answer)
        return False, None
    return None


def is_bare_answer(response: str) -> bool:
    """Only an option letter: official issue #2 (the precision judge would split the reference steps instead)."""
    return bool(_BARE_LETTER.match(response or ""))


def bare_answer_steps(correct: bool) -> list[dict]:
    """A bare answer's one step, a logical inference (as the precision prompt counts it), Matched iff correct."""
    return [{"type": REASONING, "judgment": "Matched" if correct else "Wrong"}]


def _per_kind(steps: Iterable[dict], include_background: bool, counted) -> dict[str, float | None]:
    """Per kind, Matched over the `counted` steps of its types (None if none); overall without Background unless asked."""
    steps = list(steps)
    overall = STEP_TYPES if include_background else (PERCEPTION, REASONING)
    out = {}
    for kind, types in zip(COT_KINDS, ((PERCEPTION,), (REASONING,), overall)):
        labels = [s["judgment"] for s in steps if s["type"] in types and counted(s["judgment"])]
        out[kind] = labels.count("Matched") / len(labels) if labels else None
    return out


def recall_ratios(steps: Iterable[dict], include_background: bool = False) -> dict[str, float | None]:
    """Per kind: Matched / reference steps of that type."""
    return _per_kind(steps, include_background, lambda label: True)


def precision_ratios(steps: Iterable[dict], include_background: bool = False) -> dict[str, float | None]:
    """Per kind: Matched / (Matched + Wrong) over response steps (Redundant ignored)."""
    return _per_kind(steps, include_background, lambda label: label != "Redundant")


def f1(precision: float, recall: float) -> float:
    """CoT score: 2PR / (P + R) of the *averaged* P and R; 0 when both are 0; NaN if either is."""
    if math.isnan(precision) or math.isnan(recall):
        return math.nan
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


# Micro accuracy of each group of samples, in this order: all, per dimension, per duration bucket, multiple choice / open.
ACCURACY_GROUPS = {"accuracy": lambda r: True, **{f"accuracy_{code}": (lambda r, c=code: r["dimension_code"] == c) for code in DIMENSIONS.values()}}
ACCURACY_GROUPS.update({f"accuracy_{bucket}": (lambda r, b=bucket: r["duration_bucket"] == b) for bucket in ("short", "medium", "long")})
ACCURACY_GROUPS.update(accuracy_mc=lambda r: bool(r["multiple_choice"]), accuracy_open=lambda r: not r["multiple_choice"])
ACCURACY_METRICS = tuple(ACCURACY_GROUPS)
_COT_PREFIX = {"perception": "perception", "reasoning": "reasoning", "overall": "cot"}
COT_METRICS = tuple(f"{_COT_PREFIX[kind]}_{part}" for kind in COT_KINDS for part in ("recall", "precision", "f1"))
# Counts, lower is better: samples with a failed judge call or record / no model answer / a reply cut inside its reasoning.
COUNT_METRICS = ("judge_failed", "model_failed", "reasoning_truncated")
METRICS = ACCURACY_METRICS + COT_METRICS + COUNT_METRICS


def accuracy_columns(records: Sequence[dict], verdicts: Sequence[bool | None]) -> dict[str, np.ndarray]:
    """Per sample and group: `n:<metric>` (in the group) and `right:<metric>` (and correct; no verdict, failed, is wrong)."""
    correct = columns.column(verdict is True for verdict in verdicts)
    out = {}
    for name, member in ACCURACY_GROUPS.items():
        out[f"n:{name}"] = columns.column(map(member, records))
        out[f"right:{name}"] = out[f"n:{name}"] * correct
    return out


def accuracy_from_totals(totals: columns.Totals) -> dict[str, np.ndarray]:
    """Each group's accuracy in percent; NaN for an empty group."""
    return {name: columns.ratio(100.0 * totals[f"right:{name}"], totals[f"n:{name}"]) for name in ACCURACY_METRICS}


def cot_columns(recall_steps: Sequence[list | None], precision_steps: Sequence[list | None], include_background: bool = False) -> dict[str, np.ndarray]:
    """Per sample and kind, its recall and precision ratio where defined (a failed judgement or 0/0 is left out)."""
    out = {}
    for side, all_steps, ratios_of in (("recall", recall_steps, recall_ratios), ("precision", precision_steps, precision_ratios)):
        ratios = [None if steps is None else ratios_of(steps, include_background) for steps in all_steps]
        for kind in COT_KINDS:
            values = [None if r is None else r[kind] for r in ratios]
            out[f"{side}_sum:{kind}"] = columns.column(0.0 if v is None else v for v in values)
            out[f"{side}_n:{kind}"] = columns.column(v is not None for v in values)
    return out


def cot_from_totals(totals: columns.Totals) -> dict[str, np.ndarray]:
    """Recall and precision per kind (means where defined) and the F1 of those means, in percent."""
    out = {}
    for kind in COT_KINDS:
        r = columns.ratio(totals[f"recall_sum:{kind}"], totals[f"recall_n:{kind}"])
        p = columns.ratio(totals[f"precision_sum:{kind}"], totals[f"precision_n:{kind}"])
        prefix = _COT_PREFIX[kind]
        out[f"{prefix}_recall"], out[f"{prefix}_precision"], out[f"{prefix}_f1"] = r * 100.0, p * 100.0, columns.rowwise(f1, p, r) * 100.0
    return out


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
    """The scoring settings (`OPTIONS`): a task's, with defaults for the others."""
    return {**options.values(OPTIONS), **(settings or {})}
