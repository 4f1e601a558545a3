"""lmms-eval hooks of the VCR-Bench tasks (`tasks/vcr_bench/*.yaml` point here).

Inputs (README.md, "Tasks"; paper Table 5 for the ablations), chosen per task and model
by the task setting `visual_mode` in `lmms_eval_specific_kwargs`:
  video      the video (models with native video input; the default, as in the paper):
             simple models get a proxy clip of exactly the frames their own path keeps
             (`utils/lmms/model_video.py`), chat models the path; `LMMS_VR_VIDEO_INPUT=path` = paths
  frames     64 frames at floor(i * total / 64), with their times round(idx / fps, 1) s
             written before the question (frame-based models: `openai`, `gpt4v`)
  one_frame  the middle frame only (`vcr_one_frame`)
  none       no visual (`vcr_text_only`)
`VCR_BENCH_VISUAL_MODE=video|frames` overrides video/frames for `vcr_cot` and `vcr_direct`.
`chain_of_thought: false` drops the CoT instruction (`vcr_direct`).

Scoring: `process_results` only builds a self-contained record (never calls a judge, never
raises; lmms-eval's failure placeholder is marked `model_failed`, never judged); the first
aggregation of a task judges all records in one batch (`score_records`, memoised by content
so the metric aggregations share one batch) and writes the judge
accounting next to the results. `score_records` is also what `lmms-vr score` calls on
records read back from a `--log_samples` file, and `record_from_response` builds the same
record from a doc and a raw response (`--predict_only` files, replay predictions).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.judges import failure_share, get_judge
from lmms_video_reasoning.utils.lmms import model_video
from lmms_video_reasoning.utils.lmms import preflight
from lmms_video_reasoning.utils.media import video
from lmms_video_reasoning.utils.results.aggregation import ScoreOnce, judge_accounting_writer, keep_outcomes
from lmms_video_reasoning.utils.results.resampling import SampleColumns, column, ratio
from lmms_video_reasoning.utils.core.roots import DataError, data_root, docs_dataset
from lmms_video_reasoning.utils.lmms.responses import failure_reason, reasoning_truncated, reply_fields, warn_truncated
from lmms_video_reasoning.vcr_bench import data, frames, judging, prompts, scoring

log = logging.getLogger("lmms_video_reasoning.vcr_bench")

VISUAL_MODES = ("video", "frames", "one_frame", "none")
VISUAL_MODE_ENV = "VCR_BENCH_VISUAL_MODE"
FRAME_COUNT = 64  # paper Sec. 3.1 and Table 9
INCLUDE_BACKGROUND_ENV = "VCR_BENCH_INCLUDE_BACKGROUND"
LENIENT_VERDICT_ENV = "VCR_BENCH_LENIENT_VERDICT"
OFFICIAL_REVERSED_ENV = "VCR_BENCH_OFFICIAL_REVERSED"
VISUAL_MODE = settings.declare(VISUAL_MODE_ENV, "choice", "", "what the video tasks show: the video, frames, one frame "
                               "or nothing", choices=VISUAL_MODES, scoring=True)
INCLUDE_BACKGROUND = settings.declare(INCLUDE_BACKGROUND_ENV, "bool", False, "overall CoT counts Background Review "
                                      "steps (paper-era code)", scoring=True)
LENIENT_VERDICT = settings.declare(LENIENT_VERDICT_ENV, "bool", False, "the scoring judge's first standalone 0/1 "
                                   "decides instead of the exact reply '1'", scoring=True)
OFFICIAL_REVERSED = settings.declare(OFFICIAL_REVERSED_ENV, "bool", False, "reversed intervals / boxes enter the IoU "
                                     "rule as given, as officially", scoring=True)


# ---------------------------------------------------------------- documents


def load_docs(dataset=None) -> Any:
    """`process_docs`: replace the one-row placeholder with the benchmark's documents (checked
    before generation: `utils/lmms/preflight.py`)."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), _MEDIA, judge="vcr_bench")


def load_docs_no_visual(dataset=None) -> Any:
    """`process_docs` of `vcr_text_only`: the same documents; no video is needed."""
    return preflight.task_load("vcr_bench", lambda: docs_dataset(data.load_records()), judge="vcr_bench")


_MEDIA = preflight.MediaCheck(data.VCR_BENCH, lambda: data.media_kinds(data_root(data.VCR_BENCH), data.load_records()))


# ---------------------------------------------------------------- task settings


