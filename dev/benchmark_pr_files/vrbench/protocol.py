"""VRBench's official protocol (`vrbench_protocol*` tasks): the lmms-eval hooks.

Added beside the folder's `vrbench` group (`vrbench_mcq`, `vrbench_process`, `utils.py`), which
stay as they are. One generation per question, scored for both tracks: MCQ-O by the official
extraction cascade and OE-P by the official four-tag process judge (DeepSeek-V3 by default). The
task logic is `task.py` (inputs, records, metrics) with `judging.py` and `scoring.py`; this module
binds it to lmms-eval: documents from `VRBench_eval.jsonl`, videos resolved by
`resolve_media_reference` (plain paths), frames decoded with PyAV (`plain_frames.py`), and the
judge of lmms-eval's own settings (`lmms_eval.llm_judge`: `API_TYPE`, `MODEL_VERSION`, the
provider's key and URL). Each question is judged in `process_results`; a judge call that still
fails after its retries is counted in `judge_failed` and left out of OE-P (official protocol:
scored 0, as the official script does), never dropped silently.
"""

import os

from datasets import Dataset

from lmms_eval.tasks._task_utils.media_resolver import resolve_media_reference
from lmms_video_reasoning.utils.core.frame_plan import choose
from lmms_video_reasoning.utils.core.records import once_per_sample, records_of
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge
from lmms_video_reasoning.dev import plain_frames
from lmms_video_reasoning.vrbench import docs, judging, task

VIDEO_ENV = ("VRBENCH_VIDEO_DIR", "VRBENCH_ROOT")
VIDEO_SUBDIRS = ("videos", "videos/v001", "VRBench/videos", "VRBench/videos/v001")


def _documents(dataset, mode, protocol=None):
    records = [docs.without_arrow_gaps(row) for row in dataset]
    return Dataset.from_list(task.stamp(docs.flatten(records), mode, protocol or task.protocol_from_env()))


def vrbench_process_docs(dataset):
    """`vrbench_protocol`: one document per question (the 960 video records hold 8,243), both tracks."""
    return _documents(dataset, "judge")


def vrbench_process_docs_mcq(dataset):
    """`vrbench_protocol_mcq`: MCQ-O only, no judge."""
    return _documents(dataset, "mcq")


def vrbench_process_docs_text(dataset):
    """`vrbench_protocol_text`: the paper's LLM setting (summary + question, no visual input)."""
    return _documents(dataset, "text")


def vrbench_process_docs_official(dataset):
    """`vrbench_protocol_official`: the official judge behaviour exactly."""
    return _documents(dataset, "judge", "official")


def video_path(doc):
    """The question's video file (FileNotFoundError naming it and the variables)."""
    path = resolve_media_reference(doc["video_path"], cache_dir="vrbench", env_vars=VIDEO_ENV, extra_subdirs=VIDEO_SUBDIRS)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"VRBench video not found: {doc['video_path']}. Download the split archives from https://huggingface.co/datasets/OpenGVLab/VRBench, "
            "extract them, and point VRBENCH_VIDEO_DIR at the directory that holds the .mp4 files."
        )
    return path


class PlainMedia:
    """Get the frames: the video path for video models, PyAV-decoded frames for frame-based ones.

    Video models always get the path and sample the video themselves (`video_frames: model`):
    no clip of the protocol's frames is written here."""

    def plan(self, doc, plan, n):
        total, fps = plain_frames.probe(video_path(doc))
        return choose(plan, total, fps, n)

    def frames(self, doc, indices, size=None):
        return plain_frames.read_frames(video_path(doc), indices, size=size)

    def video(self, doc, pick=None, size=None):
        return video_path(doc)


MEDIA = PlainMedia()


def vrbench_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def vrbench_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs)


def vrbench_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


def vrbench_process_results(doc, results):
    """The question's record, rated by the process judge when its task has that track."""
    record = task.build_record(doc, results[0] if results else "")
    rated = None
    if doc["mode"] != "mcq":
        judge = configured_judge(judging.JUDGE_MODEL)
        rated = judging.rate([record], doc["protocol"], judge)[0] if judge is not None else None
    return once_per_sample({"record": record, "rated": rated}, task.metric_names(doc))


def metrics(values):
    """Every metric of a task from its records and their ratings."""
    values = records_of(values)
    records = [value["record"] for value in values]
    protocol, with_judge = task.task_protocol(records, None)
    judge_ran = with_judge and all(value["rated"] is not None for value in values)
    outcomes = [tuple(value["rated"]) if judge_ran else (None, False) for value in values]
    return task.metrics_from_outcomes(records, outcomes, protocol, with_judge, judge_ran=judge_ran)


def _aggregation(metric):
    def aggregate(values):
        return metrics(values)[metric]

    aggregate.__name__ = f"vrbench_aggregate_{metric}"
    return aggregate


vrbench_aggregate_mcq_accuracy = _aggregation("mcq_accuracy")
vrbench_aggregate_process_score = _aggregation("process_score")
vrbench_aggregate_overall = _aggregation("overall")
vrbench_aggregate_type_event_prediction = _aggregation("type_event_prediction")
vrbench_aggregate_type_hypothetical_reasoning = _aggregation("type_hypothetical_reasoning")
vrbench_aggregate_type_event_attribution = _aggregation("type_event_attribution")
vrbench_aggregate_type_implicit_inference = _aggregation("type_implicit_inference")
vrbench_aggregate_type_logical_linkage = _aggregation("type_logical_linkage")
vrbench_aggregate_type_information_synopsis = _aggregation("type_information_synopsis")
vrbench_aggregate_type_counting = _aggregation("type_counting")
vrbench_aggregate_judge_failed = _aggregation("judge_failed")
vrbench_aggregate_model_failed = _aggregation("model_failed")
vrbench_aggregate_reasoning_truncated = _aggregation("reasoning_truncated")
