"""Shared fixtures: the generated sample benchmark, the lmms-eval CLI runner."""

from __future__ import annotations

import os
import sys
import textwrap
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


@pytest.fixture
def without_filelock_api(tmp_path) -> dict[str, str]:
    """The environment with filelock as 4.3 ships it to lmms-eval: `import filelock._api` (lmms-eval
    0.7.3's evaluator does, before the first document) fails, filelock's own relative imports work.
    A `sitecustomize.py` on PYTHONPATH installs it in every Python process started with it."""
    folder = tmp_path / "no_filelock_api"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent("""
        import builtins

        _import = builtins.__import__


        def _without_private_api(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and name == "filelock._api":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return _import(name, globals, locals, fromlist, level)


        builtins.__import__ = _without_private_api
    """))
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "LMMS_VR_CACHE": str(tmp_path / "cache")}


@pytest.fixture(autouse=True)
def _no_open_breaker_outlives_its_test():
    """A judge's circuit breaker lives as long as the process, per endpoint URL: within a real run
    that is the point, but tests reuse random loopback ports, so a breaker one test tripped would
    fail another test's judge on the same port at once. After a test that tripped one, the
    process's judges and breakers are forgotten."""
    yield
    from lmms_video_reasoning.judges import process_registry

    with process_registry._registry_lock:
        if any(key[0] == "breaker" and breaker.opened.is_set() for key, breaker in process_registry._shared.items()):
            process_registry._shared.clear()
