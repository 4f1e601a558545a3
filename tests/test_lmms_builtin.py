"""As a plugin, the suite behaves like built-in tasks in every lmms-eval entry point.

Each entry point runs through lmms-eval's real CLI (`lmms_eval.cli.dispatch.main`, the
`lmms-eval` console script) in a subprocess. When `lmms_video_reasoning.pth` is installed
in site-packages, the console script runs as is; otherwise (a worktree run against a venv
holding an older install) the repository's .pth is processed by `site.addsitedir` first,
which is what the interpreter does with site-packages at start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from lmms_video_reasoning.utils.lmms import plugin as lmms_plugin

REPO = Path(__file__).resolve().parents[1]
PTH = "lmms_video_reasoning.pth"


def our_tasks() -> dict[str, Path]:
    """{task or group name: its YAML} of this suite."""
    found = {}
    for path in sorted(path for folder in lmms_plugin.task_dirs() for path in folder.rglob("*.yaml")):
        config = yaml.load(path.read_text(), Loader=yaml.BaseLoader) or {}
        if isinstance(config, dict):
            for key in ("task", "group"):
                if isinstance(config.get(key), str):
                    found[config[key]] = path
    return found


def cli(args: list[str], *, env: dict | None = None, extra_site: Path | None = None, stdin: str | None = None,
        timeout: int = 300, background: bool = False):
    """`lmms-eval ARGS` with our .pth processed as at interpreter start."""
    code = site_prelude(extra_site) + textwrap.dedent(f"""
        sys.argv = ["lmms-eval", *{args!r}]
        from lmms_eval.cli.dispatch import main
        sys.exit(main())
    """)
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    cmd = [sys.executable, "-c", code]
    if background:
        return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, env=full_env, input=stdin, capture_output=True, text=True, timeout=timeout)


def site_prelude(extra_site: Path | None = None) -> str:
    """Code processing our .pth (when not installed) and `extra_site`, put first on sys.path
    so that its distributions come before the installed ones."""
    site_dirs = [] if (Path(sysconfig.get_paths()["purelib"]) / PTH).is_file() else [str(_repo_site())]
    front = str(extra_site) if extra_site else None
    return textwrap.dedent(f"""
        import site, sys
        for d in {site_dirs!r}:
            site.addsitedir(d)
        if {front!r}:
            site.addsitedir({front!r})
            sys.path.remove({front!r})
            sys.path.insert(0, {front!r})
    """)


def _repo_site() -> Path:
    site = Path(os.environ.get("PYTEST_TMP_SITE", "/tmp")) / f"lmms_vr_site_{os.getpid()}"
    site.mkdir(exist_ok=True)
    (site / PTH).write_text((REPO / PTH).read_text())
    return site


def listed(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if line.startswith("  ")}


@pytest.mark.slow
def test_tasks_subcommand_lists_our_tasks():
    proc = cli(["tasks", "list", "--verbosity", "DEBUG"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    missing = set(our_tasks()) - listed(proc.stdout)
    assert not missing, f"`lmms-eval tasks list` does not show {sorted(missing)}"
    assert "vcr_wiki_en_easy" in listed(proc.stdout)  # the built-ins are all still there


@pytest.mark.slow
def test_power_subcommand_loads_our_task(sample_env):
    proc = cli(["power", "--tasks", "vcr_cot,vr_bench_mcq", "--verbosity", "DEBUG"], env=sample_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Unresolved task names" not in proc.stdout, proc.stdout[-2000:]
    assert "Failed to load task" not in proc.stdout, proc.stdout[-3000:]
    assert "  vcr_cot:" in proc.stdout and "  vr_bench_mcq:" in proc.stdout


@pytest.mark.slow
def test_wizard_offers_our_tasks():
    # model, model_args, then `search` in the task step; EOF ends the wizard
    proc = cli(["eval"], stdin="dummy\n\nsearch vr_bench\n")
    out = proc.stdout
    assert "Step 2/4" in out, out[-3000:] + proc.stderr[-2000:]
    assert "vr_bench_mcq" in out and "vr_bench_text" in out, out[-3000:]


@pytest.mark.slow
def test_serve_lists_our_tasks():
    pytest.importorskip("fastapi")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = cli(["serve", "--host", "127.0.0.1", "--port", str(port)], background=True)
    try:
        deadline, body = time.time() + 240, None
        while time.time() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/tasks", timeout=120) as response:
                    body = json.loads(response.read())
                break
            except OSError:
                time.sleep(1)
        assert body is not None, (server.stdout.read() if server.poll() is not None else "server did not answer")
        assert not body.get("error"), body.get("error")
        missing = set(our_tasks()) - set(body["tasks"])
        assert not missing, f"`lmms-eval serve` GET /tasks does not show {sorted(missing)}"
    finally:
        server.terminate()
        server.wait(timeout=30)


BROKEN_PLUGIN = '''
def register():
    raise RuntimeError("a third-party plugin that fails to load")
'''


def broken_plugin_site(tmp_path: Path) -> Path:
    """A site dir with an installed (dist-info) plugin whose `lmms_eval.models` entry point raises."""
    site = tmp_path / "site"
    dist = site / "zz_broken_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "zz_broken_plugin.py").write_text(BROKEN_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[lmms_eval.models]\naaa_broken = zz_broken_plugin:register\n")
    return site


@pytest.mark.slow
def test_a_failing_third_party_plugin_does_not_stop_ours(tmp_path):
    site = broken_plugin_site(tmp_path)
    # the broken entry point comes before ours, so lmms-eval's loading loop stops at it
    order = subprocess.run([sys.executable, "-c", site_prelude(site) + textwrap.dedent("""
        from importlib.metadata import entry_points
        print(" ".join(e.name for e in entry_points(group="lmms_eval.models")))
    """)], capture_output=True, text=True)
    names = order.stdout.split()
    assert names.index("aaa_broken") < names.index("lmms_video_reasoning"), names
    # the evaluation entry point (which imports lmms_eval.models, so the failure happens)
    evaluation = cli(["--tasks", "list", "--verbosity", "DEBUG"], extra_site=site)
    log = evaluation.stdout + evaluation.stderr
    assert "a third-party plugin that fails to load" in log, log[-3000:]
    assert "vr_bench_mcq" in log and "cg_bench_long" in log
    # and our replay model is still registered
    model = subprocess.run([sys.executable, "-c", site_prelude(site) + textwrap.dedent("""
        from lmms_eval.models import get_model
        print(get_model("vr_replay").__name__)
    """)], capture_output=True, text=True, timeout=300)
    assert "a third-party plugin that fails to load" in model.stdout + model.stderr, model.stderr[-2000:]
    assert model.returncode == 0 and model.stdout.strip().endswith("ReplayModel"), model.stdout[-2000:] + model.stderr[-2000:]


@pytest.mark.slow
def test_results_have_bootstrap_stderrs_and_judge_usage(tmp_path, monkeypatch):
    """vr_bench through lmms-eval with the replay model and the local judge: the headline
    metrics get the report's bootstrap standard error (resampling videos), and the judge's
    calls and tokens appear in lmms-eval's usage report as judge usage, with the cost."""
    import glob

    import numpy as np

    from lmms_video_reasoning.judges import LocalJudgeServer
    from lmms_video_reasoning.utils.results import report_bootstrap
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample
    from lmms_video_reasoning.vrbench import sample

    data = tmp_path / "sample"
    write_sample(data, ("vrbench",))
    with LocalJudgeServer(sample.oracle_judge_reply, model="test-judge") as server:
        env = {**env_for(data, ("vrbench",)), "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_MODEL": "test-judge",
               "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite"),
               "LMMS_VR_JUDGE_PRICES": json.dumps({"test-judge": {"input": 1.0, "output": 2.0}})}
        out = tmp_path / "results"
        proc = cli(["--tasks", "vr_bench", "--model", "vr_replay", "--model_args", f"predictions={data / 'predictions.jsonl'}",
                    "--output_path", str(out), "--log_samples", "--verbosity", "DEBUG"], env=env, timeout=600)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
        calls = server.request_count
        results = json.loads(Path(glob.glob(str(out / "**" / "*_results.json"), recursive=True)[0]).read_text())
        metrics = results["results"]["vr_bench"]
        for name in ("overall", "mcq_accuracy", "process_score"):
            assert isinstance(metrics[f"{name}_stderr,none"], float) and metrics[f"{name}_stderr,none"] > 0, (name, metrics)
        assert metrics["type_counting_stderr,none"] == "N/A"  # not a headline metric
        assert "Stderr N/A" not in proc.stdout

        # the same bootstrap as `lmms-vr report` (its seed and resamples, videos as units)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        [samples] = glob.glob(str(out / "**" / "*_samples_vr_bench.jsonl"), recursive=True)
        sampled, why = report_bootstrap.load_sampled("vr_bench", Path(samples))
        assert sampled is not None, why
        assert server.request_count == calls  # outcomes came from the judge cache
        values = report_bootstrap.bootstrap_values(sampled, 1000, 0)
        for name in ("overall", "mcq_accuracy", "process_score"):
            assert metrics[f"{name}_stderr,none"] == pytest.approx(float(np.std(values[name], ddof=1)), rel=1e-9)
        units = sampled.units()
        assert len(units) < len(sampled.records)  # several questions per video: a clustered bootstrap

    usage = results["usage"]
    judge = usage["by_source"]["judge"]
    assert judge["n_api_calls"] == calls > 0
    assert judge["input_tokens"] > 0 and judge["output_tokens"] > 0
    expected_cost = (judge["input_tokens"] * 1.0 + judge["output_tokens"] * 2.0) / 1e6
    assert judge["cost_usd"] == pytest.approx(expected_cost, abs=1e-6)
    assert usage["by_task"]["vr_bench"]["n_api_calls"] == calls  # attributed to the task, not "_unknown"


