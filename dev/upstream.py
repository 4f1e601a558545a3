"""`python dev/upstream.py --lmms-eval DIR --out SERIES/`: this suite as a series of lmms-eval pull requests.

A development tool, run from a clone of this repository with the package installed in
development mode (`pip install -e .`); it reads the clone's sources and is not part of the
installed package.

Each PR is a patch that applies with `git apply` to a clean lmms-eval tree (the one at DIR),
`SERIES/NN-<slug>.patch`, with its description `SERIES/NN-<slug>.md` in the form of lmms-eval's
PR template. The tree a PR targets is the base `--build-base` writes: lmms-eval's repository (its
test/, docs/, pre-commit configuration, PR template) with the newer release's package code; the
PRs' new Python is formatted by its ruff settings and then its pre-commit hooks (black, isort at the
configuration's versions):

- one PR per benchmark, each independent of the others, copied from the benchmark's folder:
  of the modules its lmms-eval hooks import, the definitions its hooks and tests reach (its task logic, written against two small
  interfaces: "ask the judge", `utils/core/ask.py`, and "get the frames", each task module's
  `Media`), bound to lmms-eval by the hooks in `dev/benchmark_pr_files/<benchmark>/` (lmms-eval's judge
  layer `llm_judge` and plain video paths), the folder's YAMLs, README and tests
  (`test/eval/<folder>/`). Only imports change (`lmms_video_reasoning.<...>.<module>` ->
  `lmms_eval.tasks.<folder>.<module>`), then lmms-eval's own ruff settings sort and format them.
  A module two or more benchmarks need goes once into a PR of its own (`SHARED_PACKAGE`), which the
  benchmark PRs build on (applied before each, alone too). A benchmark PR only adds files (and
  appends to its folder's README): a file of the tree it would overwrite is refused. A benchmark's
  PR may have follow-ups (`follow_ups`: CG-Bench's subtitles, 03b, and open-ended judge, 03c), each built on the PRs before it.
  What a folder may carry is checked: its own protocol modules and a short list of shared
  modules needing only the standard library or lmms-eval (`EXPORTABLE`); the plugin's
  infrastructure (judge engine and cache, proxy clips, the data-root tooling, the report, the
  synthetic videos) never leaves this repository.
- host PRs (`dev/host_prs.py`), each small and useful to every lmms-eval task.

`--validate` then checks every PR in a fresh virtual environment without this package
(`dev/upstream_validate.py`) and writes the numbers of that run into the descriptions.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

PACKAGE = "lmms_video_reasoning"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent  # the clone: `lmms_video_reasoning.<folder>` is its folder <folder> (setup.py)
# Per benchmark (its folder's name): the lmms-eval task folder's own files (hooks, YAMLs, README, tests, PR text).
BENCHMARK_FILES = HERE / "benchmark_pr_files"
SPEC_FILE = "pr.json"
# The PR of what two or more benchmark PRs need (`shared_modules`): its files (pr.json, PR.md) and its package.
SHARED_FILES = BENCHMARK_FILES / "_shared"
SHARED_PACKAGE = "lmms_eval.tasks._task_utils.video_judging"
DESCRIPTION_FILE = "PR.md"
# Shared modules a task folder may carry: the standard library, numpy/PIL/av/cv2 and lmms-eval only.
EXPORTABLE = frozenset({
    "utils.core.ask", "utils.core.columns", "utils.core.data_errors", "utils.core.frame_plan", "utils.core.intervals", "utils.core.options", "utils.core.records",
    "utils.core.settings",
    "judges.parsing", "judges.failure_share", "utils.lmms.responses", "dev.llm_judge_ask",
    "dev.plain_frames", "utils.media.subtitles",
})
# Modules the exported code may import (for the plugin's part of a module, which the export cuts) but
# never reach: the suite's environment variables (`settings.variable` binds them beside the options).
NEVER_EXPORTED = frozenset({"utils.core.settings"})
# A benchmark's own modules that serve the plugin only (data roots, engine binding, report, sample).
PLUGIN_ONLY = frozenset({"benchmark", "report", "sample", "data"})
THIRD_PARTY = frozenset({"numpy", "PIL", "av", "cv2", "datasets", "lmms_eval", "loguru"})
NOT_EXPORTED = {SPEC_FILE, DESCRIPTION_FILE, "__pycache__"}


class UpstreamError(ValueError):
    """A tree or a source the command cannot work with (the message names the fix)."""


@dataclass
class PullRequest:
    """One pull request: the files it writes (None: deletes) relative to the tree's root."""

    number: int
    slug: str
    title: str
    kind: str  # "benchmark" or "host"
    changes: dict[str, bytes | None]
    description: str  # markdown, with `{validation}` where the validation table goes
    spec: dict = field(default_factory=dict)
    tests: list[str] = field(default_factory=list)  # test folders or files under the tree, for pytest
    base: dict[str, bytes] = field(default_factory=dict)  # the clean tree's version of each file it modifies
    requires: list[str] = field(default_factory=list)  # the PRs (names) it builds on: applied before it, alone too
    part: str = ""  # a follow-up of the PR numbered `number` ("b": 03b builds on 03)

    @property
    def label(self) -> str:
        return f"{self.number:02d}{self.part}"

    @property
    def name(self) -> str:
        return f"{self.label}-{self.slug}"

    def python_lines(self, outside_tests: bool = True) -> int:
        """Lines of Python the PR adds or changes (outside `test/` by default): every line of a new
        file, the added lines of a modified one."""
        total = 0
        for path, content in self.changes.items():
            if content is None or not path.endswith(".py") or (outside_tests and path.startswith("test/")):
                continue
            new = content.decode("utf-8").splitlines()
            if path in self.base:
                old = self.base[path].decode("utf-8").splitlines()
                new = [line[1:] for line in difflib.unified_diff(old, new, lineterm="", n=0) if line.startswith("+") and not line.startswith("+++")]
            total += len(new)
        return total


