"""CG-Bench's official protocol tasks (clue-grounded QA in long videos): the lmms-eval hooks.

The tasks `cgbench_long`, `cgbench_clue`, `cgbench_grounding`, `cgbench_open`, `cgbench_mcq`
(long + clue + grounding joined per question: CRR and acc@IoU) and `cgbench_blind`, on the
mini split, and `cgbench_full_*` on the full one. The task logic is `task.py` (documents,
inputs, records, outcomes, metrics), `frames.py` (the official frame sampler and subtitles),
`judging.py` (the two-step open-ended judge) and `scoring.py`; this module
binds it to lmms-eval: the folder's dataset, files resolved by `resolve_media_reference` (plain
paths), frames decoded with PyAV (`plain_frames.py`), and the judge of lmms-eval's own settings
(`lmms_eval.llm_judge`: `API_TYPE`, `MODEL_VERSION`, the provider's key and URL). Open answers
are judged in `process_results`; a failed judgment is counted in `judge_failed`, never scored.
"""

import dataclasses
import json
import os
from pathlib import Path

from datasets import Dataset

from lmms_eval.tasks._task_utils.media_resolver import resolve_media_reference
from lmms_video_reasoning.cg_bench import docs, judging, task
from lmms_video_reasoning.utils.core.frame_plan import choose
from lmms_video_reasoning.utils.core.records import once_per_sample, records_of
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge
from lmms_video_reasoning.dev import plain_frames

CACHE_DIR = "cg_videos_720p"
ROOT_ENV = "CGBENCH_ROOT"


def _resolve(reference, env, subdirs):
    return resolve_media_reference(reference, media_type="video", cache_dir=CACHE_DIR, env_vars=(env, ROOT_ENV), extra_subdirs=subdirs)


def video_path(video_uid):
    """The full video (FileNotFoundError naming it and the variables)."""
    path = _resolve(f"{video_uid}.mp4", "CGBENCH_VIDEO_DIR", (CACHE_DIR, "videos"))
    if not os.path.exists(path):
        raise FileNotFoundError(f"CG-Bench video not found: {video_uid}.mp4. Accept the dataset terms on Hugging Face and set CGBENCH_VIDEO_DIR (or CGBENCH_ROOT) if needed.")
    return path


class PlainMedia:
    """Get the frames: the official frame table, subtitles and videos as plain paths, PyAV-decoded frames."""

    def __init__(self):
        self._tables = {}

    def plan(self, video_uid, plan, n, intervals=None):
        """The frames `plan` picks, from the official table's (max_frame, fps), else the file's."""
        root = os.getenv(ROOT_ENV, "").strip()
        table = self._table(Path(root) / docs.META_FILE if root else None)
        if video_uid in table:
            entry = table[video_uid]
            return choose(plan, entry.max_frame, entry.fps, n, intervals)
        count, fps = plain_frames.probe(video_path(video_uid))
        return choose(plan, max(1, count - 1), fps, n, intervals)  # the table's max_frame is the last frame's index

    def _table(self, override):
        """The packaged official table, overridden entry by entry by the data root's own copy."""
        key = str(override) if override is not None and override.is_file() else ""
        if key not in self._tables:
            table = dict(docs.packaged_meta())
            if key:
                table.update(docs.parse_meta(json.loads(override.read_text(encoding="utf-8")), key))
            self._tables[key] = table
        return self._tables[key]

    def subtitle_path(self, video_uid):
        path = _resolve(f"{video_uid}.srt", "CGBENCH_SUBTITLE_DIR", ("cg_subtitles", "subtitles"))
        return Path(path) if os.path.exists(path) else None

    def frames(self, video_uid, indices):
        return plain_frames.read_frames(video_path(video_uid), indices)

    def full_video(self, doc):
        return video_path(doc["video_uid"])

    def clue_video(self, doc):
        path = _resolve(f"{doc['qid']}.mp4", "CGBENCH_CLUE_DIR", ("cg_clue_videos", "clue_videos"))
        if not os.path.exists(path):
            raise FileNotFoundError(f"CG-Bench clue clip {doc['qid']}.mp4 not found (the dataset has clips for some questions only): set CGBENCH_CLUE_DIR, or use visual_mode: frames")
        return path

    def video(self, doc):
        return self.clue_video(doc) if doc["mode"] == "clue" else self.full_video(doc)


MEDIA = PlainMedia()


def _process_docs(task_kind, split):
    def process_docs(dataset):
        records = docs.validate_records([dict(row) for row in dataset], f"CG-Bench {docs.SPLIT_FILES[split]}")
        return Dataset.from_list(task.build_docs(records, task_kind, split))

    process_docs.__name__ = f"cgbench_{task_kind}_{split}_docs"
    return process_docs


def cgbench_protocol_doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def cgbench_protocol_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def cgbench_protocol_doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


def cgbench_protocol_process_results(doc, results):
    """The answer's record and its outcome (open answers judged here, by the two-step judge)."""
    response = results[0] if results else ""
    record = task.make_record(doc, response if isinstance(response, str) else str(response), MEDIA)
    judge = configured_judge(judging.JUDGE_MODEL) if doc["mode"] == "open" else None
    outcome = task.read_outcomes([record], task.Settings.from_env(), judge, MEDIA)[0]
    return once_per_sample({"record": record, "outcome": dataclasses.asdict(outcome)}, task.metric_names(doc))


def metrics(values):
    """Every metric of a task from its outcomes (modes joined per question)."""
    read = [task.Outcome(**value["outcome"]) for value in records_of(values)]
    return task.task_metrics(read)


def _aggregation(metric):
    def aggregate(values):
        return metrics(values)[metric]

    aggregate.__name__ = f"cgbench_protocol_aggregate_{metric}"
    return aggregate


cgbench_long_docs, cgbench_full_long_docs = _process_docs("long", "mini"), _process_docs("long", "full")
cgbench_clue_docs, cgbench_full_clue_docs = _process_docs("clue", "mini"), _process_docs("clue", "full")
cgbench_grounding_docs, cgbench_full_grounding_docs = _process_docs("grounding", "mini"), _process_docs("grounding", "full")
cgbench_open_docs, cgbench_full_open_docs = _process_docs("open", "mini"), _process_docs("open", "full")
cgbench_mcq_docs, cgbench_full_mcq_docs = _process_docs("mcq", "mini"), _process_docs("mcq", "full")
cgbench_blind_docs, cgbench_full_blind_docs = _process_docs("blind", "mini"), _process_docs("blind", "full")

cgbench_protocol_aggregate_long_acc = _aggregation("long_acc")
cgbench_protocol_aggregate_parse_failed = _aggregation("parse_failed")
cgbench_protocol_aggregate_model_failed = _aggregation("model_failed")
cgbench_protocol_aggregate_reasoning_truncated = _aggregation("reasoning_truncated")
cgbench_protocol_aggregate_clue_acc = _aggregation("clue_acc")
cgbench_protocol_aggregate_miou = _aggregation("miou")
cgbench_protocol_aggregate_rec_at_iou = _aggregation("rec_at_iou")
cgbench_protocol_aggregate_oe_acc = _aggregation("oe_acc")
cgbench_protocol_aggregate_judge_failed = _aggregation("judge_failed")
cgbench_protocol_aggregate_acc_at_iou = _aggregation("acc_at_iou")
cgbench_protocol_aggregate_crr = _aggregation("crr")
cgbench_protocol_aggregate_blind_acc = _aggregation("blind_acc")
