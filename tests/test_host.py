"""The seam with lmms-eval (utils/lmms/host.py), run against the installed lmms-eval itself.

Each touchpoint switches itself off with one WARNING when the host is not what it assumes,
and never breaks lmms-eval; a wrapper passes on arguments it does not know. `lmms-vr doctor`
reports what is on in this environment, and an editable install gets the start-up hook too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from lmms_video_reasoning.utils.lmms import host, plugin

REPO = Path(__file__).resolve().parents[1]
SUBPROCESS_TIMEOUT = 300


@pytest.fixture
def fresh(monkeypatch):
    """Touchpoint states as if never installed; restored afterwards. (lmms-eval's modules are
    imported first: their import runs the start-up hooks, which would install them again.)"""
    import lmms_eval.api.metrics  # noqa: F401
    import lmms_eval.evaluator_utils  # noqa: F401
    import lmms_eval.models.model_utils.usage_metrics  # noqa: F401
    import lmms_eval.tasks  # noqa: F401

    saved = {name: point.state for name, point in host.TOUCHPOINTS.items()}
    for point in host.TOUCHPOINTS.values():
        point.state = "not installed"
    yield
    for name, state in saved.items():
        host.TOUCHPOINTS[name].state = state


def _unwrapped(function):
    while getattr(function, host.WRAPPED, False):
        function = function.__wrapped__
    return function


def test_every_touchpoint_says_what_is_lost_and_the_workaround():
    assert len(host.TOUCHPOINTS) >= 10
    for point in host.TOUCHPOINTS.values():
        assert point.gives and point.assumes and point.lost and point.workaround, point.name


def test_an_unverified_lmms_eval_gets_one_warning_and_an_unchanged_host():
    code = textwrap.dedent("""
        import importlib.metadata as md, json, sys
        real = md.version
        md.version = lambda name: "0.7.99" if name == "lmms-eval" else real(name)
        from lmms_eval.tasks import TaskManager
        marker = "_lmms_video_reasoning_wrapped"
        manager = TaskManager()
        print(json.dumps({"wrapped": getattr(TaskManager.initialize_tasks, marker, False),
                          "ours": "vcr_cot" in manager.all_tasks, "indexed": len(manager.all_tasks)}))
    """)
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
                         env={k: v for k, v in os.environ.items() if k != "LMMS_VR_HOST_UNVERIFIED"})
    assert off.returncode == 0, off.stderr[-3000:]
    result = json.loads(off.stdout.strip().splitlines()[-1])
    assert result == {"wrapped": False, "ours": False, "indexed": result["indexed"]} and result["indexed"] > 100
    warning = [line for line in off.stderr.splitlines() if "task-path is off" in line]
    assert len(warning) == 1 and "0.7.99" in warning[0] and "--include_path" in warning[0], off.stderr[-3000:]

    tried = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
                           env={**os.environ, "LMMS_VR_HOST_UNVERIFIED": "1"})
    assert json.loads(tried.stdout.strip().splitlines()[-1])["ours"] is True, tried.stderr[-3000:]


def test_the_installed_filelock_has_what_lmms_evals_evaluator_imports(tmp_path):
    """lmms-eval 0.7.3's `simple_evaluate` first patches filelock through its private
    `filelock._api` (gone in filelock 4.3): run lmms-eval's own function on the installed
    filelock, then check what it promises (one lock object per path across filelock's and
    datasets' FileLock classes). pyproject.toml bounds filelock for this."""
    code = textwrap.dedent("""
        import sys
        from datasets.utils._filelock import FileLock as DatasetsFileLock
        from filelock import FileLock
        from lmms_eval.evaluator import _enable_reentrant_filelocks
        _enable_reentrant_filelocks()
        path = sys.argv[1]
        assert FileLock(path) is DatasetsFileLock(path), "two lock objects for one path"
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.lock")], capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_failed_assumption_turns_one_touchpoint_off(fresh, monkeypatch, caplog):
    import lmms_eval.api.metrics as metrics
    import lmms_eval.evaluator_utils as evaluator_utils

    monkeypatch.setattr(metrics, "stderr_for_metric", _unwrapped(metrics.stderr_for_metric))
    monkeypatch.setattr(evaluator_utils, "stderr_for_metric", metrics.stderr_for_metric)
    monkeypatch.delattr(evaluator_utils, "stderr_for_metric")  # a host that no longer imports it by name
    with caplog.at_level(logging.WARNING, logger="lmms_video_reasoning.host"):
        plugin.install_metric_hooks()
    assert host.STDERR.state.startswith("off: evaluator_utils no longer imports stderr_for_metric")
    assert not getattr(metrics.stderr_for_metric, host.WRAPPED, False), "nothing half-installed"
    assert host.TASK_CONTEXT.state == "on", "the other touchpoints are independent"
    [record] = [r for r in caplog.records if "stderr is off" in r.getMessage()]
    assert "lmms-vr report" in record.getMessage()
    plugin.install_metric_hooks()  # once off, it stays off and quiet
    assert len([r for r in caplog.records if "stderr is off" in r.getMessage()]) == 1


def test_a_new_host_parameter_passes_through_the_task_path_wrapper(fresh, monkeypatch):
    from lmms_eval.tasks import TaskManager

    real = _unwrapped(TaskManager.initialize_tasks)
    seen = {}

    def initialize_tasks(self, include_path=None, include_defaults=True, new_option="default"):
        seen["new_option"] = new_option
        return real(self, include_path=include_path, include_defaults=include_defaults)

    monkeypatch.setattr(TaskManager, "initialize_tasks", initialize_tasks)
    plugin.install_task_path()
    assert host.TASK_PATH.state == "on" and getattr(TaskManager.initialize_tasks, host.WRAPPED, False)
    manager = TaskManager.__new__(TaskManager)
    manager.__dict__.update(TaskManager().__dict__)
    index = manager.initialize_tasks(None, True, new_option="from upstream")  # positional and keyword, as a caller would
    assert seen["new_option"] == "from upstream" and "vcr_cot" in index


def test_the_run_files_walk_finds_simple_evaluate_through_comprehensions():
    def simple_evaluate():
        datetime_str = "20261124_120000"  # noqa: F841 - read from this frame
        evaluation_tracker = type("T", (), {"general_config_tracker": type("G", (), {"model_name_sanitized": "m"})()})()  # noqa: F841
        return [host.run_identity(None) for _ in range(1)][0]

    assert simple_evaluate() == ("20261124_120000", "m")


def test_an_editable_install_carries_the_start_up_hook(tmp_path):
    """The editable wheel (PEP 660, what `pip install -e .` installs) holds our .pth next to
    setuptools' own finder, so `lmms-eval tasks list` sees the tasks in both kinds of install."""
    pyproject_hooks = pytest.importorskip("pyproject_hooks")
    source = tmp_path / "src"
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    caller = pyproject_hooks.BuildBackendHookCaller(str(source), "setuptools.build_meta",
                                                    runner=pyproject_hooks.quiet_subprocess_runner)
    wheel = caller.build_editable(str(tmp_path / "dist"))
    names = zipfile.ZipFile(tmp_path / "dist" / wheel).namelist()
    assert "lmms_video_reasoning.pth" in names, names
    text = zipfile.ZipFile(tmp_path / "dist" / wheel).read("lmms_video_reasoning.pth").decode()
    assert text.strip() == "import lmms_video_reasoning.utils.lmms.autoload"
    assert any(n.startswith("__editable__") and n.endswith(".pth") for n in names), "setuptools' own finder is kept"


def _doctor(env: dict) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "doctor", "--json", "--no-network"],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, env=env)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, {f["topic"]: f for f in json.loads(proc.stdout)}


