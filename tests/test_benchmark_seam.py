"""The seam between shared code and benchmarks: a toy fourth benchmark, one folder outside the
suite (`tests/toy_bench/`: a declared task with its generated YAML, lmms-eval hooks, a record
builder, a rule-based metric, a paper table, a report section, its data layout) plus one registration line, runs through
`python -m lmms_eval`, `lmms-vr score`, `lmms-vr report` and `lmms-vr prepare --verify-only`
with no change to shared code.

It also pins what the registry is: the only place shared code learns about benchmarks, from
explicit declarations (the `Benchmark` fields), never from file or function names.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_cli import metric, run_lmms_eval, samples_files
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.registry import Benchmark, Group, JudgeDefaults, Task
from lmms_video_reasoning.utils.tools.cli import main as cli_main

TESTS = Path(__file__).resolve().parent
TOY = "toy_bench.benchmark"  # the registration line's value: LMMS_VR_BENCHMARKS=toy_bench.benchmark
DOCS = [{"sample_id": f"q{i}", "question": f"How many dots in picture {i}?", "answer": str(i % 4)} for i in range(12)]
# 9 right, 3 wrong (q1, q5, q9 answered "0")
RESPONSES = {doc["sample_id"]: ("0" if i % 4 == 1 else doc["answer"]) for i, doc in enumerate(DOCS)}


def toy_root(folder: Path) -> Path:
    """A ToyBench data root: the annotations and one non-empty picture file per question."""
    (folder / "pictures").mkdir(parents=True)
    (folder / "annotations.json").write_text(json.dumps(DOCS))
    for doc in DOCS:
        (folder / "pictures" / f"{doc['sample_id']}.txt").write_text("• • •")
    return folder


def predictions(folder: Path) -> Path:
    path = folder / "predictions.jsonl"
    path.write_text("".join(json.dumps({"task": "toy_count", "id": sid, "response": f"{reply} dots"}) + "\n"
                            for sid, reply in RESPONSES.items()))
    return path


@pytest.fixture
def toy_benchmark(monkeypatch):
    """The toy registered as a benchmark outside the suite is: through `LMMS_VR_BENCHMARKS`
    (the registry is read afresh, as a new process reads it)."""
    monkeypatch.setenv(registry.BENCHMARKS_ENV, TOY)
    monkeypatch.setattr(registry, "_registered", functools.lru_cache(registry._registered.__wrapped__))  # read afresh
    return registry.get("toy_bench")  # monkeypatch restores the registry afterwards


def test_the_toy_is_one_folder_found_by_its_registration_line(toy_benchmark):
    assert [b.name for b in registry.benchmarks()] == ["vcr_bench", "vrbench", "cg_bench", "toy_bench"]  # built-in first: report order
    assert registry.get("toy") is toy_benchmark
    assert registry.task_dirs()[-1] == TESTS / "toy_bench" / "tasks"
    assert registry.task_names()["toy_count"] is toy_benchmark and toy_benchmark.binding == "toy_bench.benchmark"


def test_the_toys_task_yaml_is_generated_from_its_declaration(toy_benchmark):
    from lmms_video_reasoning.utils.core import task_yaml

    assert task_yaml.differences(toy_benchmark) == []


def test_a_toy_benchmark_goes_through_score_and_report(toy_benchmark, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOY_BENCH_ROOT", str(toy_root(tmp_path / "toy_root")))
    results = tmp_path / "toy_results.json"
    assert cli_main(["score", str(predictions(tmp_path)), "--out", str(results)]) == 0  # the lines name their task
    assert "accuracy" in capsys.readouterr().out
    scored = json.loads(results.read_text())
    assert scored["results"]["toy_count"]["accuracy,none"] == pytest.approx(75.0)
    assert scored["results"]["toy_count"]["model_failed,none"] == 0

    out = tmp_path / "report"
    assert cli_main(["report", f"toy={results}", "--out", str(out), "--bootstrap", "300"]) == 0
    data = json.loads((out / "report.json").read_text())
    assert list(data["sections"]) == ["toy_bench"]
    paper, ci = data["sections"]["toy_bench"]["tables"]
    assert paper["columns"] == ["Model", "Source", "Acc"]
    assert paper["rows"][0] == ["▶ toy", "your run · toy_count", "75.0"]
    assert paper["rows"][1] == ["Paper-Model-7B", "paper, Table 1", "61.5"]
    [row] = ci["rows"]
    low, high = (float(x) for x in re.findall(r"\d+\.\d", row[4]))
    assert low < 75.0 < high and row[5] == "12"
    markdown = (out / "report.md").read_text()
    assert "## ToyBench" in markdown and "Paper: ToyBench: Counting Dots (Nobody et al., 2026; arXiv:2601.00001)" in markdown
    assert r"(failure counts: toy\_count: model\_failed 0)" in markdown  # the failure counts the toy declares


def test_a_toy_benchmark_goes_through_prepare_verify_only(toy_benchmark, tmp_path, capsys):
    root = toy_root(tmp_path / "toy_root")
    assert cli_main(["prepare", "toy", "--root", str(root), "--verify-only"]) == 0
    assert f"export TOY_BENCH_ROOT={root}" in capsys.readouterr().out
    (root / "pictures" / "q3.txt").unlink()
    (root / "pictures" / "q4.txt").write_text("")
    assert cli_main(["prepare", "toy_bench", "--root", str(root), "--verify-only"]) == 1
    out = capsys.readouterr().out
    assert "TOY_BENCH_ROOT root" in out and "incomplete" in out
    assert cli_main(["prepare", "nope", "--root", str(root), "--verify-only"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err and "toy_bench" in err


@pytest.mark.slow
def test_a_toy_benchmark_runs_through_lmms_eval(tmp_path):
    """`python -m lmms_eval --tasks toy_count` with the replay model: the plugin indexes the task
    folder the toy declares, its hooks score it, its aggregations carry their Stderr."""
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           registry.BENCHMARKS_ENV: TOY, "TOY_BENCH_ROOT": str(toy_root(tmp_path / "toy_root"))}
    out = tmp_path / "results"
    results = run_lmms_eval("toy_count", out, model_args=f"predictions={predictions(tmp_path)}", env=env)
    assert metric(results, "toy_count", "accuracy") == pytest.approx(75.0)
    assert metric(results, "toy_count", "model_failed") == 0
    stderr = metric(results, "toy_count", "accuracy_stderr")  # the headline metric the toy declares
    assert isinstance(stderr, float) and 0 < stderr < 50
    assert metric(results, "toy_count", "model_failed_stderr") == "N/A"
    [samples] = samples_files(out, "toy_count")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 12 and rows[1]["accuracy"]["response"] == rows[1]["filtered_resps"] == "0 dots"  # the record logged
    # and the samples file scores again with `lmms-vr score`, in another process of the same registration
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(samples), "--out",
                           str(tmp_path / "rescored.json")], env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((tmp_path / "rescored.json").read_text())["results"]["toy_count"]["accuracy,none"] == pytest.approx(75.0)


def test_a_broken_registration_is_named_and_hides_no_other_task(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_registered", functools.lru_cache(registry._registered.__wrapped__))  # read afresh
    monkeypatch.setenv(registry.BENCHMARKS_ENV, "no_such_module_here:BENCHMARK")
    with pytest.raises(ValueError, match=r"LMMS_VR_BENCHMARKS entry 'no_such_module_here:BENCHMARK': cannot import"):
        registry.benchmarks()
    monkeypatch.setenv(registry.BENCHMARKS_ENV, "toy_bench.records:build_record")
    with pytest.raises(ValueError, match="is a function, not a Benchmark"):
        registry.benchmarks()
    # lmms-eval still indexes the suite's own tasks (one error line names the declaration)
    from lmms_video_reasoning.utils.lmms import plugin

    assert plugin.task_dirs() == registry.task_dirs(registry.builtin())
    monkeypatch.setattr(registry, "_registered", functools.lru_cache(registry._registered.__wrapped__))  # read afresh
    monkeypatch.delenv(registry.BENCHMARKS_ENV)
    assert [b.name for b in registry.benchmarks()] == ["vcr_bench", "vrbench", "cg_bench"]


def test_a_declaration_is_checked():
    cg = registry.get("cg_bench")
    with pytest.raises(ValueError, match="declare its task folder"):
        Benchmark(name="x", title="X", package="x", task_dirs=(), build_record=cg.build_record, scoring=cg.scoring)
    with pytest.raises(ValueError, match="declared for 'cg_bench'"):
        Benchmark(name="x", title="X", package="x", task_dirs=cg.task_dirs, build_record=cg.build_record, scoring=cg.scoring,
                  judge=cg.judge)
    missing = Benchmark(name="x", title="X", package="x", task_dirs=(Path("/nowhere/tasks"),), build_record=cg.build_record,
                        scoring=cg.scoring)
    with pytest.raises(ValueError, match="benchmark x: its task folder /nowhere/tasks does not exist"):
        registry.task_dirs([missing])
    task = Task("x_one", ("accuracy",))
    with pytest.raises(ValueError, match="benchmark x: tasks or groups declared twice: x_one"):
        Benchmark(name="x", title="X", package="x", task_dirs=cg.task_dirs, build_record=cg.build_record, scoring=cg.scoring,
                  tasks=(task, task))
    with pytest.raises(ValueError, match=r"group x_all lists undeclared tasks \['x_two'\]"):
        Benchmark(name="x", title="X", package="x", task_dirs=cg.task_dirs, build_record=cg.build_record, scoring=cg.scoring,
                  tasks=(task,), groups=(Group("x_all", ("x_one", "x_two")),))


@pytest.mark.parametrize("name", registry.BUILTIN)
def test_the_committed_task_yamls_are_generated_from_the_declarations(name):
    """`tasks/*.yaml` are the generator's output for the declared tasks: a YAML edited by hand, or
    a declaration changed without regenerating them, fails here (fix: `python -m
    lmms_video_reasoning.utils.core.task_yaml`)."""
    from lmms_video_reasoning.utils.core import task_yaml

    assert task_yaml.differences(registry.get(name)) == []


def test_the_declared_hooks_are_made_once_from_the_declaration():
    """`aggregate_<metric>` and `process_results_<task>` resolve from the declaration (lmms-eval's
    `!function`: import the module, then getattr), the same object every time."""
    import importlib

    vcr = registry.get("vcr_bench")
    binding = importlib.import_module(vcr.binding)
    assert binding.aggregate_cot_f1 is getattr(binding, "aggregate_cot_f1") and binding.aggregate_cot_f1.metric == "cot_f1"
    record = binding.process_results_vcr_direct({"sample_id": "9"}, ["B"])
    assert tuple(record) == vcr.task("vcr_direct").metrics and record["accuracy"]["score_cot"] is False
    assert binding.process_results_vcr_cot({"sample_id": "9"}, ["B"])["accuracy"]["score_cot"] is True
    for missing in ("aggregate_nope", "process_results_nope", "nope"):
        with pytest.raises(AttributeError, match=f"has no attribute '{missing}'"):
            getattr(binding, missing)
    assert not hasattr(binding, "__path__")


def test_the_registry_finds_the_suites_benchmarks_in_report_order():
    assert [b.name for b in registry.benchmarks()] == ["vcr_bench", "vrbench", "cg_bench"]
    assert registry.get("vr_bench") is registry.get("vrbench")  # the alias `lmms-vr prepare vr_bench` accepts
    with pytest.raises(ValueError, match="unknown benchmark 'nope'.*vcr_bench, vrbench .or vr_bench., cg_bench"):
        registry.get("nope")
    for benchmark in registry.benchmarks():
        assert benchmark.scoring.name == benchmark.name and benchmark.report is not None
        assert benchmark.reference_tables()["tables"], benchmark.name
        assert isinstance(benchmark.judge, JudgeDefaults) and benchmark.judge.benchmark == benchmark.name
        assert benchmark.task_dirs == (Path(registry.__file__).parents[2] / benchmark.package.split(".")[-1] / "tasks",)
        # the record builder: the task's own (CG-Bench's binds the data root's subtitles, in its binding)
        assert benchmark.build_record.__module__ in (f"{benchmark.package}.task", benchmark.binding)
        assert benchmark.build_record.__name__ == "build_record" and benchmark.sample() is not None
        assert set(benchmark.failure_counts) <= {"model_failed", "judge_failed", "parse_failed", "reasoning_truncated"}


def test_a_look_up_imports_only_the_benchmark_it_names():
    """`registry.BUILTIN` holds the start of every name each benchmark declares (and of no other's), so a
    look-up by task, group, benchmark or alias name imports that benchmark alone."""
    for benchmark in registry.builtin():
        names = [*benchmark.aliases, *registry.names_of(benchmark)]
        starts = [folder for folder, prefix in registry.BUILTIN.items() if all(name.startswith(prefix) for name in names)]
        assert starts == [benchmark.name] and not [n for n in names if registry.owner(n) is not benchmark], benchmark.name
    script = ("import sys; from lmms_video_reasoning.utils.core import registry\n"
              "assert registry.owner('vcr_cot').name == 'vcr_bench' and registry.get('vr_bench').name == 'vrbench'\n"
              "assert registry.task_dirs()[1].parent.name == 'vrbench'\n"
              "print(sorted(name.split('.')[1] for name in sys.modules if name.endswith('.benchmark')))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != registry.BENCHMARKS_ENV})
    assert proc.returncode == 0 and proc.stdout.split() == ["['vcr_bench',", "'vrbench']"], proc.stdout + proc.stderr


def test_the_suites_folders_share_one_layout():
    """Each file name has one meaning in every benchmark folder (`utils/core/registry.py`)."""
    layout = {"benchmark.py", "task.py", "docs.py", "data.py", "frames.py",
              "prompts.py", "judging.py", "scoring.py", "report.py", "sample.py", "__init__.py"}
    for benchmark in registry.builtin():
        folder = Path(registry.__file__).parents[2] / benchmark.package.split(".")[-1]
        assert {p.name for p in folder.glob("*.py")} == layout, benchmark.name


def test_judges_are_declared_not_registered_by_import():
    """Judge defaults come from the declaration (`Benchmark.judge`); no module registers one when imported."""
    from lmms_video_reasoning.judges import config

    assert not hasattr(config, "register_defaults")
    assert config.benchmark_defaults("vrbench") is registry.get("vrbench").judge
    assert config.benchmark_defaults(registry.get("cg_bench").judge).model == "gpt-4o-2024-08-06"
    with pytest.raises(ValueError, match="no judge declared for 'nope'"):
        config.benchmark_defaults("nope")


def test_aggregations_carry_their_benchmark_and_metric():
    """lmms-eval's Stderr column finds our headline metrics through the aggregation itself."""
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding
    from lmms_video_reasoning.utils.results import aggregation

    assert (cg_binding.aggregate_crr.benchmark, cg_binding.aggregate_crr.metric) == ("cg_bench", "crr")
    once = aggregation.ScoreOnce("cg_bench")
    assert once.stderr_function("crr", 100) is not None
    assert once.stderr_function("parse_failed", 100) is None  # not a headline metric
    assert once.stderr_function("crr", 0) is None
    assert not hasattr(aggregation, "find_benchmark")


SHARED = Path(__file__).resolve().parents[1]
BENCHMARK_WORDS = re.compile(r"(?<![A-Za-z0-9_])(?:vcr|vrbench|vr_bench|cg_bench|cgbench)", re.IGNORECASE)


@pytest.mark.parametrize("module", ["utils/results/report.py", "utils/results/score.py", "utils/core/registry.py",
                                    "utils/results/report_runs.py", "utils/results/report_bootstrap.py",
                                    "utils/results/report_stats.py", "utils/results/report_tables.py", "utils/results/report_plots.py",
                                    "utils/results/samples_io.py",
                                    "utils/core/records.py", "utils/core/task_yaml.py", "utils/data/prepare.py", "utils/core/roots.py", "utils/tools/sample.py",
                                    "utils/tools/demo.py", "utils/tools/cli.py", "utils/media/video.py", "utils/lmms/plugin.py",
                                    "utils/results/aggregation.py", "judges/config.py",
                                    "judges/engine.py", "judges/process_registry.py", "utils/core/ask.py", "utils/core/frame_plan.py",
                                    "dev/llm_judge_ask.py", "dev/plain_frames.py", "dev/upstream.py",
                                    "dev/upstream_validate.py", "dev/host_prs.py", "setup.py"])
def test_restructured_shared_modules_name_no_benchmark(module):
    """The shared modules this seam replaced name no benchmark (the registry only its folder map)."""
    lines = [line for line in (SHARED / module).read_text().splitlines() if BENCHMARK_WORDS.search(line)]
    if module == "utils/core/registry.py":
        assert lines == ['BUILTIN = {"vcr_bench": "vcr_", "vrbench": "vr_bench", "cg_bench": "cg_bench"}'], lines
    else:
        assert lines == [], lines
