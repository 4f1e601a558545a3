"""Shared fixtures: the generated sample benchmark, the lmms-eval CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/lmms_cli.py

from reference_data import PROTOCOL_DATA  # noqa: E402


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """`tests/reference/`: the committed official demo and real annotation samples (their sources
    and sha256 in its README.md and manifest.json); the official prompts are `reference_data.prompt_dir`."""
    return PROTOCOL_DATA


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    """The sample benchmark for all three benchmarks, generated once per test session."""
    from lmms_video_reasoning.utils.tools.sample import write_sample

    out = tmp_path_factory.mktemp("sample")
    write_sample(out)
    return out


@pytest.fixture(scope="session")
def sample_env(sample_dir) -> dict[str, str]:
    """Environment variables pointing the tasks at the sample benchmark."""
    from lmms_video_reasoning.utils.tools.sample import env_for

    return env_for(sample_dir)
