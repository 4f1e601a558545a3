"""CG-Bench's binding to lmms-eval and to the suite (`utils/core/registry.py` lists the parts): the tasks
(`tasks/*.yaml` are generated from them), the lmms-eval hooks, "get the frames" on the data root
(`MEDIA`), the scoring with the judge it is handed and the declaration (`BENCHMARK`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.cg_bench import data, docs, frames, judging, task
from lmms_video_reasoning.cg_bench.task import METRICS, MODALITY_INPUTS, TEXT_INPUTS, TEXT_ONLY, Outcome
from lmms_video_reasoning.cg_bench.report import BREAKDOWN_GROUPS, SPLITS, breakdown, report_spec
from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core import options
from lmms_video_reasoning.utils.core.ask import Judge
from lmms_video_reasoning.utils.core.frame_plan import FramePlan
from lmms_video_reasoning.utils.core.registry import Benchmark, Group, Scored, ScoringAdapter, Task
from lmms_video_reasoning.utils.core.roots import cache_home, data_root, usable_video
from lmms_video_reasoning.utils.core.settings import FROM_ENV
from lmms_video_reasoning.utils.lmms.plugin_media import FileMedia, docs_loader, with_media
from lmms_video_reasoning.utils.lmms.responses import warn_truncated
from lmms_video_reasoning.utils.media import subtitles
from lmms_video_reasoning.utils.media.video import cut_clip, plan_frames
from lmms_video_reasoning.utils.results.aggregation import SHARED_OPTIONS, DeclaredHooks, judge_accounting_writer

logger = logging.getLogger("lmms_video_reasoning.cg_bench")

FAILED_SHARE = failure_share.FAILED_SHARE.option  # the task option of the judge failure share (`judges.failure_share`)
# The official judge (run/run_api.py: GPT-4o), with lmms-eval's variables.
JUDGE = JudgeDefaults("cg_bench", judging.JUDGE_MODEL, "OPENAI_API_KEY", model_env="MODEL_VERSION",
                      base_url_envs=("OPENAI_BASE_URL", "OPENAI_API_URL"))


# --- The tasks
# The official runner: temperature 0, no stop string (a fenced JSON answer spans lines).
GENERATION = {"until": [], "max_new_tokens": 1024, "do_sample": False, "temperature": 0}
# visual_mode video: the video path (clue: start_time/end_time or a clue clip); frames: the official sampled frames + times (image models).
PER_MODEL = {"default": dict(task.DEFAULTS), "openai": {**task.DEFAULTS, "visual_mode": "frames"}}


def _task(kind: str, split: str) -> Task:
    about = f"{docs.SPLIT_FILES[split]}, {data.RELEASE[split][0]:,} questions"
    return Task(SPLITS[split] + kind, METRICS[kind], process_docs=f"load_{kind}" + ("_full" if split == "full" else ""),
                generation_kwargs=GENERATION, model_kwargs=PER_MODEL, target="right_answer", about=f"CG-Bench {kind} ({about}); see cg_bench/README.md")


TASKS = tuple(_task(kind, split) for split in SPLITS for kind in METRICS)  # long, clue, grounding, open, mcq, blind

def _ablation(kind: str, split: str, suffix: str, inputs: dict) -> Task:
    """`_task` with these inputs for every model; without a visual, its documents are loaded without checking the media (`_text`)."""
    base = _task(kind, split)
    return replace(base, name=base.name + suffix, process_docs=base.process_docs + ("_text" if inputs.get("visual_mode") == "none" else ""),
                   model_kwargs={"default": {**task.DEFAULTS, **inputs}}, about=f"{base.about}; the paper's input ablation {suffix[1:]} (cg_bench/report.py MODALITIES, TEXT_ONLY)")


# The paper's input ablations (`task.MODALITY_INPUTS`): not in the groups.
ABLATIONS = (
    *(_ablation(kind, split, suffix, inputs) for split in SPLITS for suffix, inputs in MODALITY_INPUTS.items() for kind in ("mcq", "open")),
    *(_ablation(kind, split, suffix, inputs) for split in SPLITS for suffix, (kind, _label, inputs) in TEXT_INPUTS.items()),
    *(_ablation(kind, split, TEXT_ONLY, {"visual_mode": "none", "subtitles": False}) for split in SPLITS for kind in ("grounding", "open")),
)
# Every metric, each answer generated once: `mcq` runs the long, clue and grounding modes of each question.
GROUPED = ("mcq", "open", "blind")
GROUPS = (Group("cg_bench", tuple(f"cg_bench_{kind}" for kind in GROUPED), "Every CG-Bench metric (mcq: long + clue + grounding)."),
          Group("cg_bench_full", tuple(f"cg_bench_full_{kind}" for kind in GROUPED), "Every CG-Bench metric on cgbench.json."))


# --- Documents (process_docs)
def _loader(name: str):
    """The `process_docs` hook `load_<kind>[_full][_text]`, checked before generation: the media (not for
    blind nor the `_text` ablations) and the judge (open)."""
    kind, split = name.split("_")[1], "full" if "_full" in name else "mini"
    return docs_loader(data, lambda: data.records_at(split=split), lambda records: task.build_docs(records, kind, split),
                       media=kind != "blind" and not name.endswith("_text"), judge=kind == "open", key=split)


# load_long, load_clue_full, load_open_text, ...: one per `process_docs` the tasks name
globals().update({t.process_docs: _loader(t.process_docs) for t in TASKS + ABLATIONS})


# --- Model inputs ("get the frames" on the data root)
class PluginMedia(FileMedia):
    """Files under the CG-Bench data root (`frames.Media`), keyed by `video_uid`: the videos, their
    subtitles and the dataset's clue clips."""

    def plan(self, video_uid: str, plan: FramePlan, n: int, intervals: Sequence[Sequence[float]] | None = None):
        """The table's values (`data.video_meta`), checked against the file when it is at hand (replays are scored where the videos are not)."""
        return plan_frames(data.video_at(data_root(data.CG_BENCH), video_uid), plan, n, intervals=intervals, meta=vars(data.video_meta(video_uid)))

    def subtitle_path(self, video_uid: str) -> Path | None:
        return data.subtitle_at(data_root(data.CG_BENCH), video_uid)

    def full_video(self, doc: dict) -> str:
        return self.checked(doc["video_uid"])

    def clue_video(self, doc: dict) -> str:
        """The dataset's clip (checked), else one cut from the (checked) full video."""
        clip = data.clue_clip_at(data_root(data.CG_BENCH), doc["qid"])
        if clip is not None:
            return usable_video(data.CG_BENCH, clip)
        return cut_clip(self.full_video(doc), doc["clue_intervals"], cache_home() / "cg_bench_clips")

    def video(self, doc: dict) -> str:
        """The model's own frames in a proxy clip of the full video (clue mode: of the clue clip)."""
        if doc["mode"] == "clue":
            from lmms_video_reasoning.utils.lmms import model_video

            return model_video.video_for_model(self.clue_video(doc))
        return super().video(doc["video_uid"])


