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
import logging
import math
import os
import sys
import threading
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results import agreement as stats
from lmms_video_reasoning.utils.results.report_bootstrap import Sampled, paired_difference
from lmms_video_reasoning.utils.results.report_plots import error_bars, pyplot
from lmms_video_reasoning.utils.results.report_runs import split_label
from lmms_video_reasoning.utils.results.report_tables import Section, Table
from lmms_video_reasoning.utils.results.run_folders import Gathered, gather_records
from lmms_video_reasoning.utils.results.task_specs import task_spec

log = logging.getLogger("lmms_video_reasoning.agreement")

FORMAT = "lmms_vr_judge_agreement"  # the key marking an agreement document
WEIGHTS = "quadratic"
IMAGE_TOKENS = 85  # an image part at detail "low" (OpenAI's figure), for the cost estimate


# ---------------------------------------------------------------------------------------------
# Recording what a benchmark's judging asks
# ---------------------------------------------------------------------------------------------


@dataclass
class Asked:
    """One judge request as the benchmark's code made it, and what came back."""

    tag: str
    occurrence: int  # the how-many-th request with this tag for the sample (pairs two judges' requests)
    ok: bool
    value: Any = None
    answered_by: str | None = None
    missing: bool = False  # no verdict in the cache (a cache reader sent nothing)
    prompt_tokens: int = 0  # input tokens (the reference's tokenizer in a calibration; else characters / 4), for the cost estimate
    reply_tokens: int = 0  # of the reply this judge gave (what the other judge's reply will be near)
    max_tokens: int = 0


