"""CG-Bench in `lmms-vr report`: the paper's Table 3 with every mode of a run joined per question (CRR and
acc.@IoU across tasks run separately), CIs, the ablation tables, breakdowns with their CIs, plots.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

from lmms_video_reasoning.cg_bench.scoring import DURATION_BUCKETS, SUB_CATEGORIES, crr, duration_bucket
from lmms_video_reasoning.cg_bench.task import HEADLINE, MODALITY_INPUTS, MODES, TEXT_INPUTS, TEXT_ONLY, Outcome, joined_on_qid, task_metrics
from lmms_video_reasoning.utils.core.registry import ReportSpec
from lmms_video_reasoning.utils.results.report_bootstrap import Sampled, bootstrap_ci
from lmms_video_reasoning.utils.results.report_plots import grouped_bars
from lmms_video_reasoning.utils.results.report_runs import Run
from lmms_video_reasoning.utils.results.report_stats import NotComputed, TaskStats, trusted_only, value_of
from lmms_video_reasoning.utils.results.report_tables import (
    Coverage, Section, Table, ci_table, comparison_tables, digits_for, fmt, paper_table, reference, row_label, run_row, stats_row, user_cell,
)
from lmms_video_reasoning.cg_bench.data import RELEASE

LABELS = {"clue_acc": "clue-acc", "long_acc": "long-acc", "miou": "mIoU", "rec_at_iou": "rec.@IoU", "acc_at_iou": "acc.@IoU", "crr": "CRR",
          "oe_acc": "OE-acc", "blind_acc": "blind-acc", "acc_at_iou0": "acc.@IoU (τ=0)"}
SPLITS = {"mini": "cg_bench_", "full": "cg_bench_full_"}  # the prefix of each split's task names
# Which task's records stand for each CG-Bench mode (the combined task first).
MODE_TASKS = {"long": ("mcq", "long"), "clue": ("mcq", "clue"), "grounding": ("mcq", "grounding"), "open": ("open",), "blind": ("blind",)}
# How every run of this suite differs from the protocol the paper describes for Table 3 (README, differences)
OFFICIAL_PROMPTS = ("the official code's prompts and judge (fenced JSON answers, 0/1/2 verdicts), not the paper appendix's "
                    "(bare letter; yes / no / \"need visual clue\"); this suite has no switch for the paper's")
# The paper's prompt & modality settings (Tables 4 and 10) by the suffix of their tasks' names: "_f_s_st" is F+S+ST.
MODALITIES = {**{suffix: suffix[1:].upper().replace("_", "+") for suffix in MODALITY_INPUTS}, **{s: label for s, (_k, label, _i) in TEXT_INPUTS.items()}}
DEFAULT_MODALITY = "the task defaults"  # the row of the plain `cg_bench_*` tasks (the model's settings block decides)
ABLATION_COLUMNS = ("clue_acc", "long_acc", "miou", "acc_at_iou0", "crr", "oe_acc")  # Table 4 / Table 10


def combined_row(label: str, prefix: str, stats: dict, n: int, seed: int, suffix: str = "") -> TaskStats | None:
    """A run's CG-Bench row on one split (its task `prefix`): each mode's outcomes from the first of its tasks the
    run has (`MODE_TASKS`), joined (CRR and acc@IoU across files). `suffix`: the row of the tasks named
    `cg_bench_<kind><suffix>` (a modality ablation, `MODALITIES`)."""
    task_of = {mode: found[0] for mode in MODES  # mode -> the task whose records stand for it
               if (found := [prefix + kind + suffix for kind in MODE_TASKS[mode] if (label, prefix + kind + suffix) in stats])}
    if not task_of:
        return None
    per_task = {task: stats[(label, task)] for task in task_of.values()}
    point, not_computed = {}, {}
    for task, task_stats in per_task.items():
        # a task's NaN (a mode it does not run) never hides another task's value, but a metric a task could not compute stays so
        point.update({m: v for m, v in task_stats.point.items() if m not in point and not math.isnan(v)})
        not_computed.update({m: f"{task}: {reason}" for m, reason in task_stats.not_computed.items() if m not in not_computed})
    not_computed = {m: reason for m, reason in not_computed.items() if m not in point}
    parts = {task: s.sampled for task, s in per_task.items() if s.sampled is not None}
    unsampled = [task for task in per_task if task not in parts]
    combined = TaskStats(point=point, source=", ".join(sorted(per_task)), not_computed=not_computed,
                         failed_judgments="; ".join(f"{t}: {s.failed_judgments}" for t, s in per_task.items() if s.failed_judgments),
                         note="; ".join([f"{t}: {per_task[t].note}" for t in unsampled] + [f"{t}: {per_task[t].note}" for t in parts if per_task[t].note]))
    if parts:
        pairs = [(r, o) for mode, task in task_of.items() if task in parts
                 for r, o in zip(parts[task].records, parts[task].outcomes) if r["mode"] == mode]
        joined = lambda field: "; ".join(dict.fromkeys(getattr(s, field) for s in parts.values() if getattr(s, field)))  # noqa: E731
        sampled = Sampled("cg_bench", [r for r, _ in pairs], [o for _, o in pairs], [*parts.values()][-1].settings, joined("missing_verdicts"),
                          next((s.gap for s in parts.values() if s.gap), ""), joined("borrowed"), set().union(*(s.untrusted for s in parts.values())))
        combined.sampled, combined.questions, combined.units = sampled, sampled.question_count, sampled.unit_count
        computed = sampled.metrics()
        for metric in HEADLINE:  # the joined metrics, and any metric no task reported (none the run could not compute)
            if metric in not_computed:
                combined.point[metric] = math.nan
            elif (metric in ("crr", "acc_at_iou") or metric not in point) and (not unsampled or not math.isnan(computed[metric])):
                combined.point[metric] = computed[metric]
        if n > 0:  # a metric of an unsampled mode is undefined in every resample: no interval
            combined.ci = trusted_only(sampled, bootstrap_ci(sampled, n, seed), combined.point)
    if "crr" not in combined.point and "long_acc" in point and "clue_acc" in point:
        combined.point["crr"] = crr(point["long_acc"], point["clue_acc"])
    return combined


def outcomes_in(row: TaskStats) -> list[Outcome]:
    return [Outcome(**outcome) for outcome in row.sampled.outcomes]


def outcomes_of(row: TaskStats) -> list[Outcome] | None:
    """A joined row's per-answer outcomes, when the report has them as the run scored them (None otherwise)."""
    return None if row.sampled is None or not row.sampled.trusted("acc_at_iou") else outcomes_in(row)