# ------------------------------------------------------------------------------ the tree


def check_tree(tree: Path) -> None:
    tasks = tree / "lmms_eval" / "tasks"
    if not (tasks / "__init__.py").is_file() or not (tree / "lmms_eval" / "llm_judge").is_dir():
        raise UpstreamError(f"{tree} is not an lmms-eval 0.7.x tree (no lmms_eval/tasks/__init__.py or lmms_eval/llm_judge/): "
                            "pass the folder holding lmms_eval/ (the base of `--build-base`, a git clone or an unpacked sdist)")


# ------------------------------------------------------------------------------ the base a PR targets

# What the base takes from the release: its package code and build settings (the rest is the repository's).
FROM_RELEASE = ("lmms_eval", "pyproject.toml", "setup.py")
BASE_FILES = (".pre-commit-config.yaml", "test/conftest.py", ".github/pull_request_template.md")


def is_base(tree: Path) -> bool:
    """A tree with the repository's test rules, pre-commit configuration and PR template (not a bare sdist)."""
    return all((Path(tree) / name).is_file() for name in BASE_FILES)


def base_label(tree: Path) -> str:
    """What the tree is, for the descriptions: the base's provenance (its commit message) or the sdist's version."""
    tree = Path(tree)
    if (tree / ".git").exists():
        return git(["log", "-1", "--format=%s"], tree).strip()
    info = tree / "PKG-INFO"
    version = re.search(r"^Version: (\S+)", info.read_text(encoding="utf-8"), re.M) if info.is_file() else None
    return f"the lmms-eval {version.group(1)} release" if version else f"the lmms-eval tree {tree.name}"


def _release_folder(release: Path, scratch: Path) -> Path:
    """The unpacked release: `release` itself, or the sdist `release` (.tar.gz) unpacked into `scratch`."""
    import tarfile

    if release.is_dir():
        return release
    with tarfile.open(release) as archive:
        archive.extractall(scratch, filter="data")  # keeps the files' dates: they say when the release was built
    [folder] = [path for path in scratch.iterdir() if path.is_dir()]
    return folder


def build_base(repository: Path, out: Path, release: Path | None = None, rev: str = "HEAD") -> Path:
    """The tree a PR targets, in `out` (a new folder): lmms-eval's repository at `rev` (a clone or a bare
    git directory; its test/, docs/, pre-commit configuration and PR template) with, given `release` (an
    sdist .tar.gz or its unpacked folder), the release's package code and build settings (`FROM_RELEASE`)
    in place of the repository's. The release must be the newer: its files are dated after the commit.
    Files of the repository the sdist does not ship (the web UI's sources) stay. `out` is a git repository
    with one commit, so patches apply with `git apply` and pre-commit runs there."""
    out = Path(out)
    if out.exists():
        raise UpstreamError(f"{out} exists: --build-base writes a new folder")
    sha, date, stamp = git(["-C", str(repository), "log", "-1", "--format=%H %cs %ct", rev], Path.cwd()).split()
    out.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repository), "archive", "--format=tar", sha], capture_output=True)
    if archive.returncode != 0:
        raise UpstreamError(f"git archive {sha} of {repository} failed: {archive.stderr.decode(errors='replace')[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    label = f"lmms-eval {sha[:12]} ({date})"
    if release is not None:
        with tempfile.TemporaryDirectory() as scratch:
            folder = _release_folder(Path(release), Path(scratch))
            info = (folder / "PKG-INFO").read_text(encoding="utf-8") if (folder / "PKG-INFO").is_file() else ""
            version = next(iter(re.findall(r"^Version: (\S+)", info, re.M)), folder.name)
            built = max(path.stat().st_mtime for path in (folder / "lmms_eval").rglob("*.py"))
            if built < int(stamp):
                raise UpstreamError(f"the release {version} (files of {time.strftime('%Y-%m-%d', time.gmtime(built))}) is older than the repository's "
                                    f"commit {sha[:12]} ({date}): build the base from the repository alone (no --release)")
            for name in FROM_RELEASE:
                source = folder / name
                if source.is_dir():
                    shutil.copytree(source, out / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                elif source.is_file():
                    shutil.copyfile(source, out / name)
        label += f" with the {version} release's {', '.join(FROM_RELEASE)}"
    git(["init", "-q"], out)
    git(["add", "-A", "--force"], out)  # the release's data files the repository's .gitignore names too
    git(["commit", "-q", "-m", label], out)
    check_tree(out)
    return out


# ------------------------------------------------------------------------------ the base's pre-commit hooks

# pre-commit hooks run here from a venv holding the configuration's exact versions from PyPI (pre-commit
# itself would clone each hook's repository): hook id -> its PyPI package, run as `python -m <package>`.
HOOKS = {"black": "black", "isort": "isort"}


@dataclass(frozen=True)
class Hook:
    name: str
    version: str
    args: tuple[str, ...]


def precommit_hooks(tree: Path) -> list[Hook]:
    """The tree's pre-commit hooks, in the configuration's order ([] without a configuration)."""
    import yaml

    config = Path(tree) / ".pre-commit-config.yaml"
    if not config.is_file():
        return []
    hooks = []
    for repo in yaml.safe_load(config.read_text(encoding="utf-8")).get("repos", []):
        for hook in repo.get("hooks", []):
            if hook["id"] not in HOOKS:
                raise UpstreamError(f"{config}: hook {hook['id']!r} of {repo.get('repo')} is not one this tool runs ({sorted(HOOKS)}): add it to HOOKS")
            hooks.append(Hook(hook["id"], str(repo["rev"]).lstrip("v"), tuple(str(arg) for arg in hook.get("args", []))))
    return hooks


def hooks_python(hooks: list[Hook]) -> Path:
    """A venv with exactly the hooks' versions (made once, kept in the user's cache)."""
    import os

    pins = [f"{HOOKS[hook.name]}=={hook.version}" for hook in hooks]
    folder = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "lmms_vr_upstream" / "hooks" / "_".join(sorted(pins))
    python = folder / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, capture_output=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins], capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise UpstreamError(f"pip install {' '.join(pins)} (the pre-commit hooks' versions) failed: {proc.stderr[-1500:]}")
    return python


def run_hooks(hooks: list[Hook], files: dict[str, bytes], tree: Path) -> dict[str, bytes]:
    """`files` as the hooks leave them, run in the configuration's order in a scratch copy laid out like
    the tree: its pyproject.toml beside, and its packages' `__init__.py` on the files' paths and
    `lmms_eval/`'s (isort places an import by what it finds there: `lmms_eval` is first-party)."""
    python, tree = hooks_python(hooks), Path(tree)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        layout = {"pyproject.toml", "lmms_eval/__init__.py"} | {f"{folder.as_posix()}/__init__.py" for path in files for folder in Path(path).parents[:-1]}
        for name in sorted(layout - set(files)):
            if (tree / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tree / name, root / name)
        for path, content in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content)
        for hook in hooks:
            proc = subprocess.run([str(python), "-m", HOOKS[hook.name], *hook.args, *files], cwd=root, capture_output=True, text=True)
            if proc.returncode != 0:  # a file it cannot parse, not one it rewrote
                raise UpstreamError(f"{hook.name} {hook.version} failed: {(proc.stdout + proc.stderr).strip()[-1500:]}")
        return {path: (root / path).read_bytes() for path in files}


