"""A benchmark's metrics with the configured judge, as its task's aggregation computes them (tests only)."""

from lmms_video_reasoning.judges import get_judge


def score_records(binding, records, settings=None) -> dict:
    """`binding.scored_records` with the configured judge (`settings`: the records' own by default).
    The judge is looked up only when the records need one and the settings judge (no warning otherwise)."""
    scoring = binding.BENCHMARK.scoring
    settings = scoring.settings(records) if settings is None else settings
    judged = settings.get("judge", True) if isinstance(settings, dict) else getattr(settings, "judge", True)
    judge = get_judge(scoring.judge_name) if judged and scoring.needs_judge(records) else None
    return binding.scored_records(records, settings, judge)[0]
