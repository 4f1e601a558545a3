"""`lmms-vr score` before and instead of synchronous judging: the cost estimate, batch files, the Batch API.

    lmms-vr score PATH --estimate                    the bill: requests not cached, tokens, price (sync and batch)
    lmms-vr score PATH --batch-export requests.jsonl every request that can be made now (Batch API / vllm run-batch lines)
    lmms-vr score PATH --batch-import results.jsonl  fill the cache from the results (validated as synchronous replies)
    lmms-vr score PATH --batch [--out scored.json]   the same through the OpenAI Batch API, then score from the cache

Each runs the tasks' own scoring code with a judge that does not send (`judges.batch_pass.JudgePass`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Sequence

from lmms_video_reasoning.judges import batch_ledger
from lmms_video_reasoning.judges.batch_pass import (JudgePass, ResultRead, TagEstimate, place_order, read_result_lines,
                                                    write_lines)
from lmms_video_reasoning.judges.config import JudgeConfig, batch_price, cache_path_from_env, default_model, usd
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.results.samples_io import task_spec, unbuilt_items

@contextlib.contextmanager
def quiet_judging(level: int = logging.CRITICAL) -> Iterator[None]:
    """The benchmarks' log lines below `level` are not shown: in a pass, a failed judgment means "pending"."""
    logger = logging.getLogger("lmms_video_reasoning")
    saved = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(saved)


def run_pass(gathered: Sequence[Any], judge_pass: JudgePass) -> JudgePass:
    """The tasks' own scoring (`scoring.score`) with `judge_pass`'s judge of each benchmark."""
    for item in gathered:
        spec = task_spec(item.task)
        bench = registry.get(spec.benchmark).scoring
        records = list(item.records)
        if not records or not bench.needs_judge(records):
            continue
        judge_pass.task = item.task
        with quiet_judging():
            judge = judge_pass.judge_for(bench.judge_name, JudgeConfig.from_env(bench.judge_name))
            bench.score(records, bench.settings(records), judge)
    return judge_pass


# ---------------------------------------------------------------------- estimate


def estimate(gathered: Sequence[Any]) -> dict:
    """The estimate of every task's judging as JSON-ready data (rows, totals, how tokens were counted)."""
    from lmms_video_reasoning.judges.tokens import tokenizer_for

    judge_pass = run_pass(gathered, JudgePass("estimate"))
    benchmarks = {item.task: task_spec(item.task).benchmark for item in gathered}
    rows = []
    for task, tags in judge_pass.estimates.items():
        benchmark = benchmarks.get(task, "")
        judge = judge_pass.judges.get(registry.get(benchmark).scoring.judge_name) if benchmark else None
        if judge is None:
            continue
        price = judge.config.price()
        cheap = batch_price(judge.config.model, price)
        for tag, entry in sorted(tags.items()):
            rows.append({"benchmark": benchmark, "task": task, "judge_call": tag, "model": judge.config.model, **vars(entry),
                         "usd_sync": usd(price, entry.input_tokens, entry.output_tokens),
                         "usd_batch": usd(cheap, entry.input_tokens, entry.output_tokens)})
    models = sorted({judge.config.model for judge in judge_pass.judges.values()})
    sync, cheap = [row["usd_sync"] for row in rows], [row["usd_batch"] for row in rows]
    return {
        "rows": rows,
        "total": {**{name: sum(row[name] for row in rows) for name in vars(TagEstimate())},
                  "usd_sync": None if None in sync else sum(sync), "usd_batch": None if None in cheap else sum(cheap),
                  "usd_sync_known": sum(v for v in sync if v is not None), "usd_batch_known": sum(v for v in cheap if v is not None)},
        "cache_hits": dict(judge_pass.served),
        "tokenizers": {model: tokenizer_for(model).method for model in models},
        "cache": {b: str(j.config.cache_path) if j.config.cache_path else None for b, j in judge_pass.judges.items()},
        "not_counted": not_counted(judge_pass, benchmarks),
    }


