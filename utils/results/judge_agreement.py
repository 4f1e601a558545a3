"""`lmms-vr judge-agreement`: how far a candidate judge (e.g. a local Qwen or DeepSeek) is from the
reference judge (the paper's GPT-4o / DeepSeek-V3) on the same samples, with confidence intervals.

    lmms-vr judge-agreement RUN... --candidate MODEL [--reference MODEL] [--cache FILE] [--out agreement.json]
    lmms-vr judge-agreement RUN... --candidate MODEL --calibrate N [--max-requests M] [--max-cost USD]

RUN is what `lmms-vr score` reads (an lmms-eval output folder, a samples file, a predictions
file), optionally `LABEL=RUN`. Each benchmark's own judging code is run once per sample and per
judge with a reader of the judge cache (`judges.CacheOnlyJudge`: no key, no request); every judge
request it makes is recorded, so the two judges' replies to the same request pair up (the cache
keys them by judge model: the same prompt to two models is two entries). Without `--calibrate`
nothing is sent anywhere: both judges must have judged the runs (e.g. `lmms-vr score` with each).

`--calibrate N` draws N samples (stratified by task and the benchmark's stratum: VCR-Bench
dimension, VRBench reasoning type, CG-Bench sub-category; proportional, seeded), judges them
with the reference judge (its usual configuration: OPENAI_API_KEY / DEEPSEEK_API_KEY, or
`--reference-base-url`), then compares as above on those samples. Before any request it prints
the requests it expects (as many as the candidate needed on those samples) and their approximate
cost, and it never sends more than `--max-requests` (default twice the expected) nor spends more
than `--max-cost` USD (default twice the estimate, when the reference's price is known): past
either, the remaining requests are not sent and their samples are counted as not compared.

Reported (stdout, and the JSON `--out` that `lmms-vr report --agreement` shows):
- per judge call type (each benchmark's judge steps: `ScoringAdapter.verdicts`), the verdict
  agreement rate and Cohen's kappa (weighted kappa, quadratic weights, for ratings such as
  VRBench's 0-10 process ratings), each with a 95% bootstrap CI over questions (VRBench: videos);
- per run, task and headline metric, both judges' values and the paired difference (candidate -
  reference) with its CI, on the samples both judged completely;
- with several runs, Kendall's tau-b between the runs' order under the two judges, with its CI;
- the snapshots that answered for each judge (the replies' `model` field kept in the cache);
- what was not compared and why (a verdict missing from a cache, a step only one judge asked for).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.agreement_calibration import calibrate
from lmms_video_reasoning.utils.results.agreement_pairs import (CallPairs, Setup, Side, call_summary, metric_differences,
                                                                pair_verdicts, ranking_agreement, read_pair, snapshots)
from lmms_video_reasoning.utils.results.agreement_report import FORMAT, interval_text, number_text
from lmms_video_reasoning.utils.results.report import json_ready
from lmms_video_reasoning.utils.results.report_runs import split_label
from lmms_video_reasoning.utils.results.run_folders import Gathered, gather_records
from lmms_video_reasoning.utils.results.samples_io import task_spec


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
    readers: dict = {}
    calls: dict[tuple[str, str], CallPairs] = {}
    coverage, metrics, judged_by = [], [], defaultdict(lambda: ([], []))
    sampled: dict[tuple[str, str], tuple] = {}
    for run, item in found:
        if only is not None:
            item = replace(item, records=[r for r in item.records if (item.task, str(r["sample_id"])) in only])
            if not item.records:
                continue
        pair = read_pair(run, item, setup, readers)
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
    judges = {}
    for benchmark, (reference, candidate) in judged_by.items():
        judges[benchmark] = {
            "reference": {"model": setup.reference[benchmark].model, "cache": str(setup.reference[benchmark].cache),
                          "snapshots": snapshots(reference)},
            "candidate": {"model": setup.candidate[benchmark].model, "cache": str(setup.candidate[benchmark].cache),
                          "snapshots": snapshots(candidate)},
        }
    return {FORMAT: 1, "seed": seed, "bootstrap": n, "judges": judges,
            "calls": [call_summary(c, n, seed) for _, c in sorted(calls.items())],
            "metrics": metrics, "ranking": ranking_agreement(sampled, n, seed), "coverage": coverage}

def print_document(document: dict) -> None:
    for benchmark, sides in document["judges"].items():
        reference, candidate = sides["reference"], sides["candidate"]
        snap = lambda side: ", ".join(f"{m} x{c}" for m, c in side["snapshots"].items()) or "no verdicts"  # noqa: E731
        print(f"\n{benchmark}: reference {reference['model']} ({snap(reference)}) vs candidate {candidate['model']} ({snap(candidate)})")
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
