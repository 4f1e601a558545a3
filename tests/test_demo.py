"""The README's first command: `lmms-vr demo` (sample benchmark + replay predictions through
`python -m lmms_eval`, no --include_path: the tasks resolve through the plugin hook)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_the_user_tasks_with_no_flag(tmp_path):
    out, results_dir = tmp_path / "sample", tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "demo", "--out", str(out),
         "--output_path", str(results_dir), "--tasks", "vcr_cot,cg_bench_long"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (results_file,) = results_dir.rglob("*_results.json")
    results = json.loads(results_file.read_text())["results"]
    assert results["vcr_cot"]["accuracy,none"] > 0 and results["vcr_cot"]["cot_f1,none"] > 0
    assert results["cg_bench_long"]["long_acc,none"] > 0
    assert "--include_path" not in proc.stdout
    # the demo ends with the report its run makes possible, CIs included (verdicts read from the judge cache)
    report_md = results_dir / "report" / "report.md"
    assert proc.stdout.count(str(report_md)) == 1, proc.stdout  # the report's path, printed once
    data = json.loads((results_dir / "report" / "report.json").read_text())
    assert data["tasks"]["vr_replay|vcr_cot"]["ci"]["accuracy"] and data["tasks"]["vr_replay|vcr_cot"]["ci"]["cot_f1"]
    assert data["sections"]["cg_bench"]["joined_ci"]["vr_replay|mini"]["long_acc"]
    # the sample and its predictions were written where asked, in the official layouts
    assert (out / "vcr_bench" / "v1" / "videos" / "meta_info_video.json").is_file()
    assert (out / "cg_bench" / "cgbench_mini.json").is_file()
    assert (out / "predictions.jsonl").is_file()
    # the printed command, pasted into a shell with none of the demo's variables set, runs: it carries
    # the sample roots, the offline switches and the judge (its verdicts come from the demo's cache)
    (line,) = [line[2:] for line in proc.stdout.splitlines() if line.startswith("$ ")]
    assert "VCR_BENCH_ROOT=" in line and "CGBENCH_ROOT=" in line and "HF_HUB_OFFLINE=1" in line
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_ROOT") and not k.startswith(("LMMS_VR_JUDGE", "HF_"))}
    pasted = subprocess.run(["bash", "-c", line + " --limit 2"], capture_output=True, text=True, timeout=900, env=clean)
    assert pasted.returncode == 0, pasted.stdout[-3000:] + pasted.stderr[-3000:]
    newest = max(results_dir.rglob("*_results.json"), key=lambda p: p.stat().st_mtime)
    assert newest != results_file and json.loads(newest.read_text())["results"]["vcr_cot"]["accuracy,none"] > 0


def _scored(results_dir, env, out) -> tuple[dict, str]:
    """`lmms-vr score` on a demo's output folder in a shell with `env`: (metrics by task, stdout)."""
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(results_dir), "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())["results"], proc.stdout


@pytest.mark.slow
def test_score_on_the_demo_output_reads_the_runs_judge_cache(tmp_path):
    """`lmms-vr score` finds the judge `lmms-vr report` finds: the one the run recorded (its judge
    accounting), its verdicts read from the run's judge cache, with no judge variable set. CG-Bench's
    step 2 needs the clue frames: without CGBENCH_ROOT the score names it, with it the run's value."""
    out, results_dir = tmp_path / "sample", tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "demo", "--out", str(out),
         "--output_path", str(results_dir), "--tasks", "vcr_cot,vr_bench,cg_bench_open"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (results_file,) = results_dir.rglob("*_results.json")
    run = json.loads(results_file.read_text())["results"]
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_ROOT") and not k.startswith(("LMMS_VR_JUDGE", "OPENAI", "DEEPSEEK"))}
    clean["HF_HUB_OFFLINE"] = "1"
    scored, stdout = _scored(results_dir, clean, tmp_path / "bare.json")
    for task, metrics in (("vcr_cot", ("accuracy", "cot_f1", "judge_failed")), ("vr_bench", ("process_score", "overall", "judge_failed"))):
        for metric in metrics:
            value = scored[task][f"{metric},none"]
            assert value == pytest.approx(run[task][f"{metric},none"]), (task, metric, value)
    assert "verdicts read from the judge cache" in stdout and str(out / "demo_judge_cache.sqlite") in stdout
    # step 2 of the questions judged "needs a visual check" cannot be rebuilt without the frames: said, not n/a silently
    assert "media not found: CGBENCH_ROOT is not set" in stdout
    with_root, _ = _scored(results_dir, {**clean, "CGBENCH_ROOT": str(out / "cg_bench")}, tmp_path / "root.json")
    assert with_root["cg_bench_open"]["oe_acc,none"] == pytest.approx(run["cg_bench_open"]["oe_acc,none"])
    assert with_root["cg_bench_open"]["judge_failed,none"] == 0


@pytest.mark.slow
def test_demo_fails_with_the_cause_when_lmms_eval_cannot_evaluate(tmp_path, without_filelock_api):
    """lmms-eval exits 0 after an exception: the demo exits 1 and its last line is the traceback's."""
    proc = subprocess.run(
        [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "demo", "--out", str(tmp_path / "sample"),
         "--output_path", str(tmp_path / "results"), "--tasks", "cg_bench_mcq"],
        capture_output=True, text=True, timeout=900, env=without_filelock_api)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "lmms-vr demo: lmms-eval failed: ModuleNotFoundError: No module named 'filelock._api'"), proc.stderr[-3000:]
    assert "exit 0" not in proc.stdout + proc.stderr
