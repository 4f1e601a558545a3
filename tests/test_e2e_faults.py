"""Judge faults end to end (issue 8): a flaky judge API and a scoring run killed midway.

The replay model answers from the sample benchmark's demo predictions (mostly right, some
wrong, some unparseable), so every judged task's metrics are known from one clean run.
Then, with the same inputs:

- the judge endpoint injects 429 / 500 / timeouts / malformed and truncated bodies on
  about half of the attempts: lmms-eval's metrics are identical, no sample is lost;
- `lmms-vr score` is killed (SIGTERM, or SIGKILL) while judging and run again on the same
  SQLite judge cache: no judgment that completed before the kill is paid for again, and the
  metrics are those of the clean run.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmms_cli import run_lmms_eval, samples_files
from model_server import FaultPlan, LocalJudgeServer, SampleJudge
from test_e2e import same_metrics, task_metrics

pytestmark = pytest.mark.slow

JUDGED_TASKS = ("vcr_cot", "vr_bench", "cg_bench_open")
JUDGE_KEY = "sk-e2e-JUDGEKEY-faults-0123456789"
FAULT_KINDS = ("429", "500", "timeout", "malformed", "truncated")


def judge_env(sample_env: dict, server: LocalJudgeServer, cache: Path | str, **extra: str) -> dict:
    return {**sample_env, "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_API_KEY": JUDGE_KEY,
            "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(cache), **extra}


def replay(sample_dir: Path, output: Path, env: dict) -> dict:
    return run_lmms_eval(",".join(JUDGED_TASKS), output, model="vr_replay",
                         model_args=f"predictions={sample_dir / 'predictions.jsonl'}", env=env)


def cached_keys(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    with sqlite3.connect(cache) as connection:
        return {row[0] for row in connection.execute("SELECT key FROM replies")}


def request_keys(body: dict, max_reasks: int = 3) -> set[str]:
    """The cache keys a judge request body can have (one per re-ask number)."""
    from lmms_video_reasoning.judges.cache import request_key

    return {request_key(body["model"], body["messages"], body["max_tokens"], body.get("temperature"), attempt)
            for attempt in range(max_reasks + 1)}


@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_dir, sample_env) -> dict:
    """The replay run with a well-behaved judge: the reference metrics and judge request count."""
    tmp = tmp_path_factory.mktemp("clean_judge")
    with LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY) as server:
        results = replay(sample_dir, tmp / "out", judge_env(sample_env, server, tmp / "cache.sqlite"))
        requests = list(server.requests)
    assert requests, "the judged tasks sent no judge request"
    return {"results": results, "requests": requests, "output": tmp / "out"}


def test_flaky_judge_gives_the_clean_metrics(tmp_path_factory, sample_dir, sample_env, clean):
    tmp = tmp_path_factory.mktemp("flaky_judge")
    faults = FaultPlan(rate=0.5, kinds=FAULT_KINDS, seed=8, max_failures_per_request=3, timeout_sleep=2.0)
    with LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY, faults=faults) as server:
        # A 1 s client timeout makes the 2 s "timeout" replies real timeouts.
        results = replay(sample_dir, tmp / "out", judge_env(sample_env, server, tmp / "cache.sqlite", LMMS_VR_JUDGE_TIMEOUT="1"))
        received = server.request_count
    injected = received - len(clean["requests"])
    assert injected >= 20, f"only {injected} faults were injected"
    for task in JUDGED_TASKS:
        expected, got = task_metrics(clean["results"], task), task_metrics(results, task)
        assert same_metrics(expected, got), f"{task}: clean {expected} != with faults {got}"
        assert results["n-samples"][task] == clean["results"]["n-samples"][task]
        lines = samples_files(tmp / "out", task)[0].read_text().splitlines()
        assert len(lines) == results["n-samples"][task]["original"], f"{task}: samples lost"
    print(f"flaky judge: {injected} faults injected over {received} requests, metrics identical")


def _score_command(output: Path, scored: Path) -> list[str]:
    return [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(output), "--out", str(scored)]


@pytest.mark.parametrize("kill_signal", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_scoring_rerun_pays_no_completed_judgment_twice(tmp_path_factory, sample_env, clean, kill_signal):
    tmp = tmp_path_factory.mktemp(f"killed_{kill_signal.name}")
    cache = tmp / "judge_cache.sqlite"
    total = len(clean["requests"])
    with LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY, latency=0.05) as server:
        env = {**os.environ, **judge_env(sample_env, server, cache, LMMS_VR_JUDGE_CONCURRENCY="2")}
        # First run: killed once a third of the judge requests have been answered.
        proc = subprocess.Popen(_score_command(clean["output"], tmp / "first.json"), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while server.request_count < total // 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"scoring finished before it could be killed:\n{proc.stdout.read()[-3000:]}"
        proc.send_signal(kill_signal)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # SIGTERM ignored: escalate, as an operator would
            proc.kill()
            proc.wait()
        first_requests = server.request_count
        completed = cached_keys(cache)
        assert 0 < len(completed) < total, f"{len(completed)} cached judgments of {total}"
        assert not (tmp / "first.json").exists(), "the killed run still wrote results"

        # Second run on the same cache: only what was not completed is asked.
        rerun = subprocess.run(_score_command(clean["output"], tmp / "second.json"), env=env,
                               capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        second = server.requests[first_requests:]
    repaid = [body for body in second if request_keys(body) & completed]
    assert not repaid, f"{len(repaid)} judgments completed before the kill were paid for again"
    # A judgment may take more than one request (a re-ask after an unparseable reply, which is
    # never cached), so count the clean run's requests for the judgments not completed.
    outstanding = [body for body in clean["requests"] if not request_keys(body) & completed]
    assert len(second) == len(outstanding), (len(second), len(outstanding), total, len(completed))
    scored = json.loads((tmp / "second.json").read_text())
    for task in JUDGED_TASKS:
        expected, got = task_metrics(clean["results"], task), task_metrics(scored, task)
        assert got.keys() == expected.keys(), f"{task}: lmms-vr score reported {sorted(got)}, lmms-eval {sorted(expected)}"
        assert same_metrics(expected, got), f"{task}: {expected} != {got}"
    print(f"{kill_signal.name}: killed after {first_requests} of {total} judge requests, "
          f"{len(completed)} cached, rerun paid {len(second)} calls, 0 repeated")
