"""Shared LLM-judge engine: concurrent, cached, resumable, cost-accounted judging (issue 3).

See judges/README.md for configuration (environment variables) and failure semantics.
"""

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError
from lmms_video_reasoning.judges.engine import (
    NOT_COMPUTED,
    CacheOnlyJudge,
    Judge,
    JudgeRequest,
    JudgeResult,
    get_judge,
    cache_reader,
)


def __getattr__(name: str):
    # Lazy, so `python -m lmms_video_reasoning.judges.local_server` does not import the
    # module twice (runpy warns about that).
    if name in ("LocalJudgeServer", "FaultPlan"):
        from lmms_video_reasoning.judges import local_server

        return getattr(local_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NOT_COMPUTED",
    "CacheOnlyJudge",
    "FaultPlan",
    "Judge",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeRequest",
    "JudgeResult",
    "LocalJudgeServer",
    "get_judge",
    "parsing",
    "cache_reader",
]
