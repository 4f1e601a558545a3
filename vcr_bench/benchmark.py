"""VCR-Bench as the suite's shared code sees it (found through `utils/core/registry.py`): its scoring adapter for
`lmms-vr score` and `lmms-vr report`, its report specification (`report.py`), its papers' tables
(`reference_tables.json`), its data for `lmms-vr prepare` (`data.py`)."""

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.judges.bind import bind
from lmms_video_reasoning.judges.config import JudgeDefaults, register_defaults
from lmms_video_reasoning.utils.core.registry import Benchmark, ScoringAdapter
from lmms_video_reasoning.vcr_bench import judging as _judging
from lmms_video_reasoning.vcr_bench.report import report_spec

# The official judge (eval_code: GPT-4o through the OpenAI client), with lmms-eval's variables.
JUDGE = register_defaults("vcr_bench", JudgeDefaults(_judging.JUDGE_MODEL, "MODEL_VERSION", "OPENAI_API_KEY", None,
                                                     ("OPENAI_BASE_URL", "OPENAI_API_URL")))


class VcrBenchScoring(ScoringAdapter):
    """VCR-Bench: `vcr_bench.hooks.score_records`; outcomes from `vcr_bench.judging.judge_records`."""

    name = judge_name = "vcr_bench"

    def settings(self, records):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.resolve_settings(None)

    def score(self, records, settings):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.score_records(records, settings)

    def outcomes(self, records, settings, judge=None):
        from lmms_video_reasoning.vcr_bench import judging

        judge = judge if judge is not None else get_judge(self.judge_name)
        if judge is None:
            return None
        chain_of_thought = any(record.get("score_cot", True) for record in records)
        return judging.judge_records(list(records), bind(judge), chain_of_thought, settings)

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.vcr_bench import hooks

        return hooks.metrics_from_outcomes(records, outcomes, settings)

    def verdicts(self, tag, value):
        """Extraction: the extracted answer; scoring: the official exact reading ("1" is correct);
        recall and precision: each step's Matched / Unmatched / Wrong / Redundant, paired by position."""
        if tag == "vcr.extract" and isinstance(value, str):
            return [(tag, "", value.strip())]
        if tag == "vcr.score" and hasattr(value, "exact"):
            return [(tag, "", bool(value.exact))]
        if tag in ("vcr.recall", "vcr.precision") and isinstance(value, list):
            return [(tag, f"step {number}", step.get("judgment")) for number, step in enumerate(value, 1) if isinstance(step, dict)]
        return super().verdicts(tag, value)

    def stratum(self, record):
        return str(record.get("dimension_code") or "")


BENCHMARK = Benchmark(
    name="vcr_bench",
    title="VCR-Bench",
    package=__package__,
    scoring=VcrBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    demo_tasks=("vcr_cot",),
    aliases=(),
)
