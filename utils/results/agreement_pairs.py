"""What each judge said per sample, and how two judges' verdicts pair up (`lmms-vr judge-agreement`).

Each benchmark's own judging runs once per sample and judge on a reader of the judge cache, every
request recorded (`RecordingJudge`), so the two judges' replies to the same request pair up by tag
and occurrence (`pair_verdicts`). The statistics are NaN where undefined, never 0: kappa when both
judges use one label throughout, tau when a ranking is all ties.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.results.batch_judging import quiet_judging
from lmms_video_reasoning.utils.results.report_bootstrap import (Sampled, bootstrap_interval, paired_difference, percentile_interval,
                                                                  resampled_metrics)
from lmms_video_reasoning.utils.results.report_runs import InOrderJudge, headline_metrics

Pair = tuple[Hashable, Hashable]  # (reference label, candidate label)


def agreement_rate(pairs: Sequence[Pair]) -> float:
    """The share of pairs whose two labels are equal (NaN for no pairs)."""
    if not pairs:
        return math.nan
    return sum(a == b for a, b in pairs) / len(pairs)


def _kappa(pairs: Sequence[Pair], distance) -> float:
    """1 - observed / expected disagreement, expected from the two judges' own label frequencies
    (NaN: no pairs, or no expected disagreement)."""
    n = len(pairs)
    if not n:
        return math.nan
    observed = sum(distance(a, b) for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(count_a * count_b * distance(a, b) for a, count_a in first.items() for b, count_b in second.items()) / (n * n)
    if expected <= 1e-12:
        return math.nan
    return 1.0 - observed / expected


def cohen_kappa(pairs: Sequence[Pair]) -> float:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e): disagreement 1 between different labels."""
    return _kappa(pairs, lambda a, b: float(a != b))


def weighted_kappa(pairs: Sequence[tuple[float, float]]) -> float:
    """Quadratic weighted kappa of ratings: disagreement (a - b)^2."""
    return _kappa(pairs, lambda a, b: (float(a) - float(b)) ** 2)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y)); NaN when undefined."""
    differences = [(a[0] - b[0], a[1] - b[1]) for a, b in itertools.combinations(zip(x, y), 2)]
    ties_x, ties_y = sum(dx == 0 for dx, _ in differences), sum(dy == 0 for _, dy in differences)
    score = sum(1 if (dx > 0) == (dy > 0) else -1 for dx, dy in differences if dx != 0 and dy != 0)
    denominator = math.sqrt((len(differences) - ties_x) * (len(differences) - ties_y))
    return score / denominator if denominator else math.nan


@dataclass
class Asked:
    """One judge request as the benchmark's code made it, and what came back."""

    tag: str
    occurrence: int  # the how-many-th request with this tag for the sample (pairs two judges' requests)
    ok: bool
    value: Any = None
    answered_by: str | None = None
    missing: bool = False  # no verdict in the cache (a cache reader sent nothing)
    prompt_tokens: int = 0  # input tokens by the reference's tokenizer (a calibration's cost estimate; 0 without one)
    reply_tokens: int = 0  # of the reply this judge gave (what the other judge's reply will be near)
    max_tokens: int = 0


class RecordingJudge(InOrderJudge):
    """A judge whose every request is recorded in order; `tokenizer` (`judges.tokens`) counts each
    request's input and reply tokens, for a calibration's cost."""

    def __init__(self, inner, tokenizer: Any = None) -> None:
        self.inner, self.tokenizer = inner, tokenizer
        self.asked: list[Asked] = []

    def ask(self, request):
        from lmms_video_reasoning.judges import NOT_COMPUTED

        result = self.inner.ask(request)
        occurrence = sum(1 for a in self.asked if a.tag == request.tag)
        tokens = self.tokenizer
        self.asked.append(Asked(request.tag, occurrence, result.ok, result.value if result.ok else None, result.answered_by,
                                missing=result.error == NOT_COMPUTED, max_tokens=request.max_tokens,
                                prompt_tokens=tokens.request_tokens(request.messages) if tokens else 0,
                                reply_tokens=tokens.text_tokens(result.raw or "") if tokens else 0))
        return result


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


def judge_each(bench, records: Sequence[dict], settings: Any, judge, tokenizer: Any = None) -> list[Judged]:
    """Each record's outcome under `judge`, judged alone so its requests are known."""
    out = []
    # the per-batch warnings would repeat for every sample; what matters is counted in the coverage
    with quiet_judging(logging.ERROR):
        for record in records:
            recorder = RecordingJudge(judge, tokenizer)
            outcomes = bench.outcomes([record], settings, judge=recorder)
            out.append(Judged(outcomes[0] if outcomes else None, recorder.asked, recorder.item_errors))
    return out


@dataclass
class Side:
    """Who one of the two judges is, per benchmark."""

    model: str
    cache: Path | None
    endpoint: str | None = None

    def reader(self, bench):
        """The reader of this judge's cache for `bench` (the process's one `judges.CacheOnlyJudge` for them)."""
        from lmms_video_reasoning.judges.process_registry import cache_only_judge

        return cache_only_judge(bench.judge_name, self.model, self.cache, self.endpoint)


