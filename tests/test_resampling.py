"""The bootstrap over a benchmark's per-sample columns (`utils/results/report_bootstrap.py`) is the bootstrap
by definition: for the same seed and resample count, every resample's value is the benchmark's
metrics of that resample's records (`report_bootstrap.bootstrap_values_reference`) to 1e-9, metric
by metric, so counting units instead of copying records moves no interval, standard error or
paired difference. Checked on the sample benchmark scored in-process by `lmms-vr score` with the
sample judge over real HTTP (stored outcomes, and outcomes recomputed from the judge cache as for
an lmms-eval samples file), on CG-Bench's joined rows (acc@IoU's join per question under repeated
draws) and on paired runs. Also: the judge failure share is the run's decision, the standard error
switch, `--pairs`, the streaming samples reader, the YAML cache.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lmms_video_reasoning.utils.core.columns import point
from lmms_video_reasoning.utils.results import report, report_bootstrap, report_runs, report_tables
from lmms_video_reasoning.utils.results import aggregation, samples_io, score
from lmms_video_reasoning.utils.core.roots import DataError
from score_report_support import environment, sample_judge

RUNS = {"vcr": ("vcr_cot",), "vr": ("vr_bench",), "cg": ("cg_bench_mcq", "cg_bench_open", "cg_bench_blind"),
        "cg_long": ("cg_bench_long",), "cg_clue": ("cg_bench_clue",), "cg_grounding": ("cg_bench_grounding",)}
TASKS = [("vcr", "vcr_cot"), ("vr", "vr_bench"), ("cg", "cg_bench_mcq"), ("cg", "cg_bench_open"), ("cg", "cg_bench_blind")]


def moved(predictions: Path, task: str, out: Path, shift: int) -> Path:
    """Another model: every third reply of `task` replaced by the reply `shift` questions later."""
    rows = [json.loads(line) for line in predictions.read_text().splitlines() if line.strip()]
    of_task = [i for i, row in enumerate(rows) if row.get("task") == task]
    changed = [dict(row) for row in rows]
    for k, index in enumerate(of_task):
        if k % 3 == 0:
            changed[index]["response"] = rows[of_task[(k + shift) % len(of_task)]]["response"]
    out.write_text("".join(json.dumps(row) + "\n" for row in changed))
    return out


def score_predictions(predictions: Path, tasks, out: Path) -> Path:
    scores = [score.score_task(task, gathered.records, str(predictions)) for task in tasks
              for gathered in samples_io.gather_records(predictions, task)[0]]
    score.write_results(out, scores, str(predictions))
    return out


@pytest.fixture(scope="module")
def runs(sample_dir, sample_env, tmp_path_factory):
    """`lmms-vr score` results of the sample's replies and of changed replies, per group of tasks."""
    out = tmp_path_factory.mktemp("resampling")
    predictions = sample_dir / "predictions.jsonl"
    cache = out / "judge.sqlite"
    with sample_judge(cache, sample_env):
        files = {name: score_predictions(predictions, tasks, out / f"{name}.json") for name, tasks in RUNS.items()}
        for name, tasks in (("vcr", RUNS["vcr"]), ("vr", RUNS["vr"]), ("cg", RUNS["cg"])):
            changed = predictions
            for task in tasks:
                changed = moved(changed, task, out / f"{name}_{task}_moved.jsonl", shift=2)
            files[f"{name}_moved"] = score_predictions(changed, tasks, out / f"{name}_moved.json")
    return SimpleNamespace(dir=out, files=files, env=sample_env, cache=cache)


def loaded(runs, name: str, task: str, stored: bool = True) -> report_bootstrap.Sampled:
    """The task's per-sample data as the report loads it: outcomes stored by `lmms-vr score`, or
    (stored=False) recomputed with verdicts from the run's judge cache, as for lmms-eval's files."""
    path = samples_io.samples_path(runs.files[name], task)
    if not stored:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row.pop(samples_io.OUTCOME_KEY)
        path = runs.dir / f"bare_{name}_samples_{task}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with environment(runs.env):  # CG-Bench's step-2 judge request holds the clue frames: rebuilt from the sample root
        sampled, reason = report_bootstrap.load_sampled(task, path, runs.files[name])
    assert sampled is not None, reason
    if not stored:  # recomputed from the judge cache: the run's own outcomes (a failed judgment stays failed)
        assert sampled.outcomes == samples_io.read_samples(samples_io.samples_path(runs.files[name], task), samples_io.task_spec(task))[2]
    return sampled


def assert_same(fast: dict, slow: dict, what: str) -> None:
    """The same metrics in the same order, each value equal to 1e-9 (NaN equals NaN)."""
    assert list(fast) == list(slow), what
    for metric, reference in slow.items():
        a, b = np.asarray(fast[metric], dtype=float), np.asarray(reference, dtype=float)
        assert a.shape == b.shape, (what, metric)
        equal = (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= 1e-9 * np.maximum(1.0, np.abs(b)))
        assert equal.all(), (what, metric, a[~equal][:5], b[~equal][:5])