def coverage(name: str, row: TaskStats, split: str) -> Coverage:
    """A joined row beside a paper table: its questions of the split, with the suite's protocol difference."""
    return Coverage(name, row.questions, RELEASE[split][0], f"{split}-split", OFFICIAL_PROMPTS)


def with_acc_at_iou0(row: TaskStats) -> TaskStats:
    """The row with `acc_at_iou0`, from its outcomes (NaN without them): acc.@IoU as the paper defines it (section 3.3)
    at its ablations' tau = 0 (Tables 4, 10, Fig. 7): the share of questions (joined as `task.joined_on_qid`) whose
    long answer is correct and whose tIoU exceeds (`>`) 0; a tIoU of exactly 0 does not count."""
    fields = [] if outcomes_of(row) is None else row.sampled.outcomes
    pairs = joined_on_qid(fields).values()
    row.point["acc_at_iou0"] = 100.0 * sum(fields[i]["value"] == 1.0 and iou > 0 for i, iou in pairs) / len(pairs) if pairs else math.nan
    return row


def blind_values(row: TaskStats, text: TaskStats | None) -> list:
    """The paper's GPT4o (text) row of Table 3 for a run: blind-acc in both accuracy columns, CRR of
    the two (100, or NaN at 0), and from the text-only grounding / open tasks (`TEXT_ONLY`), when the
    run has them, mIoU, rec.@IoU, acc.@IoU (the blind answer joined with the text-only grounding) and OE-acc."""
    blind = value_of(row, "blind_acc")
    if text is None:
        return [blind, blind, None, None, None, crr(blind, blind), None]
    answers, grounding = outcomes_of(row), outcomes_of(text)
    if answers is None or grounding is None:
        joined = math.nan
    else:  # the blind answers with the text-only grounding only (the row's own grounding answers saw the video)
        blind_as_long = [replace(o, mode="long") for o in answers if o.mode == "blind"]
        joined = task_metrics(blind_as_long + [o for o in grounding if o.mode == "grounding"], whole=False)["acc_at_iou"]
    return [blind, blind, value_of(text, "miou"), value_of(text, "rec_at_iou"), joined, crr(blind, blind), value_of(text, "oe_acc")]


