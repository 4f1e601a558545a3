"""VRBench on the sample benchmark: frames, video paths, and the tasks end to end through lmms-eval."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from lmms_cli import metric, run_lmms_eval, samples_files
from bench_scoring import score_records
from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.core.roots import MediaError
from lmms_video_reasoning.utils.tools.sample import env_for, write_sample
from lmms_video_reasoning.utils.media.synthetic import COLORS
from lmms_video_reasoning.vrbench import benchmark as binding
from lmms_video_reasoning.vrbench import sample
from lmms_video_reasoning.vrbench.scoring import TYPE_NAMES, extract_mcq_answer

JUDGE_TASKS = ("vr_bench", "vr_bench_text", "vr_bench_official")


@pytest.fixture(scope="module")
def vrbench_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("vrbench_sample")
    write_sample(out, ("vrbench",))
    return out


@pytest.fixture
def sample_docs(vrbench_sample, monkeypatch):
    monkeypatch.setenv("VRBENCH_ROOT", str(vrbench_sample / "vrbench"))
    monkeypatch.delenv("VRBENCH_PROTOCOL", raising=False)
    return binding.build_docs("judge", "default")


def test_sample_covers_every_type_with_timed_steps(sample_docs):
    types = {doc["reasoning_type"] for doc in sample_docs}
    assert types == {"Event Prediction", "Hypothetical Reasoning", "Event Attribution", "Implicit Inference",
                     "Logical Linkage", "Event Summarization", "Counting Porblems", "Counting Problems"}
    timed = [doc for doc in sample_docs if doc["reasoning_type"] == "Event Attribution"]
    assert all("[00:00:20->00:00:25]" in doc["procedure"] for doc in timed)
    assert max(len(doc["video_summary"]) for doc in sample_docs) > 10_000


def test_frames_are_segment_midpoints_at_224(sample_docs):
    doc = sample_docs[0]  # syn_story_01: 150 s at 2 fps = 300 frames; blue square on screen 20-67 s
    frames = binding.doc_to_visual(doc, {"visual_mode": "frames", "num_frames": 4})
    assert [frame.size for frame in frames] == [(224, 224)] * 4
    # Midpoints of 4 segments of 300 frames: 37, 112, 187, 262 -> 18.5 s, 56 s, 93.5 s, 131 s.
    square = [np.asarray(frame)[112, round(0.78 * 224)].astype(int) for frame in frames]
    blue = np.array(COLORS["blue"])
    assert np.abs(square[1] - blue).max() < 40  # visible at 56 s
    assert np.abs(square[0] - blue).max() > 100  # not yet at 18.5 s


def test_the_frame_variables_override_the_tasks_choice(sample_docs, monkeypatch):
    """`VRBENCH_NUM_FRAMES` wins over the task's `num_frames` (the plugin hands it in as the task's choice);
    an invalid value is refused naming the variable."""
    monkeypatch.setenv("VRBENCH_NUM_FRAMES", "3")
    assert len(binding.doc_to_visual(sample_docs[0], {"visual_mode": "frames", "num_frames": 4})) == 3
    monkeypatch.setenv("VRBENCH_NUM_FRAMES", "0")
    with pytest.raises(ValueError, match="VRBENCH_NUM_FRAMES='0' is not accepted"):
        binding.doc_to_visual(sample_docs[0], {"visual_mode": "frames", "num_frames": 4})


def test_video_path_resolution_tolerates_zip_layout(sample_docs, vrbench_sample):
    moved = next(doc for doc in sample_docs if doc["video_id"] == "syn_story_02")
    assert binding.doc_to_visual(moved, {"visual_mode": "video"}) == [str(vrbench_sample / "vrbench" / "v001" / "syn_story_02.mp4")]
    missing = dict(moved, video_path="VRBench/videos/v001/not_there.mp4")
    with pytest.raises(MediaError, match=r"not_there\.mp4.*VRBENCH_ROOT.*lmms-vr prepare vrbench"):
        binding.doc_to_visual(missing, {"visual_mode": "video"})


def test_upstream_form_finds_the_plugins_videos(sample_docs, monkeypatch):
    """The exported hooks resolve videos with lmms-eval 0.7.3's own `vrbench_doc_to_visual` (its real code
    here): on the official layout, the plugin's file; a missing one is an error naming the variable."""
    from lmms_eval.tasks.vrbench.utils import vrbench_doc_to_visual
    from lmms_video_reasoning.vrbench import data

    monkeypatch.delenv("VRBENCH_VIDEO_DIR", raising=False)
    official = [doc for doc in sample_docs if doc["video_id"] != "syn_story_02"]  # syn_story_02: a zip's layout, the plugin's search only
    assert official and all(vrbench_doc_to_visual(doc) == [str(data.resolve_video(doc["video_path"]))] for doc in official)
    with pytest.raises(FileNotFoundError, match="point VRBENCH_VIDEO_DIR at the directory"):
        vrbench_doc_to_visual(dict(official[0], video_path="VRBench/videos/v001/not_there.mp4"))


