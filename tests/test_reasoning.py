"""Thinking models: reasoning judges see the reasoning, parsers read the final answer, the same
in the lmms-eval run and when `lmms-vr score` re-scores its samples.

Unit tests pin the split of each reply form (and that `stripped` is exactly what lmms-eval's
own `strip_reasoning_tags` gives). The end-to-end tests run each benchmark once through
`python -m lmms_eval` with default flags and replay replies in every thinking form, judged by
a local judge whose replies depend on whether the reasoning reached it.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lmms_cli import metric, run_lmms_eval, samples_files

from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.judges.local_server import last_user_text
from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.lmms import responses
from lmms_video_reasoning.utils.tools.sample import env_for, write_sample

MARK = "REASONING-MARK"  # only ever written inside the reasoning of the replay replies below

# (reply, final answer as parsers read it, truncated)
FORMS = [
    ("<think>A? C? The answer is A.</think>\n\nThe answer is B.", "The answer is B.", False),
    ("prefilled opening tag, options A C D</think>\n\nB", "B", False),
    ("<think>maybe <answer>C</answer></think>\n<answer> D </answer>", "D", False),
    ("<think>first</think>between<think>second</think>\nfinal", "final", False),
    ("<analysis>A or C</analysis>E", "E", False),
    ("<think>the answer is A, or C", "", True),
    ("<think>done</think>then <think>cut off", "", True),
    ("<think>only reasoning, answer A</think>", "<think>only reasoning, answer A</think>", False),  # empty final: whole reply
    ("plain answer B", "plain answer B", False),
    ("", "", False),
]


@pytest.mark.parametrize("reply, final, truncated", FORMS)
def test_split_reads_the_final_answer_of_each_form(reply, final, truncated):
    assert responses.reply_record(reply)["final_answer"] == final
    assert responses.split_reply(reply)[1] is truncated


@pytest.mark.parametrize("reply", [form[0] for form in FORMS] + ["a</think>b</think>c", "</think>x<think>y</think>z", "x <THINK>y</THINK>"])
def test_stripped_is_what_lmms_eval_gives_by_default(reply):
    from lmms_eval.api.reasoning import strip_reasoning_tags

    default_tags = json.loads('[["<think>", "</think>"], ["<analysis>", "</analysis>"]]')  # lmms-eval's CLI default
    assert responses.strip_reasoning(reply) == strip_reasoning_tags(reply, default_tags)


def in_effect(reply: str) -> dict:
    """`reply_record` under the options the plugin resolves: the variables set in their place."""
    return responses.reply_record(reply, settings.task_settings((responses.REASONING_VARIABLE, responses.PREFILLED_VARIABLE)))


def test_setting_is_checked_and_stamped_in_the_record(monkeypatch):
    monkeypatch.setenv(responses.REASONING_ENV, "stripped")
    record = {"response": "<think>why</think>B", **in_effect("<think>why</think>B")}
    assert record["judged_reply"] == "stripped" and responses.judged_text(record) == "B"
    monkeypatch.setenv(responses.REASONING_ENV, "summary")
    with pytest.raises(ValueError, match="LMMS_VR_REASONING='summary'.*full, stripped"):
        in_effect("B")
    monkeypatch.delenv(responses.REASONING_ENV)
    record = {"response": "<think>why</think>B", **in_effect("<think>why</think>B")}
    assert responses.judged_text(record) == "<think>why</think>B"
    # A record logged before these fields existed is read the same way.
    assert responses.final_answer({"response": "<think>A</think>C"}) == "C"
    assert responses.reasoning_truncated({"response": "<think>A"})


def test_prefilled_template_makes_a_reply_without_closing_tag_truncated(monkeypatch):
    cut_off = "The user asks which shape comes first. Option A could be"
    assert in_effect(cut_off)["reasoning_truncated"] is False  # by default: a plain answer
    monkeypatch.setenv(responses.PREFILLED_ENV, "1")
    assert in_effect(cut_off) == {**in_effect(cut_off), "final_answer": "", "reasoning_truncated": True}
    assert in_effect("reasoning</think>\n\nB")["final_answer"] == "B"
    assert in_effect("")["reasoning_truncated"] is False  # an empty reply is not a cut-off thought
    assert in_effect("[LMMS_EVAL_REQUEST_FAILED after 5 retries] timeout")["reasoning_truncated"] is False  # model_failed
    monkeypatch.setenv(responses.PREFILLED_ENV, "maybe")
    with pytest.raises(ValueError, match="LMMS_VR_THINK_PREFILLED"):
        in_effect("B")


def test_final_answer_wins_over_option_letters_in_the_reasoning():
    """Whole-reply parsing would take a letter from the reasoning; each benchmark reads the final one."""
    from lmms_video_reasoning.cg_bench import scoring as cg_scoring
    from lmms_video_reasoning.vrbench.scoring import extract_mcq_answer

    vr_reply = "<think>Option A? <Answer> C looks right. Final answer: D</think>\n\n<Step 1> the door opens\n<Answer> B"
    assert extract_mcq_answer(vr_reply) == "C"  # the official cascade on the whole reply
    assert extract_mcq_answer(responses.final_answer({"response": vr_reply})) == "B"
    cg_reply = '<think>```json\n{"result": "A"}\n``` or E</think>\n```json\n{"result": "C"}\n```'
    assert cg_scoring.parse_mcq(cg_reply, "A")[0] is True  # the reasoning's JSON would answer for it
    assert cg_scoring.parse_mcq(responses.final_answer({"response": cg_reply}), "A")[0] is False


# ---------------------------------------------------------------- end to end


def _write_predictions(path: Path, task: str, replies: dict[str, str]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for sample_id, reply in replies.items():
            handle.write(json.dumps({"task": task, "id": sample_id, "response": reply}) + "\n")
    return path


def _lmms_vr_score(path: Path, out: Path, env: dict) -> dict:
    """`lmms-vr score PATH --out OUT` in a subprocess; the results it wrote."""
    proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", str(path), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def _predict_only_copy(samples: Path, folder: Path, metrics: set[str]) -> Path:
    """The file `--predict_only` writes for the same run: no records, and `filtered_resps`
    holding what lmms-eval's default `--reasoning_tags` would have left (so re-scoring must
    read the raw `resps`)."""
    from lmms_eval.api.reasoning import strip_reasoning_tags

    tags = [["<think>", "</think>"], ["<analysis>", "</analysis>"]]
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / samples.name
    with out.open("w", encoding="utf-8") as handle:
        for line in samples.read_text(encoding="utf-8").splitlines():
            row = {key: value for key, value in json.loads(line).items() if key not in metrics}
            raw = row.pop("resps", row["filtered_resps"])  # lmms-eval drops `resps` when it equals `filtered_resps`
            row["filtered_resps"] = strip_reasoning_tags(raw, tags)
            if row["filtered_resps"] != raw:
                row["resps"] = raw
            handle.write(json.dumps(row) + "\n")
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == pytest.approx(b)


def _assert_rescored_equal(results: dict, rescored: dict, task: str) -> None:
    run = {k: v for k, v in results["results"][task].items() if k.endswith(",none") and "_stderr" not in k}
    again = {k: v for k, v in rescored["results"][task].items() if k.endswith(",none")}
    assert "reasoning_truncated,none" in run and set(run) <= set(again)
    for name, value in run.items():
        assert _same(value, again[name]), (task, name, value, again[name])


def _env(sample: Path, benchmark: str, server: LocalJudgeServer) -> dict:
    import os

    return {**os.environ, **env_for(sample, (benchmark,)), "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_CACHE": "off"}


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory):
    out = tmp_path_factory.mktemp("reasoning_sample")
    write_sample(out, ("vcr_bench", "vrbench", "cg_bench"))
    return out


# VCR-Bench docs 0-3 of the sample: ftr "B", vtc "10", vtg "[8, 30]", tsg "[56,96,104,144]".
VCR_REPLIES = {
    "0": f"<think>{MARK}-0: the blue square (A) or the magenta one (C)? The answer is A.</think>\n\nThe answer is B.",
    "1": f"{MARK}-1: I count 9 flashes, maybe 11. The answer is 9.</think>\n\nThe answer is 10.",
    "2": f"<think>{MARK}-2: it moves from 0 s to 5 s? The answer is [0, 5].</think><answer>The answer is [8, 30].</answer>",
    "3": f"<think>{MARK}-3: at 5.0 s the circle is at The answer is [56,96,104,144]. Let me double-check",
}


def _vcr_judge(body: dict) -> str:
    """Extraction reads the last "The answer is X." of the reply it is shown; recall and
    precision match only when the reasoning is in the request."""
    from lmms_video_reasoning.vcr_bench import prompts

    content = last_user_text(body)
    if content.startswith(prompts.official_prompt("Answer_Extraction_Prompt_part1")):
        response = content.rsplit("\nAnswer: ", 1)[-1]
        found = re.findall(r"The answer is (.+?)\.(?=\s|<|$)", response)
        return found[-1] if found else "Z"
    if content.startswith(prompts.official_prompt("Answer_Scoring_Prompt_part1")):
        model = content.split("[Model Answer]: ")[-1].split("\n")[0].strip()
        standard = content.split("[Standard Answer]: ")[-1].split("\n")[0].strip()
        return "1" if model == standard else "0"
    recall = content.startswith(prompts.official_prompt("Recall_Evaluation_Prompt")[:60])
    seen = MARK in content
    judgment = ("Matched" if seen else "Unmatched") if recall else ("Matched" if seen else "Wrong")
    steps = [{"step": "s", "step_type": kind, "judgment": judgment} for kind in ("Video Description Steps", "Logical Inference Steps")]
    return "```json\n" + json.dumps(steps) + "\n```"


@pytest.mark.slow
def test_vcr_bench_judges_see_the_reasoning_in_the_run_and_when_rescored(sample_root, tmp_path):
    from lmms_video_reasoning.vcr_bench import prompts, scoring

    predictions = _write_predictions(tmp_path / "preds.jsonl", "vcr_cot", VCR_REPLIES)
    with LocalJudgeServer(_vcr_judge) as server:
        env = _env(sample_root, "vcr_bench", server)
        results = run_lmms_eval("vcr_cot", tmp_path / "run", model_args=f"predictions={predictions}", env=env,
                                extra=["--limit", str(len(VCR_REPLIES))])
        in_run = [last_user_text(body) for body in server.requests]
        # Extraction, recall and precision were all shown the whole reply; the truncated one
        # got no extraction call (it has no answer), its reasoning was still rated.
        assert all(f"{MARK}-" in text for text in in_run if not text.startswith(prompts.official_prompt("Answer_Scoring_Prompt_part1")))
        extraction_head = prompts.official_prompt("Answer_Extraction_Prompt_part1")
        extracted = {re.search(rf"{MARK}-(\d)", t)[1] for t in in_run if t.startswith(extraction_head)}
        assert extracted == {"0", "1", "2"}
        assert metric(results, "vcr_cot", "accuracy") == pytest.approx(75.0)
        assert metric(results, "vcr_cot", "reasoning_truncated") == 1
        assert metric(results, "vcr_cot", "cot_recall") == pytest.approx(100.0)
        assert metric(results, "vcr_cot", "cot_precision") == pytest.approx(100.0)
        assert metric(results, "vcr_cot", "judge_failed") == 0
        [samples] = samples_files(tmp_path / "run", "vcr_cot")
        logged = [json.loads(line)["accuracy"] for line in samples.read_text().splitlines()]
        assert {r["sample_id"]: r["response"] for r in logged} == VCR_REPLIES  # the raw reply, byte for byte

        # `lmms-vr score` on the --log_samples folder and on a --predict_only file: the in-run metrics.
        _assert_rescored_equal(results, _lmms_vr_score(tmp_path / "run", tmp_path / "scored.json", env), "vcr_cot")
        predict_only = _predict_only_copy(samples, tmp_path / "predict_only", set(scoring.METRICS))
        _assert_rescored_equal(results, _lmms_vr_score(predict_only, tmp_path / "scored_po.json", env), "vcr_cot")

        # LMMS_VR_REASONING=stripped: the judges see the reply without its reasoning.
        stripped = _lmms_vr_score(predict_only, tmp_path / "stripped.json", {**env, "LMMS_VR_REASONING": "stripped"})
        # Only the truncated reply still shows its reasoning (lmms-eval leaves an unclosed block as is).
        assert stripped["results"]["vcr_cot"]["cot_recall,none"] == pytest.approx(25.0)
        assert stripped["results"]["vcr_cot"]["accuracy,none"] == pytest.approx(75.0)
        assert stripped["results"]["vcr_cot"]["reasoning_truncated,none"] == 1


# VRBench docs: qa1 Event Attribution "B", qa2 Counting "C", qa3 Event Prediction "D", qa4 Hypothetical "A".
VR_REPLIES = {
    "syn_story_01_qa1": f"<think>{MARK}-1: <Answer> C fits? Final answer: A</think>\n\n<Step 1> The door opens.\n<Answer> B",
    "syn_story_01_qa2": f"{MARK}-2: counting gives <Answer> A</think>\n\n<Answer> C",
    "syn_story_01_qa3": f"<think>{MARK}-3: A, B or C?</think><answer>D</answer>",
    "syn_story_01_qa4": f"<think>{MARK}-4: so far <Answer> A, but wait",
}


def _vr_judge(body: dict) -> str:
    """Full marks when the model's reasoning is in the request, zero otherwise."""
    score = 10 if MARK in last_user_text(body) else 0
    tags = ("step_matching", "relevance", "logical_consistency", "factual_accuracy", "process_clarity", "clarity")
    return "\n".join(f"<{tag}>{score}</{tag}>" for tag in tags)


