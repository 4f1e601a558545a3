"""The judge cache's two locking modes side by side: WAL (local file systems) and the
cluster-safe mode (rollback journal + dot-file lock, used on NFS/Lustre/GPFS...).

Each round writes and reads back N replies from T threads (the engine's pattern: one read before
a request, one write after), then two processes at once; both modes in one run, interleaved, on
the same folder. The folder's own file system decides what is measured (a local disk here; run it
with --dir on the shared file system to measure that).

    python benchmarks/judge_cache_modes.py [--replies 2000] [--threads 32] [--rounds 3] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lmms_video_reasoning.judges.cache import LOCAL, NETWORK, CachedReply, ReplyCache, cache_mode

_PROCESS = """
import sys, time
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
cache = ReplyCache(sys.argv[1], mode=sys.argv[2])
for i in range(int(sys.argv[3])):
    key = f"{sys.argv[4]}-{i}"
    cache.get(key)
    cache.put(key, "m", CachedReply("verdict " * 20, 900, 20, "judge-x", None))
print(cache.errors)
"""


def threads_round(path: Path, mode: str, replies: int, threads: int) -> float:
    cache = ReplyCache(path, mode=mode)

    def one(i: int) -> None:
        key = f"t-{i}"
        cache.get(key)
        cache.put(key, "m", CachedReply("verdict " * 20, 900, 20, "judge-x", None))

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(replies)))
    elapsed = time.perf_counter() - started
    if cache.errors or len(cache) != replies:
        raise SystemExit(f"{mode}: {cache.errors} errors, {len(cache)} of {replies} replies stored")
    return elapsed


def processes_round(path: Path, mode: str, replies: int) -> float:
    ReplyCache(path, mode=mode)
    started = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, "-c", _PROCESS, str(path), mode, str(replies // 2), name], stdout=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    outputs = [worker.communicate()[0].strip() for worker in workers]
    elapsed = time.perf_counter() - started
    if outputs != ["0", "0"] or len(ReplyCache(path, mode=mode)) != 2 * (replies // 2):
        raise SystemExit(f"{mode}: processes failed ({outputs})")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replies", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="folder to put the caches in (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="cache_modes_"))
    times: dict[str, dict[str, list[float]]] = {mode: {"threads": [], "processes": []} for mode in (LOCAL, NETWORK)}
    for round_number in range(args.rounds):
        for mode in (LOCAL, NETWORK) if round_number % 2 == 0 else (NETWORK, LOCAL):
            times[mode]["threads"].append(threads_round(base / f"{mode}_{round_number}_t.sqlite", mode, args.replies, args.threads))
            times[mode]["processes"].append(processes_round(base / f"{mode}_{round_number}_p.sqlite", mode, args.replies))
    medians = {mode: {kind: statistics.median(values) for kind, values in kinds.items()} for mode, kinds in times.items()}
    result = {
        "replies": args.replies, "threads": args.threads, "rounds": args.rounds, "folder": str(base),
        "folder_mode_detected": cache_mode(base / "x.sqlite")[1],
        "median_s": medians,
        "replies_per_s": {mode: {kind: round(args.replies / value, 1) for kind, value in kinds.items()} for mode, kinds in medians.items()},
        "network_over_local": {kind: round(medians[NETWORK][kind] / medians[LOCAL][kind], 2) for kind in ("threads", "processes")},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for mode in (LOCAL, NETWORK):
            print(f"{mode:8} threads {medians[mode]['threads']:.2f} s, two processes {medians[mode]['processes']:.2f} s "
                  f"for {args.replies} replies (read + write each)")
        print(f"network / local: {result['network_over_local']}")


if __name__ == "__main__":
    main()
