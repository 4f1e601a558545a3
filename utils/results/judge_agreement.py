"""`lmms-vr judge-agreement`: how far a candidate judge is from the reference judge on the same samples,
with confidence intervals (docs/results.md, "Judge agreement").

    lmms-vr judge-agreement RUN... --candidate MODEL [--reference MODEL] [--cache FILE] [--out agreement.json]
    lmms-vr judge-agreement RUN... --candidate MODEL --calibrate N [--max-requests M] [--max-cost USD]

Both judges' verdicts are read from the judge cache (`agreement_pairs`: nothing sent); `--calibrate N`
first has the reference judge a stratified subset within a bound (`calibrate`). The document is
printed, written to `--out` and shown by `lmms-vr report --agreement`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.judges import Judge, JudgeConfig, JudgeConfigError, engine
from lmms_video_reasoning.judges import config as judge_config
from lmms_video_reasoning.judges.config import usd
from lmms_video_reasoning.judges.limits import CallBudget
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.agreement_pairs import (Asked, Side, call_summary, judge_each, metric_differences, pair_verdicts,
                                                                ranking_agreement)
from lmms_video_reasoning.utils.results.report_bootstrap import Sampled
from lmms_video_reasoning.utils.results.report import json_ready
from lmms_video_reasoning.utils.results.report_plots import error_bars, pyplot, saved
from lmms_video_reasoning.utils.results.report_runs import split_label
from lmms_video_reasoning.utils.results.report_tables import Section, Table, fmt, fmt_ci, markdown_table
from lmms_video_reasoning.utils.results.samples_io import Gathered, gather_records, task_spec

FORMAT = "lmms_vr_judge_agreement"  # the key marking an agreement document
Setup = dict[str, dict[str, Side]]  # {"reference" | "candidate": {benchmark: that judge}}


def sides(values: Sequence[str] | None, benchmarks: Sequence[str], cache: Path | None, default=None) -> dict[str, Side]:
    """Each benchmark's judge from `--reference` / `--candidate` values: `MODEL` for every benchmark, `BENCH=MODEL` for one."""
    known = {b.name for b in registry.benchmarks()} | {a for b in registry.benchmarks() for a in b.aliases}
    common, named = None, {}
    for value in values or []:
        name, sep, model = value.partition("=")
        if sep and name in known:
            named[registry.get(name).name] = model
        else:
            common = value
    out = {}
    for benchmark in benchmarks:
        model = named.get(benchmark) or common or (default(benchmark) if default else None)
        if not model:
            raise DataError("give --candidate MODEL: the judge model whose verdicts are compared (as its runs named it)")
        out[benchmark] = Side(model, cache)
    return out


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
    calls: dict[tuple[str, str], dict] = {}  # (benchmark, call type) -> {(task, unit): [(reference label, candidate label)]}
    answered_by: dict[str, dict[str, Counter]] = defaultdict(lambda: {side: Counter() for side in setup})  # the snapshots
    sampled: dict[str, dict] = defaultdict(dict)  # task -> {run: (Sampled under the reference, under the candidate)}
    coverage, metrics = [], []
    for run, item in found:
        records = item.records if only is None else [r for r in item.records if (item.task, str(r["sample_id"])) in only]
        if only is not None and not records:
            continue
        benchmark = task_spec(item.task).benchmark
        bench = registry.get(benchmark).scoring
        settings = bench.settings(records)
        judged = {side: judge_each(bench, records, settings, sides[benchmark].reader(bench)) for side, sides in setup.items()}
        reference, candidate = judged["reference"], judged["candidate"]
        unpaired: Counter = Counter()
        for record, r, c in zip(records, reference, candidate):
            verdicts, missed = pair_verdicts(bench, r, c)
            unpaired.update(missed)
            for call, a, b in verdicts:
                calls.setdefault((benchmark, call), defaultdict(list))[(item.task, bench.unit(record))].append((a, b))
        for side, judged_side in judged.items():
            answered_by[benchmark][side].update(a.answered_by or "(not recorded)" for j in judged_side for a in j.asked if a.ok)
        both = [i for i, (r, c) in enumerate(zip(reference, candidate)) if r.complete and c.complete]
        if both:  # the headline metrics on the samples both judged completely
            kept = [records[i] for i in both]
            pair = tuple(Sampled(benchmark, kept, [side[i].outcome for i in both], settings) for side in (reference, candidate))
            sampled[item.task][run] = pair
            metrics += [{"run": run, "task": item.task, **row} for row in metric_differences(*pair, n, seed)]
        coverage.append({"run": run, "task": item.task, "benchmark": benchmark, "samples": len(records), "compared": len(both),
                         "reference_incomplete": sum(not r.complete for r in reference),
                         "candidate_incomplete": sum(not c.complete for c in candidate),
                         "unpaired_requests": dict(unpaired.most_common())})
    judges = {benchmark: {side: {"model": setup[side][benchmark].model, "cache": str(setup[side][benchmark].cache),
                                 "snapshots": dict(counted.most_common())} for side, counted in by_side.items()}
              for benchmark, by_side in answered_by.items()}
    return {FORMAT: 1, "seed": seed, "bootstrap": n, "judges": judges,
            "calls": [call_summary(*key, by_unit, n, seed) for key, by_unit in sorted(calls.items())],
            "metrics": metrics, "ranking": ranking_agreement(sampled, n, seed), "coverage": coverage}


