"""ScoreOnce: a task's (possibly judge-heavy) scoring runs once for all its metrics and their standard errors."""

import functools
import math

import numpy as np
import pytest

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.registry import Scored, ScoringAdapter
from lmms_video_reasoning.utils.results.aggregation import RunFiles, ScoreOnce, ScoringFailed, records_key


class Counting(ScoringAdapter):
    """A scoring that counts its calls: `score` gives `metrics(records)` and one outcome per record."""

    def __init__(self, metrics):
        self.calls, self._metrics = [], metrics

    def score(self, records, settings, judge):
        self.calls.append(len(records))
        return Scored(self._metrics(records), [{"x": r["x"]} for r in records])

    def outcomes(self, records, settings, judge):
        raise AssertionError("the outcomes were derived a second time")


def test_scoring_runs_once_per_distinct_records():
    scoring = Counting(lambda records: {"n": len(records), "sum": sum(r["x"] for r in records)})
    once = ScoreOnce("toy", scoring)
    records = [{"x": 1}, {"x": 2}]
    assert once.aggregation("n")(records) == 2 and once.aggregation("sum")(list(reversed(records))) == 3
    assert scoring.calls == [2]  # same content (any order): no second scoring
    assert once.aggregation("sum")([{"x": 5}]) == 5 and scoring.calls == [2, 1]
    scored, first = once.scored(records)
    assert not first and scored.outcomes == [{"x": 1}, {"x": 2}] and scored.records == records  # kept with the metrics


def test_a_failed_scoring_gives_nan_metrics_and_no_outcomes():
    once = ScoreOnce("toy", Counting(lambda records: 1 / 0))
    assert math.isnan(once.aggregation("a")([{"x": 1}]))
    scored, _ = once.scored([{"x": 1}])
    assert isinstance(scored.scores, ScoringFailed) and scored.outcomes is None


@pytest.fixture
def toy(monkeypatch):
    """The toy benchmark (tests/toy_bench) registered, its scoring counted."""
    monkeypatch.setenv(registry.BENCHMARKS_ENV, "toy_bench.benchmark")
    monkeypatch.setattr(registry, "_registered", functools.lru_cache(registry._registered.__wrapped__))  # read afresh
    benchmark = registry.get("toy_bench")
    calls = []
    score = type(benchmark.scoring).score
    monkeypatch.setattr(type(benchmark.scoring), "score", lambda self, records, settings, judge: calls.append(len(records)) or score(self, records, settings, judge))
    monkeypatch.setattr(type(benchmark.scoring), "outcomes", Counting.outcomes)
    return calls


def test_the_standard_error_bootstraps_the_outcomes_of_the_one_scoring(toy, monkeypatch):
    """lmms-eval asks the aggregation for its standard error: the same ScoreOnce answers, from the
    outcomes its one scoring returned (no second scoring, no second derivation of the outcomes)."""
    from lmms_video_reasoning.utils.results import aggregation, report_bootstrap
    from toy_bench import records as toy_records

    monkeypatch.delenv(aggregation.STDERR_ENV, raising=False)
    replies = ["1", "2", "0", "3", "1", "0", "2", "3", "1", "0"]
    records = [toy_records.build_record({"sample_id": f"q{i}", "answer": str(i % 4)}, reply) for i, reply in enumerate(replies)]
    once = ScoreOnce("toy_bench")
    aggregate = once.aggregation("accuracy")
    assert aggregate(records) == pytest.approx(100 * sum(reply == str(i % 4) for i, reply in enumerate(replies)) / len(replies))
    assert once.aggregation("model_failed").stderr_for(1000) is None  # not a headline metric
    stderr = aggregate.stderr_for(200)(records)
    assert toy == [len(records)], "scored once, for the metric and its standard error"
    scored, _ = once.scored(records)
    expected = report_bootstrap.bootstrap_values(report_bootstrap.Sampled("toy_bench", records, scored.outcomes, scored.settings), 200, aggregation.REPORT_SEED)
    assert stderr == pytest.approx(float(np.std(expected["accuracy"], ddof=1))) and stderr > 0
    # other outcomes give another standard error: the ones handed in are the ones bootstrapped
    flipped = [{"correct": not outcome["correct"]} if i % 3 else outcome for i, outcome in enumerate(scored.outcomes)]
    other = aggregation.bootstrap_stderrs("toy_bench", records[:-1], flipped[:-1], scored.settings, 200)["accuracy"]
    assert other != pytest.approx(stderr)


def test_records_key_depends_on_content():
    assert records_key([{"a": 1}, {"b": 2}]) == records_key([{"b": 2}, {"a": 1}])
    assert records_key([{"a": 1}]) != records_key([{"a": 2}])


def test_aggregation_functions_receive_lmms_eval_args(tmp_path):
    import inspect
    from types import SimpleNamespace

    import re

    from lmms_video_reasoning.utils.results.aggregation import run_files

    seen = []
    once = ScoreOnce("toy", Counting(lambda records: {"a": 1.0, "b": 2.0}))
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

    from lmms_video_reasoning.judges import LocalJudgeServer, get_judge
    from lmms_video_reasoning.utils.core.ask import Request
    from lmms_video_reasoning.utils.results.aggregation import judge_accounting_writer

    with LocalJudgeServer(lambda body: "1") as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_API_KEY", "sk-test-secret-123456")
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "cache.sqlite"))
        judge = get_judge("vrbench")
        assert judge.ask(Request([{"role": "user", "content": "x"}])).ok
        judge_accounting_writer("vrbench")({}, RunFiles(tmp_path, "20260101_120000"))
    written = (tmp_path / "20260101_120000_judge_accounting_vrbench.json").read_text()
    assert json.loads(written)  # valid JSON with the counts
    assert "sk-test-secret-123456" not in written
    judge_accounting_writer("vrbench")({}, None)  # no --output_path: nothing to write, no error


def test_details_writer_puts_the_scores_beside_the_accounting(tmp_path, monkeypatch):
    """With `details`, the scores, the judge accounting (None for scores judging nothing) and the settings."""
    import json

    from lmms_video_reasoning.judges import LocalJudgeServer
    from lmms_video_reasoning.utils.results.aggregation import judge_accounting_writer

    writer = judge_accounting_writer("cg_bench", lambda scores: (scores["kind"], scores["kind"] == "open"))
    with LocalJudgeServer(lambda body: "1") as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "cache.sqlite"))
        for kind in ("mcq", "open"):
            writer({"kind": kind, "acc": 50.0}, RunFiles(tmp_path, "20260101_120000"))
    mcq, opened = (json.loads((tmp_path / f"20260101_120000_cg_bench_{kind}_details.json").read_text()) for kind in ("mcq", "open"))
    assert mcq["acc"] == 50.0 and mcq["judge"] is None and "settings" in mcq
    assert opened["judge"]["judge"]["benchmark"] == "cg_bench" and opened["judge"]["stats"]["calls"] == 0
    assert not list(tmp_path.glob("*judge_accounting*"))
