"""Judge engine throughput: N requests against a local server with fixed latency (issue 3).

Cold run: wall time vs the ideal ``calls x latency / concurrency`` (goal: within 1.25x).
Warm rerun with the same cache: no request may reach the server (goal: under 2 s).
The server runs as a subprocess (``python -m lmms_video_reasoning.judges.local_server``)
so its threads do not share the client's interpreter lock, as with a real endpoint.

The same N calls judged two more ways, each into a fresh cache, then read back by a judge
that must find every reply cached (identical values, no request):
- batch: the OpenAI Batch API path (`judges.batch_api`, the real `openai` client) against the
  fake Batch API of the tests (`tests/fake_batch_api.py`, answering at once): the suite's own
  overhead (collect, upload, poll, download, validate and import), not the API's turnaround;
- offline: `--batch-export` / a `vllm run-batch` stand-in answering the file
  (`tests/batch_runner.py`) / `--batch-import`, each step timed.

    .venv/bin/python benchmarks/judge_throughput.py [--requests 4000] [--latency 0.2] [--concurrency 64] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from lmms_video_reasoning.judges import Judge, JudgeConfig
from lmms_video_reasoning.utils.core.ask import Request


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "lmms_video_reasoning.judges.local_server", "--port", "0", "--latency", str(latency)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    base_url = process.stdout.readline().strip()
    if not base_url.startswith("http"):
        process.kill()
        raise SystemExit(f"local judge server did not start (got {base_url!r})")
    return process, base_url


def server_requests(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as response:
        return json.load(response)["requests"]


def run_batch(judge: Judge, count: int) -> tuple[float, list]:
    started = time.perf_counter()
    values = judge.map(_judge_item, range(count), desc="judge throughput")
    return time.perf_counter() - started, values


def _judge_item(index: int, ask):
    result = ask(Request([{"role": "user", "content": f"item {index}: is this answer correct?"}], max_tokens=16, tag="bench"))
    return result.value if result.ok else None


def _pass(mode: str, config: JudgeConfig, count: int, results=None):
    """One pass of the N calls with a judge that does not send (`judges.batch_pass.JudgePass`)."""
    from lmms_video_reasoning.judges.batch_pass import JudgePass, ResultRead

    judge_pass = JudgePass(mode, ResultRead(results) if results else None)
    judge_pass.task = "bench"
    judge = judge_pass.judge_for("bench", config)
    judge.map(_judge_item, range(count), desc=mode)
    return judge_pass, judge


def _read_back(config: JudgeConfig, count: int) -> tuple[list, int]:
    """Values from the cache alone (a request that reaches the network would fail: no server)."""
    from lmms_video_reasoning.judges import CacheOnlyJudge

    judge = CacheOnlyJudge("bench", model=config.model, cache_path=config.cache_path)
    values = judge.map(_judge_item, range(count), desc="read back")
    return values, judge.stats.not_computed


def run_batch_api(count: int, tmp: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fake_batch_api import FakeBatchApi

    from lmms_video_reasoning.judges.batch_api import BatchApi
    from lmms_video_reasoning.judges.batch_pass import ResultRead
    from lmms_video_reasoning.judges.local_server import echo_responder

    os.environ["LMMS_VR_BATCH_POLL_SECONDS"] = "0.2"
    with FakeBatchApi(echo_responder, model="local-judge", polls_to_finish=2) as api:
        config = JudgeConfig(model="local-judge", base_url=api.base_url, api_key="sk-bench", cache_path=tmp / "batch.sqlite")
        started = time.perf_counter()
        collected, judge = _pass("collect", config, count)
        batch_api = BatchApi(config, judge.ledger)
        pending = list(collected.pending.values())
        batch_api.submit([p.line for p in pending], {p.key: ("bench", p.tag) for p in pending})
        read = ResultRead()
        batch_api.wait(batch_api.open_submissions(), read)
        results = read.results
        imported, _ = _pass("import", config, count, results)
        seconds = time.perf_counter() - started
        http_requests = len(api.requests)
        batches = len(api.created)
    values, missing = _read_back(config, count)
    return {"batch_api_seconds": round(seconds, 3), "batch_api_http_requests": http_requests, "batch_api_batches": batches,
            "batch_api_cached": imported.counts.cached, "batch_api_read_back_missing": missing, "_values": values}


def run_offline(count: int, tmp: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from batch_runner import answer_file

    from lmms_video_reasoning.judges.batch_pass import read_result_lines, write_lines
    from lmms_video_reasoning.judges.batch_ledger import EXPORTED
    from lmms_video_reasoning.judges.local_server import echo_responder

    config = JudgeConfig(model="local-judge", cache_path=tmp / "offline.sqlite")
    started = time.perf_counter()
    collected, judge = _pass("collect", config, count)
    pending = list(collected.pending.values())
    write_lines(tmp / "requests.jsonl", [p.line for p in pending])
    judge.ledger.mark_many([p.key for p in pending], config.model, EXPORTED)
    export_seconds = time.perf_counter() - started
    started = time.perf_counter()
    answer_file(tmp / "requests.jsonl", tmp / "results.jsonl", echo_responder)
    answer_seconds = time.perf_counter() - started
    started = time.perf_counter()
    with (tmp / "results.jsonl").open("rb") as handle:
        results = read_result_lines(handle, "results.jsonl").results
    imported, _ = _pass("import", config, count, results)
    import_seconds = time.perf_counter() - started
    values, missing = _read_back(config, count)
    return {"offline_export_seconds": round(export_seconds, 3), "offline_answer_seconds": round(answer_seconds, 3),
            "offline_import_seconds": round(import_seconds, 3), "offline_requests_exported": len(pending),
            "offline_cached": imported.counts.cached, "offline_read_back_missing": missing, "_values": values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--paths", default="sync,batch,offline", help="which of sync, batch, offline to run")
    args = parser.parse_args()
    paths = set(args.paths.split(","))
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.getLogger("httpx2").setLevel(logging.WARNING)

    report: dict = {"requests": args.requests}
    expected = [f"echo: item {index}: is this answer correct?" for index in range(args.requests)]
    if "batch" in paths or "offline" in paths:
        with tempfile.TemporaryDirectory() as tmp:
            for name, run in (("batch", run_batch_api), ("offline", run_offline)):
                if name in paths:
                    result = run(args.requests, Path(tmp))
                    result[f"{name}_identical_values"] = result.pop("_values") == expected
                    report.update(result)
    if "sync" not in paths:
        _print(report, args)
        return
    process, base_url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = JudgeConfig(
                model="local-judge", base_url=base_url, api_key=None, concurrency=args.concurrency,
                cache_path=Path(tmp) / "judge_cache.sqlite", timeout=30.0,
            )
            cold_seconds, cold_values = run_batch(Judge(config), args.requests)
            cold_requests = server_requests(base_url)
            warm_judge = Judge(config)  # a fresh process-like judge: only the SQLite cache is shared
            warm_seconds, warm_values = run_batch(warm_judge, args.requests)
            warm_requests = server_requests(base_url) - cold_requests
    finally:
        process.terminate()
        process.wait(timeout=10)

    ideal = args.requests * args.latency / args.concurrency
    report.update({
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "cold_seconds": round(cold_seconds, 3),
        "ideal_seconds": round(ideal, 3),
        "ratio_to_ideal": round(cold_seconds / ideal, 3),
        "cold_requests": cold_requests,
        "cold_failures": sum(value is None for value in cold_values),
        "warm_rerun_seconds": round(warm_seconds, 3),
        "warm_rerun_requests": warm_requests,
        "warm_cache_hits": warm_judge.stats.cache_hits,
        "warm_identical": warm_values == cold_values,
        "goal_ratio_met": cold_seconds / ideal <= 1.25,
        "goal_warm_met": warm_requests == 0 and warm_seconds < 2.0,
        "sync_identical_values": cold_values == expected,
    })
    _print(report, args)


def _print(report: dict, args) -> None:
    if args.json:
        print(json.dumps(report))
        return
    width = max(len(name) for name in report)
    print(f"judge throughput ({args.requests} requests, {args.latency * 1000:.0f} ms latency, concurrency {args.concurrency})")
    for name, value in report.items():
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
