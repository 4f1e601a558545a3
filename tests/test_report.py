"""`lmms-vr report`: tables beside the papers' rows, bootstrap CIs, paired comparisons, CG joins, plots.

The runs are the sample benchmark's replay predictions scored in-process by `lmms-vr score`
(`utils/results/score.py`) with the sample judge over real HTTP; the slow test file runs lmms-eval itself.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from bench_scoring import score_records
from lmms_video_reasoning.utils.results import report, report_bootstrap, report_plots, report_runs, report_stats, report_tables
from lmms_video_reasoning.utils.results import samples_io, score
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from score_report_support import sample_judge, score_predictions

RUNS = {
    "vcr": ("vcr_cot",),
    "vr": ("vr_bench",),
    "cg": ("cg_bench_mcq", "cg_bench_open", "cg_bench_blind"),
    "cg_long": ("cg_bench_long",),
    "cg_clue": ("cg_bench_clue",),
    "cg_grounding": ("cg_bench_grounding",),
}
SECTION_OF = {"vcr": "vcr_bench", "vr": "vrbench", "cg": "cg_bench"}
TITLE_OF = {"vcr": "VCR-Bench", "vr": "VRBench", "cg": "CG-Bench"}


def worse_predictions(predictions: Path, task: str, out: Path, flipped: int) -> Path:
    """A copy of the replay predictions where the first `flipped` answers of `task` name another letter."""
    rows = [json.loads(line) for line in predictions.read_text().splitlines() if line.strip()]
    changed = 0
    for row in rows:
        if row.get("task") == task and changed < flipped:
            match = re.search(r"<Answer>\s*([A-E])", row["response"])
            if match:
                wrong = "A" if match.group(1) != "A" else "B"
                row["response"] = row["response"][: match.start(1)] + wrong + row["response"][match.end(1):]
                changed += 1
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return out


@pytest.fixture(scope="module")
def scored(sample_dir, sample_env, tmp_path_factory):
    """Results + samples files written by `lmms-vr score` for each group of tasks in RUNS."""
    out = tmp_path_factory.mktemp("scored")
    predictions = sample_dir / "predictions.jsonl"
    with sample_judge(out / "judge.sqlite", sample_env):
        files = {name: out / f"{name}.json" for name in RUNS}
        results = {name: score_predictions(predictions, tasks, files[name]) for name, tasks in RUNS.items()}
        worse = worse_predictions(predictions, "vr_bench", out / "worse.jsonl", flipped=12)
        files["vr_worse"] = out / "vr_worse.json"
        results["vr_worse"] = score_predictions(worse, ("vr_bench",), files["vr_worse"])
    return SimpleNamespace(dir=out, files=files, results=results, env=sample_env)


def value(results: dict, task: str, metric: str) -> float:
    return results["results"][task][f"{metric},none"]


def user_rows(table: dict) -> list[list[str]]:
    return [row for row in table["rows"] if row[0].startswith(report_tables.MINE)]


# ---------------------------------------------------------------------------------- rendering


@pytest.mark.parametrize("name", ["vcr", "vr", "cg"])
def test_report_renders_each_benchmark_alone(scored, tmp_path, name):
    data = report.build_report([str(scored.files[name])], tmp_path, n=200, seed=0)
    assert set(data["sections"]) == {SECTION_OF[name]}
    markdown = (tmp_path / "report.md").read_text()
    assert f"## {TITLE_OF[name]}" in markdown
    assert all(f"## {title}" not in markdown for other, title in TITLE_OF.items() if other != name)
    assert re.search(r"\| \*\*▶ " + re.escape(name) + r"\*\* \| your run", markdown), "the user's row is marked"
    assert re.search(r"\| [^|]+ \| paper, Table \d", markdown), "paper rows carry their source"
    assert "Paper rows: " in markdown and "arXiv:" in markdown and "shared/seeds/" not in markdown
    figures = data["sections"][SECTION_OF[name]]["figures"]
    assert figures, "every benchmark has plots"
    for figure in figures:
        with Image.open(tmp_path / figure) as image:
            assert image.format == "PNG" and image.width >= 600 and image.height >= 350
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(figures)
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page  # self-contained
    # failure counts are shown with the run, never hidden in a score
    counts = {"vcr": "judge_failed", "vr": "judge_failed", "cg": "parse_failed"}[name]
    assert re.search(r"failure counts: .*" + re.escape(report_tables.md_text(counts)) + r" \d", markdown), markdown[:800]
    assert "model\\_failed 0" in markdown and "model_failed 0" in page and "failure counts:" in page
    assert "reasoning\\_truncated 0" in markdown  # a thinking model's cut-off replies are shown too


def test_report_tables_hold_the_scored_values(scored, tmp_path):
    data = report.build_report([f"m={scored.files['vcr']}", f"m={scored.files['vr']}", f"m={scored.files['cg']}"], tmp_path, n=0)
    assert list(data["runs"]) == ["m"], "same label, disjoint tasks: one run"
    vcr_table2 = data["sections"]["vcr_bench"]["tables"][0]
    [row] = user_rows(vcr_table2)
    assert row[-1] == report_tables.fmt(value(scored.results["vcr"], "vcr_cot", "cot_f1"))
    assert row[vcr_table2["columns"].index("Perc. Rec")] == report_tables.fmt(value(scored.results["vcr"], "vcr_cot", "perception_recall"))
    vr_table = data["sections"]["vrbench"]["tables"][0]
    [row] = user_rows(vr_table)
    assert row[2:5] == [report_tables.fmt(value(scored.results["vr"], "vr_bench", m), 2) for m in ("overall", "mcq_accuracy", "process_score")]
    assert any(r[0].startswith("Gemini-2.0-Pro") and r[2] == "76.61" for r in vr_table["rows"])
    cg_table = data["sections"]["cg_bench"]["tables"][0]
    rows = user_rows(cg_table)
    assert rows[0][2:4] == [report_tables.fmt(value(scored.results["cg"], "cg_bench_mcq", m)) for m in ("clue_acc", "long_acc")]
    assert rows[0][8] == report_tables.fmt(value(scored.results["cg"], "cg_bench_open", "oe_acc"))
    assert rows[1][0].endswith("(blind)") and rows[1][2] == report_tables.fmt(value(scored.results["cg"], "cg_bench_blind", "blind_acc"))
    assert any(r[0].startswith("GPT-4o-08-06") and r[2:9] == ["58.3", "45.2", "5.62", "8.30", "4.38", "77.5", "39.5"] for r in cg_table["rows"])


def test_cg_crr_and_acc_at_iou_joined_across_files(scored, tmp_path):
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding, scoring as cg_scoring

    files = [f"m={scored.files[name]}" for name in ("cg_long", "cg_clue", "cg_grounding")]
    data = report.build_report(files, tmp_path, n=100, seed=0)
    joined = data["sections"]["cg_bench"]["joined"]["m|mini"]
    long_acc = value(scored.results["cg_long"], "cg_bench_long", "long_acc")
    clue_acc = value(scored.results["cg_clue"], "cg_bench_clue", "clue_acc")
    assert joined["crr"] == pytest.approx(cg_scoring.crr(long_acc, clue_acc))
    records = [record for name in ("cg_long", "cg_clue", "cg_grounding")
               for record in samples_io.read_samples(samples_io.samples_path(scored.files[name], RUNS[name][0]), samples_io.task_spec(RUNS[name][0]))[0]]
    expected = score_records(cg_binding, records, {"strict": False, "judge": False})["acc_at_iou"]
    assert not math.isnan(expected)
    assert joined["acc_at_iou"] == pytest.approx(expected)
    [row] = user_rows(data["sections"]["cg_bench"]["tables"][0])
    assert row[6] == report_tables.fmt(expected, 2)


def sample_counts(sample_dir: Path) -> dict:
    """What the generated sample holds, read from its own annotation files (not from the code under test)."""
    vcr = json.loads((sample_dir / "vcr_bench" / "v1" / "videos" / "meta_info_video.json").read_text())
    vr = [json.loads(line) for line in (sample_dir / "vrbench" / "VRBench_eval.jsonl").read_text().splitlines() if line.strip()]
    cg = json.loads((sample_dir / "cg_bench" / "cgbench_mini.json").read_text())
    return {"vcr_questions": len({row["id"] for row in vcr}), "vr_videos": len({row["video_id"] for row in vr}),
            "vr_questions": sum(len(row["mcq"]) for row in vr), "cg_questions": len({row["qid"] for row in cg}),
            "cg_by_domain": Counter(row["domain"] for row in cg)}


def test_counts_are_the_samples_questions_and_videos(scored, sample_dir, tmp_path):
    """The CI tables count questions (VRBench: and, in their own column, the videos the bootstrap
    resamples); CG-Bench's breakdowns count each group's questions, and its answers (one per
    question and mode) in a column of that name, explained under the table."""
    expected = sample_counts(sample_dir)
    assert expected["vr_questions"] > expected["vr_videos"] > 1  # the sample can tell questions from videos
    data = report.build_report([f"m={scored.files[name]}" for name in ("vcr", "vr", "cg")], tmp_path, n=20, seed=0)

    def counts(benchmark: str) -> set[tuple[str, ...]]:
        table = table_of(data, benchmark, "95%")
        start, end = table["columns"].index("Questions"), table["columns"].index("Note")
        return {(*table["columns"][start:end],), *((*row[start:end],) for row in table["rows"])}

    assert counts("vcr_bench") == {("Questions",), (str(expected["vcr_questions"]),)}
    assert counts("vrbench") == {("Questions", "Videos"), (str(expected["vr_questions"]), str(expected["vr_videos"]))}
    assert counts("cg_bench") == {("Questions",), (str(expected["cg_questions"]),)}
    assert data["tasks"]["m|vr_bench"]["questions"] == expected["vr_questions"] and data["tasks"]["m|vr_bench"]["units"] == expected["vr_videos"]

    # CG-Bench's answers: every prediction of the run's CG tasks is one answer of one question
    predictions = [json.loads(line) for line in (sample_dir / "predictions.jsonl").read_text().splitlines() if line.strip()]
    answers = sum(row["task"] in RUNS["cg"] for row in predictions)
    per_question = answers // expected["cg_questions"]
    assert answers == per_question * expected["cg_questions"] and per_question > 1
    domain = table_of(data, "cg_bench", "Breakdown by domain")
    assert domain["columns"][2:4] == ["Questions", "Answers"]
    assert {row[1]: (int(row[2]), int(row[3])) for row in domain["rows"]} == {
        name: (count, count * per_question) for name, count in expected["cg_by_domain"].items()}
    assert any(f"up to {per_question} per question" in note and "one per question and mode" in note for note in domain["notes"])
    for title in ("Breakdown by duration", "Breakdown by question kind"):
        assert sum(int(row[2]) for row in table_of(data, "cg_bench", title)["rows"]) == expected["cg_questions"], title

    # a paired comparison counts what it resamples: VRBench's common videos
    paired = report.build_report([f"base={scored.files['vr']}", f"worse={scored.files['vr_worse']}"], tmp_path / "paired", n=20, seed=0)
    table = table_of(paired, "vrbench", "Paired comparisons")
    column = table["columns"].index("Common videos")
    assert {row[column] for row in table["rows"]} == {str(expected["vr_videos"])}


def test_cg_bench_plots_carry_intervals(scored, tmp_path, monkeypatch):
    """CG-Bench's plotted group values get 95% CIs as the other benchmarks' do (the bootstrap over the
    run's questions, each group's metric from its answers in every resample), drawn as error bars."""
    import matplotlib.axes

    drawn = []
    real_bar = matplotlib.axes.Axes.bar
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda self, x, height, *a, **k: drawn.append((list(height), k.get("yerr")))
                        or real_bar(self, x, height, *a, **k))
    data = report.build_report([f"m={scored.files['cg']}"], tmp_path, n=300, seed=0)
    assert len(drawn) == len(data["sections"]["cg_bench"]["figures"]) == 2
    intervals = data["sections"]["cg_bench"]["breakdown_ci"]["m"]
    for (heights, yerr), group in zip(drawn, ("duration", "domain")):
        table = table_of(data, "cg_bench", f"Breakdown by {group}")
        plotted = {row[1]: float(row[table["columns"].index("long-acc")]) for row in table["rows"]}
        keys = plot_order(group, plotted)
        assert [round(h, 1) for h in heights] == [plotted[k] for k in keys]
        assert yerr is not None, f"{group}: the bars carry error bars"
        for k, height, low, high in zip(keys, heights, *yerr):
            ci = intervals[group][k]["long_acc"]
            assert ci[0] <= height <= ci[1] and (low, high) == pytest.approx((height - ci[0], ci[1] - height)), (group, k)
        assert any(low + high > 0 for low, high in zip(*yerr)), f"{group}: real intervals"


def plot_order(group: str, plotted: dict) -> list[str]:
    """The plot's category order: duration buckets in order, domains sorted."""
    from lmms_video_reasoning.cg_bench.scoring import DURATION_BUCKETS as DURATION_ORDER

    return [b for b in DURATION_ORDER if b in plotted] if group == "duration" else sorted(plotted)