def approximate_prompt_tokens(messages: Sequence[dict]) -> int:
    """A stated approximation of a request's input tokens: 4 characters per token, a fixed count per image."""
    characters = images = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            characters += len(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                characters += len(part.get("text", ""))
            elif part.get("type") == "image_url":
                images += 1
    return characters // 4 + images * IMAGE_TOKENS


class RecordingJudge:
    """A judge (usually a `CacheOnlyJudge`) whose every request is recorded; `map` runs items
    one after the other, so the requests of one sample are recorded in their order.
    `tokenizer` (`judges.tokens.Tokenizer`: `request_tokens`, `text_tokens`) counts each request's
    input and reply tokens, for a calibration's cost; default: 4 characters per token."""

    def __init__(self, inner, tokenizer: Any = None) -> None:
        self.inner = inner
        self.count_tokens = tokenizer.request_tokens if tokenizer is not None else approximate_prompt_tokens
        self.count_reply = tokenizer.text_tokens if tokenizer is not None else (lambda text: len(text) // 4)
        self.asked: list[Asked] = []
        self.item_errors = 0

    def __getattr__(self, name: str):  # config, cache, stats, accounting ... of the judge read
        return getattr(self.inner, name)

    def ask(self, request):
        from lmms_video_reasoning.judges import NOT_COMPUTED

        result = self.inner.ask(request)
        occurrence = sum(1 for a in self.asked if a.tag == request.tag)
        self.asked.append(Asked(request.tag, occurrence, result.ok, result.value if result.ok else None, result.answered_by,
                                missing=result.error == NOT_COMPUTED, prompt_tokens=self.count_tokens(request.messages),
                                reply_tokens=self.count_reply(result.raw or ""), max_tokens=request.max_tokens))
        return result

    def map(self, fn, items, desc: str = "") -> list:
        out = []
        for item in items:
            try:
                out.append(fn(item, self.ask))
            except Exception as error:  # noqa: BLE001 - e.g. a request needing media that are not here
                self.item_errors += 1
                log.debug("%s: a judge item could not be rebuilt: %s: %s", desc, type(error).__name__, error)
                out.append(None)
        return out

    def log_summary(self) -> None:
        pass


@dataclass
class Judged:
    """One sample under one judge: its outcome and the judge requests behind it."""

    outcome: dict | None
    asked: list[Asked]
    item_errors: int = 0

    @property
    def complete(self) -> bool:
        """Every request the sample needed got a verdict (the outcome is the judge's)."""
        return self.outcome is not None and not self.item_errors and all(a.ok for a in self.asked)


@contextmanager
def quiet_benchmarks() -> Iterator[None]:
    """The benchmarks' per-batch warnings (e.g. "N samples had a failed judge call") would repeat
    for every sample read here one at a time; what matters is counted in the coverage instead."""
    logger = logging.getLogger("lmms_video_reasoning")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def judge_each(bench, records: Sequence[dict], settings: Any, judge, tokenizer: Any = None) -> list[Judged]:
    """Each record's outcome under `judge`, judged alone so its requests are known (outcomes of
    this suite's benchmarks depend on their own record only)."""
    out = []
    with quiet_benchmarks():
        for record in records:
            recorder = RecordingJudge(judge, tokenizer)
            outcomes = bench.outcomes([record], settings, judge=recorder)
            out.append(Judged(outcomes[0] if outcomes else None, recorder.asked, recorder.item_errors))
    return out


# ---------------------------------------------------------------------------------------------
# Pairing two judges' verdicts
# ---------------------------------------------------------------------------------------------


@dataclass
class Side:
    """Who one of the two judges is, per benchmark."""

    model: str
    cache: Path | None
    endpoint: str | None = None


@dataclass
class TaskPair:
    """One task of one run, judged by both judges."""

    run: str
    task: str
    benchmark: str
    records: list[dict]
    settings: Any
    reference: list[Judged]
    candidate: list[Judged]


@dataclass
class CallPairs:
    """Every verdict pair of one call type: {unit: [(reference label, candidate label)]}."""

    benchmark: str
    call: str
    scale: tuple | None
    units: dict[tuple, list[tuple]] = field(default_factory=lambda: defaultdict(list))

    def pairs(self) -> list[tuple]:
        return [pair for unit in self.units.values() for pair in unit]


def pair_verdicts(bench, reference: Judged, candidate: Judged) -> tuple[list[tuple[str, str, Any, Any]], Counter]:
    """[(call type, item, reference label, candidate label)] of one sample, and what could not be
    paired (a request only one judge made, one that failed or was missing on a side, a reply's
    item the other reply lacks), by reason."""
    unpaired: Counter = Counter()
    by_key = {(a.tag, a.occurrence): a for a in candidate.asked}
    reference_keys = {(a.tag, a.occurrence) for a in reference.asked}
    for key in by_key.keys() - reference_keys:
        unpaired[f"{key[0]}: asked by the candidate only"] += 1
    pairs = []
    for asked in reference.asked:
        other = by_key.get((asked.tag, asked.occurrence))
        if other is None:
            unpaired[f"{asked.tag}: asked by the reference only"] += 1
            continue
        if not (asked.ok and other.ok):
            side = "reference" if not asked.ok else "candidate"
            unpaired[f"{asked.tag}: no {side} verdict" + (" in the cache" if (asked if not asked.ok else other).missing else "")] += 1
            continue
        ours = {(call, item): label for call, item, label in bench.verdicts(asked.tag, asked.value)}
        theirs = {(call, item): label for call, item, label in bench.verdicts(other.tag, other.value)}
        for key in ours.keys() ^ theirs.keys():
            unpaired[f"{key[0]}: an item in one reply only"] += 1
        pairs += [(call, item, ours[(call, item)], theirs[(call, item)]) for call, item in ours if (call, item) in theirs]
    return pairs, unpaired


def kappa_of(pairs: Sequence[tuple], scale: tuple | None) -> float:
    return stats.weighted_kappa(pairs, WEIGHTS) if scale is not None else stats.cohen_kappa(pairs)


def call_summary(call: CallPairs, n: int, seed: int) -> dict:
    pairs = call.pairs()
    units = list(call.units.values())
    kappa = kappa_of(pairs, call.scale)
    reference_labels, candidate_labels = Counter(map(_label, (a for a, _ in pairs))), Counter(map(_label, (b for _, b in pairs)))
    return {
        "benchmark": call.benchmark, "call": call.call, "kind": "ratings" if call.scale is not None else "categories",
        "statistic": f"weighted kappa ({WEIGHTS})" if call.scale is not None else "Cohen's kappa",
        "pairs": len(pairs), "units": len(units),
        "agreement": stats.agreement_rate(pairs),
        "agreement_ci": stats.bootstrap_interval(units, stats.agreement_rate, n, seed),
        "kappa": kappa,
        "kappa_ci": stats.bootstrap_interval(units, lambda p: kappa_of(p, call.scale), n, seed),
        "labels": {label: [reference_labels.get(label, 0), candidate_labels.get(label, 0)]
                   for label in sorted(set(reference_labels) | set(candidate_labels))},
    }


def _label(value: Any) -> str:
    """A label as a JSON key (ratings 7.0 -> "7")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _undefined(value: Any) -> bool:
    return not isinstance(value, (int, float)) or math.isnan(value)


def _snapshots(judged: Sequence[Judged]) -> dict[str, int]:
    counted = Counter(a.answered_by or "(not recorded)" for j in judged for a in j.asked if a.ok)
    return dict(counted.most_common())


def metric_differences(pair: TaskPair, n: int, seed: int) -> tuple[list[dict], Sampled | None, Sampled | None]:
    """Each headline metric under both judges and the paired difference, on the samples both judged completely."""
    both = [i for i, (r, c) in enumerate(zip(pair.reference, pair.candidate)) if r.complete and c.complete]
    if not both:
        return [], None, None
    records = [pair.records[i] for i in both]
    reference = Sampled(pair.benchmark, records, [pair.reference[i].outcome for i in both], pair.settings)
    candidate = Sampled(pair.benchmark, records, [pair.candidate[i].outcome for i in both], pair.settings)
    spec = registry.get(pair.benchmark).report
    headline = spec.headline if spec is not None else ()
    values_reference, values_candidate = reference.metrics(), candidate.metrics()
    rows = []
    for difference in paired_difference(reference, candidate, n, seed):
        if difference.metric not in headline or all(_undefined(values.get(difference.metric)) for values in (values_reference, values_candidate)):
            continue  # not a metric of this task
        rows.append({"run": pair.run, "task": pair.task, "benchmark": pair.benchmark, "metric": difference.metric,
                     "reference": values_reference.get(difference.metric), "candidate": values_candidate.get(difference.metric),
                     "difference": difference.difference, "ci": difference.interval, "samples": len(records),
                     "units": difference.common})
    return rows, reference, candidate


def ranking_agreement(sampled: dict[tuple[str, str], tuple[Sampled, Sampled]], n: int, seed: int) -> list[dict]:
    """Per task and headline metric with two or more runs: Kendall's tau-b between the runs'
    values under the reference and under the candidate, on the questions every run has, with a
    bootstrap CI (the questions resampled together across runs)."""
    by_task: dict[str, list[str]] = defaultdict(list)
    for run, task in sampled:
        by_task[task].append(run)
    rows = []
    for task, runs in sorted(by_task.items()):
        if len(runs) < 2:
            continue
        unit_maps = {run: sampled[(run, task)][0].units() for run in runs}
        common = [unit for unit in unit_maps[runs[0]] if all(unit in unit_maps[run] for run in runs)]
        spec = registry.get(sampled[(runs[0], task)][0].benchmark).report
        headline = spec.headline if spec is not None else ()
        if not common or not headline:
            continue

        def values(picks) -> tuple[list[dict], list[dict]]:
            """Every run's metrics on the picked questions, under the reference and the candidate."""
            per_run = [[i for pick in picks for i in unit_maps[run][common[pick]]] for run in runs]
            return ([sampled[(run, task)][0].metrics(indices) for run, indices in zip(runs, per_run)],
                    [sampled[(run, task)][1].metrics(indices) for run, indices in zip(runs, per_run)])

        def taus(picks) -> dict[str, float]:
            reference, candidate = values(picks)
            return {metric: stats.kendall_tau([m.get(metric, math.nan) for m in reference], [m.get(metric, math.nan) for m in candidate])
                    for metric in headline}

        reference, candidate = values(range(len(common)))
        from lmms_video_reasoning.judges import failure_share

        with failure_share.decided_on_the_whole_run():
            resampled = stats.bootstrap_values(len(common), taus, n, seed)
        for metric in headline:
            reference_values, candidate_values = [m.get(metric, math.nan) for m in reference], [m.get(metric, math.nan) for m in candidate]
            if any(_undefined(v) for v in reference_values + candidate_values):
                continue  # not a metric of this task
            rows.append({"task": task, "metric": metric, "runs": runs, "reference": reference_values, "candidate": candidate_values,
                         "tau": stats.kendall_tau(reference_values, candidate_values),
                         "ci": stats.percentile_interval([r[metric] for r in resampled]) if resampled else None,
                         "questions": len(common)})
    return rows


# ---------------------------------------------------------------------------------------------
# Calibration: a stratified subset judged by the reference, within a stated budget
# ---------------------------------------------------------------------------------------------


def stratified_subset(strata: dict[Any, Sequence[Any]], size: int, seed: int = 0) -> list[Any]:
    """`size` items drawn from `strata` ({stratum: items}) in proportion to the strata's sizes
    (largest remainder; then every stratum gets at least one when `size` allows, taken from the
    largest quota), at random within each stratum (seeded); all items when `size` is at least
    their number."""
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


class SpendingLimit:
    """The calibration's bound: at most `max_calls` HTTP requests and `max_cost` USD, for every
    judge holding it. A request is sent only if what was spent, plus the worst case of the
    requests still in flight and of this one, stays within `max_cost`."""

    def __init__(self, max_calls: int, max_cost: float | None, worst_request_usd: float) -> None:
        self.max_calls, self.max_cost, self.worst = max_calls, max_cost, worst_request_usd
        self.scope = "calibration"
        self.used = self.answered = 0
        self.spent = 0.0
        self.exhausted = False
        self._lock = threading.Lock()

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
            if price is not None:
                self.spent += (prompt_tokens * price["input"] + completion_tokens * price["output"]) / 1e6

    def as_dict(self) -> dict:
        with self._lock:
            return {"scope": self.scope, "max_calls": self.max_calls, "calls": self.used, "max_cost_usd": self.max_cost,
                    "spent_usd": round(self.spent, 6), "exhausted": self.exhausted}


def reference_config(benchmark: str, model: str | None, cache: Path | None, base_url: str | None, key_env: str | None):
    """The reference judge for a calibration: the benchmark's own judge configuration (its provider's
    key and endpoint; LMMS_VR_JUDGE_* are left out, they usually point at the candidate), or the
    endpoint `--reference-base-url` names."""
    from lmms_video_reasoning.judges import JudgeConfig
    from lmms_video_reasoning.judges import config as judge_config

    env = {name: value for name, value in os.environ.items()
           if name not in (judge_config.OVERRIDE_BASE_URL, judge_config.OVERRIDE_API_KEY, judge_config.OVERRIDE_MODEL)}
    if base_url:
        env[judge_config.OVERRIDE_BASE_URL] = base_url
        if key_env and os.environ.get(key_env):
            env[judge_config.OVERRIDE_API_KEY] = os.environ[key_env]
    if model:
        env[judge_config.OVERRIDE_MODEL] = model
    config = JudgeConfig.from_env(benchmark, env, host_settings=False)
    if config is None:
        defaults = judge_config.benchmark_defaults(benchmark)
        raise DataError(f"--calibrate needs the reference judge of {benchmark}: set {defaults.key_env} (judge {model or defaults.model}), "
                        "or give --reference-base-url [--reference-key-env VAR]")
    return replace(config, cache_path=cache) if cache is not None else config


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


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


@dataclass
class Setup:
    reference: dict[str, Side]
    candidate: dict[str, Side]


def side_for(benchmark: str, common: str | None, named: dict[str, str], cache: Path | None, default_model: str | None) -> Side:
    model = named.get(benchmark) or common or default_model
    if not model:
        raise DataError("give --candidate MODEL: the judge model whose verdicts are compared (as its runs named it)")
    return Side(model, cache)


def read_pair(run: str, item: Gathered, setup: Setup, readers: dict) -> TaskPair:
    """Both judges' per-sample outcomes of one task of one run, from their caches."""
    from lmms_video_reasoning.judges import CacheOnlyJudge

    spec = task_spec(item.task)
    bench = registry.get(spec.benchmark).scoring
    settings = bench.settings(item.records)
    judged = []
    for sides in (setup.reference, setup.candidate):
        side = sides[spec.benchmark]
        key = (spec.benchmark, side.model, str(side.cache), side.endpoint)
        if key not in readers:
            readers[key] = CacheOnlyJudge(bench.judge_name, side.model, side.cache, side.endpoint)
        judged.append(judge_each(bench, item.records, settings, readers[key]))
    return TaskPair(run, item.task, spec.benchmark, list(item.records), settings, judged[0], judged[1])


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


def calibrate(found: list[tuple[str, Gathered]], setup: Setup, size: int, args) -> tuple[set, dict]:
    """Judge a stratified subset of `size` samples with the reference judge; returns the chosen
    (task, sample id) keys and what the calibration did (plan, budget, spend)."""
    from lmms_video_reasoning.judges import CacheOnlyJudge, Judge
    from lmms_video_reasoning.judges import engine
    from lmms_video_reasoning.judges.tokens import tokenizer_for

    # what the candidate asked per sample: the plan (and only samples it judged completely are worth asking)
    readers: dict = {}
    candidate_asks: dict[tuple, list[Asked]] = defaultdict(list)  # (task, sample id) -> the candidate's requests, every run
    strata: dict[tuple, list[tuple]] = defaultdict(list)  # (task, stratum) -> samples
    methods: set[str] = set()  # how input tokens were counted
    for _run, item in found:
        spec = task_spec(item.task)
        bench = registry.get(spec.benchmark).scoring
        side = setup.candidate[spec.benchmark]
        key = (spec.benchmark, side.model, str(side.cache), side.endpoint)
        if key not in readers:
            readers[key] = CacheOnlyJudge(bench.judge_name, side.model, side.cache, side.endpoint)
        # input tokens counted as the reference will be billed (its tokenizer, or the stated approximation)
        tokenizer = tokenizer_for(setup.reference[spec.benchmark].model)
        methods.add(tokenizer.method)
        judged = judge_each(bench, item.records, bench.settings(item.records), readers[key], tokenizer)
        for record, j in zip(item.records, judged):
            if not (j.complete and j.asked):
                continue  # a sample the candidate did not judge (completely) cannot be compared
            sample = (item.task, str(record["sample_id"]))
            if sample not in candidate_asks:
                strata[(item.task, bench.stratum(record))].append(sample)
            candidate_asks[sample] += j.asked
    if not strata:
        raise DataError("--calibrate: the candidate judge has no complete verdicts for these runs in its cache "
                        f"({', '.join(sorted({f'{b}: {s.model}' for b, s in setup.candidate.items()}))}); judge them with it first "
                        "(`lmms-vr score` with the candidate configured)")
    chosen = stratified_subset(strata, size, args.seed)
    planned = [a for sample in chosen for a in candidate_asks[sample]]
    configs = {b: reference_config(b, setup.reference[b].model, setup.reference[b].cache, args.reference_base_url, args.reference_key_env)
               for b in sorted({task_spec(task).benchmark for task, _ in chosen})}
    prices = {b: c.price() for b, c in configs.items()}
    bench_of = {sample: task_spec(sample[0]).benchmark for sample in chosen}
    estimate, worst, priced = 0.0, 0.0, True
    for sample in chosen:
        price = prices[bench_of[sample]]
        for a in candidate_asks[sample]:
            if price is None:
                priced = False
                continue
            # the reply as long as the candidate's (same format); the worst case is max_tokens
            estimate += (a.prompt_tokens * price["input"] + max(1, a.reply_tokens) * price["output"]) / 1e6
            worst = max(worst, (a.prompt_tokens * 1.5 * price["input"] + a.max_tokens * price["output"]) / 1e6)
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
        setup.reference[b] = Side(configs[b].model, configs[b].cache_path, configs[b].base_url)
        judge.log_summary()
    spent = limit.as_dict()
    print(f"  sent {spent['calls']} requests, spent {spent['spent_usd']:.4f} USD"
          + ("; BOUND REACHED: the samples left unjudged are counted as not compared" if spent["exhausted"] else ""))
    return chosen_set, {"samples": len(chosen), "strata": {f"{t}/{s}": len(v) for (t, s), v in strata.items()},
                        "expected_requests": len(planned), "expected_cost_usd": round(estimate, 6) if priced else None,
                        "bound": spent, "reference": {b: c.public_dict() for b, c in configs.items()}}


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
                          "snapshots": _snapshots(reference)},
            "candidate": {"model": setup.candidate[benchmark].model, "cache": str(setup.candidate[benchmark].cache),
                          "snapshots": _snapshots(candidate)},
        }
    return {FORMAT: 1, "seed": seed, "bootstrap": n, "judges": judges,
            "calls": [call_summary(c, n, seed) for _, c in sorted(calls.items())],
            "metrics": metrics, "ranking": ranking_agreement(sampled, n, seed), "coverage": coverage}


