"""lmms-eval's judge settings for the suite's judges (utils/lmms/launcher.py, judges/config.py).

Unit: which judge `JudgeConfig.from_env` resolves with lmms-eval's variables (API_TYPE,
LLM_JUDGE_URL, MODEL_VERSION) and nothing of LMMS_VR_JUDGE_* set, against real local servers.

End to end (slow): `python -m lmms_eval ... --launcher_args name=sglang,...` with lmms-eval's own
`SGLangLauncher`; the `sglang` functions it imports are stand-ins on PYTHONPATH
(tests/fake_sglang: where SGLang would start, the suite's local judge server starts, a real
HTTP server on 127.0.0.1; lmms-eval's launcher supports no command of its own). lmms-eval stops
that server before aggregation; the run shows the suite judged with it and stopped it after.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from lmms_cli import run_lmms_eval
from lmms_video_reasoning.judges import JudgeConfig, LocalJudgeServer
from lmms_video_reasoning.judges import config as judge_config
from lmms_video_reasoning.utils.lmms import host, launcher

NO_OVERRIDES = {"LMMS_VR_JUDGE_BASE_URL": "", "LMMS_VR_JUDGE_API_KEY": "", "LMMS_VR_JUDGE_MODEL": ""}


@pytest.fixture(autouse=True)
def lmms_settings(monkeypatch):
    import lmms_eval.evaluator  # noqa: F401 - its import installs the touchpoint (autoload): reset after it

    # each test starts with no launcher of this process and the touchpoint not installed; restored after it
    monkeypatch.setattr(launcher, "_launchers", [])
    launcher._warn_unsupported.cache_clear()
    monkeypatch.setattr(host.JUDGE_SERVER, "state", "not installed")
    launcher.register_judge_settings()
    yield
    judge_config.register_host_judge(None)


def test_api_type_local_is_the_judge_of_every_benchmark():
    env = {"API_TYPE": "local", "LLM_JUDGE_URL": "http://127.0.0.1:8011/v1/chat/completions", "MODEL_VERSION": "Qwen/Qwen3-8B",
           "OPENAI_API_KEY": "sk-test-openai-SECRET", "DEEPSEEK_API_KEY": "sk-test-deepseek-SECRET"}
    for benchmark in ("vcr_bench", "vrbench", "cg_bench"):
        config = JudgeConfig.from_env(benchmark, env)
        assert (config.base_url, config.model) == ("http://127.0.0.1:8011/v1", "Qwen/Qwen3-8B"), benchmark
        assert config.api_key == judge_config.DUMMY_API_KEY, "a provider key never goes to lmms-eval's local server"
        assert "API_TYPE=local" in config.base_url_env and "SECRET" not in repr(config)


def test_lmms_vr_judge_variables_win_and_openai_is_unchanged():
    env = {"API_TYPE": "local", "LMMS_VR_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "LMMS_VR_JUDGE_MODEL": "mine"}
    assert JudgeConfig.from_env("vcr_bench", env).model == "mine"
    # lmms-eval's default provider: VCR-Bench / CG-Bench already read its variables, VRBench keeps DeepSeek
    env = {"API_TYPE": "openai", "OPENAI_API_KEY": "sk-x", "OPENAI_API_URL": "http://127.0.0.1:7/v1", "MODEL_VERSION": "gpt-4o",
           "DEEPSEEK_API_KEY": "sk-y"}
    vcr = JudgeConfig.from_env("vcr_bench", env)
    assert (vcr.base_url, vcr.model, vcr.key_env) == ("http://127.0.0.1:7/v1", "gpt-4o", "OPENAI_API_KEY")
    assert JudgeConfig.from_env("vrbench", env).model == "deepseek-chat"
    # without the seam's registration (e.g. another host) nothing changes
    judge_config.register_host_judge(None)
    assert JudgeConfig.from_env("vcr_bench", {"API_TYPE": "local"}) is None


def test_api_type_local_without_a_model_asks_the_server():
    with LocalJudgeServer(model="served-judge") as server:
        env = {"API_TYPE": "local", "LLM_JUDGE_URL": server.base_url + "/chat/completions"}
        config = JudgeConfig.from_env("cg_bench", env)
        assert config.model == "served-judge" and config.base_url == server.base_url
    with LocalJudgeServer(listed_models=["a", "b"]) as server:
        with pytest.raises(judge_config.JudgeConfigError, match="MODEL_VERSION"):
            JudgeConfig.from_env("cg_bench", {"API_TYPE": "local", "LLM_JUDGE_URL": server.base_url})


def test_api_types_the_judges_cannot_call_are_said_once(caplog):
    env = {"API_TYPE": "azure", "AZURE_API_KEY": "k", "OPENAI_API_KEY": "sk-x"}
    with caplog.at_level(logging.WARNING):
        configs = [JudgeConfig.from_env("vcr_bench", env) for _ in range(3)]
    assert all(c.model == "gpt-4o-2024-08-06" and c.key_env == "OPENAI_API_KEY" for c in configs), "the benchmark's own default"
    warned = [r.getMessage() for r in caplog.records if "API_TYPE=azure" in r.getMessage()]
    assert len(warned) == 1 and "LMMS_VR_JUDGE_BASE_URL" in warned[0]


class FakeLauncher:
    def __init__(self, model="judge-m", host="127.0.0.1", port=1234, api_key=None):
        self.model, self.host, self.port, self.api_key = model, host, port, api_key
        self.events = []

    def launch(self):
        self.events.append("launch")

    def clean(self):
        self.events.append("clean")


def test_a_launched_server_is_the_judge_and_its_clean_waits_for_aggregation(monkeypatch):
    import lmms_eval.evaluator as evaluator

    built = []
    monkeypatch.setattr(evaluator, "get_launcher", lambda name: lambda **kw: built.append(FakeLauncher(**kw)) or built[-1])
    consolidated = []
    monkeypatch.setattr(evaluator, "consolidate_results", lambda tasks: consolidated.append(tasks) or ("results",))
    assert launcher.install()
    kept = evaluator.get_launcher("sglang")(model="Qwen/Qwen3-8B", host="127.0.0.1", port=30000, api_key="sk-test-launch")
    named = judge_config.host_judge({})
    assert (named.base_url, named.model, named.started) == ("http://127.0.0.1:30000/v1", "Qwen/Qwen3-8B", False)
    kept.launch()
    config = JudgeConfig.from_env("vrbench", {**NO_OVERRIDES, "DEEPSEEK_API_KEY": "sk-deepseek"})
    assert (config.base_url, config.model, config.api_key) == ("http://127.0.0.1:30000/v1", "Qwen/Qwen3-8B", "sk-test-launch")
    kept.clean()  # lmms-eval's call before aggregation: held back
    assert built[0].events == ["launch"] and judge_config.host_judge({}).started
    assert evaluator.consolidate_results(["task"]) == ("results",)  # after every aggregation: now
    assert built[0].events == ["launch", "clean"] and consolidated == [["task"]]
    kept.finish()
    assert built[0].events == ["launch", "clean"], "stopped once"
    assert judge_config.host_judge({}) is None, "a stopped server is no longer the judge"


def test_an_unexpected_lmms_eval_switches_the_wrapping_off_with_one_warning(monkeypatch, caplog):
    import lmms_eval.evaluator as evaluator

    unwrapped = lambda name: None  # noqa: E731
    monkeypatch.setattr(evaluator, "get_launcher", unwrapped)
    monkeypatch.delattr(evaluator, "consolidate_results")
    with caplog.at_level(logging.WARNING):
        assert not launcher.install()
    warned = [r.getMessage() for r in caplog.records if "consolidate_results" in r.getMessage()]
    assert len(warned) == 1 and "judge-server is off" in warned[0] and "LMMS_VR_JUDGE_BASE_URL" in warned[0]
    assert host.JUDGE_SERVER.state.startswith("off") and evaluator.get_launcher is unwrapped
    # the settings need no wrapping: API_TYPE=local still applies
    assert JudgeConfig.from_env("vcr_bench", {"API_TYPE": "local", "MODEL_VERSION": "m"}).model == "m"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_lmms_eval_launcher_serves_the_judges_until_they_are_done(sample_dir, sample_env, tmp_path):
    port, events, cache = free_port(), tmp_path / "events.jsonl", tmp_path / "judge.sqlite"
    env = {**sample_env, **NO_OVERRIDES, "OPENAI_API_KEY": "", "DEEPSEEK_API_KEY": "", "API_TYPE": "",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "fake_sglang"), os.environ.get("PYTHONPATH", "")]),
           "FAKE_SGLANG_EVENTS": str(events), "FAKE_SGLANG_RESPONDER": "lmms_video_reasoning.utils.tools.demo:sample_responder",
           "LMMS_VR_JUDGE_CACHE": str(cache)}
    results = run_lmms_eval("vcr_cot,vr_bench", tmp_path / "out", model_args=f"predictions={sample_dir / 'predictions.jsonl'}", env=env,
                            extra=["--launcher_args", f"name=sglang,model=sample-oracle,host=127.0.0.1,port={port},tp=1"])
    vcr, vr = results["results"]["vcr_cot"], results["results"]["vr_bench"]
    assert vcr["judge_failed,none"] == 0 and vcr["accuracy,none"] == vcr["accuracy,none"] and vcr["cot_f1,none"] > 0
    assert vr["process_score,none"] > 0, "VRBench too is judged by lmms-eval's server"
    accounting = json.loads(next((tmp_path / "out").rglob("*_judge_accounting_vcr_bench.json")).read_text())
    assert accounting["judge"]["base_url"] == f"http://127.0.0.1:{port}/v1" and accounting["judge"]["model"] == "sample-oracle"
    assert accounting["judge"]["model_from"] == "lmms-eval --launcher_args name=sglang" and accounting["stats"]["calls"] > 0
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["event"] for e in logged] == ["launched", "killed"], "started once, stopped once"
    with sqlite3.connect(cache) as connection:
        judged = connection.execute("SELECT MIN(created), MAX(created), COUNT(*) FROM replies").fetchone()
    assert logged[0]["time"] <= judged[0] and judged[1] <= logged[1]["time"] and judged[2] > 0, \
        "every verdict came from the server between its start and its stop"
    time.sleep(0.5)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # the server is gone
