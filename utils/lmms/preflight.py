"""Checks made when lmms-eval loads a task, so a run fails in seconds, before generation, not after.

A GPU run that meets a missing video at document 900, or a judge it cannot reach after
generating everything, has spent hours for nothing. What can be checked cheaply is checked
when lmms-eval loads the task's documents (its `process_docs` hook), once per process:

- the output folder (`--output_path`) can be written;
- the data root holds every file the task needs and each video decodes (the checks of
  `lmms-vr prepare --verify-only`, with the tasks' own resolvers; skipped for tasks without
  visuals and for the replay model, which reads no video);
- the judge, for tasks that need one: the configuration is valid, the endpoint answers, the
  key is accepted and the model is one the endpoint serves. Not checked with `--predict_only`
  (judge later). With no judge configured the run goes on and says, before generating, that
  its judged metrics will be NaN until `lmms-vr score` judges them.

A failed check ends the process with one message naming the cause and the fix
(`PreflightFailed`, a SystemExit: lmms-eval retries task downloads on any Exception, which
would bury the message under a minute of retries and a RetryError). `LMMS_VR_PREFLIGHT=off`
skips the checks (e.g. a `--limit` run on a partial data root). Outside an lmms-eval run
(`lmms-vr score`, tests calling the hooks) nothing is checked and errors stay ordinary exceptions.

What is not checked here is counted, never fatal: a judge that fails during the run is handled
by the judge's circuit breaker and the failure share (`judges.failure_share`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.roots import DataError, DataSource

log = logging.getLogger("lmms_video_reasoning.preflight")

PREFLIGHT_ENV = "LMMS_VR_PREFLIGHT"
PREFLIGHT = settings.declare(PREFLIGHT_ENV, "bool", True, "checks at task load (data, media, output folder, judge); off skips them")
# Models that never read a video: this suite's replay model scores predictions made elsewhere,
# where the videos may not be (docs/running.md, "Predictions from another stack").
MODELS_WITHOUT_MEDIA = ("vr_replay",)
PROBE_TIMEOUT_S = 10.0
_OFF = ("0", "off", "false", "no")

_lock = threading.Lock()
_done: dict[tuple, str | None] = {}  # check -> failure message (None: passed), once per process
_suspended = threading.local()


class PreflightFailed(SystemExit):
    """A task cannot run as set up; raised before generation with the cause and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(f"lmms-video-reasoning: cannot start: {message}")


@contextlib.contextmanager
def off() -> Iterator[None]:
    """No checks inside the block (`lmms-vr score` rebuilding documents)."""
    previous = getattr(_suspended, "value", False)
    _suspended.value = True
    try:
        yield
    finally:
        _suspended.value = previous


def active() -> bool:
    """Inside an lmms-eval run, checks not switched off."""
    if not PREFLIGHT.read() or getattr(_suspended, "value", False):
        return False
    return "lmms_eval.evaluator" in sys.modules


def cli_option(name: str) -> str | None:
    """The value of an lmms-eval command-line option (`--name value` or `--name=value`), else None."""
    argv = sys.argv[1:]
    for index, item in enumerate(argv):
        if item == name and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return None


def predict_only() -> bool:
    """`--predict_only`: generation only, judged later with `lmms-vr score`."""
    return "--predict_only" in sys.argv[1:]


def task_load(benchmark: str, load: Callable[[], object], media: "MediaCheck | None" = None,
              judge: object | None = None) -> object:
    """Run a `process_docs` body with the checks around it (see the module doc).

    `load()` builds the documents; `media` the task's media check, None for tasks without visuals;
    `judge` the judge the task needs (its `JudgeDefaults`, or a registered benchmark's name; None: no judge).
    """
    if not active():
        return load()
    started = time.monotonic()
    try:
        docs = load()
    except DataError as error:  # annotations missing or broken: say it once, now
        raise PreflightFailed(str(error)) from None
    _once(("output", cli_option("--output_path")), check_output_folder)
    if media is not None and cli_option("--model") not in MODELS_WITHOUT_MEDIA:
        _once(("media", benchmark, media.key), lambda: check_media(media))
    if judge is not None and not predict_only():
        _once(("judge", judge), lambda: check_judge(judge))
    log.info("%s: preflight checks passed in %.1f s", benchmark, time.monotonic() - started)
    return docs


def _once(key: tuple, check: Callable[[], str | None]) -> None:
    """Run a check once per process; a failure (its message) is raised every time it is asked."""
    with _lock:
        if key not in _done:
            _done[key] = check()
        failure = _done[key]
    if failure:
        raise PreflightFailed(failure)


