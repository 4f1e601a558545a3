"""The wheel holds only `lmms_video_reasoning/...` (plus its metadata); the code runs on the
oldest Python `requires-python` names (static checks); the dependencies are the ones imported."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

try:
    import tomllib  # novermin - Python 3.11+, with the fallback below
except ModuleNotFoundError:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# the top-level package folders setup.py ships under the namespace: utils, judges, the benchmarks
PACKAGE_DIRS = sorted({name.split(".")[0] for name in find_packages(str(REPO), exclude=("tests", "tests.*", "benchmarks", "benchmarks.*",
                                                                                        "dev", "dev.*", "build", "build.*"))})


def test_wheel_contents(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(tmp_path.glob("lmms_video_reasoning-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    # plus the .pth that starts lmms_autoload (lmms-eval's `tasks`/`power`/`serve` see our tasks)
    assert top - dist_info == {"lmms_video_reasoning", "lmms_video_reasoning.pth"}, f"unexpected top-level entries: {sorted(top - dist_info)}"
    pth = zipfile.ZipFile(wheels[0]).read("lmms_video_reasoning.pth").decode()
    assert pth.startswith("import ") and "lmms_video_reasoning.utils.lmms.autoload" in pth
    # every sub-package, the task YAMLs and the official prompts are shipped
    for sub in ("utils", "utils/core", "utils/media", "utils/data", "utils/lmms", "utils/results", "utils/tools", "judges",
                "vcr_bench", "vrbench", "cg_bench"):
        assert f"lmms_video_reasoning/{sub}/__init__.py" in names
    for bench in ("vcr_bench", "vrbench", "cg_bench"):  # each benchmark's own task folder
        assert f"lmms_video_reasoning/{bench}/tasks/doc_source.json" in names
        assert any(n.startswith(f"lmms_video_reasoning/{bench}/tasks/") and n.endswith(".yaml") for n in names), bench
        assert any(n.startswith(f"lmms_video_reasoning/{bench}/prompts/") and n.endswith(".txt") for n in names), bench
        assert f"lmms_video_reasoning/{bench}/reference_tables.json" in names, "the papers' tables are package data"
    assert "lmms_video_reasoning/cg_bench/video_meta_info.json" in names  # the official frame table (not on the Hub)
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)
    # the upstream PR series' generator and its inputs are a development tool of the repository (dev/)
    assert not any("/upstream/" in n or "host_pr" in n or "benchmark_pr_files" in n or n.startswith("dev/") for n in names)
    assert not any(n.startswith("lmms_video_reasoning/utils/tools/upstream") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheels[0]).read(entry_points).decode()
    assert "lmms-vr = lmms_video_reasoning.utils.tools.cli:main" in text
    assert "lmms_video_reasoning = lmms_video_reasoning.utils.lmms.plugin:register" in text


# ---------------------------------------------------------------------- Python versions


def _oldest_python() -> str:
    """`3.10` from `requires-python = ">=3.10"`."""
    match = re.search(r">=\s*(3\.\d+)", PYPROJECT["project"]["requires-python"])
    assert match, PYPROJECT["project"]["requires-python"]
    return match.group(1)


STATIC_CHECK_PATHS = [*PACKAGE_DIRS, "tests", "benchmarks", "dev", "setup.py"]


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.skip(f"{name} is not installed (it is in the `test` extra: pip install '.[test]')")
    return found


def test_the_code_needs_no_python_newer_than_requires_python(tmp_path):
    """vermin: syntax, standard-library modules and members, annotations (datetime.UTC, tomllib
    without a fallback, typing.Self, except*, PEP 695, StrEnum, ...) all exist on the oldest
    Python declared. Tested on that Python only where CI runs it; this is the static check."""
    vermin, oldest = _tool("vermin"), _oldest_python()
    command = [vermin, f"--target={oldest}-", "--violations", "--eval-annotations", "--no-tips"]  # `# novermin` marks a line with a fallback
    probe = tmp_path / "probe.py"
    probe.write_text("import datetime\nSTAMP = datetime.UTC\n", encoding="utf-8")
    assert subprocess.run([*command, str(probe)], capture_output=True, text=True).returncode != 0, "vermin misses datetime.UTC"
    proc = subprocess.run([*command, *STATIC_CHECK_PATHS], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_the_syntax_is_that_of_the_oldest_python_declared(tmp_path):
    """ruff's parser reports syntax newer than the target (except*, type statements, PEP 701
    f-strings, ...): a second, independent reading of the same rule."""
    ruff, oldest = _tool("ruff"), _oldest_python()
    target = "py" + oldest.replace(".", "")
    assert PYPROJECT["tool"]["ruff"]["target-version"] == target
    command = [ruff, "check", "--no-cache", "--isolated", "--target-version", target, "--select", "E9", "--output-format", "concise"]
    probe = tmp_path / "probe.py"
    probe.write_text("try:\n    pass\nexcept* ValueError:\n    pass\n", encoding="utf-8")
    if subprocess.run([*command, str(probe)], capture_output=True, text=True).returncode == 0:
        pytest.skip("this ruff does not report version-related syntax errors (ruff >= 0.12 does)")
    proc = subprocess.run([*command, *STATIC_CHECK_PATHS], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


# ---------------------------------------------------------------------- dependencies

# Declared, but no module of the package imports them: each is needed at run time for the reason given.
NOT_IMPORTED = {
    "transformers": "the models lmms-eval runs (its lower bound: the Qwen2.5-VL classes)",
    "accelerate": "lmms-eval's models load through it",
    "decord": "the video reader the model proxies were verified with (qwen_vl_utils' backend; llava_onevision calls it)",
    "filelock": "bounded for lmms-eval's evaluator, which imports its private `filelock._api` (gone in 4.3)",
    "bpe-openai": "data only: the o200k/cl100k BPE files tiktoken reads offline (judges/tokens.py finds them without importing it)",
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    return {_canonical(re.match(r"[A-Za-z0-9._-]+", requirement).group()) for requirement in PYPROJECT["project"]["dependencies"]}


def package_imports(folders=PACKAGE_DIRS) -> dict[str, set[str]]:
    """Top-level module name -> files importing it: every absolute `import` / `from` in the
    package's folders, at any depth (function-level imports too), standard library left out."""
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "lmms_video_reasoning":
                        found.setdefault(top, set()).add(path.relative_to(REPO).as_posix())
    return found


