"""`lmms-vr upstream --lmms-eval DIR`: this suite as a pull-request-ready change to lmms-eval.

Writes into a checkout of lmms-eval (0.7.x layout; an unpacked sdist works: missing `test/`
and `docs/` are created), from the same sources the plugin runs (nothing is kept twice):

- `lmms_eval/tasks/<folder>/` per benchmark: the task and group YAMLs of `<bench>/tasks/`
  with the settings all tasks share moved to `_default_template_yaml`, `!function` paths
  relative to the folder (`utils.<hook>`, a generated `utils.py` re-exporting the hooks so
  that state such as the score memo and judge clients lives in one real module), local
  `data_files` copied in, every module and data file of the benchmark package, a README
  (the benchmark's README, its tasks, frame budgets, the papers' numbers). The folder name
  and the relation to upstream tasks come from the benchmark's `upstream.json`.
- `lmms_eval/tasks/_task_utils/video_reasoning/<pkg>/`: the shared modules those folders
  import (the import closure only), with `lmms_video_reasoning.*` imports rewritten.
- `test/eval/<folder>/test_<folder>.py`: offline tests (no network, key or GPU).
- entries in `docs/advanced/current_tasks.md`, and the PR description (`--pr-out`).

Names are checked against the checkout: a task, group or folder name that exists upstream,
or a folder name equal to an upstream one once case and separators are ignored, is an error.
The written Python is formatted and import-sorted with ruff under the checkout's settings
(line length 240, isort) when ruff is installed.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

PACKAGE = "lmms_video_reasoning"
SHARED_HOME = ("_task_utils", "video_reasoning")
TEMPLATE = "_default_template_yaml"
ENTRY_MODULE = "utils"
META_FILE = "upstream.json"
DATA_SUFFIXES = (".json", ".txt", ".md")  # a benchmark README.md is rewritten by write_readme
MARK = "lmms-video-reasoning"


class UpstreamError(ValueError):
    """A checkout or a source the command cannot work with (the message names the fix)."""


# ------------------------------------------------------------------------------ YAML


class FunctionRef(str):
    """A `!function` value."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: FunctionRef(loader.construct_scalar(node)))


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(FunctionRef, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def load_yaml(path: Path) -> dict:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    return data if isinstance(data, dict) else {}


def dump_yaml(data: dict, comment: str = "") -> str:
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=240, allow_unicode=True, default_flow_style=False)
    body = re.sub(r"!function '([^']*)'", r"!function \1", body)
    return (comment + "\n" if comment else "") + body


