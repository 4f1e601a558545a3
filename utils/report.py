"""`lmms-vr report`: the papers' tables for your runs, with bootstrap CIs, comparisons and plots.

    lmms-vr report RESULTS... [--out DIR] [--seed S] [--bootstrap N]

RESULTS are results JSON files or folders holding them (lmms-eval's `*_results.json` or the
output of `lmms-vr score --out`), each optionally prefixed `LABEL=` to name the run. Runs
with the same label and different tasks are one model (e.g. `cg_bench_long` and
`cg_bench_clue` run separately: CRR and acc@IoU are then joined across the files).

Writes `DIR/report.md`, `DIR/report.html` (plots inline, self-contained), `DIR/*.png` and
`DIR/report.json` (every number below). For each benchmark present: the paper's tables with
your rows beside the paper's reference rows (`reference_rows.py`, each with its source),
95% bootstrap confidence intervals for the headline metrics, paired differences with CIs
when two runs share a task, and the plots.

Per-sample data: the samples file next to each results file (`--log_samples`, or the one
`lmms-vr score --out` writes, which also stores each sample's scored outcome). Outcomes not
stored are recomputed with the benchmark's own judging / parsing through the judge cache
(free after the run; without a judge configured, judge-based CIs are not available). Each
bootstrap resample is re-aggregated by the benchmark's own metric functions, so macro means,
F1 of the averaged precision and recall, and CG-Bench's per-question joins are resampled
correctly. Resampling units are questions (CG-Bench: all modes of a `qid` together), and a
paired comparison resamples the questions both runs answered.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils import score as scoring
from lmms_video_reasoning.utils.data import DataError
from lmms_video_reasoning.utils.reference_rows import REFERENCE_ROWS

log = logging.getLogger("lmms_video_reasoning.report")

BENCHMARK_TITLES = {"vcr_bench": "VCR-Bench", "vrbench": "VRBench", "cg_bench": "CG-Bench"}
HEADLINE = {
    "vcr_bench": ("accuracy", "perception_f1", "reasoning_f1", "cot_recall", "cot_precision", "cot_f1"),
    "vrbench": ("overall", "mcq_accuracy", "process_score"),
    "cg_bench": ("long_acc", "clue_acc", "miou", "rec_at_iou", "acc_at_iou", "crr", "oe_acc", "blind_acc"),
}
LABELS = {
    "perception_recall": "Perc. Rec", "perception_precision": "Perc. Pre", "perception_f1": "Perc. F1",
    "reasoning_recall": "Reas. Rec", "reasoning_precision": "Reas. Pre", "reasoning_f1": "Reas. F1",
    "cot_recall": "Avg Rec", "cot_precision": "Avg Pre", "cot_f1": "Avg F1 (CoT score)",
    "accuracy_ftr": "FTR", "accuracy_vtc": "VTC", "accuracy_vtg": "VTG", "accuracy_vkr": "VKR", "accuracy_tsr": "TSR",
    "accuracy_vpa": "VPA", "accuracy_tsg": "TSG", "accuracy": "Avg acc",
    "accuracy_short": "Short", "accuracy_medium": "Med", "accuracy_long": "Long",
    "vcr_text_only:accuracy": "Text", "vcr_one_frame:accuracy": "1 Frame", "vcr_direct:accuracy": "Direct", "vcr_cot:accuracy": "CoT",
    "overall": "Overall", "mcq_accuracy": "MCQ-O", "process_score": "OE-P",
    "type_event_attribution": "EA", "type_counting": "CP", "type_hypothetical_reasoning": "HR", "type_implicit_inference": "II",
    "type_information_synopsis": "IS", "type_event_prediction": "EP", "type_logical_linkage": "LL",
    "clue_acc": "clue-acc", "long_acc": "long-acc", "miou": "mIoU", "rec_at_iou": "rec.@IoU", "acc_at_iou": "acc.@IoU",
    "crr": "CRR", "oe_acc": "OE-acc", "blind_acc": "blind-acc",
}
VCR_TASKS = ("vcr_cot", "vcr_direct", "vcr_text_only", "vcr_one_frame")
VRBENCH_TASKS = ("vr_bench", "vr_bench_official", "vr_bench_text", "vr_bench_mcq")
CG_MODES = ("long", "clue", "grounding", "open", "blind")
CG_SPLITS = {"mini": "cg_bench_", "full": "cg_bench_full_"}
# Which task's records stand for each CG-Bench mode (the combined task first).
CG_MODE_TASKS = {"long": ("mcq", "long"), "clue": ("mcq", "clue"), "grounding": ("mcq", "grounding"), "open": ("open",), "blind": ("blind",)}
CG_DURATION_ORDER = ("0-10", "10-20", "20-30", "30-40", "40-50", "50-60", "60+")
MINE = "▶ "


# ---------------------------------------------------------------------------------------------
# Runs: results files, their samples files, their labels
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One model's results: task -> {metric: value}, and the samples file of each task."""

    label: str
    paths: list[Path]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: dict[str, Path] = field(default_factory=dict)


