"""CG-Bench's binding to lmms-eval and to the suite, one module as in every benchmark folder
(`utils/core/registry.py` lists what each part is and who reads it): the tasks (`TASKS`,
`GROUPS`: long, clue, grounding, open, mcq, blind on `cgbench_mini.json`, `cg_bench_full_*` on
`cgbench.json`; `tasks/*.yaml` are generated from them), the lmms-eval hooks (the declared ones
made by `__getattr__`), "get the frames" on the data root (`PluginMedia`), the scoring with the
judge it is handed (`scored_records`; `outcome_columns`)
and the declaration (`BENCHMARK`). The tasks
themselves are `task.py` and `frames.py`, shared with the upstream protocol tasks.

Model inputs follow `lmms_eval_specific_kwargs` (`visual_mode` video | frames, `long_frames`,
`clue_frames`, `subtitles`, `frame_times`). `PluginMedia` plans frames from the sampler's table
(`data.video_meta`: the packaged official table, the root's own, else the file probed), checked
against the file when it is at hand; video-native models get a proxy clip of exactly the frames
their own path keeps (`LMMS_VR_VIDEO_INPUT=path`: the path). Each task's first aggregation writes
its breakdowns (duration bucket, domain, kind), per-mode parse failures and the judge accounting
to `<date_id>_cg_bench_<kind>_details.json` beside lmms-eval's results. Records of separate runs
can be concatenated: long + clue + grounding records of one model give `crr` and `acc_at_iou`
exactly as `cg_bench_mcq` does.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.cg_bench import data, judging, task
from lmms_video_reasoning.cg_bench.task import METRICS, Outcome, Settings
from lmms_video_reasoning.cg_bench.report import report_spec
from lmms_video_reasoning.judges import get_judge
from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.core.registry import Benchmark, Group, Scored, ScoringAdapter, Task
from lmms_video_reasoning.utils.core.roots import cache_home, data_root, docs_dataset
from lmms_video_reasoning.utils.results.aggregation import SHARED_OPTIONS, DeclaredHooks, RunFiles

logger = logging.getLogger("lmms_video_reasoning.cg_bench")

# The official judge (run/run_api.py: GPT-4o), with lmms-eval's variables.
JUDGE = JudgeDefaults("cg_bench", judging.JUDGE_MODEL, "OPENAI_API_KEY", model_env="MODEL_VERSION",
                      base_url_envs=("OPENAI_BASE_URL", "OPENAI_API_URL"))


# ---------------------------------------------------------------------- the tasks

KINDS = ("long", "clue", "grounding", "open", "mcq", "blind")
SPLITS = {"mini": ("cg_bench", "cgbench_mini.json, 3,000 questions"), "full": ("cg_bench_full", "cgbench.json, 12,129 questions")}
# The official runner: temperature 0, no stop string (a fenced JSON answer spans lines).
GENERATION = {"until": [], "max_new_tokens": 1024, "do_sample": False, "temperature": 0}
# visual_mode video: the video path (clue: start_time/end_time or a clue clip);
# frames: the official sampled frames + frame times (models that take images).
PER_MODEL = {"default": dict(task.DEFAULTS), "openai": {**task.DEFAULTS, "visual_mode": "frames"}}


def _task(kind: str, split: str) -> Task:
    prefix, about = SPLITS[split]
    return Task(f"{prefix}_{kind}", METRICS[kind], process_docs=f"load_{kind}" + ("_full" if split == "full" else ""),
                generation_kwargs=GENERATION, model_kwargs=PER_MODEL, target="right_answer",
                about=f"CG-Bench {kind} ({about}); see cg_bench/README.md")


TASKS = tuple(_task(kind, split) for split in SPLITS for kind in KINDS)

# The paper's input ablations (cg_bench/README.md, "Reproducing the paper's tables"): the same
# documents with the inputs fixed for every model. cg_bench/report.py finds them by their suffix
# (`MODALITIES`, `TEXT_ONLY`). F: the official sampled frames; FT: their times; S: subtitles; ST:
# the subtitles' times. Not in the groups.
_FRAMES = {"visual_mode": "frames"}
MODALITY_INPUTS = {
    "_f": {**_FRAMES, "subtitles": False, "frame_times": False},
    "_f_ft": {**_FRAMES, "subtitles": False, "frame_times": True},
    "_f_s": {**_FRAMES, "subtitles": True, "subtitle_times": False, "frame_times": False},
    "_f_s_st": {**_FRAMES, "subtitles": True, "subtitle_times": True, "frame_times": False},
    "_f_s_ft": {**_FRAMES, "subtitles": True, "subtitle_times": False, "frame_times": True},
    "_f_s_st_ft": {**_FRAMES, "subtitles": True, "subtitle_times": True, "frame_times": True},
}
TEXT_INPUTS = {  # no visual: subtitles only (Table 4's S rows), or the text alone (Table 3's text-only row)
    "_s_frames": ("long", {"visual_mode": "none", "subtitle_times": False}),
    "_s_video": ("long", {"visual_mode": "none", "subtitle_times": False, "subtitle_span": "video"}),
}


def _ablation(kind: str, split: str, suffix: str, inputs: dict, media: bool = True) -> Task:
    base = _task(kind, split)
    return replace(base, name=base.name + suffix, process_docs=base.process_docs + ("" if media else "_text"),
                   model_kwargs={"default": {**task.DEFAULTS, **inputs}}, about=f"{base.about}; the paper's input ablation {suffix[1:]} (cg_bench/report.py MODALITIES, TEXT_ONLY)")


ABLATIONS = (
    *(_ablation(kind, split, suffix, inputs) for split in SPLITS for suffix, inputs in MODALITY_INPUTS.items() for kind in ("mcq", "open")),
    *(_ablation(kind, split, suffix, inputs, media=False) for split in SPLITS for suffix, (kind, inputs) in TEXT_INPUTS.items()),
    *(_ablation(kind, split, "_text", {"visual_mode": "none", "subtitles": False}, media=False)
      for split in SPLITS for kind in ("grounding", "open")),
)
GROUPS = (Group("cg_bench", tuple(f"cg_bench_{kind}" for kind in KINDS), "All CG-Bench tasks."),
          Group("cg_bench_full", tuple(f"cg_bench_full_{kind}" for kind in KINDS), "All CG-Bench tasks on cgbench.json."))


# ---------------------------------------------------------------------- documents (process_docs)


def _loader(task_kind: str, split: str, media_needed: bool = True):
    """The `process_docs` hook of one task, checked before generation (`utils/lmms/preflight.py`): the
    media (not for the blind task, nor `media_needed=False`: the ablations without a visual) and the
    judge (the open-ended task)."""

    def load_docs(_placeholder=None):
        from lmms_video_reasoning.utils.lmms import preflight

        media = None if task_kind == "blind" or not media_needed else preflight.MediaCheck(
            data.CG_BENCH, lambda: data.media_kinds(data_root(data.CG_BENCH), data.load_records(split)), key=split)
        return preflight.task_load("cg_bench", lambda: docs_dataset(task.build_docs(data.load_records(split), task_kind, split)),
                                   media, judge="cg_bench" if task_kind == "open" else None)

    load_docs.__name__ = f"load_{task_kind}_{split}" + ("" if media_needed else "_text")
    return load_docs


load_long, load_clue, load_grounding = _loader("long", "mini"), _loader("clue", "mini"), _loader("grounding", "mini")
load_open, load_mcq, load_blind = _loader("open", "mini"), _loader("mcq", "mini"), _loader("blind", "mini")
load_long_full, load_clue_full, load_grounding_full = _loader("long", "full"), _loader("clue", "full"), _loader("grounding", "full")
load_open_full, load_mcq_full, load_blind_full = _loader("open", "full"), _loader("mcq", "full"), _loader("blind", "full")
load_long_text, load_grounding_text, load_open_text = (_loader(kind, "mini", False) for kind in ("long", "grounding", "open"))
load_long_full_text, load_grounding_full_text, load_open_full_text = (_loader(kind, "full", False) for kind in ("long", "grounding", "open"))


# ---------------------------------------------------------------------- model inputs ("get the frames" on the data root)


def clip_cache_dir() -> Path:
    return cache_home() / "cg_bench_clips"


class PluginMedia:
    """Files under the CG-Bench data root; see the module doc."""

    def plan(self, video_uid: str, plan: FramePlan, n: int, intervals: Sequence[Sequence[float]] | None = None):
        """The table's values while they describe the file; a video not at hand leaves them
        unchecked, as the official runner uses them (replay predictions are scored where the
        videos are not); reading the frames then fails naming the file (`frames`)."""
        from lmms_video_reasoning.utils.media.video import plan_frames

        meta = data.video_meta(video_uid)
        path = data.video_at(data.data_root(data.CG_BENCH), video_uid)
        return plan_frames(path, plan, n, intervals=intervals, meta={"max_frame": meta.max_frame, "fps": meta.fps})

    def subtitle_path(self, video_uid: str) -> Path | None:
        return data.subtitle_path(video_uid)

    def frames(self, video_uid: str, indices: Sequence[int]) -> list:
        from lmms_video_reasoning.utils.media import video

        return video.read_frames(data.video_path(video_uid), list(indices))

    def full_video(self, doc: dict) -> str:
        """The question's full video, checked to decode (video mode hands only the path to the model)."""
        return data.usable_video(data.video_path(doc["video_uid"]))

    def clue_video(self, doc: dict) -> str:
        """The dataset's clip (checked), else one cut from the (checked) full video."""
        clip = data.clue_clip_path(doc["qid"])
        if clip is not None:
            return data.usable_video(clip)
        from lmms_video_reasoning.utils.media import video

        return Path(video.cut_clip(self.full_video(doc), doc["clue_intervals"], clip_cache_dir()))

    def video(self, doc: dict) -> str:
        """The model's own frames in a proxy clip of the full video (clue mode: of the clue clip).
        The file is decoded either way (MediaError naming it otherwise): lmms-eval's `qwen2_vl`
        would swallow a decode error."""
        from lmms_video_reasoning.utils.lmms import model_video

        if doc["mode"] == "clue":
            return model_video.video_for_model(self.clue_video(doc))
        return model_video.video_for_model(data.video_path(doc["video_uid"]), on_broken=data.usable_video)


