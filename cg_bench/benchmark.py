"""CG-Bench as the suite's shared code sees it (found through `utils/core/registry.py`): its scoring adapter for
`lmms-vr score` and `lmms-vr report`, its report specification (`report.py`), its papers' tables
(`reference_tables.json`), its data for `lmms-vr prepare` (`data.py`)."""

import dataclasses
from typing import Sequence

from lmms_video_reasoning.cg_bench import judging as _judging
from lmms_video_reasoning.cg_bench.report import report_spec
from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.judges.config import JudgeDefaults, register_defaults
from lmms_video_reasoning.utils.core.registry import Benchmark, ScoringAdapter

# The official judge (run/run_api.py: GPT-4o), with lmms-eval's variables.
JUDGE = register_defaults("cg_bench", JudgeDefaults(_judging.JUDGE_MODEL, "MODEL_VERSION", "OPENAI_API_KEY", None,
                                                    ("OPENAI_BASE_URL", "OPENAI_API_URL")))


class CgBenchScoring(ScoringAdapter):
    """CG-Bench: `cg_bench.aggregate.score_records`; outcomes from `read_outcomes`, metrics from `task_metrics`.

    Records of several CG-Bench tasks of one run may be scored together: long + clue +
    grounding give `crr` and `acc_at_iou` joined per question, as `cg_bench_mcq` does.
    """

    name = judge_name = "cg_bench"

    def settings(self, records):
        from lmms_video_reasoning.cg_bench.aggregate import Settings

        return Settings.from_env()

    def score(self, records, settings):
        from lmms_video_reasoning.cg_bench.aggregate import score_records

        return score_records(records, settings)

    def needs_judge(self, records):
        return any(record["mode"] == "open" for record in records)

    def outcomes(self, records, settings, judge=None):
        from lmms_video_reasoning.cg_bench.aggregate import read_outcomes

        judge = judge if judge is not None or not self.needs_judge(records) else get_judge(self.judge_name)
        if self.needs_judge(records) and judge is None:
            return None
        return [dataclasses.asdict(outcome) for outcome in read_outcomes(records, settings, judge)]

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, task_metrics

        return task_metrics([Outcome(**outcome) for outcome in outcomes])

    def breakdown(self, outcomes: Sequence[dict]) -> dict:
        """Metrics by duration bucket, domain and question kind (`cg_bench.aggregate.breakdown`)."""
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, breakdown

        return breakdown([Outcome(**outcome) for outcome in outcomes])

    def unit(self, record):
        return str(record["qid"])

    def stratum(self, record):
        return str(record.get("sub_category") or "")


BENCHMARK = Benchmark(
    name="cg_bench",
    title="CG-Bench",
    package=__package__,
    scoring=CgBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    demo_tasks=("cg_bench_mcq", "cg_bench_open"),
    aliases=(),
)
