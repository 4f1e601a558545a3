"""CG-Bench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import CgBenchScoring

BENCHMARK = Benchmark(
    name="cg_bench",
    title="CG-Bench",
    package=__package__,
    scoring=CgBenchScoring(),
    reference="reference_tables.json",
    aliases=(),
)