MEDIA = PluginMedia()


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The official text block (`task.doc_to_text`; no decoding)."""
    return task.doc_to_text(doc, lmms_eval_specific_kwargs, MEDIA)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """Simple models: a proxy clip of the video (clue mode: of the clue clip) or the sampled PIL frames.

    Video mode: a proxy clip of exactly the frames the calling model's own path keeps
    (`utils/lmms/model_video.py`; `LMMS_VR_VIDEO_INPUT=path` hands over the path). The file is decoded
    either way (MediaError naming it otherwise): lmms-eval's `qwen2_vl` would swallow a decode error.
    """
    return task.doc_to_visual(doc, lmms_eval_specific_kwargs, MEDIA)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: one user turn, visuals first then the text block (as the official runner)."""
    return task.doc_to_messages(doc, lmms_eval_specific_kwargs, MEDIA)


# ---------------------------------------------------------------------- records and scoring with the judge engine


def build_record(doc: dict, response: Any, settings: dict | None = None) -> dict:
    """The logged record of one answer (`Benchmark.build_record`: `task.make_record` with the
    data root's subtitles): the question's facts plus the raw reply, no parsing, no judge."""
    return task.make_record(doc, response, MEDIA, settings)


def read_outcomes(records: Sequence[dict], settings: Settings, judge) -> list[Outcome]:
    """Parse every record and judge the open-ended ones with `judge` (the judge runs here, once;
    None: none configured); `lmms-vr report` passes a reader of the judge cache."""
    return task.read_outcomes(records, settings, judge, MEDIA)