def undeclared_imports(imports: dict[str, set[str]]) -> list[str]:
    providers, declared = importlib.metadata.packages_distributions(), _declared()
    problems = []
    for module, files in sorted(imports.items()):
        distributions = {_canonical(d) for d in providers.get(module, ())}
        if not distributions:
            problems.append(f"{module} (imported by {sorted(files)}): no installed distribution provides it")
        elif not distributions & declared:
            problems.append(f"{module} (imported by {sorted(files)}): from {sorted(distributions)}, not in pyproject dependencies")
    return problems


def test_every_third_party_import_is_a_declared_dependency():
    imports = package_imports()
    assert {"lmms_eval", "httpx", "torch", "qwen_vl_utils"} <= set(imports)  # the scan sees function-level imports
    assert undeclared_imports(imports) == []


def test_an_undeclared_import_is_caught(tmp_path, monkeypatch):
    """The check above fails on a module the package would import without declaring it."""
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("def f():\n    import pytest\n    from yaml import safe_load\n", encoding="utf-8")
    problems = undeclared_imports(package_imports(["pkg"]))
    assert len(problems) == 1 and problems[0].startswith("pytest (imported by ['pkg/mod.py'])"), problems


def test_every_declared_dependency_is_imported_or_needed_at_run_time():
    providers = importlib.metadata.packages_distributions()
    imported = {_canonical(d) for module in package_imports() for d in providers.get(module, ())}
    declared = _declared()
    unused = declared - imported - set(NOT_IMPORTED)
    assert unused == set(), f"declared but never imported (import them, drop them, or give the reason in NOT_IMPORTED): {sorted(unused)}"
    assert set(NOT_IMPORTED) <= declared, "NOT_IMPORTED names a package that is not declared"
    assert not set(NOT_IMPORTED) & imported, "NOT_IMPORTED names a package the code imports: take it out of the list"


# ---------------------------------------------------------------------- the tested set (constraints.txt)


def _newest_tool():
    """.ci/newest.py as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("newest", REPO / ".ci" / "newest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tested_set_satisfies_the_declared_ranges_and_is_installed_here():
    """constraints.txt pins every declared dependency inside pyproject.toml's range (a lock that
    the ranges exclude, e.g. filelock 4.3, would install what pip install . refuses), and CI's venv,
    installed with it, holds exactly those versions."""
    from packaging.requirements import Requirement

    newest = _newest_tool()
    pins = newest.parse_pins((REPO / "constraints.txt").read_text(encoding="utf-8"))
    requirements = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    requirements += [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"]["test"]]
    for requirement in requirements:
        name = _canonical(requirement.name)
        assert name in pins, f"{name} is declared but constraints.txt does not pin it: regenerate it (.ci/newest.py --tests --write-lock)"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"constraints.txt pins {name}=={pins[name]}, outside {requirement}"
    if (REPO / ".venv").is_dir() and Path(sys.prefix).resolve() == (REPO / ".venv").resolve():  # CI: installed with -c constraints.txt
        for name in ("lmms-eval", "torch", "transformers", "datasets", "huggingface-hub", "filelock"):
            assert importlib.metadata.version(name) == pins[name], name


def test_the_newest_releases_tool_names_the_cause_and_the_bounds():
    newest = _newest_tool()
    bounded = newest.upper_bounded()  # what --unbounded lifts: pyproject.toml's upper bounds, lmms-eval's minor series aside
    assert "filelock" in bounded and "lmms-eval" not in bounded and "torch" not in bounded, bounded
    log = ("Traceback (most recent call last):\n  File \"x.py\", line 134, in _enable_reentrant_filelocks\n"
           "    import filelock._api as _fl_api\nModuleNotFoundError: No module named 'filelock._api'\n"
           "2026-11-26 | ERROR | lmms_eval.__main__:cli_evaluate:614 - Error during evaluation\n")
    assert newest.last_line(log) == "ModuleNotFoundError: No module named 'filelock._api'"
    assert newest.last_line("one\ntwo\n") == "two"
    doctor = "[ok]  install: regular\n[OFF] lmms-eval evaluates: x\n        fix: y\n[ - ] data: z\n        fix: w\n"
    assert newest.last_line(doctor) == "[OFF] lmms-eval evaluates: x"
