"""The papers' tables beyond the headline metrics (issue 37), each computed from a run's records and
judge outcomes: VCR-Bench Table 10 (a fully correct CoT given a correct answer); CG-Bench acc.@IoU at
tau = 0 (Table 4, Table 10, Fig. 7), the 12 sub-categories and the text-only row of Table 3.

Hand-computed cases for every new function (edge cases: no correct answer, every CoT step matched,
a tIoU of exactly 0), then the report's tables on the sample benchmark scored by `lmms-vr score`."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest

from lmms_video_reasoning.cg_bench import report as cg_report
from lmms_video_reasoning.cg_bench import scoring as cg
from lmms_video_reasoning.cg_bench.report import NOT_RECORDED, breakdown
from lmms_video_reasoning.cg_bench.task import Outcome, task_metrics
from lmms_video_reasoning.utils.results import report, report_tables, samples_io
from lmms_video_reasoning.utils.results.report_bootstrap import Sampled
from lmms_video_reasoning.utils.results.report_stats import TaskStats
from lmms_video_reasoning.utils.results.samples_io import OUTCOME_KEY
from lmms_video_reasoning.vcr_bench import report as vcr_report
from lmms_video_reasoning.vcr_bench.scoring import BACKGROUND, PERCEPTION, REASONING
from score_report_support import sample_judge, score_predictions


def step(kind: str, judgment: str) -> dict:
    return {"type": kind, "judgment": judgment}


def vcr_outcome(correct: bool | None, recall: list | None, precision: list | None) -> dict:
    return {"correct": correct, "recall_steps": recall, "precision_steps": precision}


ALL_MATCHED = [step(PERCEPTION, "Matched"), step(REASONING, "Matched")]


# ---------------------------------------------------------------- VCR-Bench Table 10


def test_a_full_cot_score_needs_every_reference_step_matched_and_no_wrong_step():
    assert vcr_report.fully_correct_cot(ALL_MATCHED, ALL_MATCHED) is True  # every step matched
    # a Redundant response step does not count against precision (Matched / (Matched + Wrong))
    assert vcr_report.fully_correct_cot(ALL_MATCHED, ALL_MATCHED + [step(REASONING, "Redundant")]) is True
    assert vcr_report.fully_correct_cot(ALL_MATCHED + [step(PERCEPTION, "Unmatched")], ALL_MATCHED) is False  # recall 2/3
    assert vcr_report.fully_correct_cot(ALL_MATCHED, ALL_MATCHED + [step(PERCEPTION, "Wrong")]) is False  # precision 2/3
    # Background Review steps are outside the overall ratios unless include_background
    with_background = ALL_MATCHED + [step(BACKGROUND, "Unmatched")]
    assert vcr_report.fully_correct_cot(with_background, ALL_MATCHED) is True
    assert vcr_report.fully_correct_cot(with_background, ALL_MATCHED, include_background=True) is False
    # an undefined ratio (only Redundant response steps) is not a full score; a missing judgment is unknown
    assert vcr_report.fully_correct_cot(ALL_MATCHED, [step(REASONING, "Redundant")]) is False
    assert vcr_report.fully_correct_cot(None, ALL_MATCHED) is None and vcr_report.fully_correct_cot(ALL_MATCHED, None) is None


def test_full_cot_share_is_over_the_correct_answers_with_a_cot_judgment():
    outcomes = [
        vcr_outcome(True, ALL_MATCHED, ALL_MATCHED),  # correct, full CoT
        vcr_outcome(True, ALL_MATCHED, ALL_MATCHED + [step(REASONING, "Wrong")]),  # correct, a wrong step
        vcr_outcome(True, ALL_MATCHED + [step(PERCEPTION, "Unmatched")], ALL_MATCHED),  # correct, a missed step
        vcr_outcome(True, None, ALL_MATCHED),  # correct, recall judgment failed: left out
        vcr_outcome(False, ALL_MATCHED, ALL_MATCHED),  # full CoT but a wrong answer: not in the share at all
        vcr_outcome(None, None, None),  # no verdict: not a correct answer
    ]
    share = vcr_report.full_cot_share(outcomes)
    assert (share.full, share.correct, share.unjudged) == (1, 3, 1)
    assert share.share == pytest.approx(100 / 3)


def test_full_cot_share_edge_cases():
    every_step = vcr_report.full_cot_share([vcr_outcome(True, ALL_MATCHED, ALL_MATCHED)] * 4)
    assert (every_step.share, every_step.full, every_step.correct) == (100.0, 4, 4)
    none_correct = vcr_report.full_cot_share([vcr_outcome(False, ALL_MATCHED, ALL_MATCHED), vcr_outcome(None, None, None)])
    assert math.isnan(none_correct.share) and (none_correct.full, none_correct.correct, none_correct.unjudged) == (0, 0, 0)
    unjudged = vcr_report.full_cot_share([vcr_outcome(True, None, None)])
    assert math.isnan(unjudged.share) and unjudged.unjudged == 1
    assert math.isnan(vcr_report.full_cot_share([]).share)


# ---------------------------------------------------------------- the report, on the sample benchmark's scored runs


@pytest.fixture(scope="module")
def scored(sample_dir, sample_env, tmp_path_factory):
    """`lmms-vr score` results (with per-sample outcomes) of the sample's replay replies."""
    out = tmp_path_factory.mktemp("paper_tables")
    predictions = sample_dir / "predictions.jsonl"
    runs = {"vcr": ("vcr_cot",), "cg": ("cg_bench_mcq", "cg_bench_open", "cg_bench_blind")}
    with sample_judge(out / "judge.sqlite", sample_env):
        results = {name: score_predictions(predictions, tasks, out / f"{name}.json") for name, tasks in runs.items()}
    return SimpleNamespace(dir=out, files={name: out / f"{name}.json" for name in runs}, results=results)