BREAKDOWN_COLUMNS = ("long_acc", "clue_acc", "miou", "acc_at_iou", "oe_acc")


def breakdown_cell(row: TaskStats, metrics: dict, metric: str) -> str:
    """A breakdown value, or what the report lacks to compute it as the run did (e.g. "needs CGBENCH_ROOT"),
    or "not computed" for a metric the run has no value of: never a silently different number."""
    if isinstance(value_of(row, metric), NotComputed):
        return "not computed"
    if metric in metrics and not row.sampled.trusted(metric):
        return row.sampled.why_not(metric)
    return fmt(metrics.get(metric), digits_for("cg_bench", metric))


def breakdown_intervals(row: TaskStats, data: dict, n: int, seed: int) -> dict:
    """{group: {key: {metric: 95% CI}}} of a run's breakdown `data`: the run's questions resampled
    (`bootstrap_ci`), each group's headline metrics from its answers, where their outcomes are the run's."""
    if n <= 0:
        return {}
    out: dict = {}
    for group, (key_of, *_about) in BREAKDOWN_GROUPS.items():
        keys = [key_of(outcome) for outcome in outcomes_in(row)]
        for key, metrics in data.get(group, {}).items():
            intervals = bootstrap_ci(row.sampled, n, seed, where=[k == key for k in keys])
            out.setdefault(group, {})[key] = {m: ci for m, ci in trusted_only(row.sampled, intervals).items() if m in metrics and m in HEADLINE}
    return out


def joined_rows(runs: list[Run], stats: dict, n: int, seed: int, suffix: str = "") -> dict[tuple[str, str], TaskStats]:
    """{(run label, split): `combined_row`} of the runs having tasks with this `suffix`."""
    rows = {(run.label, split): combined_row(run.label, prefix, stats, n, seed, suffix) for run in runs for split, prefix in SPLITS.items()}
    return {key: row for key, row in rows.items() if row is not None}


def ablation_tables(runs: list[Run], stats: dict, combined: dict, seed: int) -> Iterator[Table]:
    """Tables 4 (mini split) and 10 (full split): each run's prompt & modality settings (`MODALITIES`, and the
    plain tasks) with acc.@IoU at tau = 0, beside the paper's rows."""
    named: dict[str, list[tuple[str, TaskStats]]] = {"mini": [], "full": []}
    for suffix, modality in [("", DEFAULT_MODALITY), *MODALITIES.items()]:
        # the modality rows show no CI: joined without resampling (n = 0)
        for (label, split), row in (combined if not suffix else joined_rows(runs, stats, 0, seed, suffix)).items():
            with_acc_at_iou0(row)
            if not all(math.isnan(value_of(row, c)) for c in ABLATION_COLUMNS):  # none, e.g. a run of the blind task only: no row
                named[split].append((f"{row_label(label, split, 'mini')} · {modality}", row))
    for split, name in (("mini", "table4"), ("full", "table10")):
        if named[split]:
            table = paper_table("cg_bench", name, [stats_row(row_label, row.source, row, "cg_bench", ABLATION_COLUMNS) for row_label, row in named[split]],
                                coverage=[coverage(row_label, row, split) for row_label, row in named[split]])
            table.notes.append("acc.@IoU (τ=0): the long answer correct and a tIoU above 0 (the paper's ablation default, "
                               "section 3.3), from the per-answer outcomes; Table 3's acc.@IoU is the mean over τ = 0.1-0.5.")
            table.notes += [f"{row_label}: acc.@IoU (τ=0) needs the run's per-sample outcomes as it scored them" for row_label, row in named[split]
                            if math.isnan(row.point["acc_at_iou0"]) and not math.isnan(value_of(row, "acc_at_iou"))]
            yield table


