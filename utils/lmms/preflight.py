"""Checks that make an lmms-eval run of this suite's tasks fail in seconds, before generation.

`start` (touchpoint `start-up-check`, before the model loads; else at the first task load): every
setting is accepted (even with LMMS_VR_PREFLIGHT=off), each benchmark's root variable names a folder,
`--output_path` can be written; `--tasks NAME` run from a folder holding `./NAME` runs the task NAME,
with a WARNING. `task_load` (a task's `process_docs`), once per process: the output folder has room
for the documents loaded so far; the data root holds every file the task needs and each video
decodes (not for the replay model); the judge answers with its model and its cache can be written
(not with `--predict_only`; an unconfigured judge lets the run go on, its judged metrics NaN).

A failed check ends the process with one message naming each cause and its fix (`PreflightFailed`,
a SystemExit: lmms-eval retries task loading on any Exception); `load_tasks` names every failing
task. The checks `lmms-vr doctor` shows too return `Finding`s. Outside an lmms-eval run nothing is checked.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from lmms_video_reasoning.utils.core import files, registry, settings
from lmms_video_reasoning.utils.core.roots import DataError, DataSource, root_problem

log = logging.getLogger("lmms_video_reasoning.preflight")

PREFLIGHT_ENV = "LMMS_VR_PREFLIGHT"
PREFLIGHT = settings.declare(PREFLIGHT_ENV, "bool", True, "checks at task load (data, media, output folder, judge); off skips them")
# Models that never read a video (the replay model scores predictions made elsewhere).
MODELS_WITHOUT_MEDIA = ("vr_replay",)
PROBE_TIMEOUT_S = 10.0

_lock = threading.RLock()  # re-entrant: a check must never deadlock on a check it reaches
_done: dict[tuple, "str | list[str] | None"] = {}  # check -> failure message(s) (None, []: passed), once per process
_suspended = threading.local()
PREFIX = "lmms-video-reasoning: cannot start: "


class PreflightFailed(SystemExit):
    """A run cannot go on as set up; raised before generation with each cause and its fix."""

    def __init__(self, problems: "str | Sequence[str]") -> None:
        self.problems = [problems] if isinstance(problems, str) else list(dict.fromkeys(problems))
        if len(self.problems) == 1:
            super().__init__(PREFIX + self.problems[0])
        else:
            super().__init__(f"{PREFIX}{len(self.problems)} problems, nothing was generated:"
                             + "".join(f"\n  - {problem}" for problem in self.problems))


@contextlib.contextmanager
def off() -> Iterator[None]:
    """No checks inside the block (`lmms-vr score` rebuilding documents)."""
    previous = getattr(_suspended, "value", False)
    _suspended.value = True
    try:
        yield
    finally:
        _suspended.value = previous


def enabled() -> bool:
    """LMMS_VR_PREFLIGHT (an invalid value counts as on: the start-up check reports it)."""
    try:
        return PREFLIGHT.read()
    except settings.SettingError:
        return True


def active() -> bool:
    return enabled() and not getattr(_suspended, "value", False) and "lmms_eval.evaluator" in sys.modules


def cli_option(name: str) -> str | None:
    """The value of an lmms-eval command-line option (`--name value` or `--name=value`), else None."""
    argv = sys.argv[1:]
    for index, item in enumerate(argv):
        if item == name and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return None


def start(tasks: list | None, cli_tasks: str | None = None) -> list | None:
    """The start-up check of a run of `tasks` (`simple_evaluate`'s: names or configs); the tasks to
    run (see the module doc: a folder named like the task). PreflightFailed naming every problem."""
    tasks = _folder_clash(tasks, cli_tasks if cli_tasks is not None else cli_option("--tasks"))
    if getattr(_suspended, "value", False):
        return tasks
    # this suite's benchmarks that the run's tasks belong to, in the order of the tasks
    names = [(task.get("task") or task.get("group")) if isinstance(task, dict) else task for task in tasks or []]
    owners = [registry.owner(name) for name in names if isinstance(name, str)]
    benchmarks = list({b.name: b for b in owners if b is not None}.values())
    if benchmarks:
        _once(("start", tuple(b.name for b in benchmarks)), lambda: startup_problems(benchmarks))
    return tasks


def startup_problems(benchmarks: Sequence) -> list[str]:
    started = time.monotonic()
    registry.declare_all_settings(benchmarks)  # the suite's settings and the run's benchmarks'
    found = setting_findings()
    if enabled():
        found += [data_finding(benchmark) for benchmark in benchmarks if benchmark.data_module is not None]
    problems = [finding.detail for finding in found if finding.state == OFF]
    if enabled() and (output := check_output_folder()):
        problems.append(output)
    log.info("start-up checks (%d settings, %s) done in %.2f s", len(settings.declared()),
             ", ".join(b.name for b in benchmarks), time.monotonic() - started)
    return problems


def _folder_clash(tasks: list | None, cli_tasks: str | None) -> list | None:
    """`--tasks NAME` where ./NAME is a folder without task YAMLs and NAME one of our tasks: [NAME]."""
    if tasks or not cli_tasks or not os.path.isdir(cli_tasks) or registry.owner(cli_tasks) is None:
        return tasks
    folder = os.path.abspath(cli_tasks)
    log.warning("lmms-video-reasoning: --tasks %s: the current folder holds a folder %s, which lmms-eval reads as a "
                "folder of task YAMLs (it holds none, so lmms-eval found no tasks). Running this suite's %s instead; run "
                "from another folder to avoid this.", cli_tasks, folder, cli_tasks)
    return [cli_tasks]


def load_tasks(load: Callable[[list], object], tasks: list) -> object:
    """lmms-eval's `get_task_dict(tasks)`; when a check fails, each of our tasks is loaded alone so
    that the one message names every failing one."""
    try:
        return load(tasks)
    except PreflightFailed as failed:
        ours = registry.task_names()
        names = [task for task in tasks if isinstance(task, str) and task in ours] if isinstance(tasks, list) else []
        if len(names) < 2:
            raise
        problems: list[str] = []
        with _lock:
            _documents.clear()  # each task is loaded again, alone: counted again
        for name in names:
            try:
                load([name])
            except PreflightFailed as each:
                problems.extend(each.problems)
        raise PreflightFailed(problems or failed.problems) from None


def task_load(source: DataSource, load: Callable[[], object], media_kinds: Callable[[], Sequence] | None,
              judge: bool, key: str = "") -> object:
    """Run a `process_docs` body (`load()`) of `source`'s benchmark with the checks around it: its
    media kinds (resolved when checked; None: no visuals), its judge; `key` tells checks of one
    process apart (e.g. the split)."""
    if not active():
        return load()
    started, benchmark = time.monotonic(), source.benchmark
    # the start-up checks (the output folder's among them), when lmms-eval's start did not run them
    _once(("start", (benchmark,)), lambda: startup_problems([registry.get(benchmark)]))
    try:
        docs = load()
    except DataError as error:  # annotations missing or broken: say it once, now
        raise PreflightFailed(str(error)) from None
    with _lock:
        _documents.append(run_documents(len(docs)) if hasattr(docs, "__len__") else 0)
        documents = sum(_documents)
    _once(("space", cli_option("--output_path"), documents), lambda: check_output_space(documents))
    if media_kinds is not None and cli_option("--model") not in MODELS_WITHOUT_MEDIA:
        _once(("media", benchmark, key), lambda: check_media(source, media_kinds()))
    if judge and "--predict_only" not in sys.argv[1:]:
        _once(("judge", benchmark), lambda: check_judge(benchmark))
    log.info("%s: preflight checks passed in %.1f s", benchmark, time.monotonic() - started)
    return docs


def _once(key: tuple, check: Callable[[], "str | list[str] | None"]) -> None:
    """A check run once per process: its failure message(s) raised each time it is asked."""
    with _lock:
        if key not in _done:
            _done[key] = check()
        failure = _done[key]
    if failure:
        raise PreflightFailed(failure)


def unwritable(folder: Path) -> str | None:
    """Why 4 KiB cannot be written to a probe file in `folder` (made if needed), synced and removed; None if it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".lmms_vr_write_check_") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as error:
        return str(error.strerror or error)
    return None


