"""`python dev/upstream.py --validate`: every PR of the series checked by a real run, the numbers kept.

For each PR, alone (with the PRs it builds on, `PullRequest.requires`) on a copy of the clean tree (the base of `--build-base`, or an sdist), and
then for the whole series applied in order, in a fresh virtual environment WITHOUT this package
(`clean_venv`: the current environment's dependencies, neither this package nor lmms-eval; the
tree is imported from its folder):

1. `git apply` of the patch(es);
2. lmms-eval's own ruff settings (its `pyproject.toml`): `ruff check` and `ruff format --check`
   of the PR's Python; on a base, its pre-commit hooks (`upstream.hook_report`) and its PR
   template (`upstream.template_report`);
3. `pytest` of the tests the PR adds (and the base's own tests it names), from the tree's root,
   so its `test/conftest.py` and pytest settings apply: a test they skip fails the row;
4. `lmms-eval tasks list` lists every task and group the PR adds (and keeps upstream's);
5. a `--limit 8` run of every task the PR adds, and (benchmark PRs) a run on the whole sample
   benchmark whose numbers are compared with the plugin's own scoring of the same replies.

The runs use lmms-eval's `from_log` model, replaying the sample benchmark's predictions
(`lmms-vr sample`, written here with its synthetic videos), documents read from the sample
through a one-line YAML overlay per task (`include:` the PR's YAML, `data_files:` the sample's
annotation file: the tasks' own data source is the Hub), and one local judge server
(`judges/local_server.py`, answering from the sample's truth) reached through lmms-eval's own
judge settings (`API_TYPE=openai`, `OPENAI_API_URL`, `OPENAI_API_KEY`, `MODEL_VERSION`).
A PR that adds tasks beside upstream's (its `pr.json` names those under `before`) also runs them on
the clean tree, to compare both on the same replies. Everything lands in `SERIES/validation.json`.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOT_VALIDATED = "_Not validated: run `python dev/upstream.py --lmms-eval DIR --out SERIES --validate`._"
# this package and lmms-eval, installed or editable (`pip install -e`: its `__editable__.<name>-<version>.pth` and finder
# module; `setup.py develop`: its `.egg-link`)
VENV_EXCLUDE = re.compile(r"^(__editable__[._]+)?(lmms[-_]video[-_]reasoning|lmms[-_]eval)([-._].*)?$|^__pycache__$")
LIMIT = 8
JUDGE_MODEL = "sample-oracle"
RUN_TIMEOUT_S = 1200


# ------------------------------------------------------------------------------ environment


def clean_venv(path: Path) -> Path:
    """A venv holding the current venv's dependencies but neither this package nor lmms-eval.

    `--system-site-packages` would expose the base interpreter, not this venv, so each entry of
    this venv's site-packages except ours and lmms-eval's is symlinked into the new one: no
    copying of the ~7 GB of torch & co. (under a second), and every path stays inside the new
    venv's prefix (`dill`, which `datasets` hashes with, treats modules outside it as user code).
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    shared = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site = path / "lib" / shared.parent.name / "site-packages"
    for entry in kept_entries(shared):
        (site / entry.name).symlink_to(entry)
    ruff = Path(sys.prefix) / "bin" / "ruff"  # lmms-eval's own dependency: its binary, for `python -m ruff`
    if ruff.is_file():
        (path / "bin" / "ruff").symlink_to(ruff)
    return path / "bin" / "python"


def kept_entries(site: Path) -> list[Path]:
    """The entries of a site-packages folder the clean venv links: every one except this package's and
    lmms-eval's, and except a `.pth` file that puts either on the path (an editable install's, `easy-install.pth`)."""
    repo = str(Path(__file__).resolve().parents[1])
    kept = []
    for entry in sorted(site.iterdir()):
        if VENV_EXCLUDE.match(entry.name):
            continue
        if entry.suffix == ".pth" and re.search(rf"{re.escape(repo)}|lmms_video_reasoning|lmms_eval", entry.read_text(errors="replace")):
            continue
        kept.append(entry)
    return kept