def joined(parts: list[report_bootstrap.Sampled]) -> report_bootstrap.Sampled:
    """CG-Bench's joined row of a run (as `cg_bench.report.combined_row` builds it)."""
    records = [r for part in parts for r in part.records]
    outcomes = [o for part in parts for o in part.outcomes]
    return report_bootstrap.Sampled("cg_bench", records, outcomes, parts[0].settings)


# ---------------------------------------------------------------------------------- the sample benchmark


@pytest.mark.parametrize("stored", [True, False], ids=["stored_outcomes", "recomputed_outcomes"])
@pytest.mark.parametrize("name,task", TASKS)
def test_the_bootstrap_is_each_resamples_metrics(runs, name, task, stored, monkeypatch):
    sampled = loaded(runs, name, task, stored)
    assert sampled.totals is not None, "every benchmark of the suite defines its metrics over columns"
    slow = report_bootstrap.bootstrap_values_reference(sampled, 300, 7)
    with monkeypatch.context() as patch:  # the arrays never call the metric function per resample
        patch.setattr(type(sampled.bench), "metrics", lambda *args: pytest.fail("re-aggregated a resample"))
        fast = report_bootstrap.bootstrap_values(sampled, 300, 7)
    assert_same(fast, slow, task)
    assert any(np.std(v[~np.isnan(v)]) > 0 for v in fast.values() if (~np.isnan(v)).sum() > 1), "a real spread"
    intervals, reference = report_bootstrap.bootstrap_ci(sampled, 300, 7), {m: report_bootstrap.percentile_interval(v) for m, v in slow.items()}
    assert [m for m, i in intervals.items() if i is None] == [m for m, i in reference.items() if i is None]
    assert_same({m: i for m, i in intervals.items() if i}, {m: i for m, i in reference.items() if i}, f"{task} intervals")


@pytest.mark.parametrize("name,task", [("vcr", "vcr_cot"), ("vr", "vr_bench"), ("cg", "cg_bench_mcq"), ("cg", "cg_bench_open")])
def test_paired_differences_are_each_resamples_differences(runs, name, task):
    base, other = loaded(runs, name, task), loaded(runs, f"{name}_moved", task, stored=False)
    common, observed, values = report_bootstrap.paired_values(base, other, 300, 3)
    slow_observed, slow_values = report_bootstrap.paired_values_reference(base, other, common, 300, 3)
    assert_same(observed, slow_observed, f"{task} observed")
    assert_same(values, slow_values, f"{task} resampled")
    assert any(abs(v) > 0 for v in observed.values() if not math.isnan(v)), "the changed replies change the metrics"


def test_cg_joined_rows_are_each_resamples_metrics(runs):
    """Modes joined per question across tasks and files: acc@IoU keeps one pair per question however often it is drawn."""
    one_file = joined([loaded(runs, "cg", task) for task in RUNS["cg"]])
    split = joined([loaded(runs, name, RUNS[name][0], stored=False) for name in ("cg_long", "cg_clue", "cg_grounding")])
    for sampled in (one_file, split):
        fast, slow = report_bootstrap.bootstrap_values(sampled, 300, 5), report_bootstrap.bootstrap_values_reference(sampled, 300, 5)
        assert_same(fast, slow, "joined")
        assert not math.isnan(np.nanmean(fast["acc_at_iou"])) and not math.isnan(np.nanmean(fast["crr"]))
    common, observed, values = report_bootstrap.paired_values(one_file, split, 200, 9)
    slow_observed, slow_values = report_bootstrap.paired_values_reference(one_file, split, common, 200, 9)
    assert_same(observed, slow_observed, "joined observed")
    assert_same(values, slow_values, "joined resampled")