def table_titled(data: dict, benchmark: str, prefix: str) -> dict:
    [table] = [t for t in data["sections"][benchmark]["tables"] if t["title"].startswith(prefix)]
    return table


def test_report_table10_is_the_share_of_full_cots_among_the_runs_correct_answers(scored, tmp_path):
    data = report.build_report([f"m={scored.files['vcr']}"], tmp_path, n=0)
    table = table_titled(data, "vcr_bench", "Table 10")
    [row] = [r for r in table["rows"] if r[0].startswith(report_tables.MINE)]
    [note] = [n for n in table["notes"] if n.startswith("m: ") and "correct answers" in n]
    full, correct = map(int, re.match(r"m: (\d+) of the (\d+) correct answers", note).groups())
    samples = [json.loads(line) for line in samples_io.samples_path(scored.files["vcr"], "vcr_cot").read_text().splitlines() if line.strip()]
    accuracy = scored.results["vcr"]["results"]["vcr_cot"]["accuracy,none"]
    assert correct == round(accuracy * len(samples) / 100) > 0  # every correct answer has its CoT judged here
    assert row[2] == report_tables.fmt(100 * full / correct)
    assert any(r[0] == "GPT-4o" and r[2] == "49.9" for r in table["rows"])  # the paper's rows beside it
    assert "Table 10" in (tmp_path / "report.md").read_text()


# ---------------------------------------------------------------- CG-Bench: acc.@IoU at tau = 0, sub-categories, the text-only row


def cg_outcome(qid: int, mode: str, value: float | None, sub_category: str = "Entity Perception") -> Outcome:
    kind = cg.question_kind(sub_category) if sub_category else "perception"
    return Outcome(qid, mode, value, False, 600, "News", kind, sub_category=sub_category)


def test_acc_at_iou_at_tau_0_needs_an_overlap_not_just_an_interval():
    def acc_at_iou0(pairs):  # of one question per (long answer correct, grounding tIoU) pair
        answers = [cg_outcome(q, mode, value) for q, (ok, iou) in enumerate(pairs) for mode, value in (("long", float(ok)), ("grounding", iou))]
        return cg_report.with_acc_at_iou0(joined({}, answers)).point["acc_at_iou0"]

    assert acc_at_iou0([(True, 0.0), (True, 1e-9), (True, 0.5), (False, 0.8), (True, 0.0)]) == pytest.approx(100 * 2 / 5)  # `>` 0
    assert acc_at_iou0([(True, 0.0)] * 3) == 0.0  # every interval misses the clue
    assert acc_at_iou0([(False, 1.0)]) == 0.0  # no correct answer
    assert math.isnan(acc_at_iou0([]))
    # the existing metric is unchanged: the mean over 0.1-0.5 with `>=` (official code)
    answers = [cg_outcome(1, "long", 1.0), cg_outcome(1, "grounding", 0.1), cg_outcome(2, "long", 1.0), cg_outcome(2, "grounding", 0.0)]
    assert task_metrics(answers, whole=False)["acc_at_iou"] == pytest.approx(100 * (1 / 2) / 5)


