"""`lmms-vr judge-agreement`: how far a candidate judge is from the reference judge on the same samples,
with confidence intervals (docs/results.md, "Judge agreement").

    lmms-vr judge-agreement RUN... --candidate MODEL [--reference MODEL] [--cache FILE] [--out agreement.json]
    lmms-vr judge-agreement RUN... --candidate MODEL --calibrate N [--max-requests M] [--max-cost USD]

RUN is what `lmms-vr score` reads, optionally `LABEL=RUN`. Both judges' verdicts are read from the
judge cache (`agreement_pairs`: nothing sent); `--calibrate N` first has the reference judge a
stratified subset within a bound (`agreement_calibration`). The document (stdout, `--out`, shown by
`lmms-vr report --agreement`): agreement and kappa per judge call type, both judges' headline
metrics and their paired difference, the runs' ranking agreement, each with bootstrap CIs; the
snapshots that answered; what was not compared and why.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.agreement_calibration import calibrate
from lmms_video_reasoning.utils.results.agreement_pairs import (CallPairs, Setup, Side, call_summary, metric_differences,
                                                                pair_verdicts, ranking_agreement, read_pair, snapshots)
from lmms_video_reasoning.utils.results.report import json_ready
from lmms_video_reasoning.utils.results.report_plots import error_bars, pyplot, saved
from lmms_video_reasoning.utils.results.report_runs import split_label
from lmms_video_reasoning.utils.results.report_tables import Section, Table
from lmms_video_reasoning.utils.results.run_folders import Gathered, gather_records
from lmms_video_reasoning.utils.results.samples_io import task_spec

FORMAT = "lmms_vr_judge_agreement"  # the key marking an agreement document


def per_benchmark(values: Sequence[str] | None) -> tuple[str | None, dict[str, str]]:
    """`--reference` / `--candidate` values: `MODEL` for every benchmark, `BENCH=MODEL` for one."""
    common, named = None, {}
    for value in values or []:
        name, sep, model = value.partition("=")
        if sep and name in {b.name for b in registry.benchmarks()} | {a for b in registry.benchmarks() for a in b.aliases}:
            named[registry.get(name).name] = model
        else:
            common = value
    return common, named


def side_for(benchmark: str, common: str | None, named: dict[str, str], cache: Path | None, default_model: str | None) -> Side:
    model = named.get(benchmark) or common or default_model
    if not model:
        raise DataError("give --candidate MODEL: the judge model whose verdicts are compared (as its runs named it)")
    return Side(model, cache)


def gather_runs(paths: Sequence[str], task: str | None) -> list[tuple[str, Gathered]]:
    """(run label, task records) for every RUN argument (`LABEL=PATH` names the run)."""
    found: list[tuple[str, Gathered]] = []
    for item in paths:
        label, path = split_label(item)
        gathered, skipped, _missing = gather_records(path, task)
        for line in skipped:
            print(f"NOT COMPARED: {line}")
        taken = {name for name, _ in found}  # runs of the earlier arguments: a repeated name gets its path
        found += [(label or (f"{g.run} ({path})" if g.run in taken else g.run), g) for g in gathered]
    return found


def compare(found: list[tuple[str, Gathered]], setup: Setup, n: int, seed: int, only: set | None = None) -> dict:
    """The agreement document for the runs (restricted to `only` (task, sample id) keys when given)."""
    calls: dict[tuple[str, str], CallPairs] = {}
    coverage, metrics, judged_by = [], [], defaultdict(lambda: ([], []))
    sampled: dict[tuple[str, str], tuple] = {}
    for run, item in found:
        if only is not None:
            item = replace(item, records=[r for r in item.records if (item.task, str(r["sample_id"])) in only])
            if not item.records:
                continue
        pair = read_pair(run, item, setup)
        bench = registry.get(pair.benchmark).scoring
        unpaired: Counter = Counter()
        for record, reference, candidate in zip(pair.records, pair.reference, pair.candidate):
            verdicts, missed = pair_verdicts(bench, reference, candidate)
            unpaired.update(missed)
            unit = (pair.task, bench.unit(record))
            for call, _item, a, b in verdicts:
                entry = calls.setdefault((pair.benchmark, call), CallPairs(pair.benchmark, call, bench.rating_scale(call)))
                entry.units[unit].append((a, b))
        judged_by[pair.benchmark][0].extend(pair.reference)
        judged_by[pair.benchmark][1].extend(pair.candidate)
        rows, reference_sampled, candidate_sampled = metric_differences(pair, n, seed)
        metrics += rows
        if reference_sampled is not None:
            sampled[(run, pair.task)] = (reference_sampled, candidate_sampled)
        complete = sum(r.complete and c.complete for r, c in zip(pair.reference, pair.candidate))
        coverage.append({"run": run, "task": pair.task, "benchmark": pair.benchmark, "samples": len(pair.records),
                         "compared": complete,
                         "reference_incomplete": sum(not r.complete for r in pair.reference),
                         "candidate_incomplete": sum(not c.complete for c in pair.candidate),
                         "unpaired_requests": dict(unpaired.most_common())})
    judges = {benchmark: {name: {"model": sides[benchmark].model, "cache": str(sides[benchmark].cache), "snapshots": snapshots(judged)}
                          for name, sides, judged in (("reference", setup.reference, both[0]), ("candidate", setup.candidate, both[1]))}
              for benchmark, both in judged_by.items()}
    return {FORMAT: 1, "seed": seed, "bootstrap": n, "judges": judges,
            "calls": [call_summary(c, n, seed) for _, c in sorted(calls.items())],
            "metrics": metrics, "ranking": ranking_agreement(sampled, n, seed), "coverage": coverage}


def snapshot_text(side: dict, none: str) -> str:
    return ", ".join(f"{m} x{c}" for m, c in side["snapshots"].items()) or none


def number_text(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def interval_text(interval: Any, digits: int = 3) -> str:
    return "–" if not interval else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def print_document(document: dict) -> None:
    for benchmark, sides in document["judges"].items():
        reference, candidate = sides["reference"], sides["candidate"]
        print(f"\n{benchmark}: reference {reference['model']} ({snapshot_text(reference, 'no verdicts')}) vs candidate "
              f"{candidate['model']} ({snapshot_text(candidate, 'no verdicts')})")
    print("\nverdict agreement per judge call type (95% bootstrap CIs):")
    for c in document["calls"]:
        print(f"  {c['benchmark']:<10} {c['call']:<40} pairs {c['pairs']:>5}  agreement {number_text(c['agreement'])} {interval_text(c['agreement_ci'])}"
              f"  {c['statistic']} {number_text(c['kappa'])} {interval_text(c['kappa_ci'])}")
    if document["metrics"]:
        print("\nheadline metrics, candidate - reference (same samples, paired bootstrap):")
        for m in document["metrics"]:
            print(f"  {m['run']} {m['task']:<16} {m['metric']:<18} reference {number_text(m['reference'], 2)}  candidate {number_text(m['candidate'], 2)}"
                  f"  difference {number_text(m['difference'], 2)} {interval_text(m['ci'], 2)}  ({m['samples']} samples)")
    for r in document["ranking"]:
        print(f"\nranking of {len(r['runs'])} runs, {r['task']} {r['metric']}: Kendall tau-b {number_text(r['tau'])} {interval_text(r['ci'])} "
              f"({r['questions']} questions)")
    for row in document["coverage"]:
        left = row["samples"] - row["compared"]
        if left or row["unpaired_requests"]:
            print(f"\nNOT COMPARED in {row['run']} {row['task']}: {left} of {row['samples']} samples (reference incomplete "
                  f"{row['reference_incomplete']}, candidate incomplete {row['candidate_incomplete']}); requests not paired: "
                  + (", ".join(f"{k} x{v}" for k, v in row["unpaired_requests"].items()) or "none"))


# The agreement document read back: its section in `lmms-vr report --agreement FILE`


def read_document(path: Path) -> dict:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: not a judge agreement file ({error}); write one with `lmms-vr judge-agreement ... --out FILE`") from None
    if not isinstance(document, dict) or FORMAT not in document:
        raise DataError(f"{path}: not a judge agreement file (written by `lmms-vr judge-agreement --out FILE`)")
    return document


def agreement_plot(document: dict, path: Path) -> Path:
    """Kappa per judge call type and the headline metrics' differences, each with its 95% CI."""
    plt = pyplot()
    calls, metrics = document["calls"], document["metrics"]
    rows = max(len(calls), len(metrics), 1)
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.2 + 0.38 * rows), dpi=110)
    for ax, entries, value_key, ci_key, label, title in (
            (axes[0], calls, "kappa", "kappa_ci", lambda c: f"{c['benchmark']} {c['call']}", "kappa (weighted for ratings)"),
            (axes[1], metrics, "difference", "ci", lambda m: f"{m['run']} {m['task']} {m['metric']}", "candidate − reference")):
        shown = [e for e in entries if isinstance(e.get(value_key), (int, float)) and not math.isnan(e[value_key])]
        ys = list(range(len(shown)))[::-1]
        values = [e[value_key] for e in shown]
        intervals = [tuple(e[ci_key]) if e.get(ci_key) else None for e in shown]
        ax.barh(ys, values, xerr=error_bars(values, intervals) if any(intervals) else None, color="#4c72b0",
                capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333"})
        ax.scatter(values, ys, s=12, color="black", zorder=3)  # a value of 0 has no bar: the dot shows it
        ax.set_yticks(ys, [label(e) for e in shown], fontsize=8)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        if value_key == "kappa":
            ax.set_xlim(min(-0.1, *(v for v in values), *(i[0] for i in intervals if i)) if values else -0.1, 1.05)
    return saved(fig, path)


def agreement_section(path: Path, out: Path, index: int = 1):
    """The report's section for one agreement file: the judges and their snapshots, the tables, the plot."""
    document = read_document(path)
    judges = "; ".join(f"{registry.get(b).title}: reference {s['reference']['model']} (snapshots: {snapshot_text(s['reference'], 'none')}), "
                       f"candidate {s['candidate']['model']} (snapshots: {snapshot_text(s['candidate'], 'none')})"
                       for b, s in document["judges"].items())
    calls = Table("Verdict agreement per judge call type (95% bootstrap CIs)",
                  ["Benchmark", "Call", "Pairs", "Agreement", "95% CI", "Kappa", "95% CI", "Statistic"],
                  [([registry.get(c["benchmark"]).title, c["call"], str(c["pairs"]), number_text(c["agreement"]), interval_text(c["agreement_ci"]),
                     number_text(c["kappa"]), interval_text(c["kappa_ci"]), c["statistic"]], True) for c in document["calls"]],
                  [f"Bootstrap over questions ({document['bootstrap']} resamples, seed {document['seed']}); kappa is NaN (n/a) "
                   "where both judges gave one and the same label throughout."]
                  + [f"{row['run']} {row['task']}: {row['samples'] - row['compared']} of {row['samples']} samples not compared"
                     for row in document["coverage"] if row["samples"] > row["compared"]])
    metrics = Table("Headline metrics under both judges (candidate − reference, paired)",
                    ["Run", "Task", "Metric", "Reference", "Candidate", "Difference", "95% CI", "Samples"],
                    [([m["run"], m["task"], m["metric"], number_text(m["reference"], 2), number_text(m["candidate"], 2),
                       f"{m['difference']:+.2f}" if isinstance(m["difference"], (int, float)) else "n/a", interval_text(m["ci"], 2),
                       str(m["samples"])], True) for m in document["metrics"]],
                    ["On the samples both judges judged completely."])
    tables = [calls, metrics]
    if document["ranking"]:
        tables.append(Table("Ranking agreement across runs (Kendall tau-b)", ["Task", "Metric", "Runs", "Tau", "95% CI", "Questions"],
                            [([r["task"], r["metric"], ", ".join(r["runs"]), number_text(r["tau"]), interval_text(r["ci"]),
                               str(r["questions"])], True) for r in document["ranking"]]))
    calibration = document.get("calibration")
    intro = f"Judges: {judges}." + (f" Calibration: {calibration['samples']} samples judged by the reference "
                                    f"({calibration['bound']['calls']} requests, {calibration['bound']['spent_usd']:.4f} USD)."
                                    if calibration else "")
    figure = agreement_plot(document, out / f"judge_agreement_{index}.png")
    return Section("judge_agreement", tables, [("Judge agreement: kappa and metric differences with 95% CIs", figure)],
                   {"agreement_file": str(path)}, title="Judge agreement", intro=intro)


def main(args) -> int:
    from lmms_video_reasoning.judges import JudgeConfigError
    from lmms_video_reasoning.judges import config as judge_config

    found = gather_runs(args.runs, args.task)
    benchmarks = sorted({task_spec(g.task).benchmark for _, g in found})
    shared = Path(args.cache).expanduser() if args.cache else judge_config.cache_path_from_env()
    if shared is None and not (args.reference_cache and args.candidate_cache):
        raise DataError("the judge cache is off (LMMS_VR_JUDGE_CACHE=off): give --cache FILE (or --reference-cache and --candidate-cache)")
    reference_common, reference_named = per_benchmark(args.reference)
    candidate_common, candidate_named = per_benchmark(args.candidate)
    reference_cache = Path(args.reference_cache).expanduser() if args.reference_cache else shared
    candidate_cache = Path(args.candidate_cache).expanduser() if args.candidate_cache else shared
    setup = Setup(
        {b: side_for(b, reference_common, reference_named, reference_cache, judge_config.benchmark_defaults(b).model) for b in benchmarks},
        {b: side_for(b, candidate_common, candidate_named, candidate_cache, None) for b in benchmarks})
    for b in benchmarks:
        if setup.reference[b].model == setup.candidate[b].model and setup.reference[b].cache == setup.candidate[b].cache:
            raise DataError(f"{b}: the reference and the candidate are the same judge ({setup.reference[b].model}); give --candidate")
    calibration, only = None, None
    try:
        if args.calibrate is not None:
            if args.calibrate < 1:
                raise DataError("--calibrate N needs N >= 1 samples")
            only, calibration = calibrate(found, setup, args.calibrate, args)
        document = compare(found, setup, args.bootstrap, args.seed, only)
    except JudgeConfigError as error:
        raise DataError(f"the reference judge cannot run: {error}") from None
    if calibration is not None:
        document["calibration"] = calibration
    print_document(document)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_ready(document), indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    print(f"\nagreement written to {out} (show it in a report: lmms-vr report RESULTS... --agreement {out})")
    compared = sum(row["compared"] for row in document["coverage"])
    if not compared:
        print("nothing compared: no sample has the verdicts of both judges in the cache(s)", file=sys.stderr)
        return 1
    return 0