@pytest.mark.slow
def test_vrbench_rates_the_reasoning_and_reads_the_final_letter(sample_root, tmp_path):
    predictions = _write_predictions(tmp_path / "preds.jsonl", "vr_bench", VR_REPLIES)
    with LocalJudgeServer(_vr_judge) as server:
        env = _env(sample_root, "vrbench", server)
        results = run_lmms_eval("vr_bench", tmp_path / "run", model_args=f"predictions={predictions}", env=env,
                                extra=["--limit", str(len(VR_REPLIES))])
        assert len(server.requests) == 4 and all(MARK in last_user_text(body) for body in server.requests)
        # qa1-qa3 right from their final letters (the reasoning's letters would make qa1 and qa2
        # wrong); qa4 ends inside its reasoning: wrong, counted, its reasoning still rated.
        assert metric(results, "vr_bench", "mcq_accuracy") == pytest.approx(75.0)
        assert metric(results, "vr_bench", "reasoning_truncated") == 1
        assert "end inside an open reasoning block" in results["_log"]  # and the run says so
        assert metric(results, "vr_bench", "process_score") == pytest.approx(100.0)
        _assert_rescored_equal(results, _lmms_vr_score(tmp_path / "run", tmp_path / "scored.json", env), "vr_bench")


# CG-Bench (mini sample): qid 9000 answer "A", 9001 "B", clue interval [[20, 40]] for both.
CG_MCQ_REPLIES = {
    "9000:long": f'<think>{MARK}: ```json\n{{"result": "C"}}\n``` no, D?</think>\n\n```json\n{{"result": "A"}}\n```',
    "9000:clue": f'{MARK}: A fits best, or E</think>\n```json\n{{"result": "C"}}\n```',  # wrong final, right letter in the reasoning
    "9000:grounding": f'<think>{MARK}: [[0, 5]]?</think><answer>```json\n{{"result": [[20, 40]]}}\n```</answer>',
    "9001:long": f"<think>{MARK}: the answer is B but",  # truncated: wrong, not parsed
    "9001:clue": '```json\n{"result": "B"}\n```',
    "9001:grounding": f"<think>{MARK}: between [[20, 40]]</think>",  # empty final part: the whole reply is read
}
CG_OPEN_REPLIES = {
    "9000": f'<think>{MARK}: Blue? Green?</think>\n\n```json\n{{"result": "Red"}}\n```',
    "9001": f"{MARK}: it moved?</think>It stays still",
    "9002": f"<think>{MARK}: the colour was",
    **{qid: "Blue" for qid in ("9003", "9004", "9005")},  # plain replies (the run's --limit covers six)
}