def not_counted(judge_pass: JudgePass, task_benchmarks: dict[str, str]) -> list[dict]:
    """What the estimate leaves out, per task and step: the judging items whose code failed (`Unbuilt`),
    the requests they declared from there on (`unknown_items`: could not say, at least one each)."""
    groups: dict[tuple[str, str | None], list] = {}
    for entry in judge_pass.unbuilt:
        groups.setdefault((entry.task, entry.after), []).append(entry)
    out = []
    for (task, after), entries in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        benchmark = task_benchmarks.get(task, "")
        reasons = list(dict.fromkeys(entry.reason for entry in entries))
        out.append({"benchmark": benchmark, "task": task, "after": after, "items": len(entries),
                    "requests": sum(entry.later_steps for entry in entries),
                    "unknown_items": sum(1 for entry in entries if not entry.later_steps),
                    "reason": reasons[0], "other_reasons": len(reasons) - 1,
                    "missing": unbuilt_items(benchmark, len(entries))[1] if benchmark else "judge items not rebuilt"})
    return out


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def print_estimate(data: dict) -> None:
    print("Judging cost estimate: judge requests not in the cache, per benchmark, task and judge call")
    header = f"{'benchmark':<11} {'task':<18} {'judge call':<24} {'requests':>9} {'input tok':>12} {'output tok':>11} {'sync':>10} {'batch':>10}"
    print(header)
    print("-" * len(header))
    for row in data["rows"]:
        note = f"  ({row['after_assumed']} after an assumed reply)" if row["after_assumed"] else ""
        note += f"  (+ up to {row['later_steps']} later steps)" if row["later_steps"] else ""
        note += f"  (+ {row['not_built']} later steps NOT COUNTED, see below)" if row.get("not_built") else ""
        print(f"{row['benchmark']:<11} {row['task']:<18} {row['judge_call']:<24} {row['requests']:>9,} {row['input_tokens']:>12,} "
              f"{row['output_tokens']:>11,} {_money(row['usd_sync']):>10} {_money(row['usd_batch']):>10}{note}")
    total = data["total"]
    print("-" * len(header))
    print(f"{'total':<55} {total['requests']:>9,} {total['input_tokens']:>12,} {total['output_tokens']:>11,} "
          f"{_money(total['usd_sync']):>10} {_money(total['usd_batch']):>10}")
    if total["usd_sync"] is None and data["rows"]:
        print(f"(prices known for part of it: {_money(total['usd_sync_known'])} sync, {_money(total['usd_batch_known'])} batch; "
              "set LMMS_VR_JUDGE_PRICES for the others)")
    for gap in data.get("not_counted", []):
        after = f"after their {gap['after']} request" if gap["after"] else "before their first request"
        size = f"{gap['requests']:,} requests" + (f" + at least {gap['unknown_items']:,} more" if gap["unknown_items"] else "") \
            if gap["requests"] else f"at least {gap['unknown_items']:,} requests"
        others = f" (and {gap['other_reasons']} other messages)" if gap["other_reasons"] else ""
        print(f"NOT COUNTED in the total: {gap['task']}: {size} ({gap['items']:,} judging items failed {after}: "
              f"{gap['missing']}): {gap['reason']}{others}. Fix that and estimate again.")
    hits = sum(data["cache_hits"].values())
    print(f"\nalready in the judge cache (not counted): {hits:,} requests")
    for model, method in data["tokenizers"].items():
        print(f"input tokens of {model}: {method}; chat framing and images as OpenAI bills them")
    print("output tokens: each protocol's reply format (judges' expected replies); re-asks of unparseable replies not "
          "included. A later step built on an earlier step's reply is counted by assuming that step's expected reply (an "
          "upper bound where the protocol may stop early); a step that cannot be built (e.g. its media is missing) is "
          "listed as NOT COUNTED above.")
    print("batch price: the OpenAI Batch API (50% of synchronous, or LMMS_VR_JUDGE_PRICES's batch_input/batch_output); "
          "n/a for endpoints without one")


# ---------------------------------------------------------------------- batch files


