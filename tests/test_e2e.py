"""End to end as users run it (issue 8): the real model paths, two ranks, faults, secrets.

Every test here runs lmms-eval's own CLI in a subprocess on the generated sample benchmark,
with real HTTP servers on 127.0.0.1 standing in for the judge and for a model server:

- the user's command with lmms-eval's `qwen2_vl` on a tiny random checkpoint: the videos
  are decoded by lmms-eval's own path (decord, witnessed by a probe) and every metric the
  task YAMLs declare is in the results;
- the `openai` chat model against a local model server: the frames reach the server;
- `torchrun --nproc_per_node 2`: the same metrics as one rank, and the judge asked once;
- model server faults: lmms-eval's failure string is never judged as an answer;
- no API key in any file the run writes.

CLI runs are shared through module fixtures (each costs 15-60 s on 2 CPU cores).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lmms_cli import run_lmms_eval, samples_files
from model_server import (
    FaultPlan,
    LocalJudgeServer,
    PersistentFaults,
    SampleJudge,
    decoded_images,
    every_nth_question,
    model_responder,
    request_text,
)
from tiny_models import build_qwen2_vl, decode_probe_env, decoded_batches

pytestmark = pytest.mark.slow

TASKS = ("vcr_cot", "cg_bench_long")
BENCHMARKS = ("vcr_bench", "cg_bench")
# Recognisable fake keys: the scan at the end looks for them in everything the runs wrote.
MODEL_KEY = "sk-e2e-MODELKEY-0123456789abcdef"
JUDGE_KEY = "sk-e2e-JUDGEKEY-0123456789abcdef"
FAILURE_MARK = "LMMS_EVAL_REQUEST_FAILED"
# The openai model: one attempt (a failure is final), small frame budget for video parts.
OPENAI_ARGS = "model_version=local-video-model,base_url={url},max_retries=1,retry_backoff_s=0,timeout=30,max_frames_num=4"

# ---------------------------------------------------------------------- helpers


def _yaml_loader():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return Loader


def declared_metrics(task: str) -> list[str]:
    """The metric names a task's YAML declares (following `include:`), from the installed task folders."""
    from lmms_video_reasoning.utils.core.registry import task_dirs

    by_task = {}
    for path in (path for folder in task_dirs() for path in folder.rglob("*.yaml")):
        config = yaml.load(path.read_text(), Loader=_yaml_loader()) or {}
        if isinstance(config, dict) and config.get("task") == task:
            by_task[task] = (path, config)
    path, config = by_task[task]
    while "metric_list" not in config and "include" in config:
        parent = yaml.load((path.parent / config["include"]).read_text(), Loader=_yaml_loader())
        config = {**parent, **{k: v for k, v in config.items() if k != "include"}}
    return [entry["metric"] for entry in config["metric_list"]]


def task_metrics(results: dict, task: str) -> dict:
    """{metric: value} of a task in lmms-eval's results JSON (stderr entries dropped)."""
    return {key.split(",")[0]: value for key, value in results["results"][task].items()
            if key.endswith(",none") and "_stderr" not in key}


def same_metrics(first: dict, second: dict) -> bool:
    """Equal values, NaN equal to NaN (a metric that cannot be computed on the sample)."""
    if first.keys() != second.keys():
        return False
    for key, value in first.items():
        other = second[key]
        if isinstance(value, float) and isinstance(other, float) and math.isnan(value) and math.isnan(other):
            continue
        if value != other:
            return False
    return True


def response_of(sample: dict) -> str:
    """The model's response in a `--log_samples` line."""
    response = sample["filtered_resps"]
    return response[0] if isinstance(response, list) else response


def logged_samples(output_path: Path, task: str) -> list[dict]:
    files = samples_files(output_path, task)
    assert len(files) == 1, f"expected one samples file for {task}, found {files}"
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def doc_count(results: dict, task: str, limited: bool = False) -> int:
    """Documents of a task in the run (lmms-eval's `n-samples`: all of them, or after --limit)."""
    return results["n-samples"][task]["effective" if limited else "original"]