def leading_comment(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def function_refs(value: Any) -> Iterable[FunctionRef]:
    if isinstance(value, FunctionRef):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from function_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from function_refs(item)


# ------------------------------------------------------------------------------ the sources


@dataclass
class TaskFolder:
    """One folder of task YAMLs and the benchmark package its hooks live in."""

    source: Path
    package: str
    meta: dict
    tasks: dict[str, dict] = field(default_factory=dict)  # name -> resolved config
    groups: dict[str, dict] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.meta["task_folder"]


def package_dir(package: str) -> Path:
    return Path(importlib.import_module(f"{PACKAGE}.{package}").__file__).resolve().parent


def _resolve(path: Path, seen: tuple = ()) -> dict:
    config = load_yaml(path)
    include = config.pop("include", None)
    if include is None:
        return config
    base_path = (path.parent / include).resolve()
    if base_path in seen:
        raise UpstreamError(f"{path}: include cycle through {include}")
    return {**_resolve(base_path, seen + (base_path,)), **config}


def discover(tasks_root: Path | None = None) -> list[TaskFolder]:
    """Every folder of our task YAMLs (the suite's benchmarks' `Benchmark.task_dirs`, or the
    folders under `tasks_root`), with its tasks resolved (includes merged)."""
    from lmms_video_reasoning.utils.core import registry

    candidates = tasks_root.iterdir() if tasks_root else registry.task_dirs(registry.builtin())
    folders = []
    for source in sorted((p for p in candidates if p.is_dir() and any(p.glob("*.yaml"))), key=lambda p: (p.parent.name, p.name)):
        raw = {path: load_yaml(path) for path in sorted(source.glob("*.yaml"))}
        packages = {ref.split(".")[1] for config in raw.values() for ref in function_refs(config) if ref.startswith(PACKAGE + ".")}
        if len(packages) != 1:
            raise UpstreamError(f"{source}: the hooks of one task folder must live in one benchmark package, found {sorted(packages) or 'none'}")
        package = packages.pop()
        meta_path = package_dir(package) / META_FILE
        if not meta_path.is_file():
            raise UpstreamError(f"{meta_path} is missing: it names the lmms-eval task folder of {package} (key task_folder)")
        folder = TaskFolder(source, package, json.loads(meta_path.read_text(encoding="utf-8")))
        for path, config in raw.items():
            if isinstance(config.get("task"), str):
                folder.tasks[config["task"]] = _resolve(path)
                folder.comments[config["task"]] = leading_comment(path)
            elif isinstance(config.get("group"), str):
                folder.groups[config["group"]] = config
                folder.comments[config["group"]] = leading_comment(path)
        folders.append(folder)
    return folders


# ------------------------------------------------------------------------------ names


def normalized(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def upstream_names(checkout: Path, ours: set[str]) -> tuple[set[str], set[str]]:
    """(task/group/tag names, task folder names) already in the checkout, ours left out."""
    tasks_root = checkout / "lmms_eval" / "tasks"
    folders = {p.name for p in tasks_root.iterdir() if p.is_dir() and p.name not in ours}
    names: set[str] = set()
    pattern = re.compile(r"^(?:task|group|tag):\s*([A-Za-z0-9_.-]+)\s*$", re.M)
    for path in tasks_root.rglob("*"):
        if path.is_file() and (path.suffix == ".yaml" or path.name == TEMPLATE) and path.relative_to(tasks_root).parts[0] not in ours:
            names.update(pattern.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names, folders


def check_names(folders: list[TaskFolder], checkout: Path) -> list[str]:
    """Raise on a collision with upstream; return notes on look-alike names (for the PR)."""
    targets = {f.target for f in folders}
    names, upstream_folders = upstream_names(checkout, targets)
    problems, notes = [], []
    by_norm = {}
    for name in names | upstream_folders:
        by_norm.setdefault(normalized(name), set()).add(name)
    for folder in folders:
        if normalized(folder.target) in {normalized(f) for f in upstream_folders}:
            problems.append(f"task folder {folder.target!r} looks like upstream's {sorted(by_norm[normalized(folder.target)])}")
        for name in [*folder.tasks, *folder.groups]:
            if name in names:
                problems.append(f"{name!r} is already an lmms-eval task, group or tag")
            elif normalized(name) in by_norm:
                notes.append(f"`{name}` (ours) differs from upstream's {', '.join(f'`{n}`' for n in sorted(by_norm[normalized(name)]))} only by separators")
    if problems:
        raise UpstreamError("name collisions with lmms-eval: " + "; ".join(problems) + f". Rename in {META_FILE} / the task YAMLs.")
    return notes


# ------------------------------------------------------------------------------ Python


def module_path(name: str) -> Path | None:
    """The source file of one of our modules (None if `name` is not a module of ours)."""
    parts = name.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    try:
        base = package_dir(parts[1])
    except ImportError:
        return None
    path = base.joinpath(*parts[2:])
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def imported_modules(source: str) -> set[str]:
    """Our modules a source imports anywhere (module level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    modules = set()
    for name in found:
        if name.startswith(PACKAGE + ".") and module_path(name) is not None:
            parts = name.split(".")
            modules.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))  # parents run first
    return {m for m in modules if module_path(m) is not None}


LMMS_VR_ONLY = ("benchmark.py", "report.py")


def export_modules(folders: list[TaskFolder]) -> dict[str, Path]:
    """{module: source file}: every module of the benchmark packages, and the closure of what they import."""
    todo = []
    for folder in folders:
        base = package_dir(folder.package)
        for path in sorted(base.rglob("*.py")):
            # benchmark.py / report.py serve `lmms-vr` (registry, report), not lmms-eval's tasks
            if "__pycache__" not in path.parts and path.relative_to(base).as_posix() not in LMMS_VR_ONLY:
                rel = path.relative_to(base).with_suffix("")
                parts = [p for p in rel.parts if p != "__init__"]
                todo.append(".".join([PACKAGE, folder.package, *parts]))
    modules: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in modules:
            continue
        path = module_path(name)
        if path is None:
            continue
        modules[name] = path
        todo.extend(imported_modules(path.read_text(encoding="utf-8")) - set(modules))
    return modules


class Mapping:
    """Where our packages go in lmms-eval."""

    def __init__(self, folders: list[TaskFolder]) -> None:
        self.benchmarks = {f.package: f.target for f in folders}

    def package(self, package: str) -> str:
        if package in self.benchmarks:
            return f"lmms_eval.tasks.{self.benchmarks[package]}"
        return ".".join(["lmms_eval.tasks", *SHARED_HOME, package])

    def module(self, name: str) -> str:
        parts = name.split(".")
        return ".".join([self.package(parts[1]), *parts[2:]])

    def file(self, checkout: Path, name: str, source: Path) -> Path:
        target = checkout.joinpath(*self.module(name).split("."))
        return target / "__init__.py" if source.name == "__init__.py" else target.with_suffix(".py")

    def rewrite(self, source: str) -> str:
        return re.sub(rf"\b{PACKAGE}\.(\w+)", lambda m: self.package(m.group(1)), source)


# ------------------------------------------------------------------------------ task folders


def _relocate_data_files(value: Any, source: Path, target: Path, written: list[Path]) -> Any:
    if isinstance(value, dict):
        return {k: _relocate_data_files(v, source, target, written) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocate_data_files(v, source, target, written) for v in value]
    if isinstance(value, str) and not re.match(r"^[a-z]+://", value) and (source / value).is_file():
        shutil.copyfile(source / value, target / Path(value).name)
        written.append(target / Path(value).name)
        return Path(value).name
    return value


def _relative_refs(value: Any, hooks: dict[str, str]) -> Any:
    """`!function lmms_video_reasoning.<pkg>.<module>.<fn>` -> `!function utils.<fn>`."""
    if isinstance(value, FunctionRef):
        module, _, function = value.rpartition(".")
        if hooks.setdefault(function, module) != module:
            raise UpstreamError(f"two hooks named {function!r} ({hooks[function]}, {module}): rename one")
        return FunctionRef(f"{ENTRY_MODULE}.{function}")
    if isinstance(value, dict):
        return {k: _relative_refs(v, hooks) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative_refs(v, hooks) for v in value]
    return value


def write_task_folder(folder: TaskFolder, checkout: Path, mapping: Mapping) -> list[Path]:
    target = checkout / "lmms_eval" / "tasks" / folder.target
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    hooks: dict[str, str] = {}
    configs = {}
    for name, config in folder.tasks.items():
        if "dataset_kwargs" in config:
            config = {**config, "dataset_kwargs": _relocate_data_files(config["dataset_kwargs"], folder.source, target, written)}
        configs[name] = _relative_refs(config, hooks)
    first = next(iter(configs.values()))
    shared = {k: v for k, v in first.items() if k != "task" and all(k in c and c[k] == v for c in configs.values())}
    template = target / TEMPLATE
    template.write_text(dump_yaml(shared, f"# Settings shared by the {folder.meta.get('title', folder.package)} tasks (included by each task YAML)."), encoding="utf-8")
    written.append(template)
    for name, config in configs.items():
        own = {"task": name, "include": TEMPLATE, **{k: v for k, v in config.items() if k != "task" and k not in shared}}
        path = target / f"{name}.yaml"
        path.write_text(dump_yaml(own, folder.comments.get(name, "")), encoding="utf-8")
        written.append(path)
    for name, config in folder.groups.items():
        path = target / f"{name}.yaml"
        path.write_text(dump_yaml(_relative_refs(config, hooks), folder.comments.get(name, "")), encoding="utf-8")
        written.append(path)
    entry = target / f"{ENTRY_MODULE}.py"
    if (package_dir(folder.package) / f"{ENTRY_MODULE}.py").exists():
        raise UpstreamError(f"{folder.package}/{ENTRY_MODULE}.py would be overwritten by the generated hook module: rename it")
    by_module: dict[str, list[str]] = {}
    for function, module in sorted(hooks.items()):
        by_module.setdefault(mapping.module(module), []).append(function)
    lines = ['"""The hooks the task YAMLs of this folder name (`!function utils.<hook>`).', "",
             "lmms-eval executes this file afresh for every `!function` tag, so it only re-exports: the",
             'hooks and their state (score memo, judge clients, caches) live in the imported modules."""', ""]
    for module, functions in by_module.items():
        lines.append(f"from {module} import {', '.join(functions)}")
    lines += ["", "__all__ = [" + ", ".join(repr(f) for f in sorted(hooks)) + "]", ""]
    entry.write_text("\n".join(lines), encoding="utf-8")
    written.append(entry)
    return written


def frame_budget_table(folder: TaskFolder) -> str:
    rows = []
    for name, config in folder.tasks.items():
        for model, settings in (config.get("lmms_eval_specific_kwargs") or {}).items():
            rows.append(f"| `{name}` | `{model}` | {', '.join(f'{k}={v}' for k, v in (settings or {}).items())} |")
    if not rows:
        return ""
    return "\n".join(["## Frame budgets (`lmms_eval_specific_kwargs`)", "",
                      "A block named after `--model` replaces `default`.", "",
                      "| task | model | settings |", "|---|---|---|", *rows, ""])


def reference_numbers(package: str) -> str:
    """The papers' numbers for this benchmark, as markdown (empty when none are shipped)."""
    from lmms_video_reasoning.utils.core import registry

    try:
        entry = registry.get(package).reference_tables()
    except ValueError:
        return ""
    if not entry.get("tables"):
        return ""
    out = ["## Official numbers", "", f"From {entry['citation']}.", ""]
    for table in entry["tables"].values():
        columns = table["columns"]
        out += [f"### {table['title']}", "", "| model | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
        for row in table["rows"]:
            out.append(f"| {row['model']} | " + " | ".join("-" if v is None else str(v) for v in row["values"][: len(columns)]) + " |")
        out.append("")
    return "\n".join(out)


def write_readme(folder: TaskFolder, checkout: Path) -> Path:
    meta = folder.meta
    readme = package_dir(folder.package) / "README.md"
    body = readme.read_text(encoding="utf-8") if readme.is_file() else f"# {meta.get('title', folder.package)}\n"
    tasks = "\n".join(f"- `{name}`: " + ", ".join(f"`{m['metric']}`" for m in config.get("metric_list", [])) for name, config in folder.tasks.items())
    groups = "\n".join(f"- group `{name}`: " + ", ".join(f"`{t}`" for t in config.get("task", [])) for name, config in folder.groups.items())
    parts = [body.rstrip(), "", "## In lmms-eval", "",
             f"Paper: [{meta.get('paper', '')}]({meta.get('paper_url', '')}).", "",
             f"Relation to upstream tasks: {meta.get('relation', 'none')}", "",
             "Tasks and metrics:", "", tasks, groups, "",
             "Shared code: `lmms_eval/tasks/_task_utils/video_reasoning/` (judge engine, video decoding, aggregation helpers).",
             "Judge: set the variables described there (`LMMS_VR_JUDGE_BASE_URL`, `OPENAI_API_KEY`, ...); judged metrics are reported",
             "with their failure counts, never dropped.", "", frame_budget_table(folder), reference_numbers(folder.package)]
    path = checkout / "lmms_eval" / "tasks" / folder.target / "README.md"
    path.write_text("\n".join(p for p in parts if p is not None).rstrip() + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ tests, docs, PR

TEST_TEMPLATE = '''"""Offline checks of lmms_eval/tasks/{target} ({title}): no network, API key or GPU.

Each task is built by lmms-eval from this folder on a generated sample of the benchmark
(synthetic videos in the official layout), its prompts and metric records are produced
for a reply, and every metric aggregates without a judge.
"""

import importlib
import os
from pathlib import Path

import lmms_eval.tasks
import pytest
from lmms_eval.tasks import TaskManager, get_task_dict

FOLDER = Path(lmms_eval.tasks.__file__).parent / "{target}"
TASKS = {tasks!r}
GROUPS = {groups!r}
ROOT_ENV = {root_env!r}
SAMPLE_MODULE = "lmms_eval.tasks.{target}.sample"


@pytest.fixture(scope="module")
def folder_tasks():
    """lmms-eval's index of this folder alone (the full index of 300+ folders takes a minute)."""
    return TaskManager("ERROR", include_defaults=False, include_path=str(FOLDER))


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("{target}") / "root"
    importlib.import_module(SAMPLE_MODULE).write_sample(root)
    return root


@pytest.fixture
def offline(monkeypatch, sample_root):
    monkeypatch.setenv(ROOT_ENV, str(sample_root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for name in list(os.environ):
        if name.startswith(("LMMS_VR_JUDGE", "OPENAI_", "DEEPSEEK_", "AZURE_")) or name == "MODEL_VERSION":
            monkeypatch.delenv(name)
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")


def test_every_task_and_group_is_indexed_from_this_folder(folder_tasks):
    # lmms-eval's default index walks lmms_eval/tasks/, so indexing this folder alone is enough
    assert FOLDER.parent == Path(lmms_eval.tasks.__file__).parent
    for name in TASKS + GROUPS:
        assert name in folder_tasks.all_tasks, name
        if name in TASKS:
            assert Path(folder_tasks.task_index[name]["yaml_path"]).parent == FOLDER, name


@pytest.mark.parametrize("name", TASKS)
def test_task_builds_prompts_records_and_every_metric(name, folder_tasks, offline):
    task = get_task_dict([name], folder_tasks)[name]
    docs = list(task.eval_docs)
    assert docs, f"{{name}}: no documents from the sample"
    doc = docs[0]
    assert isinstance(task.doc_to_text(doc), str) and task.doc_to_text(doc)
    records = task.process_results(doc, ["A"])
    aggregations = task.aggregation()
    assert set(aggregations) <= set(records), sorted(set(aggregations) - set(records))
    for metric, aggregate in aggregations.items():
        value = aggregate([records[metric]])
        assert value is None or isinstance(value, (int, float)), (metric, value)
'''


def write_tests(folders: list[TaskFolder], checkout: Path, root_envs: dict[str, str]) -> list[Path]:
    written = []
    for folder in folders:
        path = checkout / "test" / "eval" / folder.target / f"test_{folder.target}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEST_TEMPLATE.format(target=folder.target, title=folder.meta.get("title", folder.package), tasks=sorted(folder.tasks),
                                             groups=sorted(folder.groups), root_env=root_envs[folder.package]), encoding="utf-8")
        written.append(path)
    return written


def sample_root_envs(folders: list[TaskFolder]) -> dict[str, str]:
    """{package: the environment variable naming its data root} (what its sample is written for)."""
    from lmms_video_reasoning.utils.tools.sample import env_for

    return {f.package: next(iter(env_for(Path("."), (f.package,)))) for f in folders}


def write_docs(folders: list[TaskFolder], checkout: Path) -> Path:
    path = checkout / "docs" / "advanced" / "current_tasks.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Current Tasks\n"
    start, end = f"<!-- {MARK}: start -->", f"<!-- {MARK}: end -->"
    text = re.sub(rf"\n*{re.escape(start)}.*?{re.escape(end)}\n?", "\n", text, flags=re.S).rstrip() + "\n"
    lines = ["", start, "## Video reasoning (full protocols, LLM judges)", ""]
    for folder in folders:
        names = ", ".join(f"`{n}`" for n in [*folder.tasks, *folder.groups])
        lines.append(f"- [{folder.meta.get('title', folder.package)}]({folder.meta.get('paper_url', '')}) ({names}): `lmms_eval/tasks/{folder.target}`")
    lines += [end, ""]
    path.write_text(text + "\n".join(lines), encoding="utf-8")
    return path


def validation_rows(folders: list[TaskFolder], validation: dict | None) -> list[str]:
    rows = []
    checks = [("lmms-eval --tasks list", "-", "every task and group listed")]
    checks.append(("pytest test/eval", "-", ", ".join(f"test/eval/{f.target}" for f in folders)))
    for folder in folders:
        for name, config in folder.tasks.items():
            checks.append((f"lmms-eval --model dummy --tasks {name} --limit 8", "8", ", ".join(m["metric"] for m in config.get("metric_list", []))))
    for command, n, metrics in checks:
        result = (validation or {}).get(command)
        status = "not run" if result is None else ("pass" if result.get("passed") else "FAIL")
        rows.append(f"| `{command}` | {result.get('n', n) if result else n} | {metrics} | {status} |")
    return rows


def pr_description(folders: list[TaskFolder], notes: list[str], validation: dict | None = None) -> str:
    task_count = sum(len(f.tasks) for f in folders)
    lines = ["## Summary", "",
             f"Adds {len(folders)} video-reasoning benchmarks with their complete official evaluation protocols ({task_count} tasks): "
             + ", ".join(f"{f.meta.get('title', f.package)} (`lmms_eval/tasks/{f.target}`)" for f in folders)
             + ". Official prompts and frame sampling, scoring on every reply (failures counted, never dropped), and the papers' LLM judges "
             "(cached, resumable, cost-accounted) in shared code under `lmms_eval/tasks/_task_utils/video_reasoning/`.", "",
             "## In scope", ""]
    for folder in folders:
        lines.append(f"- `{folder.target}`: {', '.join(f'`{n}`' for n in folder.tasks)}; groups {', '.join(f'`{n}`' for n in folder.groups) or 'none'}. "
                     f"{folder.meta.get('relation', '')}")
    lines += ["- Offline tests in `test/eval/<folder>/` (sample data generated on the fly; no network, API key or GPU).",
              "- Entries in `docs/advanced/current_tasks.md`.", "",
              "## Out of scope", "",
              "- Downloading the datasets: each README names the data root variable and the layout (the originals are large; no automatic `video: true` download).",
              "- Retiring upstream's earlier ports of these benchmarks (named in the relation notes above): left untouched.",
              "- Bootstrap standard errors of the judged headline metrics: `stderr_for_metric` only knows lmms-eval's own aggregations, so the Stderr column shows N/A here "
              "(the lmms-video-reasoning plugin adds them); a follow-up could let an aggregation declare its standard error.", "",
              "## Validation", "",
              "| command | N | metrics | pass/fail |", "|---|---|---|---|", *validation_rows(folders, validation), "",
              "## Risk", "",
              "- New folders and new shared code only; no existing task, model or core file is changed.",
              "- Judged metrics need a judge (`LMMS_VR_JUDGE_*` or `OPENAI_API_KEY`); without one they are reported as missing, with a log line naming the variables.",
              ]
    if notes:
        lines += ["- Look-alike names (kept; these tasks supersede the upstream ones): " + "; ".join(notes) + "."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ the command


def _ruff(paths: list[Path], checkout: Path) -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    python = [str(p) for p in paths if p.suffix == ".py"]
    if not Path(ruff).exists() or not python:
        return "ruff not installed: the written Python is not formatted"
    config = ["--config", str(checkout / "pyproject.toml")] if (checkout / "pyproject.toml").is_file() else ["--line-length", "240"]
    subprocess.run([ruff, "check", "--fix", "--select", "I,F401", "--quiet", *config, *python], capture_output=True, text=True)
    subprocess.run([ruff, "format", "--quiet", *config, *python], capture_output=True, text=True)
    check = subprocess.run([ruff, "check", *config, *python], capture_output=True, text=True)
    return "" if check.returncode == 0 else check.stdout[-3000:]


def check_checkout(checkout: Path) -> None:
    tasks_root = checkout / "lmms_eval" / "tasks"
    if not (tasks_root / "__init__.py").is_file() or not (tasks_root / "_task_utils").is_dir():
        raise UpstreamError(f"{checkout} is not an lmms-eval 0.7.x checkout (no lmms_eval/tasks/__init__.py and lmms_eval/tasks/_task_utils/): "
                            "pass the folder holding lmms_eval/ (a git clone or an unpacked sdist)")


def write_change(checkout: Path, validation: dict | None = None) -> dict:
    """Write the change into `checkout`; return what was written and the PR description."""
    checkout = Path(checkout).resolve()
    check_checkout(checkout)
    folders = discover()
    notes = check_names(folders, checkout)
    mapping = Mapping(folders)
    written: list[Path] = []
    for folder in folders:
        shutil.rmtree(checkout / "lmms_eval" / "tasks" / folder.target, ignore_errors=True)
    shutil.rmtree(checkout.joinpath("lmms_eval", "tasks", *SHARED_HOME), ignore_errors=True)
    modules = export_modules(folders)
    for name, source in sorted(modules.items()):
        target = mapping.file(checkout, name, source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(mapping.rewrite(source.read_text(encoding="utf-8")), encoding="utf-8")
        written.append(target)
    packages = sorted({name.split(".")[1] for name in modules})
    task_sources = {folder.source for folder in folders}  # written by write_task_folder
    for package in packages:  # data files next to the code (prompts, tables)
        base = package_dir(package)
        for path in sorted(base.rglob("*")):
            if path.suffix in DATA_SUFFIXES and path.name != META_FILE and "__pycache__" not in path.parts \
                    and not task_sources & set(path.parents):
                target = checkout.joinpath(*mapping.package(package).split("."), path.relative_to(base))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                written.append(target)
    home = checkout.joinpath("lmms_eval", "tasks", *SHARED_HOME, "__init__.py")
    home.write_text('"""Shared code of the video-reasoning task folders (judge engine, video decoding, aggregation helpers)."""\n', encoding="utf-8")
    written.append(home)
    for folder in folders:
        written += write_task_folder(folder, checkout, mapping)
        written.append(write_readme(folder, checkout))
    written += write_tests(folders, checkout, sample_root_envs(folders))
    written.append(write_docs(folders, checkout))
    lint = _ruff(written, checkout)
    leftovers = [str(p) for p in written if p.suffix == ".py" and PACKAGE in p.read_text(encoding="utf-8")]
    return {"written": written, "folders": folders, "notes": notes, "lint": lint, "leftovers": leftovers,
            "description": pr_description(folders, notes, validation)}


def main(args) -> int:
    validation = json.loads(Path(args.validation).read_text()) if args.validation else None
    try:
        result = write_change(Path(args.lmms_eval), validation)
    except UpstreamError as error:
        print(f"lmms-vr upstream: error: {error}", file=sys.stderr)
        return 2
    out = Path(args.pr_out)
    out.write_text(result["description"], encoding="utf-8")
    checkout = Path(args.lmms_eval).resolve()
    print(f"wrote {len(result['written'])} files into {checkout}:")
    for folder in result["folders"]:
        print(f"  lmms_eval/tasks/{folder.target}/  ({len(folder.tasks)} tasks, {len(folder.groups)} groups)")
    print(f"  lmms_eval/tasks/{'/'.join(SHARED_HOME)}/  test/eval/  docs/advanced/current_tasks.md")
    print(f"PR description: {out}")
    for note in result["notes"]:
        print(f"note: {note}")
    if result["leftovers"]:
        print("warning: these files still mention " + PACKAGE + ": " + ", ".join(result["leftovers"]), file=sys.stderr)
    if result["lint"]:
        print("warning: ruff reports problems under lmms-eval's settings:\n" + result["lint"], file=sys.stderr)
    return 0
