"""VCR-Bench tasks: data validation, model inputs per visual mode, judging through real HTTP,
and the sample benchmark end to end through `python -m lmms_eval`."""

from __future__ import annotations

import json
import math

import pytest
from bench_scoring import score_records
from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.core.roots import DataError, MediaError
from lmms_video_reasoning.vcr_bench import benchmark as binding
from lmms_video_reasoning.vcr_bench import data, sample, scoring
from lmms_video_reasoning.vcr_bench import docs as vcr_docs
from lmms_video_reasoning.vcr_bench import task as vcr_task


@pytest.fixture(scope="module")
def vcr_root(tmp_path_factory):
    from lmms_video_reasoning.utils.tools.sample import write_sample

    out = tmp_path_factory.mktemp("vcr_sample")
    write_sample(out, ("vcr_bench",))
    return out


@pytest.fixture
def docs(vcr_root, monkeypatch):
    monkeypatch.setenv("VCR_BENCH_ROOT", str(vcr_root / "vcr_bench"))
    return {doc["id"]: doc for doc in data.records_at()}


def judge_with(monkeypatch, responder):
    server = LocalJudgeServer(responder).start()
    monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
    return server


# ---------------------------------------------------------------- data


def test_sample_covers_every_dimension_type_and_duration(docs):
    assert {d["dimension_code"] for d in docs.values()} == set(vcr_docs.DIMENSIONS.values())
    assert {d["multiple_choice"] for d in docs.values()} == {True, False}
    assert {vcr_docs.duration_bucket(d["duration"]) for d in docs.values()} == {"short", "medium", "long"}
    assert docs[2]["answer"] == "[8, 30]" and docs[3]["answer"] == "[56,96,104,144]"


def test_bad_records_name_the_record():
    good = {"id": 7, "video_path": "video/x/a.mp4", "duration": 12, "dimension": "video temporal counting",
            "question": "q?", "multiple-choice": False, "choices": {}, "answer": "3", "reasoning": ["1. a"]}
    assert vcr_docs.record_to_doc(good, "r")["dimension_code"] == "vtc"
    with pytest.raises(DataError, match=r"record #0 \(id=7\).*unknown dimension 'Video Fun'"):
        data.records_to_docs([{**good, "dimension": "Video Fun"}], "f.json")
    with pytest.raises(DataError, match="missing field.*reasoning"):
        data.records_to_docs([{k: v for k, v in good.items() if k != "reasoning"}], "f.json")
    with pytest.raises(DataError, match="'reasoning' must be a list"):
        data.records_to_docs([{**good, "reasoning": "1. a"}], "f.json")
    with pytest.raises(DataError, match="duplicate id 7"):
        data.records_to_docs([good, good], "f.json")


