"""`lmms-vr score`: score lmms-eval samples files or replay predictions, later and elsewhere (docs/results.md).

    lmms-vr score OUTPUT_PATH                 every run under it (one `<date>_samples_<task>.jsonl` prefix per run)
    lmms-vr score FILE_samples_<task>.jsonl   one samples file (`--log_samples`, also `--predict_only`)
    lmms-vr score predictions.jsonl --task T  replay predictions (`{"task", "id", "response"}` lines)
    ... [--task T] [--out results.json]

The metrics come from the task's own scoring entry (what its aggregation calls); judge calls go
through the judge engine and its cache. What is not scored, missing or repeated is printed and
recorded under `lmms_vr.coverage`. Exit status 3: a judge outage (run again once it works); 4:
judge cache errors; 5: a task of a run is missing.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from lmms_video_reasoning.judges import scoring_judge
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.core.settings import FROM_ENV
from lmms_video_reasoning.utils.results.report_runs import items_failed
from lmms_video_reasoning.utils.results.samples_io import (RESULTS_SUFFIX, Coverage, Gathered, gather_records, results_stem, run_file_match,
                                                           sample_line, samples_path, task_spec, unbuilt_items)

log = logging.getLogger("lmms_video_reasoning.score")


@dataclass
class TaskScore:
    """A task's metrics (from its scoring entry) with the per-sample data behind them."""

    task: str
    benchmark: str
    metrics: dict
    records: list[dict]
    outcomes: list[dict] | None
    accounting: dict | None
    source: str
    run: str = ""
    coverage: Coverage | None = None
    settings: dict | None = None  # the task's score-changing settings used (`Benchmark.settings_of`)


def _stats_delta(before: dict, after: dict) -> dict:
    """Judge statistics of one scoring step (the judge's counters are per process)."""
    delta = {key: value - before.get(key, 0) for key, value in after.items() if isinstance(value, (int, float)) and not isinstance(value, bool)}
    delta["budget_exhausted"] = after.get("budget_exhausted", False)
    delta["items_failed"] = items_failed(after) - items_failed(before)
    for name in ("answered_by", "failure_reasons"):  # per model, per reason
        counts = {key: count - (before.get(name) or {}).get(key, 0) for key, count in (after.get(name) or {}).items()}
        delta[name] = {key: count for key, count in counts.items() if count}
    delta["outage"] = after.get("outage")
    delta["snapshots"] = after.get("snapshots")  # of the judge in this process (the cache may mix snapshots)
    return delta


# (a benchmark's scoring, the records) -> the judge it is handed (None: no judge)
JudgeChooser = Callable[[registry.ScoringAdapter, list], Any]


def score_task(task: str, records: Sequence[dict], source: str = "", run: str = "",
               coverage: Coverage | None = None, judge_for: JudgeChooser = scoring_judge) -> TaskScore:
    """The task's metrics by its own scoring entry, with their per-sample outcomes (None: a judge
    needed and none given); the judge is `judge_for(scoring, records)` (`_judge_chooser`)."""
    spec = task_spec(task)
    bench = registry.get(spec.benchmark).scoring
    records = list(records)
    settings = bench.settings(records)
    judge = judge_for(bench, records)
    before = judge.stats.as_dict() if judge is not None else None
    computed, outcomes = bench.score(records, settings, judge)
    metrics = {name: computed[name] for name in spec.metrics if name in computed} or computed  # the task's metrics
    accounting = None
    if judge is not None:
        judge.log_summary()
        accounting = {**judge.accounting(), "stats": _stats_delta(before, judge.stats.as_dict())}
    if coverage is not None:
        coverage.scored = len(records)
        for line in coverage.problems():
            log.warning("%s (%s): %s", task, source, line)
    used = registry.get(spec.benchmark).settings_of(records)
    return TaskScore(task, spec.benchmark, metrics, records, outcomes, accounting, source, run, coverage, used)


