"""The helpers the VCR-Bench, VRBench and CG-Bench tasks share: judge-reply parsing, model replies with their
reasoning, a sample's record logged once, task options, frame plans and the judge failure share."""

import pytest

from lmms_video_reasoning.judges.failure_share import too_many_failed
from lmms_video_reasoning.judges.parsing import extract_digit, extract_json, extract_tag, normalize_label
from lmms_video_reasoning.utils.core.ask import ParseError
from lmms_video_reasoning.utils.core.frame_plan import FramePlan, check_counts, choose
from lmms_video_reasoning.utils.core.options import Option, values
from lmms_video_reasoning.utils.core.records import SameRecord, aggregations, once_per_sample, records_of
from lmms_video_reasoning.utils.lmms.responses import final_answer, model_failed, reasoning_truncated, reply_record, split_reply


def test_judge_replies_parse_or_raise_a_parse_error():
    assert extract_json('Sure:\n```json\n{"score": 3}\n```') == {"score": 3}
    assert extract_json("{'a': 1, 'b': [1, 2],}") == {"a": 1, "b": [1, 2]}  # the lenient forms judges write
    assert extract_digit("The answer is 1.") == 1
    assert extract_tag("<answer> B </answer>", "answer") == "B" and extract_tag("none", "answer") is None
    assert normalize_label("Correct.", ["correct", "incorrect"]) == "correct"
    for parse in (lambda: extract_json("no json here"), lambda: extract_digit("maybe")):
        with pytest.raises(ParseError):  # asked again by the judge helper, never guessed
            parse()


def test_a_reply_keeps_its_final_answer_apart_from_its_reasoning():
    assert split_reply("<think>hmm</think>The answer is A") == ("The answer is A", False)
    assert split_reply("<think>still thinking") == ("", True)  # ended inside its reasoning: no answer
    assert split_reply("hmm</think>A", prefilled=True) == ("A", False)  # the template opened the tag
    record = reply_record("<think>x</think>B")
    assert final_answer(record) == "B" and not reasoning_truncated(record) and not model_failed(record)
    assert model_failed(reply_record("[LMMS_EVAL_REQUEST_FAILED] timeout"))


def test_a_record_is_logged_once_and_every_metric_aggregates_from_it():
    results = once_per_sample({"id": 1, "correct": True}, ["accuracy", "count"])
    assert results["accuracy"] == {"id": 1, "correct": True} and isinstance(results["count"], SameRecord)
    assert records_of([results["count"]]) == [{"id": 1, "correct": True}]
    aggregate = aggregations("demo_", ["accuracy", "count"], lambda records: {
        "accuracy": sum(r["correct"] for r in records) / len(records), "count": len(records)})
    values_ = [once_per_sample({"correct": c}, ["accuracy", "count"]) for c in (True, False)]
    assert aggregate["demo_accuracy"]([v["accuracy"] for v in values_]) == 0.5
    assert aggregate["demo_count"]([v["count"] for v in values_]) == 2


def test_options_take_the_tasks_choice_or_their_default():
    options = [Option("strict", "bool", False, "parse strictly"), Option("frames", "int", 32, "frames", minimum=1)]
    assert values(options) == {"strict": False, "frames": 32}
    assert values(options, {"frames": 64}) == {"strict": False, "frames": 64}


def test_a_frame_plan_picks_frames_and_their_times():
    plan = FramePlan("uniform", times=lambda indices, fps: [i / fps for i in indices],
                     pick=lambda total, n: [round(k * (total - 1) / (n - 1)) for k in range(n)])
    chosen = choose(plan, total=101, fps=10.0, n=3)
    assert chosen.indices == [0, 50, 100] and chosen.timestamps == [0.0, 5.0, 10.0]
    with pytest.raises(ValueError, match="at least one frame"):
        check_counts(0, 8)


def test_failed_judge_calls_withhold_a_metric_past_their_share():
    assert too_many_failed(2, 10, limit=0.1) and not too_many_failed(1, 10, limit=0.1)
    assert not too_many_failed(0, 0)  # nothing judged
