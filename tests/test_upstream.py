"""`lmms-vr upstream`: the suite written into an lmms-eval checkout as a pull-request-ready change.

The fast tests write into a minimal checkout (the 0.7.x layout with upstream's look-alike
folders). The slow test is the real check: lmms-eval 0.7.3's sdist from PyPI, the change
applied, installed into a virtual environment WITHOUT this package, then lmms-eval's own CLI
lists the tasks, the exported tests pass under pytest, and a `--limit 8` run of every task
with lmms-eval's built-in `dummy` model and the local test judge produces every metric.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from lmms_video_reasoning.utils.tools import upstream

PACKAGE = "lmms_video_reasoning"


def fake_checkout(root: Path) -> Path:
    """The parts of an lmms-eval 0.7.x tree the command reads, with upstream's own VRBench port."""
    tasks = root / "lmms_eval" / "tasks"
    (tasks / "_task_utils").mkdir(parents=True)
    (tasks / "__init__.py").write_text("")
    (tasks / "vrbench").mkdir()
    (tasks / "vrbench" / "vrbench_mcq.yaml").write_text("task: vrbench_mcq\ndoc_to_text: !function utils.doc_to_text\n")
    (tasks / "vrbench" / "vrbench_group.yaml").write_text("group: vrbench\ntask:\n  - vrbench_mcq\n")
    (tasks / "vcrbench").mkdir()
    (tasks / "vcrbench" / "vcrbench.yaml").write_text("task: vcrbench\n")
    (root / "pyproject.toml").write_text('[tool.ruff]\nline-length = 240\n\n[tool.ruff.lint]\nselect = ["E4", "E7", "E9", "F", "I"]\n\n'
                                        '[tool.ruff.lint.isort]\nknown-first-party = ["lmms_eval"]\n')
    return root


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    checkout = fake_checkout(tmp_path_factory.mktemp("lmms_eval_checkout"))
    result = upstream.write_change(checkout)
    return checkout, result


def test_one_folder_per_benchmark_with_readme_template_tasks_and_groups(written):
    checkout, result = written
    folders = result["folders"]
    assert len(folders) >= 3
    for folder in folders:
        target = checkout / "lmms_eval" / "tasks" / folder.target
        assert (target / "README.md").is_file() and (target / "_default_template_yaml").is_file()
        readme = (target / "README.md").read_text()
        assert "Frame budgets" in readme and "Relation to upstream tasks" in readme
        for name in folder.tasks:
            config = yaml.load((target / f"{name}.yaml").read_text(), Loader=upstream._Loader)
            assert config["task"] == name and config["include"] == "_default_template_yaml"
        for name in folder.groups:
            assert yaml.safe_load((target / f"{name}.yaml").read_text())["group"] == name
        assert not list(target.glob("_*.yaml")), "a template named *.yaml is indexed (and rejected) as a task by lmms-eval"


def test_function_paths_are_relative_to_the_folder_and_all_resolve(written):
    checkout, result = written
    for folder in result["folders"]:
        target = checkout / "lmms_eval" / "tasks" / folder.target
        exported = set(ast.literal_eval(re.search(r"__all__ = (\[.*?\])", (target / "utils.py").read_text(), re.S).group(1)))
        refs = set()
        for path in [*target.glob("*.yaml"), target / "_default_template_yaml"]:
            refs |= set(re.findall(r"!function (\S+)", path.read_text()))
        assert refs and all(ref.startswith("utils.") for ref in refs), refs
        assert {ref.split(".", 1)[1] for ref in refs} <= exported
        # every re-exported hook exists in the module utils.py imports it from (as written)
        for module, names in re.findall(r"^from (\S+) import \(?([^)]*?)\)?$", (target / "utils.py").read_text(), re.M | re.S):
            source = checkout.joinpath(*module.split(".")).with_suffix(".py").read_text()
            for name in re.findall(r"\w+", names):
                assert re.search(rf"^(def {name}\b|{name} = )", source, re.M), (module, name)


