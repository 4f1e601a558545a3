"""Judge engine against a real local OpenAI-compatible HTTP server (judges/engine.py, local_server.py)."""

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from judge_faults import FaultPlan
from lmms_video_reasoning.judges import (
    Judge,
    JudgeConfig,
    JudgeConfigError,
    LocalJudgeServer,
    parsing,
)
from lmms_video_reasoning.judges.local_server import echo_responder, last_user_text
from lmms_video_reasoning.utils.core.ask import Request

SECRET = "sk-test-SECRETKEY-0123456789abcdef"


def verdict_responder(body: dict) -> str:
    """Deterministic judge: a JSON verdict derived from the question text."""
    text = last_user_text(body)
    return f'Sure.\n```json\n{{"item": "{text}", "score": {len(text) % 3}}}\n```'


def make_judge(server: LocalJudgeServer, tmp_path: Path, **overrides) -> Judge:
    settings = dict(
        model="judge-model",
        base_url=server.base_url,
        api_key=SECRET,
        cache_path=tmp_path / "cache.sqlite",
        concurrency=8,
        timeout=0.5,
        backoff_base=0.01,
        backoff_max=0.05,
    )
    settings.update(overrides)
    return Judge(JudgeConfig(**settings))


def ask_item(item, ask):
    return ask(Request([{"role": "user", "content": f"question {item}"}], parse=parsing.extract_json, tag="t"))


def ask_plain(item, ask):
    return ask(Request([{"role": "user", "content": f"question {item}"}]))


def test_faults_give_identical_results_and_lose_no_sample(tmp_path):
    items = list(range(24))
    with LocalJudgeServer(verdict_responder) as clean_server:
        clean = make_judge(clean_server, tmp_path / "clean").map(ask_item, items)
    kinds = ("429", "500", "truncated", "malformed", "timeout", "503")
    faults = FaultPlan(first_k=2, rate=0.3, seed=7, kinds=kinds, retry_after=0.01, timeout_sleep=0.8)
    with LocalJudgeServer(verdict_responder, faults=faults) as faulty_server:
        judge = make_judge(faulty_server, tmp_path / "faulty")
        faulty = judge.map(ask_item, items)
        sent = faulty_server.request_count
    assert [r.value for r in faulty] == [r.value for r in clean]
    assert all(r.ok for r in faulty) and len(faulty) == len(items)
    assert faulty[5].value == {"item": "question 5", "score": len("question 5") % 3}
    stats = judge.stats.as_dict()
    assert sent >= 3 * len(items)  # two forced failures per request, plus random ones
    assert stats["calls"] == sent and stats["retries"] == sent - len(items) and stats["failures"] == 0


def test_warm_cache_sends_nothing_even_to_another_endpoint(tmp_path):
    items = list(range(10))
    with LocalJudgeServer(verdict_responder) as first:
        cold = make_judge(first, tmp_path).map(ask_item, items)
        assert first.request_count == 10
    with LocalJudgeServer(verdict_responder) as second:  # new port: the endpoint is not in the key
        judge = make_judge(second, tmp_path)
        warm = judge.map(ask_item, items)
        assert second.request_count == 0
    assert [r.value for r in warm] == [r.value for r in cold]
    assert all(r.cached for r in warm) and judge.stats.cache_hits == 10 and judge.stats.calls == 0


def test_cache_key_covers_model_parameters_and_images(tmp_path):
    def image_message(pixel: str, detail: str) -> list[dict]:
        url = f"data:image/png;base64,{pixel}"
        return [{"role": "user", "content": [{"type": "text", "text": "frame?"}, {"type": "image_url", "image_url": {"url": url, "detail": detail}}]}]

    with LocalJudgeServer(verdict_responder) as server:
        judge = make_judge(server, tmp_path)
        requests = [
            Request(image_message("AAAA", "low")),
            Request(image_message("BBBB", "low")),
            Request(image_message("AAAA", "high")),
            Request(image_message("AAAA", "low"), temperature=None),
            Request(image_message("AAAA", "low"), max_tokens=16),
        ]
        for request in requests + requests:
            assert judge.ask(request).ok
        assert server.request_count == len(requests)
        sent = server.requests
        make_judge(server, tmp_path, model="other-model").ask(requests[0])
        assert server.request_count == len(requests) + 1
    assert sent[0]["messages"][0]["content"][1]["image_url"] == {"url": "data:image/png;base64,AAAA", "detail": "low"}
    assert sent[0]["temperature"] == 0.0 and "temperature" not in sent[3]
    assert sent[4]["max_tokens"] == 16


