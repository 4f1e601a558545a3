"""Task folders of installed packages: the `lmms_eval.tasks` entry point group and LMMS_EVAL_PLUGINS'
`<plugin>.tasks` folders, indexed by every TaskManager."""

import textwrap

from lmms_eval.tasks import TaskManager


def package(site, name, tasks=True):
    """A package on sys.path, with a folder `tasks/` holding one task YAML `<name>_probe`."""
    folder = site / name
    folder.mkdir()
    (folder / "__init__.py").write_text("import os\nTASKS = os.path.join(os.path.dirname(__file__), 'tasks')\n")
    if tasks:
        (folder / "tasks").mkdir()
        (folder / "tasks" / "__init__.py").write_text("")
        yaml = f"""\
            task: {name}_probe
            dataset_path: json
            output_type: generate_until
            doc_to_text: question
            doc_to_target: answer
            """
        (folder / "tasks" / f"{name}_probe.yaml").write_text(textwrap.dedent(yaml))


def distribution(site, name, entry_point):
    """An installed distribution declaring `entry_point` in the group lmms_eval.tasks."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[lmms_eval.tasks]\n{name} = {entry_point}\n")


def test_entry_point_task_folders_are_indexed(tmp_path, monkeypatch):
    package(tmp_path, "entry_point_plugin")
    distribution(tmp_path, "entry_point_plugin", "entry_point_plugin:TASKS")
    distribution(tmp_path, "broken_plugin", "broken_plugin_missing_module:TASKS")  # fails to load: logged, skipped
    monkeypatch.syspath_prepend(str(tmp_path))
    manager = TaskManager("ERROR")
    assert "entry_point_plugin_probe" in manager.all_tasks
    assert "mme" in manager.all_tasks  # lmms-eval's own tasks are still there
    assert "entry_point_plugin_probe" not in TaskManager("ERROR", include_defaults=False).all_tasks


def test_lmms_eval_plugins_task_folders_reach_the_task_manager(tmp_path, monkeypatch):
    package(tmp_path, "env_plugin")
    package(tmp_path, "models_only_plugin", tasks=False)  # LMMS_EVAL_PLUGINS also names plugins of models only
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS", "models_only_plugin,env_plugin,missing_plugin")
    assert "env_plugin_probe" in TaskManager("ERROR").all_tasks  # what `lmms-eval --tasks env_plugin_probe` looks up
    monkeypatch.delenv("LMMS_EVAL_PLUGINS")
    assert "env_plugin_probe" not in TaskManager("ERROR").all_tasks
