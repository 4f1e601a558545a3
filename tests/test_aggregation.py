"""ScoreOnce: a task's (possibly judge-heavy) scoring runs once for all its metrics."""

from lmms_video_reasoning.utils.results.aggregation import RunFiles, ScoreOnce, records_key


def test_scoring_runs_once_per_distinct_records():
    calls = []

    def score(records):
        calls.append(len(records))
        return {"n": len(records), "sum": sum(r["x"] for r in records)}

    once = ScoreOnce(score, "toy")
    records = [{"x": 1}, {"x": 2}]
    assert once(records)["n"] == 2 and once(list(reversed(records)))["sum"] == 3
    assert calls == [2]  # same content (any order): no second scoring
    assert once([{"x": 5}])["sum"] == 5 and calls == [2, 1]


def test_records_key_depends_on_content():
    assert records_key([{"a": 1}, {"b": 2}]) == records_key([{"b": 2}, {"a": 1}])
    assert records_key([{"a": 1}]) != records_key([{"a": 2}])


def test_aggregation_functions_receive_lmms_eval_args(tmp_path):
    import inspect
    from types import SimpleNamespace

    import re

    from lmms_video_reasoning.utils.results.aggregation import run_files

    seen = []
    once = ScoreOnce(lambda records: {"a": 1.0, "b": 2.0}, "toy")
    aggregate_b = once.aggregation("b", after=lambda scores, run: seen.append((scores["a"], run)))
    # lmms-eval passes its CLI namespace only to a parameter named `args`
    assert "args" in inspect.signature(aggregate_b).parameters
    assert aggregate_b([{"x": 1}], args=SimpleNamespace(output_path=str(tmp_path), model_args="pretrained=org/My-Model")) == 2.0
    [(value, run)] = seen
    assert value == 1.0 and run.folder == tmp_path / "org__My-Model"  # lmms-eval's model folder
    assert re.fullmatch(r"\d{8}_\d{6}", run.date_id)
    assert run_files(None) is None and run_files(SimpleNamespace(output_path=None)) is None


def test_run_files_never_overwrite_another_runs_file(tmp_path):
    first, second = RunFiles(tmp_path, "20260101_000000"), RunFiles(tmp_path, "20260101_000007")
    assert first.path("x.json") != second.path("x.json")
    earlier = tmp_path / "20260102_000000_x.json"
    earlier.write_text("another process's run of the same second")
    same_second = RunFiles(tmp_path, "20260102_000000").path("x.json")
    assert same_second == tmp_path / "20260102_000000_2_x.json"
    same_second.write_text("this run")
    assert same_second == RunFiles(tmp_path, "20260102_000000").path("x.json")  # this run rewrites its own file


def test_judge_accounting_is_written_next_to_the_results(tmp_path, monkeypatch):
    import json

    from lmms_video_reasoning.judges import JudgeRequest, LocalJudgeServer, get_judge
    from lmms_video_reasoning.utils.results.aggregation import judge_accounting_writer

    with LocalJudgeServer(lambda body: "1") as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_API_KEY", "sk-test-secret-123456")
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "cache.sqlite"))
        judge = get_judge("vrbench")
        assert judge.ask(JudgeRequest([{"role": "user", "content": "x"}])).ok
        judge_accounting_writer("vrbench")({}, RunFiles(tmp_path, "20260101_120000"))
    written = (tmp_path / "20260101_120000_judge_accounting_vrbench.json").read_text()
    assert json.loads(written)  # valid JSON with the counts
    assert "sk-test-secret-123456" not in written
    judge_accounting_writer("vrbench")({}, None)  # no --output_path: nothing to write, no error