def task_settings(kwargs: dict | None) -> tuple[str, bool]:
    """(visual_mode, chain_of_thought) from the task's `lmms_eval_specific_kwargs`."""
    kwargs = kwargs or {}
    mode = kwargs.get("visual_mode", "video")
    try:
        override = VISUAL_MODE.read()
    except settings.SettingError as error:
        raise DataError(f"VCR-Bench visual mode: {error}") from None
    if override and mode in ("video", "frames"):
        mode = override
    if mode not in VISUAL_MODES:
        raise DataError(f"VCR-Bench visual_mode {mode!r} (task setting or {VISUAL_MODE_ENV}) is not one of {VISUAL_MODES}")
    return mode, bool(kwargs.get("chain_of_thought", True))


def frame_plan(doc: dict, mode: str) -> tuple[Path, list[int], list[float]]:
    """(video, frame indices, their times) for the frame modes, from the container (no decoding)."""
    path = data.video_file(doc)
    info = video.probe(path)
    if mode == "one_frame":
        indices = [info.total_frames // 2]
    else:
        indices = frames.indices(info.total_frames, FRAME_COUNT)
    return path, indices, frames.timestamps(indices, info.fps)


# ---------------------------------------------------------------- model inputs


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """The model's prompt; in `frames` mode it opens with the frame times (probe only)."""
    mode, chain_of_thought = task_settings(lmms_eval_specific_kwargs)
    preamble = prompts.frame_times_preamble(frame_plan(doc, mode)[2]) if mode == "frames" else ""
    return prompts.model_prompt(doc["question"], chain_of_thought, preamble)


def doc_to_visual(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list:
    """`[video_path]`, the sampled frames (PIL), the middle frame, or nothing, per visual_mode."""
    mode, _ = task_settings(lmms_eval_specific_kwargs)
    if mode == "none":
        return []
    if mode == "video":
        # The model's own frames in a proxy clip (utils.model_video; `LMMS_VR_VIDEO_INPUT=path`
        # hands over the path). Either way the file is decoded here first: native-video models
        # swallow a decode error and answer from the text alone, so a broken file fails here.
        return [model_video.video_for_model(data.video_file(doc), on_broken=lambda _path: data.checked_video_file(doc))]
    path, indices, _times = frame_plan(doc, mode)
    return list(video.read_frames(path, indices))


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Chat models: the visuals of `doc_to_visual` as video / image parts, then the prompt."""
    visuals = doc_to_visual(doc, lmms_eval_specific_kwargs)
    content = [{"type": "video", "url": item} if isinstance(item, str) else {"type": "image", "url": item} for item in visuals]
    content.append({"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)})
    return [{"role": "user", "content": content}]


# ---------------------------------------------------------------- per-sample records


def record_from_response(doc: dict, response: Any, chain_of_thought: bool = True) -> dict:
    """Everything needed to score one sample later; cheap, JSON-ready, never raises.

    lmms-eval's placeholder for a request that got no answer ("[LMMS_EVAL_REQUEST_FAILED ...]")
    is kept as the response but marked `model_failed` with its first line as
    `model_failure_reason`: it is never judged (see `scoring.model_failed`). The response is
    the raw reply; `utils.responses.reply_fields` adds its final answer, whether its reasoning
    was cut off (then the answer is wrong without a judge call) and which text the judges see.
    """
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    reason = failure_reason(text)
    failure = {"model_failed": reason is not None, "model_failure_reason": reason}
    reasoning = reply_fields(text)
    try:
        return {
            "sample_id": str(doc["sample_id"]),
            "id": int(doc["id"]),
            "dimension_code": doc["dimension_code"],
            "duration": float(doc["duration"]),
            "duration_bucket": data.duration_bucket(float(doc["duration"])),
            "multiple_choice": bool(doc["multiple_choice"]),
            "question": doc["question"],
            "answer": doc["answer"],
            "reasoning": list(doc["reasoning"]),
            "response": text,
            **reasoning,
            "score_cot": chain_of_thought,
            "error": None,
            **failure,
        }
    except Exception as error:  # noqa: BLE001 - a bad doc must become a failed sample, not a retry loop
        return {
            "sample_id": str(doc.get("sample_id", "?")), "id": doc.get("id"), "dimension_code": doc.get("dimension_code"),
            "duration": None, "duration_bucket": None, "multiple_choice": doc.get("multiple_choice"),
            "question": doc.get("question"), "answer": doc.get("answer"), "reasoning": [], "response": text, **reasoning,
            "score_cot": chain_of_thought, "error": f"{type(error).__name__}: {error}", **failure,
        }


def _results_for(doc: dict, results: Sequence, chain_of_thought: bool) -> dict:
    record = record_from_response(doc, results[0] if results else "", chain_of_thought)
    names = scoring.METRICS if chain_of_thought else scoring.ACCURACY_METRICS + scoring.COUNT_METRICS
    return {name: record for name in names}


def process_results(doc: dict, results: Sequence) -> dict:
    """`vcr_cot`: one record under every metric name (accuracy and CoT metrics)."""
    return _results_for(doc, results, chain_of_thought=True)


def process_results_accuracy_only(doc: dict, results: Sequence) -> dict:
    """Ablations (paper Table 5 reports accuracy only): no recall / precision judging."""
    return _results_for(doc, results, chain_of_thought=False)


# ---------------------------------------------------------------- scoring


def resolve_settings(settings: dict | None = None) -> dict:
    """Scoring settings, from the argument or the environment (`=1`): `include_background`
    (`VCR_BENCH_INCLUDE_BACKGROUND`: overall CoT counts Background Review steps, as the
    paper-era code did; default off as the current code); `lenient_verdict`
    (`VCR_BENCH_LENIENT_VERDICT`: the scoring judge's first standalone 0/1 decides instead of
    the official exact reply "1"); `official_reversed` (`VCR_BENCH_OFFICIAL_REVERSED`: reversed
    interval bounds / box corners enter the IoU rule as given, as officially)."""
    merged = {"include_background": INCLUDE_BACKGROUND.read(), "lenient_verdict": LENIENT_VERDICT.read(),
              "official_reversed": OFFICIAL_REVERSED.read()}
    merged.update(settings or {})
    return merged


def score_records(records: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """All VCR-Bench metrics (0-100; `judge_failed`, `model_failed` counts) of a task's records.

    Without a judge nothing can be scored, not even accuracy (the answer is extracted by the
    judge): every judge-based metric is NaN and one log line says how many samples were left
    unscored; `model_failed` needs no judge and is still counted.
    """
    settings = resolve_settings(settings)
    records = list(records)
    chain_of_thought = any(record.get("score_cot", True) for record in records)
    warn_truncated(log, "VCR-Bench", count_truncated(records), len(records))
    judge = get_judge("vcr_bench")
    if judge is None:
        log.warning("VCR-Bench: no judge configured, so none of the %d samples is scored: accuracy and CoT metrics "
                    "are NaN (answers are extracted by the judge). Configure one (LMMS_VR_JUDGE_BASE_URL or "
                    "OPENAI_API_KEY) or re-score the --log_samples file later with `lmms-vr score`.", len(records))
        return {**dict.fromkeys(scoring.METRICS, math.nan), "model_failed": count_model_failures(records),
                "reasoning_truncated": count_truncated(records)}
    outcomes = judging.judge_records(records, judge, chain_of_thought, settings)
    keep_outcomes(records, settings, outcomes)  # the standard error reuses them
    judge.log_summary()
    metrics, judged = metrics_from_outcomes(records, outcomes, settings), judged_count(records)
    if failure_share.too_many_failed(metrics["judge_failed"], judged):
        log.error(failure_share.explain("VCR-Bench", metrics["judge_failed"], judged))
    return metrics


def metrics_from_outcomes(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> dict[str, float]:
    """The metrics of judged records (`judging.judge_records` outcomes); no judge call."""
    settings = resolve_settings(settings)
    metrics = scoring.accuracy_metrics(records, [outcome["correct"] for outcome in outcomes])
    if any(record.get("score_cot", True) for record in records):
        metrics.update(scoring.cot_metrics([o["recall_steps"] for o in outcomes], [o["precision_steps"] for o in outcomes],
                                           settings["include_background"]))
    else:
        metrics.update(dict.fromkeys(scoring.COT_METRICS, math.nan))
    metrics["judge_failed"] = sum(bool(outcome["errors"]) for outcome in outcomes)
    # Past the failure share, the judged metrics would measure the judge's outage, not the model.
    failure_share.withhold(metrics, [m for m in scoring.METRICS if m not in scoring.COUNT_METRICS],
                           metrics["judge_failed"], judged_count(records))
    # Not a task metric (no YAML entry): how many verdicts the other reading of the scoring
    # judge's reply would change (`lenient_verdict`); in `lmms-vr score` output and the logs.
    metrics["verdict_lenient_changed"] = judging.lenient_changed(outcomes)
    metrics["model_failed"] = count_model_failures(records)
    metrics["reasoning_truncated"] = count_truncated(records)
    return metrics


def metric_columns(records: Sequence[dict], outcomes: Sequence[dict], settings: dict | None = None) -> SampleColumns:
    """`metrics_from_outcomes` over arrays, for the bootstrap (`utils/results/resampling.py`):
    each sample's contribution once (group membership and verdict, its recall and precision
    ratios per kind from `scoring.recall_ratios` / `precision_ratios`, its failure flags), and
    the metrics from their sums with the same arithmetic (micro accuracy per group, macro means
    where the ratio is defined, F1 of the means, the failure share on a whole run)."""
    import numpy as np

    settings = resolve_settings(settings)
    correct = np.array([outcome["correct"] is True for outcome in outcomes], dtype=float)
    members = {
        "accuracy": [True] * len(records),
        **{f"accuracy_{code}": [r["dimension_code"] == code for r in records] for code in scoring.DIMENSION_CODES},
        **{f"accuracy_{bucket}": [r["duration_bucket"] == bucket for r in records] for bucket in scoring.DURATION_BUCKETS},
        "accuracy_mc": [bool(r["multiple_choice"]) for r in records],
        "accuracy_open": [not r["multiple_choice"] for r in records],
    }
    counted: dict[str, np.ndarray] = {}
    for name, member in members.items():
        counted[f"n:{name}"] = column(member)
        counted[f"right:{name}"] = counted[f"n:{name}"] * correct
    for side, steps_key, ratios_of in (("recall", "recall_steps", scoring.recall_ratios), ("precision", "precision_steps", scoring.precision_ratios)):
        ratios = [None if o[steps_key] is None else ratios_of(o[steps_key], settings["include_background"]) for o in outcomes]
        for kind in scoring.COT_KINDS:
            values = [None if r is None else r[kind] for r in ratios]
            counted[f"{side}_sum:{kind}"] = column(0.0 if v is None else v for v in values)
            counted[f"{side}_n:{kind}"] = column(v is not None for v in values)
    counted["score_cot"] = column(record.get("score_cot", True) for record in records)
    counted["judge_failed"] = column(bool(outcome["errors"]) for outcome in outcomes)
    counted["verdict_lenient_changed"] = column(judging.lenient_changed([outcome]) for outcome in outcomes)
    counted["model_failed"] = column(scoring.model_failed(record) for record in records)
    counted["reasoning_truncated"] = column(map(reasoning_truncated, records))
    counted["samples"] = np.ones(len(records))
    return SampleColumns(counted, _metrics_from_totals)


def _metrics_from_totals(totals, whole: bool) -> dict:
    """The metrics of `metrics_from_outcomes` from column sums (one value per row)."""
    import numpy as np

    metrics = {name: ratio(100.0 * totals[f"right:{name}"], totals[f"n:{name}"]) for name in scoring.ACCURACY_METRICS}
    scored = totals["score_cot"] > 0  # any sample with CoT scoring (else the CoT metrics are NaN)
    for kind in scoring.COT_KINDS:
        r = ratio(totals[f"recall_sum:{kind}"], totals[f"recall_n:{kind}"])
        p = ratio(totals[f"precision_sum:{kind}"], totals[f"precision_n:{kind}"])
        f1 = np.where(np.isnan(p) | np.isnan(r), np.nan, ratio(2 * p * r, p + r))  # 0/0 -> 0, as scoring.f1
        f1 = np.where(~np.isnan(p) & ~np.isnan(r) & (p + r == 0), 0.0, f1)
        prefix = scoring._COT_PREFIX[kind]
        for part, value in (("recall", r), ("precision", p), ("f1", f1)):
            metrics[f"{prefix}_{part}"] = np.where(scored, value * 100.0, np.nan)
    metrics["judge_failed"] = totals["judge_failed"]
    if whole:  # the failure share, per row as `failure_share.withhold` decides it on a run
        judged = totals["samples"] - totals["model_failed"]
        withheld = np.array([failure_share.too_many_failed(f, int(j)) for f, j in zip(metrics["judge_failed"], judged)], dtype=bool)
        for name in scoring.METRICS:
            if name not in scoring.COUNT_METRICS and name in metrics:
                metrics[name] = np.where(withheld, np.nan, metrics[name])
    metrics["verdict_lenient_changed"] = totals["verdict_lenient_changed"]
    metrics["model_failed"] = totals["model_failed"]
    metrics["reasoning_truncated"] = totals["reasoning_truncated"]
    return metrics


def judged_count(records: Sequence[dict]) -> int:
    """Samples that needed judging (lmms-eval's failure placeholder is never judged)."""
    return len(records) - count_model_failures(records)


def count_model_failures(records: Sequence[dict]) -> int:
    """How many samples got lmms-eval's failure placeholder instead of a model answer."""
    return sum(scoring.model_failed(record) for record in records)


def count_truncated(records: Sequence[dict]) -> int:
    """How many replies ended inside an open reasoning block (wrong for accuracy, not extracted)."""
    return sum(map(reasoning_truncated, records))


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
