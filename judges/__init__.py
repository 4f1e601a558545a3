"""Shared LLM-judge engine: concurrent, cached, resumable, cost-accounted judging (issue 3).

A judge answers `utils.core.ask.Request`s with `Result`s (the one request type of benchmark code,
the engine, its cache and the batch flow). See judges/README.md for configuration (environment
variables) and failure semantics.
"""

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError
from lmms_video_reasoning.judges.engine import NOT_COMPUTED, CacheOnlyJudge, Judge
from lmms_video_reasoning.judges.process_registry import get_judge, scoring_judge


def __getattr__(name: str):
    # Lazy, so `python -m lmms_video_reasoning.judges.local_server` does not import the
    # module twice (runpy warns about that).
    if name == "LocalJudgeServer":
        from lmms_video_reasoning.judges import local_server

        return local_server.LocalJudgeServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ("NOT_COMPUTED", "CacheOnlyJudge", "Judge", "JudgeConfig", "JudgeConfigError", "LocalJudgeServer", "get_judge", "parsing",
           "scoring_judge")