EVALUATION = "evaluation: python -m lmms_eval"


@pytest.mark.slow
def test_doctor_reports_each_integration_truthfully(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LMMS_VR_JUDGE", "LMMS_VR_NO_AUTOLOAD")) and k not in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY")}
    env["LMMS_VR_CACHE"] = str(tmp_path / "cache")  # the sample doctor evaluates, written once for the three runs
    code, found = _doctor(env)  # a working install, no judge configured yet: it passes
    assert code == 0, found
    for topic in ("tasks: python -m lmms_eval", "tasks: lmms-eval tasks list / serve", "stderr", "judge-usage",
                  "task-context", "autoload", "lmms-eval", EVALUATION):
        assert found[topic]["state"] == "ok", found[topic]
    for bench, key in {"vcr_bench": "OPENAI_API_KEY", "cg_bench": "OPENAI_API_KEY", "vrbench": "DEEPSEEK_API_KEY"}.items():
        judge = found[f"judge: {bench}"]
        assert judge["state"] == "warn" and "not configured" in judge["detail"], judge
        assert judge["fix"].startswith(f"set {key},"), judge
        other = ({"OPENAI_API_KEY", "DEEPSEEK_API_KEY"} - {key}).pop()
        assert other not in judge["fix"] + judge["detail"], judge

    code, found = _doctor({**env, "LMMS_VR_NO_AUTOLOAD": "1", "LMMS_VR_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "LMMS_VR_JUDGE_MODEL": "m"})
    assert code == 1
    assert found["autoload"]["state"] == "off" and "LMMS_VR_NO_AUTOLOAD" in found["autoload"]["detail"]
    assert found["tasks: lmms-eval tasks list / serve"]["state"] == "off"  # only the .pth reaches that command
    assert found["tasks: lmms-eval tasks list / serve"]["fix"].startswith("pass --include_path")
    assert found["tasks: python -m lmms_eval"]["state"] == "ok"  # the entry point still does
    assert found[EVALUATION]["state"] == "ok"
    assert found["stderr"]["state"] == "ok"
    assert found["judge: vcr_bench"]["state"] == "info" and "127.0.0.1:9" in found["judge: vcr_bench"]["detail"]

    code, found = _doctor({**env, "LMMS_VR_PROXY_CACHE_MB": "nan"})
    assert found["setting LMMS_VR_PROXY_CACHE_MB"]["state"] == "off" and code == 1


@pytest.mark.slow
def test_doctor_fails_when_lmms_eval_cannot_evaluate_and_names_why(without_filelock_api):
    """The failure a fresh install met (filelock 4.3 without the private module lmms-eval imports):
    every task is listed, yet no document can be evaluated. doctor says so, with the cause."""
    code, found = _doctor(without_filelock_api)
    assert code == 1
    assert found["tasks: python -m lmms_eval"]["state"] == "ok"  # listing tasks cannot see it
    assert found[EVALUATION]["state"] == "off", found[EVALUATION]
    assert found[EVALUATION]["detail"].endswith("ModuleNotFoundError: No module named 'filelock._api'"), found[EVALUATION]
    assert "constraints.txt" in found[EVALUATION]["fix"]


def test_the_cause_of_a_failed_run_is_the_last_tracebacks_last_line():
    from lmms_video_reasoning.utils.lmms.cli_run import failure_cause

    output = textwrap.dedent("""\
        Generating test split: 1 examples [00:00, 156.67 examples/s]\r  0%|          | 0/1
        Traceback (most recent call last):
          File "a.py", line 1, in <module>
        KeyError: 'x'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "evaluator.py", line 134, in _enable_reentrant_filelocks
            import filelock._api as _fl_api
                   ^^^^^^^^^^^^^
        ModuleNotFoundError: No module named 'filelock._api'
        2026-01-01 | ERROR | Error during evaluation: No module named 'filelock._api'. Please set `--verbosity=DEBUG`
    """)
    assert failure_cause(output) == "ModuleNotFoundError: No module named 'filelock._api'"
    assert failure_cause("no traceback here\n") == ""
