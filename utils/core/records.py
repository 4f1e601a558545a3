"""A sample's record: the fields every benchmark's record has, logged once per sample.

A record is what a task's `process_results` logs for one sample: JSON-ready, everything needed
to score the sample again from a `--log_samples` file. Building one never judges and never
raises on a reply. It goes under the task's first metric, a `SameRecord` under the others.

Fields every benchmark's record has, with one meaning:

    sample_id            the document's id in the benchmark (replay predictions match on it)
    response             the raw reply, as generated (a string; no reply is "")
    final_answer         the part of the reply rule-based parsers read (after the reasoning)
    reasoning_truncated  the reply ended inside its reasoning: no answer, counted wrong
    judged_reply         which text the judges rating reasoning see: "full" or "stripped"
    model_failed         the host returned its failure placeholder: never parsed or judged, counted wrong
    model_failure        the placeholder's first line (what went wrong), else None
    settings             the task's options it was made with (its scoring reads them)

`responses.py` fills the reply's fields (`reply_record`); this module fixes the names and the hook's shape.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence


class SameRecord:
    """A sample's record under the task's other metric names (`once_per_sample`): `records_of` reads it
    back; lmms-eval logs it as `str`, a short note, not 25 copies of the record."""

    __slots__ = ("record", "metric")

    def __init__(self, record: dict, metric: str) -> None:
        self.record, self.metric = record, metric

    def __str__(self) -> str:
        return f"the record under {self.metric}"

    __repr__ = __str__


def records_of(values: Sequence) -> list:
    """The records of one metric's `process_results` values (a record, or a `SameRecord`)."""
    return [value.record if isinstance(value, SameRecord) else value for value in values]


def once_per_sample(record: Any, metrics: Sequence[str]) -> dict:
    """A `process_results` value: `record` under the first of the task's `metrics`, a `SameRecord`
    under the others."""
    first, *others = tuple(metrics)
    return {first: record, **{name: SameRecord(record, first) for name in others}}


def process_results(record_of: Callable[[dict, Any], dict], metrics: Sequence[str]):
    """A task's lmms-eval `process_results` hook: the sample's record, `record_of(doc, reply)`
    (`registry.Benchmark.record`: the benchmark's `build_record` with the task's options and
    settings), under the task's first metric name and a `SameRecord` under the others. lmms-eval
    hands each aggregation the task's values under its metric's name; the benchmark's
    aggregations read the records (`records_of`) and score them once (`ScoreOnce`).
    """
    metrics = tuple(metrics)

    def hook(doc: dict, results: Sequence) -> dict:
        return once_per_sample(record_of(doc, results[0] if results else ""), metrics)

    return hook


def aggregations(prefix: str, metrics: Iterable[str], metrics_of: Callable[[list], Mapping[str, Any]]) -> dict[str, Callable]:
    """The aggregations a task's YAMLs name, `{prefix + metric: aggregate}` (for its module's globals): each
    is its metric of `metrics_of(records)`, the records of lmms-eval's values (`records_of`)."""

    def aggregation(metric: str) -> Callable:
        def aggregate(values: Sequence) -> Any:
            return metrics_of(records_of(values))[metric]

        aggregate.__name__ = prefix + metric
        return aggregate

    return {prefix + metric: aggregation(metric) for metric in metrics}
