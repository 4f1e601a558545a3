"""The judging cost estimate (`lmms-vr score --estimate`; an lmms-eval run makes none) against a real judged run.

The judged run: the sample benchmark's replay predictions scored through a real local judge
server on 127.0.0.1 whose `usage` counts prompt tokens as a vLLM server counts a ChatML judge
(`tests/batch_runner.chatml_prompt_tokens`: the chat template's tokens, not the estimate's
OpenAI framing formula). The estimate is made first, from the same (empty) cache.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import subprocess
import sys

import pytest

from batch_runner import chatml_prompt_tokens
from lmms_video_reasoning.judges.tokens import image_tokens, tokenizer_for
from lmms_video_reasoning.utils.results import batch_judging, samples_io, score
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from score_report_support import environment

TASKS = ("vcr_cot", "vr_bench", "cg_bench_open")


def test_openai_tokenizers_load_with_no_network(tmp_path):
    """tiktoken itself cannot load o200k_base here (it downloads it); ours reads the bundled,
    hash-checked file and leaves TIKTOKEN_CACHE_DIR as it was."""
    code = (
        "import os, tiktoken\n"
        "try:\n    tiktoken.get_encoding('o200k_base'); alone = 'tiktoken-alone: ok'\n"
        "except Exception as e:\n    alone = 'tiktoken-alone: fails'\n"
        "from lmms_video_reasoning.judges.tokens import tokenizer_for\n"
        "t = tokenizer_for('gpt-4o-2024-08-06')\n"
        "print(t.method, t.text_tokens('hello world'), t.request_tokens([{'role': 'user', 'content': 'hello world'}]))\n"
        "print(os.environ.get('TIKTOKEN_CACHE_DIR'))\n"
        "print(alone)\n"
    )
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    # No route anywhere: a proxy on a closed port, and tiktoken's own cache folder empty.
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(empty), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert lines[0] == "tiktoken o200k_base 2 9", result.stderr[-2000:]  # OpenAI's framing: 3 + role 1 + 2 + 3
    assert lines[1] == str(empty), "the user's TIKTOKEN_CACHE_DIR is restored"
    assert lines[2] == "tiktoken-alone: fails", "without the bundled file tiktoken needs the network"
    assert list(empty.iterdir()) == [], "nothing written into the user's tiktoken cache"


def test_tokenizer_per_model_and_images():
    assert tokenizer_for("gpt-4-0613").method == "tiktoken cl100k_base"
    assert tokenizer_for("gpt-4o-mini").method == "tiktoken o200k_base"
    deepseek = tokenizer_for("deepseek-chat")
    assert not deepseek.exact and deepseek.method.startswith("approximation: tiktoken o200k_base")
    assert tokenizer_for("gpt-4o").text_tokens("The quick brown fox jumps over the lazy dog.") == 10
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (1024, 1024)).save(buffer, format="png")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    assert image_tokens("gpt-4o", {"url": url, "detail": "low"}) == 85
    assert image_tokens("gpt-4o", {"url": url, "detail": "high"}) == 85 + 170 * 4  # 768x768: 2x2 tiles
    assert image_tokens("gpt-4o-mini", {"url": url, "detail": "low"}) == 2833


def _chatml_usage(body: dict, reply: str) -> dict:
    encode = tokenizer_for("gpt-4o").encode
    prompt, completion = chatml_prompt_tokens(body["messages"], encode), len(encode(reply))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture(scope="module")
def judged(sample_dir, sample_env, tmp_path_factory):
    """(estimate before the run, the run's accounting by task, the server, the cache)."""
    from lmms_video_reasoning.judges import LocalJudgeServer
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    cache = tmp_path_factory.mktemp("estimate") / "judge.sqlite"
    predictions = sample_dir / "predictions.jsonl"
    with LocalJudgeServer(responder=sample_responder, model="sample-oracle", usage=_chatml_usage) as server:
        env = {**sample_env, "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_MODEL": "sample-oracle",
               "LMMS_VR_JUDGE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
        with environment(env):
            gathered = [item for task in TASKS for item in samples_io.gather_records(predictions, task)[0]]
            before = batch_judging.estimate(gathered)
            assert server.request_count == 0, "the estimate sends nothing"
            accounting = {item.task: _scored_by_tag(item) for item in gathered}
            after = batch_judging.estimate(gathered)
            yield {"before": before, "after": after, "accounting": accounting, "server": server, "env": env, "gathered": gathered}


def _scored_by_tag(item) -> dict:
    """Score one task synchronously; its judge's statistics (per judge call too) for that task."""
    from lmms_video_reasoning.judges import get_judge
    from lmms_video_reasoning.utils.core import registry

    judge = get_judge(registry.get(samples_io.task_spec(item.task).benchmark).scoring.judge_name)
    before = judge.stats.as_dict()
    score.score_task(item.task, item.records)
    after = judge.stats.as_dict()
    tags = {tag: {name: value - before["by_tag"].get(tag, {}).get(name, 0) for name, value in counts.items()}
            for tag, counts in after["by_tag"].items()}
    return {"stats": {**{name: after[name] - before[name] for name in ("calls", "failures", "prompt_tokens", "reasks")},
                      "by_tag": {tag: counts for tag, counts in tags.items() if counts["calls"] or counts["cache_hits"]}}}


def _by_tag(estimate: dict, task: str) -> dict[str, dict]:
    return {row["judge_call"]: row for row in estimate["rows"] if row["task"] == task}


def test_estimate_within_ten_percent_of_the_judged_runs_input_tokens(judged):
    for task in ("vcr_cot", "vr_bench"):
        estimated = sum(row["input_tokens"] for row in _by_tag(judged["before"], task).values())
        stats = judged["accounting"][task]["stats"]
        # The run's re-asks (the sample judge's deliberate refusals, asked 3 times) are not in an estimate.
        reasked = sum(tag["reasks"] for tag in stats["by_tag"].values())
        measured = stats["prompt_tokens"]
        first_asks = sum(t["prompt_tokens"] * (t["calls"] - t["reasks"]) / t["calls"] for t in stats["by_tag"].values() if t["calls"])
        assert abs(estimated - first_asks) <= 0.10 * first_asks, (task, estimated, first_asks, measured, reasked)
        calls = sum(t["calls"] - t["reasks"] for t in stats["by_tag"].values())
        assert sum(row["requests"] for row in _by_tag(judged["before"], task).values()) == calls, task
    # CG-Bench open-ended: step 1 as measured; step 2 counted for every question, an upper bound.
    rows = _by_tag(judged["before"], "cg_bench_open")
    stats = judged["accounting"]["cg_bench_open"]["stats"]["by_tag"]
    step1 = stats["cg_bench.open.step1"]
    assert abs(rows["cg_bench.open.step1"]["input_tokens"] - step1["prompt_tokens"]) <= 0.10 * step1["prompt_tokens"]
    assert rows["cg_bench.open.step2"]["requests"] == rows["cg_bench.open.step1"]["requests"]
    assert rows["cg_bench.open.step2"]["input_tokens"] >= stats.get("cg_bench.open.step2", {}).get("prompt_tokens", 0)
    assert rows["cg_bench.open.step2"]["after_assumed"] == rows["cg_bench.open.step2"]["requests"]


def test_estimate_prices_sync_and_batch_and_names_the_tokenizer(judged, capsys):
    with environment({"LMMS_VR_JUDGE_MODEL": "gpt-4o-2024-08-06", "LMMS_VR_JUDGE_BASE_URL": "", "LMMS_VR_JUDGE_CACHE": str(judged["env"]["LMMS_VR_JUDGE_CACHE"]) + ".other"}):
        data = batch_judging.estimate([g for g in judged["gathered"] if g.task == "vcr_cot"])
        batch_judging.print_estimate(data)
    out = capsys.readouterr().out
    total = data["total"]
    expected = (total["input_tokens"] * 2.5 + total["output_tokens"] * 10) / 1e6
    assert total["usd_sync"] == pytest.approx(expected) and total["usd_batch"] == pytest.approx(expected / 2)
    assert data["tokenizers"] == {"gpt-4o-2024-08-06": "tiktoken o200k_base"}
    assert "vcr.extract" in out and "tiktoken o200k_base" in out and "upper bound" in out


def test_cache_hits_are_excluded(judged):
    """After the run only the judgments with no parsed reply (never cached) are left to make."""
    assert judged["before"]["cache_hits"] == {}
    left = {task: sum(r["requests"] for r in _by_tag(judged["after"], task).values()) for task in TASKS}
    failed = {task: judged["accounting"][task]["stats"]["failures"] for task in TASKS}
    assert left == failed and failed["vr_bench"] > 0
    assert sum(judged["after"]["cache_hits"].values()) > 0


def test_an_lmms_eval_aggregation_scores_once_and_estimates_nothing(judged, caplog, monkeypatch):
    """The in-run aggregation of a judged task runs its scoring once: no second pass with a judge
    that sends nothing to log an estimate (that is `lmms-vr score PATH --estimate`)."""
    from lmms_video_reasoning.judges import batch_pass
    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.utils.lmms import judge_usage
    from lmms_video_reasoning.utils.results.aggregation import ScoreOnce

    records = [g for g in judged["gathered"] if g.task == "vcr_cot"][0].records
    scoring = type(registry.get("vcr_bench").scoring)
    passes, score = [], scoring.score
    monkeypatch.setattr(scoring, "score", lambda self, rs, settings, judge: passes.append(len(rs)) or score(self, rs, settings, judge))
    monkeypatch.setattr(batch_pass.JudgePass, "__init__", lambda *a, **k: pytest.fail("a judge pass in the run"))
    cache = judged["env"]["LMMS_VR_JUDGE_CACHE"]
    with environment({**judged["env"], "LMMS_VR_JUDGE_CACHE": cache + ".fresh"}):
        before = judged["server"].request_count
        with caplog.at_level(logging.INFO, logger="lmms_video_reasoning"), judge_usage.task_context("vcr_cot"):
            assert ScoreOnce("vcr_bench").aggregation("accuracy")(records) > 0
        sent = judged["server"].request_count - before
    assert passes == [len(records)], "one scoring"
    extract = _by_tag(judged["before"], "vcr_cot")
    assert sent >= sum(row["requests"] for row in extract.values()) > 0, "the one scoring judged (a fresh cache)"
    assert not [r for r in caplog.records if "requests not in the judge cache" in r.getMessage()]


def test_cli_estimate_writes_json(judged, tmp_path, capsys):
    out = tmp_path / "estimate.json"
    with environment(judged["env"]):
        assert cli_main(["score", str(judged["gathered"][0].source), "--task", "vr_bench", "--estimate", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {row["judge_call"] for row in data["rows"]} <= {"vrbench.unique", "vrbench.non_unique"}
    assert "Judging cost estimate" in capsys.readouterr().out


def test_estimate_without_the_cg_bench_root_counts_what_it_leaves_out(judged, tmp_path, capsys):
    """CG-Bench's open-ended step 2 holds the clue frames: without CGBENCH_ROOT its requests cannot be
    built. The estimate then counts them as NOT COUNTED (how many, why, which variable), never as if
    step 2 were in the total; with the root they are in it."""
    [item] = [g for g in judged["gathered"] if g.task == "cg_bench_open"]
    fresh = {**judged["env"], "LMMS_VR_JUDGE_CACHE": str(tmp_path / "fresh.sqlite")}
    with environment(fresh):
        with_root = batch_judging.estimate([item])
    saved = os.environ.pop("CGBENCH_ROOT", None)
    try:
        with environment({**{k: v for k, v in fresh.items() if k != "CGBENCH_ROOT"}}):
            bare = batch_judging.estimate([item])
            batch_judging.print_estimate(bare)
    finally:
        if saved is not None:
            os.environ["CGBENCH_ROOT"] = saved
    out = capsys.readouterr().out
    rooted, unrooted = _by_tag(with_root, "cg_bench_open"), _by_tag(bare, "cg_bench_open")
    step1 = rooted["cg_bench.open.step1"]["requests"]
    assert step1 > 0 and rooted["cg_bench.open.step2"]["requests"] == step1 and with_root["not_counted"] == []
    assert unrooted["cg_bench.open.step1"]["requests"] == step1 and "cg_bench.open.step2" not in unrooted
    [gap] = bare["not_counted"]
    assert (gap["task"], gap["after"], gap["requests"], gap["items"], gap["missing"]) == (
        "cg_bench_open", "cg_bench.open.step1", step1, step1, "needs CGBENCH_ROOT")
    assert "not found" in gap["reason"]
    assert unrooted["cg_bench.open.step1"]["not_built"] == step1 and bare["total"]["not_built"] == step1
    assert bare["total"]["requests"] == step1 and with_root["total"]["requests"] == 2 * step1
    assert f"NOT COUNTED in the total: cg_bench_open: {step1} requests" in out and "needs CGBENCH_ROOT" in out
