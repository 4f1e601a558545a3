"""The official VCR-Bench demo: stored judge replies in, the official scores out.

`tests/reference/vcr_bench/input.json` (the official `eval_code/input.json`) holds 4 model
responses; `output.json` the judge replies the official scripts got for them. A local judge
serves exactly those replies, keyed by the exact prompt the official code would send (built
here straight from the committed official prompt files), so the test also proves the prompts
we send are byte-identical. Expected
(the official demo, tests/reference/vcr_bench/output.json): perception P/R 100/37.5, reasoning P/R 75/100, overall P 75, R 50, F1 60,
accuracy 75.
"""

from __future__ import annotations

import json
import math

import pytest
from bench_scoring import score_records
from lmms_video_reasoning.judges import LocalJudgeServer
from reference_data import prompt_dir

EXPECTED = {
    "perception_precision": 100.0, "perception_recall": 37.5,
    "reasoning_precision": 75.0, "reasoning_recall": 100.0,
    "cot_precision": 75.0, "cot_recall": 50.0, "cot_f1": 60.0,
    "accuracy": 75.0, "judge_failed": 0, "model_failed": 0,
}


def _read(name: str) -> str:
    with open(prompt_dir("vcr_bench") / f"{name}.txt", encoding="utf-8", newline="") as handle:
        return handle.read()


def official_prompts(item: dict) -> dict[str, str]:
    """The four prompts the official code builds for one demo item, from the official prompt files."""
    q, r, a, steps = item["question"], item["response"], item["answer"], item["reasoning"]
    return {
        "extract": _read("Answer_Extraction_Prompt_part1")
        + _read("Answer_Extraction_Prompt_part2").format(question=q, response=r),
        "score": _read("Answer_Scoring_Prompt_part1")
        + _read("Answer_Scoring_Prompt_part2").format(question=q, extract_answer=item["extract_answer"], gt_answer=a),
        "recall": _read("Recall_Evaluation_Prompt").format(question=q, answer=a, solution=r, gt_annotation=str(steps)),
        "precision": _read("Precision_Evaluation_Prompt").format(question=q, solution=r, gt_annotation=str(steps)),
    }


class StoredReplies:
    """Responder: the stored reply for a byte-exact official prompt; anything else is recorded."""

    def __init__(self, reference_dir):
        outputs = json.loads((reference_dir / "vcr_bench" / "output.json").read_text())
        self.replies: dict[str, str] = {}
        for item in outputs:
            built = official_prompts(item)
            stored = {"extract": item["extract_answer"], "score": item["answer_scoring"],
                      "recall": item["recall_eval"], "precision": item["precision_eval"]}
            for kind, prompt in built.items():
                self.replies[prompt] = stored[kind]
        self.unexpected: list[str] = []
        self.served: list[str] = []

    def __call__(self, body: dict) -> str:
        assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
        assert body["temperature"] == 0 and body["max_tokens"] == 2048
        prompt = body["messages"][0]["content"]
        if prompt not in self.replies:
            self.unexpected.append(prompt)
            return "UNEXPECTED PROMPT"
        self.served.append(prompt)
        return self.replies[prompt]


@pytest.fixture
def judge_env(reference_dir, monkeypatch):
    responder = StoredReplies(reference_dir)
    with LocalJudgeServer(responder) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", "off")
        yield responder, server


def demo_records(reference_dir):
    from lmms_video_reasoning.vcr_bench import data
    from lmms_video_reasoning.vcr_bench import task as vcr_task

    items = json.loads((reference_dir / "vcr_bench" / "input.json").read_text())
    docs = data.records_to_docs(items, "input.json")
    return [vcr_task.build_record(doc, item["response"]) for doc, item in zip(docs, items)]


def test_list_repr_of_reference_steps_reaches_the_judge(reference_dir, judge_env):
    from lmms_video_reasoning.vcr_bench import benchmark as binding

    responder, _server = judge_env
    score_records(binding, demo_records(reference_dir))
    recall_prompts = [p for p in responder.served if p.startswith("You are an expert system for verifying")]
    assert any("[Ground Truth Information]\n['1. 0:08-0:30, a series of explosions" in p for p in recall_prompts)


def test_official_demo_scores_in_process(reference_dir, judge_env):
    from lmms_video_reasoning.vcr_bench import benchmark as binding

    responder, server = judge_env
    metrics = score_records(binding, demo_records(reference_dir))
    assert responder.unexpected == [], "a prompt differs from the official one:\n" + responder.unexpected[0][:2000]
    # 4 extractions + 4 scorings + 4 recalls + 4 precisions, each byte-identical to the official prompt.
    assert server.request_count == 16 and len(set(responder.served)) == 16
    for name, value in EXPECTED.items():
        assert metrics[name] == pytest.approx(value), name
    assert metrics["perception_f1"] == pytest.approx(2 * 100 * 37.5 / 137.5)
    assert metrics["accuracy_tsr"] == pytest.approx(200 / 3) and metrics["accuracy_vpa"] == 100.0
    assert metrics["accuracy_mc"] == 100.0 and metrics["accuracy_open"] == pytest.approx(200 / 3)
    assert metrics["accuracy_short"] == 100.0 and metrics["accuracy_medium"] == pytest.approx(200 / 3)
    assert math.isnan(metrics["accuracy_long"]) and math.isnan(metrics["accuracy_ftr"])


@pytest.mark.slow
def test_official_demo_through_lmms_eval(reference_dir, judge_env, tmp_path):
    """The same numbers from `python -m lmms_eval --tasks vcr_cot --model vr_replay` (no video needed)."""
    from lmms_cli import metric, run_lmms_eval

    responder, _server = judge_env
    items = json.loads((reference_dir / "vcr_bench" / "input.json").read_text())
    root = tmp_path / "vcr_bench"
    (root / "v1" / "videos").mkdir(parents=True)
    annotations = [{k: v for k, v in item.items() if k != "response"} for item in items]
    (root / "v1" / "videos" / "meta_info_video.json").write_text(json.dumps(annotations))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"task": "vcr_cot", "id": i["id"], "response": i["response"]}) + "\n" for i in items))
    results = run_lmms_eval("vcr_cot", tmp_path / "out", model_args=f"predictions={predictions}",
                            env={"VCR_BENCH_ROOT": str(root)})
    assert responder.unexpected == []
    for name, value in EXPECTED.items():
        assert metric(results, "vcr_cot", name) == pytest.approx(value), name
    accounting = json.loads(next((tmp_path / "out").rglob("*_judge_accounting_vcr_bench.json")).read_text())
    assert accounting["stats"]["calls"] == 16 and accounting["stats"]["failures"] == 0


def test_prompt_files_are_verbatim_copies():
    """The installed package reads the committed official prompts (pinned by sha256 in the manifest)."""
    from lmms_video_reasoning.vcr_bench import prompts

    names = sorted(p.stem for p in prompt_dir("vcr_bench").glob("*.txt"))
    assert len(names) == 6
    for name in names:
        assert prompts.official_prompt(name).encode("utf-8") == (prompt_dir("vcr_bench") / f"{name}.txt").read_bytes()