def export(gathered: Sequence[Any], path: Path) -> None:
    """Write every request that can be sent now, and say what is left."""
    judge_pass = run_pass(gathered, JudgePass("collect"))
    pending = list(judge_pass.pending.values())
    write_lines(path, [p.line for p in pending])
    for judge in judge_pass.judges.values():
        keys = [p.key for p in pending if p.benchmark == judge.config.benchmark]
        if keys and judge.ledger is not None:
            judge.ledger.mark_many(keys, judge.config.model, batch_ledger.EXPORTED, meta={p.key: (p.benchmark, p.tag) for p in pending})
    if not pending:
        print(f"nothing to judge: every judge request is answered in the cache ({path} is empty). "
              "Score with `lmms-vr score PATH --out scored.json`.")
        return
    tags = ", ".join(f"{tag} {count}" for tag, count in sorted(Counter(p.tag for p in pending).items()))
    print(f"{len(pending)} judge requests written to {path} ({tags}) for "
          + ", ".join(f"{b}: {judge.config.model}" for b, judge in sorted(judge_pass.judges.items())))
    print(f"rounds left: at most {max(p.rounds_left for p in pending)}, this one included (a later step or a re-ask of an "
          "unparseable reply is exported once what it depends on is imported; a failed result line adds a round)")
    print("answer it with the Batch API or e.g. `vllm run-batch -i requests.jsonl -o results.jsonl --model <judge model>`, then "
          "`lmms-vr score PATH --batch-import results.jsonl`")


def import_results(gathered: Sequence[Any], where: str) -> None:
    """Fill the cache from the results file ``where`` and say what became of every line (DataError: none accepted)."""
    path = Path(where)
    try:
        with path.open("rb") as handle:
            read = read_result_lines(handle, path.name)
    except OSError as error:
        raise DataError(f"cannot read the batch results {path}: {error.strerror or error}") from None
    pending = import_lines(gathered, read, str(path)).pending
    print_counts(read, where)
    if pending:
        print(f"next round: {len(pending)} requests can be exported now (`lmms-vr score PATH --batch-export FILE`); "
              f"at most {max(p.rounds_left for p in pending.values())} rounds left")
    else:
        print("every judge request is answered: score with `lmms-vr score PATH --out scored.json`")
    if read.accepted():
        return
    if not read.lines:
        raise DataError(f"{where}: nothing imported: the file is empty")
    parts = [f"{count} {what}" for count, what in (
        (read.refusals["stale"], "stale (already imported, or not asked by this scoring)"),
        (read.refusals["foreign"], "with a custom_id this cache never exported (another cache's results?)"),
        (read.refusals["model"], "answered by another model than the judge's"),
        (read.refusals["too_large"], "over the reply size cap"),
        (read.conflict_lines, "in conflicts"), (len(read.duplicates), "duplicates"),
        (len(read.undecodable), "undecodable"), (len(read.unreadable), "not result lines"),
        (read.blank, "blank")) if count]
    raise DataError(f"{where}: nothing imported: none of its {read.lines} lines was accepted: " + ", ".join(parts))


def import_lines(gathered: Sequence[Any], read: ResultRead, where: str) -> JudgePass:
    """The import pass of ``read``'s lines: its `counts` of every line's fate, what is `pending` next."""
    judge_pass = run_pass(gathered, JudgePass("import", read, endpoint=f"(batch results {Path(where).name})"))
    judge_pass.refuse_unasked()
    return judge_pass


SHOWN = 50  # lines named per kind of refusal (all are counted)


def _named(title: str, lines: Sequence[str]) -> None:
    if not lines:
        return
    print(f"{title} ({len(lines)}):")
    for line in lines[:SHOWN]:
        print(f"  {line}")
    if len(lines) > SHOWN:
        print(f"  ... and {len(lines) - SHOWN} more")


def print_counts(read: ResultRead, where: str) -> None:
    """Every line's fate, each refused, conflicting, unreadable or duplicate line named by its file:line."""
    print(f"imported {where}: {read.lines} lines: {read.cached} cached, {read.rejected} did not parse "
          f"(kept apart; re-asked in the next round), {read.errors} failed lines (due again; {read.failed} "
          f"requests out of attempts: judged failed), {len(read.duplicates)} duplicates (imported once), "
          f"{read.conflict_lines} in {len(read.conflicts)} conflicts (one custom_id, different replies: none "
          f"imported), {len(read.refused)} refused, {len(read.undecodable)} undecodable, "
          f"{len(read.unreadable)} not result lines, {read.blank} blank")
    if read.refused:
        kinds = read.refusals
        print(f"REFUSED (not served): {kinds['model']} answered by another model than the judge's, "
              f"{kinds['foreign']} with a custom_id this cache never exported, {kinds['stale']} stale "
              f"(already answered, or not asked by this scoring), {kinds['too_large']} replies over the size cap")
    _named("REFUSED lines", sorted(read.refused, key=lambda line: place_order(line.split(": ", 1)[0])))
    _named("CONFLICTS (one custom_id answered differently; none imported, due again)",
           [f"{key[:16]}: {', '.join(wheres)}" for key, wheres in read.conflicts.items()])
    _named("UNDECODABLE lines (skipped)", read.undecodable)
    _named("NOT RESULT LINES (skipped)", read.unreadable)
    _named("duplicates (imported once)", read.duplicates)
    if read.unaccounted():
        print(f"WARNING: {read.unaccounted()} lines not accounted for above (a bug: please report it)")


