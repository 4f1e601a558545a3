"""Judge integrity (issue 14): no unparsed, stale or foreign verdict is served; the budget,
timeout, reply size and odd headers are handled. Real HTTP against `LocalJudgeServer` with
injected faults, a real SQLite cache, the real registry (`get_judge`) where it matters."""

from __future__ import annotations

import sqlite3
import time
import tracemalloc

import pytest

from judge_faults import FaultPlan
from lmms_video_reasoning.judges import (
    NOT_COMPUTED,
    CacheOnlyJudge,
    JudgeConfig,
    JudgeConfigError,
    LocalJudgeServer,
    get_judge,
    parsing,
)
from lmms_video_reasoning.judges import config as judge_config
from lmms_video_reasoning.judges import process_registry, transport
from lmms_video_reasoning.judges.cache import request_key
from lmms_video_reasoning.utils.core.ask import Request
from test_judges import ask_item, make_judge, verdict_responder
from test_judges_config import JUDGE_VARIABLES

GPT4O = "gpt-4o-2024-08-06"


@pytest.fixture
def clean_registry(monkeypatch, tmp_path):
    for name in JUDGE_VARIABLES + ["LMMS_VR_JUDGE_MAX_REPLY_BYTES"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE", str(tmp_path / "registry_cache.sqlite"))
    monkeypatch.setattr(process_registry, "_shared", {})
    judge_config._listed_models.cache_clear()


def request(item: int) -> Request:
    return Request([{"role": "user", "content": f"question {item}"}], parse=parsing.extract_json, tag="t")


# ---------------------------------------------------------------------- unparsed replies


def test_an_unparsed_reply_is_kept_but_never_served(tmp_path):
    faults = FaultPlan(first_k=3, kinds=("unparseable",))  # every reply of the first asking is garbage
    with LocalJudgeServer(verdict_responder, faults=faults) as server:
        judge = make_judge(server, tmp_path)
        failed = judge.ask(request(1))
        assert not failed.ok and failed.error.startswith("parse:") and server.request_count == 3
        kept = judge.cache.rejected()
        assert len(kept) == 3 and {row["raw"] for row in kept} == {""}
        assert len(judge.cache) == 0, "nothing servable was stored"
        # The judge is healthy again: the rerun asks (once) and gets the verdict.
        rerun = make_judge(server, tmp_path)
        healed = rerun.ask(request(1))
        assert healed.ok and not healed.cached and healed.value == {"item": "question 1", "score": len("question 1") % 3}
        assert server.request_count == 4 and rerun.stats.calls == 1
        assert make_judge(server, tmp_path).ask(request(1)).cached and server.request_count == 4


def test_a_cached_reply_that_no_longer_parses_is_refused_and_replaced(tmp_path):
    with LocalJudgeServer(lambda body: "score: 1") as server:
        first = make_judge(server, tmp_path).ask(Request([{"role": "user", "content": "q"}]))  # no parser: stored
        assert first.ok and server.request_count == 1
    with LocalJudgeServer(verdict_responder) as server:
        judge = make_judge(server, tmp_path)
        result = judge.ask(Request([{"role": "user", "content": "q"}], parse=parsing.extract_json))
        assert result.ok and result.value == {"item": "q", "score": 1} and server.request_count == 1
        assert judge.stats.cache_refused == 1 and judge.stats.cache_hits == 0
        assert [row["raw"] for row in judge.cache.rejected()] == ["score: 1"]


# ---------------------------------------------------------------------- foreign and legacy replies


def test_a_reply_from_another_model_is_not_served_as_the_requested_ones(tmp_path):
    items = list(range(6))
    # A permissive local server answering every request with its own model.
    with LocalJudgeServer(verdict_responder, reply_model="local-judge") as local:
        judge = make_judge(local, tmp_path, model=GPT4O)
        judge.map(ask_item, items)
        assert judge.stats.as_dict()["answered_by"] == {"local-judge": 6}
        assert judge.accounting()["stats"]["answered_by"] == {"local-judge": 6}
        # The same endpoint may serve its own replies again (an Azure deployment name, say).
        again = make_judge(local, tmp_path, model=GPT4O)
        again.map(ask_item, items)
        assert local.request_count == 6 and again.stats.cache_hits == 6
    # "The real GPT-4o" elsewhere: nothing the local server said is served as its verdict.
    with LocalJudgeServer(verdict_responder) as real:
        judge = make_judge(real, tmp_path, model=GPT4O)
        results = judge.map(ask_item, items)
        assert all(r.ok and not r.cached and r.answered_by == GPT4O for r in results)
        stats = judge.stats.as_dict()
        assert real.request_count == 6 and stats["cache_refused"] == 6 and stats["answered_by"] == {GPT4O: 6}
        # Replaced in the cache; the foreign replies are kept for inspection.
        assert make_judge(real, tmp_path, model=GPT4O).map(ask_item, items) and real.request_count == 6
        assert {row["answered_by"] for row in judge.cache.rejected()} == {"local-judge"}


def test_a_dated_snapshot_answers_for_its_alias(tmp_path):
    with LocalJudgeServer(verdict_responder, reply_model=GPT4O) as first:
        make_judge(first, tmp_path, model="gpt-4o").map(ask_item, [1, 2])
    with LocalJudgeServer(verdict_responder) as second:
        judge = make_judge(second, tmp_path, model="gpt-4o")
        assert all(r.cached for r in judge.map(ask_item, [1, 2])) and second.request_count == 0


def test_replies_cached_before_the_answering_model_was_recorded_are_not_served(tmp_path):
    path = tmp_path / "cache.sqlite"
    messages = [{"role": "user", "content": "question 1"}]
    with sqlite3.connect(path) as old:  # the first release's schema and a row it wrote
        old.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, raw TEXT NOT NULL, "
                    "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)")
        old.execute("INSERT INTO replies VALUES (?, 'judge-model', '{\"stale\": true}', 1, 1, 0)",
                    (request_key("judge-model", messages, 2048, 0.0, 0),))
    with LocalJudgeServer(verdict_responder) as server:
        judge = make_judge(server, tmp_path)
        result = judge.ask(request(1))
        assert result.ok and result.value != {"stale": True} and server.request_count == 1
        assert judge.stats.cache_refused == 1