def same_value(a: Any, b: Any) -> bool:
    """Equal metric values (NaN equals NaN; floats to 1e-9)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def write_results(out: Path, scores: Sequence[TaskScore], source: str) -> dict:
    """Write the results JSON (lmms-eval's shape) and one samples file per task beside it (one run)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {
        # lmms-eval's per-task shape: {"alias": task, "metric,none": value}
        "results": {s.task: {"alias": s.task, **{f"{name},none": value for name, value in s.metrics.items()}} for s in scores},
        "n-samples": {s.task: {"original": s.coverage.documents if s.coverage is not None and s.coverage.documents is not None
                                else len(s.records), "effective": len(s.records)} for s in scores},
        "config": {"model": "lmms-vr score", "source": source},
        "lmms_vr": {
            "scored_by": "lmms-vr score",
            "run": next((s.run for s in scores if s.run), ""),
            "samples": {s.task: samples_path(out, s.task).name for s in scores},
            "sources": {s.task: s.source for s in scores},
            "coverage": {s.task: s.coverage.as_dict() for s in scores if s.coverage is not None},
            "judge_accounting": {s.task: s.accounting for s in scores if s.accounting is not None},
            "settings": {s.task: s.settings for s in scores if s.settings is not None},
        },
    }
    for s in scores:
        with samples_path(out, s.task).open("w", encoding="utf-8") as handle:
            handle.writelines(sample_line(index, record, *([s.outcomes[index]] if s.outcomes is not None else []))
                              for index, record in enumerate(s.records))
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    return results


def results_paths(out: Path, runs: Sequence[str]) -> dict[str, Path]:
    """{run: results file}: `out` itself for one run, `<out stem>_<run>.json` beside it for several."""
    if len(runs) <= 1:
        return {run: out for run in runs}
    stem = results_stem(out)
    suffix = RESULTS_SUFFIX if out.name.endswith(RESULTS_SUFFIX) else out.suffix or ".json"
    return {run: out.with_name(f"{stem}_{re.sub(r'[^A-Za-z0-9_.-]+', '__', run)}{suffix}") for run in runs}


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2f}"
    return str(value)


def print_scores(scores: Sequence[TaskScore]) -> None:
    for s in scores:
        run = f"run {s.run}, " if s.run else ""
        print(f"\n{s.task}  ({len(s.records)} samples; {run}{s.source})")
        for name, value in s.metrics.items():
            if not isinstance(value, dict):
                print(f"  {name:<28} {_format(value)}")
        if s.settings:
            print("  settings: " + ", ".join(f"{k}={v}" for k, v in s.settings.items() if k != FROM_ENV)
                  + "".join(f"; {name}={value} from the environment" for name, value in s.settings[FROM_ENV].items()))
        if s.accounting is not None:
            stats = s.accounting["stats"]
            cost = stats.get("cost_usd")
            answered = ", ".join(stats.get("answered_by") or {}) or "none"
            print(f"  judge {s.accounting['judge'].get('model')} (answered by {answered}): {stats.get('calls', 0)} calls, "
                  f"{stats.get('cache_hits', 0)} cache hits, {stats.get('failures', 0)} failures"
                  + (f", {stats['not_computed']} with no cached verdict (not sent: counted as failed)" if stats.get("not_computed") else "")
                  + ("" if cost is None else f", ${cost:.4f}"))
            if stats.get("cache_errors"):
                print(f"  JUDGE CACHE ERRORS: {stats['cache_errors']} reads/writes of {(s.accounting.get('cache') or {}).get('path')} "
                      "failed (see the log): the verdicts not stored are paid for again by the next run")
            if stats.get("items_failed"):
                print(f"  NOTE: {unbuilt_items(s.benchmark, stats['items_failed'])[0]}: the judgments they need are counted "
                      "as failed; fix that and score again (the cached verdicts are reused)")
            snapshots = stats.get("snapshots") or {}
            if snapshots.get("other"):
                print(f"  WARNING: {snapshots['other']} verdicts from another snapshot than {snapshots.get('current')} under the "
                      f"name {s.accounting['judge'].get('model')} (" + ", ".join(f"{m} x{n}" for m, n in snapshots["by"].items()) + ")")
        for line in s.coverage.problems() if s.coverage is not None else []:
            print(f"  NOTE: {line}")