def test_group_bootstrap_is_the_groups_metric_on_each_resample(scored):
    """`bootstrap_values(where=...)`: over the arrays equal to re-aggregating each resample's records of
    the group; on the run itself equal to the benchmark's breakdown of that group."""
    import numpy as np

    from lmms_video_reasoning.cg_bench.report import BREAKDOWN_GROUPS, breakdown
    from lmms_video_reasoning.cg_bench.task import Outcome

    sampled, why = report_bootstrap.load_sampled("cg_bench_mcq", samples_io.samples_path(scored.files["cg"], "cg_bench_mcq"))
    assert sampled is not None, why
    outcomes = [Outcome(**o) for o in sampled.outcomes]
    groups = breakdown(outcomes)["domain"]
    assert len(groups) > 1
    for domain, metrics in groups.items():
        where = [BREAKDOWN_GROUPS["domain"][0](o) == domain for o in outcomes]
        within = report_bootstrap.UnitTotals(report_bootstrap.within(sampled.totals.columns, np.array(where)), sampled.unit_numbers[0], sampled.unit_count)
        whole = report_bootstrap.whole(within)
        for metric in ("long_acc", "clue_acc", "miou", "acc_at_iou"):
            assert whole[metric] == pytest.approx(metrics[metric], abs=1e-9), (domain, metric)
        fast = report_bootstrap.bootstrap_values(sampled, 60, 3, where)
        slow = report_bootstrap.bootstrap_values_reference(sampled, 60, 3, where)
        for metric in ("long_acc", "clue_acc", "miou", "acc_at_iou", "crr"):
            assert np.allclose(fast[metric], slow[metric], atol=1e-9, equal_nan=True), (domain, metric)
        assert not np.allclose(fast["long_acc"], report_bootstrap.bootstrap_values(sampled, 60, 3)["long_acc"], equal_nan=True)