def test_the_text_only_acc_at_iou_joins_the_blind_answers_only():
    blind = joined({"blind_acc": 50.0}, [cg_outcome(1, "blind", 1.0), cg_outcome(2, "blind", 0.0), cg_outcome(3, "blind", None),
                                         cg_outcome(1, "long", 0.0)])
    text = joined({}, [cg_outcome(1, "grounding", 0.3), cg_outcome(2, "grounding", 0.6), cg_outcome(3, "grounding", 0.9)])
    # question 1 right (tIoU 0.3 >= 0.1, 0.2, 0.3), question 2 wrong; an unparsed blind answer has no pair, the long answer none
    assert cg_report.blind_values(blind, text)[4] == pytest.approx(100 * 3 / 5 / 2)


def test_breakdown_by_the_twelve_sub_categories_in_the_papers_order():
    answers = [cg_outcome(1, "long", 1.0, "Hallucination"), cg_outcome(2, "long", 0.0, "Entity Perception"),
               cg_outcome(3, "long", 1.0, "Entity Perception"), cg_outcome(4, "long", 1.0, "Time Cognition"),
               cg_outcome(5, "long", 1.0, "")]  # an outcome stored before the sub-category was kept
    groups = breakdown(answers)["sub_category"]
    assert list(groups) == ["Entity Perception", "Time Cognition", "Hallucination", NOT_RECORDED]
    assert groups["Entity Perception"]["long_acc"] == 50.0 and groups["Entity Perception"]["questions"] == 2
    assert len(cg.SUB_CATEGORIES) == 12 and {cg.question_kind(s) for s in cg.SUB_CATEGORIES} == set(cg.KINDS)


def test_the_annotations_sub_categories_are_the_papers_twelve(reference_dir):
    """The real mini-split sample's `sub_category` values are among the 12 (tests/reference/cg_bench)."""
    [annotations] = [p for p in (reference_dir / "cg_bench").glob("*.json") if "mini" in p.name]
    records = json.loads(annotations.read_text(encoding="utf-8"))
    assert {record["sub_category"] for record in records} <= set(cg.SUB_CATEGORIES)


def test_outcomes_keep_the_sub_category_of_their_record(sample_dir, sample_env):
    from lmms_video_reasoning.cg_bench import benchmark as binding
    from lmms_video_reasoning.cg_bench import data, task
    from score_report_support import environment

    with environment(sample_env):
        records = data.records_at(split="mini")
        docs = task.build_docs(records, "long", "mini")
        built = [binding.build_record(doc, "A") for doc in docs]
        scores, answers = binding.scored_records(built, {"judge": False}, None)
    assert [a.sub_category for a in answers] == [r["sub_category"] for r in records]
    assert sum(group["questions"] for group in scores["breakdown"]["sub_category"].values()) == len(records)


def joined(point: dict, answers: list[Outcome] | None = None) -> TaskStats:
    """A joined CG-Bench row as the report builds it: the metrics and, optionally, its outcomes."""
    row = TaskStats(point=point)
    if answers is not None:
        row.sampled = Sampled("cg_bench", [{"qid": a.qid, "mode": a.mode} for a in answers], [dict(vars(a)) for a in answers], None)
    return row


def test_the_text_only_row_has_every_cell_the_runs_text_only_tasks_give():
    blind = joined({"blind_acc": 50.0}, [cg_outcome(1, "blind", 1.0), cg_outcome(2, "blind", 0.0)])
    # only the blind task: its accuracy twice, their CRR (100), nothing else
    assert cg_report.blind_values(blind, None) == [50.0, 50.0, None, None, None, 100.0, None]
    text = joined({"miou": 20.0, "rec_at_iou": 30.0, "oe_acc": 10.0}, [cg_outcome(1, "grounding", 0.3), cg_outcome(2, "grounding", 0.6)])
    values = cg_report.blind_values(blind, text)
    # acc.@IoU: question 1 (right, tIoU 0.3 >= 0.1, 0.2, 0.3), question 2 wrong: (3/5) / 2 questions
    assert values == [50.0, 50.0, 20.0, 30.0, pytest.approx(100 * 3 / 5 / 2), 100.0, 10.0]
    assert math.isnan(cg_report.blind_values(blind, joined({"miou": 20.0}))[4])  # no outcomes: no joined acc.@IoU
    assert math.isnan(cg_report.blind_values(joined({"blind_acc": 0.0}), None)[5])  # CRR of a 0 accuracy is undefined