def pair_verdicts(bench, reference: Judged, candidate: Judged) -> tuple[list[tuple[str, Any, Any]], Counter]:
    """[(call type, reference label, candidate label)] of one sample, and what could not be paired, by reason."""
    by_key = {(a.tag, a.occurrence): a for a in candidate.asked}
    reference_keys = {(a.tag, a.occurrence) for a in reference.asked}
    unpaired = Counter(f"{tag}: asked by the candidate only" for tag, _ in by_key.keys() - reference_keys)
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
        pairs += [(key[0], ours[key], theirs[key]) for key in ours if key in theirs]
    return pairs, unpaired


def call_summary(benchmark: str, call: str, by_unit: dict[Any, list[Pair]], n: int, seed: int) -> dict:
    """Agreement and kappa of one call type's verdict pairs, with CIs over their units (questions or videos)."""
    units = list(by_unit.values())
    pairs = [pair for unit in units for pair in unit]
    ratings = registry.get(benchmark).scoring.rating_scale(call) is not None
    kappa = weighted_kappa if ratings else cohen_kappa
    reference_labels, candidate_labels = Counter(map(_label, (a for a, _ in pairs))), Counter(map(_label, (b for _, b in pairs)))
    return {
        "benchmark": benchmark, "call": call, "kind": "ratings" if ratings else "categories",
        "statistic": "weighted kappa (quadratic)" if ratings else "Cohen's kappa",
        "pairs": len(pairs), "units": len(units),
        "agreement": agreement_rate(pairs),
        "agreement_ci": bootstrap_interval(units, agreement_rate, n, seed),
        "kappa": kappa(pairs),
        "kappa_ci": bootstrap_interval(units, kappa, n, seed),
        "labels": {label: [reference_labels.get(label, 0), candidate_labels.get(label, 0)]
                   for label in sorted(set(reference_labels) | set(candidate_labels))},
    }


def _label(value: Any) -> str:
    """A label as a JSON key (ratings 7.0 -> "7")."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _undefined(value: Any) -> bool:
    return not isinstance(value, (int, float)) or math.isnan(value)


def metric_differences(reference: Sampled, candidate: Sampled, n: int, seed: int) -> list[dict]:
    """Each headline metric under both judges (the same samples) and the paired difference."""
    headline = headline_metrics(reference.benchmark)
    values_reference, values_candidate = reference.metrics(), candidate.metrics()
    rows = []
    for difference in paired_difference(reference, candidate, n, seed):
        if difference.metric not in headline or all(_undefined(values.get(difference.metric)) for values in (values_reference, values_candidate)):
            continue  # not a metric of this task
        rows.append({"benchmark": reference.benchmark, "metric": difference.metric,
                     "reference": values_reference.get(difference.metric), "candidate": values_candidate.get(difference.metric),
                     "difference": difference.difference, "ci": difference.interval, "samples": len(reference.records),
                     "units": difference.common})
    return rows


def ranking_agreement(sampled: dict[str, dict[str, tuple[Sampled, Sampled]]], n: int, seed: int) -> list[dict]:
    """Per task ({run: (Sampled under the reference, under the candidate)}) and headline metric of two or
    more runs: Kendall's tau-b between the runs' values under the two judges on the questions every run
    has, with a CI (the questions resampled together)."""
    rows = []
    for task, by_run in sorted(sampled.items()):
        runs = list(by_run)
        if len(runs) < 2:
            continue
        unit_maps = {run: by_run[run][0].units() for run in runs}
        common = [unit for unit in unit_maps[runs[0]] if all(unit in unit_maps[run] for run in runs)]
        headline = headline_metrics(by_run[runs[0]][0].benchmark)
        if not common or not headline:
            continue

        def series(picks) -> dict[str, tuple[list[float], list[float]]]:
            """{metric: (the runs' values under the reference, under the candidate)} on the picked questions."""
            per_run = [[i for pick in picks for i in unit_maps[run][common[pick]]] for run in runs]
            judged = [[by_run[run][side].metrics(indices) for run, indices in zip(runs, per_run)] for side in (0, 1)]
            return {metric: tuple([m.get(metric, math.nan) for m in values] for values in judged) for metric in headline}

        observed = series(range(len(common)))
        resampled = resampled_metrics(len(common), lambda picks: {m: kendall_tau(*pair) for m, pair in series(picks).items()}, n, seed)
        for metric, (reference, candidate) in observed.items():
            if any(_undefined(v) for v in reference + candidate):
                continue  # not a metric of this task
            rows.append({"task": task, "metric": metric, "runs": runs, "reference": reference, "candidate": candidate,
                         "tau": kendall_tau(reference, candidate),
                         "ci": percentile_interval(resampled[metric]) if metric in resampled else None,
                         "questions": len(common)})
    return rows