def test_exported_python_is_the_plugin_code_with_imports_rewritten(written):
    """No second copy: each exported module is its source module, statement for statement."""
    checkout, result = written
    mapping = upstream.Mapping(result["folders"])
    modules = upstream.export_modules(result["folders"])
    assert any(name.endswith(".hooks") for name in modules) and f"{PACKAGE}.utils.results.aggregation" in modules
    assert f"{PACKAGE}.utils.tools.cli" not in modules and f"{PACKAGE}.utils.lmms.plugin" not in modules  # plugin tooling stays out

    class DropImports(ast.NodeTransformer):  # isort regroups imports, at module level and in functions
        def visit_Import(self, node):
            return None

        visit_ImportFrom = visit_Import

    def body(tree):
        tree = DropImports().visit(tree)
        for node in ast.walk(tree):  # ruff format re-indents and trims docstrings
            first = getattr(node, "body", None)
            if isinstance(first, list) and first and isinstance(first[0], ast.Expr) and isinstance(getattr(first[0], "value", None), ast.Constant) \
                    and isinstance(first[0].value.value, str):
                first[0].value.value = " ".join(first[0].value.value.split())
        return ast.dump(tree)

    for name, source in modules.items():
        target = mapping.file(checkout, name, source)
        exported = ast.parse(target.read_text())
        expected = ast.parse(mapping.rewrite(source.read_text()))
        assert body(exported) == body(expected), f"{target} differs from {source}"
        for node in ast.walk(exported):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.startswith(PACKAGE) for n in names), (target, names)


