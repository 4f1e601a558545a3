"""Shared by tests/test_score*.py and tests/test_report*.py: the sample judge and its environment.

The judge is a real OpenAI-compatible server on 127.0.0.1 (`LocalJudgeServer`) answering
with each benchmark's own sample oracle (`utils.demo.sample_responder` routes them), so
metrics are predictable and every judge call goes over HTTP and through the SQLite cache
exactly as in a real run.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


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
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    with LocalJudgeServer(responder=sample_responder, model="sample-oracle") as server:
        with environment({**judge_env(server, cache), **(extra_env or {})}):
            yield server


def score_predictions(predictions: Path, tasks, out: Path) -> dict:
    """`lmms-vr score predictions.jsonl --task T --out out` for several tasks, in-process."""
    from lmms_video_reasoning.utils.results import samples_io, score

    scores = [score.score_task(task, gathered.records, str(predictions)) for task in tasks
              for gathered in samples_io.gather_records(predictions, task)[0]]
    return score.write_results(out, scores, str(predictions))