@pytest.mark.parametrize("field, value, message", [
    ("duration", math.nan, r"id=7\).*duration must be a finite number of seconds >= 0, got nan"),
    ("duration", math.inf, r"id=7\).*duration must be a finite number.*got inf"),
    ("duration", -1, r"id=7\).*duration must be a finite number.*got -1"),
    ("answer", 5, r"id=7\).*answer 5 is not one of the option letters A, B, C, D; correct that record"),
    ("answer", "E", r"id=7\).*answer 'E' is not one of the option letters A, B, C, D"),
])
def test_bad_values_name_the_record_field_and_value(field, value, message):
    """A NaN duration would be bucketed `long` and a gold answer no option has scores every reply
    wrong: both refuse the file (in `prepare` and before generation), naming the record."""
    good = {"id": 7, "video_path": "video/x/a.mp4", "duration": 12, "dimension": "Video Plot Analysis",
            "question": "Why?A. a\nB. b\nC. c\nD. d\n", "multiple-choice": True,
            "choices": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer": "D", "reasoning": ["1. a"]}
    assert data.records_to_docs([good], "f.json")[0]["answer"] == "D"
    with pytest.raises(DataError, match=message):
        data.records_to_docs([{**good, field: value}], "f.json")


def test_option_letters_come_from_the_choices_else_the_question_text():
    question = "Why didn't he go?A. Hostile.\nB. Another woman.\nC. Another man.\n"
    assert vcr_docs.option_letters(question, {"A": "x", "B": "y", "C": "", "D": ""}) == ["A", "B"]
    assert vcr_docs.option_letters(question, {"A": "", "B": "", "C": "", "D": ""}) == ["A", "B", "C"]
    with pytest.raises(DataError, match="'A': the question has no options"):
        vcr_docs.record_to_doc({"id": 1, "video_path": "v.mp4", "duration": 1, "dimension": "vpa", "question": "Why?",
                            "multiple-choice": True, "choices": {}, "answer": "A", "reasoning": []}, "r")


@pytest.mark.parametrize("answer, ok", [("[13, 54]", True), ("[56,96,104,144]", True), ("Kitchen", True),
                                        ("[-3, 5]", False), ("[2, 1e999]", False)])
def test_time_answers_hold_finite_seconds(answer, ok):
    """An open answer that parses as an interval is scored by time IoU: its bounds must be seconds."""
    record = {"id": 3, "video_path": "v.mp4", "duration": 60, "dimension": "Video Temporal Grounding",
              "question": "When?", "multiple-choice": False, "choices": {}, "answer": answer, "reasoning": []}
    if ok:
        assert vcr_docs.record_to_doc(record, "r")["answer"] == answer
    else:
        with pytest.raises(DataError, match=r"answer '\[.*\]' (start|end) must be a finite number of seconds >= 0"):
            vcr_docs.record_to_doc(record, "r")


def test_missing_video_is_a_clear_error(docs, tmp_path, monkeypatch):
    doc = dict(docs[0], video_path="video/synthetic/nope.mp4")
    with pytest.raises(MediaError, match="nope.mp4.*VCR_BENCH_ROOT.*lmms-vr prepare vcr_bench"):
        binding.doc_to_visual(doc, {"visual_mode": "video"})


def test_broken_video_in_video_mode_is_a_clear_error_before_the_model(docs, vcr_root, tmp_path, monkeypatch):
    """Native-video models only get the path (and lmms-eval's qwen2_vl swallows a decode error),
    so video mode opens the file first; the prompt stays decode-free."""
    import shutil

    root = tmp_path / "vcr_bench"
    shutil.copytree(vcr_root / "vcr_bench", root)
    monkeypatch.setenv("VCR_BENCH_ROOT", str(root))
    doc = docs[0]
    video = root / data.VIDEO_DIR / doc["video_path"]
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 3])  # truncated: no decodable frame left
    for call in (binding.doc_to_visual, binding.doc_to_messages):
        with pytest.raises(MediaError, match=rf"{video.name}.*unusable.*lmms-vr prepare vcr_bench"):
            call(doc, {"visual_mode": "video"})
    assert binding.doc_to_text(doc, {"visual_mode": "video"}).startswith(doc["question"].rstrip())


# ---------------------------------------------------------------- model inputs


def test_video_mode_gives_the_path_and_the_cot_prompt(docs):
    doc = docs[0]
    assert binding.doc_to_visual(doc, {"visual_mode": "video"})[0].endswith("v1/videos/video/synthetic/shapes_short_a.mp4")
    text = binding.doc_to_text(doc, {"visual_mode": "video"})
    assert text == doc["question"].rstrip() + "\nPlease provide a step-by-step solution to the given question."
    assert binding.doc_to_text(doc, {"visual_mode": "video", "chain_of_thought": False}) == doc["question"].rstrip()
    messages = binding.doc_to_messages(doc, {"visual_mode": "video"})
    assert [part["type"] for part in messages[0]["content"]] == ["video", "text"]