def test_acc_at_iou0_of_a_joined_row_comes_from_its_outcomes():
    answers = [cg_outcome(1, "long", 1.0), cg_outcome(1, "grounding", 0.0), cg_outcome(2, "long", 1.0), cg_outcome(2, "grounding", 0.05)]
    assert cg_report.with_acc_at_iou0(joined({}, answers)).point["acc_at_iou0"] == 50.0  # question 1's tIoU is exactly 0
    assert math.isnan(cg_report.with_acc_at_iou0(joined({"acc_at_iou": 3.0})).point["acc_at_iou0"])  # no samples file


def test_report_cg_tables_acc_at_iou0_sub_categories_and_blind_row(scored, tmp_path):
    data = report.build_report([f"m={scored.files['cg']}"], tmp_path, n=50)
    samples = [json.loads(line) for line in samples_io.samples_path(scored.files["cg"], "cg_bench_mcq").read_text().splitlines() if line.strip()]
    answers = [Outcome(**sample[OUTCOME_KEY]) for sample in samples]  # stored by `lmms-vr score`
    long = {a.qid: a.value for a in answers if a.mode == "long" and a.value is not None}
    ground = {a.qid: a.value for a in answers if a.mode == "grounding" and a.value is not None}
    both = long.keys() & ground.keys()
    expected = 100 * sum(long[q] == 1.0 and ground[q] > 0 for q in both) / len(both)

    table4 = table_titled(data, "cg_bench", "Table 4")
    [row] = [r for r in table4["rows"] if r[0].startswith(report_tables.MINE)]
    assert row[0].endswith("m · the task defaults") and row[table4["columns"].index("acc.@IoU (τ=0)")] == report_tables.fmt(expected)
    assert any(r[1] == "paper, Table 4 · F+S+ST+FT" and r[5] == "26.7" for r in table4["rows"])
    assert any(note.startswith(report_tables.MISMATCH + "m · the task defaults:") and "the rows are on 1,000 questions" in note
               for note in table4["notes"])
    assert data["sections"]["cg_bench"]["joined"]["m|mini"]["acc_at_iou0"] == pytest.approx(expected)

    sub = table_titled(data, "cg_bench", "Breakdown by sub-category")
    shown = [r[1] for r in sub["rows"]]
    expected_order = [name for name in cg.SUB_CATEGORIES if name in shown]
    assert shown == expected_order and len(shown) > 3
    assert sum(int(r[2]) for r in sub["rows"]) == len(long.keys() | ground.keys())

    table3 = table_titled(data, "cg_bench", "Table 3")
    [blind] = [r for r in table3["rows"] if r[0].endswith("m (blind)")]
    accuracy = scored.results["cg"]["results"]["cg_bench_blind"]["blind_acc,none"]
    assert blind[2:] == [report_tables.fmt(accuracy)] * 2 + ["–"] * 3 + ["100.0", "–"]


# ---------------------------------------------------------------- task options: VCR-Bench Table 9 (frame count)


@pytest.fixture
def vcr_docs(sample_dir, monkeypatch):
    from lmms_video_reasoning.vcr_bench import data as vcr_data

    monkeypatch.setenv("VCR_BENCH_ROOT", str(sample_dir / "vcr_bench"))
    monkeypatch.delenv("VCR_BENCH_VISUAL_MODE", raising=False)
    return {doc["id"]: doc for doc in vcr_data.records_at()}


