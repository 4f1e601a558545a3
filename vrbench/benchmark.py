"""VRBench's binding to lmms-eval and to the suite (`utils/core/registry.py` lists each part): the tasks,
the lmms-eval hooks (the declared ones made by `__getattr__`), "get the frames" on the data root
(`MEDIA`), the scoring with the judge it is handed (`scored_records`), the declaration (`BENCHMARK`) and
the paper's two-phase protocol. The task itself (inputs, records, metrics) is `task.py`, shared with the upstream task folder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from lmms_video_reasoning.judges import failure_share
from lmms_video_reasoning.judges.config import JudgeDefaults
from lmms_video_reasoning.utils.core.columns import point
from lmms_video_reasoning.utils.core.data_errors import DataError
from lmms_video_reasoning.utils.core.registry import Benchmark, Group, Scored, ScoringAdapter, Task
from lmms_video_reasoning.utils.core.settings import chosen_values
from lmms_video_reasoning.utils.lmms.plugin_media import FileMedia, docs_loader, with_media
from lmms_video_reasoning.utils.lmms.responses import (final_answer, model_failed, reasoning_truncated, reply_record, strip_reasoning,
                                                         warn_truncated)
from lmms_video_reasoning.utils.results.aggregation import SHARED_OPTIONS, DeclaredHooks, judge_accounting_writer
from lmms_video_reasoning.vrbench import data, docs, judging, prompts, task
from lmms_video_reasoning.vrbench.report import report_spec
from lmms_video_reasoning.vrbench.scoring import TAGS, official_tag_values

logger = logging.getLogger("lmms_video_reasoning.vrbench")

# The official judge: DeepSeek-V3 (`deepseek-chat`) on DeepSeek's endpoint.
JUDGE = JudgeDefaults("vrbench", judging.JUDGE_MODEL, "DEEPSEEK_API_KEY", base_url=judging.JUDGE_BASE_URL)


# --- The tasks

GREEDY = {"until": [], "max_new_tokens": 1024, "do_sample": False, "temperature": 0}
# A model-named block replaces `default` (the settings: `task.py`). Counts: 16 and 224x224 are the
# official code's (inference/main.py); the per-model ones are paper Table A3's "Input Frames"
# (video-native models get a clip, the others frames), except 128 for llava_onevision, this suite's
# choice (Table A3 has no LLaVA-OneVision row). Table A3's Gemini (0.5 fps) is no frame count:
# `gemini` keeps the default; H2OVL and DeepSeek-VL2 (4) have no lmms-eval model.
PER_MODEL = {
    "default": {"visual_mode": "video", "num_frames": 16},
    **{model: {"visual_mode": "video", "num_frames": 128} for model in ("qwen2_vl", "qwen2_5_vl", "llava_onevision", "longva")},
    "internvideo2_5": {"visual_mode": "video", "num_frames": 64},
    "videochat_flash": {"visual_mode": "video", "num_frames": 512},
    **{model: {"visual_mode": "frames", "num_frames": 64} for model in ("openai", "async_openai", "gpt4v", "internvl2")},
    "claude": {"visual_mode": "frames", "num_frames": 20},
    **{model: {"visual_mode": "frames", "num_frames": 8} for model in ("phi3v", "aria")},
}
SEE_README = "See vrbench/README.md for the settings and every difference from the official code."
# The paper's protocol: lmms-eval's agentic loop, one round of reasoning and one of choosing (`two_phase_turn`).
TWO_ROUNDS = {**GREEDY, "max_agentic_steps": 2}
TWO_PHASE_ABOUT = ("the paper's two-phase protocol (section 4, Fig. A20): round 1 reasons with no options shown,\n"
                   "round 2 chooses an option given round 1's reply; OE-P rates round 1, MCQ-O reads round 2.\n" + SEE_README)

TASKS = (
    Task("vr_bench", task.JUDGE_METRICS, process_docs="load_docs", generation_kwargs=GREEDY, model_kwargs=PER_MODEL,
         about="VRBench: one generation per question, scored for MCQ-O (rule cascade) and OE-P (DeepSeek-V3 judge).\n" + SEE_README),
    Task("vr_bench_mcq", task.MCQ_METRICS, process_docs="load_docs_mcq", generation_kwargs=GREEDY, model_kwargs=PER_MODEL,
         about="VRBench MCQ-O only: the same generation as vr_bench, no judge.\n" + SEE_README),
    Task("vr_bench_text", task.JUDGE_METRICS, process_docs="load_docs_text", generation_kwargs=GREEDY, model_kwargs={"default": PER_MODEL["default"]},
         about="VRBench text-only (the paper's LLM setting): video summary + question, no frames.\n" + SEE_README),
    Task("vr_bench_official", task.JUDGE_METRICS, process_docs="load_docs_official", model_kwargs=PER_MODEL, settings={"protocol": "official"},
         generation_kwargs={**GREEDY, "do_sample": True, "temperature": 1.0},
         about="VRBench, official protocol (swapped judge fields, strip('Assistant:'), unrated types as 0)\n"
               "and official sampled decoding (temperature 1.0; add --seed 215 for the official seed).\n" + SEE_README),
    Task("vr_bench_two_phase", task.JUDGE_METRICS, process_docs="load_docs_two_phase", output_type="generate_until_agentic",
         generation_kwargs=TWO_ROUNDS, model_kwargs=PER_MODEL, about=f"VRBench, {TWO_PHASE_ABOUT}"),
    Task("vr_bench_text_two_phase", task.JUDGE_METRICS, process_docs="load_docs_text_two_phase", output_type="generate_until_agentic",
         generation_kwargs=TWO_ROUNDS, model_kwargs={"default": PER_MODEL["default"]}, about=f"VRBench text-only, {TWO_PHASE_ABOUT}"),
)
GROUPS = (Group("vr_bench_all", ("vr_bench", "vr_bench_mcq", "vr_bench_text"), "All VRBench tasks."),)

TWO_PHASE = "two_phase"  # marks the documents of the paper's protocol: the reasoning round, then the choice round
ROUNDS = "rounds"  # the key of the two replies in a two-phase response


# --- The paper's two-phase protocol (section 4, "Evaluation Protocols"; tasks vr_bench_two_phase and
# vr_bench_text_two_phase, whose documents are marked TWO_PHASE: `doc_to_text` and `build_record` dispatch
# here), two generations: OE-P rates round 1, MCQ-O reads round 2.
def two_phase_turn(doc: dict, replies: Sequence[str]) -> str | tuple:
    """lmms-eval's `generate_until_agentic` step. Before any reply: the Fig. A20 prompt for VLMs, or LLMs
    (text task). After round 1: round 2, text only (`[]` visuals): the options beside the round-1 reply
    without its reasoning blocks (as a chat template keeps an earlier turn). After round 2: done, both
    replies packed into the one response lmms-eval logs."""
    if not replies:
        basis = "video summary" if doc["mode"] == "text" else "video and summary"
        return prompts.PAPER_REASONING_PROMPT.substitute(basis=basis, question=doc["question"], video_summary=doc["video_summary"])
    if len(replies) == 1:
        options = prompts.multiple_choice_question(doc["question"], [tuple(o) for o in doc["options"]])
        return [], prompts.CHOICE_PROMPT.substitute(reasoning=strip_reasoning(replies[0]), multiple_choice_question=options), False, None, None
    return None, None, True, [json.dumps({ROUNDS: list(replies[:2])}, ensure_ascii=False)], None


def two_phase_reply(response: Any, settings: dict | None) -> dict:
    """The reply fields of a two-phase record, of the packed JSON lmms-eval logs or the two replies as a list
    (a replay prediction; "", no prediction, is two empty replies): `response` is round 1 (what the OE-P judge
    rates), `choice_response` round 2 (its final answer gives the MCQ letter); a failure in either round is a
    model failure (never judged, wrong)."""
    rounds = ["", ""] if response in ("", None) else response
    if isinstance(rounds, str):
        try:
            rounds = json.loads(rounds).get(ROUNDS)
        except (ValueError, AttributeError):
            rounds = None
    if not (isinstance(rounds, (list, tuple)) and len(rounds) == 2 and all(isinstance(text, str) for text in rounds)):
        raise DataError(f"VRBench two-phase task: expected the two rounds' replies ({{\"{ROUNDS}\": [reasoning, choice]}} or a "
                        f"list of two strings), got {str(response)[:200]!r}; run the task with lmms-eval's agentic loop")
    first, second = (reply_record(text, settings) for text in rounds)
    return {**first, "choice_response": rounds[1], "final_answer": second["final_answer"],
            "reasoning_truncated": second["reasoning_truncated"], "model_failed": first["model_failed"] or second["model_failed"],
            "model_failure": first["model_failure"] or second["model_failure"]}


# --- Documents (process_docs)
def build_docs(mode: str, protocol: str, two_phase: bool = False, records: list[dict] | None = None) -> list[dict]:
    """The task's documents: every question of the records (default: the annotation file's), stamped with
    mode and protocol, and marked for the paper's two-phase protocol (`two_phase`)."""
    found = task.stamp(docs.flatten(data.records_at() if records is None else records), mode, protocol)
    return [{**doc, TWO_PHASE: True} for doc in found] if two_phase else found