def torchrun_lmms_eval(tasks: str, output_path: Path, *, model: str, model_args: str, env: dict, nproc: int = 2) -> dict:
    """`torchrun --nproc_per_node N -m lmms_eval ...` on CPU, as a cluster user launches it."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
           "-m", "lmms_eval", "--tasks", tasks, "--model", model, "--model_args", model_args,
           "--verbosity", "DEBUG", "--output_path", str(output_path), "--log_samples"]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "OMP_NUM_THREADS": "1", **env}
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback (most recent call last)" not in log, f"torchrun failed:\n{log[-6000:]}"
    found = sorted(Path(output_path).rglob("*_results.json"), key=os.path.getmtime)
    assert found, f"no results file under {output_path}:\n{log[-3000:]}"
    results = json.loads(found[-1].read_text())
    results["_log"] = log
    return results


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> dict:
    """The sample benchmark (VCR-Bench + CG-Bench) and the environment pointing the tasks at it."""
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample

    out = tmp_path_factory.mktemp("e2e_sample")
    write_sample(out, BENCHMARKS)
    env = {**env_for(out, BENCHMARKS), "OPENAI_API_KEY": MODEL_KEY, "LMMS_VR_JUDGE_API_KEY": JUDGE_KEY,
           "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_TIMEOUT": "5",
           # qwen2_vl gets proxy clips of its own frames (utils/lmms/model_video.py), kept beside the sample.
           "LMMS_VR_PROXY_CACHE_DIR": str(out / "video_proxies")}
    return {"root": out, "env": env}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Path]:
    """Every folder/file a run wrote, plus its captured log, for the secret scan."""
    return []


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return build_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl"))


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes of this test process."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _judged_run(tmp: Path, name: str, bench: dict, written: list, run, faults: FaultPlan | None = None) -> dict:
    """Run `run(env)` with a fresh local judge (key required) and a fresh judge cache; collect what it wrote."""
    judge = SampleJudge()
    cache = tmp / f"{name}_judge_cache.sqlite"
    with LocalJudgeServer(judge, api_key=JUDGE_KEY, faults=faults) as server:
        env = {**bench["env"], "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_CACHE": str(cache)}
        started, cpu_before = time.perf_counter(), _children_cpu()
        results = run(env)
        elapsed, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    log = tmp / f"{name}.log"
    log.write_text(results.pop("_log"), encoding="utf-8", errors="backslashreplace")
    written.extend([cache, log])
    return {"results": results, "judge_requests": list(server.requests), "unrecognised": judge.unrecognised,
            "seconds": elapsed, "cpu_seconds": cpu, "log": log.read_text()}


@pytest.fixture(scope="module")
def qwen2_vl_run(tmp_path_factory, bench, written, tiny_checkpoint) -> dict:
    """The user's command, with the tiny checkpoint and the decode probe."""
    tmp = tmp_path_factory.mktemp("qwen2_vl_run")
    probe = tmp / "probe"
    output = tmp / "out"
    written.append(output)
    args = f"pretrained={tiny_checkpoint},device=cpu,device_map=cpu"

    def run(env):
        return run_lmms_eval(",".join(TASKS), output, model="qwen2_vl", model_args=args,
                             env={**env, **decode_probe_env(probe)}, extra=["--limit", "4"])

    outcome = _judged_run(tmp, "qwen2_vl", bench, written, run)
    outcome.update(output=output, decoded=decoded_batches(probe))
    return outcome


@pytest.fixture(scope="module")
def model_server():
    """The stand-in model server for lmms-eval's `openai` model (requires the model key)."""
    with LocalJudgeServer(model_responder, api_key=MODEL_KEY, model="local-video-model") as server:
        yield server


@pytest.fixture(scope="module")
def openai_run(tmp_path_factory, bench, written, model_server) -> dict:
    """`--model openai` on one rank against the local model server."""
    tmp = tmp_path_factory.mktemp("openai_run")
    output = tmp / "out"
    written.append(output)
    before = model_server.request_count

    def run(env):
        return run_lmms_eval(",".join(TASKS), output, model="openai",
                             model_args=OPENAI_ARGS.format(url=model_server.base_url), env=env)

    outcome = _judged_run(tmp, "openai", bench, written, run)
    outcome.update(output=output, model_requests=model_server.requests[before:])
    return outcome


# ---------------------------------------------------------------------- the user's command


def test_qwen2_vl_user_command_decodes_videos_and_reports_every_metric(qwen2_vl_run, bench):
    results, decoded = qwen2_vl_run["results"], qwen2_vl_run["decoded"]
    for task in TASKS:
        values = task_metrics(results, task)
        missing = [name for name in declared_metrics(task) if name not in values]
        assert not missing, f"{task}: metrics declared in its YAML but absent from the results: {missing}"
        samples = logged_samples(qwen2_vl_run["output"], task)
        assert len(samples) == doc_count(results, task, limited=True) == 4, f"{task}: samples lost"
        assert all(response_of(s).strip() for s in samples), \
            f"{task}: the tiny model produced no text for some sample"
    # The videos reached the model through lmms-eval's own decoding: qwen_vl_utils reads each
    # video with decord (at least 4 frames), once per sample: the proxy clip of the frames its
    # own path keeps (tests/test_model_equivalence.py checks the tensors equal those of the source).
    assert len(decoded) == sum(doc_count(results, task, limited=True) for task in TASKS), decoded
    for batch in decoded:
        assert Path(batch["path"]).is_file() and str(bench["root"]) in batch["path"], batch
        assert batch["frames"] >= 4 and batch["shape"][-1] == 3, batch
    assert "Failed to process video" not in qwen2_vl_run["log"]
    assert not qwen2_vl_run["unrecognised"], "the judge received prompts no sample oracle knows"
    print(f"qwen2_vl tiny-model run: {qwen2_vl_run['seconds']:.0f} s wall, {qwen2_vl_run['cpu_seconds']:.0f} s CPU, "
          f"{len(decoded)} videos decoded ({sum(b['frames'] for b in decoded)} frames)")