def test_a_custom_endpoint_names_its_model_or_the_server_does(clean_registry, monkeypatch):
    with LocalJudgeServer(verdict_responder, model="qwen2.5-72b") as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        judge = get_judge("vcr_bench")
        assert judge.config.model == "qwen2.5-72b" and "/models" in judge.config.model_env
        assert judge.ask(request(3)).answered_by == "qwen2.5-72b"
        assert judge.accounting()["judge"]["model"] == "qwen2.5-72b"
        monkeypatch.setenv("LMMS_VR_JUDGE_MODEL", "named-by-user")
        assert get_judge("vrbench").config.model == "named-by-user"
    with LocalJudgeServer(verdict_responder, listed_models=["a", "b"]) as server:
        env = {"LMMS_VR_JUDGE_BASE_URL": server.base_url}
        with pytest.raises(JudgeConfigError, match="lists 2 models .*LMMS_VR_JUDGE_MODEL"):
            JudgeConfig.from_env("cg_bench", env)
    with pytest.raises(JudgeConfigError, match="LMMS_VR_JUDGE_MODEL"):
        JudgeConfig.from_env("cg_bench", {"LMMS_VR_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"})


# ---------------------------------------------------------------------- budget, timeout, size, headers


def test_the_call_budget_is_per_process_across_benchmarks(clean_registry, monkeypatch):
    with LocalJudgeServer(verdict_responder) as server:
        monkeypatch.setenv("LMMS_VR_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("LMMS_VR_JUDGE_MAX_CALLS", "10")
        judges = [get_judge(name) for name in ("vcr_bench", "vrbench", "cg_bench")]
        assert len({id(judge) for judge in judges}) == 3
        results = [judge.ask(request(index * 100 + item)) for index, judge in enumerate(judges) for item in range(10)]
        assert server.request_count == 10 and sum(r.ok for r in results) == 10
        assert {r.error for r in results if not r.ok} == {"budget exhausted"}
        budget = judges[2].accounting()["budget"]
        assert budget == {"scope": "process", "max_calls": 10, "calls": 10, "exhausted": True}


def test_the_timeout_bounds_a_whole_request_with_a_slow_body(tmp_path):
    faults = FaultPlan(by_request={1: "slow_body", 2: "slow_body"}, slow_interval=0.5)
    with LocalJudgeServer(verdict_responder, faults=faults) as server:
        judge = make_judge(server, tmp_path, timeout=1.0, max_attempts=2)
        started = time.monotonic()
        result = judge.ask(request(1))
        elapsed = time.monotonic() - started
        assert not result.ok and "timeout" in result.error and server.request_count == 2
        assert elapsed < 3.5, f"two 1 s attempts took {elapsed:.1f} s"
        assert judge.ask(request(1)).ok  # the next request gets through


def test_a_huge_reply_is_refused_without_holding_it(tmp_path):
    faults = FaultPlan(by_request={1: "huge"}, huge_bytes=64 * 1024 * 1024)
    with LocalJudgeServer(verdict_responder, faults=faults) as server:
        judge = make_judge(server, tmp_path, max_reply_bytes=1024 * 1024)
        tracemalloc.start()
        result = judge.ask(request(1))
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert not result.ok and "LMMS_VR_JUDGE_MAX_REPLY_BYTES" in result.error and server.request_count == 1
        assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB while refusing a 64 MiB reply"
        assert len(judge.cache) == 0 and judge.ask(request(1)).ok


@pytest.mark.parametrize("fault", ["429_soon", "429_nan", "bad_usage"])
def test_odd_headers_and_usage_are_handled(tmp_path, fault):
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(by_request={1: fault})) as server:
        judge = make_judge(server, tmp_path)
        result = judge.ask(request(1))
        assert result.ok and result.value == {"item": "question 1", "score": 1}
        stats = judge.stats.as_dict()
        if fault == "bad_usage":
            assert server.request_count == 1 and stats["usage_unreported"] == 1
        else:
            assert server.request_count == 2 and stats["retries"] == 1


