"""Shared fixtures: the generated sample benchmark, the lmms-eval CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/lmms_cli.py

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
if not REFERENCE.is_dir():  # CI: a fresh clone with shared/ beside it
    REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """`../shared/reference`: official prompts and real annotation samples."""
    if not REFERENCE.is_dir():
        pytest.fail(f"shared reference folder not found at {REFERENCE}")
    return REFERENCE


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
