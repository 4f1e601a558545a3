"""`vr_bench_two_phase`: the paper's protocol (section 4, Fig. A20). Round 1 reasons from a prompt
without the options, round 2 chooses given round 1's reply; OE-P rates round 1 (a real judge over
HTTP, `LocalJudgeServer`), MCQ-O reads round 2. Expected prompts are written out here from the
paper's figure, independently of the code under test.
"""

from __future__ import annotations

import json
import re

import pytest
from lmms_cli import metric, run_lmms_eval, samples_files
from bench_scoring import score_records
from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.tools.sample import env_for, write_sample
from lmms_video_reasoning.vrbench import benchmark as binding
from lmms_video_reasoning.vrbench import data, sample
from lmms_video_reasoning.vrbench import docs as vr_docs
from lmms_video_reasoning.vrbench.scoring import extract_mcq_answer

# Fig. A20: system prompt (b) for VLMs ("video and summary"; (a) for LLMs: "video summary"), then the user prompt (c).
PAPER_PROMPT = """You are a helpful video understanding assistant designed to answer multi-step reasoning questions based on the {basis}.
You should break down the reasoning process into clear, specific events.

# Format:
Your answer should be formatted as follows:
<Step 1> [Event1 for Step 1]
<Step 2> [Event for Step 2]
...
<Step N> [Final Event for the last Step]
<Answer> [Final conclusion based on the reasoning process]

# Video Summary
{summary}

# Question
{question}
"""


@pytest.fixture(scope="module")
def docs(reference_dir):
    found = vr_docs.flatten(data.records_in(reference_dir / "vrbench" / "VRBench_debug.jsonl"))
    for doc in found:
        doc["mode"], doc["protocol"], doc["two_phase"] = "judge", "default", True
    return {doc["sample_id"]: doc for doc in found}


def untimed_steps(doc: dict) -> list[str]:
    return [re.sub(r"\s*\[\d\d:\d\d:\d\d->\d\d:\d\d:\d\d\]", "", text).strip() for _number, text in doc["steps"]]


def test_round_prompts_follow_the_paper(docs):
    doc = docs["TZk_p-q8Fzo_qa1"]
    first = binding.doc_to_text(doc, {"visual_mode": "video"})  # lmms-eval's context of round 1
    assert first == PAPER_PROMPT.format(basis="video and summary", summary=doc["video_summary"], question=doc["question"])
    assert "Options" not in first and not any(text in first for _letter, text in doc["options"])
    as_text = binding.doc_to_text({**doc, "mode": "text"})  # vr_bench_text_two_phase: the LLM prompt
    assert as_text == PAPER_PROMPT.format(basis="video summary", summary=doc["video_summary"], question=doc["question"])

    reply = "<think>Which steps?</think><Step 1> They explore the ruins.\n<Answer> They value history."
    visuals, second, done, outputs, info = binding.doc_to_text(doc, lmms_eval_specific_kwargs={"visual_mode": "video"},
                                                               previous_output=[reply], round_idx=1, previous_round_info=None)
    assert (visuals, done, outputs, info) == ([], False, None, None)  # round 2 is text only
    options = "\n".join(f"{letter}: {text}" for letter, text in doc["options"])
    assert second == (f"# Your Reasoning\n<Step 1> They explore the ruins.\n<Answer> They value history.\n\n"
                      f"Based on your reasoning above, choose the best option.\n\n# Multiple Choice Question\n"
                      f"Question: {doc['question']}\nOptions:\n{options}\n\n# Output Format:\n<Answer> [Option letter]\n")

    _visuals, _text, done, [packed], _info = binding.doc_to_text(doc, previous_output=[reply, "<Answer> D"], round_idx=2)
    assert done and json.loads(packed) == {"rounds": [reply, "<Answer> D"]}
    record = binding.build_record(doc, packed)
    assert (record["response"], record["choice_response"], record["mcq_pred"]) == (reply, "<Answer> D", "D")


def test_a_response_without_both_rounds_names_the_fix(docs):
    doc = docs["TZk_p-q8Fzo_qa1"]
    for response in ("<Answer> D", json.dumps({"rounds": ["only one"]}), ["a", "b", "c"]):
        with pytest.raises(DataError, match="VRBench two-phase task: expected the two rounds' replies"):
            binding.build_record(doc, response)
    assert binding.build_record(doc, ["r1", "<Answer> D"])["mcq_pred"] == "D"  # a replay prediction's list


