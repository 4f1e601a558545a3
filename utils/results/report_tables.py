"""The report's tables (one structure, rendered to Markdown and HTML) and its sections per benchmark."""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.results.report_bootstrap import MIN_UNITS
from lmms_video_reasoning.utils.results.report_runs import Run, spec_of
from lmms_video_reasoning.utils.results.report_stats import NotComputed, TaskStats, comparisons_for, interval_of, pairing_note, value_of


MINE = "▶ "


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[list[str], bool]]  # (cells, is the user's row)
    notes: list[str] = field(default_factory=list)


def fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, NotComputed):
        return "not computed"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_ci(interval: tuple[float, float] | None, digits: int = 1) -> str:
    return "–" if interval is None else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def reference(benchmark: str) -> dict:
    """The benchmark's papers' tables (its `reference_tables.json`)."""
    return registry.get(benchmark).reference_tables()


def digits_for(benchmark: str, metric: str) -> int:
    return spec_of(benchmark).digits(metric)


def row_label(label: str, part: str, main: str) -> str:
    """A run's row name: its label, followed by the task (or split) `part` unless that is the benchmark's `main` one."""
    return label if part == main else f"{label} · {part}"


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


@dataclass
class Coverage:
    """What one run beside a paper table scored, against the rows' `provenance` (`reference_tables.json`)."""

    label: str  # the run as its row names it (with its task)
    questions: int | None  # the questions it scored (None: unknown, no samples file nor lmms-eval's n-samples)
    available: int | None  # the questions of the data it drew them from (the release, or the split)
    data: str  # that data in one word before "questions" ("released", "mini-split")
    protocol: str = ""  # how its protocol differs from the rows' ("" = the same)


MISMATCH = "⚠ "  # starts a note saying a run is not on the rows' data or protocol


def provenance_notes(benchmark: str, name: str, coverage: Sequence[Coverage]) -> list[str]:
    """Under a paper table: the data and protocol of its rows, then per run the questions it scored,
    with a `MISMATCH` note where it is not on the rows' data or protocol."""
    prov = reference(benchmark)["tables"][name].get("provenance")
    if not prov:
        return []
    notes = [f"Reference rows: data: {prov['data']}; protocol: {prov['protocol']}."]
    rows_questions = prov.get("questions")
    for run in coverage:
        if run.questions is None:
            scored = f"{run.data} questions, how many unknown (no samples file, no n-samples)"
        elif run.available:
            scored = f"{run.questions:,} of the {run.available:,} {run.data} questions"
            if run.questions < run.available:
                scored += " (a part of it: a --limit or sample run)"
        else:
            scored = f"{run.questions:,} {run.data} questions"
        problems = []
        if rows_questions is None:
            problems.append("the paper does not state the data of its rows, so the run cannot be matched to them")
        elif run.questions != rows_questions:
            problems.append(f"data mismatch: the rows are on {rows_questions:,} questions")
        if run.protocol:
            problems.append(f"protocol mismatch: {run.protocol}")
        if problems:
            notes.append(f"{MISMATCH}{run.label}: {scored}; " + "; ".join(problems) + ".")
        else:
            notes.append(f"{run.label}: {scored}; the same data and protocol as the rows.")
    return notes


def paper_table(benchmark: str, name: str, user_rows: list, groups: Sequence[str] | None = None, title_suffix: str = "",
                coverage: Sequence[Coverage] = ()) -> Table:
    """A paper table with the user's rows first, its source, its note and the runs' `provenance_notes`."""
    spec = reference(benchmark)["tables"][name]
    columns = spec["columns"]
    table_name = name.replace("table", "Table ")
    notes = [f"Paper rows: {reference(benchmark)['citation']}, {table_name}."]
    if spec.get("note"):
        notes.append(spec["note"])
    notes += provenance_notes(benchmark, name, coverage)
    notes += list(dict.fromkeys(note for cells, _ in user_rows for note in getattr(cells, "notes", ())))
    return Table(spec["title"] + title_suffix, ["Model", "Source"] + [spec_of(benchmark).label(c) for c in columns],
                 user_rows + paper_rows(spec, columns, benchmark, table_name, groups), notes)