MEDIA = PluginMedia(data.CG_BENCH, data.video_path)
doc_to_text, doc_to_messages = (with_media(hook, MEDIA, subtitles_for=frames.subtitles_for) for hook in (task.doc_to_text, task.doc_to_messages))
doc_to_visual = with_media(task.doc_to_visual, MEDIA)


# --- Records and scoring with the judge engine
NO_FLAGS = {"subtitles_unusable": None, "subtitles_missing": False}  # blind: no subtitles asked for


def subtitle_flags(video_uid: str) -> dict:
    """`subtitles_missing`: the video has no SRT (asked without subtitles: counted, `prepare --verify-only` lists
    them); `subtitles_unusable`: why its SRT yields no line (reported). Never raises: a root that cannot be read
    is reported where the media are resolved."""
    try:
        path = MEDIA.subtitle_path(video_uid)
    except ValueError:
        return dict(NO_FLAGS)
    unusable = None if path is None or subtitles.load_cues(path) else subtitles.srt_problem(path) or "no subtitle line"
    return {"subtitles_unusable": unusable, "subtitles_missing": path is None}


def build_record(doc: dict, response: Any, settings: dict | None = None) -> dict:
    """`task.make_record` with whether the data root's subtitles reached the prompt (`Benchmark.build_record`)."""
    return {**task.make_record(doc, response, settings), **(NO_FLAGS if doc["mode"] == "blind" else subtitle_flags(doc["video_uid"]))}


# --- The declaration
class CgBenchScoring(ScoringAdapter):
    """CG-Bench: `scored_records`; outcomes from `task.read_outcomes` and `judging.judge_pending`, metrics from `task.outcome_columns`."""

    name = judge_name = "cg_bench"

    def settings(self, records):
        return BENCHMARK.settings_of(records)

    def score(self, records, settings, judge):
        metrics, answers = scored_records(records, settings, judge)
        return Scored(metrics, None if self.needs_judge(records) and judge is None else [asdict(o) for o in answers])

    def needs_judge(self, records):
        return any(record["mode"] == "open" for record in records)

    def outcomes(self, records, settings, judge):
        return None if self.needs_judge(records) and judge is None else [asdict(o) for o in read_and_judge(records, settings, judge)]

    def columns(self, records, outcomes_, settings):
        return task.outcome_columns([Outcome(**outcome) for outcome in outcomes_], failed_share=settings.get(FAILED_SHARE))

    def report_record(self, record):
        """The question and the mode (the metrics read only the outcomes)."""
        return {key: record[key] for key in ("sample_id", "qid", "mode") if key in record}

    def question(self, record):
        """The `qid`: its answers in every mode are records of it (the joins of CRR and acc.@IoU are per question)."""
        return str(record["qid"])

    def stratum(self, record):
        return str(record.get("sub_category") or "")


