"""From per-answer records to CG-Bench metrics in the plugin: the one code path of the tasks and `lmms-vr score`.

The logic (records, outcomes, metrics, breakdowns, how failures enter them) is `outcomes.py`,
shared with the task folder that `dev/upstream.py` writes into lmms-eval; here it is bound to
the plugin: the configured judge engine with its cache (`judges`) and the data root's media
(`media.MEDIA`). Records of separate runs can be concatenated: long + clue + grounding
records of one model give `crr` and `acc_at_iou` exactly as `cg_bench_mcq` does.
`scored_records` gives the metrics with the outcomes they come from (the in-run standard errors
bootstrap those), `score_records` its metrics.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from lmms_video_reasoning.cg_bench import media, outcomes
from lmms_video_reasoning.cg_bench.outcomes import (  # noqa: F401 - part of this module's interface
    BREAKDOWN_GROUPS,
    HEADLINE,
    JUDGE_OFF,
    METRICS,
    MODES,
    NO_JUDGE,
    OFFICIAL_REVERSED,
    OFFICIAL_REVERSED_ENV,
    RECORD_FIELDS,
    STRICT,
    STRICT_ENV,
    Outcome,
    Settings,
    acc_at_iou_pairs,
    breakdown,
    metrics_of,
    model_failed,
    open_count,
    task_metrics,
)

logger = logging.getLogger("lmms_video_reasoning.cg_bench")


def build_record(doc: dict, response: Any) -> dict:
    """The logged record of one answer (`Benchmark.build_record`: `outcomes.make_record` with the
    data root's subtitles): the question's facts plus the raw reply, no parsing, no judge."""
    return outcomes.make_record(doc, response, media.MEDIA)


def read_outcomes(records: Sequence[dict], settings: Settings, judge) -> list[Outcome]:
    """Parse every record and judge the open-ended ones with `judge` (the judge runs here, once;
    None: none configured); `lmms-vr report` passes a reader of the judge cache."""
    return outcomes.read_outcomes(records, settings, judge, media.MEDIA)


def _configured_judge(records: Sequence[dict], settings: Settings):
    """The configured judge when open answers are to be judged (looked up only then: no warning otherwise)."""
    if not settings.judge or not any(record.get("mode") == "open" for record in records):
        return None
    from lmms_video_reasoning.judges import get_judge

    return get_judge("cg_bench")


def scored_records(records: Sequence[dict], settings: "Settings | dict | None", judge) -> tuple[dict, list[Outcome]]:
    """All metrics of a list of records (what the tasks' aggregations and `lmms-vr score` report),
    and the per-answer outcomes they come from, the open answers judged by `judge` (None: none configured).

    `settings`: a Settings, a dict such as `{"strict": True}`, or None (official parsing, judge
    on). See `outcomes.score_with`.
    """
    settings = outcomes.as_settings(settings)
    scores, answers = outcomes.score_with(records, settings, judge, media.MEDIA)
    if scores["subtitles_missing"]:
        logger.info("cg_bench: `lmms-vr prepare cg_bench --verify-only` lists the videos without a subtitle file")
    return scores, answers


def score_records(records: Sequence[dict], settings: "Settings | dict | None" = None) -> dict:
    """The metrics of `scored_records` with the configured judge."""
    settings = outcomes.as_settings(settings)
    return scored_records(records, settings, _configured_judge(records, settings))[0]
