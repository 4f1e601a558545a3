"""The seam between shared code and benchmarks: a toy fourth benchmark, defined only in this
test (documents, a rule-based metric, a paper table, a report section, its data layout) and
registered at test time, goes through `lmms-vr score`, `lmms-vr report` and
`lmms-vr prepare --verify-only` with no change to shared code.

It also pins what the registry is: the only place shared code learns about benchmarks.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.results import report
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from lmms_video_reasoning.utils.core.roots import DataSource, read_json
from lmms_video_reasoning.utils.core.registry import Benchmark, ReportSpec, ScoringAdapter

PACKAGE = "toy_bench_seam"  # an in-memory package: nothing of it exists on disk or in the suite
DOCS = [{"sample_id": f"q{i}", "question": f"How many dots in picture {i}?", "answer": str(i % 4)} for i in range(12)]
# 9 right, 3 wrong (q1, q5, q9 answered "0")
RESPONSES = {doc["sample_id"]: ("0" if i % 4 == 1 else doc["answer"]) for i, doc in enumerate(DOCS)}
PAPER_TABLES = {
    "paper": {"title": "ToyBench: Counting Dots", "authors": "Nobody et al.", "year": 2026, "arxiv": "2601.00001"},
    "tables": {"table1": {"number": 1, "title": "Table 1: counting accuracy", "task": "toy_count", "columns": ["accuracy"],
                          "rows": [{"model": "Paper-Model-7B", "group": None, "values": [61.5]}]}},
}


def toy_hooks() -> types.ModuleType:
    """The toy benchmark's lmms-eval hooks (what a benchmark folder's hooks.py holds)."""
    hooks = types.ModuleType(f"{PACKAGE}.hooks")

    def process_docs(_dataset=None):
        return [dict(doc) for doc in DOCS]

    def process_results(doc, results):
        return {"accuracy": {"sample_id": doc["sample_id"], "answer": doc["answer"], "response": results[0]}}

    hooks.process_docs, hooks.process_results = process_docs, process_results
    return hooks


def toy_data() -> types.ModuleType:
    """The toy benchmark's data module (what a benchmark folder's data.py holds for `lmms-vr prepare`):
    `annotations.json` lists the pictures; each `pictures/<id>.txt` must be present and non-empty."""
    data = types.ModuleType(f"{PACKAGE}.data")
    data.SOURCE = DataSource("toy_bench", "nobody/toy-bench", "TOY_BENCH_ROOT")
    data.HUB_ANNOTATIONS, data.HUB_MEDIA_PATTERNS = ["annotations.json"], ["pictures.zip"]
    data.extraction_target = lambda archive, member: member

    def records_at(root, split="mini"):
        return read_json(Path(root) / "annotations.json")

    def media_kinds(root, records):
        paths = {f"pictures/{r['sample_id']}.txt": Path(root) / "pictures" / f"{r['sample_id']}.txt" for r in records}
        items = {label: (lambda path=path: path if path.is_file() else None) for label, path in paths.items()}
        problem = lambda path: None if path.stat().st_size else "empty file"  # noqa: E731
        return [media_index.MediaKind("pictures", True, items, problem, "error: the question cannot run", "error: the question cannot run")]

    data.records_at, data.media_kinds = records_at, media_kinds
    return data


def correct(record: dict) -> bool:
    """The rule-based metric: the first number of the reply equals the answer."""
    found = re.search(r"\d+", record["response"])
    return bool(found) and found.group(0) == record["answer"]


class ToyScoring(ScoringAdapter):
    name = judge_name = "toy_bench"

    def score(self, records, settings):
        return {"accuracy": 100.0 * sum(map(correct, records)) / len(records)}

    def needs_judge(self, records):
        return False

    def outcomes(self, records, settings, judge=None):
        return [{"correct": correct(record)} for record in records]

    def metrics(self, records, outcomes, settings):
        return {"accuracy": 100.0 * sum(o["correct"] for o in outcomes) / len(outcomes)} if outcomes else {"accuracy": float("nan")}


def toy_section(runs, stats, out, n, seed):
    present = [(run, "toy_count") for run in runs if (run.label, "toy_count") in stats]
    if not present:
        return None
    section = report.Section("toy_bench")
    rows = [report.run_row(run.label, task, [report.value_of(stats[(run.label, task)], "accuracy")], "toy_bench", ["accuracy"])
            for run, task in present]
    section.tables.append(report.paper_table("toy_bench", "table1", rows))
    section.tables.append(report.ci_table("toy_bench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    return section


@pytest.fixture
def toy_benchmark(tmp_path, monkeypatch):
    package = types.ModuleType(PACKAGE)
    package.__path__ = []
    monkeypatch.setitem(sys.modules, PACKAGE, package)
    monkeypatch.setitem(sys.modules, f"{PACKAGE}.hooks", toy_hooks())
    monkeypatch.setitem(sys.modules, f"{PACKAGE}.data", toy_data())
    tasks = tmp_path / "toy_tasks"
    tasks.mkdir()
    (tasks / "toy_count.yaml").write_text(
        "task: toy_count\n"
        f"process_docs: !function {PACKAGE}.hooks.process_docs\n"
        f"process_results: !function {PACKAGE}.hooks.process_results\n"
        "doc_to_target: answer\n"
        "metric_list:\n  - metric: accuracy\n")
    benchmark = Benchmark(name="toy_bench", title="ToyBench", package=PACKAGE, scoring=ToyScoring(),
                          report=ReportSpec(section=toy_section, headline=("accuracy",), labels={"accuracy": "Acc"}),
                          reference=PAPER_TABLES, task_dirs=(tasks,), data_module=f"{PACKAGE}.data", aliases=("toy",))
    registry.register(benchmark)
    yield benchmark
    registry.unregister("toy_bench")


def test_a_toy_benchmark_goes_through_score_and_report(toy_benchmark, tmp_path, capsys):
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"task": "toy_count", "id": sid, "response": f"{reply} dots"}) + "\n"
                                   for sid, reply in RESPONSES.items()))
    results = tmp_path / "toy_results.json"
    assert cli_main(["score", str(predictions), "--task", "toy_count", "--out", str(results)]) == 0
    assert "accuracy" in capsys.readouterr().out
    scored = json.loads(results.read_text())
    assert scored["results"]["toy_count"]["accuracy,none"] == pytest.approx(75.0)

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


def test_a_toy_benchmark_goes_through_prepare_verify_only(toy_benchmark, tmp_path, capsys):
    root = tmp_path / "toy_root"
    (root / "pictures").mkdir(parents=True)
    (root / "annotations.json").write_text(json.dumps(DOCS))
    for doc in DOCS:
        (root / "pictures" / f"{doc['sample_id']}.txt").write_text("• • •")
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


def test_the_registry_finds_the_suites_benchmarks_in_report_order():
    assert registry.names() == ["vcr_bench", "vrbench", "cg_bench"]
    assert registry.get("vr_bench") is registry.get("vrbench")  # the alias `lmms-vr prepare vr_bench` accepts
    with pytest.raises(ValueError, match="unknown benchmark 'nope'.*vcr_bench, vrbench, cg_bench"):
        registry.get("nope")
    for benchmark in registry.benchmarks():
        assert benchmark.scoring.name == benchmark.name and benchmark.report is not None
        assert benchmark.reference_tables()["tables"], benchmark.name


SHARED = Path(__file__).resolve().parents[1]
BENCHMARK_WORDS = re.compile(r"vcr|vrbench|vr_bench|cg_bench|cgbench", re.IGNORECASE)


@pytest.mark.parametrize("module", ["utils/results/report.py", "utils/results/score.py", "utils/core/registry.py",
                                    "utils/data/prepare.py", "utils/core/roots.py", "utils/tools/sample.py", "utils/tools/demo.py", "utils/tools/cli.py",
                                    "utils/media/video.py", "judges/config.py", "judges/engine.py", "judges/bind.py", "utils/core/ask.py",
                                    "utils/lmms/llm_judge_ask.py", "utils/media/plain_frames.py", "utils/tools/upstream.py",
                                    "utils/tools/upstream_validate.py", "utils/tools/host_prs.py"])
def test_restructured_shared_modules_name_no_benchmark(module):
    """The shared modules this seam replaced name no benchmark (the registry only its folder list)."""
    lines = [line for line in (SHARED / module).read_text().splitlines() if BENCHMARK_WORDS.search(line)]
    if module == "utils/core/registry.py":
        assert lines == ['BUILTIN = ("vcr_bench", "vrbench", "cg_bench")'], lines
    else:
        assert lines == [], lines
