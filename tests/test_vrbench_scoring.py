"""VRBench scoring: the official MCQ extraction cascade, judge tags, weights and aggregation.

Expected letters are derived by hand from the official rules
(`evaluation/calculate_scores.py::extract_mcq_answer`, OpenGVLab/VRBench 47a22db); the comment
on each case names the stage that decides and why.
"""

from __future__ import annotations

import math

import pytest
from lmms_video_reasoning.judges.parsing import ParseError
from lmms_video_reasoning.utils.core.columns import SampleColumns, point
from lmms_video_reasoning.utils.lmms.responses import model_failed
from lmms_video_reasoning.vrbench import scoring
from lmms_video_reasoning.vrbench.scoring import (
    QuestionScore,
    extract_mcq_answer,
)


def aggregate(scores, protocol: str, with_judge: bool, judge_ran: bool = True) -> dict[str, float]:
    """All metrics of a task from its per-question scores (`score_columns` summed, `metrics_from_totals`)."""
    columns = SampleColumns(scoring.score_columns(scores, protocol),
                            lambda totals, _whole: scoring.metrics_from_totals(totals, protocol, with_judge, judge_ran),
                            counts=("model_failed", "judge_failed"))
    return point(columns)

CASCADE = [
    # 1: \boxed{} wins over everything, any case.
    ("So the answer is \\boxed{c}.", "C"),
    ("\\boxed{B} ... <Answer> C", "B"),
    # 2: <Answer> + optional whitespace + letter, any case.
    ("<Step 1> The circle moves.\n<Answer> B", "B"),
    ("<answer>d", "D"),
    # 2 fails on the template's literal brackets "[C]"; 3 and 4 find nothing; 5 takes the last
    # "x." with x in a-e: "square." -> E (a quirk that decides real scores).
    ("<Step 1> The red circle moves toward the blue square.\n<Answer> [C]", "E"),
    # 2 fails on "<Answer>: B" (colon); 4 fails ("Answer" is followed by ">"); 5 and 6 find
    # nothing (no whitespace after B); 7: "<", ">" become spaces -> "answer : b" -> B.
    ("<Answer>: B", "B"),
    # 3: lines "X. text": the last one.
    ("Let me compare.\nA. The square stays\nC. The circle reaches it\nI pick the second one", "C"),
    # 4: "answer is B,".
    ("The answer is B, because the circle moves.", "B"),
    # 4: matches are concatenated keyword by keyword, the last wins: ["answer is" -> B,
    # "therefore" -> A] gives A although "the final answer is B" comes later in the text.
    ("Therefore A is wrong; the final answer is B.", "A"),
    # 4: two keywords: ["Answer" -> B, "answer is" -> C] -> C.
    ("Answer: B\nOn reflection, the answer is C", "C"),
    ("Final: d", "D"),
    ("answer: c.", "C"),
    ("Answer: E", "E"),
    # 5: "X)" and "X:" anywhere, any case; and "x." after any word ending in a-e.
    ("I think it is (B) since the circle moved", "B"),
    ("Option c: the circle", "C"),
    ("the house.", "E"),
    # 6: letter, whitespace, then a letter (any case, IGNORECASE) -> "B because".
    ("My choice is B because it fits", "B"),
    # 6: the article "a" before "cat" counts; the final "B" has no whitespace after it.
    ("I would go with a cat and B", "A"),
    # 7: punctuation-stripped, lower-cased text: the last standalone letter.
    ("The correct option is D", "D"),
    ("Seen twice[b]", "B"),
    # 7 with a digit,digit comma: every mark is deleted, "times[b]" -> "timesb"; 8 finds no
    # capital standalone letter -> None.
    ("Seen 1,2 times[b]", None),
    # 7 deletes only the first 32 periods (re.UNICODE passed as `count`): the 33rd keeps
    # "z.b" apart, so "b" is found. Without the quirk the text would give None.
    ("." * 32 + " z.b", "B"),
    # 8: "- " makes 7 delete hyphens ("OptionB"); 8 finds "B" in "Option-B".
    ("Pick - Option-B", "B"),
    # 8: the capital B exists, but the last 50 characters are searched in any case first: "e".
    ("Option-B - then-e", "E"),
    # Nothing to extract.
    ("Sorry, I cannot tell from this video.", None),
    ("", None),
    (None, None),
]


