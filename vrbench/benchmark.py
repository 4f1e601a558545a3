"""VRBench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import VrBenchScoring

BENCHMARK = Benchmark(
    name="vrbench",
    title="VRBench",
    package=__package__,
    scoring=VrBenchScoring(),
    reference="reference_tables.json",
    aliases=("vr_bench",),
)