def base_env(work: Path) -> dict[str, str]:
    """The environment of every validation process: offline, nothing of this package's settings."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(("LMMS_VR_", "OPENAI_", "DEEPSEEK_", "AZURE_", "HF_"))}
    env.pop("API_TYPE", None)
    env.pop("MODEL_VERSION", None)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", HF_HOME=str(work / "hf_home"),
               HF_DATASETS_CACHE=str(work / "hf_datasets"), LMMS_EVAL_DATASETS_CACHE=str(work / "hf_datasets"), WANDB_MODE="disabled")
    return env


def copy_tree(tree: Path, target: Path) -> Path:
    """A copy of the clean tree: all of a base (its test/ rules, pre-commit configuration; not .git),
    an sdist's lmms_eval/, pyproject.toml and other top-level files."""
    import upstream

    target.mkdir(parents=True)
    for entry in tree.iterdir():
        if entry.name != ".git" and (upstream.is_base(tree) or entry.name in ("lmms_eval", "pyproject.toml", "setup.py", "setup.cfg", "README.md", "LICENSE")):
            (shutil.copytree if entry.is_dir() else shutil.copyfile)(entry, target / entry.name)
    return target


# ------------------------------------------------------------------------------ the sample benchmark


def overlay(task: str, yaml: Path, documents: dict, root: Path, out: Path) -> Path:
    """A YAML that is `yaml` with its documents read from the sample's annotation file."""
    annotation = root / documents.get("files", {}).get(task, documents["file"])
    path = out / f"{task}.yaml"
    path.write_text(f"include: {yaml}\ndataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n    {documents['split']}: {annotation}\n",
                    encoding="utf-8")
    return path


REPLAY_SCRIPT = r'''
import json, sys
from lmms_eval import utils
from lmms_eval.tasks import TaskManager, get_task_dict
spec = json.load(open(sys.argv[1]))
predictions = {}
for line in open(spec["predictions"], encoding="utf-8"):
    row = json.loads(line)
    predictions.setdefault(row["task"], {})[str(row["id"])] = row["response"]
manager = TaskManager("ERROR", include_defaults=False)
report = {}
for entry in spec["tasks"]:
    task = get_task_dict([utils.load_yaml_config(entry["yaml"])], manager)[entry["name"]]
    docs = list(task.eval_docs)
    source = predictions.get(entry["source"], {})
    logs = [{"doc_id": i, "resps": [[source.get(str(doc[entry["id_field"]]), "")]]} for i, doc in enumerate(docs)]
    missing = sum(str(doc[entry["id_field"]]) not in source for doc in docs)
    log = {"args": {"model": "from_log", "model_args": "", "limit": None}, "model_configs": {"task": entry["name"]}, "time": "0101_0000", "logs": logs}
    json.dump(log, open(spec["out"] + "/" + entry["name"] + ".json", "w"))
    report[entry["name"]] = {"docs": len(docs), "missing": missing}
print("REPLAY " + json.dumps(report))
'''


def validation_judge(body: dict) -> str:
    """The local judge: the sample benchmark's oracle (it answers every judge prompt of the three
    benchmarks from the sample's truth, upstream's current ones included)."""
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    return sample_responder(body)


# ------------------------------------------------------------------------------ one tree


