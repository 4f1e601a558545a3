"""Judge engine throughput: N requests against a local server with fixed latency (issue 3).

Cold run: wall time vs the ideal ``calls x latency / concurrency`` (goal: within 1.25x).
Warm rerun with the same cache: no request may reach the server (goal: under 2 s).
The server runs as a subprocess (``python -m lmms_video_reasoning.judges.local_server``)
so its threads do not share the client's interpreter lock, as with a real endpoint.

    /work/venv/bin/python benchmarks/judge_throughput.py [--requests 4000] [--latency 0.2] [--concurrency 64] [--json]
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

from lmms_video_reasoning.judges import Judge, JudgeConfig, JudgeRequest


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
    def judge_item(index: int, ask):
        result = ask(JudgeRequest([{"role": "user", "content": f"item {index}: is this answer correct?"}], max_tokens=16, tag="bench"))
        return result.value if result.ok else None

    started = time.perf_counter()
    values = judge.map(judge_item, range(count), desc="judge throughput")
    return time.perf_counter() - started, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.getLogger("httpx2").setLevel(logging.WARNING)

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
    report = {
        "requests": args.requests,
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
    }
    if args.json:
        print(json.dumps(report))
        return
    width = max(len(name) for name in report)
    print(f"judge throughput ({args.requests} requests, {args.latency * 1000:.0f} ms latency, concurrency {args.concurrency})")
    for name, value in report.items():
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
