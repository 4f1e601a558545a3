"""Offline checks of lmms_eval/tasks/vcr_cot_bench: no network, API key, GPU or download.

Each test writes a two-question annotation file in the official schema and a short video, builds
the tasks with lmms-eval from this folder (documents read from that file), and judges through
lmms-eval's judge layer with a provider registered for the test that answers like the official
judge would for these questions.
"""

import importlib
import json
import math
from pathlib import Path

import av
import numpy as np
import pytest

import lmms_eval.tasks
from lmms_eval import utils
from lmms_eval.llm_judge import ProviderFactory, Response, ServerInterface
from lmms_eval.tasks import TaskManager, get_task_dict

FOLDER = Path(lmms_eval.tasks.__file__).parent / "vcr_cot_bench"
TASKS = ["vcr_cot", "vcr_direct", "vcr_text_only", "vcr_one_frame"]
STEPS = ["1. 0:01-0:02, a red square appears on the left.", "2. A square has four corners, so the answer is B."]
RECORDS = [
    {"id": 1, "video_path": "video/test/clip.mp4", "duration": 3.0, "dimension": "Video Temporal Counting", "question": "How many corners has the shape?\nA. 3\nB. 4\n",
     "multiple-choice": True, "choices": {"A": "3", "B": "4"}, "answer": "B", "reasoning": STEPS},
    {"id": 2, "video_path": "video/test/clip.mp4", "duration": 3.0, "dimension": "Video Temporal Grounding", "question": "When is the red square on screen?",
     "multiple-choice": False, "choices": {}, "answer": "[1, 2]", "reasoning": ["1. 0:01-0:02, a red square appears on the left."]},
]
REPLIES = {1: "0:01-0:02, a red square appears on the left.\nA square has four corners, so the answer is B.", 2: "0:01-0:02, a red square appears.\nSo the answer is [1, 2]."}


