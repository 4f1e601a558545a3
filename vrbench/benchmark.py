"""VRBench as the suite's shared code sees it (`utils/core/registry.py` lists what each field
declares and who reads it): its task folder, record builder, scoring adapter for `lmms-vr score`
and `lmms-vr report`, official judge, report specification (`report.py`), papers' tables
(`reference_tables.json`), data for `lmms-vr prepare` (`data.py`) and generated sample (`sample.py`)."""

from pathlib import Path

from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core.registry import Benchmark, Scored, ScoringAdapter
from lmms_video_reasoning.vrbench import judging, task
from lmms_video_reasoning.vrbench.report import report_spec

# The official judge: DeepSeek-V3 (`deepseek-chat`) on DeepSeek's endpoint.
JUDGE = JudgeDefaults("vrbench", judging.JUDGE_MODEL, "DEEPSEEK_API_KEY", base_url=judging.JUDGE_BASE_URL)


class VrBenchScoring(ScoringAdapter):
    """VRBench: `aggregate.scored_records` (the task's scoring with the judge it is handed); outcomes
    from `judging.rate`, metrics from `task.metric_columns` (`metrics_from_outcomes`)."""

    name = judge_name = "vrbench"

    def settings(self, records):
        return {"protocol": records[0]["protocol"]} if records else {"protocol": "default"}

    def score(self, records, settings, judge):
        from lmms_video_reasoning.vrbench import aggregate

        metrics, rated = aggregate.scored_records(records, settings, judge)
        return Scored(metrics, self._outcomes(records, rated))

    def needs_judge(self, records):
        return any(record["mode"] != "mcq" for record in records)

    def outcomes(self, records, settings, judge):
        if not self.needs_judge(records):
            return self._outcomes(records, None)
        if judge is None:
            return None
        return self._outcomes(records, judging.rate(list(records), settings["protocol"], judge))

    def _outcomes(self, records, rated):
        """JSON-ready outcomes of the ratings `(process, judge failed)` (None: not rated; MCQ-only
        records are never rated)."""
        if not self.needs_judge(records):
            return [{"process": None, "judge_failed": False, "judged": False} for _ in records]
        if rated is None:
            return None
        return [{"process": process, "judge_failed": failed, "judged": True} for process, failed in rated]

    def metrics(self, records, outcomes, settings):
        pairs = [(outcome["process"], outcome["judge_failed"]) for outcome in outcomes]
        return task.metrics_from_outcomes(records, pairs, settings["protocol"], self.needs_judge(records), judge_ran=True)

    def verdicts(self, tag, value):
        """The four 0-10 ratings of a reply, one call type per criterion (the official protocol's
        raw reply is read with the official rules; a missing tag is no verdict)."""
        from lmms_video_reasoning.vrbench.scoring import TAGS, official_tag_values

        kind = tag.rsplit(".", 1)[-1]
        if kind not in TAGS:
            return super().verdicts(tag, value)
        ratings = official_tag_values(value, kind) if isinstance(value, str) else tuple(value)
        return [(f"{tag} {criterion}", "", float(rating)) for criterion, rating in zip(TAGS[kind], ratings) if rating is not None]

    def rating_scale(self, call):
        return tuple(range(11)) if call.startswith("vrbench.") else None

    def stratum(self, record):
        return str(record.get("reasoning_type") or "")

    def columns(self, records, outcomes, settings):
        pairs = [(outcome["process"], outcome["judge_failed"]) for outcome in outcomes]
        return task.metric_columns(records, pairs, settings["protocol"], self.needs_judge(records), judge_ran=True)

    def report_record(self, record):
        """The question's type, gold letter, the final answer its MCQ letter is read from, and its failure flags."""
        from lmms_video_reasoning.utils.lmms.responses import final_answer, model_failed, reasoning_truncated

        kept = {key: record[key] for key in ("sample_id", "mode", "protocol", "reasoning_type", "answer") if key in record}
        return {**kept, "final_answer": final_answer(record), "reasoning_truncated": reasoning_truncated(record),
                "model_failed": model_failed(record)}

    def unit(self, record):
        """The video: its ~9 questions share a story and are correlated, so the bootstrap
        resamples videos (ids are `"{video_id}_{qa_key}"` with qa keys such as `qa3`)."""
        return str(record["sample_id"]).rsplit("_", 1)[0]


BENCHMARK = Benchmark(
    name="vrbench",
    title="VRBench",
    package=__package__,
    task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=task.build_record,
    scoring=VrBenchScoring(),
    judge=JUDGE,
    report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "reasoning_truncated"),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    sample_module=f"{__package__}.sample",
    demo_tasks=("vr_bench",),
    aliases=("vr_bench",),
)
