"""Property-based tests (hypothesis) for what needs no official table: IoU bounds, order
invariance, and that no reply, however malformed, nested or huge, crashes scoring."""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interval_iou import intervals_iou

from bench_scoring import score_records
from lmms_video_reasoning.cg_bench import benchmark as cg_binding
from lmms_video_reasoning.cg_bench import task as cg_task
from lmms_video_reasoning.cg_bench import scoring as cg
from lmms_video_reasoning.judges.parsing import ParseError, extract_json
from lmms_video_reasoning.vcr_bench import scoring as vcr
from lmms_video_reasoning.vrbench import scoring as vr

FAST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)
any_float = st.floats(allow_nan=True, allow_infinity=True)
ordered_pair = st.tuples(finite, finite).map(lambda p: [min(p), max(p)])
pair = st.lists(st.one_of(finite, any_float, st.booleans()), min_size=2, max_size=2)
truth = st.lists(ordered_pair, min_size=1, max_size=5)

# Replies: free text, plus the shapes that broke parsers: fences, nesting, huge repetition.
pieces = st.sampled_from(["```json\n", "```", "\n", '{"result": ', "[", "]", "{", "}", '"', "'", "0:10", " to ", "-",
                          "NaN", "Infinity", "true", "null", "A", "B", "<answer>", "</answer>", "<think>", "</think>",
                          "1", "2", "0", ",", ".5", "1e999", "<step_matching>", "</step_matching>", "\\boxed{C}"])
nested = st.builds(lambda opener, depth, tail: opener * depth + tail, st.sampled_from(["[", "{", '{"result": ', "[[", "(", "```json\n["]),
                   st.integers(0, 6000), st.text(max_size=20))
replies = st.one_of(st.text(max_size=300), st.lists(pieces, max_size=60).map("".join), nested,
                    st.builds(lambda p, n: p * n, st.lists(pieces, max_size=4).map("".join), st.integers(0, 3000)))


@FAST
@given(st.lists(pair, max_size=8), truth)
def test_cg_tiou_is_bounded_by_default(predicted, reference):
    try:
        value = cg.tiou_official(predicted, reference, reversed_as_official=False)
    except cg.Unscorable:
        return
    assert 0.0 <= value <= 1.0


@FAST
@given(st.lists(ordered_pair, min_size=1, max_size=8), truth, st.randoms())
def test_cg_tiou_ignores_order_and_is_symmetric(predicted, reference, rnd):
    value = cg.tiou_official(predicted, reference)
    shuffled = list(predicted)
    rnd.shuffle(shuffled)
    assert math.isclose(cg.tiou_official(shuffled, reference), value, abs_tol=1e-9)
    assert math.isclose(cg.tiou_official(reference, predicted), value, abs_tol=1e-9)
    assert math.isclose(intervals_iou(predicted, reference), value, abs_tol=1e-9)  # the shared tIoU agrees


@FAST
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=6), truth)
def test_reversed_pairs_read_as_ordered(predicted, reference):
    reversed_pairs = [[b, a] for a, b in predicted]
    ordered = [[min(a, b), max(a, b)] for a, b in predicted]
    assert math.isclose(cg.tiou_official(reversed_pairs, reference, reversed_as_official=False),
                        cg.tiou_official(ordered, reference), abs_tol=1e-9)


@FAST
@given(st.tuples(finite, finite), st.tuples(finite, finite))
def test_vcr_time_iou_bounded_and_symmetric(a, b):
    value = vcr.time_iou(a, b)
    assert 0.0 <= value <= 1.0
    assert math.isclose(value, vcr.time_iou(b, a), abs_tol=1e-12)


boxes = st.tuples(*[st.integers(-2000, 2000)] * 4)


@FAST
@given(boxes, boxes)
def test_vcr_box_iou_bounded_and_symmetric(a, b):
    try:
        value = vcr.box_iou(a, b)
    except ZeroDivisionError:  # zero-area union: the official sample scores 0 (grounding_verdict)
        assert vcr.grounding_verdict(str(list(a)).replace(" ", ""), str(list(b)).replace(" ", "")) == (False, None)
        return
    assert 0.0 <= value <= 1.0
    assert math.isclose(value, vcr.box_iou(b, a), abs_tol=1e-12)


@FAST
@given(replies, st.sampled_from(["A", "B", "C"]), truth)
def test_no_reply_crashes_cg_bench_parsing(reply, right, reference):
    assert cg.parse_mcq(reply, right)[1] in ("json", "letters", "failed")
    assert cg.parse_mcq(reply, right, strict=True)[0] in (True, False)
    value, how = cg.grounding_tiou(reply, reference)
    assert value is None or 0.0 <= value <= 1.0
    assert cg.grounding_tiou(reply, reference, strict=True)[0] is not None
    prediction = cg.parse_open(reply)
    assert prediction is None or isinstance(prediction, str)
    for allowed in ((0, 1, 2), (0, 1)):
        try:
            assert cg.judge_verdict(reply, allowed) in allowed
        except ParseError:
            pass


@FAST
@given(replies, replies)
def test_no_reply_crashes_vcr_bench_or_vrbench_parsing(reply, other):
    vcr.parse_verdict(reply)
    verdict = vcr.grounding_verdict(other, reply)
    assert verdict is None or verdict[0] in (True, False)
    for parse in (vcr.parse_recall, vcr.parse_precision, lambda r: extract_json(r)):
        try:
            parse(reply)
        except ParseError:
            pass
    assert vr.extract_mcq_answer(reply) in (None, "A", "B", "C", "D", "E")
    for kind in ("unique", "non_unique"):
        assert len(vr.official_tag_values(reply, kind)) == 4
        try:
            vr.parse_tags(reply, kind)
        except ParseError:
            pass


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(replies, min_size=1, max_size=12), st.booleans())
def test_no_reply_crashes_cg_bench_score_records(responses, strict):
    rng = random.Random(len(responses))
    records = []
    for index, response in enumerate(responses):
        mode = rng.choice(["long", "clue", "grounding", "open", "blind"])
        records.append({"sample_id": str(index), "qid": index % 5, "mode": mode, "video_uid": "v", "question": "Q?",
                        "answer": "a ball", "right_answer": "B", "clue_intervals": [[8.0, 30.0]], "domain": "d",
                        "sub_category": "Object Perception", "duration": 600, "response": response})
    scores = score_records(cg_binding, records, {"strict": strict, "judge": False})
    for name in cg_task.HEADLINE:
        value = scores[name]
        assert math.isnan(value) or 0.0 <= value <= 100.0
    assert scores["parse_failed"] <= len(records)
