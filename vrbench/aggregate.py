"""VRBench metrics in the plugin: the task's scoring (`task.score_with`) with the plugin's judge.

`scored_records(records, settings)` is the one code path of the lmms-eval aggregation and
`lmms-vr score` (through `benchmark.VrBenchScoring.score`): the configured judge engine (cached,
accounted) rates the rated records, and the metrics come with the ratings (the in-run standard
errors bootstrap those); `score_records` is its metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.vrbench import task

log = logging.getLogger("lmms_video_reasoning.vrbench")


def scored_records(records: Sequence[dict], settings: dict | None, judge
                   ) -> tuple[dict[str, float], list[tuple[float | None, bool]] | None]:
    """All metrics of one task's records (the aggregation's and `lmms-vr score`'s path) and the
    ratings per question they come from (`task.score_with`).

    `settings`: optional `{"protocol": "default"|"official"}` overriding the records' protocol.
    `judge` (None: none configured) rates the rated records.
    """
    return task.score_with(records, judge, settings)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of `scored_records` with the configured judge (looked up only for rated records)."""
    with_judge = bool(records) and task.task_protocol(records, settings)[1]
    return scored_records(records, settings, get_judge("vrbench") if with_judge else None)[0]
