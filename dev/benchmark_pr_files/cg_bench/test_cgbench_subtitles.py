"""Offline checks of the subtitle input of CG-Bench's protocol tasks in lmms_eval/tasks/cgbench.

The annotation file, frame table, video and subtitles are the protocol tests' (`test_cgbench_protocol.py`).
"""

import importlib

import test_cgbench_protocol as protocol_tests
from test_cgbench_protocol import build

root = protocol_tests.root  # the fixture: the annotation file, frame table, video and subtitles


def test_subtitles_at_the_sampled_frames(root, tmp_path):
    doc = list(build("cgbench_long", root, tmp_path).eval_docs)[0]
    hooks = importlib.import_module("lmms_eval.tasks.cgbench.protocol_subtitles")
    text = hooks.cgbench_protocol_doc_to_text(doc, {"visual_mode": "frames", "long_frames": 8})
    assert "[1.0, 2.5] the red ball" in text and "[4.0, 5.5] it stops" in text  # the cues at the frames' times, with their times
    untimed = hooks.cgbench_protocol_doc_to_text(doc, {"subtitle_times": False})
    assert "\nthe red ball\n" in untimed and "[1.0, 2.5]" not in untimed
    assert "the red ball" not in hooks.cgbench_protocol_doc_to_text(doc, {"subtitles": False})
    [turn] = hooks.cgbench_protocol_doc_to_messages(doc, {"visual_mode": "frames", "long_frames": 8})
    assert turn["content"][-1]["text"] == text
