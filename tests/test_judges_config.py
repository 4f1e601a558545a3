"""Judge configuration from environment variables and the per-process registry (judges/config.py, get_judge)."""

import logging

import pytest

from lmms_video_reasoning.judges import JudgeConfig, JudgeConfigError, LocalJudgeServer, get_judge
from lmms_video_reasoning.judges import process_registry
from lmms_video_reasoning.utils.core.ask import Request

JUDGE_VARIABLES = [
    "LMMS_VR_JUDGE_BASE_URL", "LMMS_VR_JUDGE_API_KEY", "LMMS_VR_JUDGE_MODEL", "LMMS_VR_JUDGE_CONCURRENCY",
    "LMMS_VR_JUDGE_CACHE", "LMMS_VR_JUDGE_MAX_CALLS", "LMMS_VR_JUDGE_TIMEOUT", "LMMS_VR_JUDGE_PRICES",
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_URL", "MODEL_VERSION", "DEEPSEEK_API_KEY",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in JUDGE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setattr(process_registry, "_shared", {})


def test_vcr_and_cg_default_to_gpt4o_with_lmms_eval_conventions():
    env = {"OPENAI_API_KEY": "sk-a", "OPENAI_API_URL": "https://proxy.example/v1/chat/completions", "MODEL_VERSION": "gpt-4o-mini"}
    config = JudgeConfig.from_env("vcr_bench", env)
    assert (config.model, config.base_url, config.api_key, config.key_env) == ("gpt-4o-mini", "https://proxy.example/v1", "sk-a", "OPENAI_API_KEY")
    config = JudgeConfig.from_env("cg_bench", {"OPENAI_API_KEY": "sk-a", "OPENAI_BASE_URL": "https://b.example/v1/"})
    assert (config.model, config.base_url) == ("gpt-4o-2024-08-06", "https://b.example/v1")
    assert JudgeConfig.from_env("vcr_bench", {"OPENAI_API_KEY": "sk-a"}).base_url is None  # the openai default


def test_vrbench_defaults_to_deepseek_and_ignores_openai_settings():
    env = {"DEEPSEEK_API_KEY": "ds", "OPENAI_API_KEY": "sk-a", "OPENAI_BASE_URL": "https://x/v1", "MODEL_VERSION": "gpt-4o"}
    config = JudgeConfig.from_env("vrbench", env)
    assert (config.model, config.base_url, config.api_key, config.key_env) == ("deepseek-chat", "https://api.deepseek.com/v1", "ds", "DEEPSEEK_API_KEY")
    assert JudgeConfig.from_env("vrbench", {"OPENAI_API_KEY": "sk-a"}) is None


def test_overrides_win_and_a_local_server_needs_no_key():
    env = {"LMMS_VR_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "LMMS_VR_JUDGE_MODEL": "qwen", "OPENAI_API_KEY": "sk-a", "MODEL_VERSION": "x"}
    config = JudgeConfig.from_env("cg_bench", env)
    assert (config.base_url, config.model) == ("http://127.0.0.1:9/v1", "qwen")
    assert config.api_key != "sk-a"  # a provider key is never sent to the override endpoint
    assert JudgeConfig.from_env("vrbench", {**env, "LMMS_VR_JUDGE_API_KEY": "k"}).api_key == "k"
    assert JudgeConfig.from_env("vcr_bench", {"LMMS_VR_JUDGE_API_KEY": "k"}).key_env == "LMMS_VR_JUDGE_API_KEY"


def test_numeric_settings_cache_and_prices():
    env = {"OPENAI_API_KEY": "k", "LMMS_VR_JUDGE_CONCURRENCY": "5", "LMMS_VR_JUDGE_MAX_CALLS": "100", "LMMS_VR_JUDGE_TIMEOUT": "7.5",
           "LMMS_VR_JUDGE_CACHE": "off", "LMMS_VR_JUDGE_PRICES": '{"gpt-4o-2024-08-06": {"input": 1, "output": 3}}'}
    config = JudgeConfig.from_env("vcr_bench", env)
    assert (config.concurrency, config.max_calls, config.timeout, config.cache_path) == (5, 100, 7.5, None)
    assert config.price() == {"input": 1.0, "output": 3.0}
    assert JudgeConfig.from_env("vcr_bench", {"OPENAI_API_KEY": "k"}).cache_path.name == "judge_cache.sqlite"
    assert JudgeConfig(model="unknown-model").price() is None


@pytest.mark.parametrize(
    "name, value",
    [("LMMS_VR_JUDGE_CONCURRENCY", "many"), ("LMMS_VR_JUDGE_CONCURRENCY", "0"), ("LMMS_VR_JUDGE_MAX_CALLS", "-1"),
     ("LMMS_VR_JUDGE_TIMEOUT", "soon"), ("LMMS_VR_JUDGE_PRICES", "cheap"), ("LMMS_VR_JUDGE_BASE_URL", "localhost:8000")],
)
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(JudgeConfigError, match=name):
        JudgeConfig.from_env("vcr_bench", {"OPENAI_API_KEY": "k", name: value})


def test_unwritable_cache_names_the_variable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(JudgeConfigError, match="LMMS_VR_JUDGE_CACHE"):
        from lmms_video_reasoning.judges import Judge

        Judge(JudgeConfig(cache_path=blocker / "sub" / "cache.sqlite"))


def test_key_is_not_in_repr_or_public_dict():
    config = JudgeConfig(api_key="sk-very-secret", base_url="https://user:pw@host.example/v1?api-key=zzz")
    assert "sk-very-secret" not in repr(config)
    public = str(config.public_dict())
    assert "sk-very-secret" not in public and "pw" not in public and "zzz" not in public


def test_get_judge_unconfigured_logs_one_line_per_benchmark(caplog):
    with caplog.at_level(logging.WARNING, logger="lmms_video_reasoning.judges"):
        assert get_judge("vrbench") is None
        assert get_judge("vrbench") is None
        assert get_judge("cg_bench") is None
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2
    assert "DEEPSEEK_API_KEY" in lines[0] and "LMMS_VR_JUDGE_BASE_URL" in lines[0]
    assert "OPENAI_API_KEY" in lines[1]
    with pytest.raises(ValueError, match="vcr_bench"):
        get_judge("vcr")


def test_get_judge_shares_one_instance_per_config_and_judges_over_http(monkeypatch):
    with LocalJudgeServer() as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        vcr, again = get_judge("vcr_bench"), get_judge("vcr_bench")
        assert vcr is again
        assert get_judge("vrbench") is not vcr  # other benchmark, other config
        assert vcr.ask(Request([{"role": "user", "content": "hi"}])).value == "echo: hi"
        monkeypatch.setenv("LMMS_VR_JUDGE_MODEL", "another")
        assert get_judge("vcr_bench") is not vcr