# ---------------------------------------------------------------------- the Batch API


def api_judging(gathered: Sequence[Any]) -> None:
    """Judge every request through the OpenAI Batch API, round after round, resuming what an earlier run submitted."""
    from lmms_video_reasoning.judges import get_judge
    from lmms_video_reasoning.judges.batch_api import BatchApi

    rounds = batches = requests = 0
    reattached: Counter = Counter()
    apis: dict[str, BatchApi] = {}
    while True:
        judge_pass = run_pass(gathered, JudgePass("collect"))
        opened = [benchmark for benchmark in judge_pass.judges if benchmark not in apis]
        for benchmark in opened:
            configured = get_judge(benchmark, quiet=True)
            if configured is None:
                raise DataError(f"--batch needs the {benchmark} judge's API key (see `lmms-vr score --help` and the "
                                "README's Judges section), or use --batch-export / --batch-import")
            apis[benchmark] = BatchApi(configured.config, judge_pass.judges[benchmark].ledger)
            reattached.update(apis[benchmark].reattach())
        if opened or _finish(gathered, apis):
            continue  # re-attached to an earlier run's batches, or imported: what is due has changed
        if not judge_pass.pending:
            break
        rounds += 1
        for benchmark, api in apis.items():
            pending = [p for p in judge_pass.pending.values() if p.benchmark == benchmark]
            if pending:
                batches += len(api.submit([p.line for p in pending], {p.key: (p.benchmark, p.tag) for p in pending}))
                requests += len(pending)
        _finish(gathered, apis)
    if any(reattached.values()):
        print("re-attached to an earlier run's batches: " + ", ".join(f"{k} {v}" for k, v in reattached.items() if v))
    print(f"batch judging: {rounds} rounds, {batches} batches, {requests} requests submitted")


def _finish(gathered: Sequence[Any], apis: dict) -> bool:
    """Wait for every open submission, import all their results in one pass, close them (False: none open)."""
    read = ResultRead()
    finished = []
    seen: set[str] = set()  # benchmarks sharing a judge (model and cache) see the same submissions: each is waited for once
    for api in apis.values():
        rows = [row for row in api.open_submissions() if row["submission"] not in seen]
        seen.update(row["submission"] for row in rows)
        if rows:
            finished += [(api, item) for item in api.wait(rows, read)]
    if not finished:
        return False
    imported = import_lines(gathered, read, "batch")
    print_counts(imported.counts, f"the results of {len(finished)} batches")
    kept = Counter(place_order(line.where)[0] for line in read.results.values())  # per file: the lines the read kept
    answered = Counter(place_order(line.where)[0] for line in read.results.values() if line.ok)  # those with a reply
    unasked = read.results.keys() - imported.consumed
    for api, item in finished:
        results, ok = sum(kept[name] for name in item.files), sum(answered[name] for name in item.files)
        leftover = api.close(item, results, unasked)
        extra = f", {leftover} without a result (due again)" if leftover else ""
        errors = f", batch errors: {'; '.join(item.errors)}" if item.errors else ""
        print(f"  {item.batch_id}: {item.status}, {ok} of {item.requests} requests answered, "
              f"{results - ok} error lines{extra}{errors}")
    return True


def cache_answers_for(benchmarks: Sequence[str]) -> dict[str, str]:
    """{benchmark: model} for benchmarks with no judge configured whose judge model has batch-imported
    replies in the judge cache: `lmms-vr score` reads their verdicts from the cache (nothing sent)."""
    ledger = batch_ledger.existing_ledger(cache_path_from_env())
    found = {}
    for benchmark in benchmarks if ledger is not None else ():
        try:
            if JudgeConfig.from_env(benchmark) is None and ledger.has(default_model(benchmark), batch_ledger.ANSWERED):
                found[benchmark] = default_model(benchmark)
        except Exception:  # noqa: BLE001 - an unreadable cache: scoring goes on as before, and says why there
            continue
    return found