def test_standard_errors_are_the_reference_spread(runs, monkeypatch):
    """In-run standard errors (lmms-eval's Stderr column) use the same code: the reference values' spread,
    asked of the aggregation that scored the records (`ScoreOnce`), over the outcomes of that one scoring."""
    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.utils.results.aggregation import ScoreOnce

    monkeypatch.delenv(aggregation.STDERR_ENV, raising=False)
    samples = {task: loaded(runs, name, task) for name, task in TASKS}
    for benchmark in {samples_io.task_spec(task).benchmark for _name, task in TASKS}:
        monkeypatch.setattr(type(registry.get(benchmark).scoring), "outcomes", lambda *a, **k: pytest.fail("outcomes derived again"))
    with sample_judge(runs.cache, runs.env):
        for name, task in TASKS:
            sampled = samples[task]
            benchmark = samples_io.task_spec(task).benchmark
            records = samples_io.read_samples(samples_io.samples_path(runs.files[name], task), samples_io.task_spec(task))[0]
            once = ScoreOnce(benchmark)
            slow = report_bootstrap.bootstrap_values_reference(sampled, 300, 0)
            headline = [m for m in report_runs.spec_of(benchmark).headline if m in slow and not math.isnan(sampled.metrics()[m])]
            assert headline, task
            for metric in report_runs.spec_of(benchmark).headline:
                aggregate = once.aggregation(metric)
                aggregate(records)
                stderr = aggregate.stderr_for(300)(records)
                if metric not in headline:
                    assert stderr == "N/A", (task, metric)
                    continue
                finite = [v for v in slow[metric] if not math.isnan(v)]
                assert stderr == pytest.approx(float(np.std(finite, ddof=1)), rel=1e-9, abs=1e-12), (task, metric)


# ---------------------------------------------------------------------------------- the judge failure share


def failed_judgments(sampled: report_bootstrap.Sampled, every: int) -> report_bootstrap.Sampled:
    """The run with every `every`-th sample's judgment failed (as each benchmark records a failure)."""
    outcomes = [dict(o) for o in sampled.outcomes]
    for outcome in outcomes[::every]:
        if sampled.benchmark == "vcr_bench":
            outcome.update(correct=None, errors=["answer: judge job failed"])
        elif sampled.benchmark == "vrbench":
            outcome.update(process=None, judge_failed=True)
        elif outcome["mode"] == "open":
            outcome.update(value=None, judge_error="no verdict after retries")
    return report_bootstrap.Sampled(sampled.benchmark, sampled.records, outcomes, sampled.settings)


@pytest.mark.parametrize("share", ["0.0", "1.0"])
def test_the_failure_share_is_the_runs_decision_never_a_resamples(runs, monkeypatch, share):
    """Past the share (0: any failed judgment) the run's judged metrics are not computed; a resample
    never decides it (one failure drawn twice must not cross the share): its values stay defined."""
    monkeypatch.setenv("LMMS_VR_JUDGE_FAILED_SHARE", share)
    for (name, task), judged in ((("vcr", "vcr_cot"), "accuracy"), (("vr", "vr_bench"), "process_score"), (("cg", "cg_bench_open"), "oe_acc")):
        sampled = failed_judgments(loaded(runs, name, task), every=3)
        metrics = sampled.metrics()
        assert metrics["judge_failed"] > 0 and math.isnan(metrics[judged]) == (share == "0.0"), (task, metrics)
        values = report_bootstrap.bootstrap_values(sampled, 50, 0)[judged]
        assert not np.isnan(values).all(), task


def test_a_benchmark_without_arrays_gets_the_reference(runs, monkeypatch):
    sampled = loaded(runs, "vr", "vr_bench")
    columns = type(sampled.bench).columns  # its metrics computed without offering the columns to the report
    monkeypatch.setattr(type(sampled.bench), "metrics", lambda self, records, outcomes, settings: point(columns(self, records, outcomes, settings)))
    monkeypatch.setattr(type(sampled.bench), "columns", lambda self, records, outcomes, settings: None)
    fresh = report_bootstrap.Sampled(sampled.benchmark, sampled.records, sampled.outcomes, sampled.settings)
    assert fresh.totals is None
    assert report_bootstrap.bootstrap_values(fresh, 40, 1) == report_bootstrap.bootstrap_values_reference(fresh, 40, 1)


# ---------------------------------------------------------------------------------- settings and the report


def test_standard_errors_can_be_switched_off(monkeypatch, caplog):
    from lmms_video_reasoning.vrbench import benchmark as binding

    monkeypatch.setattr(aggregation, "_said", set())
    monkeypatch.delenv(aggregation.STDERR_ENV, raising=False)
    assert binding.aggregate_mcq_accuracy.stderr_for(1000) is not None
    assert binding.aggregate_judge_failed.stderr_for(1000) is None  # not a headline metric
    monkeypatch.setenv(aggregation.STDERR_ENV, "off")
    with caplog.at_level(logging.INFO, logger="lmms_video_reasoning.aggregation"):
        assert binding.aggregate_mcq_accuracy.stderr_for(1000) is None
        assert binding.aggregate_overall.stderr_for(1000) is None
    said = [r for r in caplog.records if aggregation.STDERR_ENV in r.getMessage()]
    assert len(said) == 1 and "off" in said[0].getMessage(), "said once, not per metric"
    monkeypatch.setenv(aggregation.STDERR_ENV, "maybe")
    with caplog.at_level(logging.INFO, logger="lmms_video_reasoning.aggregation"):
        assert binding.aggregate_mcq_accuracy.stderr_for(1000) is not None  # an unknown value keeps them on ...
    assert any(r.levelno == logging.ERROR and "'maybe'" in r.getMessage() for r in caplog.records)  # ... and says so