def test_budget_stops_before_exceeding_and_cache_still_serves(tmp_path):
    with LocalJudgeServer(verdict_responder) as server:
        judge = make_judge(server, tmp_path, max_calls=5, concurrency=3)
        results = judge.map(ask_item, range(12))
        assert server.request_count == 5
        assert sum(r.ok for r in results) == 5
        assert {r.error for r in results if not r.ok} == {"budget exhausted"}
        assert judge.stats.budget_exhausted and judge.stats.calls == 5 and judge.stats.failures == 7
        # Answered items stay available from the cache after the budget is spent.
        again = judge.map(ask_item, range(12))
        assert server.request_count == 5 and sum(r.ok for r in again) == 5


def test_unparseable_reply_is_reasked_then_recorded_with_raw_kept(tmp_path):
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def flaky_format(body: dict) -> str:
        text = last_user_text(body)
        with lock:
            seen[text] = seen.get(text, 0) + 1
            count = seen[text]
        if text == "hopeless":
            return "I refuse to answer in JSON."
        return "[1, 2]" if count >= 2 else "Let me think... no structure yet"

    with LocalJudgeServer(flaky_format) as server:
        judge = make_judge(server, tmp_path)
        good = judge.ask(Request([{"role": "user", "content": "fine"}], parse=parsing.extract_json))
        assert good.ok and good.value == [1, 2] and server.request_count == 2
        bad = judge.ask(Request([{"role": "user", "content": "hopeless"}], parse=parsing.extract_json, max_reasks=2))
        assert not bad.ok and bad.value is None and bad.error.startswith("parse:")
        assert bad.raw == "I refuse to answer in JSON."
        assert server.request_count == 2 + 3
        assert judge.stats.reasks == 1 + 2 and judge.stats.failures == 1
        # A rerun replays the same replies from the cache: no paid call repeated.
        rerun = make_judge(server, tmp_path)
        assert rerun.ask(Request([{"role": "user", "content": "fine"}], parse=parsing.extract_json)).value == [1, 2]
        assert server.request_count == 5


def test_rejected_key_raises_config_error_fast_without_the_key(tmp_path):
    with LocalJudgeServer(verdict_responder, api_key="the-right-key") as server:
        judge = make_judge(server, tmp_path, key_env="OPENAI_API_KEY", concurrency=4, backoff_base=1.0)
        started = time.perf_counter()
        with pytest.raises(JudgeConfigError) as caught:
            judge.map(ask_item, range(40))
        assert time.perf_counter() - started < 2.0
        assert server.request_count < 40  # the batch stopped early
    message = str(caught.value)
    assert "OPENAI_API_KEY" in message and "401" in message
    assert SECRET not in message and "SECRETKEY" not in message and "0123456789abcdef" not in message
    assert judge.stats.retries == 0


def test_not_found_names_model_and_base_url_variables(tmp_path):
    with LocalJudgeServer(verdict_responder) as server:
        judge = make_judge(server, tmp_path, base_url=server.base_url.replace("/v1", "/nope"))
        with pytest.raises(JudgeConfigError, match="LMMS_VR_JUDGE_MODEL.*LMMS_VR_JUDGE_BASE_URL"):
            judge.ask(Request([{"role": "user", "content": "x"}]))


def test_retry_after_is_honoured_and_capped(tmp_path):
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(by_request={1: "429"}, retry_after=0.4)) as server:
        started = time.perf_counter()
        assert make_judge(server, tmp_path / "a", backoff_base=0.0).ask(Request([{"role": "user", "content": "x"}])).ok
        assert time.perf_counter() - started >= 0.4
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(by_request={1: "429"}, retry_after=30)) as server:
        started = time.perf_counter()
        assert make_judge(server, tmp_path / "b", retry_after_cap=0.2).ask(Request([{"role": "user", "content": "x"}])).ok
        assert time.perf_counter() - started < 2.0


def test_persistent_server_errors_become_a_bounded_judge_failure_not_cached(tmp_path):
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(first_k=3, kinds=("500",))) as server:
        judge = make_judge(server, tmp_path, max_attempts=3)
        result = judge.ask(Request([{"role": "user", "content": "x"}]))
        assert not result.ok and result.error == "http 500 after 3 attempts" and result.value is None
        assert server.request_count == 3 and judge.stats.failures == 1
        # The failure was not cached: the next run asks again and succeeds.
        assert make_judge(server, tmp_path).ask(Request([{"role": "user", "content": "x"}])).ok
        assert server.request_count == 4