class Cells(list):
    """A user row's cells, with the notes its table must carry (why a value is not computed)."""

    notes: tuple[str, ...] = ()


def run_row(label: str, source: str, values: Sequence[Any], benchmark: str, columns: Sequence[str]) -> tuple[list[str], bool]:
    cells = Cells([user_cell(label), f"your run · {source}"] + [fmt(v, digits_for(benchmark, c)) for c, v in zip(columns, values)])
    reasons: dict[str, list[str]] = {}  # one note per reason, naming its metrics
    for column, value in zip(columns, values):
        if isinstance(value, NotComputed):
            reasons.setdefault(value.reason, []).append(spec_of(benchmark).label(column))
    cells.notes = tuple(f"{label}: {', '.join(metrics)} not computed ({reason}): the judge failed on more than the allowed "
                        "share of its samples" for reason, metrics in reasons.items())
    return cells, True


HEAD_MARK = " :: "  # in a long note, ends the words its cell keeps
NOTE_WIDTH = 60  # a Note cell longer than this moves under the table, the cell keeps its first words and a reference


def short_notes(rows: list[tuple[list[str], bool]], column: int) -> list[str]:
    """Shorten the long notes of `column` in place to their first words + "[k]"; the footnotes ("[k] full text")."""
    footnotes: list[str] = []
    for cells, _ in rows:
        text = cells[column].replace(HEAD_MARK, ": ")
        if len(text) <= NOTE_WIDTH:
            cells[column] = text
            continue
        head = cells[column].split(HEAD_MARK, 1)[0] if HEAD_MARK in cells[column] else re.split(r" \(|; |: ", text, maxsplit=1)[0]
        head = head if len(head) <= NOTE_WIDTH - 5 else head[: NOTE_WIDTH - 6].rstrip() + "…"
        if text not in footnotes:
            footnotes.append(text)
        cells[column] = f"{head} [{footnotes.index(text) + 1}]"
    return [f"[{k}] {text}" for k, text in enumerate(footnotes, 1)]


def ci_reason(benchmark: str, stats: TaskStats, metric: str) -> str:
    """Why a metric with a value has no interval (the Note cell)."""
    if stats.units is not None and stats.units < MIN_UNITS:
        return f"no CI from {stats.units} {spec_of(benchmark).unit}"
    if stats.sampled is not None and not stats.sampled.trusted(metric):
        return stats.sampled.why_not(metric) + (HEAD_MARK + stats.note if stats.note else "")
    return stats.note or "undefined in too many resamples"


def ci_table(benchmark: str, entries: list[tuple[str, str, TaskStats]]) -> Table:
    """Headline metrics with 95% bootstrap CIs, a row per (run, task, metric); one not computed says why."""
    unit = spec_of(benchmark).unit
    counts = ["Questions"] + ([] if unit == "questions" else [unit.capitalize()])  # the resampling units when not the questions
    rows = []
    for label, task, stats in entries:
        for metric in spec_of(benchmark).headline:
            value = value_of(stats, metric)
            if metric not in stats.point or (math.isnan(value) and not isinstance(value, NotComputed)):
                continue
            digits = digits_for(benchmark, metric)
            interval = None if math.isnan(value) else interval_of(stats, metric)
            if isinstance(value, NotComputed):
                reason = value.reason
            elif interval is None:
                reason = ci_reason(benchmark, stats, metric)
            else:
                reason = f"{stats.failed_judgments} counted wrong" if stats.failed_judgments and metric not in spec_of(benchmark).judge_free else ""
            borrowed = stats.sampled.borrowed if stats.sampled is not None and metric not in spec_of(benchmark).judge_free else ""
            if borrowed:  # verdicts the run did not record: said in the cell, the cache under the table
                reason = (f"{reason}; " if reason else "") + "verdicts borrowed" + HEAD_MARK + borrowed
            rows.append(([user_cell(label), task, spec_of(benchmark).label(metric), fmt(value, digits), fmt_ci(interval, digits),
                          fmt(stats.questions)] + [fmt(stats.units)] * (len(counts) - 1) + [reason], True))
    notes = [f"Percentile bootstrap over {unit}, re-aggregated by the benchmark's own metric functions."
             + (f" Questions: the questions answered; {counts[1]}: the {unit} they belong to, what the bootstrap "
                "resamples." if len(counts) > 1 else ""),
             "judge_failed N of M: judgments that failed after retries; under the allowed share they count as wrong answers, "
             "beyond it the metric is not computed."]
    columns = ["Run", "Task", "Metric", "Value", "95% CI", *counts, "Note"]
    return Table("95% bootstrap confidence intervals (headline metrics)", columns, rows, notes + short_notes(rows, len(columns) - 1))