def _output_folder() -> Path | None:
    folder = cli_option("--output_path")
    return Path(folder).expanduser() if folder else None


def check_output_folder() -> str | None:
    path = _output_folder()
    problem = unwritable(path) if path is not None else None
    return (f"the output folder {path} cannot be written ({problem}; {files.free_space_text(path)}); give another "
            "--output_path, so that the samples and results of the run reach disk") if problem else None


# What a run writes per document, at least (lmms-eval's samples line, our records and results;
# measured on the sample: samples lines of 1.8 KiB (cg_bench_open) to 7.6 KiB (vr_bench) per document
# with short replies, the records about as much again). A floor, not a forecast: it refuses a folder
# that cannot hold even that; a disk that fills anyway keeps the records (`aggregation`).
BYTES_PER_DOCUMENT = 4 * 1024
_documents: list[int] = []  # documents of each task loaded in this process (their sum: the run's)


def run_documents(documents: int) -> int:
    """The documents lmms-eval will run of a task that has `documents` (its `--limit`: a count, or a fraction < 1)."""
    try:
        value = float(cli_option("--limit"))
    except (TypeError, ValueError):  # no --limit, or one lmms-eval refuses itself
        return documents
    return min(documents, math.ceil(documents * value) if value < 1 else int(value))


def check_output_space(documents: int) -> str | None:
    """`--output_path` has room for what a run of `documents` documents writes, at least."""
    path = _output_folder()
    free, needed = (files.free_bytes(path) if path else None), documents * BYTES_PER_DOCUMENT
    if free is None or free >= needed:
        return None
    return (f"the output folder {path} has {files.size_text(free)} free, less than the {files.size_text(needed)} a run of "
            f"{documents} documents writes at least ({files.size_text(BYTES_PER_DOCUMENT)} each: samples, records, "
            f"results). Nothing was generated. Free space there or give another --output_path ({PREFLIGHT_ENV}=off skips "
            "this check)")


