"""`lmms-vr score --batch`: the OpenAI Batch API through the real `openai` client, against a fake
Batch API on 127.0.0.1 (`tests/fake_batch_api.py`): expired, cancelled, failed and partially
failed batches, input files split at the request limit, and a run killed at each step (SIGKILL,
no cleanup) whose rerun re-attaches and submits nothing twice. Metrics are compared with the
synchronous run of the same task through the sample judge."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fake_batch_api import FakeBatchApi
from lmms_video_reasoning.judges.batch_pass import read_result_lines
from lmms_video_reasoning.utils.results.score import samples_path
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from lmms_video_reasoning.utils.tools.demo import sample_responder
from score_report_support import environment, sample_judge

TASK = "vcr_cot"  # two dependent steps (extraction -> scoring): at least two rounds
KEY = "sk-fake-batch-0123456789"


@pytest.fixture(scope="module")
def synchronous(sample_dir, sample_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sync")
    out = folder / "sync.json"
    with sample_judge(folder / "judge.sqlite", {**sample_env, "HF_HUB_OFFLINE": "1"}):
        assert cli_main(["score", str(sample_dir / "predictions.jsonl"), "--task", TASK, "--out", str(out)]) == 0
    return {"results": json.loads(out.read_text())["results"][TASK], "outcomes": outcomes_of(out)}


def outcomes_of(scored_file: Path, task: str = TASK) -> dict[str, dict]:
    """{sample_id: the judge's outcome} from the samples file `lmms-vr score --out` wrote beside the results."""
    lines = samples_path(scored_file, task).read_text().splitlines()
    return {row["sample_id"]: row["lmms_vr_outcome"] for row in map(json.loads, lines)}


def _env(api, sample_env, cache, **extra) -> dict:
    return {**sample_env, "HF_HUB_OFFLINE": "1", "LMMS_VR_JUDGE_BASE_URL": api.base_url, "LMMS_VR_JUDGE_API_KEY": KEY,
            "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(cache), "LMMS_VR_BATCH_POLL_SECONDS": "0.02",
            **extra}


def _assert_same(expected: dict, scored_file, output: str = "") -> None:
    """The batch run's metrics and per-sample outcomes are the synchronous run's; a difference names
    the samples that differ and their outcomes (and ends with the run's `output`)."""
    got = json.loads(scored_file.read_text())["results"][TASK]
    outcomes = outcomes_of(scored_file)
    differ = {sample: (outcome, outcomes.get(sample)) for sample, outcome in expected["outcomes"].items()
              if outcomes.get(sample) != outcome}
    why = "".join(f"\n  sample {sample}: synchronous {sync}, batch {batch}" for sample, (sync, batch) in differ.items())
    why += f"\n{output[-3000:]}" if output else ""
    for name, value in expected["results"].items():
        same = (math.isnan(value) and math.isnan(got[name])) if isinstance(value, float) and math.isnan(value) else got[name] == value
        assert same, f"{name}: synchronous {value!r}, batch {got[name]!r}{why}"
    assert not differ, f"per-sample outcomes differ:{why}"


def _never_twice(api: FakeBatchApi) -> None:
    """A request is in a second batch only when the earlier one gave it no answer."""
    answered = set()
    for batch_id, ids in zip(api.created, api.submitted_ids()):
        assert not answered & set(ids), f"batch {batch_id} resubmits answered requests"
        batch = api.batches[batch_id]
        if batch["output_file_id"]:
            answered |= {json.loads(line)["custom_id"] for line in api.files[batch["output_file_id"]]["content"].decode().splitlines()}
    for ids in api.submitted_ids():
        assert len(ids) == len(set(ids))


def test_batch_judging_with_expiry_partial_and_failed_batches(synchronous, sample_dir, sample_env, tmp_path, capsys, monkeypatch):
    from lmms_video_reasoning.judges import batch_api

    reads = []  # each downloaded file is parsed once, straight into the round's one read
    monkeypatch.setattr(batch_api, "read_result_lines", lambda lines, where, into: reads.append(where) or read_result_lines(lines, where, into))
    with FakeBatchApi(sample_responder, scenarios=["expire", "partial", "failed"], api_key=KEY) as api:
        out = tmp_path / "scored.json"
        with environment(_env(api, sample_env, tmp_path / "judge.sqlite", LMMS_VR_BATCH_MAX_REQUESTS="25")):
            assert cli_main(["score", str(sample_dir / "predictions.jsonl"), "--task", TASK, "--batch", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        files = [f"batch {b['id']} {kind} file" for b in api.batches.values() for kind in ("output", "error") if b[f"{kind}_file_id"]]
        assert sorted(reads) == sorted(files)
        statuses = Counter(batch["status"] for batch in api.batches.values())
        assert statuses["expired"] == 1 and statuses["failed"] == 1 and statuses["completed"] >= 3
        assert max(len(ids) for ids in api.submitted_ids()) <= 25, "input files split at the request limit"
        _never_twice(api)
        assert ("POST", "/v1/chat/completions") not in api.requests, "nothing judged synchronously"
    _assert_same(synchronous, out, printed)
    assert "expired, " in printed and "failed, 0 of" in printed and "injected validation failure" in printed
    assert "without a result (due again)" in printed and KEY not in printed
    results = json.loads(out.read_text())
    assert results["lmms_vr"]["judge_accounting"][TASK]["stats"]["calls"] == 0
    assert KEY not in out.read_text()


def _command(sample_dir, out) -> list[str]:
    return [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(sample_dir / "predictions.jsonl"),
            "--task", TASK, "--batch", "--out", str(out)]


def test_a_batch_cancelled_through_the_client(synchronous, sample_dir, sample_env, tmp_path):
    """Someone cancels the running batch (the real client's `batches.cancel`): its answered half is
    imported, the rest is submitted again."""
    from openai import OpenAI

    out = tmp_path / "scored.json"
    with FakeBatchApi(sample_responder, scenarios=["hold"], api_key=KEY) as api:
        run = subprocess.Popen(_command(sample_dir, out), env={**os.environ, **_env(api, sample_env, tmp_path / "judge.sqlite")},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 120
        while not api.created and time.time() < deadline and run.poll() is None:
            time.sleep(0.1)
        assert api.created, run.communicate()[0][-3000:]
        OpenAI(api_key=KEY, base_url=api.base_url).batches.cancel(api.created[0])
        output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output[-3000:]
    assert api.batches[api.created[0]]["status"] == "cancelled" and len(api.created) >= 2
    _never_twice(api)
    _assert_same(synchronous, out, output)
    assert "cancelled" in output


@pytest.mark.parametrize("step", ["recorded", "uploaded", "submitted", "polled", "downloaded", "imported"])
def test_killed_at_each_step_the_rerun_submits_nothing_twice(step, synchronous, sample_dir, sample_env, tmp_path):
    out = tmp_path / "scored.json"
    with FakeBatchApi(sample_responder, api_key=KEY) as api:
        env = {**os.environ, **_env(api, sample_env, tmp_path / "judge.sqlite")}
        kill_at = [sys.executable, str(Path(__file__).resolve().parent / "batch_kill_at.py"), step, *_command(sample_dir, out)[3:]]
        killed = subprocess.run(kill_at, env=env, capture_output=True, text=True, timeout=300)
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
        created_before = len(api.created)
        rerun = subprocess.run(_command(sample_dir, out), env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        _never_twice(api)
        # Two rounds (extraction, recall and precision; then the scoring calls): one batch each.
        assert len(api.created) == 2, (step, created_before, len(api.created))
        if step == "recorded":
            assert created_before == 0 and "re-attached to an earlier run's batches: dropped 1" in rerun.stdout
        if step == "uploaded":
            assert created_before == 0 and "created 1" in rerun.stdout
    _assert_same(synchronous, out, killed.stdout + killed.stderr + rerun.stdout + rerun.stderr)


def test_killed_while_the_api_creates_the_batch(synchronous, sample_dir, sample_env, tmp_path):
    """SIGKILL from outside after the API created the batch, before its id reached the client: the
    rerun finds the batch by its metadata instead of creating another."""
    out = tmp_path / "scored.json"
    with FakeBatchApi(sample_responder, api_key=KEY) as api:
        env = {**os.environ, **_env(api, sample_env, tmp_path / "judge.sqlite")}
        api.pause("create")
        run = subprocess.Popen(_command(sample_dir, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert api.arrived["create"].wait(120), "the command never created its batch"
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
        api.release("create")
        assert len(api.created) == 1
        rerun = subprocess.run(_command(sample_dir, out), env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        assert "found 1" in rerun.stdout
        assert len(api.created) == 2  # the found first batch, then the scoring calls' batch
        _never_twice(api)
    _assert_same(synchronous, out, rerun.stdout + rerun.stderr)


def test_benchmarks_sharing_a_judge_wait_for_each_batch_once(sample_dir, sample_env, tmp_path, capsys):
    predictions = tmp_path / "predictions.jsonl"
    rows = [line for line in (sample_dir / "predictions.jsonl").read_text().splitlines()
            if json.loads(line)["task"] in ("vcr_cot", "vr_bench")]
    predictions.write_text("\n".join(rows) + "\n")
    with FakeBatchApi(sample_responder, api_key=KEY) as api:
        with environment(_env(api, sample_env, tmp_path / "judge.sqlite")):
            assert cli_main(["score", str(predictions), "--batch", "--out", str(tmp_path / "scored.json")]) == 0
        printed = capsys.readouterr().out
        created = list(api.created)
    assert len(created) >= 3, "two benchmarks' first round and a later step"
    listed = [line.split(":")[0].strip() for line in printed.splitlines() if line.startswith("  batch_")]
    assert sorted(listed) == sorted(created), printed
    assert f"{len(created)} batches" in printed