# ---------------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("name,task", [("vcr", "vcr_cot"), ("vr", "vr_bench"), ("cg", "cg_bench_mcq"), ("cg", "cg_bench_open")])
def test_bootstrap_is_seeded_and_covers_the_point(scored, name, task):
    sampled, why = report_bootstrap.load_sampled(task, samples_io.samples_path(scored.files[name], task))
    assert sampled is not None, why
    point = sampled.metrics()
    for metric, expected in scored.results[name]["results"][task].items():
        if metric.endswith(",none") and isinstance(expected, (int, float)):
            assert score.same_value(point[metric[:-5]], expected), f"{metric}: pure re-aggregation equals the task's scoring"
    first = report_bootstrap.bootstrap_ci(sampled, n=300, seed=7)
    assert first == report_bootstrap.bootstrap_ci(sampled, n=300, seed=7)
    assert first != report_bootstrap.bootstrap_ci(sampled, n=300, seed=8)
    headline = [m for m in report_runs.spec_of(sampled.benchmark).headline if m in point and not math.isnan(point[m])]
    assert headline
    for metric in headline:
        low, high = first[metric]
        assert low <= point[metric] <= high, f"{metric}: {point[metric]} outside [{low}, {high}]"
        assert high - low > 0, f"{metric}: a real sample gives a real interval"


