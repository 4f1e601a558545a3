"""llm_judge's reply cache (LMMS_EVAL_JUDGE_CACHE) and its judge requests counted in results["usage"],
through synchronous, asynchronous and batched calls."""

import asyncio

import pytest

from lmms_eval.llm_judge import ProviderFactory, Request, Response, ServerConfig, get_server
from lmms_eval.llm_judge.base import AsyncServerInterface, ServerInterface
from lmms_eval.models.model_utils.usage_metrics import reset_usage_metrics, summarize_usage_metrics

SENT = []  # the prompts that reached a provider


def reply(request):
    prompt = request.messages[-1]["content"]
    SENT.append(prompt)
    if "time out" in prompt:
        raise TimeoutError("judge timed out")
    if "refuse" in prompt:
        return Response(content="", model_used="judge-model", success=False, error_message="refused")
    return Response(content=f"1 (verdict on {prompt})", model_used="judge-model")


class SyncJudge(ServerInterface):
    def is_available(self):
        return True

    def evaluate(self, request):
        return reply(request)


class AsyncJudge(AsyncServerInterface):
    def is_available(self):
        return True

    async def evaluate_async(self, request):
        await asyncio.sleep(0)
        return reply(request)


ProviderFactory.register_provider("test_sync_judge", SyncJudge)
ProviderFactory.register_provider("test_async_judge", AsyncJudge)
CONFIG = ServerConfig(model_name="judge-model")


def request(prompt, temperature=0.0):
    return Request(messages=[{"role": "user", "content": prompt}], config=ServerConfig(model_name="judge-model", temperature=temperature))


def judge_requests():
    return summarize_usage_metrics()["judge_requests"]["total"]


@pytest.fixture(autouse=True)
def fresh_usage(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_JUDGE_CACHE", str(tmp_path / "judge.sqlite"))
    reset_usage_metrics()
    SENT.clear()
    yield
    reset_usage_metrics()


def test_a_repeated_request_is_answered_from_the_cache_and_counted():
    server = get_server("test_sync_judge", CONFIG)
    assert isinstance(server, SyncJudge)  # the provider itself, not a wrapper
    first = server.evaluate(request("Is 2 + 2 = 4?"))
    assert server.evaluate(request("Is 2 + 2 = 4?")).content == first.content and SENT == ["Is 2 + 2 = 4?"]
    server.evaluate(request("Is 2 + 2 = 4?", temperature=1.0))  # other sampling settings: another call
    binary = server.evaluate_binary(question="Q", answer="A", prediction="A")  # a helper: through evaluate
    assert server.evaluate_binary(question="Q", answer="A", prediction="A") == binary and len(SENT) == 3
    rerun = get_server("test_sync_judge", CONFIG)  # a later run, the same file
    assert rerun.evaluate(request("Is 2 + 2 = 4?")).content == first.content and len(SENT) == 3
    assert judge_requests() == {"answered": 3, "cached": 3}


def test_async_and_batched_requests_are_cached_and_counted_once():
    server = get_server("test_async_judge", CONFIG)
    first = asyncio.run(server.evaluate_batch([request("a"), request("b")]))
    again = asyncio.run(server.evaluate_batch([request("a"), request("b"), request("c")]))
    assert [r.content for r in again[:2]] == [r.content for r in first] and SENT == ["a", "b", "c"]
    asyncio.run(server.evaluate_binary_batch_async(["Q1", "Q1"], ["A", "A"], ["A", "A"]))
    assert len(SENT) == 5  # the same request twice in one batch: both looked up before either is answered
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # AsyncServerInterface.evaluate runs evaluate_async on the current loop
    try:
        assert server.evaluate(request("c")).content == again[2].content  # synchronous, from the cache
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert judge_requests() == {"answered": 5, "cached": 3}


def test_failures_are_counted_by_reason_and_never_cached():
    server = get_server("test_sync_judge", CONFIG)
    for _ in range(2):
        with pytest.raises(TimeoutError):
            server.evaluate(request("time out, please"))
        assert not server.evaluate(request("refuse it")).success
    assert len(SENT) == 4  # each failure asked again
    assert judge_requests() == {"failed: TimeoutError": 2, "failed: unsuccessful response": 2}
    usage = summarize_usage_metrics()["judge_requests"]["by_task"]
    assert usage == {"_unknown": {"failed: TimeoutError": 2, "failed: unsuccessful response": 2}}  # no task context here
    reset_usage_metrics()
    assert "judge_requests" not in summarize_usage_metrics()


def test_without_the_variable_nothing_is_written_and_requests_are_still_counted(tmp_path, monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_JUDGE_CACHE")
    monkeypatch.chdir(tmp_path)
    server = get_server("test_sync_judge", CONFIG)
    server.evaluate(request("Uncached?"))
    server.evaluate(request("Uncached?"))
    assert len(SENT) == 2 and not list(tmp_path.iterdir())
    assert judge_requests() == {"answered": 2}