def write_video(path: Path, frames: int = 30, fps: int = 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(frames):
            image = np.full((48, 64, 3), index * 8, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


class TruthJudge(ServerInterface):
    """Answers the four official prompts for the two test questions."""

    calls = 0

    def is_available(self):
        return True

    def evaluate(self, request):
        TruthJudge.calls += 1
        prompt = request.messages[-1]["content"]
        if "[Ground Truth Information]" in prompt:  # recall and precision: every step matched
            steps = [{"step": s, "step_type": "Video Description Steps" if ":" in s.split(",")[0] else "Logical Inference Steps", "judgment": "Matched"} for s in STEPS]
            return Response(content=json.dumps(steps), model_used="truth")
        if "Your output:" in prompt and "[Standard Answer]" in prompt:  # scoring
            return Response(content="1", model_used="truth")
        return Response(content="[1, 2]" if "When is" in prompt else "B", model_used="truth")  # extraction


class BrokenJudge(TruthJudge):
    def evaluate(self, request):
        raise ConnectionError("judge endpoint down")


ProviderFactory.register_provider("vcr_test_truth", TruthJudge)
ProviderFactory.register_provider("vcr_test_broken", BrokenJudge)


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = tmp_path / "VCR-Bench"
    (root / "v1" / "videos").mkdir(parents=True)
    (root / "v1" / "videos" / "meta_info_video.json").write_text(json.dumps(RECORDS))
    write_video(root / "v1" / "videos" / "video" / "test" / "clip.mp4")
    monkeypatch.setenv("VCR_BENCH_ROOT", str(root))
    return root


def build(name, root, tmp_path):
    overlay = tmp_path / f"{name}.yaml"
    overlay.write_text(f"include: {FOLDER / (name + '.yaml')}\ndataset_kwargs:\n  data_files:\n    test: {root / 'v1/videos/meta_info_video.json'}\n")
    return get_task_dict([utils.load_yaml_config(str(overlay))], TaskManager("ERROR", include_defaults=False))[name]


def scores(task, replies):
    docs = list(task.eval_docs)
    values = [task.process_results(doc, [replies[doc["id"]]]) for doc in docs]
    return {metric: aggregate([value[metric] for value in values]) for metric, aggregate in task.aggregation().items()}


def test_every_task_and_group_is_indexed_from_the_folder():
    manager = TaskManager("ERROR", include_defaults=False, include_path=str(FOLDER))
    for name in TASKS + ["vcr_bench_all"]:
        assert name in manager.all_tasks, name


def test_documents_and_inputs(root, tmp_path):
    task = build("vcr_cot", root, tmp_path)
    docs = list(task.eval_docs)
    assert [doc["dimension_code"] for doc in docs] == ["vtc", "vtg"]
    text = task.doc_to_text(docs[0])
    assert text.startswith("How many corners") and text.endswith("Please provide a step-by-step solution to the given question.")
    hooks = importlib.import_module("lmms_eval.tasks.vcr_cot_bench.utils")
    assert hooks.vcr_doc_to_visual(docs[0], {"visual_mode": "video"}) == [str(root / "v1/videos/video/test/clip.mp4")]
    frames = hooks.vcr_doc_to_visual(docs[0], {"visual_mode": "frames"})
    assert len(frames) == 30 and frames[0].size == (64, 48)  # every frame of a 30-frame video
    assert hooks.vcr_doc_to_text(docs[0], {"visual_mode": "frames"}).startswith("The video is given as 30 frames, taken at these times: 0.0s, 0.1s,")
    assert hooks.vcr_doc_to_visual(docs[0], {"visual_mode": "none"}) == []
    assert "step-by-step" not in build("vcr_direct", root, tmp_path).doc_to_text(docs[0])


def test_judged_by_lmms_eval_judge_layer(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vcr_test_truth")
    monkeypatch.setenv("MODEL_VERSION", "truth-judged")
    before = TruthJudge.calls
    metrics = scores(build("vcr_cot", root, tmp_path), REPLIES)
    assert metrics["accuracy"] == 100.0 and metrics["accuracy_vtg"] == 100.0  # the interval by the official IoU rule
    assert metrics["cot_recall"] == 100.0 and metrics["cot_precision"] == 100.0 and metrics["judge_failed"] == 0
    assert TruthJudge.calls - before == 7  # 2 extractions, 1 scoring (the other by IoU), 2 recall, 2 precision


def test_a_sample_logs_its_record_once(root, tmp_path, monkeypatch):
    """`--log_samples` writes every metric's value of a sample: the record goes under one metric only."""
    monkeypatch.setenv("API_TYPE", "vcr_test_truth")
    task = build("vcr_cot", root, tmp_path)
    doc = list(task.eval_docs)[0]
    value = task.process_results(doc, [REPLIES[doc["id"]]])
    assert set(value) == set(task.aggregation())
    assert [name for name, item in value.items() if isinstance(item, dict)] == ["accuracy"]
    assert {str(item) for item in value.values() if not isinstance(item, dict)} == {"the record under accuracy"}


def test_failures_are_counted_not_dropped(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vcr_test_broken")
    monkeypatch.setenv("MODEL_VERSION", "broken-judged")
    replies = {1: REPLIES[1], 2: "[LMMS_EVAL_REQUEST_FAILED after 3 retries] timeout"}
    metrics = scores(build("vcr_direct", root, tmp_path), replies)
    assert metrics["judge_failed"] == 1 and metrics["model_failed"] == 1  # the placeholder is never judged
    assert math.isnan(metrics["accuracy"])  # 1 of 1 judgments failed: not computed, not a score of 0


def test_without_a_judge_the_judged_metrics_are_not_computed(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "openai")
    monkeypatch.setenv("MODEL_VERSION", "no-key-judge")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    metrics = scores(build("vcr_text_only", root, tmp_path), REPLIES)
    assert math.isnan(metrics["accuracy"]) and metrics["model_failed"] == 0