def cache_problem(path: Path) -> str | None:
    """Why the judge cache cannot be written: its folder (SQLite writes a journal beside it), or the
    file, opened for appending (so not changed)."""
    problem = unwritable(path.parent)
    if problem:
        return f"its folder {path.parent} cannot be written ({problem})"
    try:
        if path.exists():
            path.open("ab").close()
    except OSError as error:
        return f"{path} cannot be written ({error.strerror or error})"
    return None


def check_media(source: DataSource, kinds: Sequence) -> str | None:
    from lmms_video_reasoning.utils.data import media_index  # not `prepare`: the upstream export has no registry

    started = time.monotonic()
    failing = [report for report in media_index.verify(kinds) if report.fails]
    log.info("%s: %d media files checked in %.1f s", source.benchmark, sum(len(kind.items) for kind in kinds),
             time.monotonic() - started)
    if not failing:
        return None
    lines = [f"{len(report.missing)} {report.kind.name} missing and {len(report.unusable)} unusable of "
             f"{len(report.kind.items)}, e.g. {(report.missing + report.unusable)[0]}" for report in failing]
    return (f"the {source.benchmark} data root is incomplete: " + "; ".join(lines) + f". Nothing was generated. Fix it with "
            f"`{source.prepare_command}` (`--verify-only` lists every file), or set {source.root_env} to a complete "
            f"copy; {PREFLIGHT_ENV}=off skips this check (e.g. a --limit run on a partial root)")


def check_judge(judge: str) -> str | None:
    """`judge_finding` at task load: OFF ends the run; a judge not configured lets it go on."""
    from lmms_video_reasoning.judges.config import not_configured_message

    finding = judge_finding(judge)
    if finding.state == WARN:
        log.warning("%s Generating anyway: the samples are kept, and `lmms-vr score <output_path>` judges them later.",
                    not_configured_message(judge))
    elif finding.state == INFO:
        log.info("%s", finding.detail)
    return f"{finding.detail}. Nothing was generated. {finding.fix}" if finding.state == OFF else None


# ---------------------------------------------------------------------- checks `lmms-vr doctor` shows too

OK, OFF, WARN, INFO = "ok", "off", "warn", "info"
JUDGE_LATER = "or run with --predict_only and judge later with `lmms-vr score <output_path>`"


