"""The task YAMLs lmms-eval reads, generated from each benchmark's declaration (`Benchmark.tasks`,
`Benchmark.groups`): the task is written down once, in Python; its YAML is output, committed so that
lmms-eval finds it, and checked against the declaration (`--check`, run by the tests and CI).

    python -m lmms_video_reasoning.utils.core.task_yaml            # rewrite every registered benchmark's YAMLs
    python -m lmms_video_reasoning.utils.core.task_yaml --check    # exit 1 naming each file that differs
    python -m lmms_video_reasoning.utils.core.task_yaml my_bench   # one benchmark

Each YAML names the hooks of the benchmark's binding module: `process_docs` (the task's),
`doc_to_visual`, `doc_to_text`, `doc_to_messages` (when the binding has it), and those the
declaration implies (`process_results_<task>`, `aggregate_<metric>`). The task's score-changing
settings go to `metadata.settings`, which lmms-eval copies into every results file's config block.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import yaml

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.registry import Benchmark, Task

COMMAND = "python -m lmms_video_reasoning.utils.core.task_yaml"
PLACEHOLDER = "doc_source.json"  # lmms-eval's one-row dataset; `process_docs` replaces it with the documents
VERSION = 1  # lmms-eval's task version (`metadata.version`)


class _Hook(str):
    """A dotted hook path, written as `!function path` (lmms-eval imports it)."""


class _Dumper(yaml.SafeDumper):
    def choose_scalar_style(self):
        return "" if self.event.tag == "!function" else super().choose_scalar_style()  # `!function a.b`, unquoted


_Dumper.add_representer(_Hook, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def task_config(benchmark: Benchmark, task: Task) -> dict:
    binding = importlib.import_module(benchmark.binding)

    def hook(name: str) -> _Hook:
        getattr(binding, name)  # a hook the binding does not have is an error here, not in lmms-eval's index
        return _Hook(f"{benchmark.binding}.{name}")

    config = {
        "task": task.name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": PLACEHOLDER}},
        "test_split": "test",
        "process_docs": hook(task.process_docs),
        "doc_to_visual": hook("doc_to_visual"),
        "doc_to_text": hook("doc_to_text"),
    }
    if hasattr(binding, "doc_to_messages"):
        config["doc_to_messages"] = hook("doc_to_messages")
    config.update({
        "doc_to_target": task.target,
        "output_type": task.output_type,
        # the hooks split a thinking model's reasoning from its answer themselves (utils/lmms/responses.py)
        "reasoning_tags": "none",
        "generation_kwargs": dict(task.generation_kwargs),
        "process_results": hook(f"{registry.PROCESS_RESULTS}{task.name}"),
        "metric_list": [{"metric": metric, "aggregation": hook(f"{registry.AGGREGATE}{metric}"),
                         "higher_is_better": benchmark.higher_is_better(metric)} for metric in task.metrics],
    })
    if task.model_kwargs is not None:
        config["lmms_eval_specific_kwargs"] = {model: dict(kwargs) for model, kwargs in task.model_kwargs.items()}
    config["metadata"] = {"version": VERSION}
    if benchmark.options:  # the task's score-changing settings, in the config block of lmms-eval's results
        config["metadata"]["settings"] = benchmark.task_options(task)
    return config


def files_of(benchmark: Benchmark) -> dict[Path, str]:
    """{path: text} of every task and group YAML of the benchmark."""
    folder = benchmark.task_dirs[0]
    configs = {folder / f"{task.name}.yaml": (task.about, task_config(benchmark, task)) for task in benchmark.tasks}
    configs.update({folder / f"{group.name}.yaml": (group.about, {"group": group.name, "task": list(group.tasks)})
                    for group in benchmark.groups})
    files = {}
    for path, (about, config) in configs.items():
        lines = [*about.splitlines(), f"Generated from {benchmark.binding} by `{COMMAND}`: edit the declaration there."]
        files[path] = ("".join(f"# {line}\n" if line else "#\n" for line in lines)
                       + yaml.dump(config, Dumper=_Dumper, default_flow_style=None, sort_keys=False, width=1000))
    return files


def _changes(benchmark: Benchmark) -> tuple[list[Path], dict[Path, str]]:
    """(the task folder's YAMLs it no longer declares, {path: text} of those to write)."""
    expected = files_of(benchmark)
    stale = sorted(set(benchmark.task_dirs[0].glob("*.yaml")) - set(expected))
    return stale, {path: text for path, text in expected.items()
                   if not path.is_file() or path.read_text(encoding="utf-8") != text}


def differences(benchmark: Benchmark) -> list[str]:
    """One line per YAML of the benchmark's task folder that is not what its declaration generates."""
    stale, changed = _changes(benchmark)
    return ([f"{path}: not generated from the declaration (remove it)" for path in stale]
            + [f"{path}: {'differs from the declaration' if path.is_file() else 'missing'}" for path in changed])


def write(benchmark: Benchmark) -> list[Path]:
    stale, changed = _changes(benchmark)
    for path in stale:
        path.unlink()
    for path, text in changed.items():
        path.write_text(text, encoding="utf-8")
    return [*stale, *changed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Generate the task YAMLs from the benchmarks' declarations.")
    parser.add_argument("benchmarks", nargs="*", help="benchmark names (default: every registered benchmark)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each file that differs")
    args = parser.parse_args(argv)
    chosen = [registry.get(name) for name in args.benchmarks] or registry.benchmarks()
    if args.check:
        lines = [line for benchmark in chosen for line in differences(benchmark)]
        print("\n".join(lines) if lines else "task YAMLs match their declarations")
        if lines:
            print(f"run `{COMMAND}` to regenerate them", file=sys.stderr)
        return 1 if lines else 0
    for benchmark in chosen:
        for path in write(benchmark):
            print(f"wrote {path}" if path.is_file() else f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
