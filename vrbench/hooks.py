"""lmms-eval hooks for the VRBench tasks in the plugin (the functions the YAMLs in `vrbench/tasks/` name).

The task itself (inputs, records, metrics; one generation scored for both tracks) is
`task.py`, shared with the task folder that `dev/upstream.py` writes into lmms-eval; this
module binds it to the plugin: documents from the data root with the checks before
generation (`utils.lmms.preflight`), the judge engine with its cache (`aggregate.py`), and the
data root's media with the fast inputs (`media.py`: a clip of the protocol frames, or of exactly
the frames the calling model's own path keeps; `LMMS_VR_VIDEO_INPUT=path` hands the model the
original path).
"""

from __future__ import annotations

import logging

from lmms_video_reasoning.utils.core.records import process_results as records_hook
from lmms_video_reasoning.utils.core.roots import data_root, docs_dataset
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer
from lmms_video_reasoning.vrbench import data, docs, media, task
from lmms_video_reasoning.vrbench.task import doc_to_text, protocol_from_env  # noqa: F401 - doc_to_text: the task YAMLs' hook

log = logging.getLogger("lmms_video_reasoning.vrbench")

# ----------------------------------------------------------------------------------------
# Documents
# ----------------------------------------------------------------------------------------


def build_docs(mode: str, protocol: str) -> list[dict]:
    """The task's documents: every question of the annotation file, stamped with mode and protocol."""
    return task.stamp(docs.flatten(data.load_records()), mode, protocol)


# Checked before generation (`utils.lmms.preflight`): the videos (not for the text-only task) and
# the judge (not for the MCQ-only task).
_MEDIA_CHECK = preflight.MediaCheck(data.VRBENCH, lambda: data.media_kinds(data_root(data.VRBENCH), data.load_records()))


def load_docs(_placeholder=None):
    """`process_docs` of vr_bench."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("judge", protocol_from_env())), _MEDIA_CHECK, judge="vrbench")


def load_docs_mcq(_placeholder=None):
    """`process_docs` of vr_bench_mcq."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("mcq", protocol_from_env())), _MEDIA_CHECK)


def load_docs_text(_placeholder=None):
    """`process_docs` of vr_bench_text."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("text", protocol_from_env())), judge="vrbench")


def load_docs_official(_placeholder=None):
    """`process_docs` of vr_bench_official."""
    return preflight.task_load("vrbench", lambda: docs_dataset(build_docs("judge", "official")), _MEDIA_CHECK, judge="vrbench")


# ----------------------------------------------------------------------------------------
# Model inputs (the plugin's media)
# ----------------------------------------------------------------------------------------


def video_input(doc: dict, kwargs: dict | None) -> str:
    """The video handed to a video-native model (`task.video_input` with the plugin's media)."""
    return task.video_input(doc, kwargs, media.MEDIA)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video]` (video mode, see `video_input`), the sampled frames (frames mode), or `[]` (text task)."""
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, media.MEDIA)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """One user turn: the video or frames first, then the prompt (as the official inference)."""
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, media.MEDIA)


# ----------------------------------------------------------------------------------------
# Records and metrics
# ----------------------------------------------------------------------------------------


# One record per metric of the task (never calls the judge, never raises on a response).
process_results = records_hook(task.build_record, task.metric_names)

_score_once = ScoreOnce("vrbench")
_write_accounting = judge_accounting_writer("vrbench")


aggregate_mcq_accuracy = _score_once.aggregation("mcq_accuracy", _write_accounting)
aggregate_process_score = _score_once.aggregation("process_score", _write_accounting)
aggregate_overall = _score_once.aggregation("overall", _write_accounting)
aggregate_judge_failed = _score_once.aggregation("judge_failed", _write_accounting)
aggregate_model_failed = _score_once.aggregation("model_failed", _write_accounting)
aggregate_reasoning_truncated = _score_once.aggregation("reasoning_truncated", _write_accounting)
aggregate_type_event_prediction = _score_once.aggregation("type_event_prediction", _write_accounting)
aggregate_type_hypothetical_reasoning = _score_once.aggregation("type_hypothetical_reasoning", _write_accounting)
aggregate_type_event_attribution = _score_once.aggregation("type_event_attribution", _write_accounting)
aggregate_type_implicit_inference = _score_once.aggregation("type_implicit_inference", _write_accounting)
aggregate_type_logical_linkage = _score_once.aggregation("type_logical_linkage", _write_accounting)
aggregate_type_information_synopsis = _score_once.aggregation("type_information_synopsis", _write_accounting)
aggregate_type_counting = _score_once.aggregation("type_counting", _write_accounting)