@dataclass
class Finding:
    """One check's outcome: OFF a run cannot go on, WARN its judged metrics would be NaN, OK / INFO noted."""

    topic: str
    state: str
    detail: str
    fix: str = ""


def setting_findings() -> list[Finding]:
    """Each declared setting that is set (OFF: a value not accepted; the error names the accepted ones)."""
    found = []
    for setting in settings.declared():
        try:
            value = setting.read()
        except settings.SettingError as error:
            found.append(Finding(f"setting {setting.name}", OFF, str(error), f"fix or unset {setting.name}"))
            continue
        if setting.is_set():
            found.append(Finding(f"setting {setting.name}", INFO, repr(value)))
    return found


def data_finding(benchmark) -> Finding:
    """The benchmark's root variable: unset (the Hub), a folder, or not one (OFF)."""
    source, topic = benchmark.data().SOURCE, f"data: {benchmark.name}"
    root = os.environ.get(source.root_env, "").strip()
    problem = root_problem(source)
    if problem:
        return Finding(topic, OFF, problem, source.prepare_command)
    if not root:
        return Finding(topic, INFO, f"{source.root_env} unset: the Hub ({source.hub_repo})", source.prepare_command)
    return Finding(topic, OK, f"{source.root_env}={root}")


def judge_finding(judge: object, network: bool = True) -> Finding:
    """The judge `judge` (`JudgeDefaults` or a benchmark's name): its configuration, its cache, and its
    endpoint, key and model from one GET /models (`network`)."""
    from lmms_video_reasoning.judges import JudgeConfig, JudgeConfigError
    from lmms_video_reasoning.judges.config import benchmark_defaults, host_judge, judge_name

    benchmark = judge_name(judge)
    topic = f"judge: {benchmark}"
    try:
        config = JudgeConfig.from_env(judge)
    except (JudgeConfigError, ValueError) as error:
        return Finding(topic, OFF, f"the {benchmark} judge is misconfigured: {error}",
                       f"Fix it (see `Judges` in the README), {JUDGE_LATER}")
    if config is None:
        defaults = benchmark_defaults(judge)
        return Finding(topic, WARN, f"not configured: judged metrics would be NaN (the official judge, {defaults.model}, "
                       f"needs {defaults.key_env})", f"set {defaults.key_env}, or LMMS_VR_JUDGE_BASE_URL / LMMS_VR_JUDGE_MODEL "
                       "for another endpoint (see the README); or judge later with `lmms-vr score`")
    cache = config.cache_path and cache_problem(config.cache_path)
    if cache:
        return Finding(topic, OFF, f"the {benchmark} judge cache cannot be used: {cache}", "Set LMMS_VR_JUDGE_CACHE to a "
                       f"writable file, or LMMS_VR_JUDGE_CACHE=off to judge without a cache (a run would end with NaN judged "
                       f"metrics), {JUDGE_LATER}")
    where = f"{config.model} at {config.endpoint}"
    host = host_judge()
    if host is not None and not host.started:  # lmms-eval starts its judge server after generation: nothing to reach yet
        return Finding(topic, INFO, f"the {benchmark} judge is {where} ({host.source}), started by lmms-eval after "
                       "generation; not checked now")
    if not network:
        return Finding(topic, INFO, f"{where} (not contacted: --no-network)")
    problem = probe_endpoint(config)
    if problem:
        return Finding(topic, OFF, f"the {benchmark} judge {config.model!r} at {config.endpoint} {problem}",
                       f"Fix the judge ({config.base_url_env}, {config.key_env}, {config.model_env}), {JUDGE_LATER}")
    return Finding(topic, OK, f"{where} answers")


def probe_endpoint(config) -> str | None:
    """Why the endpoint cannot judge (unreachable, key refused, model not served), or None."""
    import httpx

    from lmms_video_reasoning.judges.config import DUMMY_API_KEY, OPENAI_DEFAULT_BASE_URL, connect_error_reason
    from lmms_video_reasoning.judges.engine import same_model

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
    if served and not any(same_model(config.model, name) or same_model(name, config.model) for name in served):
        shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
        return f"does not serve that model (it lists {shown})"
    return None
