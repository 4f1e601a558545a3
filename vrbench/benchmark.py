"""VRBench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import VrBenchScoring
from lmms_video_reasoning.vrbench.report import report_spec


BENCHMARK = Benchmark(
    name="vrbench",
    title="VRBench",
    package=__package__,
    scoring=VrBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    aliases=("vr_bench",),
)
