"""Run lmms-eval's own CLI in a subprocess, as users do, and read its results file.

`--verbosity DEBUG` makes the CLI exit non-zero after an exception (it exits 0
otherwise), so a failure inside a task fails the test. The command, the results file and
the failure's cause are those of utils/lmms/cli_run.py (the demo's and doctor's); the whole
log is kept for the tests that read it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import time
from pathlib import Path

from lmms_video_reasoning.utils.lmms.cli_run import Evaluation, failure_cause, newest_results


def lmms_eval_process(tasks: str, output_path: Path, *, model: str = "vr_replay", model_args: str = "",
                      env: dict | None = None, extra: list[str] | None = None, timeout: int = 600,
                      log_samples: bool = True, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run `python -m lmms_eval --verbosity DEBUG` (from `cwd`); (the finished process, its wall seconds)."""
    evaluation = Evaluation(tasks, output_path, model=model, model_args=model_args,
                            extra=("--verbosity", "DEBUG", *(["--log_samples"] if log_samples else []), *(extra or [])))
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(evaluation.command(), env=full_env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return proc, time.monotonic() - started


def run_lmms_eval(tasks: str, output_path: Path, *, model: str = "vr_replay", model_args: str = "",
                  env: dict | None = None, extra: list[str] | None = None, timeout: int = 600,
                  log_samples: bool = True, cwd: Path | None = None) -> dict:
    """Run `python -m lmms_eval` and return the parsed results JSON."""
    proc, _seconds = lmms_eval_process(tasks, output_path, model=model, model_args=model_args, env=env, extra=extra,
                                       timeout=timeout, log_samples=log_samples, cwd=cwd)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or "Traceback (most recent call last)" in log:
        raise AssertionError(f"lmms-eval failed (exit {proc.returncode}): {failure_cause(proc.stderr)}\n{log[-6000:]}")
    found = newest_results(output_path)
    if found is None:
        raise AssertionError(f"lmms-eval wrote no results file under {output_path}:\n{log[-4000:]}")
    results = json.loads(found.read_text())
    results["_log"] = log
    return results


def samples_files(output_path: Path, task: str) -> list[Path]:
    """The `--log_samples` files lmms-eval wrote for a task."""
    return [Path(p) for p in glob.glob(str(Path(output_path) / "**" / f"*_samples_{task}.jsonl"), recursive=True)]


def metric(results: dict, task: str, name: str):
    """A metric value from lmms-eval's results JSON (`"name,none"` keys)."""
    return results["results"][task][f"{name},none"]