def comparison_tables(benchmark: str, tasks: Sequence[str], stats: dict, runs: list[Run], n: int, seed: int) -> list[Table]:
    """The paired comparisons of the runs' `tasks` (`comparisons_for`) as a table; none when no two runs share a task's samples."""
    comparisons = comparisons_for(benchmark, tasks, stats, runs, n, seed)
    if not comparisons:
        return []
    rows = []
    for task, base, other, differences in comparisons:
        for d in differences:
            if d.metric not in spec_of(benchmark).headline or (math.isnan(d.difference) and not d.why):
                continue
            digits = digits_for(benchmark, d.metric)
            if d.why:
                cells = ["not computable", "–", str(d.common), "–", d.why]
            else:
                verdict = "–" if d.interval is None else ("yes" if d.interval[0] > 0 or d.interval[1] < 0 else "no (within noise)")
                note = "" if d.interval is not None or d.common >= MIN_UNITS else f"no CI from {d.common} {spec_of(benchmark).unit}"
                cells = [f"{d.difference:+.{digits}f}", fmt_ci(d.interval, digits), str(d.common), verdict, note]
            rows.append(([f"{MINE}{other} − {base}", task, spec_of(benchmark).label(d.metric)] + cells, True))
    unit = spec_of(benchmark).unit
    return [Table(f"Paired comparisons (difference with 95% CI, same {unit})", ["Runs", "Task", "Metric", "Difference", "95% CI",
                  f"Common {unit}", "Significant", "Note"], rows,
                  [f"Paired bootstrap: the {unit} both runs answered, resampled together.", pairing_note()] + short_notes(rows, 7))]


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md_text(text: Any) -> str:
    """Text as literal Markdown: what Markdown or HTML would interpret escaped, line breaks as spaces."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", re.sub(r"[\r\n]+", " ", str(text)))


def markdown_table(table: Table) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    out = [f"#### {md_text(table.title)}", "", line([md_text(c) for c in table.columns]), line(["---"] * len(table.columns))]
    for cells, mine in table.rows:
        out.append(line([f"**{md_text(c)}**" if mine and i == 0 else md_text(c) for i, c in enumerate(cells)]))
    out += [""] + [f"_{md_text(note)}_  " for note in table.notes]
    return "\n".join(out) + "\n"


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        f'<tr class="{"mine" if mine else "paper"}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        for cells, mine in table.rows)
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in table.notes)
    return f"<h4>{html.escape(table.title)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


@dataclass
class Section:
    benchmark: str
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    title: str = ""  # a section that is not a benchmark's (e.g. judge agreement): its heading
    intro: str = ""  # ... and the line under it (a benchmark's section names its paper there)

    def heading(self) -> tuple[str, str]:
        if self.title:
            return self.title, self.intro
        return registry.get(self.benchmark).title, f"Paper: {reference(self.benchmark)['citation']}"


def stats_row(label: str, source: str, stats: TaskStats | None, benchmark: str, columns: Sequence[str]) -> tuple[list[str], bool]:
    """A run's row of a paper table: its values of the table's `columns` (`run_row`)."""
    return run_row(label, source, [value_of(stats, column) for column in columns], benchmark, columns)


def released_coverage(label: str, run: Run, task: str, stats: TaskStats | None, released: int, protocol: str = "") -> Coverage:
    """A run's task beside a paper table whose rows are on every released question: the questions it scored
    (its samples', else lmms-eval's n-samples)."""
    questions = stats.questions if stats is not None and stats.questions is not None else run.sizes.get(task)
    return Coverage(label, questions, released, "released", protocol)