def test_retry_after_values():
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    cases = {"2": 2.0, "soon": None, "nan": None, "inf": None, "-3": 0.0, "": None}
    for value, expected in cases.items():
        assert transport.retry_after_seconds({"retry-after": value}) == expected, value
    assert 25 < transport.retry_after_seconds({"retry-after": later}) <= 30
    assert transport.retry_after_seconds({"retry-after-ms": "250"}) == 0.25


def test_repr_shows_no_credentials():
    config = JudgeConfig(model="m", base_url="https://alice:hunter2@proxy.example/v1?api-key=QUERYSECRET", api_key="sk-KEYSECRET")
    text = repr(config) + str(config) + str(config.public_dict())
    assert "proxy.example" in text
    for secret in ("hunter2", "alice", "QUERYSECRET", "KEYSECRET"):
        assert secret not in text


# ---------------------------------------------------------------------- reading verdicts with no judge


def test_cached_verdicts_are_read_with_no_judge_configured(clean_registry, tmp_path):
    cache = tmp_path / "registry_cache.sqlite"
    with LocalJudgeServer(verdict_responder) as server:
        warm = make_judge(server, tmp_path, model="sample-oracle", cache_path=cache).map(ask_item, [1, 2])
        assert server.request_count == 2
        reader = CacheOnlyJudge("vcr_bench", model="sample-oracle")
        results = reader.map(ask_item, [1, 2, 3])
        assert [r.value for r in results[:2]] == [r.value for r in warm] and all(r.cached for r in results[:2])
        assert not results[2].ok and results[2].error == NOT_COMPUTED
        stats = reader.stats.as_dict()
        assert (stats["cache_hits"], stats["not_computed"], stats["failures"], stats["calls"]) == (2, 1, 0, 0)
        assert server.request_count == 2, "nothing was sent"
        assert get_judge("vcr_bench") is None
        configured = make_judge(server, tmp_path, model="sample-oracle", cache_path=cache)
        config = configured.config  # what the configured judge would serve, nothing sent
        explicit = process_registry.cache_only_judge(config.benchmark, config.model, config.cache_path, config.base_url)
        assert isinstance(explicit, CacheOnlyJudge) and explicit.ask(request(1)).cached
        assert not explicit.ask(request(4)).ok and server.request_count == 2
        assert get_judge("vcr_bench") is None, "no judge of the process was swapped"