@pytest.mark.parametrize("count", [16, 32, 128])
def test_vcr_frame_count_sets_the_frames_and_their_times(vcr_docs, count):
    from lmms_video_reasoning.vcr_bench import frames as vcr_frames
    from lmms_video_reasoning.vcr_bench import benchmark as vcr_binding

    doc = vcr_docs[15]  # 330 s at 1 fps: 330 frames
    kwargs = {"visual_mode": "frames", "frame_count": count}
    shown = vcr_binding.doc_to_visual(doc, kwargs)
    assert len(shown) == count
    times = vcr_frames.timestamps(vcr_frames.indices(330, count), 1.0)
    assert vcr_binding.doc_to_text(doc, kwargs).startswith(
        f"The video is given as {count} frames, taken at these times: " + ", ".join(f"{t:.1f}s" for t in times) + ".")
    assert len(vcr_binding.doc_to_messages(doc, kwargs)[0]["content"]) == count + 1
    # the default is the paper's 64
    assert len(vcr_binding.doc_to_visual(doc, {"visual_mode": "frames"})) == 64


def test_vcr_frame_count_outside_frames_mode_or_not_a_count_is_an_error(vcr_docs):
    from lmms_video_reasoning.utils.core.roots import DataError
    from lmms_video_reasoning.vcr_bench import benchmark as vcr_binding

    doc = vcr_docs[15]
    for mode in ("video", "one_frame", "none"):
        with pytest.raises(DataError, match=f"frame_count 16 is set but visual_mode is '{mode}'.*max_num_frames"):
            vcr_binding.doc_to_visual(doc, {"visual_mode": mode, "frame_count": 16})
    for bad in (0, -4, "32", 16.0, True):
        with pytest.raises(DataError, match="frame_count .* must be a positive integer"):
            vcr_binding.doc_to_text(doc, {"visual_mode": "frames", "frame_count": bad})


def test_report_table9_sets_each_frame_count_task_in_its_column(tmp_path):
    """Table 9 from the `vcr_cot_frames<N>` tasks of one run (their results only: no samples file)."""
    from lmms_video_reasoning.utils.results.report_runs import Run
    from lmms_video_reasoning.vcr_bench import report as vcr_report

    accuracy = {16: 12.5, 32: 30.0, 128: 36.0}  # no 64-frame task in this run: "–", never 0
    run = Run("qwen", [tmp_path / "r.json"], sizes={f"vcr_cot_frames{n}": 1034 for n in accuracy})
    stats = {("qwen", f"vcr_cot_frames{n}"): TaskStats(point={"accuracy": value}) for n, value in accuracy.items()}
    section = vcr_report.section([run], stats, tmp_path, 0, 0)
    [table9] = [t for t in section.tables if t.title.startswith("Table 9")]
    assert table9.columns == ["Model", "Source", "16 frames", "32 frames", "64 frames", "128 frames"]
    [mine] = [cells for cells, is_mine in table9.rows if is_mine]
    assert mine[2:] == ["12.5", "30.0", "–", "36.0"]
    assert ["Qwen2.5-VL-7B", "paper, Table 9", "13.5", "33.7", "36.9", "37.2"] in [cells for cells, _ in table9.rows]
    assert not any(t.title.startswith(("Table 2", "Table 3", "Table 10")) for t in section.tables)  # no vcr_cot run


# ---------------------------------------------------------------- task options: CG-Bench Table 4 / 10 modalities, the text-only row


@pytest.fixture
def park(sample_dir, monkeypatch):
    """The sample's 180 s park video (2 fps, with subtitles): its long-video question."""
    from lmms_video_reasoning.cg_bench import data as cg_data
    from lmms_video_reasoning.cg_bench import task as cg_task

    monkeypatch.setenv("CGBENCH_ROOT", str(sample_dir / "cg_bench"))
    return next(d for d in cg_task.build_docs(cg_data.records_at(split="mini"), "long", "mini") if d["video_uid"] == "cgsample_park")


def cg_prompt(doc: dict, subtitles: str = "", frame_times: str = "") -> str:
    from lmms_video_reasoning.cg_bench import prompts

    return prompts.model_prompt(doc["mode"], doc["question"], doc["choices"], subtitles, frame_times)


FOUR_TIMES = "A total of 4 frames are sampled. Their corresponding timestamps are:\n\n22.0, 67.0, 112.0, 156.5\n\n"  # long_frames 4
SUBS_HEAD = "The subtitles of the video are as follows:\n\n"
TIMED = SUBS_HEAD + "[18.0, 42.0] Look, a ball rolls in\n[58.0, 92.0] Now something slides across\n\n"
UNTIMED = SUBS_HEAD + "Look, a ball rolls in\nNow something slides across\n\n"