def _changed_lines(before: bytes, after: bytes) -> Counter:
    old, new = before.decode("utf-8").splitlines(), after.decode("utf-8").splitlines()
    return Counter(line[1:] for line in difflib.unified_diff(old, new, lineterm="", n=0) if line.startswith("-") and not line.startswith("---"))


def hook_report(pr: "PullRequest", tree: Path) -> str:
    """'' when the tree's pre-commit hooks change nothing the PR wrote, else the lines they would rewrite.
    A file the PR modifies is judged by the lines the hooks would rewrite in it that they would not
    rewrite in the tree's own version (the release's code is formatted by other rules than the
    repository's hooks: its unrelated lines are not the PR's to change)."""
    hooks = precommit_hooks(tree)
    python = {path: content for path, content in pr.changes.items() if content is not None and path.endswith(".py")}
    if not hooks or not python:
        return ""
    fixed = run_hooks(hooks, python, tree)
    base = {path: pr.base[path] for path in python if path in pr.base}
    fixed_base = run_hooks(hooks, base, tree) if base else {}
    problems = []
    for path, content in python.items():
        new = _changed_lines(content, fixed[path]) - (_changed_lines(base[path], fixed_base[path]) if path in base else Counter())
        if new:
            problems.append(f"{path}: {', '.join(sorted(hook.name for hook in hooks))} would rewrite: " + " | ".join(sorted(new)[:5]))
    return "\n".join(problems)


def package_dir(name: str) -> Path:
    """The clone's folder of `lmms_video_reasoning.<name>`."""
    folder = REPO / name.replace(".", "/")
    if not (folder / "__init__.py").is_file():
        raise UpstreamError(f"{PACKAGE}.{name} is not a package of {REPO}")
    return folder


# ------------------------------------------------------------------------------ a benchmark's folder


def benchmark_folders() -> list[str]:
    """The benchmarks (folder names, registry order) that have an lmms-eval task folder to contribute."""
    from lmms_video_reasoning.utils.core import registry

    folders = [benchmark.package.rsplit(".", 1)[1] for benchmark in registry.benchmarks()]
    return [folder for folder in folders if (BENCHMARK_FILES / folder / SPEC_FILE).is_file()]


def module_file(name: str) -> Path | None:
    """The clone's source of one of our modules (`lmms_video_reasoning.x.y`), None for a package or a non-module."""
    if not name.startswith(PACKAGE + "."):
        return None
    path = (REPO / name[len(PACKAGE) + 1:].replace(".", "/")).with_suffix(".py")
    return path if path.is_file() else None


def imports_of(source: str) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every import statement, function-level ones included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
    return found


def our_modules(source: str) -> set[str]:
    """The modules of ours a source imports (`from pkg import module` counts the module)."""
    modules = set()
    for module, names, _line in imports_of(source):
        if not module.startswith(PACKAGE + "."):
            continue
        if module_file(module) is not None:
            modules.add(module)
        for name in names:
            if module_file(f"{module}.{name}") is not None:
                modules.add(f"{module}.{name}")
    return modules