def split_label(item: str) -> tuple[str | None, Path]:
    """`LABEL=PATH` -> (LABEL, PATH); a bare path (even one containing '=') -> (None, PATH)."""
    if "=" in item and not Path(item).exists():
        label, _, path = item.partition("=")
        return label, Path(path)
    return None, Path(item)


def results_files(path: Path) -> list[Path]:
    """The results JSON files at `path` (a file, or every results JSON under a folder)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataError(f"{path}: no such results file or folder")
    found = []
    for candidate in sorted(path.rglob("*.json")):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        if isinstance(data, dict) and isinstance(data.get("results"), dict):
            found.append(candidate)
    if not found:
        raise DataError(f"{path}: no results JSON under it (lmms-eval's *_results.json or `lmms-vr score --out`)")
    return found


def metric_values(entry: dict) -> dict[str, Any]:
    """{metric: value} from lmms-eval's `{"metric,none": value}` (stderr entries left out)."""
    values = {}
    for key, value in entry.items():
        name, _, filter_name = key.partition(",")
        if filter_name and "_stderr" not in name and isinstance(value, (int, float)):
            values[name] = float(value)
    return values


def default_label(data: dict, path: Path) -> str:
    """The model a results file is for: lmms-eval's model and its checkpoint, or the file name."""
    if "lmms_vr" in data:
        return path.stem
    config = data.get("config") or {}
    model = config.get("model") or data.get("model_name") or path.parent.name
    args = str(config.get("model_args") or "")
    match = re.search(r"(?:pretrained|model_version|model)=([^,]+)", args)
    return f"{model} ({match.group(1)})" if match else str(model)


def samples_for(path: Path, data: dict) -> dict[str, Path]:
    """{task: samples file} of a results file: lmms-eval's `<date>_samples_<task>.jsonl` or ours."""
    ours = (data.get("lmms_vr") or {}).get("samples") or {}
    found = {task: path.with_name(name) for task, name in ours.items() if path.with_name(name).is_file()}
    prefix = path.name[: -len(scoring.RESULTS_SUFFIX)] if path.name.endswith(scoring.RESULTS_SUFFIX) else path.stem
    for task in data.get("results", {}):
        candidate = path.with_name(f"{prefix}_samples_{task}.jsonl")
        if task not in found and candidate.is_file():
            found[task] = candidate
    return found


def load_runs(items: Sequence[str]) -> list[Run]:
    """Runs from the command line's results arguments (same label + disjoint tasks = one run)."""
    runs: list[Run] = []
    for item in items:
        label, path = split_label(item)
        for file in results_files(path):
            data = json.loads(file.read_text(encoding="utf-8"))
            results = {task: metric_values(entry) for task, entry in data["results"].items() if isinstance(entry, dict)}
            name = label or default_label(data, file)
            target = next((r for r in runs if r.label == name and not set(r.results) & set(results)), None)
            if target is None:
                taken = {r.label for r in runs}
                unique, number = name, 2
                while unique in taken:
                    unique, number = f"{name} #{number}", number + 1
                target = Run(unique, [])
                runs.append(target)
            target.paths.append(file)
            target.results.update(results)
            target.samples.update(samples_for(file, data))
    return runs


# ---------------------------------------------------------------------------------------------
# Per-sample data and the bootstrap
# ---------------------------------------------------------------------------------------------


@dataclass
class Sampled:
    """A task's records and per-sample outcomes, ready to be resampled by question."""

    benchmark: str
    records: list[dict]
    outcomes: list[dict]
    settings: Any

    @property
    def bench(self) -> scoring.BenchmarkScoring:
        return scoring.BENCHMARKS[self.benchmark]

    def units(self) -> dict[str, list[int]]:
        """{question: [its record indices]} in first-appearance order."""
        groups: dict[str, list[int]] = {}
        for index, record in enumerate(self.records):
            groups.setdefault(self.bench.unit(record), []).append(index)
        return groups

    def metrics(self, indices: Sequence[int] | None = None) -> dict[str, float]:
        if indices is None:
            return self.bench.metrics(self.records, self.outcomes, self.settings)
        return self.bench.metrics([self.records[i] for i in indices], [self.outcomes[i] for i in indices], self.settings)


