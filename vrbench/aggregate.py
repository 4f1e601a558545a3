"""VRBench metrics of a task's records: the one code path of the aggregation and `lmms-vr score`.

`score_records(records, settings)` rates the records with the OE-P judge (when the task has
one and a judge is configured) and returns every metric; `metrics_from_outcomes` computes them
from records and judge outcomes with no judge call (what `lmms-vr report` re-aggregates for
each bootstrap resample).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.lmms.responses import final_answer, model_failed, reasoning_truncated, warn_truncated
from lmms_video_reasoning.vrbench import judging
from lmms_video_reasoning.vrbench.scoring import QuestionScore, aggregate, judge_prompt_kind, mcq_correct

log = logging.getLogger("lmms_video_reasoning.vrbench")


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str,
                          with_judge: bool, judge_ran: bool = True) -> dict[str, float]:
    """Metrics from records and their judge outcomes `(process score or None, judge failed)`.

    A model-failed record is never judged (`judging.rate` gives it `(None, False)`), so its
    process score is None: left out of OE-P (default) or 0 (official), see `scoring.oe_p`.
    """
    scores = [
        QuestionScore(
            reasoning_type=record["reasoning_type"],
            correct=not reasoning_truncated(record) and mcq_correct(final_answer(record), record["answer"]),
            rated=judge_prompt_kind(record["reasoning_type"], protocol) is not None,
            process=process,
            judge_failed=failed,
            model_failed=model_failed(record),
        )
        for record, (process, failed) in zip(records, outcomes, strict=True)
    ]
    failed, judged = judge_failures(records, outcomes, protocol)
    # Past the failure share the process ratings would measure the judge's outage: not computed.
    withheld = with_judge and judge_ran and failure_share.too_many_failed(failed, judged)
    metrics = aggregate(scores, protocol, with_judge, judge_ran=judge_ran and not withheld)
    if withheld:
        metrics["judge_failed"] = failed
    metrics["reasoning_truncated"] = sum(map(reasoning_truncated, records))
    return metrics


def judge_failures(records: Sequence[dict], outcomes: Sequence[tuple[float | None, bool]], protocol: str) -> tuple[int, int]:
    """(failed ratings, questions that needed a rating): the failure share's counts."""
    needed = [failed for record, (_process, failed) in zip(records, outcomes)
              if judge_prompt_kind(record["reasoning_type"], protocol) is not None and not model_failed(record)]
    return sum(needed), len(needed)


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """All metrics of one task's records (the `lmms-vr score` entry; same path as aggregation).

    `settings`: optional `{"protocol": "default"|"official"}` overriding the records' protocol.
    Runs the judge (if configured) over the rated records.
    """
    if not records:
        return {}
    protocol = (settings or {}).get("protocol") or records[0]["protocol"]
    modes = {record["mode"] for record in records}
    if len(modes) != 1:
        raise DataError(f"VRBench records mix task modes {sorted(modes)}; score one task at a time")
    with_judge = modes.pop() != "mcq"
    warn_truncated(log, "VRBench", sum(map(reasoning_truncated, records)), len(records))
    outcomes = [(None, False)] * len(records)
    judge = None
    if with_judge:
        from lmms_video_reasoning.judges.engine import get_judge

        judge = get_judge(judging.JUDGE)
        if judge is not None:
            outcomes = judging.rate(records, protocol, judge)
            judge.log_summary()
    if judge is not None:
        failed, judged = judge_failures(records, outcomes, protocol)
        if failure_share.too_many_failed(failed, judged):
            log.error(failure_share.explain("VRBench", failed, judged))
    return metrics_from_outcomes(records, outcomes, protocol, with_judge, judge_ran=judge is not None)
