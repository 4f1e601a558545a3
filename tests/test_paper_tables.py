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

from lmms_video_reasoning.utils.results import report, report_tables, score
from lmms_video_reasoning.vcr_bench import scoring as vcr
from lmms_video_reasoning.vcr_bench.scoring import BACKGROUND, PERCEPTION, REASONING
from score_report_support import sample_judge, score_predictions


def step(kind: str, judgment: str) -> dict:
    return {"type": kind, "judgment": judgment}


def vcr_outcome(correct: bool | None, recall: list | None, precision: list | None) -> dict:
    return {"correct": correct, "recall_steps": recall, "precision_steps": precision}


ALL_MATCHED = [step(PERCEPTION, "Matched"), step(REASONING, "Matched")]


# ---------------------------------------------------------------- VCR-Bench Table 10


def test_a_full_cot_score_needs_every_reference_step_matched_and_no_wrong_step():
    assert vcr.fully_correct_cot(ALL_MATCHED, ALL_MATCHED) is True  # every step matched
    # a Redundant response step does not count against precision (Matched / (Matched + Wrong))
    assert vcr.fully_correct_cot(ALL_MATCHED, ALL_MATCHED + [step(REASONING, "Redundant")]) is True
    assert vcr.fully_correct_cot(ALL_MATCHED + [step(PERCEPTION, "Unmatched")], ALL_MATCHED) is False  # recall 2/3
    assert vcr.fully_correct_cot(ALL_MATCHED, ALL_MATCHED + [step(PERCEPTION, "Wrong")]) is False  # precision 2/3
    # Background Review steps are outside the overall ratios unless include_background
    with_background = ALL_MATCHED + [step(BACKGROUND, "Unmatched")]
    assert vcr.fully_correct_cot(with_background, ALL_MATCHED) is True
    assert vcr.fully_correct_cot(with_background, ALL_MATCHED, include_background=True) is False
    # an undefined ratio (only Redundant response steps) is not a full score; a missing judgment is unknown
    assert vcr.fully_correct_cot(ALL_MATCHED, [step(REASONING, "Redundant")]) is False
    assert vcr.fully_correct_cot(None, ALL_MATCHED) is None and vcr.fully_correct_cot(ALL_MATCHED, None) is None


def test_full_cot_share_is_over_the_correct_answers_with_a_cot_judgment():
    outcomes = [
        vcr_outcome(True, ALL_MATCHED, ALL_MATCHED),  # correct, full CoT
        vcr_outcome(True, ALL_MATCHED, ALL_MATCHED + [step(REASONING, "Wrong")]),  # correct, a wrong step
        vcr_outcome(True, ALL_MATCHED + [step(PERCEPTION, "Unmatched")], ALL_MATCHED),  # correct, a missed step
        vcr_outcome(True, None, ALL_MATCHED),  # correct, recall judgment failed: left out
        vcr_outcome(False, ALL_MATCHED, ALL_MATCHED),  # full CoT but a wrong answer: not in the share at all
        vcr_outcome(None, None, None),  # no verdict: not a correct answer
    ]
    share = vcr.full_cot_share(outcomes)
    assert (share.full, share.correct, share.unjudged) == (1, 3, 1)
    assert share.share == pytest.approx(100 / 3)


def test_full_cot_share_edge_cases():
    every_step = vcr.full_cot_share([vcr_outcome(True, ALL_MATCHED, ALL_MATCHED)] * 4)
    assert (every_step.share, every_step.full, every_step.correct) == (100.0, 4, 4)
    none_correct = vcr.full_cot_share([vcr_outcome(False, ALL_MATCHED, ALL_MATCHED), vcr_outcome(None, None, None)])
    assert math.isnan(none_correct.share) and (none_correct.full, none_correct.correct, none_correct.unjudged) == (0, 0, 0)
    unjudged = vcr.full_cot_share([vcr_outcome(True, None, None)])
    assert math.isnan(unjudged.share) and unjudged.unjudged == 1
    assert math.isnan(vcr.full_cot_share([]).share)


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
    samples = [json.loads(line) for line in score.samples_path(scored.files["vcr"], "vcr_cot").read_text().splitlines() if line.strip()]
    accuracy = scored.results["vcr"]["results"]["vcr_cot"]["accuracy,none"]
    assert correct == round(accuracy * len(samples) / 100) > 0  # every correct answer has its CoT judged here
    assert row[2] == report_tables.fmt(100 * full / correct)
    assert any(r[0] == "GPT-4o" and r[2] == "49.9" for r in table["rows"])  # the paper's rows beside it
    assert "Table 10" in (tmp_path / "report.md").read_text()