def load_sampled(task: str, path: Path) -> tuple[Sampled | None, str]:
    """(Sampled, "") for a task's samples file, or (None, why not)."""
    try:
        spec = scoring.task_spec(task)
    except DataError:
        return None, f"{task} is not a task of this suite"
    try:
        records = scoring.records_from_samples(path, spec)
    except (DataError, OSError) as error:
        return None, f"samples file unreadable: {error}"
    bench = scoring.BENCHMARKS[spec.benchmark]
    settings = bench.settings(records)
    outcomes = scoring.stored_outcomes(path)
    if outcomes is None:
        log.info("%s: recomputing per-sample outcomes from %s (judge cache)", task, path.name)
        outcomes = bench.outcomes(records, settings)
    if outcomes is None:
        return None, "no judge configured to recompute per-sample outcomes (run `lmms-vr score` with the judge and report on its output)"
    return Sampled(spec.benchmark, records, list(outcomes), settings), ""


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of bootstrap values; None when most resamples are undefined (NaN)."""
    import numpy as np

    finite = np.array([v for v in values if isinstance(v, (int, float)) and not math.isnan(v)], dtype=float)
    if len(finite) < max(2, len(values) // 2):
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _resampled_values(draw, compute, n: int) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for _ in range(n):
        for name, value in compute(draw()).items():
            if isinstance(value, (int, float)):
                values.setdefault(name, []).append(float(value))
    return values


def bootstrap_values(sampled: Sampled, n: int = 1000, seed: int = 0) -> dict[str, list[float]]:
    """Every metric on `n` resamples of the questions (units) with replacement (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    groups = list(sampled.units().values())

    def draw() -> list[int]:
        return [index for pick in rng.integers(0, len(groups), len(groups)) for index in groups[pick]]

    return _resampled_values(draw, sampled.metrics, n)


def bootstrap_ci(sampled: Sampled, n: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float] | None]:
    """95% percentile CIs of every metric, resampling questions with replacement (seeded)."""
    values = bootstrap_values(sampled, n, seed)
    return {name: percentile_interval(series, level) for name, series in values.items()}


@dataclass
class Difference:
    metric: str
    difference: float
    interval: tuple[float, float] | None
    common: int


def paired_difference(base: Sampled, other: Sampled, n: int = 1000, seed: int = 0, level: float = 0.95) -> list[Difference]:
    """other - base per metric on the questions both answered, with a paired bootstrap CI."""
    import numpy as np

    base_units, other_units = base.units(), other.units()
    common = [unit for unit in base_units if unit in other_units]
    if not common:
        return []
    rng = np.random.default_rng(seed)

    def indices(units: dict[str, list[int]], picks) -> list[int]:
        return [index for pick in picks for index in units[common[pick]]]

    def point(picks) -> dict[str, float]:
        a, b = base.metrics(indices(base_units, picks)), other.metrics(indices(other_units, picks))
        return {name: b[name] - a[name] for name in a if isinstance(a[name], (int, float)) and isinstance(b.get(name), (int, float))}

    observed = point(range(len(common)))
    values = _resampled_values(lambda: rng.integers(0, len(common), len(common)), point, n)
    return [Difference(name, value, percentile_interval(values.get(name, []), level), len(common)) for name, value in observed.items()]


# ---------------------------------------------------------------------------------------------
# The numbers behind the tables: per run and task, points from the results, CIs from samples
# ---------------------------------------------------------------------------------------------


@dataclass
class TaskStats:
    point: dict[str, float]
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    questions: int | None = None
    note: str = ""
    sampled: Sampled | None = None


def task_stats(run: Run, task: str, n: int, seed: int) -> TaskStats:
    stats = TaskStats(point=dict(run.results.get(task, {})))
    path = run.samples.get(task)
    if path is None:
        stats.note = "no samples file next to the results (run lmms-eval with --log_samples)"
        return stats
    sampled, why = load_sampled(task, path)
    if sampled is None:
        stats.note = why
        return stats
    stats.sampled, stats.questions = sampled, len(sampled.units())
    recomputed = sampled.metrics()
    differ = [m for m, v in stats.point.items() if m in recomputed and not scoring.same_value(v, recomputed[m])]
    if differ:
        stats.note = f"per-sample re-scoring differs from the results file for {', '.join(differ)} (judge cache missing?)"
    if n > 0 and sampled.benchmark != "cg_bench":  # CG-Bench is bootstrapped once per run, all modes joined
        stats.ci = bootstrap_ci(sampled, n, seed)
    return stats


def cg_combined(run: Run, split: str, per_task: dict[str, TaskStats], n: int, seed: int) -> TaskStats | None:
    """One CG-Bench row per run and split: every mode's outcomes joined (CRR and acc@IoU across files)."""
    prefix = CG_SPLITS[split]
    records, outcomes, used, point = [], [], [], {}
    settings = None
    for mode in CG_MODES:
        for kind in CG_MODE_TASKS[mode]:
            task = prefix + kind
            stats = per_task.get(task)
            if stats is None:
                continue
            if stats.sampled is not None:
                pairs = [(r, o) for r, o in zip(stats.sampled.records, stats.sampled.outcomes) if r["mode"] == mode]
                records += [r for r, _ in pairs]
                outcomes += [o for _, o in pairs]
                settings = stats.sampled.settings
            for metric, value in stats.point.items():
                if not math.isnan(value):  # a task's NaN (a mode it does not run) never hides another task's value
                    point.setdefault(metric, value)
            used.append(task)
            break
    if not used:
        return None
    combined = TaskStats(point=point, note=", ".join(sorted(set(used))))
    if all(per_task[task].sampled is not None for task in used):
        sampled = Sampled("cg_bench", records, outcomes, settings)
        combined.sampled, combined.questions = sampled, len(sampled.units())
        computed = sampled.metrics()
        for metric in HEADLINE["cg_bench"]:  # the joined metrics, and any metric no task reported
            if metric in ("crr", "acc_at_iou") or metric not in point:
                combined.point[metric] = computed[metric]
        if n > 0:
            combined.ci = bootstrap_ci(sampled, n, seed)
    elif "crr" not in point and "long_acc" in point and "clue_acc" in point:
        from lmms_video_reasoning.cg_bench.scoring import crr

        combined.point["crr"] = crr(point["long_acc"], point["clue_acc"])
    return combined


