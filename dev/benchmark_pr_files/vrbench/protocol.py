"""VRBench's official protocol (`vrbench_protocol*` tasks): the lmms-eval hooks.

Added beside the folder's `vrbench` group (`vrbench_mcq`, `vrbench_process`, `utils.py`), which stay
as they are. One generation per question, scored for both tracks: MCQ-O by the official extraction
cascade, OE-P by the official four-tag process judge. The task logic is `task.py`, `judging.py` and
`scoring.py`; this module binds it to lmms-eval: videos found by `utils.vrbench_doc_to_visual`, frames
decoded with PyAV (`plain_frames.py`), the judge of lmms-eval's settings (`lmms_eval.llm_judge`).
Each question is judged in `process_results`; a call that still fails after its retries is counted in
`judge_failed` and left out of OE-P (official protocol: scored 0, as the official script does).
"""

from functools import partial

from datasets import Dataset

from lmms_eval.tasks.vrbench.utils import vrbench_doc_to_visual as video_of
from lmms_video_reasoning.utils.core.columns import point
from lmms_video_reasoning.utils.core.records import aggregations, once_per_sample
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge
from lmms_video_reasoning.dev.plain_frames import PlainMedia
from lmms_video_reasoning.vrbench import docs, judging, task


def _documents(dataset, mode, protocol=None):  # one per question: the 960 video records hold 8,243
    records = [docs.without_arrow_gaps(row) for row in dataset]
    return Dataset.from_list(task.stamp(docs.flatten(records), mode, protocol or task.PROTOCOL.default))


vrbench_process_docs = partial(_documents, mode="judge")  # both tracks
vrbench_process_docs_mcq = partial(_documents, mode="mcq")  # MCQ-O only, no judge
vrbench_process_docs_text = partial(_documents, mode="text")  # the paper's LLM setting: summary + question, no visual input
vrbench_process_docs_official = partial(_documents, mode="judge", protocol="official")  # the official judge behaviour exactly


# Videos found by 0.7.3's resolver (`VRBENCH_VIDEO_DIR`, `VRBENCH_ROOT`); video models sample them themselves (`video_frames: model`).
MEDIA = PlainMedia(lambda doc: video_of(doc)[0])


def vrbench_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def vrbench_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs)


def vrbench_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA, task.doc_to_text(doc))


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
    records = [value["record"] for value in values]
    protocol, with_judge = task.task_protocol(records, None)
    judge_ran = with_judge and all(value["rated"] is not None for value in values)
    outcomes = [tuple(value["rated"]) if judge_ran else (None, False) for value in values]
    return point(task.metric_columns(records, outcomes, protocol, with_judge, judge_ran=judge_ran))


# `vrbench_aggregate_<metric>`, the aggregation of each metric the YAMLs name
globals().update(aggregations("vrbench_aggregate_", task.JUDGE_METRICS, metrics))