def _cg_judge(body: dict) -> str:
    """The open-ended judge gets the parsed prediction: right unless the reasoning leaked into it."""
    return '```json\n{"result": 0}\n```' if MARK in json.dumps(body) else '```json\n{"result": 1}\n```'


@pytest.mark.slow
def test_cg_bench_parses_the_final_answer_and_counts_truncated_replies(sample_root, tmp_path):
    predictions = tmp_path / "preds.jsonl"
    _write_predictions(predictions, "cg_bench_mcq", CG_MCQ_REPLIES)
    with predictions.open("a", encoding="utf-8") as handle:
        for qid, reply in CG_OPEN_REPLIES.items():
            handle.write(json.dumps({"task": "cg_bench_open", "id": qid, "response": reply}) + "\n")
    with LocalJudgeServer(_cg_judge) as server:
        env = _env(sample_root, "cg_bench", server)
        results = run_lmms_eval("cg_bench_mcq,cg_bench_open", tmp_path / "run", model_args=f"predictions={predictions}", env=env,
                                extra=["--limit", str(len(CG_MCQ_REPLIES))])
        mcq = lambda name: metric(results, "cg_bench_mcq", name)  # noqa: E731
        assert mcq("long_acc") == pytest.approx(50.0)  # 9000 right from its final JSON, 9001 truncated
        assert mcq("clue_acc") == pytest.approx(50.0)  # 9000 wrong: the reasoning's "A" does not count
        assert mcq("miou") == pytest.approx(100.0)  # the reasoning's [[0, 5]] is not read
        assert mcq("acc_at_iou") == pytest.approx(50.0)
        assert mcq("reasoning_truncated") == 1 and mcq("parse_failed") == 0
        assert len(server.requests) == 5  # the truncated open reply is not judged
        assert metric(results, "cg_bench_open", "oe_acc") == pytest.approx(100 * 5 / 6)
        assert metric(results, "cg_bench_open", "reasoning_truncated") == 1
        rescored = _lmms_vr_score(tmp_path / "run", tmp_path / "scored.json", env)
        for task in ("cg_bench_mcq", "cg_bench_open"):
            _assert_rescored_equal(results, rescored, task)
