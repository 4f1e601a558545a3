"""ScoreOnce: a task's (possibly judge-heavy) scoring runs once for all its metrics."""

from lmms_video_reasoning.utils.aggregation import ScoreOnce, records_key


def test_scoring_runs_once_per_distinct_records():
    calls = []

    def score(records):
        calls.append(len(records))
        return {"n": len(records), "sum": sum(r["x"] for r in records)}

    once = ScoreOnce(score)
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

    from lmms_video_reasoning.utils.aggregation import output_dir

    seen = []
    once = ScoreOnce(lambda records: {"a": 1.0, "b": 2.0})
    aggregate_b = once.aggregation("b", after=lambda scores, folder: seen.append((scores["a"], folder)))
    # lmms-eval passes its CLI namespace only to a parameter named `args`
    assert "args" in inspect.signature(aggregate_b).parameters
    assert aggregate_b([{"x": 1}], args=SimpleNamespace(output_path=str(tmp_path))) == 2.0
    assert seen == [(1.0, tmp_path)]
    assert output_dir(SimpleNamespace(output_path=str(tmp_path / "r.json"))) == tmp_path
    assert output_dir(None) is None and output_dir(SimpleNamespace(output_path=None)) is None


def test_judge_accounting_is_written_next_to_the_results(tmp_path, monkeypatch):
    import json

    from lmms_video_reasoning.judges import JudgeRequest, LocalJudgeServer, get_judge
    from lmms_video_reasoning.utils.aggregation import judge_accounting_writer

    with LocalJudgeServer(lambda body: "1") as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_API_KEY", "sk-test-secret-123456")
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "cache.sqlite"))
        judge = get_judge("vrbench")
        assert judge.ask(JudgeRequest([{"role": "user", "content": "x"}])).ok
        judge_accounting_writer("vrbench")({}, tmp_path)
    written = (tmp_path / "judge_accounting_vrbench.json").read_text()
    assert json.loads(written)  # valid JSON with the counts
    assert "sk-test-secret-123456" not in written
    judge_accounting_writer("vrbench")({}, None)  # no --output_path: nothing to write, no error
