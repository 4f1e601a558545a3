"""ToyBench's lmms-eval hooks (what `tasks/toy_count.yaml` names)."""

from __future__ import annotations

from lmms_video_reasoning.utils.core.records import process_results as records_hook
from lmms_video_reasoning.utils.core.roots import docs_dataset
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce

from . import data, records

METRICS = ("accuracy", "model_failed")


def process_docs(_dataset=None):
    return docs_dataset(data.load_records())


def doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return []


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"]


process_results = records_hook(records.build_record, lambda doc: METRICS)

_score = ScoreOnce("toy_bench")
aggregate_accuracy = _score.aggregation("accuracy")
aggregate_model_failed = _score.aggregation("model_failed")