def comparison_pairs(data: dict, benchmark: str) -> tuple[set[str], list[str]]:
    [table] = [t for t in data["sections"][benchmark]["tables"] if t["title"].startswith("Paired comparisons")]
    return {row[0] for row in table["rows"]}, table["notes"]


def test_pairs_against_the_baseline_or_every_pair(runs, tmp_path):
    items = [f"a={runs.files['vr']}", f"b={runs.files['vr_moved']}", f"c={runs.files['vr']}"]
    baseline = report.build_report(items, tmp_path / "baseline", n=50, seed=0)
    pairs, notes = comparison_pairs(baseline, "vrbench")
    assert pairs == {f"{report_tables.MINE}b − a", f"{report_tables.MINE}c − a"} and baseline["pairs"] == "baseline"
    assert any("against the baseline" in note for note in notes)
    assert "against the baseline" in (tmp_path / "baseline" / "report.md").read_text()
    every = report.build_report(items, tmp_path / "all", n=50, seed=0, pairs="all")
    pairs, notes = comparison_pairs(every, "vrbench")
    assert pairs == {f"{report_tables.MINE}b − a", f"{report_tables.MINE}c − a", f"{report_tables.MINE}c − b"}
    assert any("every pair" in note for note in notes)
    with pytest.raises(DataError, match="--pairs 'some'"):
        report.build_report(items, tmp_path / "bad", n=0, pairs="some")


# ---------------------------------------------------------------------------------- the samples file, streamed


def lmms_eval_line(record: dict, doc_id: int, spec: samples_io.TaskSpec, **extra) -> dict:
    """A line as lmms-eval 0.7.3 logs it: the record under each of the task's metric names."""
    return {"doc_id": doc_id, "target": record.get("answer"), "filtered_resps": [record.get("response")], "token_counts": [3],
            "doc_hash": "0" * 64, **extra, **{metric: record for metric in spec.metrics}, "input": "the prompt"}


def test_lmms_eval_samples_lines_are_read_up_to_their_first_record(runs, tmp_path):
    spec = samples_io.task_spec("vr_bench")
    records = samples_io.read_samples(samples_io.samples_path(runs.files["vr"], "vr_bench"), spec)[0]
    lines = [json.dumps(lmms_eval_line(record, i, spec)) for i, record in enumerate(records)]
    # a nested object holding a key named like a metric comes before the real copies: never taken for the record
    decoy = lmms_eval_line(records[1], 1, spec, doc={"mcq_accuracy": {"sample_id": "decoy"}, "note": '"overall": {'})
    lines[1] = json.dumps(decoy)
    lines[2] = json.dumps(lmms_eval_line(records[2], 2, spec), separators=(",", ":"))  # another writer's separators
    path = tmp_path / "run_samples_vr_bench.jsonl"
    path.write_text("\n".join(lines) + "\n" + lines[3] + "\n" + json.dumps(dict(reversed(list(json.loads(lines[4]).items())))) + "\n")
    read, coverage, outcomes = samples_io.read_samples(path, spec)
    assert read == records and outcomes is None
    assert coverage.samples == len(records) + 2 and coverage.duplicates_dropped == 2  # verbatim, and the same row reordered
    changed = json.loads(lines[5])
    changed["overall"] = {**changed["overall"], "response": "another reply"}
    path.write_text("\n".join(lines) + "\n" + json.dumps(changed) + "\n")
    with pytest.raises(DataError, match="doc_id 5 appears twice with different content"):
        samples_io.read_samples(path, spec)
    path.write_text("\n".join(lines) + "\n" + lines[6][: len(lines[6]) // 2 + 7] + "\n")
    with pytest.raises(DataError, match=rf"{path.name}:{len(lines) + 1}: not valid JSON"):
        samples_io.read_samples(path, spec)
    path.write_text("[1, 2]\n")
    with pytest.raises(DataError, match="expected a JSON object"):
        samples_io.read_samples(path, spec)


def test_the_report_keeps_only_what_the_metrics_read(runs):
    for name, task in TASKS:
        sampled = loaded(runs, name, task, stored=False)
        full = samples_io.read_samples(samples_io.samples_path(runs.files[name], task), samples_io.task_spec(task))[0]
        assert all(len(json.dumps(slim)) < len(json.dumps(record)) / 2 for slim, record in zip(sampled.records, full)), task
        assert "response" not in sampled.records[0] and "question" not in sampled.records[0]
        whole = report_bootstrap.Sampled(sampled.benchmark, full, sampled.outcomes, sampled.settings)
        assert_same(sampled.metrics(), whole.metrics(), f"{task}: slim records, same metrics")
