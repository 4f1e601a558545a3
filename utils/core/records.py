"""What every benchmark's per-sample record shares: the common fields and what they mean, and
the one shape of a `process_results` hook.

A record is what a task's `process_results` logs for one sample: JSON-ready, everything needed
to score the sample again (`lmms-vr score` re-scores `--log_samples` files from it), built by
the benchmark's `build_record(doc, response, settings=..., **options)` (declared as
`Benchmark.build_record`; `Benchmark.record` gives it the task's options and settings).
Building one never judges and never raises on a reply.

Fields every benchmark's record has, with one meaning:

    sample_id            the document's id in the benchmark (replay predictions match on it)
    response             the raw reply, as generated (a string; no reply is "")
    final_answer         the part of the reply rule-based parsers read (after the reasoning)
    reasoning_truncated  the reply ended inside its reasoning: no answer, counted wrong
    judged_reply         which text the judges rating reasoning see: "full" or "stripped"
    model_failed         the host returned its failure placeholder instead of a reply:
                         never parsed or judged, counted wrong, reported in `model_failed`
    model_failure        the placeholder's first line (what went wrong), else None
    settings             the task's score-changing settings it was made with (`settings.task_settings`;
                         its scoring reads them, `registry.Benchmark.settings_of`)

Which strings are the host's placeholders, and how a reply splits into reasoning and answer,
is lmms-eval's business: `utils.lmms.responses` fills these fields (`reply_record`) and says
whether a record failed (`model_failed`); this module only fixes the names and the hook's shape.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

def process_results(record_of: Callable[[dict, Any], dict], metrics: Sequence[str]):
    """A task's lmms-eval `process_results` hook: the sample's record, `record_of(doc, reply)`
    (`registry.Benchmark.record`: the benchmark's `build_record` with the task's options and
    settings), under every metric name of the task. lmms-eval hands each aggregation the task's
    records under its metric's name; the benchmark's aggregations score them once (`ScoreOnce`).
    """
    metrics = tuple(metrics)

    def hook(doc: dict, results: Sequence) -> dict:
        record = record_of(doc, results[0] if results else "")
        return {name: record for name in metrics}

    return hook