def closure(start: Path, benchmark: str) -> dict[str, Path]:
    """{module: file} of every module of ours `start` needs, checked to be exportable."""
    found: dict[str, Path] = {}
    todo = [(name, start.name) for name in our_modules(start.read_text(encoding="utf-8"))]
    while todo:
        name, needed_by = todo.pop()
        if name in found:
            continue
        relative = name[len(PACKAGE) + 1:]
        parts = relative.split(".")
        own = parts[0] == benchmark and len(parts) == 2 and parts[1] not in PLUGIN_ONLY
        if not own and relative not in EXPORTABLE:
            raise UpstreamError(f"{needed_by} imports {relative}, which is not exported to lmms-eval (plugin infrastructure or another "
                                f"benchmark): the task folder may import its benchmark's protocol modules and {sorted(EXPORTABLE)} only")
        path = module_file(name)
        found[name] = path
        source = path.read_text(encoding="utf-8")
        for module, _names, line in imports_of(source):
            top = module.split(".")[0]
            if top != PACKAGE and top not in THIRD_PARTY and top not in sys.stdlib_module_names:
                raise UpstreamError(f"{path.name}:{line} imports {module}, which lmms-eval does not install")
        todo += [(other, path.name) for other in our_modules(source)]
    basenames: dict[str, str] = {}
    for name in found:
        base = name.rsplit(".", 1)[1]
        if basenames.setdefault(base, name) != name:
            raise UpstreamError(f"{name} and {basenames[base]} would both be {base}.py in the task folder: rename one")
    return found


# ------------------------------------------------------------------------------ only what the hooks use


def _defined(node: ast.stmt) -> set[str]:
    """The module-level names a statement defines (a definition or an assignment); empty for others."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}


def _imported(tree: ast.Module) -> set[str]:
    """The names a module's top-level imports bind."""
    return {alias.asname or alias.name.split(".")[0] for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}