def agreement_tables(document: dict) -> tuple[str, list[Table]]:
    """The judges (with their snapshots and any calibration) and the tables of an agreement document."""
    judges = "; ".join(f"{registry.get(b).title}: " + ", ".join(
        f"{side} {s['model']} (snapshots: {', '.join(f'{m} x{c}' for m, c in s['snapshots'].items()) or 'none'})" for side, s in both.items())
        for b, both in document["judges"].items())
    calibration = document.get("calibration")
    intro = f"Judges: {judges}." + (f" Calibration: {calibration['samples']} samples judged by the reference "
                                    f"({calibration['bound']['calls']} requests, {calibration['bound']['spent_usd']:.4f} USD)."
                                    if calibration else "")
    not_compared = [f"NOT COMPARED in {row['run']} {row['task']}: {row['samples'] - row['compared']} of {row['samples']} samples "
                    f"(reference incomplete {row['reference_incomplete']}, candidate incomplete {row['candidate_incomplete']}); "
                    "requests not paired: " + (", ".join(f"{k} x{v}" for k, v in row["unpaired_requests"].items()) or "none")
                    for row in document["coverage"] if row["samples"] > row["compared"] or row["unpaired_requests"]]
    calls = Table("Verdict agreement per judge call type (95% bootstrap CIs)",
                  ["Benchmark", "Call", "Pairs", "Agreement", "95% CI", "Kappa", "95% CI", "Statistic"],
                  [([registry.get(c["benchmark"]).title, c["call"], str(c["pairs"]), fmt(c["agreement"], 3), fmt_ci(c["agreement_ci"], 3),
                     fmt(c["kappa"], 3), fmt_ci(c["kappa_ci"], 3), c["statistic"]], True) for c in document["calls"]],
                  [f"Bootstrap over questions ({document['bootstrap']} resamples, seed {document['seed']}); kappa is NaN (–) "
                   "where both judges gave one and the same label throughout."] + not_compared)
    metrics = Table("Headline metrics under both judges (candidate − reference, paired)",
                    ["Run", "Task", "Metric", "Reference", "Candidate", "Difference", "95% CI", "Samples"],
                    [([m["run"], m["task"], m["metric"], fmt(m["reference"], 2), fmt(m["candidate"], 2),
                       f"{m['difference']:+.2f}" if isinstance(m["difference"], (int, float)) else "–", fmt_ci(m["ci"], 2),
                       str(m["samples"])], True) for m in document["metrics"]],
                    ["On the samples both judges judged completely."])
    tables = [calls, metrics]
    if document["ranking"]:
        tables.append(Table("Ranking agreement across runs (Kendall tau-b)", ["Task", "Metric", "Runs", "Tau", "95% CI", "Questions"],
                            [([r["task"], r["metric"], ", ".join(r["runs"]), fmt(r["tau"], 3), fmt_ci(r["ci"], 3),
                               str(r["questions"])], True) for r in document["ranking"]]))
    return intro, tables


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
    """`lmms-vr report --agreement FILE`: the judges and their snapshots, the tables, the plot."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: not a judge agreement file ({error}); write one with `lmms-vr judge-agreement ... --out FILE`") from None
    if not isinstance(document, dict) or FORMAT not in document:
        raise DataError(f"{path}: not a judge agreement file (written by `lmms-vr judge-agreement --out FILE`)")
    intro, tables = agreement_tables(document)
    figure = agreement_plot(document, out / f"judge_agreement_{index}.png")
    return Section("judge_agreement", tables, [("Judge agreement: kappa and metric differences with 95% CIs", figure)],
                   {"agreement_file": str(path)}, title="Judge agreement", intro=intro)


def main(args) -> int:
    found = gather_runs(args.runs, args.task)
    benchmarks = sorted({task_spec(g.task).benchmark for _, g in found})
    shared = Path(args.cache).expanduser() if args.cache else judge_config.cache_path_from_env()
    if shared is None and not (args.reference_cache and args.candidate_cache):
        raise DataError("the judge cache is off (LMMS_VR_JUDGE_CACHE=off): give --cache FILE (or --reference-cache and --candidate-cache)")
    reference_cache, candidate_cache = (Path(given).expanduser() if given else shared for given in (args.reference_cache, args.candidate_cache))
    setup = {"reference": sides(args.reference, benchmarks, reference_cache, lambda b: judge_config.benchmark_defaults(b).model),
             "candidate": sides(args.candidate, benchmarks, candidate_cache)}
    for b in benchmarks:
        if setup["reference"][b] == setup["candidate"][b]:
            raise DataError(f"{b}: the reference and the candidate are the same judge ({setup['reference'][b].model}); give --candidate")
    try:
        only, calibration = calibrate(found, setup, args) if args.calibrate is not None else (None, None)
        document = compare(found, setup, args.bootstrap, args.seed, only)
    except JudgeConfigError as error:
        raise DataError(f"the reference judge cannot run: {error}") from None
    if calibration is not None:
        document["calibration"] = calibration
    intro, tables = agreement_tables(document)
    print(f"\n{intro}\n")
    for table in tables:
        print(markdown_table(table))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_ready(document), indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    print(f"\nagreement written to {out} (show it in a report: lmms-vr report RESULTS... --agreement {out})")
    if not any(row["compared"] for row in document["coverage"]):
        print("nothing compared: no sample has the verdicts of both judges in the cache(s)", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------- --calibrate N


def stratified_subset(strata: dict[Any, Sequence[Any]], size: int, seed: int = 0) -> list[Any]:
    """`size` items of `strata` ({stratum: items}) in proportion to their sizes (largest remainder; every
    stratum at least one when `size` allows, from the largest quota), seeded; all when `size` covers them."""
    import random

    total = sum(len(items) for items in strata.values())
    if size >= total:
        return [item for items in strata.values() for item in items]
    names = sorted(strata, key=str)
    exact = {name: size * len(strata[name]) / total for name in names}
    quota = {name: int(exact[name]) for name in names}
    for name in sorted(names, key=lambda name: (-(exact[name] - quota[name]), str(name)))[: size - sum(quota.values())]:
        quota[name] += 1
    if size >= len(names):
        for name in [name for name in names if not quota[name] and strata[name]]:
            donor = max(names, key=lambda other: (quota[other], str(other)))
            quota[donor] -= 1
            quota[name] = 1
    rng = random.Random(seed)
    chosen = []
    for name in names:
        items = list(strata[name])
        rng.shuffle(items)
        chosen += items[: quota[name]]
    return chosen


class SpendingLimit(CallBudget):
    """At most `max_calls` requests and `max_cost` USD: a request is sent only if what was spent plus the
    worst case of those in flight and of this one stays within it."""

    def __init__(self, max_calls: int, max_cost: float | None, worst_request_usd: float) -> None:
        super().__init__(max_calls, "calibration")
        self.max_cost, self.worst = max_cost, worst_request_usd
        self.answered = 0
        self.spent = 0.0

    def reserve(self) -> bool:
        with self._lock:
            in_flight = self.used - self.answered
            over_cost = self.max_cost is not None and self.spent + (in_flight + 1) * self.worst > self.max_cost
            if self.used >= self.max_calls or over_cost:
                self.exhausted = True
                return False
            self.used += 1
            return True

    def paid(self, model: str, prompt_tokens: int, completion_tokens: int, price: dict | None) -> None:
        """An answered request (the engine's usage listener)."""
        with self._lock:
            self.answered += 1
            self.spent += usd(price, prompt_tokens, completion_tokens) or 0.0

    def as_dict(self) -> dict:
        return {**super().as_dict(), "max_cost_usd": self.max_cost, "spent_usd": round(self.spent, 6)}


def reference_config(benchmark: str, reference: Side, base_url: str | None, key_env: str | None) -> JudgeConfig:
    """The reference judge (its model, on its cache): the benchmark's own configuration without
    LMMS_VR_JUDGE_* (usually the candidate), or `--reference-base-url`."""
    env = {name: value for name, value in os.environ.items()
           if name not in (judge_config.OVERRIDE_BASE_URL, judge_config.OVERRIDE_API_KEY, judge_config.OVERRIDE_MODEL)}
    env[judge_config.OVERRIDE_MODEL] = reference.model
    if base_url:
        env[judge_config.OVERRIDE_BASE_URL] = base_url
        if key_env and os.environ.get(key_env):
            env[judge_config.OVERRIDE_API_KEY] = os.environ[key_env]
    config = JudgeConfig.from_env(benchmark, env, host_settings=False)
    if config is None:
        raise DataError(f"--calibrate needs the reference judge of {benchmark}: set {judge_config.benchmark_defaults(benchmark).key_env} "
                        f"(judge {reference.model}), or give --reference-base-url [--reference-key-env VAR]")
    return replace(config, cache_path=reference.cache)


def calibrate(found: list[tuple[str, Gathered]], setup: Setup, args) -> tuple[set, dict]:
    """Judge a stratified subset of `--calibrate N` samples with the reference judge; returns the chosen
    (task, sample id) keys and what the calibration did (plan, budget, spend)."""
    if args.calibrate < 1:
        raise DataError("--calibrate N needs N >= 1 samples")
    from lmms_video_reasoning.judges.tokens import tokenizer_for

    # what the candidate asked per sample: the plan (and only samples it judged completely are worth asking)
    candidate_asks: dict[tuple, list[Asked]] = defaultdict(list)  # (task, sample id) -> the candidate's requests, every run
    strata: dict[tuple, list[tuple]] = defaultdict(list)  # (task, stratum) -> samples
    methods: set[str] = set()  # how input tokens were counted
    for _run, item in found:
        spec = task_spec(item.task)
        bench = registry.get(spec.benchmark).scoring
        # input tokens counted as the reference will be billed (its tokenizer, or the stated approximation)
        tokenizer = tokenizer_for(setup["reference"][spec.benchmark].model)
        methods.add(tokenizer.method)
        judged = judge_each(bench, item.records, bench.settings(item.records), setup["candidate"][spec.benchmark].reader(bench), tokenizer)
        for record, j in zip(item.records, judged):
            if not (j.complete and j.asked):
                continue  # a sample the candidate did not judge (completely) cannot be compared
            sample = (item.task, str(record["sample_id"]))
            if sample not in candidate_asks:
                strata[(item.task, bench.stratum(record))].append(sample)
            candidate_asks[sample] += j.asked
    if not strata:
        raise DataError("--calibrate: the candidate judge has no complete verdicts for these runs in its cache "
                        f"({', '.join(sorted({f'{b}: {s.model}' for b, s in setup['candidate'].items()}))}); judge them with it first "
                        "(`lmms-vr score` with the candidate configured)")
    chosen = stratified_subset(strata, args.calibrate, args.seed)
    planned = [a for sample in chosen for a in candidate_asks[sample]]
    configs = {b: reference_config(b, setup["reference"][b], args.reference_base_url, args.reference_key_env)
               for b in sorted({task_spec(task).benchmark for task, _ in chosen})}
    estimate, worst, priced = 0.0, 0.0, True
    for sample in chosen:
        price = configs[task_spec(sample[0]).benchmark].price()
        priced = priced and price is not None
        for a in candidate_asks[sample] if price is not None else ():
            # the reply as long as the candidate's (same format); the worst case is max_tokens
            estimate += usd(price, a.prompt_tokens, max(1, a.reply_tokens))
            worst = max(worst, usd(price, a.prompt_tokens * 1.5, a.max_tokens))
    max_requests = args.max_requests if args.max_requests is not None else max(2 * len(planned), len(planned) + 8)
    max_cost = args.max_cost if args.max_cost is not None else (round(2 * estimate, 4) if priced and estimate else None)
    if max_cost is not None and worst > max_cost:
        raise DataError(f"--max-cost {max_cost:g} USD is below the worst case of a single request (about {worst:.4f} USD); raise it")
    chosen_set = set(chosen)
    strata_text = ", ".join(f"{task}/{stratum or '-'} {sum(s in chosen_set for s in samples)} of {len(samples)}"
                            for (task, stratum), samples in sorted(strata.items(), key=str))
    print(f"calibration: {len(chosen)} of {sum(map(len, strata.values()))} samples the candidate judged (strata {strata_text})")
    print("  reference judge: " + "; ".join(f"{b} {c.model} at {c.public_dict()['base_url']}" for b, c in configs.items()))
    print(f"  expected: about {len(planned)} reference requests (as many as the candidate needed on these samples)"
          + (f", about {estimate:.4f} USD at list price (input tokens: {'; '.join(sorted(methods))}; replies as long "
             "as the candidate's)" if priced else ", price unknown"))
    print(f"  bound: at most {max_requests} requests (--max-requests)"
          + (f" and {max_cost:.4f} USD (--max-cost)" if max_cost is not None else " (no cost bound: the reference's price is unknown)"))
    limit = SpendingLimit(max_requests, max_cost, worst)
    engine.on_usage(limit.paid)
    judges = {b: Judge(c, budget=limit) for b, c in configs.items()}
    for run, item in found:
        spec = task_spec(item.task)
        records = [r for r in item.records if (item.task, str(r["sample_id"])) in chosen_set]
        if records:
            bench = registry.get(spec.benchmark).scoring
            bench.outcomes(records, bench.settings(item.records), judge=judges[spec.benchmark])
    for b, judge in judges.items():
        # read back as this judge would serve them (its endpoint too: a deployment may name its model otherwise)
        setup["reference"][b] = Side(configs[b].model, configs[b].cache_path, configs[b].base_url)
        judge.log_summary()
    spent = limit.as_dict()
    print(f"  sent {spent['calls']} requests, spent {spent['spent_usd']:.4f} USD"
          + ("; BOUND REACHED: the samples left unjudged are counted as not compared" if spent["exhausted"] else ""))
    return chosen_set, {"samples": len(chosen), "strata": {f"{t}/{s}": len(v) for (t, s), v in strata.items()},
                        "expected_requests": len(planned), "expected_cost_usd": round(estimate, 6) if priced else None,
                        "bound": spent, "reference": {b: c.public_dict() for b, c in configs.items()}}