def test_percentile_interval():
    assert report_bootstrap.percentile_interval([float(v) for v in range(101)]) == pytest.approx((2.5, 97.5))
    assert report_bootstrap.percentile_interval([math.nan] * 10 + [1.0]) is None  # mostly undefined


def test_paired_comparison_of_two_runs(scored, tmp_path):
    data = report.build_report([f"base={scored.files['vr']}", f"worse={scored.files['vr_worse']}"], tmp_path, n=400, seed=0)
    [table] = [t for t in data["sections"]["vrbench"]["tables"] if t["title"].startswith("Paired comparisons")]
    rows = {row[2]: row for row in table["rows"]}
    base = value(scored.results["vr"], "vr_bench", "mcq_accuracy")
    worse = value(scored.results["vr_worse"], "vr_bench", "mcq_accuracy")
    assert worse < base
    assert rows["MCQ-O"][3] == f"{worse - base:+.2f}"
    # VRBench resamples videos (their questions are correlated): 12 of 28 answers flipped, but
    # within only the sample's 4 videos, so the interval is wide; it must hold the difference.
    low, high = (float(x) for x in re.findall(r"[-+]?\d+\.\d+", rows["MCQ-O"][4])[:2])
    assert low <= worse - base <= high and high - low > 0
    assert rows["MCQ-O"][6] in ("yes", "no (within noise)")
    units = report_bootstrap.load_sampled("vr_bench", samples_io.samples_path(scored.files["vr"], "vr_bench"))[0].units()
    assert len(units) == 4 and sum(map(len, units.values())) == 28  # 4 videos, 28 questions
    sampled, _ = report_bootstrap.load_sampled("vr_bench", samples_io.samples_path(scored.files["vr"], "vr_bench"))
    same = {d.metric: d for d in report_bootstrap.paired_difference(sampled, sampled, n=50, seed=0)}
    assert same["mcq_accuracy"].difference == 0 and same["mcq_accuracy"].interval == (0.0, 0.0)
    assert "worse − base" in (tmp_path / "report.md").read_text()


def test_results_without_samples_still_render(scored, tmp_path):
    lone = tmp_path / "lone" / "x_results.json"
    lone.parent.mkdir()
    shutil.copy(scored.files["vcr"], lone)
    data = report.build_report([str(lone)], tmp_path / "out", n=50)
    [ci] = [t for t in data["sections"]["vcr_bench"]["tables"] if t["title"].startswith("95%")]
    assert all(row[4] == "–" and "no samples file" in row[NOTE] for row in ci["rows"])


def test_report_cli_errors_name_the_problem(tmp_path, capsys):
    assert cli_main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such results file or folder" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- the page in a browser


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("headless Chromium is needed for the report page test: apt-get update && apt-get install -y chromium")


