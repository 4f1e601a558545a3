"""`lmms-vr report`: the papers' tables for your runs, with bootstrap CIs, comparisons and plots (docs/results.md).

    lmms-vr report RESULTS... [--out DIR] [--seed S] [--bootstrap N] [--pairs baseline|all]

RESULTS are results JSON files or folders holding them, each optionally `LABEL=`; runs with one
label and different tasks are one model. Writes `DIR/report.md`, a self-contained
`DIR/report.html`, `DIR/*.png` and `DIR/report.json` (every number). Each benchmark's section is
its folder's `report.py`; the `report_*` modules beside this one are the shared machinery.
"""

from __future__ import annotations

import base64
import html
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.report_runs import Run, Unread, load_runs
from lmms_video_reasoning.utils.results.report_stats import PAIRING, PAIRINGS, pairing_note, task_stats
from lmms_video_reasoning.utils.results.report_tables import MINE, Section, html_table, markdown_table, md_text
from lmms_video_reasoning.utils.results.samples_io import task_specs


def json_ready(value: Any) -> Any:
    """`value` as JSON writes it, NaN as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def failure_summary(run: Run) -> str:
    """Per task, the benchmark's failure counts (no answer, no verdict, no parse...): never silently a zero."""
    parts = []
    specs = task_specs()
    for task in sorted(run.results):
        declared = registry.get(specs[task].benchmark).failure_counts if task in specs else ()
        counts = [f"{name} {run.results[task][name]:g}" for name in declared
                  if isinstance(run.results[task].get(name), (int, float)) and not math.isnan(run.results[task][name])]
        if counts:
            parts.append(f"{task}: {', '.join(counts)}")
    return "; ".join(parts)


def settings_summary(run: Run) -> str:
    """Per task, the score-changing settings that differ from the task's declared ones, and the environment's overrides."""
    from lmms_video_reasoning.utils.core.settings import FROM_ENV

    parts, specs = [], task_specs()
    for task in sorted(run.settings):
        values, spec = run.settings[task], specs.get(task)  # a group or another suite's task: nothing declared
        declared = registry.get(spec.benchmark).task_options(spec.declared) if spec is not None else {}
        changed = [f"{name}={value}" for name, value in values.items() if name != FROM_ENV and name in declared and declared[name] != value]
        overrides = [f"{name}={value}" for name, value in (values.get(FROM_ENV) or {}).items()]
        if changed or overrides:
            parts.append(f"{task}: " + ", ".join(changed + [f"from the environment {o}" for o in overrides]))
    return "; ".join(parts)


def run_notes(run: Run) -> list[tuple[str, str]]:
    """What a run's line says besides its files and tasks: its failure counts, its settings that are not the declared ones."""
    notes = [("failure counts", failure_summary(run)), ("settings not the tasks' defaults", settings_summary(run))]
    return [(name, text) for name, text in notes if text]


def legend(seed: int, n: int) -> str:
    """The report's header after "... are your runs;": the paper rows and what the intervals resample."""
    others = [f"{b.title}: over {b.report.unit}" for b in registry.benchmarks() if b.report is not None and b.report.unit != "questions"]
    units = "questions" + (f" ({'; '.join(others)})" if others else "")
    return (f"every other row is a paper's reference row, with its source. Confidence intervals: 95% percentile bootstrap "
            f"over {units} ({n} resamples, seed {seed}).")


def render_markdown(runs: list[Run], sections: list[Section], seed: int, n: int, unread: Sequence[Unread] = ()) -> str:
    out = ["# lmms-vr report", "", f"Rows marked **{MINE.strip()}** are your runs; {legend(seed, n)}", ""]
    out += ([md_text(pairing_note()), ""] if len(runs) > 1 else []) + ["Runs:", ""]
    for run in runs:
        out.append(f"- **{md_text(run.label)}**: " + ", ".join(md_text(p) for p in run.paths) + f" — tasks {md_text(', '.join(sorted(run.results)))}"
                   + "".join(f" ({name}: {md_text(text)})" for name, text in run_notes(run)))
    if unread:
        out += ["", "Not read (not in any table below):", ""]
        out += [f"- {md_text(u.path)}: {md_text(u.reason)}" for u in unread]
    for section in sections:
        title, intro = section.heading()
        out += ["", f"## {md_text(title)}", "", md_text(intro), ""]
        out += [markdown_table(t) for t in section.tables]
        out += [f"![{md_text(title)}]({path.name})\n" for title, path in section.figures]
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