def test_scores_by_hand_against_a_local_judge(docs, monkeypatch):
    """Judge (`sample.oracle_judge_reply`): matching = factual = round(10 x steps repeated / 3), logical
    8 with an `<Answer>` line else 2, clarity 7; process = 0.4 m + 0.4 l + 0.1 m + 0.1 x 7."""
    ii, ll, ea, ii2 = (docs[f"TZk_p-q8Fzo_qa{n}"] for n in (1, 2, 4, 3))
    rounds = {
        # all 3 steps, a conclusion: 0.4*10 + 0.4*8 + 0.1*10 + 0.7 = 8.9; round 2 right (D)
        ii["sample_id"]: ["\n".join(f"<Step {n}> {s}" for n, s in enumerate(untimed_steps(ii), 1)) + "\n<Answer> They value it.",
                          "<Answer> D"],
        # 1 of 3 steps (3), no <Answer> (2): 1.2 + 0.8 + 0.3 + 0.7 = 3.0; round 1's \boxed{B} would be right,
        # round 2 says A: wrong
        ll["sample_id"]: [f"<Step 1> {untimed_steps(ll)[0]} \\boxed{{B}}", "I choose A."],
        # 2 of 3 steps (7), a conclusion: 2.8 + 3.2 + 0.7 + 0.7 = 7.4; round 2 right after its thinking
        ea["sample_id"]: ["\n".join(f"<Step {n}> {s}" for n, s in enumerate(untimed_steps(ea)[:2], 1)) + "\n<Answer> So.",
                          "<think>A? No.</think><Answer> D"],
        # round 2 failed: a model failure, never judged, wrong
        ii2["sample_id"]: ["<Step 1> x\n<Answer> y", "[LMMS_EVAL_REQUEST_FAILED] timeout"],
    }
    records = [binding.build_record(docs[sample_id], replies) for sample_id, replies in rounds.items()]
    with LocalJudgeServer(sample.oracle_judge_reply) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        metrics = score_records(binding, records)
        judged = [body["messages"][1]["content"] for body in server.requests]
    assert len(judged) == 3  # the failed record is not judged
    shown = [user.split("# Model's reasoning process and Answer\n", 1)[1].split("\n# Correct reasoning step", 1)[0] for user in judged]
    assert sorted(shown) == sorted(first for first, _second in list(rounds.values())[:3])  # the judge sees round 1 only
    assert not any(second in user for _first, second in rounds.values() for user in judged)
    assert metrics["mcq_accuracy"] == pytest.approx(100 * 2 / 4)
    assert metrics["process_score"] == pytest.approx(10 * (8.9 + 3.0 + 7.4) / 3)
    assert metrics["model_failed"] == 1 and metrics["judge_failed"] == 0


@pytest.mark.slow
def test_two_phase_through_lmms_eval(tmp_path, monkeypatch):
    """The sample and its replay predictions (two replies per question) through `python -m lmms_eval`,
    both two-phase tasks (the same replies: the same scores)."""
    out = tmp_path / "sample"
    write_sample(out, ("vrbench",))
    with LocalJudgeServer(sample.oracle_judge_reply) as server:
        env = {**env_for(out, ("vrbench",)), "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_CACHE": "off"}
        results = run_lmms_eval("vr_bench_two_phase,vr_bench_text_two_phase", tmp_path / "run", model_args=f"predictions={out / 'predictions.jsonl'}", env=env)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        [samples] = samples_files(tmp_path / "run", "vr_bench_two_phase")
        records = [json.loads(line)["mcq_accuracy"] for line in samples.read_text().splitlines()]
        rescored = score_records(binding, records)
    docs = binding.build_docs("judge", "default", two_phase=True)
    right = [extract_mcq_answer(sample.demo_response(doc, index)) == doc["answer"] for index, doc in enumerate(docs)]
    assert metric(results, "vr_bench_two_phase", "mcq_accuracy") == pytest.approx(100 * sum(right) / len(right))
    assert metric(results, "vr_bench_two_phase", "process_score") == pytest.approx(rescored["process_score"])
    for name in ("mcq_accuracy", "process_score", "overall"):
        assert metric(results, "vr_bench_text_two_phase", name) == pytest.approx(metric(results, "vr_bench_two_phase", name))
    by_id = {record["sample_id"]: record for record in records}
    for index, doc in enumerate(docs):
        first, second = sample.two_phase_replies(doc, index)
        assert (by_id[doc["sample_id"]]["response"], by_id[doc["sample_id"]]["choice_response"]) == (first, second)


def test_replay_answers_a_list_one_reply_per_round(tmp_path):
    from lmms_video_reasoning.utils.lmms.replay_model import PredictionsError, ReplayModel, load_predictions

    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"task": "t", "id": "q1", "response": ["reasoning", "<Answer> B"]}) + "\n")
    assert load_predictions(path) == {("t", "q1"): ("reasoning", "<Answer> B")}
    model = ReplayModel(predictions=str(path))
    model.task_dict = {"t": {"test": [{"sample_id": "q1"}]}}
    assert [model._respond("t", "test", 0) for _round in range(2)] == ["reasoning", "<Answer> B"]
    with pytest.raises(PredictionsError, match="has 2 replies .* and round 3 was asked"):
        model._respond("t", "test", 0)
    path.write_text(json.dumps({"id": "q1", "response": ["reasoning", 7]}) + "\n")
    with pytest.raises(PredictionsError, match="record 1: response must be a string .or a list of strings, one per round."):
        load_predictions(path)