@pytest.mark.parametrize("modality,kwargs,subtitles,frame_times", [
    ("F", {"subtitles": False, "frame_times": False}, "", ""),
    ("F+FT", {"subtitles": False}, "", FOUR_TIMES),
    ("F+S", {"subtitle_times": False, "frame_times": False}, UNTIMED, ""),
    ("F+S+ST", {"frame_times": False}, TIMED, ""),
    ("F+S+FT", {"subtitle_times": False}, UNTIMED, FOUR_TIMES),
    ("F+S+ST+FT", {}, TIMED, FOUR_TIMES),
])
def test_cg_every_table4_modality_is_a_task_setting(park, modality, kwargs, subtitles, frame_times):
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding

    settings = {"visual_mode": "frames", "long_frames": 4, **kwargs}
    assert cg_binding.doc_to_text(park, settings) == cg_prompt(park, subtitles, frame_times), modality
    assert len(cg_binding.doc_to_visual(park, settings)) == 4


def test_cg_subtitles_only_and_text_only_show_no_visual(park, sample_dir):
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding
    from lmms_video_reasoning.utils.media.subtitles import load_cues

    frames_span = {"visual_mode": "none", "long_frames": 4, "subtitle_times": False}  # S (128 frames), here 4
    video_span = {**frames_span, "subtitle_span": "video"}  # S (full-video)
    text_only = {"visual_mode": "none", "subtitles": False}  # the text-only row
    every_line = [cue.text.replace("\n", " ") for cue in load_cues(sample_dir / "cg_bench" / "cg_subtitles" / "cgsample_park.srt")]
    assert len(every_line) > 2  # more subtitles in the video than at the 4 frames' times
    expected = {id(frames_span): cg_prompt(park, UNTIMED), id(video_span): cg_prompt(park, SUBS_HEAD + "\n".join(every_line) + "\n\n"),
                id(text_only): cg_prompt(park)}
    for settings in (frames_span, video_span, text_only):
        assert cg_binding.doc_to_text(park, settings) == expected[id(settings)]
        assert cg_binding.doc_to_visual(park, settings) == []
        [turn] = cg_binding.doc_to_messages(park, settings)
        assert turn["content"] == [{"type": "text", "text": expected[id(settings)]}]
    timed_video = cg_binding.doc_to_text(park, {**video_span, "subtitle_times": True})
    assert "[18.0, 42.0] Look, a ball rolls in" in timed_video and timed_video.count("\n[") == len(every_line)


@pytest.mark.parametrize("kwargs,message", [
    ({"subtitle_times": "no"}, "subtitle_times must be true or false"),
    ({"subtitle_span": "scene"}, r"subtitle_span must be one of \('frames', 'video'\)"),
    ({"visual_mode": "audio"}, r"visual_mode must be one of \('video', 'frames', 'none'\)"),
])
def test_cg_bad_modality_settings_name_the_setting(park, kwargs, message):
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding

    with pytest.raises(ValueError, match=message):
        cg_binding.doc_to_text(park, kwargs)


