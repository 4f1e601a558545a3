"""llm_judge's reply cache and failure accounting, with providers registered for the test."""

import pytest

from lmms_eval.llm_judge import ProviderFactory, Request, Response, ServerConfig, ServerInterface, get_server, judge_stats


class CountingProvider(ServerInterface):
    calls = 0

    def is_available(self):
        return True

    def evaluate(self, request):
        CountingProvider.calls += 1
        return Response(content=f"verdict {CountingProvider.calls}", model_used="counting-judge")


class FailingProvider(CountingProvider):
    def evaluate(self, request):
        raise TimeoutError("judge timed out")


ProviderFactory.register_provider("cache_test_counting", CountingProvider)
ProviderFactory.register_provider("cache_test_failing", FailingProvider)


def ask(server, text, temperature=0.0):
    config = ServerConfig(model_name="judge-model", temperature=temperature)
    return server.evaluate(Request(messages=[{"role": "user", "content": text}], config=config))


def test_a_repeated_request_is_answered_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_JUDGE_CACHE", str(tmp_path / "judge.sqlite"))
    server = get_server("cache_test_counting", ServerConfig(model_name="judge-model"))
    before, hits = CountingProvider.calls, judge_stats()["cache_hits"]
    first = ask(server, "Is 2 + 2 = 4?")
    assert ask(server, "Is 2 + 2 = 4?").content == first.content  # the same reply, not a new call
    assert CountingProvider.calls - before == 1 and judge_stats()["cache_hits"] - hits == 1
    ask(server, "Is 2 + 2 = 4?", temperature=1.0)  # other sampling settings: another call
    assert CountingProvider.calls - before == 2
    rerun = get_server("cache_test_counting", ServerConfig(model_name="judge-model"))  # a later run, same file
    assert ask(rerun, "Is 2 + 2 = 4?").content == first.content and CountingProvider.calls - before == 2


def test_failures_are_counted_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_JUDGE_CACHE", str(tmp_path / "judge.sqlite"))
    server = get_server("cache_test_failing", ServerConfig(model_name="judge-model"))
    failed = judge_stats()["failures"]
    for _ in range(2):
        with pytest.raises(TimeoutError):
            ask(server, "Is the answer right?")
    stats = judge_stats()
    assert stats["failures"] - failed == 2 and stats["failure_reasons"]["TimeoutError"] >= 2


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_JUDGE_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    server = get_server("cache_test_counting", ServerConfig(model_name="judge-model"))
    before = CountingProvider.calls
    ask(server, "Uncached?")
    ask(server, "Uncached?")
    assert CountingProvider.calls - before == 2 and not list(tmp_path.iterdir())