# ---------------------------------------------------------------------------------------------
# Tables (one structure, rendered to Markdown and HTML)
# ---------------------------------------------------------------------------------------------


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[list[str], bool]]  # (cells, is the user's row)
    notes: list[str] = field(default_factory=list)


def fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_ci(interval: tuple[float, float] | None, digits: int = 1) -> str:
    return "–" if interval is None else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def digits_for(benchmark: str, metric: str) -> int:
    """The paper's precision: VRBench two decimals; CG-Bench mIoU / rec / acc@IoU two."""
    if benchmark == "vrbench" or metric in ("miou", "rec_at_iou", "acc_at_iou"):
        return 2
    return 1


def user_cell(label: str) -> str:
    return f"{MINE}{label}"


def paper_rows(table: dict, columns: Sequence[str], benchmark: str, table_name: str, groups: Sequence[str] | None = None) -> list:
    """The paper's reference rows of `table`, restricted to `columns` (and groups), marked with their source."""
    index = [table["columns"].index(c) for c in columns]
    source = f"paper, {table_name}"
    rows = []
    for row in table["rows"]:
        if groups is not None and not any(row["group"] and row["group"].startswith(g) for g in groups):
            continue
        values = [row["values"][i] for i in index]
        source_cell = f"{source} · {row['group']}" if row.get("group") else source
        rows.append(([row["model"], source_cell] + [fmt(v, digits_for(benchmark, c)) for c, v in zip(columns, values)], False))
    return rows


def paper_table(benchmark: str, name: str, user_rows: list, groups: Sequence[str] | None = None, title_suffix: str = "") -> Table:
    spec = REFERENCE_ROWS[benchmark]["tables"][name]
    columns = spec["columns"]
    table_name = name.replace("table", "Table ")
    notes = [f"Paper rows: {REFERENCE_ROWS[benchmark]['paper']}, {table_name}."]
    if spec.get("note"):
        notes.append(spec["note"])
    return Table(spec["title"] + title_suffix, ["Model", "Source"] + [LABELS.get(c, c) for c in columns],
                 user_rows + paper_rows(spec, columns, benchmark, table_name, groups), notes)


def run_row(label: str, source: str, values: Sequence[Any], benchmark: str, columns: Sequence[str]) -> tuple[list[str], bool]:
    return [user_cell(label), f"your run · {source}"] + [fmt(v, digits_for(benchmark, c)) for c, v in zip(columns, values)], True


def ci_table(benchmark: str, entries: list[tuple[str, str, TaskStats]]) -> Table:
    """Headline metrics with their 95% bootstrap CIs, one row per (run, task, metric)."""
    rows = []
    for label, task, stats in entries:
        for metric in HEADLINE[benchmark]:
            if metric not in stats.point or math.isnan(stats.point[metric]):
                continue
            digits = digits_for(benchmark, metric)
            interval = stats.ci.get(metric) if stats.ci else None
            reason = "" if interval is not None else (stats.note or "undefined in too many resamples")
            rows.append(([user_cell(label), task, LABELS.get(metric, metric), fmt(stats.point[metric], digits), fmt_ci(interval, digits),
                          fmt(stats.questions), reason], True))
    return Table("95% bootstrap confidence intervals (headline metrics)", ["Run", "Task", "Metric", "Value", "95% CI", "Questions", "Note"],
                 rows, ["Percentile bootstrap over questions (VRBench: videos), re-aggregated by the benchmark's own metric functions."])


def comparison_table(benchmark: str, comparisons: list[tuple[str, str, str, list[Difference]]]) -> Table:
    rows = []
    for task, base, other, differences in comparisons:
        for d in differences:
            if d.metric not in HEADLINE[benchmark] or math.isnan(d.difference):
                continue
            digits = digits_for(benchmark, d.metric)
            verdict = "–" if d.interval is None else ("yes" if d.interval[0] > 0 or d.interval[1] < 0 else "no (within noise)")
            rows.append(([f"{MINE}{other} − {base}", task, LABELS.get(d.metric, d.metric), f"{d.difference:+.{digits}f}",
                          fmt_ci(d.interval, digits), str(d.common), verdict], True))
    return Table("Paired comparisons (difference with 95% CI, same questions)", ["Runs", "Task", "Metric", "Difference", "95% CI",
                 "Common questions", "Significant"], rows, ["Paired bootstrap: the questions both runs answered, resampled together."])


def markdown_table(table: Table) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [f"#### {table.title}", "", line(table.columns), line(["---"] * len(table.columns))]
    for cells, mine in table.rows:
        out.append(line([f"**{c}**" if mine and i == 0 else c for i, c in enumerate(cells)]))
    out += [""] + [f"_{note}_  " for note in table.notes]
    return "\n".join(out) + "\n"


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        f'<tr class="{"mine" if mine else "paper"}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        for cells, mine in table.rows)
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in table.notes)
    return f"<h4>{html.escape(table.title)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