def test_map_keeps_order_and_chains_dependent_steps_concurrently(tmp_path):
    def extract_then_score(item, ask):
        extracted = ask(Request([{"role": "user", "content": f"extract {item}"}], tag="extract"))
        scored = ask(Request([{"role": "user", "content": f"score {extracted.value}"}], tag="score"))
        return item, scored.value

    # Concurrency is observed on the server (requests in flight at once), not timed: a loaded
    # machine stretches wall time but cannot make a sequential client overlap its requests.
    lock, in_flight, peak = threading.Lock(), [0], [0]

    def slow_echo(body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return echo_responder(body)

    with LocalJudgeServer(slow_echo) as server:
        judge = make_judge(server, tmp_path, concurrency=20, timeout=5)
        results = judge.map(extract_then_score, range(40))
    assert results == [(i, f"echo: score echo: extract {i}") for i in range(40)]
    assert peak[0] >= 4, f"at most {peak[0]} requests were in flight at once (concurrency 20)"
    by_tag = judge.stats.as_dict()["by_tag"]
    assert by_tag["extract"]["calls"] == 40 and by_tag["score"]["calls"] == 40


def test_map_records_an_items_exception_and_keeps_the_others(tmp_path, caplog):
    def sometimes_broken(item, ask):
        if item == 3:
            raise ValueError("bad record")
        return ask(Request([{"role": "user", "content": str(item)}])).value

    with LocalJudgeServer() as server:
        judge = make_judge(server, tmp_path)
        results = judge.map(sometimes_broken, range(6), desc="demo")
    assert results == ["echo: 0", "echo: 1", "echo: 2", None, "echo: 4", "echo: 5"]
    assert judge.stats.failures == 1
    assert "item 3 failed: ValueError: bad record" in caplog.text


def test_cost_accounting_and_no_key_in_any_written_file(tmp_path):
    with LocalJudgeServer(verdict_responder, api_key=SECRET) as server:
        judge = make_judge(server, tmp_path, prices=(("judge-model", 1.0, 2.0),))
        assert all(r.ok for r in judge.map(ask_item, range(5)))
        judge.write_accounting(tmp_path / "out" / "judge_accounting.json")
    stats = judge.stats
    assert stats.prompt_tokens > 0 and stats.completion_tokens > 0
    assert stats.cost_usd == pytest.approx((stats.prompt_tokens * 1.0 + stats.completion_tokens * 2.0) / 1e6)
    accounting = json.loads((tmp_path / "out" / "judge_accounting.json").read_text())
    assert accounting["stats"]["calls"] == 5
    assert accounting["judge"]["api_key_variable"] == "LMMS_VR_JUDGE_API_KEY"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.name.startswith("cache.sqlite") for path in written)
    for path in written:
        data = path.read_bytes()
        assert SECRET.encode() not in data and b"SECRETKEY" not in data, path


def _start_subprocess_server(latency: float) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "lmms_video_reasoning.judges.local_server", "--port", "0", "--latency", str(latency)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def _server_stats(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=5) as response:
        return json.load(response)["requests"]


def test_interrupted_run_resumes_without_repeating_a_paid_call(tmp_path):
    items = list(range(40))
    process, base_url = _start_subprocess_server(latency=0.05)
    config = dict(model="m", api_key=None, cache_path=tmp_path / "cache.sqlite", concurrency=4, timeout=1.0, max_attempts=2, backoff_base=0.01)
    judge = Judge(JudgeConfig(base_url=base_url, **config))
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.setdefault("results", judge.map(ask_plain, items)))
    try:
        runner.start()
        while _server_stats(base_url) < 10:
            time.sleep(0.01)
    finally:
        process.kill()  # the endpoint dies mid-run
        process.wait()
    runner.join(timeout=30)
    first = outcome["results"]
    answered = [i for i, r in enumerate(first) if r.ok]
    failed = [i for i, r in enumerate(first) if not r.ok]
    assert len(first) == 40 and answered and failed  # nothing lost: each slot has a result
    # The dead endpoint opens the circuit breaker: the rest fail at once, naming the cause.
    assert judge.breaker.opened.is_set() and "connection refused" in judge.stats.outage["reason"]
    assert all(r.error.endswith("after 2 attempts") or r.error.startswith("judge unavailable (circuit breaker open): connection refused")
               for r in first if not r.ok)

    process, base_url = _start_subprocess_server(latency=0.0)
    try:
        resumed = Judge(JudgeConfig(base_url=base_url, **config)).map(ask_plain, items)
        assert _server_stats(base_url) == len(failed)  # only the unanswered requests are sent
    finally:
        process.terminate()
        process.wait()
    assert [r.value for r in resumed] == [f"echo: question {i}" for i in items]
    assert [i for i, r in enumerate(resumed) if r.cached] == answered