def test_frames_mode_samples_64_frames_with_their_times(docs):
    doc = docs[15]  # the long video: 330 s at 1 fps -> 330 frames
    frames = binding.doc_to_visual(doc, {"visual_mode": "frames"})
    assert len(frames) == 64 and frames[0].size == (160, 120)
    text = binding.doc_to_text(doc, {"visual_mode": "frames"})
    expected_times = [round((i * 330 // 64) / 1.0, 1) for i in range(64)]
    assert text.startswith("The video is given as 64 frames, taken at these times: 0.0s, 5.0s, 10.0s, 15.0s, 20.0s, 25.0s, 30.0s,")
    assert f"{expected_times[-1]:.1f}s." in text and text.endswith("step-by-step solution to the given question.")
    # A frame shows what the video shows at its time: the green square (20-100 s) at frame 25 (25.0 s).
    green = frames[5].getpixel((48, 60))
    assert green[1] > 150 and green[0] < 100
    content = binding.doc_to_messages(doc, {"visual_mode": "frames"})[0]["content"]
    assert [part["type"] for part in content] == ["image"] * 64 + ["text"]


def test_one_frame_and_text_only(docs):
    frames = binding.doc_to_visual(docs[9], {"visual_mode": "one_frame"})  # 150 s at 2 fps: frame 150 = 75 s
    assert len(frames) == 1
    red = frames[0].getpixel((224, 72))  # red triangle (70-130 s, visible 70-75, 80-85, ...): off at 75.0 s
    assert red[0] < 100
    assert binding.doc_to_visual(docs[9], {"visual_mode": "none"}) == []
    assert "frames" not in binding.doc_to_text(docs[9], {"visual_mode": "one_frame"})


def test_visual_mode_override_and_bad_value(docs, monkeypatch):
    monkeypatch.setenv("VCR_BENCH_VISUAL_MODE", "frames")
    assert len(binding.doc_to_visual(docs[0], {"visual_mode": "video"})) == 64
    assert binding.doc_to_visual(docs[0], {"visual_mode": "none"}) == []  # ablations keep their input
    monkeypatch.setenv("VCR_BENCH_VISUAL_MODE", "audio")
    with pytest.raises(DataError, match="VCR_BENCH_VISUAL_MODE='audio' is not accepted"):
        binding.doc_to_text(docs[0], {"visual_mode": "video"})


def test_process_results_never_raises_and_carries_everything(docs):
    out = binding.process_results_vcr_cot(docs[5], ["resp"])
    record = out["accuracy"]
    assert set(out) == set(scoring.METRICS) and all(v.record is record for name, v in out.items() if name != "accuracy")
    assert record["reasoning"] == docs[5]["reasoning"] and record["response"] == "resp" and record["error"] is None
    assert record["model_failed"] is False and record["model_failure"] is None
    json.dumps(record)
    broken = binding.process_results_vcr_cot({"sample_id": "9"}, [None])["accuracy"]
    assert broken["error"] and broken["response"] == ""
    assert "cot_f1" not in binding.process_results_vcr_direct(docs[5], ["r"])
    assert "model_failed" in binding.process_results_vcr_direct(docs[5], ["r"])


PLACEHOLDER = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500 - {'error': 'injected'}"


def test_model_failure_placeholder_is_never_judged(docs, monkeypatch):
    """lmms-eval's placeholder for a failed API request: no judge request at all, wrong for
    accuracy, no CoT ratio, counted in model_failed and not in judge_failed."""
    record = binding.process_results_vcr_cot(docs[4], [PLACEHOLDER])["accuracy"]
    assert record["model_failed"] is True and record["model_failure"].startswith("[LMMS_EVAL_REQUEST_FAILED after 1")
    server = judge_with(monkeypatch, sample.oracle_judge_reply)
    try:
        metrics = score_records(binding, [record])
    finally:
        server.stop()
    assert server.request_count == 0
    assert metrics["accuracy"] == 0.0 and metrics["model_failed"] == 1 and metrics["judge_failed"] == 0
    assert all(math.isnan(metrics[name]) for name in scoring.COT_METRICS)


def test_model_failures_among_answers_count_wrong_and_leave_the_cot_means(docs, monkeypatch):
    table = sample.demo_table()["vcr_cot"]
    failed_ids = sorted(sample.DEMO_CORRECT["vcr_cot"])[:2]  # two questions the demo answers right
    responses = {i: PLACEHOLDER if i in failed_ids else table[i][0] for i in docs}
    server = judge_with(monkeypatch, sample.oracle_judge_reply)
    try:
        records = [vcr_task.build_record(docs[i], responses[i]) for i in sorted(docs)]
        metrics = score_records(binding, records)
        answered = score_records(binding, [r for r in records if not r["model_failed"]])
    finally:
        server.stop()
    assert not [b for b in server.requests if "LMMS_EVAL_REQUEST_FAILED" in json.dumps(b)]
    assert metrics["model_failed"] == 2 and metrics["judge_failed"] == 0 and answered["model_failed"] == 0
    assert metrics["accuracy"] == pytest.approx(100 * (len(sample.DEMO_CORRECT["vcr_cot"]) - 2) / 21)
    for name in scoring.COT_METRICS:  # the failed samples are out of the means, not zeros in them
        assert metrics[name] == pytest.approx(answered[name]), name


# ---------------------------------------------------------------- judging through HTTP


def test_failures_are_counted_and_never_dropped(docs, monkeypatch):
    """A recall reply that never parses: re-asked twice, then recorded as judge_failed."""
    monkeypatch.setenv("LMMS_VR_JUDGE_FAILED_SHARE", "0.5")  # 2 of 22 failed: the counting under the share
    broken_question = docs[10]["question"]

    def responder(body):
        content = body["messages"][0]["content"]
        if content.startswith("You are an expert system") and broken_question in content:
            return "I would rather not answer in JSON."
        return sample.oracle_judge_reply(body)

    server = judge_with(monkeypatch, responder)
    try:
        table = sample.demo_table()["vcr_cot"]
        records = [vcr_task.build_record(d, table[i][0]) for i, d in sorted(docs.items())]
        records.append({**binding.process_results_vcr_cot({"sample_id": "x"}, ["?"])["accuracy"], "dimension_code": "ftr",
                         "duration_bucket": "short", "multiple_choice": True})
        metrics = score_records(binding, records)
    finally:
        server.stop()
    assert metrics["judge_failed"] == 2  # the broken recall + the unprocessable record
    assert metrics["accuracy"] == pytest.approx(100 * len(sample.DEMO_CORRECT["vcr_cot"]) / 22)
    recall_calls = [b for b in server.requests if broken_question in b["messages"][0]["content"]
                    and b["messages"][0]["content"].startswith("You are an expert system")]
    assert len(recall_calls) == 3  # 1 + 2 bounded re-asks


def test_bare_letter_gets_no_precision_call(docs, monkeypatch):
    server = judge_with(monkeypatch, sample.oracle_judge_reply)
    try:
        record = vcr_task.build_record(docs[4], "A")  # correct bare letter
        metrics = score_records(binding, [record])
    finally:
        server.stop()
    kinds = [b["messages"][0]["content"][:20] for b in server.requests]
    assert not any(k.startswith("\n# Task Overview") for k in kinds)  # no precision judge
    assert metrics["reasoning_precision"] == 100.0 and math.isnan(metrics["perception_precision"])
    assert metrics["accuracy"] == 100.0


def test_background_setting_changes_overall(docs, monkeypatch):
    server = judge_with(monkeypatch, sample.oracle_judge_reply)
    try:
        record = vcr_task.build_record(docs[5], "Nothing useful. So the answer is the magenta circle.")
        default = score_records(binding, [record])
        included = score_records(binding, [record], {"include_background": True})
    finally:
        server.stop()
    # Reference of id 5: 1 background + 2 perception + 1 inference step, none matched.
    assert default["cot_recall"] == 0.0 and included["cot_recall"] == 0.0
    assert default["accuracy"] == 100.0


def test_no_judge_means_nan_not_a_score(docs, monkeypatch, caplog):
    for name in ("LMMS_VR_JUDGE_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_URL", "LMMS_VR_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    records = [vcr_task.build_record(d, "A") for d in docs.values()]
    records[0] = vcr_task.build_record(docs[0], PLACEHOLDER)
    with caplog.at_level("WARNING"):
        metrics = score_records(binding, records)
    assert metrics.pop("model_failed") == 1  # needs no judge
    assert metrics.pop("reasoning_truncated") == 0  # nor does this count
    assert all(math.isnan(v) for v in metrics.values())
    assert "none of the 21 samples is scored" in caplog.text


# ---------------------------------------------------------------- end to end


@pytest.mark.slow
def test_sample_benchmark_through_lmms_eval(vcr_root, monkeypatch, tmp_path):
    from lmms_cli import metric, run_lmms_eval

    server = judge_with(monkeypatch, sample.oracle_judge_reply)
    try:
        results = run_lmms_eval("vcr_bench_all", tmp_path / "out", model_args=f"predictions={vcr_root / 'predictions.jsonl'}",
                                env={"VCR_BENCH_ROOT": str(vcr_root / "vcr_bench")})
    finally:
        server.stop()
    for task, correct in sample.DEMO_CORRECT.items():
        assert metric(results, task, "accuracy") == pytest.approx(100 * len(correct) / 21), task
        assert metric(results, task, "judge_failed") == 0
    for name in scoring.METRICS:
        value = metric(results, "vcr_cot", name)
        assert not math.isnan(value) and 0 <= value <= 100, name  # present, computed, on the 0-100 scale
    assert metric(results, "vcr_cot", "cot_precision") < 100  # the wrong steps of ids 6 and 18 count
    assert "cot_f1,none" not in results["results"]["vcr_direct"]
    accounting = json.loads(next((tmp_path / "out").rglob("*_judge_accounting_vcr_bench.json")).read_text())
    assert accounting["stats"]["failures"] == 0 and accounting["stats"]["calls"] == server.request_count
