"""No run is lost to the judge, and no judge outage is published as a score (issue 22).

Real processes and real HTTP: lmms-eval's own CLI runs the replay model on the sample
benchmark while the judge endpoint refuses connections, has a host name that does not
resolve, dies halfway, answers HTTP 500 to everything, or answers garbage. For each: every
task's samples reach disk, the judged metrics are not computed (NaN) with `judge_failed`
counted, the cause is named in the log and in the judge accounting, and the run takes
seconds, not the minutes of retries it took before the circuit breaker.

Then the preflight: a run whose judge cannot work, whose data root misses a video or whose
output folder cannot be written stops before generating anything, with one message naming
the cause and the fix; `--predict_only` does not need the judge.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lmms_cli import metric, samples_files
from lmms_video_reasoning.judges.config import CONCURRENCY
from lmms_video_reasoning.judges.limits import CircuitBreaker
from model_server import FaultPlan, LocalJudgeServer, SampleJudge

pytestmark = pytest.mark.slow

TASKS = ("vcr_cot", "vr_bench", "cg_bench_open")
JUDGED = {"vcr_cot": "accuracy", "vr_bench": "process_score", "cg_bench_open": "oe_acc"}
KEY = "sk-outage-SECRETKEY-0123456789"


def lmms_eval(sample_dir: Path, output: Path, env: dict, tasks=TASKS, extra=(), model: tuple[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m lmms_eval` with the replay model (or `model`: (name, model_args))."""
    name, args = model or ("vr_replay", f"predictions={sample_dir / 'predictions.jsonl'}")
    cmd = [sys.executable, "-m", "lmms_eval", "--tasks", ",".join(tasks), "--model", name,
           "--model_args", args, "--output_path", str(output), *extra]
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env}
    started, cpu = time.monotonic(), children_cpu_seconds()
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=600)
    proc.cpu_seconds = children_cpu_seconds() - cpu  # what it computed, for bounds a loaded machine must not break
    return proc, time.monotonic() - started


def children_cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def results_of(output: Path) -> dict:
    found = glob.glob(str(output / "**" / "*_results.json"), recursive=True)
    assert found, f"lmms-eval wrote no results under {output}"
    return json.loads(Path(found[0]).read_text())