@pytest.mark.parametrize("damage", ["truncated", "garbage_header"])
def test_broken_video_in_video_mode_is_a_clear_error(vrbench_sample, tmp_path, monkeypatch, damage):
    """Video mode hands the model a path: a file that does not decode must fail here, naming
    it and the fix, not inside the model (qwen2_vl would answer from the text alone)."""
    root = tmp_path / "vrbench"
    shutil.copytree(vrbench_sample / "vrbench", root)
    monkeypatch.setenv("VRBENCH_ROOT", str(root))
    doc = binding.build_docs("judge", "default")[0]
    [path] = binding.doc_to_visual(doc, {"visual_mode": "video"})  # decodes: accepted
    video = Path(path)
    content = video.read_bytes()
    video.write_bytes(content[: len(content) // 3] if damage == "truncated" else bytes(4096) + content[4096:])
    pattern = rf"{re.escape(video.name)} is unusable: .*lmms-vr prepare vrbench"
    with pytest.raises(MediaError, match=pattern):
        binding.doc_to_visual(doc, {"visual_mode": "video"})
    with pytest.raises(MediaError, match=pattern):
        binding.doc_to_messages(doc, {"visual_mode": "video"})
    assert doc["question"] in binding.doc_to_text(doc, {"visual_mode": "video"})  # the prompt never decodes


@pytest.mark.slow
def test_tasks_end_to_end(vrbench_sample, tmp_path, monkeypatch):
    predictions = [json.loads(line) for line in (vrbench_sample / "predictions.jsonl").read_text().splitlines()]
    with LocalJudgeServer(sample.oracle_judge_reply) as server:
        env = {**env_for(vrbench_sample, ("vrbench",)), "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_CACHE": "off"}
        results = run_lmms_eval("vr_bench_all,vr_bench_official", tmp_path, model_args=f"predictions={vrbench_sample / 'predictions.jsonl'}", env=env)
        calls_by_cli = server.request_count
        for name, value in env.items():
            monkeypatch.setenv(name, value)

        # MCQ-O: the demo design (4 wrong, 1 unextractable), read with the cascade.
        demo = [p for p in predictions if p["task"] == "vr_bench"]
        docs = {doc["sample_id"]: doc for doc in _docs(vrbench_sample)}
        expected_mcq = 100 * sum(extract_mcq_answer(p["response"]) == docs[p["id"]]["answer"] for p in demo) / len(demo)
        for task in ("vr_bench", "vr_bench_mcq", "vr_bench_text", "vr_bench_official"):
            assert metric(results, task, "mcq_accuracy") == pytest.approx(expected_mcq)
            for name in TYPE_NAMES:
                assert 0 <= metric(results, task, f"type_{name}") <= 100
        assert "process_score,none" not in results["results"]["vr_bench_mcq"]

        for task in JUDGE_TASKS:
            oe = metric(results, task, "process_score")
            assert 0 < oe <= 100
            assert metric(results, task, "overall") == pytest.approx((expected_mcq + oe) / 2)
            assert metric(results, task, "judge_failed") == 1  # the refused response
        for task in (*JUDGE_TASKS, "vr_bench_mcq"):
            assert metric(results, task, "model_failed") == 0  # every demo response is an answer
        # Official: counting and synopsis count as 0, so OE-P is lower than in the default.
        assert metric(results, "vr_bench_official", "process_score") < metric(results, "vr_bench", "process_score")
        # One judge batch per task: 24 rated questions (+2 re-asks of the refusal) in each
        # default task, 20 in the official task (no counting, no re-asks).
        assert calls_by_cli == 26 + 26 + 20
        [results_file] = tmp_path.rglob("*_results.json")  # the accounting is paired with the run's results
        accounting = results_file.with_name(results_file.name.replace("_results.json", "_judge_accounting_vrbench.json"))
        assert json.loads(accounting.read_text())["stats"]["answered_by"] == {"local-judge": 26 + 26 + 20 - 3 * 2}

        # Re-scoring the logged records gives the same metrics (the `lmms-vr score` path).
        for task in ("vr_bench", "vr_bench_official"):
            [log] = samples_files(tmp_path, task)
            records = [json.loads(line)["mcq_accuracy"] for line in log.read_text().splitlines()]
            rescored = score_records(binding, records)
            for name, value in rescored.items():
                assert value == pytest.approx(metric(results, task, name)) or (math.isnan(value) and math.isnan(metric(results, task, name)))


def _docs(vrbench_sample):
    from lmms_video_reasoning.vrbench import data, docs

    return docs.flatten(data.records_in(vrbench_sample / "vrbench" / "VRBench_eval.jsonl"))