@pytest.mark.parametrize("response, expected", CASCADE)
def test_extraction_cascade(response, expected):
    assert extract_mcq_answer(response) == expected


def test_period_limit_is_the_official_count():
    # With 31 leading periods the 32nd (in "z.b") is deleted too: "zb" -> no letter -> None.
    assert extract_mcq_answer("." * 31 + " z.b") is None


def test_official_response_strips_characters_not_a_prefix():
    response = "Assistant: <Step 1> x\n<Answer> A"
    assert scoring.official_response(response) == " <Step 1> x\n<Answer> "
    assert scoring.official_response("stand in a tin") == "d in a "


def test_judge_prompt_kinds_per_protocol():
    kind = scoring.judge_prompt_kind
    assert kind("Event Attribution", "default") == kind("Event Attribution", "official") == "unique"
    assert kind(" Event Prediction ", "official") == "non_unique"
    assert kind("Hypothetical Reasoning", "default") == "non_unique"
    assert kind("Counting Porblems", "default") == kind("Counting Problems", "default") == "unique"
    assert kind("Counting Porblems", "official") is None
    assert kind("Event Summarization", "default") is None
    assert kind("Event Summarization", "official") is None


UNIQUE_REPLY = (
    "<step_matching>8</step_matching>\n<logical_consistency>[6]</logical_consistency>\n"
    "<factual_accuracy>9/10</factual_accuracy>\n<process_clarity>7.5</process_clarity>\n<rationale>ok</rationale>"
)


def test_default_tags_and_weights_by_hand():
    ratings = scoring.parse_tags(UNIQUE_REPLY, "unique")
    assert ratings == (8.0, 6.0, 9.0, 7.5)
    # 0.4 * 8 + 0.4 * 6 + 0.1 * 9 + 0.1 * 7.5 = 3.2 + 2.4 + 0.9 + 0.75
    assert scoring.process_score(ratings) == pytest.approx(7.25)


def test_default_tags_last_occurrence_and_strictness():
    echoed = "Format: <relevance>[0-10]</relevance>\n" + UNIQUE_REPLY.replace("step_matching", "relevance").replace("process_clarity", "clarity")
    assert scoring.parse_tags(echoed, "non_unique") == (8.0, 6.0, 9.0, 7.5)
    with pytest.raises(ParseError):
        scoring.parse_tags(UNIQUE_REPLY.replace("<process_clarity>7.5</process_clarity>", ""), "unique")
    with pytest.raises(ParseError):
        scoring.parse_tags(UNIQUE_REPLY.replace(">8<", ">12<"), "unique")
    with pytest.raises(ParseError):
        scoring.parse_tags(UNIQUE_REPLY.replace(">8<", ">high<"), "unique")


def test_official_tags_first_occurrence_missing_is_zero():
    reply = "<step_matching>4</step_matching> <step_matching>9</step_matching>\n<logical_consistency>\n5\n</logical_consistency>"
    # First occurrence; a multi-line tag does not match (no DOTALL); missing tags are 0.
    assert scoring.official_tag_values(reply, "unique") == (4.0, None, None, None)
    assert scoring.process_score(scoring.official_tag_values(reply, "unique")) == pytest.approx(0.4 * 4.0)


def q(rtype, correct, process=None, rated=True, failed=False, model_failed=False):
    return QuestionScore(rtype, correct, rated, process, failed, model_failed)