def _process_docs(task_name: str, mode: str):
    """The `process_docs` hook of one task: its documents, stamped with its protocol (the task's option,
    which `VRBENCH_PROTOCOL` overrides; read when loading) and marked two-phase when the task runs lmms-eval's
    agentic loop, checked before generation: the videos (not for text-only tasks), the judge (not for MCQ-only)."""
    declared = next(t for t in TASKS if t.name == task_name)

    def build(records: list[dict]) -> list[dict]:
        protocol = task.PROTOCOL.value(chosen_values((task.PROTOCOL_VARIABLE,), declared.settings))
        return build_docs(mode, protocol, declared.output_type == "generate_until_agentic", records)

    return docs_loader(data, data.records_at, build, media=mode != "text", judge=mode != "mcq")


load_docs = _process_docs("vr_bench", "judge")
load_docs_mcq = _process_docs("vr_bench_mcq", "mcq")
load_docs_text = _process_docs("vr_bench_text", "text")
load_docs_official = _process_docs("vr_bench_official", "judge")
load_docs_two_phase = _process_docs("vr_bench_two_phase", "judge")
load_docs_text_two_phase = _process_docs("vr_bench_text_two_phase", "text")


# --- Model inputs ("get the frames" on the data root): the record's video (`data.resolve_video`)
MEDIA = FileMedia(data.VRBENCH, lambda doc: data.resolve_video(doc["video_path"]))

