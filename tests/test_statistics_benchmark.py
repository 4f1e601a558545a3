"""`benchmarks/statistics_at_scale.py --quick --json` runs end to end (lmms-eval replays with the standard-error
hook on and off, `lmms-vr score`, `lmms-vr report` on 1, 2 and 4 runs) and reports sane figures.

The goals themselves (overhead, report time, memory) are measured by the full-size run, not here:
this is a smoke test of the benchmark and of `LMMS_VR_STDERR=off` through lmms-eval's own CLI.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "statistics_at_scale.py"


def positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@pytest.mark.slow
def test_statistics_benchmark_quick_json(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", "--keep", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["scale"] == "quick"
    assert out["documents"] == {"cg_bench": 300 * 6, "vcr_bench": 60, "vrbench": 120}
    for benchmark, replay in out["replay"].items():
        # the hook on gives lmms-eval's Stderr column its values; LMMS_VR_STDERR=off leaves it N/A
        assert replay["stderr_on_has_values"] and replay["stderr_off_is_na"], (benchmark, replay)
        for side in ("off", "on"):
            assert all(positive(replay[side][key]) for key in ("wall_s", "cpu_s", "peak_mb")), replay
        assert 0.2 < replay["ratio_cpu"] < 5 and 0.2 < replay["ratio_wall"] < 5
        assert positive(replay["stderr_in_process_s"]) and replay["stderr_share_of_run_cpu"] < 1
    assert set(out["score"]) == {"cg_bench", "vcr_bench", "vrbench"}
    assert set(out["report"]["cg_bench"]) == {f"{n}_runs_{r}_resamples" for n in (1, 2, 4) for r in (out["resamples"], 0)}
    for key in ("instderr_overhead_ratio", "instderr_overhead_ratio_wall", "report_ratio_4runs", "report_4runs_s", "peak_mb_max"):
        assert positive(out[key]), (key, out[key])
    assert out["instderr_overhead_ratio"] == max(r["ratio_cpu"] for r in out["replay"].values())
    assert out["instderr_s"] == {b: r["stderr_in_process_s"] for b, r in out["replay"].items()}
    four = out["report"]["cg_bench"]
    assert out["report_ratio_4runs"] == pytest.approx(four[f"4_runs_{out['resamples']}_resamples"]["wall_s"] / four["4_runs_0_resamples"]["wall_s"], rel=0.01)
    assert out["peak_mb_max"] >= max(r["on"]["peak_mb"] for r in out["replay"].values())
    assert out["same_intervals"] is True and out["same_intervals_checked"] >= 2 * 6 and out["same_intervals_differ"] == []
    assert set(out["goals"]) >= {"instderr_overhead_ratio<=1.10", "report_ratio_4runs<=2", "report_4runs_s<60", "every_step<=1.5GB"}
    reports = sorted((tmp_path / "work").glob("report_cg_bench_4_*/report.md"))
    assert len(reports) == 2 and "Pairs compared: each run against the baseline" in reports[0].read_text()