def test_exported_python_passes_upstream_ruff_settings(written):
    checkout, result = written
    assert result["lint"] == "", result["lint"]
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    python = [str(p) for p in result["written"] if p.suffix == ".py"]
    check = subprocess.run([ruff, "check", "--config", str(checkout / "pyproject.toml"), *python], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:]
    fmt = subprocess.run([ruff, "format", "--check", "--config", str(checkout / "pyproject.toml"), *python], capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout[-3000:]


def test_tests_docs_and_pr_description(written):
    checkout, result = written
    for folder in result["folders"]:
        test = checkout / "test" / "eval" / folder.target / f"test_{folder.target}.py"
        source = test.read_text()
        assert all(f'"{name}"' in source for name in folder.tasks)
        assert PACKAGE not in source and "requests" not in source
    docs = (checkout / "docs" / "advanced" / "current_tasks.md").read_text()
    for folder in result["folders"]:
        assert f"lmms_eval/tasks/{folder.target}" in docs
    description = result["description"]
    for heading in ("## Summary", "## In scope", "## Out of scope", "## Validation", "## Risk"):
        assert heading in description
    assert "| command | N | metrics | pass/fail |" in description
    assert "`cgbench`" in description and "`vrbench`" in description and "`vcrbench`" in description
    # look-alike names are reported: ours `vr_bench_mcq` vs upstream `vrbench_mcq`
    assert any("vr_bench_mcq" in note and "vrbench_mcq" in note for note in result["notes"])


def test_rerun_replaces_rather_than_duplicates(written, tmp_path):
    checkout, result = written
    again = upstream.write_change(checkout)
    docs = (checkout / "docs" / "advanced" / "current_tasks.md").read_text()
    assert docs.count("<!-- lmms-video-reasoning: start -->") == 1
    assert sorted(map(str, again["written"])) == sorted(map(str, result["written"]))


def test_names_colliding_with_upstream_are_refused(tmp_path):
    checkout = fake_checkout(tmp_path / "a")
    (checkout / "lmms_eval" / "tasks" / "other").mkdir()
    (checkout / "lmms_eval" / "tasks" / "other" / "x.yaml").write_text("task: vcr_cot\n")
    with pytest.raises(upstream.UpstreamError, match="'vcr_cot' is already an lmms-eval task"):
        upstream.write_change(checkout)
    checkout = fake_checkout(tmp_path / "b")
    (checkout / "lmms_eval" / "tasks" / "VCR-COT-Bench").mkdir()
    with pytest.raises(upstream.UpstreamError, match="task folder 'vcr_cot_bench' looks like upstream's"):
        upstream.write_change(checkout)


def test_not_a_checkout_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "upstream", "--lmms-eval", str(tmp_path),
                           "--pr-out", str(tmp_path / "pr.md")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "not an lmms-eval 0.7.x checkout" in proc.stderr and "unpacked sdist" in proc.stderr


# --------------------------------------------------------------------------- the real check

VENV_EXCLUDE = re.compile(r"^(lmms_video_reasoning|lmms_eval)([-.].*)?$|^__pycache__$")


def clean_venv(path: Path) -> Path:
    """A venv holding the shared venv's dependencies but neither this package nor lmms-eval.

    `--system-site-packages` would expose the base interpreter, not our venv, so each entry
    of the shared site-packages except ours and lmms-eval's is symlinked into the new one:
    no copying of the ~7 GB of torch & co. (under a second), and every path stays inside the
    venv's prefix (`dill`, which `datasets` hashes with, treats modules outside it as user
    code and fails to pickle pyarrow's types).
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    shared = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site = path / "lib" / shared.parent.name / "site-packages"
    for entry in shared.iterdir():
        if not VENV_EXCLUDE.match(entry.name):
            (site / entry.name).symlink_to(entry)
    return path / "bin" / "python"


def _start(cmd: list[str], env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_change_verified_in_a_clean_lmms_eval_073(tmp_path):
    from lmms_video_reasoning.judges import LocalJudgeServer
    from lmms_video_reasoning.utils.tools.demo import sample_responder
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample

    started = time.time()

    def stage(name: str) -> None:
        print(f"[{time.time() - started:5.0f} s] {name}")

    # the sdist download overlaps with the clean venv and the sample benchmark (data only, written from this side)
    download = subprocess.Popen([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "lmms-eval==0.7.3",
                                 "-d", str(tmp_path / "sdist")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    python = clean_venv(tmp_path / "venv")
    write_sample(tmp_path / "sample")
    stage("clean venv and sample benchmark written")
    assert download.wait(timeout=600) == 0, download.stdout.read()[-3000:]
    [sdist] = (tmp_path / "sdist").glob("lmms_eval-0.7.3.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    tree = tmp_path / "lmms_eval-0.7.3"
    stage("sdist downloaded and unpacked")
    assert not (tree / "test").exists() and not (tree / "docs").exists()
    pr = tmp_path / "pr.md"
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "upstream", "--lmms-eval", str(tree), "--pr-out", str(pr)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ruff reports problems" not in proc.stderr, proc.stderr
    folders = upstream.discover()
    tasks = [name for folder in folders for name in folder.tasks]
    names = tasks + [name for folder in folders for name in folder.groups]
    stage("change written")

    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", str(tree)], check=True, capture_output=True, timeout=600)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith(("LMMS_VR_", "OPENAI_", "DEEPSEEK_"))}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    probe = subprocess.run([str(python), "-c", "import lmms_video_reasoning"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode != 0 and "No module named 'lmms_video_reasoning'" in probe.stderr
    lmms_eval_cli = str(python.parent / "lmms-eval")
    stage("patched lmms-eval installed in a clean venv")

    run_env = {**env, **env_for(tmp_path / "sample"), "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    with LocalJudgeServer(responder=sample_responder, model="sample-oracle") as server:
        run_env["LMMS_VR_JUDGE_BASE_URL"] = server.base_url
        out = tmp_path / "results"
        jobs = {  # concurrently: each spends most of its time indexing lmms-eval's 300+ task folders
            "list": _start([lmms_eval_cli, "tasks", "list", "--verbosity", "DEBUG"], env, tmp_path, tmp_path / "list.log"),
            "pytest": _start([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tree / "test" / "eval")], env, tmp_path,
                             tmp_path / "pytest.log"),
            "run": _start([lmms_eval_cli, "--model", "dummy", "--tasks", ",".join(tasks), "--limit", "8", "--output_path", str(out),
                           "--verbosity", "DEBUG"], run_env, tmp_path, tmp_path / "run.log"),
        }
        codes = {}
        for name, job in jobs.items():
            codes[name] = job.wait(timeout=900)
            stage(f"{name} finished")
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in jobs}

    validation = {}
    listed = {line.strip() for line in logs["list"].splitlines() if line.startswith("  ")}
    assert codes["list"] == 0 and set(names) <= listed, (sorted(set(names) - listed), logs["list"][-2000:])
    validation["lmms-eval --tasks list"] = {"passed": True, "n": str(len(names))}
    assert codes["pytest"] == 0, logs["pytest"][-5000:]
    passed = re.search(r"(\d+) passed", logs["pytest"])
    validation["pytest test/eval"] = {"passed": True, "n": passed.group(1)}
    assert codes["run"] == 0 and "Traceback (most recent call last)" not in logs["run"], logs["run"][-6000:]
    results = json.loads(Path(max(glob.glob(str(out / "**" / "*_results.json"), recursive=True), key=os.path.getmtime)).read_text())
    assert server.request_count > 0  # the judged tasks reached the local judge
    for folder in folders:
        for name, config in folder.tasks.items():
            produced = results["results"].get(name, {})
            expected = {m["metric"] for m in config["metric_list"]}
            missing = {m for m in expected if f"{m},none" not in produced}
            assert not missing, f"{name}: no {sorted(missing)} in {sorted(produced)}"
            assert results["n-samples"][name]["effective"] == min(8, results["n-samples"][name]["original"])
            validation[f"lmms-eval --model dummy --tasks {name} --limit 8"] = {"passed": True, "n": str(results["n-samples"][name]["effective"])}

    # the PR description's validation table, filled from this run
    (tmp_path / "validation.json").write_text(json.dumps(validation))
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "upstream", "--lmms-eval", str(tree), "--pr-out", str(pr),
                           "--validation", str(tmp_path / "validation.json")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = [line for line in pr.read_text().splitlines() if line.startswith("| `")]
    assert table and all(line.endswith("| pass |") for line in table), table
    print(f"clean-environment verification took {time.time() - started:.0f} s")
