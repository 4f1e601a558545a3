"""Offline checks of CG-Bench's official protocol tasks in lmms_eval/tasks/cgbench: no network, API key, GPU or download.

Each test writes a two-question annotation file in the official schema, the frame table, a short
video and its subtitles, and builds the tasks with lmms-eval from this folder (documents read from
that file).
"""

import importlib
import json
from pathlib import Path

import av
import numpy as np
import pytest

import lmms_eval.tasks
from lmms_eval import utils
from lmms_eval.tasks import TaskManager, get_task_dict

FOLDER = Path(lmms_eval.tasks.__file__).parent / "cgbench"
PROTOCOL = ["cgbench_long", "cgbench_clue", "cgbench_grounding", "cgbench_mcq", "cgbench_blind"]
QUESTIONS = [
    {"qid": 11, "video_uid": "vid", "question": "What colour is the ball?", "answer": "Red", "choices": ["Red", "Blue", "Green"], "right_answer": "A",
     "clue_intervals": [[1.0, 2.0]], "domain": "Sports", "sub_category": "Object Perception", "duration": 6},
    {"qid": 12, "video_uid": "vid", "question": "What happens last?", "answer": "The ball stops", "choices": ["It rolls", "It stops"], "right_answer": "B",
     "clue_intervals": [[4.0, 5.0]], "domain": "Sports", "sub_category": "Event Cognition", "duration": 6},
]
SRT = "1\n00:00:01,000 --> 00:00:02,500\nthe red ball\n\n2\n00:00:04,000 --> 00:00:05,500\nit stops\n"


def fenced(result):
    return "```json\n" + json.dumps({"result": result}) + "\n```"


def write_video(path: Path, frames: int = 60, fps: int = 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), index * 4, dtype=np.uint8), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = tmp_path / "CG-Bench"
    root.mkdir()
    (root / "cgbench_mini.json").write_text(json.dumps(QUESTIONS))
    (root / "video_meta_info.json").write_text(json.dumps({"vid": {"duration": 6.0, "max_frame": 59, "fps": 10.0}}))
    write_video(root / "cg_videos_720p" / "vid.mp4")
    (root / "cg_subtitles").mkdir()
    (root / "cg_subtitles" / "vid.srt").write_text(SRT)
    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    return root


def build(name, root, tmp_path):
    overlay = tmp_path / f"{name}.yaml"
    overlay.write_text(f"include: {FOLDER / (name + '.yaml')}\ndataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n    train: {root / 'cgbench_mini.json'}\n")
    return get_task_dict([utils.load_yaml_config(str(overlay))], TaskManager("ERROR", include_defaults=False))[name]


def scores(task, reply):
    values = [task.process_results(doc, [reply(doc)]) for doc in task.eval_docs]
    return {metric: aggregate([value[metric] for value in values]) for metric, aggregate in task.aggregation().items()}


def test_protocol_tasks_join_the_existing_ones():
    manager = TaskManager("ERROR", include_defaults=False, include_path=str(FOLDER))
    for name in PROTOCOL + [f"cgbench_full_{n.split('_', 1)[1]}" for n in PROTOCOL] + ["cgbench", "cgbench_subtitles"]:
        assert name in manager.all_tasks, name
    assert {"cgbench_protocol", "cgbench_full_protocol", "cgbench_all"} <= set(manager.all_groups)


def test_official_prompt_and_frames(root, tmp_path):
    task = build("cgbench_long", root, tmp_path)
    doc = list(task.eval_docs)[0]
    text = task.doc_to_text(doc)
    assert "Question: What colour is the ball?" in text and "A:Red" in text
    hooks = importlib.import_module("lmms_eval.tasks.cgbench.protocol")
    with pytest.raises(ValueError, match="no subtitle input: set subtitles: false"):  # these hooks read no subtitles
        hooks.cgbench_protocol_doc_to_text(doc, {"subtitles": True})
    assert hooks.cgbench_protocol_doc_to_visual(doc, {"visual_mode": "video"}) == [str(root / "cg_videos_720p" / "vid.mp4")]
    frames = hooks.cgbench_protocol_doc_to_visual(doc, {"visual_mode": "frames", "long_frames": 8})
    assert len(frames) == 8 and frames[0].size == (64, 48)
    assert hooks.cgbench_protocol_doc_to_text(doc, {"visual_mode": "frames", "long_frames": 8, "subtitles": False}).count("s") > 8  # frame times
    clue = build("cgbench_clue", root, tmp_path)
    with pytest.raises(FileNotFoundError, match="clue clip 11.mp4"):  # no clip, no cutting: named, with the fix
        hooks.cgbench_protocol_doc_to_visual(list(clue.eval_docs)[0], {"visual_mode": "video"})


def test_credibility_metrics_join_modes_per_question(root, tmp_path):
    replies = {"long": {11: fenced("A"), 12: fenced("A")}, "clue": {11: fenced("A"), 12: fenced("B")}, "grounding": {11: fenced([[1.0, 2.0]]), 12: fenced([[0.0, 1.0]])}}
    metrics = scores(build("cgbench_mcq", root, tmp_path), lambda doc: replies[doc["mode"]][doc["qid"]])
    assert metrics["long_acc"] == 50.0 and metrics["clue_acc"] == 100.0 and metrics["crr"] == 50.0  # long / clue accuracy
    assert metrics["miou"] == 50.0 and metrics["parse_failed"] == 0
    assert metrics["acc_at_iou"] == 50.0  # question 11: right and grounded; 12: neither