def accounting_of(output: Path, benchmark: str) -> dict:
    found = glob.glob(str(output / "**" / f"*_judge_accounting_{benchmark}.json"), recursive=True)
    assert found, f"no judge accounting for {benchmark} under {output}"
    return json.loads(Path(found[0]).read_text())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def judge_env(sample_env: dict, base_url: str, tmp: Path, **extra: str) -> dict:
    return {**sample_env, "LMMS_VR_JUDGE_BASE_URL": base_url, "LMMS_VR_JUDGE_API_KEY": KEY,
            "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(tmp / "cache.sqlite"), **extra}


def check_outage_run(proc, seconds: float, output: Path, reason: str, from_start: bool = True) -> dict:
    """`from_start`: the judge never worked (every task's judged metric NaN); else tasks judged
    before it died keep their scores (at most 5% failed), the others are NaN."""
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in log, log[-4000:]
    results = results_of(output)
    withheld = []
    for task in TASKS:
        lines = samples_files(output, task)[0].read_text().splitlines()
        samples = results["n-samples"][task]["original"]
        assert len(lines) == samples, f"{task}: samples lost"
        failed = metric(results, task, "judge_failed")
        if math.isnan(metric(results, task, JUDGED[task])):
            assert failed > 0.05 * samples * 0.5, f"{task}: not computed with only {failed} failed judgments"
            withheld.append(task)
        else:
            assert not from_start and failed <= 0.05 * samples, f"{task}: an outage published as a score ({failed} failed)"
    assert withheld == list(TASKS) if from_start else withheld, withheld
    assert metric(results, "vr_bench", "mcq_accuracy") > 0  # what needs no judge is still scored
    assert reason in log, f"the cause {reason!r} is not in the log:\n{log[-3000:]}"
    outages = [accounting_of(output, benchmark)["stats"] for benchmark in ("vcr_bench", "vrbench")]
    for stats in outages if from_start else []:
        assert reason in stats["outage"]["reason"] and stats["failure_reasons"], stats
    assert KEY not in log and not any(KEY in Path(p).read_text(errors="replace") for p in glob.glob(str(output / "**" / "*"), recursive=True)
                                      if Path(p).is_file())
    # The breaker's promptness is counted, not timed (a loaded machine stretches wall time): one
    # breaker per endpoint lets through at most its run of failed attempts and those in flight,
    # not the retries of every judgment of the run.
    calls = {benchmark: accounting_of(output, benchmark)["stats"]["calls"] for benchmark in ("vcr_bench", "vrbench")}
    print(f"outage ({reason}): {seconds:.0f} s, judge requests sent {calls}")
    assert sum(calls.values()) <= MAX_CALLS_IN_AN_OUTAGE, calls
    assert seconds < 600, f"the outage took {seconds:.0f} s"  # a hang, not a slow machine
    return results


MAX_CALLS_IN_AN_OUTAGE = CircuitBreaker(CONCURRENCY.default).attempt_limit + CONCURRENCY.default


@pytest.mark.parametrize("case", ["refused", "dns", "http_500", "garbage", "dies_halfway"])
def test_a_judge_outage_keeps_the_samples_and_scores_nothing(tmp_path, sample_dir, sample_env, case):
    output = tmp_path / "runs"
    if case in ("refused", "dns"):
        # The endpoint goes away after the preflight (switched off here, which stands for that).
        base = f"http://127.0.0.1:{free_port()}/v1" if case == "refused" else "http://judge.does-not-resolve.invalid/v1"
        env = judge_env(sample_env, base, tmp_path, LMMS_VR_PREFLIGHT="off")
        proc, seconds = lmms_eval(sample_dir, output, env, extra=["--log_samples"])
        reason = "connection refused" if case == "refused" else "does not resolve"
        check_outage_run(proc, seconds, output, reason)
        return
    faults = {"http_500": FaultPlan(first_k=1000, kinds=("500",)), "garbage": FaultPlan(first_k=1000, kinds=("malformed",)),
              "dies_halfway": None}[case]
    with LocalJudgeServer(SampleJudge(), api_key=KEY, faults=faults) as server:
        if case == "dies_halfway":
            def kill_after(count: int) -> None:
                while server.request_count < count:
                    time.sleep(0.01)
                server.stop()

            threading.Thread(target=kill_after, args=(15,), daemon=True).start()
        proc, seconds = lmms_eval(sample_dir, output, judge_env(sample_env, server.base_url, tmp_path), extra=["--log_samples"])
    reason = {"http_500": "http 500", "garbage": "malformed reply", "dies_halfway": "connection refused"}[case]
    check_outage_run(proc, seconds, output, reason, from_start=case != "dies_halfway")
    if case == "dies_halfway":  # the judgments made before it died are cached, the rest are not
        import sqlite3

        with sqlite3.connect(tmp_path / "cache.sqlite") as connection:
            cached = connection.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
        assert cached >= 15  # everything answered before the death is kept for the rerun


def test_an_aggregation_error_loses_nothing_and_score_recovers_the_run(tmp_path, sample_dir, sample_env):
    """The issue's case: a judge error at aggregation (here a bad LMMS_VR_JUDGE_PRICES, past the
    preflight) used to make lmms-eval write nothing. Now: NaN metrics, results and records on
    disk; and without --log_samples the saved records are what `lmms-vr score` scores."""
    with LocalJudgeServer(SampleJudge(), api_key=KEY) as server:
        env = judge_env(sample_env, server.base_url, tmp_path, LMMS_VR_PREFLIGHT="off", LMMS_VR_JUDGE_PRICES="not json")
        proc, _seconds = lmms_eval(sample_dir, tmp_path / "runs", env, tasks=("vcr_cot",))
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "LMMS_VR_JUDGE_PRICES must be JSON" in log and "scoring failed" in log, log[-3000:]
        results = results_of(tmp_path / "runs")
        assert math.isnan(metric(results, "vcr_cot", "accuracy"))
        records = glob.glob(str(tmp_path / "runs" / "**" / "*_records_vcr_cot.jsonl"), recursive=True)
        assert len(records) == 1 and len(Path(records[0]).read_text().splitlines()) == results["n-samples"]["vcr_cot"]["original"]

        fixed = {**os.environ, **judge_env(sample_env, server.base_url, tmp_path)}
        started = time.monotonic()
        scored = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(tmp_path / "runs"),
                                 "--out", str(tmp_path / "scored.json")], env=fixed, capture_output=True, text=True, timeout=300)
        healthy_seconds = time.monotonic() - started
    assert scored.returncode == 0, scored.stdout + scored.stderr
    accuracy = json.loads((tmp_path / "scored.json").read_text())["results"]["vcr_cot"]["accuracy,none"]
    assert 0 < accuracy <= 100

    # The same scoring against a judge that is down: an outage, not 0%, and a non-zero exit status.
    down = {**os.environ, **judge_env(sample_env, f"http://127.0.0.1:{free_port()}/v1", tmp_path, LMMS_VR_JUDGE_CACHE="off")}
    started = time.monotonic()
    outage = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(tmp_path / "runs"),
                             "--out", str(tmp_path / "down.json")], env=down, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    assert outage.returncode == 3 and "JUDGE OUTAGE" in outage.stdout and "connection refused" in outage.stdout, outage.stdout[-2000:]
    scored_down = json.loads((tmp_path / "down.json").read_text())
    assert math.isnan(scored_down["results"]["vcr_cot"]["accuracy,none"])
    # The breaker's promptness is counted (as in `check_outage_run`); the time bound, which catches a stall, grows with
    # what the same scoring took against a working judge (a loaded machine stretches both).
    assert scored_down["lmms_vr"]["judge_accounting"]["vcr_cot"]["stats"]["calls"] <= MAX_CALLS_IN_AN_OUTAGE, scored_down["lmms_vr"]
    assert seconds < max(60, 3 * healthy_seconds), f"scoring against a dead judge took {seconds:.0f} s ({healthy_seconds:.0f} s healthy)"


