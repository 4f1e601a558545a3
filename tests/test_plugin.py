"""The lmms-eval hook: our tasks resolve with no flag, against the installed lmms-eval."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.lmms import plugin as lmms_plugin

EXPECTED_TASKS = {"vcr_cot", "vcr_direct", "vcr_text_only", "vcr_one_frame", "vr_bench", "vr_bench_mcq",
                  "cg_bench_long", "cg_bench_clue", "cg_bench_grounding", "cg_bench_open", "cg_bench_mcq"}


def our_task_names() -> set[str]:
    names = set()
    for path in (path for folder in registry.task_dirs() for path in folder.rglob("*.yaml")):
        config = yaml.load(path.read_text(), Loader=yaml.BaseLoader) or {}
        if isinstance(config, dict) and isinstance(config.get("task"), str):
            names.add(config["task"])
        if isinstance(config, dict) and isinstance(config.get("group"), str) and "task" in config:
            names.add(config["group"])
    return names


def test_entry_point_is_declared():
    eps = [ep for ep in entry_points(group="lmms_eval.models") if ep.name == "lmms_video_reasoning"]
    assert eps, "the lmms_eval.models entry point is not installed: reinstall the package"
    assert eps[0].value == "lmms_video_reasoning.utils.lmms.plugin:register"


def test_task_names_are_ours_and_do_not_collide_with_builtins():
    names = our_task_names()
    assert EXPECTED_TASKS <= names, f"missing tasks: {EXPECTED_TASKS - names}"
    for name in names:
        assert not name.startswith(("cgbench", "vrbench", "vcrbench", "vcr_wiki", "cgav_counting")), name


def test_lmms_eval_task_manager_finds_our_tasks_with_no_flag():
    # A fresh interpreter, as `python -m lmms_eval` would be: importing lmms_eval.models runs
    # the entry point; the TaskManager the CLI builds must then index our folder, and each of
    # our names must resolve to our YAML (not a built-in of the same name). If lmms-eval
    # moves the entry-point loading or TaskManager.initialize_tasks, this fails.
    code = (
        "import json, lmms_eval.models\n"
        "from lmms_eval.tasks import TaskManager\n"
        "index = TaskManager('ERROR').task_index\n"
        "print(json.dumps({name: str(entry['yaml_path']) for name, entry in index.items()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = json.loads(proc.stdout.strip().splitlines()[-1])
    missing = our_task_names() - set(index)
    assert not missing, f"lmms-eval did not index these tasks through the hook: {sorted(missing)}"
    ours = registry.task_dirs()
    for name in our_task_names():
        assert any(Path(index[name]).resolve().is_relative_to(folder) for folder in ours), \
            f"{name} resolves to {index[name]}, not to our YAML under {ours}"


def test_replay_model_is_registered():
    code = "from lmms_eval.models import get_model; print(get_model('vr_replay').__name__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ReplayModel")


def test_include_path_is_not_indexed_twice():
    ours = [str(folder) for folder in registry.task_dirs()]
    assert len(ours) == 3 and lmms_plugin._add_our_tasks(None) == ours
    assert lmms_plugin._add_our_tasks(ours[1]) == [ours[1], ours[0], ours[2]]
    assert lmms_plugin._add_our_tasks(["/elsewhere"]) == ["/elsewhere", *ours]
    root, others = lmms_plugin.include_path()
    # installed: the folder holding them all, given with --include_path, is indexed once (a source checkout
    # has no such folder: its first benchmark's, then the others)
    assert lmms_plugin._add_our_tasks(str(root)) == [str(root), *map(str, others)]
    assert others == [] if registry.ROOT.name == registry.NAMESPACE else len(others) == 2


@pytest.mark.skipif(registry.ROOT.name != registry.NAMESPACE, reason="installed only: a source checkout (an editable "
                    "install) has one tasks folder per benchmark, not one folder holding them all")
def test_tasks_path_command_prints_one_folder_holding_every_task():
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "tasks-path"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    root = Path(proc.stdout.strip())
    assert root.name == "lmms_video_reasoning" and all(folder.is_relative_to(root) for folder in registry.task_dirs())
    found = {path.resolve() for path in root.rglob("*.yaml")}
    assert found == {path.resolve() for folder in registry.task_dirs() for path in folder.glob("*.yaml")}  # no other YAML
