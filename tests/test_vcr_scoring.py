"""VCR-Bench scoring rules: parsers, IoU, the issue-#2 guard and every aggregation rule."""

from __future__ import annotations

import math

import pytest
from lmms_video_reasoning.judges.parsing import ParseError
from lmms_video_reasoning.utils.lmms.responses import model_failed
from lmms_video_reasoning.vcr_bench import scoring, task
from lmms_video_reasoning.vcr_bench.scoring import BACKGROUND, PERCEPTION, REASONING


def cot_metrics(recall: list, precision: list) -> dict:
    """The metrics of CoT-scored samples whose judges returned these steps (None: the judgment failed)."""
    records = [{"dimension_code": "vpa", "duration_bucket": "short", "multiple_choice": False}] * len(recall)
    return task.metrics_from_outcomes(records, [{"correct": True, "recall_steps": r, "precision_steps": p, "errors": []}
                                                for r, p in zip(recall, precision, strict=True)])


def step(kind: str, judgment: str) -> dict:
    return {"type": kind, "judgment": judgment}


# ---------------------------------------------------------------- judge reply parsing


def test_recall_parses_fenced_and_bare_json_and_normalises_labels():
    fenced = '```json\n[{"step": "1. x", "step_type": "Video Description Steps", "judgment": "Matched"}]\n```'
    bare = 'Here you go: [{"step": "1. x", "step_type": "Logical Inference", "judgment": "match",},]'
    assert scoring.parse_recall(fenced) == [step(PERCEPTION, "Matched")]
    assert scoring.parse_recall(bare) == [step(REASONING, "Matched")]


def test_precision_maps_match_to_matched_and_rejects_unknown_labels():
    reply = '[{"step": "s", "step_type": "Background Review Steps", "judgment": "Redundant"},' \
            ' {"step": "t", "step_type": "video description steps", "judgment": "Match"}]'
    assert scoring.parse_precision(reply) == [step(BACKGROUND, "Redundant"), step(PERCEPTION, "Matched")]
    with pytest.raises(ParseError):
        scoring.parse_precision('[{"step": "s", "step_type": "Logical Inference Steps", "judgment": "Matched|Wrong|Redundant"}]')
    with pytest.raises(ParseError):
        scoring.parse_precision('[{"step": "s", "judgment": "Wrong"}]')
    with pytest.raises(ParseError):
        scoring.parse_recall("I think step 1 is matched.")


def test_verdict_and_extraction_parsers():
    # Official: correct iff the reply is exactly "1"; the lenient reading is kept beside it.
    assert scoring.parse_verdict("1") == scoring.VerdictReading(True, True)
    assert scoring.parse_verdict("Output: 0") == scoring.VerdictReading(False, False)
    for reply in ("1.", "**1**", "Output: 1", "1\n", " 1"):
        reading = scoring.parse_verdict(reply)
        assert reading.exact is False and reading.lenient is True
        assert reading.correct(lenient=False) is False and reading.correct(lenient=True) is True
    assert scoring.parse_verdict("consistent") == scoring.VerdictReading(False, None)
    with pytest.raises(ParseError):
        scoring.parse_verdict("consistent", lenient=True)
    assert scoring.parse_extraction("  B \n") == "  B \n"  # kept as given, as officially
    with pytest.raises(ParseError):
        scoring.parse_extraction("   ")


# ---------------------------------------------------------------- grounding by IoU


def test_interval_and_box_parsing():
    # The official rule: the whole answer is a Python literal list of two numbers ...
    assert scoring.parse_interval("[13, 54]") == (13.0, 54.0)
    assert scoring.parse_interval("[.5, 20.]") == (0.5, 20.0) and scoring.parse_interval("[2e0, 3]") == (2.0, 3)
    assert scoring.parse_interval("from [1.5,3] s") is None
    assert scoring.parse_interval("13 to 54") is None
    # ... and a box is exactly "[a,b,c,d]" of int() spellings.
    assert scoring.parse_box("[446,125,550,359]") == (446, 125, 550, 359)
    assert scoring.parse_box("[ +446, 125 ,550,359]") == (446, 125, 550, 359)
    assert scoring.parse_box("[446, 125, 550]") is None
    assert scoring.parse_box("[10.5,10,50,50]") is None and scoring.parse_box(" [1,2,3,4]") is None


