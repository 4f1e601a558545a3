"""CG-Bench as the suite's shared code sees it (`utils/core/registry.py` lists what each field
declares and who reads it): its task folder, record builder, scoring adapter for `lmms-vr score`
and `lmms-vr report`, official judge, report specification (`report.py`), papers' tables
(`reference_tables.json`), data for `lmms-vr prepare` (`data.py`) and generated sample (`sample.py`)."""

from pathlib import Path
from typing import Sequence

from lmms_video_reasoning.cg_bench import aggregate, judging
from lmms_video_reasoning.cg_bench.report import report_spec
from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core.registry import Benchmark, Scored, ScoringAdapter

# The official judge (run/run_api.py: GPT-4o), with lmms-eval's variables.
JUDGE = JudgeDefaults("cg_bench", judging.JUDGE_MODEL, "OPENAI_API_KEY", model_env="MODEL_VERSION",
                      base_url_envs=("OPENAI_BASE_URL", "OPENAI_API_URL"))


class CgBenchScoring(ScoringAdapter):
    """CG-Bench: `cg_bench.aggregate.scored_records`; outcomes from `read_outcomes`, metrics from
    `outcomes.outcome_columns` (`task_metrics`).

    Records of several CG-Bench tasks of one run may be scored together: long + clue +
    grounding give `crr` and `acc_at_iou` joined per question, as `cg_bench_mcq` does.
    """

    name = judge_name = "cg_bench"

    def settings(self, records):
        from lmms_video_reasoning.cg_bench.aggregate import Settings

        return Settings.from_env()

    def score(self, records, settings, judge):
        from lmms_video_reasoning.cg_bench.aggregate import scored_records

        metrics, answers = scored_records(records, settings, judge)
        if self.needs_judge(records) and judge is None:
            return Scored(metrics, None)  # open answers and no judge: no outcomes (as `outcomes` says)
        return Scored(metrics, _fields(answers))

    def needs_judge(self, records):
        return any(record["mode"] == "open" for record in records)

    def outcomes(self, records, settings, judge):
        from lmms_video_reasoning.cg_bench.aggregate import read_outcomes

        if self.needs_judge(records) and judge is None:
            return None
        return _fields(read_outcomes(records, settings, judge))

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, task_metrics

        return task_metrics([Outcome(**outcome) for outcome in outcomes])

    def columns(self, records, outcomes, settings):
        from lmms_video_reasoning.cg_bench.outcomes import outcome_columns

        return outcome_columns(outcomes)

    def breakdown(self, outcomes: Sequence[dict]) -> dict:
        """Metrics by duration bucket, domain and question kind (`cg_bench.aggregate.breakdown`)."""
        from lmms_video_reasoning.cg_bench.aggregate import Outcome, breakdown

        return breakdown([Outcome(**outcome) for outcome in outcomes])

    def report_record(self, record):
        """The question and the mode (the metrics read only the outcomes)."""
        return {key: record[key] for key in ("sample_id", "qid", "mode") if key in record}

    def question(self, record):
        """The question (`qid`): its long, clue, grounding and open answers are records of it, and
        it is the resampling unit (the joins of CRR and acc.@IoU are per question)."""
        return str(record["qid"])

    def stratum(self, record):
        return str(record.get("sub_category") or "")


def _fields(outcomes) -> list[dict]:
    """JSON-ready outcomes: an Outcome holds only numbers, strings and None, so its fields' dict is
    `dataclasses.asdict` (faster)."""
    return [dict(vars(outcome)) for outcome in outcomes]


BENCHMARK = Benchmark(
    name="cg_bench",
    title="CG-Bench",
    package=__package__,
    task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=aggregate.build_record,
    scoring=CgBenchScoring(),
    judge=JUDGE,
    report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "parse_failed", "reasoning_truncated"),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    sample_module=f"{__package__}.sample",
    demo_tasks=("cg_bench_mcq", "cg_bench_open"),
)