def test_html_page_opens_in_headless_chromium(scored, tmp_path):
    data = report.build_report([f"m={scored.files[name]}" for name in ("vcr", "vr", "cg")], tmp_path / "report", n=100)
    page = (tmp_path / "report" / "report.html").resolve()
    figures = sum(len(s["figures"]) for s in data["sections"].values())
    common = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(common + ["--virtual-time-budget=5000", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('data-ok="1"') == figures, "every plot decoded in the browser"
    assert dom.stdout.count("<img") == figures, "no plot was replaced by its error text"
    assert dom.stdout.count("<table>") == sum(len(s["tables"]) for s in data["sections"].values())
    shot = tmp_path / "report.png"
    taken = subprocess.run(common + ["--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    assert "Uncaught" not in taken.stderr
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "the page rendered content, not a blank screen"


# ---------------------------------------------------------------------------------- inputs (issue 14)


def lmms_eval_shaped(scored, names, folder: Path) -> Path:
    """Copies of `lmms-vr score` outputs without the stored per-sample outcomes, as lmms-eval's
    samples files hold none: the report must recompute them (judge verdicts from the cache)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        data = json.loads(scored.files[name].read_text())
        shutil.copy(scored.files[name], folder / scored.files[name].name)
        for task in data["results"]:
            source = samples_io.samples_path(scored.files[name], task)
            rows = [json.loads(line) for line in source.read_text().splitlines()]
            assert all(samples_io.OUTCOME_KEY in row for row in rows)
            for row in rows:
                row.pop(samples_io.OUTCOME_KEY)
            (folder / source.name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


NOTE = -1  # the CI table's Note cell: its last (the count columns before it depend on the benchmark's unit)


def ci_rows(data: dict, benchmark: str) -> dict[tuple[str, str], list[str]]:
    """The CI table's rows by (task, metric), a Note cell shortened to "words [k]" followed by its footnote k."""
    [table] = [t for t in data["sections"][benchmark]["tables"] if t["title"].startswith("95%")]
    notes = {int(m[1]): m[2] for m in (re.match(r"\[(\d+)\] (.*)", n, re.S) for n in table["notes"]) if m}
    assert table["columns"][NOTE] == "Note"
    rows = [list(row) for row in table["rows"]]
    for row in rows:
        assert len(row[NOTE]) <= report_tables.NOTE_WIDTH, row[NOTE]  # long explanations go under the table
        ref = re.search(r"\[(\d+)\]$", row[NOTE])
        row[NOTE] += f" {notes[int(ref[1])]}" if ref else ""
    return {(row[1], row[2]): row for row in rows}


def test_ci_from_the_judge_cache_with_no_judge_configured(scored, tmp_path, monkeypatch):
    """Every verdict is in the run's judge cache: CIs for every benchmark, no key, no request."""
    for name in ("LMMS_VR_JUDGE_BASE_URL", "LMMS_VR_JUDGE_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "LMMS_VR_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in scored.env.items():  # CG-Bench's step-2 judge request holds the clue frames
        monkeypatch.setenv(name, value)
    folder = lmms_eval_shaped(scored, ("vcr", "vr", "cg"), tmp_path / "run")
    out = tmp_path / "report"
    assert cli_main(["report", f"m={folder}", "--out", str(out), "--bootstrap", "100"]) == 0
    data = json.loads((out / "report.json").read_text())
    for key, expected in {("vcr_cot", "Avg acc"): "vcr", ("vcr_cot", "Avg F1 (CoT score)"): "vcr", ("vr_bench", "MCQ-O"): "vr",
                          ("joined CG tasks", "long-acc"): "cg", ("joined CG tasks", "OE-acc"): "cg"}.items():
        row = ci_rows(data, SECTION_OF[expected])[key]
        assert row[4].startswith("[") and row[NOTE] == "", row
    # the recomputed outcomes are the run's: same values as the scoring that called the judge
    assert data["tasks"]["m|vcr_cot"]["note"] == ""
    # the sample's VRBench run had one judge failure (a reply that never parsed): the cache serves no
    # such reply, and the recomputed outcomes reproduce the run's (judge_failed included), so that
    # miss is the run's own failed judgment: OE-P keeps its interval and the note says it counted wrong
    assert scored.results["vr"]["results"]["vr_bench"]["judge_failed,none"] == 1
    oe_p = ci_rows(data, "vrbench")[("vr_bench", "OE-P")]
    assert oe_p[4].startswith("[") and re.fullmatch(r"judge_failed 1 of \d+ counted wrong", oe_p[NOTE]), oe_p
    assert ci_rows(data, "vrbench")[("vr_bench", "MCQ-O")][NOTE] == ""  # judge-free: no judge note


def test_without_verdicts_only_judge_free_metrics_get_cis(scored, tmp_path, monkeypatch):
    """The cache is gone: VRBench MCQ-O and CG-Bench's rule-based metrics still get CIs; judge-based ones say why not."""
    for name in ("LMMS_VR_JUDGE_BASE_URL", "LMMS_VR_JUDGE_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "elsewhere.sqlite"))
    folder = lmms_eval_shaped(scored, ("vcr", "vr", "cg"), tmp_path / "run")
    for results in folder.glob("*.json"):  # the run's judge cache recorded in the results: not on this machine
        results.write_text(results.read_text().replace(str(scored.dir / "judge.sqlite"), str(tmp_path / "gone.sqlite")))
    data = report.build_report([f"m={folder}"], tmp_path / "report", n=100)
    vr, cg, vcr = ci_rows(data, "vrbench"), ci_rows(data, "cg_bench"), ci_rows(data, "vcr_bench")
    assert vr[("vr_bench", "MCQ-O")][4].startswith("[")
    assert vr[("vr_bench", "OE-P")][4] == "–" and "no cached verdict" in vr[("vr_bench", "OE-P")][NOTE]
    for metric in ("long-acc", "clue-acc", "mIoU", "acc.@IoU", "CRR"):
        assert cg[("joined CG tasks", metric)][4].startswith("["), metric
    assert cg[("joined CG tasks", "OE-acc")][4] == "–" and "gone.sqlite" in cg[("joined CG tasks", "OE-acc")][NOTE]
    assert all(row[4] == "–" and "no cached verdict" in row[NOTE] for row in vcr.values())
    assert not (tmp_path / "gone.sqlite").exists() and not (tmp_path / "elsewhere.sqlite").exists(), "a reader creates no cache"


def test_unparseable_results_are_reported_not_dropped(scored, tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(scored.files["vr"], folder / "good.json")
    shutil.copy(samples_io.samples_path(scored.files["vr"], "vr_bench"), folder / "good_samples_vr_bench.jsonl")
    (folder / "model_b_results.json").write_text('{"results": {"vr_bench": {"overall,none": 1')  # cut short by a kill
    (folder / "judge_accounting_vrbench.json").write_text('{"judge": {}}')  # not results, and not claimed to be
    (folder / "model_c_results.json").write_text('{"config": {}}')
    assert cli_main(["report", str(folder), "--out", str(tmp_path / "out"), "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err
    assert "model_b_results.json: not valid JSON" in err and "model_c_results.json: no `results` object" in err
    assert "judge_accounting" not in err
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert sorted(Path(entry["path"]).name for entry in data["not_read"]) == ["model_b_results.json", "model_c_results.json"]
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "Not read" in markdown and "model\\_b\\_results.json: not valid JSON" in markdown
    assert "model_b_results.json" in (tmp_path / "out" / "report.html").read_text()
    # only unreadable files: an error naming them
    (folder / "good.json").unlink()
    assert cli_main(["report", str(folder), "--out", str(tmp_path / "out2")]) == 2
    assert "model_b_results.json: not valid JSON" in capsys.readouterr().err


def test_task_names_with_a_slash_and_hostile_labels(scored, tmp_path):
    data = json.loads(scored.files["vr"].read_text())
    data["results"]["../../etc/x"] = {"alias": "x", "acc,none": 1.0}
    data["results"]["a/b"] = {"alias": "a/b", "acc,none": 0.5}
    data["lmms_vr"]["samples"]["a/b"] = "../../outside.jsonl"
    run = tmp_path / "run"
    run.mkdir()
    (run / "weird.json").write_text(json.dumps(data))
    shutil.copy(samples_io.samples_path(scored.files["vr"], "vr_bench"), run / "weird_samples_vr_bench.jsonl")
    label = "<img src:x onerror:alert(1)>|[click](javascript:alert(1))*bold*_\nnew line"  # a label holds no '='

    out = report.build_report([f"{label}={run / 'weird.json'}"], tmp_path / "out", n=50)
    assert "a/b" in out["runs"][label]["tasks"] and out["tasks"][f"{label}|vr_bench"]["ci"]
    markdown = (tmp_path / "out" / "report.md").read_text()
    unescaped = [pattern for pattern in (r"<img", r"\]\(javascript", r"\*bold") if re.search(r"(?<!\\)" + pattern, markdown)]
    assert not unescaped, unescaped
    assert "\\<img src:x onerror:alert(1)\\>\\|\\[click\\](javascript:alert(1))\\*bold\\*\\_ new line" in markdown
    assert "new line" in markdown and "\nnew line" not in markdown
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<img src:x" not in page and "&lt;img src:x" in page


# ---------------------------------------------------------------------------------- issue 22: reports that cannot contradict themselves


def table_of(data: dict, benchmark: str, prefix: str) -> dict:
    [table] = [t for t in data["sections"][benchmark]["tables"] if t["title"].startswith(prefix)]
    return table


def judge_outage(folder: Path, task: str, judge_free: tuple[str, ...]) -> int:
    """Rewrite a run's results as the failure-share rule leaves a judge outage: every judge-based
    metric NaN, judge_failed the number of samples. Returns that number."""
    from lmms_video_reasoning.utils.core import registry

    (results_file,) = [p for p in folder.glob("*.json") if task in json.loads(p.read_text())["results"]]
    data = json.loads(results_file.read_text())
    samples = sum(1 for line in samples_io.samples_path(results_file, task).read_text().splitlines() if line.strip())
    entry = data["results"][task]
    for key in list(entry):
        name = key.partition(",")[0]
        if "," in key and name not in judge_free and name not in registry.get(samples_io.task_spec(task).benchmark).failure_counts:
            entry[key] = math.nan
    entry["judge_failed,none"] = samples
    results_file.write_text(json.dumps(data))
    return samples


def test_a_judge_outage_is_not_computed_never_a_difference_of_zero(scored, tmp_path):
    """A run whose judged metrics are NaN: the paired comparison says "not computable" and which
    side has no value; its tables say "not computed" with judge_failed N of M; its plots have no bar."""
    base = lmms_eval_shaped(scored, ("vr",), tmp_path / "base")
    outage = lmms_eval_shaped(scored, ("vr",), tmp_path / "outage")
    total = judge_outage(outage, "vr_bench", report_runs.spec_of("vrbench").judge_free)
    data = report.build_report([f"base={base}", f"outage={outage}"], tmp_path / "report", n=100)
    compared = {row[2]: row for row in table_of(data, "vrbench", "Paired comparisons")["rows"]}
    for metric in ("OE-P", "Overall"):
        assert compared[metric][3] == "not computable" and compared[metric][4] == "–", compared[metric]
        assert f"outage has no value (judge_failed {total} of {total})" in compared[metric][7], compared[metric]
    assert compared["MCQ-O"][3].startswith(("+", "-")) and compared["MCQ-O"][7] == ""  # judge-free: still compared
    ci = ci_rows(data, "vrbench")
    ci_outage = {row[2]: row for row in table_of(data, "vrbench", "95%")["rows"] if row[0].endswith("outage")}
    for metric in ("OE-P", "Overall"):
        assert ci_outage[metric][3:5] == ["not computed", "–"] and ci_outage[metric][NOTE] == f"judge_failed {total} of {total}"
    assert ci[("vr_bench", "MCQ-O")][4].startswith("[")
    table2 = table_of(data, "vrbench", reference_title("vrbench", "table2"))
    [row] = [r for r in table2["rows"] if r[0].endswith("outage")]
    assert "not computed" in row and not any(cell == "0.00" for cell in row)
    assert any(f"not computed (judge_failed {total} of {total})" in note for note in table2["notes"])
    md = (tmp_path / "report" / "report.md").read_text()
    assert "not computable" in md and "+0.00 \\[0.00, 0.00\\]" not in md


def reference_title(benchmark: str, table: str) -> str:
    from lmms_video_reasoning.utils.core import registry

    return registry.get(benchmark).reference_tables()["tables"][table]["title"]


def test_plots_leave_out_values_not_computed(tmp_path, monkeypatch):
    """A NaN value gets no bar (a 0 bar would read as a score); the others are drawn."""
    import matplotlib.axes

    drawn = []
    real_bar = matplotlib.axes.Axes.bar
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda self, x, height, *a, **k: drawn.append(list(height)) or real_bar(self, x, height, *a, **k))
    report_plots.grouped_bars(tmp_path / "p.png", "t", ["a", "b", "c"], [("run", [50.0, report_stats.NotComputed("judge_failed 3 of 3"), 70.0],
                                                                     [None, None, None]), ("down", [math.nan] * 3, [None] * 3)], "y")
    assert drawn == [[50.0, 70.0]] and (tmp_path / "p.png").stat().st_size > 0


def test_verdicts_of_another_run_are_never_the_runs(scored, tmp_path, monkeypatch):
    """A run that recorded no judge, whose results say OE-acc is NaN (its judge failed): the
    configured judge's shared cache holds verdicts made for another run. They are not its values:
    OE-acc stays not computed with no CI, and the Note says the verdicts were borrowed."""
    for name, env_value in scored.env.items():
        monkeypatch.setenv(name, env_value)
    monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LMMS_VR_JUDGE_MODEL", "sample-oracle")
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(scored.dir / "judge.sqlite"))  # the shared cache, with the other run's verdicts
    folder = lmms_eval_shaped(scored, ("cg",), tmp_path / "run")
    total = judge_outage(folder, "cg_bench_open", report_runs.spec_of("cg_bench").judge_free)
    (results_file,) = folder.glob("cg.json")
    data = json.loads(results_file.read_text())
    data["lmms_vr"].pop("judge_accounting")  # this run recorded no judge
    results_file.write_text(json.dumps(data))
    built = report.build_report([f"m={folder}"], tmp_path / "report", n=100)
    oe = ci_rows(built, "cg_bench")[("joined CG tasks", "OE-acc")]
    assert oe[3] == "not computed" and oe[4] == "–" and f"judge_failed {total} of {total}" in oe[NOTE], oe
    assert "verdicts borrowed" in oe[NOTE] and str(scored.dir / "judge.sqlite") in oe[NOTE], oe  # the Note says so, the footnote which cache
    assert math.isnan(built["sections"]["cg_bench"]["joined"]["m|mini"]["oe_acc"] or math.nan)
    assert built["sections"]["cg_bench"]["joined_ci"]["m|mini"].get("oe_acc") is None
    long_acc = ci_rows(built, "cg_bench")[("joined CG tasks", "long-acc")]
    assert long_acc[4].startswith("[")  # judge-free metrics keep their CIs
    assert "borrowed" in built["tasks"]["m|cg_bench_open"]["note"]
    table3 = table_of(built, "cg_bench", reference_title("cg_bench", "table3"))
    [row] = [r for r in table3["rows"] if r[0] == f"{report_tables.MINE}m"]
    assert row[table3["columns"].index("OE-acc")] == "not computed"


def test_accounting_of_another_run_in_the_folder_is_not_this_runs(tmp_path):
    """Only `<date_id>[_N]_*.json` beside `<date_id>_results.json` may record this run's judge."""
    for name in ("2026_a_results.json", "2026_a_judge_accounting_vrbench.json", "2026_a_2_judge_accounting_vrbench.json",
                 "2026_a_cg_bench_open_details.json", "2026_b_judge_accounting_vrbench.json", "2026_ab_judge_accounting_vrbench.json",
                 "judge_accounting_vrbench.json"):
        (tmp_path / name).write_text("{}")
    found = {p.name for p in report_runs.run_accounting_files(tmp_path / "2026_a_results.json")}
    assert found == {"2026_a_judge_accounting_vrbench.json", "2026_a_2_judge_accounting_vrbench.json", "2026_a_cg_bench_open_details.json"}


def test_breakdowns_that_need_the_data_root_say_so(scored, tmp_path, monkeypatch):
    """Without the data root the report cannot rebuild CG-Bench's judge requests (they hold clue
    frames): a breakdown cell that needs them says "needs CGBENCH_ROOT", every other cell is the
    value computed with the root, never a silently different number."""
    for name in ("LMMS_VR_JUDGE_BASE_URL", "LMMS_VR_JUDGE_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "LMMS_VR_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    folder = lmms_eval_shaped(scored, ("cg",), tmp_path / "run")
    tables = {}
    for with_root in (True, False):
        for name, env_value in scored.env.items():
            monkeypatch.setenv(name, env_value) if with_root else monkeypatch.delenv(name, raising=False)
        built = report.build_report([f"m={folder}"], tmp_path / f"report_{with_root}", n=0)
        tables[with_root] = {t["title"]: t["rows"] for t in built["sections"]["cg_bench"]["tables"] if t["title"].startswith("Breakdown")}
    marked = 0
    for title, rows in tables[True].items():
        for good, bare in zip(rows, tables[False][title]):
            for a, b in zip(good, bare):
                assert b == a or b == "needs CGBENCH_ROOT", (title, good, bare)
                marked += b == "needs CGBENCH_ROOT"
    assert marked > 0


def test_one_resampling_unit_gives_no_interval(scored, tmp_path):
    """A one-video VRBench subset: no CI (every resample is the video itself) and no standard error,
    never `± 0`."""
    from lmms_video_reasoning.utils.results import aggregation

    folder = tmp_path / "one"
    folder.mkdir()
    samples = samples_io.samples_path(scored.files["vr"], "vr_bench")
    sampled, _ = report_bootstrap.load_sampled("vr_bench", samples)
    first = next(iter(sampled.units().values()))
    lines = samples.read_text().splitlines()
    (folder / samples.name).write_text("".join(lines[i] + "\n" for i in first))
    one, _ = report_bootstrap.load_sampled("vr_bench", folder / samples.name)
    assert len(one.units()) == 1
    data = json.loads(scored.files["vr"].read_text())
    data["results"]["vr_bench"] = {f"{k},none": v for k, v in one.metrics().items()}
    (folder / scored.files["vr"].name).write_text(json.dumps(data))
    built = report.build_report([f"m={folder / scored.files['vr'].name}"], tmp_path / "report", n=100)
    for metric in ("MCQ-O", "OE-P", "Overall"):
        row = ci_rows(built, "vrbench")[("vr_bench", metric)]
        assert row[4] == "–" and row[NOTE] == "no CI from 1 videos", row
    with sample_judge(scored.dir / "judge.sqlite", scored.env):
        assert aggregation.bootstrap_stderrs("vrbench", one.records, one.outcomes, one.settings, 50) == {}
        assert aggregation.bootstrap_stderrs("vrbench", sampled.records, sampled.outcomes, sampled.settings, 50)["mcq_accuracy"] > 0


# ---------------------------------------------------------------------------------- provenance of the paper's rows


def test_each_reference_table_says_the_data_and_protocol_of_its_rows(scored, sample_dir, tmp_path):
    """Under each paper table: the data version and protocol its rows come from, and for each run the
    questions it scored against the release (or split), a mismatch as a visible note."""
    expected = sample_counts(sample_dir)
    data = report.build_report([f"m={scored.files[name]}" for name in ("vcr", "vr", "cg")], tmp_path, n=0)
    vr_notes = table_of(data, "vrbench", "Table 2")["notes"]
    rows_note = next(note for note in vr_notes if note.startswith("Reference rows: "))
    assert "1,010 videos, 9,468 questions" in rows_note and "960 videos, 8,243 questions" in rows_note
    assert "two-phase" in rows_note and "Fig. A20" in rows_note and "shows no options" in rows_note
    [run_note] = [note for note in vr_notes if note.startswith((report_tables.MISMATCH + "m:", "m:"))]
    assert run_note.startswith(report_tables.MISMATCH), "a run of the released data is not on the rows' 9,468 questions"
    assert f"m: {expected['vr_questions']} of the 8,243 released questions (a part of it" in run_note
    assert "data mismatch: the rows are on 9,468 questions" in run_note
    assert "protocol mismatch: one generation with the options shown" in run_note and "default protocol" in run_note

    cg_notes = table_of(data, "cg_bench", "Table 3")["notes"]
    assert any("does not say whether Table 3 used the full set (12,129 questions) or the mini split (3,000)" in note for note in cg_notes)
    [run_note] = [note for note in cg_notes if note.startswith(report_tables.MISMATCH + "m:")]
    assert f"m: {expected['cg_questions']} of the 3,000 mini-split questions" in run_note
    assert "the paper does not state the data of its rows" in run_note and "0/1/2 verdicts" in run_note

    vcr_notes = table_of(data, "vcr_bench", "Table 2")["notes"]
    assert any("revised text" in note and "2504.07956" in note for note in vcr_notes)
    [run_note] = [note for note in vcr_notes if note.startswith(report_tables.MISMATCH + "m:")]
    assert f"m: {expected['vcr_questions']} of the 1,034 released questions" in run_note and "data mismatch" in run_note
    markdown = (tmp_path / "report.md").read_text()
    assert "9,468 questions" in markdown and f"{expected['vr_questions']} of the 8,243 released questions" in markdown


@pytest.mark.parametrize("benchmark,table,questions,available,protocol,mismatch", [
    ("vcr_bench", "table2", 1034, 1034, "", None),  # all released questions = the rows' questions: no mismatch
    ("vcr_bench", "table2", 500, 1034, "", "data mismatch: the rows are on 1,034 questions"),
    ("vrbench", "table2", 8243, 8243, "", "data mismatch: the rows are on 9,468 questions"),  # the whole release is not the paper's version
    ("vrbench", "table2", 9468, None, "", None),
    ("vrbench", "table2", 9468, None, "one generation", "protocol mismatch: one generation"),
    ("cg_bench", "table3", 3000, 3000, "", "the paper does not state the data of its rows"),
])
def test_provenance_note_reports_a_mismatch_only_where_the_run_differs(benchmark, table, questions, available, protocol, mismatch):
    notes = report_tables.provenance_notes(benchmark, table, [report_tables.Coverage("run", questions, available, "released", protocol)])
    assert notes[0].startswith("Reference rows: data: ")
    [note] = notes[1:]
    if mismatch is None:
        assert not note.startswith(report_tables.MISMATCH) and "the same data and protocol as the rows" in note
    else:
        assert note.startswith(report_tables.MISMATCH + "run: ") and mismatch in note
    assert ("a part of it" in note) == (available is not None and questions < available)
    if available == 8243:
        assert note.startswith(f"{report_tables.MISMATCH}run: 8,243 of the 8,243 released questions;")
    assert report_tables.provenance_notes(benchmark, table, []) == notes[:1]