@pytest.mark.parametrize("pred, correct", [
    ("[13, 54]", True),       # identical
    ("[54, 13]", True),       # reversed bounds read as [13, 54]
    ("[10, 54]", True),       # IoU 41/44 = 0.93
    ("[25, 54]", True),       # IoU 29/41 = 0.707
    ("[30, 54]", False),      # IoU 24/41 = 0.585
    ("[100, 120]", False),    # disjoint
    ("[13, 13]", False),      # zero length
])
def test_vtg_time_iou_threshold(pred, correct):
    verdict = scoring.grounding_verdict("[13, 54]", pred)
    assert verdict is not None
    assert verdict[0] is (verdict[1] > 0.7)
    assert verdict[0] is correct


def test_vtg_iou_exactly_at_threshold_is_wrong():
    # [0, 7] vs [0, 10]: IoU = 0.7 exactly; the rule is IoU > 0.7.
    correct, iou = scoring.grounding_verdict("[0, 10]", "[0, 7]")
    assert iou == pytest.approx(0.7) and correct is False


def test_tsg_box_iou_threshold_and_no_rescaling():
    gt = "[0,0,100,100]"
    assert scoring.grounding_verdict(gt, "[0,0,100,100]") == (True, 1.0)
    correct, iou = scoring.grounding_verdict(gt, "[0,0,100,50]")  # IoU 0.5 exactly: wrong
    assert iou == pytest.approx(0.5) and correct is False
    correct, iou = scoring.grounding_verdict(gt, "[0,0,100,51]")
    assert correct is True
    # Relative coordinates are not rescaled: [0, 0, 1, 1] is a 1-pixel box.
    assert scoring.grounding_verdict(gt, "[0,0,1,1]")[0] is False
    assert scoring.box_iou((100, 100, 0, 0), (0, 0, 100, 100)) == 1.0  # corners in either order
    # Zero-area union: the official code divides by zero and scores the sample 0.
    assert scoring.grounding_verdict("[0,0,0,10]", "[0,0,0,10]") == (False, None)
    # Reversed corners as given (official_reversed): no overlap.
    assert scoring.grounding_verdict(gt, "[100,100,0,0]", official_reversed=True) == (False, 0.0)


def test_unparseable_grounding_answers_go_to_the_judge():
    assert scoring.grounding_verdict("[13, 54]", "Z") is None
    assert scoring.grounding_verdict("[1,2,3,4]", "the left corner") is None
    assert scoring.grounding_verdict("from 13 s to 54 s", "[13, 54]") is None
    # The shape decides, not the dimension (official `match_answer`): an interval answer of
    # any dimension is scored by IoU.
    assert scoring.grounding_verdict("[13, 54]", "[13, 54]") == (True, 1.0)
    assert scoring.grounding_verdict("[1,2,3,4]", "[1.0,2,3,4]") is None  # float corners: judge


# ---------------------------------------------------------------- official issue #2


@pytest.mark.parametrize("response, bare", [
    ("B", True), ("(C)", True), ("D.", True), ("Answer: A", True), ("The answer is B.", True),
    ("D. An explosion occurred again at the scene.", False), ("Because at 0:33 ... so B", False), ("", False),
])
def test_bare_answer_detection(response, bare):
    assert scoring.is_bare_answer(response) is bare


def test_bare_answer_precision_is_one_final_step():
    assert scoring.precision_ratios(scoring.bare_answer_steps(True)) == {"perception": None, "reasoning": 1.0, "overall": 1.0}
    assert scoring.precision_ratios(scoring.bare_answer_steps(False))["overall"] == 0.0


# ---------------------------------------------------------------- per-sample ratios


def test_recall_ratios_per_type_and_background_setting():
    steps = [step(PERCEPTION, "Matched"), step(PERCEPTION, "Unmatched"), step(REASONING, "Matched"), step(BACKGROUND, "Unmatched")]
    assert scoring.recall_ratios(steps) == {"perception": 0.5, "reasoning": 1.0, "overall": pytest.approx(2 / 3)}
    assert scoring.recall_ratios(steps, include_background=True)["overall"] == 0.5


def test_precision_ignores_redundant_and_is_undefined_without_judged_steps():
    steps = [step(PERCEPTION, "Matched"), step(PERCEPTION, "Wrong"), step(REASONING, "Redundant"), step(BACKGROUND, "Wrong")]
    ratios = scoring.precision_ratios(steps)
    assert ratios == {"perception": 0.5, "reasoning": None, "overall": 0.5}
    assert scoring.precision_ratios(steps, include_background=True)["overall"] == pytest.approx(1 / 3)
    assert scoring.precision_ratios([]) == {"perception": None, "reasoning": None, "overall": None}


