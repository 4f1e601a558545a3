"""lmms-eval hooks of the VCR-Bench tasks in the plugin (`vcr_bench/tasks/*.yaml` point here).

The task itself (inputs, records, metrics) is `task.py`, shared with the task folder that
`dev/upstream.py` writes into lmms-eval; this module binds it to the plugin: documents from
the data root with the checks before generation (`utils.lmms.preflight`), the judge engine with
its cache (`aggregate.py`), and the data root's media with the fast inputs (`media.py`: simple
video models get a proxy clip of exactly the frames their own path keeps, chat models the path;
`LMMS_VR_VIDEO_INPUT=path` = paths; frames decoded by `utils.media.video`).

Scoring: `process_results` only builds a self-contained record (`task.build_record`: never
calls a judge, never raises); the first aggregation of a task judges all records in one batch
(the benchmark's `scoring.score`, `aggregate.scored_records`, memoised by content with its outcomes
so the metric aggregations and their standard errors share one batch) and writes the judge
accounting next to the results. `lmms-vr score` calls the same scoring on records read back
from a `--log_samples` file.
"""

from __future__ import annotations

import logging
from typing import Any

from lmms_video_reasoning.utils.core.records import process_results as records_hook
from lmms_video_reasoning.utils.core.roots import data_root, docs_dataset
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer
from lmms_video_reasoning.vcr_bench import data, media, task

log = logging.getLogger("lmms_video_reasoning.vcr_bench")


# ---------------------------------------------------------------- documents


def load_docs(dataset=None) -> Any:
    """`process_docs`: replace the one-row placeholder with the benchmark's documents (checked
    before generation: `utils.preflight`)."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), _MEDIA_CHECK, judge="vcr_bench")


def load_docs_no_visual(dataset=None) -> Any:
    """`process_docs` of `vcr_text_only`: the same documents; no video is needed."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), judge="vcr_bench")


_MEDIA_CHECK = preflight.MediaCheck(data.VCR_BENCH, lambda: data.media_kinds(data_root(data.VCR_BENCH), data.load_records()))


# ---------------------------------------------------------------- model inputs (the plugin's media)


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, media.MEDIA)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, media.MEDIA)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, media.MEDIA)


# ---------------------------------------------------------------- records and aggregation


def _metric_names(chain_of_thought: bool):
    names = task.metric_names(chain_of_thought)
    return lambda doc: names


# `vcr_cot`: one record under every metric name (accuracy and CoT metrics).
process_results = records_hook(task.build_record, _metric_names(True), chain_of_thought=True)
# Ablations (paper Table 5 reports accuracy only): no recall / precision judging.
process_results_accuracy_only = records_hook(task.build_record, _metric_names(False), chain_of_thought=False)

_SCORE = ScoreOnce("vcr_bench")
_write_accounting = judge_accounting_writer("vcr_bench")


aggregate_accuracy = _SCORE.aggregation("accuracy", _write_accounting)
aggregate_accuracy_ftr = _SCORE.aggregation("accuracy_ftr", _write_accounting)
aggregate_accuracy_vtc = _SCORE.aggregation("accuracy_vtc", _write_accounting)
aggregate_accuracy_vtg = _SCORE.aggregation("accuracy_vtg", _write_accounting)
aggregate_accuracy_vkr = _SCORE.aggregation("accuracy_vkr", _write_accounting)
aggregate_accuracy_tsr = _SCORE.aggregation("accuracy_tsr", _write_accounting)
aggregate_accuracy_vpa = _SCORE.aggregation("accuracy_vpa", _write_accounting)
aggregate_accuracy_tsg = _SCORE.aggregation("accuracy_tsg", _write_accounting)
aggregate_accuracy_short = _SCORE.aggregation("accuracy_short", _write_accounting)
aggregate_accuracy_medium = _SCORE.aggregation("accuracy_medium", _write_accounting)
aggregate_accuracy_long = _SCORE.aggregation("accuracy_long", _write_accounting)
aggregate_accuracy_mc = _SCORE.aggregation("accuracy_mc", _write_accounting)
aggregate_accuracy_open = _SCORE.aggregation("accuracy_open", _write_accounting)
aggregate_perception_recall = _SCORE.aggregation("perception_recall", _write_accounting)
aggregate_perception_precision = _SCORE.aggregation("perception_precision", _write_accounting)
aggregate_perception_f1 = _SCORE.aggregation("perception_f1", _write_accounting)
aggregate_reasoning_recall = _SCORE.aggregation("reasoning_recall", _write_accounting)
aggregate_reasoning_precision = _SCORE.aggregation("reasoning_precision", _write_accounting)
aggregate_reasoning_f1 = _SCORE.aggregation("reasoning_f1", _write_accounting)
aggregate_cot_recall = _SCORE.aggregation("cot_recall", _write_accounting)
aggregate_cot_precision = _SCORE.aggregation("cot_precision", _write_accounting)
aggregate_cot_f1 = _SCORE.aggregation("cot_f1", _write_accounting)
aggregate_judge_failed = _SCORE.aggregation("judge_failed", _write_accounting)
aggregate_model_failed = _SCORE.aggregation("model_failed", _write_accounting)
aggregate_reasoning_truncated = _SCORE.aggregation("reasoning_truncated", _write_accounting)
