"""`lmms-vr score` against real lmms-eval runs: same metrics as in the run, from the judge cache.

Two `python -m lmms_eval` runs of the sample benchmark with the replay model and the sample
judge (real HTTP on 127.0.0.1): one with `--log_samples` for a task of each benchmark, one
with `--predict_only` (raw responses only). Everything else is in-process.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from lmms_cli import run_lmms_eval, samples_files
from lmms_video_reasoning.utils.core.roots import read_jsonl
from lmms_video_reasoning.utils.results import report, report_runs, samples_io, score
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from score_report_support import environment, sample_judge

pytestmark = pytest.mark.slow

LOGGED_TASKS = ("vcr_cot", "vr_bench", "cg_bench_mcq", "cg_bench_open")
PREDICT_ONLY_TASKS = ("vcr_cot", "cg_bench_open")  # both judge-scored


@pytest.fixture(scope="module")
def runs(sample_dir, sample_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("lmms_runs")
    predictions = sample_dir / "predictions.jsonl"
    with sample_judge(out / "judge.sqlite", sample_env) as server:
        args = f"predictions={predictions}"
        logged = run_lmms_eval(",".join(LOGGED_TASKS), out / "logged", model_args=args, env=sample_env)
        run_lmms_eval(",".join(PREDICT_ONLY_TASKS), out / "predict_only", model_args=args, env=sample_env, extra=["--predict_only"])
        yield SimpleNamespace(out=out, logged=logged, server=server, predictions=predictions)


def in_run_metrics(results: dict, task: str) -> dict:
    """The task's metrics as lmms-eval reported them (stderr entries left out)."""
    return {key: value for key, value in results["results"][task].items() if key.endswith(",none") and "_stderr" not in key}


def assert_same_metrics(expected: dict, actual: dict, task: str) -> None:
    assert expected, f"{task}: no metrics in the run"
    for key, value in expected.items():
        got = actual["results"][task][key]
        assert (math.isnan(value) and math.isnan(got)) if isinstance(value, float) and math.isnan(value) else got == value, \
            f"{task} {key}: in-run {value!r}, scored {got!r}"


def test_score_on_samples_equals_in_run_metrics_from_the_cache(runs, capsys):
    before = runs.server.request_count
    out = runs.out / "rescored.json"
    with environment({"LMMS_VR_JUDGE_API_KEY": "sk-test-SECRET-4711"}):
        assert cli_main(["score", str(runs.out / "logged"), "--out", str(out)]) == 0
    rescored = json.loads(out.read_text())
    written = out.read_text() + "".join(score.samples_path(out, task).read_text() for task in LOGGED_TASKS)
    assert "SECRET-4711" not in written + capsys.readouterr().out, "the judge key never reaches results or samples"
    assert sorted(rescored["results"]) == sorted(LOGGED_TASKS)
    for task in LOGGED_TASKS:
        assert_same_metrics(in_run_metrics(runs.logged, task), rescored, task)
        assert score.samples_path(out, task).is_file()
    accounting = rescored["lmms_vr"]["judge_accounting"]
    assert set(accounting) == {"vcr_cot", "vr_bench", "cg_bench_open"}  # the judge-scored tasks
    # Every verdict comes from the run's cache; only a judgment that got no parsed reply in the
    # run (the sample judge's deliberate refusal) is asked again: 1 + 2 re-asks each.
    failed = {task: runs.logged["results"][task]["judge_failed,none"] for task in accounting}
    assert failed["vr_bench"] > 0
    for task, entry in accounting.items():
        assert entry["stats"]["calls"] == 3 * failed[task] and entry["stats"]["cache_hits"] > 0, task
        assert set(entry["stats"]["answered_by"]) == {"sample-oracle"}, task
    assert runs.server.request_count == before + 3 * sum(failed.values())


def test_predict_only_file_scored_end_to_end_with_the_judge(runs, tmp_path):
    for task in PREDICT_ONLY_TASKS:
        [path] = samples_files(runs.out / "predict_only", task)
        rows = read_jsonl(path)
        assert all(samples_io.logged_record(row, samples_io.task_spec(task)) is None for row in rows), "raw responses only"
    before = runs.server.request_count
    with environment({"LMMS_VR_JUDGE_CACHE": str(tmp_path / "fresh.sqlite")}):  # a new cache: the judge is really asked
        out = tmp_path / "predict_only.json"
        assert cli_main(["score", str(runs.out / "predict_only"), "--out", str(out)]) == 0
    scored = json.loads(out.read_text())
    for task in PREDICT_ONLY_TASKS:
        assert_same_metrics(in_run_metrics(runs.logged, task), scored, task)
        assert scored["lmms_vr"]["judge_accounting"][task]["stats"]["calls"] > 0
    assert runs.server.request_count > before