def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _ci(interval: Any, digits: int = 3) -> str:
    return "–" if not interval else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def print_document(document: dict) -> None:
    for benchmark, sides in document["judges"].items():
        reference, candidate = sides["reference"], sides["candidate"]
        snap = lambda side: ", ".join(f"{m} x{c}" for m, c in side["snapshots"].items()) or "no verdicts"  # noqa: E731
        print(f"\n{benchmark}: reference {reference['model']} ({snap(reference)}) vs candidate {candidate['model']} ({snap(candidate)})")
    print("\nverdict agreement per judge call type (95% bootstrap CIs):")
    for c in document["calls"]:
        print(f"  {c['benchmark']:<10} {c['call']:<40} pairs {c['pairs']:>5}  agreement {_f(c['agreement'])} {_ci(c['agreement_ci'])}"
              f"  {c['statistic']} {_f(c['kappa'])} {_ci(c['kappa_ci'])}")
    if document["metrics"]:
        print("\nheadline metrics, candidate - reference (same samples, paired bootstrap):")
        for m in document["metrics"]:
            print(f"  {m['run']} {m['task']:<16} {m['metric']:<18} reference {_f(m['reference'], 2)}  candidate {_f(m['candidate'], 2)}"
                  f"  difference {_f(m['difference'], 2)} {_ci(m['ci'], 2)}  ({m['samples']} samples)")
    for r in document["ranking"]:
        print(f"\nranking of {len(r['runs'])} runs, {r['task']} {r['metric']}: Kendall tau-b {_f(r['tau'])} {_ci(r['ci'])} "
              f"({r['questions']} questions)")
    for row in document["coverage"]:
        left = row["samples"] - row["compared"]
        if left or row["unpaired_requests"]:
            print(f"\nNOT COMPARED in {row['run']} {row['task']}: {left} of {row['samples']} samples (reference incomplete "
                  f"{row['reference_incomplete']}, candidate incomplete {row['candidate_incomplete']}); requests not paired: "
                  + (", ".join(f"{k} x{v}" for k, v in row["unpaired_requests"].items()) or "none"))


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def main(args) -> int:
    from lmms_video_reasoning.judges import JudgeConfigError
    from lmms_video_reasoning.judges import config as judge_config

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
    from lmms_video_reasoning.utils.lmms import launcher

    launcher.register_judge_settings()  # no LMMS_VR_JUDGE_* set: lmms-eval's API_TYPE=local judge
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
    out.write_text(json.dumps(_json_ready(document), indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    print(f"\nagreement written to {out} (show it in a report: lmms-vr report RESULTS... --agreement {out})")
    compared = sum(row["compared"] for row in document["coverage"])
    if not compared:
        print("nothing compared: no sample has the verdicts of both judges in the cache(s)", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# The report's section
# ---------------------------------------------------------------------------------------------


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
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def agreement_section(path: Path, out: Path, index: int = 1):
    """The report's section for one agreement file: the judges and their snapshots, the tables, the plot."""
    document = read_document(path)
    judges = "; ".join(
        f"{registry.get(b).title}: reference {s['reference']['model']} (snapshots: "
        + (", ".join(f"{m} x{c}" for m, c in s["reference"]["snapshots"].items()) or "none")
        + f"), candidate {s['candidate']['model']} (snapshots: "
        + (", ".join(f"{m} x{c}" for m, c in s["candidate"]["snapshots"].items()) or "none") + ")"
        for b, s in document["judges"].items())
    digits = 3
    calls = Table("Verdict agreement per judge call type (95% bootstrap CIs)",
                         ["Benchmark", "Call", "Pairs", "Agreement", "95% CI", "Kappa", "95% CI", "Statistic"],
                         [([registry.get(c["benchmark"]).title, c["call"], str(c["pairs"]), _f(c["agreement"], digits),
                            _ci(c["agreement_ci"], digits), _f(c["kappa"], digits), _ci(c["kappa_ci"], digits), c["statistic"]], True)
                          for c in document["calls"]],
                         [f"Bootstrap over questions ({document['bootstrap']} resamples, seed {document['seed']}); kappa is NaN (n/a) "
                          "where both judges gave one and the same label throughout."])
    metrics = Table("Headline metrics under both judges (candidate − reference, paired)",
                           ["Run", "Task", "Metric", "Reference", "Candidate", "Difference", "95% CI", "Samples"],
                           [([m["run"], m["task"], m["metric"], _f(m["reference"], 2), _f(m["candidate"], 2),
                              f"{m['difference']:+.2f}" if isinstance(m["difference"], (int, float)) else "n/a", _ci(m["ci"], 2),
                              str(m["samples"])], True) for m in document["metrics"]],
                           ["On the samples both judges judged completely."])
    tables = [calls, metrics]
    if document["ranking"]:
        tables.append(Table("Ranking agreement across runs (Kendall tau-b)", ["Task", "Metric", "Runs", "Tau", "95% CI", "Questions"],
                                   [([r["task"], r["metric"], ", ".join(r["runs"]), _f(r["tau"]), _ci(r["ci"]), str(r["questions"])], True)
                                    for r in document["ranking"]]))
    missing = [f"{row['run']} {row['task']}: {row['samples'] - row['compared']} of {row['samples']} samples not compared"
               for row in document["coverage"] if row["samples"] > row["compared"]]
    if missing:
        tables[0].notes += missing
    calibration = document.get("calibration")
    intro = f"Judges: {judges}." + (f" Calibration: {calibration['samples']} samples judged by the reference "
                                    f"({calibration['bound']['calls']} requests, {calibration['bound']['spent_usd']:.4f} USD)."
                                    if calibration else "")
    figure = agreement_plot(document, out / f"judge_agreement_{index}.png")
    return Section("judge_agreement", tables, [("Judge agreement: kappa and metric differences with 95% CIs", figure)],
                          {"agreement_file": str(path)}, title="Judge agreement", intro=intro)
