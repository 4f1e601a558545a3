"""VCR-Bench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import VcrBenchScoring
from lmms_video_reasoning.vcr_bench.report import report_spec


BENCHMARK = Benchmark(
    name="vcr_bench",
    title="VCR-Bench",
    package=__package__,
    scoring=VcrBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    aliases=(),
)
