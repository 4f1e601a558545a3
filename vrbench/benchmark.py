"""VRBench as the suite's shared code sees it (found through `utils/core/registry.py`): its scoring adapter for
`lmms-vr score` and `lmms-vr report`, its report specification (`report.py`), its papers' tables
(`reference_tables.json`), its data for `lmms-vr prepare` (`data.py`)."""

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.judges.bind import bind
from lmms_video_reasoning.judges.config import JudgeDefaults, register_defaults
from lmms_video_reasoning.utils.core.registry import Benchmark, ScoringAdapter
from lmms_video_reasoning.vrbench import judging as _judging
from lmms_video_reasoning.vrbench.report import report_spec

# The official judge: DeepSeek-V3 (`deepseek-chat`) on DeepSeek's endpoint.
JUDGE = register_defaults("vrbench", JudgeDefaults(_judging.JUDGE_MODEL, None, "DEEPSEEK_API_KEY", _judging.JUDGE_BASE_URL, ()))


class VrBenchScoring(ScoringAdapter):
    """VRBench: `vrbench.hooks.score_records`; outcomes from `vrbench.judging.rate`."""

    name = judge_name = "vrbench"

    def settings(self, records):
        return {"protocol": records[0]["protocol"]} if records else {"protocol": "default"}

    def score(self, records, settings):
        from lmms_video_reasoning.vrbench import hooks

        return hooks.score_records(records, settings)

    def needs_judge(self, records):
        return any(record["mode"] != "mcq" for record in records)

    def outcomes(self, records, settings, judge=None):
        from lmms_video_reasoning.vrbench import judging

        if not self.needs_judge(records):
            return [{"process": None, "judge_failed": False, "judged": False} for _ in records]
        judge = judge if judge is not None else get_judge(self.judge_name)
        if judge is None:
            return None
        rated = judging.rate(list(records), settings["protocol"], bind(judge))
        return [{"process": process, "judge_failed": failed, "judged": True} for process, failed in rated]

    def metrics(self, records, outcomes, settings):
        from lmms_video_reasoning.vrbench import hooks

        pairs = [(outcome["process"], outcome["judge_failed"]) for outcome in outcomes]
        return hooks.metrics_from_outcomes(records, pairs, settings["protocol"], self.needs_judge(records), judge_ran=True)

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

    def unit(self, record):
        """The video: its ~9 questions share a story and are correlated, so the bootstrap
        resamples videos (ids are `"{video_id}_{qa_key}"` with qa keys such as `qa3`)."""
        return str(record["sample_id"]).rsplit("_", 1)[0]


BENCHMARK = Benchmark(
    name="vrbench",
    title="VRBench",
    package=__package__,
    scoring=VrBenchScoring(),
    report=report_spec(),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    demo_tasks=("vr_bench",),
    aliases=("vr_bench",),
)
