"""The sample benchmark: a small, generated copy of each benchmark in its official layout.

`lmms-vr sample --out DIR` writes `DIR/<benchmark>` (a root for its root variable) for every
benchmark declaring a sample (`Benchmark.sample_module`), with synthetic videos whose events have
known times, and `DIR/predictions.jsonl`: replay predictions for every task (mostly right, some
wrong, some malformed). Deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import SUBSET_MARKER

SAMPLE_VERSION = 2  # 2: replies per round for multi-round tasks


def sample_benchmarks() -> tuple[str, ...]:
    """The benchmarks (registry names, report order) that declare a generated sample."""
    return tuple(b.name for b in registry.benchmarks() if b.sample_module is not None)


def write_sample(out: Path, benchmarks: Sequence[str] | None = None) -> dict[str, Path]:
    """Write the sample benchmark under `out`; return {benchmark: root}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    roots = {}
    predictions = []
    for name in benchmarks if benchmarks is not None else sample_benchmarks():
        module = registry.get(name).sample()
        root = out / name
        module.write_sample(root)
        (root / SUBSET_MARKER).write_text(json.dumps({"subset": "the generated sample benchmark (lmms-vr sample)"}) + "\n")
        roots[name] = root
        predictions.extend(module.demo_predictions(root))
    with (out / "predictions.jsonl").open("w", encoding="utf-8") as handle:
        for row in predictions:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "VERSION").write_text(str(SAMPLE_VERSION))
    return roots


def env_for(out: Path, benchmarks: Sequence[str] | None = None) -> dict[str, str]:
    """The environment variables that point the tasks at a sample written to `out`."""
    names = benchmarks if benchmarks is not None else sample_benchmarks()
    return {registry.get(name).data().SOURCE.root_env: str(Path(out) / name) for name in names}
