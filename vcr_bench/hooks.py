"""lmms-eval hooks of the VCR-Bench tasks in the plugin (`tasks/vcr_bench/*.yaml` point here).

The task itself (inputs, records, metrics) is `task.py`, shared with the task folder that
`lmms-vr upstream` writes into lmms-eval; this module binds it to the plugin: documents from
the data root with the checks before generation (`utils.preflight`), the judge engine with its
cache (`judges`), and the fast inputs (`utils.model_video`: simple video models get a proxy
clip of exactly the frames their own path keeps, chat models the path;
`LMMS_VR_VIDEO_INPUT=path` = paths; frames decoded by `utils.media.video`).

Scoring: `process_results` only builds a self-contained record (never calls a judge, never
raises); the first aggregation of a task judges all records in one batch (`score_records`,
memoised by content so the metric aggregations share one batch) and writes the judge
accounting next to the results. `score_records` is also what `lmms-vr score` calls on
records read back from a `--log_samples` file, and `record_from_response` builds the same
record from a doc and a raw response (`--predict_only` files, replay predictions).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.judges.bind import bind
from lmms_video_reasoning.utils.core.roots import data_root, docs_dataset
from lmms_video_reasoning.utils.lmms import model_video, preflight
from lmms_video_reasoning.utils.media import video
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer
from lmms_video_reasoning.vcr_bench import data, scoring, task  # noqa: F401 - scoring: part of this module's interface
from lmms_video_reasoning.vcr_bench.scoring import (  # noqa: F401 - part of this module's interface
    INCLUDE_BACKGROUND,
    INCLUDE_BACKGROUND_ENV,
    LENIENT_VERDICT,
    LENIENT_VERDICT_ENV,
    OFFICIAL_REVERSED,
    OFFICIAL_REVERSED_ENV,
    resolve_settings,
)
from lmms_video_reasoning.vcr_bench.task import (  # noqa: F401 - part of this module's interface
    FRAME_COUNT,
    VISUAL_MODE,
    VISUAL_MODE_ENV,
    VISUAL_MODES,
    count_model_failures,
    count_truncated,
    judged_count,
    metrics_from_outcomes,
    record_from_response,
    task_settings,
)

log = logging.getLogger("lmms_video_reasoning.vcr_bench")


# ---------------------------------------------------------------- documents


def load_docs(dataset=None) -> Any:
    """`process_docs`: replace the one-row placeholder with the benchmark's documents (checked
    before generation: `utils.preflight`)."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), _MEDIA, judge="vcr_bench")


def load_docs_no_visual(dataset=None) -> Any:
    """`process_docs` of `vcr_text_only`: the same documents; no video is needed."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), judge="vcr_bench")


_MEDIA = preflight.MediaCheck(data.VCR_BENCH, lambda: data.media_kinds(data_root(data.VCR_BENCH), data.load_records()))


# ---------------------------------------------------------------- get the frames (the plugin's binding)


class PluginMedia:
    """Videos under the data root (`data.video_file`), frames from the exact sampler, and the
    proxy clip of the model's own frames for video-native models."""

    def probe(self, doc: dict) -> tuple[int, float]:
        info = video.probe(data.video_file(doc))
        return info.total_frames, info.fps

    def frames(self, doc: dict, indices: Sequence[int]) -> list:
        return list(video.read_frames(data.video_file(doc), list(indices)))

    def video(self, doc: dict) -> str:
        # The model's own frames in a proxy clip (utils.model_video; `LMMS_VR_VIDEO_INPUT=path`
        # hands over the path). Either way the file is decoded here first: native-video models
        # swallow a decode error and answer from the text alone, so a broken file fails here.
        return model_video.video_for_model(data.video_file(doc), on_broken=lambda _path: data.checked_video_file(doc))


MEDIA = PluginMedia()


def frame_plan(doc: dict, mode: str) -> tuple[Any, list[int], list[float]]:
    """(video, frame indices, their times) for the frame modes, from the container (no decoding)."""
    indices, times = task.frame_plan(doc, mode, MEDIA)
    return data.video_file(doc), indices, times


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


# ---------------------------------------------------------------- per-sample records


def _results_for(doc: dict, results: Sequence, chain_of_thought: bool) -> dict:
    record = record_from_response(doc, results[0] if results else "", chain_of_thought)
    return {name: record for name in task.metric_names(chain_of_thought)}


def process_results(doc: dict, results: Sequence) -> dict:
    """`vcr_cot`: one record under every metric name (accuracy and CoT metrics)."""
    return _results_for(doc, results, chain_of_thought=True)


def process_results_accuracy_only(doc: dict, results: Sequence) -> dict:
    """Ablations (paper Table 5 reports accuracy only): no recall / precision judging."""
    return _results_for(doc, results, chain_of_thought=False)


# ---------------------------------------------------------------- scoring

NO_JUDGE_HINT = (" Configure one (LMMS_VR_JUDGE_BASE_URL or OPENAI_API_KEY) or re-score the --log_samples file later "
                 "with `lmms-vr score`.")


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """All VCR-Bench metrics of a task's records, judged by the configured judge (`task.score_with`)."""
    judge = bind(get_judge("vcr_bench"))
    metrics = task.score_with(records, judge, settings, NO_JUDGE_HINT)
    if judge is not None:
        judge.log_summary()
    return metrics


_SCORE = ScoreOnce(score_records)
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