def test_ask_is_thread_safe_with_a_shared_cache_across_judges(tmp_path):
    with LocalJudgeServer(latency=0.01) as server:
        judges = [make_judge(server, tmp_path, concurrency=4) for _ in range(2)]
        results: list = [None] * 60

        def worker(offset: int) -> None:
            for index in range(offset, 60, 6):
                judge = judges[index % 2]
                results[index] = judge.ask(Request([{"role": "user", "content": f"q{index % 30}"}])).value

        threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == [f"echo: q{i % 30}" for i in range(60)]
    assert 30 <= server.request_count <= 60  # each distinct question paid at most once per racing pair


def test_a_broken_cache_is_counted_and_reported_once_and_judging_goes_on(tmp_path, caplog):
    import sqlite3

    with LocalJudgeServer() as server:
        judge = make_judge(server, tmp_path)
        with sqlite3.connect(tmp_path / "cache.sqlite") as connection:
            connection.execute("DROP TABLE replies")
        results = judge.map(ask_plain, range(5))
    assert [r.value for r in results] == [f"echo: question {i}" for i in range(5)]
    assert judge.stats.cache_errors == 10  # each read and each write: a rerun would pay again
    errors = [record for record in caplog.records if "judge cache" in record.getMessage()]
    assert len(errors) == 1 and errors[0].levelname == "ERROR" and "LMMS_VR_JUDGE_CACHE" in errors[0].getMessage()


_RANK_SCRIPT = """
import sys
from lmms_video_reasoning.judges import Judge, JudgeConfig
from lmms_video_reasoning.utils.core.ask import Request
base_url, cache, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
judge = Judge(JudgeConfig(model="m", base_url=base_url, cache_path=cache, concurrency=8, timeout=5))
results = judge.map(lambda i, ask: ask(Request([{"role": "user", "content": f"q{i}"}])), range(30))
assert all(r.ok and r.value == f"echo: q{i}" for i, r in enumerate(results)), results
print(judge.stats.calls, judge.stats.cache_hits)
"""


def test_concurrent_processes_share_one_cache(tmp_path):
    import sqlite3

    cache = tmp_path / "cache.sqlite"
    with LocalJudgeServer(latency=0.02) as server:
        ranks = [
            subprocess.Popen([sys.executable, "-c", _RANK_SCRIPT, server.base_url, str(cache), str(rank)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for rank in range(2)
        ]
        outputs = [rank.communicate(timeout=60) for rank in ranks]
        assert [rank.returncode for rank in ranks] == [0, 0], [err[-2000:] for _out, err in outputs]
        with sqlite3.connect(cache) as connection:
            assert connection.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 30
        # A third run (e.g. the resumed job) is served entirely from the shared cache.
        before = server.request_count
        rerun = subprocess.run([sys.executable, "-c", _RANK_SCRIPT, server.base_url, str(cache), "2"], capture_output=True, text=True, timeout=60)
        assert rerun.returncode == 0 and rerun.stdout.split() == ["0", "30"]
        assert server.request_count == before


def test_bad_requests_fail_fast_with_a_clear_error(tmp_path):
    with LocalJudgeServer() as server:
        judge = make_judge(server, tmp_path)
        with pytest.raises(ValueError, match="base64 data URLs"):
            judge.ask(Request([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": b"raw bytes"}}]}]))
        with pytest.raises(ValueError, match="non-empty list"):
            judge.ask(Request([]))
        assert server.request_count == 0


def test_a_bad_request_fails_that_item_only(tmp_path):
    # One request the endpoint rejects (e.g. a 1 MB response past the judge's context) must
    # not stop the batch: that item is a counted judge failure, not a configuration error.
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(by_request={3: "400"})) as server:
        judge = make_judge(server, tmp_path, concurrency=1)
        results = judge.map(lambda item, ask: ask(Request([{"role": "user", "content": f"q{item}"}])), range(6))
    failed = [r for r in results if not r.ok]
    assert len(failed) == 1 and failed[0].error.startswith("http 400") and "context length" in failed[0].error
    assert sum(r.ok for r in results) == 5 and judge.stats.retries == 0


def test_a_judge_that_rejects_every_request_is_a_configuration_error(tmp_path):
    with LocalJudgeServer(verdict_responder, faults=FaultPlan(rate=1.0, kinds=("400",))) as server:
        judge = make_judge(server, tmp_path, concurrency=1)
        with pytest.raises(JudgeConfigError, match="HTTP 400 .*LMMS_VR_JUDGE_MODEL"):
            judge.map(lambda item, ask: ask(Request([{"role": "user", "content": f"q{item}"}])), range(40))
        assert server.request_count < 40