def section(runs: list[Run], stats: dict, out: Path, n: int, seed: int) -> Section | None:
    combined = joined_rows(runs, stats, n, seed)
    if not combined:
        return None
    text_only = joined_rows(runs, stats, 0, seed, TEXT_ONLY)  # its cells show no CI
    section, names = Section("cg_bench"), {key: row_label(*key, "mini") for key in combined}  # (run label, split) -> row name
    columns = reference("cg_bench")["tables"]["table3"]["columns"]
    user = []
    for key, row in combined.items():
        if any(not math.isnan(value_of(row, c)) for c in columns):
            user.append(stats_row(names[key], row.source, row, "cg_bench", columns))
        if not math.isnan(value_of(row, "blind_acc")):  # the paper's "GPT4o (text)" setting
            text = text_only.get(key)
            source = "cg_bench_blind" + (f", {text.source}" if text is not None else "")
            user.append(run_row(f"{names[key]} (blind)", source, blind_values(row, text), "cg_bench", columns))
    table = paper_table("cg_bench", "table3", user, coverage=[coverage(names[key], row, key[1]) for key, row in combined.items()])
    table.notes.append("Your rows join every CG-Bench task of the run per question (CRR and acc.@IoU across files when "
                       "the modes ran as separate tasks); a blind row shows blind-acc in both accuracy columns and their CRR, as the "
                       "paper's GPT4o (text) row, and mIoU, rec.@IoU, acc.@IoU and OE-acc from the run's text-only tasks "
                       f"(cg_bench_grounding{TEXT_ONLY}, cg_bench_open{TEXT_ONLY}) when it has them.")
    section.tables.append(table)
    section.tables += ablation_tables(runs, stats, combined, seed)
    section.tables.append(ci_table("cg_bench", [(names[key], "joined CG tasks", row) for key, row in combined.items()]))
    section.tables += comparison_tables("cg_bench", sorted({task for (_, task) in stats if task.startswith("cg_bench")}), stats, runs, n, seed)

    rows_of = {names[key]: row for key, row in combined.items() if row.sampled}
    breakdowns = {name: breakdown(outcomes_in(row)) for name, row in rows_of.items()}
    intervals = {name: breakdown_intervals(rows_of[name], data, n, seed) for name, data in breakdowns.items()}
    modes = [mode for mode in MODES if any(o["mode"] == mode for row in rows_of.values() for o in row.sampled.outcomes)]
    answers = (f"Questions: the group's questions. Answers: the model's answers to them, one per question and mode that ran "
               f"({', '.join(modes)}: up to {len(modes)} per question); each metric is computed from the answers of its mode.")
    for group, (_key, title, header, _order) in BREAKDOWN_GROUPS.items():
        rows = [([user_cell(name), key, str(metrics["questions"]), str(metrics["n"])] +
                 [breakdown_cell(rows_of[name], metrics, c) for c in BREAKDOWN_COLUMNS], True)
                for name, data in breakdowns.items() for key, metrics in data.get(group, {}).items()]
        if rows:
            section.tables.append(Table(f"Breakdown by {title}", ["Run", header, "Questions", "Answers", *(LABELS[c] for c in BREAKDOWN_COLUMNS)],
                                        rows, ["From the per-sample outcomes (cg_bench.report.breakdown). A cell the report cannot "
                                               "compute as the run did says what it needs.", answers]))
    if breakdowns:
        buckets = [b for b in DURATION_BUCKETS if any(b in d.get("duration", {}) for d in breakdowns.values())]
        metric = "long_acc" if any("long_acc" in m for d in breakdowns.values() for m in d.get("duration", {}).values()) else "oe_acc"
        # a run whose outcomes for the metric are not its run's is left out of the plots
        breakdowns = {name: d for name, d in breakdowns.items() if rows_of[name].sampled.trusted(metric)
                      and not math.isnan(value_of(rows_of[name], metric))}
        domains = sorted({k for d in breakdowns.values() for k in d.get("domain", {})})
        for group, keys, what in (("duration", buckets, "video duration (minutes)"), ("domain", domains, "domain")):
            section.figures.append((f"Accuracy by {group}", grouped_bars(
                out / f"cg_bench_accuracy_by_{group}.png", f"CG-Bench {LABELS[metric]} by {what}", keys,
                [(name, [d.get(group, {}).get(k, {}).get(metric, math.nan) for k in keys],
                  [intervals[name].get(group, {}).get(k, {}).get(metric) for k in keys]) for name, d in breakdowns.items()],
                LABELS[metric])))
    section.data.update(joined={f"{label}|{split}": row.point for (label, split), row in combined.items()},
                        joined_ci={f"{label}|{split}": row.ci for (label, split), row in combined.items()}, breakdown_ci=intervals)
    return section