def check_output_folder() -> str | None:
    folder = cli_option("--output_path")
    if not folder:
        return None
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".lmms_vr_write_check_"):
            pass
    except OSError as error:
        return (f"the output folder {path} cannot be written ({error.strerror or error}); give another --output_path, "
                "so that the samples and results of the run reach disk")
    return None


def check_media(media: "MediaCheck") -> str | None:
    """Every required file present and decodable, as `lmms-vr prepare --verify-only` checks it."""
    from lmms_video_reasoning.utils.data import media_index  # not `prepare`: the upstream export has no registry

    started = time.monotonic()
    kinds = media.kinds()
    reports = media_index.verify(kinds)
    failing = [report for report in reports if report.fails]
    checked = sum(len(kind.items) for kind in kinds)
    log.info("%s: %d media files checked in %.1f s", media.source.benchmark, checked, time.monotonic() - started)
    if not failing:
        return None
    source = media.source
    lines = []
    for report in failing:
        bad = report.missing + report.unusable
        lines.append(f"{len(report.missing)} {report.kind.name} missing and {len(report.unusable)} unusable of "
                     f"{len(report.kind.items)}, e.g. {bad[0]}")
    return (f"the {source.benchmark} data root is incomplete: " + "; ".join(lines) + f". Nothing was generated. Fix it with "
            f"`{source.prepare_command}` (`--verify-only` lists every file), or set {source.root_env} to a complete "
            f"copy; {PREFLIGHT_ENV}=off skips this check (e.g. a --limit run on a partial root)")


def check_judge(judge: object) -> str | None:
    """The judge's configuration, endpoint, key and model, from one GET /models."""
    from lmms_video_reasoning.judges import JudgeConfig, JudgeConfigError
    from lmms_video_reasoning.judges.config import judge_name

    benchmark = judge_name(judge)
    try:
        config = JudgeConfig.from_env(judge)
    except (JudgeConfigError, ValueError) as error:
        return f"the {benchmark} judge is misconfigured: {error}. Or run with --predict_only and judge later with `lmms-vr score`"
    from lmms_video_reasoning.judges.config import host_judge

    host = host_judge()
    if config is not None and host is not None and not host.started:
        # lmms-eval starts its judge server after generation: nothing to reach yet
        log.info("the %s judge is %s at %s (model %s), started by lmms-eval after generation; not checked now",
                 benchmark, host.source, config.endpoint, config.model)
        return None
    if config is None:
        from lmms_video_reasoning.judges.config import not_configured_message

        log.warning("%s Generating anyway: the samples are kept, and `lmms-vr score <output_path>` judges them later.",
                    not_configured_message(judge))
        return None
    problem = probe_endpoint(config)
    if problem:
        return (f"the {benchmark} judge {config.model!r} at {config.endpoint} {problem}. Nothing was generated. Fix the "
                f"judge ({config.base_url_env}, {config.key_env}, {config.model_env}), or run with --predict_only and "
                "judge later with `lmms-vr score <output_path>`")
    return None


def probe_endpoint(config) -> str | None:
    """Why the endpoint cannot judge (unreachable, key refused, model not served), or None."""
    import httpx

    from lmms_video_reasoning.judges.config import DUMMY_API_KEY, OPENAI_DEFAULT_BASE_URL, connect_error_reason

    base = (config.base_url or OPENAI_DEFAULT_BASE_URL).rstrip("/")
    headers = {"Authorization": f"Bearer {config.api_key or DUMMY_API_KEY}"}
    try:
        response = httpx.get(base + "/models", headers=headers, timeout=min(config.timeout, PROBE_TIMEOUT_S))
    except httpx.ConnectError as error:
        return f"cannot be reached: {connect_error_reason(error, config.endpoint)}"
    except httpx.TimeoutException:
        return f"did not answer GET /models within {PROBE_TIMEOUT_S:g} s"
    except httpx.HTTPError as error:
        return f"cannot be reached ({type(error).__name__})"
    if response.status_code in (401, 403):
        return f"refused the API key (HTTP {response.status_code} on GET /models)"
    if response.status_code != 200:
        return None  # some servers have no model list: reachable is what can be known
    try:
        served = [str(entry["id"]) for entry in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return None
    from lmms_video_reasoning.judges.engine import same_model

    if served and not any(same_model(config.model, name) or same_model(name, config.model) for name in served):
        shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
        return f"does not serve that model (it lists {shown})"
    return None


@dataclass(frozen=True)
class MediaCheck:
    """What a task's media check reads: its data source and its media kinds (`data.media_kinds`,
    resolved when checked); `key` tells checks of one process apart (e.g. the split)."""

    source: DataSource
    kinds: Callable[[], Sequence]
    key: str = ""
