"""Shared LLM-judge engine: concurrent, cached, resumable, cost-accounted judging (issue 3).

See judges/README.md for configuration (environment variables) and failure semantics.
"""

from lmms_video_reasoning.judges import parsing
from lmms_video_reasoning.judges.config import JudgeConfig, JudgeConfigError
from lmms_video_reasoning.judges.engine import Judge, JudgeRequest, JudgeResult, JudgeStats, get_judge
from lmms_video_reasoning.judges.local_server import FaultPlan, LocalJudgeServer

__all__ = [
    "FaultPlan",
    "Judge",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeRequest",
    "JudgeResult",
    "JudgeStats",
    "LocalJudgeServer",
    "get_judge",
    "parsing",
]
