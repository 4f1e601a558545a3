"""Helpers for lmms-eval aggregation: score a task's records once, report many metrics.

lmms-eval calls one aggregation function per metric, each with the list of records that
`process_results` returned under that metric's name. Our records are the same for every
metric of a task, and scoring them may mean thousands of judge calls, so the scoring runs
once per distinct list of records and each metric picks its value from the result
(each benchmark's `hooks.py` defines its `aggregate_<metric>` functions over a ScoreOnce).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

Records = Sequence[dict]


def records_key(records: Records) -> str:
    """A content hash of a list of records (order-insensitive)."""
    digests = sorted(hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest() for r in records)
    return hashlib.sha256("".join(digests).encode()).hexdigest()


class ScoreOnce:
    """Memoise `score(records) -> {metric: value}` by the records' content."""

    def __init__(self, score: Callable[[Records], dict[str, Any]]):
        self._score = score
        self._results: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, records: Records) -> dict[str, Any]:
        key = records_key(records)
        with self._lock:
            if key not in self._results:
                self._results[key] = self._score(records)
            return self._results[key]

    def aggregation(self, metric: str, after: AfterScoring | None = None) -> Callable[..., Any]:
        """The lmms-eval aggregation function of one metric (what a task YAML points at).

        lmms-eval passes its CLI namespace to a parameter named `args`; `after(scores,
        output_dir)` then runs (e.g. to write the judge accounting next to the results).
        """

        def aggregate(records: Records, args: Any = None) -> Any:
            scores = self(records)
            if after is not None:
                after(scores, output_dir(args))
            return scores[metric]

        aggregate.__name__ = f"aggregate_{metric}"
        return aggregate


AfterScoring = Callable[[dict[str, Any], "Path | None"], None]


def output_dir(args: Any) -> Path | None:
    """The folder of lmms-eval's `--output_path` (None when not given)."""
    path = getattr(args, "output_path", None) if args is not None else None
    if not path:
        return None
    path = Path(path)
    return path.parent if path.suffix == ".json" else path


def judge_accounting_writer(benchmark: str) -> AfterScoring:
    """An `after` hook writing the benchmark judge's accounting (calls, cache hits, failures,
    tokens, cost; never the key) to `<output_dir>/judge_accounting_<benchmark>.json`."""

    def write(scores: dict[str, Any], folder: Path | None) -> None:
        from lmms_video_reasoning.judges import get_judge

        judge = get_judge(benchmark)
        if judge is not None and folder is not None:
            judge.write_accounting(folder / f"judge_accounting_{benchmark}.json")

    return write
