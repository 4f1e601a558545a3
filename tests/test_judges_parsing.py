"""Parse helpers for judge replies (judges/parsing.py): the reply shapes the three judges produce."""

import pytest

from lmms_video_reasoning.judges.parsing import (
    ParseError,
    extract_digit,
    extract_json,
    extract_tag,
    normalize_label,
)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('```json\n[{"step": 1, "judgment": "Matched"}]\n```', [{"step": 1, "judgment": "Matched"}]),
        ('Here you go:\n```\n{"a": 1}\n```\nDone.', {"a": 1}),
        ('[{"step": 1}, {"step": 2}]', [{"step": 1}, {"step": 2}]),
        ('The evaluation is {"score": 0.5, "ok": true} as requested.', {"score": 0.5, "ok": True}),
        ('```json\n[\n  {"step": 1},\n  {"step": 2},\n]\n```', [{"step": 1}, {"step": 2}]),
        ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
        ("{'label': 'Matched', 'why': \"it's right\"}", {"label": "Matched", "why": "it's right"}),
        ('It\'s below: {"text": "a ] bracket, and a } brace"}', {"text": "a ] bracket, and a } brace"}),
        ('```python\nnot json\n```\nbut this is: [1, 2]', [1, 2]),
    ],
)
def test_extract_json_accepts_fenced_bare_prose_and_lenient_forms(reply, expected):
    assert extract_json(reply) == expected


def test_extract_json_expect_skips_candidates_of_the_wrong_type():
    reply = 'As shown in [1], the result is {"verdict": "yes"}'
    assert extract_json(reply) == [1]
    assert extract_json(reply, expect=dict) == {"verdict": "yes"}


@pytest.mark.parametrize("reply", ["no json here", '{"unclosed": [1, 2}', "", "[not, valid, json"])
def test_extract_json_raises_parse_error(reply):
    with pytest.raises(ParseError):
        extract_json(reply)


def test_parse_error_is_a_value_error():
    assert issubclass(ParseError, ValueError)


@pytest.mark.parametrize(
    "label, expected",
    [("Matched", "Matched"), ("  matched ", "Matched"), ("**Unmatched.**", "Unmatched"), ("Match", "Matched"), ("MATCH", "Matched"), ("not   matched", "Unmatched")],
)
def test_normalize_label(label, expected):
    aliases = {"Match": "Matched", "Not matched": "Unmatched"}
    assert normalize_label(label, ["Matched", "Unmatched"], aliases) == expected


def test_normalize_label_rejects_unknown_labels_naming_the_allowed_ones():
    with pytest.raises(ParseError, match="Matched"):
        normalize_label("Partially", ["Matched", "Unmatched"])


def test_extract_tag_returns_last_occurrence_or_none():
    assert extract_tag("<step_matching>7</step_matching>", "step_matching") == "7"
    echoed = "Format: <step_matching>score</step_matching>\n...\n<step_matching> 4 </step_matching>"
    assert extract_tag(echoed, "step_matching") == "4"
    assert extract_tag("<STEP_MATCHING>\n3\n</step_matching>", "step_matching") == "3"
    assert extract_tag("no tags", "step_matching") is None


@pytest.mark.parametrize(
    "reply, allowed, expected",
    [("1", "01", 1), ("Score: 0.", "01", 0), ("In 2024 the answer is 1", "01", 1), ("rating 7/10", "0123456789", 7), ("**0**", "01", 0)],
)
def test_extract_digit(reply, allowed, expected):
    assert extract_digit(reply, allowed) == expected


@pytest.mark.parametrize("reply", ["none", "2", "10", "0.5"])
def test_extract_digit_raises_when_no_standalone_allowed_digit(reply):
    with pytest.raises(ParseError):
        extract_digit(reply, "01")


def test_extract_json_pairs_fences_as_markdown_does():
    # A stray inline fence must not pair with the opening fence of the real block (which
    # would shift the pairing and read the later block).
    reply = 'Use ``` fences.\n```json\n[{"a": 1}]\n```\nAn older draft:\n```json\n[{"b": 2}]\n```'
    assert extract_json(reply) == [{"a": 1}]
    assert extract_json('x ```json [{"c": 3}] ``` y') == [{"c": 3}]  # inline fenced JSON still read


def test_extract_json_survives_deep_nesting_and_huge_replies():
    deep = "[" * 5000 + "]" * 5000
    value = extract_json("```json\n" + deep + "\n```")  # no RecursionError: an inner span that json reads
    assert isinstance(value, list)
    with pytest.raises(ParseError):
        extract_json("```json\n" + deep + "\n```", expect=dict)
    assert extract_json("[" * 200_000 + ' [{"ok": 1}]') == [{"ok": 1}]  # linear scan, no hang


def test_lmms_evals_response_parser_is_no_substitute():
    """Why PR 00 carries these helpers: on the same replies lmms-eval 0.7.3's `ResponseParser` guesses a
    default (an empty dict, a 1 read out of "10") where these read the value or ask again."""
    from lmms_eval.llm_judge.utils import ResponseParser

    fenced = 'Steps:\n```json\n[{"step": 1, "judgment": "Matched"}, {"step": 2, "judgment": "Wrong"},]\n```'
    assert ResponseParser.parse_json_response(fenced) == {}
    assert extract_json(fenced, expect=list) == [{"step": 1, "judgment": "Matched"}, {"step": 2, "judgment": "Wrong"}]
    assert ResponseParser.parse_binary_response("Score: 10") == 1
    with pytest.raises(ParseError):
        extract_digit("Score: 10", "01")