def scored_records(records: Sequence[dict], settings: "Settings | dict | None", judge) -> tuple[dict, list[Outcome]]:
    """All metrics of a list of records (what the tasks' aggregations and `lmms-vr score` report),
    and the per-answer outcomes they come from, the open answers judged by `judge` (None: none configured).

    `settings`: a Settings (`CgBenchScoring.settings`: the records' own), a dict such as
    `{"strict": True}`, or None (official parsing, judge on). See `task.score_with`.
    """
    settings = task.as_settings(settings)
    scores, answers = task.score_with(records, settings, judge, MEDIA)
    if scores["subtitles_missing"]:
        logger.info("cg_bench: `lmms-vr prepare cg_bench --verify-only` lists the videos without a subtitle file")
    return scores, answers


# ---------------------------------------------------------------------- after a task's scoring: its details file


def details_path(run: RunFiles, task_kind: str) -> Path:
    """Where a task's breakdowns and judge accounting are written, beside the run's results:
    `<output_path>/<model>/<date_id>_cg_bench_<kind>_details.json`."""
    return run.path(f"cg_bench_{task_kind}_details.json")


def _write_details(scores: dict, run: RunFiles | None) -> None:
    """Write every metric, the breakdowns and the judge accounting beside lmms-eval's results."""
    if run is None:
        return
    judge = get_judge("cg_bench") if scores["breakdown"]["task_kind"] in ("open",) else None
    details = {**scores, "judge": judge.accounting() if judge is not None else None,
               "settings": settings.resolved(scoring_only=True)}
    path = details_path(run, scores["breakdown"]["task_kind"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(details, indent=2, default=str, sort_keys=True) + "\n", encoding="utf-8")
    logger.debug("cg_bench: breakdowns by duration / domain / kind written to %s", path)


# ---------------------------------------------------------------------- the declaration


class CgBenchScoring(ScoringAdapter):
    """CG-Bench: `scored_records`; outcomes from `read_outcomes`, metrics from
    `task.outcome_columns` (`task_metrics`).

    Records of several CG-Bench tasks of one run may be scored together: long + clue +
    grounding give `crr` and `acc_at_iou` joined per question, as `cg_bench_mcq` does.
    """

    name = judge_name = "cg_bench"

    def settings(self, records):
        """The settings the records were made with (their task's; each variable overrides)."""
        return Settings.of(BENCHMARK.settings_of(records))

    def score(self, records, settings, judge):
        metrics, answers = scored_records(records, settings, judge)
        if self.needs_judge(records) and judge is None:
            return Scored(metrics, None)  # open answers and no judge: no outcomes (as `outcomes` says)
        return Scored(metrics, _fields(answers))

    def needs_judge(self, records):
        return any(record["mode"] == "open" for record in records)

    def outcomes(self, records, settings, judge):
        if self.needs_judge(records) and judge is None:
            return None
        return _fields(read_outcomes(records, settings, judge))

    def metrics(self, records, outcomes_, settings):
        return task.task_metrics([Outcome(**outcome) for outcome in outcomes_], settings.failed_share)

    def columns(self, records, outcomes_, settings):
        return task.outcome_columns(outcomes_, failed_share=settings.failed_share)

    def breakdown(self, outcomes_: Sequence[dict]) -> dict:
        """Metrics by duration bucket, domain and question kind (`task.breakdown`)."""
        return task.breakdown([Outcome(**outcome) for outcome in outcomes_])

    def report_record(self, record):
        """The question and the mode (the metrics read only the outcomes)."""
        return {key: record[key] for key in ("sample_id", "qid", "mode") if key in record}

    def question(self, record):
        """The question (`qid`): its long, clue, grounding and open answers are records of it, and
        it is the resampling unit (the joins of CRR and acc.@IoU are per question)."""
        return str(record["qid"])

    def stratum(self, record):
        return str(record.get("sub_category") or "")


def _fields(outcomes_) -> list[dict]:
    """JSON-ready outcomes: an Outcome holds only numbers, strings and None, so its fields' dict is
    `dataclasses.asdict` (faster)."""
    return [dict(vars(outcome)) for outcome in outcomes_]


BENCHMARK = Benchmark(
    name="cg_bench",
    title="CG-Bench",
    package=__package__,
    task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=build_record,
    scoring=CgBenchScoring(),
    tasks=TASKS + ABLATIONS,
    groups=GROUPS,
    options=(*task.OPTIONS, *SHARED_OPTIONS),
    judge=JUDGE,
    report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "parse_failed", "reasoning_truncated"),
    reference="reference_tables.json",
    data_module=f"{__package__}.data",
    sample_module=f"{__package__}.sample",
    demo_tasks=("cg_bench_mcq", "cg_bench_open"),
)

# `process_results_<task>` and `aggregate_<metric>`, made from the declaration; the first
# aggregation of a task writes its details file.
__getattr__ = DeclaredHooks(BENCHMARK, _write_details)