# ---------------------------------------------------------------------- the openai chat path


def test_openai_model_sends_video_frames_and_reports_every_metric(openai_run, bench):
    results = openai_run["results"]
    for task in TASKS:
        values = task_metrics(results, task)
        missing = [name for name in declared_metrics(task) if name not in values]
        assert not missing, f"{task}: metrics declared in its YAML but absent from the results: {missing}"
        samples = logged_samples(openai_run["output"], task)
        assert len(samples) == doc_count(results, task), f"{task}: samples lost"
        # The record is logged once per sample, under the first metric; the others name it.
        for sample in samples:
            copies = [name for name in declared_metrics(task) if isinstance(sample.get(name), dict)]
            assert copies == [declared_metrics(task)[0]], f"{task}: the record is logged under {copies}"
    requests = openai_run["model_requests"]
    assert len(requests) == sum(doc_count(results, task) for task in TASKS), "one model request per document"
    for body in requests:
        frames = decoded_images(body)  # raises if a part is not a real image
        assert len(frames) >= 1, "a request reached the model server without any video frame"
        # Frames of the synthetic videos: coloured shapes on a plain background, not blank images.
        assert any(len(frame.resize((32, 24)).getcolors(32 * 24)) > 1 for frame in frames), "all frames are uniform"
    assert not openai_run["unrecognised"], "the judge received prompts no sample oracle knows"


# ---------------------------------------------------------------------- several ranks


def test_two_ranks_give_the_single_rank_metrics_and_judge_once(tmp_path_factory, bench, written, model_server, openai_run):
    tmp = tmp_path_factory.mktemp("torchrun")
    output = tmp / "out"
    written.append(output)

    def run(env):
        return torchrun_lmms_eval(",".join(TASKS), output, model="openai",
                                  model_args=OPENAI_ARGS.format(url=model_server.base_url), env=env)

    two = _judged_run(tmp, "torchrun", bench, written, run)
    for task in TASKS:
        one_rank, two_ranks = task_metrics(openai_run["results"], task), task_metrics(two["results"], task)
        assert same_metrics(one_rank, two_ranks), f"{task}: 1 rank {one_rank} != 2 ranks {two_ranks}"
        assert len(logged_samples(output, task)) == doc_count(openai_run["results"], task), f"{task}: samples lost across ranks"
    # Aggregation (and so judging) runs on rank 0 only: as many judge requests as one rank.
    assert len(two["judge_requests"]) == len(openai_run["judge_requests"]) > 0


# ---------------------------------------------------------------------- model server faults


def test_model_server_failures_are_counted_not_judged(tmp_path_factory, bench, written):
    """lmms-eval's `openai` model answers "[LMMS_EVAL_REQUEST_FAILED ...]" when the server fails.

    That string must never reach the judge as a model answer, nor be parsed as one.
    """
    tmp = tmp_path_factory.mktemp("model_faults")
    output = tmp / "out"
    written.append(output)
    faults = PersistentFaults(every_nth_question(4), kind="500")
    with LocalJudgeServer(model_responder, api_key=MODEL_KEY, faults=faults, model="local-video-model") as server:
        def run(env):
            return run_lmms_eval("vcr_cot", output, model="openai", model_args=OPENAI_ARGS.format(url=server.base_url), env=env)

        outcome = _judged_run(tmp, "model_faults", bench, written, run)
    samples = logged_samples(output, "vcr_cot")
    failed = [s for s in samples if response_of(s).startswith("[" + FAILURE_MARK)]
    assert len(samples) == doc_count(outcome["results"], "vcr_cot"), "samples lost"
    failing = {request_text(body) for body in faults.failed_bodies}
    assert len(failed) == len(failing) > 0, [response_of(s)[:80] for s in samples]
    judged_failures = [body for body in outcome["judge_requests"] if FAILURE_MARK in json.dumps(body)]
    assert not judged_failures, f"{len(judged_failures)} judge requests scored lmms-eval's failure string as an answer"
    values = task_metrics(outcome["results"], "vcr_cot")
    assert values.get("model_failed") == len(failing), f"failed model requests are not reported: {values}"


# ---------------------------------------------------------------------- secrets


def test_no_api_key_in_anything_the_runs_wrote(written, qwen2_vl_run, openai_run, bench):
    assert written, "no run wrote anything"
    leaks = []
    paths = [bench["root"], *written]
    for base in paths:
        files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for file in files:
            data = file.read_bytes()
            for key in (MODEL_KEY, JUDGE_KEY):
                if key.encode() in data:
                    leaks.append(f"{file} contains {key[:14]}...")
    assert not leaks, leaks