def render_html(runs: list[Run], sections: list[Section], seed: int, n: int, unread: Sequence[Unread] = ()) -> str:
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>lmms-vr report</title>",
             f"<style>{CSS}</style></head><body><h1>lmms-vr report</h1>",
             f"<p><span class='legend'>{html.escape(MINE)}highlighted rows</span> are your runs; {html.escape(legend(seed, n))}</p>"
             + (f"<p>{html.escape(pairing_note())}</p>" if len(runs) > 1 else "") + "<ul>"]
    for run in runs:
        parts.append(f"<li><b>{html.escape(run.label)}</b>: {html.escape(', '.join(str(p) for p in run.paths))} — tasks "
                     f"{html.escape(', '.join(sorted(run.results)))}"
                     + "".join(f" <span class='note'>({name}: {html.escape(text)})</span>" for name, text in run_notes(run)) + "</li>")
    parts.append("</ul>")
    if unread:
        parts.append("<p>Not read (not in any table below):</p><ul>" + "".join(
            f"<li>{html.escape(str(u.path))}: {html.escape(u.reason)}</li>" for u in unread) + "</ul>")
    for section in sections:
        title, intro = section.heading()
        parts.append(f"<h2>{html.escape(title)}</h2><p class='note'>{html.escape(intro)}</p>")
        parts += [f"<div class='scroll'>{html_table(t)}</div>" for t in section.tables]
        for title, path in section.figures:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
            # onload/onerror: a plot the browser cannot decode says so instead of showing nothing.
            parts.append(f"<figure><img alt='{html.escape(title)}' onload='this.dataset.ok=1' "
                         f"onerror=\"this.replaceWith('[plot could not be displayed]')\" src='data:image/png;base64,{encoded}'>"
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_report(items: Sequence[str], out: Path, n: int = 1000, seed: int = 0, pairs: str = "baseline",
                 agreement: Sequence[str] = ()) -> dict:
    """Write report.md / .html / .json and the PNGs. `pairs`: `PAIRINGS` (see `pairs_of`); `agreement`:
    `lmms-vr judge-agreement --out` files, each a section."""
    if pairs not in PAIRINGS:
        raise DataError(f"--pairs {pairs!r}: use one of {', '.join(PAIRINGS)}")
    token = PAIRING.set(pairs)  # the pairs the sections compare (`pairs_of`)
    try:
        out.mkdir(parents=True, exist_ok=True)
        unread: list[Unread] = []
        runs = load_runs(items, unread)
        specs = task_specs()
        stats = {(run.label, task): task_stats(run, task, n, seed) for run in runs for task in run.results if task in specs}
        builders = [b.report.section for b in registry.benchmarks() if b.report is not None]
        sections = [s for s in (build(runs, stats, out, n, seed) for build in builders) if s is not None]
        if agreement and sections:
            from lmms_video_reasoning.utils.results.judge_agreement import agreement_section

            sections += [agreement_section(Path(path), out, index) for index, path in enumerate(agreement, 1)]
        if not sections:
            not_read = "; ".join(f"{u.path}: {u.reason}" for u in unread)
            raise DataError(f"none of the results given holds a task of this suite ({', '.join(sorted(specs))})"
                            + (f"; not read: {not_read}" if not_read else ""))
        (out / "report.md").write_text(render_markdown(runs, sections, seed, n, unread), encoding="utf-8")
        (out / "report.html").write_text(render_html(runs, sections, seed, n, unread), encoding="utf-8")
        data = {
            "seed": seed, "bootstrap": n, "pairs": pairs,
            "not_read": [{"path": str(u.path), "reason": u.reason} for u in unread],
            "runs": {run.label: {"paths": [str(p) for p in run.paths], "tasks": sorted(run.results), "settings": run.settings} for run in runs},
            "tasks": {f"{label}|{task}": {"point": s.point, "ci": s.ci, "questions": s.questions, "units": s.units, "note": s.note}
                      for (label, task), s in stats.items()},
            "sections": {s.benchmark: {"tables": [{"title": t.title, "columns": t.columns, "rows": [c for c, _ in t.rows], "notes": t.notes} for t in s.tables],
                                       "figures": [p.name for _, p in s.figures], **s.data} for s in sections},
        }
        (out / "report.json").write_text(json.dumps(json_ready(data), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return data
    finally:
        PAIRING.reset(token)


def main(args) -> int:
    data = build_report(args.results, Path(args.out), n=args.bootstrap, seed=args.seed, pairs=args.pairs, agreement=args.agreement or ())
    for entry in data["not_read"]:
        print(f"lmms-vr report: not read: {entry['path']}: {entry['reason']}", file=sys.stderr)
    print(f"report written to {Path(args.out) / 'report.md'} and {Path(args.out) / 'report.html'}")
    return 0
