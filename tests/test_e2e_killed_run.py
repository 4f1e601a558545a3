"""A three-task run killed, end to end (real lmms-eval processes, real signals).

lmms-eval aggregates its tasks one after another, and this suite judges in the aggregation.
Every task's records reach disk before the first judging starts (with `<date_id>_run_tasks.json`
naming them), so a run killed while judging any task loses no generation: `lmms-vr score` on the
output folder gives every task the metrics of the undisturbed run. A run killed during generation
has nothing to recover, and `score` says so instead of scoring a part. A task of the run whose
records are gone is named by `score` (MISSING, exit status 5).

Each kill point is one lmms-eval run (about 40 s on 2 busy cores) and one `lmms-vr score`.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lmms_video_reasoning.utils.lmms.cli_run import Evaluation
from model_server import BENCHMARKS, LocalJudgeServer, SampleJudge
from test_e2e import same_metrics, task_metrics
from test_e2e_disk import GENERATED, files_under
from test_e2e_faults import JUDGE_KEY, JUDGED_TASKS, clean, judge_env  # noqa: F401 - `clean` is a fixture

pytestmark = pytest.mark.slow


def benchmark_of(body: dict) -> str | None:
    """The benchmark whose judge prompt this is (the one whose sample oracle answers it)."""
    for name in BENCHMARKS:
        module = importlib.import_module(f"lmms_video_reasoning.{name}.sample")
        responder = getattr(module, "oracle_judge_reply", None) or getattr(module, "judge_responder")
        try:
            if responder(body) is not None:
                return name
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            continue
    return None


class HoldsFirstRequestOf:
    """The sample judge, except that the first request of `benchmark` sets `reached` and is held
    (the run is then judging that benchmark's task, and is killed there)."""

    def __init__(self, benchmark: str | None) -> None:
        self.judge, self.benchmark, self.reached = SampleJudge(), benchmark, threading.Event()

    def __call__(self, body: dict) -> str:
        if self.benchmark is not None and not self.reached.is_set() and benchmark_of(body) == self.benchmark:
            self.reached.set()
            time.sleep(30)  # the process is killed meanwhile
        return self.judge(body)


def start(sample_dir: Path, output: Path, env: dict) -> subprocess.Popen:
    evaluation = Evaluation(",".join(JUDGED_TASKS), output, model="vr_replay",
                            model_args=f"predictions={sample_dir / 'predictions.jsonl'}", extra=("--verbosity", "DEBUG", "--log_samples"))
    return subprocess.Popen(evaluation.command(), env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def kill(proc: subprocess.Popen, how: signal.Signals) -> str:
    os.killpg(proc.pid, how)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out


def score(output: Path, env: dict, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(output), "--out", str(out)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("benchmark, how", [("vcr_bench", signal.SIGKILL), ("vrbench", signal.SIGKILL),
                                            ("cg_bench", signal.SIGKILL), ("vrbench", signal.SIGTERM)],
                         ids=["vcr_cot-SIGKILL", "vr_bench-SIGKILL", "cg_bench_open-SIGKILL", "vr_bench-SIGTERM"])
def test_a_run_killed_while_judging_any_task_loses_no_generation(tmp_path, sample_dir, sample_env, clean, benchmark, how):
    started = time.monotonic()
    output = tmp_path / "out"
    holder = HoldsFirstRequestOf(benchmark)
    with LocalJudgeServer(holder, api_key=JUDGE_KEY) as server:
        env = judge_env(sample_env, server, tmp_path / "cache.sqlite")
        proc = start(sample_dir, output, env)
        if not holder.reached.wait(timeout=400):
            out = kill(proc, signal.SIGKILL)
            pytest.fail(f"the run never judged {benchmark}:\n{out[-3000:]}")
        log = kill(proc, how)
        assert not files_under(output, "*_results.json"), "the killed run still wrote its results"
        manifest = files_under(output, "*_run_tasks.json")
        assert len(manifest) == 1, f"no run manifest written before judging:\n{log[-3000:]}"
        listed = json.loads(manifest[0].read_text())["tasks"]
        for task in JUDGED_TASKS:  # every task's generations on disk, whichever task was being judged
            whole = clean["results"]["n-samples"][task]["original"]
            assert listed[task]["records"] == whole and listed[task]["records_file"], listed
            records = manifest[0].parent / listed[task]["records_file"]
            assert len(records.read_text().splitlines()) == whole, f"{task}: the records file is not whole"
        scored = score(output, env, tmp_path / "scored.json")
    assert scored.returncode == 0, scored.stdout[-3000:] + scored.stderr[-3000:]
    results = json.loads((tmp_path / "scored.json").read_text())
    for task in JUDGED_TASKS:
        expected, got = task_metrics(clean["results"], task), task_metrics(results, task)
        assert got.keys() == expected.keys() and same_metrics(expected, got), f"{task}: undisturbed {expected} != recovered {got}"
    print(f"{how.name} while judging {benchmark}: every task recovered by score in {time.monotonic() - started:.0f} s")


def test_a_run_killed_during_generation_is_not_scored_in_part(tmp_path, sample_dir, sample_env):
    output = tmp_path / "out"
    with LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY) as server:
        env = judge_env(sample_env, server, tmp_path / "cache.sqlite")
        proc = start(sample_dir, output, env)
        seen = ""
        for line in proc.stdout:  # killed as soon as the model starts generating
            seen += line
            if GENERATED in line:
                break
        log = seen + kill(proc, signal.SIGKILL)
        assert GENERATED in log, log[-3000:]
        scored = score(output, env, tmp_path / "scored.json")
    assert scored.returncode == 2, scored.stdout[-3000:] + scored.stderr[-3000:]
    assert "no lmms-eval samples file" in scored.stderr and not (tmp_path / "scored.json").exists(), scored.stderr[-3000:]


def test_score_names_a_task_of_the_run_whose_records_are_gone(tmp_path, sample_dir, sample_env):
    """The records of one task removed after a kill: the other tasks are scored, the lost one is
    named (MISSING) and the exit status is 5; a changed records file is named too."""
    output = tmp_path / "out"
    holder = HoldsFirstRequestOf("vcr_bench")
    with LocalJudgeServer(holder, api_key=JUDGE_KEY) as server:
        env = judge_env(sample_env, server, tmp_path / "cache.sqlite")
        proc = start(sample_dir, output, env)
        assert holder.reached.wait(timeout=400)
        kill(proc, signal.SIGKILL)
        (records_vr,) = files_under(output, "*_records_vr_bench.jsonl")
        records_vr.unlink()
        (records_cg,) = files_under(output, "*_records_cg_bench_open.jsonl")
        lines = records_cg.read_text().splitlines()
        records_cg.write_text("\n".join(lines[:-1]) + "\n")  # one record lost after it was written
        scored = score(output, env, tmp_path / "scored.json")
    out = scored.stdout
    assert scored.returncode == 5, out[-3000:] + scored.stderr[-3000:]
    assert "MISSING: task vr_bench of run" in out and "neither its samples file nor the records" in out, out[-3000:]
    assert "MISSING: task cg_bench_open of run" in out and "was changed since it was written" in out, out[-3000:]
    assert set(json.loads((tmp_path / "scored.json").read_text())["results"]) == {"vcr_cot", "cg_bench_open"}