# ------------------------------------------------------------------------------ preflight


def check_stopped_before_generation(proc, seconds: float, output: Path, *needles: str) -> None:
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"the run went on:\n{log[-3000:]}"
    assert "cannot start" in log and all(needle in log for needle in needles), log[-3000:]
    assert "Traceback" not in log and "RetryError" not in log, log[-3000:]
    assert not glob.glob(str(output / "**" / "*_samples_*.jsonl"), recursive=True)
    # A preflight waiting on the network for minutes, not a slow start: the bound grows with the CPU the run used.
    assert seconds < 90 + 2 * proc.cpu_seconds, f"the preflight took {seconds:.0f} s ({proc.cpu_seconds:.0f} s of CPU)"
    print(f"stopped before generation in {seconds:.1f} s (process start included)")


def test_preflight_refuses_a_judge_it_cannot_reach_and_names_the_fix(tmp_path, sample_dir, sample_env):
    env = judge_env(sample_env, f"http://127.0.0.1:{free_port()}/v1", tmp_path)
    proc, seconds = lmms_eval(sample_dir, tmp_path / "runs", env, tasks=("vcr_cot",), extra=["--log_samples"])
    check_stopped_before_generation(proc, seconds, tmp_path / "runs", "connection refused", "--predict_only")


def test_preflight_refuses_a_model_the_endpoint_does_not_serve(tmp_path, sample_dir, sample_env):
    with LocalJudgeServer(SampleJudge(), api_key=KEY) as server:
        server.listed_models = ["qwen2.5-72b-instruct"]
        env = judge_env(sample_env, server.base_url, tmp_path)
        proc, seconds = lmms_eval(sample_dir, tmp_path / "runs", env, tasks=("cg_bench_open",), extra=["--log_samples"])
        assert server.request_count == 0  # no judge request was paid for
    check_stopped_before_generation(proc, seconds, tmp_path / "runs", "does not serve that model", "qwen2.5-72b-instruct")


