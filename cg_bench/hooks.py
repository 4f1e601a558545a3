"""lmms-eval hooks of the CG-Bench tasks in the plugin (the functions the YAMLs in `cg_bench/tasks/` name).

The tasks themselves (documents, inputs, records, metrics) are `task.py`, `sampling.py` and
`outcomes.py`, shared with the protocol tasks that `dev/upstream.py` adds to lmms-eval's
`cgbench` folder; this module binds them to the plugin: documents from the data root with the
checks before generation (`utils.preflight`), the judge engine (`aggregate.py`) and the data
root's media with the fast inputs (`media.MEDIA`).

Tasks and their documents (one per question, `sample_id` = str(qid); `cg_bench_mcq` has
three per question, `sample_id` = "<qid>:<mode>"):

| task               | modes                     | metrics (each task also has `model_failed`, `reasoning_truncated`) |
|--------------------|---------------------------|----------------------------------------------------------------|
| cg_bench_long      | long                      | long_acc, parse_failed                                         |
| cg_bench_clue      | clue                      | clue_acc, parse_failed                                         |
| cg_bench_grounding | grounding                 | miou, rec_at_iou, parse_failed                                 |
| cg_bench_open      | open                      | oe_acc, parse_failed, judge_failed (LLM judge)                 |
| cg_bench_mcq       | long + clue + grounding   | long_acc, clue_acc, miou, rec_at_iou, acc_at_iou, crr, parse_failed |
| cg_bench_blind     | blind                     | blind_acc, parse_failed                                        |

Breakdowns (duration bucket, domain, kind), per-mode parse failures and the judge accounting
go to `<date_id>_cg_bench_<kind>_details.json` beside the run's `<date_id>_results.json`.

`cg_bench_full_*` are the same on `cgbench.json`. Settings come from
`lmms_eval_specific_kwargs` (`visual_mode`: video | frames, `long_frames`, `clue_frames`,
`subtitles`, `frame_times`); the parsing variant from `LMMS_VR_CG_STRICT` at scoring time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lmms_video_reasoning.cg_bench import data, media, task
from lmms_video_reasoning.cg_bench.aggregate import build_record
from lmms_video_reasoning.cg_bench.task import build_docs
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.records import process_results as records_hook
from lmms_video_reasoning.utils.core.roots import data_root, docs_dataset
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.results.aggregation import RunFiles, ScoreOnce

logger = logging.getLogger("lmms_video_reasoning.cg_bench")


# ---------------------------------------------------------------------- documents


def _loader(task_kind: str, split: str):
    """The `process_docs` hook of one task, checked before generation (`utils/lmms/preflight.py`): the
    media (not for the blind task) and the judge (the open-ended task)."""
    media = None if task_kind == "blind" else preflight.MediaCheck(
        data.CG_BENCH, lambda: data.media_kinds(data_root(data.CG_BENCH), data.load_records(split)), key=split)

    def load_docs(_placeholder=None):
        return preflight.task_load("cg_bench", lambda: docs_dataset(build_docs(data.load_records(split), task_kind, split)),
                                   media, judge="cg_bench" if task_kind == "open" else None)

    load_docs.__name__ = f"load_{task_kind}_{split}"
    return load_docs


load_long, load_clue, load_grounding = _loader("long", "mini"), _loader("clue", "mini"), _loader("grounding", "mini")
load_open, load_mcq, load_blind = _loader("open", "mini"), _loader("mcq", "mini"), _loader("blind", "mini")
load_long_full, load_clue_full, load_grounding_full = _loader("long", "full"), _loader("clue", "full"), _loader("grounding", "full")
load_open_full, load_mcq_full, load_blind_full = _loader("open", "full"), _loader("mcq", "full"), _loader("blind", "full")


# ---------------------------------------------------------------------- model input (the plugin's media)


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official text block (`task.doc_to_text`; no decoding)."""
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, media.MEDIA)


def full_video(doc: dict) -> Path:
    """The question's full video, checked to decode (video mode hands only the path to the model)."""
    return media.MEDIA.full_video(doc)


def clue_video(doc: dict) -> Path:
    """A video of the clue intervals only: the dataset's clip (checked), else one cut from the (checked) full video."""
    return media.MEDIA.clue_video(doc)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """Simple models: a proxy clip of the video (clue mode: of the clue clip) or the sampled PIL frames.

    Video mode: a proxy clip of exactly the frames the calling model's own path keeps
    (`utils/lmms/model_video.py`; `LMMS_VR_VIDEO_INPUT=path` hands over the path). The file is decoded
    either way (MediaError naming it otherwise): lmms-eval's `qwen2_vl` would swallow a decode error.
    """
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, media.MEDIA)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: one user turn, visuals first then the text block (as the official runner)."""
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, media.MEDIA)


# ---------------------------------------------------------------------- results and aggregation


# One record per metric of the task (the same record): cheap, never raises, no judge.
process_results = records_hook(build_record, task.metric_names)

_scorer = ScoreOnce("cg_bench")


def details_path(run: RunFiles, task_kind: str) -> Path:
    """Where a task's breakdowns and judge accounting are written, beside the run's results:
    `<output_path>/<model>/<date_id>_cg_bench_<kind>_details.json`."""
    return run.path(f"cg_bench_{task_kind}_details.json")


def _write_details(scores: dict, run: RunFiles | None) -> None:
    """Write every metric, the breakdowns and the judge accounting beside lmms-eval's results."""
    if run is None:
        return
    from lmms_video_reasoning.judges import get_judge

    judge = get_judge("cg_bench") if scores["breakdown"]["task_kind"] in ("open",) else None
    details = {**scores, "judge": judge.accounting() if judge is not None else None,
               "settings": settings.resolved(scoring_only=True)}
    path = details_path(run, scores["breakdown"]["task_kind"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(details, indent=2, default=str, sort_keys=True) + "\n", encoding="utf-8")
    logger.debug("cg_bench: breakdowns by duration / domain / kind written to %s", path)


aggregate_long_acc = _scorer.aggregation("long_acc", _write_details)
aggregate_clue_acc = _scorer.aggregation("clue_acc", _write_details)
aggregate_miou = _scorer.aggregation("miou", _write_details)
aggregate_rec_at_iou = _scorer.aggregation("rec_at_iou", _write_details)
aggregate_acc_at_iou = _scorer.aggregation("acc_at_iou", _write_details)
aggregate_crr = _scorer.aggregation("crr", _write_details)
aggregate_oe_acc = _scorer.aggregation("oe_acc", _write_details)
aggregate_blind_acc = _scorer.aggregation("blind_acc", _write_details)
aggregate_parse_failed = _scorer.aggregation("parse_failed", _write_details)
aggregate_judge_failed = _scorer.aggregation("judge_failed", _write_details)
aggregate_model_failed = _scorer.aggregation("model_failed", _write_details)
aggregate_reasoning_truncated = _scorer.aggregation("reasoning_truncated", _write_details)
