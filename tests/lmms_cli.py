"""Run lmms-eval's own CLI in a subprocess, as users do, and read its results file.

`--verbosity DEBUG` makes the CLI exit non-zero after an exception (it exits 0
otherwise), so a failure inside a task fails the test.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def lmms_eval_process(tasks: str, output_path: Path, *, model: str = "vr_replay", model_args: str = "",
                      env: dict | None = None, extra: list[str] | None = None, timeout: int = 600,
                      log_samples: bool = True, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run `python -m lmms_eval --verbosity DEBUG` (from `cwd`); (the finished process, its wall seconds)."""
    cmd = [sys.executable, "-m", "lmms_eval", "--tasks", tasks, "--model", model, "--verbosity", "DEBUG",
           "--output_path", str(output_path)]
    if model_args:
        cmd += ["--model_args", model_args]
    if log_samples:
        cmd.append("--log_samples")
    cmd += extra or []
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return proc, time.monotonic() - started


def run_lmms_eval(tasks: str, output_path: Path, *, model: str = "vr_replay", model_args: str = "",
                  env: dict | None = None, extra: list[str] | None = None, timeout: int = 600,
                  log_samples: bool = True, cwd: Path | None = None) -> dict:
    """Run `python -m lmms_eval` and return the parsed results JSON."""
    proc, _seconds = lmms_eval_process(tasks, output_path, model=model, model_args=model_args, env=env, extra=extra,
                                       timeout=timeout, log_samples=log_samples, cwd=cwd)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or "Traceback (most recent call last)" in log:
        raise AssertionError(f"lmms-eval failed (exit {proc.returncode}):\n{log[-6000:]}")
    found = sorted(glob.glob(str(Path(output_path) / "**" / "*_results.json"), recursive=True), key=os.path.getmtime)
    if not found:
        raise AssertionError(f"lmms-eval wrote no results file under {output_path}:\n{log[-4000:]}")
    results = json.loads(Path(found[-1]).read_text())
    results["_log"] = log
    return results


def samples_files(output_path: Path, task: str) -> list[Path]:
    """The `--log_samples` files lmms-eval wrote for a task."""
    return [Path(p) for p in glob.glob(str(Path(output_path) / "**" / f"*_samples_{task}.jsonl"), recursive=True)]


def metric(results: dict, task: str, name: str):
    """A metric value from lmms-eval's results JSON (`"name,none"` keys)."""
    return results["results"][task][f"{name},none"]
