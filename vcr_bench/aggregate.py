"""VCR-Bench metrics in the plugin: the task's scoring (`task.score_with`) with the plugin's judge.

`scored_records(records, settings)` is the one code path of the lmms-eval aggregation and
`lmms-vr score` (through `benchmark.VcrBenchScoring.score`): it judges every record in one batch
with the configured judge engine (cached, accounted) and returns the metrics with the outcomes
they come from (the in-run standard errors bootstrap those); `score_records` is its metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.vcr_bench import task

log = logging.getLogger("lmms_video_reasoning.vcr_bench")

NO_JUDGE_HINT = (" Configure one (LMMS_VR_JUDGE_BASE_URL or OPENAI_API_KEY) or re-score the --log_samples file later "
                 "with `lmms-vr score`.")


def scored_records(records: Sequence[dict], settings: dict | None, judge) -> tuple[dict[str, float], list[dict] | None]:
    """All VCR-Bench metrics (0-100; `judge_failed`, `model_failed` counts) of a task's records,
    judged by `judge` (`task.score_with`; NaN without one), and the judge's outcomes per sample
    (None without a judge)."""
    return task.score_with(records, judge, settings, NO_JUDGE_HINT)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of `scored_records` with the configured judge."""
    return scored_records(records, settings, get_judge("vcr_bench"))[0]