def test_report_tables_4_and_10_row_per_modality_and_the_text_only_cells(tmp_path):
    """The report's CG tables from the modality tasks' results (no samples file: acc.@IoU at tau = 0
    says what it needs) and the text-only tasks' cells in the blind row of Table 3."""
    from lmms_video_reasoning.utils.results.report_runs import Run

    point = {"long_acc": 50.0, "clue_acc": 62.5, "miou": 4.0, "rec_at_iou": 5.0, "acc_at_iou": 2.0, "crr": 80.0}
    stats = {("gpt", "cg_bench_mcq_f_s"): TaskStats(point=dict(point)), ("gpt", "cg_bench_open_f_s"): TaskStats(point={"oe_acc": 30.0}),
             ("gpt", "cg_bench_long_s_video"): TaskStats(point={"long_acc": 33.0}),
             ("gpt", "cg_bench_full_mcq_f"): TaskStats(point=dict(point, long_acc=40.0)),
             ("gpt", "cg_bench_blind"): TaskStats(point={"blind_acc": 20.0}),
             ("gpt", "cg_bench_grounding_text"): TaskStats(point={"miou": 0.5, "rec_at_iou": 0.7}),
             ("gpt", "cg_bench_open_text"): TaskStats(point={"oe_acc": 3.0})}
    section = cg_report.section([Run("gpt", [tmp_path / "r.json"])], stats, tmp_path, 0, 0)
    tables = {t.title.split(":")[0]: t for t in section.tables if t.title.startswith("Table")}

    def mine(table):
        return {cells[0].removeprefix(report_tables.MINE): cells[2:] for cells, is_mine in table.rows if is_mine}

    assert mine(tables["Table 4"]) == {"gpt · F+S": ["62.5", "50.0", "4.00", "–", "80.0", "30.0"],
                                       "gpt · S (full-video)": ["–", "33.0", "–", "–", "–", "–"]}
    assert "gpt · F+S: acc.@IoU (τ=0) needs the run's per-sample outcomes as it scored them" in tables["Table 4"].notes
    assert mine(tables["Table 10"]) == {"gpt · full · F": ["62.5", "40.0", "4.00", "–", "80.0", "–"]}
    assert any("data mismatch: the rows are on 12,129 questions" in note for note in tables["Table 10"].notes)
    # Table 3: the blind task's accuracy and CRR, the text-only tasks' mIoU, rec.@IoU and OE-acc
    assert mine(tables["Table 3"])["gpt (blind)"] == ["20.0", "20.0", "0.50", "0.70", "–", "100.0", "3.0"]


def test_the_text_only_acc_at_iou_never_joins_the_grounding_answers_that_saw_the_video():
    blind = joined({"blind_acc": 100.0}, [cg_outcome(1, "blind", 1.0), cg_outcome(2, "blind", 1.0),
                                          cg_outcome(1, "grounding", 0.9), cg_outcome(2, "grounding", 0.9)])  # cg_bench_mcq's, with video
    text = joined({"miou": 1.0}, [cg_outcome(1, "grounding", 0.0)])  # the text-only task answered question 1 only
    assert cg_report.blind_values(blind, text)[4] == 0.0  # one pair: question 1 with its text-only tIoU 0


def test_the_ablation_tasks_the_reports_read_are_declared_with_their_inputs():
    """Every task name the report's ablation tables look for is a declared task (so `--tasks` finds
    it), and its inputs are the ablation's: Table 9's frame counts, Table 4's modalities, the
    text-only row's no-visual tasks (whose documents need no media check)."""
    from lmms_video_reasoning.cg_bench import benchmark as cg_binding, report as cg_report
    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.vcr_bench import report as vcr_report

    vcr = {t.name: t for t in registry.get("vcr_bench").tasks}
    for name in vcr_report.FRAME_TASKS:
        assert vcr[name].model_kwargs["default"]["frame_count"] == int(name.removeprefix("vcr_cot_frames"))
        assert vcr[name].model_kwargs["default"]["visual_mode"] == "frames" and set(vcr[name].model_kwargs) == {"default"}
    cg = {t.name: t for t in registry.get("cg_bench").tasks}
    for prefix in ("cg_bench", "cg_bench_full"):
        for suffix, inputs in cg_binding.MODALITY_INPUTS.items():
            assert suffix in cg_report.MODALITIES
            for kind in ("mcq", "open"):
                kwargs = cg[f"{prefix}_{kind}{suffix}"].model_kwargs["default"]
                assert kwargs["visual_mode"] == "frames" and kwargs["subtitles"] == ("_s" in suffix)
                assert kwargs["frame_times"] == suffix.endswith("_ft")
        for suffix in ("_s_frames", "_s_video"):
            task = cg[f"{prefix}_long{suffix}"]
            assert task.model_kwargs["default"]["visual_mode"] == "none" and task.process_docs.endswith("_text")
        for kind in ("grounding", "open"):
            task = cg[f"{prefix}_{kind}{cg_report.TEXT_ONLY}"]
            assert task.model_kwargs["default"]["subtitles"] is False and task.process_docs.endswith("_text")
            assert callable(getattr(cg_binding, task.process_docs))
    groups = {g.name: g for g in registry.get("cg_bench").groups}
    assert not any(name.endswith(tuple(cg_report.MODALITIES)) for name in groups["cg_bench"].tasks)  # ablations are not in the group