def _aliases(tree: ast.Module, modules: dict[str, Path]) -> dict[str, tuple[str, str | None]]:
    """{local name: (module, None)} for an imported module of ours, {local name: (module, name)} for a name imported from one."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{node.module}.{alias.name}" in modules:
                    found[local] = (f"{node.module}.{alias.name}", None)
                elif node.module in modules:
                    found[local] = (node.module, alias.name)
    return found


def _demands(node: ast.AST, aliases: dict[str, tuple[str, str | None]]) -> tuple[set[str], set[tuple[str, str]]]:
    """The names a statement reads: (this module's, {(other module, name)}); a function's parameter
    shadows an imported name of the same spelling inside the function."""
    local, other = set(), set()

    def visit(child: ast.AST, shadowed: frozenset[str]) -> None:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = child.args
            shadowed = shadowed | {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg) if a}
        if isinstance(child, ast.Name):
            local.add(child.id)
            target = None if child.id in shadowed else aliases.get(child.id)
            if target and target[1] is not None:
                other.add(target)
        elif (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) and child.value.id not in shadowed
              and aliases.get(child.value.id, ("", ""))[1] is None):
            other.add((aliases[child.value.id][0], child.attr))
        for grandchild in ast.iter_child_nodes(child):
            visit(grandchild, shadowed)

    visit(node, frozenset())
    return local, other


def used_parts(roots: list[Path], modules: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the module-level names of it that `roots` (the hooks, the tests) reach}: every statement of
    the roots, then, transitively, the definitions those statements read (statements that define nothing,
    such as a module's docstring or an `if`, are always kept)."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules.items()}
    aliases = {name: _aliases(tree, modules) for name, tree in trees.items()}
    kept: dict[str, set[str]] = {name: set() for name in modules}
    todo: list[tuple[str, ast.stmt, dict]] = []  # (the module, "" for a root; a statement to keep; its aliases)
    for root in roots:
        tree = ast.parse(root.read_text(encoding="utf-8"))
        root_aliases = _aliases(tree, modules)
        todo += [("", node, root_aliases) for node in tree.body]
    for name, tree in trees.items():
        todo += [(name, node, aliases[name]) for node in tree.body if not _defined(node) and not isinstance(node, (ast.Import, ast.ImportFrom))]
    definitions = {name: [(node, _defined(node)) for node in tree.body] for name, tree in trees.items()}
    imported = {name: _imported(tree) for name, tree in trees.items()}
    while todo:
        module, node, names = todo.pop()
        local, other = _demands(node, names)
        wanted = {(module, name) for name in local} if module else set()
        for target, name in wanted | other:
            if name in kept[target]:
                continue
            matches = [definition for definition, defines in definitions[target] if name in defines]
            if not matches and target != module and name in imported[target]:  # a name it imports, read through it
                kept[target] |= {name}  # `shaken` checks the import stays
                source = aliases[target].get(name)
                if source and source[1] is not None:
                    todo.append((source[0], ast.Expr(ast.Name(source[1], ast.Load())), aliases[source[0]]))
            if matches:
                kept[target] |= {name}
                todo += [(target, definition, aliases[target]) for definition in matches]
    return kept


def shaken(source: str, keep: set[str]) -> str:
    """`source` without its module-level definitions outside `keep` (and the comment lines just above
    each), and the imports only those used (ruff's F401 fix); every other line is the source's."""
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for node in ast.parse(source).body:
        defines = _defined(node)
        if not defines or defines & keep:
            continue
        first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])]) - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1
        drop.update(range(first, node.end_lineno))
    text = re.sub(r"\n{3,}(?=\S)", "\n\n\n", "".join(line for number, line in enumerate(lines) if number not in drop))
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--fix-only", "--select", "F401", "--quiet", "--stdin-filename", "module.py", "-"],
                          input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UpstreamError(f"ruff could not remove the unused imports of a module cut to {sorted(keep)}: {proc.stderr[-500:]}")
    lost = (keep & _imported(ast.parse(source))) - _imported(ast.parse(proc.stdout))
    if lost:  # a name other modules read through this one, unused in it
        raise UpstreamError(f"the cut module no longer imports {sorted(lost)}, which other modules read through it: import them from where they are defined")
    return proc.stdout


def rewrite_imports(source: str, folder: str, shared: frozenset[str] = frozenset()) -> str:
    """`lmms_video_reasoning.<...>.<module>` -> `lmms_eval.tasks.<folder>.<module>` (a module of `shared`:
    `SHARED_PACKAGE.<module>`); a package -> the folder."""
    target = f"lmms_eval.tasks.{folder}"

    def package(match: re.Match) -> str:  # `from <package> import a, b`: the modules' new home
        package, names = match.group(1), re.findall(r"\w+", match.group(2))
        homes = {SHARED_PACKAGE if f"{package}.{name}" in shared else target for name in names if module_file(f"{package}.{name}")}
        if len(homes) > 1:
            raise UpstreamError(f"`from {package} import {', '.join(names)}` imports shared and unshared modules: split the import")
        return f"from {homes.pop() if homes else target} import {match.group(2)}"

    def mapped(match: re.Match) -> str:
        name = match.group(0)
        if module_file(name) is None:
            return target
        return f"{SHARED_PACKAGE if name in shared else target}.{name.rsplit('.', 1)[1]}"

    source = re.sub(rf"from ({PACKAGE}(?:\.\w+)+) import (\([^)]*\)|[^\n]+)",
                    lambda m: package(m) if module_file(m.group(1)) is None else m.group(0), source)

    return re.sub(rf"\b{PACKAGE}(?:\.\w+)+", mapped, source)


Export = dict[str, tuple[Path, set[str]]]  # {module: (its source, the names of it exported)}


def spec_of(folder: Path) -> dict:
    return json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))


def follow_ups(benchmark: str) -> list[Path]:
    """The folders of a benchmark's follow-up PRs (`<its files>/<name>/pr.json`), in the order of their `part`,
    each building on the one before it (the first on the benchmark's first PR)."""
    return sorted((path.parent for path in (BENCHMARK_FILES / benchmark).glob(f"*/{SPEC_FILE}")), key=lambda folder: spec_of(folder)["part"])


def pr_files(benchmark: str, stage: Path | None = None) -> list[Path]:
    """The files a benchmark's PR carries: the first PR's (`stage` None) are its folder's but those a follow-up's
    spec lists (`files`: new files beside the first PR's, the YAML templates they include); a follow-up's are
    those and its own folder's (what it writes over the first PR's: a group with its task, a README section)."""
    upstream = BENCHMARK_FILES / benchmark
    if stage is None:
        claimed = {name for later in follow_ups(benchmark) for name in spec_of(later)["files"]}
        return [path for path in sorted(upstream.iterdir()) if path.is_file() and path.name not in NOT_EXPORTED | claimed]
    own = [path for path in sorted(stage.iterdir()) if path.is_file() and path.name not in NOT_EXPORTED]
    return sorted([upstream / name for name in spec_of(stage)["files"]] + own, key=lambda path: path.name)


def exported(benchmark: str, stages: tuple[Path | None, ...] = (None,)) -> Export:
    """The modules of ours a benchmark's task folder needs, each with the definitions the hooks and tests of
    its PRs `stages` (None: the first, else a follow-up's folder) reach (a module none of whose definitions
    they reach stays behind)."""
    upstream = BENCHMARK_FILES / benchmark
    hooks = [upstream / spec_of(stage or upstream)["hooks"] for stage in stages]
    modules = {name: path for hook in hooks for name, path in closure(hook, benchmark).items()}
    tests = [path for stage in stages for path in pr_files(benchmark, stage) if path.name.startswith("test_") and path.suffix == ".py"]
    kept = used_parts(hooks + tests, modules)
    reached = sorted(f"{name}.{part}" for name in modules if name[len(PACKAGE) + 1:] in NEVER_EXPORTED for part in kept[name])
    if reached:
        raise UpstreamError(f"{benchmark}: the hooks or tests reach {reached}, the suite's environment layer: read task options "
                            "(utils/core/options.py) instead")
    return {name: (path, kept[name]) for name, path in modules.items() if kept[name]}


def shared_modules(exports: dict[str, Export]) -> Export:
    """The modules two or more benchmarks export, each with every name any of them needs: they go into
    one PR of their own (`SHARED_PACKAGE`) that the benchmark PRs build on, never into two folders."""
    users = Counter(name for export in exports.values() for name in export)
    shared: Export = {}
    for export in exports.values():
        for name, (path, keep) in export.items():
            if users[name] > 1:
                shared.setdefault(name, (path, set()))[1].update(keep)
    for name, (path, _keep) in shared.items():
        alone = our_modules(path.read_text(encoding="utf-8")) - set(shared) - {f"{PACKAGE}.{cut}" for cut in NEVER_EXPORTED}
        if alone:
            raise UpstreamError(f"{name} is shared by several benchmarks but imports {sorted(alone)}, which only one exports: share it too")
    return shared


def shared_pr(shared: Export) -> PullRequest:
    """The PR of the shared modules (`shared_modules`), under `SHARED_PACKAGE`."""
    spec = json.loads((SHARED_FILES / SPEC_FILE).read_text(encoding="utf-8"))
    target = SHARED_PACKAGE.replace(".", "/")
    names = frozenset(shared)
    changes: dict[str, bytes | None] = {f"{target}/__init__.py": f'"""{spec["package_doc"]}"""\n'.encode("utf-8")}
    for name, (path, keep) in sorted(shared.items()):
        source = shaken(path.read_text(encoding="utf-8"), keep)
        changes[f"{target}/{name.rsplit('.', 1)[1]}.py"] = rewrite_imports(source, "", names).encode("utf-8")
    tests = []  # flat in test/eval/, where the host keeps the tests of code outside a task folder
    for path in sorted(SHARED_FILES.glob("test_*.py")):
        tests.append(f"test/eval/{path.name}")
        changes[tests[-1]] = rewrite_imports(path.read_text(encoding="utf-8"), "", names).encode("utf-8")
    description = (SHARED_FILES / DESCRIPTION_FILE).read_text(encoding="utf-8")
    return PullRequest(spec["number"], spec["slug"], spec["title"], "shared", changes, description, spec, tests, {})


# What a follow-up's spec takes from the first PR's: the folder and the sample benchmark its tasks run on.
INHERITED = ("folder", "documents", "id_field", "sample", "readme")  # a follow-up may set its own


def benchmark_pr(benchmark: str, tree: Path, export: Export | None = None, shared: Export | None = None, requires: list[str] | None = None,
                 stage: Path | None = None, follows: PullRequest | None = None) -> PullRequest:
    """The pull request of one benchmark (see the module doc): `export` (default: `exported(benchmark)`)
    without the `shared` modules, which its code imports from `SHARED_PACKAGE` (the PR `requires`).
    A follow-up (`stage`, its folder) builds on the benchmark's first PR `follows` (formatted): `export` is
    both's, and what the first PR already has the same is no change (`formatted` drops it)."""
    base = package_dir(benchmark)
    upstream = BENCHMARK_FILES / benchmark
    spec = spec_of(upstream) if follows is None else {**{key: follows.spec[key] for key in INHERITED if key in follows.spec}, **spec_of(stage)}
    built_on = follows.changes if follows is not None else {}
    folder = spec["folder"]
    target = f"lmms_eval/tasks/{folder}"
    changes: dict[str, bytes | None] = {}
    export, shared = export if export is not None else exported(benchmark), frozenset(shared or ())
    for name, (path, keep) in sorted(export.items()):
        if name not in shared:
            source = shaken(path.read_text(encoding="utf-8"), keep)
            changes[f"{target}/{name.rsplit('.', 1)[1]}.py"] = rewrite_imports(source, folder, shared).encode("utf-8")
    for pattern in spec.get("data_files", []):
        for path in sorted(base.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                changes[f"{target}/{path.relative_to(base).as_posix()}"] = path.read_bytes()
    tests = []
    for path in pr_files(benchmark, stage):
        content = path.read_bytes()
        if path.suffix == ".py":
            content = rewrite_imports(content.decode("utf-8"), folder, shared).encode("utf-8")
        if path.name.startswith("test_") and path.suffix == ".py":
            changes[f"test/eval/{folder}/{path.name}"] = content
            tests.append(f"test/eval/{folder}")
        elif path.name == "README.md" and spec.get("readme") == "append":
            original = built_on.get(f"{target}/README.md") or (tree / target / "README.md").read_bytes()
            changes[f"{target}/README.md"] = original.rstrip() + b"\n\n" + content
        else:
            changes[f"{target}/{path.name}"] = content
    if spec.get("new_folder_doc") and not (tree / target / "__init__.py").exists():
        changes[f"{target}/__init__.py"] = f'"""{spec["new_folder_doc"]}"""\n'.encode("utf-8")
    # Extend, never break: a benchmark PR adds files; of the tree's, it may only append to a README.
    appended = {f"{target}/README.md"} if spec.get("readme") == "append" else set()
    existing = sorted(path for path in set(changes) - appended if (tree / path).exists())
    if existing:
        raise UpstreamError(f"{benchmark}: the PR would overwrite {existing} of {tree}: give its files new names (a new task, "
                            "a new hooks module); a change to an existing task is a PR of its own")
    description = ((stage or upstream) / DESCRIPTION_FILE).read_text(encoding="utf-8")
    base = {path: built_on.get(path) or (tree / path).read_bytes() for path, content in changes.items()
            if content is not None and (path in built_on or (tree / path).is_file())}
    requires = list(dict.fromkeys([*(requires or []), *([*follows.requires, follows.name] if follows is not None else [])]))  # and theirs
    return PullRequest(spec["number"], spec["slug"], spec["title"], "benchmark", changes, description, spec, sorted(set(tests)), base, requires,
                       spec.get("part", ""))


# ------------------------------------------------------------------------------ formatting and patches


def ruff(args: list[str], config: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, "--config", str(config)], cwd=cwd, capture_output=True, text=True)


def formatted(pr: PullRequest, tree: Path) -> PullRequest:
    """The PR with its Python import-sorted and formatted by ruff under the tree's settings, then its
    new files by the tree's pre-commit hooks (black, isort) where it has them (the statements are the
    source's: only import order and layout change)."""
    python = {path: content for path, content in pr.changes.items() if content is not None and path.endswith(".py")}
    if not python:
        return pr
    config = tree / "pyproject.toml"
    if not config.is_file():
        raise UpstreamError(f"{config} is missing: lmms-eval's ruff settings are read from it")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for path, content in python.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content)
        ruff(["check", "--fix", "--select", "I", "--quiet", *python], config, root)
        ruff(["format", "--quiet", *python], config, root)
        changes = dict(pr.changes)
        changes.update({path: (root / path).read_bytes() for path in python})
    # new to the tree: a follow-up's change to its first PR's file (formatted by the hooks too) counts as new
    hooks, new = precommit_hooks(tree), {path: changes[path] for path in python if not (tree / path).is_file()}
    if hooks and new:
        changes.update(run_hooks(hooks, new, tree))
    return replace(pr, changes={path: content for path, content in changes.items() if content is None or pr.base.get(path) != content})


def lint(pr: PullRequest, tree: Path) -> str:
    """'' when the PR's Python passes the tree's own ruff check and format check and its pre-commit
    hooks (`hook_report`), else the report."""
    python = [path for path, content in pr.changes.items() if content is not None and path.endswith(".py")]
    if not python:
        return ""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for path in python:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(pr.changes[path])
        check, fmt = ruff(["check", *python], tree / "pyproject.toml", root), ruff(["format", "--check", *python], tree / "pyproject.toml", root)
    report = "" if check.returncode == 0 and fmt.returncode == 0 else (check.stdout + fmt.stdout)[-4000:]
    return (report + "\n" + hook_report(pr, tree)).strip()


def git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(["git", "-c", "user.name=lmms-vr", "-c", "user.email=lmms-vr@localhost", "-c", "core.autocrlf=false", *args],
                          cwd=cwd, capture_output=True)
    if proc.returncode != 0:
        raise UpstreamError(f"git {' '.join(args[:2])} failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout.decode("utf-8", errors="surrogateescape")


def patch_of(pr: PullRequest, tree: Path) -> str:
    """The PR as a git patch against `tree`, with the files of the PR it builds on (`pr.base`) for a follow-up."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        git(["init", "-q"], root)
        for path in pr.changes:
            if (tree / path).is_file() or path in pr.base:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
            if (tree / path).is_file():
                shutil.copy(tree / path, root / path)  # with its mode: git records it
            if path in pr.base:  # the tree's, or (a follow-up) the PR it builds on left it so
                (root / path).write_bytes(pr.base[path])
        git(["add", "-A"], root)
        git(["commit", "-q", "--allow-empty", "-m", "clean tree"], root)
        for path, content in pr.changes.items():
            if content is None:
                (root / path).unlink()
            else:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(content)
        git(["add", "-A"], root)
        return git(["diff", "--cached", "--binary", "--no-color", "--no-renames"], root)


def apply(patch: Path, tree: Path, check: bool = False) -> None:
    """`git apply` the patch to `tree` (a copy, not a repository: git applies it like `patch -p1`)."""
    proc = subprocess.run(["git", "apply", *(["--check"] if check else []), "--whitespace=nowarn", str(patch.resolve())], cwd=tree,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise UpstreamError(f"{patch.name} does not apply to {tree}: {proc.stderr.strip()[-2000:]}")


# ------------------------------------------------------------------------------ descriptions

PR_TEMPLATE = ".github/pull_request_template.md"


def template_report(description: str, template: str) -> str:
    """'' when a description follows the PR template: its sections (`## ...`) in the template's
    order, no other, within each the bullet count its comment asks ("Max 3 bullets", "1-2 bullets"),
    and a ticked box under "Type of Change"; else what differs."""
    def sections(text: str) -> dict[str, str]:
        parts = re.split(r"^## (.+)$", text, flags=re.M)
        return dict(zip(parts[1::2], parts[2::2]))

    wanted, got = sections(template), sections(description)
    problems = [] if list(got) == list(wanted) else [f"sections {list(got)}, the template's {list(wanted)}"]
    for name, body in wanted.items():
        limit = re.search(r"(?:Max (\d+)|\d+-(\d+)) bullets", body)
        bullets = len(re.findall(r"^- ", re.sub(r"<details>.*?</details>", "", got.get(name, ""), flags=re.S), re.M))
        if limit and bullets > int(limit.group(1) or limit.group(2)):
            problems.append(f"{name}: {bullets} bullets, the template asks {limit.group(0)}")
        if "- [ ]" in body and "- [x]" not in got.get(name, ""):
            problems.append(f"{name}: no box ticked")
    return "; ".join(problems)



def files_section(pr: PullRequest) -> str:
    added = sorted(p for p, c in pr.changes.items() if c is not None)
    removed = sorted(p for p, c in pr.changes.items() if c is None)
    lines = [f"- `{p}`" for p in added] + [f"- `{p}` (removed)" for p in removed]
    return "\n".join(lines)


def size_section(pr: PullRequest) -> str:
    python = pr.python_lines()
    tests = pr.python_lines(outside_tests=False) - python
    data = sum(len(c) for p, c in pr.changes.items() if c is not None and not p.endswith((".py", ".yaml", "_yaml", ".md")))
    text = f"{python} lines of Python outside tests, {tests} lines of tests"
    return text + (f", {data:,} bytes of protocol data (official prompts, frame table)." if data else ".")


def render(pr: PullRequest, result: dict | None) -> str:
    """The PR description: the template with its sections filled (`result`: the PR's validation run)."""
    import upstream_validate

    table = upstream_validate.table(pr, result) if result else upstream_validate.NOT_VALIDATED
    numbers = upstream_validate.numbers_section(pr, result)
    text = pr.description.replace("{validation}", table).replace("{numbers}", numbers)
    text = text.replace("{validation_bullets}", upstream_validate.template_validation(result))
    text = text.replace("{files}", files_section(pr)).replace("{size}", size_section(pr))
    return f"# {pr.title}\n\n{text.strip()}\n"


# ------------------------------------------------------------------------------ the series


def series(tree: Path) -> list[PullRequest]:
    """Every PR of the series, in order, formatted under the tree's ruff settings."""
    import host_prs

    tree = Path(tree).resolve()
    check_tree(tree)
    stages = {name: follow_ups(name) for name in benchmark_folders()}
    shared = shared_modules({name: exported(name, (None, *later)) for name, later in stages.items()})  # what any of its PRs needs
    common = [shared_pr(shared)] if shared else []
    requires = [pr.name for pr in common]
    prs = [formatted(pr, tree) for pr in common + host_prs.pull_requests(tree)]
    for name, later in stages.items():
        previous = formatted(benchmark_pr(name, tree, exported(name), shared, requires), tree)
        prs.append(previous)
        for index, stage in enumerate(later, 1):  # each follow-up on the PRs before it (`follows`: their files as applied)
            pr = formatted(benchmark_pr(name, tree, exported(name, (None, *later[:index])), shared, requires, stage, previous), tree)
            prs.append(pr)
            previous = replace(pr, changes={**previous.changes, **pr.changes})
    numbers = [pr.label for pr in prs]
    if len(set(numbers)) != len(numbers):
        raise UpstreamError(f"two PRs share a number: {numbers}")
    return sorted(prs, key=lambda pr: (pr.number, pr.part))


def leftovers(pr: PullRequest) -> list[str]:
    """Files of the PR that still name this package (there must be none)."""
    return [path for path, content in pr.changes.items() if content is not None and PACKAGE.encode() in content]


def write_series(tree: Path, out: Path, validation: dict | None = None, prs: list[PullRequest] | None = None) -> list[PullRequest]:
    """Write `NN-slug.patch` and `NN-slug.md` for every PR into `out`."""
    tree, out = Path(tree).resolve(), Path(out)
    prs = prs if prs is not None else series(tree)
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("[0-9][0-9]*-*.patch")) + list(out.glob("[0-9][0-9]*-*.md")):
        stale.unlink()
    for pr in prs:
        (out / f"{pr.name}.patch").write_text(patch_of(pr, tree), encoding="utf-8", newline="")
        (out / f"{pr.name}.md").write_text(render(pr, (validation or {}).get(pr.name)), encoding="utf-8")
    return prs


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python dev/upstream.py", description="this suite as a series of lmms-eval pull requests (patches + descriptions)")
    parser.add_argument("--lmms-eval", help="the tree the PRs target: the base of --build-base (or a clean lmms-eval 0.7.x sdist); it is only read")
    parser.add_argument("--out", help="the folder for NN-name.patch and NN-name.md")
    parser.add_argument("--only", help="comma-separated PR numbers or slugs: write (and validate) these PRs of the series only")
    parser.add_argument("--validate", action="store_true",
                        help="check every PR (alone, then the series) in a fresh venv without this package; the numbers go into the descriptions")
    parser.add_argument("--keep", action="store_true", help="with --validate: keep the trees, logs and runs in OUT/validation_work")
    parser.add_argument("--build-base", metavar="DIR", help="write the base a PR targets into DIR (new): --repository, with --release's package code")
    parser.add_argument("--repository", metavar="GIT[@REV]", help="with --build-base: lmms-eval's repository (a clone or a bare git directory), at REV (default HEAD)")
    parser.add_argument("--release", metavar="SDIST", help="with --build-base: the release whose package code replaces the repository's (an sdist .tar.gz or its folder)")
    args = parser.parse_args(argv)
    if args.build_base and not args.repository:
        parser.error("--build-base needs --repository")
    if not (args.lmms_eval and args.out) and (args.lmms_eval or args.out or not args.build_base):
        parser.error("give --lmms-eval and --out (and/or --build-base DIR --repository GIT [--release SDIST])")
    return args


def selected(prs: list[PullRequest], only: str | None) -> list[PullRequest]:
    """The PRs `only` names (numbers or slugs, comma-separated); all of them without it."""
    if not only:
        return prs
    wanted = {name.strip() for name in only.split(",") if name.strip()}
    chosen = [pr for pr in prs if {pr.label.lstrip("0") or "0", pr.label, pr.slug, pr.name} & wanted]
    known = {name for pr in chosen for name in (pr.label.lstrip("0") or "0", pr.label, pr.slug, pr.name)}
    if wanted - known:
        raise UpstreamError(f"--only names no PR of the series: {sorted(wanted - known)} (the series: {[pr.name for pr in prs]})")
    required = {name for pr in chosen for name in pr.requires}  # a PR is checked on what it builds on
    return [pr for pr in prs if pr in chosen or pr.name in required]


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.build_base:
            repository, _, rev = args.repository.partition("@")
            base = build_base(Path(repository), Path(args.build_base), Path(args.release) if args.release else None, rev or "HEAD")
            print(f"wrote the base into {base}: {base_label(base)}")
            if not args.lmms_eval:
                return 0
        tree, out = Path(args.lmms_eval), Path(args.out)
        prs = selected(series(tree), args.only)
        problems = {pr.name: leftovers(pr) for pr in prs if leftovers(pr)}
        if problems:
            raise UpstreamError(f"files still naming {PACKAGE}: {problems}")
        lint_report = {pr.name: lint(pr, tree.resolve()) for pr in prs}
        validation = None
        if args.validate:
            import upstream_validate

            validation = upstream_validate.validate(prs, tree.resolve(), out, keep=args.keep)
        write_series(tree, out, validation, prs)
    except UpstreamError as error:
        print(f"dev/upstream.py: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(prs)} pull requests into {out}:")
    for pr in prs:
        print(f"  {pr.name}.patch  ({pr.kind}; {pr.python_lines()} lines of Python outside tests, {len(pr.changes)} files)")
    failed = [name for name, report in lint_report.items() if report]
    for name in failed:
        print(f"warning: {name} does not pass lmms-eval's ruff settings or pre-commit hooks:\n{lint_report[name]}", file=sys.stderr)
    if validation is not None:
        bad = [name for name, result in validation.items() if not result.get("passed")]
        print("validation: " + ("every PR passed" if not bad else f"FAILED: {', '.join(bad)}") + f" (details in {out / 'validation.json'})")
        return 1 if bad or failed else 0
    return 1 if failed else 0


if __name__ == "__main__":
    # As a script this file is `__main__`; host_prs and upstream_validate import it as `upstream`.
    # Run that module's main, so one UpstreamError class is raised and caught.
    import upstream

    sys.exit(upstream.main())
