"""VCR-Bench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import VcrBenchScoring

BENCHMARK = Benchmark(
    name="vcr_bench",
    title="VCR-Bench",
    package=__package__,
    scoring=VcrBenchScoring(),
    reference="reference_tables.json",
    aliases=(),
)
