"""`lmms-vr judge-agreement --calibrate N`: a stratified subset of samples judged by the reference
judge within a stated budget (`SpendingLimit`: `--max-requests`, `--max-cost`)."""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.agreement_pairs import Asked, Setup, Side, cache_reader, judge_each
from lmms_video_reasoning.utils.results.batch_judging import usd
from lmms_video_reasoning.utils.results.run_folders import Gathered
from lmms_video_reasoning.utils.results.samples_io import task_spec


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


class SpendingLimit:
    """At most `max_calls` requests and `max_cost` USD: a request is sent only if what was spent plus the
    worst case of those in flight and of this one stays within it."""

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
            self.spent += usd(price, prompt_tokens, completion_tokens) or 0.0

    def as_dict(self) -> dict:
        with self._lock:
            return {"scope": self.scope, "max_calls": self.max_calls, "calls": self.used, "max_cost_usd": self.max_cost,
                    "spent_usd": round(self.spent, 6), "exhausted": self.exhausted}


def reference_config(benchmark: str, model: str | None, cache: Path | None, base_url: str | None, key_env: str | None):
    """The reference judge: the benchmark's own configuration without LMMS_VR_JUDGE_* (usually the
    candidate), or `--reference-base-url`."""
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


def calibrate(found: list[tuple[str, Gathered]], setup: Setup, size: int, args) -> tuple[set, dict]:
    """Judge a stratified subset of `size` samples with the reference judge; returns the chosen
    (task, sample id) keys and what the calibration did (plan, budget, spend)."""
    from lmms_video_reasoning.judges import Judge
    from lmms_video_reasoning.judges import engine
    from lmms_video_reasoning.judges.tokens import tokenizer_for

    # what the candidate asked per sample: the plan (and only samples it judged completely are worth asking)
    candidate_asks: dict[tuple, list[Asked]] = defaultdict(list)  # (task, sample id) -> the candidate's requests, every run
    strata: dict[tuple, list[tuple]] = defaultdict(list)  # (task, stratum) -> samples
    methods: set[str] = set()  # how input tokens were counted
    for _run, item in found:
        spec = task_spec(item.task)
        bench = registry.get(spec.benchmark).scoring
        # input tokens counted as the reference will be billed (its tokenizer, or the stated approximation)
        tokenizer = tokenizer_for(setup.reference[spec.benchmark].model)
        methods.add(tokenizer.method)
        judged = judge_each(bench, item.records, bench.settings(item.records), cache_reader(bench, setup.candidate[spec.benchmark]), tokenizer)
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
        setup.reference[b] = Side(configs[b].model, configs[b].cache_path, configs[b].base_url)
        judge.log_summary()
    spent = limit.as_dict()
    print(f"  sent {spent['calls']} requests, spent {spent['spent_usd']:.4f} USD"
          + ("; BOUND REACHED: the samples left unjudged are counted as not compared" if spent["exhausted"] else ""))
    return chosen_set, {"samples": len(chosen), "strata": {f"{t}/{s}": len(v) for (t, s), v in strata.items()},
                        "expected_requests": len(planned), "expected_cost_usd": round(estimate, 6) if priced else None,
                        "bound": spent, "reference": {b: c.public_dict() for b, c in configs.items()}}
