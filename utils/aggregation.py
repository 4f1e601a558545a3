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
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
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

        lmms-eval passes its CLI namespace to a parameter named `args`; `after(scores, run)`
        then runs with the run's output files (`RunFiles`, None without `--output_path`),
        e.g. to write the judge accounting beside the run's results.
        """

        def aggregate(records: Records, args: Any = None) -> Any:
            scores = self(records)
            if after is not None:
                after(scores, run_files(args))
            return scores[metric]

        aggregate.__name__ = f"aggregate_{metric}"
        return aggregate


@dataclass(frozen=True)
class RunFiles:
    """Where one lmms-eval run writes: `<folder>/<date_id>_results.json`, `..._samples_<task>.jsonl`.

    `path(name)` is `<folder>/<date_id>_<name>` beside them, so each run's extra files are
    paired with its results and a later run into the same `--output_path` overwrites nothing.
    """

    folder: Path
    date_id: str

    def path(self, name: str) -> Path:
        path = self.folder / f"{self.date_id}_{name}"
        with _written_lock:
            if path in _written or not path.exists():
                _written.add(path)
                return path
            # Another run of the same second wrote it: keep both.
            number = 2
            while True:
                candidate = path.with_name(f"{self.date_id}_{number}_{name}")
                if candidate in _written or not candidate.exists():
                    _written.add(candidate)
                    return candidate
                number += 1


_written: set[Path] = set()  # files this process wrote (rewritten as the run's accounting grows)
_written_lock = threading.Lock()


def run_files(args: Any) -> RunFiles | None:
    """The output files of the lmms-eval run in progress (None without `--output_path`).

    lmms-eval writes to `<output_path>/<sanitized model name>/<date_id>_results.json` after the
    aggregation; its `simple_evaluate` holds the date and the model folder, read from its frame
    (else rebuilt from the CLI arguments the way lmms-eval builds them).
    """
    path = getattr(args, "output_path", None) if args is not None else None
    if not path:
        return None
    date_id, model_folder = _evaluation_in_progress()
    if model_folder is None or date_id is None:
        try:
            from lmms_eval.loggers.evaluation_tracker import GeneralConfigTracker
            from lmms_eval.utils import get_datetime_str, sanitize_model_name

            model_folder = sanitize_model_name(GeneralConfigTracker._get_model_name(str(getattr(args, "model_args", "") or "")))
            date_id = date_id or get_datetime_str(timezone=getattr(args, "timezone", None) or "Asia/Singapore").replace(":", "-")
        except Exception:  # noqa: BLE001 - another lmms-eval version: the output folder and a UTC time
            model_folder = model_folder or ""
            date_id = date_id or datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")
    return RunFiles(Path(path) / model_folder if model_folder else Path(path), date_id)


def _evaluation_in_progress() -> tuple[str | None, str | None]:
    """(date_id, model folder) of lmms-eval's `simple_evaluate` on this thread's stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "simple_evaluate" and "datetime_str" in frame.f_locals:
            tracker = frame.f_locals.get("evaluation_tracker")
            folder = getattr(getattr(tracker, "general_config_tracker", None), "model_name_sanitized", None)
            return str(frame.f_locals["datetime_str"]).replace(":", "-"), folder
        frame = frame.f_back
    return None, None


AfterScoring = Callable[[dict[str, Any], "RunFiles | None"], None]


def judge_accounting_writer(benchmark: str) -> AfterScoring:
    """An `after` hook writing the benchmark judge's accounting (calls, cache hits, failures,
    tokens, cost, the models that answered; never the key) beside the run's results:
    `<date_id>_judge_accounting_<benchmark>.json`."""

    def write(scores: dict[str, Any], run: RunFiles | None) -> None:
        from lmms_video_reasoning.judges import get_judge

        judge = get_judge(benchmark)
        if judge is not None and run is not None:
            judge.write_accounting(run.path(f"judge_accounting_{benchmark}.json"))

    return write