BENCHMARK = Benchmark(
    name="cg_bench", title="CG-Bench", package=__package__, task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=build_record, scoring=CgBenchScoring(), tasks=TASKS + ABLATIONS, groups=GROUPS,
    options=(*task.VARIABLES, *SHARED_OPTIONS), judge=JUDGE, report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "parse_failed", "reasoning_truncated"), reference="reference_tables.json",
    data_module=f"{__package__}.data", sample_module=f"{__package__}.sample", demo_tasks=("cg_bench_mcq", "cg_bench_open"))

# `process_results_<task>` and `aggregate_<metric>`, made from the declaration; the first aggregation of a task
# writes `<date_id>_cg_bench_<kind>_details.json`: every metric, the breakdowns and (open) the judge accounting.
__getattr__ = DeclaredHooks(BENCHMARK, judge_accounting_writer("cg_bench", lambda scores: (kind := scores["breakdown"]["task_kind"], kind == "open")))


def read_and_judge(records: Sequence[dict], settings: dict, judge: Judge | None) -> list[Outcome]:
    """The records' outcomes (`task.read_outcomes` with the settings' parsing options), the open answers judged
    by `judging.judge_pending` on the data root (`judge` None: they stay pending)."""
    return judging.judge_pending(task.read_outcomes(records, settings["strict"], settings["official_reversed"]), records, judge, MEDIA)


def scored_records(records: Sequence[dict], settings: dict | None, judge: Judge | None) -> tuple[dict, list[Outcome]]:
    """Every metric of the records and the outcomes they come from (`task.read_outcomes`, open answers judged by
    `judging.judge_pending` on the data root), with the counts of videos asked without subtitles and `breakdown`
    (per group and mode, failures, the settings used). Records of several tasks of a run may be scored together:
    long + clue + grounding give `crr` and `acc_at_iou` joined per question, as `cg_bench_mcq` does. `settings`: the
    task's options (`Benchmark.settings_of`) or some of them with `judge`, e.g. `{"strict": True, "judge": False}`
    (the others: the official protocol)."""
    settings = dict(settings or {})
    judged, known = settings.pop("judge", True), {setting.option for setting in BENCHMARK.options} | {FROM_ENV}
    if set(settings) - known:
        raise ValueError(f"cg_bench settings: unknown key(s) {sorted(set(settings) - known)}; expected judge or a task option "
                         f"({', '.join(sorted(known - {FROM_ENV}))})")
    settings = {**options.values((task.STRICT, task.OFFICIAL_REVERSED)), **settings}
    strict, failed_share = settings["strict"], settings.get(FAILED_SHARE)
    outcomes = read_and_judge(records, settings, judge if judged else None)
    for outcome in [o for o in outcomes if not judged and o.judge_error == task.NO_JUDGE]:  # not "no judge configured": the settings said so
        outcome.judge_error = task.JUDGE_OFF
    scores = task.task_metrics(outcomes, failed_share)
    warn_truncated(logger, "CG-Bench", scores["reasoning_truncated"], len(records))
    # the videos asked without subtitles: their SRT yields no line (with why) / they have none
    unusable = {r["video_uid"]: r["subtitles_unusable"] for r in records if r.get("subtitles_unusable")}
    missing = sorted({r["video_uid"] for r in records if r.get("subtitles_missing")})
    for videos, what in ((sorted(unusable), "have an SRT that yields no subtitle line"),
                         (missing, "have no subtitle file, listed by `lmms-vr prepare cg_bench --verify-only`")):
        if videos:
            logger.warning("cg_bench: %d video(s) %s (e.g. %s); their questions were asked without subtitles", len(videos), what, videos[0])
    scores["subtitles_unusable"], scores["subtitles_missing"] = len(unusable), len(missing)
    judge_errors = [o.judge_error for o in outcomes if o.judge_error]
    opened = sum(o.mode == "open" for o in outcomes)
    modes = [mode for mode in task.MODES if any(o.mode == mode for o in outcomes)]
    scores["breakdown"] = {
        "task_kind": "+".join(sorted({r.get("task_kind", r["mode"]) for r in records})),
        "settings": {"strict": strict, "parsing": "strict" if strict else "official", "official_reversed": settings["official_reversed"],
                     "failed_share": failed_share},
        "counts": {mode: sum(o.mode == mode for o in outcomes) for mode in modes},
        **{f"{failure}_by_mode": {mode: sum(getattr(o, failure) for o in outcomes if o.mode == mode) for mode in modes}
           for failure in ("parse_failed", "model_failed")},
        "judge_failed": len([e for e in judge_errors if e not in (task.NO_JUDGE, task.JUDGE_OFF)]), "judge_configured": task.NO_JUDGE not in judge_errors,
        "subtitles_unusable": unusable, "subtitles_missing": missing, **breakdown(outcomes)}
    if failure_share.log_if_withheld(logger, "CG-Bench", scores["judge_failed"], opened, failed_share):
        for group in (group for name in BREAKDOWN_GROUPS for group in scores["breakdown"][name].values()):
            group.pop("oe_acc", None)  # the task's decision holds for its breakdowns too
    return scores, outcomes