# ---------------------------------------------------------------- aggregation


def test_cot_means_skip_undefined_ratios_but_count_real_zeros():
    recall = [[step(PERCEPTION, "Matched")], [step(REASONING, "Matched")], [step(PERCEPTION, "Unmatched")]]
    metrics = cot_metrics(recall, [None, None, None])
    assert metrics["perception_recall"] == 50.0  # 1.0 and 0.0; the second sample has no perception step
    assert math.isnan(metrics["perception_precision"]) and math.isnan(metrics["perception_f1"])


def test_f1_of_averaged_precision_and_recall():
    assert scoring.f1(0.75, 0.5) == pytest.approx(0.6)
    assert scoring.f1(0.0, 0.0) == 0.0
    assert math.isnan(scoring.f1(math.nan, 0.5))
    # F1 of the averages, not the average of per-sample F1s.
    p_steps = [[step(REASONING, "Matched")], [step(REASONING, "Wrong")]]
    r_steps = [[step(REASONING, "Unmatched")], [step(REASONING, "Matched")]]
    metrics = cot_metrics(r_steps, p_steps)
    assert metrics["reasoning_precision"] == 50.0 and metrics["reasoning_recall"] == 50.0
    assert metrics["reasoning_f1"] == 50.0  # per-sample F1s would both be 0


def test_cot_metrics_leave_failed_judgements_out_of_their_mean_only():
    recall = [[step(PERCEPTION, "Matched")], None, [step(PERCEPTION, "Unmatched")]]
    precision = [None, [step(PERCEPTION, "Wrong")], [step(PERCEPTION, "Matched")]]
    metrics = cot_metrics(recall, precision)
    assert metrics["perception_recall"] == 50.0 and metrics["perception_precision"] == 50.0
    assert math.isnan(metrics["reasoning_recall"])  # no sample has a reasoning step


def test_accuracy_counts_failed_samples_as_wrong_and_groups():
    records = [
        {"dimension_code": "vtg", "duration_bucket": "short", "multiple_choice": False},
        {"dimension_code": "vtg", "duration_bucket": "long", "multiple_choice": True},
        {"dimension_code": "ftr", "duration_bucket": "long", "multiple_choice": True},
        {"dimension_code": "tsg", "duration_bucket": "medium", "multiple_choice": False},
    ]
    outcomes = [{"correct": verdict, "recall_steps": None, "precision_steps": None, "errors": []} for verdict in (True, None, True, False)]
    metrics = task.metrics_from_outcomes([{**record, "score_cot": False} for record in records], outcomes)  # None: judge failed
    assert metrics["accuracy"] == 50.0
    assert metrics["accuracy_vtg"] == 50.0 and metrics["accuracy_ftr"] == 100.0 and metrics["accuracy_tsg"] == 0.0
    assert math.isnan(metrics["accuracy_vkr"])
    assert metrics["accuracy_long"] == 50.0 and metrics["accuracy_short"] == 100.0 and metrics["accuracy_medium"] == 0.0
    assert metrics["accuracy_mc"] == 50.0 and metrics["accuracy_open"] == 50.0
    assert set(scoring.ACCURACY_METRICS) <= set(metrics)


def test_metric_names_are_the_issue_names():
    assert scoring.METRICS == (
        "accuracy", "accuracy_ftr", "accuracy_vtc", "accuracy_vtg", "accuracy_vkr", "accuracy_tsr", "accuracy_vpa",
        "accuracy_tsg", "accuracy_short", "accuracy_medium", "accuracy_long", "accuracy_mc", "accuracy_open",
        "perception_recall", "perception_precision", "perception_f1", "reasoning_recall", "reasoning_precision",
        "reasoning_f1", "cot_recall", "cot_precision", "cot_f1", "judge_failed", "model_failed", "reasoning_truncated",
    )


def test_model_failure_is_recognised_by_flag_or_by_placeholder():
    placeholder = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500 - boom"
    assert model_failed({"model_failed": True, "response": placeholder})
    assert model_failed({"response": placeholder})  # a record logged before the flag existed
    assert not model_failed({"model_failed": False, "response": "The answer is (A)."})
    assert not model_failed({"response": "I saw [LMMS_EVAL_REQUEST_FAILED] in the video"})