class Tree:
    """One copy of the clean tree with some patches applied, and the processes run against it."""

    def __init__(self, name: str, clean: Path, work: Path, python: Path, env: dict[str, str]) -> None:
        self.name, self.work, self.python, self.clean = name, work / name, python, clean
        self.path = copy_tree(clean, self.work / "tree")
        self.env = {**env, "PYTHONPATH": str(self.path)}
        (self.work / "logs").mkdir()

    def start(self, label: str, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[subprocess.Popen, Path]:
        log = self.work / "logs" / f"{label}.log"
        handle = log.open("w")
        proc = subprocess.Popen([str(self.python), *args], env=env or self.env, cwd=cwd or self.work, stdout=handle, stderr=subprocess.STDOUT, text=True)
        return proc, log

    def run(self, label: str, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
        proc, log = self.start(label, args, env, cwd)
        code = proc.wait(timeout=RUN_TIMEOUT_S)
        return code, log.read_text(errors="replace")


def _row(check: str, command: str, n: Any, result: str, passed: bool) -> dict:
    return {"check": check, "command": command, "n": n, "result": result, "passed": bool(passed)}


def _summary(results: dict, task: str, names: list[str]) -> str:
    values = results.get("results", {}).get(task, {})
    shown = []
    for name in names:
        value = values.get(f"{name},none")
        if value is None:
            continue
        shown.append(f"{name} {format_value(value)}")
    return ", ".join(shown)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else (f"{value:.2f}" if value != int(value) or abs(value) >= 100 else f"{value:g}")
    return str(value)


def _results_file(out: Path) -> dict:
    found = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    return json.loads(Path(max(found, key=os.path.getmtime)).read_text()) if found else {}


def check_tree(tree: Tree, prs: list, patches: dict[str, Path], sample: Path, judge_env: dict[str, str], plugin: dict | None, requests=None) -> dict:
    """Apply `prs` (in order) to `tree` and run every check; the rows of its validation table."""
    import upstream

    rows: list[dict] = []
    for pr in prs:
        try:
            upstream.apply(patches[pr.name], tree.path)
            rows.append(_row("applies", f"git apply {pr.name}.patch", len(pr.changes), f"applies to {upstream.base_label(tree.clean)}", True))
        except upstream.UpstreamError as error:
            rows.append(_row("applies", f"git apply {pr.name}.patch", len(pr.changes), str(error)[:300], False))
            return {"passed": False, "rows": rows}
    python_files = sorted({path for pr in prs for path, content in pr.changes.items() if content is not None and path.endswith(".py")})
    config = str(tree.path / "pyproject.toml")
    check = subprocess.run([str(tree.python), "-m", "ruff", "check", "--config", config, *python_files], cwd=tree.path, capture_output=True, text=True)
    fmt = subprocess.run([str(tree.python), "-m", "ruff", "format", "--check", "--config", config, *python_files], cwd=tree.path, capture_output=True, text=True)
    lint_ok = check.returncode == 0 and fmt.returncode == 0
    rows.append(_row("lint", "ruff check && ruff format --check (lmms-eval's pyproject.toml)", len(python_files),
                     "clean" if lint_ok else (check.stdout + fmt.stdout + check.stderr + fmt.stderr)[-300:], lint_ok))
    hooks = upstream.precommit_hooks(tree.clean)
    if hooks:
        report = "\n".join(filter(None, (upstream.hook_report(pr, tree.clean) for pr in prs)))
        names = ", ".join(f"{hook.name} {hook.version}" for hook in hooks)
        rows.append(_row("pre-commit", f"{names} as .pre-commit-config.yaml runs them", len(python_files),
                         "nothing to rewrite in the PR's lines" if not report else report[-300:], not report))
    # the PRs' tests, and the tree's own tests of what they change where it has them (a bare sdist has no test/)
    tests = sorted({test for pr in prs for test in pr.tests if (tree.path / test).exists()})
    template = tree.clean / upstream.PR_TEMPLATE
    if template.is_file():
        report = "; ".join(f"{pr.name}: {problem}" for pr in prs for problem in [upstream.template_report(upstream.render(pr, None), template.read_text())] if problem)
        rows.append(_row("description", f"the description's sections and bullets against {upstream.PR_TEMPLATE}", len(prs),
                         "follows the template" if not report else report[-300:], not report))
    tasks = {name: (pr, meta) for pr in prs for name, meta in task_specs(pr).items()}
    names = set(tasks) | {group for pr in prs for group in pr.spec.get("groups", [])}
    jobs = {}
    common: list[str] = []
    env = {**tree.env, **judge_env, "LMMS_EVAL_JUDGE_CACHE": str(tree.work / "judge_cache.sqlite")}
    if tests:
        jobs["pytest"] = tree.start("pytest", ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests], cwd=tree.path)
    jobs["list"] = tree.start("list", ["-m", "lmms_eval", "tasks", "list"])
    replay = None
    if tasks:
        overlays = tree.work / "overlays"
        overlays.mkdir()
        logs_dir = tree.work / "replay"
        logs_dir.mkdir()
        entries = [{"name": name, "yaml": str(overlay(name, tree.path / f"lmms_eval/tasks/{pr.spec['folder']}/{name}.yaml", pr.spec["documents"],
                                                        sample / pr.spec["sample"], overlays)),
                    "id_field": pr.spec["id_field"], "source": meta} for name, (pr, meta) in tasks.items()]
        (tree.work / "replay.json").write_text(json.dumps({"tasks": entries, "predictions": str(sample / "predictions.jsonl"), "out": str(logs_dir)}))
        (tree.work / "replay.py").write_text(REPLAY_SCRIPT)
        code, output = tree.run("replay", [str(tree.work / "replay.py"), str(tree.work / "replay.json")], env=env)
        found = re.search(r"^REPLAY (.*)$", output, re.M)
        replay = json.loads(found.group(1)) if code == 0 and found else None
        rows.append(_row("documents", "the tasks' process_docs on the sample benchmark", sum(r["docs"] for r in (replay or {}).values()),
                         "built" if replay else output[-300:], replay is not None))
        if replay is None:
            return _finish(rows, jobs)
        # a folder of YAMLs: lmms-eval 0.7.3 loads every one (several YAML paths in --tasks are reported missing)
        common = ["-m", "lmms_eval", "--model", "from_log", "--model_args", f"logs={logs_dir}", "--tasks", str(overlays), "--verbosity", "INFO"]
        jobs["limit"] = tree.start("limit", [*common, "--limit", str(LIMIT), "--output_path", str(tree.work / "out_limit")], env=env)
        if plugin is not None:
            jobs["full"] = tree.start("full", [*common, "--output_path", str(tree.work / "out_full")], env=env)
    codes = {label: proc.wait(timeout=RUN_TIMEOUT_S) for label, (proc, _log) in jobs.items()}
    logs = {label: log.read_text(errors="replace") for label, (_proc, log) in jobs.items()}
    if "pytest" in jobs:
        passed = re.search(r"(\d+) passed", logs["pytest"])
        failed = re.search(r"(\d+) (failed|error)", logs["pytest"])
        skipped = re.findall(r"^SKIPPED \[\d+\] (.*)$", logs["pytest"], re.M)  # a test the tree's conftest.py skips is a test not run
        ok = codes["pytest"] == 0 and passed is not None and not skipped
        result = f"{passed.group(1)} passed, none skipped" if ok else f"skipped: {skipped[:3]}" if skipped else (failed.group(0) if failed else logs['pytest'][-300:])
        rows.append(_row("tests", f"pytest {' '.join(tests)} (from the tree's root: its conftest.py and pytest settings)", passed.group(1) if passed else 0, result, ok))
    listed = {line.strip() for line in logs["list"].splitlines() if line.startswith("  ")}
    missing = sorted(names - listed)
    unchanged = [name for pr in prs for name in pr.spec.get("unchanged", []) if name not in listed]
    listed_ok = codes["list"] == 0 and not missing and not unchanged and len(listed) > 0
    summary = (f"{len(names)} new tasks/groups listed of {len(listed)}" if names else f"lmms-eval's {len(listed)} tasks and groups listed, as before")
    rows.append(_row("listed", "lmms-eval tasks list", len(listed), summary if listed_ok else f"missing: {missing + unchanged}", listed_ok))
    numbers = {}
    for label in ("limit", "full"):
        if label not in jobs:
            continue
        results = _results_file(tree.work / f"out_{label}")
        crashed = codes[label] != 0 or "Traceback (most recent call last)" in logs[label]
        for name, (pr, _source) in tasks.items():
            produced = results.get("results", {}).get(name, {})
            expected = metric_names(tree.path / f"lmms_eval/tasks/{pr.spec['folder']}", name)
            absent = sorted(m for m in expected if f"{m},none" not in produced)
            samples = results.get("n-samples", {}).get(name, {})
            n = samples.get("effective")
            want = min(LIMIT, samples.get("original", 0)) if label == "limit" else samples.get("original")
            ok = not crashed and not absent and n is not None and n == want
            numbers.setdefault(label, {})[name] = {k.split(",")[0]: v for k, v in produced.items() if k.endswith(",none")}
            if label == "limit":
                rows.append(_row("run", f"lmms-eval --model from_log --tasks {name} --limit {LIMIT}", n,
                                 _summary(results, name, pr.spec["headline"]) if ok else (f"no {absent}" if absent else logs[label][-300:]), ok))
        if label == "full":
            rows += compare_with_plugin(numbers.get("full", {}), plugin, tasks)
    if requests is not None and "limit" in jobs:
        rows.append(rerun_from_cache(tree, common, env, requests, numbers.get("limit", {})))
    return _finish(rows, jobs, numbers)


def rerun_from_cache(tree: Tree, common: list[str], env: dict, requests, first: dict) -> dict:
    """The `--limit 8` runs again with llm_judge's cache (`LMMS_EVAL_JUDGE_CACHE`, filled by the first
    runs): the same numbers, and not one request reaches the judge."""
    before = requests()
    code, output = tree.run("limit_cached", [*common, "--limit", str(LIMIT), "--output_path", str(tree.work / "out_cached")], env=env)
    sent = requests() - before
    results = _results_file(tree.work / "out_cached")
    again = {task: {k.split(",")[0]: v for k, v in values.items() if k.endswith(",none")} for task, values in results.get("results", {}).items()}
    same = all(_same(again.get(task, {}).get(metric), value) for task, values in first.items() for metric, value in values.items()
               if not str(metric).endswith(("_stderr", "_stderr_clt", "_stderr_clustered")))
    ok = code == 0 and sent == 0 and same and bool(first)
    result = f"{sent} judge requests, the same numbers" if ok else f"{sent} judge requests, same numbers: {same}, exit {code}"
    return _row("judge cache", f"the --limit {LIMIT} runs again with LMMS_EVAL_JUDGE_CACHE", sent, result, ok)


def _finish(rows: list[dict], jobs: dict, numbers: dict | None = None) -> dict:
    for proc, _log in jobs.values():
        if proc.poll() is None:
            proc.kill()
    return {"passed": all(row["passed"] for row in rows), "rows": rows, "numbers": numbers or {}}


def task_specs(pr) -> dict[str, str]:
    """{task: the sample task whose predictions replay it} of a benchmark PR ({} for a host PR)."""
    return dict(pr.spec.get("tasks", {})) if pr.kind == "benchmark" else {}


def metric_names(folder: Path, task: str) -> list[str]:
    """The metrics a task's YAML (and its includes) declares, read without importing its hooks."""
    names: list[str] = []
    path = folder / f"{task}.yaml"
    seen = set()
    while path is not None and path not in seen:
        seen.add(path)
        text = path.read_text(encoding="utf-8")
        if not names:
            names = re.findall(r"^\s*- metric: (\S+)", text, re.M)
        include = re.search(r"^include: (\S+)", text, re.M)
        path = folder / include.group(1) if include else None
    return names


def compare_with_plugin(upstream_numbers: dict, plugin: dict, tasks: dict) -> list[dict]:
    """One row per task the plugin also scores: the upstream form's numbers equal the plugin's."""
    rows = []
    for name, (pr, source) in tasks.items():
        theirs = plugin.get(source)
        if theirs is None or name not in pr.spec.get("equality", pr.spec["tasks"]):
            continue
        ours = upstream_numbers.get(name, {})
        differ = {m: (ours.get(m), theirs.get(m)) for m in ours if m in theirs and not _same(ours[m], theirs[m])}
        compared = [m for m in ours if m in theirs]
        rows.append(_row("equals reference", f"{name} (whole sample) vs the reference implementation's scores of {source}", len(compared),
                         "all equal" if compared and not differ else f"differ: {differ}" if differ else "nothing compared", bool(compared) and not differ))
    return rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
    return a == b


# ------------------------------------------------------------------------------ the plugin's numbers


def plugin_numbers(sample: Path, judge_url: str, work: Path) -> dict[str, dict]:
    """Every metric of every sample task as the plugin scores the sample's predictions (`lmms-vr score`)."""
    from lmms_video_reasoning.utils.tools.sample import env_for

    out = work / "plugin_scored.json"
    env = {**base_env(work), **env_for(sample), "LMMS_VR_JUDGE_BASE_URL": judge_url, "LMMS_VR_JUDGE_MODEL": JUDGE_MODEL,
           "LMMS_VR_JUDGE_API_KEY": "sk-local-validation", "LMMS_VR_JUDGE_CACHE": "off", "LMMS_VR_PREFLIGHT": "off"}
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(sample / "predictions.jsonl"), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    scored = sorted(work.glob("plugin_scored*.json")) or [out]
    if proc.returncode != 0 or not scored[0].is_file():
        raise RuntimeError(f"lmms-vr score failed: {proc.stderr[-2000:]}")
    numbers: dict[str, dict] = {}
    for path in scored:
        for task, values in json.loads(path.read_text()).get("results", {}).items():
            numbers[task] = {k.split(",")[0]: v for k, v in values.items() if k.endswith(",none")}
    return numbers


# ------------------------------------------------------------------------------ the whole validation


def validate(prs: list, tree: Path, out: Path, keep: bool = False) -> dict:
    """Validate every PR alone, then the whole series; return {name: result} (also in `out/validation.json`)."""
    from lmms_video_reasoning.judges import LocalJudgeServer
    import upstream
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample

    started = time.time()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lmms_vr_upstream_")) if not keep else out / "validation_work"
    if keep:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    patches = {}
    for pr in prs:
        patches[pr.name] = out / f"{pr.name}.patch"
        patches[pr.name].write_text(upstream.patch_of(pr, tree), encoding="utf-8", newline="")
    try:
        python = clean_venv(work / "venv")
        sample = work / "sample"
        benchmarks = any(pr.kind == "benchmark" for pr in prs)  # host PRs alone need neither the sample nor the plugin's scores
        if benchmarks:
            write_sample(sample)
        env = {**base_env(work), **(env_for(sample) if benchmarks else {})}
        probe = subprocess.run([str(python), "-c", "import lmms_video_reasoning"], env=env, capture_output=True, text=True)
        if probe.returncode == 0:
            raise RuntimeError("the validation environment can import lmms_video_reasoning; it must not")
        results: dict[str, Any] = {}
        with LocalJudgeServer(responder=validation_judge, model=JUDGE_MODEL) as server:
            judge_env = {"API_TYPE": "openai", "OPENAI_API_URL": server.base_url, "OPENAI_API_KEY": "sk-local-validation", "MODEL_VERSION": JUDGE_MODEL}
            plugin = plugin_numbers(sample, server.base_url, work) if benchmarks else {}
            for pr in prs:
                tree_copy = Tree(pr.name, tree, work, python, env)
                alone = [other for other in prs if other.name in pr.requires] + [pr]  # on what it builds on
                result = check_tree(tree_copy, alone, patches, sample, judge_env, plugin if pr.kind == "benchmark" else None)
                if pr.spec.get("before"):
                    result["before"] = before = before_numbers(pr, tree, work, python, env, sample, judge_env)
                    ran = before.get("exit_code") == 0 and all(before["numbers"].get(name) for name in pr.spec["before"]["tasks"])
                    result["rows"].append(_row("before", f"this tree's {', '.join(pr.spec['before']['tasks'])} on the whole sample (no patch)",
                                               sum(n or 0 for n in before.get("n", {}).values()), "ran: numbers below" if ran else before.get("log_tail", "")[-300:], ran))
                result["seconds"] = round(time.time() - started)
                results[pr.name] = result
            series_tree = Tree("series", tree, work, python, env)
            cache_pr = any(pr.slug == "llm-judge-cache" for pr in prs)
            results["series"] = check_tree(series_tree, prs, patches, sample, judge_env, None, (lambda: server.request_count) if cache_pr else None)
            results["series"]["judge_requests"] = server.request_count
        for result in results.values():
            result["passed"] = all(row["passed"] for row in result["rows"]) and bool(result["rows"])
        environment = {"python": sys.version.split()[0], "lmms_eval_tree": str(tree), "base": upstream.base_label(tree), "seconds": round(time.time() - started),
                       "clean_venv": "the current venv's dependencies symlinked; no lmms_video_reasoning, no lmms_eval (the tree is imported from its folder)"}
        (out / "validation.json").write_text(json.dumps({"environment": environment, "results": results}, indent=2, default=str) + "\n", encoding="utf-8")
        (out / "README.md").write_text(series_readme(prs, results, upstream.base_label(tree)), encoding="utf-8")
        return results
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def before_numbers(pr, clean: Path, work: Path, python: Path, env: dict, sample: Path, judge_env: dict) -> dict:
    """Upstream's current tasks (`spec["before"]`) on the clean tree, on the whole sample."""
    before = pr.spec["before"]
    tree = Tree(f"{pr.name}-before", clean, work, python, env)
    overlays, logs_dir = tree.work / "overlays", tree.work / "replay"
    overlays.mkdir()
    logs_dir.mkdir()
    entries = [{"name": name, "yaml": str(overlay(name, tree.path / f"lmms_eval/tasks/{pr.spec['folder']}/{name}.yaml", pr.spec["documents"], sample / pr.spec["sample"], overlays)),
                "id_field": before["id_field"], "source": source} for name, source in before["tasks"].items()]
    (tree.work / "replay.json").write_text(json.dumps({"tasks": entries, "predictions": str(sample / "predictions.jsonl"), "out": str(logs_dir)}))
    (tree.work / "replay.py").write_text(REPLAY_SCRIPT)
    run_env = {**tree.env, **judge_env}
    code, output = tree.run("replay", [str(tree.work / "replay.py"), str(tree.work / "replay.json")], env=run_env)
    if code != 0:
        return {"error": output[-1000:]}
    code, output = tree.run("full", ["-m", "lmms_eval", "--model", "from_log", "--model_args", f"logs={logs_dir}", "--tasks", str(overlays),
                                     "--output_path", str(tree.work / "out_full"), "--verbosity", "INFO"], env=run_env)
    results = _results_file(tree.work / "out_full")
    numbers = {name: {k.split(",")[0]: v for k, v in results.get("results", {}).get(name, {}).items() if k.endswith(",none")} for name in before["tasks"]}
    return {"numbers": numbers, "exit_code": code, "log_tail": output[-1000:] if code else "",
            "n": {name: results.get("n-samples", {}).get(name, {}).get("effective") for name in before["tasks"]}}


# ------------------------------------------------------------------------------ the tables


def table(pr, result: dict) -> str:
    """The validation table of a PR's description (every row from the run)."""
    lines = ["| check | command | N | result |", "|---|---|---|---|"]
    for row in result["rows"]:
        mark = "pass" if row["passed"] else "FAIL"
        lines.append(f"| {row['check']} | `{row['command']}` | {row['n']} | {mark}: {row['result']} |")
    status = "Every check passed." if result["passed"] else "**Some checks failed.**"
    return "\n".join(lines) + f"\n\n{status} Run: `python dev/upstream.py --lmms-eval DIR --out SERIES --validate` (details: `SERIES/validation.json`)."


def template_validation(result: dict | None) -> str:
    """The validation in the form of lmms-eval's PR template (at most 3 bullets, `<command>` | sample
    size: `N=<...>` | key metrics: `<...>` | result: `pass/fail`: the PR's form, tests, the rest), every
    row of the run below them, folded."""
    if not result:
        return NOT_VALIDATED
    form = ("applies", "lint", "pre-commit", "description")
    groups = [[row for row in result["rows"] if row["check"] in form], [row for row in result["rows"] if row["check"] == "tests"],
              [row for row in result["rows"] if row["check"] not in (*form, "tests")]]
    bullets = []
    for rows in filter(None, groups):
        command = " && ".join(f"`{row['command']}`" for row in rows)
        sizes = ", ".join(f"{row['check']} N={row['n']}" for row in rows)
        metrics = "; ".join(row["result"] for row in rows)
        bullets.append(f"- {command} | sample size: `{sizes}` | key metrics: `{metrics}` | result: `{'pass' if all(row['passed'] for row in rows) else 'fail'}`")
    return "\n".join(bullets) + "\n\n<details><summary>Every check of the run</summary>\n\n" + table(None, result) + "\n\n</details>"


def numbers_section(pr, result: dict | None) -> str:
    """The numbers of the whole-sample run (and, for a fix, before and after); a host PR measured
    outside the validation (`spec["numbers"]`, a benchmark of this repository) shows those."""
    if pr.spec.get("numbers"):
        return pr.spec["numbers"]
    if not result:
        return NOT_VALIDATED
    full = result.get("numbers", {}).get("full", {})
    if not full:
        return "No task of its own: the series run (`SERIES/README.md`) exercises it with every task."
    headline = pr.spec.get("headline", [])
    lines = ["| task | " + " | ".join(headline) + " |", "|---|" + "---|" * len(headline)]
    for task, values in full.items():
        lines.append(f"| `{task}` | " + " | ".join(format_value(values[m]) if m in values else "-" for m in headline) + " |")
    text = "\n".join(lines)
    before = result.get("before")
    if before and "numbers" in before:
        lines = ["", "Upstream's tasks (this PR leaves them as they are) and the new ones, the same replies and the same judge, on the whole sample:", "", "| | upstream's tasks | the new tasks (this PR) |", "|---|---|---|"]
        for label, was, now in pr.spec["before"]["rows"]:
            lines.append(f"| {label} | {_lookup(was, before['numbers'])} | {_lookup(now, full)} |")
        text += "\n" + "\n".join(lines)  # a blank line ends the table above
    return text


def _lookup(path: str, numbers: dict) -> str:
    """A value of the before/after table: `=text` as written, `task.metric`, or `mean:a.m,b.m`."""
    if path.startswith("="):
        return path[1:]
    if path.startswith("mean:"):
        values = [_value(part, numbers) for part in path[5:].split(",")]
        return format_value(sum(values) / len(values)) if all(isinstance(v, (int, float)) for v in values) else "-"
    value = _value(path, numbers)
    return format_value(value) if value is not None else "-"


def _value(path: str, numbers: dict):
    task, metric = path.split(".", 1)
    return numbers.get(task, {}).get(metric)


def series_readme(prs: list, results: dict, base: str) -> str:
    lines = ["# The series", "", f"Apply in order with `git apply NN-*.patch` from the root of {base}; each PR also applies alone (a benchmark PR on 00, which it builds on).", "",
             "| PR | kind | Python outside tests | validation |", "|---|---|---|---|"]
    for pr in prs:
        result = results.get(pr.name, {})
        lines.append(f"| [{pr.name}]({pr.name}.md) | {pr.kind} | {pr.python_lines()} lines | {'passed' if result.get('passed') else 'FAILED'} |")
    series = results.get("series")
    if series:
        lines += ["", "## The whole series applied in order", "", table(None, series), ""]
    return "\n".join(lines) + "\n"