def main(args) -> int:
    from lmms_video_reasoning.judges import JudgeConfigError

    try:
        gathered, skipped, missing = gather_records(Path(args.path), args.task)
        if _batch_step(args, gathered):
            return 0
        said: set = set()  # the judge notes printed (once each)
        scores = [_score(item, _judge_chooser(args, item, said)) for item in gathered]
    except JudgeConfigError as error:
        raise DataError(f"the judge cannot run: {error}") from None
    except OSError as error:
        raise DataError(f"cannot read {error.filename or args.path}: {error.strerror or error}") from None
    print_scores(scores)
    for line in skipped:
        print(f"\nNOT SCORED: {line}")
    for line in missing:
        print(f"\nMISSING: {line}")
    outages = {json.dumps(s.accounting["stats"]["outage"], sort_keys=True) for s in scores
               if s.accounting is not None and (s.accounting.get("stats") or {}).get("outage")}
    for outage in map(json.loads, sorted(outages)):
        # An outage is not a result: say so in the exit status too (scripts check it).
        print(f"\nJUDGE OUTAGE: {outage['model']} at {outage['endpoint']}: {outage['reason']}. The judgments it did not make "
              "are not computed (nothing cached for them); run the same command again once the judge works.")
    print_held(scores, str(args.path))
    cache_errors = {(s.accounting.get("cache") or {}).get("path"): (s.accounting.get("cache") or {}).get("errors")
                    for s in scores if s.accounting is not None and (s.accounting.get("stats") or {}).get("cache_errors")}
    for path, count in cache_errors.items():
        # Not a silent re-payment: the next run would pay again for what was not stored.
        print(f"\nJUDGE CACHE ERROR: {count} reads/writes of {path} failed; the metrics stand, but the verdicts not stored are "
              "paid for again by the next run. Fix the file (disk space, permissions) or set LMMS_VR_JUDGE_CACHE to a writable file.")
    if args.out:
        runs = list(dict.fromkeys(s.run for s in scores))
        for run, path in results_paths(Path(args.out), runs).items():
            try:
                write_results(path, [s for s in scores if s.run == run], str(args.path))
            except OSError as error:
                raise DataError(f"cannot write the results to {path}: {error.strerror or error} (give another --out)") from None
            print(f"\nresults{f' of run {run}' if len(runs) > 1 else ''} written to {path}")
    return 3 if outages else 4 if cache_errors else 5 if missing else 0


def print_held(scores: Sequence[TaskScore], path: str) -> None:
    """The judgments the offline batch flow holds (`BatchBoundJudge`), per judge and cache, and how to retry them."""
    held: dict[tuple, list[int]] = {}
    for s in scores:
        stats = (s.accounting or {}).get("stats") or {}
        if stats.get("batch_failed") or stats.get("batch_due"):
            judge = s.accounting.get("judge") or {}
            counts = held.setdefault((judge.get("model"), judge.get("base_url"), (s.accounting.get("cache") or {}).get("path")), [0, 0])
            counts[0] += stats.get("batch_failed", 0)
            counts[1] += stats.get("batch_due", 0)
    for (model, endpoint, cache), (failed, due) in held.items():
        # Not an outage and not a silent re-send: the batch's verdicts stand, the rest is counted as failed.
        retry = [f"`lmms-vr score {path} --batch-export FILE` exports the {due} still due"] if due else []
        retry.append(f"`lmms-vr score {path} --judge-online` sends them to the configured judge ({model} at {endpoint})")
        print(f"\nNOT SENT: {failed + due} judgments of the offline batch flow were not sent: {failed} failed in the batch "
              f"(attempts used up, or no reply parsed), {due} exported and not answered yet (cache {cache}). They are counted "
              "as failed judgments (judge_failed; metrics past the failure share are not computed). To judge them: "
              + "; ".join(retry) + ".")


def _batch_step(args, gathered: Sequence[Gathered]) -> bool:
    """--estimate, --batch-export, --batch-import (True: nothing scored) and --batch (False: then scored)."""
    from lmms_video_reasoning.utils.results import batch_judging

    if args.estimate:
        data = batch_judging.estimate(gathered)
        batch_judging.print_estimate(data)
        if args.out:
            Path(args.out).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            print(f"\nestimate written to {args.out}")
        return True
    if args.batch_export:
        batch_judging.export(gathered, Path(args.batch_export))
        return True
    if args.batch_import:
        batch_judging.import_results(gathered, args.batch_import)
        return True
    if args.batch:
        batch_judging.api_judging(gathered)
    return False


