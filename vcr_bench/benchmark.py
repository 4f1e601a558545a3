"""VCR-Bench's binding to lmms-eval and to the suite (`utils/core/registry.py` says what each part is): the
tasks (`tasks/*.yaml` are generated from them), the lmms-eval hooks (the declared ones made by `__getattr__`),
"get the frames" on the data root (`MEDIA`), the scoring with the judge it is handed and the
declaration (`BENCHMARK`). `process_results` only builds a record; the first aggregation of a task judges
all its records in one batch. Video-native models get a proxy clip of exactly the frames their own path
keeps (`LMMS_VR_VIDEO_INPUT=path`: the path), frame-based ones 64 timed frames.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.core.registry import Benchmark, Group, Scored, ScoringAdapter, Task
from lmms_video_reasoning.utils.core.settings import SettingError, chosen_values
from lmms_video_reasoning.utils.lmms.plugin_media import FileMedia, docs_loader, with_media
from lmms_video_reasoning.utils.lmms.responses import model_failed, reasoning_truncated, warn_truncated
from lmms_video_reasoning.utils.results.aggregation import SHARED_OPTIONS, DeclaredHooks, judge_accounting_writer
from lmms_video_reasoning.vcr_bench import data, frames, judging, scoring, task
from lmms_video_reasoning.vcr_bench.report import report_spec

logger = logging.getLogger("lmms_video_reasoning.vcr_bench")

# The official judge (eval_code: GPT-4o through the OpenAI client), with lmms-eval's variables.
JUDGE = JudgeDefaults("vcr_bench", judging.JUDGE_MODEL, "OPENAI_API_KEY", model_env="MODEL_VERSION",
                      base_url_envs=("OPENAI_BASE_URL", "OPENAI_API_URL"))

# until: [] so a chain of thought is not cut at its first blank line.
GENERATION = {"until": [], "max_new_tokens": 4096, "do_sample": False, "temperature": 0}


def _task(name: str, about: str, visual_mode: str, cot_prompt: bool = True, scores_cot: bool = False, frame_count: int | None = None) -> Task:
    """`cot_prompt`: the prompt asks for the chain of thought; `scores_cot`: recall and precision are judged
    too (`vcr_cot`; the Table 5 ablations report accuracy only). `lmms_eval_specific_kwargs`: `visual_mode`
    for every model, and with the video, 64 timed frames for the API models; `frame_count` (paper Table 9)."""
    kwargs = {"default": {"visual_mode": visual_mode, "chain_of_thought": cot_prompt, **({"frame_count": frame_count} if frame_count else {})}}
    if visual_mode == "video":
        kwargs.update({model: {"visual_mode": "frames", "chain_of_thought": cot_prompt} for model in ("openai", "async_openai", "gpt4v")})
    return Task(name, task.metric_names(scores_cot), process_docs="load_docs_no_visual" if visual_mode == "none" else "load_docs",
                record_options={"chain_of_thought": scores_cot}, generation_kwargs=GENERATION, about=about, model_kwargs=kwargs)


TASKS = (
    _task("vcr_cot", "VCR-Bench as published: question + the CoT instruction, accuracy and CoT score (4 judge calls).",
          "video", scores_cot=True),
    _task("vcr_direct", 'Paper Table 5 "Direct": the question without the CoT instruction; accuracy only.', "video", cot_prompt=False),
    _task("vcr_text_only", 'Paper Table 5 "Text": question + CoT instruction, no visual input; accuracy only.', "none"),
    _task("vcr_one_frame", 'Paper Table 5 "1 Frame": question + CoT instruction with the middle frame only; accuracy only.', "one_frame"),
)
# Paper Table 9 (frame-based models, 16/32/64/128 frames): `vcr_cot` in frames mode for every model;
# the report's Table 9 reads these tasks by name (vcr_bench/report.py). Not in the group: ablations.
FRAME_ABLATION = tuple(_task(f"vcr_cot_frames{count}", f"Paper Table 9: vcr_cot with {count} timestamped frames for every model.",
                             "frames", scores_cot=True, frame_count=count) for count in frames.TABLE9_COUNTS)
# Not named `vcr_bench`: lmms-eval reads `--tasks X` as a folder of YAMLs when ./X exists,
# and `vcr_bench/` is a folder of this repository (the CLI would then find no task).
GROUPS = (Group("vcr_bench_all", tuple(t.name for t in TASKS),
                "All VCR-Bench tasks: the benchmark (vcr_cot) and the paper's Table 5 ablations."),)


# `process_docs`: the documents, the media (not for vcr_text_only) and the judge checked first
load_docs = docs_loader(data, data.records_at)
load_docs_no_visual = docs_loader(data, data.records_at, media=False)


# "get the frames": the document's video under the data root (`data.video_file`; `task.Media`)
MEDIA = FileMedia(data.VCR_BENCH, data.video_file)


def chosen(kwargs: dict | None) -> dict | None:
    """The task's kwargs with VCR_BENCH_VISUAL_MODE, when set, in place of a video or frames mode (the
    Table 5 ablations keep their input)."""
    if (kwargs or {}).get("visual_mode", "video") not in ("video", "frames"):
        return kwargs
    try:
        return chosen_values((task.VISUAL_MODE_VARIABLE,), kwargs)
    except SettingError as error:
        raise DataError(f"VCR-Bench visual mode: {error}") from None


doc_to_text, doc_to_visual, doc_to_messages = (with_media(hook, MEDIA, chosen) for hook in (task.doc_to_text, task.doc_to_visual, task.doc_to_messages))


def scored_records(records: Sequence[dict], settings: dict | None, judge) -> tuple[dict[str, float], list[dict] | None]:
    """All metrics of a task's records (0-100, and the counts) judged by `judge`, and the judge's per-sample
    outcomes (None without a judge: `task.unjudged_metrics`, and a log line saying how to configure one)."""
    warn_truncated(logger, "VCR-Bench", sum(map(reasoning_truncated, records)), len(records))
    if judge is None:
        logger.warning("VCR-Bench: no judge configured, so none of the %d samples is scored: accuracy and CoT metrics are NaN "
                       "(answers are extracted by the judge). Configure one (LMMS_VR_JUDGE_BASE_URL or OPENAI_API_KEY) or "
                       "re-score the --log_samples file later with `lmms-vr score`.", len(records))
        return task.unjudged_metrics(records), None
    outcomes = judging.judge_records(records, judge, settings)
    metrics, judged = task.metrics_from_outcomes(records, outcomes, settings), len(records) - sum(map(model_failed, records))
    failure_share.log_if_withheld(logger, "VCR-Bench", metrics["judge_failed"], judged, (settings or {}).get(failure_share.FAILED_SHARE.option))
    return metrics, outcomes


class VcrBenchScoring(ScoringAdapter):
    """VCR-Bench: `scored_records`; outcomes from `judging.judge_records`, metrics from `task.metric_columns`."""

    name = judge_name = "vcr_bench"

    def settings(self, records):
        return BENCHMARK.settings_of(records)

    def score(self, records, settings, judge):
        return Scored(*scored_records(records, settings, judge))

    def outcomes(self, records, settings, judge):
        return None if judge is None else judging.judge_records(list(records), judge, settings)

    def verdicts(self, tag, value):
        """Extraction: the extracted answer; scoring: the official exact reading ("1" is correct);
        recall and precision: each step's Matched / Unmatched / Wrong / Redundant, paired by position."""
        if tag == "vcr.extract" and isinstance(value, str):
            return [(tag, "", value.strip())]
        if tag == "vcr.score" and hasattr(value, "exact"):
            return [(tag, "", bool(value.exact))]
        if tag in ("vcr.recall", "vcr.precision") and isinstance(value, list):
            return [(tag, f"step {number}", step.get("judgment")) for number, step in enumerate(value, 1) if isinstance(step, dict)]
        return super().verdicts(tag, value)

    def stratum(self, record):
        return str(record.get("dimension_code") or "")

    def columns(self, records, outcomes, settings):
        return task.metric_columns(records, outcomes, settings)

    def report_record(self, record):
        """The groups a sample counts in and its failure flags (`task.metrics_from_outcomes` reads no more)."""
        kept = {key: record[key] for key in ("sample_id", "dimension_code", "duration_bucket", "multiple_choice", "score_cot") if key in record}
        return {**kept, "model_failed": model_failed(record), "reasoning_truncated": reasoning_truncated(record)}


BENCHMARK = Benchmark(
    name="vcr_bench", title="VCR-Bench", package=__package__, task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=task.build_record, scoring=VcrBenchScoring(), tasks=TASKS + FRAME_ABLATION, groups=GROUPS,
    options=(*scoring.VARIABLES, *SHARED_OPTIONS), judge=JUDGE, report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "reasoning_truncated"), reference="reference_tables.json",
    data_module=f"{__package__}.data", sample_module=f"{__package__}.sample", demo_tasks=("vcr_cot",))

# `process_results_<task>` and `aggregate_<metric>`, made from the declaration; the first
# aggregation of a task writes the judge accounting beside the run's results.
__getattr__ = DeclaredHooks(BENCHMARK, judge_accounting_writer("vcr_bench"))

