"""VCR-Bench as the suite's shared code sees it (`utils/core/registry.py` lists what each field
declares and who reads it): its task folder, record builder, scoring adapter for `lmms-vr score`
and `lmms-vr report`, official judge, report specification (`report.py`), papers' tables
(`reference_tables.json`), data for `lmms-vr prepare` (`data.py`) and generated sample (`sample.py`)."""

from pathlib import Path

from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core.registry import Benchmark, Scored, ScoringAdapter
from lmms_video_reasoning.vcr_bench import judging, scoring, task
from lmms_video_reasoning.vcr_bench.report import report_spec

# The official judge (eval_code: GPT-4o through the OpenAI client), with lmms-eval's variables.
JUDGE = JudgeDefaults("vcr_bench", judging.JUDGE_MODEL, "OPENAI_API_KEY", model_env="MODEL_VERSION",
                      base_url_envs=("OPENAI_BASE_URL", "OPENAI_API_URL"))


class VcrBenchScoring(ScoringAdapter):
    """VCR-Bench: `aggregate.scored_records` (the task's scoring with the judge it is handed); outcomes
    from `judging.judge_records`, metrics from `task.metric_columns` (`metrics_from_outcomes`)."""

    name = judge_name = "vcr_bench"

    def settings(self, records):
        return scoring.resolve_settings(None)

    def score(self, records, settings, judge):
        from lmms_video_reasoning.vcr_bench import aggregate

        return Scored(*aggregate.scored_records(records, settings, judge))

    def outcomes(self, records, settings, judge):
        if judge is None:
            return None
        chain_of_thought = any(record.get("score_cot", True) for record in records)
        return judging.judge_records(list(records), judge, chain_of_thought, settings)

    def metrics(self, records, outcomes, settings):
        return task.metrics_from_outcomes(records, outcomes, settings)

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

    def columns(self, records, outcomes, settings):
        return task.metric_columns(records, outcomes, settings)

    def report_record(self, record):
        """The groups a sample counts in and its failure flags (`task.metrics_from_outcomes` reads no more)."""
        from lmms_video_reasoning.utils.lmms.responses import model_failed, reasoning_truncated

        kept = {key: record[key] for key in ("sample_id", "dimension_code", "duration_bucket", "multiple_choice", "score_cot") if key in record}
        return {**kept, "model_failed": model_failed(record), "reasoning_truncated": reasoning_truncated(record)}


BENCHMARK = Benchmark(
    name="vcr_bench",
    title="VCR-Bench",
    package=__package__,
    task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=task.build_record,
    scoring=VcrBenchScoring(),
    judge=JUDGE,
    report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "reasoning_truncated"),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    sample_module=f"{__package__}.sample",
    demo_tasks=("vcr_cot",),
)
