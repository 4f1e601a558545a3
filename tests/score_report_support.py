"""Shared by tests/test_score*.py and tests/test_report*.py: the sample judge and its environment.

The judge is a real OpenAI-compatible server on 127.0.0.1 (`LocalJudgeServer`) answering
with each benchmark's own sample oracle, so metrics are predictable and every judge call
goes over HTTP and through the SQLite cache exactly as in a real run.
"""

from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from pathlib import Path

BENCHMARKS = ("cg_bench", "vcr_bench", "vrbench")  # vrbench last: its responder answers any prompt


def sample_judge_reply(body: dict) -> str:
    """Route a judge request to the benchmark whose sample oracle recognises it."""
    for name in BENCHMARKS:
        module = importlib.import_module(f"lmms_video_reasoning.{name}.sample")
        if hasattr(module, "oracle_judge_reply"):
            reply = module.oracle_judge_reply(body)
            if reply is not None:
                return reply
        elif hasattr(module, "judge_responder"):
            try:
                return module.judge_responder(body)
            except (ValueError, KeyError, IndexError):
                continue
    raise AssertionError("no sample oracle recognises this judge request")


def judge_env(server, cache: Path) -> dict[str, str]:
    return {"LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(cache)}


@contextmanager
def environment(values: dict[str, str]):
    """Set environment variables for the block (the judge and data roots are read from it)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def sample_judge(cache: Path, extra_env: dict[str, str] | None = None):
    """A running sample judge with the environment pointing the suite at it."""
    from lmms_video_reasoning.judges import LocalJudgeServer

    with LocalJudgeServer(responder=sample_judge_reply) as server:
        with environment({**judge_env(server, cache), **(extra_env or {})}):
            yield server
