"""Offline checks of CG-Bench's open-ended tasks in lmms_eval/tasks/cgbench: the two-step judge through
lmms-eval's judge layer, with a provider registered for the test (no network, API key or GPU).

The annotation file, frame table, video and subtitles are the protocol tests' (`test_cgbench_protocol.py`).
"""

import math

import test_cgbench_protocol as protocol_tests
from test_cgbench_protocol import FOLDER, build, fenced, scores

from lmms_eval import utils
from lmms_eval.llm_judge import ProviderFactory, Response, ServerInterface
from lmms_eval.tasks import TaskManager


class AgreeingJudge(ServerInterface):
    """Step 1: the prediction is right when it names the reference answer."""

    def is_available(self):
        return True

    def evaluate(self, request):
        text = request.messages[-1]["content"][-1]["text"]
        reference = text.split("The ground truth answer is '", 1)[1].split("'", 1)[0]
        prediction = text.split("The model's prediction is '", 1)[1].split("'", 1)[0]
        return Response(content=fenced(int(reference.lower() in prediction.lower())), model_used="agreeing")


class BrokenJudge(AgreeingJudge):
    def evaluate(self, request):
        raise ConnectionError("judge endpoint down")


ProviderFactory.register_provider("cgbench_test_agreeing", AgreeingJudge)
ProviderFactory.register_provider("cgbench_test_broken", BrokenJudge)
root = protocol_tests.root  # the fixture: the annotation file, frame table, video and subtitles


def test_open_tasks_join_the_protocol_groups():
    manager = TaskManager("ERROR", include_defaults=False, include_path=str(FOLDER))
    assert {"cgbench_open", "cgbench_full_open"} <= set(manager.all_tasks)
    for group, task in (("cgbench_protocol", "cgbench_open"), ("cgbench_full_protocol", "cgbench_full_open")):
        assert task in utils.load_yaml_config(manager.task_index[group]["yaml_path"])["task"]


def test_open_ended_judge_and_counted_failures(root, tmp_path, monkeypatch):
    monkeypatch.setenv("API_TYPE", "cgbench_test_agreeing")
    monkeypatch.setenv("MODEL_VERSION", "agreeing-judged")
    task = build("cgbench_open", root, tmp_path)
    metrics = scores(task, lambda doc: fenced("A red ball") if doc["qid"] == 11 else "I cannot tell")
    assert metrics["oe_acc"] == 50.0 and metrics["judge_failed"] == 0
    monkeypatch.setenv("API_TYPE", "cgbench_test_broken")
    monkeypatch.setenv("MODEL_VERSION", "broken-judged")
    metrics = scores(task, lambda doc: fenced("A red ball"))
    assert metrics["judge_failed"] == 2 and math.isnan(metrics["oe_acc"])  # counted; not reported as the model's score