# The task's kwargs with `VRBENCH_NUM_FRAMES` / `VRBENCH_VIDEO_FRAMES` in place of the task's when set.
frames_chosen = partial(chosen_values, task.FRAME_VARIABLES)
doc_to_visual = with_media(task.doc_to_visual, MEDIA, frames_chosen)


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None, previous_output: Sequence[str] | None = None,
                round_idx: int | None = None, previous_round_info=None) -> str | tuple:
    """The official CoT prompt; for the two-phase tasks, the prompt of their next round (lmms-eval's
    agentic loop passes the rounds' replies as `previous_output`)."""
    if doc.get(TWO_PHASE):
        return two_phase_turn(doc, previous_output or [])
    return task.doc_to_text(doc, lmms_eval_specific_kwargs)


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    kwargs = frames_chosen(lmms_eval_specific_kwargs)
    return task.doc_to_messages(doc, kwargs, MEDIA, doc_to_text(doc, kwargs))


# --- Records and scoring
def build_record(doc: dict, response, settings: dict | None = None) -> dict:
    """`task.build_record`; for the two-phase tasks, of both rounds' replies (`two_phase_reply`)."""
    return task.record_of(doc, (two_phase_reply if doc.get(TWO_PHASE) else reply_record)(response, settings))


def rated_outcomes(records: Sequence[dict], settings: dict | None, judge) -> list[dict] | None:
    """JSON-ready outcomes of the records: their ratings by `judge` (`judging.rate`) when their task has OE-P (MCQ-only
    records are never rated); None when they need a judge and there is none."""
    protocol, judged = task.task_protocol(records, settings)
    if judged and judge is None:
        return None
    rated = judging.rate(list(records), protocol, judge) if judged else [(None, False)] * len(records)
    return [{"process": process, "judge_failed": failed, "judged": judged} for process, failed in rated]