def test_replay_predictions_scored_like_the_run(runs, tmp_path):
    out = tmp_path / "replay.json"
    assert cli_main(["score", str(runs.predictions), "--task", "vr_bench", "--out", str(out)]) == 0
    assert_same_metrics(in_run_metrics(runs.logged, "vr_bench"), json.loads(out.read_text()), "vr_bench")


def test_report_on_an_lmms_eval_folder(runs, tmp_path):
    before = runs.server.request_count
    data = report.build_report([str(runs.out / "logged")], tmp_path, n=200, seed=0)
    assert set(data["sections"]) == {"vcr_bench", "vrbench", "cg_bench"}
    # Per-sample outcomes come from the judge cache; at most the judgments that got no parsed
    # reply in the run (re-asked 1 + 2 times; never served from the cache) are asked again.
    failed = sum(runs.logged["results"][task].get("judge_failed,none", 0) for task in LOGGED_TASKS)
    assert runs.server.request_count - before <= 3 * failed, "per-sample outcomes recomputed from the judge cache"
    [run] = data["runs"]
    for task in LOGGED_TASKS:
        entry = data["tasks"][f"{run}|{task}"]
        failed = runs.logged["results"][task].get("judge_failed,none") or 0
        # a reply that never parsed is not served from the cache; the outcomes recomputed without it
        # reproduce the run's (judge_failed included), so it is the run's own failed judgment, not a gap
        assert entry["note"] == "", (task, failed, entry["note"])
        benchmark = samples_io.task_spec(task).benchmark
        for metric in report_runs.spec_of(benchmark).headline:
            point = entry["point"].get(metric)
            if point is not None and metric in entry["ci"]:
                low, high = entry["ci"][metric]
                assert low <= point <= high, (task, metric)
    joined = data["sections"]["cg_bench"]["joined"][f"{run}|mini"]
    assert joined["crr"] == pytest.approx(runs.logged["results"]["cg_bench_mcq"]["crr,none"])
    assert joined["oe_acc"] == pytest.approx(runs.logged["results"]["cg_bench_open"]["oe_acc,none"])


def test_score_errors_name_the_fix(runs, tmp_path, capsys):
    assert cli_main(["score", str(tmp_path / "nothing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert cli_main(["score", str(runs.predictions), "--task", "no_such_task"]) == 2
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_main(["score", str(empty)]) == 2
    assert "--log_samples" in capsys.readouterr().err
    broken = tmp_path / "x_samples_vr_bench.jsonl"
    broken.write_text('{"doc_id": 0, "filtered_resps": "A"}\n{not json\n')
    assert cli_main(["score", str(broken)]) == 2
    assert f"{broken}:2: not valid JSON" in capsys.readouterr().err


def test_help_says_task_is_optional(capsys):
    """`--task` is optional (a predictions file names its tasks, a samples file its task)."""
    from lmms_video_reasoning.utils.tools.cli import build_parser

    parser = build_parser()
    score_help = parser._subparsers._group_actions[0].choices["score"].format_help()
    assert "optional" in score_help and "required" not in score_help


def test_trivially_bad_paths_name_the_problem(tmp_path, capsys):
    """An empty file, a samples file with blank lines only, a results file, a folder of no samples
    file, a missing path: each message names the path and the problem, and says what to give."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "x_samples_vr_bench.jsonl"
    blank.write_text("\n \n")
    for path in (empty, blank):
        assert cli_main(["score", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}: the file is empty" in err and "--log_samples" in err and "not named" not in err
    assert cli_main(["score", str(empty), "--task", "vr_bench"]) == 2
    assert f"{empty}: the file is empty" in capsys.readouterr().err
    results = tmp_path / "run" / "20260101_000000_results.json"
    results.parent.mkdir()
    results.write_text("{}")
    assert cli_main(["score", str(results)]) == 2
    assert f"{results}: an lmms-eval results file, not a samples file: give its folder ({results.parent})" in capsys.readouterr().err
    other = tmp_path / "run" / "20260101_000000_samples_not_ours.jsonl"
    other.write_text('{"doc_id": 0}\n')
    assert cli_main(["score", str(results.parent)]) == 2
    err = capsys.readouterr().err
    assert f"{results.parent}: no lmms-eval samples file" in err and "'not_ours' is not a task of this suite" in err
    assert cli_main(["score", str(tmp_path / "missing.jsonl")]) == 2
    assert f"{tmp_path / 'missing.jsonl'}: no such file or folder" in capsys.readouterr().err