def report_spec() -> ReportSpec:
    # only oe_acc needs the judge; each run's modes are joined and bootstrapped in `combined_row`
    return ReportSpec(section=section, headline=HEADLINE, labels=LABELS, two_decimals=("miou", "rec_at_iou", "acc_at_iou"),
                      per_task_bootstrap=False, judge_free=(*(m for m in HEADLINE if m != "oe_acc"), "parse_failed", "model_failed"))


# --- Metrics of outcomes per group: the breakdowns (the report's, `lmms-vr score`'s)
NOT_RECORDED = "not recorded"  # the sub-category group of outcomes stored before it was kept (score the samples again)
# The breakdowns: {group: (an outcome's key in it, what the group is, its table's column header, the keys' order)}
BREAKDOWN_GROUPS: dict[str, tuple[Callable[[Outcome], str], str, str, Sequence[str]]] = {
    "duration": (lambda o: duration_bucket(o.duration), "duration (minutes)", "Duration", DURATION_BUCKETS),
    "domain": (lambda o: o.domain, "domain", "Domain", ()),
    "kind": (lambda o: o.kind, "question kind", "Kind", ()),
    "sub_category": (lambda o: o.sub_category or NOT_RECORDED, "sub-category (the paper's 12 level-2 question categories, "
                     "appendix Table 7)", "Sub-category", SUB_CATEGORIES),
}


def breakdown(outcomes: Sequence[Outcome]) -> dict:
    """Metrics per group of `BREAKDOWN_GROUPS` (keys in its order, the others sorted; NaN left out), with
    the group's `questions` and `n` outcomes (one per question and mode scored)."""
    out: dict = {}
    for name, (key, _title, _header, listed) in BREAKDOWN_GROUPS.items():
        buckets: dict[str, list[Outcome]] = {}
        for outcome in outcomes:
            buckets.setdefault(key(outcome), []).append(outcome)
        order = [*listed, *sorted(set(buckets) - set(listed))]
        out[name] = {value: {"n": len(buckets[value]), "questions": len({o.qid for o in buckets[value]}),
                             **{metric: v for metric, v in task_metrics(buckets[value], whole=False).items()
                                if not (isinstance(v, float) and math.isnan(v))}}
                     for value in order if value in buckets}
    return out
