"""VRBench data and prompts: the real debug records, byte-exact prompts, what reaches the judge.

The judge runs over real HTTP (`LocalJudgeServer`); expected prompts are built from the
reference files by plain text replacement, independently of the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench_scoring import score_records
from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.core.roots import DataError, docs_dataset
from lmms_video_reasoning.vrbench import benchmark as binding
from lmms_video_reasoning.vrbench import data, prompts
from lmms_video_reasoning.vrbench import docs as vr_docs
from lmms_video_reasoning.vrbench import task as vr_task
from lmms_video_reasoning.vrbench.sample import oracle_judge_reply
from reference_data import prompt_dir
from lmms_video_reasoning.vrbench.scoring import extract_mcq_answer

RESPONSE = "Assistant: <Step 1> They explore the ruins.\n<Step 2> History matters to them.\n<Answer> A"


@pytest.fixture(scope="module")
def debug_records(reference_dir):
    return data.records_in(reference_dir / "vrbench" / "VRBench_debug.jsonl")


@pytest.fixture
def ref_prompt():
    return lambda name: (prompt_dir("vrbench") / name).read_bytes().decode("utf-8")


def test_prompt_files_are_verbatim_copies():
    """The installed package ships the committed official prompts (pinned by sha256 in the manifest)."""
    paths = sorted(prompt_dir("vrbench").glob("*.txt"))
    assert len(paths) == 8
    for path in paths:
        assert (prompts.PROMPTS_DIR / path.name).read_bytes() == path.read_bytes(), path.name


def test_debug_records_load_and_flatten(debug_records):
    docs = vr_docs.flatten(debug_records)
    assert len(docs) == sum(len(r["mcq"]) for r in debug_records) == 13
    first = docs[0]
    assert first["sample_id"] == "TZk_p-q8Fzo_qa1" and first["qa_key"] == "qa1"
    assert first["options"][3] == ["D", debug_records[0]["mcq"]["qa1"]["options"]["D"]]
    assert first["procedure"].splitlines()[0] == "<Step 1> A group of people explore the temple ruins, showing interest. [00:07:44->00:08:28]"
    types = {d["reasoning_type"] for d in docs}
    assert {"Counting Porblems", "Event Summarization", "Hypothetical Reasoning", "Event Prediction"} <= types
    synopsis = next(d for d in docs if d["reasoning_type"] == "Event Summarization")
    assert synopsis["steps"] == [] and synopsis["procedure"] == ""
    [videos] = data.media_kinds(Path("unused"), debug_records)  # what `lmms-vr prepare` checks
    assert sorted(videos.items) == ["VRBench/videos/v001/TZk_p-q8Fzo.mp4", "VRBench/videos/v001/eb5vwy4GSSs.mp4"]
    # Arrow-friendly: the documents become a dataset.
    assert len(docs_dataset(docs)) == 13


def test_malformed_record_is_named(debug_records):
    broken = json.loads(json.dumps(debug_records[1]))
    del broken["mcq"]["qa3"]["answer"]
    with pytest.raises(DataError, match=r"eb5vwy4GSSs, question qa3: missing field\(s\) answer"):
        vr_docs.flatten([broken])
    broken = json.loads(json.dumps(debug_records[1]))
    broken["mcq"]["qa2"]["reasoning_type"] = "Counting"
    with pytest.raises(DataError, match="unknown reasoning_type 'Counting'"):
        vr_docs.flatten([broken])
    for answer in (5, "E"):  # a gold answer no option has: the file is refused, naming the question
        broken = json.loads(json.dumps(debug_records[1]))
        broken["mcq"]["qa2"]["answer"] = answer
        with pytest.raises(DataError, match=rf"eb5vwy4GSSs, question qa2: answer {answer!r} is not one of the option "
                                            r"letters A, B, C, D; correct that record"):
            vr_docs.flatten([broken])


def test_inference_prompt_byte_exact(debug_records, ref_prompt):
    doc = vr_docs.flatten(debug_records)[0]
    qa = debug_records[0]["mcq"]["qa1"]
    mcq = "Question: " + qa["question"] + "\nOptions:\n" + "\n".join(f"{k}: {v}" for k, v in qa["options"].items())
    expected = ref_prompt("MCQ_COT_PROMPT.template.txt").replace("$multiple_choice_question", mcq).replace(
        "$video_summary", debug_records[0]["video_summary"]
    )
    assert binding.doc_to_text(doc) == expected
    doc["mode"] = "text"
    messages = binding.doc_to_messages(doc, {"visual_mode": "frames", "num_frames": 4})
    assert messages == [{"role": "user", "content": [{"type": "text", "text": expected}]}]


def steps_text(process: dict) -> str:
    return "\n".join(f"<Step {k}> {v}" for k, v in sorted(process.items(), key=lambda kv: int(kv[0])))


def fill(template: str, **fields) -> str:
    for name, value in fields.items():
        template = template.replace("{" + name + "}", value)
    return template


def run_judge(monkeypatch, debug_records, protocol):
    """Score the debug questions (+ one with a >10,000-char summary) through a real server."""
    long_video = json.loads(json.dumps(debug_records[1]))
    long_video["video_id"] = "long_summary"
    long_video["video_summary"] = debug_records[0]["video_summary"]  # 13,665 characters
    long_video["mcq"] = {"qa5": long_video["mcq"]["qa5"]}  # Event Prediction
    docs = vr_docs.flatten([*debug_records, long_video])
    for doc in docs:
        doc["mode"], doc["protocol"] = "judge", protocol
    records = [vr_task.build_record(doc, RESPONSE) for doc in docs]
    with LocalJudgeServer(oracle_judge_reply) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        metrics = score_records(binding, records)
        sent = {json.loads(json.dumps(body["messages"]))[1]["content"]: body for body in server.requests}
    return metrics, sent


def qa(records, video, key):
    record = next(r for r in records if r["video_id"] == video)
    return record, record["mcq"][key]


def test_default_judge_prompts_byte_exact(monkeypatch, debug_records, ref_prompt):
    metrics, sent = run_judge(monkeypatch, debug_records, "default")
    # Rated: 3 II/LL + 1 EA + 2 counting in video 1; EA + 2 counting + HR + EP in video 2; + 1 EP.
    assert len(sent) == 6 + 5 + 1
    _, question = qa(debug_records, "TZk_p-q8Fzo", "qa1")  # Implicit Inference
    user = fill(ref_prompt("UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"), question=question["question"], response=RESPONSE,
                procedure=steps_text(question["reasoning_process"]), answer=question["original_answer"])
    body = sent[user]
    assert body["messages"][0] == {"role": "system", "content": ref_prompt("UNIQUE_ANSWER_EVAL_SYSTEM_PROMPT_SEPARATE.txt")}
    assert body["temperature"] == 0
    # Counting is rated with the unique-answer prompt in the default protocol.
    _, counting = qa(debug_records, "TZk_p-q8Fzo", "qa5")
    assert any(counting["question"] in content and "<step_matching>" in b["messages"][0]["content"] for content, b in sent.items())
    # Non-unique prompt, summary cut to 10,000 characters.
    _, prediction = qa(debug_records, "eb5vwy4GSSs", "qa5")
    cut = debug_records[0]["video_summary"][:10_000]
    user = fill(ref_prompt("NON_UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"), video_summary=cut, question=prediction["question"],
                response=RESPONSE, answer=prediction["original_answer"], procedure=steps_text(prediction["reasoning_process"]))
    assert sent[user]["messages"][0]["content"] == ref_prompt("NON_UNIQUE_ANSWER_EVAL_SYSTEM_PROMPT_SEPARATE.txt")
    assert not any("What is the main point of this video?" in content for content in sent)  # synopsis: not rated
    assert metrics["judge_failed"] == 0 and 0 <= metrics["process_score"] <= 100


def test_official_judge_prompts_byte_exact(monkeypatch, debug_records, ref_prompt):
    metrics, sent = run_judge(monkeypatch, debug_records, "official")
    # Counting and synopsis are never sent: 3 + 1 (video 1), 1 + 2 (video 2), + 1.
    assert len(sent) == 8
    stripped = RESPONSE.strip("Assistant:")  # noqa: B005, PLE1310 - the official quirk
    assert stripped.startswith(" <Step 1>") and stripped.endswith("<Answer> ")
    _, question = qa(debug_records, "eb5vwy4GSSs", "qa1")  # Event Attribution
    # The swap: the reference answer under "Reasoning Step:", the steps under "Answer:".
    user = fill(ref_prompt("UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"), question=question["question"], response=stripped,
                procedure=question["original_answer"], answer=steps_text(question["reasoning_process"]))
    body = sent[user]
    assert "temperature" not in body
    _, hypothetical = qa(debug_records, "eb5vwy4GSSs", "qa4")
    user = fill(ref_prompt("NON_UNIQUE_ANSWER_EVAL_HUMAN_PROMPT_TEMPLATE.txt"), video_summary=debug_records[1]["video_summary"],
                question=hypothetical["question"], response=stripped, answer=steps_text(hypothetical["reasoning_process"]),
                procedure=hypothetical["original_answer"])
    assert user in sent
    assert not math.isnan(metrics["process_score"])


# lmms-eval's placeholder when an API model gives up (models/simple/openai.py); the official
# cascade reads "E" out of it (the last standalone a-e after punctuation is stripped).
MODEL_FAILURE = ("[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500 - "
                 "{'error': {'message': 'Internal Server Error', 'type': 'server_error'}}")


@pytest.mark.parametrize("protocol", ["default", "official"])
def test_model_failure_is_counted_not_judged(monkeypatch, debug_records, protocol):
    """The failure string is wrong for MCQ-O, never reaches the judge, and is counted apart."""
    docs = [d for d in vr_docs.flatten(debug_records) if d["reasoning_type"] == "Event Attribution"][:2]
    assert len(docs) == 2
    for doc in docs:
        doc["mode"], doc["protocol"] = "judge", protocol
    failed_doc = dict(docs[0], answer=extract_mcq_answer(MODEL_FAILURE))
    assert failed_doc["answer"] == "E"  # the cascade alone would score the failure as right
    failed = vr_task.build_record(failed_doc, MODEL_FAILURE)
    assert failed["model_failed"] is True and failed["mcq_pred"] is None
    assert failed["model_failure"].startswith("[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500")
    answered = vr_task.build_record(docs[1], RESPONSE.replace("<Answer> A", f"<Answer> {docs[1]['answer']}"))
    assert answered["model_failed"] is False and answered["model_failure"] is None

    with LocalJudgeServer(oracle_judge_reply) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        only_failure = score_records(binding, [failed])
        assert server.request_count == 0, "the failure string reached the judge"
        both = score_records(binding, [failed, answered])
        assert server.request_count == 1
        only_answered = score_records(binding, [answered])
        assert not any("LMMS_EVAL_REQUEST_FAILED" in json.dumps(body) for body in server.requests)

    assert only_failure["mcq_accuracy"] == 0 and only_failure["model_failed"] == 1 and only_failure["judge_failed"] == 0
    assert both["mcq_accuracy"] == 50 and both["model_failed"] == 1 and both["judge_failed"] == 0
    assert only_answered["model_failed"] == 0 and only_answered["process_score"] > 0
    if protocol == "default":
        # Left out of OE-P, like a judge failure: OE-P is the answered question's alone.
        assert math.isnan(only_failure["process_score"])
        assert both["process_score"] == pytest.approx(only_answered["process_score"])
    else:
        # Official: 0 in OE-P (the official script would have rated the error text).
        assert only_failure["process_score"] == 0
        assert both["process_score"] == pytest.approx(only_answered["process_score"] / 2)


def test_model_failure_in_the_mcq_task(debug_records):
    doc = dict(vr_docs.flatten(debug_records)[0], mode="mcq", protocol="default")
    records = binding.process_results_vr_bench_mcq(dict(doc, answer="E"), [MODEL_FAILURE])
    assert set(records) == set(vr_task.MCQ_METRICS) and "model_failed" in records
    metrics = score_records(binding, [records["mcq_accuracy"]])
    assert metrics["mcq_accuracy"] == 0 and metrics["model_failed"] == 1
    assert "judge_failed" not in metrics
    # Records logged before the flag existed are recognised from their response.
    legacy = {k: v for k, v in records["mcq_accuracy"].items() if k not in ("model_failed", "model_failure")}
    assert score_records(binding, [legacy])["model_failed"] == 1
