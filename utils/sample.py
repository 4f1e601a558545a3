"""The sample benchmark: a small, generated copy of each benchmark in its official layout.

`lmms-vr sample --out DIR` writes `DIR/vcr_bench`, `DIR/vrbench` and `DIR/cg_bench`
(each a root for VCR_BENCH_ROOT / VRBENCH_ROOT / CGBENCH_ROOT) with synthetic videos
whose events have known times, and `DIR/predictions.jsonl`, replay predictions for
every task (mostly right, some wrong, some malformed) for the demo and the tests.
Generation is deterministic and skipped when DIR already holds the same version.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

BENCHMARKS = ("vcr_bench", "vrbench", "cg_bench")
ROOT_ENV = {"vcr_bench": "VCR_BENCH_ROOT", "vrbench": "VRBENCH_ROOT", "cg_bench": "CGBENCH_ROOT"}
SAMPLE_VERSION = 1


def _module(benchmark: str):
    return importlib.import_module(f"lmms_video_reasoning.{benchmark}.sample")


def write_sample(out: Path, benchmarks=BENCHMARKS) -> dict[str, Path]:
    """Write the sample benchmark under `out`; return {benchmark: root}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    roots = {}
    predictions = []
    for name in benchmarks:
        module = _module(name)
        root = out / name
        module.write_sample(root)
        roots[name] = root
        predictions.extend(module.demo_predictions(root))
    with (out / "predictions.jsonl").open("w", encoding="utf-8") as handle:
        for row in predictions:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "VERSION").write_text(str(SAMPLE_VERSION))
    return roots


def env_for(out: Path, benchmarks=BENCHMARKS) -> dict[str, str]:
    """The environment variables that point the tasks at a sample written to `out`."""
    return {ROOT_ENV[name]: str(Path(out) / name) for name in benchmarks}