def _judge_chooser(args, item: Gathered, said: set) -> JudgeChooser:
    """The judge the item's scoring is handed (`score_task`'s `judge_for`), and the notes on it
    (`said`: those already printed). After --batch: the cache alone. A configured judge whose cache
    holds an offline batch flow of its model sends nothing that flow holds (`BatchBoundJudge`; not
    with --judge-online). No judge configured: the cache the run recorded (`recorded_verdicts`), else
    the batch-imported replies of the judge model in the cache."""
    from lmms_video_reasoning.judges.batch_ledger import batch_bound_judge
    from lmms_video_reasoning.judges.config import JudgeConfig
    from lmms_video_reasoning.judges.process_registry import cache_only_judge
    from lmms_video_reasoning.utils.results.batch_judging import cache_answers_for

    def say(note: str) -> None:
        if note not in said:
            said.add(note)
            print(note)

    batch = args.batch
    name = "" if batch else registry.get(task_spec(item.task).benchmark).scoring.judge_name
    try:
        config = JudgeConfig.from_env(name) if name else None
    except ValueError:  # a benchmark that declares no judge: there is no recorded judge to read
        name = ""
    instead = None  # the judge handed instead of the configured one
    if name and config is not None:
        instead = None if args.judge_online else batch_bound_judge(config)
    elif name:
        instead, why = recorded_verdicts(Path(item.source), name)
        if instead is not None:
            say(f"no judge configured for {name}: verdicts read from the judge cache {instead.config.cache_path} the run "
                f"recorded (model {instead.config.model}; nothing is sent, a request without a cached verdict counts as a "
                "failed judgment)")
        elif why:
            say(f"no judge configured for {name}, and {why}: its judge-based metrics cannot be computed; configure the "
                "judge (LMMS_VR_JUDGE_BASE_URL, or the provider's API key) or put the run's judge cache on this machine")
        model = cache_answers_for([name]).get(name) if instead is None else None
        if model:
            say(f"no judge configured for {name}: verdicts read from the judge cache "
                "(batch-imported replies; nothing is sent, a request without a reply counts as a failed judgment)")
            instead = cache_only_judge(name, model)

    def chosen(bench, records):
        if not bench.judge_name or not bench.needs_judge(records):
            return None
        if batch:  # every judge reads its own cache, sending nothing
            config = JudgeConfig.from_env(bench.judge_name)
            return cache_only_judge(bench.judge_name,
                                    *((config.model, config.cache_path, config.base_url) if config is not None else ()))
        return instead if instead is not None else scoring_judge(bench, records)  # else the configured judge

    return chosen


def recorded_verdicts(samples: Path, judge_name: str) -> tuple[Any, str]:
    """(a reader of the judge cache the run of `samples` recorded, "") or (None, why not; "" for no
    results file or no judge recorded), as `lmms-vr report` finds it (`verdicts_for`). Asked with no
    judge configured, so the verdicts are never borrowed. The results file is lmms-eval's
    `<prefix>_results.json` or ours, `<prefix>.json`."""
    from lmms_video_reasoning.utils.results.report_runs import NO_JUDGE, verdicts_for

    match = run_file_match(samples)
    for name in (match["prefix"] + RESULTS_SUFFIX, match["prefix"] + ".json") if match else ():
        if (samples.parent / name).is_file():
            reader, why, _borrowed = verdicts_for(samples.parent / name, judge_name)
            return reader, "" if why == NO_JUDGE else why
    return None, ""


def _score(item: Gathered, judge_for: JudgeChooser) -> TaskScore:
    try:
        return score_task(item.task, item.records, item.source, run=item.run, coverage=item.coverage, judge_for=judge_for)
    except (KeyError, TypeError, AttributeError) as error:
        raise DataError(f"{item.source}: task {item.task}: a record lacks what scoring needs ({type(error).__name__}: {error}); "
                        "the file was not written by this suite's task or was edited") from None
