"""Offline checks of the vrbench_protocol tasks of lmms_eval/tasks/vrbench: no network, API key, GPU or download.

Each test writes a one-video annotation file in the official schema and a short video, builds
the tasks with lmms-eval from this folder (documents read from that file), and rates the
reasoning through lmms-eval's judge layer with a provider registered for the test.
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

FOLDER = Path(lmms_eval.tasks.__file__).parent / "vrbench"
OPTIONS = {"A": "the red circle", "B": "the blue square", "C": "the green star", "D": "nothing"}
STEPS = {"1": "The red circle enters [00:00:01->00:00:02]", "2": "It reaches the square [00:00:02->00:00:03]"}
QUESTIONS = {
    "qa1": {"question": "Why does the square leave?", "options": OPTIONS, "answer": "A", "original_answer": "The red circle reaches it.",
            "reasoning_process": STEPS, "reasoning_type": "Event Attribution"},
    "qa2": {"question": "What happens next?", "options": OPTIONS, "answer": "B", "original_answer": "The square leaves.",
            "reasoning_process": STEPS, "reasoning_type": "Event Prediction"},
    "qa3": {"question": "Summarize the video.", "options": OPTIONS, "answer": "C", "original_answer": "A circle chases a square.",
            "reasoning_process": STEPS, "reasoning_type": "Event Summarization"},
}
RECORD = {"video_id": "v1", "video_path": "VRBench/videos/v001/v1.mp4", "video_summary": "A red circle chases a blue square.", "mcq": QUESTIONS}
REPLIES = {"v1_qa1": "<Step 1> The red circle enters.\n<Answer> A", "v1_qa2": "<Step 1> The circle reaches it.\n<Answer> D", "v1_qa3": "<Answer> C"}
TAGS = "<step_matching>8</step_matching><logical_consistency>6</logical_consistency><factual_accuracy>10</factual_accuracy><process_clarity>10</process_clarity>"


def write_video(path: Path, frames: int = 40, fps: int = 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), index * 6, dtype=np.uint8), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


class FourTagJudge(ServerInterface):
    """Rates every reasoning 8 / 6 / 10 / 10 (weighted: 7.6), in the official tags of either prompt."""

    calls = []

    def is_available(self):
        return True

    def evaluate(self, request):
        FourTagJudge.calls.append(request.messages)
        system = request.messages[0]["content"]
        reply = TAGS if "<step_matching>" in system else TAGS.replace("step_matching", "relevance").replace("process_clarity", "clarity")
        return Response(content=reply, model_used="four-tag")


class BrokenJudge(FourTagJudge):
    def evaluate(self, request):
        raise TimeoutError("judge endpoint timed out")


ProviderFactory.register_provider("vrbench_test_four_tag", FourTagJudge)
ProviderFactory.register_provider("vrbench_test_broken", BrokenJudge)


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = tmp_path / "VRBench"
    root.mkdir()
    (root / "VRBench_eval.jsonl").write_text(json.dumps(RECORD) + "\n")
    write_video(root / "VRBench" / "videos" / "v001" / "v1.mp4")
    monkeypatch.setenv("VRBENCH_ROOT", str(root))
    return root


def build(name, root, tmp_path):
    overlay = tmp_path / f"{name}.yaml"
    overlay.write_text(f"include: {FOLDER / (name + '.yaml')}\ndataset_kwargs:\n  data_files:\n    test: {root / 'VRBench_eval.jsonl'}\n")
    return get_task_dict([utils.load_yaml_config(str(overlay))], TaskManager("ERROR", include_defaults=False))[name]


def scores(task):
    values = [task.process_results(doc, [REPLIES[doc["sample_id"]]]) for doc in task.eval_docs]
    return {metric: aggregate([value[metric] for value in values]) for metric, aggregate in task.aggregation().items()}


def test_protocol_tasks_are_added_beside_the_existing_ones():
    manager = TaskManager("ERROR", include_defaults=False, include_path=str(FOLDER))
    assert {"vrbench_protocol", "vrbench_protocol_mcq", "vrbench_protocol_text", "vrbench_protocol_official"} <= set(manager.all_tasks)
    assert {"vrbench_mcq", "vrbench_process"} <= set(manager.all_tasks) and "vrbench" in manager.all_groups  # unchanged


def test_documents_and_inputs(root, tmp_path):
    task = build("vrbench_protocol", root, tmp_path)
    docs = list(task.eval_docs)
    assert [doc["sample_id"] for doc in docs] == ["v1_qa1", "v1_qa2", "v1_qa3"]
    text = task.doc_to_text(docs[0])
    assert "Why does the square leave?" in text and "A: the red circle" in text and "A red circle chases a blue square." in text
    hooks = importlib.import_module("lmms_eval.tasks.vrbench.protocol")
    assert hooks.vrbench_doc_to_visual(docs[0], {"visual_mode": "video"}) == [str(root / "VRBench/videos/v001/v1.mp4")]
    frames = hooks.vrbench_doc_to_visual(docs[0], {"visual_mode": "frames", "num_frames": 4})
    assert len(frames) == 4 and frames[0].size == (224, 224)  # the official 224x224 segment midpoints
    assert hooks.vrbench_doc_to_visual(build("vrbench_protocol_text", root, tmp_path).eval_docs[0], {}) == []


def test_one_generation_scored_by_the_official_four_tag_judge(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vrbench_test_four_tag")
    monkeypatch.setenv("MODEL_VERSION", "four-tag-judged")
    FourTagJudge.calls.clear()
    metrics = scores(build("vrbench_protocol", root, tmp_path))
    assert metrics["mcq_accuracy"] == pytest.approx(200 / 3)  # qa2 answered D
    assert metrics["process_score"] == pytest.approx(76.0)  # 0.4*8 + 0.4*6 + 0.1*10 + 0.1*10, synopsis not rated
    assert metrics["overall"] == pytest.approx((200 / 3 + 76.0) / 2) and metrics["judge_failed"] == 0
    assert len(FourTagJudge.calls) == 2  # attribution and prediction; summarization is not rated
    assert "A red circle chases a blue square." in FourTagJudge.calls[1][-1]["content"]  # the non-unique prompt carries the summary


def test_failed_judge_calls_are_counted_not_dropped(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vrbench_test_broken")
    monkeypatch.setenv("MODEL_VERSION", "broken-judged")
    metrics = scores(build("vrbench_protocol", root, tmp_path))
    assert metrics["judge_failed"] == 2 and math.isnan(metrics["process_score"])  # every rating failed: not computed
    assert metrics["mcq_accuracy"] == pytest.approx(200 / 3)  # the rule-based track still counts


def test_official_protocol_scores_unrated_questions_zero(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vrbench_test_four_tag")
    monkeypatch.setenv("MODEL_VERSION", "four-tag-official")
    metrics = scores(build("vrbench_protocol_official", root, tmp_path))
    assert metrics["process_score"] == pytest.approx((7.6 + 7.6 + 0.0) / 3 * 10)  # the synopsis question counts 0


def test_mcq_task_needs_no_judge(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "vrbench_test_broken")
    metrics = scores(build("vrbench_protocol_mcq", root, tmp_path))
    assert metrics["mcq_accuracy"] == pytest.approx(200 / 3) and "process_score" not in metrics
