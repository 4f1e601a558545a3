"""The judge server a launcher starts (`--launcher_args`) is still up while the tasks aggregate."""

import json
import os
import textwrap

import lmms_eval.evaluator as evaluator
from lmms_eval.tasks import TaskManager

PROBE_HOOKS = '''
import os


def process_results(doc, results):
    return {"judged_while_alive": 1.0}


def aggregate(items):
    # A task that judges in its aggregation (one batch for the whole task) needs the server here.
    return float(os.environ["PROBE_JUDGE_SERVER"] == "up")
'''


class ProbeLauncher:
    def __init__(self, **kwargs):
        pass

    def launch(self):
        os.environ["PROBE_JUDGE_SERVER"] = "up"

    def clean(self):
        os.environ["PROBE_JUDGE_SERVER"] = "down"


def test_the_judge_server_outlives_aggregation(tmp_path, monkeypatch):
    folder = tmp_path / "launcher_probe"
    folder.mkdir()
    (folder / "docs.json").write_text(json.dumps([{"question": "1 + 1?", "answer": "2"}, {"question": "2 + 2?", "answer": "4"}]))
    (folder / "utils.py").write_text(PROBE_HOOKS)
    (folder / "launcher_probe.yaml").write_text(
        textwrap.dedent(
            f"""\
            task: launcher_probe
            dataset_path: json
            dataset_kwargs:
              data_files:
                test: {folder / "docs.json"}
            test_split: test
            output_type: generate_until
            doc_to_text: question
            doc_to_target: answer
            process_results: !function utils.process_results
            metric_list:
              - metric: judged_while_alive
                aggregation: !function utils.aggregate
                higher_is_better: true
            """
        )
    )
    monkeypatch.setattr(evaluator, "get_launcher", lambda name: ProbeLauncher)
    monkeypatch.setenv("PROBE_JUDGE_SERVER", "never started")
    manager = TaskManager("ERROR", include_path=str(tmp_path), include_defaults=False)
    results = evaluator.simple_evaluate(model="dummy", tasks=["launcher_probe"], task_manager=manager, launcher_args="name=probe", limit=2, bootstrap_iters=0)
    assert results["results"]["launcher_probe"]["judged_while_alive,none"] == 1.0  # up while aggregating
    assert os.environ["PROBE_JUDGE_SERVER"] == "down"  # and stopped afterwards