def scored_records(records: Sequence[dict], settings: dict | None, judge) -> tuple[dict[str, float], list[dict] | None]:
    """All metrics of one task's records, `judge` (None: not configured) rating the rated records, and their
    outcomes (`rated_outcomes`; None: a judge is needed and there is none). `settings`: the task's failure
    share and optionally a `protocol` overriding the records'."""
    if not records:
        return {}, []
    warn_truncated(logger, "VRBench", sum(map(reasoning_truncated, records)), len(records))
    outcomes = rated_outcomes(records, settings, judge)
    columns = BENCHMARK.scoring.columns(records, outcomes, settings)
    failed, judged = int(columns.counted["needed_failed"].sum()), int(columns.counted["needed"].sum())
    # never for MCQ-only records, nor without a judge: none failed
    failure_share.log_if_withheld(logger, "VRBench", failed, judged, (settings or {}).get(failure_share.FAILED_SHARE.option))
    return point(columns), outcomes


class VrBenchScoring(ScoringAdapter):
    """VRBench: outcomes from `judging.rate`, metrics from `task.metric_columns`."""

    name = judge_name = "vrbench"

    def settings(self, records):
        # records made before they carried their settings carry their protocol
        values = BENCHMARK.settings_of(records)
        if records and "settings" not in records[0] and not task.PROTOCOL_VARIABLE.is_set():
            values["protocol"] = records[0]["protocol"]
        return values

    def score(self, records, settings, judge):
        return Scored(*scored_records(records, settings, judge))

    def needs_judge(self, records):
        return any(record["mode"] != "mcq" for record in records)

    def outcomes(self, records, settings, judge):
        return rated_outcomes(records, settings, judge)

    def verdicts(self, tag, value):
        """The four 0-10 ratings of a reply, one call type per criterion (the official protocol's
        raw reply is read with the official rules; a missing tag is no verdict)."""
        kind = tag.rsplit(".", 1)[-1]
        if kind not in TAGS:
            return super().verdicts(tag, value)
        ratings = official_tag_values(value, kind) if isinstance(value, str) else tuple(value)
        return [(f"{tag} {criterion}", "", float(rating)) for criterion, rating in zip(TAGS[kind], ratings) if rating is not None]

    def rating_scale(self, call):
        return tuple(range(11)) if call.startswith("vrbench.") else None

    def stratum(self, record):
        return str(record.get("reasoning_type") or "")

    def columns(self, records, outcomes, settings):
        """`outcomes` None: no judge ran (the judged metrics are NaN)."""
        protocol, judged = task.task_protocol(records, settings)
        rated = [(o["process"], o["judge_failed"]) for o in outcomes] if outcomes is not None else [(None, False)] * len(records)
        return task.metric_columns(records, rated, protocol, judged, judge_ran=outcomes is not None,
                                   failed_share=(settings or {}).get(failure_share.FAILED_SHARE.option))

    def report_record(self, record):
        kept = {key: record[key] for key in task.RECORD_KEYS if key in record}
        return {**kept, "final_answer": final_answer(record), "reasoning_truncated": reasoning_truncated(record),
                "model_failed": model_failed(record)}

    def unit(self, record):
        """The video: its ~9 questions share a story and are correlated, so the bootstrap
        resamples videos (ids are `"{video_id}_{qa_key}"` with qa keys such as `qa3`)."""
        return str(record["sample_id"]).rsplit("_", 1)[0]


BENCHMARK = Benchmark(
    name="vrbench", title="VRBench", package=__package__, task_dirs=(Path(__file__).resolve().parent / "tasks",),
    build_record=build_record, scoring=VrBenchScoring(), tasks=TASKS, groups=GROUPS,
    options=(task.PROTOCOL_VARIABLE, *SHARED_OPTIONS), judge=JUDGE, report=report_spec(),
    failure_counts=("model_failed", "judge_failed", "reasoning_truncated"), reference="reference_tables.json",
    data_module=f"{__package__}.data", sample_module=f"{__package__}.sample", demo_tasks=("vr_bench",), aliases=("vr_bench",))

# `process_results_<task>` and `aggregate_<metric>`, made from the declaration; the first
# aggregation of a task writes the judge accounting beside the run's results.
__getattr__ = DeclaredHooks(BENCHMARK, judge_accounting_writer("vrbench"))
