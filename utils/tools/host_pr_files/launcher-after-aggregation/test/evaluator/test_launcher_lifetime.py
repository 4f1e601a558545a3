"""The judge server a launcher starts (`--launcher_args`) is still up while the tasks aggregate."""

import json

import lmms_eval.evaluator as evaluator


class ProbeLauncher:
    alive = False
    seen_alive_at_aggregation = []

    def __init__(self, **kwargs):
        pass

    def launch(self):
        ProbeLauncher.alive = True

    def clean(self):
        ProbeLauncher.alive = False


def probe_process_results(doc, results):
    return {"judged_while_alive": 1.0}


def probe_aggregation(items):
    # A task that judges in its aggregation (one batch for the whole task) needs the server here.
    ProbeLauncher.seen_alive_at_aggregation.append(ProbeLauncher.alive)
    return float(ProbeLauncher.alive)


def test_the_judge_server_outlives_aggregation(tmp_path, monkeypatch):
    data = tmp_path / "docs.json"
    data.write_text(json.dumps([{"question": "1 + 1?", "answer": "2"}, {"question": "2 + 2?", "answer": "4"}]))
    task = {
        "task": "launcher_probe",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "question",
        "doc_to_target": "answer",
        "process_results": probe_process_results,
        "metric_list": [{"metric": "judged_while_alive", "aggregation": probe_aggregation, "higher_is_better": True}],
    }
    monkeypatch.setattr(evaluator, "get_launcher", lambda name: ProbeLauncher)
    results = evaluator.simple_evaluate(model="dummy", tasks=[task], launcher_args="name=probe", limit=2, bootstrap_iters=0)
    assert results["results"]["launcher_probe"]["judged_while_alive,none"] == 1.0
    assert ProbeLauncher.seen_alive_at_aggregation == [True] and ProbeLauncher.alive is False  # cleaned after aggregation