# ---------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg)
# ---------------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _errors(points: Sequence[float], intervals: Sequence[tuple[float, float] | None]):
    """Asymmetric error bars for matplotlib from CIs (0 where there is none)."""
    low = [p - i[0] if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    high = [i[1] - p if i and not math.isnan(p) else 0.0 for p, i in zip(points, intervals)]
    return [[max(0.0, v) for v in low], [max(0.0, v) for v in high]]


def grouped_bars(path: Path, title: str, categories: Sequence[str], series: list[tuple[str, list[float], list]], ylabel: str,
                 reference: tuple[str, list[float | None]] | None = None) -> Path:
    """Bars per category, one colour per run (CIs as error bars), optionally a paper row as markers."""
    plt = _pyplot()
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories) * max(1, len(series)) ** 0.5 + 2), 4.2), dpi=110)
    for k, (label, values, intervals) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(categories))]
        shown = [0.0 if math.isnan(v) else v for v in values]
        errors = _errors(values, intervals) if any(intervals) else None
        bars = ax.bar(xs, shown, width * 0.92, label=f"{MINE}{label}", yerr=errors, capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333"})
        for bar, value in zip(bars, values):  # the value itself, inside the bar's foot
            text = "n/a" if math.isnan(value) else f"{value:.1f}"
            ax.text(bar.get_x() + bar.get_width() / 2, 1.5, text, ha="center", va="bottom", fontsize=7.5,
                    color="white" if value >= 8 else "#333", rotation=90 if len(series) > 2 else 0)
    if reference is not None:
        name, values = reference
        ax.scatter([i for i, v in enumerate(values) if v is not None], [v for v in values if v is not None], marker="_", s=500,
                   color="black", zorder=3, label=name)
    ax.set_xticks(range(len(categories)), categories)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def cot_vs_accuracy_plot(path: Path, user: list[tuple[str, float, float, tuple | None, tuple | None]]) -> Path:
    """VCR-Bench Fig. 4: CoT score vs accuracy, the paper's models (grey) and your runs (with CIs)."""
    import numpy as np

    plt = _pyplot()
    tables = REFERENCE_ROWS["vcr_bench"]["tables"]
    accuracy = {row["model"]: row["values"][-1] for row in tables["table3"]["rows"]}
    paper = [(row["model"], row["values"][-1], accuracy[row["model"]]) for row in tables["table2"]["rows"]
             if row["model"] in accuracy and row["model"] != "Human Performance"]
    fig, ax = plt.subplots(figsize=(7.5, 5.2), dpi=110)
    xs, ys = np.array([p[1] for p in paper]), np.array([p[2] for p in paper])
    ax.scatter(xs, ys, color="#9a9a9a", s=22, label="paper (VCR-Bench Tables 2 and 3)")
    labelled: list[tuple[float, float]] = []
    for name, x, y in sorted(paper, key=lambda p: -p[2]):  # label a point only where labels do not collide
        if all(abs(x - lx) > 7 or abs(y - ly) > 2.5 for lx, ly in labelled):
            ax.annotate(name, (x, y), fontsize=6.5, color="#6a6a6a", xytext=(3, 2), textcoords="offset points")
            labelled.append((x, y))
    slope, intercept = np.polyfit(xs, ys, 1)
    line = np.linspace(0, 80, 2)
    r = float(np.corrcoef(xs, ys)[0, 1])
    ax.plot(line, slope * line + intercept, color="#bbbbbb", linestyle="--", linewidth=1, label=f"paper fit (r = {r:.2f})")
    for label, x, y, x_ci, y_ci in user:
        ax.errorbar([x], [y], xerr=_errors([x], [x_ci]), yerr=_errors([y], [y_ci]), fmt="*", markersize=14, capsize=3, label=f"{MINE}{label} (95% CI)")
    ax.set_xlabel("CoT score (overall F1)")
    ax.set_ylabel("Accuracy")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_title("CoT score vs accuracy (VCR-Bench Fig. 4 style)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------
# Sections per benchmark
# ---------------------------------------------------------------------------------------------


@dataclass
class Section:
    benchmark: str
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def _value(stats: TaskStats | None, metric: str) -> float:
    return stats.point.get(metric, math.nan) if stats is not None else math.nan


def _interval(stats: TaskStats | None, metric: str):
    return stats.ci.get(metric) if stats is not None and stats.ci else None


def comparisons_for(benchmark: str, tasks: Sequence[str], stats: dict, runs: list[Run], n: int, seed: int) -> list:
    """Each later run against the first run that has the same task with per-sample data."""
    out = []
    for task in tasks:
        having = [(run.label, stats[(run.label, task)]) for run in runs if (run.label, task) in stats and stats[(run.label, task)].sampled]
        for label, other in having[1:]:
            base_label, base = having[0]
            out.append((task, base_label, label, paired_difference(base.sampled, other.sampled, n, seed)))
    return out


def vcr_section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    present = [(run, task) for run in runs for task in VCR_TASKS if (run.label, task) in stats]
    if not present:
        return None
    section = Section("vcr_bench")
    tables = REFERENCE_ROWS["vcr_bench"]["tables"]

    def rows(name: str, tasks: Sequence[str]) -> list:
        columns = tables[name]["columns"]
        return [run_row(run.label if task == "vcr_cot" else f"{run.label} · {task}", task,
                        [_value(stats[(run.label, task)], c) for c in columns], "vcr_bench", columns)
                for run, task in present if task in tasks]

    section.tables.append(paper_table("vcr_bench", "table2", rows("table2", ("vcr_cot",))))
    section.tables.append(paper_table("vcr_bench", "table3", rows("table3", VCR_TASKS)))
    section.tables.append(paper_table("vcr_bench", "table4", rows("table4", VCR_TASKS)))
    ablations = [run for run in runs if sum((run.label, t) in stats for t in VCR_TASKS) > 1]
    if ablations:
        columns = tables["table5"]["columns"]
        user = [run_row(run.label, "vcr_* tasks", [_value(stats.get((run.label, c.split(":")[0])), "accuracy") for c in columns],
                        "vcr_bench", columns) for run in ablations]
        section.tables.append(paper_table("vcr_bench", "table5", user))
    section.tables.append(ci_table("vcr_bench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    comparisons = comparisons_for("vcr_bench", VCR_TASKS, stats, runs, n, seed)
    if comparisons:
        section.tables.append(comparison_table("vcr_bench", comparisons))

    cot_runs = [(run.label, stats[(run.label, "vcr_cot")]) for run, task in present if task == "vcr_cot"]
    if cot_runs:
        user = [(label, _value(s, "cot_f1"), _value(s, "accuracy"), _interval(s, "cot_f1"), _interval(s, "accuracy")) for label, s in cot_runs]
        section.figures.append(("CoT score vs accuracy", cot_vs_accuracy_plot(out / "vcr_bench_cot_vs_accuracy.png", user)))
        reference = next(r for r in tables["table4"]["rows"] if r["model"] == "GPT-4o")
        buckets = ("accuracy_short", "accuracy_medium", "accuracy_long")
        section.figures.append(("Accuracy by duration", grouped_bars(
            out / "vcr_bench_accuracy_by_duration.png", "VCR-Bench accuracy by duration (vcr_cot)", ["Short (≤60 s)", "Medium (≤300 s)", "Long"],
            [(label, [_value(s, b) for b in buckets], [_interval(s, b) for b in buckets]) for label, s in cot_runs], "Accuracy",
            ("paper: GPT-4o", reference["values"][:3]))))
        dims = tables["table3"]["columns"][:7]
        reference = next(r for r in tables["table3"]["rows"] if r["model"] == "GPT-4o")
        section.figures.append(("Accuracy by dimension", grouped_bars(
            out / "vcr_bench_accuracy_by_dimension.png", "VCR-Bench accuracy by dimension (vcr_cot)", [LABELS[d] for d in dims],
            [(label, [_value(s, d) for d in dims], [_interval(s, d) for d in dims]) for label, s in cot_runs], "Accuracy",
            ("paper: GPT-4o", reference["values"][:7]))))
    return section


def vrbench_section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    present = [(run, task) for run in runs for task in VRBENCH_TASKS if (run.label, task) in stats]
    if not present:
        return None
    section = Section("vrbench")
    columns = REFERENCE_ROWS["vrbench"]["tables"]["table2"]["columns"]

    def rows(tasks: Sequence[str]) -> list:
        return [run_row(run.label if task == "vr_bench" else f"{run.label} · {task}", task,
                        [_value(stats[(run.label, task)], c) for c in columns], "vrbench", columns)
                for run, task in present if task in tasks]

    vlm = rows(("vr_bench", "vr_bench_official", "vr_bench_mcq"))
    if vlm:
        section.tables.append(paper_table("vrbench", "table2", vlm, groups=("VLMs",), title_suffix=" — VLMs (frames)"))
    llm = rows(("vr_bench_text",))
    if llm:
        section.tables.append(paper_table("vrbench", "table2", llm, groups=("LLMs",), title_suffix=" — LLMs (summary, no frames)"))
    section.tables.append(ci_table("vrbench", [(run.label, task, stats[(run.label, task)]) for run, task in present]))
    comparisons = comparisons_for("vrbench", VRBENCH_TASKS, stats, runs, n, seed)
    if comparisons:
        section.tables.append(comparison_table("vrbench", comparisons))
    types = columns[3:]
    shown = [(run.label if task == "vr_bench" else f"{run.label} · {task}", stats[(run.label, task)]) for run, task in present]
    reference = next(r for r in REFERENCE_ROWS["vrbench"]["tables"]["table2"]["rows"] if r["model"].startswith("GPT-4o") and r["group"].startswith("VLMs"))
    section.figures.append(("Score by reasoning type", grouped_bars(
        out / "vrbench_by_type.png", "VRBench score by reasoning type", [LABELS[t] for t in types],
        [(label, [_value(s, t) for t in types], [_interval(s, t) for t in types]) for label, s in shown], "Score",
        ("paper: GPT-4o (VLM)", reference["values"][3:]))))
    return section


def cg_section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    combined = {}
    for run in runs:
        for split in CG_SPLITS:
            per_task = {task: s for (label, task), s in stats.items() if label == run.label and task.startswith(CG_SPLITS[split])
                        and (split == "full" or not task.startswith(CG_SPLITS["full"]))}
            row = cg_combined(run, split, per_task, n, seed) if per_task else None
            if row is not None:
                combined[(run.label, split)] = row
    if not combined:
        return None
    section = Section("cg_bench")
    columns = REFERENCE_ROWS["cg_bench"]["tables"]["table3"]["columns"]
    user = []
    for (label, split), row in combined.items():
        name = label if split == "mini" else f"{label} · full"
        if any(not math.isnan(_value(row, c)) for c in columns):
            user.append(run_row(name, row.note, [_value(row, c) for c in columns], "cg_bench", columns))
        if not math.isnan(_value(row, "blind_acc")):  # the paper's "GPT4o (text)" setting: one accuracy
            blind = _value(row, "blind_acc")
            user.append(run_row(f"{name} (blind)", "cg_bench_blind", [blind, blind, None, None, None, None, None], "cg_bench", columns))
    table = paper_table("cg_bench", "table3", user)
    table.notes.append("Your rows join every CG-Bench task of the run per question (CRR and acc.@IoU across files when "
                       "the modes ran as separate tasks); a blind row shows blind-acc in both accuracy columns, as the paper's GPT4o (text) row.")
    section.tables.append(table)
    section.tables.append(ci_table("cg_bench", [(label if split == "mini" else f"{label} · full", "joined CG tasks", row)
                                                for (label, split), row in combined.items()]))
    cg_tasks = sorted({task for (_, task) in stats if task.startswith("cg_bench")})
    comparisons = comparisons_for("cg_bench", cg_tasks, stats, runs, n, seed)
    if comparisons:
        section.tables.append(comparison_table("cg_bench", comparisons))

    with_samples = [(label if split == "mini" else f"{label} · full", row) for (label, split), row in combined.items() if row.sampled]
    breakdowns = {name: scoring.BENCHMARKS["cg_bench"].breakdown(row.sampled.outcomes) for name, row in with_samples}
    for group, title in (("duration", "duration (minutes)"), ("domain", "domain"), ("kind", "question kind")):
        rows = []
        for name, data in breakdowns.items():
            for key, metrics in data.get(group, {}).items():
                rows.append(([user_cell(name), key, str(metrics.get("n", ""))] +
                             [fmt(metrics.get(c), digits_for("cg_bench", c)) for c in ("long_acc", "clue_acc", "miou", "acc_at_iou", "oe_acc")], True))
        if rows:
            section.tables.append(Table(f"Breakdown by {title}", ["Run", group.capitalize(), "Answers", "long-acc", "clue-acc", "mIoU",
                                                                   "acc.@IoU", "OE-acc"], rows, ["From the per-sample outcomes (cg_bench.aggregate.breakdown)."]))
    if breakdowns:
        buckets = [b for b in CG_DURATION_ORDER if any(b in d.get("duration", {}) for d in breakdowns.values())]
        metric = "long_acc" if any("long_acc" in m for d in breakdowns.values() for m in d.get("duration", {}).values()) else "oe_acc"
        section.figures.append(("Accuracy by duration", grouped_bars(
            out / "cg_bench_accuracy_by_duration.png", f"CG-Bench {LABELS[metric]} by video duration (minutes)", buckets,
            [(name, [d.get("duration", {}).get(b, {}).get(metric, math.nan) for b in buckets], [None] * len(buckets)) for name, d in breakdowns.items()],
            LABELS[metric])))
        domains = sorted({k for d in breakdowns.values() for k in d.get("domain", {})})
        section.figures.append(("Accuracy by domain", grouped_bars(
            out / "cg_bench_accuracy_by_domain.png", f"CG-Bench {LABELS[metric]} by domain", domains,
            [(name, [d.get("domain", {}).get(k, {}).get(metric, math.nan) for k in domains], [None] * len(domains)) for name, d in breakdowns.items()],
            LABELS[metric])))
    section.data["joined"] = {f"{label}|{split}": row.point for (label, split), row in combined.items()}
    section.data["joined_ci"] = {f"{label}|{split}": row.ci for (label, split), row in combined.items()}
    return section


SECTIONS = (vcr_section, vrbench_section, cg_section)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


FAILURE_COUNTS = ("model_failed", "judge_failed", "parse_failed")


def failure_summary(run: Run) -> str:
    """Per task, the samples that could not be scored normally (never silently a zero):
    the model gave no answer, the judge gave no verdict, the reply did not parse."""
    parts = []
    for task in sorted(run.results):
        counts = [f"{name} {run.results[task][name]:g}" for name in FAILURE_COUNTS
                  if isinstance(run.results[task].get(name), (int, float)) and not math.isnan(run.results[task][name])]
        if counts:
            parts.append(f"{task}: {', '.join(counts)}")
    return "; ".join(parts)


def render_markdown(runs: list[Run], sections: list[Section], seed: int, n: int) -> str:
    out = ["# lmms-vr report", "", f"Rows marked **{MINE.strip()}** are your runs; every other row is a paper's reference row, "
           "with its source. Confidence intervals: 95% percentile bootstrap over questions (VRBench: over videos) "
           f"({n} resamples, seed {seed}).", "", "Runs:", ""]
    for run in runs:
        failures = failure_summary(run)
        out.append(f"- **{run.label}**: " + ", ".join(f"`{p}`" for p in run.paths) + f" — tasks {', '.join(sorted(run.results))}"
                   + (f" (failure counts: {failures})" if failures else ""))
    for section in sections:
        out += ["", f"## {BENCHMARK_TITLES[section.benchmark]}", "", f"Paper: {REFERENCE_ROWS[section.benchmark]['paper']}", ""]
        out += [markdown_table(t) for t in section.tables]
        out += [f"![{title}]({path.name})\n" for title, path in section.figures]
    return "\n".join(out) + "\n"


CSS = """
body { font-family: -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; margin: 24px auto; max-width: 1200px; color: #222; padding: 0 16px; }
h1 { font-size: 24px; } h2 { font-size: 20px; border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 36px; } h4 { font-size: 15px; margin: 22px 0 6px; }
table { border-collapse: collapse; font-size: 12.5px; margin-bottom: 4px; }
th, td { border: 1px solid #d5d5d5; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } td:first-child, td:nth-child(2), th:first-child, th:nth-child(2) { text-align: left; }
tr.mine td { background: #fff4d6; font-weight: 600; } tr.paper td { color: #444; }
.note { font-size: 12px; color: #666; margin: 2px 0; } .scroll { overflow-x: auto; }
figure { margin: 16px 0; } figure img { max-width: 100%; border: 1px solid #eee; } figcaption { font-size: 12px; color: #555; }
.legend { background: #fff4d6; padding: 2px 6px; font-weight: 600; }
"""


def render_html(runs: list[Run], sections: list[Section], seed: int, n: int) -> str:
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>lmms-vr report</title>",
             f"<style>{CSS}</style></head><body><h1>lmms-vr report</h1>",
             f"<p><span class='legend'>{html.escape(MINE)}highlighted rows</span> are your runs; every other row is a paper's reference "
             f"row with its source. Confidence intervals: 95% percentile bootstrap over questions, VRBench over videos ({n} resamples, seed {seed}).</p><ul>"]
    for run in runs:
        failures = failure_summary(run)
        parts.append(f"<li><b>{html.escape(run.label)}</b>: {html.escape(', '.join(str(p) for p in run.paths))} — tasks "
                     f"{html.escape(', '.join(sorted(run.results)))}"
                     + (f" <span class='note'>(failure counts: {html.escape(failures)})</span>" if failures else "") + "</li>")
    parts.append("</ul>")
    for section in sections:
        parts.append(f"<h2>{BENCHMARK_TITLES[section.benchmark]}</h2><p class='note'>Paper: {html.escape(REFERENCE_ROWS[section.benchmark]['paper'])}</p>")
        parts += [f"<div class='scroll'>{html_table(t)}</div>" for t in section.tables]
        for title, path in section.figures:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
            # onload/onerror: a plot the browser cannot decode says so instead of showing nothing.
            parts.append(f"<figure><img alt='{html.escape(title)}' onload='this.dataset.ok=1' "
                         f"onerror=\"this.replaceWith('[plot could not be displayed]')\" src='data:image/png;base64,{encoded}'>"
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
    if not sections:
        parts.append("<p>No task of this suite in the results given.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_report(items: Sequence[str], out: Path, n: int = 1000, seed: int = 0) -> dict:
    """Read the runs, compute the statistics, write report.md / report.html / report.json / PNGs."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(items)
    specs = scoring.task_specs()
    stats = {(run.label, task): task_stats(run, task, n, seed) for run in runs for task in run.results if task in specs}
    sections = [s for s in (build(runs, stats, out, n, seed) for build in SECTIONS) if s is not None]
    if not sections:
        raise DataError(f"none of the results given holds a task of this suite ({', '.join(sorted(specs))})")
    (out / "report.md").write_text(render_markdown(runs, sections, seed, n), encoding="utf-8")
    (out / "report.html").write_text(render_html(runs, sections, seed, n), encoding="utf-8")
    data = {
        "seed": seed, "bootstrap": n,
        "runs": {run.label: {"paths": [str(p) for p in run.paths], "tasks": sorted(run.results)} for run in runs},
        "tasks": {f"{label}|{task}": {"point": s.point, "ci": s.ci, "questions": s.questions, "note": s.note} for (label, task), s in stats.items()},
        "sections": {s.benchmark: {"tables": [{"title": t.title, "columns": t.columns, "rows": [c for c, _ in t.rows]} for t in s.tables],
                                   "figures": [p.name for _, p in s.figures], **s.data} for s in sections},
    }
    (out / "report.json").write_text(json.dumps(_json_ready(data), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def main(args) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
    build_report(args.results, Path(args.out), n=args.bootstrap, seed=args.seed)
    print(f"report written to {Path(args.out) / 'report.md'} and {Path(args.out) / 'report.html'}")
    return 0
