"""VCR-Bench (video chain-of-thought) tasks: the lmms-eval hooks.

The task logic is `task.py` (inputs, records, metrics) with `judging.py` (the four official
judge calls) and `scoring.py`; this module binds it to lmms-eval: documents from the Hugging
Face annotation file, videos resolved by `resolve_media_reference` (plain paths), frames
decoded with PyAV (`plain_frames.py`), and the judge of lmms-eval's own settings
(`lmms_eval.llm_judge`: `API_TYPE`, `MODEL_VERSION`, the provider's key and URL). Each sample
is judged in `process_results`; the aggregations read the judged records (a failed judge call
is counted in `judge_failed`, never scored as a wrong or right answer).
"""

import math
import os

from datasets import Dataset

from lmms_eval.tasks._task_utils.media_resolver import resolve_media_reference
from lmms_video_reasoning.utils.core.frame_plan import choose
from lmms_video_reasoning.utils.core.records import once_per_sample, records_of
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge
from lmms_video_reasoning.dev import plain_frames
from lmms_video_reasoning.vcr_bench import docs, judging, scoring, task

# Where the videos are: a record's `video_path` is relative to `v1/videos/` of the dataset.
VIDEO_ENV = ("VCR_BENCH_VIDEO_DIR", "VCR_BENCH_ROOT")
CACHE_DIR = "vcr_bench"


def vcr_process_docs(dataset):
    """One document per record of `meta_info_video.json`, checked (a bad record is an error naming it)."""
    rows = [{**row, "choices": {k: v for k, v in (row.get("choices") or {}).items() if v is not None}} for row in dataset]
    return Dataset.from_list(docs.records_to_docs(rows, docs.ANNOTATION))


def video_path(doc):
    """The document's video file (FileNotFoundError naming it and the variables)."""
    path = resolve_media_reference(doc["video_path"], cache_dir=CACHE_DIR, env_vars=VIDEO_ENV, extra_subdirs=(docs.VIDEO_DIR,))
    if not os.path.exists(path):
        raise FileNotFoundError(f"VCR-Bench video {docs.VIDEO_DIR}/{doc['video_path']} not found: set VCR_BENCH_ROOT to the dataset folder (holding {docs.VIDEO_DIR}/)")
    return path


class PlainMedia:
    """Get the frames: the video path for video models, PyAV-decoded frames for frame-based ones."""

    def plan(self, doc, plan, n):
        total, fps = plain_frames.probe(video_path(doc))
        return choose(plan, total, fps, n)

    def frames(self, doc, indices):
        return plain_frames.read_frames(video_path(doc), indices)

    def video(self, doc):
        return video_path(doc)


MEDIA = PlainMedia()


def vcr_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def vcr_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def vcr_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


def _judged(doc, results, chain_of_thought):
    """The sample's record and its judged outcome (None when no judge is configured)."""
    record = task.build_record(doc, results[0] if results else "", chain_of_thought)
    judge = configured_judge(judging.JUDGE_MODEL)
    outcome = judging.judge_records([record], judge, chain_of_thought)[0] if judge is not None else None
    return once_per_sample({"record": record, "outcome": outcome}, task.metric_names(chain_of_thought))


def vcr_process_results(doc, results):
    """`vcr_cot`: accuracy and the CoT score (four judge calls)."""
    return _judged(doc, results, chain_of_thought=True)


def vcr_process_results_accuracy_only(doc, results):
    """Ablations (paper Table 5 reports accuracy only): answer extraction and scoring."""
    return _judged(doc, results, chain_of_thought=False)


def metrics(values):
    """Every metric of a task from its judged records."""
    values = records_of(values)
    records = [value["record"] for value in values]
    if any(value["outcome"] is None for value in values):  # no judge: accuracy needs the extraction judge
        return {**dict.fromkeys(scoring.METRICS, math.nan), "model_failed": task.count_model_failures(records), "reasoning_truncated": task.count_truncated(records)}
    return task.metrics_from_outcomes(records, [value["outcome"] for value in values])


def _aggregation(metric):
    def aggregate(values):
        return metrics(values)[metric]

    aggregate.__name__ = f"vcr_aggregate_{metric}"
    return aggregate


vcr_aggregate_accuracy = _aggregation("accuracy")
vcr_aggregate_accuracy_ftr = _aggregation("accuracy_ftr")
vcr_aggregate_accuracy_vtc = _aggregation("accuracy_vtc")
vcr_aggregate_accuracy_vtg = _aggregation("accuracy_vtg")
vcr_aggregate_accuracy_vkr = _aggregation("accuracy_vkr")
vcr_aggregate_accuracy_tsr = _aggregation("accuracy_tsr")
vcr_aggregate_accuracy_vpa = _aggregation("accuracy_vpa")
vcr_aggregate_accuracy_tsg = _aggregation("accuracy_tsg")
vcr_aggregate_accuracy_short = _aggregation("accuracy_short")
vcr_aggregate_accuracy_medium = _aggregation("accuracy_medium")
vcr_aggregate_accuracy_long = _aggregation("accuracy_long")
vcr_aggregate_accuracy_mc = _aggregation("accuracy_mc")
vcr_aggregate_accuracy_open = _aggregation("accuracy_open")
vcr_aggregate_perception_recall = _aggregation("perception_recall")
vcr_aggregate_perception_precision = _aggregation("perception_precision")
vcr_aggregate_perception_f1 = _aggregation("perception_f1")
vcr_aggregate_reasoning_recall = _aggregation("reasoning_recall")
vcr_aggregate_reasoning_precision = _aggregation("reasoning_precision")
vcr_aggregate_reasoning_f1 = _aggregation("reasoning_f1")
vcr_aggregate_cot_recall = _aggregation("cot_recall")
vcr_aggregate_cot_precision = _aggregation("cot_precision")
vcr_aggregate_cot_f1 = _aggregation("cot_f1")
vcr_aggregate_judge_failed = _aggregation("judge_failed")
vcr_aggregate_model_failed = _aggregation("model_failed")
vcr_aggregate_reasoning_truncated = _aggregation("reasoning_truncated")