def test_default_aggregation_by_hand():
    scores = [
        q("Event Attribution", True, 8.0),
        q("Event Attribution", False, 6.0),
        q("Event Prediction", True, None, failed=True),  # judge failure: out of OE-P, counted
        q("Event Prediction", True, 5.0),
        q("Counting Porblems", False, 2.0),
        q("Event Summarization", True, rated=False),
    ]
    m = aggregate(scores, "default", with_judge=True)
    assert m["mcq_accuracy"] == pytest.approx(100 * 4 / 6)
    # OE-P over the 4 rated, scored questions: mean(8, 6, 5, 2) = 5.25 -> x10.
    assert m["process_score"] == pytest.approx(52.5)
    assert m["overall"] == pytest.approx((100 * 4 / 6 + 52.5) / 2)
    assert m["type_event_attribution"] == pytest.approx((50 + 70) / 2)
    assert m["type_event_prediction"] == pytest.approx((100 + 50) / 2)
    assert m["type_counting"] == pytest.approx((0 + 20) / 2)
    assert m["type_information_synopsis"] == pytest.approx(100)  # MCQ only
    assert math.isnan(m["type_logical_linkage"])  # no questions of that type
    assert m["judge_failed"] == 1


def test_official_aggregation_by_hand():
    scores = [
        q("Event Attribution", True, 8.0),
        q("Event Attribution", False, 0.0, failed=True),  # official: a failure scores 0
        q("Counting Porblems", True, rated=False),  # never rated, 0 in OE-P
        q("Event Summarization", False, rated=False),
    ]
    m = aggregate(scores, "official", with_judge=True)
    assert m["mcq_accuracy"] == pytest.approx(50)
    assert m["process_score"] == pytest.approx(10 * (8 + 0 + 0 + 0) / 4)
    assert m["type_event_attribution"] == pytest.approx((50 + 40) / 2)
    assert m["type_counting"] == pytest.approx(100)  # OE 0 -> MCQ alone
    assert m["type_information_synopsis"] == 0.0  # both 0 -> 0
    assert m["judge_failed"] == 1


def test_no_judge_gives_nan_not_zero():
    scores = [q("Event Attribution", True), q("Event Summarization", True, rated=False)]
    m = aggregate(scores, "default", with_judge=True, judge_ran=False)
    assert m["mcq_accuracy"] == 100
    assert math.isnan(m["process_score"]) and math.isnan(m["overall"]) and math.isnan(m["judge_failed"])
    assert math.isnan(m["type_event_attribution"])
    assert m["type_information_synopsis"] == 100


def test_mcq_only_metrics():
    scores = [q("Logical Linkage", True, rated=False), q("Logical Linkage", False, rated=False)]
    m = aggregate(scores, "default", with_judge=False)
    assert set(m) == {"mcq_accuracy", *(f"type_{n}" for n in scoring.TYPE_NAMES), "model_failed"}
    assert m["type_logical_linkage"] == 50


def test_model_failure_aggregation_by_hand():
    """A model failure: wrong, not judged (process None), counted in model_failed only."""
    scores = [q("Event Attribution", True, 8.0), q("Event Attribution", False, None, model_failed=True)]
    default = aggregate(scores, "default", with_judge=True)
    assert default["mcq_accuracy"] == 50 and default["process_score"] == pytest.approx(80)  # left out of OE-P
    assert default["model_failed"] == 1 and default["judge_failed"] == 0
    official = aggregate(scores, "official", with_judge=True)
    assert official["process_score"] == pytest.approx(40)  # 0 in OE-P
    assert official["model_failed"] == 1 and official["judge_failed"] == 0
    assert aggregate(scores, "default", with_judge=True, judge_ran=False)["model_failed"] == 1  # no judge needed


def test_failure_placeholder_is_never_correct():
    failure = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500 - Internal Server Error"
    assert extract_mcq_answer(failure) == "E"  # what the cascade alone would read
    assert not scoring.mcq_correct(failure, "E")
    assert scoring.mcq_correct("<Answer> E", "E")
    assert model_failed({"response": failure}) and not model_failed({"response": "E."})
