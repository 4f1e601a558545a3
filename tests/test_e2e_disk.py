"""A full or read-only disk, end to end (real lmms-eval processes, real tmpfs mounts).

- The output folder fills while lmms-eval writes its samples (a 448 KiB tmpfs: room for the
  preflight's estimate and this suite's records, not for lmms-eval's samples files): the samples
  are truncated, so the records (this suite's copy of the generations) stay on disk with a
  warning naming the task, the samples file and why, and `lmms-vr score` on the folder gives
  every task the metrics of a run on a normal disk.
- The preflight refuses, before generation, an output tmpfs too small for the run's documents
  and a judge cache on a read-only file system.

Each tmpfs is unmounted in a `finally`; without the right to mount, the tests are skipped.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmms_cli import lmms_eval_process
from model_server import LocalJudgeServer, SampleJudge
from test_e2e import same_metrics, task_metrics
from test_e2e_faults import JUDGE_KEY, JUDGED_TASKS, clean, judge_env  # noqa: F401 - `clean` is a fixture

pytestmark = pytest.mark.slow

GENERATED = "Running generate_until requests"  # lmms-eval's log line when generation starts


@contextlib.contextmanager
def tmpfs(folder: Path, size: str):
    """A tmpfs of `size` mounted at `folder`, unmounted whatever happens."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def replay_process(sample_dir: Path, output: Path, env: dict, tasks=JUDGED_TASKS):
    return lmms_eval_process(",".join(tasks), output, model="vr_replay",
                             model_args=f"predictions={sample_dir / 'predictions.jsonl'}", env=env)


def files_under(folder: Path, pattern: str) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(folder / "**" / pattern), recursive=True))


def test_full_output_disk_keeps_the_records_and_score_recovers_every_task(tmp_path, sample_dir, sample_env, clean):
    """About 1.5 min on 2 busy cores (one lmms-eval run, one `lmms-vr score`), plus the clean run."""
    started = time.monotonic()
    with tmpfs(tmp_path / "out", "448k") as output, LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY) as server:
        env = judge_env(sample_env, server, tmp_path / "cache.sqlite")
        proc, seconds = replay_process(sample_dir, output, env)
        log = proc.stdout + proc.stderr
        assert GENERATED in log, f"the preflight refused a 448 KiB folder, the test needs it to pass:\n{log[-3000:]}"
        records = {path.name.split("_records_")[1][:-len(".jsonl")]: path for path in files_under(output, "*_records_*.jsonl")}
        samples = {path.name.split("_samples_")[1][:-len(".jsonl")]: path for path in files_under(output, "*_samples_*.jsonl")}
        sizes = {task: path.stat().st_size for task, path in samples.items()}
        whole = {task: clean["results"]["n-samples"][task]["original"] for task in JUDGED_TASKS}
        truncated = [task for task in JUDGED_TASKS
                     if task not in samples or len(samples[task].read_bytes().splitlines()) < whole[task]
                     or not samples[task].read_bytes().endswith(b"\n")]
        assert truncated, f"the 448 KiB disk held every samples file ({sizes}): the test no longer fills the disk"
        for task in truncated:
            assert task in records, f"{task}: samples truncated ({sizes.get(task)} bytes) and its records were removed:\n{log[-3000:]}"
            assert len(records[task].read_text().splitlines()) == whole[task], f"{task}: the records file is not whole"
            assert f"task {task}: " in log and "the records" in log and "are kept" in log, log[-3000:]
        for task in set(JUDGED_TASKS) - set(truncated):  # a whole samples file: the records were only a copy
            assert task not in records, f"{task}: samples whole ({sizes[task]} bytes) but the records were kept"
        scored = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(output),
                                 "--out", str(tmp_path / "scored.json")], env={**os.environ, **env},
                                capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stdout[-3000:] + scored.stderr[-3000:]
    results = json.loads((tmp_path / "scored.json").read_text())
    for task in JUDGED_TASKS:
        expected, got = task_metrics(clean["results"], task), task_metrics(results, task)
        assert got.keys() == expected.keys() and same_metrics(expected, got), f"{task}: normal disk {expected} != recovered {got}"
    elapsed = time.monotonic() - started
    print(f"full disk: samples {sizes} bytes, truncated {truncated}, records kept, recovered by score; "
          f"lmms-eval {seconds:.0f} s, whole test {elapsed:.0f} s")
    assert elapsed < 600, f"took {elapsed:.0f} s"


def check_refused(proc, seconds: float, output: Path, *needles: str) -> None:
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"the run went on:\n{log[-3000:]}"
    assert "cannot start" in log and all(needle in log for needle in needles), log[-3000:]
    assert GENERATED not in log, "the model generated before the refusal"
    assert not files_under(output, "*_samples_*") and not files_under(output, "*_records_*"), "files written"
    assert "Traceback" not in log, log[-3000:]
    assert seconds < 180, f"refused after {seconds:.0f} s (the preflight comes before generation)"


def test_preflight_refuses_an_output_disk_too_small_for_the_run(tmp_path, sample_dir, sample_env):
    """A 256 KiB tmpfs, for 83 documents (at least 332 KiB): refused at task load, under 3 min."""
    with tmpfs(tmp_path / "out", "256k") as output, LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY) as server:
        proc, seconds = replay_process(sample_dir, output, judge_env(sample_env, server, tmp_path / "cache.sqlite"))
        check_refused(proc, seconds, output, f"the output folder {output} has", "free, less than the", "KiB a run of 83 documents")
    print(f"too small output disk refused after {seconds:.0f} s")


def test_preflight_refuses_a_read_only_judge_cache(tmp_path, sample_dir, sample_env):
    """A judge cache on a tmpfs remounted read-only (root ignores chmod): refused at task load, under 3 min."""
    with tmpfs(tmp_path / "cache", "1m") as folder, LocalJudgeServer(SampleJudge(), api_key=JUDGE_KEY) as server:
        cache = folder / "cache.sqlite"
        cache.write_bytes(b"")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        output = tmp_path / "out"
        proc, seconds = replay_process(sample_dir, output, judge_env(sample_env, server, cache), tasks=("vcr_cot",))
        check_refused(proc, seconds, output, "judge cache", str(folder), "LMMS_VR_JUDGE_CACHE")
        assert not server.requests, "the judge was asked"
    print(f"read-only judge cache refused after {seconds:.0f} s")


def test_records_that_do_not_fit_are_reported_with_the_file_and_the_free_space(tmp_path, caplog):
    """`save_records` on a full 64 KiB tmpfs (ENOSPC): None, an error naming the file and the free
    space, no partial file left; then records that fit are written whole. Under a second."""
    from lmms_video_reasoning.utils.results import aggregation

    started = time.monotonic()
    with tmpfs(tmp_path / "out", "64k") as output:
        run = aggregation.RunFiles(output, "20990101_000000")
        big = [{"sample_id": f"s{i}", "response": "x" * 4096} for i in range(40)]  # 160 KiB
        with caplog.at_level("ERROR", logger="lmms_video_reasoning.aggregation"):
            assert aggregation.save_records(big, run) is None
        message = caplog.text
        assert "20990101_000000_records_" in message and "free in" in message and str(output) in message, message
        assert "No space left" in message, message
        assert sorted(p.name for p in output.iterdir()) == [], "a partial records file was left on the full disk"
        small = [{"sample_id": "s1", "response": "ok"}]
        path = aggregation.save_records(small, run)
        assert path is not None and json.loads(path.read_text())["record"] == small[0]
        aggregation._runs.pop(run, None)  # not this process's run: nothing to drop at exit
    assert time.monotonic() - started < 5
