"""VCR-Bench tasks: the lmms-eval hooks of `task.py`. Videos through `resolve_media_reference`, frames from
PyAV, the judge from `lmms_eval.llm_judge`'s settings (`API_TYPE`, `MODEL_VERSION`, the provider's key).
Each sample is judged in `process_results`; a failed judge call is counted in `judge_failed`, never scored."""

import os

from datasets import Dataset

from lmms_eval.tasks._task_utils.media_resolver import resolve_media_reference
from lmms_video_reasoning.utils.core.records import aggregations, once_per_sample
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge
from lmms_video_reasoning.dev.plain_frames import PlainMedia
from lmms_video_reasoning.vcr_bench import docs, judging, scoring, task


def vcr_process_docs(dataset):
    """One checked document per record of `meta_info_video.json` (a bad record is an error naming it)."""
    rows = [{**row, "choices": {k: v for k, v in (row.get("choices") or {}).items() if v is not None}} for row in dataset]
    return Dataset.from_list(docs.records_to_docs(rows, docs.ANNOTATION))


def video_path(doc):
    """The document's video file (FileNotFoundError naming it and the variable to set)."""
    path = resolve_media_reference(doc["video_path"], cache_dir="vcr_bench", env_vars=("VCR_BENCH_VIDEO_DIR", "VCR_BENCH_ROOT"), extra_subdirs=(docs.VIDEO_DIR,))
    if not os.path.exists(path):
        raise FileNotFoundError(f"VCR-Bench video {docs.VIDEO_DIR}/{doc['video_path']} not found: set VCR_BENCH_ROOT to the dataset folder (holding {docs.VIDEO_DIR}/)")
    return path


MEDIA = PlainMedia(video_path)


def vcr_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def vcr_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def vcr_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


def _judged(doc, results, chain_of_thought):
    """The sample's record and its judged outcome (None without a judge), logged once (`once_per_sample`)."""
    record = task.build_record(doc, results[0] if results else "", chain_of_thought)
    judge = configured_judge(judging.JUDGE_MODEL)
    outcome = judging.judge_records([record], judge)[0] if judge is not None else None
    return once_per_sample({"record": record, "outcome": outcome}, task.metric_names(chain_of_thought))


def vcr_process_results(doc, results):
    """`vcr_cot`: accuracy and the CoT score (four judge calls)."""
    return _judged(doc, results, chain_of_thought=True)


def vcr_process_results_accuracy_only(doc, results):
    """Ablations (paper Table 5 reports accuracy only): answer extraction and scoring."""
    return _judged(doc, results, chain_of_thought=False)


def metrics(values):
    """Every metric of a task from its judged records (NaN without a judge: the answer is extracted by the judge)."""
    records = [value["record"] for value in values]
    if any(value["outcome"] is None for value in values):
        return task.unjudged_metrics(records)
    return task.metrics_from_outcomes(records, [value["outcome"] for value in values])



# `vcr_aggregate_<metric>`, the aggregation of each metric the YAMLs name
globals().update(aggregations("vcr_aggregate_", scoring.METRICS, metrics))
