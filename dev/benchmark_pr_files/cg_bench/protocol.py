"""CG-Bench's official protocol tasks (clue-grounded QA in long videos): the lmms-eval hooks.

The task logic is `task.py`; here: the folder's dataset and files, frames decoded with PyAV, and the rule-based
reading of each answer in `process_results`. The subtitle input is `protocol_subtitles.py`'s.
"""

import os

from datasets import Dataset

from lmms_eval.tasks._task_utils.media_resolver import resolve_media_reference
from lmms_eval.tasks.cgbench.utils import cgbench_doc_to_visual
from lmms_video_reasoning.cg_bench import docs, task
from lmms_video_reasoning.utils.core import frame_plan, records
from lmms_video_reasoning.dev.plain_frames import PlainMedia, probe

ROOT_ENV = "CGBENCH_ROOT"


def resolve(reference, env, subdirs):
    return resolve_media_reference(reference, media_type="video", cache_dir="cg_videos_720p", env_vars=(env, ROOT_ENV), extra_subdirs=subdirs)


def video_path(video_uid):
    """The full video, found as this folder's `cgbench` task finds it (FileNotFoundError naming it and the fix)."""
    return cgbench_doc_to_visual({"video_uid": video_uid})[0]


class Media(PlainMedia):
    """Get the frames of a question's video (by its `video_uid`): the official frame table and clue clips too."""

    def plan(self, video_uid, plan, n, intervals=None):
        """The frames `plan` picks, from the frame table's (max_frame, fps) (the root's own copy first), else the file's."""
        entry = docs.meta_table(os.getenv(ROOT_ENV, "").strip()).get(video_uid)
        if entry is not None:
            return frame_plan.choose(plan, entry.max_frame, entry.fps, n, intervals)
        count, fps = probe(video_path(video_uid))
        return frame_plan.choose(plan, max(1, count - 1), fps, n, intervals)  # the table's max_frame is the last frame's index

    def full_video(self, doc):
        return video_path(doc["video_uid"])

    def clue_video(self, doc):
        path = resolve(f"{doc['qid']}.mp4", "CGBENCH_CLUE_DIR", ("cg_clue_videos", "clue_videos"))
        if not os.path.exists(path):
            raise FileNotFoundError(f"CG-Bench clue clip {doc['qid']}.mp4 not found (the dataset has clips for some questions only): set CGBENCH_CLUE_DIR, or use visual_mode: frames")
        return path

    def video(self, doc):
        return self.clue_video(doc) if doc["mode"] == "clue" else self.full_video(doc)


MEDIA = Media(video_path)


def _process_docs(task_kind, split):
    def process_docs(dataset):
        questions = docs.validate_records([dict(row) for row in dataset], f"CG-Bench {docs.SPLIT_FILES[split]}")
        return Dataset.from_list(task.build_docs(questions, task_kind, split))

    return process_docs


def outcome_metrics(values):
    """Every metric of a task from its records' outcomes."""
    return task.task_metrics([task.Outcome(**value["outcome"]) for value in values])


# cgbench_<kind>_docs / cgbench_full_<kind>_docs and cgbench_protocol_aggregate_<metric>, named in the YAMLs
for _kind, _metrics in task.METRICS.items():
    globals().update({f"cgbench_{_kind}_docs": _process_docs(_kind, "mini"), f"cgbench_full_{_kind}_docs": _process_docs(_kind, "full")})
    globals().update(records.aggregations("cgbench_protocol_aggregate_", _metrics, outcome_metrics))


def cgbench_protocol_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def cgbench_protocol_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def cgbench_protocol_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


def answer_record(doc, results):
    """The logged record of the model's reply to `doc`."""
    return task.make_record(doc, results[0] if results else "")  # a reply that is not a string: `reply_record` reads its str()


def logged(doc, record, outcome):
    """The answer's record and its outcome, logged once, under every metric of the document's task."""
    return records.once_per_sample({"record": record, "outcome": vars(outcome)}, task.METRICS[doc["task_kind"]])


def cgbench_protocol_process_results(doc, results):
    """The answer's record and its outcome, read by rule (no judge)."""
    record = answer_record(doc, results)
    return logged(doc, record, task.read_outcomes([record])[0])
