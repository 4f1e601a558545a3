"""What every benchmark's per-sample record shares: the common fields and what they mean, and
the one shape of a `process_results` hook.

A record is what a task's `process_results` logs for one sample: JSON-ready, everything needed
to score the sample again (`lmms-vr score` re-scores `--log_samples` files from it), built by
the benchmark's `build_record(doc, response, **options)` (its `records.py`, declared as
`Benchmark.build_record`). Building one never judges and never raises on a reply.

Fields every benchmark's record has, with one meaning:

    sample_id            the document's id in the benchmark (replay predictions match on it)
    response             the raw reply, as generated (a string; no reply is "")
    final_answer         the part of the reply rule-based parsers read (after the reasoning)
    reasoning_truncated  the reply ended inside its reasoning: no answer, counted wrong
    judged_reply         which text the judges rating reasoning see: "full" or "stripped"
    model_failed         the host returned its failure placeholder instead of a reply:
                         never parsed or judged, counted wrong, reported in `model_failed`
    model_failure        the placeholder's first line (what went wrong), else None

Which strings are the host's placeholders, and how a reply splits into reasoning and answer,
is lmms-eval's business: `utils.lmms.responses` fills these fields (`reply_record`) and says
whether a record failed (`model_failed`); this module only fixes the names and the hook's shape.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

COMMON_FIELDS = ("sample_id", "response", "final_answer", "reasoning_truncated", "judged_reply", "model_failed", "model_failure")

BuildRecord = Callable[..., dict]


def process_results(build_record: BuildRecord, metrics: Sequence[str], **options: Any):
    """A task's lmms-eval `process_results` hook: the sample's record, built by
    `build_record(doc, reply, **options)`, under every metric name of the task. lmms-eval
    hands each aggregation the task's records under its metric's name; the benchmark's
    aggregations score them once (`ScoreOnce`). The options are the task's declared
    `record_options` (`registry.Task`), which `lmms-vr score` reads there too.
    """
    metrics = tuple(metrics)

    def hook(doc: dict, results: Sequence) -> dict:
        record = build_record(doc, results[0] if results else "", **options)
        return {name: record for name in metrics}

    hook.__doc__ = f"lmms-eval `process_results`: `{build_record.__module__}.{build_record.__name__}` under every metric name" + (
        f" ({', '.join(f'{k}={v!r}' for k, v in options.items())})" if options else "")
    return hook
