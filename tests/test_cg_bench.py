"""CG-Bench: prompts, parsing, tIoU and metric arithmetic, data validation, the open-ended judge flow."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from bench_scoring import score_records
from lmms_video_reasoning.cg_bench import data, frames, judging, prompts, sample, scoring
from lmms_video_reasoning.cg_bench import benchmark as binding
from lmms_video_reasoning.cg_bench import task as cg_task
from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.judges.parsing import ParseError
from lmms_video_reasoning.cg_bench import docs as cg_docs
from lmms_video_reasoning.utils.core.records import records_of
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.data import media_index
from reference_data import REPO, prompt_dir

OFFICIAL = ("long_acc", "clue_acc", "miou", "open", "eval_open_step_1", "eval_open_step_2")


@pytest.fixture(scope="module")
def cg_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cg_sample")
    sample.write_sample(root)
    return root


@pytest.fixture
def cg_env(cg_root, monkeypatch):
    monkeypatch.setenv("CGBENCH_ROOT", str(cg_root))
    return cg_root


# ---------------------------------------------------------------------- prompts


@pytest.mark.parametrize("name", OFFICIAL)
def test_system_prompts_are_byte_exact(name):
    expected = (prompt_dir("cg_bench") / f"{name}.txt").read_bytes()  # the committed official copy (sha256 in the manifest)
    assert prompts.load_prompt(name).encode("utf-8") == expected
    assert (prompts.PROMPTS_DIR / f"{name}.txt").read_bytes() == expected


def test_prompt_text_assembled_as_the_runner():
    subtitles = "The subtitles of the video are as follows:\n\n[1.5, 3.0] hello there\n\n"
    text = prompts.model_prompt("long", "What is it?", ["Red", "Blue"], subtitles, prompts.frame_times_block([0, 15, 31], 30.0))
    assert text == (
        prompts.load_prompt("long_acc")
        + "The subtitles of the video are as follows:\n\n[1.5, 3.0] hello there\n\n"
        + "A total of 3 frames are sampled. Their corresponding timestamps are:\n\n0.0, 0.5, 1.0333\n\n"
        + "Question: What is it?\n\nA:Red\nB:Blue\n\n"
    )
    # open-ended lists no options; grounding uses the miou prompt and lists them
    assert prompts.model_prompt("open", "Why?", ["x"]) == prompts.load_prompt("open") + "Question: Why?\n\n"
    assert prompts.model_prompt("grounding", "Q", ["x"]).startswith(prompts.load_prompt("miou") + "Question: Q\n\nA:x\n\n")


def test_judge_texts_quote_reference_and_prediction():
    assert prompts.judge_step1_text("Q?", "Red", "Crimson") == (
        prompts.load_prompt("eval_open_step_1") + "Question: Q?\n\nThe ground truth answer is 'Red'\n\nThe model's prediction is 'Crimson'\n\n"
    )
    step2 = prompts.judge_step2_text("Q?", "Crimson", "SUBS", "TIMES")
    assert step2 == prompts.load_prompt("eval_open_step_2") + "SUBSTIMESQuestion: Q?\n\nThe model's prediction is 'Crimson'\n\n"
    assert "ground truth" not in step2


def test_blind_prompt_is_the_papers_text():
    text = prompts.blind_prompt("Which <Choices> one?", ["x", "y"])
    assert text.startswith("Task description:\n\nYou will be read a multiple-choice question related to a visual task.")
    assert "Multiple-choice question:\n\nWhich <Choices> one?\nA. x\nB. y\n\nImportant:\n\n" in text
    assert text.endswith("Your output is:\n")


def test_doc_to_text_on_sample_frames_and_video_modes(cg_env):
    docs = cg_task.build_docs(data.records_at(split="mini"), "long", "mini")
    doc = next(d for d in docs if d["video_uid"] == "cgsample_park")
    frames_text = binding.doc_to_text(doc, {"visual_mode": "frames", "long_frames": 4})
    # 180 s at 2 fps: max_frame 359, 4 segment centres int(seg/2 + round(seg*i)) with seg = 89.75
    plan = binding.MEDIA.plan("cgsample_park", frames.LONG_PLAN, 4)
    assert list(plan.indices) == [44, 134, 224, 313]
    expected_times = "A total of 4 frames are sampled. Their corresponding timestamps are:\n\n22.0, 67.0, 112.0, 156.5\n\n"
    expected_subs = ("The subtitles of the video are as follows:\n\n[18.0, 42.0] Look, a ball rolls in\n"
                     "[58.0, 92.0] Now something slides across\n\n")
    assert frames_text == prompts.load_prompt("long_acc") + expected_subs + expected_times + "Question: " + doc["question"] + "\n\n" + "".join(f"{letter}:{choice}\n" for letter, choice in zip("ABCDEFGH", doc["choices"])) + "\n"
    video_text = binding.doc_to_text(doc, {"visual_mode": "video", "long_frames": 4})
    assert "A total of" not in video_text and expected_subs in video_text


def test_a_table_entry_that_disagrees_with_the_file_gives_way_with_a_warning(cg_root, tmp_path, monkeypatch, caplog):
    """The frame table's metadata check (`utils.media.video.resolve_meta`) runs for CG-Bench too:
    an entry describing another encoding of the video (here 3x the frames at 6 fps) gives way to
    the file, with the warning the check gives every benchmark, and prompt and frames agree."""
    import logging

    root = tmp_path / "root"
    shutil.copytree(cg_root, root)
    table = json.loads((root / cg_docs.META_FILE).read_text())
    table["cgsample_park"] = {"duration": 180.0, "max_frame": 1079, "fps": 6.0}  # the file: 360 frames at 2 fps
    (root / cg_docs.META_FILE).write_text(json.dumps(table))
    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    doc = next(d for d in cg_task.build_docs(data.records_at(split="mini"), "long", "mini") if d["video_uid"] == "cgsample_park")
    with caplog.at_level(logging.WARNING):
        text = binding.doc_to_text(doc, {"visual_mode": "frames", "long_frames": 4})
    assert "metadata (1079 frames at 6.0000 fps) disagrees with the video file" in caplog.text and "cgsample_park.mp4" in caplog.text
    plan = binding.MEDIA.plan("cgsample_park", frames.LONG_PLAN, 4)
    assert (plan.total_frames, plan.fps) == (360, 2.0) and any("disagrees" in note for note in plan.notes)
    assert plan.indices == frames.long_indices(360, 4) != frames.long_indices(1079, 4)
    assert prompts.frame_times_block(plan.indices, plan.fps) in text  # the times of the frames the model sees
    assert len(binding.doc_to_visual(doc, {"visual_mode": "frames", "long_frames": 4})) == 4
    clue = binding.MEDIA.plan("cgsample_park", frames.CLUE_PLAN, 4, doc["clue_intervals"])
    assert clue.fps == 2.0 and all(index < 360 for index in clue.indices)


def test_the_prompt_needs_no_video_the_frames_do(cg_root, tmp_path, monkeypatch):
    """Replay predictions are scored where the videos are not: the prompt text uses the table's
    values unchecked (noted); reading frames names the missing file and the fix."""
    from lmms_video_reasoning.utils.core.roots import MediaError

    root = tmp_path / "root"
    shutil.copytree(cg_root, root)
    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    doc = next(d for d in cg_task.build_docs(data.records_at(split="mini"), "long", "mini") if d["video_uid"] == "cgsample_park")
    expected = binding.doc_to_text(doc, {"visual_mode": "frames", "long_frames": 4})
    (root / data.VIDEO_DIR / "cgsample_park.mp4").unlink()
    media_index.forget()
    assert binding.doc_to_text(doc, {"visual_mode": "frames", "long_frames": 4}) == expected
    unchecked = binding.MEDIA.plan("cgsample_park", frames.LONG_PLAN, 4)
    assert unchecked.path is None and unchecked.indices == [44, 134, 224, 313] and "not checked" in unchecked.notes[0]
    with pytest.raises(MediaError, match="cgsample_park.mp4.*lmms-vr prepare cg_bench"):
        binding.doc_to_visual(doc, {"visual_mode": "frames", "long_frames": 4})


def test_visuals_per_mode(cg_env):
    records = data.records_at(split="mini")
    clue_docs = cg_task.build_docs(records, "clue", "mini")
    with_clip = next(d for d in clue_docs if d["qid"] % 2 == 0 and len(d["clue_intervals"]) == 1)
    assert binding.doc_to_visual(with_clip, {"visual_mode": "video"}) == [str(cg_env / "cg_clue_videos" / f"{with_clip['qid']}.mp4")]
    part = binding.doc_to_messages(with_clip, {"visual_mode": "video"})[0]["content"][0]
    assert part["start_time"] == with_clip["clue_intervals"][0][0] and part["end_time"] == with_clip["clue_intervals"][0][1]
    frames = binding.doc_to_visual(with_clip, {"visual_mode": "frames", "clue_frames": 8})
    assert len(frames) == 8 and frames[0].size == (sample.WIDTH, sample.HEIGHT)
    blind = cg_task.build_docs(records, "blind", "mini")[0]
    assert binding.doc_to_visual(blind, {}) == [] and binding.doc_to_messages(blind, {})[0]["content"][0]["type"] == "text"
    with pytest.raises(ValueError, match="visual_mode"):
        binding.doc_to_text(clue_docs[0], {"visual_mode": "pixels"})
    with pytest.raises(ValueError, match="no subtitle input: set subtitles: false"):  # hooks handing no subtitle source
        cg_task.doc_to_text(clue_docs[0], {}, binding.MEDIA)
    assert cg_task.doc_to_text(clue_docs[0], {"subtitles": False}, binding.MEDIA) == binding.doc_to_text(clue_docs[0], {"subtitles": False})


# ---------------------------------------------------------------------- parsing


@pytest.mark.parametrize("reply, official, strict", [
    ('```json\n{"result": "B"}\n```', True, True),
    ('```json\n{"result": "C"}\n```', False, False),
    ('```json\n{"result": B}\n```', True, True),  # bare word quoted
    ('```json\n{"result": "B"\n```', True, True),  # broken JSON: letter fallback
    ("I think A or B", True, True),  # any letter (official), last letter (strict)
    ("B, not A", True, False),
    ('```json\n{"result": "b"}\n```', False, False),  # JSON decides officially; strict: not a letter, none in the reply
    ("I cannot tell.", None, False),
    ("", None, False),
])
def test_parse_mcq(reply, official, strict):
    assert scoring.parse_mcq(reply, "B")[0] is official
    assert scoring.parse_mcq(reply, "B", strict=True)[0] is strict


@pytest.mark.parametrize("reply, official, strict", [
    ('```json\n{"result": [[10, 20], [30.5, 40]]}\n```', 10 / 31.5, 10 / 31.5),  # union 10 + 9.5 + 22 - 10
    ("The clue is at 10-20 seconds", 0.04, 0.04),  # official pairing (10, -20), reversed read as [-20, 10]
    ('```json\n{"result": [["0:10", "0:20"]]}\n```', None, 0.0),  # strings raise; fallback pairs overlap: left out
    ("From 0:10 to 0:25.", None, 0.0),  # the example: officially no result saved
    ('```json\n{"result": [[10, Infinity]]}\n```', 0.0, 0.0),  # JSON Infinity as json.loads reads it
    ('```json\n{"result": [[true, 20]]}\n```', 12 / 29, 12 / 29),  # true is 1
    ('```json\n{"result": null}\n``` 8 30', 0.0, 0.0),  # null: empty prediction, no fallback
    ("At about 12 seconds.", None, 0.0),  # odd count: unparseable
    ("Somewhere in the middle.", 0.0, 0.0),  # no numbers: official tIoU 0
    ("", None, 0.0),
])
def test_grounding_tiou(reply, official, strict):
    value, how = scoring.grounding_tiou(reply, [[8, 30]])
    assert (value is None and official is None) or value == pytest.approx(official)
    assert (how == "failed") is (official is None)
    assert scoring.grounding_tiou(reply, [[8, 30]], strict=True)[0] == pytest.approx(strict)


def test_reversed_intervals_official_setting():
    reply = '```json\n{"result": [[8, 30], [100, 90]]}\n```'
    assert scoring.grounding_tiou(reply, [[8, 30]])[0] == pytest.approx(22 / 32)
    assert scoring.grounding_tiou(reply, [[8, 30]], reversed_as_official=True)[0] == pytest.approx(22 / 12)  # > 1, as officially


def test_parse_open_and_judge_verdicts():
    assert scoring.parse_open('```json\n{"result": "A red ball"}\n```') == "A red ball"
    assert scoring.parse_open("Just prose") == "Just prose"
    assert scoring.parse_open("   ") == "   "  # officially judged
    assert scoring.parse_open("   ", strict=True) is None and scoring.parse_open("") is None
    assert scoring.parse_open('```json\n{"result": null}\n```') == '```json\n{"result": null}\n```'
    assert scoring.parse_open('```json\n{"result": ["a", 1]}\n```') == "['a', 1]"  # Python's str()
    assert scoring.parse_open('```json\n{"result": true}\n```') == "True"
    assert scoring.judge_verdict('```json\n{"result": 2}\n```', (0, 1, 2)) == 2
    # Step 1: only a result `in [0, 1]` is final; -1, 10 and "1" go to step 2; true is 1.
    for result, verdict in (("-1", 2), ("10", 2), ('"1"', 2), ("true", 1), ("1.0", 1), ("false", 0)):
        assert scoring.judge_verdict('```json\n{"result": %s}\n```' % result, (0, 1, 2)) == verdict
    # Step 2: right iff the result == 1 (2 or "1" are wrong, not re-asked).
    assert scoring.judge_verdict('```json\n{"result": 2}\n```', (0, 1)) == 0
    assert scoring.judge_verdict('```json\n{"result": "1"}\n```', (0, 1)) == 0
    assert scoring.judge_verdict("Verdict: 1", (0, 1)) == 1
    with pytest.raises(ParseError):
        scoring.judge_verdict("no idea", (0, 1))


# ---------------------------------------------------------------------- tIoU and metrics


def test_threshold_means_use_greater_or_equal():
    def answer(qid, mode, value):
        return cg_task.Outcome(qid, mode, value, False, 60, "d", "perception")

    # thresholds 0.1..0.5 pass 3, 2, 1, 1, 1 of 4 questions
    grounded = cg_task.task_metrics([answer(qid, "grounding", iou) for qid, iou in enumerate((0.1, 0.25, 0.5, 0.05))], whole=False)
    assert grounded["rec_at_iou"] == pytest.approx(100 * (0.75 + 0.5 + 0.25 + 0.25 + 0.25) / 5)
    joined = [answer(qid, mode, value) for qid, long, iou in ((1, 1.0, 0.5), (2, 0.0, 0.5), (3, 1.0, 0.15))
              for mode, value in (("long", long), ("grounding", iou))]
    assert cg_task.task_metrics(joined, whole=False)["acc_at_iou"] == pytest.approx(100 * (2 / 3 + 4 * 1 / 3) / 5)
    assert math.isnan(cg_task.task_metrics([answer(1, "long", 1.0)], whole=False)["rec_at_iou"])


def test_crr_arithmetic():
    assert round(scoring.crr(45.2, 58.3), 1) == 77.5
    assert scoring.crr(60.0, 50.0) == 100.0
    assert math.isnan(scoring.crr(10.0, 0.0))


def test_duration_buckets_and_kinds():
    assert [scoring.duration_bucket(m * 60) for m in (3, 10, 10.5, 59, 60, 61)] == ["0-10", "0-10", "10-20", "50-60", "50-60", "60+"]
    assert [scoring.question_kind(s) for s in ("Entity Perception", "Time Cognition", "Hallucination")] == list(scoring.KINDS)


def _record(qid, mode, response, right="B", intervals=((10.0, 20.0),)):
    doc = {"sample_id": f"{qid}:{mode}", "task_kind": "mcq", "mode": mode, "qid": qid, "video_uid": "v", "question": "Q",
           "answer": "Red", "right_answer": right, "clue_intervals": [list(i) for i in intervals], "domain": "GUI",
           "sub_category": "Entity Perception", "duration": 700}
    return binding.build_record(doc, response)


def test_score_records_joins_modes_per_qid():
    fenced = lambda v: "```json\n" + json.dumps({"result": v}) + "\n```"
    records = [
        _record(1, "long", fenced("B")), _record(1, "clue", fenced("B")), _record(1, "grounding", fenced([[10, 20]])),
        _record(2, "long", fenced("A")), _record(2, "clue", fenced("B")), _record(2, "grounding", fenced([[10, 20]])),
        _record(3, "long", "no idea"), _record(3, "clue", fenced("A")), _record(3, "grounding", fenced([[15, 25]])),
    ]
    scores = score_records(binding, records)
    assert scores["long_acc"] == pytest.approx(50.0)  # qid 3 unparseable: left out
    assert scores["clue_acc"] == pytest.approx(200 / 3)
    assert scores["crr"] == pytest.approx(100 * 50 / (200 / 3))
    assert scores["miou"] == pytest.approx(100 * (1 + 1 + 1 / 3) / 3)
    assert scores["acc_at_iou"] == pytest.approx(50.0)  # qids 1 and 2 only; qid 1 passes every threshold
    assert scores["parse_failed"] == 1
    assert scores["breakdown"]["kind"]["perception"]["n"] == 9
    strict = score_records(binding, records, {"strict": True})
    assert strict["long_acc"] == pytest.approx(100 / 3) and strict["parse_failed"] == 1
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['strct'\]; expected judge or a task option \(.*strict"):
        score_records(binding, records, {"strct": True})  # a misspelt option is an error, never the default


# The placeholder lmms-eval returns when an API model gives up; its error text holds the right
# letter and an even count of numbers, so a parser would read an answer out of it.
FAILED_REPLY = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500 - B upstream 10 20 B"


@pytest.mark.parametrize("strict", [False, True])
def test_model_failure_is_a_missing_answer_in_every_mode(strict):
    fenced = lambda v: "```json\n" + json.dumps({"result": v}) + "\n```"
    failed = [_record(1, mode, FAILED_REPLY) for mode in ("long", "clue", "grounding")]
    assert all(r["model_failed"] is True and r["model_failure"].startswith("[LMMS_EVAL_REQUEST_FAILED after 1 retries]") for r in failed)
    assert _record(2, "long", fenced("B"))["model_failed"] is False and _record(2, "long", fenced("B"))["model_failure"] is None
    records = failed + [_record(2, "long", fenced("B")), _record(2, "clue", fenced("B")), _record(2, "grounding", fenced([[10, 20]]))]
    scores = score_records(binding, records, {"strict": strict})
    # qid 1 counts as wrong / tIoU 0 in every denominator (parsed, it would be right and IoU 1)
    assert scores["long_acc"] == scores["clue_acc"] == pytest.approx(50.0)
    assert scores["miou"] == pytest.approx(50.0) and scores["rec_at_iou"] == pytest.approx(50.0)
    assert scores["acc_at_iou"] == pytest.approx(50.0)
    assert scores["model_failed"] == 3 and scores["parse_failed"] == 0
    assert scores["breakdown"]["model_failed_by_mode"] == {"long": 1, "clue": 1, "grounding": 1}
    blind = score_records(binding, [{**_record(3, "blind", FAILED_REPLY), "task_kind": "blind"}], {"strict": strict})
    assert blind["blind_acc"] == 0.0 and blind["model_failed"] == 1 and blind["parse_failed"] == 0


def test_model_failure_recognised_in_records_logged_without_the_mark():
    record = _record(1, "long", FAILED_REPLY)
    del record["model_failed"], record["model_failure"]
    scores = score_records(binding, [record])
    assert scores["long_acc"] == 0.0 and scores["model_failed"] == 1


def test_process_results_marks_the_failure_under_every_metric(cg_env):
    doc = cg_task.build_docs(data.records_at(split="mini"), "long", "mini")[0]
    result = binding.process_results_cg_bench_long(doc, [FAILED_REPLY])
    assert set(result) == set(cg_task.METRICS["long"]) and "model_failed" in result
    [record] = [value for value in result.values() if isinstance(value, dict)]  # once; SameRecords name it elsewhere
    assert records_of(result.values()) == [record] * len(result)
    assert record["model_failed"] is True and record["response"] == FAILED_REPLY


# ---------------------------------------------------------------------- data


def test_real_mini_annotations_load_and_validate(reference_dir, tmp_path, monkeypatch):
    shutil.copy(reference_dir / "cg_bench" / "cgbench_mini.json", tmp_path / "cgbench_mini.json")
    shutil.copy(REPO / "cg_bench" / "video_meta_info.json", tmp_path / "video_meta_info.json")  # the committed official copy
    monkeypatch.setenv("CGBENCH_ROOT", str(tmp_path))
    records = data.records_at(split="mini")
    assert len(records) == 3000 and len({r["video_uid"] for r in records}) == 1118
    assert all(r["video_uid"] in data.meta_table(data.data_root(data.CG_BENCH)) for r in records)
    docs = cg_task.build_docs(records, "mcq", "mini")
    assert len(docs) == 9000 and docs[1]["sample_id"] == f"{records[0]['qid']}:clue"
    assert {scoring.question_kind(r["sub_category"]) for r in records} == set(scoring.KINDS)


def test_malformed_record_is_named():
    good = {"qid": 7, "video_uid": "v", "question": "Q", "answer": "x", "choices": ["x", "y", "z", "w", "u"],
            "right_answer": "A", "clue_intervals": [[1, 2]], "domain": "GUI", "sub_category": "Hallucination", "duration": 600}
    assert cg_docs.validate_record(good, "f.json #0")["clue_intervals"] == [[1.0, 2.0]]
    with pytest.raises(DataError, match=r"qid 7.*right_answer 'F'"):
        cg_docs.validate_record({**good, "right_answer": "F"}, "f.json #0")
    with pytest.raises(DataError, match=r"qid 7.*clue interval \[5, 2\]"):
        cg_docs.validate_record({**good, "clue_intervals": [[5, 2]]}, "f.json #0")
    with pytest.raises(DataError, match="missing field"):
        cg_docs.validate_record({"qid": 1}, "f.json #3")


@pytest.mark.parametrize("field, value, message", [
    ("duration", math.nan, r"qid 7.*duration must be a finite number of seconds > 0, got nan"),
    ("duration", math.inf, r"qid 7.*duration must be a finite number of seconds > 0, got inf"),
    ("clue_intervals", [[1, math.nan]], r"qid 7.*clue interval \[1, nan\] end must be a finite number of seconds >= 0"),
    ("clue_intervals", [[-2, 3]], r"qid 7.*clue interval \[-2, 3\] start must be"),
    ("right_answer", "5", r"qid 7.*right_answer '5' is not one of the option letters A, B, C, D, E; correct that record"),
])
def test_bad_values_name_the_question_field_and_value(field, value, message):
    """A NaN duration (bucketed `60+`) or a gold letter past the options: the file is refused, naming the question."""
    good = {"qid": 7, "video_uid": "v", "question": "Q", "answer": "x", "choices": ["x", "y", "z", "w", "u"],
            "right_answer": "A", "clue_intervals": [[1, 2]], "domain": "GUI", "sub_category": "Hallucination", "duration": 600}
    with pytest.raises(DataError, match=message):
        data.validate_records([good, {**good, "qid": 8}, {**good, field: value}], "f.json")


@pytest.mark.parametrize("entry, message", [
    ({"duration": math.nan, "max_frame": 100, "fps": 25.0}, "duration must be a finite number of seconds >= 0, got nan"),
    ({"duration": 4.0, "max_frame": 100, "fps": math.nan}, "fps must be a finite number of frames per second > 0, got nan"),
    ({"duration": 4.0, "max_frame": math.inf, "fps": 25.0}, "max_frame must be a finite number of frames > 0, got inf"),
])
def test_bad_frame_table_values_name_the_video(entry, message, tmp_path):
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"  # json writes nan and inf as NaN and Infinity, and reads them back
    bad.write_text(json.dumps({"v0": {"duration": 4.0, "max_frame": 100, "fps": 25.0}, "v1": entry}))
    good.write_text(json.dumps({"v1": {"max_frame": 100, "fps": 25.0}}))
    with pytest.raises(DataError, match=f"bad.json entry 'v1': {message}"):
        cg_docs.read_meta(bad)
    assert cg_docs.read_meta(good)["v1"].duration == 4.0


def test_missing_video_error_names_file_and_fix(cg_env):
    with pytest.raises(DataError, match=r"cg_videos_720p/nope\.mp4.*CGBENCH_ROOT.*lmms-vr prepare cg_bench"):
        data.video_path("nope")


def test_media_found_by_name_in_nested_folders(cg_root, tmp_path, monkeypatch):
    nested = tmp_path / "cg_videos_720p_part1" / "inner"
    nested.mkdir(parents=True)
    shutil.copy(cg_root / "cg_videos_720p" / "cgsample_park.mp4", nested / "cgsample_park.mp4")
    monkeypatch.setenv("CGBENCH_ROOT", str(tmp_path))
    assert data.video_path("cgsample_park") == nested / "cgsample_park.mp4"
    assert binding.MEDIA.subtitle_path("cgsample_park") is None


# ---------------------------------------------------------------------- open-ended judge


def test_open_judge_two_steps_with_frames(cg_env, tmp_path, monkeypatch):
    from lmms_video_reasoning.judges import LocalJudgeServer

    questions = [q for q in sample.build_questions()[:-sample.MINI_EXCLUDED] if q["answer"] in sample.SYNONYMS][:3]
    docs = {d["qid"]: d for d in cg_task.build_docs(data.records_at(split="mini"), "open", "mini")}
    fenced = lambda v: "```json\n" + json.dumps({"result": v}) + "\n```"
    replies = [fenced(questions[0]["answer"]), fenced(sample.SYNONYMS[questions[1]["answer"]]), fenced("A purple hexagon"), ""]
    records = [binding.build_record(docs[q["qid"]], r) for q, r in zip(questions + questions[:1], replies)]

    with LocalJudgeServer(responder=sample.oracle_judge_reply) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        scores = score_records(binding, records)
        bodies = list(server.requests)

    # right (step 1 -> 1), synonym (step 1 -> 2, step 2 -> 1), wrong (0); the empty reply is left out
    assert scores["oe_acc"] == pytest.approx(200 / 3) and scores["parse_failed"] == 1
    assert len(bodies) == 4
    step1 = [b for b in bodies if b["messages"][0]["content"][-1]["text"].startswith(prompts.load_prompt("eval_open_step_1"))]
    step2 = [b for b in bodies if b["messages"][0]["content"][-1]["text"].startswith(prompts.load_prompt("eval_open_step_2"))]
    assert len(step1) == 3 and len(step2) == 1
    assert all(len(b["messages"][0]["content"]) == 1 and b["temperature"] == 0.0 for b in step1)
    expected = prompts.judge_step1_text(questions[0]["question"], questions[0]["answer"], questions[0]["answer"])
    assert expected in [b["messages"][0]["content"][0]["text"] for b in step1]
    content = step2[0]["messages"][0]["content"]
    plan = binding.MEDIA.plan(questions[1]["video_uid"], frames.CLUE_PLAN, frames.DEFAULT_CLUE_FRAMES, questions[1]["clue_intervals"])
    images = [part for part in content if part["type"] == "image_url"]
    assert len(images) == len(plan.indices) > 0
    assert images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,") and images[0]["image_url"]["detail"] == "low"
    assert prompts.frame_times_block(plan.indices, plan.fps) in content[-1]["text"]
    assert "ground truth" not in content[-1]["text"]


def _open_records(n):
    questions = sample.build_questions()[:-sample.MINI_EXCLUDED][:n]
    docs = {d["qid"]: d for d in cg_task.build_docs(data.records_at(split="mini"), "open", "mini")}
    return questions, [docs[q["qid"]] for q in questions]


def test_open_model_failure_is_never_judged(cg_env, monkeypatch):
    from lmms_video_reasoning.judges import LocalJudgeServer

    questions, docs = _open_records(2)
    fenced = lambda v: "```json\n" + json.dumps({"result": v}) + "\n```"
    with LocalJudgeServer(responder=sample.oracle_judge_reply) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        alone = score_records(binding, [binding.build_record(docs[0], FAILED_REPLY)])
        assert server.request_count == 0
        assert alone["oe_acc"] == 0.0 and alone["model_failed"] == 1 and alone["parse_failed"] == 0 and alone["judge_failed"] == 0
        both = score_records(binding, [binding.build_record(docs[0], FAILED_REPLY), binding.build_record(docs[1], fenced(questions[1]["answer"]))])
        bodies = list(server.requests)
    assert len(bodies) == 1 and "LMMS_EVAL_REQUEST_FAILED" not in json.dumps(bodies)
    assert both["oe_acc"] == pytest.approx(50.0) and both["model_failed"] == 1


def test_judge_failures_are_counted_in_judge_failed(cg_env, monkeypatch):
    """An unparseable verdict after the re-asks leaves the question out of oe_acc, counted in judge_failed."""
    from lmms_video_reasoning.judges import LocalJudgeServer

    questions, docs = _open_records(3)
    fenced = lambda v: "```json\n" + json.dumps({"result": v}) + "\n```"
    refused = questions[2]["answer"]

    def responder(body):
        text = body["messages"][0]["content"][-1]["text"]
        return "I will not grade this." if f"'{refused}'" in text else sample.oracle_judge_reply(body)

    records = [binding.build_record(docs[0], fenced(questions[0]["answer"])),
               binding.build_record(docs[1], fenced("A purple hexagon")),
               binding.build_record(docs[2], fenced(refused)),
               binding.build_record(docs[1], "")]
    with LocalJudgeServer(responder=responder) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        monkeypatch.setenv("LMMS_VR_JUDGE_FAILED_SHARE", "0.5")  # 1 failure of 4 is under this share
        scores = score_records(binding, records)
        # settings handed in directly: the share resolved from the environment as the plugin does (`settings_of`)
        strict = score_records(binding, records, {"strict": True, failure_share.FAILED_SHARE.option: failure_share.FAILED_SHARE_VARIABLE.read()})
        # per run: right (1 request), wrong (1), refused (3: asked, then re-asked twice); the empty reply none
        assert server.request_count == 2 * (1 + 1 + 3)
        monkeypatch.delenv("LMMS_VR_JUDGE_FAILED_SHARE")  # the default 5%: 1 of 4 is too many
        withheld = score_records(binding, records)
    assert scores["judge_failed"] == 1 and scores["parse_failed"] == 1 and scores["model_failed"] == 0
    assert scores["oe_acc"] == pytest.approx(50.0)  # right + wrong; the unjudged and the empty reply left out
    assert strict["judge_failed"] == 1 and strict["oe_acc"] == pytest.approx(100 / 3)  # strict: the empty reply is wrong
    assert scores["breakdown"]["judge_failed"] == 1
    assert math.isnan(withheld["oe_acc"]) and withheld["judge_failed"] == 1 and withheld["parse_failed"] == scores["parse_failed"]


def test_open_without_judge_is_not_computed(cg_env, monkeypatch):
    for name in ("LMMS_VR_JUDGE_BASE_URL", "LMMS_VR_JUDGE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    doc = cg_task.build_docs(data.records_at(split="mini"), "open", "mini")[0]
    scores = score_records(binding, [binding.build_record(doc, "Red")])
    assert math.isnan(scores["oe_acc"]) and math.isnan(scores["judge_failed"]) and scores["breakdown"]["judge_configured"] is False
    skipped = score_records(binding, [binding.build_record(doc, "Red")], {"judge": False})
    assert math.isnan(skipped["oe_acc"]) and math.isnan(skipped["judge_failed"])


def test_judge_step_failure_is_no_verdict():
    item = judging.OpenItem(1, "v", "Q", "Red", "Blue", ((1.0, 2.0),))

    class Failed:
        ok, value, error = False, None, "http 500 after 6 attempts"

    verdict, error = judging.judge_one(item, lambda request: Failed(), binding.MEDIA)
    assert verdict is None and "step 1" in error


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def test_video_mode_refuses_a_broken_video_with_a_clear_error(cg_root, tmp_path, monkeypatch):
    """Video mode hands only a path to the model (qwen2_vl would swallow a decode error): check it first."""
    from lmms_video_reasoning.utils.core.roots import MediaError

    root = tmp_path / "root"
    shutil.copytree(cg_root, root)
    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    records = data.records_at(split="mini")
    clue = next(d for d in cg_task.build_docs(records, "clue", "mini") if data.clue_clip_at(data.data_root(data.CG_BENCH), d["qid"]) is not None)
    long = next(d for d in cg_task.build_docs(records, "long", "mini") if d["video_uid"] != clue["video_uid"])
    video = {"visual_mode": "video"}
    assert binding.doc_to_visual(long, video) and binding.doc_to_visual(clue, video)  # intact files pass

    clip = data.clue_clip_at(data.data_root(data.CG_BENCH), clue["qid"])
    _truncate(clip)
    with pytest.raises(MediaError, match=rf"{clip.name} is unusable: .*lmms-vr prepare cg_bench"):
        binding.doc_to_visual(clue, video)
    full = data.video_path(long["video_uid"])
    _truncate(full)
    for call in (binding.doc_to_visual, binding.doc_to_messages):
        with pytest.raises(MediaError, match=rf"{full.name} is unusable"):
            call(long, video)
    assert long["question"] in binding.doc_to_text(long, video)  # the text needs no decoding


def test_video_mode_refuses_an_audio_only_file(cg_root, tmp_path, monkeypatch):
    import av
    import numpy as np

    from lmms_video_reasoning.utils.core.roots import MediaError

    root = tmp_path / "root"
    shutil.copytree(cg_root, root)
    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    doc = cg_task.build_docs(data.records_at(split="mini"), "grounding", "mini")[0]
    path = data.video_path(doc["video_uid"])
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=16000)
        stream.layout = "mono"
        for index in range(10):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, index * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with pytest.raises(MediaError, match=rf"{path.name} is unusable: it has no video stream"):
        binding.doc_to_messages(doc, {"visual_mode": "video"})


def test_multi_interval_clue_without_dataset_clip_is_cut(cg_env, tmp_path, monkeypatch):
    from lmms_video_reasoning.utils.media.frame_table import probe

    monkeypatch.setenv("LMMS_VR_CACHE", str(tmp_path / "cache"))
    docs = cg_task.build_docs(data.records_at(split="mini"), "clue", "mini")
    doc = next(d for d in docs if len(d["clue_intervals"]) == 2 and data.clue_clip_at(data.data_root(data.CG_BENCH), d["qid"]) is None)
    (clip,) = binding.doc_to_visual(doc, {"visual_mode": "video"})
    assert str(tmp_path / "cache") in clip
    fps = data.video_meta(doc["video_uid"]).fps
    length = sum(end - start for start, end in doc["clue_intervals"])
    assert probe(clip).total_frames == pytest.approx(length * fps, abs=2)
    assert binding.doc_to_messages(doc, {"visual_mode": "video"})[0]["content"][0] == {"type": "video", "url": clip}


def test_prepare_lists(cg_root):
    records = data.records_at(cg_root, "mini")
    kinds = {kind.name: kind for kind in data.media_kinds(cg_root, records)}  # what `lmms-vr prepare` checks
    assert list(kinds["videos"].items) == [f"cg_videos_720p/{v.uid}.mp4" for v in sample.VIDEOS]
    assert all(resolve().is_file() for resolve in kinds["videos"].items.values())
    assert "cg_subtitles/cgsample_park.srt" in kinds["subtitles"].items
    assert set(data.HUB_ANNOTATIONS) == {"cgbench_mini.json", "cgbench.json"}  # the meta table is not on the Hub


def test_full_split_variant_loads_cgbench_json(cg_env):
    mini, full = binding.load_long(), binding.load_long_full()
    assert len(full) == len(mini) + sample.MINI_EXCLUDED
    assert set(full["split"]) == {"full"} and set(mini["sample_id"]) < set(full["sample_id"])
