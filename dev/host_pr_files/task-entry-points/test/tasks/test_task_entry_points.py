"""Tasks of an installed package, found through the `lmms_eval.tasks` entry point group."""

import textwrap

from lmms_eval.tasks import TaskManager


def install(site, name, entry_point):
    """A distribution on sys.path whose entry point names a folder of task YAMLs."""
    package = site / name
    (package / "tasks").mkdir(parents=True)
    (package / "__init__.py").write_text("import os\nTASKS = os.path.join(os.path.dirname(__file__), 'tasks')\n")
    (package / "tasks" / f"{name}_probe.yaml").write_text(
        textwrap.dedent(
            f"""\
            task: {name}_probe
            dataset_path: json
            output_type: generate_until
            doc_to_text: question
            doc_to_target: answer
            """
        )
    )
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[lmms_eval.tasks]\n{name} = {entry_point}\n")


def test_installed_task_folders_are_indexed(tmp_path, monkeypatch):
    install(tmp_path, "entry_point_plugin", "entry_point_plugin:TASKS")
    install(tmp_path, "broken_plugin", "broken_plugin_missing_module:TASKS")  # fails to load: skipped, logged
    monkeypatch.syspath_prepend(str(tmp_path))
    manager = TaskManager("ERROR")
    assert "entry_point_plugin_probe" in manager.all_tasks
    assert "mme" in manager.all_tasks  # lmms-eval's own tasks are still there
    assert "entry_point_plugin_probe" not in TaskManager("ERROR", include_defaults=False).all_tasks