def test_predict_only_needs_no_judge(tmp_path, sample_dir, sample_env):
    env = judge_env(sample_env, f"http://127.0.0.1:{free_port()}/v1", tmp_path)
    proc, _seconds = lmms_eval(sample_dir, tmp_path / "runs", env, tasks=("vcr_cot",), extra=["--predict_only"])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "cannot start" not in log and "Traceback" not in log, log[-3000:]
    assert samples_files(tmp_path / "runs", "vcr_cot") and results_of(tmp_path / "runs")  # lmms-eval exits 0 after an exception


@pytest.fixture(scope="module")
def tiny_qwen2_vl(tmp_path_factory) -> Path:
    from tiny_models import build_qwen2_vl

    return build_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl"))


@pytest.mark.parametrize("problem", ["missing_video", "corrupt_video", "unwritable_output"])
def test_preflight_stops_a_run_whose_data_or_output_cannot_work(tmp_path, sample_dir, sample_env, tiny_qwen2_vl, problem):
    """lmms-eval's own qwen2_vl (a tiny offline checkpoint) would read these videos: the run stops
    before its first document. (The replay model reads no video, so its runs skip this check.)"""
    root = tmp_path / "vcr_root"
    shutil.copytree(sample_env["VCR_BENCH_ROOT"], root)
    videos = sorted(root.rglob("*.mp4"))
    output, needle = tmp_path / "runs", ""
    if problem == "missing_video":
        videos[-1].unlink()
        needle = "1 videos missing"
    elif problem == "corrupt_video":
        videos[0].write_bytes(videos[0].read_bytes()[:2000])
        needle = "1 unusable"
    else:
        output.write_text("a file where the output folder should be")
        needle = "cannot be written"
    env = {**sample_env, "VCR_BENCH_ROOT": str(root), "LMMS_VR_JUDGE_CACHE": "off"}
    for name in ("OPENAI_API_KEY", "LMMS_VR_JUDGE_BASE_URL"):
        env.pop(name, None)
    model = ("qwen2_vl", f"pretrained={tiny_qwen2_vl},device=cpu,device_map=cpu")
    proc, seconds = lmms_eval(sample_dir, output, env, tasks=("vcr_cot",), extra=["--log_samples"], model=model)
    check_stopped_before_generation(proc, seconds, output if output.is_dir() else tmp_path / "none", needle)


def test_the_replay_model_needs_no_videos(tmp_path, sample_dir, sample_env):
    """Predictions made elsewhere are scored where the videos are not: no media check."""
    root = tmp_path / "vcr_root"
    shutil.copytree(sample_env["VCR_BENCH_ROOT"], root)
    for video in root.rglob("*.mp4"):
        video.unlink()
    env = {**sample_env, "VCR_BENCH_ROOT": str(root), "LMMS_VR_JUDGE_CACHE": "off", "VCR_BENCH_VISUAL_MODE": "video"}
    proc, _seconds = lmms_eval(sample_dir, tmp_path / "runs", env, tasks=("vcr_cot",), extra=["--log_samples"])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "cannot start" not in log and "Traceback" not in log, log[-3000:]
    assert "accuracy,none" in results_of(tmp_path / "runs")["results"]["vcr_cot"]  # lmms-eval exits 0 after an exception