def test_pth_hooks_lmms_eval_on_import_and_can_be_switched_off():
    """The .pth only installs a finder; lmms-eval's modules get our hooks when imported."""
    code = site_prelude() + textwrap.dedent("""
        import lmms_eval.api.metrics as metrics
        import lmms_eval.evaluator_utils as evaluator_utils
        import lmms_eval.models.model_utils.usage_metrics as usage
        from lmms_eval.tasks import TaskManager
        marker = "_lmms_video_reasoning_wrapped"
        print(sorted(name for name, obj in [("tasks", TaskManager.initialize_tasks), ("stderr", metrics.stderr_for_metric),
              ("stderr_bound", evaluator_utils.stderr_for_metric), ("usage", usage.summarize_usage_metrics),
              ("context", evaluator_utils.TaskOutput.calculate_aggregate_metric)] if getattr(obj, marker, False)))
    """)
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert on.returncode == 0, on.stderr[-3000:]
    assert on.stdout.strip().splitlines()[-1] == str(sorted(["tasks", "stderr", "stderr_bound", "usage", "context"]))
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "LMMS_VR_NO_AUTOLOAD": "1"})
    # off: none of the .pth's hooks. Importing lmms_eval.models (here through usage_metrics) still runs
    # our `lmms_eval.models` entry point, which installs the same touchpoints (an editable install's
    # only path): all or nothing, never a part.
    assert off.returncode == 0, off.stderr[-2000:]
    assert off.stdout.strip().splitlines()[-1] in ("[]", str(sorted(["tasks", "stderr", "stderr_bound", "usage", "context"])))
