"""CG-Bench as the suite's shared code sees it (registered in `utils/registry.py`)."""

from lmms_video_reasoning.utils.registry import Benchmark
from lmms_video_reasoning.utils.score import CgBenchScoring
from lmms_video_reasoning.cg_bench.report import report_spec


BENCHMARK = Benchmark(
    name="cg_bench",
    title="CG-Bench",
    package=__package__,
    scoring=CgBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    aliases=(),
)
